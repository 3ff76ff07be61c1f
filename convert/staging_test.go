package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/prepml/prep/internal/testutil"
)

// allocatedBytes returns the bytes the file system allocated for path.
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// withoutFallocate makes reserveSpace see a file system without fallocate
// for the rest of the test.
func withoutFallocate(t *testing.T) {
	old := fallocate
	fallocate = func(*os.File, int64) error { return os.NewSyscallError("fallocate", unix.EOPNOTSUPP) }
	t.Cleanup(func() { fallocate = old })
}

// TestStagingBlocksReserved pins the fix for a SIGBUS on a full disk: a
// staging file made with Truncate alone is sparse, so its pages only get
// blocks when stage 1 stores into the mapping; every block must be
// allocated before mapping.
func TestStagingBlocksReserved(t *testing.T) {
	const size = 3<<20 + 4096
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero-fill fallback %v", fallback), func(t *testing.T) {
			if fallback {
				withoutFallocate(t)
			}
			dir := filepath.Join(t.TempDir(), "stage")
			st, err := createStaging(dir, size)
			if err != nil {
				t.Fatal(err)
			}
			defer st.remove()
			path := filepath.Join(dir, StagingFileName)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size || len(st.data) != size {
				t.Fatalf("staging file is %d bytes, mapped %d, want %d", fi.Size(), len(st.data), size)
			}
			if got := allocatedBytes(t, path); got < size {
				t.Fatalf("staging file has %d bytes allocated, want at least %d (sparse file)", got, size)
			}
			for _, b := range st.data[:4096] {
				if b != 0 {
					t.Fatal("staging is not zeroed")
				}
			}
		})
	}
}

// TestStagingDiskFull checks that staging larger than the free space fails
// at creation with ErrNoSpace naming the path and numbers, leaving nothing
// behind, with fallocate and with the zero-fill fallback.
func TestStagingDiskFull(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero-fill fallback %v", fallback), func(t *testing.T) {
			fs := testutil.MountTmpfs(t, 1<<20)
			if fallback {
				withoutFallocate(t)
			}
			dir := filepath.Join(fs, TempDirName, "1")
			const size = 8 << 20
			st, err := createStaging(dir, size)
			if err == nil {
				st.remove()
				t.Fatal("8 MiB of staging on a 1 MiB file system succeeded")
			}
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("error %v does not wrap ErrNoSpace", err)
			}
			for _, s := range []string{filepath.Join(dir, StagingFileName), "need 8388608 bytes", " free", "no space left on device"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("staging directory left behind: %v", err)
			}
			if free, _ := freeBytes(fs); free < 1<<20-64<<10 {
				t.Errorf("only %d bytes free after the failure: the partial reservation was not released", free)
			}
		})
	}
}

// BenchmarkCreateStaging measures reserving and mapping 256 MiB of staging,
// with fallocate and with the zero-fill fallback.
func BenchmarkCreateStaging(b *testing.B) {
	const size = 256 << 20
	for _, fallback := range []bool{false, true} {
		b.Run(fmt.Sprintf("zero-fill=%v", fallback), func(b *testing.B) {
			if fallback {
				old := fallocate
				fallocate = func(*os.File, int64) error { return os.NewSyscallError("fallocate", unix.EOPNOTSUPP) }
				defer func() { fallocate = old }()
			}
			b.SetBytes(size)
			dir := b.TempDir()
			for i := 0; i < b.N; i++ {
				st, err := createStaging(filepath.Join(dir, "s"), size)
				if err != nil {
					b.Fatal(err)
				}
				st.remove()
			}
		})
	}
}

// TestStagingAnonymousWithinLimit checks newStaging's choice: staging that
// fits the memory limit is anonymous memory (no file, no staging directory,
// zeroed, writable, huge-page aligned where supported); staging over the
// limit is the reserved staging file.
func TestStagingAnonymousWithinLimit(t *testing.T) {
	if !anonSupported {
		t.Skip("no anonymous staging on this platform")
	}
	const size = 5<<20 + 112
	dir := filepath.Join(t.TempDir(), "stage")
	st, err := newStaging(dir, size, size)
	if err != nil {
		t.Fatal(err)
	}
	if st.file != nil || st.anon == nil || len(st.data) != size {
		t.Fatalf("staging within the limit: file %v, anon %v, %d bytes; want anonymous %d bytes", st.file != nil, st.anon != nil, len(st.data), size)
	}
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(st.data))) % hugePage; a != 0 {
		t.Errorf("anonymous staging starts %d bytes past a huge page boundary", a)
	}
	for i := 0; i < size; i += 4096 {
		if st.data[i] != 0 {
			t.Fatalf("anonymous staging byte %d is %d, want 0", i, st.data[i])
		}
		st.data[i] = 0xAB
	}
	st.data[size-1] = 0xCD
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("anonymous staging created %s: %v", dir, err)
	}
	st.remove()
	if st.data != nil || st.anon != nil {
		t.Error("remove left the anonymous mapping referenced")
	}

	st, err = newStaging(dir, size, size-1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.remove()
	if st.file == nil || st.anon != nil {
		t.Fatalf("staging one byte over the limit: file %v, anon %v; want a staging file", st.file != nil, st.anon != nil)
	}
	if fi, err := os.Stat(filepath.Join(dir, StagingFileName)); err != nil || fi.Size() != size {
		t.Fatalf("staging file: %v, %v; want %d bytes", fi, err, size)
	}
}
