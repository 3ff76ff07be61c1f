//go:build !linux

package shardfmt

import (
	"io"
	"os"
)

// preadv fills bufs, in order, from consecutive bytes of f starting at off,
// one ReadAt per buffer, and returns the bytes read. A short count with a nil
// error means end of file.
func preadv(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.ReadAt(b, off)
		total += n
		off += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
