"""End-to-end test of examples/packed_lm.py, run by `make test`
(test-python): prep plan --pack -> convert -> train a causal,
document-masked model on tokens, positions and segment ids -> stop
mid-epoch -> resume; the resumed run must end with exactly the weights of
the uninterrupted run, and every batch's cu_seqlens must agree with its
segment ids (the example asserts it). The same over a packed mixture of
two sources (--mixture)."""

import os
import subprocess
import sys
import tempfile
import shutil
import unittest

import torch

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(TESTS)))
EXAMPLE = os.path.join(ROOT, "examples", "packed_lm.py")


class PackedExampleTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="gpuload-packed.")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def test_stop_and_resume_to_the_same_weights(self):
        out = subprocess.run([sys.executable, EXAMPLE, "--demo", "--work", self.work], capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("stopped after 23 steps (epoch 0, step 22)", out.stdout)
        self.assertIn("uninterrupted and stopped-then-resumed runs: identical weights", out.stdout)
        full = torch.load(os.path.join(self.work, "full.pt"))
        self.assertFalse(torch.equal(full["out.weight"], torch.zeros_like(full["out.weight"])))

    def test_packed_mixture_stop_and_resume(self):
        # A packed mixture (plan/PLAN.md §12.1): each epoch packs its own
        # draws, so the two epochs have their own packed rows; stopped in
        # epoch 1 and resumed, the weights equal the uninterrupted run's.
        out = subprocess.run([sys.executable, EXAMPLE, "--demo", "--mixture", "--work", self.work], capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("packed rows per epoch: [", out.stdout)
        self.assertIn("stopped after 20 steps (epoch 1,", out.stdout)
        self.assertIn("uninterrupted and stopped-then-resumed runs: identical weights", out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
