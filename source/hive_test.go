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
