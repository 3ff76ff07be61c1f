package convert

import (
	"context"
	"sync"
	"sync/atomic"
)

// decodeTask is one column chunk to decode: value j of tensor t, from row
// group rg of file fi, for the needed rows in runs.
type decodeTask struct {
	seq  int
	fi   int
	rg   int
	t    int
	j    int
	runs []run
	rows int64 // rows in the row group
	cost int64 // estimated bytes in flight while it runs
}

// decoder runs stage 1: every needed column chunk decoded once and written
// into the per-tensor staging buffers.
type decoder struct {
	files       []*sourceFile
	plans       []*tensorPlan
	set         *idSet
	bufs        *records
	jobs        int
	memoryLimit int64
	progress    func(rows, bytes int64) // serialised by the decoder

	rowGroupsRead    int
	rowGroupsSkipped int
	rowsDecoded      int64
}

// estimateCost is a rough upper bound of the memory one decoded column chunk
// of rows rows takes (the decoded column plus its page buffers).
func estimateCost(tp *tensorPlan, rows int64) int64 {
	per := int64(tp.es)
	switch tp.mode {
	case modeList:
		per = int64(tp.perSample * tp.es)
	case modeBytesPad:
		per = tp.maxLen
	case modeBytesHash:
		per = 32
	}
	return rows*(2*per+2) + 64<<10
}

// tasks lists the column chunks to decode, in (file, row group, tensor,
// value) order, skipping row groups with no needed id.
func (d *decoder) tasks() (tasks []decodeTask, perFile []int) {
	perFile = make([]int, len(d.files))
	for fi, f := range d.files {
		start := f.start
		for rg, rows := range f.meta.RowGroups {
			if rows == 0 {
				continue
			}
			runs := d.set.runs(start, rows)
			start += uint64(rows)
			if len(runs) == 0 {
				d.rowGroupsSkipped++
				continue
			}
			d.rowGroupsRead++
			for ti, tp := range d.plans {
				for j := range tp.cols[fi] {
					tasks = append(tasks, decodeTask{seq: len(tasks), fi: fi, rg: rg, t: ti, j: j, runs: runs, rows: rows,
						cost: estimateCost(tp, rows)})
					perFile[fi]++
				}
			}
		}
	}
	return tasks, perFile
}

// run decodes every task with at most d.jobs column chunks and about
// d.memoryLimit estimated bytes in flight. On failure it returns the error
// of the earliest failing task (in task order) among those that ran.
func (d *decoder) run(ctx context.Context) error {
	tasks, perFile := d.tasks()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		inFlight int64
		firstErr error
		errSeq   = len(tasks)
		left     = append([]int(nil), perFile...)
	)
	fail := func(seq int, err error) {
		mu.Lock()
		if seq < errSeq {
			errSeq, firstErr = seq, err
		}
		mu.Unlock()
		cancel()
	}
	var progMu sync.Mutex
	var rowsDone atomic.Int64

	ch := make(chan decodeTask)
	var wg sync.WaitGroup
	for w := 0; w < d.jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for task := range ch {
				err := ctx.Err()
				if err == nil {
					err = d.decodeOne(task)
				}
				mu.Lock()
				inFlight -= task.cost
				left[task.fi]--
				done := left[task.fi] == 0
				cond.Broadcast()
				mu.Unlock()
				if done {
					d.files[task.fi].pq.Close() // releases the descriptor ReadColumn opened
				}
				if err != nil {
					fail(task.seq, err)
					continue
				}
				if d.progress != nil && task.t == 0 && task.j == 0 {
					var n int64
					for _, r := range task.runs {
						n += int64(r.hi - r.lo)
					}
					rowsDone.Add(n)
					progMu.Lock()
					d.progress(n, 0)
					progMu.Unlock()
				}
			}
		}()
	}
	for _, task := range tasks {
		mu.Lock()
		cost := min(task.cost, d.memoryLimit)
		task.cost = cost
		for inFlight > 0 && inFlight+cost > d.memoryLimit && ctx.Err() == nil {
			cond.Wait()
		}
		inFlight += cost
		mu.Unlock()
		if ctx.Err() != nil {
			mu.Lock()
			inFlight -= cost
			mu.Unlock()
			break
		}
		ch <- task
	}
	close(ch)
	wg.Wait()
	d.rowsDecoded = rowsDone.Load()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// decodeOne reads one column chunk and applies its tensor's transform.
func (d *decoder) decodeOne(task decodeTask) error {
	f := d.files[task.fi]
	tp := d.plans[task.t]
	ci := tp.cols[task.fi][task.j]
	col, err := f.pq.ReadColumn(task.rg, ci)
	if err != nil {
		return err
	}
	if int64(col.Rows) != task.rows {
		return &Error{File: f.rel, Column: ci.Name, RowGroup: task.rg, Row: -1, Element: -1,
			Err: valueErrorf("decoded %d rows, footer says %d", col.Rows, task.rows)}
	}
	loc := chunkLoc{file: f.rel, column: ci.Name, tensor: tp.spec.Name, rowGroup: task.rg}
	return tp.apply(col, task.fi, task.j, task.runs, d.bufs, loc)
}
