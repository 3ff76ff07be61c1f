// Command gpubench measures end-to-end shard -> device throughput of the
// gpuload cuda backend as a fraction of the pinned cuMemcpyHtoD peak measured
// by the same process, and the CPU cores busy meanwhile. It is run by
// scripts/gpu-check.sh on a machine with an NVIDIA GPU:
//
//	go run ./gpuload/internal/gpubench -dir /tmp/gpubench -gib 4
//
// It writes a shard set of -gib GiB (one [1024] F32 tensor, 1 MiB-per-sample
// blocks of -batch samples) unless -dir already holds one, reads it once to
// warm the page cache, then prints one table row per measurement.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
	"unsafe"

	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/shardfmt"
)

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "gpubench"), "shard set directory (created if missing)")
	gib := flag.Float64("gib", 4, "shard size to generate, GiB")
	batch := flag.Int("batch", 1024, "samples per batch (4 KiB each): block size = 4 KiB * batch")
	device := flag.Int("device", 0, "CUDA device ordinal")
	passes := flag.Int("passes", 3, "passes over the shard per measurement (best is reported)")
	flag.Parse()
	if err := run(*dir, *gib, *batch, *device, *passes); err != nil {
		fmt.Fprintln(os.Stderr, "gpubench:", err)
		os.Exit(1)
	}
}

const feature = 1024 // F32 elements per sample: 4 KiB

func run(dir string, gib float64, batch, device, passes int) error {
	if _, err := os.Stat(filepath.Join(dir, shardfmt.ManifestName)); errors.Is(err, os.ErrNotExist) {
		if err := write(dir, gib, batch); err != nil {
			return fmt.Errorf("writing shard set: %w", err)
		}
	}
	m, err := shardfmt.ReadManifest(dir)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, filepath.FromSlash(m.Shards[0].Path))
	if err := warm(path); err != nil {
		return err
	}
	l, err := gpuload.Open(dir, 0, 0, gpuload.Options{Backend: gpuload.BackendCUDA, Device: device})
	if err != nil {
		return err
	}
	block := l.Geometry().BlockSize
	steps := l.Steps()
	l.Close()
	total := float64(block) * float64(steps)

	peak, err := peakHtoD(device, block, steps)
	if err != nil {
		return fmt.Errorf("measuring pinned cuMemcpyHtoD peak: %w", err)
	}
	fmt.Printf("shard: %d batches x %d MiB = %.2f GiB, page cache warm\n", steps, block>>20, total/(1<<30))
	fmt.Printf("%-34s %10s %8s %10s\n", "measurement", "GB/s", "x peak", "CPU cores")
	fmt.Printf("%-34s %10.2f %8.2f %10s\n", "pinned cuMemcpyHtoD peak", peak, 1.0, "-")
	for _, c := range []struct {
		name string
		opts gpuload.Options
	}{
		{"cuda: pread -> pinned ring -> DMA", gpuload.Options{Backend: gpuload.BackendCUDA, Device: device}},
		{"cuda: + VerifyChecksums", gpuload.Options{Backend: gpuload.BackendCUDA, Device: device, VerifyChecksums: true}},
		{"cuda: RegisterMmap (opt-in)", gpuload.Options{Backend: gpuload.BackendCUDA, Device: device, RegisterMmap: true}},
	} {
		best, cores := 0.0, 0.0
		for range passes {
			gbs, cpu, err := deliver(dir, c.opts)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if gbs > best {
				best, cores = gbs, cpu
			}
		}
		fmt.Printf("%-34s %10.2f %8.2f %10.2f\n", c.name, best, best/peak, cores)
	}
	fmt.Println("target: pread -> pinned ring -> DMA >= 0.85 x peak with <= 1 CPU core busy")
	return nil
}

// write makes a one-shard set of about gib GiB.
func write(dir string, gib float64, batch int) error {
	tensors := []shardfmt.TensorInfo{{Name: "emb", DType: shardfmt.F32, Shape: []uint64{feature}}}
	rel := shardfmt.ShardFileName(0, 0)
	blockBytes := float64(batch * feature * 4)
	steps := max(int(gib*(1<<30)/blockBytes), 8)
	w, err := shardfmt.Create(filepath.Join(dir, filepath.FromSlash(rel)), shardfmt.WriterOptions{BatchSize: batch, NumBatches: steps,
		Tensors: tensors, Provenance: shardfmt.Provenance{PlanFingerprint: "plan:gpubench"}})
	if err != nil {
		return err
	}
	block := make([]byte, w.Geometry().BlockSize)
	ids := make([]uint64, batch)
	for k := range steps {
		for i := 0; i < len(block); i += 64 {
			block[i] = byte(k + i)
		}
		for j := range ids {
			ids[j] = uint64(k*batch + j)
		}
		if err := w.WriteBatch(block, ids, 0); err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	return shardfmt.WriteManifest(dir, &shardfmt.Manifest{PlanFingerprint: "plan:gpubench", Tensors: tensors,
		Shards: []shardfmt.ShardEntry{{Path: rel, Batches: steps, Size: fi.Size()}}})
}

// warm reads the file once so measurements start from a warm page cache.
func warm(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// peakHtoD returns the GB/s of n synchronous cuMemcpyHtoD calls of block
// bytes from one pinned buffer into one device buffer (best of 3 runs).
func peakHtoD(device int, block uint64, n int) (float64, error) {
	ctx, err := cuda.Open(device)
	if err != nil {
		return 0, err
	}
	defer ctx.Close()
	best := 0.0
	err = ctx.Do(func(cur *cuda.Current) error {
		host, err := cur.MemHostAlloc(block)
		if err != nil {
			return err
		}
		defer cur.MemFreeHost(host)
		clear(unsafe.Slice((*byte)(host), block))
		dev, err := cur.MemAlloc(block)
		if err != nil {
			return err
		}
		defer cur.MemFree(dev)
		for range 3 {
			t := time.Now()
			for range n {
				if err := cur.MemcpyHtoD(dev, host, block); err != nil {
					return err
				}
			}
			best = max(best, float64(block)*float64(n)/time.Since(t).Seconds()/1e9)
		}
		return nil
	})
	return best, err
}

// deliver reads every batch through the cuda backend and returns GB/s and
// the CPU cores busy (user+system CPU time over wall time).
func deliver(dir string, opts gpuload.Options) (gbs, cores float64, err error) {
	l, err := gpuload.Open(dir, 0, 0, opts)
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	var r0, r1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	t := time.Now()
	var bytes float64
	for {
		b, err := l.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, 0, err
		}
		bytes += float64(l.Geometry().BlockSize)
		b.Release()
	}
	wall := time.Since(t).Seconds()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := tv(r1.Utime) - tv(r0.Utime) + tv(r1.Stime) - tv(r0.Stime)
	return bytes / wall / 1e9, cpu / wall, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
