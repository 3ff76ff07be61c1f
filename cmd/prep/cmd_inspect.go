package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/describe"
)

func init() { subcommands = append(subcommands, newInspectCmd) }

// inspectOptions are the flags of prep inspect.
type inspectOptions struct {
	asJSON     bool
	maxBatches int
}

func newInspectCmd(g *globalOptions) *cobra.Command {
	o := &inspectOptions{}
	cmd := &cobra.Command{
		Use:   "inspect PATH",
		Short: "Show the structure of a shard, a shard set, a plan or a Parquet file",
		Long: `inspect describes PATH without reading batch data:

  a shard file      its layout (regions with offsets and sizes), provenance,
                    tensors (dtype, per-sample shape, bytes per sample, slab
                    offset and size in a block) and batch table (offset,
                    count, pads, CRC-32C, first and last sample id)
  a shard set dir   (holding manifest.json) a table of epochs x ranks with
                    each shard's size, batches and status (ok, absent,
                    missing, size_mismatch, invalid)
  a plan file       its inputs (source, seed, epochs, global batch, world
                    size, workers, shuffle, remainder) and derived counts;
                    for a mixture (--sources) each source's weight, filter,
                    rows and samples drawn per epoch
  a Parquet file    its rows, row groups and columns (the names a feature
                    spec's column keys take, physical and logical type,
                    nullability), from the footer alone

A shard set with a listed shard missing, of the wrong size or invalid is
shown in full, then the command exits 1 naming each damaged shard.

--json prints {"kind": "shard"|"shard_set"|"plan"|"parquet", "shard"|"set"|"plan"|"parquet": {...}}
with the fields shown in the text form.`,
		Example: `  prep inspect /local/shards
  prep inspect /local/shards/epoch-00000/rank-00000.shard --batches 0
  prep inspect plan.json --json
  prep inspect data/part-0.parquet       # column names for a feature spec`,
		Args: oneArg("a shard, shard set directory, plan file or Parquet file (PATH)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := describe.Inspect(args[0])
			if err != nil {
				return err
			}
			if o.asJSON {
				enc := newJSONEncoder(g.stdout)
				enc.SetIndent("", "  ")
				err = enc.Encode(in)
			} else {
				err = renderInspection(g.stdout, in, o.maxBatches)
			}
			if err != nil {
				return err
			}
			return damagedSet(in)
		},
	}
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print as JSON on stdout")
	cmd.Flags().IntVar(&o.maxBatches, "batches", 20, "batch table rows shown in text form (0: all)")
	return cmd
}

// damagedSet fails a shard set inspection (exit 1) that found listed
// shards missing, of the wrong size or invalid, naming each (the table
// above gives the details); nil otherwise.
func damagedSet(in *describe.Inspection) error {
	if in.Kind != describe.InspectShardSet {
		return nil
	}
	d := in.Set.Damaged()
	if len(d) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s damaged: %s (prep verify %s checks every batch)", in.Set.Dir, count(len(d), "shard"), strings.Join(d, "; "), in.Set.Dir)
}

// renderInspection writes the text form of in: a two-column "name value"
// header, then the tables of its kind; at most maxBatches rows of a shard's
// batch table (0: all).
func renderInspection(w io.Writer, in *describe.Inspection, maxBatches int) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(name, format string, args ...any) { fmt.Fprintf(tw, name+"\t"+format+"\n", args...) }
	fingerprints := func(plan, source, spec string) {
		row("plan", "%s", plan)
		row("source", "%s", source)
		row("spec", "%s", spec)
	}
	switch in.Kind {
	case describe.InspectShard:
		s := in.Shard
		p := s.Provenance
		row("shard", "%s", s.Path)
		row("shard format", "%s", s.ShardFormat)
		row("size", "%d bytes", s.Size)
		row("epoch, rank", "%d, %d (world size %d, %s)", p.Epoch, p.Rank, p.WorldSize, count(p.Workers, "worker"))
		fingerprints(p.PlanFingerprint, p.SourceFingerprint, p.SpecHash)
		row("tool", "%s", p.ToolVersion)
		if s.ShardFormat == "1.0" {
			row("batches", "%d, each %d sample slots in a %d-byte block", s.NumBatches, s.BatchSize, s.BlockSize)
		} else {
			// Blocks differ in size (BATCH table's SIZE); the header holds the largest.
			row("batches", "%d, each %d sample slots in a block of its own size, at most %d bytes", s.NumBatches, s.BatchSize, s.BlockSize)
		}
		fmt.Fprintln(tw, "\nREGION\tOFFSET\tSIZE")
		for _, r := range s.Regions {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", r.Name, r.Offset, r.Size)
		}
		fmt.Fprintln(tw, "\nTENSOR\tDTYPE\tSHAPE\tBYTES/SAMPLE\tSLAB OFFSET\tSLAB SIZE")
		for _, t := range s.Tensors {
			if t.Jagged {
				// Per value, and the slab is the offsets slab.
				fmt.Fprintf(tw, "%s\t%s\tjagged %v\t%d/value\t%d\t%d (offsets)\n", t.Name, t.DType, t.Shape, t.SampleBytes, t.SlabOffset, t.SlabSize)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%d\n", t.Name, t.DType, t.Shape, t.SampleBytes, t.SlabOffset, t.SlabSize)
		}
		fmt.Fprintln(tw, "\nBATCH\tOFFSET\tSIZE\tCOUNT\tPADS\tCRC32C\tFIRST ID\tLAST ID")
		for i, b := range s.Batches {
			if maxBatches > 0 && i == maxBatches {
				fmt.Fprintf(tw, "... %d more\n", len(s.Batches)-i)
				break
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%s\t%d\t%d\n", b.Index, b.Offset, b.Size, b.Count, b.Pads, b.CRC, b.FirstID, b.LastID)
		}
	case describe.InspectShardSet:
		s := in.Set
		row("shard set", "%s", s.Dir)
		row("format", "%s (tool %s)", s.Format, s.ToolVersion)
		if s.ShardFormat != "" {
			row("shard format", "%s", s.ShardFormat)
		} else {
			row("shard format", "1.0 (the manifest records none)")
		}
		fingerprints(s.PlanFingerprint, s.SourceFingerprint, s.SpecHash)
		var ts []string
		for _, t := range s.Tensors {
			if t.Jagged {
				ts = append(ts, fmt.Sprintf("%s %v jagged %v", t.Name, t.DType, t.Shape))
				continue
			}
			ts = append(ts, fmt.Sprintf("%s %v %v", t.Name, t.DType, t.Shape))
		}
		row("tensors", "%s", strings.Join(ts, ", "))
		row("total", "%d bytes in %s x %s", s.TotalBytes, count(len(s.Epochs), "epoch"), count(len(s.Ranks), "rank"))
		fmt.Fprint(tw, "\nEPOCH")
		for _, r := range s.Ranks {
			fmt.Fprintf(tw, "\tRANK %d", r)
		}
		fmt.Fprintln(tw)
		for i, e := range s.Epochs {
			fmt.Fprintf(tw, "%d", e)
			for _, c := range s.Cells[i] {
				if c.Status == "absent" {
					fmt.Fprint(tw, "\t-")
					continue
				}
				fmt.Fprintf(tw, "\t%s %d B %d batches", c.Status, c.Size, c.Batches)
			}
			fmt.Fprintln(tw)
		}
		for i, e := range s.Epochs {
			for j, c := range s.Cells[i] {
				if c.Detail != "" {
					row(fmt.Sprintf("epoch %d rank %d", e, s.Ranks[j]), "%s: %s", c.Path, c.Detail)
				}
			}
		}
		for _, x := range s.Extra {
			row("not in manifest", "%s", x)
		}
	case describe.InspectPlan:
		p := in.Plan
		c := p.Config
		row("plan", "%s", p.Path)
		row("fingerprint", "%s", p.Fingerprint)
		row("source", "%s (%s, %s, %s)", p.SourceRoot, count(p.Files, "file"), count(p.RowGroups, "row group"), count(p.Samples, "sample"))
		row("source fingerprint", "%s", p.SourceFP)
		row("seed", "%d", c.Seed)
		row("epochs", "%d", c.Epochs)
		row("global batch", "%d (world size %d, %d per rank, %s per rank)", c.GlobalBatch, c.WorldSize, p.BatchSize, count(c.Workers, "worker"))
		shuffle := string(c.Shuffle)
		if c.Window > 0 {
			shuffle += fmt.Sprintf(" (window %d)", c.Window)
		}
		row("shuffle", "%s", shuffle)
		row("remainder", "%s", c.Remainder)
		row("steps", "%d per rank per epoch", p.Steps)
		if m := p.Mixture; m != nil {
			drawn, ids := "sample", fmt.Sprintf(" (ids index all %s above)", count(p.Samples, "sample"))
			if p.Packed {
				drawn, ids = "document", "" // packed into the rows that are the samples
			}
			row("mixture", "%s per epoch from %s%s", count(m.EpochSamples, drawn), count(len(m.Sources), "source"), ids)
			for _, s := range m.Sources {
				w := s.Weight
				if w == "" {
					w = "rows"
				}
				rows := "row"
				if s.Filter != "" {
					rows = "selected row"
				}
				text := fmt.Sprintf("weight %s: %d per epoch of %s in %s", w, s.SamplesPerEpoch, count(s.Rows, rows), count(s.Files, "file"))
				if s.Filter != "" {
					text += "; filter " + s.Filter
				}
				row("  "+s.Name, "%s", text)
			}
		}
	case describe.InspectParquet:
		p := in.Parquet
		row("parquet", "%s", p.Path)
		row("size", "%s", count(p.Size, "byte"))
		row("rows", "%d in %s", p.Rows, count(p.RowGroups, "row group"))
		if p.CreatedBy != "" {
			row("created by", "%s", p.CreatedBy)
		}
		fmt.Fprintln(tw, "\nCOLUMN\tPHYSICAL\tLOGICAL\tNULLABLE")
		for _, c := range p.Columns {
			phys, logical, null := c.Physical, c.Logical, "no"
			if c.Width > 0 {
				phys += fmt.Sprintf("(%d)", c.Width)
			}
			if c.List {
				logical = listType(c, p.Columns)
				if c.ElemNullable {
					logical += " (elements nullable)"
				}
			}
			if logical == "" {
				logical = "-"
			}
			if c.Nullable {
				null = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, phys, logical, null)
		}
	}
	return tw.Flush()
}

// listType is the LOGICAL column of a list leaf: LIST<T>, LIST<LIST<T>>
// for a list of lists, and MAP<K, V> (key) or (value) for a map's leaves,
// K and V the types of the map's key and value leaves (V is STRUCT for a
// value of several fields, and is left out when the map has no value).
func listType(c describe.ParquetColumn, cols []describe.ParquetColumn) string {
	if c.MapRole != "" {
		var key, val []string
		for _, o := range cols {
			if o.Group != c.Group {
				continue
			}
			switch o.MapRole {
			case "key":
				key = append(key, leafType(o))
			case "value":
				val = append(val, leafType(o))
			}
		}
		kv := strings.Join(key, ", ")
		switch {
		case len(val) == 1:
			kv += ", " + val[0]
		case len(val) > 1:
			kv += ", STRUCT"
		}
		s := "MAP<" + kv + "> (" + c.MapRole + ")"
		if c.Depth > 1 {
			s = "MAP<" + kv + "> (" + c.MapRole + ", a list per value)"
		}
		return s
	}
	s := "LIST<" + leafType(c) + ">"
	if c.Logical == "" {
		s = "LIST"
	}
	for range c.Depth - 1 {
		s = "LIST<" + s + ">"
	}
	return s
}

// leafType is a leaf's logical type, or its physical type when it has none.
func leafType(c describe.ParquetColumn) string {
	if c.Logical != "" {
		return c.Logical
	}
	return c.Physical
}
