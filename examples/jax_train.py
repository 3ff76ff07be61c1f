"""A JAX training loop over a prep shard set, with gpuload's NumPy iterator
(no torch): each batch is handed to the accelerator with jax.device_put
(zero-copy views of the memory-mapped shard on the host side), and the
position is saved and resumed with the same state as the PyTorch dataset.

    python3 examples/jax_train.py /local/shards [--steps N] [--state state.json]
"""

import argparse
import json
import os

import jax
import jax.numpy as jnp

import gpuload


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shards")
    ap.add_argument("--steps", type=int, default=-1, help="stop after this many batches (then save the state)")
    ap.add_argument("--state", default="state.json")
    a = ap.parse_args()
    it = gpuload.ShardIterator(a.shards)  # rank and world size from RANK/WORLD_SIZE
    if os.path.exists(a.state):
        with open(a.state) as f:
            it.load_state_dict(json.load(f))
    total, done = 0.0, 0
    for epoch in range(it.epoch, it.epochs):
        it.set_epoch(epoch)
        for batch in it:
            emb = jax.device_put(batch["emb"])              # [count, dim] on the default device
            keep = jax.device_put(~batch["pad"])
            total += float(jnp.sum(jnp.where(keep[:, None], emb, 0)))
            print(epoch, batch["step"], flush=True)
            done += 1
            if done == a.steps:
                with open(a.state, "w") as f:
                    json.dump(it.state_dict(), f)
                return
    print("sum", total)


if __name__ == "__main__":
    main()
