//go:build unix

package verify

import "golang.org/x/sys/unix"

// fileLimit returns the process's RLIMIT_NOFILE soft limit (Go raises it
// to the hard limit at start), or false when it cannot be read.
func fileLimit() (uint64, bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
