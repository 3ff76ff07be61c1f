"""End-to-end test of examples/train.py, run by `make test` (test-python):
plan -> convert -> train two epochs -> stop mid-epoch -> resume, with 2 DDP
processes (gloo, RANK/WORLD_SIZE set) and with 1 process (elastic read of the
same 2-rank set). Each resumed run must end with exactly the weights of its
uninterrupted run; 1 and 2 processes agree to float64 rounding (the DDP
gradient average sums in another order)."""

import os
import subprocess
import sys
import tempfile
import shutil
import unittest

import torch

TESTS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(TESTS)))
TRAIN = os.path.join(ROOT, "examples", "train.py")


class ExampleTest(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp(prefix="gpuload-train.")

    def tearDown(self):
        shutil.rmtree(self.work, ignore_errors=True)

    def run_train(self, *args, env=None):
        out = subprocess.run([sys.executable, TRAIN, "--cpu", *args], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, **(env or {})))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        return out.stdout

    def test_two_processes_and_one_stop_and_resume_to_the_same_weights(self):
        w = self.work
        out = self.run_train("--demo", "--work", w, env={"MASTER_PORT": "29531"})
        self.assertIn("rank 0: stopped after 5 steps (epoch 0, step 4)", out)
        self.assertIn("rank 1: stopped after 5 steps (epoch 0, step 4)", out)
        self.assertIn("uninterrupted and stopped-then-resumed runs: identical weights", out)
        shards = os.path.join(w, "shards")
        one = ["--shards", shards, "--elastic"]
        self.run_train(*one, "--weights", os.path.join(w, "one.pt"))
        ck = os.path.join(w, "one-ckpt.pt")
        out = self.run_train(*one, "--checkpoint", ck, "--stop-after", "9")  # epoch 1, step 1
        self.assertIn("rank 0: stopped after 9 steps (epoch 1, step 1)", out)
        self.run_train(*one, "--checkpoint", ck, "--num-workers", "2", "--weights", os.path.join(w, "one-resumed.pt"))
        two, two_resumed = torch.load(os.path.join(w, "full.pt")), torch.load(os.path.join(w, "resumed.pt"))
        one, one_resumed = torch.load(os.path.join(w, "one.pt")), torch.load(os.path.join(w, "one-resumed.pt"))
        self.assertEqual(sorted(two), ["bias", "weight"])
        for k in two:
            self.assertTrue(torch.equal(two[k], two_resumed[k]), k)
            self.assertTrue(torch.equal(one[k], one_resumed[k]), k)
            self.assertTrue(torch.allclose(one[k], two[k], rtol=0, atol=1e-12), f"{k}: {one[k]} vs {two[k]}")
        self.assertFalse(torch.equal(two["weight"], torch.zeros_like(two["weight"])))


if __name__ == "__main__":
    unittest.main(verbosity=2)
