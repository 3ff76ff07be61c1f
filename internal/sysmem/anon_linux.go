package sysmem

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// AnonSupported reports that MapAnon can succeed on this platform.
const AnonSupported = true

// MapAnon returns size bytes of zeroed private anonymous memory, aligned to
// HugePage and advised MADV_HUGEPAGE so that the kernel backs it with
// transparent huge pages where it can (a 2 MiB page per TLB entry instead of
// 512 4 KiB ones: stage 2 reads records at random). whole is the mapping to
// pass to UnmapAnon. ok is false when the mapping fails (the run then
// spills its staging to disk); a refused madvise is ignored.
func MapAnon(size int64) (data, whole []byte, ok bool) {
	if size <= 0 || size > 1<<62 {
		return nil, nil, false
	}
	m, err := unix.Mmap(-1, 0, int(size)+HugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, nil, false
	}
	skip := 0
	if r := uintptr(unsafe.Pointer(unsafe.SliceData(m))) % HugePage; r != 0 {
		skip = int(HugePage - r)
	}
	data = m[skip : skip+int(size) : skip+int(size)]
	unix.Madvise(data, unix.MADV_HUGEPAGE)
	return data, m, true
}

// UnmapAnon releases a mapping made by MapAnon.
func UnmapAnon(whole []byte) { unix.Munmap(whole) }

// adviseHuge advises MADV_HUGEPAGE over the whole huge pages inside b.
func adviseHuge(b []byte) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	beg := (p + HugePage - 1) &^ (HugePage - 1)
	end := (p + uintptr(len(b))) &^ (HugePage - 1)
	if beg < end {
		unix.Madvise(b[beg-p:end-p], unix.MADV_HUGEPAGE)
	}
}
