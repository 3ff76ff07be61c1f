package gpuload

import "github.com/prepml/prep/shardfmt"

// DLPack device types (DLDeviceType in dlpack.h).
const (
	DLCPU  = 1 // kDLCPU: host memory
	DLCUDA = 2 // kDLCUDA: CUDA device memory
)

// DLPack type codes (DLDataTypeCode in dlpack.h v1.1; values fixed by the
// DLPack ABI).
const (
	DLInt          = 0
	DLUInt         = 1
	DLFloat        = 2
	DLBfloat       = 4
	DLBool         = 6
	DLFloat8E4M3FN = 10
	DLFloat8E5M2   = 12
	dlUnknownCode  = 255
	dlUnknownBits  = 0
	dlUnknownLanes = 0
	dlDefaultLanes = 1
	dlBitsPerByte  = 8
)

// DLPackType returns the DLPack DLDataType (code, bits, lanes) of a shard
// dtype: BOOL -> kDLBool/8, U* -> kDLUInt, I* -> kDLInt, F16/F32/F64 ->
// kDLFloat, BF16 -> kDLBfloat/16, F8_E4M3 -> kDLFloat8_e4m3fn/8, F8_E5M2 ->
// kDLFloat8_e5m2/8. An invalid dtype gives (255, 0, 0).
func DLPackType(d shardfmt.DType) (code uint8, bits uint8, lanes uint16) {
	bits = uint8(d.Size() * dlBitsPerByte)
	switch d {
	case shardfmt.BOOL:
		return DLBool, bits, dlDefaultLanes
	case shardfmt.U8, shardfmt.U16, shardfmt.U32, shardfmt.U64:
		return DLUInt, bits, dlDefaultLanes
	case shardfmt.I8, shardfmt.I16, shardfmt.I32, shardfmt.I64:
		return DLInt, bits, dlDefaultLanes
	case shardfmt.F16, shardfmt.F32, shardfmt.F64:
		return DLFloat, bits, dlDefaultLanes
	case shardfmt.BF16:
		return DLBfloat, bits, dlDefaultLanes
	case shardfmt.F8_E4M3:
		return DLFloat8E4M3FN, bits, dlDefaultLanes
	case shardfmt.F8_E5M2:
		return DLFloat8E5M2, bits, dlDefaultLanes
	}
	return dlUnknownCode, dlUnknownBits, dlUnknownLanes
}
