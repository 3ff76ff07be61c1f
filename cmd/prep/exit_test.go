package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/prepml/prep/internal/dirlock"
	"github.com/prepml/prep/verify/verifytest"
)

// TestWrappedEINVALIsNotUsageError pins the fault where any error whose
// text contained "invalid argument" (EINVAL from a syscall, a package's
// ErrInvalid) exited 2 as if the user had mistyped a flag: only cobra's own
// unwrapped argument errors are matched by text.
func TestWrappedEINVALIsNotUsageError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("writing epoch-00000/rank-00000.shard: %w", syscall.EINVAL), exitFailed},
		{fmt.Errorf("invalid feature spec: %w", errors.New("invalid argument")), exitFailed},
		{errors.New("accepts 1 arg(s), received 0"), exitUsage},
		{errors.New(`required flag(s) "output" not set`), exitUsage},
		{usagef("--epoch must be >= 0"), exitUsage},
	} {
		if got := exitCode(tt.err, io.Discard, nil); got != tt.want {
			t.Errorf("exitCode(%q) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestLoadOutOfRangeOptionsAreUsageErrors: --prefetch beyond the limit
// (which used to exhaust memory) and --from-step past the shard exit 2 with
// a message naming the value.
func TestLoadOutOfRangeOptionsAreUsageErrors(t *testing.T) {
	f := verifytest.Build(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefetch", "100000000000"}, "prefetch 100000000000 exceeds 1024"},
		{[]string{"--from-step", "99"}, "start step 99 outside"},
	} {
		code, out, errs := runCLI(append([]string{"load", f.Dir, "--epoch", "0", "--rank", "0"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(errs, tt.want) {
			t.Errorf("load %v: exit %d, stderr %q, stdout %q; want exit 2 naming %q", tt.args, code, errs, out, tt.want)
		}
	}
}

// TestHeldLockExitsLocked pins the documented exit code 3: the lock error
// convert and gc return maps to exitLocked, even wrapped.
func TestHeldLockExitsLocked(t *testing.T) {
	err := fmt.Errorf("converting: %w", &dirlock.HeldError{Path: "/out/.prep.lock", Holder: dirlock.Owner{PID: 7, Host: "n1"}})
	if got := exitCode(err, io.Discard, nil); got != exitLocked || exitLocked != 3 {
		t.Fatalf("exitCode = %d, want exitLocked = 3", got)
	}
}
