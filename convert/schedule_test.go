package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
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

// TestAdmissionGrow: a grow that fits is counted at once; one that does
// not waits for a release, and new admissions wait behind it; when every
// holder waits to grow, the first in task order is served over the
// limit; a grow whose stop reports true gives up counting nothing.
func TestAdmissionGrow(t *testing.T) {
	ctx := context.Background()
	never := func() bool { return false }
	a := newAdmission(10)
	a.workers = 3
	a.admit(ctx, 4) // row group of seq 0
	a.admit(ctx, 4) // seq 10
	if !a.grow(0, 2, never) || a.inFlight != 10 {
		t.Fatalf("a grow that fits: in flight %d, want 10", a.inFlight)
	}
	a.shrink(2)
	grown, admitted := make(chan bool), make(chan bool)
	go func() { grown <- a.grow(10, 5, never) }()
	time.Sleep(10 * time.Millisecond)
	go func() { admitted <- a.admit(ctx, 1) }()
	select {
	case <-grown:
		t.Fatal("grew 5 beside 8 under a limit of 10")
	case <-admitted:
		t.Fatal("admitted 1 while a grow waits")
	case <-time.After(20 * time.Millisecond):
	}
	a.release(4) // seq 0 done
	if !<-grown {
		t.Fatal("grow refused after the release")
	}
	if !<-admitted || a.inFlight != 10 {
		t.Fatalf("in flight %d after the grow and the admission, want 10", a.inFlight)
	}

	b := newAdmission(10)
	b.workers = 4
	b.admit(ctx, 6) // seq 0
	b.admit(ctx, 4) // seq 5
	late := make(chan bool)
	go func() { late <- b.grow(5, 3, never) }()
	time.Sleep(10 * time.Millisecond)
	if !b.grow(0, 3, never) || b.inFlight != 13 {
		t.Fatalf("every holder waiting: the first grow not served over the limit (in flight %d, want 13)", b.inFlight)
	}
	select {
	case <-late:
		t.Fatal("the later grow served over the limit too")
	case <-time.After(20 * time.Millisecond):
	}
	b.shrink(3)
	b.release(6) // seq 0 done: 4 in flight, the later grow fits
	if !<-late || b.inFlight != 7 {
		t.Fatalf("in flight %d, want 7", b.inFlight)
	}

	c := newAdmission(10)
	c.workers = 4
	c.admit(ctx, 6)
	c.admit(ctx, 4)
	var stop atomic.Bool
	gave := make(chan bool)
	go func() { gave <- c.grow(5, 3, stop.Load) }()
	time.Sleep(10 * time.Millisecond)
	stop.Store(true)
	c.wake()
	if <-gave || c.inFlight != 10 {
		t.Fatalf("a stopped grow: in flight %d, want 10 and false", c.inFlight)
	}
}

// TestAdmissionLongRowsJobs4: twenty rows of 1,500,000 values, five in
// each of four row groups, each row group read in row windows by one of four workers
// under a 32 MiB limit: a piece holding a long row grows its row group's
// admitted bytes before its page is decoded, so the long rows are decoded
// about one at a time instead of four at once, and the live heap stays
// within the limit and one long row's page buffers. The shards equal
// those of a run under the default limit.
func TestAdmissionLongRowsJobs4(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and converts 120 MB of list values")
	}
	if raceEnabled {
		t.Skip("measures memory; slow under the race detector")
	}
	p, spec := jagLongFixture(t, 640, 160, longRows(32, 1_500_000), jagSeqCfg)
	whole := filepath.Join(t.TempDir(), "whole")
	if _, err := Run(context.Background(), Options{Plan: p, Spec: spec, Output: whole, Jobs: 4}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bounded")
	const limit = 32 << 20
	sum, peakLive := boundedRun(t, p, spec, out, 4, limit)
	t.Logf("live %d MiB, admitted %d MiB of a heap share of %d MiB, %d row groups sliced in %d row windows", peakLive>>20, sum.AdmittedPeakBytes>>20, sum.HeapBudgetBytes>>20, sum.RowGroupsSliced, sum.RowSlices)
	if sum.RowGroupsSliced != 4 {
		t.Errorf("%d row groups sliced, want 4", sum.RowGroupsSliced)
	}
	// Measured at the pieces: live 27 MiB, admitted 46 MiB (a long row
	// served over the limit) of a 31 MiB heap share; admitting each
	// windowed row group by its estimate alone, the live heap took 110 to
	// 119 MiB. The long row being decoded holds its page buffers
	// (compressed and not, about 7 MB each here) beside what is admitted.
	const pages = 16 << 20
	checkHeapBound(t, sum, peakLive, limit, pages)
	if snapshot(t, out) != snapshot(t, whole) {
		t.Errorf("bounded run's shards differ from the default run's")
	}
}

// TestAdmissionWaitEndsOnCancel pins what stage 2's jagged block budget
// relies on (writeShards wakes the admission when its context ends): a
// writer waiting for budget that another holds gets false once the
// context is cancelled, without any release, and nothing is counted.
func TestAdmissionWaitEndsOnCancel(t *testing.T) {
	a := newAdmission(100)
	if !a.admit(context.Background(), 80) {
		t.Fatal("first admit refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer context.AfterFunc(ctx, a.wake)()
	got := make(chan bool)
	go func() { got <- a.admit(ctx, 50) }()
	select {
	case ok := <-got:
		t.Fatalf("admit of 50 beside 80 of 100 returned %v before a release or cancel", ok)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	select {
	case ok := <-got:
		if ok {
			t.Fatal("admit returned true after cancel")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("admit still waiting 10 s after cancel")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inFlight != 80 || a.holders != 1 {
		t.Errorf("in flight %d, holders %d; want 80, 1", a.inFlight, a.holders)
	}
}
