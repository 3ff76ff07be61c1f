//go:build cgo

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestMain builds the fake driver from testdata/fakecuda.c and points
// PREP_LIBCUDA at it before the first Load. Without gcc every test skips.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	so := filepath.Join(dir, "libfakecuda.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", so, "testdata/fakecuda.c", "-lpthread").CombinedOutput(); err != nil {
		noGCC = fmt.Sprintf("cannot build the fake CUDA driver with gcc: %v\n%s", err, out)
	}
	os.Setenv(EnvLibrary, so)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var noGCC string

func needFake(t *testing.T) {
	t.Helper()
	if noGCC != "" {
		t.Skip(noGCC)
	}
}

func outstanding(t *testing.T) int {
	t.Helper()
	n, ok := FakeOutstanding()
	if !ok {
		t.Fatal("fake driver not loaded")
	}
	return n
}

func TestRoundTripThroughDevice(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DELAY_US", "2000")
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "fakecuda device 0" {
		t.Errorf("Name() = %q", c.Name())
	}
	const n = 1 << 16
	back := make([]byte, n)
	err = c.Do(func(cur *Current) error {
		host, err := cur.MemHostAlloc(n)
		if err != nil {
			return err
		}
		defer cur.MemFreeHost(host)
		src := unsafe.Slice((*byte)(host), n)
		for i := range src {
			src[i] = byte(i * 7)
		}
		dev, err := cur.MemAlloc(n)
		if err != nil {
			return err
		}
		defer cur.MemFree(dev)
		s, err := cur.StreamCreate(StreamNonBlocking)
		if err != nil {
			return err
		}
		defer cur.StreamDestroy(s)
		ev, err := cur.EventCreate(EventDisableTiming)
		if err != nil {
			return err
		}
		defer cur.EventDestroy(ev)
		if err := cur.MemcpyHtoDAsync(dev, host, n, s); err != nil {
			return err
		}
		if err := cur.EventRecord(ev, s); err != nil {
			return err
		}
		if done, err := cur.EventQuery(ev); err != nil || done {
			return fmt.Errorf("EventQuery right after a delayed copy = %v, %v; want false, nil", done, err)
		}
		if err := cur.EventSynchronize(ev); err != nil {
			return err
		}
		if done, err := cur.EventQuery(ev); err != nil || !done {
			return fmt.Errorf("EventQuery after EventSynchronize = %v, %v; want true, nil", done, err)
		}
		return cur.MemcpyDtoH(back, dev)
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range back {
		if b != byte(i*7) {
			t.Fatalf("byte %d = %d after round trip, want %d", i, b, byte(i*7))
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := outstanding(t); got != 0 {
		t.Errorf("%d driver resources outstanding after Close, want 0", got)
	}
	if err := c.Do(func(*Current) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close = %v, want ErrClosed", err)
	}
}

func TestDriverErrorCarriesMessage(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_FAIL_AT", "cuMemAlloc_v2:2")
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var first DevicePtr
	err = c.Do(func(cur *Current) error {
		var err error
		if first, err = cur.MemAlloc(64); err != nil {
			return fmt.Errorf("first alloc: %w", err)
		}
		_, err = cur.MemAlloc(64)
		return err
	})
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("second MemAlloc error = %v, want *Error", err)
	}
	want := Error{Op: "cuMemAlloc", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Message: "out of memory"}
	if *ce != want {
		t.Errorf("error = %+v, want %+v", *ce, want)
	}
	if got := err.Error(); got != "cuMemAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY, 2)" {
		t.Errorf("message = %q", got)
	}
	if err := c.Do(func(cur *Current) error { return cur.MemFree(first) }); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidDeviceOrdinal(t *testing.T) {
	needFake(t)
	t.Setenv("FAKECUDA_DEVICES", "2")
	_, err := Open(2)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_DEVICE" {
		t.Fatalf("Open(2) with 2 devices = %v, want CUDA_ERROR_INVALID_DEVICE", err)
	}
	if !strings.Contains(err.Error(), "device 2") {
		t.Errorf("error %q does not name the device", err)
	}
}

func TestAsyncCopyFromPageableMemoryRejected(t *testing.T) {
	// The fake driver refuses async copies from memory that is neither
	// cuMemHostAlloc'ed nor registered: the backend must never DMA from a
	// plain mapping or Go memory.
	needFake(t)
	c, err := Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	src := bytes.Repeat([]byte{1}, 64)
	err = c.Do(func(cur *Current) error {
		dev, err := cur.MemAlloc(64)
		if err != nil {
			return err
		}
		defer cur.MemFree(dev)
		s, err := cur.StreamCreate(0)
		if err != nil {
			return err
		}
		defer cur.StreamDestroy(s)
		return cur.MemcpyHtoDAsync(dev, unsafe.Pointer(&src[0]), 64, s)
	})
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_INVALID_VALUE" {
		t.Fatalf("async copy from pageable memory = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
}

// threadsCurrent waits until the fake driver counts want live threads with
// a context current, or gives up after a few seconds (a thread that exits
// is counted until its exit completes), and returns the last count.
func threadsCurrent(t *testing.T, want int) int {
	t.Helper()
	n := -1
	for i := 0; i < 5000; i++ {
		var ok bool
		if n, ok = FakeThreadsCurrent(); !ok {
			t.Fatal("fake driver not loaded")
		}
		if n == want {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

// TestNoThreadLeftWithTheContextCurrent is the regression test for threads
// given back to the Go scheduler with the context still current: when
// clearing it failed, unbind unlocked the copier's thread anyway, and the
// context thread did the same after its own clear at Close, so a thread of
// the pool kept a context that Close then released.
func TestNoThreadLeftWithTheContextCurrent(t *testing.T) {
	needFake(t)
	for _, c := range []struct {
		name, fail string
		bind       bool
	}{
		{"bind and unbind", "", true},
		// Call 1 makes the context current on the context thread, 2 is
		// Bind, 3 is unbind's clear.
		{"unbind's clear fails", "cuCtxSetCurrent:3:999", true},
		// Call 2 is the context thread's clear at Close.
		{"the context thread's clear fails", "cuCtxSetCurrent:2:999", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("FAKECUDA_FAIL_AT", c.fail)
			ctx, err := Open(0)
			if err != nil {
				t.Fatal(err)
			}
			if n := threadsCurrent(t, 1); n != 1 {
				t.Fatalf("%d threads with the context current after Open, want 1 (the context thread)", n)
			}
			if c.bind {
				done := make(chan error)
				go func() {
					cur, unbind, err := ctx.Bind()
					if err != nil {
						done <- err
						return
					}
					if n, _ := FakeThreadsCurrent(); n != 2 {
						err = fmt.Errorf("%d threads with the context current while bound, want 2", n)
					}
					p, e := cur.MemAlloc(64)
					if e == nil {
						e = cur.MemFree(p)
					}
					unbind()
					if err == nil {
						err = e
					}
					done <- err
				}()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if err := ctx.Close(); err != nil {
				t.Fatal(err)
			}
			if n := threadsCurrent(t, 0); n != 0 {
				t.Fatalf("%d threads left with the context current after Close, want 0", n)
			}
			if n := outstanding(t); n != 0 {
				t.Fatalf("%d driver resources live after Close, want 0", n)
			}
		})
	}
}
