package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// Jagged tensors (list.jagged, shard format 2.0): stage 1's transform of a
// LIST column into values in the arena and references in the records,
// and stage 2's build of a batch's variable-size block from them.

// jaggedLimits returns, for a run under memoryLimit, the most bytes of one
// jagged batch block (a quarter of the limit, at least jaggedBlockMin: a
// batch over it is refused) and the bytes of jagged blocks stage 2 builds
// at once (twice that). A row's values count against the first: a single
// row of more values than fit it is refused in stage 1.
func jaggedLimits(memoryLimit int64) (block, inFlight int64) {
	block = max(jaggedBlockMin, memoryLimit/4)
	return block, 2 * block
}

// jaggedBlockMin is the least bound of a jagged batch block, whatever the
// memory limit.
const jaggedBlockMin = 1 << 20

// setRowLimit sets the most values of one row of every jagged tensor of
// plans under memoryLimit (jaggedLimits).
func setRowLimit(plans []*tensorPlan, memoryLimit int64) {
	block, _ := jaggedLimits(memoryLimit)
	for _, tp := range plans {
		if tp.mode == modeJagged {
			tp.maxRow = block / int64(tp.es)
		}
	}
}

// rowSlotLimit returns lim with MaxRowSlots lowered to the most level
// entries a row of the spec's list tensors may hold under memoryLimit
// (the largest over them): for a jagged tensor (or a map), the values of
// a jagged block (jaggedLimits); for a fixed list, whose rows are
// truncated or padded but decoded whole first, memoryLimit over
// fixedRowEntryBytes. pqread refuses a longer row while reading its page,
// naming file, column, row group and row, before its values are decoded.
// A jagged tensor's own limit, when lower, is checked after decoding
// (applyJagged).
func rowSlotLimit(spec *Spec, lim pqread.Limits, memoryLimit int64) pqread.Limits {
	if memoryLimit <= 0 {
		memoryLimit = 1 << 30
	}
	block, _ := jaggedLimits(memoryLimit)
	var most int64
	for i := range spec.Tensors {
		t := &spec.Tensors[i]
		switch {
		case t.jagged() || t.Map != nil:
			dt, err := shardfmt.ParseDType(t.DType)
			if err != nil {
				return lim
			}
			most = max(most, block/int64(dt.Size()))
		case t.Column != "" && t.Bytes == nil && (t.List != nil || t.Shape != nil):
			most = max(most, memoryLimit/fixedRowEntryBytes) // possibly a fixed list
		}
	}
	if most == 0 {
		return lim
	}
	cur := lim.MaxRowSlots
	if cur <= 0 {
		cur = pqread.DefaultLimits.MaxRowSlots
	}
	lim.MaxRowSlots = min(cur, most)
	return lim
}

// explainRowSlots completes a row refused by pqread for its level entries
// (a *pqread.RowSlotsError inside err): it names the tensor reading the
// column and what to do. When the bound passed is below fixedCap (pqread's
// fixed bound, Limits.MaxRowSlots or its default) it is the jagged row or
// fixed-list row bound of rowSlotLimit, which a larger --memory-limit
// raises; otherwise it is the fixed bound, which no memory limit raises.
func explainRowSlots(err *error, plans []*tensorPlan, fixedCap int64) {
	var pe *pqread.Error
	var rs *pqread.RowSlotsError
	if *err == nil || !errors.As(*err, &pe) || !errors.As(pe.Err, &rs) {
		return
	}
	if fixedCap <= 0 {
		fixedCap = pqread.DefaultLimits.MaxRowSlots
	}
	var names []string
	jagged := false
	for _, tp := range plans {
		if slices.ContainsFunc(tp.cols, func(cs []pqread.ColumnInfo) bool {
			return slices.ContainsFunc(cs, func(c pqread.ColumnInfo) bool { return c.Name == pe.Column })
		}) {
			names = append(names, strconv.Quote(tp.spec.Name))
			jagged = jagged || tp.mode == modeJagged || tp.mode == modeMapDense
		}
	}
	tensor := "tensor " + strings.Join(names, ", ")
	if len(names) > 1 {
		tensor = "tensors " + strings.Join(names, ", ")
	}
	switch {
	case rs.Limit < fixedCap && jagged:
		pe.Err = fmt.Errorf("%w, more than one row of jagged %s may hold under the memory limit (a quarter of it, at least 1 MiB, in values of the dtype); raise --memory-limit", pe.Err, tensor)
		return
	case rs.Limit < fixedCap:
		pe.Err = fmt.Errorf("%w, more than one row of fixed-length list %s may hold under the memory limit (a row is decoded whole before it is padded or truncated: the limit over %d bytes per slot); raise --memory-limit", pe.Err, tensor, fixedRowEntryBytes)
		return
	}
	pe.Err = fmt.Errorf("%w, the most one row of a list column may hold whatever the memory limit (%s; %d is a fixed bound of the Parquet reader); split such rows in the source", pe.Err, tensor, rs.Limit)
}

// fixedRowEntryBytes is the memory one level entry of a row of a fixed
// list is counted at when the row's bound is derived from the memory
// limit: twice the decoded bytes of an 8-byte value with its two levels
// and validity (entryBytes), as a windowed row group's pieces count them.
const fixedRowEntryBytes = 22

// applyJagged writes the needed rows of col (runs) as jagged samples: each
// row's elements converted to the dtype into the arena through vw, the
// row's reference into its record, and its mask and element mask. A null
// row is an empty list under a null policy, else an error; a null element
// takes list.element_fill, or zero under element_mask alone, else is an
// error.
func (tp *tensorPlan) applyJagged(col *pqread.Column, cls srcClass, scale int, runs []run, bufs *records, loc chunkLoc, vw *valueWriter) error {
	es := int64(tp.es)
	off := col.Offsets
	elemOK := tp.elemFill != nil || tp.elemMask >= 0
	for _, r := range runs {
		for i := r.lo; i < r.hi; i++ {
			slot := r.dst + int64(i-r.lo)
			null := col.RowValid != nil && !col.RowValid[i]
			var s, n, l0, l1 int64
			if null {
				if tp.spec.Nulls == nil {
					return tp.nullError(col, loc, i)
				}
			} else if tp.depth == 2 {
				// A list of lists: the row's inner lists, and all their
				// slots flat.
				l0, l1 = off[i], off[i+1]
				s, n = col.InnerOffsets[l0], col.InnerOffsets[l1]-col.InnerOffsets[l0]
				if col.ListValid != nil && tp.spec.Nulls == nil {
					for j := l0; j < l1; j++ {
						if !col.ListValid[j] {
							return loc.err(int64(i), j-l0, valueErrorf("null inner list (give nulls: {} to read null lists as empty ones)"))
						}
					}
				}
			} else {
				s, n = off[i], off[i+1]-off[i]
			}
			if tp.maxRow > 0 && n > tp.maxRow {
				return loc.err(int64(i), -1, valueErrorf("list has %d values, more than the %d (%d bytes) one row of jagged tensor %q may hold (a quarter of the memory limit, at least 1 MiB); raise --memory-limit", n, tp.maxRow, tp.maxRow*es, tp.spec.Name))
			}
			if col.ElemValid != nil && !elemOK {
				for k := s; k < s+n; k++ {
					if !col.ElemValid[k] {
						return loc.err(int64(i), k-s, tp.nullElementError(loc.chunkCounts(tp, col).nullElems))
					}
				}
			}
			if tp.nanError {
				for k := s; k < s+n; k++ {
					if (col.ElemValid == nil || col.ElemValid[k]) && isNaNAt(col, cls, int(k)) {
						return loc.err(int64(i), k-s, valueErrorf("NaN value (nan.policy is error)"))
					}
				}
			}
			// In pieces of at most jaggedPiece values, so that a long
			// row needs no buffer of its size on the way to an arena
			// file; consecutive pieces lie next to each other.
			var at int64
			for a := int64(0); a == 0 || a < n; a += jaggedPiece {
				m := min(n-a, jaggedPiece)
				dst, o, err := vw.reserve(tp.out, m*es)
				if err != nil {
					return loc.err(int64(i), -1, err)
				}
				if a == 0 {
					at = o
				}
				bad, err := skipNulls(dst, int(es), col.ElemValid, int(s+a), int(s+a+m), func(d []byte, lo, hi int) (int, error) {
					if cls == clsBytes {
						return tp.writeBytesValues(d, int(es), col, lo, hi)
					}
					return tp.writeValues(d, int(es), col, cls, scale, lo, hi)
				})
				if err != nil {
					return loc.err(int64(i), int64(bad)-s, err)
				}
				if col.ElemValid != nil {
					for k := int64(0); k < m; k++ {
						if !col.ElemValid[s+a+k] {
							if tp.elemFill != nil {
								copy(dst[k*es:], tp.elemFill)
							} else {
								clear(dst[k*es : (k+1)*es])
							}
						}
					}
				}
			}
			putRef(bufs.at(tp.out, slot), at, n)
			if tp.innerLens >= 0 {
				lens, o, err := vw.reserve(tp.innerLens, (l1-l0)*8)
				if err != nil {
					return loc.err(int64(i), -1, err)
				}
				for j := l0; j < l1; j++ {
					binary.LittleEndian.PutUint64(lens[(j-l0)*8:], uint64(col.InnerOffsets[j+1]-col.InnerOffsets[j]))
				}
				putRef(bufs.at(tp.innerLens, slot), o, l1-l0)
			}
			tp.putMask(bufs, slot, !null)
			if tp.elemMask >= 0 {
				var at int64
				for a := int64(0); a == 0 || a < n; a += jaggedPiece {
					m := min(n-a, jaggedPiece)
					em, o, err := vw.reserve(tp.elemMask, m)
					if err != nil {
						return loc.err(int64(i), -1, err)
					}
					if a == 0 {
						at = o
					}
					for k := range em {
						v := byte(1)
						if col.ElemValid != nil && !col.ElemValid[s+a+int64(k)] {
							v = 0
						}
						em[k] = v
					}
				}
				putRef(bufs.at(tp.elemMask, slot), at, n)
			}
		}
	}
	return nil
}

// nullElementError is the error of a null element of a jagged tensor
// without element_fill or element_mask, n being the null elements of the
// column chunk: a map's null key or value is refused.
func (tp *tensorPlan) nullElementError(n int) error {
	switch tp.mapRole {
	case "key":
		return valueErrorf("null map key (%d null keys in this column chunk)", n)
	case "value":
		return valueErrorf("null map value (%d null values in this column chunk; set list.element_fill or list.element_mask)", n)
	}
	return valueErrorf("null list element (%d null elements in this column chunk; set list.element_fill or list.element_mask)", n)
}

// jaggedPiece is the most values of a row applyJagged converts into one
// reservation of the arena.
const jaggedPiece = 16 << 10

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
			j.refs[t] = make([]byte, geo.BatchSize*refBytes)
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
// over the limit of jaggedLimits is refused with ErrValue naming epoch,
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
			n += binary.LittleEndian.Uint64(j.refs[t][i*refBytes+8:])
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
			valueErrorf("the batch block would take %d bytes, more than the %d (a quarter of the memory limit, at least 1 MiB) a jagged batch may (tensor %q holds %d values, %d bytes, in it); raise the memory limit or lower the batch size",
				lay.Size, r.jagBlock, r.tensors[big].Name, bigN, bigN*g.SampleBytes[big]))
	}
	held := int64(lay.Size)
	if !r.jagBudget.admit(r.jagCtx, held) {
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
				acc += binary.LittleEndian.Uint64(refs[i*refBytes+8:])
			}
		}
		v := lay.ValuesOffset[t]
		clear(block[pos:v])
		// One read per stretch of samples whose values follow each other
		// in the arena.
		dst := int64(v)
		for i := 0; i < count; {
			src := int64(binary.LittleEndian.Uint64(refs[i*refBytes:]))
			n := int64(binary.LittleEndian.Uint64(refs[i*refBytes+8:])) * es
			i++
			for i < count && int64(binary.LittleEndian.Uint64(refs[i*refBytes:])) == src+n {
				n += int64(binary.LittleEndian.Uint64(refs[i*refBytes+8:])) * es
				i++
			}
			if n > 0 {
				if err := r.arena.readAt(block[dst:dst+n], src); err != nil {
					r.jagBudget.release(held)
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
