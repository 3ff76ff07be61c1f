package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestQuietSilencesSummaries: -q silenced only progress bars and info logs;
// the plan and convert summaries still filled stdout. Requested output
// (--json) still comes.
func TestQuietSilencesSummaries(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	code, stdout, stderr := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "-q")
	if code != 0 || stdout != "" || stderr != "" {
		t.Errorf("convert -q: exit %d, stdout %q, stderr %q; want silence", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("verify", out, "-q", "--json")
	if code != 0 || !strings.HasPrefix(stdout, "{") {
		t.Errorf("verify -q --json: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runCLI("plan", "--source", filepath.Join(filepath.Dir(pp), "src"), "--global-batch", "4", "-o", filepath.Join(t.TempDir(), "p.json"), "-q")
	if code != 0 || stdout != "" {
		t.Errorf("plan -q: exit %d, stdout %q", code, stdout)
	}
}

// TestSummariesUsePlurals: "1 shards written", "1 workers per rank".
func TestSummariesUsePlurals(t *testing.T) {
	pp := convertFixture(t)
	out := filepath.Join(t.TempDir(), "shards")
	code, stdout, stderr := runCLI("convert", "--plan", pp, "--tensor", "id=id:I64", "-o", out, "--epochs", "1", "--ranks", "1")
	if code != 0 || !strings.Contains(stdout, ": 1 shard written (0 already complete), 56 samples,") ||
		!strings.Contains(stdout, "decoded 52 source rows from 1 row group (0 skipped)") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("plan", "--source", filepath.Join(filepath.Dir(pp), "src"), "--global-batch", "4", "-o", filepath.Join(t.TempDir(), "p.json"))
	if code != 0 || !strings.Contains(stdout, "100 in 1 file, 1 non-empty row group") || !strings.Contains(stdout, "1 epoch, global batch") ||
		!strings.Contains(stdout, "1 rank x") || !strings.Contains(stdout, "1 worker per rank") {
		t.Errorf("exit %d, summary %q", code, stdout)
	}
	// A partial set checked as a whole: rank_missing says how to check it.
	code, stdout, _ = runCLI("verify", out)
	if code != 1 || !strings.Contains(stdout, "epoch-00000/rank-00000.shard: rank_missing: ") ||
		!strings.Contains(stdout, "(a set holding only some epochs or ranks, such as one node's: verify --partial)") ||
		!strings.Contains(stdout, "3 findings (1 shard, 7 batches,") {
		t.Errorf("verify of a partial set: exit %d, stdout %q", code, stdout)
	}
}

// TestVersionFlag: prep --version prints what prep version does: the
// version, the commit, the Go version and platform, and every build
// setting the binary records (read here with runtime/debug), and takes
// --json in either order.
func TestVersionFlag(t *testing.T) {
	code, flag, _ := runPrep("--version")
	_, cmd, _ := runPrep("version")
	if code != 0 || flag != cmd || !strings.HasPrefix(flag, "prep ") {
		t.Errorf("--version: exit %d, %q; version: %q", code, flag, cmd)
	}
	if !strings.Contains(flag, "\n  go        "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH+"\n") || !strings.Contains(flag, "\n  commit    ") {
		t.Errorf("--version lacks the commit or Go line:\n%s", flag)
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build info in the test binary")
	}
	n := 0
	for _, s := range bi.Settings {
		if strings.HasPrefix(s.Key, "vcs") {
			continue
		}
		n++
		if !strings.Contains(flag, "\n  build     "+s.Key+"="+s.Value+"\n") {
			t.Errorf("--version lacks build setting %s=%s:\n%s", s.Key, s.Value, flag)
		}
	}
	for _, args := range [][]string{{"--version", "--json"}, {"--json", "--version"}, {"--progress", "never", "--version", "--json"}, {"version", "--json"}} {
		code, out, errs := runPrep(args...)
		var v struct {
			Version   string `json:"version"`
			Commit    string `json:"commit"`
			GoVersion string `json:"go_version"`
			Platform  string `json:"platform"`
			Settings  []struct {
				Key, Value string
			} `json:"settings"`
		}
		if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Version == "" || v.Commit == "" ||
			v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || len(v.Settings) != n {
			t.Errorf("%q: exit %d, %v, %+v (want %d settings)\n%s", args, code, err, v, n, errs)
		}
	}
}

// TestJSONKeepsAngleBrackets: --json wrote "a\u003cb" for a path a<b.
func TestJSONKeepsAngleBrackets(t *testing.T) {
	pp := convertFixture(t)
	dir := filepath.Join(t.TempDir(), "a<b&c>")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("plan", "--source", filepath.Join(filepath.Dir(pp), "src"), "--global-batch", "4", "-o", filepath.Join(dir, "p.json"), "--json")
	if code != 0 || !strings.Contains(stdout, `a<b&c>/p.json"`) || strings.Contains(stdout, `\u003c`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestTextErrorsAreSentences: with --log-format text a failure was a slog
// record (time=... level=ERROR msg="..." exit_code=1); it is now one line,
// "prep: <what failed>", and a JSON record with --log-format json.
func TestTextErrorsAreSentences(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	code, _, stderr := runCLI("convert", "--plan", missing, "--tensor", "id=id:I64", "-o", t.TempDir())
	if code != 1 || !strings.HasPrefix(stderr, "prep: ") || strings.Contains(stderr, "level=") || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "missing.json") {
		t.Errorf("text: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI("--log-format", "json", "convert", "--plan", missing, "--tensor", "id=id:I64", "-o", t.TempDir())
	if code != 1 || !strings.Contains(stderr, `"level":"ERROR"`) || !strings.Contains(stderr, `"exit_code":1`) {
		t.Errorf("json: exit %d, stderr %q", code, stderr)
	}
}

// TestHelpNamesJaggedTensors: prep --help says shards hold jagged tensors
// too, still one read and one DMA per batch, and prep convert --help lists
// the list and map policies and the jagged --tensor form.
func TestHelpNamesJaggedTensors(t *testing.T) {
	flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	code, out, errs := runCLI("--help")
	if code != 0 {
		t.Fatalf("prep --help: exit %d %s", code, errs)
	}
	for _, want := range []string{"fixed-shape tensors, and jagged ones (a variable number of values per sample, stored as values plus offsets) from list and map columns",
		"copies each batch to the GPU with one read and one DMA, jagged tensors included"} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("prep --help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fixed-layout") {
		t.Errorf("prep --help still says fixed-layout:\n%s", out)
	}
	code, out, errs = runCLI("convert", "--help")
	if code != 0 {
		t.Fatalf("prep convert --help: exit %d %s", code, errs)
	}
	for _, want := range []string{"the null, NaN, list, bytes, map and cast policies",
		"with list: {jagged: true}, as a jagged tensor (values plus offsets; a list of lists adds NAME_inner_lengths)",
		"a map as jagged NAME.keys and NAME.values (map: {}) or as one dense tensor over listed keys (map: {keys, fill})",
		"--tensor NAME=COL:DTYPE:jagged reads a LIST column as a jagged tensor"} {
		if !strings.Contains(flat(out), want) {
			t.Errorf("prep convert --help lacks %q:\n%s", want, out)
		}
	}
}
