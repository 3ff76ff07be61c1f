package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWritesPlanCopy: OUT/plan.json holds the plan file's exact bytes
// before the first shard is written; a rerun with other plan bytes is
// refused unless Force; a failed run into a new directory leaves no copy.
func TestRunWritesPlanCopy(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	planBytes, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	copyPath := filepath.Join(out, PlanFileName)
	var atFirstShard []byte
	opts := Options{Plan: p, PlanBytes: planBytes, Spec: spec, Output: out, Jobs: 1,
		Progress: func(stage string, rows, bytes int64) {
			if stage == StageWrite && atFirstShard == nil {
				atFirstShard, _ = os.ReadFile(copyPath)
				if atFirstShard == nil {
					atFirstShard = []byte{}
				}
			}
		}}
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(atFirstShard, planBytes) {
		t.Errorf("plan.json when the first batch was written: %d bytes, want the plan's %d", len(atFirstShard), len(planBytes))
	}
	if got, _ := os.ReadFile(copyPath); !bytes.Equal(got, planBytes) {
		t.Errorf("plan.json is not the plan file's bytes")
	}

	// The same plan in other bytes (compact JSON) is another plan file.
	var compact bytes.Buffer
	if err := json.Compact(&compact, planBytes); err != nil {
		t.Fatal(err)
	}
	opts.Progress = nil
	opts.PlanBytes = compact.Bytes()
	before := snapshot(t, out)
	_, err = Run(context.Background(), opts)
	if !errors.Is(err, ErrOutputMismatch) || !strings.Contains(err.Error(), "plan.json differs") || !strings.Contains(err.Error(), out) {
		t.Fatalf("rerun with other plan bytes: %v", err)
	}
	if snapshot(t, out) != before {
		t.Errorf("refused rerun changed the output")
	}
	opts.Force = true
	sum, err := Run(context.Background(), opts)
	if err != nil || sum.SkippedShards != 4 || sum.Shards != 0 {
		t.Fatalf("forced rerun: %+v %v", sum, err)
	}
	if got, _ := os.ReadFile(copyPath); !bytes.Equal(got, compact.Bytes()) {
		t.Errorf("forced rerun did not replace plan.json")
	}

	// A shard set written before plan.json existed gets it on a rerun.
	os.Remove(copyPath)
	opts.Force = false
	if _, err := Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(copyPath); !bytes.Equal(got, compact.Bytes()) {
		t.Errorf("rerun over a set without plan.json did not write it")
	}

	// Nil PlanBytes: the plan's canonical encoding.
	out2 := filepath.Join(t.TempDir(), "out2")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out2}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(out2, PlanFileName)); !bytes.Equal(got, planBytes) {
		t.Errorf("plan.json without PlanBytes is not Plan.Marshal()")
	}

	// Rolled back: a new output keeps no plan.json.
	out3 := filepath.Join(t.TempDir(), "out3")
	blockShard(t, out3, 1, 1)
	if _, err := Run(context.Background(), Options{Plan: p, PlanBytes: planBytes, Spec: spec, Output: out3, Jobs: 1}); err == nil {
		t.Fatal("run with a blocked shard path succeeded")
	}
	if _, err := os.Stat(filepath.Join(out3, PlanFileName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("plan.json left after a rolled-back run: %v", err)
	}
}

// TestRunRemovesPlanCopyTemporaries: a run killed while writing plan.json
// leaves its temporary file; the next run removes it.
func TestRunRemovesPlanCopyTemporaries(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	out := t.TempDir()
	tmp := filepath.Join(out, PlanFileName+".tmp-123456")
	if err := os.WriteFile(tmp, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary plan copy of a killed run left: %v", err)
	}
}
