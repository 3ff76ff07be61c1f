// Command filterbench measures prep plan with a row filter against DuckDB
// evaluating the same predicate, in the same run, on a generated data set
// (default 20 M rows, 10 columns, 4 files of 5 M rows in row groups of 1 M):
//
//   - prep plan --sources with one source filtered by the predicate (wall
//     and CPU time, median of -runs; the plan's own filter_bytes_read);
//   - DuckDB SELECT count(*) ... WHERE <predicate> over the same files:
//     the query's time as DuckDB's EXPLAIN ANALYZE reports it ("Total
//     Time", without the process start-up), and the node process's wall
//     time;
//   - the filter columns' compressed size (DuckDB parquet_metadata), the
//     floor of what any reader must read.
//
// The -runs rounds alternate: each runs prep once, then DuckDB. It writes
// a Markdown section to -o (bench/filter-results.md) with the load average
// at the end of the run.
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
	"time"

	"github.com/parquet-go/parquet-go"
)

type row struct {
	ID      int64   `parquet:"id"`
	Lang    string  `parquet:"lang,dict"`
	Quality float64 `parquet:"quality"`
	Score   float32 `parquet:"score"`
	N       int32   `parquet:"n"`
	Flag    bool    `parquet:"flag"`
	A       int64   `parquet:"a"`
	B       float64 `parquet:"b"`
	C       string  `parquet:"c"`
	D       int64   `parquet:"d"`
}

const predicate = "lang = 'en' AND quality >= 0.5"

func main() {
	prep := flag.String("prep", ".cache/bench/bin/prep", "prep binary")
	dir := flag.String("dir", ".cache/bench/filter", "data directory (generated once)")
	rows := flag.Int("rows", 20_000_000, "rows in all")
	runs := flag.Int("runs", 3, "runs of each measurement (the median is reported)")
	duck := flag.String("duckdb", ".cache/duckdb", "folder whose node_modules holds @duckdb/node-api")
	out := flag.String("o", "bench/filter-results.md", "Markdown file to write")
	flag.Parse()
	data := filepath.Join(*dir, fmt.Sprintf("rows-%d", *rows))
	if err := generate(data, *rows); err != nil {
		log.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(data, "*.parquet"))
	abs, _ := filepath.Abs(data)
	srcFile := filepath.Join(*dir, "sources.yaml")
	os.WriteFile(srcFile, []byte(fmt.Sprintf("sources:\n  - name: web\n    path: %s/\n    filter: %q\n", abs, predicate)), 0o644)
	list := "["
	for i, f := range files {
		if i > 0 {
			list += ", "
		}
		list += "'" + f + "'"
	}
	list += "]"
	duckRun := func(sql string) (time.Duration, string) {
		start := time.Now()
		cmd := exec.Command("node", "test/duckdb/query.mjs", *duck)
		cmd.Stdin = strings.NewReader(sql)
		o, err := cmd.Output()
		if err != nil {
			log.Fatalf("duckdb: %v", err)
		}
		return time.Since(start), string(o)
	}
	var sum struct {
		Mixture struct {
			Sources []struct {
				Rows            uint64 `json:"rows"`
				FilterBytesRead int64  `json:"filter_bytes_read"`
			} `json:"sources"`
		} `json:"mixture"`
	}
	// Rounds alternate prep and DuckDB, so that a change in the machine's
	// load during the run moves both sides of the ratio alike.
	var planTimes, planCPU, duckTimes, queryTimes []time.Duration
	var ratios []float64 // each round's prep wall time / DuckDB query time
	var count string
	total := regexp.MustCompile(`Total Time: ([0-9.]+)s`)
	for i := 0; i < *runs; i++ {
		start := time.Now()
		cmd := exec.Command(*prep, "plan", "--sources", srcFile, "--global-batch", "1024", "-o", filepath.Join(*dir, "plan.json"), "--json", "-q", "--progress", "never")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			log.Fatalf("prep plan: %v\n%s", err, stderr.String())
		}
		pt := time.Since(start)
		planTimes = append(planTimes, pt)
		planCPU = append(planCPU, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		if err := json.Unmarshal(stdout.Bytes(), &sum); err != nil {
			log.Fatal(err)
		}
		d, o := duckRun(fmt.Sprintf("SELECT count(*) FROM read_parquet(%s) WHERE %s", list, predicate))
		duckTimes, count = append(duckTimes, d), o
		_, o = duckRun(fmt.Sprintf("EXPLAIN ANALYZE SELECT count(*) FROM read_parquet(%s) WHERE %s", list, predicate))
		m := total.FindStringSubmatch(o)
		if m == nil {
			log.Fatalf("no Total Time in DuckDB's EXPLAIN ANALYZE: %.300s", o)
		}
		sec, _ := strconv.ParseFloat(m[1], 64)
		qt := time.Duration(sec * float64(time.Second))
		queryTimes = append(queryTimes, qt)
		ratios = append(ratios, float64(pt)/float64(qt))
	}
	_, comp := duckRun(fmt.Sprintf("SELECT sum(total_compressed_size) FROM parquet_metadata(%s) WHERE path_in_schema IN ('lang', 'quality')", list))
	var cres struct{ Rows [][]json.Number }
	json.Unmarshal([]byte(comp), &cres)
	var nres struct{ Rows [][]json.Number }
	json.Unmarshal([]byte(count), &nres)
	compressed, _ := cres.Rows[0][0].Int64()
	duckCount, _ := nres.Rows[0][0].Int64()
	src := sum.Mixture.Sources[0]
	if uint64(duckCount) != src.Rows {
		log.Fatalf("prep selected %d rows, DuckDB counts %d", src.Rows, duckCount)
	}
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	pt, pc, dt, qt := med(planTimes), med(planCPU), med(duckTimes), med(queryTimes)
	slices.Sort(ratios)
	rr := ratios[len(ratios)/2]
	load, _ := os.ReadFile("/proc/loadavg")
	var b strings.Builder
	fmt.Fprintf(&b, "## Plan with a row filter\n\n")
	fmt.Fprintf(&b, "`bench/cmd/filterbench` (`make bench`): %d rows, 10 columns, %d files, row groups of 1 M rows; filter `%s` selects %d rows (DuckDB agrees). Medians of %d rounds on this machine, each round prep then DuckDB; load average (1, 5, 15 min) at the end: %s.\n\n", *rows, len(files), predicate, src.Rows, *runs, strings.Join(strings.Fields(string(load))[:3], ", "))
	fmt.Fprintf(&b, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| `prep plan --sources` (filter, footers, plan file) | %.2f s |\n", pt.Seconds())
	fmt.Fprintf(&b, "| the same, CPU (user + system) | %.2f s |\n", pc.Seconds())
	fmt.Fprintf(&b, "| DuckDB `SELECT count(*) ... WHERE` (EXPLAIN ANALYZE Total Time) | %.2f s |\n", qt.Seconds())
	fmt.Fprintf(&b, "| DuckDB the same, whole node process (start-up included) | %.2f s |\n", dt.Seconds())
	fmt.Fprintf(&b, "| ratio prep process / DuckDB query time (goal <= 2) | %.2fx |\n", pt.Seconds()/qt.Seconds())
	fmt.Fprintf(&b, "| median of the rounds' ratios, prep process / DuckDB query time | %.2fx |\n", rr)
	fmt.Fprintf(&b, "| ratio prep process / DuckDB process | %.2fx |\n", pt.Seconds()/dt.Seconds())
	fmt.Fprintf(&b, "| bytes prep read for the filter | %d |\n", src.FilterBytesRead)
	fmt.Fprintf(&b, "| compressed size of the filter columns (lang, quality) | %d |\n", compressed)
	fmt.Fprintf(&b, "| ratio bytes read / compressed size (goal <= 1.1) | %.3fx |\n", float64(src.FilterBytesRead)/float64(compressed))
	fmt.Print(b.String())
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}

// generate writes rows rows into 4 files under dir, unless done before.
func generate(dir string, rows int) error {
	if _, err := os.Stat(dir + ".done"); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	langs := []string{"en", "fr", "de", "es", "zh", "en", "ja", "en"}
	per := (rows + 3) / 4
	x := uint64(0x9E3779B97F4A7C15)
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
	for f := 0; f < 4; f++ {
		fh, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%d.parquet", f)))
		if err != nil {
			return err
		}
		w := parquet.NewGenericWriter[row](fh, parquet.MaxRowsPerRowGroup(1_000_000))
		buf := make([]row, 0, 8192)
		for i := f * per; i < min(rows, (f+1)*per); i++ {
			r := next()
			buf = append(buf, row{ID: int64(i), Lang: langs[r%8], Quality: float64(r>>11%1000) / 1000, Score: float32(r>>21%100) / 7,
				N: int32(r >> 31 % 100), Flag: r>>40&1 == 1, A: int64(r >> 3), B: float64(r>>12) / 3, C: fmt.Sprintf("c%06d", r>>45%100000), D: int64(i) * 3})
			if len(buf) == cap(buf) {
				if _, err := w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
	}
	return os.WriteFile(dir+".done", nil, 0o644) // beside the data, which holds only Parquet files
}
