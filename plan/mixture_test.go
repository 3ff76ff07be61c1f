package plan

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mixFixture is a source of two sources: "web" (a-0 and c-1, 1000 rows in
// row groups of 64) and "code" (b-0, d-1 and the empty d-2, 130 rows),
// interleaved by path, so neither source's ids are one range.
func mixFixture() (Source, *Mixture) {
	mk := func(path string, i int, rg ...int64) SourceFile {
		rg = append([]int64{}, rg...)
		return SourceFile{Path: path, Size: int64(500 + i), FooterSHA256: fmt.Sprintf("%064x", i+1), RowGroups: rg}
	}
	src := Source{Files: []SourceFile{
		mk("a-0.parquet", 0, rowGroups(600, 64)...),
		mk("b-0.parquet", 1, 50, 0, 30),
		mk("c-1.parquet", 2, rowGroups(400, 64)...),
		mk("d-1.parquet", 3, 50),
		mk("d-2.parquet", 4),
	}}
	mix := &Mixture{Sources: []MixSource{
		{Name: "web", Weight: "0.7", Paths: []string{"a-0.parquet", "c-1.parquet"}, Files: []string{"a-0.parquet", "c-1.parquet"}},
		{Name: "code", Weight: "0.3", Paths: []string{"b-0.parquet", "d-*.parquet"}, Files: []string{"b-0.parquet", "d-1.parquet", "d-2.parquet"}},
	}}
	return src, mix
}

func mustMix(t testing.TB, src Source, cfg Config, mix *Mixture) *Plan {
	t.Helper()
	p, err := NewMixtureContext(context.Background(), src, cfg, mix, nil)
	if err != nil {
		t.Fatalf("NewMixtureContext(%+v): %v", cfg, err)
	}
	return p
}

// globalBatches returns every global batch of epoch e (ranks in order).
func globalBatches(t testing.TB, p *Plan, e int) (batches [][]uint64, pads []int) {
	t.Helper()
	for k := 0; k < p.Steps(); k++ {
		var gb []uint64
		np := 0
		for r := 0; r < p.Config.WorldSize; r++ {
			ids, n, err := p.RankBatch(e, r, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			gb = append(gb, ids...)
			np += n
		}
		batches, pads = append(batches, gb), append(pads, np)
	}
	return batches, pads
}

// TestMixtureShares: a 0.7/0.3 mixture of 1000 and 130 rows (T = 1130:
// 791 and 339 samples, by hand) over 3 epochs gives each source exactly
// its share per epoch and every global batch within one sample of
// G·c_i/T; the down-sampled source covers its rows 2 or 3 times (373 rows
// 3 times: 3·791 = 2373 = 2·1000 + 373) and the up-sampled one 7 or 8
// times (3·339 = 1017 = 7·130 + 107).
func TestMixtureShares(t *testing.T) {
	src, mix := mixFixture()
	for _, g := range []int{16, 10, 113, 2000} {
		p := mustMix(t, src, Config{Seed: 3, Epochs: 3, GlobalBatch: g, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}, mix)
		if c := []uint64{p.Mixture.Sources[0].SamplesPerEpoch, p.Mixture.Sources[1].SamplesPerEpoch}; !slices.Equal(c, []uint64{791, 339}) || p.Mixture.EpochSamples != 1130 {
			t.Fatalf("G=%d: quotas %v of %d, want [791 339] of 1130", g, c, p.Mixture.EpochSamples)
		}
		seen := [2]map[uint64]int{{}, {}}
		for e := 0; e < 3; e++ {
			bs, _ := globalBatches(t, p, e)
			var per [2]uint64
			for k, gb := range bs {
				var cnt [2]uint64
				for _, id := range gb {
					s := p.SourceOf(id)
					cnt[s]++
					seen[s][id]++
				}
				for s, want := range []uint64{791, 339} {
					// |cnt·T − |gb|·c| < T: within one sample of the share.
					a, b := cnt[s]*1130, uint64(len(gb))*want
					if max(a, b)-min(a, b) >= 1130 {
						t.Errorf("G=%d epoch %d batch %d: source %d holds %d of %d, share %.2f", g, e, k, s, cnt[s], len(gb), float64(len(gb))*float64(want)/1130)
					}
					per[s] += cnt[s]
				}
			}
			if per != [2]uint64{791, 339} {
				t.Errorf("G=%d epoch %d: per-source samples %v, want [791 339]", g, e, per)
			}
		}
		for s, c := range []struct {
			rows, lo, extra int
		}{{1000, 2, 373}, {130, 7, 107}} {
			if len(seen[s]) != c.rows {
				t.Errorf("G=%d source %d: %d distinct rows drawn, want %d", g, s, len(seen[s]), c.rows)
			}
			hi := 0
			for _, n := range seen[s] {
				switch n {
				case c.lo:
				case c.lo + 1:
					hi++
				default:
					t.Errorf("G=%d source %d: a row drawn %d times, want %d or %d", g, s, n, c.lo, c.lo+1)
				}
			}
			if hi != c.extra {
				t.Errorf("G=%d source %d: %d rows drawn %d times, want %d", g, s, hi, c.lo+1, c.extra)
			}
		}
	}
}

// TestMixturePasses: each pass of a source's stream draws every row once
// — the first 1000 draws of web (epoch 0 and 209 of epoch 1) are its 1000
// rows — and shuffle none draws each source in row order.
func TestMixturePasses(t *testing.T) {
	src, mix := mixFixture()
	for _, mode := range []Shuffle{ShuffleGlobal, ShuffleNone} {
		p := mustMix(t, src, Config{Seed: 9, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 1, Shuffle: mode, Remainder: RemainderPartial}, mix)
		var web []uint64
		for e := 0; e < 2; e++ {
			bs, _ := globalBatches(t, p, e)
			for _, gb := range bs {
				for _, id := range gb {
					if p.SourceOf(id) == 0 {
						web = append(web, id)
					}
				}
			}
		}
		first := slices.Clone(web[:1000])
		if mode == ShuffleNone {
			// row order of web: a-0 (ids 0..599), then c-1 (after b-0's 80 rows).
			var want []uint64
			for id := uint64(0); id < 600; id++ {
				want = append(want, id)
			}
			for id := uint64(680); id < 1080; id++ {
				want = append(want, id)
			}
			if !slices.Equal(first, want) {
				t.Errorf("shuffle none: web's first pass is not its row order")
			}
		}
		slices.Sort(first)
		if d := len(slices.Compact(first)); d != 1000 {
			t.Errorf("%s: web's first 1000 draws hold %d distinct rows, want 1000", mode, d)
		}
	}
}

// TestMixtureWorldSizes: the order, the epoch digests and the order
// fingerprint do not depend on R or W, and a cursor taken at R=2 resumes
// the same global batches at R=8.
func TestMixtureWorldSizes(t *testing.T) {
	src, mix := mixFixture()
	for _, rem := range allRemainders {
		var ref *Plan
		var refBatches [][][]uint64
		for _, rw := range [][2]int{{1, 1}, {2, 3}, {8, 1}, {8, 4}} {
			p := mustMix(t, src, Config{Seed: 5, Epochs: 3, GlobalBatch: 16, WorldSize: rw[0], Workers: rw[1], Shuffle: ShuffleGlobal, Remainder: rem}, mix)
			var all [][][]uint64
			for e := 0; e < 3; e++ {
				bs, _ := globalBatches(t, p, e)
				all = append(all, bs)
			}
			if ref == nil {
				ref, refBatches = p, all
				continue
			}
			if p.OrderFingerprint != ref.OrderFingerprint || p.Fingerprint == ref.Fingerprint {
				t.Errorf("%s R=%d W=%d: order fingerprint %s (want %s), plan fingerprint must differ", rem, rw[0], rw[1], p.OrderFingerprint, ref.OrderFingerprint)
			}
			for e := range p.Epochs {
				if p.Epochs[e].Digest != ref.Epochs[e].Digest {
					t.Errorf("%s R=%d W=%d: epoch %d digest differs from R=1", rem, rw[0], rw[1], e)
				}
			}
			if fmt.Sprint(all) != fmt.Sprint(refBatches) {
				t.Errorf("%s R=%d W=%d: global batches differ from R=1", rem, rw[0], rw[1])
			}
			// Resume: the cursor of (epoch 1, step 5) made at R=1 gives
			// the same next global batches here.
			c := ref.CursorAt(1, 5)
			e, k, done, err := p.Resume(c)
			if err != nil || done || e != 1 || k != 5 {
				t.Fatalf("%s: Resume = %d %d %v %v", rem, e, k, done, err)
			}
		}
	}
}

// TestMixtureOccurrences: Occurrences and Position invert RankBatch for
// every id (pads and repeats included), and Dropped lists exactly the
// draws of the last, partial batch under remainder drop.
func TestMixtureOccurrences(t *testing.T) {
	src, mix := mixFixture()
	for _, rem := range allRemainders {
		for _, g := range []int{16, 6, 1500} {
			p := mustMix(t, src, Config{Seed: 1, Epochs: 2, GlobalBatch: g, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: rem}, mix)
			for e := 0; e < 2; e++ {
				want := map[uint64][]Position{}
				for k := 0; k < p.Steps(); k++ {
					for r := 0; r < 2; r++ {
						ids, _, _ := p.RankBatch(e, r, k, nil)
						for s, id := range ids {
							want[id] = append(want[id], Position{Step: k, Rank: r, Slot: s})
						}
					}
				}
				for id := uint64(0); id < p.NumSamples(); id++ {
					got, err := p.Occurrences(e, id, nil)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got) != fmt.Sprint(want[id]) {
						t.Fatalf("%s G=%d epoch %d id %d: occurrences %v, want %v", rem, g, e, id, got, want[id])
					}
					pos, _ := p.Position(e, id)
					if len(want[id]) == 0 && !pos.Dropped || len(want[id]) > 0 && pos != want[id][0] {
						t.Fatalf("%s G=%d epoch %d id %d: position %+v, want first of %v", rem, g, e, id, pos, want[id])
					}
				}
				dropped, _ := p.Dropped(e)
				if uint64(len(dropped)) != p.Derived.DroppedPerEpoch {
					t.Errorf("%s G=%d: %d dropped, derived says %d", rem, g, len(dropped), p.Derived.DroppedPerEpoch)
				}
				if rem == RemainderDrop && uint64(len(dropped)) != 1130%uint64(g) {
					t.Errorf("%s G=%d: %d dropped, want T mod G = %d", rem, g, len(dropped), 1130%g)
				}
			}
		}
	}
}

// TestMergeSlotIn checks slotIn, the closed-form inverse of merge, against
// merge itself on every composition of small batches, and that merge is a
// low-discrepancy interleave: every prefix of a batch holds each source's
// share of it to within one sample.
func TestMergeSlotIn(t *testing.T) {
	for a := uint64(0); a <= 7; a++ {
		for b := uint64(0); b <= 7; b++ {
			for c := uint64(0); c <= 5; c++ {
				cnt := []uint64{a, b, c}
				tot := a + b + c
				seen := make([]uint64, 3)
				merge(cnt, tot, func(q uint64, i int, j uint64) {
					if j != seen[i] {
						t.Fatalf("%v: source %d draw %d out of order", cnt, i, j)
					}
					seen[i]++
					if got := slotIn(cnt, i, j); got != q {
						t.Fatalf("%v: slotIn(%d, %d) = %d, merge put it at %d", cnt, i, j, got, q)
					}
					for s := range cnt {
						// |seen_s·tot − (q+1)·cnt_s| < tot... within 1 sample.
						x, y := seen[s]*tot, (q+1)*cnt[s]
						if max(x, y)-min(x, y) > tot {
							t.Fatalf("%v: prefix %d holds %d of source %d", cnt, q+1, seen[s], s)
						}
					}
				})
				if !slices.Equal(seen, cnt) {
					t.Fatalf("%v: merged %v", cnt, seen)
				}
			}
		}
	}
}

// TestMixtureCompositionBrute checks the per-batch composition over many
// small quotas and batch sizes: exact totals per epoch and every batch
// (full or partial) within one sample of its share.
func TestMixtureCompositionBrute(t *testing.T) {
	for _, c := range [][]uint64{{1, 1, 1}, {5, 0 + 1, 9}, {7, 3}, {1, 2, 3, 4, 5}, {13, 1}, {2, 2, 2, 2, 9}, {100, 37, 1, 1}} {
		var tt uint64
		for _, x := range c {
			tt += x
		}
		for g := uint64(1); g <= tt+3; g++ {
			srcs := make([]mixSrc, len(c))
			for i := range c {
				srcs[i] = mixSrc{n: 1, c: c[i]}
			}
			ms := newMixState(&sourceIndex{}, srcs, tt, Config{GlobalBatch: int(g)})
			cnt, start := make([]uint64, len(c)), make([]uint64, len(c))
			tot := make([]uint64, len(c))
			for b := uint64(0); b < ms.batches(); b++ {
				ms.counts(b, cnt, start)
				size := min(g, tt-b*g)
				var sum uint64
				for i := range c {
					if start[i] != tot[i] {
						t.Fatalf("c=%v G=%d batch %d: source %d starts at %d, drew %d before", c, g, b, i, start[i], tot[i])
					}
					x, y := cnt[i]*tt, size*c[i]
					if max(x, y)-min(x, y) >= tt && !(x > y && x-y == tt) {
						t.Fatalf("c=%v G=%d batch %d: source %d holds %d of %d", c, g, b, i, cnt[i], size)
					}
					if cnt[i]*tt < y && y-cnt[i]*tt >= tt {
						t.Fatalf("c=%v G=%d batch %d: source %d holds %d of %d (below floor)", c, g, b, i, cnt[i], size)
					}
					sum += cnt[i]
					tot[i] += cnt[i]
				}
				if sum != size {
					t.Fatalf("c=%v G=%d batch %d: %d samples, want %d", c, g, b, sum, size)
				}
			}
			if !slices.Equal(tot, c) {
				t.Fatalf("c=%v G=%d: epoch totals %v", c, g, tot)
			}
		}
	}
}

// TestMixtureWeights: unweighted sources take their share by rows, weights
// are normalised, and largest-remainder rounding gives exact totals.
func TestMixtureWeights(t *testing.T) {
	src, mix := mixFixture()
	cfg := Config{Seed: 1, Epochs: 1, GlobalBatch: 10, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}
	for _, c := range []struct {
		w1, w2 string
		t      uint64
		want   []uint64
	}{
		{"", "", 0, []uint64{1000, 130}},     // by rows: the plain pool's shares
		{"7", "3", 0, []uint64{791, 339}},    // normalised
		{"1", "1", 1001, []uint64{501, 500}}, // 500.5 each: the tie goes to the lower index
		// web 2, code 130/1130: W = 2390/1130, web 1130·2/W = 1068.53, code
		// 130/W = 61.46; floors 1068 + 61 leave one sample for web.
		{"2", "", 0, []uint64{1069, 61}},
		{"0.000000000000000001", "1", 7, []uint64{0, 7}},
	} {
		m := *mix
		m.Sources = slices.Clone(mix.Sources)
		m.Sources[0].Weight, m.Sources[1].Weight, m.EpochSamples = c.w1, c.w2, c.t
		p := mustMix(t, src, cfg, &m)
		got := []uint64{p.Mixture.Sources[0].SamplesPerEpoch, p.Mixture.Sources[1].SamplesPerEpoch}
		if !slices.Equal(got, c.want) {
			t.Errorf("weights %q %q T=%d: quotas %v, want %v", c.w1, c.w2, c.t, got, c.want)
		}
	}
}

// TestMixtureRefused: bad mixtures are refused naming the source.
func TestMixtureRefused(t *testing.T) {
	src, mix := mixFixture()
	cfg := Config{Seed: 1, Epochs: 1, GlobalBatch: 10, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}
	for _, c := range []struct {
		edit func(m *Mixture, c *Config)
		want string
	}{
		{func(m *Mixture, c *Config) { m.Sources[1].Weight = "0" }, "source code: weight 0 must be greater than 0"},
		{func(m *Mixture, c *Config) { m.Sources[1].Weight = "-0.3" }, `source code: weight "-0.3" is not a plain decimal`},
		{func(m *Mixture, c *Config) { m.Sources[0].Weight = "1e3" }, `source web: weight "1e3"`},
		{func(m *Mixture, c *Config) { m.Sources[1].Name = "web" }, `sources 0 and 1 are both named "web"`},
		{func(m *Mixture, c *Config) {
			m.Sources[1].Files = []string{"b-0.parquet", "c-1.parquet", "d-1.parquet"}
		}, "file c-1.parquet is in both source web and source code"},
		{func(m *Mixture, c *Config) { m.Sources[1].Files = []string{"b-0.parquet"} }, "file d-1.parquet belongs to no source"},
		{func(m *Mixture, c *Config) { m.Sources[1].Files = []string{"d-2.parquet"}; m.Sources[0].Files = nil }, "belongs to no source"},
		{func(m *Mixture, c *Config) { c.Shuffle, c.Window = ShuffleBlocks, 2 }, "shuffle blocks permutes the row groups of one pool"},
		{func(m *Mixture, c *Config) { c.Shuffle = ShufflePartitioned }, "shuffle partitioned"},
		{func(m *Mixture, c *Config) { m.Sources = nil }, "at least one source"},
	} {
		m := *mix
		m.Sources = slices.Clone(mix.Sources)
		cf := cfg
		c.edit(&m, &cf)
		_, err := NewMixtureContext(context.Background(), src, cf, &m, nil)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want ErrConfig with %q", err, c.want)
		}
	}
	// A source whose files hold no rows.
	m := *mix
	m.Sources = append(slices.Clone(mix.Sources), MixSource{Name: "empty", Files: []string{"d-2.parquet"}})
	m.Sources[1].Files = []string{"b-0.parquet", "d-1.parquet"}
	if _, err := NewMixtureContext(context.Background(), src, cfg, &m, nil); err == nil || !strings.Contains(err.Error(), "source empty has no rows") {
		t.Errorf("empty source: %v", err)
	}
}

// TestMixtureFileRoundTrip: a mixture plan saves and loads to the same
// bytes; a plan file whose mixture was edited is refused.
func TestMixtureFileRoundTrip(t *testing.T) {
	src, mix := mixFixture()
	p := mustMix(t, src, Config{Seed: 2, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPad}, mix)
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := q.Marshal()
	if string(b) != string(b2) {
		t.Fatalf("round trip changed the bytes")
	}
	for _, edit := range [][2]string{
		{`"weight": "0.3"`, `"weight": "0.4"`},
		{`"samples_per_epoch": 339`, `"samples_per_epoch": 338`},
		{`"epoch_samples": 1130`, `"epoch_samples": 1131`},
	} {
		if !strings.Contains(string(b), edit[0]) {
			t.Fatalf("plan file lacks %s", edit[0])
		}
		if _, err := Parse([]byte(strings.Replace(string(b), edit[0], edit[1], 1))); !errors.Is(err, ErrFormat) {
			t.Errorf("edit %s -> %s: %v, want ErrFormat", edit[0], edit[1], err)
		}
	}
}

// TestMixtureResume resumes a mixture from every global step, and through
// a chain of resumes hopping between plans with R = 1, 2 and 8 every three
// steps, and compares with the uninterrupted run.
func TestMixtureResume(t *testing.T) {
	src, mix := mixFixture()
	plans := map[int]*Plan{}
	for _, r := range []int{1, 2, 8} {
		plans[r] = mustMix(t, src, Config{Seed: 8, Epochs: 3, GlobalBatch: 16, WorldSize: r, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderPad}, mix)
	}
	p := plans[1]
	var full []uint64
	for e := 0; e < 3; e++ {
		bs, _ := globalBatches(t, p, e)
		for _, b := range bs {
			full = append(full, b...)
		}
	}
	// step runs steps global steps (-1: to the end) from cursor c on q.
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
	total := 3 * p.Steps()
	for s := 0; s <= total; s++ {
		for _, r := range []int{2, 8} {
			got, _ := step(plans[r], Cursor{Fingerprint: p.OrderFingerprint, GlobalStep: uint64(s)}, -1)
			if !slices.Equal(got, full[s*16:]) {
				t.Fatalf("R=%d: resume at global step %d differs from the uninterrupted tail", r, s)
			}
		}
	}
	var chained []uint64
	c := p.CursorAt(0, 0)
	for i := 0; ; i++ {
		var got []uint64
		got, c = step(plans[[]int{1, 2, 8}[i%3]], c, 3)
		if len(got) == 0 {
			break
		}
		chained = append(chained, got...)
	}
	if !slices.Equal(chained, full) {
		t.Fatalf("chained resumes across R = 1, 2, 8 differ from the uninterrupted run")
	}
}

// selFixture is mixFixture with a filter on code selecting its rows 3-12,
// 20 and 60-99 (51 rows; ids 603-612, 620, then rows 60-79 of b-0 are ids
// 660-679 and rows 80-99 are d-1's first 20, ids 1080-1099).
func selFixture() (Source, *Mixture, map[uint64]bool) {
	src, mix := mixFixture()
	m := *mix
	m.Sources = slices.Clone(mix.Sources)
	m.Sources[1].Filter = "n > 0"
	m.Sources[1].Selection = EncodeSelection([][2]uint64{{3, 10}, {20, 1}, {60, 40}})
	want := map[uint64]bool{620: true}
	for id := uint64(603); id < 613; id++ {
		want[id] = true
	}
	for id := uint64(660); id < 680; id++ {
		want[id] = true
	}
	for id := uint64(1080); id < 1100; id++ {
		want[id] = true
	}
	return src, &m, want
}

// TestMixtureSelection: a filtered source draws only its selected rows,
// each the documented number of times (51 rows, 0.3 of T = 1051 → 315 per
// epoch, 3 epochs: 945 = 18·51 + 27 → 18 or 19 times, 27 rows 19 times);
// unweighted shares count selected rows; the order is independent of R;
// Occurrences inverts RankBatch.
// TestEncodeSelection: the §11.7 bytes (uvarint gap from the previous
// range's end, uvarint length; one byte each below 128, more above) in
// base64, the same from a slice, from a sequence of ranges and from the
// bytes in pieces; none: "".
func TestEncodeSelection(t *testing.T) {
	ranges := [][2]uint64{{0, 1}, {5, 300}, {1 << 40, 2}, {1 << 43, 127}}
	const want = "AAEErALP/f///x8C/v/////fAX8=" // 00 01, 04 ac02, cffdffffff1f 02, feffffffffdf01 7f
	if got := EncodeSelection(ranges); got != want {
		t.Errorf("EncodeSelection = %s, want %s", got, want)
	}
	seq := func(yield func(uint64, uint64) bool) {
		for _, r := range ranges {
			if !yield(r[0], r[1]) {
				return
			}
		}
	}
	if got := EncodeSelectionSeq(seq, 0); got != want {
		t.Errorf("EncodeSelectionSeq = %s, want %s", got, want)
	}
	// The same bytes in pieces of any length, as SetSelectionUvarints
	// takes them.
	raw, _ := base64.StdEncoding.DecodeString(want)
	pieces := func(yield func([]byte) bool) {
		for _, p := range [][]byte{raw[:1], nil, raw[1:5], raw[5:6], raw[6:]} {
			if !yield(p) {
				return
			}
		}
	}
	var ms MixSource
	if ms.SetSelectionUvarints(pieces, 4, 1); ms.Selection != want {
		t.Errorf("SetSelectionUvarints: %s, want %s", ms.Selection, want)
	}
	if got := EncodeSelection(nil); got != "" {
		t.Errorf("EncodeSelection(nil) = %q, want \"\"", got)
	}
}

func TestMixtureSelection(t *testing.T) {
	src, mix, sel := selFixture()
	p := mustMix(t, src, Config{Seed: 6, Epochs: 3, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}, mix)
	ms := p.Mixture.Sources[1]
	if ms.Rows != 51 || p.Mixture.EpochSamples != 1051 || ms.SamplesPerEpoch != 315 || !strings.HasPrefix(ms.SelectionDigest, "sha256:") {
		t.Fatalf("code: %+v, T %d", ms, p.Mixture.EpochSamples)
	}
	seen := map[uint64]int{}
	for e := 0; e < 3; e++ {
		bs, _ := globalBatches(t, p, e)
		for _, gb := range bs {
			for _, id := range gb {
				if p.SourceOf(id) == 1 {
					if !sel[id] {
						t.Fatalf("epoch %d: unselected id %d drawn", e, id)
					}
					seen[id]++
				}
			}
		}
		for id := uint64(0); id < p.NumSamples(); id++ {
			occ, _ := p.Occurrences(e, id, nil)
			if p.SourceOf(id) == 1 && !sel[id] && len(occ) > 0 {
				t.Fatalf("unselected id %d has occurrences %v", id, occ)
			}
		}
	}
	hi := 0
	for id := range sel {
		switch seen[id] {
		case 18:
		case 19:
			hi++
		default:
			t.Errorf("selected id %d drawn %d times, want 18 or 19", id, seen[id])
		}
	}
	if hi != 27 {
		t.Errorf("%d rows drawn 19 times, want 27", hi)
	}
	q := mustMix(t, src, Config{Seed: 6, Epochs: 3, GlobalBatch: 16, WorldSize: 8, Workers: 3, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}, mix)
	if q.OrderFingerprint != p.OrderFingerprint || q.Epochs[2].Digest != p.Epochs[2].Digest {
		t.Errorf("R=8 changes the order of a filtered mixture")
	}
	// Another filter text, or another selection, is another order.
	for _, edit := range []func(m *Mixture){
		func(m *Mixture) { m.Sources[1].Filter = "n >= 1" },
		func(m *Mixture) { m.Sources[1].Selection = EncodeSelection([][2]uint64{{3, 10}, {20, 1}, {60, 39}}) },
	} {
		m := *mix
		m.Sources = slices.Clone(mix.Sources)
		edit(&m)
		if r := mustMix(t, src, p.Config, &m); r.OrderFingerprint == p.OrderFingerprint {
			t.Errorf("edited filter or selection keeps the order fingerprint")
		}
	}
	b, _ := p.Marshal()
	if r, err := Parse(b); err != nil || r.Fingerprint != p.Fingerprint {
		t.Fatalf("round trip: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(string(b), ms.SelectionDigest, "sha256:"+strings.Repeat("0", 64), 1))); !errors.Is(err, ErrFormat) {
		t.Errorf("edited selection digest: %v", err)
	}
	for _, c := range []struct{ filter, sel, want string }{
		{"n > 0", "", `source code: filter "n > 0" selects no row`},
		{"", EncodeSelection([][2]uint64{{1, 1}}), "source code has a selection but no filter"},
		{"n > 0", EncodeSelection([][2]uint64{{100, 31}}), "past the source's 130 rows"},
		{"n > 0", EncodeSelection([][2]uint64{{1, 1}, {2, 1}}), "adjacent"},
		{"n > 0", "!!", "not base64"},
	} {
		m := *mix
		m.Sources = slices.Clone(mix.Sources)
		m.Sources[1].Filter, m.Sources[1].Selection = c.filter, c.sel
		if _, err := NewMixtureContext(context.Background(), src, p.Config, &m, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v, want %q", c.filter, c.sel, err, c.want)
		}
	}
}

// TestMixtureSelectionLarge: a selection of many ranges (every third row
// of 10000, and runs of 1..7 rows) maps local rows through its jump table
// exactly: with shuffle none an epoch lists the selected rows in order.
func TestMixtureSelectionLarge(t *testing.T) {
	for _, limit := range []uint64{selDirectMax, 0} { // by table, by search
		selDirectLimit = limit
		testMixtureSelectionLarge(t)
	}
	selDirectLimit = selDirectMax
}

func testMixtureSelectionLarge(t *testing.T) {
	src := synthSource(rowGroups(6000, 333), rowGroups(4000, 1000))
	for _, step := range []uint64{3, 0} {
		var ranges [][2]uint64
		var want []uint64
		for r, k := uint64(0), uint64(1); r < 10000; k = k%7 + 1 {
			n := k
			if step != 0 {
				n = 1
			}
			n = min(n, 10000-r)
			ranges = append(ranges, [2]uint64{r, n})
			for x := r; x < r+n; x++ {
				want = append(want, x)
			}
			if step != 0 {
				r += step
			} else {
				r += n + k
			}
		}
		mix := &Mixture{Sources: []MixSource{{Name: "s", Files: []string{"part-000.parquet", "part-001.parquet"}, Filter: "x", Selection: EncodeSelection(ranges)}}}
		p := mustMix(t, src, Config{Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderPartial}, mix)
		bs, _ := globalBatches(t, p, 0)
		var got []uint64
		for _, b := range bs {
			got = append(got, b...)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("table limit %d, step %d: %d ids, want %d; first difference at %d", selDirectLimit, step, len(got), len(want), firstDiff(got, want))
		}
		for _, id := range []uint64{want[0], want[len(want)/2], want[len(want)-1]} {
			if occ, _ := p.Occurrences(0, id, nil); len(occ) != 1 {
				t.Errorf("id %d: occurrences %v", id, occ)
			}
		}
	}
}

func firstDiff(a, b []uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSetSelectionUvarints: the text is the standard base64 of the
// same bytes however they are cut into pieces (the two halves written
// apart meet at a whole 3-byte group); a plan made from the pieces is the
// plan made from the text, byte for byte; pieces that hold another number
// of rows than counted are refused; a text set after them wins.
func TestSetSelectionUvarints(t *testing.T) {
	raw := make([]byte, 0, 200)
	for i := range 200 {
		raw = append(raw, byte(i*37+i/7))
	}
	for n := 0; n <= len(raw); n += 1 + n/16 {
		want := base64.StdEncoding.EncodeToString(raw[:n])
		for _, cuts := range [][]int{{}, {1}, {n / 2}, {n / 3, n/3 + 1, 2 * n / 3}, {0, 2, 5, 7, n - 1}} {
			var pieces [][]byte
			at := 0
			for _, c := range cuts {
				c = min(max(c, at), n)
				pieces = append(pieces, raw[at:c])
				at = c
			}
			pieces = append(pieces, raw[at:n])
			var ms MixSource
			ms.SetSelectionUvarints(slices.Values(pieces), n, 1)
			if ms.Selection != want {
				t.Fatalf("%d bytes cut at %v: %q, want %q", n, cuts, ms.Selection, want)
			}
		}
	}

	src, mix, _ := selFixture()
	cfg := Config{Seed: 6, Epochs: 3, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderPartial}
	want, err := marshalIndent(mustMix(t, src, cfg, mix))
	if err != nil {
		t.Fatal(err)
	}
	text := mix.Sources[1].Selection
	b, _ := base64.StdEncoding.DecodeString(text) // {3,10} {20,1} {60,40}: 03 0a 07 01 27 28
	fromPieces := func(rows uint64) *Mixture {
		m := *mix
		m.Sources = slices.Clone(mix.Sources)
		m.Sources[1].SetSelectionUvarints(slices.Values([][]byte{b[:2], b[2:4], b[4:]}), len(b), rows)
		if m.Sources[1].Selection != text {
			t.Fatalf("text %q, want %q", m.Sources[1].Selection, text)
		}
		return &m
	}
	got, err := marshalIndent(mustMix(t, src, cfg, fromPieces(51)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan from the pieces differs from the plan from the text:\n%s\nwant\n%s", got, want)
	}
	for rows, msg := range map[uint64]string{50: "holds more than the 50 rows counted", 52: "holds 51 rows, not the 52 counted"} {
		_, err := NewMixtureContext(context.Background(), src, cfg, fromPieces(rows), nil)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("counted %d: error %v, want one saying %q", rows, err, msg)
		}
	}
	m := fromPieces(52)
	m.Sources[1].Selection = text[:len(text)-1] + text[len(text)-1:] // the same text, other memory
	got, err = marshalIndent(mustMix(t, src, cfg, m))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan from a text set after the pieces differs from the plan from the text")
	}
}
