package plan

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every error returned by this package wraps one of them
// (possibly inside a *Error), so callers can test with errors.Is.
var (
	// ErrConfig is returned by New and Load when a plan input is invalid:
	// a global batch not divisible by the world size, an unknown shuffle mode
	// or remainder policy, a non-positive count, a window given for a mode
	// that has none.
	ErrConfig = errors.New("invalid plan configuration")

	// ErrRange is returned when an epoch, rank, step or sample id lies
	// outside the plan ([0, Epochs), [0, WorldSize), [0, Steps), [0, N)).
	// (WorkerSteps returns nil for a worker outside [0, Workers).)
	ErrRange = errors.New("out of range")

	// ErrFormat is returned by Load when a plan file is not valid
	// prep-plan/v1 (or, for a packed mixture, prep-plan/v2) JSON, names
	// another format or algorithm version, or its recorded fingerprint or
	// derived counts disagree with its inputs.
	ErrFormat = errors.New("bad plan file")

	// ErrMismatch is returned by Resume when a cursor was made for a
	// different order (its fingerprint differs). A cursor at or past the
	// end of the plan is not an error: Resume reports it as done.
	ErrMismatch = errors.New("cursor does not match plan")
)

// Error carries where a plan problem was found and wraps its cause (one of
// the sentinels above, or an I/O error).
type Error struct {
	Path  string // plan file, when the problem came from one
	Field string // plan input or JSON field concerned, e.g. "world_size"
	Err   error  // cause
}

// Error implements error.
func (e *Error) Error() string {
	var s string
	if e.Path != "" {
		s = e.Path + ": "
	}
	if e.Field != "" {
		s += e.Field + ": "
	}
	return s + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// configErrorf returns an *Error for field wrapping ErrConfig.
func configErrorf(field, format string, args ...any) error {
	return &Error{Field: field, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrConfig)}
}

// rangeErrorf returns an error wrapping ErrRange.
func rangeErrorf(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrRange)
}
