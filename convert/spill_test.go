package convert

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// routedRecords returns the records a spilled run of the shards of epochs
// x ranks routes to its windows: every valid sample of every batch, pads
// excluded (their records are kept in memory) except in a partitioned plan,
// whose pads are routed too.
func routedRecords(t *testing.T, p *plan.Plan, epochs, ranks []int) int64 {
	t.Helper()
	var n int64
	var ids []uint64
	for _, e := range epochs {
		for _, k := range ranks {
			for step := 0; step < p.Steps(); step++ {
				var pads int
				var err error
				ids, pads, err = p.RankBatch(e, k, step, ids)
				if err != nil {
					t.Fatal(err)
				}
				if p.Config.Shuffle == plan.ShufflePartitioned {
					pads = 0
				}
				n += int64(len(ids) - pads)
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
					rec := int64(recordSize(m.Tensors))
					epochs, ranks := sub.epochs, sub.ranks
					if epochs == nil {
						epochs = []int{0, 1, 2}
					}
					if ranks == nil {
						ranks = []int{0, 1, 2}
					}
					wantSpill := routedRecords(t, p, epochs, ranks) * (8 + rec)
					for _, limit := range []int64{1, 3 * 48 * rec * 3} {
						for _, jobs := range []int{1, 2} {
							out := filepath.Join(t.TempDir(), "spill")
							sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit, Epochs: sub.epochs, Ranks: sub.ranks})
							if err != nil {
								t.Fatalf("subset %d, limit %d, jobs %d: %v", si, limit, jobs, err)
							}
							switch {
							case sum.StagingBytes <= limit:
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
	p, spec := fixture(t, plan.Config{Seed: 2, Epochs: 2, GlobalBatch: 128, WorldSize: 64, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	low := old
	low.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
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
		if most != shardWriters(jobs) || sum.SpillWindows != 2*groups*8 {
			t.Errorf("jobs %d: %d shards open at once, %d windows; want %d and %d", jobs, most, sum.SpillWindows, shardWriters(jobs), 2*groups*8)
		}
		if len(events) != 128 {
			t.Errorf("jobs %d: events for %d shards, want 128", jobs, len(events))
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
// 1-3 are pads). A spilled run routes those pad occurrences to their
// windows instead of holding their records in memory, whose size would
// depend on the input and not on the memory limit; the output is the
// in-memory run's.
func TestSpillPartitionedPadsNotHeldInMemory(t *testing.T) {
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "a.parquet"), 0, 5000, 1000, &parquet.Snappy)
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 2, GlobalBatch: 40, WorldSize: 4, Workers: 1, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderPad})
	if got := fmt.Sprint(p.Derived.PartitionRows, p.Steps()); got != "[2000 1000 1000 1000] 200" {
		t.Fatalf("partitions and steps %s", got)
	}
	spec := &Spec{Tensors: []TensorSpec{{Name: "id", Column: "id", DType: "I64"}, {Name: "x", Column: "x", DType: "F32"}}}
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
	if len(s.padRecs) != 0 || len(s.padIdx) != 0 || s.spillBytes() != 16000*20 {
		t.Errorf("%d pad records (%d bytes) in memory, spill of %d bytes; want none and %d", len(s.padIdx), len(s.padRecs), s.spillBytes(), 16000*20)
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
