package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

func TestCaseB17EmptyFiles(t *testing.T) {
	p := featuretest.CaseSource(t, "B17-empty-files", "part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "id", Column: "id", DType: "I64"}}}
	out := t.TempDir()
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	s, err := materializeAll(t, p, "tensors: [{name: id, column: id, dtype: I64}]")
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	for i, v := range featuretest.I64s(s.Data[0]) {
		sum += v
		if v != int64(i) {
			t.Errorf("sample %d holds id %d", i, v)
		}
	}
	if p.NumSamples() != 150 || sum != 11175 {
		t.Errorf("N %d, sum %d", p.NumSamples(), sum)
	}
}

func TestCaseB19CorruptFiles(t *testing.T) {
	// A damaged page in row group 1: decoding fails naming it, nothing written.
	p := featuretest.CaseSource(t, "B19-corrupt-files", "good.parquet", "bad_page_header_rg1_x.parquet")
	out := filepath.Join(t.TempDir(), "out")
	_, err := Run(context.Background(), Options{Plan: p, Spec: &feature.Spec{Tensors: []feature.TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}, Output: out})
	featuretest.MustContainAll(t, err, "bad_page_header_rg1_x.parquet", `"x"`, "row group 1")
	if _, serr := os.Stat(out); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("output left: %v", listTree(t, out))
	}
	// A file damaged after planning: refused before anything is written.
	for _, bad := range []string{"cut_last_byte.parquet", "cut_half.parquet", "footer_len_ffffffff.parquet", "zero_bytes.parquet"} {
		p := featuretest.CaseSource(t, "B19-corrupt-files", "good.parquet")
		b, _ := os.ReadFile(filepath.Join("..", "testdata", "cases", "B19-corrupt-files", bad))
		os.WriteFile(filepath.Join(p.Source.Root, "good.parquet"), b, 0o644)
		_, err := Run(context.Background(), Options{Plan: p, Spec: &feature.Spec{Tensors: []feature.TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}, Output: out})
		featuretest.MustContainAll(t, err, "good.parquet")
		if !errors.Is(err, feature.ErrSourceChanged) {
			t.Errorf("%s: %v", bad, err)
		}
		if _, serr := os.Stat(out); !errors.Is(serr, fs.ErrNotExist) {
			t.Errorf("%s: output left", bad)
		}
	}
}

// B20: list rows cut across pages; under a shuffled plan with 3 ranks every
// shard sample must hold its own row.
func TestCaseB20ListsAcrossPages(t *testing.T) {
	for _, f := range []string{"emb_pages_row_aligned.parquet", "emb_pages_split_rows.parquet"} {
		p0 := featuretest.CaseSource(t, "B20-lists-across-pages", f)
		p, err := plan.New(p0.Source, plan.Config{Seed: 11, Epochs: 1, GlobalBatch: 48, WorldSize: 3, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := feature.ParseSpec([]byte("tensors: [{name: id, column: id, dtype: I64}, {name: emb, column: emb, dtype: F32, shape: [40], list: {pad: 0, lengths: true}}]"), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2}); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		mismatches, elements := 0, 0
		for r := 0; r < 3; r++ {
			sr, err := shardfmt.Open(filepath.Join(out, shardfmt.ShardFileName(0, r)))
			if err != nil {
				t.Fatal(err)
			}
			geo := sr.Geometry()
			for k := 0; k < sr.NumBatches(); k++ {
				ids, _ := sr.SampleIDs(k)
				bi, _ := sr.Batch(k)
				block, _ := sr.Block(k)
				for i, id := range ids {
					idv := int64(binary.LittleEndian.Uint64(block[int(geo.SlabOffset[0])+8*i:]))
					n := int(binary.LittleEndian.Uint32(block[int(geo.SlabOffset[2])+4*i:]))
					emb := featuretest.F32s(block[int(geo.SlabOffset[1])+160*i:][:160])
					if idv != int64(id) || n != int(7*id%41) {
						mismatches++
						continue
					}
					if i < bi.Real() {
						elements += n
					}
					for k2 := 0; k2 < 40; k2++ {
						want := float32(0)
						if k2 < n {
							want = float32(int64(id)*1000 + int64(k2))
						}
						if math.Float32frombits(emb[k2]) != want {
							mismatches++
						}
					}
				}
			}
			sr.Close()
		}
		if mismatches != 0 || elements != 39962 {
			t.Errorf("%s: %d mismatches, %d elements (want 0, 39962)", f, mismatches, elements)
		}
	}
}

// materializeAll converts every sample of p with the YAML spec.
func materializeAll(t *testing.T, p *plan.Plan, specYAML string) (*feature.Samples, error) {
	t.Helper()
	spec, err := feature.ParseSpec([]byte(specYAML), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, p.NumSamples())
	for i := range ids {
		ids[i] = uint64(i)
	}
	return feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{})
}
