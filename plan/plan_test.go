package plan

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// synthSource makes a source with the given row groups per file
// (file i is "part-<i>.parquet").
func synthSource(files ...[]int64) Source {
	var s Source
	for i, rg := range files {
		s.Files = append(s.Files, SourceFile{
			Path:         fmt.Sprintf("part-%03d.parquet", i),
			Size:         int64(1000 + i),
			FooterSHA256: fmt.Sprintf("%064x", i+1),
			RowGroups:    rg,
		})
	}
	return s
}

// rowGroups splits n rows into row groups of at most g rows.
func rowGroups(n, g int64) []int64 {
	var rg []int64
	for n > 0 {
		k := min(n, g)
		rg = append(rg, k)
		n -= k
	}
	return rg
}

func mustNew(t testing.TB, src Source, cfg Config) *Plan {
	t.Helper()
	p, err := New(src, cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	return p
}

var allModes = []Shuffle{ShuffleNone, ShuffleGlobal, ShuffleBlocks, ShufflePartitioned}
var allRemainders = []Remainder{RemainderDrop, RemainderPad, RemainderPartial}

func cfgFor(mode Shuffle, rem Remainder, g, r, w int) Config {
	c := Config{Seed: 11, Epochs: 2, GlobalBatch: g, WorldSize: r, Workers: w, Shuffle: mode, Remainder: rem}
	if mode == ShuffleBlocks {
		c.Window = 2
	}
	return c
}

type slot struct {
	id  uint64
	pad bool
}

// epochSlots returns every (rank, step) batch of epoch e.
func epochSlots(t testing.TB, p *Plan, e int) [][][]slot {
	t.Helper()
	out := make([][][]slot, p.Config.WorldSize)
	for r := range out {
		for k := 0; k < p.Steps(); k++ {
			ids, pads, err := p.RankBatch(e, r, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > p.BatchSize() || pads > len(ids) {
				t.Fatalf("rank %d step %d: %d ids, %d pads, b=%d", r, k, len(ids), pads, p.BatchSize())
			}
			var bs []slot
			for i, id := range ids {
				bs = append(bs, slot{id, i >= len(ids)-pads})
			}
			out[r] = append(out[r], bs)
		}
	}
	return out
}

// TestCoverageExactlyOnce checks, for every mode and remainder policy and
// several shapes (including N < R and N < G), that kept + dropped ids are
// [0, N) exactly once per epoch, pads are flagged, trailing and repeat kept
// ids, per-rank step counts are equal, counts match Derived, and Position
// inverts RankBatch.
func TestCoverageExactlyOnce(t *testing.T) {
	sources := map[string]Source{
		"b27":    synthSource([]int64{16, 16, 8}, []int64{16, 16, 8}, []int64{16, 7}),
		"five":   synthSource([]int64{5}),
		"empty":  synthSource(),
		"skewed": synthSource([]int64{1, 50, 0, 3}, []int64{33}, []int64{2, 2, 2}),
		"single": synthSource([]int64{1}),
	}
	shapes := [][3]int{{4, 4, 3}, {8, 2, 1}, {1, 1, 1}, {12, 3, 2}, {16, 4, 5}}
	for name, src := range sources {
		for _, mode := range allModes {
			for _, rem := range allRemainders {
				for _, sh := range shapes {
					cfg := cfgFor(mode, rem, sh[0], sh[1], sh[2])
					t.Run(fmt.Sprintf("%s/%s/%s/G%dR%dW%d", name, mode, rem, sh[0], sh[1], sh[2]), func(t *testing.T) {
						p, err := New(src, cfg)
						if mode == ShufflePartitioned && rem == RemainderPad && err != nil {
							if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "no row group") {
								t.Fatalf("unexpected error %v", err)
							}
							return
						}
						if err != nil {
							t.Fatal(err)
						}
						checkCoverage(t, p)
					})
				}
			}
		}
	}
}

func checkCoverage(t *testing.T, p *Plan) {
	n := p.NumSamples()
	for e := 0; e < p.Config.Epochs; e++ {
		seen := make([]int, n)
		var kept, padded uint64
		batches := epochSlots(t, p, e)
		for r, steps := range batches {
			if len(steps) != p.Steps() {
				t.Fatalf("rank %d has %d steps, want %d", r, len(steps), p.Steps())
			}
			for k, bs := range steps {
				inPad := false
				for i, s := range bs {
					if s.id >= n {
						t.Fatalf("epoch %d rank %d step %d: id %d >= N=%d", e, r, k, s.id, n)
					}
					if s.pad {
						inPad = true
						padded++
						continue
					}
					if inPad {
						t.Fatalf("epoch %d rank %d step %d: real sample after a pad", e, r, k)
					}
					seen[s.id]++
					kept++
					pos, err := p.Position(e, s.id)
					if err != nil || pos != (Position{Step: k, Rank: r, Slot: i}) {
						t.Fatalf("Position(%d, %d) = %+v, %v; want step %d rank %d slot %d", e, s.id, pos, err, k, r, i)
					}
				}
				if p.Config.Remainder != RemainderPad && inPad {
					t.Fatalf("pad without remainder pad")
				}
				if p.Config.Shuffle != ShufflePartitioned && inPad && k != p.Steps()-1 {
					t.Fatalf("pad in step %d, not the last", k)
				}
				if p.Config.Remainder != RemainderPartial && len(bs) != p.BatchSize() {
					t.Fatalf("rank %d step %d: %d samples, want b=%d", r, k, len(bs), p.BatchSize())
				}
			}
		}
		// Occurrences lists every slot holding an id, pads included, in
		// (step, rank, slot) order.
		occ := make([][]Position, n)
		for r, steps := range batches {
			for k, bs := range steps {
				for i, s := range bs {
					occ[s.id] = append(occ[s.id], Position{Step: k, Rank: r, Slot: i})
				}
			}
		}
		var got []Position
		for id := range occ {
			want := occ[id]
			slices.SortFunc(want, func(a, b Position) int {
				return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Slot, b.Slot))
			})
			got, err := p.Occurrences(e, uint64(id), got)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("Occurrences(%d, %d) = %+v, %v; want %+v", e, id, got, err, want)
			}
		}
		dropped, err := p.Dropped(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range dropped {
			seen[id]++
			pos, err := p.Position(e, id)
			if err != nil || !pos.Dropped {
				t.Fatalf("Position(%d, dropped %d) = %+v, %v", e, id, pos, err)
			}
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("epoch %d: id %d kept or dropped %d times", e, id, c)
			}
		}
		if uint64(len(dropped)) != p.Derived.DroppedPerEpoch || padded != p.Derived.PaddedPerEpoch {
			t.Fatalf("dropped %d padded %d, derived %+v", len(dropped), padded, p.Derived)
		}
		if kept+uint64(len(dropped)) != n {
			t.Fatalf("kept %d + dropped %d != N %d", kept, len(dropped), n)
		}
	}
}

// TestRanksAndWorkersPartitionTheEpoch checks that worker slices are
// disjoint and their union over (rank, worker) is the whole epoch.
func TestRanksAndWorkersPartitionTheEpoch(t *testing.T) {
	src := synthSource(rowGroups(40, 16), rowGroups(40, 16), rowGroups(23, 16))
	for _, mode := range allModes {
		for _, w := range []int{1, 2, 3, 7} {
			p := mustNew(t, src, cfgFor(mode, RemainderPartial, 8, 4, w))
			seen := map[uint64]string{}
			covered := map[int]int{}
			for r := 0; r < 4; r++ {
				for wk := 0; wk < w; wk++ {
					for _, k := range p.WorkerSteps(wk) {
						if p.Worker(k) != wk {
							t.Fatalf("Worker(%d) = %d, want %d", k, p.Worker(k), wk)
						}
						covered[k]++
						ids, _, _ := p.RankBatch(0, r, k, nil)
						for _, id := range ids {
							who := fmt.Sprintf("rank %d worker %d", r, wk)
							if prev, dup := seen[id]; dup {
								t.Fatalf("%s: id %d in %s and %s", mode, id, prev, who)
							}
							seen[id] = who
						}
					}
				}
			}
			if len(seen) != 103 {
				t.Fatalf("%s W=%d: union has %d ids, want 103", mode, w, len(seen))
			}
			for k := 0; k < p.Steps(); k++ {
				if covered[k] != 4 {
					t.Fatalf("step %d produced %d times over 4 ranks", k, covered[k])
				}
			}
		}
	}
}

// globalSequence concatenates the rank batches of every step of epoch e.
func globalSequence(t testing.TB, p *Plan, e int) []slot {
	var seq []slot
	b := epochSlots(t, p, e)
	for k := 0; k < p.Steps(); k++ {
		for r := range b {
			seq = append(seq, b[r][k]...)
		}
	}
	return seq
}

// TestOrderIndependentOfRanksAndWorkers checks that the global batch
// sequence, the epoch digest and the order fingerprint are the same for
// every R dividing G and every W (all modes but partitioned).
func TestOrderIndependentOfRanksAndWorkers(t *testing.T) {
	src := synthSource(rowGroups(250, 64), rowGroups(250, 64), rowGroups(77, 10))
	const g = 12
	for _, mode := range []Shuffle{ShuffleNone, ShuffleGlobal, ShuffleBlocks} {
		for _, rem := range allRemainders {
			ref := mustNew(t, src, cfgFor(mode, rem, g, 1, 1))
			want := globalSequence(t, ref, 1)
			for _, r := range []int{1, 2, 3, 4, 6, 12} {
				for _, w := range []int{1, 2, 5} {
					p := mustNew(t, src, cfgFor(mode, rem, g, r, w))
					if got := globalSequence(t, p, 1); !slices.Equal(got, want) {
						t.Fatalf("%s/%s R=%d W=%d: global sequence differs from R=1 W=1", mode, rem, r, w)
					}
					if p.Epochs[1].Digest != ref.Epochs[1].Digest || p.OrderFingerprint != ref.OrderFingerprint {
						t.Fatalf("%s/%s R=%d W=%d: digest or order fingerprint differs", mode, rem, r, w)
					}
					if r != 1 && p.Fingerprint == ref.Fingerprint {
						t.Fatalf("plan fingerprint ignores world size")
					}
				}
			}
		}
	}
}

// TestResumeEqualsUninterruptedTail resumes from every step, and through a
// chain of resumes across plans with different R, and compares with the
// uninterrupted run.
func TestResumeEqualsUninterruptedTail(t *testing.T) {
	src := synthSource(rowGroups(100, 7), rowGroups(31, 31))
	for _, mode := range allModes {
		cfg := cfgFor(mode, RemainderDrop, 8, 2, 2)
		cfg.Epochs = 3
		p := mustNew(t, src, cfg)
		var full []slot
		for e := 0; e < cfg.Epochs; e++ {
			full = append(full, globalSequence(t, p, e)...)
		}
		run := func(p *Plan, c Cursor, steps int) ([]slot, Cursor) {
			e, k, done, err := p.Resume(c)
			if err != nil {
				t.Fatal(err)
			}
			var out []slot
			for ; !done && steps != 0; steps-- {
				for r := 0; r < p.Config.WorldSize; r++ {
					ids, pads, err := p.RankBatch(e, r, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					for i, id := range ids {
						out = append(out, slot{id, i >= len(ids)-pads})
					}
				}
				if k++; k == p.Steps() {
					e, k = e+1, 0
					done = e == p.Config.Epochs
				}
			}
			return out, p.CursorAt(e, k)
		}
		slotsPerStep := cfg.GlobalBatch
		total := cfg.Epochs * p.Steps()
		for s := 0; s <= total; s++ {
			got, _ := run(p, Cursor{Fingerprint: p.OrderFingerprint, GlobalStep: uint64(s)}, -1)
			if !slices.Equal(got, full[s*slotsPerStep:]) {
				t.Fatalf("%s: resume at global step %d differs from the uninterrupted tail", mode, s)
			}
		}
		// Repeated resumes, hopping between plans with R=1, 2, 4 (same order
		// except in partitioned mode, where R is part of the order).
		worlds := []int{1, 2, 4}
		if mode == ShufflePartitioned {
			worlds = []int{2}
		}
		var got []slot
		c := p.CursorAt(0, 0)
		for i := 0; ; i++ {
			cfg2 := cfg
			cfg2.WorldSize = worlds[i%len(worlds)]
			q := mustNew(t, src, cfg2)
			part, next := run(q, c, 1+i%3)
			if len(part) == 0 {
				break
			}
			got, c = append(got, part...), next
		}
		if !slices.Equal(got, full) {
			t.Fatalf("%s: chained resumes differ from the uninterrupted run", mode)
		}
	}
	p := mustNew(t, src, cfgFor(ShuffleGlobal, RemainderDrop, 8, 2, 2))
	q := mustNew(t, src, Config{Seed: 12, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 2, Shuffle: ShuffleGlobal, Remainder: RemainderDrop})
	if _, _, _, err := q.Resume(p.CursorAt(1, 0)); !errors.Is(err, ErrMismatch) {
		t.Fatalf("resume with another seed's cursor: %v, want ErrMismatch", err)
	}
}

func TestEpochsDifferAndSeedsDiffer(t *testing.T) {
	src := synthSource(rowGroups(1000, 64))
	mk := func(seed uint64, mode Shuffle) *Plan {
		c := cfgFor(mode, RemainderDrop, 10, 2, 1)
		c.Seed, c.Epochs = seed, 3
		return mustNew(t, src, c)
	}
	for _, mode := range []Shuffle{ShuffleGlobal, ShuffleBlocks, ShufflePartitioned} {
		a, b := mk(5, mode), mk(6, mode)
		if a.Epochs[0].Digest == a.Epochs[1].Digest {
			t.Errorf("%s: epoch 0 == epoch 1", mode)
		}
		// (seed, e+1) != (seed+1, e)
		if a.Epochs[1].Digest == b.Epochs[0].Digest || a.Epochs[2].Digest == b.Epochs[1].Digest {
			t.Errorf("%s: (seed, e+1) equals (seed+1, e)", mode)
		}
		if z := mk(0, mode); z.Epochs[0].Digest == mk(0, ShuffleNone).Epochs[0].Digest {
			t.Errorf("%s: seed 0 gives the unshuffled order", mode)
		}
	}
	n := mk(5, ShuffleNone)
	if n.Epochs[0].Digest != n.Epochs[1].Digest {
		t.Error("none: epoch 0 != epoch 1")
	}
}

func TestFingerprints(t *testing.T) {
	src := synthSource([]int64{10, 5}, []int64{7})
	cfg := Config{Seed: 1, Epochs: 2, GlobalBatch: 4, WorldSize: 2, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	base := mustNew(t, src, cfg)
	fps := map[string]string{"base": base.Fingerprint}
	add := func(name string, s Source, c Config) {
		p := mustNew(t, s, c)
		for other, fp := range fps {
			if fp == p.Fingerprint {
				t.Errorf("fingerprint of %q equals that of %q", name, other)
			}
		}
		fps[name] = p.Fingerprint
	}
	mutCfg := map[string]func(*Config){
		"seed":         func(c *Config) { c.Seed = 2 },
		"seed0":        func(c *Config) { c.Seed = 0 },
		"epochs":       func(c *Config) { c.Epochs = 3 },
		"global_batch": func(c *Config) { c.GlobalBatch = 6 },
		"world_size":   func(c *Config) { c.WorldSize = 1 },
		"workers":      func(c *Config) { c.Workers = 2 },
		"shuffle":      func(c *Config) { c.Shuffle = ShuffleNone },
		"blocks":       func(c *Config) { c.Shuffle, c.Window = ShuffleBlocks, 1 },
		"window":       func(c *Config) { c.Shuffle, c.Window = ShuffleBlocks, 2 },
		"remainder":    func(c *Config) { c.Remainder = RemainderPad },
	}
	for _, name := range slices.Sorted(maps.Keys(mutCfg)) {
		c := cfg
		mutCfg[name](&c)
		add(name, src, c)
	}
	mutSrc := map[string]func(*Source){
		"path":      func(s *Source) { s.Files[0].Path = "x.parquet" },
		"size":      func(s *Source) { s.Files[0].Size++ },
		"footer":    func(s *Source) { s.Files[1].FooterSHA256 = strings.Repeat("f", 64) },
		"rowgroups": func(s *Source) { s.Files[0].RowGroups = []int64{5, 10} },
		"dropfile":  func(s *Source) { s.Files = s.Files[:1] },
	}
	for _, name := range slices.Sorted(maps.Keys(mutSrc)) {
		s := synthSource([]int64{10, 5}, []int64{7})
		mutSrc[name](&s)
		add(name, s, cfg)
	}
	// Listing order, root and empty files change nothing.
	same := synthSource([]int64{10, 5}, []int64{7})
	same.Files[0], same.Files[1] = same.Files[1], same.Files[0]
	same.Root = "/mnt/elsewhere"
	same.Files = append(same.Files, SourceFile{Path: "part-000b.parquet", Size: 99, FooterSHA256: strings.Repeat("a", 64)})
	same.EmptyFiles = []SourceFile{{Path: "zzz.parquet", Size: 100, FooterSHA256: strings.Repeat("b", 64), RowGroups: []int64{0}}}
	p := mustNew(t, same, cfg)
	if p.Fingerprint != base.Fingerprint || p.SourceFingerprint != base.SourceFingerprint {
		t.Errorf("listing order, root or empty files changed the fingerprint")
	}
	if len(p.Source.EmptyFiles) != 2 || p.Source.EmptyFiles[0].Path != "part-000b.parquet" {
		t.Errorf("empty files not recorded: %+v", p.Source.EmptyFiles)
	}
	if p.Epochs[1].Digest != base.Epochs[1].Digest {
		t.Errorf("epoch digest changed")
	}
}

// TestZeroRowGroupsChangeNothing inserts zero-row row groups and empty
// files and checks that every batch and every digest stay the same, and
// that Locate names the real row-group index.
func TestZeroRowGroupsChangeNothing(t *testing.T) {
	a := synthSource([]int64{10, 5}, []int64{7, 3})
	b := synthSource([]int64{0, 10, 0, 5, 0}, []int64{}, []int64{7, 0, 3})
	b.Files[1].Path, b.Files[2].Path = "part-001.parquet", "part-002.parquet"
	a.Files[1].Path = "part-002.parquet"
	for _, mode := range allModes {
		ca := cfgFor(mode, RemainderPad, 4, 2, 1)
		pa, pb := mustNew(t, a, ca), mustNew(t, b, ca)
		for e := 0; e < ca.Epochs; e++ {
			if !slices.Equal(globalSequence(t, pa, e), globalSequence(t, pb, e)) || pa.Epochs[e].Digest != pb.Epochs[e].Digest {
				t.Fatalf("%s epoch %d: zero-row groups changed the order", mode, e)
			}
		}
	}
	p := mustNew(t, b, cfgFor(ShuffleNone, RemainderPartial, 1, 1, 1))
	for _, c := range []struct {
		id       uint64
		file, rg int
		row      int64
	}{{0, 0, 1, 0}, {9, 0, 1, 9}, {10, 0, 3, 0}, {14, 0, 3, 4}, {15, 1, 0, 0}, {22, 1, 2, 0}, {24, 1, 2, 2}} {
		f, rg, row, err := p.Source.Locate(c.id)
		if err != nil || f != c.file || rg != c.rg || row != c.row {
			t.Errorf("Locate(%d) = %d, %d, %d, %v; want %d, %d, %d", c.id, f, rg, row, err, c.file, c.rg, c.row)
		}
		if p.Source.Files[f].Path != []string{"part-000.parquet", "part-002.parquet"}[f] {
			t.Errorf("file %d is %s", f, p.Source.Files[f].Path)
		}
	}
	if _, _, _, err := p.Source.Locate(25); !errors.Is(err, ErrRange) {
		t.Errorf("Locate(N): %v, want ErrRange", err)
	}
}

func TestRejectsBadConfig(t *testing.T) {
	src := synthSource([]int64{10})
	good := cfgFor(ShuffleGlobal, RemainderDrop, 8, 4, 2)
	for name, mut := range map[string]func(*Config){
		"G not divisible by R":  func(c *Config) { c.GlobalBatch = 10 },
		"zero epochs":           func(c *Config) { c.Epochs = 0 },
		"zero G":                func(c *Config) { c.GlobalBatch = 0 },
		"zero R":                func(c *Config) { c.WorldSize = 0 },
		"zero W":                func(c *Config) { c.Workers = 0 },
		"bad shuffle":           func(c *Config) { c.Shuffle = "random" },
		"bad remainder":         func(c *Config) { c.Remainder = "keep" },
		"window without blocks": func(c *Config) { c.Window = 3 },
		"blocks without window": func(c *Config) { c.Shuffle = ShuffleBlocks },
	} {
		c := good
		mut(&c)
		if _, err := New(src, c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	c := good
	c.GlobalBatch = 10
	_, err := New(src, c)
	if err == nil || !strings.Contains(err.Error(), "global batch 10 is not divisible by world size 4") {
		t.Errorf("message: %v", err)
	}
	p := mustNew(t, src, good)
	for _, bad := range [][3]int{{0, -1, 0}, {0, 4, 0}, {-1, 0, 0}, {2, 0, 0}, {0, 0, 1}, {0, 0, -1}} {
		if _, _, err := p.RankBatch(bad[0], bad[1], bad[2], nil); !errors.Is(err, ErrRange) {
			t.Errorf("RankBatch(%v): %v, want ErrRange", bad, err)
		}
	}
	if _, _, err := p.RankBatch(0, 4, 0, nil); err == nil || !strings.Contains(err.Error(), "rank 4 not in [0, 4)") {
		t.Errorf("rank message: %v", err)
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	src := synthSource([]int64{10, 5}, []int64{7})
	src.Root = "/data/set"
	src.EmptyFiles = []SourceFile{{Path: "e.parquet", Size: 99, FooterSHA256: strings.Repeat("0", 64)}}
	dir := t.TempDir()
	for _, mode := range allModes {
		p := mustNew(t, src, cfgFor(mode, RemainderPartial, 4, 2, 3))
		path := filepath.Join(dir, string(mode)+".json")
		if err := p.Save(path); err != nil {
			t.Fatal(err)
		}
		again := mustNew(t, src, cfgFor(mode, RemainderPartial, 4, 2, 3))
		b1, _ := os.ReadFile(path)
		b2, _ := again.Marshal()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("%s: two plans from the same inputs differ in bytes", mode)
		}
		q, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		b3, _ := q.Marshal()
		if !bytes.Equal(b1, b3) {
			t.Fatalf("%s: load + marshal changed the bytes", mode)
		}
		if q2, raw, err := LoadBytes(path); err != nil || !bytes.Equal(raw, b1) || q2.Fingerprint != q.Fingerprint {
			t.Fatalf("%s: LoadBytes returned other bytes or plan (%v)", mode, err)
		}
		if !slices.Equal(globalSequence(t, p, 1), globalSequence(t, q, 1)) {
			t.Fatalf("%s: loaded plan gives another order", mode)
		}
		for _, tamper := range []struct{ from, to string }{
			{`"seed": 11`, `"seed": 12`},
			{`"workers": 3`, `"workers": 2`},
			{`"format": "prep-plan/v1"`, `"format": "prep-plan/v2"`},
			{`"steps_per_epoch": `, `"steps_per_epoch": 1`},
			{`"size": 1000`, `"size": 1001`},
		} {
			bad := strings.Replace(string(b1), tamper.from, tamper.to, 1)
			if bad == string(b1) {
				t.Fatalf("tamper %q did not apply", tamper.from)
			}
			if _, err := Parse([]byte(bad)); !errors.Is(err, ErrFormat) {
				t.Errorf("%s: tampered %q: %v, want ErrFormat", mode, tamper.from, err)
			}
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("missing file: %v", err)
	}
}

// TestCaseB27RanksCoverage pins case B27: 103 samples in row groups of at
// most 16, 4 ranks, 3 workers, G = 4.
func TestCaseB27RanksCoverage(t *testing.T) {
	src := synthSource([]int64{16, 16, 8}, []int64{16, 16, 8}, []int64{16, 7})
	for _, mode := range []Shuffle{ShuffleGlobal, ShuffleBlocks} {
		c := cfgFor(mode, RemainderPad, 4, 4, 3)
		c.Seed = 7
		p := mustNew(t, src, c)
		if p.Steps() != 26 || p.Derived.PaddedPerEpoch != 1 || p.Steps()*p.Config.GlobalBatch != 104 {
			t.Errorf("%s pad: %+v", mode, p.Derived)
		}
		c.Remainder = RemainderDrop
		p = mustNew(t, src, c)
		d, _ := p.Dropped(0)
		if p.Steps() != 25 || len(d) != 3 || p.Derived.DroppedPerEpoch != 3 {
			t.Errorf("%s drop: %+v dropped %v", mode, p.Derived, d)
		}
	}
	five := synthSource([]int64{5})
	p := mustNew(t, five, Config{Epochs: 1, GlobalBatch: 4, WorldSize: 4, Workers: 3, Shuffle: ShuffleNone, Remainder: RemainderPartial})
	empty := 0
	for r := 0; r < 4; r++ {
		for w := 0; w < 3; w++ {
			n := 0
			for _, k := range p.WorkerSteps(w) {
				ids, _, _ := p.RankBatch(0, r, k, nil)
				n += len(ids)
			}
			if n == 0 {
				empty++
			}
		}
	}
	// b = 1, two steps: step 0 (worker 0) feeds ranks 0-3, step 1 (worker
	// 1) only rank 0, worker 2 has no step: 1 + 3*2 empty pairs.
	if empty != 7 {
		t.Errorf("five samples: %d empty (rank, worker) pairs, want 7", empty)
	}
}

// TestCaseB29OrderStability pins case B29: 1000 samples, seed 1234, 2
// ranks, 1, 2 or 4 workers.
func TestCaseB29OrderStability(t *testing.T) {
	src := synthSource(rowGroups(250, 64), rowGroups(250, 64), rowGroups(250, 64), rowGroups(250, 64))
	for _, mode := range []Shuffle{ShuffleNone, ShuffleGlobal} {
		var ref [][][]slot
		for _, w := range []int{1, 2, 4} {
			c := Config{Seed: 1234, Epochs: 2, GlobalBatch: 10, WorldSize: 2, Workers: w, Shuffle: mode, Remainder: RemainderDrop}
			p := mustNew(t, src, c)
			got := epochSlots(t, p, 0)
			if ref == nil {
				ref = got
			} else if fmt.Sprint(got) != fmt.Sprint(ref) {
				t.Errorf("%s: per-rank order changes with %d workers", mode, w)
			}
			same := p.Epochs[0].Digest == p.Epochs[1].Digest
			if same != (mode == ShuffleNone) {
				t.Errorf("%s: epoch 0 == epoch 1 is %v", mode, same)
			}
			for r := 0; r < 2; r++ {
				if n := len(got[r]) * p.BatchSize(); n != 500 {
					t.Errorf("rank %d has %d samples, want 500", r, n)
				}
			}
		}
	}
}

func TestPartitionedIsBalancedAndFixed(t *testing.T) {
	src := synthSource([]int64{50, 10, 10, 10, 10, 10}, []int64{30, 20, 5})
	p := mustNew(t, src, cfgFor(ShufflePartitioned, RemainderPartial, 6, 3, 1))
	if !slices.Equal(p.Derived.PartitionRows, []uint64{55, 50, 50}) {
		t.Fatalf("partition rows %v, want [55 50 50]", p.Derived.PartitionRows)
	}
	// A rank only ever sees ids of its own blocks, in every epoch.
	for e := 0; e < 2; e++ {
		for r, steps := range epochSlots(t, p, e) {
			for _, bs := range steps {
				for _, s := range bs {
					if got := int(p.st.owner[p.st.idx.blockOf(s.id)]); got != r {
						t.Fatalf("epoch %d: rank %d got id %d of rank %d", e, r, s.id, got)
					}
				}
			}
		}
	}
}

func BenchmarkRankBatchGlobal(b *testing.B) {
	src := synthSource(rowGroups(1_000_000_000, 1<<20))
	// derive, not New: New would hash the 10^9-slot epoch digest first.
	p, err := derive(src, Config{Epochs: 1, GlobalBatch: 4096, WorldSize: 8, Workers: 4, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, 0, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ids, _, _ = p.RankBatch(0, i%8, i%p.Steps(), ids)
	}
	b.ReportMetric(float64(b.N)*512/b.Elapsed().Seconds()/1e6, "Mindices/s")
}

// TestConcurrentRankBatch calls RankBatch and Position from many goroutines
// on a fresh plan (epoch state built lazily), as convert does; run with -race.
func TestConcurrentRankBatch(t *testing.T) {
	src := synthSource(rowGroups(500, 13), rowGroups(300, 7))
	for _, mode := range allModes {
		p, err := derive(src, cfgFor(mode, RemainderPad, 8, 4, 2), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref := mustNew(t, src, cfgFor(mode, RemainderPad, 8, 4, 2))
		want := globalSequence(t, ref, 1)
		got := make([][]slot, 4)
		done := make(chan int)
		for r := 0; r < 4; r++ {
			go func() {
				defer func() { done <- r }()
				for k := 0; k < p.Steps(); k++ {
					ids, pads, _ := p.RankBatch(1, r, k, nil)
					for i, id := range ids {
						got[r] = append(got[r], slot{id, i >= len(ids)-pads})
						p.Position(1, id)
					}
				}
			}()
		}
		for range 4 {
			<-done
		}
		b := p.BatchSize()
		for k := 0; k < p.Steps(); k++ {
			for r := 0; r < 4; r++ {
				if !slices.Equal(got[r][k*b:(k+1)*b], want[(k*4+r)*b:(k*4+r+1)*b]) {
					t.Fatalf("%s: concurrent rank %d step %d differs", mode, r, k)
				}
			}
		}
	}
}

// TestSourceBeyondMaxSamplesRefused: a source of more than MaxSamples rows
// (a footer claiming 10^12 rows in each of two files) is refused at once,
// before any epoch digest; MaxSamples rows exactly are not refused by the
// check (derive only: no digest is computed).
func TestSourceBeyondMaxSamplesRefused(t *testing.T) {
	cfg := Config{Seed: 1, Epochs: 1, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
	src := synthSource([]int64{1_000_000_000_000}, []int64{1_000_000_000_000})
	_, err := New(src, cfg)
	want := "2000000000000 rows exceed the limit of 1099511627776 samples per plan"
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
		t.Fatalf("New: %v; want ErrConfig containing %q", err, want)
	}
	if _, err := derive(synthSource([]int64{MaxSamples}), cfg, nil, nil); err != nil {
		t.Fatalf("MaxSamples rows: %v", err)
	}
}

// BenchmarkRankBatchBlocks is BenchmarkRankBatchGlobal in shuffle mode
// blocks, windows of 16 row groups of 2^20 rows (the PLAN.md §10 target:
// within 1.2x of global).
func BenchmarkRankBatchBlocks(b *testing.B) {
	src := synthSource(rowGroups(1_000_000_000, 1<<20))
	p, err := derive(src, Config{Epochs: 1, GlobalBatch: 4096, WorldSize: 8, Workers: 4, Shuffle: ShuffleBlocks, Window: 16, Remainder: RemainderDrop}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]uint64, 0, 512)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ids, _, _ = p.RankBatch(0, i%8, i%p.Steps(), ids)
	}
	b.ReportMetric(float64(b.N)*512/b.Elapsed().Seconds()/1e6, "Mindices/s")
}
