#!/usr/bin/env python3
"""A tiny causal language model over packed rows (prep plan --pack): every
batch is [B, L] tokens with no padding wasted, and the attention is causal
*and* document-masked, so the documents sharing a row never see each other.

    # plan -> convert -> train -> stop mid-epoch -> resume, and check the
    # weights equal an uninterrupted run's
    python3 examples/packed_lm.py --demo
    # the same over a packed mixture (prep plan --sources with a packing
    # block): 3 parts web to 1 part code, 160 documents an epoch, so web's
    # 400 documents rotate through the epochs instead of the same 120
    python3 examples/packed_lm.py --demo --mixture

The shard set holds, per packed row (feature/SPEC.md §2.9):

    tokens             int32 [B, L]   the documents' tokens, each followed by the EOD id, then pad ids
    tokens_segment_ids int32 [B, L]   1..k for the row's k documents (pieces), 0 for padding
    tokens_positions   int32 [B, L]   position within the document piece (restarts at 0)
    tokens_cu_seqlens  jagged int32   (values, offsets): row j's piece boundaries are
                                      values[offsets[j]:offsets[j+1]] = 0, n_1, n_1+n_2, ...

Query t may attend to key s when s <= t and both lie in the same segment
(segment id > 0); a padding slot attends only to itself and is left out of
the loss. The next-token loss is taken within a document only: target t+1
must be in t's segment. FlashAttention's varlen kernels take the same
information as cu_seqlens: concatenate the rows' boundaries, each shifted by
the row's start (j * L), and drop the duplicates; `cu_seqlens_of` below
does that and the demo checks it agrees with the segment ids.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from torch.utils.data import DataLoader

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "gpuload", "python"))  # a checkout built with `make python`

from gpuload.torch import ShardDataset  # noqa: E402

VOCAB, DIM = 64, 16


class TinyLM(torch.nn.Module):
    """Token and position embeddings, one causal document-masked
    self-attention layer with a residual, and an output projection."""

    def __init__(self, length):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Embedding(length, DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.out = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens, positions, segments):
        x = self.tok(tokens) + self.pos(positions)                      # [B, L, D]
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = q @ k.transpose(1, 2) / DIM ** 0.5                     # [B, L, L]
        scores = scores.masked_fill(~attention_mask(segments), float("-inf"))
        return self.out(x + torch.softmax(scores, dim=-1) @ v)         # [B, L, VOCAB]


def attention_mask(segments):
    """[B, L, L] bool: key s visible from query t (causal, same document;
    a padding slot sees only itself)."""
    n = segments.shape[1]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    same = segments.unsqueeze(2) == segments.unsqueeze(1)
    real = (segments > 0).unsqueeze(2)
    return (causal & same & real) | torch.eye(n, dtype=torch.bool)


def cu_seqlens_of(cu, length):
    """The batch's varlen boundaries (FlashAttention's cu_seqlens over the
    flattened [B * L] tokens, padding included as the last piece of a row)
    from the jagged tokens_cu_seqlens (values, offsets)."""
    values, offsets = cu
    out = [0]
    for j in range(len(offsets) - 1):
        row = values[offsets[j]:offsets[j + 1]].tolist()
        out += [j * length + b for b in row[1:]]
        if out[-1] != (j + 1) * length:
            out.append((j + 1) * length)  # the row's padding
    return torch.tensor(out, dtype=torch.int32)


def train(args):
    ds = ShardDataset(args.shards, device="cpu")
    loader = DataLoader(ds, batch_size=None)
    torch.manual_seed(0)
    model = None
    opt = None
    done = 0
    ck = torch.load(args.checkpoint) if args.checkpoint and os.path.exists(args.checkpoint) else None
    if ck is not None:
        ds.load_state_dict(ck["data"])  # the epoch and step to continue from
    for epoch in range(ds.epoch, ds.epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            tokens = batch["tokens"].long()
            segs = batch["tokens_segment_ids"].long()
            pos = batch["tokens_positions"].long()
            length = tokens.shape[1]
            if model is None:
                model = TinyLM(length).double()
                opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
                if ck is not None:
                    model.load_state_dict(ck["model"])
                    opt.load_state_dict(ck["opt"])
                    done = ck["done"]
            # The boundaries in cu_seqlens are those of the segment ids.
            cu = cu_seqlens_of(batch["tokens_cu_seqlens"], length)
            flat = segs.flatten()
            new_row = torch.arange(flat.numel()) % length == 0
            starts = torch.nonzero(new_row | torch.cat([torch.tensor([True]), flat[1:] != flat[:-1]])).flatten()
            assert torch.equal(cu[:-1].long(), starts) and cu[-1] == flat.numel(), "cu_seqlens and segment ids disagree"
            logits = model(tokens, pos, segs)
            # Next token within the same document, real rows only.
            keep = (segs[:, :-1] > 0) & (segs[:, 1:] == segs[:, :-1]) & ~batch["pad"].unsqueeze(1)
            loss = torch.nn.functional.cross_entropy(logits[:, :-1][keep], tokens[:, 1:][keep], reduction="sum") / max(1, int(keep.sum()))
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
            if args.stop_after and done == args.stop_after:
                state = {"model": model.state_dict(), "opt": opt.state_dict(), "done": done,
                         "data": ds.state_dict(next_step=batch["step"] + 1)}
                torch.save(state, args.checkpoint)
                print(f"stopped after {done} steps (epoch {epoch}, step {batch['step']})")
                return 0
    if args.weights:
        torch.save(model.state_dict(), args.weights)
    print(f"trained {done} steps, last loss {loss.item():.6g}")
    return 0


# A packed mixture (plan/PLAN.md §12.1): the weights and epoch_samples
# choose each epoch's documents, which are then packed. Each epoch packs the
# documents it draws, so a down-sampled source (web: 120 of its 400 an
# epoch) brings other documents every epoch and the epochs' packed row
# counts differ; every epoch still has the same steps.
MIXTURE = """sources:
  - name: web
    path: {web}
    weight: 3
  - name: code
    path: {code}
    weight: 1
epoch_samples: 160
packing:
  column: tokens
  length: 64
  eod: 1
  pad: 0
"""


def demo(args):
    prep = os.environ.get("PREP") or shutil.which("prep") or os.path.join(ROOT, "bin", "prep")
    work = args.work or tempfile.mkdtemp(prefix="prep-packed.")
    try:
        data = os.path.join(ROOT, "testdata", "ml", "tokens")
        plan, shards = os.path.join(work, "plan.json"), os.path.join(work, "shards")
        if args.mixture:
            sources = os.path.join(work, "sources.yaml")
            with open(sources, "w") as f:
                f.write(MIXTURE.format(web=os.path.join(data, "docs.parquet"), code=os.path.join(data, "code.parquet")))
            what = ["--sources", sources]
        else:
            what = ["--source", os.path.join(data, "docs.parquet"), "--pack", "tokens:64", "--pack-eod", "1", "--pack-pad", "0"]
        subprocess.run([prep, "plan", *what, "--seed", "3", "--epochs", "2", "--global-batch", "8",
                        "--remainder", "pad", "-o", plan, "-q"], check=True)
        if args.mixture:
            with open(plan) as f:
                pk = json.load(f)["packing"]
            print("packed rows per epoch:", [e["rows"] for e in pk["epochs"]])
        subprocess.run([prep, "convert", "--plan", plan, "--tensor", "tokens=tokens:I32", "-o", shards, "-q"], check=True)
        me = [sys.executable, os.path.abspath(__file__), "--shards", shards]
        full, resumed, ck = (os.path.join(work, n) for n in ("full.pt", "resumed.pt", "ckpt.pt"))
        stop = "20" if args.mixture else "23"
        for extra in (["--weights", full], ["--checkpoint", ck, "--stop-after", stop], ["--checkpoint", ck, "--weights", resumed]):
            out = subprocess.run(me + extra, check=True, capture_output=True, text=True).stdout
            print(out, end="")
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
    ap.add_argument("--mixture", action="store_true", help="--demo: over a packed mixture of two sources")
    ap.add_argument("--shards", help="a shard set of a packed plan, converted with --tensor tokens=tokens:I32")
    ap.add_argument("--checkpoint", help="checkpoint file: resumed from when present, written at --stop-after")
    ap.add_argument("--stop-after", type=int, default=0, help="stop after this many optimizer steps in all")
    ap.add_argument("--weights", help="write the final weights here")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--work", help="--demo: keep plan, shards, checkpoint and weights in this directory")
    args = ap.parse_args()
    if args.demo:
        return demo(args)
    if not args.shards:
        ap.error("--shards is required (or --demo)")
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
