//go:build !unix

package gc

import "io/fs"

// diskBytes returns fi's size (block counts are not available here).
func diskBytes(fi fs.FileInfo) int64 { return fi.Size() }
