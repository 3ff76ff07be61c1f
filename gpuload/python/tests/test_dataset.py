"""Tests of the NumPy side of the gpuload package: the mapped shard reader
against the golden files, ShardIterator (no torch) and ShardDataset items
against `prep export` of every step, two threads on one Loader, and the JAX
example (with a NumPy stand-in for JAX); run by `make test` (test-python):

    PREP=bin/prep PYTHONPATH=gpuload/python python3 gpuload/python/tests/test_dataset.py
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import numpy as np

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(TESTS)))
if not os.environ.get("GPULOAD_TEST_INSTALLED"):
    sys.path.insert(0, os.path.dirname(TESTS))
import gpuload  # noqa: E402
from gpuload._shard import MappedShard  # noqa: E402

PREP = os.environ.get("PREP") or os.path.join(ROOT, "bin", "prep")
SRC = os.path.join(ROOT, "testdata", "ml", "venomx", "embeddings.parquet")
SPEC = os.path.join(ROOT, "testdata", "ml", "venomx", "features.yaml")
WORK = SET = PLAN = None


def prep(*args):
    return subprocess.run([PREP, *args], check=True, capture_output=True, text=True).stdout


def setUpModule():
    global WORK, SET, PLAN
    WORK = tempfile.mkdtemp(prefix="gpuload-dataset.")
    PLAN = os.path.join(WORK, "plan.json")
    SET = os.path.join(WORK, "set")
    prep("plan", "--source", SRC, "--seed", "3", "--epochs", "2", "--global-batch", "16", "--world-size", "2",
         "--shuffle", "global", "--remainder", "pad", "-o", PLAN, "-q")
    prep("convert", "--plan", PLAN, "--spec", SPEC, "-o", SET, "-q")


def tearDownModule():
    shutil.rmtree(WORK, ignore_errors=True)


def export(epoch, rank, step):
    out = os.path.join(WORK, f"export-{epoch}-{rank}-{step}")
    if not os.path.isdir(out):
        prep("export", SET, "--epoch", str(epoch), "--rank", str(rank), "--step", str(step), "-o", out)
    return {f[:-4]: np.load(os.path.join(out, f)) for f in os.listdir(out) if f.endswith(".npy")}


class GoldenTest(unittest.TestCase):
    def test_mapped_reader_finds_the_golden_values(self):
        d = os.path.join(ROOT, "testdata", "shards")
        with open(os.path.join(d, "golden.json")) as f:
            golden = json.load(f)
        for g in golden:
            with self.subTest(file=g["file"]):
                sh = MappedShard(os.path.join(d, g["file"]))
                self.assertEqual([t.name for t in sh.tensors], [t["name"] for t in g["tensors"]])
                self.assertEqual(sh.num_batches, len(g["batches"]))
                for k, b in enumerate(g["batches"]):
                    c = b["count"]
                    self.assertEqual((int(sh.counts[k]), int(sh.pads[k])), (c, b["pads"]))
                    self.assertEqual(sh.ids[k, :c].tolist(), b["sample_ids"])
                    for t, arr, slab in zip(sh.tensors, sh.arrays(k), b["slabs"]):
                        if t.jagged:
                            vals, offs = arr
                            self.assertEqual(offs.tolist(), b["offsets"][t.name])
                            self.assertEqual(vals.tobytes().hex(), slab)
                        else:
                            self.assertEqual(arr.tobytes().hex(), slab)

    def test_a_remapped_shard_is_its_own_copy_and_a_changed_file_is_not_remapped(self):
        d = os.path.join(ROOT, "testdata", "shards")
        with open(os.path.join(d, "golden.json")) as f:
            g = json.load(f)[0]
        path = os.path.join(WORK, "remap.shard")
        shutil.copyfile(os.path.join(d, g["file"]), path)
        sh = MappedShard(path)
        want = g["batches"][0]["sample_ids"]
        again = sh.remap()
        self.assertEqual(again.ids[0, :len(want)].tolist(), want)
        sh.ids[0, :] = 7  # a write through the first mapping (copy-on-write)
        self.assertEqual(again.ids[0, :len(want)].tolist(), want)
        self.assertEqual(sh.remap().ids[0, :len(want)].tolist(), want)
        os.utime(path, ns=(0, 0))  # the same bytes, another modification time: open it anew
        self.assertIsNone(sh.remap())
        shutil.copyfile(os.path.join(d, g["file"]), path + ".new")
        os.replace(path + ".new", path)  # another file at the path
        self.assertIsNone(again.remap())

    def test_a_damaged_shard_is_refused(self):
        src = os.path.join(ROOT, "testdata", "shards", "small.shard")
        bad = os.path.join(WORK, "bad.shard")
        with open(src, "rb") as f:
            raw = bytearray(f.read())
        raw[300] ^= 1  # in the tensor table
        with open(bad, "wb") as f:
            f.write(raw)
        with self.assertRaises(gpuload.GpuloadError) as cm:
            MappedShard(bad)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_CORRUPT)
        self.assertIn("tensor table CRC mismatch", str(cm.exception))


class IteratorTest(unittest.TestCase):
    def check_equal_to_export(self, item, epoch, rank):
        want = export(epoch, rank, item["step"])
        self.assertEqual(np.asarray(item["sample_ids"]).tolist(), want["sample_ids"].astype(np.int64).tolist())
        self.assertEqual(np.asarray(item["pad"]).tolist(), want["pad_mask"].astype(bool).tolist())
        for t in gpuload.ShardSet(SET).tensors:
            got = np.asarray(item[t.name])
            self.assertEqual(got.dtype, want[t.name].dtype, t.name)
            np.testing.assert_array_equal(got, want[t.name], err_msg=f"step {item['step']} {t.name}")

    def test_every_item_equals_prep_export_of_its_step(self):
        for rank in (0, 1):
            it = gpuload.ShardIterator(SET, rank=rank, world_size=2, epoch=1)
            items = list(it)
            self.assertEqual([i["step"] for i in items], list(range(len(it))))
            for item in items:
                self.check_equal_to_export(item, 1, rank)

    def test_dataset_items_equal_prep_export(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("no torch")
        from gpuload.torch import ShardDataset
        for item in ShardDataset(SET, rank=1, world_size=2).loader():
            self.check_equal_to_export({k: v.numpy() if hasattr(v, "numpy") else v for k, v in item.items()}, 0, 1)

    def test_numpy_iterator_imports_no_torch_and_resumes(self):
        code = ("import sys, json\nsys.modules['torch'] = None\nimport gpuload\n"
                f"it = gpuload.ShardIterator({SET!r}, rank=0, world_size=2)\n"
                "g = iter(it)\nfor _ in range(3): next(g)\n"
                "st = it.state_dict()\nprint(json.dumps(st))\n"
                f"it2 = gpuload.ShardIterator({SET!r}, rank=0, world_size=2)\nit2.load_state_dict(st)\n"
                "print([b['step'] for b in it2])\n"
                "try:\n    it2.load_state_dict(dict(st, step=2.7))\nexcept gpuload.GpuloadError as e:\n    print(e)\n")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        if not os.environ.get("GPULOAD_TEST_INSTALLED"):
            env["PYTHONPATH"] = os.path.dirname(TESTS)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(json.loads(lines[0])["step"], 3)
        self.assertEqual(lines[1], "[3, 4, 5, 6]")
        self.assertEqual(lines[2], "gpuload: invalid argument: state step 2.7 is not an integer")

    def test_checksummed_items_equal_the_mapped_ones(self):
        a = list(gpuload.ShardIterator(SET, rank=1, world_size=2))
        b = list(gpuload.ShardIterator(SET, rank=1, world_size=2, verify_checksums=True))
        self.assertEqual(len(a), len(b))
        for x, y in zip(a, b):
            for k in x:
                np.testing.assert_array_equal(np.asarray(x[k]), np.asarray(y[k]))


class ThreadsTest(unittest.TestCase):
    def test_two_threads_on_one_loader_get_every_step_once(self):
        for mapped in (True, False):
            with self.subTest(mapped=mapped):
                loader = gpuload.Loader(SET, 0, 0, mapped=mapped, copy=not mapped)
                got, errors = [[], []], []
                start = threading.Barrier(2)

                def run(i):
                    try:
                        start.wait()
                        for b in loader:
                            got[i].append((int(b["id"][0]), b["id"].tolist()))
                    except Exception as e:  # reported below
                        errors.append(e)
                ts = [threading.Thread(target=run, args=(i,)) for i in (0, 1)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                loader.close()
                self.assertEqual(errors, [])
                want = [np.asarray(i["id"]).tolist() for i in gpuload.ShardIterator(SET, rank=0, world_size=2)]
                self.assertEqual(sorted(x[1] for x in got[0] + got[1]), sorted(want))
                self.assertEqual(len(got[0]) + len(got[1]), len(want))


class JaxExampleTest(unittest.TestCase):
    def test_example_stops_and_resumes(self):
        ex = os.path.join(ROOT, "examples", "jax_train.py")
        env = dict(os.environ, RANK="1", WORLD_SIZE="2", PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=os.pathsep.join([os.path.join(TESTS, "fakejax")] +
                                              ([] if os.environ.get("GPULOAD_TEST_INSTALLED") else [os.path.dirname(TESTS)])))
        st = os.path.join(WORK, "jax-state.json")
        out = subprocess.run([sys.executable, ex, SET, "--steps", "9", "--state", st], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.split()[-2:], ["1", "1"])  # 7 steps of epoch 0, then 2 of epoch 1
        out = subprocess.run([sys.executable, ex, SET, "--state", st], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[:5], ["1 2", "1 3", "1 4", "1 5", "1 6"])
        want = sum(float(np.where(~np.asarray(i["pad"])[:, None], np.asarray(i["emb"]), 0).sum())
                   for i in gpuload.ShardIterator(SET, rank=1, world_size=2, epoch=1) if i["step"] >= 2)
        self.assertAlmostEqual(float(lines[-1].split()[1]), want, places=3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
