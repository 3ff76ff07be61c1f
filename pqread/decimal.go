package pqread

import (
	"math"
	"math/big"
)

// pow10 holds the powers of ten that are exact in float64 (10^0 .. 10^22).
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// DecimalInt64ToFloat64 returns the float64 nearest to unscaled × 10^-scale
// (ties to even): the value of a DECIMAL(p, scale) stored as INT32 or INT64.
// When |unscaled| < 2^53 and |scale| <= 22 both operands are exact and one
// IEEE division (or multiplication) rounds correctly (Clinger's fast path);
// otherwise the quotient is computed exactly with math/big and rounded once.
func DecimalInt64ToFloat64(unscaled int64, scale int) float64 {
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

// DecimalToFloat64 returns the float64 nearest to unscaled × 10^-scale
// (ties to even), where unscaled is a big-endian two's-complement integer of
// any length: the value of a DECIMAL stored as FIXED_LEN_BYTE_ARRAY or
// BYTE_ARRAY. An empty slice is 0. Values beyond the float64 range give ±Inf.
func DecimalToFloat64(unscaledBE []byte, scale int) float64 {
	if len(unscaledBE) == 0 {
		return 0
	}
	if len(unscaledBE) <= 8 {
		// Sign-extend into an int64.
		var v int64
		if unscaledBE[0]&0x80 != 0 {
			v = -1
		}
		for _, b := range unscaledBE {
			v = v<<8 | int64(b)
		}
		return DecimalInt64ToFloat64(v, scale)
	}
	n := new(big.Int).SetBytes(unscaledBE)
	if unscaledBE[0]&0x80 != 0 {
		// Two's complement: subtract 2^(8·len).
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(unscaledBE))))
	}
	return ratFloat(n, scale)
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

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
