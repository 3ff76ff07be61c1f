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
	"github.com/prepml/prep/source"
)

// TestParseTimestamp: the forms DuckDB casts to TIMESTAMP that prep reads,
// as microseconds since the epoch (expectations from Python's
// datetime(...) - datetime(1970, 1, 1), in microseconds), and the ones it
// refuses (a time zone, an impossible time, 7 fraction digits).
func TestParseTimestamp(t *testing.T) {
	const nov1 = 1793491200000000 // datetime(2026, 11, 1)
	for s, want := range map[string]int64{
		"2026-11-01":                 nov1,
		"2026-11-1 10:00":            nov1 + 10*3600e6,
		"2026-11-01T10:00:00":        nov1 + 10*3600e6,
		"2026-11-01 1:2:3":           nov1 + 3723e6,
		"2026-11-01 23:59:59.5":      nov1 + 86399e6 + 500000,
		"2026-11-01T00:00:00.000001": nov1 + 1,
		"1969-12-31 23:59:59":        -1e6,
	} {
		us, ok := ParseTimestamp(s)
		if !ok || us != want {
			t.Errorf("%s: %d %v, want %d", s, us, ok, want)
		}
	}
	if got := FormatTimestamp(nov1 + 10*3600e6 + 500000); got != "2026-11-01 10:00:00.5" {
		t.Errorf("FormatTimestamp: %s", got)
	}
	for _, s := range []string{"2026-11-01T10:00:00Z", "2026-11-01 10:00:00+02", "2026-11-01 24:00:00", "2026-11-01 10:60", "2026-11-01 10", "2026-11-01 10:00:00.1234567", "2026-02-30 10:00", "2026-11-01  10:00"} {
		if _, ok := ParseTimestamp(s); ok {
			t.Errorf("%q parsed", s)
		}
	}
}

// hiveKeyFiles writes one 3-row file (ids 3i to 3i+2) under k=values[i]
// for each value, and returns the directory, the Select files in id order
// and the key's values as the layout reads them (source.HivePartitions).
func hiveKeyFiles(t *testing.T, values []string) (string, []File, []string, [][]string) {
	t.Helper()
	dir := t.TempDir()
	var files []File
	var abs, rels []string
	for i, v := range values {
		rel := "k=" + v + "/p.parquet"
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFilterFile(t, p, 3, 3*i)
		files = append(files, File{Path: rel, RowGroups: []int64{3}})
		abs, rels = append(abs, p), append(rels, rel)
	}
	keys, vals, err := source.HivePartitions(dir, abs)
	if err != nil || len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("layout: %v %v", keys, err)
	}
	return dir, files, rels, vals
}

// TestPartitionInferenceMatchesDuckDB: a key's inferred type and every
// file's value (days for a DATE, microseconds for a TIMESTAMP) are
// DuckDB's hive_types_autocast (typeof, epoch_us), for dates without zero
// padding, two-digit years, timestamps with ' ' or 'T', minutes only and
// fractions, mixtures DuckDB reads as VARCHAR and values written with
// escapes (typed as written, VARCHAR); and every filter selects
// DuckDB's rows (PrunePartitions then Select), the partitions it prunes
// holding none of them.
func TestPartitionInferenceMatchesDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	name := map[Type]string{Int: "BIGINT", Date: "DATE", Timestamp: "TIMESTAMP", String: "VARCHAR"}
	for _, c := range []struct {
		values  []string
		want    Type
		filters []string
	}{
		{[]string{"2026-11-1", "2026-11-9", "2026-11-10", "2026-12-01", "2026-11-01"}, Date, []string{
			"k >= '2026-11-05'", "k < '2026-11-05'", "k = '2026-11-01'", "k = DATE '2026-11-1'",
			"k BETWEEN '2026-11-2' AND '2026-11-30'", "k IN ('2026-11-9', '2026-12-1')", "k != '2026-11-01' AND id > 4",
		}},
		{[]string{"26-1-1", "02026-3-04", "1999-12-31"}, Date, []string{"k < '2000-01-01'", "k = '2026-03-04'"}},
		{[]string{"2026-11-01T10:00:00", "2026-11-02 00:00:00", "2026-11-1 12:30", "2026-11-01 10:00:00.5", "2026-11-01T10:00:00.123456"}, Timestamp, []string{
			"k >= '2026-11-01 12:00:00'", "k < '2026-11-01 12:00:00'", "k < '2026-11-1 12:00'", "k = '2026-11-01T10:00'",
			"k >= DATE '2026-11-02'", "k > '2026-11-01 10:00:00.4'", "k = '2026-11-02'", "k BETWEEN '2026-11-01 10:00:00.1' AND '2026-11-01 12:30'",
			"k IN ('2026-11-01 10:00:00.5', '2026-11-02') OR id = 0",
		}},
		{[]string{"2026-11-01", "2026-11-01 10:00"}, String, []string{"k >= '2026-11-01 1'"}},
		{[]string{"2026-11-01", "20261101"}, String, []string{"k = '20261101'"}},
		{[]string{"7", "-3", HiveNull}, Int, []string{"k > 0", "k IS NULL"}},
		// Escaped values (Spark writes ':' as %3A) are typed as written,
		// then unescaped: VARCHAR, compared as text.
		{[]string{"2026-11-01 10%3A30%3A00", "2026-11-01 09:05:00.5", "2026-11-02 00:00:00"}, String, []string{
			"k > '2026-11-01 09:05:00.4'", "k = '2026-11-01 10:30:00'", "k < '2026-11-01 10:30'",
		}},
		{[]string{"%2D7", "3"}, String, []string{"k > '2'", "k = '-7'"}},
		// Not integers to DuckDB either: leading zeros, '+', '_', beyond int64.
		{[]string{"007", "+7", "1_0", "3", " 07", "-0x1"}, String, []string{"k > '2'", "k = '007'"}},
		{[]string{"9223372036854775808", "1"}, String, []string{"k > '5'"}},
	} {
		dir, files, rels, vals := hiveKeyFiles(t, c.values)
		part, typed, err := PartitionColumns([]string{"k"}, rels, vals, writtenValues(rels), nil)
		if err != nil {
			t.Fatalf("%v: %v", c.values, err)
		}
		if part[0].Type != c.want {
			t.Errorf("%v: inferred %s, want %s", c.values, part[0].Type, c.want)
		}
		for i := range files {
			files[i].Partition = typed[i]
		}
		var cases strings.Builder
		for i, f := range c.filters {
			fmt.Fprintf(&cases, ", CASE WHEN (%s) THEN 1 ELSE 0 END AS f%d", f, i)
		}
		q := duckdbtest.Query(t, fmt.Sprintf(`SELECT id, typeof(k) AS t,
			CASE typeof(k) WHEN 'DATE' THEN epoch_us(k::TIMESTAMP) // 86400000000 WHEN 'TIMESTAMP' THEN epoch_us(k::TIMESTAMP) END AS v%s
			FROM read_parquet(%s, hive_partitioning=true) ORDER BY id`, cases.String(), duckdbtest.Quote(filepath.Join(dir, "*", "*.parquet"))))
		want := make([][]int64, len(c.filters))
		for _, row := range q.Rows {
			id := duckdbtest.Int64(t, row[0])
			file := int(id / 3)
			if row[1] != name[part[0].Type] {
				t.Errorf("%v: prep infers %s, DuckDB %v", c.values, part[0].Type, row[1])
			}
			if v := typed[file][0]; (v.Type == Date || v.Type == Timestamp) && (row[2] == nil || duckdbtest.Int64(t, row[2]) != v.I) {
				t.Errorf("%s: prep %d, DuckDB %v", c.values[file], v.I, row[2])
			}
			for i := range c.filters {
				if duckdbtest.Int64(t, row[3+i]) == 1 {
					want[i] = append(want[i], id)
				}
			}
		}
		st, err := source.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range c.filters {
			keep, err := PrunePartitions(f, part, typed)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var got []int64
			_, res, err := Select(context.Background(), st, files, f, 0, part)
			if err != nil && !(errors.Is(err, ErrFilter) && len(want[i]) == 0) {
				t.Fatalf("%s: %v", f, err)
			}
			if res != nil {
				for _, r := range res.Ranges() {
					for k := r[0]; k < r[0]+r[1]; k++ {
						got = append(got, int64(k))
						if !keep[k/3] {
							t.Errorf("%s: row %d selected in a pruned partition", f, k)
						}
					}
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("%v: %s: selected %v, DuckDB %v", c.values, f, got, want[i])
			}
		}
	}
}

// TestPartitionColumnsDateLikeRefused: a key whose values look like dates
// in forms prep does not read (DuckDB types each of these DATE or
// TIMESTAMP, or VARCHAR for 2026-02-30) is refused naming the file, the
// key and the value, unless a value is plain text (then TEXT, as in
// DuckDB) or the key is declared.
func TestPartitionColumnsDateLikeRefused(t *testing.T) {
	for _, v := range []string{"2026-11-01T10:00:00Z", "2026-11-01 10:00:00+02", " 2026-11-01", "-2026-11-01", "1-1-1", "2026-02-30", "99999-1-1", "2026-11-01 24:00:00"} {
		_, _, err := PartitionColumns([]string{"k"}, []string{"f0", "f1"}, [][]string{{"2026-11-02"}, {v}}, nil, nil)
		want := fmt.Sprintf("f1: partition k=%s: %q looks like a date or timestamp", v, v)
		if !errors.Is(err, ErrPartitionType) || errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "partitions: {k: string}") {
			t.Errorf("%q: %v, want %q", v, err, want)
		}
		cols, _, err := PartitionColumns([]string{"k"}, []string{"f0", "f1"}, [][]string{{"soon"}, {v}}, nil, nil)
		if err != nil || cols[0].Type != String {
			t.Errorf("%q next to text: %v %v", v, cols, err)
		}
		cols, typed, err := PartitionColumns([]string{"k"}, []string{"f0"}, [][]string{{v}}, nil, map[string]Type{"k": String})
		if err != nil || cols[0].Type != String || typed[0][0].S != v {
			t.Errorf("%q declared string: %v %v", v, cols, err)
		}
	}
}

// TestPartitionIntegerFormsRefused: values DuckDB types BIGINT though they
// are not in canonical decimal form ("-07", "-0", " 1", "1 ", "0x1F",
// "0b1", checked with DuckDB's typeof) make prep refuse the key, naming the
// value, instead of typing it TEXT and comparing text where DuckDB
// compares integers; declaring the key string takes them as text.
func TestPartitionIntegerFormsRefused(t *testing.T) {
	duckdbtest.Require(t)
	for _, v := range []string{"-07", "-0", " 1", "1 ", "0x1F", "0b1"} {
		dir, _, rels, vals := hiveKeyFiles(t, []string{v, "5"})
		q := duckdbtest.Query(t, fmt.Sprintf(`SELECT DISTINCT typeof(k) FROM read_parquet(%s, hive_partitioning=true)`, duckdbtest.Quote(filepath.Join(dir, "*", "*.parquet"))))
		if len(q.Rows) != 1 || q.Rows[0][0] != "BIGINT" {
			t.Errorf("%q: DuckDB types it %v, not BIGINT: the refusal is not needed", v, q.Rows)
		}
		_, _, err := PartitionColumns([]string{"k"}, rels, vals, writtenValues(rels), nil)
		want := fmt.Sprintf("partition k=%s: %q looks like an integer but is not written in canonical decimal form", v, v)
		if !errors.Is(err, ErrPartitionType) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error containing %q", v, err, want)
		}
		cols, typed, err := PartitionColumns([]string{"k"}, rels, vals, writtenValues(rels), map[string]Type{"k": String})
		if err != nil || cols[0].Type != String || typed[0][0] != (Value{Type: String, S: v}) {
			t.Errorf("%q declared string: %v %v %v", v, cols, typed, err)
		}
	}
}
