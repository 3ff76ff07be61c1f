package verify_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
	"github.com/prepml/prep/verify/verifytest"
)

// heldBlocks counts the pairs of blocks (shard block and expected block,
// 2 × len(block) bytes) held inside FillBlock at once across the shards
// compared batch by batch, and their high-water mark in bytes.
type heldBlocks struct {
	mu                 sync.Mutex
	inside, waiting    int
	arrivals, barrierN int
	peak               int
}

// pairSource is a plain SampleSource (no Prefetcher, PartSource or
// JaggedSource: shards are compared batch by batch) over src, counting in
// h. The first barrierN FillBlock calls wait until another comparing
// goroutine has entered FillBlock while they are inside, or one waits for admission: without
// admission two pairs are then held at once, with it only one.
type pairSource struct {
	src verify.SampleSource
	h   *heldBlocks
}

func (p pairSource) FillBlock(ctx context.Context, ids []uint64, block []byte) error {
	h := p.h
	h.mu.Lock()
	h.inside++
	h.arrivals++
	h.peak = max(h.peak, h.inside*2*len(block))
	wait := h.arrivals <= h.barrierN
	h.mu.Unlock()
	for wait {
		h.mu.Lock()
		done := h.peak > 2*len(block) || h.waiting > 0
		h.mu.Unlock()
		if done {
			break
		}
		runtime.Gosched()
	}
	err := p.src.FillBlock(ctx, ids, block)
	h.mu.Lock()
	h.inside--
	h.mu.Unlock()
	return err
}

func (p pairSource) Close() error { return p.src.Close() }

// TestDeepBlocksWithinMemoryLimit checks Jobs shards batch by batch under
// a memory limit whose blocks' share (a quarter) is below one pair of
// blocks: the pairs are admitted one at a time, so the bytes of blocks
// held at once never pass one pair, where every comparing goroutine held
// its own pair before (Jobs pairs).
func TestDeepBlocksWithinMemoryLimit(t *testing.T) {
	f := verifytest.Build(t)
	jobs := min(4, len(f.Man.Shards))
	if jobs < 2 {
		t.Fatalf("fixture has %d shards, want at least 2", len(f.Man.Shards))
	}
	h := &heldBlocks{barrierN: 1}
	defer verify.SetAdmitWaitHook(func(d int) {
		h.mu.Lock()
		h.waiting += d
		h.mu.Unlock()
	})()
	var blockSize int
	src := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		s, err := verifytest.OpenSource(p, m, root, g, ts)
		h.mu.Lock()
		blockSize = int(g.BlockSize)
		h.mu.Unlock()
		return pairSource{src: s, h: h}, err
	}
	rep := verifytest.Run(t, verify.Options{Dir: f.Dir, Deep: true, Source: src, Jobs: jobs, MemoryLimit: 8})
	if !rep.OK || rep.DeepBatches != len(f.Man.Shards)*f.Plan.Steps() {
		t.Fatalf("deep %d of %d batches\n%s", rep.DeepBatches, len(f.Man.Shards)*f.Plan.Steps(), verifytest.Lines(rep))
	}
	if h.peak != 2*blockSize {
		t.Fatalf("blocks held at once: %d bytes, want one pair of %d-byte blocks (%d bytes) under a %d-byte limit", h.peak, blockSize, 2*blockSize, 8)
	}
}
