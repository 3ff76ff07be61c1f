//go:build !linux

package gpuload

import (
	"errors"
	"io"
	"os"
)

const assumedDirectAlign = 4096

// blockFile is a file blocks are read from with positioned reads.
type blockFile interface {
	io.ReaderAt
	Close() error
}

// openDirect refuses: O_DIRECT is used on Linux only.
var openDirect = func(f *os.File, name string) (bf blockFile, offAlign, memAlign uint32, err error) {
	return nil, 0, 0, errors.New("O_DIRECT reads are supported on Linux only")
}

// residentFraction reports residency unknown outside Linux.
func residentFraction(b []byte) (float64, error) {
	return -1, errors.New("page cache residency is measured on Linux only")
}

// physicalMemory returns 0 (unknown) outside Linux.
func physicalMemory() uint64 { return 0 }

// preadvFile reads into bufs in order from offset off of f, one ReadAt per
// buffer, and returns the bytes read.
func preadvFile(f blockFile, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.ReadAt(b, off+int64(total))
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
