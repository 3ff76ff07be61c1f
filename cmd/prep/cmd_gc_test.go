package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/gc"
	"github.com/prepml/prep/internal/launcher"
	"github.com/prepml/prep/internal/metrics"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// fakeSet writes a manifest and one small file per (epoch, rank); gc does not
// open shards, so their bytes do not matter.
func fakeSet(t *testing.T, epochs, ranks int) string {
	t.Helper()
	dir := t.TempDir()
	m := &shardfmt.Manifest{PlanFingerprint: "sha256:p"}
	for e := 0; e < epochs; e++ {
		for r := 0; r < ranks; r++ {
			rel := shardfmt.ShardFileName(e, r)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, make([]byte, 10), 0o644); err != nil {
				t.Fatal(err)
			}
			m.Shards = append(m.Shards, shardfmt.ShardEntry{Path: rel, Epoch: e, Rank: r, Size: 10, Digest: "sha256:0"})
		}
	}
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGCCommand(t *testing.T) {
	dir := fakeSet(t, 3, 2)
	prom := filepath.Join(t.TempDir(), "prep.prom")
	code, out, errOut := runPrep("gc", dir, "--keep-from-epoch", "2", "--metrics-file", prom)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "removed epoch-00000/rank-00000.shard\n" +
		"removed epoch-00000/rank-00001.shard\n" +
		"removed epoch-00001/rank-00000.shard\n" +
		"removed epoch-00001/rank-00001.shard\n" +
		"removed epoch-00000/\n" +
		"removed epoch-00001/\n" +
		"removed 4 files, 40 bytes; 2 shards kept (epochs 2)\n"
	if out != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if _, err := os.Stat(filepath.Join(dir, shardset.LockName)); !os.IsNotExist(err) {
		t.Fatalf("lock file left behind: %v", err)
	}
	got := testutil.ReadMetrics(t, prom, "gc", dir)
	if got[metrics.RunsTotal] != 1 || got[metrics.LastRunSuccess] != 1 || got[metrics.ErrorsTotal] != 0 || got[metrics.LastSuccessTimestamp] == 0 {
		t.Fatalf("metrics %v", got)
	}
}

func TestGCCommandJSONDryRun(t *testing.T) {
	dir := fakeSet(t, 2, 1)
	code, out, errOut := runPrep("gc", dir, "--keep-from-epoch", "1", "--dry-run", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res struct {
		DryRun  bool `json:"dry_run"`
		Removed []struct {
			Path   string `json:"path"`
			Listed bool   `json:"listed"`
		} `json:"removed"`
		RemovedDirs []string `json:"removed_dirs"`
		FreedBytes  int64    `json:"freed_bytes"`
		KeptEpochs  []int    `json:"kept_epochs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !res.DryRun || len(res.Removed) != 1 || res.Removed[0].Path != "epoch-00000/rank-00000.shard" || !res.Removed[0].Listed ||
		!reflect.DeepEqual(res.RemovedDirs, []string{"epoch-00000"}) || res.FreedBytes != 10 || !reflect.DeepEqual(res.KeptEpochs, []int{1}) {
		t.Fatalf("result %+v", res)
	}
	if _, err := os.Stat(filepath.Join(dir, "epoch-00000", "rank-00000.shard")); err != nil {
		t.Fatalf("dry run deleted a shard: %v", err)
	}
}

func TestGCCommandLockedExits3(t *testing.T) {
	dir := fakeSet(t, 2, 1)
	lock, err := shardset.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, _, errOut := runPrep("gc", dir, "--keep-from-epoch", "1")
	if code != 3 {
		t.Fatalf("exit %d, want 3: %s", code, errOut)
	}
	host, _ := os.Hostname()
	if !strings.Contains(errOut, "held by pid "+itoa(os.Getpid())+" on host "+host) {
		t.Fatalf("stderr does not name the holder: %s", errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "epoch-00000", "rank-00000.shard")); err != nil {
		t.Fatalf("locked gc deleted a shard: %v", err)
	}
}

func TestGCCommandTakesOverStaleLock(t *testing.T) {
	dir := fakeSet(t, 2, 1)
	if err := os.WriteFile(filepath.Join(dir, shardset.LockName), []byte("4242 deadhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runPrep("gc", dir, "--keep-from-epoch", "1", "--log-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, `"msg":"took over a stale lock left by a killed run"`) || !strings.Contains(errOut, `"stale_pid":4242,"stale_host":"deadhost"`) {
		t.Fatalf("stale lock not reported: %s", errOut)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestGCCommandUsage(t *testing.T) {
	dir := fakeSet(t, 1, 1)
	if code, _, _ := runPrep("gc", dir); code != 2 {
		t.Errorf("missing --keep-from-epoch: exit %d, want 2", code)
	}
	if code, _, _ := runPrep("gc", "--keep-from-epoch", "1"); code != 2 {
		t.Errorf("missing OUT: exit %d, want 2", code)
	}
	if code, _, errOut := runPrep("gc", t.TempDir(), "--keep-from-epoch", "1"); code != 1 || !strings.Contains(errOut, "no manifest") {
		t.Errorf("not a shard set: exit %d, %s", code, errOut)
	}
}

func TestResolveRanks(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	slurmArray := env(map[string]string{"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"})
	tests := []struct {
		name  string
		spec  string
		world int
		env   func(string) string
		o     opsOptions
		want  []int
		usage bool  // exit 2
		err   error // wrapped sentinel for a run failure
	}{
		{name: "all", spec: "all", world: 3, want: []int{0, 1, 2}},
		{name: "empty", spec: "", world: 2, want: []int{0, 1}},
		{name: "list", spec: "3,0-1", world: 4, want: []int{0, 1, 3}},
		{name: "list out of range", spec: "4", world: 4, usage: true},
		{name: "auto slurm array", spec: "auto", world: 8, env: slurmArray, o: opsOptions{ranksPerNode: 4}, want: []int{4, 5, 6, 7}},
		{name: "auto disagrees with plan", spec: "auto", world: 4, env: slurmArray, o: opsOptions{ranksPerNode: 4}, err: launcher.ErrPlanMismatch},
		{name: "auto forced kubernetes", spec: "auto", world: 8, env: env(map[string]string{"RANK": "0", "WORLD_SIZE": "1", "JOB_COMPLETION_INDEX": "1"}),
			o: opsOptions{launcher: "kubernetes", ranksPerNode: 2}, want: []int{2, 3}},
		{name: "auto no launcher", spec: "auto", world: 8, env: env(nil), err: launcher.ErrNoLauncher},
		{name: "bad launcher name", spec: "auto", world: 8, env: env(nil), o: opsOptions{launcher: "mpi"}, usage: true},
		{name: "ranks per node without auto", spec: "0", world: 8, o: opsOptions{ranksPerNode: 2}, usage: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.o.launcher == "" {
				tc.o.launcher = "auto"
			}
			got, err := resolveRanks(tc.spec, tc.world, tc.env, &tc.o)
			var ue usageError
			switch {
			case tc.usage:
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v, want a usage error", err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) || errors.As(err, &ue) {
					t.Fatalf("err = %v, want %v (not usage)", err, tc.err)
				}
			default:
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
			}
		})
	}
}

// TestGCCommandNamesMissingDirectory pins the fault where gc on a missing
// directory or a file said only "opening lock file: open X/.prep.lock: ...".
func TestGCCommandNamesMissingDirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ dir, want string }{
		{missing, "shard set " + missing + ": stat " + missing + ": no such file or directory"},
		{file, "shard set " + file + ": not a directory"},
	} {
		code, _, errs := runCLI("gc", tt.dir, "--keep-from-epoch", "1")
		if code != 1 || !strings.Contains(errs, tt.want) || strings.Contains(errs, ".prep.lock") {
			t.Errorf("gc %s: exit %d, stderr %q; want exit 1 and %q", tt.dir, code, errs, tt.want)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("gc created %s", missing)
	}
}

// TestGCCommandRefusesManifestPathOutsideSet is the CLI side of the fault
// where an edited manifest entry "../canary" made prep gc delete a file
// outside the shard set.
func TestGCCommandRefusesManifestPathOutsideSet(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "set")
	canary := filepath.Join(parent, "canary")
	if err := os.WriteFile(canary, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := &shardfmt.Manifest{Shards: []shardfmt.ShardEntry{{Path: "../canary", Epoch: 0, Rank: 0, Size: 8}}}
	if err := shardfmt.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("gc", dir, "--keep-from-epoch", "1")
	if code != 1 || out != "" || !strings.Contains(errs, `invalid manifest: shard 0: path "../canary" is not`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if b, err := os.ReadFile(canary); err != nil || string(b) != "precious" {
		t.Errorf("canary %q, %v", b, err)
	}
}

// TestGCTempDirIsConverts pins that gc removes the directory convert writes
// its temporaries to.
func TestGCTempDirIsConverts(t *testing.T) {
	if gc.TempDirName != convert.TempDirName {
		t.Fatalf("gc removes %q, convert writes %q", gc.TempDirName, convert.TempDirName)
	}
}

// TestRanksPerNodeZeroOrMissingNamesTheFlag pins two confusing messages of
// --ranks auto under a launcher that starts prep once per node (here a
// Kubernetes Indexed Job): --ranks-per-node 0 was taken as "not given" (a
// negative value is a usage error), and without the flag the error said
// "give the ranks per node" without naming --ranks-per-node.
func TestRanksPerNodeZeroOrMissingNamesTheFlag(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	for _, v := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_ARRAY_TASK_ID"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	dir := t.TempDir()
	pf := filepath.Join(dir, "p.json")
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "part-*.parquet")
	if code, _, errs := runCLI("plan", "--source", src, "--global-batch", "4", "--world-size", "4", "-o", pf, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "out")
	code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", out, "--ranks", "auto", "--ranks-per-node", "0", "-q")
	if code != 2 || !strings.Contains(errs, "--ranks-per-node must be positive, not 0") {
		t.Errorf("--ranks-per-node 0: exit %d, stderr %q; want 2 and a refusal of 0", code, errs)
	}
	code, _, errs = runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", out, "--ranks", "auto", "-q")
	if code != 1 || !strings.Contains(errs, "--ranks-per-node") {
		t.Errorf("no --ranks-per-node: exit %d, stderr %q; want 1 naming --ranks-per-node", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output directory created by a refused run")
	}
}
