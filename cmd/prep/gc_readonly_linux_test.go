package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/testutil"
)

// TestGCDryRunOnReadOnlyFileSystem pins a dry run that could not run where
// it is most useful, on a shard set mounted read-only: it opened (creating)
// the lock file first and failed with "read-only file system", though it
// changes nothing. On a read-only file system no run can change the set, so
// a dry run reports without the lock; a real gc still fails there.
func TestGCDryRunOnReadOnlyFileSystem(t *testing.T) {
	mnt := testutil.MountTmpfs(t, 8<<20)
	dir := filepath.Join(mnt, "set")
	pf := filepath.Join(t.TempDir(), "p.json")
	src := filepath.Join("..", "..", "testdata", "cases", "B27-ranks-coverage", "part-*.parquet")
	if code, _, errs := runCLI("plan", "--source", src, "--global-batch", "4", "--epochs", "2", "-o", pf, "-q"); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, errs)
	}
	if code, _, errs := runCLI("convert", "--plan", pf, "--tensor", "id=id:I64", "-o", dir, "-q"); code != 0 {
		t.Fatalf("convert: exit %d: %s", code, errs)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
		t.Skipf("remount read-only: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("mount", "-o", "remount,rw", mnt).Run() })
	code, out, errs := runCLI("gc", dir, "--keep-from-epoch", "1", "--dry-run")
	if code != 0 || !strings.Contains(out, "would remove epoch-00000/rank-00000.shard") {
		t.Errorf("dry run: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := runCLI("gc", dir, "--keep-from-epoch", "1"); code != 1 || !strings.Contains(errs, "read-only file system") {
		t.Errorf("gc: exit %d, stderr %q; want 1 naming the read-only file system", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "epoch-00000", "rank-00000.shard")); err != nil {
		t.Error(err)
	}
}
