package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/launcher"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

func init() { subcommands = append(subcommands, newConvertCmd) }

// convertOptions are the flags of prep convert.
type convertOptions struct {
	planPath    string
	specPath    string
	tensors     []string
	output      string
	epochs      string
	ranks       string
	jobs        int
	memoryLimit string
	sourceRoot  string
	force       bool
	asJSON      bool
	ops         opsOptions
	io          s3Flags
}

func newConvertCmd(g *globalOptions) *cobra.Command {
	var o convertOptions
	cmd := &cobra.Command{
		Use:   "convert --plan plan.json (--spec features.yaml | --tensor ...) -o DIR",
		Short: "Decode Parquet once and write one tensor shard per (epoch, rank)",
		Long: `convert materializes the plan's epochs and ranks into shard files under DIR
(DIR/epoch-NNNNN/rank-NNNNN.shard) plus DIR/manifest.json and DIR/plan.json
(a byte-exact copy of the plan, so "prep verify DIR" needs no --plan; a
rerun with another plan file is refused unless --force). Every source footer
and schema is checked before anything is written; on error nothing from the
run is left behind. A rerun skips shards already complete; a lock file
DIR/.prep.lock keeps two runs apart (exit code 3).

--tensor NAME=COL[,COL...]:DTYPE[:SHAPE] adds a tensor without a spec file,
for example --tensor label=label:I64 --tensor pix=a,b,c,d:U8:2x2;
--tensor NAME=COL:DTYPE:jagged reads a LIST column as a jagged tensor
(every element of each row, no padding), e.g. --tensor clicks=clicks:I64:jagged.

The feature spec (YAML; keys in feature/SPEC.md) names each tensor's columns,
dtype, per-sample shape, and the null, NaN, list, bytes, map and cast
policies: a list is read at a fixed length (padded or truncated) or, with
list: {jagged: true}, as a jagged tensor (values plus offsets; a list of
lists adds NAME_inner_lengths); a map as jagged NAME.keys and NAME.values
(map: {}) or as one dense tensor over listed keys (map: {keys, fill}).
Errors in flags exit 2; errors in the spec file, plan or source exit 1.`,
		Example: `  # every epoch and rank of the plan
  prep convert --plan plan.json --spec features.yaml -o /local/shards

  # two scalar columns, no spec file, only epochs 3-4 for this node's ranks
  prep convert --plan plan.json --tensor id=id:I64 --tensor x=x:F32 \
    -o /local/shards --epochs 3-4 --ranks auto --ranks-per-node 8

  # scripts: JSON summary on stdout, Prometheus textfile metrics
  prep convert --plan plan.json --spec features.yaml -o /local/shards --json \
    --metrics-file /var/lib/node_exporter/prep.prom`,
		Args: noArgs("give the plan with --plan PLAN, the tensors with --spec FILE or --tensor, and the output directory with -o DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConvert(cmd.Context(), g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.planPath, "plan", "", "plan file made by prep plan (required)")
	f.StringVar(&o.specPath, "spec", "", "feature spec (YAML)")
	f.StringVar(&o.sourceRoot, "source-root", "", "directory or s3:// URL holding the source files, when they are not where the plan was made (default: the plan's source root)")
	f.StringArrayVar(&o.tensors, "tensor", nil, "tensor NAME=COL[,COL...]:DTYPE[:SHAPE] or NAME=COL:DTYPE:jagged (repeatable; added after the spec's tensors)")
	f.StringVarP(&o.output, "output", "o", "", "output shard set directory (required)")
	f.StringVar(&o.epochs, "epochs", "", "epochs to write, e.g. 0-2 or 0,3 (default all)")
	f.StringVar(&o.ranks, "ranks", "", "ranks to write, e.g. 0-7 or 2,5; auto reads the launcher's rank variables (default all)")
	f.IntVar(&o.jobs, "jobs", 0, "parallel column chunks and shards, at most 1024 (default: number of CPUs)")
	f.StringVar(&o.memoryLimit, "memory-limit", defaultMemoryLimit, "bound on memory proportional to the data: staging kept in memory (at most half; larger staging spills to DIR/.prep-tmp by output window), decoded column chunks in flight and the garbage they leave; at least 1MiB, e.g. 512MiB, 4GiB")
	f.BoolVar(&o.force, "force", false, "replace an output made from another plan, source or spec")
	f.BoolVar(&o.asJSON, "json", false, "print the summary as JSON on stdout")
	addRankFlags(cmd, &o.ops)
	addMetricsFlag(cmd, &o.ops)
	addIOFlags(cmd, &o.io)
	return cmd
}

func runConvert(ctx context.Context, g *globalOptions, o *convertOptions) (err error) {
	start := time.Now()
	var sum *convert.Summary
	var srcStats *source.S3Stats // set before the metrics are written
	defer func() {
		s := convertSummary(sum)
		s.Source = srcStats
		writeMetrics(g, &o.ops, "convert", o.output, start, s, err)
	}()
	if ctx == nil {
		ctx = context.Background()
	}
	// Ctrl-C or SIGTERM stops cleanly: committed shards stay, temporaries
	// and the lock go.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal asks for that clean stop; a run blocked where it
	// does not watch ctx (a named pipe given as --plan, a hung file
	// system) never gets there, so the next signal ends the process.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if o.planPath == "" || o.output == "" {
		return usagef("--plan and -o are required")
	}
	if o.specPath == "" && len(o.tensors) == 0 {
		return usagef("give a feature spec with --spec or tensors with --tensor")
	}
	mem, err := parseMemoryLimit(o.memoryLimit)
	if err != nil {
		return err
	}
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	setGoMemoryLimit(mem)
	var epochs []int // nil: every epoch
	if strings.TrimSpace(o.epochs) != "" {
		epochs, err = launcher.ParseList(o.epochs, 0)
	}
	if err != nil {
		return usagef("--epochs: %v", err)
	}
	spec := &feature.Spec{}
	if o.specPath != "" {
		if spec, err = feature.LoadSpec(o.specPath); err != nil {
			return err
		}
	}
	extra, err := feature.ParseTensorFlags(o.tensors)
	if err != nil {
		return usagef("%v", err)
	}
	spec.Tensors = append(spec.Tensors, extra...)
	if err := spec.Validate(); err != nil {
		// LoadSpec validated the file's tensors, so the fault is in a
		// --tensor flag (or its name clashes with the file's): a flag error.
		return usagef("--tensor: %v", err)
	}
	p, planBytes, err := plan.LoadBytes(o.planPath)
	if err != nil {
		return err
	}
	// The plan names files relative to its source root, which its
	// fingerprint does not cover: the same data mounted elsewhere is the
	// same plan. OUT/plan.json keeps the plan file's bytes either way.
	for _, e := range epochs {
		if e >= p.Config.Epochs {
			return usagef("--epochs: epoch %d is not in the plan, which has epochs 0-%d", e, p.Config.Epochs-1)
		}
	}
	if err := o.io.check(); err != nil {
		return err
	}
	// Object-store read-ahead takes its share of --memory-limit.
	readAhead := readAheadShare(mem)
	store, remote, err := planStore(ctx, p, o.sourceRoot, &o.io, readAhead)
	if err != nil {
		return err
	}
	if remote != nil {
		defer func() { srcStats = remote.stats() }()
		defer remote.close()
	}
	ranks, err := resolveRanks(o.ranks, p.Config.WorldSize, os.Getenv, &o.ops)
	if err != nil {
		return err
	}
	var bar *progress
	// The write stage draws one bar over all shards, labelled with the
	// shard written last started: shards are written Jobs at a time, so
	// one bar per shard would interleave on the terminal.
	var shardsDone, shardsTotal int
	shardLabel := func(epoch, rank int) string {
		return fmt.Sprintf("write epoch %d rank %d (%d/%d shards)", epoch, rank, shardsDone, shardsTotal)
	}
	lastEpoch, lastRank := 0, 0
	opts := convert.Options{
		Plan: p, PlanBytes: planBytes, Spec: spec, Output: o.output, Epochs: epochs, Ranks: ranks,
		Jobs: o.jobs, MemoryLimit: mem, ObjectStore: remote != nil, Force: o.force, Source: store,
		ToolVersion: buildVersion().tool(), Logger: g.log, HeapLimit: setGoMemoryLimit,
		OnStage: func(stage string, rows, bytes int64) {
			bar.Finish()
			if stage == convert.StageDecode {
				bar = g.newRowProgress("decode", rows)
			} else {
				bar = g.newProgress("write", bytes)
				if per := int64(p.Steps()) * int64(p.BatchSize()); per > 0 {
					shardsTotal = int(rows / per)
				}
			}
		},
		OnShard: func(epoch, rank int, done bool) {
			if done {
				shardsDone++
			} else {
				lastEpoch, lastRank = epoch, rank
			}
			bar.SetLabel(shardLabel(lastEpoch, lastRank))
		},
		Progress: func(stage string, rows, bytes int64) {
			if stage == convert.StageDecode {
				if remote != nil {
					bar.SetLabel("decode, " + remote.fetchLabel()) // bytes fetched so far
				}
				bar.Add(rows, rows) // the decode bar counts rows
			} else {
				bar.Add(rows, bytes)
			}
		},
	}
	sum, err = convert.Run(ctx, opts)
	bar.Finish()
	// A missing file's *source.ChangedError suggests --source-root itself.
	if err != nil {
		return err
	}
	st := remote.stats()
	if o.asJSON {
		return newJSONEncoder(g.stdout).Encode(struct {
			*convert.Summary
			Source *source.S3Stats `json:"source,omitempty"`
		}{sum, st})
	}
	out := g.summary()
	_, err = fmt.Fprintf(out, "%s: %s written (%d already complete), %s, %s in %.2fs (%.0f MB/s); decoded %s from %s (%d skipped); peak RSS %s, peak heap %s\n",
		sum.Output, count(sum.Shards, "shard"), sum.SkippedShards, count(sum.Rows, "sample"), formatBytes(sum.Bytes), sum.Seconds, sum.MBPerSecond,
		count(sum.SamplesDecoded, "source row"), count(sum.RowGroupsRead, "row group"), sum.RowGroupsSkipped, formatBytes(sum.PeakRSSBytes), formatBytes(sum.PeakHeapBytes))
	if err == nil && st != nil {
		_, err = fmt.Fprintln(out, sourceLine(st))
	}
	if err == nil && sum.RowGroupsSliced > 0 {
		_, err = fmt.Fprintf(out, "%s would not fit --memory-limit decoded whole: decoded in %s, which costs decode time (a larger --memory-limit or smaller row groups avoid it)\n",
			count(sum.RowGroupsSliced, "row group"), count(sum.RowSlices, "row slice"))
	}
	if err == nil && sum.SpillWindows > 0 {
		_, err = fmt.Fprintf(out, "staging (%s) exceeded --memory-limit: spilled %s to disk in %s\n",
			formatBytes(sum.StagingBytes), formatBytes(sum.SpillBytes), count(sum.SpillWindows, "output window"))
	}
	if err == nil && sum.ValuesArenaFile {
		_, err = fmt.Fprintf(out, "jagged values (up to %s) did not fit half of --memory-limit beside the staging: kept in a file under %s\n",
			formatBytes(sum.ValuesArenaBytes), convert.TempDirName)
	}
	if err == nil && len(sum.Overflows) > 0 {
		_, err = fmt.Fprintf(out, "overflows (values too large for the dtype, stored as ±Inf or ±448): %s\n", formatCounts(sum.Overflows))
	}
	return err
}

// setGoMemoryLimit gives the Go runtime a soft memory limit of heapBytes
// (at least minGoMemoryLimit), so that the garbage collector keeps the
// heap, garbage included, within the part of --memory-limit left to it:
// prep convert sets it to the whole limit first, then to what convert
// leaves the Go heap beside its anonymous staging (Options.HeapLimit);
// prep verify to the whole limit. Without it the collector lets garbage
// grow the heap to twice the live bytes and more. GOMEMLIMIT, when set,
// is left as the user set it.
func setGoMemoryLimit(heapBytes int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetMemoryLimit(min(math.MaxInt64, max(minGoMemoryLimit, heapBytes)))
}

// minGoMemoryLimit is the least soft memory limit setGoMemoryLimit sets:
// below it the collector would run almost continuously over the runtime's
// own few MiB. It is part of the constant by which peak RSS may exceed
// --memory-limit (BENCHMARKS.md, Memory limit).
const minGoMemoryLimit = 64 << 20

// formatCounts renders name counts sorted by name: "a=3, b=12".
func formatCounts(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// parseByteSize parses a byte size: a number with an optional unit B, KB, MB,
// GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), from 1 byte
// up to the int64 limit.
// defaultMemoryLimit is the default of every --memory-limit flag:
// feature.DefaultMemoryLimit, in GiB.
var defaultMemoryLimit = fmt.Sprintf("%dGiB", feature.DefaultMemoryLimit>>30)

// parseMemoryLimit parses a --memory-limit value (parseByteSize's syntax)
// of at least feature.MinMemoryLimit; any other value is a usage error
// (exit code 2) naming the flag, and one below the minimum gives it.
func parseMemoryLimit(s string) (int64, error) {
	n, err := parseByteSize(s)
	if err != nil {
		return 0, usagef("--memory-limit: %v", err)
	}
	if n < feature.MinMemoryLimit {
		return 0, usagef("--memory-limit %s is below the minimum of %s (row groups would be read a few rows at a time)", strings.TrimSpace(s), formatBytes(feature.MinMemoryLimit))
	}
	return n, nil
}

func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	mult := map[string]int64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}[strings.ToUpper(strings.TrimSpace(t[i:]))]
	if mult == 0 {
		return 0, fmt.Errorf("bad size unit in %q", s)
	}
	if n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is not between 1 byte and 8 EiB", s)
	}
	return n * mult, nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
