// Command packbench measures packing (prep plan --pack, PLAN.md §12) and
// writes bench/notes/packing.md, which BENCHMARKS.md includes in its
// Jagged tensors section (make bench runs it before benchrun):
//
//   - efficiency: the padding share of the slots of plan.Pack on document
//     lengths drawn from a log-normal law (σ = 1, clamped to [1, 16384];
//     means 600 and 100; rows of 2048 and 8192 tokens), with the default
//     window, and the packing time;
//   - cost: on one Parquet file of about -tokens tokens (the same law,
//     mean 600, written by DuckDB), the wall time of `prep plan --pack
//     tokens:2048` against DuckDB reading the token column once (`SELECT
//     sum(len(tokens))`) in the same run, and of `prep convert` of the
//     packed plan against the unpacked jagged convert of the same file, in
//     tokens per second.
//
// DuckDB runs through Node.js (test/duckdb/query.mjs with the module in
// .cache/duckdb, as the tests use it); without it the cost part says not
// measured. Usage:
//
//	packbench -prep .cache/bench/bin/prep -work .cache/bench/pack -o bench/notes/packing.md
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prepml/prep/plan"
)

func main() {
	prep := flag.String("prep", ".cache/bench/bin/prep", "prep binary")
	work := flag.String("work", ".cache/bench/pack", "work directory (the token file is cached there)")
	out := flag.String("o", "bench/notes/packing.md", "markdown file to write")
	tokens := flag.Float64("tokens", 1e8, "tokens in the cost measurement's file")
	runs := flag.Int("runs", 3, "runs per timed command (median reported)")
	flag.Parse()
	if err := os.MkdirAll(*work, 0o755); err != nil {
		fail(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### Packed token rows (prep plan --pack)\n\n")
	fmt.Fprintf(&b, "Written by `bench/cmd/packbench` (run by `make bench`) on %s, %d logical CPUs; times are medians of %d runs.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), *runs)
	start := loadavg()
	efficiency(&b)
	cost(&b, *prep, *work, *tokens, *runs)
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) at start: %s; at end: %s (other jobs share the machine: compare the ratios of one run).\n", start, loadavg())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "packbench: wrote %s\n", *out)
}

// loadavg returns /proc/loadavg's three load averages, or "unknown".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "packbench:", err)
	os.Exit(1)
}

// lognormal returns the token counts of documents holding about total
// tokens, drawn with a fixed 64-bit LCG (Knuth's MMIX constants) and
// Box–Muller: exp(ln(mean) − 1/2 + z), rounded, clamped to [1, maxLen].
func lognormal(total, mean, maxLen float64) []uint32 {
	x := uint64(42)
	next := func() float64 {
		x = x*6364136223846793005 + 1442695040888963407
		return float64(x>>11) / (1 << 53)
	}
	var out []uint32
	for sum := 0.0; sum < total; {
		u1, u2 := next(), next()
		z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
		v := max(1, min(maxLen, math.Round(math.Exp(math.Log(mean)-0.5+z))))
		out = append(out, uint32(v))
		sum += v
	}
	return out
}

func efficiency(b *strings.Builder) {
	fmt.Fprintf(b, "Efficiency: plan.Pack (shuffle global, EOD appended, split chunk, default window of %d documents) on 10^8 tokens of log-normal document lengths (σ = 1, max 16,384). Target: padding ≤ 2 %% of slots.\n\n", plan.DefaultPackWindow)
	fmt.Fprintf(b, "| mean length | L | documents | packed rows | pad slots | padding | pack time | status |\n|---|---|---|---|---|---|---|---|\n")
	eod := int64(0)
	for _, c := range []struct {
		mean float64
		l    int
	}{{600, 2048}, {600, 8192}, {100, 2048}} {
		lengths := lognormal(1e8, c.mean, 16384)
		var times []time.Duration
		var rec *plan.Packing
		for range 3 {
			t0 := time.Now()
			var err error
			if _, rec, err = plan.Pack(context.Background(), lengths, plan.PackOptions{Column: "tokens", Length: c.l, EOD: &eod}, 7, true); err != nil {
				fail(err)
			}
			times = append(times, time.Since(t0))
		}
		pad := 100 * float64(rec.PadSlots) / float64(rec.Rows*uint64(c.l))
		status := "met"
		if pad > 2 {
			status = "**missed**"
		}
		fmt.Fprintf(b, "| %.0f | %d | %d | %d | %d | %.3f %% | %.2f s | %s |\n", c.mean, c.l, len(lengths), rec.Rows, rec.PadSlots, pad, median(times).Seconds(), status)
	}
	b.WriteString("\n")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// timed runs cmd runs times and returns the median wall time and the
// last run's stdout.
func timed(runs int, name string, args ...string) (time.Duration, string, error) {
	var ds []time.Duration
	var out []byte
	for range runs {
		cmd := exec.Command(name, args...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
		}
		ds = append(ds, time.Since(t0))
		out = stdout.Bytes()
	}
	return median(ds), string(out), nil
}

func cost(b *strings.Builder, prep, work string, tokens float64, runs int) {
	modules, _ := filepath.Abs(".cache/duckdb")
	script, _ := filepath.Abs("test/duckdb/query.mjs")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(modules, "node_modules", "@duckdb", "node-api")); err != nil || serr != nil {
		fmt.Fprintf(b, "Cost: not measured (DuckDB through Node.js is not installed: `make duckdb`).\n\n")
		return
	}
	duck := func(sql string) (time.Duration, string, error) {
		f := filepath.Join(work, "q.sql")
		if err := os.WriteFile(f, []byte(sql), 0o644); err != nil {
			return 0, "", err
		}
		return timed(runs, "sh", "-c", fmt.Sprintf("%q %q %q < %q", node, script, modules, f))
	}
	src := filepath.Join(work, "src")
	file := filepath.Join(src, "tokens.parquet")
	docs := int(tokens / 604)
	if _, err := os.Stat(file); err != nil {
		os.MkdirAll(src, 0o755)
		fmt.Fprintf(os.Stderr, "packbench: writing %s (%d documents) with DuckDB\n", file, docs)
		u := func(salt int) string {
			return fmt.Sprintf("((hash(i * 2 + %d) %% 1000000007)::DOUBLE / 1000000007)", salt)
		}
		sql := fmt.Sprintf(`SET threads = 2;
CREATE TABLE d AS SELECT i, greatest(1, least(16384, round(exp(ln(600) - 0.5 + sqrt(-2 * ln(1 - %s)) * cos(2 * pi() * %s)))))::INT AS n FROM range(%d) r(i);
COPY (SELECT i AS id, list_transform(range(n), k -> ((i * 7 + k * 13) %% 50000)::INT) AS tokens FROM d ORDER BY i) TO '%s' (FORMAT parquet, ROW_GROUP_SIZE 8192);
SELECT 1`, u(0), u(1), docs, file)
		runsWas := runs
		runs = 1
		if _, _, err := duck(sql); err != nil {
			fail(err)
		}
		runs = runsWas
	}
	d0, _, err := duck("SELECT 1")
	if err != nil {
		fail(err)
	}
	dq, dout, err := duck(fmt.Sprintf("SELECT sum(len(tokens))::BIGINT AS t, count(*) AS d FROM read_parquet('%s')", file))
	if err != nil {
		fail(err)
	}
	var res struct {
		Rows [][]json.Number `json:"rows"`
	}
	if err := json.Unmarshal([]byte(dout), &res); err != nil || len(res.Rows) != 1 {
		fail(fmt.Errorf("duckdb result %q: %v", dout, err))
	}
	total, _ := res.Rows[0][0].Int64()
	nd, _ := res.Rows[0][1].Int64()
	fi, _ := os.Stat(file)
	fmt.Fprintf(b, "Cost, on `%s` (written by DuckDB: %d documents, %d tokens (%s), the same law with mean 600; %.0f MB, row groups of 8,192 documents, snappy, data pages V1); every command in the same run:\n\n",
		filepath.Base(file), nd, total, humanTokens(float64(total)), float64(fi.Size())/1e6)
	pplan := filepath.Join(work, "plan-packed.json")
	uplan := filepath.Join(work, "plan-jagged.json")
	tp, pout, err := timed(runs, prep, "plan", "--source", src, "--global-batch", "8", "--pack", "tokens:2048", "--pack-eod", "0", "-o", pplan, "--json", "-q")
	if err != nil {
		fail(err)
	}
	var ps struct {
		Packing plan.Packing `json:"packing"`
	}
	json.Unmarshal([]byte(pout), &ps)
	tu, _, err := timed(runs, prep, "plan", "--source", src, "--global-batch", "27", "-o", uplan, "-q")
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(b, "| measurement | command | median s | tokens/s | same-run ratio |\n|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| Node.js and DuckDB start, `SELECT 1` | `node test/duckdb/query.mjs` | %.3f | | |\n", d0.Seconds())
	dq -= d0 // the read itself, net of the start
	fmt.Fprintf(b, "| DuckDB reads the token column once, net of its start | `SELECT sum(len(tokens)), count(*) FROM read_parquet(...)` minus the row above | %.3f | %s | 1.00x |\n", dq.Seconds(), humanTokens(float64(total)/dq.Seconds()))
	fmt.Fprintf(b, "| `prep plan --pack` (lengths from levels, packing, epoch digest) | `prep plan --source DIR --global-batch 8 --pack tokens:2048 --pack-eod 0` | %.3f | %s | %.2fx DuckDB's time |\n", tp.Seconds(), humanTokens(float64(total)/tp.Seconds()), tp.Seconds()/dq.Seconds())
	fmt.Fprintf(b, "| `prep plan` without packing (footers only) | `prep plan --source DIR --global-batch 27` | %.3f | | %.2fx |\n", tu.Seconds(), tu.Seconds()/dq.Seconds())
	for _, c := range []struct {
		name, plan, tensor string
	}{{"`prep convert` of the packed plan (tokens, segment ids, positions, cu_seqlens)", pplan, "tokens=tokens:I32"},
		{"`prep convert` of the unpacked plan, tokens as a jagged tensor (global batch 27 documents ≈ 8 rows of 2,048)", uplan, "tokens=tokens:I32:jagged"}} {
		outDir := filepath.Join(work, "out")
		var ds []time.Duration
		for range runs {
			os.RemoveAll(outDir)
			d, _, err := timed(1, prep, "convert", "--plan", c.plan, "--tensor", c.tensor, "-o", outDir, "-q")
			if err != nil {
				fail(err)
			}
			ds = append(ds, d)
		}
		os.RemoveAll(outDir)
		t := median(ds)
		fmt.Fprintf(b, "| %s | `prep convert --plan %s --tensor %s` | %.3f | %s | %.2fx DuckDB's time |\n", c.name, filepath.Base(c.plan), c.tensor, t.Seconds(), humanTokens(float64(total)/t.Seconds()), t.Seconds()/dq.Seconds())
	}
	pk := ps.Packing
	fmt.Fprintf(b, "\nThe packed plan of this file: %d rows of 2,048 from %d documents, %d tokens with EOD, %d pad slots (%.3f %% padding). Tokens/s counts the file's tokens (EOD not included) over the wall time.\n\n",
		pk.Rows, pk.Documents, pk.Tokens, pk.PadSlots, 100*float64(pk.PadSlots)/float64(max(1, pk.Rows*2048)))
}

func humanTokens(x float64) string {
	switch {
	case x >= 1e9:
		return fmt.Sprintf("%.2f G", x/1e9)
	case x >= 1e6:
		return fmt.Sprintf("%.1f M", x/1e6)
	}
	return fmt.Sprintf("%.0f", x)
}
