//go:build !linux

package gpuload

// allocBuffer returns n bytes from the Go heap (no mapping API used outside
// Linux). Such buffers are fine for Go consumers; the C ABI is Linux-only.
func allocBuffer(n int) ([]byte, error) { return make([]byte, n), nil }

// freeBuffer does nothing: the garbage collector frees heap buffers.
func freeBuffer(b []byte) error { return nil }

// willNeed does nothing outside Linux.
func willNeed(b []byte) {}
