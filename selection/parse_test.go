package selection

import (
	"errors"
	"math"
	"strings"
	"testing"
)

var testColumns = []Column{
	{Name: "lang", Type: String}, {Name: "quality", Type: Float}, {Name: "n", Type: Int},
	{Name: "flag", Type: Bool}, {Name: "tags", Unsupported: "a list or map column holds several values per row"},
}

// TestCompileErrors: every bad filter is refused with the offending token
// and its offset.
func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		filter string
		pos    int
		token  string
		msg    string
	}{
		{"langg = 'en'", 0, "langg", "unknown column langg (the source has: flag, lang, n, quality, tags)"},
		{"lang = 'en' AND quality >= 'high'", 24, ">=", "type mismatch: column quality is FLOAT, 'high' is TEXT"},
		{"n = TRUE", 2, "=", "type mismatch: column n is INTEGER, TRUE is BOOLEAN"},
		{"lang > 4.5", 5, ">", "type mismatch: column lang is TEXT, 4.5 is DECIMAL(2,1)"},
		{"lang > 45e-1", 5, ">", "type mismatch: column lang is TEXT, 45e-1 is DOUBLE"},
		{"lang > 45", 5, ">", "type mismatch: column lang is TEXT, 45 is INTEGER"},
		{"lang LIKE 'a%b%'", 10, "'a%b%'", "only prefix patterns"},
		{"quality LIKE 'a%'", 8, "LIKE", "LIKE needs text: column quality is FLOAT"},
		{"lang = 'en' AND", 15, "", "the filter ends where a column or a value was expected"},
		{"lang = 'en' quality", 12, "quality", "expected AND, OR or the end"},
		{"lang = 'en", 7, "'en", "unterminated quoted text"},
		{"n IN (1, n)", 9, "n", "IN takes a list of literals"},
		{"n IN (1, 'x')", 9, "'x'", "type mismatch"},
		{"n BETWEEN 1 OR 2", 12, "OR", "expected AND in BETWEEN"},
		{"lang IS 'x'", 8, "'x'", "expected NULL after IS"},
		{"tags = 'a'", 0, "tags", "column tags cannot be used in a filter: a list"},
		{"n", 0, "n", "a filter must be a condition: column n is INTEGER"},
		{"n AND flag", 0, "n", "AND needs a condition"},
		{"lang ! 'x'", 5, "!", "unknown operator"},
		{"", 0, "", "empty filter"},
		{"(n = 1", 6, "", "expected )"},
		{"lang = 'en' AND AND", 16, "AND", "not the keyword AND"},
		{"n NOT = 1", 6, "=", "expected IN, BETWEEN or LIKE after NOT"},
	} {
		_, err := Compile(c.filter, testColumns)
		var fe *Error
		if !errors.As(err, &fe) || !errors.Is(err, ErrFilter) {
			t.Errorf("%q: %v, want *Error", c.filter, err)
			continue
		}
		if fe.Pos != c.pos || fe.Token != c.token || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%q: at %d %q: %s; want at %d %q: %s", c.filter, fe.Pos, fe.Token, fe.Msg, c.pos, c.token, c.msg)
		}
		if !strings.Contains(err.Error(), "\n    "+c.filter+"\n    "+strings.Repeat(" ", c.pos)+"^") {
			t.Errorf("%q: no caret under the token: %s", c.filter, err)
		}
	}
}

// TestThreeValuedLogic checks AND, OR and NOT over TRUE, FALSE and NULL
// against SQL's truth tables (written out by hand), through the NULL and
// boolean literals.
func TestThreeValuedLogic(t *testing.T) {
	lit := map[uint8]string{T: "TRUE", F: "FALSE", U: "NULL"}
	and := map[[2]uint8]uint8{{T, T}: T, {T, F}: F, {T, U}: U, {F, T}: F, {F, F}: F, {F, U}: F, {U, T}: U, {U, F}: F, {U, U}: U}
	or := map[[2]uint8]uint8{{T, T}: T, {T, F}: T, {T, U}: T, {F, T}: T, {F, F}: F, {F, U}: U, {U, T}: T, {U, F}: U, {U, U}: U}
	eval := func(s string) uint8 {
		f, err := Compile(s, testColumns)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return f.Eval(nil, 1, nil)[0]
	}
	for k, want := range and {
		if got := eval(lit[k[0]] + " AND " + lit[k[1]]); got != want {
			t.Errorf("%s AND %s = %d, want %d", lit[k[0]], lit[k[1]], got, want)
		}
		if got := eval(lit[k[0]] + " OR " + lit[k[1]]); got != or[k] {
			t.Errorf("%s OR %s = %d, want %d", lit[k[0]], lit[k[1]], got, or[k])
		}
	}
	for v, want := range map[uint8]uint8{T: F, F: T, U: U} {
		if got := eval("NOT " + lit[v]); got != want {
			t.Errorf("NOT %s = %d, want %d", lit[v], got, want)
		}
	}
	// Precedence: NOT binds tighter than AND, AND tighter than OR.
	for s, want := range map[string]uint8{
		"TRUE OR TRUE AND FALSE": T, "NOT FALSE AND FALSE": F, "(TRUE OR TRUE) AND FALSE": F,
		"1 IN (2, NULL)": U, "1 NOT IN (2, NULL)": U, "1 IN (1, NULL)": T, "NULL BETWEEN 1 AND 2": U,
		"3 BETWEEN 1 AND NULL": U, "0 BETWEEN 1 AND NULL": F, "1 < 1.5": T, "'ab' < 'b'": T, "'abc' LIKE 'ab%'": T,
		"NULL IS NULL": T, "1 IS NOT NULL": T, "'it''s' = 'it''s'": T, "true = TRUE": T, "-0.0 = 0": T,
	} {
		if got := eval(s); got != want {
			t.Errorf("%s = %d, want %d", s, got, want)
		}
	}
}

// TestEvalVecEqualsRow: the vectorised evaluation (typed loops for column
// op literal) gives the row-by-row value at every row, nulls and NaN
// included.
func TestEvalVecEqualsRow(t *testing.T) {
	nan := math.NaN()
	byName := map[string]Vector{}
	for i, v := range []Vector{
		{Valid: []bool{true, false, true, true, true, true}, Data: []byte("enfrenzz"), Offsets: []int64{0, 2, 2, 4, 6, 8, 8}},
		{Valid: []bool{true, true, false, true, true, true}, Floats: []float64{0.5, nan, 0, -0.0, 0.7, 1e9}},
		{Ints: []int64{-3, 0, 5, 7, 1 << 62, -1 << 63}},
	} {
		byName[[]string{"lang", "quality", "n"}[i]] = v
	}
	cs := []Column{{Name: "lang", Type: String}, {Name: "quality", Type: Float}, {Name: "n", Type: Int}}
	for _, s := range []string{
		"lang = 'en'", "lang >= 'f'", "quality >= 0.5", "quality = 0", "quality < 1e10", "n > 0", "n <= 5",
		"lang = 'en' AND quality >= 0.5", "lang != 'en' OR NOT quality < 0.6", "quality > 3", "n = 0.0", "quality != n",
	} {
		f, err := Compile(s, cs)
		if err != nil {
			t.Fatal(err)
		}
		var cols []Vector // in f.Columns' order
		for _, c := range f.Columns {
			cols = append(cols, byName[c.Name])
		}
		vec := f.Eval(cols, 6, nil)
		for i := range vec {
			if r := evalRow(f.Root, cols, i); r != vec[i] {
				t.Errorf("%s row %d: vector %d, row %d", s, i, vec[i], r)
			}
		}
	}
}
