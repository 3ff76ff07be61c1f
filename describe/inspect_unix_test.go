//go:build unix

package describe_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/describe"
	"github.com/prepml/prep/internal/testutil"
)

// TestInspectNamesAParquetFileOrAPipe pins two confusing answers of prep
// inspect: a Parquet file was read as a damaged shard ("header at offset 0:
// bad magic: got 50 41 52 31 ..."), and a named pipe blocked the command.
// A Parquet file is now inspected as one (a damaged one fails naming its
// footer); a pipe is refused with ErrUnknownKind.
func TestInspectNamesAParquetFileOrAPipe(t *testing.T) {
	dir := t.TempDir()
	pq := filepath.Join(dir, "data.parquet")
	if err := os.WriteFile(pq, []byte("PAR1\x15\x04\x15\x00PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := describe.Inspect(pq)
	if err == nil || !strings.Contains(err.Error(), "data.parquet: corrupt parquet data: footer length") {
		t.Errorf("Inspect(damaged parquet) = %v, want the footer error", err)
	}
	fifo := filepath.Join(dir, "pipe")
	testutil.MakeFIFO(t, fifo)
	err = testutil.CallNotBlocked(t, fifo, "Inspect", func() error { _, err := describe.Inspect(fifo); return err })
	if !errors.Is(err, describe.ErrUnknownKind) || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Inspect(fifo) = %v, want ErrUnknownKind naming a non-regular file", err)
	}
}
