package pqfixture_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/internal/pqfixture"
)

// open reads data back with parquet-go's own file reader.
func open(t *testing.T, data []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

type builtRow struct {
	ID   int64    `parquet:"id"`
	X    *float64 `parquet:"x,optional"`
	Name string   `parquet:"name"`
	L    []int32  `parquet:"l,list"`
}

// TestColumnsRoundTrip: the column builder's file holds the columns in
// the order given, with their types, nulls where flagged, row groups of
// the given size and the given codec, as parquet-go reads it back.
func TestColumnsRoundTrip(t *testing.T) {
	data := pqfixture.New().
		Int64("id", 1, 2, 3, 4, 5).
		Float64("x", 0.5, 9, -2, 9, 3).Nulls(false, true, false, true, false).
		String("name", "a", "", "ccc", "d", "e").
		Int32List("l", []int32{1}, nil, []int32{2, 3}, []int32{}, []int32{4, 5, 6}).
		RowGroupRows(2).Codec(&parquet.Zstd).
		Bytes(t)
	f := open(t, data)
	var names []string
	for _, c := range f.Schema().Fields() {
		names = append(names, c.Name())
	}
	if !reflect.DeepEqual(names, []string{"id", "x", "name", "l"}) {
		t.Errorf("columns %v, want id, x, name, l in that order", names)
	}
	if s := f.Schema().String(); !strings.Contains(s, "optional double x") || !strings.Contains(s, "binary name (STRING)") || !strings.Contains(s, "(LIST)") {
		t.Errorf("schema:\n%s", s)
	}
	md := f.Metadata()
	var groups []int64
	for _, rg := range md.RowGroups {
		groups = append(groups, rg.NumRows)
		for _, c := range rg.Columns {
			if c.MetaData.Codec != format.Zstd {
				t.Errorf("column %v codec %v, want ZSTD", c.MetaData.PathInSchema, c.MetaData.Codec)
			}
		}
	}
	if !reflect.DeepEqual(groups, []int64{2, 2, 1}) {
		t.Errorf("row groups of %v rows, want [2 2 1]", groups)
	}
	rows, err := parquet.Read[builtRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	f05, f2, f3 := 0.5, -2.0, 3.0
	want := []builtRow{{1, &f05, "a", []int32{1}}, {2, nil, "", nil}, {3, &f2, "ccc", []int32{2, 3}}, {4, nil, "d", nil}, {5, &f3, "e", []int32{4, 5, 6}}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i := range want {
		g, w := rows[i], want[i]
		if g.ID != w.ID || g.Name != w.Name || (g.X == nil) != (w.X == nil) || (g.X != nil && *g.X != *w.X) || len(g.L) != len(w.L) || (len(w.L) > 0 && !reflect.DeepEqual(g.L, w.L)) {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
}

type pagedRow struct {
	ID int64 `parquet:"id"`
}

// pages returns the number of data pages of column 0 of row group 0, from
// the file's offset index.
func pages(t *testing.T, data []byte) int {
	t.Helper()
	f := open(t, data)
	idx, err := f.RowGroups()[0].ColumnChunks()[0].OffsetIndex()
	if err != nil {
		t.Fatal(err)
	}
	return idx.NumPages()
}

// TestPageBytesAndWriteBatch: 1000 INT64 values with pages of 256 bytes
// cut row by row (WriteBatch(1)) make a page per 256 bytes of values, about
// 32 values each; written at once (in parquet-go's runs of 64 rows) they
// make pages of 64 rows; without PageBytes, one page.
func TestPageBytesAndWriteBatch(t *testing.T) {
	rows := make([]pagedRow, 1000)
	for i := range rows {
		rows[i].ID = int64(i)
	}
	byRow := pages(t, pqfixture.Of(rows...).PageBytes(256).WriteBatch(1).Codec(&parquet.Uncompressed).Bytes(t))
	atOnce := pages(t, pqfixture.Of(rows...).PageBytes(256).Codec(&parquet.Uncompressed).Bytes(t))
	whole := pages(t, pqfixture.Of(rows...).Bytes(t))
	// 256 bytes * 0.98 (parquet-go's fill target) / 8 bytes: a page is cut
	// after the 32nd value, so 1000 values take ceil(1000/32) = 32 pages;
	// in runs of 64 rows, 1000/64 rounded up: 16.
	if byRow != 32 || atOnce != 16 || whole != 1 {
		t.Errorf("pages: row by row %d (want 32), at once %d (want 16), default %d (want 1)", byRow, atOnce, whole)
	}
}

type genRow struct {
	ID int64   `parquet:"id"`
	L  []int32 `parquet:"l,list"`
}

// genRowAt is row i of TestGenerate's files: id 3i and i%5 list values.
func genRowAt(i int) genRow {
	r := genRow{ID: int64(i) * 3}
	for k := range i % 5 {
		r.L = append(r.L, int32(i*10+k))
	}
	return r
}

// TestGenerate: rows made as they are written make the file Of writes
// from the same rows with the same settings, byte for byte, and
// GenerateRaw the file Raw writes: all at once (200 rows in row groups
// of 150, which parquet-go cuts into runs of 64 restarted at row 150:
// runs of 64 counted from row 0 would cut pages elsewhere under pages of
// 64 bytes) and in write batches of 7. The rows read back are the ones
// made, in order.
func TestGenerate(t *testing.T) {
	const n = 200
	rows := make([]genRow, n)
	for i := range rows {
		rows[i] = genRowAt(i)
	}
	schema := parquet.SchemaOf(genRow{})
	raws := make([]parquet.Row, n)
	for i := range raws {
		raws[i] = schema.Deconstruct(nil, rows[i])
	}
	for _, batch := range []int{0, 7} {
		want := pqfixture.Of(rows...).RowGroupRows(150).PageBytes(64).WriteBatch(batch).Codec(&parquet.Snappy).Bytes(t)
		got := pqfixture.Generate(n, genRowAt).RowGroupRows(150).PageBytes(64).WriteBatch(batch).Codec(&parquet.Snappy).Bytes(t)
		if !bytes.Equal(got, want) {
			t.Errorf("batch %d: Generate wrote %d bytes that differ from Of's %d", batch, len(got), len(want))
		}
		want = pqfixture.Raw(schema, raws...).RowGroupRows(150).PageBytes(64).WriteBatch(batch).Bytes(t)
		got = pqfixture.GenerateRaw(schema, n, func(i int) parquet.Row { return raws[i] }).RowGroupRows(150).PageBytes(64).WriteBatch(batch).Bytes(t)
		if !bytes.Equal(got, want) {
			t.Errorf("batch %d: GenerateRaw wrote %d bytes that differ from Raw's %d", batch, len(got), len(want))
		}
	}
	data := pqfixture.Generate(n, genRowAt).RowGroupRows(150).Bytes(t)
	back, err := parquet.Read[genRow](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != n {
		t.Fatalf("%d rows read back, want %d", len(back), n)
	}
	for i, r := range back {
		if r.ID != rows[i].ID || len(r.L) != len(rows[i].L) || (len(r.L) > 0 && !reflect.DeepEqual(r.L, rows[i].L)) {
			t.Errorf("row %d read back as %+v, want %+v", i, r, rows[i])
		}
	}
}

// TestRaw writes rows given with their levels: a required and an optional
// INT32, the second null in row 1.
func TestRaw(t *testing.T) {
	schema := parquet.NewSchema("schema", parquet.Group{
		"a": parquet.Leaf(parquet.Int32Type),
		"b": parquet.Optional(parquet.Leaf(parquet.Int32Type)),
	})
	data := pqfixture.Raw(schema,
		parquet.Row{parquet.Int32Value(7).Level(0, 0, 0), parquet.Int32Value(8).Level(0, 1, 1)},
		parquet.Row{parquet.Int32Value(9).Level(0, 0, 0), parquet.NullValue().Level(0, 0, 1)},
	).Bytes(t)
	type ab struct {
		A int32  `parquet:"a"`
		B *int32 `parquet:"b,optional"`
	}
	rows, err := parquet.Read[ab](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].A != 7 || rows[0].B == nil || *rows[0].B != 8 || rows[1].A != 9 || rows[1].B != nil {
		t.Errorf("rows %+v", rows)
	}
}

// TestMisuse: columns of different lengths, Nulls before a column or
// with the wrong count, and columns added to Of rows are errors.
func TestMisuse(t *testing.T) {
	for name, b := range map[string]*pqfixture.Builder{
		"lengths":            pqfixture.New().Int64("a", 1, 2).Int64("b", 1),
		"nulls first":        pqfixture.New().Nulls(true),
		"nulls count":        pqfixture.New().Int64("a", 1, 2).Nulls(true),
		"nulls twice":        pqfixture.New().Int64("a", 1).Nulls(true).Nulls(false),
		"nulls on list":      pqfixture.New().Int64List("a", nil).Nulls(true),
		"column on Of":       pqfixture.Of(pagedRow{}).Int64("a", 1),
		"column on Generate": pqfixture.Generate(1, func(int) pagedRow { return pagedRow{} }).Int64("a", 1),
		"no columns":         pqfixture.New(),
	} {
		if err := b.Encode(&bytes.Buffer{}); err == nil || !strings.HasPrefix(err.Error(), "pqfixture: ") {
			t.Errorf("%s: Encode = %v, want a pqfixture error", name, err)
		}
	}
}
