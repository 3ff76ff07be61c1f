// Package metrics writes the outcome of a prep run as a Prometheus
// text-format file (exposition format 0.0.4) for node_exporter's textfile
// collector, so that unattended runs (cron, Slurm, Kubernetes) can be
// alerted on: "no successful convert of /local/shards for 26 hours".
//
// The file is replaced atomically (a temporary file in the same directory
// whose name does not end in .prom, fsync, chmod 0644, rename, fsync of the
// directory), so the collector never reads a half-written file. Updates of
// one file are serialised with an advisory lock on PATH.lock, so several prep
// commands and output directories may share one metrics file; each keeps its
// own series, told apart by the labels command and output.
//
// # Metrics
//
// Every series carries the labels command ("convert", "gc", ...) and output
// (the output directory as given).
//
//	prep_runs_total                       counter  runs finished, successful or not
//	prep_errors_total                     counter  runs that failed
//	prep_rows_total                       counter  sample rows written
//	prep_bytes_written_total              counter  bytes of shard files written
//	prep_shards_written                   gauge    shards written by the last run
//	prep_shards_skipped                   gauge    shards found complete and skipped by the last run
//	prep_duration_seconds                 gauge    wall time of the last run
//	prep_last_run_timestamp_seconds       gauge    Unix time the last run ended
//	prep_last_run_success                 gauge    1 if the last run succeeded, else 0
//	prep_last_success_timestamp_seconds   gauge    Unix time the last successful run ended; 0 if none
//	prep_peak_rss_bytes                   gauge    peak resident set size of the last run (convert)
//	prep_spill_bytes                      gauge    staging bytes the last run spilled to disk (convert; 0: none)
//
// The last two are written only for runs that report them (a convert that
// got as far as its summary): an alert on memory near a node's limit, or on
// spilling (a --memory-limit too small for the input, which costs one more
// write and read of the staged samples), needs them.
//
// Counters accumulate across runs by reading the previous file: they restart
// from zero only when the file is deleted, which Prometheus treats as an
// ordinary counter reset. A failed run keeps the previous
// prep_last_success_timestamp_seconds.
package metrics

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prepml/prep/internal/atomicfile"
)

// ErrSyntax is returned (wrapped in a *ParseError) when a metrics file is not
// in the Prometheus text format subset this package writes.
var ErrSyntax = errors.New("metrics syntax error")

// ParseError locates a syntax error in a metrics file.
type ParseError struct {
	Path string // file name, empty when parsing a reader
	Line int    // 1-based line number
	Text string // the offending line
	Err  error  // ErrSyntax
}

// Error returns "PATH:LINE: cause: \"text\"".
func (e *ParseError) Error() string {
	return fmt.Sprintf("%s:%d: %v: %q", e.Path, e.Line, e.Err, e.Text)
}

// Unwrap returns the underlying cause.
func (e *ParseError) Unwrap() error { return e.Err }

// Run is the outcome of one command run.
type Run struct {
	Command string // "convert", "gc", ...
	Output  string // the output directory, as given on the command line

	Rows          int64 // sample rows written (pad rows included)
	Bytes         int64 // bytes of shard files written
	ShardsWritten int64
	ShardsSkipped int64

	// PeakRSSBytes is the run's peak resident set size in bytes; 0 when the
	// command does not report memory (then neither it nor SpillBytes is
	// written).
	PeakRSSBytes int64
	SpillBytes   int64 // staging bytes spilled to disk (convert)

	// Source traffic of a run reading an object store (all 0, and not
	// written, for local sources): HTTP requests sent (retries included),
	// retries, response body bytes received, and bytes the readers asked
	// for (column chunks and footers, each read counted once).
	SourceRequests     int64
	SourceRetries      int64
	SourceBytesFetched int64
	SourceBytesNeeded  int64

	Duration time.Duration // wall time of the run
	End      time.Time     // when the run ended
	Success  bool
}

// Metric family names, in the order they are written.
const (
	RunsTotal            = "prep_runs_total"
	ErrorsTotal          = "prep_errors_total"
	RowsTotal            = "prep_rows_total"
	BytesWrittenTotal    = "prep_bytes_written_total"
	ShardsWritten        = "prep_shards_written"
	ShardsSkipped        = "prep_shards_skipped"
	DurationSeconds      = "prep_duration_seconds"
	LastRunTimestamp     = "prep_last_run_timestamp_seconds"
	LastRunSuccess       = "prep_last_run_success"
	LastSuccessTimestamp = "prep_last_success_timestamp_seconds"
	PeakRSSBytes         = "prep_peak_rss_bytes"
	SpillBytes           = "prep_spill_bytes"
	SourceRequests       = "prep_source_requests_total"
	SourceRetries        = "prep_source_retries_total"
	SourceBytesFetched   = "prep_source_bytes_fetched_total"
	SourceBytesNeeded    = "prep_source_bytes_needed_total"
)

type family struct {
	name, typ, help string
}

// optional families get HELP and TYPE lines only when a series has a
// sample (object-store counters: absent for runs over local files).
var optional = map[string]bool{SourceRequests: true, SourceRetries: true, SourceBytesFetched: true, SourceBytesNeeded: true}

var families = []family{
	{RunsTotal, "counter", "Runs of prep finished, successful or not."},
	{ErrorsTotal, "counter", "Runs of prep that failed."},
	{RowsTotal, "counter", "Sample rows written to shards."},
	{BytesWrittenTotal, "counter", "Bytes of shard files written."},
	{ShardsWritten, "gauge", "Shards written by the last run."},
	{ShardsSkipped, "gauge", "Shards already complete and skipped by the last run."},
	{DurationSeconds, "gauge", "Wall time of the last run in seconds."},
	{LastRunTimestamp, "gauge", "Unix time in seconds when the last run ended."},
	{LastRunSuccess, "gauge", "1 if the last run succeeded, 0 if it failed."},
	{LastSuccessTimestamp, "gauge", "Unix time in seconds when the last successful run ended; 0 if none."},
	{PeakRSSBytes, "gauge", "Peak resident set size of the last run in bytes."},
	{SpillBytes, "gauge", "Bytes of staging the last run spilled to disk for exceeding its memory limit; 0 if none."},
	{SourceRequests, "counter", "Requests sent to the object store holding the source, retries included."},
	{SourceRetries, "counter", "Object-store requests retried after a throttling, server, connection or truncation fault."},
	{SourceBytesFetched, "counter", "Bytes received from the object store holding the source."},
	{SourceBytesNeeded, "counter", "Bytes of the source (column chunks and footers) the readers asked the object store for."},
}

// Sample is one series value: a metric name, its command and output labels,
// and its value.
type Sample struct {
	Name    string
	Command string
	Output  string
	Value   float64
}

type key struct{ command, output string }

// WriteFile records run r in the metrics file at path: it reads the previous
// file (if any) to carry counters and the last success time forward, updates
// the series of (r.Command, r.Output), keeps every other prep series as it
// was, and replaces the file atomically.
func WriteFile(path string, r Run) error {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return fmt.Errorf("locking metrics file: %w", err)
	}
	defer unlock()

	series := map[key]map[string]float64{}
	if f, err := os.Open(path); err == nil {
		prev, perr := Parse(f)
		f.Close()
		if perr != nil {
			var pe *ParseError
			if errors.As(perr, &pe) {
				pe.Path = path
			}
			return fmt.Errorf("reading previous metrics: %w", perr)
		}
		for _, s := range prev {
			k := key{s.Command, s.Output}
			if series[k] == nil {
				series[k] = map[string]float64{}
			}
			series[k][s.Name] = s.Value
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading previous metrics: %w", err)
	}

	k := key{r.Command, r.Output}
	old := series[k]
	if old == nil {
		old = map[string]float64{}
	}
	end := float64(r.End.UnixMilli()) / 1000
	cur := map[string]float64{
		RunsTotal:            old[RunsTotal] + 1,
		ErrorsTotal:          old[ErrorsTotal],
		RowsTotal:            old[RowsTotal] + float64(r.Rows),
		BytesWrittenTotal:    old[BytesWrittenTotal] + float64(r.Bytes),
		ShardsWritten:        float64(r.ShardsWritten),
		ShardsSkipped:        float64(r.ShardsSkipped),
		DurationSeconds:      r.Duration.Seconds(),
		LastRunTimestamp:     end,
		LastRunSuccess:       0,
		LastSuccessTimestamp: old[LastSuccessTimestamp],
	}
	if r.PeakRSSBytes > 0 {
		cur[PeakRSSBytes] = float64(r.PeakRSSBytes)
		cur[SpillBytes] = float64(r.SpillBytes)
	}
	if r.SourceRequests > 0 || old[SourceRequests] > 0 {
		cur[SourceRequests] = old[SourceRequests] + float64(r.SourceRequests)
		cur[SourceRetries] = old[SourceRetries] + float64(r.SourceRetries)
		cur[SourceBytesFetched] = old[SourceBytesFetched] + float64(r.SourceBytesFetched)
		cur[SourceBytesNeeded] = old[SourceBytesNeeded] + float64(r.SourceBytesNeeded)
	}
	if r.Success {
		cur[LastRunSuccess] = 1
		cur[LastSuccessTimestamp] = end
	} else {
		cur[ErrorsTotal]++
	}
	series[k] = cur

	var buf bytes.Buffer
	format(&buf, series)
	// 0644: the collector may run as another user.
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing metrics %s: %w", path, err)
	}
	return nil
}

// format writes series in the text exposition format: families in a fixed
// order, each with HELP and TYPE lines, series sorted by (command, output).
func format(w io.Writer, series map[key]map[string]float64) {
	keys := make([]key, 0, len(series))
	for k := range series {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.command, b.command); c != 0 {
			return c
		}
		return strings.Compare(a.output, b.output)
	})
	for _, f := range families {
		if optional[f.name] && !slices.ContainsFunc(keys, func(k key) bool { _, ok := series[k][f.name]; return ok }) {
			continue
		}
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, f.typ)
		for _, k := range keys {
			v, ok := series[k][f.name]
			if !ok {
				continue
			}
			fmt.Fprintf(w, "%s{command=\"%s\",output=\"%s\"} %s\n", f.name, escape(k.command), escape(k.output), formatValue(v))
		}
	}
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// escape escapes a label value: backslash, double quote and line feed.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// Parse reads the prep series of a text-format metrics file: samples whose
// name is one of this package's families and whose labels are command and
// output. Comment lines, blank lines and other metrics are skipped. A
// malformed prep sample line is an error wrapping ErrSyntax.
func Parse(r io.Reader) ([]Sample, error) {
	known := map[string]bool{}
	for _, f := range families {
		known[f.name] = true
	}
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		if !known[name] {
			continue
		}
		s, ok := parseSample(name, rest)
		if !ok {
			return nil, &ParseError{Line: n, Text: line, Err: ErrSyntax}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSample parses `label="v",...} value [timestamp]`.
func parseSample(name, rest string) (Sample, bool) {
	s := Sample{Name: name}
	for {
		rest = strings.TrimLeft(rest, " ,")
		if strings.HasPrefix(rest, "}") {
			rest = rest[1:]
			break
		}
		lname, after, ok := strings.Cut(rest, "=\"")
		if !ok {
			return s, false
		}
		var val strings.Builder
		i := 0
		for ; i < len(after) && after[i] != '"'; i++ {
			c := after[i]
			if c == '\\' && i+1 < len(after) {
				i++
				switch after[i] {
				case 'n':
					c = '\n'
				default:
					c = after[i]
				}
			}
			val.WriteByte(c)
		}
		if i == len(after) {
			return s, false
		}
		rest = after[i+1:]
		switch strings.TrimSpace(lname) {
		case "command":
			s.Command = val.String()
		case "output":
			s.Output = val.String()
		}
	}
	fields := strings.Fields(rest)
	if len(fields) < 1 || len(fields) > 2 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.Value = v
	return s, true
}
