package feature

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

// jaggedBlockMin is the least bound of a jagged batch block, whatever the
// memory limit.
const jaggedBlockMin = 1 << 20

// setRowLimit sets the most values of one row of every jagged tensor of
// plans under memoryLimit (Budget.JaggedBlock).
func setRowLimit(plans []*tensorPlan, memoryLimit int64) {
	block := NewBudget(memoryLimit).JaggedBlock()
	for _, tp := range plans {
		if vk, ok := tp.kind.(valuesKind); ok {
			vk.setRowLimit(block)
		}
	}
}

// jaggedKind is a jagged list (list.jagged): one LIST column, every
// element of a row kept, values in the arena and a reference in the
// record. It is also a list of lists (depth 2: the inner lists' values
// flat, their lengths in <name>_inner_lengths) and a map's <name>.keys
// or <name>.values (role), and a list of strings hashed or padded
// (bytes.mode hash or pad: buckets, maxLen).
type jaggedKind struct {
	*tensorPlan
	maxRow    int64  // the most values of one row (setRowLimit)
	depth     int    // 1 for a list, 2 for a list of lists
	innerLens int    // index of <name>_inner_lengths (depth 2), -1 if none
	mapRole   string // "key" or "value" for a map's <name>.keys and <name>.values
	buckets   uint64 // a list of strings hashed (bytes.mode hash)
	maxLen    int64  // a list of strings padded (bytes.mode pad)
	truncate  bool   // bytes.truncate
}

// outputs: the tensor and its element mask are jagged; a list of lists
// has <name>_inner_lengths after them.
func (tp *jaggedKind) outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	tp.innerLens = -1
	return tp.derived(out, true, nil, nil, func(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
		if tp.depth == 2 {
			tp.innerLens = len(out)
			out = append(out, shardfmt.TensorInfo{Name: DerivedName(tp.spec.Name, DerivedInnerLengths), DType: shardfmt.I64, Jagged: true})
		}
		return out
	})
}

// nullError: a null list (or map) is an empty one under a null policy
// only.
func (tp *jaggedKind) nullError(col *pqread.Column, loc chunkLoc, row int) error {
	if tp.mapRole != "" {
		return tp.nullMapError(col, loc, row)
	}
	return tp.nullListError(col, loc, row)
}

// setRowLimit bounds a row to the values of block bytes.
func (tp *jaggedKind) setRowLimit(block int64) { tp.maxRow = block / int64(tp.es) }

// regions: the values of the chunk (valuesBound) in the dtype, one byte
// each for the element mask, and at most one inner list length per level
// entry.
func (tp *jaggedKind) regions(a *Arena, f *sourceFile, fi, rg int, slots []arenaSlot) {
	ci := tp.cols[fi][0]
	vals := valuesBound(f.decodedSize(rg, ci), ci)
	slots[a.ord[tp.out]] = a.region(vals * int64(tp.es))
	if tp.elemMask >= 0 {
		slots[a.ord[tp.elemMask]] = a.region(vals)
	}
	if tp.innerLens >= 0 {
		slots[a.ord[tp.innerLens]] = a.region(8 * vals)
	}
}

// rowSlotLimit returns lim with MaxRowSlots lowered to the most level
// entries a row of the spec's list tensors may hold under memoryLimit
// (the largest over them): for a jagged tensor (or a map), the values of
// a jagged block (Budget.JaggedBlock); for a fixed list, whose rows are
// truncated or padded but decoded whole first, memoryLimit over
// fixedRowEntryBytes. pqread refuses a longer row while reading its page,
// naming file, column, row group and row, before its values are decoded.
// A jagged tensor's own limit, when lower, is checked after decoding
// (jaggedKind.apply).
func rowSlotLimit(spec *Spec, lim pqread.Limits, memoryLimit int64) pqread.Limits {
	b := NewBudget(memoryLimit)
	block := b.JaggedBlock()
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
			most = max(most, b.FixedListRowEntries()) // possibly a fixed list
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
			switch tp.kind.(type) {
			case valuesKind, *mapDenseKind:
				jagged = true
			}
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

// apply writes the needed rows of col (runs) as jagged samples: each
// row's elements converted to the dtype into the arena through vw, the
// row's reference into its record, and its mask and element mask. A null
// row is an empty list under a null policy, else an error; a null element
// takes list.element_fill, or zero under element_mask alone, else is an
// error.
func (tp *jaggedKind) apply(col, _ *pqread.Column, fi, j int, runs []RowRun, bufs *Records, loc chunkLoc, vw *valueWriter) error {
	cls := tp.classes[fi][j]
	scale := tp.cols[fi][j].Scale
	es := int64(tp.es)
	off := col.Offsets
	elemOK := tp.elemFill != nil || tp.elemMask >= 0
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
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
							return loc.err(int64(i), j-l0, ValueErrorf("null inner list (give nulls: {} to read null lists as empty ones)"))
						}
					}
				}
			} else {
				s, n = off[i], off[i+1]-off[i]
			}
			if tp.maxRow > 0 && n > tp.maxRow {
				return loc.err(int64(i), -1, ValueErrorf("list has %d values, more than the %d (%d bytes) one row of jagged tensor %q may hold (a quarter of the memory limit, at least 1 MiB); raise --memory-limit", n, tp.maxRow, tp.maxRow*es, tp.spec.Name))
			}
			if col.ElemValid != nil && !elemOK {
				for k := s; k < s+n; k++ {
					if !col.ElemValid[k] {
						return loc.err(int64(i), k-s, tp.nullElementError(loc.chunkCounts(tp.tensorPlan, col).nullElems))
					}
				}
			}
			if tp.nanError {
				for k := s; k < s+n; k++ {
					if (col.ElemValid == nil || col.ElemValid[k]) && isNaNAt(col, cls, int(k)) {
						return loc.err(int64(i), k-s, ValueErrorf("NaN value (nan.policy is error)"))
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
			putRef(bufs.At(tp.out, slot), at, n)
			if tp.innerLens >= 0 {
				lens, o, err := vw.reserve(tp.innerLens, (l1-l0)*8)
				if err != nil {
					return loc.err(int64(i), -1, err)
				}
				for j := l0; j < l1; j++ {
					binary.LittleEndian.PutUint64(lens[(j-l0)*8:], uint64(col.InnerOffsets[j+1]-col.InnerOffsets[j]))
				}
				putRef(bufs.At(tp.innerLens, slot), o, l1-l0)
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
				putRef(bufs.At(tp.elemMask, slot), at, n)
			}
		}
	}
	return nil
}

// nullElementError is the error of a null element of a jagged tensor
// without element_fill or element_mask, n being the null elements of the
// column chunk: a map's null key or value is refused.
func (tp *jaggedKind) nullElementError(n int) error {
	switch tp.mapRole {
	case "key":
		return ValueErrorf("null map key (%d null keys in this column chunk)", n)
	case "value":
		return ValueErrorf("null map value (%d null values in this column chunk; set list.element_fill or list.element_mask)", n)
	}
	return ValueErrorf("null list element (%d null elements in this column chunk; set list.element_fill or list.element_mask)", n)
}

// jaggedPiece is the most values of a row jaggedKind.apply converts into one
// reservation of the arena.
const jaggedPiece = 16 << 10
