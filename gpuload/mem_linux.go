package gpuload

import "syscall"

// allocBuffer returns n bytes of page-aligned, zeroed memory outside the Go
// heap (an anonymous private mapping), so C code may keep its address.
func allocBuffer(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// freeBuffer unmaps a buffer from allocBuffer.
func freeBuffer(b []byte) error { return syscall.Munmap(b) }

// willNeed asks the kernel to start reading b's pages (madvise
// MADV_WILLNEED). b must start on a page boundary; errors are ignored, the
// advice is only a hint.
func willNeed(b []byte) { _ = syscall.Madvise(b, syscall.MADV_WILLNEED) }
