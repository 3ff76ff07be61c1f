package verify_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
	"github.com/prepml/prep/verify"
)

// pqRow is the source row of the end-to-end tests: 40 rows in row groups of
// 20, x = 1000 + id/8 (exact in binary), PLAIN float64 and int64 columns.
type pqRow struct {
	ID int64   `parquet:"id"`
	X  float64 `parquet:"x"`
	F  float32 `parquet:"f"`
}

const pqRows = 40

func pqX(id int64) float64 { return 1000 + float64(id)/8 }

func writePQ(t *testing.T, path string, edit map[int64]float64) {
	t.Helper()
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](fh, parquet.MaxRowsPerRowGroup(20))
	rows := make([]pqRow, pqRows)
	for i := range rows {
		id := int64(i)
		rows[i] = pqRow{ID: id, X: pqX(id), F: float32(id) * -0.5}
		if v, ok := edit[id]; ok {
			rows[i].X = v
		}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
}

const pqSpec = `tensors:
  - {name: x, column: x, dtype: F64}
  - {name: feat, columns: [f, x], dtype: F32}
  - {name: id, column: id, dtype: I64}
`

// convertFixture converts a real Parquet file with convert.Run and keeps a
// copy of the plan in the output directory.
func convertFixture(t *testing.T) (out, src string, p *plan.Plan) {
	t.Helper()
	src = filepath.Join(t.TempDir(), "src")
	out = filepath.Join(t.TempDir(), "out")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writePQ(t, filepath.Join(src, "part-0.parquet"), nil)
	source, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	p, err = plan.New(source, plan.Config{Seed: 11, Epochs: 2, GlobalBatch: 8, WorldSize: 2, Workers: 1,
		Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := convert.ParseSpec([]byte(pqSpec), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := convert.Run(context.Background(), convert.Options{Plan: p, Spec: spec, Output: out, ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, verify.PlanFileName)); err != nil {
		if err := p.Save(filepath.Join(out, verify.PlanFileName)); err != nil {
			t.Fatal(err)
		}
	}
	return out, src, p
}

// TestExportMatchesParquet exports batches of a converted set and compares
// every value with the source read by parquet-go's own row reader.
func TestExportMatchesParquet(t *testing.T) {
	out, src, p := convertFixture(t)
	rows, err := parquet.ReadFile[pqRow](filepath.Join(src, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != pqRows {
		t.Fatalf("read %d rows", len(rows))
	}
	for _, rk := range [][3]int{{0, 0, 0}, {1, 1, p.Steps() - 1}, {0, 1, 2}} {
		dir := t.TempDir()
		res, err := verify.Export(verify.ExportOptions{Dir: out, Epoch: rk[0], Rank: rk[1], Step: rk[2], OutDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ids, _, _ := p.RankBatch(rk[0], rk[1], rk[2], nil)
		if res.Count != len(ids) || res.Count != 4 {
			t.Fatalf("count %d, want %d", res.Count, len(ids))
		}
		_, sid := readNpy(t, filepath.Join(dir, verify.SampleIDsFile))
		hx, x := readNpy(t, filepath.Join(dir, "x.npy"))
		hf, feat := readNpy(t, filepath.Join(dir, "feat.npy"))
		hi, idv := readNpy(t, filepath.Join(dir, "id.npy"))
		if hx.Descr != "<f8" || hf.Descr != "<f4" || hi.Descr != "<i8" || !reflect.DeepEqual(hf.Shape, []int{4, 2}) {
			t.Fatalf("headers %+v %+v %+v", hx, hf, hi)
		}
		for i, want := range ids {
			if got := binary.LittleEndian.Uint64(sid[8*i:]); got != want {
				t.Fatalf("sample_ids[%d] = %d, want %d", i, got, want)
			}
			r := rows[want]
			if got := int64(binary.LittleEndian.Uint64(idv[8*i:])); got != r.ID {
				t.Errorf("id[%d] = %d, want %d", i, got, r.ID)
			}
			if got := math.Float64frombits(binary.LittleEndian.Uint64(x[8*i:])); got != r.X {
				t.Errorf("x[%d] = %v, want %v", i, got, r.X)
			}
			f0 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i:]))
			f1 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i+4:]))
			if f0 != r.F || f1 != float32(r.X) {
				t.Errorf("feat[%d] = [%v %v], want [%v %v]", i, f0, f1, r.F, float32(r.X))
			}
		}
	}
}

func footer(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	return b[len(b)-8-n:]
}

func mustManifest(t *testing.T, dir string) *shardfmt.Manifest {
	t.Helper()
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itoa(k int) string { return strconv.Itoa(k) }
