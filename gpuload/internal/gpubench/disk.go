//go:build linux

package main

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// evict drops path's pages from the page cache (POSIX_FADV_DONTNEED after
// fsync). Pages mapped by a live process stay; gpubench closes every Loader
// before it evicts.
func evict(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// diskRate returns the GB/s of reading path once from a dropped page cache
// in 16 MiB requests, qd of them in flight, with O_DIRECT (the disk's own
// sequential read rate, no page cache copy) or buffered (what the kernel's
// readahead makes of it).
func diskRate(path string, direct bool, qd int) (float64, error) {
	if err := evict(path); err != nil {
		return 0, err
	}
	flags := os.O_RDONLY
	if direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	const req = 16 << 20
	size := fi.Size() &^ (4096 - 1) // whole 4 KiB blocks: O_DIRECT lengths stay aligned
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, qd)
	t := time.Now()
	for range qd {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, err := unix.Mmap(-1, 0, req, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
			if err != nil {
				errs <- err
				return
			}
			defer unix.Munmap(buf)
			for {
				off := next.Add(req) - req
				if off >= size {
					return
				}
				n := min(int64(req), size-off)
				if _, err := f.ReadAt(buf[:n], off); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return float64(size) / time.Since(t).Seconds() / 1e9, nil
}
