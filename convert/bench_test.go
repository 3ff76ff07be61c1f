package convert

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
)

type benchRow struct {
	ID    int64     `parquet:"id"`
	F0    float32   `parquet:"f0"`
	F1    float32   `parquet:"f1"`
	F2    float32   `parquet:"f2"`
	F3    float32   `parquet:"f3"`
	F4    float32   `parquet:"f4"`
	F5    float32   `parquet:"f5"`
	F6    float32   `parquet:"f6"`
	F7    float32   `parquet:"f7"`
	Emb   []float32 `parquet:"emb,list"`
	Label string    `parquet:"label,dict"`
}

const benchSpecYAML = `
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: f, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
`

// BenchmarkConvert converts a generated snappy file (int64 id, 8 float32
// columns, a LIST<FLOAT> of 16, a dictionary string label) end to end into
// 2 shards; MB/s is source file bytes per second.
func BenchmarkConvert(b *testing.B) {
	rows := 400_000
	if testing.Short() {
		rows = 50_000
	}
	dir := b.TempDir()
	path := filepath.Join(dir, "bench.parquet")
	pqfixture.Generate(rows, func(i int) benchRow {
		x := float32(i)
		e := make([]float32, 16)
		for k := range e {
			e[k] = x*0.001 + float32(k)
		}
		return benchRow{ID: int64(i), F0: x, F1: -x, F2: x / 3, F3: x * 7, F4: 1 / (x + 1), F5: x + 0.5, F6: x * x, F7: -x / 9,
			Emb: e, Label: fmt.Sprintf("label-%d", (i*7919)%1000)}
	}).WriteBatch(4096).Codec(&parquet.Snappy).RowGroupRows(100_000).WriteFile(b, path)
	st, _ := os.Stat(path)
	p := featuretest.MakePlan(b, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1024, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := feature.ParseSpec([]byte(benchSpecYAML), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(b.TempDir(), fmt.Sprint(i))
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(sum.Bytes)/sum.Seconds/1e6, "outMB/s")
		b.ReportMetric(sum.DecodeSeconds, "decode-s")
		b.ReportMetric(sum.WriteSeconds, "write-s")
	}
}

// writeZipfLists writes path: rows rows of an int64 id and a LIST<INT32>
// "hist" whose lengths follow a Zipf law over 1..1024 (mean about 20,
// seeded, as gpuload's jagged benchmarks), and returns the values' bytes.
func writeZipfLists(b *testing.B, path string, rows int) int64 {
	type zipfRow struct {
		ID   int64   `parquet:"id"`
		Hist []int32 `parquet:"hist,list"`
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.7, 2, 1023)
	var raw int64
	// Rows are made in order, once each, as they are written.
	pqfixture.Generate(rows, func(i int) zipfRow {
		h := make([]int32, z.Uint64()+1)
		for k := range h {
			h[k] = int32(i + k)
		}
		raw += 4 * int64(len(h))
		return zipfRow{ID: int64(i), Hist: h}
	}).WriteBatch(1024).Codec(&parquet.Snappy).RowGroupRows(50_000).WriteFile(b, path)
	return raw
}

// BenchmarkConvertJaggedZipf converts a Zipf-skewed LIST<INT32> (lengths
// 1..1024, mean about 20) twice per iteration: as a jagged I32 tensor and
// as the fixed-shape tensor [1024] padded with list.pad. It reports both
// runs' rows per second and their shard bytes against the raw values
// bytes ("x-values": offsets, sample ids, alignment and padding included).
func BenchmarkConvertJaggedZipf(b *testing.B) {
	rows := 100_000
	if testing.Short() {
		rows = 10_000
	}
	dir := b.TempDir()
	raw := writeZipfLists(b, filepath.Join(dir, "zipf.parquet"), rows)
	p := featuretest.MakePlan(b, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1024, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	specs := map[string]string{
		"jagged": `tensors: [{name: id, column: id, dtype: I64}, {name: hist, column: hist, dtype: I32, list: {jagged: true}}]`,
		"fixed":  `tensors: [{name: id, column: id, dtype: I64}, {name: hist, column: hist, dtype: I32, shape: [1024], list: {pad: 0}}]`,
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, name := range []string{"jagged", "fixed"} {
			spec, err := feature.ParseSpec([]byte(specs[name]), name+".yaml")
			if err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(b.TempDir(), fmt.Sprint(name, i))
			sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(rows)/sum.Seconds, name+"-rows/s")
			b.ReportMetric(float64(sum.Bytes)/float64(raw), name+"-x-values")
			os.RemoveAll(out)
		}
	}
}
