package feature

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/pqread"
)

// B03: a null element in the middle of a list must not shift later values.
func TestListNullElement(t *testing.T) {
	vi := pqread.ColumnInfo{Name: "v", Physical: "FLOAT", List: true, ElemNullable: true}
	v := &pqread.Column{Info: vi, Kind: pqread.KindFloat32, Rows: 2, Offsets: []int64{0, 3, 6},
		ElemValid: []bool{true, false, true, true, true, true}, Float32: []float32{3, 0, 2, 4, 5, 6}}
	sch := schemaOf("list_null_elem.parquet", vi)
	_, _, err := convertRows(t, TensorSpec{Name: "v", Column: "v", DType: "F32", Shape: []int64{3}}, sch, v)
	if err == nil || !strings.Contains(err.Error(), `list_null_elem.parquet: column "v", row group 0, row 0, element 1: null list element`) {
		t.Fatalf("err = %v", err)
	}
	_, bufs, err := convertRows(t, TensorSpec{Name: "v", Column: "v", DType: "F32", Shape: []int64{3},
		List: &ListPolicy{ElementFill: mustNum("NaN"), ElementMask: true}}, sch, v)
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{math.Float32bits(3), nan32, math.Float32bits(2), math.Float32bits(4), math.Float32bits(5), math.Float32bits(6)}
	if fmt.Sprint(featuretest.F32s(bufs[0])) != fmt.Sprint(want) {
		t.Errorf("v = %x", featuretest.F32s(bufs[0]))
	}
	if got := fmt.Sprint(bufs[1]); got != "[1 0 1 1 1 1]" {
		t.Errorf("element mask = %s", got)
	}
}

// B06: ragged lists to a fixed length.
func TestListPadTruncate(t *testing.T) {
	for _, phys := range []string{"FLOAT", "DOUBLE"} {
		vi := pqread.ColumnInfo{Name: "v", Physical: phys, List: true}
		v := &pqread.Column{Info: vi, Rows: 4, Offsets: []int64{0, 3, 5, 5, 10}}
		vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		if phys == "FLOAT" {
			v.Kind = pqread.KindFloat32
			for _, x := range vals {
				v.Float32 = append(v.Float32, float32(x))
			}
		} else {
			v.Kind, v.Float64 = pqread.KindFloat64, vals
		}
		sch := schemaOf("ragged.parquet", vi)
		_, _, err := convertRows(t, TensorSpec{Name: "v", Column: "v", DType: "F32", Shape: []int64{4}}, sch, v)
		if err == nil || !strings.Contains(err.Error(), `ragged.parquet: column "v", row group 0, row 0: list has length 3, not 4 (4 rows`) {
			t.Fatalf("err = %v", err)
		}
		_, bufs, err := convertRows(t, TensorSpec{Name: "v", Column: "v", DType: "F32", Shape: []int64{4},
			List: &ListPolicy{Pad: mustNum("0"), Truncate: true, Lengths: true}}, sch, v)
		if err != nil {
			t.Fatal(err)
		}
		var got []float32
		for _, b := range featuretest.F32s(bufs[0]) {
			got = append(got, math.Float32frombits(b))
		}
		if s := fmt.Sprint(got); s != "[1 2 3 0 4 5 0 0 0 0 0 0 6 7 8 9]" {
			t.Errorf("%s: v = %s", phys, s)
		}
		if s := fmt.Sprint(featuretest.I32s(bufs[1])); s != "[3 2 0 5]" {
			t.Errorf("%s: lengths = %s", phys, s)
		}
	}
}
