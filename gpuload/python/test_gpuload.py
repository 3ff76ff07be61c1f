"""Tests of gpuload.py, run by gpuload/capi's Go test with /usr/bin/python3:

    GPULOAD_LIB=.../libgpuload.so GPULOAD_TEST_DIR=<shard set> GPULOAD_TEST_CUDA=0|1 \
        python3 test_gpuload.py

The shard set is gpuload/internal/testshards with 2 epochs x 2 ranks, batch
size 4, 5 steps, last batch 3 samples of which 1 pad. Values of sample id:
x[c] = id + c/4 (F32 [3]), y = -id (I64), m[c] = (id + c) mod 256 (U8 [5]).
"""

import ctypes
import os
import sys
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpuload  # noqa: E402

DIR = os.environ["GPULOAD_TEST_DIR"]
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
        with gpuload.Loader(DIR, 0, 0, prefetch=1) as loader:
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
            del a, a2  # the deleters release batches 0 and 1
            import gc
            gc.collect()
            b3 = loader.next_batch()
            self.assertEqual(b3.step, 2)

    def test_errors(self):
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader("/nonexistent/shards", 0, 0)
        self.assertEqual(cm.exception.code, -9)
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 0, 0, plan_fingerprint="plan:other")
        self.assertEqual(cm.exception.code, gpuload.GL_ERR_PLAN_MISMATCH)
        self.assertIn("plan:other", str(cm.exception))
        with self.assertRaises(gpuload.GpuloadError) as cm:
            gpuload.Loader(DIR, 9, 0)
        self.assertEqual(cm.exception.code, -10)


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
                m = ctypes.cast(p, ctypes.POINTER(gpuload._DLManagedTensor)).contents
                dl = m.dl_tensor
                self.assertEqual((dl.device.device_type, dl.device.device_id), (gpuload.KDL_CUDA, 0))
                self.assertEqual((dl.dtype.code, dl.dtype.bits, dl.dtype.lanes), (2, 32, 1))
                self.assertEqual([dl.shape[i] for i in range(dl.ndim)], [len(ids(1, 0, k)), 3])
                self.assertEqual([dl.strides[i] for i in range(dl.ndim)], [3, 1])
                self.assertEqual(dl.data, batch["x"].ptr)
                pyapi.PyCapsule_SetName(cap, b"used_dltensor")
                m.deleter(ctypes.cast(p, ctypes.POINTER(gpuload._DLManagedTensor)))
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
