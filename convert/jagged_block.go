package convert

import (
	"encoding/binary"
	"fmt"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/shardfmt"
)

// jaggedOut is what stage 2 keeps per shard for its jagged tensors: the
// references of the batch's samples, gathered from their records like a
// fixed tensor's samples (refs[t]: refBytes per batch slot of jagged
// tensor t, nil for a fixed one), and the batch's values counts.
type jaggedOut struct {
	refs [][]byte
	vals []uint64
}

// newJaggedOut returns the jagged state of a shard of geometry geo, nil
// without jagged tensors.
func newJaggedOut(geo shardfmt.Geometry) *jaggedOut {
	if !geo.HasJagged() {
		return nil
	}
	j := &jaggedOut{refs: make([][]byte, len(geo.SlabOffset))}
	for t := range geo.SlabOffset {
		if geo.IsJagged(t) {
			j.refs[t] = make([]byte, geo.BatchSize*feature.RefBytes)
		}
	}
	return j
}

// jaggedRetain is the most bytes of a jagged block buffer a shard keeps
// between batches beyond its fixed part; a larger one is dropped after its
// batch is written.
const jaggedRetain = 1 << 20

// jaggedBlock completes the batch of step of o, whose fixed part (o.block,
// the fixed tensors' samples, gathered) holds count samples, into its 2.0
// block: each jagged tensor's offsets slab from the counts of its
// references, then its values slab read from the arena (one read per
// stretch of samples whose values lie next to each other in it), the rest
// zero. It returns the block and the bytes it holds of the stage's jagged
// budget (r.jagBudget), to be released once the block is written. A block
// over feature.Budget.JaggedBlock is refused with ErrValue naming epoch,
// rank, step and the largest jagged tensor.
func (r *runner) jaggedBlock(o *shardOut, step, count int) ([]byte, int64, error) {
	g := o.geo
	j := o.jag
	j.vals = j.vals[:0]
	big, bigN := -1, uint64(0)
	for t := range g.SlabOffset {
		if !g.IsJagged(t) {
			continue
		}
		var n uint64
		for i := range count {
			n += binary.LittleEndian.Uint64(j.refs[t][i*feature.RefBytes+8:])
		}
		j.vals = append(j.vals, n)
		if big < 0 || n*g.SampleBytes[t] > bigN*g.SampleBytes[big] {
			big, bigN = t, n
		}
	}
	lay, err := g.BatchLayout(j.vals)
	if err != nil {
		return nil, 0, fmt.Errorf("epoch %d, rank %d, step %d: %w", o.k.epoch, o.k.rank, step, err)
	}
	if int64(lay.Size) > r.jagBlock || lay.Size > 1<<62 {
		return nil, 0, fmt.Errorf("epoch %d, rank %d, step %d: %w", o.k.epoch, o.k.rank, step,
			feature.ValueErrorf("the batch block would take %d bytes, more than the %d (a quarter of the memory limit, at least 1 MiB) a jagged batch may (tensor %q holds %d values, %d bytes, in it); raise the memory limit or lower the batch size",
				lay.Size, r.jagBlock, r.tensors[big].Name, bigN, bigN*g.SampleBytes[big]))
	}
	held := int64(lay.Size)
	if !r.jagBudget.Admit(r.jagCtx, held) {
		return nil, 0, r.jagCtx.Err()
	}
	block := o.block
	if uint64(cap(block)) < lay.Size {
		nb := make([]byte, lay.Size)
		copy(nb, block)
		block = nb
	} else {
		block = block[:lay.Size]
	}
	last := len(g.SlabOffset) - 1
	pos := g.SlabOffset[last] + g.SlabSize[last]
	for t := range g.SlabOffset {
		if !g.IsJagged(t) {
			continue
		}
		refs := j.refs[t]
		es := int64(g.SampleBytes[t])
		offs := block[g.SlabOffset[t]:]
		var acc uint64
		for i := 0; i <= g.BatchSize; i++ {
			binary.LittleEndian.PutUint64(offs[8*i:], acc)
			if i < count {
				acc += binary.LittleEndian.Uint64(refs[i*feature.RefBytes+8:])
			}
		}
		v := lay.ValuesOffset[t]
		clear(block[pos:v])
		// One read per stretch of samples whose values follow each other
		// in the arena.
		dst := int64(v)
		for i := 0; i < count; {
			src := int64(binary.LittleEndian.Uint64(refs[i*feature.RefBytes:]))
			n := int64(binary.LittleEndian.Uint64(refs[i*feature.RefBytes+8:])) * es
			i++
			for i < count && int64(binary.LittleEndian.Uint64(refs[i*feature.RefBytes:])) == src+n {
				n += int64(binary.LittleEndian.Uint64(refs[i*feature.RefBytes+8:])) * es
				i++
			}
			if n > 0 {
				if err := r.arena.ReadAt(block[dst:dst+n], src); err != nil {
					r.jagBudget.Release(held)
					return nil, 0, err
				}
			}
			dst += n
		}
		pos = v + lay.ValuesSize[t]
	}
	clear(block[pos:])
	if cap(block) <= int(g.BlockSize)+jaggedRetain {
		o.block = block[:g.BlockSize]
	} else {
		o.block = make([]byte, g.BlockSize) // the fixed part rebuilt next batch
	}
	return block, held, nil
}
