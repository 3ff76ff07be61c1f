package feature

import (
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// A tensor kind is how one tensor's samples are built from its columns:
// one type per kind, each in its own file, behind tensorKind (after
// pqarrow's leafReader, listReader and structReader behind ColumnReader).
// Each kind embeds the *tensorPlan it belongs to, whose fields are the
// ones every kind shares; tensorPlan's methods are the defaults a kind
// overrides (outputs, rowCost, dictForm, keyed, applyFile, nullError);
// apply each kind defines.
//
//	kind             type             file            compiled from
//	fixed stack      stackKind        kind_stack.go   k scalar columns, one value each
//	fixed list       listKind         kind_list.go    one LIST column, L values (shape)
//	bytes hash       hashKind         kind_bytes.go   a string column, FNV-1a 64 into buckets
//	bytes pad        padKind          kind_bytes.go   a string column, zero-padded to max_len
//	jagged list      jaggedKind       jagged.go       a LIST column (depth 1 or 2: a list of
//	                                                  lists), or a map's keys or values
//	jagged bytes     bytesJaggedKind  bytes_jagged.go a string column, every byte kept
//	dense map        mapDenseKind     maps.go         a MAP's key and value leaves (map.keys)
//	image            imageKind        image.go        a binary column of encoded images
//	partition        partitionKind    partition.go    a hive partition key, no column
//
// A new kind is a new type implementing tensorKind in a file of its own,
// and the case of compileTensor (or of compileSpec, for a tensor read
// from no column) that makes it.
//
// Dispatch is per column chunk (or window, or block of it): apply is
// called once per task and block, and loops over the values itself; no
// kind is consulted per value.
type tensorKind interface {
	// outputs appends the tensor's output tensors to out (the main tensor
	// first, then its derived ones: DerivedName), setting the plan's
	// output indices, and returns out.
	outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo
	// rowCost is the estimated bytes per row of one decoded column chunk
	// of the tensor, from its output alone (chunkBytes).
	rowCost() int64
	// dictForm reports whether the tensor's columns are read in
	// dictionary form (pqread.File.ReadColumnDict): string values hashed
	// once per dictionary entry.
	dictForm() bool
	// keyed reports whether the tensor's value j=1 is applied together
	// with its value j=0, a column of the same rows (a dense map's value
	// and key leaves), and value 0 alone not at all.
	keyed() bool
	// apply converts one decoded column chunk (value j of the tensor, from
	// file fi; its row 0 is row loc.rowBase of the row group) into the
	// staging records for the needed rows in runs, a jagged tensor's
	// values into vw. key is the column of value 0 over the same rows
	// when keyed, else nil. Errors are *Error naming file, column, row
	// group and row (chunkLoc).
	apply(col, key *pqread.Column, fi, j int, runs []RowRun, bufs *Records, loc chunkLoc, vw *valueWriter) error
	// applyFile writes the samples of a tensor read from no column (a
	// partition key's value, constant per file fi) into the slots of
	// runs in target; a no-op for the others.
	applyFile(fi int, runs []RowRun, target *Records)
	// nullError is the error of a null row of col where the tensor has
	// no null policy.
	nullError(col *pqread.Column, loc chunkLoc, row int) error
}

// valuesKind is a kind whose samples are jagged: values written to the
// arena (arena.go), references in the records.
type valuesKind interface {
	tensorKind
	// setRowLimit bounds the values of one row to those of block bytes
	// (Budget.JaggedBlock).
	setRowLimit(block int64)
	// regions sets the arena region of each of the tensor's jagged
	// outputs for row group rg of file f (its fi-th file) in slots
	// (indexed by Arena.ord).
	regions(a *Arena, f *sourceFile, fi, rg int, slots []arenaSlot)
}

// The defaults of tensorKind's methods, promoted to every kind that
// embeds *tensorPlan and does not define its own.

// rowCost is 2 * (dtype size) + 2 bytes per row: one value, its levels.
func (tp *tensorPlan) rowCost() int64 { return 2*int64(tp.es) + 2 }

// dictForm is false: values are read decoded.
func (tp *tensorPlan) dictForm() bool { return false }

// keyed is false: each value is applied alone.
func (tp *tensorPlan) keyed() bool { return false }

// applyFile does nothing: the samples come from columns (apply).
func (tp *tensorPlan) applyFile(fi int, runs []RowRun, target *Records) {}

// nullError is the error of a null value without nulls.fill.
func (tp *tensorPlan) nullError(col *pqread.Column, loc chunkLoc, row int) error {
	n := loc.chunkCounts(tp, col).nulls
	return loc.err(int64(row), -1, ValueErrorf("null value (%d nulls in this column chunk; set nulls.fill to replace them)", n))
}

// nullListError is the error of a null list without a null policy.
func (tp *tensorPlan) nullListError(col *pqread.Column, loc chunkLoc, row int) error {
	n := loc.chunkCounts(tp, col).nulls
	return loc.err(int64(row), -1, ValueErrorf("null list (%d nulls in this column chunk; give nulls: {} to read them as empty lists)", n))
}

// nullMapError is the error of a null map without a null policy.
func (tp *tensorPlan) nullMapError(col *pqread.Column, loc chunkLoc, row int) error {
	n := loc.chunkCounts(tp, col).nulls
	return loc.err(int64(row), -1, ValueErrorf("null map (%d nulls in this column chunk; give nulls: {} to read them as empty maps)", n))
}

// derived appends the tensor's main output and its derived outputs to
// out, in table order, setting the plan's output indices: the main
// tensor (jagged: values in the arena), <base>_mask (of shape maskShape)
// under nulls.mask or image.invalid fill, then what afterMask appends,
// <base>_element_mask under list.element_mask, what afterElem appends,
// and <name>_lengths under list.lengths or bytes.lengths.
func (tp *tensorPlan) derived(out []shardfmt.TensorInfo, jagged bool, maskShape []uint64, afterMask, afterElem func([]shardfmt.TensorInfo) []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	tp.out = len(out)
	out = append(out, shardfmt.TensorInfo{Name: tp.spec.Name, DType: tp.dt, Shape: tp.shape, Jagged: jagged})
	tp.mask, tp.elemMask, tp.lengths = -1, -1, -1
	if (tp.spec.Nulls != nil && tp.spec.Nulls.Mask) || tp.spec.imageMasked() {
		tp.mask = len(out)
		out = append(out, shardfmt.TensorInfo{Name: DerivedName(tp.baseName(), DerivedMask), DType: shardfmt.U8, Shape: maskShape})
	}
	if afterMask != nil {
		out = afterMask(out)
	}
	if tp.spec.List != nil && tp.spec.List.ElementMask {
		tp.elemMask = len(out)
		// One byte per element: the fixed list's shape, or per value
		// of a jagged tensor a scalar, whatever the per-value shape
		// of its values (a padded string's [max_len]).
		sh := tp.shape
		if jagged {
			sh = nil
		}
		out = append(out, shardfmt.TensorInfo{Name: DerivedName(tp.baseName(), DerivedElementMask), DType: shardfmt.U8, Shape: sh, Jagged: jagged})
	}
	if afterElem != nil {
		out = afterElem(out)
	}
	if (tp.spec.List != nil && tp.spec.List.Lengths) || (tp.spec.Bytes != nil && tp.spec.Bytes.Lengths) {
		tp.lengths = len(out)
		out = append(out, shardfmt.TensorInfo{Name: DerivedName(tp.spec.Name, DerivedLengths), DType: tp.lenDT, Shape: nil})
	}
	return out
}

// outputs are the common ones: not jagged, a scalar mask per sample.
func (tp *tensorPlan) outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	return tp.derived(out, false, nil, nil, nil)
}
