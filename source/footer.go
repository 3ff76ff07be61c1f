package source

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// The most rows a span of Parquet bytes can hold (PLAN.md §9). Every row
// puts at least one value or level into every column, so a column chunk
// holds at least as many values as its row group has rows, and each value
// lies in a data page. A data page holds at most 2^31-1 values
// (num_values is an i32) and its thrift compact PageHeader takes at least
// minPageBytes bytes: one for each required field's header and value
// (type, uncompressed and compressed size), the data page header struct
// with num_values and three encodings, and the stops. A page holding 2^27
// values or more writes num_values as a 5-byte varint (zigzag(v) >= 2^28),
// so it takes at least minFullPageBytes. Pages of fewer values yield at
// most (2^27-1)/17 values per byte, less than a full page's
// (2^31-1)/21, so B bytes hold at most
//
//	floor(B/21) * (2^31-1) + (2^27-1 if B mod 21 >= 17)
//
// values (MaxRows). Compression cannot beat it: the bound counts page
// headers, which are never compressed.
const (
	minPageBytes     = 17
	minFullPageBytes = 21
	smallPageValues  = 1<<27 - 1
)

// MaxRows returns the most rows b bytes of Parquet pages can hold (see
// above): floor(b/21)*(2^31-1), plus 2^27-1 when b mod 21 >= 17,
// saturated at 2^63-1. It bounds a whole file (b its size) and each column
// chunk (b its compressed length).
func MaxRows(b int64) int64 {
	b = max(b, 0)
	full := b / minFullPageBytes
	if full > (math.MaxInt64-smallPageValues)/math.MaxInt32 {
		return math.MaxInt64
	}
	n := full * math.MaxInt32
	if b%minFullPageBytes >= minPageBytes {
		n += smallPageValues
	}
	return n
}

// openParquet opens obj with pqread, which validates the footer: magics,
// footer length, a footer that parses with bounded thrift nesting, the
// schema, physical types, row counts and every column chunk's range.
// Errors are *Error values naming obj relative to its root.
func openParquet(obj Object, lim pqread.Limits) (*pqread.File, error) {
	if lo, ok := obj.(*localObject); ok {
		return checkedParquet(obj, func() (*pqread.File, error) { return pqread.Open(lo.path, lim) })
	}
	// Object stores: every byte by ReadAt.
	return checkedParquet(obj, func() (*pqread.File, error) { return pqread.OpenInput(obj.Name(), obj, lim) })
}

// openFooter is openParquet for a footer ft already read from obj's tail
// (an object store's suffix read): the same validation of the footer and
// the row counts, with no further read.
func openFooter(obj Object, ft *pqread.Footer, lim pqread.Limits) (*pqread.File, error) {
	return checkedParquet(obj, func() (*pqread.File, error) { return pqread.OpenFooter(obj.Name(), ft, obj, lim) })
}

// checkedParquet runs open, names its errors after obj (relative to the
// root, marked ErrFooter where the footer is at fault) and refuses row
// counts the file cannot hold (checkCapacity).
func checkedParquet(obj Object, open func() (*pqread.File, error)) (*pqread.File, error) {
	pf, err := open()
	if err != nil {
		var pe *pqread.Error
		if errors.As(err, &pe) {
			pe.File = "" // *Error names the file, relative to the root
			if pe.RowGroup < 0 && pe.Column == "" && pe.Offset < 0 && pe.Page < 0 && pe.Row < 0 {
				err = pe.Err
			}
		}
		return nil, &Error{File: obj.Name(), Err: footerErr(unwrapPath(err))}
	}
	if err := checkCapacity(pf); err != nil {
		pf.Close()
		return nil, &Error{File: obj.Name(), Err: fmt.Errorf("%w: %w", err, ErrFooter)}
	}
	return pf, nil
}

// checkCapacity refuses row counts the file cannot hold: a non-empty row
// group in a file without columns, more rows than MaxRows(file size), or a
// row group with more rows than MaxRows of one of its column chunks'
// compressed length (each checked by pqread to lie inside the file). A
// hostile footer claiming 10^12 rows in a file of a few KiB is refused
// here, before a plan spends hours hashing ids of rows that do not exist.
func checkCapacity(pf *pqread.File) error {
	if pf.NumRows() > 0 && len(pf.Columns()) == 0 {
		return fmt.Errorf("%w: %d rows in a file without columns", pqread.ErrCorrupt, pf.NumRows())
	}
	if n, most := pf.NumRows(), MaxRows(pf.Size()); n > most {
		return fmt.Errorf("%w: footer claims %d rows, more than a file of %d bytes can hold (%d)", pqread.ErrCorrupt, n, pf.Size(), most)
	}
	for rg, rows := range pf.RowGroups() {
		for _, col := range pf.Columns() {
			_, n := pf.ChunkRange(rg, col)
			if n == 0 {
				continue // no values or stored elsewhere: the file's bound holds
			}
			if most := MaxRows(n); rows > most {
				return fmt.Errorf("%w: row group %d claims %d rows, more than its column chunk %s of %d bytes can hold (%d)",
					pqread.ErrCorrupt, rg, rows, col.Name, n, most)
			}
		}
	}
	return nil
}

// footerErr marks a malformed or unsupported footer (pqread's ErrCorrupt,
// ErrUnsupported, ErrLimit) with ErrFooter too; I/O errors pass as they are.
func footerErr(err error) error {
	if errors.Is(err, pqread.ErrCorrupt) || errors.Is(err, pqread.ErrUnsupported) || errors.Is(err, pqread.ErrLimit) {
		return fmt.Errorf("%w: %w", err, ErrFooter)
	}
	return err
}

// File is one plan source file opened and checked against the plan: its
// Object for ranged reads and its validated footer.
type File struct {
	Object  Object
	Parquet *pqread.File
	Meta    plan.SourceFile // the plan's record
}

// Close closes the footer and the object.
func (f *File) Close() error {
	err := f.Parquet.Close()
	if cerr := f.Object.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open opens the plan's source file m from st, reads and validates its
// footer with pqread (the same checks convert and prep plan make) and
// compares it with the plan's record: size, footer SHA-256 and row groups.
// A difference, or a file that is gone, is a *ChangedError; any other
// failure (permission denied, a damaged footer of a file of the planned
// size) is an *Error naming the file, never reported as a change.
func Open(ctx context.Context, st Store, m plan.SourceFile, lim pqread.Limits) (*File, error) {
	obj, err := st.Open(ctx, m.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ChangedError{File: m.Path, What: "file", Expected: "present", Actual: "missing", Root: st.String()}
		}
		return nil, err
	}
	if obj.Size() != m.Size {
		obj.Close()
		return nil, &ChangedError{File: m.Path, What: "size", Expected: fmt.Sprint(m.Size), Actual: fmt.Sprint(obj.Size())}
	}
	pf, err := openParquet(obj, lim)
	if err != nil {
		// A file changed since planning is reported as changed, whatever
		// else is wrong with it now.
		if cerr := footerChanged(obj, m); cerr != nil {
			err = cerr
		}
		obj.Close()
		return nil, err
	}
	f := &File{Object: obj, Parquet: pf, Meta: m}
	if err := Compare(m, pf.Size(), pf.FooterSHA256(), pf.RowGroups()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// FooterSHA256 returns the lower-case hex SHA-256 of obj's footer bytes:
// the thrift FileMetaData, its 4-byte little-endian length and "PAR1", i.e.
// the last len+8 bytes (plan.SourceFile.FooterSHA256). It reads only those
// bytes, after checking the trailing magic and that the length fits the
// file and pqread.DefaultLimits.MaxFooterBytes; errors wrap ErrFooter or
// are the read error.
func FooterSHA256(obj Object) (string, error) {
	size := obj.Size()
	if size < 12 {
		return "", fmt.Errorf("file too small: %d bytes: %w", size, ErrFooter)
	}
	var tail [8]byte
	if _, err := obj.ReadAt(tail[:], size-8); err != nil {
		return "", err
	}
	if string(tail[4:]) != "PAR1" {
		return "", fmt.Errorf("missing PAR1 magic at end of file: %w", ErrFooter)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n == 0 || n > size-12 || n > pqread.DefaultLimits.MaxFooterBytes {
		return "", fmt.Errorf("footer length %d outside the file of %d bytes: %w", n, size, ErrFooter)
	}
	meta := make([]byte, n)
	if _, err := obj.ReadAt(meta, size-8-n); err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write(meta)
	h.Write(tail[:])
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Compare checks a file's size, footer SHA-256 (hex, with or without the
// "sha256:" prefix) and row groups against the plan's record m and returns
// a *ChangedError naming the first that differs, or nil. An empty
// m.FooterSHA256 is not compared.
func Compare(m plan.SourceFile, size int64, footerSHA256 string, rowGroups []int64) error {
	if size != m.Size {
		return &ChangedError{File: m.Path, What: "size", Expected: fmt.Sprint(m.Size), Actual: fmt.Sprint(size)}
	}
	want := strings.ToLower(strings.TrimPrefix(m.FooterSHA256, "sha256:"))
	got := strings.ToLower(strings.TrimPrefix(footerSHA256, "sha256:"))
	if want != "" && got != want {
		return &ChangedError{File: m.Path, What: "footer sha256", Expected: want, Actual: got}
	}
	if !slices.Equal(rowGroups, m.RowGroups) {
		return &ChangedError{File: m.Path, What: "row groups", Expected: fmt.Sprint(m.RowGroups), Actual: fmt.Sprint(rowGroups)}
	}
	return nil
}

// Check compares the plan's source file m in st with the plan's record:
// its size, then its footer bytes' SHA-256 (which covers the row groups),
// reading only the footer. It is the "source unchanged?" check of verify:
// nil, a *ChangedError (a missing file included), or an *Error giving the
// real cause when the file cannot be read.
func Check(ctx context.Context, st Store, m plan.SourceFile) error {
	obj, err := st.Open(ctx, m.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &ChangedError{File: m.Path, What: "file", Expected: "present", Actual: "missing", Root: st.String()}
		}
		return err
	}
	defer obj.Close()
	if obj.Size() != m.Size {
		return &ChangedError{File: m.Path, What: "size", Expected: fmt.Sprint(m.Size), Actual: fmt.Sprint(obj.Size())}
	}
	sum, err := FooterSHA256(obj)
	if err != nil {
		if cerr := footerChanged(obj, m); cerr != nil {
			return cerr
		}
		return err
	}
	return Compare(m, obj.Size(), sum, m.RowGroups)
}

// footerChanged returns a *ChangedError when obj's footer bytes are not
// those the plan recorded (including a footer no longer found: the plan's
// was valid), or nil when they are or cannot be read for another reason.
func footerChanged(obj Object, m plan.SourceFile) error {
	sum, err := FooterSHA256(obj)
	switch {
	case err == nil:
		return Compare(m, obj.Size(), sum, m.RowGroups)
	case errors.Is(err, ErrFooter):
		return &ChangedError{File: m.Path, What: "footer sha256", Expected: strings.TrimPrefix(m.FooterSHA256, "sha256:"), Actual: "none", Err: err}
	}
	return nil
}
