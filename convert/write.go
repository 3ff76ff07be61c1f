package convert

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// Stage 2: the one shard writer. A stage (staging.go) cuts the work into
// phases; each phase writes steps [s0, s1) of its shards, at most par
// shards at once, from records its load made readable. A shard is opened
// (temporary name) at its first phase and committed, then listed in the
// manifest, at its last. In memory there is one phase holding every shard
// and every step; a spilled stage has one phase per output window (spill.go),
// so that a window's records are read back once for all its shards.

// phase is one step of stage 2; see above.
type phase struct {
	keys   []shardKey
	s0, s1 int  // steps
	par    int  // shards written at once
	commit bool // the last phase of its shards
	// load, when set, makes the phase's records readable before any of its
	// shards is written.
	load func(ctx context.Context) error
	// filler returns the function that fills the batches of shard keys[u]
	// (written through o) in this phase.
	filler func(u int, o *shardOut) fillFunc
}

// fillFunc copies the samples ids of one step's batch (the last pads of them
// pad samples) into slots 0..len(ids)-1 of block.
type fillFunc func(step int, block []byte, ids []uint64, pads int) error

// writeShards is stage 2: every phase of st in order. A failing shard is
// aborted (its temporary file removed), as is every shard still open when
// an error ends the stage; committed shards stay for the caller's rollback.
// When ctx ends, no new shard starts and ctx's error is returned unless
// every shard was already committed.
func (r *runner) writeShards(ctx context.Context, st stage) error {
	// The first failure cancels wctx, so the other shards stop within 64
	// steps; it, not the cancellations it causes, is the error returned.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if r.jagBudget != nil {
		// A failure or Ctrl-C wakes writers waiting for jagged block budget.
		r.jagCtx = wctx
		defer context.AfterFunc(wctx, r.jagBudget.Wake)()
	}
	var failMu sync.Mutex
	var failed error
	fail := func(err error) {
		failMu.Lock()
		if failed == nil && wctx.Err() == nil {
			failed = err
		}
		failMu.Unlock()
		cancel()
	}
	var mu sync.Mutex
	open := map[shardKey]*shardOut{}
	abortAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for k, o := range open {
			o.w.Abort()
			delete(open, k)
		}
	}
	for _, ph := range st.phases() {
		if ph.load != nil {
			if err := ph.load(wctx); err != nil {
				abortAll()
				return err
			}
		}
		err := pool.ForEach(wctx, len(ph.keys), ph.par, func(u int) (err error) {
			defer func() {
				if err != nil {
					fail(err)
				}
			}()
			k := ph.keys[u]
			mu.Lock()
			o := open[k]
			mu.Unlock()
			if o == nil {
				r.shardEvent(k, false)
				if o, err = r.openShard(k); err != nil {
					return err
				}
				mu.Lock()
				open[k] = o
				mu.Unlock()
			}
			defer func() {
				if err != nil {
					mu.Lock()
					delete(open, k)
					mu.Unlock()
					o.w.Abort()
				}
			}()
			fill := ph.filler(u, o)
			for step := ph.s0; step < ph.s1; step++ {
				if (step-ph.s0)%64 == 0 && wctx.Err() != nil {
					return wctx.Err()
				}
				if err := r.writeStep(o, step, fill); err != nil {
					return err
				}
			}
			if !ph.commit {
				return nil
			}
			if err := r.commitShard(o); err != nil {
				return err
			}
			mu.Lock()
			delete(open, k)
			mu.Unlock()
			r.shardEvent(k, true)
			return nil
		})
		if err != nil {
			abortAll()
			failMu.Lock()
			defer failMu.Unlock()
			if failed != nil {
				return failed
			}
			return err
		}
	}
	return nil
}

// shardWriters returns how many shards stage 2 writes at once for jobs:
// 2*jobs, or 1 for jobs 1.
func shardWriters(jobs int) int {
	if jobs > 1 {
		return 2 * jobs
	}
	return max(1, jobs)
}

// shardOut is one shard being written: its writer, a reusable batch block
// and the rows written so far.
type shardOut struct {
	k     shardKey
	rel   string // path under Output, slash-separated
	path  string
	w     *shardfmt.Writer
	geo   shardfmt.Geometry
	block []byte     // the batch block (its fixed part, with jagged tensors)
	jag   *jaggedOut // jagged tensors' references; nil when none
	ids   []uint64
	rows  int64
}

// writerOptions returns the shard writer options of k.
func (r *runner) writerOptions(k shardKey) shardfmt.WriterOptions {
	prov := r.prov
	prov.Epoch, prov.Rank = uint32(k.epoch), uint32(k.rank)
	return shardfmt.WriterOptions{BatchSize: r.p.BatchSize(), NumBatches: r.p.Steps(), Tensors: r.tensors, Provenance: prov}
}

// openShard creates the (temporary) shard file of k.
func (r *runner) openShard(k shardKey) (*shardOut, error) {
	rel := shardset.ShardPath(k.epoch, k.rank)
	path := filepath.Join(r.o.Output, filepath.FromSlash(rel))
	w, err := r.tx.CreateShard(k.epoch, k.rank, r.writerOptions(k))
	if err != nil {
		return nil, err
	}
	geo := w.Geometry()
	return &shardOut{k: k, rel: rel, path: path, w: w, geo: geo, block: make([]byte, geo.BlockSize), jag: newJaggedOut(geo)}, nil
}

// writeStep writes the batch of step: fill copies its samples (ids, the
// last pads of them pad samples) into block slots 0..len(ids)-1; the slots
// after them are zero.
func (r *runner) writeStep(o *shardOut, step int, fill fillFunc) error {
	ids, pads, err := r.p.RankBatch(o.k.epoch, o.k.rank, step, o.ids)
	o.ids = ids
	if err != nil {
		return fmt.Errorf("epoch %d, rank %d, step %d: %w", o.k.epoch, o.k.rank, step, err)
	}
	if len(ids) < o.geo.BatchSize {
		clear(o.block)
	}
	if err := fill(step, o.block, ids, pads); err != nil {
		return err
	}
	block := o.block
	if o.jag != nil {
		var held int64
		if block, held, err = r.jaggedBlock(o, step, len(ids)); err != nil {
			return err
		}
		defer r.jagBudget.Release(held)
	}
	if err := o.w.WriteBatch(block, ids, pads); err != nil {
		return err
	}
	o.rows += int64(len(ids))
	r.progress(StageWrite, int64(len(ids)), int64(len(block)))
	return nil
}

// commitShard commits o and records it in the manifest (shardset.Txn.Commit).
func (r *runner) commitShard(o *shardOut) error {
	k := o.k
	entry, err := r.tx.Commit(o.w, shardfmt.ShardEntry{Epoch: k.epoch, Rank: k.rank, Batches: r.p.Steps()})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.sum.Shards++
	r.sum.Rows += o.rows
	r.sum.Bytes += entry.Size
	r.mu.Unlock()
	return nil
}
