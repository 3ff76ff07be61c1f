package feature

import (
	"bytes"
	"testing"
)

// TestResampleHandValues: weights and pixels worked out by hand from
// SPEC.md §2.8.4.
func TestResampleHandValues(t *testing.T) {
	// area, 4 -> 2: each output is the mean of two inputs, rounded half
	// up: weights 1/2 each (2^21 fixed point).
	c := newCoeffs(4, 2, filterArea)
	if c.first[0] != 0 || c.n[0] != 2 || c.first[1] != 2 || c.n[1] != 2 || c.k[0] != 1<<21 || c.k[1] != 1<<21 {
		t.Errorf("area 4->2 coefficients %+v", c)
	}
	dst := make([]byte, 2)
	resizeCrop(dst, 2, []byte{10, 21, 200, 255}, 4, 1, 1, 2, 1, 0, 0, 2, 1, filterArea)
	if !bytes.Equal(dst, []byte{16, 228}) { // (10+21)/2 = 15.5 -> 16, (200+255)/2 = 227.5 -> 228
		t.Errorf("area 4->2 = %v, want [16 228]", dst)
	}
	// bilinear, 2 -> 4 (upscaling, support 1): centres 0.25, 0.75, 1.25,
	// 1.75; output 0 reads input 0 alone (input -1 is outside: its weight
	// is dropped and the rest renormalised), output 1 reads 0 and 1 with
	// weights 0.75 and 0.25.
	dst = make([]byte, 4)
	resizeCrop(dst, 4, []byte{0, 200}, 2, 1, 1, 4, 1, 0, 0, 4, 1, filterBilinear)
	if !bytes.Equal(dst, []byte{0, 50, 150, 200}) {
		t.Errorf("bilinear 2->4 = %v, want [0 50 150 200]", dst)
	}
	// Vertical pass alone (width unchanged), 3 channels, 2 -> 1 rows: the
	// mean of the rows.
	dst = make([]byte, 3)
	resizeCrop(dst, 3, []byte{0, 100, 255, 10, 101, 0}, 1, 2, 3, 1, 1, 0, 0, 1, 1, filterArea)
	if !bytes.Equal(dst, []byte{5, 101, 128}) { // 5, 100.5 -> 101, 127.5 -> 128
		t.Errorf("area rows 2->1 = %v, want [5 101 128]", dst)
	}
	// Same size: passed through, no pass at all, window copied.
	dst = make([]byte, 2)
	resizeCrop(dst, 2, []byte{1, 2, 3, 4, 5, 6}, 3, 2, 1, 3, 2, 1, 1, 2, 1, filterLanczos)
	if !bytes.Equal(dst, []byte{5, 6}) {
		t.Errorf("window of an unresized image = %v, want [5 6]", dst)
	}
}
