package shardfmt

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"unsafe"
)

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

// narrowCase is one narrowing input with its expected bits and overflow
// flag.
type narrowCase[T uint8 | uint16] struct {
	name string
	in   float32
	want T
	ov   bool
}

// checkNarrow checks every case through the float32 function n32 (named
// name32) and, as float32 -> float64 is exact (NaN payloads: the conversion
// keeps the top bits), through n64 too.
func checkNarrow[T uint8 | uint16](t *testing.T, name32 string, n32 func(float32) (T, bool), n64 func(float64) (T, bool), cases []narrowCase[T]) {
	t.Helper()
	for _, tt := range cases {
		got, ov := n32(tt.in)
		if got != tt.want || ov != tt.ov {
			t.Errorf("%s: %s(%g [%08x]) = %#x, %v; want %#x, %v", tt.name, name32, tt.in, math.Float32bits(tt.in), got, ov, tt.want, tt.ov)
		}
		got64, ov64 := n64(float64(tt.in))
		if got64 != tt.want || ov64 != tt.ov {
			t.Errorf("%s: float64 variant of %s(%g [%08x]) = %#x, %v; want %#x, %v", tt.name, name32, tt.in, math.Float32bits(tt.in), got64, ov64, tt.want, tt.ov)
		}
	}
}

func TestF32ToF16Cases(t *testing.T) {
	checkNarrow(t, "F32ToF16", F32ToF16, F64ToF16, []narrowCase[uint16]{
		{"one", 1, 0x3C00, false},
		{"minus two", -2, 0xC000, false},
		{"zero", 0, 0x0000, false},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, false},
		// 1 + 2^-11 is halfway between 1 (even) and 1+2^-10 (odd): ties to even.
		{"tie down to even", 1 + 1.0/2048, 0x3C00, false},
		// 1 + 3*2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even).
		{"tie up to even", 1 + 3.0/2048, 0x3C02, false},
		{"just above tie", f32(math.Float32bits(1+1.0/2048) + 1), 0x3C01, false},
		{"just below tie", f32(math.Float32bits(1+3.0/2048) - 1), 0x3C01, false},
		{"largest finite", 65504, 0x7BFF, false},
		// 65520 is halfway between 65504 (odd mantissa) and 65536 (Inf): ties to even = Inf.
		{"first overflow (tie)", 65520, 0x7C00, true},
		{"just below overflow", f32(math.Float32bits(65520) - 1), 0x7BFF, false},
		{"negative overflow", -1e6, 0xFC00, true},
		{"inf", float32(math.Inf(1)), 0x7C00, false},
		{"-inf", float32(math.Inf(-1)), 0xFC00, false},
		{"smallest subnormal", 0x1p-24, 0x0001, false},
		{"largest subnormal", 0x3FFp-24, 0x03FF, false},
		{"smallest normal", 0x1p-14, 0x0400, false},
		// 2^-25 is halfway between 0 (even) and 2^-24 (odd): rounds to 0.
		{"half smallest subnormal", 0x1p-25, 0x0000, false},
		{"above half smallest subnormal", f32(math.Float32bits(0x1p-25) + 1), 0x0001, false},
		// 3*2^-25 is halfway between 2^-24 (odd) and 2^-23 (even).
		{"subnormal tie up", 0x3p-25, 0x0002, false},
		{"negative tiny to -0", -0x1p-30, 0x8000, false},
		// Rounding the largest subnormal up carries into the smallest normal.
		{"subnormal carry", 0x7FFp-25, 0x0400, false},
		// NaN whose payload's top 10 bits are zero: truncation would give 0x7C00 (Inf).
		{"nan low payload", f32(0x7F800001), 0x7E00, false},
		{"negative nan low payload", f32(0xFF800001), 0xFE00, false},
		{"quiet nan payload kept", f32(0x7FC02000), 0x7E01, false},
		{"signalling nan high payload", f32(0x7F802000), 0x7E01, false},
	})
}

func TestF32ToBF16Cases(t *testing.T) {
	checkNarrow(t, "F32ToBF16", F32ToBF16, F64ToBF16, []narrowCase[uint16]{
		{"one", 1, 0x3F80, false},
		{"negative zero", float32(math.Copysign(0, -1)), 0x8000, false},
		{"tie down to even", f32(0x3F808000), 0x3F80, false},
		{"tie up to even", f32(0x3F818000), 0x3F82, false},
		{"just above tie", f32(0x3F808001), 0x3F81, false},
		{"largest finite", f32(0x7F7F0000), 0x7F7F, false},
		{"below overflow", f32(0x7F7F7FFF), 0x7F7F, false},
		// Halfway between 0x7F7F (odd) and Inf: ties to even = Inf.
		{"first overflow (tie)", f32(0x7F7F8000), 0x7F80, true},
		{"max float32", math.MaxFloat32, 0x7F80, true},
		{"-max float32", -math.MaxFloat32, 0xFF80, true},
		{"inf", float32(math.Inf(1)), 0x7F80, false},
		{"smallest subnormal", f32(0x00010000), 0x0001, false},
		{"float32 subnormal tie to 0", f32(0x00008000), 0x0000, false},
		{"float32 subnormal above tie", f32(0x00008001), 0x0001, false},
		{"smallest float32 subnormal", f32(1), 0x0000, false},
		{"subnormal carry to normal", f32(0x007FFFFF), 0x0080, false},
		// Truncation would turn this NaN into 0x7F80 (Inf).
		{"nan low payload", f32(0x7F800001), 0x7FC0, false},
		{"negative nan low payload", f32(0xFF800001), 0xFFC0, false},
		{"nan payload kept", f32(0x7FC10000), 0x7FC1, false},
	})
}

func TestF8Cases(t *testing.T) {
	checkNarrow(t, "F32ToF8E4M3", F32ToF8E4M3, F64ToF8E4M3, []narrowCase[uint8]{
		{"one", 1, 0x38, false},
		{"minus one", -1, 0xB8, false},
		{"largest finite", 448, 0x7E, false},
		{"tie between 448 (even) and 480 (the NaN slot): to even", 464, 0x7E, false},
		{"would round to 480: saturates", 465, 0x7E, true},
		{"overflow", 1e9, 0x7E, true},
		{"negative overflow", -1e9, 0xFE, true},
		{"inf saturates", float32(math.Inf(1)), 0x7E, true},
		{"-inf saturates", float32(math.Inf(-1)), 0xFE, true},
		{"nan", float32(math.NaN()), 0x7F, false},
		{"smallest subnormal", 0x1p-9, 0x01, false},
		{"tie to even zero", 0x1p-10, 0x00, false},
		{"tie to even 2*2^-9", 0x3p-10, 0x02, false},
		{"smallest normal", 0x1p-6, 0x08, false},
		{"negative zero", float32(math.Copysign(0, -1)), 0x80, false},
	})
	checkNarrow(t, "F32ToF8E5M2", F32ToF8E5M2, F64ToF8E5M2, []narrowCase[uint8]{
		{"one", 1, 0x3C, false},
		{"largest finite", 57344, 0x7B, false},
		{"tie between 57344 (odd) and Inf: to even = Inf", 61440, 0x7C, true},
		{"just below the tie", 61439, 0x7B, false},
		{"-inf", float32(math.Inf(-1)), 0xFC, false},
		{"nan with low payload stays nan", f32(0x7F800001), 0x7E, false},
		{"smallest subnormal", 0x1p-16, 0x01, false},
		{"half the smallest subnormal: tie to even zero", 0x1p-17, 0x00, false},
	})
}

// TestWidenValues pins the widening of a few bit patterns to exact values.
func TestWidenValues(t *testing.T) {
	for _, tt := range []struct {
		h    uint16
		want uint32
	}{
		{0x3C00, 0x3F800000}, {0xC000, 0xC0000000}, {0x7BFF, 0x477FE000},
		{0x7C00, 0x7F800000}, {0x7E01, 0x7FC02000}, {0x0001, 0x33800000},
		{0x8000, 0x80000000}, {0x03FF, 0x387FC000}, {0xFC00, 0xFF800000},
	} {
		if got := math.Float32bits(F16ToF32(tt.h)); got != tt.want {
			t.Errorf("F16ToF32(%04x) = %08x, want %08x", tt.h, got, tt.want)
		}
	}
	if got := math.Float32bits(BF16ToF32(0x7FC1)); got != 0x7FC10000 {
		t.Errorf("BF16ToF32(7FC1) = %08x", got)
	}
	if got := F8E4M3ToF32(0x7E); got != 448 {
		t.Errorf("F8E4M3ToF32(7E) = %g, want 448", got)
	}
	if got := F8E4M3ToF32(0x01); got != 0x1p-9 {
		t.Errorf("F8E4M3ToF32(01) = %g, want 2^-9", got)
	}
	if got := F8E4M3ToF32(0xFF); !math.IsNaN(float64(got)) || !math.Signbit(float64(got)) {
		t.Errorf("F8E4M3ToF32(FF) = %g, want -NaN", got)
	}
	if got := F8E5M2ToF32(0x7B); got != 57344 {
		t.Errorf("F8E5M2ToF32(7B) = %g, want 57344", got)
	}
	if got := F8E5M2ToF32(0x7C); !math.IsInf(float64(got), 1) {
		t.Errorf("F8E5M2ToF32(7C) = %g, want +Inf", got)
	}
}

// quietBit returns the quiet-NaN bit of a format with mbits mantissa bits.
func quietBit(mbits uint) uint64 { return 1 << (mbits - 1) }

// TestRoundTripExhaustive widens every bit pattern of each narrow format and
// narrows it back: finite values and infinities must return the same bits
// with no overflow, quiet NaNs the same bits, signalling NaNs a NaN.
func TestRoundTripExhaustive(t *testing.T) {
	type conv struct {
		name   string
		f      minifloat
		n      int
		widen  func(uint64) float32
		narrow func(float32) (uint64, bool)
		narr64 func(float64) (uint64, bool)
	}
	convs := []conv{
		{"F16", fmtF16, 1 << 16, func(h uint64) float32 { return F16ToF32(uint16(h)) },
			func(x float32) (uint64, bool) { v, o := F32ToF16(x); return uint64(v), o },
			func(x float64) (uint64, bool) { v, o := F64ToF16(x); return uint64(v), o }},
		{"BF16", fmtBF16, 1 << 16, func(h uint64) float32 { return BF16ToF32(uint16(h)) },
			func(x float32) (uint64, bool) { v, o := F32ToBF16(x); return uint64(v), o },
			func(x float64) (uint64, bool) { v, o := F64ToBF16(x); return uint64(v), o }},
		{"F8_E4M3", fmtE4M3, 1 << 8, func(h uint64) float32 { return F8E4M3ToF32(uint8(h)) },
			func(x float32) (uint64, bool) { v, o := F32ToF8E4M3(x); return uint64(v), o },
			func(x float64) (uint64, bool) { v, o := F64ToF8E4M3(x); return uint64(v), o }},
		{"F8_E5M2", fmtE5M2, 1 << 8, func(h uint64) float32 { return F8E5M2ToF32(uint8(h)) },
			func(x float32) (uint64, bool) { v, o := F32ToF8E5M2(x); return uint64(v), o },
			func(x float64) (uint64, bool) { v, o := F64ToF8E5M2(x); return uint64(v), o }},
	}
	for _, c := range convs {
		bad := 0
		for h := uint64(0); h < uint64(c.n); h++ {
			x := c.widen(h)
			got, ov := c.narrow(x)
			got64, ov64 := c.narr64(float64(x))
			maxField := uint64(1<<c.f.ebits - 1)
			frac := h & (1<<c.f.mbits - 1)
			isNaN := h>>c.f.mbits&maxField == maxField && frac != 0 && (!c.f.fn || frac == 1<<c.f.mbits-1)
			want := h
			if isNaN {
				if !math.IsNaN(float64(x)) {
					t.Errorf("%s: widen(%x) = %g, want NaN", c.name, h, x)
				}
				want = h | quietBit(c.f.mbits)
				if c.f.fn {
					want = h
				}
			}
			if got != want || ov || got64 != want || ov64 {
				if bad++; bad < 10 {
					t.Errorf("%s: narrow(widen(%#x)) = %#x,%v (f64 %#x,%v), want %#x", c.name, h, got, ov, got64, ov64, want)
				}
			}
		}
	}
}

// refRound is an independent reference: it rounds x to the nearest of the
// sorted finite values of format f (ties to the even encoding), treating the
// step above the largest finite value as overflow. It works on exact
// rationals (math/big), so it is slow but obviously right.
type refFormat struct {
	vals []*big.Float // positive finite values, ascending, index = encoding order
	enc  []uint64
	next *big.Float // the value one ulp above the largest finite (overflow point)
}

func newRef(f minifloat, widen func(uint64) float32) *refFormat {
	r := &refFormat{}
	maxField := uint64(1<<f.ebits - 1)
	for h := uint64(0); h < 1<<(f.ebits+f.mbits); h++ {
		frac := h & (1<<f.mbits - 1)
		if h>>f.mbits == maxField && (!f.fn || frac == 1<<f.mbits-1) {
			continue
		}
		r.vals = append(r.vals, new(big.Float).SetPrec(0).SetFloat64(float64(widen(h))))
		r.enc = append(r.enc, h)
	}
	last := r.vals[len(r.vals)-1]
	prev := r.vals[len(r.vals)-2]
	r.next = new(big.Float).SetPrec(200).Sub(last, prev)
	r.next.Add(r.next, last)
	return r
}

// round returns the encoding of |x| rounded, or overflow.
func (r *refFormat) round(x *big.Float) (uint64, bool) {
	i := sort.Search(len(r.vals), func(i int) bool { return r.vals[i].Cmp(x) > 0 }) - 1
	lo := r.vals[i]
	var hi *big.Float
	hiEnc := uint64(0)
	if i+1 < len(r.vals) {
		hi, hiEnc = r.vals[i+1], r.enc[i+1]
	} else {
		hi, hiEnc = r.next, r.enc[i]+1
	}
	dlo := new(big.Float).SetPrec(300).Sub(x, lo)
	dhi := new(big.Float).SetPrec(300).Sub(hi, x)
	switch c := dlo.Cmp(dhi); {
	case c < 0:
		return r.enc[i], false
	case c > 0 || r.enc[i]&1 == 1:
		return hiEnc, i+1 >= len(r.vals)
	default:
		return r.enc[i], false
	}
}

// TestNarrowAgainstReference compares the narrowing functions with the exact
// reference on sampled float32 inputs and random float64 inputs, including
// every midpoint between adjacent F16 values and its float32 neighbours.
func TestNarrowAgainstReference(t *testing.T) {
	f16 := newRef(fmtF16, func(h uint64) float32 { return F16ToF32(uint16(h)) })
	bf16 := newRef(fmtBF16, func(h uint64) float32 { return BF16ToF32(uint16(h)) })
	e4 := newRef(fmtE4M3, func(h uint64) float32 { return F8E4M3ToF32(uint8(h)) })
	e5 := newRef(fmtE5M2, func(h uint64) float32 { return F8E5M2ToF32(uint8(h)) })
	check := func(name string, ref *refFormat, f minifloat, x float64, got uint64, ov bool) {
		t.Helper()
		ax := math.Abs(x)
		want, wov := ref.round(new(big.Float).SetPrec(0).SetFloat64(ax))
		if wov {
			want, _ = f.inf()
		}
		if math.Signbit(x) {
			want |= 1 << (f.ebits + f.mbits)
		}
		if got != want || ov != wov {
			t.Errorf("%s(%v [%016x]) = %#x,%v; want %#x,%v", name, x, math.Float64bits(x), got, ov, want, wov)
		}
	}
	step := uint32(65521)
	if testing.Short() {
		step = 1048573
	}
	var inputs []float32
	for b := uint32(0); b < 0x7F800000; b += step {
		inputs = append(inputs, f32(b), f32(b|0x80000000))
	}
	// F16 midpoints and their neighbours.
	for i := 0; i+1 < len(f16.vals); i++ {
		a, _ := f16.vals[i].Float64()
		b, _ := f16.vals[i+1].Float64()
		m := float32((a + b) / 2)
		inputs = append(inputs, m, math.Nextafter32(m, 0), math.Nextafter32(m, 1e9))
	}
	for _, x := range inputs {
		v, ov := F32ToF16(x)
		check("F32ToF16", f16, fmtF16, float64(x), uint64(v), ov)
		v, ov = F32ToBF16(x)
		check("F32ToBF16", bf16, fmtBF16, float64(x), uint64(v), ov)
		v8, ov := F32ToF8E4M3(x)
		check("F32ToF8E4M3", e4, fmtE4M3, float64(x), uint64(v8), ov)
		v8, ov = F32ToF8E5M2(x)
		check("F32ToF8E5M2", e5, fmtE5M2, float64(x), uint64(v8), ov)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		// Random float64 in the interesting exponent range, plus values close
		// to F16 midpoints that a float32 intermediate would round onto them.
		x := math.Ldexp(1+rng.Float64(), rng.IntN(80)-40)
		if rng.IntN(2) == 0 {
			x = -x
		}
		v, ov := F64ToF16(x)
		check("F64ToF16", f16, fmtF16, x, uint64(v), ov)
		v, ov = F64ToBF16(x)
		check("F64ToBF16", bf16, fmtBF16, x, uint64(v), ov)
		v8, ov := F64ToF8E4M3(x)
		check("F64ToF8E4M3", e4, fmtE4M3, x, uint64(v8), ov)
	}
}

// TestF64ToF16SingleRounding pins the double-rounding fault: going through
// float32 first lands exactly on a F16 tie and rounds the wrong way.
func TestF64ToF16SingleRounding(t *testing.T) {
	x := 1 + 0x1p-11 + 0x1p-40 // just above the tie between 0x3C00 and 0x3C01
	if got, _ := F64ToF16(x); got != 0x3C01 {
		t.Errorf("F64ToF16(1+2^-11+2^-40) = %04x, want 3c01", got)
	}
	if got, _ := F32ToF16(float32(x)); got != 0x3C00 {
		t.Errorf("F32ToF16(float32(1+2^-11+2^-40)) = %04x, want 3c00 (float32 rounds onto the tie)", got)
	}
	y := 1 + 0x1p-8 + 0x1p-40 // just above the BF16 tie between 0x3F80 and 0x3F81
	if got, _ := F64ToBF16(y); got != 0x3F81 {
		t.Errorf("F64ToBF16 = %04x, want 3f81", got)
	}
}

func BenchmarkF32ToF16(b *testing.B) { benchNarrow(b, F32ToF16) }

func BenchmarkF64ToBF16(b *testing.B) { benchNarrow(b, F64ToBF16) }

// benchNarrow times narrow over 4096 values from -700 in steps of 0.37;
// bytes are input bytes.
func benchNarrow[F float32 | float64](b *testing.B, narrow func(F) (uint16, bool)) {
	xs := make([]F, 4096)
	for i := range xs {
		xs[i] = F(i)*0.37 - 700
	}
	b.SetBytes(int64(len(xs)) * int64(unsafe.Sizeof(xs[0])))
	var sink uint16
	for b.Loop() {
		for _, x := range xs {
			h, _ := narrow(x)
			sink ^= h
		}
	}
	_ = sink
}
