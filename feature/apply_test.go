package feature

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/prepml/prep/feature/featuretest"
	"github.com/prepml/prep/internal/pqfixture"
	"github.com/prepml/prep/plan"
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
	recs := NewRecords(outs, make([]byte, rows*RecordSize(outs)))
	for j, c := range cols {
		loc := chunkLoc{file: schema.rel, column: plans[0].cols[0][j].Name, tensor: spec.Name, rowGroup: 0}
		if err := plans[0].kind.apply(c, nil, 0, j, []RowRun{{0, rows, 0}}, recs, loc, nil); err != nil {
			return outs, nil, err
		}
	}
	// Split the records back into one buffer per tensor.
	bufs := make([][]byte, len(outs))
	for t := range outs {
		for slot := 0; slot < rows; slot++ {
			bufs[t] = append(bufs[t], recs.At(t, int64(slot))...)
		}
	}
	return outs, bufs, nil
}

func mustNum(s string) *Number {
	n, err := ParseNumber(s)
	if err != nil {
		panic(err)
	}
	return n
}

var nan32 = math.Float32bits(float32(math.NaN()))

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
	if got := fmt.Sprintf("%08x", featuretest.F32s(bufs[0])); got != "[3f800000 c0000000 477fe000 7f800000 7fc02000 33800000 80000000 00000000]" {
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
	if err != nil || featuretest.F32s(bufs[0])[4] != 0x7fc02000 {
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
	if err != nil || featuretest.I64s(bufs[0])[0] != 86400e9+5 {
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
	if got := fmt.Sprint(featuretest.I64s(bufs[0])); got != "[-1 0 -86400000]" {
		t.Errorf("TIMESTAMP(MILLIS,false) = %s", got)
	}
	tm := pqread.ColumnInfo{Name: "tm", Physical: "INT32", Logical: "TIME(MILLIS,false)", TimeUnit: "MILLIS"}
	c = &pqread.Column{Info: tm, Kind: pqread.KindInt32, Rows: 2, Int32: []int32{-5, 7}}
	_, bufs, err = convertRows(t, TensorSpec{Name: "tm", Column: "tm", DType: "I64"}, schemaOf("t.parquet", tm), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(featuretest.I64s(bufs[0])); got != "[-5 7]" {
		t.Errorf("TIME(MILLIS,false) = %s", got)
	}
	// INT(32,false) keeps its unsigned reading: all bits set is 2^32-1.
	u := pqread.ColumnInfo{Name: "u", Physical: "INT32", Logical: "INT(32,false)", BitWidth: 32, Unsigned: true}
	c = &pqread.Column{Info: u, Kind: pqread.KindInt32, Rows: 2, Int32: []int32{-1, 3}}
	_, bufs, err = convertRows(t, TensorSpec{Name: "u", Column: "u", DType: "I64"}, schemaOf("t.parquet", u), c)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(featuretest.I64s(bufs[0])); got != "[4294967295 3]" {
		t.Errorf("INT(32,false) = %s", got)
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
	if err := plans[0].kind.apply(c.Slice(3, 6), nil, 0, 0, []RowRun{{0, 3, 0}}, NewRecords(outs, buf), loc, nil); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(buf) != "[13 9 15]" {
		t.Errorf("rows 3-5 wrote %v, want [13 9 15]", buf)
	}
	loc.rowBase = 1
	err = plans[0].kind.apply(c.Slice(1, 4), nil, 0, 0, []RowRun{{0, 3, 0}}, NewRecords(outs, buf), loc, nil)
	if err == nil || err.Error() != `a.parquet: column "v", row group 2, row 2: value 300 out of range for U8 [0, 255]` {
		t.Errorf("err = %v", err)
	}
}

// fixedWidthCase is one fixed-width physical type of
// TestFixedWidthNullsEveryLayout: the column's node, the spec of its tensor
// (name v) and, for row i, the value written and the bytes of sample i of
// v expected, computed from the input value here, not by prep.
type fixedWidthCase struct {
	name   string
	node   parquet.Node
	spec   string
	value  func(i int) parquet.Value
	expect func(i int) []byte
}

// int96Of returns the INT96 of Julian day jd and nanos of the day (u64 of
// nanoseconds little-endian, then the day), as parquet-go's deprecated.Int96
// words.
func int96Of(jd uint32, nanos uint64) deprecated.Int96 {
	return deprecated.Int96{uint32(nanos), uint32(nanos >> 32), jd}
}

// beSigned returns v as a w-byte big-endian two's complement integer.
func beSigned(v int64, w int) []byte {
	b := make([]byte, w)
	for k := w - 1; k >= 0; k-- {
		b[k] = byte(v)
		v >>= 8 // arithmetic: sign-extends into the high bytes
	}
	return b
}

func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// fixedWidthCases are every fixed-width physical type prep reads with a
// conversion per value: INT96, FIXED_LEN_BYTE_ARRAY of widths 1, 3 and 16
// (padded bytes), decimals backed by FIXED_LEN_BYTE_ARRAY (5 and 16
// bytes), INT32 and INT64, and half floats (2-byte FIXED_LEN_BYTE_ARRAY).
func fixedWidthCases() []fixedWidthCase {
	const day = 86400 * int64(1e9)
	int96 := func(i int) (uint32, uint64) {
		// Days on both sides of the Unix epoch (Julian day 2440588).
		return uint32(2440588 - 400 + 37*i), uint64(i) * 3_600_000_000_007 % uint64(day)
	}
	flba := func(w int) fixedWidthCase {
		val := func(i int) []byte {
			b := make([]byte, w)
			for k := range b {
				b[k] = byte(i*7 + k + 1)
			}
			return b
		}
		return fixedWidthCase{
			name:   fmt.Sprintf("flba%d", w),
			node:   parquet.Leaf(parquet.FixedLenByteArrayType(w)),
			spec:   fmt.Sprintf("{name: v, column: v, dtype: U8, bytes: {mode: pad, max_len: %d}, nulls: {fill: 0, mask: true}}", w),
			value:  func(i int) parquet.Value { return parquet.FixedLenByteArrayValue(val(i)) },
			expect: val,
		}
	}
	unscaled := func(i int) int64 { return int64(i*i*1013) - 700_000 } // negative and positive
	decF64 := func(i int) []byte {
		return le64(math.Float64bits(float64(unscaled(i)) / 1e3)) // one correctly rounded division of exact values
	}
	decFLBA := func(w int) fixedWidthCase {
		return fixedWidthCase{
			name:   fmt.Sprintf("decimal-flba%d", w),
			node:   parquet.Decimal(3, 2*w, parquet.FixedLenByteArrayType(w)),
			spec:   "{name: v, column: v, dtype: F64, nulls: {fill: -1, mask: true}}",
			value:  func(i int) parquet.Value { return parquet.FixedLenByteArrayValue(beSigned(unscaled(i), w)) },
			expect: decF64,
		}
	}
	half := func(i int) uint16 { return uint16(0x3c00 + i*37) } // 1.0 and up, finite
	return []fixedWidthCase{
		{
			name: "int96",
			node: parquet.Leaf(parquet.Int96Type),
			spec: "{name: v, column: v, dtype: I64, nulls: {fill: -1, mask: true}}",
			value: func(i int) parquet.Value {
				jd, ns := int96(i)
				return parquet.Int96Value(int96Of(jd, ns))
			},
			expect: func(i int) []byte {
				jd, ns := int96(i)
				return le64(uint64((int64(jd)-2440588)*day + int64(ns)))
			},
		},
		flba(1), flba(3), flba(16),
		decFLBA(5), decFLBA(16),
		{
			name:   "decimal-int32",
			node:   parquet.Decimal(3, 9, parquet.Int32Type),
			spec:   "{name: v, column: v, dtype: F64, nulls: {fill: -1, mask: true}}",
			value:  func(i int) parquet.Value { return parquet.Int32Value(int32(unscaled(i))) },
			expect: decF64,
		},
		{
			name:   "decimal-int64",
			node:   parquet.Decimal(3, 18, parquet.Int64Type),
			spec:   "{name: v, column: v, dtype: F64, nulls: {fill: -1, mask: true}}",
			value:  func(i int) parquet.Value { return parquet.Int64Value(unscaled(i)) },
			expect: decF64,
		},
		{
			name: "float16",
			node: parquet.Leaf(parquet.FixedLenByteArrayType(2)),
			spec: "{name: v, column: v, dtype: F16, nulls: {fill: -1, mask: true}, cast: {from_unannotated: F16}}",
			value: func(i int) parquet.Value {
				return parquet.FixedLenByteArrayValue(binary.LittleEndian.AppendUint16(nil, half(i)))
			},
			expect: func(i int) []byte { return binary.LittleEndian.AppendUint16(nil, half(i)) },
		},
	}
}

// TestFixedWidthNullsEveryLayout converts an OPTIONAL column of every
// fixed-width physical type, with null rows (runs of them, at the first
// and last row, and at page starts and ends), PLAIN and dictionary
// encoded, in one page or many (data pages V1 and V2, compressed or not),
// and requires every valid row's value and every mask byte: a null slot
// that fails to convert (an INT96 of zero bytes) must not stop the values
// after it.
func TestFixedWidthNullsEveryLayout(t *testing.T) {
	const rows = 60
	null := func(i int) bool { return i == 0 || i == rows-1 || i%7 == 3 || i%11 == 5 || (i >= 20 && i < 24) }
	type layout struct {
		name string
		dict bool
		opts []parquet.WriterOption
	}
	var layouts []layout
	for _, dict := range []bool{false, true} {
		for _, pages := range []struct {
			name string
			opts []parquet.WriterOption
		}{
			{"one-page", nil},
			{"pages-v1", []parquet.WriterOption{parquet.PageBufferSize(48), parquet.DataPageVersion(1)}},
			{"pages-v2", []parquet.WriterOption{parquet.PageBufferSize(48), parquet.DataPageVersion(2)}},
			{"pages-v2-snappy", []parquet.WriterOption{parquet.PageBufferSize(48), parquet.DataPageVersion(2), parquet.Compression(&parquet.Snappy)}},
			{"pages-v1-zstd", []parquet.WriterOption{parquet.PageBufferSize(96), parquet.DataPageVersion(1), parquet.Compression(&parquet.Zstd)}},
		} {
			enc := "plain"
			if dict {
				enc = "dict"
			}
			layouts = append(layouts, layout{enc + "-" + pages.name, dict, pages.opts})
		}
	}
	var nullFirst, nullLast int // pages of the files written that start or end with a null
	for _, c := range fixedWidthCases() {
		for _, l := range layouts {
			t.Run(c.name+"/"+l.name, func(t *testing.T) {
				node := parquet.Optional(c.node)
				if l.dict {
					node = parquet.Optional(parquet.Encoded(c.node, &parquet.RLEDictionary))
				}
				sch := parquet.NewSchema("s", parquet.Group{"v": node})
				var data []parquet.Row
				for i := range rows {
					if null(i) {
						data = append(data, parquet.Row{parquet.NullValue().Level(0, 0, 0)})
					} else {
						data = append(data, parquet.Row{c.value(i).Level(0, 1, 0)})
					}
				}
				dir := t.TempDir()
				path := filepath.Join(dir, "v.parquet")
				pqfixture.Raw(sch, data...).Option(l.opts...).WriteFile(t, path)
				first, last := nullPageEdges(t, path)
				nullFirst += first
				nullLast += last
				p := featuretest.MakePlan(t, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
				s, err := materializeAll(t, p, "tensors: ["+c.spec+"]")
				if err != nil {
					t.Fatal(err)
				}
				// The same in row windows of a few rows (a tiny memory
				// limit): each window a slice of the column chunk.
				spec, err := ParseSpec([]byte("tensors: ["+c.spec+"]"), "spec.yaml")
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]uint64, rows)
				for i := range ids {
					ids[i] = uint64(i)
				}
				w, err := Materialize(context.Background(), nil, p, spec, ids, Bounds{Memory: 256})
				if err != nil {
					t.Fatal(err)
				}
				for x := range s.Data {
					if string(w.Data[x]) != string(s.Data[x]) {
						t.Errorf("tensor %s in row windows differs from whole row groups", s.Tensors[x].Name)
					}
				}
				for i := range rows {
					want, mask := c.expect(i), byte(1)
					if null(i) {
						mask = 0
						want = s.Sample(0, i) // the fill, checked by other tests
					}
					if got := s.Sample(0, i); string(got) != string(want) {
						t.Errorf("row %d: v = % x, want % x", i, got, want)
					}
					if got := s.Sample(1, i); len(got) != 1 || got[0] != mask {
						t.Errorf("row %d: mask = %v, want %d", i, got, mask)
					}
				}
			})
		}
	}
	if nullFirst == 0 || nullLast == 0 {
		t.Errorf("no page of the files written starts (%d) or ends (%d) with a null: the layouts do not test page edges", nullFirst, nullLast)
	}
}

// nullPageEdges counts the data pages of the one column of the file at
// path whose first, and whose last, level entry is null, as parquet-go's
// reader sees them.
func nullPageEdges(t *testing.T, path string) (first, last int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	for _, rg := range pf.RowGroups() {
		pages := rg.ColumnChunks()[0].Pages()
		for {
			pg, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			defs := pg.DefinitionLevels()
			if len(defs) > 0 && defs[0] == 0 {
				first++
			}
			if len(defs) > 0 && defs[len(defs)-1] == 0 {
				last++
			}
		}
		pages.Close()
	}
	return first, last
}

// TestFixedWidthNullElementsInLists is TestFixedWidthNullsEveryLayout for
// null elements of lists of INT96: as a jagged tensor and as a fixed list,
// an element after a null one keeps its value.
func TestFixedWidthNullElementsInLists(t *testing.T) {
	const rows = 12
	const day = 86400 * int64(1e9)
	ns := func(i, k int) int64 { return int64(i*10+k) * day / 100 }
	nullElem := func(i, k int) bool { return (i+k)%3 == 1 }
	sch := parquet.NewSchema("s", parquet.Group{"v": parquet.List(parquet.Optional(parquet.Leaf(parquet.Int96Type)))})
	var data []parquet.Row
	for i := range rows {
		var row parquet.Row
		for k := range 3 {
			if nullElem(i, k) {
				row = append(row, parquet.NullValue().Level(min(k, 1), 1, 0))
				continue
			}
			n := ns(i, k)
			row = append(row, parquet.Int96Value(int96Of(uint32(2440588+n/day), uint64(n%day))).Level(min(k, 1), 2, 0))
		}
		data = append(data, row)
	}
	dir := t.TempDir()
	pqfixture.Raw(sch, data...).PageBytes(40).WriteFile(t, filepath.Join(dir, "v.parquet"))
	p := featuretest.MakePlan(t, dir, plan.Config{Seed: 1, Epochs: 1, GlobalBatch: 1, WorldSize: 1, Workers: 1, Shuffle: plan.ShuffleNone, Remainder: plan.RemainderPartial})
	s, err := materializeAll(t, p, `
tensors:
  - {name: j, column: v, dtype: I64, list: {jagged: true, element_fill: -1, element_mask: true}}
  - {name: f, column: v, dtype: I64, shape: [4], list: {pad: -2, element_fill: -1, element_mask: true}}`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		var want []byte
		var mask []byte
		for k := range 3 {
			v, m := ns(i, k), byte(1)
			if nullElem(i, k) {
				v, m = -1, 0
			}
			want = append(want, le64(uint64(v))...)
			mask = append(mask, m)
		}
		if got := s.Sample(tensorIndex(t, s, "j"), i); string(got) != string(want) {
			t.Errorf("row %d: j = % x, want % x", i, got, want)
		}
		if got := s.Sample(tensorIndex(t, s, "j_element_mask"), i); string(got) != string(mask) {
			t.Errorf("row %d: j_element_mask = %v, want %v", i, got, mask)
		}
		want = append(want, le64(uint64(math.MaxUint64-1))...) // pad -2
		if got := s.Sample(tensorIndex(t, s, "f"), i); string(got) != string(want) {
			t.Errorf("row %d: f = % x, want % x", i, got, want)
		}
		if got := s.Sample(tensorIndex(t, s, "f_element_mask"), i); string(got) != string(append(mask, 0)) {
			t.Errorf("row %d: f_element_mask = %v, want %v", i, got, append(mask, 0))
		}
	}
}
