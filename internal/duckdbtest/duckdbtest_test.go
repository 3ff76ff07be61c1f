package duckdbtest

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/internal/pqfixture"
)

// known is a row of the file the reader is checked on; every value is one a
// lossy reader would get wrong (int64 past 2^53, -0.0, NaN, a float32 that
// is no short decimal), with nulls at the row and element levels.
type known struct {
	ID  int64    `parquet:"id"`
	F   float32  `parquet:"f"`
	D   float64  `parquet:"d"`
	Opt *int32   `parquet:"opt,optional"`
	L   []int64  `parquet:"l,list"`
	LN  []*int32 `parquet:"ln,list"`
	B   []byte   `parquet:"b"`
}

func i32(v int32) *int32 { return &v }

func writeKnown(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known's.parquet") // a quote in the path exercises Quote
	rows := []known{
		{ID: math.MaxInt64, F: 0.1, D: math.Copysign(0, -1), Opt: i32(-7), L: []int64{math.MinInt64, 9007199254740993}, LN: []*int32{i32(1), nil, i32(3)}, B: []byte{0, 0xff}},
		{ID: math.MinInt64, F: float32(math.Inf(-1)), D: math.NaN(), Opt: nil, L: []int64{}, LN: nil, B: []byte{}},
		{ID: 0, F: -1.5, D: 5e-324, Opt: i32(math.MaxInt32), L: []int64{42}, LN: []*int32{nil}, B: []byte("x")},
	}
	return pqfixture.Of(rows...).WriteFile(t, path)
}

func TestQueryKnownValues(t *testing.T) {
	path := writeKnown(t)
	r := Query(t, "SELECT id, f, d, opt, l, ln, b FROM read_parquet("+Quote(path)+") ORDER BY file_row_number")
	wantCols := []Column{{"id", "BIGINT"}, {"f", "FLOAT"}, {"d", "DOUBLE"}, {"opt", "INTEGER"},
		{"l", "BIGINT[]"}, {"ln", "INTEGER[]"}, {"b", "BLOB"}}
	if !slices.Equal(r.Columns, wantCols) {
		t.Fatalf("columns %v, want %v", r.Columns, wantCols)
	}
	if len(r.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(r.Rows))
	}
	ints := func(v any) []int64 {
		var out []int64
		for _, e := range List(t, v) {
			out = append(out, Int64(t, e))
		}
		return out
	}
	// Row 0.
	row := r.Rows[0]
	if got := Int64(t, row[0]); got != math.MaxInt64 {
		t.Errorf("id[0] = %d, want %d", got, int64(math.MaxInt64))
	}
	if got := Float64(t, row[1]); float32(got) != 0.1 || got != float64(float32(0.1)) {
		t.Errorf("f[0] = %v, want float32 0.1 widened exactly", got)
	}
	if got := Float64(t, row[2]); got != 0 || !math.Signbit(got) {
		t.Errorf("d[0] = %v (sign %v), want -0", got, math.Signbit(got))
	}
	if got := Int64(t, row[3]); got != -7 {
		t.Errorf("opt[0] = %d, want -7", got)
	}
	if got := ints(row[4]); !slices.Equal(got, []int64{math.MinInt64, 9007199254740993}) {
		t.Errorf("l[0] = %v", got)
	}
	if got := List(t, row[5]); len(got) != 3 || Int64(t, got[0]) != 1 || got[1] != nil || Int64(t, got[2]) != 3 {
		t.Errorf("ln[0] = %v, want [1 null 3]", got)
	}
	if got := Blob(t, row[6]); !slices.Equal(got, []byte{0, 0xff}) {
		t.Errorf("b[0] = %v", got)
	}
	// Row 1: the other extremes, null scalar, empty lists.
	row = r.Rows[1]
	if got := Int64(t, row[0]); got != math.MinInt64 {
		t.Errorf("id[1] = %d", got)
	}
	if got := Float64(t, row[1]); !math.IsInf(got, -1) {
		t.Errorf("f[1] = %v, want -Inf", got)
	}
	if got := Float64(t, row[2]); !math.IsNaN(got) {
		t.Errorf("d[1] = %v, want NaN", got)
	}
	if row[3] != nil {
		t.Errorf("opt[1] = %#v, want NULL", row[3])
	}
	if got := List(t, row[4]); len(got) != 0 {
		t.Errorf("l[1] = %v, want []", got)
	}
	// parquet-go writes a nil slice of a non-optional list as an empty list.
	if got := List(t, row[5]); len(got) != 0 {
		t.Errorf("ln[1] = %v, want []", got)
	}
	if got := Blob(t, row[6]); len(got) != 0 {
		t.Errorf("b[1] = %v, want empty", got)
	}
	// Row 2: the smallest subnormal double, a null element alone.
	row = r.Rows[2]
	if got := Float64(t, row[2]); got != 5e-324 {
		t.Errorf("d[2] = %v, want 5e-324", got)
	}
	if got := Int64(t, row[3]); got != math.MaxInt32 {
		t.Errorf("opt[2] = %d", got)
	}
	if got := List(t, row[5]); len(got) != 1 || got[0] != nil {
		t.Errorf("ln[2] = %v, want [null]", got)
	}
	if got := r.Col(t, "ln"); got != 5 {
		t.Errorf("Col(ln) = %d, want 5", got)
	}
}

// TestQueryStatements checks that earlier statements run (a table, a COPY
// to Parquet read back) and that MAP and STRUCT values come out as
// documented.
func TestQueryStatements(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.parquet")
	r := Query(t, "CREATE TABLE t AS SELECT * FROM (VALUES (1, MAP {'a': 10, 'b': -1}), (2, MAP {})) v(i, m);"+
		"COPY t TO "+Quote(out)+" (FORMAT parquet);"+
		"SELECT i, m, {'x': i * 2} AS s FROM read_parquet("+Quote(out)+") ORDER BY i")
	got, err := json.Marshal(r.Rows)
	if err != nil {
		t.Fatal(err)
	}
	want := `[[1,[{"key":"a","value":10},{"key":"b","value":-1}],{"x":2}],[2,[],{"x":4}]]`
	if string(got) != want {
		t.Errorf("rows %s, want %s", got, want)
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{"a": "'a'", "it's": "'it''s'", "": "''", "''": "''''''"} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestLocateMissingModule checks the reason given where the module is not
// installed: it names the folder and the install step.
func TestLocateMissingModule(t *testing.T) {
	empty := t.TempDir()
	t.Setenv(ModuleDirEnv, empty)
	s := locate()
	if s.err == nil {
		t.Fatal("locate found @duckdb/node-api in an empty folder")
	}
	if want := "@duckdb/node-api is not installed in " + empty + " (run make duckdb)"; s.err.Error() != want && s.node != "" {
		t.Errorf("reason %q, want %q", s.err, want)
	}
}
