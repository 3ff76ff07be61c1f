package cases

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prepml/prep/internal/pqfixture"
)

// listGroup is a group annotated LIST with whatever children it is given,
// so the test can lay out lists the way older writers did.
type listGroup struct{ parquet.Group }

func (listGroup) Type() parquet.Type { return parquet.List(parquet.Leaf(parquet.FloatType)).Type() }

// B04 kind: every list layout real writers produce reads alike. B04's files
// cover DuckDB's LIST and fixed ARRAY, parquet-go's 3-level LIST and a bare
// repeated field; these add the Parquet format's backward-compatibility
// layouts (2-level lists of Hive, parquet-thrift and parquet-avro; 3-level
// lists with other names, as Hive and Impala write them) and required lists,
// written here with parquet-go and hand-chosen levels.
// openParquet opens the Parquet file held in data for inspection.
func openParquet(t testing.TB, data []byte) *parquet.File {
	t.Helper()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestCaseB04ListLayoutsOlderWriters(t *testing.T) {
	c := loadCase(t, "B04")
	float := parquet.Leaf(parquet.FloatType)
	layouts := []struct {
		name   string
		root   parquet.Node
		maxDef int
		spec   string // emb.yaml names column emb; emb_item.yaml field item of the element
	}{
		// optional group emb (LIST) { repeated float array; }
		{"2-level repeated primitive", parquet.Group{"emb": parquet.Optional(listGroup{parquet.Group{"array": parquet.Repeated(float)}})}, 2, "emb.yaml"},
		// required group emb (LIST) { repeated float element; }
		{"2-level required list", parquet.Group{"emb": parquet.Required(listGroup{parquet.Group{"element": parquet.Repeated(float)}})}, 1, "emb.yaml"},
		// optional group emb (LIST) { repeated group array { required float item; } }
		{"2-level group named array", parquet.Group{"emb": parquet.Optional(listGroup{parquet.Group{"array": parquet.Repeated(parquet.Group{"item": parquet.Required(float)})}})}, 2, "emb_item.yaml"},
		// optional group emb (LIST) { repeated group emb_tuple { required float item; } }
		{"2-level group named emb_tuple", parquet.Group{"emb": parquet.Optional(listGroup{parquet.Group{"emb_tuple": parquet.Repeated(parquet.Group{"item": parquet.Required(float)})}})}, 2, "emb_item.yaml"},
		// optional group emb (LIST) { repeated group bag { optional float array_element; } }
		{"3-level Hive names", parquet.Group{"emb": parquet.Optional(listGroup{parquet.Group{"bag": parquet.Repeated(parquet.Group{"array_element": parquet.Optional(float)})}})}, 3, "emb.yaml"},
		// required group emb (LIST) { repeated group list { required float element; } }
		{"3-level required list and element", parquet.Group{"emb": parquet.Required(listGroup{parquet.Group{"list": parquet.Repeated(parquet.Group{"element": parquet.Required(float)})}})}, 1, "emb.yaml"},
	}
	want := c.str(t, "expect", "values", "emb", "sha256_le")
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			var rows []parquet.Row
			for i := 0; i < 4; i++ {
				var row parquet.Row
				for k, v := range []float32{float32(i), float32(i) + 0.5, float32(-i), 0.25} {
					rep := 1
					if k == 0 {
						rep = 0
					}
					if v == 0 {
						v = 0 // +0.0: -float32(0) is +0 in Go, kept explicit
					}
					row = append(row, parquet.FloatValue(v).Level(rep, l.maxDef, 0))
				}
				rows = append(rows, row)
			}
			data := pqfixture.Raw(parquet.NewSchema("schema", l.root), rows...).WriteBatch(1).Bytes(t)
			// The file holds the intended layout, LIST annotation included.
			f := openParquet(t, data)
			if got := f.Schema().String(); !strings.Contains(got, "(LIST)") {
				t.Fatalf("schema without LIST annotation:\n%s", got)
			}
			r := newRun(t, c)
			if err := os.WriteFile(filepath.Join(r.src, "emb.parquet"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			r.planAll(4)
			emb := tensor(t, r.converted(l.spec), "emb", "<f4")
			if got := sha256Hex(emb.data); got != want {
				t.Errorf("emb sha256 %s, want %s (B04's)", got, want)
				checkFloats(t, "emb", widen32(emb.u32()), true, flatten(c.get(t, "expect", "values", "emb", "values")), nil)
			}
		})
	}
}
