package selection

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
)

// castLiterals is a deterministic set of numeric literals: decimals of
// every width 1 to 38 and scale, with and without sign, integers of every
// DuckDB integer type and beyond, and the boundary values of the filter
// tests.
func castLiterals() []string {
	r := rand.New(rand.NewSource(26))
	digits := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteByte(byte('0' + r.Intn(10)))
		}
		return b.String()
	}
	lits := []string{"0.7", "0.1", "0.3", "0.2", "1.1", "16777217", "16777219", "-16777217", "0.5", "-0.0", "0.0",
		"16777217.5", "9007199254740992.5", "9007199254740993.0", "9223372036854775806.5", "9223372036854775808",
		"-9223372036854775809", "170141183460469231731687303715884105727", "170141183460469231731687303715884105728",
		"-170141183460469231731687303715884105728", "18446745173221179393", "1152921573326323713", ".5", "5.",
		"0.380805235", "0.100000000000000000000001", "3.4e38", "1e-45", "340282366920938463463374607431768211455",
		"-18446744073709551615", "-18446744073709551617", "12345678901234567890123456789012345678.5"}
	for i := 0; i < 600; i++ {
		p := 1 + r.Intn(38)
		s := r.Intn(p + 1)
		d := digits(p)
		lit := d[:p-s] + "." + d[p-s:]
		if r.Intn(3) == 0 {
			lit = "-" + lit
		}
		lits = append(lits, lit)
	}
	for i := 0; i < 200; i++ {
		lit := strings.TrimLeft(digits(1+r.Intn(39)), "0")
		if lit == "" {
			lit = "0"
		}
		if r.Intn(3) == 0 {
			lit = "-" + lit
		}
		lits = append(lits, lit)
	}
	return lits
}

// TestLiteralCastsMatchDuckDB: for every literal of castLiterals,
// DuckDB's type for it is the kind parseNum gives, and DuckDB's CAST to
// FLOAT and to DOUBLE (the casts a comparison applies) are the values
// asFloat and asDouble give, whether or not these are the nearest ones
// (when not, the filter refuses the literal).
func TestLiteralCastsMatchDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	lits := castLiterals()
	var sel []string
	for i, l := range lits {
		sel = append(sel, fmt.Sprintf("typeof(%s) AS t%d, TRY_CAST(%s AS FLOAT) AS f%d, CAST(%s AS DOUBLE) AS d%d", l, i, l, i, l, i))
	}
	res := duckdbtest.Query(t, "SELECT "+strings.Join(sel, ", "))
	row := res.Rows[0]
	refusedF, refusedD := 0, 0
	for i, l := range lits {
		num, ok := parseNum(l)
		if !ok {
			t.Fatalf("%s: not a number", l)
		}
		typ := row[3*i].(string)
		want := map[numKind]string{numInteger: "INT", numDecimal: "DECIMAL", numDouble: "DOUBLE"}[num.kind]
		if !strings.Contains(typ, want) || num.kind == numDecimal && typ != fmt.Sprintf("DECIMAL(%d,%d)", num.width, num.scale) {
			t.Errorf("%s: DuckDB types it %s, parseNum %v (width %d, scale %d)", l, typ, num.kind, num.width, num.scale)
			continue
		}
		d := duckdbtest.Float64(t, row[3*i+2])
		gd, near, ok := num.asDouble()
		if gd != d {
			t.Errorf("%s: DuckDB's DOUBLE %v, asDouble %v", l, d, gd)
		}
		if !ok {
			refusedD++
		}
		if ok != (d == near) {
			t.Errorf("%s: asDouble ok %v but DuckDB's %v, nearest %v", l, ok, d, near)
		}
		if num.kind == numDouble {
			continue
		}
		gf, nearF, ok := num.asFloat()
		if row[3*i+1] == nil { // DuckDB: out of FLOAT's range
			if ok {
				t.Errorf("%s: DuckDB cannot cast it to FLOAT, asFloat %v accepted", l, gf)
			}
			continue
		}
		f := duckdbtest.Float64(t, row[3*i+1])
		if float64(gf) != f {
			t.Errorf("%s: DuckDB's FLOAT %v, asFloat %v", l, f, gf)
		}
		if !ok {
			refusedF++
		}
		if ok != (float64(nearF) == f) {
			t.Errorf("%s: asFloat ok %v but DuckDB's %v, nearest %v", l, ok, f, nearF)
		}
	}
	t.Logf("%d literals; not the nearest (refused): %d as FLOAT, %d as DOUBLE", len(lits), refusedF, refusedD)
}
