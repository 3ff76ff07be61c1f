//go:build linux || darwin

package verify

import (
	"syscall"
	"testing"
)

// TestMaxOpenShards: the default is min(256, a quarter of the
// RLIMIT_NOFILE soft limit), never below Jobs; the test knob replaces
// the bound, still never below Jobs.
func TestMaxOpenShards(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
			t.Fatal(err)
		}
	}()
	for _, c := range []struct {
		soft uint64
		jobs int
		want int
	}{{400, 2, 100}, {403, 1, 100}, {64, 16, 16}, {64, 8, 16}, {1024, 4, 256}, {4096, 300, 300}} {
		if c.soft > uint64(old.Max) {
			continue
		}
		lim := syscall.Rlimit{Cur: c.soft, Max: old.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
		if got := maxOpenShards(c.jobs); got != c.want {
			t.Errorf("soft limit %d, jobs %d: %d, want %d", c.soft, c.jobs, got, c.want)
		}
	}
	defer func(n int) { openShardsCap = n }(openShardsCap)
	openShardsCap = 3
	if got := maxOpenShards(2); got != 3 {
		t.Errorf("cap 3, jobs 2: %d", got)
	}
	if got := maxOpenShards(5); got != 5 {
		t.Errorf("cap 3, jobs 5: %d", got)
	}
}
