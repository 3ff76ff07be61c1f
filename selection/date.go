package selection

import (
	"fmt"
	"regexp"
	"time"

	"github.com/prepml/prep/plan"
)

// ParseDate parses a calendar date as DuckDB casts text to DATE in a hive
// partition value or a filter literal (plan.ParsePartitionDate: Y-M-D, a
// month and a day of 1 or 2 digits, so "2026-11-1" is 2026-11-01) and
// returns it as days since 1970-01-01 (negative before); ok is false for
// any other text, including an impossible date such as 2026-02-30.
func ParseDate(s string) (days int64, ok bool) { return plan.ParsePartitionDate(s) }

// ParseTimestamp parses a timestamp without time zone as DuckDB casts
// text to TIMESTAMP (plan.ParsePartitionTimestamp: a date, alone or with
// ' ' or 'T' and H:M[:S[.ffffff]]) and returns microseconds since
// 1970-01-01 00:00:00; ok is false for any other text, a time zone
// included.
func ParseTimestamp(s string) (micros int64, ok bool) { return plan.ParsePartitionTimestamp(s) }

// FormatDate is ParseDate's inverse: days since 1970-01-01 as YYYY-MM-DD.
func FormatDate(days int64) string {
	return time.Unix(days*86400, 0).UTC().Format("2006-01-02")
}

// FormatTimestamp writes microseconds since 1970-01-01 00:00:00 as
// "YYYY-MM-DD HH:MM:SS", with ".ffffff" (trailing zeros dropped) when the
// second has a fraction, as DuckDB prints a TIMESTAMP.
func FormatTimestamp(micros int64) string {
	t := time.UnixMicro(micros).UTC()
	if micros%1e6 == 0 {
		return t.Format("2006-01-02 15:04:05")
	}
	return t.Format("2006-01-02 15:04:05.999999")
}

// DateLike reports whether s starts the way a date does (optional white
// space and sign, then digits-digits-digits): DuckDB may read such a hive
// partition value as a DATE or TIMESTAMP in forms ParseDate and
// ParseTimestamp do not take, so a key holding one is refused rather than
// inferred as TEXT (PartitionColumns).
func DateLike(s string) bool { return dateLike.MatchString(s) }

var dateLike = regexp.MustCompile(`^\s*[-+]?[0-9]+-[0-9]+-[0-9]+`)

// temporal reports whether t is DATE or TIMESTAMP.
func temporal(t Type) bool { return t == Date || t == Timestamp }

// coerceDate checks a comparison (op) of a and b of which one is DATE or
// TIMESTAMP. A DATE meets a DATE, or a text literal holding a date
// (ParseDate), which becomes a DATE literal. A TIMESTAMP meets a
// TIMESTAMP, a DATE literal (its midnight, as DuckDB casts DATE to
// TIMESTAMP), or a text literal holding a date or a timestamp
// (ParseTimestamp), which becomes a TIMESTAMP literal.
func coerceDate(text string, op, a, b *Node) error {
	if !temporal(a.typ) {
		a, b = b, a
	}
	switch {
	case b.typ == a.typ:
		return nil
	case a.typ == Timestamp && b.Op == "lit" && b.typ == Date:
		b.Lit, b.typ = Value{Type: Timestamp, I: b.Lit.I * 86400e6}, Timestamp
		return nil
	case a.typ == Date && b.Op == "lit" && b.typ == String:
		d, ok := ParseDate(b.Lit.S)
		if !ok {
			return &Error{Filter: text, Pos: b.Pos, Token: b.Raw, Msg: fmt.Sprintf("not a date: %s is compared with %s, so it must be a date written 'YYYY-MM-DD'", b.Raw, describeNode(a))}
		}
		b.Lit, b.typ = Value{Type: Date, I: d}, Date
		return nil
	case a.typ == Timestamp && b.Op == "lit" && b.typ == String:
		us, ok := ParseTimestamp(b.Lit.S)
		if !ok {
			return &Error{Filter: text, Pos: b.Pos, Token: b.Raw, Msg: fmt.Sprintf("not a timestamp: %s is compared with %s, so it must be written 'YYYY-MM-DD HH:MM[:SS[.ffffff]]' (or a date: its midnight), without a time zone", b.Raw, describeNode(a))}
		}
		b.Lit, b.typ = Value{Type: Timestamp, I: us}, Timestamp
		return nil
	}
	if a.typ == Timestamp {
		return &Error{Filter: text, Pos: op.Pos, Token: op.Raw, Msg: fmt.Sprintf("type mismatch: %s, %s (a TIMESTAMP compares with a TIMESTAMP, a DATE literal or a 'YYYY-MM-DD HH:MM:SS' literal)", describeNode(a), describeNode(b))}
	}
	return &Error{Filter: text, Pos: op.Pos, Token: op.Raw, Msg: fmt.Sprintf("type mismatch: %s, %s (a DATE compares with a DATE or a 'YYYY-MM-DD' literal)", describeNode(a), describeNode(b))}
}

func describeNode(n *Node) string {
	if n.Op == "col" {
		return fmt.Sprintf("column %s is %s", n.Col, n.typ)
	}
	if l, ok := parseNum(n.Raw); ok && n.Op == "lit" {
		// A number literal by its SQL type (SELECTION.md "Numbers").
		switch l.kind {
		case numDecimal:
			return fmt.Sprintf("%s is DECIMAL(%d,%d)", n.Raw, l.width, l.scale)
		case numDouble:
			return fmt.Sprintf("%s is DOUBLE", n.Raw)
		}
	}
	return fmt.Sprintf("%s is %s", n.Raw, n.typ)
}

// lowerDates turns the checked tree's DATE and TIMESTAMP operands into
// INTEGER ones (a date is its day number, a timestamp its microseconds),
// so that evaluation and statistics pruning compare them as integers.
func lowerDates(n *Node) {
	if temporal(n.typ) {
		n.typ = Int
		if n.Op == "lit" {
			n.Lit.Type = Int
		}
	}
	for _, a := range n.Args {
		lowerDates(a)
	}
}
