// Package npy writes and reads NumPy .npy files, format version 1.0.
//
// The format (numpy/lib/format.py, "NPY format version 1.0"):
//
//	offset  size  field
//	0       6     magic "\x93NUMPY"
//	6       1     major version, 1
//	7       1     minor version, 0
//	8       2     HEADER_LEN, uint16 little-endian
//	10      N     header: an ASCII Python dict literal
//	              {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//	              padded with spaces and ended by '\n' so that 10+N is a
//	              multiple of 64
//	10+N    ...   the array data, C order, in the byte order named by descr
//
// Only C-order arrays of fixed-size numeric dtypes are supported: that is
// what prep's tensors are.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/prepml/prep/shardfmt"
)

// Magic is the 6-byte prefix of every .npy file.
const Magic = "\x93NUMPY"

// headerAlign is the alignment of the data start (header included), in
// bytes, required by format 1.0 since NumPy 1.13.
const headerAlign = 64

// maxHeaderLen is the largest header a version 1.0 file can carry (u16).
const maxHeaderLen = 65535

// ErrFormat is returned (wrapped) by ReadHeader when the bytes are not a
// version 1.0 .npy header this package understands.
var ErrFormat = errors.New("npy: invalid header")

// Descr returns the NumPy dtype descr string for a shard dtype:
//
//	BOOL '|b1'  U8 '|u1'  I8 '|i1'  U16 '<u2'  I16 '<i2'  U32 '<u4'  I32 '<i4'
//	U64 '<u8'   I64 '<i8' F16 '<f2' F32 '<f4'  F64 '<f8'
//	BF16 '<u2' (the raw bfloat16 bits; NumPy has no bfloat16)
//	F8_E4M3, F8_E5M2 '|u1' (the raw FP8 bits)
//
// Shard data is little-endian, so the bytes are written unchanged. It
// returns an error for an invalid dtype code.
func Descr(d shardfmt.DType) (string, error) {
	switch d {
	case shardfmt.BOOL:
		return "|b1", nil
	case shardfmt.U8, shardfmt.F8_E4M3, shardfmt.F8_E5M2:
		return "|u1", nil
	case shardfmt.I8:
		return "|i1", nil
	case shardfmt.U16, shardfmt.BF16:
		return "<u2", nil
	case shardfmt.I16:
		return "<i2", nil
	case shardfmt.U32:
		return "<u4", nil
	case shardfmt.I32:
		return "<i4", nil
	case shardfmt.U64:
		return "<u8", nil
	case shardfmt.I64:
		return "<i8", nil
	case shardfmt.F16:
		return "<f2", nil
	case shardfmt.F32:
		return "<f4", nil
	case shardfmt.F64:
		return "<f8", nil
	}
	return "", fmt.Errorf("npy: no descr for dtype %v", d)
}

// Header is the parsed header of a .npy file.
type Header struct {
	Descr        string // NumPy dtype descr, e.g. "<f4"
	FortranOrder bool   // always false for files written by this package
	Shape        []int  // array shape; empty for a 0-d array
	DataOffset   int    // byte offset of the data from the file start
}

// itemSize returns the element size in bytes encoded in a descr such as
// "<f4" or "|u1", or 0 when descr is not of that form.
func itemSize(descr string) int {
	if len(descr) < 3 || strings.IndexByte("<>|=", descr[0]) < 0 || strings.IndexByte("biuf", descr[1]) < 0 {
		return 0
	}
	n, err := strconv.Atoi(descr[2:])
	if err != nil || n <= 0 || n > 16 {
		return 0
	}
	return n
}

// encodeHeader returns the magic, version, length and padded header dict.
func encodeHeader(descr string, shape []int) ([]byte, error) {
	if itemSize(descr) == 0 {
		return nil, fmt.Errorf("npy: unsupported descr %q", descr)
	}
	var dims strings.Builder
	dims.WriteByte('(')
	for i, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("npy: negative dimension %d in shape %v", d, shape)
		}
		if i > 0 {
			dims.WriteString(", ")
		}
		dims.WriteString(strconv.Itoa(d))
	}
	if len(shape) == 1 {
		dims.WriteByte(',')
	}
	dims.WriteByte(')')
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, dims.String())
	// Total = 10 (prefix) + len(dict) + padding + 1 ('\n'), a multiple of 64.
	total := 10 + len(dict) + 1
	pad := (headerAlign - total%headerAlign) % headerAlign
	hlen := len(dict) + pad + 1
	if hlen > maxHeaderLen {
		return nil, fmt.Errorf("npy: header of %d bytes too long for format 1.0", hlen)
	}
	b := make([]byte, 0, 10+hlen)
	b = append(b, Magic...)
	b = append(b, 1, 0)
	b = binary.LittleEndian.AppendUint16(b, uint16(hlen))
	b = append(b, dict...)
	b = append(b, bytes.Repeat([]byte{' '}, pad)...)
	b = append(b, '\n')
	return b, nil
}

// Write writes a complete .npy file (format 1.0, C order) to w: the header
// for descr and shape, then data unchanged. len(data) must equal the product
// of shape times the descr's item size, else Write returns an error before
// writing anything.
func Write(w io.Writer, descr string, shape []int, data []byte) error {
	hdr, err := encodeHeader(descr, shape)
	if err != nil {
		return err
	}
	want := itemSize(descr)
	for _, d := range shape {
		if d != 0 && want > (1<<62)/d {
			return fmt.Errorf("npy: shape %v overflows", shape)
		}
		want *= d
	}
	if want != len(data) {
		return fmt.Errorf("npy: shape %v of %s needs %d bytes, have %d", shape, descr, want, len(data))
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// WriteFile writes a .npy file at path (created or truncated, mode 0644).
// See Write for the arguments.
func WriteFile(path, descr string, shape []int, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = Write(bw, descr, shape, data)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ReadHeader reads and parses a version 1.0 header from r, leaving r at the
// start of the data. It accepts exactly the dict layout NumPy writes (keys in
// any order); errors wrap ErrFormat.
func ReadHeader(r io.Reader) (Header, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil {
		return Header{}, fmt.Errorf("%w: reading prefix: %v", ErrFormat, err)
	}
	if string(pre[:6]) != Magic {
		return Header{}, fmt.Errorf("%w: bad magic %q", ErrFormat, pre[:6])
	}
	if pre[6] != 1 || pre[7] != 0 {
		return Header{}, fmt.Errorf("%w: version %d.%d, want 1.0", ErrFormat, pre[6], pre[7])
	}
	hlen := int(binary.LittleEndian.Uint16(pre[8:]))
	buf := make([]byte, hlen)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Header{}, fmt.Errorf("%w: reading %d-byte dict: %v", ErrFormat, hlen, err)
	}
	h := Header{DataOffset: 10 + hlen}
	s := strings.TrimRight(string(buf), " \n")
	if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
		return Header{}, fmt.Errorf("%w: dict %q", ErrFormat, s)
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	seen := 0
	for s != "" {
		var key string
		var err error
		if key, s, err = quoted(s); err != nil {
			return Header{}, err
		}
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, ":") {
			return Header{}, fmt.Errorf("%w: missing ':' after %q", ErrFormat, key)
		}
		s = strings.TrimSpace(s[1:])
		switch key {
		case "descr":
			if h.Descr, s, err = quoted(s); err != nil {
				return Header{}, err
			}
		case "fortran_order":
			switch {
			case strings.HasPrefix(s, "False"):
				s = s[5:]
			case strings.HasPrefix(s, "True"):
				h.FortranOrder, s = true, s[4:]
			default:
				return Header{}, fmt.Errorf("%w: fortran_order %q", ErrFormat, s)
			}
		case "shape":
			end := strings.IndexByte(s, ')')
			if !strings.HasPrefix(s, "(") || end < 0 {
				return Header{}, fmt.Errorf("%w: shape %q", ErrFormat, s)
			}
			h.Shape = []int{}
			for _, f := range strings.Split(s[1:end], ",") {
				f = strings.TrimSpace(f)
				if f == "" {
					continue
				}
				n, err := strconv.Atoi(f)
				if err != nil || n < 0 {
					return Header{}, fmt.Errorf("%w: shape dimension %q", ErrFormat, f)
				}
				h.Shape = append(h.Shape, n)
			}
			s = s[end+1:]
		default:
			return Header{}, fmt.Errorf("%w: unknown key %q", ErrFormat, key)
		}
		seen++
		s = strings.TrimSpace(s)
		s = strings.TrimPrefix(s, ",")
		s = strings.TrimSpace(s)
	}
	if seen != 3 || h.Descr == "" || h.Shape == nil {
		return Header{}, fmt.Errorf("%w: want keys descr, fortran_order and shape", ErrFormat)
	}
	return h, nil
}

// quoted parses a single-quoted Python string at the start of s.
func quoted(s string) (val, rest string, err error) {
	if !strings.HasPrefix(s, "'") {
		return "", s, fmt.Errorf("%w: expected quoted string at %q", ErrFormat, s)
	}
	end := strings.IndexByte(s[1:], '\'')
	if end < 0 {
		return "", s, fmt.Errorf("%w: unterminated string %q", ErrFormat, s)
	}
	return s[1 : 1+end], s[2+end:], nil
}
