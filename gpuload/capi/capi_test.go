//go:build cgo

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
)

// These tests build libgpuload.so with `go build -buildmode=c-shared`, then
// run the C test programs (test/capi_test.c, and test/capi_jagged_test.c over
// a set with jagged tensors, built with gcc) and the Python
// binding's tests (../python/tests/test_gpuload.py, with /usr/bin/python3 and
// NumPy) against a generated shard set, on the host backend and on the cuda
// backend over the fake driver (../internal/cuda/testdata/fakecuda.c).

var cfg = testshards.Config{Epochs: 2, Ranks: 2, BatchSize: 4, Steps: 5, LastCount: 3, Pads: 1}

type env struct {
	lib, fake, dir string
	jagged         string // a set of testshards.JaggedTensors (format 2.0)
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
	e := env{lib: filepath.Join(tmp, "libgpuload.so"), fake: filepath.Join(tmp, "libfakecuda.so"), dir: filepath.Join(tmp, "shards"),
		jagged: filepath.Join(tmp, "jagged")}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	run(t, "", nil, goTool, "build", "-buildmode=c-shared", "-o", e.lib, ".")
	run(t, "", nil, "gcc", "-shared", "-fPIC", "-O1", "-o", e.fake, "../internal/cuda/testdata/fakecuda.c", "-lpthread")
	if _, err := testshards.Write(e.dir, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := testshards.WriteJagged(e.jagged, cfg); err != nil {
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

// buildC compiles the C test program src against the library of e.
func buildC(t *testing.T, e env, src string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	run(t, "", nil, "gcc", "-Wall", "-Werror", "-I", ".", "-o", bin, src,
		"-L", filepath.Dir(e.lib), "-lgpuload", "-Wl,-rpath,"+filepath.Dir(e.lib))
	return bin
}

// cArgs is the command line of a C test program reading (epoch, rank) of
// the set in dir.
func cArgs(dir string, epoch, rank int, backend string) []string {
	return []string{dir, strconv.Itoa(epoch), strconv.Itoa(rank), strconv.Itoa(cfg.BatchSize), strconv.Itoa(cfg.Steps),
		strconv.Itoa(cfg.LastCount), strconv.Itoa(cfg.Pads), backend}
}

func TestCAPI(t *testing.T) {
	e := setup(t)
	bin := buildC(t, e, "test/capi_test.c")
	t.Run("host", func(t *testing.T) { run(t, "", nil, bin, cArgs(e.dir, 1, 0, "host")...) })
	t.Run("cuda-fake", func(t *testing.T) {
		run(t, "", []string{"PREP_LIBCUDA=" + e.fake, "FAKECUDA_DELAY_US=300"}, bin, cArgs(e.dir, 0, 1, "cuda")...)
	})
}

// TestCAPIJagged reads a format 2.0 set through the C ABI and checks every
// value and offset of its jagged tensors (test/capi_jagged_test.c).
func TestCAPIJagged(t *testing.T) {
	e := setup(t)
	bin := buildC(t, e, "test/capi_jagged_test.c")
	t.Run("host", func(t *testing.T) { run(t, "", nil, bin, cArgs(e.jagged, 1, 1, "host")...) })
	t.Run("cuda-fake", func(t *testing.T) {
		run(t, "", []string{"PREP_LIBCUDA=" + e.fake, "FAKECUDA_DELAY_US=300"}, bin, cArgs(e.jagged, 0, 1, "cuda")...)
	})
}

func TestPython(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		t.Skipf("%s cannot import numpy (install python3-numpy): %v", py, err)
	}
	e := setup(t)
	run(t, "", []string{"GPULOAD_LIB=" + e.lib, "GPULOAD_TEST_DIR=" + e.dir, "GPULOAD_TEST_JAGGED_DIR=" + e.jagged, "GPULOAD_TEST_CUDA=1", "PREP_LIBCUDA=" + e.fake,
		"PYTHONDONTWRITEBYTECODE=1"}, py, "../python/tests/test_gpuload.py")
}

// TestCAPIThreads calls gl_next, gl_steps and gl_release on one loader from
// two threads at once and checks that every step reaches exactly one of
// them, whole (test/capi_threads_test.c).
func TestCAPIThreads(t *testing.T) {
	e := setup(t)
	bin := buildC(t, e, "test/capi_threads_test.c")
	t.Run("host", func(t *testing.T) { run(t, "", nil, bin, cArgs(e.dir, 1, 0, "host")...) })
	t.Run("cuda-fake", func(t *testing.T) {
		run(t, "", []string{"PREP_LIBCUDA=" + e.fake}, bin, cArgs(e.dir, 0, 1, "cuda")...)
	})
}
