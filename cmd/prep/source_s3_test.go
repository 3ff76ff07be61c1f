package main

import (
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
