package convert

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSliceRuns cuts runs with gaps into slices of at most 4 rows: a slice
// starts at a needed row, ends after its last needed row, and a run split
// between slices keeps its staging slots.
func TestSliceRuns(t *testing.T) {
	runs := []run{{lo: 2, hi: 9, dst: 0}, {lo: 10, hi: 11, dst: 7}, {lo: 20, hi: 22, dst: 8}}
	got := fmt.Sprint(sliceRuns(runs, 4))
	want := "[{2 6 [{0 4 0}]} {6 9 [{0 3 4}]} {10 11 [{0 1 7}]} {20 22 [{0 2 8}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 4) = %s, want %s", runs, got, want)
	}
	got = fmt.Sprint(sliceRuns(runs, 9))
	want = "[{2 11 [{0 7 0} {8 9 7}]} {20 22 [{0 2 8}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 9) = %s, want %s", runs, got, want)
	}
	got = fmt.Sprint(sliceRuns(runs, 1)[7:])
	want = "[{10 11 [{0 1 7}]} {20 21 [{0 1 8}]} {21 22 [{0 1 9}]}]"
	if got != want {
		t.Errorf("sliceRuns(%v, 1)[7:] = %s, want %s", runs, got, want)
	}
}

// TestAdmissionBoundsBytesInFlight admits a cost beside another only
// while both fit the limit, always admits one when nothing is in flight
// (even over the limit), wakes a waiter on release, and refuses once the
// context is done.
func TestAdmissionBoundsBytesInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := newAdmission(10)
	if !a.admit(ctx, 25) {
		t.Fatal("a cost over the limit is not admitted with nothing in flight")
	}
	a.release(25)
	if !a.admit(ctx, 6) {
		t.Fatal("6 of 10 not admitted")
	}
	got := make(chan bool)
	go func() { got <- a.admit(ctx, 5) }()
	select {
	case <-got:
		t.Fatal("5 admitted beside 6 under a limit of 10")
	case <-time.After(20 * time.Millisecond):
	}
	a.release(6)
	if !<-got {
		t.Fatal("5 not admitted after the release")
	}
	go func() { got <- a.admit(ctx, 6) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	a.release(0) // a release wakes the waiter, which sees ctx done
	if <-got {
		t.Fatal("admitted after the context was cancelled")
	}
}
