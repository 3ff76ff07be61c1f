package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanPackFlagsRejects(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--pack", "tokens"}, 2, "want COLUMN:LENGTH"},
		{[]string{"--pack", "tokens:x"}, 2, "is not an integer"},
		{[]string{"--pack", "tokens:0"}, 2, "row length 0"},
		{[]string{"--pack", "tokens:8", "--pack-split", "cut"}, 2, "unknown split"},
		{[]string{"--pack", "tokens:8", "--pack-eod", "e"}, 2, "--pack-eod"},
		{[]string{"--pack-window", "4"}, 2, "only with --pack"},
		{[]string{"--pack", "tokens:8", "--shuffle", "blocks"}, 2, "packing takes shuffle none or global"},
		// The file's columns are scalars: no token list to pack.
		{[]string{"--pack", "id:8"}, 1, "token column"},
	} {
		args := append([]string{"plan", "--source", src, "--global-batch", "4", "-o", filepath.Join(dir, "p.json")}, c.args...)
		code, _, errs := runPrep(args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.msg)
		}
		if _, err := os.Stat(filepath.Join(dir, "p.json")); err == nil {
			t.Errorf("%v: plan written despite the error", c.args)
		}
	}
}

// TestPlanPackSourcesFileTwice: a packing given both in the sources file
// and with --pack is refused (exit 2) before anything is written.
func TestPlanPackSourcesFileTwice(t *testing.T) {
	dir := t.TempDir()
	sources := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sources, []byte("sources:\n  - name: a\n    path: "+dir+"\npacking:\n  column: tokens\n  length: 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan.json")
	code, _, errs := runCLI("plan", "--sources", sources, "--pack", "tokens:8", "--global-batch", "2", "-o", out)
	if code != 2 || !strings.Contains(errs, "give the packing once") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("plan file written: %v", err)
	}
}

// TestPlanPackFlagWithSourcesFile: a --pack-* flag beside a sources file
// whose packing block turns packing on is refused (exit 2) naming the
// block's key to use instead, not only "applies only with --pack", which
// read as if the file's packing were not packing.
func TestPlanPackFlagWithSourcesFile(t *testing.T) {
	dir := t.TempDir()
	sources := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sources, []byte("sources:\n  - name: a\n    path: "+dir+"\npacking:\n  column: tokens\n  length: 8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "plan.json")
	code, _, errs := runCLI("plan", "--sources", sources, "--pack-eod", "2", "--global-batch", "2", "-o", out)
	if code != 2 || !strings.Contains(errs, "packing block takes it as its key eod") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("plan file written: %v", err)
	}
}
