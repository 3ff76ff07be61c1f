package main

// Operations helpers shared by convert and gc: rank selection from a
// launcher's variables (--ranks auto, --ranks-per-node, --launcher) and the
// Prometheus textfile metrics (--metrics-file).

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/convert"
	"github.com/prepml/prep/internal/launcher"
	"github.com/prepml/prep/internal/metrics"
	"github.com/prepml/prep/source"
)

// opsOptions are the operations flags a command adds with addOpsFlags.
type opsOptions struct {
	ranksPerNode    int
	ranksPerNodeSet bool // --ranks-per-node given, even as 0
	launcher        string
	perProcess      bool
	metricsFile     string
}

// addRankFlags registers --ranks-per-node, --launcher and --per-process, the
// companions of --ranks auto.
func addRankFlags(cmd *cobra.Command, o *opsOptions) {
	f := cmd.Flags()
	f.Var(setInt{&o.ranksPerNode, &o.ranksPerNodeSet}, "ranks-per-node", "with --ranks auto: training ranks per node, for launchers that start prep once per node (Slurm job array, Kubernetes Indexed Job, srun/torchrun with one task per node)")
	f.StringVar(&o.launcher, "launcher", "auto", "with --ranks auto: read the variables of this launcher: auto, torchrun, slurm or kubernetes")
	f.BoolVar(&o.perProcess, "per-process", false, "with --ranks auto: take only this process's own rank instead of its node's ranks")
}

// setInt is an int flag value that records whether the flag was given, so
// an explicit 0 is told from the default.
type setInt struct {
	v   *int
	set *bool
}

func (f setInt) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.Itoa(*f.v)
}

func (f setInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	*f.v, *f.set = n, true
	return nil
}

func (f setInt) Type() string { return "int" }

// maxJobs bounds --jobs: each job holds goroutines and buffers (a batch
// block, a decoded column chunk), so a mistyped count would take memory
// --memory-limit does not bound. 1024 is well above the CPU count of the
// training nodes prep runs on.
const maxJobs = 1024

// checkJobs returns a usage error for a --jobs value outside [0, maxJobs]
// (0 is the default: the number of CPUs).
func checkJobs(n int) error {
	switch {
	case n < 0:
		return usagef("--jobs must be >= 0, not %d", n)
	case n > maxJobs:
		return usagef("--jobs %d exceeds the limit of %d", n, maxJobs)
	}
	return nil
}

// addMetricsFlag registers --metrics-file.
func addMetricsFlag(cmd *cobra.Command, o *opsOptions) {
	cmd.Flags().StringVar(&o.metricsFile, "metrics-file", "", "write Prometheus text metrics of this run to PATH atomically (for node_exporter's textfile collector; name it *.prom)")
}

// resolveRanks turns a --ranks value into this node's ranks for a plan of
// worldSize ranks: "" or "all" gives every rank, "auto" asks the launcher
// (see internal/launcher for the rules), anything else is a list such as
// "0,2,4-7". A malformed value is a usage error (exit 2); launcher variables
// that are missing, inconsistent or disagree with the plan fail the run
// (exit 1) with a message naming the variables and their values.
func resolveRanks(spec string, worldSize int, env func(string) string, o *opsOptions) ([]int, error) {
	if o == nil {
		o = &opsOptions{}
	}
	if spec != "auto" && (o.ranksPerNode != 0 || o.ranksPerNodeSet || o.perProcess || (o.launcher != "" && o.launcher != "auto")) {
		return nil, usagef("--ranks-per-node, --per-process and --launcher apply only to --ranks auto")
	}
	switch spec {
	case "", "all":
		out := make([]int, worldSize)
		for i := range out {
			out[i] = i
		}
		return out, nil
	case "auto":
		kind := launcher.Kind(o.launcher)
		switch kind {
		case "auto":
			kind = launcher.Auto
		case launcher.Auto, launcher.Torchrun, launcher.Slurm, launcher.Kubernetes:
		default:
			return nil, usagef("--launcher must be auto, torchrun, slurm or kubernetes, not %q", o.launcher)
		}
		if o.ranksPerNode < 0 || o.ranksPerNodeSet && o.ranksPerNode == 0 {
			return nil, usagef("--ranks-per-node must be positive, not %d", o.ranksPerNode)
		}
		if o.perProcess && o.ranksPerNode > 0 {
			return nil, usagef("--per-process and --ranks-per-node are exclusive")
		}
		r, err := launcher.Detect(env, launcher.Options{Launcher: kind, RanksPerNode: o.ranksPerNode, PerProcess: o.perProcess, PlanWorldSize: worldSize})
		if errors.Is(err, launcher.ErrNeedRanksPerNode) {
			return nil, fmt.Errorf("--ranks auto: %w; set --ranks-per-node", err)
		}
		if err != nil {
			return nil, fmt.Errorf("--ranks auto: %w", err)
		}
		return r.Ranks, nil
	}
	r, err := launcher.ParseList(spec, worldSize)
	if err != nil {
		return nil, usagef("--ranks: %v", err)
	}
	return r, nil
}

// runSummary is what a command reports to the metrics file.
type runSummary struct {
	Rows          int64
	Bytes         int64
	ShardsWritten int64
	ShardsSkipped int64
	PeakRSSBytes  int64 // 0: not reported
	SpillBytes    int64
	Source        *source.S3Stats // object-store traffic; nil for local sources
}

// writeMetrics records a finished run in o.metricsFile (nothing when unset).
// runErr is the command's result: nil counts as a success. A failure to
// write the metrics is logged, never turned into the command's error, so
// monitoring cannot fail a good run.
func writeMetrics(g *globalOptions, o *opsOptions, command, output string, start time.Time, s runSummary, runErr error) {
	if o == nil || o.metricsFile == "" {
		return
	}
	end := time.Now()
	r := metrics.Run{
		Command: command, Output: output,
		Rows: s.Rows, Bytes: s.Bytes, ShardsWritten: s.ShardsWritten, ShardsSkipped: s.ShardsSkipped,
		PeakRSSBytes: s.PeakRSSBytes, SpillBytes: s.SpillBytes,
		Duration: end.Sub(start), End: end, Success: runErr == nil,
	}
	if st := s.Source; st != nil {
		r.SourceRequests, r.SourceRetries, r.SourceBytesFetched, r.SourceBytesNeeded = st.Requests, st.Retries, st.BytesFetched, st.BytesNeeded
	}
	err := metrics.WriteFile(o.metricsFile, r)
	if err != nil && g.log != nil {
		g.log.Warn("metrics not written", "path", o.metricsFile, "err", err.Error())
	}
}

// convertSummary is the metrics view of a convert run's summary (zero when
// the run failed before producing one).
func convertSummary(sum *convert.Summary) runSummary {
	if sum == nil {
		return runSummary{}
	}
	return runSummary{Rows: sum.Rows, Bytes: sum.Bytes, ShardsWritten: int64(sum.Shards), ShardsSkipped: int64(sum.SkippedShards),
		PeakRSSBytes: sum.PeakRSSBytes, SpillBytes: sum.SpillBytes}
}
