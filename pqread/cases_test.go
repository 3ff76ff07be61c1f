package pqread

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strconv"
	"testing"
)

// Field-failure cases from testdata/cases (each folder's case.json holds the
// expected values; README.md there indexes them). One test per case, named
// after the fault it pins.

// caseJSON loads the "expect" object of a case.
func caseExpect(t *testing.T, c string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(casePath(c, "case.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Expect map[string]any `json:"expect"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	return d.Expect
}

// hexBits parses a list of hex bit patterns; nil entries become -1 (null).
func hexBits(t *testing.T, v any) []int64 {
	t.Helper()
	var out []int64
	for _, x := range v.([]any) {
		if x == nil {
			out = append(out, -1)
			continue
		}
		u, err := strconv.ParseUint(x.(string), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, int64(u))
	}
	return out
}

func TestCaseB01ZeroVsNull(t *testing.T) {
	f := mustOpen(t, casePath("B01-zero-vs-null", "zeros_and_nulls.parquet"))
	x := mustRead(t, f, "x", 0)
	if x.Kind != KindFloat32 || !slices.Equal(x.RowValid, []bool{false, true, true, false}) || !slices.Equal(x.Float32, []float32{0, 0, 1.5, 0}) {
		t.Fatalf("x: kind %s valid %v values %v", x.Kind, x.RowValid, x.Float32)
	}
	y := mustRead(t, f, "y", 0)
	if y.Kind != KindInt64 || !slices.Equal(y.RowValid, []bool{true, false, true, false}) || !slices.Equal(y.Int64, []int64{0, 0, 7, 0}) {
		t.Fatalf("y: kind %s valid %v values %v", y.Kind, y.RowValid, y.Int64)
	}
	if ci, _ := f.Lookup("x"); !ci.Nullable || ci.List {
		t.Fatalf("x info %+v", ci)
	}
}

func TestCaseB03ListNullElement(t *testing.T) {
	f := mustOpen(t, casePath("B03-list-null-element", "list_null_elem.parquet"))
	v := mustRead(t, f, "v", 0)
	if !slices.Equal(v.Offsets, []int64{0, 3, 6}) || v.RowValid != nil {
		t.Fatalf("offsets %v rowValid %v", v.Offsets, v.RowValid)
	}
	if !slices.Equal(v.ElemValid, []bool{true, false, true, true, true, true}) {
		t.Fatalf("elemValid %v", v.ElemValid)
	}
	if !slices.Equal(v.Float32, []float32{3, 0, 2, 4, 5, 6}) {
		t.Fatalf("values %v", v.Float32)
	}
	if !v.Info.ElemNullable || !v.Info.List {
		t.Fatalf("info %+v", v.Info)
	}
	id := mustRead(t, f, "id", 0)
	if !slices.Equal(id.Int32, []int32{0, 1}) {
		t.Fatalf("id %v", id.Int32)
	}
}

func TestCaseB04ListLayouts(t *testing.T) {
	want := []float32{}
	for i := range 4 {
		want = append(want, float32(i), float32(i)+0.5, -float32(i), 0.25)
	}
	for _, file := range []string{"emb_array_duckdb.parquet", "emb_bare_repeated.parquet", "emb_list_duckdb.parquet", "emb_list_parquet_go.parquet"} {
		t.Run(file, func(t *testing.T) {
			f := mustOpen(t, casePath("B04-list-layouts", file))
			v := mustRead(t, f, "emb", 0)
			if !v.Info.List || v.Info.Name != "emb" {
				t.Fatalf("info %+v", v.Info)
			}
			if !slices.Equal(v.Offsets, []int64{0, 4, 8, 12, 16}) || v.RowValid != nil || v.ElemValid != nil {
				t.Fatalf("offsets %v valid %v elem %v", v.Offsets, v.RowValid, v.ElemValid)
			}
			if !slices.Equal(v.Float32, want) {
				t.Fatalf("values %v", v.Float32)
			}
		})
	}
}

func TestCaseB06RaggedLists(t *testing.T) {
	for _, file := range []string{"ragged.parquet", "ragged_double.parquet"} {
		f := mustOpen(t, casePath("B06-ragged-lists", file))
		v := mustRead(t, f, "v", 0)
		if !slices.Equal(v.Offsets, []int64{0, 3, 5, 5, 10}) {
			t.Fatalf("%s offsets %v", file, v.Offsets)
		}
		var got []float64
		for _, x := range v.Float32 {
			got = append(got, float64(x))
		}
		got = append(got, v.Float64...)
		if !slices.Equal(got, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Fatalf("%s values %v", file, got)
		}
		if v.RowValid != nil && !slices.Equal(v.RowValid, []bool{true, true, true, true}) {
			t.Fatalf("%s rowValid %v (the empty list is not null)", file, v.RowValid)
		}
	}
}

func TestCaseB07DictFallback(t *testing.T) {
	f := mustOpen(t, casePath("B07-dict-fallback", "dict_then_plain.parquet"))
	x := mustRead(t, f, "x", 0)
	if x.Rows != 20000 {
		t.Fatalf("rows %d", x.Rows)
	}
	var sum int64
	for i, v := range x.Int64 {
		want := int64(i % 4)
		if i >= 10000 {
			want = 100000 + int64(i-10000)
		}
		if v != want {
			t.Fatalf("x[%d] = %d, want %d", i, v, want)
		}
		sum += v
	}
	if sum != 1050010000 {
		t.Fatalf("sum %d", sum)
	}
	if got := sha256LE(x.Int64); got != "91aa3fcb4290892a7538b62815eca77cdefe3bc4a7ece44e769076cb39e04b41" {
		t.Fatalf("sha256 %s", got)
	}
}

func TestCaseB09DeltaIntExtremes(t *testing.T) {
	a := []int64{math.MinInt64, math.MaxInt64, 0, -1, math.MaxInt64, math.MinInt64}
	b := []int32{math.MinInt32, math.MaxInt32, 0, -1, math.MaxInt32, math.MinInt32}
	f := mustOpen(t, casePath("B09-delta-int-extremes", "delta_extremes.parquet"))
	ca := mustRead(t, f, "a", 0)
	cb := mustRead(t, f, "b", 0)
	for i := range 300 {
		if ca.Int64[i] != a[i%6] || cb.Int32[i] != b[i%6] {
			t.Fatalf("row %d: a=%d b=%d", i, ca.Int64[i], cb.Int32[i])
		}
	}
	if sha256LE(ca.Int64) != "460c0effb191765bcec266fc1f9208f1e9b01d30419ce8c78ad9d9d3fdbd96eb" ||
		sha256LE(cb.Int32) != "ccf4a4f2bee0ce4cfb50236a96d24bfe593726795a23cce51fefc994f91e6cc4" {
		t.Fatal("sha256 mismatch")
	}
	// 33-bit miniblocks: parquet-go v0.32.0 returns wrong numbers here
	// without an error; pqread decodes them with wrapping arithmetic.
	w := mustOpen(t, casePath("B09-delta-int-extremes", "delta_int32_wide_miniblocks.parquet"))
	cw := mustRead(t, w, "b", 0)
	if !slices.Equal(cw.Int32, cb.Int32) {
		t.Fatalf("wide miniblocks decode to %v...", cw.Int32[:12])
	}
}

func TestCaseB10DeltaByteArray(t *testing.T) {
	ex := caseExpect(t, "B10-delta-byte-array")["values"].(map[string]any)
	s := ex["s"].(map[string]any)
	fb := ex["fb"].(map[string]any)
	var cols [][2]*Column
	for _, file := range []string{"strings_delta_byte_array.parquet", "strings_plain.parquet"} {
		f := mustOpen(t, casePath("B10-delta-byte-array", file))
		cs, cf := mustRead(t, f, "s", 0), mustRead(t, f, "fb", 0)
		if sha256Hex(cs.Data) != s["blob_sha256"] || sha256LE(cs.ByteOffsets) != s["offsets_int64_sha256_le"] {
			t.Fatalf("%s: s blob or offsets differ (first offsets %v)", file, cs.ByteOffsets[:7])
		}
		if cf.Kind != KindFixed || cf.Width != 4 || sha256Hex(cf.FixedData) != fb["blob_sha256"] {
			t.Fatalf("%s: fb differs", file)
		}
		for i := range 6000 {
			want := []byte{0x66, 0x62, byte(i >> 8), byte(i)}
			if !bytes.Equal(cf.FixedData[4*i:4*i+4], want) {
				t.Fatalf("%s: fb[%d] = %x", file, i, cf.FixedData[4*i:4*i+4])
			}
		}
		cols = append(cols, [2]*Column{cs, cf})
	}
	if !bytes.Equal(cols[0][0].Data, cols[1][0].Data) || !slices.Equal(cols[0][0].ByteOffsets, cols[1][0].ByteOffsets) {
		t.Fatal("DELTA_BYTE_ARRAY and PLAIN strings differ")
	}
}

func TestCaseB11ByteStreamSplitNulls(t *testing.T) {
	ex := caseExpect(t, "B11-byte-stream-split-nulls")["values"].(map[string]any)
	f := mustOpen(t, casePath("B11-byte-stream-split-nulls", "bss_nullable.parquet"))
	for _, name := range []string{"x", "d"} {
		c := mustRead(t, f, name, 0)
		want := hexBits(t, ex[name].(map[string]any)["bits"])
		if c.Rows != 100 || len(want) != 100 {
			t.Fatalf("%s: %d rows, %d expected", name, c.Rows, len(want))
		}
		for i := range 100 {
			null := i%4 == 3
			if c.RowValid[i] == null || (want[i] == -1) != null {
				t.Fatalf("%s row %d: valid %v, expected bits %x", name, i, c.RowValid[i], want[i])
			}
			if null {
				continue
			}
			var got int64
			if name == "x" {
				got = int64(math.Float32bits(c.Float32[i]))
			} else {
				got = int64(math.Float64bits(c.Float64[i]))
			}
			if got != want[i] {
				t.Fatalf("%s row %d: bits %x, want %x", name, i, got, want[i])
			}
		}
	}
}

func TestCaseB13NegativeDecimals(t *testing.T) {
	ex := caseExpect(t, "B13-negative-decimals")["values"].(map[string]any)
	wantBits := hexBits(t, ex["float64"].(map[string]any)["bits"])
	unscaled := []int64{-1234567, -1, 1, 0, 123456789}
	check := func(file, col string, got []float64) {
		t.Helper()
		for i, v := range got {
			if int64(math.Float64bits(v)) != wantBits[i] {
				t.Fatalf("%s %s[%d] = %v (%x), want bits %x", file, col, i, v, math.Float64bits(v), wantBits[i])
			}
		}
	}
	f := mustOpen(t, casePath("B13-negative-decimals", "decimals_duckdb.parquet"))
	for _, name := range []string{"s", "m", "b"} {
		c := mustRead(t, f, name, 0)
		if c.Info.Scale != 2 || c.Info.Logical == "" {
			t.Fatalf("%s info %+v", name, c.Info)
		}
		var got []float64
		for i := range c.Rows {
			var u int64
			switch c.Kind {
			case KindInt32:
				u = int64(c.Int32[i])
				got = append(got, DecimalInt64ToFloat64(u, c.Info.Scale))
			case KindInt64:
				u = c.Int64[i]
				got = append(got, DecimalInt64ToFloat64(u, c.Info.Scale))
			case KindFixed:
				be := c.FixedData[i*c.Width : (i+1)*c.Width]
				got = append(got, DecimalToFloat64(be, c.Info.Scale))
			}
		}
		check("decimals_duckdb.parquet", name, got)
	}
	f13 := mustOpen(t, casePath("B13-negative-decimals", "decimal_flba13.parquet"))
	c := mustRead(t, f13, "b", 0)
	if c.Width != 13 || c.Info.Precision != 29 || c.Info.Scale != 2 || c.Info.Logical != "DECIMAL(29,2)" {
		t.Fatalf("info %+v", c.Info)
	}
	var got []float64
	for i, h := range ex["flba13_hex_be"].([]any) {
		be := c.FixedData[i*13 : (i+1)*13]
		if hex.EncodeToString(be) != h {
			t.Fatalf("b[%d] bytes %x, want %s", i, be, h)
		}
		got = append(got, DecimalToFloat64(be, 2))
		if DecimalInt64ToFloat64(unscaled[i], 2) != got[i] {
			t.Fatalf("big-endian and int64 paths differ at %d", i)
		}
	}
	check("decimal_flba13.parquet", "b", got)
}

func TestCaseB14Float16Input(t *testing.T) {
	want := []uint16{0x3C00, 0xC000, 0x7BFF, 0x7C00, 0x7E01, 0x0001, 0x8000}
	for _, file := range []string{"f16_plain.parquet", "f16_byte_stream_split.parquet", "f16_unannotated_flba2.parquet"} {
		f := mustOpen(t, casePath("B14-float16-input", file))
		c := mustRead(t, f, "h", 0)
		wantLogical := "FLOAT16"
		if file == "f16_unannotated_flba2.parquet" {
			wantLogical = ""
		}
		if c.Kind != KindFixed || c.Width != 2 || c.Info.Logical != wantLogical {
			t.Fatalf("%s: kind %s width %d logical %q", file, c.Kind, c.Width, c.Info.Logical)
		}
		if c.Rows != 8 || c.RowValid[7] || c.FixedData[14] != 0 || c.FixedData[15] != 0 {
			t.Fatalf("%s: rows %d valid %v", file, c.Rows, c.RowValid)
		}
		for i, w := range want {
			got := uint16(c.FixedData[2*i]) | uint16(c.FixedData[2*i+1])<<8
			if got != w || !c.RowValid[i] {
				t.Fatalf("%s: h[%d] = %04X, want %04X", file, i, got, w)
			}
		}
	}
}

func TestCaseB16NaNInf(t *testing.T) {
	ex := caseExpect(t, "B16-nan-inf")["values"].(map[string]any)
	want := hexBits(t, ex["x"].(map[string]any)["bits"])
	f := mustOpen(t, casePath("B16-nan-inf", "nan_inf_two_row_groups.parquet"))
	if !slices.Equal(f.RowGroups(), []int64{5, 5}) {
		t.Fatalf("row groups %v", f.RowGroups())
	}
	var got []int64
	for rg := range 2 {
		for _, v := range mustRead(t, f, "x", rg).Float64 {
			got = append(got, int64(math.Float64bits(v)))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("bits %x, want %x", got, want)
	}
}

func TestCaseB19CorruptFiles(t *testing.T) {
	for _, tc := range []struct {
		file  string
		parts []string
	}{
		{"zero_bytes.parquet", []string{"zero_bytes.parquet", "too small"}},
		{"cut_half.parquet", []string{"cut_half.parquet", "magic"}},
		{"cut_last_byte.parquet", []string{"cut_last_byte.parquet", "magic"}},
		{"footer_len_ffffffff.parquet", []string{"footer_len_ffffffff.parquet", "footer length 4294967295"}},
	} {
		_, err := Open(casePath("B19-corrupt-files", tc.file), Limits{})
		wantErr(t, err, ErrCorrupt, tc.parts...)
	}
	// The footer of this one is intact; the page header of x in row group 1
	// is damaged, so Open succeeds and that one ReadColumn fails.
	f := mustOpen(t, casePath("B19-corrupt-files", "bad_page_header_rg1_x.parquet"))
	x, _ := f.Lookup("x")
	for rg := range 3 {
		c, err := f.ReadColumn(rg, x)
		if rg == 1 {
			wantErr(t, err, ErrCorrupt, "bad_page_header_rg1_x.parquet", `column "x"`, "row group 1", "page 0", "page header")
			continue
		}
		if err != nil {
			t.Fatalf("row group %d: %v", rg, err)
		}
		for i, v := range c.Float32 {
			if v != float32(rg*10+i)*0.5 {
				t.Fatalf("row group %d x[%d] = %v", rg, i, v)
			}
		}
		if id := mustRead(t, f, "id", 1); id.Int64[0] != 10 {
			t.Fatalf("id of row group 1 = %v", id.Int64)
		}
	}
}

func TestCaseB20ListsAcrossPages(t *testing.T) {
	for _, file := range []string{"emb_pages_row_aligned.parquet", "emb_pages_split_rows.parquet"} {
		f := mustOpen(t, casePath("B20-lists-across-pages", file))
		var all []float32
		id := int64(0)
		for rg := range f.RowGroups() {
			ids := mustRead(t, f, "id", rg)
			emb := mustRead(t, f, "emb", rg)
			for r := range emb.Rows {
				if ids.Int64[r] != id {
					t.Fatalf("%s: id %d at row %d", file, ids.Int64[r], id)
				}
				lo, hi := emb.Offsets[r], emb.Offsets[r+1]
				if hi-lo != (7*id)%41 {
					t.Fatalf("%s: row %d has %d elements, want %d", file, id, hi-lo, (7*id)%41)
				}
				for k := lo; k < hi; k++ {
					if emb.Float32[k] != float32(id*1000+(k-lo)) {
						t.Fatalf("%s: emb[%d][%d] = %v", file, id, k-lo, emb.Float32[k])
					}
				}
				all = append(all, emb.Float32[lo:hi]...)
				id++
			}
		}
		if id != 2000 || len(all) != 39962 || sha256LE(all) != "72863c7685a26062a3c7658a5f1b22636812eb13bb582864caf80527d8527adc" {
			t.Fatalf("%s: %d rows, %d elements", file, id, len(all))
		}
	}
}

func TestCaseB21HugeString(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 40 MB")
	}
	path := casePath("B21-huge-string", "hugestr.parquet")
	f := mustOpen(t, path)
	c := mustRead(t, f, "text", 0)
	if !slices.Equal(c.ByteOffsets, []int64{0, 5, 40000005, 40000010}) {
		t.Fatalf("offsets %v", c.ByteOffsets)
	}
	if sha256Hex(c.Data) != "46250fed082c180886fe1e128b97d51c39b8d3381a86de4102b3d591f9e5ee69" {
		t.Fatal("blob differs")
	}
	lf, err := Open(path, Limits{MaxValueBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	ci, _ := lf.Lookup("text")
	_, err = lf.ReadColumn(0, ci)
	wantErr(t, err, ErrLimit, "hugestr.parquet", `column "text"`, "row group 0", "row 1", "40000000")
}

func TestCaseB23ColumnOrder(t *testing.T) {
	// f1 holds ids 0..2 as (id, x, y); f2 ids 3..5 as (y, id, x).
	for fi, file := range []string{"f1.parquet", "f2.parquet"} {
		f := mustOpen(t, casePath("B23-column-order", file))
		id, x, y := mustRead(t, f, "id", 0), mustRead(t, f, "x", 0), mustRead(t, f, "y", 0)
		for i := range 3 {
			want := int64(3*fi + i)
			if id.Int64[i] != want || x.Float32[i] != float32(want) || math.Float32bits(y.Float32[i]) != math.Float32bits(-float32(want)+0) {
				t.Fatalf("%s row %d: %d %v %v", file, i, id.Int64[i], x.Float32[i], y.Float32[i])
			}
		}
	}
}

func TestCaseB25ColumnNames(t *testing.T) {
	f := mustOpen(t, casePath("B25-column-names", "names.parquet"))
	readI := func(name string) int32 {
		c := mustRead(t, f, name, 0)
		return c.Int32[0]
	}
	for name, want := range map[string]int32{"Тест": 1, "ест": 2, "région": 6, "Creation-Time": 7} {
		if got := readI(name); got != want {
			t.Fatalf("%s = %d, want %d", name, got, want)
		}
	}
	readF := func(name string) float32 { return mustRead(t, f, name, 0).Float32[0] }
	for name, want := range map[string]float32{`a\.b`: 3.5, `["a.b"]`: 3.5, `["a","b"]`: 4.5} {
		if got := readF(name); got != want {
			t.Fatalf("%s = %v, want %v", name, got, want)
		}
	}
	// "a.b" spells both the top-level column and field b of struct a.
	_, err := f.Lookup("a.b")
	wantErr(t, err, ErrAmbiguous, `a\\.b`, `"a.b"`)
	_, err = f.Lookup("тест")
	wantErr(t, err, ErrNotFound)
	var names []string
	for _, c := range f.Columns() {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"Тест", "ест", `a\.b`, "a.b", "région", "Creation-Time"}) {
		t.Fatalf("names %q", names)
	}
}
