package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFileReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, body := range []string{"one\n", "two\n"} {
		if err := WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(p); string(b) != body {
			t.Fatalf("contents %q, want %q", b, body)
		}
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if got := names(t, dir); len(got) != 1 || got[0] != "f.json" {
		t.Errorf("directory holds %v", got)
	}
}

// TestWriteFileInReplacesLinkNotTarget: a symbolic link at the name is
// replaced by the new file; the link's target keeps its contents, and a
// name through a link leaving the root is refused.
func TestWriteFileInReplacesLinkNotTarget(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "keep")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteFileIn(root, "manifest.json", []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "manifest.json")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("name after the write: %v, %v", fi, err)
	}
	if err := WriteFileIn(root, "sub/x", []byte("no"), 0o644); err == nil {
		t.Fatal("write through a link leaving the root succeeded")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("link target %q, want keep", b)
	}
	if got := names(t, outside); len(got) != 1 {
		t.Errorf("outside holds %v", got)
	}
}

func TestDirSyncFailureIsNotDurable(t *testing.T) {
	SyncDirHook = func(string) error { return errors.New("injected EIO") }
	t.Cleanup(func() { SyncDirHook = nil })
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "a"), []byte("a"), 0o644); !errors.Is(err, ErrNotDurable) {
		t.Errorf("WriteFile = %v, want ErrNotDurable", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteFileIn(root, "b", []byte("b"), 0o644); !errors.Is(err, ErrNotDurable) {
		t.Errorf("WriteFileIn = %v, want ErrNotDurable", err)
	}
	for _, n := range []string{"a", "b"} {
		if b, _ := os.ReadFile(filepath.Join(dir, n)); string(b) != n {
			t.Errorf("%s holds %q: the renamed file should be in place", n, b)
		}
	}
}

// TestPendingCommitPatchesAndAbortLeavesNothing: Begin changes nothing at
// the name; Commit writes the patches over the begun bytes and puts the
// file in place with its mode; Abort removes the temporary file and keeps
// the old contents; a second Commit is refused.
func TestPendingCommitPatchesAndAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plan.json")
	if err := WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pend, err := Begin(p, [][]byte{[]byte("digest 0000, "), []byte("bulk\n")}, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "old\n" {
		t.Fatalf("after Begin: %q, want the old contents", b)
	}
	if err := pend.Commit([]Patch{{Off: 7, Data: []byte("beef")}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "digest beef, bulk\n" {
		t.Errorf("after Commit: %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	if err := pend.Commit(nil); err == nil {
		t.Error("a second Commit succeeded")
	}
	pend, err = Begin(p, [][]byte{[]byte("new\n")}, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); len(got) != 2 {
		t.Errorf("after Begin the directory holds %v, want the file and its temporary", got)
	}
	pend.Abort()
	pend.Abort()
	if b, _ := os.ReadFile(p); string(b) != "digest beef, bulk\n" {
		t.Errorf("after Abort: %q, want the committed contents", b)
	}
	if got := names(t, dir); len(got) != 1 || got[0] != "plan.json" {
		t.Errorf("after Abort the directory holds %v", got)
	}
}
