package selection

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

// TestRowRangeSets: intersectRows and unionRows on hand-computed ranges
// [start, end), touching and overlapping ends included.
func TestRowRangeSets(t *testing.T) {
	a := [][2]int64{{0, 10}, {20, 30}, {40, 50}}
	b := [][2]int64{{5, 20}, {30, 45}, {49, 60}}
	if got, want := fmt.Sprint(intersectRows(a, b)), "[[5 10] [40 45] [49 50]]"; got != want {
		t.Errorf("intersect: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(unionRows(a, b)), "[[0 60]]"; got != want {
		t.Errorf("union: %s, want %s", got, want)
	}
	c := [][2]int64{{12, 15}}
	if got, want := fmt.Sprint(unionRows(a, c)), "[[0 10] [12 15] [20 30] [40 50]]"; got != want {
		t.Errorf("union: %s, want %s", got, want)
	}
	if got := intersectRows(a, nil); got != nil {
		t.Errorf("intersect with none: %v", got)
	}
	if got := intersectRows(a, c); got != nil {
		t.Errorf("disjoint intersect: %v", got)
	}
}

// pagedRow is filterRow with lang dictionary encoded.
type pagedRow struct {
	ID      int64    `parquet:"id"`
	Lang    *string  `parquet:"lang,optional,dict"`
	Quality *float64 `parquet:"quality,optional"`
	Flag    *bool    `parquet:"flag,optional"`
	N       int32    `parquet:"n"`
	Score   *float32 `parquet:"score,optional"`
}

// writePagedFile writes 1000 rows as writeFilterFile does, in row groups
// of 500 rows and pages of about 256 bytes, lang dictionary encoded, with
// parquet-go's page index (ColumnIndex and OffsetIndex): many pages per
// row group, the pages of different columns holding different rows.
func writePagedFile(t *testing.T, path string) {
	t.Helper()
	rows := filterRows(1000, 0)
	paged := make([]pagedRow, len(rows))
	for i, r := range rows {
		paged[i] = pagedRow(r)
	}
	// Row by row: each column's pages end where its bytes fill them.
	pqfixture.Of(paged...).RowGroupRows(500).PageBytes(256).WriteBatch(1).WriteFile(t, path)
}

// TestSelectPrunesPages: over a file with a page index and many pages per
// row group, the rows Select keeps equal DuckDB's WHERE for every filter,
// whole row groups or in windows of a few rows, while pages whose bounds
// rule out every row are left unread: the pages of every INTEGER or TEXT
// column compared with literals under AND/OR are counted read or skipped
// (those of other columns are read whole, not counted); "id = 42" reads
// exactly the one id page holding id 42 (ids are unique and ascending)
// and skips the second row group by its footer statistics; NOT, IS NULL
// and an OR with a float comparison never prune.
func TestSelectPrunesPages(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "p.parquet")
	writePagedFile(t, path)
	// The test needs a page index and several pages per row group.
	pf, err := pqread.Open(path, pqread.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	pagesOf := map[string][2]int{} // column: pages of row group 0, 1
	firstRows := map[string]string{}
	if c, err := pf.Lookup("lang"); err != nil {
		t.Fatal(err)
	} else if col, err := pf.ReadColumnDict(0, c); err != nil || col.DictIndex == nil {
		t.Fatalf("lang is not in dictionary form (err %v): the test needs it", err)
	}
	for _, name := range []string{"id", "lang", "quality", "n", "flag"} {
		c, err := pf.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for g := 0; g < 2; g++ {
			ix, err := pf.PageIndex(g, c)
			if err != nil || ix == nil || ix.Pages() < 3 {
				t.Fatalf("%s: row group %d: page index %v, %v: the test needs one with several pages", name, g, ix, err)
			}
			firstRows[name] = fmt.Sprint(ix.FirstRow)
			p := pagesOf[name]
			p[g] = ix.Pages()
			pagesOf[name] = p
		}
	}
	pf.Close()
	if firstRows["id"] == firstRows["lang"] {
		t.Fatalf("id and lang pages start at the same rows %s: the test needs them apart", firstRows["id"])
	}
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "p.parquet", RowGroups: []int64{500, 500}}}
	// total counts the pages of cols in the row groups read.
	total := func(read []int, cols ...string) (n int64) {
		for _, c := range cols {
			for _, g := range read {
				n += int64(pagesOf[c][g])
			}
		}
		return n
	}
	for _, tc := range []struct {
		filter string
		cols   []string // the columns whose page index is used
		prunes bool     // some page skipped
		read   []int    // the row groups not skipped by footer statistics (ids 0..499, 500..999)
	}{
		{"id = 42", []string{"id"}, true, []int{0}},
		{"id BETWEEN 130 AND 170 OR id >= 990", []string{"id"}, true, []int{0, 1}},
		{"id IN (3, 480, 777)", []string{"id"}, true, []int{0, 1}},
		{"id = 42 AND lang = 'en'", []string{"id", "lang"}, true, []int{0}},
		{"id < 100 AND quality > 0.5", []string{"id"}, true, []int{0}},
		{"(id < 60 OR id > 940) AND n >= 0", []string{"id", "n"}, true, []int{0, 1}},
		{"id < 60 OR quality > 0.5", []string{"id"}, false, []int{0, 1}},
		{"NOT id = 42", nil, false, []int{0, 1}},
		{"id = 42 OR id IS NULL", []string{"id"}, false, []int{0, 1}},
		{"id > 600 AND (lang = 'fr' OR flag)", []string{"id", "lang"}, true, []int{1}},
		{"lang = 'zz' OR id BETWEEN 450 AND 550", []string{"lang", "id"}, true, []int{0, 1}},
		{"id = NULL", []string{"id"}, false, nil},
		// Decimals against an integer column prune by their int64 bounds
		// (id > 41.5 is id >= 42; id = 42.5 holds for no row).
		{"id > 41.5 AND id < 42.5", []string{"id"}, true, []int{0}},
		{"id BETWEEN 129.5 AND 170.2 OR id >= 989.9", []string{"id"}, true, []int{0, 1}},
		{"id IN (3.0, 480.5, 777)", []string{"id"}, true, []int{0, 1}},
		{"(id < 59.5 OR id > 940.5) AND n >= -0.5", []string{"id", "n"}, true, []int{0, 1}},
		{"id = 42.5", []string{"id"}, false, nil},
	} {
		_, res, err := Select(context.Background(), st, files, tc.filter, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.filter, err)
		}
		_, small, err := Select(context.Background(), st, files, tc.filter, 100, nil)
		if err != nil || fmt.Sprint(small.Ranges()) != fmt.Sprint(res.Ranges()) {
			t.Errorf("%s: in windows %+v %v, whole row groups %+v", tc.filter, small, err, res)
		}
		want := total(tc.read, tc.cols...)
		if res.Skipped != 2-len(tc.read) || res.PagesRead+res.PagesSkipped != want {
			t.Errorf("%s: %d row groups skipped, pages read %d + skipped %d, want %d and %d pages", tc.filter, res.Skipped, res.PagesRead, res.PagesSkipped, 2-len(tc.read), want)
		}
		if (res.PagesSkipped > 0) != tc.prunes {
			t.Errorf("%s: %d pages skipped (%d read), want pruning %v", tc.filter, res.PagesSkipped, res.PagesRead, tc.prunes)
		}
		if tc.filter == "id = 42" && res.PagesRead != 1 {
			t.Errorf("id = 42: %d pages read, want the one holding id 42", res.PagesRead)
		}
		got := selectedIDs(res)
		q := duckdbtest.Query(t, fmt.Sprintf("SELECT r FROM (SELECT file_row_number AS r, CASE WHEN (%s) THEN 1 ELSE 0 END AS keep FROM read_parquet(%s, file_row_number=true)) WHERE keep = 1 ORDER BY r",
			tc.filter, duckdbtest.Quote(path)))
		var rows []int64
		for _, row := range q.Rows {
			rows = append(rows, duckdbtest.Int64(t, row[0]))
		}
		if fmt.Sprint(got) != fmt.Sprint(rows) || res.Selected != uint64(len(rows)) {
			t.Errorf("%s: selected %d rows, DuckDB %d\n got %v\nwant %v", tc.filter, res.Selected, len(rows), got, rows)
		}
	}
}

// TestSelectUnconfirmedNullPages: parquet-mr 1.13 (apache/parquet-testing's
// datapage_v1-*-checksum files) marks every page of columns a and b all
// null, null count -1, although they hold 5120 values each: a filter
// over them selects exactly the rows DuckDB selects, where trusting the
// flag selected none for "a > 0".
func TestSelectUnconfirmedNullPages(t *testing.T) {
	duckdbtest.Require(t)
	dir, err := filepath.Abs("../testdata/parquet-testing/data")
	if err != nil {
		t.Fatal(err)
	}
	const name = "datapage_v1-snappy-compressed-checksum.parquet"
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: name, RowGroups: []int64{5120}}}
	for _, filter := range []string{"a > 0", "a > 0 OR b < 0", "a IS NULL", "a IS NOT NULL AND b BETWEEN -1000000000 AND 1000000000"} {
		_, res, err := Select(context.Background(), st, files, filter, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", filter, err)
		}
		got := selectedIDs(res)
		q := duckdbtest.Query(t, fmt.Sprintf("SELECT r FROM (SELECT file_row_number AS r, CASE WHEN (%s) THEN 1 ELSE 0 END AS keep FROM read_parquet(%s, file_row_number=true)) WHERE keep = 1 ORDER BY r",
			filter, duckdbtest.Quote(filepath.Join(dir, name))))
		var want []int64
		for _, row := range q.Rows {
			want = append(want, duckdbtest.Int64(t, row[0]))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || res.Selected != uint64(len(want)) {
			t.Errorf("%s: selected %d rows, DuckDB %d", filter, res.Selected, len(want))
		}
	}
}
