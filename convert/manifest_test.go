package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// The manifest records what the shards cannot show: source files with no
// rows, and each epoch's ids left out by remainder "drop".
func TestManifestListsEmptyFilesAndDroppedIDs(t *testing.T) {
	p0 := caseSource(t, "B17-empty-files", "part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
	// 150 samples, global batch 16: 6 ids dropped per epoch.
	p, err := plan.New(p0.Source, plan.Config{Seed: 9, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	spec := &Spec{Tensors: []TensorSpec{{Name: "id", Column: "id", DType: "I64"}}}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m.EmptyFiles); got != "[{part-1.parquet 0} {part-2.parquet 0}]" {
		t.Errorf("empty files %s", got)
	}
	if len(m.Dropped) != 2 {
		t.Fatalf("dropped %+v, want 2 epochs", m.Dropped)
	}
	for e, d := range m.Dropped {
		want, _ := p.Dropped(e)
		if d.Epoch != e || len(d.IDs) != 6 || fmt.Sprint(d.IDs) != fmt.Sprint(want) {
			t.Errorf("epoch %d: dropped %+v, plan says %v", e, d, want)
		}
		// A dropped id is in no shard of that epoch.
		for r := 0; r < 2; r++ {
			for step := 0; step < p.Steps(); step++ {
				ids, _, _ := p.RankBatch(e, r, step, nil)
				for _, id := range ids {
					for _, x := range d.IDs {
						if id == x {
							t.Errorf("epoch %d: dropped id %d in rank %d step %d", e, id, r, step)
						}
					}
				}
			}
		}
	}
	// Nothing dropped, no empty files: both fields omitted.
	p1 := caseSource(t, "B17-empty-files", "part-0.parquet")
	out1 := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Options{Plan: p1, Spec: spec, Output: out1}); err != nil {
		t.Fatal(err)
	}
	if m, err := shardfmt.ReadManifest(out1); err != nil || m.EmptyFiles != nil || m.Dropped != nil {
		t.Errorf("manifest %+v, %v: want no empty files or dropped ids", m, err)
	}
}
