package feature

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/pqread"
)

// This file is stage 1's schedule: the column chunk tasks of every row
// group holding a needed id, in task order, their estimated cost, the row
// windows of a row group over the memory limit, and the admission that
// keeps the estimated bytes in flight under the limit. decode.go runs it.

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
	start   uint64           // sample id of the row group's first row
	rows    int64            // rows in the row group
	runs    []RowRun         // needed rows and their staging slots
	first   int              // seq of the group's first task
	index   int              // its index in decoder.groups
	tasks   []decodeTask     // from admission to assembly (open, close)
	cost    int64            // estimated bytes in flight from admission to assembly (of one window, when windowed)
	windows []rowSlice       // non-nil: read in these row windows (assembleWindows)
	window  int              // the most rows of a window, and of a piece of rows read past
	budget  []int64          // per task, the most level entries of a piece of a window (windowed row groups: entryBudget)
	cols    []*pqread.Column // whole row groups only: the decoded columns
	errs    []error          // and their errors
	pending atomic.Int32     // column chunks not done yet (whole row groups)
	vals    *valueWriter     // the row group's jagged values (nil: none)
}

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
	per := tp.kind.rowCost()
	if rows > most/per {
		return most
	}
	return min(max(rows*per, footer), most)
}

// plan lists the row groups to read and their costs, in (file, row
// group) order, skipping row groups with no needed id. It returns the
// number of column chunks per file. A row group's tasks, one per column
// chunk in (tensor, value) order, are made when it is admitted (open) and
// dropped once it is assembled (close): made here for the whole run they
// took 48 bytes a column chunk, 3.8 MB for 16 files of 5,000 columns,
// growing with every file added whatever the memory limit.
func (d *decoder) plan() (perFile []int) {
	perFile = make([]int, len(d.files))
	seq := 0
	var tasks []decodeTask
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
			g := &rowGroupJob{fi: fi, rg: rg, start: first, rows: rows, runs: runs, first: seq, index: len(d.groups)}
			if d.arena != nil {
				g.vals = d.arena.writer(fi, rg)
			}
			tasks = d.groupTasks(g, tasks[:0])
			for _, task := range tasks {
				g.cost += task.bytes + pageAllowance
			}
			seq += len(tasks)
			perFile[fi] += len(tasks)
			if g.cost > d.memoryLimit {
				d.planWindows(g, tasks)
			}
			// The file's footer is held while its row groups are read.
			g.cost += f.footerCost
			if g.windows != nil {
				d.rowGroupsSliced++
				d.rowSlices += len(g.windows)
			}
			d.groups = append(d.groups, g)
		}
	}
	return perFile
}

// groupTasks appends g's tasks to dst: one per column chunk of the
// plans' columns, in (tensor, value) order, numbered from g.first.
func (d *decoder) groupTasks(g *rowGroupJob, dst []decodeTask) []decodeTask {
	f := d.files[g.fi]
	k := 0
	for ti, tp := range d.plans {
		for j, ci := range tp.cols[g.fi] {
			b := chunkBytes(tp, g.rows, f.decodedSize(g.rg, ci))
			dst = append(dst, decodeTask{seq: g.first + k, g: g.index, k: k, t: ti, j: j, bytes: b})
			k++
		}
	}
	return dst
}

// tasksHeld counts the tasks of row groups opened and not yet closed,
// over all runs of the process (tests read it).
var tasksHeld atomic.Int64

// open makes what decoding g holds once it is admitted: its tasks, and
// the entry budgets of a windowed row group's columns or the decoded
// columns, errors and pending count of a whole one.
func (d *decoder) open(g *rowGroupJob) {
	g.tasks = d.groupTasks(g, nil)
	tasksHeld.Add(int64(len(g.tasks)))
	if g.windows != nil {
		g.budget = d.entryBudgets(g)
		return
	}
	g.cols = make([]*pqread.Column, len(g.tasks))
	g.errs = make([]error, len(g.tasks))
	g.pending.Store(int32(len(g.tasks)))
}

// close drops what open made, once g is assembled.
func (g *rowGroupJob) close() {
	tasksHeld.Add(-int64(len(g.tasks)))
	g.tasks, g.budget, g.cols, g.errs = nil, nil, nil, nil
}

// rowSlice is a window of rows [lo, hi) of a row group assembled on its
// own, with the needed runs inside it (rows relative to lo, slots as in the
// row group's runs).
type rowSlice struct {
	lo, hi int
	runs   []RowRun
}

// sliceRuns cuts runs into windows spanning at most n rows each (n >= 1),
// each starting at a needed row and ending after its last needed row (rows
// needed by no window are read past in pieces of at most n rows).
func sliceRuns(runs []RowRun, n int) []rowSlice {
	var out []rowSlice
	i, off := 0, 0 // next run, and rows of it already in a slice
	for i < len(runs) {
		lo := runs[i].Lo + off
		s := rowSlice{lo: lo, hi: lo}
		for i < len(runs) && runs[i].Lo+off < lo+n {
			r := runs[i]
			a, b := r.Lo+off, min(r.Hi, lo+n)
			s.runs = append(s.runs, RowRun{Lo: a - lo, Hi: b - lo, Dst: r.Dst + int64(off)})
			s.hi = b
			if b < r.Hi {
				off = b - r.Lo
			} else {
				i, off = i+1, 0
			}
		}
		out = append(out, s)
	}
	return out
}

// clipRuns returns the parts of runs (rows relative to some first row)
// within rows [lo, hi), relative to lo, their staging slots moved with
// them.
func clipRuns(runs []RowRun, lo, hi int) []RowRun {
	var out []RowRun
	for _, r := range runs {
		a, b := max(r.Lo, lo), min(r.Hi, hi)
		if a < b {
			out = append(out, RowRun{Lo: a - lo, Hi: b - lo, Dst: r.Dst + int64(a-r.Lo)})
		}
	}
	return out
}

// planWindows makes g, whose estimated cost (of tasks) exceeds the
// memory limit, a windowed row group: its needed rows are cut into windows
// whose decoded columns together take about half the limit shared by the
// Jobs workers that may each read a windowed row group at once (at least
// one row each), and its cost becomes one window and the page allowance
// for every column chunk, since assembleWindows holds no more than that (a
// pqread.ColumnReader keeps the window's rows and the rest of the page
// that ends it). A row group whose rows all fit one window stays whole.
func (d *decoder) planWindows(g *rowGroupJob, tasks []decodeTask) {
	perRow := rowBytes(g, tasks)
	share := windowShare(d.memoryLimit, d.jobs)
	if n := max(1, share/perRow); n < g.rows {
		g.windows, g.window = sliceRuns(g.runs, int(n)), int(n)
		g.cost = n*perRow + int64(len(tasks))*pageAllowance
	}
}

// entryBudgets returns, per task of the windowed row group g (opened),
// the most level entries a piece of a window of its column may hold
// (entryBudget).
func (d *decoder) entryBudgets(g *rowGroupJob) []int64 {
	perRow := rowBytes(g, g.tasks)
	share := windowShare(d.memoryLimit, d.jobs)
	budget := make([]int64, len(g.tasks))
	for k, task := range g.tasks {
		ci := d.plans[task.t].cols[g.fi][task.j]
		budget[k] = entryBudget(share, taskRowBytes(g, task), perRow, ci)
	}
	return budget
}

// rowBytes is the estimated decoded bytes per row of tasks, the column
// chunks of g.
func rowBytes(g *rowGroupJob, tasks []decodeTask) int64 {
	var perRow int64
	for _, task := range tasks {
		perRow += taskRowBytes(g, task)
	}
	return perRow
}

// entryBudget is the most level entries a window of column ci may hold
// when a window of all the row group's columns may take share bytes and
// ci takes rowBytes of the perRow estimated per row: ci's part of share
// over the decoded bytes of one entry (entryBytes, doubled: pqread holds
// the entries' levels and values while it assembles the window's Column).
// A window is cut into pieces of at most that many entries (a row of more
// is a piece alone), so a few long rows among short ones do not take a
// window's rows times their length.
func entryBudget(share, rowBytes, perRow int64, ci pqread.ColumnInfo) int64 {
	part := share
	if rowBytes < perRow {
		part = max(1, share/perRow*rowBytes)
	}
	return max(1, part/(2*entryBytes(ci)))
}

// taskRowBytes is the estimated decoded bytes per row of task's column
// chunk in g (at least 1).
func taskRowBytes(g *rowGroupJob, task decodeTask) int64 {
	return max(1, (task.bytes+g.rows-1)/g.rows)
}

// Admission bounds the estimated bytes of decoded column chunks in flight
// by a limit: a row group is admitted whole (a windowed one counts one
// window) when its cost fits beside what is in flight, or when nothing is,
// and its cost counts until its records are assembled (release). A
// windowed row group whose piece holds more than its cost (a row longer
// than its column's entry budget) grows its part before it decodes the
// page that takes it (grow), and gives the growth back once the reader no
// longer holds it (shrink).
type Admission struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int64
	peak     int64 // the most inFlight has been (peakBytes)
	limit    int64
	workers  int   // goroutines that may hold admitted costs and grow them (decode workers)
	holders  int   // costs admitted and not released
	growers  []int // sequence numbers of the grow calls waiting
}

// NewAdmission returns an admission of limit bytes, nothing in flight.
func NewAdmission(limit int64) *Admission {
	a := &Admission{limit: limit, workers: 1}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// Admit waits until cost fits the limit beside what is in flight (or
// nothing is) and no grow is waiting, and counts it; false when ctx is
// done (it is checked whenever a release wakes the wait).
func (a *Admission) Admit(ctx context.Context, cost int64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.inFlight > 0 && (a.inFlight+cost > a.limit || len(a.growers) > 0) && ctx.Err() == nil {
		a.cond.Wait()
	}
	if ctx.Err() != nil {
		return false
	}
	a.inFlight += cost
	a.peak = max(a.peak, a.inFlight)
	a.holders++
	return true
}

// Release gives back cost admitted earlier.
func (a *Admission) Release(cost int64) {
	a.mu.Lock()
	a.inFlight -= cost
	a.holders = max(0, a.holders-1)
	a.cond.Broadcast()
	a.mu.Unlock()
}

// grow adds n bytes to what the holder of an admitted cost, the row
// group of task sequence number seq, has in flight: at once when they fit
// the limit beside what is in flight, else once releases make room. Waits
// are served in task order, and before new admissions; the first in task
// order is served over the limit only when nothing else can release (every
// holder, or every worker, is waiting to grow), so a run cannot deadlock.
// It returns false, counting nothing, when stop reports true (checked
// whenever a release wakes the wait).
func (a *Admission) grow(seq int, n int64, stop func() bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.growers = append(a.growers, seq)
	a.cond.Broadcast() // the first waiting may now be served over the limit
	defer func() {
		a.growers = slices.DeleteFunc(a.growers, func(s int) bool { return s == seq })
		a.cond.Broadcast()
	}()
	for a.inFlight+n > a.limit {
		if stop() {
			return false
		}
		if slices.Min(a.growers) == seq && (len(a.growers) >= a.holders || len(a.growers) >= a.workers) {
			break // nothing else can release
		}
		a.cond.Wait()
	}
	if stop() {
		return false
	}
	a.inFlight += n
	a.peak = max(a.peak, a.inFlight)
	return true
}

// PeakBytes returns the most bytes the admission has held in flight at
// once: the high-water mark of the costs admitted and grown, less those
// released, as the run's own accounting counts them (not the heap).
func (a *Admission) PeakBytes() int64 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// shrink gives back n bytes added by grow.
func (a *Admission) shrink(n int64) {
	if n == 0 {
		return
	}
	a.mu.Lock()
	a.inFlight -= n
	a.cond.Broadcast()
	a.mu.Unlock()
}

// Wake wakes every wait to check its context or stop.
func (a *Admission) Wake() {
	a.mu.Lock()
	a.cond.Broadcast()
	a.mu.Unlock()
}

// reservation is the growth a windowed row group holds beyond its cost:
// per task, its part of the cost (base: its entry budget, at twice the
// bytes of an entry, as entryBudget shares the window) and what grow
// added for level entries beyond it.
type reservation struct {
	adm   *Admission
	seq   int            // the row group's first task's
	tasks []decodeTask   // the row group's
	stop  func(int) bool // whether the task of a sequence number is not to run on
	base  []int64        // bytes of each task's part of the row group's cost
	per   []int64        // bytes per level entry of each task's column (entryBytes)
	extra []int64        // bytes grown for each task
}

// newReservation returns g's reservation in d's admission, nothing
// grown; without one (d not running) it grows nothing.
func (d *decoder) newReservation(g *rowGroupJob) *reservation {
	rv := &reservation{adm: d.adm, seq: g.first, tasks: g.tasks, stop: d.stopped, base: make([]int64, len(g.tasks)), per: make([]int64, len(g.tasks)), extra: make([]int64, len(g.tasks))}
	for k, task := range g.tasks {
		rv.per[k] = 2 * entryBytes(d.plans[task.t].cols[g.fi][task.j])
		rv.base[k] = g.budget[k] * rv.per[k]
	}
	return rv
}

// need makes task k's growth cover entries level entries (beyond its
// base), waiting for admission; errSkipped when the task is not to run
// on.
func (rv *reservation) need(k int, entries int64) error {
	want := max(0, entries*rv.per[k]-rv.base[k])
	if rv.adm == nil || want <= rv.extra[k] {
		return nil
	}
	seq := rv.tasks[k].seq
	if !rv.adm.grow(rv.seq, want-rv.extra[k], func() bool { return rv.stop != nil && rv.stop(seq) }) {
		return errSkipped
	}
	rv.extra[k] = want
	return nil
}

// settle shrinks task k's growth to what held level entries (those its
// reader holds) need.
func (rv *reservation) settle(k int, held int64) {
	want := max(0, held*rv.per[k]-rv.base[k])
	if rv.adm != nil && want < rv.extra[k] {
		rv.adm.shrink(rv.extra[k] - want)
		rv.extra[k] = want
	}
}

// close gives back all growth.
func (rv *reservation) close() {
	for k := range rv.extra {
		rv.settle(k, 0)
	}
}

// onPage returns the pqread.ColumnReader.OnPage function of task k's
// reader: growth for what it will hold once the page is decoded.
func (rv *reservation) onPage(k int) func(held, page int64) error {
	return func(held, page int64) error { return rv.need(k, held+page) }
}
