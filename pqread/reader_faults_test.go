package pqread

// Tests of ColumnReader' marks (resume), skipPage and
// DecodedSize: faults found, and passing coverage of interleaved,
// concurrent and randomised ranged reads.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// chunkBytesOf returns the bytes of the first column chunk of the file at
// path, split into its pages (header and body each), and the file's
// metadata.
func chunkBytesOf(t *testing.T, path string) ([][]byte, *format.FileMetaData) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, path)
	meta := f.meta
	start, n := chunkRange(&meta.RowGroups[0].Columns[0].MetaData)
	chunk := b[start : start+n]
	var pages [][]byte
	for pos := 0; pos < len(chunk); {
		var h format.PageHeader
		r := thriftProto.NewReaderFromBytes(chunk[pos:])
		if err := thrift.NewDecoder(r).Decode(&h); err != nil {
			t.Fatal(err)
		}
		end := pos + r.BytesRead() + int(h.CompressedPageSize)
		pages = append(pages, chunk[pos:end])
		pos = end
	}
	return pages, meta
}

// layoutFile writes a file of meta (its schema and row groups) whose column
// chunk j of row group i is the blob where[i][j] of blobs, laid out once
// each after "PAR1": several chunks may share one blob.
func layoutFile(t *testing.T, meta format.FileMetaData, blobs [][]byte, where [][]int) string {
	t.Helper()
	out := []byte("PAR1")
	offs := make([]int64, len(blobs))
	for i, b := range blobs {
		offs[i] = int64(len(out))
		out = append(out, b...)
	}
	rgs := make([]format.RowGroup, len(meta.RowGroups))
	for i, rg := range meta.RowGroups {
		rg.Columns = append([]format.ColumnChunk(nil), rg.Columns...)
		for j := range rg.Columns {
			md := &rg.Columns[j].MetaData
			k := where[i][j]
			md.DataPageOffset, md.DictionaryPageOffset = offs[k], 0
			md.TotalCompressedSize, md.TotalUncompressedSize = int64(len(blobs[k])), int64(len(blobs[k]))
			rg.Columns[j].FileOffset = offs[k]
		}
		rgs[i] = rg
	}
	meta.RowGroups = rgs
	footer := marshal(t, &meta)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	p := filepath.Join(t.TempDir(), "layout.parquet")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResumeSkipsDictionaryPageNotFirst pins a fault: a read that resumes
// at a mark "after decoding the dictionary page" assumes the dictionary
// page is the chunk's first page, and jumps over it when it is not. A
// required INT64 chunk whose pages are [PLAIN data page, dictionary page,
// RLE_DICTIONARY data pages...] (ReadColumn accepts a dictionary page after
// a data page), or [index page, dictionary page, data pages...], reads
// whole; after a read of rows [50, 60) has left marks (markGap 0), a read
// of rows [70, 80) resumes at the mark before row 70, never decodes the
// dictionary page and fails with "dictionary-encoded page without a
// dictionary page", where ReadColumn(...).Slice(70, 80) is the answer.
func TestResumeSkipsDictionaryPageNotFirst(t *testing.T) {
	dict := []int64{11, 22, 33, 44}
	entries, _, _, _ := makeEntries(shapeRequired, 100, dict)
	spec := fileSpec{shape: shapeRequired, codec: format.Snappy, dict: dict, rows: 100}
	for i := 0; i < len(entries); i += 10 {
		kind := pageKind{false, format.RLEDictionary}
		if i == 0 {
			kind = pageKind{false, format.Plain}
		}
		spec.pages = append(spec.pages, pageSpec{kind: kind, entries: entries[i : i+10]})
	}
	pages, meta := chunkBytesOf(t, buildFile(t, spec))
	dictPage, data := pages[0], pages[1:]
	ih := format.PageHeader{Type: format.IndexPage}
	ih.IndexPageHeader.Set(format.IndexPageHeader{})
	indexPage := marshal(t, &ih)
	for _, tc := range []struct {
		name  string
		pages [][]byte
	}{
		{"data page first", append([][]byte{data[0], dictPage}, data[1:]...)},
		{"index page first", append([][]byte{indexPage, dictPage}, data...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var blob []byte
			for _, p := range tc.pages {
				blob = append(blob, p...)
			}
			path := layoutFile(t, *meta, [][]byte{blob}, [][]int{{0}})
			f := mustOpen(t, path)
			ci, _ := f.Lookup("x")
			whole, err := f.ReadColumn(0, ci)
			if err != nil {
				t.Fatalf("ReadColumn: %v", err)
			}
			// A File without marks reads [70, 80) (from the first page).
			if _, err := readRows(mustOpen(t, path), 0, ci, RowRange{Lo: 70, Hi: 80}); err != nil {
				t.Fatalf("[70, 80) without marks: %v", err)
			}
			for _, r := range [][2]int{{50, 60}, {70, 80}} {
				got, err := readRows(f, 0, ci, RowRange{Lo: r[0], Hi: r[1]})
				if err != nil {
					t.Fatalf("%v after marks of the reads before: %v; ReadColumn succeeds", r, err)
				}
				sameRows(t, fmt.Sprint(r), got, whole.Slice(r[0], r[1]))
			}
		})
	}
}

// TestMarksOfAnotherChunkAtTheSameOffset pins a fault: marks are kept by
// the column chunk's file offset alone, so two column chunks whose footer
// entries point at the same bytes share them although they count rows
// differently. Blob X holds V2 pages of list entries, two present elements
// per row: read as the list column "b" (row group 1) it holds 50 rows, read
// as the required column "a" (row group 0, whose V2 page reader passes over
// the level bytes) it holds 100 rows, one per entry. Both chunks read
// whole. After a ranged read of a in row group 0 has left marks (row 30 of
// a starts at page 3), a ranged read of b's rows [30, 31) in row group 1
// resumes at that mark as if 30 rows of b came before page 3 (only 15 do),
// and returns b's row 15 instead of its row 30.
func TestMarksOfAnotherChunkAtTheSameOffset(t *testing.T) {
	// X: 10 V2 PLAIN pages of 10 entries, rows [v, v+1] of present elements.
	var listEntries []entry
	for r := range 50 {
		listEntries = append(listEntries, entry{def: 3, rep: 0, val: int64(1000 + 2*r)}, entry{def: 3, rep: 1, val: int64(1001 + 2*r)})
	}
	xs := fileSpec{shape: shapeList, codec: format.Uncompressed, rows: 50}
	for i := 0; i < len(listEntries); i += 10 {
		xs.pages = append(xs.pages, pageSpec{kind: pageKind{true, format.Plain}, entries: listEntries[i : i+10]})
	}
	xPages, xMeta := chunkBytesOf(t, buildFile(t, xs))
	// Y: a list chunk of 100 rows; Z: a required chunk of 50 rows.
	dict := []int64{5, 6, 7}
	ye, _, _, _ := makeEntries(shapeList, 100, dict)
	yPages, yMeta := chunkBytesOf(t, buildFile(t, fileSpec{shape: shapeList, codec: format.Uncompressed, rows: 100, pages: []pageSpec{{kind: pageKind{false, format.Plain}, entries: ye}}}))
	ze, _, _, _ := makeEntries(shapeRequired, 50, dict)
	zPages, zMeta := chunkBytesOf(t, buildFile(t, fileSpec{shape: shapeRequired, codec: format.Uncompressed, rows: 50, pages: []pageSpec{{kind: pageKind{false, format.Plain}, entries: ze}}}))
	join := func(p [][]byte) (b []byte) {
		for _, x := range p {
			b = append(b, x...)
		}
		return b
	}
	// Schema: a (required INT64), b (optional LIST of optional INT64).
	root := format.SchemaElement{Name: "schema"}
	root.NumChildren.Set(2)
	a := format.SchemaElement{Name: "a"}
	a.Type.Set(format.Int64)
	a.RepetitionType.Set(format.Required)
	list := format.SchemaElement{Name: "b"}
	list.RepetitionType.Set(format.Optional)
	list.NumChildren.Set(1)
	list.ConvertedType.Set(deprecated.List)
	rep := format.SchemaElement{Name: "list"}
	rep.RepetitionType.Set(format.Repeated)
	rep.NumChildren.Set(1)
	elem := format.SchemaElement{Name: "element"}
	elem.Type.Set(format.Int64)
	elem.RepetitionType.Set(format.Optional)
	mdA := func(md format.ColumnMetaData) format.ColumnMetaData {
		md.PathInSchema = []string{"a"}
		return md
	}
	mdB := func(md format.ColumnMetaData) format.ColumnMetaData {
		md.PathInSchema = []string{"b", "list", "element"}
		return md
	}
	xm, ym, zm := xMeta.RowGroups[0].Columns[0].MetaData, yMeta.RowGroups[0].Columns[0].MetaData, zMeta.RowGroups[0].Columns[0].MetaData
	meta := format.FileMetaData{Version: 1, Schema: []format.SchemaElement{root, a, list, rep, elem}, NumRows: 150,
		RowGroups: []format.RowGroup{
			{NumRows: 100, Columns: []format.ColumnChunk{{MetaData: mdA(xm)}, {MetaData: mdB(ym)}}},
			{NumRows: 50, Columns: []format.ColumnChunk{{MetaData: mdA(zm)}, {MetaData: mdB(xm)}}},
		}}
	f := mustOpen(t, layoutFile(t, meta, [][]byte{join(xPages), join(yPages), join(zPages)}, [][]int{{0, 1}, {2, 0}}))
	ca, err := f.Lookup("a")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := f.Lookup("b")
	if err != nil {
		t.Fatal(err)
	}
	wholeA, err := f.ReadColumn(0, ca)
	if err != nil {
		t.Fatalf("ReadColumn(0, a): %v", err)
	}
	wholeB, err := f.ReadColumn(1, cb)
	if err != nil {
		t.Fatalf("ReadColumn(1, b): %v", err)
	}
	if wholeA.Rows != 100 || wholeB.Rows != 50 {
		t.Fatalf("rows: a %d, b %d", wholeA.Rows, wholeB.Rows)
	}
	got, err := readRows(f, 0, ca, RowRange{Lo: 60, Hi: 61})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "a [60, 61)", got, wholeA.Slice(60, 61))
	got, err = readRows(f, 1, cb, RowRange{Lo: 30, Hi: 31})
	if err != nil {
		t.Fatalf("b [30, 31): %v", err)
	}
	if want := wholeB.Slice(30, 31); got.Rows != 1 || len(got.Int64) != 2 || got.Int64[0] != want.Int64[0] {
		t.Errorf("b [30, 31) after a ranged read of a: values %v, ReadColumn's row 30 %v (row 15 is %v)", got.Int64, want.Int64, wholeB.Slice(15, 16).Int64)
	}
	sameRows(t, "b [30, 31) after a ranged read of a", got, wholeB.Slice(30, 31))
}

// randomListEntries returns level entries of n rows of an optional list of
// optional INT64: null lists, empty lists, and 1 to 9 elements, a sixth of
// them null, values distinct.
func randomListEntries(rng *rand.Rand, n int) []entry {
	var out []entry
	v := int64(0)
	for range n {
		switch k := rng.IntN(10); {
		case k == 0:
			out = append(out, entry{def: 0})
		case k == 1:
			out = append(out, entry{def: 1})
		default:
			m := 1 + rng.IntN(9)
			for e := range m {
				rep := uint8(1)
				if e == 0 {
					rep = 0
				}
				if rng.IntN(6) == 0 {
					out = append(out, entry{def: 2, rep: rep})
				} else {
					v++
					out = append(out, entry{def: 3, rep: rep, val: v * 1000003})
				}
			}
		}
	}
	return out
}

// randomFile builds a one-column file of rows rows of shape s whose pages
// are cut at random entry counts (0 to 12 entries: pages without values
// too, list rows going on across several pages), of random kinds V1/V2 x
// PLAIN, RLE_DICTIONARY, DELTA_BINARY_PACKED. V2 pages are used wherever
// the page begins a row.
func randomFile(t *testing.T, rng *rand.Rand, s shape, rows int) string {
	var entries []entry
	dict := []int64{}
	switch s {
	case shapeList:
		entries = randomListEntries(rng, rows)
	default:
		for r := range rows {
			if s == shapeOptional && rng.IntN(3) == 0 {
				entries = append(entries, entry{def: 0})
				continue
			}
			entries = append(entries, entry{def: 1, val: int64(r * 7919)})
		}
		if s == shapeRequired {
			for i := range entries {
				entries[i].def = 0
			}
		}
	}
	maxDef, _ := maxLevels(s)
	seen := map[int64]bool{}
	for _, e := range entries {
		if int(e.def) == maxDef && !seen[e.val] {
			seen[e.val] = true
			dict = append(dict, e.val)
		}
	}
	kinds := []pageKind{{false, format.Plain}, {false, format.RLEDictionary}, {false, format.DeltaBinaryPacked}, {true, format.Plain}, {true, format.RLEDictionary}, {true, format.DeltaBinaryPacked}}
	spec := fileSpec{shape: s, codec: format.Snappy, dict: dict, rows: int64(rows)}
	for i := 0; i < len(entries); {
		j := min(len(entries), i+rng.IntN(13))
		k := kinds[rng.IntN(len(kinds))]
		if k.v2 && entries[i].rep != 0 {
			k.v2 = false
		}
		spec.pages = append(spec.pages, pageSpec{kind: k, entries: entries[i:j]})
		i = j
	}
	return buildFile(t, spec)
}

// TestMarksRandomOrderReads reads random files (required, optional and
// list columns, random page cuts including pages of no entries, V1 and V2)
// in random row ranges in random order, with marks before every page
// (markGap 0), some ranges with Rest, and compares every read with
// ReadColumn's Slice: marks left by reads of later, earlier and
// overlapping rows, reads that end the chunk and drop them, and Close
// between reads.
func TestMarksRandomOrderReads(t *testing.T) {
	for seed := uint64(0); seed < 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		s := shape(seed % 3)
		rows := 30 + rng.IntN(150)
		f := mustOpen(t, randomFile(t, rng, s, rows))
		ci, _ := f.Lookup("x")
		whole, err := f.ReadColumn(0, ci)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for range 60 {
			lo := rng.IntN(rows)
			hi := lo + 1 + rng.IntN(min(rows-lo, 1+rng.IntN(20)))
			rest := rng.IntN(8) == 0
			if rng.IntN(10) == 0 {
				f.Close() // marks outlive the descriptor: the next read reopens
			}
			got, err := readRows(f, 0, ci, RowRange{Lo: lo, Hi: hi, Rest: rest})
			if err != nil {
				t.Fatalf("seed %d shape %d [%d, %d) rest %v: %v", seed, s, lo, hi, rest, err)
			}
			sameRows(t, fmt.Sprintf("seed %d shape %d [%d, %d) rest %v", seed, s, lo, hi, rest), got, whole.Slice(lo, hi))
		}
	}
}

// TestMarksConcurrentReads reads disjoint and overlapping ranges of one
// File from several goroutines at once (marks noted, merged, found and
// dropped concurrently; run it with -race), each equal to ReadColumn's
// Slice.
func TestMarksConcurrentReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	const rows = 400
	f := mustOpen(t, randomFile(t, rng, shapeList, rows))
	ci, _ := f.Lookup("x")
	whole, err := f.ReadColumn(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 100)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 5))
			for range 40 {
				lo := rng.IntN(rows)
				hi := lo + 1 + rng.IntN(min(rows-lo, 10))
				got, err := readRows(f, 0, ci, RowRange{Lo: lo, Hi: hi, Rest: rng.IntN(10) == 0})
				if err != nil {
					errs <- fmt.Sprintf("[%d, %d): %v", lo, hi, err)
					return
				}
				want := whole.Slice(lo, hi)
				if !sameSlots(got, want) {
					errs <- fmt.Sprintf("[%d, %d): rows differ", lo, hi)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// sameSlots compares two INT64 list columns slot by slot (no *testing.T, for
// goroutines), validity nil and all true alike.
func sameSlots(a, b *Column) bool {
	if a.Rows != b.Rows || len(a.Offsets) != len(b.Offsets) {
		return false
	}
	for i := range a.Offsets {
		if a.Offsets[i] != b.Offsets[i] {
			return false
		}
	}
	valid := func(v []bool, i int) bool { return v == nil || v[i] }
	for i := range a.Rows {
		if valid(a.RowValid, i) != valid(b.RowValid, i) {
			return false
		}
	}
	for i := range a.Slots() {
		va, vb := valid(a.ElemValid, i), valid(b.ElemValid, i)
		if va != vb || (va && a.Int64[i] != b.Int64[i]) {
			return false
		}
	}
	return true
}

// TestMarksRandomOrderBytes is TestMarksRandomOrderReads for hand-built
// BYTE_ARRAY chunks (buildBytesFile: PLAIN, DELTA_LENGTH_BYTE_ARRAY,
// DELTA_BYTE_ARRAY, RLE_DICTIONARY pages, V1 and V2), reads in dictionary
// form (which note marks but never resume) mixed with plain ones (which
// resume at them), against ReadColumn's and ReadColumnDict's Slice.
func TestMarksRandomOrderBytes(t *testing.T) {
	dict := []string{"", "a", "bb", "ccc", "dddd", "eeeee-long-value"}
	encs := []format.Encoding{format.Plain, format.DeltaLengthByteArray, format.DeltaByteArray, format.RLEDictionary}
	for seed := uint64(0); seed < 24; seed++ {
		rng := rand.New(rand.NewPCG(seed, 17))
		s := shape(seed % 3)
		rows := 40 + rng.IntN(100)
		entries := bytesEntries(s, rows, rng, dict)
		var pages []bpage
		for i := 0; i < len(entries); {
			j := min(len(entries), i+rng.IntN(12))
			pages = append(pages, bpage{v2: rng.IntN(2) == 0 && (i == len(entries) || entries[i].rep == 0), enc: encs[rng.IntN(len(encs))], entries: entries[i:j]})
			i = j
		}
		f := mustOpen(t, buildBytesFile(t, s, format.Snappy, dict, pages, int64(rows)))
		ci, _ := f.Lookup("x")
		whole := map[bool]*Column{}
		for _, d := range []bool{false, true} {
			c, err := f.readWhole(0, ci, d)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			whole[d] = c
		}
		for range 50 {
			lo := rng.IntN(rows)
			hi := lo + 1 + rng.IntN(min(rows-lo, 1+rng.IntN(15)))
			rr := RowRange{Lo: lo, Hi: hi, Rest: rng.IntN(8) == 0, Dict: rng.IntN(3) == 0}
			got, err := readRows(f, 0, ci, rr)
			if err != nil {
				t.Fatalf("seed %d shape %d %+v: %v", seed, s, rr, err)
			}
			what := fmt.Sprintf("seed %d shape %d %+v", seed, s, rr)
			want := whole[rr.Dict].Slice(lo, hi)
			if rr.Dict && s != shapeList {
				sameDictValues(t, what, got, want)
			} else {
				sameRows(t, what, got, want)
			}
		}
	}
}

// sameDictValues compares the values of two BYTE_ARRAY columns slot by
// slot, whatever their form (ColumnReader' dictionary form may differ
// from ReadColumnDict's as documented); scalar columns only.
func sameDictValues(t *testing.T, what string, got, want *Column) {
	t.Helper()
	if got.Rows != want.Rows || got.Slots() != want.Slots() {
		t.Fatalf("%s: %d rows %d slots, want %d rows %d slots", what, got.Rows, got.Slots(), want.Rows, want.Slots())
	}
	for k := range want.Slots() {
		g, gok := dictValue(got, k)
		w, wok := dictValue(want, k)
		if gok != wok || string(g) != string(w) {
			t.Fatalf("%s: slot %d: %q (%v), want %q (%v)", what, k, g, gok, w, wok)
		}
	}
}

// TestRangedReadHostileValueCount pins a fault: for a list column,
// ColumnReader sizes its level buffers from the footer's value count per
// row ((NumValues + rows - 1) / rows, times the rows asked for) without
// guarding the arithmetic: a footer that claims MaxInt64 values for a
// 100-row list chunk wraps the per-row count negative, so the hint for
// rows [40, 50) is negative and make() panics ("makeslice: cap out of
// range"), which comes back as "panic while decoding" (at offset 0).
// ReadColumn, which bounds its hint by the chunk's size, reads the same
// chunk (its pages hold the real values), so the ranged read must return
// ReadColumn's rows. (Open accepts any value count.)
func TestRangedReadHostileValueCount(t *testing.T) {
	dict := []int64{1, 2, 3}
	e, _, _, _ := makeEntries(shapeList, 100, dict)
	spec := fileSpec{shape: shapeList, rows: 100, pages: []pageSpec{{kind: pageKind{false, format.Plain}, entries: e[:len(e)/2]}, {kind: pageKind{true, format.Plain}, entries: e[len(e)/2:]}}}
	for _, n := range []int64{math.MaxInt64} {
		f := withNumValues(t, spec, n)
		ci, _ := f.Lookup("x")
		whole, err := f.ReadColumn(0, ci)
		if err != nil {
			t.Fatalf("NumValues %d: ReadColumn: %v", n, err)
		}
		for _, rr := range []RowRange{{Lo: 0, Hi: 100}, {Lo: 0, Hi: 100, Rest: true}, {Lo: 40, Hi: 50}} {
			got, err := readRows(f, 0, ci, rr)
			if err != nil {
				t.Errorf("NumValues %d %+v: %v; ReadColumn succeeds", n, rr, err)
				continue
			}
			sameRows(t, fmt.Sprintf("NumValues %d %+v", n, rr), got, whole.Slice(rr.Lo, rr.Hi))
		}
	}
}

// withNumValues opens the file of spec (buildFile) rewritten so that its
// column chunk's footer claims n level entries.
func withNumValues(t *testing.T, spec fileSpec, n int64) *File {
	pages, meta := chunkBytesOf(t, buildFile(t, spec))
	var blob []byte
	for _, p := range pages {
		blob = append(blob, p...)
	}
	m := *meta
	m.RowGroups = append([]format.RowGroup(nil), meta.RowGroups...)
	m.RowGroups[0].Columns = append([]format.ColumnChunk(nil), meta.RowGroups[0].Columns...)
	m.RowGroups[0].Columns[0].MetaData.NumValues = n
	return mustOpen(t, layoutFile(t, m, [][]byte{blob}, [][]int{{0}}))
}
