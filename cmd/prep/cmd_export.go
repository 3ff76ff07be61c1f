package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/verify"
)

func init() { subcommands = append(subcommands, newExportCmd) }

// exportOptions are the flags of prep export.
type exportOptions struct {
	epoch, rank, step int
	outDir            string
	asJSON            bool
}

func newExportCmd(g *globalOptions) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export OUT --epoch E --rank R --step K -o DIR",
		Short: "Write one batch of a shard set as NumPy .npy files",
		Long: `export writes batch K of rank R's shard for epoch E, exactly as the trainer
receives it, into DIR as NumPy files (format 1.0, little-endian):

  <tensor>.npy     shape [count, per-sample shape...]; dtypes BOOL |b1,
                   U8 |u1, I8 |i1, U16 <u2, I16 <i2, U32 <u4, I32 <i4,
                   U64 <u8, I64 <i8, F16 <f2, F32 <f4, F64 <f8.
                   BF16 is written as its raw bits in <u2 and F8_E4M3 /
                   F8_E5M2 as raw bits in |u1 (NumPy has no such types; view
                   them with ml_dtypes, e.g. a.view(ml_dtypes.bfloat16)).
  sample_ids.npy   <i8 [count]: the source row index of each sample
  pad_mask.npy     |b1 [count]: true for pad samples (remainder "pad")
  sample_sources.npy  <i4 [count]: each sample's source, an index into the
                   plan's mixture sources (plans made with --sources only;
                   --json lists the names as "sources")

A jagged tensor (a variable number of values per sample) gives two files:

  <tensor>.npy          its values, shape [N, per-value shape...], in its
                        dtype: the count samples' values one after another
  <tensor>_offsets.npy  <i8 [count+1]: sample i's values are
                        values[offsets[i]:offsets[i+1]]; offsets[0] = 0,
                        offsets[count] = N

count is the number of present samples, pads included (unused slots of a
short batch are not written). '/' in a tensor name becomes '_' in its file
name; two tensors needing one file name are an error. The batch checksum
(and a jagged tensor's offsets) are verified first. One step per run: run
export once per step for several.`,
		Example: `  prep export /local/shards --epoch 0 --rank 3 --step 0 -o /tmp/batch0
  python3 -c 'import numpy as np; print(np.load("/tmp/batch0/sample_ids.npy"))'
  # a jagged tensor "tokens": sample 2's list
  python3 -c 'import numpy as np; v = np.load("/tmp/batch0/tokens.npy"); o = np.load("/tmp/batch0/tokens_offsets.npy"); print(v[o[2]:o[3]])'`,
		Args: oneArg("the shard set directory (OUT)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.epoch < 0 || o.rank < 0 || o.step < 0 {
				return usagef("--epoch, --rank and --step must be >= 0")
			}
			if err := checkSetRange(args[0], o.epoch, o.rank); err != nil {
				return err
			}
			res, err := verify.Export(verify.ExportOptions{Dir: args[0], Epoch: o.epoch, Rank: o.rank, Step: o.step, OutDir: o.outDir})
			if err != nil {
				return err
			}
			if o.asJSON {
				enc := newJSONEncoder(g.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			out := g.summary()
			for _, f := range res.Files {
				fmt.Fprintf(out, "%s\t%s %v\n", f.File, f.Descr, f.Shape)
			}
			fmt.Fprintf(out, "epoch %d rank %d step %d: %s (%s) from %s\n",
				res.Epoch, res.Rank, res.Step, count(res.Count, "sample"), count(res.Pads, "pad"), res.Shard)
			if len(res.Sources) > 0 {
				fmt.Fprintf(out, "sources (sample_sources.npy indexes them): %s\n", strings.Join(res.Sources, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.epoch, "epoch", 0, "epoch")
	f.IntVar(&o.rank, "rank", 0, "rank")
	f.IntVar(&o.step, "step", 0, "step (batch index within the rank's epoch)")
	f.StringVarP(&o.outDir, "output", "o", "", "directory to write the .npy files into (created if missing)")
	f.BoolVar(&o.asJSON, "json", false, "print what was written as JSON on stdout")
	_ = cmd.MarkFlagRequired("epoch")
	_ = cmd.MarkFlagRequired("rank")
	_ = cmd.MarkFlagRequired("step")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
