package source

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHivePartitions: keys in level order and values per file; no keys for
// an unpartitioned directory; files outside the layout or with other keys
// are refused naming them.
func TestHivePartitions(t *testing.T) {
	keys, vals, err := HivePartitions("/d", []string{"/d/date=2026-11-01/region=eu/a.parquet", "/d/date=2026-11-02/region=/b.parquet"})
	if err != nil || fmt.Sprint(keys, vals) != "[date region] [[2026-11-01 eu] [2026-11-02 ]]" {
		t.Errorf("got %v %v %v", keys, vals, err)
	}
	if keys, _, err := HivePartitions("/d", []string{"/d/a.parquet", "/d/x/b.parquet"}); keys != nil || err != nil {
		t.Errorf("unpartitioned: %v %v", keys, err)
	}
	for _, c := range []struct {
		files []string
		want  string
	}{
		{[]string{"/d/k=1/a.parquet", "/d/b.parquet"}, "b.parquet has partition keys none, but k=1/a.parquet has k"},
		{[]string{"/d/k=1/a.parquet", "/d/x/b.parquet"}, `x/b.parquet is outside the partition layout: level "x" is not key=value`},
		{[]string{"/d/k=1/a.parquet", "/d/j=1/b.parquet"}, "j=1/b.parquet has partition keys j, but k=1/a.parquet has k"},
		{[]string{"/d/=1/a.parquet"}, `level "=1" is not key=value`},
	} {
		_, _, err := HivePartitions("/d", c.files)
		if !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.files, err, c.want)
		}
	}
}

// TestHiveLayout: the same layout rules over '/'-separated relative paths
// (an s3:// listing), and a key given twice in one path refused.
func TestHiveLayout(t *testing.T) {
	keys, vals, err := HiveLayout([]string{"date=2026-11-01/region=eu/a.parquet", "date=2026-11-02/region=us/b.parquet"})
	if err != nil || fmt.Sprint(keys, vals) != "[date region] [[2026-11-01 eu] [2026-11-02 us]]" {
		t.Errorf("got %v %v %v", keys, vals, err)
	}
	if keys, _, err := HiveLayout([]string{"a.parquet", "x/b.parquet"}); keys != nil || err != nil {
		t.Errorf("unpartitioned: %v %v", keys, err)
	}
	for rels, want := range map[string]string{
		"k=1/k=2/a.parquet":             "k=1/k=2/a.parquet has partition key k twice",
		"k=1/a.parquet,x/k=2/b.parquet": `x/k=2/b.parquet is outside the partition layout: level "x" is not key=value`,
		"k=1/a.parquet,b.parquet":       "b.parquet has partition keys none, but k=1/a.parquet has k",
	} {
		_, _, err := HiveLayout(strings.Split(rels, ","))
		if !errors.Is(err, ErrSourcesFile) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", rels, err, want)
		}
	}
}

// TestHiveLayoutUnescapesValues: values are unescaped as Hive's
// FileUtils.unescapePathName does and as Spark, pyarrow (segment_encoding
// "uri") and DuckDB read them: each %XX (two hex digits) is the byte XX;
// a '%' not followed by two hex digits stays. Spark writes a timestamp
// partition 2026-11-01 10:30:00 as ts=2026-11-01 10%3A30%3A00, and a
// filter ts >= '2026-11-01 10:00:00' must see the colons ('%' sorts
// before ':', so the escaped text would compare wrong).
func TestHiveLayoutUnescapesValues(t *testing.T) {
	keys, vals, err := HiveLayout([]string{
		"ts=2026-11-01 10%3A30%3A00/region=us%2Fwest/a.parquet",
		"ts=100%25/region=%zz%4/b.parquet",
		"ts=%e2%82%AC/region=__HIVE_DEFAULT_PARTITION__/c.parquet",
	})
	want := [][]string{{"2026-11-01 10:30:00", "us/west"}, {"100%", "%zz%4"}, {"€", "__HIVE_DEFAULT_PARTITION__"}}
	if err != nil || fmt.Sprint(keys) != "[ts region]" || fmt.Sprintf("%q", vals) != fmt.Sprintf("%q", want) {
		t.Errorf("got %v %q %v, want [ts region] %q", keys, vals, err, want)
	}
}
