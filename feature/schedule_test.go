package feature

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestSliceRuns cuts runs with gaps into slices of at most 4 rows: a slice
// starts at a needed row, ends after its last needed row, and a run split
// between slices keeps its staging slots.
func TestSliceRuns(t *testing.T) {
	runs := []RowRun{{Lo: 2, Hi: 9, Dst: 0}, {Lo: 10, Hi: 11, Dst: 7}, {Lo: 20, Hi: 22, Dst: 8}}
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
	a := NewAdmission(10)
	if !a.Admit(ctx, 25) {
		t.Fatal("a cost over the limit is not admitted with nothing in flight")
	}
	a.Release(25)
	if !a.Admit(ctx, 6) {
		t.Fatal("6 of 10 not admitted")
	}
	got := make(chan bool)
	go func() { got <- a.Admit(ctx, 5) }()
	select {
	case <-got:
		t.Fatal("5 admitted beside 6 under a limit of 10")
	case <-time.After(20 * time.Millisecond):
	}
	a.Release(6)
	if !<-got {
		t.Fatal("5 not admitted after the release")
	}
	go func() { got <- a.Admit(ctx, 6) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	a.Release(0) // a release wakes the waiter, which sees ctx done
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
	a := NewAdmission(10)
	a.workers = 3
	a.Admit(ctx, 4) // row group of seq 0
	a.Admit(ctx, 4) // seq 10
	if !a.grow(0, 2, never) || a.inFlight != 10 {
		t.Fatalf("a grow that fits: in flight %d, want 10", a.inFlight)
	}
	a.shrink(2)
	grown, admitted := make(chan bool), make(chan bool)
	go func() { grown <- a.grow(10, 5, never) }()
	time.Sleep(10 * time.Millisecond)
	go func() { admitted <- a.Admit(ctx, 1) }()
	select {
	case <-grown:
		t.Fatal("grew 5 beside 8 under a limit of 10")
	case <-admitted:
		t.Fatal("admitted 1 while a grow waits")
	case <-time.After(20 * time.Millisecond):
	}
	a.Release(4) // seq 0 done
	if !<-grown {
		t.Fatal("grow refused after the release")
	}
	if !<-admitted || a.inFlight != 10 {
		t.Fatalf("in flight %d after the grow and the admission, want 10", a.inFlight)
	}

	b := NewAdmission(10)
	b.workers = 4
	b.Admit(ctx, 6) // seq 0
	b.Admit(ctx, 4) // seq 5
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
	b.Release(6) // seq 0 done: 4 in flight, the later grow fits
	if !<-late || b.inFlight != 7 {
		t.Fatalf("in flight %d, want 7", b.inFlight)
	}

	c := NewAdmission(10)
	c.workers = 4
	c.Admit(ctx, 6)
	c.Admit(ctx, 4)
	var stop atomic.Bool
	gave := make(chan bool)
	go func() { gave <- c.grow(5, 3, stop.Load) }()
	time.Sleep(10 * time.Millisecond)
	stop.Store(true)
	c.Wake()
	if <-gave || c.inFlight != 10 {
		t.Fatalf("a stopped grow: in flight %d, want 10 and false", c.inFlight)
	}
}

// TestAdmissionWaitEndsOnCancel pins what stage 2's jagged block budget
// relies on (writeShards wakes the admission when its context ends): a
// writer waiting for budget that another holds gets false once the
// context is cancelled, without any release, and nothing is counted.
func TestAdmissionWaitEndsOnCancel(t *testing.T) {
	a := NewAdmission(100)
	if !a.Admit(context.Background(), 80) {
		t.Fatal("first admit refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer context.AfterFunc(ctx, a.Wake)()
	got := make(chan bool)
	go func() { got <- a.Admit(ctx, 50) }()
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

// TestTasksHeldOnlyWhileAdmitted pins the fault where the decoder listed
// every column chunk of the run as a task before decoding and held the list
// to the end (48 bytes a column chunk: 3.8 MB for 16 files of 5,000
// columns, without bound as files are added): a row group's tasks exist
// from its admission to its assembly only. Here a limit of one byte admits
// one row group of the 24 (8 files of 3) at a time, each of one column
// chunk read a row a window, so one task is held at every window and none
// after the run.
func TestTasksHeldOnlyWhileAdmitted(t *testing.T) {
	p := copiesPlan(t, 8)
	spec := &Spec{Tensors: []TensorSpec{{Name: "x", Column: "x", DType: "F32"}}}
	prog, err := Compile(context.Background(), p, nil, spec, Budget{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	base := tasksHeld.Load()
	var most, calls atomic.Int64
	old := BeforeDecode
	defer func() { BeforeDecode = old }()
	BeforeDecode = func(int, context.Context) {
		calls.Add(1)
		if n := tasksHeld.Load() - base; n > most.Load() {
			most.Store(n)
		}
	}
	set := NewIDSet(p.NumSamples())
	set.Fill()
	set.Seal()
	recs := NewRecords(prog.Tensors(), make([]byte, int(set.Len())*RecordSize(prog.Tensors())))
	if _, err := prog.Decode(context.Background(), set, Target{Records: recs, Sink: func() RecordSink { return NewMemSink(recs) }}, 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	if c := calls.Load(); c != 240 {
		t.Fatalf("%d row windows decoded, want 240 (24 row groups of 10 rows, a row a window)", c)
	}
	if m := most.Load(); m != 1 {
		t.Errorf("up to %d tasks held while decoding one row group of one column chunk at a time", m)
	}
	if n := tasksHeld.Load() - base; n != 0 {
		t.Errorf("%d tasks held after decoding", n)
	}
}
