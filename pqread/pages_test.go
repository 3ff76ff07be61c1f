package pqread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// A hand-assembled file: one INT64 leaf column (required, optional, or an
// optional 3-level LIST of optional elements), one row group, pages laid out
// exactly as a test asks, so every page-type and encoding transition inside
// one column chunk can be produced, including ones no writer emits.

type shape int

const (
	shapeRequired shape = iota
	shapeOptional
	shapeList
)

// pageKind is one data page flavour.
type pageKind struct {
	v2  bool
	enc format.Encoding // Plain, RLEDictionary, PlainDictionary or DeltaBinaryPacked
}

func (k pageKind) String() string {
	v := "V1"
	if k.v2 {
		v = "V2"
	}
	return v + "/" + k.enc.String()
}

// entry is one level entry: def/rep levels and, when def == maxDef, a value.
type entry struct {
	def, rep uint8
	val      int64
}

type pageSpec struct {
	kind    pageKind
	entries []entry
}

type fileSpec struct {
	shape    shape
	codec    format.CompressionCodec
	dict     []int64 // dictionary page values; nil = no dictionary page
	dict2    bool    // write a second dictionary page after the first data page
	pages    []pageSpec
	rows     int64
	badIndex bool // make the first index of the first dictionary-encoded page out of range
}

func maxLevels(s shape) (maxDef, maxRep int) {
	switch s {
	case shapeOptional:
		return 1, 0
	case shapeList:
		return 3, 1
	}
	return 0, 0
}

func compressFor(codec format.CompressionCodec, b []byte) []byte {
	if codec == format.Snappy {
		return snappy.Encode(nil, b)
	}
	return b
}

func levelBytes(t testing.TB, lv []uint8, max int) []byte {
	if max == 0 {
		return nil
	}
	b, err := (&rle.Encoding{BitWidth: int(bitWidth(max))}).EncodeLevels(nil, lv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func marshal(t testing.TB, v any) []byte {
	b, err := thrift.Marshal(new(thrift.CompactProtocol), v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildFile writes spec to a file and returns its path.
func buildFile(t testing.TB, spec fileSpec) string {
	t.Helper()
	maxDef, _ := maxLevels(spec.shape)
	out := []byte("PAR1")
	dictIndex := map[int64]int32{}
	for i, v := range spec.dict {
		dictIndex[v] = int32(i)
	}
	var numValues int64
	var dictOff int64
	writeDict := func() {
		var raw []byte
		for _, v := range spec.dict {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
		body := compressFor(spec.codec, raw)
		h := format.PageHeader{Type: format.DictionaryPage, UncompressedPageSize: int32(len(raw)), CompressedPageSize: int32(len(body))}
		h.DictionaryPageHeader.Set(format.DictionaryPageHeader{NumValues: int32(len(spec.dict)), Encoding: format.Plain})
		out = append(out, marshal(t, &h)...)
		out = append(out, body...)
	}
	if spec.dict != nil {
		dictOff = int64(len(out))
		writeDict()
	}
	dataOff := int64(len(out))
	badDone := false
	for pi, p := range spec.pages {
		var defs, reps []uint8
		var vals []int64
		for _, e := range p.entries {
			defs = append(defs, e.def)
			reps = append(reps, e.rep)
			if int(e.def) == maxDef {
				vals = append(vals, e.val)
			}
		}
		numValues += int64(len(p.entries))
		var values []byte
		switch p.kind.enc {
		case format.Plain:
			for _, v := range vals {
				values = binary.LittleEndian.AppendUint64(values, uint64(v))
			}
		case format.RLEDictionary, format.PlainDictionary:
			idx := make([]int32, len(vals))
			for i, v := range vals {
				j, ok := dictIndex[v]
				if !ok {
					t.Fatalf("value %d not in dictionary", v)
				}
				idx[i] = j
			}
			if spec.badIndex && !badDone && len(idx) > 0 {
				idx[0] = int32(len(spec.dict))
				badDone = true
			}
			bw := max(1, int(bitWidth(len(spec.dict))))
			enc, err := (&rle.Encoding{BitWidth: bw}).EncodeInt32(nil, idx)
			if err != nil {
				t.Fatal(err)
			}
			values = append([]byte{byte(bw)}, enc...)
		case format.DeltaBinaryPacked:
			enc, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, vals)
			if err != nil {
				t.Fatal(err)
			}
			values = enc
		}
		out = append(out, dataPage(t, p.kind.v2, p.kind.enc, spec.codec, spec.shape, defs, reps, values)...)
		if spec.dict2 && pi == 0 {
			writeDict()
		}
	}
	return writeOneColumn(t, spec.shape, format.Int64, spec.codec, out, numValues, dataOff, dictOff, spec.rows)
}

// dataPage returns a data page, header and body, of the level entries defs
// and reps (levels of a kind the shape lacks are not written) and the
// encoded values: a V2 page (levels uncompressed, values compressed with
// codec) or a V1 page (RLE levels with their lengths, and the values,
// compressed together).
func dataPage(t testing.TB, v2 bool, enc format.Encoding, codec format.CompressionCodec, s shape, defs, reps []uint8, values []byte) []byte {
	maxDef, maxRep := maxLevels(s)
	var h format.PageHeader
	var body []byte
	if v2 {
		rl, dl := levelBytes(t, reps, maxRep), levelBytes(t, defs, maxDef)
		body = append(append(append(body, rl...), dl...), compressFor(codec, values)...)
		nulls, rows := 0, 0
		for i := range defs {
			if int(defs[i]) != maxDef {
				nulls++
			}
			if reps[i] == 0 {
				rows++
			}
		}
		h = format.PageHeader{Type: format.DataPageV2, UncompressedPageSize: int32(len(rl) + len(dl) + len(values)), CompressedPageSize: int32(len(body))}
		h.DataPageHeaderV2.Set(format.DataPageHeaderV2{NumValues: int32(len(defs)), NumNulls: int32(nulls), NumRows: int32(rows),
			Encoding: enc, DefinitionLevelsByteLength: int32(len(dl)), RepetitionLevelsByteLength: int32(len(rl))})
	} else {
		var raw []byte
		for _, lv := range []struct {
			l   []uint8
			max int
		}{{reps, maxRep}, {defs, maxDef}} {
			if lv.max == 0 {
				continue
			}
			b := levelBytes(t, lv.l, lv.max)
			raw = binary.LittleEndian.AppendUint32(raw, uint32(len(b)))
			raw = append(raw, b...)
		}
		raw = append(raw, values...)
		body = compressFor(codec, raw)
		h = format.PageHeader{Type: format.DataPage, UncompressedPageSize: int32(len(raw)), CompressedPageSize: int32(len(body))}
		h.DataPageHeader.Set(format.DataPageHeader{NumValues: int32(len(defs)), Encoding: enc,
			DefinitionLevelEncoding: format.RLE, RepetitionLevelEncoding: format.RLE})
	}
	return append(marshal(t, &h), body...)
}

// writeOneColumn completes out, "PAR1" and the pages of one column chunk
// of leaf "x" of shape s and physical type typ (required, optional, or an
// optional 3-level LIST of optional elements), with a footer of one row
// group of rows rows, and writes it to a new file whose path it returns.
func writeOneColumn(t testing.TB, s shape, typ format.Type, codec format.CompressionCodec, out []byte, numValues, dataOff, dictOff, rows int64) string {
	chunkEnd := int64(len(out))
	opt := func() thrift.Null[format.FieldRepetitionType] {
		return thrift.New(format.Optional)
	}
	var schema []format.SchemaElement
	root := format.SchemaElement{Name: "schema"}
	root.NumChildren.Set(1)
	leaf := format.SchemaElement{Name: "x"}
	leaf.Type.Set(typ)
	var path []string
	switch s {
	case shapeRequired:
		leaf.RepetitionType.Set(format.Required)
		schema = []format.SchemaElement{root, leaf}
		path = []string{"x"}
	case shapeOptional:
		leaf.RepetitionType = opt()
		schema = []format.SchemaElement{root, leaf}
		path = []string{"x"}
	case shapeList:
		list := format.SchemaElement{Name: "x", RepetitionType: opt()}
		list.NumChildren.Set(1)
		list.ConvertedType.Set(deprecated.List)
		rep := format.SchemaElement{Name: "list"}
		rep.RepetitionType.Set(format.Repeated)
		rep.NumChildren.Set(1)
		leaf.Name = "element"
		leaf.RepetitionType = opt()
		schema = []format.SchemaElement{root, list, rep, leaf}
		path = []string{"x", "list", "element"}
	}
	md := format.ColumnMetaData{Type: typ, Encoding: []format.Encoding{format.Plain, format.RLE}, PathInSchema: path,
		Codec: codec, NumValues: numValues, TotalCompressedSize: chunkEnd - 4, TotalUncompressedSize: chunkEnd - 4,
		DataPageOffset: dataOff, DictionaryPageOffset: dictOff}
	meta := format.FileMetaData{Version: 1, Schema: schema, NumRows: rows,
		RowGroups: []format.RowGroup{{Columns: []format.ColumnChunk{{FileOffset: 4, MetaData: md}}, TotalByteSize: chunkEnd - 4, NumRows: rows}},
		CreatedBy: "pqread tests"}
	footer := marshal(t, &meta)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	path2 := filepath.Join(t.TempDir(), "pages.parquet")
	if err := os.WriteFile(path2, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path2
}

// makeEntries builds level entries for n rows of the shape; value v(i) for
// the i-th value. Optional: every 3rd row null. List: row r has r%4 elements
// (row%7==5 is a null list), element k of row r is null when (r+k)%5 == 4.
func makeEntries(s shape, n int, dict []int64) (entries []entry, want []*int64, offsets []int64, rowValid []bool) {
	next := 0
	val := func() int64 {
		v := dict[next%len(dict)]
		if next%3 == 1 {
			v = dict[(next*7)%len(dict)]
		}
		next++
		return v
	}
	maxDef, _ := maxLevels(s)
	for r := range n {
		switch s {
		case shapeRequired:
			v := val()
			entries = append(entries, entry{val: v})
			want = append(want, &v)
		case shapeOptional:
			if r%3 == 2 {
				entries = append(entries, entry{def: 0})
				want = append(want, nil)
				continue
			}
			v := val()
			entries = append(entries, entry{def: 1, val: v})
			want = append(want, &v)
		case shapeList:
			offsets = append(offsets, int64(len(want)))
			if r%7 == 5 {
				entries = append(entries, entry{def: 0})
				rowValid = append(rowValid, false)
				continue
			}
			rowValid = append(rowValid, true)
			if r%4 == 0 {
				entries = append(entries, entry{def: 1})
				continue
			}
			for k := range r % 4 {
				rep := uint8(0)
				if k > 0 {
					rep = 1
				}
				if (r+k)%5 == 4 {
					entries = append(entries, entry{def: 2, rep: rep})
					want = append(want, nil)
					continue
				}
				v := val()
				entries = append(entries, entry{def: uint8(maxDef), rep: rep, val: v})
				want = append(want, &v)
			}
		}
	}
	if s == shapeList {
		offsets = append(offsets, int64(len(want)))
	}
	return
}

var allKinds = []pageKind{
	{false, format.Plain}, {false, format.RLEDictionary}, {false, format.PlainDictionary}, {false, format.DeltaBinaryPacked},
	{true, format.Plain}, {true, format.RLEDictionary}, {true, format.DeltaBinaryPacked},
}

// TestEveryPageTransition lays out one column chunk whose consecutive data
// pages go through every ordered pair of page flavours (V1/V2 x PLAIN,
// RLE_DICTIONARY, PLAIN_DICTIONARY, DELTA_BINARY_PACKED), including
// PLAIN -> dictionary, which writers do not produce, and checks every slot,
// for required, optional and list columns, uncompressed and SNAPPY. List
// pages are cut every 5 level entries, so rows continue across pages.
func TestEveryPageTransition(t *testing.T) {
	var seq []pageKind
	for _, a := range allKinds {
		for _, b := range allKinds {
			seq = append(seq, a, b)
		}
	}
	dict := []int64{-1 << 62, -7, 0, 3, 1 << 40, 1<<63 - 1, -1 << 63}
	for _, s := range []shape{shapeRequired, shapeOptional, shapeList} {
		for _, codec := range []format.CompressionCodec{format.Uncompressed, format.Snappy} {
			t.Run(fmt.Sprintf("shape%d/%s", s, codec), func(t *testing.T) {
				rows := 1000
				entries, want, offsets, rowValid := makeEntries(s, rows, dict)
				per := max(1, len(entries)/len(seq))
				if s == shapeList {
					per = 5
				}
				spec := fileSpec{shape: s, codec: codec, dict: dict, rows: int64(rows)}
				for i := 0; i < len(entries); i += per {
					spec.pages = append(spec.pages, pageSpec{kind: seq[(i/per)%len(seq)], entries: entries[i:min(i+per, len(entries))]})
				}
				if len(spec.pages) < len(seq) {
					t.Fatalf("%d pages do not cover %d transitions", len(spec.pages), len(seq))
				}
				f := mustOpen(t, buildFile(t, spec))
				c := mustRead(t, f, "x", 0)
				if c.Rows != rows {
					t.Fatalf("rows %d", c.Rows)
				}
				if s == shapeList {
					if !slices.Equal(c.Offsets, offsets) {
						t.Fatalf("offsets differ")
					}
					if !slices.Equal(c.RowValid, rowValid) {
						t.Fatalf("row validity differs")
					}
				}
				for i, w := range want {
					valid := (c.RowValid == nil || s == shapeList || c.RowValid[i]) && (c.ElemValid == nil || c.ElemValid[i])
					if (w != nil) != valid || (w != nil && c.Int64[i] != *w) || (w == nil && c.Int64[i] != 0) {
						t.Fatalf("slot %d: valid %v value %d, want %v", i, valid, c.Int64[i], w)
					}
				}
			})
		}
	}
}

func TestDictionaryPageFaults(t *testing.T) {
	dict := []int64{10, 20, 30}
	entries, _, _, _ := makeEntries(shapeRequired, 20, dict)
	dictPage := pageSpec{kind: pageKind{false, format.RLEDictionary}, entries: entries[:10]}
	rest := pageSpec{kind: pageKind{false, format.RLEDictionary}, entries: entries[10:]}
	for _, tc := range []struct {
		name  string
		spec  fileSpec
		parts []string
	}{
		{"no dictionary page", fileSpec{pages: []pageSpec{dictPage, rest}}, []string{"without a dictionary page", "page 0"}},
		{"second dictionary page", fileSpec{dict: dict, dict2: true, pages: []pageSpec{dictPage, rest}}, []string{"second dictionary page", "page 2"}},
		{"index out of range", fileSpec{dict: dict, badIndex: true, pages: []pageSpec{dictPage, rest}}, []string{"dictionary index 3 out of range", "page 1", "row 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			spec.rows = 20
			var path string
			if spec.dict == nil {
				spec.dict = dict // indices still refer to it; the page is dropped
				path = buildNoDictPage(t, spec)
			} else {
				path = buildFile(t, spec)
			}
			f := mustOpen(t, path)
			ci, _ := f.Lookup("x")
			_, err := f.ReadColumn(0, ci)
			wantErr(t, err, ErrCorrupt, append([]string{"pages.parquet", `column "x"`, "row group 0"}, tc.parts...)...)
		})
	}
}

// buildNoDictPage writes spec's data pages (indices into spec.dict) but no
// dictionary page.
func buildNoDictPage(t *testing.T, spec fileSpec) string {
	t.Helper()
	withDict := buildFile(t, spec)
	// The dictionary page header and body start at byte 4; find their end by
	// decoding the header.
	b, h, n := readFirstPageHeader(t, withDict)
	end := 4 + n + int(h.CompressedPageSize)
	f, err := Open(withDict, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	md := f.meta.RowGroups[0].Columns[0].MetaData
	data := b[end : 4+md.TotalCompressedSize]
	out := append([]byte("PAR1"), data...)
	meta := *f.meta
	rg := meta.RowGroups[0]
	cc := rg.Columns[0]
	cc.MetaData.DictionaryPageOffset = 0
	cc.MetaData.DataPageOffset = 4
	cc.MetaData.TotalCompressedSize = int64(len(data))
	rg.Columns = []format.ColumnChunk{cc}
	meta.RowGroups = []format.RowGroup{rg}
	footer := marshal(t, &meta)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	path := filepath.Join(t.TempDir(), "pages.parquet")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestUndefinedEncodingAndNegativeCountAreNamed pins two unhelpful messages
// about hostile pages: an encoding number the format does not define was
// shown as "Encoding(?)", and a negative value count was reported as "above
// the limit".
func TestUndefinedEncodingAndNegativeCountAreNamed(t *testing.T) {
	e := entry{def: 0, val: 7}
	t.Run("undefined encoding", func(t *testing.T) {
		spec := fileSpec{rows: 1, pages: []pageSpec{{kind: pageKind{enc: format.Encoding(99)}, entries: []entry{e}}}}
		f := mustOpen(t, buildFile(t, spec))
		ci, _ := f.Lookup("x")
		_, err := f.ReadColumn(0, ci)
		wantErr(t, err, ErrUnsupported, "unsupported encoding Encoding(99) for INT64", `column "x"`, "row group 0")
	})
	t.Run("negative value count", func(t *testing.T) {
		spec := fileSpec{rows: 1, pages: []pageSpec{{kind: pageKind{enc: format.Plain}, entries: []entry{e}}}}
		path := buildFile(t, spec)
		// Re-encode the data page header (at byte 4) with NumValues -1; the
		// footer's offsets stay valid when the header keeps its length.
		b, h, n := readFirstPageHeader(t, path)
		dh, ok := h.DataPageHeader.Get()
		if !ok {
			t.Fatal("first page has no data page header")
		}
		dh.NumValues = -1
		h.DataPageHeader.Set(dh)
		nb := marshal(t, &h)
		if len(nb) != n {
			t.Fatalf("re-encoded header is %d bytes, was %d", len(nb), n)
		}
		copy(b[4:], nb)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f := mustOpen(t, path)
		ci, _ := f.Lookup("x")
		_, err := f.ReadColumn(0, ci)
		wantErr(t, err, ErrCorrupt, "page declares a negative value count (-1)", `column "x"`, "row group 0")
	})
}

// readFirstPageHeader returns the bytes of the file at path, the page header
// that starts at byte 4 (the first page of the first column chunk) and the
// header's length in bytes.
func readFirstPageHeader(t *testing.T, path string) ([]byte, format.PageHeader, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var h format.PageHeader
	r := thriftProto.NewReaderFromBytes(b[4:])
	if err := thrift.NewDecoder(r).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return b, h, int(r.BytesRead())
}

// Limits.MaxRowSlots: a list row of more level entries than the limit
// fails with ErrLimit naming file, column, row group, row and the limit,
// as the page holding its entry past the limit is decoded (rows spanning
// many pages included, before the pages after it are read); a row of
// exactly the limit reads; lists of lists count their empty inner lists.
func TestMaxRowSlots(t *testing.T) {
	// Rows of 3, 5, 2, 4000 and 1 elements, in pages of 50 level entries.
	lens := []int{3, 5, 2, 4000, 1}
	var entries []entry
	for _, n := range lens {
		for k := range n {
			rep := uint8(1)
			if k == 0 {
				rep = 0
			}
			entries = append(entries, entry{def: 3, rep: rep, val: int64(k)})
		}
	}
	spec := fileSpec{shape: shapeList, rows: int64(len(lens))}
	for i := 0; i < len(entries); i += 50 {
		spec.pages = append(spec.pages, pageSpec{kind: pageKind{enc: format.Plain}, entries: entries[i:min(i+50, len(entries))]})
	}
	path := buildFile(t, spec)
	pages := len(spec.pages)
	for _, c := range []struct {
		limit int64
		row   int
	}{{4, 1}, {5, 3}, {3999, 3}} {
		f, err := Open(path, Limits{MaxRowSlots: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		ci := f.Columns()[0]
		_, err = f.ReadColumn(0, ci)
		wantErr(t, err, ErrLimit, filepath.Base(path), `column "x"`, "row group 0", fmt.Sprintf("row %d,", c.row),
			fmt.Sprintf("row %d holds more than %d slots", c.row, c.limit))
		var pe *Error
		if errors.As(err, &pe); pe.Row != int64(c.row) {
			t.Errorf("limit %d: Error.Row = %d, want %d", c.limit, pe.Row, c.row)
		}
		// The error comes from the page that passes the limit, not the last.
		r, err := f.ColumnReader(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(len(lens)); err == nil || (c.limit == 5 && r.page+2 >= pages) {
			t.Errorf("limit %d: error %v at page %d of %d", c.limit, err, r.page, pages)
		}
		r.Close()
		f.Close()
	}
	f, err := Open(path, Limits{MaxRowSlots: 4000})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := f.ReadColumn(0, f.Columns()[0])
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "offsets", c.Offsets, []int64{0, 3, 8, 10, 4010, 4011})
	if DefaultLimits.MaxRowSlots != 1<<24 {
		t.Errorf("default MaxRowSlots %d", DefaultLimits.MaxRowSlots)
	}

	// A list of lists: [[], [], [], []] is four level entries without a slot.
	ll := []listOfLists{{{}, {}, {}, {}}, {{i64p(1)}}}
	llPath := writeListOfLists(t, ll, nil)
	for _, lim := range []int64{3, 4} {
		f, err := Open(llPath, Limits{MaxRowSlots: lim})
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.ReadColumn(0, f.Columns()[0])
		if lim == 3 {
			wantErr(t, err, ErrLimit, "row 0 holds more than 3 slots")
		} else if err != nil {
			t.Errorf("limit 4: %v", err)
		}
		f.Close()
	}
}
