//go:build cgo

// Run-time loader for the CUDA driver API: dlopen + dlsym of the entry points
// declared in cuda_shim.h, and one forwarding function per entry point.

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cuda_shim.h"

static void *lib;

// CUDA_FUNCS lists each driver entry point once: X(name, return type,
// parameter types, exported symbol, fallback symbol or NULL). The _v2 symbols
// are the ones the driver's headers bind the plain names to.
#define CUDA_FUNCS(X) \
	X(cuInit, CUresult, (unsigned int), "cuInit", NULL) \
	X(cuDriverGetVersion, CUresult, (int *), "cuDriverGetVersion", NULL) \
	X(cuDeviceGetCount, CUresult, (int *), "cuDeviceGetCount", NULL) \
	X(cuDeviceGet, CUresult, (CUdevice *, int), "cuDeviceGet", NULL) \
	X(cuDeviceGetName, CUresult, (char *, int, CUdevice), "cuDeviceGetName", NULL) \
	X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice), "cuDevicePrimaryCtxRetain", NULL) \
	X(cuDevicePrimaryCtxRelease, CUresult, (CUdevice), "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") \
	X(cuCtxSetCurrent, CUresult, (CUcontext), "cuCtxSetCurrent", NULL) \
	X(cuMemAlloc, CUresult, (CUdeviceptr *, size_t), "cuMemAlloc_v2", NULL) \
	X(cuMemFree, CUresult, (CUdeviceptr), "cuMemFree_v2", NULL) \
	X(cuMemHostAlloc, CUresult, (void **, size_t, unsigned int), "cuMemHostAlloc", NULL) \
	X(cuMemFreeHost, CUresult, (void *), "cuMemFreeHost", NULL) \
	X(cuMemHostRegister, CUresult, (void *, size_t, unsigned int), "cuMemHostRegister_v2", "cuMemHostRegister") \
	X(cuMemHostUnregister, CUresult, (void *), "cuMemHostUnregister", NULL) \
	X(cuMemcpyHtoD, CUresult, (CUdeviceptr, const void *, size_t), "cuMemcpyHtoD_v2", NULL) \
	X(cuMemcpyHtoDAsync, CUresult, (CUdeviceptr, const void *, size_t, CUstream), "cuMemcpyHtoDAsync_v2", NULL) \
	X(cuMemcpyDtoH, CUresult, (void *, CUdeviceptr, size_t), "cuMemcpyDtoH_v2", NULL) \
	X(cuStreamCreate, CUresult, (CUstream *, unsigned int), "cuStreamCreate", NULL) \
	X(cuStreamSynchronize, CUresult, (CUstream), "cuStreamSynchronize", NULL) \
	X(cuStreamDestroy, CUresult, (CUstream), "cuStreamDestroy_v2", "cuStreamDestroy") \
	X(cuEventCreate, CUresult, (CUevent *, unsigned int), "cuEventCreate", NULL) \
	X(cuEventRecord, CUresult, (CUevent, CUstream), "cuEventRecord", NULL) \
	X(cuEventSynchronize, CUresult, (CUevent), "cuEventSynchronize", NULL) \
	X(cuEventQuery, CUresult, (CUevent), "cuEventQuery", NULL) \
	X(cuEventDestroy, CUresult, (CUevent), "cuEventDestroy_v2", "cuEventDestroy") \
	X(cuGetErrorName, CUresult, (CUresult, const char **), "cuGetErrorName", NULL) \
	X(cuGetErrorString, CUresult, (CUresult, const char **), "cuGetErrorString", NULL)

#define FN(name, ret, params, a, b) static ret (*p_##name) params;
CUDA_FUNCS(FN)
#undef FN

static int (*p_fake_outstanding)(void);
static int (*p_fake_threads_current)(void);
static unsigned long long (*p_fake_htod_bytes)(void);

// sym resolves the first of up to two names that the library exports.
static void *sym(const char *a, const char *b) {
	void *p = dlsym(lib, a);
	if (p == NULL && b != NULL) p = dlsym(lib, b);
	return p;
}

int gl_cuda_load(const char *path, char *err, size_t errlen) {
	if (lib != NULL) return 0;
	if (path == NULL || path[0] == 0) path = "libcuda.so.1";
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	lib = h;
#define LOAD(name, ret, params, a, b)                                           \
	p_##name = sym(a, b);                                                    \
	if (p_##name == NULL) {                                                  \
		snprintf(err, errlen, "%s: missing symbol %s", path, a);         \
		dlclose(h);                                                      \
		lib = NULL;                                                      \
		return -1;                                                       \
	}
	CUDA_FUNCS(LOAD)
#undef LOAD
	p_fake_outstanding = (int (*)(void))dlsym(lib, "fakecuda_outstanding");
	p_fake_threads_current = (int (*)(void))dlsym(lib, "fakecuda_threads_current");
	p_fake_htod_bytes = (unsigned long long (*)(void))dlsym(lib, "fakecuda_htod_bytes");
	return 0;
}

int gl_fake_outstanding(void) { return p_fake_outstanding ? p_fake_outstanding() : -1; }
int gl_fake_threads_current(void) { return p_fake_threads_current ? p_fake_threads_current() : -1; }
long long gl_fake_htod_bytes(void) { return p_fake_htod_bytes ? (long long)p_fake_htod_bytes() : -1; }

CUresult gl_cuInit(unsigned int f) { return p_cuInit(f); }
CUresult gl_cuDriverGetVersion(int *v) { return p_cuDriverGetVersion(v); }
CUresult gl_cuDeviceGetCount(int *c) { return p_cuDeviceGetCount(c); }
CUresult gl_cuDeviceGet(CUdevice *d, int o) { return p_cuDeviceGet(d, o); }
CUresult gl_cuDeviceGetName(char *n, int l, CUdevice d) { return p_cuDeviceGetName(n, l, d); }
CUresult gl_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { return p_cuDevicePrimaryCtxRetain(c, d); }
CUresult gl_cuDevicePrimaryCtxRelease(CUdevice d) { return p_cuDevicePrimaryCtxRelease(d); }
CUresult gl_cuCtxSetCurrent(CUcontext c) { return p_cuCtxSetCurrent(c); }
CUresult gl_cuMemAlloc(CUdeviceptr *p, size_t n) { return p_cuMemAlloc(p, n); }
CUresult gl_cuMemFree(CUdeviceptr p) { return p_cuMemFree(p); }
CUresult gl_cuMemHostAlloc(void **pp, size_t n, unsigned int f) { return p_cuMemHostAlloc(pp, n, f); }
CUresult gl_cuMemFreeHost(void *p) { return p_cuMemFreeHost(p); }
CUresult gl_cuMemHostRegister(void *p, size_t n, unsigned int f) { return p_cuMemHostRegister(p, n, f); }
CUresult gl_cuMemHostUnregister(void *p) { return p_cuMemHostUnregister(p); }
CUresult gl_cuMemcpyHtoD(CUdeviceptr d, const void *s, size_t n) { return p_cuMemcpyHtoD(d, s, n); }
CUresult gl_cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n, CUstream st) { return p_cuMemcpyHtoDAsync(d, s, n, st); }
CUresult gl_cuMemcpyDtoH(void *d, CUdeviceptr s, size_t n) { return p_cuMemcpyDtoH(d, s, n); }
CUresult gl_cuStreamCreate(CUstream *s, unsigned int f) { return p_cuStreamCreate(s, f); }
CUresult gl_cuStreamSynchronize(CUstream s) { return p_cuStreamSynchronize(s); }
CUresult gl_cuStreamDestroy(CUstream s) { return p_cuStreamDestroy(s); }
CUresult gl_cuEventCreate(CUevent *e, unsigned int f) { return p_cuEventCreate(e, f); }
CUresult gl_cuEventRecord(CUevent e, CUstream s) { return p_cuEventRecord(e, s); }
CUresult gl_cuEventSynchronize(CUevent e) { return p_cuEventSynchronize(e); }
CUresult gl_cuEventQuery(CUevent e) { return p_cuEventQuery(e); }
CUresult gl_cuEventDestroy(CUevent e) { return p_cuEventDestroy(e); }
CUresult gl_cuGetErrorName(CUresult r, const char **s) { return p_cuGetErrorName(r, s); }
CUresult gl_cuGetErrorString(CUresult r, const char **s) { return p_cuGetErrorString(r, s); }
