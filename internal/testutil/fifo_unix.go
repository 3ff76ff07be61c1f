//go:build unix

package testutil

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// MakeFIFO makes a named pipe at path, or skips t where the file system
// cannot hold one.
func MakeFIFO(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// CallNotBlocked runs f and returns its error, for a call given the named
// pipe fifo that must refuse it rather than open it. A call still running
// after 10 s is taken to be blocked in open(2) waiting for a writer: the
// pipe is opened for writing to release it, and t fails naming what.
func CallNotBlocked(t testing.TB, fifo, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second): // a hang, not a speed check
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatalf("%s blocked on a named pipe", what)
		return nil
	}
}
