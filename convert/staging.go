package convert

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// staging is a run's stage-1 output: one file of staging records (see
// records), sized exactly (slots x record bytes) and mapped MAP_SHARED so the
// data lives in the page cache, not the Go heap.
type staging struct {
	dir  string
	file *os.File
	data []byte
}

// createStaging creates dir and a mapped staging file of size bytes. A zero
// size gets an empty, unmapped buffer.
func createStaging(dir string, size int64) (*staging, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating staging: %w", err)
	}
	s := &staging{dir: dir}
	f, err := os.OpenFile(filepath.Join(dir, "staging.bin"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("creating staging: %w", err)
	}
	s.file = f
	if size == 0 {
		return s, nil
	}
	if err := f.Truncate(size); err != nil {
		s.remove()
		return nil, fmt.Errorf("sizing staging file: %w", err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("mapping staging file: %w", err)
	}
	s.data = m
	return s, nil
}

// remove unmaps, closes and deletes everything.
func (s *staging) remove() {
	if s.data != nil {
		syscall.Munmap(s.data)
		s.data = nil
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	os.RemoveAll(s.dir)
	os.Remove(filepath.Dir(s.dir)) // the run's parent temp directory, if now empty
}
