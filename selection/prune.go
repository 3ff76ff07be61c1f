package selection

import (
	"bytes"

	"github.com/prepml/prep/source"
)

// MayMatch reports whether any row of a row group of rows rows whose
// filter columns have the footer statistics st (one per f.Columns) can make
// f TRUE. It is conservative: false only when the bounds prove no row can
// (a comparison of an INTEGER or TEXT column with a literal outside its
// [min, max], a column whose every row is null, and AND/OR of those);
// NOT, IS NULL, floats and booleans never prune.
func (f *Filter) MayMatch(st []source.ScalarStats, rows int64) bool {
	return mayTrue(f.Root, st, rows)
}

func mayTrue(n *Node, st []source.ScalarStats, rows int64) bool {
	switch n.Op {
	case "and":
		return mayTrue(n.Args[0], st, rows) && mayTrue(n.Args[1], st, rows)
	case "or":
		return mayTrue(n.Args[0], st, rows) || mayTrue(n.Args[1], st, rows)
	case "cmp", "in", "between", "prefix":
	default:
		return true
	}
	x := n.Args[0]
	if x.Op != "col" {
		return true
	}
	for _, a := range n.Args[1:] {
		if a.Op != "lit" {
			return true
		}
	}
	s := st[x.col]
	if s.NullCount == rows && rows > 0 {
		return false // every row null: no comparison is TRUE
	}
	if !s.MinMax || n.Neg {
		return true
	}
	// in(v) says whether literal v may equal some value; cmpMin/cmpMax
	// compare v with the bounds.
	cmpMin := func(v Value) (int, bool) { return cmpBound(x.typ, v, s, false) }
	cmpMax := func(v Value) (int, bool) { return cmpBound(x.typ, v, s, true) }
	within := func(v Value) bool {
		a, ok1 := cmpMin(v)
		b, ok2 := cmpMax(v)
		return !ok1 || !ok2 || a >= 0 && b <= 0
	}
	switch n.Op {
	case "cmp":
		v := n.Args[1].Lit
		if v.Type == Null {
			return false
		}
		lo, ok1 := cmpMin(v)
		hi, ok2 := cmpMax(v)
		if !ok1 || !ok2 {
			return true
		}
		switch n.Cmp {
		case "=":
			return lo >= 0 && hi <= 0
		case "!=":
			return !(lo == 0 && hi == 0)
		case "<": // some x < v: min < v
			return lo > 0
		case "<=":
			return lo >= 0
		case ">":
			return hi < 0
		case ">=":
			return hi <= 0
		}
	case "in":
		for _, a := range n.Args[1:] {
			if a.Lit.Type != Null && within(a.Lit) {
				return true
			}
		}
		return false
	case "between":
		lo, hi := n.Args[1].Lit, n.Args[2].Lit
		if lo.Type == Null || hi.Type == Null {
			return true
		}
		a, ok1 := cmpMax(lo) // need max >= lo
		b, ok2 := cmpMin(hi) // need min <= hi
		return !ok1 || !ok2 || a <= 0 && b >= 0
	case "prefix":
		if x.typ != String {
			return true
		}
		p := []byte(n.Args[1].Lit.S)
		// Some value with prefix p lies in [min, max] unless max < p, or
		// min > p without p as its prefix (then min > every p-prefixed value).
		if bytes.Compare(s.MaxStr, p) < 0 {
			return false
		}
		return !(bytes.Compare(s.MinStr, p) > 0 && !bytes.HasPrefix(s.MinStr, p))
	}
	return true
}

// cmpBound compares literal v with the column's min (or max): the sign of
// v − bound, and false when the types do not allow it (the caller then
// cannot prune).
func cmpBound(t Type, v Value, s source.ScalarStats, max bool) (int, bool) {
	switch {
	case t == Int && v.Type == Int:
		b := s.MinInt
		if max {
			b = s.MaxInt
		}
		switch {
		case v.I < b:
			return -1, true
		case v.I > b:
			return 1, true
		}
		return 0, true
	case t == Int && v.Type == Float:
		b := s.MinInt
		if max {
			b = s.MaxInt
		}
		return cmpFloat(v.F, float64(b)), true
	case t == String && v.Type == String:
		b := s.MinStr
		if max {
			b = s.MaxStr
		}
		return bytes.Compare([]byte(v.S), b), true
	}
	return 0, false
}

// MayMatchRows returns the rows [start, end) of a row group of rows rows,
// ascending and disjoint, outside of which no row can make f TRUE, given
// the footer statistics st and the page index pages (both one per
// f.Columns; pages[i] nil for a column without one). A comparison,
// IN, BETWEEN or LIKE of a column with a page index and literals may be
// TRUE only in the pages MayMatch allows by their bounds; AND intersects
// its operands' rows and OR joins them (a row outside both is FALSE or
// NULL for either, so not TRUE); every other condition may be TRUE
// anywhere unless MayMatch rules out the whole row group.
func (f *Filter) MayMatchRows(st []source.ScalarStats, pages []*source.PageStats, rows int64) [][2]int64 {
	return mayRows(f.Root, st, pages, rows)
}

// PageColumn reports whether MayMatchRows can use the page index of
// column i of f.Columns: it is an INTEGER or TEXT column compared with
// literals (a comparison, IN, BETWEEN or LIKE) somewhere under AND and OR
// only.
func (f *Filter) PageColumn(i int) bool {
	var walk func(n *Node) bool
	walk = func(n *Node) bool {
		switch n.Op {
		case "and", "or":
			return walk(n.Args[0]) || walk(n.Args[1])
		case "cmp", "in", "between", "prefix":
			x := n.Args[0]
			for _, a := range n.Args[1:] {
				if a.Op != "lit" {
					return false
				}
			}
			return x.Op == "col" && x.col == i && (x.typ == Int || x.typ == String) && !n.Neg
		}
		return false
	}
	return walk(f.Root)
}

func mayRows(n *Node, st []source.ScalarStats, pages []*source.PageStats, rows int64) [][2]int64 {
	switch n.Op {
	case "and":
		return intersectRows(mayRows(n.Args[0], st, pages, rows), mayRows(n.Args[1], st, pages, rows))
	case "or":
		return unionRows(mayRows(n.Args[0], st, pages, rows), mayRows(n.Args[1], st, pages, rows))
	case "cmp", "in", "between", "prefix":
		if x := n.Args[0]; x.Op == "col" && pages[x.col] != nil {
			ps := pages[x.col]
			one := append([]source.ScalarStats(nil), st...)
			var out [][2]int64
			for k, s := range ps.Stats {
				one[x.col] = s
				lo, hi := ps.FirstRow[k], ps.FirstRow[k+1]
				if mayTrue(n, one, hi-lo) {
					out = unionRows(out, [][2]int64{{lo, hi}})
				}
			}
			return out
		}
	}
	if mayTrue(n, st, rows) {
		return [][2]int64{{0, rows}}
	}
	return nil
}

// intersectRows returns the rows in both a and b (ascending, disjoint
// ranges [start, end)).
func intersectRows(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
		if lo < hi {
			out = append(out, [2]int64{lo, hi})
		}
		if a[i][1] < b[j][1] {
			i++
		} else {
			j++
		}
	}
	return out
}

// unionRows returns the rows in a or b (ascending ranges [start, end)),
// adjacent ranges joined.
func unionRows(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	add := func(r [2]int64) {
		if k := len(out) - 1; k >= 0 && r[0] <= out[k][1] {
			out[k][1] = max(out[k][1], r[1])
			return
		}
		out = append(out, r)
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j >= len(b) || i < len(a) && a[i][0] <= b[j][0] {
			add(a[i])
			i++
		} else {
			add(b[j])
			j++
		}
	}
	return out
}
