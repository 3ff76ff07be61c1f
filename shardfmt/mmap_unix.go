//go:build unix

package shardfmt

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps size bytes of f read-only and shared. The caller has already
// checked size against the file's length, so no access through the mapping
// can fault past the end of the file (short of the file being truncated
// afterwards by someone else).
func mmapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 || int64(int(size)) != size {
		return nil, errNoMmap
	}
	return unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
}

func munmap(b []byte) error { return unix.Munmap(b) }

// dontNeed tells the kernel the mapped range will not be needed soon; for a
// read-only shared file mapping the pages are dropped from this process and
// re-read from the page cache or disk on the next access.
func dontNeed(b []byte) error { return unix.Madvise(b, unix.MADV_DONTNEED) }
