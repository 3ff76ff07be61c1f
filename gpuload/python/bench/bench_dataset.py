#!/usr/bin/env python3
"""Batches per second of gpuload.torch.ShardDataset against the raw Loader,
host backend, same run (BENCHMARKS.md, "Python: ShardDataset"):

    make build python
    PYTHONPATH=gpuload/python /usr/bin/python3 gpuload/python/bench/bench_dataset.py [--rounds 5] [--batch G] [DIR]

Without DIR it makes a set in a temporary directory with bin/prep: 2,000
copies of the bundled venomx file (200,000 rows of 116 tensor bytes), 8
epochs, global batch G (default 4096: 475 KB batches), one rank. Each round reads every epoch once per reader:
DataLoader(ShardDataset, batch_size=None) with num_workers=2 (fork; in a
fresh process, since a parent that read batches cannot fork workers), the
raw Loader (dicts of NumPy views), and ShardDataset with num_workers=0.
Prints the median batches/s of each and the ratios as Markdown rows.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

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


def raw(d):
    """Batches/s of plain Loader iteration over every epoch."""
    import gpuload
    s = gpuload.ShardSet(d)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for e in range(s.epochs):
        with gpuload.Loader(d, e, 0) as loader:
            for _ in loader:
                n += 1
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def dataset(d, workers):
    """Batches/s of DataLoader(ShardDataset) over every epoch."""
    from torch.utils.data import DataLoader
    from gpuload.torch import ShardDataset
    ds = ShardDataset(d, rank=0, world_size=1)
    loader = DataLoader(ds, batch_size=None, num_workers=workers)
    n = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for e in range(ds.epochs):
        ds.set_epoch(e)
        for _ in loader:
            n += 1
    return n / (time.perf_counter() - t0), n / (time.process_time() - c0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--child-workers", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_workers >= 0:
        print(dataset(a.dir, a.child_workers)[0])
        return
    import torch  # noqa: F401  (import cost outside the timings)
    import gpuload
    work = None
    d = a.dir
    if d is None:
        work = tempfile.mkdtemp(prefix="gpuload-bench.")
        d = make_set(work, a.batch)
    try:
        res = {"raw": [], "ds0": [], "ds2": []}
        cpu = {"raw": [], "ds0": []}
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        for _ in range(a.rounds):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), d, "--child-workers", "2"],
                                 check=True, capture_output=True, text=True, env=env)
            res["ds2"].append(float(out.stdout))
            for k, f in (("raw", lambda: raw(d)), ("ds0", lambda: dataset(d, 0))):
                w, c = f()
                res[k].append(w)
                cpu[k].append(c)
        s = gpuload.ShardSet(d)
        med = {k: statistics.median(v) for k, v in res.items()}
        mcpu = {k: statistics.median(v) for k, v in cpu.items()}
        rng = {k: f"{min(v):,.0f}–{max(v):,.0f}" for k, v in res.items()}
        print(f"set {d}: {s.epochs} epochs x {s.steps_per_epoch} steps, {s.batch_size} samples per batch "
              f"({', '.join(f'{t.name} {t.dtype}{list(t.shape)}' for t in s.tensors)}); {a.rounds} rounds")
        print("| reader | batches/s, median (min–max) | vs raw Loader | batches per CPU-s (process) | vs raw Loader |")
        print("|---|---|---|---|---|")
        print(f"| raw `Loader` iteration (dicts of NumPy views) | {med['raw']:,.0f} ({rng['raw']}) | 1.00x | "
              f"{mcpu['raw']:,.0f} | 1.00x |")
        print(f"| `ShardDataset`, `DataLoader(batch_size=None, num_workers=0)` | {med['ds0']:,.0f} ({rng['ds0']}) | "
              f"{med['ds0'] / med['raw']:.2f}x | {mcpu['ds0']:,.0f} | {mcpu['ds0'] / mcpu['raw']:.2f}x |")
        print(f"| `ShardDataset`, `DataLoader(batch_size=None, num_workers=2)` (fork, owned copies) | {med['ds2']:,.0f} "
              f"({rng['ds2']}) | {med['ds2'] / med['raw']:.2f}x | | |")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
