package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/gc"
	"github.com/prepml/prep/internal/launcher"
)

func init() { subcommands = append(subcommands, newGCCmd) }

// gcOptions are the flags of prep gc.
type gcOptions struct {
	keepFrom int
	dryRun   bool
	asJSON   bool
	ops      opsOptions
}

func newGCCmd(g *globalOptions) *cobra.Command {
	o := &gcOptions{keepFrom: -1}
	cmd := &cobra.Command{
		Use:   "gc OUT --keep-from-epoch E",
		Short: "Delete the shards of epochs before E from a shard set",
		Long: `gc deletes the shards of every epoch below E from the shard set in OUT, so a
node's disk holds a sliding window of epochs while training consumes them:

  prep convert --plan plan.json --spec features.yaml -o OUT --epochs 3-4
  prep gc OUT --keep-from-epoch 3

gc takes the same lock as convert (OUT/.prep.lock; exit 3 when another run
holds it; a --dry-run on a read-only file system goes without). It rewrites manifest.json atomically without the old entries
first, then deletes their files and the epoch directories left empty, so a
crash at any point leaves a manifest that lists only complete shards; shard
files of old epochs that a crash left unlisted (and unfinished temporary
shards) are deleted by the next gc.

Output: one line per deleted file, then a summary. --json prints one object:
  {"dir": str, "keep_from_epoch": int, "dry_run": bool,
   "removed": [{"path": str, "epoch": int, "rank": int, "size": int,
                "listed": bool}, ...],
   "removed_dirs": [str, ...], "freed_bytes": int, "kept": int,
   "kept_epochs": [int, ...]}

Exit status: 0 done, 1 failed, 2 usage error, 3 OUT is locked by another run.`,
		Example: `  prep gc /local/shards --keep-from-epoch 3
  prep gc /local/shards --keep-from-epoch 3 --dry-run --json`,
		Args: oneArg("the shard set directory (OUT)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGC(g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.keepFrom, "keep-from-epoch", -1, "first epoch to keep; shards of earlier epochs are deleted (required)")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would be deleted and change nothing")
	f.BoolVar(&o.asJSON, "json", false, "print the result as JSON on stdout")
	addMetricsFlag(cmd, &o.ops)
	return cmd
}

func runGC(g *globalOptions, o *gcOptions, dir string) (err error) {
	if o.keepFrom < 0 {
		return usagef("--keep-from-epoch E (E >= 0) is required")
	}
	// Name a missing or non-directory OUT plainly, before the lock file
	// (whose open error would otherwise be the message).
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("shard set %s: %w", dir, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("shard set %s: not a directory", dir)
	}
	start := time.Now()
	var res *gc.Result
	defer func() {
		if o.dryRun {
			return
		}
		writeMetrics(g, &o.ops, "gc", dir, start, runSummary{}, err)
	}()
	res, err = gc.Run(dir, gc.Options{KeepFromEpoch: o.keepFrom, DryRun: o.dryRun})
	if err != nil {
		return err
	}
	if res.Stale != nil && g.log != nil {
		g.log.Warn("took over a stale lock left by a killed run", "output", dir, "stale_pid", res.Stale.PID, "stale_host", res.Stale.Host)
	}
	if o.asJSON {
		return newJSONEncoder(g.stdout).Encode(res)
	}
	out := g.summary()
	verb := "removed"
	if res.DryRun {
		verb = "would remove"
	}
	for _, s := range res.Removed {
		note := ""
		if !s.Listed {
			note = " (unlisted)"
		}
		fmt.Fprintf(out, "%s %s%s\n", verb, s.Path, note)
	}
	for _, d := range res.RemovedDirs {
		fmt.Fprintf(out, "%s %s/\n", verb, d)
	}
	if res.TempBytes > 0 {
		fmt.Fprintf(out, "%s %s/ (%s left by a killed convert)\n", verb, gc.TempDirName, count(res.TempBytes, "byte"))
	}
	fmt.Fprintf(out, "%s %s, %s; %s kept (epochs %s)\n",
		verb, count(len(res.Removed), "file"), count(res.FreedBytes, "byte"), count(res.Kept, "shard"), formatEpochs(res.KeptEpochs))
	return nil
}

// formatEpochs renders ascending epochs as "3-4,7" or "none".
func formatEpochs(e []int) string {
	if len(e) == 0 {
		return "none"
	}
	return launcher.FormatList(e)
}
