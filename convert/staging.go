package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// staging is a run's stage-1 output: the staging records (see records),
// sized exactly (slots x record bytes), outside the Go heap. They live either
// in anonymous memory (newStaging, when they fit the memory limit; file is
// nil) or in a file mapped MAP_SHARED, so the data lives in the page cache
// (createStaging).
type staging struct {
	dir  string
	file *os.File // nil for anonymous staging
	data []byte
	anon []byte // the whole anonymous mapping behind data, nil for a file
}

// anonStaging reports whether newStaging tries anonymous memory for size
// bytes of staging under memoryLimit.
func anonStaging(size, memoryLimit int64) bool {
	return anonSupported && size > 0 && size <= memoryLimit
}

// newStaging returns size bytes of staging: anonymous memory (mapAnon:
// huge-page aligned and advised, no file, no page cache, no write system
// calls) when size <= memoryLimit and the mapping succeeds, otherwise the
// file-backed staging of createStaging under dir.
func newStaging(dir string, size, memoryLimit int64) (*staging, error) {
	if anonStaging(size, memoryLimit) {
		if data, whole, ok := mapAnon(size); ok {
			return &staging{data: data, anon: whole}, nil
		}
	}
	return createStaging(dir, size)
}

// StagingFileName is the staging file inside a run's temporary directory
// (OUT/.prep-tmp/<pid>/).
const StagingFileName = "staging.bin"

// createStaging creates dir and a mapped staging file of size bytes. A zero
// size gets an empty, unmapped buffer.
//
// Every block of the file is reserved before it is mapped (reserveSpace), so
// a file system that fills up during stage 1 can never turn a store into the
// mapping into SIGBUS: the run fails here instead, with an error wrapping
// ErrNoSpace that names the path, the bytes needed and the bytes free.
func createStaging(dir string, size int64) (*staging, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating staging: %w", err)
	}
	s := &staging{dir: dir}
	path := filepath.Join(dir, StagingFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("creating staging: %w", err)
	}
	s.file = f
	if size == 0 {
		return s, nil
	}
	if err := reserveSpace(f, size); err != nil {
		s.remove()
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("mapping staging file: %w", err)
	}
	s.data = m
	return s, nil
}

// zeroChunk is the write size of reserveSpace's fallback.
const zeroChunk = 1 << 20

// reserveSpace makes f exactly size bytes long with every block allocated on
// disk: fallocate(2) mode 0, or, where the file system does not support it
// (EOPNOTSUPP), writing zeros. ENOSPC (or EDQUOT) gives an error wrapping
// ErrNoSpace naming the path with the bytes needed and free.
func reserveSpace(f *os.File, size int64) error {
	err := fallocate(f, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = writeZeros(f, size)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		free, _ := freeBytes(filepath.Dir(f.Name()))
		return fmt.Errorf("%s: %w: need %d bytes for staging, %d free: %v", f.Name(), ErrNoSpace, size, free, err)
	}
	return fmt.Errorf("reserving %d bytes for staging file %s: %w", size, f.Name(), err)
}

// fallocate reserves [0, size) of f (fallocate_linux.go, fallocate_other.go).
// It is a variable so tests can stand in for a file system without
// fallocate support.
var fallocate = fallocateFile

// writeZeros writes size zero bytes at the start of f, so the file system
// allocates every block.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, min(size, zeroChunk))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// remove unmaps, closes and deletes everything.
func (s *staging) remove() {
	if s.anon != nil {
		unmapAnon(s.anon)
		s.anon, s.data = nil, nil
		return
	}
	if s.data != nil {
		syscall.Munmap(s.data)
		s.data = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	os.RemoveAll(s.dir)
	os.Remove(filepath.Dir(s.dir)) // the run's parent temp directory, if now empty
}
