package selection

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
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
// and region TEXT, shard INTEGER) and data columns select exactly DuckDB's
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
	part, typed := PartitionColumns(keys, vals)
	if part[0].Type != String || part[1].Type != String || part[2].Type != Int {
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
		var got []int64
		for _, r := range res.Ranges {
			for k := r[0]; k < r[0]+r[1]; k++ {
				got = append(got, int64(k))
			}
		}
		q := duckdbtest.Query(t, fmt.Sprintf("SELECT id FROM (SELECT id, CASE WHEN (%s) THEN 1 ELSE 0 END AS keep FROM read_parquet(%s, hive_partitioning=true, hive_types={'date': VARCHAR, 'region': VARCHAR, 'shard': BIGINT})) WHERE keep = 1 ORDER BY id",
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
	part, typed := PartitionColumns([]string{"region"}, [][]string{{"eu"}, {HiveNull}})
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
