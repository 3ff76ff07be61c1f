package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestForEachCallsEveryIndexOnce(t *testing.T) {
	for _, par := range []int{0, 1, 3, 100} {
		seen := make([]atomic.Int32, 50)
		if err := ForEach(context.Background(), len(seen), par, func(i int) error {
			seen[i].Add(1)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("par %d: index %d called %d times", par, i, seen[i].Load())
			}
		}
	}
	if err := ForEach(context.Background(), 0, 4, func(int) error { return errors.New("called") }); err != nil {
		t.Fatalf("n = 0: %v", err)
	}
}

// TestForEachReturnsTheFirstErrorByIndex fails two indices; whatever the
// scheduling, the lower index's error is returned when both ran.
func TestForEachReturnsTheFirstErrorByIndex(t *testing.T) {
	for range 20 {
		var gate sync.WaitGroup
		gate.Add(2)
		err := ForEach(context.Background(), 2, 2, func(i int) error {
			gate.Done()
			gate.Wait() // both calls started before either fails
			return fmt.Errorf("index %d", i)
		})
		if err == nil || err.Error() != "index 0" {
			t.Fatalf("err = %v, want index 0", err)
		}
	}
}

func TestForEachStartsNothingAfterAFailure(t *testing.T) {
	var calls atomic.Int32
	err := ForEach(context.Background(), 100, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return errors.New("boom")
		}
		return nil
	})
	if err == nil || calls.Load() != 4 {
		t.Fatalf("err %v after %d calls, want boom after 4", err, calls.Load())
	}
}

func TestForEachStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	err := ForEach(ctx, 100, 1, func(i int) error {
		calls.Add(1)
		if i == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls, want context.Canceled after 3", err, calls.Load())
	}
}

// TestWorkersBuildsStateOncePerGoroutine counts newWorker calls: at most
// one per goroutine, and the indices of one worker increase.
func TestWorkersBuildsStateOncePerGoroutine(t *testing.T) {
	var made atomic.Int32
	err := Workers(context.Background(), 1000, 4, func() func(int) error {
		made.Add(1)
		last := -1
		return func(i int) error {
			if i <= last {
				return fmt.Errorf("index %d after %d", i, last)
			}
			last = i
			return nil
		}
	})
	if err != nil || made.Load() < 1 || made.Load() > 4 {
		t.Fatalf("err %v, %d workers made for 4 goroutines", err, made.Load())
	}
}
