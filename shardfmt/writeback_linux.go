package shardfmt

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writing [off, off+n) of f to disk without waiting
// (sync_file_range(2) with SYNC_FILE_RANGE_WRITE). It guarantees nothing
// about durability (Commit's fsync does) and its errors are ignored: fsync
// reports any I/O error.
func startWriteback(f *os.File, off, n uint64) {
	unix.SyncFileRange(int(f.Fd()), int64(off), int64(n), unix.SYNC_FILE_RANGE_WRITE)
}
