package shardfmt

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Geometry is the fixed layout of every batch block of a shard: b sample
// slots for each tensor, tensor i's [b, shape...] slab (C order, row-major,
// little-endian elements) at SlabOffset[i] bytes from the block start.
// Sample j of tensor i is the SampleBytes[i] bytes at
// SlabOffset[i] + j*SampleBytes[i]. Bytes outside the slabs' used prefixes
// are zero.
//
// A jagged tensor (Jagged[i]) has, at SlabOffset[i] of every block, its
// offsets slab: b+1 int64 little-endian, SlabSize[i] = (b+1)*8 bytes, and
// SampleBytes[i] is the bytes of one value. Its values slab follows the
// fixed part of the block and differs in size per batch (BatchLayout), so
// the blocks of a shard with a jagged tensor differ in size: BlockSize is
// then the largest block of the shard (the size a ring buffer or device
// buffer needs), and the size of an empty block in a Writer's Geometry.
type Geometry struct {
	BatchSize   int      // b: sample slots per batch
	BlockSize   uint64   // bytes per batch block (the largest, with jagged tensors), a multiple of 4096 (BlockAlign)
	SlabOffset  []uint64 // per tensor: offset of its slab (offsets slab, if jagged) inside a block, a multiple of 256 (SlabAlign)
	SlabSize    []uint64 // per tensor: b * SampleBytes; (b+1)*8 for a jagged tensor's offsets
	SampleBytes []uint64 // per tensor: bytes of one sample (dtype size * product(shape)); of one value if jagged
	Jagged      []bool   // per tensor: true for a jagged tensor; nil when the shard has none
}

// NewGeometry computes the canonical block geometry for b samples of the
// given tensors: slabs in table order, each starting at the next multiple of
// 256 bytes, the block rounded up to a multiple of 4096 bytes. It returns an
// error wrapping ErrInvalid for b < 1 or b >= 2^32, no tensors, more than
// MaxTensors, an invalid dtype, a rank above 8, a zero dimension, an empty,
// non-UTF-8, over-long or duplicate name, or sizes that overflow u64.
func NewGeometry(b int, tensors []TensorInfo) (Geometry, error) {
	if b < 1 || uint64(b) > 1<<32-1 {
		return Geometry{}, fmt.Errorf("%w: batch size %d not in [1, 2^32)", ErrInvalid, b)
	}
	if len(tensors) == 0 || len(tensors) > MaxTensors {
		return Geometry{}, fmt.Errorf("%w: %d tensors, want 1 to %d", ErrInvalid, len(tensors), MaxTensors)
	}
	g := Geometry{
		BatchSize:   b,
		SlabOffset:  make([]uint64, len(tensors)),
		SlabSize:    make([]uint64, len(tensors)),
		SampleBytes: make([]uint64, len(tensors)),
	}
	seen := make(map[string]bool, len(tensors))
	var end uint64
	jagged := 0
	for i, t := range tensors {
		if err := checkName(t.Name); err != nil {
			return Geometry{}, fmt.Errorf("%w: tensor %d: %v", ErrInvalid, i, err)
		}
		if seen[t.Name] {
			return Geometry{}, fmt.Errorf("%w: duplicate tensor name %q", ErrInvalid, t.Name)
		}
		seen[t.Name] = true
		sb, err := sampleBytes(t.DType, t.Shape)
		if err != nil {
			return Geometry{}, fmt.Errorf("%w: tensor %q: %v", ErrInvalid, t.Name, err)
		}
		size, ok1 := mul64(sb, uint64(b))
		if t.Jagged {
			if jagged++; jagged > MaxJagged {
				return Geometry{}, fmt.Errorf("%w: more than %d jagged tensors", ErrInvalid, MaxJagged)
			}
			if g.Jagged == nil {
				g.Jagged = make([]bool, len(tensors))
			}
			g.Jagged[i] = true
			size, ok1 = (uint64(b)+1)*8, true
		}
		off, ok2 := alignUp(end, SlabAlign)
		e, ok3 := add64(off, size)
		if !ok1 || !ok2 || !ok3 {
			return Geometry{}, fmt.Errorf("%w: tensor %q: block size overflows u64", ErrInvalid, t.Name)
		}
		g.SampleBytes[i], g.SlabSize[i], g.SlabOffset[i], end = sb, size, off, e
	}
	bs, ok := alignUp(end, BlockAlign)
	if !ok {
		return Geometry{}, fmt.Errorf("%w: block size overflows u64", ErrInvalid)
	}
	g.BlockSize = bs
	return g, nil
}

// checkName validates a tensor name: 1 to MaxNameLen bytes of valid UTF-8
// without a NUL byte (the C ABI and the Python binding hand names out as
// NUL-terminated strings, so "a\x00b" would reach them as "a"). Names are
// stored byte-exact (no Unicode normalization).
func checkName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty name")
	case len(s) > MaxNameLen:
		return fmt.Errorf("name of %d bytes exceeds %d", len(s), MaxNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("name %q is not valid UTF-8", s)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("name %q contains a NUL byte", s)
	}
	return nil
}

// sampleBytes returns dtype size * product(shape), overflow-checked.
func sampleBytes(d DType, shape []uint64) (uint64, error) {
	if !d.Valid() {
		return 0, fmt.Errorf("invalid dtype code %d", uint16(d))
	}
	if len(shape) > MaxRank {
		return 0, fmt.Errorf("rank %d exceeds %d", len(shape), MaxRank)
	}
	n := uint64(d.Size())
	for j, dim := range shape {
		if dim == 0 {
			return 0, fmt.Errorf("dimension %d is zero", j)
		}
		var ok bool
		if n, ok = mul64(n, dim); !ok {
			return 0, fmt.Errorf("sample size overflows u64")
		}
	}
	return n, nil
}

// Slab returns the [count, shape...] prefix of tensor i's slab inside block
// (a slice of block, no copy); for a jagged tensor, its count+1 offsets
// (see Reader.Jagged for its values). It panics if block is shorter than
// the fixed part of the block, i is out of range, or count is not in
// [0, BatchSize].
func (g Geometry) Slab(block []byte, i, count int) []byte {
	if count < 0 || count > g.BatchSize {
		panic(fmt.Sprintf("shardfmt: slab count %d not in [0, %d]", count, g.BatchSize))
	}
	off := g.SlabOffset[i]
	n := uint64(count) * g.SampleBytes[i]
	if g.IsJagged(i) {
		n = uint64(count+1) * 8
	}
	return block[off : off+n : off+g.SlabSize[i]]
}

// IsJagged reports whether tensor i is a jagged tensor.
func (g Geometry) IsJagged(i int) bool { return g.Jagged != nil && g.Jagged[i] }

// HasJagged reports whether the shard has a jagged tensor (and so is
// format 2.0, with blocks of varying size).
func (g Geometry) HasJagged() bool { return g.Jagged != nil }

// firstNonZeroPadding returns the block offset of the first nonzero byte
// that lies outside the used prefixes [off, off+count*sampleBytes) of the
// fixed slabs, the jagged tensors' whole offsets slabs and their values
// slabs (values(j) values for the j-th jagged tensor), or -1 when all such
// bytes are zero. block is exactly the batch's block.
func (g Geometry) firstNonZeroPadding(block []byte, count int, values func(j int) uint64) int64 {
	var pos uint64
	bad := int64(-1)
	g.usedRanges(count, values, func(start, end uint64) bool {
		if p := firstNonZero(block[pos:start]); p >= 0 {
			bad = int64(pos) + p
			return false
		}
		pos = end
		return true
	})
	if bad >= 0 {
		return bad
	}
	if p := firstNonZero(block[pos:]); p >= 0 {
		return int64(pos) + p
	}
	return -1
}

var zeros [64 << 10]byte

// firstNonZero returns the index of the first nonzero byte of b, or -1.
func firstNonZero(b []byte) int64 {
	var base int64
	for len(b) > 0 {
		n := min(len(b), len(zeros))
		if string(b[:n]) != string(zeros[:n]) {
			for j, c := range b[:n] {
				if c != 0 {
					return base + int64(j)
				}
			}
		}
		b, base = b[n:], base+int64(n)
	}
	return -1
}
