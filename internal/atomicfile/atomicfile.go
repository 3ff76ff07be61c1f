// Package atomicfile writes whole files so that a reader, or a crash, sees
// either the old contents or all of the new ones: a temporary file in the
// same directory, fsync, rename over the final name, fsync of the directory.
//
// WriteFile works on a path; WriteFileIn works on a name inside an os.Root,
// so a symbolic link planted inside that directory can never redirect the
// write out of it.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotDurable is wrapped by the errors of WriteFile and WriteFileIn when
// the rename succeeded but the fsync of the directory failed: the new
// contents are in place (and the old ones gone) but may not survive a
// crash. A caller that undoes its writes on error must treat the file as
// written.
var ErrNotDurable = errors.New("renamed, but the directory fsync failed")

// SyncDirHook, when not nil, replaces the directory fsync of this package
// (and of the shard writer, which uses SyncDir). It exists for tests that
// inject a failing fsync; production code never sets it.
var SyncDirHook func(dir string) error

// SyncDir fsyncs the directory dir so that a rename in it is durable.
func SyncDir(dir string) error {
	if SyncDirHook != nil {
		return SyncDirHook(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDirIn fsyncs the directory name inside root ("." for root itself),
// opened without following a symbolic link out of root.
func SyncDirIn(root *os.Root, name string) error {
	if SyncDirHook != nil {
		return SyncDirHook(filepath.Join(root.Name(), name))
	}
	d, err := root.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// TempSuffix is the infix of the temporary names this package creates:
// "<name>.tmp-<random>" beside the final name.
const TempSuffix = ".tmp-"

// WriteFile writes data to path with mode perm so that path holds either its
// old contents or all of data, even across a crash: it writes
// "<path>.tmp-<random>" in the same directory, fsyncs it, renames it over
// path and fsyncs the directory. On an error before the rename nothing
// changes and the temporary file is removed; an error of the final
// directory fsync wraps ErrNotDurable.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFileParts(path, [][]byte{data}, perm)
}

// WriteFileParts is WriteFile of the concatenation of parts, written
// piece by piece (no joined copy of a large file's bytes is made).
func WriteFileParts(path string, parts [][]byte, perm os.FileMode) error {
	p, err := Begin(path, parts, perm)
	if err != nil {
		return err
	}
	return p.Commit(nil)
}

// WriteFileIn is WriteFile for the slash-separated name inside root: the
// temporary file is created exclusively (O_EXCL, so never through an
// existing symbolic link) and every step resolves names through root, so
// nothing outside root's directory is written, renamed or removed. The
// rename replaces a symbolic link at name itself, never its target.
func WriteFileIn(root *os.Root, name string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(filepath.FromSlash(name))
	if dir == "" {
		dir = "."
	}
	var f *os.File
	var tmp string
	for range 10000 {
		var rnd [8]byte
		rand.Read(rnd[:])
		tmp = filepath.Join(dir, base+TempSuffix+hex.EncodeToString(rnd[:]))
		var err error
		f, err = root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	if f == nil {
		return fmt.Errorf("creating a temporary file for %s: too many name clashes", name)
	}
	if err := fill(f, [][]byte{data}, perm); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, filepath.FromSlash(name)); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := SyncDirIn(root, dir); err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	return nil
}

// fill writes parts to f in order, sets perm, fsyncs and closes it (closing it on
// error too).
func fill(f *os.File, parts [][]byte, perm os.FileMode) error {
	err := writeParts(f, parts, perm)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeParts writes parts to f in order and sets perm.
func writeParts(f *os.File, parts [][]byte, perm os.FileMode) error {
	for _, data := range parts {
		if _, err := f.Write(data); err != nil {
			return err
		}
	}
	return f.Chmod(perm)
}

// Pending is a file written by Begin and not yet in place: its bytes are
// in a temporary file beside the final name, on their way to the disk.
// Commit puts it in place, Abort removes it; one of the two must be called.
type Pending struct {
	f         *os.File
	tmp, path string
	synced    chan error // the first fsync's result
	done      bool
}

// Patch is bytes to write over a Pending file's bytes at Off (bytes from
// the file's start), within its length.
type Patch struct {
	Off  int64
	Data []byte
}

// Begin writes the concatenation of parts to "<path>.tmp-<random>" beside
// path with mode perm and starts its fsync on another goroutine, so that
// the disk takes the bulk of a file while the caller computes what is
// left of it (patched in by Commit). Nothing changes at path until Commit.
// On an error the temporary file is removed.
func Begin(path string, parts [][]byte, perm os.FileMode) (*Pending, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, base+TempSuffix+"*")
	if err != nil {
		return nil, err
	}
	p := &Pending{f: f, tmp: f.Name(), path: path, synced: make(chan error, 1)}
	if err := writeParts(f, parts, perm); err != nil {
		f.Close()
		os.Remove(p.tmp)
		return nil, err
	}
	go func() { p.synced <- f.Sync() }()
	return p, nil
}

// Commit writes patches over the file's bytes, waits for the fsync Begin
// started, fsyncs again when there were patches (only their pages are
// left to write), renames the file over the final name and fsyncs the
// directory: the file is then as durable as WriteFile makes it. On an
// error before the rename nothing changes at the final name and the
// temporary file is removed; an error of the directory fsync wraps
// ErrNotDurable.
func (p *Pending) Commit(patches []Patch) error {
	if p.done {
		return errors.New("atomicfile: Commit of a file already committed or aborted")
	}
	p.done = true
	err := <-p.synced
	for _, pt := range patches {
		if err != nil {
			break
		}
		_, err = p.f.WriteAt(pt.Data, pt.Off)
	}
	if err == nil && len(patches) > 0 {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(p.tmp, p.path)
	}
	if err != nil {
		os.Remove(p.tmp)
		return err
	}
	dir := filepath.Dir(p.path)
	if err := SyncDir(dir); err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	return nil
}

// Abort removes the temporary file once its fsync has returned; nothing
// changes at the final name. It does nothing after Commit or Abort.
func (p *Pending) Abort() {
	if p == nil || p.done {
		return
	}
	p.done = true
	<-p.synced
	p.f.Close()
	os.Remove(p.tmp)
}
