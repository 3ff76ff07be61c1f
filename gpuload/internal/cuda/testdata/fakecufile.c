// fakecufile: a stand-in for libcufile.so (GPUDirect Storage) used by
// gpuload's tests with the fake CUDA driver, whose "device" memory is host
// memory: cuFileRead reads the file into an aligned bounce buffer (the
// descriptor is opened with O_DIRECT) and copies it to the device address,
// as cuFile's compatibility mode does.
//
//   - FAKECUFILE_FAIL=<entry point>[:<n>] makes the n-th call (default 1) of
//     cuFileDriverOpen, cuFileHandleRegister or cuFileRead fail: the first
//     two with status 5001 (CU_FILE_DRIVER_NOT_INITIALIZED), the read with
//     -1 and errno EIO; calls are counted from the last cuFileDriverOpen,
//     which gpuload calls once per Loader;
//   - fakecufile_outstanding() counts open drivers and registered handles.
//
// Build: gcc -shared -fPIC -O1 -o libfakecufile.so fakecufile.c

#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

typedef struct { int err; int cu_err; } CUfileError_t;
typedef struct {
	int type;
	union { int fd; void *handle; } handle;
	const void *fs_ops;
} CUfileDescr_t;

static int outstanding;
static long calls[3];

static int failing(int which, const char *name) {
	const char *v = getenv("FAKECUFILE_FAIL");
	calls[which]++;
	if (v == NULL) return 0;
	size_t n = strlen(name);
	if (strncmp(v, name, n) != 0 || (v[n] != 0 && v[n] != ':')) return 0;
	long at = v[n] == ':' ? atol(v + n + 1) : 1;
	return calls[which] == at;
}

int fakecufile_outstanding(void) { return outstanding; }

CUfileError_t cuFileDriverOpen(void) {
	CUfileError_t r = {0, 0};
	memset(calls, 0, sizeof calls);
	if (failing(0, "cuFileDriverOpen")) { r.err = 5001; return r; }
	outstanding++;
	return r;
}

CUfileError_t cuFileDriverClose_v2(void) {
	CUfileError_t r = {0, 0};
	outstanding--;
	return r;
}

CUfileError_t cuFileHandleRegister(void **h, CUfileDescr_t *d) {
	CUfileError_t r = {0, 0};
	if (failing(1, "cuFileHandleRegister") || d->type != 1) { r.err = 5001; return r; }
	int *fd = malloc(sizeof *fd);
	*fd = d->handle.fd;
	*h = fd;
	outstanding++;
	return r;
}

void cuFileHandleDeregister(void *h) {
	free(h);
	outstanding--;
}

ssize_t cuFileRead(void *h, void *dev, size_t size, off_t off, off_t dev_off) {
	if (failing(2, "cuFileRead")) { errno = EIO; return -1; }
	void *bounce;
	size_t cap = (size + 4095) & ~(size_t)4095;
	if (posix_memalign(&bounce, 4096, cap) != 0) { errno = ENOMEM; return -1; }
	size_t got = 0;
	while (got < size) {
		ssize_t n = pread(*(int *)h, (char *)bounce + got, cap - got, off + got);
		if (n < 0) { int e = errno; free(bounce); errno = e; return -1; }
		if (n == 0) break;
		got += n;
	}
	if (got > size) got = size;
	memcpy((char *)dev + dev_off, bounce, got);
	free(bounce);
	return got;
}
