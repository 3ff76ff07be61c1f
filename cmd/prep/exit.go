package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/prepml/prep/feature"
	"github.com/spf13/cobra"
)

// Exit codes of the prep command. Documented in README.md; never renumbered.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
	exitLocked = 3 // returned through dirlock.HeldError's ExitCode
	exitCrash  = 4 // a panic caught in run, or feature.ErrInternal: a bug in prep, never a usage error
)

// usageError marks an error caused by bad flags or arguments (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usage error (exit code 2).
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitCoder is implemented by errors that choose their own exit code, such as
// the output-directory lock being held (3) or a checker's findings (1).
type exitCoder interface{ ExitCode() int }

// silentError is returned when the command already reported its failure
// (for example a verify report) and only the exit code remains.
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }
func (e silentError) ExitCode() int { return e.code }

// exitCode maps an error returned by a command to the process exit code and
// reports it on stderr. This is the only place errors become exit codes.
func exitCode(err error, stderr io.Writer, log *slog.Logger) int {
	if err == nil {
		return exitOK
	}
	var se silentError
	if errors.As(err, &se) {
		return se.code
	}
	code := exitFailed
	var ue usageError
	var ec exitCoder
	switch {
	case errors.As(err, &ue) || isCobraUsage(err):
		code = exitUsage
	case errors.As(err, &ec):
		code = ec.ExitCode()
	case errors.Is(err, feature.ErrInternal):
		code = exitCrash
	}
	if log != nil {
		log.Error(err.Error(), "exit_code", code)
	} else {
		fmt.Fprintf(stderr, "prep: %v\n", err)
	}
	return code
}

// isCobraUsage recognises cobra's own argument, required-flag and command
// errors by their text. Cobra makes them without wrapping a cause, so only
// such errors are matched: an error that wraps a cause (an I/O error reading
// "invalid argument" for EINVAL, a package's ErrInvalid) is never taken for
// a usage error. Flag parse errors arrive as usageError (SetFlagErrorFunc).
func isCobraUsage(err error) bool {
	if errors.Unwrap(err) != nil {
		return false
	}
	s := err.Error()
	for _, p := range []string{"unknown flag", "unknown command", "unknown shorthand", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires at most", "required flag", "if any flags in the group"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// noArgs is cobra.NoArgs with a message saying how the command takes its
// inputs (hint, e.g. "give the plan with --plan PLAN and the output with -o
// DIR"), instead of cobra's "unknown command".
func noArgs(hint string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return usagef("%s takes no arguments (got %q); %s", cmd.Name(), args, hint)
	}
}

// oneArg is cobra.ExactArgs(1) with a message naming the argument (what,
// e.g. "the shard set directory (OUT)").
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			return nil
		}
		return usagef("%s takes one argument, %s, not %d", cmd.Name(), what, len(args))
	}
}
