package feature

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prepml/prep/pqread"
)

// Maps (SPEC.md §2.6) and the leaves of one list or map: a map policy
// compiled into the tensors it gives (jagged <name>.keys and
// <name>.values, each a jagged plan of one leaf; or one dense plan over
// both leaves for map.keys), the dense transform, and the check that the
// columns of one Group agree on every row's entries.

// inMap reports whether ci is a key or value leaf of the map whose field
// names are fields.
func inMap(ci pqread.ColumnInfo, fields []string) bool {
	return ci.MapRole != "" && slices.Equal(pqread.SplitName(ci.Group), fields)
}

// mapLeaves returns the key and value leaves of the map name in f. A name
// that is no map, a map pqread cannot read, a map without a value field
// (a set of keys), with struct values or with list values is an error
// saying so (ErrSchema, ErrUnsupported or ErrSpec).
func mapLeaves(name string, f fileSchema) (key, value pqread.ColumnInfo, err error) {
	fields := nameFields(name)
	var ks, vs []pqread.ColumnInfo
	for _, c := range f.columns {
		if !inMap(c, fields) {
			continue
		}
		if c.Unsupported != "" {
			why := strings.TrimPrefix(c.Unsupported, pqread.ErrUnsupported.Error()+": ")
			return key, value, fmt.Errorf("%w: map %q cannot be read: %s", pqread.ErrUnsupported, name, why)
		}
		if c.MapRole == "key" {
			ks = append(ks, c)
		} else {
			vs = append(vs, c)
		}
	}
	switch {
	case len(ks)+len(vs) == 0:
		if ci, err := f.lookup(name); err == nil {
			return key, value, schemaErrorf("%q is a %s column, not a map; a map policy reads a MAP column", name, typeSignature(ci))
		}
		if err := groupError(name, f.columns); err != nil {
			return key, value, err
		}
		return key, value, schemaErrorf("no map %q; the file's columns are %s", name, columnList(f.columns))
	case len(ks) != 1:
		return key, value, schemaErrorf("map %q has %d key leaves (%s), want one", name, len(ks), columnList(ks))
	case len(vs) == 0:
		return key, value, schemaErrorf("map %q has no value field (its keys read as a jagged list: %s)", name, leafHint(ks[0]))
	case len(vs) > 1:
		return key, value, schemaErrorf("map %q has struct values (leaves %s); a map policy reads scalar values: read the leaves as jagged lists instead, sharing offsets: %s", name, columnList(vs), leafHints(append(ks, vs...)))
	case ks[0].Depth > 1 || vs[0].Depth > 1:
		return key, value, schemaErrorf("map %q holds lists (%s, %s); a map policy reads scalar keys and values: read the leaves as jagged lists instead, sharing offsets: %s", name, typeSignature(ks[0]), typeSignature(vs[0]), leafHints([]pqread.ColumnInfo{ks[0], vs[0]}))
	}
	return ks[0], vs[0], nil
}

// leafHint is the spec of a tensor reading leaf ci as a jagged list (a
// list of lists gives <name>_inner_lengths too): string or binary values
// through a bytes policy.
func leafHint(ci pqread.ColumnInfo) string {
	h := fmt.Sprintf("{column: %q, list: {jagged: true}", ci.Name)
	if isBytesColumn(ci, &TensorSpec{}) {
		h += ", dtype: I64, bytes: {mode: hash, buckets: N}"
	}
	return h + "}"
}

// leafHints joins the leafHint of each leaf.
func leafHints(cs []pqread.ColumnInfo) string {
	var hs []string
	for _, c := range cs {
		hs = append(hs, leafHint(c))
	}
	return strings.Join(hs, ", ")
}

// isBytesColumn reports whether ci's values are strings or binary for t
// (no DECIMAL, FLOAT16 or cast.from_unannotated reading of them).
func isBytesColumn(ci pqread.ColumnInfo, t *TensorSpec) bool {
	switch {
	case ci.Physical != "BYTE_ARRAY" && ci.Physical != "FIXED_LEN_BYTE_ARRAY":
		return false
	case isDecimal(ci.Logical), strings.EqualFold(ci.Logical, "FLOAT16"):
		return false
	case ci.Physical == "FIXED_LEN_BYTE_ARRAY" && ci.Width == 2 && t.Cast != nil && t.Cast.FromUnannotated == "F16":
		return false
	}
	return true
}

// elemSignature is the type of a list column's elements (typeSignature
// without its LIST levels), as a map's keys and values are named.
func elemSignature(ci pqread.ColumnInfo) string {
	ci.List, ci.Depth = false, 0
	return typeSignature(ci)
}

// isIntegerColumn reports whether ci holds plain integers (INT32 or INT64,
// no DECIMAL), the integer keys map.keys matches by value.
func isIntegerColumn(ci pqread.ColumnInfo) bool {
	return (ci.Physical == "INT32" || ci.Physical == "INT64") && !isDecimal(ci.Logical)
}

// compileMap compiles t, a tensor with a map policy: without map.keys, two
// jagged plans, <name>.keys over the key leaf and <name>.values over the
// value leaf (which carries <name>_mask); with map.keys, one dense plan of
// shape [len(keys)] over both leaves (mapDenseKind). Errors are *Error
// naming file, column and tensor.
func compileMap(t *TensorSpec, files []fileSchema) ([]*tensorPlan, error) {
	m := t.Map
	if len(files) == 0 {
		return nil, &Error{Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: schemaErrorf("no source files")}
	}
	keys := make([]pqread.ColumnInfo, len(files))
	vals := make([]pqread.ColumnInfo, len(files))
	syn := make([]fileSchema, len(files))
	for fi, f := range files {
		k, v, err := mapLeaves(t.Column, f)
		if err != nil {
			return nil, &Error{File: f.rel, Column: t.Column, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: err}
		}
		keys[fi], vals[fi] = k, v
	}
	kname, vname := keys[0].Name, vals[0].Name
	for fi, f := range files {
		// The leaves go by file 0's names; each file gives its own.
		syn[fi] = fileSchema{rel: f.rel, columns: f.columns, lookup: func(n string) (pqread.ColumnInfo, error) {
			switch n {
			case kname:
				return keys[fi], nil
			case vname:
				return vals[fi], nil
			}
			return f.lookup(n)
		}}
	}
	ferr := func(fi int, ci pqread.ColumnInfo, err error) error {
		return &Error{File: files[fi].rel, Column: ci.Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: err}
	}
	for fi := range files {
		if isBytesColumn(vals[fi], t) {
			return nil, ferr(fi, vals[fi], schemaErrorf("map %q has %s values, which convert to no dtype; a map policy reads numeric values (read the leaves as jagged lists instead, sharing offsets: %s)", t.Column, elemSignature(vals[fi]), leafHints([]pqread.ColumnInfo{keys[fi], vals[fi]})))
		}
		strKeys := isBytesColumn(keys[fi], t)
		if strKeys != isBytesColumn(keys[0], t) {
			return nil, ferr(fi, keys[fi], schemaErrorf("map %q has %s keys here and %s keys in %s", t.Column, elemSignature(keys[fi]), elemSignature(keys[0]), files[0].rel))
		}
		switch {
		case m.Keys != nil:
			if !strKeys && !isIntegerColumn(keys[fi]) {
				return nil, ferr(fi, keys[fi], schemaErrorf("map %q has %s keys; map.keys matches integer or string keys only", t.Column, elemSignature(keys[fi])))
			}
		case strKeys && m.KeyBytes == nil:
			return nil, ferr(fi, keys[fi], specErrorf("map %q has %s keys: give map.key_bytes ({mode: hash, buckets: N} or {mode: pad, max_len: L}) to make numbers of them", t.Column, elemSignature(keys[fi])))
		case !strKeys && m.KeyBytes != nil:
			return nil, ferr(fi, keys[fi], specErrorf("map %q has %s keys, which take map.key_dtype, not map.key_bytes", t.Column, elemSignature(keys[fi])))
		case !strKeys && m.KeyDType == "":
			return nil, ferr(fi, keys[fi], specErrorf("map %q has %s keys: give map.key_dtype, the dtype of %s.keys", t.Column, elemSignature(keys[fi]), t.Name))
		}
	}
	vs := TensorSpec{Name: DerivedName(t.Name, DerivedMapValues), Column: vname, DType: t.DType, Nulls: t.Nulls, NaN: t.NaN,
		List: &ListPolicy{Jagged: true}, Cast: t.Cast, MaxValueBytes: t.MaxValueBytes}
	if t.List != nil {
		// A null value: list.element_fill, list.element_mask.
		vs.List.ElementFill, vs.List.ElementMask = t.List.ElementFill, t.List.ElementMask
	}
	if m.Keys != nil {
		vs.Name, vs.Nulls = t.Name, nil
		vp, err := compileTensor(&vs, syn)
		if err != nil {
			return nil, err
		}
		return compileMapDense(t, vp, keys, files)
	}
	ks := TensorSpec{Name: DerivedName(t.Name, DerivedMapKeys), Column: kname, DType: m.KeyDType, NaN: t.NaN,
		List: &ListPolicy{Jagged: true}, Cast: t.Cast, Bytes: m.KeyBytes, MaxValueBytes: t.MaxValueBytes}
	if t.Nulls != nil {
		ks.Nulls = &NullPolicy{} // a null map: no keys (the mask goes with the values)
	}
	if b := m.KeyBytes; b != nil {
		ks.DType = "I64"
		if b.Mode == "pad" {
			ks.DType = "U8"
		}
	}
	kp, err := compileTensor(&ks, syn)
	if err != nil {
		return nil, err
	}
	vp, err := compileTensor(&vs, syn)
	if err != nil {
		return nil, err
	}
	kp.kind.(*jaggedKind).mapRole, vp.kind.(*jaggedKind).mapRole = "key", "value"
	vp.base = t.Name
	return []*tensorPlan{kp, vp}, nil
}

// compileMapDense makes vp, the value leaf compiled as a jagged list, the
// dense plan of t over keys (the key leaf per file) and the value leaf:
// map.keys parsed for the key type, map.fill encoded.
func compileMapDense(t *TensorSpec, vp *tensorPlan, keys []pqread.ColumnInfo, files []fileSchema) ([]*tensorPlan, error) {
	m := t.Map
	terr := func(err error) error {
		return &Error{File: files[0].rel, Column: keys[0].Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1, Err: err}
	}
	vp.spec = t
	mk := &mapDenseKind{tensorPlan: vp}
	vp.kind = mk
	vp.shape = []uint64{uint64(len(m.Keys))}
	ksig := elemSignature(keys[0])
	for fi := range vp.cols {
		ci := keys[fi]
		cls := clsInt
		switch {
		case isBytesColumn(ci, t):
			cls = clsBytes
		case isUnsigned(ci):
			cls = clsUint
		}
		sig := elemSignature(ci)
		if sig != ksig && (t.Cast == nil || !t.Cast.Widen) {
			return nil, &Error{File: files[fi].rel, Column: ci.Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: schemaErrorf("type %s differs from %s in %s (declare cast.widen to accept both)", sig, ksig, files[0].rel)}
		}
		if fi > 0 && cls != vp.classes[0][0] {
			return nil, &Error{File: files[fi].rel, Column: ci.Name, Tensor: t.Name, RowGroup: -1, Row: -1, Element: -1,
				Err: schemaErrorf("keys of type %s do not match map.keys as the %s keys in %s do", sig, ksig, files[0].rel)}
		}
		vp.cols[fi] = []pqread.ColumnInfo{ci, vp.cols[fi][0]}
		vp.classes[fi] = []srcClass{cls, vp.classes[fi][0]}
	}
	vp.signature = []string{ksig, vp.signature[0]}
	switch vp.classes[0][0] {
	case clsBytes:
		mk.denseKeys = make(map[string]int, len(m.Keys))
		for i, k := range m.Keys {
			mk.denseKeys[k] = i
		}
	default:
		// The keys' range: of the widest key type among the files (a
		// key beyond it could match no row of any file).
		bits := 0
		for _, ci := range keys {
			b := 64
			if ci.Physical == "INT32" {
				b = 32
			}
			if ci.BitWidth > 0 && ci.BitWidth < b {
				b = ci.BitWidth
			}
			bits = max(bits, b)
		}
		lo, hi := int64(-1)<<(bits-1), uint64(1)<<(bits-1)-1
		if vp.classes[0][0] == clsUint {
			lo, hi = 0, uint64(1)<<bits-1 // bits <= 32 here, or 64: 1<<64-1 wraps to MaxUint64
		}
		mk.denseInts = make(map[int64]int, len(m.Keys))
		for i, k := range m.Keys {
			var v int64
			var err error
			if vp.classes[0][0] == clsUint {
				var u uint64
				u, err = strconv.ParseUint(k, 10, 64)
				v = int64(u)
			} else {
				v, err = strconv.ParseInt(k, 10, 64)
			}
			if err != nil && !errors.Is(err, strconv.ErrRange) {
				return nil, terr(specErrorf("map.keys[%d] %q is no %s key (map %q has integer keys, given as decimal text)", i, k, ksig, t.Column))
			}
			if out := err != nil || (vp.classes[0][0] == clsUint && uint64(v) > hi) || (vp.classes[0][0] != clsUint && (v < lo || v > int64(hi))); out {
				return nil, terr(specErrorf("map.keys[%d] %q is out of the range of map %q's %s keys [%d, %d]; no row can hold it", i, k, t.Column, ksig, lo, hi))
			}
			if j, ok := mk.denseInts[v]; ok {
				return nil, terr(specErrorf("map.keys[%d] %q and map.keys[%d] %q are the same key", j, m.Keys[j], i, k))
			}
			mk.denseInts[v] = i
		}
	}
	fill, err := encodeNumber(vp, m.Fill)
	if err != nil {
		return nil, terr(specErrorf("map.fill %s: %v", m.Fill, err))
	}
	vp.fill = fill
	return []*tensorPlan{vp}, nil
}

// encodeNumber converts n to tp's dtype as a fill value (never counted as
// an overflow of a source value).
func encodeNumber(tp *tensorPlan, n *Number) ([]byte, error) {
	e := tp.enc
	e.overflows, e.constant = nil, true
	b := make([]byte, e.size)
	if n.isInt {
		return b, e.putInt(b, n.i)
	}
	return b, e.putFloat(b, n.f)
}

// mapDenseKind is a map read dense (map.keys): the values of the listed
// keys, shape [len(keys)], from the map's key leaf (value 0) and value
// leaf (value 1).
type mapDenseKind struct {
	*tensorPlan
	denseKeys map[string]int // string keys: map.keys' index by key bytes
	denseInts map[int64]int  // integer keys: by value (unsigned keys by their bits)
}

// keyed: the value leaf is applied with the key leaf of the same rows.
func (tp *mapDenseKind) keyed() bool { return true }

// nullError: a null map is all fill under a null policy only.
func (tp *mapDenseKind) nullError(col *pqread.Column, loc chunkLoc, row int) error {
	return tp.nullMapError(col, loc, row)
}

// apply writes the needed rows of a map, key and val being its
// leaves' columns of the same rows (file fi), as dense samples: element i
// the value of map.keys[i] in the row, map.fill where the row lacks it. A
// null map row is all fill (mask 0) under nulls, else an error; a null
// value of a listed key takes list.element_fill; a null key, a listed key
// twice in one row and a null value without element_fill are errors
// naming the row and entry; entries of keys not listed are not read.
func (tp *mapDenseKind) apply(val, key *pqread.Column, fi, j int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	if j == 0 {
		return nil // applied with the value leaf
	}
	kcls, vcls := tp.classes[fi][0], tp.classes[fi][1]
	scale := tp.cols[fi][1].Scale
	kloc := loc
	kloc.column = tp.cols[fi][0].Name
	es, L := tp.es, len(tp.spec.Map.Keys)
	seen := make([]int64, L) // row+1 of the row that last held key i
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			slot := r.Dst + int64(i-r.Lo)
			dst := bufs.At(tp.out, slot)
			for k := range L {
				copy(dst[k*es:], tp.fill)
			}
			null := val.RowValid != nil && !val.RowValid[i]
			if null && tp.spec.Nulls == nil {
				return tp.nullError(val, loc, i)
			}
			tp.putMask(bufs, slot, !null)
			if null {
				continue
			}
			s, e := val.Offsets[i], val.Offsets[i+1]
			if key.Offsets[i] != s || key.Offsets[i+1] != e {
				return groupRowError(loc, tp.spec.Column, kloc.column, loc.column, key, val, i)
			}
			for k := s; k < e; k++ {
				if key.ElemValid != nil && !key.ElemValid[k] {
					return kloc.err(int64(i), k-s, ValueErrorf("null map key"))
				}
				at, ok, err := tp.denseIndex(key, kcls, int(k))
				if err != nil {
					return kloc.err(int64(i), k-s, err)
				}
				if !ok {
					continue
				}
				if seen[at] == int64(i)+1 {
					return kloc.err(int64(i), k-s, ValueErrorf("map key %s (map.keys[%d]) appears twice in this row", keyText(key, kcls, int(k)), at))
				}
				seen[at] = int64(i) + 1
				if val.ElemValid != nil && !val.ElemValid[k] {
					if tp.elemFill == nil {
						return loc.err(int64(i), k-s, ValueErrorf("null value of map key %s (set list.element_fill to replace null values)", keyText(key, kcls, int(k))))
					}
					copy(dst[at*es:], tp.elemFill)
					continue
				}
				if tp.nanError && isNaNAt(val, vcls, int(k)) {
					return loc.err(int64(i), k-s, ValueErrorf("NaN value (nan.policy is error)"))
				}
				if _, err := tp.writeValues(dst[at*es:], es, val, vcls, scale, int(k), int(k)+1); err != nil {
					return loc.err(int64(i), k-s, err)
				}
			}
		}
	}
	return nil
}

// slotBytes returns slot k of a KindBytes or KindFixed column.
func slotBytes(col *pqread.Column, k int) []byte {
	if col.Kind == pqread.KindFixed {
		return col.FixedData[k*col.Width : (k+1)*col.Width]
	}
	return col.Data[col.ByteOffsets[k]:col.ByteOffsets[k+1]]
}

// denseIndex returns the index in map.keys of the key in slot k of key,
// and whether it is listed; an error for a string key over
// max_value_bytes.
func (tp *mapDenseKind) denseIndex(key *pqread.Column, cls srcClass, k int) (int, bool, error) {
	if tp.denseKeys != nil {
		b := slotBytes(key, k)
		if tp.maxValue > 0 && int64(len(b)) > tp.maxValue {
			return 0, false, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", len(b), tp.maxValue)
		}
		i, ok := tp.denseKeys[string(b)]
		return i, ok, nil
	}
	i, ok := tp.denseInts[intKey(key, cls, k)]
	return i, ok, nil
}

// intKey is the integer key in slot k of key: its value, or for unsigned
// keys its bits as int64.
func intKey(key *pqread.Column, cls srcClass, k int) int64 {
	if key.Kind == pqread.KindInt32 {
		if cls == clsUint {
			return int64(uint32(key.Int32[k]))
		}
		return int64(key.Int32[k])
	}
	return key.Int64[k]
}

// keyText is the key in slot k for an error message.
func keyText(key *pqread.Column, cls srcClass, k int) string {
	switch {
	case cls == clsBytes:
		return strconv.Quote(string(slotBytes(key, k)))
	case cls == clsUint:
		return strconv.FormatUint(uint64(intKey(key, cls, k)), 10)
	}
	return strconv.FormatInt(intKey(key, cls, k), 10)
}

// writeBytesValues writes slots [lo, hi) of a string column (a map's keys
// under map.key_bytes) as tp's bytes policy gives them, value i at
// dst[(i-lo)*stride:]: hash, one I64 (FNV-1a 64 modulo buckets); pad,
// maxLen bytes zero-padded. On failure (a value over max_len without
// truncate, or over max_value_bytes) it returns the bad value's index.
func (tp *jaggedKind) writeBytesValues(dst []byte, stride int, col *pqread.Column, lo, hi int) (int, error) {
	for i := lo; i < hi; i++ {
		v := slotBytes(col, i)
		if tp.maxValue > 0 && int64(len(v)) > tp.maxValue {
			return i, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", len(v), tp.maxValue)
		}
		d := dst[(i-lo)*stride:]
		if tp.buckets > 0 {
			binary.LittleEndian.PutUint64(d, FNV1a64(v)%tp.buckets)
			continue
		}
		L := int(tp.maxLen)
		if len(v) > L && !tp.truncate {
			policy := "bytes"
			if tp.mapRole == "key" {
				policy = "map.key_bytes"
			}
			return i, tp.tooLong(policy, len(v), L)
		}
		n := copy(d[:L], v)
		clear(d[n:L])
	}
	return 0, nil
}

// groupRowError is the error for row i, where columns a and b (names an,
// bn) of the list or map group disagree on the row's entries or its
// nullness: corrupt input (pqread.ErrCorrupt).
func groupRowError(loc chunkLoc, group, an, bn string, a, b *pqread.Column, i int) error {
	la, lb := a.Offsets[i+1]-a.Offsets[i], b.Offsets[i+1]-b.Offsets[i]
	what := fmt.Sprintf("%d entries in %q, %d in %q", la, an, lb, bn)
	if la == lb {
		what = fmt.Sprintf("null in one of %q and %q only", an, bn)
	}
	loc.column = bn
	return loc.err(int64(i), -1, fmt.Errorf("%w: the leaves of %q disagree on this row (%s); the columns of one list or map hold the same entries in every row", pqread.ErrCorrupt, group, what))
}

// groupRowsDiffer returns the first row in which columns a and b, two
// leaves of one Group over the same rows, differ in their number of
// entries or in being null, or -1 when they agree on every row.
func groupRowsDiffer(a, b *pqread.Column) int {
	if a.Rows != b.Rows {
		return min(a.Rows, b.Rows)
	}
	if !slices.Equal(a.Offsets, b.Offsets) {
		for i := range a.Rows {
			if a.Offsets[i+1]-a.Offsets[i] != b.Offsets[i+1]-b.Offsets[i] {
				return i
			}
		}
	}
	if a.RowValid != nil || b.RowValid != nil {
		for i := range a.Rows {
			if (a.RowValid == nil || a.RowValid[i]) != (b.RowValid == nil || b.RowValid[i]) {
				return i
			}
		}
	}
	return -1
}

// groupMismatch checks that the columns of g's tasks reading leaves of
// one Group (a map's key and value, the fields of a list of structs) agree
// on every row: cols[k] is task k's column, its row 0 being row rowBase of
// the row group. It returns the index of the first task whose column
// disagrees with the first column of its group and the error naming file,
// group, both columns, row group and row (pqread.ErrCorrupt), or -1 and
// nil.
func (d *decoder) groupMismatch(g *rowGroupJob, cols []*pqread.Column, rowBase int) (int, error) {
	first := map[string]int{}
	for k, task := range g.tasks {
		ci := d.plans[task.t].cols[g.fi][task.j]
		if ci.Group == "" || cols[k] == nil {
			continue
		}
		j, ok := first[ci.Group]
		if !ok {
			first[ci.Group] = k
			continue
		}
		cj := d.plans[g.tasks[j].t].cols[g.fi][g.tasks[j].j]
		if cj.Index == ci.Index {
			continue
		}
		if i := groupRowsDiffer(cols[j], cols[k]); i >= 0 {
			loc := chunkLoc{file: d.files[g.fi].rel, tensor: d.plans[task.t].spec.Name, rowGroup: g.rg, rowBase: int64(rowBase)}
			if i >= cols[j].Rows || i >= cols[k].Rows {
				return k, &Error{File: loc.file, Column: ci.Name, Tensor: loc.tensor, RowGroup: g.rg, Row: -1, Element: -1,
					Err: fmt.Errorf("%w: %q holds %d rows here, %q %d", pqread.ErrCorrupt, cj.Name, cols[j].Rows, ci.Name, cols[k].Rows)}
			}
			return k, groupRowError(loc, ci.Group, cj.Name, ci.Name, cols[j], cols[k], i)
		}
	}
	return -1, nil
}

// jointTasks reports whether some task of g needs another's column in the
// same row window: a dense map's value and key, or two leaves of one
// Group, whose agreement is checked.
func (d *decoder) jointTasks(g *rowGroupJob) bool {
	groups := map[string]int{}
	for _, task := range g.tasks {
		tp := d.plans[task.t]
		if tp.kind.keyed() {
			return true
		}
		ci := tp.cols[g.fi][task.j]
		if ci.Group == "" {
			continue
		}
		if j, ok := groups[ci.Group]; ok && j != ci.Index {
			return true
		}
		groups[ci.Group] = ci.Index
	}
	return false
}

// keyOf returns the key column a dense map's value task k applies with
// (the task before it, of the same tensor), nil for any other task.
func (d *decoder) keyOf(g *rowGroupJob, cols []*pqread.Column, k int) *pqread.Column {
	if task := g.tasks[k]; d.plans[task.t].kind.keyed() && task.j == 1 {
		return cols[k-1]
	}
	return nil
}
