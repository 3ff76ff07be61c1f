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

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/sysmem"
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
	old := sysmem.Fallocate
	sysmem.Fallocate = func(*os.File, int64) error { return os.NewSyscallError("fallocate", unix.EOPNOTSUPP) }
	t.Cleanup(func() { sysmem.Fallocate = old })
}

// TestSpillBlocksReserved pins the fix for a full disk found midway: the
// spill file must have every block allocated when it is created, with
// fallocate and with the zero-fill fallback, so a later pwrite cannot fail
// for want of space.
func TestSpillBlocksReserved(t *testing.T) {
	const size = 3<<20 + 4096
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero-fill fallback %v", fallback), func(t *testing.T) {
			if fallback {
				withoutFallocate(t)
			}
			dir := filepath.Join(t.TempDir(), TempDirName, "1")
			s := &spiller{ent: 4096, windows: []*spillWindow{{count: 512}, {base: 512 * 4096, count: size/4096 - 512}}}
			if err := s.open(dir); err != nil {
				t.Fatal(err)
			}
			defer sysmem.RemoveTemp(dir)
			defer s.close()
			path := filepath.Join(dir, SpillFileName)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Size() != size {
				t.Fatalf("spill file is %d bytes, want %d", fi.Size(), size)
			}
			if got := allocatedBytes(t, path); got < size {
				t.Fatalf("spill file has %d bytes allocated, want at least %d (sparse file)", got, size)
			}
		})
	}
}

// TestSpillDiskFull checks that a spill file larger than the free space
// fails at creation with ErrNoSpace naming the path and numbers, and that
// removing the run's temporary directory gives the space back, with
// fallocate and with the zero-fill fallback.
func TestSpillDiskFull(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("zero-fill fallback %v", fallback), func(t *testing.T) {
			fs := testutil.MountTmpfs(t, 1<<20)
			if fallback {
				withoutFallocate(t)
			}
			dir := filepath.Join(fs, TempDirName, "1")
			s := &spiller{ent: 8, windows: []*spillWindow{{count: 1 << 20}}}
			err := s.open(dir)
			sysmem.RemoveTemp(dir)
			if err == nil {
				t.Fatal("8 MiB of spill on a 1 MiB file system succeeded")
			}
			if !errors.Is(err, feature.ErrNoSpace) {
				t.Fatalf("error %v does not wrap ErrNoSpace", err)
			}
			for _, s := range []string{filepath.Join(dir, SpillFileName), "need 8388608 bytes", " free", "no space left on device"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if _, err := os.Stat(filepath.Join(fs, TempDirName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary directory left behind: %v", err)
			}
			if free, _ := sysmem.FreeBytes(fs); free < 1<<20-64<<10 {
				t.Errorf("only %d bytes free after the failure: the partial reservation was not released", free)
			}
		})
	}
}

// TestStagingAnonymousWithinLimit checks newStaging: staging that fits the
// memory limit is anonymous memory (zeroed, writable, huge-page aligned
// where supported), and anonStaging refuses one byte over the limit.
func TestStagingAnonymousWithinLimit(t *testing.T) {
	if !sysmem.AnonSupported {
		t.Skip("no anonymous staging on this platform")
	}
	const size = 5<<20 + 112
	if !sysmem.AnonFits(size, size) || sysmem.AnonFits(size, size-1) || sysmem.AnonFits(0, size) {
		t.Fatalf("sysmem.AnonFits(%d, limit): want true at the limit, false one byte over and for 0 bytes", size)
	}
	st := newStaging(size)
	if st == nil || st.anon == nil || len(st.data) != size {
		t.Fatalf("newStaging(%d) = %+v; want %d bytes of anonymous memory", size, st, size)
	}
	if a := uintptr(unsafe.Pointer(unsafe.SliceData(st.data))) % sysmem.HugePage; a != 0 {
		t.Errorf("anonymous staging starts %d bytes past a huge page boundary", a)
	}
	for i := 0; i < size; i += 4096 {
		if st.data[i] != 0 {
			t.Fatalf("anonymous staging byte %d is %d, want 0", i, st.data[i])
		}
		st.data[i] = 0xAB
	}
	st.data[size-1] = 0xCD
	st.remove()
	if st.data != nil || st.anon != nil {
		t.Error("remove left the anonymous mapping referenced")
	}
}

// TestSpillSinkBuildsBlocksInScratch: a spilled stage's block is built in
// the worker's scratch (allocated once, at the largest block), laid out as
// the stage's records, its runs' slots left relative to the block.
func TestSpillSinkBuildsBlocksInScratch(t *testing.T) {
	layout := &feature.Records{Rec: 16, Off: []int{0, 8}, Size: []int{8, 8}}
	s := &spillSink{s: &spiller{layout: layout}}
	blk := []feature.RowRun{{Lo: 0, Hi: 3, Dst: 0}}
	got, scratch := s.Block(blk, 100, 3, nil)
	if s.InPlace() || len(scratch) != feature.BlockRows(16)*16 || len(got.Data) != 3*16 || &got.Data[0] != &scratch[0] {
		t.Fatalf("block: %d bytes in %d of scratch", len(got.Data), len(scratch))
	}
	if got.Rec != 16 || fmt.Sprint(got.Off, got.Size) != "[0 8] [8 8]" || blk[0].Dst != 0 {
		t.Fatalf("layout %d %v %v, slot %d", got.Rec, got.Off, got.Size, blk[0].Dst)
	}
	again, scratch2 := s.Block(blk, 103, 2, scratch)
	if &scratch2[0] != &scratch[0] || len(again.Data) != 2*16 {
		t.Fatal("scratch not reused for a smaller block")
	}
}
