package feature

import (
	"bytes"
	"testing"
)

// tiffWith returns a TIFF block of byte order bo ("II" or "MM") whose IFD0
// holds one entry before the orientation (tag 0x010F) and then the
// Orientation tag of value o.
func tiffWith(bo string, o uint16) []byte {
	put16 := func(b []byte, v uint16) []byte {
		if bo == "II" {
			return append(b, byte(v), byte(v>>8))
		}
		return append(b, byte(v>>8), byte(v))
	}
	put32 := func(b []byte, v uint32) []byte {
		if bo == "II" {
			return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
		}
		return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	b := []byte(bo)
	b = put16(b, 42)
	b = put32(b, 8)
	b = put16(b, 2)
	b = put16(put16(b, 0x010F), 2)
	b = put32(put32(b, 4), 0)
	b = put16(put16(b, 0x0112), 3)
	b = put32(b, 1)
	b = put16(put16(b, o), 0)
	return put32(b, 0)
}

// TestExifOrientationContainers: the orientation is read from a JPEG
// APP1 segment after another APP segment, in either byte order, from a
// PNG eXIf chunk and from a WebP EXIF chunk; values outside 1 to 8 and
// truncated blocks give 1.
func TestExifOrientationContainers(t *testing.T) {
	jpegWith := func(tiff []byte) []byte {
		app1 := append([]byte("Exif\x00\x00"), tiff...)
		b := []byte{0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 'J', 'F'}
		b = append(b, 0xFF, 0xE1, byte((len(app1)+2)>>8), byte(len(app1)+2))
		return append(append(b, app1...), 0xFF, 0xDA, 0, 2)
	}
	pngWith := func(tiff []byte) []byte {
		b := []byte("\x89PNG\r\n\x1a\n")
		b = append(b, 0, 0, 0, 0, 'I', 'H', 'D', 'R', 0, 0, 0, 0)
		b = append(b, byte(len(tiff)>>24), byte(len(tiff)>>16), byte(len(tiff)>>8), byte(len(tiff)))
		return append(append(append(b, "eXIf"...), tiff...), 0, 0, 0, 0)
	}
	webpWith := func(tiff []byte) []byte {
		b := []byte("RIFF\x00\x00\x00\x00WEBPVP8X\x02\x00\x00\x00ab")
		b = append(b, "EXIF"...)
		b = append(b, byte(len(tiff)), byte(len(tiff)>>8), 0, 0)
		return append(b, tiff...)
	}
	for _, bo := range []string{"II", "MM"} {
		for o := uint16(1); o <= 8; o++ {
			tiff := tiffWith(bo, o)
			if got := exifOrientation(jpegWith(tiff), "jpeg"); got != int(o) {
				t.Errorf("jpeg %s %d: %d", bo, o, got)
			}
			if got := exifOrientation(pngWith(tiff), "png"); got != int(o) {
				t.Errorf("png %s %d: %d", bo, o, got)
			}
			if got := exifOrientation(webpWith(tiff), "webp"); got != int(o) {
				t.Errorf("webp %s %d: %d", bo, o, got)
			}
		}
	}
	for _, d := range [][]byte{jpegWith(tiffWith("MM", 9)), jpegWith(tiffWith("II", 0)), jpegWith(tiffWith("MM", 6)[:20]), {0xFF, 0xD8}} {
		if got := exifOrientation(d, "jpeg"); got != 1 {
			t.Errorf("%x: orientation %d, want 1", d, got)
		}
	}
	// orient 6 of a 3x2 image: 90° clockwise, 2x3, row 0 is the old
	// column 0 from the bottom up.
	src := []byte{1, 2, 3, 4, 5, 6} // rows [1 2 3] [4 5 6]
	got, w, h := orient(src, 3, 2, 1, 6)
	if w != 2 || h != 3 || !bytes.Equal(got, []byte{4, 1, 5, 2, 6, 3}) {
		t.Errorf("orient 6 = %v (%dx%d), want [4 1 5 2 6 3] (2x3)", got, w, h)
	}
}
