package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/source"
)

func TestReadAheadShare(t *testing.T) {
	for mem, want := range map[int64]int64{1 << 30: 256 << 20, 4 << 30: 256 << 20, 512 << 20: 128 << 20, 1000: 250} {
		if got := readAheadShare(mem); got != want {
			t.Errorf("readAheadShare(%d) = %d, want %d", mem, got, want)
		}
	}
}

func TestSourceLine(t *testing.T) {
	got := sourceLine(&source.S3Stats{Requests: 10, Retries: 2, BytesFetched: 2 << 20, BytesNeeded: 1 << 20})
	want := "source: fetched 2.0 MiB (2097152 bytes) for 1.0 MiB needed, in 10 requests, 2 retries (2.000x)"
	if got != want {
		t.Errorf("sourceLine = %q, want %q", got, want)
	}
	if sourceLine(nil) != "" {
		t.Error("a local source has a source line")
	}
}

// TestPlanRefusesMixedAndCredentialedSources: both are usage errors
// (exit 2) decided before any request, and the secret is never echoed.
func TestPlanRefusesMixedAndCredentialedSources(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", dir, "--source", "s3://bucket/x/"}, "local paths and s3:// URLs cannot be mixed"},
		{[]string{"--source", "s3://AKIAX:hunter2secret@bucket/x/"}, "refusing a URL that carries credentials"},
		{[]string{"--source", "s3://bucket/x/", "--io-concurrency", "0"}, "--io-concurrency 0: want 1 to 1024"},
		{[]string{"--source", "s3://bucket/x/", "--s3-retry-budget", "10ms"}, "--s3-retry-budget 10ms: want 1s to 24h"},
	} {
		code, out, errOut := runCLI(append([]string{"plan", "--global-batch", "8", "-o", dir + "/p.json"}, tc.args...)...)
		if code != 2 || !strings.Contains(errOut, tc.want) || strings.Contains(out+errOut, "hunter2secret") {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestSourceRootRefused: an s3:// --source-root that carries credentials
// or is a glob is refused before any request, naming the flag, and the
// secret is never echoed: a usage error (exit 2) of convert, a
// source_unreadable finding (exit 1) of verify --deep.
func TestSourceRootRefused(t *testing.T) {
	dir := t.TempDir()
	b27 := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage")
	pf := filepath.Join(dir, "p.json")
	if code, _, errs := runCLI("plan", "--source", b27, "--global-batch", "4", "-o", pf, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	shards := filepath.Join(dir, "shards")
	if code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", shards, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	for root, want := range map[string]string{
		"s3://AKIAX:hunter2secret@bucket/x/": "--source-root: refusing a URL that carries credentials",
		"s3://bucket/x/*":                    "--source-root: bad object-store URL: root s3://bucket/x/*: a store root cannot be a glob",
	} {
		code, out, errOut := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", filepath.Join(dir, "out"), "--source-root", root)
		if code != 2 || !strings.Contains(errOut, want) || strings.Contains(out+errOut, "hunter2secret") {
			t.Errorf("convert %s: exit %d, stderr %q; want exit 2 naming %q", root, code, errOut, want)
		}
		code, out, errOut = runCLI("verify", "--deep", "--source-root", root, shards)
		if code != 1 || !strings.Contains(out, "source_unreadable: "+want) || strings.Contains(out+errOut, "hunter2secret") {
			t.Errorf("verify --deep %s: exit %d, stdout %q; want exit 1 and a finding naming %q", root, code, out, want)
		}
	}
}
