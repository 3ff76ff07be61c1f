package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// TestRunImageMatchesPIL: a binary column and a Hugging Face struct
// column of PNG, JPEG and WebP images (with a null row, a truncated JPEG
// and a GIF) convert to U8 [H, W, C] tensors equal to Pillow's decode,
// exif_transpose, convert and resize with the same filter (exactly for
// PNGs, within the stated error for lossy images); invalid images and
// nulls are the fill value with mask 0 and original size [0, 0]; the
// shards are byte-identical under Jobs 1 and 3.
func TestRunImageMatchesPIL(t *testing.T) {
	const n = 33
	p, dir, spec := imgFixture(t, n, 8, imgSpecYAML)
	var jobs []pilJob
	for id := range n {
		name := imgSources[id%len(imgSources)]
		if name == "" || name[0] == '!' {
			continue
		}
		jobs = append(jobs,
			pilJob{Src: filepath.Join(dir, name), Channels: 3, Size: []int64{40, 56}, Filter: "area"},
			pilJob{Src: filepath.Join(dir, name), Channels: 1, Size: []int64{24, 24}, Resize: "fit", Filter: "lanczos", Fill: 9},
			pilJob{Src: filepath.Join(dir, name), Channels: 3})
	}
	want, sizes := pilRef(t, jobs)
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	s, err := feature.Materialize(context.Background(), nil, p, spec, ids, feature.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	if got := shardfmt.TensorList(s.Tensors); got != "[img U8 [40 56 3], img_mask U8 [], img_original_size I32 [2], hf U8 [24 24 1], hf_mask U8 []]" {
		t.Fatalf("tensors %s", got)
	}
	k := 0
	for i := range ids {
		name := imgSources[i%len(imgSources)]
		img, mask, orig, hf, hfMask := s.Sample(0, i), s.Sample(1, i), s.Sample(2, i), s.Sample(3, i), s.Sample(4, i)
		if name == "" || name[0] == '!' {
			if !bytes.Equal(img, bytes.Repeat([]byte{5}, 40*56*3)) || mask[0] != 0 || !bytes.Equal(orig, make([]byte, 8)) ||
				!bytes.Equal(hf, bytes.Repeat([]byte{9}, 24*24)) || hfMask[0] != 0 {
				t.Errorf("row %d (%q): not filled: mask %d, original size %x, hf mask %d", i, name, mask[0], orig, hfMask[0])
			}
			continue
		}
		lossy := !strings.HasSuffix(name, ".png")
		for j, got := range [][]byte{img, hf} {
			mean, most := diffStats(got, want[k+j])
			if (!lossy && most != 0) || mean > lossyMaxMAE || most > 2*lossyMaxDiff {
				t.Errorf("row %d (%s) tensor %d: differs from Pillow: mean %.3f, max %d", i, name, j, mean, most)
			}
		}
		if mask[0] != 1 || hfMask[0] != 1 {
			t.Errorf("row %d: masks %d %d, want 1", i, mask[0], hfMask[0])
		}
		if h, w := binary.LittleEndian.Uint32(orig), binary.LittleEndian.Uint32(orig[4:]); int(h) != sizes[k+2][0] || int(w) != sizes[k+2][1] {
			t.Errorf("row %d (%s): original size %dx%d, Pillow %dx%d", i, name, h, w, sizes[k+2][0], sizes[k+2][1])
		}
		k += 3
	}
	var snaps []string
	for _, jobs := range []int{1, 3} {
		out := filepath.Join(t.TempDir(), "out")
		if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: out, Jobs: jobs}); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snapshot(t, out))
	}
	if snaps[0] != snaps[1] {
		t.Error("shards differ between Jobs 1 and 3")
	}
}

// TestRunImageBadIsError: by default a truncated JPEG, a GIF and a null
// image are errors naming file, column, row group and row; a null in a
// Hugging Face struct says that an image stored by path is not read.
func TestRunImageBadIsError(t *testing.T) {
	for _, c := range []struct {
		yaml, want string
	}{
		{"tensors:\n  - {name: img, column: img, nulls: {}, image: {size: [8, 8]}}\n", `column "img", row group 0, row 6: bad image: jpeg: invalid JPEG format: short Huffman data`},
		{"tensors:\n  - {name: img, column: img, image: {size: [8, 8]}}\n", `column "img", row group 0, row 3: null value (1 nulls in this column chunk`},
		{"tensors:\n  - {name: hf, column: hf, image: {size: [8, 8]}}\n", `an image stored by path alone is not read`},
		{"tensors:\n  - {name: img, column: img, nulls: {}, image: {size: [8, 8]}}\n", ``},
	} {
		n := 12
		if c.want == "" {
			n = 6 // rows 0 to 5: no truncated JPEG, no GIF
		}
		p, _, spec := imgFixture(t, n, 100, c.yaml)
		if c.want == "" {
			n = 3
		}
		_, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: filepath.Join(t.TempDir(), "out")})
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.yaml, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "images.parquet") || !errors.Is(err, feature.ErrValue) {
			t.Errorf("%s: error %v, want one naming images.parquet and %q", c.yaml, err, c.want)
		}
	}
}

// requirePIL skips t unless /usr/bin/python3 imports PIL and numpy
// (Debian's python3-pil and python3-numpy), except under CI=true, where
// .ci/run installs them and their absence fails t.
func requirePIL(t testing.TB) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import PIL, numpy").Run(); err != nil {
		msg := "/usr/bin/python3 with PIL and numpy not available (apt-get install python3-pil python3-numpy)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("skipping: " + msg)
	}
}

// pilImages writes testdata/pilref.py's test images into a temporary
// directory and returns it.
func pilImages(t testing.TB) string {
	t.Helper()
	requirePIL(t)
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "../feature/testdata/pilref.py", "gen", dir).CombinedOutput()
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
	cmd := exec.Command("/usr/bin/python3", "../feature/testdata/pilref.py", "ref")
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

// Stated bounds of a lossy image's decode against Pillow's (libjpeg-turbo
// and libwebp of Debian 12): the chroma upsampling and colour conversion
// are theirs (ycc.go), the inverse DCTs round their own ways (measured
// here: mean 0.05, largest 3).
const (
	lossyMaxMAE  = 0.25 // mean absolute difference per channel value
	lossyMaxDiff = 4    // largest absolute difference
)

// imgRow is a row of the image test files: an image in a binary column
// and, as Hugging Face datasets write images, in a struct<bytes, path>.
type imgRow struct {
	ID  int64    `parquet:"id"`
	Img []byte   `parquet:"img,optional"`
	HF  *hfImage `parquet:"hf,optional"`
}

type hfImage struct {
	Bytes []byte `parquet:"bytes,optional"`
	Path  string `parquet:"path"`
}

// imgSources are the images of the test rows, by row id modulo their
// count: the names of pilImages' files, "" for a null row, "!trunc" for
// a truncated JPEG and "!gif" for a GIF.
var imgSources = []string{"big.png", "q90.jpg", "wide.png", "", "tall.png", "lossy.webp", "!trunc", "palette.png", "orient6.png", "!gif", "grey.jpg"}

// imgBytes returns the encoded image of name from dir (imgSources).
func imgBytes(t testing.TB, dir, name string) []byte {
	switch name {
	case "":
		return nil
	case "!gif":
		return []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")
	case "!trunc":
		b := imgBytes(t, dir, "q90.jpg")
		return b[:len(b)/3]
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// imgFixture writes n image rows (row groups of rg) from pilImages' files
// and returns the plan, the images' directory and the spec parsed from
// yaml.
func imgFixture(t testing.TB, n, rg int, yaml string) (*plan.Plan, string, *feature.Spec) {
	t.Helper()
	dir := pilImages(t)
	src := t.TempDir()
	var rows []imgRow
	for id := range n {
		b := imgBytes(t, dir, imgSources[id%len(imgSources)])
		r := imgRow{ID: int64(id), Img: b, HF: &hfImage{Bytes: b, Path: fmt.Sprintf("img%d", id)}}
		rows = append(rows, r)
	}
	f, err := os.Create(filepath.Join(src, "images.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[imgRow](f, parquet.MaxRowsPerRowGroup(int64(rg)))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	spec, err := feature.ParseSpec([]byte(yaml), "images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return makePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}), dir, spec
}

const imgSpecYAML = `
tensors:
  - name: img
    column: img
    nulls: {}
    image: {size: [40, 56], filter: area, invalid: fill, fill: 5, original_size: true}
  - name: hf
    column: hf
    nulls: {mask: true}
    image: {size: [24, 24], channels: 1, resize: fit, filter: lanczos, invalid: fill, fill: 9, dtype: U8}
`
