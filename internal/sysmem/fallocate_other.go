//go:build !linux

package sysmem

import (
	"os"

	"golang.org/x/sys/unix"
)

// fallocateFile reports EOPNOTSUPP where fallocate(2) does not exist, so
// Reserve writes zeros instead.
func fallocateFile(f *os.File, size int64) error {
	return os.NewSyscallError("fallocate", unix.EOPNOTSUPP)
}

// DropRange does nothing where fallocate(2) does not exist (the spill file's
// pages are freed with the file).
func DropRange(f *os.File, off, n int64) {}
