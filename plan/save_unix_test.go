//go:build unix

package plan

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSaveRefusesNonRegularTarget pins the fault where `prep plan -o
// /dev/full` (run as root) renamed the plan over the device node, replacing
// /dev/full with a regular file: Save refuses a target that exists and is
// not a regular file, and an empty name, and leaves the target as it was.
func TestSaveRefusesNonRegularTarget(t *testing.T) {
	p := mustNew(t, synthSource([]int64{10}), Config{Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: ShuffleNone, Remainder: RemainderDrop})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(fifo, link); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{fifo, link, sub} {
		err := p.Save(target)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), target+": exists and is not a regular file") {
			t.Errorf("Save(%s) = %v; want ErrConfig naming it", target, err)
		}
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode().Type() != fs.ModeNamedPipe {
		t.Errorf("FIFO after refused Save: %v, %v", fi, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("symlink after refused Save: %v, %v", fi, err)
	}
	if err := p.Save(""); !errors.Is(err, ErrConfig) {
		t.Errorf("Save(\"\") = %v; want ErrConfig", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("directory holds %d entries after refused saves, want 3 (no temporary files)", len(ents))
	}
	// A regular file and a symlink to one are still replaced.
	reg := filepath.Join(dir, "plan.json")
	os.WriteFile(reg, []byte("old"), 0o644)
	if err := p.Save(reg); err != nil {
		t.Fatal(err)
	}
	if q, err := Load(reg); err != nil || q.Fingerprint != p.Fingerprint {
		t.Errorf("Load after Save = %v, %v", q, err)
	}
	// Mode 0644, as convert writes its copy of the plan (not CreateTemp's 0600).
	if fi, err := os.Stat(reg); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o644 {
		t.Errorf("saved plan file has mode %v, want 0644", fi.Mode().Perm())
	}
}
