package feature

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// srcClass is how a source column's values are interpreted.
type srcClass int

const (
	clsBool srcClass = iota + 1
	clsInt
	clsUint
	clsF32
	clsF64
	clsF16
	clsInt96
	clsDecimal
	clsBytes
)

// tensorPlan is a TensorSpec compiled against the sources: what every
// tensor kind shares (dtype, output tensor indices, fill bytes, and per
// file the resolved columns), and its kind (kind.go), which embeds it.
type tensorPlan struct {
	spec      *TensorSpec
	kind      tensorKind
	dt        shardfmt.DType
	enc       encoder
	shape     []uint64
	es        int // bytes per value
	out       int // index of the main tensor among the outputs
	mask      int // index of <name>_mask, -1 if none
	elemMask  int // index of <name>_element_mask, -1 if none
	lengths   int // index of <name>_lengths, -1 if none
	lenDT     shardfmt.DType
	fill      []byte // per value, nil = nulls are errors
	elemFill  []byte // list null element value, nil = errors
	nanError  bool
	text      bool // the column holds text (STRING, ENUM or JSON): truncation is a fix to suggest (tooLong)
	maxValue  int64
	base      string                // the name <name>_mask and <name>_element_mask extend when not the spec's (a map's <name>.values)
	overflows atomic.Int64          // narrow-float overflows stored as ±Inf (see cast.go)
	cols      [][]pqread.ColumnInfo // [file][j]
	classes   [][]srcClass          // [file][j]
	signature []string              // [j]: type signature of the first file
}

// outputs returns the TensorInfo of every output tensor of the plans, in
// table order (each tensor followed by its mask, element mask, lengths),
// setting the plans' output indices.
func outputs(plans []*tensorPlan) []shardfmt.TensorInfo {
	var out []shardfmt.TensorInfo
	for _, tp := range plans {
		out = tp.kind.outputs(out)
	}
	return out
}

// baseName is the name tp's mask and element mask extend: the spec's
// name, or a map's for its <name>.values.
func (tp *tensorPlan) baseName() string {
	if tp.base != "" {
		return tp.base
	}
	return tp.spec.Name
}

// sampleBytes returns dtype size * product(shape) of t: the bytes of one
// sample, or of one value of a jagged tensor.
func sampleBytes(t shardfmt.TensorInfo) int {
	n := t.DType.Size()
	for _, d := range t.Shape {
		n *= int(d)
	}
	return n
}

// fileSchema is what the checks need from one opened source file.
type fileSchema struct {
	rel     string         // path relative to the plan root
	part    *filePartition // its hive partition keys and values; nil: none
	columns []pqread.ColumnInfo
	lookup  func(name string) (pqread.ColumnInfo, error)
}

// compileSpec resolves every tensor of spec against every file's schema and
// checks that each column converts to its dtype and that types agree across
// files. Errors are *Error naming file, column and types.
func compileSpec(spec *Spec, files []fileSchema) ([]*tensorPlan, error) {
	var plans []*tensorPlan
	if err := partitionOnly(spec); err != nil {
		return nil, err
	}
	for i := range spec.Tensors {
		if spec.Tensors[i].Partition != "" {
			tp, err := compilePartition(&spec.Tensors[i], files)
			if err != nil {
				return nil, err
			}
			plans = append(plans, tp)
			continue
		}
		if spec.Tensors[i].Map != nil {
			mps, err := compileMap(&spec.Tensors[i], files)
			if err != nil {
				return nil, err
			}
			plans = append(plans, mps...)
			continue
		}
		tp, err := compileTensor(&spec.Tensors[i], files)
		if err != nil {
			return nil, err
		}
		plans = append(plans, tp)
	}
	return plans, nil
}

// columnList names the leaf columns cols (at most 20, then a count) for an
// error message, in the spec's column name syntax.
func columnList(cols []pqread.ColumnInfo) string {
	const most = 20
	var b strings.Builder
	for i, c := range cols {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(cols)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", c.Name)
	}
	return b.String()
}

// groupError explains a spec column name that is no leaf column but names
// a group of the schema (a map, a list of lists, a list of structs, a
// struct): the leaf columns whose schema path, wrapper levels included,
// starts with the name's fields. A group holding a leaf pqread cannot read
// gives an error wrapping pqread.ErrUnsupported with the reason; any other
// group an ErrSchema asking for one of its leaves. It returns nil when no
// leaf lies under name.
func groupError(name string, cols []pqread.ColumnInfo) error {
	fields := nameFields(name)
	var under []pqread.ColumnInfo
	for _, c := range cols {
		if len(c.Path) > len(fields) && slices.Equal(c.Path[:len(fields)], fields) {
			under = append(under, c)
		}
	}
	if len(under) == 0 {
		return nil
	}
	for _, c := range under {
		if c.Unsupported != "" {
			why := strings.TrimPrefix(c.Unsupported, pqread.ErrUnsupported.Error()+": ")
			return fmt.Errorf("%w: %q is a nested column that cannot be read: %s", pqread.ErrUnsupported, name, why)
		}
	}
	for _, c := range under {
		if c.MapRole != "" && slices.Equal(pqread.SplitName(c.Group), fields) {
			return schemaErrorf("%q is a map, not a leaf column; give it a map policy (map: {key_dtype: D}, map: {key_bytes: ...} or map: {keys: [...], fill: F}) or name one of its leaf columns %s", name, columnList(under))
		}
	}
	return schemaErrorf("%q is a group, not a leaf column; name one of its leaf columns %s", name, columnList(under))
}

// nameFields splits a spec column name into its field names: a JSON array
// of names, or names joined by "." with "." and "\\" inside a name escaped
// by a backslash (pqread's syntax).
func nameFields(name string) []string {
	if strings.HasPrefix(name, "[") {
		var fields []string
		if err := json.Unmarshal([]byte(name), &fields); err == nil && len(fields) > 0 {
			return fields
		}
		return []string{name}
	}
	return pqread.SplitName(name)
}

func compileTensor(t *TensorSpec, files []fileSchema) (*tensorPlan, error) {
	dt, err := shardfmt.ParseDType(t.DType)
	if err != nil {
		return nil, &Error{Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: specErrorf("%v", err)}
	}
	round := ""
	if t.Cast != nil {
		round = t.Cast.Round
	}
	tp := &tensorPlan{spec: t, dt: dt, enc: newEncoder(dt, round), es: dt.Size(),
		nanError: t.NaN != nil && t.NaN.Policy == "error", maxValue: t.MaxValueBytes}
	tp.enc.overflowErr = t.Cast != nil && t.Cast.Overflow == "error"
	tp.enc.overflows = &tp.overflows
	terr := func(err error) error {
		return &Error{Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: err}
	}
	var re *regexp.Regexp
	if t.ColumnsRegex != "" {
		re = regexp.MustCompile(t.ColumnsRegex) // validated by Spec.Validate
	}
	for fi, f := range files {
		var cols []pqread.ColumnInfo
		switch {
		case t.Column != "" || len(t.Columns) > 0:
			names := t.Columns
			if t.Column != "" {
				names = []string{t.Column}
			}
			for _, n := range names {
				ci, err := f.lookup(n)
				if err != nil && t.Image != nil && errors.Is(err, pqread.ErrNotFound) {
					// A struct holding the image in its field bytes
					// (Hugging Face datasets' struct<bytes, path>).
					if sci, serr := f.lookup(imageBytesField(n)); serr == nil {
						ci, err = sci, nil
					}
				}
				if err != nil {
					if errors.Is(err, pqread.ErrNotFound) {
						if nerr := groupError(n, f.columns); nerr != nil {
							return nil, &Error{File: f.rel, Column: n, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: nerr}
						}
						err = fmt.Errorf("%v; the file's columns are %s", err, columnList(f.columns))
					}
					return nil, &Error{File: f.rel, Column: n, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
						Err: fmt.Errorf("%w: %v", ErrSchema, err)}
				}
				cols = append(cols, ci)
			}
		default:
			for _, ci := range f.columns {
				if re.MatchString(ci.Name) {
					cols = append(cols, ci)
				}
			}
			if len(cols) == 0 {
				return nil, &Error{File: f.rel, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
					Err: schemaErrorf("no column matches columns_regex %q", t.ColumnsRegex)}
			}
		}
		if fi > 0 && slices.EqualFunc(cols, tp.cols[fi-1], pqread.ColumnInfo.Equal) {
			// Files of one schema share one copy of the tensor's columns
			// and classes for the whole run: 5,000 columns resolved in each
			// of 16 files held 20 MB of the Go heap.
			tp.cols = append(tp.cols, tp.cols[fi-1])
			tp.classes = append(tp.classes, tp.classes[fi-1])
			continue
		}
		classes := make([]srcClass, len(cols))
		for j, ci := range cols {
			cls, err := classify(ci, t, dt)
			if err != nil {
				return nil, &Error{File: f.rel, Column: ci.Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: err}
			}
			classes[j] = cls
		}
		if fi == 0 {
			for _, ci := range cols {
				tp.signature = append(tp.signature, typeSignature(ci))
			}
		} else {
			if len(cols) != len(tp.cols[0]) {
				return nil, &Error{File: f.rel, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
					Err: schemaErrorf("columns_regex %q matches %d columns, but %d in %s", t.ColumnsRegex, len(cols), len(tp.cols[0]), files[0].rel)}
			}
			for j, ci := range cols {
				if re != nil && ci.Name != tp.cols[0][j].Name {
					return nil, &Error{File: f.rel, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
						Err: schemaErrorf("columns_regex %q matches %q as value %d, but %q in %s", t.ColumnsRegex, ci.Name, j, tp.cols[0][j].Name, files[0].rel)}
				}
				if sig := typeSignature(ci); sig != tp.signature[j] && (t.Cast == nil || !t.Cast.Widen) {
					return nil, &Error{File: f.rel, Column: ci.Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
						Err: schemaErrorf("type %s differs from %s in %s (declare cast.widen to accept both)", sig, tp.signature[j], files[0].rel)}
				}
			}
		}
		tp.cols = append(tp.cols, cols)
		tp.classes = append(tp.classes, classes)
	}
	if len(files) == 0 {
		return nil, terr(schemaErrorf("no source files"))
	}
	// Mode and shape from the first file (the others agree, checked above,
	// except under cast.widen where list-ness is still required to agree).
	first := tp.cols[0]
	isList := first[0].List
	tp.text = isText(first[0])
	for fi := range tp.cols {
		if tp.cols[fi][0].List != isList {
			return nil, &Error{File: files[fi].rel, Column: tp.cols[fi][0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: schemaErrorf("is a list in one file and not in another")}
		}
	}
	switch {
	case t.Image != nil:
		if tp.classes[0][0] != clsBytes || isList {
			return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: schemaErrorf("%s: an image policy reads a binary column (or a struct whose field bytes is one) holding one encoded image per row", typeSignature(first[0]))}
		}
		k, err := compileImage(tp)
		if err != nil {
			return nil, terr(err)
		}
		tp.kind = k
	case tp.classes[0][0] == clsBytes && !isList && t.bytesJagged():
		tp.kind = &bytesJaggedKind{tensorPlan: tp}
	case tp.classes[0][0] == clsBytes && isList && !t.jagged():
		return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
			Err: schemaErrorf("%s: a list of strings or binary values becomes a tensor only as a jagged list: list: {jagged: true} with bytes: {mode: hash, buckets: N} (dtype I64, one per element) or {mode: pad, max_len: L} (dtype U8, [L] per element)", typeSignature(first[0]))}
	case tp.classes[0][0] == clsBytes && !isList:
		if t.Bytes.Mode == "hash" {
			tp.kind = &hashKind{tensorPlan: tp, buckets: t.Bytes.Buckets}
		} else {
			tp.kind = &padKind{tensorPlan: tp, maxLen: t.Bytes.MaxLen, truncate: t.Bytes.Truncate}
			if t.Shape == nil {
				tp.shape = []uint64{uint64(t.Bytes.MaxLen)}
			}
			tp.lenDT, _ = lengthsDType(t.Bytes.LengthsDType)
		}
	case isList:
		if len(first) != 1 {
			return nil, terr(schemaErrorf("list column %q cannot be stacked with other columns", first[0].Name))
		}
		depth := max(1, first[0].Depth)
		for fi := range tp.cols {
			if d := max(1, tp.cols[fi][0].Depth); d != depth {
				return nil, &Error{File: files[fi].rel, Column: tp.cols[fi][0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
					Err: schemaErrorf("is a list of depth %d here and of depth %d in %s", d, depth, files[0].rel)}
			}
		}
		if t.jagged() {
			jk := &jaggedKind{tensorPlan: tp, depth: depth, innerLens: -1}
			tp.kind = jk
			if b := t.Bytes; b != nil {
				// A map's string keys (map.key_bytes): hashed to one I64,
				// or padded to a U8 value of shape [max_len].
				jk.buckets, jk.maxLen, jk.truncate = b.Buckets, b.MaxLen, b.Truncate
				if b.Mode == "pad" {
					tp.es = int(b.MaxLen)
					tp.shape = []uint64{uint64(b.MaxLen)}
				}
			}
			break
		}
		if depth > 1 {
			return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: specErrorf("a list of lists (depth %d) becomes a tensor only as list: {jagged: true} (--tensor NAME=COL:DTYPE:jagged)", depth)}
		}
		if t.Shape == nil {
			return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: specErrorf("list column needs a shape (the fixed number of values per sample: --tensor NAME=COL:DTYPE:SHAPE), or list: {jagged: true} (--tensor NAME=COL:DTYPE:jagged)")}
		}
		lk := &listKind{tensorPlan: tp, length: int(shapeProduct(t.Shape))}
		tp.kind = lk
		if t.List != nil {
			lk.truncate = t.List.Truncate
			tp.lenDT, _ = lengthsDType(t.List.LengthsDType)
		}
	default:
		if t.List != nil {
			return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: schemaErrorf("list policy given for a column that is not a list")}
		}
		tp.kind = &stackKind{tensorPlan: tp}
		if t.Shape == nil && len(first) > 1 {
			tp.shape = []uint64{uint64(len(first))}
		}
		if t.Shape != nil && shapeProduct(t.Shape) != int64(len(first)) {
			return nil, terr(specErrorf("shape %v holds %d values per sample, but %d columns are given", t.Shape, shapeProduct(t.Shape), len(first)))
		}
	}
	if tp.shape == nil {
		for _, d := range t.Shape {
			tp.shape = append(tp.shape, uint64(d))
		}
	}
	_, isHash := tp.kind.(*hashKind)
	_, isPad := tp.kind.(*padKind)
	_, isJagged := tp.kind.(*jaggedKind)
	_, isBytesJagged := tp.kind.(*bytesJaggedKind)
	if t.Bytes != nil && !isHash && !isPad && ((!isJagged && !isBytesJagged) || tp.classes[0][0] != clsBytes) {
		return nil, &Error{File: files[0].rel, Column: first[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
			Err: schemaErrorf("bytes policy given for a %s column", typeSignature(first[0]))}
	}
	// Fill values.
	fillEnc := tp.enc
	fillEnc.overflows = nil // fill values are not source values
	if isHash {
		fillEnc = newEncoder(shardfmt.I64, "")
	}
	fillEnc.constant = true
	enc := func(n *Number, what string) ([]byte, error) {
		b := make([]byte, fillEnc.size)
		var err error
		if n.isInt {
			err = fillEnc.putInt(b, n.i)
		} else {
			err = fillEnc.putFloat(b, n.f)
		}
		if err != nil {
			return nil, terr(specErrorf("%s %s: %v", what, n, err))
		}
		return b, nil
	}
	if t.Nulls != nil && t.Nulls.Fill != nil {
		if isPad {
			if !(t.Nulls.Fill.isInt && t.Nulls.Fill.i == 0) {
				return nil, terr(specErrorf("nulls.fill in bytes pad mode must be 0 (an empty value)"))
			}
			tp.fill = []byte{0}
		} else if tp.fill, err = enc(t.Nulls.Fill, "nulls.fill"); err != nil {
			return nil, err
		}
	}
	if l := t.List; l != nil {
		if l.Pad != nil {
			pad, err := enc(l.Pad, "list.pad")
			if err != nil {
				return nil, err
			}
			if lk, ok := tp.kind.(*listKind); ok {
				lk.pad = pad
			}
		}
		switch {
		case l.ElementFill != nil && isJagged && t.Bytes != nil && t.Bytes.Mode == "pad":
			// A null string element: an empty value, max_len zero bytes.
			if !(l.ElementFill.isInt && l.ElementFill.i == 0) {
				return nil, terr(specErrorf("list.element_fill in bytes pad mode must be 0 (an empty value)"))
			}
			tp.elemFill = make([]byte, tp.es)
		case l.ElementFill != nil:
			if tp.elemFill, err = enc(l.ElementFill, "list.element_fill"); err != nil {
				return nil, err
			}
		}
	}
	return tp, nil
}

// typeSignature is the type of a column as compared across files.
func typeSignature(ci pqread.ColumnInfo) string {
	s := ci.Physical
	if ci.Physical == "FIXED_LEN_BYTE_ARRAY" {
		s = fmt.Sprintf("%s(%d)", s, ci.Width)
	}
	if ci.Logical != "" {
		s += " " + ci.Logical
	}
	if ci.List {
		s = "LIST<" + s + ">"
	}
	for range ci.Depth - 1 {
		s = "LIST<" + s + ">"
	}
	return s
}

// isUnsigned reports whether an integer column's bits are to be read as
// unsigned: only an INT(bits,false) annotation (or a legacy UINT_n converted
// type, mapped to it by pqread) says so. TIME and TIMESTAMP annotations
// whose isAdjustedToUTC flag is false are signed.
func isUnsigned(ci pqread.ColumnInfo) bool { return ci.Unsigned && ci.BitWidth > 0 }

func isDecimal(logical string) bool { return strings.HasPrefix(strings.ToUpper(logical), "DECIMAL") }

// classify picks the interpretation of a column and checks it converts to dt
// under t's policies.
func classify(ci pqread.ColumnInfo, t *TensorSpec, dt shardfmt.DType) (srcClass, error) {
	if ci.Unsupported != "" {
		why := strings.TrimPrefix(ci.Unsupported, pqread.ErrUnsupported.Error()+": ")
		return 0, fmt.Errorf("%w: %s column cannot be read: %s", pqread.ErrUnsupported, typeSignature(ci), why)
	}
	if ci.Depth > 1 && !t.jagged() {
		return 0, fmt.Errorf("%w: %s column is a list of lists (%d levels of repetition); a tensor reads one level of lists (a jagged one, list: {jagged: true}, reads two)", pqread.ErrUnsupported, typeSignature(ci), ci.Depth)
	}
	var cls srcClass
	switch ci.Physical {
	case "BOOLEAN":
		cls = clsBool
	case "INT32", "INT64":
		switch {
		case isDecimal(ci.Logical):
			cls = clsDecimal
		case isUnsigned(ci):
			cls = clsUint
		default:
			cls = clsInt
		}
	case "INT96":
		cls = clsInt96
	case "FLOAT":
		cls = clsF32
	case "DOUBLE":
		cls = clsF64
	case "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY":
		switch {
		case isDecimal(ci.Logical):
			cls = clsDecimal
		case strings.EqualFold(ci.Logical, "FLOAT16"):
			cls = clsF16
		case ci.Physical == "FIXED_LEN_BYTE_ARRAY" && ci.Width == 2 && t.Cast != nil && t.Cast.FromUnannotated == "F16":
			cls = clsF16
		default:
			cls = clsBytes
		}
	default:
		return 0, schemaErrorf("unsupported physical type %s", ci.Physical)
	}
	sig := typeSignature(ci)
	switch cls {
	case clsBytes:
		if t.Bytes == nil && t.Image == nil {
			if ci.Physical == "FIXED_LEN_BYTE_ARRAY" && ci.Width == 2 && isFloatDType(dt) {
				return 0, schemaErrorf("%s is 2-byte binary without the FLOAT16 annotation; declare cast.from_unannotated: F16 to read it as half floats", sig)
			}
			if ci.List && !t.jagged() {
				return 0, schemaErrorf("%s cannot be read as %s; a list of strings or binary values becomes a tensor only as a jagged list: list: {jagged: true} with bytes: {mode: hash, buckets: N} (dtype I64) or {mode: pad, max_len: L} (dtype U8)%s", sig, dt, flagSpecFile(t))
			}
			return 0, schemaErrorf("%s cannot be read as %s; %s", sig, dt, bytesModeHint(t))
		}
	case clsInt96:
		if dt != shardfmt.I64 {
			return 0, schemaErrorf("%s (timestamp) converts to I64 nanoseconds only, not %s", sig, dt)
		}
	case clsDecimal:
		if (isFloatDType(dt) && dt != shardfmt.F32 && dt != shardfmt.F64) || (!isFloatDType(dt) && ci.Scale != 0) {
			return 0, schemaErrorf("%s converts to F64 or F32 (or to integers when the scale is 0), not %s", sig, dt)
		}
	}
	if cls != clsBytes && t.Bytes != nil {
		return 0, schemaErrorf("bytes policy given for a %s column", sig)
	}
	return cls, nil
}
