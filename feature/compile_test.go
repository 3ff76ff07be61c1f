package feature

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/pqread"
)

// nestRow has a map, a list of lists and a struct beside a scalar column.
type nestRow struct {
	ID int64            `parquet:"id"`
	M  map[string]int64 `parquet:"m"`
	LL [][]int64        `parquet:"ll,list"`
	S  struct {
		A int64 `parquet:"a"`
		B int64 `parquet:"b"`
	} `parquet:"s"`
}

// TestCompileNestedColumnByNaturalName pins the schema check's message for a
// spec naming a nested column by its natural name: a map m asks for its key
// or value leaf, a list of lists ll (which pqread reads) is refused as an
// unsupported parquet feature saying why (it used to be "column not found"
// listing wrapper levels such as ll.list.element.list.element), and a struct
// s asks for one of its leaves.
func TestCompileNestedColumnByNaturalName(t *testing.T) {
	dir := t.TempDir()
	pqfixture.Of(nestRow{ID: 1, M: map[string]int64{"a": 1}, LL: [][]int64{{1, 2}, {3}}}).WriteFile(t, filepath.Join(dir, "n.parquet"))
	p := featuretest.MakePlan(t, dir, featuretest.DefaultConfig)
	for _, c := range []struct {
		column string
		is     error
		want   string
	}{
		{"m", ErrSchema, `n.parquet: column "m": "m" is a map, not a leaf column; give it a map policy (map: {key_dtype: D}, map: {key_bytes: ...} or map: {keys: [...], fill: F}) or name one of its leaf columns "m.key", "m.value"`},
		{"ll", pqread.ErrUnsupported, `n.parquet: column "ll": unsupported parquet feature: LIST<LIST<INT64 INT(64,true)>> column is a list of lists (2 levels of repetition); a tensor reads one level of lists (a jagged one, list: {jagged: true}, reads two)`},
		{"s", ErrSchema, `n.parquet: column "s": "s" is a group, not a leaf column; name one of its leaf columns "s.a", "s.b"`},
	} {
		spec := &Spec{Tensors: []TensorSpec{{Name: "t", Column: c.column, DType: "I64"}}}
		files, _, err := openForSpec(context.Background(), p, nil, spec, pqread.Limits{}, 0)
		closeSources(files)
		if err == nil || !errors.Is(err, c.is) || err.Error() != c.want {
			t.Errorf("column %s: err = %v\nwant %s", c.column, err, c.want)
		}
	}
}

// TestNarrowFloatConstantsRefused pins the fault where element_fill 1e6
// for F16 silently became +Inf: a fill, pad or element fill beyond a
// narrow float dtype's largest finite value is refused whatever
// cast.overflow, like an out-of-range integer fill; the largest finite
// value and an explicit infinity are accepted.
func TestNarrowFloatConstantsRefused(t *testing.T) {
	list := schemaOf("a.parquet", pqread.ColumnInfo{Name: "v", Physical: "DOUBLE", Kind: pqread.KindFloat64, List: true, MaxDef: 3, MaxRep: 1})
	scalar := schemaOf("a.parquet", pqread.ColumnInfo{Name: "x", Physical: "DOUBLE", Kind: pqread.KindFloat64, MaxDef: 1})
	for _, c := range []struct {
		spec   string
		schema fileSchema
		want   string // "" = accepted
	}{
		{`{name: v, column: v, dtype: F16, list: {jagged: true, element_fill: 1e6}}`, list,
			`tensor "v": list.element_fill 1e+06: 1e+06 overflows F16 (largest finite 65504); write Inf or -Inf for an infinite value`},
		{`{name: v, column: v, dtype: F16, list: {jagged: true, element_fill: 1e6}, cast: {overflow: inf}}`, list,
			`tensor "v": list.element_fill 1e+06: 1e+06 overflows F16 (largest finite 65504); write Inf or -Inf for an infinite value`},
		{`{name: v, column: v, dtype: F16, shape: [2], list: {pad: 70000}}`, list,
			`tensor "v": list.pad 70000: 70000 overflows F16 (largest finite 65504); write Inf or -Inf for an infinite value`},
		{`{name: x, column: x, dtype: BF16, nulls: {fill: -1e39}}`, scalar,
			`tensor "x": nulls.fill -1e+39: -1e+39 overflows BF16 (largest finite 3.3895314e38); write Inf or -Inf for an infinite value`},
		{`{name: x, column: x, dtype: F8_E4M3, nulls: {fill: 500}}`, scalar,
			`tensor "x": nulls.fill 500: 500 overflows F8_E4M3 (largest finite 448); write Inf or -Inf for an infinite value`},
		{`{name: v, column: v, dtype: F16, list: {jagged: true, element_fill: 65504}}`, list, ""},
		{`{name: v, column: v, dtype: F16, list: {jagged: true, element_fill: -Inf}}`, list, ""},
		{`{name: x, column: x, dtype: F16, nulls: {fill: Inf}}`, scalar, ""},
	} {
		spec, err := ParseSpec([]byte("tensors: ["+c.spec+"]"), "s.yaml")
		if err != nil {
			t.Fatalf("%s: %v", c.spec, err)
		}
		_, err = compileTensor(&spec.Tensors[0], []fileSchema{c.schema})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.spec, err)
		case c.want != "" && (err == nil || err.Error() != c.want || !errors.Is(err, ErrSpec)):
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
}

// xyRow and axyRow are two schemas whose columns x and y a regex selects:
// in axyRow they sit at other leaf indexes.
type xyRow struct {
	X float32 `parquet:"x"`
	Y float32 `parquet:"y"`
}

type axyRow struct {
	A int64   `parquet:"a"`
	X float32 `parquet:"x"`
	Y float32 `parquet:"y"`
}

// TestCompileSharesColumnsOfOneSchema pins the fault where a tensor's
// resolved columns were copied once per source file and held for the whole
// run (5,000 columns in 16 files: 20 MB of the heap, over a 32 MiB memory
// limit): consecutive files whose columns are Equal share one slice of
// columns and of classes, and a file of another layout has its own.
func TestCompileSharesColumnsOfOneSchema(t *testing.T) {
	dir := t.TempDir()
	pqfixture.Of(xyRow{1, 2}, xyRow{3, 4}).WriteFile(t, filepath.Join(dir, "a.parquet"))
	pqfixture.Of(xyRow{5, 6}).WriteFile(t, filepath.Join(dir, "b.parquet"))
	pqfixture.Of(axyRow{7, 8, 9}).WriteFile(t, filepath.Join(dir, "c.parquet"))
	p := featuretest.MakePlan(t, dir, featuretest.DefaultConfig)
	spec := &Spec{Tensors: []TensorSpec{{Name: "v", ColumnsRegex: "^[xy]$", DType: "F32"}}}
	files, plans, err := openForSpec(context.Background(), p, nil, spec, pqread.Limits{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	closeSources(files)
	tp := plans[0]
	if len(tp.cols) != 3 || len(tp.classes) != 3 {
		t.Fatalf("columns of %d files, classes of %d; want 3", len(tp.cols), len(tp.classes))
	}
	if &tp.cols[0][0] != &tp.cols[1][0] || &tp.classes[0][0] != &tp.classes[1][0] {
		t.Errorf("a.parquet and b.parquet (one schema) hold separate copies of the columns or classes")
	}
	if &tp.cols[2][0] == &tp.cols[1][0] {
		t.Fatalf("c.parquet shares b.parquet's columns")
	}
	for fi, want := range [][]int{{0, 1}, {0, 1}, {1, 2}} {
		for j, ci := range tp.cols[fi] {
			if ci.Index != want[j] || ci.Name != []string{"x", "y"}[j] {
				t.Errorf("file %d value %d: column %s at leaf %d, want %s at %d", fi, j, ci.Name, ci.Index, []string{"x", "y"}[j], want[j])
			}
		}
	}
}
