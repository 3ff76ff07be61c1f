//go:build !linux

package shardfmt

import "os"

// startWriteback does nothing where sync_file_range(2) does not exist;
// Commit's fsync writes everything.
func startWriteback(f *os.File, off, n uint64) {}
