package selection

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/source"
)

// hiveFiles are a hive-partitioned layout (paths in id order) with their
// rows; row ids continue across files.
var hiveFiles = []struct {
	path string
	rows int
}{
	{"date=2026-11-01/region=eu/shard=1/p.parquet", 200},
	{"date=2026-11-01/region=us/shard=2/p.parquet", 150},
	{"date=2026-11-02/region=eu/shard=10/p.parquet", 120},
	{"date=2026-11-02/region=us/shard=3/p.parquet", 90},
}

// TestSelectPartitionsMatchesDuckDB: filters over partition columns (date
// DATE inferred, region TEXT, shard INTEGER) and data columns select exactly DuckDB's
// rows (hive_partitioning, the same types), and the files PrunePartitions
// drops hold no selected row.
func TestSelectPartitionsMatchesDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	var files []File
	var abs []string
	from := 0
	for _, h := range hiveFiles {
		p := filepath.Join(dir, filepath.FromSlash(h.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFilterFile(t, p, h.rows, from)
		from += h.rows
		files = append(files, File{Path: h.path, RowGroups: rowGroupsOf(int64(h.rows), 97)})
		abs = append(abs, p)
	}
	keys, vals, err := source.HivePartitions(dir, abs)
	if err != nil || strings.Join(keys, ",") != "date,region,shard" {
		t.Fatalf("keys %v: %v", keys, err)
	}
	rels := make([]string, len(hiveFiles))
	for i, h := range hiveFiles {
		rels[i] = h.path
	}
	part, typed, err := PartitionColumns(keys, rels, vals, nil, nil)
	if err != nil || part[0].Type != Date || part[1].Type != String || part[2].Type != Int {
		t.Fatalf("partition types %+v", part)
	}
	for i := range files {
		files[i].Partition = typed[i]
	}
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		filter string
		keep   string // files PrunePartitions keeps
	}{
		{"region = 'eu'", "1010"},
		{"region = 'eu' AND lang = 'en'", "1010"},
		{"date = '2026-11-02' OR quality > 0.9", "1111"},
		{"date >= '2026-11-02' AND shard < 5", "0001"},
		{"shard IN (2, 10) AND NOT flag", "0110"},
		{"shard BETWEEN 2 AND 3", "0101"},
		{"NOT region = 'us'", "1010"},
		{"region LIKE 'e%' AND id > 300", "1010"},
		{"region IS NULL", "0000"},
		{"shard > 1 AND (lang IS NULL OR region = 'us')", "0111"},
		{"date BETWEEN '2026-11-02' AND '2026-11-07'", "0011"},
		{"date = DATE '2026-11-01' AND quality > 0.5", "1100"},
		{"date < DATE '2026-11-02' OR date IN ('2026-11-09')", "1100"},
		{"date IS NOT NULL AND date != '2026-11-01' AND region = 'eu'", "0010"},
		{"NOT date > '2026-10-31'", "0000"},
	} {
		keep, err := PrunePartitions(c.filter, part, typed)
		if err != nil {
			t.Fatal(err)
		}
		var ks, kept []File
		var b strings.Builder
		for i, k := range keep {
			if k {
				b.WriteByte('1')
				kept = append(kept, files[i])
			} else {
				b.WriteByte('0')
			}
			ks = append(ks, files[i])
		}
		if b.String() != c.keep {
			t.Errorf("%s: keeps %s, want %s", c.filter, b.String(), c.keep)
		}
		_, res, err := Select(context.Background(), st, ks, c.filter, 0, part)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		got := selectedIDs(res)
		q := duckdbtest.Query(t, fmt.Sprintf("SELECT id FROM (SELECT id, CASE WHEN (%s) THEN 1 ELSE 0 END AS keep FROM read_parquet(%s, hive_partitioning=true, hive_types={'date': DATE, 'region': VARCHAR, 'shard': BIGINT})) WHERE keep = 1 ORDER BY id",
			c.filter, duckdbtest.Quote(filepath.Join(dir, "**", "*.parquet"))))
		var want []int64
		for _, row := range q.Rows {
			want = append(want, duckdbtest.Int64(t, row[0])) // id = row index
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: selected %v\nDuckDB %v", c.filter, got, want)
		}
		// The kept files alone give the same rows (pruned files hold none).
		_, res2, err := Select(context.Background(), st, kept, c.filter, 0, part)
		if err == nil && len(kept) > 0 && res2.Selected != res.Selected {
			t.Errorf("%s: %d rows from the kept files, %d from all", c.filter, res2.Selected, res.Selected)
		}
	}
	// A data column named like a partition key is refused.
	bad := append([]Column{}, part...)
	bad[0].Name = "lang"
	if _, _, err := Select(context.Background(), st, files, "lang = 'en'", 0, bad); err == nil || !strings.Contains(err.Error(), "partition key conflict") {
		t.Errorf("conflict: %v", err)
	}
}

// TestPrunePartitionsNull: the Hive NULL partition value is NULL: only IS
// NULL keeps it; a comparison with it is NULL and prunes.
func TestPrunePartitionsNull(t *testing.T) {
	part, typed, err := PartitionColumns([]string{"region"}, []string{"a", "b"}, [][]string{{"eu"}, {HiveNull}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for filter, want := range map[string]string{
		"region = 'eu'": "[true false]", "region IS NULL": "[false true]", "region != 'eu'": "[false false]",
		"region IS NULL OR lang = 'x'": "[true true]", "NOT region = 'eu' AND x = 1": "[false false]",
	} {
		keep, err := PrunePartitions(filter, part, typed)
		if err != nil || fmt.Sprint(keep) != want {
			t.Errorf("%s: %v %v, want %s", filter, keep, err, want)
		}
	}
}

// TestPartitionColumnsTypes: inference (INTEGER in canonical form, then
// DATE, then TEXT, NULL fitting any: DuckDB 1.x's hive_types_autocast
// gives BIGINT for -7 and 8, VARCHAR for 007 and 8, DATE for 2026-11-01),
// declared types overriding it, and the errors of a
// declared type a value does not parse as and of a declared key the
// layout lacks.
func TestPartitionColumnsTypes(t *testing.T) {
	keys := []string{"day", "n", "code", "z", "zero"}
	files := []string{"f0", "f1"}
	vals := [][]string{{"2026-11-01", "7", "x", HiveNull, "007"}, {HiveNull, "-3", "y", HiveNull, "7"}}
	cols, typed, err := PartitionColumns(keys, files, vals, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cols) != "[{day DATE  false} {n INTEGER  false} {code TEXT  false} {z INTEGER  false} {zero TEXT  false}]" {
		t.Errorf("inferred %v", cols)
	}
	// Python: (date(2026, 11, 1) - date(1970, 1, 1)).days == 20758.
	const want = 20758
	if typed[0][0] != (Value{Type: Date, I: want}) || typed[1][0].Type != Null || typed[0][4] != (Value{Type: String, S: "007"}) || typed[1][1] != (Value{Type: Int, I: -3}) {
		t.Errorf("values %v", typed)
	}
	cols, typed, err = PartitionColumns(keys, files, vals, nil, map[string]Type{"day": String, "n": String})
	if err != nil || cols[0].Type != String || cols[1].Type != String || typed[0][0].S != "2026-11-01" || typed[1][1].S != "-3" {
		t.Errorf("declared string: %v %v %v", cols, typed, err)
	}
	for _, c := range []struct {
		decl map[string]Type
		want string
	}{
		{map[string]Type{"code": Int}, `f0: partition code=x: "x" is not a decimal integer (int64), as key code is declared int`},
		{map[string]Type{"n": Date}, `f0: partition n=7: "7" is not a date written Y-M-D, as key n is declared date`},
		{map[string]Type{"n": Timestamp}, `f0: partition n=7: "7" is not a timestamp written Y-M-D HH:MM[:SS[.ffffff]] (or a date), as key n is declared timestamp`},
		{map[string]Type{"region": String}, "declared partition key region is not a level of the layout (its keys: day/n/code/z/zero)"},
	} {
		_, _, err := PartitionColumns(keys, files, vals, nil, c.decl)
		if !errors.Is(err, ErrPartitionType) || strings.Contains(err.Error(), "bad filter") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.decl, err, c.want)
		}
	}
}

// TestParseDate: Y-M-D as DuckDB casts it (month and day of 1 or 2
// digits, a year of 2 or more), impossible dates refused, days counted
// from 1970-01-01 (negative before; expectations from Python's
// datetime.date subtraction), FormatDate the inverse.
func TestParseDate(t *testing.T) {
	for s, want := range map[string]int64{"1970-01-01": 0, "1970-01-02": 1, "1969-12-31": -1, "2000-03-01": 11017, "2026-11-01": 20758, "2026-11-1": 20758, "2026-1-1": 20454, "26-11-01": -709727} {
		d, ok := ParseDate(s)
		if !ok || d != want {
			t.Errorf("%s: %d %v, want %d", s, d, ok, want)
		}
		if len(s) == 10 && FormatDate(d) != s {
			t.Errorf("FormatDate(%d) = %s, want %s", d, FormatDate(d), s)
		}
	}
	for _, s := range []string{"2026-02-30", "2026-011-01", "2026-11-001", "1-1-1", "2026/11/01", "2026-11-01T00:00:00", " 2026-11-01", "2026-11-01 ", "", "x"} {
		if _, ok := ParseDate(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}

// TestDateFilterErrors: a DATE compared with a text literal that is not
// a date, with an integer, LIKE on a DATE and a bad DATE literal are
// refused at the token, before any file is read (PrunePartitions).
func TestDateFilterErrors(t *testing.T) {
	part := []Column{{Name: "date", Type: Date}, {Name: "n", Type: Int}}
	vals := [][]Value{{{Type: Date, I: 1}, {Type: Int, I: 2}}}
	for filter, want := range map[string]string{
		"date = '2026-13-01'":                      `not a date: '2026-13-01' is compared with column date is DATE, so it must be a date written 'YYYY-MM-DD' at "'2026-13-01'" (offset 7)`,
		"date > 3":                                 `type mismatch: column date is DATE, 3 is INTEGER`,
		"date LIKE '2026%'":                        `LIKE needs text: column date is DATE`,
		"date = DATE '2026-11'":                    `not a date: DATE takes 'YYYY-MM-DD' at "'2026-11'"`,
		"n = DATE '2026-11-01'":                    `type mismatch: DATE '2026-11-01' is DATE, column n is INTEGER`,
		"x = 1 AND date IN ('2026-11-01', 'soon')": `not a date: 'soon'`,
	} {
		_, err := PrunePartitions(filter, part, vals)
		if !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", filter, err, want)
		}
	}
}

// metaRow has a struct column meta: its only leaf is meta.lang.
type metaRow struct {
	Meta struct {
		Lang string `parquet:"lang"`
	} `parquet:"meta"`
}

// TestCheckPartitionKeys: a file with a top-level column named like a
// partition key is refused naming the file and the key, a struct column
// counting by its top-level name (its leaf is meta.lang); keys no file
// has as a column pass.
func TestCheckPartitionKeys(t *testing.T) {
	dir := t.TempDir()
	writeFilterFile(t, filepath.Join(dir, "a.parquet"), 10, 0) // id, n, lang, quality, flag, score
	pqfixture.Of(metaRow{}).WriteFile(t, filepath.Join(dir, "b.parquet"))
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		files, keys []string
		want        string // "": no error
	}{
		{[]string{"a.parquet", "b.parquet"}, []string{"region", "date"}, ""},
		{[]string{"b.parquet"}, []string{"lang"}, ""}, // meta.lang is not a top-level lang
		{[]string{"a.parquet", "b.parquet"}, []string{"date", "meta"}, "partition key conflict: b.parquet has a top-level column meta and a partition level meta=...; rename one"},
		{[]string{"a.parquet", "b.parquet"}, []string{"quality"}, "partition key conflict: a.parquet has a top-level column quality and a partition level quality=...; rename one"},
		{[]string{"a.parquet", "b.parquet"}, []string{"meta", "id"}, "partition key conflict: a.parquet has a top-level column id and a partition level id=...; rename one"},
	} {
		err := CheckPartitionKeys(ctx, st, c.files, c.keys)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.keys, err)
			}
			continue
		}
		if err == nil || err.Error() != c.want || !errors.Is(err, ErrPartitionConflict) {
			t.Errorf("%v: %v, want %q", c.keys, err, c.want)
		}
	}
}

// TestCheckPartitionColumns: the first file in the order given with a
// column named like a key is refused, naming it, the column and the key.
func TestCheckPartitionColumns(t *testing.T) {
	files := []string{"b.parquet", "a.parquet"}
	cols := [][]string{{"x", "meta"}, {"id", "region"}}
	if err := CheckPartitionColumns(files, cols, []string{"date"}); err != nil {
		t.Errorf("no conflict: %v", err)
	}
	err := CheckPartitionColumns(files, cols, []string{"region", "meta"})
	if want := "partition key conflict: b.parquet has a top-level column meta and a partition level meta=...; rename one"; err == nil || err.Error() != want || !errors.Is(err, ErrPartitionConflict) {
		t.Errorf("%v, want %q", err, want)
	}
	if err := CheckPartitionColumns(files, cols, []string{"id"}); err == nil || !strings.Contains(err.Error(), "a.parquet has a top-level column id") {
		t.Errorf("%v", err)
	}
}
