package pqread

import (
	"encoding/binary"
	"fmt"
)

// Bounds on DELTA_BINARY_PACKED headers (parquet-format Encodings.md: the
// block size is a multiple of 128, the miniblock size a multiple of 32).
const (
	maxDeltaBlockSize  = 1 << 20
	maxDeltaMiniBlocks = 1 << 10
)

// deltaDecode decodes a DELTA_BINARY_PACKED stream holding exactly want
// values and appends them to dst. valueBits is 32 for INT32 and 64 for
// INT64: all arithmetic wraps in two's complement (as the spec requires), so
// a writer that computed INT32 deltas in 64 bits, giving miniblocks up to 33
// bits wide, still decodes to the exact values. Miniblock widths above 64
// are corrupt. It returns the bytes consumed: the header, and each block up
// to the last miniblock that holds a value.
//
// Layout: header = <block size in values> <miniblocks per block> <total
// value count> <first value (zigzag)>, all ULEB128; then blocks of <min
// delta (zigzag ULEB128)> <one bit-width byte per miniblock> <miniblocks,
// each (block size / miniblocks) values bit-packed LSB first>.
func deltaDecode(dst []int64, src []byte, want int, valueBits uint) ([]int64, int, error) {
	p := 0
	uv := func(what string) (uint64, error) {
		v, n := binary.Uvarint(src[p:])
		if n <= 0 {
			return 0, fmt.Errorf("delta %s: bad varint at byte %d", what, p)
		}
		p += n
		return v, nil
	}
	sv := func(what string) (int64, error) {
		v, n := binary.Varint(src[p:])
		if n <= 0 {
			return 0, fmt.Errorf("delta %s: bad varint at byte %d", what, p)
		}
		p += n
		return v, nil
	}
	blockSize, err := uv("block size")
	if err != nil {
		return dst, p, err
	}
	nMini, err := uv("miniblock count")
	if err != nil {
		return dst, p, err
	}
	total, err := uv("value count")
	if err != nil {
		return dst, p, err
	}
	first, err := sv("first value")
	if err != nil {
		return dst, p, err
	}
	if blockSize == 0 || blockSize%128 != 0 || blockSize > maxDeltaBlockSize {
		return dst, p, fmt.Errorf("delta block size %d is not a positive multiple of 128 up to %d", blockSize, maxDeltaBlockSize)
	}
	if nMini == 0 || nMini > maxDeltaMiniBlocks || blockSize%nMini != 0 || (blockSize/nMini)%32 != 0 {
		return dst, p, fmt.Errorf("delta miniblock count %d does not split block size %d into multiples of 32", nMini, blockSize)
	}
	if total != uint64(want) {
		return dst, p, fmt.Errorf("delta header holds %d values, the page needs %d", total, want)
	}
	if want == 0 {
		return dst, p, nil
	}
	if valueBits == 32 && int64(int32(first)) != first {
		return dst, p, fmt.Errorf("delta first value %d out of INT32 range", first)
	}
	perMini := int(blockSize / nMini)
	wrap := func(v uint64) int64 {
		if valueBits == 32 {
			return int64(int32(uint32(v)))
		}
		return int64(v)
	}
	prev := uint64(first)
	dst = append(dst, wrap(prev))
	left := want - 1
	for left > 0 {
		minDelta, err := sv("min delta")
		if err != nil {
			return dst, p, err
		}
		if len(src)-p < int(nMini) {
			return dst, p, fmt.Errorf("delta block needs %d bit widths, %d bytes left", nMini, len(src)-p)
		}
		widths := src[p : p+int(nMini)]
		p += int(nMini)
		for _, w := range widths {
			if left == 0 {
				break
			}
			if w > 64 {
				return dst, p, fmt.Errorf("delta miniblock bit width %d exceeds 64", w)
			}
			take := min(perMini, left)
			full := perMini * int(w) / 8
			need := (take*int(w) + 7) / 8
			avail := len(src) - p
			if need > avail {
				return dst, p, fmt.Errorf("delta miniblock needs %d bytes, %d left", need, avail)
			}
			mb := src[p : p+min(full, avail)]
			md := uint64(minDelta)
			for j := range take {
				prev += md + readBits(mb, uint64(j)*uint64(w), uint(w))
				dst = append(dst, wrap(prev))
			}
			p += len(mb)
			left -= take
		}
	}
	return dst, p, nil
}

// readBits returns the w-bit (w <= 64) little-endian bit field at bit
// offset pos of b. The caller guarantees the field lies inside b.
func readBits(b []byte, pos uint64, w uint) uint64 {
	if w == 0 {
		return 0
	}
	i := pos >> 3
	off := uint(pos & 7)
	if off+w <= 64 && i+8 <= uint64(len(b)) {
		v := binary.LittleEndian.Uint64(b[i:]) >> off
		if w < 64 {
			v &= 1<<w - 1
		}
		return v
	}
	var v uint64
	got := uint(0)
	for got < w {
		avail := 8 - off
		take := min(avail, w-got)
		v |= ((uint64(b[i]) >> off) & (1<<take - 1)) << got
		got += take
		i++
		off = 0
	}
	return v
}
