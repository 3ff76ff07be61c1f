package convert

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
