//go:build !freebsd

package testutil

import "syscall"

// setSoftLimit sets l's soft limit.
func setSoftLimit(l *syscall.Rlimit, n uint64) { l.Cur = n }
