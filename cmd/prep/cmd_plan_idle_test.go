package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// More ranks x workers than batches: the idle (rank, worker) pairs are
// reported in the summary, and the plan is still written.
func TestPlanReportsIdleWorkers(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "five.parquet")
	for _, tc := range []struct {
		remainder, want string
	}{
		// 5 samples, b = 1: rank 0 has steps 0 and 1 (workers 0, 1), the
		// other ranks a sample only at step 0; worker 2 never gets a step.
		{"partial", "[{0 2} {1 1} {1 2} {2 1} {2 2} {3 1} {3 2}]"},
		// Pads are not samples: the same pairs are idle.
		{"pad", "[{0 2} {1 1} {1 2} {2 1} {2 2} {3 1} {3 2}]"},
		// 4 samples in 1 step: workers 1 and 2 of every rank are idle.
		{"drop", "[{0 1} {0 2} {1 1} {1 2} {2 1} {2 2} {3 1} {3 2}]"},
	} {
		code, out, errs := runPrep("plan", "--source", src, "--global-batch", "4", "--world-size", "4", "--workers", "3",
			"--remainder", tc.remainder, "-o", filepath.Join(dir, tc.remainder+".json"), "--json", "-q")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.remainder, code, errs)
		}
		var s planSummary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(s.IdlePairs); got != tc.want {
			t.Errorf("%s: idle pairs %s, want %s", tc.remainder, got, tc.want)
		}
	}
	code, out, errs := runPrep("plan", "--source", src, "--global-batch", "4", "--world-size", "4", "--workers", "3",
		"--remainder", "partial", "-o", filepath.Join(dir, "text.json"))
	if code != 0 || !strings.Contains(out, "idle workers     7 of 12 (rank, worker) pairs get no samples: rank 0 worker 2, rank 1 worker 1,") {
		t.Errorf("exit %d, summary:\n%s%s", code, out, errs)
	}
	// Enough batches for every worker: none idle, no line.
	code, out, _ = runPrep("plan", "--source", src, "--global-batch", "1", "-o", filepath.Join(dir, "busy.json"))
	if code != 0 || strings.Contains(out, "idle") {
		t.Errorf("exit %d, summary:\n%s", code, out)
	}
}
