package feature

import (
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// stackKind is a fixed tensor of k scalar columns stacked, one value of
// each per sample (shape [k], or the spec's shape holding k values; a
// scalar for one column): value j of a sample is column j's value of the
// row.
type stackKind struct{ *tensorPlan }

// outputs: the mask has the tensor's shape, one byte per column.
func (tp *stackKind) outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	return tp.derived(out, false, tp.shape, nil, nil)
}

// apply writes column j's value of each needed row at value j of its
// sample, nulls as nulls.fill (and 0 in the mask), NaN refused under
// nan.policy error.
func (tp *stackKind) apply(col, _ *pqread.Column, fi, j int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	cls := tp.classes[fi][j]
	scale := tp.cols[fi][j].Scale
	es := tp.es
	rec := bufs.Rec
	buf := bufs.Data
	for _, r := range runs {
		if col.RowValid != nil && tp.fill == nil {
			for i := r.Lo; i < r.Hi; i++ {
				if !col.RowValid[i] {
					return tp.nullError(col, loc, i)
				}
			}
		}
		if tp.nanError {
			for i := r.Lo; i < r.Hi; i++ {
				if (col.RowValid == nil || col.RowValid[i]) && isNaNAt(col, cls, i) {
					return loc.err(int64(i), -1, ValueErrorf("NaN value (nan.policy is error)"))
				}
			}
		}
		base := int(r.Dst)*rec + bufs.Off[tp.out] + j*es
		if bad, err := skipNulls(buf[base:], rec, col.RowValid, r.Lo, r.Hi, func(d []byte, lo, hi int) (int, error) {
			return tp.writeValues(d, rec, col, cls, scale, lo, hi)
		}); err != nil {
			return loc.err(int64(bad), -1, err)
		}
		if col.RowValid != nil {
			for i := r.Lo; i < r.Hi; i++ {
				if !col.RowValid[i] {
					copy(buf[base+(i-r.Lo)*rec:], tp.fill)
				}
			}
		}
		if tp.mask >= 0 {
			mbase := int(r.Dst)*rec + bufs.Off[tp.mask] + j
			for i := r.Lo; i < r.Hi; i++ {
				v := byte(1)
				if col.RowValid != nil && !col.RowValid[i] {
					v = 0
				}
				buf[mbase+(i-r.Lo)*rec] = v
			}
		}
	}
	return nil
}
