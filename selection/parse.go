// Package selection is the row filter language of prep's sources file
// (SELECTION.md): a SQL WHERE-style predicate over a source's columns,
// parsed, type-checked against the columns' types and evaluated with SQL
// three-valued logic over column vectors. A row is selected when the
// predicate is TRUE; FALSE and NULL (unknown) rows are left out, as SQL's
// WHERE does. It also discovers a hive-partitioned source (Hive: its
// key=value layout typed, pruned by a filter before any footer is read,
// and checked for partition key conflicts), as the partition columns are
// filter columns.
package selection

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrFilter is wrapped by every error about a filter's text or types.
var ErrFilter = errors.New("bad filter")

// Error is a filter error pointing at the offending token: Pos is its byte
// offset in the filter text (0-based), Token its text ("" at the end).
type Error struct {
	Filter string
	Pos    int
	Token  string
	Msg    string
}

// Error renders the message, the token and a caret line under the filter.
func (e *Error) Error() string {
	tok := e.Token
	if tok == "" {
		tok = "end of filter"
	} else {
		tok = strconv.Quote(tok)
	}
	return fmt.Sprintf("%s at %s (offset %d):\n    %s\n    %s^", e.Msg, tok, e.Pos, e.Filter, strings.Repeat(" ", e.Pos))
}

// Unwrap returns ErrFilter.
func (e *Error) Unwrap() error { return ErrFilter }

type tokKind int

const (
	tEOF tokKind = iota
	tIdent
	tQuoted // "column name"
	tString // 'text'
	tNumber
	tOp // = != <> < <= > >=
	tLParen
	tRParen
	tComma
)

type token struct {
	kind tokKind
	text string // identifier, keyword (upper-cased in kw), literal value, operator
	raw  string // as written
	pos  int
	kw   string // upper-case text for identifiers, to match keywords
}

func lex(src string) ([]token, error) {
	var out []token
	i := 0
	bad := func(pos int, tok, msg string) error {
		return &Error{Filter: src, Pos: pos, Token: tok, Msg: msg}
	}
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			out = append(out, token{kind: tLParen, raw: "(", pos: i})
			i++
		case c == ')':
			out = append(out, token{kind: tRParen, raw: ")", pos: i})
			i++
		case c == ',':
			out = append(out, token{kind: tComma, raw: ",", pos: i})
			i++
		case c == '=' || c == '<' || c == '>' || c == '!':
			j := i + 1
			if j < len(src) && (src[j] == '=' || c == '<' && src[j] == '>') {
				j++
			}
			op := src[i:j]
			if op == "!" {
				return nil, bad(i, op, "unknown operator (use != or NOT)")
			}
			if op == "<>" {
				op = "!="
			}
			out = append(out, token{kind: tOp, text: op, raw: src[i:j], pos: i})
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			var b strings.Builder
			for {
				if j >= len(src) {
					return nil, bad(i, src[i:], "unterminated quoted text")
				}
				if src[j] == c {
					if j+1 < len(src) && src[j+1] == c { // doubled quote
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			k := tString
			if c == '"' {
				k = tQuoted
			}
			out = append(out, token{kind: k, text: b.String(), raw: src[i : j+1], pos: i})
			i = j + 1
		case c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+':
			j := i
			if c == '-' || c == '+' {
				j++
			}
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == '.' || src[j] == 'e' || src[j] == 'E' ||
				(src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E')) {
				j++
			}
			if j == i || (j == i+1 && (c == '-' || c == '+')) {
				return nil, bad(i, src[i:i+1], "unexpected character")
			}
			out = append(out, token{kind: tNumber, text: src[i:j], raw: src[i:j], pos: i})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(src) && (src[j] == '_' || src[j] == '.' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, token{kind: tIdent, text: src[i:j], raw: src[i:j], pos: i, kw: strings.ToUpper(src[i:j])})
			i = j
		default:
			return nil, bad(i, src[i:i+1], "unexpected character")
		}
	}
	out = append(out, token{kind: tEOF, pos: len(src)})
	return out, nil
}

// Node is a parsed filter expression.
type Node struct {
	Op   string  // "and", "or", "not", "cmp", "in", "between", "isnull", "prefix", "col", "lit"
	Cmp  string  // for cmp: = != < <= > >=
	Neg  bool    // NOT IN, NOT BETWEEN, IS NOT NULL, NOT LIKE
	Args []*Node // operands
	Col  string  // for col: the column name
	Lit  Value   // for lit
	Pos  int     // where the node's first token starts
	Raw  string  // its first token as written
	typ  Type    // set by Check
	col  int     // column index in Filter.Columns, for col
	// litBytes is a text literal's bytes, set by Compile.
	litBytes []byte
	// num is a numeric literal as written (its DuckDB type and exact
	// value), set by Parse; nil for any other node.
	num *numLit
}

var keywords = map[string]bool{"AND": true, "OR": true, "NOT": true, "IN": true, "BETWEEN": true, "IS": true, "NULL": true, "LIKE": true, "TRUE": true, "FALSE": true}

type parser struct {
	src  string
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) isKW(kw string) bool {
	t := p.peek()
	return t.kind == tIdent && t.kw == kw
}
func (p *parser) errAt(t token, format string, args ...any) error {
	return &Error{Filter: p.src, Pos: t.pos, Token: t.raw, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses a filter's text. The grammar (SELECTION.md): OR, AND, NOT
// (lowest to highest precedence), parentheses, comparisons = != <> < <= >
// >= between a column and a literal or two columns, x [NOT] IN (lit, ...),
// x [NOT] BETWEEN a AND b, x IS [NOT] NULL, x [NOT] LIKE 'prefix%', a
// boolean column alone, and the literals: integers, decimals, 'text'
// (quotes doubled inside), DATE 'YYYY-MM-DD', TRUE, FALSE, NULL. Column names are
// identifiers ([A-Za-z_][A-Za-z0-9_.]*) or "quoted". Keywords are case
// insensitive. Errors are *Error values pointing at the offending token.
func Parse(src string) (*Node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{src: src, toks: toks}
	if p.peek().kind == tEOF {
		return nil, p.errAt(p.peek(), "empty filter")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.errAt(t, "expected AND, OR or the end of the filter")
	}
	return n, nil
}

func (p *parser) or() (*Node, error) {
	l, err := p.and()
	for err == nil && p.isKW("OR") {
		t := p.next()
		var r *Node
		if r, err = p.and(); err == nil {
			l = &Node{Op: "or", Args: []*Node{l, r}, Pos: t.pos, Raw: t.raw}
		}
	}
	return l, err
}

func (p *parser) and() (*Node, error) {
	l, err := p.not()
	for err == nil && p.isKW("AND") {
		t := p.next()
		var r *Node
		if r, err = p.not(); err == nil {
			l = &Node{Op: "and", Args: []*Node{l, r}, Pos: t.pos, Raw: t.raw}
		}
	}
	return l, err
}

func (p *parser) not() (*Node, error) {
	if p.isKW("NOT") {
		t := p.next()
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &Node{Op: "not", Args: []*Node{x}, Pos: t.pos, Raw: t.raw}, nil
	}
	return p.pred()
}

func (p *parser) pred() (*Node, error) {
	if p.peek().kind == tLParen {
		p.next()
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tRParen {
			return nil, p.errAt(t, "expected )")
		}
		return n, nil
	}
	x, err := p.operand()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case t.kind == tOp:
		p.next()
		y, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &Node{Op: "cmp", Cmp: t.text, Args: []*Node{x, y}, Pos: t.pos, Raw: t.raw}, nil
	case p.isKW("IS"):
		p.next()
		neg := false
		if p.isKW("NOT") {
			p.next()
			neg = true
		}
		if !p.isKW("NULL") {
			return nil, p.errAt(p.peek(), "expected NULL after IS")
		}
		p.next()
		return &Node{Op: "isnull", Neg: neg, Args: []*Node{x}, Pos: t.pos, Raw: t.raw}, nil
	}
	neg := false
	if p.isKW("NOT") {
		p.next()
		neg = true
	}
	t = p.peek()
	switch {
	case p.isKW("IN"):
		p.next()
		if o := p.next(); o.kind != tLParen {
			return nil, p.errAt(o, "expected ( after IN")
		}
		n := &Node{Op: "in", Neg: neg, Args: []*Node{x}, Pos: t.pos, Raw: t.raw}
		for {
			v, err := p.operand()
			if err != nil {
				return nil, err
			}
			if v.Op != "lit" {
				return nil, p.errAt(p.toks[p.i-1], "IN takes a list of literals")
			}
			n.Args = append(n.Args, v)
			c := p.next()
			if c.kind == tRParen {
				return n, nil
			}
			if c.kind != tComma {
				return nil, p.errAt(c, "expected , or ) in the IN list")
			}
		}
	case p.isKW("BETWEEN"):
		p.next()
		lo, err := p.operand()
		if err != nil {
			return nil, err
		}
		if !p.isKW("AND") {
			return nil, p.errAt(p.peek(), "expected AND in BETWEEN")
		}
		p.next()
		hi, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &Node{Op: "between", Neg: neg, Args: []*Node{x, lo, hi}, Pos: t.pos, Raw: t.raw}, nil
	case p.isKW("LIKE"):
		p.next()
		s := p.next()
		if s.kind != tString {
			return nil, p.errAt(s, "LIKE takes a 'text' pattern")
		}
		pre, ok := strings.CutSuffix(s.text, "%")
		if strings.ContainsAny(pre, "%_") {
			return nil, p.errAt(s, "%s", "only prefix patterns are supported: 'abc%' (or a pattern without wildcards); % and _ may appear only as that one trailing %")
		}
		n := &Node{Op: "prefix", Neg: neg, Args: []*Node{x, {Op: "lit", Lit: Value{Type: String, S: pre}, Pos: s.pos, Raw: s.raw}}, Pos: t.pos, Raw: t.raw}
		if !ok { // no wildcard: equality
			n = &Node{Op: "cmp", Cmp: "=", Args: n.Args, Pos: t.pos, Raw: t.raw}
			if neg {
				n.Cmp = "!="
			}
		}
		return n, nil
	}
	if neg {
		return nil, p.errAt(t, "expected IN, BETWEEN or LIKE after NOT")
	}
	// A lone operand: a boolean column or literal.
	return x, nil
}

func (p *parser) operand() (*Node, error) {
	t := p.next()
	switch t.kind {
	case tQuoted:
		return &Node{Op: "col", Col: t.text, Pos: t.pos, Raw: t.raw}, nil
	case tString:
		return &Node{Op: "lit", Lit: Value{Type: String, S: t.text}, Pos: t.pos, Raw: t.raw}, nil
	case tNumber:
		num, ok := parseNum(t.text)
		if !ok {
			return nil, p.errAt(t, "not a number")
		}
		if v, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return &Node{Op: "lit", Lit: Value{Type: Int, I: v}, Pos: t.pos, Raw: t.raw, num: num}, nil
		}
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, p.errAt(t, "not a number")
		}
		return &Node{Op: "lit", Lit: Value{Type: Float, F: v}, Pos: t.pos, Raw: t.raw, num: num}, nil
	case tIdent:
		switch t.kw {
		case "TRUE", "FALSE":
			return &Node{Op: "lit", Lit: Value{Type: Bool, B: t.kw == "TRUE"}, Pos: t.pos, Raw: t.raw}, nil
		case "NULL":
			return &Node{Op: "lit", Lit: Value{Type: Null}, Pos: t.pos, Raw: t.raw}, nil
		case "DATE":
			// DATE 'YYYY-MM-DD' is a date literal; date alone a column.
			if s := p.peek(); s.kind == tString {
				p.next()
				d, ok := ParseDate(s.text)
				if !ok {
					return nil, p.errAt(s, "not a date: DATE takes 'YYYY-MM-DD'")
				}
				return &Node{Op: "lit", Lit: Value{Type: Date, I: d}, Pos: t.pos, Raw: t.raw + " " + s.raw}, nil
			}
		}
		if keywords[t.kw] {
			return nil, p.errAt(t, "expected a column or a value, not the keyword %s", t.kw)
		}
		return &Node{Op: "col", Col: t.text, Pos: t.pos, Raw: t.raw}, nil
	case tEOF:
		return nil, p.errAt(t, "the filter ends where a column or a value was expected")
	}
	return nil, p.errAt(t, "expected a column or a value")
}
