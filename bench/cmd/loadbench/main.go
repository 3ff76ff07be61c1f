// Command loadbench measures batch delivery of the gpuload host backend over
// every shard of a shard set and prints a result line
// (bench/internal/result):
//
//	loadbench [-map] [-verify] [-prefetch N] DIR
//
// The consumer loop is bench/internal/hostload.Deliver. bytes is the sum of
// the shard file sizes (the same numerator as a plain read of the folder);
// rows is samples delivered.
package main

import (
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/prepml/prep/bench/internal/hostload"
	"github.com/prepml/prep/bench/internal/result"
	"github.com/prepml/prep/gpuload"
)

func main() {
	mapBlocks := flag.Bool("map", false, "hand out views of the mapped shard (Options.MapBlocks) instead of ring-buffer copies")
	verify := flag.Bool("verify", false, "check each block's CRC-32C while reading (Options.VerifyChecksums)")
	prefetch := flag.Int("prefetch", 0, "prefetch depth (0 = gpuload default)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("loadbench: ")
	if flag.NArg() != 1 {
		log.Fatal("usage: loadbench [-map] [-verify] [-prefetch N] DIR")
	}
	opts := gpuload.Options{Backend: gpuload.BackendHost, MapBlocks: *mapBlocks, VerifyChecksums: *verify, Prefetch: *prefetch}
	start := time.Now()
	t, err := hostload.Deliver(flag.Arg(0), opts)
	if err != nil {
		log.Fatal(err)
	}
	sec := time.Since(start).Seconds()
	result.Print(result.Result{Rows: t.Rows, Bytes: t.Bytes, Seconds: sec, Checksum: t.Sum,
		Extra: fmt.Sprintf("%d shards, map=%v, verify=%v", t.Shards, *mapBlocks, *verify)})
}
