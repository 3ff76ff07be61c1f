package pqread

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/bits"
	"runtime/debug"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// ReadColumn decodes the column chunk of col in row group rowGroup. col must
// come from this File (Columns or Lookup); a ColumnInfo of another file with
// a different schema is rejected rather than read by index.
//
// Checks made while decoding, each failing with an *Error that names the
// file, column, row group and, where known, page, row and file offset:
// column chunk size against Limits.MaxChunkBytes; each page header parses
// and its sizes fit the chunk and Limits.MaxPageBytes; page CRCs when
// present; decompressed sizes exactly as declared; levels within their
// maximum; values present for every non-null slot and no bytes left over;
// dictionary indices in range; BYTE_ARRAY lengths within
// Limits.MaxValueBytes (naming the row); the rows decoded equal the row
// group's row count. ReadColumn is safe for concurrent use.
func (f *File) ReadColumn(rowGroup int, col ColumnInfo) (c *Column, err error) {
	return f.readColumn(rowGroup, col, false, nil)
}

// ReadColumnDict is ReadColumn, except that a non-repeated BYTE_ARRAY
// column chunk whose data pages are all dictionary encoded comes back in
// dictionary form (Column.DictIndex, DictData, DictOffsets; Data and
// ByteOffsets nil): the values are not copied out of the dictionary once per
// row, so a consumer can work per dictionary entry (hash each string once).
// Other chunks, including one that falls back from dictionary to PLAIN
// pages part way, come back exactly as from ReadColumn. Checks and errors
// are ReadColumn's.
func (f *File) ReadColumnDict(rowGroup int, col ColumnInfo) (c *Column, err error) {
	return f.readColumn(rowGroup, col, true, nil)
}

// RowRange selects the rows [Lo, Hi) of a row group for ReadColumnRows.
type RowRange struct {
	Lo, Hi int
	// Rest decodes and checks the pages after row Hi as well, dropping
	// their values, so that the checks made over the whole column chunk
	// are made (see ReadColumnRows).
	Rest bool
	// Dict asks for ReadColumnDict's dictionary form.
	Dict bool
}

// ReadColumnRows is ReadColumn (ReadColumnDict with rr.Dict) for the rows
// [rr.Lo, rr.Hi) of the row group only: the Column holds rr.Hi-rr.Lo rows
// and equals ReadColumn(...).Slice(rr.Lo, rr.Hi), but no more than those
// rows' values and levels plus about one page's are held at a time. The
// pages are read in order from the chunk's first, the values and levels of
// rows before rr.Lo dropped after each page, and those of rows from rr.Hi
// on dropped as they come. So a column chunk that decodes to more memory
// than the caller can hold is read in row slices.
//
// Without rr.Rest, a data page all of whose rows come before rr.Lo is
// passed over after its CRC check without decoding its values: its rows
// are counted from its header, or for a list column from its repetition
// levels alone (a V1 page is decompressed for them); the dictionary form
// (rr.Dict) decodes such pages in full. Reading stops after the page in
// which row rr.Hi starts. So the checks that need every page or the whole
// chunk (each page's values; the rows decoded equal the row group's row
// count) are made only by a read that decodes the chunk to its end: with
// rr.Rest, which decodes every page as ReadColumn does. Errors are
// ReadColumn's, rows numbered within the row group; a range outside
// 0 <= Lo < Hi <= rows is an error.
//
// With rr.Dict, the form follows the pages the read decodes: the
// dictionary form when every value they hold is dictionary encoded and at
// least one is, else the plain form; so for a chunk whose encodings
// change, or whose range holds only nulls, the form may differ from
// ReadColumnDict's, the values being the same.
func (f *File) ReadColumnRows(rowGroup int, col ColumnInfo, rr RowRange) (*Column, error) {
	return f.readColumn(rowGroup, col, rr.Dict, &rr)
}

func (f *File) readColumn(rowGroup int, col ColumnInfo, dictForm bool, rr *RowRange) (c *Column, err error) {
	base := Error{File: f.path, Column: col.Name, RowGroup: rowGroup, Page: -1, Row: -1, Offset: -1}
	fail := func(err error) (*Column, error) {
		e := base
		var re *rowError
		if errors.As(err, &re) {
			e.Row = re.row
		}
		e.Err = err
		return nil, &e
	}
	if rowGroup < 0 || rowGroup >= len(f.meta.RowGroups) {
		base.RowGroup = -1
		return fail(fmt.Errorf("row group %d out of range [0, %d)", rowGroup, len(f.meta.RowGroups)))
	}
	if col.Index < 0 || col.Index >= len(f.leaves) || !equalStrings(f.leaves[col.Index].info.Path, col.Path) {
		return fail(fmt.Errorf("%w: column is not leaf %d of this file's schema", ErrNotFound, col.Index))
	}
	l := f.leaves[col.Index]
	if l.unsupported != nil {
		return fail(l.unsupported)
	}
	rg := &f.meta.RowGroups[rowGroup]
	if rr != nil && (rr.Lo < 0 || rr.Lo >= rr.Hi || int64(rr.Hi) > rg.NumRows) {
		return fail(fmt.Errorf("row range [%d, %d) outside the row group's %d rows", rr.Lo, rr.Hi, rg.NumRows))
	}
	cc := &rg.Columns[col.Index]
	if cc.FilePath != "" {
		return fail(unsupportedf("column chunk stored in another file (%q)", cc.FilePath))
	}
	if cc.CryptoMetadata.Value != nil || len(cc.EncryptedColumnMetadata) > 0 {
		return fail(unsupportedf("encrypted column chunk"))
	}
	md := &cc.MetaData
	if md.NumValues == 0 {
		// Nothing to read (Open did not check this chunk's byte range).
		r := &chunkReader{f: f, l: l, md: md, rg: rowGroup, rgRows: rg.NumRows, maxDef: l.info.MaxDef, maxRep: l.info.MaxRep}
		r.setRange(rr)
		r.vals = newValues(l.info.Kind, l.width, 0)
		if c, err = r.assemble(); err != nil {
			return fail(err)
		}
		return c, nil
	}
	start, n := chunkRange(md)
	base.Offset = start
	if n > f.lim.MaxChunkBytes {
		return fail(limitf("column chunk of %d bytes exceeds the limit of %d", n, f.lim.MaxChunkBytes))
	}
	var fd io.ReaderAt = f.in
	var mapped []byte
	if f.in == nil {
		fd, mapped, err = f.handle()
	}
	if err != nil {
		return fail(err)
	}
	var src []byte
	if mapped != nil && start >= 0 && start+n <= int64(len(mapped)) {
		// Straight from the mapping. A fault there (the file shrank since it
		// was mapped) becomes a panic, reported as ErrCorrupt below.
		src = mapped[start : start+n : start+n]
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		// Once decoded, the chunk's pages leave the resident set (the page
		// cache keeps them), so a large file read chunk by chunk does not
		// grow the process by its size.
		defer dropMapped(mapped, start, n)
	} else {
		buf := getBuf(int(n))
		defer putBuf(buf)
		if _, err := fd.ReadAt(*buf, start); err != nil && err != io.EOF {
			return fail(fmt.Errorf("reading column chunk: %w", err))
		}
		src = *buf
	}
	out := getBuf(0)
	defer putBuf(out)
	r := &chunkReader{out: (*out)[:0],
		f: f, l: l, md: md, rg: rowGroup, rgRows: rg.NumRows, start: start, codec: md.Codec,
		maxDef: l.info.MaxDef, maxRep: l.info.MaxRep, dictForm: dictForm,
	}
	r.page = -1
	r.setRange(rr)
	defer func() {
		if p := recover(); p != nil {
			e := base
			e.Page, e.Offset = r.page, r.pageOff
			e.Err = corruptf("panic while decoding: %v", p)
			c, err = nil, &e
		}
	}()
	if err := r.read(src); err != nil {
		base.Page, base.Offset = r.page, r.pageOff
		return fail(err)
	}
	*out = r.out
	r.restore()
	if c, err = r.assemble(); err != nil {
		return fail(err)
	}
	return c, nil
}

// chunkReader decodes the pages of one column chunk.
type chunkReader struct {
	f      *File
	l      *leaf
	md     *format.ColumnMetaData
	rg     int // row group index
	rgRows int64
	start  int64
	codec  format.CompressionCodec
	maxDef int
	maxRep int

	page    int   // index of the page being decoded (-1 before the first)
	pageOff int64 // file offset of its header

	entries int64   // level entries (value slots incl. nulls and empty lists) so far
	rows    int64   // rows started so far
	defs    []uint8 // chunk-wide definition levels (nil when maxDef == 0)
	reps    []uint8 // chunk-wide repetition levels (nil when maxRep == 0)
	vals    *values // non-null values, in order
	dict    *values // dictionary page values, nil until one is read

	dictForm bool // keep dictionary indices of BYTE_ARRAY values (ReadColumnDict)

	out   []byte   // decompression buffer, reused per page
	idx   []uint32 // dictionary indices, reused per page
	lens  []int64  // delta lengths, reused per page
	lens2 []int64

	// Row range (ReadColumnRows): only the entries of rows [lo, hi) are
	// kept. The kept entries (defs, reps, vals) start at row base. The
	// chunk-wide comments above then speak of the entries kept.
	ranged  bool
	lo, hi  int64
	rest    bool  // read on after row hi, dropping the values
	base    int64 // row of the first kept entry
	stopped bool  // the read ended at row hi, before the chunk's end
	// held keeps the entries of rows [lo, hi) while rest reads on into
	// fresh ones, which are dropped page by page.
	held     *chunkReader
	marks    []pageMark
	contLead bool    // the entries held begin inside row base (skipPage)
	skipReps []uint8 // repetition levels of a page skipPage passes over
	// skipping: only the values [skipLo, skipHi) of the page being
	// decoded are in the rows asked for (setSkip).
	skipping       bool
	skipLo, skipHi int
}

func (r *chunkReader) setRange(rr *RowRange) {
	if rr != nil {
		r.ranged, r.lo, r.hi, r.rest = true, int64(rr.Lo), int64(rr.Hi), rr.Rest
	}
}

// kept returns the number of level entries held.
func (r *chunkReader) kept() int {
	switch {
	case r.maxRep > 0:
		return len(r.reps)
	case r.maxDef > 0:
		return len(r.defs)
	}
	return r.vals.n()
}

// valuesBefore returns the number of non-null values among the first e
// entries held.
func (r *chunkReader) valuesBefore(e int) int {
	if r.maxDef == 0 {
		return e
	}
	return countLevel(r.defs[:e], uint8(r.maxDef))
}

// rowStart returns the index among the entries held of the start of the
// row that is k rows after the first held (k >= 0 and that row started).
// When the entries held begin inside row base (contLead, after skipPage),
// that row counts as starting at entry 0.
func (r *chunkReader) rowStart(k int) int {
	if r.maxRep == 0 {
		return k
	}
	if r.contLead {
		if k == 0 {
			return 0
		}
		k--
	}
	for i, rp := range r.reps {
		if rp == 0 {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return len(r.reps)
}

// restore puts back the entries held while the read went on past row hi.
// A page after the range that fell back from dictionary encoding ends the
// dictionary form of the whole chunk, as it does for a whole read.
func (r *chunkReader) restore() {
	if h := r.held; h != nil {
		if h.vals.indexed && !r.vals.indexed {
			h.vals.unindex()
		} else if h.vals.indexed && h.vals.dict == nil {
			h.vals.dict = r.vals.dict // the first dictionary-encoded value came after the range
		}
		r.vals, r.defs, r.reps, r.held = h.vals, h.defs, h.reps, nil
	}
}

// pageMark is a point where a ranged read may resume decoding a column
// chunk instead of reading it from its first page: the state before the
// data page whose header is at byte pos of the chunk, page index page.
type pageMark struct {
	pos     int
	page    int
	rows    int64 // rows started before the page
	entries int64 // level entries before the page
	dict    bool  // a dictionary page came before the page
}

// markKey names a column chunk's marks: its file offset, row group and
// leaf column (a hostile footer may point two chunks at the same bytes).
type markKey struct {
	start   int64
	rg, col int
}

// markGap is the least distance in chunk bytes between two marks kept, so
// a chunk keeps one mark per page of large pages and one per markGap of
// small ones; a read that resumes at a mark then passes over (skipPage) at
// most about markGap bytes of pages before its rows. (A variable for tests.)
var markGap = 256 << 10

// mark notes the state before the data page at byte pos of the chunk.
func (r *chunkReader) mark(pos int) {
	if n := len(r.marks); n == 0 || pos-r.marks[n-1].pos >= markGap {
		r.marks = append(r.marks, pageMark{pos: pos, page: r.page, rows: r.rows, entries: r.entries, dict: r.dict != nil})
	}
}

// resume moves the read to mark m: the entries held are dropped (they are
// of rows before m, all before lo), and for a list column the held entries
// then begin inside the last row started before m, which may go on in m's
// page.
func (r *chunkReader) resume(m *pageMark) {
	r.keepEntries(0, 0, 0, 0)
	r.page, r.rows, r.entries = m.page-1, m.rows, m.entries
	r.base, r.contLead = m.rows, false
	if r.maxRep > 0 {
		r.base, r.contLead = m.rows-1, true
	}
}

// findMark returns the last mark of chunk k before which no row at or
// after lo started, if it is past the first data page.
func (f *File) findMark(k markKey, lo int64) *pageMark {
	f.marksMu.Lock()
	defer f.marksMu.Unlock()
	var best *pageMark
	for i := range f.marks[k] {
		if m := f.marks[k][i]; m.rows > 0 && m.rows <= lo {
			best = &m
		}
	}
	return best
}

// addMarks merges the marks of a read of chunk k into the file's; a read
// that reached the chunk's end drops them instead, since the ranged reads
// of a chunk go in row order and the last reads to its end.
func (f *File) addMarks(k markKey, marks []pageMark, end bool) {
	f.marksMu.Lock()
	defer f.marksMu.Unlock()
	if end {
		delete(f.marks, k)
		return
	}
	if len(marks) == 0 {
		return
	}
	if f.marks == nil {
		f.marks = map[markKey][]pageMark{}
	}
	all := append(f.marks[k], marks...)
	slices.SortFunc(all, func(a, b pageMark) int { return a.pos - b.pos })
	f.marks[k] = slices.CompactFunc(all, func(a, b pageMark) bool { return a.pos == b.pos })
}

// skipPage passes over a data page all of whose rows come before lo without
// decoding its values: a column without repetition counts its rows from the
// page header; a list column decodes only the page's repetition levels
// (decompressing a V1 page for them). The entries held, all of rows before
// lo, are dropped. It reports false, having changed nothing, when the page
// holds a row at or after lo or anything about it is amiss, leaving the
// full decode to read it or report it. Only reads without Rest skip, so
// that a read with Rest checks every page as ReadColumn does.
func (r *chunkReader) skipPage(h *format.PageHeader, body []byte, us int) (bool, error) {
	var n int
	var levels []byte // a V2 page's repetition levels
	v1enc := format.RLE
	switch h.Type {
	case format.DataPage:
		dh, ok := h.DataPageHeader.Get()
		if !ok {
			return false, nil
		}
		n, v1enc = int(dh.NumValues), dh.RepetitionLevelEncoding
	case format.DataPageV2:
		dh, ok := h.DataPageHeaderV2.Get()
		if !ok {
			return false, nil
		}
		n = int(dh.NumValues)
		if rl := int(dh.RepetitionLevelsByteLength); rl >= 0 && rl <= len(body) {
			levels = body[:rl]
		} else if r.maxRep > 0 {
			return false, nil
		}
	default:
		return false, nil
	}
	if n <= 0 || int64(n) > r.f.lim.MaxPageBytes {
		return false, nil
	}
	started := n
	if r.maxRep > 0 {
		r.skipReps = r.skipReps[:0]
		if h.Type == format.DataPage {
			raw, err := decompress(r.codec, &r.out, body, us)
			if err != nil {
				return false, nil
			}
			if _, err := levelsV1(&r.skipReps, raw, v1enc, r.maxRep, n, "repetition"); err != nil {
				return false, nil
			}
		} else if err := levelsHybrid(&r.skipReps, levels, r.maxRep, n, "repetition"); err != nil {
			return false, nil
		}
		if r.entries == 0 && r.skipReps[0] != 0 {
			return false, nil // the full decode reports a chunk starting inside a list
		}
		started = countLevel(r.skipReps, 0)
	}
	if r.rows+int64(started) > r.lo {
		return false, nil
	}
	if err := r.account(n, started); err != nil {
		return false, err
	}
	r.keepEntries(0, 0, 0, 0)
	r.base = r.rows
	if r.maxRep > 0 {
		// The last row started, or the one going on through the page, may
		// go on in the next page: held entries begin inside it.
		r.base, r.contLead = r.rows-1, true
	}
	return true, nil
}

// keepEntries reduces the entries held to [a, b), whose values are the
// values [va, vb) held.
func (r *chunkReader) keepEntries(a, b, va, vb int) {
	r.vals.keep(va, vb)
	if r.defs != nil {
		r.defs = keepT(r.defs, a, b)
	}
	if r.reps != nil {
		r.reps = keepT(r.reps, a, b)
	}
}

// trim applies the row range after a page: it drops the entries of the
// complete rows before lo, and those from the start of row hi on. It
// reports whether the read can stop (rest unset, and rows [lo, hi) all
// complete).
func (r *chunkReader) trim() bool {
	if r.held != nil {
		r.keepEntries(0, 0, 0, 0)
		return false
	}
	if r.base < r.lo {
		done := r.rows // rows started; a list's last one may go on in the next page
		if r.maxRep > 0 {
			done--
		}
		if d := min(r.lo, done) - r.base; d > 0 {
			e := r.rowStart(int(d))
			r.keepEntries(e, r.kept(), r.valuesBefore(e), r.vals.n())
			r.base += d
			r.contLead = false
		}
	}
	if r.rows > r.hi {
		e := r.rowStart(int(r.hi - r.base))
		r.keepEntries(0, e, 0, r.valuesBefore(e))
		if !r.rest {
			return true
		}
		// Read on into fresh entries, so the range's are not grown (and
		// copied) to make room for pages that are dropped.
		r.held = &chunkReader{vals: r.vals, defs: r.defs, reps: r.reps}
		r.vals = &values{kind: r.vals.kind, width: r.vals.width, indexed: r.vals.indexed, dict: r.vals.dict}
		if r.vals.kind == KindBytes {
			r.vals.offs = []int64{0}
		}
		r.defs, r.reps = r.defs[:0:0], r.reps[:0:0] // nil stays nil
	}
	return r.maxRep == 0 && r.rows == r.hi && !r.rest
}

var thriftProto thrift.CompactProtocol

// bufPool recycles column chunk and decompression buffers between
// ReadColumn calls (decoded values are always copied out of them).
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
	b := make([]byte, n)
	return &b
}

func putBuf(b *[]byte) {
	if cap(*b) > 0 && cap(*b) <= 1<<30 {
		bufPool.Put(b)
	}
}

func (r *chunkReader) read(buf []byte) error {
	lim := r.f.lim
	hint := r.md.NumValues
	if r.maxRep == 0 && hint > r.rgRows {
		hint = r.rgRows
	}
	// Trust the footer's counts for preallocation only as far as the chunk's
	// size makes plausible; append grows beyond that if the data needs it.
	hint = max(0, min(hint, 64*int64(len(buf))+1024))
	if r.ranged {
		per := int64(1)
		if r.maxRep > 0 && r.rgRows > 0 {
			per = r.md.NumValues/r.rgRows + 1
		}
		// The range's entries, and slack for the page that ends it (hint
		// bounds them: a hostile count cannot overflow the product).
		if n := r.hi - r.lo; per <= hint/n {
			want := n * per
			hint = min(hint, want+want/8+1024)
		}
	}
	r.vals = newValues(r.l.info.Kind, r.l.width, int(hint))
	r.vals.indexed = r.dictForm && r.vals.kind == KindBytes && r.maxRep == 0
	if r.maxDef > 0 {
		r.defs = make([]uint8, 0, hint)
	}
	if r.maxRep > 0 {
		r.reps = make([]uint8, 0, hint)
	}
	hr := thriftProto.NewReaderFromBytes(nil)
	dec := thrift.NewDecoder(hr)
	pos := 0
	var jump *pageMark
	if r.ranged {
		k := markKey{r.start, r.rg, r.l.info.Index}
		if !r.rest && !r.vals.indexed {
			jump = r.f.findMark(k, r.lo)
		}
		defer func() { r.f.addMarks(k, r.marks, !r.stopped) }()
	}
	for pos < len(buf) && r.entries < r.md.NumValues {
		if jump != nil && r.page >= 0 && (r.dict != nil || !jump.dict) {
			// Past the dictionary page, if one was read before the mark
			// (it is the first page, or in the pages before the mark):
			// go on at the mark.
			if jump.pos > pos {
				r.resume(jump)
				pos = jump.pos
			}
			jump = nil
		}
		r.page++
		r.pageOff = r.start + int64(pos)
		start := pos
		var h format.PageHeader
		hr.ResetBytes(buf[pos:])
		if err := dec.Decode(&h); err != nil {
			return corruptf("page header: %v", err)
		}
		pos += hr.BytesRead()
		if r.ranged && !r.rest && (h.Type == format.DataPage || h.Type == format.DataPageV2) {
			r.mark(start) // a read with Rest reaches the end, which drops the marks
		}
		cs, us := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
		if cs < 0 || us < 0 {
			return corruptf("negative page size (compressed %d, uncompressed %d)", cs, us)
		}
		if cs > lim.MaxPageBytes || us > lim.MaxPageBytes {
			return limitf("page of %d bytes (%d compressed) exceeds the limit of %d", us, cs, lim.MaxPageBytes)
		}
		if cs > int64(len(buf)-pos) {
			return corruptf("page of %d compressed bytes overruns the column chunk (%d bytes left)", cs, len(buf)-pos)
		}
		body := buf[pos : pos+int(cs)]
		pos += int(cs)
		if h.CRC != 0 && int32(crc32.ChecksumIEEE(body)) != h.CRC {
			return corruptf("page checksum mismatch: computed %08x, header says %08x", crc32.ChecksumIEEE(body), uint32(h.CRC))
		}
		if r.ranged && !r.rest && !r.vals.indexed && r.rows < r.lo {
			if skipped, err := r.skipPage(&h, body, int(us)); err != nil {
				return err
			} else if skipped {
				continue
			}
		}
		var err error
		switch h.Type {
		case format.DictionaryPage:
			err = r.dictionaryPage(&h, body, int(us))
		case format.DataPage:
			err = r.dataPageV1(&h, body, int(us))
		case format.DataPageV2:
			err = r.dataPageV2(&h, body, int(us))
		default:
			// Index pages and unknown page types carry no values.
			continue
		}
		if err != nil {
			return err
		}
		if r.ranged && r.trim() {
			r.stopped = pos < len(buf) && r.entries < r.md.NumValues
			return nil
		}
	}
	return nil
}

func (r *chunkReader) checkCount(n int32) error {
	if n < 0 {
		return corruptf("page declares a negative value count (%d)", n)
	}
	if int64(n) > r.f.lim.MaxPageBytes {
		return limitf("page declares %d values, above the limit of %d", n, r.f.lim.MaxPageBytes)
	}
	return nil
}

func (r *chunkReader) dictionaryPage(h *format.PageHeader, body []byte, us int) error {
	dh, ok := h.DictionaryPageHeader.Get()
	if !ok {
		return corruptf("dictionary page without a dictionary page header")
	}
	if r.dict != nil {
		return corruptf("second dictionary page in one column chunk")
	}
	if err := r.checkCount(dh.NumValues); err != nil {
		return err
	}
	if dh.Encoding != format.Plain && dh.Encoding != format.PlainDictionary {
		return unsupportedf("unsupported dictionary page encoding %s", encodingName(dh.Encoding))
	}
	raw, err := decompress(r.codec, &r.out, body, us)
	if err != nil {
		return err
	}
	d := newValues(r.vals.kind, r.vals.width, min(int(dh.NumValues), 8*len(raw)+8))
	if err := r.plain(d, raw, int(dh.NumValues)); err != nil {
		return fmt.Errorf("dictionary: %w", err)
	}
	r.dict = d
	return nil
}

// levelsV1 decodes n levels with maximum max from src in the given encoding
// (V1: RLE with a 4-byte length prefix, or BIT_PACKED), appends them to
// *dst and returns the bytes used.
func levelsV1(dst *[]uint8, src []byte, enc format.Encoding, max, n int, what string) (int, error) {
	switch enc {
	case format.RLE:
		if len(src) < 4 {
			return 0, corruptf("%s levels: %d bytes, need a 4-byte length", what, len(src))
		}
		ln := int64(binary.LittleEndian.Uint32(src))
		if ln > int64(len(src)-4) {
			return 0, corruptf("%s levels: length %d exceeds the %d bytes left", what, ln, len(src)-4)
		}
		return 4 + int(ln), levelsHybrid(dst, src[4:4+ln], max, n, what)
	case format.BitPacked:
		start := len(*dst)
		*dst = grow(*dst, n)
		out := (*dst)[start:]
		used, err := decodeBitPackedLevels(out, src, bitWidth(max))
		if err != nil {
			return 0, corruptf("%s levels: %v", what, err)
		}
		return used, checkLevels(out, max, what)
	}
	return 0, unsupportedf("unsupported %s level encoding %s", what, encodingName(enc))
}

// levelsHybrid decodes n RLE/bit-packed hybrid levels with maximum max from
// src (no length prefix), appends them to *dst and checks them.
func levelsHybrid(dst *[]uint8, src []byte, max, n int, what string) error {
	start := len(*dst)
	*dst = grow(*dst, n)
	out := (*dst)[start:]
	if _, err := decodeHybrid(out, src, bitWidth(max)); err != nil {
		return corruptf("%s levels: %v", what, err)
	}
	return checkLevels(out, max, what)
}

func checkLevels(lv []uint8, max int, what string) error {
	for i, v := range lv {
		if int(v) > max {
			return corruptf("%s level %d at entry %d exceeds the maximum %d", what, v, i, max)
		}
	}
	return nil
}

func (r *chunkReader) dataPageV1(h *format.PageHeader, body []byte, us int) error {
	dh, ok := h.DataPageHeader.Get()
	if !ok {
		return corruptf("data page without a data page header")
	}
	if err := r.checkCount(dh.NumValues); err != nil {
		return err
	}
	n := int(dh.NumValues)
	if r.maxDef == 0 && r.maxRep == 0 { // V1 pages compress their levels with the values
		if ok, err := r.directPlain(dh.Encoding, n, us, body); ok {
			return err
		}
	}
	raw, err := decompress(r.codec, &r.out, body, us)
	if err != nil {
		return err
	}
	p := 0
	if r.maxRep > 0 {
		u, err := levelsV1(&r.reps, raw, dh.RepetitionLevelEncoding, r.maxRep, n, "repetition")
		if err != nil {
			return err
		}
		p += u
	}
	if r.maxDef > 0 {
		u, err := levelsV1(&r.defs, raw[p:], dh.DefinitionLevelEncoding, r.maxDef, n, "definition")
		if err != nil {
			return err
		}
		p += u
	}
	return r.pageValues(dh.Encoding, raw[p:], n)
}

func (r *chunkReader) dataPageV2(h *format.PageHeader, body []byte, us int) error {
	dh, ok := h.DataPageHeaderV2.Get()
	if !ok {
		return corruptf("data page v2 without a data page v2 header")
	}
	if err := r.checkCount(dh.NumValues); err != nil {
		return err
	}
	n := int(dh.NumValues)
	rl, dl := int(dh.RepetitionLevelsByteLength), int(dh.DefinitionLevelsByteLength)
	if rl < 0 || dl < 0 || rl > len(body) || dl > len(body)-rl || rl+dl > us {
		return corruptf("level lengths %d+%d do not fit a page of %d bytes", rl, dl, len(body))
	}
	if r.maxRep > 0 {
		if err := levelsHybrid(&r.reps, body[:rl], r.maxRep, n, "repetition"); err != nil {
			return err
		}
	}
	if r.maxDef > 0 {
		if err := levelsHybrid(&r.defs, body[rl:rl+dl], r.maxDef, n, "definition"); err != nil {
			return err
		}
	}
	src := body[rl+dl:]
	compressed := true
	if v, ok := dh.IsCompressed.Get(); ok {
		compressed = v
	}
	if compressed {
		if ok, err := r.directPlain(dh.Encoding, n, us-rl-dl, src); ok {
			return err
		}
		raw, err := decompress(r.codec, &r.out, src, us-rl-dl)
		if err != nil {
			return err
		}
		src = raw
	}
	return r.pageValues(dh.Encoding, src, n)
}

// directPlain is the fast path for the common case of a compressed PLAIN
// page of fixed-width values: it decompresses the values section (us bytes
// once uncompressed) straight into the column's value memory, saving a
// copy. The page's n level entries, if the column has levels, are already
// appended (data page V2 stores them uncompressed); the values are the
// entries at the maximum definition level. It reports false (having done
// nothing) when the page does not qualify or its size does not match its
// value count, leaving the general path to decode or report it.
func (r *chunkReader) directPlain(enc format.Encoding, n, us int, src []byte) (bool, error) {
	if enc != format.Plain || r.codec == format.Uncompressed || !littleEndian {
		return false, nil
	}
	size := r.vals.valueSize()
	if size == 0 || n == 0 {
		return false, nil
	}
	if r.maxRep > 0 && r.entries == 0 && r.reps[len(r.reps)-n] != 0 {
		return false, nil // the general path reports it
	}
	count := n
	if r.maxDef > 0 {
		count = countLevel(r.defs[len(r.defs)-n:], uint8(r.maxDef))
	}
	if count == 0 || us != count*size {
		return false, nil
	}
	tail := r.vals.growBytes(count)
	b := tail
	out, err := decompress(r.codec, &b, src, us)
	if err != nil {
		r.vals.shrink(count)
		return true, err
	}
	if &out[0] != &tail[0] {
		copy(tail, out)
	}
	return true, r.advance(n)
}

// countLevel returns how many levels in v equal x, eight at a time without
// a branch per level (a data-dependent branch costs far more than the count
// when nulls are scattered).
func countLevel(v []uint8, x uint8) int {
	const lows = 0x7f7f7f7f7f7f7f7f
	pat := uint64(x) * 0x0101010101010101
	n, i := 0, 0
	for ; i+8 <= len(v); i += 8 {
		// t has a zero byte exactly where v's byte equals x; the
		// expression counted sets the high bit of those bytes only.
		t := binary.LittleEndian.Uint64(v[i:]) ^ pat
		if t == 0 {
			n += 8
			continue
		}
		n += bits.OnesCount64(^((t&lows + lows) | t | lows))
	}
	for _, d := range v[i:] {
		if d == x {
			n++
		}
	}
	return n
}

// pageValues decodes the values of a data page whose n level entries were
// just appended.
func (r *chunkReader) pageValues(enc format.Encoding, src []byte, n int) error {
	if r.maxRep > 0 && r.entries == 0 && n > 0 && r.reps[0] != 0 {
		return corruptf("first page starts in the middle of a list (repetition level %d)", r.reps[0])
	}
	count := n
	if r.maxDef > 0 {
		count = countLevel(r.defs[len(r.defs)-n:], uint8(r.maxDef))
	}
	before := r.vals.n()
	if r.ranged && r.vals.kind == KindBytes {
		r.setSkip(n)
		defer func() { r.skipping = false }()
	}
	if err := r.decodeValues(enc, src, count); err != nil {
		var ve *valueError
		if errors.As(err, &ve) {
			return &rowError{row: r.rowOfValue(ve.k, n), err: err}
		}
		return err
	}
	if got := r.vals.n() - before; got != count {
		return corruptf("page decoded %d values, levels need %d", got, count)
	}
	return r.advance(n)
}

// advance accounts for a decoded page of n level entries and checks the
// chunk has not outgrown its limits.
func (r *chunkReader) advance(n int) error {
	started := n
	if r.maxRep > 0 {
		started = countLevel(r.reps[len(r.reps)-n:], 0)
	}
	return r.account(n, started)
}

// account counts a page of n level entries that start started rows, and
// checks the chunk has not outgrown its limits: so a chunk is stopped from
// outgrowing its row group page by page, instead of after decoding
// everything it declares.
func (r *chunkReader) account(n, started int) error {
	r.entries += int64(n)
	r.rows += int64(started)
	if r.rows > r.rgRows {
		return corruptf("column chunk holds more than the row group's %d rows", r.rgRows)
	}
	if r.entries > r.md.NumValues {
		return corruptf("column chunk holds more than the %d values its metadata declares", r.md.NumValues)
	}
	if r.entries > r.f.lim.MaxChunkValues {
		return limitf("column chunk holds more than %d values", r.f.lim.MaxChunkValues)
	}
	return nil
}

// valueError is a failure at value k of the page being decoded.
type valueError struct {
	k   int
	err error
}

func (e *valueError) Error() string { return e.err.Error() }
func (e *valueError) Unwrap() error { return e.err }

// setSkip sets [skipLo, skipHi) to the values of the page being decoded
// (whose n level entries are the last held) that lie in the rows asked
// for; the others are dropped by trim, so appendBytes need not copy them.
func (r *chunkReader) setSkip(n int) {
	r.skipping = true
	if r.maxDef == 0 && r.maxRep == 0 {
		r.skipLo = int(min(max(r.lo-r.rows, 0), int64(n)))
		r.skipHi = int(min(max(r.hi-r.rows, 0), int64(n)))
		return
	}
	row, k := r.rows-1, 0
	r.skipLo, r.skipHi = -1, -1
	for i := len(r.defs) - n; i < len(r.defs); i++ {
		if r.maxRep == 0 || r.reps[i] == 0 {
			row++
		}
		if row >= r.lo && r.skipLo < 0 {
			r.skipLo = k
		}
		if row >= r.hi && r.skipHi < 0 {
			r.skipHi = k
		}
		if int(r.defs[i]) == r.maxDef {
			k++
		}
	}
	if r.skipLo < 0 {
		r.skipLo = k
	}
	if r.skipHi < 0 {
		r.skipHi = k
	}
}

// appendBytes appends BYTE_ARRAY value j of the page being decoded to v,
// or an empty value in its place when it lies outside the rows of a
// ranged read (setSkip), which trim drops anyway.
func (r *chunkReader) appendBytes(v *values, j int, b []byte) {
	if r.skipping && (j < r.skipLo || j >= r.skipHi) {
		b = nil
	}
	v.appendBytes(b)
}

// rowOfValue returns the row (within the row group) holding non-null value
// k of the page being decoded, whose n level entries are the last held and
// not yet counted in r.rows.
func (r *chunkReader) rowOfValue(k, n int) int64 {
	if r.maxDef == 0 && r.maxRep == 0 {
		return r.rows + int64(k)
	}
	row := r.rows - 1 // a page may begin by going on with the last row started
	seen := 0
	for i := len(r.defs) - n; i < len(r.defs); i++ {
		if r.maxRep == 0 || r.reps[i] == 0 {
			row++
		}
		if int(r.defs[i]) == r.maxDef {
			if seen == k {
				return row
			}
			seen++
		}
	}
	return -1
}

func (r *chunkReader) decodeValues(enc format.Encoding, src []byte, count int) error {
	v := r.vals
	typ := r.l.typ
	if v.indexed && count > 0 && enc != format.PlainDictionary && enc != format.RLEDictionary {
		v.unindex() // a fallback page: back to values copied out
	}
	bad := func() error {
		return unsupportedf("unsupported encoding %s for %s", encodingName(enc), physicalName(typ))
	}
	switch enc {
	case format.Plain:
		return r.plain(v, src, count)
	case format.PlainDictionary, format.RLEDictionary:
		if count == 0 {
			return nil
		}
		if r.dict == nil {
			return corruptf("dictionary-encoded page without a dictionary page")
		}
		if len(src) < 1 {
			return corruptf("dictionary indices: empty page")
		}
		bw := uint(src[0])
		if bw > 32 {
			return corruptf("dictionary index bit width %d above 32", bw)
		}
		if cap(r.idx) < count {
			r.idx = make([]uint32, count)
		}
		idx := r.idx[:count]
		if _, err := decodeHybrid(idx, src[1:], bw); err != nil {
			return corruptf("dictionary indices: %v", err)
		}
		dn := uint32(r.dict.n())
		for j, i := range idx {
			if i >= dn {
				return &valueError{k: j, err: corruptf("dictionary index %d out of range (dictionary has %d values)", i, dn)}
			}
		}
		if v.indexed {
			v.idx = append(v.idx, idx...)
			v.dict = r.dict
			return nil
		}
		v.gather(r.dict, idx)
		return nil
	case format.RLE:
		if typ != format.Boolean {
			return bad()
		}
		if count == 0 {
			return nil
		}
		if len(src) < 4 {
			return corruptf("RLE booleans: missing length")
		}
		ln := int64(binary.LittleEndian.Uint32(src))
		if ln > int64(len(src)-4) {
			return corruptf("RLE booleans: length %d exceeds the %d bytes left", ln, len(src)-4)
		}
		tmp := make([]uint8, count)
		if _, err := decodeHybrid(tmp, src[4:4+ln], 1); err != nil {
			return corruptf("RLE booleans: %v", err)
		}
		for _, b := range tmp {
			v.b = append(v.b, b == 1)
		}
		return nil
	case format.DeltaBinaryPacked:
		var bitsW uint
		switch typ {
		case format.Int32:
			bitsW = 32
		case format.Int64:
			bitsW = 64
		default:
			return bad()
		}
		out, used, err := deltaDecode(r.lens[:0], src, count, bitsW)
		r.lens = out
		if err != nil {
			return corruptf("%v", err)
		}
		if used != len(src) {
			return corruptf("DELTA_BINARY_PACKED: %d bytes left over after %d values", len(src)-used, count)
		}
		if bitsW == 32 {
			for _, x := range out {
				v.i32 = append(v.i32, int32(x))
			}
		} else {
			v.i64 = append(v.i64, out...)
		}
		return nil
	case format.DeltaLengthByteArray:
		if typ != format.ByteArray {
			return bad()
		}
		lens, used, err := deltaDecode(r.lens[:0], src, count, 32)
		r.lens = lens
		if err != nil {
			return corruptf("DELTA_LENGTH_BYTE_ARRAY lengths: %v", err)
		}
		p := used
		for j, ln := range lens {
			if err := r.checkLen(j, ln, len(src)-p); err != nil {
				return err
			}
			r.appendBytes(v, j, src[p:p+int(ln)])
			p += int(ln)
		}
		if p != len(src) {
			return corruptf("DELTA_LENGTH_BYTE_ARRAY: %d bytes left over", len(src)-p)
		}
		return nil
	case format.DeltaByteArray:
		if typ != format.ByteArray && typ != format.FixedLenByteArray {
			return bad()
		}
		return r.deltaByteArray(src, count)
	case format.ByteStreamSplit:
		w := 0
		switch typ {
		case format.Float, format.Int32:
			w = 4
		case format.Double, format.Int64:
			w = 8
		case format.FixedLenByteArray:
			w = r.l.width
		default:
			return bad()
		}
		if len(src) != count*w {
			return corruptf("BYTE_STREAM_SPLIT: %d bytes for %d values of %d bytes", len(src), count, w)
		}
		tmp := make([]byte, len(src))
		for i := 0; i < count; i++ {
			for b := 0; b < w; b++ {
				tmp[i*w+b] = src[b*count+i]
			}
		}
		v.appendLE(tmp)
		return nil
	}
	return bad()
}

// checkLen validates the length of BYTE_ARRAY value j of the page against
// the bytes left and Limits.MaxValueBytes.
func (r *chunkReader) checkLen(j int, ln int64, left int) error {
	if ln < 0 {
		return &valueError{k: j, err: corruptf("negative value length %d", ln)}
	}
	if m := r.f.lim.MaxValueBytes; m > 0 && ln > m {
		return &valueError{k: j, err: limitf("value length %d exceeds the limit of %d bytes", ln, m)}
	}
	if ln > int64(left) {
		return &valueError{k: j, err: corruptf("value length %d exceeds the %d bytes left in the page", ln, left)}
	}
	return nil
}

func (r *chunkReader) deltaByteArray(src []byte, count int) error {
	v := r.vals
	pre, u1, err := deltaDecode(r.lens[:0], src, count, 32)
	r.lens = pre
	if err != nil {
		return corruptf("DELTA_BYTE_ARRAY prefix lengths: %v", err)
	}
	suf, u2, err := deltaDecode(r.lens2[:0], src[u1:], count, 32)
	r.lens2 = suf
	if err != nil {
		return corruptf("DELTA_BYTE_ARRAY suffix lengths: %v", err)
	}
	p := u1 + u2
	var prev []byte
	var cur []byte
	for j := range count {
		pl, sl := pre[j], suf[j]
		if pl < 0 || pl > int64(len(prev)) {
			return &valueError{k: j, err: corruptf("DELTA_BYTE_ARRAY prefix length %d exceeds the previous value's %d bytes", pl, len(prev))}
		}
		if err := r.checkLen(j, sl, len(src)-p); err != nil {
			return err
		}
		if err := r.checkLen(j, pl+sl, int(pl)+len(src)-p); err != nil {
			return err
		}
		cur = append(append(cur[:0], prev[:pl]...), src[p:p+int(sl)]...)
		p += int(sl)
		if v.kind == KindBytes {
			r.appendBytes(v, j, cur)
		} else {
			if len(cur) != v.width {
				return &valueError{k: j, err: corruptf("DELTA_BYTE_ARRAY value of %d bytes in a FIXED_LEN_BYTE_ARRAY(%d) column", len(cur), v.width)}
			}
			v.fix = append(v.fix, cur...)
		}
		prev, cur = cur, prev
	}
	if p != len(src) {
		return corruptf("DELTA_BYTE_ARRAY: %d bytes left over", len(src)-p)
	}
	return nil
}

// plain decodes count PLAIN values from src into v; src must hold exactly
// those values.
func (r *chunkReader) plain(v *values, src []byte, count int) error {
	switch v.kind {
	case KindBool:
		need := (count + 7) / 8
		if len(src) < need {
			return corruptf("PLAIN booleans: %d bytes for %d values", len(src), count)
		}
		for i := range count {
			v.b = append(v.b, src[i>>3]>>(uint(i)&7)&1 == 1)
		}
		return nil
	case KindBytes:
		p := 0
		for j := range count {
			if len(src)-p < 4 {
				return &valueError{k: j, err: corruptf("PLAIN BYTE_ARRAY: value %d of %d runs past the page", j, count)}
			}
			ln := int64(binary.LittleEndian.Uint32(src[p:]))
			p += 4
			if err := r.checkLen(j, ln, len(src)-p); err != nil {
				return err
			}
			r.appendBytes(v, j, src[p:p+int(ln)])
			p += int(ln)
		}
		if p != len(src) {
			return corruptf("PLAIN BYTE_ARRAY: %d bytes left over after %d values", len(src)-p, count)
		}
		return nil
	}
	size := v.valueSize()
	if len(src) != count*size {
		return corruptf("PLAIN %s: %d bytes for %d values of %d bytes", physicalName(r.l.typ), len(src), count, size)
	}
	v.appendLE(src)
	return nil
}

// assemble turns the chunk's levels and values into a Column.
func (r *chunkReader) assemble() (*Column, error) {
	c := &Column{Info: r.l.info, Kind: r.vals.kind, Width: r.vals.width}
	nv := r.vals.n()
	if r.maxRep == 0 {
		n := r.kept()
		if err := r.checkRows(int64(n)); err != nil {
			return nil, err
		}
		c.Rows = n
		if r.maxDef == 0 {
			r.vals.fill(c, nil)
			return c, nil
		}
		valid := make([]bool, len(r.defs))
		nulls := 0
		for i, d := range r.defs {
			valid[i] = int(d) == r.maxDef
			if !valid[i] {
				nulls++
			}
		}
		if len(r.defs)-nulls != nv {
			return nil, corruptf("%d values for %d non-null rows", nv, len(r.defs)-nulls)
		}
		if nulls == 0 {
			r.vals.fill(c, nil)
			return c, nil
		}
		c.RowValid = valid
		r.vals.fill(c, valid)
		return c, nil
	}

	dList := r.l.dList
	if r.maxDef > dList && len(r.defs) == len(r.reps) && allLevels(r.defs, uint8(r.maxDef)) {
		return r.assembleDense(c, nv)
	}
	offsets := make([]int64, 0, min(r.wantRows(), int64(len(r.reps)))+1)
	rowValid := make([]bool, 0, cap(offsets))
	elemValid := make([]bool, 0, len(r.defs))
	rowNulls, elemNulls := false, false
	var slots int64
	for i, rp := range r.reps {
		d := int(r.defs[i])
		row := int64(len(offsets) - 1)
		if rp == 0 {
			offsets = append(offsets, slots)
			ok := d >= dList
			rowValid = append(rowValid, ok)
			rowNulls = rowNulls || !ok
			row++
		} else if i == 0 {
			return nil, corruptf("column chunk starts in the middle of a list")
		}
		if d > dList {
			ok := d == r.maxDef
			elemValid = append(elemValid, ok)
			elemNulls = elemNulls || !ok
			slots++
		} else if rp != 0 {
			return nil, &rowError{row: r.base + row, err: corruptf("null or empty list marker inside a list (definition level %d, repetition level %d)", d, rp)}
		}
	}
	offsets = append(offsets, slots)
	rows := int64(len(offsets) - 1)
	if err := r.checkRows(rows); err != nil {
		return nil, err
	}
	nonNull := 0
	for _, ok := range elemValid {
		if ok {
			nonNull++
		}
	}
	if nonNull != nv {
		return nil, corruptf("%d values for %d non-null elements", nv, nonNull)
	}
	c.Rows = int(rows)
	c.Offsets = offsets
	if rowNulls {
		c.RowValid = rowValid
	}
	if elemNulls {
		c.ElemValid = elemValid
		r.vals.fill(c, elemValid)
	} else {
		r.vals.fill(c, nil)
	}
	return c, nil
}

// wantRows returns the rows asked for: the row group's, or the range's.
func (r *chunkReader) wantRows() int64 {
	if r.ranged {
		return r.hi - r.lo
	}
	return r.rgRows
}

// checkRows checks n, the rows assembled: the rows decoded must be the row
// group's row count (when the read reached the chunk's end), and n the rows
// asked for (the row group's, or the range's).
func (r *chunkReader) checkRows(n int64) error {
	if !r.stopped && r.rows != r.rgRows {
		return corruptf("column chunk holds %d rows, row group has %d", r.rows, r.rgRows)
	}
	if n != r.wantRows() {
		return corruptf("column chunk holds %d rows of the range [%d, %d)", n, r.lo, r.hi)
	}
	return nil
}

// assembleDense is assemble for a list chunk whose every level entry is a
// present element (all definition levels at the maximum: no null or empty
// list, no null element), the common case: a row starts at each repetition
// level 0, and no validity is kept. It checks what assemble checks.
func (r *chunkReader) assembleDense(c *Column, nv int) (*Column, error) {
	if len(r.reps) > 0 && r.reps[0] != 0 {
		return nil, corruptf("column chunk starts in the middle of a list")
	}
	if nv != len(r.reps) {
		return nil, corruptf("%d values for %d non-null elements", nv, len(r.reps))
	}
	offsets := make([]int64, 0, min(r.wantRows(), int64(len(r.reps)))+1)
	reps := r.reps
	i := 0
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(reps); i += 8 {
		// Skip eight continuing elements at once: w has a zero byte
		// exactly when (w-ones) &^ w has a high bit set.
		if w := binary.LittleEndian.Uint64(reps[i:]); (w-ones)&^w&highs == 0 {
			continue
		}
		for k, rp := range reps[i : i+8] {
			if rp == 0 {
				offsets = append(offsets, int64(i+k))
			}
		}
	}
	for ; i < len(reps); i++ {
		if reps[i] == 0 {
			offsets = append(offsets, int64(i))
		}
	}
	offsets = append(offsets, int64(len(reps)))
	rows := int64(len(offsets) - 1)
	if err := r.checkRows(rows); err != nil {
		return nil, err
	}
	c.Rows = int(rows)
	c.Offsets = offsets
	r.vals.fill(c, nil)
	return c, nil
}

// allLevels reports whether every level in v equals x, comparing eight
// levels at a time.
func allLevels(v []uint8, x uint8) bool {
	pat := uint64(x) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if binary.LittleEndian.Uint64(v[i:]) != pat {
			return false
		}
	}
	for ; i < len(v); i++ {
		if v[i] != x {
			return false
		}
	}
	return true
}

// encodingName names a page or level encoding for an error message: its
// Parquet name, or its number when the file holds a value the format does
// not define (parquet-go's String gives "Encoding(?)" for those).
func encodingName(e format.Encoding) string {
	if s := e.String(); s != "Encoding(?)" {
		return s
	}
	return fmt.Sprintf("Encoding(%d)", int32(e))
}
