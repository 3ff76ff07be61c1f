#!/usr/bin/env python3
"""A real training loop over a prep shard set: PyTorch, DDP (gloo on CPU,
nccl when CUDA is present), gpuload.torch.ShardDataset, checkpoint and
resume mid-epoch.

    # the whole story on the bundled file: plan -> convert -> train two
    # epochs -> stop mid-epoch -> resume, and check the weights equal an
    # uninterrupted run's
    python3 examples/train.py --demo

    # one trainer per rank (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, ...)
    torchrun --nproc-per-node 2 examples/train.py --shards /local/shards --checkpoint ckpt.pt

The model regresses each row's hashed name bucket (name_bucket / 4096) on
its 50-dimensional F16 embedding (testdata/ml/venomx/features.yaml) in
float64; pad samples are masked out of the loss. Each rank's loss is its
masked squared-error sum divided by its batch size G/R, so DDP's gradient
average over R ranks equals one process's gradient over the whole global
batch. --stop-after N exits after N optimizer steps (saving the checkpoint);
a later run with the same --checkpoint resumes at the next step.

A jagged tensor (a list column converted with `list: {jagged: true}`, shard
format 2.0) comes in the batch as a (values, offsets) pair rather than one
[count, ...] tensor; for example, a mean-pooled bag of embedding ids:

    values, offsets = batch["hist"]                 # [N] int64, [count + 1] int64
    bag = torch.nn.EmbeddingBag(vocab, dim, mode="mean")
    pooled = bag(values.to(device), offsets[:-1].to(device))   # [count, dim]

(EmbeddingBag takes each sample's start offset; see gpuload/python/README.md
for TorchRec and torch.nested.)
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "gpuload", "python"))  # a checkout built with `make python`

from gpuload.torch import ShardDataset  # noqa: E402


def train(args):
    world = int(os.environ.get("WORLD_SIZE", "1"))
    ddp = world > 1
    cuda = torch.cuda.is_available() and not args.cpu
    if ddp:
        dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}" if cuda else "cpu")
    ds = ShardDataset(args.shards, device=str(device), elastic=args.elastic)
    loader = DataLoader(ds, batch_size=None, num_workers=args.num_workers)

    torch.manual_seed(0)
    model = torch.nn.Linear(50, 1).double().to(device)
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    done = 0  # optimizer steps taken, over all runs
    if args.checkpoint and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint)
        (model.module if ddp else model).load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        ds.load_state_dict(ck["data"])
        done = ck["done"]

    b = ds.batch_size  # this rank's share of the global batch: DDP averages the R ranks' gradients
    for epoch in range(ds.epoch, ds.epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            x = batch["emb"].to(device).double()
            y = batch["name_bucket"].to(device).double() / 4096
            keep = (~batch["pad"]).to(device).double()
            loss = (keep * (model(x).squeeze(1) - y) ** 2).sum() / b
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if args.stop_after and done == args.stop_after:
                save(args, ds, model, opt, done, ddp, next_step=batch["step"] + 1)
                print(f"rank {ds.rank}: stopped after {done} steps (epoch {epoch}, step {batch['step']})")
                return finish(ddp)
    if args.weights and ds.rank == 0:
        torch.save((model.module if ddp else model).state_dict(), args.weights)
    print(f"rank {ds.rank}: trained {done} steps over {ds.epochs} epochs, last loss {loss.item():.6g}")
    return finish(ddp)


def save(args, ds, model, opt, done, ddp, next_step):
    if ds.rank != 0 or not args.checkpoint:
        return
    state = {"model": (model.module if ddp else model).state_dict(), "opt": opt.state_dict(),
             "data": ds.state_dict(next_step=next_step), "done": done}
    tmp = args.checkpoint + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, args.checkpoint)


def finish(ddp):
    if ddp:
        dist.barrier()
        dist.destroy_process_group()
    return 0


def launch(script_args, world, env=None):
    """Runs this script as `world` DDP processes with RANK/WORLD_SIZE set."""
    procs = []
    for r in range(world):
        e = dict(os.environ, **(env or {}))
        e.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                 MASTER_PORT=e.get("MASTER_PORT", "29517"))
        if world == 1:
            for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
                e.pop(k)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + script_args, env=e))
    codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        raise SystemExit(f"train.py {' '.join(script_args)} x{world}: exit codes {codes}")


def demo(args):
    prep = os.environ.get("PREP") or shutil.which("prep") or os.path.join(ROOT, "bin", "prep")
    work = args.work or tempfile.mkdtemp(prefix="prep-train.")
    try:
        src = os.path.join(ROOT, "testdata", "ml", "venomx", "embeddings.parquet")
        plan = os.path.join(work, "plan.json")
        shards = os.path.join(work, "shards")
        subprocess.run([prep, "plan", "--source", src, "--seed", "7", "--epochs", "2", "--global-batch", "16",
                        "--world-size", "2", "--shuffle", "global", "--remainder", "pad", "-o", plan, "-q"], check=True)
        subprocess.run([prep, "convert", "--plan", plan, "--spec", os.path.join(ROOT, "testdata", "ml", "venomx",
                        "features.yaml"), "-o", shards, "-q"], check=True)
        base = ["--shards", shards] + (["--cpu"] if args.cpu else [])
        full, resumed = os.path.join(work, "full.pt"), os.path.join(work, "resumed.pt")
        ck = os.path.join(work, "ckpt.pt")
        launch(base + ["--weights", full], 2)
        launch(base + ["--checkpoint", ck, "--stop-after", "5"], 2)   # mid-epoch 0, an odd step
        launch(base + ["--checkpoint", ck, "--weights", resumed], 2)
        a, b = torch.load(full), torch.load(resumed)
        same = all(torch.equal(a[k], b[k]) for k in a)
        print(f"uninterrupted and stopped-then-resumed runs: {'identical' if same else 'DIFFERENT'} weights")
        return 0 if same else 1
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--demo", action="store_true", help="plan, convert, train, stop, resume and compare")
    ap.add_argument("--shards", help="the shard set directory")
    ap.add_argument("--checkpoint", help="checkpoint file: resumed from when present, written at --stop-after")
    ap.add_argument("--stop-after", type=int, default=0, help="stop after this many optimizer steps in all")
    ap.add_argument("--weights", help="write the final weights here (rank 0)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--elastic", action="store_true", help="allow a world size other than the plan's")
    ap.add_argument("--num-workers", type=int, default=0, help="DataLoader workers (0: in-process, zero-copy)")
    ap.add_argument("--cpu", action="store_true", help="train on CPU even when CUDA is present")
    ap.add_argument("--work", help="--demo: keep plan, shards, checkpoint and weights in this directory")
    args = ap.parse_args()
    if args.demo:
        return demo(args)
    if not args.shards:
        ap.error("--shards is required (or --demo)")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
