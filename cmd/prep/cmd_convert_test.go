package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/internal/metrics"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// convertFixture writes a 100-row Parquet file and a plan over it and
// returns the plan path.
func convertFixture(t *testing.T) string {
	t.Helper()
	return convertFixtureRows(t, 100)
}

// convertFixtureRows is convertFixture with n rows (id i, a i/4, b -i).
func convertFixtureRows(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	type row struct {
		ID int64   `parquet:"id"`
		A  float64 `parquet:"a"`
		B  float64 `parquet:"b"`
	}
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{int64(i), float64(i) / 4, -float64(i)}
	}
	pqfixture.Of(rows...).WriteFile(t, filepath.Join(src, "d.parquet"))
	s, err := source.Discover(context.Background(), []string{src})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(s, plan.Config{Seed: 1, Epochs: 2, GlobalBatch: 16, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad})
	if err != nil {
		t.Fatal(err)
	}
	pp := filepath.Join(dir, "plan.json")
	if err := p.Save(pp); err != nil {
		t.Fatal(err)
	}
	return pp
}

func TestConvertCommand(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	code, stdout, stderr := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "--tensor", "ab=a,b:F32:2", "-o", out, "--json", "--jobs", "2", "--memory-limit", "64MiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var sum convert.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	if sum.Shards != 4 || sum.Rows != 4*7*8 || sum.Bytes <= 0 || sum.PeakRSSBytes <= 0 {
		t.Errorf("summary %+v", sum)
	}
	// Rerun: all skipped; human summary.
	code, stdout, _ = runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "--tensor", "ab=a,b:F32:2", "-o", out, "--epochs", "1", "--ranks", "0-1")
	if code != 0 || !strings.Contains(stdout, "0 shards written (2 already complete)") {
		t.Errorf("rerun: %d %q", code, stdout)
	}
	// Lock held: exit 3 naming the holder.
	l, err := dirlock.Acquire(filepath.Join(out, convert.LockName))
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out)
	l.Release()
	if code != 3 || !strings.Contains(stderr, "held by pid") {
		t.Errorf("locked: exit %d, %s", code, stderr)
	}
}

func TestConvertCommandErrors(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	code, _, stderr := runPrep("convert", "--plan", pp, "--tensor", "z=nope:I64", "-o", out)
	if code != 1 || !strings.Contains(stderr, "d.parquet: column") || !strings.Contains(stderr, "nope") || !strings.Contains(stderr, "column not found") {
		t.Errorf("missing column: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("output left after failure")
	}
	for _, args := range [][]string{
		{"convert", "--plan", pp, "-o", out},
		{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--memory-limit", "lots"},
		{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--epochs", "2-1"},
		{"convert", "--plan", pp, "--tensor", "bad", "-o", out},
	} {
		if code, _, stderr := runPrep(args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, stderr)
		}
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"4GiB": 4 << 30, "512MiB": 512 << 20, "1000": 1000, "2GB": 2e9, "7 KiB": 7 << 10} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v", in, got, err)
		}
	}
}

// TestParseByteSizeRejectsZeroNegativeAndOverflow pins sizes that were
// silently replaced by the 1 GiB default: --memory-limit 0 or -1, and a
// size whose bytes overflow int64 (99999999999TiB wrapped around).
func TestParseByteSizeRejectsZeroNegativeAndOverflow(t *testing.T) {
	for _, in := range []string{"0", "-1", "-4GiB", "0MiB", "99999999999TiB", "9223372036854775807KiB", "8388608TiB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
	if got, err := parseByteSize("8388607TiB"); err != nil || got != 8388607<<40 {
		t.Errorf("parseByteSize(8388607TiB) = %d, %v", got, err)
	}
	pp := convertFixture(t)
	for _, m := range []string{"0", "-1", "99999999999TiB"} {
		code, _, errs := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--memory-limit", m)
		if code != 2 || !strings.Contains(errs, "--memory-limit") {
			t.Errorf("--memory-limit %s: exit %d, stderr %q; want 2", m, code, errs)
		}
	}
}

// TestMemoryLimitBelowMinimumIsUsageError pins limits that were taken as
// given: --memory-limit 1KiB or 1 cut a row group into millions of
// windows of two rows (73 to 315 s, and more memory than at 1 MiB). convert
// and verify --deep refuse a limit below 1 MiB, naming the minimum, and
// accept 1 MiB itself.
func TestMemoryLimitBelowMinimumIsUsageError(t *testing.T) {
	pp := convertFixture(t)
	set := filepath.Join(t.TempDir(), "set")
	if code, _, errs := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", set, "--memory-limit", "1MiB"); code != 0 {
		t.Fatalf("convert --memory-limit 1MiB: exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--memory-limit", "1KiB"}, "--memory-limit 1KiB is below the minimum of 1.0 MiB"},
		{[]string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--memory-limit", "1"}, "--memory-limit 1 is below the minimum of 1.0 MiB"},
		{[]string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--memory-limit", "1048575"}, "--memory-limit 1048575 is below the minimum of 1.0 MiB"},
		{[]string{"verify", set, "--deep", "--memory-limit", "1KiB"}, "--memory-limit 1KiB is below the minimum of 1.0 MiB"},
	} {
		code, _, errs := runPrep(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args[len(c.args)-2:], code, errs, c.want)
		}
	}
	if code, _, errs := runPrep("verify", set, "--deep", "--memory-limit", "1MiB"); code != 0 {
		t.Errorf("verify --deep --memory-limit 1MiB: exit %d: %s", code, errs)
	}
}

// TestJobsOutOfRangeIsUsageError pins --jobs values that were taken as
// given: convert ran with --jobs -3 (verify refuses a negative count), and
// both ran --jobs 1000000 with that many goroutines, 2.6 GiB (convert) and
// 3 GiB (verify) of peak RSS for a 10 MB shard set, far past the memory
// --memory-limit promises to bound.
func TestJobsOutOfRangeIsUsageError(t *testing.T) {
	pp := convertFixture(t)
	set := filepath.Join(t.TempDir(), "set")
	if code, _, errs := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", set); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--jobs", "-3"}, "--jobs must be >= 0, not -3"},
		{[]string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", filepath.Join(t.TempDir(), "o"), "--jobs", "1000000"}, "--jobs 1000000 exceeds the limit of 1024"},
		{[]string{"verify", set, "--jobs", "1000000"}, "--jobs 1000000 exceeds the limit of 1024"},
	} {
		code, _, errs := runPrep(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
	if code, _, errs := runPrep("verify", set, "--jobs", "1024"); code != 0 {
		t.Errorf("verify --jobs 1024: exit %d: %s", code, errs)
	}
}

// TestConvertThenBareVerify: convert copies the plan file into the shard
// set, so `prep verify OUT` without --plan checks plan conformance and
// passes on a fresh set.
func TestConvertThenBareVerify(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	if code, _, stderr := runPrep("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	want, err := os.ReadFile(pp)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(out, "plan.json")); err != nil || string(got) != string(want) {
		t.Fatalf("OUT/plan.json is not a copy of the plan file (%v)", err)
	}
	code, stdout, stderr := runPrep("verify", out)
	if code != 0 || !strings.HasPrefix(stdout, "0 findings (4 shards, ") {
		t.Fatalf("bare verify: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestConvertMetricsFile: --metrics-file records each run, a failed one
// included.
func TestConvertMetricsFile(t *testing.T) {
	pp := convertFixture(t)
	dir := t.TempDir()
	out, prom := filepath.Join(dir, "shards"), filepath.Join(dir, "prep.prom")
	args := []string{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--metrics-file", prom}
	if code, _, stderr := runPrep(args...); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	if code, _, _ := runPrep(append(args, "--tensor", "z=nope:I64")...); code != 1 {
		t.Fatalf("failing convert: exit %d, want 1", code)
	}
	got := testutil.ReadMetrics(t, prom, "convert", out)
	testutil.CheckMetrics(t, got, map[string]float64{metrics.RunsTotal: 2, metrics.ErrorsTotal: 1, metrics.LastRunSuccess: 0,
		metrics.RowsTotal: 4 * 7 * 8, metrics.ShardsWritten: 0})
	// The failed run reported no memory figures: its gauges are absent.
	for _, name := range []string{metrics.PeakRSSBytes, metrics.SpillBytes} {
		if v, ok := got[name]; ok {
			t.Errorf("%s = %v after a failed run, want no series", name, v)
		}
	}
}

// lockedWriter is a strings.Builder safe for concurrent writes.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestProgressLabel: the write bar's description carries the shard label
// before the rate, and keeps it as progress is added.
func TestProgressLabel(t *testing.T) {
	// Each bar also renders from its own ticker goroutine, so the bars'
	// shared writer must serialise them (as a terminal does), and the bars
	// are finished so no ticker outlives the test (it raced with later
	// tests under -race).
	var errb lockedWriter
	g := &globalOptions{stderr: &errb, progress: "always"}
	bar := g.newProgress("write", 1000)
	defer bar.Finish()
	bar.SetLabel("write epoch 1 rank 3 (2/4 shards)")
	bar.Add(10, 100)
	if d := bar.bar.State().Description; !strings.HasPrefix(d, "write epoch 1 rank 3 (2/4 shards) ") || !strings.HasSuffix(d, "rows/s") {
		t.Errorf("description %q", d)
	}
	var none *progress
	none.SetLabel("x") // nil-safe like Add and Finish

	// A bar that counts only bytes (verify) shows no rows rate.
	vb := g.newProgress("verify", -1)
	defer vb.Finish()
	vb.Add(0, 4096)
	if d := vb.bar.State().Description; d != "verify" {
		t.Errorf("verify description %q, want %q", d, "verify")
	}

	// The decode bar keeps its name before the rate and counts rows.
	rows := g.newRowProgress("decode", 1000)
	defer rows.Finish()
	rows.Add(250, 250)
	if d := rows.bar.State().Description; !strings.HasPrefix(d, "decode ") || !strings.HasSuffix(d, "rows/s") {
		t.Errorf("decode description %q", d)
	}
	if st := rows.bar.State(); st.CurrentNum != 250 || st.Max != 1000 {
		t.Errorf("decode bar at %d of %d, want 250 of 1000", st.CurrentNum, st.Max)
	}
}

// TestConvertSpillsOverMemoryLimit checks that --memory-limit below the
// staging size makes convert spill by output window, and below a row
// group's decoded size decode it in row slices, says both in its summary,
// and writes the same shards as a run that stages in memory. It forces
// both at the least limit accepted (1 MiB) with enough rows.
func TestConvertSpillsOverMemoryLimit(t *testing.T) {
	pp := convertFixtureRows(t, 100_000)
	mem, spill := filepath.Join(t.TempDir(), "mem"), filepath.Join(t.TempDir(), "spill")
	args := []string{"convert", "--plan", pp, "--tensor", "id=id:I64", "--tensor", "ab=a,b:F32:2", "--jobs", "2"}
	if code, _, stderr := runPrep(append(args, "-o", mem)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// 100,000 samples x 16 bytes = 1.5 MiB of staging; a window takes at
	// most half the 1 MiB limit, 2048 steps (2 ranks x 8 samples x 16
	// bytes each): 6250 steps make 4 windows per epoch, 8 in all; every
	// sample slot of both epochs is spilled with an 8-byte header: 2 x
	// 100,000 x 24 bytes.
	prom := filepath.Join(t.TempDir(), "prep.prom")
	code, stdout, stderr := runPrep(append(args, "-o", spill, "--memory-limit", "1MiB", "--metrics-file", prom)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := testutil.ReadMetrics(t, prom, "convert", spill)
	testutil.CheckMetrics(t, got, map[string]float64{metrics.SpillBytes: 2 * 100_000 * 24})
	if got[metrics.PeakRSSBytes] < 1<<20 {
		t.Errorf("%s = %v, want the process's peak RSS (over 1 MiB)", metrics.PeakRSSBytes, got[metrics.PeakRSSBytes])
	}
	want := "staging (1.5 MiB) exceeded --memory-limit: spilled 4.6 MiB to disk in 8 output windows"
	if !strings.Contains(stdout, want) {
		t.Errorf("summary %q lacks %q", stdout, want)
	}
	// The row group's 100,000 rows are estimated at 18 bytes (id, I64) +
	// 2 x 10 (a and b stacked as F32) per row decoded (2 x the output,
	// + 2): the Go heap has the 512 KiB the window leaves of the limit,
	// the decode admission half of that, and 2 workers' slices share half
	// the admission, 64 KiB each, 1724 rows, so 59 slices.
	want = "1 row group would not fit --memory-limit decoded whole: decoded in 59 row slices"
	if !strings.Contains(stdout, want) {
		t.Errorf("summary %q lacks %q", stdout, want)
	}
	m, s := testutil.TreeDigests(t, mem), testutil.TreeDigests(t, spill)
	if len(m) == 0 || len(m) != len(s) {
		t.Fatalf("in memory %d files, spilled %d files", len(m), len(s))
	}
	for name, data := range m {
		if s[name] != data {
			t.Errorf("%s differs between the in-memory and the spilled run", name)
		}
	}
}

// TestConvertUnknownColumnListsTheFileColumns pins an unhelpful message: a
// spec naming a column the file lacks (a typo, or a nested field spelled
// without its parent) said only `column "idd": schema mismatch: column not
// found`, leaving the user to find the file's column names elsewhere.
func TestConvertUnknownColumnListsTheFileColumns(t *testing.T) {
	pf := convertFixture(t)
	out := filepath.Join(t.TempDir(), "out")
	code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=idd:I64", "-o", out, "-q")
	if code != 1 || !strings.Contains(errs, `column "idd"`) || !strings.Contains(errs, `the file's columns are "id", "a", "b"`) {
		t.Errorf("exit %d, stderr %q; want 1 listing the file's columns", code, errs)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output directory created by a refused run")
	}
}

// TestConvertBadTensorFlagIsUsageError pins an exit code that contradicted
// convert --help ("Errors in flags exit 2"): a --tensor flag that parsed
// but described an impossible tensor (unknown dtype, zero dimension, no
// column, a name the spec file already uses) exited 1 like a data error.
// (A shape that does not fit the columns depends on the schema, whether a
// column is a list, so it is found with the source and exits 1.)
func TestConvertBadTensorFlagIsUsageError(t *testing.T) {
	pf := convertFixture(t)
	dir := t.TempDir()
	specPath := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(specPath, []byte("tensors:\n  - {name: id, column: id, dtype: I64}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tensor", "x=id:i64"}, `unknown dtype "i64"`},
		{[]string{"--tensor", "x=id:I64:0"}, "every dimension must be in [1, 2^31]"},
		{[]string{"--tensor", "x=:I64"}, "set exactly one of column"},
		{[]string{"--spec", specPath, "--tensor", "id=a:F32"}, `tensor name "id" used twice`},
	} {
		args := append([]string{"convert", "--plan", pf, "-o", out, "-q"}, c.args...)
		code, _, errs := runCLI(args...)
		if code != 2 || !strings.Contains(errs, "--tensor") || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming --tensor and %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("output directory created by a refused run")
	}
}

// TestConvertSourceRootForMovedData pins a gap: a plan does not depend on
// where the source is mounted (the fingerprint holds relative paths), and
// verify takes --source-root for data that moved, but convert could only
// read the files at the plan's recorded root, failing with "source changed
// since the plan was made: open ...: no such file or directory" and no way
// out but re-planning. convert takes --source-root, and the error for a
// missing root names the flag.
func TestConvertSourceRootForMovedData(t *testing.T) {
	dir := t.TempDir()
	orig, moved := filepath.Join(dir, "orig"), filepath.Join(dir, "moved")
	if err := os.MkdirAll(orig, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"part-0.parquet", "part-1.parquet"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(orig, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--source", orig, "--global-batch", "4", "--world-size", "2", "-o", pf, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	if err := os.Rename(orig, moved); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", out, "-q")
	if code != 1 || !strings.Contains(errs, "--source-root") {
		t.Errorf("moved source: exit %d, stderr %q; want 1 naming --source-root", code, errs)
	}
	if code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", out, "--source-root", moved, "-q"); code != 0 {
		t.Fatalf("--source-root: exit %d: %s", code, errs)
	}
	if code, out, errs := runCLI("verify", "--deep", "--source-root", moved, out); code != 0 {
		t.Fatalf("verify --deep: exit %d: %s %s", code, out, errs)
	}
	// The shard set's plan.json is the plan file's exact bytes.
	a, _ := os.ReadFile(pf)
	b, _ := os.ReadFile(filepath.Join(out, "plan.json"))
	if string(a) != string(b) {
		t.Error("plan.json in the shard set differs from the plan file")
	}
}

// TestConvertJaggedTensorFlag: --tensor NAME=COL:DTYPE:jagged reads a
// LIST column as a jagged tensor without a spec file (a format 2.0 set
// whose manifest records list.jagged), and the flag form without a shape
// or :jagged is refused naming both forms.
func TestConvertJaggedTensorFlag(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	type row struct {
		ID int64   `parquet:"id"`
		V  []int32 `parquet:"v,list"`
	}
	rows := make([]row, 8)
	for i := range rows {
		rows[i] = row{ID: int64(i), V: make([]int32, i%3)}
	}
	pqfixture.Of(rows...).WriteFile(t, filepath.Join(src, "d.parquet"))
	pf := filepath.Join(dir, "plan.json")
	if code, _, errs := runCLI("plan", "--source", src, "--global-batch", "4", "--world-size", "1", "-o", pf, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	out := filepath.Join(dir, "out")
	if code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "--tensor", "v=v:I32:jagged", "-o", out, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	m, err := shardfmt.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := shardfmt.TensorList(m.Tensors); m.ShardFormat != "2.0" || got != "[id I64 [], v I32 [] jagged]" {
		t.Errorf("shard_format %q, tensors %s", m.ShardFormat, got)
	}
	code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "v=v:I32", "-o", filepath.Join(dir, "out2"), "-q")
	want := `list column needs a shape (the fixed number of values per sample: --tensor NAME=COL:DTYPE:SHAPE), or list: {jagged: true} (--tensor NAME=COL:DTYPE:jagged)`
	if code != 1 || !strings.Contains(errs, want) {
		t.Errorf("v=v:I32: exit %d, stderr %q; want 1 with %q", code, errs, want)
	}
}

// TestSummariesSayRowsAndSamplesAndLogNoRepeat: the convert summary counts
// what shards hold in samples (pads included: 2 epochs of 7 steps of 16)
// and what it read from the source in rows (100), not the other way round;
// and no command repeats its summary as an INFO log line on stderr.
func TestSummariesSayRowsAndSamplesAndLogNoRepeat(t *testing.T) {
	pp := convertFixture(t)
	src := filepath.Join(filepath.Dir(pp), "src")
	out := filepath.Join(t.TempDir(), "shards")
	for _, args := range [][]string{
		{"plan", "--source", src, "--global-batch", "16", "--world-size", "2", "--epochs", "2", "-o", filepath.Join(t.TempDir(), "p.json")},
		{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out},
		{"convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out}, // every shard already complete
		{"verify", out},
		{"gc", out, "--keep-from-epoch", "1", "--dry-run"},
	} {
		code, stdout, stderr := runCLI(args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
		if strings.Contains(stderr, "level=INFO") {
			t.Errorf("%s repeats its summary in an INFO line:\nstdout %s\nstderr %s", args[0], stdout, stderr)
		}
		if args[0] == "convert" && !strings.Contains(stdout, "(4 already complete)") && (!strings.Contains(stdout, ", 224 samples, ") || !strings.Contains(stdout, "; decoded 100 source rows from 1 row group")) {
			t.Errorf("convert summary: want 224 samples written and 100 source rows decoded:\n%s", stdout)
		}
	}
}

// TestRerunRefusalNamesTheInput: a convert into a set made from other
// inputs is refused naming what differs (the seed and the global batch of
// the plan, the spec), not six fingerprints.
func TestRerunRefusalNamesTheInput(t *testing.T) {
	pp := convertFixture(t) // seed 1, global batch 16
	src := filepath.Join(filepath.Dir(pp), "src")
	out := filepath.Join(t.TempDir(), "shards")
	if code, _, stderr := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, stderr)
	}
	other := filepath.Join(t.TempDir(), "other.json")
	if code, _, stderr := runCLI("plan", "--source", src, "--seed", "2", "--epochs", "2", "--global-batch", "32", "--world-size", "2",
		"--shuffle", "global", "--remainder", "pad", "-o", other, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	code, _, stderr := runCLI("convert", "--plan", other, "--tensor", "id=id:I32", "-o", out)
	want := out + ": output directory holds a different shard set: it was made from other inputs: seed: the set's 1, this run's 2; global batch: the set's 16, this run's 32; spec: the set's "
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "(use --force to replace it)") || strings.Contains(stderr, "source sha256:") {
		t.Errorf("exit %d, stderr %s\nwant %s...", code, stderr, want)
	}
}

// TestTensorFlagHints: errors of a --tensor flag advise what a flag or a
// spec file can do (a string column's bytes policy lives in a spec file; a
// list of another length becomes a jagged tensor with the flag's :jagged
// form), never a spec key the flag cannot set as if it could.
func TestTensorFlagHints(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	type row struct {
		Name string  `parquet:"name"`
		Hist []int32 `parquet:"hist,list"`
	}
	pqfixture.Of(row{"a", []int32{1}}, row{"bb", []int32{1, 2}}, row{"c", []int32{1, 2, 3}}, row{"d", nil}).WriteFile(t, filepath.Join(src, "d.parquet"))
	pp := filepath.Join(dir, "plan.json")
	if code, _, stderr := runCLI("plan", "--source", src, "--global-batch", "2", "-o", pp, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		flag, want string
	}{
		{"name=name:I64", `d.parquet: column "name": BYTE_ARRAY STRING cannot be read as I64; --tensor cannot declare a bytes policy: give this tensor in a spec file (--spec) with bytes: {mode: hash, buckets: N} (dtype I64) or bytes: {mode: pad, max_len: L} (dtype U8)`},
		{"h=hist:I32:2", `d.parquet: column "hist", row group 0, row 0: list has length 1, not 2 (3 rows of this column chunk have another length; keep every length as a jagged tensor with --tensor h=hist:I32:jagged, or pad and truncate to one length with list.pad and list.truncate in a spec file (--spec))`},
	} {
		code, _, stderr := runCLI("convert", "--plan", pp, "--tensor", c.flag, "-o", filepath.Join(t.TempDir(), "out"))
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "set bytes.mode") {
			t.Errorf("--tensor %s: exit %d, stderr %s\nwant %s", c.flag, code, stderr, c.want)
		}
	}
	// The flag's jagged form the hint names converts.
	if code, _, stderr := runCLI("convert", "--plan", pp, "--tensor", "h=hist:I32:jagged", "-o", filepath.Join(t.TempDir(), "out"), "-q"); code != 0 {
		t.Errorf("--tensor h=hist:I32:jagged: exit %d: %s", code, stderr)
	}
}
