package gpuload

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prepml/prep/shardfmt"
)

// Benchmarks of host-backend delivery against a plain sequential read of the
// same shard file, from a warm page cache:
//
//	go test -run '^$' -bench 'HostDelivery|PlainRead' -benchtime 5x ./gpuload/
//
// The shard is 256 blocks of 1 MiB (256 samples of a [1024] F32 tensor), so
// 256 MiB; each benchmark reads it once first to warm the page cache. Every
// consumer touches one byte per 4 KiB page of what it gets, as a trainer
// (or a DMA) would read it all.

const (
	benchSteps   = 256
	benchBatch   = 256
	benchFeature = 1024
)

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

// benchSet writes the benchmark shard set once per process, in a directory
// under os.TempDir that TestMain removes.
func benchSet(b *testing.B) (dir, path string) {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "gpuload-bench")
		if benchErr != nil {
			return
		}
		benchPath, benchErr = writeOneShardSet(benchDir, "plan:bench", benchBatch, benchFeature, benchSteps, func(k int, block []byte) {
			for i := range block {
				block[i] = byte(i*7 + k)
			}
		})
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir, benchPath
}

// writeOneShardSet writes into dir a set of one shard (epoch 0, rank 0) of
// steps batches of batch samples of a [feature] F32 tensor, each block
// filled by fill(step, block) and sample ids numbered from 0, with its
// manifest, and returns the shard's path.
func writeOneShardSet(dir, fingerprint string, batch, feature, steps int, fill func(k int, block []byte)) (string, error) {
	tensors := []shardfmt.TensorInfo{{Name: "emb", DType: shardfmt.F32, Shape: []uint64{uint64(feature)}}}
	rel := shardfmt.ShardFileName(0, 0)
	path := filepath.Join(dir, filepath.FromSlash(rel))
	w, err := shardfmt.Create(path, shardfmt.WriterOptions{BatchSize: batch, NumBatches: steps, Tensors: tensors,
		Provenance: shardfmt.Provenance{PlanFingerprint: fingerprint}})
	if err != nil {
		return "", err
	}
	block := make([]byte, w.Geometry().BlockSize)
	ids := make([]uint64, batch)
	for k := range steps {
		fill(k, block)
		for j := range ids {
			ids[j] = uint64(k*batch + j)
		}
		if err := w.WriteBatch(block, ids, 0); err != nil {
			w.Abort()
			return "", err
		}
	}
	if err := w.Commit(); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return path, shardfmt.WriteManifest(dir, &shardfmt.Manifest{PlanFingerprint: fingerprint, Tensors: tensors,
		Shards: []shardfmt.ShardEntry{{Path: rel, Batches: steps, Size: fi.Size()}}})
}

var sink byte

// touch reads one byte per 4 KiB page.
func touch(p []byte) {
	var s byte
	for i := 0; i < len(p); i += 4096 {
		s += p[i]
	}
	sink += s
}

// plainRead reads the whole file sequentially in 1 MiB reads and returns the
// bytes read.
func plainRead(path string, buf []byte) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for {
		m, err := f.Read(buf)
		touch(buf[:m])
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// deliver reads every batch of the shard through a Loader, touching what it
// gets, and returns the block bytes delivered.
func deliver(dir string, opts Options) (int64, error) {
	n, block, err := readAll(dir, opts, func(bt *Batch) {
		for i := range bt.Tensors {
			touch(bt.Tensors[i].Bytes)
		}
	})
	return n * block, err
}

// readAll reads every batch of epoch 0, rank 0 of the set in dir through a
// Loader, calling each on a batch before releasing it, and returns how many
// batches it got and the block size in bytes.
func readAll(dir string, opts Options, each func(*Batch)) (n, block int64, err error) {
	l, err := Open(dir, 0, 0, opts)
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	block = int64(l.Geometry().BlockSize)
	for {
		bt, err := l.Next()
		if err == io.EOF {
			return n, block, nil
		}
		if err != nil {
			return n, block, err
		}
		each(bt)
		n++
		bt.Release()
	}
}

func BenchmarkPlainRead(b *testing.B) {
	_, path := benchSet(b)
	buf := make([]byte, 1<<20)
	n, err := plainRead(path, buf) // warm the page cache
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n)
	b.ResetTimer()
	for b.Loop() {
		if _, err := plainRead(path, buf); err != nil {
			b.Fatal(err)
		}
	}
}

var benchModes = []struct {
	name string
	opts Options
}{
	{"pread", Options{}},
	{"pread-verify", Options{VerifyChecksums: true}},
	{"mmap", Options{MapBlocks: true}},
}

func BenchmarkHostDelivery(b *testing.B) {
	dir, path := benchSet(b)
	if _, err := plainRead(path, make([]byte, 1<<20)); err != nil {
		b.Fatal(err)
	}
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			n, err := deliver(dir, m.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(n)
			b.ResetTimer()
			for b.Loop() {
				if _, err := deliver(dir, m.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHostDeliveryRatio alternates a plain read and a delivery pass of
// the same file in each iteration and reports delivery throughput as a
// fraction of the plain read's ("x-plain"; target >= 0.85).
func BenchmarkHostDeliveryRatio(b *testing.B) {
	dir, path := benchSet(b)
	buf := make([]byte, 1<<20)
	if _, err := plainRead(path, buf); err != nil {
		b.Fatal(err)
	}
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			var plain, del time.Duration
			var bytes int64
			for b.Loop() {
				t0 := time.Now()
				if _, err := plainRead(path, buf); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				n, err := deliver(dir, m.opts)
				if err != nil {
					b.Fatal(err)
				}
				del += time.Since(t1)
				plain += t1.Sub(t0)
				bytes += n
			}
			fi, _ := os.Stat(path)
			plainGBs := float64(fi.Size()) * float64(b.N) / plain.Seconds() / 1e9
			delGBs := float64(bytes) / del.Seconds() / 1e9
			b.ReportMetric(plainGBs, "plain-GB/s")
			b.ReportMetric(delGBs, "delivery-GB/s")
			b.ReportMetric(delGBs/plainGBs, "x-plain")
		})
	}
}

// zipfTensors is the tensor table of writeZipfShard's shards.
var zipfTensors = []shardfmt.TensorInfo{{Name: "hist", DType: shardfmt.I32, Jagged: true}}

// writeZipfSet writes into dir a shard set of one shard (epoch 0, rank 0)
// from writeZipfShard, with its manifest, and returns the shard's path and
// the values bytes it holds.
func writeZipfSet(dir string, batch, steps int) (string, int64, error) {
	rel := shardfmt.ShardFileName(0, 0)
	path := filepath.Join(dir, filepath.FromSlash(rel))
	raw, err := writeZipfShard(path, batch, steps)
	if err != nil {
		return "", 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", 0, err
	}
	return path, raw, shardfmt.WriteManifest(dir, &shardfmt.Manifest{PlanFingerprint: "plan:zipf", ShardFormat: "2.0", Tensors: zipfTensors,
		Shards: []shardfmt.ShardEntry{{Path: rel, Batches: steps, Size: fi.Size()}}})
}

// writeZipfShard writes a shard of steps batches of batch samples of one
// jagged I32 tensor whose row lengths follow a Zipf law over 1..1024 (mean
// about 20, seeded), and returns the values bytes it holds.
func writeZipfShard(path string, batch, steps int) (int64, error) {
	w, err := shardfmt.Create(path, shardfmt.WriterOptions{BatchSize: batch, NumBatches: steps, Tensors: zipfTensors,
		Provenance: shardfmt.Provenance{PlanFingerprint: "plan:zipf"}})
	if err != nil {
		return 0, err
	}
	defer w.Abort()
	g := w.Geometry()
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.7, 2, 1023)
	lens := make([]int, batch)
	ids := make([]uint64, batch)
	var total int64
	for k := range steps {
		n := 0
		for j := range lens {
			lens[j] = int(z.Uint64()) + 1
			n += lens[j]
			ids[j] = uint64(k*batch + j)
		}
		lay, err := g.BatchLayout([]uint64{uint64(n)})
		if err != nil {
			return 0, err
		}
		block := make([]byte, lay.Size)
		o := 0
		for j := 0; j <= batch; j++ {
			binary.LittleEndian.PutUint64(block[8*j:], uint64(o))
			if j < batch {
				o += lens[j]
			}
		}
		for v := range n {
			binary.LittleEndian.PutUint32(block[lay.ValuesOffset[0]+4*uint64(v):], uint32(v*7+k))
		}
		if err := w.WriteBatch(block, ids, 0); err != nil {
			return 0, err
		}
		total += 4 * int64(n)
	}
	return total, w.Commit()
}

// BenchmarkHostDeliveryJaggedRatio is BenchmarkHostDeliveryRatio for a shard
// set of one shard of one Zipf-skewed jagged I32 tensor (512 batches of 1024
// rows of 1 to 1024 values, mean about 20): delivery (Open of the set, every
// batch's values and offsets touched, Close) against a plain read of the
// same file in the same iteration ("x-plain"), the file's size against the
// raw values bytes ("x-values": offsets, sample ids and page rounding
// included) and the size the same rows padded to 1024 values would take
// against them ("padded-x-values"). Both sides read the whole file once
// from a warm page cache: the plain read every byte, delivery the header
// and tables at Open, then the blocks (each its own length) and the sample
// ids.
func BenchmarkHostDeliveryJaggedRatio(b *testing.B) {
	dir := b.TempDir()
	path, raw, err := writeZipfSet(dir, 1024, 512)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if _, err := plainRead(path, buf); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			var plain, del time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := plainRead(path, buf); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				n, _, err := readAll(dir, m.opts, func(bt *Batch) {
					h := &bt.Tensors[0]
					touch(h.Bytes)
					touch(h.Offsets.Bytes)
				})
				if err != nil {
					b.Fatal(err)
				}
				if n != 512 {
					b.Fatalf("delivered %d batches, want 512", n)
				}
				del += time.Since(t1)
				plain += t1.Sub(t0)
			}
			b.ReportMetric(plain.Seconds()/del.Seconds(), "x-plain")
			b.ReportMetric(float64(fi.Size())/float64(raw), "x-values")
			b.ReportMetric(float64(raw)/float64(1024*512*4), "mean-len")
			b.ReportMetric(float64(1024*512*1024*4)/float64(raw), "padded-x-values")
		})
	}
}
