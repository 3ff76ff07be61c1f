package shardfmt

import "fmt"

// Jagged tensors (FORMAT.md, "Jagged tensors"). A block of a shard with
// jagged tensors is its fixed part, laid out as in format 1 (a fixed
// tensor's [b, shape...] slab, a jagged tensor's [b+1] int64 offsets slab,
// each at its SlabOffset), followed by one values slab per jagged tensor in
// table order, each at the next multiple of 256 bytes; the block ends at the
// next multiple of 4096 bytes. The values counts are in the batch table, so
// the layout of every block is known at Open without reading it.

// BlockLayout is the layout of one batch block of a shard with jagged
// tensors: where each jagged tensor's values slab lies, and the block's size.
type BlockLayout struct {
	Size uint64 // bytes of the block, a multiple of 4096 (BlockAlign)
	// ValuesOffset gives, per tensor (table order), the offset of a jagged
	// tensor's values slab from the block start, a multiple of 256
	// (SlabAlign); 0 for a fixed tensor.
	ValuesOffset []uint64
	// ValuesSize gives, per tensor, the bytes of a jagged tensor's values
	// slab: its values count times SampleBytes; 0 for a fixed tensor.
	ValuesSize []uint64
}

// BatchLayout returns the canonical layout of a block whose jagged tensors
// hold values[j] values each (values has one count per jagged tensor, in
// table order: the last of each tensor's offsets). A shard without jagged
// tensors takes an empty values and gives BlockSize. Errors wrap ErrInvalid
// for the wrong number of counts or a block size that overflows u64.
func (g Geometry) BatchLayout(values []uint64) (BlockLayout, error) {
	n := 0
	for i := range g.SlabOffset {
		if g.IsJagged(i) {
			n++
		}
	}
	if len(values) != n {
		return BlockLayout{}, fmt.Errorf("%w: %d values counts for %d jagged tensors", ErrInvalid, len(values), n)
	}
	l := BlockLayout{ValuesOffset: make([]uint64, len(g.SlabOffset)), ValuesSize: make([]uint64, len(g.SlabOffset))}
	size, ok := g.placeValues(func(j int) uint64 { return values[j] }, func(i int, off, size uint64) bool {
		l.ValuesOffset[i], l.ValuesSize[i] = off, size
		return true
	})
	if !ok {
		return BlockLayout{}, fmt.Errorf("%w: block size overflows u64", ErrInvalid)
	}
	l.Size = size
	return l, nil
}

// fixedEnd returns the end of the fixed part of a block: the end of the
// last tensor's slab.
func (g Geometry) fixedEnd() uint64 {
	last := len(g.SlabOffset) - 1
	return g.SlabOffset[last] + g.SlabSize[last]
}

// placeValues walks the values slabs of a block in table order, values(j)
// being the values count of the j-th jagged tensor, calling each (when not
// nil) with tensor index, offset and size; each returning false stops the
// walk. It returns the block size (a multiple of 4096); ok is false when
// an offset or the size overflows u64.
func (g Geometry) placeValues(values func(j int) uint64, each func(i int, off, size uint64) bool) (blockSize uint64, ok bool) {
	end := g.fixedEnd()
	j := 0
	for i := range g.SlabOffset {
		if !g.IsJagged(i) {
			continue
		}
		size, ok1 := mul64(values(j), g.SampleBytes[i])
		off, ok2 := alignUp(end, SlabAlign)
		e, ok3 := add64(off, size)
		if !ok1 || !ok2 || !ok3 {
			return 0, false
		}
		j++
		if each != nil && !each(i, off, size) {
			return 0, true
		}
		end = e
	}
	return alignUp(end, BlockAlign)
}

// usedRanges calls fn, in block order, with the byte ranges of a block that
// may be nonzero: a fixed tensor's first count samples, a jagged tensor's
// whole offsets slab, and each values slab (values(j) values for the j-th
// jagged tensor, whose layout the caller has checked). fn returning false
// stops the walk.
func (g Geometry) usedRanges(count int, values func(j int) uint64, fn func(start, end uint64) bool) {
	for i, off := range g.SlabOffset {
		n := uint64(count) * g.SampleBytes[i]
		if g.IsJagged(i) {
			n = g.SlabSize[i]
		}
		if !fn(off, off+n) {
			return
		}
	}
	if g.HasJagged() {
		g.placeValues(values, func(_ int, off, size uint64) bool { return fn(off, off+size) })
	}
}

// badOffsets checks a jagged tensor's offsets slab (b+1 int64 at off in
// block) for a batch of count samples and n values: offsets[0] = 0, never
// decreasing, offsets[count] = n and every later offset = n (unused slots
// hold empty rows). It returns the byte offset inside the block of the
// first offset that breaks a rule and the rule, or -1.
func badOffsets(block []byte, off uint64, b, count int, n uint64) (int64, string) {
	if offsetsOK(block[off:off+8*uint64(b+1)], count, n) {
		return -1, ""
	}
	return locateBadOffset(block, off, b, count, n)
}

// locateBadOffset is badOffsets' walk that finds and names the first offset
// breaking a rule (-1 when none does). Offsets are signed int64 (FORMAT.md):
// a negative entry, or one beyond the batch's values count n, is named
// itself, not the entry after it that then seems to decrease.
func locateBadOffset(block []byte, off uint64, b, count int, n uint64) (int64, string) {
	var prev uint64
	for j := 0; j <= b; j++ {
		at := off + 8*uint64(j)
		v := le.Uint64(block[at:])
		switch {
		case j == 0 && v != 0:
			return int64(at), fmt.Sprintf("offsets[0] = %d, want 0", int64(v))
		case int64(v) < 0:
			return int64(at), fmt.Sprintf("offsets[%d] = %d is negative", j, int64(v))
		case v > n:
			return int64(at), fmt.Sprintf("offsets[%d] = %d exceeds the batch's values count %d", j, v, n)
		case v < prev:
			return int64(at), fmt.Sprintf("offsets[%d] = %d decreases from %d", j, v, prev)
		case j >= count && v != n:
			return int64(at), fmt.Sprintf("offsets[%d] = %d, want the batch's values count %d", j, int64(v), n)
		}
		prev = v
	}
	return -1, ""
}

// offsetsOK reports whether the offsets in s (b+1 int64, b = len(s)/8)
// keep badOffsets' rules for count samples and n values. It is the check a
// reader makes on every batch, so it is one pass with one branch per entry
// that can only fail; badOffsets walks again to locate and name a failure.
func offsetsOK(s []byte, count int, n uint64) bool {
	if count < 0 || 8*(count+1) > len(s) || le.Uint64(s) != 0 {
		return false
	}
	head, tail := s[8:8*(count+1)], s[8*(count+1):]
	var prev uint64
	for len(head) >= 32 {
		v0, v1, v2, v3 := le.Uint64(head), le.Uint64(head[8:]), le.Uint64(head[16:]), le.Uint64(head[24:])
		if v0 < prev || v1 < v0 || v2 < v1 || v3 < v2 {
			return false
		}
		prev, head = v3, head[32:]
	}
	for len(head) >= 8 {
		v := le.Uint64(head)
		if v < prev {
			return false
		}
		prev, head = v, head[8:]
	}
	if prev != n {
		return false
	}
	for len(tail) >= 8 {
		if le.Uint64(tail) != n {
			return false
		}
		tail = tail[8:]
	}
	return true
}

// JaggedSlab is one batch's part of a jagged tensor, views of its block.
type JaggedSlab struct {
	// N is the batch's values count (Offsets' last entry).
	N uint64
	// Values is the C-order [N, shape...] array of the batch's values,
	// little-endian elements, N*SampleBytes bytes, 256-byte aligned in the
	// block.
	Values []byte
	// Offsets holds Count+1 int64 little-endian (8-byte aligned): sample j's
	// values are rows [Offsets[j], Offsets[j+1]) of Values; the first is 0
	// and the last is N. Pad samples repeat rows like any other.
	Offsets []byte
	// ValuesAt and OffsetsAt are the offsets of Values and Offsets from the
	// block start (ValuesAt a multiple of 256, also when N is 0).
	ValuesAt, OffsetsAt uint64
}

// Offset returns offsets entry j (0 <= j <= Count) as an int.
func (s JaggedSlab) Offset(j int) int { return int(le.Uint64(s.Offsets[8*j:])) }

// valuesCount returns the values count of the j-th jagged tensor of batch k
// from the batch table (0 for a shard without jagged tensors).
func (r *Reader) valuesCount(k, j int) uint64 {
	if r.h.major < JaggedMajorVersion {
		return 0
	}
	return le.Uint64(r.entry(k)[bValues+8*j:])
}

// Jagged returns jagged tensor i's values and offsets in batch k's block
// (from Block or ReadBlock: at least the batch's BatchInfo.Size bytes), after
// checking its offsets: the first is 0, they never decrease, and the one at
// Count and every later one equal the values count in the batch table, so
// every row lies inside the values slab. The slices alias block. Errors are
// *FormatError wrapping ErrCorrupt (bad offsets), ErrInvalid (tensor i is
// not jagged, or block too short), ErrRange or ErrClosed.
func (r *Reader) Jagged(k int, block []byte, i int) (JaggedSlab, error) {
	bi, err := r.Batch(k)
	if err != nil {
		return JaggedSlab{}, err
	}
	if i < 0 || i >= len(r.tensors) || !r.geo.IsJagged(i) {
		return JaggedSlab{}, ferr(r.path, "block", -1, k, ErrInvalid, "tensor %d is not a jagged tensor", i)
	}
	if uint64(len(block)) < bi.Size {
		return JaggedSlab{}, ferr(r.path, "block", -1, k, ErrInvalid, "buffer of %d bytes, block is %d", len(block), bi.Size)
	}
	var s JaggedSlab
	j := 0
	r.geo.placeValues(func(x int) uint64 { return r.valuesCount(k, x) }, func(t int, off, size uint64) bool {
		if t != i {
			j++
			return true
		}
		s.N = r.valuesCount(k, j)
		s.Values = block[off : off+size : off+size]
		s.ValuesAt = off
		return false
	})
	off := r.geo.SlabOffset[i]
	if p, why := badOffsets(block, off, r.geo.BatchSize, bi.Count, s.N); p >= 0 {
		// Located at the block; the entry by index and file offset.
		return JaggedSlab{}, ferr(r.path, "block", int64(bi.Offset), k, ErrCorrupt, "tensor %q: %s (offsets entry %d at file offset %d)",
			r.tensors[i].Name, why, (uint64(p)-off)/8, int64(bi.Offset)+p)
	}
	s.Offsets = block[off : off+uint64(bi.Count+1)*8 : off+uint64(bi.Count+1)*8]
	s.OffsetsAt = off
	return s, nil
}
