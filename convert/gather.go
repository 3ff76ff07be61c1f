package convert

import (
	"fmt"
	"unsafe"

	"github.com/prepml/prep/feature"
)

// gatherer copies samples from the staging records into batch blocks (stage
// 2): for batch slot i holding sample id, tensor t's sample bytes go from
// the id's record to block[SlabOffset[t] + i*SampleBytes[t]:].
//
// It copies tensor by tensor (every sample of tensor 0, then of tensor 1,
// ...) rather than sample by sample: the records are read in random order,
// and a run of independent fixed-size loads from distinct records lets the
// CPU overlap their cache and TLB misses, where a per-sample memmove call for
// each tensor serialises them. Bounds are checked once per record and once
// per slab, not per copy. A jagged tensor's reference (arena.go) is
// gathered the same way, into the shard's reference slab (jaggedOut.refs)
// instead of the block.
type gatherer struct {
	data []byte // staging records
	rec  int    // bytes per record
	set  *feature.IDSet
	off  []int    // per tensor: offset in the record
	size []int    // per tensor: sample bytes
	slab []int    // per tensor: slab offset in the block
	refs [][]byte // per tensor: a jagged tensor's reference slab, else nil
	src  []int    // per batch slot: record offset (reused)
	sink byte     // see touch
}

// newGatherer prepares copies from bufs (records of the ids in set) into
// the blocks of o (and its jagged references).
func newGatherer(bufs *feature.Records, set *feature.IDSet, o *shardOut) *gatherer {
	geo := o.geo
	g := &gatherer{data: bufs.Data, rec: bufs.Rec, set: set, off: bufs.Off, size: bufs.Size,
		slab: make([]int, len(geo.SlabOffset)), src: make([]int, 0, geo.BatchSize)}
	for t, off := range geo.SlabOffset {
		g.slab[t] = int(off)
	}
	if o.jag != nil {
		g.refs = o.jag.refs
	}
	return g
}

// gather copies the samples ids into block at slots 0..len(ids)-1. Every id
// must be in the set; slots past len(ids) are left as they are. It returns an
// error (an internal fault, never expected) when a record or a slab would
// fall outside its buffer.
func (g *gatherer) gather(block []byte, ids []uint64) error {
	if len(ids) == 0 || g.rec == 0 {
		return nil
	}
	g.src = g.src[:0]
	limit := len(g.data) - g.rec
	for _, id := range ids {
		if id >= g.set.Bound() || !g.set.Has(id) {
			return fmt.Errorf("%w: sample %d is not staged", feature.ErrInternal, id)
		}
		o := int(g.set.Rank(id)) * g.rec
		if o > limit {
			return fmt.Errorf("%w: staging record of sample %d at %d beyond %d bytes", feature.ErrInternal, id, o, len(g.data))
		}
		g.src = append(g.src, o)
	}
	return g.copySlabs(g.data, block, g.src)
}

// gatherAt copies the records at byte offsets src of data into block at
// slots 0..len(src)-1, like gather. It returns an error (an internal fault)
// when a record or a slab would fall outside its buffer.
func (g *gatherer) gatherAt(data, block []byte, src []int) error {
	if len(src) == 0 || g.rec == 0 {
		return nil
	}
	limit := len(data) - g.rec
	for _, o := range src {
		if o < 0 || o > limit {
			return fmt.Errorf("%w: record at %d beyond %d bytes", feature.ErrInternal, o, len(data))
		}
	}
	return g.copySlabs(data, block, src)
}

// copySlabs copies tensor by tensor from the records at offsets src of data
// (bounds already checked) into block's slabs.
func (g *gatherer) copySlabs(data, block []byte, offs []int) error {
	base := unsafe.Pointer(unsafe.SliceData(data))
	g.touch(base, offs)
	for t, n := range g.size {
		if n == 0 {
			continue
		}
		var dst unsafe.Pointer
		if g.refs != nil && g.refs[t] != nil {
			if len(offs)*n > len(g.refs[t]) {
				return fmt.Errorf("%w: %d references of tensor %d, room for %d", feature.ErrInternal, len(offs), t, len(g.refs[t])/n)
			}
			dst = unsafe.Pointer(unsafe.SliceData(g.refs[t]))
		} else {
			if end := g.slab[t] + len(offs)*n; end > len(block) || g.slab[t] < 0 {
				return fmt.Errorf("%w: slab %d ends at %d, block has %d bytes", feature.ErrInternal, t, end, len(block))
			}
			dst = unsafe.Pointer(unsafe.SliceData(block[g.slab[t]:]))
		}
		src := unsafe.Add(base, g.off[t])
		switch {
		case n == 8:
			for i, o := range offs {
				*(*uint64)(unsafe.Add(dst, i*8)) = *(*uint64)(unsafe.Add(src, o))
			}
		case n == 4:
			for i, o := range offs {
				*(*uint32)(unsafe.Add(dst, i*4)) = *(*uint32)(unsafe.Add(src, o))
			}
		case n == 2:
			for i, o := range offs {
				*(*uint16)(unsafe.Add(dst, i*2)) = *(*uint16)(unsafe.Add(src, o))
			}
		case n == 1:
			for i, o := range offs {
				*(*byte)(unsafe.Add(dst, i)) = *(*byte)(unsafe.Add(src, o))
			}
		case n%8 == 0 && n <= 256:
			for i, o := range offs {
				d, s := unsafe.Add(dst, i*n), unsafe.Add(src, o)
				for k := 0; k < n; k += 8 {
					*(*uint64)(unsafe.Add(d, k)) = *(*uint64)(unsafe.Add(s, k))
				}
			}
		default:
			for i, o := range offs {
				copy(unsafe.Slice((*byte)(unsafe.Add(dst, i*n)), n), unsafe.Slice((*byte)(unsafe.Add(src, o)), n))
			}
		}
	}
	return nil
}

// touch loads one byte of every cache line of each source record, in one
// loop of independent loads: the CPU keeps many of these misses in flight at
// once, so the per-tensor copies that follow find the records in cache
// instead of each taking its own round of misses. The sum only keeps the
// loads from being optimised away.
func (g *gatherer) touch(base unsafe.Pointer, src []int) {
	var sum byte
	last := g.rec - 1
	for _, o := range src {
		p := unsafe.Add(base, o)
		for k := 0; k < last; k += 64 {
			sum += *(*byte)(unsafe.Add(p, k))
		}
		sum += *(*byte)(unsafe.Add(p, last))
	}
	g.sink = sum
}
