package shardfmt

import (
	"math"
	"math/bits"
)

// Narrowing conversions to the 16-bit and 8-bit float dtypes.
//
// Every narrowing rounds the exact input value once, to nearest with ties to
// even (IEEE 754 roundTiesToEven). The float64 variants round directly from
// the float64 value: rounding float64 -> float32 -> F16 would round twice and
// is not correctly rounded (a value just above a F16 halfway point can land
// exactly on it after the first rounding and then tie to even downwards).
//
// Special values:
//   - NaN stays NaN with its sign. For F16 and BF16 the top payload bits are
//     kept and the quiet bit is set, so a NaN whose top mantissa bits are zero
//     never turns into the Inf pattern (plain truncation would do that).
//     F8_E5M2 returns a quiet NaN (0x7E or 0x7F, top payload bit kept, with
//     sign); F8_E4M3 has a single NaN pattern, 0x7F (with sign).
//   - ±Inf maps to ±Inf for F16, BF16 and F8_E5M2 and is not an overflow.
//   - -0.0 stays -0.0; values too small for the smallest subnormal round to
//     zero of the same sign (not reported).
//   - A finite value whose rounded magnitude exceeds the largest finite value
//     of the target overflows: the result is ±Inf for F16, BF16 and F8_E5M2
//     (the IEEE default) and overflow is reported true. F8_E4M3 (the OCP "fn"
//     variant) has no Inf: it saturates to ±448, reports overflow, and maps
//     ±Inf to ±448 with overflow reported as well.
//
// Widening (F16ToF32, BF16ToF32, F8E4M3ToF32, F8E5M2ToF32) is exact for every
// input bit pattern, NaN payloads included.

// minifloat describes a binary floating-point target format.
type minifloat struct {
	ebits, mbits uint // exponent field and trailing significand widths
	bias         int
	fn           bool // E4M3fn: no Inf; exponent all-ones is a normal binade except mantissa all-ones (NaN)
}

var (
	fmtF16  = minifloat{ebits: 5, mbits: 10, bias: 15}
	fmtBF16 = minifloat{ebits: 8, mbits: 7, bias: 127}
	fmtE4M3 = minifloat{ebits: 4, mbits: 3, bias: 7, fn: true}
	fmtE5M2 = minifloat{ebits: 5, mbits: 2, bias: 15}
)

// round rounds the finite, non-zero magnitude m*2^e (m > 0) to format f with
// round-to-nearest-even and returns the encoded magnitude bits (no sign) and
// whether the finite result overflowed.
func (f minifloat) round(m uint64, e int) (uint64, bool) {
	maxField := 1<<f.ebits - 1
	emin := 1 - f.bias
	// Exponent of the leading bit: value in [2^E, 2^(E+1)).
	E := e + bits.Len64(m) - 1
	q := E - int(f.mbits) // exponent of the target's unit in the last place
	if E < emin {
		q = emin - int(f.mbits) // subnormal range: fixed quantum
	}
	var r uint64
	shift := q - e
	switch {
	case shift <= 0:
		r = m << uint(-shift) // exact (cannot overflow: m has few bits here)
	case shift > 64:
		r = 0 // below a quarter of the quantum
	default:
		var rem, half uint64
		if shift == 64 {
			r, rem, half = 0, m, 1<<63
		} else {
			r = m >> uint(shift)
			rem = m & (1<<uint(shift) - 1)
			half = 1 << uint(shift-1)
		}
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
	}
	if r >= 1<<(f.mbits+1) { // rounding carried into the next binade
		r >>= 1
		q++
	}
	if r < 1<<f.mbits { // subnormal or zero
		return r, false
	}
	field := q + int(f.mbits) + f.bias
	frac := r - 1<<f.mbits
	if f.fn {
		if field > maxField || (field == maxField && frac == 1<<f.mbits-1) {
			return uint64(maxField)<<f.mbits | (1<<f.mbits - 2), true
		}
	} else if field >= maxField {
		return uint64(maxField) << f.mbits, true
	}
	return uint64(field)<<f.mbits | frac, false
}

// inf returns the encoded magnitude of Inf (or of the saturation value for fn
// formats) and whether that counts as overflow.
func (f minifloat) inf() (uint64, bool) {
	maxField := uint64(1<<f.ebits - 1)
	if f.fn {
		return maxField<<f.mbits | (1<<f.mbits - 2), true
	}
	return maxField << f.mbits, false
}

// nan returns the encoded magnitude of a quiet NaN carrying the top bits of
// the payload p, given as the source's trailing significand of width pbits.
func (f minifloat) nan(p uint64, pbits uint) uint64 {
	maxField := uint64(1<<f.ebits - 1)
	if f.fn {
		return maxField<<f.mbits | (1<<f.mbits - 1)
	}
	quiet := uint64(1) << (f.mbits - 1)
	return maxField<<f.mbits | quiet | (p>>(pbits-f.mbits))&(quiet-1)
}

// from64 narrows a float64 to format f with a single rounding; the result
// holds 1+ebits+mbits bits.
func (f minifloat) from64(x float64) (uint64, bool) {
	b := math.Float64bits(x)
	sign := (b >> 63) << (f.ebits + f.mbits)
	field := int(b >> 52 & 0x7FF)
	frac := b & (1<<52 - 1)
	var mag uint64
	var ov bool
	switch {
	case field == 0x7FF && frac != 0:
		mag = f.nan(frac, 52)
	case field == 0x7FF:
		mag, ov = f.inf()
	case field == 0 && frac == 0:
		mag = 0
	case field == 0:
		mag, ov = f.round(frac, -1022-52)
	default:
		mag, ov = f.round(frac|1<<52, field-1023-52)
	}
	return sign | mag, ov
}

// to32 widens an encoded value of format f to float32 exactly.
func (f minifloat) to32(h uint64) float32 {
	sign := uint32(h>>(f.ebits+f.mbits)&1) << 31
	maxField := uint64(1<<f.ebits - 1)
	field := h >> f.mbits & maxField
	frac := h & (1<<f.mbits - 1)
	switch {
	case field == maxField && (!f.fn || frac == 1<<f.mbits-1):
		if f.fn || frac != 0 { // NaN: keep the payload in the top bits
			p := uint32(frac) << (23 - f.mbits)
			if f.fn {
				p = 1 << 22 // E4M3 has one NaN; widen to the canonical quiet NaN
			}
			return math.Float32frombits(sign | 0xFF<<23 | p)
		}
		return math.Float32frombits(sign | 0xFF<<23)
	case field == 0:
		// Subnormal: frac * 2^(emin - mbits), exact in float32 for all targets.
		// The magnitude is >= 0, so or-ing in the sign also gives -0.
		v := float32(frac) * float32(math.Ldexp(1, 1-f.bias-int(f.mbits)))
		return math.Float32frombits(sign | math.Float32bits(v))
	default:
		e := uint32(int(field) - f.bias + 127)
		return math.Float32frombits(sign | e<<23 | uint32(frac)<<(23-f.mbits))
	}
}

// narrowTo narrows x to format f and returns the bits in T, the unsigned
// type of f's width. A float32 is first widened to float64, which is exact
// (for a NaN the quiet bit is set either way and only the payload bits below
// it are kept), so every input is still rounded once.
func narrowTo[T uint8 | uint16, F float32 | float64](f minifloat, x F) (T, bool) {
	v, ov := f.from64(float64(x))
	return T(v), ov
}

// F32ToF16 rounds x to IEEE 754 binary16 (round to nearest, ties to even) and
// returns its bits. overflow is true when finite x rounded beyond 65504 and
// the result is ±Inf. NaN stays NaN (quiet, top payload bits kept).
func F32ToF16(x float32) (h uint16, overflow bool) { return narrowTo[uint16](fmtF16, x) }

// F64ToF16 rounds x to binary16 directly from float64 (a single rounding;
// see the package notes on double rounding). Results as for F32ToF16.
func F64ToF16(x float64) (h uint16, overflow bool) { return narrowTo[uint16](fmtF16, x) }

// F16ToF32 widens binary16 bits h to float32. It is exact for every input,
// subnormals and NaN payloads included.
func F16ToF32(h uint16) float32 { return fmtF16.to32(uint64(h)) }

// F32ToBF16 rounds x to bfloat16 (the top 16 bits of binary32, round to
// nearest, ties to even) and returns its bits. overflow is true when finite x
// rounded beyond 3.3895314e38 and the result is ±Inf. NaN stays NaN (quiet,
// top payload bits kept).
func F32ToBF16(x float32) (b uint16, overflow bool) { return narrowTo[uint16](fmtBF16, x) }

// F64ToBF16 rounds x to bfloat16 directly from float64 (a single rounding).
// Results as for F32ToBF16.
func F64ToBF16(x float64) (b uint16, overflow bool) { return narrowTo[uint16](fmtBF16, x) }

// BF16ToF32 widens bfloat16 bits b to float32 exactly (b << 16).
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// F32ToF8E4M3 rounds x to OCP FP8 E4M3 ("E4M3FN": bias 7, no Inf, one NaN
// pattern 0x7F/0xFF, largest finite 448) with round to nearest, ties to even.
// Out-of-range values and ±Inf saturate to ±448 with overflow true; NaN maps
// to NaN.
func F32ToF8E4M3(x float32) (v uint8, overflow bool) { return narrowTo[uint8](fmtE4M3, x) }

// F64ToF8E4M3 is F32ToF8E4M3 for a float64 input, rounded once.
func F64ToF8E4M3(x float64) (v uint8, overflow bool) { return narrowTo[uint8](fmtE4M3, x) }

// F8E4M3ToF32 widens E4M3FN bits to float32 exactly (NaN to a quiet NaN).
func F8E4M3ToF32(v uint8) float32 { return fmtE4M3.to32(uint64(v)) }

// F32ToF8E5M2 rounds x to OCP FP8 E5M2 (IEEE-like: bias 15, ±Inf, largest
// finite 57344) with round to nearest, ties to even. Finite values rounding
// beyond 57344 become ±Inf with overflow true; NaN maps to a quiet NaN.
func F32ToF8E5M2(x float32) (v uint8, overflow bool) { return narrowTo[uint8](fmtE5M2, x) }

// F64ToF8E5M2 is F32ToF8E5M2 for a float64 input, rounded once.
func F64ToF8E5M2(x float64) (v uint8, overflow bool) { return narrowTo[uint8](fmtE5M2, x) }

// F8E5M2ToF32 widens E5M2 bits to float32 exactly.
func F8E5M2ToF32(v uint8) float32 { return fmtE5M2.to32(uint64(v)) }
