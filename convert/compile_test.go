package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

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
	f, err := os.Create(filepath.Join(dir, "n.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[nestRow](f)
	if _, err := w.Write([]nestRow{{ID: 1, M: map[string]int64{"a": 1}, LL: [][]int64{{1, 2}, {3}}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := makePlan(t, dir, defaultCfg)
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
