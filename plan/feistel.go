package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"slices"
)

// Algorithm identifies the permutation and order rules of PLAN.md. A change
// to any of them that changes an order needs a new id (and new golden
// vectors); the old ones are never regenerated.
const Algorithm = "feistel6-mx/v1"

// FormatVersion is the plan file format written by Save and accepted by
// Load for every plan but a packed mixture. It is also the key prefix of
// §3, in every format.
const FormatVersion = "prep-plan/v1"

// FormatPackedMixture is the format of a plan that packs a mixture
// (PLAN.md §12.1): each epoch packs its own draws, recorded per epoch in
// packing.epochs. Load refuses a packed mixture in FormatVersion (made by
// an earlier prep, which packed the same documents in every epoch) with a
// message saying to make the plan again.
const FormatPackedMixture = "prep-plan/v2"

// feistelRounds is the number of Feistel rounds (even, so the two halves
// end up where they started).
const feistelRounds = 6

// Round-function multipliers: odd 64-bit constants. m1 is 2^64/φ
// (the golden-ratio increment of SplitMix64); m2 is the second multiplier of
// Stafford's "Mix13" variant of the MurmurHash3 finalizer.
const (
	mixM1 = 0x9E3779B97F4A7C15
	mixM2 = 0x94D049BB133111EB
)

// Key purposes (PLAN.md §Keys). Each names one use of the seed so that no
// two permutations share round keys.
const (
	purposeGlobal    = "global"
	purposeBlocks    = "blocks"
	purposeWindow    = "window"
	purposePartition = "partition"
)

// roundKeys are the six 64-bit Feistel round keys of one permutation.
type roundKeys [feistelRounds]uint64

// deriveKeys returns the round keys for (purpose, seed, epoch, index):
//
//	msg = "prep-plan/v1" 0x00 purpose 0x00 LE64(seed) LE64(epoch) LE64(index)
//	h0  = SHA-256(msg || 0x00), h1 = SHA-256(msg || 0x01)
//	k0..k3 = LE64 words 0..3 of h0, k4,k5 = LE64 words 0,1 of h1
func deriveKeys(purpose string, seed, epoch, index uint64) roundKeys {
	msg := make([]byte, 0, len(FormatVersion)+len(purpose)+2+24+1)
	msg = append(msg, FormatVersion...)
	msg = append(msg, 0)
	msg = append(msg, purpose...)
	msg = append(msg, 0)
	msg = binary.LittleEndian.AppendUint64(msg, seed)
	msg = binary.LittleEndian.AppendUint64(msg, epoch)
	msg = binary.LittleEndian.AppendUint64(msg, index)
	h0 := sha256.Sum256(append(msg, 0))
	h1 := sha256.Sum256(append(msg[:len(msg):len(msg)], 1))
	var k roundKeys
	for i := 0; i < 4; i++ {
		k[i] = binary.LittleEndian.Uint64(h0[8*i:])
	}
	k[4] = binary.LittleEndian.Uint64(h1[0:])
	k[5] = binary.LittleEndian.Uint64(h1[8:])
	return k
}

// roundF is the Feistel round function: a keyed 64-bit mixer, all
// arithmetic modulo 2^64.
func roundF(k, r uint64) uint64 {
	h := (r ^ k) * mixM1
	h ^= h >> 29
	h *= mixM2
	h ^= h >> 32
	return h
}

// Perm is a keyed pseudo-random permutation of [0, N) (PLAN.md §Permutation):
// a six-round Feistel network on w-bit integers, w = max(2, bitlen(N-1)),
// split into a high half of ceil(w/2) bits and a low half of floor(w/2)
// bits, with cycle-walking back into [0, N). It holds no tables: memory is
// O(1) and Apply and Invert are random access. The zero value is the
// identity on [0, 0). Safe for concurrent use.
type Perm struct {
	n      uint64
	hi, lo uint // widths of the high and low halves in bits
	keys   roundKeys
}

// newPerm returns the permutation of [0, n) with the given round keys.
func newPerm(n uint64, keys roundKeys) Perm {
	w := uint(2)
	if n > 1 {
		if b := uint(bits.Len64(n - 1)); b > w {
			w = b
		}
	}
	return Perm{n: n, hi: w - w/2, lo: w / 2, keys: keys}
}

// NewPerm returns the permutation of [0, n) for the key (purpose, seed,
// epoch, index) derived as in PLAN.md §Keys. Purposes used by plans are
// "global", "blocks", "window" and "partition".
func NewPerm(n uint64, purpose string, seed, epoch, index uint64) Perm {
	return newPerm(n, deriveKeys(purpose, seed, epoch, index))
}

// N returns the size of the permuted domain.
func (p Perm) N() uint64 { return p.n }

// encrypt applies the Feistel network once on [0, 2^w).
func (p Perm) encrypt(x uint64) uint64 {
	wl, wr := p.hi, p.lo
	l, r := x>>wr, x&(1<<wr-1)
	for i := 0; i < feistelRounds; i++ {
		l, r = r, (l^roundF(p.keys[i], r))&(1<<wl-1)
		wl, wr = wr, wl
	}
	return l<<wr | r
}

// decrypt inverts encrypt.
func (p Perm) decrypt(y uint64) uint64 {
	wl, wr := p.hi, p.lo
	l, r := y>>wr, y&(1<<wr-1)
	for i := feistelRounds - 1; i >= 0; i-- {
		// (l, r) = (R, L^F(R)) of the forward round; widths (wl, wr) = (wr, wl) of it.
		l, r = (r^roundF(p.keys[i], l))&(1<<wr-1), l
		wl, wr = wr, wl
	}
	return l<<wr | r
}

// Apply returns the image of x, x < N. It panics if x >= N.
func (p Perm) Apply(x uint64) uint64 {
	if x >= p.n {
		panic("plan: Perm.Apply out of range")
	}
	for {
		x = p.encrypt(x)
		if x < p.n {
			return x
		}
	}
}

// Invert returns the x with Apply(x) == y, y < N. It panics if y >= N.
func (p Perm) Invert(y uint64) uint64 {
	if y >= p.n {
		panic("plan: Perm.Invert out of range")
	}
	for {
		y = p.decrypt(y)
		if y < p.n {
			return y
		}
	}
}

// applyRange appends Apply(x) for every x in [lo, hi) to dst (hi <= N): the
// same network as encrypt, unrolled over its six rounds with the keys and
// half masks loaded once for the whole range, for batch-wise evaluation
// (Plan.RankBatch). Output is identical to calling Apply per x.
//
// Four positions go through the network side by side: the rounds of one
// value are a chain of dependent multiplies, so four independent chains
// keep the multiplier busy where one leaves it idle. Each lane walks its
// position's cycle (a result >= N is encrypted again) and, once inside
// [0, N), takes the next position, chosen without a branch, instead of one
// data-dependent branch per position that the processor mispredicts about
// as often as the cycle walks.
func (p *Perm) applyRange(lo, hi uint64, dst []uint64) []uint64 {
	k0, k1, k2, k3, k4, k5 := p.keys[0], p.keys[1], p.keys[2], p.keys[3], p.keys[4], p.keys[5]
	n, wlo := p.n, p.lo
	mh, ml := uint64(1)<<p.hi-1, uint64(1)<<p.lo-1
	// enc is encrypt on one value: six rounds, each masking the new right
	// half to the width of the old left half (hi bits for even rounds, lo
	// bits for odd ones).
	enc := func(y uint64) uint64 {
		l, r := y>>wlo, y&ml
		l, r = r, (l^roundF(k0, r))&mh
		l, r = r, (l^roundF(k1, r))&ml
		l, r = r, (l^roundF(k2, r))&mh
		l, r = r, (l^roundF(k3, r))&ml
		l, r = r, (l^roundF(k4, r))&mh
		l, r = r, (l^roundF(k5, r))&ml
		return l<<wlo | r
	}
	// Four lanes, each walking one position's cycle: a pass encrypts every
	// lane's value once and stores it at the lane's position in dst (a
	// value >= N is overwritten by a later pass); a lane whose value is
	// inside [0, N) is done and takes the next position, without a branch.
	// A lane's value is always the one to encrypt next: its position
	// itself before the first pass, a value >= N while it walks.
	base := len(dst)
	count := int(hi - lo)
	dst = slices.Grow(dst, count)[:base+count]
	out := dst[base:]
	next := 0 // the next position a lane takes
	if count >= 8 {
		y0, y1, y2, y3 := lo, lo+1, lo+2, lo+3
		a0, a1, a2, a3 := 0, 1, 2, 3
		next = 4
		for next <= count-4 {
			l0, r0 := y0>>wlo, y0&ml
			l1, r1 := y1>>wlo, y1&ml
			l2, r2 := y2>>wlo, y2&ml
			l3, r3 := y3>>wlo, y3&ml
			l0, r0 = r0, (l0^roundF(k0, r0))&mh
			l1, r1 = r1, (l1^roundF(k0, r1))&mh
			l2, r2 = r2, (l2^roundF(k0, r2))&mh
			l3, r3 = r3, (l3^roundF(k0, r3))&mh
			l0, r0 = r0, (l0^roundF(k1, r0))&ml
			l1, r1 = r1, (l1^roundF(k1, r1))&ml
			l2, r2 = r2, (l2^roundF(k1, r2))&ml
			l3, r3 = r3, (l3^roundF(k1, r3))&ml
			l0, r0 = r0, (l0^roundF(k2, r0))&mh
			l1, r1 = r1, (l1^roundF(k2, r1))&mh
			l2, r2 = r2, (l2^roundF(k2, r2))&mh
			l3, r3 = r3, (l3^roundF(k2, r3))&mh
			l0, r0 = r0, (l0^roundF(k3, r0))&ml
			l1, r1 = r1, (l1^roundF(k3, r1))&ml
			l2, r2 = r2, (l2^roundF(k3, r2))&ml
			l3, r3 = r3, (l3^roundF(k3, r3))&ml
			l0, r0 = r0, (l0^roundF(k4, r0))&mh
			l1, r1 = r1, (l1^roundF(k4, r1))&mh
			l2, r2 = r2, (l2^roundF(k4, r2))&mh
			l3, r3 = r3, (l3^roundF(k4, r3))&mh
			l0, r0 = r0, (l0^roundF(k5, r0))&ml
			l1, r1 = r1, (l1^roundF(k5, r1))&ml
			l2, r2 = r2, (l2^roundF(k5, r2))&ml
			l3, r3 = r3, (l3^roundF(k5, r3))&ml
			y0 = l0<<wlo | r0
			out[a0] = y0
			d0 := b2i(y0 < n)
			a0 = pickInt(d0, next, a0)
			y0 = pickU64(d0, lo+uint64(next), y0)
			next += d0
			y1 = l1<<wlo | r1
			out[a1] = y1
			d1 := b2i(y1 < n)
			a1 = pickInt(d1, next, a1)
			y1 = pickU64(d1, lo+uint64(next), y1)
			next += d1
			y2 = l2<<wlo | r2
			out[a2] = y2
			d2 := b2i(y2 < n)
			a2 = pickInt(d2, next, a2)
			y2 = pickU64(d2, lo+uint64(next), y2)
			next += d2
			y3 = l3<<wlo | r3
			out[a3] = y3
			d3 := b2i(y3 < n)
			a3 = pickInt(d3, next, a3)
			y3 = pickU64(d3, lo+uint64(next), y3)
			next += d3
		}
		// The lanes' last positions, walked one by one.
		for _, l := range [4]struct {
			y uint64
			a int
		}{{y0, a0}, {y1, a1}, {y2, a2}, {y3, a3}} {
			v := enc(l.y)
			for v >= n {
				v = enc(v)
			}
			out[l.a] = v
		}
	}
	// The positions no lane took.
	for q := next; q < count; q++ {
		y := enc(lo + uint64(q))
		for y >= n {
			y = enc(y)
		}
		out[q] = y
	}
	return dst
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pickInt returns a when d is 1, else b.
func pickInt(d, a, b int) int { return b + (a-b)&-d }

// pickU64 returns a when d is 1, else b.
func pickU64(d int, a, b uint64) uint64 { return b + (a-b)&-uint64(d) }
