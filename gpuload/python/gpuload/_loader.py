"""Loader, Batch and DLPackTensor over the C ABI, with lifetimes tied to
their consumers (see the package docstring)."""

import ctypes
import os
import threading
from typing import Any, NamedTuple

import numpy as np

from . import _native
from ._errors import GL_EOF, GL_ERR_CLOSED, GL_ERR_INVALID, GL_ERR_RING_FULL, GpuloadError
from ._meta import ShardSet, check_step
from ._shard import MappedShard

KDL_CPU, KDL_CUDA = 1, 2

# Shard dtype codes (shardfmt/FORMAT.md) -> NumPy dtypes. BF16 and FP8 have
# no NumPy dtype: they come out as raw unsigned integers of the same width.
NP_DTYPES = {
    1: np.dtype(np.bool_), 2: np.dtype("<u1"), 3: np.dtype("<i1"), 4: np.dtype("<u2"),
    5: np.dtype("<i2"), 6: np.dtype("<u4"), 7: np.dtype("<i4"), 8: np.dtype("<u8"),
    9: np.dtype("<i8"), 10: np.dtype("<f2"), 11: np.dtype("<u2"), 12: np.dtype("<f4"),
    13: np.dtype("<f8"), 14: np.dtype("<u1"), 15: np.dtype("<u1"),
}


class _Locks:
    """The binding's locks: one for every reference count (handles and
    slots), one for the live DLPack table. A fork child gets fresh ones, so
    a lock held by another thread of the parent at the fork cannot block
    the child's finalizers."""

    def __init__(self):
        self.refs = threading.Lock()
        self.live = threading.Lock()


_locks = _Locks()


def _fresh_locks():
    global _locks
    _locks = _Locks()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_locks)


class _Handle:
    """A native loader handle, shared by its Loader and every batch slot
    still held. gl_close runs once the Loader is closed and the last slot
    is given back, so memory handed out stays valid until then."""

    def __init__(self, lib, h):
        self.lib = lib
        self.h = h
        self.pid = os.getpid()
        self.refs = 1  # the Loader's
        self.closing = False

    def call(self, fn, *args):
        _native.check_pid(self.pid, "using a loader opened in another process")
        rc = fn(self.h, *args)
        if rc < 0:
            raise GpuloadError(int(rc), self.lib.gl_last_error().decode("utf-8", "replace"))
        return rc

    def unref(self):
        with _locks.refs:
            self.refs -= 1
            last = self.refs == 0
        if last and self.pid == os.getpid():
            self.lib.gl_close(self.h)

    def close(self):
        """Drops the Loader's reference (idempotent)."""
        with _locks.refs:
            if self.closing:
                return
            self.closing = True
        self.unref()


class _Slot:
    """One delivered batch's ring slot: held by the iterator (until it moves
    on) and by every pin (a view, DLPackTensor or exported capsule). The
    last one to let go gives it back with gl_release."""

    __slots__ = ("handle", "cptr", "refs", "released")

    def __init__(self, handle, cptr):
        self.handle = handle
        self.cptr = cptr
        self.refs = 1
        self.released = False
        with _locks.refs:
            handle.refs += 1

    def ref(self):
        with _locks.refs:
            self.refs += 1

    def unref(self):
        hd = self.handle
        with _locks.refs:
            self.refs -= 1
            last = self.refs == 0
            if last:
                self.released = True
        if last:
            if hd.pid == os.getpid():
                hd.lib.gl_release(hd.h, self.cptr)
            hd.unref()


class _Pin:
    """Keeps a slot held while it lives; attached to the ctypes buffer under
    every host view, so NumPy and torch keep it alive with the view."""

    __slots__ = ("slot",)

    def __init__(self, slot):
        slot.ref()
        self.slot = slot

    def __del__(self):
        try:
            self.slot.unref()
        except Exception:  # interpreter shutdown
            pass


class Jagged(NamedTuple):
    """A jagged tensor of a batch (shard format 2.0): ``values``, the
    C-contiguous ``[N, per-value shape...]`` array of the batch's N values,
    and ``offsets``, int64 ``[count + 1]``: sample j's values are
    ``values[offsets[j]:offsets[j + 1]]``, ``offsets[0] == 0`` and
    ``offsets[-1] == N`` (checked by the library before the batch is
    handed out). Both are NumPy views, owned copies or DLPackTensors, as the
    batch's other tensors; unpack it as ``values, offsets = batch["h"]``."""

    values: Any
    offsets: Any


class _TensorMeta:
    """A batch tensor's descriptor, copied out of the C record so that
    nothing reads C memory after the batch is released. ``offsets`` is the
    offsets tensor's descriptor for a jagged tensor, else None."""

    __slots__ = ("name", "dtype", "dl", "shape", "strides", "data", "nbytes", "device", "offsets")

    def __init__(self, t, offsets=None):
        self.name = t.name.decode("utf-8")
        self.dtype = t.dtype
        self.dl = (t.dl_code, t.dl_bits, t.dl_lanes)
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        self.strides = tuple(t.strides[i] for i in range(t.ndim))
        self.data = t.data or 0
        self.nbytes = t.nbytes
        self.device = (t.device_type, t.device_id)
        self.offsets = _TensorMeta(offsets) if t.kind == _native.GL_TENSOR_JAGGED else None

    @property
    def jagged(self):
        """True for a jagged tensor's values."""
        return self.offsets is not None

    def ctensor(self):
        t = _native.Tensor(name=self.name.encode(), dtype=self.dtype, dl_code=self.dl[0], dl_bits=self.dl[1],
                           dl_lanes=self.dl[2], ndim=len(self.shape), data=self.data or None, nbytes=self.nbytes,
                           device_type=self.device[0], device_id=self.device[1])
        for i, (s, st) in enumerate(zip(self.shape, self.strides)):
            t.shape[i], t.strides[i] = s, st
        return t

    def host_buffer(self, pin):
        """A ctypes byte array over the host memory, holding ``pin``."""
        raw = (ctypes.c_uint8 * self.nbytes).from_address(self.data)
        raw._gl_pin = pin
        return raw


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

# Live DLManagedTensors by address: keeps their ctypes memory and pin alive
# until the deleter runs.
_live = {}


@_DLDeleter
def _dl_deleter(managed):
    with _locks.live:
        entry = _live.pop(ctypes.addressof(managed.contents), None)
    del entry  # drops the pin: the slot may go back to the ring


@_CapsuleDestructor
def _capsule_destructor(capsule):
    # Called when the capsule dies. A consumer renames a used capsule to
    # "used_dltensor" and owns the deleter call; an unused one is ours.
    if _pyapi.PyCapsule_IsValid(capsule, b"dltensor"):
        p = _pyapi.PyCapsule_GetPointer(capsule, b"dltensor")
        _dl_deleter(ctypes.cast(p, ctypes.POINTER(_DLManagedTensor)))


def _check_live(slot):
    if slot.released:
        raise GpuloadError(GL_ERR_CLOSED, "gpuload: batch already released")
    if slot.handle.closing:
        raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")


class DLPackTensor:
    """One tensor of a batch, exportable through the DLPack protocol.

    ``torch.from_dlpack(t)`` (or ``numpy.from_dlpack`` on the host backend)
    wraps the memory with no copy. The DLPackTensor and every tensor made
    from it hold the batch's ring slot until they are dropped (the DLPack
    deleter). Attributes: name, shape, dtype (shard dtype code), device
    (DLPack (device_type, device_id)), ptr, nbytes.
    """

    def __init__(self, slot, meta):
        self._slot = slot  # no reference to the Batch: it holds us
        self._meta = meta
        self._pin = _Pin(slot)
        self.name = meta.name
        self.shape = meta.shape
        self.dtype = meta.dtype
        self.device = meta.device
        self.ptr = meta.data
        self.nbytes = meta.nbytes

    def __dlpack_device__(self):
        """Returns (device_type, device_id): (1, 0) host, (2, ordinal) CUDA."""
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        """Returns a "dltensor" capsule over the memory; raises GpuloadError
        GL_ERR_CLOSED after the loader is closed."""
        # The loader synchronizes each copy before delivering the batch, so
        # the data is ready on every stream: nothing to wait for here.
        _check_live(self._slot)
        mt = self._meta
        nd = len(mt.shape)
        m = _DLManagedTensor()
        shape = (ctypes.c_int64 * nd)(*mt.shape)
        strides = (ctypes.c_int64 * nd)(*mt.strides)
        m.dl_tensor.data = mt.data or None
        m.dl_tensor.device = _DLDevice(*mt.device)
        m.dl_tensor.ndim = nd
        m.dl_tensor.dtype = _DLDataType(*mt.dl)
        m.dl_tensor.shape = shape
        m.dl_tensor.strides = strides
        m.dl_tensor.byte_offset = 0
        m.manager_ctx = None
        m.deleter = _dl_deleter
        with _locks.live:
            _live[ctypes.addressof(m)] = (m, _Pin(self._slot), shape, strides)
        return _pyapi.PyCapsule_New(ctypes.addressof(m), b"dltensor", _capsule_destructor)

    def to_numpy(self):
        """Returns an owned host copy (a device-to-host copy on cuda); raises
        GL_ERR_CLOSED after the loader is closed."""
        _check_live(self._slot)
        out = np.empty(self.shape, dtype=NP_DTYPES[self.dtype])
        if out.nbytes:
            t = self._meta.ctensor()
            hd = self._slot.handle
            hd.call(hd.lib.gl_copy_to_host, ctypes.byref(t), out.ctypes.data, out.nbytes)
        return out


class Batch:
    """One batch: ``step``, ``count``, ``pads``, ``sample_ids`` (uint64) and
    ``pad_flags`` (bool) as owned NumPy arrays, and ``tensors``: name ->
    read-only NumPy view (host) or DLPackTensor (cuda); a jagged tensor's
    entry is a Jagged pair (values, offsets) of them.

    The batch's ring slot is held by the iterator until it moves on and by
    every view or DLPackTensor made from the batch until it is dropped;
    memory never goes away under a live view, even after Loader.close().
    """

    def __init__(self, handle, cptr):
        self._slot = _Slot(handle, cptr)
        b = cptr.contents
        self.step, self.count, self.pads = b.step, b.count, b.pads
        if b.count:
            self.sample_ids = np.ctypeslib.as_array(b.sample_ids, shape=(b.count,)).copy()
            self.pad_flags = np.ctypeslib.as_array(b.pad_flags, shape=(b.count,)).astype(bool)
        else:
            self.sample_ids, self.pad_flags = np.empty(0, np.uint64), np.empty(0, bool)
        self._metas = [_TensorMeta(b.tensors[i], b.offsets[i]) for i in range(b.num_tensors)]
        self._tensors = None
        self._dropped = False

    @property
    def on_device(self):
        """True when the tensors are in CUDA device memory."""
        return bool(self._metas) and self._metas[0].device[0] != KDL_CPU

    @property
    def tensors(self):
        """name -> read-only NumPy view (host) or DLPackTensor (cuda), or for
        a jagged tensor a Jagged pair (values, offsets) of them; each holds
        the batch's slot while it lives."""
        if self._tensors is None:
            self._check_live()
            pin = _Pin(self._slot)  # one for every view of this batch
            self._tensors = {m.name: self._pair(self._array, m, pin) for m in self._metas}
        return self._tensors

    @staticmethod
    def _pair(fn, m, *args):
        """fn(m, *args), or for a jagged tensor the Jagged pair of fn over its
        values and its offsets."""
        if m.jagged:
            return Jagged(fn(m, *args), fn(m.offsets, *args))
        return fn(m, *args)

    def _array(self, m, pin):
        if m.device[0] != KDL_CPU:
            return DLPackTensor(self._slot, m)
        dt = NP_DTYPES[m.dtype]
        if not m.nbytes:
            return np.empty(m.shape, dtype=dt)
        a = np.frombuffer(m.host_buffer(pin), dtype=dt).reshape(m.shape)
        a.flags.writeable = False
        return a

    def copies(self):
        """Returns name -> owned NumPy copy of each tensor (device-to-host on
        cuda); a Jagged pair of copies for a jagged tensor."""
        self._check_live()
        return {m.name: self._pair(self._copy, m) for m in self._metas}

    def _copy(self, m):
        if m.device[0] != KDL_CPU:
            return DLPackTensor(self._slot, m).to_numpy()
        if m.nbytes:
            return np.frombuffer(m.host_buffer(None), dtype=NP_DTYPES[m.dtype]).reshape(m.shape).copy()
        return np.empty(m.shape, dtype=NP_DTYPES[m.dtype])

    def dlpack(self, name):
        """Returns a DLPackTensor for the named tensor (either backend), or
        for a jagged tensor a Jagged pair of DLPackTensors (values, offsets)."""
        self._check_live()
        for m in self._metas:
            if m.name == name:
                return self._pair(lambda mt: DLPackTensor(self._slot, mt), m)
        raise KeyError(name)

    def _check_live(self):
        _check_live(self._slot)

    def release(self):
        """Drops the iterator's hold; the slot returns to the ring once no
        view, DLPackTensor or capsule holds it either. Idempotent."""
        if not self._dropped:
            self._dropped = True
            self._slot.unref()


class Loader:
    """Reads the shard of (epoch, rank) of the shard set in ``directory``.

    Construction reads the manifest and plan in pure Python and checks the
    request (GpuloadError: GL_ERR_NO_SHARD_SET, GL_ERR_OUTSIDE_PLAN,
    GL_ERR_NO_SHARD, GL_ERR_PLAN_MISMATCH, GL_ERR_INVALID); the native
    library is loaded, and the shard opened, when the first batch is read.

    Iterating yields dicts name -> array (a Jagged pair of arrays, values
    and offsets, for a jagged tensor); ``batches()`` yields Batch objects.
    Arguments mirror gpuload.Options: backend ("host" or "cuda"), device,
    prefetch, start_step, verify_checksums, plan_fingerprint, register_mmap,
    map_blocks; copy=True yields owned copies instead of views; shard_set
    is a ShardSet of ``directory`` already read (its metadata is reused);
    start_step must be an integer (2.7 is refused, not truncated).

    Read path: ``mapped`` (default: True on the host backend without
    verify_checksums, register_mmap or map_blocks) reads the shard in pure
    NumPy over a copy-on-write memory map (gpuload._shard: validated at
    open, jagged offsets checked per batch; no native library, so safe in
    any forked process): batches are MappedBatch objects whose views each
    keep the mapping, so any number may be held (``ring`` is then the
    number of steps). ``mapped=False`` uses the native library's ring.

    Threads: one Loader may be used from several threads; next_batch,
    iteration, seek and close take the loader's lock, so every step is
    delivered exactly once (an iterator's item is made under the lock, its
    slot held before another thread moves on).

    Metadata without the library: ``steps``, ``world_size``, ``epochs``,
    ``steps_per_epoch``, ``batch_size``, ``tensors``, ``fingerprint``,
    ``order_fingerprint`` and ``set`` (the ShardSet).
    """

    def __init__(self, directory, epoch, rank, backend="host", device=0, prefetch=0, start_step=0,
                 verify_checksums=False, plan_fingerprint=None, register_mmap=False, map_blocks=False,
                 copy=False, shard_set=None, mapped=None):
        self._handle = None
        self._current = None
        self._closed = False
        self._lock = threading.Lock()
        self._shard = None
        self.set = shard_set if shard_set is not None else ShardSet(directory)
        self.set.check_fingerprint(plan_fingerprint)
        if backend not in ("", "host", "cuda"):
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: invalid argument: unknown backend {backend!r} (want host or cuda)")
        self.epoch, self.rank = epoch, rank
        self.path = self.set.shard_path(epoch, rank)
        self.steps = int(self.set.shards[(epoch, rank)]["batches"])
        self._next_step = check_step(start_step, self.steps, "start_step")
        self._opts = dict(backend=(backend or "host").encode(), device=device, prefetch=prefetch,
                          verify_checksums=int(bool(verify_checksums)), register_mmap=int(bool(register_mmap)),
                          map_blocks=int(bool(map_blocks)),
                          plan_fingerprint=plan_fingerprint.encode() if plan_fingerprint else None)
        self._copy = copy
        native_only = backend == "cuda" or verify_checksums or register_mmap or map_blocks
        if mapped and native_only:
            raise GpuloadError(GL_ERR_INVALID, "gpuload: invalid argument: mapped=True reads the host mapping "
                               "without checksums: not with backend=\"cuda\", verify_checksums, register_mmap or "
                               "map_blocks")
        self.mapped = (not native_only) if mapped is None else bool(mapped)

    world_size = property(lambda self: self.set.world_size, doc="Ranks of the plan.")
    epochs = property(lambda self: self.set.epochs, doc="Epochs of the plan.")
    steps_per_epoch = property(lambda self: self.set.steps_per_epoch, doc="Steps of every rank in every epoch.")
    batch_size = property(lambda self: self.set.batch_size, doc="Per-rank batch size.")
    tensors = property(lambda self: list(self.set.tensors), doc="The tensor table: a list of TensorInfo.")
    fingerprint = property(lambda self: self.set.fingerprint, doc="The plan fingerprint.")
    order_fingerprint = property(lambda self: self.set.order_fingerprint, doc="The plan's order fingerprint.")

    def _native(self):
        if self._closed:
            raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")
        if self._handle is None:
            lib = _native.lib()
            o = _native.Options(start_step=self._next_step, **self._opts)
            h = ctypes.c_void_p()
            rc = lib.gl_open(os.fsencode(self.set.directory), self.epoch, self.rank, ctypes.byref(o), ctypes.byref(h))
            if rc < 0:
                raise GpuloadError(int(rc), lib.gl_last_error().decode("utf-8", "replace"))
            self._handle = _Handle(lib, h)
        return self._handle

    @property
    def loaded(self):
        """True once the shard is open in the native library."""
        return self._handle is not None

    @property
    def ring(self):
        """How many batches may be held at once (opens the shard); on the
        mapped path every batch may be held: the number of steps."""
        if self.mapped:
            return self.steps
        hd = self._native()
        return hd.call(hd.lib.gl_ring)

    def _mapping(self):
        if self._closed:
            raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")
        if self._shard is None:
            expect = {"plan_fingerprint": self.set.fingerprint, "epoch": self.epoch, "rank": self.rank}
            self._shard = _MappedCursor(MappedShard(self.path, expect, self.set.shards[(self.epoch, self.rank)].get("size")),
                                        self._next_step)
        return self._shard

    def seek(self, step):
        """Makes ``step`` the next step delivered (an integer in [0, steps])."""
        step = check_step(step, self.steps)
        with self._lock:
            if self._closed:
                raise GpuloadError(GL_ERR_CLOSED, "gpuload: loader closed")
            self._drop_current()
            if self.mapped:
                self._next_step = step
                if self._shard is not None:
                    self._shard.step = step
            elif self._handle is None:
                self._next_step = step
            else:
                self._handle.call(self._handle.lib.gl_seek, step)

    def _drop_current(self):
        if self._current is not None:
            self._current.release()
            self._current = None

    def next_batch(self):
        """Gives up the iterator's hold on the previous batch and returns the
        next Batch (MappedBatch on the mapped path), or None at the end.
        Safe from several threads: each call takes the loader's lock, so
        every step is delivered exactly once."""
        with self._lock:
            return self._next_locked()

    def _next_locked(self):
        if self.mapped:
            return self._mapping().next()
        hd = self._native()
        self._drop_current()
        p = ctypes.POINTER(_native.Batch)()
        try:
            if hd.call(hd.lib.gl_next, ctypes.byref(p)) == GL_EOF:
                return None
        except GpuloadError as e:
            if e.code != GL_ERR_RING_FULL:
                raise
            raise GpuloadError(e.code, f"{e}: every live array, view, tensor or DLPack capsule of a batch holds its "
                               "ring slot; copy (.copy(), .clone()) what you keep across steps, or raise prefetch") from None
        b = Batch(hd, p)
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
        if self.mapped and not self._copy:
            while True:
                with self._lock:
                    item = self._mapping().next_views()
                if item is None:
                    return
                yield item
        while True:
            with self._lock:
                b = self._next_locked()
                if b is None:
                    return
                if self._copy:
                    item = b.copies()
                    self._drop_current()
                else:
                    item = b.tensors  # pins the slot before another thread moves on
            yield item

    def __len__(self):
        """The number of steps (batches) in the shard."""
        return self.steps

    def close(self):
        """Closes the loader: further calls raise GL_ERR_CLOSED. Arrays,
        views, DLPackTensors and capsules already made stay valid until they
        are dropped (the native loader is freed after the last one);
        exporting new ones from a Batch raises GL_ERR_CLOSED. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._drop_current()
            self._shard = None  # the mapping lives on in the arrays made from it
            if self._handle is not None:
                self._handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class MappedBatch:
    """One batch of the mapped path (``Loader(mapped=True)``, the default on
    the host backend without checksums): the same attributes as Batch.
    ``tensors`` are read-only NumPy views of the mapped shard; each holds
    the mapping, so its values never change while it lives (there is no
    ring to fill: any number of batches may be held). ``sample_ids`` and
    ``pad_flags`` are read-only views and owned arrays."""

    on_device = False

    def __init__(self, shard, k):
        self._shard, self._k = shard, k
        self.step = k
        self.count, self.pads = int(shard.counts[k]), int(shard.pads[k])
        self.sample_ids = shard.ro_ids[k, :self.count]
        self.pad_flags = shard.pad_flags(k)
        self._tensors = None

    @property
    def tensors(self):
        """name -> read-only NumPy view, or a Jagged pair of them."""
        if self._tensors is None:
            self._tensors = _MappedCursor.views(self._shard, self._k)
        return self._tensors

    def copies(self):
        """name -> owned NumPy copy (a Jagged pair of copies for a jagged tensor)."""
        return {n: Jagged(v.values.copy(), v.offsets.copy()) if isinstance(v, Jagged) else v.copy()
                for n, v in self.tensors.items()}

    def dlpack(self, name):
        """A DLPack-exportable NumPy view of the named tensor, or a Jagged
        pair of them. It is writable (DLPack has no read-only flag): a write
        changes only this process's copy-on-write page, never the file, but
        this loader reads that page again after a seek back to the step."""
        for t, a in zip(self._shard.tensors, self._shard.arrays(self._k)):
            if t.name == name:
                return Jagged(*a) if t.jagged else a
        raise KeyError(name)

    def release(self):
        """Nothing to give back on the mapped path (idempotent)."""


class _MappedCursor:
    """A MappedShard and the next step of a Loader."""

    def __init__(self, shard, step):
        self.shard, self.step = shard, step
        # Read-only twins of the prebuilt views (Loader hands out read-only arrays).
        shard.ro_ids = _readonly(shard.ids)
        shard.ro_full = [_readonly(f) for f in shard.full] if shard.full is not None else None
        shard.names = [t.name for t in shard.tensors]

    @staticmethod
    def views(shard, k):
        if shard.ro_full is not None:
            c = int(shard.counts[k])
            if c == shard.batch_size:
                return {n: f[k] for n, f in zip(shard.names, shard.ro_full)}
            return {n: f[k, :c] for n, f in zip(shard.names, shard.ro_full)}
        out = {}
        for t, a in zip(shard.tensors, shard.arrays(k)):
            out[t.name] = Jagged(_readonly(a[0]), _readonly(a[1])) if t.jagged else _readonly(a)
        return out

    def next(self):
        k = self.step
        if k >= self.shard.num_batches:
            return None
        self.step = k + 1
        return MappedBatch(self.shard, k)

    def next_views(self):
        k = self.step
        if k >= self.shard.num_batches:
            return None
        self.step = k + 1
        return self.views(self.shard, k)


def _readonly(a):
    v = a.view()
    v.flags.writeable = False
    return v
