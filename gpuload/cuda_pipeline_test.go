//go:build cgo

package gpuload

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// The tests here drive the cuda pipeline (the copier with the context bound
// to its thread, the reader or the inline registered path) through every
// mode, prefetch depth and start step, with Seek and Close while copies are
// queued, driver failures at each call the copier makes, and random
// sequences of Next, Release and Seek, checking every byte delivered and
// that Close leaves no driver resource, goroutine or thread with the
// context behind.

// cudaModes are the pipelines of the cuda backend: the pinned ring filled
// by pread or O_DIRECT, and the registered mapping, each with and without
// checksums.
var cudaModes = []struct {
	name string
	opts Options
}{
	{"pinned ring", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread}},
	{"pinned ring, checksums", Options{Backend: BackendCUDA, CUDAPath: CUDAPathPread, VerifyChecksums: true}},
	{"O_DIRECT ring", Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect}},
	{"O_DIRECT ring, checksums", Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect, VerifyChecksums: true}},
	{"registered mapping", Options{Backend: BackendCUDA, RegisterMmap: true}},
	{"registered mapping, checksums", Options{Backend: BackendCUDA, RegisterMmap: true, VerifyChecksums: true}},
}

// eventually polls cond for up to a few seconds (goroutines and threads end
// a little after the calls that stop them return) and reports whether it
// became true.
func eventually(cond func() bool) bool {
	for range 5000 {
		if cond() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return cond()
}

// assertCleanAfterClose checks, after a Loader's Close, that the fake
// driver has no live resource, that no thread has the context current, and
// that the goroutine count is back to g0.
func assertCleanAfterClose(t *testing.T, g0 int) {
	t.Helper()
	assertNoLeaks(t)
	if n, ok := cuda.FakeThreadsCurrent(); ok && !eventually(func() bool { n, _ = cuda.FakeThreadsCurrent(); return n == 0 }) {
		t.Errorf("%d threads still have the context current after Close, want 0", n)
	}
	n := 0
	if !eventually(func() bool { n = runtime.NumGoroutine(); return n <= g0 }) {
		t.Errorf("%d goroutines after Close, %d before Open", n, g0)
	}
}

// assertRingIntact stops l's pipeline and checks that every pinned host
// slot is free and every device buffer is free but the held ones: a slot
// lost on some path shows here long before the pipeline runs dry. Close
// may follow; Next may not.
func assertRingIntact(t *testing.T, l *Loader, held int) {
	t.Helper()
	c := l.be.(*cudaBackend)
	c.stop()
	if len(c.hostFree) != len(c.pinned) {
		t.Errorf("%d of %d pinned host slots free with the pipeline stopped", len(c.hostFree), len(c.pinned))
	}
	if want := len(c.devBufs) - held; len(c.devFree) != want {
		t.Errorf("%d device buffers free with the pipeline stopped and %d batches held, want %d", len(c.devFree), held, want)
	}
}

// TestCUDAEveryModePrefetchAndStartStep reads shards of 0, 1, 2 and 7 steps
// in every mode with Prefetch 0 to 6 from the first step, the last step and
// past it, holding batches across Seek (they must stay intact) and closing
// with copies queued and a batch held.
func TestCUDAEveryModePrefetchAndStartStep(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DELAY_US", "300")
	for _, steps := range []int{0, 1, 2, 7} {
		cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: steps}
		dir := writeSet(t, cfg)
		for _, m := range cudaModes {
			if !usable(m.opts) {
				continue
			}
			for pf := 0; pf <= 6; pf++ {
				for _, start := range []int{0, max(steps-1, 0), steps} {
					t.Run(fmt.Sprintf("%d steps, %s, prefetch %d, start %d", steps, m.name, pf, start), func(t *testing.T) {
						g0 := runtime.NumGoroutine()
						o := m.opts
						o.Prefetch, o.StartStep = pf, start
						l := openLoader(t, dir, 0, 0, o)
						wantRing := pf + 1
						if pf == 0 {
							wantRing = DefaultPrefetch + 1
						}
						if l.Ring() != wantRing {
							t.Fatalf("Ring() = %d, want %d", l.Ring(), wantRing)
						}
						var held []*Batch
						for k := start; k < steps; k++ {
							b, err := l.Next()
							if err != nil {
								t.Fatalf("Next at step %d: %v", k, err)
							}
							checkBatch(t, l, cfg, 0, 0, k, b)
							held = append(held, b)
							if len(held) == l.Ring() {
								held[0].Release()
								held = held[1:]
							}
						}
						if _, err := l.Next(); err != io.EOF {
							t.Fatalf("Next after the last step = %v, want io.EOF", err)
						}
						if err := l.Seek(0); err != nil {
							t.Fatal(err)
						}
						for _, h := range held {
							checkBatch(t, l, cfg, 0, 0, h.Step, h)
							h.Release()
						}
						var b *Batch
						if steps > 0 {
							b = mustNext(t, l)
							checkBatch(t, l, cfg, 0, 0, 0, b)
						}
						// Seek to the end with copies queued, then back, then
						// Close with copies queued and b held.
						if err := l.Seek(steps); err != nil {
							t.Fatal(err)
						}
						if _, err := l.Next(); err != io.EOF {
							t.Fatalf("Next after Seek(%d) = %v, want io.EOF", steps, err)
						}
						if err := l.Seek(0); err != nil {
							t.Fatal(err)
						}
						if b != nil {
							checkBatch(t, l, cfg, 0, 0, 0, b)
						}
						assertRingIntact(t, l, min(steps, 1))
						if err := l.Close(); err != nil {
							t.Fatal(err)
						}
						b.Release() // after Close: does nothing
						if _, err := l.Next(); !errors.Is(err, ErrClosed) {
							t.Fatalf("Next after Close = %v, want ErrClosed", err)
						}
						assertCleanAfterClose(t, g0)
					})
				}
			}
		}
	}
}

// TestCUDASeekWhileTheCopierWaitsForADeviceBuffer holds every device
// buffer, so the copier waits for one with a block in hand, then seeks:
// the held batches stay intact, Next reports ErrRingFull until one is
// released, and then delivers the step sought.
func TestCUDASeekWhileTheCopierWaitsForADeviceBuffer(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DELAY_US", "300")
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 9}
	dir := writeSet(t, cfg)
	for _, m := range cudaModes {
		if !usable(m.opts) {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			g0 := runtime.NumGoroutine()
			o := m.opts
			o.Prefetch = 2
			l := openLoader(t, dir, 0, 0, o)
			held := holdWholeRing(t, l, cfg)
			for _, step := range []int{5, 0} {
				if err := l.Seek(step); err != nil {
					t.Fatal(err)
				}
				if _, err := l.Next(); !errors.Is(err, ErrRingFull) {
					t.Fatalf("Next with every buffer held = %v, want ErrRingFull", err)
				}
				for _, h := range held {
					checkBatch(t, l, cfg, 0, 0, h.Step, h)
				}
			}
			held[1].Release()
			b := mustNext(t, l)
			checkBatch(t, l, cfg, 0, 0, 0, b)
			checkBatch(t, l, cfg, 0, 0, 0, held[0])
			checkBatch(t, l, cfg, 0, 0, 2, held[2])
			assertRingIntact(t, l, 3)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertCleanAfterClose(t, g0)
		})
	}
}

// TestCUDADriverFailureAtEveryCopierCall fails the n-th call of each driver
// entry point the copier makes, in every mode, and checks exactly where
// the failure surfaces: the batches before it arrive intact, Next at the
// failing step returns the driver's error located at that step, Seek to it
// delivers the rest, and Close frees everything.
func TestCUDADriverFailureAtEveryCopierCall(t *testing.T) {
	needFake(t)
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 6}
	dir := writeSet(t, cfg)
	for _, c := range []struct {
		entry, op, what string
		// step returns the step whose Next fails when call n fails (-1:
		// none; -2: Open fails), and whether Close returns the error.
		step func(n int) (step int, closeErr bool)
	}{
		// One copy, record and wait per step, in step order.
		{"cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync", "copying block to device", perStep(cfg.Steps)},
		{"cuEventRecord", "cuEventRecord", "copying block to device", perStep(cfg.Steps)},
		{"cuEventSynchronize", "cuEventSynchronize", "waiting for copy to device", perStep(cfg.Steps)},
		// Call 1 is the context thread's at Open, 2 the copier's Bind, 3
		// its unbind (not reported), 4 the context thread's at Close.
		{"cuCtxSetCurrent", "cuCtxSetCurrent", "binding the CUDA context", func(n int) (int, bool) {
			switch n {
			case 1:
				return -2, false
			case 2:
				return 0, false
			}
			return -1, false
		}},
		// The copier waits for the stream only when stopped with copies
		// queued; Close waits for it once.
		{"cuStreamSynchronize", "cuStreamSynchronize", "", func(n int) (int, bool) { return -1, n == 1 }},
	} {
		for _, m := range cudaModes {
			if !usable(m.opts) {
				continue
			}
			for _, delay := range []string{"0", "300"} {
				for n := 1; n <= cfg.Steps+2; n++ {
					t.Run(fmt.Sprintf("%s:%d, %s, delay %s µs", c.entry, n, m.name, delay), func(t *testing.T) {
						t.Setenv("FAKECUDA_FAIL_AT", fmt.Sprintf("%s:%d", c.entry, n))
						t.Setenv("FAKECUDA_DELAY_US", delay)
						g0 := runtime.NumGoroutine()
						want, closeErr := c.step(n)
						o := m.opts
						o.Prefetch = 2
						l, err := Open(dir, 0, 0, o)
						var ce *CUDAError
						if want == -2 {
							if !errors.As(err, &ce) || ce.Op != c.op || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
								t.Fatalf("Open = %v, want the %s failure", err, c.op)
							}
							assertCleanAfterClose(t, g0)
							return
						}
						if err != nil {
							t.Fatal(err)
						}
						for k := range cfg.Steps {
							b, err := l.Next()
							if k == want {
								var le *Error
								if !errors.As(err, &ce) || ce.Op != c.op || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" ||
									!errors.As(err, &le) || le.Step != k || le.Op != c.what {
									t.Fatalf("Next at step %d = %v, want %s: %s failure located at step %d", k, err, c.what, c.op, k)
								}
								if err := l.Seek(k); err != nil {
									t.Fatal(err)
								}
								b, err = l.Next()
							}
							if err != nil {
								t.Fatalf("Next at step %d: %v", k, err)
							}
							checkBatch(t, l, cfg, 0, 0, k, b)
							b.Release()
						}
						if _, err := l.Next(); err != io.EOF {
							t.Fatalf("Next after the last step = %v, want io.EOF", err)
						}
						assertRingIntact(t, l, 0)
						err = l.Close()
						if closeErr {
							if !errors.As(err, &ce) || ce.Op != c.op {
								t.Fatalf("Close = %v, want the %s failure", err, c.op)
							}
						} else if err != nil {
							t.Fatalf("Close = %v", err)
						}
						assertCleanAfterClose(t, g0)
					})
				}
			}
		}
	}
}

// perStep is the failing step when the n-th of one call per step fails,
// for a shard of steps steps.
func perStep(steps int) func(n int) (int, bool) {
	return func(n int) (int, bool) {
		if n > steps {
			return -1, false
		}
		return n - 1, false
	}
}

// TestCUDARandomSeekNextRelease runs seeded random sequences of Next,
// Release (in any order) and Seek in every mode, with random copy delays,
// prefetch depths and start steps, checking every batch delivered and
// every held batch byte for byte, and the ring bound (ErrRingFull).
func TestCUDARandomSeekNextRelease(t *testing.T) {
	needFake(t)
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 9, LastCount: 2, Pads: 1}
	dir := writeSet(t, cfg)
	for seed := range int64(12) {
		for _, m := range cudaModes {
			if !usable(m.opts) {
				continue
			}
			t.Run(fmt.Sprintf("seed %d, %s", seed, m.name), func(t *testing.T) {
				rng := rand.New(rand.NewSource(seed))
				t.Setenv("FAKECUDA_DELAY_US", fmt.Sprint(rng.Intn(800)))
				g0 := runtime.NumGoroutine()
				o := m.opts
				o.Prefetch = rng.Intn(7)
				o.StartStep = rng.Intn(cfg.Steps + 1)
				l := openLoader(t, dir, 0, 0, o)
				var held []*Batch
				step := o.StartStep
				var ops []string
				for range 60 {
					switch r := rng.Intn(10); {
					case r < 5:
						ops = append(ops, "next")
						b, err := l.Next()
						switch {
						case step >= cfg.Steps:
							if err != io.EOF {
								t.Fatalf("%s: Next at the end = %v, want io.EOF", strings.Join(ops, " "), err)
							}
						case len(held) >= l.Ring():
							if !errors.Is(err, ErrRingFull) {
								t.Fatalf("%s: Next with the ring held = %v, want ErrRingFull", strings.Join(ops, " "), err)
							}
						default:
							if err != nil {
								t.Fatalf("%s: Next at step %d: %v", strings.Join(ops, " "), step, err)
							}
							checkBatch(t, l, cfg, 0, 0, step, b)
							held = append(held, b)
							step++
						}
					case r < 8:
						if len(held) > 0 {
							i := rng.Intn(len(held))
							ops = append(ops, fmt.Sprintf("release(%d)", held[i].Step))
							checkBatch(t, l, cfg, 0, 0, held[i].Step, held[i])
							held[i].Release()
							held = append(held[:i], held[i+1:]...)
						}
					default:
						step = rng.Intn(cfg.Steps + 1)
						ops = append(ops, fmt.Sprintf("seek(%d)", step))
						if err := l.Seek(step); err != nil {
							t.Fatal(err)
						}
					}
				}
				for _, h := range held {
					checkBatch(t, l, cfg, 0, 0, h.Step, h)
				}
				assertRingIntact(t, l, len(held))
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				for _, h := range held {
					h.Release()
				}
				assertCleanAfterClose(t, g0)
			})
		}
	}
}

// TestCUDAReleaseFromAnotherGoroutineDuringSeekAndClose hands every batch
// to a goroutine that releases it while the consumer goes on with Next,
// Seek and finally Close, in every mode: releases racing with Seek's and
// Close's reclaiming of device buffers must neither lose nor duplicate a
// buffer (the whole ring is held again after the Seeks) nor touch freed
// state after Close.
func TestCUDAReleaseFromAnotherGoroutineDuringSeekAndClose(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DELAY_US", "100")
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 23, LastCount: 2, Pads: 1}
	dir := writeSet(t, cfg)
	for _, m := range cudaModes {
		if !usable(m.opts) {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			g0 := runtime.NumGoroutine()
			o := m.opts
			o.Prefetch = 2
			l := openLoader(t, dir, 0, 0, o)
			rel := startReleaser(l.Ring())
			for _, from := range []int{0, 11, 20, 3} {
				if err := l.Seek(from); err != nil {
					t.Fatal(err)
				}
				for k := from; k < min(from+9, cfg.Steps); k++ {
					rel.reserve()
					b, err := l.Next()
					if err != nil {
						t.Fatalf("Next at step %d after Seek(%d): %v", k, from, err)
					}
					if b.Step != k || b.Count != cfg.Count(k) || b.Pads != cfg.Pad(k) {
						t.Fatalf("step %d: got step %d count %d pads %d", k, b.Step, b.Count, b.Pads)
					}
					rel.hand(b)
				}
			}
			for rel.out() > 0 {
				runtime.Gosched()
			}
			held := holdWholeRing(t, l, cfg)
			// Close while the other goroutine releases them.
			for _, b := range held {
				rel.reserve()
				rel.hand(b)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			rel.stop()
			assertCleanAfterClose(t, g0)
		})
	}
}

// TestCUDAChecksumErrorsDoNotLeakHostSlots is the regression test for a
// pinned host slot lost with every block error on the pinned ring: the
// reader hands the failing block's slot to the copier with the error, and
// the copier delivered the error without giving the slot back, so after as
// many errors (and Seeks) as the ring has host slots the reader waited for
// a slot forever and so did Next. It damages step 2's block and reads it
// with checksums, from the pinned ring and from the registered mapping,
// more times than the ring has buffers: each time Next fails at step 2 with
// ErrChecksum (sticky until Seek), and at the end the whole ring can still
// be held.
func TestCUDAChecksumErrorsDoNotLeakHostSlots(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DELAY_US", "200")
	dir := writeSet(t, small)
	flipBlockByte(t, filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 1))), 2)
	for _, m := range cudaModes {
		if !usable(m.opts) {
			continue
		}
		if !m.opts.VerifyChecksums {
			continue
		}
		t.Run(m.name, func(t *testing.T) {
			g0 := runtime.NumGoroutine()
			o := m.opts
			o.Prefetch = 2
			l := openLoader(t, dir, 0, 1, o)
			done := make(chan struct{})
			go func() {
				defer close(done)
				checksumErrorsThenHoldTheRing(t, l)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second): // a hang, not a speed check
				// Left open: Close must not race the stuck Next.
				t.Fatal("Next never returned: the pipeline lost its host slots")
			}
			assertRingIntact(t, l, l.Ring())
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertCleanAfterClose(t, g0)
		})
	}
}

// checksumErrorsThenHoldTheRing reads damaged step 2 of small's shard (0, 1)
// 2*Ring() times, then holds the whole ring. It reports failures with
// t.Error (it runs on its own goroutine).
func checksumErrorsThenHoldTheRing(t *testing.T, l *Loader) {
	for range 2 * l.Ring() {
		if err := l.Seek(1); err != nil {
			t.Error(err)
			return
		}
		b, err := l.Next()
		if err != nil || b.Step != 1 {
			t.Errorf("Next at step 1 = %v", err)
			return
		}
		b.Release()
		_, err = l.Next()
		var le *Error
		if !errors.Is(err, ErrChecksum) || !errors.As(err, &le) || le.Step != 2 || le.Op != "verifying block" {
			t.Errorf("Next at the damaged step = %v, want ErrChecksum located at step 2", err)
			return
		}
		if _, err := l.Next(); !errors.Is(err, ErrChecksum) {
			t.Errorf("Next after the error = %v, want the sticky ErrChecksum", err)
			return
		}
	}
	var steps []int
	for _, from := range []int{3, 0} {
		if err := l.Seek(from); err != nil {
			t.Error(err)
			return
		}
		for k := from; k < small.Steps && len(steps) < l.Ring(); k++ {
			b, err := l.Next()
			if err != nil {
				t.Errorf("Next at step %d: %v", k, err)
				return
			}
			if b.Step != k || !slices.Equal(b.SampleIDs, small.IDs(0, 1, k)) {
				t.Errorf("Next at step %d: step %d ids %v", k, b.Step, b.SampleIDs)
				return
			}
			steps = append(steps, k)
		}
	}
	if _, err := l.Next(); !errors.Is(err, ErrRingFull) {
		t.Errorf("Next with the ring held (steps %v) = %v, want ErrRingFull", steps, err)
	}
}
