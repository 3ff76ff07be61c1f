package source

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// MaxOpenFiles bounds the descriptors local Objects hold at once, over all
// Local stores of the process. An idle Object's descriptor is closed when
// another needs one (least recently used first) and reopened on its next
// read, with its identity checked again, so thousands of source files work
// under a low descriptor limit (ulimit -n 256).
const MaxOpenFiles = 64

// Local is the Store of the files under a local directory.
type Local struct {
	root string // absolute
}

// NewLocal returns the Store of the files under the directory root (made
// absolute; symlinks are not resolved).
func NewLocal(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("source root %s: %w", root, err)
	}
	return &Local{root: abs}, nil
}

// String returns the absolute root directory.
func (s *Local) String() string { return s.root }

// Path returns the local path of the named file ('/'-separated, relative
// to the root).
func (s *Local) Path(name string) string { return filepath.Join(s.root, filepath.FromSlash(name)) }

// SameFile reports whether the named files are one file on disk
// (os.SameFile: same device and inode; hard or symbolic links). A file
// that cannot be stat'ed is the same as no other.
func (s *Local) SameFile(a, b string) bool {
	sa, err := os.Stat(s.Path(a))
	if err != nil {
		return false
	}
	sb, err := os.Stat(s.Path(b))
	return err == nil && os.SameFile(sa, sb)
}

// Open stats the named file and returns it as an Object pinned to its size
// and modification time. A name that is absolute or leaves the root is
// refused. A missing file is an error wrapping fs.ErrNotExist; a file that
// cannot be opened (permission denied) is that error, inside an *Error.
func (s *Local) Open(ctx context.Context, name string) (Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if name == "" || path.IsAbs(name) || strings.HasPrefix(path.Clean(name), "../") || path.Clean(name) == ".." {
		return nil, &Error{File: name, Err: fmt.Errorf("path is not inside the source root %s", s.root)}
	}
	p := s.Path(name)
	f, err := os.Open(p)
	if err != nil {
		return nil, &Error{File: name, Err: unwrapPath(err)}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, &Error{File: name, Err: unwrapPath(err)}
	}
	if !st.Mode().IsRegular() {
		return nil, &Error{File: name, Err: fmt.Errorf("not a regular file")}
	}
	return &localObject{path: p, name: name, size: st.Size(), mtime: st.ModTime()}, nil
}

// unwrapPath drops the *fs.PathError around an error (its path is
// absolute; the caller names the file relative to the root) but keeps the
// operation: "open: permission denied".
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// localObject is a local file pinned to the size and modification time it
// had when opened. Its descriptor comes from the process-wide pool.
type localObject struct {
	path  string
	name  string
	size  int64
	mtime time.Time

	// guarded by pool.mu
	fd     *os.File
	users  int
	elem   *list.Element // in pool.idle while fd != nil && users == 0
	closed bool
}

func (o *localObject) Name() string { return o.name }
func (o *localObject) Size() int64  { return o.size }

// Identity returns "mtime=<unix ns> size=<bytes>".
func (o *localObject) Identity() string { return identity(o.mtime, o.size) }

func identity(mtime time.Time, size int64) string {
	return fmt.Sprintf("mtime=%d size=%d", mtime.UnixNano(), size)
}

// ReadAt reads from the file, then checks that its size and modification
// time are still those seen at Open: a file changed or truncated under the
// reader is a *ChangedError (What "identity"), never bytes of two versions.
func (o *localObject) ReadAt(p []byte, off int64) (int, error) {
	fd, err := pool.acquire(o)
	if err != nil {
		return 0, err
	}
	defer pool.release(o)
	n, rerr := fd.ReadAt(p, off)
	if err := o.check(fd); err != nil {
		return 0, err
	}
	if rerr != nil && !(rerr == io.EOF && n == len(p)) {
		if off+int64(len(p)) > o.size {
			return n, io.EOF // a read past the end the object was opened with
		}
		return n, &Error{File: o.name, Err: unwrapPath(rerr)}
	}
	return n, nil
}

// check compares the open file's size and modification time with those
// seen at Open.
func (o *localObject) check(fd *os.File) error {
	st, err := fd.Stat()
	if err != nil {
		return &Error{File: o.name, Err: unwrapPath(err)}
	}
	if st.Size() != o.size || !st.ModTime().Equal(o.mtime) {
		return &ChangedError{File: o.name, What: "identity", Expected: o.Identity(), Actual: identity(st.ModTime(), st.Size())}
	}
	return nil
}

// Close releases the descriptor, if one is held. It is safe to call twice.
func (o *localObject) Close() error {
	pool.close(o)
	return nil
}

// fdPool hands out descriptors of local objects, keeping at most max open
// when objects are idle.
type fdPool struct {
	mu   sync.Mutex
	max  int
	open int
	idle list.List // *localObject, least recently used first
}

var pool = &fdPool{max: MaxOpenFiles}

// acquire returns o's descriptor, opening it (and checking o's identity)
// if it has none; release must follow.
func (p *fdPool) acquire(o *localObject) (*os.File, error) {
	p.mu.Lock()
	if o.closed {
		p.mu.Unlock()
		return nil, &Error{File: o.name, Err: fs.ErrClosed}
	}
	if o.fd != nil {
		o.users++
		if o.elem != nil {
			p.idle.Remove(o.elem)
			o.elem = nil
		}
		p.mu.Unlock()
		return o.fd, nil
	}
	for p.open >= p.max && p.idle.Len() > 0 {
		v := p.idle.Remove(p.idle.Front()).(*localObject)
		v.elem = nil
		v.fd.Close()
		v.fd = nil
		p.open--
	}
	p.open++ // reserved
	p.mu.Unlock()
	fd, err := os.Open(o.path)
	if err == nil {
		if err = o.check(fd); err != nil {
			fd.Close()
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		err = &ChangedError{File: o.name, What: "identity", Expected: o.Identity(), Actual: "missing"}
	} else {
		err = &Error{File: o.name, Err: unwrapPath(err)}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.open--
		return nil, err
	}
	if o.fd != nil { // opened meanwhile by another reader
		fd.Close()
		p.open--
	} else {
		o.fd = fd
	}
	o.users++
	return o.fd, nil
}

func (p *fdPool) release(o *localObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if o.users--; o.users > 0 || o.fd == nil {
		return
	}
	if o.closed {
		o.fd.Close()
		o.fd = nil
		p.open--
		return
	}
	o.elem = p.idle.PushBack(o)
}

func (p *fdPool) close(o *localObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o.closed = true
	if o.users == 0 && o.fd != nil {
		if o.elem != nil {
			p.idle.Remove(o.elem)
			o.elem = nil
		}
		o.fd.Close()
		o.fd = nil
		p.open--
	}
}
