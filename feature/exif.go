package feature

import (
	"bytes"
	"encoding/binary"
)

// EXIF orientation (SPEC.md §2.8.3): the Orientation tag (0x0112) of the
// first image file directory of an image's EXIF block, found in a JPEG's
// APP1 "Exif\0\0" segment, a PNG's eXIf chunk or a WebP's EXIF chunk
// (Exif version 2.32, §4.6.4; PNG 1.2 extension eXIf; the WebP container
// specification). The layout is TIFF 6.0's: a byte-order mark ("II"
// little-endian or "MM" big-endian), 42, the offset of IFD0, then its
// entry count and 12-byte entries (tag, type, count, value).

// exifOrientation returns the EXIF orientation (1 to 8) of an image of
// format f ("jpeg", "png" or "webp") whose encoded bytes are data: 1 when
// the image has no EXIF block, no Orientation tag, or a value outside 1 to
// 8, or when the block is malformed (an orientation that cannot be read
// is not applied, as Pillow's ImageOps.exif_transpose does not apply it).
func exifOrientation(data []byte, f string) int {
	var tiff []byte
	switch f {
	case "jpeg":
		tiff = jpegExif(data)
	case "png":
		tiff = pngExif(data)
	case "webp":
		tiff = webpExif(data)
	}
	if tiff == nil {
		return 1
	}
	return tiffOrientation(tiff)
}

// jpegExif returns the TIFF block of a JPEG's first APP1 Exif segment
// before its first scan, or nil.
func jpegExif(d []byte) []byte {
	if len(d) < 4 || d[0] != 0xFF || d[1] != 0xD8 {
		return nil
	}
	p := 2
	for p+4 <= len(d) {
		if d[p] != 0xFF {
			return nil
		}
		m := d[p+1]
		if m == 0xFF { // fill byte
			p++
			continue
		}
		if m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7) {
			p += 2
			continue
		}
		if m == 0xDA || m == 0xD9 { // start of scan, end of image
			return nil
		}
		n := int(binary.BigEndian.Uint16(d[p+2:]))
		if n < 2 || p+2+n > len(d) {
			return nil
		}
		seg := d[p+4 : p+2+n]
		if m == 0xE1 && bytes.HasPrefix(seg, []byte("Exif\x00\x00")) {
			return seg[6:]
		}
		p += 2 + n
	}
	return nil
}

// pngExif returns the data of a PNG's eXIf chunk, or nil.
func pngExif(d []byte) []byte {
	const sig = "\x89PNG\r\n\x1a\n"
	if !bytes.HasPrefix(d, []byte(sig)) {
		return nil
	}
	p := len(sig)
	for p+8 <= len(d) {
		n := int(binary.BigEndian.Uint32(d[p:]))
		typ := string(d[p+4 : p+8])
		if n < 0 || n > len(d)-p-12 {
			return nil
		}
		if typ == "eXIf" {
			return d[p+8 : p+8+n]
		}
		if typ == "IEND" {
			return nil
		}
		p += 12 + n
	}
	return nil
}

// webpExif returns the data of a WebP's EXIF chunk (without an
// "Exif\0\0" prefix some writers add), or nil.
func webpExif(d []byte) []byte {
	if len(d) < 12 || string(d[:4]) != "RIFF" || string(d[8:12]) != "WEBP" {
		return nil
	}
	p := 12
	for p+8 <= len(d) {
		n := int(binary.LittleEndian.Uint32(d[p+4:]))
		if n < 0 || n > len(d)-p-8 {
			return nil
		}
		if string(d[p:p+4]) == "EXIF" {
			return bytes.TrimPrefix(d[p+8:p+8+n], []byte("Exif\x00\x00"))
		}
		p += 8 + n + n&1
	}
	return nil
}

// tiffOrientation reads tag 0x0112 (SHORT) of IFD0 of a TIFF block: 1 to
// 8, or 1.
func tiffOrientation(t []byte) int {
	if len(t) < 8 {
		return 1
	}
	var bo binary.ByteOrder
	switch string(t[:2]) {
	case "II":
		bo = binary.LittleEndian
	case "MM":
		bo = binary.BigEndian
	default:
		return 1
	}
	if bo.Uint16(t[2:]) != 42 {
		return 1
	}
	off := int64(bo.Uint32(t[4:]))
	if off < 8 || off+2 > int64(len(t)) {
		return 1
	}
	n := int64(bo.Uint16(t[off:]))
	for i := range n {
		e := off + 2 + 12*i
		if e+12 > int64(len(t)) {
			return 1
		}
		if bo.Uint16(t[e:]) != 0x0112 {
			continue
		}
		if bo.Uint16(t[e+2:]) != 3 || bo.Uint32(t[e+4:]) < 1 { // SHORT, at least one
			return 1
		}
		v := int(bo.Uint16(t[e+8:]))
		if v < 1 || v > 8 {
			return 1
		}
		return v
	}
	return 1
}

// orient returns the w x h image src (ch interleaved channels) transformed
// by EXIF orientation o, and its new width and height: 2 mirrors it left
// to right, 3 rotates it by 180°, 4 mirrors it top to bottom, 5 transposes
// it (mirror about the main diagonal), 6 rotates it 90° clockwise, 7
// transverses it (mirror about the other diagonal), 8 rotates it 90°
// counter-clockwise; Pillow's FLIP_LEFT_RIGHT, ROTATE_180, FLIP_TOP_BOTTOM,
// TRANSPOSE, ROTATE_270, TRANSVERSE and ROTATE_90, as
// ImageOps.exif_transpose applies them. 1 returns src.
func orient(src []byte, w, h, ch, o int) ([]byte, int, int) {
	if o <= 1 || o > 8 {
		return src, w, h
	}
	ow, oh := w, h
	if o >= 5 {
		ow, oh = h, w
	}
	dst := make([]byte, len(src))
	for y := range oh {
		for x := range ow {
			var sx, sy int
			switch o {
			case 2:
				sx, sy = w-1-x, y
			case 3:
				sx, sy = w-1-x, h-1-y
			case 4:
				sx, sy = x, h-1-y
			case 5:
				sx, sy = y, x
			case 6:
				sx, sy = y, h-1-x
			case 7:
				sx, sy = w-1-y, h-1-x
			case 8:
				sx, sy = w-1-y, x
			}
			copy(dst[(y*ow+x)*ch:(y*ow+x+1)*ch], src[(sy*w+sx)*ch:])
		}
	}
	return dst, ow, oh
}
