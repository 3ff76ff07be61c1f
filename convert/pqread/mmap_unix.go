//go:build unix

package pqread

import (
	"os"
	"syscall"
)

// mapFile maps the first size bytes of fd read-only and shared (the page
// cache's pages, no copy). ok is false when it cannot (size 0 or beyond the
// address space, or mmap fails); the caller then reads with ReadAt.
func mapFile(fd *os.File, size int64) (data []byte, ok bool) {
	if size <= 0 || int64(int(size)) != size {
		return nil, false
	}
	m, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	return m, true
}

// unmapFile releases a mapping made by mapFile.
func unmapFile(data []byte) error { return syscall.Munmap(data) }
