package selection

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/source"
)

// Columns returns the filter view of a file's columns (source.FileColumns
// mapped to Type).
func Columns(cols []source.ScalarColumn) []Column {
	out := make([]Column, len(cols))
	for i, c := range cols {
		out[i] = Column{Name: c.Name, Unsupported: c.Unsupported, Float32: c.Float32}
		switch c.Type {
		case source.ScalarBool:
			out[i].Type = Bool
		case source.ScalarInt:
			out[i].Type = Int
		case source.ScalarFloat:
			out[i].Type = Float
		case source.ScalarString:
			out[i].Type = String
		}
	}
	return out
}

// File is one file of a source to select rows from: its path in st and its
// row-group row counts (as the plan records them).
type File struct {
	Path      string
	RowGroups []int64
	// Partition holds the file's hive partition values, one per partition
	// column given to Select (PartitionColumns); nil when none.
	Partition []Value
}

// Result is the selection of one source: the selected rows as ranges
// [Start, Start+Len) of the source's rows counted over its files in the
// given order, row groups in file order.
type Result struct {
	Selected uint64
	Ranges   [][2]uint64 // (start, length), ascending, non-adjacent
	// BytesRead counts the bytes read from the files (footers and the
	// filter columns' chunks).
	BytesRead int64
	// RowGroups counts the non-empty row groups; Skipped those whose
	// statistics proved no row could match (MayMatch), not read.
	RowGroups, Skipped int
	// PagesRead and PagesSkipped count the data pages of the filter
	// columns with a page index in the row groups read: read and decoded,
	// or left unread because MayMatchRows ruled out every row of theirs.
	PagesRead, PagesSkipped int64
}

// countingStore counts the bytes its objects' ReadAt calls return.
type countingStore struct {
	source.Store
	n *atomic.Int64
}

// Open opens name through the wrapped store, counting its reads.
func (c countingStore) Open(ctx context.Context, name string) (source.Object, error) {
	o, err := c.Store.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	return countingObject{o, c.n}, nil
}

type countingObject struct {
	source.Object
	n *atomic.Int64
}

// ReadAt reads through the wrapped object and counts the bytes returned.
func (c countingObject) ReadAt(p []byte, off int64) (int, error) {
	k, err := c.Object.ReadAt(p, off)
	c.n.Add(int64(k))
	return k, err
}

// Select compiles text against every file's columns (each must have every
// column the filter names, of the same type) and evaluates it over the
// files in order, reading only the filter's columns (source.ReadScalars),
// with the decoded columns of one window bounded by memory (bytes; <= 0:
// whole row groups).
// Errors name the file; a filter error is an *Error pointing at the token.
func Select(ctx context.Context, st source.Store, files []File, text string, memory int64, part []Column) (*Filter, *Result, error) {
	var read atomic.Int64
	st = countingStore{st, &read}
	var f *Filter
	isPart := map[string]int{}
	for i, c := range part {
		isPart[c.Name] = i
	}
	for _, fl := range files {
		cols, err := source.FileColumns(ctx, st, fl.Path)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cols {
			if _, ok := isPart[c.Name]; ok {
				return nil, nil, fmt.Errorf("%s: %w", fl.Path, partitionConflict(text, fl.Path, c.Name))
			}
		}
		g, err := Compile(text, append(Columns(cols), part...))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", fl.Path, err)
		}
		if f == nil {
			f = g
			continue
		}
		for i, c := range g.Columns {
			if i >= len(f.Columns) || c != f.Columns[i] {
				return nil, nil, fmt.Errorf("%s: column %s is %s here but %s in %s: %w", fl.Path, c.Name, SQLType(c), typeOf(f.Columns, c.Name), files[0].Path, ErrFilter)
			}
		}
	}
	if f == nil {
		return nil, nil, fmt.Errorf("no files to filter: %w", ErrFilter)
	}
	// The filter's columns: data columns read from the files (data[i] is
	// the index in names, or -1), partition columns constant per file.
	var names []string
	data := make([]int, len(f.Columns))
	for i, c := range f.Columns {
		data[i] = -1
		if _, ok := isPart[c.Name]; !ok {
			data[i] = len(names)
			names = append(names, c.Name)
		}
	}
	// Files are evaluated in parallel (each with its share of memory),
	// their ranges joined in file order.
	bases := make([]uint64, len(files))
	var base uint64
	for i, fl := range files {
		bases[i] = base
		for _, r := range fl.RowGroups {
			base += uint64(r)
		}
	}
	par := max(1, min(len(files), runtime.GOMAXPROCS(0)))
	if memory > 0 {
		memory = max(1, memory/int64(par))
	}
	parts := make([]*Result, len(files))
	err := pool.ForEach(ctx, len(files), par, func(i int) error {
		var err error
		parts[i], err = selectFile(ctx, st, f, files[i], bases[i], names, data, isPart, memory)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	n := 0
	for _, p := range parts {
		n += len(p.Ranges)
	}
	res := &Result{Ranges: make([][2]uint64, 0, n)} // one allocation, not a doubling copy per file
	for _, p := range parts {
		res.RowGroups += p.RowGroups
		res.Skipped += p.Skipped
		res.PagesRead += p.PagesRead
		res.PagesSkipped += p.PagesSkipped
		for _, r := range p.Ranges {
			res.add(r[0], r[1])
		}
	}
	res.BytesRead = read.Load()
	return f, res, nil
}

func (r *Result) add(start, n uint64) {
	r.Selected += n
	if k := len(r.Ranges); k > 0 && r.Ranges[k-1][0]+r.Ranges[k-1][1] == start {
		r.Ranges[k-1][1] += n
		return
	}
	r.Ranges = append(r.Ranges, [2]uint64{start, n})
}

func typeOf(cols []Column, name string) string {
	for _, c := range cols {
		if c.Name == name {
			return SQLType(c)
		}
	}
	return Null.String()
}

// selectFile evaluates f over one file whose first row is base of the
// source: data[i] is f.Columns[i]'s index in names (the columns read), or
// -1 for a partition column (isPart gives its index in fl.Partition).
func selectFile(ctx context.Context, st source.Store, f *Filter, fl File, base uint64, names []string, data []int, isPart map[string]int, memory int64) (*Result, error) {
	res := &Result{}
	var tri []uint8
	starts := make([]uint64, len(fl.RowGroups))
	s := base
	for g, r := range fl.RowGroups {
		starts[g] = s
		s += uint64(r)
	}
	allStats := func(s []source.ScalarStats, rows int64) []source.ScalarStats {
		all := make([]source.ScalarStats, len(f.Columns))
		for i, c := range f.Columns {
			if data[i] >= 0 {
				all[i] = s[data[i]]
				continue
			}
			v := fl.Partition[isPart[c.Name]]
			switch v.Type {
			case Null:
				all[i].NullCount = rows
			case Int, Date: // a date is its day number
				all[i] = source.ScalarStats{MinMax: true, MinInt: v.I, MaxInt: v.I}
			case String:
				all[i] = source.ScalarStats{MinMax: true, MinStr: []byte(v.S), MaxStr: []byte(v.S)}
			}
		}
		return all
	}
	skip := func(g int, rows int64, s []source.ScalarStats) bool {
		res.RowGroups++
		all := allStats(s, rows)
		if f.MayMatch(all, rows) {
			return false
		}
		res.Skipped++
		return true
	}
	pages := &source.PageFilter{Cols: make([]bool, len(names))}
	for i := range f.Columns {
		if data[i] >= 0 && f.PageColumn(i) {
			pages.Cols[data[i]] = true
		}
	}
	pages.Rows = func(g int, rows int64, s []source.ScalarStats, ps []*source.PageStats) [][2]int64 {
		all := allStats(s, rows)
		pall := make([]*source.PageStats, len(f.Columns))
		for i := range f.Columns {
			if data[i] >= 0 {
				pall[i] = ps[data[i]]
			}
		}
		return f.MayMatchRows(all, pall, rows)
	}
	each := func(g int, first, rows int64, v []source.Scalars) error {
		vecs := make([]Vector, len(f.Columns))
		for i, c := range f.Columns {
			if data[i] >= 0 {
				vecs[i] = Vector(v[data[i]])
			} else {
				vecs[i] = constVector(fl.Partition[isPart[c.Name]], int(rows))
			}
		}
		tri = f.Eval(vecs, int(rows), tri[:0])
		for i := 0; i < len(tri); i++ {
			if tri[i] != T {
				continue
			}
			j := i
			for j < len(tri) && tri[j] == T {
				j++
			}
			res.add(starts[g]+uint64(first)+uint64(i), uint64(j-i))
			i = j
		}
		return nil
	}
	var err error
	if len(names) == 0 {
		// Only partition columns: the row counts the plan recorded
		// suffice, nothing is read.
		for g, rows := range fl.RowGroups {
			if rows == 0 || skip(g, rows, nil) {
				continue
			}
			if err = each(g, 0, rows, nil); err != nil {
				break
			}
		}
	} else {
		var pc source.PageCounts
		pc, err = source.ReadScalarsPages(ctx, st, fl.Path, names, memory, skip, pages, each)
		res.PagesRead, res.PagesSkipped = pc.Read, pc.Skipped
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
