package gpuload

import (
	"testing"

	"github.com/prepml/prep/shardfmt"
)

func TestDLPackType(t *testing.T) {
	type dl struct {
		code, bits uint8
		lanes      uint16
	}
	want := map[shardfmt.DType]dl{
		shardfmt.BOOL: {6, 8, 1}, shardfmt.U8: {1, 8, 1}, shardfmt.I8: {0, 8, 1},
		shardfmt.U16: {1, 16, 1}, shardfmt.I16: {0, 16, 1}, shardfmt.U32: {1, 32, 1}, shardfmt.I32: {0, 32, 1},
		shardfmt.U64: {1, 64, 1}, shardfmt.I64: {0, 64, 1}, shardfmt.F16: {2, 16, 1}, shardfmt.BF16: {4, 16, 1},
		shardfmt.F32: {2, 32, 1}, shardfmt.F64: {2, 64, 1}, shardfmt.F8_E4M3: {10, 8, 1}, shardfmt.F8_E5M2: {12, 8, 1},
		shardfmt.DType(0): {255, 0, 0}, shardfmt.DType(99): {255, 0, 0},
	}
	for d, w := range want {
		c, b, l := DLPackType(d)
		if (dl{c, b, l}) != w {
			t.Errorf("DLPackType(%v) = (%d, %d, %d), want %v", d, c, b, l, w)
		}
	}
}
