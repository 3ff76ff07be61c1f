package pqread

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/internal/pqfixture"
)

type pagedRow struct {
	ID  int64    `parquet:"id"`
	S   *string  `parquet:"s,optional,dict"`
	F   *float64 `parquet:"f,optional"`
	Raw string   `parquet:"raw"`
}

// writePaged writes 700 rows in one row group, pages of about 128 bytes,
// with parquet-go's page index: s dictionary encoded (a dictionary page
// before the data pages), f and s with nulls.
func writePaged(t *testing.T) string {
	t.Helper()
	rows := make([]pagedRow, 0, 700)
	for i := 0; i < 700; i++ {
		r := pagedRow{ID: int64(i), Raw: fmt.Sprintf("r%04d", i)}
		if i%5 != 0 {
			s := fmt.Sprintf("v%d", i%7)
			r.S = &s
		}
		if i%3 != 0 {
			f := float64(i) / 4
			r.F = &f
		}
		rows = append(rows, r)
	}
	path := pqfixture.Of(rows...).PageBytes(128).WriteBatch(1).TempFile(t, "paged.parquet")
	return path
}

// render prints rows [lo, hi) of c: null or the value, one per row.
func render(c *Column, lo, hi int) string {
	var b strings.Builder
	for i := lo; i < hi; i++ {
		if c.RowValid != nil && !c.RowValid[i] {
			b.WriteString("null ")
			continue
		}
		switch c.Kind {
		case KindInt64:
			fmt.Fprint(&b, c.Int64[i], " ")
		case KindFloat64:
			fmt.Fprint(&b, c.Float64[i], " ")
		case KindBytes:
			if c.DictIndex != nil {
				e := c.DictIndex[i]
				fmt.Fprintf(&b, "%q ", c.DictData[c.DictOffsets[e]:c.DictOffsets[e+1]])
			} else {
				fmt.Fprintf(&b, "%q ", bytesAt(c, i))
			}
		}
	}
	return b.String()
}

// TestColumnReaderPages: a reader over any run of pages [a, b) returns
// exactly rows [FirstRow[a], FirstRow[b]) of the whole chunk as
// ReadColumn decodes it, in plain and in dictionary form (the dictionary
// page read first, then a jump to page a); the page index's first rows
// start at 0 and end at the row group's rows.
func TestColumnReaderPages(t *testing.T) {
	f := mustOpen(t, writePaged(t))
	for _, name := range []string{"id", "s", "f", "raw"} {
		ci, err := f.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := f.PageIndex(0, ci)
		if err != nil || ix == nil || ix.Pages() < 4 {
			t.Fatalf("%s: page index %v, %v: the test needs several pages", name, ix, err)
		}
		if ix.FirstRow[0] != 0 || ix.FirstRow[ix.Pages()] != 700 {
			t.Fatalf("%s: first rows %v", name, ix.FirstRow)
		}
		whole := mustRead(t, f, name, 0)
		for _, dict := range []bool{false, true} {
			for a := 0; a < ix.Pages(); a++ {
				for b := a + 1; b <= ix.Pages(); b++ {
					r, err := f.ColumnReaderPages(0, ci, dict, ix, a, b)
					if err != nil {
						t.Fatal(err)
					}
					lo, hi := int(ix.FirstRow[a]), int(ix.FirstRow[b])
					// Two windows, the second ending the pages.
					n1 := (hi - lo + 1) / 2
					c1, err := r.Next(n1)
					if err != nil {
						t.Fatalf("%s pages [%d, %d): %v", name, a, b, err)
					}
					got := render(c1, 0, c1.Rows)
					if hi-lo > n1 {
						c2, err := r.Next(hi - lo)
						if err != nil {
							t.Fatalf("%s pages [%d, %d): %v", name, a, b, err)
						}
						got += render(c2, 0, c2.Rows)
					}
					if want := render(whole, lo, hi); got != want {
						t.Fatalf("%s dict %v pages [%d, %d): got %s\nwant %s", name, dict, a, b, got, want)
					}
					r.Close()
				}
			}
		}
	}
	// A run of pages out of range is refused.
	ci, _ := f.Lookup("id")
	ix, _ := f.PageIndex(0, ci)
	if _, err := f.ColumnReaderPages(0, ci, false, ix, 2, 1); err == nil {
		t.Error("pages [2, 1): no error")
	}
}

// TestPageIndexCorrupt: a page index whose bytes are damaged is refused
// with an *Error wrapping ErrCorrupt that names the file, the column and
// the row group (never trusted, never silently skipped); the rest of the
// file still reads.
func TestPageIndexCorrupt(t *testing.T) {
	good := writePaged(t)
	f := mustOpen(t, good)
	ci, err := f.Lookup("f")
	if err != nil {
		t.Fatal(err)
	}
	cc := f.meta.RowGroups[0].Columns[ci.Index]
	if cc.ColumnIndexLength <= 0 || cc.OffsetIndexLength <= 0 {
		t.Fatalf("column f has no page index (column index %d bytes, offset index %d)", cc.ColumnIndexLength, cc.OffsetIndexLength)
	}
	raw, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	damage := func(name string, off int64, n int32, fill byte) string {
		b := append([]byte{}, raw...)
		for i := off; i < off+int64(n); i++ {
			b[i] = fill
		}
		path := filepath.Join(t.TempDir(), name+".parquet")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		// Zeros parse as an empty struct, missing required fields.
		{"zeroed column index", damage("ci0", cc.ColumnIndexOffset, cc.ColumnIndexLength, 0), "column index does not parse"},
		{"zeroed offset index", damage("oi0", cc.OffsetIndexOffset, cc.OffsetIndexLength, 0), "offset index does not parse"},
		// 0xFF is not a valid compact-protocol field header.
		{"garbage offset index", damage("oiff", cc.OffsetIndexOffset, cc.OffsetIndexLength, 0xff), "offset index does not parse"},
		// Indexes that parse but contradict themselves or the footer.
		{"page rows not increasing", reindex(t, raw, cc.OffsetIndexOffset, cc.OffsetIndexLength, func(oi *format.OffsetIndex) {
			oi.PageLocations[1].FirstRowIndex = 0
		}), "page 1 starts at row 0"},
		{"first page not at row 0", reindex(t, raw, cc.OffsetIndexOffset, cc.OffsetIndexLength, func(oi *format.OffsetIndex) {
			oi.PageLocations[0].FirstRowIndex = 1
		}), "page 0 starts at row 1, not 0"},
		{"pages out of order", reindex(t, raw, cc.OffsetIndexOffset, cc.OffsetIndexLength, func(oi *format.OffsetIndex) {
			oi.PageLocations[0].Offset = oi.PageLocations[1].Offset
		}), "page 1 at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := mustOpen(t, tc.path)
			ci, err := bad.Lookup("f")
			if err != nil {
				t.Fatal(err)
			}
			ix, err := bad.PageIndex(0, ci)
			if err == nil {
				t.Fatalf("no error; index with %d pages", ix.Pages())
			}
			var pe *Error
			if !errors.As(err, &pe) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %T %v: want an *Error wrapping ErrCorrupt", err, err)
			}
			msg := err.Error()
			for _, part := range []string{tc.path, `column "f"`, "row group 0", tc.want} {
				if !strings.Contains(msg, part) {
					t.Errorf("error %q does not name %q", msg, part)
				}
			}
			// The column's values do not depend on its page index.
			if got, want := render(mustRead(t, bad, "f", 0), 0, 700), render(mustRead(t, f, "f", 0), 0, 700); got != want {
				t.Errorf("values differ from the undamaged file's")
			}
		})
	}
}

// reindex returns the path of a copy of raw whose offset index (at off, n
// bytes) is edited by edit and written back in place; the edit must keep
// its encoded length (thrift varints of the same width), which is checked.
func reindex(t *testing.T, raw []byte, off int64, n int32, edit func(*format.OffsetIndex)) string {
	t.Helper()
	var oi format.OffsetIndex
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), raw[off:off+int64(n)], &oi); err != nil {
		t.Fatal(err)
	}
	edit(&oi)
	return rewrite(t, raw, off, n, &oi)
}

// reindexColumn is reindex for the column index.
func reindexColumn(t *testing.T, raw []byte, off int64, n int32, edit func(*format.ColumnIndex)) string {
	t.Helper()
	var ci format.ColumnIndex
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), raw[off:off+int64(n)], &ci); err != nil {
		t.Fatal(err)
	}
	edit(&ci)
	return rewrite(t, raw, off, n, &ci)
}

// rewrite encodes v over raw[off:off+n] in a copy written to a temporary
// file, padding a shorter encoding with zero bytes (ignored by the reader
// once the struct's stop field is read); a longer one fails the test.
func rewrite(t *testing.T, raw []byte, off int64, n int32, v any) string {
	t.Helper()
	enc, err := thrift.Marshal(new(thrift.CompactProtocol), v)
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) > int(n) {
		t.Fatalf("edited index encodes to %d bytes, more than its %d", len(enc), n)
	}
	b := append([]byte{}, raw...)
	copy(b[off:], enc)
	clear(b[off+int64(len(enc)) : off+int64(n)])
	path := filepath.Join(t.TempDir(), "edited.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPageIndexNullPages: pages that hold only nulls are read from the
// index as null pages, and a null flag that the null counts do not
// confirm is not trusted: that page reads as one without bounds.
func TestPageIndexNullPages(t *testing.T) {
	rows := make([]pagedRow, 0, 700)
	for i := 0; i < 700; i++ {
		r := pagedRow{ID: int64(i), Raw: fmt.Sprintf("r%04d", i)}
		if i >= 300 {
			f := float64(i)
			r.F = &f
		}
		rows = append(rows, r)
	}
	path := pqfixture.Of(rows...).PageBytes(128).WriteBatch(1).TempFile(t, "nullpages.parquet")
	f := mustOpen(t, path)
	ci, err := f.Lookup("f")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := f.PageIndex(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	nulls := 0
	for k := range ix.Pages() {
		allNull := ix.FirstRow[k+1] <= 300
		if ix.NullPage[k] != allNull {
			t.Fatalf("page %d rows [%d, %d): null page %v", k, ix.FirstRow[k], ix.FirstRow[k+1], ix.NullPage[k])
		}
		if allNull {
			nulls++
		}
	}
	if nulls < 2 {
		t.Fatalf("%d null pages: the test needs several", nulls)
	}
	cc := f.meta.RowGroups[0].Columns[ci.Index]
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flags the counts do not confirm are not trusted: a null page whose
	// count is one short of its rows, and a page of values marked null
	// (its count 0).
	for _, tc := range []struct {
		name string
		edit func(*format.ColumnIndex)
		page int
	}{
		{"null page counted short", func(c *format.ColumnIndex) { c.NullCounts[0]-- }, 0},
		{"page of values marked null", func(c *format.ColumnIndex) { c.NullPages[len(c.NullPages)-1] = true }, ix.Pages() - 1},
	} {
		bad := mustOpen(t, reindexColumn(t, raw, cc.ColumnIndexOffset, cc.ColumnIndexLength, tc.edit))
		got, err := bad.PageIndex(0, ci)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for k := range got.Pages() {
			want := ix.NullPage[k] && k != tc.page
			if got.NullPage[k] != want || !want && got.Min[k] == nil != (k == tc.page) {
				t.Errorf("%s: page %d null %v (bounds %v), want null %v", tc.name, k, got.NullPage[k], got.Min[k] != nil, want)
			}
		}
	}
}

// TestPageIndexParquetMRNullFlags: parquet-mr 1.13 without statistics
// marks every page all null with null count -1 although the pages hold
// values (apache/parquet-testing datapage_v1-*-checksum.parquet, 5120
// non-null INT32 in a and b): no page is taken as null, none has bounds.
func TestPageIndexParquetMRNullFlags(t *testing.T) {
	f := mustOpen(t, "../testdata/parquet-testing/data/datapage_v1-snappy-compressed-checksum.parquet")
	for _, name := range []string{"a", "b"} {
		ci, err := f.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := f.PageIndex(0, ci)
		if err != nil || ix == nil {
			t.Fatalf("%s: page index %v, %v", name, ix, err)
		}
		for k := range ix.Pages() {
			if ix.NullPage[k] || ix.Min[k] != nil || ix.Max[k] != nil {
				t.Errorf("%s page %d: null %v, bounds %x %x", name, k, ix.NullPage[k], ix.Min[k], ix.Max[k])
			}
		}
	}
}
