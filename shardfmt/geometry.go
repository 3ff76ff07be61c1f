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
type Geometry struct {
	BatchSize   int      // b: sample slots per batch
	BlockSize   uint64   // bytes per batch block, a multiple of 4096 (BlockAlign)
	SlabOffset  []uint64 // per tensor: offset of its slab inside a block, a multiple of 256 (SlabAlign)
	SlabSize    []uint64 // per tensor: b * SampleBytes
	SampleBytes []uint64 // per tensor: bytes of one sample (dtype size * product(shape))
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
// (a slice of block, no copy). It panics if block is shorter than BlockSize,
// i is out of range, or count is not in [0, BatchSize].
func (g Geometry) Slab(block []byte, i, count int) []byte {
	if count < 0 || count > g.BatchSize {
		panic(fmt.Sprintf("shardfmt: slab count %d not in [0, %d]", count, g.BatchSize))
	}
	off := g.SlabOffset[i]
	return block[off : off+uint64(count)*g.SampleBytes[i] : off+g.SlabSize[i]]
}

// firstNonZeroPadding returns the block offset of the first nonzero byte
// that lies outside the used prefixes [off, off+count*sampleBytes) of the
// slabs, or -1 when all such bytes are zero.
func (g Geometry) firstNonZeroPadding(block []byte, count int) int64 {
	var pos uint64
	for i := range g.SlabOffset {
		if p := firstNonZero(block[pos:g.SlabOffset[i]]); p >= 0 {
			return int64(pos) + p
		}
		used := g.SlabOffset[i] + uint64(count)*g.SampleBytes[i]
		pos = g.SlabOffset[i] + g.SlabSize[i]
		if p := firstNonZero(block[used:pos]); p >= 0 {
			return int64(used) + p
		}
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
