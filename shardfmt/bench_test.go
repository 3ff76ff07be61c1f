package shardfmt

import (
	"crypto/sha256"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// buildSparse writes a valid shard with nb all-zero batches of b samples of
// one F32 tensor without writing the data section (it stays a hole), so a
// benchmark can open a 100,000-batch shard without 400 MB of writes.
func buildSparse(tb testing.TB, path string, nb, b int) {
	tb.Helper()
	opts := WriterOptions{BatchSize: b, NumBatches: nb, Tensors: []TensorInfo{{Name: "x", DType: F32}}, Provenance: Provenance{PlanFingerprint: "bench"}}
	geo, err := NewGeometry(b, opts.Tensors)
	if err != nil {
		tb.Fatal(err)
	}
	h, prefix, err := planLayout(geo, opts, []byte(`{"plan_fingerprint":"bench"}`))
	if err != nil {
		tb.Fatal(err)
	}
	blockCRC := crc32c(make([]byte, geo.BlockSize))
	ids := make([]byte, 8*b)
	for j := range b {
		le.PutUint64(ids[8*j:], UnusedSampleID)
	}
	idsCRC := crc32c(ids)
	bt := make([]byte, h.btLen)
	idsSec := make([]byte, h.idsLen)
	for k := range nb {
		e := bt[k*BatchEntryLen:]
		le.PutUint32(e[bBlockCRC:], blockCRC)
		le.PutUint32(e[bIDsCRC:], idsCRC)
		copy(idsSec[k*8*b:], ids)
	}
	writeSparse(tb, path, &h, prefix, bt, idsSec)
}

// buildSparseJagged is buildSparse for a format-2 shard: nb batches of one
// jagged I32 tensor, every row empty (all-zero 4096-byte blocks, the data
// section a hole).
func buildSparseJagged(tb testing.TB, path string, nb, b int) {
	tb.Helper()
	opts := WriterOptions{BatchSize: b, NumBatches: nb, Tensors: []TensorInfo{{Name: "x", DType: I32, Jagged: true}}, Provenance: Provenance{PlanFingerprint: "bench"}}
	geo, err := NewGeometry(b, opts.Tensors)
	if err != nil {
		tb.Fatal(err)
	}
	h, prefix, err := planLayout(geo, opts, []byte(`{"plan_fingerprint":"bench"}`))
	if err != nil {
		tb.Fatal(err)
	}
	blockCRC := crc32c(make([]byte, geo.BlockSize))
	ids := make([]byte, 8*b)
	for j := range b {
		le.PutUint64(ids[8*j:], UnusedSampleID)
	}
	idsCRC := crc32c(ids)
	bel := uint64(h.batchEntryLen)
	bt := make([]byte, uint64(nb)*bel)
	idsSec := make([]byte, h.idsLen)
	for k := range uint64(nb) {
		e := bt[k*bel:]
		le.PutUint32(e[bBlockCRC:], blockCRC)
		le.PutUint32(e[bIDsCRC:], idsCRC)
		le.PutUint64(e[bBlockOff:], h.dataOff+k*geo.BlockSize)
		le.PutUint64(e[bBlockLen:], geo.BlockSize)
		copy(idsSec[k*8*uint64(b):], ids)
	}
	h.btOff = h.dataOff + uint64(nb)*geo.BlockSize
	h.btLen = uint64(len(bt))
	h.footerOff = h.btOff + h.btLen
	h.fileLen = h.footerOff + FooterLen
	writeSparse(tb, path, &h, prefix, bt, idsSec)
}

func TestSparseShardValid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.shard")
	buildSparse(t, path, 10, 3)
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for k := range 10 {
		if err := r.VerifyBatch(k); err != nil {
			t.Fatal(err)
		}
	}
	jpath := filepath.Join(t.TempDir(), "j.shard")
	buildSparseJagged(t, jpath, 10, 3)
	j, err := Open(jpath)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for k := range 10 {
		if err := j.VerifyBatch(k); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkOpen100kBatches measures Open + full validation of a shard with
// 100,000 batches (target: under 10 ms). The page cache is warm.
func BenchmarkOpen100kBatches(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.shard")
	buildSparse(b, path, 100_000, 1)
	b.ResetTimer()
	for b.Loop() {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkOpen100kBatchesJagged is BenchmarkOpen100kBatches for a
// format-2 shard, whose open also checks every block's offset, size and
// values count against the geometry.
func BenchmarkOpen100kBatchesJagged(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.shard")
	buildSparseJagged(b, path, 100_000, 1)
	b.ResetTimer()
	for b.Loop() {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkOpenReaderAt100kBatches is the same over pread (no mapping).
func BenchmarkOpenReaderAt100kBatches(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.shard")
	buildSparse(b, path, 100_000, 1)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b.ResetTimer()
	for b.Loop() {
		if _, err := OpenReaderAt(f, st.Size(), path); err != nil {
			b.Fatal(err)
		}
	}
}

// Checksum throughput on one 4 MiB block (bytes/s per core via -cpu 1).
const benchBlock = 4 << 20

func benchHash(b *testing.B, fn func([]byte)) {
	buf := make([]byte, benchBlock)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(benchBlock)
	for b.Loop() {
		fn(buf)
	}
}

func BenchmarkCRC32C(b *testing.B) { benchHash(b, func(p []byte) { crc32c(p) }) }

func BenchmarkCRC32IEEE(b *testing.B) { benchHash(b, func(p []byte) { crc32.ChecksumIEEE(p) }) }

func BenchmarkSHA256(b *testing.B) { benchHash(b, func(p []byte) { sha256.Sum256(p) }) }

// BenchmarkVerifyBatch measures VerifyBatch (CRC + padding + id checks) on a
// mapped 4 MiB block.
func BenchmarkVerifyBatch(b *testing.B) {
	path := filepath.Join(b.TempDir(), "v.shard")
	opts := WriterOptions{BatchSize: 1024, NumBatches: 2, Tensors: []TensorInfo{{Name: "x", DType: F32, Shape: []uint64{1024}}}}
	writeShard(b, path, opts, nil, nil, 1)
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	b.SetBytes(int64(r.Geometry().BlockSize))
	for b.Loop() {
		if err := r.VerifyBatch(1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteBatch measures WriteBatch of 4 MiB blocks (page cache, no fsync).
func BenchmarkWriteBatch(b *testing.B) {
	opts := WriterOptions{BatchSize: 1024, NumBatches: 1 << 20, Tensors: []TensorInfo{{Name: "x", DType: F32, Shape: []uint64{1024}}}}
	w, err := Create(filepath.Join(b.TempDir(), "w.shard"), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Abort()
	block := make([]byte, w.Geometry().BlockSize)
	ids := make([]uint64, 1024)
	b.SetBytes(int64(len(block)))
	for b.Loop() {
		if err := w.WriteBatch(block, ids, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// writeSparse checksums the batch table bt and sample-id section idsSec
// into h, encodes h's header into prefix and its footer, and writes the
// four at their offsets in a new file at path: the data section between
// them stays a hole.
func writeSparse(tb testing.TB, path string, h *header, prefix, bt, idsSec []byte) {
	tb.Helper()
	h.btCRC, h.idsCRC = crc32c(bt), crc32c(idsSec)
	h.encode(prefix[:h.headerLen])
	foot := make([]byte, FooterLen)
	h.encodeFooter(foot)
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	for _, part := range []struct {
		b   []byte
		off uint64
	}{{prefix, 0}, {bt, h.btOff}, {idsSec, h.idsOff}, {foot, h.footerOff}} {
		if _, err := f.WriteAt(part.b, int64(part.off)); err != nil {
			tb.Fatal(err)
		}
	}
}
