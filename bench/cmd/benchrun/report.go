package main

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prepml/prep/bench/internal/gen"
	"github.com/prepml/prep/bench/internal/pages"
)

// report is everything one run measured. It is saved as JSON
// (.cache/bench/results.json) so `benchrun -render` can rewrite
// BENCHMARKS.md, for example after editing bench/ANALYSIS.md or a file of
// bench/notes, without measuring again.
type report struct {
	d       *driver
	Inputs  map[string]pages.Info
	Limits  []*Row
	Peers   []*Row
	Plan    []*Row
	Convert []*Row
	Scaling []*Row
	Verify  []*Row
	Gpuload []*Row
	Jagged  []*Row // convert of the Zipf list input, jagged and padded
	// JaggedSizes compares the shard sets of the Jagged rows; JaggedDelivery
	// holds BenchmarkHostDeliveryJaggedRatio's metrics (Cmd: how it runs;
	// Err: why it has none).
	JaggedSizes       *jaggedSizes
	JaggedDelivery    []*deliveryMetric
	JaggedDeliveryCmd string
	JaggedDeliveryErr string
	Profiles          []profile
	Elapsed           time.Duration
	Commit            string
	Date              time.Time
	Machine           string
	Runs              int
	LoadAvg           [2]string // /proc/loadavg (1, 5, 15 minutes) at start and end of the run
	ShardSet          string    // shard set verify and gpuload read, relative to the root
}

func (rep *report) all() []*Row {
	var out []*Row
	for _, g := range [][]*Row{rep.Limits, rep.Peers, rep.Plan, rep.Convert, rep.Scaling, rep.Verify, rep.Gpuload, rep.Jagged} {
		out = append(out, g...)
	}
	return out
}

func (rep *report) row(id string) *Row {
	for _, r := range rep.all() {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// rate returns the byte rate of row id, or 0 when it has no figures.
func (rep *report) rate(id string) float64 {
	if r := rep.row(id); r != nil && r.OK() {
		return r.Rate()
	}
	return 0
}

type target struct {
	Name        string
	Goal        string
	Measured    string
	Met         bool
	Known       bool // measured at all
	Gap         string
	Profile     []string // profbench arguments when missed
	ProfileName string
}

// targets evaluates the targets; dir is the shard set the verify and
// load profiles read.
func (rep *report) targets(dir, planPath string) []target {
	d := rep.d
	var ts []target
	ratioTarget := func(name, goal string, num, den string, want float64, prof []string, pname string) {
		t := target{Name: name, Goal: goal, Profile: prof, ProfileName: pname}
		a, b := rep.rate(num), rep.rate(den)
		if a > 0 && b > 0 {
			x := a / b
			t.Known = true
			t.Measured = fmt.Sprintf("%.2fx (%s vs %s)", x, fmtRate(a), fmtRate(b))
			t.Met = x >= want
			if !t.Met {
				t.Gap = fmt.Sprintf("missed by %.0f %% (needs %.2fx the speed)", 100*(1-x/want), want/x)
			}
		} else {
			t.Measured = "not measured"
		}
		ts = append(ts, t)
	}
	convProf := []string{"convert", "--plan", filepath.Join(d.work, "plan-convert-req-plain-snappy.json"),
		"--spec", filepath.Join(d.work, "spec-req.yaml"), "-o", filepath.Join(d.work, "out-profile"), "--jobs", "2"}

	t := target{Name: "convert, req-plain-snappy", Goal: ">= 1.2 GB/s", Profile: convProf, ProfileName: "convert"}
	if a := rep.rate("convert-req-plain-snappy"); a > 0 {
		t.Known = true
		t.Measured = fmtRate(a)
		t.Met = a >= 1.2e9
		if !t.Met {
			t.Gap = fmt.Sprintf("missed by %.0f %% (needs %.1fx the speed)", 100*(1-a/1.2e9), 1.2e9/a)
		}
	} else {
		t.Measured = "not measured"
	}
	ts = append(ts, t)
	ratioTarget("convert vs pqarrow, req-plain-snappy", ">= 3x", "convert-req-plain-snappy", "pqarrow-req-plain-snappy", 3, convProf, "convert")
	ratioTarget("verify vs plain read", ">= 0.8x", "verify", "read-shards", 0.8, []string{"verify", dir, planPath}, "verify")
	ratioTarget("gpuload host delivery vs plain read", ">= 0.9x", "host", "read-shards-2", 0.9, []string{"load", dir}, "load")

	t = target{Name: "plan permutation, N = 10^9", Goal: ">= 20 M indices/s/core", Profile: []string{"perm"}, ProfileName: "perm"}
	if r := rep.row("perm"); r != nil && r.OK() {
		t.Known = true
		x := r.RowRate()
		t.Measured = fmt.Sprintf("%.1f M/s/core", x/1e6)
		t.Met = x >= 20e6
		if !t.Met {
			t.Gap = fmt.Sprintf("missed by %.0f %%", 100*(1-x/20e6))
		}
	} else {
		t.Measured = "not measured"
	}
	ts = append(ts, t)

	t = target{Name: "convert peak RSS, 10x input vs 1x (both --memory-limit 256MiB)", Goal: "flat (<= 1.25x)"}
	one, ten := rep.row("convert-1x-m256"), rep.row("convert-10x-m256")
	if one != nil && ten != nil && one.OK() && ten.OK() {
		t.Known = true
		x := float64(ten.PeakRSS()) / float64(one.PeakRSS())
		t.Measured = fmt.Sprintf("%.2fx (%s vs %s)", x, fmtBytes(ten.PeakRSS()), fmtBytes(one.PeakRSS()))
		t.Met = x <= 1.25
		if !t.Met {
			t.Gap = fmt.Sprintf("grows %.1fx for 10x rows", x)
		}
	} else {
		t.Measured = "not measured"
	}
	ts = append(ts, t)

	t = target{Name: "convert peak heap, 16 files x 5,000 columns (--memory-limit 32MiB)", Goal: "<= 64 MiB"}
	if r := rep.row("convert-wide-m32"); r != nil && r.OK() && r.PeakHeap() > 0 {
		t.Known = true
		h := r.PeakHeap()
		t.Measured = fmtBytes(h) + " (largest of the runs)"
		t.Met = h <= 64<<20
		if !t.Met {
			t.Gap = fmt.Sprintf("over by %s", fmtBytes(h-64<<20))
		}
	} else {
		t.Measured = "not measured"
	}
	ts = append(ts, t)
	ts = append(ts, rep.memLimitTargets()...)
	ts = append(ts, rep.jaggedDeliveryTarget(), rep.jaggedTarget())
	// Profile each stage once.
	seen := map[string]bool{}
	for i := range ts {
		if ts[i].Met || !ts[i].Known || seen[ts[i].ProfileName] {
			ts[i].Profile = nil
		}
		if ts[i].Profile != nil {
			seen[ts[i].ProfileName] = true
		}
	}
	return ts
}

type ref struct{ id, name string }

func (rep *report) refs(id string) []ref {
	if v, ok := strings.CutPrefix(id, "convert-"); ok {
		switch v {
		case "j1", "10x", "1x-m256":
			return []ref{{"convert-req-plain-snappy", "--jobs 2 on 1x"}}
		case "wide-m32":
			return nil
		case "jagged":
			return []ref{{"convert-padded", "padded"}}
		case "padded":
			return []ref{{"convert-jagged", "jagged"}}
		case "10x-m256":
			return []ref{{"convert-1x-m256", "1x at the same limit"}, {"convert-10x", "10x at the default limit"}}
		}
		return []ref{{"pqarrow-" + v, "pqarrow"}, {"generic-" + v, "GenericReader"},
			{"decompress-" + v, "1-core decompression"}, {"memcpy", "1-core memcpy"}}
	}
	switch id {
	case "verify":
		return []ref{{"read-shards", "plain read"}}
	case "host", "host-map":
		return []ref{{"read-shards-2", "plain read"}, {"memcpy-2", "1-core memcpy"}}
	case "rankbatch":
		return []ref{{"perm", "bare permutation"}}
	case "rankbatch-blocks":
		return []ref{{"rankbatch", "global"}}
	}
	return nil
}

func (rep *report) ratioText(r *Row) string {
	if !r.OK() {
		return ""
	}
	var parts []string
	for _, f := range rep.refs(r.ID) {
		if b := rep.rate(f.id); b > 0 {
			parts = append(parts, fmt.Sprintf("%.2fx %s", r.Rate()/b, f.name))
		}
	}
	return strings.Join(parts, "; ")
}

func (rep *report) table(b *strings.Builder, rows []*Row, rowsCol bool) {
	if rowsCol {
		b.WriteString("| measurement | command | runs | median s (min–max) | throughput | M rows/s | peak RSS | CPU s | MB per CPU-s | same-run ratio |\n|---|---|---|---|---|---|---|---|---|---|\n")
	} else {
		b.WriteString("| measurement | command | runs | median s (min–max) | throughput | peak RSS | CPU s | same-run ratio |\n|---|---|---|---|---|---|---|---|\n")
	}
	for _, r := range rows {
		cmd := "`" + r.Command(rep.d.root) + "`"
		if !r.OK() {
			if rowsCol {
				fmt.Fprintf(b, "| %s | %s | – | %s | – | – | – | – | – | |\n", r.Label, cmd, r.Err)
			} else {
				fmt.Fprintf(b, "| %s | %s | – | %s | – | – | – | |\n", r.Label, cmd, r.Err)
			}
			continue
		}
		label := r.Label
		if r.ShowExtra && r.Results[0].Extra != "" {
			label += " [" + r.Results[0].Extra + "]"
		}
		lo, hi := r.MinMax()
		times := fmt.Sprintf("%.3f (%.3f–%.3f)", r.Median(), lo, hi)
		if rowsCol {
			perCPU := "–"
			if r.CPUMedian() > 0 && r.NumBytes() > 0 {
				perCPU = fmt.Sprintf("%.0f", float64(r.NumBytes())/1e6/r.CPUMedian())
			}
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %.2f | %s | %.2f | %s | %s |\n", label, cmd, len(r.Times), times,
				rateOrDash(r), r.RowRate()/1e6, fmtBytes(r.PeakRSS()), r.CPUMedian(), perCPU, rep.ratioText(r))
		} else {
			fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %.2f | %s |\n", label, cmd, len(r.Times), times,
				rateOrDash(r), fmtBytes(r.PeakRSS()), r.CPUMedian(), rep.ratioText(r))
		}
	}
	noted := map[string]bool{}
	for _, r := range rows {
		if r.Note != "" && !noted[r.Note] {
			noted[r.Note] = true
			fmt.Fprintf(b, "\nNote: %s.\n", r.Note)
		}
	}
	b.WriteString("\n")
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func rateOrDash(r *Row) string {
	if r.NumBytes() == 0 {
		return "–"
	}
	return fmtRate(r.Rate())
}

func machine() string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				var kb int64
				fmt.Sscanf(strings.TrimPrefix(l, "MemTotal:"), "%d", &kb)
				mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
			}
		}
	}
	kernel, _ := exec.Command("uname", "-r").Output()
	return fmt.Sprintf("%s, %d logical CPUs%s, Linux %s, %s", model, runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func (rep *report) render() string {
	var b strings.Builder
	b.WriteString("# prep benchmarks\n\n")
	fmt.Fprintf(&b, "Generated by `make bench` (scripts/bench.sh → bench/cmd/benchrun) at commit `%s` on %s in %.1f minutes.\n\n",
		rep.Commit, rep.Date.UTC().Format("2006-01-02 15:04 UTC"), rep.Elapsed.Minutes())
	b.WriteString(handNote)
	fmt.Fprintf(&b, "Machine: %s. Load average (1, 5, 15 min) at start: %s; at end: %s — a shared virtual machine: other jobs run beside the benchmark, so single figures move by 10–30 %% between runs (min–max shows it); compare ratios within one run, not absolute figures across runs.\n\n", rep.Machine, rep.LoadAvg[0], rep.LoadAvg[1])
	b.WriteString(`Method. Every row is a separate process started by the driver, measured ` + fmt.Sprint(rep.Runs) + ` times (after one untimed warm-up run where marked in the code: page cache warm, as for a node that has just written or read its inputs). Times are the median and min–max of the runs: the child's wall time for whole commands (prep, pqarrow, GenericReader), or the timed region the child reports for limit probes (which first load their input into memory). Peak RSS is the largest ru_maxrss of the runs, CPU s the median user+sys time of one run, both from the child's rusage; MB per CPU-s (bytes over CPU time) is the figure least moved by other jobs competing for the 2 cores, since a CPU-bound command waiting for a core costs wall time but no CPU time. Throughput for convert and the Parquet peers is counted on the same numerator: the sum of the input's column chunk total_uncompressed_size (decoded Parquet bytes); M rows/s on source rows. The peers live in the separate module bench/ (go.mod with a replace of the product), so arrow-go never enters the prep binary.

`)

	b.WriteString("## Targets\n\n| target | goal | measured (median) | status |\n|---|---|---|---|\n")
	tn := rep.targetNotes()
	for _, t := range rep.targets("", "") {
		status := "met"
		switch {
		case !t.Known:
			status = "not measured"
		case !t.Met:
			status = "**missed**: " + t.Gap
		}
		if r := tn.Remarks[t.Name]; r != "" {
			status += " (" + r + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Goal, t.Measured, status)
	}
	for _, r := range tn.Rows {
		b.WriteString(r + "\n")
	}
	b.WriteString("\n")
	if s := rep.convertBound(); s != "" {
		b.WriteString(s + "\n\n")
	}

	b.WriteString("## Inputs\n\nGenerated deterministically by `bench/cmd/gendata` into `.cache/bench/data` (not in git). Schema: `id` INT64, `f0..f7` FLOAT (8,192 distinct values each), `emb` LIST<FLOAT> of 16 (uniform, incompressible), `label` STRING dictionary (1,000 values); 2,000,000 rows in 8 row groups of 250,000; parquet-go v0.32.0 writer, data page V2, 256 KiB page buffers. The Optional layout makes every field OPTIONAL, dictionary-encodes f0..f7 and label, and nulls 1 % of f0..f7 (the convert spec fills them with 0).\n\n")
	b.WriteString("| file | rows | row groups | compressed | uncompressed | column encodings |\n|---|---|---|---|---|---|\n")
	for _, v := range gen.Variants {
		in := rep.Inputs[v.Name]
		enc := ""
		if len(in.Columns) > 1 {
			enc = "f0: " + strings.TrimPrefix(in.Columns[1], "[f0] ")
		}
		fmt.Fprintf(&b, "| %s.parquet | %d | %d | %.1f MB | %.1f MB | %s |\n", v.Name, in.Rows, in.RowGroups,
			float64(in.CompressedBytes)/1e6, float64(in.UncompressedBytes)/1e6, enc)
	}
	b.WriteString("\nThe convert plan: 1 epoch, world size 8 (the ranks of one 8-GPU node), global batch 8192 (b = 1024), global shuffle, remainder drop; every run starts from an empty output folder; shards are fsynced (crash-safe writes), so the figures include the disk.\n\n")

	b.WriteString("## convert\n\n")
	rep.table(&b, rep.Convert, true)
	b.WriteString("### Scaling and memory\n\n")
	rep.table(&b, rep.Scaling, true)
	rep.note(&b, "scaling")

	b.WriteString("## Peers (same inputs, same run)\n\n")
	rep.table(&b, rep.Peers, true)

	b.WriteString("## Machine limits (same run)\n\n")
	rep.table(&b, rep.Limits, false)

	b.WriteString("## plan\n\n")
	rep.table(&b, rep.Plan, true)
	b.WriteString("For the permutation rows M rows/s is indices per second on one core (the child pins GOMAXPROCS=1); for `prep plan` rows/s is files per second.\n\n")

	b.WriteString("## verify\n\n")
	rep.table(&b, rep.Verify, false)
	fmt.Fprintf(&b, "Shard set: `%s`. Throughput is counted on the bytes of the shard set (all files of the output folder).\n\n", rep.ShardSet)
	rep.note(&b, "verify")

	b.WriteString("## gpuload\n\n### Host backend\n\n")
	rep.table(&b, rep.Gpuload, false)
	fmt.Fprintf(&b, "Shard set: `%s` (the same files for every row).\n\n", rep.ShardSet)
	if r := rep.row("host"); r != nil && r.OK() {
		fmt.Fprintf(&b, "CPU time per GB delivered (host backend, whole process): %.2f s/GB.\n\n", r.CPUMedian()/(float64(r.NumBytes())/1e9))
	}
	rep.note(&b, "gpuload-host")
	b.WriteString("### CUDA backend\n\n")
	if gpu, err := os.ReadFile(filepath.Join(rep.d.root, gpuResultsPath)); err == nil {
		// Recorded by hand from scripts/gpu-check.sh on a GPU machine:
		// this machine has no GPU, so the figures are not from this run.
		b.WriteString("Not from this run (this machine has no GPU): the last `scripts/gpu-check.sh` run on a GPU machine, recorded in `" + gpuResultsPath + "`.\n\n")
		b.Write(gpu)
		b.WriteString("\n")
	} else {
		b.WriteString("| measurement | result |\n|---|---|\n| shard → device throughput as a ratio to pinned cuMemcpyHtoD peak | not measured: no GPU |\n\n`scripts/gpu-check.sh` measures it on a machine with an NVIDIA GPU.\n\n")
	}

	rep.renderJagged(&b)

	if len(rep.Profiles) > 0 {
		b.WriteString("## Where the time goes (CPU profiles of missed targets)\n\n")
		for _, p := range rep.Profiles {
			fmt.Fprintf(&b, "### %s\n\n", p.Title)
			if p.Command != "" {
				fmt.Fprintf(&b, "`%s`, then `go tool pprof -top -nodecount=18`:\n\n", p.Command)
			}
			if p.Err != "" {
				fmt.Fprintf(&b, "%s\n\n", p.Err)
			}
			if p.Top != "" {
				fmt.Fprintf(&b, "```\n%s```\n\n", trimTop(p.Top))
			}
		}
	}

	b.WriteString("## What this means\n\n")
	b.WriteString(rep.meaning())
	if a, err := os.ReadFile(filepath.Join(rep.d.root, "bench", "ANALYSIS.md")); err == nil {
		b.WriteString("\n")
		b.Write(a)
	}
	if im := rep.imageSection(); im != "" {
		b.WriteString("\n" + im)
	}
	for _, r := range []struct{ path, note string }{{decodeResultsPath, "decode"}, {filterResultsPath, "filter"}} {
		if sec := rep.resultSection(r.path, r.note); sec != "" {
			b.WriteString("\n" + strings.TrimSuffix(sec, "\n"))
		}
	}
	if s3 := rep.s3Section(); s3 != "" {
		b.WriteString("\n" + s3)
	}
	return b.String()
}

// handNote tells the reader of BENCHMARKS.md where its hand-measured
// sections live (notes.go).
const handNote = "Do not edit this file: sections measured by hand live in `bench/notes/` (one file per section, see its README), `bench/gpu-results.md`, `bench/ANALYSIS.md` and `bench/s3-results.md`, and every render includes them at their places.\n\n"

// trimTop drops pprof's header lines that name temporary paths.
func trimTop(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Type:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// meaning turns the measured rates into the two capacity questions the
// issue asks, with the arithmetic shown.
func (rep *report) meaning() string {
	var b strings.Builder
	host := rep.rate("host")
	conv := rep.rate("convert-req-plain-snappy")
	if host > 0 {
		const perGPU = 1e9 // bytes/s one GPU consumes, a stated assumption
		const sample = 112 // bytes of the benchmark's tensors per sample (I64 + 8 F32 + 16 F32 + I64)
		fmt.Fprintf(&b, "- Feeding GPUs: the host backend delivered %s from page cache on this machine. A GPU training on batches of tabular features and embeddings rarely consumes more than 1 GB/s of input (for this benchmark's 112-byte samples that would be %.1f M samples/s per GPU), so at the measured rate one node's prep output can feed about %.0f such GPU(s) from page cache with this machine's 2 cores (host delivery costs the CPU time per GB given above, so more GPUs need proportionally more cores or the CUDA backend's DMA path). A cold read is bounded by the local disk instead, and with the CUDA backend by the host-to-device path (on an H200, see the CUDA backend section: 8.1 GB/s through the pread ring, 53 GB/s from the registered mapping, now the default for a shard in page cache).\n",
			fmtRate(host), perGPU/sample/1e6, math.Floor(host/perGPU))
	}
	if conv > 0 {
		in := rep.Inputs["req-plain-snappy"]
		ratio := float64(in.UncompressedBytes) / float64(in.CompressedBytes)
		perNode := 10e12 / 64 // bytes of Parquet per node at world size 64
		secs := perNode * ratio / conv
		fmt.Fprintf(&b, "- Materializing 10 TB: at world size 64 each node converts its own ranks, %.0f GB of Parquet (%.0f GB decoded at this file's %.2f decoded/compressed ratio). At the measured %s per node (2 cores) that takes %.0f minutes for the first epoch's shards; convert decodes once, so further epochs of the same run add only the gather-and-write stage. More cores shorten it only as far as convert scales (the --jobs 1 → 2 row above) and the local disk keeps up; that is not measured here.\n",
			perNode/1e9, perNode*ratio/1e9, ratio, fmtRate(conv), secs/60)
	}
	if b.Len() == 0 {
		b.WriteString("Not computed: the convert and host delivery rows were not measured in this run.\n")
	}
	return b.String()
}

// gpuResultsPath holds the figures of the last scripts/gpu-check.sh run on a
// machine with an NVIDIA GPU, recorded by hand (relative to the repository
// root given by -root). Without it the CUDA row says "not measured".
const gpuResultsPath = "bench/gpu-results.md"

// convertBound states, from limit probes measured in the same run, the
// fastest any convert of req-plain-snappy could finish on this machine. A
// global shuffle puts samples from every row group in every batch, so no
// batch can be written before the last row group is decoded, and shards are
// written crash-safe (fsync before rename, DESIGN.md), so the wall time is at
// least the decode of the file on both cores plus the fsynced write of the
// shard bytes; counting only the decompression in the decode (no page CRC,
// levels, transforms, staging or gather) gives an upper bound on throughput.
func (rep *report) convertBound() string {
	dec, wr, conv := rep.row("decompress-req-plain-snappy"), rep.row("write-shards-fsync"), rep.row("convert-req-plain-snappy")
	if dec == nil || wr == nil || conv == nil || !dec.OK() || !wr.OK() || !conv.OK() {
		return ""
	}
	floor := dec.Median()/2 + wr.Median()
	bound := float64(conv.NumBytes()) / floor
	return fmt.Sprintf("Bound on this machine, same run: no batch of a global shuffle can be written before the last row group is decoded, "+
		"and shards are fsynced before they are renamed into place, so a convert of req-plain-snappy takes at least its snappy decompression "+
		"on both cores (%.3f s / 2, the 1-core row below) plus the crash-safe write of its shard bytes (%.3f s, the write row below): %.3f s, "+
		"at most %s with nothing else (no page CRC, levels, transforms, staging or gather) costing anything. The 1.2 GB/s target is %.2fx that bound; "+
		"3x pqarrow (%s) is %.2fx it. convert takes %.3f s (%.2fx the floor).",
		dec.Median(), wr.Median(), floor, fmtRate(bound), 1.2e9/bound, fmtRate(3*rep.rate("pqarrow-req-plain-snappy")),
		3*rep.rate("pqarrow-req-plain-snappy")/bound, conv.Median(), conv.Median()/floor)
}
