package shardfmt

import "fmt"

// DType is the element type of a tensor, stored on disk as a u16 code.
//
// Names follow safetensors (and map one to one onto DLPack's kDLInt/kDLUInt/
// kDLFloat/kDLBfloat/kDLBool type codes). Codes are part of the on-disk format
// (FORMAT.md, "dtype codes") and are never reused or renumbered.
type DType uint16

// The dtype codes of format v1. Code 0 is invalid so a zeroed table entry is
// rejected at open.
const (
	BOOL    DType = 1  // 1 byte, 0 or 1
	U8      DType = 2  // unsigned 8-bit integer
	I8      DType = 3  // signed 8-bit integer, two's complement
	U16     DType = 4  // unsigned 16-bit integer, little-endian
	I16     DType = 5  // signed 16-bit integer, little-endian
	U32     DType = 6  // unsigned 32-bit integer, little-endian
	I32     DType = 7  // signed 32-bit integer, little-endian
	U64     DType = 8  // unsigned 64-bit integer, little-endian
	I64     DType = 9  // signed 64-bit integer, little-endian
	F16     DType = 10 // IEEE 754 binary16, little-endian
	BF16    DType = 11 // bfloat16 (top 16 bits of binary32), little-endian
	F32     DType = 12 // IEEE 754 binary32, little-endian
	F64     DType = 13 // IEEE 754 binary64, little-endian
	F8_E4M3 DType = 14 // OCP FP8 E4M3 (finite-only, "fn" variant), 1 byte
	F8_E5M2 DType = 15 // OCP FP8 E5M2, 1 byte
)

var dtypeInfo = [...]struct {
	name string
	size int
}{
	BOOL: {"BOOL", 1}, U8: {"U8", 1}, I8: {"I8", 1},
	U16: {"U16", 2}, I16: {"I16", 2}, U32: {"U32", 4}, I32: {"I32", 4},
	U64: {"U64", 8}, I64: {"I64", 8}, F16: {"F16", 2}, BF16: {"BF16", 2},
	F32: {"F32", 4}, F64: {"F64", 8}, F8_E4M3: {"F8_E4M3", 1}, F8_E5M2: {"F8_E5M2", 1},
}

// Valid reports whether d is a dtype code defined by format v1.
func (d DType) Valid() bool { return d >= BOOL && int(d) < len(dtypeInfo) }

// Size returns the size of one element in bytes, or 0 for an invalid code.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// String returns the safetensors name ("F32", "BF16", ...), or "DType(n)" for
// an invalid code.
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("DType(%d)", uint16(d))
	}
	return dtypeInfo[d].name
}

// ParseDType returns the dtype with the given safetensors name. Names are
// matched exactly (upper case). It returns an error listing the valid names
// when s is not one of them.
func ParseDType(s string) (DType, error) {
	for d := BOOL; d.Valid(); d++ {
		if dtypeInfo[d].name == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2)", s)
}

// MarshalText encodes d as its safetensors name, so JSON shows "F32" rather
// than a number. It fails for an invalid code.
func (d DType) MarshalText() ([]byte, error) {
	if !d.Valid() {
		return nil, fmt.Errorf("invalid dtype code %d", uint16(d))
	}
	return []byte(d.String()), nil
}

// UnmarshalText decodes a safetensors dtype name (see ParseDType).
func (d *DType) UnmarshalText(b []byte) error {
	v, err := ParseDType(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
