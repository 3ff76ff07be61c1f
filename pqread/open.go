package pqread

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"

	"github.com/parquet-go/parquet-go/format"
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
	ft, err := ReadFooter(fd, f.lim.MaxFooterBytes)
	if err != nil {
		return fail(err)
	}
	f.size, f.dataEnd, f.footSum = ft.Size, ft.Offset, ft.SHA256()
	buf, err := checkThrift(ft.Meta)
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

// Thrift compact protocol types (thrift/doc/specs/thrift-compact-protocol.md).
const (
	tStop   = 0
	tTrue   = 1 // booleans: the value is the field header's type
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

const maxThriftDepth = 64

// zigzag reads a zigzag varint (i16, i32, i64 values).
func (w *thriftWalker) zigzag() int64 {
	u := w.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// fieldHeader reads a struct field header after field *last and returns
// its id and type; more is false at the struct's stop byte or after an
// error.
func (w *thriftWalker) fieldHeader(last *int) (id int, typ byte, more bool) {
	h := w.byte1()
	if w.err != nil || h == tStop {
		return 0, tStop, false
	}
	if d := int(h >> 4); d != 0 {
		*last += d
	} else {
		*last = int(w.zigzag())
	}
	return *last, h & 0x0f, w.err == nil
}

// listHeader reads a list or set header: the element type and count, the
// count checked against the bytes left (every element takes at least one).
func (w *thriftWalker) listHeader() (et byte, n int) {
	h := w.byte1()
	c := uint64(h >> 4)
	if c == 15 {
		c = w.uvarint()
	}
	if w.err == nil && c > uint64(len(w.b)-w.pos) {
		w.fail("list of %d elements exceeds the %d bytes left", c, len(w.b)-w.pos)
	}
	if w.err != nil {
		return 0, 0
	}
	return h & 0x0f, int(c)
}

// elem skips one list, set or map element: booleans there take a byte,
// unlike boolean fields, whose value is in the header.
func (w *thriftWalker) elem(t byte, depth int) {
	if t == tTrue || t == tFalse {
		w.skip(1)
		return
	}
	w.value(t, depth)
}

func (w *thriftWalker) value(t byte, depth int) {
	if depth > maxThriftDepth {
		w.fail("nesting deeper than %d", maxThriftDepth)
		return
	}
	switch t {
	case tTrue, tFalse: // the value is in the field header
	case tByte:
		w.skip(1)
	case tI16, tI32, tI64:
		w.uvarint()
	case tDouble:
		w.skip(8)
	case tBinary:
		w.skip(w.uvarint())
	case tList, tSet:
		et, n := w.listHeader()
		w.path = append(w.path, -1)
		for i := 0; i < n && w.err == nil; i++ {
			w.elem(et, depth+1)
		}
		w.path = w.path[:len(w.path)-1]
	case tMap:
		n := w.uvarint()
		if n == 0 {
			return
		}
		kv := w.byte1()
		if w.err == nil && n > uint64(len(w.b)-w.pos) {
			w.fail("map of %d entries exceeds the %d bytes left", n, len(w.b)-w.pos)
			return
		}
		w.path = append(w.path, -1)
		for i := uint64(0); i < n && w.err == nil; i++ {
			w.elem(kv>>4, depth+1)
			w.elem(kv&0x0f, depth+1)
		}
		w.path = w.path[:len(w.path)-1]
	case tStruct:
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
		id, typ, more := w.fieldHeader(&last)
		if w.err != nil {
			return
		}
		if !more {
			if !seenValue && w.atKeyValue() {
				// Field 2 (value), type binary, length 0, before the stop.
				if d := 2 - last; d >= 1 && d <= 15 {
					w.insert(at, byte(d<<4|tBinary), 0)
				} else {
					w.insert(at, tBinary, 4, 0) // long form: zigzag(2) = 4
				}
			}
			return
		}
		if id == 2 {
			seenValue = true
		}
		w.path = append(w.path, id)
		w.value(typ, depth)
		w.path = w.path[:len(w.path)-1]
	}
}
