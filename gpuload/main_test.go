package gpuload

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// fakeCUDA is why the fake CUDA driver is unavailable ("" when it is built).
var fakeCUDA = "not built"

// TestMain builds the fake CUDA driver (internal/cuda/testdata/fakecuda.c)
// with gcc and points PREP_LIBCUDA at it, unless the caller set
// PREP_LIBCUDA already (scripts/gpu-check.sh runs these tests against the
// real driver that way: PREP_LIBCUDA=libcuda.so.1).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpuload-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv(cuda.EnvLibrary) == "" {
		so := filepath.Join(dir, "libfakecuda.so")
		out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", so, "internal/cuda/testdata/fakecuda.c", "-lpthread").CombinedOutput()
		if err != nil {
			fakeCUDA = fmt.Sprintf("cannot build the fake CUDA driver with gcc (%v): %s", err, out)
		} else {
			os.Setenv(cuda.EnvLibrary, so)
			fakeCUDA = ""
		}
	} else {
		fakeCUDA = ""
	}
	code := m.Run()
	os.RemoveAll(dir)
	for _, d := range []string{benchDir, controlDir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}
