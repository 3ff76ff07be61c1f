package pqread

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/parquet-go/parquet-go/format"
)

// bitWidth returns the number of bits needed for values 0..max.
func bitWidth(max int) uint { return uint(bits.Len(uint(max))) }

// decodeHybrid decodes exactly len(dst) values of bw bits (bw <= 32) from
// the RLE / bit-packing hybrid encoding (parquet-format Encodings.md,
// "Run Length Encoding / Bit-Packing Hybrid"): a sequence of runs, each a
// ULEB128 header h; h&1 == 1 is a bit-packed run of (h>>1)*8 values packed
// LSB first, h&1 == 0 a repeated run of h>>1 copies of one value stored in
// ceil(bw/8) little-endian bytes. It fails rather than read past src or
// produce a value wider than bw bits. The last bit-packed run may be cut
// short as long as it covers the values needed. It returns the bytes used.
func decodeHybrid[T uint8 | uint32](dst []T, src []byte, bw uint) (int, error) {
	n := len(dst)
	if bw > 32 {
		return 0, fmt.Errorf("bit width %d above 32", bw)
	}
	if bw == 0 {
		clear(dst)
		return 0, nil
	}
	byteW := int(bw+7) / 8
	mask := uint64(1)<<bw - 1
	i, p := 0, 0
	for i < n {
		h, k := binary.Uvarint(src[p:])
		if k <= 0 {
			return p, fmt.Errorf("run header at byte %d: %d of %d values decoded", p, i, n)
		}
		p += k
		if h&1 == 1 {
			groups := h >> 1
			avail := len(src) - p
			take := n - i
			if groups < uint64(take+7)/8 {
				take = int(groups) * 8
			}
			need := (take*int(bw) + 7) / 8
			if need > avail {
				return p, fmt.Errorf("bit-packed run needs %d bytes, %d left", need, avail)
			}
			unpackLSB(dst[i:i+take], src[p:p+need], bw)
			full := groups * uint64(bw) // bytes of the whole run
			if full > uint64(avail) {
				p += avail
			} else {
				p += int(full)
			}
			i += take
			continue
		}
		count := h >> 1
		if len(src)-p < byteW {
			return p, fmt.Errorf("repeated run needs %d bytes, %d left", byteW, len(src)-p)
		}
		var v uint64
		for b := 0; b < byteW; b++ {
			v |= uint64(src[p+b]) << (8 * b)
		}
		p += byteW
		if v > mask {
			return p, fmt.Errorf("repeated value %d wider than %d bits", v, bw)
		}
		take := n - i
		if count < uint64(take) {
			take = int(count)
		}
		out := dst[i : i+take]
		for j := range out {
			out[j] = T(v)
		}
		i += take
	}
	return p, nil
}

// unpackLSB unpacks len(out) values of bw bits (1..32) packed LSB first
// from src, which holds at least ceil(len(out)*bw/8) bytes.
func unpackLSB[T uint8 | uint32](out []T, src []byte, bw uint) {
	if bw == 1 {
		// One bit per value: optional columns' definition levels, the
		// repetition levels of simple lists.
		if o8, ok := any(out).([]uint8); ok {
			// Eight levels per source byte, one 8-byte store each.
			n := len(o8) &^ 7
			for j := 0; j < n; j += 8 {
				binary.LittleEndian.PutUint64(o8[j:j+8], spreadBits[src[j>>3]])
			}
			for j := n; j < len(o8); j++ {
				o8[j] = src[j>>3] >> (uint(j) & 7) & 1
			}
			return
		}
		for j := range out {
			out[j] = T(src[j>>3] >> (uint(j) & 7) & 1)
		}
		return
	}
	mask := uint64(1)<<bw - 1
	j := 0
	if bw <= 8 {
		// Eight values take bw bytes: one load, eight shifts (dictionary
		// indices of a few distinct values, levels).
		for ; j+8 <= len(out) && (j>>3)*int(bw)+8 <= len(src); j += 8 {
			w := binary.LittleEndian.Uint64(src[(j>>3)*int(bw):])
			o := out[j : j+8 : j+8]
			o[0] = T(w & mask)
			o[1] = T(w >> bw & mask)
			o[2] = T(w >> (2 * bw) & mask)
			o[3] = T(w >> (3 * bw) & mask)
			o[4] = T(w >> (4 * bw) & mask)
			o[5] = T(w >> (5 * bw) & mask)
			o[6] = T(w >> (6 * bw) & mask)
			o[7] = T(w >> (7 * bw) & mask)
		}
	}
	// Values whose 8-byte window lies inside src: one unaligned load each.
	fast := j
	if len(src) >= 8 {
		fast = max(j, min(len(out), ((len(src)-8)*8)/int(bw)+1))
	}
	for ; j < fast; j++ {
		p := uint(j) * bw
		out[j] = T(binary.LittleEndian.Uint64(src[p>>3:]) >> (p & 7) & mask)
	}
	if fast == len(out) {
		return
	}
	var acc uint64
	var nb uint
	p := uint(fast) * bw
	q := int(p >> 3)
	if r := p & 7; r != 0 {
		acc = uint64(src[q]) >> r
		nb = 8 - r
		q++
	}
	for j := fast; j < len(out); j++ {
		for nb < bw {
			acc |= uint64(src[q]) << nb
			q++
			nb += 8
		}
		out[j] = T(acc & mask)
		acc >>= bw
		nb -= bw
	}
}

// decodeBitPackedLevels decodes len(dst) levels of the deprecated BIT_PACKED
// encoding (values packed MSB first, no header) and returns the bytes used.
func decodeBitPackedLevels(dst []uint8, src []byte, bw uint) (int, error) {
	need := (len(dst)*int(bw) + 7) / 8
	if need > len(src) {
		return 0, fmt.Errorf("BIT_PACKED levels need %d bytes, %d left", need, len(src))
	}
	pos := 0
	for i := range dst {
		var v uint8
		for range bw {
			v = v<<1 | (src[pos>>3]>>(7-uint(pos&7)))&1
			pos++
		}
		dst[i] = v
	}
	return need, nil
}

// spreadBits[b] holds bit i of b in byte i (little-endian): the eight 1-bit
// values packed LSB first in b, one per byte.
var spreadBits = func() (t [256]uint64) {
	for b := range t {
		for i := range 8 {
			t[b] |= uint64(b>>i&1) << (8 * i)
		}
	}
	return t
}()

// levelsV1 decodes n levels with maximum max from src in the given encoding
// (V1: RLE with a 4-byte length prefix, or BIT_PACKED), appends them to
// *dst and returns the bytes used, and whether every level is max (see
// levelsHybrid; false for BIT_PACKED).
func levelsV1(dst *[]uint8, src []byte, enc format.Encoding, max, n int, what string) (int, bool, error) {
	switch enc {
	case format.RLE:
		if len(src) < 4 {
			return 0, false, corruptf("%s levels: %d bytes, need a 4-byte length", what, len(src))
		}
		ln := int64(binary.LittleEndian.Uint32(src))
		if ln > int64(len(src)-4) {
			return 0, false, corruptf("%s levels: length %d exceeds the %d bytes left", what, ln, len(src)-4)
		}
		full, err := levelsHybrid(dst, src[4:4+ln], max, n, what)
		return 4 + int(ln), full, err
	case format.BitPacked:
		start := len(*dst)
		*dst = grow(*dst, n)
		out := (*dst)[start:]
		used, err := decodeBitPackedLevels(out, src, bitWidth(max))
		if err != nil {
			return 0, false, corruptf("%s levels: %v", what, err)
		}
		return used, false, checkLevels(out, max, what)
	}
	return 0, false, unsupportedf("unsupported %s level encoding %s", what, encodingName(enc))
}

// levelsHybrid decodes n RLE/bit-packed hybrid levels with maximum max from
// src (no length prefix), appends them to *dst and checks them. It reports
// whether every one of the n levels is max, decided from the runs
// themselves (allRuns): a page whose levels are repeated runs of max (no
// null, no empty list: how DuckDB, Arrow and Spark write an OPTIONAL
// column's page without nulls) or, at bit width 1, bit-packed runs of
// all ones, is filled without decoding or checking level by level.
func levelsHybrid(dst *[]uint8, src []byte, max, n int, what string) (bool, error) {
	start := len(*dst)
	*dst = grow(*dst, n)
	out := (*dst)[start:]
	bw := bitWidth(max)
	if allRuns(src, bw, n, uint64(max)) {
		fillLevel(out, uint8(max))
		return true, nil
	}
	if _, err := decodeHybrid(out, src, bw); err != nil {
		return false, corruptf("%s levels: %v", what, err)
	}
	if max == 1<<bw-1 {
		// decodeHybrid produced no value wider than bw bits, and every
		// value of bw bits is at most max.
		return false, nil
	}
	return false, checkLevels(out, max, what)
}

// allRuns reports whether decodeHybrid would decode the first n values of
// src (bit width bw, 1..8) without error into n copies of v: a sequence of
// repeated runs of v, and, for v == 1 at bit width 1, bit-packed runs whose
// first values are all ones. It reads each run's header and, for a
// bit-packed run, its bytes 64 values at a time; it reports false for
// anything else (other bit-packed runs, a short or damaged stream), which
// decodeHybrid then decodes or rejects.
func allRuns(src []byte, bw uint, n int, v uint64) bool {
	if bw == 0 || bw > 8 {
		return false
	}
	byteW := int(bw+7) / 8
	i, p := 0, 0
	for i < n {
		h, k := binary.Uvarint(src[p:])
		if k <= 0 {
			return false
		}
		p += k
		if h&1 == 1 {
			if bw != 1 || v != 1 {
				return false
			}
			groups := h >> 1
			avail := len(src) - p
			take := n - i
			if groups < uint64(take+7)/8 {
				take = int(groups) * 8
			}
			need := (take + 7) / 8
			if need > avail || !allOnes(src[p:p+need], take) {
				return false
			}
			if full := groups; full > uint64(avail) {
				p += avail
			} else {
				p += int(full)
			}
			i += take
			continue
		}
		// byteW is 1 for bw <= 8. A run of no values may repeat any
		// value of bw bits.
		count := h >> 1
		if len(src)-p < byteW || uint64(src[p]) != v && (count > 0 || uint64(src[p]) >= 1<<bw) {
			return false
		}
		p += byteW
		if count < uint64(n-i) {
			i += int(count)
		} else {
			i = n
		}
	}
	return true
}

// allOnes reports whether the first bits bits of b (LSB first; b holds
// ceil(bits/8) bytes) are all set.
func allOnes(b []byte, bits int) bool {
	whole := bits / 8
	j := 0
	for ; j+8 <= whole; j += 8 {
		if binary.LittleEndian.Uint64(b[j:]) != ^uint64(0) {
			return false
		}
	}
	for ; j < whole; j++ {
		if b[j] != 0xff {
			return false
		}
	}
	if r := bits % 8; r != 0 {
		m := byte(1)<<r - 1
		return b[whole]&m == m
	}
	return true
}

// fillLevel sets every byte of out to x, doubling the filled prefix with
// copy (memmove) instead of storing byte by byte.
func fillLevel(out []uint8, x uint8) {
	if len(out) == 0 {
		return
	}
	out[0] = x
	for f := 1; f < len(out); f *= 2 {
		copy(out[f:], out[:f])
	}
}

func checkLevels(lv []uint8, max int, what string) error {
	for i, v := range lv {
		if int(v) > max {
			return corruptf("%s level %d at entry %d exceeds the maximum %d", what, v, i, max)
		}
	}
	return nil
}

// countLevel returns how many levels in v equal x, eight at a time without
// a branch per level (a data-dependent branch costs far more than the count
// when nulls are scattered).
func countLevel(v []uint8, x uint8) int {
	const lows = 0x7f7f7f7f7f7f7f7f
	pat := uint64(x) * 0x0101010101010101
	n, i := 0, 0
	for ; i+8 <= len(v); i += 8 {
		// t has a zero byte exactly where v's byte equals x; the
		// expression counted sets the high bit of those bytes only.
		t := binary.LittleEndian.Uint64(v[i:]) ^ pat
		if t == 0 {
			n += 8
			continue
		}
		n += bits.OnesCount64(^((t&lows + lows) | t | lows))
	}
	for _, d := range v[i:] {
		if d == x {
			n++
		}
	}
	return n
}

// allLevels reports whether every level in v equals x, comparing eight
// levels at a time.
func allLevels(v []uint8, x uint8) bool {
	pat := uint64(x) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(v); i += 8 {
		if binary.LittleEndian.Uint64(v[i:]) != pat {
			return false
		}
	}
	for ; i < len(v); i++ {
		if v[i] != x {
			return false
		}
	}
	return true
}
