package selection

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Numbers in a filter are typed as DuckDB (1.5, the reference reader of
// TestSelectMatchesDuckDB) types them, by their spelling (SELECTION.md
// "Numbers"): an integer is INTEGER, BIGINT, HUGEINT or UHUGEINT by its
// value; a number with a point and at most 38 digits is DECIMAL(digits,
// digits after the point); one with an exponent, more digits or a larger
// integer is DOUBLE. A comparison (=, <>, <, <=, >, >=, IN, BETWEEN) is made
// in the widest type of its operands (DuckDB's LogicalType::MaxLogicalType):
// DOUBLE when one is a DOUBLE column or literal, else FLOAT when one is a
// FLOAT (32-bit) column, else exactly (integer columns, integers and
// decimals). coerceNumbers rewrites each comparison into that type once,
// after type checking, so that evaluation and pruning compare doubles or
// int64s as before.

// numKind is a numeric literal's DuckDB type family.
type numKind int

const (
	numInteger numKind = iota + 1 // INTEGER, BIGINT, HUGEINT or UHUGEINT
	numDecimal                    // DECIMAL(width, scale)
	numDouble                     // DOUBLE
)

// numLit is a numeric literal as written.
type numLit struct {
	kind     numKind
	unscaled *big.Int // numInteger: the value; numDecimal: value × 10^scale
	width    int      // numDecimal: digits written, leading zeros included
	scale    int      // numDecimal: digits after the point
	f        float64  // numDouble: the value, correctly rounded
}

// maxDecimalWidth is DuckDB's widest DECIMAL (38 digits): a literal with
// more digits is a DOUBLE.
const maxDecimalWidth = 38

var (
	two64    = new(big.Int).Lsh(big.NewInt(1), 64)
	mask64   = new(big.Int).Sub(two64, big.NewInt(1))
	minHuge  = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 127))                // HUGEINT's least value, -2^127
	maxHuge  = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 127), big.NewInt(1)) // 2^127-1
	maxUHuge = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1)) // UHUGEINT's largest, 2^128-1
)

// parseNum classifies a number token (an optional sign, digits with at
// most one point, an optional exponent); ok is false when it is not a
// number.
func parseNum(text string) (*numLit, bool) {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, false
	}
	if strings.ContainsAny(text, "eE") {
		return &numLit{kind: numDouble, f: f}, true
	}
	digits := strings.TrimLeft(text, "+-")
	ip, fp, dec := strings.Cut(digits, ".")
	n, ok := new(big.Int).SetString(strings.TrimPrefix(text[:len(text)-len(digits)], "+")+ip+fp, 10)
	if !ok {
		return nil, false
	}
	switch {
	case dec && len(ip)+len(fp) > maxDecimalWidth,
		!dec && (n.Cmp(minHuge) < 0 || n.Cmp(maxUHuge) > 0):
		return &numLit{kind: numDouble, f: f}, true
	case dec:
		return &numLit{kind: numDecimal, unscaled: n, width: len(ip) + len(fp), scale: len(fp)}, true
	}
	return &numLit{kind: numInteger, unscaled: n}, true
}

// exact is the value of an integer or decimal literal.
func (l *numLit) exact() *big.Rat {
	r := new(big.Rat).SetInt(l.unscaled)
	if l.kind == numDecimal {
		r.Quo(r, new(big.Rat).SetInt(pow10(l.scale)))
	}
	return r
}

func pow10(s int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(s)), nil)
}

// pow10d is the double nearest 10^s, as DuckDB's table of them
// (NumericHelper::DOUBLE_POWERS_OF_TEN) holds it.
func pow10d(s int) float64 {
	f, _ := strconv.ParseFloat("1e"+strconv.Itoa(s), 64)
	return f
}

// hugeToDouble is DuckDB 1.5's cast of an integer beyond int64 to DOUBLE
// (Hugeint::TryCast through CastBigintToFloating, and for 2^127 and above
// Uhugeint::TryCast through CastUhugeintToFloating, src/common/types/
// hugeint.cpp and uhugeint.cpp): its two 64-bit halves converted apart and
// added, lower + upper·2^64 (−(2^64−1−lower) − 1 for an upper half of −1),
// which can round twice.
func hugeToDouble(n *big.Int) float64 {
	lower := new(big.Int).And(n, mask64).Uint64() // two's complement
	upper := new(big.Int).Rsh(n, 64)              // arithmetic shift
	if n.Cmp(maxHuge) > 0 {                       // UHUGEINT
		return float64(float64(lower) + float64(upper.Uint64())*float64(1<<64))
	}
	u := upper.Int64()
	if u == -1 {
		return float64(-float64(^uint64(0)-lower) - 1)
	}
	return float64(float64(lower) + float64(u)*float64(1<<64))
}

// integerToDouble and integerToFloat are DuckDB's casts of an integer
// literal: static_cast for an int64 (one correct rounding), hugeToDouble
// (then to float) beyond.
func integerToDouble(n *big.Int) float64 {
	if n.IsInt64() {
		return float64(n.Int64())
	}
	return hugeToDouble(n)
}

func integerToFloat(n *big.Int) float32 {
	if n.IsInt64() {
		return float32(n.Int64())
	}
	return float32(hugeToDouble(n))
}

// decimalToDouble is DuckDB 1.5's cast of DECIMAL(width, scale) to DOUBLE
// (TryCastDecimalToFloatingPoint, src/common/operator/cast_operators.cpp):
// the unscaled value over 10^scale when the unscaled value is exact in a
// double (or the scale is 0), else the integer part plus the remainder
// over 10^scale, each part converted on its own. Not always the nearest
// double.
func decimalToDouble(n *big.Int, width, scale int) float64 {
	conv := func(v *big.Int) float64 {
		if width <= 18 {
			return float64(v.Int64())
		}
		return hugeToDouble(v)
	}
	p := pow10d(scale)
	// Stored in an int16 or int32 (width <= 9), the unscaled value is
	// always exact in a double (IsRepresentableExactly).
	if scale == 0 || width <= 9 || n.CmpAbs(big.NewInt(1<<53)) <= 0 {
		return float64(conv(n) / p)
	}
	div, mod := new(big.Int).QuoRem(n, pow10(scale), new(big.Int))
	q := float64(conv(mod) / p)
	return float64(conv(div) + q)
}

// decimalToFloat is the same cast to FLOAT: in float32 arithmetic, the
// fast path while the unscaled value is at most 2^24 (or stored in an
// int16), an int128's parts going through a double first.
func decimalToFloat(n *big.Int, width, scale int) float32 {
	conv := func(v *big.Int) float32 {
		if width <= 18 {
			return float32(v.Int64())
		}
		return float32(hugeToDouble(v))
	}
	p := float32(pow10d(scale))
	// Stored in an int16 (width <= 4), the fast path is always taken.
	if scale == 0 || width <= 4 || n.CmpAbs(big.NewInt(1<<24)) <= 0 {
		return float32(conv(n) / p)
	}
	div, mod := new(big.Int).QuoRem(n, pow10(scale), new(big.Int))
	q := float32(conv(mod) / p)
	return float32(conv(div) + q)
}

// asDouble is the literal cast to DOUBLE as DuckDB casts it. An integer
// beyond int64 or a decimal that DuckDB 1.5 does not cast to the nearest
// double (see decimalToDouble) is refused (ok false, with the two values
// for the message): later DuckDB versions round it correctly, so either
// answer would disagree with one of them.
func (l *numLit) asDouble() (v float64, nearest float64, ok bool) {
	switch l.kind {
	case numDouble:
		return l.f, l.f, true
	case numInteger:
		v = integerToDouble(l.unscaled)
	default:
		v = decimalToDouble(l.unscaled, l.width, l.scale)
	}
	nearest, _ = l.exact().Float64()
	return v, nearest, v == nearest
}

// asFloat is the literal cast to FLOAT as DuckDB casts it (an integer
// beyond float32's range is +Inf or -Inf there too); refused like asDouble
// when that is not the nearest float32.
func (l *numLit) asFloat() (v float32, nearest float32, ok bool) {
	switch l.kind {
	case numInteger:
		v = integerToFloat(l.unscaled)
	case numDecimal:
		v = decimalToFloat(l.unscaled, l.width, l.scale)
	default:
		panic("selection: a DOUBLE literal in a FLOAT comparison")
	}
	nearest, _ = l.exact().Float32()
	return v, nearest, v == nearest
}

// numDomain is the type a comparison of numbers is made in.
type numDomain int

const (
	domNone   numDomain = iota // not a comparison of numbers
	domExact                   // integers and decimals, exactly
	domFloat                   // FLOAT (32-bit)
	domDouble                  // DOUBLE
)

// SQLType is a column's type as DuckDB names it where the filter types
// differ from DuckDB's (FLOAT for a 32-bit float column, DOUBLE for a
// 64-bit one), else its filter type (Type.String).
func SQLType(c Column) string {
	if c.Type == Float && !c.Float32 {
		return "DOUBLE"
	}
	return c.Type.String()
}

// domainOf is the type DuckDB compares ops (a comparison's operands) in;
// a comparison of an INTEGER column with a FLOAT column is refused.
func domainOf(text string, at *Node, ops []*Node, cols []Column) (numDomain, error) {
	var dbl, f32, exact bool
	var intCol, f32Col *Node
	for _, o := range ops {
		switch {
		case o.typ == Null:
			continue
		case o.typ != Int && o.typ != Float:
			return domNone, nil
		case o.Op == "col" && o.typ == Int:
			exact, intCol = true, o
		case o.Op == "col" && cols[o.col].Float32:
			f32, f32Col = true, o
		case o.Op == "col":
			dbl = true
		case o.num != nil && o.num.kind == numDouble:
			dbl = true
		default:
			exact = true
		}
	}
	switch {
	case dbl:
		return domDouble, nil
	case f32 && intCol != nil:
		return domNone, &Error{Filter: text, Pos: at.Pos, Token: at.Raw, Msg: fmt.Sprintf(
			"comparing INTEGER column %s with FLOAT (32-bit) column %s is not supported: DuckDB rounds the integers to FLOAT first", intCol.Col, f32Col.Col)}
	case f32:
		return domFloat, nil
	case exact:
		return domExact, nil
	}
	return domNone, nil
}

// coerceNumbers rewrites every comparison of numbers under n into the
// type DuckDB makes it in (see above): in DOUBLE, each literal becomes
// DuckDB's DOUBLE for it (evaluation then compares an integer column as a
// double, as DuckDB casts it); in FLOAT, each literal becomes DuckDB's
// float32 for it, widened (exact, so comparing doubles is comparing
// floats); exactly, a comparison of an integer column with a decimal or an
// integer beyond int64 becomes one with an int64 bound (x > 1.5 is
// x >= 2, x = 1.5 never holds, x <> 1.5 holds for every non-null x),
// BETWEEN becomes its two comparisons, IN keeps its integral values only,
// and a comparison of literals alone is computed. cols are the filter's
// columns (Filter.Columns). Errors point at the literal DuckDB casts
// differently from the nearest value, or at the comparison refused.
func coerceNumbers(text string, n *Node, cols []Column) error {
	switch n.Op {
	case "and", "or", "not":
		for _, a := range n.Args {
			if err := coerceNumbers(text, a, cols); err != nil {
				return err
			}
		}
		return nil
	case "cmp", "in", "between":
	default:
		return nil
	}
	dom, err := domainOf(text, n, n.Args, cols)
	if err != nil {
		return err
	}
	switch dom {
	case domDouble, domFloat:
		for _, a := range n.Args {
			if a.Op != "lit" || a.num == nil {
				continue
			}
			if dom == domDouble {
				v, near, ok := a.num.asDouble()
				if !ok {
					return &Error{Filter: text, Pos: a.Pos, Token: a.Raw, Msg: fmt.Sprintf(
						"%s has more digits than a DOUBLE holds, and DuckDB rounds it to %v, not to the nearest DOUBLE %v: write it with fewer digits", a.Raw, v, near)}
				}
				a.Lit = Value{Type: Float, F: v}
				a.typ = Float
				continue
			}
			v, near, ok := a.num.asFloat()
			if !ok {
				return &Error{Filter: text, Pos: a.Pos, Token: a.Raw, Msg: fmt.Sprintf(
					"%s is compared with a FLOAT (32-bit) column and has more digits than a FLOAT holds: DuckDB rounds it to %v, not to the nearest FLOAT %v: write it with fewer digits", a.Raw, v, near)}
			}
			a.Lit = Value{Type: Float, F: float64(v)}
			a.typ = Float
		}
	case domExact:
		coerceExact(n)
	}
	return nil
}

// ratOf is an exact comparison's literal operand as a rational (nil for
// NULL).
func ratOf(a *Node) *big.Rat {
	switch {
	case a.Lit.Type == Null:
		return nil
	case a.num != nil:
		return a.num.exact()
	}
	return new(big.Rat).SetInt64(a.Lit.I)
}

// plainInt reports whether a is not a literal, NULL, or an integer literal
// that fits an int64: already compared exactly.
func plainInt(a *Node) bool {
	return a.Op != "lit" || a.Lit.Type == Null || a.Lit.Type == Int
}

// coerceExact rewrites a comparison (n: cmp, in or between) of integer
// columns, integers and decimals into comparisons with int64 literals, or
// computes it when it has no column.
func coerceExact(n *Node) {
	hasCol, plain := false, true
	for _, a := range n.Args {
		hasCol = hasCol || a.Op == "col"
		plain = plain && plainInt(a)
	}
	if plain && hasCol {
		return // int64 comparisons: exact already
	}
	switch n.Op {
	case "between":
		x, lo, hi := n.Args[0], n.Args[1], n.Args[2]
		ge := &Node{Op: "cmp", Cmp: ">=", Args: []*Node{x, lo}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
		le := &Node{Op: "cmp", Cmp: "<=", Args: []*Node{x, hi}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
		coerceExact(ge)
		coerceExact(le)
		and := &Node{Op: "and", Args: []*Node{ge, le}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
		if n.Neg {
			*n = Node{Op: "not", Args: []*Node{and}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
		} else {
			*n = *and
		}
	case "cmp":
		a, b := n.Args[0], n.Args[1]
		if a.Op == "lit" && b.Op == "lit" {
			ra, rb := ratOf(a), ratOf(b)
			if ra != nil && rb != nil {
				setBool(n, holds(n.Cmp, ra.Cmp(rb)))
			}
			return
		}
		if a.Op == "lit" { // L op x is x op' L
			a, b = b, a
			n.Cmp = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}[n.Cmp]
			n.Args = []*Node{a, b}
		}
		if b.Op == "lit" && b.Lit.Type != Null {
			boundInt(n, a, n.Cmp, ratOf(b), b)
		}
	case "in":
		x := n.Args[0]
		if x.Op == "lit" {
			rx := ratOf(x)
			if rx == nil {
				return // NULL IN (...) is NULL
			}
			r := F
			for _, a := range n.Args[1:] {
				if ra := ratOf(a); ra == nil {
					r = U
				} else if ra.Cmp(rx) == 0 {
					r = T
					break
				}
			}
			if n.Neg {
				r = not3(r)
			}
			if r == U {
				*n = Node{Op: "lit", Lit: Value{Type: Null}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
			} else {
				setBool(n, r == T)
			}
			return
		}
		keep := []*Node{x}
		for _, a := range n.Args[1:] {
			r := ratOf(a)
			switch {
			case r == nil:
				keep = append(keep, a)
			case r.IsInt() && r.Num().IsInt64():
				keep = append(keep, &Node{Op: "lit", Lit: Value{Type: Int, I: r.Num().Int64()}, Pos: a.Pos, Raw: a.Raw, typ: Int})
			}
		}
		if len(keep) == 1 { // no value x can equal: FALSE (NOT IN: TRUE) for every non-null x
			never := !n.Neg
			setCmp(n, x, !never)
			return
		}
		n.Args = keep
	}
}

// setBool makes n the literal b.
func setBool(n *Node, b bool) {
	*n = Node{Op: "lit", Lit: Value{Type: Bool, B: b}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
}

// setCmp makes n a comparison of integer column x that is TRUE for every
// non-null x (always) or for none (FALSE), NULL for a null x: x >= MinInt64
// or x < MinInt64.
func setCmp(n, x *Node, always bool) {
	op := "<"
	if always {
		op = ">="
	}
	lit := &Node{Op: "lit", Lit: Value{Type: Int, I: math.MinInt64}, Pos: n.Pos, Raw: n.Raw, typ: Int}
	*n = Node{Op: "cmp", Cmp: op, Args: []*Node{x, lit}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
}

// boundInt rewrites n, integer column x op the exact value r (written as
// lit), as x compared with an int64: x < r is x <= ceil(r)-1, x <= r is
// x <= floor(r), x > r is x >= floor(r)+1, x >= r is x >= ceil(r); = a
// non-integer or one beyond int64 never holds, <> always; a bound beyond
// int64 makes the comparison always or never hold.
func boundInt(n, x *Node, op string, r *big.Rat, lit *Node) {
	if r.IsInt() && r.Num().IsInt64() {
		*n = Node{Op: "cmp", Cmp: op, Args: []*Node{x, {Op: "lit", Lit: Value{Type: Int, I: r.Num().Int64()}, Pos: lit.Pos, Raw: lit.Raw, typ: Int}}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
		return
	}
	floor := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: the floor, as Denom > 0
	ceil := new(big.Int).Neg(new(big.Int).Div(new(big.Int).Neg(r.Num()), r.Denom()))
	one := big.NewInt(1)
	var le bool
	var b *big.Int
	switch op {
	case "=":
		setCmp(n, x, false)
		return
	case "!=":
		setCmp(n, x, true)
		return
	case "<":
		le, b = true, ceil.Sub(ceil, one)
	case "<=":
		le, b = true, floor
	case ">":
		b = floor.Add(floor, one)
	default: // >=
		b = ceil
	}
	minI, maxI := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	switch {
	case le && b.Cmp(maxI) >= 0, !le && b.Cmp(minI) <= 0:
		setCmp(n, x, true)
	case le && b.Cmp(minI) < 0, !le && b.Cmp(maxI) > 0:
		setCmp(n, x, false)
	default:
		op = ">="
		if le {
			op = "<="
		}
		*n = Node{Op: "cmp", Cmp: op, Args: []*Node{x, {Op: "lit", Lit: Value{Type: Int, I: b.Int64()}, Pos: lit.Pos, Raw: lit.Raw, typ: Int}}, Pos: n.Pos, Raw: n.Raw, typ: Bool}
	}
}
