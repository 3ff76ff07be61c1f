"""Loading libgpuload.so: lazily, in the process that reads, and never in a
forked child of a process that had loaded it (a Go runtime does not survive
fork: its threads are gone, and the first call would wait on them forever)."""

import ctypes
import os
import threading

from ._errors import GL_ERR_FORKED, GL_ERR_NO_LIBRARY, ForkError, LibraryError

# The C ABI version this binding is written for (GL_ABI_VERSION, gpuload.h);
# versions only add, so a library of this version or later serves it.
ABI_VERSION = 3
GL_MAX_DIMS = 9
LIBRARY_NAME = "libgpuload.so"
BUILD_HINT = ("build it with `make python` in a prep checkout (or `pip install --no-build-isolation ./gpuload/python`; "
              "needs Go and gcc), or set GPULOAD_LIB to a libgpuload.so built by "
              "`go build -buildmode=c-shared -o gpuload/python/gpuload/libgpuload.so ./gpuload/capi`")

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_lib = None
_lib_pid = None
_forked = False  # this process is a fork child of one that imported gpuload


def _mark_forked():
    global _forked, _lock
    _forked = True
    _lock = threading.Lock()  # another thread may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_mark_forked)


class Options(ctypes.Structure):
    _fields_ = [
        ("backend", ctypes.c_char_p), ("device", ctypes.c_int32), ("prefetch", ctypes.c_int32),
        ("start_step", ctypes.c_int64), ("verify_checksums", ctypes.c_int32),
        ("register_mmap", ctypes.c_int32), ("map_blocks", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("plan_fingerprint", ctypes.c_char_p),
    ]


# gl_tensor.kind
GL_TENSOR_FIXED, GL_TENSOR_JAGGED = 0, 1


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("dtype", ctypes.c_uint16), ("dl_code", ctypes.c_uint8),
        ("dl_bits", ctypes.c_uint8), ("dl_lanes", ctypes.c_uint16), ("kind", ctypes.c_uint16), ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * GL_MAX_DIMS), ("strides", ctypes.c_int64 * GL_MAX_DIMS),
        ("data", ctypes.c_void_p), ("nbytes", ctypes.c_uint64),
        ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
    ]


class Batch(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_int64), ("count", ctypes.c_int32), ("pads", ctypes.c_int32),
        ("num_tensors", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("tensors", ctypes.POINTER(Tensor)), ("sample_ids", ctypes.POINTER(ctypes.c_uint64)),
        ("pad_flags", ctypes.POINTER(ctypes.c_uint8)), ("internal", ctypes.c_size_t),
        ("offsets", ctypes.POINTER(Tensor)),
    ]


def library_path():
    """Returns the path the library is loaded from: $GPULOAD_LIB, else
    libgpuload.so inside this package."""
    return os.environ.get("GPULOAD_LIB") or os.path.join(_PKG_DIR, LIBRARY_NAME)


def _checkout_sources():
    """In a prep checkout (the package at gpuload/python/gpuload), yields the
    library's source files; elsewhere (an installed package) nothing."""
    gl = os.path.dirname(os.path.dirname(_PKG_DIR))
    if not os.path.isfile(os.path.join(gl, "capi", "capi.go")):
        return
    root = os.path.dirname(gl)
    # The packages libgpuload.so is built from (go list -deps ./gpuload/capi).
    dirs = [gl, os.path.join(gl, "capi"), os.path.join(gl, "internal", "cuda")]
    dirs += [os.path.join(root, *d.split("/")) for d in ("shardfmt", "shardset", "plan", "internal/atomicfile",
                                                        "internal/dirlock")]
    for d in dirs:
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if (n.endswith(".go") and not n.endswith("_test.go")) or n.endswith((".c", ".h")):
                yield os.path.join(d, n)


def _in_parent_mappings(path):
    """Reports whether a library of this name is mapped into this process."""
    try:
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith("/" + os.path.basename(path)) for line in f)
    except OSError:
        return False


def fork_error(what):
    """Returns the ForkError for using the library in a forked child."""
    return ForkError(GL_ERR_FORKED, (
        f"gpuload: {what} in process {os.getpid()}, a fork of a process that had loaded {LIBRARY_NAME}: "
        "a Go runtime does not survive fork, so the library cannot be used in this process (it would hang). "
        "Fix: start DataLoader workers with multiprocessing_context=\"spawn\" or \"forkserver\", or do not read "
        "batches in the parent before the workers start (ShardDataset and Loader read their metadata without "
        "the library; only the first batch loads it)."))


def check_pid(pid, what):
    """Raises ForkError unless ``pid`` (the process that loaded the library
    or opened a handle) is this process."""
    if pid != os.getpid():
        raise fork_error(what)


def lib():
    """Returns the loaded library, loading it on first use in this process."""
    global _lib, _lib_pid
    with _lock:
        if _lib is not None:
            check_pid(_lib_pid, "using the native library")
            return _lib
        path = library_path()
        if _forked and _in_parent_mappings(path):
            raise fork_error("loading the native library")
        if not os.path.isfile(path):
            raise LibraryError(GL_ERR_NO_LIBRARY, f"gpuload: {path}: no such file: the native library is not built; {BUILD_HINT}")
        if not os.environ.get("GPULOAD_LIB"):
            built = os.stat(path).st_mtime
            newer = [s for s in _checkout_sources() if os.stat(s).st_mtime > built]
            if newer:
                raise LibraryError(GL_ERR_NO_LIBRARY, f"gpuload: {path} is stale: {os.path.relpath(newer[0], os.path.dirname(path))} "
                                   f"changed after it was built; {BUILD_HINT}")
        try:
            lb = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryError(GL_ERR_NO_LIBRARY, f"gpuload: loading {path}: {e}; {BUILD_HINT}") from None
        if not hasattr(lb, "gl_abi_version") or lb.gl_abi_version() < ABI_VERSION:
            got = lb.gl_abi_version() if hasattr(lb, "gl_abi_version") else 1
            raise LibraryError(GL_ERR_NO_LIBRARY, f"gpuload: {path} has C ABI version {got}, this binding needs "
                               f"{ABI_VERSION} (a stale build); {BUILD_HINT}")
        _declare(lb)
        _lib, _lib_pid = lb, os.getpid()
        return lb


def loaded_here():
    """Reports whether this process loaded the library itself."""
    return _lib is not None and _lib_pid == os.getpid()


def _declare(lb):
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lb.gl_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(Options), ctypes.POINTER(vp)]
    lb.gl_next.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(Batch))]
    lb.gl_release.argtypes = [vp, ctypes.POINTER(Batch)]
    lb.gl_seek.argtypes = [vp, i64]
    lb.gl_steps.argtypes = [vp]
    lb.gl_steps.restype = i64
    lb.gl_ring.argtypes = [vp]
    lb.gl_ring.restype = i64
    lb.gl_copy_to_host.argtypes = [vp, ctypes.POINTER(Tensor), vp, ctypes.c_size_t]
    lb.gl_close.argtypes = [vp]
    lb.gl_last_error.restype = ctypes.c_char_p


__all__ = ["lib", "library_path", "check_pid", "fork_error", "loaded_here", "ABI_VERSION", "GL_ERR_NO_LIBRARY"]
