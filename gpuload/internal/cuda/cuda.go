// Package cuda is gpuload's only cgo: a run-time binding to the handful of
// CUDA driver API entry points the CUDA backend uses.
//
// The driver library (libcuda.so.1, or the file named by the PREP_LIBCUDA
// environment variable, which tests point at a fake driver) is opened with
// dlopen on first use, so nothing from the CUDA SDK is needed to build or
// test. Without cgo (CGO_ENABLED=0) the package compiles to a stub whose
// Open returns ErrUnavailable.
//
// Every call that needs a CUDA context runs on a goroutine locked to its OS
// thread with the device's primary context current: Context.Do sends a
// function to the context's own goroutine and waits for it, and
// Context.Bind makes the context current on the calling goroutine's thread
// for a loop that calls the driver per batch. A *Current, handed out only by
// Do and Bind, is the only way to reach the context-bound calls, so they
// cannot be made from a thread without the context by mistake.
package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// EnvLibrary names the environment variable that overrides the path of the
// driver library (default "libcuda.so.1").
const EnvLibrary = "PREP_LIBCUDA"

// ErrUnavailable is returned by Open when the CUDA driver cannot be used: the
// binary was built without cgo, or the driver library could not be loaded.
var ErrUnavailable = errors.New("CUDA unavailable")

// ErrClosed is returned by Context.Do after Context.Close.
var ErrClosed = errors.New("cuda context closed")

// Result is a CUresult code from the driver (0 is CUDA_SUCCESS).
type Result int

// CUresult values that gpuload checks for by number (from cuda.h).
const (
	Success  Result = 0   // CUDA_SUCCESS
	NotReady Result = 600 // CUDA_ERROR_NOT_READY: an event or stream still has work pending
)

// Flags passed to the driver (values from cuda.h).
const (
	StreamNonBlocking     = 0x1 // CU_STREAM_NON_BLOCKING: no implicit sync with the legacy default stream
	EventBlockingSync     = 0x1 // CU_EVENT_BLOCKING_SYNC: cuEventSynchronize sleeps instead of spinning a core
	EventDisableTiming    = 0x2 // CU_EVENT_DISABLE_TIMING: cheaper events, no cuEventElapsedTime
	HostRegisterReadOnly  = 0x8 // CU_MEMHOSTREGISTER_READ_ONLY: the device only reads the range
	HostAllocDefault      = 0x0 // cuMemHostAlloc flags: plain page-locked memory
	HostRegisterPortable  = 0x1 // CU_MEMHOSTREGISTER_PORTABLE
	maxDeviceNameBytes    = 256
	maxLoaderMessageBytes = 512
)

// DevicePtr is a CUdeviceptr: an address in device memory. It stays an
// integer on the Go side and is never dereferenced by Go code.
type DevicePtr uint64

// Stream is an opaque CUstream handle (a C pointer, never Go memory).
type Stream struct{ p unsafe.Pointer }

// Event is an opaque CUevent handle (a C pointer, never Go memory).
type Event struct{ p unsafe.Pointer }

// Error is a failed driver call: the entry point, its CUresult and the
// driver's own name and description of the code (cuGetErrorName and
// cuGetErrorString).
type Error struct {
	Op      string // driver entry point, e.g. "cuMemAlloc"
	Code    Result // CUresult
	Name    string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Message string // e.g. "out of memory"
}

// Error formats the failure as "cuMemAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY, 2)".
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s, %d)", e.Op, e.Message, e.Name, int(e.Code))
}
