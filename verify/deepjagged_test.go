package verify_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// TestDeepJaggedClean compares every batch of the jagged fixture with its
// source: no finding, every batch compared.
func TestDeepJaggedClean(t *testing.T) {
	f := verifytest.BuildJagged(t)
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: verifytest.OpenSource, Jobs: 2})
	if !rep.OK || rep.DeepBatches != 4*f.Plan.Steps() {
		t.Fatalf("deep %d of %d batches\n%s", rep.DeepBatches, 4*f.Plan.Steps(), verifytest.Lines(rep))
	}
}

// jaggedEdit finds in shard i of f the first batch and slot whose sample
// holds at least minValues values of jagged tensor ti, and rewrites the
// shard with edit applied to that sample's values bytes (CRCs and digest
// recomputed). It returns the batch, slot and sample id edited.
func jaggedEdit(t *testing.T, f *verifytest.Fixture, i, ti, minValues int, edit func(values []byte)) (int, int, uint64) {
	t.Helper()
	bk, slot := -1, -1
	var id uint64
	f.RewriteShard(t, i, func(k int, block []byte, ids []uint64, pads int) ([]byte, []uint64, int) {
		if bk >= 0 {
			return block, ids, pads
		}
		g, err := shardfmt.NewGeometry(f.Plan.BatchSize(), verifytest.JaggedTensors)
		if err != nil {
			t.Fatal(err)
		}
		off := func(j int) int { return int(binary.LittleEndian.Uint64(block[g.SlabOffset[ti]+8*uint64(j):])) }
		var counts []uint64
		for x := range verifytest.JaggedTensors {
			if g.IsJagged(x) {
				counts = append(counts, binary.LittleEndian.Uint64(block[g.SlabOffset[x]+8*uint64(g.BatchSize):]))
			}
		}
		lay, err := g.BatchLayout(counts)
		if err != nil {
			t.Fatal(err)
		}
		vb := int(g.SampleBytes[ti])
		for s := range ids {
			if off(s+1)-off(s) >= minValues {
				at := int(lay.ValuesOffset[ti])
				edit(block[at+off(s)*vb : at+off(s+1)*vb])
				bk, slot, id = k, s, ids[s]
				break
			}
		}
		return block, ids, pads
	})
	if bk < 0 {
		t.Fatalf("shard %d has no sample with %d values of tensor %d", i, minValues, ti)
	}
	return bk, slot, id
}

// TestDeepJaggedValueChanged changes one value of jagged tensor h (I32
// scalars) and one element of jagged tensor p (F32 values of shape [2]) in
// shards whose checksums are then recomputed: each is one value_mismatch
// naming epoch, rank, batch, slot, sample, tensor and the element (counted
// row-major across the sample's values), with both values exact.
func TestDeepJaggedValueChanged(t *testing.T) {
	f := verifytest.BuildJagged(t)
	src, err := os.ReadFile(filepath.Join(f.SrcDir, verifytest.SourceFile))
	if err != nil {
		t.Fatal(err)
	}
	// h: element 1 of a sample with 2 or more values becomes 7777.
	hk, hs, hid := jaggedEdit(t, f, 0, 2, 2, func(v []byte) { binary.LittleEndian.PutUint32(v[4:], 7777) })
	// p: element 3 (value 1, component 1, -1/4 in the source) becomes 9.5.
	pk, ps, pid := jaggedEdit(t, f, 3, 3, 2, func(v []byte) { binary.LittleEndian.PutUint32(v[12:], math.Float32bits(9.5)) })
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: verifytest.OpenSource, Jobs: 2})
	if rep.DeepBatches != 4*f.Plan.Steps() || len(rep.Findings) != 2 {
		t.Fatalf("deep batches %d, findings:\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	v := verifytest.SourceValue(src, hid)
	type want struct {
		shard, tensor, expected, actual, message string
		epoch, rank, batch, element              int
		id                                       uint64
	}
	wants := []want{
		{f.Man.Shards[0].Path, "h", verify.FormatValue(shardfmt.I32, binary.LittleEndian.AppendUint32(nil, uint32(v+1))), "7777",
			"slot " + strconv.Itoa(hs) + " differs from the source", f.Man.Shards[0].Epoch, f.Man.Shards[0].Rank, hk, 1, hid},
		{f.Man.Shards[3].Path, "p", "-0.25 (0xbe800000)", "9.5 (0x41180000)",
			"slot " + strconv.Itoa(ps) + " differs from the source", f.Man.Shards[3].Epoch, f.Man.Shards[3].Rank, pk, 3, pid},
	}
	for i, x := range rep.Findings {
		w := wants[i]
		got := want{x.Shard, x.Tensor, x.Expected, x.Actual, x.Message, *x.Epoch, *x.Rank, *x.Batch, *x.Element, *x.SampleID}
		if x.Kind != verify.KindValueMismatch || x.What != "value" || got != w {
			t.Errorf("finding %d: %s\n got %+v\nwant %+v", i, x, got, w)
		}
	}
}

// extraValue is a JaggedSource whose source holds one more value of
// tensor h for sample id than the shard.
type extraValue struct {
	verify.SampleSource
	id uint64
}

func (e extraValue) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	vals, err := e.SampleSource.(verify.JaggedSource).JaggedValues(ctx, t, ids)
	for i, id := range ids {
		if t == 2 && id == e.id {
			vals[i] = binary.LittleEndian.AppendUint32(append([]byte(nil), vals[i]...), 5)
		}
	}
	return vals, err
}

// TestDeepJaggedValuesCountDiffers pins that a sample whose list is
// longer in the source than in the shard (the offsets differ) is reported
// as a values_count mismatch for that sample and tensor only: the later
// samples' shifted offsets are no finding of their own.
func TestDeepJaggedValuesCountDiffers(t *testing.T) {
	f := verifytest.BuildJagged(t)
	const id = 5 // h holds 5%4 = 1 value in the shard, 2 in this source
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return extraValue{src, id}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 1, MaxPerShard: 100})
	var want []string
	for _, b := range batchesHolding(f, id) {
		want = append(want, "value_mismatch "+b.path+" b"+strconv.Itoa(b.k)+" h id5")
	}
	sort.Strings(want)
	if len(want) == 0 {
		t.Fatal("sample 5 is in no batch")
	}
	if got := verifytest.Keys(rep.Findings); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings\n got %q\nwant %q\n%s", got, want, verifytest.Lines(rep))
	}
	for _, x := range rep.Findings {
		if x.What != "values count" || x.Expected != "2" || x.Actual != "1" || x.Element != nil {
			t.Errorf("finding %s", x)
		}
	}
}

// prefetchCounter records the ids of each Prefetch of a JaggedSource.
type prefetchCounter struct {
	verify.SampleSource
	fetches *[]int
}

func (p prefetchCounter) JaggedValues(ctx context.Context, t int, ids []uint64) ([][]byte, error) {
	return p.SampleSource.(verify.JaggedSource).JaggedValues(ctx, t, ids)
}

func (p prefetchCounter) Prefetch(_ context.Context, ids []uint64) error {
	*p.fetches = append(*p.fetches, len(ids))
	return nil
}

// TestDeepJaggedPrefetchCountsValues pins that the prefetch window of a
// jagged shard counts its values, not only one value per sample. With
// Jobs 1 and a 32 KiB limit a prefetch holds 8 KiB (a quarter). Each
// batch of the fixture (b = 2) counts 2 samples of 36 bytes (x 12, y 8,
// two offsets of 8) and its 4096-byte block past the fixed part (values
// from byte 1024): 3144 bytes, plus 128 per id. Batches are added while
// that stays under 8 KiB: 3 of the 4 batches (6 ids), then the last (2
// ids). Counting 32 bytes a sample, as a fixed-shape shard does, would
// take all 4 at once.
func TestDeepJaggedPrefetchCountsValues(t *testing.T) {
	f := verifytest.BuildJagged(t)
	var fetches []int
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verifytest.OpenSource(p, m, root, g, ts)
		return prefetchCounter{src, &fetches}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: opener, Jobs: 1, MemoryLimit: 32 << 10})
	if !rep.OK || rep.DeepBatches != 4*f.Plan.Steps() {
		t.Fatalf("deep %d batches\n%s", rep.DeepBatches, verifytest.Lines(rep))
	}
	if want := []int{6, 2, 6, 2, 6, 2, 6, 2}; !reflect.DeepEqual(fetches, want) {
		t.Fatalf("prefetches of %v ids, want %v", fetches, want)
	}
}
