package gpuload

import (
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/prepml/prep/gpuload/internal/testshards"
	"github.com/prepml/prep/shardfmt"
)

// TestGroupedReadsOutOfOrderReleases reads a shard whose steps span many
// read groups, holding batches and releasing them out of order, and checks
// every batch byte for byte, including held ones after later deliveries
// reused the other ring slots (their ids and tensor descriptors too).
func TestGroupedReadsOutOfOrderReleases(t *testing.T) {
	c := testshards.Config{Epochs: 1, Ranks: 2, BatchSize: 5, Steps: 37, LastCount: 2, Pads: 1}
	dir := writeSet(t, c)
	for _, o := range []Options{{Prefetch: 6}, {Prefetch: 6, VerifyChecksums: true}, {Prefetch: 1}, {Prefetch: 6, MapBlocks: true}} {
		l := openLoader(t, dir, 0, 1, o)
		var held []*Batch
		for k := 0; ; k++ {
			b, err := l.Next()
			if errors.Is(err, io.EOF) {
				if k != c.Steps {
					t.Fatalf("%+v: EOF after %d steps, want %d", o, k, c.Steps)
				}
				break
			}
			if err != nil {
				t.Fatalf("%+v: step %d: %v", o, k, err)
			}
			checkBatch(t, l, c, 0, 1, k, b)
			held = append(held, b)
			// Keep up to Ring()-1 batches; release the newest but one first.
			if len(held) == l.Ring() {
				for _, h := range held[:len(held)-1] {
					checkBatch(t, l, c, 0, 1, h.Step, h)
				}
				held[len(held)-2].Release()
				held = append(held[:len(held)-2], held[len(held)-1])
				held[0].Release()
				held = held[1:]
			}
		}
		for _, h := range held {
			checkBatch(t, l, c, 0, 1, h.Step, h)
			h.Release()
		}
		l.Close()
	}
}

// TestErrorsDoNotLeakRingSlots is the regression test for a ring slot lost
// with every pipeline error: the failing step's slot was never given back,
// so after Ring() errors and Seeks the pipeline had no slot left and Next
// waited forever.
func TestErrorsDoNotLeakRingSlots(t *testing.T) {
	dir := writeSet(t, small)
	flipBlockByte(t, filepath.Join(dir, filepath.FromSlash(shardfmt.ShardFileName(0, 1))), 2)
	for _, mapBlocks := range []bool{false, true} {
		l := openLoader(t, dir, 0, 1, Options{Prefetch: 2, VerifyChecksums: true, MapBlocks: mapBlocks})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 2 * l.Ring() {
				if err := l.Seek(1); err != nil {
					t.Error(err)
					return
				}
				mustNext(t, l).Release()
				if _, err := l.Next(); !errors.Is(err, ErrChecksum) {
					t.Errorf("Next at the damaged step = %v, want ErrChecksum", err)
					return
				}
			}
			// The whole ring is still there: hold Ring() batches.
			if err := l.Seek(0); err != nil {
				t.Error(err)
				return
			}
			mustNext(t, l).Release()
			mustNext(t, l).Release()
			if err := l.Seek(3); err != nil {
				t.Error(err)
				return
			}
			b3, b4 := mustNext(t, l), mustNext(t, l)
			checkBatch(t, l, small, 0, 1, 3, b3)
			checkBatch(t, l, small, 0, 1, 4, b4)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second): // a hang, not a speed check
			t.Fatalf("MapBlocks %v: Next never returned: ring slots leaked", mapBlocks)
		}
		l.Close()
	}
}

// TestGroupLimit pins how many ring slots one vectored read may fill: half
// the ring rounded up, at most maxGroupBytes of blocks, at least one.
func TestGroupLimit(t *testing.T) {
	for _, c := range []struct {
		ring  int
		block uint64
		want  int
	}{
		{ring: 5, block: 122_880, want: 3},   // the default ring, small blocks
		{ring: 2, block: 4096, want: 1},      // Prefetch 1
		{ring: 1, block: 4096, want: 1},      // never below one
		{ring: 1025, block: 4096, want: 513}, // MaxPrefetch: half the ring
		{ring: 1025, block: 8192, want: 512}, // 4 MiB of 8 KiB blocks
		{ring: 5, block: 3 << 20, want: 1},   // one block over half the byte bound
		{ring: 5, block: 8 << 20, want: 1},   // blocks larger than the byte bound
		{ring: 9, block: 0, want: 5},         // zero-size blocks: only the ring bounds
	} {
		if got := groupLimit(c.ring, c.block); got != c.want {
			t.Errorf("groupLimit(%d, %d) = %d, want %d", c.ring, c.block, got, c.want)
		}
	}
}

// TestDeliveryWhenTheConsumerParks runs a whole shard, a Seek back and the
// rest of it with polling off (maxSpin 0), so every wait for a group parks
// the consumer, and checks every batch byte for byte.
func TestDeliveryWhenTheConsumerParks(t *testing.T) {
	old := maxSpin
	maxSpin = 0
	defer func() { maxSpin = old }()
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 23, LastCount: 1}
	dir := writeSet(t, c)
	for _, o := range []Options{{}, {Prefetch: 1}, {Prefetch: 6, VerifyChecksums: true}, {MapBlocks: true}} {
		l := openLoader(t, dir, 0, 0, o)
		for _, from := range []int{0, 7} {
			if err := l.Seek(from); err != nil {
				t.Fatalf("%+v: Seek(%d): %v", o, from, err)
			}
			for k := from; k < c.Steps; k++ {
				b, err := l.Next()
				if err != nil {
					t.Fatalf("%+v: from %d, step %d: %v", o, from, k, err)
				}
				checkBatch(t, l, c, 0, 0, k, b)
				b.Release()
			}
			if b, err := l.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("%+v: Next after the last step = %v, %v; want io.EOF", o, b, err)
			}
		}
		l.Close()
	}
}

// TestReleaseFromAnotherGoroutine hands every batch to a second goroutine
// that releases it, so the producer often waits for a slot that a
// Release, not the consumer, gives back while the consumer polls or parks
// for the next group. Every batch's step, count and pads are checked
// before it is handed over, with polling on and off, small and large rings
// and a Seek back midway; then the whole ring is held again and checked
// byte for byte. A lost wake-up or a leaked slot would hang (bounded by the
// timeout, which is a hang check, not a speed check).
func TestReleaseFromAnotherGoroutine(t *testing.T) {
	c := testshards.Config{Epochs: 1, Ranks: 1, BatchSize: 3, Steps: 41, LastCount: 2, Pads: 1}
	dir := writeSet(t, c)
	old := maxSpin
	defer func() { maxSpin = old }()
	for _, spin := range []time.Duration{old, 0} {
		maxSpin = spin
		for _, o := range []Options{{Prefetch: 1}, {Prefetch: 2}, {Prefetch: 6}, {Prefetch: 2, MapBlocks: true}} {
			l := openLoader(t, dir, 0, 0, o)
			rel := startReleaser(l.Ring())
			done := make(chan struct{})
			go func() {
				defer close(done)
				for _, from := range []int{0, 17} {
					if err := l.Seek(from); err != nil {
						t.Errorf("Seek(%d): %v", from, err)
						return
					}
					for k := from; k < c.Steps; k++ {
						rel.reserve()
						b, err := l.Next()
						if err != nil {
							t.Errorf("%+v spin %v: step %d: %v", o, spin, k, err)
							return
						}
						if b.Step != k || b.Count != c.Count(k) || b.Pads != c.Pad(k) {
							t.Errorf("%+v spin %v: step %d: got step %d count %d pads %d", o, spin, k, b.Step, b.Count, b.Pads)
						}
						rel.hand(b)
					}
				}
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second): // a hang, not a speed check
				t.Fatalf("%+v spin %v: Next never returned", o, spin)
			}
			rel.stop()
			if t.Failed() {
				l.Close()
				return
			}
			// Every slot came back: the whole ring can be held again.
			for _, b := range holdWholeRing(t, l, c) {
				b.Release()
			}
			l.Close()
		}
	}
}

// holdWholeRing seeks l (epoch 0, rank 0 of the set cfg) back to step 0 and
// takes Ring() batches without releasing any, checking each: every ring
// slot must have come back.
func holdWholeRing(t *testing.T, l *Loader, cfg testshards.Config) []*Batch {
	t.Helper()
	if err := l.Seek(0); err != nil {
		t.Fatal(err)
	}
	var held []*Batch
	for k := range l.Ring() {
		b := mustNext(t, l)
		checkBatch(t, l, cfg, 0, 0, k, b)
		held = append(held, b)
	}
	return held
}

// releaser releases, on its own goroutine, every batch handed to it, in
// order. A consumer calls reserve before Next, so at most the ring's worth
// of batches is out (taken and not yet released) and Next never finds the
// ring full, then hand with the batch.
type releaser struct {
	tokens   chan struct{} // one per batch out
	handed   chan *Batch
	released chan struct{} // closed when the goroutine has ended
}

// startReleaser starts a releaser for a ring of n slots.
func startReleaser(n int) *releaser {
	r := &releaser{tokens: make(chan struct{}, n), handed: make(chan *Batch, n), released: make(chan struct{})}
	go func() {
		defer close(r.released)
		for b := range r.handed {
			b.Release()
			<-r.tokens
		}
	}()
	return r
}

// reserve waits until a batch may be taken (fewer than n are out).
func (r *releaser) reserve() { r.tokens <- struct{}{} }

// hand gives b, taken after reserve, to the releasing goroutine.
func (r *releaser) hand(b *Batch) { r.handed <- b }

// out returns the number of batches taken and not yet released.
func (r *releaser) out() int { return len(r.tokens) }

// stop waits for every handed batch to be released and ends the goroutine.
func (r *releaser) stop() {
	close(r.handed)
	<-r.released
}
