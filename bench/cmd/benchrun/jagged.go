package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prepml/prep/bench/internal/gen"
	"github.com/prepml/prep/bench/internal/pages"
)

// The jagged-tensor rows: the Zipf list input (gen.WriteZipf) converted with
// a jagged spec and with the padded fixed-shape spec of the same column,
// runs alternated; the two shard sets' sizes against the raw values and
// offsets bytes; and gpuload's host delivery of a Zipf jagged shard against
// a plain read of it (BenchmarkHostDeliveryJaggedRatio, which alternates
// the two inside every iteration).

const specJagged = `# bench: the Zipf list as a jagged tensor
tensors:
  - {name: hist, column: hist, dtype: I32, list: {jagged: true}}
`

const specPadded = `# bench: the Zipf list padded to its longest row (1024), with its lengths
tensors:
  - {name: hist, column: hist, dtype: I32, shape: [1024], list: {pad: 0, lengths: true}}
`

// jaggedSizes compares the shard sets the two convert rows wrote.
type jaggedSizes struct {
	Values  int64 // raw values bytes: 4 x the hist values of every row
	Offsets int64 // raw offsets bytes: 8 x (b+1) per batch and rank
	Jagged  int64 // bytes of the jagged shard set (every file of the folder)
	Padded  int64 // bytes of the padded shard set
	Err     string
}

// deliveryMetric is the median and range over runs of one metric of one
// mode of BenchmarkHostDeliveryJaggedRatio.
type deliveryMetric struct {
	Mode, Metric string
	Values       []float64
}

func (d *driver) zipfInput() string { return filepath.Join(d.data, "zipf-list.parquet") }

// jaggedRows returns the two convert rows over the Zipf list input.
func (d *driver) jaggedRows() []*Row {
	specs := map[string]string{"jagged": specJagged, "padded": specPadded}
	in, err := pages.Stat(d.zipfInput())
	var rows []*Row
	for _, form := range []string{"jagged", "padded"} {
		spec := filepath.Join(d.work, "spec-"+form+".yaml")
		os.WriteFile(spec, []byte(specs[form]), 0o644)
		label := "`prep convert` --jobs 2: zipf-list, hist as a jagged tensor"
		if form == "padded" {
			label = "`prep convert` --jobs 2: zipf-list, hist padded to shape [1024] with lengths"
		}
		r := d.convertRow("convert-"+form, label, d.zipfInput(), spec, 2, in.Rows, in.UncompressedBytes)
		r.Warmup = true
		if err != nil && r.Err == "" {
			r.Err = "not measured: " + err.Error()
		}
		rows = append(rows, r)
	}
	return rows
}

// measureJaggedSizes reads the sizes of the shard sets the convert rows
// left (their last run's output).
func (d *driver) measureJaggedSizes(rows []*Row) *jaggedSizes {
	s := &jaggedSizes{Values: 4 * gen.ZipfValues(), Offsets: 8 * (1024 + 1) * (gen.ZipfRows / 8192) * 8}
	for _, r := range rows {
		if !r.OK() {
			s.Err = "not measured: " + r.ID + " has no figures (" + r.Err + ")"
			return s
		}
	}
	var err error
	if s.Jagged, err = dirSize(filepath.Join(d.work, "out-convert-jagged")); err != nil {
		s.Err = err.Error()
	}
	if s.Padded, err = dirSize(filepath.Join(d.work, "out-convert-padded")); err != nil {
		s.Err = err.Error()
	}
	return s
}

// fixedPrefix marks the metrics of BenchmarkHostDeliveryRatio (the
// fixed-shape shard of 1 MiB blocks) among a mode's deliveryMetrics.
const fixedPrefix = "fixed "

// jaggedDelivery runs BenchmarkHostDeliveryJaggedRatio and, in the same
// processes, BenchmarkHostDeliveryRatio (the gpuload test binary bench.sh
// builds) d.runs times and collects their metrics per mode; the fixed-shape
// benchmark's x-plain is kept as the metric "fixed x-plain".
func (d *driver) jaggedDelivery() ([]*deliveryMetric, string, string) {
	bin := d.exe("gpuload.test")
	args := []string{"-test.run", "^$", "-test.bench", "^BenchmarkHostDelivery(Jagged)?Ratio$", "-test.benchtime", "5x"}
	cmd := "go test ./gpuload -run '^$' -bench '^BenchmarkHostDelivery(Jagged)?Ratio$' -benchtime 5x"
	if !d.has("gpuload.test") {
		return nil, cmd, d.missing("the gpuload test binary")
	}
	byKey := map[string]*deliveryMetric{}
	var order []*deliveryMetric
	for run := range d.runs {
		c := exec.Command(bin, args...)
		c.Dir = filepath.Join(d.root, "gpuload")
		out, err := c.CombinedOutput()
		if err != nil {
			return nil, cmd, fmt.Sprintf("run %d failed: %v: %s", run+1, err, oneLine(string(out)))
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			prefix := ""
			name, ok := strings.CutPrefix(firstOr(f), "BenchmarkHostDeliveryJaggedRatio/")
			if !ok {
				name, ok = strings.CutPrefix(firstOr(f), "BenchmarkHostDeliveryRatio/")
				prefix = fixedPrefix
			}
			if !ok || len(f) < 4 {
				continue
			}
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				name = name[:i] // the GOMAXPROCS suffix
			}
			// f: name, iterations, then value-unit pairs.
			for k := 2; k+1 < len(f); k += 2 {
				v, err := strconv.ParseFloat(f[k], 64)
				if err != nil || f[k+1] == "ns/op" || prefix != "" && f[k+1] != "x-plain" {
					continue
				}
				key := name + " " + prefix + f[k+1]
				m := byKey[key]
				if m == nil {
					m = &deliveryMetric{Mode: name, Metric: prefix + f[k+1]}
					byKey[key] = m
					order = append(order, m)
				}
				m.Values = append(m.Values, v)
			}
		}
	}
	if len(order) == 0 {
		return nil, cmd, "no benchmark lines in the output"
	}
	return order, cmd, ""
}

func firstOr(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// text is the median (min–max) of the runs, or the one value all runs gave.
func (m *deliveryMetric) text() string {
	s := append([]float64(nil), m.Values...)
	sort.Float64s(s)
	lo, hi := fmt.Sprintf("%.3f", s[0]), fmt.Sprintf("%.3f", s[len(s)-1])
	if lo == hi {
		return lo // the same in every run (a size ratio)
	}
	return fmt.Sprintf("%.3f (%s–%s)", median(s), lo, hi)
}

// renderJagged writes the jagged-tensor section.
func (rep *report) renderJagged(b *strings.Builder) {
	b.WriteString("## Jagged tensors\n\n")
	fmt.Fprintf(b, "Input: `zipf-list.parquet` (`bench/internal/gen.WriteZipf`): %d rows, `id` INT64 and `hist` LIST<INT32> whose lengths follow a Zipf law over 1..%d (s = 1.7, v = 2), in %d row groups, PLAIN, snappy. The plan is the convert plan above (world size 8, global batch 8192, b = 1024, global shuffle); %d rows are exactly 30 global batches. The two specs: `{name: hist, column: hist, dtype: I32, list: {jagged: true}}` and `{..., shape: [1024], list: {pad: 0, lengths: true}}`; the two rows' runs alternate.\n\n",
		gen.ZipfRows, gen.ZipfMaxLen, gen.ZipfRows/gen.ZipfRowsPerRowGroup, gen.ZipfRows)
	rep.table(b, rep.Jagged, true)
	rep.note(b, "jagged-convert")
	b.WriteString("### Shard bytes\n\n")
	s := rep.JaggedSizes
	switch {
	case s == nil:
		b.WriteString("Not measured in this run.\n\n")
	case s.Err != "":
		fmt.Fprintf(b, "%s\n\n", s.Err)
	default:
		raw := s.Values + s.Offsets
		fmt.Fprintf(b, "| shard set | bytes | x raw values + offsets (%s + %s) |\n|---|---|---|\n", fmtBytes(s.Values), fmtBytes(s.Offsets))
		fmt.Fprintf(b, "| jagged (`.cache/bench/work/out-convert-jagged`) | %d | %.3fx |\n", s.Jagged, float64(s.Jagged)/float64(raw))
		fmt.Fprintf(b, "| padded to [1024] with lengths (`.cache/bench/work/out-convert-padded`) | %d | %.3fx |\n\n", s.Padded, float64(s.Padded)/float64(raw))
		ids := int64(8 * gen.ZipfRows)
		fmt.Fprintf(b, "Mean list length %.2f. Every file of each folder is counted (shards, manifest, plan copy); both forms also hold 8 bytes of sample id per sample (%s), which the raw figure leaves out: without them the jagged set is %.3fx the raw values and offsets.\n\n",
			float64(s.Values)/4/gen.ZipfRows, fmtBytes(ids), float64(s.Jagged-ids)/float64(raw))
	}
	b.WriteString("### Host delivery\n\n")
	rep.deliveryTable(b)
	rep.note(b, "jagged-delivery")
	rep.note(b, "packing")
}

// deliveryTable writes the table of BenchmarkHostDeliveryJaggedRatio's
// metrics per mode, with the fixed-shape x-plain of the same processes.
func (rep *report) deliveryTable(b *strings.Builder) {
	if rep.JaggedDeliveryErr != "" {
		fmt.Fprintf(b, "`%s`: %s\n\n", rep.JaggedDeliveryCmd, rep.JaggedDeliveryErr)
		return
	}
	if len(rep.JaggedDelivery) == 0 {
		b.WriteString("Not measured in this run.\n\n")
		return
	}
	fmt.Fprintf(b, "`%s` (one shard of 512 batches of 1024 rows of one Zipf-skewed jagged I32 tensor, written by the shard writer; each iteration reads the file plainly, then delivers every batch, values and offsets touched), run %d times as separate processes: median (min–max) over the runs. x-plain is the plain read's time over delivery's (same iteration); x-values the file's bytes over the raw values bytes; padded-x-values the bytes of the same rows padded to 1024 over the raw values bytes. The fixed-shape column is BenchmarkHostDeliveryRatio (256 MiB of 1 MiB blocks) in the same processes.\n\n", rep.JaggedDeliveryCmd, rep.Runs)
	metrics := []string{"x-plain", fixedPrefix + "x-plain", "x-values", "padded-x-values", "mean-len"}
	heads := append([]string{"mode", "x-plain", "fixed-shape x-plain, same runs"}, metrics[2:]...)
	b.WriteString("| " + strings.Join(heads, " | ") + " |\n|" + strings.Repeat("---|", len(heads)) + "\n")
	var modes []string
	cell := map[string]string{}
	for _, m := range rep.JaggedDelivery {
		if !strings.HasPrefix(m.Metric, fixedPrefix) && !slices.Contains(modes, m.Mode) {
			modes = append(modes, m.Mode)
		}
		cell[m.Mode+" "+m.Metric] = m.text()
	}
	for _, mode := range modes {
		b.WriteString("| " + mode)
		for _, m := range metrics {
			c, ok := cell[mode+" "+m]
			if !ok {
				c = "–"
			}
			b.WriteString(" | " + c)
		}
		b.WriteString(" |\n")
	}
	b.WriteString("\n")
}

// jaggedTarget is the shard-size target of the jagged rows.
func (rep *report) jaggedTarget() target {
	t := target{Name: "jagged shard bytes vs raw values + offsets, zipf-list", Goal: "<= 1.1x"}
	s := rep.JaggedSizes
	if s == nil || s.Err != "" || s.Jagged == 0 {
		t.Measured = "not measured"
		return t
	}
	raw := float64(s.Values + s.Offsets)
	x := float64(s.Jagged) / raw
	t.Known = true
	t.Measured = fmt.Sprintf("%.3fx (%s vs %s; padded %.1fx)", x, fmtBytes(s.Jagged), fmtBytes(s.Values+s.Offsets), float64(s.Padded)/raw)
	t.Met = x <= 1.1
	if !t.Met {
		t.Gap = fmt.Sprintf("over by %.0f %%", 100*(x/1.1-1))
		if noIDs := float64(s.Jagged-8*gen.ZipfRows) / raw; noIDs <= 1.1 {
			t.Gap += fmt.Sprintf("; %.3fx without the 8 bytes of sample id per sample every shard holds", noIDs)
		}
	}
	return t
}

// jaggedDeliveryTarget is the host-delivery target of the jagged rows: the
// pread mode's x-plain (median over the runs) of
// BenchmarkHostDeliveryJaggedRatio.
func (rep *report) jaggedDeliveryTarget() target {
	t := target{Name: "gpuload host delivery of a jagged shard set (Zipf list) vs plain read", Goal: ">= 0.9x"}
	med := map[string]float64{}
	for _, m := range rep.JaggedDelivery {
		if m.Metric == "x-plain" && len(m.Values) > 0 {
			med[m.Mode] = median(m.Values)
		}
	}
	x, ok := med["pread"]
	if rep.JaggedDeliveryErr != "" || !ok {
		t.Measured = "not measured"
		return t
	}
	t.Known = true
	t.Measured = fmt.Sprintf("%.2fx pread", x)
	if mm, ok := med["mmap"]; ok {
		t.Measured += fmt.Sprintf(" (%.2fx mmap)", mm)
	}
	if load, _, _ := strings.Cut(rep.LoadAvg[0], " "); load != "" {
		t.Measured += " at load average " + load
	}
	t.Met = x >= 0.9
	if !t.Met {
		t.Gap = fmt.Sprintf("missed by %.0f %%", 100*(1-x/0.9))
	}
	return t
}
