#!/usr/bin/env python3
"""End-to-end training study: the same small recsys MLP fed four ways.

The measure of the study prep answers (GPUs at 10-15 % utilization because
every step read Parquet, converted PyArrow to NumPy and copied to the GPU):

  ceiling  the model alone: one batch already on the device, every step;
  (a)      prep shards through the CUDA backend: gpuload.torch.ShardDataset
           (device="cuda", tensors wrapped by DLPack, no copy), or, where that
           package has no torch module, gpuload.Loader(backend="cuda") with
           torch.from_dlpack;
  (b)      the study's bottleneck path: pyarrow.parquet -> to_numpy ->
           torch.from_numpy -> .cuda(), in a DataLoader with W worker
           processes, best of W = 0, 4, 8;
  (c)      prep shards through the host backend: ShardDataset in a
           DataLoader(pin_memory=True), then .cuda(non_blocking=True) (or
           the Loader's views, .pin_memory() and .cuda(non_blocking=True)).

For each: steps/s, x the ceiling, GPU utilization (nvidia-smi sampled every
100 ms while timed), CPU cores busy (user+system time of this process and
its DataLoader workers over wall time) and the data path's share of them
(cores busy minus the ceiling's, which is the trainer's own Python and
kernel launches). The batch (4096 samples by default) holds dense F32 [13],
hashed categorical ids I64 [26], a history list I64 [20] with its lengths,
and an F32 label: the layout of bench/e2e/features.yaml over the Parquet
files of bench/cmd/e2edata. scripts/gpu-check.sh writes both and runs this.

What is missing is detected and reported, never guessed: without torch
nothing runs; without pyarrow (b) is skipped; without a CUDA device the run
stops at once unless --dry-run, which runs the parts that need no GPU on the
CPU (the ceiling, (c) without pinning, (b) when pyarrow is present) with a
few steps, to check the script itself.

    python3 bench/e2e/train_e2e.py --data DIR --shards DIR [--lib libgpuload.so] [--json out.json]
"""

import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import threading
import time
import warnings

BATCH = 4096
DENSE, CATS, HIST, BUCKETS = 13, 26, 20, 100_000
KEYS = ("dense", "cats", "hist", "hist_lengths", "label")  # the tensors the model reads


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def detect():
    """Returns (modules, notes): what is importable, and one note per gap."""
    have, notes = {}, []
    try:
        import numpy
        have["numpy"] = numpy.__version__
    except ImportError as e:
        notes.append(f"numpy missing ({e}): nothing can run")
    try:
        import torch
        have["torch"] = torch.__version__
        have["cuda"] = bool(torch.cuda.is_available())
        if not have["cuda"]:
            notes.append("torch has no CUDA device (torch.cuda.is_available() is False)")
    except ImportError as e:
        notes.append(f"torch missing ({e}): nothing can run")
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
        have["pyarrow"] = pyarrow.__version__
    except ImportError as e:
        notes.append(f"pyarrow missing ({e}): (b) pyarrow -> NumPy -> torch is skipped")
    return have, notes


def import_gpuload(repo, lib):
    """Imports the gpuload package, installed or from the repository, with
    its library at lib ($GPULOAD_LIB) when given, and its torch module
    (gpuload.torch) when it has one (None otherwise)."""
    if lib:
        os.environ["GPULOAD_LIB"] = os.path.abspath(lib)
    try:
        import gpuload
        where = "installed"
    except ImportError:
        sys.path.insert(0, os.path.join(repo, "gpuload", "python"))
        import gpuload
        where = "from " + os.path.join(repo, "gpuload", "python")
    try:
        import gpuload.torch as gtorch
    except ImportError:
        gtorch = None
    return gpuload, gtorch, where


# ---- CPU and GPU accounting -------------------------------------------------

_TCK = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    rest = s[s.rindex(")") + 2:].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / _TCK  # ppid, utime+stime


def tree_cpu_seconds(exclude=()):
    """User+system CPU seconds of this process and its live descendants."""
    me = os.getpid()
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                procs[int(d)] = _stat(d)
            except (OSError, ValueError, IndexError):
                pass
    kids = collections.defaultdict(list)
    for pid, (ppid, _) in procs.items():
        kids[ppid].append(pid)
    total, todo = 0.0, [me]
    while todo:
        p = todo.pop()
        if p in exclude or p not in procs:
            continue
        total += procs[p][1]
        todo.extend(kids[p])
    return total


class GPUSampler:
    """Samples utilization.gpu with nvidia-smi every 100 ms while running."""

    def __init__(self, device):
        self.samples, self.proc, self.pid = [], None, None
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits", "-i", str(device), "-lms", "100"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.pid = self.proc.pid
        except OSError:
            return
        self.on = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if self.on:
                try:
                    self.samples.append(float(line.strip()))
                except ValueError:
                    pass

    def start(self):
        self.samples = []
        self.on = True

    def stop(self):
        self.on = False
        return sum(self.samples) / len(self.samples) if self.samples else None

    def close(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()


# ---- the model ---------------------------------------------------------------

def make_model(torch, device, hidden):
    nn = torch.nn

    class RecMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.cat_emb = nn.Embedding(BUCKETS, 16)
            self.hist_emb = nn.Embedding(BUCKETS, 16)
            layers, width = [], DENSE + CATS * 16 + 16
            for h in hidden:
                layers += [nn.Linear(width, h), nn.ReLU()]
                width = h
            layers.append(nn.Linear(width, 1))
            self.mlp = nn.Sequential(*layers)
            self.register_buffer("pos", torch.arange(HIST))

        def forward(self, dense, cats, hist, hist_len):
            c = self.cat_emb(cats).flatten(1)
            n = hist_len.to(torch.float32).clamp(min=1).unsqueeze(1)
            mask = (self.pos.unsqueeze(0) < hist_len.unsqueeze(1)).unsqueeze(2)
            h = (self.hist_emb(hist) * mask).sum(1) / n
            return self.mlp(torch.cat([dense, c, h], 1)).squeeze(1)

    model = RecMLP().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def step(b):
        logits = model(b["dense"], b["cats"], b["hist"], b["hist_lengths"])
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, b["label"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


# ---- the feeds -----------------------------------------------------------------

def hold_until_done(torch, batches):
    """Yields each batch of device tensors and keeps it alive two steps
    longer, until an event recorded after its step completes: a batch's ring
    slot is given back when its tensors are dropped, and the kernels queued
    by its step may still be reading it."""
    held = collections.deque()
    try:
        for t in batches:
            yield t
            ev = torch.cuda.Event()
            ev.record()
            held.append((ev, t))
            if len(held) > 2:
                held.popleft()[0].synchronize()
    finally:
        held.clear()


def feed_prep_cuda(gpuload, gtorch, torch, shards, device):
    """(a): device tensors straight from the loader's device buffers, the
    shard read again from step 0 at its end."""
    if gtorch is not None:
        ds = gtorch.ShardDataset(shards, rank=0, world_size=1, device=f"cuda:{device}", prefetch=6)

        def passes():
            while True:
                yield from ds
        yield from hold_until_done(torch, passes())
        return
    loader = gpuload.Loader(shards, 0, 0, backend="cuda", device=device, prefetch=6)

    def batches():
        while True:
            for b in loader.batches():
                yield {k: torch.from_dlpack(v) for k, v in b.tensors.items()}
            loader.seek(0)
    try:
        yield from hold_until_done(torch, batches())
    finally:
        loader.close()


def feed_prep_host(gpuload, gtorch, torch, shards, device):
    """(c): host tensors pinned and copied without blocking (CPU: as they are)."""
    cuda = device != "cpu"
    if gtorch is not None:
        ds = gtorch.ShardDataset(shards, rank=0, world_size=1, device="cpu", prefetch=6)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0, pin_memory=cuda)
        while True:
            for b in dl:
                yield {k: b[k].to(device, non_blocking=True) for k in KEYS}
    loader = gpuload.Loader(shards, 0, 0, backend="host", prefetch=6)
    try:
        while True:
            for t in loader:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # the views are read-only
                    if cuda:
                        yield {k: torch.from_numpy(v).pin_memory().cuda(non_blocking=True) for k, v in t.items()}
                    else:
                        yield {k: torch.from_numpy(v) for k, v in t.items()}
            loader.seek(0)
    finally:
        loader.close()


def pad_lists(offsets, values, width):
    """Pads list rows (Arrow offsets into values) with zeros to [rows, width]
    and returns them with their lengths (int32): the study's per-step
    conversion of a list column, done with NumPy."""
    import numpy as np
    lengths = np.diff(offsets).astype(np.int32)
    out = np.zeros((len(lengths), width), values.dtype)
    out[np.arange(width)[None, :] < lengths[:, None]] = values[offsets[0]:offsets[-1]]
    return out, lengths


def parquet_dataset(torch, files, batch):
    import numpy as np
    import pyarrow.parquet as pq

    class ParquetBatches(torch.utils.data.IterableDataset):
        """The study's path: row groups round-robin over workers, each record
        batch's columns to_numpy, stacked and padded, torch.from_numpy."""

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            wid, nw = (info.id, info.num_workers) if info else (0, 1)
            units = [(f, g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]
            while True:
                for i, (f, g) in enumerate(units):
                    if i % nw != wid:
                        continue
                    for rb in pq.ParquetFile(f).iter_batches(batch_size=batch, row_groups=[g]):
                        if rb.num_rows < batch:
                            continue
                        dense = np.stack([rb.column(f"d{j:02d}").to_numpy() for j in range(DENSE)], 1)
                        cats = np.stack([rb.column(f"c{j:02d}").to_numpy() for j in range(CATS)], 1)
                        h = rb.column("hist")
                        hist, lengths = pad_lists(h.offsets.to_numpy(), h.values.to_numpy(), HIST)
                        label = rb.column("label").to_numpy()
                        yield {"dense": torch.from_numpy(dense), "cats": torch.from_numpy(cats), "hist": torch.from_numpy(hist),
                               "hist_lengths": torch.from_numpy(lengths), "label": torch.from_numpy(label)}

    return ParquetBatches()


def feed_pyarrow(torch, files, workers, device):
    """(b): a DataLoader over ParquetBatches, .cuda() in the trainer."""
    ds = parquet_dataset(torch, files, BATCH)
    kw = {"num_workers": workers}
    if workers:
        kw.update(persistent_workers=True, prefetch_factor=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, **kw)
    for b in dl:
        yield {k: v.to(device) for k, v in b.items()} if device != "cpu" else b


def feed_ceiling(torch, first, device):
    """The ceiling: one batch already on the device, every step."""
    b = {k: v.to(device).clone() for k, v in first.items()}
    while True:
        yield b


# ---- measuring ------------------------------------------------------------------

def measure(torch, step, feed, warmup, steps, min_seconds, device, sampler, exclude):
    """Steps through warmup batches, then times at least `steps` steps and
    at least min_seconds (so nvidia-smi gets enough 100 ms samples)."""
    it = iter(feed)
    for _ in range(warmup):
        step(next(it))
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    sync()
    if sampler:
        sampler.start()
    c0, t0 = tree_cpu_seconds(exclude), time.perf_counter()
    n = 0
    while n < steps or time.perf_counter() - t0 < min_seconds:
        step(next(it))
        n += 1
        if n % 50 == 0:
            sync()  # bound the queue of launched steps, so the clock counts finished work
    sync()
    wall = time.perf_counter() - t0
    cores = (tree_cpu_seconds(exclude) - c0) / wall
    util = sampler.stop() if sampler else None
    close = getattr(it, "close", None)
    if close:
        close()
    return {"steps_per_s": n / wall, "steps": n, "gpu_util": util, "cores": cores}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="folder of the e2edata Parquet files")
    ap.add_argument("--shards", required=True, help="the shard set prep convert wrote from them")
    ap.add_argument("--lib", default=os.environ.get("GPULOAD_LIB"), help="libgpuload.so (default: $GPULOAD_LIB, else the package's own)")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300, help="timed steps per measurement")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--min-seconds", type=float, default=3.0, help="least timed wall time per measurement")
    ap.add_argument("--workers", default="0,4,8", help="DataLoader workers tried for (b)")
    ap.add_argument("--hidden", default="512,256", help="MLP widths")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: run what runs on the CPU, a few steps")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

    have, notes = detect()
    for n in notes:
        log("train_e2e: " + n)
    if "torch" not in have or "numpy" not in have:
        log("train_e2e: skipped: needs torch and numpy")
        return 3
    import torch
    if not have.get("cuda") and not args.dry_run:
        log("train_e2e: no CUDA device: this measure needs an NVIDIA GPU (use --dry-run to check the CPU parts)")
        return 2
    gpuload, gtorch, where = import_gpuload(repo, args.lib)
    log(f"train_e2e: torch {have['torch']}, pyarrow {have.get('pyarrow', 'absent')}, gpuload {where}, "
        f"{'gpuload.torch.ShardDataset' if gtorch else 'gpuload.Loader (no gpuload.torch)'} for (a) and (c)")
    device = "cpu" if args.dry_run else f"cuda:{args.device}"
    if args.dry_run:
        args.steps, args.warmup, args.min_seconds = min(args.steps, 3), min(args.warmup, 1), 0
        torch.set_num_threads(1)
    hidden = [int(h) for h in args.hidden.split(",") if h]
    files = sorted(glob.glob(os.path.join(args.data, "*.parquet")))
    step = make_model(torch, device, hidden)
    sampler = GPUSampler(args.device) if not args.dry_run else None
    exclude = {sampler.pid} if sampler and sampler.pid else set()

    results, skipped = {}, []
    head = feed_prep_host(gpuload, None, torch, args.shards, "cpu")
    first = {k: v.clone() for k, v in next(head).items()}  # copies before the views go
    head.close()
    results["ceiling"] = measure(torch, step, feed_ceiling(torch, first, device), args.warmup, args.steps, args.min_seconds, device, sampler, exclude)
    if args.dry_run:
        skipped.append("(a) prep CUDA backend: needs a CUDA GPU")
    else:
        results["a"] = measure(torch, step, feed_prep_cuda(gpuload, gtorch, torch, args.shards, args.device),
                               args.warmup, args.steps, args.min_seconds, device, sampler, exclude)
    if "pyarrow" in have and files:
        best = None
        for w in [int(x) for x in args.workers.split(",") if x]:
            r = measure(torch, step, feed_pyarrow(torch, files, w, device), args.warmup, args.steps, args.min_seconds, device, sampler, exclude)
            r["workers"] = w
            results[f"b_w{w}"] = r
            if best is None or r["steps_per_s"] > best["steps_per_s"]:
                best = r
        results["b"] = best
    else:
        skipped.append("(b) pyarrow -> NumPy -> torch: " + ("pyarrow missing" if "pyarrow" not in have else f"no Parquet files in {args.data}"))
    results["c"] = measure(torch, step, feed_prep_host(gpuload, gtorch, torch, args.shards, device),
                           args.warmup, args.steps, args.min_seconds, device, sampler, exclude)
    if sampler:
        sampler.close()

    ceil = results["ceiling"]
    names = {"ceiling": "model alone (batch on device)", "a": "(a) prep cuda + DLPack",
             "c": "(c) prep host + pin_memory" if device != "cpu" else "(c) prep host (CPU: no pinning)"}
    for k in results:
        if k.startswith("b_w"):
            names[k] = f"(b) pyarrow DataLoader W={results[k]['workers']}"
    names["b"] = "(b) best of W"
    print(f"end to end: batch {BATCH}, MLP {hidden}, at least {args.steps} timed steps and {args.min_seconds:g} s each, device {device}")
    print(f"{'feed':38s} {'steps/s':>9s} {'x ceil':>7s} {'x (b)':>7s} {'GPU util':>9s} {'cores':>6s} {'data cores':>10s}")
    for k, r in results.items():
        xb = r["steps_per_s"] / results["b"]["steps_per_s"] if "b" in results else None
        util = f"{r['gpu_util']:.0f}%" if r["gpu_util"] is not None else "n/a"
        data = r["cores"] - ceil["cores"] if k != "ceiling" else 0.0
        r["data_cores"] = data
        print(f"{names[k]:38s} {r['steps_per_s']:9.1f} {r['steps_per_s'] / ceil['steps_per_s']:7.2f} "
              f"{(f'{xb:.1f}' if xb else '-'):>7s} {util:>9s} {r['cores']:6.2f} {data:10.2f}")
    for s in skipped:
        print("skipped: " + s)
    print("targets: (a) >= 10x (b), >= 0.9x the ceiling, <= 1 core for the data path; (c) stated beside them")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "batch": BATCH, "hidden": hidden, "steps": args.steps, "results": results,
                       "skipped": skipped, "have": have}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
