//go:build unix

package pqread

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
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

// dropMapped tells the kernel this process is done with bytes [off, off+n)
// of a mapping made by mapFile, widened to whole pages (madvise
// MADV_DONTNEED): their page-table entries go, so they stop counting in the
// process's resident set, while the page cache keeps the data and a later
// access (a neighbouring column chunk sharing a page) faults it back in. A
// refusal is harmless and ignored.
func dropMapped(data []byte, off, n int64) {
	page := int64(os.Getpagesize())
	lo := off &^ (page - 1)
	hi := min(int64(len(data)), (off+n+page-1)&^(page-1))
	if lo < 0 || lo >= hi {
		return
	}
	unix.Madvise(data[lo:hi], unix.MADV_DONTNEED)
}
