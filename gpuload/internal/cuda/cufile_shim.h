// Minimal declarations of the GPUDirect Storage (cuFile) API used by
// gpuload, loaded at run time with dlopen so that nothing from the CUDA SDK
// or GDS is needed to build, and a machine without libcufile.so runs
// everything else.
//
// The ABI is the one of NVIDIA's cufile.h: CUfileError_t is a struct of two
// ints (the cuFile status, 0 = CU_FILE_SUCCESS, and a CUresult) returned by
// value; CUfileDescr_t holds the handle type (1 = CU_FILE_HANDLE_TYPE_OPAQUE_FD),
// a union of an fd and a pointer, and a file-system operations table
// (NULL); cuFileRead returns the bytes read, or a negative value (-1 with
// errno, or the negated cuFile status).
#ifndef GPULOAD_CUFILE_SHIM_H
#define GPULOAD_CUFILE_SHIM_H

#include <stddef.h>
#include <sys/types.h>

typedef struct { int err; int cu_err; } gl_cufile_error;

// gl_cufile_load opens the cuFile library at path (NULL or "": libcufile.so.0,
// then libcufile.so) and resolves its entry points. It returns 0 on success,
// or -1 with a message in err (at most errlen bytes). Calling it again after
// a success is a no-op.
int gl_cufile_load(const char *path, char *err, size_t errlen);

gl_cufile_error gl_cuFileDriverOpen(void);
gl_cufile_error gl_cuFileDriverClose(void);
// gl_cuFileHandleRegister registers the O_DIRECT descriptor fd.
gl_cufile_error gl_cuFileHandleRegister(void **handle, int fd);
void gl_cuFileHandleDeregister(void *handle);
ssize_t gl_cuFileRead(void *handle, unsigned long long dev, size_t size, off_t file_off, off_t dev_off);

#endif
