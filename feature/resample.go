package feature

import "math"

// Resampling of 8-bit images (SPEC.md §2.8.4): separable convolution with
// an antialiased kernel, weights quantized to fixed point, the horizontal
// pass first into an 8-bit intermediate image, then the vertical pass.
// The arithmetic is that of Pillow's ImagingResample (libImaging/Resample.c,
// Pillow 9 to 11: precompute_coeffs, normalize_coeffs_8bpc and the _8bpc
// passes), so that an image resized here equals Pillow's
// Image.resize(size, filter) of the same pixels. Every float operation is
// written with explicit conversions so that no compiler fuses a multiply
// and an add (the Go specification allows fusion otherwise): the
// coefficients, and so the pixels, do not depend on the machine.

// resampleFilter is one of the kernels of image.filter.
type resampleFilter int

const (
	filterBilinear resampleFilter = iota + 1 // triangle, support 1 (Pillow BILINEAR)
	filterArea                               // box, support 1/2 (Pillow BOX): area averaging when downscaling
	filterLanczos                            // Lanczos-3 windowed sinc, support 3 (Pillow LANCZOS)
)

// precisionBits is the fixed-point precision of the weights: 32 - 8 - 2
// (8 bits of pixel, 2 bits of headroom for kernels with negative lobes).
const precisionBits = 22

// kernel returns the filter function and its support (radius, in input
// pixels at scale 1).
func (f resampleFilter) kernel() (func(float64) float64, float64) {
	switch f {
	case filterArea:
		return func(x float64) float64 {
			if x > -0.5 && x <= 0.5 {
				return 1
			}
			return 0
		}, 0.5
	case filterLanczos:
		return func(x float64) float64 {
			if -3 <= x && x < 3 {
				return sinc(x) * sinc(float64(x/3))
			}
			return 0
		}, 3
	default:
		return func(x float64) float64 {
			if x < 0 {
				x = -x
			}
			if x < 1 {
				return 1 - x
			}
			return 0
		}, 1
	}
}

// sinc is sin(πx)/(πx), 1 at 0.
func sinc(x float64) float64 {
	if x == 0 {
		return 1
	}
	x = float64(x * math.Pi)
	return math.Sin(x) / x
}

// coeffs are the weights of a resize of one dimension from in to out
// samples: output sample i reads input samples [first[i], first[i]+n[i])
// with weights k[i*ksize : i*ksize+n[i]], fixed point with precisionBits.
type coeffs struct {
	ksize    int
	first, n []int
	k        []int32
}

// newCoeffs computes the weights of a resize of a dimension from in to out
// samples with filter f: the scale s = in/out; below 1 (upscaling) the
// kernel is used as is, above it is stretched by s (antialiasing: the
// support grows to support*s and the argument is divided by s). Output
// sample i is centred on input coordinate c = (i+0.5)*s; it reads inputs
// from trunc(c - support + 0.5) (at least 0) to trunc(c + support + 0.5)
// (at most in), each with weight kernel((j - c + 0.5)/s), the weights
// divided by their sum, then quantized to round-half-away-from-zero of
// w*2^22.
func newCoeffs(in, out int, f resampleFilter) coeffs {
	fn, support := f.kernel()
	scale := float64(in) / float64(out)
	fscale := max(scale, 1)
	support = float64(support * fscale)
	ksize := int(math.Ceil(support))*2 + 1
	c := coeffs{ksize: ksize, first: make([]int, out), n: make([]int, out), k: make([]int32, out*ksize)}
	w := make([]float64, ksize)
	ss := 1 / fscale
	for i := range out {
		center := float64((float64(i) + 0.5) * scale)
		lo := int(float64(center-support) + 0.5)
		if lo < 0 {
			lo = 0
		}
		hi := int(float64(center+support) + 0.5)
		if hi > in {
			hi = in
		}
		n := hi - lo
		var sum float64
		for j := range n {
			v := fn(float64(float64(float64(j+lo)-center)+0.5) * ss)
			w[j] = v
			sum += v
		}
		for j := range n {
			if sum != 0 {
				w[j] /= sum
			}
			q := float64(w[j] * (1 << precisionBits))
			if w[j] < 0 {
				c.k[i*ksize+j] = int32(-0.5 + q)
			} else {
				c.k[i*ksize+j] = int32(0.5 + q)
			}
		}
		c.first[i], c.n[i] = lo, n
	}
	return c
}

// clip8 is the 8-bit value of a fixed-point sum: floor(v / 2^22) clamped
// to [0, 255].
func clip8(v int32) byte {
	v >>= precisionBits
	switch {
	case v < 0:
		return 0
	case v > 255:
		return 255
	}
	return byte(v)
}

// resizeCrop resizes src (sw x sh pixels of ch interleaved 8-bit channels,
// row-major) to rw x rh with filter f and writes the window of the result
// at columns [x0, x0+dw) and rows [y0, y0+dh) into dst (dw x dh pixels,
// row stride dstride bytes). A dimension whose size does not change is not
// resampled (its pass is skipped, as Pillow skips it); the window is
// computed alone (only the output pixels in it, from only the input rows
// they read), and equals that window of the whole resized image.
func resizeCrop(dst []byte, dstride int, src []byte, sw, sh, ch, rw, rh, x0, y0, dw, dh int, f resampleFilter) {
	needH, needV := rw != sw, rh != sh
	// Horizontal pass: rows [ry0, ry1) of the source, columns [x0, x0+dw)
	// of the output width.
	ry0, ry1 := y0, y0+dh
	var cv coeffs
	if needV {
		cv = newCoeffs(sh, rh, f)
		ry0 = cv.first[y0]
		ry1 = 0
		for y := y0; y < y0+dh; y++ {
			ry1 = max(ry1, cv.first[y]+cv.n[y])
		}
	}
	tmp, tstride := src[ry0*sw*ch:], sw*ch
	tx0 := x0
	if needH {
		ch0 := newCoeffs(sw, rw, f)
		tstride, tx0 = dw*ch, 0
		tmp = make([]byte, (ry1-ry0)*tstride)
		for y := ry0; y < ry1; y++ {
			row := src[y*sw*ch : (y+1)*sw*ch]
			out := tmp[(y-ry0)*tstride:]
			for x := range dw {
				xx := x + x0
				k := ch0.k[xx*ch0.ksize : xx*ch0.ksize+ch0.n[xx]]
				in := row[ch0.first[xx]*ch:]
				if ch == 3 {
					in = in[:len(k)*3]
					s0, s1, s2 := int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1)), int32(1<<(precisionBits-1))
					for j, kv := range k {
						p := in[j*3 : j*3+3 : j*3+3]
						s0 += int32(p[0]) * kv
						s1 += int32(p[1]) * kv
						s2 += int32(p[2]) * kv
					}
					o := out[x*3 : x*3+3 : x*3+3]
					o[0], o[1], o[2] = clip8(s0), clip8(s1), clip8(s2)
					continue
				}
				for c := range ch {
					s := int32(1 << (precisionBits - 1))
					for j, kv := range k {
						s += int32(in[j*ch+c]) * kv
					}
					out[x*ch+c] = clip8(s)
				}
			}
		}
	}
	if !needV {
		for y := range dh {
			copy(dst[y*dstride:y*dstride+dw*ch], tmp[(y0-ry0+y)*tstride+tx0*ch:])
		}
		return
	}
	acc := make([]int32, dw*ch)
	for y := range dh {
		yy := y + y0
		k := cv.k[yy*cv.ksize : yy*cv.ksize+cv.n[yy]]
		for i := range acc {
			acc[i] = 1 << (precisionBits - 1)
		}
		for j, kv := range k {
			row := tmp[(cv.first[yy]+j-ry0)*tstride+tx0*ch:]
			row = row[:len(acc)]
			for i, p := range row {
				acc[i] += int32(p) * kv
			}
		}
		out := dst[y*dstride : y*dstride+dw*ch]
		for i, s := range acc {
			out[i] = clip8(s)
		}
	}
}
