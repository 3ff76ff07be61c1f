package selection

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math/bits"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/internal/sysmem"
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
// given order, row groups in file order. The ranges are held compactly
// (about 3 bytes a range: All and Ranges give them).
type Result struct {
	Selected uint64
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

	files []rangeList // each file's ranges, in file order
	n     int         // ranges, those of adjacent files joined
}

// Len returns the number of selected ranges (as All yields them).
func (r *Result) Len() int { return r.n }

// Size returns at least the bytes of the selected ranges as All yields
// them written as uvarints, each range's gap from the previous range's end
// (from 0 for the first) and its length: the size of the compact form.
func (r *Result) Size() int {
	n := 0
	for i := range r.files {
		l := &r.files[i]
		n += len(l.buf)
		if l.last[1] > 0 {
			n += uvarintLen(l.last[0]-l.end) + uvarintLen(l.last[1])
		}
	}
	return n
}

// Uvarints yields the compact form of the selected ranges as All yields
// them, each range's gap from the previous range's end (from 0 for the
// first) and its length as uvarints, in pieces: mostly each file's bytes
// as they are, only a file's first range written again (its gap from the
// previous file's last range, or joined to it). Each piece holds whole
// ranges and stays unchanged while r does (callers must not write to
// it). The bytes are Size at most.
func (r *Result) Uvarints() iter.Seq[[]byte] {
	return func(yield func([]byte) bool) {
		var end uint64    // the end of the last range yielded
		var ps, pn uint64 // the range not yet yielded: a next file's first may extend it
		// put yields the range (ps, pn) when there is one.
		put := func() bool {
			if pn == 0 {
				return true
			}
			b := binary.AppendUvarint(make([]byte, 0, 2*binary.MaxVarintLen64), ps-end)
			b = binary.AppendUvarint(b, pn)
			end, pn = ps+pn, 0
			return yield(b)
		}
		for i := range r.files {
			l := &r.files[i]
			if l.n == 0 {
				continue
			}
			// The file's first range: its first in buf, or the open one.
			s1, n1, rest := l.last[0], l.last[1], []byte(nil)
			if len(l.buf) > 0 {
				a, k := binary.Uvarint(l.buf)
				b, m := binary.Uvarint(l.buf[k:])
				s1, n1, rest = a, b, l.buf[k+m:]
			}
			if pn > 0 && ps+pn == s1 {
				pn += n1
			} else {
				if !put() {
					return
				}
				ps, pn = s1, n1
			}
			if len(l.buf) == 0 {
				continue // the first range was the open one
			}
			// The rest of buf counts its gaps from the end of the file's
			// first range, which the range put now ends at too.
			if !put() {
				return
			}
			if len(rest) > 0 {
				if !yield(rest) {
					return
				}
				end = l.end
			}
			ps, pn = l.last[0], l.last[1]
		}
		put()
	}
}

// uvarintLen returns the bytes of x as a uvarint.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// All yields the selected ranges (start, length): ascending, non-empty,
// non-adjacent.
func (r *Result) All() iter.Seq2[uint64, uint64] {
	return func(yield func(uint64, uint64) bool) {
		var s, n uint64 // the range not yet yielded: a next file's first may extend it
		for i := range r.files {
			for start, k := range r.files[i].all() {
				if n > 0 && s+n == start {
					n += k
					continue
				}
				if n > 0 && !yield(s, n) {
					return
				}
				s, n = start, k
			}
		}
		if n > 0 {
			yield(s, n)
		}
	}
}

// Ranges returns the selected ranges (start, length) as All yields them,
// in one slice of 16 bytes a range.
func (r *Result) Ranges() [][2]uint64 {
	out := make([][2]uint64, 0, r.n)
	for s, n := range r.All() {
		out = append(out, [2]uint64{s, n})
	}
	return out
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
	parts := make([]*fileResult, len(files))
	// Each file in progress has a scratch of its own, handed on to the
	// next file: its windows reuse the last one's memory.
	scratch := make(chan *fileScratch, par)
	for range par {
		scratch <- &fileScratch{eval: f.Evaluator()}
	}
	err := pool.ForEach(ctx, len(files), par, func(i int) error {
		sc := <-scratch
		defer func() { scratch <- sc }()
		var err error
		parts[i], err = selectFile(ctx, st, f, files[i], bases[i], names, data, isPart, memory, sc)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	res := &Result{files: make([]rangeList, 0, len(parts))}
	for _, p := range parts {
		res.addFile(p)
	}
	res.BytesRead = read.Load()
	return f, res, nil
}

// addFile appends the selection of the next file (its counts and ranges).
func (r *Result) addFile(p *fileResult) {
	r.RowGroups += p.RowGroups
	r.Skipped += p.Skipped
	r.PagesRead += p.PagesRead
	r.PagesSkipped += p.PagesSkipped
	r.Selected += p.ranges.rows
	l := &p.ranges
	if l.n == 0 {
		return
	}
	r.n += l.n
	for i := len(r.files) - 1; i >= 0; i-- { // the last file with a range
		if e := &r.files[i]; e.n > 0 {
			if e.last[0]+e.last[1] == l.first {
				r.n-- // joins that file's last range
			}
			break
		}
	}
	r.files = append(r.files, *l)
}

// rangeList collects ascending ranges (start, length) of rows, joining
// adjacent ones, compactly: each range but the last as the uvarint of its
// gap from the previous range's end (from 0 for the first), then the
// uvarint of its length, about 3 bytes a range where a [2]uint64 takes 16.
// The last range stays open: the next may extend it.
type rangeList struct {
	buf   []byte
	end   uint64    // the end of the last range in buf
	last  [2]uint64 // the open range; length 0 when none
	first uint64    // the first range's start
	n     int       // ranges, the open one included
	rows  uint64    // rows in all ranges
}

func (l *rangeList) add(start, n uint64) {
	l.rows += n
	if l.last[1] > 0 {
		if l.last[0]+l.last[1] == start {
			l.last[1] += n
			return
		}
		l.flush()
	} else {
		l.first = start
	}
	l.last = [2]uint64{start, n}
	l.n++
}

// reserve makes room for n bytes of ranges in all.
func (l *rangeList) reserve(n int) {
	if n > cap(l.buf) {
		l.buf = append(sysmem.MakeHuge[byte](0, n), l.buf...)
	}
}

// flush appends the open range to buf.
func (l *rangeList) flush() {
	if cap(l.buf)-len(l.buf) < 2*binary.MaxVarintLen64 {
		l.buf = slices.Grow(l.buf, max(4096, len(l.buf)))
	}
	if gap := l.last[0] - l.end; gap < 0x80 && l.last[1] < 0x80 { // one byte each: most ranges
		l.buf = append(l.buf, byte(gap), byte(l.last[1]))
	} else {
		l.buf = binary.AppendUvarint(l.buf, gap)
		l.buf = binary.AppendUvarint(l.buf, l.last[1])
	}
	l.end = l.last[0] + l.last[1]
}

// all yields the ranges (start, length) in order.
func (l *rangeList) all() iter.Seq2[uint64, uint64] {
	return func(yield func(uint64, uint64) bool) {
		b := l.buf
		var end uint64
		for len(b) > 0 {
			var gap, n uint64
			if len(b) >= 2 && b[0] < 0x80 && b[1] < 0x80 {
				gap, n, b = uint64(b[0]), uint64(b[1]), b[2:]
			} else {
				k := 0
				gap, k = binary.Uvarint(b)
				b = b[k:]
				n, k = binary.Uvarint(b)
				b = b[k:]
			}
			if !yield(end+gap, n) {
				return
			}
			end += gap + n
		}
		if l.last[1] > 0 {
			yield(l.last[0], l.last[1])
		}
	}
}

// addTrue adds the rows i of tri that hold T as row base+i, run by run:
// 64 rows at a time, each row's T flag packed into a bit of a word (eight
// rows by one multiplication), each run of set bits found by counting
// trailing zeros, with no branch per row.
func (l *rangeList) addTrue(tri []uint8, base uint64) {
	i := 0
	for ; i+64 <= len(tri); i += 64 {
		var w uint64
		for k := 0; k < 8; k++ {
			w |= packT(binary.LittleEndian.Uint64(tri[i+8*k:])) << (8 * k)
		}
		l.addWord(w, base+uint64(i))
	}
	var w uint64
	for k, v := range tri[i:] {
		w |= uint64(b2i(v == T)) << k
	}
	l.addWord(w, base+uint64(i))
}

// packT returns, for eight F, T or U values x (one per byte, little
// endian), a byte whose bit k says byte k is T. T is 1 and the others 0
// and 2, so byte k is T when its bit 0 is set and its bit 1 clear; the
// multiplication gathers bit 0 of each byte into the top byte (the bits
// land on distinct positions, so no carry disturbs them).
func packT(x uint64) uint64 {
	t := x &^ (x >> 1) & 0x0101010101010101
	return t * 0x0102040810204080 >> 56
}

// addWord adds the rows base+k for the set bits k of w, run by run.
func (l *rangeList) addWord(w, base uint64) {
	off := uint64(0)
	for w != 0 {
		s := uint(bits.TrailingZeros64(w))
		w >>= s
		off += uint64(s)
		n := uint(bits.TrailingZeros64(^w)) // 64 when the run fills w
		l.add(base+off, uint64(n))
		if n == 64 {
			return
		}
		w >>= n
		off += uint64(n)
	}
}

func typeOf(cols []Column, name string) string {
	for _, c := range cols {
		if c.Name == name {
			return SQLType(c)
		}
	}
	return Null.String()
}

// fileResult is the selection of one file: Result's counts, its ranges
// in a rangeList.
type fileResult struct {
	Result
	ranges rangeList
}

// evalRows is how many rows of a window selectFile evaluates at a time (a
// multiple of 64, addTrue's word).
const evalRows = 64 << 10

// fileScratch is the memory one file's evaluation works in, kept for the
// next file: the decoded windows, the evaluator's vectors and the
// evaluation's result.
type fileScratch struct {
	bufs source.ScalarBuffers
	eval *Evaluator
	tri  []uint8
}

// selectFile evaluates f over one file whose first row is base of the
// source, in sc (an Evaluator of f): data[i] is f.Columns[i]'s index in
// names (the columns read), or -1 for a partition column (isPart gives its
// index in fl.Partition).
func selectFile(ctx context.Context, st source.Store, f *Filter, fl File, base uint64, names []string, data []int, isPart map[string]int, memory int64, sc *fileScratch) (*fileResult, error) {
	res := &fileResult{}
	reserved := false // the ranges' room (each)
	tri := sc.tri
	defer func() { sc.tri = tri }()
	starts := make([]uint64, len(fl.RowGroups))
	s := base
	for g, r := range fl.RowGroups {
		starts[g] = s
		s += uint64(r)
	}
	fileRows := s - base
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
		// Evaluated evalRows at a time: the result and the AND and OR
		// vectors stay small (in cache, and the same memory each time).
		part := make([]Vector, len(vecs))
		for lo := 0; lo < int(rows); lo += evalRows {
			hi := min(int(rows), lo+evalRows)
			for i, v := range vecs {
				part[i] = v.slice(lo, hi)
			}
			tri = sc.eval.Eval(part, hi-lo, tri[:0])
			res.ranges.addTrue(tri, starts[g]+uint64(first)+uint64(lo))
		}
		if !reserved && len(res.ranges.buf) > 0 {
			// Room for the whole file's ranges at the density of the
			// rows so far, and an eighth more: one allocation where
			// doubling would copy them (into fresh memory) again and
			// again. A file's ranges take at most about a byte a row.
			reserved = true
			done := starts[g] + uint64(first+rows) - base
			res.ranges.reserve(int(min(float64(len(res.ranges.buf))*float64(fileRows)/float64(done)*9/8, float64(fileRows+64))))
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
		pc, err = source.ReadScalarsPages(ctx, st, fl.Path, names, memory, skip, pages, &sc.bufs, each)
		res.PagesRead, res.PagesSkipped = pc.Read, pc.Skipped
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}
