package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// staging is a run's stage-1 output when it fits the memory limit: the
// staging records (see records), sized exactly (slots x record bytes), in
// private anonymous memory outside the Go heap (huge-page aligned and
// advised). A run whose records do not fit spills them to disk instead
// (spill.go).
type staging struct {
	data []byte
	anon []byte // the whole anonymous mapping behind data
}

// anonStaging reports whether size bytes of staging go to anonymous memory
// under memoryLimit.
func anonStaging(size, memoryLimit int64) bool {
	return anonSupported && size > 0 && size <= memoryLimit
}

// newStaging returns size bytes of zeroed anonymous staging, or nil when the
// mapping fails (the run then spills).
func newStaging(size int64) *staging {
	data, whole, ok := mapAnon(size)
	if !ok {
		return nil
	}
	return &staging{data: data, anon: whole}
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
	return fmt.Errorf("reserving %d bytes for %s: %w", size, f.Name(), err)
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

// remove unmaps the staging.
func (s *staging) remove() {
	if s.anon != nil {
		unmapAnon(s.anon)
	}
	s.anon, s.data = nil, nil
}

// removeTemp deletes a run's temporary directory, then its parent (OUT/.prep-tmp)
// if now empty.
func removeTemp(dir string) {
	os.RemoveAll(dir)
	os.Remove(filepath.Dir(dir))
}
