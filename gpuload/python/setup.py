"""Builds libgpuload.so from the prep checkout this package sits in
(``go build -buildmode=c-shared ./gpuload/capi``) and places it inside the
``gpuload`` package of the build, so the installed package finds it beside
its modules. Needs Go and gcc; $GO names the go binary (default: go)."""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the prep checkout


class BuildWithLibrary(build_py):
    """build_py that also builds the native library into the package."""

    def run(self):
        super().run()
        if not os.path.isfile(os.path.join(ROOT, "gpuload", "capi", "capi.go")):
            raise SystemExit(f"gpuload: {ROOT} is not a prep checkout: build the package from gpuload/python inside one")
        out = os.path.join(os.path.abspath(self.build_lib), "gpuload", "libgpuload.so")
        go = os.environ.get("GO") or shutil.which("go") or "/usr/local/go/bin/go"
        cmd = [go, "build", "-trimpath", "-buildmode=c-shared", "-o", out, "./gpuload/capi"]
        print("building libgpuload.so:", " ".join(cmd))
        try:
            subprocess.run(cmd, cwd=ROOT, check=True, env=dict(os.environ, CGO_ENABLED="1"))
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"gpuload: building libgpuload.so failed ({e}); Go 1.26 and gcc are build requirements")
        header = out[:-3] + ".h"
        if os.path.exists(header):
            os.remove(header)  # cgo's header; gpuload/capi/gpuload.h is the public one


class PlatformDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=PlatformDistribution)
