package feature

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// B01: zeros next to nulls; the mask comes from definition levels, not values.
func TestNullPolicyZerosAndNulls(t *testing.T) {
	xi := pqread.ColumnInfo{Name: "x", Physical: "FLOAT", Nullable: true}
	yi := pqread.ColumnInfo{Name: "y", Physical: "INT64", Nullable: true}
	x := &pqread.Column{Info: xi, Kind: pqread.KindFloat32, Rows: 4, RowValid: []bool{false, true, true, false}, Float32: []float32{0, 0, 1.5, 0}}
	y := &pqread.Column{Info: yi, Kind: pqread.KindInt64, Rows: 4, RowValid: []bool{true, false, true, false}, Int64: []int64{0, 0, 7, 0}}
	sch := schemaOf("zeros_and_nulls.parquet", xi, yi)

	_, _, err := convertRows(t, TensorSpec{Name: "x", Column: "x", DType: "F32"}, sch, x)
	want := `zeros_and_nulls.parquet: column "x", row group 0, row 0: null value (2 nulls in this column chunk; set nulls.fill to replace them)`
	if err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Fatalf("default policy error = %v\nwant %s", err, want)
	}

	outs, bufs, err := convertRows(t, TensorSpec{Name: "x", Column: "x", DType: "F32", Nulls: &NullPolicy{Fill: mustNum("NaN"), Mask: true}}, sch, x)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs[1].Name != "x_mask" || outs[1].DType != shardfmt.U8 {
		t.Fatalf("outputs %+v", outs)
	}
	if got, w := featuretest.F32s(bufs[0]), []uint32{nan32, 0, math.Float32bits(1.5), nan32}; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("x = %x, want %x", got, w)
	}
	if got := fmt.Sprint(bufs[1]); got != "[0 1 1 0]" {
		t.Errorf("x mask = %s", got)
	}
	_, bufs, err = convertRows(t, TensorSpec{Name: "y", Column: "y", DType: "I64", Nulls: &NullPolicy{Fill: mustNum("-1"), Mask: true}}, sch, y)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(featuretest.I64s(bufs[0]), bufs[1]); got != "[0 -1 7 -1] [1 0 1 0]" {
		t.Errorf("y = %s", got)
	}
	// A fill that does not fit the dtype is a spec error.
	_, _, err = convertRows(t, TensorSpec{Name: "y", Column: "y", DType: "U8", Nulls: &NullPolicy{Fill: mustNum("-1")}}, sch, y)
	if !errors.Is(err, ErrSpec) {
		t.Errorf("fill -1 into U8: %v", err)
	}
}

func TestStackColumnsAndRanges(t *testing.T) {
	var infos []pqread.ColumnInfo
	var cols []*pqread.Column
	for c := 0; c < 4; c++ {
		ci := pqread.ColumnInfo{Name: fmt.Sprintf("%dx%d", c/2, c%2), Physical: "INT32"}
		infos = append(infos, ci)
		cols = append(cols, &pqread.Column{Info: ci, Kind: pqread.KindInt32, Rows: 3, Int32: []int32{int32(c), int32(10 + c), int32(250 + c)}})
	}
	infos = append(infos, pqread.ColumnInfo{Name: "label", Physical: "INT32"})
	sch := schemaOf("img.parquet", infos...)
	outs, bufs, err := convertRows(t, TensorSpec{Name: "image", ColumnsRegex: `^\d+x\d+$`, DType: "U8", Shape: []int64{2, 2}}, sch, cols...)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outs[0].Shape) != "[2 2]" || sampleBytes(outs[0]) != 4 {
		t.Fatalf("outs %+v", outs)
	}
	if got := fmt.Sprint(bufs[0]); got != "[0 1 2 3 10 11 12 13 250 251 252 253]" {
		t.Errorf("image = %s", got)
	}
	cols[3].Int32[2] = 256
	_, _, err = convertRows(t, TensorSpec{Name: "image", ColumnsRegex: `^\d+x\d+$`, DType: "U8", Shape: []int64{4}}, sch, cols...)
	if err == nil || err.Error() != `img.parquet: column "1x1", row group 0, row 2: value 256 out of range for U8 [0, 255]` {
		t.Errorf("err = %v", err)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "image", ColumnsRegex: `^\d+x\d+$`, DType: "U8", Shape: []int64{3}}, sch, cols...)
	if !errors.Is(err, ErrSpec) {
		t.Errorf("shape mismatch: %v", err)
	}
}

func TestSparseRuns(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "id", Physical: "INT64"}
	c := &pqread.Column{Info: ci, Kind: pqread.KindInt64, Rows: 6, Int64: []int64{10, 11, 12, 13, 14, 15}}
	plans, err := compileSpec(&Spec{Tensors: []TensorSpec{{Name: "id", Column: "id", DType: "I32"}}}, []fileSchema{schemaOf("a.parquet", ci)})
	if err != nil {
		t.Fatal(err)
	}
	outs := outputs(plans)
	buf := make([]byte, 3*sampleBytes(outs[0]))
	if err := plans[0].kind.apply(c, nil, 0, 0, []RowRun{{1, 2, 0}, {4, 6, 1}}, NewRecords(outs, buf), chunkLoc{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(featuretest.I32s(buf)); got != "[11 14 15]" {
		t.Errorf("got %s", got)
	}
}
