package plan

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/prepml/prep/internal/atomicfile"
)

// Saving is a plan file being written while the plan's epoch digests are
// computed (NewMixtureContextSaving): everything else, the bulk of a
// large plan (a filtered source's selection), is in a temporary file on
// its way to the disk. Commit puts the file in place, Abort drops it.
type Saving struct {
	p     *Plan
	path  string
	parts [][]byte // the bytes begun, placeholder digests in them
	pend  *atomicfile.Pending
}

// placeholderDigest stands for an epoch digest not yet computed in the
// bytes Saving begins with: as long as a digest ("sha256:" and 64 hex
// digits), so the file's layout does not move when the digests come.
var placeholderDigest = "sha256:" + strings.Repeat("0", 64)

// NewMixtureContextSaving is NewMixtureContext that also begins saving the
// plan to path once all but its epoch digests is known: Save's bytes with
// placeholder digests are written to a temporary file beside path and
// synced to disk on another goroutine while the digests are computed, and
// Commit writes the digests in place and renames the file over path. The
// caller must Commit or Abort the Saving. Path errors are Save's, before
// any digest is computed; on any error nothing is left behind.
func NewMixtureContextSaving(ctx context.Context, src Source, cfg Config, mix *Mixture, progress func(epoch, steps, total int), path string) (*Plan, *Saving, error) {
	var sv *Saving
	p, err := newContextWith(ctx, src, cfg, nil, mix, progress, func(p *Plan) error {
		var err error
		sv, err = p.beginSave(path)
		return err
	})
	if err != nil {
		sv.Abort()
		return nil, nil, err
	}
	return p, sv, nil
}

// checkSavePath refuses what Save refuses: an empty path, one under /dev
// or /proc or a symbolic link into them (streamPath), and one that exists
// but is not a regular file.
func checkSavePath(path string) error {
	if path == "" {
		return &Error{Field: "output", Err: fmt.Errorf("empty plan file name: %w", ErrConfig)}
	}
	if streamPath(path) {
		return &Error{Path: path, Err: fmt.Errorf("names a device or a stream (under /dev or /proc), not a file: the plan is written to a temporary file beside it and renamed over it; give a file path: %w", ErrConfig)}
	}
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return &Error{Path: path, Err: fmt.Errorf("exists and is not a regular file (%s); the plan file must be a regular file: %w", fi.Mode().Type(), ErrConfig)}
	}
	return nil
}

// CheckOutput refuses, before any source is read, a plan file path that
// Save would refuse (checkSavePath) or could not write into: one whose
// directory does not exist or is not a directory. Errors wrap ErrConfig.
func CheckOutput(path string) error {
	if err := checkSavePath(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil && os.IsNotExist(err):
		return &Error{Path: path, Err: fmt.Errorf("directory %s does not exist: %w", dir, ErrConfig)}
	case err != nil:
		return &Error{Path: path, Err: fmt.Errorf("directory %s: %v: %w", dir, err, ErrConfig)}
	case !fi.IsDir():
		return &Error{Path: path, Err: fmt.Errorf("%s is not a directory: %w", dir, ErrConfig)}
	}
	return nil
}

// streamPath reports whether path, or the target of a symbolic link at
// path, is under /dev (but /dev/shm) or /proc: /dev/stdout,
// /proc/self/fd/1. Such a file, regular when a stream is redirected to
// one, cannot take the plan: the rename that puts it in place would
// replace the link itself (as root, the system's /dev/stdout) and leave
// the stream empty.
func streamPath(path string) bool {
	under := func(p string) bool {
		if p == "/dev/shm" || strings.HasPrefix(p, "/dev/shm/") {
			return false // a file system for files
		}
		for _, d := range []string{"/dev", "/proc"} {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if under(abs) {
		return true
	}
	t, err := os.Readlink(abs)
	if err != nil {
		return false
	}
	if !filepath.IsAbs(t) {
		t = filepath.Join(filepath.Dir(abs), t)
	}
	return under(filepath.Clean(t))
}

// beginSave writes p's file with placeholder epoch digests to a temporary
// file beside path (atomicfile.Begin).
func (p *Plan) beginSave(path string) (*Saving, error) {
	if err := checkSavePath(path); err != nil {
		return nil, err
	}
	p.Epochs = make([]EpochInfo, p.Config.Epochs)
	for e := range p.Epochs {
		p.Epochs[e] = EpochInfo{Epoch: e, Digest: placeholderDigest}
	}
	parts, err := fileParts(p)
	if err != nil {
		return nil, err
	}
	pend, err := atomicfile.Begin(path, parts, 0o644)
	if err != nil {
		return nil, fmt.Errorf("saving plan %s: %w", path, err)
	}
	return &Saving{p: p, path: path, parts: parts, pend: pend}, nil
}

// Commit writes the plan's bytes that differ from those begun (its epoch
// digests) in place and renames the file over the path (atomicfile),
// after which the file holds exactly Save's bytes. Errors name the path.
func (s *Saving) Commit() error {
	parts, err := fileParts(s.p)
	if err != nil {
		s.pend.Abort()
		return err
	}
	var patches []atomicfile.Patch
	same := len(parts) == len(s.parts)
	for i := 0; same && i < len(parts); i++ {
		same = len(parts[i]) == len(s.parts[i])
	}
	if !same { // the layout moved (it cannot, but never write a file that is not Save's)
		s.pend.Abort()
		return s.p.Save(s.path)
	}
	var off int64
	for i, b := range parts {
		if !bytes.Equal(b, s.parts[i]) {
			patches = append(patches, atomicfile.Patch{Off: off, Data: b})
		}
		off += int64(len(b))
	}
	if err := s.pend.Commit(patches); err != nil {
		return fmt.Errorf("saving plan %s: %w", s.path, err)
	}
	return nil
}

// Abort removes the temporary file; nothing changes at the path. It does
// nothing on a nil Saving, or after Commit or Abort.
func (s *Saving) Abort() {
	if s != nil {
		s.pend.Abort()
	}
}

// LeftoverTemps lists the files "<path>.tmp-*" beside path (the names a
// plan file being written has, atomicfile), sorted: what a run killed
// before renaming its file left, or what one still running writes. Nothing
// removes them, since a running plan's cannot be told from a dead one's.
func LeftoverTemps(path string) []string {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var left []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), base+atomicfile.TempSuffix) {
			left = append(left, filepath.Join(dir, e.Name()))
		}
	}
	return left
}
