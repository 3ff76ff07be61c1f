//go:build cgo && linux

package gpuload

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// envGDSChild marks the test process TestGDSWithFakeCuFile re-runs itself
// as, with the fake cuFile library loaded (a library once loaded stays
// loaded, and the other tests want none).
const envGDSChild = "GPULOAD_TEST_GDS_CHILD"

// TestGDSWithFakeCuFile builds the fake cuFile library and runs
// TestGDSPipeline in a child process that loads it.
func TestGDSWithFakeCuFile(t *testing.T) {
	needFake(t)
	if os.Getenv(envGDSChild) != "" {
		t.Skip("in the child")
	}
	so := filepath.Join(t.TempDir(), "libfakecufile.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O1", "-o", so, "internal/cuda/testdata/fakecufile.c").CombinedOutput(); err != nil {
		t.Skipf("cannot build the fake cuFile library: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestGDSPipeline$", "-test.count", "1", "-test.v")
	cmd.Env = append(os.Environ(), envGDSChild+"=1", cuda.EnvCuFile+"="+so)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestGDSPipeline") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestGDSPipeline reads through cuFileRead straight into device buffers:
// every byte, with slow and failing reads, Seek, and refusals at Open. It
// runs only in the child of TestGDSWithFakeCuFile.
func TestGDSPipeline(t *testing.T) {
	if os.Getenv(envGDSChild) == "" {
		t.Skip("runs in the child of TestGDSWithFakeCuFile")
	}
	needFake(t)
	if err := cuda.LoadCuFile(); err != nil {
		t.Fatal(err)
	}
	dir := writeSet(t, small)
	for _, o := range []Options{
		{Backend: BackendCUDA, CUDAPath: CUDAPathGDS},
		{Backend: BackendCUDA, CUDAPath: CUDAPathGDS, Prefetch: 1},
		{Backend: BackendCUDA, CUDAPath: CUDAPathGDS, StartStep: 4},
	} {
		l := openLoader(t, dir, 0, 0, o)
		for k := o.StartStep; k < small.Steps; k++ {
			b := mustNext(t, l)
			checkBatch(t, l, small, 0, 0, k, b)
			b.Release()
		}
		st := l.TransferStats()
		if st.Path != CUDAPathGDS || st.GDS != "loaded" || st.Batches != int64(small.Steps-o.StartStep) || !reflect.DeepEqual(st.Fallbacks, []Fallback(nil)) {
			t.Errorf("%+v: TransferStats = %+v", o, st)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoLeaks(t)
	}
	// The first read is Open's probe of block 0, so read 3 is step 1.
	t.Setenv("FAKECUFILE_FAIL", "cuFileRead:3")
	l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathGDS})
	checkBatch(t, l, small, 0, 0, 0, mustNext(t, l))
	_, err := l.Next()
	var fe *cuda.FileError
	var le *Error
	if !errors.As(err, &fe) || fe.Errno != 5 || !errors.As(err, &le) || le.Step != 1 || le.Op != "reading block to device" {
		t.Fatalf("Next at step 1 = %v, want a cuFileRead EIO located at step 1", err)
	}
	seekAndCheck(t, l, small, 0, 0, 1)
	l.Close()
	assertNoLeaks(t)
	for _, fail := range []string{"cuFileDriverOpen", "cuFileHandleRegister", "cuFileRead"} {
		t.Setenv("FAKECUFILE_FAIL", fail)
		_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathGDS})
		if !errors.Is(err, ErrPathUnavailable) || !errors.Is(err, ErrGDSUnavailable) || !strings.Contains(fmtErr(err), fail) {
			t.Errorf("Open with %s failing = %v, want ErrGDSUnavailable naming it", fail, err)
		}
		assertNoLeaks(t)
	}
}
