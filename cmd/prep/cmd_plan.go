package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

func init() { subcommands = append(subcommands, newPlanCmd) }

// planOptions are the flags of prep plan.
type planOptions struct {
	sources     []string
	sourcesFile string
	memoryLimit string
	seed        uint64
	epochs      int
	globalBatch int
	batchSize   int
	worldSize   int
	workers     int
	shuffle     string
	window      int
	remainder   string
	output      string
	asJSON      bool
	io          s3Flags
	pack        packFlags
}

// defaultWindow is the blocks-mode window when --window is not given.
const defaultWindow = 16

func newPlanCmd(g *globalOptions) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan (--source PATH... | --sources FILE) --global-batch G [flags] -o plan.json",
		Short: "Make a deterministic epoch plan (seeded shuffle, ranks, workers) from Parquet footers",
		Long: `plan fixes the order of every epoch as a pure function of the source, a seed
and a few counts, and writes it to a small plan.json (format prep-plan/v1,
spec in plan/PLAN.md). It reads only the Parquet footers.

Sources are files, directories (walked recursively for files named *.parquet
or, under any other name such as Hive's 000000_0 or Impala's *.parq, ending
in the PAR1 magic; names that start with "." or "_" and *.crc are ignored, and
any other file left out is listed in the summary and in --json
skipped_files) or globs; files are ordered by path relative
to their common directory, and sample id = row index in that order. Every
footer is checked before anything is written; all bad files are reported.

The order of an epoch depends on the source, seed, epoch, global batch,
shuffle mode and remainder policy, never on --world-size or --workers (except
in partitioned mode). Rank r takes slots [r*b, (r+1)*b) of every global batch
(b = G/R); rank batch j is produced by worker j mod W. Every rank has the same
number of steps.

Shuffle modes: none, global (keyed permutation of all samples), blocks
(permute row groups, shuffle inside windows of --window row groups),
partitioned (row groups assigned to ranks once, shuffled within each rank).
Remainder policies: drop (last N mod G samples of each epoch left out and
listed), pad (last global batch filled from the epoch start, flagged as pad),
partial (short last batch; for evaluation).

Mixtures (--sources FILE, a YAML sources file, instead of --source):

  sources:
    - name: web
      path: s3://corpus/web/        # a path or a list of paths, as --source
      weight: 0.7
      filter: "lang = 'en' AND quality >= 0.5"   # optional row filter
    - name: code
      path: s3://corpus/code/
      weight: 0.3
  epoch_samples: 10000000           # optional; default: all sources' rows
  packing:                          # optional: pack a token list column
    column: tokens
    length: 2048
    scope: across                   # or per_source (default across)

Every epoch draws round(weight/sum of weights x epoch_samples) samples from
each source (largest-remainder rounding: the counts add up exactly), and
every global batch holds each source's share of it to within one sample.
Each source is read through its own seeded permutation, continuing where the
previous epoch stopped: a source drawn more often than it has rows repeats
whole passes (up-sampling), one drawn less covers all its rows over several
epochs (down-sampling). A source without a weight weighs its share of all
rows (with no weights at all, the shares of one pool). Sample ids stay row
indices over all the sources' files; a file may belong to one source only
(the same directory under two names is refused: raise its weight instead).
Shuffle global or none; the order still never depends on --world-size or
--workers. 'plan show' names each sample's source. Spec: plan/PLAN.md §11.

With a packing block (or --pack), filters and weights choose documents
(epoch_samples counts documents), which are then packed into rows of
'length' tokens: scope across packs all sources' documents together in the
mixture's interleaved order, per_source packs each source's documents into
rows of its own. Each epoch packs the documents it draws (a down-sampled
source continues its stream, so over epochs it packs all its rows), so
epochs have their own packed rows and row counts and all have the same
steps; the samples are the packed rows of every epoch (plan format
prep-plan/v2). The block's other keys are the --pack-* options: split, eod,
pad, window (the flags themselves go with --pack only). Spec:
plan/PLAN.md §12.1.

A filter is a SQL WHERE condition over the source's columns: = != <> < <=
> >=, AND, OR, NOT, parentheses, IN (...), BETWEEN a AND b, IS [NOT] NULL,
LIKE 'prefix%', with SQL's NULL logic (a row is kept only when the condition
is TRUE). It is type-checked against every file's columns and evaluated once
here, reading only the columns it names; the plan records the selected rows
and their digest, so convert and verify read only selected rows and a source
without a weight weighs its selected rows. An unknown column, a type mismatch
or a filter that selects nothing is refused before anything is written,
pointing at the token. Language: selection/SELECTION.md.

A source that is one local directory of hive partitions
(date=2026-11-01/region=eu/part-0.parquet) has its keys as columns for its
filter; files whose partition values cannot match ("region = 'eu'") are
pruned before their footers are read.

Prints a summary on stdout (--json for scripts). Use 'prep plan show' to list
the sample ids of a rank.`,
		Example: `  prep plan --source data/ --seed 7 --epochs 2 --global-batch 1024 --world-size 8 --workers 4 -o plan.json
  prep plan --source 'data/part-*.parquet' --batch-size 128 --world-size 8 --shuffle blocks --window 32 -o plan.json
  # 70 % web, 30 % code in every epoch and every global batch, 3 epochs
  prep plan --sources sources.yaml --seed 7 --epochs 3 --global-batch 1024 --world-size 8 -o plan.json`,
		Args: noArgs("give the Parquet files with --source PATH (repeatable) and the plan file with -o"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("window") && o.shuffle != string(plan.ShuffleBlocks) {
				return usagef("--window applies only to --shuffle blocks")
			}
			po, err := o.pack.options(cmd, o.sourcesFile != "")
			if err != nil {
				return err
			}
			return runPlan(cmd.Context(), g, o, po)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.sources, "source", nil, "Parquet file, directory or glob (repeatable)")
	f.StringVar(&o.sourcesFile, "sources", "", "sources file (YAML): named sources with weights and row filters, mixed per epoch and per global batch")
	f.StringVar(&o.memoryLimit, "memory-limit", defaultMemoryLimit, "bound on the filter columns decoded at once (--sources with filters; larger row groups are read in row windows), at least 1MiB")
	f.Uint64Var(&o.seed, "seed", 0, "shuffle seed; every value, 0 included, is an ordinary seed")
	f.IntVar(&o.epochs, "epochs", 1, "number of epochs")
	f.IntVar(&o.globalBatch, "global-batch", 0, "global batch G: samples per step over all ranks")
	f.IntVar(&o.batchSize, "batch-size", 0, "per-rank batch b (G = b * world size); instead of --global-batch")
	f.IntVar(&o.worldSize, "world-size", 1, "world size R (number of ranks); must divide G")
	f.IntVar(&o.workers, "workers", 1, "data-loader workers per rank W")
	f.StringVar(&o.shuffle, "shuffle", string(plan.ShuffleGlobal), "shuffle mode: none, global, blocks or partitioned")
	f.IntVar(&o.window, "window", defaultWindow, "blocks mode: row groups per shuffle window K")
	f.StringVar(&o.remainder, "remainder", string(plan.RemainderDrop), "remainder policy: drop, pad or partial")
	f.StringVarP(&o.output, "output", "o", "plan.json", "plan file to write")
	f.BoolVar(&o.asJSON, "json", false, "print the summary as JSON on stdout")
	addIOFlags(cmd, &o.io)
	addPackFlags(cmd, &o.pack)
	cmd.MarkFlagsMutuallyExclusive("global-batch", "batch-size")
	cmd.MarkFlagsMutuallyExclusive("source", "sources")
	cmd.AddCommand(newPlanShowCmd(g))
	return cmd
}

// config turns the flags into a plan.Config; errors are usage errors.
func (o *planOptions) config() (plan.Config, error) {
	c := plan.Config{
		Seed:        o.seed,
		Epochs:      o.epochs,
		GlobalBatch: o.globalBatch,
		WorldSize:   o.worldSize,
		Workers:     o.workers,
		Shuffle:     plan.Shuffle(o.shuffle),
		Remainder:   plan.Remainder(o.remainder),
	}
	if c.Shuffle == plan.ShuffleBlocks {
		c.Window = o.window
	}
	switch {
	case o.globalBatch == 0 && o.batchSize == 0:
		return c, usagef("one of --global-batch or --batch-size is required")
	case o.batchSize < 0:
		return c, usagef("--batch-size must be at least 1, not %d", o.batchSize)
	case o.batchSize > 0 && o.worldSize > 0 && o.batchSize > plan.MaxGlobalBatch/o.worldSize:
		// b*R would exceed the limit, or wrap around int64 to a small G.
		return c, usagef("--batch-size %d x --world-size %d exceeds the limit of %d samples per step", o.batchSize, o.worldSize, plan.MaxGlobalBatch)
	case o.batchSize > 0:
		c.GlobalBatch = o.batchSize * o.worldSize
	}
	if o.globalBatch > 0 && o.worldSize > 0 && o.globalBatch%o.worldSize != 0 {
		return c, usagef("--global-batch %d is not divisible by --world-size %d: every rank needs the same batch size b = G/R (try --global-batch %d or --batch-size)",
			o.globalBatch, o.worldSize, (o.globalBatch/o.worldSize+1)*o.worldSize)
	}
	if err := c.Validate(); err != nil {
		var pe *plan.Error
		if errors.As(err, &pe) {
			return c, usagef("--%s: %v", strings.ReplaceAll(pe.Field, "_", "-"), errors.Unwrap(pe))
		}
		return c, usageError{err}
	}
	return c, nil
}

// planSummary is the --json output of prep plan.
type planSummary struct {
	Plan       string   `json:"plan"`
	Samples    uint64   `json:"samples"`
	Files      int      `json:"files"`
	EmptyFiles []string `json:"empty_files"`
	// SkippedFiles are the regular files the directory walks or listings
	// found and left out as not Parquet (plan.Source.Skipped).
	SkippedFiles []string `json:"skipped_files"`
	// SameFiles lists groups of source paths that are one file (hard or
	// symbolic links): its rows are planned once per path. Reported, not
	// an error.
	SameFiles       [][]string `json:"same_files"`
	RowGroups       int        `json:"row_groups"`
	Epochs          int        `json:"epochs"`
	GlobalBatch     int        `json:"global_batch"`
	BatchSize       int        `json:"batch_size"`
	WorldSize       int        `json:"world_size"`
	Workers         int        `json:"workers"`
	Shuffle         string     `json:"shuffle"`
	Remainder       string     `json:"remainder"`
	StepsPerEpoch   int        `json:"steps_per_epoch"`
	DroppedPerEpoch uint64     `json:"dropped_per_epoch"`
	PaddedPerEpoch  uint64     `json:"padded_per_epoch"`
	// IdlePairs lists the (rank, worker) pairs that produce no sample in
	// an epoch (more ranks x workers than batches): reported, not an error.
	IdlePairs         []plan.RankWorker `json:"idle_pairs"`
	Fingerprint       string            `json:"fingerprint"`
	OrderFingerprint  string            `json:"order_fingerprint"`
	SourceFingerprint string            `json:"source_fingerprint"`
	// Packing is the plan's packing (PLAN.md §12), absent when none.
	Packing *plan.Packing `json:"packing,omitempty"`
	// Source is the object-store traffic of reading the footers (absent
	// for local sources).
	Source *source.S3Stats `json:"source,omitempty"`
	// Mixture describes each named source's share (--sources only).
	Mixture *mixSummary `json:"mixture,omitempty"`
}

func runPlan(ctx context.Context, g *globalOptions, o *planOptions, po *plan.PackOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// Ctrl-C or SIGTERM stops footer reading and the epoch digests.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal asks for that clean stop; a run blocked where it
	// does not watch ctx (a named pipe given as --sources, a hung file
	// system) never gets there, so the next signal ends the process.
	go func() {
		<-ctx.Done()
		stop()
	}()
	cfg, err := o.config()
	if err != nil {
		return err
	}
	if len(o.sources) == 0 && o.sourcesFile == "" {
		return usagef("--source (or --sources with a sources file) is required")
	}
	if err := o.io.check(); err != nil {
		return err
	}
	// A bad output path is refused before footers are read or filters
	// evaluated (minutes over an object store), not after.
	if err := plan.CheckOutput(o.output); err != nil {
		return usageError{err}
	}
	if err := notShardSetPlan(o.output); err != nil {
		return err
	}
	var (
		src     plan.Source
		remote  *s3Source
		mix     *plan.Mixture
		remotes []*s3Source
		// filterCosts is what each filtered source's filter read.
		filterCosts = map[string]filterCost{}
	)
	if o.sourcesFile != "" {
		mem, merr := parseMemoryLimit(o.memoryLimit)
		if merr != nil {
			return merr
		}
		src, mix, remotes, err = discoverMixture(ctx, o.sourcesFile, &o.io, mem, filterCosts, &po)
		if err != nil {
			return err
		}
		if len(remotes) > 0 {
			remote = remotes[0]
		}
	} else {
		src, remote, err = discoverSources(ctx, o.sources, &o.io)
		remotes = []*s3Source{remote}
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return err
		}
		if errors.Is(err, filepath.ErrBadPattern) {
			for _, s := range o.sources {
				if _, gerr := filepath.Glob(s); gerr != nil {
					return usagef("--source %s: %v", s, gerr)
				}
			}
		}
		return fmt.Errorf("reading source footers: %w", err)
	}
	if err := checkOutputNotInput(o.output, o.sourcesFile, src, remote == nil); err != nil {
		return err
	}
	// The epoch digests cost O(N) each: one progress bar per epoch.
	var bar *progress
	barEpoch, done := -1, 0
	onDigest := func(epoch, steps, total int) {
		if epoch != barEpoch {
			bar.Finish()
			bar = g.newRowProgress(fmt.Sprintf("epoch %d digest (steps)", epoch), int64(total))
			barEpoch, done = epoch, 0
		}
		bar.Add(int64(steps-done), int64(steps-done))
		done = steps
	}
	var p *plan.Plan
	// Saving writes the plan file while its epoch digests are computed
	// (nil for a packed plan, saved whole below).
	var saving *plan.Saving
	switch {
	case po != nil:
		p, err = newPackedPlan(ctx, g, src, remote, cfg, *po, mix, onDigest)
	default:
		p, saving, err = plan.NewMixtureContextSaving(ctx, src, cfg, mix, onDigest, o.output)
	}
	defer saving.Abort() // nothing left behind on an error; a no-op after Commit
	bar.Finish()
	if err != nil {
		if errors.Is(err, plan.ErrConfig) {
			return usageError{err}
		}
		return err
	}
	sameFile := func(a, b string) bool { return false } // objects are never links of each other
	if remote == nil {
		local, err := source.NewLocal(src.Root)
		if err != nil {
			return err
		}
		sameFile = local.SameFile
	}
	sum, err := plan.Summarize(p, sameFile)
	if err != nil {
		return err
	}
	if sum.NoSteps != "" {
		return errors.New(sum.NoSteps)
	}
	if saving != nil {
		err = saving.Commit()
	} else {
		err = p.Save(o.output)
	}
	if err != nil {
		return err
	}
	if left := plan.LeftoverTemps(o.output); len(left) > 0 {
		g.log.Warn("temporary plan files beside the output, left by a prep plan killed before it renamed its file (or from one still running): delete them once no prep plan writes this output", "files", strings.Join(left, ", "))
	}
	s := planSummary{
		Plan: o.output, Samples: p.NumSamples(), Files: len(src.Files), EmptyFiles: []string{}, RowGroups: p.Derived.Blocks,
		Epochs: cfg.Epochs, GlobalBatch: cfg.GlobalBatch, BatchSize: p.BatchSize(), WorldSize: cfg.WorldSize, Workers: cfg.Workers,
		Shuffle: string(cfg.Shuffle), Remainder: string(cfg.Remainder),
		StepsPerEpoch: p.Steps(), DroppedPerEpoch: p.Derived.DroppedPerEpoch, PaddedPerEpoch: p.Derived.PaddedPerEpoch,
		Fingerprint: p.Fingerprint, OrderFingerprint: p.OrderFingerprint, SourceFingerprint: p.SourceFingerprint,
		Source: sumStats(remotes), Packing: p.Packing, Mixture: summarizeMixture(p, filterCosts),
	}
	for _, f := range p.Source.EmptyFiles {
		s.EmptyFiles = append(s.EmptyFiles, f.Path)
	}
	s.SkippedFiles = append([]string{}, src.Skipped...)
	if len(s.SkippedFiles) > 0 {
		g.log.Warn("files left out: not Parquet (not named *.parquet, and not ending in the PAR1 magic)", "count", len(s.SkippedFiles), "files", strings.Join(s.SkippedFiles, ", "))
	}
	s.SameFiles, s.IdlePairs = sum.SameFiles, sum.IdlePairs
	for _, group := range s.SameFiles {
		g.log.Warn("source paths name the same file (hard or symbolic links): its rows are planned once per path", "paths", strings.Join(group, ", "))
	}
	if o.asJSON {
		return newJSONEncoder(g.stdout).Encode(s)
	}
	w := g.summary()
	fmt.Fprintf(w, "wrote %s\n", s.Plan)
	fmt.Fprintf(w, "  samples          %d in %s, %s", s.Samples, count(s.Files, "file"), count(s.RowGroups, "non-empty row group"))
	if len(s.EmptyFiles) > 0 {
		fmt.Fprintf(w, " (+%d empty files: %s)", len(s.EmptyFiles), strings.Join(s.EmptyFiles, ", "))
	}
	fmt.Fprintln(w)
	if len(s.SkippedFiles) > 0 {
		fmt.Fprintf(w, "  skipped          %s not Parquet (not named *.parquet, no PAR1 magic): %s\n", count(len(s.SkippedFiles), "file"), strings.Join(s.SkippedFiles, ", "))
	}
	for _, group := range s.SameFiles {
		fmt.Fprintf(w, "  same file        %s (planned %d times)\n", strings.Join(group, ", "), len(group))
	}
	fmt.Fprintf(w, "  layout           %s, global batch %d = %s x %d, %s per rank\n", count(s.Epochs, "epoch"), s.GlobalBatch, count(s.WorldSize, "rank"), s.BatchSize, count(s.Workers, "worker"))
	mode := s.Shuffle
	if cfg.Shuffle == plan.ShuffleBlocks {
		mode += fmt.Sprintf(" (window %d)", cfg.Window)
	}
	fmt.Fprintf(w, "  order            shuffle %s, seed %d, remainder %s\n", mode, cfg.Seed, s.Remainder)
	if s.Mixture != nil {
		writeMixture(w, s.Mixture)
	}
	fmt.Fprintf(w, "  steps per epoch  %d\n", s.StepsPerEpoch)
	most := "" // a packed mixture's epochs differ: the largest (PLAN.md §12.1)
	if p.Packing != nil && p.Mixture != nil {
		most = "at most "
	}
	fmt.Fprintf(w, "  dropped          %s%d per epoch\n", most, s.DroppedPerEpoch)
	fmt.Fprintf(w, "  padded           %s%d per epoch\n", most, s.PaddedPerEpoch)
	if n := len(s.IdlePairs); n > 0 {
		var names []string
		for i, rw := range s.IdlePairs {
			if i == 8 {
				names = append(names, "...")
				break
			}
			names = append(names, fmt.Sprintf("rank %d worker %d", rw.Rank, rw.Worker))
		}
		fmt.Fprintf(w, "  idle workers     %d of %d (rank, worker) pairs get no samples: %s\n", n, s.WorldSize*s.Workers, strings.Join(names, ", "))
	}
	if len(p.Derived.PartitionRows) > 0 {
		fmt.Fprintf(w, "  partition rows   %v\n", p.Derived.PartitionRows)
	}
	if pk := p.Packing; pk != nil {
		docs, scope := pk.Documents, ""
		if p.Mixture != nil { // counts over every epoch's packing (PLAN.md §12.1)
			lo, hi := p.EpochSamples(0), p.EpochSamples(0)
			for e := range p.Config.Epochs {
				lo, hi = min(lo, p.EpochSamples(e)), max(hi, p.EpochSamples(e))
			}
			docs = p.Mixture.EpochSamples * uint64(p.Config.Epochs)
			scope = fmt.Sprintf(", scope %s, %d epochs of %d-%d rows", pk.Scope, p.Config.Epochs, lo, hi)
		}
		fmt.Fprintf(w, "  packing          %s into rows of %d (split %s%s): %d documents -> %d rows, %d tokens, %d pad slots (%.2f%%), %d dropped, %d empty\n",
			pk.Column, pk.Length, pk.Split, scope, docs, pk.Rows, pk.Tokens, pk.PadSlots, 100*float64(pk.PadSlots)/float64(max(1, pk.Rows*uint64(pk.Length))), pk.DroppedDocuments, pk.EmptyDocuments)
	}
	fmt.Fprintf(w, "  fingerprint      %s\n", s.Fingerprint)
	if st := s.Source; st != nil {
		fmt.Fprintf(w, "  source reads     %d requests (%.2f per file), %d retries, %s fetched\n",
			st.Requests, float64(st.Requests)/float64(max(1, s.Files+len(s.EmptyFiles))), st.Retries, formatBytes(st.BytesFetched))
	}
	return nil
}

// planShowOptions are the flags of prep plan show.
type planShowOptions struct {
	epoch    int
	rank     int
	worker   int
	fromStep int
	limit    int
	asJSON   bool
}

// shownBatch is one batch in prep plan show --json.
type shownBatch struct {
	Step    int      `json:"step"`   // the rank's step within the epoch
	Worker  int      `json:"worker"` // step mod W
	Samples []uint64 `json:"samples"`
	Pad     []bool   `json:"pad"`
	// Sources names each sample's source (plans with a mixture only; "*"
	// for a packed row holding documents of several sources).
	Sources []string `json:"sources,omitempty"`
}

// shownRank is the --json output of prep plan show.
type shownRank struct {
	Plan      string       `json:"plan"` // plan fingerprint
	Epoch     int          `json:"epoch"`
	Rank      int          `json:"rank"`
	Worker    *int         `json:"worker"`
	BatchSize int          `json:"batch_size"`
	Steps     int          `json:"steps"`
	Batches   []shownBatch `json:"batches"`
}

func newPlanShowCmd(g *globalOptions) *cobra.Command {
	o := &planShowOptions{}
	cmd := &cobra.Command{
		Use:   "show plan.json --epoch E --rank R [--worker W] [--from-step S] [--limit N]",
		Short: "List a rank's sample ids in consumption order, one batch per line",
		Long: `show prints the sample ids (global row indices in source order) of one rank
in one epoch, one batch per line as "step K: id id ...", in the order the rank
consumes them. Pad samples (remainder pad) are marked with a trailing '*'.
In a plan with a mixture (--sources) each id is followed by "@" and the name
of its source ("12@web 7@code"; a packed row of scope across, which may hold
several sources' documents, is "12@*").
--worker keeps only the batches that worker produces (steps K with K mod W =
worker); --from-step starts at the rank's step S; --limit prints at most N
batches. --json prints {"epoch", "rank", "worker" (or null), "batches":
[{"step", "worker", "samples", "pad"}]}, and "sources" (each sample's source
name) in a plan with a mixture.`,
		Example: `  # the first three batches rank 1 consumes in epoch 0
  prep plan show plan.json --epoch 0 --rank 1 --limit 3

  # what data-loader worker 2 of rank 0 produces, resuming at step 100
  prep plan show plan.json --epoch 1 --rank 0 --worker 2 --from-step 100

  # for scripts
  prep plan show plan.json --epoch 0 --rank 0 --json`,
		Args: oneArg("the plan file (plan.json)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			worker := -1
			if cmd.Flags().Changed("worker") {
				worker = o.worker
				if worker < 0 {
					return usagef("--worker %d out of range: workers are numbered from 0", worker)
				}
			}
			return runPlanShow(g, o, args[0], worker)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.epoch, "epoch", 0, "epoch, from 0")
	f.IntVar(&o.rank, "rank", 0, "rank, in [0, world size)")
	f.IntVar(&o.worker, "worker", 0, "only the batches of this worker, in [0, workers)")
	f.IntVar(&o.fromStep, "from-step", 0, "first step of the rank to print")
	f.IntVar(&o.limit, "limit", 0, "print at most this many batches (0: all)")
	f.BoolVar(&o.asJSON, "json", false, "print as one JSON object on stdout")
	return cmd
}

func runPlanShow(g *globalOptions, o *planShowOptions, path string, worker int) error {
	switch {
	case o.rank < 0:
		return usagef("--rank %d out of range: ranks are numbered from 0", o.rank)
	case o.epoch < 0:
		return usagef("--epoch %d out of range: epochs are numbered from 0", o.epoch)
	case o.fromStep < 0:
		return usagef("--from-step must not be negative, not %d", o.fromStep)
	case o.limit < 0:
		return usagef("--limit must not be negative, not %d", o.limit)
	}
	p, err := plan.Load(path)
	if err != nil {
		return err
	}
	c := p.Config
	switch {
	case o.rank >= c.WorldSize:
		return usagef("--rank %d out of range [0, %d): the plan has world size %d", o.rank, c.WorldSize, c.WorldSize)
	case o.epoch >= c.Epochs:
		return usagef("--epoch %d out of range [0, %d): the plan has %d epochs", o.epoch, c.Epochs, c.Epochs)
	case worker >= c.Workers:
		return usagef("--worker %d out of range [0, %d): the plan has %d workers per rank", worker, c.Workers, c.Workers)
	case o.fromStep > p.Steps():
		return usagef("--from-step %d out of range [0, %d]: the plan has %d steps per epoch", o.fromStep, p.Steps(), p.Steps())
	}
	out := shownRank{Plan: p.Fingerprint, Epoch: o.epoch, Rank: o.rank, BatchSize: p.BatchSize(), Steps: p.Steps(), Batches: []shownBatch{}}
	if worker >= 0 {
		out.Worker = &worker
	}
	var ids []uint64
	var line []byte
	for k := o.fromStep; k < p.Steps(); k++ {
		if worker >= 0 && p.Worker(k) != worker {
			continue
		}
		if o.limit > 0 && len(out.Batches) == o.limit {
			break
		}
		var pads int
		ids, pads, err = p.RankBatch(o.epoch, o.rank, k, ids)
		if err != nil {
			return err
		}
		if o.asJSON {
			b := shownBatch{Step: k, Worker: p.Worker(k), Samples: append([]uint64{}, ids...), Pad: make([]bool, len(ids))}
			for i := len(ids) - pads; i < len(ids); i++ {
				b.Pad[i] = true
			}
			if p.Mixture != nil {
				for _, id := range ids {
					b.Sources = append(b.Sources, sourceName(p, id))
				}
			}
			out.Batches = append(out.Batches, b)
			continue
		}
		out.Batches = append(out.Batches, shownBatch{})
		line = append(line[:0], "step "...)
		line = strconv.AppendInt(line, int64(k), 10)
		line = append(line, ':')
		for i, id := range ids {
			line = append(line, ' ')
			line = strconv.AppendUint(line, id, 10)
			if p.Mixture != nil {
				line = append(line, '@')
				line = append(line, sourceName(p, id)...)
			}
			if i >= len(ids)-pads {
				line = append(line, '*')
			}
		}
		line = append(line, '\n')
		if _, err := g.stdout.Write(line); err != nil {
			return err
		}
	}
	if o.asJSON {
		return newJSONEncoder(g.stdout).Encode(out)
	}
	return nil
}

// checkOutputNotInput refuses an output path that names the sources file
// or, for a local source, one of its files (the same file, through any
// name or link): the plan would replace the data it is made from.
func checkOutputNotInput(output, sourcesFile string, src plan.Source, local bool) error {
	out, err := os.Stat(output)
	if err != nil || !out.Mode().IsRegular() {
		return nil // a new file, or one Save refuses
	}
	if sourcesFile != "" {
		if in, err := os.Stat(sourcesFile); err == nil && os.SameFile(out, in) {
			return usagef("--output %s is the sources file %s: the plan would replace it", output, sourcesFile)
		}
	}
	if !local {
		return nil
	}
	for _, files := range [][]plan.SourceFile{src.Files, src.EmptyFiles} {
		for _, f := range files {
			if f.Size != out.Size() {
				continue // not the same file; saves a stat per file
			}
			path := filepath.Join(src.Root, filepath.FromSlash(f.Path))
			if in, err := os.Stat(path); err == nil && os.SameFile(out, in) {
				return usagef("--output %s is the source file %s: the plan would replace it", output, path)
			}
		}
	}
	return nil
}

// notShardSetPlan refuses an output that is a shard set's copy of the plan
// that made it (OUT/plan.json beside OUT/manifest.json): convert wrote that
// copy and checks reruns against it, so another plan there would leave the
// set saying it was made by a plan it was not.
func notShardSetPlan(output string) error {
	dir := filepath.Dir(output)
	if filepath.Base(output) != shardset.PlanName {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, shardset.ManifestName)); err != nil {
		return nil
	}
	return usagef("--output %s is the copy of the plan that made the shard set %s (beside its %s), which convert checks reruns against: write the plan elsewhere", output, dir, shardset.ManifestName)
}
