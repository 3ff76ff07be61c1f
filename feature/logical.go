package feature

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/bits"
)

// Logical-type conversions: every Parquet annotation whose stored value is
// not the value itself is turned into its value here, and only here (cast.go
// then encodes values into dtypes): DECIMAL (unscaled integer × 10^-scale,
// exact or rounded once to the nearest float), INT96 timestamps
// (nanoseconds since 1970), and the FNV-1a hash of bytes mode "hash".
// FLOAT16 bits are copied or widened by shardfmt's half-float helpers.

// pow10 holds the powers of ten that are exact in float64 (10^0 .. 10^22).
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// DecimalToF64 returns the float64 nearest to unscaled × 10^-scale
// (ties to even): the value of a DECIMAL(p, scale) stored as INT32 or INT64.
// When |unscaled| < 2^53 and |scale| <= 22 both operands are exact and one
// IEEE division (or multiplication) rounds correctly (Clinger's fast path);
// otherwise the quotient is computed exactly with math/big and rounded once.
func DecimalToF64(unscaled int64, scale int) float64 {
	if unscaled > -(1<<53) && unscaled < 1<<53 {
		switch {
		case scale >= 0 && scale < len(pow10):
			return float64(unscaled) / pow10[scale]
		case scale < 0 && -scale < len(pow10):
			return float64(unscaled) * pow10[-scale]
		}
	}
	return ratFloat(new(big.Int).SetInt64(unscaled), scale)
}

// pow10f32 holds the powers of ten that are exact in float32 (10^0 .. 10^10).
var pow10f32 = [...]float32{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// DecimalToF32 returns the float32 nearest (ties to even) to
// unscaled/10^scale, rounded once from the exact value (the float32
// counterpart of DecimalToF64).
func DecimalToF32(unscaled int64, scale int) float32 {
	if scale >= 0 && scale < len(pow10f32) && unscaled > -(1<<24) && unscaled < 1<<24 {
		// 10^s = 2^s * 5^s with 5^10 < 2^24: both operands exact float32.
		return float32(unscaled) / pow10f32[scale]
	}
	f, _ := decimalRat(big.NewInt(unscaled), scale).Float32()
	return f
}

// decimalRat returns unscaled / 10^scale exactly.
func decimalRat(unscaled *big.Int, scale int) *big.Rat {
	r := new(big.Rat).SetInt(unscaled)
	if scale == 0 {
		return r
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(scale))), nil)
	if scale > 0 {
		return r.Quo(r, new(big.Rat).SetInt(p))
	}
	return r.Mul(r, new(big.Rat).SetInt(p))
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// bigEndianSigned decodes a big-endian two's-complement integer (DECIMAL in a
// FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY).
func bigEndianSigned(b []byte) *big.Int {
	v := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		v.Sub(v, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return v
}

// bigEndianInt64 decodes a big-endian two's-complement integer of at most 8
// bytes; ok is false when it is longer.
func bigEndianInt64(b []byte) (v int64, ok bool) {
	if len(b) > 8 || len(b) == 0 {
		return 0, len(b) == 0
	}
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	shift := uint(64 - 8*len(b))
	return int64(u<<shift) >> shift, true
}

// julianUnixEpoch is the Julian day number of 1970-01-01.
const julianUnixEpoch = 2440588

// Int96ToUnixNanos converts a Parquet INT96 timestamp (nanoseconds of the day
// as u64 little-endian, then the Julian day as u32 little-endian) to
// nanoseconds since the Unix epoch. ok is false when the sum days ×
// 86,400 s + nanoseconds lies outside int64; it is computed exactly (in
// unsigned magnitudes), so both ends of the int64 range are reached:
// 1677-09-21T00:12:43.145224192 and 2262-04-11T23:47:16.854775807.
func Int96ToUnixNanos(b []byte) (ns int64, ok bool) {
	nanos := binary.LittleEndian.Uint64(b[0:8])
	day := int64(binary.LittleEndian.Uint32(b[8:12]))
	hi, m := bits.Mul64(uint64(abs64(day-julianUnixEpoch)), 86400e9) // |days| × ns per day
	if hi != 0 || nanos > math.MaxInt64 {
		return 0, false
	}
	if day >= julianUnixEpoch {
		if m > math.MaxInt64 || nanos > math.MaxInt64-m {
			return 0, false
		}
		return int64(m + nanos), true
	}
	if nanos >= m {
		return int64(nanos - m), true // nanos <= MaxInt64
	}
	d := m - nanos // the result is -d
	if d > 1<<63 {
		return 0, false
	}
	return -int64(d-1) - 1, true
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// FNV1a64 is the 64-bit FNV-1a hash of b (offset basis 14695981039346656037,
// prime 1099511628211; xor each byte, then multiply). It is what bytes mode
// "hash" computes before taking the value modulo the bucket count.
func FNV1a64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// ratFloat rounds n × 10^-scale to the nearest float64 exactly.
func ratFloat(n *big.Int, scale int) float64 {
	if n.Sign() == 0 {
		return 0
	}
	// |n| < 10^digits. Outside about 10^±330 every result rounds to ±0 or
	// ±Inf; decide those without computing a huge power of ten.
	digits := n.BitLen()*30103/100000 + 1
	if e := digits - scale; e < -400 {
		return math.Copysign(0, float64(n.Sign()))
	} else if e > 400 {
		return math.Inf(n.Sign())
	}
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(scale))), nil)
	r := new(big.Rat)
	if scale >= 0 {
		r.SetFrac(n, p)
	} else {
		r.SetInt(new(big.Int).Mul(n, p))
	}
	f, _ := r.Float64() // nearest float64, ties to even; ±Inf beyond range
	return f
}
