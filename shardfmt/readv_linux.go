package shardfmt

import (
	"os"

	"golang.org/x/sys/unix"
)

// maxIovecs is IOV_MAX on Linux: the most buffers one preadv(2) takes.
const maxIovecs = 1024

// preadv fills bufs, in order, from consecutive bytes of f starting at off
// with as few preadv(2) calls as the kernel allows (one for a warm page
// cache), and returns the bytes read. A short count with a nil error means
// end of file.
func preadv(f *os.File, bufs [][]byte, off int64) (int, error) {
	fd := int(f.Fd())
	total := 0
	for len(bufs) > 0 {
		n, err := unix.Preadv(fd, bufs[:min(len(bufs), maxIovecs)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, nil
		}
		total += n
		off += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) {
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if n > 0 {
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
		}
	}
	return total, nil
}
