// Package ops holds end-to-end operations tests of the prep binary: crash and
// rerun, concurrent runs into one directory, disk full, changed source,
// rolling epoch windows with gc, ranks from launcher variables, metrics and
// JSON logs. The binary is built once into a temporary directory.
package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/internal/metrics"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
)

var prepBin string

func TestMain(m *testing.M) {
	testutil.MainWithPrep(m, "prep-ops-bin-", &prepBin, func() {
		for _, d := range sharedDirs {
			os.RemoveAll(d)
		}
	})
}

// row is one source row: an id and 16 float features stacked into one
// tensor by the spec.
type row struct {
	ID  int64   `parquet:"id"`
	F00 float32 `parquet:"f00"`
	F01 float32 `parquet:"f01"`
	F02 float32 `parquet:"f02"`
	F03 float32 `parquet:"f03"`
	F04 float32 `parquet:"f04"`
	F05 float32 `parquet:"f05"`
	F06 float32 `parquet:"f06"`
	F07 float32 `parquet:"f07"`
	F08 float32 `parquet:"f08"`
	F09 float32 `parquet:"f09"`
	F10 float32 `parquet:"f10"`
	F11 float32 `parquet:"f11"`
	F12 float32 `parquet:"f12"`
	F13 float32 `parquet:"f13"`
	F14 float32 `parquet:"f14"`
	F15 float32 `parquet:"f15"`
}

func makeRow(id int64, salt float32) row {
	f := func(j int) float32 { return float32(id)*0.5 + float32(j) + salt }
	return row{id, f(0), f(1), f(2), f(3), f(4), f(5), f(6), f(7), f(8), f(9), f(10), f(11), f(12), f(13), f(14), f(15)}
}

// writeParquet writes rows [first, first+n) to path in row groups of rg rows.
func writeParquet(t testing.TB, path string, first, n, rg int64, salt float32) {
	t.Helper()
	rows := make([]row, 0, n)
	for id := first; id < first+n; id++ {
		rows = append(rows, makeRow(id, salt))
	}
	pqfixture.Of(rows...).RowGroupRows(rg).WriteBatch(1024).WriteFile(t, path)
}

const spec = `tensors:
  - name: id
    column: id
    dtype: I64
  - name: x
    columns_regex: '^f\d\d$'
    dtype: F32
    shape: [16]
`

// dataset is a source, a plan and a spec in a temporary directory.
type dataset struct {
	dir, src, plan, spec string
	epochs, world        int
}

// size of the generated source: small with -short, larger otherwise so a
// convert runs long enough to be killed midway.
func rowsPerFile() int64 {
	if testing.Short() {
		return 20000
	}
	return 40000
}

// sharedDataset returns one read-only dataset and its uninterrupted
// reference conversion, made once for the whole package. Tests write their
// outputs under their own t.TempDir().
func sharedDataset(t *testing.T) (d *dataset, ref string, want map[string]string) {
	t.Helper()
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "prep-ops-data-")
		if err != nil {
			shared.err = err
			return
		}
		sharedDirs = append(sharedDirs, dir)
		shared.d = buildDataset(t, dir)
		shared.ref = filepath.Join(dir, "ref")
		r := prep(t, nil, shared.d.convertArgs(shared.ref)...)
		if r.Code != 0 {
			shared.err = fmt.Errorf("reference convert: exit %d: %s", r.Code, r.Stderr)
			return
		}
		shared.want = tree(t, shared.ref)
	})
	if shared.err != nil || shared.d == nil {
		t.Fatalf("shared dataset: %v", shared.err)
	}
	return shared.d, shared.ref, shared.want
}

var (
	shared struct {
		once sync.Once
		d    *dataset
		ref  string
		want map[string]string
		err  error
	}
	sharedDirs []string
)

// newDataset makes a private dataset, for tests that change the source.
func newDataset(t *testing.T) *dataset {
	t.Helper()
	return buildDataset(t, t.TempDir())
}

func buildDataset(t *testing.T, dir string) *dataset {
	t.Helper()
	d := &dataset{dir: dir, epochs: 4, world: 4}
	d.src = filepath.Join(d.dir, "src")
	if err := os.Mkdir(d.src, 0o755); err != nil {
		t.Fatal(err)
	}
	n := rowsPerFile()
	for i := int64(0); i < 3; i++ {
		writeParquet(t, filepath.Join(d.src, fmt.Sprintf("part-%d.parquet", i)), i*n, n, 4096, 0)
	}
	d.spec = filepath.Join(d.dir, "spec.yaml")
	if err := os.WriteFile(d.spec, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	d.plan = filepath.Join(d.dir, "plan.json")
	res := prep(t, nil, "plan", "--source", d.src, "--seed", "7", "--epochs", fmt.Sprint(d.epochs),
		"--global-batch", "256", "--world-size", fmt.Sprint(d.world), "-o", d.plan)
	res.MustExit(t, 0)
	return d
}

func (d *dataset) convertArgs(out string, extra ...string) []string {
	return append([]string{"convert", "--plan", d.plan, "--spec", d.spec, "-o", out, "--progress", "never"}, extra...)
}

// result is one finished prep command.
type result = testutil.Result

// prep runs the binary to completion with extra environment variables.
func prep(t testing.TB, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(prepBin, args...)
	cmd.Env = append(cleanEnv(), env...)
	return testutil.Run(t, cmd, args)
}

// startPrep starts the binary with the test's clean environment.
func startPrep(t testing.TB, args ...string) *testutil.Running {
	t.Helper()
	cmd := exec.Command(prepBin, args...)
	cmd.Env = cleanEnv()
	return testutil.Start(t, cmd, args)
}

// cleanEnv is the test's environment without launcher variables, so a test
// run under Slurm or torchrun does not change what --ranks auto sees.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "RANK", k == "LOCAL_RANK", k == "WORLD_SIZE", k == "LOCAL_WORLD_SIZE", k == "GROUP_RANK",
			k == "JOB_COMPLETION_INDEX", strings.HasPrefix(k, "SLURM_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// tree maps every regular file under dir (relative path) to its sha256.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	return testutil.TreeDigests(t, dir)
}

// rerunMatches runs convert into out again (after a crash or a failure),
// verifies out against the plan and compares its files with want, the
// uninterrupted run's.
func (d *dataset) rerunMatches(t testing.TB, out string, want map[string]string, what string) {
	t.Helper()
	prep(t, nil, d.convertArgs(out)...).MustExit(t, 0)
	prep(t, nil, "verify", out, "--plan", d.plan).MustExit(t, 0)
	sameTree(t, want, tree(t, out), what)
}

// treeBytes sums the sizes of the files of files (relative paths, as tree
// returns them) under dir.
func treeBytes(t testing.TB, dir string, files map[string]string) int64 {
	t.Helper()
	var n int64
	for p := range files {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func sameTree(t testing.TB, want, got map[string]string, what string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: differs or missing", k))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: not in the reference output", k))
		}
	}
	slices.Sort(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%s: output differs from an uninterrupted run:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// checkManifestInvariant asserts that whatever the manifest lists exists
// with its listed size: a crash must never leave a listing of missing or
// half-written shards.
func checkManifestInvariant(t testing.TB, out string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(out, shardfmt.ManifestName)); errors.Is(err, fs.ErrNotExist) {
		return
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatalf("manifest unreadable after a crash: %v", err)
	}
	for _, s := range m.Shards {
		fi, err := os.Stat(filepath.Join(out, filepath.FromSlash(s.Path)))
		if err != nil {
			t.Fatalf("manifest lists %s, which does not exist: %v", s.Path, err)
		}
		if fi.Size() != s.Size {
			t.Fatalf("manifest lists %s with size %d, file has %d", s.Path, s.Size, fi.Size())
		}
	}
}

// countShards counts committed shard files (*.shard) and temporary files.
func countShards(dir string) (committed, temp int, manifest bool) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		n := d.Name()
		switch {
		case strings.Contains(n, ".tmp"):
			temp++
		case strings.HasSuffix(n, ".shard"):
			committed++
		case n == shardfmt.ManifestName:
			manifest = true
		}
		return nil
	})
	return
}

func TestCrashAndRerun(t *testing.T) {
	d, ref, want := sharedDataset(t)
	tmp := t.TempDir()
	prep(t, nil, "verify", ref, "--plan", d.plan).MustExit(t, 0)
	total := d.epochs * d.world

	points := []struct {
		name string
		hit  func(committed, temp int, manifest bool) bool
	}{
		{"first temporary file", func(c, tmp int, m bool) bool { return tmp > 0 || c > 0 }},
		{"first shard committed", func(c, tmp int, m bool) bool { return c >= 1 }},
		{"half the shards committed", func(c, tmp int, m bool) bool { return c >= total/2 }},
		{"all but one shard committed", func(c, tmp int, m bool) bool { return c >= total-1 }},
	}
	landed := 0
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			out := filepath.Join(tmp, "crash-"+strings.ReplaceAll(pt.name, " ", "-"))
			run := startPrep(t, d.convertArgs(out)...)
			if run.Poll(200*time.Microsecond, func() bool { return pt.hit(countShards(out)) }) {
				run.Kill()
			}
			killed := run.Wait().Signal != 0
			if !killed {
				t.Logf("convert finished before the kill point %q; checking the rerun anyway", pt.name)
			} else {
				landed++
				c, tmp, m := countShards(out)
				t.Logf("killed at %q: %d shards committed, %d temporary files, manifest %v", pt.name, c, tmp, m)
			}
			checkManifestInvariant(t, out)
			d.rerunMatches(t, out, want, pt.name)
		})
	}
	if landed == 0 {
		t.Logf("no kill landed before convert finished: the data set is too small for this machine")
	}
}

// TestCrashDuringSpilledRunAndRerun kills a run whose staging spills to
// disk (--memory-limit under the staging size) while its spill file exists
// and after some shards are committed: what the manifest lists must exist,
// and a rerun (which finds the dead run's spill file) must give the
// uninterrupted run's bytes and leave no temporary directory.
func TestCrashDuringSpilledRunAndRerun(t *testing.T) {
	d, _, want := sharedDataset(t)
	tmp := t.TempDir()
	total := d.epochs * d.world
	spill := func(out string) bool {
		m, _ := filepath.Glob(filepath.Join(out, ".prep-tmp", "*", "spill.bin"))
		return len(m) > 0
	}
	points := []struct {
		name string
		hit  func(out string) bool
	}{
		{"spill file created", spill},
		{"first shard committed", func(out string) bool { c, _, _ := countShards(out); return c >= 1 }},
		{"half the shards committed", func(out string) bool { c, _, _ := countShards(out); return c >= total/2 }},
	}
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			out := filepath.Join(tmp, "crash-"+strings.ReplaceAll(pt.name, " ", "-"))
			run := startPrep(t, d.convertArgs(out, "--memory-limit", "1MiB")...)
			if run.Poll(200*time.Microsecond, func() bool { return pt.hit(out) }) {
				run.Kill()
			}
			if run.Wait().Signal == 0 {
				t.Logf("convert finished before the kill point %q; checking the rerun anyway", pt.name)
			} else {
				c, tmp, m := countShards(out)
				t.Logf("killed at %q: %d shards committed, %d temporary files, manifest %v, spill file %v", pt.name, c, tmp, m, spill(out))
			}
			checkManifestInvariant(t, out)
			prep(t, nil, d.convertArgs(out, "--memory-limit", "1MiB")...).MustExit(t, 0)
			if _, err := os.Stat(filepath.Join(out, ".prep-tmp")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("rerun left its temporary directory: %v", err)
			}
			prep(t, nil, "verify", out, "--plan", d.plan).MustExit(t, 0)
			sameTree(t, want, tree(t, out), pt.name)
		})
	}
}

func TestConcurrentRunsOneWins(t *testing.T) {
	d, _, want := sharedDataset(t)
	tmp := t.TempDir()

	t.Run("lock held", func(t *testing.T) {
		// A lock held by a live process (this test) makes convert exit 3 at
		// once, naming the holder, and touch nothing.
		out := filepath.Join(tmp, "held")
		if err := os.Mkdir(out, 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := dirlock.Acquire(filepath.Join(out, ".prep.lock"))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		r := prep(t, nil, d.convertArgs(out)...)
		r.MustExit(t, 3)
		host, _ := os.Hostname()
		if !strings.Contains(r.Stderr, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(r.Stderr, host) {
			t.Fatalf("exit 3 does not name the holder (pid %d, host %s): %s", os.Getpid(), host, r.Stderr)
		}
		if c, tmp, m := countShards(out); c != 0 || tmp != 0 || m {
			t.Fatalf("locked run wrote %d shards, %d temporary files, manifest %v", c, tmp, m)
		}
	})

	t.Run("two real runs", func(t *testing.T) {
		out := filepath.Join(tmp, "race")
		a := startPrep(t, d.convertArgs(out)...)
		// Start the second run once the first holds the lock.
		a.Poll(100*time.Microsecond, func() bool {
			_, err := os.Stat(filepath.Join(out, ".prep.lock"))
			return err == nil
		})
		b := prep(t, nil, d.convertArgs(out)...)
		a.Wait().MustExit(t, 0)
		switch b.Code {
		case 3:
			if !strings.Contains(b.Stderr, fmt.Sprintf("pid %d", a.Cmd.Process.Pid)) {
				t.Errorf("second run's exit 3 does not name the first run's pid %d: %s", a.Cmd.Process.Pid, b.Stderr)
			}
		case 0:
			t.Logf("first run finished before the second took the lock; the second found the work done")
		default:
			t.Fatalf("second run: exit %d, want 3 (or 0 after the first finished)\n%s", b.Code, b.Stderr)
		}
		prep(t, nil, "verify", out, "--plan", d.plan).MustExit(t, 0)
		sameTree(t, want, tree(t, out), "after two runs")
	})
}

func TestDiskFull(t *testing.T) {
	d, ref, want := sharedDataset(t)
	need := treeBytes(t, ref, want)
	// Room for the whole output plus slack for directories, then a filler
	// that leaves only a third of what the output needs.
	fs := testutil.MountTmpfs(t, need+need/2+1<<20)
	filler := filepath.Join(fs, "filler")
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	if err := os.WriteFile(filler, make([]byte, free-need/3), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(fs, "shards")
	r := prep(t, nil, d.convertArgs(out)...)
	if r.Code != 1 {
		t.Fatalf("convert on a full disk: exit %d, want 1\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, out) || !strings.Contains(r.Stderr, "need ") || !strings.Contains(r.Stderr, " free") {
		t.Errorf("disk-full error does not name the output path %s and the bytes needed and free: %s", out, r.Stderr)
	}
	if c, tmp, _ := countShards(out); tmp != 0 {
		t.Errorf("disk-full run left %d temporary files (and %d shards)", tmp, c)
	}
	checkManifestInvariant(t, out)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.rerunMatches(t, out, want, "after freeing space")
}

func TestChangedSourceDetectedBeforeWork(t *testing.T) {
	d := newDataset(t)
	// Same rows and row groups, different values: only the footer hash
	// (statistics) and contents differ.
	changed := filepath.Join(d.src, "part-1.parquet")
	writeParquet(t, changed, rowsPerFile(), rowsPerFile(), 4096, 0.25)
	out := filepath.Join(d.dir, "out")
	r := prep(t, nil, d.convertArgs(out)...)
	if r.Code != 1 {
		t.Fatalf("convert after a source change: exit %d, want 1\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "part-1.parquet") {
		t.Errorf("error does not name the changed file: %s", r.Stderr)
	}
	if c, tmp, m := countShards(out); c != 0 || tmp != 0 || m {
		t.Errorf("a run on a changed source wrote %d shards, %d temporary files, manifest %v", c, tmp, m)
	}
}

func TestRollingWindowWithGC(t *testing.T) {
	d, _, want := sharedDataset(t)
	tmp := t.TempDir()

	out := filepath.Join(tmp, "node")
	prep(t, nil, d.convertArgs(out, "--epochs", "0-1")...).MustExit(t, 0)
	prep(t, nil, d.convertArgs(out, "--epochs", "2-3")...).MustExit(t, 0)
	prep(t, nil, "gc", out, "--keep-from-epoch", "2").MustExit(t, 0)
	prep(t, nil, "verify", out, "--plan", d.plan, "--partial").MustExit(t, 0)
	got := tree(t, out)
	for p, h := range got {
		if p == shardfmt.ManifestName {
			continue
		}
		if e, _, ok := strings.Cut(p, "/"); ok && (e == "epoch-00000" || e == "epoch-00001") {
			t.Errorf("gc left %s", p)
		}
		if want[p] != h {
			t.Errorf("%s differs from the full run's", p)
		}
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range m.Shards {
		listed = append(listed, s.Path)
	}
	var wantListed []string
	for e := 2; e < 4; e++ {
		for r := 0; r < d.world; r++ {
			wantListed = append(wantListed, shardfmt.ShardFileName(e, r))
		}
	}
	if !slices.Equal(listed, wantListed) {
		t.Fatalf("manifest lists %v, want %v", listed, wantListed)
	}
}

func TestRanksAutoFromLaunchers(t *testing.T) {
	d, _, _ := sharedDataset(t)
	tests := []struct {
		name string
		env  []string
		args []string
		want []int // ranks written
		code int
		msg  string
	}{
		{name: "torchrun", env: []string{"RANK=3", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "WORLD_SIZE=4"}, want: []int{2, 3}},
		{name: "slurm job array", env: []string{"SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_MIN=0", "SLURM_ARRAY_TASK_COUNT=2"},
			args: []string{"--ranks-per-node", "2"}, want: []int{0, 1}},
		{name: "kubernetes", env: []string{"JOB_COMPLETION_INDEX=3"}, args: []string{"--ranks-per-node", "1"}, want: []int{3}},
		{name: "world size disagrees", env: []string{"RANK=0", "LOCAL_RANK=0", "LOCAL_WORLD_SIZE=4", "WORLD_SIZE=8"},
			code: 1, msg: "launcher world size 8 differs from the plan's world size 4"},
		{name: "no launcher", code: 1, msg: "--ranks auto: none of RANK/WORLD_SIZE (torchrun), SLURM_PROCID or SLURM_ARRAY_TASK_ID (Slurm), JOB_COMPLETION_INDEX (Kubernetes Indexed Job) is set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := d.convertArgs(out, append([]string{"--ranks", "auto", "--epochs", "0"}, tc.args...)...)
			r := prep(t, tc.env, args...)
			r.MustExit(t, tc.code)
			if tc.code != 0 {
				if !strings.Contains(r.Stderr, tc.msg) {
					t.Fatalf("stderr lacks %q: %s", tc.msg, r.Stderr)
				}
				if c, _, _ := countShards(out); c != 0 {
					t.Fatalf("failed run wrote %d shards", c)
				}
				return
			}
			m, err := shardfmt.ReadManifest(out)
			if err != nil {
				t.Fatal(err)
			}
			var ranks []int
			for _, s := range m.Shards {
				if s.Epoch != 0 {
					t.Errorf("shard of epoch %d written with --epochs 0", s.Epoch)
				}
				ranks = append(ranks, s.Rank)
			}
			if !slices.Equal(ranks, tc.want) {
				t.Fatalf("ranks written %v, want %v", ranks, tc.want)
			}
		})
	}
}

func TestMetricsAndJSONLogs(t *testing.T) {
	d, _, _ := sharedDataset(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out")
	prom := filepath.Join(tmp, "textfile", "prep.prom")
	if err := os.Mkdir(filepath.Dir(prom), 0o755); err != nil {
		t.Fatal(err)
	}
	args := d.convertArgs(out, "--metrics-file", prom, "--log-format", "json")
	r := prep(t, nil, args...)
	r.MustExit(t, 0)
	for _, line := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stderr line is not JSON: %q", line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("log line lacks %q: %s", k, line)
			}
		}
	}
	// Second run skips every shard; a third into a locked directory fails.
	prep(t, nil, args...).MustExit(t, 0)
	l, err := dirlock.Acquire(filepath.Join(out, ".prep.lock"))
	if err != nil {
		t.Fatal(err)
	}
	prep(t, nil, args...).MustExit(t, 3)
	l.Release()

	got := testutil.ReadMetrics(t, prom, "convert", out)
	// Exact counts come from the manifest of the first (only writing) run.
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	var wantRows, wantBytes float64
	for _, s := range m.Shards {
		wantRows += float64(s.Batches * m.BatchSize)
		wantBytes += float64(s.Size)
	}
	checks := map[string]float64{
		metrics.RunsTotal:         3,
		metrics.ErrorsTotal:       1,
		metrics.ShardsWritten:     0, // the last (locked) run wrote nothing
		metrics.ShardsSkipped:     0,
		metrics.LastRunSuccess:    0,
		metrics.RowsTotal:         wantRows,
		metrics.BytesWrittenTotal: wantBytes,
	}
	testutil.CheckMetrics(t, got, checks)
	if got[metrics.LastSuccessTimestamp] == 0 || got[metrics.LastSuccessTimestamp] >= got[metrics.LastRunTimestamp]+1 {
		t.Errorf("last success %v, last run %v", got[metrics.LastSuccessTimestamp], got[metrics.LastRunTimestamp])
	}
}

// TestDiskFillsDuringRun fills the file system while convert writes (after
// its free-space check passed): the run must fail naming the path, leave no
// partial shard and no listing of one, and a rerun after space is freed must
// give the uninterrupted run's bytes.
func TestDiskFillsDuringRun(t *testing.T) {
	staging := func(out string) bool {
		_, err := os.Stat(filepath.Join(out, ".prep-tmp"))
		return err == nil
	}
	t.Run("while staging decoded columns", func(t *testing.T) {
		diskFillsDuringRun(t, func(out string) bool { return staging(out) })
	})
	t.Run("while writing shards", func(t *testing.T) {
		diskFillsDuringRun(t, func(out string) bool { c, tmp, _ := countShards(out); return c >= 1 || tmp >= 1 })
	})
	// A spilled run (staging over --memory-limit) reserved its spill file
	// before stage 1, so the disk fills while it writes shards.
	t.Run("while writing shards of a spilled run", func(t *testing.T) {
		diskFillsDuringRun(t, func(out string) bool { c, tmp, _ := countShards(out); return c >= 1 || tmp >= 1 }, "--memory-limit", "1MiB")
	})
}

func diskFillsDuringRun(t *testing.T, trigger func(out string) bool, extra ...string) {
	d, ref, want := sharedDataset(t)
	need := treeBytes(t, ref, want)
	// Staging needs about as much again as the shards.
	fsDir := testutil.MountTmpfs(t, 3*need+1<<20)
	out := filepath.Join(fsDir, "shards")
	run := startPrep(t, d.convertArgs(out, extra...)...)
	filler := filepath.Join(fsDir, "filler")
	filled := run.Poll(200*time.Microsecond, func() bool {
		if !trigger(out) {
			return false
		}
		// Fill every free byte.
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		chunk := make([]byte, 1<<20)
		for {
			if _, err := f.Write(chunk); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
		for n := 4096; n > 0; n /= 2 { // the last partial megabyte
			for {
				if _, err := f.Write(chunk[:n]); err != nil {
					break
				}
			}
		}
		f.Close()
		return true
	})
	res := run.Wait()
	if !filled || res.Code == 0 {
		t.Skipf("convert finished (exit %d) before the file system could be filled", res.Code)
	}
	if res.Code != 1 {
		t.Fatalf("convert on a full disk: exit %d (signal %v), want 1\n%s", res.Code, res.Signal, res.Stderr)
	}
	if !strings.Contains(res.Stderr, out) || !strings.Contains(res.Stderr, "no space left on device") {
		t.Errorf("error does not name the path under %s and the cause: %s", out, res.Stderr)
	}
	t.Logf("convert failed as expected: %s", strings.TrimSpace(res.Stderr))
	if c, tmp, _ := countShards(out); tmp != 0 {
		t.Errorf("failed run left %d temporary files (and %d shards)", tmp, c)
	}
	if ents, err := os.ReadDir(filepath.Join(out, ".prep-tmp")); err == nil && len(ents) > 0 {
		t.Errorf("failed run left staging files: %v", ents)
	}
	checkManifestInvariant(t, out)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d.rerunMatches(t, out, want, "after freeing space")
}

// TestCronWrapperEndToEnd runs examples/cron/prep-nightly.sh with the real
// binary on two consecutive "nights": the window slides from epochs 0-1 to
// 2-3, gc drops epochs 0-1, verify passes, and the metrics file records both
// runs.
func TestCronWrapperEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	d, _, _ := sharedDataset(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "node", "shards")
	state := filepath.Join(tmp, "node", "trainer-epoch")
	prom := filepath.Join(tmp, "prep.prom")
	wrapper, err := filepath.Abs("../../examples/cron/prep-nightly.sh")
	if err != nil {
		t.Fatal(err)
	}
	night := func(epoch string) string {
		if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, []byte(epoch+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", wrapper)
		cmd.Env = append(cleanEnv(), "PREP_BIN="+prepBin, "PREP_PLAN="+d.plan, "PREP_SPEC="+d.spec, "PREP_OUT="+out,
			"PREP_STATE="+state, "PREP_METRICS="+prom, "PREP_RANKS=0-3", "PREP_WINDOW=2")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("night at epoch %s: %v\n%s", epoch, err, b)
		}
		return string(b)
	}
	night("0")
	logs := night("2")
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("log line is not JSON: %q", line)
		}
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[int]int{}
	for _, s := range m.Shards {
		epochs[s.Epoch]++
	}
	if want := map[int]int{2: 4, 3: 4}; !maps.Equal(epochs, want) {
		t.Fatalf("epochs on disk %v, want %v", epochs, want)
	}
	runs := map[string]float64{}
	for _, s := range testutil.ParseMetrics(t, prom) {
		if s.Name == metrics.RunsTotal {
			runs[s.Command] = s.Value
		}
	}
	// Two convert runs; gc runs only on the second night.
	if runs["convert"] != 2 || runs["gc"] != 1 {
		t.Fatalf("runs recorded %v, want convert 2, gc 1", runs)
	}
}
