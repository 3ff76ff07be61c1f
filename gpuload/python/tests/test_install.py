"""The package installs as a user installs it: into a fresh virtual
environment (seeing the system's NumPy and torch) with
`pip install --no-build-isolation ./gpuload/python` (Debian's setuptools, no
package index), which builds libgpuload.so with Go into the installed
package; run by `make test` (test-python)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TESTS = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(TESTS)
ROOT = os.path.dirname(os.path.dirname(PKG))


def have(mod):
    return subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode == 0


@unittest.skipUnless(have("ensurepip"), "no ensurepip: apt-get install python3-venv")
class InstallTest(unittest.TestCase):
    def test_pip_install_into_a_venv_builds_the_library_into_the_package(self):
        work = tempfile.mkdtemp(prefix="gpuload-install.")
        try:
            venv = os.path.join(work, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPULOAD_LIB")}
            env["PATH"] = os.pathsep.join([env.get("PATH", ""), "/usr/local/go/bin"])
            out = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-index", PKG],
                                 env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            shards = os.path.join(work, "shards")
            prep = os.environ.get("PREP") or os.path.join(ROOT, "bin", "prep")
            src = os.path.join(ROOT, "testdata", "ml", "venomx")
            plan = os.path.join(work, "plan.json")
            subprocess.run([prep, "plan", "--source", os.path.join(src, "embeddings.parquet"), "--global-batch", "16",
                            "-o", plan, "-q"], check=True)
            subprocess.run([prep, "convert", "--plan", plan, "--spec", os.path.join(src, "features.yaml"), "-o", shards,
                            "-q"], check=True)
            code = ("import gpuload, gpuload.torch\n"
                    "print(gpuload.library_path())\n"
                    f"ds = gpuload.torch.ShardDataset({shards!r}, rank=0, world_size=1)\n"
                    "print(sum(len(b['sample_ids']) for b in ds))\n")
            out = subprocess.run([py, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            lib, rows = out.stdout.split()
            self.assertTrue(lib.startswith(os.path.join(venv, "lib")), lib)
            self.assertTrue(lib.endswith(os.path.join("site-packages", "gpuload", "libgpuload.so")), lib)
            self.assertEqual(rows, "96")  # 100 rows, global batch 16, remainder drop: 6 steps
            self.assertFalse(os.path.exists(os.path.join(ROOT, "libgpuload.so")))
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
