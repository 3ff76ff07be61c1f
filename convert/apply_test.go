package convert

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
)

// schemaOf makes a one-file schema from column infos (looked up by Name).
func schemaOf(file string, cols ...pqread.ColumnInfo) fileSchema {
	return fileSchema{rel: file, columns: cols, lookup: func(name string) (pqread.ColumnInfo, error) {
		for _, c := range cols {
			if c.Name == name {
				return c, nil
			}
		}
		return pqread.ColumnInfo{}, fmt.Errorf("no column %q", name)
	}}
}

// convertRows compiles t against one file, applies the given columns (value j
// of the tensor = cols[j]) to rows [0, rows) of row group 0, and returns the
// output tensors' bytes.
func convertRows(t *testing.T, spec TensorSpec, schema fileSchema, cols ...*pqread.Column) ([]shardfmt.TensorInfo, [][]byte, error) {
	t.Helper()
	s := &Spec{Tensors: []TensorSpec{spec}}
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	plans, err := compileSpec(s, []fileSchema{schema})
	if err != nil {
		return nil, nil, err
	}
	outs := outputs(plans)
	rows := cols[0].Rows
	recs := newRecords(outs, make([]byte, rows*recordSize(outs)))
	for j, c := range cols {
		loc := chunkLoc{file: schema.rel, column: plans[0].cols[0][j].Name, tensor: spec.Name, rowGroup: 0}
		if err := plans[0].apply(c, 0, j, []run{{0, rows, 0}}, recs, loc, nil); err != nil {
			return outs, nil, err
		}
	}
	// Split the records back into one buffer per tensor.
	bufs := make([][]byte, len(outs))
	for t := range outs {
		for slot := 0; slot < rows; slot++ {
			bufs[t] = append(bufs[t], recs.at(t, int64(slot))...)
		}
	}
	return outs, bufs, nil
}

func f32s(b []byte) []uint32 {
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out
}

func i64s(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

func i32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func mustNum(s string) *Number {
	n, err := ParseNumber(s)
	if err != nil {
		panic(err)
	}
	return n
}

var nan32 = math.Float32bits(float32(math.NaN()))

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
	if got, w := f32s(bufs[0]), []uint32{nan32, 0, math.Float32bits(1.5), nan32}; fmt.Sprint(got) != fmt.Sprint(w) {
		t.Errorf("x = %x, want %x", got, w)
	}
	if got := fmt.Sprint(bufs[1]); got != "[0 1 1 0]" {
		t.Errorf("x mask = %s", got)
	}
	_, bufs, err = convertRows(t, TensorSpec{Name: "y", Column: "y", DType: "I64", Nulls: &NullPolicy{Fill: mustNum("-1"), Mask: true}}, sch, y)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i64s(bufs[0]), bufs[1]); got != "[0 -1 7 -1] [1 0 1 0]" {
		t.Errorf("y = %s", got)
	}
	// A fill that does not fit the dtype is a spec error.
	_, _, err = convertRows(t, TensorSpec{Name: "y", Column: "y", DType: "U8", Nulls: &NullPolicy{Fill: mustNum("-1")}}, sch, y)
	if !errors.Is(err, ErrSpec) {
		t.Errorf("fill -1 into U8: %v", err)
	}
}

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
	if fmt.Sprint(f32s(bufs[0])) != fmt.Sprint(want) {
		t.Errorf("v = %x", f32s(bufs[0]))
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
		for _, b := range f32s(bufs[0]) {
			got = append(got, math.Float32frombits(b))
		}
		if s := fmt.Sprint(got); s != "[1 2 3 0 4 5 0 0 0 0 0 0 6 7 8 9]" {
			t.Errorf("%s: v = %s", phys, s)
		}
		if s := fmt.Sprint(i32s(bufs[1])); s != "[3 2 0 5]" {
			t.Errorf("%s: lengths = %s", phys, s)
		}
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
	if err := plans[0].apply(c, 0, 0, []run{{1, 2, 0}, {4, 6, 1}}, newRecords(outs, buf), chunkLoc{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i32s(buf)); got != "[11 14 15]" {
		t.Errorf("got %s", got)
	}
}

func TestBytesPolicies(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "text", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true}
	c := &pqread.Column{Info: ci, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		Data: []byte("afoobar"), ByteOffsets: []int64{0, 1, 7, 7}}
	sch := schemaOf("s.parquet", ci)

	_, _, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64"}, sch, c)
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "bytes.mode") {
		t.Errorf("no bytes policy: %v", err)
	}
	_, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 1000}, Nulls: &NullPolicy{Fill: mustNum("-1")}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]int64{int64(0xaf63dc4c8601ec8c % 1000), int64(0x85944171f73967e8 % 1000), -1})
	if got := fmt.Sprint(i64s(bufs[0])); got != want {
		t.Errorf("hash = %s, want %s", got, want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if err == nil || err.Error() != `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_len 4 (set bytes.truncate to keep the first 4, or raise bytes.max_len)` {
		t.Errorf("err = %v", err)
	}
	// Binary values (an image, an encoded blob: no STRING annotation) are
	// never advised to be truncated: a prefix of one is corrupt.
	bin := pqread.ColumnInfo{Name: "png", Physical: "BYTE_ARRAY", Nullable: true}
	cb := &pqread.Column{Info: bin, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		Data: []byte("a\x89PNG\r\n"), ByteOffsets: []int64{0, 1, 7, 7}}
	_, _, err = convertRows(t, TensorSpec{Name: "png", Column: "png", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4}, Nulls: &NullPolicy{Fill: mustNum("0")}}, schemaOf("b.parquet", bin), cb)
	if err == nil || err.Error() != `b.parquet: column "png", row group 0, row 1: value is 6 bytes long, more than max_len 4 (raise bytes.max_len to at least 6, or use bytes.mode hash; truncating binary values such as images or encoded blobs would corrupt them)` {
		t.Errorf("binary value over max_len: %v", err)
	}
	outs, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "U8",
		Bytes: &BytesPolicy{Mode: "pad", MaxLen: 4, Truncate: true, Lengths: true}, Nulls: &NullPolicy{Fill: mustNum("0"), Mask: true}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 3 || outs[2].Name != "text_lengths" {
		t.Fatalf("outs %+v", outs)
	}
	if got := fmt.Sprintf("%q %v %v", bufs[0], bufs[1], i32s(bufs[2])); got != `"a\x00\x00\x00foob\x00\x00\x00\x00" [1 1 0] [1 6 0]` {
		t.Errorf("pad = %s", got)
	}
	// B21: a max value size names row and length.
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64", MaxValueBytes: 5,
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_value_bytes 5`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("max value: %v\nwant %s", err, want)
	}
}

// B14: FLOAT16 input widens exactly; unannotated 2-byte binary needs a declaration.
func TestFloat16Input(t *testing.T) {
	bitsIn := []uint16{0x3C00, 0xC000, 0x7BFF, 0x7C00, 0x7E01, 0x0001, 0x8000, 0}
	fixed := make([]byte, 16)
	for i, h := range bitsIn {
		binary.LittleEndian.PutUint16(fixed[2*i:], h)
	}
	valid := []bool{true, true, true, true, true, true, true, false}
	ann := pqread.ColumnInfo{Name: "h", Physical: "FIXED_LEN_BYTE_ARRAY", Width: 2, Logical: "FLOAT16", Nullable: true}
	c := &pqread.Column{Info: ann, Kind: pqread.KindFixed, Width: 2, Rows: 8, RowValid: valid, FixedData: fixed}
	_, bufs, err := convertRows(t, TensorSpec{Name: "h", Column: "h", DType: "F32", Nulls: &NullPolicy{Fill: mustNum("0"), Mask: true}}, schemaOf("f16_plain.parquet", ann), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%08x", f32s(bufs[0])); got != "[3f800000 c0000000 477fe000 7f800000 7fc02000 33800000 80000000 00000000]" {
		t.Errorf("widened = %s", got)
	}
	if got := fmt.Sprint(bufs[1]); got != "[1 1 1 1 1 1 1 0]" {
		t.Errorf("mask = %s", got)
	}
	_, bufs, err = convertRows(t, TensorSpec{Name: "h", Column: "h", DType: "F16", Nulls: &NullPolicy{Fill: mustNum("0")}}, schemaOf("f16_plain.parquet", ann), c)
	if err != nil || string(bufs[0]) != string(fixed) {
		t.Errorf("F16 passthrough: %v %x", err, bufs)
	}
	raw := ann
	raw.Logical = ""
	c.Info = raw
	_, _, err = convertRows(t, TensorSpec{Name: "h", Column: "h", DType: "F32", Nulls: &NullPolicy{Fill: mustNum("0")}}, schemaOf("f16_unannotated_flba2.parquet", raw), c)
	if err == nil || !strings.Contains(err.Error(), "f16_unannotated_flba2.parquet") || !strings.Contains(err.Error(), `"h"`) || !strings.Contains(err.Error(), "FLOAT16") {
		t.Errorf("unannotated: %v", err)
	}
	_, bufs, err = convertRows(t, TensorSpec{Name: "h", Column: "h", DType: "F32", Nulls: &NullPolicy{Fill: mustNum("0")}, Cast: &CastPolicy{FromUnannotated: "F16"}}, schemaOf("f16_unannotated_flba2.parquet", raw), c)
	if err != nil || f32s(bufs[0])[4] != 0x7fc02000 {
		t.Errorf("declared: %v", err)
	}
}

// B16: NaN passes bit-exact by default; nan.policy error names the row.
func TestNaNPolicy(t *testing.T) {
	xi := pqread.ColumnInfo{Name: "x", Physical: "DOUBLE"}
	vals := []float64{math.Float64frombits(0x7ff8000000000001), 1, math.Inf(-1), math.Copysign(0, -1)}
	c := &pqread.Column{Info: xi, Kind: pqread.KindFloat64, Rows: 4, Float64: vals}
	sch := schemaOf("nan.parquet", xi)
	_, bufs, err := convertRows(t, TensorSpec{Name: "x", Column: "x", DType: "F64"}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if got := binary.LittleEndian.Uint64(bufs[0][8*i:]); got != math.Float64bits(v) {
			t.Errorf("x[%d] = %016x", i, got)
		}
	}
	_, _, err = convertRows(t, TensorSpec{Name: "x", Column: "x", DType: "F64", NaN: &NaNPolicy{Policy: "error"}}, sch, c)
	if err == nil || err.Error() != `nan.parquet: column "x", row group 0, row 0: NaN value (nan.policy is error)` {
		t.Errorf("err = %v", err)
	}
}

func TestDecimalAndInt96Columns(t *testing.T) {
	di := pqread.ColumnInfo{Name: "d", Physical: "FIXED_LEN_BYTE_ARRAY", Width: 13, Logical: "DECIMAL(28,2)", Precision: 28, Scale: 2}
	vals := []int64{-1234567, -1, 1, 0, 123456789}
	fixed := make([]byte, 13*len(vals))
	for i, v := range vals {
		b := fixed[13*i : 13*i+13]
		if v < 0 {
			for k := range b {
				b[k] = 0xff
			}
		}
		binary.BigEndian.PutUint64(b[5:], uint64(v))
	}
	c := &pqread.Column{Info: di, Kind: pqread.KindFixed, Width: 13, Rows: 5, FixedData: fixed}
	_, bufs, err := convertRows(t, TensorSpec{Name: "d", Column: "d", DType: "F64"}, schemaOf("decimal_flba13.parquet", di), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{-12345.67, -0.01, 0.01, 0, 1234567.89}
	for i, w := range want {
		if got := math.Float64frombits(binary.LittleEndian.Uint64(bufs[0][8*i:])); got != w {
			t.Errorf("d[%d] = %v, want %v", i, got, w)
		}
	}
	_, _, err = convertRows(t, TensorSpec{Name: "d", Column: "d", DType: "I64"}, schemaOf("decimal_flba13.parquet", di), c)
	if !errors.Is(err, ErrSchema) {
		t.Errorf("decimal to I64: %v", err)
	}

	ti := pqread.ColumnInfo{Name: "ts", Physical: "INT96"}
	raw := make([]byte, 12)
	binary.LittleEndian.PutUint64(raw, 5)
	binary.LittleEndian.PutUint32(raw[8:], 2440589)
	tc := &pqread.Column{Info: ti, Kind: pqread.KindInt96, Width: 12, Rows: 1, FixedData: raw}
	_, bufs, err = convertRows(t, TensorSpec{Name: "ts", Column: "ts", DType: "I64"}, schemaOf("t.parquet", ti), tc)
	if err != nil || i64s(bufs[0])[0] != 86400e9+5 {
		t.Errorf("int96: %v %v", err, bufs)
	}
}

func TestTypesAcrossFiles(t *testing.T) {
	a := schemaOf("a.parquet", pqread.ColumnInfo{Name: "x", Physical: "INT32"})
	b := schemaOf("b.parquet", pqread.ColumnInfo{Name: "x", Physical: "INT64"})
	_, err := compileSpec(&Spec{Tensors: []TensorSpec{{Name: "x", Column: "x", DType: "I64"}}}, []fileSchema{a, b})
	if err == nil || !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `b.parquet: column "x"`) || !strings.Contains(err.Error(), "INT64 differs from INT32") {
		t.Errorf("err = %v", err)
	}
	_, err = compileSpec(&Spec{Tensors: []TensorSpec{{Name: "x", Column: "x", DType: "I64", Cast: &CastPolicy{Widen: true}}}}, []fileSchema{a, b})
	if err != nil {
		t.Errorf("widen: %v", err)
	}
	_, err = compileSpec(&Spec{Tensors: []TensorSpec{{Name: "x", Column: "nope", DType: "I64"}}}, []fileSchema{a})
	if err == nil || !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `a.parquet: column "nope"`) {
		t.Errorf("missing column: %v", err)
	}
}

// Regression: TIME/TIMESTAMP(unit, false) columns (local time, not adjusted
// to UTC) were read as unsigned because their logical type string contains
// "false)"; a timestamp before 1970 then failed the I64 range check.
func TestLocalTimestampIsSigned(t *testing.T) {
	ts := pqread.ColumnInfo{Name: "ts", Physical: "INT64", Logical: "TIMESTAMP(MILLIS,false)", TimeUnit: "MILLIS"}
	c := &pqread.Column{Info: ts, Kind: pqread.KindInt64, Rows: 3, Int64: []int64{-1, 0, -86_400_000}}
	_, bufs, err := convertRows(t, TensorSpec{Name: "ts", Column: "ts", DType: "I64"}, schemaOf("t.parquet", ts), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i64s(bufs[0])); got != "[-1 0 -86400000]" {
		t.Errorf("TIMESTAMP(MILLIS,false) = %s", got)
	}
	tm := pqread.ColumnInfo{Name: "tm", Physical: "INT32", Logical: "TIME(MILLIS,false)", TimeUnit: "MILLIS"}
	c = &pqread.Column{Info: tm, Kind: pqread.KindInt32, Rows: 2, Int32: []int32{-5, 7}}
	_, bufs, err = convertRows(t, TensorSpec{Name: "tm", Column: "tm", DType: "I64"}, schemaOf("t.parquet", tm), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i64s(bufs[0])); got != "[-5 7]" {
		t.Errorf("TIME(MILLIS,false) = %s", got)
	}
	// INT(32,false) keeps its unsigned reading: all bits set is 2^32-1.
	u := pqread.ColumnInfo{Name: "u", Physical: "INT32", Logical: "INT(32,false)", BitWidth: 32, Unsigned: true}
	c = &pqread.Column{Info: u, Kind: pqread.KindInt32, Rows: 2, Int32: []int32{-1, 3}}
	_, bufs, err = convertRows(t, TensorSpec{Name: "u", Column: "u", DType: "I64"}, schemaOf("t.parquet", u), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(i64s(bufs[0])); got != "[4294967295 3]" {
		t.Errorf("INT(32,false) = %s", got)
	}
}

// A hash-mode column read in dictionary form (pqread.ReadColumnDict) gives
// the buckets, fill values, mask and errors of the same column with its
// values copied out (TestBytesPolicies).
func TestBytesHashDictForm(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "text", Physical: "BYTE_ARRAY", Logical: "STRING", Nullable: true}
	c := &pqread.Column{Info: ci, Kind: pqread.KindBytes, Rows: 3, RowValid: []bool{true, true, false},
		DictIndex: []uint32{1, 0, 0}, DictData: []byte("foobara"), DictOffsets: []int64{0, 6, 7}}
	sch := schemaOf("s.parquet", ci)
	outs, bufs, err := convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 1000}, Nulls: &NullPolicy{Fill: mustNum("-1"), Mask: true}}, sch, c)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint([]int64{int64(0xaf63dc4c8601ec8c % 1000), int64(0x85944171f73967e8 % 1000), -1})
	if got := fmt.Sprint(i64s(bufs[0])); got != want || len(outs) != 2 || fmt.Sprint(bufs[1]) != "[1 1 0]" {
		t.Errorf("hash = %s mask %v, want %s [1 1 0]", got, bufs[1:], want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64", MaxValueBytes: 5,
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}, Nulls: &NullPolicy{Fill: mustNum("0")}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 1: value is 6 bytes long, more than max_value_bytes 5`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("max value: %v\nwant %s", err, want)
	}
	_, _, err = convertRows(t, TensorSpec{Name: "text", Column: "text", DType: "I64",
		Bytes: &BytesPolicy{Mode: "hash", Buckets: 7}}, sch, c)
	if want := `s.parquet: column "text", row group 0, row 2: null value (1 nulls in this column chunk; set nulls.fill to replace them)`; err == nil || err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("null without fill: %v\nwant %s", err, want)
	}
}

// TestSliceRowBase: a transform given a slice of a column chunk with the
// slice's first row as chunkLoc.rowBase writes what it writes for the
// whole column chunk and names the row within the row group in errors.
func TestSliceRowBase(t *testing.T) {
	ci := pqread.ColumnInfo{Name: "v", Physical: "INT64", Nullable: true}
	c := &pqread.Column{Info: ci, Kind: pqread.KindInt64, Rows: 6, RowValid: []bool{true, true, true, true, false, true},
		Int64: []int64{10, 11, 300, 13, 0, 15}}
	plans, err := compileSpec(&Spec{Tensors: []TensorSpec{{Name: "v", Column: "v", DType: "U8", Nulls: &NullPolicy{Fill: &Number{isInt: true, i: 9}}}}}, []fileSchema{schemaOf("a.parquet", ci)})
	if err != nil {
		t.Fatal(err)
	}
	outs := outputs(plans)
	buf := make([]byte, 3*sampleBytes(outs[0]))
	loc := chunkLoc{file: "a.parquet", column: "v", rowGroup: 2, rowBase: 3}
	if err := plans[0].apply(c.Slice(3, 6), 0, 0, []run{{0, 3, 0}}, newRecords(outs, buf), loc, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(buf) != "[13 9 15]" {
		t.Errorf("rows 3-5 wrote %v, want [13 9 15]", buf)
	}
	loc.rowBase = 1
	err = plans[0].apply(c.Slice(1, 4), 0, 0, []run{{0, 3, 0}}, newRecords(outs, buf), loc, nil)
	if err == nil || err.Error() != `a.parquet: column "v", row group 2, row 2: value 300 out of range for U8 [0, 255]` {
		t.Errorf("err = %v", err)
	}
}
