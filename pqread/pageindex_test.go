package pqread

import (
	"fmt"
	"strings"
	"testing"

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
