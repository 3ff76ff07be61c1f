package convert

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
)

// TestSpillLargeRecordsAllocateAFewRecords pins a spilled run that used
// far more memory than the in-memory one it replaces: the assembly block
// held at least 64 records, so with 4 MB records (bytes pad, max_len
// 4,000,000) a decode worker allocated a 256 MB private block for a row
// group of 3 rows, under a --memory-limit of 1 MiB. The bytes a spilled
// run allocates must stay a small multiple of one record (the 40 MB source
// value of the case file is decoded too).
func TestSpillLargeRecordsAllocateAFewRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 40 MB value")
	}
	p := caseSource(t, "B21-huge-string", "hugestr.parquet")
	spec, err := ParseSpec([]byte("tensors: [{name: t, column: text, dtype: U8, bytes: {mode: pad, max_len: 4000000, truncate: true}}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if sum.SpillWindows == 0 {
		t.Fatal("the run did not spill")
	}
	const limit = 160 << 20 // 40 MB source value, 12 MB of records, a few 4 MB blocks
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("spilled run allocated %d MiB", got>>20)
	if got > limit {
		t.Errorf("spilled run allocated %d MiB, want at most %d MiB", got>>20, limit>>20)
	}
}
