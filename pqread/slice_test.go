package pqread

import (
	"reflect"
	"testing"
)

// TestColumnSlice slices one column of each shape and checks every field of
// the result, then that the slice shares nothing with the column but the
// dictionary.
func TestColumnSlice(t *testing.T) {
	cases := []struct {
		name   string
		c      *Column
		lo, hi int
		want   *Column
	}{
		{"required int64", &Column{Kind: KindInt64, Rows: 4, Int64: []int64{10, 11, 12, 13}}, 1, 3,
			&Column{Kind: KindInt64, Rows: 2, Int64: []int64{11, 12}}},
		{"optional float64", &Column{Kind: KindFloat64, Rows: 4, RowValid: []bool{true, false, true, false}, Float64: []float64{1, 0, 3, 0}}, 1, 4,
			&Column{Kind: KindFloat64, Rows: 3, RowValid: []bool{false, true, false}, Float64: []float64{0, 3, 0}}},
		{"bool", &Column{Kind: KindBool, Rows: 3, Bool: []bool{true, false, true}}, 2, 3,
			&Column{Kind: KindBool, Rows: 1, Bool: []bool{true}}},
		{"int32 empty slice", &Column{Kind: KindInt32, Rows: 3, Int32: []int32{1, 2, 3}}, 2, 2,
			&Column{Kind: KindInt32, Rows: 0, Int32: []int32{}}},
		{"float32 list", &Column{Kind: KindFloat32, Rows: 4, RowValid: []bool{true, false, true, true},
			Offsets: []int64{0, 2, 2, 5, 6}, ElemValid: []bool{true, true, false, true, true, true},
			Float32: []float32{1, 2, 0, 4, 5, 6}}, 1, 3,
			&Column{Kind: KindFloat32, Rows: 2, RowValid: []bool{false, true},
				Offsets: []int64{0, 0, 3}, ElemValid: []bool{false, true, true}, Float32: []float32{0, 4, 5}}},
		{"bytes", &Column{Kind: KindBytes, Rows: 4, Data: []byte("aabbbcccc"), ByteOffsets: []int64{0, 2, 5, 5, 9}}, 1, 4,
			&Column{Kind: KindBytes, Rows: 3, Data: []byte("bbbcccc"), ByteOffsets: []int64{0, 3, 3, 7}}},
		{"bytes list", &Column{Kind: KindBytes, Rows: 2, Offsets: []int64{0, 1, 3}, Data: []byte("xyyzzz"), ByteOffsets: []int64{0, 1, 3, 6}}, 1, 2,
			&Column{Kind: KindBytes, Rows: 1, Offsets: []int64{0, 2}, Data: []byte("yyzzz"), ByteOffsets: []int64{0, 2, 5}}},
		{"fixed", &Column{Kind: KindFixed, Rows: 3, Width: 2, FixedData: []byte{1, 2, 3, 4, 5, 6}}, 1, 3,
			&Column{Kind: KindFixed, Rows: 2, Width: 2, FixedData: []byte{3, 4, 5, 6}}},
		{"int96", &Column{Kind: KindInt96, Rows: 2, Width: 12, FixedData: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}}, 0, 1,
			&Column{Kind: KindInt96, Rows: 1, Width: 12, FixedData: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}},
		{"dictionary form", &Column{Kind: KindBytes, Rows: 4, RowValid: []bool{true, true, false, true}, DictIndex: []uint32{1, 0, 0, 1},
			DictData: []byte("ab"), DictOffsets: []int64{0, 1, 2}}, 1, 4,
			&Column{Kind: KindBytes, Rows: 3, RowValid: []bool{true, false, true}, DictIndex: []uint32{0, 0, 1},
				DictData: []byte("ab"), DictOffsets: []int64{0, 1, 2}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.c.Slice(tc.lo, tc.hi)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Slice(%d, %d) =\n%+v\nwant\n%+v", tc.lo, tc.hi, got, tc.want)
			}
			// Overwrite the column: the slice must not change, except
			// for the shared dictionary.
			for _, b := range [][]bool{tc.c.RowValid, tc.c.ElemValid, tc.c.Bool} {
				for i := range b {
					b[i] = !b[i]
				}
			}
			for i := range tc.c.Offsets {
				tc.c.Offsets[i] = -1
			}
			for _, b := range [][]byte{tc.c.Data, tc.c.FixedData} {
				clear(b)
			}
			clear(tc.c.ByteOffsets)
			clear(tc.c.Int32)
			clear(tc.c.Int64)
			clear(tc.c.Float32)
			clear(tc.c.Float64)
			clear(tc.c.DictIndex)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("the slice changed with its column: %+v", got)
			}
		})
	}
}

// TestColumnSliceDecoded cuts each decoded column of B03 (lists with null elements)
// into two slices at every row and checks the Column contract of both and
// that their rows are the column's rows.
func TestColumnSliceDecoded(t *testing.T) {
	f := mustOpen(t, casePath("B03-list-null-element", "list_null_elem.parquet"))
	for _, ci := range f.Columns() {
		c := mustRead(t, f, ci.Name, 0)
		for cut := 0; cut <= c.Rows; cut++ {
			a, b := c.Slice(0, cut), c.Slice(cut, c.Rows)
			checkInvariants(t, a)
			checkInvariants(t, b)
			if !reflect.DeepEqual(join(a, b), c) {
				t.Fatalf("%s: slices at %d do not join to the column", ci.Name, cut)
			}
		}
	}
}

// join is the inverse of Slice for the fields a decoded list column uses.
func join(a, b *Column) *Column {
	c := &Column{Info: a.Info, Kind: a.Kind, Rows: a.Rows + b.Rows, Width: a.Width}
	if a.RowValid != nil {
		c.RowValid = append(append([]bool{}, a.RowValid...), b.RowValid...)
	}
	if a.Offsets != nil {
		c.Offsets = append([]int64{}, a.Offsets...)
		for _, o := range b.Offsets[1:] {
			c.Offsets = append(c.Offsets, o+a.Offsets[a.Rows])
		}
	}
	if a.ElemValid != nil {
		c.ElemValid = append(append([]bool{}, a.ElemValid...), b.ElemValid...)
	}
	cat := func(x, y []float32) []float32 {
		if x == nil {
			return nil
		}
		return append(append([]float32{}, x...), y...)
	}
	c.Float32 = cat(a.Float32, b.Float32)
	if a.Int64 != nil {
		c.Int64 = append(append([]int64{}, a.Int64...), b.Int64...)
	}
	if a.Int32 != nil {
		c.Int32 = append(append([]int32{}, a.Int32...), b.Int32...)
	}
	if a.Float64 != nil {
		c.Float64 = append(append([]float64{}, a.Float64...), b.Float64...)
	}
	return c
}
