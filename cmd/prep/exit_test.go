package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/feature"
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

// TestPositionalArgumentsNamed pins messages that left a newcomer guessing:
// `prep convert plan.json spec.yaml out` said `unknown command "plan.json"
// for "prep convert"`, and `prep verify` without its directory said only
// "accepts 1 arg(s), received 0". Each names what the command takes.
func TestPositionalArgumentsNamed(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"convert", "plan.json", "spec.yaml", "out"}, []string{"convert takes no arguments", `"plan.json"`, "--plan", "-o"}},
		{[]string{"plan", "data/"}, []string{"plan takes no arguments", `"data/"`, "--source"}},
		{[]string{"verify"}, []string{"verify takes one argument, the shard set directory (OUT), not 0"}},
		{[]string{"verify", "a", "b"}, []string{"verify takes one argument, the shard set directory (OUT), not 2"}},
		{[]string{"gc", "--keep-from-epoch", "1"}, []string{"gc takes one argument, the shard set directory (OUT)"}},
		{[]string{"load"}, []string{"load takes one argument, the shard set directory (OUT)"}},
		{[]string{"export"}, []string{"export takes one argument, the shard set directory (OUT)"}},
		{[]string{"inspect"}, []string{"inspect takes one argument, a shard, shard set directory, plan file or Parquet file (PATH)"}},
		{[]string{"plan", "show"}, []string{"show takes one argument, the plan file (plan.json)"}},
	} {
		code, _, errs := runCLI(c.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
	}
}

// TestPanicIsNotUsageError pins the fault where a crash exited 2, the
// documented code of a usage error: a panic in a command is caught by run,
// reported as an internal error with its stack, and exits exitCrash.
func TestPanicIsNotUsageError(t *testing.T) {
	old := subcommands
	defer func() { subcommands = old }()
	subcommands = append(append([]func(*globalOptions) *cobra.Command(nil), old...), func(*globalOptions) *cobra.Command {
		return &cobra.Command{Use: "crash-for-test", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["x"] = 1 // assignment to entry in nil map
			return nil
		}}
	})
	var stderr strings.Builder
	code := run([]string{"crash-for-test"}, io.Discard, &stderr)
	if code != exitCrash || exitCrash == exitUsage || exitCrash == exitFailed {
		t.Fatalf("exit %d, want %d", code, exitCrash)
	}
	if msg := stderr.String(); !strings.Contains(msg, "prep: internal error") || !strings.Contains(msg, "assignment to entry in nil map") || !strings.Contains(msg, "TestPanicIsNotUsageError") {
		t.Errorf("stderr does not report the panic and its stack:\n%s", msg)
	}
}

// TestInternalErrorExits4 pins the fault where a broken invariant of
// convert (an "internal:" error, such as a values arena read beyond its
// end) exited 1 like bad input: an error wrapping feature.ErrInternal, at
// any depth, exits exitCrash, the documented code of an internal error.
func TestInternalErrorExits4(t *testing.T) {
	old := subcommands
	defer func() { subcommands = old }()
	inner := &feature.Error{Tensor: "s", RowGroup: -1, Row: -1, Element: -1,
		Err: fmt.Errorf("%w: values arena read [0, 96) beyond its 64 bytes", feature.ErrInternal)}
	subcommands = append(append([]func(*globalOptions) *cobra.Command(nil), old...), func(*globalOptions) *cobra.Command {
		return &cobra.Command{Use: "internal-for-test", RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("epoch 0, rank 1: %w", inner)
		}}
	})
	var stderr strings.Builder
	if code := run([]string{"internal-for-test"}, io.Discard, &stderr); code != exitCrash {
		t.Fatalf("exit %d, want %d (stderr %q)", code, exitCrash, stderr.String())
	}
	if !strings.Contains(stderr.String(), "internal: values arena read") {
		t.Errorf("stderr does not say what broke: %q", stderr.String())
	}
}
