// Command benchrun is the driver of `make bench`: it runs every measurement
// as separate child processes (at least 5 measured runs each, after an
// untimed warm-up where it matters), reads each child's peak RSS and CPU time
// from its rusage, computes median, min and max, and writes BENCHMARKS.md
// with the exact command of each row and the ratios to the peers and
// machine limits measured in the same run.
//
// It expects the binaries built by scripts/bench.sh under <cache>/bin (prep,
// peers, planbench, loadbench, profbench) and the inputs written by gendata
// under <cache>/data. A binary that did not build turns its rows into
// "not measured" with the reason; nothing is ever estimated.
//
// What is measured by hand is never written into BENCHMARKS.md directly:
// each such section lives in its own file (bench/notes/<section>.md,
// bench/notes/targets.md, bench/gpu-results.md, bench/ANALYSIS.md,
// bench/s3-results.md) and every render includes it at its place (notes.go).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/prepml/prep/bench/internal/gen"
	"github.com/prepml/prep/bench/internal/pages"
)

type driver struct {
	root, cache, bin, data, work string
	start                        time.Time
	budget                       time.Duration
	runs                         int
	logf                         func(format string, args ...any)
}

func (d *driver) overBudget() bool { return time.Since(d.start) > d.budget }

func (d *driver) exe(name string) string { return filepath.Join(d.bin, name) }

func (d *driver) has(name string) bool {
	_, err := os.Stat(d.exe(name))
	return err == nil
}

func main() {
	root := flag.String("root", ".", "repository root")
	out := flag.String("o", "BENCHMARKS.md", "report to write")
	runs := flag.Int("runs", 5, "measured runs per row")
	budget := flag.Duration("budget", 13*time.Minute, "stop measuring new rows after this long")
	only := flag.String("only", "", "comma-separated stages to run (limits,peers,convert,memlimit,plan,verify,gpuload,jagged); empty = all")
	render := flag.Bool("render", false, "rewrite the report from the last saved results (.cache/bench/results.json) without measuring")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("benchrun: ")

	abs, err := filepath.Abs(*root)
	if err != nil {
		log.Fatal(err)
	}
	d := &driver{root: abs, start: time.Now(), budget: *budget, runs: *runs}
	d.cache = filepath.Join(abs, ".cache", "bench")
	d.bin = filepath.Join(d.cache, "bin")
	d.data = filepath.Join(d.cache, "data")
	d.work = filepath.Join(d.cache, "work")
	d.logf = func(format string, args ...any) {
		log.Printf("[%5.0fs] "+format, append([]any{time.Since(d.start).Seconds()}, args...)...)
	}
	if err := os.MkdirAll(d.work, 0o755); err != nil {
		log.Fatal(err)
	}
	stages := map[string]bool{}
	for s := range strings.SplitSeq(*only, ",") {
		if s != "" {
			stages[s] = true
		}
	}
	want := func(s string) bool { return len(stages) == 0 || stages[s] }

	saved := filepath.Join(d.cache, "results.json")
	if !filepath.IsAbs(*out) {
		*out = filepath.Join(abs, *out)
	}
	if *render {
		rep, err := loadReport(d, saved)
		if err != nil {
			log.Fatal(err)
		}
		for _, p := range rep.checkNotes() {
			d.logf("warning: %s", p)
		}
		if err := os.WriteFile(*out, []byte(rep.render()), 0o644); err != nil {
			log.Fatal(err)
		}
		d.logf("rendered %s from %s", *out, saved)
		return
	}

	rep := &report{d: d, Inputs: map[string]pages.Info{}, Commit: commit(abs), Date: time.Now(), Machine: machine(), Runs: *runs}
	rep.LoadAvg[0] = loadAvg()
	for _, v := range gen.Variants {
		in, err := pages.Stat(filepath.Join(d.data, v.Name+".parquet"))
		if err != nil {
			log.Fatalf("input missing (run gendata first): %v", err)
		}
		rep.Inputs[v.Name] = in
	}

	// Measurement groups: rows compared with each other run interleaved.
	if want("convert") {
		rep.Limits = d.limitRows()
		rep.Peers = d.peerRows()
		rep.Convert, rep.Scaling = d.convertRows(rep)
		byID := map[string]*Row{}
		for _, r := range rep.all() {
			byID[r.ID] = r
		}
		d.measureAll([]*Row{byID["memcpy"], byID["read-parquet"]})
		for _, v := range gen.Variants {
			g := []*Row{byID["decompress-"+v.Name], byID["pqarrow-"+v.Name], byID["generic-"+v.Name], byID["convert-"+v.Name]}
			if v.Name == "req-plain-snappy" {
				g = append(g, byID["convert-j1"], byID["write-shards-fsync"])
			}
			d.measureAll(g)
		}
		d.measureAll([]*Row{byID["convert-1x-m256"], byID["convert-10x-m256"], byID["convert-10x"]})
		d.measureAll([]*Row{byID["convert-wide-m32"]})
	}
	if want("convert") || want("memlimit") {
		mem := d.memLimitRows()
		rep.Scaling = append(rep.Scaling, mem...)
		d.measureAll(mem)
	}
	if want("plan") {
		rep.Plan = d.planRows()
		d.measureAll(rep.Plan)
	}
	dir, planPath := d.shardSet()
	rep.ShardSet, _ = filepath.Rel(abs, dir)
	if want("verify") {
		rep.Verify = d.verifyRows(dir, planPath)
		d.measureAll(rep.Verify)
	}
	if want("gpuload") {
		rep.Gpuload = d.gpuloadRows(dir)
		d.measureAll(rep.Gpuload)
	}
	if want("jagged") {
		rep.Jagged = d.jaggedRows()
		d.measureAll(rep.Jagged)
		rep.JaggedSizes = d.measureJaggedSizes(rep.Jagged)
		rep.JaggedDelivery, rep.JaggedDeliveryCmd, rep.JaggedDeliveryErr = d.jaggedDelivery()
	}
	rep.Profiles = d.profiles(rep, dir, planPath)
	rep.Elapsed = time.Since(d.start)
	rep.LoadAvg[1] = loadAvg()
	if b, err := json.MarshalIndent(rep, "", "  "); err == nil {
		os.WriteFile(saved, b, 0o644)
	}

	for _, p := range rep.checkNotes() {
		d.logf("warning: %s", p)
	}
	text := rep.render()
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		log.Fatal(err)
	}
	d.logf("wrote %s", *out)
}

// loadReport reads a report saved by a measuring run (results.json).
func loadReport(d *driver, path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rep := &report{d: d}
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("decoding %s: %v", path, err)
	}
	return rep, nil
}

func (d *driver) missing(name string) string {
	return fmt.Sprintf("not measured: %s did not build at this commit (see make bench output)", name)
}

func (d *driver) input(v string) string { return filepath.Join(d.data, v+".parquet") }

func (d *driver) limitRows() []*Row {
	p := d.exe("peers")
	rows := []*Row{
		{ID: "memcpy", Label: "memory copy, 1 core (copy() of a warm 256 MiB buffer, 8 times)", Argv: []string{p, "memcpy", "-mb", "256", "-reps", "8"}, Timing: Inner},
		{ID: "read-parquet", Label: "plain sequential read of req-plain-snappy.parquet (page cache warm)", Argv: []string{p, "readfiles", d.input("req-plain-snappy")}, Timing: Inner, Warmup: true},
		{ID: "write-shards-fsync", Label: "crash-safe write of 229 MiB (convert's shard bytes) as 8 new files, 2 writers, writeback every 8 MiB, fsync",
			Argv: []string{p, "writefiles", "-dir", filepath.Join(d.work, "write-probe"), "-mb", "229", "-files", "8"}, Timing: Inner},
	}
	for _, v := range gen.Variants {
		rows = append(rows, &Row{ID: "decompress-" + v.Name, Label: fmt.Sprintf("%s decompression, 1 core, of every compressed page of %s.parquet", v.Codec, v.Name),
			Argv: []string{p, "decompress", d.input(v.Name)}, Timing: Inner})
	}
	if !d.has("peers") {
		for _, r := range rows {
			r.Err = d.missing("bench/cmd/peers")
		}
	}
	return rows
}

func (d *driver) peerRows() []*Row {
	p := d.exe("peers")
	var rows []*Row
	for _, v := range gen.Variants {
		rows = append(rows,
			&Row{ID: "pqarrow-" + v.Name, Label: "arrow-go pqarrow ReadTable (Parallel), all columns into Arrow arrays: " + v.Name,
				Argv: []string{p, "pqarrow", d.input(v.Name)}, Warmup: true},
			&Row{ID: "generic-" + v.Name, Label: "parquet-go GenericReader into structs, one reader per row group on 2 goroutines: " + v.Name,
				Argv: []string{p, "generic", d.input(v.Name)}, Warmup: true})
	}
	if !d.has("peers") {
		for _, r := range rows {
			r.Err = d.missing("bench/cmd/peers")
		}
	}
	return rows
}

// planArgs is the plan every convert row uses: one epoch, world size 8 (the
// ranks of one 8-GPU node), global batch 8192 (b = 1024), global shuffle.
func planArgs(prep, src, out string) []string {
	return []string{prep, "plan", "--source", src, "--seed", "1", "--epochs", "1", "--global-batch", "8192",
		"--world-size", "8", "--workers", "1", "--shuffle", "global", "--remainder", "drop", "-o", out}
}

func (d *driver) planRows() []*Row {
	pb := d.exe("planbench")
	rows := []*Row{
		{ID: "perm", Label: "plan.Perm.Apply, N = 10^9, 1 core (5·10^7 indices sampled in 50 runs spread over [0, N))",
			Argv: []string{pb, "perm", "-n", "1000000000", "-count", "50000000"}, Timing: Inner},
		{ID: "rankbatch", Label: "Plan.RankBatch, global shuffle, N = 10^8, G = 65536, 1 core (~2·10^7 ids sampled; N = 10^8 because plan.New hashes all N ids for the epoch digest, ~40 CPU-s at 10^9)",
			Argv: []string{pb, "rankbatch", "-n", "100000000", "-count", "20000000"}, Timing: Inner, ShowExtra: true},
		{ID: "rankbatch-blocks", Label: "Plan.RankBatch, shuffle blocks, window 16 row groups of 10^6 rows, otherwise as the global row",
			Argv: []string{pb, "rankbatch", "-n", "100000000", "-count", "20000000", "-shuffle", "blocks", "-window", "16"}, Timing: Inner, ShowExtra: true},
	}
	if !d.has("planbench") {
		for _, r := range rows {
			r.Err = d.missing("bench/cmd/planbench")
		}
	}
	small := filepath.Join(d.data, "small")
	out := filepath.Join(d.work, "plan-small.json")
	pr := &Row{ID: "prep-plan-10k", Label: "`prep plan` over 10,000 small files (footers only)",
		Argv: planArgs(d.exe("prep"), small, out), Warmup: true, Rows: 10_000}
	if !d.has("prep") {
		pr.Err = d.missing("cmd/prep")
	}
	rows = append(rows, pr)
	return rows
}

const specReq = `# bench: Required/PLAIN layout
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
`

const specOpt = `# bench: Optional/dictionary layout (1 % of f0..f7 null, filled with 0)
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32, nulls: {fill: 0}}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
`

// convertRow builds the row converting src (a file or folder) by a plan made
// once, untimed, before the row runs, with extra flags after the others.
// Every run starts from an empty output folder.
func (d *driver) convertRow(id, label, src, spec string, jobs int, rows, bytes int64, extra ...string) *Row {
	prep := d.exe("prep")
	planPath := filepath.Join(d.work, "plan-"+id+".json")
	out := filepath.Join(d.work, "out-"+id)
	r := &Row{ID: id, Label: label, Rows: rows, Bytes: bytes,
		Argv: append([]string{prep, "convert", "--plan", planPath, "--spec", spec, "-o", out, "--jobs", fmt.Sprint(jobs)}, extra...)}
	if !d.has("prep") {
		r.Err = d.missing("cmd/prep")
		return r
	}
	planned := false
	r.Setup = func() error {
		if !planned {
			args := planArgs(prep, src, planPath)
			if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v: %s", strings.Join(args[1:3], " "), err, oneLine(string(b)))
			}
			planned = true
		}
		return os.RemoveAll(out)
	}
	return r
}

func (d *driver) convertRows(rep *report) (rows, scaling []*Row) {
	specs := map[bool]string{false: filepath.Join(d.work, "spec-req.yaml"), true: filepath.Join(d.work, "spec-opt.yaml")}
	os.WriteFile(specs[false], []byte(specReq), 0o644)
	os.WriteFile(specs[true], []byte(specOpt), 0o644)
	for _, v := range gen.Variants {
		in := rep.Inputs[v.Name]
		rows = append(rows, d.convertRow("convert-"+v.Name, "`prep convert` --jobs 2: "+v.Name, d.input(v.Name), specs[v.Optional], 2, in.Rows, in.UncompressedBytes))
	}
	in := rep.Inputs["req-plain-snappy"]
	j1 := d.convertRow("convert-j1", "`prep convert` --jobs 1: req-plain-snappy", d.input("req-plain-snappy"), specs[false], 1, in.Rows, in.UncompressedBytes)
	big := d.convertRow("convert-10x", "`prep convert` --jobs 2: 10x input (10 hard links of req-plain-snappy, 20,000,000 rows)",
		filepath.Join(d.data, "big"), specs[false], 2, 10*in.Rows, 10*in.UncompressedBytes)
	big.Note = "the 10x rows have no warm-up run"
	// The memory bound: the same --memory-limit for 1x and 10x input. At
	// 256 MiB the 1x staging (224 MB) stays in memory and the 10x staging
	// spills to disk by output window.
	one256 := d.convertRow("convert-1x-m256", "`prep convert` --jobs 2 --memory-limit 256MiB: req-plain-snappy", d.input("req-plain-snappy"), specs[false], 2, in.Rows, in.UncompressedBytes, "--memory-limit", "256MiB")
	big256 := d.convertRow("convert-10x-m256", "`prep convert` --jobs 2 --memory-limit 256MiB: 10x input", filepath.Join(d.data, "big"), specs[false], 2, 10*in.Rows, 10*in.UncompressedBytes, "--memory-limit", "256MiB")
	big256.Note = big.Note
	return rows, []*Row{j1, big, one256, big256, d.wideRow()}
}

// specWide stacks the 5,000 columns of the wide input into one tensor.
const specWide = `# bench: wide files, every column of each row into one F32 tensor
tensors:
  - {name: x, columns_regex: "^c", dtype: F32}
`

// wideRow is the wide-footer bound: 16 files of 5,000 columns (each footer
// decodes to about 6 MiB) under --memory-limit 32MiB, peak heap read from
// the --json summary.
func (d *driver) wideRow() *Row {
	spec := filepath.Join(d.work, "spec-wide.yaml")
	os.WriteFile(spec, []byte(specWide), 0o644)
	const files = 16
	rows := int64(files * gen.WideRows)
	r := d.convertRow("convert-wide-m32", fmt.Sprintf("`prep convert` --jobs 2 --memory-limit 32MiB: %d files of %d columns, %d rows each", files, gen.WideColumns, gen.WideRows),
		filepath.Join(d.data, "wide"), spec, 2, rows, rows*gen.WideColumns*4, "--memory-limit", "32MiB", "--json")
	if r.Err != "" {
		return r
	}
	prep, planPath, out := d.exe("prep"), filepath.Join(d.work, "plan-convert-wide-m32.json"), filepath.Join(d.work, "out-convert-wide-m32")
	planned := false
	r.Setup = func() error {
		if !planned {
			args := []string{prep, "plan", "--source", filepath.Join(d.data, "wide"), "--seed", "1", "--global-batch", "64", "--shuffle", "global", "-o", planPath}
			if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("plan: %v: %s", err, oneLine(string(b)))
			}
			planned = true
		}
		return os.RemoveAll(out)
	}
	r.Note = "throughput counts the decoded F32 values; peak heap is the largest `peak_heap_bytes` of the runs' `--json` summaries"
	return r
}

// shardSet is the shard set verify and gpuload read, and its plan: the
// output of the last measured run of the 10x convert row (2.2 GB, so the
// reads take long enough to measure), else of the 1x req-plain-snappy row.
func (d *driver) shardSet() (dir, planPath string) {
	for _, id := range []string{"convert-10x", "convert-req-plain-snappy"} {
		dir := filepath.Join(d.work, "out-"+id)
		if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
			return dir, filepath.Join(d.work, "plan-"+id+".json")
		}
	}
	return filepath.Join(d.work, "out-convert-10x"), filepath.Join(d.work, "plan-convert-10x.json")
}

func (d *driver) verifyRows(dir, planPath string) []*Row {
	rows := []*Row{
		{ID: "verify", Label: "`prep verify` (structure, every batch checksum, plan conformance)",
			Argv: []string{d.exe("prep"), "verify", "--jobs", "2", "--plan", planPath, dir}, Warmup: true},
		{ID: "read-shards", Label: "plain sequential read of the same shard files",
			Argv: []string{d.exe("peers"), "readfiles", dir}, Timing: Inner, Warmup: true},
	}
	size, err := dirSize(dir)
	if err != nil || size == 0 {
		for _, r := range rows {
			r.Err = "not measured: no shard set (the req-plain-snappy convert row did not run)"
		}
		return rows
	}
	rows[0].Bytes = size
	if !d.has("prep") {
		rows[0].Err = d.missing("cmd/prep")
	}
	return rows
}

func (d *driver) gpuloadRows(dir string) []*Row {
	rows := []*Row{
		{ID: "host", Label: "gpuload host backend (default options: pread into a ring, prefetch 4): every batch of epoch 0, ranks 0–7, in plan order; the consumer reads one word per 4 KiB",
			Argv: []string{d.exe("loadbench"), dir}, Timing: Inner, Warmup: true},
		{ID: "host-map", Label: "gpuload host backend with MapBlocks (views of the mapped shard instead of copies), same consumer",
			Argv: []string{d.exe("loadbench"), "-map", dir}, Timing: Inner, Warmup: true},
		{ID: "read-shards-2", Label: "plain sequential read of the same shard files",
			Argv: []string{d.exe("peers"), "readfiles", dir}, Timing: Inner, Warmup: true},
		{ID: "memcpy-2", Label: "memory copy, 1 core (same probe as the limits table, rerun here)",
			Argv: []string{d.exe("peers"), "memcpy", "-mb", "256", "-reps", "8"}, Timing: Inner},
	}
	if size, err := dirSize(dir); err != nil || size == 0 {
		rows[0].Err = "not measured: no shard set (the req-plain-snappy convert row did not run)"
		rows[1].Err, rows[2].Err = rows[0].Err, rows[0].Err
	}
	if !d.has("loadbench") && rows[0].Err == "" {
		rows[0].Err, rows[1].Err = d.missing("bench/cmd/loadbench"), d.missing("bench/cmd/loadbench")
	}
	return rows
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

// profile is a CPU profile summary of one stage that missed its target.
type profile struct {
	Title   string
	Command string
	Top     string
	Err     string
}

// profiles takes a CPU profile (in-process, bench/cmd/profbench) of each
// stage that missed its target and summarizes it with `go tool pprof -top`.
func (d *driver) profiles(rep *report, dir, planPath string) []profile {
	var out []profile
	for _, t := range rep.targets(dir, planPath) {
		if t.Met || t.Profile == nil {
			continue
		}
		p := profile{Title: t.Name}
		if !d.has("profbench") {
			p.Err = d.missing("bench/cmd/profbench")
			out = append(out, p)
			continue
		}
		prof := filepath.Join(d.work, t.ProfileName+".prof")
		args := append([]string{d.exe("profbench"), "-cpuprofile", prof}, t.Profile...)
		p.Command = strings.Join(append([]string{"bench/cmd/profbench"}, args[1:]...), " ")
		p.Command = strings.ReplaceAll(p.Command, d.root+"/", "")
		d.logf("profile %s: %s", t.Name, p.Command)
		if b, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			p.Err = fmt.Sprintf("profile run failed: %v: %s", err, oneLine(string(b)))
			out = append(out, p)
			continue
		}
		top, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "tool", "pprof", "-top", "-nodecount=18", d.exe("profbench"), prof).CombinedOutput()
		if err != nil {
			p.Err = fmt.Sprintf("pprof failed: %v: %s", err, oneLine(string(top)))
		}
		p.Top = string(top)
		out = append(out, p)
	}
	return out
}
