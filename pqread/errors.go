package pqread

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. ReadColumn, Open and Lookup wrap them (inside an *Error
// carrying the location where one is known); test them with errors.Is.
var (
	// ErrCorrupt is returned when the file's bytes contradict the Parquet
	// format or themselves: bad magic, a footer or page header that does not
	// parse, offsets or sizes outside the file or column chunk, a page
	// checksum mismatch, levels above their maximum, too few or too many
	// values or rows, a dictionary index out of range, or a panic recovered
	// inside a decoder (a Go panic; memory faults are never recovered).
	ErrCorrupt = errors.New("corrupt parquet data")

	// ErrUnsupported is returned for valid Parquet that pqread does not
	// decode: nesting deeper than one repetition level, maps, lists of
	// structs, encrypted files, column chunks in other files, the LZO codec,
	// or an encoding not defined for the column's physical type. The message
	// names the column and the feature (for example the encoding).
	ErrUnsupported = errors.New("unsupported parquet feature")

	// ErrLimit is returned when a page, column chunk, footer or BYTE_ARRAY
	// value is larger than the Limits allow. It is checked before the
	// allocation it guards.
	ErrLimit = errors.New("size limit exceeded")

	// ErrChanged is returned when a read of the file comes back short or
	// the file's size differs from its size at open: the file was
	// truncated or replaced while it was read. Bytes are always read into
	// memory pqread owns (Input.ReadAt), never decoded from a mapping, so
	// a file that shrinks gives this error, never a memory fault.
	ErrChanged = errors.New("file changed while reading")

	// ErrNotFound is returned by Lookup when no leaf column has the name.
	ErrNotFound = errors.New("column not found")

	// ErrAmbiguous is returned by Lookup when a name matches more than one
	// leaf column (for example a top-level column named "a.b" next to field b
	// of a struct a); the message lists the unambiguous spellings.
	ErrAmbiguous = errors.New("ambiguous column name")
)

// Error is a failure at a known place in a Parquet file. Unknown fields hold
// "" or -1. It wraps its cause, which is or wraps one of the sentinels above
// (or an *os.PathError for I/O failures).
//
// The message reads, with only the known parts present:
//
//	path/to/f.parquet: column "x", row group 1, page 3, row 17, offset 358: cause
//
// Row counts from the start of the row group (not the file); page counts the
// pages of the column chunk from 0, a dictionary page included; offset is a
// byte offset in the file.
type Error struct {
	File     string // the name given to OpenInput (the path given to Open)
	Column   string // ColumnInfo.Name ("" if not column-specific)
	RowGroup int    // row group index, -1 if unknown
	Page     int    // page index within the column chunk, -1 if unknown
	Row      int64  // row index within the row group, -1 if unknown
	Offset   int64  // byte offset in the file, -1 if unknown
	Err      error
}

// Error implements error.
func (e *Error) Error() string {
	var loc []string
	if e.Column != "" {
		loc = append(loc, fmt.Sprintf("column %q", e.Column))
	}
	if e.RowGroup >= 0 {
		loc = append(loc, fmt.Sprintf("row group %d", e.RowGroup))
	}
	if e.Page >= 0 {
		loc = append(loc, fmt.Sprintf("page %d", e.Page))
	}
	if e.Row >= 0 {
		loc = append(loc, fmt.Sprintf("row %d", e.Row))
	}
	if e.Offset >= 0 {
		loc = append(loc, fmt.Sprintf("offset %d", e.Offset))
	}
	var b strings.Builder
	b.WriteString(e.File)
	if len(loc) > 0 {
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(strings.Join(loc, ", "))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(errString(e.Err))
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// unsupportedf returns an error wrapping ErrUnsupported.
func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupported, fmt.Sprintf(format, args...))
}

// limitf returns an error wrapping ErrLimit.
func limitf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLimit, fmt.Sprintf(format, args...))
}

// RowSlotsError is the cause (wrapping ErrLimit) of a list column's row
// holding more level entries than Limits.MaxRowSlots: Row is the row
// within its row group, Limit the bound it passed. It is found with
// errors.As inside the *Error that locates it.
type RowSlotsError struct {
	Row   int64
	Limit int64
}

// Error implements error: "size limit exceeded: row R holds more than L
// slots (level entries)".
func (e *RowSlotsError) Error() string {
	return fmt.Sprintf("%s: row %d holds more than %d slots (level entries)", ErrLimit, e.Row, e.Limit)
}

// Unwrap returns ErrLimit.
func (e *RowSlotsError) Unwrap() error { return ErrLimit }

// rowError is an error raised inside a decoder that knows the row (within the
// row group) it concerns; ReadColumn lifts the row into the *Error.
type rowError struct {
	row int64
	err error
}

func (e *rowError) Error() string { return e.err.Error() }
func (e *rowError) Unwrap() error { return e.err }
