package selection

import (
	"fmt"
	"time"
)

// ParseDate parses a calendar date written YYYY-MM-DD (ISO 8601's extended
// calendar date, years 0000 to 9999, proleptic Gregorian calendar) and
// returns it as days since 1970-01-01 (negative before). ok is false for
// any other text, including an impossible date such as 2026-02-30.
func ParseDate(s string) (days int64, ok bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return 0, false
	}
	return t.Unix() / 86400, true // UTC midnight: a whole number of days
}

// FormatDate is ParseDate's inverse: days since 1970-01-01 as YYYY-MM-DD.
func FormatDate(days int64) string {
	return time.Unix(days*86400, 0).UTC().Format("2006-01-02")
}

// coerceDate checks a comparison (op) of a and b of which one is DATE:
// the other must be DATE, or a text literal holding a YYYY-MM-DD date,
// which becomes a DATE literal.
func coerceDate(text string, op, a, b *Node) error {
	if a.typ != Date {
		a, b = b, a
	}
	switch {
	case b.typ == Date:
		return nil
	case b.Op == "lit" && b.typ == String:
		d, ok := ParseDate(b.Lit.S)
		if !ok {
			return &Error{Filter: text, Pos: b.Pos, Token: b.Raw, Msg: fmt.Sprintf("not a date: %s is compared with %s, so it must be a date written 'YYYY-MM-DD'", b.Raw, describeNode(a))}
		}
		b.Lit, b.typ = Value{Type: Date, I: d}, Date
		return nil
	}
	return &Error{Filter: text, Pos: op.Pos, Token: op.Raw, Msg: fmt.Sprintf("type mismatch: %s, %s (a DATE compares with a DATE or a 'YYYY-MM-DD' literal)", describeNode(a), describeNode(b))}
}

func describeNode(n *Node) string {
	if n.Op == "col" {
		return fmt.Sprintf("column %s is %s", n.Col, n.typ)
	}
	return fmt.Sprintf("%s is %s", n.Raw, n.typ)
}

// lowerDates turns the checked tree's DATE operands into INTEGER ones (a
// date is its day number), so that evaluation and statistics pruning
// compare days as integers.
func lowerDates(n *Node) {
	if n.typ == Date {
		n.typ = Int
		if n.Op == "lit" {
			n.Lit.Type = Int
		}
	}
	for _, a := range n.Args {
		lowerDates(a)
	}
}
