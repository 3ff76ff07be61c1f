package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

type inspectRow struct {
	M  map[string]int32 `parquet:"m"`
	LL [][]int64        `parquet:"ll,list"`
	S  []string         `parquet:"s,list"`
}

// inspect of a Parquet file shows a map's key and value leaves as
// MAP<K, V> with their role, and a list of lists as LIST<LIST<T>>.
func TestInspectParquetNestedTypes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.parquet")
	fd, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[inspectRow](fd)
	if _, err := w.Write([]inspectRow{{M: map[string]int32{"a": 1}, LL: [][]int64{{1}}, S: []string{"x"}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI("inspect", path)
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	for _, want := range [][]string{
		{"m.key", "BYTE_ARRAY", "MAP<STRING, INT(32,true)> (key)", "no"},
		{"m.value", "INT32", "MAP<STRING, INT(32,true)> (value)", "no"},
		{"ll", "INT64", "LIST<LIST<INT(64,true)>>", "no"},
		{"s", "BYTE_ARRAY", "LIST<STRING>", "no"},
	} {
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Split(strings.Join(strings.Fields(line), " "), " ")
			if len(f) > 0 && f[0] == want[0] {
				found = true
				if got := strings.Join(strings.Fields(line), " "); got != strings.Join(want, " ") {
					t.Errorf("line %q, want %q", got, strings.Join(want, " "))
				}
			}
		}
		if !found {
			t.Errorf("no line for %s in\n%s", want[0], out)
		}
	}
}
