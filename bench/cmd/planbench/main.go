// Command planbench measures the plan package's permutation on one core and
// prints a result line (bench/internal/result):
//
//	planbench perm      [-n N] [-count C]   plan.Perm.Apply over C indices of an N-element permutation
//	planbench rankbatch [-n N] [-count C] [-shuffle global|blocks] [-window K]
//	                                         Plan.RankBatch (world size 1) producing C ids
//
// rankbatch first builds the plan with plan.New (untimed, but its seconds are
// reported in the result's extra: New computes the O(N) epoch digest).
//
// The C indices are taken as 50 contiguous runs spread evenly over [0, N), so
// the sample covers the whole domain (cycle-walking included) without a full
// pass over N = 10^9. bytes in the result is 8 per index (one uint64 id).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"time"

	"github.com/prepml/prep/bench/internal/result"
	"github.com/prepml/prep/plan"
)

const segments = 50

func main() {
	log.SetFlags(0)
	log.SetPrefix("planbench: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: planbench perm|rankbatch [-n N] [-count C]")
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	n := fl.Uint64("n", 1_000_000_000, "permutation size N")
	count := fl.Uint64("count", 50_000_000, "indices to produce")
	seed := fl.Uint64("seed", 1, "seed")
	shuffle := fl.String("shuffle", string(plan.ShuffleGlobal), "rankbatch: shuffle mode, global or blocks")
	window := fl.Int("window", 16, "rankbatch: row groups per window with -shuffle blocks")
	fl.Parse(os.Args[2:])
	runtime.GOMAXPROCS(1)
	switch os.Args[1] {
	case "perm":
		perm(*n, *count, *seed)
	case "rankbatch":
		if *shuffle != string(plan.ShuffleBlocks) {
			*window = 0
		}
		if err := rankBatch(*n, *count, *seed, *shuffle, *window); err != nil {
			log.Fatal(err)
		}
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

func perm(n, count, seed uint64) {
	p := plan.NewPerm(n, "global", seed, 0, 0)
	per := count / segments
	var sum uint64
	start := time.Now()
	for s := range uint64(segments) {
		lo := s * (n / segments)
		for q := lo; q < lo+per; q++ {
			sum += p.Apply(q)
		}
	}
	sec := time.Since(start).Seconds()
	result.Print(result.Result{Rows: int64(per * segments), Bytes: int64(per*segments) * 8, Seconds: sec, Checksum: sum,
		Extra: fmt.Sprintf("N=%d, %d runs of %d indices", n, segments, per)})
}

func rankBatch(n, count, seed uint64, shuffle string, window int) error {
	const rowsPerGroup = 1_000_000
	const g = 65536
	groups := make([]int64, 0, n/rowsPerGroup+1)
	for left := n; left > 0; left -= min(left, rowsPerGroup) {
		groups = append(groups, int64(min(left, rowsPerGroup)))
	}
	src := plan.Source{Root: "/synthetic", Files: []plan.SourceFile{{
		Path: "synthetic.parquet", Size: 1 << 40,
		FooterSHA256: "0000000000000000000000000000000000000000000000000000000000000000",
		RowGroups:    groups,
	}}}
	t0 := time.Now()
	p, err := plan.New(src, plan.Config{Seed: seed, Epochs: 1, GlobalBatch: g, WorldSize: 1, Workers: 1,
		Shuffle: plan.Shuffle(shuffle), Window: window, Remainder: plan.RemainderDrop})
	if err != nil {
		return err
	}
	newSec := time.Since(t0).Seconds()
	steps := p.Steps()
	perSeg := max(1, int(count/segments/g))
	dst := make([]uint64, 0, g)
	var sum uint64
	var ids int64
	start := time.Now()
	for s := range segments {
		lo := s * (steps / segments)
		for k := lo; k < lo+perSeg && k < steps; k++ {
			out, _, err := p.RankBatch(0, 0, k, dst)
			if err != nil {
				return err
			}
			ids += int64(len(out))
			sum += out[len(out)-1]
		}
	}
	sec := time.Since(start).Seconds()
	result.Print(result.Result{Rows: ids, Bytes: ids * 8, Seconds: sec, Checksum: sum,
		Extra: fmt.Sprintf("N=%d, G=%d, shuffle %s, %d runs of %d steps; plan.New took %.1f s", n, g, shuffle, segments, perSeg, newSec)})
	return nil
}
