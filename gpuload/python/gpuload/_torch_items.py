"""Torch items over a mapped shard, and how they travel from DataLoader
workers to the training process (``gpuload.torch``'s host read path).

In-process, ``_Batches`` makes each item of a format 1.0 shard's whole
batches. Under DataLoader workers, a worker's tensors pickle as references
to their bytes in the shard file (``_Shipped``), or, where an item is one
whole shard batch and the DataLoader hands it over as it is, the whole item
(``_ItemRef``) or a ShardLoader chunk of items (``_ChunkRef``) pickles as
(file, steps); the training process maps the same file (one private mapping
per worker iteration, the file validated once per process) and rebuilds the
tensors there: no copy of the batch, no shared-memory segment per tensor.
"""

import collections
import itertools
import os
import threading

import numpy as np
import torch

from ._errors import GL_ERR_PLAN_MISMATCH, GpuloadError
from ._shard import MappedShard

# Shard dtype codes -> torch dtypes (see the module docstring).
TORCH_DTYPES = {
    1: torch.bool, 2: torch.uint8, 3: torch.int8, 4: torch.int16, 5: torch.int16, 6: torch.int32,
    7: torch.int32, 8: torch.int64, 9: torch.int64, 10: torch.float16, 11: torch.bfloat16,
    12: torch.float32, 13: torch.float64,
    14: getattr(torch, "float8_e4m3fn", torch.uint8), 15: getattr(torch, "float8_e5m2", torch.uint8),
}
# Shard dtype codes -> the NumPy dtype torch.from_numpy takes for the same
# bits (torch 1.13 has no unsigned 16/32/64-bit types).
_NP_FOR_TORCH = {4: np.dtype("<i2"), 6: np.dtype("<i4"), 8: np.dtype("<i8"), 11: np.dtype("<i2")}


class _Batches:
    """The items of a format 1.0 MappedShard's whole batches as dicts of
    torch tensors (table order, then sample_ids, pad, step), made from the
    shard's prebuilt per-tensor views over every batch: one
    ``torch.from_numpy`` per tensor per batch (about 0.7 µs each here; a
    torch index or ``unbind`` of a whole-slab tensor costs as much), the
    dicts built in C (``map``/``zip``). Each tensor's storage is its own
    batch's slab only (so ``torch.save`` or a pickle of it holds that batch,
    not the shard) and holds the mapping. The pad flags of each run of steps
    are one fresh array, a row per batch: writing to one item's tensors
    never changes another item."""

    def __init__(self, sh):
        npd = [_NP_FOR_TORCH.get(t.code, t.dtype) for t in sh.tensors]
        self.full = [f.view(d) for f, d in zip(sh.full, npd)] + [sh.ids.view(np.int64)]
        want = [TORCH_DTYPES[t.code] for t in sh.tensors]
        self.cast = [(i, w) for i, w in enumerate(want) if torch.from_numpy(self.full[i][:0]).dtype != w]
        self.keys = tuple(t.name for t in sh.tensors) + ("sample_ids", "pad", "step")
        self.counts, self.pads, self.b = sh.counts.tolist(), sh.pads.tolist(), sh.batch_size

    def run(self, lo, hi):
        """An iterator over the items of steps [lo, hi) (hi - lo small: the
        pad flags of the run are one [hi - lo, b] array)."""
        counts, pads, b = self.counts[lo:hi], self.pads[lo:hi], self.b
        flags = np.zeros((hi - lo, b), np.bool_)  # (torch.zeros costs ~10 µs per batch here)
        for j, p in enumerate(pads):
            if p:
                flags[j, counts[j] - p:counts[j]] = True
        from_numpy = torch.from_numpy
        cols = [map(from_numpy, f[lo:hi]) for f in self.full]
        cols.append(map(from_numpy, flags))
        cols.append(range(lo, hi))
        rows = zip(*cols)
        if self.cast or any(c != b for c in counts):
            rows = map(self._fix, rows, counts)
        return map(dict, map(zip, itertools.repeat(self.keys), rows))

    def one(self, k):
        """The item of step k alone (what run(k, k + 1) gives, without the
        set-up of a run: ~5 µs less)."""
        c, p, from_numpy = self.counts[k], self.pads[k], torch.from_numpy
        flags = np.zeros(self.b, np.bool_)
        if p:
            flags[c - p:c] = True
        row = [from_numpy(f[k]) for f in self.full]
        row += (from_numpy(flags), k)
        if self.cast or c != self.b:
            row = self._fix(row, c)
        return dict(zip(self.keys, row))

    def _fix(self, row, c):
        """A row of a batch of c < b samples (its first c rows), dtypes
        NumPy lacks as views of the torch dtype."""
        if c != self.b:
            row = [t[:c] for t in row[:-1]] + [row[-1]]
        if self.cast:
            row = list(row)
            for j, w in self.cast:
                row[j] = row[j].view(w)
        return row


# Worker -> training process: tensors over the mapped shard travel as
# references (file, offset, shape), and the training process maps the same
# file; no copy of the batch, no shared-memory segment per tensor. Where an
# item (or a ShardLoader chunk of items) is a run of whole batches of one
# format 1.0 shard and the DataLoader hands it over as it is, it travels as
# one reference (file, steps) that the training process rebuilds with a
# _Batches over its mapping: a message of ~150 bytes, no per-tensor work in
# the worker.

_TOKENS = itertools.count()


def _token():
    """A token unique to this process and call (pid, counter)."""
    return (os.getpid(), next(_TOKENS))


class _Shipped(torch.Tensor):
    """A worker's tensor that pickles as a reference (``_gl_ref``) to its
    bytes in a shard file, or as its value when small."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __reduce_ex__(self, proto):
        return (_rebuild, self._gl_ref)


class _ItemRef:
    """A worker's item of one whole shard batch: pickles as (path, file_id,
    token, step), unpickles as the item (a dict) over the training
    process's own mapping of the file."""

    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref

    def __reduce__(self):
        return (_rebuild_item, self.ref)


class _ChunkRef(_ItemRef):
    """A worker's chunk of consecutive whole shard batches: pickles as
    (path, file_id, token, first step, end step), unpickles as the list of
    their items."""

    __slots__ = ()

    def __reduce__(self):
        return (_rebuild_chunk, self.ref)


def _ship(t, sh):
    """t (a view of MappedShard sh's mapping) as a _Shipped reference."""
    s = t.as_subclass(_Shipped)
    size = t.element_size()
    s._gl_ref = ("map", sh.path, sh.file_id, sh.token, t.data_ptr() - sh.base_addr, str(t.dtype)[6:],
                 tuple(t.shape), tuple(x * size for x in t.stride()))
    return s


def _ship_any(t, shards):
    """_ship when t lies in one of the shards' mappings, else by value."""
    p = t.data_ptr()
    if t.numel():
        for sh, _, _ in shards:
            if sh.base_addr <= p and p + _extent(t.shape, t.stride(), t.element_size()) <= sh.base_addr + sh.file_id[2]:
                return _ship(t, sh)
    s = t.as_subclass(_Shipped)
    s._gl_ref = ("value", str(t.dtype)[6:], tuple(t.shape),
                 t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return s


# torch dtypes -> the NumPy dtype of the same size torch.from_numpy takes
_TORCH_NP = {torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
             torch.int32: np.int32, torch.int64: np.int64, torch.float16: np.float16, torch.float32: np.float32,
             torch.float64: np.float64, torch.bfloat16: np.int16}
# (path, file_id, token) -> [MappedShard, its _Batches or None], in the
# training process: one mapping per worker iteration, as the worker has, so
# that a write to an item's tensors never reaches an item of a later
# iteration; (path, file_id) -> the MappedShard validated first, remapped
# for each later token.
_maps = collections.OrderedDict()
_valid = collections.OrderedDict()
_maps_lock = threading.Lock()


def _mapped(path, file_id, token, batches=False):
    """The training process's MappedShard of a worker's reference (or its
    _Batches): mapped and validated at the first reference of that worker
    iteration. Raises GL_ERR_PLAN_MISMATCH when the file is no longer the
    one the worker read."""
    key = (path, file_id, token)
    with _maps_lock:
        ent = _maps.get(key)
        if ent is None:
            sh = _valid.get(key[:2])
            sh = sh.remap() if sh is not None else None
            if sh is None:
                sh = MappedShard(path)
                if sh.file_id != file_id:
                    raise GpuloadError(GL_ERR_PLAN_MISMATCH, f"gpuload: {path}: the shard file a DataLoader worker "
                                       "read was replaced before the training process mapped it")
                _valid[key[:2]] = sh
            ent = _maps[key] = [sh, None]
        if key[:2] in _valid:
            _valid.move_to_end(key[:2])
        _maps.move_to_end(key)
        for m in (_maps, _valid):
            while len(m) > 8:
                m.popitem(last=False)  # its mapping lives on in the tensors made from it
        if batches and ent[1] is None:
            ent[1] = _Batches(ent[0])
        return ent[1] if batches else ent[0]


def _rebuild_item(path, file_id, token, k):
    """The item of step k from a worker's _ItemRef, in the training process."""
    return _mapped(path, file_id, token, True).one(k)


def _rebuild_chunk(path, file_id, token, lo, hi):
    """The items of steps [lo, hi) from a worker's _ChunkRef."""
    return list(_mapped(path, file_id, token, True).run(lo, hi))


def _rebuild(kind, *args):
    """A tensor from a worker's _Shipped reference, in the training process."""
    if kind == "value":
        dtype, shape, raw = args
        dt = getattr(torch, dtype)
        if not raw:
            return torch.empty(shape, dtype=dt)
        return torch.frombuffer(bytearray(raw), dtype=dt).view(shape)
    path, file_id, token, off, dtype, shape, strides = args
    sh = _mapped(path, file_id, token)
    dt = getattr(torch, dtype)
    npd = _TORCH_NP.get(dt, np.uint8)
    t = torch.from_numpy(np.ndarray(shape, npd, buffer=sh.mm, offset=off, strides=strides))
    return t if t.dtype == dt else t.view(dt)


def _extent(shape, stride, size):
    """Bytes spanned by a strided tensor of element size ``size``."""
    if not shape:
        return size
    return (sum((d - 1) * s for d, s in zip(shape, stride)) + 1) * size
