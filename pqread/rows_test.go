package pqread

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// sameRows asserts that got, a ReadColumnRows result, equals want, a whole
// column chunk cut with Slice, slot for slot (dictionary form included).
// A validity slice of all true and a nil one (no nulls) are the same.
func sameRows(t *testing.T, what string, got, want *Column) {
	t.Helper()
	if got.DictData == nil {
		checkInvariants(t, got)
	}
	g, w := *got, *want
	for _, c := range []*Column{&g, &w} {
		if c.RowValid == nil {
			c.RowValid = allTrue(c.Rows)
		}
		if c.Info.List && c.ElemValid == nil {
			c.ElemValid = allTrue(c.Slots())
		}
	}
	sameColumn(t, what, &g, &w)
	if !slices.Equal(got.DictIndex, want.DictIndex) || !bytes.Equal(got.DictData, want.DictData) ||
		!slices.Equal(got.DictOffsets, want.DictOffsets) || (got.DictData == nil) != (want.DictData == nil) {
		t.Errorf("%s: dictionary form differs", what)
	}
}

func allTrue(n int) []bool {
	v := make([]bool, n)
	for i := range v {
		v[i] = true
	}
	return v
}

// rowRanges returns the ranges to try over n rows: the whole, the first and
// last row, thirds, and a few seeded random ones.
func rowRanges(n int, seed uint64) [][2]int {
	out := [][2]int{{0, n}, {0, 1}, {n - 1, n}, {n / 3, max(n/3+1, 2*n/3)}, {max(0, n-2), n}}
	rng := rand.New(rand.NewPCG(seed, 7))
	for range 2 {
		a := rng.IntN(n)
		out = append(out, [2]int{a, a + 1 + rng.IntN(n-a)})
	}
	return out
}

// readableFiles lists every Parquet file under the repository's testdata.
func readableFiles(t *testing.T) []string {
	var out []string
	err := filepath.WalkDir(testdata, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadColumnRowsEqualsSlice checks ReadColumnRows against ReadColumn and
// Slice on every column chunk of every Parquet file in testdata (real
// writers' files, the field cases and the bad files), for several ranges,
// half of them with Rest, and in the dictionary form for BYTE_ARRAY
// columns: the same rows, and for a chunk ReadColumn rejects, the same
// error from a whole-range read with Rest and an error from every ranged
// read with Rest.
func TestReadColumnRowsEqualsSlice(t *testing.T) {
	files := readableFiles(t)
	if len(files) < 80 {
		t.Fatalf("only %d files", len(files))
	}
	chunks := 0
	for _, path := range files {
		f, err := Open(path, Limits{})
		if err != nil {
			continue // Open's own errors are the conformance test's
		}
		for rg, rows := range f.RowGroups() {
			if rows == 0 {
				continue
			}
			for _, ci := range f.Columns() {
				for _, dict := range []bool{false, true} {
					if dict && ci.Kind != KindBytes {
						continue // the dictionary form is the plain one
					}
					what := fmt.Sprintf("%s rg %d %q dict %v", path, rg, ci.Name, dict)
					whole, werr := f.readColumn(rg, ci, dict, nil)
					if werr != nil {
						_, err := f.ReadColumnRows(rg, ci, RowRange{Lo: 0, Hi: int(rows), Rest: true, Dict: dict})
						if err == nil || err.Error() != werr.Error() {
							t.Errorf("%s: whole-range read with Rest: %v, ReadColumn: %v", what, err, werr)
						}
					}
					ranges := rowRanges(int(rows), uint64(rg*1000+ci.Index))
					if whole != nil && len(whole.Data) > 8<<20 {
						ranges = ranges[:3] // a huge string: the whole, the first and last row
					}
					for i, r := range ranges {
						rest := i%2 == 0 // half the ranges read on to the chunk's end
						got, err := f.ReadColumnRows(rg, ci, RowRange{Lo: r[0], Hi: r[1], Rest: rest, Dict: dict})
						switch {
						case werr != nil && rest && err == nil:
							t.Errorf("%s %v: no error with Rest, ReadColumn: %v", what, r, werr)
						case werr != nil:
						case err != nil:
							t.Errorf("%s %v rest %v: %v", what, r, rest, err)
						default:
							sameRows(t, fmt.Sprintf("%s %v rest %v", what, r, rest), got, whole.Slice(r[0], r[1]))
						}
					}
					chunks++
				}
			}
		}
		f.Close()
	}
	if chunks < 500 {
		t.Errorf("only %d column chunks compared", chunks)
	}
}

// pagedFile builds a one-column file of rows rows of shape s (buildFile)
// whose data pages hold 7 level entries each, so list rows go on across
// pages, their kinds cycling through kinds; dict is the dictionary page,
// and bad makes the first dictionary index out of range.
func pagedFile(t *testing.T, s shape, rows int, dict []int64, kinds []pageKind, bad bool) string {
	entries, _, _, _ := makeEntries(s, rows, dict)
	spec := fileSpec{shape: s, codec: format.Snappy, dict: dict, rows: int64(rows), badIndex: bad}
	for i, k := 0, 0; i < len(entries); i, k = i+7, k+1 {
		spec.pages = append(spec.pages, pageSpec{kind: kinds[k%len(kinds)], entries: entries[i:min(i+7, len(entries))]})
	}
	return buildFile(t, spec)
}

// TestReadColumnRowsEveryPageTransition cuts files of every pair of page
// kinds (pagedFile) at row pairs every 3 and 5 rows, with and without Rest,
// against ReadColumn and Slice.
func TestReadColumnRowsEveryPageTransition(t *testing.T) {
	dict := []int64{-1 << 62, -7, 0, 3, 1 << 40}
	kinds := []pageKind{{false, format.Plain}, {true, format.RLEDictionary}, {false, format.DeltaBinaryPacked}, {true, format.Plain}}
	for _, s := range []shape{shapeRequired, shapeOptional, shapeList} {
		t.Run(fmt.Sprint(s), func(t *testing.T) {
			rows := 120
			f := mustOpen(t, pagedFile(t, s, rows, dict, kinds, false))
			ci, err := f.Lookup("x")
			if err != nil {
				t.Fatal(err)
			}
			whole := mustRead(t, f, "x", 0)
			for lo := 0; lo < rows; lo += 3 {
				for hi := lo + 1; hi <= rows; hi += 5 {
					for _, rest := range []bool{false, true} {
						got, err := f.ReadColumnRows(0, ci, RowRange{Lo: lo, Hi: hi, Rest: rest})
						if err != nil {
							t.Fatalf("[%d, %d) rest %v: %v", lo, hi, rest, err)
						}
						sameRows(t, fmt.Sprintf("[%d, %d) rest %v", lo, hi, rest), got, whole.Slice(lo, hi))
					}
				}
			}
		})
	}
}

// TestReadColumnRowsInSlices reads pagedFile files the way convert reads a
// sliced row group: consecutive row slices, the last with Rest, with a mark
// kept before every page so that each read after the first resumes at one.
// Every slice must equal ReadColumn's rows, for several slice sizes.
func TestReadColumnRowsInSlices(t *testing.T) {
	defer func(g int) { markGap = g }(markGap)
	markGap = 0
	dict := []int64{-1 << 62, -7, 0, 3, 1 << 40}
	kinds := []pageKind{{false, format.Plain}, {true, format.RLEDictionary}, {false, format.DeltaBinaryPacked}, {true, format.Plain}, {false, format.RLEDictionary}}
	for _, s := range []shape{shapeRequired, shapeOptional, shapeList} {
		rows := 300
		f := mustOpen(t, pagedFile(t, s, rows, dict, kinds, false))
		ci, _ := f.Lookup("x")
		whole := mustRead(t, f, "x", 0)
		for _, n := range []int{1, 2, 5, 13, 64} {
			resumed := 0
			for lo := 0; lo < rows; lo += n {
				hi := min(lo+n, rows)
				if f.findMark(firstChunk(f), int64(lo)) != nil {
					resumed++
				}
				got, err := f.ReadColumnRows(0, ci, RowRange{Lo: lo, Hi: hi, Rest: hi == rows})
				if err != nil {
					t.Fatalf("shape %d slices of %d: [%d, %d): %v", s, n, lo, hi, err)
				}
				sameRows(t, fmt.Sprintf("shape %d slices of %d: [%d, %d)", s, n, lo, hi), got, whole.Slice(lo, hi))
			}
			if resumed < rows/n/2 {
				t.Errorf("shape %d slices of %d: %d of %d reads resumed at a mark", s, n, resumed, (rows+n-1)/n)
			}
			if len(f.marks) != 0 {
				t.Errorf("shape %d slices of %d: marks left after the last slice", s, n)
			}
		}
	}
}

// TestReadColumnRowsResumesAtMarks: after a read of the first rows has left
// marks, a read of later rows resumes at one instead of going through the
// pages before it: with a byte of an early page damaged afterwards (such
// that ReadColumn and a read by a File without marks fail), the File with
// marks still reads the later rows, equal to ReadColumn's before the damage.
func TestReadColumnRowsResumesAtMarks(t *testing.T) {
	defer func(g int) { markGap = g }(markGap)
	markGap = 0
	dict := []int64{1, 2, 3}
	path := pagedFile(t, shapeList, 300, dict, []pageKind{{false, format.Plain}}, false)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, path)
	ci, _ := f.Lookup("x")
	whole := mustRead(t, f, "x", 0)
	if _, err := f.ReadColumnRows(0, ci, RowRange{Lo: 0, Hi: 150}); err != nil {
		t.Fatal(err)
	}
	start, n := chunkRange(&f.meta.RowGroups[0].Columns[0].MetaData)
	for off := start + n/8; off < start+n/3; off++ {
		b := append([]byte(nil), good...)
		b[off] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fresh := mustOpen(t, path)
		_, err1 := fresh.ReadColumn(0, ci)
		_, err2 := fresh.ReadColumnRows(0, ci, RowRange{Lo: 160, Hi: 170})
		fresh.Close()
		if err1 == nil || err2 == nil {
			continue // this byte does not break the reads that go through it
		}
		got, err := f.ReadColumnRows(0, ci, RowRange{Lo: 160, Hi: 170})
		if err != nil {
			t.Fatalf("byte %d damaged: the File with marks read through it: %v", off, err)
		}
		sameRows(t, "[160, 170)", got, whole.Slice(160, 170))
		return
	}
	t.Fatal("no damaged byte breaks the reads")
}

// firstChunk returns the key of the marks of the first column chunk of f's
// first row group.
func firstChunk(f *File) markKey {
	start, _ := chunkRange(&f.meta.RowGroups[0].Columns[0].MetaData)
	return markKey{start: start}
}

// TestReadColumnRowsErrors checks the range bounds and that a corrupt value
// is reported at its row of the row group whichever range finds it.
func TestReadColumnRowsErrors(t *testing.T) {
	dict := []int64{1, 2, 3}
	entries, _, _, _ := makeEntries(shapeOptional, 100, dict)
	spec := fileSpec{shape: shapeOptional, codec: format.Snappy, dict: dict, rows: 100, badIndex: true}
	for i := 0; i < len(entries); i += 10 {
		kind := pageKind{false, format.Plain}
		if i >= 60 {
			kind = pageKind{false, format.RLEDictionary} // the first dictionary index is at row 60 or after
		}
		spec.pages = append(spec.pages, pageSpec{kind: kind, entries: entries[i : i+10]})
	}
	f := mustOpen(t, buildFile(t, spec))
	ci, _ := f.Lookup("x")
	_, werr := f.ReadColumn(0, ci)
	if werr == nil || !strings.Contains(werr.Error(), "out of range") {
		t.Fatalf("ReadColumn: %v, want a dictionary index out of range", werr)
	}
	for _, r := range [][2]int{{0, 100}, {50, 70}, {65, 66}, {61, 100}} {
		_, err := f.ReadColumnRows(0, ci, RowRange{Lo: r[0], Hi: r[1]})
		if err == nil || err.Error() != werr.Error() {
			t.Errorf("%v: %v, want %v", r, err, werr)
		}
	}
	// Rows before the bad page read without error unless Rest reads on.
	if _, err := f.ReadColumnRows(0, ci, RowRange{Lo: 10, Hi: 40}); err != nil {
		t.Errorf("[10, 40): %v", err)
	}
	if _, err := f.ReadColumnRows(0, ci, RowRange{Lo: 10, Hi: 40, Rest: true}); err == nil || err.Error() != werr.Error() {
		t.Errorf("[10, 40) with Rest: %v, want %v", err, werr)
	}
	for _, r := range [][2]int{{-1, 3}, {5, 5}, {7, 3}, {0, 101}} {
		_, err := f.ReadColumnRows(0, ci, RowRange{Lo: r[0], Hi: r[1]})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("row range [%d, %d) outside the row group's 100 rows", r[0], r[1])) {
			t.Errorf("%v: %v", r, err)
		}
	}
}

// TestReadColumnRowsSkipsPagesBeforeTheRange: a read without Rest passes
// over the pages wholly before its rows by their headers (and, for lists,
// their repetition levels) without decoding their values, so a bad
// dictionary index in the first page fails ReadColumn and a read with Rest,
// but not a read of later rows; with V1 and V2 pages, scalar and list
// columns (lists cut every 7 level entries, so rows go on across pages).
func TestReadColumnRowsSkipsPagesBeforeTheRange(t *testing.T) {
	dict := []int64{4, 5, 6}
	for _, s := range []shape{shapeOptional, shapeList} {
		for _, v2 := range []bool{false, true} {
			f := mustOpen(t, pagedFile(t, s, 100, dict, []pageKind{{v2, format.RLEDictionary}}, true))
			ci, _ := f.Lookup("x")
			_, werr := f.ReadColumn(0, ci)
			if werr == nil || !strings.Contains(werr.Error(), "out of range") {
				t.Fatalf("shape %d v2 %v: ReadColumn: %v, want a dictionary index out of range", s, v2, werr)
			}
			if _, err := f.ReadColumnRows(0, ci, RowRange{Lo: 80, Hi: 90}); err != nil {
				t.Errorf("shape %d v2 %v: [80, 90): %v, want the bad first page skipped", s, v2, err)
			}
			if _, err := f.ReadColumnRows(0, ci, RowRange{Lo: 80, Hi: 90, Rest: true}); err == nil || err.Error() != werr.Error() {
				t.Errorf("shape %d v2 %v: [80, 90) with Rest: %v, want %v", s, v2, err, werr)
			}
		}
	}
}

type rowsMemRow struct {
	ID  int64     `parquet:"id"`
	Emb []float32 `parquet:"emb,list"`
}

// TestReadColumnRowsHoldsTheRange checks the point of ReadColumnRows: a
// read of a sixteenth of a large column chunk's rows allocates less than an
// eighth of what reading the whole chunk does (measured with runtime.MemStats:
// bytes allocated by the read).
func TestReadColumnRowsHoldsTheRange(t *testing.T) {
	const rows, width = 400_000, 8
	data := make([]rowsMemRow, rows)
	for i := range data {
		data[i].ID = int64(i) * 7919
		data[i].Emb = make([]float32, width)
		for k := range data[i].Emb {
			data[i].Emb[k] = float32(i*width + k)
		}
	}
	f := mustOpen(t, writeParquet(t, data, parquet.PageBufferSize(64<<10)))
	allocated := func(read func() (*Column, error)) (uint64, *Column) {
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		c, err := read()
		runtime.ReadMemStats(&b)
		if err != nil {
			t.Fatal(err)
		}
		return b.TotalAlloc - a.TotalAlloc, c
	}
	for _, name := range []string{"id", "emb"} {
		ci, err := f.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		f.ReadColumn(0, ci) // warm the buffer pool
		wholeBytes, whole := allocated(func() (*Column, error) { return f.ReadColumn(0, ci) })
		lo, hi := rows/2, rows/2+rows/16
		for _, rest := range []bool{false, true} {
			n, got := allocated(func() (*Column, error) { return f.ReadColumnRows(0, ci, RowRange{Lo: lo, Hi: hi, Rest: rest}) })
			sameRows(t, name, got, whole.Slice(lo, hi))
			t.Logf("%s rest %v: %d bytes allocated for 1/16 of the rows, %d for all", name, rest, n, wholeBytes)
			if n*8 > wholeBytes { // a sixteenth of the rows, slack and about a page

				t.Errorf("%s rest %v: the range read allocated %d bytes, the whole read %d", name, rest, n, wholeBytes)
			}
		}
	}
}
