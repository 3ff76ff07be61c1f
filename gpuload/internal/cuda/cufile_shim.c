//go:build cgo

// Run-time loader for the cuFile (GPUDirect Storage) API declared in
// cufile_shim.h.

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include "cufile_shim.h"

typedef struct {
	int type;
	union { int fd; void *handle; } handle;
	const void *fs_ops;
} cufile_descr;

static void *cflib;
static gl_cufile_error (*p_open)(void);
static gl_cufile_error (*p_close)(void);
static gl_cufile_error (*p_register)(void **, cufile_descr *);
static void (*p_deregister)(void *);
static ssize_t (*p_read)(void *, void *, size_t, off_t, off_t);

int gl_cufile_load(const char *path, char *err, size_t errlen) {
	if (cflib != NULL) return 0;
	void *h = NULL;
	if (path != NULL && path[0] != 0) {
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	} else {
		path = "libcufile.so.0";
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (h == NULL) {
			path = "libcufile.so";
			h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		}
	}
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return -1;
	}
	p_open = dlsym(h, "cuFileDriverOpen");
	p_close = dlsym(h, "cuFileDriverClose_v2");
	if (p_close == NULL) p_close = dlsym(h, "cuFileDriverClose");
	p_register = dlsym(h, "cuFileHandleRegister");
	p_deregister = dlsym(h, "cuFileHandleDeregister");
	p_read = dlsym(h, "cuFileRead");
	const char *missing = p_open == NULL ? "cuFileDriverOpen" : p_close == NULL ? "cuFileDriverClose" :
		p_register == NULL ? "cuFileHandleRegister" : p_deregister == NULL ? "cuFileHandleDeregister" :
		p_read == NULL ? "cuFileRead" : NULL;
	if (missing != NULL) {
		snprintf(err, errlen, "%s: missing symbol %s", path, missing);
		dlclose(h);
		return -1;
	}
	cflib = h;
	return 0;
}

gl_cufile_error gl_cuFileDriverOpen(void) { return p_open(); }
gl_cufile_error gl_cuFileDriverClose(void) { return p_close(); }

gl_cufile_error gl_cuFileHandleRegister(void **handle, int fd) {
	cufile_descr d;
	memset(&d, 0, sizeof d);
	d.type = 1; // CU_FILE_HANDLE_TYPE_OPAQUE_FD
	d.handle.fd = fd;
	return p_register(handle, &d);
}

void gl_cuFileHandleDeregister(void *handle) { p_deregister(handle); }

ssize_t gl_cuFileRead(void *handle, unsigned long long dev, size_t size, off_t file_off, off_t dev_off) {
	return p_read(handle, (void *)(size_t)dev, size, file_off, dev_off);
}
