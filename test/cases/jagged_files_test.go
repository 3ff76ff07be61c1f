package cases

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/prepml/prep/internal/duckdbtest"
)

// The nested files of apache/parquet-testing, converted with jagged specs
// where the jagged layouts cover them, each exported value checked against
// DuckDB's reading of the same file.

// parquetTesting is the repository's copy of apache/parquet-testing's data.
const parquetTesting = "../../testdata/parquet-testing/data"

// fileRun copies one parquet-testing file into a fresh source folder and
// plans its rows as one batch in file order.
func fileRun(t *testing.T, file string, rows int) *caseRun {
	t.Helper()
	dir := t.TempDir()
	r := &caseRun{t: t, dir: dir, src: filepath.Join(dir, "src"), plan: filepath.Join(dir, "plan.json"),
		specDir: filepath.Join("testdata", "jagged")}
	if err := os.Mkdir(r.src, 0o755); err != nil {
		t.Fatal(err)
	}
	copyFile(t, filepath.Join(parquetTesting, file), filepath.Join(r.src, file))
	r.planAll(rows)
	return r
}

// wantList returns the expected values of a list value v from DuckDB (nil
// for a null row: no values), with fill for a null element, and the
// element mask (1 = valid).
func wantList(t *testing.T, v any, fill int64) (vals, mask []uint64) {
	t.Helper()
	if v == nil {
		return nil, nil
	}
	for _, e := range duckdbtest.List(t, v) {
		if e == nil {
			vals, mask = append(vals, uint64(fill)), append(mask, 0)
			continue
		}
		vals, mask = append(vals, intBits(t, e)), append(mask, 1)
	}
	return vals, mask
}

// maskOf is 0 for a null DuckDB value, else 1.
func maskOf(v any) uint8 {
	if v == nil {
		return 0
	}
	return 1
}

// exportAll converts with spec and exports the one batch of fileRun.
func (r *caseRun) exportAll(spec string, rows int) (map[string]array, []int64) {
	r.t.Helper()
	a := r.converted(spec)
	ids := tensor(r.t, a, "sample_ids", "<i8").i64()
	if !slices.Equal(ids, idsUpTo(rows)) {
		r.t.Fatalf("sample ids %v, want 0..%d in order", ids, rows-1)
	}
	return a, ids
}

func idsUpTo(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

func TestJaggedRepeatedNoAnnotation(t *testing.T) {
	const file, rows = "repeated_no_annotation.parquet", 6
	r := fileRun(t, file, rows)
	ref := duckdbRows(t, []string{filepath.Join(r.src, file)}, "id", "phoneNumbers")
	a, ids := r.exportAll("repeated_no_annotation.yaml", rows)
	num := jagged(t, a, "number", "<i8", rows)
	mask := tensor(t, a, "number_mask", "|u1").u8()
	idv := tensor(t, a, "id", "<i4").i32()
	for k, id := range ids {
		row := ref[id]
		if int64(idv[k]) != duckdbtest.Int64(t, row[0]) {
			t.Errorf("id of row %d = %d, DuckDB %v", id, idv[k], row[0])
		}
		var want []uint64
		if row[1] != nil {
			for _, p := range duckdbtest.List(t, row[1].(map[string]any)["phone"]) {
				want = append(want, intBits(t, p.(map[string]any)["number"]))
			}
		}
		checkSample(t, "number", id, num.sample(k), want)
		if mask[k] != maskOf(row[1]) {
			t.Errorf("number_mask of row %d = %d, want %d", id, mask[k], maskOf(row[1]))
		}
	}
}

func TestJaggedImpalaLists(t *testing.T) {
	const file, rows = "nonnullable.impala.parquet", 1
	r := fileRun(t, file, rows)
	ref := duckdbRows(t, []string{filepath.Join(r.src, file)}, "ID", "Int_Array", "nested_Struct.B")
	a, _ := r.exportAll("impala_lists.yaml", rows)
	row := ref[0]
	if got := tensor(t, a, "id", "<i8").i64(); !slices.Equal(got, []int64{duckdbtest.Int64(t, row[0])}) {
		t.Errorf("id = %v, DuckDB %v", got, row[0])
	}
	for i, name := range []string{"int_array", "b"} {
		want, _ := wantList(t, row[1+i], 0)
		checkSample(t, name, 0, jagged(t, a, name, "<i4", rows).sample(0), want)
	}
}

func TestJaggedImpalaListOfLists(t *testing.T) {
	const file, rows = "nonnullable.impala.parquet", 1
	r := fileRun(t, file, rows)
	ref := duckdbRows(t, []string{filepath.Join(r.src, file)}, "int_array_array")
	a, _ := r.exportAll("impala_list_of_lists.yaml", rows)
	var flat, lens []uint64
	for _, in := range duckdbtest.List(t, ref[0][0]) {
		v, _ := wantList(t, in, 0)
		flat, lens = append(flat, v...), append(lens, uint64(len(v)))
	}
	checkSample(t, "aa", 0, jagged(t, a, "aa", "<i4", rows).sample(0), flat)
	checkSample(t, "aa_inner_lengths", 0, jagged(t, a, "aa_inner_lengths", "<i8", rows).sample(0), lens)
}

func TestJaggedImpalaMap(t *testing.T) {
	const file, rows = "nonnullable.impala.parquet", 1
	r := fileRun(t, file, rows)
	ref := duckdbRows(t, []string{filepath.Join(r.src, file)}, "Int_Map")
	a, _ := r.exportAll("impala_map.yaml", rows)
	var wk, wv []uint64
	for _, e := range duckdbtest.List(t, ref[0][0]) {
		kv := e.(map[string]any)
		wk = append(wk, fnv1a([]byte(kv["key"].(string)))%1000003)
		wv = append(wv, intBits(t, kv["value"]))
	}
	checkSample(t, "int_map.keys", 0, jagged(t, a, "int_map.keys", "<i8", rows).sample(0), wk)
	checkSample(t, "int_map.values", 0, jagged(t, a, "int_map.values", "<i4", rows).sample(0), wv)
}

func TestJaggedImpalaNullable(t *testing.T) {
	const file, rows = "nullable.impala.parquet", 7
	r := fileRun(t, file, rows)
	ref := duckdbRows(t, []string{filepath.Join(r.src, file)}, "id", "int_array", "nested_struct.b")
	a, ids := r.exportAll("impala_nullable.yaml", rows)
	idv := tensor(t, a, "id", "<i8").i64()
	for i, name := range []string{"int_array", "b"} {
		vals := jagged(t, a, name, "<i4", rows)
		em := jagged(t, a, name+"_element_mask", "|u1", rows)
		mask := tensor(t, a, name+"_mask", "|u1").u8()
		for k, id := range ids {
			row := ref[id]
			if idv[k] != duckdbtest.Int64(t, row[0]) {
				t.Errorf("id of row %d = %d, DuckDB %v", id, idv[k], row[0])
			}
			want, wantMask := wantList(t, row[1+i], -9)
			checkSample(t, name, id, vals.sample(k), want)
			checkSample(t, name+"_element_mask", id, em.sample(k), wantMask)
			if mask[k] != maskOf(row[1+i]) {
				t.Errorf("%s_mask of row %d = %d, want %d", name, id, mask[k], maskOf(row[1+i]))
			}
		}
	}
}

// map_no_value.parquet: DuckDB refuses the file (a MAP without a value
// field), so its list column is checked against the values the file holds
// (rows [1 2 3], [4 5 6], [7 8 9], as parquet-go reads them).
func TestJaggedMapNoValue(t *testing.T) {
	const file, rows = "map_no_value.parquet", 3
	r := fileRun(t, file, rows)
	a, _ := r.exportAll("map_no_value.yaml", rows)
	l := jagged(t, a, "my_list", "<i4", rows)
	for k := range rows {
		want := []uint64{uint64(3*k + 1), uint64(3*k + 2), uint64(3*k + 3)}
		checkSample(t, "my_list", int64(k), l.sample(k), want)
	}
}

// map_no_value.parquet's my_map: keys [1 2 3], [4 5 6], [7 8 9], every
// value null (DuckDB refuses the file; the values are parquet-go's): the
// null values take element_fill and element_mask 0, and the dense tensor
// finds the listed keys present.
func TestJaggedMapNoValueMaps(t *testing.T) {
	const file, rows = "map_no_value.parquet", 3
	r := fileRun(t, file, rows)
	a, _ := r.exportAll("map_no_value_maps.yaml", rows)
	keys := jagged(t, a, "mm.keys", "<i4", rows)
	vals := jagged(t, a, "mm.values", "<i4", rows)
	em := jagged(t, a, "mm_element_mask", "|u1", rows)
	md := tensor(t, a, "md", "<i4")
	if !slices.Equal(md.shape, []int{rows, 4}) {
		t.Fatalf("md shape %v, want [%d 4]", md.shape, rows)
	}
	dense := md.i32()
	fill := uint64(0xfffffffffffffffb) // -5
	for k := range rows {
		b := uint64(3 * k)
		checkSample(t, "mm.keys", int64(k), keys.sample(k), []uint64{b + 1, b + 2, b + 3})
		checkSample(t, "mm.values", int64(k), vals.sample(k), []uint64{fill, fill, fill})
		checkSample(t, "mm_element_mask", int64(k), em.sample(k), []uint64{0, 0, 0})
		want := []int32{-1, -1, -1, -1}
		want[k] = -5 // key 1, 5 or 9 is in row k, its value null
		if got := dense[4*k : 4*k+4]; !slices.Equal(got, want) {
			t.Errorf("md of row %d = %v, want %v", k, got, want)
		}
	}
}

// The map files' maps that a map policy does not read are refused before
// any shard, naming the map and the reason.
func TestJaggedMapsRefused(t *testing.T) {
	fileRun(t, "map_no_value.parquet", 3).convertFails("map_no_value_keys_only.yaml",
		"map_no_value.parquet", `map "my_map_no_v" has no value field`, `"my_map_no_v.key"`)
	fileRun(t, "incorrect_map_schema.parquet", 1).convertFails("incorrect_map_schema.yaml",
		"incorrect_map_schema.parquet", `map "my_map" has BYTE_ARRAY STRING values, which convert to no dtype`)
	fileRun(t, "nonnullable.impala.parquet", 1).convertFails("impala_map_array.yaml",
		"nonnullable.impala.parquet", `"int_map_array"`, "unsupported parquet feature", "inside a list or map")
}

// nested_lists.snappy.parquet's column a has three levels of lists: refused
// before any shard, naming the column and its depth.
func TestJaggedNestedListsDepth3Refused(t *testing.T) {
	r := fileRun(t, "nested_lists.snappy.parquet", 3)
	r.convertFails("nested_lists.yaml", "nested_lists.snappy.parquet", `"a"`, "3 levels of lists")
}
