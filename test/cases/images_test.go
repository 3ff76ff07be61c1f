package cases

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/internal/pqfixture"
)

// Images end to end: a Parquet file of PNGs of the asked size (and a
// corrupt value every fifth row) in a binary column, planned, converted
// with image: {size: [12, 20], invalid: fill}, verified --deep and
// exported; an image at the asked size is passed through, so each
// exported sample equals the pixels the PNG was encoded from, byte for
// byte, and a corrupt one is the fill value with mask 0.

type imageRow struct {
	ID    int64  `parquet:"id"`
	Image []byte `parquet:"image"`
}

// rowPixels returns the RGB pixels (20 x 12) of row id's PNG.
func rowPixels(id int64) []byte {
	px := make([]byte, 12*20*3)
	for i := range px {
		px[i] = byte(int64(i)*7 + id*13)
	}
	return px
}

func TestImagesVerifyDeepAndExport(t *testing.T) {
	const rows = 40
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"), specDir: dir}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	var data []imageRow
	for id := range int64(rows) {
		if id%5 == 4 {
			data = append(data, imageRow{ID: id, Image: []byte("\x89PNG\r\n\x1a\ncorrupt")})
			continue
		}
		img := image.NewNRGBA(image.Rect(0, 0, 20, 12))
		px := rowPixels(id)
		for p := range 20 * 12 {
			img.Set(p%20, p/20, color.NRGBA{px[3*p], px[3*p+1], px[3*p+2], 255})
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		data = append(data, imageRow{ID: id, Image: buf.Bytes()})
	}
	pqfixture.Of(data...).RowGroupRows(16).WriteFile(t, filepath.Join(r.src, "images.parquet"))
	spec := "tensors:\n  - {name: id, column: id, dtype: I64}\n  - {name: img, column: image, image: {size: [12, 20], invalid: fill, fill: 3}}\n"
	if err := os.WriteFile(filepath.Join(dir, "images.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	r.planAll(rows)
	out, res := r.convert("images.yaml")
	res.OK(t)
	prep(t, "verify", "--deep", out).OK(t)
	a := r.export(out, 0, 0, 0)
	ids := tensor(t, a, "sample_ids", "<i8").i64()
	img := tensor(t, a, "img", "|u1")
	mask := tensor(t, a, "img_mask", "|u1").u8()
	if len(ids) != rows || !slices.Equal(img.shape, []int{rows, 12, 20, 3}) {
		t.Fatalf("%d samples, img shape %v; want %d, [%d 12 20 3]", len(ids), img.shape, rows, rows)
	}
	const n = 12 * 20 * 3
	for k, id := range ids {
		got := img.u8()[k*n : (k+1)*n]
		want, wantMask := rowPixels(id), uint8(1)
		if id%5 == 4 {
			want, wantMask = bytes.Repeat([]byte{3}, n), 0
		}
		if !bytes.Equal(got, want) || mask[k] != wantMask {
			t.Errorf("sample %d: pixels differ from the source's (mask %d, want %d)", id, mask[k], wantMask)
		}
	}
}
