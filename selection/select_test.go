package selection

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

type filterRow struct {
	ID      int64    `parquet:"id"`
	Lang    *string  `parquet:"lang,optional"`
	Quality *float64 `parquet:"quality,optional"`
	Flag    *bool    `parquet:"flag,optional"`
	N       int32    `parquet:"n"`
	Score   *float32 `parquet:"score,optional"`
}

// writeFilterFile writes rows rows in row groups of 97: lang cycles over
// en, fr, de, eng, "" and null; quality over a range with nulls, NaN and
// -0; flag true/false/null; n = id mod 11 − 5; score a float32 with nulls.
func writeFilterFile(t *testing.T, path string, rows, from int) {
	t.Helper()
	pqfixture.Of(filterRows(rows, from)...).RowGroupRows(97).WriteFile(t, path)
}

// filterRows returns the rows writeFilterFile writes: ids from to
// from+rows-1.
func filterRows(rows, from int) []filterRow {
	out := make([]filterRow, 0, rows)
	langs := []string{"en", "fr", "de", "eng", ""}
	for i := from; i < from+rows; i++ {
		r := filterRow{ID: int64(i), N: int32(i%11 - 5)}
		if i%6 != 5 {
			l := langs[i%6%5]
			r.Lang = &l
		}
		if i%7 != 3 {
			q := float64(i%13) / 10
			switch i % 50 {
			case 7:
				q = math.NaN()
			case 8:
				q = math.Copysign(0, -1)
			}
			r.Quality = &q
		}
		if i%5 != 4 {
			b := i%3 == 0
			r.Flag = &b
		}
		if i%4 != 0 {
			s := float32(i%9) * 0.25
			r.Score = &s
		}
		out = append(out, r)
	}
	return out
}

// TestSelectMatchesDuckDB: for every filter, the rows Select keeps over two
// files are exactly the rows DuckDB's WHERE keeps on the same files
// (file_row_number), nulls, NaN, -0, IN lists with NULL and NOT included.
// The second file is rewritten by DuckDB, which dictionary-encodes lang:
// its strings are read and compared in dictionary form.
func TestSelectMatchesDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	writeFilterFile(t, filepath.Join(dir, "a.parquet"), 500, 0)
	writeFilterFile(t, filepath.Join(dir, "b0.parquet"), 311, 500)
	duckdbtest.Query(t, fmt.Sprintf("SET threads = 1; COPY (SELECT * FROM read_parquet(%s)) TO %s (FORMAT parquet)",
		duckdbtest.Quote(filepath.Join(dir, "b0.parquet")), duckdbtest.Quote(filepath.Join(dir, "b.parquet"))))
	if err := os.Remove(filepath.Join(dir, "b0.parquet")); err != nil {
		t.Fatal(err)
	}
	pf, err := pqread.Open(filepath.Join(dir, "b.parquet"), pqread.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lang, err := pf.Lookup("lang")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pf.ReadColumnDict(0, lang); err != nil || c.DictIndex == nil {
		t.Fatalf("b.parquet: lang is not in dictionary form (err %v): the test needs it", err)
	}
	pf.Close()
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "a.parquet", RowGroups: rowGroupsOf(500, 97)}, {Path: "b.parquet", RowGroups: []int64{311}}}
	for _, filter := range []string{
		"lang = 'en'",
		"lang = 'en' AND quality >= 0.5",
		"lang <> 'en' OR quality < 0.3",
		"NOT (lang = 'en')",
		"lang IS NULL",
		"lang IS NOT NULL AND flag",
		"NOT flag",
		"flag = FALSE OR quality IS NULL",
		"lang IN ('en', 'de')",
		"lang NOT IN ('en', 'de')",
		"lang NOT IN ('en', NULL)",
		"n IN (1, -2, 3) OR lang IN ('fr', NULL)",
		"quality BETWEEN 0.2 AND 0.7",
		"quality NOT BETWEEN 0.2 AND 0.7",
		"n BETWEEN -2 AND 2 AND NOT lang LIKE 'e%'",
		"lang LIKE 'en%'",
		"lang NOT LIKE 'en%'",
		"lang LIKE 'fr'",
		"lang = ''",
		"quality > 1e9",
		"quality = 0",
		"quality >= 1000",
		"quality != quality",
		"n < 0.5",
		"n >= -3 AND id < 700",
		"score = 0.25 OR score > 1.5",
		"score < quality",
		"id = 42 OR id = 600",
		"(lang = 'en' OR lang = 'fr') AND (flag IS NULL OR quality < 0.4)",
		"quality = NULL",
		"NULL IS NULL AND n = 0",
		"\"id\" >= 800",
	} {
		_, res, err := Select(context.Background(), st, files, filter, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", filter, err)
		}
		// A memory bound far below a row group's filter columns reads
		// them in windows of a few rows: the same selection.
		_, small, err := Select(context.Background(), st, files, filter, 100, nil)
		if err != nil || fmt.Sprint(small) != fmt.Sprint(res) {
			t.Errorf("%s: in windows %+v %v, whole row groups %+v", filter, small, err, res)
		}
		got := selectedIDs(res)
		// The predicate is evaluated in the projection, not pushed into
		// DuckDB's Parquet scan: the scan prunes row groups by min/max
		// statistics that leave NaN out, so it drops rows its own SQL
		// keeps ('NaN'::DOUBLE > 1e9 is true in DuckDB, as here).
		q := duckdbtest.Query(t, fmt.Sprintf("SELECT r FROM (SELECT CASE WHEN filename LIKE '%%a.parquet' THEN file_row_number ELSE 500 + file_row_number END AS r, CASE WHEN (%[3]s) THEN 1 ELSE 0 END AS keep FROM read_parquet([%[1]s, %[2]s], file_row_number=true, filename=true)) WHERE keep = 1 ORDER BY r",
			duckdbtest.Quote(filepath.Join(dir, "a.parquet")), duckdbtest.Quote(filepath.Join(dir, "b.parquet")), filter))
		var want []int64
		for _, row := range q.Rows {
			want = append(want, duckdbtest.Int64(t, row[0]))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || res.Selected != uint64(len(want)) {
			t.Errorf("%s: selected %d rows, DuckDB %d\n got %v\nwant %v", filter, res.Selected, len(want), got, want)
		}
	}
}

// TestSelectSkipsRowGroups: row groups whose footer statistics prove no
// row can match are not read (10 row groups: ids 0..499 in a.parquet and
// 500..810 in b.parquet, 97 rows each; lang only ever "", de, en, eng, fr),
// and the selection is the same as reading everything (the DuckDB test runs
// with skipping on).
func TestSelectSkipsRowGroups(t *testing.T) {
	dir := t.TempDir()
	writeFilterFile(t, filepath.Join(dir, "a.parquet"), 500, 0)
	writeFilterFile(t, filepath.Join(dir, "b.parquet"), 311, 500)
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Path: "a.parquet", RowGroups: rowGroupsOf(500, 97)}, {Path: "b.parquet", RowGroups: rowGroupsOf(311, 97)}}
	for filter, want := range map[string]int{
		"id = 42":                  9, // only ids 0..96
		"id = 42 OR id = 700":      8,
		"id BETWEEN 100 AND 193":   9, // ids 97..193: the second row group
		"id IN (0, 800)":           8,
		"id >= 795":                9, // b's last row group: ids 791..810
		"id < 0":                   10,
		"lang = 'zz'":              10,
		"lang LIKE 'x%'":           10,
		"lang LIKE 'e%'":           0,
		"id = 42 AND lang = 'en'":  9,
		"NOT id = 42":              0, // NOT never skips
		"quality > 100":            0, // floats never skip (NaN)
		"lang IS NULL":             0,
		"id = 42 OR quality > 100": 0,
		"n = 99":                   10,
		"id = NULL":                10,
	} {
		_, res, err := Select(context.Background(), st, files, filter, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.RowGroups != 10 || res.Skipped != want {
			t.Errorf("%s: skipped %d of %d row groups, want %d of 10", filter, res.Skipped, res.RowGroups, want)
		}
	}
}

// TestSelectLongWindows: a window longer than evalRows is evaluated in
// parts (each its own slice of every column, strings plain and in
// dictionary form, nulls included) with the same result as windows of a
// few thousand rows, which each fit one part: ranges crossing the parts'
// bounds join.
func TestSelectLongWindows(t *testing.T) {
	dir := t.TempDir()
	const rows = 3*evalRows + 1000
	plain := filterRows(rows, 0)
	pqfixture.Of(plain...).RowGroupRows(rows).WriteFile(t, filepath.Join(dir, "plain.parquet"))
	type dictRow struct {
		ID      int64    `parquet:"id"`
		Lang    *string  `parquet:"lang,optional,dict"`
		Quality *float64 `parquet:"quality,optional"`
	}
	dict := make([]dictRow, rows)
	for i, r := range plain {
		dict[i] = dictRow{ID: r.ID, Lang: r.Lang, Quality: r.Quality}
	}
	pqfixture.Of(dict...).RowGroupRows(rows).WriteFile(t, filepath.Join(dir, "dict.parquet"))
	st, err := source.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, filter string }{
		{"plain.parquet", "lang = 'en' AND quality >= 0.5"},
		{"plain.parquet", "lang <> 'de' OR quality < 0.3"},
		{"plain.parquet", "NOT (lang LIKE 'e%') AND n > -3"},
		{"plain.parquet", "id >= 100 AND (flag OR score > 1)"},
		{"plain.parquet", "id < 70000 OR id > 140000"},
		{"dict.parquet", "lang = 'en' AND quality >= 0.5"},
		{"dict.parquet", "lang IS NULL OR lang > 'e'"},
	} {
		files := []File{{Path: c.file, RowGroups: []int64{rows}}}
		_, whole, err := Select(context.Background(), st, files, c.filter, 0, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		_, small, err := Select(context.Background(), st, files, c.filter, 20000, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		if whole.Selected == 0 || !slices.Equal(whole.Ranges(), small.Ranges()) || whole.Selected != small.Selected {
			t.Errorf("%s %s: one window: %d rows in %d ranges; windows of a few thousand rows: %d in %d", c.file, c.filter, whole.Selected, whole.Len(), small.Selected, small.Len())
		}
	}
}

func rowGroupsOf(n, g int64) []int64 {
	var out []int64
	for ; n > 0; n -= min(n, g) {
		out = append(out, min(n, g))
	}
	return out
}

// TestRangeListAddTrue: the ranges addTrue collects (64 rows a word, runs
// by trailing-zero counts, kept as varint gaps and lengths) are the runs of T
// rows found one row at a time, for T, F and U rows at random densities,
// runs crossing words and calls (adjacent calls join), lengths that are
// and are not multiples of 64, and more ranges than one chunk holds.
func TestRangeListAddTrue(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		rows   int
		pT, pU float64
	}{{0, 0.5, 0}, {1, 1, 0}, {63, 0.5, 0.2}, {64, 1, 0}, {65, 0.9, 0.05}, {1000, 0.2, 0.3}, {4096, 0.97, 0}, {200000, 0.5, 0.1}, {3000, 0, 0.5}} {
		var calls [][]uint8
		var want [][2]uint64
		base := uint64(rng.IntN(100))
		row := base
		for range 3 {
			tri := make([]uint8, c.rows)
			for i := range tri {
				switch x := rng.Float64(); {
				case x < c.pT:
					tri[i] = T
				case x < c.pT+c.pU:
					tri[i] = U
				}
				if tri[i] != T {
					continue
				}
				if k := len(want); k > 0 && want[k-1][0]+want[k-1][1] == row+uint64(i) {
					want[k-1][1]++
				} else {
					want = append(want, [2]uint64{row + uint64(i), 1})
				}
			}
			calls = append(calls, tri)
			row += uint64(c.rows)
		}
		var l rangeList
		row = base
		for _, tri := range calls {
			l.addTrue(tri, row)
			row += uint64(len(tri))
		}
		var got [][2]uint64
		for s, n := range l.all() {
			got = append(got, [2]uint64{s, n})
		}
		if !slices.Equal(got, want) || l.n != len(want) {
			t.Fatalf("%d rows, p(T) %.2f: %d ranges (n %d), want %d; first difference at %d", c.rows, c.pT, len(got), l.n, len(want), firstDiffRange(got, want))
		}
	}
}

// TestResultAll: a Result's ranges over several files are each file's
// ranges in file order, a file's first range joined to the last range of
// the file before it (skipping files with none) when adjacent; gaps and
// lengths of one to ten varint bytes round-trip; Len and Selected count
// the joined ranges and their rows, Size bounds their uvarints' bytes and
// Uvarints yields them.
func TestResultAll(t *testing.T) {
	files := [][][2]uint64{
		{{0, 5}, {5, 3}, {10, 1}, {200, 127}, {327 + 128, 1 << 20}},
		{},
		{{455 + 1<<20, 2}, {1 << 40, 1 << 33}}, // joins the first file's last range
		{{1<<40 + 1<<33 + 1, 7}},               // does not join: one row apart
		{{1<<40 + 1<<33 + 8, 2}},               // joins: a file's only range
		{},
		{{1<<40 + 1<<33 + 10, 1}, {1 << 50, 3}}, // joins, from the file's bytes
		{{1 << 62, 1<<63 - 1}},
	}
	want := [][2]uint64{{0, 8}, {10, 1}, {200, 127}, {455, 1<<20 + 2}, {1 << 40, 1 << 33}, {1<<40 + 1<<33 + 1, 10}, {1 << 50, 3}, {1 << 62, 1<<63 - 1}}
	res := &Result{}
	for _, f := range files {
		p := &fileResult{}
		for _, r := range f {
			p.ranges.add(r[0], r[1])
		}
		res.addFile(p)
	}
	var rows uint64
	for _, r := range want {
		rows += r[1]
	}
	if got := res.Ranges(); !slices.Equal(got, want) || res.Len() != len(want) || res.Selected != rows {
		t.Fatalf("ranges %v (Len %d, Selected %d), want %v (%d, %d)", got, res.Len(), res.Selected, want, len(want), rows)
	}
	// Size bounds the joined ranges' uvarints from above, by at most the
	// re-encoding of each file's first range.
	var enc []byte
	var end uint64
	for _, r := range want {
		enc = binary.AppendUvarint(binary.AppendUvarint(enc, r[0]-end), r[1])
		end = r[0] + r[1]
	}
	if n := res.Size(); n < len(enc) || n > len(enc)+2*binary.MaxVarintLen64*len(files) {
		t.Errorf("Size %d, want at least %d, at most %d more", n, len(enc), 2*binary.MaxVarintLen64*len(files))
	}
	// Uvarints yields those bytes, in pieces that stay as they were
	// yielded once the loop has moved on (a plan keeps them).
	var got []byte
	var kept [][]byte
	for p := range res.Uvarints() {
		got = append(got, p...)
		kept = append(kept, p)
	}
	if !bytes.Equal(got, enc) {
		t.Errorf("Uvarints % x\nwant     % x", got, enc)
	}
	if joined := bytes.Join(kept, nil); !bytes.Equal(joined, enc) {
		t.Errorf("Uvarints' pieces after the loop % x\nwant                        % x", joined, enc)
	}
	// All stops when the loop does.
	k := 0
	for range res.All() {
		if k++; k == 3 {
			break
		}
	}
	if k != 3 {
		t.Fatalf("loop ran %d times, want 3", k)
	}
}

func firstDiffRange(a, b [][2]uint64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// selectedIDs lists the rows res selects (ids, the source's row indices),
// in order.
func selectedIDs(res *Result) []int64 {
	var ids []int64
	for _, r := range res.Ranges() {
		for k := r[0]; k < r[0]+r[1]; k++ {
			ids = append(ids, int64(k))
		}
	}
	return ids
}
