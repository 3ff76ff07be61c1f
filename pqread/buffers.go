package pqread

import (
	"sync"
	"unsafe"

	"github.com/prepml/prep/internal/sysmem"
)

// Buffers holds the memory of decoded Columns a caller is done with (Put),
// and of the read, decompression and level buffers of finished reads, for
// the reads given it (ReadColumnInto) to decode into instead of into
// memory allocated for each column chunk: memory the process touches for
// the first time costs a page fault a page, which on a virtual machine
// costs more than decoding the page's values. A read takes, for each
// buffer it needs, the smallest one held that has room and is at most
// about twice as large (so that a small column does not take the room a
// large one needs), and otherwise allocates. Buffers holds at most its
// limit in bytes: a Put beyond it leaves the rest to the garbage
// collector. It is safe for concurrent use.
type Buffers struct {
	mu    sync.Mutex
	limit int64
	held  int64

	b   [][]bool
	u8  [][]uint8
	u32 [][]uint32
	i32 [][]int32
	i64 [][]int64
	f32 [][]float32
	f64 [][]float64
}

// NewBuffers returns an empty Buffers that holds at most limit bytes
// (limit <= 0: none, every Put is dropped).
func NewBuffers(limit int64) *Buffers { return &Buffers{limit: max(0, limit)} }

// HeldBytes returns the bytes of the buffers held.
func (b *Buffers) HeldBytes() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// Put takes the memory of c, a Column the caller is done with (c and
// every slice taken from it), for later reads: its values, dictionary
// indices, offsets and validity. The dictionary entries (DictData,
// DictOffsets) are not taken. c must not be used after; a nil Buffers or
// Column does nothing.
func (b *Buffers) Put(c *Column) {
	if b == nil || c == nil {
		return
	}
	b.mu.Lock()
	putT(b, &b.b, c.Bool)
	putT(b, &b.i32, c.Int32)
	putT(b, &b.i64, c.Int64)
	putT(b, &b.f32, c.Float32)
	putT(b, &b.f64, c.Float64)
	putT(b, &b.u32, c.DictIndex)
	putT(b, &b.i64, c.Offsets)
	putT(b, &b.i64, c.InnerOffsets)
	putT(b, &b.b, c.RowValid)
	putT(b, &b.b, c.ElemValid)
	putT(b, &b.b, c.ListValid)
	putT(b, &b.u8, c.Data)
	putT(b, &b.i64, c.ByteOffsets)
	putT(b, &b.u8, c.FixedData)
	b.mu.Unlock()
	*c = Column{}
}

// bufferFloor is the least capacity, in elements, worth holding: smaller
// buffers are cheap to allocate, and live in pages the heap has faulted
// in already. A variable for tests, which hold buffers of any size.
var bufferFloor = 4 << 10

// putT adds s to *list unless it is small, its memory is held already,
// or it does not fit the limit. b.mu is held.
func putT[T any](b *Buffers, list *[][]T, s []T) {
	if cap(s) < bufferFloor {
		return
	}
	s = s[:cap(s)]
	size := int64(cap(s)) * int64(unsafe.Sizeof(s[0]))
	if b.held+size > b.limit {
		return
	}
	p := unsafe.SliceData(s)
	for _, h := range *list {
		if unsafe.SliceData(h) == p {
			return // the same memory handed back twice
		}
	}
	*list = append(*list, s[:0])
	b.held += size
}

// takeT returns an empty slice with room for n elements: the smallest
// held in *list with room for n and at most twice n (and a page) more,
// else new memory of capacity alloc (>= n).
func takeT[T sysmem.Plain](b *Buffers, list func(*Buffers) *[][]T, n, alloc int) []T {
	if b != nil && n >= bufferFloor/2 {
		b.mu.Lock()
		l := list(b)
		best := -1
		for i, s := range *l {
			if c := cap(s); c >= n && c <= 2*n+bufferFloor && (best < 0 || c < cap((*l)[best])) {
				best = i
			}
		}
		if best >= 0 {
			s := (*l)[best]
			last := len(*l) - 1
			(*l)[best] = (*l)[last]
			(*l)[last] = nil
			*l = (*l)[:last]
			b.held -= int64(cap(s)) * int64(unsafe.Sizeof(s[:1][0]))
			b.mu.Unlock()
			return s[:0]
		}
		b.mu.Unlock()
		// Room for a sixteenth more, in whole pages: the next requests
		// for this buffer's use vary a little (the same column's chunks
		// in other row groups), and should find it fits.
		alloc = max(alloc, n+n/16)
		if w := int(unsafe.Sizeof(*new(T))); w > 0 {
			per := 4096 / w
			alloc = (alloc + per - 1) / per * per
		}
	}
	return sysmem.MakeHuge[T](0, alloc)
}

// giveT hands s, a buffer a read is done with, to b (nil: dropped).
func giveT[T any](b *Buffers, list func(*Buffers) *[][]T, s []T) {
	if b == nil || s == nil {
		return
	}
	b.mu.Lock()
	putT(b, list(b), s)
	b.mu.Unlock()
}

// The lists of Buffers, one per element type, for takeT and giveT.
func boolsOf(b *Buffers) *[][]bool     { return &b.b }
func uint8sOf(b *Buffers) *[][]uint8   { return &b.u8 }
func uint32sOf(b *Buffers) *[][]uint32 { return &b.u32 }
func int32sOf(b *Buffers) *[][]int32   { return &b.i32 }
func int64sOf(b *Buffers) *[][]int64   { return &b.i64 }
func float32sOf(b *Buffers) *[][]float32 {
	return &b.f32
}
func float64sOf(b *Buffers) *[][]float64 { return &b.f64 }
