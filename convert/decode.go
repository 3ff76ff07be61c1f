package convert

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/pqread"
)

// decodeTask is one column chunk to decode: value j of tensor t, from the
// row group of group g.
type decodeTask struct {
	seq   int // position in task order: (file, row group, tensor, value)
	g     int // index into decoder.groups
	k     int // column index within the group (tensor-major, then value)
	t     int
	j     int
	bytes int64 // estimated decoded bytes of the whole column chunk (chunkBytes)
}

// work is what a decode worker is handed: one column chunk of a row group
// decoded whole, or one row slice (every column of it) of a sliced row
// group.
type work struct {
	task  decodeTask // the column chunk; for a slice, the group's first
	slice int        // index into the group's slices, or -1
}

// rowGroupJob is one row group holding needed ids: its column chunks are
// decoded by decodeTasks (in parallel), and the worker that finishes the
// last one assembles the group's staging records (assemble). A row group
// whose column chunks would not fit the memory limit together is instead
// assembled in row slices, each slice handed to one worker
// (assembleSliced).
type rowGroupJob struct {
	fi, rg  int
	start   uint64 // sample id of the row group's first row
	rows    int64  // rows in the row group
	runs    []run  // needed rows and their staging slots
	first   int    // seq of the group's first task
	tasks   []decodeTask
	cost    int64      // estimated bytes in flight from admission to assembly (of one slice, when sliced)
	slices  []rowSlice // non-nil: assembled slice by slice (assembleSliced)
	errOnce sync.Once  // a sliced row group's error is searched for once (sliceError)
	errSeq  int
	errVal  error
	cols    []*pqread.Column // whole row groups only: the decoded columns
	errs    []error          // and their errors
	pending atomic.Int32     // column chunks (or slices) not done yet
}

// decoder runs stage 1: every needed column chunk decoded (whole, or a row
// slice at a time for a row group over the memory limit), and each row
// group's needed rows written into the staging records.
//
// A row group's columns are decoded in parallel (or, for a row group over
// the memory limit, one slice of one column at a time: assembleSliced); its
// records are then assembled block by block (blockRows slots at a time, a
// block small enough to stay in the core's cache) with every column's
// transform applied to the block before it is stored, so each record is
// written while hot instead of once per column. Blocks are assembled in
// place in bufs.data, or, with spill set, in a private buffer whose records
// are then routed to their spill windows.
type decoder struct {
	files       []*sourceFile
	plans       []*tensorPlan
	set         *idSet
	bufs        *records
	spill       *spiller // records are routed to spill windows instead of bufs.data
	jobs        int
	memoryLimit int64
	progress    func(rows int64) // rows assembled; serialised by the decoder

	groups           []*rowGroupJob
	rowGroupsRead    int
	rowGroupsSkipped int
	rowGroupsSliced  int
	rowSlices        int
}

// beforeDecode, when set (tests only), is called by a decode worker with a
// task's sequence number and the run's internal context (cancelled at the
// first failure) before it decides whether to decode the task: once per
// task, or once per slice and again on a failure for a sliced row group.
var beforeDecode func(seq int, ctx context.Context)

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

// pageAllowance is the memory counted for the page buffers of one column
// chunk being decoded, beside its decoded values.
const pageAllowance = 64 << 10

// chunkBytes estimates the memory one decoded column chunk of rows rows of
// tp takes: the larger of the tensor's own estimate (rowCost) and the
// estimate from the source file's footer (pqread.File.DecodedSize, which
// counts the source values, such as whole strings hashed or padded to a
// few bytes, and whole lists truncated to a short shape).
func chunkBytes(tp *tensorPlan, rows, footer int64) int64 {
	// Capped at 1 PiB (a hostile footer's row count cannot make a row
	// group's sum of these overflow): anything near it is sliced anyway.
	const most = 1 << 50
	per := rowCost(tp)
	if rows > most/per {
		return most
	}
	return min(max(rows*per, footer), most)
}

// rowCost is the estimated bytes per row of one decoded column chunk of tp,
// from the tensor's output alone.
func rowCost(tp *tensorPlan) int64 {
	per := int64(tp.es)
	switch tp.mode {
	case modeList:
		per = int64(tp.perSample * tp.es)
	case modeBytesPad:
		per = tp.maxLen
	case modeBytesHash:
		per = 32
	}
	return 2*per + 2
}

// rowSlice is a stretch of rows [lo, hi) of a row group assembled on its
// own, with the needed runs inside it (rows relative to lo, slots as in the
// row group's runs).
type rowSlice struct {
	lo, hi int
	runs   []run
}

// sliceRuns cuts runs into slices spanning at most n rows each (n >= 1),
// each starting at a needed row and ending after its last needed row, so
// that rows needed by no slice are not copied.
func sliceRuns(runs []run, n int) []rowSlice {
	var out []rowSlice
	i, off := 0, 0 // next run, and rows of it already in a slice
	for i < len(runs) {
		lo := runs[i].lo + off
		s := rowSlice{lo: lo, hi: lo}
		for i < len(runs) && runs[i].lo+off < lo+n {
			r := runs[i]
			a, b := r.lo+off, min(r.hi, lo+n)
			s.runs = append(s.runs, run{lo: a - lo, hi: b - lo, dst: r.dst + int64(off)})
			s.hi = b
			if b < r.hi {
				off = b - r.lo
			} else {
				i, off = i+1, 0
			}
		}
		out = append(out, s)
	}
	return out
}

// planSlices makes g, whose estimated cost exceeds the memory limit, a
// sliced row group: its needed rows are cut into slices whose decoded
// columns together take about half the limit shared by the Jobs workers
// that may each assemble one slice at once (at least one row each), and its
// cost, counted per slice, becomes one slice and the page allowance for
// every column chunk, since assembleSliced holds no more than that
// (pqread.ReadColumnRows keeps only the rows asked for and the page being
// decoded). A row group whose rows all fit one slice stays whole.
func (d *decoder) planSlices(g *rowGroupJob) {
	var perRow int64
	for _, task := range g.tasks {
		perRow += taskRowBytes(g, task)
	}
	if n := max(1, d.memoryLimit/2/int64(d.jobs)/perRow); n < g.rows {
		g.slices = sliceRuns(g.runs, int(n))
		g.cost = n*perRow + int64(len(g.tasks))*pageAllowance
	}
}

// taskRowBytes is the estimated decoded bytes per row of task's column
// chunk in g (at least 1).
func taskRowBytes(g *rowGroupJob, task decodeTask) int64 {
	return max(1, (task.bytes+g.rows-1)/g.rows)
}

// plan lists the row groups to read and their column chunks, in (file, row
// group, tensor, value) order, skipping row groups with no needed id. It
// returns the number of column chunks per file.
func (d *decoder) plan() (perFile []int) {
	perFile = make([]int, len(d.files))
	seq := 0
	for fi, f := range d.files {
		start := f.start
		for rg, rows := range f.meta.RowGroups {
			if rows == 0 {
				continue
			}
			runs := d.set.runs(start, rows)
			first := start
			start += uint64(rows)
			if len(runs) == 0 {
				d.rowGroupsSkipped++
				continue
			}
			d.rowGroupsRead++
			g := &rowGroupJob{fi: fi, rg: rg, start: first, rows: rows, runs: runs, first: seq}
			for ti, tp := range d.plans {
				for j, ci := range tp.cols[fi] {
					b := chunkBytes(tp, rows, f.decodedSize(rg, ci))
					g.tasks = append(g.tasks, decodeTask{seq: seq, g: len(d.groups), k: len(g.tasks), t: ti, j: j, bytes: b})
					g.cost += b + pageAllowance
					seq++
					perFile[fi]++
				}
			}
			if g.cost > d.memoryLimit {
				d.planSlices(g)
			}
			// The file's footer is held while its row groups are read.
			g.cost += f.footerCost
			if g.slices != nil {
				d.rowGroupsSliced++
				d.rowSlices += len(g.slices)
				g.pending.Store(int32(len(g.slices)))
			} else {
				g.cols = make([]*pqread.Column, len(g.tasks))
				g.errs = make([]error, len(g.tasks))
				g.pending.Store(int32(len(g.tasks)))
			}
			d.groups = append(d.groups, g)
		}
	}
	return perFile
}

// run decodes every row group with at most d.jobs column chunks (or slices)
// decoding at once and about d.memoryLimit estimated bytes in flight (a row
// group is admitted whole, and its memory counts until its records are
// assembled; each slice of a sliced row group is admitted on its own, and
// assembled by whichever worker takes it).
// On failure it returns the error of the earliest failing column chunk in
// task order: a failure skips only the column chunks after it in that
// order, so every earlier one still runs and the error reported does not
// depend on scheduling or Jobs.
func (d *decoder) run(ctx context.Context) error {
	perFile := d.plan()
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		inFlight int64
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
	}
	release := func(cost int64) {
		mu.Lock()
		inFlight -= cost
		cond.Broadcast()
		mu.Unlock()
	}
	var progMu sync.Mutex

	ch := make(chan work, 64)
	var wg sync.WaitGroup
	for w := 0; w < d.jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var scratch []byte
			var rb *routeBuffers
			if d.spill != nil {
				rb = d.spill.newRouteBuffers()
				defer func() {
					if ctx.Err() == nil {
						if err := d.spill.flushAll(rb); err != nil {
							fail(0, err)
						}
					}
				}()
			}
			// decode decodes the column chunk of task (the rows of rr
			// only, if set), or returns errSkipped when the run is
			// failing before it or cancelled.
			decode := func(task decodeTask, rr *pqread.RowRange) (*pqread.Column, error) {
				if beforeDecode != nil {
					beforeDecode(task.seq, ctx)
				}
				if parent.Err() != nil || int64(task.seq) >= skipFrom.Load() {
					return nil, errSkipped
				}
				return d.decodeOne(d.groups[task.g], task, rr)
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
				if g.slices != nil {
					// One slice of the row group, decoded and assembled here.
					runs = g.slices[w.slice].runs
					seq, err, scratch = d.assembleSliced(parent, g, w.slice, scratch, rb, decode)
					if g.pending.Add(-1) == 0 {
						decoded(g.fi, len(g.tasks))
					}
				} else {
					g.cols[task.k], g.errs[task.k] = decode(task, nil)
					decoded(g.fi, 1)
					if g.pending.Add(-1) != 0 {
						continue
					}
					// Last column of the row group: assemble its records.
					seq, err, scratch = d.assemble(parent, g, scratch, rb)
					clear(g.cols) // the decoded columns are garbage now
				}
				release(g.cost)
				if err != nil {
					fail(seq, err)
					continue
				}
				if d.progress != nil {
					var n int64
					for _, r := range runs {
						n += int64(r.hi - r.lo)
					}
					progMu.Lock()
					d.progress(n)
					progMu.Unlock()
				}
			}
		}()
	}
	// admit waits until cost fits the memory limit beside what is in flight
	// (or nothing is), and counts it; false when the run is ending.
	admit := func(cost int64) bool {
		mu.Lock()
		defer mu.Unlock()
		for inFlight > 0 && inFlight+cost > d.memoryLimit && ctx.Err() == nil {
			cond.Wait()
		}
		if ctx.Err() != nil {
			return false
		}
		inFlight += cost
		return true
	}
admission:
	for _, g := range d.groups {
		g.cost = min(g.cost, d.memoryLimit)
		if g.slices != nil {
			// Each slice is admitted and assembled on its own, by any worker.
			for si := range g.slices {
				if !admit(g.cost) {
					break admission
				}
				ch <- work{task: g.tasks[0], slice: si}
			}
			continue
		}
		if !admit(g.cost) {
			break
		}
		for _, task := range g.tasks {
			ch <- work{task: task, slice: -1}
		}
	}
	close(ch)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// decodeOne reads one column chunk, or with rr the rows rr.Lo to rr.Hi of
// it (pqread.ReadColumnRows), and checks its row count.
func (d *decoder) decodeOne(g *rowGroupJob, task decodeTask, rr *pqread.RowRange) (*pqread.Column, error) {
	f := d.files[g.fi]
	tp := d.plans[task.t]
	ci := tp.cols[g.fi][task.j]
	dict := tp.mode == modeBytesHash // strings hashed once per dictionary entry
	pf, err := f.parquet()
	if err != nil {
		return nil, err
	}
	if rr != nil {
		rr.Dict = dict
		return pf.ReadColumnRows(g.rg, ci, *rr)
	}
	read := pf.ReadColumn
	if dict {
		read = pf.ReadColumnDict
	}
	col, err := read(g.rg, ci)
	if err != nil {
		return nil, err
	}
	if int64(col.Rows) != g.rows {
		return nil, &Error{File: f.rel, Column: ci.Name, RowGroup: g.rg, Row: -1, Element: -1,
			Err: valueErrorf("decoded %d rows, footer says %d", col.Rows, g.rows)}
	}
	return col, nil
}

// blockRows returns the staging slots per assembly block for records of rec
// bytes: blockBytes of records, at least 64 of them (fewer, down to one,
// when 64 would exceed blockMaxBytes: a spilled run allocates a block per
// decode worker, and 64 records of megabytes each would outgrow
// --memory-limit).
func blockRows(rec int) int {
	if rec <= 0 {
		return 1 << 20
	}
	return max(min(64, blockMaxBytes/rec), 1, blockBytes/rec)
}

// blockMaxBytes bounds an assembly block of large records.
const blockMaxBytes = 4 << 20

// assemble writes the needed rows of g into the staging records, block by
// block, applying every column's transform to a block before moving on
// (with a spiller, each block is routed to its spill windows through rb). It
// returns the task sequence number and error of the first failure in task
// order (a decode error, or a transform error of the earliest column that
// has one), and the scratch buffer for reuse.
func (d *decoder) assemble(ctx context.Context, g *rowGroupJob, scratch []byte, rb *routeBuffers) (int, error, []byte) {
	for k, err := range g.errs {
		if err != nil {
			// A column failed to decode: the error to report is the first
			// one in task order, which may be a transform error of an
			// earlier column.
			return d.firstError(g, k, scratch)
		}
	}
	seq, err, scratch := d.assembleBlocks(ctx, g, g.runs, g.cols, 0, scratch, rb)
	if err == errTransform {
		return d.firstError(g, len(g.tasks), scratch)
	}
	return seq, err, scratch
}

// errTransform is returned by assembleBlocks when a transform failed; the
// caller finds the error to report.
var errTransform = errors.New("transform failed")

// assembleBlocks writes runs of g into the staging records block by block,
// applying the transform of every task to a block before moving on (with a
// spiller, each block is then routed to its spill windows through rb).
// cols[k] is task k's column, whose row 0 is row rowBase of the row group;
// the rows of runs are relative to rowBase too. It returns errTransform when
// a transform fails, and otherwise the task sequence number to report with
// an error.
func (d *decoder) assembleBlocks(ctx context.Context, g *rowGroupJob, runs []run, cols []*pqread.Column, rowBase int, scratch []byte, rb *routeBuffers) (int, error, []byte) {
	rec := d.bufs.rec
	if rec == 0 {
		return 0, nil, scratch
	}
	bn := blockRows(rec)
	private := d.spill != nil // blocks built in scratch
	if private && len(scratch) < bn*rec {
		scratch = make([]byte, bn*rec)
	}
	it := blockIter{runs: runs, n: bn}
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
		target := d.bufs
		if private {
			target = &records{data: scratch[:slots*rec], rec: rec, off: d.bufs.off, size: d.bufs.size}
		} else {
			for i := range blk {
				blk[i].dst += base
			}
		}
		for _, task := range g.tasks {
			if err := d.applyOne(g, task, cols[task.k], rowBase, blk, target, nil); err != nil {
				return 0, errTransform, scratch
			}
		}
		if d.spill != nil {
			if err := d.spill.route(rb, g.start+uint64(rowBase), blk, target.data); err != nil {
				return g.first, err, scratch
			}
		}
	}
}

// assembleSliced decodes and assembles slice si of a sliced row group
// (g.slices), holding no more than that slice of every column: the slice's
// rows of every column chunk are decoded in task order
// (pqread.ReadColumnRows, which passes over the pages before them), then
// its records are assembled as assemble does. The slices of a row group
// may be assembled by several workers at once. The last slice reads every
// column chunk to its end, so every page is checked as in the unsliced
// path. On failure it reports the error the unsliced path would, found by
// firstErrorSliced (once per row group: sliceError).
func (d *decoder) assembleSliced(ctx context.Context, g *rowGroupJob, si int, scratch []byte, rb *routeBuffers, decode decodeFunc) (int, error, []byte) {
	sl := g.slices[si]
	cols := make([]*pqread.Column, len(g.tasks))
	for k, task := range g.tasks {
		col, err := decode(task, &pqread.RowRange{Lo: sl.lo, Hi: sl.hi, Rest: si == len(g.slices)-1})
		if err == errSkipped {
			return notRun, context.Canceled, scratch
		}
		if err != nil {
			clear(cols)
			return d.sliceError(g, scratch, decode)
		}
		cols[k] = col
	}
	seq, err, scratch := d.assembleBlocks(ctx, g, sl.runs, cols, sl.lo, scratch, rb)
	clear(cols)
	if err == errTransform {
		return d.sliceError(g, scratch, decode)
	}
	return seq, err, scratch
}

// decodeFunc decodes the column chunk of a task, or the rows of rr only if
// rr is set; it returns errSkipped when the run is failing before the task
// or cancelled.
type decodeFunc func(task decodeTask, rr *pqread.RowRange) (*pqread.Column, error)

// applyOne applies col, the column of task (its row 0 being row rowBase of
// g), to runs: row ranges relative to rowBase with their slots in target.
// Errors quote counts from counts if set, else from col.
func (d *decoder) applyOne(g *rowGroupJob, task decodeTask, col *pqread.Column, rowBase int, runs []run, target *records, counts *chunkCounts) error {
	tp := d.plans[task.t]
	loc := chunkLoc{file: d.files[g.fi].rel, column: tp.cols[g.fi][task.j].Name, tensor: tp.spec.Name, rowGroup: g.rg, rowBase: int64(rowBase), counts: counts}
	return tp.apply(col, g.fi, task.j, runs, target, loc)
}

// firstError finds the error to report for g once a failure is known: the
// first column in task order whose decode failed, or, among the columns
// before limit, whose transform fails on a needed row. Transforms are rerun
// column by column into scratch, and their output discarded: the run fails
// anyway.
func (d *decoder) firstError(g *rowGroupJob, limit int, scratch []byte) (int, error, []byte) {
	for k, task := range g.tasks {
		if g.errs[k] == errSkipped {
			return notRun, context.Canceled, scratch
		}
		if g.errs[k] != nil {
			return task.seq, g.errs[k], scratch
		}
		if k >= limit {
			break
		}
		var err error
		if scratch, err = d.checkColumn(g, task, g.cols[k], 0, g.runs, scratch, nil); err != nil {
			return task.seq, err, scratch
		}
	}
	return g.first, fmt.Errorf("internal: row group %d of %s failed without an error", g.rg, d.files[g.fi].rel), scratch
}

// sliceError returns the error to report for a failed sliced row group,
// found once per row group by firstErrorSliced: slices of it that fail at
// once on other workers wait for that search instead of each running
// their own, which would hold a piece each beside the memory limit.
func (d *decoder) sliceError(g *rowGroupJob, scratch []byte, decode decodeFunc) (int, error, []byte) {
	g.errOnce.Do(func() { g.errSeq, g.errVal, scratch = d.firstErrorSliced(g, scratch, decode) })
	return g.errSeq, g.errVal, scratch
}

// firstErrorSliced is firstError for a sliced row group. Each column chunk
// in task order is decoded again in pieces that cover all its rows, as
// many rows a piece as half the memory limit holds of that column (the
// last piece reads it to its end, with Rest; a piece that fails reads on
// to the end too, so that a damaged page comes first as in a whole read),
// and its transform run over the needed rows of each piece, until one
// fails to decode or to convert. So the error is the one the unsliced path
// reports (earliest column in task order, a decode error before a
// transform error of the same column, then earliest row), and counts in
// its message ("nulls in this column chunk") are over the whole column
// chunk: the failing piece is converted again with the counts of all
// pieces. One piece is held at a time.
func (d *decoder) firstErrorSliced(g *rowGroupJob, scratch []byte, decode decodeFunc) (int, error, []byte) {
	for _, task := range g.tasks {
		// Pieces of the rows half the limit holds of this column alone.
		n := int(max(1, min(g.rows, d.memoryLimit/2/taskRowBytes(g, task))))
		var (
			counts    chunkCounts
			failed    bool
			failLo    int
			failRange pqread.RowRange
		)
		for lo := 0; lo < int(g.rows); lo += n {
			// The last piece reads to the chunk's end (a read of a
			// column without repetition stops at its last row's page).
			rr := pqread.RowRange{Lo: lo, Hi: min(lo+n, int(g.rows))}
			rr.Rest = rr.Hi == int(g.rows)
			col, err := decode(task, &rr)
			if err != nil && err != errSkipped && !rr.Rest {
				// The whole read decodes every page before it assembles
				// rows, so a damaged page further on comes before a fault
				// of these rows: read on to the chunk's end for it.
				rest := rr
				rest.Rest = true
				if _, rerr := decode(task, &rest); rerr != nil {
					err = rerr
				}
			}
			if err == errSkipped {
				return notRun, context.Canceled, scratch
			}
			if err != nil {
				return task.seq, err, scratch
			}
			counts.add(d.plans[task.t], col)
			if failed {
				continue
			}
			if scratch, err = d.checkColumn(g, task, col, lo, runsIn(g.runs, lo, rr.Hi), scratch, nil); err != nil {
				failed, failLo, failRange = true, lo, rr
			}
		}
		if failed {
			col, err := decode(task, &failRange)
			if err == nil {
				scratch, err = d.checkColumn(g, task, col, failLo, runsIn(g.runs, failLo, failRange.Hi), scratch, &counts)
			}
			if err == errSkipped {
				return notRun, context.Canceled, scratch
			}
			if err != nil {
				return task.seq, err, scratch
			}
		}
	}
	return g.first, fmt.Errorf("internal: row group %d of %s failed without an error", g.rg, d.files[g.fi].rel), scratch
}

// runsIn returns the parts of runs inside rows [lo, hi), with rows relative
// to lo.
func runsIn(runs []run, lo, hi int) []run {
	var out []run
	for _, r := range runs {
		a, b := max(r.lo, lo), min(r.hi, hi)
		if a < b {
			out = append(out, run{lo: a - lo, hi: b - lo, dst: r.dst + int64(a-r.lo)})
		}
	}
	return out
}

// checkColumn runs the transform of task over runs (rows relative to
// rowBase, the row of the row group that is col's row 0) into scratch (the
// output is discarded), and returns the scratch buffer for reuse and its
// first error. Errors quote counts from counts if set, else from col.
func (d *decoder) checkColumn(g *rowGroupJob, task decodeTask, col *pqread.Column, rowBase int, runs []run, scratch []byte, counts *chunkCounts) ([]byte, error) {
	rec := d.bufs.rec
	bn := blockRows(rec)
	if len(scratch) < bn*rec {
		scratch = make([]byte, bn*rec)
	}
	it := blockIter{runs: runs, n: bn}
	for {
		blk, _, slots, ok := it.next()
		if !ok {
			return scratch, nil
		}
		target := &records{data: scratch[:slots*rec], rec: rec, off: d.bufs.off, size: d.bufs.size}
		if err := d.applyOne(g, task, col, rowBase, blk, target, counts); err != nil {
			return scratch, err
		}
	}
}

// blockIter walks a row group's runs (whose staging slots are consecutive)
// in blocks of at most n slots.
type blockIter struct {
	runs []run
	n    int
	i    int // next run
	off  int // rows of runs[i] already taken
	buf  []run
}

// next returns the next block: its runs with slots relative to the block's
// first staging slot base, and its number of slots. ok is false after the
// last block.
func (b *blockIter) next() (blk []run, base int64, slots int, ok bool) {
	if b.i >= len(b.runs) {
		return nil, 0, 0, false
	}
	b.buf = b.buf[:0]
	base = b.runs[b.i].dst + int64(b.off)
	for b.i < len(b.runs) && slots < b.n {
		r := b.runs[b.i]
		lo := r.lo + b.off
		m := min(r.hi-lo, b.n-slots)
		b.buf = append(b.buf, run{lo: lo, hi: lo + m, dst: r.dst + int64(b.off) - base})
		slots += m
		if lo+m < r.hi {
			b.off += m
		} else {
			b.i++
			b.off = 0
		}
	}
	return b.buf, base, slots, true
}
