package verify_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// holdLog records, over every source a run opens, each Hold (which
// source, which ids) and each SetMemoryLimit.
type holdLog struct {
	mu     sync.Mutex
	opened int
	holds  []heldCall
	limits map[int]int64 // source -> SetMemoryLimit's bytes
}

type heldCall struct {
	src int
	ids []uint64
}

// opener returns a SourceOpener over the fixture's source whose sources
// record into l.
func (l *holdLog) opener(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
	src, err := verifytest.OpenSource(p, m, root, g, ts)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opened++
	return holdCounter{src, l, l.opened - 1}, err
}

// holdCounter is a PartSource (and JaggedSource and MemoryLimiter)
// recording into a holdLog.
type holdCounter struct {
	verify.SampleSource
	log *holdLog
	n   int
}

func (h holdCounter) Hold(ctx context.Context, ids []uint64) error {
	h.log.mu.Lock()
	h.log.holds = append(h.log.holds, heldCall{h.n, slices.Clone(ids)})
	h.log.mu.Unlock()
	return h.SampleSource.(verify.PartSource).Hold(ctx, ids)
}

func (h holdCounter) Held(t, i int) []byte { return h.SampleSource.(verify.PartSource).Held(t, i) }

func (h holdCounter) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	return h.SampleSource.(verify.JaggedSource).JaggedValues(ctx, t, ids)
}

func (h holdCounter) SetMemoryLimit(n int64) {
	h.log.mu.Lock()
	defer h.log.mu.Unlock()
	if h.log.limits == nil {
		h.log.limits = map[int]int64{}
	}
	if _, ok := h.log.limits[h.n]; ok {
		panic("SetMemoryLimit called twice")
	}
	h.log.limits[h.n] = n
}

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

// TestDeepPartsHoldEachRowGroupOncePerSet pins the decode count of the
// deep check by parts over a set: 800 rows in 8 row groups of 100, 2
// epochs x 2 ranks (4 shards, 400 ids each, every id in 2 shards). An id
// counts 36 bytes (x 12 and y 8 bytes, 16 of bookkeeping), a row group
// 3,600 (its 200 needs, at most its 100 rows) plus 80 of index (2 words
// of 40). Under a 16 KiB limit the part budget is 8 KiB (half): 2 row
// groups a part (7,360 bytes; 3 take 10,960), so 4 Holds of 200 ids, on
// one source, each row group in exactly one of them and every id of the
// set held once: 800 ids, where holding per shard would hold 1,600 in
// 8 Holds. Under a 4 KiB limit (budget 2,048) each row group is cut in 2
// sub-ranges of 50 ids: 16 Holds, each row group in 2.
func TestDeepPartsHoldEachRowGroupOncePerSet(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	all := make([]uint64, 800)
	for i := range all {
		all[i] = uint64(i)
	}
	for _, c := range []struct {
		limit        int64
		holds, perRG int
	}{{16 << 10, 4, 1}, {4 << 10, 16, 2}} {
		for _, jobs := range []int{1, 2} {
			var l holdLog
			var told [][2]int64
			rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: l.opener, Jobs: jobs, MemoryLimit: c.limit,
				OnDeepParts: func(parts int, onePart int64) { told = append(told, [2]int64{int64(parts), onePart}) }})
			if !rep.OK || rep.DeepBatches != 4*f.Plan.Steps() {
				t.Fatalf("limit %d jobs %d: deep %d of %d batches\n%s", c.limit, jobs, rep.DeepBatches, 4*f.Plan.Steps(), verifytest.Lines(rep))
			}
			// One group of shards: told once, with the parts held and
			// the limit holding it in one, twice the estimate a part's
			// budget (half the limit) is cut from: over one budget and
			// at most one per part.
			if rep.DeepParts != c.holds || len(told) != 1 || told[0][0] != int64(c.holds) {
				t.Fatalf("limit %d jobs %d: DeepParts %d, OnDeepParts %v; want %d parts, told once", c.limit, jobs, rep.DeepParts, told, c.holds)
			}
			if est, budget := told[0][1]/2, c.limit/2; est <= budget || est > int64(c.holds)*budget {
				t.Errorf("limit %d jobs %d: one-part limit %d: estimate %d for %d parts of %d", c.limit, jobs, told[0][1], est, c.holds, budget)
			}
			if l.opened != 4 || len(l.holds) != c.holds {
				t.Fatalf("limit %d jobs %d: %d sources opened, %d holds; want 4, %d", c.limit, jobs, l.opened, len(l.holds), c.holds)
			}
			rgHolds := map[int]map[int]bool{} // row group -> the holds that have it
			var got []uint64
			for h, call := range l.holds {
				if call.src != l.holds[0].src {
					t.Errorf("limit %d jobs %d: hold %d on source %d, hold 0 on %d", c.limit, jobs, h, call.src, l.holds[0].src)
				}
				if len(call.ids) != 800/c.holds || !slices.IsSorted(call.ids) {
					t.Errorf("limit %d jobs %d: hold %d has %d ids (sorted %v), want %d", c.limit, jobs, h, len(call.ids), slices.IsSorted(call.ids), 800/c.holds)
				}
				for _, id := range call.ids {
					g := rowGroupOf(f.Plan, id)
					if rgHolds[g] == nil {
						rgHolds[g] = map[int]bool{}
					}
					rgHolds[g][h] = true
				}
				got = append(got, call.ids...)
			}
			for g := range 8 {
				if len(rgHolds[g]) != c.perRG {
					t.Errorf("limit %d jobs %d: row group %d in %d holds, want %d", c.limit, jobs, g, len(rgHolds[g]), c.perRG)
				}
			}
			if !reflect.DeepEqual(got, all) {
				t.Errorf("limit %d jobs %d: held %d ids, want each of the 800 once, ascending", c.limit, jobs, len(got))
			}
		}
	}
}

// TestDeepPartsMemoryLimits pins the memory the deep check by parts
// gives out: the holding source's SetMemoryLimit is a quarter of the
// whole limit (one decode at a time for the set), no other source's is
// set, and each Hold's ids and index fit half the limit.
func TestDeepPartsMemoryLimits(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	for _, limit := range []int64{3 << 10, 16 << 10, 1 << 30} {
		var l holdLog
		rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: l.opener, Jobs: 2, MemoryLimit: limit})
		if !rep.OK {
			t.Fatalf("limit %d:\n%s", limit, verifytest.Lines(rep))
		}
		if want := map[int]int64{l.holds[0].src: limit / 4}; !reflect.DeepEqual(l.limits, want) {
			t.Errorf("limit %d: SetMemoryLimit calls %v, want %v", limit, l.limits, want)
		}
		for h, call := range l.holds {
			lo, hi := call.ids[0], call.ids[len(call.ids)-1]+1
			if used := uint64(len(call.ids))*36 + (hi-lo+63)/64*40; used > uint64(limit/2) {
				t.Errorf("limit %d: hold %d of %d ids in [%d, %d) counts %d bytes, over %d", limit, h, len(call.ids), lo, hi, used, limit/2)
			}
		}
	}
}

// windowOnly hides Hold and Held (not a PartSource): verify compares
// batch by batch.
type windowOnly struct{ src verify.SampleSource }

func (w windowOnly) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	return w.src.FillBlock(ctx, ids, block)
}
func (w windowOnly) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	return w.src.(verify.JaggedSource).JaggedValues(ctx, t, ids)
}
func (w windowOnly) Close() error { return w.src.Close() }

// threeShardsChanged builds a set of 4 shards (800 rows, dim 3, global
// batch 16, 8 row groups) and changes values in three of them: in shard 0
// element 0 of x in slot 0 of every batch, in shard 2 y in slot 1 of
// every third batch, in shard 3 element 2 of x in the last slot of every
// even batch.
func threeShardsChanged(t *testing.T) *verifytest.Fixture {
	t.Helper()
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	g, err := shardfmt.NewGeometry(f.Plan.BatchSize(), verifytest.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	f.RewriteShard(t, 0, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		binary.LittleEndian.PutUint32(block[g.SlabOffset[0]:], math.Float32bits(-1))
		return block, ids, pads
	})
	f.RewriteShard(t, 2, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		if k%3 == 0 {
			binary.LittleEndian.PutUint64(block[g.SlabOffset[1]+g.SampleBytes[1]:], 77)
		}
		return block, ids, pads
	})
	f.RewriteShard(t, 3, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		if k%2 == 0 {
			binary.LittleEndian.PutUint32(block[g.SlabOffset[0]+uint64(len(ids)-1)*g.SampleBytes[0]+8:], math.Float32bits(0.5))
		}
		return block, ids, pads
	})
	return f
}

// TestDeepPartsFindingsAsBatchByBatch changes values in three of the four
// shards: in shard 0 element 0 of x in slot 0 of every batch, in shard 2
// y in slot 1 of every third batch, in shard 3 element 2 of x in the last
// slot of every even batch. Under limits that hold the set in 1, 4 and 16
// parts and with 1 and 2 jobs, the deep check by parts reports the same
// findings, in the same order (MaxPerShard 5 listed per shard, then the
// summaries counting the rest), as the batch-by-batch comparison.
func TestDeepPartsFindingsAsBatchByBatch(t *testing.T) {
	f := threeShardsChanged(t)
	batchwise := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return windowOnly{src}, err
	}
	steps := f.Plan.Steps()
	for _, limit := range []int64{4 << 10, 16 << 10, 1 << 30} {
		for _, jobs := range []int{1, 2} {
			opts := verify.Options{Dir: f.Dir, Deep: true, Jobs: jobs, MaxPerShard: 5, MemoryLimit: limit}
			opts.Source = batchwise
			want := verifytest.Run(t, opts)
			opts.Source = verifytest.OpenSource
			got := verifytest.Run(t, opts)
			summaries := []string{
				fmt.Sprintf("%d more value_mismatch findings in this shard not listed", steps-5),
				fmt.Sprintf("%d more value_mismatch findings in this shard not listed", (steps+2)/3-5),
				fmt.Sprintf("%d more value_mismatch findings in this shard not listed", (steps+1)/2-5),
			}
			if len(want.Findings) != 3*6 || want.Findings[5].Message != summaries[0] || want.Findings[11].Message != summaries[1] || want.Findings[17].Message != summaries[2] {
				t.Fatalf("batch by batch:\n%s", verifytest.Lines(want))
			}
			if !reflect.DeepEqual(got.Findings, want.Findings) || got.DeepBatches != want.DeepBatches || got.DeepBatches != 4*steps {
				t.Errorf("limit %d jobs %d: by parts (deep %d):\n%s\nbatch by batch (deep %d):\n%s", limit, jobs, got.DeepBatches, verifytest.Lines(got), want.DeepBatches, verifytest.Lines(want))
			}
		}
	}
}

// TestDeepPartsJaggedFindingsAsBatchByBatch: over the jagged fixture
// with one value of h changed in shard 0, one element of p in shard 3
// and y in slot 0 of every batch of shard 1, the deep check by parts
// reports what the batch-by-batch comparison does, under a limit that
// cuts the set into parts and the default.
func TestDeepPartsJaggedFindingsAsBatchByBatch(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 400, Dim: 3, GlobalBatch: 8, RowGroups: 4, Jagged: true})
	jaggedEdit(t, f, 0, 2, 2, func(v []byte) { binary.LittleEndian.PutUint32(v[4:], 7777) })
	jaggedEdit(t, f, 3, 3, 2, func(v []byte) { binary.LittleEndian.PutUint32(v[12:], math.Float32bits(9.5)) })
	g, err := shardfmt.NewGeometry(f.Plan.BatchSize(), verifytest.JaggedTensors)
	if err != nil {
		t.Fatal(err)
	}
	f.RewriteShard(t, 1, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		binary.LittleEndian.PutUint64(block[g.SlabOffset[1]:], 5)
		return block, ids, pads
	})
	batchwise := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return windowOnly{src}, err
	}
	for _, limit := range []int64{8 << 10, 1 << 30} {
		opts := verify.Options{Dir: f.Dir, Deep: true, Jobs: 2, MaxPerShard: 4, MemoryLimit: limit}
		opts.Source = batchwise
		want := verifytest.Run(t, opts)
		var l holdLog
		opts.Source = l.opener
		got := verifytest.Run(t, opts)
		if len(want.Findings) != 1+4+1+1 {
			t.Fatalf("batch by batch:\n%s", verifytest.Lines(want))
		}
		if !reflect.DeepEqual(got.Findings, want.Findings) || got.DeepBatches != want.DeepBatches {
			t.Errorf("limit %d: by parts (deep %d):\n%s\nbatch by batch (deep %d):\n%s", limit, got.DeepBatches, verifytest.Lines(got), want.DeepBatches, verifytest.Lines(want))
		}
		if limit < 1<<20 && len(l.holds) < 2 {
			t.Errorf("limit %d: %d holds, want the limit to cut the set into parts", limit, len(l.holds))
		}
	}
}

// failingHold is a PartSource whose Hold fails when ids hold bad.
type failingHold struct {
	verify.SampleSource
	bad uint64
}

func (f failingHold) Hold(ctx context.Context, ids []uint64) error {
	if _, ok := slices.BinarySearch(ids, f.bad); ok {
		return fmt.Errorf("row group of sample %d unreadable", f.bad)
	}
	return f.SampleSource.(verify.PartSource).Hold(ctx, ids)
}

func (f failingHold) Held(t, i int) []byte { return f.SampleSource.(verify.PartSource).Held(t, i) }

// TestDeepPartsHoldFails: when the Hold of one part fails, every batch of
// every shard holding one of that part's ids gets one source_unreadable
// finding with the source's error, and is not counted compared; the
// other batches are compared clean. Under a 16 KiB limit the part is row
// groups 0 and 1 (ids [0, 200), see
// TestDeepPartsHoldEachRowGroupOncePerSet).
func TestDeepPartsHoldFails(t *testing.T) {
	f := verifytest.BuildSize(t, verifytest.Size{Rows: 800, Dim: 3, GlobalBatch: 16, RowGroups: 8})
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return failingHold{src, 150}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 2, MemoryLimit: 16 << 10, MaxPerShard: 1000})
	var want []string
	failed := 0
	for i, s := range f.Man.Shards {
		r, err := shardfmt.Open(f.ShardPath(i))
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < r.NumBatches(); k++ {
			ids, err := r.SampleIDs(k)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(ids, func(id uint64) bool { return id < 200 }) {
				want = append(want, fmt.Sprintf("source_unreadable %s b%d", s.Path, k))
				failed++
			}
		}
		r.Close()
	}
	slices.Sort(want)
	if failed == 0 || failed == 4*f.Plan.Steps() {
		t.Fatalf("test premise: %d of %d batches hold an id below 200", failed, 4*f.Plan.Steps())
	}
	if got := verifytest.Keys(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Errorf("findings %q,\nwant %q", got, want)
	}
	for _, x := range rep.Findings {
		if x.Message != "row group of sample 150 unreadable" {
			t.Errorf("finding %s: message %q", x, x.Message)
			break
		}
	}
	if rep.DeepBatches != 4*f.Plan.Steps()-failed {
		t.Errorf("%d batches compared, want %d", rep.DeepBatches, 4*f.Plan.Steps()-failed)
	}
}
