package pqread

import (
	"encoding/binary"
	"fmt"

	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
)

// This file walks thrift compact-protocol structures
// (thrift/doc/specs/thrift-compact-protocol.md) before parquet-go's decoder
// sees them: the footer (checkThrift) and every page header
// (decodePageHeader). The walk is iterative, with an explicit stack of at
// most maxThriftDepth containers, and checks every list, set, map and
// binary length against the bytes left, so the decoder that follows never
// recurses deeper than that (parquet-go's skip of unknown fields is
// recursive: a few megabytes of nested lists overflow the stack) nor sizes
// an allocation from an unchecked count.

// Thrift compact protocol types.
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

// maxThriftDepth bounds the nesting of structs, lists, sets and maps in any
// thrift structure read (the outermost struct counts as one level).
const maxThriftDepth = 64

// checkThrift walks a thrift compact-protocol FileMetaData and fails if any
// list, set, map or binary length exceeds the bytes left, or nesting is
// deeper than maxThriftDepth, so the decoder never sizes an allocation from
// an unchecked count.
//
// It also repairs one thing on the way: KeyValue entries (file and column
// chunk key_value_metadata) without a value. The Parquet thrift IDL makes
// KeyValue.value optional, but parquet-go v0.32.0 declares it required and
// rejects the whole footer; an empty value is inserted instead (prep does
// not use key-value metadata). It returns the bytes to decode.
func checkThrift(b []byte) ([]byte, error) {
	w := thriftWalker{b: b, repair: true}
	w.structure()
	if w.err != nil {
		return nil, w.err
	}
	if w.out == nil {
		return b, nil
	}
	return append(w.out, b[w.copied:]...), nil
}

// thriftStructLen returns the length of the thrift struct at the start of
// b, walked as checkThrift walks a footer (bounded nesting, every length
// checked), without repairs.
func thriftStructLen(b []byte) (int, error) {
	w := thriftWalker{b: b}
	w.structure()
	if w.err != nil {
		return 0, w.err
	}
	return w.pos, nil
}

// decodePageHeader decodes the page header at the start of b into h and
// returns its length. The header is walked first (thriftStructLen), so
// parquet-go decodes only a checked struct of bounded nesting.
func decodePageHeader(b []byte, h *format.PageHeader) (int, error) {
	n, err := thriftStructLen(b)
	if err != nil {
		return 0, err
	}
	hr := thriftProto.NewReaderFromBytes(b[:n])
	if err := thrift.NewDecoder(hr).Decode(h); err != nil {
		return 0, err
	}
	return n, nil
}

var thriftProto thrift.CompactProtocol

type thriftWalker struct {
	b   []byte
	pos int
	err error

	stack  []thriftFrame // containers open, outermost first
	repair bool          // insert missing KeyValue values (footers)
	out    []byte        // repaired copy, nil while nothing was inserted
	copied int           // bytes of b already copied to out
}

// thriftFrame is one open container of the walk.
type thriftFrame struct {
	kind byte // tStruct, tList (lists and sets) or tMap
	// structs: the last field id read, and whether field 2 was seen
	last int
	seen bool
	// lists and maps: the element types (a map's key in the high nibble)
	// and the elements left (a map counts keys and values)
	et   byte
	left uint64
}

// keyValuePaths are where KeyValue structs sit in FileMetaData:
// key_value_metadata (5) and row_groups (4) / columns (1) / meta_data (3) /
// key_value_metadata (8); -1 is a list element.
var keyValuePaths = [][]int{{5, -1}, {4, -1, 1, -1, 3, 8, -1}}

// atKeyValue reports whether the struct on top of the stack is a KeyValue:
// whether the field ids (and -1 for list elements) of the containers below
// it match one of keyValuePaths.
func (w *thriftWalker) atKeyValue() bool {
	below := w.stack[:len(w.stack)-1]
	for _, kv := range keyValuePaths {
		if len(below) != len(kv) {
			continue
		}
		match := true
		for i, fr := range below {
			id := -1
			if fr.kind == tStruct {
				id = fr.last
			}
			if id != kv[i] {
				match = false
				break
			}
		}
		if match {
			return true
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

// push opens a container of type t (its header read here), failing when
// that nests deeper than maxThriftDepth.
func (w *thriftWalker) push(t byte) {
	if len(w.stack) >= maxThriftDepth {
		w.fail("nesting deeper than %d", maxThriftDepth)
		return
	}
	switch t {
	case tStruct:
		w.stack = append(w.stack, thriftFrame{kind: tStruct})
	case tList, tSet:
		et, n := w.listHeader()
		if w.err == nil {
			w.stack = append(w.stack, thriftFrame{kind: tList, et: et, left: uint64(n)})
		}
	case tMap:
		n := w.uvarint()
		if w.err != nil || n == 0 {
			return
		}
		kv := w.byte1()
		if w.err == nil && n > uint64(len(w.b)-w.pos) {
			w.fail("map of %d entries exceeds the %d bytes left", n, len(w.b)-w.pos)
		}
		if w.err == nil {
			w.stack = append(w.stack, thriftFrame{kind: tMap, et: kv, left: 2 * n})
		}
	}
}

// scalar skips a value of a non-container type t; booleans in a list, set
// or map (elem) take a byte, unlike boolean fields, whose value is in the
// field header.
func (w *thriftWalker) scalar(t byte, elem bool) {
	switch t {
	case tTrue, tFalse:
		if elem {
			w.skip(1)
		}
	case tByte:
		w.skip(1)
	case tI16, tI32, tI64:
		w.uvarint()
	case tDouble:
		w.skip(8)
	case tBinary:
		w.skip(w.uvarint())
	default:
		w.fail("unknown thrift type %d", t)
	}
}

// structure walks the struct at pos to its stop byte.
func (w *thriftWalker) structure() { w.walk(tStruct, false) }

// value skips one value of type t (a field's value, or with elem a list,
// set or map element), containers included, iteratively.
func (w *thriftWalker) value(t byte, elem bool) { w.walk(t, elem) }

// walk skips one value of type t and everything inside it, with the
// containers it opens on w.stack (above those already there).
func (w *thriftWalker) walk(t byte, elem bool) {
	if t != tStruct && t != tList && t != tSet && t != tMap {
		w.scalar(t, elem)
		return
	}
	floor := len(w.stack)
	w.push(t)
	for w.err == nil && len(w.stack) > floor {
		top := &w.stack[len(w.stack)-1]
		if top.kind != tStruct {
			if top.left == 0 {
				w.stack = w.stack[:len(w.stack)-1]
				continue
			}
			et := top.et & 0x0f
			if top.kind == tMap && top.left%2 == 0 {
				et = top.et >> 4 // a key
			}
			top.left--
			w.child(et, true)
			continue
		}
		at := w.pos
		id, typ, more := w.fieldHeader(&top.last)
		if w.err != nil {
			return
		}
		if !more {
			if w.repair && !top.seen && w.atKeyValue() {
				// Field 2 (value), type binary, length 0, before the stop.
				if d := 2 - top.last; d >= 1 && d <= 15 {
					w.insert(at, byte(d<<4|tBinary), 0)
				} else {
					w.insert(at, tBinary, 4, 0) // long form: zigzag(2) = 4
				}
			}
			w.stack = w.stack[:len(w.stack)-1]
			continue
		}
		if id == 2 {
			top.seen = true
		}
		w.child(typ, false)
	}
}

// child opens a container of type t or skips a scalar.
func (w *thriftWalker) child(t byte, elem bool) {
	switch t {
	case tStruct, tList, tSet, tMap:
		w.push(t)
	default:
		w.scalar(t, elem)
	}
}
