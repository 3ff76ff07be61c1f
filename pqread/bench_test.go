package pqread

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

type benchRow struct {
	A int64   `parquet:"a"`
	B float32 `parquet:"b"`
}

type benchOptRow struct {
	A *int64   `parquet:"a,optional"`
	B *float32 `parquet:"b,optional"`
}

// BenchmarkReadColumn decodes a generated file of 1M rows (required int64 +
// float32, PLAIN, SNAPPY, one row group) and reports decoded bytes per
// second (12 bytes per row); "optional" has 10% nulls.
func BenchmarkReadColumn(b *testing.B) {
	const n = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	req := make([]benchRow, n)
	opt := make([]benchOptRow, n)
	for i := range req {
		req[i] = benchRow{A: int64(rng.Uint64() >> 20), B: rng.Float32()}
		if i%10 != 0 {
			a, f := req[i].A, req[i].B
			opt[i] = benchOptRow{A: &a, B: &f}
		}
	}
	opts := []parquet.WriterOption{parquet.Compression(&snappy.Codec{}), parquet.MaxRowsPerRowGroup(n)}
	files := map[string]string{
		"required": writeParquet(b, req, opts...),
		"optional": writeParquet(b, opt, opts...),
	}
	for _, name := range []string{"required", "optional"} {
		b.Run(name, func(b *testing.B) {
			f := mustOpen(b, files[name])
			cols := f.Columns()
			b.SetBytes(n * 12)
			b.ResetTimer()
			for range b.N {
				for _, ci := range cols {
					c, err := f.ReadColumn(0, ci)
					if err != nil {
						b.Fatal(err)
					}
					if c.Rows != n {
						b.Fatal(fmt.Sprint(c.Rows))
					}
				}
			}
		})
	}
}

type benchListRow struct {
	Emb []float32 `parquet:"emb,list"`
}

// BenchmarkReadListColumn decodes 256Ki rows of a required LIST<FLOAT> of 16
// (PLAIN, SNAPPY, one row group, no nulls) and reports decoded value bytes
// per second (64 bytes per row).
func BenchmarkReadListColumn(b *testing.B) {
	const n = 1 << 18
	rows := make([]benchListRow, n)
	vals := make([]float32, 16*n)
	for i := range vals {
		vals[i] = float32(i) * 0.25
	}
	for i := range rows {
		rows[i].Emb = vals[16*i : 16*i+16]
	}
	f := mustOpen(b, writeParquet(b, rows, parquet.Compression(&snappy.Codec{}), parquet.MaxRowsPerRowGroup(n)))
	ci := f.Columns()[0]
	b.SetBytes(n * 64)
	b.ResetTimer()
	for range b.N {
		c, err := f.ReadColumn(0, ci)
		if err != nil {
			b.Fatal(err)
		}
		if c.Rows != n || len(c.Float32) != 16*n {
			b.Fatal(c.Rows, len(c.Float32))
		}
	}
}
