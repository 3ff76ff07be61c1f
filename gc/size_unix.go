//go:build unix

package gc

import (
	"io/fs"
	"syscall"
)

// diskBytes returns the bytes fi's file frees when removed: its size, or
// less when the file is sparse (a spill file whose windows were punched out
// once read back keeps its length but not their blocks).
func diskBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks >= 0 {
		return min(fi.Size(), int64(st.Blocks)*512)
	}
	return fi.Size()
}
