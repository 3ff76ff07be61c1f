//go:build unix

package shardfmt_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
)

// TestOpenRefusesFIFO pins a hang: a shard path that is a named pipe (a
// hostile or broken tree) made Open block forever in open(2) waiting for a
// writer, so prep export and prep inspect hung where prep load reported
// "not a regular file". Open must refuse any non-regular file without
// opening it.
func TestOpenRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rank-00000.shard")
	testutil.MakeFIFO(t, path)
	err := testutil.CallNotBlocked(t, path, "Open", func() error {
		r, err := shardfmt.Open(path)
		if err == nil {
			r.Close()
		}
		return err
	})
	if !errors.Is(err, shardfmt.ErrCorrupt) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Open(fifo) = %v, want ErrCorrupt naming a non-regular file", err)
	}
	// A directory is refused the same way.
	if _, err := shardfmt.Open(t.TempDir()); !errors.Is(err, shardfmt.ErrCorrupt) {
		t.Fatalf("Open(directory) = %v, want ErrCorrupt", err)
	}
}
