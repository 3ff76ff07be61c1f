package pqread

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prepml/prep/internal/pqfixture"
)

// listOfLists is a row of an optional list of optional lists of optional
// INT64: nil is a null row list, an inner nil a null inner list, a nil
// element a null element.
type listOfLists [][]*int64

// llRows generates n rows covering every level: null rows, empty rows,
// null and empty inner lists, null elements, and long rows.
func llRows(n int) []listOfLists {
	var rows []listOfLists
	v := int64(0)
	for i := range n {
		switch {
		case i%11 == 3:
			rows = append(rows, nil) // null
			continue
		case i%13 == 5:
			rows = append(rows, listOfLists{}) // empty
			continue
		}
		var r listOfLists
		for j := range 1 + (i*7)%5 {
			switch {
			case (i+j)%9 == 4:
				r = append(r, nil) // null inner list
			case (i+j)%7 == 2:
				r = append(r, []*int64{}) // empty inner list
			default:
				var in []*int64
				for k := range 1 + (i+j*3)%6 {
					if (i+j+k)%8 == 6 {
						in = append(in, nil)
					} else {
						v++
						in = append(in, i64p(v*1000+int64(k)))
					}
				}
				r = append(r, in)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// writeListOfLists writes rows as column x, an optional 3-level LIST of
// optional 3-level LISTs of optional INT64 (maximum definition level 5,
// repetition level 2), with the levels given explicitly.
func writeListOfLists(t *testing.T, rows []listOfLists, nullRows map[int]bool, opts ...parquet.WriterOption) string {
	t.Helper()
	schema := parquet.NewSchema("schema", parquet.Group{
		"x": parquet.Optional(parquet.List(parquet.Optional(parquet.List(parquet.Optional(parquet.Int(64)))))),
	})
	var prows []parquet.Row
	for i, r := range rows {
		var row parquet.Row
		add := func(rep, def int, v *int64) {
			val := parquet.NullValue()
			if v != nil {
				val = parquet.Int64Value(*v)
			}
			row = append(row, val.Level(rep, def, 0))
		}
		switch {
		case nullRows[i]:
			add(0, 0, nil)
		case len(r) == 0:
			add(0, 1, nil)
		}
		for j, in := range r {
			rep := 1
			if j == 0 {
				rep = 0
			}
			switch {
			case in == nil:
				add(rep, 2, nil)
			case len(in) == 0:
				add(rep, 3, nil)
			}
			for k, e := range in {
				rk := 2
				if k == 0 {
					rk = rep
				}
				if e == nil {
					add(rk, 4, nil)
				} else {
					add(rk, 5, e)
				}
			}
		}
		prows = append(prows, row)
	}
	return pqfixture.Raw(schema, prows...).Option(parquet.DataPageStatistics(false)).Option(opts...).TempFile(t, "ll.parquet")
}

// llWant is the Column rows should read as, computed from the Go values.
func llWant(rows []listOfLists, nullRows map[int]bool) *Column {
	c := &Column{Kind: KindInt64, Offsets: []int64{0}, InnerOffsets: []int64{0}}
	for i, r := range rows {
		c.RowValid = append(c.RowValid, !nullRows[i])
		for _, in := range r {
			c.ListValid = append(c.ListValid, in != nil)
			for _, e := range in {
				c.ElemValid = append(c.ElemValid, e != nil)
				v := int64(0)
				if e != nil {
					v = *e
				}
				c.Int64 = append(c.Int64, v)
			}
			c.InnerOffsets = append(c.InnerOffsets, int64(len(c.Int64)))
		}
		c.Offsets = append(c.Offsets, int64(len(c.InnerOffsets)-1))
	}
	c.Rows = len(rows)
	return c
}

func sameLists(t *testing.T, what string, got, want *Column) {
	t.Helper()
	g, w := *got, *want
	g.Info, w.Info = ColumnInfo{}, ColumnInfo{}
	for _, c := range []*Column{&g, &w} {
		if c.RowValid == nil {
			c.RowValid = allTrue(c.Rows)
		}
		if c.ListValid == nil {
			c.ListValid = allTrue(len(c.InnerOffsets) - 1)
		}
		if c.ElemValid == nil {
			c.ElemValid = allTrue(int(c.InnerOffsets[len(c.InnerOffsets)-1]))
		}
	}
	sameColumn(t, what, &g, &w)
}

// A list of lists (two repetition levels) reads as a Depth-2 Column:
// Offsets into inner lists, InnerOffsets into slots, RowValid, ListValid
// and ElemValid for null rows, inner lists and elements; empty and null
// lists at both levels are told apart. Rows cross pages; windows of
// ColumnReader.Next split rows only at repetition level 0 and equal
// Column.Slice of the whole.
func TestListOfLists(t *testing.T) {
	rows := llRows(3000)
	nullRows := map[int]bool{}
	for i, r := range rows {
		if r == nil {
			nullRows[i] = true
		}
	}
	path := writeListOfLists(t, rows, nullRows, parquet.PageBufferSize(512))
	f := mustOpen(t, path)
	ci, err := f.Lookup("x")
	if err != nil {
		t.Fatal(err)
	}
	if ci.Depth != 2 || !ci.List || ci.Group != "" || ci.MapRole != "" || !ci.Nullable || !ci.ElemNullable || ci.Unsupported != "" || ci.MaxDef != 5 || ci.MaxRep != 2 {
		t.Fatalf("info %+v", ci)
	}
	if pages := countPages(t, f, ci); pages < 20 {
		t.Fatalf("only %d pages", pages)
	}
	want := llWant(rows, nullRows)
	whole := mustRead(t, f, "x", 0)
	sameLists(t, "ReadColumn", whole, want)
	if whole.Slots() != len(want.Int64) {
		t.Errorf("Slots() = %d, want %d", whole.Slots(), len(want.Int64))
	}
	for _, n := range []int{1, 3, 7, 64, 1000} {
		r, err := f.ColumnReader(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		lo := 0
		for {
			c, err := r.Next(n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, c)
			sameLists(t, fmt.Sprintf("window [%d, %d)", lo, lo+c.Rows), c, whole.Slice(lo, lo+c.Rows))
			sameLists(t, fmt.Sprintf("model window [%d, %d)", lo, lo+c.Rows), c, want.Slice(lo, lo+c.Rows))
			lo += c.Rows
		}
		r.Close()
		if lo != len(rows) {
			t.Fatalf("windows of %d: %d rows, want %d", n, lo, len(rows))
		}
	}
}

// countPages returns the data pages of col's chunk in row group 0.
func countPages(t *testing.T, f *File, col ColumnInfo) int {
	t.Helper()
	r, err := f.ColumnReader(0, col)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(int(r.Rows())); err != nil {
		t.Fatal(err)
	}
	return r.page + 1
}

// The levels of a hand-written list of lists, and their faults: an empty
// or null list marker continuing a list is corrupt, naming the row.
func TestListOfListsLevels(t *testing.T) {
	l := &leaf{info: ColumnInfo{Name: "x", Kind: KindInt64, Depth: 2, List: true, MaxDef: 5, MaxRep: 2}, dList: 1, dInner: 3}
	reader := func(reps, defs []uint8, vals []int64) *ColumnReader {
		rows := int64(countLevel(reps, 0))
		r := &ColumnReader{l: l, maxDef: 5, maxRep: 2, reps: reps, defs: defs, vals: newValues(KindInt64, 0, 0),
			want: rows, rows: rows, rgRows: rows, ended: true}
		r.vals.i64 = append(r.vals.i64, vals...)
		return r
	}
	// [[1, null], [], null, [2]], null, [], [[3]]
	r := reader([]uint8{0, 2, 1, 1, 1, 0, 0, 0}, []uint8{5, 4, 3, 2, 5, 0, 1, 5}, []int64{1, 2, 3})
	c, err := r.assemble()
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "offsets", c.Offsets, []int64{0, 4, 4, 4, 5})
	eq(t, "inner offsets", c.InnerOffsets, []int64{0, 2, 2, 2, 3, 4})
	eq(t, "row valid", c.RowValid, []bool{true, false, true, true})
	eq(t, "list valid", c.ListValid, []bool{true, true, false, true, true})
	eq(t, "elem valid", c.ElemValid, []bool{true, false, true, true})
	eq(t, "values", c.Int64, []int64{1, 0, 2, 3})
	if c.Slots() != 4 {
		t.Errorf("Slots() = %d", c.Slots())
	}
	s := c.Slice(1, 4)
	eq(t, "slice offsets", s.Offsets, []int64{0, 0, 0, 1})
	eq(t, "slice inner offsets", s.InnerOffsets, []int64{0, 1})
	eq(t, "slice list valid", s.ListValid, []bool{true})
	eq(t, "slice values", s.Int64, []int64{3})

	for _, bad := range []struct {
		reps, defs []uint8
		vals       []int64
		want       string
		row        int64
	}{
		{[]uint8{0, 0, 1}, []uint8{5, 5, 1}, []int64{1, 2}, "null or empty list marker inside a list (definition level 1, repetition level 1)", 1},
		{[]uint8{0, 2}, []uint8{5, 3}, []int64{1}, "null or empty list marker inside an inner list (definition level 3, repetition level 2)", 0},
		{[]uint8{1}, []uint8{5}, []int64{1}, "middle of a list", -1},
		{[]uint8{0, 2}, []uint8{5, 5}, []int64{1}, "1 values for 2 non-null elements", -1},
	} {
		_, err := reader(bad.reps, bad.defs, bad.vals).assemble()
		var re *rowError
		switch {
		case err == nil || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.want):
			t.Errorf("levels %v %v: %v, want %q", bad.reps, bad.defs, err, bad.want)
		case bad.row >= 0 && (!errors.As(err, &re) || re.row != bad.row):
			t.Errorf("levels %v %v: %v, want row %d", bad.reps, bad.defs, err, bad.row)
		}
	}
}
