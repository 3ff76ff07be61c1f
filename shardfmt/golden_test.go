package shardfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The golden shards in testdata/shards are made by this generator. Run
//
//	go test ./shardfmt -run TestGolden -update
//
// to rewrite them (only when the format changes on purpose: that needs a
// version bump, see FORMAT.md). golden.json beside them lists, per shard,
// the values a reader must find, for readers written in other languages.
var update = flag.Bool("update", false, "rewrite the golden shards in testdata/shards")

const goldenDir = "../testdata/shards"

// goldenShard is one golden file and the values a reader must see in it.
type goldenShard struct {
	File       string                   `json:"file"`
	Size       int64                    `json:"size"`
	Digest     string                   `json:"digest"`
	BatchSize  int                      `json:"batch_size"`
	Tensors    []TensorInfo             `json:"tensors"`
	Provenance Provenance               `json:"provenance"`
	Batches    []goldenBatch            `json:"batches"`
	spec       func(k, j, i int) []byte // bytes of sample j of tensor i in batch k
	counts     []int
	pads       []int
}

type goldenBatch struct {
	Count     int      `json:"count"`
	Pads      int      `json:"pads"`
	CRC       string   `json:"crc32c"`
	SampleIDs []uint64 `json:"sample_ids"`
	// Slabs holds, per tensor, the hex of the [count, shape...] slab prefix;
	// for a jagged tensor, of its [N, shape...] values.
	Slabs []string `json:"slabs"`
	// Offsets holds, per jagged tensor (by name), its count+1 offsets;
	// absent in a shard without jagged tensors.
	Offsets map[string][]int64 `json:"offsets,omitempty"`
}

func leBytes(v any) []byte {
	var b bytes.Buffer
	if err := writeLE(&b, v); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func writeLE(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case uint8:
		b.WriteByte(x)
	case uint16:
		b.Write(le.AppendUint16(nil, x))
	case uint32:
		b.Write(le.AppendUint32(nil, x))
	case uint64:
		b.Write(le.AppendUint64(nil, x))
	default:
		return fmt.Errorf("unsupported %T", v)
	}
	return nil
}

// goldenShards defines the golden set. Values are formulas of (batch k,
// slot j, element e) so the files can be checked without this code.
func goldenShards() []*goldenShard {
	allDTypes := &goldenShard{
		File:      "dtypes.shard",
		BatchSize: 3,
		Provenance: Provenance{
			PlanFingerprint: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
			SpecHash:        "sha256:2222222222222222222222222222222222222222222222222222222222222222",
			Epoch:           1, Rank: 0, WorldSize: 2, Workers: 1, ToolVersion: "golden",
		},
		counts: []int{3, 2},
		pads:   []int{0, 1},
	}
	for d := BOOL; d.Valid(); d++ {
		allDTypes.Tensors = append(allDTypes.Tensors, TensorInfo{Name: d.String(), DType: d, Shape: []uint64{2}})
	}
	// Element e of sample j in batch k has value v = 6k + 2j + e (0..11),
	// encoded per dtype: integers as v (signed ones as -v), BOOL as v%2,
	// floats as v + 0.5 rounded to the dtype.
	allDTypes.spec = func(k, j, i int) []byte {
		d := allDTypes.Tensors[i].DType
		var out []byte
		for e := range 2 {
			v := 6*k + 2*j + e
			f := float64(v) + 0.5
			switch d {
			case BOOL:
				out = append(out, byte(v%2))
			case U8:
				out = append(out, byte(v))
			case I8:
				out = append(out, byte(int8(-v)))
			case U16:
				out = append(out, leBytes(uint16(v))...)
			case I16:
				out = append(out, leBytes(uint16(int16(-v)))...)
			case U32:
				out = append(out, leBytes(uint32(v))...)
			case I32:
				out = append(out, leBytes(uint32(int32(-v)))...)
			case U64:
				out = append(out, leBytes(uint64(v))...)
			case I64:
				out = append(out, leBytes(uint64(int64(-v)))...)
			case F16:
				h, _ := F64ToF16(f)
				out = append(out, leBytes(h)...)
			case BF16:
				h, _ := F64ToBF16(f)
				out = append(out, leBytes(h)...)
			case F32:
				out = append(out, leBytes(math.Float32bits(float32(f)))...)
			case F64:
				out = append(out, leBytes(math.Float64bits(f))...)
			case F8_E4M3:
				h, _ := F64ToF8E4M3(f)
				out = append(out, h)
			case F8_E5M2:
				h, _ := F64ToF8E5M2(f)
				out = append(out, h)
			}
		}
		return out
	}

	small := &goldenShard{
		File:      "small.shard",
		BatchSize: 4,
		Tensors: []TensorInfo{
			{Name: "features", DType: F32, Shape: []uint64{3}},
			{Name: "label", DType: I64},
			{Name: "région/Тест", DType: U8, Shape: []uint64{2, 2}},
		},
		Provenance: Provenance{PlanFingerprint: "sha256:abc", SourceFingerprint: "sha256:def", SpecHash: "sha256:012", Epoch: 0, Rank: 1, WorldSize: 2, Workers: 2, ToolVersion: "golden"},
		counts:     []int{4, 4, 2},
		pads:       []int{0, 0, 1},
	}
	// features[e] = id + e/4 (exact in F32), label = -id, U8 bytes = id+e.
	small.spec = func(k, j, i int) []byte {
		id := goldenID(k, j)
		switch i {
		case 0:
			var out []byte
			for e := range 3 {
				out = append(out, leBytes(math.Float32bits(float32(id)+float32(e)/4))...)
			}
			return out
		case 1:
			return leBytes(uint64(-int64(id)))
		default:
			return []byte{byte(id), byte(id + 1), byte(id + 2), byte(id + 3)}
		}
	}

	empty := &goldenShard{
		File:       "empty.shard",
		BatchSize:  8,
		Tensors:    []TensorInfo{{Name: "x", DType: F16, Shape: []uint64{4}}},
		Provenance: Provenance{Epoch: 5, Rank: 3, WorldSize: 4, ToolVersion: "golden"},
		spec:       func(k, j, i int) []byte { return nil },
	}
	// jagged (format 2.0): "seq" I32 lists of lengths (k + j) % 3 * 2 (batch
	// 1 also holds a 700-value row, to make its block larger), "w" an F32
	// fixed scalar, "pts" U8 [2] values of lengths j % 2.
	jagged := &goldenShard{
		File:      "jagged.shard",
		BatchSize: 3,
		Tensors: []TensorInfo{
			{Name: "seq", DType: I32, Jagged: true},
			{Name: "w", DType: F32},
			{Name: "pts", DType: U8, Shape: []uint64{2}, Jagged: true},
		},
		Provenance: Provenance{PlanFingerprint: "sha256:jag", SpecHash: "sha256:jagspec", Epoch: 0, Rank: 0, WorldSize: 1, Workers: 1, ToolVersion: "golden"},
		counts:     []int{3, 3, 2},
		pads:       []int{0, 0, 1},
	}
	// Value e of sample j in batch k: seq = -(100k + 10j + e) (I32), pts
	// element c = 10k + 4j + 2e + c, w = k + j/2.
	jagged.spec = func(k, j, i int) []byte {
		var out []byte
		switch i {
		case 0:
			for e := range goldenSeqLen(k, j) {
				out = append(out, leBytes(uint32(int32(-(100*k + 10*j + e))))...)
			}
		case 1:
			out = leBytes(math.Float32bits(float32(k) + float32(j)/2))
		default:
			for e := range j % 2 {
				out = append(out, byte(10*k+4*j+2*e), byte(10*k+4*j+2*e+1))
			}
		}
		return out
	}
	return []*goldenShard{small, allDTypes, empty, jagged}
}

// goldenSeqLen is the row length of "seq" for sample j of batch k of the
// jagged golden shard.
func goldenSeqLen(k, j int) int {
	if k == 1 && j == 2 {
		return 700
	}
	return (k + j) % 3 * 2
}

// goldenID is the sample id of slot j of batch k: 10k + j + 100.
func goldenID(k, j int) uint64 { return uint64(10*k + j + 100) }

func (gs *goldenShard) write(path string) error {
	w, err := Create(path, WriterOptions{BatchSize: gs.BatchSize, NumBatches: len(gs.counts), Tensors: gs.Tensors, Provenance: gs.Provenance})
	if err != nil {
		return err
	}
	defer w.Abort()
	g := w.Geometry()
	for k, count := range gs.counts {
		block, err := gs.block(g, k, count)
		if err != nil {
			return err
		}
		ids := make([]uint64, count)
		for j := range count {
			ids[j] = goldenID(k, j)
		}
		if err := w.WriteBatch(block, ids, gs.pads[k]); err != nil {
			return err
		}
	}
	return w.Commit()
}

// block builds batch k's block: fixed tensors' samples at their slots, a
// jagged tensor's rows one after another in its values slab, with their
// offsets.
func (gs *goldenShard) block(g Geometry, k, count int) ([]byte, error) {
	var values []uint64
	for i := range gs.Tensors {
		if g.IsJagged(i) {
			var n uint64
			for j := range count {
				n += uint64(len(gs.spec(k, j, i))) / g.SampleBytes[i]
			}
			values = append(values, n)
		}
	}
	lay, err := g.BatchLayout(values)
	if err != nil {
		return nil, err
	}
	block := make([]byte, lay.Size)
	for i := range gs.Tensors {
		if !g.IsJagged(i) {
			for j := range count {
				copy(block[g.SlabOffset[i]+uint64(j)*g.SampleBytes[i]:], gs.spec(k, j, i))
			}
			continue
		}
		v, o := lay.ValuesOffset[i], uint64(0)
		for j := 0; j <= g.BatchSize; j++ {
			le.PutUint64(block[g.SlabOffset[i]+8*uint64(j):], o)
			if j < count {
				row := gs.spec(k, j, i)
				copy(block[v:], row)
				v += uint64(len(row))
				o += uint64(len(row)) / g.SampleBytes[i]
			}
		}
	}
	return block, nil
}

// describe reads a shard and records what a reader sees.
func describe(path string) (*goldenShard, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	d, err := r.Digest()
	if err != nil {
		return nil, err
	}
	out := &goldenShard{File: filepath.Base(path), Size: r.FileSize(), Digest: d, BatchSize: r.Geometry().BatchSize, Tensors: r.Tensors(), Provenance: r.Provenance(), Batches: []goldenBatch{}}
	for k := range r.NumBatches() {
		bi, _ := r.Batch(k)
		ids, err := r.SampleIDs(k)
		if err != nil {
			return nil, err
		}
		if err := r.VerifyBatch(k); err != nil {
			return nil, err
		}
		blk, _ := r.Block(k)
		gb := goldenBatch{Count: bi.Count, Pads: bi.Pads, CRC: fmt.Sprintf("%08x", bi.CRC), SampleIDs: ids}
		for i, ti := range out.Tensors {
			if !ti.Jagged {
				gb.Slabs = append(gb.Slabs, fmt.Sprintf("%x", r.BatchSlab(blk, i, bi.Count)))
				continue
			}
			s, err := r.Jagged(k, blk, i)
			if err != nil {
				return nil, err
			}
			gb.Slabs = append(gb.Slabs, fmt.Sprintf("%x", s.Values))
			if gb.Offsets == nil {
				gb.Offsets = map[string][]int64{}
			}
			for j := 0; j <= bi.Count; j++ {
				gb.Offsets[ti.Name] = append(gb.Offsets[ti.Name], int64(s.Offset(j)))
			}
		}
		out.Batches = append(out.Batches, gb)
	}
	return out, nil
}

// TestGolden regenerates every golden shard in a temporary directory and
// requires it to be byte-identical to the checked-in file (the writer is
// deterministic and the format is pinned), then checks the checked-in files
// against golden.json.
func TestGolden(t *testing.T) {
	tmp := t.TempDir()
	var descs []*goldenShard
	for _, gs := range goldenShards() {
		fresh := filepath.Join(tmp, gs.File)
		if err := gs.write(fresh); err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join(goldenDir, gs.File)
		if *update {
			b, _ := os.ReadFile(fresh)
			if err := os.MkdirAll(goldenDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		got, _ := os.ReadFile(fresh)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: regenerated shard differs from the golden file", gs.File)
		}
		d, err := describe(golden)
		if err != nil {
			t.Fatal(err)
		}
		descs = append(descs, d)
		// The slabs hold what the spec says.
		for k, b := range d.Batches {
			for i := range gs.Tensors {
				var want []byte
				for j := range b.Count {
					want = append(want, gs.spec(k, j, i)...)
				}
				if fmt.Sprintf("%x", want) != b.Slabs[i] {
					t.Errorf("%s batch %d tensor %d: slab %s, want %x", gs.File, k, i, b.Slabs[i], want)
				}
			}
		}
	}
	js, err := json.MarshalIndent(descs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	js = append(js, '\n')
	gj := filepath.Join(goldenDir, "golden.json")
	if *update {
		if err := os.WriteFile(gj, js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(gj)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, want) {
		t.Errorf("golden.json differs from what the golden shards read as")
	}
}

// TestIndependentPythonReader runs shardfmt/tools/readshard.py, a reader (formats 1.x and 2.x)
// written from FORMAT.md alone with the Python standard library, over the
// golden shards and requires it to see exactly golden.json, and to reject a
// truncated shard. Skipped when python3 is not installed.
func TestIndependentPythonReader(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	out, err := exec.Command(py, "tools/readshard.py", "--golden", filepath.Join(goldenDir, "golden.json")).CombinedOutput()
	if err != nil {
		t.Fatalf("readshard.py --golden: %v\n%s", err, out)
	}
	img, err := os.ReadFile(filepath.Join(goldenDir, "small.shard"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.shard")
	if err := os.WriteFile(cut, img[:len(img)-4096], 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(py, "tools/readshard.py", cut).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "expected size 16592 bytes, actual size 12496 bytes") {
		t.Errorf("readshard.py on a truncated shard: %v\n%s", err, out)
	}
	// A NUL byte in a tensor name, checksums resealed: both readers refuse it.
	nul := slices.Clone(img)
	nul[HeaderLen+le.Uint64(nul[HeaderLen+tNameOff:])] = 0
	reseal(nul)
	if _, err := OpenReaderAt(bytes.NewReader(nul), int64(len(nul)), "nul"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Go reader on a NUL in a name: %v, want ErrCorrupt", err)
	}
	path := filepath.Join(t.TempDir(), "nul.shard")
	if err := os.WriteFile(path, nul, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(py, "tools/readshard.py", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "tensor 0 name contains a NUL byte") {
		t.Errorf("readshard.py on a NUL in a name: %v\n%s", err, out)
	}
}
