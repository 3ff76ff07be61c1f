package pqread

import (
	"fmt"
	"math"
	"os"
	"sync"

	"github.com/parquet-go/parquet-go/format"
)

// Open opens the Parquet file at path, reads and validates its footer, and
// closes the descriptor again (see File): OpenInput over the local file,
// named path in errors. A later read opens the file again, checks its size
// is the size at Open (else ErrChanged) and reads with ReadAt.
func Open(path string, lim Limits) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = corruptf("not a regular file")
	}
	if err != nil {
		return nil, &Error{File: path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	local := &localInput{path: path, size: st.Size(), fd: fd}
	f, err := OpenInput(path, local, lim)
	local.fd = nil // Open's descriptor closes here; reads open their own
	if err != nil {
		return nil, err
	}
	f.local = local
	return f, nil
}

// OpenInput reads and validates the footer of the Parquet file that in
// holds; name is what errors print (File.Path; prep passes the path
// relative to the source root). Every later read goes through in.ReadAt
// (see Input), so in must stay usable until the File is no longer read;
// File.Close does not close it. Checks, each failing with an *Error naming
// the file: size at least 12 bytes, "PAR1" at both ends (encrypted-footer
// files, "PARE", give ErrUnsupported), footer length inside the file and
// within lim.MaxFooterBytes, a footer that parses (every thrift list count
// is checked against the bytes left before anything is allocated, nesting
// at most 64 levels), a well-formed schema, row counts that are not
// negative, one column chunk per leaf column in each row group, and every
// column chunk's byte range inside the data region of the file.
func OpenInput(name string, in Input, lim Limits) (*File, error) {
	ft, err := ReadFooterAt(in, lim.withDefaults().MaxFooterBytes)
	if err != nil {
		return nil, fileError(name, err)
	}
	return OpenFooter(name, ft, in, lim)
}

// fileError returns err as an *Error naming file name (err itself when it
// already is one).
func fileError(name string, err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{File: name, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
}

// OpenFooter is OpenInput for a caller that has already read the footer ft
// of in (with ReadFooterAt, or from a suffix read of an object whose tail
// it checked the same way, "PAR1" at the end and the footer length inside
// the file): it makes every check OpenInput makes after reading, from the
// footer's decoding on, with no read of in. Errors are *Error values
// naming name.
func OpenFooter(name string, ft *Footer, in Input, lim Limits) (*File, error) {
	f := &File{path: name, in: in, lim: lim.withDefaults()}
	fail := func(err error) (*File, error) { return nil, fileError(name, err) }
	if ft.Size != in.Size() || ft.Offset < magicLen || ft.Offset+int64(len(ft.Meta))+trailerLen != ft.Size {
		return fail(corruptf("footer of %d bytes at offset %d does not end a file of %d bytes", len(ft.Meta), ft.Offset, in.Size()))
	}
	if f.lim.MaxFooterBytes > 0 && int64(len(ft.Meta)) > f.lim.MaxFooterBytes {
		return fail(limitf("footer of %d bytes exceeds the limit of %d", len(ft.Meta), f.lim.MaxFooterBytes))
	}
	f.size, f.dataEnd, f.footSum = ft.Size, ft.Offset, ft.SHA256()
	buf, err := checkThrift(ft.Meta)
	if err == nil {
		f.meta, err = decodeFooter(&f.dec, buf)
	}
	if err != nil {
		return fail(&Error{File: name, RowGroup: -1, Page: -1, Row: -1, Offset: f.dataEnd, Err: corruptf("decoding footer: %v", err)})
	}
	if err := f.validate(); err != nil {
		return fail(err)
	}
	return f, nil
}

// localInput is the Input of a local file opened by Open: it opens its
// descriptor on the first read, after checking the file still has the
// size it had at Open, and close releases it.
type localInput struct {
	path string
	size int64

	mu sync.Mutex
	fd *os.File
}

func (l *localInput) Size() int64 { return l.size }

func (l *localInput) ReadAt(p []byte, off int64) (int, error) {
	fd, err := l.handle()
	if err != nil {
		return 0, err
	}
	return fd.ReadAt(p, off)
}

// handle returns the shared descriptor, opening it on first use.
func (l *localInput) handle() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd != nil {
		return l.fd, nil
	}
	fd, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	st, err := fd.Stat()
	if err != nil {
		fd.Close()
		return nil, err
	}
	if st.Size() != l.size {
		fd.Close()
		return nil, fmt.Errorf("%w: size %d bytes, was %d at open", ErrChanged, st.Size(), l.size)
	}
	l.fd = fd
	return fd, nil
}

func (l *localInput) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd == nil {
		return nil
	}
	err := l.fd.Close()
	l.fd = nil
	return err
}

// decodeFooter decodes the footer, turning decoder panics into errors.
func decodeFooter(dec *format.FooterDecoder, buf []byte) (meta *format.FileMetaData, err error) {
	defer func() {
		if r := recover(); r != nil {
			meta, err = nil, fmt.Errorf("panic in footer decoder: %v", r)
		}
	}()
	meta, _, err = dec.Decode(buf)
	return meta, err
}

func (f *File) validate() error {
	leaves, nodes, err := buildSchema(f.meta.Schema)
	if err != nil {
		return &Error{File: f.path, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	f.leaves, f.nodes = leaves, nodes
	for _, l := range leaves {
		if l.unsupported != nil {
			l.info.Unsupported = l.unsupported.Error()
		}
		f.cols = append(f.cols, l.info)
	}
	for i := range f.meta.RowGroups {
		rg := &f.meta.RowGroups[i]
		e := func(col string, err error) error {
			return &Error{File: f.path, Column: col, RowGroup: i, Page: -1, Row: -1, Offset: -1, Err: err}
		}
		if rg.NumRows < 0 {
			return e("", corruptf("negative row count %d", rg.NumRows))
		}
		if f.total > math.MaxInt64-rg.NumRows {
			return e("", corruptf("row count overflows"))
		}
		f.total += rg.NumRows
		f.rows = append(f.rows, rg.NumRows)
		if len(rg.Columns) != len(leaves) {
			return e("", corruptf("row group has %d column chunks, schema has %d leaf columns", len(rg.Columns), len(leaves)))
		}
		for j := range rg.Columns {
			cc := &rg.Columns[j]
			name := leaves[j].info.Name
			if cc.FilePath != "" {
				continue // reported by ReadColumn as unsupported
			}
			md := &cc.MetaData
			if md.Type != leaves[j].typ {
				return e(name, corruptf("column chunk type %s differs from schema type %s", physicalName(md.Type), leaves[j].info.Physical))
			}
			if md.NumValues == 0 {
				continue // never read
			}
			start, n := chunkRange(md)
			if start < magicLen || n < 0 || start > f.dataEnd || n > f.dataEnd-start {
				return e(name, corruptf("column chunk bytes [%d, %d+%d) outside the data region [4, %d)", start, start, n, f.dataEnd))
			}
		}
	}
	return nil
}

// chunkRange returns the first byte and the length of a column chunk: it
// starts at the dictionary page when there is one (some writers leave
// dictionary_page_offset 0 or point it past the data page; both mean the
// chunk starts at data_page_offset; a column chunk without values may have
// data_page_offset 0).
func chunkRange(md *format.ColumnMetaData) (start, n int64) {
	start = md.DataPageOffset
	if d := md.DictionaryPageOffset; d > 0 && (d < start || start <= 0) {
		start = d
	}
	return start, md.TotalCompressedSize
}
