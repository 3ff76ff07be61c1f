package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/verify"
)

// deepPartsWarn is the number of parts of a --deep check from which verify
// warns that its --memory-limit costs passes over the shard set.
const deepPartsWarn = 8

func init() { subcommands = append(subcommands, newVerifyCmd) }

// verifyOptions are the flags of prep verify.
type verifyOptions struct {
	deep       deepFlag
	planPath   string
	sourceRoot string
	seed       uint64
	jobs       int
	partial    bool
	maxPer     int
	asJSON     bool
	recompute  bool
	readMode   string
	memLimit   string
	io         s3Flags
}

// deepFlag is --deep[=FRACTION]: off, on with the default fraction, or a
// fraction in (0, 1].
type deepFlag struct {
	on       bool
	fraction float64
}

func (d *deepFlag) String() string {
	if !d.on {
		return "false"
	}
	if d.fraction == 0 {
		return "true"
	}
	return strconv.FormatFloat(d.fraction, 'g', -1, 64)
}

func (d *deepFlag) Set(s string) error {
	switch s {
	case "true", "":
		d.on, d.fraction = true, 0
		return nil
	case "false":
		d.on, d.fraction = false, 0
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return fmt.Errorf("want a fraction in (0, 1], not %q", s)
	}
	d.on, d.fraction = true, f
	return nil
}

func (d *deepFlag) Type() string { return "fraction" }

// sourceOpener returns the --deep value reader (verify.FeatureSource, the
// decoder convert writes shards with) over the stores of store, under the
// --memory-limit mem. Tests replace it.
var sourceOpener = verify.FeatureSource

func newVerifyCmd(g *globalOptions) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify OUT",
		Short: "Check a shard set: structure, checksums, plan order and (--deep) source values",
		Long: `verify checks the shard set in OUT before training and reports every
finding, not just the first:

  structure    manifest.json present and consistent; every listed shard exists
               with the listed size (checked before the file is mapped) and
               digest; no unlisted, temporary or lock files; every shard's
               header, tables and footer valid
  integrity    every batch block's CRC-32C, shards checked --jobs at a time,
               read with pread (--read-mode pread, the default) or in place
               through a read-only mapping (--read-mode mmap: no copy out
               of the page cache, but a page-table update per 4 KiB page,
               slower on some virtual machines; a shard cut short while
               mapped is a size_mismatch finding either way)
  plan         against the plan (OUT/plan.json or --plan): each batch's
               sample ids, count and pads are the plan's for that (epoch,
               rank); every rank has the plan's number of steps. An epoch
               whose every rank is present is checked against the epoch
               digest the plan file records; --recompute-plan (implied by
               --deep) recomputes every batch from the plan's inputs instead
  source       with --deep[=FRACTION]: source files unchanged since the plan
               (size and footer hash), and for a seeded sample of batches
               (all when the set is at most 1 GiB, else 1 GiB's worth, or
               FRACTION of them) every value re-read from the source
               Parquet through the feature spec, compared bit for bit;
               for a jagged tensor every offset and value: a sample
               holding another number of values is a value_mismatch with
               "what": "values count", a differing value one with the
               element index counted across the sample's values

Each finding is one line on stdout, then "N findings". Exit status: 0 when
clean, 1 when anything is wrong, 2 on usage errors.

--json prints one JSON object instead:
  {"dir": str, "plan": str, "shards": int, "batches": int, "bytes": int,
   "deep_batches": int, "deep_parts": int, "seconds": float, "ok": bool,
   "finding_count": int,
   "findings": [{"kind": str, "shard": str, "epoch": int, "rank": int,
     "batch": int, "tensor": str, "sample_id": int, "element": int,
     "what": str, "expected": str, "actual": str, "message": str}, ...]}
deep_parts is the number of parts --deep held the source in to compare it
(0: all at once). Finding keys that do not apply are omitted. Kinds: manifest_invalid,
shard_missing, size_mismatch, digest_mismatch, header_invalid,
shard_identity, unlisted_file, temp_file, io_error, batch_checksum,
plan_invalid, plan_mismatch, steps_unequal, rank_missing, source_changed,
source_unreadable, value_mismatch.`,
		Example: `  prep verify /local/shards
  prep verify /local/shards --deep=0.01 --jobs 8 --json`,
		Args: oneArg("the shard set directory (OUT)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runVerify(cmd, g, o, args[0])
		},
	}
	f := cmd.Flags()
	f.Var(&o.deep, "deep", "compare values with the source Parquet for a FRACTION of batches (default: all when small)")
	f.Lookup("deep").NoOptDefVal = "true"
	f.StringVar(&o.planPath, "plan", "", "plan file to check against (default OUT/plan.json)")
	f.StringVar(&o.sourceRoot, "source-root", "", "directory or s3:// URL holding the source files (default: the plan's source root)")
	addIOFlags(cmd, &o.io)
	f.Uint64Var(&o.seed, "seed", 0, "seed choosing the --deep sample of batches")
	f.IntVar(&o.jobs, "jobs", 0, "shards checked at once, at most 1024 (default GOMAXPROCS)")
	f.BoolVar(&o.partial, "partial", false, "accept a set holding only some of the plan's ranks (one node's share)")
	f.IntVar(&o.maxPer, "max-per-shard", 20, "findings of one kind listed per shard; the rest are counted")
	f.BoolVar(&o.recompute, "recompute-plan", false, "recompute every batch's ids from the plan's inputs instead of trusting the epoch digests in the plan file (slower; implied by --deep)")
	f.StringVar(&o.readMode, "read-mode", string(verify.ReadPread), "how the integrity checks read the shards: pread (copies out of the page cache) or mmap (checks in place through a read-only mapping)")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON on stdout")
	f.StringVar(&o.memLimit, "memory-limit", defaultMemoryLimit, "with --deep: bound on source samples held and column chunks decoded, all shards checked at once together (a row group over it is read in row windows, as by convert), at least 1MiB, e.g. 512MiB")
	return cmd
}

func runVerify(cmd *cobra.Command, g *globalOptions, o *verifyOptions, dir string) error {
	if err := checkJobs(o.jobs); err != nil {
		return err
	}
	if m := verify.ReadMode(o.readMode); m != verify.ReadPread && m != verify.ReadMmap {
		return usagef("--read-mode must be %s or %s, not %q", verify.ReadPread, verify.ReadMmap, o.readMode)
	}
	if o.maxPer < 1 {
		return usagef("--max-per-shard must be >= 1, not %d", o.maxPer)
	}
	mem, err := parseMemoryLimit(o.memLimit)
	if err != nil {
		return err
	}
	setGoMemoryLimit(mem)
	if err := o.io.check(); err != nil {
		return err
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// One Store per source root, an object store's client shared by the
	// fingerprint check and every shard's deep source.
	stores := &storeCache{ctx: ctx, io: &o.io, readAhead: readAheadShare(mem)}
	defer stores.close()
	sourceRoot := o.sourceRoot
	bar := g.newProgress("verify", -1)
	opts := verify.Options{
		Dir: dir, PlanPath: o.planPath, Deep: o.deep.on, DeepFraction: o.deep.fraction, Seed: o.seed,
		Source: sourceOpener(stores.store, mem), SourceRoot: sourceRoot, Store: stores.store, Jobs: o.jobs, AllowPartial: o.partial, MaxPerShard: o.maxPer,
		Progress:      func(n int64) { bar.Add(0, n) },
		RecomputePlan: o.recompute,
		ReadMode:      verify.ReadMode(o.readMode),
		MemoryLimit:   mem,
		OnDeepParts: func(parts int, onePart int64) {
			if parts >= deepPartsWarn && g.log != nil {
				g.log.Warn("--deep holds the source in parts: each part reads every shard's sample ids, and the blocks holding its samples, again; a larger --memory-limit needs fewer passes",
					"parts", parts, "memory_limit", formatBytes(mem), "one_part_limit", formatBytes(onePart))
			}
		},
	}
	rep, err := verify.Run(ctx, opts)
	bar.Finish()
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := newJSONEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Findings {
			fmt.Fprintln(g.stdout, f.String())
		}
		fmt.Fprintf(g.summary(), "%s (%s, %s, %.1f MB checked, %s compared with the source, %.2fs)\n",
			count(rep.FindingCount, "finding"), count(rep.Shards, "shard"), count(rep.Batches, "batch"), float64(rep.Bytes)/1e6,
			count(rep.DeepBatches, "batch"), rep.Seconds)
	}
	if !rep.OK {
		return silentError{exitFailed}
	}
	return nil
}
