//go:build cgo && linux

package gpuload

import (
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/prepml/prep/gpuload/internal/testshards"
)

func TestDirectRingAndGroupSizes(t *testing.T) {
	for _, c := range []struct {
		n            int
		block        uint64
		slots, group int
	}{
		{4, 4 << 20, 8, 4},      // 4 MiB blocks: 32 MiB of ring, 16 MiB per read
		{8, 4 << 20, 8, 4},      // Prefetch 8 asks for no more
		{16, 4 << 20, 16, 4},    // a deeper ring keeps 16 MiB reads
		{4, 1753088, 20, 9},     // the e2e study's 1.7 MB blocks: 20 slots, 9 per read (15.8 MB)
		{4, 4096, 64, 32},       // tiny blocks: at most 64 slots, half of them per read
		{3, 64 << 20, 3, 1},     // blocks over 16 MiB: one per read
		{100, 1 << 20, 100, 16}, // a deep prefetch keeps its slots
		{3, 32<<20 + 1, 3, 1},   // a block just over 32 MiB
		{1, 12 << 20, 3, 1},     // 3 slots of 12 MiB, one per read
		{0, 1 << 30, 1, 1},      // never fewer than one
	} {
		if got := directSlots(c.n, c.block); got != c.slots {
			t.Errorf("directSlots(%d, %d) = %d, want %d", c.n, c.block, got, c.slots)
		}
		if got := directGroup(c.slots, c.block); got != c.group {
			t.Errorf("directGroup(%d, %d) = %d, want %d", c.slots, c.block, got, c.group)
		}
	}
}

// failsFrom is an O_DIRECT file whose reads at or past offset from fail
// with EIO; it has no descriptor, so groups are read buffer by buffer.
type failsFrom struct {
	f    *os.File
	from int64
}

func (r failsFrom) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > r.from {
		return 0, syscall.EIO
	}
	return r.f.ReadAt(p, off)
}
func (r failsFrom) Close() error { return r.f.Close() }

// TestDirectGroupErrorNamesItsBlock: a vectored read that fails is read
// again block by block, so the steps before the bad block arrive intact and
// the error is located at the bad block, with the slots of the group given
// back.
func TestDirectGroupErrorNamesItsBlock(t *testing.T) {
	needCUDA(t)
	cfg := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 4, Steps: 12}
	dir := writeSet(t, cfg)
	l0 := openLoader(t, dir, 0, 0, Options{})
	info, err := l0.sh.Batch(7)
	l0.Close()
	if err != nil {
		t.Fatal(err)
	}
	withOpenDirect(t, func(_ *os.File, p string) (blockFile, uint32, uint32, error) {
		f, err := os.Open(p)
		return failsFrom{f, int64(info.Offset)}, 512, 512, err
	})
	t.Setenv("FAKECUDA_DELAY_US", "300")
	for _, pf := range []int{1, 4, 8} {
		l := openLoader(t, dir, 0, 0, Options{Backend: BackendCUDA, CUDAPath: CUDAPathDirect, Prefetch: pf})
		for k := range 7 {
			b := mustNext(t, l)
			checkBatch(t, l, cfg, 0, 0, k, b)
			b.Release()
		}
		_, err := l.Next()
		var le *Error
		if !errors.Is(err, syscall.EIO) || !errors.As(err, &le) || le.Step != 7 || le.Offset != int64(info.Offset) {
			t.Fatalf("prefetch %d: Next at step 7 = %v, want EIO located at step 7", pf, err)
		}
		assertRingIntact(t, l, 0)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		assertNoLeaks(t)
	}
}
