package pqread

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/parquet-go/parquet-go/format"
	"github.com/prepml/prep/internal/sysmem"
)

// ReadColumn decodes the column chunk of col in row group rowGroup. col must
// come from this File (Columns or Lookup); a ColumnInfo of another file with
// a different schema is rejected rather than read by index. It is one
// ColumnReader's Next over all the row group's rows.
//
// Checks made while decoding, each failing with an *Error that names the
// file, column, row group and, where known, page, row and file offset:
// column chunk size against Limits.MaxChunkBytes; each page header parses
// (nesting at most 64 levels) and its sizes fit the chunk and
// Limits.MaxPageBytes; page CRCs when present; decompressed sizes exactly
// as declared; levels within their maximum; values present for every
// non-null slot and no bytes left over; dictionary indices in range;
// BYTE_ARRAY lengths within Limits.MaxValueBytes (naming the row); the rows
// decoded equal the row group's row count. A read that comes back short
// fails with ErrChanged. ReadColumn is safe for concurrent use.
func (f *File) ReadColumn(rowGroup int, col ColumnInfo) (*Column, error) {
	return f.readWhole(rowGroup, col, false, nil)
}

// ReadColumnDict is ReadColumn, except that a non-repeated BYTE_ARRAY
// column chunk whose data pages are all dictionary encoded comes back in
// dictionary form (Column.DictIndex, DictData, DictOffsets; Data and
// ByteOffsets nil): the values are not copied out of the dictionary once per
// row, so a consumer can work per dictionary entry (hash each string once).
// Other chunks, including one that falls back from dictionary to PLAIN
// pages part way, come back exactly as from ReadColumn. Checks and errors
// are ReadColumn's.
func (f *File) ReadColumnDict(rowGroup int, col ColumnInfo) (*Column, error) {
	return f.readWhole(rowGroup, col, true, nil)
}

// ReadColumnInto is ReadColumn (dict false) or ReadColumnDict (dict true)
// decoding into memory taken from b where it holds a buffer that fits
// (Buffers), and handing b back the read, decompression and level
// buffers it is done with. The Column is the same either way. b nil is
// ReadColumn or ReadColumnDict.
func (f *File) ReadColumnInto(b *Buffers, rowGroup int, col ColumnInfo, dict bool) (*Column, error) {
	return f.readWhole(rowGroup, col, dict, b)
}

func (f *File) readWhole(rowGroup int, col ColumnInfo, dict bool, bufs *Buffers) (*Column, error) {
	r, err := f.columnReader(rowGroup, col, dict, wholeReadAhead)
	if err != nil {
		return nil, err
	}
	r.bufs = bufs
	defer r.Close()
	return r.window(r.rgRows, 0)
}

// ColumnReader reads one column chunk forward, in windows of rows, from
// its first page to its last, each page once: Next(n) returns the next n
// rows as a Column. Between calls it holds the undelivered rest of the
// last page decoded (for a list column, that includes the start of a row
// that goes on in the next page) and a read buffer of about one page, so
// a column chunk that decodes to more memory than a caller can hold is
// read in windows. Windows put back to back equal ReadColumn's Column
// (Column.Slice of it), and every check ReadColumn makes is made: each
// page's when it is decoded, and those over the whole chunk (the rows
// decoded equal the row group's) when the window that ends the row group
// has decoded the chunk to its end. A ColumnReader is used by one
// goroutine at a time; readers of one File may run concurrently.
type ColumnReader struct {
	f        *File
	l        *leaf
	md       *format.ColumnMetaData
	rg       int
	rgRows   int64
	start    int64 // file offset of the chunk's first byte
	size     int64 // the chunk's bytes
	codec    format.CompressionCodec
	maxDef   int
	maxRep   int
	dictForm bool // keep dictionary indices of BYTE_ARRAY values
	// levelsOnly: decode levels, skip values (ListLengths); the value
	// slots are sized but hold unspecified bytes.
	levelsOnly bool
	base       Error
	// jump, when > 0: the chunk offset to go on at after the dictionary
	// page (ColumnReaderPages), jumpPage the page index there less one;
	// rowBase: the row group row of the reader's row 0.
	jump     int64
	jumpPage int
	rowBase  int64

	pos     int64 // chunk offset of the next page header
	page    int   // index of the page being decoded (-1 before the first)
	pageOff int64 // file offset of its header
	entries int64 // level entries decoded (value slots incl. nulls and empty lists)
	rows    int64 // rows started by the entries decoded
	pageMax int64 // most level entries of a data page decoded
	// rowEntries: level entries of the last row started (lists only).
	rowEntries int64
	done       int64                        // rows returned by Next
	want       int64                        // rows of the window being read
	most       int64                        // rows of the largest window so far
	budget     int64                        // level entries a window may hold (NextWithin), 0: unbounded
	onPage     func(held, page int64) error // OnPage's function, nil: none
	ended      bool                         // every page decoded
	closed     bool                         // the last window was returned
	err        error                        // sticky: the first failure
	// defsFull: the definition levels of the data page being decoded
	// are all at the maximum (levelsHybrid), so it holds a value per
	// entry.
	defsFull bool

	// Entries decoded and not yet returned: they begin at row done.
	defs []uint8 // definition levels (nil when maxDef == 0)
	reps []uint8 // repetition levels (nil when maxRep == 0)
	vals *values // non-null values, in order
	dict *values // dictionary page values, nil until one is read

	buf       *[]byte // chunk bytes [bufOff, bufOff+len(*buf))
	bufOff    int64
	readAhead int     // least bytes one read asks for
	out       *[]byte // decompression buffer, reused per page
	idx       []uint32
	lens      []int64
	lens2     []int64
	// spare: value buffers handed back by Recycle, for the next windows.
	spare spareValues
	// bufs, when set (ReadColumnInto): where buffers are taken from and
	// handed back to.
	bufs *Buffers
	none []byte // the decompression buffer of an uncompressed chunk: never used
	tail []byte // a page decompressed in the values' memory (plainTail)
}

// Read sizes: ReadColumn reads at least wholeReadAhead bytes at a time (so
// small pages take one read for several); a ColumnReader reads each page
// header (headerProbe bytes, with what follows) and the rest of its body,
// and holds no read buffer between windows, so many readers open at once
// (a wide row group read in windows) hold no more than their pages.
const (
	columnReadAhead = 0
	wholeReadAhead  = 1 << 20
)

// ColumnReader returns a reader of the column chunk of col in row group
// rowGroup, positioned before its first row. col must come from this File.
// Errors are ReadColumn's that can be told without reading pages (a row
// group out of range, a column of another schema, an unsupported column,
// a chunk over Limits.MaxChunkBytes), as an *Error.
func (f *File) ColumnReader(rowGroup int, col ColumnInfo) (*ColumnReader, error) {
	return f.columnReader(rowGroup, col, false, columnReadAhead)
}

// ColumnReaderDict is ColumnReader in ReadColumnDict's dictionary form:
// each window of a non-repeated BYTE_ARRAY chunk comes back in dictionary
// form when every value it holds is dictionary encoded (and at least one
// is), else in the plain form; once a page falls back from dictionary
// encoding, the windows after it are plain. The values are the same
// either way.
func (f *File) ColumnReaderDict(rowGroup int, col ColumnInfo) (*ColumnReader, error) {
	return f.columnReader(rowGroup, col, true, columnReadAhead)
}

// locateChunk returns the error context of column col in row group
// rowGroup of f (page, row and offset unknown), and an *Error (RowGroup -1
// for a row group out of range; wrapping ErrNotFound for a column that is
// not the leaf col.Index of f's schema) when they name no column chunk.
func (f *File) locateChunk(rowGroup int, col ColumnInfo) (Error, error) {
	base := Error{File: f.path, Column: col.Name, RowGroup: rowGroup, Page: -1, Row: -1, Offset: -1}
	fail := func(err error) (Error, error) {
		e := base
		e.Err = err
		return base, &e
	}
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) {
		base.RowGroup = -1
		return fail(fmt.Errorf("row group %d out of range [0, %d)", rowGroup, len(f.meta.RowGroups)))
	}
	if col.Index < 0 || col.Index >= len(f.leaves) || !equalStrings(f.leaves[col.Index].info.Path, col.Path) {
		return fail(fmt.Errorf("%w: column is not leaf %d of this file's schema", ErrNotFound, col.Index))
	}
	return base, nil
}

func (f *File) columnReader(rowGroup int, col ColumnInfo, dictForm bool, readAhead int) (*ColumnReader, error) {
	base, err := f.locateChunk(rowGroup, col)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ColumnReader, error) {
		e := base
		e.Err = err
		return nil, &e
	}
	l := f.leaves[col.Index]
	if l.unsupported != nil {
		return fail(l.unsupported)
	}
	rg := &f.meta.RowGroups[rowGroup]
	cc := &rg.Columns[col.Index]
	if cc.FilePath != "" {
		return fail(unsupportedf("column chunk stored in another file (%q)", cc.FilePath))
	}
	if cc.CryptoMetadata.Value != nil || len(cc.EncryptedColumnMetadata) > 0 {
		return fail(unsupportedf("encrypted column chunk"))
	}
	md := &cc.MetaData
	r := &ColumnReader{f: f, l: l, md: md, rg: rowGroup, rgRows: rg.NumRows, codec: md.Codec,
		maxDef: l.info.MaxDef, maxRep: l.info.MaxRep, dictForm: dictForm, page: -1, readAhead: readAhead}
	if md.NumValues == 0 {
		// Nothing to read (Open did not check this chunk's byte range).
		r.base, r.ended = base, true
		r.vals = newValues(l.info.Kind, l.width, 0)
		return r, nil
	}
	start, n := chunkRange(md)
	base.Offset = start
	if n > f.lim.MaxChunkBytes {
		return fail(limitf("column chunk of %d bytes exceeds the limit of %d", n, f.lim.MaxChunkBytes))
	}
	r.base, r.start, r.size = base, start, n
	return r, nil
}

// Rows returns the rows the reader has not returned yet.
func (r *ColumnReader) Rows() int64 { return r.rgRows - r.done }

// Next returns the next n rows (n >= 1; fewer when fewer are left) of the
// column chunk as a Column whose row 0 is the first row not returned
// before, and io.EOF once every row was returned. The window that ends the
// row group decodes the chunk to its end and makes the whole-chunk checks
// first. Errors are ReadColumn's, rows numbered within the row group; the
// first is returned again by every later call.
func (r *ColumnReader) Next(n int) (*Column, error) {
	return r.NextWithin(n, 0)
}

// NextWithin is Next bounded by level entries as well as by rows: it
// returns the next rows, at most n, as many as hold at most entries level
// entries together (a list's value slots, its null and empty list markers
// included), and always at least one row, so that a row of more entries
// than entries comes back alone. entries <= 0 bounds nothing (Next). For
// a column without repetition levels a row is one entry. Between calls
// the reader holds, beside the rest of the last page decoded, at most
// about entries level entries and one page more. Errors are Next's.
func (r *ColumnReader) NextWithin(n int, entries int64) (*Column, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.closed {
		return nil, io.EOF
	}
	if n < 1 {
		return nil, fmt.Errorf("pqread: ColumnReader.Next(%d): want at least one row", n)
	}
	m := min(int64(n), r.rgRows-r.done)
	if entries > 0 && r.maxRep == 0 {
		m, entries = min(m, entries), 0
	}
	c, err := r.window(m, max(0, entries))
	if err == nil && c.Rows == 0 {
		return nil, io.EOF // a row group without rows
	}
	return c, err
}

// Peek returns the rows NextWithin(n, entries) would return now, taking
// none of them: it decodes the pages NextWithin would, and the reader
// holds them for the next call. NextWithin(m, entries) with m at most
// the rows Peek returned then returns exactly m rows without decoding
// further, so several readers of one row group can agree on the rows of a
// window before any of them assembles it. It returns 0 and io.EOF once
// every row was returned. Errors are Next's decode errors (a fault found
// while assembling rows is returned by the NextWithin that takes them).
func (r *ColumnReader) Peek(n int, entries int64) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.closed || r.rgRows == r.done {
		return 0, io.EOF
	}
	if n < 1 {
		return 0, fmt.Errorf("pqread: ColumnReader.Peek(%d): want at least one row", n)
	}
	m := min(int64(n), r.rgRows-r.done)
	if entries > 0 && r.maxRep == 0 {
		m, entries = min(m, entries), 0
	}
	budget := max(0, entries)
	if err := r.fill(m, budget); err != nil {
		return 0, err
	}
	r.release() // the read buffers, as between windows
	if budget > 0 {
		m = r.rowsWithin(m, budget)
	}
	return int(m), nil
}

// Held returns the level entries the reader holds decoded and not yet
// returned (for a list column, its slots and null and empty list markers;
// a page decoded ahead of the rows returned so far is held here).
func (r *ColumnReader) Held() int64 {
	if r.vals == nil {
		return 0
	}
	return int64(r.kept())
}

// OnPage sets f, called by NextWithin and Peek with an entries bound
// before they decode a data page that takes the level entries held past
// it (a window's last page, or a page of a row longer than the bound,
// which comes back alone): held is the level entries held, page the
// page's (its header's count), so that held+page bound what the reader
// holds once the page is decoded. f is called once the page's header is
// read, before its body is, so it may block, to account for that memory
// before it is taken, or fail: the read then fails with f's error as with
// a decode error (an *Error naming the page and its offset, sticky). f
// nil calls nothing.
func (r *ColumnReader) OnPage(f func(held, page int64) error) { r.onPage = f }

// Close releases the reader's buffers. It is safe to call more than once;
// a closed reader's Next fails.
func (r *ColumnReader) Close() {
	r.release()
	giveT(r.bufs, uint32sOf, r.idx)
	r.defs, r.reps, r.vals, r.dict, r.idx, r.tail = nil, nil, nil, nil, nil, nil
	r.spare = spareValues{}
	if r.err == nil && !r.closed {
		r.err = errors.New("pqread: ColumnReader used after Close")
	}
}

// release returns the read and decompression buffers to the pool.
func (r *ColumnReader) release() {
	if r.buf != nil {
		r.putBuf(r.buf)
		r.buf = nil
	}
	if r.out != nil {
		r.putBuf(r.out)
		r.out = nil
	}
}

// getBuf returns a buffer of length n (contents unspecified): from
// r.bufs when set, else from the pool.
func (r *ColumnReader) getBuf(n int) *[]byte {
	if r.bufs == nil {
		return getBuf(n)
	}
	b := takeT(r.bufs, uint8sOf, n, n)[:n]
	return &b
}

// putBuf hands back a buffer of getBuf.
func (r *ColumnReader) putBuf(b *[]byte) {
	if r.bufs == nil {
		putBuf(b)
		return
	}
	giveT(r.bufs, uint8sOf, *b)
}

// window decodes pages until the next n rows are complete (all of them,
// to the chunk's end, when they end the row group) and returns them; with
// budget > 0 (list columns only), it stops once the entries held pass
// budget with the first row complete, and returns the rows of those that
// fit it (rowsWithin).
func (r *ColumnReader) window(n, budget int64) (c *Column, err error) {
	defer func() {
		if p := recover(); p != nil {
			e := r.base
			e.Page, e.Offset = r.page, r.pageOff
			e.Err = corruptf("panic while decoding: %v", p)
			c, err = nil, &e
			r.err = err
			r.release()
		}
	}()
	if err := r.decodeFor(n, budget); err != nil {
		return nil, err
	}
	if budget > 0 {
		n = r.rowsWithin(n, budget)
	}
	r.want, r.most = n, max(r.most, n)
	last := r.done+n == r.rgRows
	r.release()
	if c, err = r.take(n); err != nil {
		// ReadColumn decodes every page before it assembles rows, so a
		// damaged page further on comes before this window's fault: read
		// on to the chunk's end for one.
		if perr := r.drain(); perr != nil {
			return nil, perr
		}
		e := r.base
		return nil, r.fail(&e, err)
	}
	if last {
		r.closed = true
	}
	return c, nil
}

// fill is window's decoding for Peek, recovering a panic as window
// does.
func (r *ColumnReader) fill(n, budget int64) (err error) {
	defer func() {
		if p := recover(); p != nil {
			e := r.base
			e.Page, e.Offset = r.page, r.pageOff
			e.Err = corruptf("panic while decoding: %v", p)
			err = &e
			r.err = err
			r.release()
		}
	}()
	return r.decodeFor(n, budget)
}

// decodeFor decodes pages until the next n rows are complete (all of
// them, to the chunk's end, when they end the row group), or, with budget
// > 0, until the entries held pass budget with the first row complete.
func (r *ColumnReader) decodeFor(n, budget int64) error {
	r.want, r.budget = n, budget
	last := r.done+n == r.rgRows
	if r.vals == nil {
		r.alloc(n)
	}
	for !r.ended && (last || !r.complete(r.done+n)) {
		if budget > 0 && int64(r.kept()) > budget && r.complete(r.done+1) {
			break // enough entries held: the rows that fit budget go
		}
		if err := r.stepPage(); err != nil {
			return err
		}
	}
	return nil
}

// stepPage decodes the next page and notes whether the chunk has ended; a
// page error is located at that page and recorded (fail).
func (r *ColumnReader) stepPage() error {
	if err := r.nextPage(); err != nil {
		e := r.base
		e.Page, e.Offset = r.page, r.pageOff
		return r.fail(&e, err)
	}
	r.ended = r.pos >= r.size || r.entries >= r.md.NumValues
	return nil
}

// drain decodes the pages left, dropping their entries page by page, and
// returns the first page error (located), or nil.
func (r *ColumnReader) drain() error {
	for !r.ended {
		r.vals = newValues(r.l.info.Kind, r.l.width, 0)
		if r.defs != nil {
			r.defs = r.defs[:0]
		}
		if r.reps != nil {
			r.reps = r.reps[:0]
		}
		if err := r.stepPage(); err != nil {
			return err
		}
	}
	return nil
}

// fail records err, located by e (its row lifted from a rowError), as the
// reader's error and returns it.
func (r *ColumnReader) fail(e *Error, err error) error {
	var re *rowError
	if errors.As(err, &re) {
		e.Row = re.row + r.rowBase
	}
	e.Err = err
	r.err = e
	r.release()
	return e
}

// complete reports whether the rows before row want are all decoded: for
// a list column, row want has started (the row before it may go on in a
// later page until then).
func (r *ColumnReader) complete(want int64) bool {
	if r.maxRep > 0 {
		return r.rows > want
	}
	return r.rows >= want
}

// Recycle hands r the buffers of c, a Column that r or another reader
// returned and that the caller is done with (c and every slice taken from
// it): the windows r decodes next store their values, or dictionary
// indices, in c's where these have room for a window, instead of in memory
// allocated for each window (fresh memory costs a page fault a page). The
// dictionary entries are not taken (the windows of a chunk share them).
// c must not be used after; nil does nothing.
func (r *ColumnReader) Recycle(c *Column) {
	if c == nil {
		return
	}
	sp := &r.spare
	keep(&sp.b, c.Bool)
	keep(&sp.i32, c.Int32)
	keep(&sp.i64, c.Int64)
	keep(&sp.f32, c.Float32)
	keep(&sp.f64, c.Float64)
	keep(&sp.idx, c.DictIndex)
	*c = Column{}
}

// spareValues holds value buffers handed back by Recycle, at most one of
// each type.
type spareValues struct {
	b   []bool
	i32 []int32
	i64 []int64
	f32 []float32
	f64 []float64
	idx []uint32
}

// keep sets *dst to s when s has more room.
func keep[T any](dst *[]T, s []T) {
	if cap(s) > cap(*dst) {
		*dst = s[:0]
	}
}

// reuse returns *s emptied when it has room for n, taking it from the
// spares, and otherwise a new slice of capacity n (s nil: no spare).
func reuse[T sysmem.Plain](s *[]T, n int) []T {
	return reuseOr(s, n, n)
}

// reuseOr is reuse that makes a new slice of capacity alloc (>= n): room
// for the next requests, which vary, to take it again.
func reuseOr[T sysmem.Plain](s *[]T, n, alloc int) []T {
	if s != nil && cap(*s) >= n && cap(*s) > 0 {
		v := (*s)[:0]
		*s = nil
		return v
	}
	return sysmem.MakeHuge[T](0, alloc)
}

// reuseFrom is reuse that, without a spare, takes a buffer from b (nil:
// allocates).
func reuseFrom[T sysmem.Plain](s *[]T, b *Buffers, list func(*Buffers) *[][]T, n int) []T {
	if cap(*s) >= n && cap(*s) > 0 {
		v := (*s)[:0]
		*s = nil
		return v
	}
	return takeT(b, list, n, n)
}

// newWindowValues is newValues for a window's values of capacity hint,
// taking a spare buffer where one has room.
func (r *ColumnReader) newWindowValues(hint int) *values {
	kind, sp := r.l.info.Kind, &r.spare
	v := &values{kind: kind, width: r.l.width}
	switch kind {
	case KindBool:
		v.b = reuseFrom(&sp.b, r.bufs, boolsOf, hint)
	case KindInt32:
		v.i32 = reuseFrom(&sp.i32, r.bufs, int32sOf, hint)
	case KindInt64:
		v.i64 = reuseFrom(&sp.i64, r.bufs, int64sOf, hint)
	case KindFloat32:
		v.f32 = reuseFrom(&sp.f32, r.bufs, float32sOf, hint)
	case KindFloat64:
		v.f64 = reuseFrom(&sp.f64, r.bufs, float64sOf, hint)
	default:
		return newValues(kind, r.l.width, hint)
	}
	return v
}

// alloc makes the entry buffers for a window of n rows. The footer's
// counts are trusted for preallocation only as far as the chunk's size
// makes plausible; append grows beyond that if the data needs it.
func (r *ColumnReader) alloc(n int64) {
	hint := int(r.entryHint(n))
	if r.dictForm && r.l.info.Kind == KindBytes && r.maxRep == 0 {
		// Indexed values: room for the indices, none for the copied
		// bytes' offsets (a fallback page grows them, unindex).
		r.vals = &values{kind: KindBytes, width: r.l.width, indexed: true, idx: reuseFrom(&r.spare.idx, r.bufs, uint32sOf, hint), offs: []int64{0}}
	} else {
		r.vals = r.newWindowValues(hint)
	}
	if r.maxDef > 0 {
		r.defs = takeT(r.bufs, uint8sOf, hint, hint)
	}
	if r.maxRep > 0 {
		r.reps = takeT(r.bufs, uint8sOf, hint, hint)
	}
}

// entryHint estimates the level entries of n rows, bounded by the chunk's
// value count and size.
func (r *ColumnReader) entryHint(n int64) int64 {
	hint := r.md.NumValues
	if r.maxRep == 0 && hint > r.rgRows {
		hint = r.rgRows
	}
	hint = max(0, min(hint, 64*r.size+1024))
	per := int64(1)
	if r.maxRep > 0 && r.rgRows > 0 {
		per = r.md.NumValues/r.rgRows + 1
	}
	// The window's entries, and room for the page that ends it (the
	// largest page so far, or an eighth more before the first); hint
	// bounds them, so a hostile count cannot overflow the product.
	if n > 0 && per <= hint/n {
		want := n * per
		slack := r.pageMax
		if slack == 0 {
			slack = want / 8
		}
		hint = min(hint, want+min(slack, hint)+1024)
	}
	if r.budget > 0 {
		// Windows bounded in entries: room for one, and a page more
		// (append grows them for a row longer than that).
		hint = min(hint, r.budget+min(r.pageMax, r.budget)+1024)
	}
	return hint
}

// chunkBytes returns the chunk's bytes [off, off+n), reading them into the
// read buffer when they are not there (with what follows, up to the read
// size). A short read fails with ErrChanged.
func (r *ColumnReader) chunkBytes(off, n int64) ([]byte, error) {
	if r.buf != nil && off >= r.bufOff && off+n <= r.bufOff+int64(len(*r.buf)) {
		return (*r.buf)[off-r.bufOff : off-r.bufOff+n], nil
	}
	want := min(max(n, int64(r.readAhead)), r.size-off)
	keep := int64(0) // bytes of the old buffer from off on, moved to the front
	var old []byte
	if r.buf != nil && off >= r.bufOff && off < r.bufOff+int64(len(*r.buf)) {
		old = (*r.buf)[off-r.bufOff:]
		keep = int64(len(old))
	}
	if r.buf == nil || int64(cap(*r.buf)) < want {
		nb := r.getBuf(int(want))
		copy(*nb, old)
		if r.buf != nil {
			r.putBuf(r.buf)
		}
		r.buf = nb
	} else {
		*r.buf = (*r.buf)[:want]
		copy(*r.buf, old)
	}
	r.bufOff = off
	if err := readFull(r.f.in, (*r.buf)[keep:want], r.start+off+keep); err != nil {
		r.putBuf(r.buf)
		r.buf = nil
		return nil, fmt.Errorf("reading column chunk: %w", err)
	}
	return (*r.buf)[:n], nil
}

// bufPool recycles read and decompression buffers between reads (decoded
// values are always copied out of them).
var bufPool sync.Pool // *[]byte

// getBuf returns a buffer of length n (contents unspecified).
func getBuf(n int) *[]byte {
	if b, ok := bufPool.Get().(*[]byte); ok {
		if cap(*b) >= n {
			*b = (*b)[:n]
			return b
		}
		bufPool.Put(b)
	}
	b := sysmem.MakeHuge[byte](n, n)
	return &b
}

func putBuf(b *[]byte) {
	if cap(*b) > 0 && cap(*b) <= 1<<30 {
		bufPool.Put(b)
	}
}
