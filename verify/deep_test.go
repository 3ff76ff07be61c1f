package verify_test

import (
	"context"
	"sync"
	"testing"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/verify"
)

// limitRecorder wraps convert's SampleSource, recording the decode limit
// verify sets and the ids of each prefetch.
type limitRecorder struct {
	verify.SampleSource
	mu      *sync.Mutex
	limits  *[]int64
	fetches *[]int
}

func (l limitRecorder) SetMemoryLimit(n int64) {
	l.mu.Lock()
	*l.limits = append(*l.limits, n)
	l.mu.Unlock()
	l.SampleSource.(verify.MemoryLimiter).SetMemoryLimit(n)
}

func (l limitRecorder) Prefetch(ctx context.Context, ids []uint64) error {
	l.mu.Lock()
	*l.fetches = append(*l.fetches, len(ids))
	l.mu.Unlock()
	return l.SampleSource.(verify.Prefetcher).Prefetch(ctx, ids)
}

// TestDeepHonoursMemoryLimit pins a fault: verify --deep decoded whole row
// groups under a fixed 1 GiB per shard checked (3.0 GB for one row group
// of 26M BIGINT rows), whatever the memory limit. Each of the Jobs checks
// now gets an equal share of Options.MemoryLimit: half to decode in (a row
// group over it is read in row windows, as convert does), a quarter for
// the samples prefetched (at least one batch). Under a 2 KiB limit, far
// below the row groups' size, the set still verifies clean.
func TestDeepHonoursMemoryLimit(t *testing.T) {
	out, _, p := convertFixture(t)
	var (
		mu      sync.Mutex
		limits  []int64
		fetches []int
	)
	opener := func(p *plan.Plan, m *shardfmt.Manifest, root string, g shardfmt.Geometry, ts []shardfmt.TensorInfo) (verify.SampleSource, error) {
		src, err := verify.ConvertSource(p, m, root, g, ts)
		if err != nil {
			return nil, err
		}
		return limitRecorder{SampleSource: src, mu: &mu, limits: &limits, fetches: &fetches}, nil
	}
	const limit, jobs = 2 << 10, 2
	rep := run(t, verify.Options{Dir: out, Deep: true, Source: opener, Jobs: jobs, MemoryLimit: limit})
	if !rep.OK || rep.DeepBatches != 4*p.Steps() {
		t.Fatalf("deep %d of %d batches\n%s", rep.DeepBatches, 4*p.Steps(), lines(rep))
	}
	if len(limits) != 4 {
		t.Fatalf("SetMemoryLimit called %d times, want once per shard", len(limits))
	}
	for _, n := range limits {
		if n != limit/jobs/2 {
			t.Errorf("decode limit %d, want %d", n, limit/jobs/2)
		}
	}
	// 24 sample bytes per id (x F64, feat 2 x F32, id I64) and 128 of
	// bookkeeping: a quarter of the share (256 bytes) holds 1 id; a
	// prefetch takes the batch (4 ids) that crosses it.
	per := p.Config.GlobalBatch / p.Config.WorldSize
	for _, n := range fetches {
		if n > (limit/jobs/4)/(24+128)+per {
			t.Errorf("a prefetch of %d ids, want at most %d", n, (limit/jobs/4)/(24+128)+per)
		}
	}
	if len(fetches) < 8 {
		t.Errorf("%d prefetches, want the small limit to cut them", len(fetches))
	}
}
