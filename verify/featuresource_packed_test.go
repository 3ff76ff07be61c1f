package verify_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

type tokenRow struct {
	ID     int64   `parquet:"id"`
	Tokens []int32 `parquet:"tokens,list"`
}

// writeTokens writes 200 documents (id%37 tokens each, token k of
// document id = 1000 + id + k, edit[id][k] when given) in row groups of
// 40 rows.
func writeTokens(t *testing.T, path string, edit map[[2]int]int32) {
	t.Helper()
	rows := make([]tokenRow, 200)
	for i := range rows {
		rows[i] = tokenRow{ID: int64(i), Tokens: make([]int32, i%37)}
		for k := range rows[i].Tokens {
			rows[i].Tokens[k] = int32(1000 + i + k)
			if v, ok := edit[[2]int{i, k}]; ok {
				rows[i].Tokens[k] = v
			}
		}
	}
	pqfixture.Of(rows...).RowGroupRows(40).WriteFile(t, path)
}

// convertPacked writes writeTokens' source into a temporary folder, plans
// it packed (rows of 64 tokens, EOD 2, seed 4, 1 epoch, global batch 4, 2
// ranks, remainder pad) and converts its tokens column as I32. It returns
// the source file, the plan, its layout and the shard set.
func convertPacked(t *testing.T) (path string, p *plan.Plan, lay *plan.PackLayout, out string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	path = filepath.Join(src, "part-0.parquet")
	writeTokens(t, path, nil)
	s, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	lengths, err := feature.TokenLengths(context.Background(), nil, s, "tokens", 1)
	if err != nil {
		t.Fatal(err)
	}
	eod := int64(2)
	p, lay, err = plan.NewPacked(context.Background(), s, plan.Config{Seed: 4, Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad},
		plan.PackOptions{Column: "tokens", Length: 64, EOD: &eod, Window: 16}, lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, "out")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "tokens", Column: "tokens", DType: "I32"}}}
	if _, err := convert.Run(context.Background(), convert.Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	return path, p, lay, out
}

// TestVerifyDeepPackedTokens: verify --deep over a converted packed plan
// finds nothing, then, after one token of the source is changed in place
// (same size and footer: only the value comparison can tell), reports the
// packed row holding it, on the tokens tensor only.
func TestVerifyDeepPackedTokens(t *testing.T) {
	path, p, lay, out := convertPacked(t)
	opts := verify.Options{Dir: out, Deep: true, Source: verify.FeatureSource(nil, 0)}
	if rep := verifytest.Run(t, opts); !rep.OK || rep.DeepBatches != 2*p.Steps() {
		t.Fatalf("clean set: %d deep batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	// Document 50 (13 tokens): token 3 changed within the column's range.
	before, _ := os.ReadFile(path)
	writeTokens(t, path, map[[2]int]int32{{50, 3}: 1060})
	after, _ := os.ReadFile(path)
	if len(before) != len(after) || !bytes.Equal(before[len(before)-2000:], after[len(after)-2000:]) {
		t.Fatal("test premise: the rewrite changed the size or the footer")
	}
	var row uint64
	for r := uint64(0); r < lay.Rows(); r++ {
		for _, pc := range lay.Row(r) {
			if pc.Doc == 50 {
				row = r
			}
		}
	}
	rep := verifytest.Run(t, opts)
	if rep.OK || len(rep.Findings) == 0 {
		t.Fatalf("changed token not found\n%s", verifytest.Lines(rep))
	}
	for _, f := range rep.Findings {
		if f.Tensor != "tokens" || !strings.Contains(verifytest.Lines(rep), "value_mismatch") || f.SampleID == nil || *f.SampleID != row {
			t.Errorf("finding %s (want packed row %d, tensor tokens)", f, row)
		}
	}
}

type extraRow struct {
	ID     int64   `parquet:"id"`
	Tokens []int32 `parquet:"tokens,list"`
	Src    int32   `parquet:"src"`
	Q      float64 `parquet:"q"`
}

// writeExtras writes 120 documents (id%23 tokens each, src = 10 + id%5,
// q = id/8) in row groups of 40 rows; src[id] and q[id] take the edited
// values when given.
func writeExtras(t *testing.T, path string, src map[int]int32, q map[int]float64) {
	t.Helper()
	rows := make([]extraRow, 120)
	for i := range rows {
		rows[i] = extraRow{ID: int64(i), Tokens: make([]int32, i%23), Src: int32(10 + i%5), Q: float64(i) / 8}
		for k := range rows[i].Tokens {
			rows[i].Tokens[k] = int32(1000 + i + k)
		}
		if v, ok := src[i]; ok {
			rows[i].Src = v
		}
		if v, ok := q[i]; ok {
			rows[i].Q = v
		}
	}
	pqfixture.Of(rows...).RowGroupRows(40).WriteFile(t, path)
}

// TestVerifyDeepPackedExtras: verify --deep checks a packed set's
// per-token and per-document columns (SPEC.md §2.9.1): clean, it finds
// nothing; after document 50's src (per token) or q (per document) is
// changed in place (same size and footer), it reports the packed row
// holding document 50, on that tensor only.
func TestVerifyDeepPackedExtras(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	path := filepath.Join(src, "part-0.parquet")
	writeExtras(t, path, nil, nil)
	s, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	lengths, err := feature.TokenLengths(context.Background(), nil, s, "tokens", 1)
	if err != nil {
		t.Fatal(err)
	}
	p, lay, err := plan.NewPacked(context.Background(), s, plan.Config{Seed: 2, Epochs: 1, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad},
		plan.PackOptions{Column: "tokens", Length: 48, Window: 16}, lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{
		{Name: "tokens", Column: "tokens", DType: "I32"},
		{Name: "src", Column: "src", DType: "I16", Packed: &feature.PackedPolicy{Per: feature.PackedPerToken, Pad: feature.IntNumber(-1)}},
		{Name: "q", Column: "q", DType: "F64", Packed: &feature.PackedPolicy{Per: feature.PackedPerDocument}},
	}}
	if _, err := convert.Run(context.Background(), convert.Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	opts := verify.Options{Dir: out, Deep: true, Source: verify.FeatureSource(nil, 0)}
	if rep := verifytest.Run(t, opts); !rep.OK || rep.DeepBatches != 2*p.Steps() {
		t.Fatalf("clean set: %d deep batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	var row uint64
	for r := uint64(0); r < lay.Rows(); r++ {
		for _, pc := range lay.Row(r) {
			if pc.Doc == 50 {
				row = r
			}
		}
	}
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		tensor string
		src    map[int]int32
		q      map[int]float64
	}{
		{"src", map[int]int32{50: 12}, nil},  // 10 + 50%5 = 10 → 12, inside [10, 14]
		{"q", nil, map[int]float64{50: 6.3}}, // 6.25 → 6.3 (no other row has it), inside [0, 14.875]
	} {
		writeExtras(t, path, c.src, c.q)
		after, _ := os.ReadFile(path)
		if len(before) != len(after) || bytes.Equal(before, after) || !bytes.Equal(before[len(before)-1500:], after[len(after)-1500:]) {
			t.Fatalf("%s: test premise: the rewrite changed the size or the footer, or nothing", c.tensor)
		}
		rep := verifytest.Run(t, opts)
		if rep.OK || len(rep.Findings) == 0 {
			t.Fatalf("%s: changed value not found\n%s", c.tensor, verifytest.Lines(rep))
		}
		for _, f := range rep.Findings {
			if f.Tensor != c.tensor || !strings.Contains(verifytest.Lines(rep), "value_mismatch") || f.SampleID == nil || *f.SampleID != row {
				t.Errorf("%s: finding %s (want packed row %d)", c.tensor, f, row)
			}
		}
	}
}

// TestVerifyDeepPackedHeldWithinMemoryLimit: the documents a packed
// verify --deep holds decoded count against --memory-limit, as a packed
// convert's do. With one job and a limit of the bytes all documents take
// decoded (tokens at 4 bytes plus a 16-byte record each, summed here from
// the document lengths), each shard's source holds at most half the limit
// (holding every document at once is twice that), decodes its batches in
// groups of more than one batch (verify prefetches two batches at a time
// under this limit), finds nothing on the clean set and the packed row of
// a changed token after. A limit below one batch's documents is refused per batch, naming
// the bytes that batch's documents take (summed here from the layout).
func TestVerifyDeepPackedHeldWithinMemoryLimit(t *testing.T) {
	path, p, lay, out := convertPacked(t)
	// Document i holds i%37 tokens (writeTokens); the empty ones are
	// packed nowhere.
	docBytes := func(d uint64) int64 { return 4*int64(d%37) + 16 }
	var all int64
	for d := uint64(0); d < 200; d++ {
		if d%37 > 0 {
			all += docBytes(d)
		}
	}
	var (
		mu   sync.Mutex
		srcs []verify.SampleSource
	)
	open := verify.FeatureSource(nil, 0)
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		s, err := open(p, m, root, g, ts)
		if _, _, ok := verify.PackedSourceStats(s); ok {
			mu.Lock()
			srcs = append(srcs, s)
			mu.Unlock()
		}
		return s, err
	}
	limit := all
	opts := verify.Options{Dir: out, Deep: true, Source: opener, Jobs: 1, MemoryLimit: limit}
	check := func(what string) {
		t.Helper()
		if len(srcs) != 2 {
			t.Fatalf("%s: %d packed sources opened, want 2 (one per shard)", what, len(srcs))
		}
		for i, s := range srcs {
			peak, decodes, _ := verify.PackedSourceStats(s)
			if peak <= 0 || peak > limit/2 || decodes <= 1 || decodes >= p.Steps() {
				t.Errorf("%s: source %d held at most %d bytes of documents (want in (0, %d], all documents take %d), in %d groups (want 2..%d: several batches a group)",
					what, i, peak, limit/2, all, decodes, p.Steps()-1)
			}
		}
		srcs = nil
	}
	if rep := verifytest.Run(t, opts); !rep.OK || rep.DeepBatches != 2*p.Steps() {
		t.Fatalf("clean set: %d deep batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	check("clean set")
	// Document 50 (13 tokens): token 3 changed in place.
	writeTokens(t, path, map[[2]int]int32{{50, 3}: 1060})
	var row uint64
	for r := uint64(0); r < lay.Rows(); r++ {
		for _, pc := range lay.Row(r) {
			if pc.Doc == 50 {
				row = r
			}
		}
	}
	rep := verifytest.Run(t, opts)
	if rep.OK || len(rep.Findings) == 0 {
		t.Fatalf("changed token not found\n%s", verifytest.Lines(rep))
	}
	for _, f := range rep.Findings {
		if f.Kind != verify.KindValueMismatch || f.Tensor != "tokens" || f.SampleID == nil || *f.SampleID != row {
			t.Errorf("finding %s (want a value mismatch of packed row %d, tensor tokens)", f, row)
		}
	}
	check("changed set")
	writeTokens(t, path, nil)
	// A limit whose half is below every batch's documents: each batch is
	// refused with the bytes its documents take.
	ids, _, err := p.RankBatch(0, 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	var need int64
	for _, id := range ids {
		for _, pc := range lay.Row(id) {
			if !seen[pc.Doc] {
				seen[pc.Doc] = true
				need += docBytes(pc.Doc)
			}
		}
	}
	opts.MemoryLimit = 2 * 16
	rep = verifytest.Run(t, opts)
	want := fmt.Sprintf("take %d bytes decoded, more than the 16 bytes this check may hold (half of --memory-limit, shared among --jobs checks): raise --memory-limit to at least %d (with --jobs 1)", need, 2*need)
	found := 0
	for _, f := range rep.Findings {
		if f.Kind != verify.KindSourceUnreadable || !strings.Contains(f.Message, "raise --memory-limit to at least") {
			t.Errorf("finding %s (want a refused batch)", f)
		}
		if f.Batch != nil && *f.Batch == 0 && strings.Contains(f.Message, want) {
			found++
		}
	}
	if len(rep.Findings) != 2*p.Steps() || found == 0 {
		t.Fatalf("tiny limit: %d findings (want %d, one a batch), rank 0 batch 0 refused with %q: %v\n%s", len(rep.Findings), 2*p.Steps(), want, found > 0, verifytest.Lines(rep))
	}
}
