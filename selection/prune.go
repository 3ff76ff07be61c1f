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
