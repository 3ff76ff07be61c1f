"""Tests of gpuload.torch.ShardDataset against shard sets made by the prep
binary from the bundled venomx file (100 rows; id = row index), run by
`make test` (test-python) with /usr/bin/python3, Debian's python3-torch:

    PREP=bin/prep PYTHONPATH=gpuload/python python3 gpuload/python/tests/test_torch.py

Every batch is checked against `prep plan show --json` (sample ids and pad
flags, in order) and every value against the row its sample id names.
"""

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import numpy as np
import torch
from torch.utils.data import DataLoader

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(TESTS)))
# GPULOAD_TEST_INSTALLED=1: test the installed package (a wheel in a venv),
# not this checkout's.
PKGPATH = [] if os.environ.get("GPULOAD_TEST_INSTALLED") else [os.path.dirname(TESTS)]
sys.path[:0] = PKGPATH
import gpuload  # noqa: E402
from gpuload.torch import ShardDataset  # noqa: E402

PREP = os.environ.get("PREP") or os.path.join(ROOT, "bin", "prep")
SRC = os.path.join(ROOT, "testdata", "ml", "venomx", "embeddings.parquet")
SPEC = os.path.join(ROOT, "testdata", "ml", "venomx", "features.yaml")
N = 100
WORK = None
SETS = {}


def prep(*args):
    return subprocess.run([PREP, *args], check=True, capture_output=True, text=True).stdout


def make_set(name, world, remainder="pad", seed=7, spec=SPEC, tensors=(), workers=2):
    """Plans and converts a set: global batch 16, 2 epochs, global shuffle."""
    plan = os.path.join(WORK, name + ".json")
    out = os.path.join(WORK, name)
    prep("plan", "--source", SRC, "--seed", str(seed or 0), "--epochs", "2", "--global-batch", "16", "--world-size",
         str(world), "--workers", str(workers), "--shuffle", "global" if seed is not None else "none",
         "--remainder", remainder, "-o", plan, "-q")
    args = ["convert", "--plan", plan, "-o", out, "-q"] + (["--spec", spec] if spec else [])
    for t in tensors:
        args += ["--tensor", t]
    prep(*args)
    SETS[name] = (plan, out)
    return out


def plan_show(name, epoch, rank):
    """[(step, ids, pad)] of `prep plan show --json`."""
    d = json.loads(prep("plan", "show", SETS[name][0], "--epoch", str(epoch), "--rank", str(rank), "--json"))
    return [(b["step"], b["samples"], b["pad"]) for b in d["batches"]]


def items(ds, **kw):
    """The dataset's items through a DataLoader, tensors copied (a zero-copy
    item holds its ring slot while it lives)."""
    return [{k: v.clone() if torch.is_tensor(v) else v for k, v in it.items()}
            for it in DataLoader(ds, batch_size=None, **kw)]


def setUpModule():
    global WORK, REF
    WORK = tempfile.mkdtemp(prefix="gpuload-torch.")
    make_set("r2", 2)
    make_set("r4", 4)
    make_set("r1", 1)
    make_set("p2", 2, remainder="partial")
    make_set("p4", 4, remainder="partial")
    make_set("p1", 1, remainder="partial")
    make_set("seed8", 2, seed=8)
    # Reference rows by sample id: no shuffle, one rank, no pads.
    ref = make_set("ref", 1, remainder="partial", seed=None)
    REF = {}
    for b in DataLoader(ShardDataset(ref, rank=0, world_size=1), batch_size=None):
        for j, i in enumerate(b["sample_ids"].tolist()):
            REF[i] = {k: b[k][j].clone() for k in ("emb", "id", "name_bucket")}
    assert sorted(REF) == list(range(N)), sorted(REF)


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


class Case(unittest.TestCase):
    def check_values(self, item):
        ids = item["sample_ids"].tolist()
        self.assertEqual(item["sample_ids"].dtype, torch.int64)
        self.assertEqual(item["pad"].dtype, torch.bool)
        for k in ("emb", "id", "name_bucket"):
            self.assertEqual(item[k].shape[0], len(ids))
            for j, i in enumerate(ids):
                self.assertTrue(torch.equal(item[k][j], REF[i][k]), f"step {item['step']} {k} row {j} (id {i})")

    def check_plan(self, items, want):
        self.assertEqual([(it["step"], it["sample_ids"].tolist(), it["pad"].tolist()) for it in items], want)


class DatasetTest(Case):
    def test_plan_order_and_values_in_process(self):
        for rank in (0, 1):
            for epoch in (0, 1):
                ds = ShardDataset(SETS["r2"][1], rank=rank, world_size=2, epoch=epoch)
                seen = []
                for it in DataLoader(ds, batch_size=None):  # zero-copy views, checked as they stream
                    self.check_values(it)
                    self.assertEqual(it["emb"].dtype, torch.float16)
                    self.assertEqual(tuple(it["emb"].shape), (8, 50))
                    self.assertEqual(it["id"].dtype, torch.int64)
                    seen.append((it["step"], it["sample_ids"].tolist(), it["pad"].tolist()))
                self.assertEqual(seen, plan_show("r2", epoch, rank))
        self.assertEqual(seen[-1][2], [True] * 8)  # rank 1's last batch is all pads

    def test_len_epochs_and_state(self):
        ds = ShardDataset(SETS["r2"][1], rank=0, world_size=2)
        self.assertEqual((len(ds), ds.epochs, ds.batch_size, ds.epoch), (7, 2, 8, 0))
        it = iter(DataLoader(ds, batch_size=None))
        for _ in range(3):
            held = next(it)
        st = ds.state_dict()
        plan, _ = SETS["r2"]
        with open(plan) as f:
            p = json.load(f)
        self.assertEqual(st, {"format": "gpuload-dataset/v1", "plan_fingerprint": p["fingerprint"],
                              "order_fingerprint": p["order_fingerprint"], "world_size": 2, "epoch": 0, "step": 3})
        del it
        self.check_values(held)  # still valid after the iterator (and its loader) closed
        ds2 = ShardDataset(SETS["r2"][1], rank=0, world_size=2)
        ds2.load_state_dict(st)
        ds2.set_epoch(0)  # the loaded position is kept for its own epoch
        self.check_plan(items(ds2), plan_show("r2", 0, 0)[3:])
        ds2.set_epoch(1)
        self.assertEqual(ds2.state_dict()["step"], 0)
        self.check_plan(items(ds2), plan_show("r2", 1, 0))
        ds2.set_epoch(0)  # the resume applied to epoch 0's first pass only
        self.assertEqual(len(items(ds2)), 7)

    def test_state_from_another_plan_is_refused(self):
        other = ShardDataset(SETS["seed8"][1], rank=0, world_size=2).state_dict(next_step=2)
        ds = ShardDataset(SETS["r2"][1], rank=0, world_size=2)
        with self.assertRaises(gpuload.GpuloadError) as cm:
            ds.load_state_dict(other)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_PLAN_MISMATCH)
        self.assertIn("state from another plan: order fingerprint " + other["order_fingerprint"], str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError):
            ds.load_state_dict({"epoch": 0, "step": 1})

    def test_rank_and_world_size_from_the_environment(self):
        env = dict(os.environ)
        try:
            os.environ.update(RANK="1", WORLD_SIZE="2")
            ds = ShardDataset(SETS["r2"][1])
            self.assertEqual((ds.rank, ds.world_size), (1, 2))
            os.environ.update(RANK="3", WORLD_SIZE="4")
            with self.assertRaises(gpuload.GpuloadError) as cm:
                ShardDataset(SETS["r2"][1])
            self.assertEqual(cm.exception.code, gpuload.GL_ERR_PLAN_MISMATCH)
            self.assertIn("world size 4 (from RANK/WORLD_SIZE) differs from the plan's 2", str(cm.exception))
            self.assertIn("elastic=True", str(cm.exception))
            del os.environ["RANK"], os.environ["WORLD_SIZE"]
            os.environ.update(SLURM_PROCID="1", SLURM_NTASKS="2")
            self.assertEqual(ShardDataset(SETS["r2"][1]).rank, 1)
            del os.environ["SLURM_PROCID"], os.environ["SLURM_NTASKS"]
            with self.assertRaises(gpuload.GpuloadError) as cm:
                ShardDataset(SETS["r2"][1])  # no launcher: one process, but the plan has 2 ranks
            self.assertIn("world size 1 (from default (no launcher variables set)) differs from the plan's 2",
                          str(cm.exception))
            with self.assertRaises(gpuload.GpuloadError) as cm:
                ShardDataset(SETS["r2"][1], rank=0, world_size=3, elastic=True)
            self.assertIn("world size 3 does not divide the plan's global batch 16", str(cm.exception))
        finally:
            os.environ.clear()
            os.environ.update(env)

    def test_elastic_reads_equal_a_fresh_convert(self):
        # R' = 2R, R' = R/2, and with remainder partial (short and empty
        # batches); both epochs, every rank.
        for old, new, world in (("r2", "r4", 4), ("r2", "r1", 1), ("p2", "p4", 4), ("p2", "p1", 1), ("r4", "r2", 2)):
            for rank in range(world):
                for epoch in (0, 1):
                    got = items(ShardDataset(SETS[old][1], rank=rank, world_size=world, epoch=epoch, elastic=True))
                    want = items(ShardDataset(SETS[new][1], rank=rank, world_size=world, epoch=epoch))
                    self.assertEqual(len(got), len(want))
                    for g, w in zip(got, want):
                        self.assertEqual(sorted(g), sorted(w))
                        for k in w:
                            if k == "step":
                                self.assertEqual(g[k], w[k])
                            else:
                                self.assertTrue(torch.equal(g[k], w[k]), f"{old} as {new} rank {rank} epoch {epoch} "
                                                f"step {w['step']} {k}")
        # The partial sets' last step: rank 0 of 4 holds 4 samples, ranks 1-3 none.
        last = items(ShardDataset(SETS["p2"][1], rank=1, world_size=4, elastic=True))[-1]
        self.assertEqual(last["sample_ids"].tolist(), [])
        self.assertEqual(tuple(last["emb"].shape), (0, 50))

    def test_elastic_reads_of_a_packed_mixture_equal_a_fresh_convert(self):
        # A packed mixture (plan/PLAN.md §12.1: each epoch packs its own
        # draws, the epochs' packed rows differ) planned for 2 and for 4
        # ranks: the 2-rank set read elastically at 4 and 1 ranks gives
        # the fresh sets' items (token rows, positions, segment ids, sample
        # ids), every rank, both epochs.
        data = os.path.join(ROOT, "testdata", "ml", "tokens")
        sources = os.path.join(WORK, "packed-sources.yaml")
        with open(sources, "w") as f:
            f.write(textwrap.dedent(f"""\
                sources:
                  - name: web
                    path: {os.path.join(data, "docs.parquet")}
                    weight: 3
                  - name: code
                    path: {os.path.join(data, "code.parquet")}
                    weight: 1
                epoch_samples: 160
                packing:
                  column: tokens
                  length: 64
                  eod: 1
                  pad: 0
                """))
        sets = {}
        for world in (1, 2, 4):
            plan, out = os.path.join(WORK, f"pm{world}.json"), os.path.join(WORK, f"pm{world}")
            prep("plan", "--sources", sources, "--seed", "3", "--epochs", "2", "--global-batch", "8",
                 "--world-size", str(world), "--remainder", "pad", "-o", plan, "-q")
            prep("convert", "--plan", plan, "--tensor", "tokens=tokens:I32", "-o", out, "-q")
            sets[world] = out
        def same(a, b):
            if isinstance(a, gpuload.Jagged):
                return isinstance(b, gpuload.Jagged) and same(a.values, b.values) and same(a.offsets, b.offsets)
            if torch.is_tensor(a):
                return torch.is_tensor(b) and torch.equal(a, b)
            return a == b

        for world in (4, 1):
            for rank in range(world):
                for epoch in (0, 1):
                    # Compared item by item as they come (an item's jagged
                    # tensors are views of its ring slot).
                    got = DataLoader(ShardDataset(sets[2], rank=rank, world_size=world, epoch=epoch, elastic=True),
                                     batch_size=None)
                    want = DataLoader(ShardDataset(sets[world], rank=rank, world_size=world, epoch=epoch), batch_size=None)
                    n = 0
                    for g, w in itertools.zip_longest(got, want):
                        self.assertIsNotNone(g, f"world {world} rank {rank} epoch {epoch}: elastic read ends early")
                        self.assertIsNotNone(w, f"world {world} rank {rank} epoch {epoch}: elastic read runs long")
                        self.assertEqual(sorted(g), sorted(w))
                        self.assertIn("tokens", w)
                        for k in w:
                            self.assertTrue(same(g[k], w[k]), f"world {world} rank {rank} epoch {epoch} step {w['step']} {k}")
                        n += 1
                    self.assertGreater(n, 0)

    def test_shards_missing_on_this_node_fail_at_set_epoch(self):
        d = os.path.join(WORK, "node")
        shutil.copytree(SETS["r2"][1], d)
        mpath = os.path.join(d, "manifest.json")
        with open(mpath) as f:
            m = json.load(f)
        m["shards"] = [s for s in m["shards"] if s["epoch"] == 0]  # epoch 1 converted elsewhere
        with open(mpath, "w") as f:
            json.dump(m, f)
        ds = ShardDataset(d, rank=0, world_size=1, elastic=True)  # reads ranks 0 and 1
        with self.assertRaises(gpuload.GpuloadError) as cm:
            ds.set_epoch(1)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_NO_SHARD)
        self.assertIn("epoch 1 rank 0 not in manifest.json (in the plan, but not converted on this node", str(cm.exception))
        self.assertEqual(ds.epoch, 0)

    def test_resume_across_world_sizes(self):
        st = ShardDataset(SETS["r2"][1], rank=0, world_size=2).state_dict(next_step=3)
        for world in (4, 1):
            for rank in range(world):
                ds = ShardDataset(SETS["r2"][1], rank=rank, world_size=world, elastic=True)
                ds.load_state_dict(st)
                fresh = plan_show("r4" if world == 4 else "r1", 0, rank)
                self.check_plan(items(ds), fresh[3:])

    def test_bf16_and_unsigned(self):
        f32 = make_set("f32", 2, spec=None, tensors=["e=embedding:F32:50", "i=id:U32"])
        bf = make_set("bf16", 2, spec=None, tensors=["e=embedding:BF16:50", "i=id:U64"])
        for a, b in zip(DataLoader(ShardDataset(f32, rank=1, world_size=2), batch_size=None),
                        DataLoader(ShardDataset(bf, rank=1, world_size=2), batch_size=None)):
            self.assertEqual((a["e"].dtype, b["e"].dtype, a["i"].dtype, b["i"].dtype),
                             (torch.float32, torch.bfloat16, torch.int32, torch.int64))
            self.assertTrue(torch.equal(a["e"].to(torch.bfloat16), b["e"]))  # both round to nearest even
            self.assertEqual(a["i"].tolist(), a["sample_ids"].tolist())
            self.assertEqual(b["i"].tolist(), a["sample_ids"].tolist())

    def test_jagged_bytes_are_uint8_values_and_offsets(self):
        """A string column as jagged bytes (bytes.mode jagged) reaches torch
        through the C ABI as a uint8 Jagged pair; each sample's bytes hash
        (FNV-1a 64 modulo 4096, computed here) to the row's name_bucket."""
        spec = os.path.join(WORK, "bytes.yaml")
        with open(spec, "w") as f:
            f.write("tensors:\n  - {name: id, column: id, dtype: I64}\n"
                    "  - {name: nm, column: name, dtype: U8, bytes: {mode: jagged}}\n")
        out = make_set("bytes", 2, spec=spec)
        seen = set()
        for rank in range(2):
            for it in DataLoader(ShardDataset(out, rank=rank, world_size=2), batch_size=None):
                v, o = it["nm"]
                self.assertEqual((v.dtype, o.dtype, v.dim(), len(o)), (torch.uint8, torch.int64, 1, len(it["sample_ids"]) + 1))
                for j, i in enumerate(it["sample_ids"].tolist()):
                    b = bytes(v[o[j]:o[j + 1]].tolist())
                    h = 14695981039346656037
                    for c in b:
                        h = ((h ^ c) * 1099511628211) % 2**64
                    self.assertEqual(h % 4096, REF[i]["name_bucket"].item(), f"id {i}: {b!r}")
                    self.assertEqual(it["id"][j].item(), i)
                    seen.add(i)
        self.assertEqual(sorted(seen), list(range(N)))


class ReadmeTest(unittest.TestCase):
    def test_the_readme_snippet_trains_and_resumes_in_under_20_lines(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        section = readme[readme.index("## Reading shards in a trainer"):]
        code = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python"))]
        self.assertLess(len(code.strip().splitlines()), 20)
        code = code.replace("/local/shards", SETS["r2"][1])
        work = tempfile.mkdtemp(dir=WORK)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(PKGPATH), RANK="1", WORLD_SIZE="2")
        code = code.replace("for batch in loader:", "for batch in loader:\n        print(epoch, batch['step'])")
        killed = code.replace("print(epoch, batch['step'])", "if (epoch, batch['step']) == (1, 3): raise SystemExit(3)")
        out = subprocess.run([sys.executable, "-c", killed], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 3, out.stderr)  # killed before epoch 1's step 3
        out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split("\n"), ["1 3", "1 4", "1 5", "1 6", ""])  # resumed there
        ck = torch.load(os.path.join(work, "ckpt.pt"))
        self.assertEqual((ck["data"]["epoch"], ck["data"]["step"]), (1, 7))


def run_fresh(code, timeout=120):
    """Runs code in a fresh interpreter (no library loaded yet)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(PKGPATH), PYTHONDONTWRITEBYTECODE="1")
    head = ("import os, sys, json, torch\nfrom torch.utils.data import DataLoader\nimport gpuload\n"
            "from gpuload.torch import ShardDataset\n")
    return subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=timeout)


class WorkersTest(Case):
    def test_two_fork_workers_after_len_give_plan_order(self):
        # The parent builds the dataset and reads its length (pure Python),
        # resumes at an odd step, then forks two workers.
        out = run_fresh(f"""
            ds = ShardDataset({SETS['r2'][1]!r}, rank=1, world_size=2, epoch=1)
            assert len(ds) == 7
            ds.load_state_dict(ds.state_dict(next_step=3))
            items = list(DataLoader(ds, batch_size=None, num_workers=2))
            assert not gpuload._native.loaded_here()
            torch.save(items, {os.path.join(WORK, 'workers.pt')!r})
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        items = torch.load(os.path.join(WORK, "workers.pt"))
        self.check_plan(items, plan_show("r2", 1, 1)[3:])
        for it in items:
            self.check_values(it)

    def test_persistent_workers_follow_set_epoch_and_resume(self):
        # Regression (a torch pitfall): persistent workers keep their copy of
        # the dataset, so set_epoch in the parent did not reach them and
        # every epoch repeated the first one's order.
        out = run_fresh(f"""
            import pickle
            ds = ShardDataset({SETS['r2'][1]!r}, rank=0, world_size=2)
            ds.load_state_dict(ds.state_dict(next_step=5))
            loader = DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True)
            got = []
            for epoch in (0, 1, 0):
                ds.set_epoch(epoch)
                got.append([(b["step"], b["sample_ids"].tolist(), b["pad"].tolist()) for b in loader])
            print(json.dumps(got))
            copy = pickle.loads(pickle.dumps(ds))  # outside a worker start: a copy with its own state
            copy.set_epoch(1)
            print(ds.epoch, copy.epoch)
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        got = json.loads(lines[0])
        want = [plan_show("r2", 0, 0)[5:], plan_show("r2", 1, 0), plan_show("r2", 0, 0)]
        self.assertEqual([[tuple(b) for b in e] for e in got], want)
        self.assertEqual(lines[1], "0 1")

    def test_fork_after_the_parent_read_batches_gives_plan_order(self):
        # The parent reads batches in-process (the mapped path) and through
        # the native library (checksums: its Go runtime is loaded), then
        # forks two workers with the default start method.
        out = run_fresh(f"""
            ds = ShardDataset({SETS['r2'][1]!r}, rank=0, world_size=2, epoch=1)
            next(iter(DataLoader(ds, batch_size=None)))
            next(iter(DataLoader(ShardDataset({SETS['r2'][1]!r}, rank=0, world_size=2, verify_checksums=True),
                                 batch_size=None)))
            assert gpuload._native.loaded_here()
            items = [{{k: v.clone() if torch.is_tensor(v) else v for k, v in it.items()}}
                     for it in DataLoader(ds, batch_size=None, num_workers=2)]
            torch.save(items, {os.path.join(WORK, 'fork.pt')!r})
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("workers cannot make it faster", out.stderr)
        self.assertEqual(out.stderr.count("workers cannot make it faster"), 1, out.stderr)
        items = torch.load(os.path.join(WORK, "fork.pt"))
        self.check_plan(items, plan_show("r2", 1, 0))
        for it in items:
            self.check_values(it)

    def test_loader_chunks_under_workers_keep_plan_order(self):
        # ds.loader hands batches over in chunks; 3 workers of chunks of 2
        # steps from resume step 1: chunks [1, 2], [3, 4], [5, 6].
        out = run_fresh(f"""
            import warnings
            warnings.simplefilter("ignore")
            ds = ShardDataset({SETS['r2'][1]!r}, rank=1, world_size=2, epoch=1)
            ds.load_state_dict(ds.state_dict(next_step=1))
            items = [{{k: v.clone() if torch.is_tensor(v) else v for k, v in it.items()}}
                     for it in ds.loader(num_workers=3, chunk=2)]
            torch.save(items, {os.path.join(WORK, 'chunks.pt')!r})
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        items = torch.load(os.path.join(WORK, "chunks.pt"))
        self.check_plan(items, plan_show("r2", 1, 1)[1:])
        for it in items:
            self.check_values(it)

    def test_writes_to_a_batch_never_reach_a_later_iteration(self):
        # Items are views of private (copy-on-write) mappings of the shard;
        # under workers the training process maps the file itself. A
        # training loop that writes into every batch (in-place
        # normalisation) must find the shard's values in the next pass over
        # the same epoch, in-process, under workers and through ds.loader.
        out = run_fresh(f"""
            import warnings
            warnings.simplefilter("ignore")
            ds = ShardDataset({SETS['r2'][1]!r}, rank=0, world_size=2, epoch=1)
            loaders = [DataLoader(ds, batch_size=None), DataLoader(ds, batch_size=None, num_workers=2),
                       DataLoader(ds, batch_size=None, num_workers=2, persistent_workers=True),
                       ds.loader(num_workers=2, chunk=2), ds.loader(num_workers=2, persistent_workers=True)]
            got = []
            for loader in loaders:
                for it in loader:
                    for k, v in it.items():
                        if torch.is_tensor(v):
                            v.fill_(7)
                got.append([{{k: v.clone() if torch.is_tensor(v) else v for k, v in it.items()}} for it in loader])
            torch.save(got, {os.path.join(WORK, 'writes.pt')!r})
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        for items in torch.load(os.path.join(WORK, "writes.pt")):
            self.check_plan(items, plan_show("r2", 1, 0))
            for it in items:
                self.check_values(it)

    def test_workers_give_the_in_process_items_of_partial_batches_and_cast_dtypes(self):
        # BF16 and U64 (torch views of NumPy integers), remainder "partial"
        # (a last batch shorter than the others): each worker item, and each
        # ds.loader chunk, crosses as one reference and is rebuilt in the
        # training process; it must equal the in-process item.
        d = make_set("bf16p", 2, remainder="partial", spec=None, tensors=["e=embedding:BF16:50", "i=id:U64"])
        out = run_fresh(f"""
            import warnings
            warnings.simplefilter("ignore")
            ds = ShardDataset({d!r}, rank=1, world_size=2, epoch=1)
            want = [dict(b) for b in DataLoader(ds, batch_size=None)]
            assert want[-1]["e"].shape[0] < want[0]["e"].shape[0], [b["e"].shape for b in want]
            for loader in (DataLoader(ds, batch_size=None, num_workers=2), ds.loader(num_workers=2, chunk=3)):
                got = list(loader)
                assert len(got) == len(want)
                for a, b in zip(got, want):
                    assert sorted(a) == sorted(b) and a["step"] == b["step"], (sorted(a), a["step"])
                    for k in ("e", "i", "sample_ids", "pad"):
                        assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), (k, a["step"])
            print("equal", want[0]["e"].dtype, want[0]["i"].dtype)
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "equal torch.bfloat16 torch.int64")

    def test_a_collate_fn_under_loader_workers_gets_each_item(self):
        out = run_fresh(f"""
            import warnings
            warnings.simplefilter("ignore")
            ds = ShardDataset({SETS['r2'][1]!r}, rank=1, world_size=2)
            def add_sum(item):
                return dict(item, id_sum=int(item["id"].sum()))
            print(json.dumps([(b["step"], b["id_sum"], b["id"].tolist())
                              for b in ds.loader(num_workers=2, chunk=3, collate_fn=add_sum)]))
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        got = json.loads(out.stdout)
        self.assertEqual([s for s, _, _ in got], [s for s, _, _ in plan_show("r2", 0, 1)])
        for step, total, ids in got:
            self.assertEqual(total, sum(ids), step)

    def test_state_dict_under_workers_is_exact_or_raises(self):
        out = run_fresh(f"""
            ds = ShardDataset({SETS['r2'][1]!r}, rank=1, world_size=2)
            it = iter(DataLoader(ds, batch_size=None, num_workers=2))
            for _ in range(3):
                next(it)
            try:
                ds.state_dict()
            except gpuload.GpuloadError as e:
                print("raised:", e)
            del it
            loader = ds.loader(num_workers=2)
            got = []
            for k, b in enumerate(loader):
                got.append(b["step"])
                if k == 2:
                    state = loader.state_dict()
                    break
            print(json.dumps(state))
            ds2 = ShardDataset({SETS['r2'][1]!r}, rank=1, world_size=2)
            l2 = ds2.loader(num_workers=2)
            l2.load_state_dict(state)
            print(json.dumps([b["step"] for b in l2]))
        """)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("raised: gpuload: state_dict() after an iteration in DataLoader workers", lines[0])
        self.assertIn("ds.loader(num_workers=...)", lines[0])
        state = json.loads(lines[1])
        self.assertEqual((state["epoch"], state["step"]), (0, 3))  # 3 batches consumed
        self.assertEqual(json.loads(lines[2]), [3, 4, 5, 6])

    def test_automatic_batching_is_refused_naming_batch_size_none(self):
        ds = ShardDataset(SETS["r2"][1], rank=0, world_size=2)
        for kw in ({}, {"batch_size": 256}, {"batch_size": 4, "num_workers": 2}):
            with self.subTest(**kw):
                with self.assertRaises(Exception) as cm:
                    next(iter(DataLoader(ds, **kw)))
                self.assertIn("Pass batch_size=None (DataLoader(ds, batch_size=None))", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError):
            ds.loader(batch_size=8)
        self.check_plan([{k: v.clone() if torch.is_tensor(v) else v for k, v in it.items()} for it in ds.loader()],
                        plan_show("r2", 0, 0))

    def test_steps_that_are_not_integers_are_refused(self):
        ds = ShardDataset(SETS["r2"][1], rank=0, world_size=2)
        st = ds.state_dict()
        for bad in (2.7, 2.0, "2", True):
            with self.subTest(step=bad):
                with self.assertRaises(gpuload.GpuloadError) as cm:
                    ds.load_state_dict(dict(st, step=bad))
                self.assertIn("is not an integer", str(cm.exception))
                with self.assertRaises(gpuload.GpuloadError):
                    ds.state_dict(next_step=bad)
        ds.load_state_dict(dict(st, step=np.int64(2)))
        self.assertEqual(ds.state_dict()["step"], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
