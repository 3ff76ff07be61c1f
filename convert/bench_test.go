package convert

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

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
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := parquet.NewGenericWriter[benchRow](f, parquet.Compression(&parquet.Snappy), parquet.MaxRowsPerRowGroup(100_000))
	batch := make([]benchRow, 0, 4096)
	emb := make([]float32, 16*4096)
	for i := 0; i < rows; i++ {
		x := float32(i)
		e := emb[len(batch)*16 : len(batch)*16+16]
		for k := range e {
			e[k] = x*0.001 + float32(k)
		}
		batch = append(batch, benchRow{ID: int64(i), F0: x, F1: -x, F2: x / 3, F3: x * 7, F4: 1 / (x + 1), F5: x + 0.5, F6: x * x, F7: -x / 9,
			Emb: e, Label: fmt.Sprintf("label-%d", (i*7919)%1000)})
		if len(batch) == cap(batch) || i == rows-1 {
			if _, err := w.Write(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	st, _ := os.Stat(path)
	p := makePlan(b, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1024, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte(benchSpecYAML), "bench.yaml")
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
