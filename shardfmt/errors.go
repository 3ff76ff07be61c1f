package shardfmt

import (
	"errors"
	"fmt"

	"github.com/prepml/prep/internal/atomicfile"
)

// Sentinel errors. Every error returned by Open, OpenReaderAt and the Reader
// methods that concerns file contents is a *FormatError wrapping one of them,
// so callers test with errors.Is.
var (
	// ErrSize: the file is shorter than the fixed header and footer, or its
	// length differs from the file length recorded in the header (truncated
	// or extended). Reported before anything is mapped.
	ErrSize = errors.New("wrong file size")
	// ErrMagic: the first 8 bytes are not the shard magic, or the footer
	// does not start with the footer magic.
	ErrMagic = errors.New("bad magic")
	// ErrVersion: the major version is not 1 (this package reads major 1,
	// any minor).
	ErrVersion = errors.New("unsupported version")
	// ErrEndian: the byte-order marker does not read 0x01020304 as
	// little-endian (the file was written big-endian).
	ErrEndian = errors.New("not little-endian")
	// ErrChecksum: a stored CRC-32C does not match the bytes it covers
	// (header, footer, a table, a batch block or a batch's sample ids).
	ErrChecksum = errors.New("checksum mismatch")
	// ErrCorrupt: a structural field is invalid: an offset or size out of
	// range or not where the layout puts it, an arithmetic overflow, an
	// unknown dtype, a bad name, a count above the batch size, nonzero
	// padding, and so on.
	ErrCorrupt = errors.New("corrupt shard")
	// ErrRange: a batch index outside [0, NumBatches).
	ErrRange = errors.New("batch index out of range")
	// ErrInvalid: a caller passed invalid arguments to the writer or a
	// helper (bad options, wrong block length, too many batches).
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the Reader or Writer was already closed, committed or
	// aborted.
	ErrClosed = errors.New("closed")
	// ErrNotDurable is wrapped by Writer.Commit and WriteManifest when the
	// file was renamed to its final name but the directory fsync failed:
	// the new file is in place but may not survive a crash, so a caller that
	// undoes its writes on error must undo this one too.
	ErrNotDurable = atomicfile.ErrNotDurable
	// ErrProvenance: the shard was made by a different plan, feature spec,
	// epoch or rank than the caller expects (see CheckProvenance).
	ErrProvenance = errors.New("provenance mismatch")
)

// FormatError locates a problem in a shard file. It wraps one of the
// sentinel errors (through Err) with detail.
type FormatError struct {
	Path    string // file path or the name given to OpenReaderAt
	Section string // "header", "footer", "tensor table", "metadata", "batch table", "sample ids", "block"
	Offset  int64  // absolute file offset of the offending field or region; -1 if unknown
	Batch   int    // batch index, or -1 when the error is not about one batch
	Err     error  // wraps a sentinel
}

// Error returns "path: section [batch k] at offset N: cause".
func (e *FormatError) Error() string {
	s := e.Path + ": " + e.Section
	if e.Batch >= 0 {
		s += fmt.Sprintf(" of batch %d", e.Batch)
	}
	if e.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", e.Offset)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the wrapped cause.
func (e *FormatError) Unwrap() error { return e.Err }

func ferr(path, section string, off int64, batch int, sentinel error, format string, args ...any) *FormatError {
	var err error
	if format == "" {
		err = sentinel
	} else {
		err = fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
	}
	return &FormatError{Path: path, Section: section, Offset: off, Batch: batch, Err: err}
}
