package convert

import (
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// TestF16RoundTripAll widens every binary16 pattern and rounds it back.
func TestF16RoundTripAll(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := refF16ToF64(uint16(h))
		got := refF64ToF16(x)
		if math.IsNaN(x) {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got&0x200 == 0 || got>>15 != uint16(h)>>15 {
				t.Fatalf("NaN %04x -> %04x, want a quiet NaN of the same sign", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Fatalf("%04x -> %v -> %04x", h, x, got)
		}
	}
}

// TestF16TiesToEven checks the midpoint between every pair of adjacent
// positive finite halves, and the values either side of it.
func TestF16TiesToEven(t *testing.T) {
	for h := uint16(0); h < 0x7bff; h++ {
		a, b := refF16ToF64(h), refF16ToF64(h+1)
		mid := (a + b) / 2 // exact in float64
		want := h
		if h&1 == 1 {
			want = h + 1
		}
		if got := refF64ToF16(mid); got != want {
			t.Fatalf("mid(%04x,%04x)=%v -> %04x, want %04x", h, h+1, mid, got, want)
		}
		if got := refF64ToF16(math.Nextafter(mid, 0)); got != h {
			t.Fatalf("below mid(%04x) -> %04x", h, got)
		}
		if got := refF64ToF16(math.Nextafter(mid, 1e9)); got != h+1 {
			t.Fatalf("above mid(%04x) -> %04x", h, got)
		}
		if got := refF64ToF16(-mid); got != want|0x8000 {
			t.Fatalf("-mid(%04x) -> %04x", h, got)
		}
	}
	for _, c := range []struct {
		x    float64
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {65519.99, 0x7bff}, {65520, 0x7c00},
		{1e6, 0x7c00}, {-1e6, 0xfc00}, {math.Inf(1), 0x7c00}, {math.Inf(-1), 0xfc00},
		{5.960464477539063e-08, 0x0001}, {math.Ldexp(1, -25), 0}, {math.Nextafter(math.Ldexp(1, -25), 1), 1},
		{math.Copysign(0, -1), 0x8000}, {0.1, 0x2e66}, {1.0 / 3, 0x3555},
	} {
		if got := refF64ToF16(c.x); got != c.want {
			t.Errorf("refF64ToF16(%v) = %04x, want %04x", c.x, got, c.want)
		}
	}
}

// TestBF16AllPatterns checks BF16 rounding against float32 bit arithmetic for
// every bf16 pattern and its midpoints.
func TestBF16AllPatterns(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := float64(refBF16ToF32(uint16(h)))
		if math.IsNaN(x) {
			continue
		}
		if got := refF64ToBF16(x); got != uint16(h) {
			t.Fatalf("%04x -> %04x", h, got)
		}
		if h&0x7fff >= 0x7f7f {
			continue
		}
		mid := (x + float64(refBF16ToF32(uint16(h+1)))) / 2
		want := uint16(h)
		if h&1 == 1 {
			want++
		}
		if got := refF64ToBF16(mid); got != want {
			t.Fatalf("mid %04x -> %04x, want %04x", h, got, want)
		}
	}
	if got := refF64ToBF16(math.NaN()); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("NaN -> %04x", got)
	}
}

func TestF16ToF32FieldValues(t *testing.T) {
	// B14: half bits and their exact float32 widening.
	in := []uint16{0x3C00, 0xC000, 0x7BFF, 0x7C00, 0x7E01, 0x0001, 0x8000}
	want := []uint32{0x3f800000, 0xc0000000, 0x477fe000, 0x7f800000, 0x7fc02000, 0x33800000, 0x80000000}
	for i, h := range in {
		if got := math.Float32bits(refF16ToF32(h)); got != want[i] {
			t.Errorf("%04x -> %08x, want %08x", h, got, want[i])
		}
	}
}

func TestEncoderIntegers(t *testing.T) {
	cases := []struct {
		dt      shardfmt.DType
		v       int64
		want    uint64
		wantErr bool
	}{
		{shardfmt.U8, 255, 255, false},
		{shardfmt.U8, 256, 0, true},
		{shardfmt.U8, -1, 0, true},
		{shardfmt.I8, -128, 0x80, false},
		{shardfmt.I8, 128, 0, true},
		{shardfmt.I16, -32769, 0, true},
		{shardfmt.U16, 65535, 0xffff, false},
		{shardfmt.I32, math.MinInt32, 0x80000000, false},
		{shardfmt.I32, math.MaxInt32 + 1, 0, true},
		{shardfmt.U32, math.MaxUint32, 0xffffffff, false},
		{shardfmt.U64, -1, 0, true},
		{shardfmt.I64, math.MinInt64, 1 << 63, false},
		{shardfmt.BOOL, 1, 1, false},
		{shardfmt.BOOL, 2, 0, true},
		{shardfmt.F32, 16777217, uint64(math.Float32bits(16777216)), false}, // ties to even
		{shardfmt.F64, -3, math.Float64bits(-3), false},
		{shardfmt.F16, 2049, 0x6800, false}, // 2049 -> 2048 (tie, even)
	}
	for _, c := range cases {
		e := newEncoder(c.dt, "")
		buf := make([]byte, 8)
		err := e.putInt(buf, c.v)
		if c.wantErr {
			if !errors.Is(err, ErrValue) {
				t.Errorf("%s %d: err %v, want ErrValue", c.dt, c.v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %d: %v", c.dt, c.v, err)
			continue
		}
		if got := binary.LittleEndian.Uint64(buf); got != c.want {
			t.Errorf("%s %d: %x, want %x", c.dt, c.v, got, c.want)
		}
	}
	e := newEncoder(shardfmt.U8, "")
	err := e.putInt(make([]byte, 1), 300)
	if err == nil || err.Error() != "value 300 out of range for U8 [0, 255]" {
		t.Errorf("message: %v", err)
	}
	buf := make([]byte, 8)
	if err := newEncoder(shardfmt.I64, "").putUint(buf, math.MaxUint64); !errors.Is(err, ErrValue) {
		t.Errorf("uint64 max into I64: %v", err)
	}
	if err := newEncoder(shardfmt.U64, "").putUint(buf, math.MaxUint64); err != nil || binary.LittleEndian.Uint64(buf) != math.MaxUint64 {
		t.Errorf("uint64 max into U64: %v %x", err, buf)
	}
}

func TestEncoderFloatToInt(t *testing.T) {
	cases := []struct {
		dt      shardfmt.DType
		round   string
		x       float64
		want    int64
		wantErr bool
	}{
		{shardfmt.I32, "", 3, 3, false},
		{shardfmt.I32, "", 3.5, 0, true},
		{shardfmt.I32, "trunc", 3.9, 3, false},
		{shardfmt.I32, "trunc", -3.9, -3, false},
		{shardfmt.I32, "nearest", 2.5, 2, false},
		{shardfmt.I32, "nearest", 3.5, 4, false},
		{shardfmt.I32, "nearest", -2.5, -2, false},
		{shardfmt.I32, "", math.NaN(), 0, true},
		{shardfmt.I32, "", math.Inf(1), 0, true},
		{shardfmt.I32, "", 2147483647, 2147483647, false},
		{shardfmt.I32, "", 2147483648, 0, true},
		{shardfmt.I32, "", -2147483648, -2147483648, false},
		{shardfmt.I32, "trunc", -2147483648.9, -2147483648, false},
		{shardfmt.U8, "trunc", 255.9, 255, false},
		{shardfmt.U8, "", -0.0, 0, false},
		{shardfmt.U8, "", -1, 0, true},
		{shardfmt.I64, "", 9223372036854775807, 0, true}, // = 2^63 as a double
		{shardfmt.I64, "", -9223372036854775808, math.MinInt64, false},
		{shardfmt.BOOL, "", 1, 1, false},
		{shardfmt.BOOL, "", 0.5, 0, true},
	}
	for _, c := range cases {
		buf := make([]byte, 8)
		err := newEncoder(c.dt, c.round).putFloat(buf, c.x)
		if c.wantErr {
			if !errors.Is(err, ErrValue) {
				t.Errorf("%s %v %s: err %v, want ErrValue", c.dt, c.x, c.round, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v: %v", c.dt, c.x, err)
			continue
		}
		got := int64(binary.LittleEndian.Uint64(buf))
		switch c.dt.Size() {
		case 1:
			got = int64(buf[0])
		case 4:
			got = int64(int32(binary.LittleEndian.Uint32(buf)))
		}
		if got != c.want {
			t.Errorf("%s %v %s: %d, want %d", c.dt, c.x, c.round, got, c.want)
		}
	}
}

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
		if got := pqread.DecimalInt64ToFloat64(c.unscaled, c.scale); got != c.want {
			t.Errorf("DecimalInt64ToFloat64(%d, %d) = %v, want %v", c.unscaled, c.scale, got, c.want)
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

// The reference below is an independent implementation of IEEE rounding,
// used to cross-check shardfmt's half-precision helpers that convert uses.

// halfBits describes an IEEE-style binary format for roundFloat.
type halfBits struct{ ebits, mbits uint }

var (
	fmtF16  = halfBits{5, 10}
	fmtBF16 = halfBits{8, 7}
)

// roundFloat returns the bit pattern of x rounded to nearest, ties to even,
// in the binary format f (sign, ebits exponent, mbits fraction; subnormals,
// infinities and NaN as in IEEE 754). Values beyond the largest finite value
// after rounding become infinities. A NaN keeps its sign and its top mbits
// payload bits and is made quiet.
func roundFloat(x float64, f halfBits) uint64 {
	b := math.Float64bits(x)
	sign := (b >> 63) << (f.ebits + f.mbits)
	expAllOnes := uint64(1)<<f.ebits - 1
	if math.IsNaN(x) {
		payload := (b & (1<<52 - 1)) >> (52 - f.mbits)
		payload |= 1 << (f.mbits - 1)
		return sign | expAllOnes<<f.mbits | payload
	}
	a := math.Abs(x)
	if math.IsInf(a, 0) {
		return sign | expAllOnes<<f.mbits
	}
	if a == 0 {
		return sign
	}
	bias := int(1)<<(f.ebits-1) - 1
	emin := 1 - bias
	_, e := math.Frexp(a) // a = frac * 2^e, frac in [0.5, 1)
	exp := e - 1          // a = 1.xxx * 2^exp
	if exp < emin {
		exp = emin // subnormal: fixed quantum
	}
	q := math.Ldexp(a, int(f.mbits)-exp) // exact: scaling by a power of two
	n := uint64(math.RoundToEven(q))     // n <= 2^(mbits+1)
	if n == 0 {
		return sign
	}
	// For a subnormal, n < 2^mbits is the fraction with exponent field 0, and
	// n == 2^mbits is the smallest normal; for a normal, n in [2^mbits,
	// 2^(mbits+1)] and the carry into the exponent field is the right answer.
	biased := uint64(exp+bias) - 1
	v := biased<<f.mbits + n
	if v>>f.mbits >= expAllOnes {
		return sign | expAllOnes<<f.mbits
	}
	return sign | v
}

// refF64ToF16 rounds x to IEEE binary16, nearest with ties to even.
func refF64ToF16(x float64) uint16 { return uint16(roundFloat(x, fmtF16)) }

// refF64ToBF16 rounds x to bfloat16, nearest with ties to even.
func refF64ToBF16(x float64) uint16 { return uint16(roundFloat(x, fmtBF16)) }

// refF16ToF64 widens IEEE binary16 bits to float64 exactly (NaN payload kept in
// the top fraction bits).
func refF16ToF64(h uint16) float64 { return float64(refF16ToF32(h)) }

// refF16ToF32 widens IEEE binary16 bits to float32 exactly. A NaN keeps its sign
// and payload, shifted into the top fraction bits (7E01 -> 7FC02000).
func refF16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | frac<<13)
	case exp == 0:
		if frac == 0 {
			return math.Float32frombits(sign)
		}
		// subnormal: frac * 2^-24, exact in float32
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}

// refBF16ToF32 widens bfloat16 bits to float32 exactly.
func refBF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// TestShardfmtHalfMatchesReference checks the helpers convert uses against
// the reference on every half pattern, midpoints and neighbours.
func TestShardfmtHalfMatchesReference(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		for _, x := range []float64{refF16ToF64(uint16(h)), float64(refBF16ToF32(uint16(h)))} {
			for _, y := range []float64{x, math.Nextafter(x, math.Inf(1)), math.Nextafter(x, math.Inf(-1)), x * (1 + 1.0/4096), x * (1 + 1.0/2048)} {
				if math.IsNaN(y) {
					continue
				}
				if got, _ := shardfmt.F64ToF16(y); got != refF64ToF16(y) {
					t.Fatalf("F64ToF16(%v) = %04x, reference %04x", y, got, refF64ToF16(y))
				}
				if got, _ := shardfmt.F64ToBF16(y); got != refF64ToBF16(y) {
					t.Fatalf("F64ToBF16(%v) = %04x, reference %04x", y, got, refF64ToBF16(y))
				}
			}
		}
		if math.Float32bits(shardfmt.F16ToF32(uint16(h))) != math.Float32bits(refF16ToF32(uint16(h))) {
			t.Fatalf("F16ToF32(%04x) differs", h)
		}
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
