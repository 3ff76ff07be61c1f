package feature

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// The field cases of testdata/cases (see its README.md): real files that
// other readers got wrong, with the expected values from their case.json.

// materializeAll converts every sample of p with the YAML spec.
func materializeAll(t *testing.T, p *plan.Plan, specYAML string) (*Samples, error) {
	t.Helper()
	spec, err := ParseSpec([]byte(specYAML), "spec.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, p.NumSamples())
	for i := range ids {
		ids[i] = uint64(i)
	}
	return Materialize(context.Background(), nil, p, spec, ids, Bounds{})
}

func tensorIndex(t *testing.T, s *Samples, name string) int {
	for i, ti := range s.Tensors {
		if ti.Name == name {
			return i
		}
	}
	t.Fatalf("no tensor %q", name)
	return -1
}

func f32bitsOf(t *testing.T, s *Samples, name string) []string {
	var out []string
	for _, w := range featuretest.F32s(s.Data[tensorIndex(t, s, name)]) {
		out = append(out, fmt.Sprintf("%08x", w))
	}
	return out
}

func TestCaseB01ZeroVsNull(t *testing.T) {
	p := featuretest.CaseSource(t, "B01-zero-vs-null", "zeros_and_nulls.parquet")
	_, err := materializeAll(t, p, "tensors: [{name: x, column: x, dtype: F32}]")
	featuretest.MustContainAll(t, err, "zeros_and_nulls.parquet", `column "x"`, "row group 0", "row 0", "2 nulls")
	s, err := materializeAll(t, p, `
tensors:
  - {name: x, column: x, dtype: F32, nulls: {fill: NaN, mask: true}}
  - {name: y, column: y, dtype: I64, nulls: {fill: -1, mask: true}}`)
	if err != nil {
		t.Fatal(err)
	}
	x := f32bitsOf(t, s, "x")
	if !math.IsNaN(float64(math.Float32frombits(featuretest.F32s(s.Data[0])[0]))) || x[1] != "00000000" || x[2] != "3fc00000" || !math.IsNaN(float64(math.Float32frombits(featuretest.F32s(s.Data[0])[3]))) {
		t.Errorf("x = %v", x)
	}
	if got := fmt.Sprint(s.Data[tensorIndex(t, s, "x_mask")], featuretest.I64s(s.Data[tensorIndex(t, s, "y")]), s.Data[tensorIndex(t, s, "y_mask")]); got != "[0 1 1 0] [0 -1 7 -1] [1 0 1 0]" {
		t.Errorf("x mask, y, y mask = %s", got)
	}
}

func TestCaseB03ListNullElement(t *testing.T) {
	p := featuretest.CaseSource(t, "B03-list-null-element", "list_null_elem.parquet")
	_, err := materializeAll(t, p, "tensors: [{name: v, column: v, dtype: F32, shape: [3]}]")
	featuretest.MustContainAll(t, err, "list_null_elem.parquet", `column "v"`, "row 0", "element 1")
	s, err := materializeAll(t, p, "tensors: [{name: v, column: v, dtype: F32, shape: [3], list: {element_fill: NaN, element_mask: true}}]")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(f32bitsOf(t, s, "v")); got != "[40400000 7fc00000 40000000 40800000 40a00000 40c00000]" {
		t.Errorf("v = %s", got)
	}
	if got := fmt.Sprint(s.Data[1]); got != "[1 0 1 1 1 1]" {
		t.Errorf("element mask = %s", got)
	}
}

func TestCaseB04ListLayouts(t *testing.T) {
	for _, f := range []string{"emb_array_duckdb.parquet", "emb_bare_repeated.parquet", "emb_list_duckdb.parquet", "emb_list_parquet_go.parquet"} {
		p := featuretest.CaseSource(t, "B04-list-layouts", f)
		s, err := materializeAll(t, p, "tensors: [{name: emb, column: emb, dtype: F32, shape: [4]}]")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var want []byte
		for i := 0; i < 4; i++ {
			for _, v := range []float32{float32(i), float32(i) + 0.5, float32(-i), 0.25} {
				if i == 0 && v == 0 {
					v = 0 // +0.0, not -0.0
				}
				want = binary.LittleEndian.AppendUint32(want, math.Float32bits(v))
			}
		}
		if string(s.Data[0]) != string(want) {
			t.Errorf("%s: emb = %v", f, f32bitsOf(t, s, "emb"))
		}
		// The same rows as a jagged tensor: every layout gives the same
		// values and 4 values per row.
		j, err := materializeAll(t, p, "tensors: [{name: emb, column: emb, dtype: F32, list: {jagged: true}}]")
		if err != nil {
			t.Fatalf("%s jagged: %v", f, err)
		}
		if string(j.Data[0]) != string(want) || fmt.Sprint(j.Offsets[0]) != "[0 4 8 12 16]" || !j.Tensors[0].Jagged {
			t.Errorf("%s jagged: emb = %v, offsets %v, tensor %+v", f, f32bitsOf(t, j, "emb"), j.Offsets[0], j.Tensors[0])
		}
	}
}

func TestCaseB06RaggedLists(t *testing.T) {
	for _, f := range []string{"ragged.parquet", "ragged_double.parquet"} {
		p := featuretest.CaseSource(t, "B06-ragged-lists", f)
		_, err := materializeAll(t, p, "tensors: [{name: v, column: v, dtype: F32, shape: [4]}]")
		featuretest.MustContainAll(t, err, f, `column "v"`, "row 0", "length 3, not 4", "4 rows")
		s, err := materializeAll(t, p, "tensors: [{name: v, column: v, dtype: F32, shape: [4], list: {pad: 0, truncate: true, lengths: true}}]")
		if err != nil {
			t.Fatal(err)
		}
		var vals []float32
		for _, b := range featuretest.F32s(s.Data[0]) {
			vals = append(vals, math.Float32frombits(b))
		}
		if got := fmt.Sprint(vals, featuretest.I32s(s.Data[1])); got != "[1 2 3 0 4 5 0 0 0 0 0 0 6 7 8 9] [3 2 0 5]" {
			t.Errorf("%s: %s", f, got)
		}
		// Jagged: no padding, nothing cut; the empty row has no values.
		j, err := materializeAll(t, p, "tensors: [{name: v, column: v, dtype: F32, list: {jagged: true}}]")
		if err != nil {
			t.Fatal(err)
		}
		vals = vals[:0]
		for _, b := range featuretest.F32s(j.Data[0]) {
			vals = append(vals, math.Float32frombits(b))
		}
		if got := fmt.Sprint(vals, j.Offsets[0]); got != "[1 2 3 4 5 6 7 8 9 10] [0 3 5 5 10]" {
			t.Errorf("%s jagged: %s", f, got)
		}
	}
}

func TestCaseB13NegativeDecimals(t *testing.T) {
	f64 := "[c0c81cd5c28f5c29 bf847ae147ae147b 3f847ae147ae147b 0000000000000000 4132d687e3d70a3d]"
	f32 := "[c640e6ae bc23d70a 3c23d70a 00000000 4996b43f]"
	for file, cols := range map[string][]string{"decimals_duckdb.parquet": {"s", "m", "b"}, "decimal_flba13.parquet": {"b"}} {
		p := featuretest.CaseSource(t, "B13-negative-decimals", file)
		for _, c := range cols {
			s, err := materializeAll(t, p, fmt.Sprintf("tensors: [{name: d, column: %s, dtype: F64}, {name: f, column: %s, dtype: F32}]", c, c))
			if err != nil {
				t.Fatalf("%s %s: %v", file, c, err)
			}
			var got []string
			for _, v := range featuretest.I64s(s.Data[0]) {
				got = append(got, fmt.Sprintf("%016x", uint64(v)))
			}
			if fmt.Sprint(got) != f64 {
				t.Errorf("%s %s F64 = %v", file, c, got)
			}
			if g := fmt.Sprint(f32bitsOf(t, s, "f")); g != f32 {
				t.Errorf("%s %s F32 = %s", file, c, g)
			}
		}
	}
}

func TestCaseB14Float16Input(t *testing.T) {
	for _, f := range []string{"f16_plain.parquet", "f16_byte_stream_split.parquet"} {
		p := featuretest.CaseSource(t, "B14-float16-input", f)
		s, err := materializeAll(t, p, "tensors: [{name: h, column: h, dtype: F32, nulls: {fill: 0, mask: true}}, {name: r, column: h, dtype: F16, nulls: {fill: 0}}]")
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if got := fmt.Sprint(f32bitsOf(t, s, "h")); got != "[3f800000 c0000000 477fe000 7f800000 7fc02000 33800000 80000000 00000000]" {
			t.Errorf("%s: h = %s", f, got)
		}
		if got := fmt.Sprintf("%x %v", s.Data[tensorIndex(t, s, "r")], s.Data[1]); got != "003c00c0ff7b007c017e010000800000 [1 1 1 1 1 1 1 0]" {
			t.Errorf("%s: F16 bits, mask = %s", f, got)
		}
	}
	p := featuretest.CaseSource(t, "B14-float16-input", "f16_unannotated_flba2.parquet")
	_, err := materializeAll(t, p, "tensors: [{name: h, column: h, dtype: F32, nulls: {fill: 0}}]")
	featuretest.MustContainAll(t, err, "f16_unannotated_flba2.parquet", `"h"`, "FLOAT16")
	s, err := materializeAll(t, p, "tensors: [{name: h, column: h, dtype: F32, nulls: {fill: 0}, cast: {from_unannotated: F16}}]")
	if err != nil {
		t.Fatal(err)
	}
	if got := f32bitsOf(t, s, "h")[4]; got != "7fc02000" {
		t.Errorf("declared half: %s", got)
	}
}

func TestCaseB16NaNInf(t *testing.T) {
	p := featuretest.CaseSource(t, "B16-nan-inf", "nan_inf_two_row_groups.parquet")
	s, err := materializeAll(t, p, "tensors: [{name: x, column: x, dtype: F64}]")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range featuretest.I64s(s.Data[0]) {
		got = append(got, fmt.Sprintf("%016x", uint64(v)))
	}
	want := "[7ff8000000000000 3ff0000000000000 4000000000000000 7ff0000000000000 fff0000000000000 7ff8000000000000 7ff8000000000001 4008000000000000 8000000000000000 0000000000000001]"
	if fmt.Sprint(got) != want {
		t.Errorf("x = %v", got)
	}
	_, err = materializeAll(t, p, "tensors: [{name: x, column: x, dtype: F64, nan: {policy: error}}]")
	featuretest.MustContainAll(t, err, "nan_inf_two_row_groups.parquet", `column "x"`, "row group 0", "row 0", "NaN")
}

func TestCaseB21HugeString(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes a 40 MB value")
	}
	p := featuretest.CaseSource(t, "B21-huge-string", "hugestr.parquet")
	_, err := materializeAll(t, p, "tensors: [{name: t, column: text, dtype: I64, max_value_bytes: 1000000, bytes: {mode: hash, buckets: 100}}]")
	// Refused by pqread before the value is copied out of its page.
	featuretest.MustContainAll(t, err, "hugestr.parquet", `column "text"`, "row group 0", "row 1", "value length 40000000 exceeds the limit of 1000000 bytes")
	if !errors.Is(err, pqread.ErrLimit) {
		t.Errorf("error %v does not wrap pqread.ErrLimit", err)
	}
	s, err := materializeAll(t, p, "tensors: [{name: t, column: text, dtype: U8, bytes: {mode: pad, max_len: 8, truncate: true, lengths: true}}]")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%q %v", s.Data[0], featuretest.I32s(s.Data[1])); got != `"small\x00\x00\x00xxxxxxxxsmall\x00\x00\x00" [5 40000000 5]` {
		t.Errorf("got %s", got)
	}
}

func TestCaseB23ColumnOrder(t *testing.T) {
	p := featuretest.CaseSource(t, "B23-column-order", "f1.parquet", "f2.parquet")
	s, err := materializeAll(t, p, "tensors: [{name: id, column: id, dtype: I64}, {name: xy, columns: [x, y], dtype: F32}]")
	if err != nil {
		t.Fatal(err)
	}
	ids := featuretest.I64s(s.Data[0])
	xy := featuretest.F32s(s.Data[1])
	for i, id := range ids {
		if math.Float32frombits(xy[2*i]) != float32(id) || xy[2*i+1] != math.Float32bits(-float32(id)) && !(id == 0 && xy[2*i+1] == 0) {
			t.Errorf("row %d: id %d x %v y %08x", i, id, math.Float32frombits(xy[2*i]), xy[2*i+1])
		}
	}
	if fmt.Sprint(ids) != "[0 1 2 3 4 5]" {
		t.Errorf("ids %v", ids)
	}
}

func TestCaseB25ColumnNames(t *testing.T) {
	p := featuretest.CaseSource(t, "B25-column-names", "names.parquet")
	s, err := materializeAll(t, p, `
tensors:
  - {name: "Тест", column: "Тест", dtype: I32}
  - {name: "ест", column: "ест", dtype: I32}
  - {name: "région", column: "région", dtype: I32}
  - {name: "Creation-Time", column: "Creation-Time", dtype: I32}
  - {name: top, column: 'a\.b', dtype: F32}
  - {name: nested, column: '["a", "b"]', dtype: F32}`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, ti := range s.Tensors {
		if ti.DType.String() == "I32" {
			got = append(got, fmt.Sprint(ti.Name, "=", featuretest.I32s(s.Data[i])[0]))
		} else {
			got = append(got, fmt.Sprint(ti.Name, "=", math.Float32frombits(featuretest.F32s(s.Data[i])[0])))
		}
	}
	if fmt.Sprint(got) != "[Тест=1 ест=2 région=6 Creation-Time=7 top=3.5 nested=4.5]" {
		t.Errorf("got %v", got)
	}
	_, err = materializeAll(t, p, "tensors: [{name: ab, column: a.b, dtype: F32}]")
	featuretest.MustContainAll(t, err, "a.b", "ambiguous")
}
