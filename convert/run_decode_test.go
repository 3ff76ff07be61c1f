package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// TestSourceTruncatedDuringConvert pins a crash: a source file that shrank
// while convert read it made s2's assembly decoder fault on a mapped page
// past the new end ("recovered", then the runtime threw: fatal error:
// missing stackmap), or surfaced as "panic while decoding: invalid memory
// address". Column chunks are now read into buffers, so the run fails with
// "file changed while reading" naming the file, whether the file shrinks
// before its first column chunk is read or between two (its descriptor
// open), for whole and windowed row groups.
func TestSourceTruncatedDuringConvert(t *testing.T) {
	for _, c := range []struct {
		name  string
		at    int   // the task sequence number before whose decode the file is cut
		limit int64 // 0: row groups decoded whole
	}{
		{"before the first read", 0, 0},
		{"between two reads", 3, 0},
		{"between two windows", 1, 64 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			path := filepath.Join(src, "a.parquet")
			rows := make([]optIntRow, 40000)
			for i := range rows {
				v := int64(i)
				rows[i].V = &v
			}
			pqfixture.Of(rows...).Codec(&parquet.Snappy).RowGroupRows(10000).WriteFile(t, path)
			p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderDrop})
			spec, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var once sync.Once
			feature.BeforeDecode = func(seq int, _ context.Context) {
				if seq >= c.at {
					once.Do(func() {
						if err := os.Truncate(path, 100); err != nil {
							t.Error(err)
						}
					})
				}
			}
			defer func() { feature.BeforeDecode = nil }()
			_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: c.limit})
			if !errors.Is(err, pqread.ErrChanged) || !strings.Contains(err.Error(), "file changed while reading") || !strings.Contains(err.Error(), "a.parquet") {
				t.Fatalf("err = %v, want file changed while reading naming a.parquet", err)
			}
			if strings.Contains(err.Error(), "panic") {
				t.Errorf("err = %v", err)
			}
		})
	}
}
