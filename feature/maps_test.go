package feature

import (
	"testing"

	"github.com/prepml/prep/pqread"
)

// TestGroupRowsDiffer: the first row where two leaves of one group differ
// in entries or nullness.
func TestGroupRowsDiffer(t *testing.T) {
	col := func(off []int64, valid []bool) *pqread.Column {
		return &pqread.Column{Rows: len(off) - 1, Offsets: off, RowValid: valid}
	}
	for i, c := range []struct {
		a, b *pqread.Column
		want int
	}{
		{col([]int64{0, 2, 2, 5}, nil), col([]int64{0, 2, 2, 5}, nil), -1},
		{col([]int64{0, 2, 2, 5}, nil), col([]int64{0, 2, 3, 5}, nil), 1},
		{col([]int64{0, 2, 2, 5}, nil), col([]int64{0, 2, 2, 6}, nil), 2},
		{col([]int64{0, 2, 2, 5}, []bool{true, false, true}), col([]int64{0, 2, 2, 5}, nil), 1},
		{col([]int64{0, 2, 2, 5}, []bool{true, false, true}), col([]int64{0, 2, 2, 5}, []bool{true, false, true}), -1},
		{col([]int64{0, 2, 2, 5}, nil), col([]int64{0, 2, 2}, nil), 2},
		// Offsets of a window need not start alike: lengths are compared.
		{col([]int64{7, 9, 9}, nil), col([]int64{0, 2, 2}, nil), -1},
	} {
		if got := groupRowsDiffer(c.a, c.b); got != c.want {
			t.Errorf("case %d: row %d, want %d", i, got, c.want)
		}
	}
}
