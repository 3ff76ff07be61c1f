package sysmem

import (
	"os"

	"golang.org/x/sys/unix"
)

// fallocateFile allocates every block of [0, size) of f with fallocate(2)
// mode 0 (which also extends the file to size), retrying on EINTR.
func fallocateFile(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if err != unix.EINTR {
			if err != nil {
				return os.NewSyscallError("fallocate", err)
			}
			return nil
		}
	}
}

// DropRange discards [off, off+n) of f (fallocate PUNCH_HOLE, keeping the
// size): a spill window already read back, whose dirty pages then never
// need writing to disk. Failure is harmless and ignored (the pages are
// written back and freed with the file).
func DropRange(f *os.File, off, n int64) {
	if n > 0 {
		unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	}
}
