package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/atomicfile"
	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// fixture writes two source files (700 + 300 rows, row groups of 128) and
// returns the plan and spec.
func fixture(t testing.TB, cfg plan.Config) (*plan.Plan, *feature.Spec) {
	t.Helper()
	src := t.TempDir()
	featuretest.File(0, 700).RowGroupRows(128).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "part-0.parquet"))
	featuretest.File(700, 300).RowGroupRows(128).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, "part-1.parquet"))
	spec, err := feature.ParseSpec([]byte(featuretest.SpecYAML), "features.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return featuretest.MakePlan(t, src, cfg), spec
}

func TestRunEndToEnd(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
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
				for ti, wantB := range featuretest.ExpectSample(id) {
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
	s, err := feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		for ti, w := range featuretest.ExpectSample(id) {
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

// snapshot returns the names of every file and directory under dir and
// each file's SHA-256 as one string: two trees of the same snapshot hold
// the same files, byte for byte.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, rel := range listTree(t, dir) {
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err == nil && st.IsDir() {
			fmt.Fprintf(&b, "%s/\n", rel)
		} else if err == nil {
			h := sha256.New()
			if _, err = io.Copy(h, f); err == nil {
				fmt.Fprintf(&b, "%s %x\n", rel, h.Sum(nil))
			}
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
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
	p, _ := fixture(t, featuretest.DefaultConfig)
	bad, err := feature.ParseSpec([]byte("tensors:\n  - {name: opt, column: opt, dtype: I32}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A new output directory: it must not exist afterwards.
	out := filepath.Join(t.TempDir(), "new")
	_, err = Run(context.Background(), Options{Plan: p, Spec: bad, Output: out})
	if err == nil || !errors.Is(err, feature.ErrValue) || !strings.Contains(err.Error(), `part-0.parquet: column "opt", row group 0, row 0: null value`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("output directory left after failure: %v", listTree(t, out))
	}
	// An existing complete output is untouched by a failed run into it.
	_, spec := fixture(t, featuretest.DefaultConfig)
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
	missing, _ := feature.ParseSpec([]byte("tensors:\n  - {name: z, column: nope, dtype: I32}\n"), "m.yaml")
	_, err = Run(context.Background(), Options{Plan: p, Spec: missing, Output: good})
	if !errors.Is(err, feature.ErrSchema) || !strings.Contains(err.Error(), `part-0.parquet: column "nope"`) {
		t.Errorf("missing column: %v", err)
	}
	if after := snapshot(t, good); after != before {
		t.Errorf("failed runs changed existing output:\n%s", firstDiff(before, after))
	}
}

func TestRunSourceChanged(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	f := filepath.Join(p.Source.Root, "part-1.parquet")
	featuretest.File(700, 299).RowGroupRows(128).Codec(&parquet.Snappy).WriteFile(t, f)
	out := filepath.Join(t.TempDir(), "o")
	_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out})
	if !errors.Is(err, feature.ErrSourceChanged) || !strings.Contains(err.Error(), "part-1.parquet") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("output created")
	}
}

func TestRunLockHeld(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
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
			pqfixture.Of(vals...).Codec(&parquet.Lz4Raw).WriteFile(t, filepath.Join(dir, "lz4raw.parquet"))
			p := featuretest.MakePlan(t, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 100, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
			spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "v", Column: "v", DType: "I64"}}}
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
	p, spec := fixture(t, featuretest.DefaultConfig)
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
		featuretest.File(int64(3*i), 3).RowGroupRows(3).Codec(&parquet.Snappy).WriteFile(t, filepath.Join(src, fmt.Sprintf("part-%05d.parquet", i)))
	}
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 2, Epochs: 1, GlobalBatch: 30, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	testutil.LowerFDLimit(t, 64)
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "id", Column: "id", DType: "I64"}}}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{0, uint64(3*n - 1)}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(featuretest.I64s(s.Data[0])); got != fmt.Sprint([]int64{0, int64(3*n - 1)}) {
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
	p, _ := fixture(t, featuretest.DefaultConfig)
	bad, err := feature.ParseSpec([]byte("tensors:\n  - {name: opt, column: opt, dtype: I32}\n"), "bad.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { feature.BeforeDecode = nil }()
	const want = `part-0.parquet: column "opt", row group 0, row 0: null value`
	for _, jobs := range []int{1, 2, 3} {
		feature.BeforeDecode = nil
		if jobs > 1 { // another worker can fail row group 1 meanwhile
			feature.BeforeDecode = func(seq int, ctx context.Context) {
				if seq == 0 {
					select {
					case <-ctx.Done():
					case <-time.After(10 * time.Second):
					}
				}
			}
		}
		_, err := Run(context.Background(), Options{Plan: p, Spec: bad, Output: filepath.Join(t.TempDir(), "o"), Jobs: jobs})
		if !errors.Is(err, feature.ErrValue) || !strings.Contains(err.Error(), want) {
			t.Errorf("jobs %d: err = %v, want one naming %q", jobs, err, want)
		}
	}
}

// copyTree copies the directory src to dst.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunResumesSpecV1ShardSet: a shard set written before spec hash
// version 2 (testdata/shards/spec-v1, made by gen.sh with the prep of that
// time; its manifest and shards carry the version 1 hash) is recognised
// by a rerun with the same spec: every shard is skipped and nothing
// changes, and a shard removed from it is written again byte for byte as
// the old prep wrote it, the set keeping its version 1 hash.
func TestRunResumesSpecV1ShardSet(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "testdata", "shards", "spec-v1"), dir)
	p, planBytes, err := plan.LoadBytes(filepath.Join(dir, "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	p.Source.Root = filepath.Join(dir, "src")
	spec, err := feature.LoadSpec(filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.SpecHash, feature.SpecHashV1) || strings.HasPrefix(m.SpecHash, feature.SpecHashV2) || spec.Hash() == m.SpecHash || !spec.MatchesHash(m.SpecHash) {
		t.Fatalf("fixture spec hash %s, this spec %s: want a version 1 hash of the same spec", m.SpecHash, spec.Hash())
	}
	opts := Options{Plan: p, PlanBytes: planBytes, Spec: spec, Output: out, Jobs: 2, ToolVersion: "dev"}
	before := snapshot(t, out)
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Shards != 0 || sum.SkippedShards != 4 {
		t.Errorf("rerun summary %+v, want 4 shards skipped", sum)
	}
	if after := snapshot(t, out); after != before {
		t.Errorf("rerun changed the version 1 shard set:\n%s", firstDiff(before, after))
	}
	os.Remove(filepath.Join(out, m.Shards[2].Path))
	sum, err = Run(context.Background(), opts)
	if err != nil || sum.Shards != 1 || sum.SkippedShards != 3 {
		t.Fatalf("resume: %+v %v", sum, err)
	}
	if after := snapshot(t, out); after != before {
		t.Errorf("a shard rewritten into the version 1 shard set differs from the old one:\n%s", firstDiff(before, after))
	}
}

// The manifest records what the shards cannot show: source files with no
// rows, and each epoch's ids left out by remainder "drop".
func TestManifestListsEmptyFilesAndDroppedIDs(t *testing.T) {
	p0 := featuretest.CaseSource(t, "B17-empty-files", "part-0.parquet", "part-1.parquet", "part-2.parquet", "part-3.parquet")
	// 150 samples, global batch 16: 6 ids dropped per epoch.
	p, err := plan.New(p0.Source, plan.Config{Seed: 9, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	spec := &feature.Spec{Tensors: []feature.TensorSpec{{Name: "id", Column: "id", DType: "I64"}}}
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out}); err != nil {
		t.Fatal(err)
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(m.EmptyFiles); got != "[{part-1.parquet 0} {part-2.parquet 0}]" {
		t.Errorf("empty files %s", got)
	}
	if len(m.Dropped) != 2 {
		t.Fatalf("dropped %+v, want 2 epochs", m.Dropped)
	}
	for e, d := range m.Dropped {
		want, _ := p.Dropped(e)
		if d.Epoch != e || len(d.IDs) != 6 || fmt.Sprint(d.IDs) != fmt.Sprint(want) {
			t.Errorf("epoch %d: dropped %+v, plan says %v", e, d, want)
		}
		// A dropped id is in no shard of that epoch.
		for r := 0; r < 2; r++ {
			for step := 0; step < p.Steps(); step++ {
				ids, _, _ := p.RankBatch(e, r, step, nil)
				for _, id := range ids {
					for _, x := range d.IDs {
						if id == x {
							t.Errorf("epoch %d: dropped id %d in rank %d step %d", e, id, r, step)
						}
					}
				}
			}
		}
	}
	// Nothing dropped, no empty files: both fields omitted.
	p1 := featuretest.CaseSource(t, "B17-empty-files", "part-0.parquet")
	out1 := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Options{Plan: p1, Spec: spec, Output: out1}); err != nil {
		t.Fatal(err)
	}
	if m, err := shardfmt.ReadManifest(out1); err != nil || m.EmptyFiles != nil || m.Dropped != nil {
		t.Errorf("manifest %+v, %v: want no empty files or dropped ids", m, err)
	}
}

// TestRunWritesPlanCopy: OUT/plan.json holds the plan file's exact bytes
// before the first shard is written; a rerun with other plan bytes is
// refused unless Force; a failed run into a new directory leaves no copy.
func TestRunWritesPlanCopy(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
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
	p, spec := fixture(t, featuretest.DefaultConfig)
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

// TestRunShardEvents: OnShard reports every written shard once as started
// and once as committed, in that order, never concurrently with itself or
// Progress; write progress for a shard falls between its two events.
func TestRunShardEvents(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	var busy atomic.Int32
	enter := func() {
		if busy.Add(1) != 1 {
			t.Error("callbacks ran concurrently")
		}
	}
	leave := func() { busy.Add(-1) }
	var events []string
	inFlight := map[string]bool{}
	var writeBytes int64
	o := Options{Plan: p, Spec: spec, Output: t.TempDir(), Jobs: 2,
		OnShard: func(epoch, rank int, done bool) {
			enter()
			defer leave()
			k := fmt.Sprintf("e%dr%d", epoch, rank)
			if done {
				if !inFlight[k] {
					t.Errorf("%s committed without a start", k)
				}
				delete(inFlight, k)
				events = append(events, k+" done")
			} else {
				inFlight[k] = true
				events = append(events, k+" start")
			}
		},
		Progress: func(stage string, rows, bytes int64) {
			enter()
			defer leave()
			if stage == StageWrite {
				if len(inFlight) == 0 {
					t.Error("write progress outside any shard")
				}
				writeBytes += bytes
			}
		}}
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(events)
	want := []string{"e0r0 done", "e0r0 start", "e0r1 done", "e0r1 start", "e1r0 done", "e1r0 start", "e1r1 done", "e1r1 start"}
	if !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
	if sum.Shards != 4 || writeBytes == 0 {
		t.Errorf("summary %+v, write progress %d bytes", sum, writeBytes)
	}
}

// blockShard makes the commit (rename) of shard (epoch, rank) in out fail by
// putting a non-empty directory at its path.
func blockShard(t *testing.T, out string, epoch, rank int) string {
	t.Helper()
	p := filepath.Join(out, filepath.FromSlash(shardfmt.ShardFileName(epoch, rank)))
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// listed returns the shard paths the manifest in out lists (nil when there
// is no manifest).
func listed(t *testing.T, out string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(out, shardfmt.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatalf("manifest unreadable during rollback: %v", err)
	}
	var ps []string
	for _, s := range m.Shards {
		ps = append(ps, s.Path)
	}
	return ps
}

// shardsOnDisk returns the shard files under out, slash-separated and
// sorted.
func shardsOnDisk(t *testing.T, out string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, "epoch-*", "rank-*.shard"))
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, p := range m {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			rel, _ := filepath.Rel(out, p)
			ps = append(ps, filepath.ToSlash(rel))
		}
	}
	slices.Sort(ps)
	return ps
}

// TestRollbackRestoresManifestBeforeRemovingShards pins what a failed run's
// rollback leaves: the manifest as before (byte for byte, or less the shards
// the run rewrote) and none of the run's shards. The order of its steps
// (manifest first, shards after) is pinned in shardset's Txn tests.
func TestRollbackRestoresManifestBeforeRemovingShards(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	run := func(out string, epochs []int) error {
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, Epochs: epochs})
		return err
	}

	t.Run("new output", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		blockShard(t, out, 1, 1) // the last of 4 shards with Jobs 1
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got := shardsOnDisk(t, out); len(got) != 0 {
			t.Errorf("rollback left shards %v", got)
		}
		if _, err := os.Stat(filepath.Join(out, shardfmt.ManifestName)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("manifest left after rolling back a new output: %v", err)
		}
	})

	t.Run("resumed output", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		if err := run(out, []int{0}); err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		blockShard(t, out, 1, 1)
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0), shardfmt.ShardFileName(0, 1)}; !slices.Equal(got, want) {
			t.Errorf("after rollback the shards on disk are %v, want %v", got, want)
		}
		after, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
		if err != nil || string(after) != string(before) {
			t.Errorf("manifest not restored byte for byte (%v)", err)
		}
	})

	t.Run("rewritten shard dropped from the restored manifest", func(t *testing.T) {
		// The manifest lists (0,1), but its file was lost: the rerun writes
		// it again, fails later, and removes it, so the restored manifest
		// must no longer list it.
		out := filepath.Join(t.TempDir(), "out")
		if err := run(out, []int{0}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(out, filepath.FromSlash(shardfmt.ShardFileName(0, 1)))); err != nil {
			t.Fatal(err)
		}
		blockShard(t, out, 1, 0)
		if err := run(out, nil); err == nil {
			t.Fatal("run with a blocked shard path succeeded")
		}
		if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0)}; !slices.Equal(got, want) {
			t.Errorf("after rollback the shards on disk are %v, want %v", got, want)
		}
		if got, want := listed(t, out), []string{shardfmt.ShardFileName(0, 0)}; !slices.Equal(got, want) {
			t.Errorf("restored manifest lists %v, want %v", got, want)
		}
	})
}

// TestFailedRunIntoExistingDirLeavesNoEpochDirs pins leftovers of a failed
// run into a directory that existed before it: the rollback removed the
// shards it had committed but kept the epoch directories it had created,
// empty (only a run that had created the output directory removed them),
// so the directory no longer looked as it did before the run.
func TestFailedRunIntoExistingDirLeavesNoEpochDirs(t *testing.T) {
	src := t.TempDir()
	featuretest.File(0, 64).RowGroupRows(64).WriteFile(t, filepath.Join(src, "a.parquet"))
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 2, GlobalBatch: 8, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderDrop})
	spec, err := feature.ParseSpec([]byte("tensors: [{name: id, column: id, dtype: I64}]"), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	blocked := blockShard(t, out, 1, 0) // epoch 1's shard cannot commit
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1}); err == nil {
		t.Fatal("run succeeded over a blocked shard path")
	}
	if err := os.RemoveAll(filepath.Dir(blocked)); err != nil { // the test's own blocker
		t.Fatal(err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"notes.txt"}) {
		t.Errorf("after the failed run the directory holds %v, want only [notes.txt]", names)
	}
}

// TestFailedDirSyncLeavesNoUnlistedShard pins fault "a failed directory
// fsync leaves an unlisted shard in an existing set": the first shard of a
// run into an existing set is renamed into place and then its directory
// fsync fails; the run fails and leaves the set as it was.
func TestFailedDirSyncLeavesNoUnlistedShard(t *testing.T) {
	p, spec := fixture(t, featuretest.DefaultConfig)
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1, Epochs: []int{0}}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(out, shardfmt.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	failed := false
	atomicfile.SyncDirHook = func(dir string) error {
		if !failed && strings.HasSuffix(dir, "epoch-00001") {
			failed = true
			return errors.New("injected EIO")
		}
		return nil
	}
	defer func() { atomicfile.SyncDirHook = nil }()
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: 1})
	if !errors.Is(err, shardfmt.ErrNotDurable) {
		t.Fatalf("run = %v, want ErrNotDurable", err)
	}
	if got, want := shardsOnDisk(t, out), []string{shardfmt.ShardFileName(0, 0), shardfmt.ShardFileName(0, 1)}; !slices.Equal(got, want) {
		t.Errorf("shards on disk %v, want %v", got, want)
	}
	if after, _ := os.ReadFile(filepath.Join(out, shardfmt.ManifestName)); string(after) != string(before) {
		t.Error("manifest not restored byte for byte")
	}
}

// TestRunCountsOverflows: ids 0..999 cast to F8_E4M3 overflow for 465..999
// (464 ties to 448); the run stores them saturated, reports 535 in the
// summary and warns once; cast.overflow error fails at the first one, id
// 465 = part-0.parquet row group 3 (rows of 128), row 81.
func TestRunCountsOverflows(t *testing.T) {
	p, _ := fixture(t, featuretest.DefaultConfig)
	spec, err := feature.ParseSpec([]byte(`tensors:
  - {name: id, column: id, dtype: I64}
  - {name: id8, column: id, dtype: F8_E4M3}
  - {name: x, column: x, dtype: F16}
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	sum, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Overflows) != 1 || sum.Overflows["id8"] != 535 {
		t.Errorf("overflows %v, want map[id8:535]", sum.Overflows)
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 || !strings.Contains(logs.String(), "tensor=id8 dtype=F8_E4M3 count=535") {
		t.Errorf("log:\n%s", logs.String())
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, []uint64{464, 465, 999}, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Data[1]; !bytes.Equal(got, []byte{0x7e, 0x7e, 0x7e}) {
		t.Errorf("saturated values %x", got)
	}

	spec.Tensors[1].Cast = &feature.CastPolicy{Overflow: "error"}
	_, err = Run(context.Background(), Options{Plan: p, Spec: spec, Output: t.TempDir()})
	featuretest.MustContainAll(t, err, `part-0.parquet: column "id", row group 3, row 81: value 465 overflows F8_E4M3 (largest finite 448; cast.overflow is error)`)
	if !errors.Is(err, feature.ErrValue) {
		t.Errorf("error %v does not wrap feature.ErrValue", err)
	}
	spec.Tensors[1].Cast = &feature.CastPolicy{Overflow: "clip"}
	if err := spec.Validate(); !errors.Is(err, feature.ErrSpec) {
		t.Errorf("cast.overflow clip accepted: %v", err)
	}
}
