package selection

import (
	"fmt"
	"testing"
)

// TestRowRangeSets: intersectRows and unionRows on hand-computed ranges
// [start, end), touching and overlapping ends included.
func TestRowRangeSets(t *testing.T) {
	a := [][2]int64{{0, 10}, {20, 30}, {40, 50}}
	b := [][2]int64{{5, 20}, {30, 45}, {49, 60}}
	if got, want := fmt.Sprint(intersectRows(a, b)), "[[5 10] [40 45] [49 50]]"; got != want {
		t.Errorf("intersect: %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(unionRows(a, b)), "[[0 60]]"; got != want {
		t.Errorf("union: %s, want %s", got, want)
	}
	c := [][2]int64{{12, 15}}
	if got, want := fmt.Sprint(unionRows(a, c)), "[[0 10] [12 15] [20 30] [40 50]]"; got != want {
		t.Errorf("union: %s, want %s", got, want)
	}
	if got := intersectRows(a, nil); got != nil {
		t.Errorf("intersect with none: %v", got)
	}
	if got := intersectRows(a, c); got != nil {
		t.Errorf("disjoint intersect: %v", got)
	}
}
