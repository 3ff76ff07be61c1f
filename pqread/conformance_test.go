package pqread

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Golden conformance over apache/parquet-testing (testdata/parquet-testing,
// see SOURCE.md there): every leaf column of every row group of every file in
// data/ and bad_data/ either decodes (and then meets the Column invariants,
// and for many files exact values) or fails with the documented error below.
// Nothing may panic.

// expectedFailure is a documented failure: the sentinel it wraps and a
// substring of its message.
type expectedFailure struct {
	err  error
	text string
	why  string
}

// openFailures lists files whose Open fails.
var openFailures = map[string]expectedFailure{
	"bad_data/ARROW-RS-GH-6229-DICTHEADER.parquet": {ErrCorrupt, "outside the data region",
		"column chunk byte range runs into the footer"},
	"bad_data/PARQUET-1481.parquet": {ErrCorrupt, "unknown physical type -7",
		"schema element with physical type -7"},
}

// unsupportedColumns counts, per file, the leaf columns pqread reports as
// unsupported (ColumnInfo.Unsupported set, ReadColumn failing with
// ErrUnsupported and that reason), and says what they are.
var unsupportedColumns = map[string]struct {
	n   int
	why string
}{
	"data/nested_maps.snappy.parquet":  {2, "the key and value of maps inside a map"},
	"data/nested_lists.snappy.parquet": {1, "three repetition levels"},
	"data/nonnullable.impala.parquet":  {2, "the key and value of a list of maps"},
	"data/nullable.impala.parquet":     {2, "the key and value of a list of maps"},
}

// columnFailures lists, per file, the supported columns (by ColumnInfo.Name;
// "*" for any) whose ReadColumn fails in some row group.
var columnFailures = map[string]map[string]expectedFailure{
	"data/datapage_v1-corrupt-checksum.parquet": {
		"*": {ErrCorrupt, "page checksum mismatch", "pages damaged on purpose; the CRC catches them"},
	},
	"data/rle-dict-uncompressed-corrupt-checksum.parquet": {
		"*": {ErrCorrupt, "page checksum mismatch", "pages damaged on purpose; the CRC catches them"},
	},
	"data/large_string_map.brotli.parquet": {
		"arr.key": {ErrLimit, "exceeds the limit of 268435456", "its 1 GiB page is refused by MaxPageBytes; see TestPageSizeLimitBeforeAllocation"},
	},
	"data/nation.dict-malformed.parquet": {
		"name":        {ErrCorrupt, "overruns the column chunk", "malformed dictionary: page sizes do not fit the column chunk"},
		"comment_col": {ErrCorrupt, "overruns the column chunk", "malformed dictionary: page sizes do not fit the column chunk"},
	},
	"bad_data/ARROW-GH-41317.parquet": {
		"timestamp_us_no_tz": {ErrCorrupt, "holds 0 rows, row group has 3", "column chunk metadata claims 0 values"},
	},
	"bad_data/ARROW-GH-41321.parquet": {
		"*": {ErrCorrupt, "", "pages whose level runs are cut short or overrun (Arrow GH-41321); some row groups still decode"},
	},
	"bad_data/ARROW-GH-45185.parquet": {
		"x": {ErrCorrupt, "middle of a list", "first repetition level is 1"},
	},
	"bad_data/ARROW-GH-47662.parquet": {
		"flba_field": {ErrCorrupt, "PLAIN FIXED_LEN_BYTE_ARRAY", "PLAIN values do not match the value count"},
	},
	"bad_data/ARROW-RS-GH-6229-LEVELS.parquet": {
		"outer.c": {ErrCorrupt, "repetition levels", "repetition level run cut short"},
	},
}

func conformanceFiles(t *testing.T) []string {
	var out []string
	for _, dir := range []string{"data", "bad_data"} {
		ents, err := os.ReadDir(filepath.Join(testdata, "parquet-testing", dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".parquet") {
				out = append(out, dir+"/"+e.Name())
			}
		}
	}
	if len(out) < 70 {
		t.Fatalf("only %d conformance files", len(out))
	}
	return out
}

func TestConformanceParquetTesting(t *testing.T) {
	seenOpen := map[string]bool{}
	for _, rel := range conformanceFiles(t) {
		t.Run(rel, func(t *testing.T) {
			path := filepath.Join(testdata, "parquet-testing", rel)
			f, err := Open(path, Limits{})
			if want, ok := openFailures[rel]; ok {
				seenOpen[rel] = true
				wantErr(t, err, want.err, filepath.Base(rel), want.text)
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer f.Close()
			fails := columnFailures[rel]
			unsupported := 0
			for _, ci := range f.Columns() {
				if ci.Unsupported != "" {
					unsupported++
					for rg := range f.RowGroups() {
						_, err := f.ReadColumn(rg, ci)
						wantErr(t, err, ErrUnsupported, filepath.Base(rel), ci.Name, strings.TrimPrefix(ci.Unsupported, ErrUnsupported.Error()+": "))
					}
					continue
				}
				want, listed := fails[ci.Name]
				if !listed {
					want, listed = fails["*"]
				}
				anyErr := false
				for rg := range f.RowGroups() {
					c, err := f.ReadColumn(rg, ci)
					if err != nil {
						anyErr = true
						if !listed {
							t.Errorf("column %q row group %d: %v", ci.Name, rg, err)
							continue
						}
						wantErr(t, err, want.err, filepath.Base(rel), want.text)
						continue
					}
					checkInvariants(t, c)
					if int64(c.Rows) != f.RowGroups()[rg] {
						t.Errorf("column %q row group %d: %d rows", ci.Name, rg, c.Rows)
					}
				}
				if listed && !anyErr && fails["*"].err == nil {
					t.Errorf("column %q decoded, but is listed as failing: %s", ci.Name, want.why)
				}
			}
			if unsupported != unsupportedColumns[rel].n {
				t.Errorf("%d unsupported columns, want %d", unsupported, unsupportedColumns[rel].n)
			}
			if check, ok := conformanceValues[rel]; ok {
				check(t, f)
			}
		})
	}
	for rel := range openFailures {
		if !seenOpen[rel] {
			t.Errorf("%s listed in openFailures but not found", rel)
		}
	}
}

// col reads a whole column of a single-row-group file.
func col(t *testing.T, f *File, name string) *Column {
	t.Helper()
	if len(f.RowGroups()) != 1 {
		t.Fatalf("%d row groups", len(f.RowGroups()))
	}
	return mustRead(t, f, name, 0)
}

func strs(c *Column) []string {
	var out []string
	for i := 0; i < len(c.ByteOffsets)-1; i++ {
		if (c.RowValid != nil && !c.Info.List && !c.RowValid[i]) || (c.ElemValid != nil && !c.ElemValid[i]) {
			out = append(out, "<null>")
			continue
		}
		out = append(out, string(bytesAt(c, i)))
	}
	return out
}

func eq[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// sameColumn asserts two columns hold identical slots.
func sameColumn(t *testing.T, what string, a, b *Column) {
	t.Helper()
	if a.Kind != b.Kind || a.Rows != b.Rows || !slices.Equal(a.RowValid, b.RowValid) || !slices.Equal(a.Offsets, b.Offsets) ||
		!slices.Equal(a.InnerOffsets, b.InnerOffsets) || !slices.Equal(a.ListValid, b.ListValid) ||
		!slices.Equal(a.ElemValid, b.ElemValid) || a.Width != b.Width || len(a.Float32) != len(b.Float32) || len(a.Float64) != len(b.Float64) ||
		!slices.Equal(a.Int32, b.Int32) || !slices.Equal(a.Int64, b.Int64) || !bytes.Equal(a.Data, b.Data) ||
		!slices.Equal(a.ByteOffsets, b.ByteOffsets) || !bytes.Equal(a.FixedData, b.FixedData) || !slices.Equal(a.Bool, b.Bool) {
		t.Errorf("%s: columns differ", what)
	}
	for i := range a.Float32 {
		if math.Float32bits(a.Float32[i]) != math.Float32bits(b.Float32[i]) {
			t.Fatalf("%s: float32 %d differs", what, i)
		}
	}
	for i := range a.Float64 {
		if math.Float64bits(a.Float64[i]) != math.Float64bits(b.Float64[i]) {
			t.Fatalf("%s: float64 %d differs", what, i)
		}
	}
}

func openRel(t *testing.T, rel string) *File {
	return mustOpen(t, filepath.Join(testdata, "parquet-testing", rel))
}

var lz4Check = func(t *testing.T, f *File) {
	eq(t, "c0", col(t, f, "c0").Int64, []int64{1593604800, 1593604800, 1593604801, 1593604801})
	eq(t, "c1", strs(col(t, f, "c1")), []string{"abc", "def", "abc", "def"})
	eq(t, "v11", col(t, f, "v11").Float64, []float64{42, 7.7, 42.125, 7.7})
}

var decimal1to24 = func(t *testing.T, f *File) {
	c := col(t, f, "value")
	if c.Info.Scale != 2 {
		t.Fatalf("scale %d", c.Info.Scale)
	}
	for i := range 24 {
		var v float64
		switch c.Kind {
		case KindInt32:
			v = DecimalInt64ToFloat64(int64(c.Int32[i]), 2)
		case KindInt64:
			v = DecimalInt64ToFloat64(c.Int64[i], 2)
		case KindFixed:
			v = DecimalToFloat64(c.FixedData[i*c.Width:(i+1)*c.Width], 2)
		case KindBytes:
			v = DecimalToFloat64(bytesAt(c, i), 2)
		}
		if v != float64(i+1) {
			t.Fatalf("value[%d] = %v, want %d", i, v, i+1)
		}
	}
}

var alltypes = func(ids []int32, dates []string) func(t *testing.T, f *File) {
	return func(t *testing.T, f *File) {
		eq(t, "id", col(t, f, "id").Int32, ids)
		n := len(ids)
		var bools []bool
		var ints []int32
		var bigs []int64
		var floats []float32
		var doubles []float64
		var strsWant []string
		for i := range n {
			bools = append(bools, i%2 == 0)
			ints = append(ints, int32(i%2))
			bigs = append(bigs, int64(i%2)*10)
			floats = append(floats, float32(i%2)*1.1)
			doubles = append(doubles, float64(i%2)*10.1)
			strsWant = append(strsWant, strconv.Itoa(i%2))
		}
		eq(t, "bool_col", col(t, f, "bool_col").Bool, bools)
		eq(t, "tinyint_col", col(t, f, "tinyint_col").Int32, ints)
		eq(t, "int_col", col(t, f, "int_col").Int32, ints)
		eq(t, "bigint_col", col(t, f, "bigint_col").Int64, bigs)
		eq(t, "float_col", col(t, f, "float_col").Float32, floats)
		eq(t, "double_col", col(t, f, "double_col").Float64, doubles)
		eq(t, "string_col", strs(col(t, f, "string_col")), strsWant)
		eq(t, "date_string_col", strs(col(t, f, "date_string_col")), dates)
		if ts := col(t, f, "timestamp_col"); ts.Kind != KindInt96 || ts.Width != 12 {
			t.Errorf("timestamp_col kind %s width %d", ts.Kind, ts.Width)
		}
	}
}

// conformanceValues holds exact-value checks (from the parquet-testing
// README and Arrow's tests of these files, or equality with a twin file
// written with another encoding or codec).
var conformanceValues = map[string]func(t *testing.T, f *File){
	"data/alltypes_plain.parquet": alltypes([]int32{4, 5, 6, 7, 2, 3, 0, 1},
		[]string{"03/01/09", "03/01/09", "04/01/09", "04/01/09", "02/01/09", "02/01/09", "01/01/09", "01/01/09"}),
	"data/alltypes_dictionary.parquet":         alltypes([]int32{0, 1}, []string{"01/01/09", "01/01/09"}),
	"data/alltypes_plain.snappy.parquet":       alltypes([]int32{6, 7}, []string{"04/01/09", "04/01/09"}),
	"data/lz4_raw_compressed.parquet":          lz4Check,
	"data/hadoop_lz4_compressed.parquet":       lz4Check,
	"data/non_hadoop_lz4_compressed.parquet":   lz4Check,
	"data/int32_decimal.parquet":               decimal1to24,
	"data/int64_decimal.parquet":               decimal1to24,
	"data/fixed_length_decimal.parquet":        decimal1to24,
	"data/fixed_length_decimal_legacy.parquet": decimal1to24,
	"data/byte_array_decimal.parquet":          decimal1to24,
	"data/concatenated_gzip_members.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "long_col")
		for i, v := range c.Int64 {
			if v != int64(i+1) {
				t.Fatalf("long_col[%d] = %d", i, v)
			}
		}
		if c.Rows != 513 || !c.Info.Unsigned {
			t.Fatalf("rows %d info %+v", c.Rows, c.Info)
		}
	},
	"data/datapage_v2.snappy.parquet": func(t *testing.T, f *File) {
		eq(t, "a", strs(col(t, f, "a")), []string{"abc", "abc", "abc", "<null>", "abc"})
		eq(t, "b", col(t, f, "b").Int32, []int32{1, 2, 3, 4, 5})
		eq(t, "c", col(t, f, "c").Float64, []float64{2, 3, 4, 5, 2})
		eq(t, "d", col(t, f, "d").Bool, []bool{true, true, true, false, true})
		e := col(t, f, "e")
		eq(t, "e offsets", e.Offsets, []int64{0, 3, 3, 3, 6, 8})
		eq(t, "e valid", e.RowValid, []bool{true, false, false, true, true})
		eq(t, "e", e.Int32, []int32{1, 2, 3, 1, 2, 3, 1, 2})
	},
	"data/list_columns.parquet": func(t *testing.T, f *File) {
		l := col(t, f, "int64_list")
		eq(t, "int64_list offsets", l.Offsets, []int64{0, 3, 5, 6})
		eq(t, "int64_list", l.Int64, []int64{1, 2, 3, 0, 1, 4})
		eq(t, "int64_list elem valid", l.ElemValid, []bool{true, true, true, false, true, true})
		u := col(t, f, "utf8_list")
		eq(t, "utf8_list offsets", u.Offsets, []int64{0, 3, 3, 7})
		eq(t, "utf8_list valid", u.RowValid, []bool{true, false, true})
		eq(t, "utf8_list", strs(u), []string{"abc", "efg", "hij", "efg", "<null>", "hij", "xyz"})
	},
	"data/null_list.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "emptylist")
		eq(t, "offsets", c.Offsets, []int64{0, 0})
		if c.RowValid != nil {
			t.Errorf("empty list reported null")
		}
	},
	"data/repeated_primitive_no_list.parquet": func(t *testing.T, f *File) {
		eq(t, "Int32_list offsets", col(t, f, "Int32_list").Offsets, []int64{0, 4, 4, 5, 9})
		eq(t, "Int32_list", col(t, f, "Int32_list").Int32, []int32{0, 1, 2, 3, 4, 5, 6, 7, 8})
		sameColumn(t, "group_of_lists", col(t, f, "Int32_list"), col(t, f, "group_of_lists.Int32_list_in_group"))
	},
	"data/column_chunk_key_value_metadata.parquet": func(t *testing.T, f *File) {
		// Column chunk key_value_metadata with a key and no value (valid per
		// the IDL, rejected by parquet-go v0.32.0's footer decoder, repaired
		// by checkThrift); no rows, and data_page_offset 0.
		if f.NumRows() != 0 || len(f.Columns()) != 2 {
			t.Fatalf("rows %d columns %d", f.NumRows(), len(f.Columns()))
		}
		eq(t, "column1", col(t, f, "column1").Int32, []int32{})
	},
	"data/single_nan.parquet": func(t *testing.T, f *File) {
		eq(t, "mycol valid", col(t, f, "mycol").RowValid, []bool{false})
	},
	"data/nan_in_stats.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "x")
		if !math.IsNaN(c.Float64[1]) || c.Float64[0] != 1 {
			t.Errorf("x = %v", c.Float64)
		}
	},
	"data/binary.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "foo")
		for i := range 12 {
			if !bytes.Equal(bytesAt(c, i), []byte{byte(i)}) {
				t.Fatalf("foo[%d] = %x", i, bytesAt(c, i))
			}
		}
	},
	"data/dict-page-offset-zero.parquet": func(t *testing.T, f *File) {
		for _, v := range col(t, f, "l_partkey").Int32 {
			if v != 1552 {
				t.Fatalf("l_partkey %d", v)
			}
		}
	},
	"data/alltypes_tiny_pages.parquet": func(t *testing.T, f *File) {
		plain := openRel(t, "data/alltypes_tiny_pages_plain.parquet")
		for _, ci := range f.Columns() {
			sameColumn(t, ci.Name, col(t, f, ci.Name), col(t, plain, ci.Name))
		}
		if col(t, f, "id").Rows != 7300 {
			t.Errorf("rows %d", col(t, f, "id").Rows)
		}
	},
	"data/byte_stream_split_extended.gzip.parquet": func(t *testing.T, f *File) {
		for _, ci := range f.Columns() {
			if base, ok := strings.CutSuffix(ci.Name, "_byte_stream_split"); ok {
				sameColumn(t, ci.Name, col(t, f, ci.Name), col(t, f, base+"_plain"))
			}
		}
	},
	"data/lz4_raw_compressed_larger.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "a")
		if c.Rows != 10000 || string(bytesAt(c, 0)) != "c7ce6bef-d5b0-4863-b199-8ea8c7fb117b" {
			t.Fatalf("rows %d first %q", c.Rows, bytesAt(c, 0))
		}
		sameColumn(t, "hadoop twin", c, col(t, openRel(t, "data/hadoop_lz4_compressed_larger.parquet"), "a"))
	},
	"data/datapage_v1-snappy-compressed-checksum.parquet": func(t *testing.T, f *File) {
		u := openRel(t, "data/datapage_v1-uncompressed-checksum.parquet")
		for _, name := range []string{"a", "b"} {
			sameColumn(t, name, col(t, f, name), col(t, u, name))
		}
		if a := col(t, f, "a"); a.Int32[0] != 0x03020100 || a.Rows != 5120 {
			t.Errorf("a[0] = %#x", a.Int32[0])
		}
	},
	"data/float16_nonzeros_and_nans.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "x")
		eq(t, "valid", c.RowValid, []bool{false, true, true, true, true, true, true, true})
		if c.Info.Logical != "FLOAT16" || c.Width != 2 {
			t.Errorf("info %+v", c.Info)
		}
		// 1.0 is 0x3C00, little-endian in the file.
		if c.FixedData[2] != 0x00 || c.FixedData[3] != 0x3C {
			t.Errorf("x[1] bytes %x", c.FixedData[2:4])
		}
	},
	// The nested files: values from the files' documentation
	// (parquet-testing data/README.md and its per-file notes) and the rows
	// arrow-rs's record reader tests expect of them.
	"data/repeated_no_annotation.parquet": func(t *testing.T, f *File) {
		eq(t, "id", col(t, f, "id").Int32, []int32{1, 2, 3, 4, 5, 6})
		num, kind := col(t, f, "phoneNumbers.phone.number"), col(t, f, "phoneNumbers.phone.kind")
		for _, c := range []*Column{num, kind} {
			if c.Info.Group != "phoneNumbers.phone" || c.Info.Depth != 1 || c.Info.MapRole != "" {
				t.Errorf("%s: group %q depth %d", c.Info.Name, c.Info.Group, c.Info.Depth)
			}
			eq(t, c.Info.Name+" offsets", c.Offsets, []int64{0, 0, 0, 0, 1, 2, 5})
			eq(t, c.Info.Name+" valid", c.RowValid, []bool{false, false, true, true, true, true})
		}
		eq(t, "number", num.Int64, []int64{5555555555, 1111111111, 1111111111, 2222222222, 3333333333})
		eq(t, "kind", strs(kind), []string{"<null>", "home", "home", "<null>", "mobile"})
	},
	"data/incorrect_map_schema.parquet": func(t *testing.T, f *File) {
		k, v := col(t, f, "my_map.key"), col(t, f, "my_map.value")
		if k.Info.Group != "my_map" || k.Info.MapRole != "key" || v.Info.Group != "my_map" || v.Info.MapRole != "value" {
			t.Errorf("key %+v value %+v", k.Info, v.Info)
		}
		eq(t, "key offsets", k.Offsets, []int64{0, 2})
		eq(t, "value offsets", v.Offsets, k.Offsets)
		// A map's entries are unordered: compare key=value pairs.
		var pairs []string
		for i, key := range strs(k) {
			pairs = append(pairs, key+"="+strs(v)[i])
		}
		slices.Sort(pairs)
		eq(t, "entries", pairs, []string{"name=report", "parent=another"})
	},
	"data/map_no_value.parquet": func(t *testing.T, f *File) {
		keys := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
		for _, name := range []string{"my_map.key", "my_map_no_v.key", "my_list"} {
			c := col(t, f, name)
			eq(t, name+" offsets", c.Offsets, []int64{0, 3, 6, 9})
			eq(t, name, c.Int32, keys)
		}
		if ci, _ := f.Lookup("my_map_no_v.key"); ci.Group != "my_map_no_v" || ci.MapRole != "key" {
			t.Errorf("my_map_no_v.key: group %q role %q", ci.Group, ci.MapRole)
		}
		v := col(t, f, "my_map.value")
		eq(t, "value offsets", v.Offsets, []int64{0, 3, 6, 9})
		eq(t, "value valid", v.ElemValid, make([]bool, 9))
	},
	"data/old_list_structure.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "a")
		eq(t, "offsets", c.Offsets, []int64{0, 2})
		eq(t, "inner offsets", c.InnerOffsets, []int64{0, 2, 4})
		eq(t, "a", c.Int32, []int32{1, 2, 3, 4})
		if c.Info.Depth != 2 || c.RowValid != nil || c.ListValid != nil || c.ElemValid != nil {
			t.Errorf("depth %d validity %v %v %v", c.Info.Depth, c.RowValid, c.ListValid, c.ElemValid)
		}
	},
	"data/nested_lists.snappy.parquet": func(t *testing.T, f *File) {
		ci, err := f.Lookup("a")
		if err != nil {
			t.Fatal(err)
		}
		if want := `column "a" has 3 levels of lists, at most 2 are supported`; !strings.Contains(ci.Unsupported, want) || ci.Depth != 3 {
			t.Errorf("a: depth %d, unsupported %q, want %q", ci.Depth, ci.Unsupported, want)
		}
		eq(t, "b", col(t, f, "b").Int32, []int32{1, 1, 1})
	},
	"data/nested_maps.snappy.parquet": func(t *testing.T, f *File) {
		ci, _ := f.Lookup("a.value.key")
		if want := `column "a.value.key": map "a.value" inside a list or map`; !strings.Contains(ci.Unsupported, want) {
			t.Errorf("a.value.key: unsupported %q, want %q", ci.Unsupported, want)
		}
		if ci, _ := f.Lookup("a.key"); ci.Unsupported != "" || ci.Group != "a" || ci.MapRole != "key" {
			t.Errorf("a.key: %+v", ci)
		}
	},
	"data/nonnullable.impala.parquet": func(t *testing.T, f *File) {
		eq(t, "ID", col(t, f, "ID").Int64, []int64{8})
		eq(t, "Int_Array", col(t, f, "Int_Array").Int32, []int32{-1})
		aa := col(t, f, "int_array_array")
		eq(t, "int_array_array offsets", aa.Offsets, []int64{0, 2})
		eq(t, "int_array_array inner offsets", aa.InnerOffsets, []int64{0, 2, 2})
		eq(t, "int_array_array", aa.Int32, []int32{-1, -2})
		eq(t, "Int_Map.key", strs(col(t, f, "Int_Map.key")), []string{"k1"})
		eq(t, "Int_Map.value", col(t, f, "Int_Map.value").Int32, []int32{-1})
		if ci, _ := f.Lookup("int_map_array.key"); !strings.Contains(ci.Unsupported, "inside a list or map") {
			t.Errorf("int_map_array.key: unsupported %q", ci.Unsupported)
		}
		eq(t, "nested_Struct.a", col(t, f, "nested_Struct.a").Int32, []int32{-1})
		eq(t, "nested_Struct.B", col(t, f, "nested_Struct.B").Int32, []int32{-1})
		e, ff := col(t, f, "nested_Struct.c.D.e"), col(t, f, "nested_Struct.c.D.f")
		for _, c := range []*Column{e, ff} {
			eq(t, c.Info.Name+" offsets", c.Offsets, []int64{0, 1})
			eq(t, c.Info.Name+" inner offsets", c.InnerOffsets, []int64{0, 1})
			if c.Info.Group != "nested_Struct.c.D" || c.Info.Depth != 2 {
				t.Errorf("%s: group %q depth %d", c.Info.Name, c.Info.Group, c.Info.Depth)
			}
		}
		eq(t, "e", e.Int32, []int32{-1})
		eq(t, "f", strs(ff), []string{"nonnullable"})
		eq(t, "G.key offsets", col(t, f, "nested_Struct.G.key").Offsets, []int64{0, 0})
		gi := col(t, f, "nested_Struct.G.value.h.i")
		eq(t, "G.value.h.i offsets", gi.Offsets, []int64{0, 0})
		eq(t, "G.value.h.i inner offsets", gi.InnerOffsets, []int64{0})
		if gi.Info.Group != "nested_Struct.G" || gi.Info.MapRole != "value" || gi.Info.Depth != 2 {
			t.Errorf("G.value.h.i: %+v", gi.Info)
		}
	},
	"data/nullable.impala.parquet": func(t *testing.T, f *File) {
		T, F := true, false
		ia := col(t, f, "int_array")
		eq(t, "int_array offsets", ia.Offsets, []int64{0, 3, 9, 9, 9, 9, 9, 9})
		eq(t, "int_array row valid", ia.RowValid, []bool{T, T, T, F, F, F, F})
		eq(t, "int_array", ia.Int32, []int32{1, 2, 3, 0, 1, 2, 0, 3, 0})
		eq(t, "int_array elem valid", ia.ElemValid, []bool{T, T, T, F, T, T, F, T, F})

		aa := col(t, f, "int_array_Array")
		eq(t, "int_array_Array offsets", aa.Offsets, []int64{0, 2, 6, 7, 7, 7, 7, 9})
		eq(t, "int_array_Array inner offsets", aa.InnerOffsets, []int64{0, 2, 4, 8, 11, 11, 11, 11, 11, 13})
		eq(t, "int_array_Array row valid", aa.RowValid, []bool{T, T, T, T, F, F, T})
		eq(t, "int_array_Array list valid", aa.ListValid, []bool{T, T, T, T, T, F, F, F, T})
		eq(t, "int_array_Array", aa.Int32, []int32{1, 2, 3, 4, 0, 1, 2, 0, 3, 0, 4, 5, 6})
		eq(t, "int_array_Array elem valid", aa.ElemValid, []bool{T, T, T, T, F, T, T, F, T, F, T, T, T})

		mk, mv := col(t, f, "int_map.key"), col(t, f, "int_map.value")
		eq(t, "int_map offsets", mk.Offsets, []int64{0, 2, 4, 4, 4, 4, 4, 6})
		eq(t, "int_map value offsets", mv.Offsets, mk.Offsets)
		eq(t, "int_map row valid", mk.RowValid, []bool{T, T, T, T, T, F, T})
		wantMap := [][]string{{"k1=1", "k2=100"}, {"k1=2", "k2=<null>"}, nil, nil, nil, nil, {"k1=<null>", "k3=<null>"}}
		keys := strs(mk)
		for i := range 7 {
			var got []string
			for k := mk.Offsets[i]; k < mk.Offsets[i+1]; k++ {
				v := "<null>"
				if mv.ElemValid == nil || mv.ElemValid[k] {
					v = strconv.Itoa(int(mv.Int32[k]))
				}
				got = append(got, keys[k]+"="+v)
			}
			slices.Sort(got)
			eq(t, fmt.Sprintf("int_map row %d", i), got, wantMap[i])
		}

		e, ff := col(t, f, "nested_struct.C.d.E"), col(t, f, "nested_struct.C.d.F")
		for _, c := range []*Column{e, ff} {
			eq(t, c.Info.Name+" offsets", c.Offsets, []int64{0, 2, 6, 6, 6, 6, 6, 9})
			eq(t, c.Info.Name+" inner offsets", c.InnerOffsets, []int64{0, 2, 3, 8, 10, 10, 10, 10, 11, 11})
			eq(t, c.Info.Name+" row valid", c.RowValid, []bool{T, T, T, F, F, F, T})
			eq(t, c.Info.Name+" list valid", c.ListValid, []bool{T, T, T, T, T, F, T, T, F})
			eq(t, c.Info.Name+" elem valid", c.ElemValid, []bool{T, T, T, F, T, F, T, F, T, F, F})
		}
		eq(t, "E", e.Int32, []int32{10, -10, 11, 0, 10, 0, -10, 0, 11, 0, 0})
		eq(t, "F", strs(ff), []string{"aaa", "bbb", "c", "<null>", "aaa", "<null>", "bbb", "<null>", "c", "<null>", "<null>"})

		gk, gi := col(t, f, "nested_struct.g.key"), col(t, f, "nested_struct.g.value.H.i")
		eq(t, "g.key offsets", gk.Offsets, []int64{0, 1, 6, 6, 6, 7, 7, 7})
		eq(t, "g.key row valid", gk.RowValid, []bool{T, T, T, F, T, F, F})
		eq(t, "g keys", strs(gk), []string{"foo", "g1", "g2", "g3", "g4", "g5", "foo"})
		eq(t, "g.value.H.i offsets", gi.Offsets, gk.Offsets)
		eq(t, "g.value.H.i row valid", gi.RowValid, gk.RowValid)
		eq(t, "g.value.H.i inner offsets", gi.InnerOffsets, []int64{0, 1, 3, 3, 3, 3, 3, 5})
		eq(t, "g.value.H.i list valid", gi.ListValid, []bool{T, T, T, F, F, F, T})
		eq(t, "g.value.H.i", gi.Float64, []float64{1.1, 2.2, 0, 2.2, 3.3})
		eq(t, "g.value.H.i elem valid", gi.ElemValid, []bool{T, T, F, T, T})
	},
	"bad_data/ARROW-GH-43605.parquet": func(t *testing.T, f *File) {
		c := col(t, f, "min_fl")
		if c.Info.Logical != "INT(16,false)" {
			t.Errorf("logical %q", c.Info.Logical)
		}
		for i, v := range c.Int32 {
			if v < 0 || v > math.MaxUint16 {
				t.Fatalf("min_fl[%d] = %d outside UINT16", i, v)
			}
		}
	},
}

// TestConformanceExpectCSV compares the delta-encoded parquet-testing files
// with the *_expect.csv oracles shipped beside them.
func TestConformanceExpectCSV(t *testing.T) {
	for _, name := range []string{"delta_binary_packed", "delta_byte_array", "delta_encoding_optional_column", "delta_encoding_required_column"} {
		t.Run(name, func(t *testing.T) {
			f := openRel(t, "data/"+name+".parquet")
			raw, err := os.ReadFile(filepath.Join(testdata, "parquet-testing", "data", name+"_expect.csv"))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
			header := parseCSVLine(lines[0])
			rows := lines[1:]
			cols := f.Columns()
			if len(header) != len(cols) {
				t.Fatalf("csv has %d columns, file %d", len(header), len(cols))
			}
			checked := 0
			for j, h := range header {
				if strings.TrimSpace(h.s) != strings.TrimSuffix(cols[j].Name, ":") { // the required-column file names its columns "x:"
					t.Fatalf("csv column %d is %q, file has %q", j, h.s, cols[j].Name)
				}
				c := col(t, f, cols[j].Name)
				if c.Rows != len(rows) {
					t.Fatalf("%s: %d rows, csv %d", cols[j].Name, c.Rows, len(rows))
				}
				for i, line := range rows {
					cell := parseCSVLine(line)[j]
					null := cell.s == "" && !cell.quoted
					valid := c.RowValid == nil || c.RowValid[i]
					if null != !valid {
						t.Fatalf("%s row %d: valid %v, csv %q", cols[j].Name, i, valid, cell.s)
					}
					if null {
						continue
					}
					var got string
					switch c.Kind {
					case KindInt32:
						got = strconv.FormatInt(int64(c.Int32[i]), 10)
					case KindInt64:
						got = strconv.FormatInt(c.Int64[i], 10)
					case KindBytes:
						got = string(bytesAt(c, i))
					default:
						t.Fatalf("%s: kind %s", cols[j].Name, c.Kind)
					}
					if got != cell.s {
						t.Fatalf("%s row %d = %q, csv %q", cols[j].Name, i, got, cell.s)
					}
					checked++
				}
			}
			if checked == 0 {
				t.Fatal("nothing compared")
			}
		})
	}
}

type csvCell struct {
	s      string
	quoted bool
}

// parseCSVLine splits one RFC 4180 line, remembering which cells were
// quoted (an unquoted empty cell is a null in these oracles, "" an empty
// string).
func parseCSVLine(line string) []csvCell {
	var out []csvCell
	for i := 0; ; {
		var c csvCell
		if i < len(line) && line[i] == '"' {
			c.quoted = true
			i++
			var b strings.Builder
			for i < len(line) {
				if line[i] == '"' {
					if i+1 < len(line) && line[i+1] == '"' {
						b.WriteByte('"')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(line[i])
				i++
			}
			c.s = b.String()
		} else {
			j := strings.IndexByte(line[i:], ',')
			if j < 0 {
				j = len(line) - i
			}
			c.s = line[i : i+j]
			i += j
		}
		out = append(out, c)
		if i >= len(line) {
			return out
		}
		i++ // the comma
	}
}
