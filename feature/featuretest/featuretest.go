// Package featuretest holds the Parquet sources, plans and reference values the
// tests of packages feature and convert share: the rows of the standard
// test file and their expected samples, jagged and image sources, the
// field cases of testdata/cases, and Pillow's reference images
// (feature/testdata/pilref.py). Its files are written by
// internal/pqfixture, the one Parquet writer of the tests: File and
// JagFile return the builder of a file, whose row groups the caller sets.
// It is for tests only, and imports neither feature nor convert, so that
// feature's own tests may use it.
package featuretest

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// Row is a row of the standard test file: an id, a float, a list, a
// dictionary-encoded string and an optional int32.
type Row struct {
	ID    int64     `parquet:"id"`
	X     float32   `parquet:"x"`
	Emb   []float32 `parquet:"emb,list"`
	Label string    `parquet:"label,dict"`
	Opt   *int32    `parquet:"opt,optional"`
}

// MakeRow returns row id of the standard test file: X = id/2, id%6 list
// values, label L<id%7>, Opt null for every fifth id.
func MakeRow(id int64) Row {
	r := Row{ID: id, X: float32(id) * 0.5, Label: fmt.Sprintf("L%d", id%7)}
	for k := int64(0); k < id%6; k++ {
		r.Emb = append(r.Emb, float32(id*10+k))
	}
	if id%5 != 0 {
		v := int32(id)
		r.Opt = &v
	}
	return r
}

// Rows returns rows [first, first+n) of MakeRow.
func Rows(first, n int64) []Row {
	rows := make([]Row, 0, n)
	for id := first; id < first+n; id++ {
		rows = append(rows, MakeRow(id))
	}
	return rows
}

// File is the standard test file of rows [first, first+n) of MakeRow,
// handed to the writer 1,024 rows at a time; the caller sets its row
// groups and codec and writes it (pqfixture.Builder.WriteFile).
func File(first, n int64) *pqfixture.Builder {
	return pqfixture.Of(Rows(first, n)...).WriteBatch(1024)
}

// MakePlan discovers the Parquet files under dir and plans them with cfg.
func MakePlan(t testing.TB, dir string, cfg plan.Config) *plan.Plan {
	t.Helper()
	src, err := source.Discover(context.Background(), []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.New(src, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// SpecYAML is the feature spec of the standard test file, whose expected
// samples ExpectSample gives.
const SpecYAML = `
tensors:
  - name: id
    column: id
    dtype: I64
  - name: x
    column: x
    dtype: F16
  - name: emb
    column: emb
    dtype: F32
    shape: [4]
    list: {pad: -1, truncate: true, lengths: true}
  - name: label
    column: label
    dtype: I64
    bytes: {mode: hash, buckets: 1000}
  - name: opt
    column: opt
    dtype: I32
    nulls: {fill: -7, mask: true}
`

// DefaultConfig plans the standard test file over two epochs, two ranks
// and two workers, globally shuffled, pads at the end.
var DefaultConfig = plan.Config{Seed: 7, Epochs: 2, GlobalBatch: 64, WorldSize: 2, Workers: 2, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

// ExpectSample returns the expected bytes of each output tensor for id.
func ExpectSample(id uint64) [][]byte {
	r := MakeRow(int64(id))
	le := binary.LittleEndian
	idb := le.AppendUint64(nil, uint64(r.ID))
	h, _ := shardfmt.F64ToF16(float64(r.X))
	xb := le.AppendUint16(nil, h)
	var emb []byte
	for k := 0; k < 4; k++ {
		v := float32(-1)
		if k < len(r.Emb) {
			v = r.Emb[k]
		}
		emb = le.AppendUint32(emb, math.Float32bits(v))
	}
	lens := le.AppendUint32(nil, uint32(len(r.Emb)))
	lab := le.AppendUint64(nil, fnv1a64(r.Label)%1000)
	opt, mask := le.AppendUint32(nil, uint32(0xfffffff9)), []byte{0}
	if r.Opt != nil {
		opt, mask = le.AppendUint32(nil, uint32(*r.Opt)), []byte{1}
	}
	return [][]byte{idb, xb, emb, lens, lab, opt, mask}
}

// JagLen is the length of row id's lists: 0 and 40 among them.
func JagLen(id int64) int { return []int{0, 1, 2, 3, 5, 8, 13, 0, 40}[id%9] }

// JagNullRow reports whether row id's v is a null list.
func JagNullRow(id int64) bool { return id%11 == 3 }

// JagNullElem reports whether element k of row id's v is null.
func JagNullElem(id int64, k int) bool { return (id+int64(k))%7 == 0 }

// JagSchema is the schema of the jagged test file: id INT64; v optional list of optional INT32 (null lists,
// null elements); w a required list of required INT32.
func JagSchema() *parquet.Schema {
	return parquet.NewSchema("schema", parquet.Group{
		"id": parquet.Leaf(parquet.Int64Type),
		"v":  parquet.Optional(parquet.List(parquet.Optional(parquet.Leaf(parquet.Int32Type)))),
		"w":  parquet.List(parquet.Leaf(parquet.Int32Type)),
	})
}

// JagRow returns row id of the jagged test file with its levels
// (JagSchema): its v holds JagLen(id) values, or long(id) when long is not
// nil, v[k] = 100*id + k unless JagNullElem(id, k); the list is null where
// JagNullRow(id); w holds id%4 values, w[k] = -id - k.
func JagRow(id int64, long func(id int64) int) parquet.Row {
	m := JagLen(id)
	if long != nil {
		m = long(id)
	}
	row := make(parquet.Row, 0, 2+m+int(id%4))
	row = append(row, parquet.Int64Value(id).Level(0, 0, 0))
	switch {
	case JagNullRow(id):
		row = append(row, parquet.NullValue().Level(0, 0, 1))
	case m == 0:
		row = append(row, parquet.NullValue().Level(0, 1, 1))
	default:
		for k := range m {
			rep := 1
			if k == 0 {
				rep = 0
			}
			if JagNullElem(id, k) {
				row = append(row, parquet.NullValue().Level(rep, 2, 1))
			} else {
				row = append(row, parquet.Int32Value(int32(id*100)+int32(k)).Level(rep, 3, 1))
			}
		}
	}
	wm := int(id % 4)
	if wm == 0 {
		row = append(row, parquet.NullValue().Level(0, 0, 2))
	}
	for k := range wm {
		rep := 1
		if k == 0 {
			rep = 0
		}
		row = append(row, parquet.Int32Value(-int32(id)-int32(k)).Level(rep, 1, 2))
	}
	return row
}

// JagFile is the jagged test file of rows [first, first+n) (JagRow), in
// pages of 1,024 bytes; the caller sets its row groups and writes it. Its
// rows are made as they are written (pqfixture.GenerateRaw, the file Raw
// writes from the same rows), so that a file of long rows is written
// without holding them all.
func JagFile(first, n int64, long func(id int64) int) *pqfixture.Builder {
	return pqfixture.GenerateRaw(JagSchema(), int(n), func(i int) parquet.Row { return JagRow(first+int64(i), long) }).PageBytes(1024)
}

// JagSpecYAML is the feature spec of the jagged test file, whose expected
// samples JagExpect gives.
const JagSpecYAML = `
tensors:
  - {name: id, column: id, dtype: I64}
  - name: v
    column: v
    dtype: I32
    list: {jagged: true, element_fill: -1, element_mask: true}
    nulls: {mask: true}
  - {name: w, column: w, dtype: I64, list: {jagged: true}}
`

// JagExpect returns, for id, the expected bytes of id, v (values), v_mask,
// v_element_mask (values), w (values).
func JagExpect(id uint64) [][]byte {
	le := binary.LittleEndian
	i := int64(id)
	var v, em []byte
	mask := []byte{1}
	if JagNullRow(i) {
		mask = []byte{0}
	} else {
		for k := range JagLen(i) {
			if JagNullElem(i, k) {
				v, em = le.AppendUint32(v, 0xffffffff), append(em, 0)
			} else {
				v, em = le.AppendUint32(v, uint32(int32(i*100)+int32(k))), append(em, 1)
			}
		}
	}
	var w []byte
	for k := range int(i % 4) {
		w = le.AppendUint64(w, uint64(-i-int64(k)))
	}
	return [][]byte{le.AppendUint64(nil, id), v, mask, em, w}
}

// JagConfig plans the jagged test file over two epochs and two ranks,
// globally shuffled, pads at the end.
var JagConfig = plan.Config{Seed: 5, Epochs: 2, GlobalBatch: 32, WorldSize: 2, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}

// DuckDocs returns DuckDB's reading of the token column of the files
// under dir, in sample id order (files by path, rows in order); nil for a
// null list.
func DuckDocs(t *testing.T, dir string) [][]int64 {
	t.Helper()
	res := duckdbtest.Query(t, fmt.Sprintf(`SELECT tokens FROM read_parquet(%s, filename = true, file_row_number = true) ORDER BY filename, file_row_number`,
		duckdbtest.Quote(filepath.Join(dir, "*.parquet"))))
	docs := make([][]int64, len(res.Rows))
	for i, r := range res.Rows {
		if r[0] == nil {
			continue
		}
		for _, v := range duckdbtest.List(t, r[0]) {
			docs[i] = append(docs[i], duckdbtest.Int64(t, v))
		}
	}
	return docs
}

// I32At returns the i-th little-endian int32 of b.
func I32At(b []byte, i int) int64 { return int64(int32(binary.LittleEndian.Uint32(b[4*i:]))) }

// TokenFiles writes, with DuckDB, rows documents with a list<INT32>
// column tokens (lengths 0 to 700, every 13th row null, every 17th
// empty) over three files of small row groups, one written with data
// pages V2, and returns the source directory.
func TokenFiles(t *testing.T, rows int) string {
	t.Helper()
	dir := t.TempDir()
	q := func(name string) string { return duckdbtest.Quote(filepath.Join(dir, name)) }
	duckdbtest.Query(t, fmt.Sprintf(`
CREATE TABLE t AS SELECT i AS id,
  CASE WHEN i %% 13 = 5 THEN NULL WHEN i %% 17 = 3 THEN []::INT[]
       ELSE list_transform(range((i * 7919) %% 701), x -> (x * 31 + i)::INT) END AS tokens
FROM range(%d) r(i);
COPY (SELECT * FROM t WHERE id < %d ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 100);
COPY (SELECT * FROM t WHERE id >= %d AND id < %d ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 64, COMPRESSION zstd);
COPY (SELECT * FROM t WHERE id >= %d ORDER BY id) TO %s (FORMAT parquet, ROW_GROUP_SIZE 250, PARQUET_VERSION v2);
SELECT 1`, rows, rows/3, q("a.parquet"), rows/3, 2*rows/3, q("b.parquet"), 2*rows/3, q("c.parquet")))
	return dir
}

// CaseSource copies the named files of a case into a fresh source directory
// (so a plan covers only them) and returns a plan in source order.
func CaseSource(t *testing.T, caseDir string, files ...string) *plan.Plan {
	t.Helper()
	src := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "cases", caseDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return MakePlan(t, src, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
}

// MustContainAll fails t unless err holds every one of parts.
func MustContainAll(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one naming %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %q", err, p)
		}
	}
}

// F32s returns the bits of b's little-endian float32 values.
func F32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

// I64s returns b's little-endian int64 values.
func I64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// I32s returns b's little-endian int32 values.
func I32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// DenyStore is a local store whose files cannot be opened, as a file of
// mode 0 is for a user other than root.
type DenyStore struct{ *source.Local }

// Open refuses every file with permission denied.
func (s DenyStore) Open(ctx context.Context, name string) (source.Object, error) {
	return nil, &source.Error{File: name, Err: fmt.Errorf("open: %w", fs.ErrPermission)}
}

// RequirePIL skips t unless /usr/bin/python3 imports PIL and numpy
// (Debian's python3-pil and python3-numpy), except under CI=true, where
// .ci/run installs them and their absence fails t.
func RequirePIL(t testing.TB) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import PIL, numpy").Run(); err != nil {
		msg := "/usr/bin/python3 with PIL and numpy not available (apt-get install python3-pil python3-numpy)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("skipping: " + msg)
	}
}

// PILImages writes testdata/pilref.py's test images into a temporary
// directory and returns it.
func PILImages(t testing.TB) string {
	t.Helper()
	RequirePIL(t)
	dir := t.TempDir()
	out, err := exec.Command("/usr/bin/python3", "../feature/testdata/pilref.py", "gen", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("pilref.py gen: %v\n%s", err, out)
	}
	return dir
}

// PILJob is one reference image Pillow computes (pilref.py ref).
type PILJob struct {
	Src      string  `json:"src"`
	Out      string  `json:"out"`
	Channels int     `json:"channels"`
	Size     []int64 `json:"size,omitempty"`
	Resize   string  `json:"resize,omitempty"`
	Filter   string  `json:"filter,omitempty"`
	Fill     int     `json:"fill,omitempty"`
}

// PILRef runs jobs through pilref.py and returns, per job, Pillow's
// pixels and [height, width].
func PILRef(t testing.TB, jobs []PILJob) ([][]byte, [][2]int) {
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

// DiffStats returns the mean and largest absolute difference of a and b.
func DiffStats(a, b []byte) (mean float64, most int) {
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
	LossyMaxMAE  = 0.25 // mean absolute difference per channel value
	LossyMaxDiff = 4    // largest absolute difference
)

// ImageRow is a row of the image test files: an image in a binary column
// and, as Hugging Face datasets write images, in a struct<bytes, path>.
type ImageRow struct {
	ID  int64    `parquet:"id"`
	Img []byte   `parquet:"img,optional"`
	HF  *HFImage `parquet:"hf,optional"`
}

// HFImage is an image as Hugging Face datasets store it: its bytes and
// its path.
type HFImage struct {
	Bytes []byte `parquet:"bytes,optional"`
	Path  string `parquet:"path"`
}

// ImageSources are the images of the test rows, by row id modulo their
// count: the names of PILImages' files, "" for a null row, "!trunc" for
// a truncated JPEG and "!gif" for a GIF.
var ImageSources = []string{"big.png", "q90.jpg", "wide.png", "", "tall.png", "lossy.webp", "!trunc", "palette.png", "orient6.png", "!gif", "grey.jpg"}

// ImageBytes returns the encoded image of name from dir (ImageSources).
func ImageBytes(t testing.TB, dir, name string) []byte {
	switch name {
	case "":
		return nil
	case "!gif":
		return []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")
	case "!trunc":
		b := ImageBytes(t, dir, "q90.jpg")
		return b[:len(b)/3]
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ImageSpecYAML is a feature spec over ImageSource's file.
const ImageSpecYAML = `
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

// fnv1a64 is FNV-1a 64 of s by the standard library (hash/fnv), an
// implementation independent of the one the code under test uses.
func fnv1a64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// ImageRows returns n rows of ImageRow: row id's image is
// ImageSources[id modulo their count], from dir (PILImages), in the img
// column and in the hf struct (path "img<id>").
func ImageRows(t testing.TB, dir string, n int) []ImageRow {
	t.Helper()
	rows := make([]ImageRow, 0, n)
	for id := range n {
		b := ImageBytes(t, dir, ImageSources[id%len(ImageSources)])
		rows = append(rows, ImageRow{ID: int64(id), Img: b, HF: &HFImage{Bytes: b, Path: fmt.Sprintf("img%d", id)}})
	}
	return rows
}

// ImageSource writes n rows of ImageRow (row id's image ImageSources[id
// modulo their count], in the img column and in the hf struct) in row
// groups of rg rows to one file, images.parquet, and returns a
// one-epoch, one-rank, global-shuffle plan over it in batches of 4 (pads
// at the end) and the directory of PILImages' files.
func ImageSource(t testing.TB, n, rg int) (*plan.Plan, string) {
	t.Helper()
	dir := PILImages(t)
	src := t.TempDir()
	pqfixture.Of(ImageRows(t, dir, n)...).RowGroupRows(int64(rg)).WriteFile(t, filepath.Join(src, "images.parquet"))
	return MakePlan(t, src, plan.Config{Seed: 3, Epochs: 1, GlobalBatch: 4, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleGlobal, Remainder: plan.RemainderPad}), dir
}
