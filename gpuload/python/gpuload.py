"""Python binding of prep's training-time shard reader (ctypes over libgpuload.so).

Standard library and NumPy only. Build the library first:

    go build -buildmode=c-shared -o libgpuload.so ./gpuload/capi

and point GPULOAD_LIB at it (or put it beside this file).

    import gpuload
    with gpuload.Loader("/local/shards", epoch=0, rank=3) as loader:
        for batch in loader:              # dict: tensor name -> numpy array
            train_step(batch["x"], batch["y"])

Host backend: the arrays are read-only zero-copy views into the loader's
ring buffer, valid until the iterator advances (the previous batch is
released by the next ``next()``); pass ``copy=True`` to get owned copies.
``Loader.batches()`` yields ``Batch`` objects with the step, count, pad
count, sample ids and pad flags as well.

CUDA backend (``backend="cuda"``): the values are ``DLPackTensor`` objects
implementing ``__dlpack__``/``__dlpack_device__``, so ``torch.from_dlpack(t)``
wraps the device memory with no copy. A batch's device buffer is given back
only when the iterator has moved on *and* every DLPack consumer has dropped
its tensor (the DLPack deleter), so the ring bounds how many batches such
tensors may pin (``GpuloadError`` with code ``GL_ERR_RING_FULL`` beyond).
"""

import ctypes
import os

import numpy as np

__all__ = ["Loader", "Batch", "DLPackTensor", "GpuloadError"]

GL_OK, GL_EOF = 0, 1
GL_ERR_INVALID, GL_ERR_NO_SHARD, GL_ERR_PLAN_MISMATCH, GL_ERR_CORRUPT = -1, -2, -3, -4
GL_ERR_CUDA, GL_ERR_RING_FULL, GL_ERR_CLOSED, GL_ERR_IO = -5, -6, -7, -8
GL_MAX_DIMS = 9
KDL_CPU, KDL_CUDA = 1, 2

# Shard dtype codes (shardfmt/FORMAT.md) -> NumPy dtypes. BF16 and FP8 have
# no NumPy dtype: they come out as raw unsigned integers of the same width.
_NP_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype("<u1"), 3: np.dtype("<i1"), 4: np.dtype("<u2"),
    5: np.dtype("<i2"), 6: np.dtype("<u4"), 7: np.dtype("<i4"), 8: np.dtype("<u8"),
    9: np.dtype("<i8"), 10: np.dtype("<f2"), 11: np.dtype("<u2"), 12: np.dtype("<f4"),
    13: np.dtype("<f8"), 14: np.dtype("<u1"), 15: np.dtype("<u1"),
}


class GpuloadError(Exception):
    """A failed libgpuload call: .code is the GL_ERR_* code, str() the message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class _Options(ctypes.Structure):
    _fields_ = [
        ("backend", ctypes.c_char_p), ("device", ctypes.c_int32), ("prefetch", ctypes.c_int32),
        ("start_step", ctypes.c_int64), ("verify_checksums", ctypes.c_int32),
        ("register_mmap", ctypes.c_int32), ("map_blocks", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("plan_fingerprint", ctypes.c_char_p),
    ]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p), ("dtype", ctypes.c_uint16), ("dl_code", ctypes.c_uint8),
        ("dl_bits", ctypes.c_uint8), ("dl_lanes", ctypes.c_uint16), ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * GL_MAX_DIMS), ("strides", ctypes.c_int64 * GL_MAX_DIMS),
        ("data", ctypes.c_void_p), ("nbytes", ctypes.c_uint64),
        ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
    ]


class _Batch(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_int64), ("count", ctypes.c_int32), ("pads", ctypes.c_int32),
        ("num_tensors", ctypes.c_int32), ("reserved", ctypes.c_int32),
        ("tensors", ctypes.POINTER(_Tensor)), ("sample_ids", ctypes.POINTER(ctypes.c_uint64)),
        ("pad_flags", ctypes.POINTER(ctypes.c_uint8)), ("internal", ctypes.c_size_t),
    ]


# DLPack ABI (dlpack.h, unversioned DLManagedTensor as used by __dlpack__).
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DLDeleter = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [
    ("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DLDeleter),
]

_CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CapsuleDestructor]
_pyapi.PyCapsule_IsValid.restype = ctypes.c_int
_pyapi.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_pyapi.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# Live DLManagedTensors by address: keeps their ctypes memory and owner alive
# until the deleter runs.
_live = {}


@_DLDeleter
def _dl_deleter(managed):
    entry = _live.pop(ctypes.addressof(managed.contents), None)
    if entry is not None:
        entry[1]._unref()


@_CapsuleDestructor
def _capsule_destructor(capsule):
    # Called when the capsule dies. A consumer renames a used capsule to
    # "used_dltensor" and owns the deleter call; an unused one is ours.
    if _pyapi.PyCapsule_IsValid(capsule, b"dltensor"):
        p = _pyapi.PyCapsule_GetPointer(capsule, b"dltensor")
        _dl_deleter(ctypes.cast(p, ctypes.POINTER(_DLManagedTensor)))


def _load_library(path=None):
    path = path or os.environ.get("GPULOAD_LIB")
    if not path:
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgpuload.so")
        path = here if os.path.exists(here) else "libgpuload.so"
    lib = ctypes.CDLL(path)
    lib.gl_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(_Options), ctypes.POINTER(ctypes.c_void_p)]
    lib.gl_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(_Batch))]
    lib.gl_release.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Batch)]
    lib.gl_seek.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.gl_steps.argtypes = [ctypes.c_void_p]
    lib.gl_steps.restype = ctypes.c_int64
    lib.gl_ring.argtypes = [ctypes.c_void_p]
    lib.gl_ring.restype = ctypes.c_int64
    lib.gl_copy_to_host.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Tensor), ctypes.c_void_p, ctypes.c_size_t]
    lib.gl_close.argtypes = [ctypes.c_void_p]
    lib.gl_last_error.restype = ctypes.c_char_p
    return lib


class DLPackTensor:
    """One tensor of a batch, exportable once through the DLPack protocol.

    ``torch.from_dlpack(t)`` (or ``numpy.from_dlpack`` on the host backend)
    wraps the memory with no copy; the batch stays held until the consumer
    drops the tensor. Attributes: name, shape, dtype (shard dtype code),
    device (DLPack (device_type, device_id)), ptr, nbytes.
    """

    def __init__(self, batch, index):
        t = batch._c.tensors[index]
        self._batch = batch
        self._index = index
        self.name = t.name.decode("utf-8")
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.dtype = t.dtype
        self.device = (t.device_type, t.device_id)
        self.ptr = t.data or 0
        self.nbytes = t.nbytes

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        # The loader synchronizes each copy before delivering the batch, so
        # the data is ready on every stream: nothing to wait for here.
        self._batch._check_live()
        t = self._batch._c.tensors[self._index]
        m = _DLManagedTensor()
        shape = (ctypes.c_int64 * t.ndim)(*self.shape)
        strides = (ctypes.c_int64 * t.ndim)(*(t.strides[i] for i in range(t.ndim)))
        m.dl_tensor.data = t.data
        m.dl_tensor.device = _DLDevice(t.device_type, t.device_id)
        m.dl_tensor.ndim = t.ndim
        m.dl_tensor.dtype = _DLDataType(t.dl_code, t.dl_bits, t.dl_lanes)
        m.dl_tensor.shape = shape
        m.dl_tensor.strides = strides
        m.dl_tensor.byte_offset = 0
        m.manager_ctx = None
        m.deleter = _dl_deleter
        _live[ctypes.addressof(m)] = (m, self._batch, shape, strides)
        self._batch._ref()
        return _pyapi.PyCapsule_New(ctypes.addressof(m), b"dltensor", _capsule_destructor)

    def to_numpy(self):
        """Returns an owned host copy (a device-to-host copy on cuda)."""
        self._batch._check_live()
        t = self._batch._c.tensors[self._index]
        out = np.empty(self.shape, dtype=_NP_DTYPES[self.dtype])
        self._batch._loader._call(self._batch._loader._lib.gl_copy_to_host, self._batch._loader._h,
                                  ctypes.byref(t), out.ctypes.data, out.nbytes)
        return out


class Batch:
    """One batch: step, count, pads, sample_ids and pad_flags (NumPy copies),
    and ``tensors``: name -> NumPy view (host) or DLPackTensor (cuda)."""

    def __init__(self, loader, c, copy):
        self._loader = loader
        self._c = c.contents
        self._cptr = c
        self._refs = 1
        self._released = False
        b = self._c
        self.step, self.count, self.pads = b.step, b.count, b.pads
        self.sample_ids = np.ctypeslib.as_array(b.sample_ids, shape=(b.count,)).copy() if b.count else np.empty(0, np.uint64)
        self.pad_flags = np.ctypeslib.as_array(b.pad_flags, shape=(b.count,)).astype(bool) if b.count else np.empty(0, bool)
        self.tensors = {}
        for i in range(b.num_tensors):
            t = b.tensors[i]
            name = t.name.decode("utf-8")
            if t.device_type != KDL_CPU:
                self.tensors[name] = DLPackTensor(self, i)
                continue
            shape = tuple(t.shape[j] for j in range(t.ndim))
            dt = _NP_DTYPES[t.dtype]
            if t.nbytes:
                raw = (ctypes.c_uint8 * t.nbytes).from_address(t.data)
                a = np.frombuffer(raw, dtype=dt).reshape(shape)
            else:
                a = np.empty(shape, dtype=dt)
            if copy:
                a = a.copy()
            else:
                a.flags.writeable = False
            self.tensors[name] = a

    def dlpack(self, name):
        """Returns a DLPackTensor for the named tensor (either backend)."""
        self._check_live()
        for i in range(self._c.num_tensors):
            if self._c.tensors[i].name.decode("utf-8") == name:
                return DLPackTensor(self, i)
        raise KeyError(name)

    def _check_live(self):
        if self._released:
            raise GpuloadError(GL_ERR_CLOSED, "gpuload: batch already released")
        # Closing the loader freed the batch's C record and its memory.
        if self._loader._h is None:
            raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")

    def _ref(self):
        self._refs += 1

    def _unref(self):
        self._refs -= 1
        if self._refs == 0 and not self._released:
            self._released = True
            self._loader._release(self)

    def release(self):
        """Drops the iterator's hold; the buffer returns to the ring once no
        DLPack consumer holds it either. Idempotent."""
        if not getattr(self, "_dropped", False):
            self._dropped = True
            self._unref()


class Loader:
    """Reads the shard of (epoch, rank) of the shard set in ``directory``.

    Iterating yields dicts name -> array; ``batches()`` yields Batch objects.
    Arguments mirror gpuload.Options: backend ("host" or "cuda"), device,
    prefetch, start_step, verify_checksums, plan_fingerprint, register_mmap,
    map_blocks; copy=True returns owned copies instead of views; lib names the
    shared library (default $GPULOAD_LIB or libgpuload.so beside this file).
    """

    def __init__(self, directory, epoch, rank, backend="host", device=0, prefetch=0, start_step=0,
                 verify_checksums=False, plan_fingerprint=None, register_mmap=False, map_blocks=False,
                 copy=False, lib=None):
        self._lib = _load_library(lib)
        self._copy = copy
        self._current = None
        self._h = None
        o = _Options(backend=backend.encode(), device=device, prefetch=prefetch, start_step=start_step,
                     verify_checksums=int(bool(verify_checksums)), register_mmap=int(bool(register_mmap)),
                     map_blocks=int(bool(map_blocks)),
                     plan_fingerprint=plan_fingerprint.encode() if plan_fingerprint else None)
        h = ctypes.c_void_p()
        self._call(self._lib.gl_open, os.fsencode(directory), epoch, rank, ctypes.byref(o), ctypes.byref(h))
        self._h = h

    def _call(self, fn, *args):
        rc = fn(*args)
        if rc < 0:
            raise GpuloadError(rc, self._lib.gl_last_error().decode("utf-8", "replace"))
        return rc

    def _release(self, batch):
        if self._h is not None:
            self._lib.gl_release(self._h, batch._cptr)

    @property
    def steps(self):
        """Number of steps (batches) in the shard."""
        return self._call(self._lib.gl_steps, self._h)

    @property
    def ring(self):
        """How many batches may be held at once."""
        return self._call(self._lib.gl_ring, self._h)

    def seek(self, step):
        """Makes ``step`` the next step delivered."""
        self._drop_current()
        self._call(self._lib.gl_seek, self._h, step)

    def _drop_current(self):
        if self._current is not None:
            self._current.release()
            self._current = None

    def next_batch(self):
        """Releases the previous batch and returns the next Batch, or None at the end."""
        if self._h is None:
            raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")
        self._drop_current()
        p = ctypes.POINTER(_Batch)()
        rc = self._call(self._lib.gl_next, self._h, ctypes.byref(p))
        if rc == GL_EOF:
            return None
        b = Batch(self, p, self._copy)
        if self._copy and all(isinstance(v, np.ndarray) for v in b.tensors.values()):
            b.release()
        else:
            self._current = b
        return b

    def batches(self):
        """Yields Batch objects in step order."""
        while True:
            b = self.next_batch()
            if b is None:
                return
            yield b

    def __iter__(self):
        for b in self.batches():
            yield b.tensors

    def close(self):
        """Frees everything; all arrays and device tensors become invalid."""
        if self._h is not None:
            h, self._h = self._h, None
            self._current = None
            self._lib.gl_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
