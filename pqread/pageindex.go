package pqread

import (
	"fmt"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// PageIndex is a column chunk's page index (Parquet's ColumnIndex and
// OffsetIndex, format/PageIndex.md), one entry per data page in chunk
// order.
type PageIndex struct {
	// FirstRow[k] is the row group row of page k's first row;
	// FirstRow[len(FirstRow)-1] is the row group's row count, so page k
	// holds rows [FirstRow[k], FirstRow[k+1]).
	FirstRow []int64
	// NullPage[k] is true when every row of page k is null, as the
	// index's null counts confirm (its Min and Max are then nil).
	NullPage []bool
	// Min[k] and Max[k] bound page k's non-null values, in PLAIN encoding
	// (byte arrays without their length prefix); for byte arrays they
	// may be truncated bounds, still Min ≤ every value ≤ Max. Both are
	// nil for a page the index gives no bounds for (a null flag its
	// counts do not confirm, or a file whose column_orders does not give
	// the column its type's order, in which bounds are undefined).
	Min, Max [][]byte

	offset []int64 // file offset of page k's header
	end    int64   // file offset past the last page
}

// Pages returns the number of data pages.
func (ix *PageIndex) Pages() int { return len(ix.NullPage) }

// maxIndexBytes bounds one ColumnIndex or OffsetIndex read.
const maxIndexBytes = 64 << 20

// PageIndex returns the page index of the column chunk of col in rowGroup,
// read from the file (its ColumnIndex and OffsetIndex), or nil and no
// error when the chunk has none (either part absent, or a chunk without
// values). It is checked against the footer: as many pages in both parts,
// first rows strictly increasing from 0 below the row group's rows, page
// offsets increasing inside the column chunk. A page marked all null counts
// as one (NullPage) only when the index's null counts confirm it (see
// nullPageCounted): a page wrongly marked null would be skipped by every
// filter that needs a value, and writers do mark pages of values null
// (parquet-mr 1.13 without statistics); an unconfirmed one is kept as a
// page without bounds (Min and Max nil). A null page's bounds are ignored
// (the format asks for empty ones; parquet-go writes its type's zero). A failed
// check or a part that does not parse is an *Error wrapping ErrCorrupt.
// Bounds that parse but do not bound the page's values cannot be told
// from the index alone; they are trusted, as every reader trusts them.
func (f *File) PageIndex(rowGroup int, col ColumnInfo) (*PageIndex, error) {
	base, err := f.locateChunk(rowGroup, col)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*PageIndex, error) {
		e := base
		e.Err = err
		return nil, &e
	}
	rg := &f.meta.RowGroups[rowGroup]
	cc := &rg.Columns[col.Index]
	if cc.FilePath != "" || cc.MetaData.NumValues == 0 || cc.ColumnIndexLength <= 0 || cc.OffsetIndexLength <= 0 {
		return nil, nil
	}
	read := func(what string, off int64, n int32, v any) error {
		if off < 0 || int64(n) > maxIndexBytes || off > f.size || int64(n) > f.size-off {
			return corruptf("%s bytes [%d, %d+%d) outside the file of %d bytes", what, off, off, n, f.size)
		}
		b := make([]byte, n)
		if err := readFull(f.in, b, off); err != nil {
			return fmt.Errorf("reading %s: %w", what, err)
		}
		if err := thrift.Unmarshal(new(thrift.CompactProtocol), b, v); err != nil {
			return corruptf("%s does not parse: %v", what, err)
		}
		return nil
	}
	var ci format.ColumnIndex
	var oi format.OffsetIndex
	if err := read("column index", cc.ColumnIndexOffset, cc.ColumnIndexLength, &ci); err != nil {
		return fail(err)
	}
	if err := read("offset index", cc.OffsetIndexOffset, cc.OffsetIndexLength, &oi); err != nil {
		return fail(err)
	}
	n := len(oi.PageLocations)
	if n == 0 || len(ci.NullPages) != n || len(ci.MinValues) != n || len(ci.MaxValues) != n {
		return fail(corruptf("page index: offset index has %d pages, column index %d null flags, %d minima, %d maxima",
			n, len(ci.NullPages), len(ci.MinValues), len(ci.MaxValues)))
	}
	ordered := f.typeOrdered(col)
	start, size := chunkRange(&cc.MetaData)
	ix := &PageIndex{FirstRow: make([]int64, n+1), NullPage: make([]bool, n), Min: make([][]byte, n), Max: make([][]byte, n),
		offset: make([]int64, n), end: start + size}
	for k, p := range oi.PageLocations {
		lo := start
		if k > 0 {
			lo = ix.offset[k-1] + 1
		}
		switch {
		case k == 0 && p.FirstRowIndex != 0:
			return fail(corruptf("page index: page 0 starts at row %d, not 0", p.FirstRowIndex))
		case k > 0 && p.FirstRowIndex <= ix.FirstRow[k-1], p.FirstRowIndex >= rg.NumRows:
			return fail(corruptf("page index: page %d starts at row %d (page before at %d, row group of %d rows)", k, p.FirstRowIndex, ix.FirstRow[max(0, k-1)], rg.NumRows))
		case p.Offset < lo || p.CompressedPageSize <= 0 || p.Offset >= start+size || int64(p.CompressedPageSize) > start+size-p.Offset:
			return fail(corruptf("page index: page %d at [%d, %d+%d) is out of order or outside the column chunk [%d, %d)", k, p.Offset, p.Offset, p.CompressedPageSize, start, start+size))
		}
		ix.FirstRow[k], ix.offset[k] = p.FirstRowIndex, p.Offset
		ix.NullPage[k] = ci.NullPages[k]
		if !ix.NullPage[k] && ordered {
			// Copies: the decoded index aliases its read buffer.
			ix.Min[k] = append([]byte{}, ci.MinValues[k]...)
			ix.Max[k] = append([]byte{}, ci.MaxValues[k]...)
		}
	}
	ix.FirstRow[n] = rg.NumRows
	for k := range n {
		if ix.NullPage[k] && !nullPageCounted(ci.NullCounts, k, ix.FirstRow[k+1]-ix.FirstRow[k], col.MaxRep > 0) {
			// A page marked all null whose null count does not say so is
			// not trusted: parquet-mr 1.13 marks every page null, count
			// -1, when it kept no statistics. Trusting the flag would skip
			// pages of values for every filter that needs one; the page
			// is taken as one without bounds instead.
			ix.NullPage[k] = false
		}
	}
	return ix, nil
}

// nullPageCounted reports whether null counts confirm that page k, of rows
// rows, holds only nulls: its count is given and, without repetition (a
// page's values are its rows), equals rows; with repetition (a row may be
// an empty list) it is at least 1.
func nullPageCounted(counts []int64, k int, rows int64, repeated bool) bool {
	if len(counts) <= k {
		return false
	}
	if repeated {
		return counts[k] >= 1
	}
	return counts[k] == rows
}

// ColumnReaderPages is ColumnReader (dictForm: ColumnReaderDict) over the
// data pages [first, end) of the column chunk of col in rowGroup only, by
// ix (PageIndex of the same chunk): the dictionary page, when the chunk
// has one, and then those pages are read, no other. The reader's rows are
// the pages' rows, row 0 being row group row ix.FirstRow[first]; the pages
// must hold exactly those rows (else ErrCorrupt). Errors are ColumnReader's,
// and a page range out of [0, ix.Pages()].
func (f *File) ColumnReaderPages(rowGroup int, col ColumnInfo, dictForm bool, ix *PageIndex, first, end int) (*ColumnReader, error) {
	r, err := f.columnReader(rowGroup, col, dictForm, columnReadAhead)
	if err != nil {
		return nil, err
	}
	if first < 0 || end <= first || end > ix.Pages() {
		r.Close()
		e := r.base
		e.Err = fmt.Errorf("pages [%d, %d) out of range [0, %d)", first, end, ix.Pages())
		return nil, &e
	}
	if r.ended || r.start+r.size != ix.end {
		r.Close()
		e := r.base
		e.Err = corruptf("page index does not belong to this column chunk")
		return nil, &e
	}
	r.rgRows = ix.FirstRow[end] - ix.FirstRow[first]
	r.size = ix.end - r.start
	if end < ix.Pages() {
		r.size = ix.offset[end] - r.start
	}
	at := ix.offset[first] - r.start
	if ix.offset[0] > r.start {
		// A dictionary page precedes the data pages: read it first, then
		// jump to page first.
		r.jump, r.jumpPage = at, first
	} else {
		r.pos = at
		r.page = first - 1
	}
	r.rowBase = ix.FirstRow[first]
	return r, nil
}
