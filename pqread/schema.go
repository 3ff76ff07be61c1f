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

	// Levels and the repeated node.
	rep := -1
	for i, n := range path {
		switch repOf(n.el) {
		case format.Optional:
			info.MaxDef++
		case format.Repeated:
			info.MaxDef++
			info.MaxRep++
			if rep < 0 {
				rep = i
			}
		}
	}
	names := info.Path
	fields := names
	for _, n := range path[:len(path)-1] {
		if isMapGroup(n.el) {
			l.unsupported = unsupportedf("map columns are not supported (group %q)", n.el.Name)
		}
	}
	switch {
	case info.MaxRep > 1:
		if l.unsupported == nil {
			l.unsupported = unsupportedf("unsupported nesting: %d repetition levels (lists of lists), at most 1 is supported", info.MaxRep)
		}
	case info.MaxRep == 1:
		info.List = true
		for i := range rep {
			if repOf(path[i].el) == format.Optional {
				l.dList++
			}
		}
		info.Nullable = l.dList > 0
		info.ElemNullable = info.MaxDef > l.dList+1
		// Every group at or below the repeated node must lead to this one
		// leaf only; otherwise the elements are structs.
		for _, n := range path[rep : len(path)-1] {
			if len(n.children) != 1 && l.unsupported == nil {
				l.unsupported = unsupportedf("unsupported nesting: list of struct (group %q has %d fields)", n.el.Name, len(n.children))
			}
		}
		// Drop the synthetic list levels from the user-visible name.
		if rep > 0 && isListGroup(path[rep-1].el) {
			r := path[rep]
			switch {
			case len(r.children) == 0: // 2-level: repeated primitive is the element
				fields = dropIndex(names, rep, 1)
			case r.el.Name == "array" || r.el.Name == path[rep-1].el.Name+"_tuple":
				// 2-level legacy: the repeated group is the element (a struct).
				fields = dropIndex(names, rep, 1)
			default: // 3-level: repeated group + element
				fields = dropIndex(names, rep, 2)
			}
		}
	default:
		info.Nullable = info.MaxDef > 0
	}
	info.Name = formatName(fields)
	return l, nil
}

func dropIndex(s []string, i, n int) []string {
	out := append([]string(nil), s[:i]...)
	if i+n < len(s) {
		out = append(out, s[i+n:]...)
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
