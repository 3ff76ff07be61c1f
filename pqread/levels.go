package pqread

import (
	"encoding/binary"
	"fmt"
	"math/bits"
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
	// Values whose 8-byte window lies inside src: one unaligned load each.
	fast := 0
	if len(src) >= 8 {
		fast = min(len(out), ((len(src)-8)*8)/int(bw)+1)
	}
	for j := 0; j < fast; j++ {
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
