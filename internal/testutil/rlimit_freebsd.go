package testutil

import "syscall"

// setSoftLimit sets l's soft limit (int64 on FreeBSD).
func setSoftLimit(l *syscall.Rlimit, n uint64) { l.Cur = int64(n) }
