package convert

import (
	"bytes"
	"os"
	"strconv"
)

// vmHWM returns this process's peak resident set size from the VmHWM line
// of /proc/self/status (Linux), false where there is none. Unlike
// getrusage's ru_maxrss, which Linux carries across exec from the parent
// (a prep started by a large Python trainer reported the trainer's peak),
// VmHWM starts afresh with the new program image.
func vmHWM() (int64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("VmHWM:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest) // "12345 kB"
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, false
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || n < 0 {
			return 0, false
		}
		return n * 1024, true
	}
	return 0, false
}
