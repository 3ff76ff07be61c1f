package plan

import (
	"fmt"
	"sort"
)

// RankWorker names one data-loader worker of one rank.
type RankWorker struct {
	Rank   int `json:"rank"`
	Worker int `json:"worker"`
}

// Summary is what a plan means for the job that runs it, computed once so
// that a CLI only renders it.
type Summary struct {
	// NoSteps is empty when the plan has steps, and otherwise says why it
	// has none and what to change: a plan whose ranks take no step would
	// convert, verify and load as empty shards, almost always a mistake.
	NoSteps string
	// SameFiles lists groups of source paths (sorted, groups ordered by
	// their first path) that are one file (hard or symbolic links): its
	// rows are planned once per path. Reported, not an error.
	SameFiles [][]string
	// IdlePairs lists the (rank, worker) pairs that produce no real
	// (non-pad) sample in an epoch (more ranks x workers than batches),
	// rank-major.
	IdlePairs []RankWorker
}

// Summarize computes p's Summary. sameFile reports whether two source
// paths (relative to the root) are one file; it is asked only about files
// sharing a size and footer digest, which two paths of one file do, so a
// source without duplicates costs nothing; nil: no file is the same as
// another. IdlePairs costs about one RankBatch per (rank, worker) pair (none
// when the plan has no steps).
func Summarize(p *Plan, sameFile func(a, b string) bool) (Summary, error) {
	s := Summary{NoSteps: noStepsReason(p), SameFiles: [][]string{}}
	if sameFile != nil {
		s.SameFiles = sameFiles(p.Source, sameFile)
	}
	if s.NoSteps != "" {
		s.IdlePairs = []RankWorker{}
		return s, nil
	}
	var err error
	s.IdlePairs, err = idlePairs(p)
	return s, err
}

// noStepsReason says why p has no steps, or returns "".
func noStepsReason(p *Plan) string {
	if p.Steps() > 0 {
		return ""
	}
	cfg := p.Config
	if p.NumSamples() == 0 {
		return fmt.Sprintf("the source has no rows (%d files, all empty): nothing to plan", len(p.Source.Files)+len(p.Source.EmptyFiles))
	}
	// Partitioned mode deals whole row groups to ranks: with more ranks
	// than row groups some rank has no sample, and neither a smaller
	// batch nor remainder pad (nothing to pad from) helps.
	for r, n := range p.Derived.PartitionRows {
		if n == 0 {
			return fmt.Sprintf("the plan has no steps: partitioned mode gives rank %d no row group (%d row groups for world size %d) and remainder %s stops every rank at the smallest partition; use fewer ranks, smaller row groups or --remainder partial",
				r, p.Derived.Blocks, cfg.WorldSize, cfg.Remainder)
		}
	}
	n := p.EpochSamples(0) // a packed mixture: its smallest epoch (PLAN.md §12.1)
	for e := 1; e < cfg.Epochs; e++ {
		n = min(n, p.EpochSamples(e))
	}
	return fmt.Sprintf("the plan has no steps: %d samples with global batch %d, shuffle %s and remainder %s leave every rank without a batch; lower --global-batch or use --remainder pad or partial",
		n, cfg.GlobalBatch, cfg.Shuffle, cfg.Remainder)
}

// sameFiles groups the source's non-empty files that sameFile says are one
// file, in path order.
func sameFiles(src Source, sameFile func(a, b string) bool) [][]string {
	type key struct {
		size   int64
		footer string
	}
	candidates := map[key][]string{}
	var keys []key
	for _, f := range src.Files {
		k := key{f.Size, f.FooterSHA256}
		if _, ok := candidates[k]; !ok {
			keys = append(keys, k)
		}
		candidates[k] = append(candidates[k], f.Path)
	}
	groups := [][]string{}
	for _, k := range keys {
		paths := candidates[k]
		used := make([]bool, len(paths))
		for i := range paths {
			if used[i] {
				continue
			}
			group := []string{paths[i]}
			for j := i + 1; j < len(paths); j++ {
				if !used[j] && sameFile(paths[i], paths[j]) {
					used[j] = true
					group = append(group, paths[j])
				}
			}
			if len(group) > 1 {
				sort.Strings(group)
				groups = append(groups, group)
			}
		}
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a][0] < groups[b][0] })
	return groups
}

// idlePairs returns the (rank, worker) pairs whose steps (k mod W = worker)
// hold no real (non-pad) sample in epoch 0. Batch sizes per (rank, step) are
// the same in every epoch, and short or empty batches are trailing, so each
// pair usually needs one RankBatch call.
func idlePairs(p *Plan) ([]RankWorker, error) {
	idle := []RankWorker{}
	var ids []uint64
	for r := 0; r < p.Config.WorldSize; r++ {
		for w := 0; w < p.Config.Workers; w++ {
			empty := true
			for k := w; k < p.Steps() && empty; k += p.Config.Workers {
				var pads int
				var err error
				if ids, pads, err = p.RankBatch(0, r, k, ids); err != nil {
					return nil, err
				}
				empty = len(ids)-pads == 0
			}
			if empty {
				idle = append(idle, RankWorker{r, w})
			}
		}
	}
	return idle, nil
}
