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
// decoded whole, or a whole row group read in row windows.
type work struct {
	task     decodeTask // the column chunk; for a windowed group, its first
	windowed bool       // the whole row group, window by window (assembleWindows)
}

// rowGroupJob is one row group holding needed ids: its column chunks are
// decoded by decodeTasks (in parallel), and the worker that finishes the
// last one assembles the group's staging records (assemble): the whole
// group is one row window. A row group whose column chunks would not fit
// the memory limit together is instead read forward in row windows by one
// worker (assembleWindows), every column's window decoded before the
// window is assembled.
type rowGroupJob struct {
	fi, rg  int
	start   uint64 // sample id of the row group's first row
	rows    int64  // rows in the row group
	runs    []run  // needed rows and their staging slots
	first   int    // seq of the group's first task
	tasks   []decodeTask
	cost    int64            // estimated bytes in flight from admission to assembly (of one window, when windowed)
	windows []rowSlice       // non-nil: read in these row windows (assembleWindows)
	window  int              // the most rows of a window, and of a piece of rows read past
	cols    []*pqread.Column // whole row groups only: the decoded columns
	errs    []error          // and their errors
	pending atomic.Int32     // column chunks not done yet (whole row groups)
}

// decoder runs stage 1: every needed column chunk decoded (whole, or a row
// window at a time for a row group over the memory limit), and each row
// group's needed rows written into the staging records.
//
// A row group's columns are decoded in parallel (or, for a row group over
// the memory limit, window by window: assembleWindows); its
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
	rowGroupsSliced  int // row groups read in more than one row window
	rowSlices        int // the row windows of those
}

// beforeDecode, when set (tests only), is called by a decode worker with a
// task's sequence number and the run's internal context (cancelled at the
// first failure) before it decides whether to decode the task: once per
// task, or once per row window of a windowed row group.
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

// rowSlice is a window of rows [lo, hi) of a row group assembled on its
// own, with the needed runs inside it (rows relative to lo, slots as in the
// row group's runs).
type rowSlice struct {
	lo, hi int
	runs   []run
}

// sliceRuns cuts runs into windows spanning at most n rows each (n >= 1),
// each starting at a needed row and ending after its last needed row (rows
// needed by no window are read past in pieces of at most n rows).
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

// planWindows makes g, whose estimated cost exceeds the memory limit, a
// windowed row group: its needed rows are cut into windows whose decoded
// columns together take about half the limit shared by the Jobs workers
// that may each read a windowed row group at once (at least one row each),
// and its cost becomes one window and the page allowance for every column
// chunk, since assembleWindows holds no more than that (a
// pqread.ColumnReader keeps the window's rows and the rest of the page
// that ends it). A row group whose rows all fit one window stays whole.
func (d *decoder) planWindows(g *rowGroupJob) {
	var perRow int64
	for _, task := range g.tasks {
		perRow += taskRowBytes(g, task)
	}
	if n := max(1, d.memoryLimit/2/int64(d.jobs)/perRow); n < g.rows {
		g.windows, g.window = sliceRuns(g.runs, int(n)), int(n)
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
					b := chunkBytes(tp, rows, f.pq.DecodedSize(rg, ci))
					g.tasks = append(g.tasks, decodeTask{seq: seq, g: len(d.groups), k: len(g.tasks), t: ti, j: j, bytes: b})
					g.cost += b + pageAllowance
					seq++
					perFile[fi]++
				}
			}
			if g.cost > d.memoryLimit {
				d.planWindows(g)
			}
			if g.windows != nil {
				d.rowGroupsSliced++
				d.rowSlices += len(g.windows)
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
			// skip reports whether task is not to be decoded (now, or
			// its next window): the run is failing before it or
			// cancelled.
			skip := func(task decodeTask) bool {
				if beforeDecode != nil {
					beforeDecode(task.seq, ctx)
				}
				return parent.Err() != nil || int64(task.seq) >= skipFrom.Load()
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
			// releases the file's descriptor after its last one.
			decoded := func(fi, n int) {
				mu.Lock()
				left[fi] -= n
				done := left[fi] == 0
				mu.Unlock()
				if done {
					d.files[fi].pq.Close() // releases the descriptor ReadColumn opened
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
				if w.windowed {
					// The whole row group, window by window, here.
					seq, err, scratch = d.assembleWindows(parent, g, scratch, rb, skip)
					decoded(g.fi, len(g.tasks))
				} else {
					g.cols[task.k], g.errs[task.k] = decode(task)
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
	for _, g := range d.groups {
		g.cost = min(g.cost, d.memoryLimit)
		if !admit(g.cost) {
			break
		}
		if g.windows != nil {
			ch <- work{task: g.tasks[0], windowed: true}
			continue
		}
		for _, task := range g.tasks {
			ch <- work{task: task}
		}
	}
	close(ch)
	wg.Wait()
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
	read := f.pq.ReadColumn
	if tp.mode == modeBytesHash {
		read = f.pq.ReadColumnDict // strings hashed once per dictionary entry
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
	w := window{runs: g.runs, cols: g.cols, errs: g.errs}
	for k, err := range g.errs {
		if err != nil {
			// A column failed to decode: the error to report is the first
			// one in task order, which may be a transform error of an
			// earlier column.
			return d.firstError(g, w, k, scratch, nil)
		}
	}
	seq, err, scratch := d.assembleBlocks(ctx, g, g.runs, g.cols, 0, scratch, rb)
	if err == errTransform {
		return d.firstError(g, w, len(g.tasks), scratch, nil)
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

// assembleWindows reads the windowed row group g forward, window by
// window (g.windows, with the rows between them read past in pieces no
// larger), holding one window of every column (pqread.ColumnReader: its
// rows, and the rest of the page that ends it): each window's rows of
// every column chunk are decoded in task order, then its records are
// assembled as assemble does. Every column chunk is decoded once, to its
// end, so every page is checked as in a whole decode.
//
// Errors are those of the whole row group decoded at once, found in the
// same forward pass: the first column in task order that fails (a decode
// error anywhere in its chunk before a transform error of it, else its
// transform error at the earliest needed row), with the counts of the
// whole column chunk in the message. Once a column fails, the pass reads
// on only the columns before it (which may fail later) and, for a
// transform error, the failing column itself (which may yet fail to
// decode); nothing more is assembled.
func (d *decoder) assembleWindows(ctx context.Context, g *rowGroupJob, scratch []byte, rb *routeBuffers, skip func(decodeTask) bool) (int, error, []byte) {
	f := d.files[g.fi]
	readers := make([]*pqread.ColumnReader, len(g.tasks))
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	open := func(task decodeTask) (*pqread.ColumnReader, error) {
		tp := d.plans[task.t]
		if tp.mode == modeBytesHash {
			return f.pq.ColumnReaderDict(g.rg, tp.cols[g.fi][task.j])
		}
		return f.pq.ColumnReader(g.rg, tp.cols[g.fi][task.j])
	}
	if d.spill == nil {
		seq, err := d.assembleColumns(g, open, skip)
		return seq, err, scratch
	}
	n := g.window
	var fl windowFailure
	fl.col = -1
	w := window{cols: make([]*pqread.Column, len(g.tasks)), errs: make([]error, len(g.tasks))}
	// step reads the next m rows of the active columns into w and folds
	// its failures into fl; runs are the window's needed runs (none for
	// rows read past).
	step := func(m int, runs []run) error {
		w.runs = runs
		if err := d.readWindow(g, readers, open, &w, m, skip, fl.active); err != nil {
			return err
		}
		if fl.col < 0 && w.failed() < 0 {
			seq, err, sc := d.assembleBlocks(ctx, g, w.runs, w.cols, w.rowBase, scratch, rb)
			scratch = sc
			if err != errTransform {
				if err != nil {
					fl.col, fl.seq, fl.err, fl.final = len(g.tasks), seq, err, true
				}
				clear(w.cols)
				return nil
			}
		}
		for k, task := range g.tasks {
			switch {
			case !fl.active(k):
			case w.errs[k] != nil:
				fl.col, fl.seq, fl.err, fl.col0 = k, task.seq, w.errs[k], nil
			case k < fl.col || fl.col < 0:
				var err error
				if scratch, err = d.checkColumn(g, task, w.cols[k], w.rowBase, w.runs, scratch, nil); err != nil {
					fl.col, fl.seq, fl.err = k, task.seq, err
					fl.col0, fl.runs, fl.base = w.cols[k], w.runs, w.rowBase
				}
			}
		}
		clear(w.cols)
		return nil
	}
	at := 0 // rows of the row group read
	for wi := 0; wi <= len(g.windows) && !fl.final; wi++ {
		lo, hi := int(g.rows), int(g.rows) // after the last window: to the end
		var runs []run
		if wi < len(g.windows) {
			lo, hi, runs = g.windows[wi].lo, g.windows[wi].hi, g.windows[wi].runs
		}
		// Rows before the window are read past in pieces of at most n
		// rows (and after the last window, to the chunks' end, so that
		// every page is checked).
		for ; at < lo && !fl.final; at = min(lo, at+n) {
			w.rowBase = at
			if err := step(min(n, lo-at), nil); err != nil {
				return notRun, context.Canceled, scratch
			}
		}
		if at < hi && !fl.final {
			w.rowBase = lo
			if err := step(hi-lo, runs); err != nil {
				return notRun, context.Canceled, scratch
			}
			at = hi
		}
		if fl.col == 0 && fl.col0 == nil {
			break // a decode error of the first column: nothing comes before it
		}
	}
	if fl.col < 0 {
		return 0, nil, scratch
	}
	if fl.col < len(g.tasks) && fl.col0 != nil {
		// A transform error: quote the whole column chunk's counts.
		task := g.tasks[fl.col]
		if c := d.chunkCounts(g, task, open, n); c != nil {
			if _, err := d.checkColumn(g, task, fl.col0, fl.base, fl.runs, scratch, c); err != nil {
				fl.err = err
			}
		}
	}
	return fl.seq, fl.err, scratch
}

// assembleColumns is assembleWindows for staging in memory, where a
// record need not be complete before it is stored: each column chunk in
// task order is read forward alone, window by window, and its transform
// applied to the window's needed rows straight into the staging records,
// so one window of one column and one page are held at a time whatever
// the number of columns. The error is the whole row group's: the first
// column that fails, its decode error anywhere in its chunk before its
// transform error at the earliest needed row (then quoting the whole
// chunk's counts).
func (d *decoder) assembleColumns(g *rowGroupJob, open func(decodeTask) (*pqread.ColumnReader, error), skip func(decodeTask) bool) (int, error) {
	n := g.window
	for _, task := range g.tasks {
		r, err := open(task)
		if err != nil {
			return task.seq, err
		}
		var (
			terr  error // the column's first transform error
			tcol  *pqread.Column
			truns []run
			tbase int
		)
		at := 0
		read := func(m int, runs []run) error {
			if skip(task) {
				return errSkipped
			}
			col, err := r.Next(m)
			if err != nil {
				return err
			}
			if terr == nil && len(runs) > 0 {
				if err := d.applyOne(g, task, col, at, runs, d.bufs, nil); err != nil {
					terr, tcol, truns, tbase = err, col, runs, at
				}
			}
			at += m
			return nil
		}
		for wi := 0; wi <= len(g.windows) && err == nil; wi++ {
			lo, hi := int(g.rows), int(g.rows)
			var runs []run
			if wi < len(g.windows) {
				lo, hi, runs = g.windows[wi].lo, g.windows[wi].hi, g.windows[wi].runs
			}
			for at < lo && err == nil {
				err = read(min(n, lo-at), nil)
			}
			if at < hi && err == nil {
				err = read(hi-lo, runs)
			}
		}
		r.Close()
		if err == errSkipped {
			return notRun, context.Canceled
		}
		if err != nil {
			return task.seq, err
		}
		if terr != nil {
			if c := d.chunkCounts(g, task, open, n); c != nil {
				var scratch []byte
				if _, err := d.checkColumn(g, task, tcol, tbase, truns, scratch, c); err != nil {
					terr = err
				}
			}
			return task.seq, terr
		}
	}
	return 0, nil
}

// windowFailure is the failure a windowed row group reports, as far as
// the windows read so far tell.
type windowFailure struct {
	col   int // task index of the failing column (len(tasks): not a column's), -1: none yet
	seq   int
	err   error
	final bool // no later window can change it (a staging error)
	// a transform error: the failing window's column, runs and first row
	col0 *pqread.Column
	runs []run
	base int
}

// active reports whether column k is still read: every column until one
// fails, then those before it, and the failing one while its failure is a
// transform error (a decode error later in its chunk comes first).
func (f *windowFailure) active(k int) bool {
	return f.col < 0 || k < f.col || k == f.col && f.col0 != nil
}

// window is one row window of a row group's columns: the needed runs in
// it (rows relative to the window's first row, rowBase), each task's
// column of its rows, and each task's decode error.
type window struct {
	runs    []run
	cols    []*pqread.Column
	errs    []error
	rowBase int
}

// failed returns the first task whose decode failed, or -1.
func (w *window) failed() int {
	for k, err := range w.errs {
		if err != nil {
			return k
		}
	}
	return -1
}

// readWindow decodes the next n rows of every active column chunk of g
// into w, in task order, opening each reader on first use. It returns
// errSkipped when the run is failing before the group or cancelled.
func (d *decoder) readWindow(g *rowGroupJob, readers []*pqread.ColumnReader, open func(decodeTask) (*pqread.ColumnReader, error), w *window, n int, skip func(decodeTask) bool, active func(int) bool) error {
	clear(w.errs)
	for k, task := range g.tasks {
		if !active(k) {
			continue
		}
		if skip(task) {
			return errSkipped
		}
		if readers[k] == nil {
			r, err := open(task)
			if err != nil {
				w.errs[k] = err
				continue
			}
			readers[k] = r
		}
		w.cols[k], w.errs[k] = readers[k].Next(n)
	}
	return nil
}

// chunkCounts returns the counts over the whole column chunk of task in
// g, read again from its start in windows of n rows, for the message of a
// transform error found in one window; nil (the window's own counts are
// quoted) when the chunk fails to read.
func (d *decoder) chunkCounts(g *rowGroupJob, task decodeTask, open func(decodeTask) (*pqread.ColumnReader, error), n int) *chunkCounts {
	r, err := open(task)
	if err != nil {
		return nil
	}
	defer r.Close()
	var c chunkCounts
	for r.Rows() > 0 {
		col, err := r.Next(n)
		if err != nil {
			return nil
		}
		c.add(d.plans[task.t], col)
	}
	return &c
}

// applyOne applies col, the column of task (its row 0 being row rowBase of
// g), to runs: row ranges relative to rowBase with their slots in target.
// Errors quote counts from counts if set, else from col.
func (d *decoder) applyOne(g *rowGroupJob, task decodeTask, col *pqread.Column, rowBase int, runs []run, target *records, counts *chunkCounts) error {
	tp := d.plans[task.t]
	loc := chunkLoc{file: d.files[g.fi].rel, column: tp.cols[g.fi][task.j].Name, tensor: tp.spec.Name, rowGroup: g.rg, rowBase: int64(rowBase), counts: counts}
	return tp.apply(col, g.fi, task.j, runs, target, loc)
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
		if scratch, err = d.checkColumn(g, task, w.cols[k], w.rowBase, w.runs, scratch, nil); err != nil {
			if counts != nil {
				if c := counts(task); c != nil {
					_, err = d.checkColumn(g, task, w.cols[k], w.rowBase, w.runs, scratch, c)
				}
			}
			return task.seq, err, scratch
		}
	}
	return g.first, fmt.Errorf("internal: row group %d of %s failed without an error", g.rg, d.files[g.fi].rel), scratch
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
