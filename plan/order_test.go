package plan

import (
	"math/rand/v2"
	"testing"
)

// TestBlocksOrderAppendRange: the batch-wise evaluation of a blocks
// epoch order (appendRange, what RankBatch and the epoch digest use)
// gives at every position the id the per-position definition gives (at,
// PLAN.md: block permutation, then the window's permutation, then the
// block holding the window offset), over windows of one, three and more
// blocks than there are, with a zero-row row group, from ranges that
// start and end inside and across windows; and the ids of a whole epoch
// are each sample exactly once.
func TestBlocksOrderAppendRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		rows    []int64
		windows []int
	}{
		// Blocks of very different sizes (windows searched) and a
		// zero-row row group.
		{[]int64{7, 1, 300, 64, 0, 5, 129, 2, 2, 1000, 33, 17, 4}, []int{1, 3, 100}},
		// Blocks of similar sizes (windows through the bucket table),
		// powers of two and not.
		{[]int64{1000, 1500, 1200, 999, 3000, 1000, 1001, 2047, 2048, 2049, 4096, 512, 700}, []int{2, 4, 16}},
	} {
		rows := c.rows
		idx, err := buildIndex([]SourceFile{{Path: "a.parquet", RowGroups: rows[:6]}, {Path: "b.parquet", RowGroups: rows[6:]}})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range c.windows {
			for epoch := range 2 {
				o := newBlocksOrder(idx, 42, epoch, k)
				n := idx.n
				want := make([]uint64, n)
				seen := make([]bool, n)
				for q := range n {
					want[q] = o.at(q)
					if want[q] >= n || seen[want[q]] {
						t.Fatalf("k=%d epoch %d: at(%d) = %d repeats or is out of range", k, epoch, q, want[q])
					}
					seen[want[q]] = true
					if p := o.pos(want[q]); p != q {
						t.Fatalf("k=%d epoch %d: pos(at(%d)) = %d", k, epoch, q, p)
					}
				}
				ranges := [][2]uint64{{0, n}, {0, 1}, {n - 1, n}, {5, 5}}
				for range 200 {
					lo := rng.Uint64N(n)
					ranges = append(ranges, [2]uint64{lo, lo + rng.Uint64N(n-lo+1)})
				}
				for _, r := range ranges {
					got := o.appendRange(r[0], r[1], []uint64{77})
					if uint64(len(got)) != 1+r[1]-r[0] || got[0] != 77 {
						t.Fatalf("k=%d epoch %d [%d, %d): %d values, want 77 then %d", k, epoch, r[0], r[1], len(got), r[1]-r[0])
					}
					for i, id := range got[1:] {
						if q := r[0] + uint64(i); id != want[q] {
							t.Fatalf("k=%d epoch %d [%d, %d): position %d holds %d, at gives %d", k, epoch, r[0], r[1], q, id, want[q])
						}
					}
				}
			}
		}
	}
}
