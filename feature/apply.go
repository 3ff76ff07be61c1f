package feature

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"unsafe"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// RowRun is a stretch of wanted rows [Lo, Hi) of a row group whose
// samples go to consecutive record slots starting at Dst.
type RowRun struct {
	Lo, Hi int
	Dst    int64
}

// chunkLoc locates a column chunk for errors. A transform given a slice of
// the column chunk's rows (pqread.Column.Slice) numbers rows within the
// slice; rowBase, the row of the row group that is the slice's row 0, is
// added to them so errors name the row within the row group.
type chunkLoc struct {
	file     string
	column   string
	tensor   string
	rowGroup int
	rowBase  int64
	// counts, when set, are the whole column chunk's counts for error
	// messages, given with a slice of it; otherwise they are taken from the
	// column given, the whole chunk.
	counts *chunkCounts
}

// chunkCounts are the counts over a whole column chunk that transform
// errors quote.
type chunkCounts struct {
	nulls       int // null rows
	nullElems   int // null list elements
	otherLength int // non-null list rows whose length is not the shape's
}

// add adds the counts of col, a column chunk or a slice of one, for tp.
func (c *chunkCounts) add(tp *tensorPlan, col *pqread.Column) {
	c.nulls += countFalse(col.RowValid)
	c.nullElems += countFalse(col.ElemValid)
	if lk, ok := tp.kind.(*listKind); ok {
		c.otherLength += lk.otherLengths(col)
	}
}

// chunkCounts returns the whole column chunk's counts for an error in col.
func (l chunkLoc) chunkCounts(tp *tensorPlan, col *pqread.Column) chunkCounts {
	if l.counts != nil {
		return *l.counts
	}
	var c chunkCounts
	c.add(tp, col)
	return c
}

func (l chunkLoc) err(row int64, elem int64, err error) error {
	return &Error{File: l.file, Column: l.column, Tensor: l.tensor, RowGroup: l.rowGroup, Row: l.rowBase + row, Element: elem, Err: err}
}

var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// asBytes views a slice of fixed-size numbers as bytes (for identity copies
// on little-endian hosts).
func asBytes[T int32 | int64 | float32 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// stridedCopy stores v[k] at dst[k*stride:] in native (little-endian) byte
// order: the identity conversion of a column into records. It checks once
// that the last value fits, then writes without per-value bounds checks.
func stridedCopy[T int32 | int64 | float32 | float64](dst []byte, stride int, v []T) {
	if len(v) == 0 {
		return
	}
	size := int(unsafe.Sizeof(v[0]))
	if stride == size {
		copy(dst, asBytes(v))
		return
	}
	_ = dst[(len(v)-1)*stride+size-1] // bounds check once
	base := unsafe.Pointer(unsafe.SliceData(dst))
	for k, x := range v {
		*(*T)(unsafe.Add(base, k*stride)) = x
	}
}

// skipNulls runs write, a writer of slots [lo, hi) into dst (slot i at
// dst[(i-lo)*stride:]) that stops at the first value it cannot convert
// and returns its index, over [lo, hi) to the end: a failure at a slot
// that valid (nil: every slot holds a value) marks null is passed over
// and the slots after it are written all the same. A null slot holds
// zero bytes, which some classes cannot convert (an INT96 of Julian day
// 0 lies outside the int64 nanosecond range); the caller writes the
// null slots' fill. It returns the index of the first valid slot that
// failed and its error.
func skipNulls(dst []byte, stride int, valid []bool, lo, hi int, write func(dst []byte, lo, hi int) (int, error)) (int, error) {
	start := lo
	for lo < hi {
		bad, err := write(dst[(lo-start)*stride:], lo, hi)
		if err == nil {
			return 0, nil
		}
		if valid == nil || valid[bad] {
			return bad, err
		}
		lo = bad + 1
	}
	return 0, nil
}

// writeValues converts values [lo, hi) of col to tp's dtype, writing value i
// at dst[(i-lo)*stride:]. On failure it returns the index of the bad value.
func (tp *tensorPlan) writeValues(dst []byte, stride int, col *pqread.Column, cls srcClass, scale int, lo, hi int) (int, error) {
	e := tp.enc
	if lo >= hi {
		return 0, nil
	}
	switch cls {
	case clsF32:
		v := col.Float32
		if e.dt == shardfmt.F32 {
			if nativeLE {
				stridedCopy(dst, stride, v[lo:hi])
				return 0, nil
			}
			for i := lo; i < hi; i++ {
				binary.LittleEndian.PutUint32(dst[(i-lo)*stride:], math.Float32bits(v[i]))
			}
			return 0, nil
		}
		for i := lo; i < hi; i++ {
			if err := e.putFloat(dst[(i-lo)*stride:], float64(v[i])); err != nil {
				return i, err
			}
		}
	case clsF64:
		v := col.Float64
		if e.dt == shardfmt.F64 {
			if nativeLE {
				stridedCopy(dst, stride, v[lo:hi])
				return 0, nil
			}
			for i := lo; i < hi; i++ {
				binary.LittleEndian.PutUint64(dst[(i-lo)*stride:], math.Float64bits(v[i]))
			}
			return 0, nil
		}
		for i := lo; i < hi; i++ {
			if err := e.putFloat(dst[(i-lo)*stride:], v[i]); err != nil {
				return i, err
			}
		}
	case clsInt, clsUint, clsBool:
		switch col.Kind {
		case pqread.KindInt32:
			v := col.Int32
			if e.dt == shardfmt.I32 && cls == clsInt && nativeLE {
				stridedCopy(dst, stride, v[lo:hi])
				return 0, nil
			}
			for i := lo; i < hi; i++ {
				var err error
				if cls == clsUint {
					err = e.putUint(dst[(i-lo)*stride:], uint64(uint32(v[i])))
				} else {
					err = e.putInt(dst[(i-lo)*stride:], int64(v[i]))
				}
				if err != nil {
					return i, err
				}
			}
		case pqread.KindInt64:
			v := col.Int64
			if e.dt == shardfmt.I64 && cls == clsInt && nativeLE {
				stridedCopy(dst, stride, v[lo:hi])
				return 0, nil
			}
			for i := lo; i < hi; i++ {
				var err error
				if cls == clsUint {
					err = e.putUint(dst[(i-lo)*stride:], uint64(v[i]))
				} else {
					err = e.putInt(dst[(i-lo)*stride:], v[i])
				}
				if err != nil {
					return i, err
				}
			}
		case pqread.KindBool:
			v := col.Bool
			for i := lo; i < hi; i++ {
				var b int64
				if v[i] {
					b = 1
				}
				if err := e.putInt(dst[(i-lo)*stride:], b); err != nil {
					return i, err
				}
			}
		default:
			return lo, fmt.Errorf("%w: integer column decoded as kind %d", ErrInternal, col.Kind)
		}
	case clsF16:
		w := col.Width
		for i := lo; i < hi; i++ {
			h := binary.LittleEndian.Uint16(col.FixedData[i*w:])
			if err := e.putF16Bits(dst[(i-lo)*stride:], h); err != nil {
				return i, err
			}
		}
	case clsInt96:
		w := col.Width
		for i := lo; i < hi; i++ {
			ns, ok := Int96ToUnixNanos(col.FixedData[i*w : i*w+12])
			if !ok {
				return i, ValueErrorf("INT96 timestamp out of the int64 nanosecond range")
			}
			if err := e.putInt(dst[(i-lo)*stride:], ns); err != nil {
				return i, err
			}
		}
	case clsDecimal:
		for i := lo; i < hi; i++ {
			var u int64
			small := true
			var raw []byte
			switch col.Kind {
			case pqread.KindInt32:
				u = int64(col.Int32[i])
			case pqread.KindInt64:
				u = col.Int64[i]
			case pqread.KindFixed:
				raw = col.FixedData[i*col.Width : (i+1)*col.Width]
				u, small = bigEndianInt64(raw)
			case pqread.KindBytes:
				raw = col.Data[col.ByteOffsets[i]:col.ByteOffsets[i+1]]
				u, small = bigEndianInt64(raw)
			}
			d := dst[(i-lo)*stride:]
			var err error
			switch {
			case small && e.dt == shardfmt.F64:
				binary.LittleEndian.PutUint64(d, math.Float64bits(DecimalToF64(u, scale)))
			case small && e.dt == shardfmt.F32:
				binary.LittleEndian.PutUint32(d, math.Float32bits(DecimalToF32(u, scale)))
			case small:
				err = e.putBig(d, decimalRat(big.NewInt(u), scale))
			default:
				err = e.putBig(d, decimalRat(bigEndianSigned(raw), scale))
			}
			if err != nil {
				return i, err
			}
		}
	default:
		return lo, fmt.Errorf("%w: class %d has no numeric conversion", ErrInternal, cls)
	}
	return 0, nil
}

func isNaNAt(col *pqread.Column, cls srcClass, i int) bool {
	switch cls {
	case clsF32:
		return col.Float32[i] != col.Float32[i]
	case clsF64:
		return col.Float64[i] != col.Float64[i]
	case clsF16:
		h := binary.LittleEndian.Uint16(col.FixedData[i*col.Width:])
		return h&0x7c00 == 0x7c00 && h&0x3ff != 0
	}
	return false
}

func countFalse(v []bool) int {
	n := 0
	for _, b := range v {
		if !b {
			n++
		}
	}
	return n
}

// Records is the staging layout: one fixed-size record per staging slot
// holding every output tensor's sample bytes back to back (tensor t at
// off[t], size[t] bytes), so that gathering a sample touches one place. A
// jagged tensor's part is its reference into the values arena (arena.go).
type Records struct {
	Data []byte
	Rec  int   // bytes per record
	Off  []int // per tensor: offset in the record
	Size []int // per tensor: sample bytes
}

// NewRecords lays out records for the tensors over data (which must hold
// slots*rec bytes, see recordSize).
func NewRecords(tensors []shardfmt.TensorInfo, data []byte) *Records {
	r := &Records{Data: data}
	for _, t := range tensors {
		n := recordBytes(t)
		r.Off = append(r.Off, r.Rec)
		r.Size = append(r.Size, n)
		r.Rec += n
	}
	return r
}

// RecordSize returns the bytes of one staging record for the tensors.
func RecordSize(tensors []shardfmt.TensorInfo) int {
	n := 0
	for _, t := range tensors {
		n += recordBytes(t)
	}
	return n
}

// At returns tensor t's bytes of staging slot slot.
func (r *Records) At(t int, slot int64) []byte {
	o := int(slot)*r.Rec + r.Off[t]
	return r.Data[o : o+r.Size[t] : o+r.Size[t]]
}

// putMask writes the sample's mask byte (1 valid, 0 null) into slot, when
// the tensor has a mask.
func (tp *tensorPlan) putMask(bufs *Records, slot int64, valid bool) {
	if tp.mask < 0 {
		return
	}
	v := byte(0)
	if valid {
		v = 1
	}
	bufs.At(tp.mask, slot)[0] = v
}

func (tp *tensorPlan) putLength(bufs *Records, slot int64, n int64) {
	if tp.lengths < 0 {
		return
	}
	b := bufs.At(tp.lengths, slot)
	if tp.lenDT == shardfmt.I64 {
		binary.LittleEndian.PutUint64(b, uint64(n))
	} else {
		binary.LittleEndian.PutUint32(b, uint32(n))
	}
}
