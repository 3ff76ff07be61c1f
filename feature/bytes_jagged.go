package feature

import (
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// Jagged bytes (bytes: {mode: jagged}, SPEC.md §2.4.1): a string or binary
// column read as a jagged U8 tensor, each sample holding its value's bytes
// exactly. It is a jagged tensor like a jagged list (values in the arena,
// shard format 2.0) whose row is one value and whose values are that
// value's bytes.

// bytesJaggedKind is a string or binary column read as jagged bytes.
type bytesJaggedKind struct {
	*tensorPlan
	maxRow int64 // the most bytes of one row (setRowLimit)
}

// outputs: the tensor is jagged.
func (tp *bytesJaggedKind) outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	return tp.derived(out, true, nil, nil, nil)
}

// nullError: a null value is an empty one under a null policy only.
func (tp *bytesJaggedKind) nullError(col *pqread.Column, loc chunkLoc, row int) error {
	n := loc.chunkCounts(tp.tensorPlan, col).nulls
	return loc.err(int64(row), -1, ValueErrorf("null value (%d nulls in this column chunk; give nulls: {} to read them as empty values, or nulls: {mask: true} to mark them too)", n))
}

// setRowLimit bounds a row's value to block bytes.
func (tp *bytesJaggedKind) setRowLimit(block int64) { tp.maxRow = block / int64(tp.es) }

// regions: the chunk's bytes, bounded by its uncompressed size
// (jaggedBytesBound).
func (tp *bytesJaggedKind) regions(a *Arena, f *sourceFile, fi, rg int, slots []arenaSlot) {
	ci := tp.cols[fi][0]
	slots[a.ord[tp.out]] = a.region(jaggedBytesBound(f.decodedSize(rg, ci)))
}

// bytesJagged reports whether t reads a string or binary column as jagged
// bytes.
func (t *TensorSpec) bytesJagged() bool { return t.Bytes != nil && t.Bytes.Mode == "jagged" }

// validateBytesJagged checks bytes.mode jagged and the keys it excludes.
func (t *TensorSpec) validateBytesJagged() error {
	b := t.Bytes
	switch {
	case t.DType != "U8":
		return specErrorf("bytes.mode jagged writes U8, not %s", t.DType)
	case t.List != nil:
		return specErrorf("bytes.mode jagged reads one string or binary value per row; a list of strings becomes a jagged tensor with each element hashed or padded (list: {jagged: true}, bytes.mode hash or pad)")
	case t.Shape != nil:
		return specErrorf("bytes.mode jagged takes no shape: the offsets give each sample's length in bytes")
	case b.Buckets != 0 || b.MaxLen != 0 || b.Truncate || b.Lengths || b.LengthsDType != "":
		return specErrorf("bytes.buckets, max_len, truncate, lengths and lengths_dtype do not apply to mode jagged (every byte is kept; the offsets give the lengths)")
	case t.Nulls != nil && t.Nulls.Fill != nil:
		return specErrorf("nulls.fill does not apply to jagged bytes: a null value becomes an empty one (give nulls: {} or nulls: {mask: true})")
	}
	return nil
}

// apply writes the needed rows of col (runs), a BYTE_ARRAY or
// FIXED_LEN_BYTE_ARRAY column, as jagged U8 samples: each value's bytes
// into the arena through vw, the row's reference into its record, and
// its mask. A null row is an empty value under a null policy, else an
// error.
func (tp *bytesJaggedKind) apply(col, _ *pqread.Column, _, _ int, runs []RowRun, bufs *Records, loc chunkLoc, vw *valueWriter) error {
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			null := col.RowValid != nil && !col.RowValid[i]
			var v []byte
			switch {
			case null:
				if tp.spec.Nulls == nil {
					return tp.nullError(col, loc, i)
				}
			case col.Kind == pqread.KindFixed:
				v = col.FixedData[i*col.Width : (i+1)*col.Width]
			default:
				v = col.Data[col.ByteOffsets[i]:col.ByteOffsets[i+1]]
			}
			n := int64(len(v))
			if tp.maxValue > 0 && n > tp.maxValue {
				return loc.err(int64(i), -1, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", n, tp.maxValue))
			}
			if tp.maxRow > 0 && n > tp.maxRow {
				return loc.err(int64(i), -1, ValueErrorf("value has %d bytes, more than the %d one row of jagged tensor %q may hold (a quarter of the memory limit, at least 1 MiB); raise --memory-limit", n, tp.maxRow, tp.spec.Name))
			}
			// In pieces, so that a long value needs no buffer of its size
			// on the way to an arena file; the pieces lie next to each
			// other.
			var at int64
			for a := int64(0); a == 0 || a < n; a += jaggedPiece {
				m := min(n-a, jaggedPiece)
				dst, o, err := vw.reserve(tp.out, m)
				if err != nil {
					return loc.err(int64(i), -1, ValueErrorf("the column chunk's values take more bytes than the bound its footer gives (its uncompressed size, plus 8 bytes a row); a dictionary or DELTA_BYTE_ARRAY chunk repeating long values can; write the column with PLAIN encoding (pyarrow: use_dictionary=False for it)"))
				}
				if a == 0 {
					at = o
				}
				copy(dst, v[a:a+m])
			}
			putRef(bufs.At(tp.out, slot), at, n)
			tp.putMask(bufs, slot, !null)
		}
	}
	return nil
}

// jaggedBytesBound returns the arena bytes of a column chunk of jagged
// bytes whose decoded size pqread.File.DecodedSize estimates as size: its
// uncompressed size plus 8 bytes per level entry and its levels, which
// holds every value of a chunk whose values are stored whole (PLAIN,
// DELTA_LENGTH_BYTE_ARRAY, or a dictionary whose entries are repeated by
// at most 8 bytes a row on average). A chunk whose values take more (a
// dictionary or DELTA_BYTE_ARRAY chunk repeating long values) is refused
// by the arena as its values are written, naming file, column, row group
// and row (SPEC.md §2.4.1).
func jaggedBytesBound(size int64) int64 { return max(0, size) }
