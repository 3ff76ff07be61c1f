//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"
)

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens the driver library once per process (PREP_LIBCUDA or
// libcuda.so.1) and resolves its entry points. It returns an error wrapping
// ErrUnavailable when the library or a symbol is missing.
func Load() error {
	loadOnce.Do(func() {
		path := os.Getenv(EnvLibrary)
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		var buf [maxLoaderMessageBytes]C.char
		if C.gl_cuda_load(cpath, &buf[0], C.size_t(len(buf))) != 0 {
			loadErr = fmt.Errorf("%w: %s", ErrUnavailable, C.GoString(&buf[0]))
		}
	})
	return loadErr
}

// FakeOutstanding returns the number of live driver resources (allocations,
// registrations, streams, events, retained contexts) when the loaded library
// is the test fake driver, and ok=false with the real driver.
func FakeOutstanding() (n int, ok bool) {
	if Load() != nil {
		return 0, false
	}
	v := int(C.gl_fake_outstanding())
	return v, v >= 0
}

// FakeThreadsCurrent returns the number of live OS threads that have a
// context current when the loaded library is the test fake driver, and
// ok=false with the real driver.
func FakeThreadsCurrent() (n int, ok bool) {
	if Load() != nil {
		return 0, false
	}
	v := int(C.gl_fake_threads_current())
	return v, v >= 0
}

// FakeHtoDBytes returns the bytes of every host-to-device copy queued since
// the driver was loaded when the loaded library is the test fake driver,
// and ok=false with the real driver.
func FakeHtoDBytes() (n int64, ok bool) {
	if Load() != nil {
		return 0, false
	}
	v := int64(C.gl_fake_htod_bytes())
	return v, v >= 0
}

// check turns a CUresult into nil or an *Error carrying the driver's name and
// message for the code.
func check(op string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Op: op, Code: Result(r), Name: "CUDA_ERROR_UNKNOWN", Message: "unrecognized error code"}
	var s *C.char
	if C.gl_cuGetErrorName(r, &s) == 0 && s != nil {
		e.Name = C.GoString(s)
	}
	if C.gl_cuGetErrorString(r, &s) == 0 && s != nil {
		e.Message = C.GoString(s)
	}
	return e
}

// DriverVersion returns the driver's CUDA version as 1000*major + 10*minor.
func DriverVersion() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.gl_cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Context is a device's primary context, made current on a dedicated
// goroutine locked to its OS thread. Context-bound calls go through Do, or
// through the Current of a goroutine that called Bind.
type Context struct {
	dev     C.CUdevice
	ordinal int
	name    string
	cctx    C.CUcontext // the retained primary context, for Bind
	reqs    chan func()
	done    chan struct{}
	mu      sync.Mutex
	closed  bool
}

// Open loads the driver, initializes it, retains the primary context of the
// device with the given ordinal and starts the context's thread. Errors wrap
// ErrUnavailable (no driver) or are *Error (driver failures, e.g. an invalid
// ordinal).
func Open(ordinal int) (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	c := &Context{ordinal: ordinal, reqs: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go c.serve(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return c, nil
}

// serve is the context thread: it binds the primary context and then runs
// requests until reqs is closed, then releases the context. It never
// unlocks its thread: the thread exits with the goroutine, so it cannot go
// back to the scheduler with the context current (if clearing it fails).
func (c *Context) serve(ready chan<- error) {
	runtime.LockOSThread()
	defer close(c.done)
	if err := check("cuInit", C.gl_cuInit(0)); err != nil {
		ready <- err
		return
	}
	if err := check("cuDeviceGet", C.gl_cuDeviceGet(&c.dev, C.int(c.ordinal))); err != nil {
		ready <- fmt.Errorf("device %d: %w", c.ordinal, err)
		return
	}
	var name [maxDeviceNameBytes]C.char
	if C.gl_cuDeviceGetName(&name[0], C.int(len(name)), c.dev) == 0 {
		c.name = C.GoString(&name[0])
	}
	var ctx C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.gl_cuDevicePrimaryCtxRetain(&ctx, c.dev)); err != nil {
		ready <- err
		return
	}
	if err := check("cuCtxSetCurrent", C.gl_cuCtxSetCurrent(ctx)); err != nil {
		C.gl_cuDevicePrimaryCtxRelease(c.dev)
		ready <- err
		return
	}
	c.cctx = ctx
	ready <- nil
	for f := range c.reqs {
		f()
	}
	C.gl_cuCtxSetCurrent(nil)
	C.gl_cuDevicePrimaryCtxRelease(c.dev)
}

// Name returns the device name reported by the driver ("" if unknown).
func (c *Context) Name() string { return c.name }

// Do runs f on the context thread and returns its error, or ErrClosed after
// Close. Calls from several goroutines are serialized.
func (c *Context) Do(f func(cur *Current) error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	errc := make(chan error, 1)
	c.reqs <- func() { errc <- f(&Current{}) }
	c.mu.Unlock()
	return <-errc
}

// Bind locks the calling goroutine to its OS thread and makes the context
// current on that thread too, for a goroutine that calls the driver for
// every batch: its calls then go straight to the driver, where each Do is a
// hand-off to the context thread and back (two thread wake-ups, most of the
// CPU a copy loop spent per batch; BenchmarkCUDAControlPath). The Current
// is for this goroutine only. unbind clears the thread's current context
// and unlocks the thread; call it on the same goroutine, before Close. When
// clearing fails the thread stays locked, so it exits with the goroutine
// instead of going back to the scheduler with the context current.
// Errors: ErrClosed after Close, or the *Error of cuCtxSetCurrent (the
// thread is then unlocked again).
func (c *Context) Bind() (cur *Current, unbind func(), err error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, nil, ErrClosed
	}
	runtime.LockOSThread()
	if err := check("cuCtxSetCurrent", C.gl_cuCtxSetCurrent(c.cctx)); err != nil {
		runtime.UnlockOSThread()
		return nil, nil, err
	}
	return &Current{}, func() {
		if C.gl_cuCtxSetCurrent(nil) == 0 {
			runtime.UnlockOSThread()
		}
	}, nil
}

// Close stops the context thread and releases the primary context. Resources
// allocated through Do must be freed before. Close is idempotent.
func (c *Context) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.reqs)
	}
	c.mu.Unlock()
	<-c.done
	return nil
}

// Current gives access to the context-bound driver calls. It is only handed
// out by Context.Do, and must not be kept after Do returns, or by
// Context.Bind, and must then be used only on the goroutine that called Bind
// until its unbind.
type Current struct{}

// MemAlloc allocates bytes of device memory (cuMemAlloc).
func (*Current) MemAlloc(bytes uint64) (DevicePtr, error) {
	var p C.CUdeviceptr
	err := check("cuMemAlloc", C.gl_cuMemAlloc(&p, C.size_t(bytes)))
	return DevicePtr(p), err
}

// MemFree frees device memory from MemAlloc (cuMemFree).
func (*Current) MemFree(p DevicePtr) error {
	return check("cuMemFree", C.gl_cuMemFree(C.CUdeviceptr(p)))
}

// MemHostAlloc allocates bytes of page-locked (pinned) host memory
// (cuMemHostAlloc). The memory is C memory: Go's GC never moves or frees it.
func (*Current) MemHostAlloc(bytes uint64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuMemHostAlloc", C.gl_cuMemHostAlloc(&p, C.size_t(bytes), HostAllocDefault))
	return p, err
}

// MemFreeHost frees memory from MemHostAlloc (cuMemFreeHost).
func (*Current) MemFreeHost(p unsafe.Pointer) error {
	return check("cuMemFreeHost", C.gl_cuMemFreeHost(p))
}

// MemHostRegister page-locks an existing host range (cuMemHostRegister) with
// the given CU_MEMHOSTREGISTER_* flags. p must not point into Go memory.
func (*Current) MemHostRegister(p unsafe.Pointer, bytes uint64, flags uint) error {
	return check("cuMemHostRegister", C.gl_cuMemHostRegister(p, C.size_t(bytes), C.uint(flags)))
}

// MemHostUnregister undoes MemHostRegister (cuMemHostUnregister).
func (*Current) MemHostUnregister(p unsafe.Pointer) error {
	return check("cuMemHostUnregister", C.gl_cuMemHostUnregister(p))
}

// MemcpyHtoD copies bytes from host src to device dst and waits
// (cuMemcpyHtoD). src must not point into Go memory.
func (*Current) MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, bytes uint64) error {
	return check("cuMemcpyHtoD", C.gl_cuMemcpyHtoD(C.CUdeviceptr(dst), src, C.size_t(bytes)))
}

// MemcpyHtoDAsync queues a copy of bytes from pinned host src to device dst
// on stream s (cuMemcpyHtoDAsync). src must stay valid and unchanged until
// the copy completes (record an event after it).
func (*Current) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes uint64, s Stream) error {
	return check("cuMemcpyHtoDAsync", C.gl_cuMemcpyHtoDAsync(C.CUdeviceptr(dst), src, C.size_t(bytes), C.CUstream(s.p)))
}

// MemcpyDtoH copies bytes from device src into host dst and waits
// (cuMemcpyDtoH). dst may be Go memory: the call does not keep it.
func (*Current) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH", C.gl_cuMemcpyDtoH(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
}

// StreamCreate creates a stream with CU_STREAM_* flags (cuStreamCreate).
func (*Current) StreamCreate(flags uint) (Stream, error) {
	var s C.CUstream
	err := check("cuStreamCreate", C.gl_cuStreamCreate(&s, C.uint(flags)))
	return Stream{unsafe.Pointer(s)}, err
}

// StreamSynchronize waits for all work queued on s (cuStreamSynchronize).
func (*Current) StreamSynchronize(s Stream) error {
	return check("cuStreamSynchronize", C.gl_cuStreamSynchronize(C.CUstream(s.p)))
}

// StreamDestroy destroys s (cuStreamDestroy).
func (*Current) StreamDestroy(s Stream) error {
	return check("cuStreamDestroy", C.gl_cuStreamDestroy(C.CUstream(s.p)))
}

// EventCreate creates an event with CU_EVENT_* flags (cuEventCreate).
func (*Current) EventCreate(flags uint) (Event, error) {
	var e C.CUevent
	err := check("cuEventCreate", C.gl_cuEventCreate(&e, C.uint(flags)))
	return Event{unsafe.Pointer(e)}, err
}

// EventRecord records e at the current end of stream s (cuEventRecord).
func (*Current) EventRecord(e Event, s Stream) error {
	return check("cuEventRecord", C.gl_cuEventRecord(C.CUevent(e.p), C.CUstream(s.p)))
}

// EventSynchronize waits until the work before e's record completes
// (cuEventSynchronize).
func (*Current) EventSynchronize(e Event) error {
	return check("cuEventSynchronize", C.gl_cuEventSynchronize(C.CUevent(e.p)))
}

// EventQuery reports whether the work before e's record has completed
// (cuEventQuery); CUDA_ERROR_NOT_READY is not an error.
func (*Current) EventQuery(e Event) (bool, error) {
	r := C.gl_cuEventQuery(C.CUevent(e.p))
	if Result(r) == NotReady {
		return false, nil
	}
	return r == 0, check("cuEventQuery", r)
}

// EventDestroy destroys e (cuEventDestroy).
func (*Current) EventDestroy(e Event) error {
	return check("cuEventDestroy", C.gl_cuEventDestroy(C.CUevent(e.p)))
}
