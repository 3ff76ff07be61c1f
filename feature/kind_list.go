package feature

import (
	"github.com/prepml/prep/pqread"
)

// listKind is a fixed list: one LIST column, L values per sample (the
// spec's shape), shorter rows padded with list.pad and longer ones cut
// under list.truncate, else refused.
type listKind struct {
	*tensorPlan
	length   int    // L, the values of a sample: the shape's product
	pad      []byte // list pad value, nil = short rows are errors
	truncate bool
}

// rowCost counts the L values of a row.
func (tp *listKind) rowCost() int64 { return 2*int64(tp.length*tp.es) + 2 }

// apply writes each needed row's list as its sample: L values, padded or
// truncated, null elements as list.element_fill, with its mask, element
// mask and length.
func (tp *listKind) apply(col, _ *pqread.Column, fi, j int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	cls := tp.classes[fi][j]
	scale := tp.cols[fi][j].Scale
	L := tp.length
	es := tp.es
	off := col.Offsets
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			dst := bufs.At(tp.out, slot)
			if col.RowValid != nil && !col.RowValid[i] {
				if tp.fill == nil {
					return tp.nullError(col, loc, i)
				}
				for k := 0; k < L; k++ {
					copy(dst[k*es:], tp.fill)
				}
				tp.putMask(bufs, slot, false)
				if tp.elemMask >= 0 {
					clear(bufs.At(tp.elemMask, slot))
				}
				tp.putLength(bufs, slot, 0)
				continue
			}
			start := off[i]
			n := int(off[i+1] - start)
			if (n < L && tp.pad == nil) || (n > L && !tp.truncate) {
				bad := loc.chunkCounts(tp.tensorPlan, col).otherLength
				return loc.err(int64(i), -1, ValueErrorf("list has length %d, not %d (%d rows of this column chunk have another length; %s)", n, L, bad, listLengthHint(tp.spec)))
			}
			m := min(n, L)
			s := int(start)
			if col.ElemValid != nil && tp.elemFill == nil {
				for k := 0; k < m; k++ {
					if !col.ElemValid[s+k] {
						return loc.err(int64(i), int64(k), ValueErrorf("null list element (%d null elements in this column chunk; set list.element_fill to replace them)", loc.chunkCounts(tp.tensorPlan, col).nullElems))
					}
				}
			}
			if tp.nanError {
				for k := 0; k < m; k++ {
					if (col.ElemValid == nil || col.ElemValid[s+k]) && isNaNAt(col, cls, s+k) {
						return loc.err(int64(i), int64(k), ValueErrorf("NaN value (nan.policy is error)"))
					}
				}
			}
			if bad, err := skipNulls(dst, es, col.ElemValid, s, s+m, func(d []byte, lo, hi int) (int, error) {
				return tp.writeValues(d, es, col, cls, scale, lo, hi)
			}); err != nil {
				return loc.err(int64(i), int64(bad-s), err)
			}
			if col.ElemValid != nil {
				for k := 0; k < m; k++ {
					if !col.ElemValid[s+k] {
						copy(dst[k*es:], tp.elemFill)
					}
				}
			}
			for k := m; k < L; k++ {
				copy(dst[k*es:], tp.pad)
			}
			tp.putMask(bufs, slot, true)
			if tp.elemMask >= 0 {
				em := bufs.At(tp.elemMask, slot)
				for k := range em {
					v := byte(0)
					if k < m && (col.ElemValid == nil || col.ElemValid[s+k]) {
						v = 1
					}
					em[k] = v
				}
			}
			tp.putLength(bufs, slot, int64(n))
		}
	}
	return nil
}

// otherLengths counts the non-null rows of col whose list is not L long.
func (tp *listKind) otherLengths(col *pqread.Column) int {
	n := 0
	L := int64(tp.length)
	for k := 0; k < col.Rows; k++ {
		if (col.RowValid == nil || col.RowValid[k]) && col.Offsets[k+1]-col.Offsets[k] != L {
			n++
		}
	}
	return n
}
