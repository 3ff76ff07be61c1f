package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/describe"
	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardset"
	"github.com/prepml/prep/source"
)

// packedPieces returns, for a shard set of a packed plan, the function
// naming the documents of each packed row of epoch (the epoch's packing
// recomputed from the source's token lengths and checked against the
// plan); nil otherwise.
func packedPieces(ctx context.Context, dir, sourceRoot string, epoch int, io *s3Flags) (func([]uint64) ([][]plan.Piece, error), error) {
	set, err := shardset.OpenDir(dir)
	if err != nil {
		return nil, nil // not a set: Export reports what it finds
	}
	p, err := set.Plan() // refuses a plan copy that is a symbolic link
	set.Close()
	if err != nil || p.Packing == nil {
		return nil, nil // not packed, or no readable plan copy: Export reports what it finds
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ps, err := source.OpenPlanStore(ctx, p.Source, sourceRoot, io.storeOptions(0))
	if err != nil {
		return nil, storeError(err, sourceRoot)
	}
	defer ps.Close()
	lay, err := feature.ReadPackLayout(ctx, ps.Store, p, epoch, 0)
	if err != nil {
		return nil, fmt.Errorf("naming the documents of packed rows: %w", err)
	}
	return func(ids []uint64) ([][]plan.Piece, error) {
		out := make([][]plan.Piece, len(ids))
		for i, id := range ids {
			row, ok := lay.RowOf(id)
			if !ok {
				return nil, fmt.Errorf("packed row %d not in epoch %d's rows [%d, %d)", id, epoch, lay.First, lay.First+lay.Rows())
			}
			out[i] = row
		}
		return out, nil
	}, nil
}

func init() { subcommands = append(subcommands, newExportCmd) }

// exportOptions are the flags of prep export.
type exportOptions struct {
	epoch, rank, step int
	outDir            string
	asJSON            bool
	sourceRoot        string
	io                s3Flags
}

func newExportCmd(g *globalOptions) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export OUT --epoch E --rank R --step K -o DIR",
		Short: "Write one batch of a shard set as NumPy .npy files",
		Long: `export writes rank R's batch of step K (--step) in epoch E, exactly as the
trainer receives it, into DIR as NumPy files (format 1.0, little-endian):

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

A shard set of a packed plan (prep plan --pack) also gives, from the
packing recomputed from the source's token lengths (--source-root when the
source moved):

  documents.npy          <i8 [M, 3]: the pieces of the count packed rows,
                         one after another: (document sample id, offset,
                         length) in the document's tokens (EOD included)
  documents_offsets.npy  <i8 [count+1]: row i's pieces are rows
                         [offsets[i], offsets[i+1]) of documents.npy
  documents_sources.npy  <i4 [M], a packed mixture only: each piece's
                         source (an index into the sources listed)

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
			err := checkSetRange(args[0], o.epoch, o.rank, o.step)
			if err != nil {
				return err
			}
			eo := describe.ExportOptions{Dir: args[0], Epoch: o.epoch, Rank: o.rank, Step: o.step, OutDir: o.outDir}
			if eo.Pieces, err = packedPieces(cmd.Context(), args[0], o.sourceRoot, o.epoch, &o.io); err != nil {
				return err
			}
			res, err := describe.Export(eo)
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
			for _, row := range res.Rows {
				var docs []string
				for _, pc := range row.Pieces {
					d := fmt.Sprintf("%d[%d:%d]", pc.Doc, pc.Offset, pc.Offset+pc.Len)
					if pc.Source != "" {
						d += "@" + pc.Source
					}
					docs = append(docs, d)
				}
				fmt.Fprintf(out, "packed row %d: %s\n", row.ID, strings.Join(docs, " "))
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
	f.StringVar(&o.sourceRoot, "source-root", "", "packed shard sets: directory or s3:// URL holding the source files, read to name each packed row's documents (default: the plan's source root)")
	addIOFlags(cmd, &o.io)
	_ = cmd.MarkFlagRequired("epoch")
	_ = cmd.MarkFlagRequired("rank")
	_ = cmd.MarkFlagRequired("step")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
