package feature

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

type testRow struct {
	ID    int64     `parquet:"id"`
	X     float32   `parquet:"x"`
	Emb   []float32 `parquet:"emb,list"`
	Label string    `parquet:"label,dict"`
	Opt   *int32    `parquet:"opt,optional"`
}

func makeRow(id int64) testRow {
	r := testRow{ID: id, X: float32(id) * 0.5, Label: fmt.Sprintf("L%d", id%7)}
	for k := int64(0); k < id%6; k++ {
		r.Emb = append(r.Emb, float32(id*10+k))
	}
	if id%5 != 0 {
		v := int32(id)
		r.Opt = &v
	}
	return r
}

// writeParquet writes rows [first, first+n) of makeRow to dir/name.
func writeParquet(t testing.TB, path string, first, n int64, rowsPerGroup int64, codec compress.Codec) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[testRow](f, parquet.Compression(codec), parquet.MaxRowsPerRowGroup(rowsPerGroup))
	rows := make([]testRow, 0, 1024)
	for id := first; id < first+n; id++ {
		rows = append(rows, makeRow(id))
		if len(rows) == cap(rows) {
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func makePlan(t testing.TB, dir string, cfg plan.Config) *plan.Plan {
	t.Helper()
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testSpecYAML = `
tensors:
  - name: id
    column: id
    dtype: I64
  - name: x
    column: x
    dtype: F16
  - name: emb
    column: emb
    dtype: F32
    shape: [4]
    list: {pad: -1, truncate: true, lengths: true}
  - name: label
    column: label
    dtype: I64
    bytes: {mode: hash, buckets: 1000}
  - name: opt
    column: opt
    dtype: I32
    nulls: {fill: -7, mask: true}
`

// fixture writes two source files (700 + 300 rows, row groups of 128) and
// returns the plan and spec.
func fixture(t testing.TB, cfg plan.Config) (*plan.Plan, *Spec) {
	t.Helper()
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "part-0.parquet"), 0, 700, 128, &parquet.Snappy)
	writeParquet(t, filepath.Join(src, "part-1.parquet"), 700, 300, 128, &parquet.Snappy)
	spec, err := ParseSpec([]byte(testSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return makePlan(t, src, cfg), spec
}

var defaultCfg = plan.Config{Seed: 7, Epochs: 2, GlobalBatch: 64, WorldSize: 2, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

// expectSample returns the expected bytes of each output tensor for id.
func expectSample(id uint64) [][]byte {
	r := makeRow(int64(id))
	le := binary.LittleEndian
	idb := le.AppendUint64(nil, uint64(r.ID))
	h, _ := shardfmt.F64ToF16(float64(r.X))
	xb := le.AppendUint16(nil, h)
	var emb []byte
	for k := 0; k < 4; k++ {
		v := float32(-1)
		if k < len(r.Emb) {
			v = r.Emb[k]
		}
		emb = le.AppendUint32(emb, math.Float32bits(v))
	}
	lens := le.AppendUint32(nil, uint32(len(r.Emb)))
	lab := le.AppendUint64(nil, FNV1a64([]byte(r.Label))%1000)
	opt, mask := le.AppendUint32(nil, uint32(0xfffffff9)), []byte{0}
	if r.Opt != nil {
		opt, mask = le.AppendUint32(nil, uint32(*r.Opt)), []byte{1}
	}
	return [][]byte{idb, xb, emb, lens, lab, opt, mask}
}

// writeRows writes rows of schema sch to a new file at path.
func writeRows(t testing.TB, path string, sch *parquet.Schema, rows []parquet.Row, opts ...parquet.WriterOption) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[any](f, append([]parquet.WriterOption{sch}, opts...)...)
	if _, err := w.WriteRows(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// jagExpect returns, for id, the expected bytes of id, v (values), v_mask,
// v_element_mask (values), w (values).
func jagExpect(id uint64) [][]byte {
	le := binary.LittleEndian
	i := int64(id)
	var v, em []byte
	mask := []byte{1}
	if jagNullRow(i) {
		mask = []byte{0}
	} else {
		for k := range jagLen(i) {
			if jagNullElem(i, k) {
				v, em = le.AppendUint32(v, 0xffffffff), append(em, 0)
			} else {
				v, em = le.AppendUint32(v, uint32(int32(i*100)+int32(k))), append(em, 1)
			}
		}
	}
	var w []byte
	for k := range int(i % 4) {
		w = le.AppendUint64(w, uint64(-i-int64(k)))
	}
	return [][]byte{le.AppendUint64(nil, id), v, mask, em, w}
}

func jagFixture(t testing.TB, cfg plan.Config) (*plan.Plan, *Spec) {
	t.Helper()
	src := t.TempDir()
	writeJagged(t, filepath.Join(src, "a.parquet"), 0, 500, 128, nil)
	writeJagged(t, filepath.Join(src, "b.parquet"), 500, 230, 1000, nil)
	spec, err := ParseSpec([]byte(jagSpecYAML), "jagged.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return makePlan(t, src, cfg), spec
}

var jagCfg = plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 32, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

type packedFixture struct {
	dir     string
	src     plan.Source
	lengths []uint32
	docs    [][]int64
}

func newPackedFixture(t *testing.T, rows int) *packedFixture {
	t.Helper()
	f := &packedFixture{dir: tokenFiles(t, rows)}
	var err error
	if f.src, err = source.Discover(context.Background(), []string{f.dir}); err != nil {
		t.Fatal(err)
	}
	if f.lengths, err = TokenLengths(context.Background(), nil, f.src, "tokens", 2); err != nil {
		t.Fatal(err)
	}
	f.docs = duckDocs(t, f.dir)
	return f
}

func i32At(b []byte, i int) int64 { return int64(int32(binary.LittleEndian.Uint32(b[4*i:]))) }

// jagLen is the length of row id's lists: 0 and 40 among them.
func jagLen(id int64) int { return []int{0, 1, 2, 3, 5, 8, 13, 0, 40}[id%9] }

// jagNullRow and jagNullElem say where v holds a null list and a null
// element.
func jagNullRow(id int64) bool { return id%11 == 3 }

func jagNullElem(id int64, k int) bool { return (id+int64(k))%7 == 0 }

// jagSchema: id INT64; v optional list of optional INT32 (null lists,
// null elements); w a required list of required INT32.
func jagSchema() *parquet.Schema {
	return parquet.NewSchema("schema", parquet.Group{
		"id": parquet.Leaf(parquet.Int64Type),
		"v":  parquet.Optional(parquet.List(parquet.Optional(parquet.Leaf(parquet.Int32Type)))),
		"w":  parquet.List(parquet.Leaf(parquet.Int32Type)),
	})
}

// writeJagged writes rows [first, first+n) to path, row groups of rg rows.
func writeJagged(t testing.TB, path string, first, n int64, rg int64, long func(id int64) int) {
	t.Helper()
	var rows []parquet.Row
	for id := first; id < first+n; id++ {
		row := parquet.Row{parquet.Int64Value(id).Level(0, 0, 0)}
		m := jagLen(id)
		if long != nil {
			m = long(id)
		}
		switch {
		case jagNullRow(id):
			row = append(row, parquet.NullValue().Level(0, 0, 1))
		case m == 0:
			row = append(row, parquet.NullValue().Level(0, 1, 1))
		default:
			for k := range m {
				rep := 1
				if k == 0 {
					rep = 0
				}
				if jagNullElem(id, k) {
					row = append(row, parquet.NullValue().Level(rep, 2, 1))
				} else {
					row = append(row, parquet.Int32Value(int32(id*100)+int32(k)).Level(rep, 3, 1))
				}
			}
		}
		wm := int(id % 4)
		if wm == 0 {
			row = append(row, parquet.NullValue().Level(0, 0, 2))
		}
		for k := range wm {
			rep := 1
			if k == 0 {
				rep = 0
			}
			row = append(row, parquet.Int32Value(-int32(id)-int32(k)).Level(rep, 1, 2))
		}
		rows = append(rows, row)
	}
	writeRows(t, path, jagSchema(), rows, parquet.MaxRowsPerRowGroup(rg), parquet.PageBufferSize(1024))
}

const jagSpecYAML = `
tensors:
  - {name: id, column: id, dtype: I64}
  - name: v
    column: v
    dtype: I32
    list: {jagged: true, element_fill: -1, element_mask: true}
    nulls: {mask: true}
  - {name: w, column: w, dtype: I64, list: {jagged: true}}
`

// duckDocs returns DuckDB's reading of the token column of the files
// under dir, in sample id order (files by path, rows in order); nil for a
// null list.
func duckDocs(t *testing.T, dir string) [][]int64 {
	t.Helper()
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT tokens FROM read_parquet(%s, filename = true, file_row_number = true) ORDER BY filename, file_row_number`,
		duckdbtest.Quote(filepath.Join(dir, "*.parquet"))))
	docs := make([][]int64, len(res.Rows))
	for i, r := range res.Rows {
		if r[0] == nil {
			continue
		}
		for _, v := range duckdbtest.List(t, r[0]) {
			docs[i] = append(docs[i], duckdbtest.Int64(t, v))
		}
	}
	return docs
}
