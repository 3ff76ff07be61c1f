package pqread

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// Layout constants of a Parquet file (parquet-format README, "File Format"):
//
//	"PAR1" | column chunks ... | footer (thrift FileMetaData) | footer length (4 bytes LE) | "PAR1"
const (
	magicLen   = 4
	trailerLen = 8 // footer length + magic
	minFileLen = magicLen + trailerLen
)

var (
	magic          = []byte("PAR1")
	magicEncrypted = []byte("PARE")
)

// Footer is the tail of a Parquet file as ReadFooter finds it:
//
//	"PAR1" | column chunks ... | Meta (thrift FileMetaData) | len(Meta) (u32 LE) | "PAR1"
//
// (parquet-format README, "File Format").
type Footer struct {
	Size    int64   // file length in bytes
	Offset  int64   // file offset of Meta, where the data region ends
	Meta    []byte  // the FileMetaData, thrift compact protocol, not yet checked
	Trailer [8]byte // len(Meta) little-endian and "PAR1"
}

// ReadFooter reads the footer of the open Parquet file f after checking the
// file's frame: a regular file of at least 12 bytes, "PAR1" at the end (an encrypted-footer
// "PARE" gives ErrUnsupported) and at the start, and a footer length inside
// the file and at most maxFooterBytes (ErrLimit; <= 0: no limit). Errors
// wrap ErrCorrupt, ErrUnsupported or ErrLimit, or are the I/O error; they do
// not name the file.
func ReadFooter(f *os.File, maxFooterBytes int64) (*Footer, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, corruptf("not a regular file")
	}
	return ReadFooterAt(sizedReaderAt{f, st.Size()}, maxFooterBytes)
}

// sizedReaderAt is an io.ReaderAt with a size known in advance: an Input.
type sizedReaderAt struct {
	io.ReaderAt
	size int64
}

func (s sizedReaderAt) Size() int64 { return s.size }

// ReadFooterAt is ReadFooter for any Input: the file is in.Size() bytes
// long, and every byte is read with in.ReadAt (three reads: the header
// magic, the trailer, the footer). A read that comes back short (the file
// shrank) fails with an error wrapping ErrChanged. Errors do not name the
// file.
func ReadFooterAt(in Input, maxFooterBytes int64) (*Footer, error) {
	ft := &Footer{Size: in.Size()}
	if ft.Size < minFileLen {
		return nil, corruptf("file too small: %d bytes, a Parquet file has at least %d", ft.Size, minFileLen)
	}
	var head [magicLen]byte
	if err := readFull(in, head[:], 0); err != nil {
		return nil, fmt.Errorf("reading header magic: %w", err)
	}
	if err := readFull(in, ft.Trailer[:], ft.Size-trailerLen); err != nil {
		return nil, fmt.Errorf("reading footer length: %w", err)
	}
	tail := ft.Trailer[4:]
	switch {
	case bytes.Equal(tail, magicEncrypted):
		return nil, unsupportedf("encrypted footer (PARE magic)")
	case !bytes.Equal(tail, magic):
		return nil, corruptf("missing PAR1 magic at end of file (ends in %q; truncated?)", tail)
	case !bytes.Equal(head[:], magic):
		return nil, corruptf("missing PAR1 magic at start of file (starts with %q)", head[:])
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
	if err := readFull(in, ft.Meta, ft.Offset); err != nil {
		return nil, fmt.Errorf("reading footer: %w", err)
	}
	return ft, nil
}

// readFull reads len(p) bytes at off from in. A short read (io.EOF or
// io.ErrUnexpectedEOF: the file ends before in.Size() says) is reported as
// ErrChanged, other errors as they are.
func readFull(in Input, p []byte, off int64) error {
	n, err := in.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %d bytes at offset %d, only %d there (the file is shorter than its %d bytes at open)", ErrChanged, len(p), off, n, in.Size())
	}
	return err
}

// SHA256 returns the lower-case hex SHA-256 of Meta followed by Trailer:
// the last len(Meta)+8 bytes of the file (plan.SourceFile.FooterSHA256).
func (ft *Footer) SHA256() string {
	h := sha256.New()
	h.Write(ft.Meta)
	h.Write(ft.Trailer[:])
	return hex.EncodeToString(h.Sum(nil))
}

// RowGroupRows returns num_rows (field 3) of each RowGroup in row_groups
// (field 4) of Meta, checking that none is negative and that they add up to
// the file's num_rows (field 3), without decoding anything else: every
// other field is skipped, and no allocation is sized from a count before the
// count is checked against the bytes left. Errors wrap ErrCorrupt.
func (ft *Footer) RowGroupRows() ([]int64, error) {
	w := thriftWalker{b: ft.Meta}
	total := int64(-1)
	var rgs []int64
	for last := 0; ; {
		id, typ, more := w.fieldHeader(&last)
		if !more {
			break
		}
		switch {
		case id == 3 && typ == tI64:
			total = w.zigzag()
		case id == 4 && typ == tList:
			et, count := w.listHeader()
			if w.err == nil && et != tStruct {
				return nil, corruptf("row_groups is a list of thrift type %d, not struct", et)
			}
			rgs = make([]int64, 0, count)
			for i := 0; i < count && w.err == nil; i++ {
				rows := int64(-1)
				for l := 0; ; {
					fid, ft, more := w.fieldHeader(&l)
					if !more {
						break
					}
					if fid == 3 && ft == tI64 {
						rows = w.zigzag()
					} else {
						w.value(ft, false)
					}
				}
				if w.err == nil && rows < 0 {
					return nil, corruptf("row group %d: num_rows missing or negative (%d)", i, rows)
				}
				rgs = append(rgs, rows)
			}
		default:
			w.value(typ, false)
		}
	}
	if w.err != nil {
		return nil, corruptf("decoding footer: %v", w.err)
	}
	if rgs == nil || total < 0 {
		return nil, corruptf("num_rows or row_groups missing")
	}
	var sum int64
	for _, r := range rgs {
		if sum += r; sum < 0 {
			return nil, corruptf("row counts overflow")
		}
	}
	if sum != total {
		return nil, corruptf("row groups hold %d rows, footer num_rows says %d", sum, total)
	}
	return rgs, nil
}
