package feature

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
	"strconv"
	"sync/atomic"

	"github.com/prepml/prep/shardfmt"
)

// This file holds the value casts as pure functions. Each documents its
// exact rounding and error rule; apply.go applies them to columns, after
// logical.go has turned annotated values (DECIMAL, INT96) into values.
//
// Summary of the rules (source -> dtype):
//
//	float  -> F64            exact (FLOAT widens exactly; DOUBLE copied bit-exact)
//	float  -> F32            round to nearest, ties to even (Go conversion); FLOAT copied bit-exact
//	float  -> F16, BF16      round to nearest, ties to even, directly from the float64 value
//	                         (no double rounding; shardfmt.F64ToF16/F64ToBF16); overflow ->
//	                         ±Inf; NaN stays NaN (quiet, top payload bits kept); signed zero kept
//	float  -> F8_E4M3/E5M2   shardfmt.F64ToF8E4M3/F64ToF8E5M2 (E4M3 saturates to ±448)
//	int    -> F16, BF16, F8  as float64(v) through the float rules above
//
// Overflow of the narrow floats (F16, BF16, F8_E4M3, F8_E5M2): a finite value
// that rounds beyond the dtype's largest finite value (65504, 3.3895314e38,
// 448, 57344), and for F8_E4M3, which has no infinity, also ±Inf. Under
// cast.overflow "inf" (the default) it is stored as ±Inf (±448 for F8_E4M3)
// and counted per tensor (Summary.Overflows, and a warning on the log);
// under cast.overflow "error" it fails the run with ErrValue naming file,
// column, row group and row. Other dtypes never overflow silently: F32 from
// a DOUBLE rounds to ±Inf as IEEE 754 does and is not counted; integer
// dtypes reject out-of-range values always.
//	float  -> integers, BOOL NaN/±Inf and values outside the dtype's range are errors; a
//	                         non-integral value is an error unless cast.round is trunc
//	                         (toward zero) or nearest (ties to even); BOOL takes 0 or 1
//	int    -> integers       exact; out of the dtype's range is an error naming the value
//	int    -> floats         round to nearest, ties to even
//	INT(bits,false)          read as unsigned (UINT_32 4294967295 is not -1), then as int
//	DATE, TIME, TIMESTAMP    the stored integer in its own unit (days, or the column's
//	(INT32/INT64)            MILLIS/MICROS/NANOS); no rescaling
//	bool   -> any            false = 0, true = 1
//	FLOAT16 (FLBA 2)         F16: bits copied; F32/F64: exact widening, NaN payload kept
//	                         (7E01 -> 7FC02000); other dtypes through the float rules
//	DECIMAL(p,s)             value = unscaled / 10^s exactly; F64 and F32 get the nearest
//	                         value of that type (ties to even) from the exact rational, never
//	                         through a rounded intermediate; integer dtypes only when s = 0
//	INT96 timestamp          I64 nanoseconds since 1970-01-01T00:00:00 UTC: the 12 bytes are
//	                         nanoseconds of the day (u64 LE) then the Julian day number (u32 LE);
//	                         ns = (day - 2440588) * 86400e9 + nanos; overflow of int64 is an error

// intRange returns the inclusive range of an integer dtype (BOOL is [0, 1]).
// ok is false for float dtypes.
func intRange(dt shardfmt.DType) (lo int64, hi uint64, ok bool) {
	switch dt {
	case shardfmt.BOOL:
		return 0, 1, true
	case shardfmt.U8:
		return 0, math.MaxUint8, true
	case shardfmt.I8:
		return math.MinInt8, math.MaxInt8, true
	case shardfmt.U16:
		return 0, math.MaxUint16, true
	case shardfmt.I16:
		return math.MinInt16, math.MaxInt16, true
	case shardfmt.U32:
		return 0, math.MaxUint32, true
	case shardfmt.I32:
		return math.MinInt32, math.MaxInt32, true
	case shardfmt.U64:
		return 0, math.MaxUint64, true
	case shardfmt.I64:
		return math.MinInt64, math.MaxInt64, true
	}
	return 0, 0, false
}

func isFloatDType(dt shardfmt.DType) bool {
	switch dt {
	case shardfmt.F16, shardfmt.BF16, shardfmt.F32, shardfmt.F64, shardfmt.F8_E4M3, shardfmt.F8_E5M2:
		return true
	}
	return false
}

// encoder writes one value of any source kind as dtype dt, little-endian.
// The put methods return an ErrValue error (without location) when the value
// cannot be represented under the rules above.
type encoder struct {
	dt    shardfmt.DType
	size  int
	round string // "", "trunc", "nearest": float -> integer rounding

	overflowErr bool          // cast.overflow error: a narrow-float overflow is an ErrValue
	overflows   *atomic.Int64 // narrow-float overflows stored as ±Inf (or ±448); nil: not counted
	constant    bool          // encodes a spec's fill or pad value: a narrow-float overflow is always an error
}

// overflow handles a narrow-float overflow of x: an error for a spec's
// constant (a finite fill that would become ±Inf is refused, whatever
// cast.overflow, as an out-of-range integer fill is) and under
// cast.overflow error, otherwise one more count.
func (e encoder) overflow(x float64) error {
	if e.constant {
		return ValueErrorf("%s overflows %s (largest finite %s); write Inf or -Inf for an infinite value", fmtFloat(x), e.dt, maxFinite(e.dt))
	}
	if e.overflowErr {
		return ValueErrorf("value %s overflows %s (largest finite %s; cast.overflow is error)", fmtFloat(x), e.dt, maxFinite(e.dt))
	}
	if e.overflows != nil {
		e.overflows.Add(1)
	}
	return nil
}

// maxFinite returns the largest finite value of a narrow float dtype, as text.
func maxFinite(dt shardfmt.DType) string {
	switch dt {
	case shardfmt.F16:
		return "65504"
	case shardfmt.BF16:
		return "3.3895314e38"
	case shardfmt.F8_E4M3:
		return "448"
	case shardfmt.F8_E5M2:
		return "57344"
	}
	return "?"
}

func newEncoder(dt shardfmt.DType, round string) encoder {
	return encoder{dt: dt, size: dt.Size(), round: round}
}

// putRaw stores the low size bytes of v little-endian.
func (e encoder) putRaw(dst []byte, v uint64) {
	switch e.size {
	case 1:
		dst[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(dst, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(dst, uint32(v))
	default:
		binary.LittleEndian.PutUint64(dst, v)
	}
}

// putInt writes a signed integer value.
func (e encoder) putInt(dst []byte, v int64) error {
	switch e.dt {
	case shardfmt.F64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(float64(v)))
		return nil
	case shardfmt.F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(v)))
		return nil
	case shardfmt.F16, shardfmt.BF16, shardfmt.F8_E4M3, shardfmt.F8_E5M2:
		return e.putFloat(dst, float64(v)) // |v| >= 2^53 overflows them all either way
	}
	lo, hi, _ := intRange(e.dt)
	if v < lo || (v > 0 && uint64(v) > hi) {
		return ValueErrorf("value %d out of range for %s [%d, %d]", v, e.dt, lo, hi)
	}
	e.putRaw(dst, uint64(v))
	return nil
}

// putUint writes an unsigned integer value.
func (e encoder) putUint(dst []byte, v uint64) error {
	switch e.dt {
	case shardfmt.F64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(float64(v)))
		return nil
	case shardfmt.F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(v)))
		return nil
	case shardfmt.F16, shardfmt.BF16, shardfmt.F8_E4M3, shardfmt.F8_E5M2:
		return e.putFloat(dst, float64(v))
	}
	lo, hi, _ := intRange(e.dt)
	if v > hi {
		return ValueErrorf("value %d out of range for %s [%d, %d]", v, e.dt, lo, hi)
	}
	e.putRaw(dst, v)
	return nil
}

// putFloat writes a float value.
func (e encoder) putFloat(dst []byte, x float64) error {
	switch e.dt {
	case shardfmt.F64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(x))
		return nil
	case shardfmt.F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(x)))
		return nil
	case shardfmt.F16, shardfmt.BF16, shardfmt.F8_E4M3, shardfmt.F8_E5M2:
		var v uint16 // an F8 in the low byte
		var ov bool
		switch e.dt {
		case shardfmt.F16:
			v, ov = shardfmt.F64ToF16(x)
		case shardfmt.BF16:
			v, ov = shardfmt.F64ToBF16(x)
		case shardfmt.F8_E4M3:
			b, o := shardfmt.F64ToF8E4M3(x)
			v, ov = uint16(b), o
		default:
			b, o := shardfmt.F64ToF8E5M2(x)
			v, ov = uint16(b), o
		}
		if ov {
			if err := e.overflow(x); err != nil {
				return err
			}
		}
		if e.size == 1 {
			dst[0] = byte(v)
		} else {
			binary.LittleEndian.PutUint16(dst, v)
		}
		return nil
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ValueErrorf("%s cannot be converted to %s", fmtFloat(x), e.dt)
	}
	r := x
	switch e.round {
	case "trunc":
		r = math.Trunc(x)
	case "nearest":
		r = math.RoundToEven(x)
	default:
		if math.Trunc(x) != x {
			return ValueErrorf("value %s is not an integer (set cast.round to trunc or nearest)", fmtFloat(x))
		}
	}
	lo, hi, _ := intRange(e.dt)
	// Every range is [lo, 2^k - 1], so the exclusive upper bound 2^k and lo
	// are exact doubles.
	ub := math.Ldexp(1, bits.Len64(hi))
	if r < float64(lo) || r >= ub {
		return ValueErrorf("value %s out of range for %s [%d, %d]", fmtFloat(x), e.dt, lo, hi)
	}
	if r < 0 {
		e.putRaw(dst, uint64(int64(r)))
	} else {
		e.putRaw(dst, uint64(r))
	}
	return nil
}

// putF16Bits writes a FLOAT16 source value given as its bits.
func (e encoder) putF16Bits(dst []byte, h uint16) error {
	switch e.dt {
	case shardfmt.F16:
		binary.LittleEndian.PutUint16(dst, h)
		return nil
	case shardfmt.F32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(shardfmt.F16ToF32(h)))
		return nil
	}
	return e.putFloat(dst, float64(shardfmt.F16ToF32(h)))
}

// putBig writes an exact rational value (a DECIMAL): F64 and F32 get the
// nearest value, ties to even; integer dtypes need an integral value in range.
func (e encoder) putBig(dst []byte, r *big.Rat) error {
	switch e.dt {
	case shardfmt.F64:
		f, _ := r.Float64()
		binary.LittleEndian.PutUint64(dst, math.Float64bits(f))
		return nil
	case shardfmt.F32:
		f, _ := r.Float32()
		binary.LittleEndian.PutUint32(dst, math.Float32bits(f))
		return nil
	}
	if !r.IsInt() {
		return ValueErrorf("decimal %s is not an integer", r.FloatString(10))
	}
	n := r.Num()
	if n.IsInt64() {
		return e.putInt(dst, n.Int64())
	}
	if n.IsUint64() {
		return e.putUint(dst, n.Uint64())
	}
	return ValueErrorf("decimal %s out of range for %s", n.String(), e.dt)
}

func fmtFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "NaN"
	case math.IsInf(x, 1):
		return "+Inf"
	case math.IsInf(x, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
