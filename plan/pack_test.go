package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func i64p(x int64) *int64 { return &x }

func rowsOf(lay *PackLayout) [][]Piece {
	var out [][]Piece
	for i := uint64(0); i < lay.Rows(); i++ {
		out = append(out, lay.Row(i))
	}
	return out
}

// TestPackHandComputed checks Pack against layouts worked out by hand from
// PLAN.md §12 (best-fit decreasing inside windows of 4 documents).
func TestPackHandComputed(t *testing.T) {
	lengths := []uint32{3, 5, 0, 2, 7, 1}
	for _, c := range []struct {
		name  string
		opts  PackOptions
		in    []uint32
		rows  [][]Piece
		toks  uint64
		empty uint64
		drop  uint64
	}{
		{"no eod", PackOptions{Column: "t", Length: 8, Window: 4}, lengths,
			[][]Piece{{{1, 0, 5}, {0, 0, 3}}, {{3, 0, 2}}, {{4, 0, 7}, {5, 0, 1}}}, 18, 1, 0},
		{"eod", PackOptions{Column: "t", Length: 8, Window: 4, EOD: i64p(99)}, lengths,
			[][]Piece{{{1, 0, 6}}, {{0, 0, 4}, {3, 0, 3}}, {{4, 0, 8}}, {{5, 0, 2}}}, 23, 1, 0},
		{"chunk", PackOptions{Column: "t", Length: 8}, []uint32{20},
			[][]Piece{{{0, 0, 8}}, {{0, 8, 8}}, {{0, 16, 4}}}, 20, 0, 0},
		{"none drops", PackOptions{Column: "t", Length: 8, Split: SplitNone}, []uint32{20, 8},
			[][]Piece{{{1, 0, 8}}}, 8, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lay, rec, err := Pack(context.Background(), c.in, c.opts, 7, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowsOf(lay); !reflect.DeepEqual(got, c.rows) {
				t.Errorf("rows %v, want %v", got, c.rows)
			}
			want := uint64(len(c.rows))
			if rec.Rows != want || rec.Tokens != c.toks || rec.PadSlots != want*8-c.toks || rec.EmptyDocuments != c.empty || rec.DroppedDocuments != c.drop {
				t.Errorf("record %+v", rec)
			}
		})
	}
}

// lcgLengths returns n document lengths from a log-normal-like law drawn
// with a fixed 64-bit LCG (Knuth's MMIX constants), so tests need no
// random source: the sum of 4 uniforms shaped by an exponential.
func lcgLengths(n int, seed uint64, mean, maxLen float64) []uint32 {
	x := seed
	next := func() float64 {
		x = x*6364136223846793005 + 1442695040888963407
		return float64(x>>11) / (1 << 53)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(logNormal(next, mean, maxLen))
	}
	return out
}

// checkCover asserts that the layout holds every token of every kept
// document exactly once, pieces in offset order within a document, no
// row over L, and the record's counts.
func checkCover(t *testing.T, lengths []uint32, opts PackOptions, lay *PackLayout, rec *Packing) {
	t.Helper()
	eod := uint32(0)
	if opts.EOD != nil {
		eod = 1
	}
	next := make(map[uint64]uint32) // doc -> next expected offset
	var toks uint64
	for i := uint64(0); i < lay.Rows(); i++ {
		sum := uint32(0)
		for _, p := range lay.Row(i) {
			if p.Len == 0 || p.Offset != next[p.Doc] {
				t.Fatalf("row %d piece %+v: expected offset %d", i, p, next[p.Doc])
			}
			next[p.Doc] += p.Len
			sum += p.Len
		}
		if sum > uint32(opts.Length) || sum == 0 {
			t.Fatalf("row %d holds %d tokens, L=%d", i, sum, opts.Length)
		}
		toks += uint64(sum)
	}
	var dropped, empty uint64
	for d, n := range lengths {
		switch {
		case n == 0:
			empty++
			if _, ok := next[uint64(d)]; ok {
				t.Fatalf("empty document %d packed", d)
			}
		case opts.Split == SplitNone && n+eod > uint32(opts.Length):
			dropped++
			if _, ok := next[uint64(d)]; ok {
				t.Fatalf("dropped document %d packed", d)
			}
		case next[uint64(d)] != n+eod:
			t.Fatalf("document %d: %d tokens packed, has %d", d, next[uint64(d)], n+eod)
		}
	}
	if toks != rec.Tokens || dropped != rec.DroppedDocuments || empty != rec.EmptyDocuments || rec.Rows != lay.Rows() {
		t.Fatalf("record %+v; counted tokens %d dropped %d empty %d", rec, toks, dropped, empty)
	}
}

// TestPackCoversEveryToken checks, on drawn lengths, that each token is
// packed exactly once (split chunk) or its document counted as dropped
// (split none), for several windows, with and without shuffle and EOD.
func TestPackCoversEveryToken(t *testing.T) {
	lengths := lcgLengths(3000, 1, 600, 16384)
	lengths[5], lengths[17] = 0, 0
	for _, opts := range []PackOptions{
		{Column: "t", Length: 2048},
		{Column: "t", Length: 2048, Window: 1},
		{Column: "t", Length: 2048, Window: 7, EOD: i64p(2)},
		{Column: "t", Length: 512, Split: SplitNone, Window: 100},
		{Column: "t", Length: 1},
	} {
		for _, shuffle := range []bool{false, true} {
			lay, rec, err := Pack(context.Background(), lengths, opts, 3, shuffle)
			if err != nil {
				t.Fatal(err)
			}
			checkCover(t, lengths, opts, lay, rec)
		}
	}
}

// TestPackBestFitIsOptimalOnExactFits: pieces that pair up exactly leave
// no padding (3 of 5 + 3 of 3 in rows of 8, with best fit preferring the
// fuller row).
func TestPackBestFitPrefersFullerRow(t *testing.T) {
	// Sorted: 6, 5, 2, 2. 6 -> row0 (free 2); 5 -> row1 (free 3);
	// first 2 -> row0 (free 2 is the smallest room that fits), second 2 -> row1.
	lay, _, err := Pack(context.Background(), []uint32{2, 6, 2, 5}, PackOptions{Column: "t", Length: 8}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Piece{{{1, 0, 6}, {0, 0, 2}}, {{3, 0, 5}, {2, 0, 2}}}
	if got := rowsOf(lay); !reflect.DeepEqual(got, want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
}

func TestPackedPlanLoadRoundTrip(t *testing.T) {
	src := goldenSources()["b27"]
	lengths := lcgLengths(int(mustNorm(t, src).NumSamples()), 9, 40, 300)
	cfg := Config{Seed: 5, Epochs: 2, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad}
	opts := PackOptions{Column: "tokens", Length: 64, EOD: i64p(1), Window: 16}
	p, lay, err := NewPacked(context.Background(), src, cfg, opts, lengths, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.NumSamples() != lay.Rows() || p.Packing.Rows != lay.Rows() {
		t.Fatalf("samples %d, rows %d", p.NumSamples(), lay.Rows())
	}
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
	unpacked, err := New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if unpacked.OrderFingerprint == p.OrderFingerprint {
		t.Fatal("packing does not change the order fingerprint")
	}
	if _, err := q.PackLayout(context.Background(), lengths, 0); err != nil {
		t.Fatal(err)
	}
	changed := append([]uint32(nil), lengths...)
	changed[3]++
	if _, err := q.PackLayout(context.Background(), changed, 0); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "tokens") {
		t.Fatalf("changed lengths: %v", err)
	}
	// A tampered row count is refused on load.
	bad := strings.Replace(string(b), fmt.Sprintf(`"rows": %d`, p.Packing.Rows), fmt.Sprintf(`"rows": %d`, p.Packing.Rows+1), 1)
	if _, err := Parse([]byte(bad)); !errors.Is(err, ErrFormat) {
		t.Fatalf("tampered rows: %v", err)
	}
	cfg.Shuffle, cfg.Window = ShuffleBlocks, 2
	if _, _, err := NewPacked(context.Background(), src, cfg, opts, lengths, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("blocks with packing: %v", err)
	}
}

func mustNorm(t *testing.T, s Source) *Source {
	t.Helper()
	s.Files = append([]SourceFile(nil), s.Files...)
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	return &s
}

// ---- golden vectors (testdata/golden_pack.json), never regenerated ----

const goldenPackPath = "testdata/golden_pack.json"

type goldenPacking struct {
	Name    string        `json:"name"`
	Lengths []uint32      `json:"lengths"`
	Options PackOptions   `json:"options"`
	Seed    uint64        `json:"seed"`
	Shuffle bool          `json:"shuffle"`
	Record  Packing       `json:"record"`
	Rows    [][][3]uint64 `json:"rows"`
}

type goldenPackedPlan struct {
	Name             string        `json:"name"`
	Source           Source        `json:"source"`
	Config           Config        `json:"config"`
	Lengths          []uint32      `json:"lengths"`
	Packing          Packing       `json:"packing"`
	OrderFingerprint string        `json:"order_fingerprint"`
	Fingerprint      string        `json:"fingerprint"`
	Derived          Derived       `json:"derived"`
	EpochDigests     []string      `json:"epoch_digests"`
	Batches          []goldenBatch `json:"batches"`
}

type goldenPackFile struct {
	Format    string             `json:"format"`
	Algorithm string             `json:"algorithm"`
	Packings  []goldenPacking    `json:"packings"`
	Plans     []goldenPackedPlan `json:"plans"`
}

func rowsTriples(lay *PackLayout) [][][3]uint64 {
	out := [][][3]uint64{}
	for i := uint64(0); i < lay.Rows(); i++ {
		r := [][3]uint64{}
		for _, p := range lay.Row(i) {
			r = append(r, [3]uint64{p.Doc, uint64(p.Offset), uint64(p.Len)})
		}
		out = append(out, r)
	}
	return out
}

func makeGoldenPack(t *testing.T) goldenPackFile {
	g := goldenPackFile{Format: FormatVersion, Algorithm: Algorithm}
	add := func(name string, lengths []uint32, o PackOptions, seed uint64, shuffle bool) {
		lay, rec, err := Pack(context.Background(), lengths, o, seed, shuffle)
		if err != nil {
			t.Fatal(err)
		}
		g.Packings = append(g.Packings, goldenPacking{Name: name, Lengths: lengths, Options: rec.PackOptions, Seed: seed, Shuffle: shuffle, Record: *rec, Rows: rowsTriples(lay)})
	}
	add("hand", []uint32{3, 5, 0, 2, 7, 1}, PackOptions{Column: "t", Length: 8, Window: 4}, 0, false)
	add("hand-eod", []uint32{3, 5, 0, 2, 7, 1}, PackOptions{Column: "t", Length: 8, Window: 4, EOD: i64p(99)}, 0, false)
	add("chunk-shuffled", lcgLengths(300, 2, 60, 1000), PackOptions{Column: "tokens", Length: 128, Window: 32, EOD: i64p(0)}, 11, true)
	add("none-shuffled", lcgLengths(300, 3, 60, 1000), PackOptions{Column: "tokens", Length: 128, Split: SplitNone, Window: 50}, 0, true)
	add("window-1", lcgLengths(50, 4, 20, 100), PackOptions{Column: "x", Length: 30, Window: 1}, 1, true)
	add("one-per-row", lcgLengths(40, 5, 5, 20), PackOptions{Column: "x", Length: 1, Window: 8}, 2, true)
	add("default-window", lcgLengths(9000, 6, 100, 4000), PackOptions{Column: "tokens", Length: 512, Pad: -1}, 3, true)
	srcs := goldenSources()
	for _, c := range []struct {
		name string
		src  string
		cfg  Config
		opts PackOptions
	}{
		{"global-pad", "b27", Config{Seed: 5, Epochs: 2, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad}, PackOptions{Column: "tokens", Length: 64, EOD: i64p(1), Window: 16}},
		{"none-drop", "b27", Config{Seed: 0, Epochs: 1, GlobalBatch: 3, WorldSize: 1, Workers: 2, Shuffle: ShuffleNone, Remainder: RemainderDrop}, PackOptions{Column: "tokens", Length: 50, Split: SplitNone, Window: 10}},
	} {
		src := srcs[c.src]
		lengths := lcgLengths(int(mustNorm(t, src).NumSamples()), 7, 30, 200)
		p, _, err := NewPacked(context.Background(), src, c.cfg, c.opts, lengths, nil)
		if err != nil {
			t.Fatal(err)
		}
		gp := goldenPackedPlan{Name: c.name, Source: p.Source, Config: c.cfg, Lengths: lengths, Packing: *p.Packing, OrderFingerprint: p.OrderFingerprint, Fingerprint: p.Fingerprint, Derived: p.Derived}
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

// TestGoldenPack compares Pack and packed plans with the vectors pinned in
// testdata/golden_pack.json (created once with -golden-write, never
// regenerated).
func TestGoldenPack(t *testing.T) {
	got := makeGoldenPack(t)
	want := readGoldenJSON(t, goldenPackPath, func() goldenPackFile { return got })
	if len(want.Packings) != 7 || len(want.Plans) != 2 {
		t.Fatalf("golden file holds %d packings and %d plans, want the 7 and 2 it was written with", len(want.Packings), len(want.Plans))
	}
	for i := range want.Packings {
		if !reflect.DeepEqual(got.Packings[i], want.Packings[i]) {
			t.Errorf("packing %s differs from the golden vectors", want.Packings[i].Name)
		}
	}
	for i := range want.Plans {
		a, _ := json.Marshal(got.Plans[i]) // Source holds an unexported index
		b, _ := json.Marshal(want.Plans[i])
		if string(a) != string(b) {
			t.Errorf("packed plan %s differs from the golden vectors", want.Plans[i].Name)
		}
	}
}

// TestReferencePack runs the Python reference (standard library only)
// over the packing golden vectors: the spec, not this binary, defines the
// packing.
func TestReferencePack(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the reference implementation cannot run")
	}
	out, err := exec.Command(py, filepath.Join("reference", "plan_ref.py"), goldenPackPath).CombinedOutput()
	if err != nil {
		t.Fatalf("reference implementation: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), " 0 mismatches") {
		t.Fatalf("unexpected output:\n%s", out)
	}
	t.Logf("%s", out)
}

// logNormal draws one length from a log-normal law of the given mean
// (σ = 1, so μ = ln(mean) − 1/2), by Box–Muller over next's uniforms in
// [0, 1), rounded and clamped to [1, maxLen].
func logNormal(next func() float64, mean, maxLen float64) float64 {
	u1, u2 := next(), next()
	z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
	v := math.Round(math.Exp(math.Log(mean) - 0.5 + z))
	return max(1, min(maxLen, v))
}

// BenchmarkPackLogNormal packs 10^8 tokens' worth of documents drawn
// from a log-normal length law (σ = 1, clamped to [1, 16384]) with the
// default window and reports the padding share of the slots
// (pad_%), rows and documents: the efficiency figures of BENCHMARKS.md's
// Packing section, and the packing cost per document.
func BenchmarkPackLogNormal(b *testing.B) {
	for _, c := range []struct {
		mean float64
		l    int
	}{{600, 2048}, {600, 8192}, {100, 2048}} {
		b.Run(fmt.Sprintf("mean%.0f-L%d", c.mean, c.l), func(b *testing.B) {
			lengths := lcgLengths(int(1e8/c.mean), 42, c.mean, 16384)
			opts := PackOptions{Column: "tokens", Length: c.l, EOD: i64p(0)}
			var rec *Packing
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var err error
				if _, rec, err = Pack(context.Background(), lengths, opts, 7, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*float64(rec.PadSlots)/float64(rec.Rows*uint64(c.l)), "pad_%")
			b.ReportMetric(float64(rec.Rows), "rows")
			b.ReportMetric(float64(len(lengths)), "docs")
			b.ReportMetric(float64(rec.Tokens)/float64(len(lengths)), "tokens/doc")
		})
	}
}
