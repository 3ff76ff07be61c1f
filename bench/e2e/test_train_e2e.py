"""Tests of train_e2e.py's parts that need neither a GPU nor pyarrow:
python3 -m unittest discover -s bench/e2e"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_e2e  # noqa: E402

try:
    import numpy as np
except ImportError:
    np = None


@unittest.skipIf(np is None, "needs numpy")
class PadListsTest(unittest.TestCase):
    def test_rows_padded_and_lengths(self):
        # Rows [7], [8, 9, 10], [], [11, 12] as an Arrow slice starting at offset 2.
        values = np.array([0, 0, 7, 8, 9, 10, 11, 12, 99], np.int64)
        offsets = np.array([2, 3, 6, 6, 8], np.int32)
        out, lengths = train_e2e.pad_lists(offsets, values, 4)
        self.assertEqual(lengths.tolist(), [1, 3, 0, 2])
        self.assertEqual(lengths.dtype, np.int32)
        self.assertEqual(out.tolist(), [[7, 0, 0, 0], [8, 9, 10, 0], [0, 0, 0, 0], [11, 12, 0, 0]])
        self.assertEqual(out.dtype, np.int64)


class AccountingTest(unittest.TestCase):
    def test_tree_cpu_counts_this_process(self):
        t0 = train_e2e.tree_cpu_seconds()
        x = 0
        for i in range(3_000_000):
            x += i
        self.assertGreater(train_e2e.tree_cpu_seconds(), t0)

    def test_detect_names_every_gap(self):
        have, notes = train_e2e.detect()
        for mod in ("numpy", "torch", "pyarrow"):
            self.assertTrue(mod in have or any(mod in n for n in notes), mod)


if __name__ == "__main__":
    unittest.main()
