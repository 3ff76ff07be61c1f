package main

import (
	"fmt"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a byte-counting progress bar on stderr that also shows rows/s.
// A nil *progress is valid and draws nothing, so callers need no checks.
type progress struct {
	bar   *progressbar.ProgressBar
	rows  int64
	start time.Time
	label string // shown before the rate, e.g. "epoch 0 rank 3"
}

// newProgress returns a bar for a step of totalBytes bytes, or nil when
// progress is off (--quiet, --progress never, or auto without a terminal).
// desc labels the bar until SetLabel replaces it.
func (g *globalOptions) newProgress(desc string, totalBytes int64) *progress {
	return g.newBar(desc, totalBytes, true)
}

// newRowProgress is newProgress for a step counted in rows only (its
// total is totalRows; it shows the row count, not bytes).
func (g *globalOptions) newRowProgress(desc string, totalRows int64) *progress {
	return g.newBar(desc, totalRows, false)
}

func (g *globalOptions) newBar(desc string, total int64, bytes bool) *progress {
	if !g.showProgress() {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(g.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowCount())
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...), start: time.Now(), label: desc}
}

// Add records rows and bytes done. Safe for use from one goroutine at a time;
// callers serialise (the packages report progress from one place).
func (p *progress) Add(rows, bytes int64) {
	if p == nil {
		return
	}
	p.rows += rows
	p.describe()
	_ = p.bar.Add64(bytes)
}

// SetLabel shows label before the rate in the bar's description ("" for
// none). Same serialisation rule as Add.
func (p *progress) SetLabel(label string) {
	if p == nil {
		return
	}
	p.label = label
	p.describe()
}

func (p *progress) describe() {
	d := p.label
	if el := time.Since(p.start).Seconds(); el > 0 && p.rows > 0 { // no rows: the bar's byte rate says it
		if d != "" {
			d += " "
		}
		d += formatRate(p.rows, el)
	}
	p.bar.Describe(d)
}

// Finish completes and clears the bar.
func (p *progress) Finish() {
	if p == nil {
		return
	}
	_ = p.bar.Finish()
}

func formatRate(rows int64, seconds float64) string {
	r := float64(rows) / seconds
	switch {
	case r >= 1e6:
		return fmt.Sprintf("%.1fM rows/s", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1fk rows/s", r/1e3)
	}
	return fmt.Sprintf("%.0f rows/s", r)
}
