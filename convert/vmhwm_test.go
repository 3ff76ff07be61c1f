package convert

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
)

// TestPeakRSSIsTheProcessOwn pins the fault where convert reported its
// parent's peak RSS: ru_maxrss survives exec on Linux, so a prep started by
// a process that had touched 200 MiB said "peak RSS 227.7 MiB". The child
// here is started by a parent holding 256 MiB and must report its own,
// far smaller, peak.
func TestPeakRSSIsTheProcessOwn(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	if os.Getenv("PREP_PEAKRSS_CHILD") == "1" {
		os.Stdout.WriteString(strconv.FormatInt(peakRSS(), 10))
		os.Exit(0)
	}
	if _, ok := vmHWM(); !ok {
		t.Fatal("no VmHWM in /proc/self/status")
	}
	// Go's os/exec forks and execs; hold and touch 256 MiB first.
	big := make([]byte, 256<<20)
	for i := range big {
		if i%4096 == 0 {
			big[i] = 1
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeakRSSIsTheProcessOwn$")
	cmd.Env = append(os.Environ(), "PREP_PEAKRSS_CHILD=1")
	out, err := cmd.Output()
	runtime.KeepAlive(big)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(string(out[:indexDigits(out)]), 10, 64)
	if err != nil {
		t.Fatalf("child printed %q", out)
	}
	if n <= 0 || n >= 200<<20 {
		t.Errorf("child's peak RSS %d bytes, want its own (well under the parent's 256 MiB)", n)
	}
}

// indexDigits returns the length of the leading run of ASCII digits of b.
func indexDigits(b []byte) int {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
