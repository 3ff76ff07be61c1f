//go:build !unix

package pqread

import "os"

// mapFile is unavailable here: column chunks are read with ReadAt.
func mapFile(fd *os.File, size int64) (data []byte, ok bool) { return nil, false }

// unmapFile is never called where mapFile fails.
func unmapFile(data []byte) error { return nil }

// dropMapped is never called where mapFile fails.
func dropMapped(data []byte, off, n int64) {}
