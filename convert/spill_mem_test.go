package convert

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/plan"
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
	limit := int64(160 << 20) // 40 MB source value, 12 MB of records, a few 4 MB blocks
	if raceEnabled {
		// The race detector makes sync.Pool drop buffers at random, so the
		// 40 MB page buffer may be allocated anew for each of the row
		// group's 3 row slices. The fault's 256 MB block still shows.
		limit = 240 << 20
	}
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("spilled run allocated %d MiB", got>>20)
	if int64(got) > limit {
		t.Errorf("spilled run allocated %d MiB, want at most %d MiB", got>>20, limit>>20)
	}
}

// TestSpillManyWindowsKeepNoRecordBuffers pins the second half of the same
// fault: a decode worker keeps one route buffer per spill window, and when
// a buffer could hold only one entry (records larger than the buffer
// share) each was still a full record, kept for the whole of stage 1: 100
// windows of 300 KB records held 30 MB under a 256 KiB limit (a run of
// 100 steps of 1 MB records peaked at 129 MiB of heap under 1 MiB). Such
// entries are written at once through one scratch entry.
func TestSpillManyWindowsKeepNoRecordBuffers(t *testing.T) {
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "a.parquet"), 0, 100, 100, &parquet.Snappy)
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	const rec = 300000
	s, err := newSpiller(context.Background(), p, []shardKey{{0, 0}}, rec, 256<<10, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.windows) != 100 {
		t.Fatalf("%d spill windows, want one per step (100)", len(s.windows))
	}
	if err := s.open(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	defer s.close()
	rb := s.newRouteBuffers()
	record := make([]byte, rec)
	for step := range 100 {
		record[0] = byte(step)
		if err := s.add(rb, &s.groups[0], 0, step, 0, record); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.flushAll(rb); err != nil {
		t.Fatal(err)
	}
	if err := s.checkFull(); err != nil {
		t.Fatal(err)
	}
	var kept int
	for _, b := range rb.bufs {
		kept += cap(b)
	}
	if kept > 2*s.ent {
		t.Errorf("route buffers keep %d bytes after 100 records of %d bytes, want at most two entries", kept, rec)
	}
	// Every record reached its window.
	win := make([]byte, rec)
	for wi := range s.windows {
		if err := s.load(context.Background(), wi, win, 1); err != nil {
			t.Fatal(err)
		}
		if win[0] != byte(wi) {
			t.Fatalf("window %d holds record %d", wi, win[0])
		}
	}
}
