package convert

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/feature/featuretest"
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
	p, dir, spec := imgFixture(t, n, 8, featuretest.ImageSpecYAML)
	var jobs []featuretest.PILJob
	for id := range n {
		name := featuretest.ImageSources[id%len(featuretest.ImageSources)]
		if name == "" || name[0] == '!' {
			continue
		}
		jobs = append(jobs,
			featuretest.PILJob{Src: filepath.Join(dir, name), Channels: 3, Size: []int64{40, 56}, Filter: "area"},
			featuretest.PILJob{Src: filepath.Join(dir, name), Channels: 1, Size: []int64{24, 24}, Resize: "fit", Filter: "lanczos", Fill: 9},
			featuretest.PILJob{Src: filepath.Join(dir, name), Channels: 3})
	}
	want, sizes := featuretest.PILRef(t, jobs)
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
		name := featuretest.ImageSources[i%len(featuretest.ImageSources)]
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
			mean, most := featuretest.DiffStats(got, want[k+j])
			if (!lossy && most != 0) || mean > featuretest.LossyMaxMAE || most > 2*featuretest.LossyMaxDiff {
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
		{"tensors:\n  - {name: img, column: img, image: {size: [8, 8]}}\n", `column "img", row group 0, row 3: null image (1 nulls in this column chunk; give nulls: {}`},
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

// imgFixture writes n image rows (row groups of rg) from featuretest.PILImages' files
// and returns the plan, the images' directory and the spec parsed from
// yaml.
func imgFixture(t testing.TB, n, rg int, yaml string) (*plan.Plan, string, *feature.Spec) {
	t.Helper()
	p, dir := featuretest.ImageSource(t, n, rg)
	spec, err := feature.ParseSpec([]byte(yaml), "images.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p, dir, spec
}
