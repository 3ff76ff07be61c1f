package selection

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/prepml/prep/source"
)

// Type is a filter value type.
type Type int

// The filter types. Integers of every width (signed, and unsigned up to 32
// bits) are Int; FLOAT and DOUBLE are Float; UTF-8 strings are String.
const (
	Null Type = iota // the type of the NULL literal
	Bool
	Int
	Float
	String
	Date      // days since 1970-01-01 (partition columns; SELECTION.md)
	Timestamp // microseconds since 1970-01-01 00:00:00, no time zone (partition columns)
)

// String returns the type's SQL-style name, as errors print it.
func (t Type) String() string {
	return [...]string{"NULL", "BOOLEAN", "INTEGER", "FLOAT", "TEXT", "DATE", "TIMESTAMP"}[t]
}

// Value is a literal.
type Value struct {
	Type Type
	B    bool
	I    int64
	F    float64
	S    string
}

// Column describes a column a filter may use: its name, its type, and,
// when the filter cannot use it, why (Unsupported, e.g. "a list").
type Column struct {
	Name        string
	Type        Type
	Unsupported string
	Float32     bool // a FLOAT (32-bit) column of Type Float (SELECTION.md "Numbers")
}

// Filter is a parsed, type-checked filter.
type Filter struct {
	Text string
	Root *Node
	// Columns are the columns the filter reads, in order of first use;
	// Eval takes one Vector per column in this order.
	Columns []Column
}

// Compile parses text and type-checks it against the columns a source has:
// every column named must exist and be supported, comparisons need
// comparable types (numbers with numbers, text with text, booleans with
// booleans; NULL with anything), LIKE needs text, AND/OR/NOT and a lone
// operand need booleans. A DATE column compares with DATE columns and
// literals, and with a 'YYYY-MM-DD' text literal taken as a date. Errors
// are *Error values pointing at the token.
func Compile(text string, columns []Column) (*Filter, error) {
	root, err := Parse(text)
	if err != nil {
		return nil, err
	}
	return typeCheck(text, root, columns)
}

// typeCheck is Compile's checking of a parsed filter (root, parsed from
// text) against columns.
func typeCheck(text string, root *Node, columns []Column) (*Filter, error) {
	f := &Filter{Text: text, Root: root}
	byName := map[string]Column{}
	for _, c := range columns {
		byName[c.Name] = c
	}
	used := map[string]int{}
	var check func(n *Node) error
	bad := func(n *Node, format string, args ...any) error {
		return &Error{Filter: text, Pos: n.Pos, Token: n.Raw, Msg: fmt.Sprintf(format, args...)}
	}
	comparable := func(op *Node, a, b *Node) error {
		ta, tb := a.typ, b.typ
		switch {
		case ta == Null || tb == Null:
		case temporal(ta) || temporal(tb):
			return coerceDate(text, op, a, b)
		case (ta == Int || ta == Float) && (tb == Int || tb == Float):
		case ta == tb && (ta == String || ta == Bool):
		default:
			return bad(op, "type mismatch: %s, %s", describeNode(a), describeNode(b))
		}
		return nil
	}
	check = func(n *Node) error {
		for _, a := range n.Args {
			if err := check(a); err != nil {
				return err
			}
		}
		switch n.Op {
		case "col":
			c, ok := byName[n.Col]
			if !ok {
				names := make([]string, 0, len(columns))
				for _, c := range columns {
					names = append(names, c.Name)
				}
				sort.Strings(names)
				return bad(n, "unknown column %s (the source has: %s)", n.Col, strings.Join(names, ", "))
			}
			if c.Unsupported != "" {
				return bad(n, "column %s cannot be used in a filter: %s", n.Col, c.Unsupported)
			}
			n.typ = c.Type
			i, ok := used[n.Col]
			if !ok {
				i = len(f.Columns)
				used[n.Col] = i
				f.Columns = append(f.Columns, c)
			}
			n.col = i
		case "lit":
			n.typ = n.Lit.Type
			n.litBytes = []byte(n.Lit.S)
		case "cmp":
			if err := comparable(n, n.Args[0], n.Args[1]); err != nil {
				return err
			}
			n.typ = Bool
		case "in", "between":
			for _, a := range n.Args[1:] {
				if err := comparable(a, n.Args[0], a); err != nil {
					return err
				}
			}
			n.typ = Bool
		case "prefix":
			if t := n.Args[0].typ; t != String && t != Null {
				return bad(n, "LIKE needs text: %s", describeNode(n.Args[0]))
			}
			n.typ = Bool
		case "isnull":
			n.typ = Bool
		case "and", "or", "not":
			for _, a := range n.Args {
				if a.typ != Bool && a.typ != Null {
					return bad(a, "%s needs a condition: %s", strings.ToUpper(n.Op), describeNode(a))
				}
			}
			n.typ = Bool
		}
		return nil
	}
	if err := check(root); err != nil {
		return nil, err
	}
	if root.typ != Bool && root.typ != Null {
		return nil, bad(root, "a filter must be a condition: %s", describeNode(root))
	}
	if err := coerceNumbers(text, root, f.Columns); err != nil {
		return nil, err
	}
	lowerDates(root)
	return f, nil
}

// Vector is one column's values for a run of rows, laid out as
// source.ReadScalars returns them (source.Scalars: Valid[i] false for a
// null row, nil for no null; Ints, Floats, Bools, or text as Data and
// Offsets or in dictionary form with DictIndex, DictData and DictOffsets,
// every index in range), one per row, nulls included. A text comparison
// with a literal over the dictionary form is made once per entry.
type Vector source.Scalars

// slice returns rows [lo, hi) of v; a text vector's offsets stay offsets
// into all of its Data.
func (v Vector) slice(lo, hi int) Vector {
	out := Vector{Data: v.Data, DictData: v.DictData, DictOffsets: v.DictOffsets}
	if v.Valid != nil {
		out.Valid = v.Valid[lo:hi]
	}
	if v.Bools != nil {
		out.Bools = v.Bools[lo:hi]
	}
	if v.Ints != nil {
		out.Ints = v.Ints[lo:hi]
	}
	if v.Floats != nil {
		out.Floats = v.Floats[lo:hi]
	}
	if v.Offsets != nil {
		out.Offsets = v.Offsets[lo : hi+1]
	}
	if v.DictIndex != nil {
		out.DictIndex = v.DictIndex[lo:hi]
	}
	return out
}

// text returns row i of a text vector.
func (v *Vector) text(i int) []byte {
	if v.DictIndex != nil {
		e := v.DictIndex[i]
		return v.DictData[v.DictOffsets[e]:v.DictOffsets[e+1]]
	}
	return v.Data[v.Offsets[i]:v.Offsets[i+1]]
}

// Three-valued results (SQL): F, T or U (unknown: NULL).
const (
	F uint8 = 0
	T uint8 = 1
	U uint8 = 2
)

// Eval evaluates f over rows rows whose filter columns are cols (one per
// f.Columns, in order) and appends to dst one of F, T or U per row. A row
// is selected by a WHERE clause when it is T.
func (f *Filter) Eval(cols []Vector, rows int, dst []uint8) []uint8 {
	return f.Evaluator().Eval(cols, rows, dst)
}

// Evaluator returns an Evaluator of f.
func (f *Filter) Evaluator() *Evaluator { return &Evaluator{f: f} }

// An Evaluator evaluates a Filter over window after window, keeping the
// vectors its AND and OR nodes combine for the next windows instead of
// allocating them for each. One goroutine uses it at a time.
type Evaluator struct {
	f    *Filter
	free [][]uint8 // vectors not in use
}

// Eval is Filter.Eval.
func (e *Evaluator) Eval(cols []Vector, rows int, dst []uint8) []uint8 {
	base := len(dst)
	dst = slices.Grow(dst, rows)[:base+rows]
	e.evalVec(e.f.Root, cols, dst[base:])
	return dst
}

// vector returns a vector of n values (unspecified) from the free ones
// (or a new one); put gives it back.
func (e *Evaluator) vector(n int) []uint8 {
	if k := len(e.free); k > 0 {
		v := e.free[k-1]
		e.free = e.free[:k-1]
		return slices.Grow(v[:0], n)[:n]
	}
	return make([]uint8, n)
}

func (e *Evaluator) put(v []uint8) { e.free = append(e.free, v) }

// Three-valued logic as tables indexed by a<<2 | b (and, or) or by a
// (not), for a and b in {F, T, U}: SQL's AND, OR and NOT.
var (
	and3Tab = [16]uint8{F<<2 | F: F, F<<2 | T: F, F<<2 | U: F, T<<2 | F: F, T<<2 | T: T, T<<2 | U: U, U<<2 | F: F, U<<2 | T: U, U<<2 | U: U}
	or3Tab  = [16]uint8{F<<2 | F: F, F<<2 | T: T, F<<2 | U: U, T<<2 | F: T, T<<2 | T: T, T<<2 | U: T, U<<2 | F: U, U<<2 | T: T, U<<2 | U: U}
	not3Tab = [4]uint8{F: T, T: F, U: U}
)

// evalVec writes n's value at every row into out (len = rows), node by
// node over whole vectors: AND, OR and NOT combine their operands' vectors
// through the tables above, a comparison of a column with a literal runs a
// typed loop (cmpColLit), anything else evalRow per row. Both give the
// same values (TestEvalVecEqualsRow).
func (e *Evaluator) evalVec(n *Node, cols []Vector, out []uint8) {
	switch n.Op {
	case "and", "or":
		e.evalVec(n.Args[0], cols, out)
		tmp := e.vector(len(out))
		e.evalVec(n.Args[1], cols, tmp)
		tab := &and3Tab
		if n.Op == "or" {
			tab = &or3Tab
		}
		for i, b := range tmp {
			out[i] = tab[(out[i]<<2|b)&15]
		}
		e.put(tmp)
		return
	case "not":
		e.evalVec(n.Args[0], cols, out)
		for i, v := range out {
			out[i] = not3Tab[v&3]
		}
		return
	case "cmp":
		if a, b := n.Args[0], n.Args[1]; a.Op == "col" && b.Op == "lit" && b.Lit.Type != Null && cmpColLit(n.Cmp, &cols[a.col], a.typ, b.Lit, out) {
			return
		}
	}
	for i := range out {
		out[i] = evalRow(n, cols, i)
	}
}

// cmpColLit is the typed loop of column op literal; false when it has none
// for these types (the caller then evaluates row by row). Each row's
// three-way comparison c (compare's, cmpFloat's order for floats) picks
// its result from a table of the operator's results for c = -1, 0, 1,
// with no branch on the operator per row; null rows are set to U after.
func cmpColLit(op string, v *Vector, t Type, lit Value, out []uint8) bool {
	var tab [4]uint8 // tab[c+1]: the result for a comparison of c
	for c := -1; c <= 1; c++ {
		tab[c+1] = tri(holds(op, c))
	}
	switch {
	case t == String && lit.Type == String && v.DictIndex != nil:
		// Each dictionary entry compared once, each row a lookup of its
		// entry's result.
		l := []byte(lit.S)
		res := make([]uint8, max(1, len(v.DictOffsets)-1)) // index 0 of null rows when the dictionary is empty
		for e := range res {
			res[e] = tab[(bytes.Compare(v.DictData[v.DictOffsets[e]:v.DictOffsets[e+1]], l)+1)&3]
		}
		for i, e := range v.DictIndex[:len(out)] {
			out[i] = res[e]
		}
	case t == String && lit.Type == String:
		l := []byte(lit.S)
		d, offs := v.Data, v.Offsets[:len(out)+1]
		if op == "=" || op == "!=" {
			eq, ne := tab[1], tab[0]
			for i := range out {
				s := d[offs[i]:offs[i+1]]
				if len(s) == len(l) && string(s) == lit.S {
					out[i] = eq
				} else {
					out[i] = ne
				}
			}
			break
		}
		for i := range out {
			out[i] = tab[(bytes.Compare(d[offs[i]:offs[i+1]], l)+1)&3]
		}
	case t == Float && (lit.Type == Float || lit.Type == Int):
		x := lit.F
		if lit.Type == Int {
			x = float64(lit.I)
		}
		fs := v.Floats[:len(out)]
		if math.IsNaN(x) {
			// NaN equals NaN and is above every other value.
			for i, a := range fs {
				out[i] = tab[b2i(a != a)]
			}
			break
		}
		cmpFloats(op, fs, x, out)
	case t == Int && lit.Type == Int:
		y := lit.I
		for i, a := range v.Ints[:len(out)] {
			out[i] = tab[(1+b2i(a > y)-b2i(a < y))&3]
		}
	default:
		return false
	}
	if v.Valid != nil {
		for i, ok := range v.Valid[:len(out)] {
			if !ok {
				out[i] = U
			}
		}
	}
	return true
}

// cmpFloats sets out[i] to T or F by fs[i] op x, x not NaN, in the
// order of cmpFloat: a NaN row is above x, -0 equals 0. One loop per
// operator, each row's result from the flags of two compares with no
// branch (random data would mispredict one per row).
func cmpFloats(op string, fs []float64, x float64, out []uint8) {
	out = out[:len(fs)]
	switch op {
	case "=":
		for i, a := range fs {
			out[i] = uint8(b2i(a == x))
		}
	case "!=":
		for i, a := range fs {
			out[i] = uint8(b2i(a != x))
		}
	case "<":
		for i, a := range fs {
			out[i] = uint8(b2i(a < x))
		}
	case "<=":
		for i, a := range fs {
			out[i] = uint8(b2i(a <= x))
		}
	case ">": // above x or NaN: neither below nor equal
		for i, a := range fs {
			out[i] = uint8(b2i(!(a <= x)))
		}
	case ">=": // not below x (NaN included)
		for i, a := range fs {
			out[i] = uint8(b2i(!(a < x)))
		}
	}
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scalar is one operand's value at a row.
type scalar struct {
	null bool
	t    Type
	b    bool
	i    int64
	f    float64
	s    []byte
}

func operand(n *Node, cols []Vector, row int) scalar {
	if n.Op == "lit" {
		v := n.Lit
		return scalar{null: v.Type == Null, t: v.Type, b: v.B, i: v.I, f: v.F, s: n.litBytes}
	}
	v := &cols[n.col]
	if v.Valid != nil && !v.Valid[row] {
		return scalar{null: true, t: n.typ}
	}
	switch n.typ {
	case Bool:
		return scalar{t: Bool, b: v.Bools[row]}
	case Int:
		return scalar{t: Int, i: v.Ints[row]}
	case Float:
		return scalar{t: Float, f: v.Floats[row]}
	default:
		return scalar{t: String, s: v.text(row)}
	}
}

// cmpFloat orders floats as DuckDB does: NaN equals NaN and is above every
// other value; -0 equals 0.
func cmpFloat(a, b float64) int {
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compare returns -1, 0 or 1 for two non-null comparable scalars. An
// integer meets a float as a float (DuckDB casts BIGINT to DOUBLE).
func compare(a, b scalar) int {
	switch {
	case a.t == Int && b.t == Int:
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	case a.t == Int || a.t == Float:
		x, y := a.f, b.f
		if a.t == Int {
			x = float64(a.i)
		}
		if b.t == Int {
			y = float64(b.i)
		}
		return cmpFloat(x, y)
	case a.t == Bool:
		switch {
		case a.b == b.b:
			return 0
		case !a.b:
			return -1
		}
		return 1
	}
	return bytes.Compare(a.s, b.s)
}

func holds(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

func tri(b bool) uint8 {
	if b {
		return T
	}
	return F
}

func not3(v uint8) uint8 {
	switch v {
	case T:
		return F
	case F:
		return T
	}
	return U
}

func evalRow(n *Node, cols []Vector, row int) uint8 {
	switch n.Op {
	case "and":
		a := evalRow(n.Args[0], cols, row)
		if a == F {
			return F
		}
		b := evalRow(n.Args[1], cols, row)
		switch {
		case b == F:
			return F
		case a == T && b == T:
			return T
		}
		return U
	case "or":
		a := evalRow(n.Args[0], cols, row)
		if a == T {
			return T
		}
		b := evalRow(n.Args[1], cols, row)
		switch {
		case b == T:
			return T
		case a == F && b == F:
			return F
		}
		return U
	case "not":
		return not3(evalRow(n.Args[0], cols, row))
	case "col", "lit":
		v := operand(n, cols, row)
		if v.null {
			return U
		}
		return tri(v.b)
	case "isnull":
		return tri(operand(n.Args[0], cols, row).null != n.Neg)
	case "cmp":
		a, b := operand(n.Args[0], cols, row), operand(n.Args[1], cols, row)
		if a.null || b.null {
			return U
		}
		return tri(holds(n.Cmp, compare(a, b)))
	case "between":
		x, lo, hi := operand(n.Args[0], cols, row), operand(n.Args[1], cols, row), operand(n.Args[2], cols, row)
		var ge, le uint8 = U, U
		if !x.null && !lo.null {
			ge = tri(compare(x, lo) >= 0)
		}
		if !x.null && !hi.null {
			le = tri(compare(x, hi) <= 0)
		}
		r := and3(ge, le)
		if n.Neg {
			r = not3(r)
		}
		return r
	case "in":
		x := operand(n.Args[0], cols, row)
		r := F
		for _, a := range n.Args[1:] {
			v := operand(a, cols, row)
			switch {
			case x.null || v.null:
				r = U
			case compare(x, v) == 0:
				r = T
			}
			if r == T {
				break
			}
		}
		if n.Neg {
			r = not3(r)
		}
		return r
	case "prefix":
		x := operand(n.Args[0], cols, row)
		if x.null {
			return U
		}
		r := tri(bytes.HasPrefix(x.s, []byte(n.Args[1].Lit.S)))
		if n.Neg {
			r = not3(r)
		}
		return r
	}
	panic("selection: unknown node " + n.Op)
}

func and3(a, b uint8) uint8 {
	switch {
	case a == F || b == F:
		return F
	case a == T && b == T:
		return T
	}
	return U
}
