package sysmem

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestMakeHuge(t *testing.T) {
	// Small: a plain make.
	s := MakeHuge[uint32](3, 10)
	if len(s) != 3 || cap(s) != 10 {
		t.Fatalf("len %d cap %d, want 3 10", len(s), cap(s))
	}
	// Large: the length and capacity asked for, zeroed, writable to the
	// end of its capacity.
	const n, c = 1 << 20, 3 << 20 // 12 MiB of uint32
	b := MakeHuge[uint32](n, c)
	if len(b) != n || cap(b) != c {
		t.Fatalf("len %d cap %d, want %d %d", len(b), cap(b), n, c)
	}
	b = b[:c]
	for i, v := range b {
		if v != 0 {
			t.Fatalf("b[%d] = %d, want 0", i, v)
		}
	}
	for i := range b {
		b[i] = uint32(i)
	}
	for i, v := range b {
		if v != uint32(i) {
			t.Fatalf("b[%d] = %d, want %d", i, v, i)
		}
	}
	if !AnonSupported {
		return
	}
	// The first huge page boundary inside it.
	addr := (uintptr(unsafe.Pointer(&b[0])) + HugePage - 1) &^ (HugePage - 1)
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("no transparent huge pages in this kernel")
	}
	// The mapping holding its whole huge pages carries the huge page
	// advice ("hg").
	flags, err := vmFlags(addr)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("VmFlags of the mapping at %#x: %q, want hg among them", addr, flags)
	}
}

// vmFlags returns the VmFlags line of /proc/self/smaps for the mapping
// holding addr.
func vmFlags(addr uintptr) (string, error) {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if _, err := fmt.Sscanf(line, "%x-%x ", &lo, &hi); err == nil && strings.Contains(strings.Fields(line)[0], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:")), nil
		}
	}
	return "", fmt.Errorf("no mapping holds %#x", addr)
}
