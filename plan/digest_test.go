package plan

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestEpochDigestHugeNBoundedAndStoppable pins the faults where a footer
// claiming 2^62 rows made New panic ("makeslice: len out of range": one
// leaf sum per 65536 slots allocated up front) and 10^12 rows ran without
// end or progress: the digest streams its leaves in order with
// O(GOMAXPROCS) memory, reports progress and stops when ctx is done. (A
// source beyond MaxSamples is now refused before digesting: the largest
// accepted is run here.) A digest that ignored ctx would run for hours on
// these sizes and end in the test binary's timeout, so no wall-clock bound
// is asserted; the heap is measured after a forced collection each side.
func TestEpochDigestHugeNBoundedAndStoppable(t *testing.T) {
	for _, rows := range []int64{MaxSamples, 1_000_000_000_000} {
		src := synthSource([]int64{rows})
		cfg := Config{Epochs: 2, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var calls, last int
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p, err := NewContext(ctx, src, cfg, func(epoch, steps, total int) {
			if epoch != 0 || steps <= last || total != int(rows) {
				t.Errorf("progress(%d, %d, %d) after %d steps", epoch, steps, total, last)
			}
			calls, last = calls+1, steps
		})
		cancel()
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		if p != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%d rows: plan %v, err %v; want the context's error", rows, p != nil, err)
		}
		if calls == 0 {
			t.Errorf("%d rows: no progress", rows)
		}
		if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 16<<20 {
			t.Errorf("%d rows: heap grew by %d bytes", rows, grew)
		}
	}
}

// TestEpochDigestContextEqualsLeafTree checks the streaming digest against
// EpochDigestRoot over leaves hashed one by one (PLAN.md §8), for leaf
// counts below, at and above one group of leaves.
func TestEpochDigestContextEqualsLeafTree(t *testing.T) {
	for _, n := range []int64{1, 65536*3 + 5, 65536 * 40} {
		p, err := New(synthSource([]int64{n}), Config{Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: ShuffleGlobal, Remainder: RemainderDrop})
		if err != nil {
			t.Fatal(err)
		}
		per := p.DigestLeafSteps()
		var leaves [][32]byte
		var ids []uint64
		for j := 0; j*per < p.Steps(); j++ {
			h := sha256.New()
			for k := j * per; k < min(p.Steps(), (j+1)*per); k++ {
				var pads int
				ids, pads, _ = p.RankBatch(0, 0, k, ids)
				h.Write(AppendDigestSlots(nil, ids, pads))
			}
			var s [32]byte
			h.Sum(s[:0])
			leaves = append(leaves, s)
		}
		if want := EpochDigestRoot(p.Steps(), leaves); p.Epochs[0].Digest != want {
			t.Errorf("N %d: digest %s, want %s", n, p.Epochs[0].Digest, want)
		}
	}
}

// TestEpochDigestEqualsRankBatches: the epoch digest, which reads each
// step's global batch at once outside partitioned mode, equals the leaf
// tree of PLAN.md §8 over every rank's RankBatch in rank order, in every
// shuffle mode and remainder policy at world sizes 1, 3 and 4 (pads in
// the last ranks' batches, ranks left empty by partial), and for a
// mixture with a filtered source.
func TestEpochDigestEqualsRankBatches(t *testing.T) {
	src := synthSource(rowGroups(500, 13), rowGroups(301, 7))
	check := func(name string, p *Plan) {
		t.Helper()
		per := p.DigestLeafSteps()
		for e := 0; e < p.Config.Epochs; e++ {
			var leaves [][32]byte
			for j := 0; j*per < p.Steps(); j++ {
				h := sha256.New()
				for k := j * per; k < min(p.Steps(), (j+1)*per); k++ {
					for r := 0; r < p.Config.WorldSize; r++ {
						ids, pads, err := p.RankBatch(e, r, k, nil)
						if err != nil {
							t.Fatal(err)
						}
						h.Write(AppendDigestSlots(nil, ids, pads))
					}
				}
				var s [32]byte
				h.Sum(s[:0])
				leaves = append(leaves, s)
			}
			if want := EpochDigestRoot(p.Steps(), leaves); p.EpochDigest(e) != want {
				t.Errorf("%s epoch %d: digest %s, want %s", name, e, p.EpochDigest(e), want)
			}
		}
	}
	for _, mode := range allModes {
		for _, rem := range allRemainders {
			for _, r := range []int{1, 3, 4} {
				cfg := cfgFor(mode, rem, 12, r, 2)
				p, err := derive(src, cfg, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				check(fmt.Sprintf("%s %s R=%d", mode, rem, r), p)
			}
		}
	}
	msrc, mix, _ := selFixture()
	for _, rem := range allRemainders {
		p, err := derive(msrc, Config{Seed: 3, Epochs: 2, GlobalBatch: 16, WorldSize: 4, Workers: 1, Shuffle: ShuffleGlobal, Remainder: rem}, nil, mix)
		if err != nil {
			t.Fatal(err)
		}
		check("mixture "+string(rem), p)
	}
}
