package pqread

import (
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/parquet-go/parquet-go/format"
)

// This file is the page loop of a column chunk: each page header is read
// and checked, the page's body checked against its CRC and decompressed,
// and a data page's levels and values appended to the reader's pending
// entries.

// headerProbe is the bytes first read for a page header; a header that
// does not parse in them is read again from twice as many, up to the
// chunk's end or Limits.MaxPageBytes.
const headerProbe = 1 << 10

// nextPage reads, checks and decodes the page at r.pos, and moves r.pos
// past it. Index pages and unknown page types are checked (header, size,
// CRC) and passed over.
func (r *ColumnReader) nextPage() error {
	lim := r.f.lim
	r.page++
	r.pageOff = r.start + r.pos
	var h format.PageHeader
	hn := 0
	for probe := int64(headerProbe); ; probe *= 2 {
		left := r.size - r.pos
		p := min(probe, left)
		hb, err := r.chunkBytes(r.pos, p)
		if err != nil {
			return err
		}
		h = format.PageHeader{}
		n, err := decodePageHeader(hb, &h)
		if err == nil {
			hn = n
			break
		}
		if p >= left || p >= lim.MaxPageBytes {
			return corruptf("page header: %v", err)
		}
	}
	pos := r.pos + int64(hn)
	cs, us := int64(h.CompressedPageSize), int64(h.UncompressedPageSize)
	if cs < 0 || us < 0 {
		return corruptf("negative page size (compressed %d, uncompressed %d)", cs, us)
	}
	if cs > lim.MaxPageBytes || us > lim.MaxPageBytes {
		return limitf("page of %d bytes (%d compressed) exceeds the limit of %d", us, cs, lim.MaxPageBytes)
	}
	if cs > r.size-pos {
		return corruptf("page of %d compressed bytes overruns the column chunk (%d bytes left)", cs, r.size-pos)
	}
	if err := r.beforePage(&h); err != nil {
		return err
	}
	body, err := r.chunkBytes(pos, cs)
	if err != nil {
		return err
	}
	r.pos = pos + cs
	if h.CRC != 0 && int32(crc32.ChecksumIEEE(body)) != h.CRC {
		return corruptf("page checksum mismatch: computed %08x, header says %08x", crc32.ChecksumIEEE(body), uint32(h.CRC))
	}
	if r.jump > 0 {
		// ColumnReaderPages: the dictionary page, then the first page
		// wanted.
		if h.Type != format.DictionaryPage {
			return corruptf("page index: the bytes before the first data page are a %s page, not a dictionary page", h.Type)
		}
		r.pos, r.page, r.jump = r.jump, r.jumpPage, 0
	}
	switch h.Type {
	case format.DictionaryPage:
		return r.dictionaryPage(&h, body, int(us))
	case format.DataPage:
		return r.dataPageV1(&h, body, int(us))
	case format.DataPageV2:
		return r.dataPageV2(&h, body, int(us))
	}
	return nil // index pages and unknown page types carry no values
}

// outBuf returns the decompression buffer with room for size bytes,
// taking one from the pool (or r.bufs) when it has none or too small a
// one; an uncompressed chunk's, which decompress never writes, is empty.
func (r *ColumnReader) outBuf(size int) *[]byte {
	if r.codec == format.Uncompressed {
		return &r.none
	}
	if r.out != nil && cap(*r.out) < size {
		r.putBuf(r.out)
		r.out = nil
	}
	if r.out == nil {
		r.out = r.getBuf(size)
	}
	return r.out
}

// beforePage calls the OnPage function before the body of a data page
// (header h) is read and decoded into a window bounded in entries, when
// the page's level entries take the entries held past the bound.
func (r *ColumnReader) beforePage(h *format.PageHeader) error {
	if r.onPage == nil || r.budget <= 0 {
		return nil
	}
	var n int64
	if dh, ok := h.DataPageHeader.Get(); ok && h.Type == format.DataPage {
		n = int64(dh.NumValues)
	} else if dh, ok := h.DataPageHeaderV2.Get(); ok && h.Type == format.DataPageV2 {
		n = int64(dh.NumValues)
	}
	if held := int64(r.kept()); n > 0 && held+n > r.budget {
		return r.onPage(held, n)
	}
	return nil
}

func (r *ColumnReader) checkCount(n int32) error {
	if n < 0 {
		return corruptf("page declares a negative value count (%d)", n)
	}
	if int64(n) > r.f.lim.MaxPageBytes {
		return limitf("page declares %d values, above the limit of %d", n, r.f.lim.MaxPageBytes)
	}
	return nil
}

func (r *ColumnReader) dictionaryPage(h *format.PageHeader, body []byte, us int) error {
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
	if r.levelsOnly {
		r.dict = newValues(r.vals.kind, r.vals.width, 0)
		return nil
	}
	raw, err := decompress(r.codec, r.outBuf(us), body, us)
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

func (r *ColumnReader) dataPageV1(h *format.PageHeader, body []byte, us int) error {
	dh, ok := h.DataPageHeader.Get()
	if !ok {
		return corruptf("data page without a data page header")
	}
	if err := r.checkCount(dh.NumValues); err != nil {
		return err
	}
	n := int(dh.NumValues)
	if r.maxDef == 0 && r.maxRep == 0 && !r.levelsOnly { // V1 pages compress their levels with the values
		if ok, err := r.directPlain(dh.Encoding, n, us, body); ok {
			return err
		}
	}
	buf := r.plainTail(dh.Encoding, n, us)
	if buf == nil {
		buf = r.outBuf(us)
	}
	raw, err := decompress(r.codec, buf, body, us)
	if err != nil {
		return err
	}
	p := 0
	if r.maxRep > 0 {
		u, _, err := levelsV1(&r.reps, raw, dh.RepetitionLevelEncoding, r.maxRep, n, "repetition")
		if err != nil {
			return err
		}
		if err := r.checkRowSlots(n); err != nil {
			return err
		}
		p += u
	}
	if r.maxDef > 0 {
		u, full, err := levelsV1(&r.defs, raw[p:], dh.DefinitionLevelEncoding, r.maxDef, n, "definition")
		if err != nil {
			return err
		}
		r.defsFull = full
		p += u
	}
	return r.pageValues(dh.Encoding, raw[p:], n)
}

func (r *ColumnReader) dataPageV2(h *format.PageHeader, body []byte, us int) error {
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
		if _, err := levelsHybrid(&r.reps, body[:rl], r.maxRep, n, "repetition"); err != nil {
			return err
		}
		if err := r.checkRowSlots(n); err != nil {
			return err
		}
	}
	if r.maxDef > 0 {
		full, err := levelsHybrid(&r.defs, body[rl:rl+dl], r.maxDef, n, "definition")
		if err != nil {
			return err
		}
		r.defsFull = full
	}
	src := body[rl+dl:]
	if r.levelsOnly {
		return r.pageValues(dh.Encoding, nil, n)
	}
	compressed := true
	if v, ok := dh.IsCompressed.Get(); ok {
		compressed = v
	}
	if compressed {
		if ok, err := r.directPlain(dh.Encoding, n, us-rl-dl, src); ok {
			return err
		}
		raw, err := decompress(r.codec, r.outBuf(us-rl-dl), src, us-rl-dl)
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
func (r *ColumnReader) directPlain(enc format.Encoding, n, us int, src []byte) (bool, error) {
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
	count := r.pageValueCount(n)
	if count == 0 || us != count*size {
		return false, nil
	}
	if count < n {
		r.vals.reserve(n) // room for the null slots (pageValues)
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

// plainTail returns, for a compressed data page V1 of n level entries
// and PLAIN fixed-width values (us bytes once decompressed, its levels
// first), the values' memory past the values held, empty, with room for
// the page's bytes, when the values' capacity holds them and the page's
// n slots: decompressed there, the page's values are then moved left
// over its levels by appendLE (copy, which allows the overlap) without
// growing the values, so the page needs no decompression buffer of its
// own. Otherwise it returns nil.
func (r *ColumnReader) plainTail(enc format.Encoding, n, us int) *[]byte {
	if enc != format.Plain || r.codec == format.Uncompressed || !littleEndian || r.levelsOnly || us == 0 {
		return nil
	}
	size := r.vals.valueSize()
	if size == 0 {
		return nil
	}
	room := (us + size - 1) / size
	if r.vals.spare() < max(n, room) {
		return nil
	}
	tail := r.vals.growBytes(room)
	r.vals.shrink(room)
	r.tail = tail[:0:us]
	return &r.tail
}

// pageValues decodes the values of a data page whose n level entries were
// just appended.
func (r *ColumnReader) pageValues(enc format.Encoding, src []byte, n int) error {
	if r.maxRep > 0 && r.entries == 0 && n > 0 && r.reps[0] != 0 {
		return corruptf("first page starts in the middle of a list (repetition level %d)", r.reps[0])
	}
	count := r.pageValueCount(n)
	before := r.vals.n()
	if count < n {
		// Room for the page's null slots too: assemble spreads the values
		// over them in place.
		r.vals.reserve(n)
	}
	if r.levelsOnly {
		r.vals.growBytes(count) // slots only: the values are not decoded
		return r.advance(n)
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

// pageValueCount returns the values of the data page whose n level entries
// were just appended: the entries at the maximum definition level, all n
// when the page's definition levels were found to be all at the maximum.
func (r *ColumnReader) pageValueCount(n int) int {
	if r.maxDef == 0 || r.defsFull {
		return n
	}
	return countLevel(r.defs[len(r.defs)-n:], uint8(r.maxDef))
}

// advance accounts for a decoded page of n level entries and checks the
// chunk has not outgrown its limits.
func (r *ColumnReader) advance(n int) error {
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
func (r *ColumnReader) account(n, started int) error {
	r.entries += int64(n)
	r.rows += int64(started)
	r.pageMax = max(r.pageMax, int64(n))
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

// checkRowSlots checks the n repetition levels just decoded: no row may
// hold more than Limits.MaxRowSlots level entries. rowEntries carries the
// entries of the last row started from page to page.
func (r *ColumnReader) checkRowSlots(n int) error {
	lim := r.f.lim.MaxRowSlots
	reps := r.reps[len(r.reps)-n:]
	if r.rowEntries+int64(n) <= lim {
		// No row of this page can pass the limit: find where the last
		// row started.
		for i := len(reps) - 1; i >= 0; i-- {
			if reps[i] == 0 {
				r.rowEntries = int64(len(reps) - i)
				return nil
			}
		}
		r.rowEntries += int64(n)
		return nil
	}
	cur, row := r.rowEntries, r.rows-1 // the row the page's first entry continues
	for _, rp := range reps {
		if rp == 0 {
			cur, row = 0, row+1
		}
		if cur++; cur > lim {
			return &rowError{row: row, err: &RowSlotsError{Row: row, Limit: lim}}
		}
	}
	r.rowEntries = cur
	return nil
}
