//go:build cgo

package gpuload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// needCUDA skips t unless a CUDA driver (normally the fake one) is loadable.
func needCUDA(t *testing.T) {
	t.Helper()
	if fakeCUDA != "" {
		t.Skip(fakeCUDA)
	}
	if err := cuda.Load(); err != nil {
		t.Skip(err)
	}
}

// needFake skips t unless the loaded driver is the fake one (tests that
// inject errors or delays).
func needFake(t *testing.T) {
	t.Helper()
	needCUDA(t)
	if _, ok := cuda.FakeOutstanding(); !ok {
		t.Skip("needs the fake CUDA driver (error injection)")
	}
}

// assertNoLeaks checks the fake driver's count of live resources.
func assertNoLeaks(t *testing.T) {
	t.Helper()
	if n, ok := cuda.FakeOutstanding(); ok && n != 0 {
		t.Errorf("%d CUDA driver resources still allocated after Close, want 0", n)
	}
}

func TestCUDADeliversEveryByteToTheDevice(t *testing.T) {
	needCUDA(t)
	dir := writeSet(t, small)
	for _, c := range []struct {
		name  string
		delay string
		opts  Options
	}{
		{"pinned ring", "0", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread}},
		{"pinned ring, slow copies, prefetch 1", "3000", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, Prefetch: 1, VerifyChecksums: true}},
		{"pinned ring, slow copies, prefetch 6", "1500", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, Prefetch: 6}},
		{"O_DIRECT ring, slow copies", "1000", Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect, Prefetch: 2}},
		{"automatic choice", "0", Options{Backend: BackendCUDA}},
		{"registered mapping", "1000", Options{Backend: BackendCUDA, RegisterMmap: true, VerifyChecksums: true}},
	} {
		if !usable(c.opts) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAKECUDA_DELAY_US", c.delay)
			l := openLoader(t, dir, 1, 1, c.opts)
			for k := range small.Steps {
				b, err := l.Next()
				if err != nil {
					t.Fatalf("Next at step %d: %v", k, err)
				}
				if b.Device != 0 || b.Tensors[0].Bytes != nil {
					t.Fatalf("cuda batch on device %d with host bytes %v", b.Device, b.Tensors[0].Bytes != nil)
				}
				checkBatch(t, l, small, 1, 1, k, b)
				b.Release()
			}
			if _, err := l.Next(); err != io.EOF {
				t.Fatalf("Next after the last step = %v, want io.EOF", err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertNoLeaks(t)
		})
	}
}

func TestCUDASlotRecyclingUnderSlowCopies(t *testing.T) {
	// Many steps through a minimal ring with slow copies: a host slot reused
	// before its copy's event completed, or a device buffer handed out twice,
	// shows up as wrong bytes in a held batch.
	needCUDA(t)
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 8, Steps: 40}
	dir := writeSet(t, cfg)
	t.Setenv("FAKECUDA_DELAY_US", "700")
	l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, Prefetch: 2})
	defer assertNoLeaks(t)
	defer l.Close()
	if l.Ring() != 3 {
		t.Fatalf("Ring() = %d, want 3", l.Ring())
	}
	var held []*Batch
	for k := range cfg.Steps {
		b, err := l.Next()
		if err != nil {
			t.Fatalf("Next at step %d: %v", k, err)
		}
		checkBatch(t, l, cfg, 0, 0, k, b)
		held = append(held, b)
		if len(held) == 2 { // keep two batches held while the pipeline runs
			checkBatch(t, l, cfg, 0, 0, held[0].Step, held[0])
			held[0].Release()
			held = held[1:]
		}
	}
	if _, err := l.Next(); err != io.EOF {
		t.Fatalf("Next after the last step = %v, want io.EOF", err)
	}
}

func TestCUDASeekAndRingFull(t *testing.T) {
	needCUDA(t)
	dir := writeSet(t, small)
	t.Setenv("FAKECUDA_DELAY_US", "500")
	l := openLoader(t, dir, 0, 1, Options{Backend: BackendCUDA, Prefetch: 1, StartStep: 1})
	a := mustNext(t, l)
	b := mustNext(t, l)
	if _, err := l.Next(); !errors.Is(err, ErrRingFull) {
		t.Fatalf("Next with both device buffers held = %v, want ErrRingFull", err)
	}
	checkBatch(t, l, small, 0, 1, 1, a)
	checkBatch(t, l, small, 0, 1, 2, b)
	a.Release()
	c := seekAndCheck(t, l, small, 0, 1, 4)
	checkBatch(t, l, small, 0, 1, 2, b)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	b.Release()
	c.Release()
	assertNoLeaks(t)
}

func TestCUDAInjectedErrorsSurfaceWithDriverMessage(t *testing.T) {
	needFake(t)
	dir := writeSet(t, small)
	for _, register := range []bool{false, true} {
		t.Run(fmt.Sprintf("async copy fails at step 2, register=%v", register), func(t *testing.T) {
			asyncCopyFailsAtStep2(t, dir, Options{Backend: BackendCUDA, RegisterMmap: register})
		})
	}
	t.Run("binding the context to the copy thread fails", func(t *testing.T) {
		// Call 1 makes the context current on the context thread at Open,
		// call 2 is the copy loop's Bind.
		t.Setenv("FAKECUDA_FAIL_AT", "cuCtxSetCurrent:2:1")
		l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA, StartStep: 3})
		_, err := l.Next()
		var ce *CUDAError
		var le *Error
		if !errors.As(err, &ce) || ce.Op != "cuCtxSetCurrent" || ce.Name != "CUDA_ERROR_INVALID_VALUE" || !errors.As(err, &le) || le.Step != 3 ||
			!strings.Contains(err.Error(), "binding the CUDA context") {
			t.Fatalf("Next = %v, want a cuCtxSetCurrent failure located at step 3", err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoLeaks(t)
	})
	t.Run("event wait fails", func(t *testing.T) {
		t.Setenv("FAKECUDA_FAIL_AT", "cuEventSynchronize:1:999")
		l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA})
		_, err := l.Next()
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Op != "cuEventSynchronize" || ce.Message != "unknown error" {
			t.Fatalf("Next = %v, want cuEventSynchronize: unknown error", err)
		}
		l.Close()
		assertNoLeaks(t)
	})
	for _, fail := range []string{"cuMemHostAlloc:2", "cuMemAlloc_v2:3", "cuEventCreate:1", "cuStreamCreate:1", "cuDevicePrimaryCtxRetain:1"} {
		t.Run("Open fails at "+fail, func(t *testing.T) {
			t.Setenv("FAKECUDA_FAIL_AT", fail)
			l, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread})
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			var ce *CUDAError
			if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
				t.Fatalf("Open = %v, want CUDA_ERROR_OUT_OF_MEMORY", err)
			}
			assertNoLeaks(t)
		})
	}
	t.Run("register fails", func(t *testing.T) {
		t.Setenv("FAKECUDA_FAIL_AT", "cuMemHostRegister_v2:1:1")
		_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, RegisterMmap: true})
		if !strings.Contains(fmtErr(err), "registering the mapped shard") || !strings.Contains(fmtErr(err), "invalid argument") {
			t.Fatalf("Open = %v, want a registration failure with the driver message", err)
		}
		assertNoLeaks(t)
	})
	t.Run("bad device ordinal", func(t *testing.T) {
		_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, Device: 3})
		var ce *CUDAError
		if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_DEVICE" {
			t.Fatalf("Open on device 3 = %v, want CUDA_ERROR_INVALID_DEVICE", err)
		}
		assertNoLeaks(t)
	})
}

// asyncCopyFailsAtStep2 injects a failure of the third async copy: steps 0
// and 1 arrive intact, step 2 reports the driver's error located at step 2,
// and Seek restarts the pipeline past it.
func asyncCopyFailsAtStep2(t *testing.T, dir string, opts Options) {
	t.Setenv("FAKECUDA_FAIL_AT", "cuMemcpyHtoDAsync_v2:3")
	t.Setenv("FAKECUDA_DELAY_US", "200")
	l := openLoader(t, dir, 0, 0, opts)
	for k := range 2 {
		b, err := l.Next()
		if err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		checkBatch(t, l, small, 0, 0, k, b)
		b.Release()
	}
	_, err := l.Next()
	var ce *CUDAError
	var le *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || !errors.As(err, &le) || le.Step != 2 {
		t.Fatalf("Next at step 2 = %v, want a CUDA_ERROR_OUT_OF_MEMORY located at step 2", err)
	}
	if !strings.Contains(err.Error(), "cuMemcpyHtoDAsync: out of memory") {
		t.Errorf("error %q lacks the driver's message", err)
	}
	// Seek restarts the pipeline past the failure.
	seekAndCheck(t, l, small, 0, 0, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t)
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestCUDACloseWithBatchesInFlight(t *testing.T) {
	needCUDA(t)
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 16, Steps: 30}
	dir := writeSet(t, cfg)
	t.Setenv("FAKECUDA_DELAY_US", "5000")
	for _, register := range []bool{false, true} {
		l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA, Prefetch: 5, RegisterMmap: register})
		b := mustNext(t, l)
		// Copies are queued behind b; Close must wait for the stream, then
		// free every slot, buffer, event, stream and the context.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		b.Release()
		assertNoLeaks(t)
	}
}

// TestCUDARegisterMmapOverUnmappedShard is the regression test for
// RegisterMmap over a shard the reader could not map (shardfmt falls back to
// pread where mmap fails): Block then returns a fresh Go heap copy per call,
// so the backend registered a "mapping" computed from two unrelated heap
// copies and queued async copies from heap blocks the garbage collector
// could free before the stream read them. It must fall back to the pinned
// ring and deliver every byte.
func TestCUDARegisterMmapOverUnmappedShard(t *testing.T) {
	needCUDA(t)
	t.Setenv("FAKECUDA_DELAY_US", "300")
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 7}
	dir := writeSet(t, cfg)
	path := filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0)))
	for _, verify := range []bool{false, true} {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		sh, err := shardfmt.OpenReaderAt(f, fi.Size(), path)
		if err != nil {
			t.Fatal(err)
		}
		l, err := newLoader(sh, path, 0, 0, Options{Backend: BackendCUDA, RegisterMmap: true, VerifyChecksums: verify, Prefetch: 3})
		if err != nil {
			t.Fatalf("verify=%v: %v", verify, err)
		}
		for k := range cfg.Steps {
			b, err := l.Next()
			if err != nil {
				t.Fatalf("verify=%v: Next at step %d: %v", verify, k, err)
			}
			runtime.GC() // frees any heap block still read by a queued copy
			checkBatch(t, l, cfg, 0, 0, k, b)
			b.Release()
		}
		if _, err := l.Next(); err != io.EOF {
			t.Fatalf("verify=%v: Next after the last step = %v, want io.EOF", verify, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		assertNoLeaks(t)
	}
}

// TestCUDARegisteredShardTruncatedWhileCopying is the regression test for a
// shard cut short while copies from its registered mapping were queued: the
// fake driver's stream read the truncated mapping and the process died of
// SIGBUS, where the real driver copies from the pages it pinned at
// registration. The loader must report the first step it can no longer
// read (its sample ids are read with pread), located, and close cleanly.
// It runs against the real driver too (scripts/gpu-check.sh), where it
// checks that claim about pinned pages.
func TestCUDARegisteredShardTruncatedWhileCopying(t *testing.T) {
	needCUDA(t)
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 4, Steps: 40}
	t.Setenv("FAKECUDA_DELAY_US", "200")
	for _, opts := range []Options{
		{Backend: BackendCUDA, Prefetch: 6, RegisterMmap: true},
		{Backend: BackendCUDA, Prefetch: 6, RegisterMmap: true, VerifyChecksums: true},
		{Backend: BackendCUDA, Prefetch: 6, CUDAPath: CUDAPathPread},
		{Backend: BackendCUDA, Prefetch: 6, CUDAPath: CUDAPathDirect},
	} {
		if !usable(opts) {
			continue
		}
		dir := writeSet(t, c)
		l := openLoader(t, dir, 0, 0, opts)
		b := mustNext(t, l)
		checkBatch(t, l, c, 0, 0, 0, b)
		// Copies of the next steps are queued now; cut the shard short under
		// them.
		truncateAndReadOn(t, l, dir, c.Steps, opts)
		b.Release()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoLeaks(t)
	}
}

// TestCUDACopyToHostAfterCloseReturnsErrClosed is
// TestCopyToHostAfterCloseReturnsErrClosed on the cuda backend.
func TestCUDACopyToHostAfterCloseReturnsErrClosed(t *testing.T) {
	needCUDA(t)
	dir := writeSet(t, small)
	for _, m := range cudaModes {
		if !usable(m.opts) {
			continue
		}
		copyToHostAfterClose(t, dir, m.opts)
	}
	assertNoLeaks(t)
}

// jaggedPaths are the cuda transfer paths that deliver jagged tensors, with
// the options that take each one (register with and without a reader).
var jaggedPaths = []struct {
	name string
	opts Options
}{
	{"pread, prefetch 1", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, Prefetch: 1}},
	{"pread, verified, prefetch 4", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, Prefetch: 4, VerifyChecksums: true}},
	{"register", Options{Backend: BackendCUDA, CUDAPath: CUDAPathRegister}},
	{"register, verified", Options{Backend: BackendCUDA, CUDAPath: CUDAPathRegister, VerifyChecksums: true}},
	{"direct", Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect, Prefetch: 3}},
}

// TestCUDADeliversJaggedTensors reads every step of the jagged test shard
// (blocks of 4096 to 24576 bytes) on each path and checks the values and
// offsets copied back from the device exactly, and (on the fake driver)
// that the driver was asked to copy each block's own length, no more.
func TestCUDADeliversJaggedTensors(t *testing.T) {
	needCUDA(t)
	path := writeJaggedShard(t)
	var blocks int64
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for k := range r.NumBatches() {
		bi, _ := r.Batch(k)
		blocks += int64(bi.Size)
	}
	r.Close()
	if blocks != 4096+4096+24576+4096 {
		t.Fatalf("blocks of %d bytes in all", blocks)
	}
	for _, c := range jaggedPaths {
		if !usable(c.opts) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAKECUDA_DELAY_US", "200")
			before, _ := cuda.FakeHtoDBytes()
			l := openJagged(t, path, c.opts)
			if p := l.TransferStats().Path; p != c.opts.CUDAPath {
				t.Fatalf("path %s, want %s", p, c.opts.CUDAPath)
			}
			for k, rows := range jaggedRows {
				b := mustNext(t, l)
				h, y := b.Tensor("hist"), b.Tensor("y")
				var vals []byte
				offs := []byte{}
				var o int64
				for j, n := range rows {
					offs = binary.LittleEndian.AppendUint64(offs, uint64(o))
					for e := range n {
						vals = binary.LittleEndian.AppendUint32(vals, uint32(histValue(k, j, e)))
					}
					o += int64(n)
				}
				offs = binary.LittleEndian.AppendUint64(offs, uint64(o))
				if b.Device != 0 || !h.Jagged || h.Bytes != nil || h.Offsets.Bytes != nil || h.Shape[0] != o ||
					h.Offsets.Shape[0] != int64(len(rows)+1) || h.Ptr <= h.Offsets.Ptr {
					t.Fatalf("step %d hist: device %d shape %v offsets %v at %#x/%#x", k, b.Device, h.Shape, h.Offsets.Shape, h.Ptr, h.Offsets.Ptr)
				}
				got := make([]byte, h.Size())
				if err := l.CopyToHost(got, h); err != nil || !bytes.Equal(got, vals) {
					t.Fatalf("step %d hist values from the device (%v): %d bytes, want %d", k, err, len(got), len(vals))
				}
				gotOffs := make([]byte, h.Offsets.Size())
				if err := l.CopyToHost(gotOffs, h.Offsets); err != nil || !bytes.Equal(gotOffs, offs) {
					t.Fatalf("step %d hist offsets from the device (%v): %v, want %v", k, err, gotOffs, offs)
				}
				gotY := make([]byte, y.Size())
				if err := l.CopyToHost(gotY, y); err != nil || len(gotY) != 4*len(rows) ||
					math.Float32frombits(binary.LittleEndian.Uint32(gotY[4:])) != float32(k)+0.25 {
					t.Fatalf("step %d y from the device (%v): %v", k, err, gotY)
				}
				b.Release()
			}
			if _, err := l.Next(); err != io.EOF {
				t.Fatalf("after the last step: %v, want io.EOF", err)
			}
			if after, fake := cuda.FakeHtoDBytes(); fake && after-before != blocks {
				t.Fatalf("host-to-device copies of %d bytes, want the blocks' %d", after-before, blocks)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertNoLeaks(t)
		})
	}
}

// TestCUDAJaggedBadOffsetsFailTheirStep: on every path the offsets are
// checked on the host copy before the block goes out, so step 1's damaged
// offsets fail Next at step 1 with ErrCorrupt, and nothing leaks.
func TestCUDAJaggedBadOffsetsFailTheirStep(t *testing.T) {
	needCUDA(t)
	path := writeJaggedShard(t)
	corruptJaggedOffsets(t, path)
	for _, c := range jaggedPaths {
		if !usable(c.opts) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			l := openJagged(t, path, c.opts)
			assertBadOffsetsAtStep1(t, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertNoLeaks(t)
		})
	}
}

// TestCUDAJaggedRefusedOnGDS: GPUDirect Storage reads never reach host
// memory, where the offsets are checked, so gds over a jagged shard fails
// Open saying so (before any driver is loaded).
func TestCUDAJaggedRefusedOnGDS(t *testing.T) {
	path := writeJaggedShard(t)
	r, err := shardfmt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = newLoader(r, path, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathGDS})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "gds over a shard with jagged tensors") {
		t.Fatalf("gds over a jagged shard: %v, want ErrInvalid", err)
	}
}
