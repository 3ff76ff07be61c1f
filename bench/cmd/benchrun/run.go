package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prepml/prep/bench/internal/result"
)

// Timing says which clock a row's throughput is computed from.
type Timing int

const (
	// Wall is the child process's wall time, start to exit, as seen by the
	// driver: used for whole commands (prep, pqarrow, GenericReader).
	Wall Timing = iota
	// Inner is the measured region the child reports, excluding its setup
	// (loading pages into memory, faulting buffers in): used for limits.
	Inner
)

// Row is one measured command.
type Row struct {
	ID        string       // short key other rows refer to in ratios
	Label     string       // what the row measures
	Argv      []string     // the command; Argv[0] is a path under the cache bin folder or a tool name
	Runs      int          // measured runs (>= 5 unless said otherwise in Note)
	Warmup    bool         // one untimed run first (page cache, lazy init)
	Timing    Timing       // clock used for throughput
	Bytes     int64        // throughput numerator; 0 = take it from the child's result line
	Rows      int64        // rows numerator; 0 = take it from the child's result line
	Setup     func() error `json:"-"`
	Note      string       // shown under the table
	Env       []string
	Display   string // command as shown in BENCHMARKS.md; default Argv joined
	ShowExtra bool   // append the child's extra note (first run) to the label

	// Filled by measure.
	Times   []float64 // seconds per run (by Timing)
	Walls   []float64 // wall seconds per run
	CPU     []float64 // user+sys seconds per run
	RSS     []int64   // ru_maxrss per run, bytes
	Heap    []int64   // peak_heap_bytes per run from a `prep convert --json` summary (0: none)
	Results []result.Result
	Err     string // why the row has no figures
}

// measureAll measures a group of related rows with their runs interleaved
// (run 1 of every row, then run 2 of every row, ...) after the warm-up runs,
// so the ratios within a group compare runs taken minutes apart at most,
// under the same background load. A failed run stops its row only.
func (d *driver) measureAll(rows []*Row) {
	var active []*Row
	for _, r := range rows {
		if r.Runs == 0 {
			r.Runs = d.runs
		}
		if r.Err != "" {
			continue
		}
		if d.overBudget() {
			r.Err = "not measured: time budget of make bench spent"
			continue
		}
		active = append(active, r)
	}
	for _, r := range active {
		d.logf("%s: %s", r.ID, strings.Join(r.Argv, " "))
		if r.Warmup {
			d.step(r, true)
		}
	}
	for more := true; more; {
		more = false
		for _, r := range active {
			if r.Err == "" && len(r.Times) < r.Runs {
				d.step(r, false)
				more = true
			}
		}
	}
	for _, r := range active {
		if r.OK() {
			d.logf("%s: median %.3fs, %s", r.ID, r.Median(), r.RateString())
		} else {
			d.logf("%s: %s", r.ID, r.Err)
		}
	}
}

// step runs r once (after its Setup) and records the figures unless warm.
func (d *driver) step(r *Row, warm bool) {
	if r.Setup != nil {
		if err := r.Setup(); err != nil {
			r.Err = "setup failed: " + err.Error()
			return
		}
	}
	wall, cpu, rss, heap, res, err := d.runOnce(r)
	if err != nil {
		r.Err = err.Error()
		return
	}
	if warm {
		return
	}
	t := wall
	if r.Timing == Inner {
		t = res.Seconds
	}
	r.Times = append(r.Times, t)
	r.Walls = append(r.Walls, wall)
	r.CPU = append(r.CPU, cpu)
	r.RSS = append(r.RSS, rss)
	r.Heap = append(r.Heap, heap)
	r.Results = append(r.Results, res)
}

func (d *driver) runOnce(r *Row) (wall, cpu float64, rss, heap int64, res result.Result, err error) {
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Dir = d.root
	cmd.Env = append(os.Environ(), r.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	start := time.Now()
	err = cmd.Run()
	wall = time.Since(start).Seconds()
	if err != nil {
		msg := strings.TrimSpace(errb.String())
		if len(msg) > 400 {
			msg = "…" + msg[len(msg)-400:]
		}
		return 0, 0, 0, 0, res, fmt.Errorf("failed: %v: %s", err, oneLine(msg))
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = tv(ru.Utime) + tv(ru.Stime)
		rss = ru.Maxrss * 1024 // Linux reports KiB
	}
	res, ok := result.Parse(out.String())
	if !ok && r.Timing == Inner {
		return 0, 0, 0, 0, res, fmt.Errorf("failed: no result line in output")
	}
	var sum struct {
		PeakHeapBytes int64 `json:"peak_heap_bytes"`
	}
	if json.Unmarshal(bytes.TrimSpace(out.Bytes()), &sum) == nil {
		heap = sum.PeakHeapBytes
	}
	return wall, cpu, rss, heap, res, nil
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
}

// PeakHeap returns the largest peak_heap_bytes of the runs (0: none).
func (r *Row) PeakHeap() int64 {
	var m int64
	for _, h := range r.Heap {
		m = max(m, h)
	}
	return m
}

// OK reports whether the row has figures.
func (r *Row) OK() bool { return r.Err == "" && len(r.Times) > 0 }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Median returns the median run time in seconds.
func (r *Row) Median() float64 { return median(r.Times) }

// MinMax returns the fastest and slowest run times.
func (r *Row) MinMax() (lo, hi float64) {
	s := append([]float64(nil), r.Times...)
	sort.Float64s(s)
	return s[0], s[len(s)-1]
}

// NumBytes returns the throughput numerator of the row.
func (r *Row) NumBytes() int64 {
	if r.Bytes > 0 {
		return r.Bytes
	}
	if len(r.Results) > 0 {
		return r.Results[0].Bytes
	}
	return 0
}

// NumRows returns the rows numerator of the row.
func (r *Row) NumRows() int64 {
	if r.Rows > 0 {
		return r.Rows
	}
	if len(r.Results) > 0 {
		return r.Results[0].Rows
	}
	return 0
}

// Rate returns bytes per second at the median time.
func (r *Row) Rate() float64 {
	if !r.OK() || r.Median() <= 0 {
		return 0
	}
	return float64(r.NumBytes()) / r.Median()
}

// RowRate returns rows per second at the median time.
func (r *Row) RowRate() float64 {
	if !r.OK() || r.Median() <= 0 {
		return 0
	}
	return float64(r.NumRows()) / r.Median()
}

// PeakRSS returns the largest ru_maxrss of the measured runs.
func (r *Row) PeakRSS() int64 {
	var m int64
	for _, x := range r.RSS {
		m = max(m, x)
	}
	return m
}

// CPUMedian returns the median user+sys CPU seconds per run.
func (r *Row) CPUMedian() float64 { return median(r.CPU) }

// RateString renders the byte rate with a unit.
func (r *Row) RateString() string {
	if !r.OK() {
		return r.Err
	}
	return fmtRate(r.Rate())
}

func fmtRate(bps float64) string {
	if bps >= 1e9 {
		return fmt.Sprintf("%.2f GB/s", bps/1e9)
	}
	return fmt.Sprintf("%.0f MB/s", bps/1e6)
}

func fmtBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", b>>10)
}

// Command renders the row's command line for the table, relative to the
// repository root.
func (r *Row) Command(root string) string {
	if r.Display != "" {
		return r.Display
	}
	parts := make([]string, len(r.Argv))
	for i, a := range r.Argv {
		if rel, err := filepath.Rel(root, a); err == nil && filepath.IsAbs(a) && !strings.HasPrefix(rel, "..") {
			a = rel
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}
