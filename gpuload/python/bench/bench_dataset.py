#!/usr/bin/env python3
"""Batches per second of gpuload.torch.ShardDataset against the raw Loader,
host backend, same run (BENCHMARKS.md, "Python: ShardDataset"):

    make build python
    PYTHONPATH=gpuload/python /usr/bin/python3 gpuload/python/bench/bench_dataset.py [--rounds 5] [--batch G] [DIR]

Without DIR it makes a set in a temporary directory with bin/prep: 2,000
copies of the bundled venomx file (200,000 rows of 116 tensor bytes), 8
epochs, global batch G (default 8192: 950 KB batches; 256: 30 KB), one rank.
Each round times every reader: the in-process ones (the NumPy memmap floor,
the mapped Loader, DataLoader(ShardDataset, batch_size=None) with
num_workers=0, ds.loader() and an empty DataLoader) alternated epoch by
epoch over at least 10,000 batches, so that the load of other jobs falls on
all of them alike; then the native Loader (with and without checksums) and,
each in a fresh process, the worker readers (num_workers 2 and 4) and the
empty DataLoader with those workers: torch's own cost of one item's round
trip, which bounds what any dataset reaches under a plain DataLoader with
workers. Prints the median batches/s, µs per batch and same-run ratios as
Markdown rows.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from torch.utils.data import IterableDataset, get_worker_info

COPIES = 2000  # of the 100-row venomx file: 200,000 rows
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))


def make_set(work, batch):
    """Plans and converts the benchmark set into work/shards."""
    prep = os.environ.get("PREP") or os.path.join(ROOT, "bin", "prep")
    src = os.path.join(work, "src")
    os.makedirs(src)
    for i in range(COPIES):
        shutil.copyfile(os.path.join(ROOT, "testdata", "ml", "venomx", "embeddings.parquet"),
                        os.path.join(src, f"part-{i:03d}.parquet"))
    plan = os.path.join(work, "plan.json")
    subprocess.run([prep, "plan", "--source", src, "--seed", "1", "--epochs", "8", "--global-batch", str(batch),
                    "--world-size", "1", "--shuffle", "global", "--remainder", "drop", "-o", plan, "-q"], check=True)
    out = os.path.join(work, "shards")
    subprocess.run([prep, "convert", "--plan", plan, "--spec", os.path.join(ROOT, "testdata", "ml", "venomx",
                    "features.yaml"), "-o", out, "-q"], check=True)
    return out


def _steady(epochs):
    """(batches per wall second, batches per CPU second of this process)
    over iterables of batches, one per epoch, timed from each epoch's first
    batch to its last: the steady per-batch cost, without opening shards or
    starting workers."""
    acc = [0, 0.0, 0.0]
    for it in epochs:
        _time_epoch(it, acc)
    return acc[0] / acc[1], acc[0] / acc[2]


def _time_epoch(it, acc):
    """Adds (batches after the first, wall s, CPU s) of one epoch to acc."""
    t0 = None
    n = 0
    for _ in it:
        if t0 is None:
            t0, c0 = time.perf_counter(), time.process_time()
        else:
            n += 1
    if t0 is not None:
        acc[0] += n
        acc[1] += time.perf_counter() - t0
        acc[2] += time.process_time() - c0


def _passes(d, least=3000):
    """Passes over every epoch per measurement: at least ``least`` timed
    batches, so that one measurement is not a few milliseconds."""
    import gpuload
    s = gpuload.ShardSet(d)
    return max(1, -(-least // max(1, s.epochs * (s.steps_per_epoch - 1))))


def floor(d):
    """The floor: a NumPy memmap of each shard and, per batch, one slab view
    per tensor and the sample ids (offsets from the tensor table, read
    before the clock starts). Returns epoch(e): an iterable of epoch e's
    batches."""
    import numpy as np
    import gpuload
    from gpuload._shard import MappedShard
    s = gpuload.ShardSet(d)
    lay = []
    for e in range(s.epochs):
        sh = MappedShard(s.shard_path(e, 0))
        lay.append((sh.path, sh.data_off, sh.block_size, sh.ids_off, sh.batch_size,
                    [(t.name, t.slab_offset, t.dtype, t.shape, t.sample_bytes) for t in sh.tensors], sh.counts.tolist()))

    def epoch(path, data_off, bsz, ids_off, b, ts, counts):
        mm = np.memmap(path, np.uint8, "r")
        for k, c in enumerate(counts):
            base = data_off + k * bsz
            item = {name: mm[base + off:base + off + c * sb].view(dt).reshape((c,) + shape) for name, off, dt, shape, sb in ts}
            item["sample_ids"] = mm[ids_off + k * b * 8:ids_off + k * b * 8 + c * 8].view("<u8")
            yield item
    return lambda e: epoch(*lay[e])


def raw(d, **kw):
    """Plain Loader iteration: epoch(e)."""
    import gpuload
    s = gpuload.ShardSet(d)
    return lambda e: gpuload.Loader(d, e, 0, shard_set=s, **kw)


def dataset(d, workers, wrapper=False):
    """DataLoader(ShardDataset) (or ds.loader()): epoch(e)."""
    import warnings
    from torch.utils.data import DataLoader
    from gpuload.torch import ShardDataset
    warnings.simplefilter("ignore", RuntimeWarning)
    ds = ShardDataset(d, rank=0, world_size=1)
    if wrapper:
        loader = ds.loader(num_workers=workers, persistent_workers=workers > 0)
    else:
        loader = DataLoader(ds, batch_size=None, num_workers=workers, persistent_workers=workers > 0)

    def epoch(e):
        ds.set_epoch(e)
        return iter(loader)
    return epoch


def empty(d, workers):
    """A DataLoader(batch_size=None) over an IterableDataset that yields as
    many items per epoch as the set, each a dict of one int, with the
    collate function ShardDataset gets (the identity): what the DataLoader
    itself costs per item. epoch(e)."""
    import gpuload
    from torch.utils.data import DataLoader
    s = gpuload.ShardSet(d)
    loader = DataLoader(_Ints(s.steps_per_epoch), batch_size=None, num_workers=workers,
                        persistent_workers=workers > 0, collate_fn=_same)
    return lambda e: iter(loader)


def _same(item):
    return item


class _Ints(IterableDataset):
    """Items {"step": k} for k in range(n), worker w of W yielding steps
    w, w + W, ... (as ShardDataset does)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        steps = range(self.n) if info is None else range(self.n)[info.id::info.num_workers]
        return ({"step": k} for k in steps)


def _interleaved(d, makers, least):
    """{name: (batches per wall s, per CPU s)} of in-process readers
    (name -> epoch(e)), alternated epoch by epoch."""
    import gpuload
    s = gpuload.ShardSet(d)
    acc = {k: [0, 0.0, 0.0] for k in makers}
    for _ in range(_passes(d, least)):
        for e in range(s.epochs):
            for k, epoch in makers.items():
                _time_epoch(epoch(e), acc[k])
    return {k: (n / t, n / c) for k, (n, t, c) in acc.items()}


IN_PROCESS = ("floor", "raw", "native", "crc", "ds0", "ld0", "e0")
ALTERNATED = ("floor", "raw", "ds0", "ld0", "e0")  # epoch by epoch
READERS = [
    ("floor", "NumPy `memmap` of the shard, slab views per batch (the floor)"),
    ("raw", "`Loader` (mapped host path, dicts of read-only NumPy views)"),
    ("native", "`Loader(mapped=False)` (native ring, checksums off)"),
    ("crc", "`Loader(verify_checksums=True)` (native, every block's CRC-32C)"),
    ("ds0", "`ShardDataset`, `DataLoader(batch_size=None, num_workers=0)`"),
    ("ld0", "`ds.loader()` (in-process: iterates the dataset, no DataLoader)"),
    ("ds2", "`ShardDataset`, `num_workers=2` (fork, persistent workers)"),
    ("ds4", "`ShardDataset`, `num_workers=4` (fork, persistent workers)"),
    ("ld2", "`ds.loader(num_workers=2)` (fork, persistent workers, 16 batches per message)"),
    ("ld4", "`ds.loader(num_workers=4)` (fork, persistent workers, 16 batches per message)"),
    ("e0", "empty `DataLoader(batch_size=None)` (dicts of one int, identity collate: torch's own cost per item), "
           "`num_workers=0`"),
    ("e2", "empty `DataLoader`, `num_workers=2` (fork, persistent workers)"),
    ("e4", "empty `DataLoader`, `num_workers=4` (fork, persistent workers)"),
]


def _bytes(t):
    import numpy as np
    from gpuload._shard import NP_DTYPES
    n = NP_DTYPES[t.dtype_code].itemsize
    for x in t.shape:
        n *= x
    return n


LOADS = []  # the 1-minute load average at the start of each round
BEGIN, END = "<!-- bench_dataset.py: begin -->", "<!-- bench_dataset.py: end -->"


def measure(d, rounds):
    """{reader: [batches/s per round]} over the set in d, and {reader: [CPU
    batches/s per round]} of the in-process readers."""
    res = {k: [] for k, _ in READERS}
    cpu = {k: [] for k in IN_PROCESS}
    env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
    makers = {"floor": lambda: floor(d), "raw": lambda: raw(d), "ds0": lambda: dataset(d, 0),
              "ld0": lambda: dataset(d, 0, True), "e0": lambda: empty(d, 0)}
    alone = {"native": lambda: _steady(map(raw(d, mapped=False), _epochs(d))),
             "crc": lambda: _steady(map(raw(d, verify_checksums=True), _epochs(d)))}
    for _ in range(rounds):
        LOADS.append(os.getloadavg()[0])
        got = _interleaved(d, {k: makers[k]() for k in ALTERNATED}, 10000)
        for k in ALTERNATED:
            res[k].append(got[k][0])
            cpu[k].append(got[k][1])
        for k, fn in alone.items():
            w, c = fn()
            res[k].append(w)
            cpu[k].append(c)
        for k, _ in READERS:
            if k in IN_PROCESS:
                continue
            kind = k.rstrip("0123456789")
            cmd = [sys.executable, os.path.abspath(__file__), d, "--child-workers", k[len(kind):]]
            cmd += {"ld": ["--child-loader"], "e": ["--child-empty"]}.get(kind, [])
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            res[k].append(float(out.stdout))
    return res, cpu


def _epochs(d, least=3000):
    """Epoch numbers of every pass of a measurement."""
    import gpuload
    s = gpuload.ShardSet(d)
    return [e for _ in range(_passes(d, least)) for e in range(s.epochs)]


def table(d, res, cpu, rounds):
    """The Markdown lines of one set's results, and its target verdicts."""
    import gpuload
    s = gpuload.ShardSet(d)
    med = {k: statistics.median(v) for k, v in res.items()}
    mc = {k: max(v) for k, v in cpu.items()}  # the best round: the least disturbed by other jobs

    def ratio(k, ref, of=res):
        """The median over rounds of k's speed over ref's in the same
        round (alternated, so under the same load)."""
        return statistics.median(a / b for a, b in zip(of[k], of[ref]))
    kb = sum(_bytes(t) for t in s.tensors) * s.batch_size / 1000
    head = (f"{s.batch_size:,} samples per batch ({kb:,.0f} KB of tensors), {s.steps_per_epoch} steps x "
            f"{s.epochs} epochs; medians of {rounds} alternated rounds; ratios: the median of the same-round "
            "ratios (CPU: of the in-process readers' CPU time)")
    lines = [f"**{head}**", "", "| reader | batches/s, median (min–max) | µs per batch | vs memmap floor | "
             "vs `num_workers=0` | CPU µs per batch, best round (in-process) | CPU vs floor |", "|---|---|---|---|---|---|---|"]
    for k, label in READERS:
        v = res[k]
        c = f"{1e6 / mc[k]:.1f} | {ratio(k, 'floor', cpu):.2f}x" if k in mc else "| "
        lines.append(f"| {label} | {med[k]:,.0f} ({min(v):,.0f}–{max(v):,.0f}) | {1e6 / med[k]:.1f} | "
                     f"{ratio(k, 'floor'):.2f}x | {ratio(k, 'ds0'):.2f}x | {c} |")
    verdict = []
    for k, ref, want, what in (("raw", "floor", 0.9, "`Loader` >= 0.9x the memmap floor"),
                               ("ds0", "floor", 0.9, "`ShardDataset` (`num_workers=0`) >= 0.9x the memmap floor"),
                               ("ld0", "floor", 0.9, "`ds.loader()` (in-process) >= 0.9x the memmap floor"),
                               ("ds2", "ds0", 0.5, "`DataLoader(num_workers=2)` >= 0.5x `num_workers=0`"),
                               ("ds4", "ds0", 0.5, "`DataLoader(num_workers=4)` >= 0.5x `num_workers=0`"),
                               ("ld2", "ds0", 0.5, "`ds.loader(num_workers=2)` >= 0.5x `num_workers=0`"),
                               ("ld4", "ds0", 0.5, "`ds.loader(num_workers=4)` >= 0.5x `num_workers=0`")):
        r = ratio(k, ref)
        line = f"{what}: {r:.2f}x wall, {'met' if r >= want else '**missed**'}"
        if k in mc and ref in mc:
            rc = ratio(k, ref, cpu)
            line += f"; {rc:.2f}x CPU, {'met' if rc >= want else '**missed**'}"
        if k.startswith("ds") and k != "ds0":
            e = "e" + k[2:]
            line += (f" (torch's own round trip, the empty `DataLoader` with the same workers: {1e6 / med[e]:.0f} µs "
                     f"per item, {ratio(e, ref):.2f}x `num_workers=0`)")
        verdict.append(line)
    lines += ["", f"Checksums on (`verify_checksums=True`, native): {1e6 / med['crc']:.0f} µs per batch against "
              f"{1e6 / med['raw']:.1f} µs mapped.", "",
              f"The `DataLoader`'s own cost per item (the empty `DataLoader`, same run): {1e6 / med['e0']:.1f} µs "
              f"in-process (best round's CPU: {1e6 / mc['e0']:.1f} µs), {1e6 / med['e2']:.0f} µs with 2 workers, "
              f"{1e6 / med['e4']:.0f} µs with 4. `ShardDataset` adds {1e6 / med['ds0'] - 1e6 / med['e0']:.1f} µs "
              f"per batch in-process (CPU: {1e6 / mc['ds0'] - 1e6 / mc['e0']:.1f} µs), "
              f"{1e6 / med['ds2'] - 1e6 / med['e2']:.0f} µs with 2 workers, "
              f"{1e6 / med['ds4'] - 1e6 / med['e4']:.0f} µs with 4.", ""]
    return lines, verdict


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", default="8192", help="global batch sizes, comma-separated (one set each)")
    ap.add_argument("--work", help="keep the generated sets here (reused when present)")
    ap.add_argument("--update", help="rewrite the section between this script's markers in this Markdown file")
    ap.add_argument("--child-workers", type=int, default=-1, help=argparse.SUPPRESS)
    ap.add_argument("--child-loader", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-empty", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_workers >= 0:
        epoch = empty(a.dir, a.child_workers) if a.child_empty else dataset(a.dir, a.child_workers, a.child_loader)
        print(_steady(map(epoch, _epochs(a.dir)))[0])
        return
    import torch  # noqa: F401  (import cost outside the timings)
    work = a.work or tempfile.mkdtemp(prefix="gpuload-bench.")
    try:
        dirs = [a.dir] if a.dir else []
        if not dirs:
            for g in a.batch.split(","):
                w = os.path.join(work, f"batch-{int(g)}")
                if not os.path.isfile(os.path.join(w, "shards", "manifest.json")):
                    shutil.rmtree(w, ignore_errors=True)
                    os.makedirs(w)
                    make_set(w, int(g))
                dirs.append(os.path.join(w, "shards"))
        out, verdicts = [], []
        for d in dirs:
            lines, v = table(d, *measure(d, a.rounds), a.rounds)
            out += lines
            verdicts += [f"- {d.split(os.sep)[-2] if not a.dir else d}: {x}" for x in v]
        LOADS.append(os.getloadavg()[0])
        cmd = "PYTHONPATH=gpuload/python /usr/bin/python3 gpuload/python/bench/bench_dataset.py " + \
            " ".join(sys.argv[1:])
        text = [f"Measured by `make bench` (`{cmd}`) on {time.strftime('%Y-%m-%d', time.gmtime())}, "
                f"{os.cpu_count()} CPUs, 1-minute load average {min(LOADS):.1f}–{max(LOADS):.1f} (taken at each round's start "
                "and at the end; other jobs share the machine). Each reader is timed from each epoch's "
                "first batch to its last (the steady per-batch cost, without opening shards or starting workers). "
                "The in-process readers but the native ones run alternated epoch by epoch within each round, "
                "10,000 batches or more each, so that other jobs' load falls on all of them alike; the native "
                "ones and the worker readers 3,000 batches or more, the workers with `persistent_workers=True`, "
                "each reader in a fresh process. The empty `DataLoader` yields dicts of one int with the identity "
                "as collate function (what `ShardDataset` gets): torch's own cost per item. Set: 2,000 copies of the "
                "venomx file (200,000 rows of 116 tensor bytes: `emb` F16[50], `id` I64, `name_bucket` I64), "
                "one rank, global shuffle.", ""] + out + ["Targets:", ""] + verdicts + [""]
        print("\n".join(text))
        if a.update:
            with open(a.update) as f:
                doc = f.read()
            i, j = doc.index(BEGIN) + len(BEGIN), doc.index(END)
            with open(a.update, "w") as f:
                f.write(doc[:i] + "\n" + "\n".join(text) + doc[j:])
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
