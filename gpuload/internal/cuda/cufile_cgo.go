//go:build cgo

package cuda

/*
#include <stdlib.h>
#include "cufile_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

var (
	cufileMu     sync.Mutex
	cufileLoaded bool
)

// LoadCuFile opens the cuFile library ($PREP_LIBCUFILE, else
// libcufile.so.0 or libcufile.so) and resolves its entry points, once per
// process: after a success it returns nil at once, after a failure it tries
// again (a cheap dlopen), so the environment may change in between. It
// returns an error wrapping ErrGDSUnavailable when the library is absent or
// lacks a symbol. Nothing else in this package needs it.
func LoadCuFile() error {
	cufileMu.Lock()
	defer cufileMu.Unlock()
	if cufileLoaded {
		return nil
	}
	path := os.Getenv(EnvCuFile)
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [maxLoaderMessageBytes]C.char
	if C.gl_cufile_load(cpath, &buf[0], C.size_t(len(buf))) != 0 {
		return fmt.Errorf("%w: %s", ErrGDSUnavailable, C.GoString(&buf[0]))
	}
	cufileLoaded = true
	return nil
}

func fileCheck(op string, e C.gl_cufile_error) error {
	if e.err == 0 && e.cu_err == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrGDSUnavailable, &FileError{Op: op, Status: int(e.err), Result: Result(e.cu_err)})
}

// FileDriverOpen opens the cuFile driver (cuFileDriverOpen). LoadCuFile
// must have succeeded. Errors wrap ErrGDSUnavailable and a *FileError.
func (*Current) FileDriverOpen() error {
	if err := LoadCuFile(); err != nil {
		return err
	}
	return fileCheck("cuFileDriverOpen", C.gl_cuFileDriverOpen())
}

// FileDriverClose closes the cuFile driver (cuFileDriverClose_v2, or
// cuFileDriverClose in older libraries).
func (*Current) FileDriverClose() error {
	return fileCheck("cuFileDriverClose", C.gl_cuFileDriverClose())
}

// FileHandleRegister registers fd (opened with O_DIRECT) with cuFile
// (cuFileHandleRegister). Errors wrap ErrGDSUnavailable and a *FileError.
func (*Current) FileHandleRegister(fd int) (FileHandle, error) {
	var h unsafe.Pointer
	if err := fileCheck("cuFileHandleRegister", C.gl_cuFileHandleRegister(&h, C.int(fd))); err != nil {
		return FileHandle{}, err
	}
	return FileHandle{h}, nil
}

// FileHandleDeregister undoes FileHandleRegister (cuFileHandleDeregister).
func (*Current) FileHandleDeregister(h FileHandle) {
	C.gl_cuFileHandleDeregister(h.p)
}

// FileRead reads n bytes at file offset off into device memory at dst
// (cuFileRead, synchronous: the bytes are on the device when it returns)
// and returns the bytes read, fewer only at the end of the file. Errors are
// *FileError (a negative return: errno, or the cuFile status).
func (*Current) FileRead(h FileHandle, dst DevicePtr, n uint64, off int64) (int, error) {
	r, err := C.gl_cuFileRead(h.p, C.ulonglong(dst), C.size_t(n), C.off_t(off), 0)
	if r < 0 {
		e := &FileError{Op: "cuFileRead"}
		if en, ok := err.(syscall.Errno); r == -1 && ok && en != 0 {
			e.Errno = int(en)
		} else {
			e.Status = int(-r)
		}
		return 0, e
	}
	return int(r), nil
}
