package dirlock

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A run that finds the lock held names the holder even when it looks in the
// moment between the holder's flock and its write of "pid host": the file
// is still empty (new lock) or still names a dead run (stale lock).
func TestHeldErrorNamesHolderWrittenJustAfterFlock(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	for name, before := range map[string]string{
		"new lock file":   "",
		"stale lock file": fmt.Sprintf("%d %s\n", dead.ProcessState.Pid(), host),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ".prep.lock")
			if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
				t.Fatal(err)
			}
			holder, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			written := make(chan error, 1)
			go func() {
				time.Sleep(30 * time.Millisecond)
				_, err := holder.WriteAt([]byte(fmt.Sprintf("%d holderhost\n", os.Getpid())), 0)
				written <- err
			}()
			_, err = Acquire(path)
			if werr := <-written; werr != nil {
				t.Fatal(werr)
			}
			var he *HeldError
			if !errors.As(err, &he) {
				t.Fatalf("Acquire: %v, want *HeldError", err)
			}
			if he.Holder.PID != os.Getpid() || he.Holder.Host != "holderhost" {
				t.Errorf("holder %v, want pid %d on host holderhost", he.Holder, os.Getpid())
			}
		})
	}
}

// The owner is replaced in one write and the file cut to its length, so
// a longer earlier owner leaves nothing behind.
func TestAcquireReplacesLongerStaleOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".prep.lock")
	if err := os.WriteFile(path, []byte("999999999 a-very-long-host-name-of-a-dead-run.example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if l.Stale == nil || l.Stale.PID != 999999999 {
		t.Errorf("stale owner %v", l.Stale)
	}
	b, _ := os.ReadFile(path)
	host, _ := os.Hostname()
	if want := fmt.Sprintf("%d %s\n", os.Getpid(), host); string(b) != want {
		t.Errorf("lock file %q, want %q", b, want)
	}
}
