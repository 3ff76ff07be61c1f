package selection

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/source"
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

type numRow struct {
	ID int64    `parquet:"id"`
	F  *float32 `parquet:"f,optional"`
	D  *float64 `parquet:"d,optional"`
	X  *int64   `parquet:"x,optional"`
	Y  *int32   `parquet:"y,optional"`
}

// numRows: f cycles over the float32 boundary values of the literals the
// filters use (the FLOAT nearest each, its neighbours, NaN, -0, ±Inf,
// null); d over doubles; x, in runs of three rows (so that row groups of 7
// rows have narrow statistics and are skipped), over int64s around 2^53
// and the ends of int64; y over int32s.
func numRows() []numRow {
	var fs []float32
	for _, v := range []float32{0.1, 0.2, 0.3, 0.5, 0.7, 1.1, 16777216, 3.4e38, 1e-45, -0.7} {
		fs = append(fs, v, math.Nextafter32(v, float32(math.Inf(-1))), math.Nextafter32(v, float32(math.Inf(1))))
	}
	fs = append(fs, float32(math.NaN()), float32(math.Copysign(0, -1)), 0, float32(math.Inf(1)), float32(math.Inf(-1)))
	ds := []float64{0.7, float64(float32(0.7)), 0.3, float64(float32(0.3)), math.NaN(), 9007199254740992, 1}
	const p53 = 1 << 53
	xs := []int64{p53 - 1, p53, p53 + 1, p53 + 2, -p53 - 1, -p53, math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1, -2, -1, 0, 1, 2}
	ys := []int32{-2, -1, 0, 1, 2, math.MaxInt32, math.MinInt32}
	var out []numRow
	for i := 0; i < 3*len(xs)+3; i++ {
		r := numRow{ID: int64(i)}
		if k := i % (len(fs) + 1); k < len(fs) {
			r.F = &fs[k]
		}
		if k := i % (len(ds) + 1); k < len(ds) {
			r.D = &ds[k]
		}
		if k := i / 3; k < len(xs) {
			r.X = &xs[k]
		}
		if k := i % (len(ys) + 1); k < len(ys) {
			r.Y = &ys[k]
		}
		out = append(out, r)
	}
	// A second pass so that each float meets each row group position.
	for i := range out[:len(fs)] {
		r := numRow{ID: int64(len(out)), F: &fs[(i+7)%len(fs)]}
		out = append(out, r)
	}
	return out
}

// numFilters are the comparisons of TestSelectNumbersMatchDuckDB: every
// operator with every literal of its column's list, then IN, BETWEEN,
// NOT, literal-first and mixed-kind forms.
func numFilters() []string {
	lits := map[string][]string{
		"f": {"0.7", "0.3", "0.1", "0.2", "1.1", "-0.7", "0.0", "-0.0", "0.5", "16777217", "16777216.0", "16777217.5", "3e-1", "7e-1", "1e-45",
			"0.000000000000000000000000000000000000000000001", "3.4e38", "340000000000000000000000000000000000000",
			"340282366920938463463374607431768211455", "-170141183460469231731687303715884105728", "NULL"},
		"x": {"9007199254740992.5", "9007199254740992.0", "9007199254740993.0", "9007199254740993", "9007199254740992e0", "-9007199254740992.5",
			"9223372036854775806.5", "9223372036854775807.0", "9223372036854775807.5", "9223372036854775808", "-9223372036854775808.5",
			"-9223372036854775809", "1.5", "-1.5", "0.5", "-0.5", "170141183460469231731687303715884105727", "1e0"},
		"y": {"0.5", "-0.5", "2147483647.0", "2147483647.5", "-2147483648.5", "1.9999999999999999999", "1.00000000000000000001"},
		"d": {"0.7", "0.3", "7e-1", "16777217"},
	}
	var out []string
	for _, col := range []string{"f", "x", "y", "d"} {
		for _, op := range []string{"=", "<>", "<", "<=", ">", ">="} {
			for _, l := range lits[col] {
				out = append(out, col+" "+op+" "+l)
			}
		}
	}
	return append(out,
		"f IN (0.1, 0.2)", "f IN (0.1, 3e-1)", "f IN (0.7, 16777217)", "f NOT IN (0.7, NULL)", "f NOT IN (0.7, 0.3)",
		"f BETWEEN 0.2 AND 0.3", "f BETWEEN 0.7 AND 1e0", "f NOT BETWEEN 0.3 AND 0.7", "0.1 BETWEEN f AND 1", "0.7 > f", "0.7 <= f",
		"f = d", "f < d", "NOT (f >= 0.7)", "f >= 0.7 AND x > 9007199254740992.5", "f = 0.7 OR x = 1.5",
		"x IN (9007199254740993.0, 1.5)", "x IN (1.5, 2.5)", "x NOT IN (1.5, 2.5)", "x NOT IN (1.5, NULL)", "x IN (1.5, NULL)",
		"x IN (9007199254740992, 1e0)", "x IN (9223372036854775808, -1.0)",
		"x BETWEEN 9007199254740992.5 AND 9007199254740993.5", "x NOT BETWEEN 0.5 AND 1.5", "x BETWEEN 1.5 AND 1e20",
		"x BETWEEN -0.5 AND NULL", "x NOT BETWEEN -0.5 AND NULL", "1.5 < x", "9007199254740992.5 >= x",
		"9007199254740992.5 BETWEEN x AND 9007199254740993", "NOT (x = 1.5)", "NOT (x IN (1.5))", "x = y", "y > x", "x = d", "x < d", "y >= d", "x IN (9223372036854775808, 1e0)", "x > 9223372036854775807e0", "d IN (0.7, 1)", "d BETWEEN 0.3 AND 0.7",
		"y BETWEEN -0.5 AND 1.5", "y IN (1.0, 2.5, -1)", "x > 0.5 OR y < -0.5",
		"1.5 = 1.50", "9007199254740993 = 9007199254740992.0", "1.5 IN (1, 1.5)", "2 IN (1.5, NULL)", "NOT (2 NOT IN (1.5, 2.0))",
		"1 BETWEEN 0.5 AND 1.0", "9007199254740993 > 9007199254740992e0",
	)
}

// TestSelectNumbersMatchDuckDB: every filter of numFilters selects
// exactly the rows DuckDB's SQL selects (evaluated as a projection, see
// TestSelectMatchesDuckDB; all filters in one query) over a file of FLOAT,
// DOUBLE, BIGINT and INTEGER columns holding the boundary values, read
// whole and in windows, with row groups skipped by their statistics;
// except the filters with 16777217.5 against the FLOAT column, which
// DuckDB 1.5 casts to 16777216, not to the nearest FLOAT (16777218), and
// which are refused at that literal.
func TestSelectNumbersMatchDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir, st, files := numFile(t)
	filters := numFilters()
	var cols []string
	for i, f := range filters {
		cols = append(cols, fmt.Sprintf("CASE WHEN (%s) THEN 1 ELSE 0 END AS k%d", f, i))
	}
	q := duckdbtest.Query(t, fmt.Sprintf("SELECT id, %s FROM read_parquet(%s) ORDER BY id", strings.Join(cols, ", "), duckdbtest.Quote(filepath.Join(dir, "n.parquet"))))
	skipped := 0
	for i, filter := range filters {
		var want []int64
		for _, row := range q.Rows {
			if duckdbtest.Int64(t, row[1+i]) == 1 {
				want = append(want, duckdbtest.Int64(t, row[0]))
			}
		}
		_, res, err := Select(context.Background(), st, files, filter, 0, nil)
		if strings.HasPrefix(filter, "f ") && strings.HasSuffix(filter, " 16777217.5") {
			if err == nil || !strings.Contains(err.Error(), "DuckDB rounds it to 1.6777216e+07, not to the nearest FLOAT 1.6777218e+07") {
				t.Errorf("%s: %v, want the literal refused", filter, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		_, small, err := Select(context.Background(), st, files, filter, 10, nil)
		if err != nil || fmt.Sprint(small.Ranges()) != fmt.Sprint(res.Ranges()) {
			t.Errorf("%s: in windows %v %v, whole row groups %v", filter, small, err, res)
		}
		skipped += res.Skipped
		got := selectedIDs(res)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: selected %v\nDuckDB %v", filter, got, want)
		}
	}
	if skipped == 0 {
		t.Errorf("no row group was skipped by its statistics: the test does not exercise pruning")
	}
	t.Logf("%d filters, %d row groups skipped", len(filters), skipped)
}

// TestSelectHiveIntegerKeysMatchDuckDB: an INTEGER partition key (k,
// inferred, as DuckDB's hive_types_autocast infers BIGINT) compared with
// decimals, integers beyond int64 and DOUBLE literals by every operator,
// IN and BETWEEN: PrunePartitions keeps exactly the files holding a row
// DuckDB selects, and Select selects DuckDB's rows (all filters in one
// DuckDB query over hive_partitioning).
func TestSelectHiveIntegerKeysMatchDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	keys := []string{"1", "2", "10", "-3", "9223372036854775807", "9007199254740992", "9007199254740993", "-9223372036854775808", HiveNull}
	var files []File
	var abs, rels []string
	for i, k := range keys {
		rel := "k=" + k + "/p.parquet"
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFilterFile(t, p, 2, 2*i) // ids 2i, 2i+1
		files = append(files, File{Path: rel, RowGroups: []int64{2}})
		abs = append(abs, p)
		rels = append(rels, rel)
	}
	hkeys, vals, err := source.HivePartitions(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	part, typed, err := PartitionColumns(hkeys, rels, vals, nil, nil)
	if err != nil || len(part) != 1 || part[0].Type != Int {
		t.Fatalf("partition types %+v: %v", part, err)
	}
	for i := range files {
		files[i].Partition = typed[i]
	}
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var filters []string
	for _, op := range []string{"=", "<>", "<", "<=", ">", ">="} {
		for _, l := range []string{"9223372036854775806.5", "9223372036854775807.0", "9223372036854775808", "9007199254740992.0", "9007199254740992.5",
			"9007199254740993.0", "9007199254740992e0", "1.5", "-2.5", "10.0", "-9223372036854775808.5", "-9223372036854775809", "2e0"} {
			filters = append(filters, "k "+op+" "+l)
		}
	}
	filters = append(filters, "k IN (1.5, 2)", "k IN (1.5, 2.5)", "k NOT IN (1.5, 2.5)", "k NOT IN (1.5, NULL)", "k IN (9007199254740993.0, 1e0)",
		"k BETWEEN 1.5 AND 10.0", "k NOT BETWEEN 1.5 AND 10.0", "k BETWEEN 9007199254740992.5 AND 9223372036854775808", "k BETWEEN 1.5 AND 1e1",
		"NOT (k = 1.5)", "k > 9223372036854775806.5 OR lang = 'en'", "k < 1.5 AND quality > 0.5")
	var cols []string
	for i, f := range filters {
		cols = append(cols, fmt.Sprintf("CASE WHEN (%s) THEN 1 ELSE 0 END AS k%d", f, i))
	}
	q := duckdbtest.Query(t, fmt.Sprintf("SELECT id, %s FROM read_parquet(%s, hive_partitioning=true) ORDER BY id",
		strings.Join(cols, ", "), duckdbtest.Quote(filepath.Join(dir, "**", "*.parquet"))))
	for i, filter := range filters {
		var want []int64
		for _, row := range q.Rows {
			if duckdbtest.Int64(t, row[1+i]) == 1 {
				want = append(want, duckdbtest.Int64(t, row[0]))
			}
		}
		keep, err := PrunePartitions(filter, part, typed)
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		for f, k := range keep {
			has := false
			for _, id := range want {
				has = has || id/2 == int64(f)
			}
			if has && !k {
				t.Errorf("%s: prunes %s, which holds DuckDB's rows", filter, rels[f])
			}
			if !has && k && !strings.Contains(filter, "lang") && !strings.Contains(filter, "quality") {
				t.Errorf("%s: keeps %s, which holds none of DuckDB's rows", filter, rels[f])
			}
		}
		_, res, err := Select(context.Background(), st, files, filter, 0, part)
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		got := selectedIDs(res)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: selected %v\nDuckDB %v", filter, got, want)
		}
	}
}

// TestNumberRefusals: an INTEGER column compared with a FLOAT (32-bit)
// column, and literals DuckDB 1.5 does not cast to the nearest FLOAT or
// DOUBLE, are refused at the token; the same literals elsewhere, and
// INTEGER against DOUBLE or FLOAT against DOUBLE columns, are not.
// (16777217.5: DuckDB's FLOAT is 16777216 (TestSelectNumbersMatchDuckDB),
// the nearest 16777218; 9007199254740993.1: DuckDB's DOUBLE adds
// 9007199254740993 (2^53 as a double) and 0.1, giving 2^53, the nearest
// is 2^53+2.)
func TestNumberRefusals(t *testing.T) {
	cols := []Column{{Name: "f", Type: Float, Float32: true}, {Name: "d", Type: Float}, {Name: "x", Type: Int}}
	for filter, want := range map[string]string{
		"x = f":                             `comparing INTEGER column x with FLOAT (32-bit) column f is not supported: DuckDB rounds the integers to FLOAT first at "=" (offset 2)`,
		"f BETWEEN 1 AND x":                 `comparing INTEGER column x with FLOAT (32-bit) column f is not supported`,
		"f >= 16777217.5":                   `16777217.5 is compared with a FLOAT (32-bit) column and has more digits than a FLOAT holds: DuckDB rounds it to 1.6777216e+07, not to the nearest FLOAT 1.6777218e+07: write it with fewer digits at "16777217.5" (offset 5)`,
		"f IN (0.5, 16777217.5)":            `DuckDB rounds it to 1.6777216e+07, not to the nearest FLOAT 1.6777218e+07`,
		"d > 9007199254740993.1":            `9007199254740993.1 has more digits than a DOUBLE holds, and DuckDB rounds it to 9.007199254740992e+15, not to the nearest DOUBLE 9.007199254740994e+15: write it with fewer digits at "9007199254740993.1" (offset 4)`,
		"x IN (1e0, 9007199254740993.1)":    `DuckDB rounds it to 9.007199254740992e+15, not to the nearest DOUBLE 9.007199254740994e+15`,
		"f > 1e0 OR d < 9007199254740993.1": `not to the nearest DOUBLE`,
	} {
		_, err := Compile(filter, cols)
		if err == nil || !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", filter, err, want)
		}
	}
	for _, filter := range []string{"x = d", "f < d", "x > 9007199254740993.1", "f < 9007199254740993.1", "x = 16777217.5", "d > 16777217.5", "f = f", "x = x"} {
		if _, err := Compile(filter, cols); err != nil {
			t.Errorf("%s: %v", filter, err)
		}
	}
}

// TestSelectFloatWidthsDiffer: a filter column that is FLOAT (32-bit) in
// one file and DOUBLE in another is refused naming both types (its
// literals would be cast differently), not compared in one of them.
func TestSelectFloatWidthsDiffer(t *testing.T) {
	type f32Row struct {
		V float32 `parquet:"v"`
	}
	type f64Row struct {
		V float64 `parquet:"v"`
	}
	dir := t.TempDir()
	pqfixture.Of(f32Row{0.7}).WriteFile(t, filepath.Join(dir, "a.parquet"))
	pqfixture.Of(f64Row{0.7}).WriteFile(t, filepath.Join(dir, "b.parquet"))
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "a.parquet", RowGroups: []int64{1}}, {Path: "b.parquet", RowGroups: []int64{1}}}
	_, _, err = Select(context.Background(), st, files, "v >= 0.7", 0, nil)
	if want := "b.parquet: column v is DOUBLE here but FLOAT in a.parquet"; err == nil || !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v, want %q", err, want)
	}
	_, res, err := Select(context.Background(), st, files[:1], "v >= 0.7", 0, nil)
	if err != nil || res.Selected != 1 {
		t.Errorf("FLOAT 0.7 >= 0.7: %+v %v, want the row selected", res, err)
	}
}

// TestSelectRandomNumbersMatchDuckDB: 600 random comparisons (every
// operator, IN lists of one to three literals, BETWEEN, literal first) of
// the columns of numRows with random integers, decimals (up to 20 digits,
// 10 after the point, so that DuckDB's DECIMAL of them and a BIGINT never
// overflows) and DOUBLE literals near the stored values select DuckDB's
// rows, or are refused for a literal DuckDB 1.5 does not cast to the
// nearest value (asFloat, asDouble: checked there).
func TestSelectRandomNumbersMatchDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir, st, files := numFile(t)
	r := rand.New(rand.NewSource(53))
	near := []string{"0.1", "0.2", "0.3", "0.5", "0.7", "1.1", "16777216", "16777217", "9007199254740992", "9007199254740993", "2147483647", "0"}
	lit := func() string {
		base := near[r.Intn(len(near))]
		switch r.Intn(5) {
		case 0: // the value with digits appended
			if !strings.Contains(base, ".") {
				base += "."
			}
			base += fmt.Sprintf("%03d", r.Intn(1000))[:1+r.Intn(3)]
		case 1: // as a DOUBLE
			base += "e0"
		case 2: // another integer
			base = fmt.Sprint(r.Int63n(1<<54) - 1<<53)
		case 3:
			base = fmt.Sprintf("%d.%d", r.Intn(3), r.Intn(1000000))
		}
		if r.Intn(4) == 0 && !strings.HasPrefix(base, "-") {
			base = "-" + base
		}
		return base
	}
	ops := []string{"=", "<>", "<", "<=", ">", ">="}
	var filters []string
	refused := 0
	for len(filters) < 600 {
		c := []string{"f", "d", "x", "y"}[r.Intn(4)]
		var f string
		switch r.Intn(4) {
		case 0, 1:
			f = c + " " + ops[r.Intn(len(ops))] + " " + lit()
		case 2:
			l := []string{lit()}
			for k := r.Intn(3); k > 0; k-- {
				l = append(l, lit())
			}
			f = c + []string{" IN (", " NOT IN ("}[r.Intn(2)] + strings.Join(l, ", ") + ")"
		default:
			f = lit() + " " + ops[r.Intn(len(ops))] + " " + c
			if r.Intn(2) == 0 {
				f = c + []string{" BETWEEN ", " NOT BETWEEN "}[r.Intn(2)] + lit() + " AND " + lit()
			}
		}
		if _, err := Compile(f, []Column{{Name: "f", Type: Float, Float32: true}, {Name: "d", Type: Float}, {Name: "x", Type: Int}, {Name: "y", Type: Int}}); err != nil {
			if !strings.Contains(err.Error(), "not to the nearest") {
				t.Fatalf("%s: %v", f, err)
			}
			refused++
			continue
		}
		filters = append(filters, f)
	}
	var cols []string
	for i, f := range filters {
		cols = append(cols, fmt.Sprintf("CASE WHEN (%s) THEN 1 ELSE 0 END AS k%d", f, i))
	}
	q := duckdbtest.Query(t, fmt.Sprintf("SELECT id, %s FROM read_parquet(%s) ORDER BY id", strings.Join(cols, ", "), duckdbtest.Quote(filepath.Join(dir, "n.parquet"))))
	for i, filter := range filters {
		var want []int64
		for _, row := range q.Rows {
			if duckdbtest.Int64(t, row[1+i]) == 1 {
				want = append(want, duckdbtest.Int64(t, row[0]))
			}
		}
		_, res, err := Select(context.Background(), st, files, filter, 0, nil)
		if err != nil {
			t.Errorf("%s: %v", filter, err)
			continue
		}
		got := selectedIDs(res)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: selected %v\nDuckDB %v", filter, got, want)
		}
	}
	t.Logf("%d filters compared, %d refused", len(filters), refused)
}

// numFile writes numRows into dir/n.parquet in row groups of 7 rows and
// returns dir, a store over it and the file as Select takes it.
func numFile(t *testing.T) (string, source.Store, []File) {
	t.Helper()
	dir := t.TempDir()
	rows := numRows()
	pqfixture.Of(rows...).RowGroupRows(7).WriteFile(t, filepath.Join(dir, "n.parquet"))
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, st, []File{{Path: "n.parquet", RowGroups: rowGroupsOf(int64(len(rows)), 7)}}
}
