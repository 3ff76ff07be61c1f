package source

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"

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
	// Float32 is true for a FLOAT (32-bit) column of type ScalarFloat,
	// whose comparisons with literals are made in float32 (DuckDB's
	// typing; selection/SELECTION.md).
	Float32 bool
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
	return boundStats(c, pf.Stats(g, c))
}

// boundStats converts a chunk's or a page's statistics of column c.
func boundStats(c pqread.ColumnInfo, cs pqread.ChunkStats) ScalarStats {
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
	if st.MinMax && t == ScalarString && allFF(st.MaxStr) {
		// A writer that truncates a long maximum rounds its prefix up; a
		// prefix of all 0xFF cannot be, and parquet-go (as parquet-java's
		// BinaryTruncator, which it follows) then stores that prefix, which
		// is below the longer values it stands for. Not a bound: not trusted.
		st.MinMax = false
	}
	return st
}

// allFF reports whether b is non-empty and every byte of it is 0xFF.
func allFF(b []byte) bool {
	for _, c := range b {
		if c != 0xFF {
			return false
		}
	}
	return len(b) > 0
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
		out = append(out, ScalarColumn{Name: c.Name, Type: t, Unsupported: why, Float32: t == ScalarFloat && c.Kind == pqread.KindFloat32})
	}
	return out, nil
}

// ReadScalars reads the columns cols (names) of the named file of st, row
// group by row group, in windows of rows, and calls each with the row
// group's index (zero-row groups counted, not called), the window's first
// row in the row group, its rows and one Scalars per column (valid only
// during the call: the next window's values reuse their memory). Only those
// columns' chunks are read, each page decoded once. memory bounds the
// decoded columns of one window: a row group whose filter columns decode
// (pqread.File.DecodedSize) to more is read in windows of
// rows·memory/decoded rows (at least one); memory <= 0: whole row groups.
// skip (if not nil) is asked first about each row group, with its rows and
// the filter columns' footer statistics, and a true answer skips it
// unread. Every column must be a ScalarColumn with a type. Errors
// are *Error values naming the file (and pqread's row group and column).
func ReadScalars(ctx context.Context, st Store, name string, cols []string, memory int64, skip func(rowGroup int, rows int64, st []ScalarStats) bool, each func(rowGroup int, first, rows int64, v []Scalars) error) error {
	_, err := ReadScalarsPages(ctx, st, name, cols, memory, skip, nil, nil, each)
	return err
}

// ScalarBuffers holds the last decoded window of each column that
// ReadScalarsPages read, for the next call to decode into. The zero value
// is ready to use.
type ScalarBuffers struct {
	last []*pqread.Column
}

// PageStats is the page index of one column chunk as a filter sees it:
// page k holds the row group's rows [FirstRow[k], FirstRow[k+1]) (the
// last entry is the row group's rows) and has the bounds Stats[k]
// (ScalarStats; NullCount is the page's rows for a page whose every row is
// null, else 0).
type PageStats struct {
	FirstRow []int64
	Stats    []ScalarStats
}

// PageCounts counts the data pages of the filter columns that have a page
// index, in the row groups read (not skipped whole): Read were read and
// decoded, Skipped were left unread because no row of theirs was wanted.
type PageCounts struct {
	Read, Skipped int64
}

// PageFilter is how ReadScalarsPages prunes pages: Cols[i] tells
// whether column i's page index is read (only those may help), and Rows
// is given a row group's rows, the footer statistics and each column's
// PageStats (nil for a column not in Cols or without a page index) and
// returns the row ranges [start, end) of the row group to read, ascending,
// disjoint and not empty.
type PageFilter struct {
	Cols []bool
	Rows func(rowGroup int, rows int64, st []ScalarStats, ix []*PageStats) [][2]int64
}

// ReadScalarsPages is ReadScalars that also prunes pages by the page
// index (pqread.File.PageIndex, ColumnIndex and OffsetIndex). For a row
// group not skipped whole where at least one column of pages.Cols has a
// page index, pages.Rows says which rows to read; each is then called only
// for rows in those ranges (windows never span two ranges), and a page
// holding none of their rows is neither read nor decoded. Pages of one
// column are read in runs of consecutive pages, each page once; a column
// without a page index is read whole, the rows between ranges decoded and
// dropped. pages nil (or no page index) reads as ReadScalars. The counts
// returned cover the columns whose page index was used.
//
// bufs, when not nil, carries the memory of the decoded windows from one
// call to the next: calls given the same ScalarBuffers (one at a time)
// decode into the last call's windows' memory instead of allocating more.
func ReadScalarsPages(ctx context.Context, st Store, name string, cols []string, memory int64, skip func(rowGroup int, rows int64, st []ScalarStats) bool,
	pages *PageFilter, bufs *ScalarBuffers, each func(rowGroup int, first, rows int64, v []Scalars) error) (PageCounts, error) {
	var pc PageCounts
	obj, err := st.Open(ctx, name)
	if err != nil {
		return pc, err
	}
	defer obj.Close()
	pf, err := openParquet(obj, pqread.Limits{})
	if err != nil {
		return pc, err
	}
	defer pf.Close()
	infos := make([]pqread.ColumnInfo, len(cols))
	for i, c := range cols {
		info, err := pf.Lookup(c)
		if err != nil {
			return pc, &Error{File: name, Err: err}
		}
		if _, why := scalarType(info); why != "" {
			return pc, &Error{File: name, Err: fmt.Errorf("column %s: %s", c, why)}
		}
		infos[i] = info
	}
	if bufs == nil {
		bufs = &ScalarBuffers{}
	}
	if len(bufs.last) != len(infos) {
		bufs.last = make([]*pqread.Column, len(infos))
	}
	last := bufs.last // readRanges' windows

	for g, rows := range pf.RowGroups() {
		if rows == 0 {
			continue
		}
		var stats []ScalarStats
		if skip != nil || pages != nil {
			stats = make([]ScalarStats, len(infos))
			for i, info := range infos {
				stats[i] = scalarStats(pf, g, info)
			}
		}
		if skip != nil && skip(g, rows, stats) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return pc, err
		}
		var decoded int64
		for _, info := range infos {
			decoded += pf.DecodedSize(g, info)
		}
		window := rows
		if memory > 0 && decoded > memory {
			window = max(1, int64(float64(rows)*float64(memory)/float64(decoded)))
		}
		ranges := [][2]int64{{0, rows}}
		ixs := make([]*pqread.PageIndex, len(infos))
		if pages != nil {
			ps := make([]*PageStats, len(infos))
			any := false
			for i, info := range infos {
				if !pages.Cols[i] {
					continue
				}
				ix, err := pf.PageIndex(g, info)
				if err != nil {
					return pc, &Error{File: name, Err: err}
				}
				if ix != nil {
					ixs[i], ps[i], any = ix, pageStats(info, ix), true
				}
			}
			if any {
				ranges = pages.Rows(g, rows, stats, ps)
			}
		}
		if err := readRanges(pf, g, rows, infos, ixs, ranges, window, &pc, last, func(first, n int64, v []Scalars) error { return each(g, first, n, v) }); err != nil {
			if _, ok := err.(*pqread.Error); ok {
				return pc, &Error{File: name, Err: err}
			}
			return pc, err
		}
	}
	return pc, nil
}

// pageStats converts a page index to the filter's bounds, page by page,
// as scalarStats does for a chunk.
func pageStats(info pqread.ColumnInfo, ix *pqread.PageIndex) *PageStats {
	ps := &PageStats{FirstRow: ix.FirstRow, Stats: make([]ScalarStats, ix.Pages())}
	for k := range ps.Stats {
		if ix.NullPage[k] {
			ps.Stats[k].NullCount = ix.FirstRow[k+1] - ix.FirstRow[k]
			continue
		}
		ps.Stats[k] = boundStats(info, pqread.ChunkStats{Min: ix.Min[k], Max: ix.Max[k]})
	}
	return ps
}

// colRun is a run of consecutive pages [p0, p1) of one column, read by one
// reader: rows [r0, r1) of the row group.
type colRun struct {
	p0, p1 int
	r0, r1 int64
}

// readRanges reads the row ranges of row group g in windows of at most
// window rows, each column by runs of the pages that hold the ranges' rows
// (a column without a page index: its whole chunk, rows between ranges
// decoded and dropped), and calls each per window. last[i] is column i's
// last window, done with once each returns: its buffers go back to the
// reader for the next window (pqread ColumnReader.Recycle), so that the
// windows of every row group reuse the same memory.
func readRanges(pf *pqread.File, g int, rows int64, infos []pqread.ColumnInfo, ixs []*pqread.PageIndex, ranges [][2]int64, window int64, pc *PageCounts, last []*pqread.Column, each func(first, n int64, v []Scalars) error) error {
	if len(ranges) == 0 {
		for _, ix := range ixs {
			if ix != nil {
				pc.Skipped += int64(ix.Pages())
			}
		}
		return nil
	}
	// runOf[i][j]: the run of column i that range j lies in.
	runs := make([][]colRun, len(infos))
	runOf := make([][]int, len(infos))
	for i, ix := range ixs {
		runOf[i] = make([]int, len(ranges))
		if ix == nil {
			runs[i] = []colRun{{0, 1, 0, rows}}
			continue
		}
		fr := ix.FirstRow
		pageOf := func(row int64) int { return sort.Search(ix.Pages(), func(k int) bool { return fr[k+1] > row }) }
		read := 0
		for j, r := range ranges {
			p0, p1 := pageOf(r[0]), pageOf(r[1]-1)+1
			if k := len(runs[i]) - 1; k >= 0 && p0 <= runs[i][k].p1 {
				read += max(0, p1-runs[i][k].p1)
				runs[i][k].p1 = max(runs[i][k].p1, p1)
				runs[i][k].r1 = fr[runs[i][k].p1]
			} else {
				runs[i] = append(runs[i], colRun{p0, p1, fr[p0], fr[p1]})
				read += p1 - p0
			}
			runOf[i][j] = len(runs[i]) - 1
		}
		pc.Read += int64(read)
		pc.Skipped += int64(ix.Pages() - read)
	}
	readers := make([]*pqread.ColumnReader, len(infos))
	cur := make([]int, len(infos)) // the run readers[i] reads
	pos := make([]int64, len(infos))
	defer closeReaders(readers)
	vecs := make([]Scalars, len(infos))
	next := func(i int, n int64) (*pqread.Column, error) {
		readers[i].Recycle(last[i])
		c, err := readers[i].Next(int(n))
		last[i] = c
		return c, err
	}
	for j, r := range ranges {
		for i, info := range infos {
			if readers[i] != nil && cur[i] == runOf[i][j] {
				continue
			}
			if readers[i] != nil {
				readers[i].Close()
				readers[i] = nil
			}
			run := runs[i][runOf[i][j]]
			var err error
			// Strings in dictionary form where their pages are: a
			// filter compares each dictionary entry once, not a copy of
			// it per row.
			dict := info.Kind == pqread.KindBytes
			switch {
			case ixs[i] != nil:
				readers[i], err = pf.ColumnReaderPages(g, info, dict, ixs[i], run.p0, run.p1)
			case dict:
				readers[i], err = pf.ColumnReaderDict(g, info)
			default:
				readers[i], err = pf.ColumnReader(g, info)
			}
			if err != nil {
				return err
			}
			cur[i], pos[i] = runOf[i][j], run.r0
		}
		for i := range readers {
			for pos[i] < r[0] { // rows before the range: decoded, dropped
				n := min(window, r[0]-pos[i])
				if _, err := next(i, n); err != nil {
					return err
				}
				pos[i] += n
			}
		}
		for first := r[0]; first < r[1]; first += window {
			n := min(window, r[1]-first)
			for i := range readers {
				col, err := next(i, n)
				if err != nil {
					return err
				}
				vecs[i] = toScalars(col)
				pos[i] += n
			}
			if err := each(first, n, vecs); err != nil {
				return err
			}
		}
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
