package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

type testRow struct {
	ID    int64     `parquet:"id"`
	X     float32   `parquet:"x"`
	Emb   []float32 `parquet:"emb,list"`
	Label string    `parquet:"label,dict"`
	Opt   *int32    `parquet:"opt,optional"`
}

func makeRow(id int64) testRow {
	r := testRow{ID: id, X: float32(id) * 0.5, Label: fmt.Sprintf("L%d", id%7)}
	for k := int64(0); k < id%6; k++ {
		r.Emb = append(r.Emb, float32(id*10+k))
	}
	if id%5 != 0 {
		v := int32(id)
		r.Opt = &v
	}
	return r
}

// writeParquet writes rows [first, first+n) of makeRow to dir/name.
func writeParquet(t testing.TB, path string, first, n int64, rowsPerGroup int64, codec compress.Codec) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[testRow](f, parquet.Compression(codec), parquet.MaxRowsPerRowGroup(rowsPerGroup))
	rows := make([]testRow, 0, 1024)
	for id := first; id < first+n; id++ {
		rows = append(rows, makeRow(id))
		if len(rows) == cap(rows) {
			if _, err := w.Write(rows); err != nil {
				t.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func makePlan(t testing.TB, dir string, cfg plan.Config) *plan.Plan {
	t.Helper()
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testSpecYAML = `
tensors:
  - name: id
    column: id
    dtype: I64
  - name: x
    column: x
    dtype: F16
  - name: emb
    column: emb
    dtype: F32
    shape: [4]
    list: {pad: -1, truncate: true, lengths: true}
  - name: label
    column: label
    dtype: I64
    bytes: {mode: hash, buckets: 1000}
  - name: opt
    column: opt
    dtype: I32
    nulls: {fill: -7, mask: true}
`

// fixture writes two source files (700 + 300 rows, row groups of 128) and
// returns the plan and spec.
func fixture(t testing.TB, cfg plan.Config) (*plan.Plan, *Spec) {
	t.Helper()
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "part-0.parquet"), 0, 700, 128, &parquet.Snappy)
	writeParquet(t, filepath.Join(src, "part-1.parquet"), 700, 300, 128, &parquet.Snappy)
	spec, err := ParseSpec([]byte(testSpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return makePlan(t, src, cfg), spec
}

var defaultCfg = plan.Config{Seed: 7, Epochs: 2, GlobalBatch: 64, WorldSize: 2, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

// expectSample returns the expected bytes of each output tensor for id.
func expectSample(id uint64) [][]byte {
	r := makeRow(int64(id))
	le := binary.LittleEndian
	idb := le.AppendUint64(nil, uint64(r.ID))
	h, _ := shardfmt.F64ToF16(float64(r.X))
	xb := le.AppendUint16(nil, h)
	var emb []byte
	for k := 0; k < 4; k++ {
		v := float32(-1)
		if k < len(r.Emb) {
			v = r.Emb[k]
		}
		emb = le.AppendUint32(emb, math.Float32bits(v))
	}
	lens := le.AppendUint32(nil, uint32(len(r.Emb)))
	lab := le.AppendUint64(nil, FNV1a64([]byte(r.Label))%1000)
	opt, mask := le.AppendUint32(nil, uint32(0xfffffff9)), []byte{0}
	if r.Opt != nil {
		opt, mask = le.AppendUint32(nil, uint32(*r.Opt)), []byte{1}
	}
	return [][]byte{idb, xb, emb, lens, lab, opt, mask}
}

func TestRunEndToEnd(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Shards != 4 || sum.SkippedShards != 0 || sum.SamplesDecoded != 1000 || sum.Rows != 4*int64(p.Steps()*p.BatchSize()) {
		t.Errorf("summary %+v", sum)
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 4 || m.SpecHash != spec.Hash() || m.PlanFingerprint != p.Fingerprint {
		t.Fatalf("manifest %+v", m)
	}
	names := []string{"id", "x", "emb", "emb_lengths", "label", "opt", "opt_mask"}
	for i, ti := range m.Tensors {
		if ti.Name != names[i] {
			t.Fatalf("tensor %d = %s, want %s", i, ti.Name, names[i])
		}
	}
	seen := make([]int, 1000)
	for _, e := range m.Shards {
		r, err := shardfmt.Open(filepath.Join(out, e.Path))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := shardfmt.FileDigest(filepath.Join(out, e.Path)); err != nil || d != e.Digest {
			t.Errorf("%s digest %s, manifest %s (%v)", e.Path, d, e.Digest, err)
		}
		geo := r.Geometry()
		size, err := shardfmt.FileSize(shardfmt.WriterOptions{BatchSize: p.BatchSize(), NumBatches: p.Steps(), Tensors: m.Tensors, Provenance: r.Provenance()})
		if err != nil || size != e.Size || r.FileSize() != e.Size {
			t.Errorf("%s: size %d, computed %d (%v), manifest %d", e.Path, r.FileSize(), size, err, e.Size)
		}
		if r.NumBatches() != p.Steps() {
			t.Fatalf("%s: %d batches, want %d", e.Path, r.NumBatches(), p.Steps())
		}
		var want []uint64
		for k := 0; k < r.NumBatches(); k++ {
			ids, err := r.SampleIDs(k)
			if err != nil {
				t.Fatal(err)
			}
			want, _, err = p.RankBatch(e.Epoch, e.Rank, k, want)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ids) != fmt.Sprint(want) {
				t.Fatalf("%s batch %d ids %v, plan %v", e.Path, k, ids, want)
			}
			block, err := r.Block(k)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				if e.Epoch == 0 {
					seen[id]++
				}
				for ti, wantB := range expectSample(id) {
					n := int(geo.SampleBytes[ti])
					got := block[int(geo.SlabOffset[ti])+i*n:][:n]
					if !bytes.Equal(got, wantB) {
						t.Fatalf("%s batch %d sample %d (id %d) tensor %s = %x, want %x", e.Path, k, i, id, names[ti], got, wantB)
					}
				}
			}
		}
		r.Close()
	}
	for id, n := range seen {
		if n < 1 {
			t.Fatalf("id %d missing from epoch 0", id)
		}
	}
	// Nothing temporary left.
	entries := listTree(t, out)
	for _, e := range entries {
		if strings.Contains(e, ".tmp") || strings.Contains(e, TempDirName) || strings.Contains(e, LockName) {
			t.Errorf("left behind: %s", e)
		}
	}

	// Materialize gives the same bytes.
	ids := []uint64{999, 0, 5, 700, 5}
	s, err := Materialize(context.Background(), p, spec, ids)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		for ti, w := range expectSample(id) {
			if got := s.Sample(ti, i); !bytes.Equal(got, w) {
				t.Errorf("Materialize id %d tensor %d = %x, want %x", id, ti, got, w)
			}
		}
	}

	// Rerun: everything skipped, output untouched.
	before := snapshot(t, out)
	sum, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 2, ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Shards != 0 || sum.SkippedShards != 4 {
		t.Errorf("rerun summary %+v", sum)
	}
	if after := snapshot(t, out); after != before {
		t.Errorf("rerun changed the output")
	}
	// A shard deleted after the run is rewritten identically.
	os.Remove(filepath.Join(out, m.Shards[1].Path))
	sum, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, ToolVersion: "test"})
	if err != nil || sum.Shards != 1 || sum.SkippedShards != 3 {
		t.Fatalf("resume: %+v %v", sum, err)
	}
	if after := snapshot(t, out); after != before {
		t.Errorf("resumed output differs from the first run:\n%s", firstDiff(before, after))
	}
}

// listTree returns every path under dir, relative, sorted.
func listTree(t testing.TB, dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

// snapshot returns the names and contents of every file under dir as one string.
func snapshot(t testing.TB, dir string) string {
	var b strings.Builder
	for _, rel := range listTree(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err == nil {
			fmt.Fprintf(&b, "%s %x\n", rel, data)
		} else {
			fmt.Fprintf(&b, "%s/\n", rel)
		}
	}
	return b.String()
}

func TestRunJobsByteIdentical(t *testing.T) {
	p, spec := fixture(t, plan.Config{Seed: 3, Epochs: 2, GlobalBatch: 48, WorldSize: 3, Workers: 1, Shuffle: plan.ShuffleBlocks, Window: 2, Remainder: plan.RemainderPartial})
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: a, Jobs: 1, MemoryLimit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: b, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	if snapshot(t, a) != snapshot(t, b) {
		t.Errorf("--jobs 1 and --jobs 2 outputs differ")
	}
}

func TestRunSubsetOfRanks(t *testing.T) {
	p, spec := fixture(t, plan.Config{Seed: 1, Epochs: 3, GlobalBatch: 40, WorldSize: 4, Workers: 1, Shuffle: plan.ShufflePartitioned, Remainder: plan.RemainderDrop})
	out := t.TempDir()
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Epochs: []int{1}, Ranks: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Shards != 1 || sum.RowGroupsSkipped == 0 {
		t.Errorf("partitioned single rank should skip row groups: %+v", sum)
	}
	m, _ := shardfmt.ReadManifest(out)
	if len(m.Shards) != 1 || m.Shards[0].Epoch != 1 || m.Shards[0].Rank != 2 {
		t.Errorf("manifest shards %+v", m.Shards)
	}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Ranks: []int{4}}); err == nil {
		t.Errorf("rank 4 of 4 accepted")
	}
}

func TestRunFailureLeavesNothing(t *testing.T) {
	p, _ := fixture(t, defaultCfg)
	bad, err := ParseSpec([]byte("tensors:\n  - {name: opt, column: opt, dtype: I32}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A new output directory: it must not exist afterwards.
	out := filepath.Join(t.TempDir(), "new")
	_, err = Run(context.Background(), Options{Plan: p, Spec: bad, Output: out})
	if err == nil || !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), `part-0.parquet: column "opt", row group 0, row 0: null value`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("output directory left after failure: %v", listTree(t, out))
	}
	// An existing complete output is untouched by a failed run into it.
	_, spec := fixture(t, defaultCfg)
	good := filepath.Join(t.TempDir(), "good")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: good}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, good)
	_, err = Run(context.Background(), Options{Plan: p, Spec: bad, Output: good, Force: true})
	if err == nil {
		t.Fatal("bad spec with --force succeeded")
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: bad, Output: good})
	if !errors.Is(err, ErrOutputMismatch) {
		t.Errorf("other spec without force: %v", err)
	}
	// Missing column: a schema error before anything is written.
	missing, _ := ParseSpec([]byte("tensors:\n  - {name: z, column: nope, dtype: I32}\n"), "m.yaml")
	_, err = Run(context.Background(), Options{Plan: p, Spec: missing, Output: good})
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `part-0.parquet: column "nope"`) {
		t.Errorf("missing column: %v", err)
	}
	if after := snapshot(t, good); after != before {
		t.Errorf("failed runs changed existing output:\n%s", firstDiff(before, after))
	}
}

func TestRunSourceChanged(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	f := filepath.Join(p.Source.Root, "part-1.parquet")
	writeParquet(t, f, 700, 299, 128, &parquet.Snappy)
	out := filepath.Join(t.TempDir(), "o")
	_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
	if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), "part-1.parquet") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("output created")
	}
}

func TestRunLockHeld(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	out := t.TempDir()
	l, err := dirlock.Acquire(filepath.Join(out, LockName))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
	var ec interface{ ExitCode() int }
	if !errors.As(err, &ec) || ec.ExitCode() != 3 || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("err = %v", err)
	}
	l.Release()
	// A stale lock file (no holder) is reported and taken over.
	os.WriteFile(filepath.Join(out, LockName), []byte("999999 otherhost\n"), 0o644)
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.StaleLock != "pid 999999 on host otherhost" {
		t.Errorf("stale lock = %q", sum.StaleLock)
	}
	if _, err := os.Stat(filepath.Join(out, LockName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lock file left")
	}
}

// TestLZ4RawRoundTrip pins parquet-go issue #608 (LZ4_RAW pages read back
// wrong): poorly compressible int64 values written with LZ4_RAW must come
// through convert exactly.
func TestLZ4RawRoundTrip(t *testing.T) {
	sizes := []int{1000, 100000}
	if testing.Short() {
		sizes = sizes[:1]
	}
	type lzRow struct {
		V int64 `parquet:"v"`
	}
	for _, n := range sizes {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			dir := t.TempDir()
			rng := rand.New(rand.NewPCG(uint64(n), 608))
			vals := make([]lzRow, n)
			for i := range vals {
				vals[i].V = int64(rng.Uint64())
			}
			f, _ := os.Create(filepath.Join(dir, "lz4raw.parquet"))
			w := parquet.NewGenericWriter[lzRow](f, parquet.Compression(&parquet.Lz4Raw))
			if _, err := w.Write(vals); err != nil {
				t.Fatal(err)
			}
			w.Close()
			f.Close()
			p := makePlan(t, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
			spec := &Spec{Tensors: []TensorSpec{{Name: "v", Column: "v", DType: "I64"}}}
			out := t.TempDir()
			if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out}); err != nil {
				t.Fatal(err)
			}
			r, err := shardfmt.Open(filepath.Join(out, shardfmt.ShardFileName(0, 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			bad := 0
			for k := 0; k < r.NumBatches(); k++ {
				ids, _ := r.SampleIDs(k)
				block, _ := r.Block(k)
				for i, id := range ids {
					if got := int64(binary.LittleEndian.Uint64(block[8*i:])); got != vals[id].V {
						bad++
					}
				}
			}
			if bad != 0 {
				t.Errorf("%d of %d values wrong", bad, n)
			}
		})
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("before: %.300s\nafter:  %.300s", al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines before, %d after", len(al), len(bl))
}

// TestNeededIDsShortcut checks the all-ids shortcut against the plan itself
// for every shuffle mode and remainder policy.
func TestNeededIDsShortcut(t *testing.T) {
	src := t.TempDir()
	writeParquet(t, filepath.Join(src, "a.parquet"), 0, 203, 16, &parquet.Snappy)
	writeParquet(t, filepath.Join(src, "b.parquet"), 203, 50, 7, &parquet.Snappy)
	for _, sh := range []plan.Shuffle{plan.ShuffleNone, plan.ShuffleGlobal, plan.ShuffleBlocks, plan.ShufflePartitioned} {
		for _, rem := range []plan.Remainder{plan.RemainderDrop, plan.RemainderPad, plan.RemainderPartial} {
			cfg := plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 12, WorldSize: 3, Workers: 2, Shuffle: sh, Remainder: rem}
			if sh == plan.ShuffleBlocks {
				cfg.Window = 2
			}
			p, err := plan.New(mustDiscover(t, src), cfg)
			if err != nil {
				t.Fatal(err)
			}
			todo := []shardKey{{1, 0}, {1, 1}, {1, 2}}
			set, err := neededIDs(context.Background(), p, todo)
			if err != nil {
				t.Fatal(err)
			}
			want := newIDSet(p.NumSamples())
			var ids []uint64
			for _, k := range todo {
				for s := 0; s < p.Steps(); s++ {
					ids, _, _ = p.RankBatch(k.epoch, k.rank, s, ids)
					for _, id := range ids {
						want.add(id)
					}
				}
			}
			if fmt.Sprint(set.words) != fmt.Sprint(want.words) {
				t.Errorf("%s/%s: needed ids differ from the plan", sh, rem)
			}
		}
	}
}

func mustDiscover(t *testing.T, dir string) plan.Source {
	s, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunCancelledKeepsCommittedShards: an interrupted run leaves complete
// shards listed in the manifest and no temporaries; the rerun finishes.
func TestRunCancelledKeepsCommittedShards(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var once bool
	_, err := Run(ctx, Options{Plan: p, Spec: spec, Output: out, Jobs: 1, Progress: func(stage string, rows, bytes int64) {
		if stage == StageWrite && !once {
			once = true
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	for _, e := range listTree(t, out) {
		if strings.Contains(e, ".tmp") || strings.Contains(e, TempDirName) || strings.Contains(e, LockName) {
			t.Errorf("left behind: %s", e)
		}
	}
	if m, err := shardfmt.ReadManifest(out); err == nil {
		for _, s := range m.Shards {
			if _, err := shardfmt.FileDigest(filepath.Join(out, s.Path)); err != nil {
				t.Errorf("listed shard %s: %v", s.Path, err)
			}
		}
	}
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
	if err != nil || sum.Shards+sum.SkippedShards != 4 {
		t.Fatalf("rerun: %+v %v", sum, err)
	}
}

// TestRunManySmallFilesLowFDLimit (B26): many small files convert under a
// low open-file limit; descriptors are released as files are finished.
func TestRunManySmallFilesLowFDLimit(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 150
	}
	src := t.TempDir()
	for i := 0; i < n; i++ {
		writeParquet(t, filepath.Join(src, fmt.Sprintf("part-%05d.parquet", i)), int64(3*i), 3, 3, &parquet.Snappy)
	}
	p := makePlan(t, src, plan.Config{Seed: 2, Epochs: 1, GlobalBatch: 30, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	testutil.LowerFDLimit(t, 64)
	spec := &Spec{Tensors: []TensorSpec{{Name: "id", Column: "id", DType: "I64"}}}
	s, err := Materialize(context.Background(), p, spec, []uint64{0, uint64(3*n - 1)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i64s(s.Data[0])); got != fmt.Sprint([]int64{0, int64(3*n - 1)}) {
		t.Errorf("ids %s", got)
	}
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: t.TempDir(), Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.SamplesDecoded != int64(3*n) {
		t.Errorf("decoded %d samples, want %d", sum.SamplesDecoded, 3*n)
	}
}

// TestRunErrorIndependentOfScheduling pins that the error reported is the
// earliest in task order however the work is scheduled: here the first
// row group's column chunk only starts after a later row group has failed
// (and cancelled the run), and must still run, so the error names row
// group 0, as a run with Jobs 1 does.
func TestRunErrorIndependentOfScheduling(t *testing.T) {
	p, _ := fixture(t, defaultCfg)
	bad, err := ParseSpec([]byte("tensors:\n  - {name: opt, column: opt, dtype: I32}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { beforeDecode = nil }()
	const want = `part-0.parquet: column "opt", row group 0, row 0: null value`
	for _, jobs := range []int{1, 2, 3} {
		beforeDecode = nil
		if jobs > 1 { // another worker can fail row group 1 meanwhile
			beforeDecode = func(seq int, ctx context.Context) {
				if seq == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Second):
					}
				}
			}
		}
		_, err := Run(context.Background(), Options{Plan: p, Spec: bad, Output: filepath.Join(t.TempDir(), "o"), Jobs: jobs})
		if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), want) {
			t.Errorf("jobs %d: err = %v, want one naming %q", jobs, err, want)
		}
	}
}
