//go:build unix

package shardfmt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenRefusesFIFO pins a hang: a shard path that is a named pipe (a
// hostile or broken tree) made Open block forever in open(2) waiting for a
// writer, so prep export and prep inspect hung where prep load reported
// "not a regular file". Open must refuse any non-regular file without
// opening it.
func TestOpenRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rank-00000.shard")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		r, err := Open(path)
		if err == nil {
			r.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Open(fifo) = %v, want ErrCorrupt naming a non-regular file", err)
		}
	case <-time.After(10 * time.Second):
		// Release the blocked open with a writer, then fail.
		if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Open blocked on a named pipe")
	}
	// A directory is refused the same way.
	if _, err := Open(t.TempDir()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open(directory) = %v, want ErrCorrupt", err)
	}
}
