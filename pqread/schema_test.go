package pqread

import (
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

type mapRow struct {
	ID int64             `parquet:"id"`
	M  map[string]int64  `parquet:"m"`
	MO map[string]*int64 `parquet:"mo,optional"`
}

func i64p(v int64) *int64 { return &v }

// mapEntries returns row i of a map read as its key and value leaves: key
// -> value, nil for a null value.
func mapEntries(t *testing.T, keys, vals *Column, i int) map[string]*int64 {
	t.Helper()
	out := map[string]*int64{}
	for k := keys.Offsets[i]; k < keys.Offsets[i+1]; k++ {
		if keys.ElemValid != nil && !keys.ElemValid[k] {
			t.Fatalf("row %d: null key", i)
		}
		var v *int64
		if vals.ElemValid == nil || vals.ElemValid[k] {
			v = i64p(vals.Int64[k])
		}
		out[string(bytesAt(keys, int(k)))] = v
	}
	return out
}

// A map reads as its key and value leaves, one-level list columns named
// <map>.key and <map>.value with Group the map and MapRole key / value:
// Offsets per row (equal for key and value), RowValid false for a null
// map, ElemValid false for a null value.
func TestMapColumns(t *testing.T) {
	rows := []mapRow{
		{ID: 0, M: map[string]int64{"a": 1, "b": 2}, MO: map[string]*int64{"x": i64p(7), "y": nil}},
		{ID: 1, M: map[string]int64{}, MO: nil},
		{ID: 2, M: map[string]int64{"c": -3}, MO: map[string]*int64{"z": i64p(-9)}},
		{ID: 3, M: map[string]int64{"d": 4, "e": 5, "f": 6}, MO: nil},
	}
	f := mustOpen(t, writeParquet(t, rows))
	var names []string
	for _, ci := range f.Columns() {
		names = append(names, ci.Name)
		if ci.Unsupported != "" {
			t.Errorf("%s: unsupported: %s", ci.Name, ci.Unsupported)
		}
	}
	eq(t, "names", names, []string{"id", "m.key", "m.value", "mo.key", "mo.value"})
	for _, c := range []struct {
		name, group, role  string
		nullable, elemNull bool
	}{
		{"m.key", "m", "key", false, false},
		{"m.value", "m", "value", false, false},
		{"mo.key", "mo", "key", true, false},
		{"mo.value", "mo", "value", true, true},
	} {
		ci, err := f.Lookup(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if ci.Depth != 1 || !ci.List || ci.Group != c.group || ci.MapRole != c.role || ci.Nullable != c.nullable || ci.ElemNullable != c.elemNull {
			t.Errorf("%s: depth %d list %v group %q role %q nullable %v elem nullable %v", c.name, ci.Depth, ci.List, ci.Group, ci.MapRole, ci.Nullable, ci.ElemNullable)
		}
	}
	mk, mv := mustRead(t, f, "m.key", 0), mustRead(t, f, "m.value", 0)
	ok, ov := mustRead(t, f, "mo.key", 0), mustRead(t, f, "mo.value", 0)
	eq(t, "m offsets", mk.Offsets, []int64{0, 2, 2, 3, 6})
	eq(t, "m value offsets", mv.Offsets, mk.Offsets)
	eq(t, "mo offsets", ok.Offsets, []int64{0, 2, 2, 3, 3})
	eq(t, "mo value offsets", ov.Offsets, ok.Offsets)
	eq(t, "mo key valid", ok.RowValid, []bool{true, false, true, false})
	eq(t, "mo value valid", ov.RowValid, ok.RowValid)
	if mk.RowValid != nil || mv.RowValid != nil || mk.ElemValid != nil || mv.ElemValid != nil || ok.ElemValid != nil {
		t.Errorf("validity where nothing is null")
	}
	for i, r := range rows {
		got := mapEntries(t, mk, mv, i)
		if len(got) != len(r.M) {
			t.Errorf("row %d: m has %d entries, want %d", i, len(got), len(r.M))
		}
		for k, v := range r.M {
			if got[k] == nil || *got[k] != v {
				t.Errorf("row %d: m[%q] = %v, want %d", i, k, got[k], v)
			}
		}
		got = mapEntries(t, ok, ov, i)
		if len(got) != len(r.MO) {
			t.Errorf("row %d: mo has %d entries, want %d", i, len(got), len(r.MO))
		}
		for k, v := range r.MO {
			g, present := got[k]
			if !present || (v == nil) != (g == nil) || (v != nil && *g != *v) {
				t.Errorf("row %d: mo[%q] = %v, want %v", i, k, g, v)
			}
		}
	}
}

type listEvent struct {
	A int64   `parquet:"a"`
	B *string `parquet:"b,optional"`
}

type structListRow struct {
	Ev  []*listEvent `parquet:"ev,list"`
	Rep []listEvent  `parquet:"rep"`
}

func strp(s string) *string { return &s }

// Every field of a list of structs reads as a list column named
// <list>.<field> with Group the list; a null struct element is a null
// element in every field, a null field only in its own; the fields of one
// list have identical Offsets. A bare repeated group of several fields
// (no LIST annotation) is a list of structs too, named as written.
func TestListOfStructColumns(t *testing.T) {
	rows := []structListRow{
		{Ev: []*listEvent{{A: 1, B: strp("x")}, nil, {A: 3}}, Rep: []listEvent{{A: 10, B: strp("p")}}},
		{Ev: nil, Rep: nil},
		{Ev: []*listEvent{{A: 4, B: strp("")}}, Rep: []listEvent{{A: 11}, {A: 12, B: strp("q")}}},
	}
	f := mustOpen(t, writeParquet(t, rows))
	var names, groups []string
	for _, ci := range f.Columns() {
		names = append(names, ci.Name)
		groups = append(groups, ci.Group)
		if ci.Unsupported != "" || ci.Depth != 1 || ci.MapRole != "" {
			t.Errorf("%s: depth %d role %q unsupported %q", ci.Name, ci.Depth, ci.MapRole, ci.Unsupported)
		}
	}
	eq(t, "names", names, []string{"ev.a", "ev.b", "rep.a", "rep.b"})
	eq(t, "groups", groups, []string{"ev", "ev", "rep", "rep"})

	a, b := mustRead(t, f, "ev.a", 0), mustRead(t, f, "ev.b", 0)
	eq(t, "ev.a offsets", a.Offsets, []int64{0, 3, 3, 4})
	eq(t, "ev.b offsets", b.Offsets, a.Offsets)
	eq(t, "ev.a", a.Int64, []int64{1, 0, 3, 4})
	eq(t, "ev.a elem valid", a.ElemValid, []bool{true, false, true, true})
	eq(t, "ev.b", strs(b), []string{"x", "<null>", "<null>", ""})
	eq(t, "ev.b elem valid", b.ElemValid, []bool{true, false, false, true})
	if !a.Info.ElemNullable || !b.Info.ElemNullable {
		t.Errorf("elements of ev not nullable")
	}

	ra, rb := mustRead(t, f, "rep.a", 0), mustRead(t, f, "rep.b", 0)
	eq(t, "rep.a offsets", ra.Offsets, []int64{0, 1, 1, 3})
	eq(t, "rep.b offsets", rb.Offsets, ra.Offsets)
	eq(t, "rep.a", ra.Int64, []int64{10, 11, 12})
	if ra.ElemValid != nil || ra.Info.ElemNullable {
		t.Errorf("rep.a elements null")
	}
	eq(t, "rep.b", strs(rb), []string{"p", "<null>", "q"})
}

// el is a schema element: a leaf of physical type typ (children < 0) or a
// group of children.
func el(name string, rep format.FieldRepetitionType, children int, ann string) format.SchemaElement {
	e := format.SchemaElement{Name: name}
	e.RepetitionType.Set(rep)
	if children < 0 {
		e.Type.Set(format.Int32)
	} else {
		e.NumChildren.Set(int32(children))
	}
	switch ann {
	case "LIST":
		e.ConvertedType.Set(deprecated.List)
	case "MAP":
		e.ConvertedType.Set(deprecated.Map)
	case "MAP_KEY_VALUE":
		e.ConvertedType.Set(deprecated.MapKeyValue)
	}
	return e
}

// The naming rules for legacy and unusual layouts, on schemas built by hand:
// the wrapper levels of lists and maps are dropped, the Group is the list or
// map at the first repetition level, and what cannot be read says why,
// naming the column.
func TestNestedNames(t *testing.T) {
	const (
		req = format.Required
		opt = format.Optional
		rep = format.Repeated
	)
	type col struct {
		name, group, role string
		depth             int
		unsupported       string
	}
	for _, c := range []struct {
		what string
		els  []format.SchemaElement
		want []col
	}{
		{"2-level list of structs (array)", []format.SchemaElement{
			el("l", opt, 1, "LIST"), el("array", rep, 2, ""), el("a", req, -1, ""), el("b", opt, -1, "")},
			[]col{{"l.a", "l", "", 1, ""}, {"l.b", "l", "", 1, ""}}},
		{"2-level list of structs (_tuple)", []format.SchemaElement{
			el("l", opt, 1, "LIST"), el("l_tuple", rep, 1, ""), el("a", req, -1, "")},
			[]col{{"l.a", "l", "", 1, ""}}},
		{"2-level list of structs (several fields)", []format.SchemaElement{
			el("l", req, 1, "LIST"), el("item", rep, 2, ""), el("a", req, -1, ""), el("b", req, -1, "")},
			[]col{{"l.a", "l", "", 1, ""}, {"l.b", "l", "", 1, ""}}},
		{"3-level list of one-field structs", []format.SchemaElement{
			el("l", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, 1, ""), el("a", req, -1, "")},
			[]col{{"l.a", "l", "", 1, ""}}},
		{"2-level list of 2-level lists", []format.SchemaElement{
			el("a", req, 1, "LIST"), el("array", rep, 1, "LIST"), el("array", rep, -1, "")},
			[]col{{"a", "", "", 2, ""}}},
		{"list of lists of structs", []format.SchemaElement{
			el("d", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, 1, "LIST"), el("list", rep, 1, ""),
			el("element", opt, 2, ""), el("e", opt, -1, ""), el("f", opt, -1, "")},
			[]col{{"d.e", "d", "", 2, ""}, {"d.f", "d", "", 2, ""}}},
		{"legacy map: MAP_KEY_VALUE on the key_value group only", []format.SchemaElement{
			el("m", opt, 1, ""), el("map", rep, 2, "MAP_KEY_VALUE"), el("k", req, -1, ""), el("v", opt, -1, "")},
			[]col{{"m.k", "m", "key", 1, ""}, {"m.v", "m", "value", 1, ""}}},
		{"map without a value", []format.SchemaElement{
			el("m", req, 1, "MAP"), el("key_value", rep, 1, ""), el("key", req, -1, "")},
			[]col{{"m.key", "m", "key", 1, ""}}},
		{"map of three fields", []format.SchemaElement{
			el("m", req, 1, "MAP"), el("key_value", rep, 3, ""), el("key", req, -1, ""), el("v1", opt, -1, ""), el("v2", opt, -1, "")},
			[]col{{"m.key", "m", "key", 1, `column "m.key": map "m" has 3 fields in its key_value group`},
				{"m.v1", "m", "value", 1, `column "m.v1": map "m" has 3 fields`}, {"m.v2", "m", "value", 1, `column "m.v2": map "m" has 3 fields`}}},
		{"list of maps", []format.SchemaElement{
			el("lm", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, 1, "MAP"), el("key_value", rep, 2, ""), el("key", req, -1, ""), el("value", opt, -1, "")},
			[]col{{"lm.key", "lm", "", 2, `column "lm.key": map "lm" inside a list or map (2 levels of repetition)`},
				{"lm.value", "lm", "", 2, `column "lm.value": map "lm" inside a list or map`}}},
		{"map of lists", []format.SchemaElement{
			el("ml", opt, 1, "MAP"), el("key_value", rep, 2, ""), el("key", req, -1, ""), el("value", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, -1, "")},
			[]col{{"ml.key", "ml", "key", 1, ""}, {"ml.value", "ml", "value", 2, ""}}},
		{"list of structs holding a list", []format.SchemaElement{
			el("ev", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, 2, ""), el("a", req, -1, ""),
			el("tags", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", req, -1, "")},
			[]col{{"ev.a", "ev", "", 1, ""}, {"ev.tags", "ev", "", 2, ""}}},
		{"three levels of lists", []format.SchemaElement{
			el("a", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, 1, "LIST"), el("list", rep, 1, ""),
			el("element", opt, 1, "LIST"), el("list", rep, 1, ""), el("element", opt, -1, "")},
			[]col{{"a", "", "", 3, `column "a" has 3 levels of lists, at most 2 are supported`}}},
	} {
		t.Run(c.what, func(t *testing.T) {
			root := format.SchemaElement{Name: "schema"}
			root.NumChildren.Set(1)
			leaves, _, err := buildSchema(append([]format.SchemaElement{root}, c.els...))
			if err != nil {
				t.Fatal(err)
			}
			var got []col
			for _, l := range leaves {
				g := col{l.info.Name, l.info.Group, l.info.MapRole, l.info.Depth, ""}
				if l.unsupported != nil {
					g.unsupported = l.unsupported.Error()
				}
				got = append(got, g)
			}
			if len(got) != len(c.want) {
				t.Fatalf("columns %+v, want %+v", got, c.want)
			}
			for i, w := range c.want {
				g := got[i]
				if g.name != w.name || g.group != w.group || g.role != w.role || g.depth != w.depth ||
					(w.unsupported == "") != (g.unsupported == "") || !strings.Contains(g.unsupported, w.unsupported) {
					t.Errorf("column %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}
