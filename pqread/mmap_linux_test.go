package pqread

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/uncompressed"
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

// TestDecodedColumnsOutliveMapping pins that no decoded column aliases the
// file's mapping, whose pages ReadColumn drops once a chunk is decoded:
// every column of an uncompressed file (plain, dictionary and delta
// encodings, read both ways) is compared, after the file is truncated to
// nothing, with the same columns read from an intact copy. A value still
// pointing into the mapping would crash the test with SIGBUS.
func TestDecodedColumnsOutliveMapping(t *testing.T) {
	rows := makeRows(600)
	path := writeParquet(t, rows, parquet.Compression(&uncompressed.Codec{}), parquet.PageBufferSize(512), parquet.MaxRowsPerRowGroup(250))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	intact := filepath.Join(t.TempDir(), "intact.parquet")
	if err := os.WriteFile(intact, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f := mustOpen(t, path)
	type entry struct {
		what string
		c    *Column
	}
	var got []entry
	for rg := range f.RowGroups() {
		for _, ci := range f.Columns() {
			for _, dict := range []bool{false, true} {
				read := f.ReadColumn
				if dict {
					read = f.ReadColumnDict
				}
				c, err := read(rg, ci)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, entry{fmt.Sprintf("row group %d column %s dict %v", rg, ci.Name, dict), c})
			}
		}
	}
	if f.data == nil {
		t.Skip("file not mapped")
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	g := mustOpen(t, intact)
	i := 0
	for rg := range g.RowGroups() {
		for _, ci := range g.Columns() {
			for _, dict := range []bool{false, true} {
				read := g.ReadColumn
				if dict {
					read = g.ReadColumnDict
				}
				want, err := read(rg, ci)
				if err != nil {
					t.Fatal(err)
				}
				c := got[i].c
				sameColumn(t, got[i].what, c, want)
				if !slices.Equal(c.DictIndex, want.DictIndex) || !bytes.Equal(c.DictData, want.DictData) || !slices.Equal(c.DictOffsets, want.DictOffsets) {
					t.Errorf("%s: dictionary form differs", got[i].what)
				}
				i++
			}
		}
	}
}
