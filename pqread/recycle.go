package pqread

import "sync"

// This file recycles the memory of decoded values: a consumer that is done
// with a Column gives it back (Release), and the next column chunks
// decoded take their value and level buffers from it instead of
// allocating, so a reader of many row groups does not allocate (and the
// runtime zero, or the kernel fault in) fresh memory for every chunk.

// recycleMin is the least capacity in bytes a buffer must have to be
// recycled: smaller ones cost less to allocate than to pool.
const recycleMin = 16 << 10

// slicePool is a pool of slices of T, handed out empty.
type slicePool[T any] struct{ p sync.Pool } // *[]T

// get returns an empty slice with room for n elements: a recycled one when
// the pool holds one large enough, else a new one.
func (sp *slicePool[T]) get(n int) []T {
	if b, ok := sp.p.Get().(*[]T); ok {
		if cap(*b) >= n {
			return (*b)[:0]
		}
		sp.p.Put(b)
	}
	return make([]T, 0, n)
}

// put recycles s (its contents are not kept) when it is large enough.
func (sp *slicePool[T]) put(s []T, size int) {
	if cap(s)*size >= recycleMin {
		s = s[:0]
		sp.p.Put(&s)
	}
}

var (
	poolBool   slicePool[bool]
	poolU8     slicePool[uint8]
	poolI32    slicePool[int32]
	poolI64    slicePool[int64]
	poolF32    slicePool[float32]
	poolF64    slicePool[float64]
	poolUint32 slicePool[uint32]
)

// Release gives the memory of c's values, offsets and validity back to
// pqread, for the column chunks read after it to decode into: c, and every
// slice taken from its fields, must not be used after. The dictionary of a
// Column in dictionary form (DictData, DictOffsets), which a ColumnReader
// shares between its windows, is not recycled. Release is optional (a
// Column that is never released is collected as any memory), and safe for
// concurrent use with reads.
func (c *Column) Release() {
	poolBool.put(c.Bool, 1)
	poolBool.put(c.RowValid, 1)
	poolBool.put(c.ElemValid, 1)
	poolBool.put(c.ListValid, 1)
	poolI32.put(c.Int32, 4)
	poolI64.put(c.Int64, 8)
	poolI64.put(c.Offsets, 8)
	poolI64.put(c.InnerOffsets, 8)
	poolI64.put(c.ByteOffsets, 8)
	poolF32.put(c.Float32, 4)
	poolF64.put(c.Float64, 8)
	poolU8.put(c.Data, 1)
	poolU8.put(c.FixedData, 1)
	poolUint32.put(c.DictIndex, 4)
	*c = Column{}
}
