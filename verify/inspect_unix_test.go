//go:build unix

package verify_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prepml/prep/verify"
)

// TestInspectNamesAParquetFileOrAPipe pins two confusing answers of prep
// inspect: a Parquet file given by mistake was read as a damaged shard
// ("header at offset 0: bad magic: got 50 41 52 31 ..."), and a named pipe
// blocked the command. Both are refused with ErrUnknownKind saying what
// the path is.
func TestInspectNamesAParquetFileOrAPipe(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "data.parquet")
	if err := os.WriteFile(pq, []byte("PAR1\x15\x04\x15\x00PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := verify.Inspect(pq)
	if !errors.Is(err, verify.ErrUnknownKind) || !strings.Contains(err.Error(), "a Parquet file") {
		t.Errorf("Inspect(parquet) = %v, want ErrUnknownKind naming a Parquet file", err)
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := verify.Inspect(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, verify.ErrUnknownKind) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Inspect(fifo) = %v, want ErrUnknownKind naming a non-regular file", err)
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("Inspect blocked on a named pipe")
	}
}
