package main

import (
	"github.com/prepml/prep/shardset"
)

// checkSetRange checks epoch, rank and step (step < 0: none given) against
// the plan a shard set carries (OUT/plan.json, written by convert), so an
// out-of-range request is a usage error (exit 2) like in `prep plan show`,
// not a missing-shard failure. A set
// without a readable plan.json is left to the reader's own errors; a
// plan.json that is a symbolic link is not followed (shardset).
func checkSetRange(dir string, epoch, rank, step int) error {
	set, err := shardset.OpenDir(dir)
	if err != nil {
		return nil // the reader reports what is wrong
	}
	defer set.Close()
	p, err := set.Plan()
	if err != nil {
		return nil // no or unreadable plan.json: the reader reports what is wrong
	}
	if epoch >= p.Config.Epochs {
		return usagef("--epoch %d out of range: the shard set's plan has epochs 0-%d", epoch, p.Config.Epochs-1)
	}
	if rank >= p.Config.WorldSize {
		return usagef("--rank %d out of range: the shard set's plan has world size %d (ranks 0-%d)", rank, p.Config.WorldSize, p.Config.WorldSize-1)
	}
	if step >= p.Steps() {
		return usagef("--step %d out of range: the shard set's plan has %s per rank per epoch (steps 0-%d)", step, count(p.Steps(), "step"), p.Steps()-1)
	}
	return nil
}
