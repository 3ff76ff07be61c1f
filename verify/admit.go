package verify

import (
	"context"
	"sync"
)

// blockAdmission bounds the bytes of shard blocks held at once by the
// goroutines comparing batch by batch (Options.Jobs of them): each
// comparison holds the batch's block read from the shard and the block
// materialized from the source (2 × BlockSize bytes) only once admitted
// against limit bytes. One comparison is always admitted when nothing is
// in flight, so a block larger than the limit is compared alone (the
// work is serialised), never refused. It is convert's admission
// (feature/schedule.go) without the growth of admitted costs.
type blockAdmission struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int64
	peak     int64 // the most inFlight has been, in bytes
	limit    int64
}

// admitWaitHook, when set (tests only), is called with +1 as a
// comparison starts waiting for admission and -1 as it wakes.
var admitWaitHook func(delta int)

// newBlockAdmission returns an admission of limit bytes, nothing in flight.
func newBlockAdmission(limit int64) *blockAdmission {
	a := &blockAdmission{limit: max(1, limit)}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// admit waits until cost bytes fit the limit beside those in flight (or
// nothing is in flight) and counts them; false when ctx is done (checked
// whenever a release wakes the wait), nothing counted.
func (a *blockAdmission) admit(ctx context.Context, cost int64) bool {
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.cond.Broadcast()
		a.mu.Unlock()
	})
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.inFlight > 0 && a.inFlight+cost > a.limit && ctx.Err() == nil {
		if admitWaitHook != nil {
			admitWaitHook(1)
		}
		a.cond.Wait()
		if admitWaitHook != nil {
			admitWaitHook(-1)
		}
	}
	if ctx.Err() != nil {
		return false
	}
	a.inFlight += cost
	a.peak = max(a.peak, a.inFlight)
	return true
}

// release gives back cost bytes admitted earlier.
func (a *blockAdmission) release(cost int64) {
	a.mu.Lock()
	a.inFlight -= cost
	a.cond.Broadcast()
	a.mu.Unlock()
}

// peakBytes returns the most bytes admitted at once so far.
func (a *blockAdmission) peakBytes() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}
