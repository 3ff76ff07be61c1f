"""gpuload: prep's training-time shard reader for Python (ctypes over
libgpuload.so, NumPy, DLPack; a PyTorch dataset in ``gpuload.torch``).

Install into a virtual environment (Go and gcc build the native library
into the package)::

    pip install --no-build-isolation ./gpuload/python   # or: make python

Read one rank's shard::

    import gpuload
    with gpuload.Loader("/local/shards", epoch=0, rank=3) as loader:
        for batch in loader:              # dict: tensor name -> numpy array
            train_step(batch["x"], batch["y"])

Host read path: on the host backend without checksums, ``Loader``,
``ShardIterator`` (dicts of NumPy arrays, no torch) and
``gpuload.torch.ShardDataset`` read the memory-mapped shard in pure NumPy:
no native library is loaded, so any process, forked or not, can read.

Fork safety: metadata (``ShardSet``, ``Loader.steps``, ``world_size``, ...)
is read in pure Python; the native library is loaded when the first batch
is read, in the process that reads it. A process forked after the library
was loaded cannot use it (a Go runtime does not survive fork): any use
there raises ``ForkError`` naming the fix, never hangs.

Lifetimes on the mapped path (the host default): arrays are read-only
views of the memory-mapped shard, each keeping the mapping alive, so any
number of batches may be held and values never change under a view.

Lifetimes on the native path (``mapped=False``, checksums, CUDA): host
arrays are read-only zero-copy views into the loader's ring;
a batch's slot is held while the iterator is on it *and* while any view,
``DLPackTensor`` or exported capsule made from it lives, so values never
change under a live view (holding more than ``Loader.ring`` batches raises
GL_ERR_RING_FULL). ``close()`` never invalidates memory still referenced:
the native loader is freed after the last view is dropped; new exports
from a closed loader's batches raise GL_ERR_CLOSED. ``copy=True`` yields
owned copies.

Jagged tensors (shard format 2.0, a variable number of values per
sample) come as ``Jagged(values, offsets)`` pairs: ``values`` is
``[N, per-value shape...]``, ``offsets`` int64 ``[count + 1]``, sample j's
values ``values[offsets[j]:offsets[j + 1]]``.

CUDA backend (``backend="cuda"``): the values are ``DLPackTensor`` objects
implementing ``__dlpack__``/``__dlpack_device__``, so ``torch.from_dlpack(t)``
wraps the device memory with no copy.

The library is ``libgpuload.so`` inside this package, or ``$GPULOAD_LIB``.
"""

from ._errors import (GL_EOF, GL_ERR_CLOSED, GL_ERR_CORRUPT, GL_ERR_CUDA, GL_ERR_FORKED, GL_ERR_INVALID, GL_ERR_IO,
                      GL_ERR_NO_LIBRARY, GL_ERR_NO_SHARD, GL_ERR_NO_SHARD_SET, GL_ERR_OUTSIDE_PLAN,
                      GL_ERR_PLAN_MISMATCH, GL_ERR_RING_FULL, GL_OK, ForkError, GpuloadError, LibraryError)
from ._dataset import ShardIterator
from ._loader import KDL_CPU, KDL_CUDA, NP_DTYPES, Batch, DLPackTensor, Jagged, Loader, MappedBatch
from ._meta import ShardSet, TensorInfo
from ._native import library_path

__all__ = [
    "Loader", "Batch", "MappedBatch", "ShardIterator", "DLPackTensor", "Jagged", "ShardSet", "TensorInfo", "GpuloadError", "ForkError", "LibraryError",
    "library_path", "KDL_CPU", "KDL_CUDA", "NP_DTYPES",
    "GL_OK", "GL_EOF", "GL_ERR_INVALID", "GL_ERR_NO_SHARD", "GL_ERR_PLAN_MISMATCH", "GL_ERR_CORRUPT", "GL_ERR_CUDA",
    "GL_ERR_RING_FULL", "GL_ERR_CLOSED", "GL_ERR_IO", "GL_ERR_NO_SHARD_SET", "GL_ERR_OUTSIDE_PLAN", "GL_ERR_FORKED",
    "GL_ERR_NO_LIBRARY",
]

__version__ = "0.2.0"
