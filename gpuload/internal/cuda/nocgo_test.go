//go:build !cgo

package cuda

import (
	"errors"
	"testing"
)

func TestOpenWithoutCgo(t *testing.T) {
	_, err := Open(0)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open without cgo = %v, want ErrUnavailable", err)
	}
}
