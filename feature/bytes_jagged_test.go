package feature

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
)

// TestBytesJaggedNullError: a null string under bytes: {mode: jagged}
// without nulls is an error naming file, column, row group and row that
// calls it a null value and points at nulls: {} (it said "null list" and
// "empty lists" of a string column).
func TestBytesJaggedNullError(t *testing.T) {
	type row struct {
		ID  int64   `parquet:"id"`
		Cap *string `parquet:"cap,optional"`
	}
	s := "a caption"
	src := t.TempDir()
	pqfixture.Of(row{ID: 0, Cap: &s}, row{ID: 1}).WriteFile(t, filepath.Join(src, "caps.parquet"))
	spec, err := ParseSpec([]byte("tensors:\n  - {name: cap, column: cap, dtype: U8, bytes: {mode: jagged}}\n"), "caps.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	_, err = Materialize(context.Background(), nil, p, spec, []uint64{0, 1}, Bounds{Memory: 64 << 20})
	want := `caps.parquet: column "cap", row group 0, row 1: null value (1 nulls in this column chunk; give nulls: {} to read them as empty values`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}
