package pqread

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/format"
)

// sameRows asserts that got, a ColumnReader result, equals want, a whole
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

// TestColumnReaderEqualsSlice checks ColumnReader against ReadColumn and
// Slice on every column chunk of every Parquet file in testdata (real
// writers' files, the field cases and the bad files), for several ranges,
// half of them with Rest, and in the dictionary form for BYTE_ARRAY
// columns: the same rows, and for a chunk ReadColumn rejects, the same
// error from a whole-range read with Rest and an error from every ranged
// read with Rest.
func TestColumnReaderEqualsSlice(t *testing.T) {
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
					whole, werr := f.readWhole(rg, ci, dict)
					if werr != nil {
						_, err := readRows(f, rg, ci, RowRange{Lo: 0, Hi: int(rows), Rest: true, Dict: dict})
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
						got, err := readRows(f, rg, ci, RowRange{Lo: r[0], Hi: r[1], Rest: rest, Dict: dict})
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

// TestColumnReaderEveryPageTransition cuts files of every pair of page
// kinds (pagedFile) at row pairs every 3 and 5 rows, with and without Rest,
// against ReadColumn and Slice.
func TestColumnReaderEveryPageTransition(t *testing.T) {
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
						got, err := readRows(f, 0, ci, RowRange{Lo: lo, Hi: hi, Rest: rest})
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

// TestColumnReaderInSlices reads pagedFile files the way convert reads a
// sliced row group: consecutive row slices, the last with Rest, with a mark
// kept before every page so that each read after the first resumes at one.
// Every slice must equal ReadColumn's rows, for several slice sizes.
func TestColumnReaderInSlices(t *testing.T) {
	dict := []int64{-1 << 62, -7, 0, 3, 1 << 40}
	kinds := []pageKind{{false, format.Plain}, {true, format.RLEDictionary}, {false, format.DeltaBinaryPacked}, {true, format.Plain}, {false, format.RLEDictionary}}
	for _, s := range []shape{shapeRequired, shapeOptional, shapeList} {
		rows := 300
		f := mustOpen(t, pagedFile(t, s, rows, dict, kinds, false))
		ci, _ := f.Lookup("x")
		whole := mustRead(t, f, "x", 0)
		for _, n := range []int{1, 2, 5, 13, 64} {
			for lo := 0; lo < rows; lo += n {
				hi := min(lo+n, rows)
				got, err := readRows(f, 0, ci, RowRange{Lo: lo, Hi: hi, Rest: hi == rows})
				if err != nil {
					t.Fatalf("shape %d slices of %d: [%d, %d): %v", s, n, lo, hi, err)
				}
				sameRows(t, fmt.Sprintf("shape %d slices of %d: [%d, %d)", s, n, lo, hi), got, whole.Slice(lo, hi))
			}
		}
	}
}

// TestColumnReaderErrors checks the range bounds and that a corrupt value
// is reported at its row of the row group whichever range finds it.
func TestColumnReaderErrors(t *testing.T) {
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
		_, err := readRows(f, 0, ci, RowRange{Lo: r[0], Hi: r[1]})
		if err == nil || err.Error() != werr.Error() {
			t.Errorf("%v: %v, want %v", r, err, werr)
		}
	}
	// Rows before the bad page read without error unless Rest reads on.
	if _, err := readRows(f, 0, ci, RowRange{Lo: 10, Hi: 40}); err != nil {
		t.Errorf("[10, 40): %v", err)
	}
	if _, err := readRows(f, 0, ci, RowRange{Lo: 10, Hi: 40, Rest: true}); err == nil || err.Error() != werr.Error() {
		t.Errorf("[10, 40) with Rest: %v, want %v", err, werr)
	}
	for _, r := range [][2]int{{-1, 3}, {5, 5}, {7, 3}, {0, 101}} {
		_, err := readRows(f, 0, ci, RowRange{Lo: r[0], Hi: r[1]})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("row range [%d, %d) outside the row group's 100 rows", r[0], r[1])) {
			t.Errorf("%v: %v", r, err)
		}
	}
}

type rowsMemRow struct {
	ID  int64     `parquet:"id"`
	Emb []float32 `parquet:"emb,list"`
}

// TestColumnReaderHoldsTheWindow checks the point of ColumnReader: each
// Next of a sixteenth of a large column chunk's rows allocates less than
// an eighth of what reading the whole chunk does (measured with
// runtime.MemStats: bytes allocated by the call), and the windows equal
// ReadColumn's rows.
func TestColumnReaderHoldsTheWindow(t *testing.T) {
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
		r, err := f.ColumnReader(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		n := rows / 16
		for lo := 0; lo < rows; lo += n {
			got, c := allocated(func() (*Column, error) { return r.Next(n) })
			sameRows(t, fmt.Sprint(name, lo), c, whole.Slice(lo, lo+n))
			if lo == rows/2 {
				t.Logf("%s: %d bytes allocated for 1/16 of the rows, %d for all", name, got, wholeBytes)
			}
			if lo > 0 && got*8 > wholeBytes { // a sixteenth of the rows, slack and about a page
				t.Errorf("%s: the window at row %d allocated %d bytes, the whole read %d", name, lo, got, wholeBytes)
			}
		}
		if _, err := r.Next(1); err != io.EOF {
			t.Errorf("%s: Next after the last row: %v, want io.EOF", name, err)
		}
		r.Close()
	}
}

// RowRange selects rows [Lo, Hi) of a row group for readRows; Rest reads
// on to the chunk's end, Dict asks for the dictionary form.
type RowRange struct {
	Lo, Hi     int
	Rest, Dict bool
}

// readRows reads rows [rr.Lo, rr.Hi) of a column chunk with a fresh
// ColumnReader the way a forward consumer does: the rows before them in
// windows of rr.Hi-rr.Lo rows (dropped), then the range as one window, and
// with rr.Rest the rows after it to the chunk's end; it returns the
// range's window.
func readRows(f *File, rg int, ci ColumnInfo, rr RowRange) (*Column, error) {
	open := f.ColumnReader
	if rr.Dict {
		open = f.ColumnReaderDict
	}
	r, err := open(rg, ci)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	n := rr.Hi - rr.Lo
	if rr.Lo < 0 || n < 1 || int64(rr.Hi) > r.Rows() {
		return nil, fmt.Errorf("row range [%d, %d) outside the row group's %d rows", rr.Lo, rr.Hi, r.Rows())
	}
	for lo := 0; lo < rr.Lo; lo += n {
		if _, err := r.Next(min(n, rr.Lo-lo)); err != nil {
			return nil, err
		}
	}
	c, err := r.Next(n)
	if err != nil {
		return nil, err
	}
	for rr.Rest && r.Rows() > 0 {
		if _, err := r.Next(n); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// TestDecodedColumnsOutliveBuffers: decoded columns never point into the
// read and decompression buffers, which go back to a pool after each read
// (an uncompressed page is decoded straight from the read buffer): every
// column of an uncompressed file (plain, dictionary and delta encodings,
// read both ways, whole and in windows) is compared, after every pooled
// buffer was overwritten, with the same columns read again.
func TestDecodedColumnsOutliveBuffers(t *testing.T) {
	rows := makeRows(600)
	path := writeParquet(t, rows, parquet.Compression(&uncompressed.Codec{}), parquet.PageBufferSize(512), parquet.MaxRowsPerRowGroup(250))
	f := mustOpen(t, path)
	type entry struct {
		what string
		rg   int
		ci   ColumnInfo
		dict bool
		c    []*Column
	}
	var got []entry
	for rg := range f.RowGroups() {
		for _, ci := range f.Columns() {
			for _, dict := range []bool{false, true} {
				e := entry{what: fmt.Sprintf("row group %d column %s dict %v", rg, ci.Name, dict), rg: rg, ci: ci, dict: dict}
				c, err := f.readWhole(rg, ci, dict)
				if err != nil {
					t.Fatal(err)
				}
				e.c = append(e.c, c)
				for lo := 0; lo < c.Rows; lo += 60 {
					w, err := readRows(f, rg, ci, RowRange{Lo: lo, Hi: min(lo+60, c.Rows), Dict: dict})
					if err != nil {
						t.Fatal(err)
					}
					e.c = append(e.c, w)
				}
				got = append(got, e)
			}
		}
	}
	var held []*[]byte
	for range 64 {
		b := getBuf(0)
		b2 := (*b)[:cap(*b)]
		for i := range b2 {
			b2[i] = 0xa5
		}
		held = append(held, b)
	}
	for _, b := range held {
		putBuf(b)
	}
	for _, e := range got {
		want, err := f.readWhole(e.rg, e.ci, e.dict)
		if err != nil {
			t.Fatal(err)
		}
		sameColumn(t, e.what, e.c[0], want)
		if !slices.Equal(e.c[0].DictIndex, want.DictIndex) || !bytes.Equal(e.c[0].DictData, want.DictData) || !slices.Equal(e.c[0].DictOffsets, want.DictOffsets) {
			t.Errorf("%s: dictionary form differs", e.what)
		}
		for k, w := range e.c[1:] {
			lo := 60 * k
			sameRows(t, fmt.Sprintf("%s window %d", e.what, k), w, want.Slice(lo, min(lo+60, want.Rows)))
		}
	}
}

// countingInput is an Input over a byte slice that counts the bytes read.
type countingInput struct {
	b []byte
	n atomic.Int64
}

func (c *countingInput) Size() int64 { return int64(len(c.b)) }

func (c *countingInput) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(c.b)) {
		return 0, io.EOF
	}
	n := copy(p, c.b[off:])
	c.n.Add(int64(n))
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestColumnReaderReadsEachByteOnce: a column chunk read in windows through
// OpenInput's Input reads its bytes once, in order (the read-ahead of a
// page header dropped at a window's end aside: at most headerProbe bytes a
// window), where the sliced reads it replaces read the chunk from its start
// again for every slice; the windows equal ReadColumn's rows, and errors
// print the name given to OpenInput.
func TestColumnReaderReadsEachByteOnce(t *testing.T) {
	const rows = 20_000
	data := make([]rowsMemRow, rows)
	for i := range data {
		data[i].ID = int64(i)
		data[i].Emb = []float32{float32(i), 1, 2, 3, 4, 5, 6, float32(-i)}
	}
	b, err := os.ReadFile(writeParquet(t, data, parquet.PageBufferSize(8<<10)))
	if err != nil {
		t.Fatal(err)
	}
	in := &countingInput{b: b}
	f, err := OpenInput("part/emb.parquet", in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"id", "emb"} {
		ci, _ := f.Lookup(name)
		whole, err := f.ReadColumn(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		_, size := chunkRange(&f.meta.RowGroups[0].Columns[ci.Index].MetaData)
		r, err := f.ColumnReader(0, ci)
		if err != nil {
			t.Fatal(err)
		}
		in.n.Store(0)
		windows := 0
		for lo := 0; lo < rows; lo += 333 {
			c, err := r.Next(333)
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, fmt.Sprint(name, lo), c, whole.Slice(lo, min(lo+333, rows)))
			windows++
		}
		if got := in.n.Load(); got < size || got > size+int64(windows*headerProbe) {
			t.Errorf("%s: %d bytes read for a column chunk of %d in %d windows", name, got, size, windows)
		}
	}
	in.b = in.b[:len(in.b)/2] // the file shrinks
	_, err = f.ReadColumn(0, f.Columns()[1])
	wantErr(t, err, ErrChanged, "part/emb.parquet: column \"emb\", row group 0, page 0")
}
