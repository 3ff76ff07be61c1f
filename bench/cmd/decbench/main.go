// Command decbench measures prep convert's decoding against DuckDB's scan
// of the same DuckDB-written Parquet file, in the same run, rounds
// alternated:
//
//   - the inputs: the bench's req-plain-snappy.parquet (bench/cmd/gendata)
//     rewritten by DuckDB (COPY ... (FORMAT parquet)) with snappy and with
//     zstd: 2 M rows, 11 columns, every column OPTIONAL, data pages V1 with
//     RLE definition levels, f0..f7 and label dictionary encoded, as DuckDB
//     writes them;
//   - DuckDB's decode-only scan: EXPLAIN ANALYZE SELECT * (every column)
//     and SELECT f0 (one column) over the file, SET threads = 2, the
//     query's "Total Time" (no process start-up);
//   - prep convert --json --jobs 2 of a one-epoch global-shuffle plan
//     (world size 8, global batch 8192) into fsynced shards: its
//     decode_seconds (stage 1: every column chunk decoded and its rows
//     staged) and its seconds (the whole convert, writes included), every
//     column (id, f0..f7 as one tensor, emb [16], label hashed), and f0
//     alone;
//   - CPU seconds (user + system) of each prep convert process, and of each
//     DuckDB process less the median of a `SELECT 1` process (Node.js and
//     DuckDB start-up): less moved by other jobs on a shared machine than
//     wall time;
//   - pqread alone: every column chunk of the file decoded by
//     pqread.File.ReadColumn on 2 goroutines, in a
//     child process (decbench scan FILE), its wall and CPU seconds: the
//     decoder against DuckDB's scan, without convert's staging and writes;
//   - the page cache's read rate: a plain sequential read of the file in
//     1 MiB reads (decbench read FILE);
//   - with -before, the same prep commands with a second binary (the
//     build before a change), alternated with -prep in every round.
//
// Each round runs every measurement once, in a rotating order reversed
// every other round (so the two builds alternate which runs first); the report
// gives medians and min-max over the rounds, the ratios of medians, and
// the load average (1 min) at the start and end of every round, and is
// written to -o (bench/decode-results.md).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prepml/prep/pqread"
)

const specAll = `# decbench: every column of the DuckDB-written bench file
tensors:
  - {name: id, column: id, dtype: I64}
  - {name: feat, columns: [f0, f1, f2, f3, f4, f5, f6, f7], dtype: F32, nulls: {fill: 0}}
  - {name: emb, column: emb, dtype: F32, shape: [16]}
  - {name: label, column: label, dtype: I64, bytes: {mode: hash, buckets: 1000}}
`

const specOne = `# decbench: one projected column
tensors:
  - {name: f0, column: f0, dtype: F32, nulls: {fill: 0}}
`

var (
	prep   = flag.String("prep", ".cache/bench/bin/prep", "prep binary")
	before = flag.String("before", "", "a second prep binary (the build before a change), alternated with -prep")
	src    = flag.String("src", ".cache/bench/data/req-plain-snappy.parquet", "the file DuckDB rewrites (bench/cmd/gendata)")
	dir    = flag.String("dir", ".cache/bench/decode", "work directory (the DuckDB-written files are kept)")
	duck   = flag.String("duckdb", ".cache/duckdb", "folder whose node_modules holds @duckdb/node-api")
	runs   = flag.Int("runs", 5, "rounds")
	out    = flag.String("o", "bench/decode-results.md", "Markdown file to write")
)

// measure is one row of the report: its samples, one per round.
type measure struct {
	name string
	cmd  string
	s    []float64
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("decbench: ")
	if len(os.Args) == 3 && os.Args[1] == "scan" {
		scan(os.Args[2])
		return
	}
	if len(os.Args) == 3 && os.Args[1] == "read" {
		readFile(os.Args[2])
		return
	}
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Fatal(err)
	}
	codecs := []string{"snappy", "zstd"}
	files := map[string]string{}
	for _, c := range codecs {
		f, _ := filepath.Abs(filepath.Join(*dir, "duck-"+c+".parquet"))
		files[c] = f
		if _, err := os.Stat(f); err == nil {
			continue
		}
		abs, _ := filepath.Abs(*src)
		duckQuery(fmt.Sprintf("COPY (SELECT * FROM read_parquet('%s')) TO '%s' (FORMAT parquet, COMPRESSION %s)", abs, f, c))
	}
	specs := map[string]string{"all": filepath.Join(*dir, "spec-all.yaml"), "one": filepath.Join(*dir, "spec-one.yaml")}
	os.WriteFile(specs["all"], []byte(specAll), 0o644)
	os.WriteFile(specs["one"], []byte(specOne), 0o644)
	plans := map[string]string{}
	for _, c := range codecs {
		plans[c] = filepath.Join(*dir, "plan-"+c+".json")
		cmd := exec.Command(*prep, "plan", "--source", files[c], "--seed", "1", "--epochs", "1", "--global-batch", "8192",
			"--world-size", "8", "--workers", "1", "--shuffle", "global", "--remainder", "drop", "-o", plans[c], "-q")
		if b, err := cmd.CombinedOutput(); err != nil {
			log.Fatalf("prep plan: %v: %s", err, b)
		}
	}
	bins := []string{*prep}
	if *before != "" {
		bins = append(bins, *before)
	}
	label := func(bin string) string {
		if bin == *before {
			return "before"
		}
		return "prep"
	}
	// The measurements of one round, each a function run once per round.
	type step struct {
		m   []*measure
		run func() []float64
	}
	var steps []step
	rows := map[string]*measure{}
	row := func(key, name, cmd string) *measure {
		m := &measure{name: name, cmd: cmd}
		rows[key] = m
		return m
	}
	for _, c := range codecs {
		for _, proj := range []string{"all", "one"} {
			sel, what := "*", "every column"
			if proj == "one" {
				sel, what = "f0", "f0"
			}
			q := fmt.Sprintf("SET threads = 2; EXPLAIN ANALYZE SELECT %s FROM read_parquet('%s')", sel, files[c])
			m := row("duck/"+c+"/"+proj, fmt.Sprintf("DuckDB scan, %s, %s", what, c), "`"+strings.ReplaceAll(q, files[c], "duck-"+c+".parquet")+"`")
			mc := row("cpu/duck/"+c+"/"+proj, fmt.Sprintf("DuckDB scan CPU s, net of start-up, %s, %s", what, c), "the process's user+sys less the median of `SET threads = 2; SELECT 1`")
			steps = append(steps, step{[]*measure{m, mc}, func() []float64 {
				t, cpu := duckTotal(q)
				return []float64{t, cpu}
			}})
			if proj == "all" {
				rd := row("read/"+c, fmt.Sprintf("plain sequential read of the file (page cache), %s", c), "`decbench read duck-"+c+".parquet` (1 MiB reads)")
				steps = append(steps, step{[]*measure{rd}, func() []float64 {
					o, err := exec.Command(os.Args[0], "read", files[c]).Output()
					if err != nil {
						log.Fatalf("decbench read: %v", err)
					}
					v, _ := strconv.ParseFloat(strings.TrimSpace(string(o)), 64)
					return []float64{v}
				}})
				sm := row("scan/"+c, fmt.Sprintf("pqread scan (every column chunk, 2 goroutines), %s", c), "`decbench scan duck-"+c+".parquet`")
				smc := row("cpu/scan/"+c, fmt.Sprintf("pqread scan CPU s (whole process), %s", c), "same, user+sys")
				steps = append(steps, step{[]*measure{sm, smc}, func() []float64 {
					cmd := exec.Command(os.Args[0], "scan", files[c])
					o, err := cmd.Output()
					if err != nil {
						log.Fatalf("decbench scan: %v", err)
					}
					v, _ := strconv.ParseFloat(strings.TrimSpace(string(o)), 64)
					return []float64{v, cpuOf(cmd)}
				}})
			}
			for _, bin := range bins {
				outDir := filepath.Join(*dir, "out-"+label(bin))
				args := []string{"convert", "--plan", plans[c], "--spec", specs[proj], "-o", outDir, "--jobs", "2", "--json", "-q"}
				dec := row(label(bin)+"/dec/"+c+"/"+proj, fmt.Sprintf("%s convert decode_seconds, %s, %s", label(bin), what, c),
					"`prep "+strings.Join(args, " ")+"`")
				whole := row(label(bin)+"/all/"+c+"/"+proj, fmt.Sprintf("%s convert seconds (whole, fsynced), %s, %s", label(bin), what, c), "same")
				cpu := row("cpu/"+label(bin)+"/"+c+"/"+proj, fmt.Sprintf("%s convert CPU s (whole process), %s, %s", label(bin), what, c), "same, user+sys")
				steps = append(steps, step{[]*measure{dec, whole, cpu}, func() []float64 {
					os.RemoveAll(outDir)
					cmd := exec.Command(bin, args...)
					var stdout, stderr bytes.Buffer
					cmd.Stdout, cmd.Stderr = &stdout, &stderr
					if err := cmd.Run(); err != nil {
						log.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, stderr.String())
					}
					var sum struct {
						Seconds       float64 `json:"seconds"`
						DecodeSeconds float64 `json:"decode_seconds"`
					}
					if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
						log.Fatalf("convert --json: %v: %.200s", err, stdout.String())
					}
					os.RemoveAll(outDir)
					return []float64{sum.DecodeSeconds, sum.Seconds, cpuOf(cmd)}
				}})
			}
		}
	}
	base := row("cpu/base", "Node.js and DuckDB start-up CPU s", "`SET threads = 2; SELECT 1`")
	steps = append(steps, step{[]*measure{base}, func() []float64 {
		_, cpu := duckQuery("SET threads = 2; SELECT 1")
		return []float64{cpu}
	}})
	var loads []string
	start := time.Now()
	for r := 0; r < *runs; r++ {
		l0 := loadAvg()
		// A rotating order, reversed every other round, so that no
		// measurement always follows the same other one (a process run
		// right after another meets the memory that one freed).
		order := make([]step, 0, len(steps))
		for k := range steps {
			order = append(order, steps[(k+r)%len(steps)])
		}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, st := range order {
			for i, v := range st.run() {
				st.m[i].s = append(st.m[i].s, v)
			}
		}
		loads = append(loads, l0+"–"+loadAvg())
	}
	startup := median(base.s)
	for k, m := range rows {
		if strings.HasPrefix(k, "cpu/duck/") {
			for i := range m.s {
				m.s[i] -= startup
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## Parquet decoding against DuckDB's scan\n\n")
	fmt.Fprintf(&b, "`bench/cmd/decbench` (`make bench`), %s: the bench's req-plain-snappy.parquet rewritten by DuckDB (2 M rows, 11 columns, all OPTIONAL, data pages V1, f0..f7 and label dictionary encoded), snappy and zstd. %d rounds, every measurement once per round in a rotating order, reversed every other round; median (min–max) of the rounds, ratios of medians. DuckDB at 2 threads, its EXPLAIN ANALYZE Total Time (no start-up); prep convert --jobs 2 in its own process, its --json decode_seconds (stage 1) and seconds (the whole convert with fsynced shard writes). Load average (1 min) at the start–end of each round: %s. Wall %.0f s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), *runs, strings.Join(loads, ", "), time.Since(start).Seconds())
	fmt.Fprintf(&b, "| measurement | median s (min–max) | command |\n|---|---|---|\n")
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m := rows[k]
		fmt.Fprintf(&b, "| %s | %.3f (%.3f–%.3f) | %s |\n", m.name, median(m.s), slices.Min(m.s), slices.Max(m.s), m.cmd)
	}
	fmt.Fprintf(&b, "\n| ratio (of medians) | snappy | zstd |\n|---|---|---|\n")
	ratio := func(a, c string) string {
		x, y := rows[a], rows[c]
		if x == nil || y == nil {
			return "–"
		}
		return fmt.Sprintf("%.2fx", median(x.s)/median(y.s))
	}
	for _, bin := range bins {
		l := label(bin)
		fmt.Fprintf(&b, "| %s decode_seconds / DuckDB scan, every column (goal <= 1.5x) | %s | %s |\n", l, ratio(l+"/dec/snappy/all", "duck/snappy/all"), ratio(l+"/dec/zstd/all", "duck/zstd/all"))
		fmt.Fprintf(&b, "| %s whole convert / DuckDB scan, every column (goal <= 2.5x) | %s | %s |\n", l, ratio(l+"/all/snappy/all", "duck/snappy/all"), ratio(l+"/all/zstd/all", "duck/zstd/all"))
		fmt.Fprintf(&b, "| %s whole convert / DuckDB scan, f0 alone (goal <= 3x) | %s | %s |\n", l, ratio(l+"/all/snappy/one", "duck/snappy/one"), ratio(l+"/all/zstd/one", "duck/zstd/one"))
		fmt.Fprintf(&b, "| %s decode_seconds / DuckDB scan, f0 alone | %s | %s |\n", l, ratio(l+"/dec/snappy/one", "duck/snappy/one"), ratio(l+"/dec/zstd/one", "duck/zstd/one"))
	}
	for _, bin := range bins {
		l := label(bin)
		fmt.Fprintf(&b, "| %s convert CPU / DuckDB scan CPU, every column | %s | %s |\n", l, ratio("cpu/"+l+"/snappy/all", "cpu/duck/snappy/all"), ratio("cpu/"+l+"/zstd/all", "cpu/duck/zstd/all"))
		fmt.Fprintf(&b, "| %s convert CPU / DuckDB scan CPU, f0 alone | %s | %s |\n", l, ratio("cpu/"+l+"/snappy/one", "cpu/duck/snappy/one"), ratio("cpu/"+l+"/zstd/one", "cpu/duck/zstd/one"))
	}
	for _, c := range codecs {
		if m := rows["read/"+c]; m != nil {
			st, _ := os.Stat(files[c])
			fmt.Fprintf(&b, "| page-cache read rate (plain read of the %s file) | %.2f GB/s | |\n", c, float64(st.Size())/median(m.s)/1e9)
		}
	}
	fmt.Fprintf(&b, "| pqread scan / DuckDB scan, every column | %s | %s |\n", ratio("scan/snappy", "duck/snappy/all"), ratio("scan/zstd", "duck/zstd/all"))
	fmt.Fprintf(&b, "| pqread scan CPU / DuckDB scan CPU, every column | %s | %s |\n", ratio("cpu/scan/snappy", "cpu/duck/snappy/all"), ratio("cpu/scan/zstd", "cpu/duck/zstd/all"))
	if *before != "" {
		fmt.Fprintf(&b, "| prep / before, convert CPU, every column | %s | %s |\n", ratio("cpu/prep/snappy/all", "cpu/before/snappy/all"), ratio("cpu/prep/zstd/all", "cpu/before/zstd/all"))
		fmt.Fprintf(&b, "| prep / before, convert CPU, f0 alone | %s | %s |\n", ratio("cpu/prep/snappy/one", "cpu/before/snappy/one"), ratio("cpu/prep/zstd/one", "cpu/before/zstd/one"))
		fmt.Fprintf(&b, "| prep / before, decode_seconds, every column | %s | %s |\n", ratio("prep/dec/snappy/all", "before/dec/snappy/all"), ratio("prep/dec/zstd/all", "before/dec/zstd/all"))
		fmt.Fprintf(&b, "| prep / before, whole convert, every column | %s | %s |\n", ratio("prep/all/snappy/all", "before/all/snappy/all"), ratio("prep/all/zstd/all", "before/all/zstd/all"))
		fmt.Fprintf(&b, "| prep / before, whole convert, f0 alone | %s | %s |\n", ratio("prep/all/snappy/one", "before/all/snappy/one"), ratio("prep/all/zstd/one", "before/all/zstd/one"))
	}
	fmt.Print(b.String())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

func median(s []float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// duckQuery runs sql in a fresh DuckDB (test/duckdb/query.mjs) and returns
// its output and the process's CPU seconds (user + system).
func duckQuery(sql string) (string, float64) {
	cmd := exec.Command("node", "test/duckdb/query.mjs", *duck)
	cmd.Stdin = strings.NewReader(sql)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	o, err := cmd.Output()
	if err != nil {
		log.Fatalf("duckdb: %v: %s", err, stderr.String())
	}
	return string(o), cpuOf(cmd)
}

// cpuOf returns the user + system CPU seconds of a finished command.
func cpuOf(cmd *exec.Cmd) float64 {
	return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
}

var totalTime = regexp.MustCompile(`Total Time: ([0-9.]+)s`)

// duckTotal runs an EXPLAIN ANALYZE and returns its Total Time in seconds
// and the CPU seconds of its process.
func duckTotal(sql string) (float64, float64) {
	o, cpu := duckQuery(sql)
	m := totalTime.FindStringSubmatch(o)
	if m == nil {
		log.Fatalf("no Total Time in DuckDB's EXPLAIN ANALYZE: %.300s", o)
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v, cpu
}

// loadAvg returns the 1-minute load average, "?" where unknown.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// scan decodes every column chunk of path with pqread on 2 goroutines and
// prints the wall seconds it took.
func scan(path string) {
	start := time.Now()
	f, err := pqread.Open(path, pqread.Limits{})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	type chunk struct{ rg, c int }
	cols := f.Columns()
	ch := make(chan chunk)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ch {
				if _, err := f.ReadColumn(k.rg, cols[k.c]); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	for rg := range f.RowGroups() {
		for c := range cols {
			ch <- chunk{rg, c}
		}
	}
	close(ch)
	wg.Wait()
	fmt.Println(time.Since(start).Seconds())
}

// readFile reads path from start to end in 1 MiB reads and prints the wall
// seconds it took.
func readFile(path string) {
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		if n == 0 || err != nil {
			break
		}
	}
	fmt.Println(time.Since(start).Seconds())
}
