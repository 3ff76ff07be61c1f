package feature

import (
	"context"
	"errors"

	"github.com/prepml/prep/pqread"
)

// This file is the windowed half of assemble: a row group whose needed
// column chunks would not fit the memory limit together is read forward
// in row windows (pqread.ColumnReader), every page once.

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
func (d *decoder) assembleWindows(ctx context.Context, g *rowGroupJob, scratch []byte, sink RecordSink, skip func(decodeTask) bool) (int, error, []byte) {
	f := d.files[g.fi]
	readers := make([]*pqread.ColumnReader, len(g.tasks))
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	rv := d.newReservation(g)
	defer rv.close()
	open := func(task decodeTask) (*pqread.ColumnReader, error) {
		tp := d.plans[task.t]
		pf, err := f.parquet()
		if err != nil {
			return nil, err
		}
		if tp.kind.dictForm() {
			return pf.ColumnReaderDict(g.rg, tp.cols[g.fi][task.j])
		}
		r, err := pf.ColumnReader(g.rg, tp.cols[g.fi][task.j])
		if err == nil {
			r.OnPage(rv.onPage(task.k))
		}
		return r, err
	}
	if sink.InPlace() && !d.jointTasks(g) {
		seq, err := d.assembleColumns(g, open, skip, rv)
		return seq, err, scratch
	}
	n := g.window
	var fl windowFailure
	fl.col = -1
	w := window{cols: make([]*pqread.Column, len(g.tasks)), errs: make([]error, len(g.tasks)), same: d.sameChunks(g)}
	var piece func()
	// step reads the next m rows of the active columns into w, in
	// pieces of rows every column holds within its entry budget
	// (readPiece), and folds each piece's failures into fl; runs are the
	// needed runs of the m rows (none for rows read past).
	step := func(m int, runs []RowRun) error {
		for m > 0 && !fl.final {
			p, err := d.readPiece(g, readers, open, &w, m, skip, fl.active)
			if err != nil {
				return err
			}
			w.runs = runs
			if p < m {
				w.runs = clipRuns(runs, 0, p)
				runs = clipRuns(runs, p, m)
			}
			piece()
			for k, r := range readers {
				if r != nil {
					rv.settle(k, r.Held())
				}
			}
			w.rowBase += p
			m -= p
		}
		return nil
	}
	// piece assembles the piece read into w, or finds its failures.
	piece = func() {
		defer clear(w.cols)
		if fl.col < 0 && w.failed() < 0 {
			if k, err := d.groupMismatch(g, w.cols, w.rowBase); err != nil {
				fl.col, fl.seq, fl.err, fl.final = len(g.tasks), g.tasks[k].seq, err, true
				return
			}
		}
		if fl.col < 0 && w.failed() < 0 {
			seq, err, sc := d.assembleBlocks(ctx, g, w.runs, w.cols, w.rowBase, scratch, sink)
			scratch = sc
			if err != errTransform {
				if err != nil {
					fl.col, fl.seq, fl.err, fl.final = len(g.tasks), seq, err, true
				}
				return
			}
		}
		for k, task := range g.tasks {
			switch {
			case !fl.active(k):
			case w.errs[k] != nil:
				fl.col, fl.seq, fl.err, fl.col0 = k, task.seq, w.errs[k], nil
			case k < fl.col || fl.col < 0:
				var err error
				key := d.keyOf(g, w.cols, k)
				if scratch, err = d.checkColumn(g, task, w.cols[k], key, w.rowBase, w.runs, scratch, nil); err != nil {
					fl.col, fl.seq, fl.err = k, task.seq, err
					fl.col0, fl.key0, fl.runs, fl.base = w.cols[k], key, w.runs, w.rowBase
				}
			}
		}
	}
	at := 0 // rows of the row group read
	for wi := 0; wi <= len(g.windows) && !fl.final; wi++ {
		lo, hi := int(g.rows), int(g.rows) // after the last window: to the end
		var runs []RowRun
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
		if c := d.chunkCounts(g, task, open, n, g.budget[task.k]); c != nil {
			if _, err := d.checkColumn(g, task, fl.col0, fl.key0, fl.base, fl.runs, scratch, c); err != nil {
				fl.err = err
			}
		}
	}
	return fl.seq, fl.err, scratch
}

// assembleColumns is assembleWindows for a sink that assembles in place
// (staging in memory), where a record need not be complete before it is
// stored: each column chunk in
// task order is read forward alone, window by window, and its transform
// applied to the window's needed rows straight into the staging records,
// so one window of one column and one page are held at a time whatever
// the number of columns. The error is the whole row group's: the first
// column that fails, its decode error anywhere in its chunk before its
// transform error at the earliest needed row (then quoting the whole
// chunk's counts).
func (d *decoder) assembleColumns(g *rowGroupJob, open func(decodeTask) (*pqread.ColumnReader, error), skip func(decodeTask) bool, rv *reservation) (int, error) {
	n := g.window
	for _, task := range g.tasks {
		r, err := open(task)
		if err != nil {
			return task.seq, err
		}
		var (
			terr  error // the column's first transform error
			tcol  *pqread.Column
			truns []RowRun
			tbase int
		)
		at := 0
		budget := g.budget[task.k]
		// read reads the next m rows in pieces of at most budget level
		// entries (pqread.ColumnReader.NextWithin), applying each piece
		// to its part of runs (rows relative to at).
		read := func(m int, runs []RowRun) error {
			for m > 0 {
				if skip(task) {
					return errSkipped
				}
				col, err := r.NextWithin(m, budget)
				if err != nil {
					return err
				}
				if AfterPiece != nil {
					AfterPiece()
				}
				got, piece := col.Rows, runs
				if got < m {
					piece = clipRuns(runs, 0, got)
				}
				if terr == nil && len(piece) > 0 {
					if err := d.applyOne(g, task, col, nil, at, piece, d.bufs, nil, g.vals); err != nil {
						terr, tcol, truns, tbase = err, col, piece, at
					}
				}
				if got < m {
					runs = clipRuns(runs, got, m)
				}
				rv.settle(task.k, r.Held())
				at, m = at+got, m-got
			}
			return nil
		}
		for wi := 0; wi <= len(g.windows) && err == nil; wi++ {
			lo, hi := int(g.rows), int(g.rows)
			var runs []RowRun
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
		rv.settle(task.k, 0)
		if errors.Is(err, errSkipped) {
			return notRun, context.Canceled
		}
		if err != nil {
			return task.seq, err
		}
		if terr != nil {
			if c := d.chunkCounts(g, task, open, n, budget); c != nil {
				var scratch []byte
				if _, err := d.checkColumn(g, task, tcol, nil, tbase, truns, scratch, c); err != nil {
					terr = err
				}
			}
			return task.seq, terr
		}
	}
	for _, w := range g.windows {
		d.applyPartitions(g.fi, w.runs, d.bufs)
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
	// a transform error: the failing window's column (and a dense map's
	// key column), runs and first row
	col0 *pqread.Column
	key0 *pqread.Column
	runs []RowRun
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
	runs    []RowRun
	cols    []*pqread.Column
	errs    []error
	rowBase int
	same    []int // same[k]: the first task reading task k's column chunk in its form
}

// sameChunks returns, for each task of g, the first task that reads the
// same column chunk in the same form (itself when none before does), so
// that a column stacked or used by several tensors is read once.
func (d *decoder) sameChunks(g *rowGroupJob) []int {
	type key struct {
		col  int
		dict bool
	}
	first := map[key]int{}
	same := make([]int, len(g.tasks))
	for k, task := range g.tasks {
		tp := d.plans[task.t]
		kk := key{tp.cols[g.fi][task.j].Index, tp.kind.dictForm()}
		if j, ok := first[kk]; ok {
			same[k] = j
		} else {
			first[kk], same[k] = k, k
		}
	}
	return same
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

// readPiece decodes the next rows of every active column chunk of g
// into w, in task order, opening each reader on first use (tasks of one
// column chunk share the first one's reader and piece): at most n rows,
// as many as every list column holds within its entry budget (g.budget;
// pqread.ColumnReader.Peek, then NextWithin of that many rows: at least
// one row, a row longer than a budget alone), so that the piece's columns
// agree on its rows and hold about the share of the window they were
// estimated to. It returns the piece's rows, or errSkipped when the run
// is failing before the group or cancelled.
func (d *decoder) readPiece(g *rowGroupJob, readers []*pqread.ColumnReader, open func(decodeTask) (*pqread.ColumnReader, error), w *window, n int, skip func(decodeTask) bool, active func(int) bool) (int, error) {
	clear(w.errs)
	list := func(k int) bool {
		t := g.tasks[k]
		return d.plans[t.t].cols[g.fi][t.j].MaxRep > 0 && g.budget != nil
	}
	p := n
	for k, task := range g.tasks {
		if !active(k) || w.same[k] < k {
			continue
		}
		if readers[k] == nil {
			r, err := open(task)
			if err != nil {
				w.errs[k] = err
				continue
			}
			readers[k] = r
		}
		if list(k) {
			q, err := readers[k].Peek(p, g.budget[k])
			if err != nil {
				if errors.Is(err, errSkipped) {
					return 0, errSkipped
				}
				continue // NextWithin returns the error again
			}
			p = min(p, q)
		}
	}
	for k, task := range g.tasks {
		if !active(k) {
			continue
		}
		if skip(task) {
			return 0, errSkipped
		}
		if j := w.same[k]; j < k {
			// The same column chunk in the same form: one reader.
			w.cols[k], w.errs[k] = w.cols[j], w.errs[j]
			continue
		}
		if w.errs[k] != nil {
			continue // failed to open
		}
		var budget int64
		if list(k) {
			budget = g.budget[k]
		}
		w.cols[k], w.errs[k] = readers[k].NextWithin(p, budget)
		if errors.Is(w.errs[k], errSkipped) {
			return 0, errSkipped
		}
	}
	if AfterPiece != nil {
		AfterPiece()
	}
	return p, nil
}

// AfterPiece, when set (tests only), is called by a decode worker each
// time it holds a newly decoded piece of a windowed row group (every
// column's, when the columns are read together): where the worker's
// memory peaks. The memory tests collect garbage there and read the live
// heap, a measure that does not depend on when the collector would have
// run.
var AfterPiece func()

// chunkCounts returns the counts over the whole column chunk of task in
// g, read again from its start in windows of n rows and at most budget
// level entries, for the message of a transform error found in one
// window; nil (the window's own counts are quoted) when the chunk fails to
// read.
func (d *decoder) chunkCounts(g *rowGroupJob, task decodeTask, open func(decodeTask) (*pqread.ColumnReader, error), n int, budget int64) *chunkCounts {
	r, err := open(task)
	if err != nil {
		return nil
	}
	defer r.Close()
	var c chunkCounts
	for r.Rows() > 0 {
		col, err := r.NextWithin(n, budget)
		if err != nil {
			return nil
		}
		c.add(d.plans[task.t], col)
	}
	return &c
}
