package pqread

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/parquet-go/parquet-go/format"
)

// Layout constants of a Parquet file (parquet-format README, "File Format"):
//
//	"PAR1" | column chunks ... | footer (thrift FileMetaData) | footer length (4 bytes LE) | "PAR1"
const (
	magicLen   = 4
	trailerLen = 8 // footer length + magic
	minFileLen = magicLen + trailerLen
)

var (
	magic          = []byte("PAR1")
	magicEncrypted = []byte("PARE")
)

// Open opens the Parquet file at path, reads and validates its footer, and
// closes the descriptor again (see File). Checks, each failing with an
// *Error naming the file: size at least 12 bytes, "PAR1" at both ends
// (encrypted-footer files, "PARE", give ErrUnsupported), footer length inside
// the file and within lim.MaxFooterBytes, a footer that parses (every thrift
// list count is checked against the bytes left before anything is
// allocated), a well-formed schema, row counts that are not negative, one
// column chunk per leaf column in each row group, and every column chunk's
// byte range inside the data region of the file.
func Open(path string, lim Limits) (*File, error) {
	f := &File{path: path, lim: lim.withDefaults()}
	fail := func(err error) (*File, error) {
		var pe *Error
		if e, ok := err.(*Error); ok {
			pe = e
		} else {
			pe = &Error{File: path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
		}
		return nil, pe
	}
	fd, err := os.Open(path)
	if err != nil {
		return fail(err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return fail(err)
	}
	f.size = st.Size()
	if !st.Mode().IsRegular() {
		return fail(corruptf("not a regular file"))
	}
	if f.size < minFileLen {
		return fail(corruptf("file too small for parquet: %d bytes, need at least %d", f.size, minFileLen))
	}
	var head [magicLen]byte
	if _, err := fd.ReadAt(head[:], 0); err != nil {
		return fail(fmt.Errorf("reading header magic: %w", err))
	}
	var tail [trailerLen]byte
	if _, err := fd.ReadAt(tail[:], f.size-trailerLen); err != nil {
		return fail(fmt.Errorf("reading footer length: %w", err))
	}
	if bytes.Equal(tail[4:], magicEncrypted) {
		return fail(unsupportedf("encrypted footer (PARE magic)"))
	}
	if !bytes.Equal(head[:], magic) {
		return fail(corruptf("bad magic at start: %q, want %q", head[:], magic))
	}
	if !bytes.Equal(tail[4:], magic) {
		return fail(corruptf("bad magic at end: %q, want %q (truncated file?)", tail[4:], magic))
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footerLen == 0 || footerLen > f.size-minFileLen {
		return fail(corruptf("footer length %d does not fit in a %d-byte file", footerLen, f.size))
	}
	if footerLen > f.lim.MaxFooterBytes {
		return fail(limitf("footer of %d bytes exceeds the limit of %d", footerLen, f.lim.MaxFooterBytes))
	}
	f.dataEnd = f.size - trailerLen - footerLen
	buf := make([]byte, footerLen)
	if _, err := fd.ReadAt(buf, f.dataEnd); err != nil && err != io.EOF {
		return fail(fmt.Errorf("reading footer: %w", err))
	}
	buf, err = checkThrift(buf)
	if err == nil {
		f.meta, err = decodeFooter(&f.dec, buf)
	}
	if err != nil {
		return fail(&Error{File: path, RowGroup: -1, Page: -1, Row: -1, Offset: f.dataEnd, Err: corruptf("decoding footer: %v", err)})
	}
	if err := f.validate(); err != nil {
		return fail(err)
	}
	return f, nil
}

// decodeFooter decodes the footer, turning decoder panics into errors.
func decodeFooter(dec *format.FooterDecoder, buf []byte) (meta *format.FileMetaData, err error) {
	defer func() {
		if r := recover(); r != nil {
			meta, err = nil, fmt.Errorf("panic in footer decoder: %v", r)
		}
	}()
	meta, _, err = dec.Decode(buf)
	return meta, err
}

func (f *File) validate() error {
	leaves, nodes, err := buildSchema(f.meta.Schema)
	if err != nil {
		return &Error{File: f.path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	f.leaves, f.nodes = leaves, nodes
	for _, l := range leaves {
		if l.unsupported != nil {
			l.info.Unsupported = l.unsupported.Error()
		}
		f.cols = append(f.cols, l.info)
	}
	for i := range f.meta.RowGroups {
		rg := &f.meta.RowGroups[i]
		e := func(col string, err error) error {
			return &Error{File: f.path, Column: col, RowGroup: i, Page: -1, Row: -1, Offset: -1, Err: err}
		}
		if rg.NumRows < 0 {
			return e("", corruptf("negative row count %d", rg.NumRows))
		}
		if f.total > math.MaxInt64-rg.NumRows {
			return e("", corruptf("row count overflows"))
		}
		f.total += rg.NumRows
		f.rows = append(f.rows, rg.NumRows)
		if len(rg.Columns) != len(leaves) {
			return e("", corruptf("row group has %d column chunks, schema has %d leaf columns", len(rg.Columns), len(leaves)))
		}
		for j := range rg.Columns {
			cc := &rg.Columns[j]
			name := leaves[j].info.Name
			if cc.FilePath != "" {
				continue // reported by ReadColumn as unsupported
			}
			md := &cc.MetaData
			if md.Type != leaves[j].typ {
				return e(name, corruptf("column chunk type %s differs from schema type %s", physicalName(md.Type), leaves[j].info.Physical))
			}
			if md.NumValues == 0 {
				continue // never read
			}
			start, n := chunkRange(md)
			if start < magicLen || n < 0 || start > f.dataEnd || n > f.dataEnd-start {
				return e(name, corruptf("column chunk bytes [%d, %d+%d) outside the data region [4, %d)", start, start, n, f.dataEnd))
			}
		}
	}
	return nil
}

// chunkRange returns the first byte and the length of a column chunk: it
// starts at the dictionary page when there is one (some writers leave
// dictionary_page_offset 0 or point it past the data page; both mean the
// chunk starts at data_page_offset; a column chunk without values may have
// data_page_offset 0).
func chunkRange(md *format.ColumnMetaData) (start, n int64) {
	start = md.DataPageOffset
	if d := md.DictionaryPageOffset; d > 0 && (d < start || start <= 0) {
		start = d
	}
	return start, md.TotalCompressedSize
}

// checkThrift walks a thrift compact-protocol FileMetaData and fails if any
// list, set, map or binary length exceeds the bytes left, or nesting is too
// deep, so the decoder never sizes an allocation from an unchecked count.
//
// It also repairs one thing on the way: KeyValue entries (file and column
// chunk key_value_metadata) without a value. The Parquet thrift IDL makes
// KeyValue.value optional, but parquet-go v0.32.0 declares it required and
// rejects the whole footer; an empty value is inserted instead (prep does
// not use key-value metadata). It returns the bytes to decode.
func checkThrift(b []byte) ([]byte, error) {
	w := thriftWalker{b: b}
	w.structure(0)
	if w.err != nil {
		return nil, w.err
	}
	if w.out == nil {
		return b, nil
	}
	return append(w.out, b[w.copied:]...), nil
}

type thriftWalker struct {
	b   []byte
	pos int
	err error

	path   []int  // field ids (-1 for list elements) from the root to the current value
	out    []byte // repaired copy, nil while nothing was inserted
	copied int    // bytes of b already copied to out
}

// keyValuePaths are where KeyValue structs sit in FileMetaData:
// key_value_metadata (5) and row_groups (4) / columns (1) / meta_data (3) /
// key_value_metadata (8).
var keyValuePaths = [][]int{{5, -1}, {4, -1, 1, -1, 3, 8, -1}}

func (w *thriftWalker) atKeyValue() bool {
	for _, kv := range keyValuePaths {
		if len(w.path) == len(kv) {
			match := true
			for i := range kv {
				if w.path[i] != kv[i] {
					match = false
					break
				}
			}
			if match {
				return true
			}
		}
	}
	return false
}

// insert copies b up to at into out, then ins.
func (w *thriftWalker) insert(at int, ins ...byte) {
	w.out = append(w.out, w.b[w.copied:at]...)
	w.out = append(w.out, ins...)
	w.copied = at
}

func (w *thriftWalker) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format+" at byte %d", append(args, w.pos)...)
	}
}

func (w *thriftWalker) byte1() byte {
	if w.err != nil {
		return 0
	}
	if w.pos >= len(w.b) {
		w.fail("unexpected end")
		return 0
	}
	c := w.b[w.pos]
	w.pos++
	return c
}

func (w *thriftWalker) uvarint() uint64 {
	if w.err != nil {
		return 0
	}
	v, n := binary.Uvarint(w.b[w.pos:])
	if n <= 0 {
		w.fail("bad varint")
		return 0
	}
	w.pos += n
	return v
}

func (w *thriftWalker) skip(n uint64) {
	if w.err != nil {
		return
	}
	if n > uint64(len(w.b)-w.pos) {
		w.fail("length %d exceeds the %d bytes left", n, len(w.b)-w.pos)
		return
	}
	w.pos += int(n)
}

const maxThriftDepth = 64

func (w *thriftWalker) value(t byte, depth int) {
	if depth > maxThriftDepth {
		w.fail("nesting deeper than %d", maxThriftDepth)
		return
	}
	switch t {
	case 1, 2: // bool inside a field header
	case 3:
		w.skip(1)
	case 4, 5, 6:
		w.uvarint()
	case 7:
		w.skip(8)
	case 8:
		w.skip(w.uvarint())
	case 9, 10:
		h := w.byte1()
		n := uint64(h >> 4)
		if n == 15 {
			n = w.uvarint()
		}
		et := h & 0x0f
		if n > uint64(len(w.b)-w.pos) {
			w.fail("list of %d elements exceeds the %d bytes left", n, len(w.b)-w.pos)
			return
		}
		w.path = append(w.path, -1)
		for i := uint64(0); i < n && w.err == nil; i++ {
			if et == 1 || et == 2 {
				w.skip(1)
				continue
			}
			w.value(et, depth+1)
		}
		w.path = w.path[:len(w.path)-1]
	case 11:
		n := w.uvarint()
		if n == 0 {
			return
		}
		kv := w.byte1()
		if n > uint64(len(w.b)-w.pos) {
			w.fail("map of %d entries exceeds the %d bytes left", n, len(w.b)-w.pos)
			return
		}
		w.path = append(w.path, -1)
		for i := uint64(0); i < n && w.err == nil; i++ {
			for _, et := range []byte{kv >> 4, kv & 0x0f} {
				if et == 1 || et == 2 {
					w.skip(1)
				} else {
					w.value(et, depth+1)
				}
			}
		}
		w.path = w.path[:len(w.path)-1]
	case 12:
		w.structure(depth + 1)
	default:
		w.fail("unknown thrift type %d", t)
	}
}

func (w *thriftWalker) structure(depth int) {
	if depth > maxThriftDepth {
		w.fail("nesting deeper than %d", maxThriftDepth)
		return
	}
	last, seenValue := 0, false
	for w.err == nil {
		at := w.pos
		h := w.byte1()
		if w.err != nil {
			return
		}
		if h == 0 {
			if !seenValue && w.atKeyValue() {
				// Field 2 (value), type binary, length 0, before the stop.
				if d := 2 - last; d >= 1 && d <= 15 {
					w.insert(at, byte(d<<4|8), 0)
				} else {
					w.insert(at, 8, 4, 0) // long form: zigzag(2) = 4
				}
			}
			return
		}
		id := last + int(h>>4)
		if h>>4 == 0 {
			v, n := binary.Varint(w.b[w.pos:])
			if n <= 0 {
				w.fail("bad field id")
				return
			}
			w.pos += n
			id = int(v)
		}
		last = id
		if id == 2 {
			seenValue = true
		}
		w.path = append(w.path, id)
		w.value(h&0x0f, depth)
		w.path = w.path[:len(w.path)-1]
	}
}
