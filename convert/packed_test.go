package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

type packedFixture struct {
	dir     string
	src     plan.Source
	lengths []uint32
	docs    [][]int64
}

func newPackedFixture(t *testing.T, rows int) *packedFixture {
	t.Helper()
	f := &packedFixture{dir: featuretest.TokenFiles(t, rows)}
	var err error
	if f.src, err = source.Discover(context.Background(), []string{f.dir}); err != nil {
		t.Fatal(err)
	}
	if f.lengths, err = feature.TokenLengths(context.Background(), nil, f.src, "tokens", 2); err != nil {
		t.Fatal(err)
	}
	f.docs = featuretest.DuckDocs(t, f.dir)
	return f
}

// checkPackedShards reads every shard of out back and checks each packed
// row against DuckDB's documents: its tokens are the concatenation of the
// pieces its layout names (each a run of a document's tokens then the
// EOD), then the pad id; segment ids, positions and cu_seqlens follow the
// pieces. It returns, per epoch, how many times each document token was
// delivered in a non-pad slot.
func checkPackedShards(t *testing.T, f *packedFixture, p *plan.Plan, out string) [][][]int {
	t.Helper()
	pk := p.Packing
	lay, err := p.PackLayout(context.Background(), f.lengths, 0)
	if err != nil {
		t.Fatal(err)
	}
	L := pk.Length
	seen := make([][][]int, p.Config.Epochs)
	for e := range seen {
		seen[e] = make([][]int, len(f.docs))
		for d, toks := range f.docs {
			seen[e][d] = make([]int, len(toks)+1)
		}
		for r := 0; r < p.Config.WorldSize; r++ {
			rd, err := shardfmt.Open(filepath.Join(out, filepath.FromSlash(shardset.ShardPath(e, r))))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := shardfmt.TensorList(rd.Tensors()), fmt.Sprintf("[tokens I32 [%[1]d], tokens_segment_ids I32 [%[1]d], tokens_positions I32 [%[1]d], tokens_cu_seqlens I32 [] jagged]", L); got != want {
				t.Fatalf("tensors %s", got)
			}
			for k := 0; k < rd.NumBatches(); k++ {
				info, _ := rd.Batch(k)
				ids, err := rd.SampleIDs(k)
				if err != nil {
					t.Fatal(err)
				}
				want, _, _ := p.RankBatch(e, r, k, nil)
				if fmt.Sprint(ids) != fmt.Sprint(want) {
					t.Fatalf("epoch %d rank %d step %d: ids %v, plan %v", e, r, k, ids, want)
				}
				block, err := rd.Block(k)
				if err != nil {
					t.Fatal(err)
				}
				g := rd.Geometry()
				tok, seg, pos := g.Slab(block, 0, info.Count), g.Slab(block, 1, info.Count), g.Slab(block, 2, info.Count)
				cu, err := rd.Jagged(k, block, 3)
				if err != nil {
					t.Fatal(err)
				}
				for i, id := range ids {
					var wantTok, wantSeg, wantPos, wantCu []int64
					wantCu = append(wantCu, 0)
					for j, pc := range lay.Row(id) {
						stream := append(append([]int64(nil), f.docs[pc.Doc]...), *pk.EOD)
						for x := int(pc.Offset); x < int(pc.Offset+pc.Len); x++ {
							wantTok = append(wantTok, stream[x])
							wantSeg = append(wantSeg, int64(j+1))
							wantPos = append(wantPos, int64(x)-int64(pc.Offset))
							if i < info.Count-info.Pads {
								seen[e][pc.Doc][x]++
							}
						}
						wantCu = append(wantCu, int64(len(wantTok)))
					}
					for len(wantTok) < L {
						wantTok, wantSeg, wantPos = append(wantTok, pk.Pad), append(wantSeg, 0), append(wantPos, 0)
					}
					for x := 0; x < L; x++ {
						if got := featuretest.I32At(tok, i*L+x); got != wantTok[x] {
							t.Fatalf("epoch %d rank %d step %d row %d (slot %d) token %d: %d, want %d", e, r, k, id, i, x, got, wantTok[x])
						}
						if featuretest.I32At(seg, i*L+x) != wantSeg[x] || featuretest.I32At(pos, i*L+x) != wantPos[x] {
							t.Fatalf("row %d slot %d: segment id %d position %d, want %d %d", id, x, featuretest.I32At(seg, i*L+x), featuretest.I32At(pos, i*L+x), wantSeg[x], wantPos[x])
						}
					}
					lo := binary.LittleEndian.Uint64(cu.Offsets[8*i:])
					hi := binary.LittleEndian.Uint64(cu.Offsets[8*i+8:])
					if int(hi-lo) != len(wantCu) {
						t.Fatalf("row %d: %d cu_seqlens, want %v", id, hi-lo, wantCu)
					}
					for x := range wantCu {
						if got := featuretest.I32At(cu.Values, int(lo)+x); got != wantCu[x] {
							t.Fatalf("row %d: cu_seqlens[%d] = %d, want %v", id, x, got, wantCu)
						}
					}
				}
			}
			rd.Close()
		}
	}
	return seen
}

// TestRunPackedMatchesDuckDB converts a packed plan (split chunk, EOD,
// pad -1, small windows, two ranks, remainder pad) and checks every
// packed row against DuckDB's tokens, and that every token of every
// non-empty document (its EOD included) is delivered exactly once per
// epoch in a non-pad slot.
func TestRunPackedMatchesDuckDB(t *testing.T) {
	f := newPackedFixture(t, 600)
	cfg := plan.Config{Seed: 3, Epochs: 2, GlobalBatch: 6, WorldSize: 2, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}
	eod := int64(-7)
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 256, EOD: &eod, Pad: -1, Window: 50}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Packing.EmptyDocuments == 0 || p.Packing.Tokens <= uint64(p.Packing.Length)*10 {
		t.Fatalf("fixture too small: %+v", p.Packing)
	}
	out := filepath.Join(t.TempDir(), "out")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	seen := checkPackedShards(t, f, p, out)
	for e := range seen {
		for d, toks := range f.docs {
			for x, n := range seen[e][d] {
				want := 1
				if len(toks) == 0 {
					want = 0 // empty or null: no tokens, no EOD
				}
				if n != want {
					t.Fatalf("epoch %d: document %d token %d delivered %d times, want %d", e, d, x, n, want)
				}
			}
		}
	}
}

// TestRunPackedSplitNoneCountsDrops: with split none, documents longer
// than L are left out and counted; every other token is delivered once.
func TestRunPackedSplitNoneCountsDrops(t *testing.T) {
	f := newPackedFixture(t, 300)
	cfg := plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial}
	eod := int64(0)
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 256, Split: plan.SplitNone, EOD: &eod, Pad: 0}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	seen := checkPackedShards(t, f, p, out)
	var dropped, droppedTokens uint64
	for d, toks := range f.docs {
		want := 1
		if len(toks) == 0 {
			want = 0
		} else if len(toks)+1 > 256 {
			want = 0
			dropped++
			droppedTokens += uint64(len(toks) + 1)
		}
		for x, n := range seen[0][d] {
			if n != want {
				t.Fatalf("document %d token %d delivered %d times, want %d", d, x, n, want)
			}
		}
	}
	if dropped == 0 || p.Packing.DroppedDocuments != dropped || p.Packing.DroppedTokens != droppedTokens {
		t.Fatalf("dropped %d documents (%d tokens), the plan counts %d (%d)", dropped, droppedTokens, p.Packing.DroppedDocuments, p.Packing.DroppedTokens)
	}
}

// TestRunPackedRefusesChangedSourceAndBadSpec: a source whose token
// lengths differ from the plan's is refused before any shard is written;
// a spec that does not read the packed column, or a second tensor without
// a valid packed policy, is a spec error; a packed policy in a plan that
// packs nothing is a spec error too.
func TestRunPackedRefusesChangedSourceAndBadSpec(t *testing.T) {
	f := newPackedFixture(t, 120)
	cfg := plan.Config{Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop}
	lengths := append([]uint32(nil), f.lengths...)
	lengths[4]++ // as if the plan was made from other data
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 64}, lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o")}); !errors.Is(err, plan.ErrMismatch) {
		t.Fatalf("changed lengths: %v", err)
	}
	for _, s := range []*feature.Spec{
		{Tensors: []feature.TensorSpec{{Name: "x", Column: "id", DType: "I64"}}},
		{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "F32"}}},
		{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}, {Name: "id", Column: "id", DType: "I64"}}},
		{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}, {Name: "id", Column: "id", DType: "I64", Packed: &feature.PackedPolicy{Per: "row"}}}},
	} {
		if _, err := Run(context.Background(), Options{Plan: p, Spec: s, Output: filepath.Join(t.TempDir(), "o")}); !errors.Is(err, feature.ErrSpec) {
			t.Errorf("spec %+v: %v", s.Tensors, err)
		}
	}
	unpacked, err := plan.New(f.src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "id", Column: "id", DType: "I64", Packed: &feature.PackedPolicy{Per: feature.PackedPerToken}}}}
	if _, err := Run(context.Background(), Options{Plan: unpacked, Spec: s, Output: filepath.Join(t.TempDir(), "o")}); !errors.Is(err, feature.ErrSpec) || !strings.Contains(err.Error(), "packed policy") {
		t.Errorf("packed policy in an unpacked plan: %v", err)
	}
}

// TestRunPackedHeldWithinMemoryLimit: the decoded documents a packed
// convert holds count against --memory-limit. Under a limit of half the
// bytes all documents take decoded (tokens at 4 bytes plus a 16-byte
// record each, summed here from the lengths), the run holds at most a
// quarter of them at a time (PackedHeldPeakBytes ≤ limit/2, where holding
// every document of the run at once, as a run without the bound did, is
// twice that), decodes some documents more than once, and writes exactly
// the shards DuckDB's values give. Under the default limit the run decodes
// every row once and takes the lengths from them; a run of one rank
// decodes only its documents. A limit below one step's documents is
// refused naming the bytes needed.
func TestRunPackedHeldWithinMemoryLimit(t *testing.T) {
	f := newPackedFixture(t, 600)
	cfg := plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}
	eod := int64(5)
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 128, EOD: &eod, Window: 40}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	var all int64
	docs := 0
	for _, n := range f.lengths {
		if n > 0 {
			all += 4*int64(n) + 16
			docs++
		}
	}
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	limit := all / 2
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	if sum.PackedHeldPeakBytes <= 0 || sum.PackedHeldPeakBytes > limit/2 || sum.SamplesDecoded <= int64(docs) {
		t.Fatalf("limit %d: held peak %d (want in (0, %d]), %d documents decoded (want more than the %d documents: groups re-decode)",
			limit, sum.PackedHeldPeakBytes, limit/2, sum.SamplesDecoded, docs)
	}
	checkPackedShards(t, f, p, out)
	// Under the default limit every document fits: the run decodes every
	// source row once (null and empty lists too, 16 bytes each) and takes
	// the lengths from them, with no levels pass.
	wholeOut := filepath.Join(t.TempDir(), "out")
	whole, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: wholeOut, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	rows := int64(len(f.lengths))
	if want := all + 16*(rows-int64(docs)); whole.PackedHeldPeakBytes != want || whole.SamplesDecoded != rows {
		t.Fatalf("default limit: held peak %d, want %d (every row); %d decoded, want %d", whole.PackedHeldPeakBytes, want, whole.SamplesDecoded, rows)
	}
	checkPackedShards(t, f, p, wholeOut)
	// One rank of two needs documents of nearly every row group (here
	// 421 of the 520): under the default limit it too decodes every
	// source row once and takes the lengths from them, with no levels
	// pass (before, it read the lengths in a levels pass, then the
	// column again to decode its documents).
	lay, err := p.PackLayout(context.Background(), f.lengths, 0)
	if err != nil {
		t.Fatal(err)
	}
	need := map[uint64]bool{}
	var needBytes int64
	for k := 0; k < p.Steps(); k++ {
		ids, _, _ := p.RankBatch(0, 0, k, nil)
		for _, id := range ids {
			for _, pc := range lay.Row(id) {
				if !need[pc.Doc] {
					need[pc.Doc] = true
					needBytes += 4*int64(f.lengths[pc.Doc]) + 16
				}
			}
		}
	}
	oneOut := filepath.Join(t.TempDir(), "out")
	one, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: oneOut, Jobs: 1, Ranks: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	if one.SamplesDecoded != rows || one.PackedHeldPeakBytes != whole.PackedHeldPeakBytes {
		t.Fatalf("rank 0 only, default limit: %d decoded (want every row, %d), held peak %d (want %d)", one.SamplesDecoded, rows, one.PackedHeldPeakBytes, whole.PackedHeldPeakBytes)
	}
	// Its shard is the every-rank run's, byte for byte (checked there).
	for _, dir := range []string{oneOut, wholeOut} {
		if _, err := os.Stat(filepath.Join(dir, "epoch-00000", "rank-00000.shard")); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(oneOut, "epoch-00000", "rank-00000.shard"))
	b, _ := os.ReadFile(filepath.Join(wholeOut, "epoch-00000", "rank-00000.shard"))
	if !bytes.Equal(a, b) {
		t.Fatal("rank 0 only: its shard differs from the every-rank run's")
	}
	// Under a limit whose half holds the rank's documents but not every
	// document: only its rows' documents, from a levels pass, in one group.
	one, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, Ranks: []int{0}, MemoryLimit: 2 * needBytes})
	if err != nil {
		t.Fatal(err)
	}
	if one.SamplesDecoded != int64(len(need)) || len(need) >= docs {
		t.Fatalf("rank 0 only, limit %d: %d decoded, want its %d documents (of %d)", 2*needBytes, one.SamplesDecoded, len(need), docs)
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: 512})
	if !errors.Is(err, feature.ErrValue) || !strings.Contains(err.Error(), "raise --memory-limit") {
		t.Fatalf("limit below one step: %v", err)
	}
}

// TestPackedSpecRefusesExportFileNames: the names prep export gives the
// files beside a packed batch's tensors (documents.npy,
// documents_offsets.npy, documents_sources.npy) and the offsets of a
// jagged packed output (a per-document tensor's <name>_offsets.npy, the
// cu_seqlens' <token tensor>_cu_seqlens_offsets.npy) cannot be taken by a
// tensor: the spec is refused before any shard is written, where before
// the set converted and then could not be exported.
func TestPackedSpecRefusesExportFileNames(t *testing.T) {
	f := newPackedFixture(t, 60)
	cfg := plan.Config{Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop}
	p, _, err := plan.NewPacked(context.Background(), f.src, cfg, plan.PackOptions{Column: "tokens", Length: 64}, f.lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	doc := func(name string) feature.TensorSpec {
		return feature.TensorSpec{Name: name, Column: "id", DType: "I64", Packed: &feature.PackedPolicy{Per: feature.PackedPerDocument}}
	}
	tok := feature.TensorSpec{Name: "tokens", Column: "tokens", DType: "I32"}
	for _, c := range []struct {
		spec []feature.TensorSpec
		name string
	}{
		{[]feature.TensorSpec{tok, doc("documents")}, "documents"},
		{[]feature.TensorSpec{tok, doc("documents_offsets")}, "documents_offsets"},
		{[]feature.TensorSpec{tok, doc("documents_sources")}, "documents_sources"},
		{[]feature.TensorSpec{tok, doc("d"), doc("d_offsets")}, "d_offsets"},
		{[]feature.TensorSpec{tok, doc("tokens_cu_seqlens_offsets")}, "tokens_cu_seqlens_offsets"},
	} {
		out := filepath.Join(t.TempDir(), "o")
		_, err := Run(context.Background(), Options{Plan: p, Spec: &feature.Spec{Tensors: c.spec}, Output: out})
		if !errors.Is(err, feature.ErrSpec) || !strings.Contains(err.Error(), strconv.Quote(c.name)) {
			t.Errorf("tensor %q: %v; want a spec error naming it", c.name, err)
		}
		if _, serr := os.Stat(out); serr == nil {
			t.Errorf("tensor %q: %s exists after the refusal", c.name, out)
		}
	}
}
