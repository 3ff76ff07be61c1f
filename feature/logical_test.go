package feature

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

func TestDecimal(t *testing.T) {
	// B13: the nearest doubles of the exact decimals.
	for _, c := range []struct {
		unscaled int64
		scale    int
		want     float64
	}{
		{-1234567, 2, -12345.67}, {-1, 2, -0.01}, {1, 2, 0.01}, {0, 2, 0}, {123456789, 2, 1234567.89},
		{1, 30, 1e-30}, {-(1 << 60), 3, -1152921504606846.976}, {7, -2, 700},
	} {
		if got := DecimalToF64(c.unscaled, c.scale); got != c.want {
			t.Errorf("DecimalToF64(%d, %d) = %v, want %v", c.unscaled, c.scale, got, c.want)
		}
		want32, _ := strconv.ParseFloat(decimalRat(big.NewInt(c.unscaled), c.scale).FloatString(40), 32)
		if got := DecimalToF32(c.unscaled, c.scale); got != float32(want32) {
			t.Errorf("DecimalToF32(%d, %d) = %v, want %v", c.unscaled, c.scale, got, float32(want32))
		}
	}
	// 16-byte two's complement: -1234567 and a value beyond int64.
	b := make([]byte, 16)
	for i := range b {
		b[i] = 0xff
	}
	neg := int64(-1234567)
	binary.BigEndian.PutUint64(b[8:], uint64(neg))
	if v := bigEndianSigned(b); v.Int64() != -1234567 {
		t.Errorf("bigEndianSigned = %v", v)
	}
	if v, ok := bigEndianInt64([]byte{0xfe, 0xd6}); !ok || v != -298 {
		t.Errorf("bigEndianInt64 = %d %v", v, ok)
	}
	big1 := new(big.Int).Lsh(big.NewInt(1), 100)
	buf := make([]byte, 8)
	if err := newEncoder(shardfmt.F64, "").putBig(buf, decimalRat(big1, 2)); err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.ParseFloat("12676506002282294014967032053.76", 64)
	if got := math.Float64frombits(binary.LittleEndian.Uint64(buf)); got != want {
		t.Errorf("2^100/100 = %v, want %v", got, want)
	}
	if err := newEncoder(shardfmt.I64, "").putBig(buf, decimalRat(big.NewInt(5), 1)); !errors.Is(err, ErrValue) {
		t.Errorf("0.5 into I64: %v", err)
	}
}

func TestInt96(t *testing.T) {
	mk := func(day uint32, nanos uint64) []byte {
		b := make([]byte, 12)
		binary.LittleEndian.PutUint64(b, nanos)
		binary.LittleEndian.PutUint32(b[8:], day)
		return b
	}
	for _, c := range []struct {
		day   uint32
		nanos uint64
		want  int64
		ok    bool
	}{
		{2440588, 0, 0, true},
		{2440589, 1, 86400e9 + 1, true},
		{2440587, 86400e9 - 1, -1, true},
		{2440588 + 18262, 3600e9, 18262*86400e9 + 3600e9, true}, // 2020-01-01T01:00Z
		{0xffffffff, 0, 0, false},
	} {
		got, ok := Int96ToUnixNanos(mk(c.day, c.nanos))
		if ok != c.ok || got != c.want {
			t.Errorf("day %d nanos %d: %d %v, want %d %v", c.day, c.nanos, got, ok, c.want, c.ok)
		}
	}
}

func TestFNV1a64(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{
		{"", 0xcbf29ce484222325}, {"a", 0xaf63dc4c8601ec8c}, {"foobar", 0x85944171f73967e8},
	} {
		if got := FNV1a64([]byte(c.in)); got != c.want {
			t.Errorf("FNV1a64(%q) = %x, want %x", c.in, got, c.want)
		}
	}
}

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

// decimalToF64 converts one DECIMAL value stored as a width-byte
// FIXED_LEN_BYTE_ARRAY to F64 the way convert does (writeValues).
func decimalToF64(t *testing.T, be []byte, scale int) float64 {
	t.Helper()
	tp := &tensorPlan{enc: newEncoder(shardfmt.F64, "")}
	col := &pqread.Column{Kind: pqread.KindFixed, Width: len(be), FixedData: be, Rows: 1}
	dst := make([]byte, 8)
	if _, err := tp.writeValues(dst, 8, col, clsDecimal, scale, 0, 1); err != nil {
		t.Fatal(err)
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(dst))
}

// TestDecimalCorrectlyRounded: every DECIMAL value becomes the float64
// nearest to the exact decimal, ties to even, for INT32/INT64 storage
// (DecimalToF64) and for FIXED_LEN_BYTE_ARRAY of 1 to 16 bytes.
func TestDecimalCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	check := func(n *big.Int, scale, width int) {
		t.Helper()
		want, err := strconv.ParseFloat(decimalString(n, scale), 64)
		if err != nil && !math.IsInf(want, 0) {
			t.Fatal(err)
		}
		if got := decimalToF64(t, beBytes(n, width), scale); math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%s scale %d width %d: got %v (%x), want %v (%x)", n, scale, width, got, math.Float64bits(got), want, math.Float64bits(want))
		}
		if n.IsInt64() {
			if got := DecimalToF64(n.Int64(), scale); math.Float64bits(got) != math.Float64bits(want) {
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
	if got := decimalToF64(t, []byte{0xff, 0xff}, 1<<20); got != 0 || !math.Signbit(got) {
		t.Fatalf("tiny negative = %v", got)
	}
	if got := decimalToF64(t, []byte{0x01}, -1<<20); !math.IsInf(got, 1) {
		t.Fatalf("huge = %v", got)
	}
	if v, ok := bigEndianInt64(nil); !ok || v != 0 || DecimalToF64(v, 2) != 0 {
		t.Fatal("an empty value is not 0")
	}
}

// TestInt96AtTheInt64Ends pins a fault: INT96 timestamps at exactly the
// int64-nanosecond minimum (1677-09-21T00:12:43.145224192) and one ns
// later were refused, the check overflowing on days × ns-per-day before
// the nanoseconds of the day were added. Both ends convert exactly; one
// ns beyond either end is refused.
func TestInt96AtTheInt64Ends(t *testing.T) {
	// int96 returns the INT96 bytes of ns since the epoch (floor division
	// into Julian day and nanoseconds of the day), from exact big math.
	int96 := func(ns *big.Int) []byte {
		perDay := big.NewInt(86400e9)
		day, nod := new(big.Int), new(big.Int)
		day.DivMod(ns, perDay, nod) // Euclidean: 0 <= nod < perDay
		b := make([]byte, 12)
		binary.LittleEndian.PutUint64(b, nod.Uint64())
		binary.LittleEndian.PutUint32(b[8:], uint32(day.Int64()+julianUnixEpoch))
		return b
	}
	one := big.NewInt(1)
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	for _, c := range []struct {
		ns   *big.Int
		want int64
		ok   bool
	}{
		{lo, math.MinInt64, true},
		{new(big.Int).Add(lo, one), math.MinInt64 + 1, true},
		{new(big.Int).Sub(lo, one), 0, false},
		{hi, math.MaxInt64, true},
		{new(big.Int).Sub(hi, one), math.MaxInt64 - 1, true},
		{new(big.Int).Add(hi, one), 0, false},
		{big.NewInt(0), 0, true},
		{big.NewInt(-1), -1, true},
	} {
		got, ok := Int96ToUnixNanos(int96(c.ns))
		if ok != c.ok || got != c.want {
			t.Errorf("%v ns: got %d, %v; want %d, %v", c.ns, got, ok, c.want, c.ok)
		}
	}
	if got := time.Unix(0, math.MinInt64).UTC().Format(time.RFC3339Nano); got != "1677-09-21T00:12:43.145224192Z" {
		t.Errorf("the int64 minimum is %s", got)
	}
}
