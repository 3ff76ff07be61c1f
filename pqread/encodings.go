package pqread

import (
	"encoding/binary"
	"fmt"

	"github.com/parquet-go/parquet-go/format"
)

// This file decodes the values of a data page in each encoding of the
// Parquet format (parquet-format Encodings.md), appending them to the
// reader's pending values.

// valueError is a failure at value k of the page being decoded.
type valueError struct {
	k   int
	err error
}

func (e *valueError) Error() string { return e.err.Error() }

func (e *valueError) Unwrap() error { return e.err }

// rowOfValue returns the row (within the row group) holding non-null value
// k of the page being decoded, whose n level entries are the last held and
// not yet counted in r.rows.
func (r *ColumnReader) rowOfValue(k, n int) int64 {
	if r.maxDef == 0 && r.maxRep == 0 {
		return r.rows + int64(k)
	}
	row := r.rows - 1 // a page may begin by going on with the last row started
	seen := 0
	for i := len(r.defs) - n; i < len(r.defs); i++ {
		if r.maxRep == 0 || r.reps[i] == 0 {
			row++
		}
		if int(r.defs[i]) == r.maxDef {
			if seen == k {
				return row
			}
			seen++
		}
	}
	return -1
}

func (r *ColumnReader) decodeValues(enc format.Encoding, src []byte, count int) error {
	v := r.vals
	typ := r.l.typ
	if v.indexed && count > 0 && enc != format.PlainDictionary && enc != format.RLEDictionary {
		v.unindex() // a fallback page: back to values copied out
	}
	bad := func() error {
		return unsupportedf("unsupported encoding %s for %s", encodingName(enc), physicalName(typ))
	}
	switch enc {
	case format.Plain:
		return r.plain(v, src, count)
	case format.PlainDictionary, format.RLEDictionary:
		if count == 0 {
			return nil
		}
		if r.dict == nil {
			return corruptf("dictionary-encoded page without a dictionary page")
		}
		if len(src) < 1 {
			return corruptf("dictionary indices: empty page")
		}
		bw := uint(src[0])
		if bw > 32 {
			return corruptf("dictionary index bit width %d above 32", bw)
		}
		var idx []uint32
		if v.indexed { // straight into the values' indices, kept once checked
			v.idx = grow(v.idx, count)[:len(v.idx)]
			idx = v.idx[len(v.idx) : len(v.idx)+count]
		} else {
			if cap(r.idx) < count {
				giveT(r.bufs, uint32sOf, r.idx)
				r.idx = takeT(r.bufs, uint32sOf, count, count)
			}
			idx = r.idx[:count]
		}
		if _, err := decodeHybrid(idx, src[1:], bw); err != nil {
			return corruptf("dictionary indices: %v", err)
		}
		dn := uint32(r.dict.n())
		// The largest index first, without a branch per index; the
		// first one out of range is looked for only when there is one.
		var top uint32
		for _, i := range idx {
			top = max(top, i)
		}
		if top >= dn {
			for j, i := range idx {
				if i >= dn {
					return &valueError{k: j, err: corruptf("dictionary index %d out of range (dictionary has %d values)", i, dn)}
				}
			}
		}
		if v.indexed {
			v.idx = v.idx[:len(v.idx)+count]
			v.dict = r.dict
			return nil
		}
		v.gather(r.dict, idx)
		return nil
	case format.RLE:
		if typ != format.Boolean {
			return bad()
		}
		if count == 0 {
			return nil
		}
		if len(src) < 4 {
			return corruptf("RLE booleans: missing length")
		}
		ln := int64(binary.LittleEndian.Uint32(src))
		if ln > int64(len(src)-4) {
			return corruptf("RLE booleans: length %d exceeds the %d bytes left", ln, len(src)-4)
		}
		tmp := make([]uint8, count)
		if _, err := decodeHybrid(tmp, src[4:4+ln], 1); err != nil {
			return corruptf("RLE booleans: %v", err)
		}
		for _, b := range tmp {
			v.b = append(v.b, b == 1)
		}
		return nil
	case format.DeltaBinaryPacked:
		var bitsW uint
		switch typ {
		case format.Int32:
			bitsW = 32
		case format.Int64:
			bitsW = 64
		default:
			return bad()
		}
		out, used, err := deltaDecode(r.lens[:0], src, count, bitsW)
		r.lens = out
		if err != nil {
			return corruptf("%v", err)
		}
		if used != len(src) {
			return corruptf("DELTA_BINARY_PACKED: %d bytes left over after %d values", len(src)-used, count)
		}
		if bitsW == 32 {
			for _, x := range out {
				v.i32 = append(v.i32, int32(x))
			}
		} else {
			v.i64 = append(v.i64, out...)
		}
		return nil
	case format.DeltaLengthByteArray:
		if typ != format.ByteArray {
			return bad()
		}
		lens, used, err := deltaDecode(r.lens[:0], src, count, 32)
		r.lens = lens
		if err != nil {
			return corruptf("DELTA_LENGTH_BYTE_ARRAY lengths: %v", err)
		}
		p := used
		for j, ln := range lens {
			if err := r.checkLen(j, ln, len(src)-p); err != nil {
				return err
			}
			v.appendBytes(src[p : p+int(ln)])
			p += int(ln)
		}
		if p != len(src) {
			return corruptf("DELTA_LENGTH_BYTE_ARRAY: %d bytes left over", len(src)-p)
		}
		return nil
	case format.DeltaByteArray:
		if typ != format.ByteArray && typ != format.FixedLenByteArray {
			return bad()
		}
		return r.deltaByteArray(src, count)
	case format.ByteStreamSplit:
		w := 0
		switch typ {
		case format.Float, format.Int32:
			w = 4
		case format.Double, format.Int64:
			w = 8
		case format.FixedLenByteArray:
			w = r.l.width
		default:
			return bad()
		}
		if len(src) != count*w {
			return corruptf("BYTE_STREAM_SPLIT: %d bytes for %d values of %d bytes", len(src), count, w)
		}
		tmp := make([]byte, len(src))
		for i := 0; i < count; i++ {
			for b := 0; b < w; b++ {
				tmp[i*w+b] = src[b*count+i]
			}
		}
		v.appendLE(tmp)
		return nil
	}
	return bad()
}

// checkLen validates the length of BYTE_ARRAY value j of the page against
// the bytes left and Limits.MaxValueBytes.
func (r *ColumnReader) checkLen(j int, ln int64, left int) error {
	if ln < 0 {
		return &valueError{k: j, err: corruptf("negative value length %d", ln)}
	}
	if m := r.f.lim.MaxValueBytes; m > 0 && ln > m {
		return &valueError{k: j, err: limitf("value length %d exceeds the limit of %d bytes", ln, m)}
	}
	if ln > int64(left) {
		return &valueError{k: j, err: corruptf("value length %d exceeds the %d bytes left in the page", ln, left)}
	}
	return nil
}

func (r *ColumnReader) deltaByteArray(src []byte, count int) error {
	v := r.vals
	pre, u1, err := deltaDecode(r.lens[:0], src, count, 32)
	r.lens = pre
	if err != nil {
		return corruptf("DELTA_BYTE_ARRAY prefix lengths: %v", err)
	}
	suf, u2, err := deltaDecode(r.lens2[:0], src[u1:], count, 32)
	r.lens2 = suf
	if err != nil {
		return corruptf("DELTA_BYTE_ARRAY suffix lengths: %v", err)
	}
	p := u1 + u2
	var prev []byte
	var cur []byte
	for j := range count {
		pl, sl := pre[j], suf[j]
		if pl < 0 || pl > int64(len(prev)) {
			return &valueError{k: j, err: corruptf("DELTA_BYTE_ARRAY prefix length %d exceeds the previous value's %d bytes", pl, len(prev))}
		}
		if err := r.checkLen(j, sl, len(src)-p); err != nil {
			return err
		}
		if err := r.checkLen(j, pl+sl, int(pl)+len(src)-p); err != nil {
			return err
		}
		cur = append(append(cur[:0], prev[:pl]...), src[p:p+int(sl)]...)
		p += int(sl)
		if v.kind == KindBytes {
			v.appendBytes(cur)
		} else {
			if len(cur) != v.width {
				return &valueError{k: j, err: corruptf("DELTA_BYTE_ARRAY value of %d bytes in a FIXED_LEN_BYTE_ARRAY(%d) column", len(cur), v.width)}
			}
			v.fix = append(v.fix, cur...)
		}
		prev, cur = cur, prev
	}
	if p != len(src) {
		return corruptf("DELTA_BYTE_ARRAY: %d bytes left over", len(src)-p)
	}
	return nil
}

// plain decodes count PLAIN values from src into v; src must hold exactly
// those values.
func (r *ColumnReader) plain(v *values, src []byte, count int) error {
	switch v.kind {
	case KindBool:
		need := (count + 7) / 8
		if len(src) < need {
			return corruptf("PLAIN booleans: %d bytes for %d values", len(src), count)
		}
		for i := range count {
			v.b = append(v.b, src[i>>3]>>(uint(i)&7)&1 == 1)
		}
		return nil
	case KindBytes:
		p := 0
		for j := range count {
			if len(src)-p < 4 {
				return &valueError{k: j, err: corruptf("PLAIN BYTE_ARRAY: value %d of %d runs past the page", j, count)}
			}
			ln := int64(binary.LittleEndian.Uint32(src[p:]))
			p += 4
			if err := r.checkLen(j, ln, len(src)-p); err != nil {
				return err
			}
			v.appendBytes(src[p : p+int(ln)])
			p += int(ln)
		}
		if p != len(src) {
			return corruptf("PLAIN BYTE_ARRAY: %d bytes left over after %d values", len(src)-p, count)
		}
		return nil
	}
	size := v.valueSize()
	if len(src) != count*size {
		return corruptf("PLAIN %s: %d bytes for %d values of %d bytes", physicalName(r.l.typ), len(src), count, size)
	}
	v.appendLE(src)
	return nil
}

// encodingName names a page or level encoding for an error message: its
// Parquet name, or its number when the file holds a value the format does
// not define (parquet-go's String gives "Encoding(?)" for those).
func encodingName(e format.Encoding) string {
	if s := e.String(); s != "Encoding(?)" {
		return s
	}
	return fmt.Sprintf("Encoding(%d)", int32(e))
}
