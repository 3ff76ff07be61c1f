package source

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Each is returned wrapped (inside an *Error or a
// *ChangedError naming the file); test them with errors.Is.
var (
	// ErrSourceChanged is returned (as a *ChangedError) when a source file
	// no longer matches the plan's record of it: another size, footer
	// SHA-256 or row-group list, a file that is gone, or a file whose size
	// or modification time changed while it was read.
	ErrSourceChanged = errors.New("source changed since the plan was made")

	// ErrFooter is returned (inside an *Error naming the file) when a file
	// is not a Parquet file prep can read: too small, a missing "PAR1"
	// magic, a footer length outside the file, a footer that does not
	// decode or fails pqread's validation (schema, physical types, column
	// chunks inside the data region), or more rows than the file can hold.
	ErrFooter = errors.New("bad parquet footer")

	// ErrNoInput is returned when the source paths name no Parquet file.
	ErrNoInput = errors.New("no parquet files found")
)

// Error is a failure reading one source file. It wraps the cause: an I/O
// error (fs.ErrPermission, fs.ErrNotExist, ...) or an error wrapping
// ErrFooter and one of pqread's sentinels.
type Error struct {
	File string // path relative to the source root, as the plan records it
	Err  error
}

// Error implements error: "<file>: <cause>".
func (e *Error) Error() string { return e.File + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ChangedError reports that a source file differs from the plan's record
// of it. It matches ErrSourceChanged with errors.Is and unwraps to Err
// (nil unless a cause such as a short read is known).
//
// What names the property that differs: "size" (bytes), "footer sha256"
// (hex), "row groups" (rows per row group, e.g. "[16 16 8]"), "file" (Expected
// "present", Actual "missing") or "identity" (the Object.Identity when it
// was opened and now, for a file changed while it was read).
type ChangedError struct {
	File     string // path relative to the source root, as the plan records it
	What     string
	Expected string // the plan's value (or the identity when opened)
	Actual   string // the value found now
	// Root is the store root the file was looked up under (Store.String),
	// set when the file is missing: the data may have moved, and the
	// message then suggests --source-root.
	Root string
	Err  error
}

// Error implements error, for example
// "part-1.parquet: source changed since the plan was made: size 1200, plan has 1687".
func (e *ChangedError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	b.WriteString(ErrSourceChanged.Error())
	switch {
	case e.What == "file" && e.Actual == "missing":
		b.WriteString(": file is missing")
	case e.What == "identity":
		fmt.Fprintf(&b, ": changed while reading (%s, was %s)", e.Actual, e.Expected)
	case e.What != "":
		fmt.Fprintf(&b, ": %s %s, plan has %s", e.What, e.Actual, e.Expected)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Missing() && e.Root != "" {
		fmt.Fprintf(&b, " (source root %s; if the data moved, give its directory with --source-root)", e.Root)
	}
	return b.String()
}

// Is reports whether target is ErrSourceChanged.
func (e *ChangedError) Is(target error) bool { return target == ErrSourceChanged }

// Unwrap returns the cause, if any.
func (e *ChangedError) Unwrap() error { return e.Err }

// Missing reports whether the file is gone from the store (rather than
// present with other contents).
func (e *ChangedError) Missing() bool { return e.What == "file" && e.Actual == "missing" }
