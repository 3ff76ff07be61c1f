package pqread

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
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
// checks the dictionary form holds exactly the values ReadColumn copies out
// and the test wrote, slot by slot; a PLAIN string column comes back in
// ReadColumn's form.
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
	// written returns the value the test wrote at row i of column name.
	written := func(name string, i int) ([]byte, bool) {
		switch name {
		case "req":
			return []byte(rows[i].Req), true
		case "opt":
			if rows[i].Opt == nil {
				return nil, false
			}
			return []byte(*rows[i].Opt), true
		}
		return []byte(rows[i].Plain), true
	}
	first := 0
	for rg, n := range f.RowGroups() {
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
				if got.DictIndex != nil || !bytes.Equal(got.Data, want.Data) || !slices.Equal(got.ByteOffsets, want.ByteOffsets) {
					t.Fatalf("rg %d plain: dictionary form %v, or data differs", rg, got.DictIndex != nil)
				}
			} else if got.DictIndex == nil || got.Data != nil || got.ByteOffsets != nil {
				t.Fatalf("rg %d %s: not in dictionary form (index %v, data %v)", rg, ci.Name, got.DictIndex != nil, got.Data != nil)
			} else if len(got.DictIndex) != int(n) {
				t.Fatalf("rg %d %s: %d indices, want %d", rg, ci.Name, len(got.DictIndex), n)
			}
			if got.Rows != int(n) || want.Rows != int(n) || (got.RowValid == nil) != (want.RowValid == nil) {
				t.Fatalf("rg %d %s: %d rows, nulls %v; ReadColumn %d rows, nulls %v; want %d rows", rg, ci.Name, got.Rows, got.RowValid != nil, want.Rows, want.RowValid != nil, n)
			}
			for k := 0; k < int(n); k++ {
				g, gok := dictValue(got, k)
				r, rok := dictValue(want, k)
				w, wok := written(ci.Name, first+k)
				if gok != wok || !bytes.Equal(g, w) || rok != wok || !bytes.Equal(r, w) {
					t.Fatalf("rg %d %s slot %d: ReadColumnDict %q (%v), ReadColumn %q (%v), want %q (%v)", rg, ci.Name, k, g, gok, r, rok, w, wok)
				}
			}
		}
		first += int(n)
	}
	if first != len(rows) {
		t.Fatalf("row groups hold %d rows, wrote %d", first, len(rows))
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

// TestReadColumnDictStringFallback reads string column chunks that start
// dictionary encoded and fall back to PLAIN pages when the dictionary
// outgrows its limit (required, and optional with nulls): ReadColumnDict must
// return them in ReadColumn's form with exactly ReadColumn's values.
func TestReadColumnDictStringFallback(t *testing.T) {
	type row struct {
		Req string  `parquet:"req,dict"`
		Opt *string `parquet:"opt,optional,dict"`
	}
	rows := make([]row, 6000)
	for i := range rows {
		// Few distinct values first, then all distinct: the dictionary
		// fills and the writer switches to PLAIN part way through.
		v := fmt.Sprintf("v%d", i%5)
		if i >= 2000 {
			v = fmt.Sprintf("unique-%06d", i)
		}
		rows[i].Req = v
		if i%4 != 1 {
			s := "o" + v
			rows[i].Opt = &s
		}
	}
	path := writeParquet(t, rows, parquet.PageBufferSize(2048), parquet.DictionaryMaxBytes(4096))
	f := mustOpen(t, path)
	defer f.Close()
	for _, ci := range f.Columns() {
		var plainPages, dictPages int
		for _, st := range f.meta.RowGroups[0].Columns[ci.Index].MetaData.EncodingStats {
			if st.PageType == format.DataPage || st.PageType == format.DataPageV2 {
				switch st.Encoding {
				case format.Plain:
					plainPages += int(st.Count)
				case format.RLEDictionary, format.PlainDictionary:
					dictPages += int(st.Count)
				}
			}
		}
		if plainPages == 0 || dictPages == 0 {
			t.Fatalf("%s: %d PLAIN and %d dictionary data pages, want both", ci.Name, plainPages, dictPages)
		}
		want, err := f.ReadColumn(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.ReadColumnDict(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		if got.DictIndex != nil {
			t.Fatalf("%s: chunk with PLAIN pages came back in dictionary form", ci.Name)
		}
		if got.Rows != 6000 || want.Rows != 6000 {
			t.Fatalf("%s: %d and %d rows, want 6000", ci.Name, got.Rows, want.Rows)
		}
		for k := 0; k < want.Rows; k++ {
			g, gok := dictValue(got, k)
			w, wok := dictValue(want, k)
			if gok != wok || !bytes.Equal(g, w) {
				t.Fatalf("%s slot %d: %q (%v), want %q (%v)", ci.Name, k, g, gok, w, wok)
			}
			r := rows[k]
			exp, ok := []byte(r.Req), true
			if ci.Name == "opt" {
				ok = r.Opt != nil
				exp = nil
				if ok {
					exp = []byte(*r.Opt)
				}
			}
			if gok != ok || !bytes.Equal(g, exp) {
				t.Fatalf("%s slot %d: %q (%v), written %q (%v)", ci.Name, k, g, gok, exp, ok)
			}
		}
	}
}
