package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// routedRecords returns the records a spilled run of the shards of epochs
// x ranks routes to its windows: one per sample slot of every batch, pads
// included.
func routedRecords(t *testing.T, p *plan.Plan, epochs, ranks []int) int64 {
	t.Helper()
	var n int64
	var ids []uint64
	for _, e := range epochs {
		for _, k := range ranks {
			for step := 0; step < p.Steps(); step++ {
				var err error
				ids, _, err = p.RankBatch(e, k, step, ids)
				if err != nil {
					t.Fatal(err)
				}
				n += int64(len(ids))
			}
		}
	}
	return n
}

// TestSpillMatchesInMemory runs every shuffle mode with every remainder
// policy, over all shards and over subsets of epochs and ranks, once with
// the staging in memory and spilled (a memory limit of 1 byte: windows of
// one step; and one of a few steps' records, which spills only the larger
// sets), with 1 and 2 jobs, and requires byte-identical output trees,
// the exact spill size, and no temporary file left.
func TestSpillMatchesInMemory(t *testing.T) {
	subsets := []struct{ epochs, ranks []int }{
		{nil, nil},
		{[]int{0, 2}, []int{1}},
		{[]int{1}, []int{0, 2}},
	}
	for _, sh := range []plan.Shuffle{plan.ShuffleNone, plan.ShuffleGlobal, plan.ShuffleBlocks, plan.ShufflePartitioned} {
		for _, rm := range []plan.Remainder{plan.RemainderDrop, plan.RemainderPad, plan.RemainderPartial} {
			t.Run(fmt.Sprintf("%s/%s", sh, rm), func(t *testing.T) {
				cfg := plan.Config{Seed: 11, Epochs: 3, GlobalBatch: 48, WorldSize: 3, Workers: 2, Shuffle: sh, Remainder: rm}
				if sh == plan.ShuffleBlocks {
					cfg.Window = 2
				}
				p, spec := fixture(t, cfg)
				for si, sub := range subsets {
					ref := filepath.Join(t.TempDir(), "mem")
					sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2, Epochs: sub.epochs, Ranks: sub.ranks})
					if err != nil {
						t.Fatal(err)
					}
					if sum.SpillBytes != 0 || sum.SpillWindows != 0 {
						t.Fatalf("subset %d: staging of %d bytes spilled under the default limit: %+v", si, sum.StagingBytes, sum)
					}
					want := snapshot(t, ref)
					m, err := shardfmt.ReadManifest(ref)
					if err != nil {
						t.Fatal(err)
					}
					rec := int64(feature.RecordSize(m.Tensors))
					epochs, ranks := sub.epochs, sub.ranks
					if epochs == nil {
						epochs = []int{0, 1, 2}
					}
					if ranks == nil {
						ranks = []int{0, 1, 2}
					}
					wantSpill := routedRecords(t, p, epochs, ranks) * (8 + rec)
					for _, limit := range []int64{1, 2 * 3 * 48 * rec * 3} {
						for _, jobs := range []int{1, 2} {
							out := filepath.Join(t.TempDir(), "spill")
							sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit, Epochs: sub.epochs, Ranks: sub.ranks})
							if err != nil {
								t.Fatalf("subset %d, limit %d, jobs %d: %v", si, limit, jobs, err)
							}
							switch {
							case sum.StagingBytes <= limit/2: // staging in memory takes at most half the limit
								if sum.SpillBytes != 0 || sum.SpillWindows != 0 {
									t.Errorf("subset %d, limit %d: %d bytes of staging spilled: %+v", si, limit, sum.StagingBytes, sum)
								}
							case sum.SpillBytes != wantSpill || sum.SpillWindows < 2:
								t.Errorf("subset %d, limit %d: spilled %d bytes in %d windows, want %d bytes in 2 or more", si, limit, sum.SpillBytes, sum.SpillWindows, wantSpill)
							}
							if got := snapshot(t, out); got != want {
								t.Fatalf("subset %d, limit %d, jobs %d: spilled output differs from the in-memory output", si, limit, jobs)
							}
							if _, err := os.Stat(filepath.Join(out, TempDirName)); !errors.Is(err, os.ErrNotExist) {
								t.Errorf("subset %d: temporary directory left after a spilled run: %v", si, err)
							}
						}
					}
				}
			})
		}
	}
}

// TestSpillManyRanksKeepsFewShardsOpen: a spilled run of 64 ranks keeps at
// most as many shards open as the in-memory path (2*Jobs), so it converts
// under an open-file limit of 64 like the in-memory run, with the same
// output and with every shard's start and commit reported once.
func TestSpillManyRanksKeepsFewShardsOpen(t *testing.T) {
	p, spec := fixture(t, plan.Config{Seed: 2, Epochs: 1, GlobalBatch: 128, WorldSize: 64, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	testutil.LowerFDLimit(t, 64)
	mem := filepath.Join(t.TempDir(), "mem")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: mem, Jobs: 2}); err != nil {
		t.Fatalf("in memory: %v", err)
	}
	for _, jobs := range []int{1, 2} {
		open, most := 0, 0
		events := map[shardKey][2]int{}
		out := filepath.Join(t.TempDir(), "spill")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: 1,
			OnShard: func(epoch, rank int, done bool) {
				k, e := shardKey{epoch, rank}, events[shardKey{epoch, rank}]
				if done {
					open--
					e[1]++
				} else {
					open++
					e[0]++
				}
				events[k] = e
				most = max(most, open)
			}})
		if err != nil {
			t.Fatalf("jobs %d: spilled: %v", jobs, err)
		}
		// 1000 samples in 8 steps of 128: each window is one step of one
		// group of 2*jobs ranks (1 for jobs 1).
		groups := 64 / shardWriters(jobs)
		if most != shardWriters(jobs) || sum.SpillWindows != groups*8 {
			t.Errorf("jobs %d: %d shards open at once, %d windows; want %d and %d", jobs, most, sum.SpillWindows, shardWriters(jobs), groups*8)
		}
		if len(events) != 64 {
			t.Errorf("jobs %d: events for %d shards, want 64", jobs, len(events))
		}
		for k, e := range events {
			if e != [2]int{1, 1} {
				t.Errorf("jobs %d: shard %v started %d and committed %d times", jobs, k, e[0], e[1])
			}
		}
		if snapshot(t, out) != snapshot(t, mem) {
			t.Errorf("jobs %d: spilled output differs from the in-memory output", jobs)
		}
	}
}

// TestSpillPartitionedPadsNotHeldInMemory: a partitioned plan pads each
// rank up to the longest partition (here 1000 of the 2000 slots of ranks
// 1-3 are pads). A spilled run routes every pad occurrence to its window,
// like any record, instead of holding pad records in memory, whose size
// would depend on the input and not on the memory limit; the output is the
// in-memory run's.
func TestSpillPartitionedPadsNotHeldInMemory(t *testing.T) {
	src := t.TempDir()
	featuretest.File(0, 5000).RowGroupRows(1000).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 1, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad})
	if got := fmt.Sprint(p.Derived.PartitionRows, p.Steps()); got != "[2000 1000 1000 1000] 200" {
		t.Fatalf("partitions and steps %s", got)
	}
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "id", Column: "id", DType: "I64"}, {Name: "x", Column: "x", DType: "F32"}}}
	var todo []shardKey
	for e := range 2 {
		for k := range 4 {
			todo = append(todo, shardKey{e, k})
		}
	}
	s, err := newSpiller(context.Background(), p, todo, 12, 4800, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	// 2 epochs x 4 ranks x 200 steps x 10 slots, 20-byte entries.
	if s.spillBytes() != 16000*20 {
		t.Errorf("spill of %d bytes, want %d (every pad slot routed)", s.spillBytes(), 16000*20)
	}
	mem := filepath.Join(t.TempDir(), "mem")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: mem, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	for _, jobs := range []int{1, 3} {
		out := filepath.Join(t.TempDir(), "spill")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: 4800})
		if err != nil {
			t.Fatal(err)
		}
		if sum.SpillBytes != 16000*20 {
			t.Errorf("jobs %d: spilled %d bytes, want %d", jobs, sum.SpillBytes, 16000*20)
		}
		if snapshot(t, out) != snapshot(t, mem) {
			t.Errorf("jobs %d: spilled output differs from the in-memory output", jobs)
		}
	}
}

// matrixSpecYAML adds a padded bytes tensor (with lengths) to the test spec,
// so the records hold every kind of tensor: integers, an F16 cast, a list
// with lengths, hashed and padded bytes, a null mask.
const matrixSpecYAML = featuretest.SpecYAML + `
  - name: lab_pad
    column: label
    dtype: U8
    bytes: {mode: pad, max_len: 3, truncate: true, lengths: true}
`

// TestSpillEdgePlansMatchInMemory covers plans at the edges of the window
// arithmetic: world size 1, a single step, fewer samples than a global
// batch (a rank of pads only), unequal partitions (one of 290 samples
// padded to 700, its ids repeated twice), three source files with
// a one-row file, workers over 1, epoch and rank subsets given out of
// order. Each is spilled at a limit of 1 byte, exactly one step of the
// requested ranks, one byte under the staging size, and run in memory at
// exactly the staging size; the outputs must be byte-identical and a
// spilled run must write exactly its routed records.
func TestSpillEdgePlansMatchInMemory(t *testing.T) {
	cases := []struct {
		name          string
		rows          []int64 // rows per file
		rg            int64
		cfg           plan.Config
		epochs, ranks []int
	}{
		{"world size 1", []int64{700, 300}, 128, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 32, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}, nil, nil},
		{"one step", []int64{40}, 16, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 48, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}, nil, nil},
		{"N under G pad", []int64{5}, 16, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 48, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}, nil, nil},
		{"N under G pad rank of pads", []int64{5}, 16, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 48, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}, nil, []int{2}},
		{"N under G partial", []int64{5}, 16, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 48, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial}, nil, nil},
		{"unequal partitions pad", []int64{700, 300}, 100, plan.Config{Seed: 5, Epochs: 3, GlobalBatch: 40, WorldSize: 4, Workers: 2, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad}, []int{2, 0}, []int{3, 1}},
		{"unequal partitions partial", []int64{700, 300}, 100, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 2, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPartial}, nil, nil},
		{"partitioned drop one shard", []int64{700, 300}, 100, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 2, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderDrop}, []int{1}, []int{2}},
		{"blocks drop three files", []int64{333, 400, 1}, 50, plan.Config{Seed: 5, Epochs: 3, GlobalBatch: 30, WorldSize: 3, Workers: 3, Shuffle: plan.ShuffleBlocks, Window: 3, Remainder: plan.RemainderDrop}, []int{2, 0}, nil},
		{"partition padded past its length", []int64{700, 250, 40}, 700, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 20, WorldSize: 2, Workers: 1, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad}, nil, nil},
		{"none pad five ranks", []int64{333, 400, 1}, 50, plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 200, WorldSize: 5, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad}, nil, nil},
	}
	spec, err := feature.ParseSpec([]byte(matrixSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			var first int64
			for i, n := range c.rows {
				featuretest.File(first, n).RowGroupRows(c.rg).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, fmt.Sprintf("part-%d.parquet", i)))
				first += n
			}
			p := featuretest.MakePlan(t, src, c.cfg)
			ref := filepath.Join(t.TempDir(), "mem")
			sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2, Epochs: c.epochs, Ranks: c.ranks})
			if err != nil {
				t.Fatal(err)
			}
			want := snapshot(t, ref)
			m, err := shardfmt.ReadManifest(ref)
			if err != nil {
				t.Fatal(err)
			}
			rec := int64(feature.RecordSize(m.Tensors))
			epochs, ranks := c.epochs, c.ranks
			if epochs == nil {
				epochs = []int{0, 1, 2}[:c.cfg.Epochs]
			}
			if ranks == nil {
				for k := range c.cfg.WorldSize {
					ranks = append(ranks, k)
				}
			}
			wantSpill := routedRecords(t, p, epochs, ranks) * (8 + rec)
			staging := sum.StagingBytes
			step := int64(len(ranks)) * int64(p.BatchSize()) * rec
			// Staging in memory (or a spilled window) takes at most half
			// the limit.
			for _, limit := range []int64{1, 2 * step, 2*staging - 1, 2 * staging} {
				for _, jobs := range []int{1, 3} {
					out := filepath.Join(t.TempDir(), "spill")
					s2, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit, Epochs: c.epochs, Ranks: c.ranks})
					if err != nil {
						t.Fatalf("limit %d, jobs %d: %v", limit, jobs, err)
					}
					spilled := s2.SpillWindows > 0
					if spilled != (limit/2 < staging) || spilled && s2.SpillBytes != wantSpill {
						t.Errorf("limit %d, jobs %d, staging %d: spilled %d bytes in %d windows, want %d bytes when the limit is under the staging",
							limit, jobs, staging, s2.SpillBytes, s2.SpillWindows, wantSpill)
					}
					if got := snapshot(t, out); got != want {
						t.Fatalf("limit %d, jobs %d: output differs from the in-memory output:\n%s", limit, jobs, firstDiff(want, got))
					}
					if _, err := os.Stat(filepath.Join(out, TempDirName)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("limit %d, jobs %d: temporary directory left: %v", limit, jobs, err)
					}
				}
			}
		})
	}
}

// TestSpillTransformErrorLeavesNothing: a value error found during a
// spilled run's stage 1 (a null in a column without a null policy, in the
// first row group; an out-of-range value in the second, after the first
// was routed) fails with the in-memory run's exact error, whatever Jobs,
// leaves no new output directory, and leaves an
// existing shard set it was to replace (--force) byte for byte as it was.
func TestSpillTransformErrorLeavesNothing(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	good := filepath.Join(t.TempDir(), "good")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: good, MemoryLimit: 1}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, good)
	for _, c := range []struct{ yaml, err string }{
		{"tensors:\n  - {name: id, column: id, dtype: I64}\n  - {name: opt, column: opt, dtype: I32}\n",
			`part-0.parquet: column "opt", row group 0, row 0: null value (26 nulls in this column chunk; set nulls.fill to replace them)`},
		{"tensors:\n  - {name: x, column: x, dtype: F32}\n  - {name: id, column: id, dtype: I8}\n",
			`part-0.parquet: column "id", row group 1, row 0: value 128 out of range for I8 [-128, 127]`},
	} {
		bad, err := feature.ParseSpec([]byte(c.yaml), "bad.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int64{0, 1, 2000} { // 0: in memory
			for _, jobs := range []int{1, 3} {
				out := filepath.Join(t.TempDir(), "new")
				same := func(err error) bool { return errors.Is(err, feature.ErrValue) && err.Error() == c.err }
				_, err := Run(context.Background(), Options{Plan: p, Spec: bad, Output: out, MemoryLimit: limit, Jobs: jobs})
				if !same(err) {
					t.Errorf("limit %d, jobs %d: err = %v, want %s", limit, jobs, err, c.err)
				}
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("limit %d, jobs %d: output directory left after failure: %v", limit, jobs, listTree(t, out))
				}
				_, err = Run(context.Background(), Options{Plan: p, Spec: bad, Output: good, MemoryLimit: limit, Jobs: jobs, Force: true})
				if !same(err) {
					t.Errorf("limit %d, jobs %d, --force over a shard set: err = %v, want %s", limit, jobs, err, c.err)
				}
				if after := snapshot(t, good); after != before {
					t.Fatalf("limit %d, jobs %d: failed run changed the existing output:\n%s", limit, jobs, firstDiff(before, after))
				}
			}
		}
	}
}

// TestSpillCancelledKeepsCommittedShards cancels spilled runs during stage
// 1 and after the first, second and third of four shard commits (with Jobs
// 1 each shard is a group of its own, written and committed before the
// next): the run reports the cancellation, the manifest lists exactly the
// shards committed, each complete, no temporary is left, and a rerun
// completes to the bytes of an uninterrupted run.
func TestSpillCancelledKeepsCommittedShards(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	clean := filepath.Join(t.TempDir(), "clean")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: clean}); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, clean)
	for _, at := range []int{0, 1, 2, 3} {
		out := filepath.Join(t.TempDir(), "o")
		ctx, cancel := context.WithCancel(context.Background())
		commits := 0
		_, err := Run(ctx, Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: 3000,
			OnShard: func(e, r int, done bool) {
				if done {
					if commits++; commits == at {
						cancel()
					}
				}
			},
			Progress: func(stage string, rows, bytes int64) {
				if at == 0 && stage == StageDecode {
					cancel()
				}
			}})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled at commit %d: err = %v", at, err)
		}
		for _, e := range listTree(t, out) {
			if strings.Contains(e, ".tmp") || strings.Contains(e, TempDirName) || strings.Contains(e, LockName) {
				t.Errorf("cancelled at commit %d: left behind: %s", at, e)
			}
		}
		if m, err := shardfmt.ReadManifest(out); err == nil {
			if len(m.Shards) != at {
				t.Errorf("cancelled at commit %d: manifest lists %d shards", at, len(m.Shards))
			}
			for _, s := range m.Shards {
				if _, err := shardfmt.FileDigest(filepath.Join(out, s.Path)); err != nil {
					t.Errorf("cancelled at commit %d: listed shard %s: %v", at, s.Path, err)
				}
			}
		} else if at > 0 {
			t.Errorf("cancelled at commit %d: %v", at, err)
		}
		if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, MemoryLimit: 3000}); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(t, out); got != want {
			t.Errorf("cancelled at commit %d: rerun differs from an uninterrupted run:\n%s", at, firstDiff(want, got))
		}
	}
}

// TestCancelAfterLastCommitIsSuccess: a run cancelled after its last shard
// committed has done all its work, so it reports success, in memory and
// spilled alike, and its output equals an uncancelled run's.
func TestCancelAfterLastCommitIsSuccess(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	clean := filepath.Join(t.TempDir(), "clean")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: clean}); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, clean)
	for _, limit := range []int64{0, 3000} { // in memory; spilled
		out := filepath.Join(t.TempDir(), "o")
		ctx, cancel := context.WithCancel(context.Background())
		commits := 0
		sum, err := Run(ctx, Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: limit,
			OnShard: func(e, r int, done bool) {
				if done {
					if commits++; commits == 4 {
						cancel()
					}
				}
			}})
		cancel()
		if err != nil || sum.Shards != 4 || (limit > 0) != (sum.SpillWindows > 0) {
			t.Fatalf("limit %d: cancelled after the last of 4 commits: %+v, %v; want success with 4 shards", limit, sum, err)
		}
		if got := snapshot(t, out); got != want {
			t.Errorf("limit %d: output differs from an uncancelled run:\n%s", limit, firstDiff(want, got))
		}
	}
}

// TestSpillLargeRecordsAllocateAFewRecords pins a spilled run that used
// far more memory than the in-memory one it replaces: the assembly block
// held at least 64 records, so with 4 MB records (bytes pad, max_len
// 4,000,000) a decode worker allocated a 256 MB private block for a row
// group of 3 rows, under a --memory-limit of 1 MiB. The bytes a spilled
// run allocates must stay a small multiple of one record (the 40 MB source
// value of the case file is decoded too).
func TestSpillLargeRecordsAllocateAFewRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 40 MB value")
	}
	p := featuretest.CaseSource(t, "B21-huge-string", "hugestr.parquet")
	spec, err := feature.ParseSpec([]byte("tensors: [{name: t, column: text, dtype: U8, bytes: {mode: pad, max_len: 4000000, truncate: true}}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if sum.SpillWindows == 0 {
		t.Fatal("the run did not spill")
	}
	limit := int64(160 << 20) // 40 MB source value, 12 MB of records, a few 4 MB blocks
	if raceEnabled {
		// The race detector makes sync.Pool drop buffers at random, so the
		// 40 MB page buffer may be allocated anew for each of the row
		// group's 3 row slices. The fault's 256 MB block still shows.
		limit = 240 << 20
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("spilled run allocated %d MiB", got>>20)
	if int64(got) > limit {
		t.Errorf("spilled run allocated %d MiB, want at most %d MiB", got>>20, limit>>20)
	}
}

// TestSpillManyWindowsKeepNoRecordBuffers pins the second half of the same
// fault: a decode worker keeps one route buffer per spill window, and when
// a buffer could hold only one entry (records larger than the buffer
// share) each was still a full record, kept for the whole of stage 1: 100
// windows of 300 KB records held 30 MB under a 256 KiB limit (a run of
// 100 steps of 1 MB records peaked at 129 MiB of heap under 1 MiB). Such
// entries are written at once through one scratch entry.
func TestSpillManyWindowsKeepNoRecordBuffers(t *testing.T) {
	src := t.TempDir()
	featuretest.File(0, 100).RowGroupRows(100).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	const rec = 300000
	s, err := newSpiller(context.Background(), p, []shardKey{{0, 0}}, rec, 256<<10, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.windows) != 100 {
		t.Fatalf("%d spill windows, want one per step (100)", len(s.windows))
	}
	if err := s.open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rb := s.newRouteBuffers()
	record := make([]byte, rec)
	for step := range 100 {
		record[0] = byte(step)
		if err := s.add(rb, &s.groups[0], 0, step, 0, record); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.flushAll(rb); err != nil {
		t.Fatal(err)
	}
	if err := s.checkFull(); err != nil {
		t.Fatal(err)
	}
	var kept int
	for _, b := range rb.bufs {
		kept += cap(b)
	}
	if kept > 2*s.ent {
		t.Errorf("route buffers keep %d bytes after 100 records of %d bytes, want at most two entries", kept, rec)
	}
	// Every record reached its window.
	win := make([]byte, rec)
	for wi := range s.windows {
		if err := s.load(context.Background(), wi, win, 1); err != nil {
			t.Fatal(err)
		}
		if win[0] != byte(wi) {
			t.Fatalf("window %d holds record %d", wi, win[0])
		}
	}
}
