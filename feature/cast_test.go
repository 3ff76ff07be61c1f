package feature

import (
	"encoding/binary"
	"errors"
	"math"
	"sync/atomic"
	"testing"

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

// TestNarrowFloatOverflowCounted: values beyond a narrow float's largest
// finite value are stored as ±Inf (±448 for F8_E4M3) and counted; values
// that round to the largest finite value, infinities into dtypes that have
// them, NaN and wider dtypes are not overflows.
func TestNarrowFloatOverflowCounted(t *testing.T) {
	for _, c := range []struct {
		dt       shardfmt.DType
		x        float64
		want     uint64 // stored bits
		overflow bool
	}{
		{shardfmt.F16, 65504, 0x7bff, false},
		{shardfmt.F16, 65519.99, 0x7bff, false}, // rounds down to 65504
		{shardfmt.F16, 65520, 0x7c00, true},
		{shardfmt.F16, -1e6, 0xfc00, true},
		{shardfmt.F16, math.Inf(1), 0x7c00, false}, // already infinite
		{shardfmt.F16, math.NaN(), 0x7e00, false},
		{shardfmt.BF16, 3.3895313892515355e38, 0x7f7f, false},
		{shardfmt.BF16, 1e300, 0x7f80, true},
		{shardfmt.F8_E4M3, 464, 0x7e, false}, // tie, to even 448
		{shardfmt.F8_E4M3, 465, 0x7e, true},  // saturates
		{shardfmt.F8_E4M3, -1000, 0xfe, true},
		{shardfmt.F8_E4M3, math.Inf(1), 0x7e, true}, // no infinity in E4M3FN
		{shardfmt.F8_E5M2, 57344, 0x7b, false},
		{shardfmt.F8_E5M2, 1e5, 0x7c, true},
		{shardfmt.F32, 1e300, 0x7f800000, false}, // IEEE float32 rounding, not counted
	} {
		var n atomic.Int64
		e := newEncoder(c.dt, "")
		e.overflows = &n
		dst := make([]byte, 8)
		if err := e.putFloat(dst, c.x); err != nil {
			t.Errorf("%s %v: %v", c.dt, c.x, err)
			continue
		}
		var got uint64
		switch c.dt.Size() {
		case 1:
			got = uint64(dst[0])
		case 2:
			got = uint64(binary.LittleEndian.Uint16(dst))
		case 4:
			got = uint64(binary.LittleEndian.Uint32(dst))
		}
		if got != c.want || (n.Load() == 1) != c.overflow || n.Load() > 1 {
			t.Errorf("%s %v: stored %#x, %d overflows; want %#x, overflow %v", c.dt, c.x, got, n.Load(), c.want, c.overflow)
		}
		// Integer sources go through the same rule.
		if c.x == math.Trunc(c.x) && math.Abs(c.x) < 1<<62 {
			n.Store(0)
			if err := e.putInt(dst, int64(c.x)); err != nil || (n.Load() == 1) != c.overflow {
				t.Errorf("%s int %v: %d overflows, err %v", c.dt, c.x, n.Load(), err)
			}
		}

		e.overflowErr = true
		err := e.putFloat(dst, c.x)
		if c.overflow != (err != nil) || (err != nil && !errors.Is(err, ErrValue)) {
			t.Errorf("%s %v under cast.overflow error: %v", c.dt, c.x, err)
		}
	}
	e := newEncoder(shardfmt.F16, "")
	e.overflowErr = true
	err := e.putFloat(make([]byte, 2), 70000)
	if err == nil || err.Error() != "value 70000 overflows F16 (largest finite 65504; cast.overflow is error)" {
		t.Errorf("message: %v", err)
	}
}
