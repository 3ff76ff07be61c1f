package feature

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/source"
)

// decoder runs stage 1: every needed column chunk decoded (whole, or a row
// window at a time for a row group over the memory limit), and each row
// group's needed rows written into the staging records.
//
// A row group's columns are decoded in parallel (or, for a row group over
// the memory limit, window by window: assembleWindows); its
// records are then assembled block by block (blockRows slots at a time, a
// block small enough to stay in the core's cache) with every column's
// transform applied to the block before it is stored, so each record is
// written while hot instead of once per column. Where each block is
// assembled, and where its records go, is the stage's business: each
// worker asks sink for its recordSink (staging.go).
type decoder struct {
	files       []*sourceFile
	plans       []*tensorPlan
	set         *IDSet
	bufs        *Records          // the record layout (its data nil when staging is not in memory)
	sink        func() RecordSink // one per decode worker (stage.sink)
	arena       *Arena            // jagged tensors' values; nil when none
	jobs        int
	memoryLimit int64
	progress    func(rows int64) // rows assembled; serialised by the decoder

	adm *Admission // the run's admission (run)
	// colBufs holds the memory of column chunks assembled, for the next
	// ones to decode into (run): decoding into memory the process has
	// touched before spares a page fault a page.
	colBufs *pqread.Buffers
	stopped func(int) bool // whether the task of a sequence number is not to run on (run)

	groups           []*rowGroupJob
	rowGroupsRead    int
	rowGroupsSkipped int
	rowGroupsSliced  int // row groups read in more than one row window
	rowSlices        int // the row windows of those
}

// BeforeDecode, when set (tests only), is called by a decode worker with a
// task's sequence number and the run's internal context (cancelled at the
// first failure) before it decides whether to decode the task: once per
// task, or once per row window of a windowed row group.
var BeforeDecode func(seq int, ctx context.Context)

// errSkipped marks a column chunk not decoded because the run was already
// failing or cancelled.
var errSkipped = errors.New("skipped")

// notRun is the task sequence number of errors that must never be reported
// while a real failure exists (cancellation).
const notRun = int(^uint(0) >> 1)

// blockBytes is the target size of an assembly block: a few hundred KiB,
// well inside a core's L2 cache, and large enough that one pwrite per block
// costs little.
const blockBytes = 256 << 10

// run decodes every row group with at most d.jobs column chunks (or
// windowed row groups) decoding at once and about d.memoryLimit estimated
// bytes in flight (a row group is admitted whole, and its memory counts
// until its records are assembled; a windowed row group counts one
// window).
// On failure it returns the error of the earliest failing column chunk in
// task order: a failure skips only the column chunks after it in that
// order, so every earlier one still runs and the error reported does not
// depend on scheduling or Jobs.
func (d *decoder) run(ctx context.Context) error {
	perFile := d.plan()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	adm := NewAdmission(d.memoryLimit)
	adm.workers = max(1, d.jobs)
	d.adm = adm
	d.colBufs = pqread.NewBuffers(decodeBuffers(d.memoryLimit))
	var (
		mu       sync.Mutex
		firstErr error
		errSeq   = notRun
		left     = append([]int(nil), perFile...)
	)
	var skipFrom atomic.Int64 // tasks at or after this seq are skipped (errSeq)
	skipFrom.Store(int64(notRun))
	fail := func(seq int, err error) {
		mu.Lock()
		if seq < errSeq {
			errSeq, firstErr = seq, err
			skipFrom.Store(int64(seq))
		}
		mu.Unlock()
		cancel()
		adm.Wake() // a waiting grow of a skipped row group gives up
	}
	d.stopped = func(seq int) bool { return parent.Err() != nil || int64(seq) >= skipFrom.Load() }
	var progMu sync.Mutex

	// The schedule feeds the workers in task order, each row group once
	// admitted.
	ch := make(chan work, 64)
	go func() {
		defer close(ch)
		for _, g := range d.groups {
			g.cost = min(g.cost, d.memoryLimit)
			if !adm.Admit(ctx, g.cost) {
				return
			}
			d.open(g)
			if g.windows != nil {
				ch <- work{task: g.tasks[0], windowed: true}
				continue
			}
			d.prefetch(g)
			for _, task := range g.tasks {
				ch <- work{task: task}
			}
		}
	}()
	// d.jobs decode workers, each taking work from ch until it is closed
	// (so the pool's goroutines run one worker each).
	jobs := max(1, d.jobs)
	_ = pool.ForEach(context.Background(), jobs, jobs, func(int) error {
		var scratch []byte
		sink := d.sink()
		defer func() {
			if ctx.Err() == nil {
				if err := sink.Flush(); err != nil {
					fail(0, err)
				}
			}
		}()
		// skip reports whether task is not to be decoded (now, or
		// its next window): the run is failing before it or
		// cancelled.
		skip := func(task decodeTask) bool {
			if BeforeDecode != nil {
				BeforeDecode(task.seq, ctx)
			}
			return d.stopped(task.seq)
		}
		// decode decodes the column chunk of task, or returns
		// errSkipped (skip).
		decode := func(task decodeTask) (*pqread.Column, error) {
			if skip(task) {
				return nil, errSkipped
			}
			return d.decodeOne(d.groups[task.g], task)
		}
		// decoded counts n column chunks of file fi as read, and
		// releases the file's footer and descriptor after its last one.
		decoded := func(fi, n int) {
			mu.Lock()
			left[fi] -= n
			done := left[fi] == 0
			mu.Unlock()
			if done {
				d.files[fi].release()
			}
		}
		for w := range ch {
			task := w.task
			g := d.groups[task.g]
			var (
				seq int
				err error
			)
			runs := g.runs
			var assembled []*pqread.Column
			if w.windowed {
				// The whole row group, window by window, here.
				seq, err, scratch = d.assembleWindows(parent, g, scratch, sink, skip)
				decoded(g.fi, len(g.tasks))
			} else {
				g.cols[task.k], g.errs[task.k] = decode(task)
				decoded(g.fi, 1)
				if g.pending.Add(-1) != 0 {
					continue
				}
				// Last column of the row group: assemble its records.
				seq, err, scratch = d.assemble(parent, g, scratch, sink)
				assembled = g.cols
			}
			if err == nil {
				if err = g.vals.flush(); err != nil {
					seq = g.first
				}
			}
			// The decoded columns are done with: their memory goes to
			// the column chunks decoded next.
			for k, c := range assembled {
				d.colBufs.Put(c)
				assembled[k] = nil
			}
			g.vals = nil
			g.close()
			adm.Release(g.cost)
			if err != nil {
				fail(seq, err)
				continue
			}
			if d.progress != nil {
				var n int64
				for _, r := range runs {
					n += int64(r.Hi - r.Lo)
				}
				progMu.Lock()
				d.progress(n)
				progMu.Unlock()
			}
		}
		return nil
	})
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// decodeOne reads one column chunk whole and checks its row count.
func (d *decoder) decodeOne(g *rowGroupJob, task decodeTask) (*pqread.Column, error) {
	f := d.files[g.fi]
	tp := d.plans[task.t]
	ci := tp.cols[g.fi][task.j]
	pf, err := f.parquet()
	if err != nil {
		return nil, err
	}
	// The dictionary form hashes strings once per dictionary entry.
	col, err := pf.ReadColumnInto(d.colBufs, g.rg, ci, tp.kind.dictForm())
	if err != nil {
		return nil, err
	}
	if int64(col.Rows) != g.rows {
		return nil, &Error{File: f.rel, Column: ci.Name, RowGroup: g.rg, Row: -1, Element: -1,
			Err: ValueErrorf("decoded %d rows, footer says %d", col.Rows, g.rows)}
	}
	return col, nil
}

// BlockRows returns the staging slots per assembly block for records of rec
// bytes: blockBytes of records, at least 64 of them (fewer, down to one,
// when 64 would exceed blockMaxBytes: a spilled run allocates a block per
// decode worker, and 64 records of megabytes each would outgrow
// --memory-limit).
func BlockRows(rec int) int {
	if rec <= 0 {
		return 1 << 20
	}
	return max(min(64, blockMaxBytes/rec), 1, blockBytes/rec)
}

// blockMaxBytes bounds an assembly block of large records.
const blockMaxBytes = 4 << 20

// assemble writes the needed rows of g into the staging records, block by
// block, applying every column's transform to a block before moving on
// and handing each block to sink. It
// returns the task sequence number and error of the first failure in task
// order (a decode error, or a transform error of the earliest column that
// has one), and the scratch buffer for reuse.
func (d *decoder) assemble(ctx context.Context, g *rowGroupJob, scratch []byte, sink RecordSink) (int, error, []byte) {
	w := window{runs: g.runs, cols: g.cols, errs: g.errs}
	for k, err := range g.errs {
		if err != nil {
			// A column failed to decode: the error to report is the first
			// one in task order, which may be a transform error of an
			// earlier column.
			return d.firstError(g, w, k, scratch, nil)
		}
	}
	if k, err := d.groupMismatch(g, g.cols, 0); err != nil {
		return g.tasks[k].seq, err, scratch
	}
	seq, err, scratch := d.assembleBlocks(ctx, g, g.runs, g.cols, 0, scratch, sink)
	if err == errTransform {
		return d.firstError(g, w, len(g.tasks), scratch, nil)
	}
	return seq, err, scratch
}

// errTransform is returned by assembleBlocks when a transform failed; the
// caller finds the error to report.
var errTransform = errors.New("transform failed")

// assembleBlocks writes runs of g into the staging records block by block,
// applying the transform of every task to a block before moving on, each
// block where sink says (in place, or in scratch) and then handed to it.
// cols[k] is task k's column, whose row 0 is row rowBase of the row group;
// the rows of runs are relative to rowBase too. It returns errTransform when
// a transform fails, and otherwise the task sequence number to report with
// an error.
func (d *decoder) assembleBlocks(ctx context.Context, g *rowGroupJob, runs []RowRun, cols []*pqread.Column, rowBase int, scratch []byte, sink RecordSink) (int, error, []byte) {
	if d.bufs.Rec == 0 {
		return 0, nil, scratch
	}
	it := blockIter{runs: runs, n: BlockRows(d.bufs.Rec)}
	for {
		blk, base, slots, ok := it.next()
		if !ok {
			return 0, nil, scratch
		}
		if ctx.Err() != nil {
			// Cancelled by the caller: never the error to report while a
			// real one exists.
			return notRun, ctx.Err(), scratch
		}
		var target *Records
		target, scratch = sink.Block(blk, base, slots, scratch)
		for _, task := range g.tasks {
			if err := d.applyOne(g, task, cols[task.k], d.keyOf(g, cols, task.k), rowBase, blk, target, nil, g.vals); err != nil {
				return 0, errTransform, scratch
			}
		}
		d.applyPartitions(g.fi, blk, target)
		if err := sink.Put(g.start+uint64(rowBase), blk, target); err != nil {
			return g.first, err, scratch
		}
	}
}

// applyOne applies col, the column of task (its row 0 being row rowBase of
// g), to runs: row ranges relative to rowBase with their slots in target.
// A dense map applies its value column with key, its key column of the
// same rows (keyOf), and its key column alone not at all. Errors quote
// counts from counts if set, else from col. Jagged values go to vw.
func (d *decoder) applyOne(g *rowGroupJob, task decodeTask, col, key *pqread.Column, rowBase int, runs []RowRun, target *Records, counts *chunkCounts, vw *valueWriter) error {
	tp := d.plans[task.t]
	loc := chunkLoc{file: d.files[g.fi].rel, column: tp.cols[g.fi][task.j].Name, tensor: tp.spec.Name, rowGroup: g.rg, rowBase: int64(rowBase), counts: counts}
	return tp.kind.apply(col, key, g.fi, task.j, runs, target, loc, vw)
}

// firstError finds the error to report for a window w of g (the whole
// row group, for an unwindowed one) once a failure is known: the first
// column in task order whose decode failed, or, among the columns before
// limit, whose transform fails on a needed row of the window. Transforms
// are rerun column by column into scratch, and their output discarded:
// the run fails anyway. Errors quote the counts of counts(task) when
// counts is set (a windowed row group: the whole chunk's), else of the
// window's column.
func (d *decoder) firstError(g *rowGroupJob, w window, limit int, scratch []byte, counts func(decodeTask) *chunkCounts) (int, error, []byte) {
	for k, task := range g.tasks {
		if w.errs[k] == errSkipped {
			return notRun, context.Canceled, scratch
		}
		if w.errs[k] != nil {
			return task.seq, w.errs[k], scratch
		}
		if k >= limit {
			break
		}
		var err error
		key := d.keyOf(g, w.cols, k)
		if scratch, err = d.checkColumn(g, task, w.cols[k], key, w.rowBase, w.runs, scratch, nil); err != nil {
			if counts != nil {
				if c := counts(task); c != nil {
					_, err = d.checkColumn(g, task, w.cols[k], key, w.rowBase, w.runs, scratch, c)
				}
			}
			return task.seq, err, scratch
		}
	}
	return g.first, fmt.Errorf("%w: row group %d of %s failed without an error", ErrInternal, g.rg, d.files[g.fi].rel), scratch
}

// checkColumn runs the transform of task over runs (rows relative to
// rowBase, the row of the row group that is col's row 0; key the key
// column of a dense map's value task) into scratch (the output is
// discarded, jagged values checked against their regions' bounds:
// arena.checker), and returns the scratch buffer for reuse and its first
// error. Errors quote counts from counts if set, else from col.
func (d *decoder) checkColumn(g *rowGroupJob, task decodeTask, col, key *pqread.Column, rowBase int, runs []RowRun, scratch []byte, counts *chunkCounts) ([]byte, error) {
	rec := d.bufs.Rec
	bn := BlockRows(rec)
	if len(scratch) < bn*rec {
		scratch = make([]byte, bn*rec)
	}
	it := blockIter{runs: runs, n: bn}
	vw := d.arena.checker(g.fi, g.rg)
	for {
		blk, _, slots, ok := it.next()
		if !ok {
			return scratch, nil
		}
		target := &Records{Data: scratch[:slots*rec], Rec: rec, Off: d.bufs.Off, Size: d.bufs.Size}
		if err := d.applyOne(g, task, col, key, rowBase, blk, target, counts, vw); err != nil {
			return scratch, err
		}
	}
}

// blockIter walks a row group's runs (whose staging slots are consecutive)
// in blocks of at most n slots.
type blockIter struct {
	runs []RowRun
	n    int
	i    int // next run
	off  int // rows of runs[i] already taken
	buf  []RowRun
}

// next returns the next block: its runs with slots relative to the block's
// first staging slot base, and its number of slots. ok is false after the
// last block.
func (b *blockIter) next() (blk []RowRun, base int64, slots int, ok bool) {
	if b.i >= len(b.runs) {
		return nil, 0, 0, false
	}
	b.buf = b.buf[:0]
	base = b.runs[b.i].Dst + int64(b.off)
	for b.i < len(b.runs) && slots < b.n {
		r := b.runs[b.i]
		lo := r.Lo + b.off
		m := min(r.Hi-lo, b.n-slots)
		b.buf = append(b.buf, RowRun{Lo: lo, Hi: lo + m, Dst: r.Dst + int64(b.off) - base})
		slots += m
		if lo+m < r.Hi {
			b.off += m
		} else {
			b.i++
			b.off = 0
		}
	}
	return b.buf, base, slots, true
}

// prefetch asks the source object of g's file, when it fetches ahead (an
// object store: source.Prefetcher), for the column chunks g will read, as
// soon as g is admitted: the fetches overlap the decoding of the row
// groups before it, coalesced per row group. Windowed row groups (larger
// than the memory limit) are read as they decode instead.
func (d *decoder) prefetch(g *rowGroupJob) {
	f := d.files[g.fi]
	if _, local := f.st.(*source.Local); local {
		return // nothing to fetch ahead, and no need to open the file here
	}
	sf, err := f.open() // held until its last chunk is decoded; a failure is the decoder's to report
	if err != nil {
		return
	}
	pf, ok := sf.Object.(source.Prefetcher)
	if !ok {
		return
	}
	rs := make([]source.Range, 0, len(g.tasks))
	for _, task := range g.tasks {
		ci := d.plans[task.t].cols[g.fi][task.j]
		if off, n := sf.Parquet.ChunkRange(g.rg, ci); n > 0 {
			rs = append(rs, source.Range{Off: off, Len: n})
		}
	}
	pf.Prefetch(rs)
}
