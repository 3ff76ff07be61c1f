package verify_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
)

// jaggedSet writes a one-epoch, one-rank shard set of 2 steps whose
// tensors are a fixed F32 "x" and a jagged I32 "h" (every row empty).
func jaggedSet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 1, Steps: 2, BatchSize: 4,
		Tensors:    []shardfmt.TensorInfo{{Name: "x", DType: shardfmt.F32}, {Name: "h", DType: shardfmt.I32, Jagged: true}},
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 1, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) {
			return []uint64{uint64(4 * k), uint64(4*k + 1), uint64(4*k + 2), uint64(4*k + 3)}, 0, nil
		},
		Fill: func(shardfmt.Geometry, []uint64, []byte) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportRefusesJaggedTensors pins that export, which writes one .npy
// per fixed-shape slab, refuses a shard with a jagged tensor (format 2.0)
// naming it, instead of writing its offsets as values, and writes nothing.
func TestExportRefusesJaggedTensors(t *testing.T) {
	dir := jaggedSet(t)
	out := filepath.Join(t.TempDir(), "batch")
	_, err := verify.Export(verify.ExportOptions{Dir: dir, Epoch: 0, Rank: 0, Step: 1, OutDir: out})
	if !errors.Is(err, verify.ErrUnsupported) || !strings.Contains(err.Error(), `tensor "h" is jagged`) {
		t.Fatalf("Export: %v, want ErrUnsupported naming tensor h", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("export left %s behind (%v)", out, err)
	}
}

// TestDeepSkipsJaggedTensorsWithAFinding pins that verify --deep, which
// compares fixed-size samples, does not compare a jagged shard's bytes as
// if they were fixed: the shard gets one source_unreadable finding naming
// the jagged tensor, and its source is never opened.
func TestDeepSkipsJaggedTensorsWithAFinding(t *testing.T) {
	dir := jaggedSet(t)
	opened := false
	opener := func(*plan.Plan, *shardfmt.Manifest, string, shardfmt.Geometry, []shardfmt.TensorInfo) (verify.SampleSource, error) {
		opened = true
		return nil, errors.New("not reached")
	}
	rep, err := verify.Run(context.Background(), verify.Options{Dir: dir, Deep: true, Source: opener, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if opened {
		t.Fatal("the source was opened for a jagged shard")
	}
	var found bool
	for _, f := range rep.Findings {
		if f.Kind == verify.KindSourceUnreadable && strings.Contains(f.Message, `tensor "h" is jagged`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no finding names the jagged tensor:\n%s", lines(rep))
	}
}
