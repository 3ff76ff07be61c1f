package convert

import (
	"bytes"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/shardfmt"
)

// The tensor-by-tensor gather writes exactly the bytes of a plain
// sample-by-sample copy, for every sample size class it specialises (1, 2,
// 4, 8, multiples of 8, others) and a short last batch, and leaves the rest
// of the block alone.
func TestGatherMatchesPlainCopy(t *testing.T) {
	tensors := []shardfmt.TensorInfo{
		{Name: "u8", DType: shardfmt.U8},
		{Name: "f16", DType: shardfmt.F16},
		{Name: "f32", DType: shardfmt.F32},
		{Name: "i64", DType: shardfmt.I64},
		{Name: "v", DType: shardfmt.F32, Shape: []uint64{6}},
		{Name: "odd", DType: shardfmt.U8, Shape: []uint64{3}},
		{Name: "big", DType: shardfmt.F64, Shape: []uint64{40}},
	}
	const n = 300
	set := feature.NewIDSet(n)
	for id := uint64(0); id < n; id++ {
		if id%3 != 1 {
			set.Add(id)
		}
	}
	set.Seal()
	rec := feature.RecordSize(tensors)
	data := make([]byte, int(set.Len())*rec)
	for i := range data {
		data[i] = byte(i*7 + i>>8)
	}
	bufs := feature.NewRecords(tensors, data)
	const b = 16
	geo, err := shardfmt.NewGeometry(b, tensors)
	if err != nil {
		t.Fatal(err)
	}
	ga := newGatherer(bufs, set, &shardOut{geo: geo})
	for _, ids := range [][]uint64{{0, 299, 2, 3, 5, 297, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20}, {294, 0, 2}} {
		got := bytes.Repeat([]byte{0xee}, int(geo.BlockSize))
		want := bytes.Repeat([]byte{0xee}, int(geo.BlockSize))
		if err := ga.gather(got, ids); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			for tt := range tensors {
				m := int(geo.SampleBytes[tt])
				copy(want[int(geo.SlabOffset[tt])+i*m:][:m], bufs.At(tt, int64(set.Rank(id))))
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ids %v: block differs from a plain copy", ids)
		}
	}
	if err := ga.gather(make([]byte, geo.BlockSize), []uint64{1}); err == nil || err.Error() != "internal: sample 1 is not staged" {
		t.Errorf("gathering an id outside the staged set: %v, want internal: sample 1 is not staged", err)
	}
}

// BenchmarkGather gathers batches of 1024 random samples from 2M staged
// records of the bench spec's layout (I64 id, 8 F32, 16 F32, I64 label: 112
// bytes) in anonymous staging, as stage 2 does; ns/op is per batch.
func BenchmarkGather(b *testing.B) {
	tensors := []shardfmt.TensorInfo{
		{Name: "id", DType: shardfmt.I64},
		{Name: "feat", DType: shardfmt.F32, Shape: []uint64{8}},
		{Name: "emb", DType: shardfmt.F32, Shape: []uint64{16}},
		{Name: "label", DType: shardfmt.I64},
	}
	n := uint64(2_000_000)
	if testing.Short() {
		n = 200_000
	}
	set := feature.NewIDSet(n)
	set.Fill()
	set.Seal()
	rec := feature.RecordSize(tensors)
	st := newStaging(int64(n) * int64(rec))
	if st == nil {
		st = &staging{data: make([]byte, int64(n)*int64(rec))}
	}
	defer st.remove()
	for i := range st.data {
		st.data[i] = byte(i)
	}
	geo, err := shardfmt.NewGeometry(1024, tensors)
	if err != nil {
		b.Fatal(err)
	}
	g := newGatherer(feature.NewRecords(tensors, st.data), set, &shardOut{geo: geo})
	block := make([]byte, geo.BlockSize)
	ids := make([]uint64, 1024)
	x := uint64(88172645463325252)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range ids {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			ids[j] = x % n
		}
		if err := g.gather(block, ids); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1024/b.Elapsed().Seconds()/1e6, "Msamples/s")
}
