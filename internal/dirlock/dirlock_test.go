package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestAcquireHeldRelease(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".prep.lock")
	l, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	if l.Stale != nil {
		t.Errorf("fresh lock reported stale owner %v", l.Stale)
	}
	host, _ := os.Hostname()
	b, _ := os.ReadFile(p)
	if want := fmt.Sprintf("%d %s\n", os.Getpid(), host); string(b) != want {
		t.Errorf("lock file = %q, want %q", b, want)
	}
	// A second open file description conflicts with the first, even in
	// the same process (flock semantics).
	_, err = Acquire(p)
	var he *HeldError
	if !errors.As(err, &he) || !errors.Is(err, ErrHeld) || he.ExitCode() != 3 || he.Holder.PID != os.Getpid() || he.Holder.Host != host {
		t.Fatalf("second acquire: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left after release: %v", err)
	}
	l2, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
}

func TestStaleLockTakenOver(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".prep.lock")
	if err := os.WriteFile(p, []byte("4242 deadhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Stale == nil || l.Stale.PID != 4242 || l.Stale.Host != "deadhost" {
		t.Errorf("stale = %v", l.Stale)
	}
}

// TestReadOwner reads the holder a lock file names without taking the lock.
func TestReadOwner(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".prep.lock")
	if err := os.WriteFile(p, []byte("4242 node-7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ReadOwner(p)
	if err != nil || o != (Owner{PID: 4242, Host: "node-7"}) {
		t.Fatalf("ReadOwner = %+v, %v; want pid 4242 on node-7", o, err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if o, err := ReadOwner(p); err != nil || o != (Owner{}) {
		t.Fatalf("empty lock file: ReadOwner = %+v, %v; want zero owner", o, err)
	}
	if _, err := ReadOwner(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: err = %v, want ErrNotExist", err)
	}
}

// TestLockSymlinkNeverFollowed: a lock path that is a symbolic link (to a
// file, or dangling) or a directory is refused; the link's target is
// neither written nor created, and ReadOwner does not read it.
func TestLockSymlinkNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(p string) error{
		"link to file":  func(p string) error { return os.Symlink(target, p) },
		"dangling link": func(p string) error { return os.Symlink(filepath.Join(dir, "created"), p) },
		"directory":     func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), ".prep.lock")
			if err := plant(p); err != nil {
				t.Fatal(err)
			}
			if l, err := Acquire(p); !errors.Is(err, ErrNotRegular) {
				l.Release()
				t.Fatalf("Acquire = %v, want ErrNotRegular", err)
			}
			if _, err := ReadOwner(p); !errors.Is(err, ErrNotRegular) {
				t.Fatalf("ReadOwner = %v, want ErrNotRegular", err)
			}
		})
	}
	if b, _ := os.ReadFile(target); string(b) != "keep me\n" {
		t.Fatalf("link target rewritten: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dangling link's target created: %v", err)
	}
}
