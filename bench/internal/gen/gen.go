// Package gen writes the benchmark's deterministic Parquet inputs.
//
// Every value is a pure function of (row index, column number): a
// counter-based SplitMix64 hash (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", OOPSLA 2014; constants from Vigna's
// public-domain splitmix64.c), so files are byte-identical on every run and
// rows can be produced in any order.
//
// The schema is the one the convert issue describes:
//
//	id     INT64                      row index
//	f0..f7 FLOAT                      tabular features, 8,192 distinct values each
//	emb    LIST<FLOAT>, 16 elements   embedding, uniform in [-1, 1), 2^24 distinct values
//	label  BYTE_ARRAY (STRING), dict  one of 1,000 class names "class-0000".."class-0999"
//
// Two layouts: Required (every field REQUIRED, PLAIN except the dictionary
// label) and Optional (every field OPTIONAL; f0..f7 and label
// dictionary-encoded; 1 % of the f0..f7 values null).
package gen

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// RowsPerRowGroup is the row-group size of every generated file.
const RowsPerRowGroup = 250_000

// EmbLen is the number of elements in every emb list.
const EmbLen = 16

// NumLabels is the number of distinct label strings.
const NumLabels = 1000

// NullPercent is the share of null f0..f7 values in the Optional layout.
const NullPercent = 1

// Variant names one generated file layout.
type Variant struct {
	Name     string // file stem, e.g. "req-plain-snappy"
	Optional bool   // Optional layout (nullable, dictionary features) instead of Required/PLAIN
	Codec    string // "snappy" or "zstd"
}

// Variants are the four layouts of the 2,000,000-row benchmark input.
var Variants = []Variant{
	{Name: "req-plain-snappy", Codec: "snappy"},
	{Name: "req-plain-zstd", Codec: "zstd"},
	{Name: "opt-dict-snappy", Optional: true, Codec: "snappy"},
	{Name: "opt-dict-zstd", Optional: true, Codec: "zstd"},
}

// ReqRow is one row of the Required layout.
type ReqRow struct {
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

// OptRow is one row of the Optional layout. A nil pointer is a null.
type OptRow struct {
	ID    *int64    `parquet:"id,optional"`
	F0    *float32  `parquet:"f0,optional,dict"`
	F1    *float32  `parquet:"f1,optional,dict"`
	F2    *float32  `parquet:"f2,optional,dict"`
	F3    *float32  `parquet:"f3,optional,dict"`
	F4    *float32  `parquet:"f4,optional,dict"`
	F5    *float32  `parquet:"f5,optional,dict"`
	F6    *float32  `parquet:"f6,optional,dict"`
	F7    *float32  `parquet:"f7,optional,dict"`
	Emb   []float32 `parquet:"emb,optional,list"`
	Label *string   `parquet:"label,optional,dict"`
}

// Hash returns the SplitMix64 output for (row, col): the generator's only
// source of values.
func Hash(row uint64, col uint64) uint64 {
	z := row*0x9E3779B97F4A7C15 + (col+1)*0xD1B54A32D192ED03
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Feature returns feature j (0..7) of row i: a multiple of 1/64 in [-64, 64).
func Feature(i uint64, j int) float32 {
	return float32(int32(Hash(i, uint64(j))%8192)-4096) / 64
}

// FeatureNull reports whether feature j of row i is null in the Optional layout.
func FeatureNull(i uint64, j int) bool {
	return Hash(i, uint64(32+j))%100 < NullPercent
}

// Emb returns element k (0..15) of row i's embedding: a multiple of 2^-23 in [-1, 1).
func Emb(i uint64, k int) float32 {
	return float32(int32(Hash(i, uint64(8+k))>>40)-(1<<23)) / (1 << 23)
}

var labels = func() []string {
	s := make([]string, NumLabels)
	for c := range s {
		s[c] = fmt.Sprintf("class-%04d", c)
	}
	return s
}()

// Label returns row i's label string.
func Label(i uint64) string { return labels[Hash(i, 24)%NumLabels] }

func codec(name string) (compress.Codec, error) {
	switch name {
	case "snappy":
		return &parquet.Snappy, nil
	case "zstd":
		return &parquet.Zstd, nil
	}
	return nil, fmt.Errorf("unknown codec %q", name)
}

// Write writes rows [first, first+n) of variant v to path, atomically
// (temporary name, then rename).
func Write(path string, v Variant, first, n uint64) error {
	c, err := codec(v.Codec)
	if err != nil {
		return err
	}
	return writeAtomic(path, func(f io.Writer) error {
		bw := bufio.NewWriterSize(f, 1<<20)
		opts := []parquet.WriterOption{parquet.Compression(c), parquet.MaxRowsPerRowGroup(RowsPerRowGroup)}
		const chunk = 4096
		if v.Optional {
			w := parquet.NewGenericWriter[OptRow](bw, opts...)
			rows := make([]OptRow, chunk)
			ids := make([]int64, chunk)
			feats := make([]float32, chunk*8)
			embs := make([]float32, chunk*EmbLen)
			lab := make([]string, chunk)
			for start := first; start < first+n; start += chunk {
				m := min(uint64(chunk), first+n-start)
				for r := range m {
					i := start + r
					ids[r] = int64(i)
					lab[r] = Label(i)
					row := OptRow{ID: &ids[r], Label: &lab[r], Emb: embs[r*EmbLen : (r+1)*EmbLen]}
					fp := []**float32{&row.F0, &row.F1, &row.F2, &row.F3, &row.F4, &row.F5, &row.F6, &row.F7}
					for j := range 8 {
						if FeatureNull(i, j) {
							continue
						}
						feats[r*8+uint64(j)] = Feature(i, j)
						*fp[j] = &feats[r*8+uint64(j)]
					}
					for k := range EmbLen {
						row.Emb[k] = Emb(i, k)
					}
					rows[r] = row
				}
				if _, err := w.Write(rows[:m]); err != nil {
					return fmt.Errorf("writing %s: %w", path, err)
				}
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("closing writer of %s: %w", path, err)
			}
		} else {
			w := parquet.NewGenericWriter[ReqRow](bw, opts...)
			rows := make([]ReqRow, chunk)
			embs := make([]float32, chunk*EmbLen)
			for start := first; start < first+n; start += chunk {
				m := min(uint64(chunk), first+n-start)
				for r := range m {
					i := start + r
					row := ReqRow{ID: int64(i), Label: Label(i), Emb: embs[r*EmbLen : (r+1)*EmbLen]}
					fs := []*float32{&row.F0, &row.F1, &row.F2, &row.F3, &row.F4, &row.F5, &row.F6, &row.F7}
					for j := range 8 {
						*fs[j] = Feature(i, j)
					}
					for k := range EmbLen {
						row.Emb[k] = Emb(i, k)
					}
					rows[r] = row
				}
				if _, err := w.Write(rows[:m]); err != nil {
					return fmt.Errorf("writing %s: %w", path, err)
				}
			}
			if err := w.Close(); err != nil {
				return fmt.Errorf("closing writer of %s: %w", path, err)
			}
		}
		return bw.Flush()
	})
}

// writeAtomic writes path through write, atomically: into path+".tmp",
// closed, then renamed to path. On an error the temporary file is removed
// and the error returned as it is.
func writeAtomic(path string, write func(f io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op once renamed
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SmallFiles writes n tiny Required/PLAIN snappy files of rowsEach rows into
// dir as part-00000.parquet, part-00001.parquet, ... (the `prep plan`
// many-files input). Files already present are kept.
func SmallFiles(dir string, n, rowsEach int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	v := Variant{Name: "small", Codec: "snappy"}
	for k := range n {
		p := filepath.Join(dir, fmt.Sprintf("part-%05d.parquet", k))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := Write(p, v, uint64(k*rowsEach), uint64(rowsEach)); err != nil {
			return err
		}
	}
	return nil
}

// WideColumns and WideRows shape the wide-file input: FLOAT columns
// c0000..c4999, REQUIRED, PLAIN, snappy, one row group per file.
const (
	WideColumns = 5000
	WideRows    = 64
)

// WideFiles writes n files of WideColumns FLOAT columns and WideRows rows
// into dir as part-00.parquet, part-01.parquet, ... (the wide-footer input:
// each file's footer describes 5,000 column chunks). Value (i, j) is
// Feature(i, j) of the file's global row i. Files already present are kept.
func WideFiles(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	group := parquet.Group{}
	for j := range WideColumns {
		group[fmt.Sprintf("c%04d", j)] = parquet.Compressed(parquet.Leaf(parquet.FloatType), &parquet.Snappy)
	}
	schema := parquet.NewSchema("wide", group)
	for k := range n {
		p := filepath.Join(dir, fmt.Sprintf("part-%02d.parquet", k))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		err := writeAtomic(p, func(f io.Writer) error {
			w := parquet.NewWriter(f, schema)
			rows := make([]parquet.Row, WideRows)
			for r := range rows {
				i := uint64(k*WideRows + r)
				row := make(parquet.Row, WideColumns)
				// Group fields are sorted by name, so leaf j is c%04d(j).
				for j := range row {
					row[j] = parquet.FloatValue(Feature(i, j)).Level(0, 0, j)
				}
				rows[r] = row
			}
			if _, err := w.WriteRows(rows); err != nil {
				return err
			}
			return w.Close()
		})
		if err != nil {
			return err
		}
	}
	return nil
}
