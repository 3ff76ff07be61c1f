package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// requirePIL skips t unless /usr/bin/python3 imports PIL and numpy
// (Debian's python3-pil and python3-numpy).
func requirePIL(t testing.TB) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import PIL, numpy").Run(); err != nil {
		t.Skip("skipping: /usr/bin/python3 with PIL and numpy not available (apt-get install python3-pil python3-numpy)")
	}
}

// pilImages writes testdata/pilref.py's test images into a temporary
// directory and returns it.
func pilImages(t testing.TB) string {
	t.Helper()
	requirePIL(t)
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "testdata/pilref.py", "gen", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("pilref.py gen: %v\n%s", err, out)
	}
	return dir
}

// pilJob is one reference image Pillow computes (pilref.py ref).
type pilJob struct {
	Src      string  `json:"src"`
	Out      string  `json:"out"`
	Channels int     `json:"channels"`
	Size     []int64 `json:"size,omitempty"`
	Resize   string  `json:"resize,omitempty"`
	Filter   string  `json:"filter,omitempty"`
	Fill     int     `json:"fill,omitempty"`
}

// pilRef runs jobs through pilref.py and returns, per job, Pillow's
// pixels and [height, width].
func pilRef(t testing.TB, jobs []pilJob) ([][]byte, [][2]int) {
	t.Helper()
	dir := t.TempDir()
	var in bytes.Buffer
	for i := range jobs {
		jobs[i].Out = filepath.Join(dir, fmt.Sprintf("%d.raw", i))
		b, _ := json.Marshal(jobs[i])
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("/usr/bin/python3", "testdata/pilref.py", "ref")
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pilref.py ref: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	pix := make([][]byte, len(jobs))
	sizes := make([][2]int, len(jobs))
	for i := range jobs {
		if err := json.Unmarshal([]byte(lines[i]), &sizes[i]); err != nil {
			t.Fatal(err)
		}
		if pix[i], err = os.ReadFile(jobs[i].Out); err != nil {
			t.Fatal(err)
		}
	}
	return pix, sizes
}

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

// diffStats returns the mean and largest absolute difference of a and b.
func diffStats(a, b []byte) (mean float64, most int) {
	var sum int
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d < 0 {
			d = -d
		}
		sum += d
		most = max(most, d)
	}
	return float64(sum) / float64(len(a)), most
}

// TestImagePNGMatchesPIL: PNGs (RGB, grey, palette, RGB with alpha, grey
// with alpha, and the eight EXIF orientations) decoded at their own size,
// so passed through without resampling, equal Pillow's pixels after
// ImageOps.exif_transpose and convert("RGB") or convert("L") exactly.
func TestImagePNGMatchesPIL(t *testing.T) {
	dir := pilImages(t)
	names := []string{"rgb.png", "grey.png", "palette.png", "rgba.png", "greya.png", "big.png", "wide.png", "tall.png"}
	for o := 1; o <= 8; o++ {
		names = append(names, fmt.Sprintf("orient%d.png", o))
	}
	var jobs []pilJob
	for _, n := range names {
		for _, c := range []int{3, 1} {
			jobs = append(jobs, pilJob{Src: filepath.Join(dir, n), Channels: c})
		}
	}
	want, sizes := pilRef(t, jobs)
	for i, j := range jobs {
		ip := testImagePlan(sizes[i][0], sizes[i][1], j.Channels, "", "")
		got, oh, ow := decodeFile(t, ip, j.Src)
		if oh != sizes[i][0] || ow != sizes[i][1] {
			t.Errorf("%s: size %dx%d, Pillow %dx%d", filepath.Base(j.Src), oh, ow, sizes[i][0], sizes[i][1])
		}
		if !bytes.Equal(got, want[i]) {
			mean, most := diffStats(got, want[i])
			t.Errorf("%s channels %d: differs from Pillow (mean %.3f, max %d)", filepath.Base(j.Src), j.Channels, mean, most)
		}
	}
}

// Stated bounds of a lossy image's decode against Pillow's (libjpeg-turbo
// and libwebp of Debian 12): the chroma upsampling and colour conversion
// are theirs (ycc.go), the inverse DCTs round their own ways (measured
// here: mean 0.05, largest 3).
const (
	lossyMaxMAE  = 0.25 // mean absolute difference per channel value
	lossyMaxDiff = 4    // largest absolute difference
)

// TestImageLossyWithinPIL: JPEGs (4:2:0, 4:4:4, grey, CMYK, EXIF
// orientation 6) and a lossy WebP decode within the stated mean absolute
// error of Pillow's decode; a lossless WebP equals it exactly.
func TestImageLossyWithinPIL(t *testing.T) {
	dir := pilImages(t)
	cases := []struct {
		name  string
		bound float64
	}{{"q90.jpg", lossyMaxMAE}, {"q90_444.jpg", lossyMaxMAE}, {"grey.jpg", lossyMaxMAE}, {"cmyk.jpg", lossyMaxMAE}, {"orient6.jpg", lossyMaxMAE}, {"lossy.webp", lossyMaxMAE}, {"lossless.webp", 0}}
	var jobs []pilJob
	for _, c := range cases {
		jobs = append(jobs, pilJob{Src: filepath.Join(dir, c.name), Channels: 3})
	}
	want, sizes := pilRef(t, jobs)
	for i, c := range cases {
		ip := testImagePlan(sizes[i][0], sizes[i][1], 3, "", "")
		got, _, _ := decodeFile(t, ip, jobs[i].Src)
		mean, most := diffStats(got, want[i])
		t.Logf("%s: mean absolute difference %.3f, max %d", c.name, mean, most)
		if mean > c.bound || most > lossyMaxDiff || (c.bound == 0 && most != 0) {
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
	dir := pilImages(t)
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
	var jobs []pilJob
	for _, k := range cases {
		for _, f := range []string{"bilinear", "area", "lanczos"} {
			for _, ch := range []int{3, 1} {
				jobs = append(jobs, pilJob{Src: filepath.Join(dir, k.src), Channels: ch, Size: k.size, Resize: k.resize, Filter: f, Fill: 17})
			}
		}
	}
	want, _ := pilRef(t, jobs)
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
		mean, most := diffStats(got, want[i])
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
