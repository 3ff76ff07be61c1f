// Command capi is gpuload's C ABI, built as a shared library:
//
//	go build -buildmode=c-shared -o bin/libgpuload.so ./gpuload/capi
//
// The documented interface is gpuload.h in this directory (the header cgo
// generates beside the library is not the public one). Every pointer handed
// to C is C memory: batch descriptors come from C.malloc, tensor data lives
// in the loader's anonymous mappings, the mapped shard, or the device.
package main

/*
#cgo CFLAGS: -DGPULOAD_NO_PROTOTYPES
#include <stdlib.h>
#include <string.h>
#include "gpuload.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"

	"github.com/prepml/prep/gpuload"
	"github.com/prepml/prep/shardfmt"
)

func main() {}

// cLoader is the Go side of a gl_loader handle.
type cLoader struct {
	l       *gpuload.Loader
	info    *gpuload.SetInfo               // the shard set's plan numbers
	fps     [2]*C.char                     // fingerprint, order fingerprint, freed at close
	names   []*C.char                      // tensor names, freed at close
	batches map[*C.gl_batch]*gpuload.Batch // unreleased batches
	// op serialises every call on this loader (gpuload.Loader is not safe
	// for concurrent use): lookup takes it, the call's defer releases it.
	// Lock order: op before mu. No call blocks on another while holding
	// it (gl_next returns GL_ERR_RING_FULL rather than wait for a release).
	op     sync.Mutex
	closed bool // set by gl_close under op; later calls get GL_ERR_CLOSED
}

var (
	mu      sync.Mutex
	loaders = map[*C.gl_loader]*cLoader{}
	lastErr *C.char
)

// fail records err as the last error and returns its GL_ERR_* code.
func fail(err error) C.int {
	mu.Lock()
	defer mu.Unlock()
	if lastErr != nil {
		C.free(unsafe.Pointer(lastErr))
	}
	lastErr = C.CString(err.Error())
	return code(err)
}

// code maps an error to its GL_ERR_* code (see gpuload.h).
func code(err error) C.int {
	var ce *gpuload.CUDAError
	switch {
	case errors.Is(err, gpuload.ErrInvalid):
		return C.GL_ERR_INVALID
	case errors.Is(err, gpuload.ErrNoShardSet):
		return C.GL_ERR_NO_SHARD_SET
	case errors.Is(err, gpuload.ErrOutsidePlan):
		return C.GL_ERR_OUTSIDE_PLAN
	case errors.Is(err, gpuload.ErrNoShard):
		return C.GL_ERR_NO_SHARD
	case errors.Is(err, gpuload.ErrPlanMismatch), errors.Is(err, shardfmt.ErrProvenance):
		return C.GL_ERR_PLAN_MISMATCH
	case errors.Is(err, gpuload.ErrCorrupt), errors.Is(err, gpuload.ErrChecksum),
		errors.Is(err, shardfmt.ErrSize), errors.Is(err, shardfmt.ErrMagic), errors.Is(err, shardfmt.ErrVersion),
		errors.Is(err, shardfmt.ErrEndian), errors.Is(err, shardfmt.ErrChecksum), errors.Is(err, shardfmt.ErrCorrupt):
		return C.GL_ERR_CORRUPT
	case errors.Is(err, gpuload.ErrCUDAUnavailable), errors.As(err, &ce):
		return C.GL_ERR_CUDA
	case errors.Is(err, gpuload.ErrRingFull):
		return C.GL_ERR_RING_FULL
	case errors.Is(err, gpuload.ErrClosed):
		return C.GL_ERR_CLOSED
	}
	return C.GL_ERR_IO
}

// errNull is a NULL pointer argument: GL_ERR_INVALID, as gpuload.h documents.
var errNull = fmt.Errorf("gpuload: %w: NULL pointer", gpuload.ErrInvalid)

// lookup returns h's loader with its op mutex held (the caller unlocks
// it), or nil and the GL_ERR_* code for a NULL or closed handle.
func lookup(h *C.gl_loader) (*cLoader, C.int) {
	if h == nil {
		return nil, fail(errNull)
	}
	mu.Lock()
	cl := loaders[h]
	mu.Unlock()
	if cl == nil {
		return nil, fail(gpuload.ErrClosed)
	}
	cl.op.Lock()
	if cl.closed {
		cl.op.Unlock()
		return nil, fail(gpuload.ErrClosed)
	}
	return cl, C.GL_OK
}

//export gl_open
func gl_open(dir *C.char, epoch, rank C.int, opts *C.gl_options, out **C.gl_loader) C.int {
	if dir == nil || out == nil {
		return fail(errNull)
	}
	var o gpuload.Options
	if opts != nil {
		if opts.backend != nil {
			o.Backend = C.GoString(opts.backend)
		}
		o.Device = int(opts.device)
		o.Prefetch = int(opts.prefetch)
		o.StartStep = int(opts.start_step)
		o.VerifyChecksums = opts.verify_checksums != 0
		o.RegisterMmap = opts.register_mmap != 0
		o.MapBlocks = opts.map_blocks != 0
		if opts.plan_fingerprint != nil {
			o.PlanFingerprint = C.GoString(opts.plan_fingerprint)
		}
	}
	l, err := gpuload.Open(C.GoString(dir), int(epoch), int(rank), o)
	if err != nil {
		return fail(err)
	}
	info, err := gpuload.ReadSetInfo(C.GoString(dir))
	if err != nil {
		l.Close()
		return fail(err)
	}
	cl := &cLoader{l: l, info: info, batches: map[*C.gl_batch]*gpuload.Batch{}}
	cl.fps = [2]*C.char{C.CString(info.Fingerprint), C.CString(info.OrderFingerprint)}
	for _, t := range l.Tensors() {
		cl.names = append(cl.names, C.CString(t.Name))
	}
	h := (*C.gl_loader)(C.malloc(1))
	mu.Lock()
	loaders[h] = cl
	mu.Unlock()
	*out = h
	return C.GL_OK
}

// align8 rounds n up to a multiple of 8.
func align8(n uintptr) uintptr { return (n + 7) &^ 7 }

//export gl_next
func gl_next(h *C.gl_loader, out **C.gl_batch) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if out == nil {
		return fail(errNull)
	}
	b, err := cl.l.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return C.GL_EOF
		}
		return fail(err)
	}
	// One allocation: the batch, its tensors, their offsets tensors, sample
	// ids, pad flags.
	nt := uintptr(len(b.Tensors))
	offT := align8(unsafe.Sizeof(C.gl_batch{}))
	offO := offT + align8(nt*unsafe.Sizeof(C.gl_tensor{}))
	offIDs := offO + align8(nt*unsafe.Sizeof(C.gl_tensor{}))
	offFlags := offIDs + uintptr(b.Count)*8
	total := offFlags + uintptr(b.Count) + 1
	mem := C.calloc(1, C.size_t(total))
	cb := (*C.gl_batch)(mem)
	cb.step = C.int64_t(b.Step)
	cb.count = C.int32_t(b.Count)
	cb.pads = C.int32_t(b.Pads)
	cb.num_tensors = C.int32_t(nt)
	ts := unsafe.Slice((*C.gl_tensor)(unsafe.Add(mem, offT)), nt)
	offs := unsafe.Slice((*C.gl_tensor)(unsafe.Add(mem, offO)), nt)
	ids := unsafe.Slice((*C.uint64_t)(unsafe.Add(mem, offIDs)), b.Count)
	flags := unsafe.Slice((*C.uint8_t)(unsafe.Add(mem, offFlags)), b.Count)
	cb.tensors = &ts[0]
	cb.offsets = &offs[0]
	cb.sample_ids = (*C.uint64_t)(unsafe.Add(mem, offIDs))
	cb.pad_flags = (*C.uint8_t)(unsafe.Add(mem, offFlags))
	for i, id := range b.SampleIDs {
		ids[i] = C.uint64_t(id)
	}
	for i, f := range b.PadFlags() {
		if f {
			flags[i] = 1
		}
	}
	for i := range b.Tensors {
		t := &b.Tensors[i]
		describe(&ts[i], t, cl.names[i], b.Device)
		if t.Jagged {
			ts[i].kind = C.GL_TENSOR_JAGGED
			// The offsets tensor is named like its values; offs[i] of a fixed
			// tensor stays zero (data NULL, ndim 0).
			describe(&offs[i], t.Offsets, cl.names[i], b.Device)
		}
	}
	mu.Lock()
	cl.batches[cb] = b
	mu.Unlock()
	*out = cb
	return C.GL_OK
}

// describe fills ct (zeroed) with tensor t of a batch on device (-1:
// host), named name (C memory).
func describe(ct *C.gl_tensor, t *gpuload.Tensor, name *C.char, device int) {
	ct.name = name
	ct.dtype = C.uint16_t(t.DType)
	c, bits, lanes := gpuload.DLPackType(t.DType)
	ct.dl_code, ct.dl_bits, ct.dl_lanes = C.uint8_t(c), C.uint8_t(bits), C.uint16_t(lanes)
	ct.ndim = C.int32_t(len(t.Shape))
	for j := range t.Shape {
		ct.shape[j] = C.int64_t(t.Shape[j])
		ct.strides[j] = C.int64_t(t.Strides[j])
	}
	// A host ring buffer, the mapped shard or a device address: never Go
	// memory. Reinterpret the integer without a uintptr conversion.
	ct.data = *(*unsafe.Pointer)(unsafe.Pointer(&t.Ptr))
	ct.nbytes = C.uint64_t(t.Size())
	if device >= 0 {
		ct.device_type, ct.device_id = C.GL_DL_CUDA, C.int32_t(device)
	} else {
		ct.device_type, ct.device_id = C.GL_DL_CPU, 0
	}
}

//export gl_release
func gl_release(h *C.gl_loader, cb *C.gl_batch) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if cb == nil {
		return fail(errNull)
	}
	mu.Lock()
	b := cl.batches[cb]
	delete(cl.batches, cb)
	mu.Unlock()
	if b == nil {
		return C.GL_OK // already released
	}
	b.Release()
	C.free(unsafe.Pointer(cb))
	return C.GL_OK
}

//export gl_seek
func gl_seek(h *C.gl_loader, step C.int64_t) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if err := cl.l.Seek(int(step)); err != nil {
		return fail(err)
	}
	return C.GL_OK
}

//export gl_steps
func gl_steps(h *C.gl_loader) C.int64_t {
	cl, rc := lookup(h)
	if cl == nil {
		return C.int64_t(rc)
	}
	defer cl.op.Unlock()
	return C.int64_t(cl.l.Steps())
}

//export gl_ring
func gl_ring(h *C.gl_loader) C.int64_t {
	cl, rc := lookup(h)
	if cl == nil {
		return C.int64_t(rc)
	}
	defer cl.op.Unlock()
	return C.int64_t(cl.l.Ring())
}

//export gl_copy_to_host
func gl_copy_to_host(h *C.gl_loader, ct *C.gl_tensor, dst unsafe.Pointer, n C.size_t) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if ct == nil || dst == nil {
		return fail(errNull)
	}
	t := gpuload.Tensor{DType: shardfmt.DType(ct.dtype), Ptr: uintptr(ct.data), Name: C.GoString(ct.name)}
	for j := 0; j < int(ct.ndim) && j < C.GL_MAX_DIMS; j++ {
		t.Shape = append(t.Shape, int64(ct.shape[j]))
	}
	if ct.device_type == C.GL_DL_CPU {
		t.Bytes = unsafe.Slice((*byte)(ct.data), int(ct.nbytes))
	}
	if err := cl.l.CopyToHost(unsafe.Slice((*byte)(dst), int(n)), &t); err != nil {
		return fail(err)
	}
	return C.GL_OK
}

//export gl_close
func gl_close(h *C.gl_loader) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	cl.closed = true
	mu.Lock()
	delete(loaders, h)
	mu.Unlock()
	err := cl.l.Close()
	for cb := range cl.batches {
		C.free(unsafe.Pointer(cb))
	}
	for _, s := range cl.names {
		C.free(unsafe.Pointer(s))
	}
	for _, s := range cl.fps {
		C.free(unsafe.Pointer(s))
	}
	C.free(unsafe.Pointer(h))
	if err != nil {
		return fail(err)
	}
	return C.GL_OK
}

//export gl_last_error
func gl_last_error() *C.char {
	mu.Lock()
	defer mu.Unlock()
	if lastErr == nil {
		lastErr = C.CString("")
	}
	return lastErr
}

//export gl_get_info
func gl_get_info(h *C.gl_loader, out *C.gl_info) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if out == nil {
		return fail(errNull)
	}
	i := cl.info
	out.world_size, out.epochs, out.workers = C.int64_t(i.WorldSize), C.int64_t(i.Epochs), C.int64_t(i.Workers)
	out.global_batch, out.steps_per_epoch = C.int64_t(i.GlobalBatch), C.int64_t(i.StepsPerEpoch)
	out.batch_size, out.num_tensors = C.int64_t(cl.l.Geometry().BatchSize), C.int64_t(len(cl.names))
	out.fingerprint, out.order_fingerprint = cl.fps[0], cl.fps[1]
	return C.GL_OK
}

//export gl_tensor_info
func gl_tensor_info(h *C.gl_loader, i C.int, out *C.gl_tensor) C.int {
	cl, rc := lookup(h)
	if cl == nil {
		return rc
	}
	defer cl.op.Unlock()
	if out == nil {
		return fail(errNull)
	}
	ts := cl.l.Tensors()
	if i < 0 || int(i) >= len(ts) {
		return fail(fmt.Errorf("%w: tensor %d outside [0, %d)", gpuload.ErrInvalid, int(i), len(ts)))
	}
	t := ts[i]
	*out = C.gl_tensor{}
	out.name = cl.names[i]
	out.dtype = C.uint16_t(t.DType)
	c, bits, lanes := gpuload.DLPackType(t.DType)
	out.dl_code, out.dl_bits, out.dl_lanes = C.uint8_t(c), C.uint8_t(bits), C.uint16_t(lanes)
	// A jagged tensor's values count varies by batch: shape[0] is -1 and
	// nbytes 0.
	first := int64(cl.l.Geometry().BatchSize)
	if t.Jagged {
		out.kind = C.GL_TENSOR_JAGGED
		first = -1
	}
	shape := append([]int64{first}, make([]int64, len(t.Shape))...)
	for j, d := range t.Shape {
		shape[j+1] = int64(d)
	}
	if len(shape) > C.GL_MAX_DIMS {
		return fail(fmt.Errorf("%w: tensor %s has %d dimensions, more than %d", gpuload.ErrInvalid, t.Name, len(shape), C.GL_MAX_DIMS))
	}
	out.ndim = C.int32_t(len(shape))
	n, stride := int64(t.DType.Size()), int64(1)
	for j := len(shape) - 1; j >= 0; j-- {
		out.shape[j] = C.int64_t(shape[j])
		out.strides[j] = C.int64_t(stride)
		stride *= shape[j]
	}
	out.nbytes = C.uint64_t(max(0, n*stride))
	out.device_type = C.GL_DL_CPU
	return C.GL_OK
}

//export gl_abi_version
func gl_abi_version() C.int { return C.GL_ABI_VERSION }
