package pqread

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rssFileKiB returns the process's resident file-backed pages (RssFile in
// /proc/self/status), in KiB.
func rssFileKiB(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestDropMappedLeavesResidentSet pins that a decoded column chunk's
// mapped pages leave the process's resident set (a 64 MiB file read through
// its mapping is resident; after dropMapped over it, it is not) while the
// bytes stay readable through the mapping.
func TestDropMappedLeavesResidentSet(t *testing.T) {
	const size = 64 << 20
	path := filepath.Join(t.TempDir(), "f")
	data := bytes.Repeat([]byte{7}, size)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, ok := mapFile(f, size)
	if !ok {
		t.Skip("cannot map")
	}
	defer unmapFile(m)
	before := rssFileKiB(t)
	var sum int
	for i := 0; i < size; i += 4096 {
		sum += int(m[i])
	}
	touched := rssFileKiB(t)
	if touched-before < 60<<10 {
		t.Skipf("touching 64 MiB of the mapping raised RssFile by only %d KiB", touched-before)
	}
	dropMapped(m, 0, size)
	after := rssFileKiB(t)
	if touched-after < 60<<10 {
		t.Errorf("RssFile %d KiB before, %d after touching, %d after dropMapped: the pages stayed resident", before, touched, after)
	}
	if sum != 7*size/4096 || m[size-1] != 7 || m[12345] != 7 {
		t.Errorf("mapping reads differently after dropMapped")
	}
}
