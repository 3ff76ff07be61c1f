package convert

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
)

// TestRunShardEvents: OnShard reports every written shard once as started
// and once as committed, in that order, never concurrently with itself or
// Progress; write progress for a shard falls between its two events.
func TestRunShardEvents(t *testing.T) {
	p, spec := fixture(t, defaultCfg)
	var busy atomic.Int32
	enter := func() {
		if busy.Add(1) != 1 {
			t.Error("callbacks ran concurrently")
		}
	}
	leave := func() { busy.Add(-1) }
	var events []string
	inFlight := map[string]bool{}
	var writeBytes int64
	o := Options{Plan: p, Spec: spec, Output: t.TempDir(), Jobs: 2,
		OnShard: func(epoch, rank int, done bool) {
			enter()
			defer leave()
			k := fmt.Sprintf("e%dr%d", epoch, rank)
			if done {
				if !inFlight[k] {
					t.Errorf("%s committed without a start", k)
				}
				delete(inFlight, k)
				events = append(events, k+" done")
			} else {
				inFlight[k] = true
				events = append(events, k+" start")
			}
		},
		Progress: func(stage string, rows, bytes int64) {
			enter()
			defer leave()
			if stage == StageWrite {
				if len(inFlight) == 0 {
					t.Error("write progress outside any shard")
				}
				writeBytes += bytes
			}
		}}
	sum, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(events)
	want := []string{"e0r0 done", "e0r0 start", "e0r1 done", "e0r1 start", "e1r0 done", "e1r0 start", "e1r1 done", "e1r1 start"}
	if !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
	if sum.Shards != 4 || writeBytes == 0 {
		t.Errorf("summary %+v, write progress %d bytes", sum, writeBytes)
	}
}
