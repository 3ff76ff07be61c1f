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
