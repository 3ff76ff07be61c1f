package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// packMixFixture is selFixture (web: 1000 rows, weight 0.7; code: its 51
// selected rows, weight 0.3) with a token count of 1 … 90 for every source
// row, none empty.
func packMixFixture(t *testing.T) (Source, *Mixture, map[uint64]bool, []uint32) {
	src, mix, codeSel := selFixture()
	n := mustNorm(t, src).NumSamples()
	lengths := lcgLengths(int(n), 17, 30, 90)
	return src, mix, codeSel, lengths
}

func mustPackMix(t *testing.T, src Source, cfg Config, opts PackOptions, mix *Mixture, lengths []uint32) (*Plan, *PackLayout) {
	t.Helper()
	p, lay, err := NewPackedMixture(context.Background(), src, cfg, opts, mix, lengths, nil)
	if err != nil {
		t.Fatalf("NewPackedMixture(%+v, %+v): %v", cfg, opts, err)
	}
	return p, lay
}

// TestPackedMixtureQuotas: filters and quotas choose the documents before
// packing. T = 1051 documents (1000 web rows + 51 selected code rows);
// quotas by hand: 0.7·1051 = 735.7 and 0.3·1051 = 315.3, the one left
// over to web (larger fraction): 736 and 315. So 736 distinct web
// documents appear once, and the 51 selected code documents 6 or 7 times
// (315 = 6·51 + 9: 9 of them 7 times); no unselected code row appears.
// Every token of a drawn document is in the rows exactly as many times as
// the document was drawn (split chunk), and with scope per_source every
// row holds one source's documents, in source order, as SourceOf says.
func TestPackedMixtureQuotas(t *testing.T) {
	src, mix, codeSel, lengths := packMixFixture(t)
	web := func(id uint64) bool { return id < 600 || id >= 680 && id < 1080 }
	for _, scope := range []PackScope{ScopeAcross, ScopePerSource} {
		for _, sh := range []Shuffle{ShuffleGlobal, ShuffleNone} {
			cfg := Config{Seed: 3, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 1, Shuffle: sh, Remainder: RemainderPad}
			p, lay := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 64, EOD: i64p(2), Window: 50, Scope: scope}, mix, lengths)
			name := fmt.Sprintf("%s/%s", scope, sh)
			if got := []uint64{p.Mixture.Sources[0].SamplesPerEpoch, p.Mixture.Sources[1].SamplesPerEpoch}; !slices.Equal(got, []uint64{736, 315}) {
				t.Fatalf("%s: quotas %v, want [736 315]", name, got)
			}
			// covered[d][o]: times token o of document d is in a row.
			covered := map[uint64][]int{}
			var tokens uint64
			for r := uint64(0); r < lay.Rows(); r++ {
				srcOfRow := -1
				var used uint64
				for _, pc := range lay.Row(r) {
					c := covered[pc.Doc]
					if c == nil {
						c = make([]int, lengths[pc.Doc]+1)
						covered[pc.Doc] = c
					}
					for o := pc.Offset; o < pc.Offset+pc.Len; o++ {
						c[o]++
					}
					used += uint64(pc.Len)
					s := 1
					if web(pc.Doc) {
						s = 0
					}
					if scope == ScopePerSource && srcOfRow >= 0 && s != srcOfRow {
						t.Fatalf("%s: row %d mixes sources", name, r)
					}
					srcOfRow = s
				}
				if used > 64 {
					t.Fatalf("%s: row %d holds %d tokens", name, r, used)
				}
				tokens += used
				want := -1
				if scope == ScopePerSource {
					want = srcOfRow
				}
				if got := p.SourceOf(r); got != want {
					t.Fatalf("%s: SourceOf(row %d) = %d, want %d", name, r, got, want)
				}
			}
			webDocs, codeTimes := 0, map[int]int{}
			for d, c := range covered {
				k := c[0]
				for o, x := range c {
					if x != k {
						t.Fatalf("%s: document %d token %d in %d rows, token 0 in %d", name, d, o, x, k)
					}
				}
				switch {
				case web(d):
					webDocs++
					if k != 1 {
						t.Fatalf("%s: web document %d drawn %d times", name, d, k)
					}
				case codeSel[d]:
					codeTimes[k]++
				default:
					t.Fatalf("%s: document %d is neither web nor a selected code row", name, d)
				}
			}
			if webDocs != 736 || !reflect.DeepEqual(codeTimes, map[int]int{6: 42, 7: 9}) {
				t.Fatalf("%s: %d web documents (want 736), code documents by times drawn %v (want 42 six times, 9 seven times)", name, webDocs, codeTimes)
			}
			if tokens != p.Packing.Tokens || p.Packing.Rows*64 != tokens+p.Packing.PadSlots || p.NumSamples() != lay.Rows() {
				t.Fatalf("%s: record %+v, %d tokens in %d rows", name, p.Packing, tokens, lay.Rows())
			}
			if !p.CoversSource() || p.EpochSamples() != lay.Rows() {
				t.Fatalf("%s: a packed mixture's epoch holds its %d rows, not %d", name, lay.Rows(), p.EpochSamples())
			}
			// Every epoch holds every packed row once (pad slots aside).
			for e := 0; e < 2; e++ {
				bs, _ := globalBatches(t, p, e)
				seen := map[uint64]int{}
				for _, b := range bs {
					for _, id := range b {
						seen[id]++
					}
				}
				if uint64(len(seen)) != lay.Rows() {
					t.Fatalf("%s: epoch %d holds %d of %d rows", name, e, len(seen), lay.Rows())
				}
			}
		}
	}
}

// TestPackedMixtureWorldSizes: a packed mixture's order fingerprint, epoch
// digests and global batches are the same at world sizes 1, 2 and 8 and
// any worker count; a cursor taken at any global step resumes the same
// tail at another world size, and resumes chained across R = 1, 2, 8
// give the uninterrupted run.
func TestPackedMixtureWorldSizes(t *testing.T) {
	src, mix, _, lengths := packMixFixture(t)
	for _, scope := range []PackScope{ScopeAcross, ScopePerSource} {
		opts := PackOptions{Column: "tokens", Length: 48, Window: 40, Scope: scope}
		plans := map[int]*Plan{}
		for _, rw := range [][2]int{{1, 1}, {2, 3}, {8, 2}} {
			plans[rw[0]], _ = mustPackMix(t, src, Config{Seed: 9, Epochs: 3, GlobalBatch: 16, WorldSize: rw[0], Workers: rw[1], Shuffle: ShuffleGlobal, Remainder: RemainderPad}, opts, mix, lengths)
		}
		ref := plans[1]
		var full []uint64
		for e := 0; e < 3; e++ {
			bs, _ := globalBatches(t, ref, e)
			for _, b := range bs {
				full = append(full, b...)
			}
		}
		for _, r := range []int{2, 8} {
			p := plans[r]
			if p.OrderFingerprint != ref.OrderFingerprint || p.Fingerprint == ref.Fingerprint || !reflect.DeepEqual(p.Packing, ref.Packing) {
				t.Fatalf("%s R=%d: order fingerprint or packing differs from R=1", scope, r)
			}
			for e := range p.Epochs {
				if p.Epochs[e].Digest != ref.Epochs[e].Digest {
					t.Fatalf("%s R=%d: epoch %d digest differs from R=1", scope, r, e)
				}
			}
		}
		step := func(q *Plan, c Cursor, steps int) ([]uint64, Cursor) {
			e, k, done, err := q.Resume(c)
			if err != nil {
				t.Fatal(err)
			}
			var out []uint64
			for ; !done && steps != 0; steps-- {
				for r := 0; r < q.Config.WorldSize; r++ {
					ids, _, err := q.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, ids...)
				}
				if k++; k == q.Steps() {
					e, k = e+1, 0
					done = e == q.Config.Epochs
				}
			}
			return out, q.CursorAt(e, k)
		}
		for s := 0; s <= 3*ref.Steps(); s++ {
			for _, r := range []int{2, 8} {
				got, _ := step(plans[r], Cursor{Fingerprint: ref.OrderFingerprint, GlobalStep: uint64(s)}, -1)
				if !slices.Equal(got, full[s*16:]) {
					t.Fatalf("%s R=%d: resume at global step %d differs from the uninterrupted tail", scope, r, s)
				}
			}
		}
		var chained []uint64
		c := ref.CursorAt(0, 0)
		for i := 0; ; i++ {
			var got []uint64
			got, c = step(plans[[]int{1, 2, 8}[i%3]], c, 2)
			if len(got) == 0 {
				break
			}
			chained = append(chained, got...)
		}
		if !slices.Equal(chained, full) {
			t.Fatalf("%s: chained resumes across R = 1, 2, 8 differ from the uninterrupted run", scope)
		}
	}
}

// TestPackedMixtureLoad: a packed mixture survives Marshal and Parse, its
// layout is recomputed from the lengths (a changed length is refused),
// the two scopes and an unpacked mixture have different order
// fingerprints, and a tampered or misplaced scope or source_rows is
// refused on load.
func TestPackedMixtureLoad(t *testing.T) {
	src, mix, _, lengths := packMixFixture(t)
	cfg := Config{Seed: 1, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	fps := map[string]bool{mustMix(t, src, cfg, mix).OrderFingerprint: true}
	for _, scope := range []PackScope{"", ScopePerSource} {
		p, lay := mustPackMix(t, src, cfg, PackOptions{Column: "tokens", Length: 32, Window: 64, Scope: scope}, mix, lengths)
		if scope == "" && p.Packing.Scope != ScopeAcross {
			t.Fatalf("default scope %q, want across", p.Packing.Scope)
		}
		fps[p.OrderFingerprint] = true
		b, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if q.Fingerprint != p.Fingerprint || !reflect.DeepEqual(q.Packing, p.Packing) {
			t.Fatal("plan changed through Marshal and Parse")
		}
		got, err := q.PackLayout(context.Background(), lengths)
		if err != nil || !reflect.DeepEqual(got, lay) {
			t.Fatalf("recomputed layout differs: %v", err)
		}
		changed := slices.Clone(lengths)
		changed[700]++
		if _, err := q.PackLayout(context.Background(), changed); !errors.Is(err, ErrMismatch) {
			t.Fatalf("changed lengths: %v", err)
		}
		var bad string
		if scope == ScopePerSource {
			r := p.Packing.SourceRows
			bad = strings.Replace(string(b), fmt.Sprintf("\"source_rows\": [\n      %d,\n      %d\n    ]", r[0], r[1]),
				fmt.Sprintf("\"source_rows\": [\n      %d,\n      %d\n    ]", r[0]+1, r[1]-1), 1)
		} else {
			bad = strings.Replace(string(b), `"scope": "across",`, "", 1)
		}
		if bad == string(b) {
			t.Fatal("tampering found nothing to replace")
		}
		if _, err := Parse([]byte(bad)); err == nil {
			t.Fatalf("scope %s: a tampered packing record loads", scope)
		}
	}
	if len(fps) != 3 {
		t.Fatal("scopes across, per_source and no packing share an order fingerprint")
	}
	// A scope without a mixture is refused.
	opts := PackOptions{Column: "tokens", Length: 32, Scope: ScopeAcross}
	nsrc := goldenSources()["b27"]
	if _, _, err := NewPacked(context.Background(), nsrc, cfg, opts, lcgLengths(int(mustNorm(t, nsrc).NumSamples()), 1, 10, 20), nil); !errors.Is(err, ErrFormat) && !errors.Is(err, ErrConfig) {
		t.Fatalf("scope without a mixture: %v", err)
	}
	opts.Scope = "per_row"
	if _, _, err := NewPackedMixture(context.Background(), src, cfg, opts, mix, lengths, nil); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "scope") {
		t.Fatalf("unknown scope: %v", err)
	}
}

// ---- golden vectors (testdata/golden-pack-mixture.json), never regenerated ----

const goldenPackMixPath = "testdata/golden-pack-mixture.json"

type goldenPackMixPlan struct {
	Name             string        `json:"name"`
	Source           Source        `json:"source"`
	Config           Config        `json:"config"`
	Mixture          *Mixture      `json:"mixture"`
	Options          PackOptions   `json:"options"`
	Lengths          []uint32      `json:"lengths"`
	Packing          Packing       `json:"packing"`
	Resolved         *Mixture      `json:"resolved"`
	OrderFingerprint string        `json:"order_fingerprint"`
	Fingerprint      string        `json:"fingerprint"`
	Derived          Derived       `json:"derived"`
	EpochDigests     []string      `json:"epoch_digests"`
	Batches          []goldenBatch `json:"batches"`
}

type goldenPackMixFile struct {
	Format        string              `json:"format"`
	Algorithm     string              `json:"algorithm"`
	PackedMixture string              `json:"packed_mixture"`
	Plans         []goldenPackMixPlan `json:"plans"`
}

func makeGoldenPackMix(t *testing.T) goldenPackMixFile {
	g := goldenPackMixFile{Format: FormatVersion, Algorithm: Algorithm, PackedMixture: MixtureVersion}
	src, mix := mixFixture()
	_, sel, _ := selFixture()
	three := &Mixture{EpochSamples: 300, Sources: slices.Clone(sel.Sources)}
	three.Sources[0].Weight = "2"
	three.Sources[1].Weight = "1"
	lengths := lcgLengths(int(mustNorm(t, src).NumSamples()), 23, 25, 150)
	for _, c := range []struct {
		name string
		mix  *Mixture
		cfg  Config
		opts PackOptions
	}{
		{"across/global/pad", mix, Config{Seed: 4, Epochs: 2, GlobalBatch: 6, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad},
			PackOptions{Column: "tokens", Length: 64, EOD: i64p(0), Window: 32, Scope: ScopeAcross}},
		{"per_source/global/drop", mix, Config{Seed: 5, Epochs: 2, GlobalBatch: 4, WorldSize: 4, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderDrop},
			PackOptions{Column: "tokens", Length: 100, Split: SplitNone, Pad: 7, Window: 25, Scope: ScopePerSource}},
		{"across/none/partial/filter", three, Config{Seed: 6, Epochs: 1, GlobalBatch: 5, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderPartial},
			PackOptions{Column: "t", Length: 40, Window: 16, Scope: ScopeAcross}},
		{"per_source/global/pad/filter", three, Config{Seed: 7, Epochs: 2, GlobalBatch: 8, WorldSize: 8, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad},
			PackOptions{Column: "t", Length: 128, EOD: i64p(1), Window: 10, Scope: ScopePerSource}},
	} {
		p, _, err := NewPackedMixture(context.Background(), src, c.cfg, c.opts, c.mix, lengths, nil)
		if err != nil {
			t.Fatal(err)
		}
		gp := goldenPackMixPlan{Name: c.name, Source: p.Source, Config: c.cfg, Mixture: c.mix, Options: c.opts, Lengths: lengths, Packing: *p.Packing,
			Resolved: p.Mixture, OrderFingerprint: p.OrderFingerprint, Fingerprint: p.Fingerprint, Derived: p.Derived}
		for _, e := range p.Epochs {
			gp.EpochDigests = append(gp.EpochDigests, e.Digest)
		}
		for e := 0; e < c.cfg.Epochs; e++ {
			for r := 0; r < c.cfg.WorldSize; r++ {
				for _, k := range []int{0, p.Steps() - 1} {
					ids, pads, err := p.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					gp.Batches = append(gp.Batches, goldenBatch{Epoch: e, Rank: r, Step: k, IDs: append([]uint64{}, ids...), Pads: pads})
				}
			}
		}
		g.Plans = append(g.Plans, gp)
	}
	return g
}

// TestGoldenPackMixture compares packed mixtures with the vectors pinned
// in testdata/golden-pack-mixture.json (created once with -golden-write,
// never regenerated).
func TestGoldenPackMixture(t *testing.T) {
	got := makeGoldenPackMix(t)
	want := readGoldenJSON(t, goldenPackMixPath, func() goldenPackMixFile { return got })
	if len(want.Plans) != 4 {
		t.Fatalf("golden file holds %d plans, want the 4 it was written with", len(want.Plans))
	}
	for i := range want.Plans {
		a, _ := json.Marshal(got.Plans[i]) // Source holds an unexported index
		b, _ := json.Marshal(want.Plans[i])
		if string(a) != string(b) {
			t.Errorf("packed mixture %s differs from the golden vectors", want.Plans[i].Name)
		}
	}
}

// TestReferencePackMixture runs the Python reference (standard library
// only) over the packed-mixture golden vectors.
func TestReferencePackMixture(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the reference implementation cannot run")
	}
	out, err := exec.Command(py, filepath.Join("reference", "plan_ref.py"), goldenPackMixPath).CombinedOutput()
	if err != nil {
		t.Fatalf("reference implementation: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 mismatches") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}
