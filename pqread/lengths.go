package pqread

import (
	"fmt"
	"io"
)

// lengthWindowEntries bounds the level entries ListLengths holds at once.
const lengthWindowEntries = 1 << 20

// ListLengths appends to dst the list length of every row of the column
// chunk of col in row group rowGroup, in row order: the number of element
// slots of the row's list (null elements included; 0 for a null or an
// empty list). It decodes the pages' repetition and definition levels
// only: values, and dictionary pages, are not decoded (a data page V1
// is still decompressed, as it stores its levels with its values; a V2
// page's values are not even decompressed). col must be a list (Depth 1)
// of a fixed-width kind (INT32, INT64, FLOAT, DOUBLE,
// FIXED_LEN_BYTE_ARRAY); others fail with ErrUnsupported. Memory: about
// 2^20 level entries and one page. Errors are ColumnReader's (level
// checks, row counts, page checks), as an *Error naming the file, column,
// row group and page.
func (f *File) ListLengths(rowGroup int, col ColumnInfo, dst []uint32) ([]uint32, error) {
	if col.Depth != 1 {
		return dst, &Error{File: f.path, Column: col.Name, RowGroup: rowGroup, Page: -1, Row: -1, Offset: -1,
			Err: unsupportedf("list lengths of a column of list depth %d (want a list of values)", col.Depth)}
	}
	switch col.Kind {
	case KindInt32, KindInt64, KindFloat32, KindFloat64, KindFixed:
	default:
		return dst, &Error{File: f.path, Column: col.Name, RowGroup: rowGroup, Page: -1, Row: -1, Offset: -1,
			Err: unsupportedf("list lengths of a list of %s values (want a fixed-width type)", col.Kind)}
	}
	r, err := f.columnReader(rowGroup, col, false, wholeReadAhead)
	if err != nil {
		return dst, err
	}
	defer r.Close()
	r.levelsOnly = true
	for {
		c, err := r.NextWithin(1<<16, lengthWindowEntries)
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		for i := 0; i < c.Rows; i++ {
			n := c.Offsets[i+1] - c.Offsets[i]
			if n > 1<<32-1 {
				return dst, fmt.Errorf("pqread: %s: column %s row group %d: a list of %d values: %w", f.path, col.Name, rowGroup, n, ErrLimit)
			}
			dst = append(dst, uint32(n))
		}
	}
}
