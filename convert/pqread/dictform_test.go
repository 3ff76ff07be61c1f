package pqread

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// dictValue returns slot k of a KindBytes column in either form, and
// whether the slot is non-null.
func dictValue(c *Column, k int) ([]byte, bool) {
	if c.RowValid != nil && !c.RowValid[k] {
		return nil, false
	}
	if c.DictIndex != nil {
		e := c.DictIndex[k]
		return c.DictData[c.DictOffsets[e]:c.DictOffsets[e+1]], true
	}
	return bytesAt(c, k), true
}

// TestReadColumnDict reads dictionary-encoded string columns (required, and
// optional with nulls; several pages per chunk) with ReadColumnDict and
// checks the dictionary form holds exactly the values ReadColumn copies out,
// slot by slot; a PLAIN string column comes back in ReadColumn's form.
func TestReadColumnDict(t *testing.T) {
	type row struct {
		Req   string  `parquet:"req,dict"`
		Opt   *string `parquet:"opt,optional,dict"`
		Plain string  `parquet:"plain"`
	}
	rows := make([]row, 5000)
	for i := range rows {
		rows[i].Req = fmt.Sprintf("label-%d", (i*7919)%97)
		rows[i].Plain = fmt.Sprint(i)
		if i%3 != 0 {
			s := fmt.Sprintf("o%d", i%13)
			rows[i].Opt = &s
		}
	}
	path := writeParquet(t, rows, parquet.PageBufferSize(1024), parquet.MaxRowsPerRowGroup(2000))
	f := mustOpen(t, path)
	defer f.Close()
	for rg := range f.RowGroups() {
		for _, ci := range f.Columns() {
			want, err := f.ReadColumn(rg, ci)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.ReadColumnDict(rg, ci)
			if err != nil {
				t.Fatal(err)
			}
			if ci.Name == "plain" {
				if got.DictIndex != nil || !bytes.Equal(got.Data, want.Data) {
					t.Fatalf("rg %d plain: dictionary form %v, or data differs", rg, got.DictIndex != nil)
				}
				continue
			}
			if got.DictIndex == nil || got.Data != nil || got.ByteOffsets != nil {
				t.Fatalf("rg %d %s: not in dictionary form (index %v, data %v)", rg, ci.Name, got.DictIndex != nil, got.Data != nil)
			}
			if got.Rows != want.Rows || len(got.DictIndex) != want.Rows || (got.RowValid == nil) != (want.RowValid == nil) {
				t.Fatalf("rg %d %s: %d rows, %d indices, nulls %v; want %d rows, nulls %v", rg, ci.Name, got.Rows, len(got.DictIndex), got.RowValid != nil, want.Rows, want.RowValid != nil)
			}
			for k := 0; k < want.Rows; k++ {
				g, gok := dictValue(got, k)
				w, wok := dictValue(want, k)
				if gok != wok || !bytes.Equal(g, w) {
					t.Fatalf("rg %d %s slot %d: %q (%v), want %q (%v)", rg, ci.Name, k, g, gok, w, wok)
				}
			}
		}
	}
}

// TestValuesUnindex checks the switch from dictionary form back to copied
// values when a chunk falls back to non-dictionary pages: the indices kept so
// far are copied out in order and later values append after them.
func TestValuesUnindex(t *testing.T) {
	dict := newValues(KindBytes, 0, 3)
	for _, s := range []string{"a", "bb", "ccc"} {
		dict.appendBytes([]byte(s))
	}
	v := newValues(KindBytes, 0, 8)
	v.indexed = true
	v.idx = append(v.idx, 2, 0, 1, 2)
	v.dict = dict
	if v.n() != 4 {
		t.Fatalf("indexed n = %d, want 4", v.n())
	}
	v.unindex()
	v.appendBytes([]byte("plain"))
	c := &Column{}
	v.fill(c, nil)
	if c.DictIndex != nil || string(c.Data) != "cccabbcccplain" || fmt.Sprint(c.ByteOffsets) != "[0 3 4 6 9 14]" {
		t.Fatalf("after unindex: index %v, data %q, offsets %v", c.DictIndex, c.Data, c.ByteOffsets)
	}
}
