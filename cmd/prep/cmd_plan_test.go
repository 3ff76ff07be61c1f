package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestCaseB27RanksCoverage(t *testing.T) {
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.json")
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "part-*.parquet")
	code, out, errs := runPrep("plan", "--source", src, "--seed", "7", "--global-batch", "4", "--world-size", "4",
		"--workers", "3", "--remainder", "pad", "-o", planPath, "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Samples != 103 || s.StepsPerEpoch != 26 || s.PaddedPerEpoch != 1 || s.DroppedPerEpoch != 0 || s.Files != 3 {
		t.Fatalf("summary %+v", s)
	}
	// Byte-identical plan on a second run.
	first, _ := os.ReadFile(planPath)
	again := filepath.Join(dir, "again.json")
	if code, _, errs := runPrep("plan", "--source", src, "--seed", "7", "--batch-size", "1", "--world-size", "4",
		"--workers", "3", "--remainder", "pad", "-o", again, "-q"); code != 0 {
		t.Fatal(errs)
	}
	second, _ := os.ReadFile(again)
	if !bytes.Equal(first, second) {
		t.Fatal("two runs gave different plan bytes")
	}
	// Union over all (rank, worker) pairs: ids 0..102 once, one pad.
	seen := map[uint64]int{}
	pads := 0
	for r := 0; r < 4; r++ {
		for w := 0; w < 3; w++ {
			code, out, errs := runPrep("plan", "show", planPath, "--epoch", "0", "--rank", string(rune('0'+r)), "--worker", string(rune('0'+w)), "--json", "-q")
			if code != 0 {
				t.Fatal(errs)
			}
			var sr struct {
				Worker  *int `json:"worker"`
				Batches []struct {
					Step    int      `json:"step"`
					Samples []uint64 `json:"samples"`
					Pad     []bool   `json:"pad"`
				} `json:"batches"`
			}
			if err := json.Unmarshal([]byte(out), &sr); err != nil {
				t.Fatal(err)
			}
			if sr.Worker == nil || *sr.Worker != w {
				t.Fatalf("worker field %v", sr.Worker)
			}
			for _, b := range sr.Batches {
				if b.Step%3 != w {
					t.Fatalf("worker %d got step %d", w, b.Step)
				}
				for i, id := range b.Samples {
					if b.Pad[i] {
						pads++
					} else {
						seen[id]++
					}
				}
			}
		}
	}
	if len(seen) != 103 || pads != 1 {
		t.Fatalf("%d distinct ids, %d pads", len(seen), pads)
	}
	for id, n := range seen {
		if id > 102 || n != 1 {
			t.Fatalf("id %d seen %d times", id, n)
		}
	}
	// Text output: one batch per line, pad marked.
	code, out, _ = runPrep("plan", "show", planPath, "--rank", "3", "--from-step", "25", "-q")
	if code != 0 || !strings.HasPrefix(out, "step 25: ") || !strings.HasSuffix(out, "*\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("show text: %d %q", code, out)
	}
	code, out, _ = runPrep("plan", "show", planPath, "--rank", "0", "--limit", "3", "-q")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Fatalf("show --limit 3: %q", out)
	}
	// Rank out of range: exit 2 naming the rank.
	for _, r := range []string{"4", "-1"} {
		code, _, errs = runPrep("plan", "show", planPath, "--rank", r)
		if code != 2 || !strings.Contains(errs, "--rank "+r) {
			t.Fatalf("rank %s: exit %d %s", r, code, errs)
		}
	}
}

func TestPlanCommandRejects(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--global-batch", "10", "--world-size", "4"}, 2, "not divisible by --world-size 4"},
		{[]string{"--world-size", "4"}, 2, "--global-batch or --batch-size"},
		{[]string{"--global-batch", "4", "--shuffle", "random"}, 2, "unknown mode"},
		{[]string{"--global-batch", "4", "--window", "3"}, 2, "--window"},
		{[]string{"--global-batch", "4", "--source", filepath.Join("..", "..", "testdata", "cases", "B19-corrupt-files")}, 1, "zero_bytes.parquet"},
		// A malformed glob is a mistake in the flag, not in the data.
		{[]string{"--global-batch", "4", "--source", filepath.Join(src, "[x")}, 2, "--source " + filepath.Join(src, "[x") + ": syntax error in pattern"},
	} {
		args := append([]string{"plan", "--source", src, "-o", filepath.Join(dir, "p.json")}, c.args...)
		code, _, errs := runPrep(args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.msg)
		}
		if _, err := os.Stat(filepath.Join(dir, "p.json")); err == nil {
			t.Errorf("%v: plan written despite the error", c.args)
		}
	}
}

// TestPlanCommandHugeCountsAreUsageErrors pins three faults: --epochs
// 1000000000000 died with "fatal error: runtime: out of memory",
// --global-batch 9223372036854775807 panicked ("makeslice: cap out of
// range"), and --batch-size 4611686018427387905 --world-size 4 wrapped
// around int64 to a plan with G = 4, b = 1 and exit 0.
func TestPlanCommandHugeCountsAreUsageErrors(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--global-batch", "4", "--epochs", "1000000000000"}, "--epochs: 1000000000000 exceeds the limit of 65536 epochs"},
		{[]string{"--global-batch", "9223372036854775807"}, "--global-batch: 9223372036854775807 exceeds the limit of 16777216 samples per step"},
		{[]string{"--batch-size", "4611686018427387905", "--world-size", "4"}, "--batch-size 4611686018427387905 x --world-size 4 exceeds the limit of 16777216 samples per step"},
		{[]string{"--global-batch", "4", "--workers", "1000000000000"}, "--workers: 1000000000000 exceeds the limit of 1024 workers per rank"},
	} {
		args := append([]string{"plan", "--source", src, "-o", filepath.Join(dir, "p.json")}, c.args...)
		code, _, errs := runPrep(args...)
		if code != 2 || !strings.Contains(errs, c.msg) || strings.Contains(errs, "goroutine") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.msg)
		}
		if _, err := os.Stat(filepath.Join(dir, "p.json")); err == nil {
			t.Errorf("%v: plan written despite the error", c.args)
		}
	}
}

// TestPlanShowFromStepPastEnd pins the fault where plan show --from-step 99
// on a 7-step plan printed nothing and exited 0; the last step + 1 (an
// empty listing, like a resume at the end) is still accepted.
func TestPlanShowFromStepPastEnd(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "part-*.parquet")
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runPrep("plan", "--source", src, "--global-batch", "8", "-o", pf); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	code, out, errs := runPrep("plan", "show", pf, "--from-step", "99")
	if code != 2 || out != "" || !strings.Contains(errs, "--from-step 99 out of range [0, 12]: the plan has 12 steps per epoch") {
		t.Errorf("--from-step 99: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := runPrep("plan", "show", pf, "--from-step", "12"); code != 0 || out != "" {
		t.Errorf("--from-step 12: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestPlanNoStepsPartitionedRankWithoutRowGroup pins a misleading message:
// with --shuffle partitioned and more ranks than row groups, some rank gets
// no sample, so remainder drop leaves the plan without a step. The error
// advised "lower --global-batch or use --remainder pad", neither of which
// helps (pad is then refused: that rank has nothing to pad from). It must
// name the rank without a row group and the counts instead.
func TestPlanNoStepsPartitionedRankWithoutRowGroup(t *testing.T) {
	dir := t.TempDir()
	// B27's three files hold 103 rows in 8 row groups of at most 16 rows.
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "part-*.parquet")
	pf := filepath.Join(dir, "p.json")
	code, _, errs := runPrep("plan", "--source", src, "--global-batch", "16", "--world-size", "16",
		"--shuffle", "partitioned", "--remainder", "drop", "-o", pf)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{"partitioned mode gives rank 8 no row group (8 row groups for world size 16)", "--remainder partial"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	}
	if strings.Contains(errs, "--remainder pad") || strings.Contains(errs, "lower --global-batch") {
		t.Errorf("stderr %q gives advice that cannot help", errs)
	}
	if _, err := os.Stat(pf); err == nil {
		t.Error("plan written despite the error")
	}
}

// TestPlanReportsPathsOfTheSameFile pins silent duplication: a source folder
// holding a hard link or a symbolic link to one of its files planned that
// file's rows once per path, with nothing said. prep plan still plans them
// (a user may mean it) but warns and lists each group; a copy is another
// file and is not listed.
func TestPlanReportsPathsOfTheSameFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ml", "venomx", "embeddings.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.parquet", "d.parquet"} {
		if err := os.WriteFile(filepath.Join(src, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(src, "a.parquet"), filepath.Join(src, "b.parquet")); err != nil {
		t.Skipf("hard link: %v", err)
	}
	if err := os.Symlink("a.parquet", filepath.Join(src, "c.parquet")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	code, out, errs := runPrep("plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "p.json"), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := [][]string{{"a.parquet", "b.parquet", "c.parquet"}}; !reflect.DeepEqual(s.SameFiles, want) || s.Files != 4 {
		t.Errorf("same_files %v over %d files, want %v over 4", s.SameFiles, s.Files, want)
	}
	if !strings.Contains(errs, `paths="a.parquet, b.parquet, c.parquet"`) || !strings.Contains(errs, "planned once per path") {
		t.Errorf("stderr lacks the warning naming the three paths: %s", errs)
	}
	// Without links nothing is listed, as an empty list.
	if err := os.Remove(filepath.Join(src, "b.parquet")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(src, "c.parquet")); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runPrep("plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "p.json"), "--json")
	if code != 0 || !strings.Contains(out, `"same_files":[]`) || strings.Contains(errs, "same file") {
		t.Errorf("without links: exit %d, stdout %s, stderr %s; want same_files [] and no warning", code, out, errs)
	}
}

// TestPlanReportsSkippedFiles: a directory with Parquet files under other
// names (Hive's 000000_0, *.pq) plans them all (3 copies of a file DuckDB
// counts 100 rows in), and the regular files left out as not Parquet
// are named in --json skipped_files, in the text summary and in a warning;
// _SUCCESS is ignored without a word. A sources file's relative path is
// read from the sources file's directory, not the working directory.
func TestPlanReportsSkippedFiles(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ml", "venomx", "embeddings.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src, "part"), 0o755)
	for name, b := range map[string][]byte{"a.parquet": data, "part/000000_0": data, "c.pq": data, "notes.txt": []byte("text"), "_SUCCESS": nil} {
		if err := os.WriteFile(filepath.Join(src, filepath.FromSlash(name)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runPrep("plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "p.json"), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s planSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	notes := filepath.Join(src, "notes.txt")
	if s.Files != 3 || s.Samples != 3*100 || !reflect.DeepEqual(s.SkippedFiles, []string{notes}) {
		t.Errorf("%d files, %d samples, skipped %v; want 3, 300, [%s]", s.Files, s.Samples, s.SkippedFiles, notes)
	}
	if !strings.Contains(errs, "files left out: not Parquet") || !strings.Contains(errs, notes) {
		t.Errorf("stderr lacks the warning: %s", errs)
	}
	code, out, _ = runPrep("plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "p.json"))
	if want := "skipped          1 file not Parquet (not named *.parquet, no PAR1 magic): " + notes; code != 0 || !strings.Contains(out, want) {
		t.Errorf("summary lacks %q: %s", want, out)
	}
	// A sources file in conf/ naming ../src reads dir/src, from any
	// working directory (the test's is cmd/prep).
	os.MkdirAll(filepath.Join(dir, "conf"), 0o755)
	os.WriteFile(filepath.Join(dir, "conf", "s.yaml"), []byte("sources:\n  - name: a\n    path: ../src\n"), 0o644)
	code, out, errs = runPrep("plan", "--sources", filepath.Join(dir, "conf", "s.yaml"), "--global-batch", "4", "-o", filepath.Join(dir, "p.json"), "--json")
	if err := json.Unmarshal([]byte(out), &s); code != 0 || err != nil || s.Samples != 3*100 || !reflect.DeepEqual(s.SkippedFiles, []string{notes}) {
		t.Errorf("sources file: exit %d, %v, %s %s", code, err, out, errs)
	}
}

// TestPlanRefusesOutputThatIsAnInput pins a fault: -o naming a source
// file, or the sources file, replaced it with the plan (exit 0), so the
// data the plan was made from was lost. Each is now a usage error, named,
// and the file is left as it was.
func TestPlanRefusesOutputThatIsAnInput(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "ml", "venomx", "embeddings.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "a.parquet")
	sources := filepath.Join(dir, "mix.yaml")
	yaml := "sources:\n  - name: a\n    path: a.parquet\n"
	for name, body := range map[string]string{src: string(data), sources: yaml} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.parquet")
	if err := os.Link(src, link); err != nil {
		t.Skipf("hard link: %v", err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--source", src, "-o", src}, "--output " + src + " is the source file " + src + ": the plan would replace it"},
		{[]string{"--source", dir, "-o", link}, "--output " + link + " is the source file " + filepath.Join(dir, "a.parquet") + ": the plan would replace it"},
		{[]string{"--sources", sources, "-o", sources}, "--output " + sources + " is the sources file " + sources + ": the plan would replace it"},
		{[]string{"--sources", sources, "-o", link}, "--output " + link + " is the source file " + src + ": the plan would replace it"},
	} {
		code, _, errs := runPrep(append([]string{"plan", "--global-batch", "4"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.msg)
		}
	}
	if b, err := os.ReadFile(src); err != nil || string(b) != string(data) {
		t.Errorf("source file changed (%v)", err)
	}
	if b, err := os.ReadFile(sources); err != nil || string(b) != yaml {
		t.Errorf("sources file changed: %q (%v)", b, err)
	}
}

// TestPlanWarnsOfLeftoverTemps pins that prep plan names the temporary
// files a plan killed outright left beside its output (it writes
// "<output>.tmp-*" while the epoch digests are computed), and only those.
func TestPlanWarnsOfLeftoverTemps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "p.json")
	for _, name := range []string{"p.json.tmp-123", "p.json.tmp-9", "q.json.tmp-1", "p.jsonx"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join("..", "..", "testdata", "ml", "venomx", "embeddings.parquet")
	code, _, errs := runPrep("plan", "--source", src, "--global-batch", "4", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "files=\"" + filepath.Join(dir, "p.json.tmp-123") + ", " + filepath.Join(dir, "p.json.tmp-9") + "\""
	if !strings.Contains(errs, "temporary plan files beside the output") || !strings.Contains(errs, want) {
		t.Errorf("stderr %q, want a warning with %s", errs, want)
	}
}

// TestPlanRefusesBadOutputFirst pins that a plan file path prep plan
// cannot write is refused before any source is read: it was refused only
// once the footers were read and the filters evaluated (minutes over an
// object store), and a missing directory was reported as the temporary
// file's ("open DIR/p.json.tmp-123: no such file or directory"). The
// source here does not exist, so an error about it would mean it was read
// first.
func TestPlanRefusesBadOutputFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.parquet")
	for _, c := range []struct{ out, msg string }{
		{filepath.Join(dir, "nodir", "p.json"), filepath.Join(dir, "nodir", "p.json") + ": directory " + filepath.Join(dir, "nodir") + " does not exist: invalid plan configuration"},
		{filepath.Join(file, "p.json"), filepath.Join(file, "p.json") + ": " + file + " is not a directory: invalid plan configuration"},
		{dir, dir + ": exists and is not a regular file (d---------); the plan file must be a regular file: invalid plan configuration"},
	} {
		code, _, errs := runPrep("plan", "--source", missing, "--global-batch", "4", "-o", c.out)
		if code != 2 || errs != "prep: "+c.msg+"\n" {
			t.Errorf("-o %s: exit %d, stderr %q; want 2 and %q", c.out, code, errs, c.msg)
		}
	}
}

// TestPlanRefusesShardSetPlan: -o naming a shard set's plan.json (beside
// its manifest.json) is refused, exit 2, before any source is read, and
// the copy is left as it was; a plan.json in a folder without a manifest
// is written.
func TestPlanRefusesShardSetPlan(t *testing.T) {
	dir := t.TempDir()
	set := filepath.Join(dir, "set")
	if err := os.Mkdir(set, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"manifest.json": "{}\n", "plan.json": "the copy\n"} {
		if err := os.WriteFile(filepath.Join(set, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(set, "plan.json")
	code, _, errs := runPrep("plan", "--source", filepath.Join(dir, "missing.parquet"), "--global-batch", "4", "-o", out)
	want := "prep: --output " + out + " is the copy of the plan that made the shard set " + set + " (beside its manifest.json), which convert checks reruns against: write the plan elsewhere\n"
	if code != 2 || errs != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, errs, want)
	}
	if b, _ := os.ReadFile(out); string(b) != "the copy\n" {
		t.Errorf("the shard set's plan.json now holds %q", b)
	}
	src := filepath.Join("..", "..", "testdata", "ml", "venomx", "embeddings.parquet")
	if code, _, errs := runPrep("plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "plan.json"), "-q"); code != 0 {
		t.Errorf("plan.json outside a shard set: exit %d, %s", code, errs)
	}
}
