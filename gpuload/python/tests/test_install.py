"""The package installs as a user installs it, into fresh virtual
environments (seeing the system's NumPy and torch): from source with
`pip install --no-build-isolation ./gpuload/python` (Debian's setuptools, no
package index), which builds libgpuload.so with Go into the installed
package; and as a wheel built by `pip wheel`, installed where there is no Go,
passing the dataset tests there. Run by `make test` (test-python)."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

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


@unittest.skipUnless(have("ensurepip"), "no ensurepip: apt-get install python3-venv")
class WheelTest(unittest.TestCase):
    def test_wheel_installs_without_go_and_passes_the_dataset_tests(self):
        work = tempfile.mkdtemp(prefix="gpuload-wheel.")
        try:
            dist = os.path.join(work, "dist")
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPULOAD_LIB")}
            env["PATH"] = os.pathsep.join([env.get("PATH", ""), "/usr/local/go/bin"])
            out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                                  "--no-index", "-w", dist, PKG], env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            wheels = os.listdir(dist)
            self.assertEqual(len(wheels), 1, wheels)
            whl = os.path.join(dist, wheels[0])
            self.assertRegex(wheels[0], r"^gpuload-[0-9.]+-cp3\d+-cp3\d+-linux_\w+\.whl$")  # a platform wheel
            with zipfile.ZipFile(whl) as z:
                self.assertIn("gpuload/libgpuload.so", z.namelist())
            # A fresh venv and a PATH without Go (nor gcc): the wheel needs neither.
            venv = os.path.join(work, "venv")
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            bare = {k: v for k, v in env.items() if k not in ("GO", "GOROOT", "GOPATH")}
            bare["PATH"] = os.pathsep.join([os.path.join(venv, "bin"), "/usr/bin", "/bin"])
            self.assertIsNone(shutil.which("go", path=bare["PATH"]))
            out = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", whl], env=bare,
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            bare["GPULOAD_TEST_INSTALLED"] = "1"
            bare["PREP"] = os.path.abspath(os.environ.get("PREP") or os.path.join(ROOT, "bin", "prep"))
            out = subprocess.run([py, "-c", "import gpuload, gpuload.torch; print(gpuload.__file__)"], cwd=work,
                                 env=bare, capture_output=True, text=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(out.stdout.startswith(os.path.join(venv, "lib")), out.stdout)
            for test in ("test_dataset.py", "test_torch.py"):
                out = subprocess.run([py, os.path.join(TESTS, test)], cwd=work, env=bare, capture_output=True,
                                     text=True, timeout=600)
                self.assertEqual(out.returncode, 0, f"{test} in the wheel's venv:\n{out.stderr[-4000:]}")
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    unittest.main(verbosity=2)
