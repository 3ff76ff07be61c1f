package describe_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/prepml/prep/convert/converttest"
	"github.com/prepml/prep/describe"
	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify/verifytest"
)

func readNpy(t *testing.T, path string) (npy.Header, []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := npy.ReadHeader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return h, b[h.DataOffset:]
}

// TestExportRoundTrip exports every step of one rank and checks each file
// against the plan and the source values.
func TestExportRoundTrip(t *testing.T) {
	f := verifytest.Build(t)
	src, err := os.ReadFile(filepath.Join(f.SrcDir, verifytest.SourceFile))
	if err != nil {
		t.Fatal(err)
	}
	sawPad := false
	for e := 0; e < 2; e++ {
		for k := 0; k < f.Plan.Steps(); k++ {
			out := filepath.Join(t.TempDir(), "batch")
			res, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: e, Rank: 1, Step: k, OutDir: out})
			if err != nil {
				t.Fatal(err)
			}
			ids, pads, err := f.Plan.RankBatch(e, 1, k, nil)
			if err != nil {
				t.Fatal(err)
			}
			sawPad = sawPad || pads > 0
			if res.Count != len(ids) || res.Pads != pads || len(res.Files) != 4 {
				t.Fatalf("e%d k%d: result %+v, want count %d pads %d", e, k, res, len(ids), pads)
			}
			n := len(ids)
			h, data := readNpy(t, filepath.Join(out, "x.npy"))
			if h.Descr != "<f4" || !reflect.DeepEqual(h.Shape, []int{n, 3}) || len(data) != n*12 {
				t.Fatalf("x.npy header %+v, %d bytes", h, len(data))
			}
			for i, id := range ids {
				v := verifytest.SourceValue(src, id)
				for j := 0; j < 3; j++ {
					got := math.Float32frombits(binary.LittleEndian.Uint32(data[12*i+4*j:]))
					if want := float32(v) + float32(j)/2; got != want {
						t.Fatalf("e%d k%d x[%d][%d] = %v, want %v", e, k, i, j, got, want)
					}
				}
			}
			h, data = readNpy(t, filepath.Join(out, "y.npy"))
			if h.Descr != "<i8" || !reflect.DeepEqual(h.Shape, []int{n}) {
				t.Fatalf("y.npy header %+v", h)
			}
			for i, id := range ids {
				if got := int64(binary.LittleEndian.Uint64(data[8*i:])); got != -verifytest.SourceValue(src, id) {
					t.Fatalf("y[%d] = %d, want %d", i, got, -verifytest.SourceValue(src, id))
				}
			}
			h, data = readNpy(t, filepath.Join(out, describe.SampleIDsFile))
			if h.Descr != "<i8" || !reflect.DeepEqual(h.Shape, []int{n}) {
				t.Fatalf("sample_ids header %+v", h)
			}
			for i, id := range ids {
				if got := binary.LittleEndian.Uint64(data[8*i:]); got != id {
					t.Fatalf("sample_ids[%d] = %d, want %d", i, got, id)
				}
			}
			h, data = readNpy(t, filepath.Join(out, describe.PadMaskFile))
			if h.Descr != "|b1" || !reflect.DeepEqual(h.Shape, []int{n}) {
				t.Fatalf("pad_mask header %+v", h)
			}
			for i := range ids {
				if want := byte(0); i >= n-pads {
					want = 1
					if data[i] != want {
						t.Fatalf("pad_mask[%d] = %d", i, data[i])
					}
				} else if data[i] != want {
					t.Fatalf("pad_mask[%d] = %d", i, data[i])
				}
			}
		}
	}
	if !sawPad {
		t.Fatal("fixture has no padded batch for rank 1")
	}
}

// requireNumPy skips t unless /usr/bin/python3 imports numpy.
func requireNumPy(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		t.Skip("skipping: /usr/bin/python3 with numpy not available (CI installs python3-numpy)")
	}
}

func TestExportWithNumPy(t *testing.T) {
	requireNumPy(t)
	f := verifytest.Build(t)
	out := t.TempDir()
	if _, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	ids, _, _ := f.Plan.RankBatch(0, 0, 0, nil)
	script := `import numpy as np, sys
d = sys.argv[1]
x = np.load(d + "/x.npy"); y = np.load(d + "/y.npy"); s = np.load(d + "/sample_ids.npy")
assert x.dtype == np.float32 and y.dtype == np.int64 and s.dtype == np.int64
v = 1000 + 3 * s
assert (y == -v).all(), (y, v)
assert (x == v[:, None] + np.array([0, 0.5, 1.0], np.float32)).all(), x
print(",".join(str(i) for i in s.tolist()))`
	got, err := exec.Command("/usr/bin/python3", "-c", script, out).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, got)
	}
	var want []string
	for _, id := range ids {
		want = append(want, strconv.FormatUint(id, 10))
	}
	if strings.TrimSpace(string(got)) != strings.Join(want, ",") {
		t.Fatalf("numpy ids %q, want %q", got, strings.Join(want, ","))
	}
}

func TestExportErrors(t *testing.T) {
	f := verifytest.Build(t)
	out := t.TempDir()
	if _, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 5, Rank: 0, Step: 0, OutDir: out}); !errors.Is(err, describe.ErrNoShard) {
		t.Errorf("missing epoch: %v", err)
	}
	if _, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: f.Plan.Steps(), OutDir: out}); !errors.Is(err, describe.ErrNoShard) {
		t.Errorf("step past end: %v", err)
	}
	verifytest.FlipByte(t, f.ShardPath(0), verifytest.BlockOffset(t, f.ShardPath(0), 0))
	_, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out})
	if !errors.Is(err, shardfmt.ErrChecksum) {
		t.Errorf("corrupt batch: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("corrupt batch exported %d files", len(ents))
	}
}

// TestExportRefusesSwappedShard pins the fault where export of epoch 0
// rank 0 wrote rank 1's samples, exit 0, after the two shard files were
// swapped on disk: the shard header's (epoch, rank) is checked against the
// request and nothing is written.
func TestExportRefusesSwappedShard(t *testing.T) {
	f := verifytest.Build(t)
	a, b := f.ShardPath(0), f.ShardPath(1)
	if f.Man.Shards[0].Epoch != 0 || f.Man.Shards[0].Rank != 0 || f.Man.Shards[1].Epoch != 0 || f.Man.Shards[1].Rank != 1 {
		t.Fatalf("fixture order changed: %+v", f.Man.Shards[:2])
	}
	tmp := a + ".swap"
	for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "batch")
	_, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out})
	if !errors.Is(err, shardfmt.ErrProvenance) || !strings.Contains(err.Error(), a) {
		t.Fatalf("export of a swapped shard: %v; want shardfmt.ErrProvenance naming %s", err, a)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("export of a swapped shard created %s (%v)", out, err)
	}
}

// jaggedSet writes a one-epoch, one-rank shard set of 2 steps whose
// tensors are a fixed F32 "x", a jagged I32 "h" (every row empty) and
// the extra tensors given.
func jaggedSet(t *testing.T, extra ...shardfmt.TensorInfo) string {
	t.Helper()
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 1, Steps: 2, BatchSize: 4,
		Tensors:    append([]shardfmt.TensorInfo{{Name: "x", DType: shardfmt.F32}, {Name: "h", DType: shardfmt.I32, Jagged: true}}, extra...),
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 1, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) {
			return []uint64{uint64(4 * k), uint64(4*k + 1), uint64(4*k + 2)}, 1, nil
		},
		Fill: func(shardfmt.Geometry, []uint64, []byte) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportJagged exports every step of both epochs of rank 1 of the
// jagged fixture and checks each jagged tensor's values and offsets files
// against the source, and the fixed tensors as before.
func TestExportJagged(t *testing.T) {
	f := verifytest.BuildJagged(t)
	src, err := os.ReadFile(filepath.Join(f.SrcDir, verifytest.SourceFile))
	if err != nil {
		t.Fatal(err)
	}
	var sawEmpty, sawPad bool
	for e := 0; e < 2; e++ {
		for k := 0; k < f.Plan.Steps(); k++ {
			out := filepath.Join(t.TempDir(), "batch")
			res, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: e, Rank: 1, Step: k, OutDir: out})
			if err != nil {
				t.Fatal(err)
			}
			ids, pads, _ := f.Plan.RankBatch(e, 1, k, nil)
			sawPad = sawPad || pads > 0
			n := len(ids)
			var parts []string
			for _, x := range res.Files {
				parts = append(parts, filepath.Base(x.File)+":"+x.Tensor+":"+x.Part+":"+x.DType+":"+x.Descr)
			}
			wantParts := []string{"x.npy:x::F32:<f4", "y.npy:y::I64:<i8", "h.npy:h:values:I32:<i4", "h_offsets.npy:h:offsets:I64:<i8",
				"p.npy:p:values:F32:<f4", "p_offsets.npy:p:offsets:I64:<i8", "sample_ids.npy::::<i8", "pad_mask.npy::::|b1"}
			if !reflect.DeepEqual(parts, wantParts) {
				t.Fatalf("files %q, want %q", parts, wantParts)
			}
			h, data := readNpy(t, filepath.Join(out, "x.npy"))
			if h.Descr != "<f4" || !reflect.DeepEqual(h.Shape, []int{n, 3}) || len(data) != n*12 {
				t.Fatalf("x.npy header %+v, %d bytes", h, len(data))
			}
			for _, name := range []string{"h", "p"} {
				var want []byte
				offs := []int{0}
				for _, id := range ids {
					v := verifytest.JaggedValues(src, name, id)
					want = append(want, v...)
					sawEmpty = sawEmpty || len(v) == 0
					per := 4
					if name == "p" {
						per = 8
					}
					offs = append(offs, offs[len(offs)-1]+len(v)/per)
				}
				hv, values := readNpy(t, filepath.Join(out, name+".npy"))
				wantShape := []int{offs[n]}
				if name == "p" {
					wantShape = append(wantShape, 2)
				}
				if !reflect.DeepEqual(hv.Shape, wantShape) || !bytes.Equal(values, want) {
					t.Fatalf("e%d k%d %s.npy shape %v values % x, want shape %v values % x", e, k, name, hv.Shape, values, wantShape, want)
				}
				ho, od := readNpy(t, filepath.Join(out, name+"_offsets.npy"))
				var got []int
				for j := 0; j+8 <= len(od); j += 8 {
					got = append(got, int(int64(binary.LittleEndian.Uint64(od[j:]))))
				}
				if ho.Descr != "<i8" || !reflect.DeepEqual(ho.Shape, []int{n + 1}) || !reflect.DeepEqual(got, offs) {
					t.Fatalf("e%d k%d %s_offsets.npy %+v = %v, want %v", e, k, name, ho, got, offs)
				}
				if x := res.Files[map[string]int{"h": 2, "p": 4}[name]]; !reflect.DeepEqual(x.Shape, wantShape) {
					t.Fatalf("%s result shape %v, want %v", name, x.Shape, wantShape)
				}
			}
		}
	}
	if !sawPad || !sawEmpty {
		t.Fatalf("fixture lacks a padded batch (%v) or an empty row (%v) for rank 1", sawPad, sawEmpty)
	}
}

// TestExportJaggedEmptyRows exports a batch whose jagged rows are all
// empty: the values file has shape [0] and the offsets are all zero.
func TestExportJaggedEmptyRows(t *testing.T) {
	dir := jaggedSet(t)
	out := filepath.Join(t.TempDir(), "batch")
	res, err := describe.Export(describe.ExportOptions{Dir: dir, Epoch: 0, Rank: 0, Step: 1, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if res.Count != 3 || res.Pads != 1 || len(res.Files) != 5 {
		t.Fatalf("result %+v", res)
	}
	h, data := readNpy(t, filepath.Join(out, "h.npy"))
	if h.Descr != "<i4" || !reflect.DeepEqual(h.Shape, []int{0}) || len(data) != 0 {
		t.Fatalf("h.npy %+v, %d bytes", h, len(data))
	}
	h, data = readNpy(t, filepath.Join(out, "h_offsets.npy"))
	if h.Descr != "<i8" || !reflect.DeepEqual(h.Shape, []int{4}) || !bytes.Equal(data, make([]byte, 32)) {
		t.Fatalf("h_offsets.npy %+v, % x", h, data)
	}
}

// TestExportJaggedOffsetsNameClash pins that a jagged tensor's offsets
// file may not replace another tensor's file: a fixed tensor named
// "h_offsets" beside jagged "h" is an error naming both, and nothing is
// written.
func TestExportJaggedOffsetsNameClash(t *testing.T) {
	dir := jaggedSet(t, shardfmt.TensorInfo{Name: "h_offsets", DType: shardfmt.I64})
	out := filepath.Join(t.TempDir(), "batch")
	_, err := describe.Export(describe.ExportOptions{Dir: dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out})
	if err == nil || err.Error() != `tensor "h": file name h_offsets.npy for its offsets already used by tensor "h_offsets"` {
		t.Fatalf("Export: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("export left %s behind (%v)", out, err)
	}
}

// TestExportJaggedWithNumPy has NumPy read a jagged batch back: per
// sample, values[offsets[i]:offsets[i+1]] is the source's list.
func TestExportJaggedWithNumPy(t *testing.T) {
	requireNumPy(t)
	f := verifytest.BuildJagged(t)
	out := t.TempDir()
	if _, err := describe.Export(describe.ExportOptions{Dir: f.Dir, Epoch: 1, Rank: 0, Step: 1, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	ids, _, _ := f.Plan.RankBatch(1, 0, 1, nil)
	script := `import numpy as np, sys
d = sys.argv[1]
s = np.load(d + "/sample_ids.npy")
h, ho = np.load(d + "/h.npy"), np.load(d + "/h_offsets.npy")
p, po = np.load(d + "/p.npy"), np.load(d + "/p_offsets.npy")
assert h.dtype == np.int32 and p.dtype == np.float32 and ho.dtype == np.int64 and po.dtype == np.int64
assert ho.shape == (len(s) + 1,) and po.shape == (len(s) + 1,) and ho[0] == 0 and po[0] == 0
assert h.ndim == 1 and p.ndim == 2 and p.shape[1] == 2 and ho[-1] == len(h) and po[-1] == len(p)
for i, sid in enumerate(s.tolist()):
    v = 1000 + 3 * sid
    assert h[ho[i]:ho[i + 1]].tolist() == [v + j for j in range(sid % 4)], (i, h, ho)
    assert p[po[i]:po[i + 1]].tolist() == [[v + j, -j / 4] for j in range(sid % 3)], (i, p, po)
print(",".join(str(i) for i in s.tolist()), len(h), len(p))`
	got, err := exec.Command("/usr/bin/python3", "-c", script, out).CombinedOutput()
	if err != nil {
		t.Fatalf("numpy: %v\n%s", err, got)
	}
	var want []string
	nh, np := 0, 0
	for _, id := range ids {
		want = append(want, strconv.FormatUint(id, 10))
		nh += int(id % 4)
		np += int(id % 3)
	}
	if w := strings.Join(want, ",") + " " + strconv.Itoa(nh) + " " + strconv.Itoa(np); strings.TrimSpace(string(got)) != w {
		t.Fatalf("numpy printed %q, want %q", got, w)
	}
}

// TestExportMatchesParquet exports batches of a converted set and compares
// every value with the source read by parquet-go's own row reader.
func TestExportMatchesParquet(t *testing.T) {
	out, src, p := converttest.Convert(t)
	rows, err := parquet.ReadFile[converttest.Row](filepath.Join(src, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != converttest.Rows {
		t.Fatalf("read %d rows", len(rows))
	}
	for _, rk := range [][3]int{{0, 0, 0}, {1, 1, p.Steps() - 1}, {0, 1, 2}} {
		dir := t.TempDir()
		res, err := describe.Export(describe.ExportOptions{Dir: out, Epoch: rk[0], Rank: rk[1], Step: rk[2], OutDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		ids, _, _ := p.RankBatch(rk[0], rk[1], rk[2], nil)
		if res.Count != len(ids) || res.Count != 4 {
			t.Fatalf("count %d, want %d", res.Count, len(ids))
		}
		_, sid := readNpy(t, filepath.Join(dir, describe.SampleIDsFile))
		hx, x := readNpy(t, filepath.Join(dir, "x.npy"))
		hf, feat := readNpy(t, filepath.Join(dir, "feat.npy"))
		hi, idv := readNpy(t, filepath.Join(dir, "id.npy"))
		if hx.Descr != "<f8" || hf.Descr != "<f4" || hi.Descr != "<i8" || !reflect.DeepEqual(hf.Shape, []int{4, 2}) {
			t.Fatalf("headers %+v %+v %+v", hx, hf, hi)
		}
		for i, want := range ids {
			if got := binary.LittleEndian.Uint64(sid[8*i:]); got != want {
				t.Fatalf("sample_ids[%d] = %d, want %d", i, got, want)
			}
			r := rows[want]
			if got := int64(binary.LittleEndian.Uint64(idv[8*i:])); got != r.ID {
				t.Errorf("id[%d] = %d, want %d", i, got, r.ID)
			}
			if got := math.Float64frombits(binary.LittleEndian.Uint64(x[8*i:])); got != r.X {
				t.Errorf("x[%d] = %v, want %v", i, got, r.X)
			}
			f0 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i:]))
			f1 := math.Float32frombits(binary.LittleEndian.Uint32(feat[8*i+4:]))
			if f0 != r.F || f1 != float32(r.X) {
				t.Errorf("feat[%d] = [%v %v], want [%v %v]", i, f0, f1, r.F, float32(r.X))
			}
		}
	}
}

// TestExportJaggedMatchesParquet exports every step of a set convert made
// with a jagged tensor from a Parquet LIST column and compares the values
// and offsets files with the lists parquet-go's own row reader finds.
func TestExportJaggedMatchesParquet(t *testing.T) {
	out, src, p := converttest.ConvertJagged(t)
	rows, err := parquet.ReadFile[converttest.JaggedRow](filepath.Join(src, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for e := range 2 {
		for k := range p.Steps() {
			dir := t.TempDir()
			if _, err := describe.Export(describe.ExportOptions{Dir: out, Epoch: e, Rank: 1, Step: k, OutDir: dir}); err != nil {
				t.Fatal(err)
			}
			ids, _, _ := p.RankBatch(e, 1, k, nil)
			hv, values := readNpy(t, filepath.Join(dir, "l.npy"))
			ho, offsets := readNpy(t, filepath.Join(dir, "l_offsets.npy"))
			var want []int64
			wantOff := []int{0}
			for _, id := range ids {
				for _, v := range rows[id].L {
					want = append(want, int64(v))
				}
				wantOff = append(wantOff, len(want))
			}
			var got []int64
			for j := 0; j+8 <= len(values); j += 8 {
				got = append(got, int64(binary.LittleEndian.Uint64(values[j:])))
			}
			var gotOff []int
			for j := 0; j+8 <= len(offsets); j += 8 {
				gotOff = append(gotOff, int(binary.LittleEndian.Uint64(offsets[j:])))
			}
			if hv.Descr != "<i8" || !reflect.DeepEqual(hv.Shape, []int{len(want)}) || !reflect.DeepEqual(got, want) ||
				ho.Descr != "<i8" || !reflect.DeepEqual(ho.Shape, []int{len(ids) + 1}) || !reflect.DeepEqual(gotOff, wantOff) {
				t.Fatalf("e%d k%d: l.npy %+v %v, want %v; l_offsets.npy %+v %v, want %v", e, k, hv, got, want, ho, gotOff, wantOff)
			}
		}
	}
}
