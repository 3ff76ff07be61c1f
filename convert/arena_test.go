package convert

import (
	"context"
	"path/filepath"
	"testing"
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
