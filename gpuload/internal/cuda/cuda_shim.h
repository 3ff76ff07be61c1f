// Minimal declarations of the CUDA driver API used by gpuload, loaded at run
// time with dlopen so that nothing from the CUDA SDK is needed to build.
//
// Only the handful of types and entry points gpuload calls are declared here.
// Their ABI is the one documented in NVIDIA's CUDA Driver API reference
// (cuda.h): CUresult is an int enum, handles are opaque pointers, device
// pointers are 64-bit integers. Versioned entry points (the _v2 suffixes) are
// the ones cuda.h maps the plain names to since CUDA 4.0/11.0.
#ifndef GPULOAD_CUDA_SHIM_H
#define GPULOAD_CUDA_SHIM_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef unsigned long long CUdeviceptr;

// gl_cuda_load opens the driver library at path (NULL: "libcuda.so.1") and
// resolves every entry point. It returns 0 on success, or -1 with a message in
// err (at most errlen bytes, NUL-terminated). Calling it again after a success
// is a no-op.
int gl_cuda_load(const char *path, char *err, size_t errlen);

// gl_fake_outstanding returns the fake driver's count of live resources, or
// -1 when the loaded library is not the fake driver (it lacks the symbol).
int gl_fake_outstanding(void);

// gl_fake_threads_current returns the fake driver's count of live threads
// with a context current, or -1 when the loaded library is not the fake
// driver.
int gl_fake_threads_current(void);

// gl_fake_htod_bytes returns the bytes of every host-to-device copy the fake
// driver queued since it was loaded, or -1 when the loaded library is not
// the fake driver.
long long gl_fake_htod_bytes(void);

CUresult gl_cuInit(unsigned int flags);
CUresult gl_cuDriverGetVersion(int *version);
CUresult gl_cuDeviceGetCount(int *count);
CUresult gl_cuDeviceGet(CUdevice *dev, int ordinal);
CUresult gl_cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult gl_cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev);
CUresult gl_cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult gl_cuCtxSetCurrent(CUcontext ctx);
CUresult gl_cuMemAlloc(CUdeviceptr *dptr, size_t bytes);
CUresult gl_cuMemFree(CUdeviceptr dptr);
CUresult gl_cuMemHostAlloc(void **pp, size_t bytes, unsigned int flags);
CUresult gl_cuMemFreeHost(void *p);
CUresult gl_cuMemHostRegister(void *p, size_t bytes, unsigned int flags);
CUresult gl_cuMemHostUnregister(void *p);
CUresult gl_cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t bytes);
CUresult gl_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes, CUstream s);
CUresult gl_cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t bytes);
CUresult gl_cuStreamCreate(CUstream *s, unsigned int flags);
CUresult gl_cuStreamSynchronize(CUstream s);
CUresult gl_cuStreamDestroy(CUstream s);
CUresult gl_cuEventCreate(CUevent *e, unsigned int flags);
CUresult gl_cuEventRecord(CUevent e, CUstream s);
CUresult gl_cuEventSynchronize(CUevent e);
CUresult gl_cuEventQuery(CUevent e);
CUresult gl_cuEventDestroy(CUevent e);
CUresult gl_cuGetErrorName(CUresult r, const char **s);
CUresult gl_cuGetErrorString(CUresult r, const char **s);

#endif
