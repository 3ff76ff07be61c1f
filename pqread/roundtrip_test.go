package pqread

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/brotli"
	"github.com/parquet-go/parquet-go/compress/gzip"
	"github.com/parquet-go/parquet-go/compress/lz4"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/compress/zstd"
	"github.com/parquet-go/parquet-go/format"
	"github.com/prepml/prep/internal/pqfixture"
)

// writeParquet writes rows with parquet-go's writer to a temporary file.
func writeParquet[T any](t testing.TB, rows []T, opts ...parquet.WriterOption) string {
	t.Helper()
	return pqfixture.Of(rows...).Option(opts...).TempFile(t, "rt.parquet")
}

// chunkCodecs returns the set of codecs in the footer of path (read with
// pqread's own footer decoding).
func chunkCodecs(t testing.TB, f *File) map[format.CompressionCodec]bool {
	out := map[format.CompressionCodec]bool{}
	for _, rg := range f.meta.RowGroups {
		for _, c := range rg.Columns {
			out[c.MetaData.Codec] = true
		}
	}
	return out
}

type lz4Row struct {
	V int64 `parquet:"v"`
}

// TestLZ4RawRoundTrip pins the parquet-go v0.32.0 LZ4_RAW fault (upstream
// issue #608: pages whose decompression reallocates can come back wrong):
// poorly compressible int64 values written with LZ4_RAW must read back
// exactly. (Measured when this test was written: parquet.Read on these very
// files returns all 1,000 and all 100,000 values wrong, without an error.)
func TestLZ4RawRoundTrip(t *testing.T) {
	for _, n := range []int{1000, 100000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 608))
			rows := make([]lz4Row, n)
			want := make([]int64, n)
			for i := range rows {
				rows[i].V = int64(rng.Uint64())
				want[i] = rows[i].V
			}
			path := writeParquet(t, rows, parquet.Compression(&lz4.Codec{Level: lz4.Level1}))
			f := mustOpen(t, path)
			if !chunkCodecs(t, f)[format.Lz4Raw] {
				t.Fatalf("file not written with LZ4_RAW: %v", chunkCodecs(t, f))
			}
			var got []int64
			for rg := range f.RowGroups() {
				got = append(got, mustRead(t, f, "v", rg).Int64...)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("LZ4_RAW values differ (%d read, %d written)", len(got), len(want))
			}
		})
	}
}

// rtRow covers the physical types, nullability, list layouts and the value
// encodings parquet-go writes.
type rtRow struct {
	I64  int64     `parquet:"i64"`
	I32  int32     `parquet:"i32,delta"`
	D64  int64     `parquet:"d64,delta"`
	F32  float32   `parquet:"f32,split"`
	F64  *float64  `parquet:"f64,optional"`
	OI   *int64    `parquet:"oi,optional,dict"`
	S    string    `parquet:"s,dict"`
	SD   string    `parquet:"sd,delta"`
	SL   string    `parquet:"sl"`
	OS   *string   `parquet:"os,optional"`
	B    bool      `parquet:"b"`
	L    []float32 `parquet:"l,list"`
	Bare []int32   `parquet:"bare"`
	FB   [3]byte   `parquet:"fb"`
	U8   uint8     `parquet:"u8"`
}

func makeRows(n int) []rtRow {
	rng := rand.New(rand.NewPCG(7, 11))
	rows := make([]rtRow, n)
	words := []string{"", "a", "apple", "applesauce", "ápple", "banana"}
	for i := range rows {
		r := &rows[i]
		r.I64 = int64(rng.Uint64())
		r.I32 = int32(rng.Uint32())
		if i%7 == 0 {
			r.I32 = math.MinInt32
		}
		r.D64 = int64(i)*1000 - int64(rng.IntN(500))
		r.F32 = math.Float32frombits(rng.Uint32())
		if i%3 != 0 {
			v := float64(i) / 3
			r.F64 = &v
		}
		if i%5 != 1 {
			v := int64(i % 13)
			r.OI = &v
		}
		r.S = words[i%len(words)]
		r.SD = words[(i/2)%len(words)] + fmt.Sprint(i)
		r.SL = words[(i*7)%len(words)]
		if i%4 == 2 {
			s := words[i%len(words)]
			r.OS = &s
		}
		r.B = i%3 == 1
		for k := range i % 6 {
			r.L = append(r.L, float32(i)+float32(k)/8)
		}
		for k := range (i * 5) % 4 {
			r.Bare = append(r.Bare, int32(i*10+k))
		}
		r.FB = [3]byte{byte(i), byte(i >> 8), 0xfe}
		r.U8 = uint8(i)
	}
	return rows
}

// checkRows compares every column of f with rows.
func checkRows(t *testing.T, f *File, rows []rtRow) {
	t.Helper()
	base := 0
	for rg, n := range f.RowGroups() {
		rs := rows[base : base+int(n)]
		base += int(n)
		read := func(name string) *Column { return mustRead(t, f, name, rg) }
		i64, i32, d64, f32 := read("i64"), read("i32"), read("d64"), read("f32")
		f64, oi, s, sd, sl, os := read("f64"), read("oi"), read("s"), read("sd"), read("sl"), read("os")
		b, l, bare, fb, u8 := read("b"), read("l"), read("bare"), read("fb"), read("u8")
		if u8.Info.Logical != "INT(8,false)" || !u8.Info.Unsigned || u8.Info.BitWidth != 8 {
			t.Fatalf("u8 info %+v", u8.Info)
		}
		for i, r := range rs {
			fail := func(col string, got, want any) {
				t.Helper()
				t.Fatalf("row group %d row %d %s = %v, want %v", rg, i, col, got, want)
			}
			if i64.Int64[i] != r.I64 {
				fail("i64", i64.Int64[i], r.I64)
			}
			if i32.Int32[i] != r.I32 {
				fail("i32", i32.Int32[i], r.I32)
			}
			if d64.Int64[i] != r.D64 {
				fail("d64", d64.Int64[i], r.D64)
			}
			if math.Float32bits(f32.Float32[i]) != math.Float32bits(r.F32) {
				fail("f32", f32.Float32[i], r.F32)
			}
			if valid := f64.RowValid == nil || f64.RowValid[i]; valid != (r.F64 != nil) || (valid && f64.Float64[i] != *r.F64) || (!valid && f64.Float64[i] != 0) {
				fail("f64", f64.Float64[i], r.F64)
			}
			if valid := oi.RowValid == nil || oi.RowValid[i]; valid != (r.OI != nil) || (valid && oi.Int64[i] != *r.OI) {
				fail("oi", oi.Int64[i], r.OI)
			}
			if string(bytesAt(s, i)) != r.S {
				fail("s", string(bytesAt(s, i)), r.S)
			}
			if string(bytesAt(sd, i)) != r.SD {
				fail("sd", string(bytesAt(sd, i)), r.SD)
			}
			if string(bytesAt(sl, i)) != r.SL {
				fail("sl", string(bytesAt(sl, i)), r.SL)
			}
			if valid := os.RowValid == nil || os.RowValid[i]; valid != (r.OS != nil) || (valid && string(bytesAt(os, i)) != *r.OS) || (!valid && len(bytesAt(os, i)) != 0) {
				fail("os", string(bytesAt(os, i)), r.OS)
			}
			if b.Bool[i] != r.B {
				fail("b", b.Bool[i], r.B)
			}
			if got := l.Float32[l.Offsets[i]:l.Offsets[i+1]]; !slices.Equal(got, r.L) {
				fail("l", got, r.L)
			}
			if got := bare.Int32[bare.Offsets[i]:bare.Offsets[i+1]]; !slices.Equal(got, r.Bare) {
				fail("bare", got, r.Bare)
			}
			if got := fb.FixedData[3*i : 3*i+3]; !bytes.Equal(got, r.FB[:]) {
				fail("fb", got, r.FB)
			}
			if uint8(u8.Int32[i]) != r.U8 {
				fail("u8", u8.Int32[i], r.U8)
			}
		}
	}
	if base != len(rows) {
		t.Fatalf("file has %d rows, wrote %d", base, len(rows))
	}
}

// TestWriterRoundTrip reads parquet-go output for every codec, both data
// page versions, small pages (so list rows and runs cross page boundaries),
// several row groups, and a tiny dictionary limit (so dictionary pages fall
// back to PLAIN inside a column chunk).
func TestWriterRoundTrip(t *testing.T) {
	n := 3000
	if testing.Short() {
		n = 600
	}
	rows := makeRows(n)
	codecs := []compress.Codec{&uncompressed.Codec{}, &snappy.Codec{}, &gzip.Codec{}, &zstd.Codec{}, &brotli.Codec{}, &lz4.Codec{}}
	for _, codec := range codecs {
		for _, version := range []int{1, 2} {
			for _, dictMax := range []int64{0, 64} {
				name := fmt.Sprintf("%s/v%d/dict%d", codec, version, dictMax)
				t.Run(name, func(t *testing.T) {
					opts := []parquet.WriterOption{
						parquet.Compression(codec), parquet.DataPageVersion(version),
						parquet.PageBufferSize(512), parquet.MaxRowsPerRowGroup(int64(n/3 + 1)),
						parquet.DefaultEncodingFor(parquet.ByteArray, &parquet.DeltaLengthByteArray),
					}
					if dictMax > 0 {
						opts = append(opts, parquet.DictionaryMaxBytes(dictMax))
					}
					path := writeParquet(t, rows, opts...)
					f := mustOpen(t, path)
					if len(f.RowGroups()) < 3 {
						t.Fatalf("want several row groups, got %v", f.RowGroups())
					}
					checkRows(t, f, rows)
				})
			}
		}
	}
}

// TestConcurrentReadsMatchSequential: ReadColumn over all (row group,
// column) pairs from many goroutines on one File gives the same columns as
// one goroutine, whatever the interleaving.
func TestConcurrentReadsMatchSequential(t *testing.T) {
	rows := makeRows(900)
	path := writeParquet(t, rows, parquet.Compression(&zstd.Codec{}), parquet.PageBufferSize(256), parquet.MaxRowsPerRowGroup(200))
	f := mustOpen(t, path)
	type key struct{ rg, col int }
	seq := map[key]*Column{}
	for rg := range f.RowGroups() {
		for j, ci := range f.Columns() {
			c, err := f.ReadColumn(rg, ci)
			if err != nil {
				t.Fatal(err)
			}
			seq[key{rg, j}] = c
		}
	}
	if n := len(f.RowGroups()); n != 5 || len(seq) != 5*len(f.Columns()) {
		t.Fatalf("%d row groups, %d column chunks; want 5 row groups of 200 rows", n, len(seq))
	}
	g := mustOpen(t, path)
	type res struct {
		k   key
		c   *Column
		err error
	}
	out := make(chan res)
	for k := range seq {
		go func() {
			c, err := g.ReadColumn(k.rg, g.Columns()[k.col])
			out <- res{k, c, err}
		}()
	}
	for range seq {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		// Floats are compared by bits (the data holds NaNs).
		sameColumn(t, fmt.Sprintf("row group %d column %d", r.k.rg, r.k.col), r.c, seq[r.k])
		if !reflect.DeepEqual(r.c.Info, seq[r.k].Info) {
			t.Fatalf("row group %d column %d: info differs", r.k.rg, r.k.col)
		}
	}
}

func TestSchemaSummary(t *testing.T) {
	f := mustOpen(t, casePath("B04-list-layouts", "emb_list_parquet_go.parquet"))
	var got []string
	for _, n := range f.Schema() {
		got = append(got, fmt.Sprintf("%d %s %s %s %s %d %d", n.Depth, n.Name, n.Repetition, n.Physical, n.Logical, n.Children, n.Leaf))
	}
	want := []string{
		"0 id REQUIRED INT64 INT(64,true) 0 0",
		"0 emb REQUIRED  LIST 1 -1",
		"1 list REPEATED   1 -1",
		"2 element REQUIRED FLOAT  0 1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("schema:\n%s", strings.Join(got, "\n"))
	}
	if f.NumRows() != 4 || f.Path() == "" || f.CreatedBy() == "" {
		t.Fatalf("rows %d path %q created by %q", f.NumRows(), f.Path(), f.CreatedBy())
	}
}
