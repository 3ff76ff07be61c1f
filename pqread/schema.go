package pqread

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// SchemaNode is one element of a file's schema tree in depth-first order,
// for display (prep inspect). The root is not included.
type SchemaNode struct {
	Depth      int    // 0 for top-level fields
	Name       string // the field name, byte-exact
	Repetition string // REQUIRED, OPTIONAL or REPEATED
	Physical   string // physical type for leaves, "" for groups
	Logical    string // ColumnInfo.Logical form, or "LIST" / "MAP" for annotated groups
	Children   int    // number of children (0 for leaves)
	Leaf       int    // leaf column index, -1 for groups
}

// Schema returns the schema tree in depth-first order (the root excluded).
func (f *File) Schema() []SchemaNode { return append([]SchemaNode(nil), f.nodes...) }

// leaf is the decoding plan of one leaf column.
type leaf struct {
	info  ColumnInfo
	typ   format.Type
	width int // FIXED_LEN_BYTE_ARRAY width
	dList int // lists: definition level at which the list itself is present
	// dInner: lists of lists (Depth 2): the definition level at which an
	// inner list is present (one below it, the outer list's element is).
	dInner int
	// unsupported, when non-nil, is returned by ReadColumn.
	unsupported error
}

type schemaNode struct {
	el       *format.SchemaElement
	children []*schemaNode
}

const maxSchemaDepth = 64

// buildSchema parses the flattened schema of meta into leaves and display
// nodes. Errors wrap ErrCorrupt.
func buildSchema(els []format.SchemaElement) ([]*leaf, []SchemaNode, error) {
	if len(els) == 0 {
		return nil, nil, corruptf("empty schema")
	}
	pos := 0
	var parse func(depth int) (*schemaNode, error)
	parse = func(depth int) (*schemaNode, error) {
		if depth > maxSchemaDepth {
			return nil, corruptf("schema nested deeper than %d levels", maxSchemaDepth)
		}
		if pos >= len(els) {
			return nil, corruptf("schema ends early: element %d of %d", pos, len(els))
		}
		el := &els[pos]
		pos++
		n := &schemaNode{el: el}
		nc, hasChildren := el.NumChildren.Get()
		if depth == 0 && !hasChildren {
			nc, hasChildren = 0, true
		}
		if hasChildren && (el.Type.Valid == false || depth == 0) {
			if nc < 0 || int(nc) > len(els)-pos {
				return nil, corruptf("schema element %q claims %d children, %d elements remain", el.Name, nc, len(els)-pos)
			}
			for range int(nc) {
				c, err := parse(depth + 1)
				if err != nil {
					return nil, err
				}
				n.children = append(n.children, c)
			}
			return n, nil
		}
		if !el.Type.Valid {
			return nil, corruptf("schema element %q has neither a type nor children", el.Name)
		}
		return n, nil
	}
	root, err := parse(0)
	if err != nil {
		return nil, nil, err
	}
	if pos != len(els) {
		return nil, nil, corruptf("schema has %d trailing elements", len(els)-pos)
	}

	var leaves []*leaf
	var nodes []SchemaNode
	var walk func(n *schemaNode, path []*schemaNode) error
	walk = func(n *schemaNode, path []*schemaNode) error {
		sn := SchemaNode{Depth: len(path) - 1, Name: n.el.Name, Repetition: repetition(n.el), Children: len(n.children), Leaf: -1}
		if len(n.children) == 0 && n.el.Type.Valid {
			sn.Leaf = len(leaves)
			sn.Physical = physicalName(n.el.Type.V)
			l, err := newLeaf(len(leaves), path)
			if err != nil {
				return err
			}
			sn.Logical = l.info.Logical
			leaves = append(leaves, l)
			nodes = append(nodes, sn)
			return nil
		}
		sn.Logical = groupAnnotation(n.el)
		nodes = append(nodes, sn)
		for _, c := range n.children {
			if err := walk(c, append(path[:len(path):len(path)], c)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, c := range root.children {
		if err := walk(c, []*schemaNode{c}); err != nil {
			return nil, nil, err
		}
	}
	return leaves, nodes, nil
}

func repetition(el *format.SchemaElement) string {
	r, ok := el.RepetitionType.Get()
	if !ok {
		return "REQUIRED"
	}
	if r < format.Required || r > format.Repeated {
		return fmt.Sprintf("REPETITION(%d)", int(r))
	}
	return r.String()
}

func repOf(el *format.SchemaElement) format.FieldRepetitionType {
	r, _ := el.RepetitionType.Get()
	return r
}

func isListGroup(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.ListType); ok {
		return true
	}
	ct, ok := el.ConvertedType.Get()
	return ok && ct == deprecated.List
}

func isMapGroup(el *format.SchemaElement) bool {
	if _, ok := el.LogicalType.Value.(*format.MapType); ok {
		return true
	}
	ct, ok := el.ConvertedType.Get()
	return ok && (ct == deprecated.Map || ct == deprecated.MapKeyValue)
}

func groupAnnotation(el *format.SchemaElement) string {
	switch {
	case isListGroup(el):
		return "LIST"
	case isMapGroup(el):
		return "MAP"
	}
	return ""
}

func physicalName(t format.Type) string {
	if kindOf(t) == 0 {
		return fmt.Sprintf("TYPE(%d)", int(t))
	}
	return t.String()
}

func kindOf(t format.Type) Kind {
	switch t {
	case format.Boolean:
		return KindBool
	case format.Int32:
		return KindInt32
	case format.Int64:
		return KindInt64
	case format.Int96:
		return KindInt96
	case format.Float:
		return KindFloat32
	case format.Double:
		return KindFloat64
	case format.ByteArray:
		return KindBytes
	case format.FixedLenByteArray:
		return KindFixed
	}
	return 0
}

// maxFixedWidth bounds FIXED_LEN_BYTE_ARRAY widths accepted from a schema.
const maxFixedWidth = 1 << 24

// newLeaf derives the decoding plan for the leaf at the end of path (path[0]
// is a top-level field).
func newLeaf(index int, path []*schemaNode) (*leaf, error) {
	el := path[len(path)-1].el
	l := &leaf{typ: el.Type.V}
	info := &l.info
	info.Index = index
	info.Physical = physicalName(l.typ)
	info.Kind = kindOf(l.typ)
	if info.Kind == 0 {
		return nil, corruptf("column %q has unknown physical type %d", el.Name, int(l.typ))
	}
	for _, n := range path {
		info.Path = append(info.Path, n.el.Name)
	}
	if l.typ == format.FixedLenByteArray {
		w, _ := el.TypeLength.Get()
		if w <= 0 || w > maxFixedWidth {
			return nil, corruptf("column %q: FIXED_LEN_BYTE_ARRAY width %d out of range", strings.Join(info.Path, "."), w)
		}
		l.width = int(w)
		info.Width = int(w)
	}
	if l.typ == format.Int96 {
		l.width = 12
	}
	setLogical(info, el)

	// Levels and the repeated nodes.
	var reps []int // path indices of the repeated nodes, outermost first
	for i, n := range path {
		switch repOf(n.el) {
		case format.Optional:
			info.MaxDef++
		case format.Repeated:
			info.MaxDef++
			info.MaxRep++
			reps = append(reps, i)
		}
	}
	info.Depth = len(reps)
	info.List = info.Depth > 0
	nl := nameLevels(path, reps)
	info.Name = formatName(nl.fields)
	if info.Depth == 0 {
		info.Nullable = info.MaxDef > 0
		return l, nil
	}
	l.dList = defBefore(path, reps[0])
	info.Nullable = l.dList > 0
	info.ElemNullable = info.MaxDef > l.dList+1
	if info.Depth >= 2 {
		l.dInner = defBefore(path, reps[1])
		info.ElemNullable = info.MaxDef > defBefore(path, reps[len(reps)-1])+1
	}
	if nl.group != info.Name || nl.mapRole != "" {
		info.Group = nl.group
	}
	info.MapRole = nl.mapRole
	switch {
	case nl.unsupported != nil:
		l.unsupported = nl.unsupported
	case info.Depth > 2:
		l.unsupported = unsupportedf("column %q has %d levels of lists, at most 2 are supported", info.Name, info.Depth)
	}
	return l, nil
}

// defBefore returns the definition level of path[:i]: the level a leaf's
// entry has when path[i-1] is present and path[i] is not.
func defBefore(path []*schemaNode, i int) int {
	d := 0
	for _, n := range path[:i] {
		if r := repOf(n.el); r == format.Optional || r == format.Repeated {
			d++
		}
	}
	return d
}

// levelNames is what nameLevels derives from a leaf's path.
type levelNames struct {
	fields      []string // the user-visible field names (wrapper levels dropped)
	group       string   // the name of the list or map of the first repetition level
	mapRole     string   // "key" or "value" when that level is a map
	unsupported error    // a map below the first repetition level, or a malformed map
}

// nameLevels drops the wrapper levels of each repeated node in reps (path
// indices) from the leaf's field names, per the backward-compatibility
// rules of the Parquet LogicalTypes.md:
//
//   - under a MAP (or MAP_KEY_VALUE) group, the repeated key_value group is
//     dropped; its first field is the key, the second the value;
//   - under a LIST group, a repeated primitive, or a repeated group of
//     several fields or named "array" or "<list>_tuple", is the element
//     (2-level list) and is dropped; otherwise the repeated group and its
//     one child (the element) are dropped (3-level list);
//   - a repeated node under any other group is a list named as written.
func nameLevels(path []*schemaNode, reps []int) levelNames {
	var out levelNames
	keep := make([]bool, len(path))
	for i := range keep {
		keep[i] = true
	}
	kept := func(end int) string {
		var f []string
		for i, n := range path[:end] {
			if keep[i] {
				f = append(f, n.el.Name)
			}
		}
		return formatName(f)
	}
	why := "" // why the column cannot be read
	for level, r := range reps {
		rn := path[r]
		var parent *schemaNode
		if r > 0 {
			parent = path[r-1]
		}
		groupEnd := r // the list or map is path[:groupEnd]
		switch {
		case len(rn.children) > 0 && ((parent != nil && isMapGroup(parent.el)) || (isMapGroup(rn.el) && (parent == nil || !isListGroup(parent.el)))):
			keep[r] = false
			name := kept(r)
			if parent == nil {
				name = rn.el.Name
			}
			switch {
			case level > 0:
				why = fmt.Sprintf("map %q inside a list or map (2 levels of repetition); only a map at the first level of repetition is supported", name)
			case len(rn.children) > 2:
				why = fmt.Sprintf("map %q has %d fields in its key_value group, want a key and a value", name, len(rn.children))
			}
			if level == 0 {
				out.mapRole = "value"
				if path[r+1] == rn.children[0] {
					out.mapRole = "key"
				}
			}
		case parent != nil && isListGroup(parent.el):
			switch {
			case len(rn.children) == 0: // 2-level: a repeated primitive is the element
				keep[r] = false
			case len(rn.children) > 1 || rn.el.Name == "array" || rn.el.Name == parent.el.Name+"_tuple":
				keep[r] = false // 2-level: the repeated group is the element (a struct)
			default: // 3-level: repeated group and element
				keep[r] = false
				keep[r+1] = false
			}
		default: // a bare repeated field is the list
			groupEnd = r + 1
		}
		if level == 0 {
			out.group = kept(groupEnd)
		}
	}
	for i, n := range path {
		if keep[i] {
			out.fields = append(out.fields, n.el.Name)
		}
	}
	if why != "" {
		out.unsupported = unsupportedf("column %q: %s", formatName(out.fields), why)
	}
	return out
}

// setLogical fills the logical type fields of info from el.
func setLogical(info *ColumnInfo, el *format.SchemaElement) {
	switch t := el.LogicalType.Value.(type) {
	case *format.StringType:
		info.Logical = "STRING"
		return
	case *format.EnumType:
		info.Logical = "ENUM"
		return
	case *format.JsonType:
		info.Logical = "JSON"
		return
	case *format.BsonType:
		info.Logical = "BSON"
		return
	case *format.UUIDType:
		info.Logical = "UUID"
		return
	case *format.DateType:
		info.Logical = "DATE"
		return
	case *format.Float16Type:
		info.Logical = "FLOAT16"
		return
	case *format.NullType:
		info.Logical = "NULL"
		return
	case *format.VariantType:
		info.Logical = "VARIANT"
		return
	case *format.GeometryType:
		info.Logical = "GEOMETRY"
		return
	case *format.GeographyType:
		info.Logical = "GEOGRAPHY"
		return
	case *format.DecimalType:
		info.Precision, info.Scale = int(t.Precision), int(t.Scale)
		info.Logical = fmt.Sprintf("DECIMAL(%d,%d)", t.Precision, t.Scale)
		return
	case *format.IntType:
		info.BitWidth = int(t.BitWidth)
		info.Unsigned = !t.IsSigned
		info.Logical = fmt.Sprintf("INT(%d,%t)", t.BitWidth, t.IsSigned)
		return
	case *format.TimeType:
		info.TimeUnit, info.UTC = t.Unit.String(), t.IsAdjustedToUTC
		info.Logical = fmt.Sprintf("TIME(%s,%t)", info.TimeUnit, info.UTC)
		return
	case *format.TimestampType:
		info.TimeUnit, info.UTC = t.Unit.String(), t.IsAdjustedToUTC
		info.Logical = fmt.Sprintf("TIMESTAMP(%s,%t)", info.TimeUnit, info.UTC)
		return
	}
	ct, ok := el.ConvertedType.Get()
	if !ok {
		return
	}
	intType := func(bits int, signed bool) {
		info.BitWidth, info.Unsigned = bits, !signed
		info.Logical = fmt.Sprintf("INT(%d,%t)", bits, signed)
	}
	switch ct {
	case deprecated.UTF8:
		info.Logical = "STRING"
	case deprecated.Enum:
		info.Logical = "ENUM"
	case deprecated.Json:
		info.Logical = "JSON"
	case deprecated.Bson:
		info.Logical = "BSON"
	case deprecated.Date:
		info.Logical = "DATE"
	case deprecated.Interval:
		info.Logical = "INTERVAL"
	case deprecated.Decimal:
		p, _ := el.Precision.Get()
		s, _ := el.Scale.Get()
		info.Precision, info.Scale = int(p), int(s)
		info.Logical = fmt.Sprintf("DECIMAL(%d,%d)", p, s)
	case deprecated.TimeMillis:
		info.TimeUnit, info.UTC = "MILLIS", true
		info.Logical = "TIME(MILLIS,true)"
	case deprecated.TimeMicros:
		info.TimeUnit, info.UTC = "MICROS", true
		info.Logical = "TIME(MICROS,true)"
	case deprecated.TimestampMillis:
		info.TimeUnit, info.UTC = "MILLIS", true
		info.Logical = "TIMESTAMP(MILLIS,true)"
	case deprecated.TimestampMicros:
		info.TimeUnit, info.UTC = "MICROS", true
		info.Logical = "TIMESTAMP(MICROS,true)"
	case deprecated.Uint8:
		intType(8, false)
	case deprecated.Uint16:
		intType(16, false)
	case deprecated.Uint32:
		intType(32, false)
	case deprecated.Uint64:
		intType(64, false)
	case deprecated.Int8:
		intType(8, true)
	case deprecated.Int16:
		intType(16, true)
	case deprecated.Int32:
		intType(32, true)
	case deprecated.Int64:
		intType(64, true)
	}
}

// formatName joins field names with "." escaping "." and "\" inside names
// with a backslash.
func formatName(fields []string) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteByte('.')
		}
		for j := 0; j < len(f); j++ {
			if f[j] == '.' || f[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(f[j])
		}
	}
	return b.String()
}

// SplitName splits a column name in ColumnInfo.Name's syntax (field names
// joined by ".", a "." or "\\" inside a name escaped by a backslash) into
// its field names. A trailing lone backslash is kept literally.
func SplitName(s string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case c == '.':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

// Lookup resolves a column name to its leaf column. Accepted spellings:
//
//   - the canonical ColumnInfo.Name syntax: field names joined by ".", with
//     "." and "\" inside a name escaped by a backslash (`a.b` is field b of
//     struct a, `a\.b` is the top-level column named "a.b");
//   - a JSON array of field names, when name starts with "[": `["a.b"]` and
//     `["a","b"]`;
//   - the exact (unescaped) name of a top-level column, byte for byte.
//
// Names are compared byte-exact (no Unicode normalization or case folding).
// Wrapper levels of lists are never spelled (see ColumnInfo). When the
// spellings that apply match different columns, Lookup fails with
// ErrAmbiguous and lists the canonical names of the candidates; when none
// matches it fails with ErrNotFound.
func (f *File) Lookup(name string) (ColumnInfo, error) {
	fail := func(err error) (ColumnInfo, error) {
		return ColumnInfo{}, &Error{File: f.path, Column: name, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	fieldsOf := func(c ColumnInfo) []string { return SplitName(c.Name) }
	var cand []int
	add := func(i int) {
		for _, j := range cand {
			if j == i {
				return
			}
		}
		cand = append(cand, i)
	}
	if strings.HasPrefix(name, "[") {
		var want []string
		if err := json.Unmarshal([]byte(name), &want); err != nil || len(want) == 0 {
			return fail(fmt.Errorf("%w: bad JSON path %s", ErrNotFound, name))
		}
		for i, c := range f.cols {
			if equalStrings(fieldsOf(c), want) {
				add(i)
			}
		}
	} else {
		want := SplitName(name)
		for i, c := range f.cols {
			if c.Name == name || equalStrings(fieldsOf(c), want) {
				add(i)
			}
		}
		for i, c := range f.cols {
			if fs := fieldsOf(c); len(fs) == 1 && fs[0] == name {
				add(i)
			}
		}
	}
	switch len(cand) {
	case 0:
		return fail(ErrNotFound)
	case 1:
		return f.Columns()[cand[0]], nil
	}
	var alts []string
	for _, i := range cand {
		alts = append(alts, fmt.Sprintf("%q", f.cols[i].Name))
	}
	sort.Strings(alts)
	return fail(fmt.Errorf("%w: matches columns %s; escape dots inside names with a backslash or use a JSON array path", ErrAmbiguous, strings.Join(alts, ", ")))
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
