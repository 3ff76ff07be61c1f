package shardfmt

import (
	"fmt"
	"io"
	"os"
)

// Open opens a shard file and validates it (see FORMAT.md, "Validation").
// The file length is checked against the header before the file is mapped,
// so a truncated shard fails with ErrSize, never SIGBUS. Where mmap is not
// available the Reader falls back to pread. A path that is not a regular
// file (a directory, a named pipe, a device) is refused before it is opened,
// so a pipe cannot block the caller (ErrCorrupt). Errors are *FormatError
// wrapping a sentinel, or the OS error from opening the file.
func Open(path string) (*Reader, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, ferr(path, "file", -1, -1, ErrCorrupt, "not a regular file (%s)", fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening shard: %w", err)
	}
	return OpenFile(f, path, true)
}

// OpenFile validates the shard open in f as Open does and takes ownership
// of f: Close closes it, and so does OpenFile on error. name is used in
// errors and returned by Path. With mmap false the file is never mapped:
// blocks, ids and tables are read with pread, so a file cut short while it
// is read gives errors wrapping ErrSize and can never fault (SIGBUS), at the
// price of a copy per Block. A file that is not regular is refused
// (ErrCorrupt).
func OpenFile(f *os.File, name string, mmap bool) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening shard: %w", err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, ferr(name, "file", -1, -1, ErrCorrupt, "not a regular file (%s)", st.Mode().Type())
	}
	r := &Reader{path: name, f: f, ra: f, size: st.Size()}
	if err := r.open(mmap); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// OpenReaderAt opens a shard held by ra, size bytes long, and validates it as
// Open does. name is used in errors and returned by Path. Blocks are read
// with ReadAt (Block then returns a fresh copy). The caller keeps ra open
// while the Reader is in use; Close does not close it.
func OpenReaderAt(ra io.ReaderAt, size int64, name string) (*Reader, error) {
	r := &Reader{path: name, ra: ra, size: size}
	if err := r.open(false); err != nil {
		return nil, err
	}
	return r, nil
}
