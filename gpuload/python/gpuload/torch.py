"""PyTorch dataset over a prep shard set: ``gpuload.torch.ShardDataset``.

One rank's batches in plan order, resumable, safe under DataLoader workers::

    from torch.utils.data import DataLoader
    from gpuload.torch import ShardDataset

    ds = ShardDataset("/local/shards")         # rank, world size from torchrun
    loader = DataLoader(ds, batch_size=None)   # the shard batches are the batches
    if ckpt:
        ds.load_state_dict(ckpt["data"])
    for epoch in range(ds.epoch, ds.epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            train_step(batch["x"], batch["y"], mask=~batch["pad"])
            ckpt = {"data": ds.state_dict(), ...}

Each item is a dict: every tensor of the shard set by its name as a
``torch.Tensor`` of shape ``[count, per-sample shape...]``, plus
``sample_ids`` (int64: the source rows), ``pad`` (bool: pad samples to mask
out) and ``step`` (int: the rank's step within the epoch). A jagged tensor
(shard format 2.0) is a ``gpuload.Jagged`` pair ``(values, offsets)``:
``values`` of shape ``[N, per-value shape...]`` (N, the batch's values
count, varies), ``offsets`` int64 ``[count + 1]``, sample j's values being
``values[offsets[j]:offsets[j + 1]]`` (see the package README for handing
them to TorchRec and ``torch.nested``).

dtypes: BOOL, U8, I8, I16, I32, I64, F16, BF16 (``torch.bfloat16``), F32 and
F64 map to their torch dtypes. U16, U32 and U64 come out as int16, int32 and
int64 holding the same bits (torch has no arithmetic on wider unsigned
types); F8_E4M3 and F8_E5M2 as ``torch.float8_e4m3fn``/``float8_e5m2`` where
torch has them, else as uint8 bits.

``num_workers=0`` (recommended): tensors are zero-copy views of the loader's
ring, which already prefetches; a view holds its ring slot while it lives,
so its values never change (they are writable: an in-place op changes
only this batch's copy in the ring). ``num_workers>0``: each worker reads steps
``start + w, start + w + W, ...`` of the resume step ``start``, so the
DataLoader's round-robin (which always starts at worker 0) gives exact plan
order; items are owned copies. The native library is loaded in each worker
(it is never loaded by the dataset in the parent), so the default fork start
method works; if the parent did read batches before the workers start, the
workers raise ``gpuload.ForkError`` naming the fix (never a hang).

Resume: ``state_dict()`` is the position (plan and order fingerprints,
epoch, next step); ``load_state_dict`` refuses a state from a plan with
another order and may be called on a dataset of another world size
(``elastic=True``), since steps are global. With ``num_workers>0`` the
parent does not see the workers' progress: pass the position yourself,
``state_dict(next_step=batch["step"] + 1)``.
"""

import ctypes
import multiprocessing
import multiprocessing.context
import os

import numpy as np
import torch
import torch.utils.dlpack
from torch.utils.data import IterableDataset, get_worker_info

from ._errors import GL_ERR_INVALID, GL_ERR_PLAN_MISMATCH, GpuloadError
from ._loader import KDL_CPU, DLPackTensor, Jagged, Loader, _Pin
from ._meta import ShardSet

__all__ = ["ShardDataset", "TORCH_DTYPES", "launcher_rank"]

STATE_FORMAT = "gpuload-dataset/v1"

# Shard dtype codes -> torch dtypes (see the module docstring).
TORCH_DTYPES = {
    1: torch.bool, 2: torch.uint8, 3: torch.int8, 4: torch.int16, 5: torch.int16, 6: torch.int32,
    7: torch.int32, 8: torch.int64, 9: torch.int64, 10: torch.float16, 11: torch.bfloat16,
    12: torch.float32, 13: torch.float64,
    14: getattr(torch, "float8_e4m3fn", torch.uint8), 15: getattr(torch, "float8_e5m2", torch.uint8),
}
_RESERVED = ("sample_ids", "pad", "step")


def launcher_rank():
    """Returns (rank, world_size, where) for this process: an initialized
    torch.distributed process group, else torchrun's RANK/WORLD_SIZE, else
    Slurm's SLURM_PROCID/SLURM_NTASKS, else (0, 1). ``where`` says which."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), "torch.distributed"
    env = os.environ
    for r, w in (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS")):
        if r in env or w in env:
            if r not in env or w not in env:
                raise GpuloadError(GL_ERR_INVALID, f"gpuload: {r} and {w} must be set together (found only "
                                   f"{r if r in env else w})")
            try:
                return int(env[r]), int(env[w]), f"{r}/{w}"
            except ValueError:
                raise GpuloadError(GL_ERR_INVALID, f"gpuload: {r}={env[r]!r} {w}={env[w]!r}: not integers") from None
    return 0, 1, "default (no launcher variables set)"


class ShardDataset(IterableDataset):
    """A ``torch.utils.data.IterableDataset`` over one rank's batches of the
    shard set in ``directory``, in plan order (see the module docstring).

    rank, world_size: default to the launcher's (``launcher_rank``). A world
    size other than the plan's is an error unless ``elastic=True``: then the
    set is read as rank ``rank`` of ``world_size`` ranks, which must divide
    the plan's global batch (not for shuffle "partitioned", whose order
    depends on the world size): each batch is exactly the one a plan made
    for that world size would give, assembled from the overlapping ranks'
    shards (all of which this node must hold; more than one is a copy).

    epoch: the first epoch (``set_epoch`` changes it). device: "cpu" or
    "cuda[:N]" (CUDA backend, tensors wrapped by DLPack with no host copy;
    ``num_workers=0`` only). backend: "host" or "cuda", default from device.
    prefetch, verify_checksums: as gpuload.Loader.

    Attributes (pure Python, no library): ``set`` (ShardSet), ``rank``,
    ``world_size``, ``epoch``, ``epochs``, ``batch_size``, ``len(ds)`` =
    steps per epoch.
    """

    def __init__(self, directory, *, rank=None, world_size=None, epoch=0, device="cpu", backend=None,
                 elastic=False, prefetch=0, verify_checksums=False):
        super().__init__()
        self.set = ShardSet(directory)
        s = self.set
        if rank is None or world_size is None:
            r, w, where = launcher_rank()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        else:
            where = "arguments"
        if world_size != s.world_size:
            if not elastic:
                raise GpuloadError(GL_ERR_PLAN_MISMATCH, (
                    f"gpuload: world size {world_size} (from {where}) differs from the plan's {s.world_size} "
                    f"({s.directory}/plan.json): start {s.world_size} ranks, or pass elastic=True to read the set "
                    f"as {world_size} ranks"))
            if s.shuffle == "partitioned":
                raise GpuloadError(GL_ERR_PLAN_MISMATCH, f"gpuload: world size {world_size} differs from the plan's "
                                   f"{s.world_size}, and shuffle \"partitioned\" orders depend on the world size")
            if world_size < 1 or s.global_batch % world_size:
                raise GpuloadError(GL_ERR_INVALID, f"gpuload: world size {world_size} does not divide the plan's "
                                   f"global batch {s.global_batch}")
        if not 0 <= rank < world_size:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: rank {rank} (from {where}) outside [0, {world_size})")
        for name in _RESERVED:
            if any(t.name == name for t in s.tensors):
                raise GpuloadError(GL_ERR_INVALID, f"gpuload: tensor {name!r} clashes with the item key of that name")
        dev = torch.device(device)
        self.device = dev
        self.backend = backend or ("cuda" if dev.type == "cuda" else "host")
        self.rank, self.world_size, self.elastic = rank, world_size, world_size != s.world_size
        self.epochs, self.steps_per_epoch = s.epochs, s.steps_per_epoch
        self.batch_size = s.global_batch // world_size
        self._prefetch, self._verify = prefetch, verify_checksums
        # The shard rows of each step that make up this rank's batch:
        # (plan rank, first row, end row), in slot order.
        b, lo = s.batch_size, rank * self.batch_size
        hi = lo + self.batch_size
        self._pieces = [(r, max(lo, r * b) - r * b, min(hi, (r + 1) * b) - r * b) for r in range(lo // b, (hi - 1) // b + 1)]
        # epoch, and the (epoch, step) loaded by load_state_dict (-1: none), in
        # shared memory: DataLoader workers (persistent ones too) follow the
        # parent's set_epoch and load_state_dict.
        self._shared = multiprocessing.RawArray(ctypes.c_int64, 3)
        self._shared[:] = [epoch, -1, 0]
        self.set_epoch(epoch)

    @property
    def epoch(self):
        """The epoch iterated (set_epoch, load_state_dict)."""
        return self._shared[0]

    @property
    def _resume(self):
        sh = self._shared
        return (sh[1], sh[2]) if sh[1] >= 0 else None

    def __getstate__(self):
        st = self.__dict__.copy()
        if multiprocessing.context.get_spawning_popen() is None:  # not to a DataLoader worker
            st["_shared"] = list(self._shared)
        return st

    def __setstate__(self, st):
        if isinstance(st["_shared"], list):
            sh = multiprocessing.RawArray(ctypes.c_int64, 3)
            sh[:] = st["_shared"]
            st["_shared"] = sh
        self.__dict__.update(st)

    def __len__(self):
        """Steps per epoch (the same for every rank and every epoch)."""
        return self.steps_per_epoch

    def set_epoch(self, epoch):
        """Makes ``epoch`` the one iterated. A position loaded for this epoch
        by load_state_dict is kept (iteration starts at its step); any other
        epoch starts at step 0. Raises GpuloadError (GL_ERR_NO_SHARD) when
        this node does not hold the epoch's shards this rank reads."""
        if not 0 <= epoch < self.epochs:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: epoch {epoch} outside the plan's epochs [0, {self.epochs})")
        for r, _, _ in self._pieces:
            self.set.shard_path(epoch, r)  # on this node: GL_ERR_NO_SHARD now, not at the first batch
        self._shared[0] = epoch
        if self._resume is not None and self._resume[0] != epoch:
            self._shared[1] = -1
        self._pos = self._start()

    def _start(self):
        return self._resume[1] if self._resume is not None and self._resume[0] == self.epoch else 0

    def state_dict(self, next_step=None):
        """Returns the position: plan and order fingerprints, world size,
        epoch, and the next step (the one after the last item this
        process's iterator delivered, or ``next_step``)."""
        step = self._pos if next_step is None else int(next_step)
        if not 0 <= step <= self.steps_per_epoch:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: step {step} outside [0, {self.steps_per_epoch}]")
        return {"format": STATE_FORMAT, "plan_fingerprint": self.set.fingerprint,
                "order_fingerprint": self.set.order_fingerprint, "world_size": self.world_size,
                "epoch": self.epoch, "step": step}

    def load_state_dict(self, state):
        """Resumes at a position from state_dict: the next iteration of that
        epoch starts at its step. A state from a plan with another order
        fingerprint (another source, seed, global batch, shuffle or
        remainder) is refused with GL_ERR_PLAN_MISMATCH; one saved at another
        world size is accepted (steps are global)."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: not a ShardDataset state (want format {STATE_FORMAT})")
        if state.get("order_fingerprint") != self.set.order_fingerprint:
            raise GpuloadError(GL_ERR_PLAN_MISMATCH, (
                f"gpuload: state from another plan: order fingerprint {state.get('order_fingerprint')}, this shard "
                f"set's {self.set.order_fingerprint} (plan {state.get('plan_fingerprint')}, this set's "
                f"{self.set.fingerprint})"))
        epoch, step = int(state["epoch"]), int(state["step"])
        if not 0 <= step <= self.steps_per_epoch:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: state step {step} outside [0, {self.steps_per_epoch}]")
        if not 0 <= epoch < self.epochs:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: state epoch {epoch} outside the plan's epochs [0, {self.epochs})")
        self._shared[1], self._shared[2] = epoch, step
        self.set_epoch(epoch)

    def __iter__(self):
        info = get_worker_info()
        start = self._start()
        steps = range(start, self.steps_per_epoch)
        copy = info is not None
        if copy:
            if self.backend == "cuda":
                raise GpuloadError(GL_ERR_INVALID, "gpuload: device=\"cuda\" reads in the training process: use "
                                   "DataLoader(num_workers=0) (the ring already prefetches)")
            steps = steps[info.id::info.num_workers]
        else:
            self._pos = start
        if not steps:
            return
        dev = self.device.index or 0
        stride = steps.step
        loaders = [Loader(self.set.directory, self.epoch, r, backend=self.backend, device=dev, prefetch=self._prefetch,
                          start_step=steps[0], verify_checksums=self._verify, shard_set=self.set)
                   for r, _, _ in self._pieces]
        one = len(loaders) == 1
        try:
            for k in range(steps[0], steps[-1] + 1):
                # A worker reads the other workers' steps too and drops them:
                # one sequential pass keeps the reader's prefetch, where a
                # seek per step would restart it.
                if one:
                    b = loaders[0].next_batch()
                    if (k - steps[0]) % stride:
                        continue
                    a, e = self._pieces[0][1:]
                    item = self._item1(k, b, a, e, copy)
                else:
                    parts = [(ld.next_batch(), a, e) for ld, (_, a, e) in zip(loaders, self._pieces)]
                    if (k - steps[0]) % stride:
                        continue
                    item = self._item(k, parts, copy)
                if not copy:
                    self._pos = k + 1
                yield item
        finally:
            for ld in loaders:
                ld.close()

    def _item1(self, step, b, a, e, copy):
        """The item of one shard batch's rows [a, e)."""
        pin = _Pin(b._slot) if not copy and b._metas and b._metas[0].device[0] == KDL_CPU else None
        out = {}
        whole = a == 0 and e >= b.count
        for m in b._metas:
            if m.jagged:
                v, o = _tensor(b, m, pin), _tensor(b, m.offsets, pin)
                if not whole:
                    v, o = _jagged_rows(v, o, a, e, b.count)
                out[m.name] = Jagged(v.clone(), o.clone()) if copy else Jagged(v, o)
                continue
            t = _tensor(b, m, pin)
            if not whole:
                t = _rows(t, a, e, b.count)
            out[m.name] = t.clone() if copy else t
        ids, pad = b.sample_ids, b.pad_flags
        if not whole:
            ids, pad = ids[min(a, b.count):min(e, b.count)], pad[min(a, b.count):min(e, b.count)]
        out["sample_ids"] = torch.from_numpy(ids.view(np.int64))
        out["pad"] = torch.from_numpy(pad)
        out["step"] = step
        return out

    def _item(self, step, parts, copy):
        """The item assembled from several shard batches (a copy)."""
        out = {}
        for i, m in enumerate(parts[0][0]._metas):
            if m.jagged:
                out[m.name] = _jagged_cat([_jagged_rows(_tensor(b, b._metas[i], None), _tensor(b, b._metas[i].offsets, None),
                                                        a, e, b.count) for b, a, e in parts])
                continue
            out[m.name] = torch.cat([_rows(_tensor(b, b._metas[i], None), a, e, b.count) for b, a, e in parts])
        ids = np.concatenate([b.sample_ids[min(a, b.count):min(e, b.count)] for b, a, e in parts])
        pad = np.concatenate([b.pad_flags[min(a, b.count):min(e, b.count)] for b, a, e in parts])
        out["sample_ids"] = torch.from_numpy(ids.view(np.int64))
        out["pad"] = torch.from_numpy(pad)
        out["step"] = step
        return out


def _tensor(batch, m, pin):
    """The batch tensor as a torch.Tensor holding the batch's slot through
    ``pin`` (None: only while the batch is held, for a copy)."""
    if m.device[0] != KDL_CPU:
        return torch.utils.dlpack.from_dlpack(DLPackTensor(batch._slot, m))
    dt = TORCH_DTYPES[m.dtype]
    if not m.nbytes:
        return torch.empty(m.shape, dtype=dt)
    return torch.frombuffer(m.host_buffer(pin), dtype=dt).view(m.shape)


def _rows(t, a, e, count):
    """Rows [a, e) of a shard batch of ``count`` rows, clipped to it."""
    a, e = min(a, count), min(e, count)
    return t if (a, e) == (0, count) else t[a:e]


def _jagged_rows(values, offsets, a, e, count):
    """Samples [a, e) of a jagged tensor of a shard batch of ``count``
    samples, clipped to it: their values (a view) and their offsets, counted
    from 0."""
    a, e = min(a, count), min(e, count)
    if (a, e) == (0, count):
        return values, offsets
    lo, hi = int(offsets[a]), int(offsets[e])
    return values[lo:hi], offsets[a:e + 1] - lo


def _jagged_cat(pieces):
    """One jagged tensor from (values, offsets) pieces in sample order, each
    piece's offsets counted from 0: values concatenated, offsets shifted by
    the values before them."""
    values = torch.cat([v for v, _ in pieces])
    offs, at = [pieces[0][1][:1]], 0
    for v, o in pieces:
        offs.append(o[1:] + at)
        at += v.shape[0]
    return Jagged(values, torch.cat(offs))
