package pqread

// Input supplies the bytes of one Parquet file by byte range: a local file,
// an object in an object store, or a buffer in a test. pqread reads every
// byte it decodes through ReadAt into memory it owns, so a file that a
// writer truncates or replaces while it is read yields an error, never a
// memory fault.
type Input interface {
	// ReadAt reads len(p) bytes starting at byte offset off, with
	// io.ReaderAt's contract: n < len(p) only together with a non-nil
	// error (io.EOF or io.ErrUnexpectedEOF past the end). It must be safe
	// for concurrent use.
	ReadAt(p []byte, off int64) (n int, err error)
	// Size returns the file's size in bytes as it was when the Input was
	// opened (listed, for an object store).
	Size() int64
}
