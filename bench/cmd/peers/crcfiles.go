package main

import (
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/prepml/prep/bench/internal/result"
)

// crcFiles measures, on one core, what checking every byte of the files
// with CRC-32C (SSE4.2 on amd64) costs by each way of reading them that
// prep verify could use, the files warm in the page cache:
//
//	pread     1 MiB positioned reads into one buffer (the kernel copies
//	          each byte out of the page cache), the CRC over the buffer
//	mmap      each file mapped read-only (MAP_SHARED), the CRC in place:
//	          no copy, but every 4 KiB page faulted in on first touch
//	populate  the same with MAP_POPULATE (the page tables filled at mmap)
//	seq       mmap with madvise MADV_SEQUENTIAL
//	popread   mmap with madvise MADV_POPULATE_READ over the whole file
//
// With -passes N the CRC runs N times over each file's buffer or mapping
// (a mapping's later passes touch pages already mapped: N=2 less N=1 is a
// pass without the first touch). Bytes are the bytes checked (the files'
// bytes N times); Extra gives the CPU seconds (user+system, getrusage) and
// minor faults of the timed region.
func crcFiles(args []string) error {
	fl := flag.NewFlagSet("crcfiles", flag.ExitOnError)
	mode := fl.String("mode", "pread", "pread, mmap, populate, seq or popread")
	passes := fl.Int("passes", 1, "CRC passes over each file's mapping (pread: reads)")
	fl.Parse(args)
	files, err := expand(fl.Args())
	if err != nil {
		return err
	}
	switch *mode {
	case "pread", "mmap", "populate", "seq", "popread":
	default:
		return fmt.Errorf("crcfiles: unknown -mode %q", *mode)
	}
	if *passes < 1 {
		return errors.New("crcfiles: want -passes >= 1")
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	var total int64
	var sum uint64
	cpu0, flt0 := usage()
	start := time.Now()
	for _, p := range files {
		n, crc, err := crcFile(p, *mode, *passes, table)
		if err != nil {
			return err
		}
		total += n * int64(*passes)
		sum += uint64(crc)
	}
	secs := time.Since(start).Seconds()
	cpu1, flt1 := usage()
	result.Print(result.Result{Bytes: total, Seconds: secs, Checksum: sum,
		Extra: fmt.Sprintf("%s, %d files, %d passes, %.3f CPU s, %d minor faults", *mode, len(files), *passes, (cpu1 - cpu0).Seconds(), flt1-flt0)})
	return nil
}

// crcFile returns the size and CRC-32C of the file at p, read by mode,
// checked passes times.
func crcFile(p, mode string, passes int, table *crc32.Table) (int64, uint32, error) {
	f, err := os.Open(p)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	n := st.Size()
	if n == 0 {
		return 0, 0, nil
	}
	const chunk = 1 << 20
	var crc uint32
	if mode == "pread" {
		buf := make([]byte, chunk)
		for range passes {
			crc = 0
			for off := int64(0); off < n; off += chunk {
				m, err := f.ReadAt(buf[:min(chunk, n-off)], off)
				if err != nil {
					return 0, 0, err
				}
				crc = crc32.Update(crc, table, buf[:m])
			}
		}
		return n, crc, nil
	}
	if int64(int(n)) != n {
		return 0, 0, errors.New("crcfiles: file too large to map")
	}
	flags := unix.MAP_SHARED
	if mode == "populate" {
		flags |= unix.MAP_POPULATE
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, flags)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Munmap(data)
	switch mode {
	case "seq":
		err = unix.Madvise(data, unix.MADV_SEQUENTIAL)
	case "popread":
		err = unix.Madvise(data, unix.MADV_POPULATE_READ)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("crcfiles: madvise: %w", err)
	}
	for range passes {
		crc = 0
		for off := 0; off < len(data); off += chunk {
			crc = crc32.Update(crc, table, data[off:min(off+chunk, len(data))])
		}
	}
	return n, crc, nil
}

// usage returns the process's CPU time (user+system) and minor faults.
func usage() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Minflt
}
