package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// staging is the set of stage-1 output files of a run: one file per output
// tensor, sized exactly (slots x sample bytes) and mapped MAP_SHARED so the
// data lives in the page cache, not the Go heap.
type staging struct {
	dir   string
	files []*os.File
	maps  [][]byte
}

// createStaging creates dir and one mapped file per tensor of the given
// sizes. A zero size gets an empty, unmapped buffer.
func createStaging(dir string, sizes []int64) (*staging, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating staging: %w", err)
	}
	s := &staging{dir: dir}
	for i, n := range sizes {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("staging-%03d.bin", i)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			s.remove()
			return nil, fmt.Errorf("creating staging: %w", err)
		}
		s.files = append(s.files, f)
		if n == 0 {
			s.maps = append(s.maps, nil)
			continue
		}
		if err := f.Truncate(n); err != nil {
			s.remove()
			return nil, fmt.Errorf("sizing staging file: %w", err)
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			s.remove()
			return nil, fmt.Errorf("mapping staging file: %w", err)
		}
		s.maps = append(s.maps, m)
	}
	return s, nil
}

// remove unmaps, closes and deletes everything.
func (s *staging) remove() {
	for _, m := range s.maps {
		if m != nil {
			syscall.Munmap(m)
		}
	}
	s.maps = nil
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
	os.RemoveAll(s.dir)
	os.Remove(filepath.Dir(s.dir)) // the run's parent temp directory, if now empty
}
