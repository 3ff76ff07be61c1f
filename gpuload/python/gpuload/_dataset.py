"""One rank's batches in plan order with a resumable position, in NumPy:
``gpuload.ShardIterator`` (no torch import), and the base of
``gpuload.torch.ShardDataset``."""

import ctypes
import multiprocessing
import multiprocessing.context
import os

import numpy as np

from ._errors import GL_ERR_INVALID, GL_ERR_PLAN_MISMATCH, GpuloadError
from ._loader import Jagged, Loader
from ._meta import ShardSet, as_step
from ._shard import MappedShard

STATE_FORMAT = "gpuload-dataset/v1"
RESERVED = ("sample_ids", "pad", "step")

# _shared slots: epoch, resume epoch (-1: none), resume step, "the last
# iteration ran in DataLoader workers", "the workers warning was given".
_EPOCH, _R_EPOCH, _R_STEP, _IN_WORKERS, _WARNED = range(5)


def env_rank():
    """(rank, world_size, where) from torchrun's RANK/WORLD_SIZE, else
    Slurm's SLURM_PROCID/SLURM_NTASKS, else (0, 1)."""
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


class ShardIterator:
    """One rank's batches of the shard set in ``directory``, in plan order,
    as dicts of NumPy arrays; no torch import (NumPy and JAX trainers).

    Each item: every tensor by name, ``[count, per-sample shape...]`` (a
    ``gpuload.Jagged`` pair ``(values, offsets)`` for a jagged tensor),
    ``sample_ids`` (int64), ``pad`` (bool: pad samples to mask out) and
    ``step`` (int). Arrays are views of the memory-mapped shard (host read
    path in pure NumPy, copy-on-write: a write changes only this process's
    copy), each keeping the mapping alive; ``verify_checksums=True`` reads
    through the native library instead and yields owned copies.

    rank, world_size: default to the launcher's (RANK/WORLD_SIZE, Slurm).
    A world size other than the plan's is refused unless ``elastic=True``
    (see ``gpuload.torch.ShardDataset``). epoch: the first epoch.

    Position: ``state_dict()`` / ``load_state_dict(state)`` / ``set_epoch``,
    the same state as ``ShardDataset`` (either resumes the other's).
    """

    def __init__(self, directory, *, rank=None, world_size=None, epoch=0, elastic=False, verify_checksums=False,
                 prefetch=0):
        self.set = ShardSet(directory)
        s = self.set
        if rank is None or world_size is None:
            r, w, where = self._launcher()
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
        for name in RESERVED:
            if any(t.name == name for t in s.tensors):
                raise GpuloadError(GL_ERR_INVALID, f"gpuload: tensor {name!r} clashes with the item key of that name")
        self.rank, self.world_size, self.elastic = rank, world_size, world_size != s.world_size
        self.epochs, self.steps_per_epoch = s.epochs, s.steps_per_epoch
        self.batch_size = s.global_batch // world_size
        self._prefetch, self._verify = prefetch, verify_checksums
        # The shard rows of each step that make up this rank's batch:
        # (plan rank, first row, end row), in slot order.
        b, lo = s.batch_size, rank * self.batch_size
        hi = lo + self.batch_size
        self._pieces = [(r, max(lo, r * b) - r * b, min(hi, (r + 1) * b) - r * b) for r in range(lo // b, (hi - 1) // b + 1)]
        # Shared memory: DataLoader workers (persistent ones too) follow the
        # parent's set_epoch and load_state_dict, and tell it they iterated.
        self._shared = multiprocessing.RawArray(ctypes.c_int64, 5)
        self._shared[:] = [epoch, -1, 0, 0, 0]
        self._pos = 0
        self.set_epoch(epoch)

    @staticmethod
    def _launcher():
        return env_rank()

    @property
    def epoch(self):
        """The epoch iterated (set_epoch, load_state_dict)."""
        return self._shared[_EPOCH]

    @property
    def _resume(self):
        sh = self._shared
        return (sh[_R_EPOCH], sh[_R_STEP]) if sh[_R_EPOCH] >= 0 else None

    def __getstate__(self):
        st = self.__dict__.copy()
        if multiprocessing.context.get_spawning_popen() is None:  # not to a DataLoader worker
            st["_shared"] = list(self._shared)
        return st

    def __setstate__(self, st):
        if isinstance(st["_shared"], list):
            sh = multiprocessing.RawArray(ctypes.c_int64, 5)
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
        epoch = as_step(epoch, "epoch")
        if not 0 <= epoch < self.epochs:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: epoch {epoch} outside the plan's epochs [0, {self.epochs})")
        for r, _, _ in self._pieces:
            self.set.shard_path(epoch, r)  # on this node: GL_ERR_NO_SHARD now, not at the first batch
        self._shared[_EPOCH] = epoch
        self._shared[_IN_WORKERS] = 0
        if self._resume is not None and self._resume[0] != epoch:
            self._shared[_R_EPOCH] = -1
        self._pos = self._start()

    def _start(self):
        return self._resume[1] if self._resume is not None and self._resume[0] == self.epoch else 0

    def state_dict(self, next_step=None):
        """Returns the position: plan and order fingerprints, world size,
        epoch, and the next step (the one after the last item this
        process's iterator delivered, or ``next_step``, an integer).

        Under DataLoader workers this object cannot see what the training
        loop consumed: after an iteration in workers, state_dict() without
        ``next_step`` raises GL_ERR_INVALID naming the fix
        (``ds.loader(...)``, whose state_dict() counts the batches it
        delivered)."""
        if next_step is None:
            if self._shared[_IN_WORKERS]:
                raise GpuloadError(GL_ERR_INVALID, (
                    "gpuload: state_dict() after an iteration in DataLoader workers: the dataset cannot see which "
                    "batches the training loop consumed, so it would resume at a wrong step. Fix: iterate "
                    "ds.loader(num_workers=...) and save its state_dict(), or pass "
                    "state_dict(next_step=batch[\"step\"] + 1)"))
            step = self._pos
        else:
            step = as_step(next_step, "next_step")
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
        world size is accepted (steps are global). A step or epoch that is
        not an integer (2.7) is refused with GL_ERR_INVALID."""
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: not a ShardDataset state (want format {STATE_FORMAT})")
        if state.get("order_fingerprint") != self.set.order_fingerprint:
            raise GpuloadError(GL_ERR_PLAN_MISMATCH, (
                f"gpuload: state from another plan: order fingerprint {state.get('order_fingerprint')}, this shard "
                f"set's {self.set.order_fingerprint} (plan {state.get('plan_fingerprint')}, this set's "
                f"{self.set.fingerprint})"))
        epoch, step = as_step(state.get("epoch"), "state epoch"), as_step(state.get("step"), "state step")
        if not 0 <= step <= self.steps_per_epoch:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: state step {step} outside [0, {self.steps_per_epoch}]")
        if not 0 <= epoch < self.epochs:
            raise GpuloadError(GL_ERR_INVALID, f"gpuload: state epoch {epoch} outside the plan's epochs [0, {self.epochs})")
        self._shared[_R_EPOCH], self._shared[_R_STEP] = epoch, step
        self.set_epoch(epoch)

    # Reading.

    def _open_mapped(self, epoch):
        """[(MappedShard, a, e)] of the pieces of this rank's batches."""
        out = []
        for r, a, e in self._pieces:
            ent = self.set.shards[(epoch, r)]
            expect = {"plan_fingerprint": self.set.fingerprint, "epoch": epoch, "rank": r}
            out.append((MappedShard(self.set.shard_path(epoch, r), expect, ent.get("size")), a, e))
        return out

    def __iter__(self):
        self._shared[_IN_WORKERS] = 0
        start = self._start()
        self._pos = start
        return self._gen(range(start, self.steps_per_epoch), True)

    def _gen(self, steps, track):
        if not steps:
            return
        if self._verify:
            yield from self._gen_native(steps, track)
            return
        shards = self._open_mapped(self.epoch)
        for k in steps:
            item = self._np_item(k, shards)
            if track:
                self._pos = k + 1
            yield item

    def _gen_native(self, steps, track):
        """Through the native library with checksums: owned copies."""
        loaders = [Loader(self.set.directory, self.epoch, r, prefetch=self._prefetch, start_step=steps[0],
                          verify_checksums=True, shard_set=self.set, mapped=False) for r, _, _ in self._pieces]
        want = set(steps)  # sorted steps, a range or a list
        try:
            for k in range(steps[0], steps[-1] + 1):
                bs = [ld.next_batch() for ld in loaders]
                if k not in want:
                    continue
                parts = []
                for b in bs:
                    c = b.copies()
                    parts.append((b.count, b.pads, b.sample_ids, [c[t.name] for t in self.set.tensors]))
                item = self._assemble(k, [(p, a, e) for p, (_, a, e) in zip(parts, self._pieces)])
                if track:
                    self._pos = k + 1
                yield item
        finally:
            for ld in loaders:
                ld.close()

    def _np_item(self, k, shards):
        parts = []
        for sh, a, e in shards:
            c = int(sh.counts[k])
            parts.append(((c, int(sh.pads[k]), sh.ids[k, :c], sh.arrays(k)), a, e))
        return self._assemble(k, parts)

    def _assemble(self, k, parts):
        """The item of step k from its pieces ((count, pads, ids, arrays in
        table order), a, e): rows [a, e) of each, in order."""
        out = {}
        names = [t.name for t in self.set.tensors]
        if len(parts) == 1 and parts[0][1] == 0 and parts[0][2] >= parts[0][0][0]:
            (c, p, ids, arrs), _, _ = parts[0]
            for n, a in zip(names, arrs):
                out[n] = Jagged(*a) if isinstance(a, tuple) else a
            out["sample_ids"] = ids.view(np.int64)
            out["pad"] = _pad(c, p)
        else:
            rows = []
            for (c, p, ids, arrs), a, e in parts:
                a, e = min(a, c), min(e, c)
                rows.append((a, e, c, p, ids, arrs))
            for i, n in enumerate(names):
                if isinstance(rows[0][5][i], tuple):
                    out[n] = _jagged_cat([_jagged_rows(r[5][i][0], r[5][i][1], r[0], r[1]) for r in rows])
                else:
                    out[n] = np.concatenate([r[5][i][r[0]:r[1]] for r in rows])
            out["sample_ids"] = np.concatenate([r[4][r[0]:r[1]] for r in rows]).view(np.int64)
            out["pad"] = np.concatenate([_pad(r[2], r[3])[r[0]:r[1]] for r in rows])
        out["step"] = k
        return out


def _pad(c, p):
    f = np.zeros(c, np.bool_)
    if p:
        f[c - p:] = True
    return f


def _jagged_rows(values, offsets, a, e):
    """Samples [a, e) of a jagged tensor: their values and their offsets,
    counted from 0."""
    lo, hi = int(offsets[a]), int(offsets[e])
    return values[lo:hi], offsets[a:e + 1] - lo


def _jagged_cat(pieces):
    """One jagged tensor from (values, offsets) pieces in sample order, each
    piece's offsets counted from 0."""
    values = np.concatenate([v for v, _ in pieces])
    offs, at = [pieces[0][1][:1]], 0
    for v, o in pieces:
        offs.append(o[1:] + at)
        at += v.shape[0]
    return Jagged(values, np.concatenate(offs).astype(np.int64))
