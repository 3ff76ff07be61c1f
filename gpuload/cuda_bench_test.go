package gpuload

import (
	"os"
	"sync"
	"syscall"
	"testing"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// BenchmarkCUDAControlPath measures what the cuda backend's own pipeline
// costs per batch, apart from the copies: it runs against the fake driver
// (whose "DMA" of a 4 KiB block is a memcpy of a few hundred nanoseconds on
// the stream's thread) over a shard of 4,096 one-sample 4 KiB blocks, so
// the figures are the goroutine hand-offs, driver calls and waits per
// batch. On a GPU at 50 GB/s with 4 MiB blocks a batch arrives every 84 µs,
// so the pipeline's CPU per batch has to stay well under that for the copy
// to run on less than one core. Reported: ns per batch (wall) and cpu-ns per
// batch (user+system time of the whole process over the batches):
//
//	go test -run '^$' -bench CUDAControlPath -benchtime 5x ./gpuload/
func BenchmarkCUDAControlPath(b *testing.B) {
	if fakeCUDA != "" {
		b.Skip(fakeCUDA)
	}
	if err := cuda.Load(); err != nil {
		b.Skip(err)
	}
	dir := controlSet(b)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"pinned-ring", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread}},
		{"direct", Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect}},
		{"register-mmap", Options{Backend: BackendCUDA, RegisterMmap: true}},
	} {
		if !usable(c.opts) {
			continue
		}
		b.Run(c.name, func(b *testing.B) {
			var batches int64
			var r0, r1 syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
			for b.Loop() {
				n, _, err := readAll(dir, c.opts, func(*Batch) {})
				if err != nil {
					b.Fatal(err)
				}
				batches += n
			}
			syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
			cpu := float64(syscall.TimevalToNsec(r1.Utime) - syscall.TimevalToNsec(r0.Utime) +
				syscall.TimevalToNsec(r1.Stime) - syscall.TimevalToNsec(r0.Stime))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(batches), "ns/batch")
			b.ReportMetric(cpu/float64(batches), "cpu-ns/batch")
			b.ReportMetric(0, "ns/op")
		})
	}
}

const controlSteps = 4096

var (
	controlOnce sync.Once
	controlDir  string
	controlErr  error
)

// controlSet writes a one-shard set of controlSteps one-sample 4 KiB blocks
// once per process, in a directory under os.TempDir that TestMain removes.
func controlSet(b *testing.B) string {
	b.Helper()
	controlOnce.Do(func() {
		controlDir, controlErr = os.MkdirTemp("", "gpuload-control")
		if controlErr != nil {
			return
		}
		_, controlErr = writeOneShardSet(controlDir, "plan:control", 1, 1024, controlSteps, func(k int, block []byte) { block[0] = byte(k) })
	})
	if controlErr != nil {
		b.Fatal(controlErr)
	}
	return controlDir
}
