// Package converttest builds the small real shard set the tests of
// verify --deep and export compare against their Parquet source: one file
// of Rows rows written by parquet-go, planned and converted with Spec by
// convert.Run. It is for tests only.
package converttest

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

// Row is the source row: Rows rows in row groups of 20, X(id) in x (exact
// in binary), PLAIN float64, float32 and int64 columns.
type Row struct {
	ID int64   `parquet:"id"`
	X  float64 `parquet:"x"`
	F  float32 `parquet:"f"`
}

// Rows is the number of rows WriteSource writes.
const Rows = 40

// X returns row id's value of column x: 1000 + id/8.
func X(id int64) float64 { return 1000 + float64(id)/8 }

// Spec is the feature spec Convert converts with: x as F64, f and x
// stacked as F32, id as I64.
const Spec = `tensors:
  - {name: x, column: x, dtype: F64}
  - {name: feat, columns: [f, x], dtype: F32}
  - {name: id, column: id, dtype: I64}
`

// WriteSource writes the source file at path: Rows rows, x = X(id) unless
// edit gives another value for that id, f = -id/2.
func WriteSource(t testing.TB, path string, edit map[int64]float64) {
	t.Helper()
	rows := make([]Row, Rows)
	for i := range rows {
		id := int64(i)
		rows[i] = Row{ID: id, X: X(id), F: float32(id) * -0.5}
		if v, ok := edit[id]; ok {
			rows[i].X = v
		}
	}
	writeRows(t, path, rows)
}

// writeRows writes rows to a new Parquet file at path in row groups of
// 20 rows (internal/pqfixture), failing t on any error.
func writeRows[T any](t testing.TB, path string, rows []T) {
	t.Helper()
	pqfixture.Of(rows...).RowGroupRows(20).WriteFile(t, path)
}

// JaggedRow is the source row of ConvertJagged: L, a LIST of INT32, holds
// L(id).
type JaggedRow struct {
	ID int64   `parquet:"id"`
	X  float64 `parquet:"x"`
	L  []int32 `parquet:"l,list"`
}

// L returns row id's list of column l: id%5 values, l[k] = 10*id + k
// (empty for every fifth row).
func L(id int64) []int32 {
	l := make([]int32, id%5)
	for k := range l {
		l[k] = int32(10*id) + int32(k)
	}
	return l
}

// JaggedSpec is the feature spec ConvertJagged converts with: x as F64 and
// l as the jagged I64 tensor l.
const JaggedSpec = `tensors:
  - {name: x, column: x, dtype: F64}
  - {name: l, column: l, dtype: I64, list: {jagged: true}}
`

// WriteJaggedSource writes the source of ConvertJagged at path: Rows rows
// of JaggedRow in row groups of 20, x = X(id), l = L(id).
func WriteJaggedSource(t testing.TB, path string) {
	t.Helper()
	rows := make([]JaggedRow, Rows)
	for i := range rows {
		id := int64(i)
		rows[i] = JaggedRow{ID: id, X: X(id), L: L(id)}
	}
	writeRows(t, path, rows)
}

// Convert writes the source as src/part-0.parquet, plans it (seed 11, 2
// epochs, global batch 8, world size 2, global shuffle, remainder drop)
// and converts it with Spec into out, which keeps a copy of the plan.
func Convert(t testing.TB) (out, src string, p *plan.Plan) {
	t.Helper()
	return convertWith(t, Spec, func(path string) { WriteSource(t, path, nil) })
}

// ConvertJagged is Convert with the source of WriteJaggedSource and
// JaggedSpec: a shard set of format 2.0.
func ConvertJagged(t testing.TB) (out, src string, p *plan.Plan) {
	t.Helper()
	return convertWith(t, JaggedSpec, func(path string) { WriteJaggedSource(t, path) })
}

func convertWith(t testing.TB, specText string, write func(path string)) (out, src string, p *plan.Plan) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "src")
	out = filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(src, "part-0.parquet"))
	found, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	p, err = plan.New(found, plan.Config{Seed: 11, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 1,
		Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := feature.ParseSpec([]byte(specText), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Run(context.Background(), convert.Options{Plan: p, Spec: spec, Output: out, ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, shardset.PlanName)); err != nil {
		if err := p.Save(filepath.Join(out, shardset.PlanName)); err != nil {
			t.Fatal(err)
		}
	}
	return out, src, p
}
