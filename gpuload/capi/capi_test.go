//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
)

// These tests build libgpuload.so with `go build -buildmode=c-shared`, then
// run the C test program (test/capi_test.c, built with gcc) and the Python
// binding's tests (../python/tests/test_gpuload.py, with /usr/bin/python3 and
// NumPy) against a generated shard set, on the host backend and on the cuda
// backend over the fake driver (../internal/cuda/testdata/fakecuda.c).

var cfg = testshards.Config{Epochs: 2, Ranks: 2, BatchSize: 4, Steps: 5, LastCount: 3, Pads: 1}

type env struct {
	lib, fake, dir string
}

func setup(t *testing.T) env {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a c-shared library: skipped in -short mode")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: cannot build the C test program and fake CUDA driver")
	}
	tmp := t.TempDir()
	e := env{lib: filepath.Join(tmp, "libgpuload.so"), fake: filepath.Join(tmp, "libfakecuda.so"), dir: filepath.Join(tmp, "shards")}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	run(t, "", nil, goTool, "build", "-buildmode=c-shared", "-o", e.lib, ".")
	run(t, "", nil, "gcc", "-shared", "-fPIC", "-O1", "-o", e.fake, "../internal/cuda/testdata/fakecuda.c", "-lpthread")
	if _, err := testshards.Write(e.dir, cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

func run(t *testing.T, dir string, extraEnv []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), extraEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	t.Logf("%s", out)
}

func TestCAPI(t *testing.T) {
	e := setup(t)
	bin := filepath.Join(t.TempDir(), "capi_test")
	run(t, "", nil, "gcc", "-Wall", "-Werror", "-I", ".", "-o", bin, "test/capi_test.c",
		"-L", filepath.Dir(e.lib), "-lgpuload", "-Wl,-rpath,"+filepath.Dir(e.lib))
	args := func(epoch, rank int, backend string) []string {
		return []string{e.dir, strconv.Itoa(epoch), strconv.Itoa(rank), strconv.Itoa(cfg.BatchSize), strconv.Itoa(cfg.Steps),
			strconv.Itoa(cfg.LastCount), strconv.Itoa(cfg.Pads), backend}
	}
	t.Run("host", func(t *testing.T) { run(t, "", nil, bin, args(1, 0, "host")...) })
	t.Run("cuda-fake", func(t *testing.T) {
		run(t, "", []string{"PREP_LIBCUDA=" + e.fake, "FAKECUDA_DELAY_US=300"}, bin, args(0, 1, "cuda")...)
	})
}

func TestPython(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s cannot import numpy (install python3-numpy): %v", py, err)
	}
	e := setup(t)
	run(t, "", []string{"GPULOAD_LIB=" + e.lib, "GPULOAD_TEST_DIR=" + e.dir, "GPULOAD_TEST_CUDA=1", "PREP_LIBCUDA=" + e.fake,
		"PYTHONDONTWRITEBYTECODE=1"}, py, "../python/tests/test_gpuload.py")
}
