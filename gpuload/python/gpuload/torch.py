"""PyTorch dataset over a prep shard set: ``gpuload.torch.ShardDataset``.

One rank's batches in plan order, resumable, safe under DataLoader workers::

    from gpuload.torch import ShardDataset

    ds = ShardDataset("/local/shards")         # rank, world size from torchrun
    loader = ds.loader()                       # DataLoader(ds, batch_size=None), resumable
    if ckpt:
        loader.load_state_dict(ckpt["data"])
    for epoch in range(ds.epoch, ds.epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            train_step(batch["x"], batch["y"], mask=~batch["pad"])
            ckpt = {"data": loader.state_dict(), ...}

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

Host backend: the shard is read in pure Python and NumPy over a memory map
(no native library, no Go runtime in the process), and every tensor is a
view of the mapped file (copy-on-write: writable, an in-place op changes
only this process's copy); a tensor keeps the mapping, so its values never
change while it lives. Each iteration maps the file afresh, so a write into
a batch never reaches another batch, nor the next pass over the epoch. A
batch's tensors are its own: ``pad`` is a fresh array per batch, and each
tensor's storage spans its batch only. ``verify_checksums=True`` reads through the native
library instead (every block's CRC-32C checked; owned copies), and
``device="cuda"`` uses the native CUDA backend (in-process only).

``num_workers=0`` is the recommended and fastest setting: the reader does
no work per batch that workers could spread. ``num_workers>0`` is correct
whatever the parent did before (read batches, evaluated, closed a loader;
fork or spawn): worker w reads steps ``start + w, start + w + W, ...`` of
the resume step ``start``, so the DataLoader's round-robin gives exact plan
order, and an item travels to the training process as a reference to the
shard file (one reference of ~150 bytes per batch; the training process maps
the file and rebuilds the tensors there), not as a copy. With the default
collate function the item is the in-process one; with a collate function of
the user's own, that function gets the tensors in the worker and each one
travels as a reference. Workers stay slower than ``num_workers=0``: torch's
own hand-off of one item (queues, a pipe, a thread in each process) costs
140-270 µs even for a dict of one int on a 2-core machine, against 12-15 µs
of CPU for a whole batch in-process, DataLoader included (BENCHMARKS.md); a
one-time RuntimeWarning says so. ``ds.loader(num_workers=N)`` hands over 16 batches per message.

Automatic batching is refused: ``DataLoader(ds)`` (batch_size=1, the
default) or ``batch_size=256`` raise GpuloadError naming
``batch_size=None``; ``ds.loader(**kwargs)`` builds the right DataLoader.

Resume: ``state_dict()`` is the position (plan and order fingerprints,
epoch, next step); ``load_state_dict`` refuses a state from a plan with
another order (or a step that is not an integer) and may be called on a
dataset of another world size (``elastic=True``), since steps are global.
Under workers the dataset cannot see what the training loop consumed:
``ds.state_dict()`` then raises naming the fix; ``ds.loader(num_workers=2)``
returns a ShardLoader whose ``state_dict()`` is exact (the step after the
last batch it yielded), or pass ``state_dict(next_step=batch["step"] + 1)``.
"""

import inspect
import statistics
import sys
import time
import warnings

import numpy as np
import torch
import torch.utils.dlpack
from torch.utils.data import DataLoader, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_convert as _default_convert

from ._dataset import _IN_WORKERS, _WARNED, STATE_FORMAT, ShardIterator, env_rank
from ._errors import GL_ERR_INVALID, GpuloadError
from ._loader import KDL_CPU, DLPackTensor, Jagged, Loader, _Pin
from ._torch_items import _NP_FOR_TORCH, TORCH_DTYPES, _Batches, _ChunkRef, _ItemRef, _ship_any, _token

__all__ = ["ShardDataset", "ShardLoader", "TORCH_DTYPES", "launcher_rank", "STATE_FORMAT"]


def launcher_rank():
    """Returns (rank, world_size, where) for this process: an initialized
    torch.distributed process group, else torchrun's RANK/WORLD_SIZE, else
    Slurm's SLURM_PROCID/SLURM_NTASKS, else (0, 1). ``where`` says which."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), "torch.distributed"
    return env_rank()


class ShardDataset(ShardIterator, IterableDataset):
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
    prefetch: the native ring's depth (CUDA, checksums). verify_checksums:
    read through the native library, checking every block's CRC-32C.

    Attributes (pure Python, no library): ``set`` (ShardSet), ``rank``,
    ``world_size``, ``epoch``, ``epochs``, ``batch_size``, ``len(ds)`` =
    steps per epoch. ``ds.loader(**kwargs)`` builds the right DataLoader.
    """

    def __init__(self, directory, *, rank=None, world_size=None, epoch=0, device="cpu", backend=None,
                 elastic=False, prefetch=0, verify_checksums=False):
        IterableDataset.__init__(self)
        dev = torch.device(device)
        self.device = dev
        self.backend = backend or ("cuda" if dev.type == "cuda" else "host")
        ShardIterator.__init__(self, directory, rank=rank, world_size=world_size, epoch=epoch, elastic=elastic,
                               verify_checksums=verify_checksums, prefetch=prefetch)

    @staticmethod
    def _launcher():
        return launcher_rank()

    def loader(self, **kwargs):
        """Returns a ShardLoader: ``DataLoader(self, batch_size=None,
        **kwargs)`` with an exact ``state_dict()`` under workers."""
        return ShardLoader(self, **kwargs)

    def __iter__(self):
        # A plain function (not a generator), so that it runs inside the
        # DataLoader's fetcher, which says whether it batches automatically.
        compact = _check_fetcher(sys._getframe(1), self)
        info = get_worker_info()
        start = self._start()
        steps = range(start, self.steps_per_epoch)
        if info is None:
            self._shared[_IN_WORKERS] = 0
            self._pos = start
            if self.backend == "cuda":
                return self._gen_cuda(steps)
            return self._gen_torch(steps, True, False)
        if self.backend == "cuda":
            raise GpuloadError(GL_ERR_INVALID, "gpuload: device=\"cuda\" reads in the training process: use "
                               "DataLoader(num_workers=0) (the ring already prefetches)")
        self._shared[_IN_WORKERS] = 1
        # Worker w reads steps start + w, start + w + W, ...: the DataLoader's
        # round-robin (which always starts at worker 0) gives plan order.
        return self._gen_torch(steps[info.id::info.num_workers], False, "compact" if compact else True, info)

    def _iter_direct(self):
        """In-process iteration without a DataLoader (ShardLoader)."""
        start = self._start()
        self._shared[_IN_WORKERS] = 0
        self._pos = start
        steps = range(start, self.steps_per_epoch)
        return self._gen_cuda(steps) if self.backend == "cuda" else self._gen_torch(steps, True, False)

    def _gen_torch(self, steps, track, ship, info=None):
        """Items of ``steps`` as torch tensors over the mapped shard (or
        copies through the native library with checksums); ``ship``: in a
        DataLoader worker, tensors travel to the training process as
        references to the shard file, not as copies ("compact": a whole
        item as one reference where it is one shard batch)."""
        if not steps:
            return
        if self._verify:
            for item in self._gen_native(steps, track):
                yield self._torch_item(item)
            return
        shards, fast = self._open_torch()
        sh = shards[0][0]
        if fast:
            gen = self._fast(sh, steps, ship, track and info is None)
            if info is None:  # in-process: nothing timed per item; _fast tracks
                yield from gen
                return
        else:
            gen = (self._torch_item(self._np_item(k, shards), bool(ship), shards) for k in steps)
            if info is None:  # in-process: nothing timed per item
                for k, item in zip(steps, gen):
                    if track:
                        self._pos = k + 1
                    yield item
                return
        # Worker: worker 0 times its first batches, from one request for a
        # batch to the next (the DataLoader's hand-off included), for the
        # one-time warning.
        cycle, t1, last = [], None, steps[-1]
        for k in steps:
            t0 = time.perf_counter()
            item = next(gen)
            if info.id == 0 and not self._shared[_WARNED]:
                if t1 is not None:
                    cycle.append(t0 - t1)
                if len(cycle) >= 8 or k == last:
                    self._warn_workers(info, statistics.median(cycle) if cycle else None)
                t1 = t0
            if track:
                self._pos = k + 1
            yield item

    def _open_torch(self):
        """([(MappedShard, a, e)], fast) of this epoch (see _open_mapped),
        each shard tagged with a token unique to this process and this
        call (a worker's references name it, so that the training process
        maps the file afresh for each iteration, as this one does); fast:
        one whole shard batch per item, format 1.0 (_Batches)."""
        shards = self._open_mapped(self.epoch)
        for sh, _, _ in shards:
            sh.token = _token()
        sh, a, e = shards[0]
        return shards, len(shards) == 1 and a == 0 and e >= sh.batch_size and sh.full is not None

    def _fast(self, sh, steps, ship, track=False):
        """Format 1.0, one whole shard batch per item, made by a _Batches
        over the mapped shard for up to 64 consecutive steps at a time.
        ``ship``: in a worker, tensors as references to the shard file;
        "compact" (the DataLoader hands the item over as it is): each item
        as one reference (path, step) that the training process rebuilds
        with the same _Batches over its own mapping of the file.
        ``track``: set the position before each item."""
        if ship == "compact":
            ref = (sh.path, sh.file_id, sh.token)
            for k in steps:
                if track:
                    self._pos = k + 1
                yield _ItemRef(ref + (k,))
            return
        bt = _Batches(sh)
        one = [(sh, 0, 0)]
        for lo, hi, _ in _runs(steps, 64):
            for item in bt.run(lo, hi):
                if ship:
                    item = {n: _ship_any(v, one) if torch.is_tensor(v) else v for n, v in item.items()}
                if track:
                    self._pos = item["step"] + 1
                yield item

    def _torch_item(self, item, ship=False, shards=()):
        """A NumPy item as torch tensors (views of the same memory)."""
        codes = {t.name: t.dtype_code for t in self.set.tensors}
        codes.update(sample_ids=9, pad=1)
        out = {}
        for n, v in item.items():
            if isinstance(v, Jagged):
                t = Jagged(_torch_view(v.values, codes[n]), _torch_view(v.offsets, 9))
                out[n] = Jagged(*(_ship_any(x, shards) for x in t)) if ship else t
            elif isinstance(v, np.ndarray):
                t = _torch_view(v, codes[n])
                out[n] = _ship_any(t, shards) if ship else t
            else:
                out[n] = v
        return out

    def _warn_workers(self, info, cycle):
        """The one-time warning under DataLoader workers, with ``cycle``:
        the median time between two batches in worker 0 (seconds; None if
        it made only one)."""
        if self._shared[_WARNED]:
            return
        self._shared[_WARNED] = 1
        seen = "" if cycle is None else f" Measured in this worker: a batch every {cycle * 1e6:.0f} us."
        warnings.warn(
            f"gpuload: ShardDataset under {info.num_workers} DataLoader workers: workers cannot make it faster. "
            "Each batch is a view of the memory-mapped shard, so there is no work to spread, and each batch costs "
            "one DataLoader round trip (an index message to the worker, the item back through a queue, a pipe and "
            f"a feeder thread): torch's own hand-off costs far more than the batch.{seen} (Measured by gpuload's "
            "benchmark on a 2-core machine: an empty DataLoader with 2 or 4 workers costs 140-270 us per item even "
            "for a dict of one int; ShardDataset costs 12-15 us of CPU per batch in-process, DataLoader included, "
            "and sends a batch as one ~150-byte reference to the shard file.) Use num_workers=0, or "
            "ds.loader(num_workers=N), which hands over 16 batches per message. (Warned once.)",
            RuntimeWarning, stacklevel=2)

    def _gen_cuda(self, steps):
        """The CUDA backend (native library, in the training process):
        DLPack-wrapped device tensors holding their ring slots."""
        copy = False
        if not steps:
            return
        dev = self.device.index or 0
        stride = steps.step
        loaders = [Loader(self.set.directory, self.epoch, r, backend=self.backend, device=dev, prefetch=self._prefetch,
                          start_step=steps[0], verify_checksums=self._verify, shard_set=self.set, mapped=False)
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


def _runs(steps, most):
    """(lo, hi, range(lo, hi)) of the runs of consecutive steps in the
    sorted ``steps`` (a range or list), each at most ``most`` long."""
    if isinstance(steps, range) and steps.step == 1:
        for lo in range(steps.start, steps.stop, most):
            hi = min(lo + most, steps.stop)
            yield lo, hi, range(lo, hi)
        return
    lo = prev = None
    for k in steps:
        if lo is not None and (k != prev + 1 or k - lo == most):
            yield lo, prev + 1, range(lo, prev + 1)
            lo = None
        if lo is None:
            lo = k
        prev = k
    if lo is not None:
        yield lo, prev + 1, range(lo, prev + 1)


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


def _torch_view(a, code):
    """A NumPy array as a torch.Tensor of the code's dtype over the same
    memory (no copy)."""
    npd = _NP_FOR_TORCH.get(code)
    t = torch.from_numpy(a if npd is None else a.view(npd))
    want = TORCH_DTYPES[code]
    return t if t.dtype == want else t.view(want)


def _as_is(item):
    return item


def _check_fetcher(frame, ds):
    """Raises when the DataLoader iterating the dataset batches its items
    (``frame`` is the caller of __iter__: torch's _IterableDatasetFetcher,
    which knows). Without automatic batching the fetcher converts each item
    with torch's ``default_convert``, which rebuilds the item's dict and
    returns every tensor and int as it is (~2.4 µs per item here): that
    conversion is replaced by the identity, which gives an equal item.
    A collate_fn of the user's own is kept.

    Returns True when the fetcher of ``ds`` hands each item over as it is
    (the identity), so that a worker may send an item as one reference."""
    f = frame.f_locals.get("self") if frame is not None else None
    if type(f).__name__ != "_IterableDatasetFetcher":
        return False
    if not getattr(f, "auto_collation", True) and getattr(f, "collate_fn", None) is _default_convert:
        f.collate_fn = _as_is
    if getattr(f, "auto_collation", False):
        raise GpuloadError(GL_ERR_INVALID, (
            "gpuload: DataLoader(ShardDataset) with automatic batching (batch_size=1, the default, or any other "
            "batch_size): each item already is one whole batch of the plan, which the DataLoader would stack into "
            "[batch_size, b, ...] tensors. Pass batch_size=None (DataLoader(ds, batch_size=None)), or use "
            "ds.loader(...)"))
    return getattr(f, "collate_fn", None) is _as_is and getattr(f, "dataset", None) is ds


_NONE = object()
# DataLoader's keyword arguments -> their defaults (num_workers=0, ...).
_DATALOADER_DEFAULTS = {n: p.default for n, p in inspect.signature(DataLoader.__init__).parameters.items()
                        if p.default is not inspect.Parameter.empty}


class ShardLoader:
    """A DataLoader over a ShardDataset (``ds.loader(**kwargs)``: any
    DataLoader argument but batch_size, which is None) that knows which
    batches the training loop consumed, so its ``state_dict()`` is exact
    under workers too: the position after the last item it yielded (the
    shape of torchdata's StatefulDataLoader). ``load_state_dict``,
    ``set_epoch``, ``len``, ``dataset`` and ``dataloader`` as expected.

    With ``num_workers > 0`` each worker hands over ``chunk`` batches
    (default 16; tensors as references to the shard file, or the whole
    chunk as one reference) per message and the loader yields them one by
    one in plan order, so the DataLoader's per-message cost (queues,
    pickling, a pipe) is paid once per chunk, not once per batch. A
    ``collate_fn`` is applied to each item (in the worker)."""

    def __init__(self, dataset, chunk=16, **kwargs):
        if kwargs.get("batch_size") is not None:
            raise GpuloadError(GL_ERR_INVALID, "gpuload: ds.loader(batch_size=...): items are whole batches of the "
                               "plan; the loader passes batch_size=None")
        if not isinstance(chunk, int) or chunk < 1:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: ds.loader(chunk={chunk!r}): want a positive integer")
        kwargs["batch_size"] = None
        self.dataset = dataset
        self._chunked = kwargs.get("num_workers", 0) > 0 and dataset.backend != "cuda"
        if self._chunked:
            fn = kwargs.get("collate_fn")
            compact = fn is None or fn is _default_convert
            kwargs["collate_fn"] = _as_is if compact else _EachItem(fn)
            self.dataloader = DataLoader(_Chunks(dataset, chunk, compact), **kwargs)
        else:
            self.dataloader = DataLoader(dataset, **kwargs)
        # In-process with nothing else asked of the DataLoader (no
        # collate_fn, pin_memory, ...): iterate the dataset itself, which
        # gives the same items without the DataLoader's ~15 µs per item.
        # (Arguments at their DataLoader defaults, such as
        # persistent_workers=False, ask nothing.)
        self._direct = all(k == "batch_size" or _DATALOADER_DEFAULTS.get(k, _NONE) == v for k, v in kwargs.items())
        self._at = None  # (epoch, next step) after the last item yielded

    def __iter__(self):
        ds = self.dataset
        e = ds.epoch  # the epoch of this iteration's items
        self._at = (e, ds._start())
        if self._direct:
            for item in ds._iter_direct():
                self._at = (e, item["step"] + 1)
                yield item
            return
        if not self._chunked:
            for item in self.dataloader:
                self._at = (e, item["step"] + 1)
                yield item
            return
        for items in self.dataloader:
            for item in items:
                self._at = (e, item["step"] + 1)
                yield item

    def __len__(self):
        return len(self.dataset)

    def set_epoch(self, epoch):
        """ShardDataset.set_epoch."""
        self.dataset.set_epoch(epoch)

    def state_dict(self):
        """The position after the last batch this loader yielded (the
        dataset's own position when it has not yielded one in this epoch)."""
        ds = self.dataset
        if self._at is not None and self._at[0] == ds.epoch:
            return ds.state_dict(next_step=self._at[1])
        ds._shared[_IN_WORKERS] = 0
        return ds.state_dict()

    def load_state_dict(self, state):
        """ShardDataset.load_state_dict."""
        self._at = None
        self.dataset.load_state_dict(state)


class _Chunks(IterableDataset):
    """ShardLoader's dataset under workers: worker w of W yields the chunks
    w, w + W, ... of ``chunk`` consecutive steps each (lists of items), so
    the DataLoader's round-robin gives the chunks, and so the steps, in
    plan order."""

    def __init__(self, ds, chunk, compact=False):
        super().__init__()
        self.ds, self.chunk, self.compact = ds, chunk, compact

    def __iter__(self):
        ds, K = self.ds, self.chunk
        info = get_worker_info()
        steps = range(ds._start(), ds.steps_per_epoch)
        if info is None:  # iterated without workers after all
            ds._pos = steps.start
            return ([it] for it in ds._gen_torch(steps, True, False))
        ds._shared[_IN_WORKERS] = 1
        chunks = [steps[i:i + K] for i in range(0, len(steps), K)][info.id::info.num_workers]
        if self.compact and not ds._verify:
            return self._refs(chunks)
        mine = [k for c in chunks for k in c]
        return self._group(ds._gen_torch(mine, False, True), [len(c) for c in chunks])

    def _refs(self, chunks):
        """Each chunk as one _ChunkRef where the items are whole batches of
        one format 1.0 shard (the collate function is the identity), else
        as a list of items."""
        if not chunks:
            return
        shards, fast = self.ds._open_torch()
        if not fast:
            mine = [k for c in chunks for k in c]
            yield from self._group(self.ds._gen_torch(mine, False, True), [len(c) for c in chunks])
            return
        sh = shards[0][0]
        ref = (sh.path, sh.file_id, sh.token)
        for c in chunks:
            yield _ChunkRef(ref + (c.start, c.stop))

    @staticmethod
    def _group(items, sizes):
        for n in sizes:
            yield [next(items) for _ in range(n)]


class _EachItem:
    """A ShardLoader's collate function under workers: the user's
    ``fn`` applied to each item of a chunk."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, items):
        return [self.fn(it) for it in items]
