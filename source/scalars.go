package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/prepml/prep/pqread"
)

// ScalarType is the value type a row filter sees for a column.
type ScalarType string

// The scalar types.
const (
	ScalarBool   ScalarType = "bool"   // BOOLEAN
	ScalarInt    ScalarType = "int"    // INT32, INT64 (signed), INT(8|16|32, unsigned)
	ScalarFloat  ScalarType = "float"  // FLOAT, DOUBLE (as float64)
	ScalarString ScalarType = "string" // BYTE_ARRAY annotated STRING or ENUM
)

// ScalarColumn is one leaf column of a file as a row filter sees it: a
// name, a type, or why a filter cannot read it (Unsupported: a list, a
// decimal, a date, ...).
type ScalarColumn struct {
	Name        string
	Type        ScalarType
	Unsupported string
}

// Scalars is one column's values over the rows of a row group: Valid[i]
// false for a null row (nil when none is null); the values in the slice of
// the column's type, one per row (a null row holds a zero value): Bools,
// Ints, Floats, or, for strings, row i = Data[Offsets[i]:Offsets[i+1]];
// or, for strings whose pages are all dictionary encoded (the dictionary
// form, Data and Offsets nil), row i = dictionary entry DictIndex[i] (0 for
// a null row), entry e = DictData[DictOffsets[e]:DictOffsets[e+1]], every
// index in range (pqread.File.ReadColumnDict).
type Scalars struct {
	Valid       []bool
	Bools       []bool
	Ints        []int64
	Floats      []float64
	Data        []byte
	Offsets     []int64
	DictIndex   []uint32
	DictData    []byte
	DictOffsets []int64
}

// ScalarStats is what a row group's footer statistics say about one
// filter column, for skipping row groups: MinMax when the bounds are known
// (INTEGER columns: MinInt ≤ every non-null value ≤ MaxInt; TEXT: MinStr ≤
// every value ≤ MaxStr byte-wise). Float and boolean columns never have
// bounds here (writers leave NaN out of float statistics). NullCount is
// the footer's null_count, 0 when absent.
type ScalarStats struct {
	MinMax         bool
	MinInt, MaxInt int64
	MinStr, MaxStr []byte
	NullCount      int64
}

func scalarStats(pf *pqread.File, g int, c pqread.ColumnInfo) ScalarStats {
	cs := pf.Stats(g, c)
	st := ScalarStats{NullCount: cs.NullCount}
	if cs.Min == nil {
		return st
	}
	t, _ := scalarType(c)
	switch {
	case t == ScalarInt && c.Kind == pqread.KindInt32 && len(cs.Min) == 4 && len(cs.Max) == 4:
		lo, hi := binary.LittleEndian.Uint32(cs.Min), binary.LittleEndian.Uint32(cs.Max)
		if c.Unsigned {
			st.MinInt, st.MaxInt = int64(lo), int64(hi)
		} else {
			st.MinInt, st.MaxInt = int64(int32(lo)), int64(int32(hi))
		}
		st.MinMax = true
	case t == ScalarInt && c.Kind == pqread.KindInt64 && len(cs.Min) == 8 && len(cs.Max) == 8:
		st.MinInt, st.MaxInt = int64(binary.LittleEndian.Uint64(cs.Min)), int64(binary.LittleEndian.Uint64(cs.Max))
		st.MinMax = true
	case t == ScalarString:
		st.MinStr, st.MaxStr, st.MinMax = cs.Min, cs.Max, true
	}
	if st.MinMax && (t == ScalarInt && st.MinInt > st.MaxInt || t == ScalarString && bytes.Compare(st.MinStr, st.MaxStr) > 0) {
		st.MinMax = false // inconsistent statistics: not trusted
	}
	return st
}

// scalarType maps a pqread column to the filter's view of it.
func scalarType(c pqread.ColumnInfo) (ScalarType, string) {
	switch {
	case c.Unsupported != "":
		return "", c.Unsupported
	case c.List || c.Depth > 0 || c.MapRole != "":
		return "", "a list or map column holds several values per row"
	}
	switch c.Kind {
	case pqread.KindBool:
		return ScalarBool, ""
	case pqread.KindInt32, pqread.KindInt64:
		switch {
		case c.Scale != 0 || c.Precision != 0:
			return "", "DECIMAL columns are not supported in filters"
		case c.Logical == "DATE" || c.TimeUnit != "":
			return "", c.Logical + " columns are not supported in filters"
		case c.Unsigned && c.Kind == pqread.KindInt64:
			return "", "UINT64 columns are not supported in filters"
		}
		return ScalarInt, ""
	case pqread.KindFloat32, pqread.KindFloat64:
		return ScalarFloat, ""
	case pqread.KindBytes:
		if c.Logical == "STRING" || c.Logical == "ENUM" {
			return ScalarString, ""
		}
		return "", "binary (non-STRING) columns are not supported in filters"
	}
	return "", c.Physical + " columns are not supported in filters"
}

// FileColumns returns the leaf columns of the named file of st with their
// filter types, reading only its footer.
func FileColumns(ctx context.Context, st Store, name string) ([]ScalarColumn, error) {
	d, err := Describe(ctx, st, name)
	if err != nil {
		return nil, err
	}
	var out []ScalarColumn
	for _, c := range d.Columns {
		t, why := scalarType(c)
		out = append(out, ScalarColumn{Name: c.Name, Type: t, Unsupported: why})
	}
	return out, nil
}

// ReadScalars reads the columns cols (names) of the named file of st, row
// group by row group, in windows of rows, and calls each with the row
// group's index (zero-row groups counted, not called), the window's first
// row in the row group, its rows and one Scalars per column. Only those
// columns' chunks are read, each page decoded once. memory bounds the
// decoded columns of one window: a row group whose filter columns decode
// (pqread.File.DecodedSize) to more is read in windows of
// rows·memory/decoded rows (at least one); memory <= 0: whole row groups.
// skip (if not nil) is asked first about each row group, with its rows and
// the filter columns' footer statistics, and a true answer skips it
// unread. Every column must be a ScalarColumn with a type. Errors
// are *Error values naming the file (and pqread's row group and column).
func ReadScalars(ctx context.Context, st Store, name string, cols []string, memory int64, skip func(rowGroup int, rows int64, st []ScalarStats) bool, each func(rowGroup int, first, rows int64, v []Scalars) error) error {
	obj, err := st.Open(ctx, name)
	if err != nil {
		return err
	}
	defer obj.Close()
	pf, err := openParquet(obj, pqread.Limits{})
	if err != nil {
		return err
	}
	defer pf.Close()
	infos := make([]pqread.ColumnInfo, len(cols))
	for i, c := range cols {
		info, err := pf.Lookup(c)
		if err != nil {
			return &Error{File: name, Err: err}
		}
		if _, why := scalarType(info); why != "" {
			return &Error{File: name, Err: fmt.Errorf("column %s: %s", c, why)}
		}
		infos[i] = info
	}
	vecs := make([]Scalars, len(cols))
	for g, rows := range pf.RowGroups() {
		if rows == 0 {
			continue
		}
		if skip != nil {
			st := make([]ScalarStats, len(infos))
			for i, info := range infos {
				st[i] = scalarStats(pf, g, info)
			}
			if skip(g, rows, st) {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var decoded int64
		for _, info := range infos {
			decoded += pf.DecodedSize(g, info)
		}
		window := rows
		if memory > 0 && decoded > memory {
			window = max(1, int64(float64(rows)*float64(memory)/float64(decoded)))
		}
		readers := make([]*pqread.ColumnReader, len(infos))
		for i, info := range infos {
			// Strings in dictionary form where their pages are: a
			// filter compares each dictionary entry once, not a copy of
			// it per row.
			open := pf.ColumnReader
			if info.Kind == pqread.KindBytes {
				open = pf.ColumnReaderDict
			}
			r, err := open(g, info)
			if err != nil {
				closeReaders(readers)
				return &Error{File: name, Err: err}
			}
			readers[i] = r
		}
		for first := int64(0); first < rows; first += window {
			n := min(window, rows-first)
			for i, r := range readers {
				col, err := r.Next(int(n))
				if err != nil {
					closeReaders(readers)
					return &Error{File: name, Err: err}
				}
				vecs[i] = toScalars(col)
			}
			if err := each(g, first, n, vecs); err != nil {
				closeReaders(readers)
				return err
			}
		}
		closeReaders(readers)
	}
	return nil
}

func closeReaders(rs []*pqread.ColumnReader) {
	for _, r := range rs {
		if r != nil {
			r.Close()
		}
	}
}

func toScalars(c *pqread.Column) Scalars {
	s := Scalars{Valid: c.RowValid}
	switch c.Kind {
	case pqread.KindBool:
		s.Bools = c.Bool
	case pqread.KindInt32:
		s.Ints = make([]int64, len(c.Int32))
		for i, v := range c.Int32 {
			if c.Info.Unsigned {
				s.Ints[i] = int64(uint32(v))
			} else {
				s.Ints[i] = int64(v)
			}
		}
	case pqread.KindInt64:
		s.Ints = c.Int64
	case pqread.KindFloat32:
		s.Floats = make([]float64, len(c.Float32))
		for i, v := range c.Float32 {
			s.Floats[i] = float64(v)
		}
	case pqread.KindFloat64:
		s.Floats = c.Float64
	case pqread.KindBytes:
		s.Data, s.Offsets = c.Data, c.ByteOffsets
		s.DictIndex, s.DictData, s.DictOffsets = c.DictIndex, c.DictData, c.DictOffsets
	}
	return s
}
