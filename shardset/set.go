package shardset

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/prepml/prep/internal/atomicfile"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// Sentinel errors. Errors of this package wrap them (test with errors.Is).
var (
	// ErrNotSet is returned by Open and OpenDir when the directory does not
	// exist or is not a directory.
	ErrNotSet = errors.New("not a shard set directory")
	// ErrNoShard is returned by Set.Shard when the manifest lists no shard
	// for the (epoch, rank), or the listed file does not exist.
	ErrNoShard = errors.New("no shard for this epoch and rank")
	// ErrUnsafe is returned when a name inside the set, or a directory on
	// the way to it, is a symbolic link, or the name is not a regular file
	// where one is expected (a directory, a FIFO, a device). Such a name is
	// never followed or opened: it could point outside the set.
	ErrUnsafe = errors.New("unsafe name in a shard set")
	// ErrDamaged is returned by Set.Shard when the shard file's size differs
	// from the size the manifest records (a truncated or overwritten shard).
	ErrDamaged = errors.New("shard file damaged")
	// ErrMismatch is returned by Set.Shard when the shard's own record (its
	// epoch and rank, plan fingerprint, batch count or tensor table)
	// disagrees with its manifest entry: a renamed or swapped file.
	ErrMismatch = errors.New("shard does not match the manifest")
)

// Set is an open shard-set directory. Its methods resolve every name
// through an os.Root of the directory and refuse symbolic links inside it
// (ErrUnsafe), so nothing outside the directory is read, written or
// removed through a set. Once its manifest is read, methods are safe for
// concurrent use, except Close and the ReadManifest methods (which replace
// the manifest the others look at).
type Set struct {
	dir  string
	root *os.Root
	man  *shardfmt.Manifest
}

// OpenDir opens the directory dir (which may itself be reached through a
// symbolic link) without reading anything in it; the manifest is read by
// ReadManifest or ReadManifestUnchecked. A missing path or one that is not
// a directory wraps ErrNotSet.
func OpenDir(dir string) (*Set, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNotSet, dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNotSet, dir, err)
	}
	return &Set{dir: dir, root: root}, nil
}

// Open opens the shard set in dir and reads its manifest with ReadManifest:
// errors wrap ErrNotSet, fs.ErrNotExist (no manifest), shardfmt.ErrManifest
// (a shard list naming files outside the set) or ErrUnsafe (manifest.json is
// a symbolic link).
func Open(dir string) (*Set, error) {
	s, err := OpenDir(dir)
	if err != nil {
		return nil, err
	}
	if _, err := s.ReadManifest(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the set's directory.
func (s *Set) Close() error { return s.root.Close() }

// Dir returns the directory the set was opened with.
func (s *Set) Dir() string { return s.dir }

// Root returns the os.Root of the set's directory; names resolved through it
// cannot leave the directory (but may follow a link inside it: use the
// Set's methods to refuse links altogether).
func (s *Set) Root() *os.Root { return s.root }

// Path returns the set's directory joined with the slash-separated name, for
// messages.
func (s *Set) Path(name string) string { return filepath.Join(s.dir, filepath.FromSlash(name)) }

// Manifest returns the manifest last read by ReadManifest or
// ReadManifestUnchecked, nil before.
func (s *Set) Manifest() *shardfmt.Manifest { return s.man }

// ReadManifest reads manifest.json, refusing a symbolic link (ErrUnsafe),
// and checks it with shardfmt.Manifest.Check, so each entry's path names a
// file inside the set. A missing file wraps fs.ErrNotExist.
func (s *Set) ReadManifest() (*shardfmt.Manifest, error) {
	b, err := s.ReadFile(ManifestName)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	m, err := shardfmt.ParseManifest(b, s.dir)
	if err != nil {
		return nil, err
	}
	s.man = m
	return m, nil
}

// ReadManifestUnchecked is ReadManifest without Manifest.Check, for a
// checker that reports each problem of the shard list itself (verify). The
// entries' paths are untrusted: open them only through Set methods.
func (s *Set) ReadManifestUnchecked() (*shardfmt.Manifest, error) {
	b, err := s.ReadFile(ManifestName)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	m, err := shardfmt.ParseManifestUnchecked(b, s.Path(ManifestName))
	if err != nil {
		return nil, err
	}
	s.man = m
	return m, nil
}

// WriteManifest writes m as manifest.json atomically (shardfmt's encoding)
// through the set's root: the rename replaces a symbolic link at the name,
// never its target. An error of the final directory fsync wraps
// shardfmt.ErrNotDurable (the new manifest is in place).
func (s *Set) WriteManifest(m *shardfmt.Manifest) error {
	b, err := m.Encode()
	if err != nil {
		return err
	}
	return s.WriteFile(ManifestName, b)
}

// PlanBytes returns the bytes of the set's plan copy (PlanName), refusing a
// symbolic link (ErrUnsafe); a missing file wraps fs.ErrNotExist.
func (s *Set) PlanBytes() ([]byte, error) { return s.ReadFile(PlanName) }

// Plan reads and parses the set's plan copy as plan.Load does (PlanBytes,
// then plan.Parse); errors are a *plan.Error naming the copy's path, wrapping
// the cause (fs.ErrNotExist, ErrUnsafe, plan.ErrFormat, ...).
func (s *Set) Plan() (*plan.Plan, error) {
	path := s.Path(PlanName)
	b, err := s.PlanBytes()
	if err != nil {
		return nil, &plan.Error{Path: path, Err: err}
	}
	p, err := plan.Parse(b)
	if err != nil {
		var pe *plan.Error
		if errors.As(err, &pe) && pe.Path == "" {
			pe.Path = path
			return nil, pe
		}
		return nil, &plan.Error{Path: path, Err: err}
	}
	return p, nil
}

// CheckName returns the Lstat of the slash-separated name inside the set
// after checking that neither it nor any directory on the way to it is a
// symbolic link; a link wraps ErrUnsafe, a name that is not local (absolute,
// "..") wraps ErrUnsafe too. Other errors are the OS's (fs.ErrNotExist).
func (s *Set) CheckName(name string) (fs.FileInfo, error) {
	if !filepath.IsLocal(filepath.FromSlash(name)) || strings.Contains(name, "\\") {
		return nil, fmt.Errorf("%s: the name leaves the set: %w", s.Path(name), ErrUnsafe)
	}
	parts := strings.Split(filepath.ToSlash(filepath.Clean(filepath.FromSlash(name))), "/")
	var fi fs.FileInfo
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		var err error
		if fi, err = s.root.Lstat(filepath.FromSlash(p)); err != nil {
			return nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: a symbolic link (never followed): %w", s.Path(p), ErrUnsafe)
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return nil, &fs.PathError{Op: "open", Path: s.Path(p), Err: syscall.ENOTDIR}
		}
	}
	return fi, nil
}

// OpenFile opens the regular file name (slash-separated) inside the set for
// reading, after CheckName. A file that is not regular wraps ErrUnsafe and
// is not opened (so a FIFO cannot block); a file replaced between the
// check and the open is refused (ErrUnsafe).
func (s *Set) OpenFile(name string) (*os.File, error) {
	fi, err := s.CheckName(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): %w", s.Path(name), fi.Mode().Type(), ErrUnsafe)
	}
	f, err := s.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !os.SameFile(fi, st) {
		f.Close()
		return nil, fmt.Errorf("%s: replaced while being opened: %w", s.Path(name), ErrUnsafe)
	}
	return f, nil
}

// ReadFile returns the contents of the regular file name inside the set
// (OpenFile's checks).
func (s *Set) ReadFile(name string) ([]byte, error) {
	f, err := s.OpenFile(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Remove removes name (a file, a symbolic link itself, or an empty
// directory) inside the set after checking that no directory on the way to
// it is a symbolic link (ErrUnsafe): a link is removed, never what it
// points to. A missing name wraps fs.ErrNotExist.
func (s *Set) Remove(name string) error {
	if err := s.checkParents(name); err != nil {
		return err
	}
	return s.root.Remove(filepath.FromSlash(name))
}

// RemoveAll removes name and everything under it inside the set, never
// following a symbolic link (a link is removed itself); a missing name is
// not an error.
func (s *Set) RemoveAll(name string) error {
	if err := s.checkParents(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return s.root.RemoveAll(filepath.FromSlash(name))
}

// checkParents runs CheckName on the directory holding name, if any.
func (s *Set) checkParents(name string) error {
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("%s: the name leaves the set: %w", s.Path(name), ErrUnsafe)
	}
	if d := filepath.ToSlash(filepath.Dir(filepath.FromSlash(name))); d != "." {
		_, err := s.CheckName(d)
		return err
	}
	return nil
}

// Entry returns the manifest entry of (epoch, rank) and whether there is
// one (false before a manifest is read).
func (s *Set) Entry(epoch, rank int) (shardfmt.ShardEntry, bool) {
	if s.man == nil {
		return shardfmt.ShardEntry{}, false
	}
	for _, e := range s.man.Shards {
		if e.Epoch == epoch && e.Rank == rank {
			return e, true
		}
	}
	return shardfmt.ShardEntry{}, false
}

// Shard opens the shard of (epoch, rank) listed in the manifest and checks
// it against its entry before handing it out: the file must be a regular
// file reached without a symbolic link (ErrUnsafe), its size must equal the
// manifest's before it is mapped (ErrDamaged, naming both sizes), and its
// header must hold this epoch and rank, the manifest's plan fingerprint,
// batch count and tensor table (ErrMismatch; a different plan or (epoch,
// rank) wraps shardfmt.ErrProvenance too). A pair the manifest does not
// list, or a listed file that is missing, wraps ErrNoShard. With mmap false
// the reader never maps the file (see shardfmt.OpenFile). Errors other than
// ErrNoShard name the shard's path.
func (s *Set) Shard(epoch, rank int, mmap bool) (*shardfmt.Reader, shardfmt.ShardEntry, error) {
	ent, ok := s.Entry(epoch, rank)
	if !ok {
		return nil, ent, fmt.Errorf("%w: epoch %d rank %d not in %s", ErrNoShard, epoch, rank, ManifestName)
	}
	path := s.Path(ent.Path)
	f, err := s.OpenFile(ent.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ent, fmt.Errorf("%w: %w", ErrNoShard, err)
	}
	if err != nil {
		return nil, ent, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, ent, err
	}
	if st.Size() != ent.Size {
		f.Close()
		return nil, ent, fmt.Errorf("%w: %s: expected size %d bytes (manifest), actual size %d", ErrDamaged, path, ent.Size, st.Size())
	}
	r, err := shardfmt.OpenFile(f, path, mmap)
	if err != nil {
		return nil, ent, err
	}
	if err := s.matches(r, ent); err != nil {
		r.Close()
		return nil, ent, fmt.Errorf("%w: %s: %w", ErrMismatch, path, err)
	}
	return r, ent, nil
}

// matches compares a shard's own record with its manifest entry; a
// different plan or (epoch, rank) wraps shardfmt.ErrProvenance.
func (s *Set) matches(r *shardfmt.Reader, ent shardfmt.ShardEntry) error {
	p, m := r.Provenance(), s.man
	switch {
	case p.PlanFingerprint != m.PlanFingerprint:
		return fmt.Errorf("%w: shard plan fingerprint %s, manifest %s", shardfmt.ErrProvenance, p.PlanFingerprint, m.PlanFingerprint)
	case int(p.Epoch) != ent.Epoch || int(p.Rank) != ent.Rank:
		return fmt.Errorf("%w: shard is epoch %d rank %d", shardfmt.ErrProvenance, p.Epoch, p.Rank)
	case r.NumBatches() != ent.Batches:
		return fmt.Errorf("shard has %d batches, manifest %d", r.NumBatches(), ent.Batches)
	case len(m.Tensors) > 0 && !shardfmt.SameTensors(r.Tensors(), m.Tensors):
		return errors.New("shard tensor table differs from the manifest's")
	}
	return nil
}

// WriteFile writes data to the slash-separated name inside the set
// atomically (mode 0644), through the set's root (see atomicfile); an error
// of the final directory fsync wraps shardfmt.ErrNotDurable.
func (s *Set) WriteFile(name string, data []byte) error {
	if err := s.checkParents(name); err != nil {
		return err
	}
	return writeFileIn(s.root, name, data)
}

// writeFileIn is atomicfile.WriteFileIn with mode 0644.
func writeFileIn(root *os.Root, name string, data []byte) error {
	return atomicfile.WriteFileIn(root, name, data, 0o644)
}
