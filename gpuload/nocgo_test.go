//go:build !cgo

package gpuload

import (
	"errors"
	"testing"
)

func TestCUDABackendWithoutCgo(t *testing.T) {
	dir := writeSet(t, small)
	_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA})
	if !errors.Is(err, ErrCUDAUnavailable) {
		t.Fatalf("Open(cuda) without cgo = %v, want ErrCUDAUnavailable", err)
	}
}
