package convert

import (
	"os"
	"testing"
)

// TestMain runs the tests and removes the source the memory-bound tests
// share (longRowsFixture).
func TestMain(m *testing.M) {
	code := m.Run()
	if longRowsDir != "" {
		os.RemoveAll(longRowsDir)
	}
	os.Exit(code)
}
