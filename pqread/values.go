package pqread

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/prepml/prep/internal/sysmem"
)

// values accumulates decoded non-null values of one Kind.
type values struct {
	kind  Kind
	width int // KindFixed / KindInt96

	b    []bool
	i32  []int32
	i64  []int64
	f32  []float32
	f64  []float64
	data []byte
	offs []int64 // KindBytes: len n+1, starts with 0
	fix  []byte

	// indexed: KindBytes values are kept as indices into dict (which is set
	// by the first dictionary-encoded page) instead of copied into data.
	indexed bool
	idx     []uint32
	dict    *values
}

// unindex turns indexed values into copied ones (data, offs) and leaves
// indexed mode.
func (v *values) unindex() {
	if v.indexed && len(v.idx) > 0 {
		v.gather(v.dict, v.idx)
	}
	v.indexed, v.idx, v.dict = false, nil, nil
}

func newValues(kind Kind, width int, capHint int) *values {
	v := &values{kind: kind, width: width}
	switch kind {
	case KindBool:
		v.b = sysmem.MakeHuge[bool](0, capHint)
	case KindInt32:
		v.i32 = sysmem.MakeHuge[int32](0, capHint)
	case KindInt64:
		v.i64 = sysmem.MakeHuge[int64](0, capHint)
	case KindFloat32:
		v.f32 = sysmem.MakeHuge[float32](0, capHint)
	case KindFloat64:
		v.f64 = sysmem.MakeHuge[float64](0, capHint)
	case KindBytes:
		v.offs = make([]int64, 1, capHint+1)
	case KindFixed, KindInt96:
		v.fix = make([]byte, 0, min(capHint*width, 1<<26))
	}
	return v
}

// n returns the number of values held.
func (v *values) n() int {
	switch v.kind {
	case KindBool:
		return len(v.b)
	case KindInt32:
		return len(v.i32)
	case KindInt64:
		return len(v.i64)
	case KindFloat32:
		return len(v.f32)
	case KindFloat64:
		return len(v.f64)
	case KindBytes:
		if v.indexed {
			return len(v.idx)
		}
		return len(v.offs) - 1
	case KindFixed, KindInt96:
		return len(v.fix) / v.width
	}
	return 0
}

// valueSize is the PLAIN size of one value of a fixed-width kind.
func (v *values) valueSize() int {
	switch v.kind {
	case KindInt32, KindFloat32:
		return 4
	case KindInt64, KindFloat64:
		return 8
	case KindFixed, KindInt96:
		return v.width
	}
	return 0
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// appendLE appends the little-endian fixed-width values in src (len a
// multiple of valueSize) to v.
func (v *values) appendLE(src []byte) {
	switch v.kind {
	case KindInt32:
		v.i32 = appendLE32(v.i32, src, func(u uint32) int32 { return int32(u) })
	case KindFloat32:
		v.f32 = appendLE32(v.f32, src, math.Float32frombits)
	case KindInt64:
		v.i64 = appendLE64(v.i64, src, func(u uint64) int64 { return int64(u) })
	case KindFloat64:
		v.f64 = appendLE64(v.f64, src, math.Float64frombits)
	case KindFixed, KindInt96:
		v.fix = append(v.fix, src...)
	}
}

func appendLE32[T int32 | float32](dst []T, src []byte, conv func(uint32) T) []T {
	n := len(src) / 4
	if littleEndian && n > 0 {
		dst = grow(dst, n)
		out := dst[len(dst)-n:]
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*n), src)
		return dst
	}
	for i := 0; i < n; i++ {
		dst = append(dst, conv(binary.LittleEndian.Uint32(src[4*i:])))
	}
	return dst
}

func appendLE64[T int64 | float64](dst []T, src []byte, conv func(uint64) T) []T {
	n := len(src) / 8
	if littleEndian && n > 0 {
		dst = grow(dst, n)
		out := dst[len(dst)-n:]
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 8*n), src)
		return dst
	}
	for i := 0; i < n; i++ {
		dst = append(dst, conv(binary.LittleEndian.Uint64(src[8*i:])))
	}
	return dst
}

// grow extends s by n elements (contents of the new ones unspecified).
func grow[T sysmem.Plain](s []T, n int) []T {
	if cap(s)-len(s) < n {
		// Doubling while small; past growSlack elements a quarter more, as
		// append grows large slices, so that a buffer holding a long row
		// (millions of values, the memory limit's share) does not reserve
		// as much again beside it.
		extra := cap(s)
		if cap(s) > growSlack {
			extra = cap(s) / 4
		}
		ns := sysmem.MakeHuge[T](len(s), cap(s)+extra+n)
		copy(ns, s)
		s = ns
	}
	return s[:len(s)+n]
}

// growSlack is the capacity in elements past which grow adds a quarter
// instead of doubling.
const growSlack = 256 << 10

// growBytes extends a fixed-width kind by n values and returns the new
// values' memory as bytes (little-endian hosts only).
func (v *values) growBytes(n int) []byte {
	switch v.kind {
	case KindInt32:
		v.i32 = grow(v.i32, n)
		return asBytes(v.i32[len(v.i32)-n:])
	case KindFloat32:
		v.f32 = grow(v.f32, n)
		return asBytes(v.f32[len(v.f32)-n:])
	case KindInt64:
		v.i64 = grow(v.i64, n)
		return asBytes(v.i64[len(v.i64)-n:])
	case KindFloat64:
		v.f64 = grow(v.f64, n)
		return asBytes(v.f64[len(v.f64)-n:])
	case KindFixed, KindInt96:
		v.fix = grow(v.fix, n*v.width)
		return v.fix[len(v.fix)-n*v.width:]
	}
	panic("growBytes on a variable-width kind")
}

// spare returns the values of a fixed-width kind v has room for past
// those it holds (0 for other kinds).
func (v *values) spare() int {
	switch v.kind {
	case KindInt32:
		return cap(v.i32) - len(v.i32)
	case KindFloat32:
		return cap(v.f32) - len(v.f32)
	case KindInt64:
		return cap(v.i64) - len(v.i64)
	case KindFloat64:
		return cap(v.f64) - len(v.f64)
	case KindFixed, KindInt96:
		return (cap(v.fix) - len(v.fix)) / v.width
	}
	return 0
}

// shrink drops the last n values added by growBytes.
func (v *values) shrink(n int) {
	switch v.kind {
	case KindInt32:
		v.i32 = v.i32[:len(v.i32)-n]
	case KindFloat32:
		v.f32 = v.f32[:len(v.f32)-n]
	case KindInt64:
		v.i64 = v.i64[:len(v.i64)-n]
	case KindFloat64:
		v.f64 = v.f64[:len(v.f64)-n]
	case KindFixed, KindInt96:
		v.fix = v.fix[:len(v.fix)-n*v.width]
	}
}

func asBytes[T int32 | int64 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// appendBytes appends one BYTE_ARRAY value.
func (v *values) appendBytes(b []byte) {
	v.data = append(v.data, b...)
	v.offs = append(v.offs, int64(len(v.data)))
}

// gather appends dict[idx[i]] for every index; the caller has checked the
// indices against dict.n().
func (v *values) gather(dict *values, idx []uint32) {
	switch v.kind {
	case KindBool:
		for _, i := range idx {
			v.b = append(v.b, dict.b[i])
		}
	case KindInt32:
		v.i32 = gatherT(v.i32, dict.i32, idx)
	case KindInt64:
		v.i64 = gatherT(v.i64, dict.i64, idx)
	case KindFloat32:
		v.f32 = gatherT(v.f32, dict.f32, idx)
	case KindFloat64:
		v.f64 = gatherT(v.f64, dict.f64, idx)
	case KindBytes:
		for _, i := range idx {
			v.appendBytes(dict.data[dict.offs[i]:dict.offs[i+1]])
		}
	case KindFixed, KindInt96:
		w := v.width
		for _, i := range idx {
			v.fix = append(v.fix, dict.fix[int(i)*w:int(i+1)*w]...)
		}
	}
}

func gatherT[T sysmem.Plain](dst, dict []T, idx []uint32) []T {
	dst = grow(dst, len(idx))
	out := dst[len(dst)-len(idx):]
	for j, i := range idx {
		out[j] = dict[i]
	}
	return dst
}

// scatter returns a slice of len(valid) where slot k holds the next value of
// vals when valid[k], else the zero value; with valid nil it returns vals
// itself. The caller has checked that vals has exactly as many values as
// valid has true entries, and gives up vals: when its capacity holds
// len(valid) values, they are spread in place (backwards: value j moves
// to a slot k >= j), else into new memory.
func scatter[T any](vals []T, valid []bool) []T {
	if valid == nil {
		return vals
	}
	var zero T
	if cap(vals) >= len(valid) {
		out := vals[:len(valid)]
		j := len(vals) - 1
		for k := len(valid) - 1; k >= 0; k-- {
			if valid[k] {
				out[k] = out[j]
				j--
			} else {
				out[k] = zero
			}
		}
		return out
	}
	out := make([]T, len(valid))
	j := 0
	for k, ok := range valid {
		if ok {
			out[k] = vals[j]
			j++
		}
	}
	return out
}

// reserve makes room in v for n more values of a fixed-width kind without
// growing again (a page's values, and its null slots for scatter).
func (v *values) reserve(n int) {
	switch v.kind {
	case KindInt32:
		v.i32 = reserveT(v.i32, n)
	case KindFloat32:
		v.f32 = reserveT(v.f32, n)
	case KindInt64:
		v.i64 = reserveT(v.i64, n)
	case KindFloat64:
		v.f64 = reserveT(v.f64, n)
	case KindBool:
		v.b = reserveT(v.b, n)
	}
}

func reserveT[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	ns := make([]T, len(s), max(len(s)+n, 2*cap(s)))
	copy(ns, s)
	return ns
}

// fill moves v's values into c, spreading them over len(valid) slots when
// valid is not nil.
func (v *values) fill(c *Column, valid []bool) {
	c.Kind = v.kind
	if v.indexed && v.dict == nil {
		v.unindex() // no dictionary-encoded value at all
	}
	if v.indexed {
		c.DictIndex = scatter(v.idx, valid)
		c.DictData, c.DictOffsets = v.dict.data, v.dict.offs
		if c.DictData == nil {
			c.DictData = []byte{}
		}
		return
	}
	switch v.kind {
	case KindBool:
		c.Bool = scatter(v.b, valid)
	case KindInt32:
		c.Int32 = scatter(v.i32, valid)
	case KindInt64:
		c.Int64 = scatter(v.i64, valid)
	case KindFloat32:
		c.Float32 = scatter(v.f32, valid)
	case KindFloat64:
		c.Float64 = scatter(v.f64, valid)
	case KindBytes:
		c.Data = v.data
		if c.Data == nil {
			c.Data = []byte{}
		}
		c.ByteOffsets = v.offs
		if valid != nil {
			offs := make([]int64, len(valid)+1)
			j := 0
			for k, ok := range valid {
				if ok {
					j++
				}
				offs[k+1] = v.offs[j]
			}
			c.ByteOffsets = offs
		}
	case KindFixed, KindInt96:
		c.Width = v.width
		c.FixedData = v.fix
		if valid != nil {
			w := v.width
			out := make([]byte, len(valid)*w)
			j := 0
			for k, ok := range valid {
				if ok {
					copy(out[k*w:(k+1)*w], v.fix[j*w:(j+1)*w])
					j++
				}
			}
			c.FixedData = out
		}
	}
}

// split keeps v's values [0, a) in v and returns a new values holding
// [a, n), with room for capHint more, in the same form (indexed values
// share the dictionary); BYTE_ARRAY values get room for window more
// values as long on average as those before a.
func (v *values) split(a, capHint, window int, sp *spareValues) *values {
	t := &values{kind: v.kind, width: v.width, indexed: v.indexed, dict: v.dict}
	if v.indexed {
		n := capHint + len(v.idx) - a
		t.idx = append(reuseOr(&sp.idx, n, n+n/8), v.idx[a:]...)
		t.offs = []int64{0} // for unindex
		v.idx = v.idx[:a]   // its capacity kept, as splitT does
		return t
	}
	switch v.kind {
	case KindBool:
		t.b = splitT(&v.b, a, capHint, &sp.b)
	case KindInt32:
		t.i32 = splitT(&v.i32, a, capHint, &sp.i32)
	case KindInt64:
		t.i64 = splitT(&v.i64, a, capHint, &sp.i64)
	case KindFloat32:
		t.f32 = splitT(&v.f32, a, capHint, &sp.f32)
	case KindFloat64:
		t.f64 = splitT(&v.f64, a, capHint, &sp.f64)
	case KindBytes:
		d0 := v.offs[a]
		room := 0
		if a > 0 {
			room = int(min(int64(window)*(d0/int64(a)+1), 1<<30))
		}
		t.data = append(make([]byte, 0, room+len(v.data)-int(d0)), v.data[d0:]...)
		t.offs = make([]int64, 0, capHint+len(v.offs)-a)
		for _, o := range v.offs[a:] {
			t.offs = append(t.offs, o-d0)
		}
		v.data, v.offs = v.data[:d0:d0], v.offs[:a+1:a+1]
	case KindFixed, KindInt96:
		t.fix = splitT(&v.fix, a*v.width, capHint*v.width, nil)
	}
	return t
}

// splitT cuts *s at a: *s keeps [0, a) (and its capacity, the rest being
// copied out: room for scatter to spread its values in place), and the
// rest is returned with room for capHint more, in *spare when it has the
// room (spare may be nil), else in new memory.
func splitT[T sysmem.Plain](s *[]T, a, capHint int, spare *[]T) []T {
	// New memory has an eighth more room: the rest cut off varies (up to
	// a page), and the next split should find room in this memory when
	// it comes back through Recycle.
	n := capHint + len(*s) - a
	t := append(reuseOr(spare, n, n+n/8), (*s)[a:]...)
	*s = (*s)[:a]
	return t
}

// cutFront returns a new values holding v's values [0, a) exactly, in the
// same form, and moves v's values [a, n) to the front of its memory.
func (v *values) cutFront(a int, sp *spareValues) *values {
	h := &values{kind: v.kind, width: v.width, indexed: v.indexed, dict: v.dict}
	if v.indexed {
		h.idx = cutFrontT(&v.idx, a, &sp.idx)
		h.offs = []int64{0} // for unindex
		return h
	}
	switch v.kind {
	case KindBool:
		h.b = cutFrontT(&v.b, a, &sp.b)
	case KindInt32:
		h.i32 = cutFrontT(&v.i32, a, &sp.i32)
	case KindInt64:
		h.i64 = cutFrontT(&v.i64, a, &sp.i64)
	case KindFloat32:
		h.f32 = cutFrontT(&v.f32, a, &sp.f32)
	case KindFloat64:
		h.f64 = cutFrontT(&v.f64, a, &sp.f64)
	case KindBytes:
		d0 := v.offs[a]
		h.data = cutFrontT(&v.data, int(d0), nil)
		h.offs = append([]int64(nil), v.offs[:a+1]...)
		v.offs = v.offs[:copy(v.offs, v.offs[a:])]
		for i := range v.offs {
			v.offs[i] -= d0
		}
	case KindFixed, KindInt96:
		h.fix = cutFrontT(&v.fix, a*v.width, nil)
	}
	return h
}

// cutFrontT returns a copy of (*s)[:a] (in *spare when it has the room;
// spare may be nil) and moves (*s)[a:] to the front of *s's memory.
func cutFrontT[T sysmem.Plain](s *[]T, a int, spare *[]T) []T {
	h := append(reuse(spare, a), (*s)[:a]...)
	*s = (*s)[:copy(*s, (*s)[a:])]
	return h
}
