package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// EnvCuFile names the environment variable that overrides the path of the
// GPUDirect Storage library (default libcufile.so.0, then libcufile.so).
const EnvCuFile = "PREP_LIBCUFILE"

// ErrGDSUnavailable is returned (wrapped) by LoadCuFile and the File* calls
// when GPUDirect Storage cannot be used: no cgo, the library is absent or
// lacks an entry point, or its driver or a file registration fails.
var ErrGDSUnavailable = errors.New("GPUDirect Storage unavailable")

// FileError is a failed cuFile call: the entry point, the cuFile status
// (CUfileOpError, 5000 and up) and the CUresult it carries (0 if none), or,
// for cuFileRead, the errno of a failed read.
type FileError struct {
	Op     string // e.g. "cuFileHandleRegister"
	Status int    // CUfileOpError, or 0
	Result Result // CUresult, or 0
	Errno  int    // errno of a read that returned -1, or 0
}

// Error formats the failure as "cuFileRead: cuFile status 5001, CUresult 0".
func (e *FileError) Error() string {
	if e.Errno != 0 {
		return fmt.Sprintf("%s: errno %d", e.Op, e.Errno)
	}
	return fmt.Sprintf("%s: cuFile status %d, CUresult %d", e.Op, e.Status, int(e.Result))
}

// FileHandle is a file registered with cuFile (CUfileHandle_t), never Go
// memory.
type FileHandle struct{ p unsafe.Pointer }
