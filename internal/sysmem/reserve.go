package sysmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNoSpace is returned when the output file system has less free space
// than a run needs (feature.ErrNoSpace is this error).
var ErrNoSpace = errors.New("not enough free disk space")

// zeroChunk is the write size of Reserve's fallback.
const zeroChunk = 1 << 20

// Reserve makes f exactly size bytes long with every block allocated on
// disk: fallocate(2) mode 0, or, where the file system does not support it
// (EOPNOTSUPP), writing zeros. ENOSPC (or EDQUOT) gives an error wrapping
// ErrNoSpace naming the path with the bytes needed and free.
func Reserve(f *os.File, size int64) error {
	err := Fallocate(f, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = writeZeros(f, size)
	}
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		free, _ := FreeBytes(filepath.Dir(f.Name()))
		return fmt.Errorf("%s: %w: need %d bytes for staging, %d free: %v", f.Name(), ErrNoSpace, size, free, err)
	}
	return fmt.Errorf("reserving %d bytes for %s: %w", size, f.Name(), err)
}

// Fallocate reserves [0, size) of f (fallocate_linux.go,
// fallocate_other.go). It is a variable so tests can stand in for a file
// system without fallocate support.
var Fallocate = fallocateFile

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

// AnonFits reports whether size bytes of staging go to anonymous memory
// under limit: a platform with MapAnon, and 0 < size <= limit.
func AnonFits(size, limit int64) bool {
	return AnonSupported && size > 0 && size <= limit
}

// RemoveTemp deletes a run's temporary directory, then its parent
// (OUT/.prep-tmp) if now empty.
func RemoveTemp(dir string) {
	os.RemoveAll(dir)
	os.Remove(filepath.Dir(dir))
}

// FreeBytes returns the bytes available to unprivileged users on the file
// system holding dir; false when statfs(2) fails.
func FreeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
