package verify_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"sort"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// holdCounter is a PartSource recording the ids of each Hold.
type holdCounter struct {
	verify.SampleSource
	holds *[][]uint64
}

func (h holdCounter) Hold(ctx context.Context, ids []uint64) error {
	*h.holds = append(*h.holds, append([]uint64(nil), ids...))
	return h.SampleSource.(verify.PartSource).Hold(ctx, ids)
}

func (h holdCounter) Held(t, i int) []byte { return h.SampleSource.(verify.PartSource).Held(t, i) }

// rowGroupOf returns the row group of p holding id.
func rowGroupOf(p *plan.Plan, id uint64) int {
	var start uint64
	for g, r := range p.Source.Files[0].RowGroups {
		if id < start+uint64(r) {
			return g
		}
		start += uint64(r)
	}
	return -1
}

// TestDeepPartsDecodeEachRowGroupOnce pins the decode count of the deep
// check by parts: over 8 row groups of 100 rows, with a 64 KiB limit and
// Jobs 1 the part budget is 16 KiB (a quarter), each needed id counting 64
// bytes (x 12 and y 8 bytes, twice, and 24 of bookkeeping): about 5 row
// groups of a shard's ids (about 50 each) a part, so each shard's ids are
// held in 2 parts, every row group in exactly one Hold and every id of
// the shard held once. The batch-by-batch comparison under the same limit
// (a window of about 2 KiB of ids) would decode every row group once per
// window.
func TestDeepPartsDecodeEachRowGroupOnce(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	var shards [][][]uint64
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		shards = append(shards, nil)
		return holdCounter{src, &shards[len(shards)-1]}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 1, MemoryLimit: 64 << 10})
	if !rep.OK || rep.DeepBatches != 4*f.Plan.Steps() {
		t.Fatalf("deep %d of %d batches\n%s", rep.DeepBatches, 4*f.Plan.Steps(), verifytest.Lines(rep))
	}
	if len(shards) != 4 {
		t.Fatalf("%d sources opened, want one per shard (4)", len(shards))
	}
	for i, holds := range shards {
		if len(holds) != 2 {
			t.Errorf("shard %d: %d holds, want 2", i, len(holds))
		}
		seen := map[int]int{} // row group -> the hold that has it
		var all []uint64
		for h, ids := range holds {
			if !sort.SliceIsSorted(ids, func(a, b int) bool { return ids[a] < ids[b] }) {
				t.Errorf("shard %d hold %d: ids not sorted", i, h)
			}
			for _, id := range ids {
				g := rowGroupOf(f.Plan, id)
				if x, ok := seen[g]; ok && x != h {
					t.Errorf("shard %d: row group %d held by holds %d and %d", i, g, x, h)
				}
				seen[g] = h
			}
			all = append(all, ids...)
		}
		want := shardIDs(t, f, i)
		if !reflect.DeepEqual(all, want) {
			t.Errorf("shard %d: held %d ids, want its %d distinct ids once each", i, len(all), len(want))
		}
	}
}

// shardIDs returns the distinct sample ids of shard i of f, ascending.
func shardIDs(t *testing.T, f *verifytest.Fixture, i int) []uint64 {
	t.Helper()
	r, err := shardfmt.Open(f.ShardPath(i))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	set := map[uint64]bool{}
	for k := 0; k < r.NumBatches(); k++ {
		ids, err := r.SampleIDs(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			set[id] = true
		}
	}
	var out []uint64
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// TestDeepPartsFindingsAsBatchByBatch changes element 0 of x in slot 0
// and y in the last slot of every batch of shard 1: under a 16 KiB limit
// (row groups split into parts) and the default, the deep check by parts
// reports the same findings, in the same order (5 listed under
// MaxPerShard 5, then the summary counting the rest), as the
// batch-by-batch comparison of a source that is no PartSource.
func TestDeepPartsFindingsAsBatchByBatch(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	g, err := shardfmt.NewGeometry(f.Plan.BatchSize(), verifytest.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	f.RewriteShard(t, 1, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		x := block[g.SlabOffset[0]:]
		binary.LittleEndian.PutUint32(x, math.Float32bits(-1))
		y := block[g.SlabOffset[1]+uint64(len(ids)-1)*g.SampleBytes[1]:]
		binary.LittleEndian.PutUint64(y, 77)
		return block, ids, pads
	})
	batchwise := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return fixedOnly{src}, err
	}
	for _, limit := range []int64{16 << 10, 1 << 30} {
		opts := verify.Options{Dir: f.Dir, Deep: true, Jobs: 1, MaxPerShard: 5, MemoryLimit: limit}
		opts.Source = batchwise
		want := verifytest.Run(t, opts)
		opts.Source = verifytest.OpenSource
		got := verifytest.Run(t, opts)
		if n := 2 * f.Plan.Steps(); len(want.Findings) != 5+1 || want.Findings[5].Message != fmt.Sprintf("%d more value_mismatch findings in this shard not listed", n-5) {
			t.Fatalf("batch by batch:\n%s", verifytest.Lines(want))
		}
		if !reflect.DeepEqual(got.Findings, want.Findings) || got.DeepBatches != want.DeepBatches {
			t.Errorf("limit %d: by parts (deep %d):\n%s\nbatch by batch (deep %d):\n%s", limit, got.DeepBatches, verifytest.Lines(got), want.DeepBatches, verifytest.Lines(want))
		}
	}
}
