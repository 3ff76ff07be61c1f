//go:build unix

package gc

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestTempBytesOfPunchedSpillFile: a convert killed while writing shards
// leaves a spill file whose windows already read back were punched out (its
// length stays, their blocks are gone). gc reports the bytes removing it
// frees, not its length.
func TestTempBytesOfPunchedSpillFile(t *testing.T) {
	dir := makeSet(t, 1, 1)
	spill := filepath.Join(dir, TempDirName, "4242", "spill.bin")
	if err := os.MkdirAll(filepath.Dir(spill), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(spill)
	if err != nil {
		t.Fatal(err)
	}
	// 4 KiB written at the start of a 4 MiB file: the rest is a hole.
	if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	fi, err := os.Stat(spill)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Blocks*512 >= fi.Size() {
		t.Skip("no sparse files here")
	}
	want := int64(st.Blocks) * 512
	res, err := Run(dir, Options{KeepFromEpoch: 0, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.TempBytes != want || res.FreedBytes != want {
		t.Fatalf("temp bytes %d, freed %d; want %d (the file's blocks, not its %d-byte length)", res.TempBytes, res.FreedBytes, want, fi.Size())
	}
}
