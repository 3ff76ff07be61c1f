package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
)

// TestRunOneMemoryBudget: staging and the values arena held in anonymous
// memory take at most half of MemoryLimit, and the Go heap's share
// (Options.HeapLimit, Summary.HeapBudgetBytes) is the rest. An arena that
// fits the limit beside the staging records but not half of it goes to a
// file (it went to memory beside a decode admission of the whole limit:
// twice the limit in all); one that fits half stays in memory. The shards
// are the same either way.
func TestRunOneMemoryBudget(t *testing.T) {
	p, spec := jagLongFixture(t, 64, 16, longRows(16, 20_000), jagSeqCfg)
	ref, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "ref"), Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	arena, stage := ref.ValuesArenaBytes, ref.StagingBytes
	if ref.ValuesArenaFile || arena == 0 || ref.AnonBudgetBytes != arena+stage || ref.HeapBudgetBytes != 1<<30-arena-stage {
		t.Fatalf("default limit: arena %d bytes (file %v), staging %d; anonymous share %d, heap share %d; want the arena in memory and the rest of 1 GiB the heap's",
			arena, ref.ValuesArenaFile, stage, ref.AnonBudgetBytes, ref.HeapBudgetBytes)
	}
	want := snapshot(t, filepath.Join(filepath.Dir(ref.Output), "ref"))
	for _, c := range []struct {
		limit  int64
		inFile bool
	}{
		{(arena + stage) * 3 / 2, true}, // fits the limit, not half of it
		{2 * (arena + stage), false},    // fits half of it
	} {
		var heap []int64
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, MemoryLimit: c.limit,
			HeapLimit: func(n int64) { heap = append(heap, n) }})
		if err != nil {
			t.Fatalf("limit %d: %v", c.limit, err)
		}
		anon := stage
		if !c.inFile {
			anon += arena
		}
		if sum.ValuesArenaFile != c.inFile || sum.SpillBytes != 0 || sum.AnonBudgetBytes != anon || sum.HeapBudgetBytes != c.limit-anon ||
			len(heap) != 1 || heap[0] != c.limit-anon {
			t.Errorf("limit %d (arena %d, staging %d): arena in a file %v, spilled %d, anonymous share %d, heap share %d, HeapLimit calls %v; want file %v, no spill, %d, %d, [%d]",
				c.limit, arena, stage, sum.ValuesArenaFile, sum.SpillBytes, sum.AnonBudgetBytes, sum.HeapBudgetBytes, heap, c.inFile, anon, c.limit-anon, c.limit-anon)
		}
		if 2*sum.AnonBudgetBytes > c.limit {
			t.Errorf("limit %d: %d bytes of anonymous memory, more than half the limit", c.limit, sum.AnonBudgetBytes)
		}
		if got := snapshot(t, out); got != want {
			t.Errorf("limit %d: shards differ from the default run's", c.limit)
		}
	}
}

// TestAdmissionLongRowsJobs4: twenty rows of 1,500,000 values, five in
// each of four row groups, each row group read in row windows by one of four workers
// under a 32 MiB limit: a piece holding a long row grows its row group's
// admitted bytes before its page is decoded, so the long rows are decoded
// about one at a time instead of four at once, and the live heap stays
// within the limit and one long row's page buffers. The shards equal
// those of a run under the default limit.
func TestAdmissionLongRowsJobs4(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and converts 120 MB of list values")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	p, spec := jagLongFixture(t, 640, 160, longRows(32, 1_500_000), jagSeqCfg)
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 4}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bounded")
	const limit = 32 << 20
	sum, peakLive := boundedRun(t, p, spec, out, 4, limit)
	t.Logf("live %d MiB, admitted %d MiB of a heap share of %d MiB, %d row groups sliced in %d row windows", peakLive>>20, sum.AdmittedPeakBytes>>20, sum.HeapBudgetBytes>>20, sum.RowGroupsSliced, sum.RowSlices)
	if sum.RowGroupsSliced != 4 {
		t.Errorf("%d row groups sliced, want 4", sum.RowGroupsSliced)
	}
	// Measured at the pieces: live 27 MiB, admitted 46 MiB (a long row
	// served over the limit) of a 31 MiB heap share; admitting each
	// windowed row group by its estimate alone, the live heap took 110 to
	// 119 MiB. The long row being decoded holds its page buffers
	// (compressed and not, about 7 MB each here) beside what is admitted.
	const pages = 16 << 20
	checkHeapBound(t, sum, peakLive, limit, pages)
	if snapshot(t, out) != snapshot(t, whole) {
		t.Errorf("bounded run's shards differ from the default run's")
	}
}

// TestRunObjectStoreReadAheadShare: reading an object store, whose
// read-ahead holds a quarter of the limit (at most 256 MiB), the run's
// anonymous and heap shares add up to the rest of the limit; reading a
// local directory, to the whole limit. The shards are the same.
func TestRunObjectStoreReadAheadShare(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	const limit = 64 << 20
	var snaps []string
	for _, c := range []struct {
		objectStore bool
		want        int64
	}{{false, limit}, {true, limit - limit/4}} {
		out := filepath.Join(t.TempDir(), "out")
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, MemoryLimit: limit, ObjectStore: c.objectStore})
		if err != nil {
			t.Fatal(err)
		}
		if got := sum.AnonBudgetBytes + sum.HeapBudgetBytes; got != c.want {
			t.Errorf("object store %v: anonymous %d + heap %d = %d bytes, want %d", c.objectStore, sum.AnonBudgetBytes, sum.HeapBudgetBytes, got, c.want)
		}
		snaps = append(snaps, snapshot(t, out))
	}
	if snaps[0] != snaps[1] {
		t.Error("the shards differ with the read-ahead share")
	}
}

// TestSliceEstimateCountsSourceValues pins a fault of the decode-size
// estimate that decides whether a row group is sliced: it counted the
// output's bytes per row (32 for a hashed string, max_len for a padded
// one, the shape for a list), not the source's. A hashed or truncated
// column of 1,000-byte strings, or a 256-float list truncated to 4, was
// estimated at a few dozen bytes per row, so a 20,000-row row group
// (20 MB of strings, 20 MB of floats) was judged to fit a 2 MiB limit and
// decoded whole: the Go heap peaked at 30-58 MiB although every row
// is small (doc.go "# Memory", README: only one page or a single row larger
// than half the limit may exceed it). The estimate now also counts the
// source values from the footer (pqread.File.DecodedSize).
func TestSliceEstimateCountsSourceValues(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes 40 MB")
	}
	if raceEnabled {
		t.Skip("measures memory")
	}
	src := t.TempDir()
	data := make([]longRow, 20000)
	for i := range data {
		data[i].Emb = make([]float32, 256)
		for k := range data[i].Emb {
			data[i].Emb[k] = float32(i*k) + 0.5
		}
		data[i].S = fmt.Sprintf("%01000d", i)
	}
	pqfixture.Of(data...).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "a.parquet"))
	data = nil
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	const bound = 8 << 20 // live at the decoded pieces (measuredRun); whole, the column chunks take 30-58 MiB
	decodes, reset := countDecodes(t)
	for _, sp := range []string{
		`tensors: [{name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 100}}]`,
		`tensors: [{name: s, column: s, dtype: U8, bytes: {mode: pad, max_len: 4, truncate: true}}]`,
		`tensors: [{name: e, column: emb, dtype: F32, shape: [4], list: {truncate: true}}]`,
	} {
		spec, err := feature.ParseSpec([]byte(sp), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		reset()
		_, live, err := measuredRun(Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out"), Jobs: 1, MemoryLimit: 2 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: peak live heap %d MiB", sp, live>>20)
		if n := decodes(); n < 2 || live > bound {
			t.Errorf("%s: under a 2 MiB limit the 20,000-row row group was decoded %d time(s) (1: whole, not sliced), peak live heap %d MiB (want at most %d MiB)",
				sp, n, live>>20, bound>>20)
		}
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
		pqfixture.Of(rows...).RowGroupRows(1000).WriteFile(t, path)
		if hostile {
			rewriteNumValues(t, path, 0, 0, 1<<60-1)
		}
		p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
		spec, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
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
		feature.BeforeDecode = func(seq int, _ context.Context) {
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
		feature.BeforeDecode = nil
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
	pqfixture.Of(rows...).WriteFile(t, path)
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
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I64}]`), "s.yaml")
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

// stackedSpec stacks column x n times into one F64 tensor.
func stackedSpec(t *testing.T, n int) *feature.Spec {
	t.Helper()
	cols := strings.TrimSuffix(strings.Repeat("x, ", n), ", ")
	spec, err := feature.ParseSpec([]byte("tensors: [{name: x, columns: ["+cols+"], dtype: F64}]"), "spec.yaml")
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
// the row group whole. (Staging, 80 MB, spills here, so every window's
// records are built whole; the 512 tasks read one column chunk, which
// they share: one reader, one dictionary.) (The heap peak is sampled, so it can only be
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
	p := featuretest.CaseSource(t, "B07-dict-fallback", "dict_then_plain.parquet")
	spec := stackedSpec(t, 512)
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	decodes, _ := countDecodes(t)
	out := filepath.Join(t.TempDir(), "sliced")
	_, live, err := measuredRun(Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak live heap %d MiB, %d slices", live>>20, decodes())
	checkSliced(t, live, 8<<20, 16<<20, decodes(), out, whole)
}

// checkSliced asserts that a run under memory limit limit held at most
// bound bytes of live heap at its decoded pieces (measuredRun: a
// collection at each, so the figure does not depend on when the collector
// runs), sliced its row group (a column chunk was decoded more than once)
// and wrote the shards of the whole row group run.
func checkSliced(t *testing.T, live, limit, bound int64, decodes int, out, whole string) {
	t.Helper()
	if live <= 0 || live > bound {
		t.Errorf("peak live heap %d MiB under a %d MiB limit, want more than 0 and at most %d MiB", live>>20, limit>>20, bound>>20)
	}
	if decodes < 2 {
		t.Errorf("the row group was not sliced")
	}
	if snapshot(t, out) != snapshot(t, whole) {
		t.Errorf("sliced output differs from the whole row group output")
	}
}

// TestColumnChunkOverLimitIsSliced pins the case slicing by column chunks
// could not bound: a row group of one column chunk that alone decodes to
// far more than --memory-limit (200,000 rows of a 32-float list column,
// 25.6 MB of values and 12.8 MB of levels, under 2 MiB). Its rows are
// decoded a window at a time (pqread.ColumnReader, every page once), with
// the output of a run that decodes it whole.
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
	pqfixture.Of(rows...).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "emb.parquet"))
	rows = nil
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 1000, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := feature.ParseSpec([]byte("tensors: [{name: emb, column: emb, dtype: F32, shape: [32]}]"), "spec.yaml")
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
	sum, live, err := measuredRun(Options{Plan: p, Spec: spec, Output: out, Jobs: 1, MemoryLimit: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak live heap %d MiB sliced (%d slices); decode %.3f s sliced, %.3f s whole",
		live>>20, decodes(), sum.DecodeSeconds, ref.DecodeSeconds)
	// The decoded chunk alone is 38 MB.
	checkSliced(t, live, 2<<20, 8<<20, decodes(), out, whole)
}

// TestSlicedEverySliceFailsManyJobs (passing coverage): a value error in
// every slice of every row group (a null without fill, a list of another
// length, a null hashed string), so that every worker fails at once and
// waits on the one error search of its row group (sliceError's sync.Once),
// under Jobs 1, 2, 4 and 16 (more workers than slices at 16 KiB), reports
// exactly the whole run's error, counts over the column chunk included.
func TestSlicedEverySliceFailsManyJobs(t *testing.T) {
	src := t.TempDir()
	opts := []parquet.WriterOption{parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(60), parquet.DataPageVersion(2)}
	writeShapes(t, filepath.Join(src, "a.parquet"), false, 0, 600, shapesData{vecLen: func(id int64) int { return 2 + int(id%5)/4 }}, append(opts, parquet.MaxRowsPerRowGroup(300))...)
	writeShapes(t, filepath.Join(src, "b.parquet"), false, 600, 400, shapesData{}, append(opts, parquet.MaxRowsPerRowGroup(1000))...)
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 9, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
	for _, sp := range []string{
		`tensors: [{name: xy, columns: [y, x], dtype: F32}]`,
		`tensors: [{name: id, column: id, dtype: I64}, {name: vec, column: vec, dtype: F32, shape: [3]}, {name: xy, columns: [y, x], dtype: F32}]`,
		`tensors: [{name: s, column: s, dtype: I64, bytes: {mode: hash, buckets: 7}}, {name: xy, columns: [y, x], dtype: F32}]`,
	} {
		compareSliced(t, p, sp, nil, nil, []int64{1, 2 << 10, 16 << 10}, []int{1, 2, 4, 16})
	}
}

// TestSlicedBigDictStringsBothForms (passing coverage): column chunks of
// about 1 MB read by two tensors at once, one in dictionary form (hash)
// and one in plain form (pad), with Jobs 4: the same shards, or the same
// error, as the whole run.
func TestSlicedBigDictStringsBothForms(t *testing.T) {
	src := t.TempDir()
	var rows []bigStrRow
	for i := 0; i < 6000; i++ {
		r := bigStrRow{ID: int64(i), Name: fmt.Sprintf("%0200d", i%(300+i/20)), Val: fmt.Sprintf("%0150d", i*7), F: float64(i)}
		if i%997 != 5 {
			v := int32(i)
			r.Opt = &v
		}
		rows = append(rows, r)
	}
	pqfixture.Of(rows...).PageBytes(8<<10).RowGroupRows(4000).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 10, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	for _, sp := range []string{
		`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 1000003}}, {name: p, column: name, dtype: U8, bytes: {mode: pad, max_len: 3, truncate: true}}, {name: v, column: val, dtype: I64, bytes: {mode: hash, buckets: 77}}, {name: id, column: id, dtype: I64}]`,
		`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 1000003}}, {name: o, column: opt, dtype: I32}]`,
		`tensors: [{name: p, column: val, dtype: U8, bytes: {mode: pad, max_len: 149}}]`,
	} {
		compareSliced(t, p, sp, nil, nil, []int64{256 << 10}, []int{1, 4})
	}
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: h, column: name, dtype: I64, bytes: {mode: hash, buckets: 7}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 4, MemoryLimit: 256 << 10})
	if err != nil || sum.RowGroupsSliced == 0 {
		t.Fatalf("256 KiB: %v, %d row groups sliced (want some)", err, sum.RowGroupsSliced)
	}
}

// TestWindowsSpilledLongRowsMemoryBound is TestRunJaggedLongRowsMemoryBound
// with the staging spilled: ten rows of 2,000,000 values among short ones
// under a 32 MiB limit, the row group read in row windows with every
// column's piece held together (assembleWindows), each piece's rows
// bounded by the entries of its list column. The shards equal those of
// an in-memory run under the default limit.
func TestWindowsSpilledLongRowsMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and converts 80 MB of list values")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	p, spec, whole := longRowsFixture(t)
	out := filepath.Join(t.TempDir(), "spilled")
	spillAlways = true
	defer func() { spillAlways = false }()
	const limit = 32 << 20
	sum, peakLive := boundedRun(t, p, spec, out, 2, limit)
	t.Logf("live %d MiB, admitted %d MiB of a heap share of %d MiB, spilled %d bytes in %d windows, %d row windows", peakLive>>20, sum.AdmittedPeakBytes>>20, sum.HeapBudgetBytes>>20, sum.SpillBytes, sum.SpillWindows, sum.RowSlices)
	if sum.SpillBytes == 0 || sum.RowGroupsSliced != 1 {
		t.Errorf("spilled %d bytes, %d row groups sliced; want a spill and 1", sum.SpillBytes, sum.RowGroupsSliced)
	}
	// Measured at the pieces: live 21 MiB of a 31 MiB heap share. As in
	// the in-memory run, a piece holding a long row holds its page (10.4
	// MiB) beside its values, levels and validity.
	const pages = 16 << 20
	checkHeapBound(t, sum, peakLive, limit, pages)
	if snapshot(t, out) != whole {
		t.Errorf("spilled run's shards differ from the in-memory run's")
	}
}
