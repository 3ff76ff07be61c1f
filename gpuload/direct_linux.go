package gpuload

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// assumedDirectAlign is the O_DIRECT alignment used when the file system
// does not report one (statx without STATX_DIOALIGN: kernels before 6.1,
// some file systems): shard blocks are 4096-aligned, which covers every
// logical block size up to 4096, and a larger one fails the probe read at
// Open, which then falls back.
const assumedDirectAlign = 4096

// blockFile is a file blocks are read from with positioned reads: the shard
// opened with O_DIRECT. ReadAt follows io.ReaderAt.
type blockFile interface {
	ReadAt(p []byte, off int64) (int, error)
	Close() error
}

// openDirect opens the file open in f (named name in errors) again for
// O_DIRECT reads, through /proc/self/fd: the same file, never a name looked
// up again (the shard set follows no symbolic link, and a file renamed over
// the shard since it was opened is not the shard), and returns it with its
// offset and memory alignments (statx STATX_DIOALIGN, or
// assumedDirectAlign). It is a variable so tests can stand in for file
// systems that refuse O_DIRECT.
var openDirect = func(f *os.File, name string) (bf blockFile, offAlign, memAlign uint32, err error) {
	if f == nil {
		return nil, 0, 0, fmt.Errorf("opening %s for O_DIRECT: the shard is not an open file", name)
	}
	offAlign, memAlign = assumedDirectAlign, assumedDirectAlign
	var st unix.Statx_t
	if err := unix.Statx(int(f.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &st); err == nil && st.Mask&unix.STATX_DIOALIGN != 0 {
		if st.Dio_offset_align == 0 {
			return nil, 0, 0, fmt.Errorf("opening %s for O_DIRECT: the file system reports no direct I/O support (statx)", name)
		}
		offAlign, memAlign = st.Dio_offset_align, st.Dio_mem_align
	}
	file, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("opening %s for O_DIRECT: %w", name, err)
	}
	return file, offAlign, memAlign, nil
}

// preadvFile reads into bufs in order from offset off of f with one
// preadv(2), where f has a descriptor; otherwise with one ReadAt per
// buffer. It returns the bytes read.
func preadvFile(f blockFile, bufs [][]byte, off int64) (int, error) {
	if fd, ok := f.(interface{ Fd() uintptr }); ok {
		for {
			n, err := unix.Preadv(int(fd.Fd()), bufs, off)
			if err != unix.EINTR {
				return n, err
			}
		}
	}
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

// residentFraction returns the fraction of the pages of b (a view of a file
// mapping) that are in the page cache, by mincore(2) over at most 1 GiB at a
// time. The kernel answers for the page cache only where the caller may
// write the file or owns it (Linux 5.2 on); otherwise it counts only the
// pages mapped into this process, so a shard read by another user may look
// colder than it is (the choice is then O_DIRECT: slower, still correct).
func residentFraction(b []byte) (float64, error) {
	if len(b) == 0 {
		return 1, nil
	}
	page := os.Getpagesize()
	lead := int(addr(b) % uintptr(page))
	// b may start inside a page when the page size exceeds 4096: widen it
	// to the page boundary, which is inside the same mapping.
	span := unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(b)), -lead)), len(b)+lead)
	const chunk = 1 << 30
	vec := make([]byte, (min(len(span), chunk)+page-1)/page)
	var in, total int
	for off := 0; off < len(span); off += chunk {
		part := span[off:min(off+chunk, len(span))]
		n := (len(part) + page - 1) / page
		if err := mincore(part, vec[:n]); err != nil {
			return -1, fmt.Errorf("mincore: %w", err)
		}
		for _, v := range vec[:n] {
			in += int(v & 1)
		}
		total += n
	}
	return float64(in) / float64(total), nil
}

// physicalMemory returns the memory this process may use in bytes: the
// machine's RAM, or the cgroup v2 limit (memory.max) when lower, as in a
// container; 0 if unknown.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	ram := uint64(si.Totalram) * uint64(si.Unit)
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if lim, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && lim > 0 && lim < ram {
			return lim
		}
	}
	return ram
}

// mincore is mincore(2) over b (page-aligned) into vec, one byte per page.
func mincore(b, vec []byte) error {
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	if e != 0 {
		return e
	}
	return nil
}
