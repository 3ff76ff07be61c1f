package pqread

import (
	"math/big"
	"strconv"
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

// DecimalInt64ToFloat64 and DecimalToFloat64 are the tests' oracle for the
// value of a DECIMAL column (prep converts decimals in feature/logical.go):
// strconv.ParseFloat, which rounds correctly, of the exact decimal text.
func DecimalInt64ToFloat64(unscaled int64, scale int) float64 {
	return decimalOracle(big.NewInt(unscaled), scale)
}

func DecimalToFloat64(unscaledBE []byte, scale int) float64 {
	n := new(big.Int).SetBytes(unscaledBE)
	if len(unscaledBE) > 0 && unscaledBE[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(unscaledBE))))
	}
	return decimalOracle(n, scale)
}

func decimalOracle(n *big.Int, scale int) float64 {
	f, _ := strconv.ParseFloat(decimalString(n, scale), 64) // ±Inf beyond range
	return f
}
