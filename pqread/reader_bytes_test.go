package pqread

// More tests of ColumnReader: the dictionary form, and hand-built
// BYTE_ARRAY pages of every encoding.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/format"
)

// TestColumnReaderDictForm: with Dict, the values are those of
// ReadColumnDict, and each window's form follows the values it holds
// (dictionary form when all are dictionary-encoded and at least one is),
// whether or not the read goes on past it: a window before a string
// chunk's fallback to PLAIN comes back in dictionary form, a window of
// null rows before the first dictionary value in plain form.
func TestColumnReaderDictForm(t *testing.T) {
	type row struct {
		S *string `parquet:"s,optional,dict"`
	}
	for _, c := range []struct {
		name     string
		val      func(i int) *string
		rr       []RowRange
		dictForm []bool // per range
	}{
		{"fallback after the range", func(i int) *string {
			v := fmt.Sprintf("v%d", i%3)
			if i >= 150 {
				v = fmt.Sprintf("u%d", i) // the dictionary overflows: PLAIN pages
			}
			return &v
		}, []RowRange{{Lo: 0, Hi: 10}, {Lo: 0, Hi: 10, Rest: true}}, []bool{true, true}},
		{"null rows before the first value", func(i int) *string {
			if i < 100 {
				return nil
			}
			v := fmt.Sprintf("v%d", i%3)
			return &v
		}, []RowRange{{Lo: 0, Hi: 10}, {Lo: 0, Hi: 10, Rest: true}}, []bool{false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := make([]row, 300)
			for i := range rows {
				rows[i].S = c.val(i)
			}
			f := mustOpen(t, writeParquet(t, rows, parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(300)))
			ci, err := f.Lookup("s")
			if err != nil {
				t.Fatal(err)
			}
			whole, err := f.ReadColumnDict(0, ci)
			if err != nil {
				t.Fatal(err)
			}
			for i, rr := range c.rr {
				rr.Dict = true
				got, err := readRows(f, 0, ci, rr)
				if err != nil {
					t.Fatal(err)
				}
				if form := got.DictData != nil; form != c.dictForm[i] {
					t.Errorf("%+v: dictionary form %v, want %v", rr, form, c.dictForm[i])
				}
				want := whole.Slice(rr.Lo, rr.Hi)
				gv, wv := got.RowValid, want.RowValid
				if gv == nil {
					gv = allTrue(got.Rows)
				}
				if wv == nil {
					wv = allTrue(want.Rows)
				}
				if !slices.Equal(gv, wv) {
					t.Errorf("%+v: row validity differs", rr)
				}
				for k := range want.Slots() {
					g, gok := dictValue(got, k)
					w, wok := dictValue(want, k)
					if gok != wok || !bytes.Equal(g, w) {
						t.Errorf("%+v: slot %d: %q (%v), ReadColumnDict %q (%v)", rr, k, g, gok, w, wok)
					}
				}
			}
		})
	}
}

// bentry is one level entry of a BYTE_ARRAY column: a value when def is
// the maximum.
type bentry struct {
	def, rep uint8
	val      string
}

// bpage is one data page of bentries.
type bpage struct {
	v2      bool
	enc     format.Encoding
	entries []bentry
}

// buildBytesFile writes a file of one BYTE_ARRAY leaf "x" of shape s (as
// buildFile: required, optional, or an optional LIST of optional elements),
// one row group of rows rows, a dictionary page of dict unless nil, and the
// pages given, and returns its path.
func buildBytesFile(t testing.TB, s shape, codec format.CompressionCodec, dict []string, pages []bpage, rows int64) string {
	t.Helper()
	maxDef, _ := maxLevels(s)
	out := []byte("PAR1")
	dictIndex := map[string]int32{}
	for i, v := range dict {
		dictIndex[v] = int32(i)
	}
	enc := func(e format.Encoding, vals []string) []byte {
		var src []byte
		offs := []uint32{0}
		for _, v := range vals {
			src = append(src, v...)
			offs = append(offs, uint32(len(src)))
		}
		var b []byte
		var err error
		switch e {
		case format.Plain:
			b, err = (&plain.Encoding{}).EncodeByteArray(nil, src, offs)
		case format.DeltaLengthByteArray:
			b, err = (&delta.LengthByteArrayEncoding{}).EncodeByteArray(nil, src, offs)
		case format.DeltaByteArray:
			b, err = (&delta.ByteArrayEncoding{}).EncodeByteArray(nil, src, offs)
		case format.RLEDictionary:
			idx := make([]int32, len(vals))
			for i, v := range vals {
				j, ok := dictIndex[v]
				if !ok {
					t.Fatalf("%q not in dict", v)
				}
				idx[i] = j
			}
			bw := max(1, int(bitWidth(len(dict))))
			b, err = (&rle.Encoding{BitWidth: bw}).EncodeInt32(nil, idx)
			b = append([]byte{byte(bw)}, b...)
		}
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var numValues, dictOff int64
	if dict != nil {
		dictOff = int64(len(out))
		raw := enc(format.Plain, dict)
		body := compressFor(codec, raw)
		h := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(raw)), CompressedPageSize: int32(len(body))}
		h.DictionaryPageHeader.Set(format.DictionaryPageHeader{NumValues: int32(len(dict)), Encoding: format.Plain})
		out = append(out, marshal(t, &h)...)
		out = append(out, body...)
	}
	dataOff := int64(len(out))
	for _, p := range pages {
		var defs, reps []uint8
		var vals []string
		for _, e := range p.entries {
			defs = append(defs, e.def)
			reps = append(reps, e.rep)
			if int(e.def) == maxDef {
				vals = append(vals, e.val)
			}
		}
		numValues += int64(len(p.entries))
		values := enc(p.enc, vals)
		out = append(out, dataPage(t, p.v2, p.enc, codec, s, defs, reps, values)...)
	}
	return writeOneColumn(t, s, format.ByteArray, codec, out, numValues, dataOff, dictOff, rows)
}

// bytesEntries returns level entries for n rows of shape s: a quarter of
// optional rows null; list rows null, empty, or of 1 to 6 elements, a fifth
// of them null; values from dict when set.
func bytesEntries(s shape, n int, rng *rand.Rand, dict []string) []bentry {
	var out []bentry
	val := func() string {
		if dict != nil {
			return dict[rng.IntN(len(dict))]
		}
		return fmt.Sprintf("v%0*d", rng.IntN(6), rng.IntN(100000))
	}
	for r := 0; r < n; r++ {
		switch s {
		case shapeRequired:
			out = append(out, bentry{val: val()})
		case shapeOptional:
			if rng.IntN(4) == 0 {
				out = append(out, bentry{def: 0})
			} else {
				out = append(out, bentry{def: 1, val: val()})
			}
		case shapeList:
			switch k := rng.IntN(8); {
			case k == 0:
				out = append(out, bentry{def: 0})
			case k == 1:
				out = append(out, bentry{def: 1})
			default:
				m := rng.IntN(6) + 1
				for e := 0; e < m; e++ {
					rep := uint8(1)
					if e == 0 {
						rep = 0
					}
					if rng.IntN(5) == 0 {
						out = append(out, bentry{def: 2, rep: rep})
					} else {
						out = append(out, bentry{def: 3, rep: rep, val: val()})
					}
				}
			}
		}
	}
	return out
}

// TestColumnReaderBytePages checks ColumnReader against ReadColumn
// and Slice on hand-built BYTE_ARRAY column chunks (required, optional,
// and optional lists of optional strings with null and empty lists) whose
// pages cut list rows anywhere and mix PLAIN, DELTA_LENGTH_BYTE_ARRAY,
// DELTA_BYTE_ARRAY (whose values depend on the previous one, including the
// values not copied outside the range) and RLE_DICTIONARY, V1 and V2, for
// many ranges with and without Rest; required chunks of dictionary pages
// only are also read in dictionary form.
func TestColumnReaderBytePages(t *testing.T) {
	dict := []string{"", "a", "bb", "ccc", "dddd", "eeeee-long-value"}
	encs := []format.Encoding{format.Plain, format.DeltaLengthByteArray, format.DeltaByteArray, format.RLEDictionary}
	for seed := uint64(0); seed < 36; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		s := shape(seed % 3)
		dictOnly := seed%6 == 0 // required, dictionary pages only
		rows := 40 + rng.IntN(80)
		entries := bytesEntries(s, rows, rng, dict)
		var pages []bpage
		for i := 0; i < len(entries); {
			j := min(len(entries), i+1+rng.IntN(15))
			enc := encs[rng.IntN(len(encs))]
			if dictOnly {
				enc = format.RLEDictionary
			}
			// A V2 page starts at a row boundary.
			pages = append(pages, bpage{v2: rng.IntN(2) == 0 && entries[i].rep == 0, enc: enc, entries: entries[i:j]})
			i = j
		}
		codec := format.Uncompressed
		if seed%2 == 1 {
			codec = format.Snappy
		}
		f := mustOpen(t, buildBytesFile(t, s, codec, dict, pages, int64(rows)))
		ci, err := f.Lookup("x")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []bool{false, true} {
			if d && !dictOnly {
				continue
			}
			whole, err := f.readWhole(0, ci, d)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if d && whole.DictData == nil {
				t.Fatalf("seed %d: no dictionary form", seed)
			}
			for lo := 0; lo < rows; lo += 1 + rng.IntN(5) {
				for hi := lo + 1; hi <= rows; hi += 1 + rng.IntN(8) {
					for _, rest := range []bool{false, true} {
						got, err := readRows(f, 0, ci, RowRange{Lo: lo, Hi: hi, Rest: rest, Dict: d})
						if err != nil {
							t.Fatalf("seed %d [%d, %d) rest %v dict %v: %v", seed, lo, hi, rest, d, err)
						}
						sameRows(t, fmt.Sprintf("seed %d shape %v [%d, %d) rest %v dict %v", seed, s, lo, hi, rest, d), got, whole.Slice(lo, hi))
					}
				}
			}
		}
	}
}
