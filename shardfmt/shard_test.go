package shardfmt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// batchData is what a test wrote for one batch.
type batchData struct {
	block []byte
	ids   []uint64
	pads  int
}

// fillBlock builds a block with count samples of pseudo-random bytes in each
// slab's used prefix and zero elsewhere.
func fillBlock(g Geometry, count int, rng *rand.Rand) []byte {
	block := make([]byte, g.BlockSize)
	for i := range g.SlabOffset {
		used := g.Slab(block, i, count)
		for j := range used {
			used[j] = byte(rng.Uint32())
		}
	}
	return block
}

// writeShard writes a shard with nb batches; batch k holds counts[k] samples
// (BatchSize when counts is nil) of which pads[k] are pads.
func writeShard(t testing.TB, path string, opts WriterOptions, counts, pads []int, seed uint64) []batchData {
	t.Helper()
	w, err := Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []batchData
	for k := range opts.NumBatches {
		count, pad := opts.BatchSize, 0
		if counts != nil {
			count, pad = counts[k], pads[k]
		}
		block := fillBlock(w.Geometry(), count, rng)
		ids := make([]uint64, count)
		for j := range ids {
			ids[j] = uint64(k*opts.BatchSize + j)
		}
		if err := w.WriteBatch(block, ids, pad); err != nil {
			t.Fatal(err)
		}
		out = append(out, batchData{block, ids, pad})
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return out
}

func testOpts(b, nb int) WriterOptions {
	return WriterOptions{
		BatchSize:  b,
		NumBatches: nb,
		Tensors: []TensorInfo{
			{Name: "x", DType: F32, Shape: []uint64{3}},
			{Name: "y", DType: I64},
			{Name: "тест/emb", DType: BF16, Shape: []uint64{2, 5}},
		},
		Provenance: Provenance{PlanFingerprint: "plan:abc", SpecHash: "spec:1", Epoch: 2, Rank: 1, WorldSize: 4, Workers: 2, ToolVersion: "test"},
	}
}

// checkShard opens path both ways and compares everything with want.
func checkShard(t *testing.T, path string, opts WriterOptions, want []batchData) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	r1, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := OpenReaderAt(f, st.Size(), "ra:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	geo, err := NewGeometry(opts.BatchSize, opts.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Reader{r1, r2} {
		if r.NumBatches() != opts.NumBatches {
			t.Fatalf("NumBatches = %d, want %d", r.NumBatches(), opts.NumBatches)
		}
		if got := r.Provenance(); got != opts.Provenance {
			t.Errorf("Provenance = %+v, want %+v", got, opts.Provenance)
		}
		if got := fmt.Sprint(r.Tensors()); got != fmt.Sprint(opts.Tensors) {
			t.Errorf("Tensors = %s, want %s", got, fmt.Sprint(opts.Tensors))
		}
		if got := fmt.Sprint(r.Geometry()); got != fmt.Sprint(geo) {
			t.Errorf("Geometry = %s, want %s", got, fmt.Sprint(geo))
		}
		buf := make([]byte, geo.BlockSize)
		for k, bd := range want {
			bi, err := r.Batch(k)
			if err != nil {
				t.Fatal(err)
			}
			if bi.Count != len(bd.ids) || bi.Pads != bd.pads || bi.CRC != crc32c(bd.block) || bi.Offset%BlockAlign != 0 {
				t.Errorf("batch %d: %+v, want count %d pads %d crc %08x", k, bi, len(bd.ids), bd.pads, crc32c(bd.block))
			}
			// Offset locates the block in the file.
			if _, err := f.ReadAt(buf, int64(bi.Offset)); err != nil || !bytes.Equal(buf, bd.block) {
				t.Errorf("batch %d: the %d bytes at Offset %d are not its block (err %v)", k, len(buf), bi.Offset, err)
			}
			blk, err := r.Block(k)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(blk, bd.block) {
				t.Errorf("batch %d: block differs", k)
			}
			if err := r.ReadBlock(k, buf); err != nil || !bytes.Equal(buf, bd.block) {
				t.Errorf("batch %d: ReadBlock differs (err %v)", k, err)
			}
			ids, err := r.SampleIDs(k)
			if err != nil || !slices.Equal(ids, bd.ids) {
				t.Errorf("batch %d: SampleIDs = %v, %v; want %v", k, ids, err, bd.ids)
			}
			if err := r.VerifyBatch(k); err != nil {
				t.Errorf("VerifyBatch(%d): %v", k, err)
			}
			for i := range opts.Tensors {
				s := r.BatchSlab(blk, i, bi.Count)
				if uint64(len(s)) != uint64(bi.Count)*geo.SampleBytes[i] || (len(s) > 0 && &s[0] != &blk[geo.SlabOffset[i]]) {
					t.Errorf("batch %d tensor %d: slab of %d bytes", k, i, len(s))
				}
			}
		}
		if err := r.VerifySampleIDs(); err != nil {
			t.Error(err)
		}
		if _, err := r.Batch(opts.NumBatches); !errors.Is(err, ErrRange) {
			t.Errorf("Batch(out of range) = %v, want ErrRange", err)
		}
		if _, err := r.Block(-1); !errors.Is(err, ErrRange) {
			t.Errorf("Block(-1) = %v, want ErrRange", err)
		}
	}
	d1, err1 := r1.Digest()
	d2, err2 := r2.Digest()
	d3, err3 := FileDigest(path)
	if err1 != nil || err2 != nil || err3 != nil || d1 != d2 || d1 != d3 || !strings.HasPrefix(d1, "sha256:") || len(d1) != 7+64 {
		t.Errorf("digests %q %q %q (%v %v %v)", d1, d2, d3, err1, err2, err3)
	}
	if !r1.Mapped() || r2.Mapped() {
		t.Errorf("Mapped = %v, %v; want true, false", r1.Mapped(), r2.Mapped())
	}
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	opts := testOpts(5, 4)
	counts := []int{5, 5, 3, 0}
	pads := []int{0, 2, 3, 0}
	path := filepath.Join(dir, ShardFileName(2, 1))
	want := writeShard(t, path, opts, counts, pads, 1)
	checkShard(t, path, opts, want)
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 || ents[0].Name() != "rank-00001.shard" {
		t.Errorf("directory holds %v", ents)
	}
}

// TestRoundTripEveryDType writes one tensor of each dtype with odd shapes
// and batch sizes and reads it back.
func TestRoundTripEveryDType(t *testing.T) {
	dir := t.TempDir()
	shapes := [][]uint64{nil, {1}, {7}, {3, 5}, {2, 1, 3}, {1, 1, 1, 1, 1, 1, 1, 2}}
	for d := BOOL; d.Valid(); d++ {
		for si, shape := range shapes {
			for _, b := range []int{1, 3, 64} {
				opts := WriterOptions{
					BatchSize: b, NumBatches: 3,
					Tensors: []TensorInfo{
						{Name: "t_" + d.String(), DType: d, Shape: shape},
						{Name: "mask", DType: BOOL, Shape: []uint64{3}},
					},
					Provenance: Provenance{Epoch: uint32(si), Rank: uint32(b)},
				}
				path := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.shard", d, si, b))
				counts := []int{b, b - 1, 1}
				pads := []int{0, min(1, b-1), 1}
				want := writeShard(t, path, opts, counts, pads, uint64(b))
				checkShard(t, path, opts, want)
			}
		}
	}
}

func TestEmptyShard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.shard")
	opts := testOpts(8, 0)
	writeShard(t, path, opts, nil, nil, 0)
	checkShard(t, path, opts, nil)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st, _ := os.Stat(path); r.FileSize() != st.Size() {
		t.Errorf("FileSize = %d, want %d", r.FileSize(), st.Size())
	}
}

func TestGeometry(t *testing.T) {
	g, err := NewGeometry(10, []TensorInfo{
		{Name: "a", DType: F32, Shape: []uint64{3}},  // 12 B/sample, 120 B slab at 0
		{Name: "b", DType: U8},                       // 1 B, 10 B slab at 256
		{Name: "c", DType: F64, Shape: []uint64{50}}, // 400 B, 4000 B slab at 512
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Geometry{
		BatchSize: 10, BlockSize: 8192,
		SlabOffset: []uint64{0, 256, 512}, SlabSize: []uint64{120, 10, 4000}, SampleBytes: []uint64{12, 1, 400},
	}
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("NewGeometry = %+v, want %+v", g, want)
	}
	bad := []struct {
		b       int
		tensors []TensorInfo
	}{
		{0, []TensorInfo{{Name: "a", DType: U8}}},
		{1, nil},
		{1, []TensorInfo{{Name: "", DType: U8}}},
		{1, []TensorInfo{{Name: "\xff", DType: U8}}},
		{1, []TensorInfo{{Name: "a", DType: 0}}},
		{1, []TensorInfo{{Name: "a", DType: 16}}},
		{1, []TensorInfo{{Name: "a", DType: U8, Shape: []uint64{0}}}},
		{1, []TensorInfo{{Name: "a", DType: U8, Shape: make([]uint64, 9)}}},
		{1, []TensorInfo{{Name: "a", DType: U8}, {Name: "a", DType: I8}}},
		{1, []TensorInfo{{Name: "a", DType: F64, Shape: []uint64{1 << 62}}}},
		{1 << 20, []TensorInfo{{Name: "a", DType: F64, Shape: []uint64{1 << 44}}}},
	}
	for i, tt := range bad {
		if _, err := NewGeometry(tt.b, tt.tensors); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: NewGeometry = %v, want ErrInvalid", i, err)
		}
	}
}

func TestWriterRejects(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.shard")
	opts := testOpts(4, 1)
	w, err := Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	g := w.Geometry()
	ok := make([]byte, g.BlockSize)
	dirty := make([]byte, g.BlockSize)
	dirty[g.SlabOffset[1]+2*g.SampleBytes[1]] = 1 // sample 2 of y, beyond count 2
	tail := make([]byte, g.BlockSize)
	tail[g.BlockSize-1] = 1
	for _, tt := range []struct {
		name  string
		block []byte
		ids   []uint64
		pads  int
	}{
		{"short block", ok[:len(ok)-1], []uint64{1}, 0},
		{"too many ids", ok, []uint64{1, 2, 3, 4, 5}, 0},
		{"pads above count", ok, []uint64{1}, 2},
		{"negative pads", ok, []uint64{1}, -1},
		{"nonzero unused slot", dirty, []uint64{1, 2}, 0},
		{"nonzero block tail", tail, []uint64{1, 2, 3, 4}, 0},
	} {
		if err := w.WriteBatch(tt.block, tt.ids, tt.pads); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: WriteBatch = %v, want ErrInvalid", tt.name, err)
		}
	}
	if err := w.WriteBatch(dirty, []uint64{1, 2, 3}, 0); err != nil {
		t.Errorf("dirty byte inside count: %v", err)
	}
	if err := w.WriteBatch(ok, nil, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("batch beyond NumBatches = %v, want ErrInvalid", err)
	}
	tmp := w.TempPath()
	if _, err := os.Stat(tmp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("final path exists before Commit: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp file survives Abort: %v", err)
	}
	if err := w.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after Abort = %v, want ErrClosed", err)
	}

	// Commit with missing batches fails and leaves nothing.
	w2, err := Create(path, testOpts(4, 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.WriteBatch(ok, []uint64{9}, 0); err != nil {
		t.Fatal(err)
	}
	if err := w2.Commit(); !errors.Is(err, ErrInvalid) {
		t.Errorf("short Commit = %v, want ErrInvalid", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Errorf("directory not empty after failed commit: %v", ents)
	}
	if err := w2.Abort(); err != nil {
		t.Errorf("Abort after failed Commit: %v", err)
	}
}

func TestProvenanceCheck(t *testing.T) {
	p := Provenance{PlanFingerprint: "p1", SpecHash: "s1", Epoch: 3, Rank: 2, WorldSize: 4}
	if err := p.CheckProvenance(Provenance{PlanFingerprint: "p1", Epoch: 3, Rank: 2}); err != nil {
		t.Errorf("matching provenance: %v", err)
	}
	for _, want := range []Provenance{
		{PlanFingerprint: "p2", Epoch: 3, Rank: 2},
		{SpecHash: "s2", Epoch: 3, Rank: 2},
		{Epoch: 0, Rank: 2},
		{Epoch: 3, Rank: 0},
		{Epoch: 3, Rank: 2, WorldSize: 8},
	} {
		if err := p.CheckProvenance(want); !errors.Is(err, ErrProvenance) {
			t.Errorf("CheckProvenance(%+v) = %v, want ErrProvenance", want, err)
		}
	}
}

// TestConcurrentReads reads and verifies every batch from several goroutines
// at once over one mapped Reader (run with -race).
func TestConcurrentReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.shard")
	opts := testOpts(7, 16)
	want := writeShard(t, path, opts, nil, nil, 5)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			buf := make([]byte, r.Geometry().BlockSize)
			for k := range r.NumBatches() {
				k = (k + 4*g) % r.NumBatches()
				if err := r.VerifyBatch(k); err != nil {
					errs <- err
					return
				}
				if err := r.ReadBlock(k, buf); err != nil || !bytes.Equal(buf, want[k].block) {
					errs <- fmt.Errorf("batch %d: ReadBlock differs (%v)", k, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestReleaseBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.shard")
	want := writeShard(t, path, testOpts(3, 2), nil, nil, 8)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	blk, _ := r.Block(1)
	if err := r.ReleaseBlock(1); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(blk, want[1].block) {
		t.Error("block view changed after ReleaseBlock")
	}
	if err := r.ReleaseBlock(2); !errors.Is(err, ErrRange) {
		t.Errorf("ReleaseBlock(2) = %v, want ErrRange", err)
	}
}

// TestTruncatedAfterOpen pins that a shard cut short after it was opened and
// mapped gives errors, never a SIGBUS crash, from the Reader's own methods.
func TestTruncatedAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.shard")
	writeShard(t, path, testOpts(5, 8), nil, nil, 2)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !r.Mapped() {
		t.Skip("not mapped on this platform")
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	if err := r.VerifyBatch(7); !errors.Is(err, ErrSize) {
		t.Errorf("VerifyBatch after truncation = %v, want ErrSize", err)
	}
	if _, err := r.SampleIDs(7); !errors.Is(err, ErrSize) {
		t.Errorf("SampleIDs after truncation = %v, want ErrSize", err)
	}
	if _, err := r.Digest(); !errors.Is(err, ErrSize) {
		t.Errorf("Digest after truncation = %v, want ErrSize", err)
	}
	buf := make([]byte, r.Geometry().BlockSize)
	if err := r.ReadBlock(7, buf); !errors.Is(err, ErrSize) {
		t.Errorf("ReadBlock after truncation = %v, want ErrSize", err)
	}
}
