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

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
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
// limit. It is now read forward in row windows, one window of every column
// at a time, and must stay under that with the output of a run that keeps
// the row group whole. Staging (80 MB) spills here, so every window's
// records are built whole: each of the 512 column readers holds the rest
// of the page that ends its window besides the window, up to about 90 KiB of
// decoded values each, which the bound allows beyond the sliced path's
// 48 MiB. (The heap peak is sampled, so it can only be
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
	t.Logf("peak heap %d MiB, %d slices, decode %.3f s", sum.PeakHeapBytes>>20, decodes(), sum.DecodeSeconds)
	checkSliced(t, sum, 8<<20, 48<<20+512*96<<10, decodes(), out, whole)
}

// checkSliced asserts that a run under memory limit limit peaked at no more
// than bound bytes of heap, sliced its row group (a column chunk was
// decoded more than once) and wrote the shards of the whole row group run.
func checkSliced(t *testing.T, sum *Summary, limit, bound int64, decodes int, out, whole string) {
	t.Helper()
	if sum.PeakHeapBytes > bound {
		t.Errorf("peak heap %d MiB under a %d MiB limit, want at most %d MiB", sum.PeakHeapBytes>>20, limit>>20, bound>>20)
	}
	if decodes < 2 {
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

type embRow struct {
	Emb []float32 `parquet:"emb,list"`
}

// TestColumnChunkOverLimitIsSliced pins the case slicing by column chunks
// could not bound: a row group of one column chunk that alone decodes to
// far more than --memory-limit (200,000 rows of a 32-float list column,
// 25.6 MB of values and 12.8 MB of levels, under 2 MiB). Its rows are
// decoded a slice at a time (pqread.ReadColumnRows), with the output of a
// run that decodes it whole.
func TestColumnChunkOverLimitIsSliced(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 38 MB column chunk a few times")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	src := t.TempDir()
	rows := make([]embRow, 200_000)
	for i := range rows {
		rows[i].Emb = make([]float32, 32)
		for k := range rows[i].Emb {
			rows[i].Emb[k] = float32(i) + float32(k)/32
		}
	}
	if err := parquet.WriteFile(filepath.Join(src, "emb.parquet"), rows, parquet.Compression(&parquet.Snappy)); err != nil {
		t.Fatal(err)
	}
	rows = nil
	p := makePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 1000, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := ParseSpec([]byte("tensors: [{name: emb, column: emb, dtype: F32, shape: [32]}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	decodes, reset := countDecodes(t)
	whole := filepath.Join(t.TempDir(), "whole")
	runtime.GC()
	ref, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 1, MemoryLimit: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if decodes() != 1 {
		t.Fatalf("the reference run sliced the row group")
	}
	reset()
	out := filepath.Join(t.TempDir(), "sliced")
	runtime.GC()
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak heap %d MiB sliced (%d slices), %d MiB whole; decode %.3f s sliced, %.3f s whole",
		sum.PeakHeapBytes>>20, decodes(), ref.PeakHeapBytes>>20, sum.DecodeSeconds, ref.DecodeSeconds)
	// The heap sampled counts garbage up to the collector's goal (twice the
	// live heap), so the bound leaves room; the decoded chunk alone is 38 MB.
	checkSliced(t, sum, 2<<20, 24<<20, decodes(), out, whole)
}
