package verify

import (
	"reflect"
	"slices"
	"testing"

	"github.com/prepml/prep/plan"
)

// TestRowGroupsOf: the bucket table finds the row group of every id,
// over row groups of very different sizes and empty ones (skipped).
func TestRowGroupsOf(t *testing.T) {
	p := &plan.Plan{Source: plan.Source{Files: []plan.SourceFile{
		{RowGroups: []int64{1, 0, 300, 2}}, {RowGroups: []int64{0}}, {RowGroups: []int64{97, 1, 1000}},
	}}}
	rg := newRowGroups(p)
	if want := []uint64{0, 1, 301, 303, 400, 401, 1401}; !reflect.DeepEqual(rg.start, want) {
		t.Fatalf("starts %v, want %v", rg.start, want)
	}
	if len(rg.first) > 4*6+1 {
		t.Errorf("%d buckets for 6 row groups, want at most 25", len(rg.first))
	}
	g := 0
	for id := uint64(0); id < 1401; id++ {
		for rg.start[g+1] <= id {
			g++
		}
		if got := rg.of(id); got != g {
			t.Fatalf("of(%d) = %d, want %d", id, got, g)
		}
	}
}

// TestCutParts: consecutive row groups share a part while their est and
// the index over the part's id range fit the budget (row groups with no
// need skipped, their rows still in the range of a part spanning them); a
// row group over the budget alone is cut into equal id sub-ranges.
func TestCutParts(t *testing.T) {
	p := &plan.Plan{Source: plan.Source{Files: []plan.SourceFile{{RowGroups: []int64{640, 640, 640, 640, 6400}}}}}
	rg := newRowGroups(p)
	// index: 40 bytes per 64 ids of a part's range (10 words a row group
	// of 640: 400 bytes).
	got := cutParts(rg, []uint64{1000, 0, 1000, 600, 10000}, 3000)
	// 0 alone (1,400); 0-2 would take 2,000 + 1,200 = 3,200; 2-3 take
	// 1,600 + 800 = 2,400; 4 takes 10,000 + 4,000: 5 sub-ranges.
	want := []part{{0, 640}, {1280, 2560}, {2560, 3840}, {3840, 5120}, {5120, 6400}, {6400, 7680}, {7680, 8960}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parts %v, want %v", got, want)
	}
	got = cutParts(rg, []uint64{1000, 0, 1000, 0, 0}, 5000)
	if want := []part{{0, 1920}}; !reflect.DeepEqual(got, want) {
		t.Errorf("spanning an unneeded row group: parts %v, want %v", got, want)
	}
}

// TestPartIndex: marks in a range not aligned to 64 give the members in
// order and each one's index; ids outside the range or not marked give
// -1; a reset for another range starts empty.
func TestPartIndex(t *testing.T) {
	var x partIndex
	x.reset(part{100, 300})
	marked := []uint64{100, 127, 128, 191, 192, 250, 299}
	for _, id := range []uint64{250, 100, 299, 128, 127, 192, 191, 128} {
		x.mark(id)
	}
	x.seal()
	if !reflect.DeepEqual(x.ids, marked) {
		t.Fatalf("ids %v, want %v", x.ids, marked)
	}
	for i, id := range marked {
		if got := x.index(id); got != i {
			t.Errorf("index(%d) = %d, want %d", id, got, i)
		}
	}
	for _, id := range []uint64{0, 64, 99, 101, 129, 298, 300, 400} {
		if got := x.index(id); got != -1 {
			t.Errorf("index(%d) = %d, want -1", id, got)
		}
	}
	x.reset(part{0, 64})
	x.mark(5)
	x.seal()
	if !slices.Equal(x.ids, []uint64{5}) || x.index(100) != -1 || x.index(5) != 0 {
		t.Errorf("after reset: ids %v", x.ids)
	}
}
