// Command gpubench measures shard -> device throughput of the gpuload cuda
// backend on each transfer path, warm and cold, against the machine's own
// limits measured by the same process in the same run: the pinned
// cuMemcpyHtoD peak (warm page cache) and the disk's sequential O_DIRECT read
// rate (cold), with the CPU cores busy, page faults, set-up time and where
// the pipeline's wall time went per batch. It is run by scripts/gpu-check.sh
// on a machine with an NVIDIA GPU:
//
//	go run ./gpuload/internal/gpubench -dir /tmp/gpubench -gib 4 -cpuprofile /tmp/gpubench-prof
//
// It writes a shard set of -gib GiB (one [1024] F32 tensor, -batch samples of
// 4 KiB per block) unless -dir already holds one, reads it once to warm the
// page cache, prints the warm table, then the cold table: before each cold
// pass the shard is dropped from the page cache with POSIX_FADV_DONTNEED (no
// root needed; the residency the loader saw at Open is printed, so a file
// system that keeps the pages shows). With -cpuprofile DIR a CPU profile of
// each default-path pass (Open included: registration, page faults, driver
// calls and event waits) is written to DIR/warm-default.pprof and
// DIR/cold-default.pprof.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
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
	passes := flag.Int("passes", 3, "passes over the shard per warm measurement (best is reported)")
	coldPasses := flag.Int("cold-passes", 2, "passes per cold measurement, each after dropping the page cache (0: no cold table)")
	prof := flag.String("cpuprofile", "", "write CPU profiles of the default path's passes into this folder")
	flag.Parse()
	if err := run(*dir, *gib, *batch, *device, *passes, *coldPasses, *prof); err != nil {
		fmt.Fprintln(os.Stderr, "gpubench:", err)
		os.Exit(1)
	}
}

const feature = 1024 // F32 elements per sample: 4 KiB

// row is one measurement.
type row struct {
	name string
	opts gpuload.Options
	prof string // CPU profile file name under -cpuprofile, "" for none
}

func run(dir string, gib float64, batch, device, passes, coldPasses int, prof string) error {
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
	if prof != "" {
		if err := os.MkdirAll(prof, 0o755); err != nil {
			return err
		}
	}
	cu := func(p string, verify bool) gpuload.Options {
		return gpuload.Options{Backend: gpuload.BackendCUDA, Device: device, CUDAPath: p, VerifyChecksums: verify}
	}
	l, err := gpuload.Open(dir, 0, 0, cu(gpuload.CUDAPathPread, false))
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
	fmt.Printf("shard: %d batches x %.2f MiB = %.2f GiB\n", steps, float64(block)/(1<<20), total/(1<<30))
	if err := cuda.LoadCuFile(); err != nil {
		fmt.Println("GPUDirect Storage:", err)
	} else {
		fmt.Println("GPUDirect Storage: libcufile loaded")
	}
	fmt.Println("== warm page cache (best of", passes, "passes)")
	header("x peak")
	fmt.Printf("%-28s %-8s %5s %7.2f %6.2f\n", "pinned cuMemcpyHtoD peak", "-", "-", peak, 1.0)
	for _, r := range []row{
		{"cuda default (auto)", cu("", false), "warm-default.pprof"},
		{"cuda default + checksums", cu("", true), ""},
		{"cuda register", cu(gpuload.CUDAPathRegister, false), ""},
		{"cuda direct (O_DIRECT ring)", cu(gpuload.CUDAPathDirect, false), ""},
		{"cuda pread ring", cu(gpuload.CUDAPathPread, false), ""},
		{"cuda gds (cuFile)", cu(gpuload.CUDAPathGDS, false), ""},
	} {
		measureRow(dir, path, r, passes, false, peak, prof)
	}
	fmt.Println(legend)
	fmt.Println("target: default >= 0.85 x peak with <= 1.0 CPU core busy")
	if coldPasses == 0 {
		return nil
	}
	fmt.Println("== cold page cache (the shard dropped from the page cache before each pass; best of", coldPasses, "passes)")
	disk := 0.0
	for _, m := range []struct {
		name   string
		direct bool
		qd     int
	}{
		{"O_DIRECT, 16 MiB requests, 1 in flight", true, 1},
		{"O_DIRECT, 16 MiB requests, 4 in flight", true, 4},
		{"buffered, 16 MiB reads, 1 thread (kernel readahead)", false, 1},
	} {
		gbs, err := diskRate(path, m.direct, m.qd)
		if err != nil {
			fmt.Printf("disk sequential read, %s: %v\n", m.name, err)
			continue
		}
		fmt.Printf("disk sequential read, %s: %.2f GB/s\n", m.name, gbs)
		disk = max(disk, gbs)
	}
	header("x disk")
	for _, r := range []row{
		{"cuda default (auto)", cu("", false), "cold-default.pprof"},
		{"cuda direct (O_DIRECT ring)", cu(gpuload.CUDAPathDirect, false), ""},
		{"cuda pread ring", cu(gpuload.CUDAPathPread, false), ""},
		{"cuda gds (cuFile)", cu(gpuload.CUDAPathGDS, false), ""},
	} {
		measureRow(dir, path, r, coldPasses, true, disk, prof)
	}
	fmt.Println(legend)
	fmt.Printf("target: default >= 0.85 x the disk's sequential read rate (%.2f GB/s, the best of the three above)\n", disk)
	return nil
}

func header(ratio string) {
	fmt.Printf("%-28s %-8s %5s %7s %6s %5s | %7s %6s %6s %9s | %8s %6s %6s %6s  %s\n",
		"measurement", "path", "res", "GB/s", ratio, "cores", "open s", "CPU s", "w/open", "faults", "faults", "read", "queue", "wait", "fallbacks")
}

// legend explains the columns of the tables.
const legend = `columns: res = fraction of the shard in page cache at Open (mincore); GB/s, cores = delivery alone
  (steady state: CPU time over wall time); open s, CPU s, faults = Open's wall time, CPU time and page faults
  (set-up; registration pins every page there); w/open = GB/s counting Open too; faults, read, queue, wait =
  delivery's page faults, then µs per batch in reads, in cuMemcpyHtoDAsync+cuEventRecord, in cuEventSynchronize`

// measureRow runs r passes times (cold: dropping the page cache before each)
// and prints the best pass, or why it could not run.
func measureRow(dir, path string, r row, passes int, cold bool, ref float64, prof string) {
	var best *pass
	for i := range passes {
		if cold {
			if err := evict(path); err != nil {
				fmt.Printf("%-28s dropping the page cache: %v\n", r.name, err)
				return
			}
		}
		pf := ""
		if prof != "" && r.prof != "" && i == 0 {
			pf = filepath.Join(prof, r.prof)
		}
		p, err := deliver(dir, r.opts, pf)
		if err != nil {
			fmt.Printf("%-28s not measured: %v\n", r.name, err)
			return
		}
		if best == nil || p.gbs > best.gbs {
			best = &p
		}
	}
	st := best.stats
	n := float64(max(st.Batches, 1))
	us := func(s float64) float64 { return s / n * 1e6 }
	fb := ""
	for _, f := range st.Fallbacks {
		fb += fmt.Sprintf(" [%s: %s]", f.Path, f.Error)
	}
	fmt.Printf("%-28s %-8s %5.2f %7.2f %6.2f %5.2f | %7.3f %6.3f %6.2f %9d | %8d %6.1f %6.1f %6.1f %s\n", r.name, st.Path, st.Resident,
		best.gbs, best.gbs/ref, best.cores, st.SetupSeconds, best.openCPU, best.gbsOpen, best.faultsOpen, best.faultsDeliver,
		us(st.ReadSeconds), us(st.CopyCallSeconds), us(st.EventWaitSeconds), fb)
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

// pass is one measured pass over the shard: Open, then every batch.
type pass struct {
	gbs, cores    float64 // delivery alone (steady state): GB/s, CPU cores busy
	gbsOpen       float64 // GB/s over Open and delivery together
	openCPU       float64 // CPU seconds of Open (registration pins pages here)
	faultsOpen    int64   // page faults (minor + major) during Open
	faultsDeliver int64   // page faults during delivery
	stats         gpuload.TransferStats
}

// deliver opens the shard with opts and reads every batch, timing Open and
// delivery apart: GB/s and CPU cores busy (user+system CPU time over wall
// time) of the delivery, and Open's wall time, CPU time and page faults
// (where registration pins every page), with a CPU profile of both into
// profile when it is not "".
func deliver(dir string, opts gpuload.Options, profile string) (p pass, err error) {
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return p, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return p, err
		}
		defer pprof.StopCPUProfile()
	}
	var r0, r1, r2 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	t0 := time.Now()
	l, err := gpuload.Open(dir, 0, 0, opts)
	if err != nil {
		return p, err
	}
	defer l.Close()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	t1 := time.Now()
	d, err := gpuload.Drain(l, nil)
	if err != nil {
		return p, err
	}
	bytes := float64(d.Bytes)
	t2 := time.Now()
	syscall.Getrusage(syscall.RUSAGE_SELF, &r2)
	cpu := func(a, b *syscall.Rusage) float64 { return tv(b.Utime) - tv(a.Utime) + tv(b.Stime) - tv(a.Stime) }
	faults := func(a, b *syscall.Rusage) int64 { return b.Minflt - a.Minflt + b.Majflt - a.Majflt }
	run := t2.Sub(t1).Seconds()
	p = pass{gbs: bytes / run / 1e9, cores: cpu(&r1, &r2) / run, gbsOpen: bytes / t2.Sub(t0).Seconds() / 1e9,
		openCPU: cpu(&r0, &r1), faultsOpen: faults(&r0, &r1), faultsDeliver: faults(&r1, &r2), stats: l.TransferStats()}
	return p, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
