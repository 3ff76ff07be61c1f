package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/verify/verifytest"
)

// checkCPUProfile asserts that path holds a CPU profile as runtime/pprof
// writes it: a gzip stream of a profile.proto whose string table names the
// sample types "samples"/"count" and "cpu"/"nanoseconds".
func checkCPUProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: not gzip: %v", path, err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for _, s := range []string{"samples", "count", "cpu", "nanoseconds"} {
		if !bytes.Contains(b, []byte(s)) {
			t.Errorf("%s: profile names no %q sample type", path, s)
		}
	}
}

// checkTrace asserts that path holds an execution trace: runtime/trace
// starts every trace with the header "go 1.NN trace".
func checkTrace(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:min(len(b), 16)], []byte(" trace")) {
		t.Errorf("%s: no trace header: % x", path, b[:min(len(b), 16)])
	}
}

// TestProfileFlags: verify, load and plan write the CPU profile and the
// trace named by --cpuprofile and --trace, and keep their exit status.
func TestProfileFlags(t *testing.T) {
	f := verifytest.Build(t)
	tmp := t.TempDir()
	type row struct {
		ID int64 `parquet:"id"`
	}
	src := filepath.Join(tmp, "d.parquet")
	pqfixture.Of(row{1}, row{2}, row{3}, row{4}).WriteFile(t, src)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"verify", []string{"verify", f.Dir}},
		{"load", []string{"load", f.Dir, "--epoch", "0", "--rank", "0", "-q"}},
		{"plan", []string{"plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(tmp, "plan.json"), "-q"}},
	} {
		cpu, tr := filepath.Join(tmp, c.name+".pprof"), filepath.Join(tmp, c.name+".trace")
		code, out, errs := runCLI(append(c.args, "--cpuprofile", cpu, "--trace", tr)...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", c.name, code, out, errs)
		}
		checkCPUProfile(t, cpu)
		checkTrace(t, tr)
	}
}

// TestProfileFlagsKeepExitStatus: a verify that finds problems still
// exits 1 and still writes its profile.
func TestProfileFlagsKeepExitStatus(t *testing.T) {
	f := verifytest.Build(t)
	if err := os.WriteFile(filepath.Join(f.Dir, "stray.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cpu := filepath.Join(t.TempDir(), "cpu.pprof")
	if code, out, _ := runCLI("verify", f.Dir, "--cpuprofile", cpu); code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	checkCPUProfile(t, cpu)
}

// TestProfileEnvironment: PREP_CPUPROFILE and PREP_TRACE name the files
// when the flags are not given.
func TestProfileEnvironment(t *testing.T) {
	f := verifytest.Build(t)
	tmp := t.TempDir()
	cpu, tr := filepath.Join(tmp, "env.pprof"), filepath.Join(tmp, "env.trace")
	t.Setenv(envCPUProfile, cpu)
	t.Setenv(envTrace, tr)
	if code, out, errs := runCLI("verify", f.Dir); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	checkCPUProfile(t, cpu)
	checkTrace(t, tr)
}

// TestProfileFlagErrors: a profile file that cannot be created is a usage
// error (exit 2) naming the flag; commands other than convert, verify,
// load and plan have no such flag.
func TestProfileFlagErrors(t *testing.T) {
	f := verifytest.Build(t)
	bad := filepath.Join(t.TempDir(), "no-such-dir", "cpu.pprof")
	code, _, errs := runCLI("verify", f.Dir, "--cpuprofile", bad)
	if code != 2 || !strings.Contains(errs, "--cpuprofile") {
		t.Errorf("unwritable --cpuprofile: exit %d, stderr %q; want 2 naming the flag", code, errs)
	}
	if code, _, errs := runCLI("inspect", f.Dir, "--cpuprofile", filepath.Join(t.TempDir(), "x")); code != 2 {
		t.Errorf("inspect --cpuprofile: exit %d, stderr %q; want 2 (unknown flag)", code, errs)
	}
	for _, c := range []string{"convert", "verify", "load", "plan"} {
		_, out, _ := runCLI(c, "--help")
		if !strings.Contains(out, "--cpuprofile FILE") || !strings.Contains(out, "--trace FILE") || !strings.Contains(out, envCPUProfile) {
			t.Errorf("%s --help does not document --cpuprofile, --trace and $%s", c, envCPUProfile)
		}
	}
}

// TestProfileFileNeverReplacesOtherData: a profile or trace path that names
// an existing file holding something else (the shard set's manifest, a plan
// file given by mistake) is a usage error that leaves the file untouched,
// and --cpuprofile and --trace naming one file is refused (the two writers
// would interleave into a file neither tool reads).
func TestProfileFileNeverReplacesOtherData(t *testing.T) {
	f := verifytest.Build(t)
	manifest := filepath.Join(f.Dir, "manifest.json")
	before, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--cpuprofile", "--trace"} {
		code, _, errs := runCLI("verify", f.Dir, flag, manifest)
		if code != 2 || !strings.Contains(errs, flag) || !strings.Contains(errs, "manifest.json") {
			t.Errorf("verify %s MANIFEST: exit %d, stderr %q; want 2 naming the flag and the file", flag, code, errs)
		}
		after, err := os.ReadFile(manifest)
		if err != nil || !bytes.Equal(after, before) {
			t.Fatalf("verify %s MANIFEST changed the manifest (%d bytes, was %d; %v)", flag, len(after), len(before), err)
		}
	}
	same := filepath.Join(t.TempDir(), "prof")
	code, _, errs := runCLI("verify", f.Dir, "--cpuprofile", same, "--trace", same)
	if code != 2 || !strings.Contains(errs, "--trace") {
		t.Errorf("--cpuprofile and --trace on one file: exit %d, stderr %q; want 2", code, errs)
	}
	// A profile or trace left by an earlier run is replaced, as before.
	cpu, tr := filepath.Join(t.TempDir(), "cpu.pprof"), filepath.Join(t.TempDir(), "run.trace")
	for range 2 {
		if code, out, errs := runCLI("verify", f.Dir, "--cpuprofile", cpu, "--trace", tr); code != 0 {
			t.Fatalf("rerun over earlier profile files: exit %d\n%s%s", code, out, errs)
		}
	}
	checkCPUProfile(t, cpu)
	checkTrace(t, tr)
}
