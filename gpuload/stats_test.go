//go:build cgo && linux

package gpuload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/shardfmt"
	"golang.org/x/sys/unix"
)

// withResidency makes the next Opens see the page cache holding fraction f
// of every shard.
func withResidency(t *testing.T, f float64) {
	t.Helper()
	saved := residency
	residency = func([]byte) (float64, error) { return f, nil }
	t.Cleanup(func() { residency = saved })
}

// withOpenDirect replaces how shards are opened for O_DIRECT.
func withOpenDirect(t *testing.T, open func(f *os.File, name string) (blockFile, uint32, uint32, error)) {
	t.Helper()
	saved := openDirect
	openDirect = open
	t.Cleanup(func() { openDirect = saved })
}

// refusesReads is an O_DIRECT file whose reads fail as a file system that
// accepts the open but not the reads would make them fail.
type refusesReads struct{ blockFile }

func (refusesReads) ReadAt([]byte, int64) (int, error) { return 0, syscall.EINVAL }

// dioAlign is the O_DIRECT offset alignment statx reports for path, or the
// assumed one.
func dioAlign(t *testing.T, path string) uint32 {
	t.Helper()
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, 0, unix.STATX_DIOALIGN, &st); err == nil && st.Mask&unix.STATX_DIOALIGN != 0 {
		return st.Dio_offset_align
	}
	return assumedDirectAlign
}

// noCuFile points the GDS loader at a library that does not exist and
// returns its load error, skipping t if a real libcufile is already loaded
// in this process.
func noCuFile(t *testing.T) string {
	t.Helper()
	t.Setenv(cuda.EnvCuFile, "/nonexistent/libcufile.so.0")
	err := cuda.LoadCuFile()
	if err == nil {
		t.Skip("a cuFile library is loaded in this process already")
	}
	return err.Error()
}

// readEvery reads and checks every step of shard (0, 0) of small through l.
func readEvery(t *testing.T, l *Loader) {
	t.Helper()
	for k := range small.Steps {
		b, err := l.Next()
		if err != nil {
			t.Fatalf("Next at step %d: %v", k, err)
		}
		checkBatch(t, l, small, 0, 0, k, b)
		b.Release()
	}
	if _, err := l.Next(); err != io.EOF {
		t.Fatalf("Next after the last step = %v, want io.EOF", err)
	}
}

func TestCUDAPathChoiceAndFallbacks(t *testing.T) {
	needFake(t)
	dir := writeSet(t, small)
	path := filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0)))
	l0 := openLoader(t, dir, 0, 0, Options{})
	span := uint64(l0.Steps()) * l0.Geometry().BlockSize
	l0.Close()
	align := dioAlign(t, path)
	refuseOpen := func(_ *os.File, p string) (blockFile, uint32, uint32, error) {
		return nil, 0, 0, fmt.Errorf("opening %s for O_DIRECT: %w", p, &os.PathError{Op: "open", Path: "/proc/self/fd/9", Err: syscall.EINVAL})
	}
	refuseRead := func(_ *os.File, p string) (blockFile, uint32, uint32, error) {
		f, err := os.Open(p)
		return refusesReads{f}, 512, 512, err
	}
	openRefused := Fallback{Path: CUDAPathDirect, Error: "opening " + path + " for O_DIRECT: open /proc/self/fd/9: invalid argument"}
	readRefused := Fallback{Path: CUDAPathDirect, Error: "reading block 0 with O_DIRECT: invalid argument"}
	regRefused := Fallback{Path: CUDAPathRegister,
		Error: fmt.Sprintf("registering the mapped shard (%d bytes) read-only: cuMemHostRegister: invalid argument (CUDA_ERROR_INVALID_VALUE, 1)", span)}
	for _, c := range []struct {
		name     string
		resident float64
		fail     string // FAKECUDA_FAIL_AT
		open     func(*os.File, string) (blockFile, uint32, uint32, error)
		env      string // PREP_CUDA_PATH
		want     TransferStats
	}{
		{name: "resident: registered", resident: 1,
			want: TransferStats{Path: CUDAPathRegister, Requested: CUDAPathAuto, Reason: "100% of the shard in page cache", Resident: 1}},
		{name: "cold: O_DIRECT", resident: 0.25,
			want: TransferStats{Path: CUDAPathDirect, Requested: CUDAPathAuto, Reason: "25% of the shard in page cache, under 90%", Resident: 0.25, DirectAlign: align}},
		{name: "cold, O_DIRECT refused at open: pread", resident: 0, open: refuseOpen,
			want: TransferStats{Path: CUDAPathPread, Requested: CUDAPathAuto, Reason: "0% of the shard in page cache, under 90%", Fallbacks: []Fallback{openRefused}}},
		{name: "cold, O_DIRECT refused at read: pread", resident: 0, open: refuseRead,
			want: TransferStats{Path: CUDAPathPread, Requested: CUDAPathAuto, Reason: "0% of the shard in page cache, under 90%", Fallbacks: []Fallback{readRefused}}},
		{name: "resident, registration refused: O_DIRECT", resident: 1, fail: "cuMemHostRegister_v2:1:1",
			want: TransferStats{Path: CUDAPathDirect, Requested: CUDAPathAuto, Reason: "100% of the shard in page cache", Resident: 1,
				Fallbacks: []Fallback{regRefused}, DirectAlign: align}},
		{name: "resident, registration and O_DIRECT refused: pread", resident: 1, fail: "cuMemHostRegister_v2:1:1", open: refuseOpen,
			want: TransferStats{Path: CUDAPathPread, Requested: CUDAPathAuto, Reason: "100% of the shard in page cache", Resident: 1,
				Fallbacks: []Fallback{regRefused, openRefused}}},
		{name: "environment asks for pread", resident: 1, env: "pread",
			want: TransferStats{Path: CUDAPathPread, Requested: CUDAPathPread, Reason: "requested", Resident: 1}},
	} {
		if c.want.Path == CUDAPathDirect && !usable(Options{CUDAPath: CUDAPathDirect}) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			withResidency(t, c.resident)
			if c.open != nil {
				withOpenDirect(t, c.open)
			}
			t.Setenv("FAKECUDA_FAIL_AT", c.fail)
			t.Setenv(EnvCUDAPath, c.env)
			l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA})
			done := make(chan struct{})
			go func() { // TransferStats while the pipeline runs (the race detector watches)
				defer close(done)
				for range 50 {
					_ = l.TransferStats()
				}
			}()
			readEvery(t, l)
			<-done
			got := l.TransferStats()
			want := c.want
			want.Backend, want.GDS, want.Batches = BackendCUDA, "not tried", int64(small.Steps)
			if want.Fallbacks == nil {
				want.Fallbacks = []Fallback{}
			}
			if got.Fallbacks == nil {
				got.Fallbacks = []Fallback{}
			}
			// Durations vary: check they were counted where they must be.
			if got.SetupSeconds <= 0 || got.EventWaitSeconds <= 0 || got.CopyCallSeconds <= 0 ||
				(got.Path != CUDAPathRegister) != (got.ReadSeconds > 0) {
				t.Errorf("durations: setup %v, read %v, copy calls %v, event waits %v", got.SetupSeconds, got.ReadSeconds, got.CopyCallSeconds, got.EventWaitSeconds)
			}
			got.SetupSeconds, got.ReadSeconds, got.CopyCallSeconds, got.EventWaitSeconds = 0, 0, 0, 0
			if !reflect.DeepEqual(got, want) {
				t.Errorf("TransferStats =\n%+v, want\n%+v", got, want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			assertNoLeaks(t)
		})
	}
}

func TestCUDARequestedPathRefused(t *testing.T) {
	needFake(t)
	gds := noCuFile(t)
	dir := writeSet(t, small)
	path := filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 0)))
	withOpenDirect(t, func(_ *os.File, p string) (blockFile, uint32, uint32, error) {
		return nil, 0, 0, fmt.Errorf("opening %s for O_DIRECT: %w", p, &os.PathError{Op: "open", Path: "/proc/self/fd/9", Err: syscall.EINVAL})
	})
	for _, c := range []struct {
		path, want string
		is         error
	}{
		{CUDAPathDirect, "CUDA transfer path unavailable: direct: opening " + path + " for O_DIRECT: open /proc/self/fd/9: invalid argument", syscall.EINVAL},
		{CUDAPathGDS, "CUDA transfer path unavailable: gds: " + gds, ErrGDSUnavailable},
	} {
		_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: c.path})
		if !errors.Is(err, ErrPathUnavailable) || !errors.Is(err, c.is) || !strings.HasSuffix(fmtErr(err), c.want) {
			t.Errorf("Open with CUDAPath %s = %v, want ErrPathUnavailable ending %q", c.path, err, c.want)
		}
		assertNoLeaks(t)
	}
	if want := "GPUDirect Storage unavailable: /nonexistent/libcufile.so.0: cannot open shared object file: No such file or directory"; gds != want {
		t.Errorf("cuFile load error %q, want %q", gds, want)
	}
}

func TestHostTransferStats(t *testing.T) {
	dir := writeSet(t, small)
	for _, c := range []struct {
		opts         Options
		path, reason string
	}{
		{Options{}, HostPathPread, "host backend: blocks read into the ring"},
		{Options{MapBlocks: true}, HostPathMap, "host backend: views of the mapping (MapBlocks)"},
	} {
		l := openLoader(t, dir, 0, 0, c.opts)
		readEvery(t, l)
		got := l.TransferStats()
		got.ReadSeconds = 0
		want := TransferStats{Backend: BackendHost, Requested: c.path, Path: c.path, Reason: c.reason, Resident: -1, GDS: "not tried", Batches: int64(small.Steps)}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("TransferStats =\n%+v, want\n%+v", got, want)
		}
		l.Close()
	}
}

func TestCUDAGDSWithChecksumsRefused(t *testing.T) {
	needCUDA(t)
	dir := writeSet(t, small)
	_, err := Open(dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathGDS, VerifyChecksums: true})
	if want := "invalid argument: VerifyChecksums with CUDAPath gds: the blocks never reach host memory"; !errors.Is(err, ErrInvalid) || !strings.HasSuffix(fmtErr(err), want) {
		t.Fatalf("Open = %v, want ErrInvalid ending %q", err, want)
	}
}

// TestCUDADirectRingRefusedFallsBackToASmallerRing: when the direct path's
// larger ring cannot be pinned, the pread ring is allocated afresh (the
// slots the direct path got are freed), and Open records why.
func TestCUDADirectRingRefusedFallsBackToASmallerRing(t *testing.T) {
	needFake(t)
	if !usable(Options{CUDAPath: CUDAPathDirect}) {
		t.Skip(noDirect())
	}
	dir := writeSet(t, small)
	withResidency(t, 0)
	// Slot 3 of the direct ring fails; the pread ring's 4 slots are calls 4-7.
	t.Setenv("FAKECUDA_FAIL_AT", "cuMemHostAlloc:3")
	l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA})
	readEvery(t, l)
	st := l.TransferStats()
	c := l.be.(*cudaBackend)
	want := []Fallback{{Path: CUDAPathDirect, Error: fmt.Sprintf("allocating %d pinned host slots of %d bytes: cuMemHostAlloc: out of memory (CUDA_ERROR_OUT_OF_MEMORY, 2)",
		directSlots(DefaultPrefetch, c.size), c.size)}}
	if st.Path != CUDAPathPread || !reflect.DeepEqual(st.Fallbacks, want) || len(c.pinned) != DefaultPrefetch {
		t.Errorf("path %s, %d pinned slots, fallbacks %+v; want pread, %d, %+v", st.Path, len(c.pinned), st.Fallbacks, DefaultPrefetch, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoLeaks(t)
}
