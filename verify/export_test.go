package verify_test

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

	"github.com/prepml/prep/internal/npy"
	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
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
			res, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: e, Rank: 1, Step: k, OutDir: out})
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
			h, data = readNpy(t, filepath.Join(out, verify.SampleIDsFile))
			if h.Descr != "<i8" || !reflect.DeepEqual(h.Shape, []int{n}) {
				t.Fatalf("sample_ids header %+v", h)
			}
			for i, id := range ids {
				if got := binary.LittleEndian.Uint64(data[8*i:]); got != id {
					t.Fatalf("sample_ids[%d] = %d, want %d", i, got, id)
				}
			}
			h, data = readNpy(t, filepath.Join(out, verify.PadMaskFile))
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

func TestExportWithNumPy(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import numpy").Run(); err != nil {
		t.Skip("skipping: /usr/bin/python3 with numpy not available (CI installs python3-numpy)")
	}
	f := verifytest.Build(t)
	out := t.TempDir()
	if _, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out}); err != nil {
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
	if _, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: 5, Rank: 0, Step: 0, OutDir: out}); !errors.Is(err, verify.ErrNoShard) {
		t.Errorf("missing epoch: %v", err)
	}
	if _, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: f.Plan.Steps(), OutDir: out}); !errors.Is(err, verify.ErrNoShard) {
		t.Errorf("step past end: %v", err)
	}
	flipByte(t, f.ShardPath(0), blockOffset(t, f.ShardPath(0), 0))
	_, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out})
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
	_, err := verify.Export(verify.ExportOptions{Dir: f.Dir, Epoch: 0, Rank: 0, Step: 0, OutDir: out})
	if !errors.Is(err, shardfmt.ErrProvenance) || !strings.Contains(err.Error(), a) {
		t.Fatalf("export of a swapped shard: %v; want shardfmt.ErrProvenance naming %s", err, a)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("export of a swapped shard created %s (%v)", out, err)
	}
}

// jaggedSet writes a one-epoch, one-rank shard set of 2 steps whose
// tensors are a fixed F32 "x" and a jagged I32 "h" (every row empty).
func jaggedSet(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := testutil.WriteShardSet(dir, testutil.ShardSet{Epochs: 1, Ranks: 1, Steps: 2, BatchSize: 4,
		Tensors:    []shardfmt.TensorInfo{{Name: "x", DType: shardfmt.F32}, {Name: "h", DType: shardfmt.I32, Jagged: true}},
		Provenance: shardfmt.Provenance{PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec", WorldSize: 1, Workers: 1},
		Manifest:   shardfmt.Manifest{Format: "prep-manifest/v1", PlanFingerprint: "sha256:p", SourceFingerprint: "sha256:s", SpecHash: "sha256:spec"},
		Batch: func(e, r, k int) ([]uint64, int, error) {
			return []uint64{uint64(4 * k), uint64(4*k + 1), uint64(4*k + 2), uint64(4*k + 3)}, 0, nil
		},
		Fill: func(shardfmt.Geometry, []uint64, []byte) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExportRefusesJaggedTensors pins that export, which writes one .npy
// per fixed-shape slab, refuses a shard with a jagged tensor (format 2.0)
// naming it, instead of writing its offsets as values, and writes nothing.
func TestExportRefusesJaggedTensors(t *testing.T) {
	dir := jaggedSet(t)
	out := filepath.Join(t.TempDir(), "batch")
	_, err := verify.Export(verify.ExportOptions{Dir: dir, Epoch: 0, Rank: 0, Step: 1, OutDir: out})
	if !errors.Is(err, verify.ErrUnsupported) || !strings.Contains(err.Error(), `tensor "h" is jagged`) {
		t.Fatalf("Export: %v, want ErrUnsupported naming tensor h", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("export left %s behind (%v)", out, err)
	}
}
