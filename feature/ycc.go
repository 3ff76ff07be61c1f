package feature

import "image"

// Colour conversion of decoded YCbCr images (SPEC.md §2.8.2). image/jpeg
// and golang.org/x/image/webp return the decoded planes with chroma at
// its coded resolution; these functions bring them to RGB the way the
// reference decoders do, so that the pixels agree with Pillow's decode:
//
//   - JPEG (JFIF, full range): libjpeg's "fancy" upsampling of 4:2:0 and
//     4:2:2 chroma more than 2 samples wide (jdsample.c,
//     h2v2_fancy_upsample and h2v1_fancy_upsample: triangular
//     interpolation with libjpeg's rounding, edges replicated), other
//     ratios and narrower chroma by replication; then
//     jdcolor.c's ycc_rgb_convert: R = Y + round(1.402 (Cr-128)),
//     G = Y + ((-22554 (Cb-128) + 32768 - 46802 (Cr-128)) >> 16),
//     B = Y + round(1.772 (Cb-128)), clamped to [0, 255], each rounding
//     (v·2^16 + 32768) >> 16 with v the constant in 16.16 fixed point
//     (91881, 116130).
//   - WebP lossy (VP8: BT.601 limited range): chroma upsampled as for
//     JPEG 4:2:0, then libwebp's VP8YUVToR/G/B (dsp/yuv.h, 14-bit fixed
//     point): R = clip((Y·19077 >> 8) + (V·26149 >> 8) - 14234),
//     G = clip((Y·19077 >> 8) - (U·6419 >> 8) - (V·13320 >> 8) + 8708),
//     B = clip((Y·19077 >> 8) + (U·33050 >> 8) - 17685), clip(v) being
//     v >> 6 clamped to [0, 255].

// upsampledChroma returns the full-resolution Cb and Cr rows of row y of
// m (w samples each) into cb and cr.
func upsampledChroma(m *image.YCbCr, y int, cb, cr []byte) {
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	switch {
	case (w+1)/2 <= 2:
		// libjpeg upsamples fancily only chroma more than 2 samples
		// wide (jdsample.c, jinit_upsampler); narrower, by replication.
		for x := range w {
			ci := m.COffset(x+b.Min.X, y+b.Min.Y)
			cb[x], cr[x] = m.Cb[ci], m.Cr[ci]
		}
	case m.SubsampleRatio == image.YCbCrSubsampleRatio420:
		cw, chh := (w+1)/2, (h+1)/2
		cy := y / 2
		ny := cy - 1
		if y%2 == 1 {
			ny = cy + 1
		}
		ny = min(max(ny, 0), chh-1)
		fancyH2V2(m.Cb[cy*m.CStride:cy*m.CStride+cw], m.Cb[ny*m.CStride:ny*m.CStride+cw], cb)
		fancyH2V2(m.Cr[cy*m.CStride:cy*m.CStride+cw], m.Cr[ny*m.CStride:ny*m.CStride+cw], cr)
	case m.SubsampleRatio == image.YCbCrSubsampleRatio422:
		cw := (w + 1) / 2
		fancyH2V1(m.Cb[y*m.CStride:y*m.CStride+cw], cb)
		fancyH2V1(m.Cr[y*m.CStride:y*m.CStride+cw], cr)
	default:
		for x := range w {
			ci := m.COffset(x+b.Min.X, y+b.Min.Y)
			cb[x], cr[x] = m.Cb[ci], m.Cr[ci]
		}
	}
}

// fancyH2V2 writes len(out) samples of libjpeg's h2v2 upsampling of the
// chroma row near (the nearest) with next (the row above for an even
// output row, below for an odd one).
func fancyH2V2(near, next, out []byte) {
	n := len(near)
	if n < 2 {
		for x := range out {
			out[x] = near[0]
		}
		return
	}
	put := func(i int, v int) {
		if i < len(out) {
			out[i] = byte(v)
		}
	}
	col := func(i int) int { return int(near[i])*3 + int(next[i]) }
	this, nxt := col(0), col(1)
	put(0, (this*4+8)>>4)
	put(1, (this*3+nxt+7)>>4)
	last := this
	this = nxt
	for c := 1; c < n-1; c++ {
		nxt = col(c + 1)
		put(2*c, (this*3+last+8)>>4)
		put(2*c+1, (this*3+nxt+7)>>4)
		last, this = this, nxt
	}
	put(2*(n-1), (this*3+last+8)>>4)
	put(2*(n-1)+1, (this*4+7)>>4)
}

// fancyH2V1 writes len(out) samples of libjpeg's h2v1 upsampling of the
// chroma row in.
func fancyH2V1(in, out []byte) {
	n := len(in)
	if n < 2 {
		for x := range out {
			out[x] = in[0]
		}
		return
	}
	put := func(i int, v int) {
		if i < len(out) {
			out[i] = byte(v)
		}
	}
	put(0, int(in[0]))
	put(1, (int(in[0])*3+int(in[1])+2)>>2)
	for c := 1; c < n-1; c++ {
		v := int(in[c]) * 3
		put(2*c, (v+int(in[c-1])+1)>>2)
		put(2*c+1, (v+int(in[c+1])+2)>>2)
	}
	put(2*(n-1), (int(in[n-1])*3+int(in[n-2])+1)>>2)
	put(2*(n-1)+1, int(in[n-1]))
}

// clamp8 clamps v to [0, 255].
func clamp8(v int) byte {
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return byte(v)
}

// jfifToRGB is libjpeg's ycc_rgb_convert of one sample.
func jfifToRGB(y, cb, cr byte) (byte, byte, byte) {
	b, r := int(cb)-128, int(cr)-128
	return clamp8(int(y) + (91881*r+32768)>>16),
		clamp8(int(y) + (-22554*b+32768-46802*r)>>16),
		clamp8(int(y) + (116130*b+32768)>>16)
}

// vp8Clip is libwebp's VP8Clip8: v >> 6 clamped to [0, 255].
func vp8Clip(v int) byte { return clamp8(v >> 6) }

// vp8ToRGB is libwebp's VP8YUVToR, VP8YUVToG and VP8YUVToB.
func vp8ToRGB(y, u, v byte) (byte, byte, byte) {
	yy := int(y) * 19077 >> 8
	return vp8Clip(yy + int(v)*26149>>8 - 14234),
		vp8Clip(yy - int(u)*6419>>8 - int(v)*13320>>8 + 8708),
		vp8Clip(yy + int(u)*33050>>8 - 17685)
}

// yccPixels writes the pixels of m, row-major, converted by conv after
// chroma upsampling (upsampledChroma), into out as c channels (1 or 3):
// RGB, or luma (19595 R + 38470 G + 7471 B + 32768) >> 16.
func yccPixels(m *image.YCbCr, vp8 bool, c int, out []byte) {
	b := m.Rect
	w, h := b.Dx(), b.Dy()
	cb, cr := make([]byte, w), make([]byte, w)
	for y := range h {
		upsampledChroma(m, y, cb, cr)
		row := m.Y[y*m.YStride : y*m.YStride+w]
		o := out[y*w*c : (y+1)*w*c]
		for x, yv := range row {
			var r, g, bl byte
			if vp8 {
				r, g, bl = vp8ToRGB(yv, cb[x], cr[x])
			} else {
				r, g, bl = jfifToRGB(yv, cb[x], cr[x])
			}
			if c == 3 {
				p := o[3*x : 3*x+3 : 3*x+3]
				p[0], p[1], p[2] = r, g, bl
			} else {
				o[x] = byte((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(bl) + 32768) >> 16)
			}
		}
	}
}
