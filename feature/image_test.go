package feature

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// testImagePlan returns the image plan of an H x W x c tensor.
func testImagePlan(h, w, c int, resize, filter string) *imagePlan {
	if resize == "" {
		resize = "shorter-side"
	}
	f, err := imageFilter(filter)
	if err != nil {
		panic(err)
	}
	return &imagePlan{h: h, w: w, c: c, resize: resize, filter: f, origSize: -1}
}

// decodeFile decodes file path with ip, failing t on an error.
func decodeFile(t testing.TB, ip *imagePlan, path string) ([]byte, int, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, ip.h*ip.w*ip.c)
	oh, ow, err := ip.decodeImage(data, dst)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return dst, oh, ow
}

// TestImagePNGMatchesPIL: PNGs (RGB, grey, palette, RGB with alpha, grey
// with alpha, and the eight EXIF orientations) decoded at their own size,
// so passed through without resampling, equal Pillow's pixels after
// ImageOps.exif_transpose and convert("RGB") or convert("L") exactly.
func TestImagePNGMatchesPIL(t *testing.T) {
	dir := featuretest.PILImages(t)
	names := []string{"rgb.png", "grey.png", "palette.png", "rgba.png", "greya.png", "big.png", "wide.png", "tall.png"}
	for o := 1; o <= 8; o++ {
		names = append(names, fmt.Sprintf("orient%d.png", o))
	}
	var jobs []featuretest.PILJob
	for _, n := range names {
		for _, c := range []int{3, 1} {
			jobs = append(jobs, featuretest.PILJob{Src: filepath.Join(dir, n), Channels: c})
		}
	}
	want, sizes := featuretest.PILRef(t, jobs)
	for i, j := range jobs {
		ip := testImagePlan(sizes[i][0], sizes[i][1], j.Channels, "", "")
		got, oh, ow := decodeFile(t, ip, j.Src)
		if oh != sizes[i][0] || ow != sizes[i][1] {
			t.Errorf("%s: size %dx%d, Pillow %dx%d", filepath.Base(j.Src), oh, ow, sizes[i][0], sizes[i][1])
		}
		if !bytes.Equal(got, want[i]) {
			mean, most := featuretest.DiffStats(got, want[i])
			t.Errorf("%s channels %d: differs from Pillow (mean %.3f, max %d)", filepath.Base(j.Src), j.Channels, mean, most)
		}
	}
}

// TestImageLossyWithinPIL: JPEGs (4:2:0, 4:4:4, 4:2:2, grey, CMYK, EXIF
// orientation 6, odd sizes, one pixel wide) and a lossy WebP decode within the stated mean absolute
// error of Pillow's decode; a lossless WebP equals it exactly.
func TestImageLossyWithinPIL(t *testing.T) {
	dir := featuretest.PILImages(t)
	cases := []struct {
		name  string
		bound float64
	}{{"q90.jpg", featuretest.LossyMaxMAE}, {"q90_444.jpg", featuretest.LossyMaxMAE}, {"grey.jpg", featuretest.LossyMaxMAE}, {"cmyk.jpg", featuretest.LossyMaxMAE}, {"orient6.jpg", featuretest.LossyMaxMAE}, {"odd.jpg", featuretest.LossyMaxMAE}, {"thin.jpg", featuretest.LossyMaxMAE}, {"422.jpg", featuretest.LossyMaxMAE}, {"lossy.webp", featuretest.LossyMaxMAE}, {"lossless.webp", 0}}
	var jobs []featuretest.PILJob
	for _, c := range cases {
		jobs = append(jobs, featuretest.PILJob{Src: filepath.Join(dir, c.name), Channels: 3})
	}
	want, sizes := featuretest.PILRef(t, jobs)
	for i, c := range cases {
		ip := testImagePlan(sizes[i][0], sizes[i][1], 3, "", "")
		got, _, _ := decodeFile(t, ip, jobs[i].Src)
		mean, most := featuretest.DiffStats(got, want[i])
		t.Logf("%s: mean absolute difference %.3f, max %d", c.name, mean, most)
		if mean > c.bound || most > featuretest.LossyMaxDiff || (c.bound == 0 && most != 0) {
			t.Errorf("%s: mean absolute difference %.3f (max %d), bound %.1f", c.name, mean, most, c.bound)
		}
	}
}

// TestImageResizeMatchesPIL: every resize mode and filter, down and up,
// to one and three channels, equals Pillow's Image.resize with the same
// filter followed by its crop or paste: exactly for bilinear and area,
// within 1 (on at most 1 value in 1000) for lanczos, whose kernel calls
// sin (Go's math.Sin and the C library's may differ in the last bit).
func TestImageResizeMatchesPIL(t *testing.T) {
	dir := featuretest.PILImages(t)
	type c struct {
		src    string
		size   []int64
		resize string
	}
	var cases []c
	for _, src := range []string{"big.png", "wide.png", "tall.png", "rgb.png"} {
		for _, size := range [][]int64{{224, 224}, {100, 150}, {150, 100}, {300, 400}, {7, 5}} {
			for _, mode := range []string{"shorter-side", "fit", "stretch"} {
				cases = append(cases, c{src, size, mode})
			}
		}
	}
	var jobs []featuretest.PILJob
	for _, k := range cases {
		for _, f := range []string{"bilinear", "area", "lanczos"} {
			for _, ch := range []int{3, 1} {
				jobs = append(jobs, featuretest.PILJob{Src: filepath.Join(dir, k.src), Channels: ch, Size: k.size, Resize: k.resize, Filter: f, Fill: 17})
			}
		}
	}
	want, _ := featuretest.PILRef(t, jobs)
	var lanczosOff, lanczosAll int
	for i, j := range jobs {
		ip := testImagePlan(int(j.Size[0]), int(j.Size[1]), j.Channels, j.Resize, j.Filter)
		ip.fillByte = 17
		got, _, _ := decodeFile(t, ip, j.Src)
		if bytes.Equal(got, want[i]) {
			if j.Filter == "lanczos" {
				lanczosAll += len(got)
			}
			continue
		}
		mean, most := featuretest.DiffStats(got, want[i])
		if j.Filter == "lanczos" && most <= 1 {
			lanczosOff += int(mean*float64(len(got)) + 0.5)
			lanczosAll += len(got)
			continue
		}
		t.Errorf("%s %v %s %s channels %d: differs from Pillow (mean %.4f, max %d)", filepath.Base(j.Src), j.Size, j.Resize, j.Filter, j.Channels, mean, most)
	}
	t.Logf("lanczos: %d of %d values off by 1", lanczosOff, lanczosAll)
	if lanczosOff*1000 > lanczosAll {
		t.Errorf("lanczos: %d of %d values off by 1", lanczosOff, lanczosAll)
	}
}

// imgFixture writes n image rows (row groups of rg) from featuretest.PILImages' files
// and returns the plan, the images' directory and the spec parsed from
// yaml.
func imgFixture(t testing.TB, n, rg int, yaml string) (*plan.Plan, string, *Spec) {
	t.Helper()
	p, dir := featuretest.ImageSource(t, n, rg)
	spec, err := ParseSpec([]byte(yaml), "images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p, dir, spec
}

// bombPNG returns a valid PNG signature and IHDR declaring w x h RGBA
// pixels, followed by a few bytes of IDAT and IEND: a decompression bomb
// of a few dozen bytes.
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		binary.Write(&b, binary.BigEndian, uint32(len(data)))
		b.WriteString(typ)
		b.Write(data)
		binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(append([]byte(typ), data...)))
	}
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA
	chunk("IHDR", ihdr)
	chunk("IDAT", []byte{0x78, 0x9c, 0x62, 0x00, 0x00})
	chunk("IEND", nil)
	return b.Bytes()
}

// TestImageFormats: GIF, BMP, TIFF and other data are refused naming
// what they are; a 16-bit RGB PNG is its high bytes, as Pillow reads it.
func TestImageFormats(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want string
	}{
		{[]byte("GIF89a...."), "GIF images are not decoded (JPEG, PNG and WebP are)"},
		{[]byte("BM\x00\x00"), "BMP images are not decoded (JPEG, PNG and WebP are)"},
		{[]byte("II*\x00...."), "TIFF images are not decoded (JPEG, PNG and WebP are)"},
		{[]byte("\x00\x00\x00\x1cftypavif"), "ISO media (AVIF or HEIF) images are not decoded (JPEG, PNG and WebP are)"},
		{[]byte("hello"), "not a JPEG, PNG or WebP image (it starts with 68 65 6c 6c 6f)"},
		{nil, "empty value, not an image"},
	} {
		if _, err := imageFormat(c.data); err == nil || err.Error() != c.want {
			t.Errorf("%q: %v, want %q", c.data, err, c.want)
		}
	}
	// 16-bit RGB: the high byte of each sample (Pillow's RGB;16B).
	img := image.NewRGBA64(image.Rect(0, 0, 3, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(i*37 + 11)
	}
	for i := 6; i < len(img.Pix); i += 8 {
		img.Pix[i], img.Pix[i+1] = 0xff, 0xff
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	ip := testImagePlan(2, 3, 3, "", "")
	dst := make([]byte, 18)
	if _, _, err := ip.decodeImage(buf.Bytes(), dst); err != nil {
		t.Fatal(err)
	}
	for p := range 6 {
		for c := range 3 {
			if want := img.Pix[p*8+c*2]; dst[p*3+c] != want {
				t.Errorf("pixel %d channel %d = %d, want %d", p, c, dst[p*3+c], want)
			}
		}
	}
}

// BenchmarkImageJPEG224 decodes a 256x256 JPEG of featuretest.PILImages and resizes it
// to U8 [224, 224, 3] (bilinear), as make bench's image section does.
func BenchmarkImageJPEG224(b *testing.B) {
	dir := featuretest.PILImages(b)
	data, err := os.ReadFile(filepath.Join(dir, "q90.jpg"))
	if err != nil {
		b.Fatal(err)
	}
	ip := testImagePlan(224, 224, 3, "", "")
	dst := make([]byte, 224*224*3)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ip.decodeImage(data, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// imageSpecExample sets every image key and bytes.mode jagged.
const imageSpecExample = `
tensors:
  - name: img
    column: hf
    nulls: {mask: true}
    image: {size: [224, 200], channels: 1, resize: fit, filter: lanczos, dtype: U8, invalid: fill, fill: 7, original_size: true}
  - {name: pic, column: pic, dtype: U8, image: {size: [32, 32], resize: shorter-side, crop: center}}
  - {name: cap, column: cap, dtype: U8, bytes: {mode: jagged}, nulls: {}}
`

// TestImageSpecCanonicalForm: the canonical form of image and jagged
// bytes tensors, written out by hand from SPEC.md §5 (keys sorted,
// defaults given explicitly kept as given, the tensor's dtype U8 whether
// given or not, image.dtype omitted), is what Python's json.dumps writes;
// a version 1 hash never matches such a spec.
func TestImageSpecCanonicalForm(t *testing.T) {
	s, err := ParseSpec([]byte(imageSpecExample), "f.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tensors":[{"column":"hf","dtype":"U8","image":{"channels":1,"fill":7,"filter":"lanczos","invalid":"fill","original_size":true,"resize":"fit","size":[224,200]},"name":"img","nulls":{"mask":true}},` +
		`{"column":"pic","dtype":"U8","image":{"crop":"center","resize":"shorter-side","size":[32,32]},"name":"pic"},` +
		`{"bytes":{"mode":"jagged"},"column":"cap","dtype":"U8","name":"cap","nulls":{}}]}`
	if got := string(s.CanonicalJSON()); got != want {
		t.Errorf("canonical form\n%s\nwant\n%s", got, want)
	}
	featuretest.RequirePIL(t)
	cmd := exec.Command("/usr/bin/python3", "-c", `import hashlib, json, sys
out = json.dumps(json.loads(sys.stdin.buffer.read()), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
print("v2:sha256:" + hashlib.sha256(out).hexdigest())`)
	cmd.Stdin = strings.NewReader(want)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != s.Hash() {
		t.Errorf("Python's hash %s, Hash() %s", got, s.Hash())
	}
	if s.MatchesHash(s.hashV1()) {
		t.Error("a version 1 hash matches a spec with image and bytes.mode jagged")
	}
	names := []string{}
	for i := range s.Tensors {
		names = append(names, s.Tensors[i].outputNames()...)
	}
	if got := strings.Join(names, " "); got != "img img_mask img_original_size pic cap" {
		t.Errorf("outputs %s", got)
	}
}

// TestImageSpecRefusals: every refused image and jagged bytes spec names
// its reason.
func TestImageSpecRefusals(t *testing.T) {
	for _, c := range []struct{ tensor, want string }{
		{`{name: i, column: c, image: {size: [8, 8], invalid: skip}}`, "image.invalid: skip is not offered: the plan fixes every epoch's batches"},
		{`{name: i, column: c, image: {size: [8, 8], channels: 4}}`, "image.channels must be 1 or 3, not 4"},
		{`{name: i, column: c, image: {size: [8]}}`, "image.size must be [height, width]"},
		{`{name: i, column: c, image: {size: [0, 8]}}`, "height and width must be in [1, 65535]"},
		{`{name: i, column: c, image: {size: [8, 8], filter: cubic}}`, "image.filter must be bilinear, area or lanczos"},
		{`{name: i, column: c, image: {size: [8, 8], resize: fit, crop: center}}`, "image.crop applies to resize: shorter-side only"},
		{`{name: i, column: c, image: {size: [8, 8], dtype: F32}}`, "image.dtype must be U8"},
		{`{name: i, column: c, dtype: F32, image: {size: [8, 8]}}`, "an image tensor's dtype is U8"},
		{`{name: i, column: c, shape: [8, 8, 3], image: {size: [8, 8]}}`, "image takes no shape"},
		{`{name: i, column: c, nulls: {fill: 0}, image: {size: [8, 8]}}`, "nulls.fill does not apply to an image"},
		{`{name: i, column: c, image: {size: [8, 8], fill: 300}}`, "image.fill must be in [0, 255]"},
		{`{name: i, columns: [a, b], image: {size: [8, 8]}}`, "image policy needs a single column"},
		{`{name: b, column: c, dtype: I64, bytes: {mode: jagged}}`, "bytes.mode jagged writes U8, not I64"},
		{`{name: b, column: c, dtype: U8, bytes: {mode: jagged, max_len: 4}}`, "do not apply to mode jagged"},
		{`{name: b, column: c, dtype: U8, bytes: {mode: jagged}, list: {jagged: true}}`, "bytes.mode jagged reads one string or binary value per row"},
		{`{name: b, column: c, dtype: U8, bytes: {mode: jagged}, nulls: {fill: 0}}`, "nulls.fill does not apply to jagged bytes"},
		{`{name: i_mask, column: d, dtype: U8}
  - {name: i, column: c, image: {size: [8, 8], invalid: fill}}`, `tensor name "i_mask" used twice`},
	} {
		_, err := ParseSpec([]byte("tensors:\n  - "+c.tensor+"\n"), "f.yaml")
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.tensor, err, c.want)
		}
	}
}

// TestImageBombRefused: a 60-byte PNG declaring 100000 x 100000 pixels is
// refused from its header, before a pixel buffer is allocated, as over
// the memory limit (pqread.ErrLimit), whatever image.invalid says.
func TestImageBombRefused(t *testing.T) {
	bomb := bombPNG(100000, 100000)
	if _, err := png.DecodeConfig(bytes.NewReader(bomb)); err != nil {
		t.Fatalf("the bomb's header does not parse: %v", err)
	}
	ip := testImagePlan(8, 8, 3, "", "")
	ip.run = &imageRun{tokens: make(chan struct{}, 1), mem: NewAdmission(imageShare(1 << 30)), max: imageShare(1 << 30)}
	dst := make([]byte, 8*8*3)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := ip.decodeImage(bomb, dst)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errImageLimit) || !strings.Contains(err.Error(), "100000 x 100000") {
		t.Fatalf("error %v, want the image limit naming 100000 x 100000", err)
	}
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Errorf("%d bytes allocated refusing the bomb", d)
	}
	// Through stage 1, under invalid: fill, with a 64 MiB limit.
	src := t.TempDir()
	pqfixture.Of(featuretest.ImageRow{ID: 0, Img: bombPNG(8, 8)[:0]}, featuretest.ImageRow{ID: 1, Img: bomb}).WriteFile(t, filepath.Join(src, "bomb.parquet"))
	spec, err := ParseSpec([]byte("tensors:\n  - {name: img, column: img, image: {size: [8, 8], invalid: fill}}\n"), "bomb.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	_, err = Materialize(context.Background(), nil, p, spec, []uint64{0, 1}, Bounds{Memory: 64 << 20})
	if !errors.Is(err, pqread.ErrLimit) || !strings.Contains(err.Error(), `bomb.parquet`) || !strings.Contains(err.Error(), "row 1") || !strings.Contains(err.Error(), "raise --memory-limit") {
		t.Errorf("error %v, want a limit error naming bomb.parquet, row 1 and --memory-limit", err)
	}
}

// TestImageNullErrorNamesPolicy: a null image without nulls is an error
// naming file, column and row that points at the policies an image takes
// (nulls: {} or nulls: {mask: true}), not at nulls.fill, which an image
// refuses.
func TestImageNullErrorNamesPolicy(t *testing.T) {
	src := t.TempDir()
	pqfixture.Of(featuretest.ImageRow{ID: 0, Img: bombPNG(8, 8)}, featuretest.ImageRow{ID: 1}).WriteFile(t, filepath.Join(src, "nulls.parquet"))
	spec, err := ParseSpec([]byte("tensors:\n  - {name: img, column: img, image: {size: [8, 8], invalid: fill}}\n"), "nulls.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := featuretest.MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 2, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPad})
	_, err = Materialize(context.Background(), nil, p, spec, []uint64{0, 1}, Bounds{Memory: 64 << 20})
	if err == nil {
		t.Fatal("a null image without nulls was accepted")
	}
	for _, want := range []string{"nulls.parquet", `column "img"`, "row 1", "null image", "nulls: {}"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "nulls.fill") {
		t.Errorf("error %q suggests nulls.fill, which an image refuses", err)
	}
}
