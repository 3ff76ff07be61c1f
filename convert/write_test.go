package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/shardfmt"
)

// TestWriteShardsFirstFailureIsTheError: when one shard of stage 2 fails
// while others are being written (Jobs 4: all four shards at once in
// memory, each window's shards at once when spilled), the run's error is
// that shard's failure, never the cancellation it causes in the others, and
// no shard, temporary file or manifest is left.
func TestWriteShardsFirstFailureIsTheError(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	for _, c := range []struct {
		name  string
		limit int64
	}{{"in memory", 0}, {"spilled", 8 << 10}} {
		t.Run(c.name, func(t *testing.T) {
			if c.limit > 0 {
				sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "ok"), Jobs: 4, MemoryLimit: c.limit})
				if err != nil || sum.SpillWindows < 2 {
					t.Fatalf("spilled run: %+v, %v; want at least 2 spill windows", sum, err)
				}
			}
			out := filepath.Join(t.TempDir(), "out")
			blocked := blockShard(t, out, 0, 1)
			_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 4, MemoryLimit: c.limit})
			if err == nil {
				t.Fatal("run with a blocked shard path succeeded")
			}
			if errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), shardfmt.ShardFileName(0, 1)) {
				t.Errorf("err = %v; want the failure of %s, not a cancellation", err, shardfmt.ShardFileName(0, 1))
			}
			if err := os.RemoveAll(blocked); err != nil {
				t.Fatal(err)
			}
			// epoch-00000 held the blocking directory, made by the test.
			if left := listTree(t, out); !slices.Equal(left, []string{".", "epoch-00000"}) {
				t.Errorf("left behind: %v, want only [. epoch-00000]", left)
			}
		})
	}
}
