package plan

import (
	"math/bits"
	"testing"
)

// permSizes are the domain sizes the bijection test enumerates completely:
// 0..3 and 2^k-1, 2^k, 2^k+1 for k up to 20 (2^k+1 is where a wrongly
// computed bit width stops being a bijection).
func permSizes(t testing.TB) []uint64 {
	sizes := []uint64{0, 1, 2, 3}
	maxK := 20
	if testing.Short() {
		maxK = 16
	}
	for k := 2; k <= maxK; k++ {
		sizes = append(sizes, 1<<k-1, 1<<k, 1<<k+1)
	}
	return sizes
}

func TestPermBijectionAndInverse(t *testing.T) {
	for _, n := range permSizes(t) {
		p := NewPerm(n, purposeGlobal, 42, 3, 0)
		seen := make([]uint64, (n+63)/64)
		for x := uint64(0); x < n; x++ {
			y := p.Apply(x)
			if y >= n {
				t.Fatalf("N=%d: Apply(%d) = %d out of range", n, x, y)
			}
			if seen[y/64]&(1<<(y%64)) != 0 {
				t.Fatalf("N=%d: Apply is not injective: %d hit twice", n, y)
			}
			seen[y/64] |= 1 << (y % 64)
			if back := p.Invert(y); back != x {
				t.Fatalf("N=%d: Invert(Apply(%d)) = %d", n, x, back)
			}
		}
	}
}

func TestPermLargeSampled(t *testing.T) {
	for _, n := range []uint64{1_000_000_007, 1 << 40, 1<<40 + 1, 1_000_000_000_000, 1<<63 - 1, 1<<63 + 1, 1<<64 - 1} {
		p := NewPerm(n, purposeGlobal, 0, 0, 0)
		w := uint(bits.Len64(n - 1))
		if p.hi+p.lo != w {
			t.Errorf("N=%d: width %d+%d, want %d", n, p.hi, p.lo, w)
		}
		x := uint64(12345)
		for i := 0; i < 2000; i++ {
			x = (x*6364136223846793005 + 1442695040888963407) % n
			y := p.Apply(x)
			if y >= n || p.Invert(y) != x {
				t.Fatalf("N=%d: x=%d y=%d inverse %d", n, x, y, p.Invert(y))
			}
		}
	}
}

// TestPermWidthTwoToTheKPlusOne pins the peer fault: the bit width of
// N = 2^k+1 must be k+1, so that 2^k (the largest index) is reachable.
func TestPermWidthTwoToTheKPlusOne(t *testing.T) {
	for k := 1; k < 63; k++ {
		n := uint64(1)<<k + 1
		p := NewPerm(n, purposeGlobal, 1, 0, 0)
		if got := p.hi + p.lo; got != uint(max(k+1, 2)) {
			t.Errorf("N=2^%d+1: width %d, want %d", k, got, k+1)
		}
		if p.Invert(1<<k) >= n {
			t.Errorf("N=2^%d+1: index 2^%d not reached", k, k)
		}
	}
}

func TestPermDependsOnEveryKeyInput(t *testing.T) {
	const n = 1000
	base := NewPerm(n, purposeGlobal, 5, 1, 0)
	for name, p := range map[string]Perm{
		"seed":    NewPerm(n, purposeGlobal, 6, 1, 0),
		"epoch":   NewPerm(n, purposeGlobal, 5, 2, 0),
		"index":   NewPerm(n, purposeGlobal, 5, 1, 1),
		"purpose": NewPerm(n, purposeBlocks, 5, 1, 0),
		// (seed, e+1) must differ from (seed+1, e).
		"seed+1,epoch-1": NewPerm(n, purposeGlobal, 6, 0, 0),
	} {
		same := 0
		for x := uint64(0); x < n; x++ {
			if p.Apply(x) == base.Apply(x) {
				same++
			}
		}
		if same > 20 { // a random permutation agrees on ~1 point
			t.Errorf("%s: %d of %d images equal the base permutation", name, same, n)
		}
	}
	if NewPerm(n, purposeGlobal, 0, 0, 0).Apply(0) == 0 && NewPerm(n, purposeGlobal, 0, 0, 0).Apply(1) == 1 {
		t.Error("seed 0 looks like the identity")
	}
}

func BenchmarkPermGlobal1e9(b *testing.B) {
	p := NewPerm(1_000_000_000, purposeGlobal, 7, 0, 0)
	var sink uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink += p.Apply(uint64(i) % 1_000_000_000)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mindices/s")
	_ = sink
}

// TestApplyRangeMatchesApply checks the batch-wise, unrolled evaluation
// against Apply, element by element, on sizes around powers of two (where a
// wrong half width breaks bijectivity) and odd widths, for partial ranges.
func TestApplyRangeMatchesApply(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 4, 5, 7, 8, 9, 17, 255, 256, 257, 1000, 1 << 12, 1<<12 + 1, 65537, 1_000_003} {
		p := NewPerm(n, purposeGlobal, 42, 3, 0)
		lo, hi := n/3, n-n/5
		if n > 5000 {
			lo, hi = n/2, n/2+3000
		}
		got := p.applyRange(lo, hi, []uint64{99})
		if uint64(len(got)) != 1+hi-lo || got[0] != 99 {
			t.Fatalf("n=%d: applyRange returned %d values (prefix %v), want 99 then %d", n, len(got), got[:min(1, len(got))], hi-lo)
		}
		for i, y := range got[1:] {
			if want := p.Apply(lo + uint64(i)); y != want {
				t.Fatalf("n=%d: applyRange at %d = %d, Apply = %d", n, lo+uint64(i), y, want)
			}
		}
	}
}

func BenchmarkApplyRange1e9(b *testing.B) {
	p := NewPerm(1_000_000_000, purposeGlobal, 7, 0, 0)
	dst := make([]uint64, 0, 1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lo := uint64(i) * 1024 % (1_000_000_000 - 1024)
		dst = p.applyRange(lo, lo+1024, dst[:0])
	}
	b.ReportMetric(float64(b.N)*1024/b.Elapsed().Seconds()/1e6, "Mindices/s")
}

// BenchmarkApplyRangeWalk2e7 is BenchmarkApplyRange1e9 for N = 2·10^7,
// whose domain (2^25) holds 40 % values >= N: most batches walk.
func BenchmarkApplyRangeWalk2e7(b *testing.B) {
	const n = 20_000_000
	p := NewPerm(n, purposeGlobal, 7, 0, 0)
	dst := make([]uint64, 0, 1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lo := uint64(i) * 1024 % (n - 1024)
		dst = p.applyRange(lo, lo+1024, dst[:0])
	}
	b.ReportMetric(float64(b.N)*1024/b.Elapsed().Seconds()/1e6, "Mindices/s")
}
