package convert

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// stackedSpec stacks column x n times into one F64 tensor.
func stackedSpec(t *testing.T, n int) *Spec {
	t.Helper()
	cols := strings.TrimSuffix(strings.Repeat("x, ", n), ", ")
	spec, err := ParseSpec([]byte("tensors: [{name: x, columns: ["+cols+"], dtype: F64}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestRowGroupOverLimitIsSliced pins a row group whose needed columns decode
// to far more than --memory-limit: the 20,000-row row group of B07 read as
// 512 stacked columns (80 MB of decoded values) was decoded whole, every
// column chunk at once, and peaked at 131 MiB of Go heap under an 8 MiB
// limit. It is now assembled in row slices, one decoded column chunk at a
// time, and must stay well under that with the output of a run that keeps
// the row group whole. (The heap peak is sampled, so it can only be
// underestimated; the old path held its peak through the whole assembly.)
func TestRowGroupOverLimitIsSliced(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 512 column chunks 44 times")
	}
	if raceEnabled {
		// A bound on memory, not a concurrency check: TestSlicedRowGroupsMatchWhole
		// runs the same sliced path under the race detector, which makes
		// this one take half a minute.
		t.Skip("measures memory; slow under the race detector")
	}
	p := caseSource(t, "B07-dict-fallback", "dict_then_plain.parquet")
	spec := stackedSpec(t, 512)
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	decodes, _ := countDecodes(t)
	out := filepath.Join(t.TempDir(), "sliced")
	runtime.GC() // the heap sampled is the process's: drop the whole run's garbage
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 48 << 20
	t.Logf("peak heap %d MiB, %d slices", sum.PeakHeapBytes>>20, decodes())
	if sum.PeakHeapBytes > bound {
		t.Errorf("peak heap %d MiB under an 8 MiB limit, want at most %d MiB", sum.PeakHeapBytes>>20, bound>>20)
	}
	if decodes() < 2 {
		t.Errorf("the row group was not sliced")
	}
	if treeDigest(t, out) != treeDigest(t, whole) {
		t.Errorf("sliced output differs from the whole row group output")
	}
}

// treeDigest is snapshot for large trees: each file's SHA-256 instead of its
// bytes.
func treeDigest(t testing.TB, dir string) string {
	var b strings.Builder
	for _, rel := range listTree(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err == nil {
			fmt.Fprintf(&b, "%s %x\n", rel, sha256.Sum256(data))
		} else {
			fmt.Fprintf(&b, "%s/\n", rel)
		}
	}
	return b.String()
}
