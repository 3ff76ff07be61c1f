package pqread

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/encoding/delta"
	"github.com/parquet-go/parquet-go/encoding/plain"
	"github.com/parquet-go/parquet-go/encoding/rle"
	"github.com/parquet-go/parquet-go/encoding/thrift"
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
		if c.Info.Depth == 2 && c.ListValid == nil {
			c.ListValid = allTrue(len(c.InnerOffsets) - 1)
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
					whole, werr := f.readWhole(rg, ci, dict, nil)
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
// windowed row group: consecutive row windows (each read with a fresh
// reader that reads past the rows before it), the last reading on to the
// chunk's end. Every window must equal ReadColumn's rows, for several
// window sizes.
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
			// A sixteenth of the rows with as much again of slack, plus the
			// page and decompression buffers (64 KiB pages), which a
			// collection may have taken from their pool meanwhile.
			if lo > 0 && got > wholeBytes/8+4*(64<<10) {
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
				c, err := f.readWhole(rg, ci, dict, nil)
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
		want, err := f.readWhole(e.rg, e.ci, e.dict, nil)
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

// TestColumnReaderRecycle: windows decoded into the buffers of recycled
// columns (each window's column handed back before the next, across row
// groups and readers, its values overwritten first) are the same as
// ReadColumn's, for every column of a file of every physical type, nulls,
// lists and encodings, whole row groups and windows of 60 rows, plain and
// dictionary form; and a row group's values do land in the recycled
// buffer (int64, float64 with nulls, dictionary indices).
func TestColumnReaderRecycle(t *testing.T) {
	rows := makeRows(600)
	path := writeParquet(t, rows, parquet.PageBufferSize(512), parquet.MaxRowsPerRowGroup(250))
	f := mustOpen(t, path)
	defer f.Close()
	for _, ci := range f.Columns() {
		for _, dict := range []bool{false, true} {
			if dict && ci.Kind != KindBytes {
				continue
			}
			for _, window := range []int{0, 60} {
				var last *Column
				for rg, n := range f.RowGroups() {
					want, err := f.readWhole(rg, ci, dict, nil)
					if err != nil {
						t.Fatal(err)
					}
					rd, err := f.columnReader(rg, ci, dict, 0)
					if err != nil {
						t.Fatal(err)
					}
					step := int(n)
					if window > 0 {
						step = window
					}
					for lo := 0; lo < int(n); lo += step {
						what := fmt.Sprintf("%s dict %v row group %d rows %d+%d", ci.Name, dict, rg, lo, step)
						var reused uintptr
						if last != nil {
							reused = poison(last)
						}
						rd.Recycle(last)
						c, err := rd.Next(step)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						sameRows(t, what, c, want.Slice(lo, min(lo+step, int(n))))
						// Whole row groups of 250 rows: the second
						// decodes into the first's buffer.
						if window == 0 && rg == 1 && (ci.Name == "i64" || ci.Name == "f64" || ci.Name == "s" && dict) && dataOf(c) != reused {
							t.Errorf("%s: values not in the recycled buffer", what)
						}
						last = c
					}
					rd.Close()
				}
			}
		}
	}
}

// poison overwrites the values and indices of c (their whole capacity)
// and returns the address of the first of them (0: none).
func poison(c *Column) uintptr {
	fill := func(b []byte) {
		for i := range b {
			b[i] = 0xa5
		}
	}
	var p uintptr
	bytesOf := func(ptr unsafe.Pointer, n int) {
		if n > 0 {
			fill(unsafe.Slice((*byte)(ptr), n))
			if p == 0 {
				p = uintptr(ptr)
			}
		}
	}
	bytesOf(unsafe.Pointer(unsafe.SliceData(c.Int32)), 4*cap(c.Int32))
	bytesOf(unsafe.Pointer(unsafe.SliceData(c.Int64)), 8*cap(c.Int64))
	bytesOf(unsafe.Pointer(unsafe.SliceData(c.Float32)), 4*cap(c.Float32))
	bytesOf(unsafe.Pointer(unsafe.SliceData(c.Float64)), 8*cap(c.Float64))
	bytesOf(unsafe.Pointer(unsafe.SliceData(c.DictIndex)), 4*cap(c.DictIndex))
	return p
}

// dataOf returns the address of c's first value or index (0: none).
func dataOf(c *Column) uintptr {
	for _, p := range []unsafe.Pointer{unsafe.Pointer(unsafe.SliceData(c.Int32)), unsafe.Pointer(unsafe.SliceData(c.Int64)), unsafe.Pointer(unsafe.SliceData(c.Float32)), unsafe.Pointer(unsafe.SliceData(c.Float64)), unsafe.Pointer(unsafe.SliceData(c.DictIndex))} {
		if p != nil {
			return uintptr(p)
		}
	}
	return 0
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

// More tests of ColumnReader: the dictionary form, and hand-built
// BYTE_ARRAY pages of every encoding.

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
			whole, err := f.readWhole(0, ci, d, nil)
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

// Cases found against the ranged reads that ColumnReader replaces (marks
// to resume at, pages passed over), kept against the forward reads:
// interleaved, concurrent and randomised windows, and DecodedSize.

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
// whole; a read of rows [70, 80) after one of rows [50, 60) must decode
// the dictionary page (a resume at a mark before row 70 never did and
// failed with "dictionary-encoded page without a dictionary page"), and
// ReadColumn(...).Slice(70, 80) is the answer.
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
			// A fresh File reads [70, 80) (from the first page).
			if _, err := readRows(mustOpen(t, path), 0, ci, RowRange{Lo: 70, Hi: 80}); err != nil {
				t.Fatalf("[70, 80) by a fresh File: %v", err)
			}
			for _, r := range [][2]int{{50, 60}, {70, 80}} {
				got, err := readRows(f, 0, ci, RowRange{Lo: r[0], Hi: r[1]})
				if err != nil {
					t.Fatalf("%v after the reads before: %v; ReadColumn succeeds", r, err)
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
// whole. After a read of a in row group 0 (row 30 of a starts at page 3),
// a read of b's rows [30, 31) in row group 1 must return b's row 30 (a
// resume at a's mark returned b's row 15: only 15 rows of b come before
// page 3).
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
// in random row ranges in random order, some ranges read on to the end,
// and compares every read with ReadColumn's Slice: reads of later,
// earlier and overlapping rows, reads that end the chunk, and Close
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
				f.Close() // the next read reopens the descriptor
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
// File from several goroutines at once (readers of one File sharing its
// Input; run it with -race), each equal to ReadColumn's Slice.
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
// form mixed with plain ones, against ReadColumn's and ReadColumnDict's
// Slice.
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
			c, err := f.readWhole(0, ci, d, nil)
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

// skewedList writes rows rows of rowsMemRow in pages of about 4 KiB, row
// i's emb list holding i%4 values, 5,000 where i%50 == 7 (value k being
// i*10000+k when fill, else 0), and returns the file, emb's ColumnInfo
// and each row's level entries (an empty list is one).
func skewedList(t *testing.T, rows int, fill bool) (*File, ColumnInfo, []int64) {
	t.Helper()
	data := make([]rowsMemRow, rows)
	entries := make([]int64, rows) // level entries per row
	for i := range data {
		m := i % 4
		if i%50 == 7 {
			m = 5000
		}
		data[i].ID = int64(i)
		data[i].Emb = make([]float32, m)
		if fill {
			for k := range data[i].Emb {
				data[i].Emb[k] = float32(i*10000 + k)
			}
		}
		entries[i] = int64(max(1, m))
	}
	f := mustOpen(t, writeParquet(t, data, parquet.PageBufferSize(4<<10)))
	ci, err := f.Lookup("emb")
	if err != nil {
		t.Fatal(err)
	}
	return f, ci, entries
}

// TestColumnReaderNextWithin reads a list column of skewed rows (one of
// 5,000 values in 50, the rest 0 to 3, an empty list being one level
// entry) with NextWithin for several row and entry bounds: every window
// equals ReadColumn's rows, holds at least one row and at most n, holds at
// most the bound's entries unless it is one row, and is the longest that
// does (the next row would pass a bound, or the chunk has ended).
func TestColumnReaderNextWithin(t *testing.T) {
	const rows = 400
	f, ci, entries := skewedList(t, rows, true)
	whole := mustRead(t, f, "emb", 0)
	for _, n := range []int{1, 7, 1000} {
		for _, budget := range []int64{1, 10, 100, 4999, 5000, 6000, 1 << 20} {
			r, err := f.ColumnReader(0, ci)
			if err != nil {
				t.Fatal(err)
			}
			at, windows := 0, 0
			for at < rows {
				c, err := r.NextWithin(n, budget)
				if err != nil {
					t.Fatalf("n %d budget %d at row %d: %v", n, budget, at, err)
				}
				what := fmt.Sprintf("n %d budget %d: window [%d, %d)", n, budget, at, at+c.Rows)
				var held int64
				for i := at; i < at+c.Rows; i++ {
					held += entries[i]
				}
				switch {
				case c.Rows < 1 || c.Rows > n:
					t.Fatalf("%s: %d rows", what, c.Rows)
				case c.Rows > 1 && held > budget:
					t.Errorf("%s: %d entries over the bound", what, held)
				case c.Rows < n && at+c.Rows < rows && held+entries[at+c.Rows] <= budget:
					t.Errorf("%s: stops short (%d entries, the next row %d)", what, held, entries[at+c.Rows])
				}
				sameRows(t, what, c, whole.Slice(at, at+c.Rows))
				at += c.Rows
				windows++
			}
			if _, err := r.NextWithin(n, budget); err != io.EOF {
				t.Errorf("n %d budget %d: NextWithin after the last row: %v, want io.EOF", n, budget, err)
			}
			r.Close()
			if n == 1000 && budget == 6000 && windows != 8 {
				// Rows [0, 57), then each later long row with the 49
				// short rows after it (under 100 entries): 8 windows.
				t.Errorf("n %d budget %d: %d windows, want 8", n, budget, windows)
			}
		}
	}
}

// TestColumnReaderPeek reads the skewed list column of
// TestColumnReaderNextWithin taking half of what Peek offers each time:
// Peek returns the longest run of rows within both bounds (at least one),
// again when called twice, and NextWithin of fewer rows returns exactly
// those, equal to ReadColumn's.
func TestColumnReaderPeek(t *testing.T) {
	const rows = 400
	f, ci, entries := skewedList(t, rows, true)
	whole := mustRead(t, f, "emb", 0)
	for _, n := range []int{1, 7, 1000} {
		for _, budget := range []int64{1, 100, 4999, 6000} {
			r, err := f.ColumnReader(0, ci)
			if err != nil {
				t.Fatal(err)
			}
			for at := 0; at < rows; {
				want, held := 0, int64(0)
				for i := at; i < rows && want < n && (want == 0 || held+entries[i] <= budget); i++ {
					held += entries[i]
					want++
				}
				what := fmt.Sprintf("n %d budget %d at row %d", n, budget, at)
				for range 2 {
					if p, err := r.Peek(n, budget); err != nil || p != want {
						t.Fatalf("%s: Peek %d, %v; want %d", what, p, err, want)
					}
				}
				k := (want + 1) / 2
				c, err := r.NextWithin(k, budget)
				if err != nil || c.Rows != k {
					t.Fatalf("%s: NextWithin(%d) after Peek: %v rows, %v", what, k, c, err)
				}
				sameRows(t, what, c, whole.Slice(at, at+k))
				at += k
			}
			if p, err := r.Peek(n, budget); p != 0 || err != io.EOF {
				t.Errorf("n %d budget %d: Peek after the last row: %d, %v; want 0, io.EOF", n, budget, p, err)
			}
			r.Close()
		}
	}
}

// TestColumnReaderOnPage: OnPage's function is called before each data
// page that takes the entries held past the bound, with the entries held
// and the page's, which together bound the window that comes back; its
// error fails the read at that page, and again on the next call. What
// a window takes and leaves held (Held) is at most the bound, what was
// held before, or what the function was told of.
func TestColumnReaderOnPage(t *testing.T) {
	const rows = 120
	f, ci, entries := skewedList(t, rows, false)
	r, err := f.ColumnReader(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var most int64 // the largest held+page the function was told of in a window
	calls := 0
	r.OnPage(func(held, page int64) error {
		if held+page <= 100 || page <= 0 {
			t.Errorf("called with held %d, page %d under the bound", held, page)
		}
		most = max(most, held+page)
		calls++
		return nil
	})
	var got []int
	for at := 0; at < rows; {
		most = 0
		pre := r.Held()
		c, err := r.NextWithin(1000, 100)
		if err != nil {
			t.Fatal(err)
		}
		held := r.Held()
		for i := at; i < at+c.Rows; i++ {
			held += entries[i]
		}
		if held > max(100, pre, most) {
			t.Errorf("window [%d, %d): %d entries taken and held, %d held before, the function told of at most %d", at, at+c.Rows, held, pre, most)
		}
		got = append(got, c.Rows)
		at += c.Rows
	}
	// Rows [0, 7), each long row alone and the short rows between them
	// (under 100 entries each run).
	if want := []int{7, 1, 49, 1, 49, 1, 12}; !slices.Equal(got, want) {
		t.Errorf("windows %v, want %v", got, want)
	}
	if calls < 2 {
		t.Errorf("%d calls, want one or more per page of long rows (2 here)", calls)
	}
	stop := errors.New("no memory")
	r2, err := f.ColumnReader(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	r2.OnPage(func(held, page int64) error { return stop })
	_, err = r2.NextWithin(1000, 100)
	var pe *Error
	if !errors.As(err, &pe) || pe.Page < 0 || !errors.Is(err, stop) {
		t.Fatalf("NextWithin: %v, want an *Error at a page wrapping the function's", err)
	}
	if _, err2 := r2.Peek(1000, 100); err2 != err {
		t.Errorf("after the failure: %v, want %v", err2, err)
	}
	// Without an entries bound nothing is called.
	r3, err := f.ColumnReader(0, ci)
	if err != nil {
		t.Fatal(err)
	}
	defer r3.Close()
	r3.OnPage(func(held, page int64) error { return stop })
	if c, err := r3.Next(rows); err != nil || c.Rows != rows {
		t.Errorf("Next: %v, %v", c, err)
	}
}
