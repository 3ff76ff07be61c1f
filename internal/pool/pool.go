// Package pool is the one worker pool of prep: n indexed calls on at most
// par goroutines, the first error by index returned, no call started after
// an error or once the context is done.
//
// ForEach suits calls that need nothing of their own; Workers gives each
// goroutine its own state (buffers, hashers) built once by newWorker.
package pool

import (
	"context"
	"sync"
	"sync/atomic"
)

// ForEach calls fn(0..n-1) on at most par goroutines (at least one) and
// returns the first error by index of the calls that ran. After a call
// fails, or once ctx is done, no new call starts; an index not started
// because ctx is done records ctx's error, so a cancelled pool returns an
// error unless a failure with a lower index came first.
func ForEach(ctx context.Context, n, par int, fn func(i int) error) error {
	return Workers(ctx, n, par, func() func(int) error { return fn })
}

// Workers is ForEach with state per goroutine: newWorker is called once on
// each of the pool's goroutines, and the function it returns is called with
// the indices that goroutine takes, in increasing order.
func Workers(ctx context.Context, n, par int, newWorker func() func(i int) error) error {
	if n <= 0 {
		return nil
	}
	errs := make([]error, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(n, max(1, par)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var fn func(int) error
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				if fn == nil {
					fn = newWorker()
				}
				if errs[i] = fn(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
