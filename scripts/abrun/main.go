// Command abrun measures two builds of prep against each other on one
// command line (scripts/bench-ab.sh): it runs them alternately, A B then B A
// (so drift of a shared machine falls on both alike), each run a separate
// process into an emptied output folder, and prints for each build the
// median and range of wall time, user+sys CPU time and peak RSS (the
// child's rusage), and B's medians relative to A's, as a Markdown table row.
//
// Usage: abrun -runs 7 -out DIR -label TEXT A_BIN B_BIN ARGS...
// where ARGS are prep's arguments without -o, which abrun adds (DIR/out).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// sample is one measured run.
type sample struct{ wall, cpu, rss float64 }

func main() {
	runs := flag.Int("runs", 7, "measured runs of each build")
	out := flag.String("out", "", "scratch directory for the output (emptied before each run)")
	label := flag.String("label", "", "row label")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("abrun: ")
	if flag.NArg() < 3 || *out == "" {
		log.Fatal("usage: abrun -runs N -out DIR -label TEXT A_BIN B_BIN ARGS...")
	}
	bins := flag.Args()[:2]
	args := flag.Args()[2:]
	dst := filepath.Join(*out, "out")
	var got [2][]sample
	run := func(b int) {
		if err := os.RemoveAll(dst); err != nil {
			log.Fatal(err)
		}
		cmd := exec.Command(bins[b], append(append([]string{}, args...), "-o", dst)...)
		cmd.Stderr = os.Stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			log.Fatalf("%s %v: %v", bins[b], args, err)
		}
		wall := time.Since(t0).Seconds()
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		got[b] = append(got[b], sample{wall, cpu, float64(ru.Maxrss) * 1024})
	}
	run(0) // warm-up of both, untimed: page cache as for the measured runs
	run(1)
	got[0], got[1] = nil, nil
	for i := 0; i < *runs; i++ {
		if i%2 == 0 {
			run(0)
			run(1)
		} else {
			run(1)
			run(0)
		}
	}
	os.RemoveAll(dst)
	med := func(s []sample, f func(sample) float64) (m, lo, hi float64) {
		v := make([]float64, len(s))
		for i, x := range s {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2], v[0], v[len(v)-1]
	}
	wall := func(s sample) float64 { return s.wall }
	cpu := func(s sample) float64 { return s.cpu }
	rss := func(s sample) float64 { return s.rss / (1 << 20) }
	cell := func(b int, f func(sample) float64, unit string, prec int) string {
		m, lo, hi := med(got[b], f)
		return fmt.Sprintf("%.*f%s (%.*f–%.*f)", prec, m, unit, prec, lo, prec, hi)
	}
	ratio := func(f func(sample) float64) string {
		a, _, _ := med(got[0], f)
		b, _, _ := med(got[1], f)
		return fmt.Sprintf("%.3f", b/a)
	}
	fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", *label,
		cell(0, wall, " s", 3), cell(1, wall, " s", 3), ratio(wall),
		cell(0, cpu, " s", 2), cell(1, cpu, " s", 2), ratio(cpu),
		cell(0, rss, " MiB", 0), cell(1, rss, " MiB", 0), ratio(rss))
}
