"""Tests of the gpuload package's Loader, run by gpuload/capi's Go test
(TestPython) with /usr/bin/python3:

    GPULOAD_LIB=.../libgpuload.so GPULOAD_TEST_DIR=<shard set> GPULOAD_TEST_JAGGED_DIR=<shard set> \
        GPULOAD_TEST_CUDA=0|1 python3 tests/test_gpuload.py

The shard set is gpuload/internal/testshards with 2 epochs x 2 ranks, batch
size 4, 5 steps, last batch 3 samples of which 1 pad. Values of sample id:
x[c] = id + c/4 (F32 [3]), y = -id (I64), m[c] = (id + c) mod 256 (U8 [5]).
The jagged set (testshards.WriteJagged, format 2.0) has the same ids, x,
and jagged h (I32, id mod 4 values h[e] = 10*id + e) and p (U16 [2], id mod
3 values p[e][c] = id + 2e + c).
"""

import ctypes
import json
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gpuload  # noqa: E402

DIR = os.environ["GPULOAD_TEST_DIR"]
JAGGED_DIR = os.environ.get("GPULOAD_TEST_JAGGED_DIR")
CUDA = os.environ.get("GPULOAD_TEST_CUDA") == "1"
B, STEPS, LAST, PADS = 4, 5, 3, 1


def ids(epoch, rank, k):
    base = 1_000_000 * epoch + 10_000 * rank
    n = LAST if k == STEPS - 1 else B
    p = PADS if k == STEPS - 1 else 0
    return [base + k * B + j for j in range(n - p)] + [base + j for j in range(p)]


def expect(epoch, rank, k):
    i = np.array(ids(epoch, rank, k), dtype=np.uint64)
    x = (i.astype(np.float32)[:, None] + np.arange(3, dtype=np.float32)[None, :] / 4).astype(np.float32)
    y = -(i.astype(np.int64))
    m = ((i[:, None] + np.arange(5, dtype=np.uint64)[None, :]) % 256).astype(np.uint8)
    return {"x": x, "y": y, "m": m}


def expect_jagged(epoch, rank, k):
    """x, and h and p as (values, offsets), of batch k of the jagged set."""
    out = {"x": expect(epoch, rank, k)["x"]}
    for name, n, per, dt in (("h", 4, (), np.int32), ("p", 3, (2,), np.uint16)):
        rows, offs = [], [0]
        for i in ids(epoch, rank, k):
            for e in range(i % n):
                rows.append(10 * i + e if name == "h" else [(i + 2 * e + c) % 65536 for c in range(2)])
            offs.append(offs[-1] + i % n)
        out[name] = (np.array(rows, dtype=dt).reshape((len(rows),) + per), np.array(offs, dtype=np.int64))
    return out


class HostTest(unittest.TestCase):
    def test_iterates_every_batch_with_exact_values(self):
        with gpuload.Loader(DIR, 1, 1) as loader:
            self.assertEqual(loader.steps, STEPS)
            seen = 0
            for k, batch in enumerate(loader):
                want = expect(1, 1, k)
                self.assertEqual(sorted(batch), ["m", "x", "y"])
                for name in want:
                    self.assertEqual(batch[name].dtype, want[name].dtype, name)
                    np.testing.assert_array_equal(batch[name], want[name], err_msg=f"step {k} {name}")
                    self.assertFalse(batch[name].flags.writeable)
                seen += 1
            self.assertEqual(seen, STEPS)

    def test_batch_metadata(self):
        with gpuload.Loader(DIR, 0, 1, verify_checksums=True) as loader:
            batches = []
            for b in loader.batches():
                self.assertEqual(list(b.sample_ids), ids(0, 1, b.step))
                batches.append((b.step, b.count, b.pads, list(b.pad_flags)))
            self.assertEqual(batches[-1], (4, 3, 1, [False, False, True]))
            self.assertEqual([s for s, *_ in batches], [0, 1, 2, 3, 4])

    def test_copy_outlives_the_iterator(self):
        with gpuload.Loader(DIR, 0, 0, copy=True, prefetch=1) as loader:
            got = [b["x"] for b in loader]
        for k, x in enumerate(got):
            np.testing.assert_array_equal(x, expect(0, 0, k)["x"])

    def test_start_step_and_seek(self):
        with gpuload.Loader(DIR, 1, 0, start_step=3) as loader:
            b = loader.next_batch()
            self.assertEqual(b.step, 3)
            loader.seek(1)
            self.assertEqual([b.step for b in loader.batches()], [1, 2, 3, 4])

    def test_numpy_from_dlpack_reads_our_capsule(self):
        with gpuload.Loader(DIR, 0, 0, prefetch=1, mapped=False) as loader:
            self.assertEqual(loader.ring, 2)
            b = loader.next_batch()
            t = b.dlpack("x")
            self.assertEqual(t.__dlpack_device__(), (gpuload.KDL_CPU, 0))
            a = np.from_dlpack(t)
            np.testing.assert_array_equal(a, expect(0, 0, 0)["x"])
            # a pins batch 0 and a2 batch 1 beyond the iterator's own hold.
            b2 = loader.next_batch()
            self.assertEqual(b2.step, 1)
            a2 = np.from_dlpack(b2.dlpack("y"))
            with self.assertRaises(gpuload.GpuloadError) as cm:
                loader.next_batch()  # the ring of 2 is full
            self.assertEqual(cm.exception.code, gpuload.GL_ERR_RING_FULL)
            np.testing.assert_array_equal(a, expect(0, 0, 0)["x"])
            np.testing.assert_array_equal(a2, expect(0, 0, 1)["y"])
            del a, a2, t  # the deleters release batches 0 and 1
            import gc
            gc.collect()
            b3 = loader.next_batch()
            self.assertEqual(b3.step, 2)

    def test_errors(self):
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader("/nonexistent/shards", 0, 0)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_NO_SHARD_SET)
        self.assertIn("/nonexistent/shards: no shard set: no such directory", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 0, 0, plan_fingerprint="plan:other")
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_PLAN_MISMATCH)
        self.assertIn("plan:other", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 9, 0)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_OUTSIDE_PLAN)
        self.assertIn("epoch 9 outside the plan's epochs [0, 2)", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 0, 2)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_OUTSIDE_PLAN)
        self.assertIn("rank 2 outside the plan's ranks [0, 2)", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 0, 0, start_step=6)
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_INVALID)
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 0, 0, backend="tpu")
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_INVALID)

    def test_native_errors_are_distinct(self):
        # The library's own checks, under the pure-Python ones: a shard listed
        # in the plan but missing from this node's manifest.
        import json
        import shutil
        import tempfile
        tmp = tempfile.mkdtemp()
        try:
            d = os.path.join(tmp, "set")
            shutil.copytree(DIR, d)
            mpath = os.path.join(d, "manifest.json")
            with open(mpath) as f:
                m = json.load(f)
            m["shards"] = [s for s in m["shards"] if s["rank"] == 0]
            with open(mpath, "w") as f:
                json.dump(m, f)
            with self.assertRaises(gpuload.GpuloadError) as cm:
                gpuload.Loader(d, 1, 1)
            self.assertEqual(cm.exception.code, gpuload.GL_ERR_NO_SHARD)
            self.assertIn("epoch 1 rank 1 not in manifest.json (in the plan, but not converted on this node", str(cm.exception))
            loader = gpuload.Loader(d, 0, 0, mapped=False)
            os.remove(mpath)  # gone between the metadata read and the first batch
            with self.assertRaises(gpuload.GpuloadError) as cm:
                loader.next_batch()
            self.assertEqual(cm.exception.code, gpuload.GL_ERR_NO_SHARD_SET)
            loader.close()
        finally:
            shutil.rmtree(tmp)

    def test_metadata_never_follows_a_symbolic_link(self):
        # manifest.json and plan.json are read in pure Python before the
        # library is loaded: a link at either name is refused, never read.
        import shutil
        import tempfile
        for name in ("manifest.json", "plan.json"):
            tmp = tempfile.mkdtemp()
            try:
                d = os.path.join(tmp, "set")
                shutil.copytree(DIR, d)
                outside = os.path.join(tmp, "outside.json")
                os.rename(os.path.join(d, name), outside)
                os.symlink(outside, os.path.join(d, name))
                with self.assertRaises(gpuload.GpuloadError, msg=name) as cm:
                    gpuload.Loader(d, 0, 0)
                self.assertEqual(cm.exception.code, gpuload.GL_ERR_NO_SHARD_SET, name)
                self.assertIn("symbolic link", str(cm.exception), name)
            finally:
                shutil.rmtree(tmp)

    def test_manifest_paths_leaving_the_set_are_never_looked_at(self):
        # A manifest entry edited to leave the set (or be absolute) is
        # refused in pure Python, before any file outside is stat'ed.
        import shutil
        import tempfile
        for bad in ("../outside/victim.shard", "epoch-00000/../../x.shard", "/etc/passwd", "epoch-00000//rank-00000.shard"):
            tmp = tempfile.mkdtemp()
            try:
                d = os.path.join(tmp, "set")
                shutil.copytree(DIR, d)
                mpath = os.path.join(d, "manifest.json")
                with open(mpath) as f:
                    m = json.load(f)
                m["shards"][0]["path"] = bad
                with open(mpath, "w") as f:
                    json.dump(m, f)
                e, r = m["shards"][0]["epoch"], m["shards"][0]["rank"]
                with self.assertRaises(gpuload.GpuloadError, msg=bad) as cm:
                    gpuload.Loader(d, e, r)
                self.assertEqual(cm.exception.code, gpuload.GL_ERR_IO, bad)
                self.assertIn("is not a path inside the shard set", str(cm.exception), bad)
            finally:
                shutil.rmtree(tmp)

    def test_metadata_without_the_library(self):
        loader = gpuload.Loader(DIR, 1, 0, mapped=False)
        self.assertEqual((loader.steps, loader.world_size, loader.epochs, loader.steps_per_epoch, loader.batch_size),
                         (STEPS, 2, 2, STEPS, B))
        self.assertEqual(loader.fingerprint, "plan:test-0001")
        self.assertEqual(loader.order_fingerprint, "order:test-0001")
        self.assertEqual([(t.name, t.dtype, t.shape) for t in loader.tensors],
                         [("x", "F32", (3,)), ("y", "I64", ()), ("m", "U8", (5,))])
        self.assertFalse(loader.loaded)
        loader.seek(2)
        self.assertFalse(loader.loaded)
        self.assertEqual(loader.next_batch().step, 2)
        self.assertTrue(loader.loaded)
        loader.close()

    def test_views_stay_valid_after_close(self):
        loader = gpuload.Loader(DIR, 0, 1, prefetch=1, mapped=False)
        b0 = loader.next_batch()
        x0 = b0.tensors["x"]
        y1 = loader.next_batch().tensors["y"][1:]  # a view of a view
        m0 = np.from_dlpack(b0.dlpack("m"))
        t = b0.dlpack("x")
        loader.close()
        for name in ("x", "y", "m"):
            np.testing.assert_array_equal(b0.tensors[name], expect(0, 1, 0)[name])
        np.testing.assert_array_equal(x0, expect(0, 1, 0)["x"])
        np.testing.assert_array_equal(y1, expect(0, 1, 1)["y"][1:])
        np.testing.assert_array_equal(m0, expect(0, 1, 0)["m"])  # made before close
        for call in (lambda: b0.dlpack("x"), t.__dlpack__, t.to_numpy, loader.next_batch, lambda: loader.ring,
                     lambda: loader.seek(0)):
            with self.assertRaises(gpuload.GpuloadError) as cm:
                call()
            self.assertEqual(cm.exception.code, gpuload.GL_ERR_CLOSED)
        loader.close()  # idempotent

    def test_held_view_keeps_its_values(self):
        # Regression: the previous batch's slot was reused once the
        # iterator moved on, under views still in use.
        with gpuload.Loader(DIR, 1, 1, prefetch=2) as loader:
            kept = [(b.step, b.tensors["x"]) for b, _ in zip(loader.batches(), range(2))]
            for b in loader.batches():
                pass
            for k, x in kept:
                np.testing.assert_array_equal(x, expect(1, 1, k)["x"])

    def test_forked_child_raises(self):
        loader = gpuload.Loader(DIR, 0, 0, mapped=False)
        loader.next_batch()
        fresh = gpuload.Loader(DIR, 1, 0, mapped=False)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            import signal
            signal.alarm(20)  # a hang ends the child, and the test fails
            os.close(r)
            out = []
            for call in (loader.next_batch, fresh.next_batch):
                try:
                    call()
                    out.append("no error")
                except gpuload.ForkError as e:
                    out.append(f"{e.code} {e}")
            os.write(w, "\n".join(out).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            got = f.read().split("\n")
        _, status = os.waitpid(pid, 0)
        self.assertEqual(status, 0)
        self.assertEqual(len(got), 2)
        for line in got:
            self.assertTrue(line.startswith(f"{gpuload.GL_ERR_FORKED} gpuload: "), line)
            self.assertIn("a Go runtime does not survive fork", line)
            self.assertIn('multiprocessing_context="spawn"', line)
        self.assertEqual(loader.next_batch().step, 1)  # the parent is unaffected
        loader.close()

    def test_library_older_than_its_checkout_sources_is_stale(self):
        import shutil
        import subprocess
        import tempfile
        import time
        tmp = tempfile.mkdtemp()
        try:
            # A checkout's shape: gpuload/capi/capi.go, gpuload/python/gpuload/.
            pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gpuload")
            dst = os.path.join(tmp, "gpuload", "python", "gpuload")
            shutil.copytree(pkg, dst, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.h"))
            lib = os.path.join(dst, "libgpuload.so")
            shutil.copyfile(os.environ["GPULOAD_LIB"], lib)
            os.makedirs(os.path.join(tmp, "gpuload", "capi"))
            src = os.path.join(tmp, "gpuload", "capi", "capi.go")
            with open(src, "w") as f:
                f.write("package main\n")
            now = time.time()
            os.utime(lib, (now - 60, now - 60))
            code = ("import gpuload\nl = gpuload.Loader(%r, 0, 0, mapped=False)\n"
                    "try:\n    l.next_batch(); print('loaded')\nexcept gpuload.LibraryError as e:\n    print(e)\n" % DIR)
            env = {k: v for k, v in os.environ.items() if k != "GPULOAD_LIB"}
            env["PYTHONPATH"] = os.path.dirname(dst)
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertIn(f"{lib} is stale: ../../capi/capi.go changed after it was built", out.stdout, out.stderr)
            self.assertIn("make python", out.stdout)
            os.utime(src, (now - 120, now - 120))  # rebuilt since: loads
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(out.stdout, "loaded\n", out.stderr)
        finally:
            shutil.rmtree(tmp)

    def test_missing_and_stale_library(self):
        import subprocess
        code = ("import gpuload\n"
                "l = gpuload.Loader(%r, 0, 0, mapped=False)\n"
                "try:\n    l.next_batch()\nexcept gpuload.LibraryError as e:\n    print(e.code, e)\n" % DIR)
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=pkg, GPULOAD_LIB="/nonexistent/libgpuload.so")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertIn(f"{gpuload.GL_ERR_NO_LIBRARY} gpuload: /nonexistent/libgpuload.so: no such file", out.stdout, out.stderr)
        self.assertIn("make python", out.stdout)
        env["GPULOAD_LIB"] = "/lib/x86_64-linux-gnu/libz.so.1" if os.path.exists("/lib/x86_64-linux-gnu/libz.so.1") else ""
        if env["GPULOAD_LIB"]:
            out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertIn("has C ABI version 1, this binding needs 3 (a stale build)", out.stdout, out.stderr)


@unittest.skipUnless(CUDA, "GPULOAD_TEST_CUDA=1 not set")
class CUDATest(unittest.TestCase):
    def test_device_tensors_and_capsules(self):
        with gpuload.Loader(DIR, 1, 0, backend="cuda", prefetch=2) as loader:
            for k, batch in enumerate(loader):
                want = expect(1, 0, k)
                for name, t in batch.items():
                    self.assertIsInstance(t, gpuload.DLPackTensor)
                    self.assertEqual(t.__dlpack_device__(), (gpuload.KDL_CUDA, 0))
                    np.testing.assert_array_equal(t.to_numpy(), want[name], err_msg=f"step {k} {name}")
                # Consume one capsule the way a DLPack importer does.
                cap = batch["x"].__dlpack__()
                pyapi = ctypes.pythonapi
                pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
                pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
                pyapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
                p = pyapi.PyCapsule_GetPointer(cap, b"dltensor")
                m = ctypes.cast(p, ctypes.POINTER(gpuload._loader._DLManagedTensor)).contents
                dl = m.dl_tensor
                self.assertEqual((dl.device.device_type, dl.device.device_id), (gpuload.KDL_CUDA, 0))
                self.assertEqual((dl.dtype.code, dl.dtype.bits, dl.dtype.lanes), (2, 32, 1))
                self.assertEqual([dl.shape[i] for i in range(dl.ndim)], [len(ids(1, 0, k)), 3])
                self.assertEqual([dl.strides[i] for i in range(dl.ndim)], [3, 1])
                self.assertEqual(dl.data, batch["x"].ptr)
                pyapi.PyCapsule_SetName(cap, b"used_dltensor")
                m.deleter(ctypes.cast(p, ctypes.POINTER(gpuload._loader._DLManagedTensor)))
                del cap

    def test_batch_held_across_seek_stays_valid_and_is_refused_after_close(self):
        # Regression: after close, a held batch's __dlpack__ and to_numpy read
        # the C batch record close had freed, and __dlpack__ exported the
        # freed device buffer; both must raise GL_ERR_CLOSED.
        for register in (False, True):
            loader = gpuload.Loader(DIR, 0, 1, backend="cuda", prefetch=2, register_mmap=register)
            b0 = loader.next_batch()
            cap = b0.tensors["x"].__dlpack__()  # holds b0 past the iterator
            loader.seek(3)
            b3 = loader.next_batch()
            self.assertEqual(b3.step, 3)
            np.testing.assert_array_equal(b3.tensors["y"].to_numpy(), expect(0, 1, 3)["y"])
            np.testing.assert_array_equal(b0.tensors["x"].to_numpy(), expect(0, 1, 0)["x"])
            loader.close()
            for b in (b0, b3):
                with self.assertRaises(gpuload.GpuloadError) as cm:
                    b.tensors["x"].__dlpack__()
                self.assertEqual(cm.exception.code, gpuload.GL_ERR_CLOSED)
                with self.assertRaises(gpuload.GpuloadError) as cm:
                    b.tensors["m"].to_numpy()
                self.assertEqual(cm.exception.code, gpuload.GL_ERR_CLOSED)
            del cap  # the capsule's deleter after close does nothing


@unittest.skipUnless(JAGGED_DIR, "GPULOAD_TEST_JAGGED_DIR not set")
class JaggedTest(unittest.TestCase):
    def assert_jagged(self, got, want, what):
        self.assertIsInstance(got, gpuload.Jagged, what)
        values, offsets = got
        self.assertEqual(values.dtype, want[0].dtype, what)
        self.assertEqual(offsets.dtype, np.int64, what)
        self.assertEqual(values.shape, want[0].shape, what)
        np.testing.assert_array_equal(values, want[0], err_msg=f"{what} values")
        np.testing.assert_array_equal(offsets, want[1], err_msg=f"{what} offsets")

    def test_metadata_describes_jagged_tensors(self):
        s = gpuload.ShardSet(JAGGED_DIR)
        self.assertEqual(s.tensors, [gpuload.TensorInfo("x", "F32", [3]), gpuload.TensorInfo("h", "I32", [], jagged=True),
                                     gpuload.TensorInfo("p", "U16", [2], jagged=True)])
        self.assertEqual([t.jagged for t in s.tensors], [False, True, True])
        self.assertEqual(repr(s.tensor("p")), "TensorInfo('p', U16, [2], jagged=True)")
        self.assertNotEqual(gpuload.TensorInfo("h", "I32", []), s.tensor("h"))
        self.assertEqual(s.shard_format, "2.0")
        self.assertEqual(gpuload.ShardSet(DIR).shard_format, "1.0")

    def test_numpy_views_and_copies_are_exact(self):
        for copy in (False, True):
            with gpuload.Loader(JAGGED_DIR, 1, 0, copy=copy, verify_checksums=True) as loader:
                k = -1
                for k, batch in enumerate(loader):
                    want = expect_jagged(1, 0, k)
                    self.assertEqual(sorted(batch), ["h", "p", "x"])
                    np.testing.assert_array_equal(batch["x"], want["x"])
                    for name in ("h", "p"):
                        self.assert_jagged(batch[name], want[name], f"copy={copy} step {k} {name}")
                        self.assertEqual([a.flags.writeable for a in batch[name]], [copy, copy])
                self.assertEqual(k, STEPS - 1)

    def test_views_outlive_the_iterator_and_dlpack_exports_both(self):
        with gpuload.Loader(JAGGED_DIR, 0, 1, prefetch=2, mapped=False) as loader:
            b0 = loader.next_batch()
            h0 = b0.tensors["h"]  # views hold step 0's slot
            d = b0.dlpack("p")
            self.assertIsInstance(d, gpuload.Jagged)
            self.assertEqual([t.name for t in d], ["p", "p"])
            self.assertEqual(d.offsets.shape, (B + 1,))
            self.assertEqual(d.values.dtype, 4)  # U16
            got = gpuload.Jagged(np.from_dlpack(d.values), np.from_dlpack(d.offsets))
            self.assertEqual([b.step for b in loader.batches()], list(range(1, STEPS)))
            self.assert_jagged(h0, expect_jagged(0, 1, 0)["h"], "held h")
            self.assert_jagged(got, expect_jagged(0, 1, 0)["p"], "p from DLPack")
            self.assert_jagged(gpuload.Jagged(*(t.to_numpy() for t in d)), expect_jagged(0, 1, 0)["p"], "p to_numpy")

    def test_dataset_yields_values_offsets_pairs(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        from gpuload.torch import ShardDataset

        def check(item, want, what):
            self.assertEqual(item["x"].tolist(), want["x"].tolist(), what)
            for name, dt in (("h", torch.int32), ("p", torch.int16)):
                self.assertIsInstance(item[name], tuple, what)
                values, offsets = item[name]
                self.assertEqual((values.dtype, offsets.dtype), (dt, torch.int64), what)
                self.assertEqual(values.numpy().view(want[name][0].dtype).tolist(), want[name][0].tolist(), f"{what} {name}")
                self.assertEqual(offsets.tolist(), want[name][1].tolist(), f"{what} {name} offsets")

        ds = ShardDataset(JAGGED_DIR, rank=1, world_size=2, epoch=1)
        items = list(ds)
        self.assertEqual([it["step"] for it in items], list(range(STEPS)))
        for it in items:
            check(it, expect_jagged(1, 1, it["step"]), f"step {it['step']}")
        # Elastic: 4 ranks take half a shard batch each; 1 rank joins both.
        for world, rank in ((4, 3), (4, 2), (1, 0)):
            ds = ShardDataset(JAGGED_DIR, rank=rank, world_size=world, epoch=0, elastic=True)
            for it in ds:
                k = it["step"]
                parts = [expect_jagged(0, r, k) for r in range(2)]
                # Slot j of plan rank r is row B*r + j of the global batch.
                lo, n = rank * (2 * B // world), 2 * B // world
                mine = [(r, j) for r in range(2) for j in range(len(ids(0, r, k))) if lo <= B * r + j < lo + n]
                self.assertEqual(it["sample_ids"].tolist(), [ids(0, r, k)[j] for r, j in mine], f"world {world} step {k}")
                want = {"x": np.array([parts[r]["x"][j] for r, j in mine], dtype=np.float32).reshape(-1, 3)}
                for name in ("h", "p"):
                    vals, offs = [], [0]
                    for r, j in mine:
                        v, o = parts[r][name]
                        vals.append(v[o[j]:o[j + 1]])
                        offs.append(offs[-1] + int(o[j + 1] - o[j]))
                    want[name] = (np.concatenate(vals) if vals else parts[0][name][0][:0], np.array(offs, dtype=np.int64))
                check(it, want, f"world {world} rank {rank} step {k}")

    def test_readme_conversions(self):
        # The package README's recipes: lengths for TorchRec's
        # KeyedJaggedTensor.from_offsets_sync, and a nested tensor.
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        from gpuload.torch import ShardDataset
        item = next(iter(ShardDataset(JAGGED_DIR, rank=0, world_size=2, epoch=0)))
        values, offsets = item["h"]
        lengths = offsets[1:] - offsets[:-1]
        self.assertEqual(lengths.tolist(), [i % 4 for i in ids(0, 0, 0)])
        rows = list(torch.split(values, lengths.tolist()))
        self.assertEqual([r.tolist() for r in rows], [[10 * i + e for e in range(i % 4)] for i in ids(0, 0, 0)])
        if hasattr(torch, "nested") and hasattr(torch.nested, "nested_tensor"):
            nt = torch.nested.nested_tensor(rows)
            self.assertEqual([t.tolist() for t in nt.unbind()], [r.tolist() for r in rows])


@unittest.skipUnless(CUDA and JAGGED_DIR, "GPULOAD_TEST_CUDA=1 and GPULOAD_TEST_JAGGED_DIR not set")
class JaggedCUDATest(unittest.TestCase):
    def test_device_pairs_of_dlpack_tensors(self):
        with gpuload.Loader(JAGGED_DIR, 1, 1, backend="cuda", prefetch=2, verify_checksums=True) as loader:
            k = -1
            for k, batch in enumerate(loader):
                want = expect_jagged(1, 1, k)
                for name in ("h", "p"):
                    pair = batch[name]
                    self.assertIsInstance(pair, gpuload.Jagged)
                    self.assertEqual([t.__dlpack_device__() for t in pair], [(gpuload.KDL_CUDA, 0)] * 2)
                    self.assertEqual(pair.offsets.shape, (len(ids(1, 1, k)) + 1,))
                    np.testing.assert_array_equal(pair.values.to_numpy(), want[name][0], err_msg=f"step {k} {name}")
                    np.testing.assert_array_equal(pair.offsets.to_numpy(), want[name][1], err_msg=f"step {k} {name}")
            self.assertEqual(k, STEPS - 1)


@unittest.skipUnless(CUDA, "GPULOAD_TEST_CUDA=1 not set")
class TorchCUDATest(unittest.TestCase):
    def test_dataset_on_cuda_hands_dlpack_tensors_to_torch(self):
        # torch here is CPU-only and the driver is the fake one: check that
        # device="cuda" reads with the CUDA backend and gives torch DLPack
        # tensors on device 0, by standing in for torch's DLPack import.
        try:
            import torch
            import torch.utils.dlpack
        except ImportError:
            self.skipTest("no torch")
        from gpuload.torch import ShardDataset
        seen = []

        def from_dlpack(t):
            seen.append((type(t).__name__, t.__dlpack_device__()))
            return torch.from_numpy(t.to_numpy())

        real, torch.utils.dlpack.from_dlpack = torch.utils.dlpack.from_dlpack, from_dlpack
        try:
            ds = ShardDataset(DIR, rank=1, world_size=2, epoch=1, device="cuda")
            self.assertEqual(ds.backend, "cuda")
            for item in ds:
                k = item["step"]
                for name, want in expect(1, 1, k).items():
                    np.testing.assert_array_equal(item[name].numpy(), want, err_msg=f"step {k} {name}")
                self.assertEqual(item["sample_ids"].tolist(), ids(1, 1, k))
            self.assertEqual(k, STEPS - 1)
            self.assertEqual(set(seen), {("DLPackTensor", (gpuload.KDL_CUDA, 0))})
            self.assertEqual(len(seen), 3 * STEPS)
        finally:
            torch.utils.dlpack.from_dlpack = real


if __name__ == "__main__":
    unittest.main(verbosity=2)
