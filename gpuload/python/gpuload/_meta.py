"""Shard-set metadata read in pure Python (no native library, fork-safe)."""

import json
import operator
import os

from ._errors import (GL_ERR_INVALID, GL_ERR_IO, GL_ERR_NO_SHARD, GL_ERR_NO_SHARD_SET, GL_ERR_OUTSIDE_PLAN,
                      GL_ERR_PLAN_MISMATCH, GpuloadError)

# Shard dtype names (shardfmt/FORMAT.md) -> codes, never reused.
DTYPE_CODES = {
    "BOOL": 1, "U8": 2, "I8": 3, "U16": 4, "I16": 5, "U32": 6, "I32": 7, "U64": 8, "I64": 9,
    "F16": 10, "BF16": 11, "F32": 12, "F64": 13, "F8_E4M3": 14, "F8_E5M2": 15,
}


def _read_json(path):
    """Loads the JSON file at path, never through a symbolic link (ELOOP, an
    OSError, as prep refuses every link inside a shard set)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as e:
        if os.path.islink(path):
            raise OSError(e.errno, "a symbolic link (never followed): unsafe name in a shard set") from None
        raise
    with os.fdopen(fd, "rb") as f:
        return json.load(f)


class TensorInfo:
    """One entry of a shard set's tensor table: ``name``, ``dtype`` (the
    shard dtype name, e.g. ``"F32"``), ``dtype_code``, ``shape`` (the
    per-sample shape, a tuple; ``()`` for a scalar) and ``jagged``: True for
    a jagged tensor (shard format 2.0), whose ``shape`` is then the shape of
    one value, a sample holding any number of them."""

    __slots__ = ("name", "dtype", "dtype_code", "shape", "jagged")

    def __init__(self, name, dtype, shape, jagged=False):
        self.name = name
        self.dtype = dtype
        self.dtype_code = DTYPE_CODES.get(dtype, 0)
        self.shape = tuple(shape or ())
        self.jagged = bool(jagged)

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, {list(self.shape)}{', jagged=True' if self.jagged else ''})"

    def __eq__(self, other):
        return isinstance(other, TensorInfo) and ((self.name, self.dtype, self.shape, self.jagged) ==
                                                  (other.name, other.dtype, other.shape, other.jagged))


class ShardSet:
    """What a shard set directory says about itself, read from its
    ``manifest.json`` and ``plan.json`` with the standard library only, so it
    is safe before and across ``fork``.

    Attributes: ``directory``, ``fingerprint`` (plan fingerprint),
    ``order_fingerprint`` (fixes the global batch sequence; equal for plans
    that differ only in world size, workers or epochs), ``world_size``,
    ``epochs``, ``workers``, ``global_batch``, ``batch_size`` (per rank),
    ``steps_per_epoch``, ``shuffle``, ``remainder``, ``shard_format``
    (``"1.0"``, or ``"2.0"`` for a set with jagged tensors), ``tensors`` (a
    list of TensorInfo) and ``shards`` (the set of (epoch, rank) present here).

    Raises GpuloadError with GL_ERR_NO_SHARD_SET for a missing directory or
    manifest, GL_ERR_PLAN_MISMATCH when plan.json and the manifest disagree.
    """

    def __init__(self, directory):
        self.directory = os.fspath(directory)
        if not os.path.isdir(self.directory):
            raise GpuloadError(GL_ERR_NO_SHARD_SET, f"gpuload: opening shard set: {self.directory}: no shard set: no such directory")
        mpath = os.path.join(self.directory, "manifest.json")
        try:
            m = _read_json(mpath)
        except FileNotFoundError:
            raise GpuloadError(GL_ERR_NO_SHARD_SET, f"gpuload: reading manifest: {mpath}: no shard set: no manifest.json "
                               "(not a shard set, or prep convert has not finished)") from None
        except (OSError, ValueError) as e:
            raise GpuloadError(GL_ERR_NO_SHARD_SET, f"gpuload: reading manifest: {mpath}: {e}") from None
        ppath = os.path.join(self.directory, "plan.json")
        try:
            p = _read_json(ppath)
        except FileNotFoundError:
            raise GpuloadError(GL_ERR_NO_SHARD_SET, f"gpuload: reading plan: {ppath}: no plan.json beside the manifest "
                               "(a set made by an older prep convert: convert it again)") from None
        except (OSError, ValueError) as e:
            raise GpuloadError(GL_ERR_NO_SHARD_SET, f"gpuload: reading plan: {ppath}: {e}") from None
        self.fingerprint = m.get("plan_fingerprint", "")
        if p.get("fingerprint") != self.fingerprint:
            raise GpuloadError(GL_ERR_PLAN_MISMATCH, f"gpuload: reading plan: {ppath}: plan.json fingerprint "
                               f"{p.get('fingerprint')}, manifest {self.fingerprint}")
        cfg, der = p.get("config", {}), p.get("derived", {})
        self.order_fingerprint = p.get("order_fingerprint", "")
        self.world_size = int(cfg.get("world_size", 0))
        self.epochs = int(cfg.get("epochs", 0))
        self.workers = int(cfg.get("workers", 0))
        self.global_batch = int(cfg.get("global_batch", 0))
        self.shuffle = cfg.get("shuffle", "")
        self.remainder = cfg.get("remainder", "")
        self.steps_per_epoch = int(der.get("steps_per_epoch", 0))
        self.batch_size = int(m.get("batch_size") or der.get("batch_size") or 0)
        self.tensors = [TensorInfo(t["name"], t["dtype"], t.get("shape"), t.get("jagged", False))
                        for t in m.get("tensors") or []]
        self.shards = {(int(s["epoch"]), int(s["rank"])): s for s in m.get("shards") or []}
        jagged = any(t.jagged for t in self.tensors)
        self.shard_format = m.get("shard_format") or ("2.0" if jagged else "1.0")

    def shard_path(self, epoch, rank):
        """Returns the path of the shard of (epoch, rank), raising
        GpuloadError: GL_ERR_OUTSIDE_PLAN when epoch or rank is outside the
        plan (naming its range), GL_ERR_NO_SHARD when it is in the plan but
        not in this shard set or its file is missing (another node's rank,
        an epoch not converted here, or one deleted by prep gc)."""
        if not 0 <= epoch < self.epochs:
            raise GpuloadError(GL_ERR_OUTSIDE_PLAN, f"gpuload: opening shard: {self.directory}: outside the plan: "
                               f"epoch {epoch} outside the plan's epochs [0, {self.epochs})")
        if not 0 <= rank < self.world_size:
            raise GpuloadError(GL_ERR_OUTSIDE_PLAN, f"gpuload: opening shard: {self.directory}: outside the plan: "
                               f"rank {rank} outside the plan's ranks [0, {self.world_size}) (world size {self.world_size})")
        ent = self.shards.get((epoch, rank))
        if ent is None:
            raise GpuloadError(GL_ERR_NO_SHARD, f"gpuload: opening shard: {self.directory}: no shard for this epoch and rank "
                               f"on this node: epoch {epoch} rank {rank} not in manifest.json (in the plan, but not "
                               "converted on this node or deleted by prep gc)")
        parts = ent["path"].split("/")
        if os.path.isabs(ent["path"]) or "\\" in ent["path"] or any(c in ("", ".", "..") for c in parts):
            # As the shard set's Go side: a path that could leave the set is
            # refused and never looked at.
            raise GpuloadError(GL_ERR_IO, f"gpuload: opening shard: {self.directory}: manifest.json: shard path "
                               f"{ent['path']!r} of epoch {epoch} rank {rank} is not a path inside the shard set")
        path = os.path.join(self.directory, *parts)
        if not os.path.lexists(path):
            raise GpuloadError(GL_ERR_NO_SHARD, f"gpuload: opening shard: {path}: no shard for this epoch and rank on "
                               "this node: the file is missing")
        return path

    def check_fingerprint(self, want):
        """Raises GL_ERR_PLAN_MISMATCH unless ``want`` is None or the plan
        fingerprint."""
        if want and want != self.fingerprint:
            raise GpuloadError(GL_ERR_PLAN_MISMATCH, f"gpuload: opening shard set: {self.directory}: shard does not match "
                               f"the plan: manifest plan fingerprint {self.fingerprint}, want {want}")

    def tensor(self, name):
        """Returns the TensorInfo named ``name`` (KeyError if none)."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def __repr__(self):
        return (f"ShardSet({self.directory!r}, world_size={self.world_size}, epochs={self.epochs}, "
                f"steps_per_epoch={self.steps_per_epoch}, batch_size={self.batch_size}, tensors={self.tensors})")


def as_step(value, what="step"):
    """Returns ``value`` as an int step: an int or integer scalar (NumPy,
    torch), never a bool, a float (2.7 is refused, not truncated to 2) or a
    string; raises GL_ERR_INVALID naming ``what`` otherwise."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise GpuloadError(GL_ERR_INVALID, f"gpuload: invalid argument: {what} {value!r} is not an integer")


def check_step(step, steps, what="step"):
    """Returns ``step`` as an int, raising GL_ERR_INVALID unless it is an
    integer (as_step) with 0 <= step <= steps."""
    step = as_step(step, what)
    if not 0 <= step <= steps:
        raise GpuloadError(GL_ERR_INVALID, f"gpuload: invalid argument: {what} {step} outside [0, {steps}]")
    return step
