package feature

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/image/webp"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// Image tensors (image policy, SPEC.md §2.8): each sample an encoded
// JPEG, PNG or WebP image, decoded (image/jpeg, image/png,
// golang.org/x/image/webp), turned upright by its EXIF orientation
// (exif.go), brought to the asked channels, resized (resample.go) and
// cropped or padded to a fixed U8 [H, W, C] tensor, channels last.

// ImagePolicy decodes a binary column (or the bytes field of a struct, as
// Hugging Face datasets write images: struct<bytes: binary, path: string>)
// into a fixed U8 tensor of shape [H, W, Channels] (SPEC.md §2.8).
//
//   - Size: [H, W], each in [1, 65535].
//   - Channels: 3 (RGB, the default) or 1 (grey: luma
//     (19595 R + 38470 G + 7471 B + 32768) >> 16).
//   - Resize: "shorter-side" (default: scaled to cover [H, W], keeping its
//     aspect, then cropped: Crop "center"), "fit" (scaled to fit inside,
//     keeping its aspect, centred on a background of Fill), "stretch"
//     (scaled to exactly [H, W]).
//   - Filter: "bilinear" (default), "area" or "lanczos": Pillow's
//     BILINEAR, BOX and LANCZOS kernels, antialiased when downscaling,
//     weights in 22-bit fixed point (resample.go).
//   - DType: "U8" (the default; the only one).
//   - Invalid: "error" (default: a truncated, corrupt or unsupported image
//     is an error naming file, column, row group and row) or "fill" (the
//     sample is Fill in every byte and "<name>_mask" is 0).
//   - Fill: the byte of a filled image and of fit's background, 0 to 255.
//   - OriginalSize: adds "<name>_original_size", I32 [2]: the image's
//     [height, width] after EXIF orientation ([0, 0] when filled).
type ImagePolicy struct {
	Size         []int64 `yaml:"size" json:"size"`
	Channels     int64   `yaml:"channels,omitempty" json:"channels,omitempty"`
	Resize       string  `yaml:"resize,omitempty" json:"resize,omitempty"`
	Crop         string  `yaml:"crop,omitempty" json:"crop,omitempty"`
	Filter       string  `yaml:"filter,omitempty" json:"filter,omitempty"`
	DType        string  `yaml:"dtype,omitempty" json:"dtype,omitempty"`
	Invalid      string  `yaml:"invalid,omitempty" json:"invalid,omitempty"`
	Fill         int64   `yaml:"fill,omitempty" json:"fill,omitempty"`
	OriginalSize bool    `yaml:"original_size,omitempty" json:"original_size,omitempty"`
}

// imageMaxSide is the largest H or W of image.size.
const imageMaxSide = 65535

// validateImage checks an image policy and the tensor keys it excludes,
// and sets the defaults the canonical form omits: DType "U8" on the
// tensor when absent, and image.dtype "" for "U8".
func (t *TensorSpec) validateImage() error {
	p := t.Image
	switch {
	case t.Column == "":
		return specErrorf("image policy needs a single column (a binary column, or a struct whose field bytes holds the image)")
	case t.List != nil || t.Bytes != nil || t.Map != nil || t.NaN != nil || t.Cast != nil:
		return specErrorf("image excludes list, bytes, map, nan and cast")
	case t.Shape != nil:
		return specErrorf("image takes no shape: it is [size[0], size[1], channels]")
	case t.Nulls != nil && t.Nulls.Fill != nil:
		return specErrorf("nulls.fill does not apply to an image: a null image is image.fill in every byte (give nulls: {} or nulls: {mask: true})")
	case len(p.Size) != 2:
		return specErrorf("image.size must be [height, width]")
	case p.Size[0] < 1 || p.Size[0] > imageMaxSide || p.Size[1] < 1 || p.Size[1] > imageMaxSide:
		return specErrorf("image.size %v: height and width must be in [1, %d]", p.Size, imageMaxSide)
	case p.Channels != 0 && p.Channels != 1 && p.Channels != 3:
		return specErrorf("image.channels must be 1 or 3, not %d (an alpha channel is not kept: see SPEC.md §2.8.2)", p.Channels)
	case p.Fill < 0 || p.Fill > 255:
		return specErrorf("image.fill must be in [0, 255], not %d", p.Fill)
	}
	switch p.Resize {
	case "", "shorter-side":
	case "fit", "stretch":
		if p.Crop != "" {
			return specErrorf("image.crop applies to resize: shorter-side only (fit and stretch keep the whole image)")
		}
	default:
		return specErrorf("image.resize must be shorter-side, fit or stretch, not %q", p.Resize)
	}
	if p.Crop != "" && p.Crop != "center" {
		return specErrorf("image.crop must be center, not %q", p.Crop)
	}
	if _, err := imageFilter(p.Filter); err != nil {
		return err
	}
	switch p.Invalid {
	case "", "error", "fill":
	case "skip":
		return specErrorf("image.invalid: skip is not offered: the plan fixes every epoch's batches before convert decodes an image, so a row cannot leave them here; use invalid: fill, whose <name>_mask marks the filled samples (SPEC.md §2.8.5)")
	default:
		return specErrorf("image.invalid must be error or fill, not %q", p.Invalid)
	}
	if p.DType != "" && p.DType != "U8" {
		return specErrorf("image.dtype must be U8, not %q", p.DType)
	}
	if t.DType != "" && t.DType != "U8" {
		return specErrorf("an image tensor's dtype is U8, not %q", t.DType)
	}
	t.DType, p.DType = "U8", ""
	return nil
}

// imageFilter parses image.filter.
func imageFilter(s string) (resampleFilter, error) {
	switch s {
	case "", "bilinear":
		return filterBilinear, nil
	case "area":
		return filterArea, nil
	case "lanczos":
		return filterLanczos, nil
	}
	return 0, specErrorf("image.filter must be bilinear, area or lanczos, not %q", s)
}

// imageMasked reports whether an image tensor has <name>_mask: under
// nulls.mask, or image.invalid fill.
func (t *TensorSpec) imageMasked() bool {
	return t.Image != nil && (t.Image.Invalid == "fill" || (t.Nulls != nil && t.Nulls.Mask))
}

// canonical returns p as a canonical-form object.
func (p *ImagePolicy) canonical() object {
	var o object
	o = append(o, member{"size", p.Size})
	if p.Channels != 0 {
		o = append(o, member{"channels", p.Channels})
	}
	o.str("resize", p.Resize)
	o.str("crop", p.Crop)
	o.str("filter", p.Filter)
	o.str("dtype", p.DType)
	o.str("invalid", p.Invalid)
	if p.Fill != 0 {
		o = append(o, member{"fill", p.Fill})
	}
	o.flag("original_size", p.OriginalSize)
	return o
}

// imageKind is a binary column of encoded images (image policy), each
// decoded to U8 [H, W, C].
type imageKind struct {
	*tensorPlan
	img *imagePlan
}

// outputs: <name>_original_size, under image.original_size, follows the
// mask.
func (tp *imageKind) outputs(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
	return tp.derived(out, false, nil, func(out []shardfmt.TensorInfo) []shardfmt.TensorInfo {
		if tp.spec.Image.OriginalSize {
			tp.img.origSize = len(out)
			out = append(out, shardfmt.TensorInfo{Name: DerivedName(tp.spec.Name, DerivedOriginalSize), DType: shardfmt.I32, Shape: []uint64{2}})
		}
		return out
	}, nil)
}

// imagePlan is an image policy compiled: the output geometry and the
// run's decoding limits.
type imagePlan struct {
	h, w, c  int
	resize   string
	filter   resampleFilter
	fill     bool // invalid: fill
	fillByte byte
	origSize int // index of <name>_original_size, -1 if none
	struc    bool
	run      *imageRun
}

// imageRun bounds a run's image decoding (setImageLimits): at most jobs
// images decode at once, within bytes of decoding memory together, and
// one image's decoding may take at most max bytes.
type imageRun struct {
	tokens chan struct{}
	mem    *Admission
	max    int64
}

// imageShare returns the most bytes of decoding memory (imageCost) the
// images decoding at once take under memoryLimit: a quarter of it, at
// least 1 MiB. An image whose header declares more is refused.
func imageShare(memoryLimit int64) int64 {
	return NewBudget(memoryLimit).Images()
}

// setImageLimits gives every image tensor of plans the run's decoding
// limits under memoryLimit with jobs decoders.
func setImageLimits(plans []*tensorPlan, memoryLimit int64, jobs int) {
	var ir *imageRun
	for _, p := range plans {
		tp, ok := p.kind.(*imageKind)
		if !ok {
			continue
		}
		if ir == nil {
			share := imageShare(memoryLimit)
			ir = &imageRun{tokens: make(chan struct{}, max(1, jobs)), mem: NewAdmission(share), max: share}
		}
		tp.img.run = ir
	}
}

// errImageLimit marks an image refused for the memory its decoding would
// take: an error whatever image.invalid says, since whether an image is
// filled must not depend on --memory-limit.
var errImageLimit = errors.New("image over the memory limit")

// imageFormat names the format of encoded image data from its first
// bytes: "jpeg", "png" or "webp"; a format recognised but not decoded, or
// none, is an error.
func imageFormat(d []byte) (string, error) {
	switch {
	case len(d) >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF:
		return "jpeg", nil
	case bytes.HasPrefix(d, []byte("\x89PNG\r\n\x1a\n")):
		return "png", nil
	case len(d) >= 12 && string(d[:4]) == "RIFF" && string(d[8:12]) == "WEBP":
		return "webp", nil
	}
	other := ""
	switch {
	case bytes.HasPrefix(d, []byte("GIF87a")) || bytes.HasPrefix(d, []byte("GIF89a")):
		other = "GIF"
	case bytes.HasPrefix(d, []byte("BM")):
		other = "BMP"
	case bytes.HasPrefix(d, []byte("II*\x00")) || bytes.HasPrefix(d, []byte("MM\x00*")):
		other = "TIFF"
	case len(d) >= 12 && string(d[4:8]) == "ftyp":
		other = "ISO media (AVIF or HEIF)"
	case bytes.HasPrefix(d, []byte{0xFF, 0x0A}) || bytes.HasPrefix(d, []byte("\x00\x00\x00\x0cJXL \r\n\x87\n")):
		other = "JPEG XL"
	case bytes.HasPrefix(d, []byte{0, 0, 1, 0}):
		other = "ICO"
	}
	if other != "" {
		return "", fmt.Errorf("%s images are not decoded (JPEG, PNG and WebP are)", other)
	}
	if len(d) == 0 {
		return "", errors.New("empty value, not an image")
	}
	return "", fmt.Errorf("not a JPEG, PNG or WebP image (it starts with % x)", d[:min(len(d), 8)])
}

// decodedBytesPerPixel bounds the bytes per pixel a decoder of format f
// holds for an image of color model m: its pixels, and for JPEG the
// coefficients of a progressive image (4 bytes a sample), for WebP the
// lossless decoder's ARGB buffers.
func decodedBytesPerPixel(f string, m color.Model) int64 {
	var px int64
	switch m {
	case color.GrayModel:
		px = 1
	case color.Gray16Model:
		px = 2
	case color.YCbCrModel:
		px = 3
	case color.CMYKModel, color.RGBAModel, color.NRGBAModel, color.NYCbCrAModel:
		px = 4
	default:
		if _, ok := m.(color.Palette); ok {
			px = 1
		} else {
			px = 8
		}
	}
	switch f {
	case "jpeg":
		return 5 * px
	case "webp":
		return px + 8
	}
	return px
}

// imageCost is the decoding memory of a w x h image of format f and color
// model m into ip's tensor: the decoder's (decodedBytesPerPixel), the
// image in the tensor's channels and once more turned by its orientation,
// and the resampler's horizontal pass (at most W columns of every row).
func (ip *imagePlan) imageCost(f string, m color.Model, w, h int64) int64 {
	c := int64(ip.c)
	return w*h*(decodedBytesPerPixel(f, m)+2*c) + int64(ip.w)*max(w, h)*c
}

// decodeImage decodes data into dst (ip's H x W x C bytes), returning the
// image's height and width after orientation. An image that cannot be
// decoded is an error; one whose decoding would take more than the run's
// share of the memory limit wraps errImageLimit.
func (ip *imagePlan) decodeImage(data, dst []byte) (oh, ow int, err error) {
	f, err := imageFormat(data)
	if err != nil {
		return 0, 0, err
	}
	var cfg image.Config
	switch f {
	case "jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	case "png":
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	default:
		cfg, err = webp.DecodeConfig(bytes.NewReader(data))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s header: %v", f, err)
	}
	w, h := int64(cfg.Width), int64(cfg.Height)
	if w <= 0 || h <= 0 {
		return 0, 0, fmt.Errorf("%s header declares %d x %d pixels", f, w, h)
	}
	limit := int64(1 << 28)
	ir := ip.run
	if ir != nil {
		limit = ir.max
	}
	cost := ip.imageCost(f, cfg.ColorModel, w, h)
	if w > 1<<20 || h > 1<<20 || cost > limit {
		return 0, 0, fmt.Errorf("%w: the %s header declares %d x %d pixels, whose decoding takes %d bytes, more than the %d one image may take (a quarter of the memory limit, at least 1 MiB); raise --memory-limit", errImageLimit, f, w, h, cost, limit)
	}
	if ir != nil {
		ir.tokens <- struct{}{}
		ir.mem.Admit(context.Background(), cost)
		defer func() {
			ir.mem.Release(cost)
			<-ir.tokens
		}()
	}
	var img image.Image
	switch f {
	case "jpeg":
		img, err = jpeg.Decode(bytes.NewReader(data))
	case "png":
		img, err = png.Decode(bytes.NewReader(data))
	default:
		img, err = webp.Decode(bytes.NewReader(data))
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v", f, err)
	}
	b := img.Bounds()
	if int64(b.Dx()) != w || int64(b.Dy()) != h {
		return 0, 0, fmt.Errorf("%s: decoded %d x %d pixels, its header says %d x %d", f, b.Dx(), b.Dy(), w, h)
	}
	pix := toChannels(img, ip.c, f)
	img = nil
	pix, iw, ih := orient(pix, int(w), int(h), ip.c, exifOrientation(data, f))
	ip.place(dst, pix, iw, ih)
	return ih, iw, nil
}

// resizedSize returns the size (rw, rh) an iw x ih image is scaled to
// for ip's resize mode and W x H: shorter-side covers W x H, fit fits
// inside it (keeping the aspect ratio; the other side rounded half up,
// at least 1), stretch is W x H.
func (ip *imagePlan) resizedSize(iw, ih int) (rw, rh int) {
	W, H := int64(ip.w), int64(ip.h)
	w, h := int64(iw), int64(ih)
	wider := w*H >= h*W // the image is at least as wide as W x H, relatively
	switch ip.resize {
	case "stretch":
		return ip.w, ip.h
	case "fit":
		if wider {
			return ip.w, int(max(1, (2*h*W+w)/(2*w)))
		}
		return int(max(1, (2*w*H+h)/(2*h))), ip.h
	}
	if wider {
		return int((2*w*H + h) / (2 * h)), ip.h
	}
	return ip.w, int((2*h*W + w) / (2 * w))
}

// place resizes pix (iw x ih, ip.c channels) into dst as ip's mode says:
// shorter-side takes the centre W x H of the resized image (offsets
// floor((rw-W)/2), floor((rh-H)/2)); fit puts the resized image at
// floor((W-rw)/2), floor((H-rh)/2) on a background of ip.fillByte;
// stretch is the resized image.
func (ip *imagePlan) place(dst, pix []byte, iw, ih int) {
	rw, rh := ip.resizedSize(iw, ih)
	c := ip.c
	if ip.resize == "fit" {
		for i := range dst {
			dst[i] = ip.fillByte
		}
		ox, oy := (ip.w-rw)/2, (ip.h-rh)/2
		resizeCrop(dst[(oy*ip.w+ox)*c:], ip.w*c, pix, iw, ih, c, rw, rh, 0, 0, rw, rh, ip.filter)
		return
	}
	x0, y0 := (rw-ip.w)/2, (rh-ip.h)/2
	resizeCrop(dst, ip.w*c, pix, iw, ih, c, rw, rh, x0, y0, ip.w, ip.h, ip.filter)
}

// toChannels returns img's pixels as c (1 or 3) interleaved 8-bit
// channels, row-major: RGB of its color model (YCbCr by
// ycc.go's rules, JPEG's and WebP's, CMYK by Pillow's rule R = 255-K - round(C(255-K)/255),
// 16-bit samples by their high byte, a palette by its entries, alpha
// dropped), then grey replicated to RGB, or RGB to luma
// (19595 R + 38470 G + 7471 B + 32768) >> 16 for one channel; a grey
// image to one channel is its grey.
func toChannels(img image.Image, c int, f string) []byte {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := make([]byte, w*h*c)
	put := func(i int, r, g, bl byte) {
		if c == 1 {
			out[i] = byte((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(bl) + 32768) >> 16)
			return
		}
		out[i*3], out[i*3+1], out[i*3+2] = r, g, bl
	}
	grey := func(i int, v byte) {
		if c == 1 {
			out[i] = v
			return
		}
		out[i*3], out[i*3+1], out[i*3+2] = v, v, v
	}
	switch m := img.(type) {
	case *image.Gray:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+w]
			for x, v := range row {
				grey(y*w+x, v)
			}
		}
	case *image.Gray16:
		for y := range h {
			for x := range w {
				grey(y*w+x, m.Pix[y*m.Stride+2*x])
			}
		}
	case *image.YCbCr:
		yccPixels(m, f == "webp", c, out)
	case *image.NYCbCrA:
		yccPixels(&m.YCbCr, f == "webp", c, out)
	case *image.CMYK:
		for y := range h {
			for x := range w {
				p := m.Pix[y*m.Stride+4*x:]
				nk := 255 - uint32(p[3])
				put(y*w+x, byte(nk-muldiv255(uint32(p[0]), nk)), byte(nk-muldiv255(uint32(p[1]), nk)), byte(nk-muldiv255(uint32(p[2]), nk)))
			}
		}
	case *image.NRGBA:
		for y := range h {
			for x := range w {
				p := m.Pix[y*m.Stride+4*x:]
				put(y*w+x, p[0], p[1], p[2])
			}
		}
	case *image.RGBA:
		for y := range h {
			for x := range w {
				p := m.Pix[y*m.Stride+4*x:]
				if p[3] == 255 {
					put(y*w+x, p[0], p[1], p[2])
					continue
				}
				n := color.NRGBAModel.Convert(color.RGBA{p[0], p[1], p[2], p[3]}).(color.NRGBA)
				put(y*w+x, n.R, n.G, n.B)
			}
		}
	case *image.NRGBA64:
		for y := range h {
			for x := range w {
				p := m.Pix[y*m.Stride+8*x:]
				put(y*w+x, p[0], p[2], p[4])
			}
		}
	case *image.Paletted:
		pal := make([][3]byte, len(m.Palette))
		for i, e := range m.Palette {
			n := color.NRGBAModel.Convert(e).(color.NRGBA)
			pal[i] = [3]byte{n.R, n.G, n.B}
		}
		for y := range h {
			for x := range w {
				k := int(m.Pix[y*m.Stride+x])
				var p [3]byte
				if k < len(pal) {
					p = pal[k]
				}
				put(y*w+x, p[0], p[1], p[2])
			}
		}
	default:
		// RGBA64 (16-bit RGB PNGs) and anything else: straight 16-bit
		// samples, their high byte.
		for y := range h {
			for x := range w {
				n := color.NRGBA64Model.Convert(img.At(x+b.Min.X, y+b.Min.Y)).(color.NRGBA64)
				put(y*w+x, byte(n.R>>8), byte(n.G>>8), byte(n.B>>8))
			}
		}
	}
	return out
}

// muldiv255 is round(a*b/255) for a, b in [0, 255], exactly as Pillow's
// MULDIV255: t = a*b + 128, ((t >> 8) + t) >> 8.
func muldiv255(a, b uint32) uint32 {
	t := a*b + 128
	return ((t >> 8) + t) >> 8
}

// apply decodes the needed rows of col (runs), a binary column, into
// image samples: at most the run's jobs images decoding at once across
// the run (setImageLimits), the rows of runs spread over that many
// goroutines; the error reported is that of the earliest failing row, so
// it does not depend on scheduling.
func (tp *imageKind) apply(col, _ *pqread.Column, _, _ int, runs []RowRun, bufs *Records, loc chunkLoc, _ *valueWriter) error {
	ip := tp.img
	type item struct {
		row  int
		slot int64
	}
	var items []item
	for _, r := range runs {
		for i := r.Lo; i < r.Hi; i++ {
			items = append(items, item{i, r.Dst + int64(i-r.Lo)})
		}
	}
	errs := make([]error, len(items))
	do := func(k int) {
		it := items[k]
		errs[k] = tp.imageRow(col, it.row, it.slot, bufs, loc)
	}
	workers := 1
	if ip.run != nil {
		workers = min(len(items), cap(ip.run.tokens))
	}
	if workers <= 1 {
		for k := range items {
			if do(k); errs[k] != nil {
				return errs[k]
			}
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(items) {
					return
				}
				do(k)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// nullError: a null image is filled under a null policy only (nulls.fill
// does not apply to an image).
func (tp *imageKind) nullError(col *pqread.Column, loc chunkLoc, row int) error {
	n := loc.chunkCounts(tp.tensorPlan, col).nulls
	return loc.err(int64(row), -1, ValueErrorf("null image (%d nulls in this column chunk; give nulls: {} to write them as image.fill in every byte, or nulls: {mask: true} to mark them too)", n))
}

// imageRow writes the image sample of row i of col into slot: decoded,
// or filled (a null row under nulls, or an invalid image under
// invalid: fill), with its mask and original size.
func (tp *imageKind) imageRow(col *pqread.Column, i int, slot int64, bufs *Records, loc chunkLoc) error {
	ip := tp.img
	dst := bufs.At(tp.out, slot)
	filled := func() {
		for k := range dst {
			dst[k] = ip.fillByte
		}
		tp.putMask(bufs, slot, false)
		if ip.origSize >= 0 {
			clear(bufs.At(ip.origSize, slot))
		}
	}
	if col.RowValid != nil && !col.RowValid[i] {
		if tp.spec.Nulls == nil {
			err := tp.nullError(col, loc, i)
			if ip.struc {
				var e *Error
				if errors.As(err, &e) {
					e.Err = fmt.Errorf("%w (the struct's bytes field is null: an image stored by path alone is not read)", e.Err)
				}
			}
			return err
		}
		filled()
		return nil
	}
	var v []byte
	if col.Kind == pqread.KindFixed {
		v = col.FixedData[i*col.Width : (i+1)*col.Width]
	} else {
		v = col.Data[col.ByteOffsets[i]:col.ByteOffsets[i+1]]
	}
	if tp.maxValue > 0 && int64(len(v)) > tp.maxValue {
		return loc.err(int64(i), -1, ValueErrorf("value is %d bytes long, more than max_value_bytes %d", len(v), tp.maxValue))
	}
	oh, ow, err := ip.decodeImage(v, dst)
	if err != nil {
		if ip.fill && !errors.Is(err, errImageLimit) {
			filled()
			return nil
		}
		if errors.Is(err, errImageLimit) {
			return loc.err(int64(i), -1, fmt.Errorf("%w: %v", pqread.ErrLimit, err))
		}
		return loc.err(int64(i), -1, ValueErrorf("bad image: %v (image.invalid: fill writes a filled image and a 0 in <name>_mask instead)", err))
	}
	tp.putMask(bufs, slot, true)
	if ip.origSize >= 0 {
		o := bufs.At(ip.origSize, slot)
		binary.LittleEndian.PutUint32(o, uint32(oh))
		binary.LittleEndian.PutUint32(o[4:], uint32(ow))
	}
	return nil
}

// compileImage makes tp an image tensor: U8 [H, W, C].
func compileImage(tp *tensorPlan) (*imageKind, error) {
	p := tp.spec.Image
	f, err := imageFilter(p.Filter)
	if err != nil {
		return nil, err
	}
	c := int(p.Channels)
	if c == 0 {
		c = 3
	}
	resize := p.Resize
	if resize == "" {
		resize = "shorter-side"
	}
	ik := &imageKind{tensorPlan: tp}
	ik.img = &imagePlan{h: int(p.Size[0]), w: int(p.Size[1]), c: c, resize: resize, filter: f,
		fill: p.Invalid == "fill", fillByte: byte(p.Fill), origSize: -1,
		struc: tp.cols[0][0].Name != tp.spec.Column}
	tp.shape = []uint64{uint64(p.Size[0]), uint64(p.Size[1]), uint64(c)}
	tp.es = 1
	return ik, nil
}

// imageBytesField returns the spec column name of the field bytes of the
// struct column name (Hugging Face datasets' struct<bytes, path>), in
// the same syntax: a JSON array of names gets "bytes" appended, a dotted
// path ".bytes".
func imageBytesField(name string) string {
	if strings.HasPrefix(name, "[") {
		var fields []string
		if err := json.Unmarshal([]byte(name), &fields); err == nil && len(fields) > 0 {
			b, _ := json.Marshal(append(fields, "bytes"))
			return string(b)
		}
	}
	return name + ".bytes"
}
