package shardfmt

import (
	"bytes"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// jaggedOpts has a jagged scalar I64 tensor, a fixed F32 scalar and a
// jagged U16 tensor whose values have shape [2].
func jaggedOpts(nb int) WriterOptions {
	return WriterOptions{
		BatchSize:  4,
		NumBatches: nb,
		Tensors: []TensorInfo{
			{Name: "ids", DType: I64, Jagged: true},
			{Name: "label", DType: F32},
			{Name: "pairs", DType: U16, Shape: []uint64{2}, Jagged: true},
		},
		Provenance: Provenance{PlanFingerprint: "plan:j", SpecHash: "spec:j", Epoch: 1, Rank: 0, WorldSize: 1, Workers: 1, ToolVersion: "test"},
	}
}

// jaggedBatch is one test batch: row lengths per jagged tensor ("ids",
// "pairs") for its count samples.
type jaggedBatch struct {
	idsLen, pairsLen []int
	pads             int
}

// jaggedBatches: batch 1 is the largest (1201 I64 values), batch 2 empty
// rows only.
var jaggedBatches = []jaggedBatch{
	{idsLen: []int{1, 0, 3, 2}, pairsLen: []int{2, 1, 0, 1}},
	{idsLen: []int{600, 1, 600}, pairsLen: []int{1, 1, 1}, pads: 1},
	{idsLen: []int{0, 0}, pairsLen: []int{0, 0}},
}

// idsValue is value e of row j of "ids" in batch k; pairsValue element c of
// value e of row j of "pairs".
func idsValue(k, j, e int) int64       { return int64(1000*k+10*j+e) - 500 }
func pairsValue(k, j, e, c int) uint16 { return uint16(100*k + 10*j + 2*e + c) }

// buildJagged builds batch k's block for geometry g.
func buildJagged(t testing.TB, g Geometry, k int, jb jaggedBatch) []byte {
	t.Helper()
	sum := func(xs []int) uint64 {
		var s uint64
		for _, x := range xs {
			s += uint64(x)
		}
		return s
	}
	lay, err := g.BatchLayout([]uint64{sum(jb.idsLen), sum(jb.pairsLen)})
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, lay.Size)
	putOffsets := func(i int, lens []int) {
		var o uint64
		for j := 0; j <= g.BatchSize; j++ {
			le.PutUint64(block[g.SlabOffset[i]+8*uint64(j):], o)
			if j < len(lens) {
				o += uint64(lens[j])
			}
		}
	}
	putOffsets(0, jb.idsLen)
	putOffsets(2, jb.pairsLen)
	v := lay.ValuesOffset[0]
	for j, n := range jb.idsLen {
		for e := range n {
			le.PutUint64(block[v:], uint64(idsValue(k, j, e)))
			v += 8
		}
		le.PutUint32(block[g.SlabOffset[1]+4*uint64(j):], uint32(0x3f800000+j)) // label
	}
	v = lay.ValuesOffset[2]
	for j, n := range jb.pairsLen {
		for e := range n {
			le.PutUint16(block[v:], pairsValue(k, j, e, 0))
			le.PutUint16(block[v+2:], pairsValue(k, j, e, 1))
			v += 4
		}
	}
	return block
}

// writeJagged writes the jaggedBatches shard at path and returns the
// writer's digest.
func writeJagged(t testing.TB, path string) string {
	t.Helper()
	w, err := Create(path, jaggedOpts(len(jaggedBatches)))
	if err != nil {
		t.Fatal(err)
	}
	for k, jb := range jaggedBatches {
		ids := make([]uint64, len(jb.idsLen))
		for j := range ids {
			ids[j] = uint64(50 + 10*k + j)
		}
		if err := w.WriteBatch(buildJagged(t, w.Geometry(), k, jb), ids, jb.pads); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return w.Digest()
}

// TestJaggedGeometry pins the block layout of jaggedOpts: offsets slabs in
// the fixed part, values slabs after it, 256-aligned.
func TestJaggedGeometry(t *testing.T) {
	g, err := NewGeometry(4, jaggedOpts(1).Tensors)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.SlabOffset, []uint64{0, 256, 512}) || !slices.Equal(g.SlabSize, []uint64{40, 16, 40}) ||
		!slices.Equal(g.SampleBytes, []uint64{8, 4, 4}) || !slices.Equal(g.Jagged, []bool{true, false, true}) || g.BlockSize != 4096 {
		t.Fatalf("geometry %+v", g)
	}
	lay, err := g.BatchLayout([]uint64{1201, 3})
	if err != nil {
		t.Fatal(err)
	}
	if lay.Size != 12288 || !slices.Equal(lay.ValuesOffset, []uint64{768, 0, 10496}) || !slices.Equal(lay.ValuesSize, []uint64{9608, 0, 12}) {
		t.Fatalf("layout %+v", lay)
	}
	if _, err := g.BatchLayout([]uint64{1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("BatchLayout with one count: %v, want ErrInvalid", err)
	}
	if _, err := g.BatchLayout([]uint64{1 << 62, 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("BatchLayout overflowing: %v, want ErrInvalid", err)
	}
	if _, err := FileSize(jaggedOpts(1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("FileSize with jagged tensors: %v, want ErrInvalid", err)
	}
}

// TestJaggedRoundTrip writes a format-2 shard and reads back every block
// location, offset and value, both through the mapping and through pread.
func TestJaggedRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.shard")
	digest := writeJagged(t, path)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(img) != 24784 {
		t.Fatalf("file of %d bytes, want 24784", len(img))
	}
	r1, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	r2, err := OpenReaderAt(bytes.NewReader(img), int64(len(img)), path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Reader{r1, r2} {
		if maj, min := r.Version(); maj != 2 || min != 0 {
			t.Fatalf("version %d.%d, want 2.0", maj, min)
		}
		if !SameTensors(r.Tensors(), jaggedOpts(0).Tensors) {
			t.Fatalf("tensors %+v", r.Tensors())
		}
		if g := r.Geometry(); g.BlockSize != 12288 || !g.HasJagged() {
			t.Fatalf("geometry %+v, want largest block 12288", g)
		}
		if d, err := r.Digest(); err != nil || d != digest {
			t.Fatalf("Digest %s, %v; writer said %s", d, err, digest)
		}
		l := r.Layout()
		wantRegions := []Region{{"header", 0, 256}, {"tensor table", 256, 400}, {"metadata", 656, l.Regions[2].Size},
			{"sample ids", 656 + l.Regions[2].Size, 96}, {"padding", 752 + l.Regions[2].Size, 4096 - 752 - l.Regions[2].Size},
			{"data", 4096, 20480}, {"batch table", 24576, 144}, {"footer", 24720, 64}}
		if !slices.Equal(l.Regions, wantRegions) {
			t.Fatalf("regions %+v, want %+v", l.Regions, wantRegions)
		}
		wantBlocks := []Region{{"block", 4096, 4096}, {"block", 8192, 12288}, {"block", 20480, 4096}}
		bufs := [][]byte{make([]byte, 12288), make([]byte, 12288), make([]byte, 12288)}
		if err := r.ReadBlocks(0, bufs); err != nil {
			t.Fatal(err)
		}
		for k, jb := range jaggedBatches {
			bi, err := r.Batch(k)
			if err != nil {
				t.Fatal(err)
			}
			if bi.Offset != wantBlocks[k].Offset || bi.Size != wantBlocks[k].Size || l.Block(k) != wantBlocks[k] ||
				bi.Count != len(jb.idsLen) || bi.Pads != jb.pads {
				t.Fatalf("batch %d: %+v, layout %+v, want %+v", k, bi, l.Block(k), wantBlocks[k])
			}
			if err := r.VerifyBatch(k); err != nil {
				t.Fatalf("VerifyBatch(%d): %v", k, err)
			}
			blk, err := r.Block(k)
			if err != nil {
				t.Fatal(err)
			}
			one := make([]byte, 12288)
			if err := r.ReadBlock(k, one); err != nil || !bytes.Equal(one[:bi.Size], blk) || !bytes.Equal(bufs[k][:bi.Size], blk) {
				t.Fatalf("ReadBlock/ReadBlocks(%d) differ from Block: %v", k, err)
			}
			if !bytes.Equal(blk, buildJagged(t, r.Geometry(), k, jb)) {
				t.Fatalf("block %d differs from what was written", k)
			}
			ids, err := r.SampleIDs(k)
			if err != nil || len(ids) != bi.Count || (bi.Count > 0 && ids[0] != uint64(50+10*k)) {
				t.Fatalf("SampleIDs(%d) = %v, %v", k, ids, err)
			}
			s, err := r.Jagged(k, blk, 0)
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			o := []int{0}
			for j, n := range jb.idsLen {
				for e := range n {
					want = le.AppendUint64(want, uint64(idsValue(k, j, e)))
				}
				o = append(o, o[j]+n)
			}
			if s.N != uint64(o[len(o)-1]) || !bytes.Equal(s.Values, want) || len(s.Offsets) != 8*(bi.Count+1) {
				t.Fatalf("batch %d ids: N %d, %d value bytes, %d offset bytes", k, s.N, len(s.Values), len(s.Offsets))
			}
			for j := range o {
				if s.Offset(j) != o[j] {
					t.Fatalf("batch %d ids offsets[%d] = %d, want %d", k, j, s.Offset(j), o[j])
				}
			}
			p, err := r.Jagged(k, blk, 2)
			if err != nil {
				t.Fatal(err)
			}
			want = nil
			for j, n := range jb.pairsLen {
				for e := range n {
					want = le.AppendUint16(le.AppendUint16(want, pairsValue(k, j, e, 0)), pairsValue(k, j, e, 1))
				}
			}
			if !bytes.Equal(p.Values, want) || p.N != uint64(len(want)/4) {
				t.Fatalf("batch %d pairs: %x, want %x", k, p.Values, want)
			}
			if lab := r.BatchSlab(blk, 1, bi.Count); len(lab) != 4*bi.Count || (bi.Count > 0 && le.Uint32(lab) != 0x3f800000) {
				t.Fatalf("batch %d label slab %x", k, lab)
			}
			if _, err := r.Jagged(k, blk, 1); !errors.Is(err, ErrInvalid) {
				t.Errorf("Jagged of a fixed tensor: %v, want ErrInvalid", err)
			}
			if _, err := r.Jagged(k, blk[:100], 0); !errors.Is(err, ErrInvalid) {
				t.Errorf("Jagged of a short block: %v, want ErrInvalid", err)
			}
		}
	}
}

// TestJaggedWriterRefuses checks that WriteBatch refuses a block whose
// offsets or length disagree with each other, or with nonzero padding.
func TestJaggedWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "w.shard"), jaggedOpts(1))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	g := w.Geometry()
	good := buildJagged(t, g, 0, jaggedBatches[0])
	ids := []uint64{1, 2, 3, 4}
	cases := map[string]func(b []byte) []byte{
		"short block":              func(b []byte) []byte { return b[:4096-256] },
		"block one page too long":  func(b []byte) []byte { return append(b, make([]byte, 4096)...) },
		"offsets[0] not zero":      func(b []byte) []byte { le.PutUint64(b[0:], 1); return b },
		"offsets decrease":         func(b []byte) []byte { le.PutUint64(b[16:], 0); return b },
		"unused slot offset not N": func(b []byte) []byte { le.PutUint64(b[g.SlabOffset[2]+8*4:], 3); return b },
		"values count too large":   func(b []byte) []byte { le.PutUint64(b[g.SlabOffset[0]+8*4:], 1<<40); return b },
		"nonzero after the values": func(b []byte) []byte { b[768+6*8] = 1; return b },
		"nonzero between values":   func(b []byte) []byte { b[1000] = 1; return b },
	}
	for name, damage := range cases {
		if err := w.WriteBatch(damage(bytes.Clone(good)), ids, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: WriteBatch = %v, want ErrInvalid", name, err)
		}
	}
	if err := w.WriteBatch(good, ids, 0); err != nil {
		t.Fatalf("good block: %v", err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != 4096+4096+48+64 {
		t.Errorf("Size %d, want %d", w.Size(), 4096+4096+48+64)
	}
}

// TestUnknownMajorRefusedNamingIt: a shard of a major this package does
// not know (3) is refused by the Go reader and by the independent reader
// (tools/readshard.py, skipped without python3), each naming the version.
func TestUnknownMajorRefusedNamingIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.shard")
	writeJagged(t, path)
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img[hMajor] = 3
	reseal(img)
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "format version 3.0, this reader supports 1.x and 2.x") {
		t.Errorf("Open = %v, want ErrVersion naming 3.0", err)
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	out, err := exec.Command(py, "tools/readshard.py", path).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "invalid: version: major 3 (format 3.0)") {
		t.Errorf("readshard.py on a format-3 shard: %v\n%s", err, out)
	}
}

// TestEmptyJaggedShard: no batches, the largest block is the empty one.
func TestEmptyJaggedShard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.shard")
	w, err := Create(path, jaggedOpts(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.NumBatches() != 0 || r.Geometry().BlockSize != 4096 || r.FileSize() != 4096+64 {
		t.Fatalf("%d batches, block %d, size %d", r.NumBatches(), r.Geometry().BlockSize, r.FileSize())
	}
}

// TestOffsetsOKAgreesWithTheWalk checks offsetsOK, the one-pass check, against
// locateBadOffset's walk on every offsets slab of up to 5 samples (so
// through both its 4-entry and 1-entry loops) with
// offsets in 0..3, every count and values count: both pass or both fail.
func TestOffsetsOKAgreesWithTheWalk(t *testing.T) {
	passed, failed := 0, 0
	for b := 0; b <= 5; b++ {
		s := make([]byte, 8*(b+1))
		combos := 1 << (2 * (b + 1))
		for c := range combos {
			for j := 0; j <= b; j++ {
				le.PutUint64(s[8*j:], uint64(c>>(2*j)&3))
			}
			for count := 0; count <= b; count++ {
				for n := uint64(0); n <= 3; n++ {
					ok := offsetsOK(s, count, n)
					p, why := locateBadOffset(s, 0, b, count, n)
					if ok != (p < 0) {
						t.Fatalf("b %d count %d n %d offsets %v: offsetsOK %v, walk %d %q", b, count, n, s, ok, p, why)
					}
					if p2, why2 := badOffsets(s, 0, b, count, n); p2 != p || why2 != why {
						t.Fatalf("b %d count %d n %d: badOffsets %d %q, walk %d %q", b, count, n, p2, why2, p, why)
					}
					if ok {
						passed++
					} else {
						failed++
					}
				}
			}
		}
	}
	// Passing slabs: for each b, count and n, offsets 1..count-1
	// nondecreasing in [0, n], offsets[count..b] = n: C(n+count-1, count-1)
	// for count >= 1, one for count = 0 and n = 0; 252 in all, of
	// sum over b of 4^(b+1)*(b+1)*4 = 123792 cases.
	if passed != 252 || passed+failed != 123792 {
		t.Fatalf("%d passed, %d failed", passed, failed)
	}
}

// BenchmarkOffsetsCheck times the per-batch offsets check of a batch of
// 1024 samples.
func BenchmarkOffsetsCheck(b *testing.B) {
	const bs = 1024
	s := make([]byte, 8*(bs+1))
	for j := range bs + 1 {
		le.PutUint64(s[8*j:], uint64(20*j))
	}
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if p, _ := badOffsets(s, 0, bs, bs, 20*bs); p >= 0 {
			b.Fatal(p)
		}
	}
}

// TestJaggedBadOffsetsMessage: a broken offsets entry is reported at its
// block (batch 1's block starts at file offset 8192) and names the entry
// by index, signed value and file offset: entry 2 of "ids" (at 8192 + 2*8
// = 8208) set to 1300, beyond the batch's 1201 values, or to INT64_MIN
// (once reported as entry 3 decreasing from 9223372036854775808), or to
// 1202 with entry 3 back at 1201 (CRC fixed each time).
func TestJaggedBadOffsetsMessage(t *testing.T) {
	const blk1, size1, bt, bel = 8192, 12288, 24576, 48
	for _, c := range []struct {
		v    uint64
		want string
	}{
		{1300, `offsets[2] = 1300 exceeds the batch's values count 1201 (offsets entry 2 at file offset 8208)`},
		{1 << 63, `offsets[2] = -9223372036854775808 is negative (offsets entry 2 at file offset 8208)`},
		{math.MaxUint64, `offsets[2] = -1 is negative (offsets entry 2 at file offset 8208)`},
	} {
		path := filepath.Join(t.TempDir(), "j.shard")
		writeJagged(t, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		le.PutUint64(b[blk1+16:], c.v)
		le.PutUint32(b[bt+bel+bBlockCRC:], crc32c(b[blk1:blk1+size1]))
		reseal(b)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		err = r.VerifyBatch(1)
		r.Close()
		var fe *FormatError
		want := path + `: block of batch 1 at offset 8192: corrupt shard: tensor "ids": ` + c.want
		if err == nil || err.Error() != want || !errors.As(err, &fe) || fe.Offset != blk1 || !errors.Is(err, ErrCorrupt) {
			t.Errorf("entry 2 = %#x: error\n  %v\nwant\n  %s", c.v, err, want)
		}
	}
}
