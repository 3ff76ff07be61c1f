package feature

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prepml/prep/internal/sysmem"
	"github.com/prepml/prep/source"
)

// Sentinel errors. Each is wrapped (usually inside an *Error carrying the
// location) so callers test them with errors.Is.
var (
	// ErrSpec is returned when a feature spec or --tensor flag is invalid:
	// unknown keys, a bad dtype or shape, an impossible policy.
	ErrSpec = errors.New("invalid feature spec")

	// ErrSchema is returned when a spec column is missing from a source file,
	// is ambiguous, or has a type the spec cannot convert (including types
	// that differ between files without a declared widening).
	ErrSchema = errors.New("schema mismatch")

	// ErrValue is returned when a source value breaks a declared policy: a
	// null without nulls.fill, a list of the wrong length, a value out of the
	// output dtype's range, a NaN under nan.policy error, a value longer than
	// allowed.
	ErrValue = errors.New("bad value")

	// ErrSourceChanged is source.ErrSourceChanged: a source file no longer
	// matches the plan's record of it (size, footer hash, row groups), is
	// gone, or changed while it was read. The error is a
	// *source.ChangedError naming the file and what differs.
	ErrSourceChanged = source.ErrSourceChanged

	// ErrNoSpace is returned when the output file system has less free space
	// than the run needs.
	ErrNoSpace = sysmem.ErrNoSpace

	// ErrInternal is returned when an invariant of the conversion itself is
	// broken (a staging record, spill window or values arena read outside
	// what was laid out for it): a bug in prep, never bad input. prep exits
	// with its internal-error code (4) on it.
	ErrInternal = errors.New("internal")
)

// Error is a conversion failure with its location in the source. Fields that
// are unknown are left at their zero value and -1 (RowGroup, Row, Element).
// It wraps the cause, which is or wraps one of the sentinel errors above or an
// error from pqread.
type Error struct {
	File     string // source file path relative to the plan's root ("" if not file-specific)
	Column   string // source column name (documented path syntax)
	Tensor   string // output tensor name ("" if not tensor-specific)
	RowGroup int    // row group index in File, -1 if unknown
	Row      int64  // row index within the row group, -1 if unknown
	Element  int64  // list element index within the row, -1 if not a list element
	Err      error
}

// Error returns the cause prefixed with the location: file, column,
// tensor, row group, row and element, those known.
func (e *Error) Error() string {
	var parts []string
	if e.Column != "" {
		parts = append(parts, fmt.Sprintf("column %q", e.Column))
	}
	if e.Tensor != "" && e.Column == "" {
		parts = append(parts, fmt.Sprintf("tensor %q", e.Tensor))
	}
	if e.RowGroup >= 0 {
		parts = append(parts, fmt.Sprintf("row group %d", e.RowGroup))
	}
	if e.Row >= 0 {
		parts = append(parts, fmt.Sprintf("row %d", e.Row))
	}
	if e.Element >= 0 {
		parts = append(parts, fmt.Sprintf("element %d", e.Element))
	}
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if len(parts) > 0 {
		b.WriteString(strings.Join(parts, ", "))
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ValueErrorf returns an error wrapping ErrValue with a formatted reason.
func ValueErrorf(format string, args ...any) error {
	return &reasonError{sentinel: ErrValue, msg: fmt.Sprintf(format, args...)}
}

// schemaErrorf returns an error wrapping ErrSchema with a formatted reason.
func schemaErrorf(format string, args ...any) error {
	return &reasonError{sentinel: ErrSchema, msg: fmt.Sprintf(format, args...)}
}

// specErrorf returns an error wrapping ErrSpec with a formatted reason.
func specErrorf(format string, args ...any) error {
	return &reasonError{sentinel: ErrSpec, msg: fmt.Sprintf(format, args...)}
}

// reasonError is a specific reason that matches a sentinel with errors.Is but
// prints only the reason (the location is printed by *Error).
type reasonError struct {
	sentinel error
	msg      string
}

func (e *reasonError) Error() string        { return e.msg }
func (e *reasonError) Is(target error) bool { return target == e.sentinel }
