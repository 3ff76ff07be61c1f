package shardfmt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// sentinels are the errors any rejection must wrap.
var sentinels = []error{ErrSize, ErrMagic, ErrVersion, ErrEndian, ErrChecksum, ErrCorrupt}

// FuzzOpen feeds arbitrary bytes to OpenReaderAt, both as given and with
// every checksum recomputed (so mutations reach the structural checks). A
// rejected input must give a *FormatError wrapping a sentinel; an accepted
// one must read back consistently. The seeds are the golden shards (format
// 1.0) and a format-2.0 shard with jagged tensors.
func FuzzOpen(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(goldenDir, "*.shard"))
	if len(seeds) == 0 {
		f.Fatal("no golden shards in " + goldenDir)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	jagged := filepath.Join(f.TempDir(), "jagged.shard")
	writeJagged(f, jagged)
	b, err := os.ReadFile(jagged)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAccepted(t, data)
		if resealable(data) {
			img := bytes.Clone(data)
			reseal(img)
			checkAccepted(t, img)
		}
	})
}

// resealable reports whether reseal can run on b without going out of range.
func resealable(b []byte) bool {
	if len(b) < HeaderLen+FooterLen {
		return false
	}
	hl := uint64(le.Uint32(b[hHeaderLen:]))
	return hl >= HeaderLen && hl%8 == 0 && hl <= uint64(len(b))-FooterLen
}

func checkAccepted(t *testing.T, data []byte) {
	r, err := OpenReaderAt(bytes.NewReader(data), int64(len(data)), "fuzz")
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Path != "fuzz" {
			t.Fatalf("rejection is not a *FormatError: %v", err)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return
			}
		}
		t.Fatalf("rejection wraps no sentinel: %v", err)
	}
	defer r.Close()
	g := r.Geometry()
	if r.FileSize() != int64(len(data)) {
		t.Fatalf("FileSize %d, want %d", r.FileSize(), len(data))
	}
	// Layout regions tile the file exactly.
	l := r.Layout()
	var pos uint64
	for _, reg := range l.Regions {
		if reg.Offset != pos {
			t.Fatalf("region %q at %d, want %d", reg.Name, reg.Offset, pos)
		}
		pos += reg.Size
	}
	if pos != uint64(len(data)) || l.DataOffset%BlockAlign != 0 || l.BlockSize%BlockAlign != 0 {
		t.Fatalf("layout %+v does not tile a %d-byte file", l, len(data))
	}
	// Slabs are aligned, ordered and inside the block.
	tensors := r.Tensors()
	if len(tensors) != len(g.SlabOffset) {
		t.Fatalf("%d tensors, %d slabs", len(tensors), len(g.SlabOffset))
	}
	var end uint64
	for i, ti := range tensors {
		sb, err := sampleBytes(ti.DType, ti.Shape)
		slab := sb * uint64(g.BatchSize)
		if ti.Jagged {
			slab = 8 * uint64(g.BatchSize+1)
		}
		if err != nil || sb != g.SampleBytes[i] || g.SlabSize[i] != slab || ti.Jagged != g.IsJagged(i) ||
			g.SlabOffset[i]%SlabAlign != 0 || g.SlabOffset[i] < end || g.SlabOffset[i]+g.SlabSize[i] > g.BlockSize {
			t.Fatalf("tensor %d %+v inconsistent with geometry %+v", i, ti, g)
		}
		end = g.SlabOffset[i] + g.SlabSize[i]
	}
	if _, err := r.Digest(); err != nil {
		t.Fatalf("Digest: %v", err)
	}
	// Blocks tile the data section in step order, each a whole number of
	// pages, none larger than the header's largest block.
	next := l.DataOffset
	for k := range r.NumBatches() {
		bi, err := r.Batch(k)
		if err != nil || bi.Offset != next || bi.Size == 0 || bi.Size%BlockAlign != 0 || bi.Size > g.BlockSize || l.Block(k).Size != bi.Size {
			t.Fatalf("batch %d: %+v, %v, want offset %d", k, bi, err, next)
		}
		next += bi.Size
	}
	for _, reg := range l.Regions {
		if reg.Name == "data" && (reg.Offset != l.DataOffset || next != reg.Offset+reg.Size) {
			t.Fatalf("blocks end at %d, layout %+v", next, l)
		}
	}
	for k := range min(r.NumBatches(), 64) {
		bi, err := r.Batch(k)
		if err != nil {
			t.Fatalf("Batch(%d): %v", k, err)
		}
		if bi.Count < 0 || bi.Count > g.BatchSize || bi.Pads < 0 || bi.Pads > bi.Count || bi.Offset != l.Block(k).Offset {
			t.Fatalf("batch %d: %+v", k, bi)
		}
		blk, err := r.Block(k)
		if err != nil || uint64(len(blk)) != bi.Size {
			t.Fatalf("Block(%d): %d bytes, %v", k, len(blk), err)
		}
		for i, ti := range tensors {
			want := uint64(bi.Count) * g.SampleBytes[i]
			if ti.Jagged {
				want = 8 * uint64(bi.Count+1)
			}
			if s := r.BatchSlab(blk, i, bi.Count); uint64(len(s)) != want {
				t.Fatalf("BatchSlab(%d, %d): %d bytes", k, i, len(s))
			}
			if ti.Jagged {
				checkJaggedSlab(t, r, k, i, blk, bi)
			}
		}
		ids, err := r.SampleIDs(k)
		if err == nil && len(ids) != bi.Count {
			t.Fatalf("SampleIDs(%d): %d ids, count %d", k, len(ids), bi.Count)
		}
		if err != nil && !errors.Is(err, ErrChecksum) {
			t.Fatalf("SampleIDs(%d): %v", k, err)
		}
		if err := r.VerifyBatch(k); err != nil && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("VerifyBatch(%d): %v", k, err)
		}
	}
	if err := r.VerifySampleIDs(); err != nil && !errors.Is(err, ErrChecksum) {
		t.Fatalf("VerifySampleIDs: %v", err)
	}
}

// checkJaggedSlab checks what Reader.Jagged returns for tensor i of batch
// k: an ErrCorrupt, or views inside the block whose offsets start at 0,
// never decrease and end at N, and N values of SampleBytes bytes each,
// 256-byte aligned after the fixed part.
func checkJaggedSlab(t *testing.T, r *Reader, k, i int, blk []byte, bi BatchInfo) {
	g := r.Geometry()
	s, err := r.Jagged(k, blk, i)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Jagged(%d, %d): %v", k, i, err)
		}
		return
	}
	if len(s.Offsets) != 8*(bi.Count+1) || uint64(len(s.Values)) != s.N*g.SampleBytes[i] {
		t.Fatalf("Jagged(%d, %d): %d offset bytes, %d value bytes for N %d", k, i, len(s.Offsets), len(s.Values), s.N)
	}
	prev := 0
	for j := 0; j <= bi.Count; j++ {
		o := s.Offset(j)
		if (j == 0 && o != 0) || o < prev || uint64(o) > s.N || (j == bi.Count && uint64(o) != s.N) {
			t.Fatalf("Jagged(%d, %d): offsets[%d] = %d after %d, N %d", k, i, j, o, prev, s.N)
		}
		prev = o
	}
	if len(s.Values) > 0 {
		at := uint64(addrOf(s.Values) - addrOf(blk))
		if at%SlabAlign != 0 || at < g.fixedEnd() || at+uint64(len(s.Values)) > bi.Size {
			t.Fatalf("Jagged(%d, %d): values at block offset %d, %d bytes, block of %d", k, i, at, len(s.Values), bi.Size)
		}
	}
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
