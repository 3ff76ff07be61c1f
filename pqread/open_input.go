package pqread

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
)

// OpenInput is Open over in instead of a local path: the footer is read
// through in.ReadAt (the first 4 bytes, then the last 8, then the
// footer), validated exactly as Open validates it, and every column chunk
// is read later through in.ReadAt too, one ReadAt per chunk into memory
// pqread owns. name is what errors call the file. Close does not close in.
func OpenInput(name string, in Input, lim Limits) (*File, error) {
	f := &File{path: name, lim: lim.withDefaults(), in: in}
	fail := func(err error) (*File, error) {
		if e, ok := err.(*Error); ok {
			return nil, e
		}
		return nil, &Error{File: name, RowGroup: -1, Page: -1, Row: -1, Offset: -1, Err: err}
	}
	ft, err := readFooterInput(in, f.lim.MaxFooterBytes)
	if err != nil {
		return fail(err)
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

// readFooterInput is ReadFooter over an Input of in.Size() bytes.
func readFooterInput(in Input, maxFooterBytes int64) (*Footer, error) {
	ft := &Footer{Size: in.Size()}
	if ft.Size < minFileLen {
		return nil, corruptf("file too small: %d bytes, a Parquet file has at least %d", ft.Size, minFileLen)
	}
	if _, err := in.ReadAt(ft.Trailer[:], ft.Size-trailerLen); err != nil {
		return nil, fmt.Errorf("reading footer length: %w", err)
	}
	tail := ft.Trailer[4:]
	switch {
	case bytes.Equal(tail, magicEncrypted):
		return nil, unsupportedf("encrypted footer (PARE magic)")
	case !bytes.Equal(tail, magic):
		return nil, corruptf("missing PAR1 magic at end of file (ends in %q; truncated?)", tail)
	}
	n := int64(binary.LittleEndian.Uint32(ft.Trailer[:4]))
	if n == 0 || n > ft.Size-minFileLen {
		return nil, corruptf("footer length %d beyond file size %d", n, ft.Size)
	}
	if maxFooterBytes > 0 && n > maxFooterBytes {
		return nil, limitf("footer of %d bytes exceeds the limit of %d", n, maxFooterBytes)
	}
	ft.Offset = ft.Size - trailerLen - n
	ft.Meta = make([]byte, n)
	if _, err := in.ReadAt(ft.Meta, ft.Offset); err != nil && err != io.EOF {
		return nil, fmt.Errorf("reading footer: %w", err)
	}
	var head [magicLen]byte
	if _, err := in.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("reading header magic: %w", err)
	}
	if !bytes.Equal(head[:], magic) {
		return nil, corruptf("missing PAR1 magic at start of file (starts with %q)", head[:])
	}
	return ft, nil
}
