package convert

// Tests of sliced row groups decoded by several workers at
// once (decode.go: work{task, slice}, admission per slice): faults found,
// and passing coverage of Jobs, progress and cancellation.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/plan"
)

// TestSlicedJobsProgressMatchWhole converts with Jobs 1, 2 and 4 under
// limits that slice every row group (slices of one and of a few rows, run
// by several workers at once), spilled and not: shards byte-identical to
// the whole run's, and the decode progress summing to the needed rows
// announced by OnStage.
func TestSlicedJobsProgressMatchWhole(t *testing.T) {
	src := t.TempDir()
	nulls := map[int64]bool{}
	for id := int64(0); id < 1200; id += 5 {
		nulls[id] = true
	}
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 900, 450, nulls, nil)
	writeSliceRows(t, filepath.Join(src, "part-1.parquet"), 900, 300, 300, nulls, nil)
	p := makePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 60, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte(sliceSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ref := filepath.Join(t.TempDir(), "whole")
	whole, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, ref)
	decodes, reset := countDecodes(t)
	for _, limit := range []int64{whole.StagingBytes, 16 << 10, 1} {
		for _, jobs := range []int{1, 2, 4} {
			name := fmt.Sprintf("limit %d jobs %d", limit, jobs)
			var total, done atomic.Int64
			out := filepath.Join(t.TempDir(), "sliced")
			reset()
			_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit,
				OnStage: func(stage string, rows, _ int64) {
					if stage == StageDecode {
						total.Store(rows)
					}
				},
				Progress: func(stage string, rows, _ int64) {
					if stage == StageDecode {
						done.Add(rows)
					}
				}})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if decodes() < 3 {
				t.Fatalf("%s: not sliced", name)
			}
			if snapshot(t, out) != want {
				t.Errorf("%s: output differs from the whole run's", name)
			}
			if done.Load() != total.Load() || total.Load() == 0 {
				t.Errorf("%s: decode progress %d rows, OnStage announced %d", name, done.Load(), total.Load())
			}
		}
	}
}

// TestSlicedCancelPrompt cancels runs whose row groups are sliced (Jobs 1,
// 2, 4) at the 5th slice decode: Run returns context.Canceled promptly,
// leaves no shard, temporary or lock behind, and its goroutines end.
func TestSlicedCancelPrompt(t *testing.T) {
	src := t.TempDir()
	writeSliceRows(t, filepath.Join(src, "part-0.parquet"), 0, 2000, 1000, nil, nil)
	p := makePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 50, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte(sliceSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	for _, jobs := range []int{1, 2, 4} {
		ctx, cancel := context.WithCancel(context.Background())
		var n atomic.Int32
		var cancelled atomic.Int64
		beforeDecode = func(seq int, _ context.Context) {
			if n.Add(1) == 5 {
				cancelled.Store(time.Now().UnixNano())
				cancel()
			}
		}
		out := filepath.Join(t.TempDir(), "out")
		_, err := Run(ctx, Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: 2 << 10})
		took := time.Since(time.Unix(0, cancelled.Load()))
		beforeDecode = nil
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("jobs %d: err = %v, want context.Canceled", jobs, err)
		}
		if took > 2*time.Second {
			t.Errorf("jobs %d: Run returned %v after the cancel", jobs, took)
		}
		for _, e := range listTree(t, out) {
			if strings.HasSuffix(e, ".shard") || strings.Contains(e, ".tmp") || strings.Contains(e, TempDirName) || strings.Contains(e, LockName) {
				t.Errorf("jobs %d: left behind: %s", jobs, e)
			}
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after the cancelled runs, %d before:\n%s", g, base, buf[:runtime.Stack(buf, true)])
	}
}

// rewriteNumValues rewrites the footer of the Parquet file at path with
// the value count of column chunk col of row group rg set to n (the pages
// are unchanged).
func rewriteNumValues(t *testing.T, path string, rg, col int, n int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fl := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	data := b[:len(b)-8-fl]
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[len(b)-8-fl:len(b)-8], &meta); err != nil {
		t.Fatal(err)
	}
	meta.RowGroups[rg].Columns[col].MetaData.NumValues = n
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), data...), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

type vRow struct {
	V int64 `parquet:"v"`
}

// TestHostileValueCountBreaksAdmission pins a fault: a column chunk's
// estimated decoded size came from the footer's value count
// (pqread.File.DecodedSize) without bounds, and decode.go summed the
// estimates of a row group (g.cost += b + pageAllowance) without
// saturating. (DecodedSize now saturates at the reader's MaxChunkValues,
// so the row group counts as large, and is sliced.) Row group 0 of the file claims 2^60-1 values for its INT64
// chunk (its pages hold 1,000; Open and ReadColumn accept it): its
// estimate, 8*(2^60-1), plus the page allowance wraps to a large negative
// cost, so the row group is neither sliced nor held back, and while it is
// in flight the memory limit no longer holds anything back. Row groups 1
// and 2 (1,000 rows each, about 84 KB estimated each under a 100 KB limit)
// must then never be in flight together, which the test checks by holding
// the decodes of row groups 0 and 1 until row group 2's starts (or 0.5 s
// passes): with the fault row group 2 is admitted beside row groups 0 and
// 1. Without the hostile count (the control run) it is not.
func TestHostileValueCountBreaksAdmission(t *testing.T) {
	for _, hostile := range []bool{false, true} {
		src := t.TempDir()
		path := filepath.Join(src, "a.parquet")
		rows := make([]vRow, 3000)
		for i := range rows {
			rows[i].V = int64(i)
		}
		if err := parquet.WriteFile(path, rows, parquet.MaxRowsPerRowGroup(1000)); err != nil {
			t.Fatal(err)
		}
		if hostile {
			rewriteNumValues(t, path, 0, 0, 1<<60-1)
		}
		p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
		spec, err := ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var (
			mu      sync.Mutex
			started = map[int]bool{}
			both    bool
		)
		second := make(chan struct{})
		var once, first sync.Once
		beforeDecode = func(seq int, _ context.Context) {
			mu.Lock()
			started[seq] = true
			mu.Unlock()
			switch seq {
			case 0: // row group 0 stays in flight until row group 2 starts
				// (its first decode: the hostile count makes it sliced, one
				// decode per slice)
				first.Do(func() {
					select {
					case <-second:
					case <-time.After(500 * time.Millisecond):
					}
				})
			case 1: // row group 1: wait for row group 2 to start (it must not)
				select {
				case <-second:
					mu.Lock()
					both = true
					mu.Unlock()
				case <-time.After(500 * time.Millisecond):
				}
			case 2:
				once.Do(func() { close(second) })
			}
		}
		_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 3, MemoryLimit: 100_000})
		beforeDecode = nil
		if err != nil {
			t.Fatalf("hostile %v: %v", hostile, err)
		}
		if both {
			t.Errorf("hostile %v: row groups 1 and 2 (about 84 KB estimated each) were in flight together under a 100 KB memory limit", hostile)
		}
	}
}

// TestSlicedErrorAfterTheLastRow pins a fault: firstErrorSliced relies on
// its last piece (rows up to the row group's end, read without Rest) to
// read the column chunk to its end, but pqread stops a read of a column
// without repetition at the page where its last row ends. The file's only
// column chunk declares one value more than its pages hold and has one
// byte after its last page (an empty page header, "missing required
// field"): ReadColumn reads on after the last row and fails there, and so
// does the sliced run's last slice (with Rest); but every piece
// firstErrorSliced reads succeeds (the last one stops at the page of row
// 999, before the bad byte), so the sliced run reports
// "internal: row group 0 of a.parquet failed without an error" instead of
// the whole run's error.
func TestSlicedErrorAfterTheLastRow(t *testing.T) {
	src := t.TempDir()
	path := filepath.Join(src, "a.parquet")
	rows := make([]vRow, 1000)
	for i := range rows {
		rows[i].V = int64(i)
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
	// One byte more in the chunk (at its end, before the page indexes and
	// the footer), one value more declared.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fl := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	var meta format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[len(b)-8-fl:len(b)-8], &meta); err != nil {
		t.Fatal(err)
	}
	md := &meta.RowGroups[0].Columns[0].MetaData
	end := md.DataPageOffset + md.TotalCompressedSize
	if d := md.DictionaryPageOffset; d > 0 && d < md.DataPageOffset {
		end = d + md.TotalCompressedSize
	}
	md.NumValues++
	md.TotalCompressedSize++
	// The page indexes parquet-go writes after the chunk move by a byte.
	cc := &meta.RowGroups[0].Columns[0]
	if cc.ColumnIndexOffset >= end {
		cc.ColumnIndexOffset++
	}
	if cc.OffsetIndexOffset >= end {
		cc.OffsetIndexOffset++
	}
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &meta)
	if err != nil {
		t.Fatal(err)
	}
	out := append(append([]byte(nil), b[:end]...), 0)
	out = append(out, b[end:len(b)-8-fl]...)
	out = append(out, footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	out = append(out, "PAR1"...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	p := makePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	spec, err := ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, want := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "whole"), Jobs: 1})
	if want == nil {
		t.Fatal("whole run: no error")
	}
	decodes, _ := countDecodes(t)
	for _, jobs := range []int{1, 2} {
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "sliced"), Jobs: jobs, MemoryLimit: 16 << 10})
		if decodes() < 2 {
			t.Fatalf("jobs %d: not sliced (%v; whole run: %v)", jobs, err, want)
		}
		if err == nil || err.Error() != want.Error() {
			t.Errorf("jobs %d: sliced run: %v\nwhole run: %v", jobs, err, want)
		}
	}
}
