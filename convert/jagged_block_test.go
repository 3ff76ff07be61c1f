package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

func jagFixture(t testing.TB, cfg plan.Config) (*plan.Plan, *feature.Spec) {
	t.Helper()
	src := t.TempDir()
	featuretest.JagFile(0, 500, nil).RowGroupRows(128).WriteFile(t, filepath.Join(src, "a.parquet"))
	featuretest.JagFile(500, 230, nil).RowGroupRows(1000).WriteFile(t, filepath.Join(src, "b.parquet"))
	spec, err := feature.ParseSpec([]byte(featuretest.JagSpecYAML), "jagged.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, cfg), spec
}

// checkJaggedShards reads every shard of out and compares each sample
// with featuretest.JagExpect (checkShards).
func checkJaggedShards(t *testing.T, p *plan.Plan, out string) {
	t.Helper()
	samples := checkShards(t, out, "[id I64 [], v I32 [] jagged, v_mask U8 [], v_element_mask U8 [] jagged, w I64 [] jagged]", "2.0", featuretest.JagExpect)
	if want := 2 * 2 * p.Steps() * p.BatchSize(); samples > want || samples < 730*2 {
		t.Errorf("%d samples read", samples)
	}
}

// TestRunJaggedMatchesSource: a jagged I32 list column with empty and null
// lists and null elements (element_fill, element_mask, nulls.mask) and a
// required jagged list widened to I64 read back through shardfmt equal the
// source lists; in memory, with the records and the values arena spilled
// to disk, and under Jobs 1 and 4 the shards are byte-identical.
func TestRunJaggedMatchesSource(t *testing.T) {
	p, spec := jagFixture(t, featuretest.JagConfig)
	ref := filepath.Join(t.TempDir(), "mem")
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: ref, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ValuesArenaFile || sum.ValuesArenaBytes == 0 || sum.SpillWindows != 0 {
		t.Errorf("in-memory run: summary %+v", sum)
	}
	checkJaggedShards(t, p, ref)
	want := snapshot(t, ref)
	for _, c := range []struct {
		limit int64
		jobs  int
	}{{0, 1}, {0, 4}, {8 << 10, 1}, {8 << 10, 4}} {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("l%dj%d", c.limit, c.jobs))
		sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: c.jobs, MemoryLimit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if c.limit > 0 && (!sum.ValuesArenaFile || sum.SpillWindows == 0) {
			t.Errorf("limit %d: arena file %v, %d spill windows", c.limit, sum.ValuesArenaFile, sum.SpillWindows)
		}
		if snapshot(t, out) != want {
			t.Errorf("limit %d jobs %d: shards differ from the in-memory run", c.limit, c.jobs)
		}
		if _, err := os.Stat(filepath.Join(out, TempDirName)); !os.IsNotExist(err) {
			t.Errorf("limit %d: temporary directory left: %v", c.limit, err)
		}
	}
}

// TestMaterializeJagged: Samples.Sample of a jagged tensor is the
// sample's values, as the shards hold them.
func TestMaterializeJagged(t *testing.T) {
	p, spec := jagFixture(t, featuretest.JagConfig)
	ids := []uint64{0, 3, 7, 8, 14, 729, 500, 3}
	s, err := feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		for ti, want := range featuretest.JagExpect(id) {
			if got := s.Sample(ti, i); !bytes.Equal(got, want) {
				t.Errorf("id %d tensor %s = %x, want %x", id, s.Tensors[ti].Name, got, want)
			}
		}
	}
}

// TestRunJaggedNullErrors: without nulls, a null list is an error; without
// element_fill or element_mask, a null element is.
func TestRunJaggedNullErrors(t *testing.T) {
	p, _ := jagFixture(t, featuretest.JagConfig)
	for _, c := range []struct{ spec, want string }{
		{`tensors: [{name: v, column: v, dtype: I32, list: {jagged: true, element_fill: 0}}]`,
			`a.parquet: column "v", row group 0, row 3: null list (12 nulls in this column chunk; give nulls: {} to read them as empty lists)`},
		{`tensors: [{name: v, column: v, dtype: I32, list: {jagged: true}, nulls: {}}]`,
			`a.parquet: column "v", row group 0, row 4, element 3: null list element (132 null elements in this column chunk; set list.element_fill or list.element_mask)`},
	} {
		spec, err := feature.ParseSpec([]byte(c.spec), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1})
		if err == nil || err.Error() != c.want || !errors.Is(err, feature.ErrValue) {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
}

// jagLongFixture writes one file of n rows (one row group of rg rows at
// most), row id's list v of long(id) elements, and returns its plan under
// cfg and a spec of v as a jagged I32 tensor beside id.
func jagLongFixture(t testing.TB, n, rg int64, long func(id int64) int, cfg plan.Config) (*plan.Plan, *feature.Spec) {
	t.Helper()
	src := t.TempDir()
	featuretest.JagFile(0, n, long).RowGroupRows(rg).WriteFile(t, filepath.Join(src, "a.parquet"))
	return featuretest.MakePlan(t, src, cfg), jagLongSpec(t)
}

// jagLongSpec is the spec of jagLongFixture's file: v as a jagged I32
// tensor beside id.
func jagLongSpec(t testing.TB) *feature.Spec {
	t.Helper()
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: id, column: id, dtype: I64}, {name: v, column: v, dtype: I32, list: {jagged: true, element_fill: 0}, nulls: {}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// The source of longRowsFixture and the snapshot of its shards under the
// default limit, made once per process: the in-memory and the spilled
// memory-bound tests read the same 80 MB of list values. longRowsDir is
// under os.TempDir, removed by TestMain.
var (
	longRowsOnce  sync.Once
	longRowsDir   string
	longRowsWhole string // "" when making them failed
)

// longRowsFixture returns the plan (jagSeqCfg) and spec of jagLongFixture's
// file of 640 rows in one row group, the rows whose id is 5 modulo 64 (ten)
// of 2,000,000 values (longRows(64, 2_000_000)), and the snapshot of the
// shards a run of 2 jobs under the default memory limit writes from them.
// The file and that run are made once per process.
func longRowsFixture(t *testing.T) (*plan.Plan, *feature.Spec, string) {
	t.Helper()
	longRowsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "convert-longrows")
		if err != nil {
			t.Fatal(err)
		}
		longRowsDir = dir
		src := filepath.Join(dir, "src")
		if err := os.Mkdir(src, 0o755); err != nil {
			t.Fatal(err)
		}
		featuretest.JagFile(0, 640, longRows(64, 2_000_000)).RowGroupRows(1000).WriteFile(t, filepath.Join(src, "a.parquet"))
		whole := filepath.Join(dir, "whole")
		if _, err := Run(context.Background(), Options{Plan: featuretest.MakePlan(t, src, jagSeqCfg), Spec: jagLongSpec(t), Output: whole, Jobs: 2}); err != nil {
			t.Fatal(err)
		}
		longRowsWhole = snapshot(t, whole)
		if err := os.RemoveAll(whole); err != nil {
			t.Fatal(err)
		}
	})
	if longRowsWhole == "" {
		t.Fatal("the long rows' source or their run under the default limit failed in an earlier test")
	}
	return featuretest.MakePlan(t, filepath.Join(longRowsDir, "src"), jagSeqCfg), jagLongSpec(t), longRowsWhole
}

var jagSeqCfg = plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad}

// TestRunJaggedRowOverLimit: a row whose values alone exceed a jagged
// block's bound (a quarter of the memory limit, at least 1 MiB) is refused
// naming file, column, row group and row, and nothing is left: by pqread
// as it reads the row's page (Limits.MaxRowSlots). A fixed list's row,
// truncated but decoded whole first, is bounded by the memory limit over
// 22 bytes per level entry: beside the jagged tensor the larger bound
// holds, alone its own. Each names the tensor and --memory-limit; a row
// over pqread's fixed bound (Options.Limits.MaxRowSlots, 2^24 by default)
// names that bound instead, which no memory limit raises.
func TestRunJaggedRowOverLimit(t *testing.T) {
	p, spec := jagLongFixture(t, 40, 16, func(id int64) int {
		if id == 21 {
			return 300_000
		}
		return int(id % 5)
	}, jagSeqCfg)
	withFixed, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I32, list: {jagged: true, element_fill: 0}, nulls: {}}, {name: w, column: w, dtype: I32, shape: [2], list: {pad: 0, truncate: true}, nulls: {fill: 0}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fixed, err := feature.ParseSpec([]byte(`tensors: [{name: v, column: v, dtype: I32, shape: [4], list: {pad: 0, truncate: true, element_fill: 0}, nulls: {fill: 0}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec     *feature.Spec
		slots    int64 // Options.Limits.MaxRowSlots: the fixed bound
		want     string
		sentinel error
	}{
		{spec, 0, `a.parquet: column "v", row group 1, page 0, row 5, offset 743: size limit exceeded: row 5 holds more than 262144 slots (level entries), more than one row of jagged tensor "v" may hold under the memory limit (a quarter of it, at least 1 MiB, in values of the dtype); raise --memory-limit`, pqread.ErrLimit},
		{spec, 1000, `a.parquet: column "v", row group 1, page 0, row 5, offset 743: size limit exceeded: row 5 holds more than 1000 slots (level entries), the most one row of a list column may hold whatever the memory limit (tensor "v"; 1000 is a fixed bound of the Parquet reader); split such rows in the source`, pqread.ErrLimit},
		{withFixed, 0, `a.parquet: column "v", row group 1, page 0, row 5, offset 743: size limit exceeded: row 5 holds more than 262144 slots (level entries), more than one row of jagged tensor "v" may hold under the memory limit (a quarter of it, at least 1 MiB, in values of the dtype); raise --memory-limit`, pqread.ErrLimit},
		{fixed, 0, `a.parquet: column "v", row group 1, page 0, row 5, offset 743: size limit exceeded: row 5 holds more than 190650 slots (level entries), more than one row of fixed-length list tensor "v" may hold under the memory limit (a row is decoded whole before it is padded or truncated: the limit over 22 bytes per slot); raise --memory-limit`, pqread.ErrLimit},
	} {
		out := filepath.Join(t.TempDir(), "o")
		_, err := Run(context.Background(), Options{Plan: p, Spec: c.spec, Output: out, Jobs: 2, MemoryLimit: 4 << 20, Limits: pqread.Limits{MaxRowSlots: c.slots}})
		var rs *pqread.RowSlotsError
		if c.sentinel == pqread.ErrLimit && (!errors.As(err, &rs) || rs.Row != 5) {
			t.Errorf("error %v: no *pqread.RowSlotsError of row 5", err)
		}
		if err == nil || err.Error() != c.want || !errors.Is(err, c.sentinel) {
			t.Errorf("error\n  %v\nwant\n  %s", err, c.want)
		}
		if _, err := os.Stat(filepath.Join(out, "manifest.json")); !os.IsNotExist(err) {
			t.Errorf("manifest left: %v", err)
		}
	}
}

// TestMaterializeJaggedRowBound: a row of 300,000 I32 values (1.2 MB)
// converts under an 8 MiB limit (a row may take 2 MiB) and materializes
// decoding within 2 MiB when Bounds.Run is the run's 8 MiB, as verify
// --deep does within a share of its limit; with Run left to the 2 MiB
// decoding bound the row is over its 1 MiB and refused as a limit, naming
// the tensor and the flag to raise.
func TestMaterializeJaggedRowBound(t *testing.T) {
	const long = 300_000
	p, spec := jagLongFixture(t, 40, 16, func(id int64) int {
		if id == 21 {
			return long
		}
		return int(id % 5)
	}, jagSeqCfg)
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 2, MemoryLimit: 8 << 20}); err != nil {
		t.Fatalf("convert under 8 MiB: %v", err)
	}
	h, err := feature.Hold(context.Background(), nil, p, spec, []uint64{20, 21}, feature.Bounds{Memory: 2 << 20, Run: 8 << 20})
	if err != nil {
		t.Fatalf("materialize within 2 MiB for a run of 8 MiB: %v", err)
	}
	defer h.Close()
	if got := len(h.Sample(1, 1)); got != 4*long {
		t.Errorf("row 21 holds %d bytes of v, want %d", got, 4*long)
	}
	if got, want := h.Sample(1, 1)[4*1000:4*1001], binary.LittleEndian.AppendUint32(nil, uint32(21*100+1000)); !bytes.Equal(got, want) {
		t.Errorf("row 21 value 1000: % x, want % x", got, want)
	}
	_, err = feature.Hold(context.Background(), nil, p, spec, []uint64{21}, feature.Bounds{Memory: 2 << 20})
	want := `a.parquet: column "v", row group 1, page 0, row 5, offset 743: size limit exceeded: row 5 holds more than 262144 slots (level entries), more than one row of jagged tensor "v" may hold under the memory limit (a quarter of it, at least 1 MiB, in values of the dtype); raise --memory-limit`
	if err == nil || err.Error() != want || !errors.Is(err, pqread.ErrLimit) {
		t.Errorf("error\n  %v\nwant\n  %s", err, want)
	}
}

// TestRunJaggedBatchOverLimit: a batch whose block would exceed the bound
// is refused naming epoch, rank, step and tensor, though each of its rows
// fits.
func TestRunJaggedBatchOverLimit(t *testing.T) {
	p, spec := jagLongFixture(t, 40, 40, func(id int64) int {
		if id >= 8 && id < 12 {
			return 100_000
		}
		return 1
	}, jagSeqCfg)
	_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1, MemoryLimit: 4 << 20})
	want := `epoch 0, rank 0, step 2: the batch block would take 1601536 bytes, more than the 1048576 (a quarter of the memory limit, at least 1 MiB) a jagged batch may (tensor "v" holds 400000 values, 1600000 bytes, in it); raise the memory limit or lower the batch size`
	if err == nil || err.Error() != want || !errors.Is(err, feature.ErrValue) {
		t.Errorf("error\n  %v\nwant\n  %s", err, want)
	}
}

// TestRunJaggedLongRowsMemoryBound: ten rows of 2,000,000 values (80 MB of
// values) among short ones convert under a 32 MiB limit with the Go heap
// bounded by the limit, not by the values: the row group is read in row
// windows cut into pieces of bounded level entries (a long row is a piece
// alone), the arena is a file, a long row reaches it in pieces and each
// batch block holds one long row. The live heap, measured by a
// collection at every decoded piece (boundedRun), stays within the
// decode admission (half the heap's share of the limit) and the pages of
// a long row (10.4 MiB each here), under half the values' 80 MB.
// The shards equal those of a run under the default limit. The heap with
// its garbage depends on when the collector runs: peak RSS is measured by
// make bench (BENCHMARKS.md, Memory limit).
func TestRunJaggedLongRowsMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and converts 80 MB of list values")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	p, spec, whole := longRowsFixture(t)
	out := filepath.Join(t.TempDir(), "bounded")
	const limit = 32 << 20
	sum, peakLive := boundedRun(t, p, spec, out, 2, limit)
	t.Logf("live %d MiB, admitted %d MiB of a heap share of %d MiB, arena %d MiB in a file %v, %d row windows", peakLive>>20, sum.AdmittedPeakBytes>>20, sum.HeapBudgetBytes>>20, sum.ValuesArenaBytes>>20, sum.ValuesArenaFile, sum.RowSlices)
	if !sum.ValuesArenaFile || sum.RowGroupsSliced != 1 {
		t.Errorf("arena in a file %v, %d row groups sliced; want a file and 1", sum.ValuesArenaFile, sum.RowGroupsSliced)
	}
	// Measured at the pieces: live 19 MiB, admitted 26 MiB of a 31 MiB
	// heap share. A piece holding a long row holds its page (10.4 MiB),
	// its values (8 MB, the null slots spread in place), levels and
	// validity (6 MB): the admission and 12 MiB of page buffers bound the
	// live heap.
	const pages = 12 << 20
	checkHeapBound(t, sum, peakLive, limit, pages)
	if values := int64(10 * 2_000_000 * 4); peakLive > values/2 {
		t.Errorf("peak live heap %d MiB, want at most half the %d MiB of values", peakLive>>20, values>>20)
	}
	if snapshot(t, out) != whole {
		t.Errorf("bounded run's shards differ from the default run's")
	}
}

// longRows is a row length function for jagLongFixture: n values in
// every row whose id is 5 modulo every, id % 30 in the others.
func longRows(every int64, n int) func(id int64) int {
	return func(id int64) int {
		if id%every == 5 {
			return n
		}
		return int(id % 30)
	}
}

// boundedRun converts p with spec into out under MemoryLimit limit and
// jobs workers, as prep convert runs it (the Go soft memory limit at the
// heap's share of the limit, Options.HeapLimit), and returns its summary
// and the peak live heap it added, measured deterministically: at every
// decoded piece of a windowed row group (AfterPiece, where a worker's
// memory peaks) a collection runs and the live heap is read, less the
// live heap before the run (after two collections: the first keeps the
// pooled buffers of a run before as the pools' victims). The figure does
// not depend on when the collector would have run or on the machine's
// load, only on what is reachable at those points.
func boundedRun(t *testing.T, p *plan.Plan, spec *feature.Spec, out string, jobs int, limit int64) (*Summary, int64) {
	t.Helper()
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	o := Options{Plan: p, Spec: spec, Output: out, Jobs: jobs, MemoryLimit: limit,
		HeapLimit: func(n int64) { debug.SetMemoryLimit(n) }}
	sum, peakLive, err := measuredRun(o)
	if err != nil {
		t.Fatal(err)
	}
	return sum, peakLive
}

// measuredRun runs o and returns the peak live heap it added at its
// decoded pieces (see boundedRun); 0 when no row group was windowed.
func measuredRun(o Options) (*Summary, int64, error) {
	runtime.GC()
	runtime.GC()
	base := liveHeap()
	var mu sync.Mutex
	var peak int64
	feature.AfterPiece = func() {
		mu.Lock()
		defer mu.Unlock()
		runtime.GC()
		peak = max(peak, liveHeap()-base)
	}
	defer func() { feature.AfterPiece = nil }()
	sum, err := Run(context.Background(), o)
	return sum, peak, err
}

// liveHeap returns the live heap as of the last collection
// (/gc/heap/live:bytes).
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// checkHeapBound fails t unless the peak live heap the run added is at
// most its decode admission (half the heap's share of the limit,
// Summary.HeapBudgetBytes) plus pages (the page buffers a piece holding a
// long row holds beside its admitted bytes) and heapMargin. (What the
// run's accounting admitted, Summary.AdmittedPeakBytes, is logged, not
// bounded: the first grow waiting is served over the limit when nothing
// else can release, so with several workers it depends on their order.)
func checkHeapBound(t *testing.T, sum *Summary, peakLive, limit, pages int64) {
	t.Helper()
	if sum.HeapBudgetBytes < limit/2 || sum.HeapBudgetBytes > limit {
		t.Errorf("heap's share %d of a %d limit, want half of it or more", sum.HeapBudgetBytes, limit)
	}
	admission := sum.HeapBudgetBytes / 2
	if bound := admission + pages + heapMargin; peakLive > bound {
		t.Errorf("peak live heap %d MiB under a %d MiB limit, want at most %d MiB", peakLive>>20, limit>>20, bound>>20)
	}
}

// heapMargin is what the live heap may hold beyond the admitted bytes and
// a long row's pages in checkHeapBound: pooled page and level buffers
// kept between pieces, the route buffers of a spilled run and the
// records of the blocks being assembled.
const heapMargin = 8 << 20

// TestRunJaggedListOfLists: a list of lists with list.jagged gives <name>,
// every innermost value of the sample flat, and <name>_inner_lengths, the
// length of each inner list (empty and null inner lists 0, under nulls),
// through Run's shards and Materialize alike; a fixed shape is refused.
func TestRunJaggedListOfLists(t *testing.T) {
	src := t.TempDir()
	sch := parquet.NewSchema("schema", parquet.Group{
		"ll": parquet.Optional(parquet.List(parquet.Optional(parquet.List(parquet.Leaf(parquet.Int32Type))))),
	})
	// Definition levels: 0 null row, 1 empty row, 2 null inner list, 3
	// empty inner list, 4 a value.
	rowsOf := [][][]int32{{{1, 2}, {3}}, {}, nil, {{}, {4}}, {{5, 6, 7}}, {nil, {8}}}
	var rows []parquet.Row
	for i := range 60 {
		r := rowsOf[i%len(rowsOf)]
		var row parquet.Row
		switch {
		case r == nil:
			row = append(row, parquet.NullValue().Level(0, 0, 0))
		case len(r) == 0:
			row = append(row, parquet.NullValue().Level(0, 1, 0))
		}
		for j, inner := range r {
			rep := 1
			if j == 0 {
				rep = 0
			}
			switch {
			case inner == nil:
				row = append(row, parquet.NullValue().Level(rep, 2, 0))
			case len(inner) == 0:
				row = append(row, parquet.NullValue().Level(rep, 3, 0))
			}
			for k, v := range inner {
				if k > 0 {
					rep = 2
				}
				row = append(row, parquet.Int32Value(v+int32(i)).Level(rep, 4, 0))
			}
		}
		rows = append(rows, row)
	}
	pqfixture.Raw(sch, rows...).RowGroupRows(25).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, jagSeqCfg)
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: ll, column: ll, dtype: I64, list: {jagged: true}, nulls: {mask: true}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	expect := func(id uint64) [][]byte {
		r := rowsOf[id%uint64(len(rowsOf))]
		var vals, lens []byte
		for _, inner := range r {
			lens = le.AppendUint64(lens, uint64(len(inner)))
			for _, v := range inner {
				vals = le.AppendUint64(vals, uint64(v+int32(id)))
			}
		}
		mask := byte(1)
		if r == nil {
			mask = 0
		}
		return [][]byte{vals, {mask}, lens}
	}
	out := filepath.Join(t.TempDir(), "o")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := shardfmt.TensorList(m.Tensors); got != "[ll I64 [] jagged, ll_mask U8 [], ll_inner_lengths I64 [] jagged]" {
		t.Fatalf("tensors %s", got)
	}
	r, err := shardfmt.Open(filepath.Join(out, m.Shards[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k := 0; k < r.NumBatches(); k++ {
		ids, _ := r.SampleIDs(k)
		block, err := r.Block(k)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			exp := expect(id)
			for ti := range m.Tensors {
				got := slotBytes(t, r, k, block, ti, i)
				if !bytes.Equal(got, exp[ti]) {
					t.Fatalf("batch %d id %d tensor %s = %x, want %x", k, id, m.Tensors[ti].Name, got, exp[ti])
				}
			}
		}
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0, 2, 3, 5, 59}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range s.IDs {
		for ti, want := range expect(id) {
			if got := s.Sample(ti, i); !bytes.Equal(got, want) {
				t.Errorf("Materialize id %d tensor %s = %x, want %x", id, s.Tensors[ti].Name, got, want)
			}
		}
	}
	fixed, err := feature.ParseSpec([]byte(`tensors: [{name: ll, column: ll, dtype: I64, shape: [4], list: {pad: 0, truncate: true}, nulls: {fill: 0}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: fixed, Output: filepath.Join(t.TempDir(), "f"), Jobs: 1})
	if want := `a.parquet: column "ll": unsupported parquet feature: LIST<LIST<INT32 INT(32,true)>> column is a list of lists (2 levels of repetition); a tensor reads one level of lists (a jagged one, list: {jagged: true}, reads two)`; err == nil || err.Error() != want || !errors.Is(err, pqread.ErrUnsupported) {
		t.Errorf("fixed shape: error\n  %v\nwant\n  %s", err, want)
	}
}

// TestRunMapPolicyRefused: a map policy on a column that is no map is
// refused at the schema check.
func TestRunMapPolicyRefused(t *testing.T) {
	p, _ := jagFixture(t, featuretest.JagConfig)
	spec, err := feature.ParseSpec([]byte(`tensors: [{name: m, column: v, dtype: I32, map: {}}]`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "o"), Jobs: 1})
	want := `a.parquet: column "v": "v" is a LIST<INT32 INT(32,true)> column, not a map; a map policy reads a MAP column`
	if err == nil || !errors.Is(err, feature.ErrSchema) || err.Error() != want {
		t.Errorf("error\n  %v\nwant\n  %s", err, want)
	}
}

// TestJaggedListOfStrings: a list of strings with list: {jagged: true}
// and a bytes policy: each element hashed to one I64 (a null element takes
// element_fill, element_mask marks it), or padded to U8 [max_len] per
// element (truncated under bytes.truncate; a null element is max_len zero
// bytes). A longer element without truncate, a nonzero element_fill in pad
// mode and bytes.lengths are refused.
func TestJaggedListOfStrings(t *testing.T) {
	sch := parquet.NewSchema("schema", parquet.Group{
		"s": parquet.Optional(parquet.List(parquet.Optional(parquet.String()))),
	})
	str := func(v string, rep int) parquet.Value { return parquet.ByteArrayValue([]byte(v)).Level(rep, 3, 0) }
	rows := []parquet.Row{
		{str("ab", 0), str("c", 1)},
		{parquet.NullValue().Level(0, 1, 0)},
		{str("xyz", 0), parquet.NullValue().Level(1, 2, 0), str("q", 1)},
		{parquet.NullValue().Level(0, 0, 0)},
		{str("longer", 0)},
	}
	src := t.TempDir()
	pqfixture.Raw(sch, rows...).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, jagSeqCfg)
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: h, column: s, dtype: I64, list: {jagged: true, element_fill: -1, element_mask: true}, nulls: {}, bytes: {mode: hash, buckets: 1000}}
  - {name: p, column: s, dtype: U8, list: {jagged: true, element_fill: 0}, nulls: {mask: true}, bytes: {mode: pad, max_len: 4, truncate: true}}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0, 1, 2, 3, 4}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if got := shardfmt.TensorList(s.Tensors); got != "[h I64 [] jagged, h_element_mask U8 [] jagged, p U8 [4] jagged, p_mask U8 []]" {
		t.Fatalf("tensors %s", got)
	}
	le := binary.LittleEndian
	hash := func(vs ...string) []byte {
		b := []byte{}
		for _, v := range vs {
			if v == "<null>" {
				b = le.AppendUint64(b, ^uint64(0))
				continue
			}
			b = le.AppendUint64(b, feature.FNV1a64([]byte(v))%1000)
		}
		return b
	}
	want := [][][]byte{
		{hash("ab", "c"), {1, 1}, []byte("ab\x00\x00c\x00\x00\x00"), {1}},
		{hash(), {}, {}, {1}},
		{hash("xyz", "<null>", "q"), {1, 0, 1}, []byte("xyz\x00\x00\x00\x00\x00q\x00\x00\x00"), {1}},
		{hash(), {}, {}, {0}},
		{hash("longer"), {1}, []byte("long"), {1}},
	}
	for i := range want {
		for ti := range s.Tensors {
			if got := s.Sample(ti, i); !bytes.Equal(got, want[i][ti]) {
				t.Errorf("row %d tensor %s = %x, want %x", i, s.Tensors[ti].Name, got, want[i][ti])
			}
		}
	}
	for _, c := range []struct{ spec, want string }{
		{`tensors: [{name: p, column: s, dtype: U8, list: {jagged: true}, nulls: {}, bytes: {mode: pad, max_len: 4}}]`,
			`a.parquet: column "s", row group 0, row 2, element 1: null list element (1 null elements in this column chunk; set list.element_fill or list.element_mask)`},
		{`tensors: [{name: p, column: s, dtype: U8, list: {jagged: true, element_fill: 0}, nulls: {}, bytes: {mode: pad, max_len: 4}}]`,
			`a.parquet: column "s", row group 0, row 4, element 0: value is 6 bytes long, more than max_len 4 (set bytes.truncate to keep the first 4, or raise bytes.max_len)`},
		{`tensors: [{name: p, column: s, dtype: U8, list: {jagged: true, element_fill: 7}, nulls: {}, bytes: {mode: pad, max_len: 4}}]`,
			`tensor "p": list.element_fill in bytes pad mode must be 0 (an empty value)`},
		{`tensors: [{name: h, column: s, dtype: I64, list: {jagged: true}, nulls: {}}]`,
			`a.parquet: column "s": LIST<BYTE_ARRAY STRING> cannot be read as I64; set bytes.mode hash or pad`},
		{`tensors: [{name: h, column: s, dtype: I64, shape: [2]}]`,
			`a.parquet: column "s": LIST<BYTE_ARRAY STRING> cannot be read as I64; a list of strings or binary values becomes a tensor only as a jagged list: list: {jagged: true} with bytes: {mode: hash, buckets: N} (dtype I64) or {mode: pad, max_len: L} (dtype U8)`},
	} {
		spec, err := feature.ParseSpec([]byte(c.spec), "s.yaml")
		if err != nil {
			t.Fatal(err)
		}
		_, err = feature.Materialize(context.Background(), nil, p, spec, []uint64{0, 1, 2, 3, 4}, feature.Bounds{})
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
	for _, c := range []struct{ spec, want string }{
		{`tensors: [{name: p, column: s, dtype: U8, list: {jagged: true}, bytes: {mode: pad, max_len: 4, lengths: true}}]`,
			`s.yaml: tensor "p": bytes.lengths and lengths_dtype do not apply to a jagged list (each element is hashed, or padded to max_len)`},
		{`tensors: [{name: p, column: s, dtype: U8, shape: [4], list: {pad: 0}, bytes: {mode: pad, max_len: 4}}]`,
			`s.yaml: tensor "p": bytes and list policies are exclusive, but for a jagged list of strings (list: {jagged: true}), whose elements bytes makes numbers of`},
	} {
		if _, err := feature.ParseSpec([]byte(c.spec), "s.yaml"); err == nil || err.Error() != c.want || !errors.Is(err, feature.ErrSpec) {
			t.Errorf("%s: error\n  %v\nwant\n  %s", c.spec, err, c.want)
		}
	}
}

// slotBytes returns the bytes of slot i of tensor ti in batch k of r, whose
// block is block: the sample's values of a jagged tensor (its offsets
// through Reader.Jagged), its fixed-size bytes in the tensor's slab
// otherwise.
func slotBytes(t *testing.T, r *shardfmt.Reader, k int, block []byte, ti, i int) []byte {
	t.Helper()
	geo := r.Geometry()
	n := int(geo.SampleBytes[ti])
	if geo.IsJagged(ti) {
		js, err := r.Jagged(k, block, ti)
		if err != nil {
			t.Fatal(err)
		}
		return js.Values[js.Offset(i)*n : js.Offset(i+1)*n]
	}
	return block[int(geo.SlabOffset[ti])+i*n:][:n]
}
