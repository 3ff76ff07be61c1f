// fakecuda: a stand-in for libcuda.so.1 used by gpuload's tests on machines
// without a GPU. It implements the driver entry points gpuload loads, over
// host memory, with the behaviour the CUDA backend depends on:
//
//   - "device" memory is malloc'ed; CUdeviceptr is its address;
//   - a context must be current on the calling thread (thread-local, like the
//     real driver), else CUDA_ERROR_INVALID_CONTEXT;
//   - async copies must read from pinned memory (cuMemHostAlloc or a
//     registered range) and into device memory, else CUDA_ERROR_INVALID_VALUE;
//   - registering a range pins its pages as they are then: the fake keeps a
//     copy of them, and copies from the range read that copy, so a file
//     mapping cut short after registration is still copied (as the driver's
//     DMA reads the pages it pinned) instead of faulting (SIGBUS) on the
//     stream's thread; writes to the range after registration are not seen
//     by the copies, where the driver's would be;
//   - each stream has a worker thread that performs queued copies in order,
//     after FAKECUDA_DELAY_US microseconds each, so a caller that reuses a
//     source buffer before its event completes reads back wrong bytes;
//   - FAKECUDA_FAIL_AT=<entry point>:<n>[:<code>] makes the n-th call (from 1,
//     counted since the last cuInit) of that entry point return <code>
//     (default 2, CUDA_ERROR_OUT_OF_MEMORY);
//   - FAKECUDA_DEVICES sets the device count (default 1);
//   - fakecuda_outstanding() counts live allocations, registrations, streams,
//     events and primary-context retains, so tests can assert no leaks;
//   - fakecuda_threads_current() counts the live threads that have a context
//     current, so tests can assert that no thread is left with it;
//   - fakecuda_htod_bytes() sums the bytes of every cuMemcpyHtoDAsync queued
//     since the library was loaded, so tests can assert how much was copied.
//
// Environment variables are read at every cuInit.
//
// Build: gcc -shared -fPIC -O1 -o libfakecuda.so fakecuda.c -lpthread

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
	SUCCESS = 0,
	INVALID_VALUE = 1,
	OUT_OF_MEMORY = 2,
	NOT_INITIALIZED = 3,
	NO_DEVICE = 100,
	INVALID_DEVICE = 101,
	INVALID_CONTEXT = 201,
	INVALID_HANDLE = 400,
	NOT_READY = 600,
	HOST_MEMORY_ALREADY_REGISTERED = 712,
	HOST_MEMORY_NOT_REGISTERED = 713,
};

struct ctx { int dev; int refs; };

// A range of memory known to the fake: device allocation, pinned host
// allocation or registered host range.
enum kind { DEVICE = 1, HOSTALLOC = 2, REGISTERED = 3 };
struct range {
	char *p; size_t n; int kind;
	char *pinned; // REGISTERED: the range's bytes at registration
	struct range *next;
};

struct op { CUdeviceptr dst; const void *src; size_t n; struct op *next; };

struct stream {
	pthread_t thr;
	struct op *head, *tail;
	unsigned long long queued, done;
	int stop;
};

struct event { struct stream *s; unsigned long long target; int recorded; };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int initialized;
static int ndevices = 1;
static long delay_us;
static char fail_name[128];
static long fail_n;
static int fail_code = OUT_OF_MEMORY;
static long calls_of_fail_name;
static struct ctx ctxs[16];
static struct range *ranges;
static int outstanding;
static __thread struct ctx *current;
static int threads_current;               // live threads with current != NULL
static pthread_key_t current_key;         // non-NULL on those threads
static pthread_once_t current_once = PTHREAD_ONCE_INIT;

// current_exit runs when a thread with a context current exits.
static void current_exit(void *v) {
	(void)v;
	pthread_mutex_lock(&mu);
	threads_current--;
	pthread_mutex_unlock(&mu);
}

static void current_init(void) { pthread_key_create(&current_key, current_exit); }

int fakecuda_threads_current(void) {
	pthread_mutex_lock(&mu);
	int n = threads_current;
	pthread_mutex_unlock(&mu);
	return n;
}

static unsigned long long htod_bytes; // guarded by mu

unsigned long long fakecuda_htod_bytes(void) {
	pthread_mutex_lock(&mu);
	unsigned long long n = htod_bytes;
	pthread_mutex_unlock(&mu);
	return n;
}

int fakecuda_outstanding(void) {
	pthread_mutex_lock(&mu);
	int n = outstanding;
	pthread_mutex_unlock(&mu);
	return n;
}

// inject returns the configured failure code when this is the failing call.
static CUresult inject(const char *name) {
	CUresult r = SUCCESS;
	pthread_mutex_lock(&mu);
	if (fail_name[0] && strcmp(fail_name, name) == 0) {
		calls_of_fail_name++;
		if (calls_of_fail_name == fail_n) r = fail_code;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

#define ENTER(name)                                   \
	do {                                          \
		CUresult r_ = inject(name);           \
		if (r_ != SUCCESS) return r_;         \
	} while (0)

#define NEED_CTX()                                    \
	do {                                          \
		if (!initialized) return NOT_INITIALIZED; \
		if (current == NULL) return INVALID_CONTEXT; \
	} while (0)

// find returns the range of the given kind set (bitmask of 1<<kind) that
// contains [p, p+n), or NULL. Caller holds mu.
static struct range *find(const void *p, size_t n, int kinds) {
	for (struct range *r = ranges; r; r = r->next) {
		if (!(kinds & (1 << r->kind))) continue;
		if ((const char *)p >= r->p && (const char *)p + n <= r->p + r->n) return r;
	}
	return NULL;
}

static void add_range(void *p, size_t n, int kind) {
	struct range *r = calloc(1, sizeof *r);
	r->p = p; r->n = n; r->kind = kind; r->next = ranges; ranges = r;
	outstanding++;
}

// del_range removes the range starting exactly at p of the given kind.
static int del_range(const void *p, int kind) {
	for (struct range **rp = &ranges; *rp; rp = &(*rp)->next) {
		if ((*rp)->p == p && (*rp)->kind == kind) {
			struct range *r = *rp;
			*rp = r->next;
			free(r->pinned);
			free(r);
			outstanding--;
			return 1;
		}
	}
	return 0;
}

CUresult cuInit(unsigned int flags) {
	ENTER("cuInit");
	pthread_mutex_lock(&mu);
	const char *v = getenv("FAKECUDA_DEVICES");
	ndevices = v ? atoi(v) : 1;
	if (ndevices > 16) ndevices = 16;
	v = getenv("FAKECUDA_DELAY_US");
	delay_us = v ? atol(v) : 0;
	fail_name[0] = 0; fail_n = 0; fail_code = OUT_OF_MEMORY; calls_of_fail_name = 0;
	v = getenv("FAKECUDA_FAIL_AT");
	if (v && *v) {
		char buf[sizeof fail_name];
		snprintf(buf, sizeof buf, "%s", v);
		char *c1 = strchr(buf, ':');
		if (c1) {
			*c1 = 0;
			fail_n = atol(c1 + 1);
			char *c2 = strchr(c1 + 1, ':');
			if (c2) fail_code = atoi(c2 + 1);
		}
		snprintf(fail_name, sizeof fail_name, "%s", buf);
	}
	initialized = 1;
	pthread_mutex_unlock(&mu);
	(void)flags;
	return ndevices > 0 ? SUCCESS : NO_DEVICE;
}

CUresult cuDriverGetVersion(int *v) { *v = 12040; return SUCCESS; }

CUresult cuDeviceGetCount(int *n) {
	if (!initialized) return NOT_INITIALIZED;
	*n = ndevices;
	return SUCCESS;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER("cuDeviceGet");
	if (!initialized) return NOT_INITIALIZED;
	if (ordinal < 0 || ordinal >= ndevices) return INVALID_DEVICE;
	*d = ordinal;
	return SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	if (d < 0 || d >= ndevices) return INVALID_DEVICE;
	snprintf(name, len, "fakecuda device %d", d);
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, CUdevice d) {
	ENTER("cuDevicePrimaryCtxRetain");
	if (!initialized) return NOT_INITIALIZED;
	if (d < 0 || d >= ndevices) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	ctxs[d].dev = d;
	ctxs[d].refs++;
	outstanding++;
	pthread_mutex_unlock(&mu);
	*ctx = &ctxs[d];
	return SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	if (d < 0 || d >= ndevices) return INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	if (ctxs[d].refs == 0) { pthread_mutex_unlock(&mu); return INVALID_CONTEXT; }
	ctxs[d].refs--;
	outstanding--;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuCtxSetCurrent(void *ctx) {
	ENTER("cuCtxSetCurrent");
	pthread_once(&current_once, current_init);
	pthread_mutex_lock(&mu);
	if (current == NULL && ctx != NULL) {
		threads_current++;
		pthread_setspecific(current_key, (void *)1);
	} else if (current != NULL && ctx == NULL) {
		threads_current--;
		pthread_setspecific(current_key, NULL);
	}
	pthread_mutex_unlock(&mu);
	current = ctx;
	return SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	ENTER("cuMemAlloc_v2");
	NEED_CTX();
	if (n == 0) return INVALID_VALUE;
	void *m = malloc(n);
	if (!m) return OUT_OF_MEMORY;
	memset(m, 0xA5, n); // device memory is not zeroed
	pthread_mutex_lock(&mu);
	add_range(m, n, DEVICE);
	pthread_mutex_unlock(&mu);
	*p = (CUdeviceptr)(uintptr_t)m;
	return SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	ENTER("cuMemFree_v2");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	int ok = del_range((void *)(uintptr_t)p, DEVICE);
	pthread_mutex_unlock(&mu);
	if (!ok) return INVALID_VALUE;
	free((void *)(uintptr_t)p);
	return SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
	ENTER("cuMemHostAlloc");
	NEED_CTX();
	void *m = NULL;
	if (n == 0 || posix_memalign(&m, 4096, n) != 0) return OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	add_range(m, n, HOSTALLOC);
	pthread_mutex_unlock(&mu);
	*pp = m;
	(void)flags;
	return SUCCESS;
}

CUresult cuMemFreeHost(void *p) {
	ENTER("cuMemFreeHost");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	int ok = del_range(p, HOSTALLOC);
	pthread_mutex_unlock(&mu);
	if (!ok) return INVALID_VALUE;
	free(p);
	return SUCCESS;
}

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
	ENTER("cuMemHostRegister_v2");
	NEED_CTX();
	if (n == 0 || p == NULL) return INVALID_VALUE;
	pthread_mutex_lock(&mu);
	if (find(p, 1, 1 << REGISTERED)) { pthread_mutex_unlock(&mu); return HOST_MEMORY_ALREADY_REGISTERED; }
	pthread_mutex_unlock(&mu);
	// Pin: read every page now, as the driver does (outside mu: a range
	// that is not readable faults here, in the caller, like the driver's
	// page pinning fails for it).
	char *pinned = malloc(n);
	if (!pinned) return OUT_OF_MEMORY;
	memcpy(pinned, p, n);
	pthread_mutex_lock(&mu);
	if (find(p, 1, 1 << REGISTERED)) {
		pthread_mutex_unlock(&mu);
		free(pinned);
		return HOST_MEMORY_ALREADY_REGISTERED;
	}
	add_range(p, n, REGISTERED);
	ranges->pinned = pinned;
	pthread_mutex_unlock(&mu);
	(void)flags;
	return SUCCESS;
}

CUresult cuMemHostUnregister(void *p) {
	ENTER("cuMemHostUnregister");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	int ok = del_range(p, REGISTERED);
	pthread_mutex_unlock(&mu);
	return ok ? SUCCESS : HOST_MEMORY_NOT_REGISTERED;
}

// check_copy validates a host-to-device copy. Caller holds mu.
static CUresult check_copy(CUdeviceptr dst, const void *src, size_t n, int need_pinned) {
	if (!find((void *)(uintptr_t)dst, n, 1 << DEVICE)) return INVALID_VALUE;
	if (need_pinned && !find(src, n, (1 << HOSTALLOC) | (1 << REGISTERED))) return INVALID_VALUE;
	return SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	ENTER("cuMemcpyHtoD_v2");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	CUresult r = check_copy(dst, src, n, 0);
	pthread_mutex_unlock(&mu);
	if (r) return r;
	memcpy((void *)(uintptr_t)dst, src, n);
	return SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoH_v2");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	struct range *r = find((void *)(uintptr_t)src, n, 1 << DEVICE);
	pthread_mutex_unlock(&mu);
	if (!r) return INVALID_VALUE;
	memcpy(dst, (void *)(uintptr_t)src, n);
	return SUCCESS;
}

static void *stream_worker(void *arg) {
	struct stream *s = arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!s->head && !s->stop) pthread_cond_wait(&cv, &mu);
		if (!s->head && s->stop) break;
		struct op *o = s->head;
		pthread_mutex_unlock(&mu);
		if (o->n) {
			if (delay_us > 0) usleep(delay_us);
			memcpy((void *)(uintptr_t)o->dst, o->src, o->n);
		}
		pthread_mutex_lock(&mu);
		s->head = o->next;
		if (!s->head) s->tail = NULL;
		s->done++;
		free(o);
		pthread_cond_broadcast(&cv);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

// enqueue appends an op (n == 0: a marker) and returns its sequence number.
// Caller holds mu.
static unsigned long long enqueue(struct stream *s, CUdeviceptr dst, const void *src, size_t n) {
	struct op *o = calloc(1, sizeof *o);
	o->dst = dst; o->src = src; o->n = n;
	if (s->tail) s->tail->next = o; else s->head = o;
	s->tail = o;
	s->queued++;
	pthread_cond_broadcast(&cv);
	return s->queued;
}

CUresult cuStreamCreate(struct stream **ps, unsigned int flags) {
	ENTER("cuStreamCreate");
	NEED_CTX();
	struct stream *s = calloc(1, sizeof *s);
	if (pthread_create(&s->thr, NULL, stream_worker, s) != 0) { free(s); return OUT_OF_MEMORY; }
	pthread_mutex_lock(&mu);
	outstanding++;
	pthread_mutex_unlock(&mu);
	*ps = s;
	(void)flags;
	return SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, struct stream *s) {
	ENTER("cuMemcpyHtoDAsync_v2");
	NEED_CTX();
	if (s == NULL) return INVALID_HANDLE;
	pthread_mutex_lock(&mu);
	CUresult r = check_copy(dst, src, n, 1);
	if (r == SUCCESS && n > 0) {
		// A registered range is copied from its pinned pages.
		struct range *reg = find(src, n, 1 << REGISTERED);
		if (reg) src = reg->pinned + ((const char *)src - reg->p);
		enqueue(s, dst, src, n);
		htod_bytes += n;
	}
	pthread_mutex_unlock(&mu);
	return r;
}

CUresult cuStreamSynchronize(struct stream *s) {
	ENTER("cuStreamSynchronize");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	while (s->done < s->queued) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuStreamDestroy_v2(struct stream *s) {
	ENTER("cuStreamDestroy_v2");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	s->stop = 1;
	pthread_cond_broadcast(&cv);
	outstanding--;
	pthread_mutex_unlock(&mu);
	pthread_join(s->thr, NULL); // like the driver: queued work still completes
	free(s);
	return SUCCESS;
}

CUresult cuEventCreate(struct event **pe, unsigned int flags) {
	ENTER("cuEventCreate");
	NEED_CTX();
	struct event *e = calloc(1, sizeof *e);
	pthread_mutex_lock(&mu);
	outstanding++;
	pthread_mutex_unlock(&mu);
	*pe = e;
	(void)flags;
	return SUCCESS;
}

CUresult cuEventRecord(struct event *e, struct stream *s) {
	ENTER("cuEventRecord");
	NEED_CTX();
	if (e == NULL || s == NULL) return INVALID_HANDLE;
	pthread_mutex_lock(&mu);
	e->s = s;
	e->target = s->queued; // completes when everything queued so far is done
	e->recorded = 1;
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuEventSynchronize(struct event *e) {
	ENTER("cuEventSynchronize");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	while (e->recorded && e->s->done < e->target) pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return SUCCESS;
}

CUresult cuEventQuery(struct event *e) {
	ENTER("cuEventQuery");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	int ready = !e->recorded || e->s->done >= e->target;
	pthread_mutex_unlock(&mu);
	return ready ? SUCCESS : NOT_READY;
}

CUresult cuEventDestroy_v2(struct event *e) {
	ENTER("cuEventDestroy_v2");
	NEED_CTX();
	pthread_mutex_lock(&mu);
	outstanding--;
	pthread_mutex_unlock(&mu);
	free(e);
	return SUCCESS;
}

static const struct { int code; const char *name, *msg; } errs[] = {
	{SUCCESS, "CUDA_SUCCESS", "no error"},
	{INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	{999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

CUresult cuGetErrorName(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].code == r) { *s = errs[i].name; return SUCCESS; }
	*s = NULL;
	return INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
		if (errs[i].code == r) { *s = errs[i].msg; return SUCCESS; }
	*s = NULL;
	return INVALID_VALUE;
}
