package pqread

import (
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
)

// decimalString renders n × 10^-scale exactly, for strconv.ParseFloat (which
// rounds correctly) to serve as the oracle.
func decimalString(n *big.Int, scale int) string {
	return n.String() + "e" + strconv.Itoa(-scale)
}

// beBytes returns n as a width-byte big-endian two's-complement integer.
func beBytes(n *big.Int, width int) []byte {
	m := new(big.Int).Set(n)
	if m.Sign() < 0 {
		m.Add(m, new(big.Int).Lsh(big.NewInt(1), uint(8*width)))
	}
	b := m.Bytes()
	out := make([]byte, width)
	copy(out[width-len(b):], b)
	return out
}

func TestDecimalToFloat64CorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	check := func(n *big.Int, scale, width int) {
		t.Helper()
		want, err := strconv.ParseFloat(decimalString(n, scale), 64)
		if err != nil && !math.IsInf(want, 0) {
			t.Fatal(err)
		}
		if got := DecimalToFloat64(beBytes(n, width), scale); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%s scale %d width %d: got %v (%x), want %v (%x)", n, scale, width, got, math.Float64bits(got), want, math.Float64bits(want))
		}
		if n.IsInt64() {
			if got := DecimalInt64ToFloat64(n.Int64(), scale); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("int64 %s scale %d: got %v, want %v", n, scale, got, want)
			}
		}
	}
	// Field case B13 and edge values.
	for _, u := range []int64{-1234567, -1, 1, 0, 123456789, math.MaxInt64, math.MinInt64, 1 << 53, 1<<53 + 1, -(1<<53 + 1), 9007199254740993} {
		for _, scale := range []int{0, 1, 2, 9, 18, 22, 23, 30, -3, -22, -23} {
			check(big.NewInt(u), scale, 16)
		}
	}
	// Random 1..16-byte values, scales -30..40 (FLBA widths 13 and 16 as
	// in B13, plus 4 and 8).
	for range 20000 {
		width := []int{4, 8, 13, 16}[rng.IntN(4)]
		b := make([]byte, width)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		n := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*width)))
		}
		check(n, rng.IntN(71)-30, width)
	}
	// Out of range scales round to zero or overflow without huge powers.
	if got := DecimalToFloat64([]byte{0xff, 0xff}, 1<<20); got != 0 || !math.Signbit(got) {
		t.Fatalf("tiny negative = %v", got)
	}
	if got := DecimalToFloat64([]byte{0x01}, -1<<20); !math.IsInf(got, 1) {
		t.Fatalf("huge = %v", got)
	}
	if DecimalToFloat64(nil, 2) != 0 {
		t.Fatal("empty is not 0")
	}
}
