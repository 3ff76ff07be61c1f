package convert

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
)

// TestRunOneMemoryBudget: staging and the values arena held in anonymous
// memory take at most half of MemoryLimit, and the Go heap's share
// (Options.HeapLimit, Summary.HeapBudgetBytes) is the rest. An arena that
// fits the limit beside the staging records but not half of it goes to a
// file (it went to memory beside a decode admission of the whole limit:
// twice the limit in all); one that fits half stays in memory. The shards
// are the same either way.
func TestRunOneMemoryBudget(t *testing.T) {
	p, spec := jagLongFixture(t, 64, 16, longRows(16, 20_000), jagSeqCfg)
	ref, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "ref"), Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	arena, stage := ref.ValuesArenaBytes, ref.StagingBytes
	if ref.ValuesArenaFile || arena == 0 || ref.AnonBudgetBytes != arena+stage || ref.HeapBudgetBytes != 1<<30-arena-stage {
		t.Fatalf("default limit: arena %d bytes (file %v), staging %d; anonymous share %d, heap share %d; want the arena in memory and the rest of 1 GiB the heap's",
			arena, ref.ValuesArenaFile, stage, ref.AnonBudgetBytes, ref.HeapBudgetBytes)
	}
	want := snapshot(t, filepath.Join(filepath.Dir(ref.Output), "ref"))
	for _, c := range []struct {
		limit  int64
		inFile bool
	}{
		{(arena + stage) * 3 / 2, true}, // fits the limit, not half of it
		{2 * (arena + stage), false},    // fits half of it
	} {
		var heap []int64
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, MemoryLimit: c.limit,
			HeapLimit: func(n int64) { heap = append(heap, n) }})
		if err != nil {
			t.Fatalf("limit %d: %v", c.limit, err)
		}
		anon := stage
		if !c.inFile {
			anon += arena
		}
		if sum.ValuesArenaFile != c.inFile || sum.SpillBytes != 0 || sum.AnonBudgetBytes != anon || sum.HeapBudgetBytes != c.limit-anon ||
			len(heap) != 1 || heap[0] != c.limit-anon {
			t.Errorf("limit %d (arena %d, staging %d): arena in a file %v, spilled %d, anonymous share %d, heap share %d, HeapLimit calls %v; want file %v, no spill, %d, %d, [%d]",
				c.limit, arena, stage, sum.ValuesArenaFile, sum.SpillBytes, sum.AnonBudgetBytes, sum.HeapBudgetBytes, heap, c.inFile, anon, c.limit-anon, c.limit-anon)
		}
		if 2*sum.AnonBudgetBytes > c.limit {
			t.Errorf("limit %d: %d bytes of anonymous memory, more than half the limit", c.limit, sum.AnonBudgetBytes)
		}
		if got := snapshot(t, out); got != want {
			t.Errorf("limit %d: shards differ from the default run's", c.limit)
		}
	}
}

// TestAdmissionLongRowsJobs4: twenty rows of 1,500,000 values, five in
// each of four row groups, each row group read in row windows by one of four workers
// under a 32 MiB limit: a piece holding a long row grows its row group's
// admitted bytes before its page is decoded, so the long rows are decoded
// about one at a time instead of four at once, and the live heap stays
// within the limit and one long row's page buffers. The shards equal
// those of a run under the default limit.
func TestAdmissionLongRowsJobs4(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and converts 120 MB of list values")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	p, spec := jagLongFixture(t, 640, 160, longRows(32, 1_500_000), jagSeqCfg)
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 4}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bounded")
	const limit = 32 << 20
	sum, peakLive := boundedRun(t, p, spec, out, 4, limit)
	t.Logf("live %d MiB, admitted %d MiB of a heap share of %d MiB, %d row groups sliced in %d row windows", peakLive>>20, sum.AdmittedPeakBytes>>20, sum.HeapBudgetBytes>>20, sum.RowGroupsSliced, sum.RowSlices)
	if sum.RowGroupsSliced != 4 {
		t.Errorf("%d row groups sliced, want 4", sum.RowGroupsSliced)
	}
	// Measured at the pieces: live 27 MiB, admitted 46 MiB (a long row
	// served over the limit) of a 31 MiB heap share; admitting each
	// windowed row group by its estimate alone, the live heap took 110 to
	// 119 MiB. The long row being decoded holds its page buffers
	// (compressed and not, about 7 MB each here) beside what is admitted.
	const pages = 16 << 20
	checkHeapBound(t, sum, peakLive, limit, pages)
	if snapshot(t, out) != snapshot(t, whole) {
		t.Errorf("bounded run's shards differ from the default run's")
	}
}

// TestRunObjectStoreReadAheadShare: reading an object store, whose
// read-ahead holds a quarter of the limit (at most 256 MiB), the run's
// anonymous and heap shares add up to the rest of the limit; reading a
// local directory, to the whole limit. The shards are the same.
func TestRunObjectStoreReadAheadShare(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	const limit = 64 << 20
	var snaps []string
	for _, c := range []struct {
		objectStore bool
		want        int64
	}{{false, limit}, {true, limit - limit/4}} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, MemoryLimit: limit, ObjectStore: c.objectStore})
		if err != nil {
			t.Fatal(err)
		}
		if got := sum.AnonBudgetBytes + sum.HeapBudgetBytes; got != c.want {
			t.Errorf("object store %v: anonymous %d + heap %d = %d bytes, want %d", c.objectStore, sum.AnonBudgetBytes, sum.HeapBudgetBytes, got, c.want)
		}
		snaps = append(snaps, snapshot(t, out))
	}
	if snaps[0] != snaps[1] {
		t.Error("the shards differ with the read-ahead share")
	}
}
