// Package pqfixture writes the Parquet files of the tests: one builder,
// on parquet-go's writer, for every test that needs a Parquet file of
// given columns, nulls, row groups, page sizes and codecs.
//
// Rows come in one of four ways:
//
//   - New, then one call per column (Int64, Float32, String, Int64List, ...,
//     Nulls to make the last column optional): flat files of typed
//     columns, in the order the calls give them;
//   - Of(rows...): a slice of a struct type whose `parquet` tags give the
//     schema (lists, maps, structs, optional pointers), parquet-go's
//     convention (https://pkg.go.dev/github.com/parquet-go/parquet-go);
//   - Generate(n, row) and GenerateRaw(schema, n, row): Of's and Raw's
//     files, their rows made by a function as they are written, for files
//     too large to hold their rows;
//   - Raw(schema, rows...): rows as parquet.Row values with their
//     repetition and definition levels, for layouts no Go type produces.
//
// Then the writer's settings (RowGroupRows, PageBytes, Codec, WriteBatch,
// Option) and one of the outputs (WriteFile, TempFile, Bytes, Encode).
// Nothing is cached: each output writes the file anew.
//
//	path := pqfixture.New().
//		Int64("id", 1, 2, 3).
//		Float64("x", 0.5, 0, 2).Nulls(false, true, false).
//		RowGroupRows(2).Codec(&parquet.Zstd).
//		TempFile(t, "d.parquet")
package pqfixture

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// Builder describes one Parquet file: its rows and the writer's settings.
// Methods return the builder for chaining; a misuse (columns of different
// lengths, Nulls before any column, columns added to Of, Generate or
// Raw rows) is reported by the output methods.
type Builder struct {
	opts  []parquet.WriterOption
	batch int // rows per write call; 0: all at once

	// write writes the rows through a writer made with opts; set by Of,
	// Generate and Raw, nil for the column builder.
	write func(b *Builder, w io.Writer) error
	cols  []column
	err   error
}

// column is one column of the column builder: name, Go element type
// (a pointer type once Nulls made it optional) and values, one per row.
type column struct {
	name   string
	typ    reflect.Type
	values reflect.Value // a slice of typ
	list   bool
}

// New starts a file built column by column.
func New() *Builder { return &Builder{} }

// Of starts a file of rows of type T: the schema is parquet.SchemaOf(T)
// (its `parquet` struct tags) unless Schema replaces it, and the rows are
// written with parquet.GenericWriter[T].
func Of[T any](rows ...T) *Builder {
	return &Builder{write: func(b *Builder, w io.Writer) error {
		pw := parquet.NewGenericWriter[T](w, b.opts...)
		for _, chunk := range chunks(len(rows), b.batch) {
			if _, err := pw.Write(rows[chunk[0]:chunk[1]]); err != nil {
				return err
			}
		}
		return pw.Close()
	}}
}

// Generate starts a file of n rows of type T made by row(i) as they are
// written, in order and once each, so that a large file is written without
// holding its rows. It is the file Of writes from the same rows with the
// same settings, byte for byte: without WriteBatch, rows are made and
// handed to the writer in parquet-go's own runs for rows given at once
// (64 rows, restarted at each row group: writeRuns); with it, WriteBatch
// rows at a time. The schema is Of's.
func Generate[T any](n int, row func(i int) T) *Builder {
	return &Builder{write: func(b *Builder, w io.Writer) error {
		pw := parquet.NewGenericWriter[T](w, b.opts...)
		var batch []T
		for _, run := range b.writeRuns(n) {
			batch = batch[:0]
			for i := run[0]; i < run[1]; i++ {
				batch = append(batch, row(i))
			}
			if _, err := pw.Write(batch); err != nil {
				return err
			}
		}
		return pw.Close()
	}}
}

// GenerateRaw is Generate for rows given as parquet.Row values of the
// given schema: the file Raw writes from the same rows, byte for byte.
func GenerateRaw(schema *parquet.Schema, n int, row func(i int) parquet.Row) *Builder {
	b := &Builder{opts: []parquet.WriterOption{schema}}
	b.write = func(b *Builder, w io.Writer) error {
		pw := parquet.NewWriter(w, b.opts...)
		var batch []parquet.Row
		for _, run := range b.writeRuns(n) {
			batch = batch[:0]
			for i := run[0]; i < run[1]; i++ {
				batch = append(batch, row(i))
			}
			if _, err := pw.WriteRows(batch); err != nil {
				return err
			}
		}
		return pw.Close()
	}
	return b
}

// parquetRun is the most rows parquet-go's writer hands its columns at
// once, cutting longer writes (ConcurrentRowGroupWriter.writeRows,
// maxRowsPerWrite, in parquet-go v0.32.0): a page is cut only between
// such runs.
const parquetRun = 64

// writeRuns cuts n rows into the [start, end) runs Generate hands the
// writer: WriteBatch rows at a time when set; else the runs parquet-go
// cuts rows given at once into (parquetRun rows, restarted at each row
// group of the writer's MaxRowsPerRowGroup), so that the writer sees the
// same runs and writes the same pages either way.
func (b *Builder) writeRuns(n int) [][2]int {
	if b.batch > 0 {
		return chunks(n, b.batch)
	}
	group := int64(parquet.DefaultMaxRowsPerRowGroup)
	if c, err := parquet.NewWriterConfig(b.opts...); err == nil {
		group = c.MaxRowsPerRowGroup
	}
	var out [][2]int
	for start := 0; start < n; {
		inGroup := int64(start) % group
		end := start + int(min(parquetRun, group-inGroup, int64(n-start)))
		out = append(out, [2]int{start, end})
		start = end
	}
	return out
}

// Raw starts a file of the given schema whose rows are given as
// parquet.Row values (each value carrying its column index and its
// repetition and definition levels, as schema.Deconstruct would make
// them).
func Raw(schema *parquet.Schema, rows ...parquet.Row) *Builder {
	b := &Builder{opts: []parquet.WriterOption{schema}}
	b.write = func(b *Builder, w io.Writer) error {
		pw := parquet.NewWriter(w, b.opts...)
		for _, chunk := range chunks(len(rows), b.batch) {
			if _, err := pw.WriteRows(rows[chunk[0]:chunk[1]]); err != nil {
				return err
			}
		}
		return pw.Close()
	}
	return b
}

// chunks cuts n rows into [start, end) runs of at most batch rows (one run
// of all of them when batch is 0).
func chunks(n, batch int) [][2]int {
	if batch <= 0 {
		batch = max(n, 1)
	}
	var out [][2]int
	for i := 0; i < n; i += batch {
		out = append(out, [2]int{i, min(i+batch, n)})
	}
	return out
}

// RowGroupRows caps each row group at n rows (parquet.MaxRowsPerRowGroup);
// the last row group takes the rest.
func (b *Builder) RowGroupRows(n int64) *Builder {
	return b.Option(parquet.MaxRowsPerRowGroup(n))
}

// PageBytes sets the target size in bytes of a column's data page before
// encoding and compression (parquet.PageBufferSize). parquet-go cuts a page
// only between write calls, which it makes of at most 64 rows: WriteBatch(1)
// cuts pages row by row.
func (b *Builder) PageBytes(n int) *Builder {
	return b.Option(parquet.PageBufferSize(n))
}

// Codec compresses every column chunk with c (parquet.Compression), for
// example &parquet.Snappy, &parquet.Zstd, &parquet.Uncompressed.
func (b *Builder) Codec(c compress.Codec) *Builder {
	return b.Option(parquet.Compression(c))
}

// Schema replaces the schema Of derives from the row type (the rows must
// still deconstruct into it).
func (b *Builder) Schema(s *parquet.Schema) *Builder {
	return b.Option(s)
}

// WriteBatch hands the writer n rows per write call instead of all of them
// at once; n = 1 lets parquet-go cut a page after any row.
func (b *Builder) WriteBatch(n int) *Builder {
	b.batch = n
	return b
}

// Option adds parquet-go writer options as they are (dictionary size,
// data page version, statistics, key/value metadata, ...).
func (b *Builder) Option(o ...parquet.WriterOption) *Builder {
	b.opts = append(b.opts, o...)
	return b
}

// add appends a column of Go element type typ and values vals (a slice).
func (b *Builder) add(name string, vals any, list bool) *Builder {
	if b.write != nil {
		b.fail("column %q added to a file of rows given by Of, Generate or Raw", name)
		return b
	}
	v := reflect.ValueOf(vals)
	if len(b.cols) > 0 && v.Len() != b.rows() {
		b.fail("column %q has %d values, column %q %d", name, v.Len(), b.cols[0].name, b.rows())
	}
	b.cols = append(b.cols, column{name: name, typ: v.Type().Elem(), values: v, list: list})
	return b
}

func (b *Builder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("pqfixture: "+format, args...)
	}
}

// rows is the number of rows of the column builder.
func (b *Builder) rows() int {
	if len(b.cols) == 0 {
		return 0
	}
	return b.cols[0].values.Len()
}

// Bool adds a required BOOLEAN column.
func (b *Builder) Bool(name string, v ...bool) *Builder { return b.add(name, v, false) }

// Int32 adds a required INT32 column.
func (b *Builder) Int32(name string, v ...int32) *Builder { return b.add(name, v, false) }

// Int64 adds a required INT64 column.
func (b *Builder) Int64(name string, v ...int64) *Builder { return b.add(name, v, false) }

// Float32 adds a required FLOAT column.
func (b *Builder) Float32(name string, v ...float32) *Builder { return b.add(name, v, false) }

// Float64 adds a required DOUBLE column.
func (b *Builder) Float64(name string, v ...float64) *Builder { return b.add(name, v, false) }

// String adds a required BYTE_ARRAY column annotated STRING.
func (b *Builder) String(name string, v ...string) *Builder { return b.add(name, v, false) }

// Binary adds a required BYTE_ARRAY column without annotation.
func (b *Builder) Binary(name string, v ...[]byte) *Builder { return b.add(name, v, false) }

// Int32List adds a 3-level LIST column of required INT32 elements, one
// list per row (nil and empty both write an empty list).
func (b *Builder) Int32List(name string, v ...[]int32) *Builder { return b.add(name, v, true) }

// Int64List adds a 3-level LIST column of required INT64 elements.
func (b *Builder) Int64List(name string, v ...[]int64) *Builder { return b.add(name, v, true) }

// Float32List adds a 3-level LIST column of required FLOAT elements.
func (b *Builder) Float32List(name string, v ...[]float32) *Builder { return b.add(name, v, true) }

// Nulls makes the last column added optional: row i is null where null[i]
// is true (its value is then not written), so the file's definition levels
// say which rows are null. One flag per row; list columns cannot take it.
func (b *Builder) Nulls(null ...bool) *Builder {
	if len(b.cols) == 0 {
		b.fail("Nulls before any column")
		return b
	}
	c := &b.cols[len(b.cols)-1]
	switch {
	case c.list:
		b.fail("Nulls on list column %q", c.name)
		return b
	case c.typ.Kind() == reflect.Pointer:
		b.fail("Nulls twice on column %q", c.name)
		return b
	case len(null) != c.values.Len():
		b.fail("Nulls gives %d flags for the %d rows of column %q", len(null), c.values.Len(), c.name)
		return b
	}
	pt := reflect.PointerTo(c.typ)
	vals := reflect.MakeSlice(reflect.SliceOf(pt), len(null), len(null))
	for i, isNull := range null {
		if !isNull {
			p := reflect.New(c.typ)
			p.Elem().Set(c.values.Index(i))
			vals.Index(i).Set(p)
		}
	}
	c.typ, c.values = pt, vals
	return b
}

// writeColumns writes the column builder's rows: a struct type made with
// one field per column, in order, tagged with the column's name.
func (b *Builder) writeColumns(w io.Writer) error {
	if len(b.cols) == 0 {
		return fmt.Errorf("pqfixture: no columns")
	}
	fields := make([]reflect.StructField, len(b.cols))
	for i, c := range b.cols {
		tag := c.name
		if c.typ.Kind() == reflect.Pointer {
			tag += ",optional"
		}
		if c.list {
			tag += ",list"
		}
		fields[i] = reflect.StructField{Name: fmt.Sprintf("C%d", i), Type: c.typ, Tag: reflect.StructTag(fmt.Sprintf("parquet:%q", tag))}
	}
	typ := reflect.StructOf(fields)
	schema := parquet.SchemaOf(reflect.New(typ).Elem().Interface())
	rows := make([]parquet.Row, b.rows())
	for r := range rows {
		v := reflect.New(typ).Elem()
		for i, c := range b.cols {
			v.Field(i).Set(c.values.Index(r))
		}
		rows[r] = schema.Deconstruct(nil, v.Interface())
	}
	raw := Raw(schema, rows...)
	raw.opts = append(raw.opts, b.opts...)
	raw.batch = b.batch
	return raw.write(raw, w)
}

// Encode writes the file into w.
func (b *Builder) Encode(w io.Writer) error {
	if b.err != nil {
		return b.err
	}
	if b.write == nil {
		return b.writeColumns(w)
	}
	return b.write(b, w)
}

// Bytes returns the file's bytes; a failure fails t.
func (b *Builder) Bytes(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := b.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// WriteFile writes the file at path (its directory must exist) and returns
// path; a failure fails t.
func (b *Builder) WriteFile(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Encode(f); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TempFile writes the file as name in a new t.TempDir() and returns its
// path.
func (b *Builder) TempFile(t testing.TB, name string) string {
	t.Helper()
	return b.WriteFile(t, filepath.Join(t.TempDir(), name))
}
