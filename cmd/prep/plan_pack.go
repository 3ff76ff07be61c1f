package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// packFlags are prep plan's packing flags (PLAN.md §12).
type packFlags struct {
	pack   string // COLUMN:LENGTH, "" for no packing
	split  string
	eod    string // "" for none
	pad    int64
	window int
}

func addPackFlags(cmd *cobra.Command, o *packFlags) {
	f := cmd.Flags()
	f.StringVar(&o.pack, "pack", "", "pack the token list column COLUMN into rows of LENGTH tokens (COLUMN:LENGTH; PLAN.md §12): the samples become packed rows")
	f.StringVar(&o.split, "pack-split", string(plan.SplitChunk), "packing: chunk (cut documents longer than LENGTH into pieces) or none (drop them, counted)")
	f.StringVar(&o.eod, "pack-eod", "", "packing: token id appended after each document (default none)")
	f.Int64Var(&o.pad, "pack-pad", 0, "packing: token id of padding slots")
	f.IntVar(&o.window, "pack-window", plan.DefaultPackWindow, "packing: documents packed together (memory: one window)")
}

// options returns the packing options, nil when --pack is not given;
// errors are usage errors. withFile tells that a sources file is given,
// whose packing block takes these options as its own keys.
func (o *packFlags) options(cmd *cobra.Command, withFile bool) (*plan.PackOptions, error) {
	if o.pack == "" {
		for _, n := range []string{"pack-split", "pack-eod", "pack-pad", "pack-window"} {
			if !cmd.Flags().Changed(n) {
				continue
			}
			if withFile {
				return nil, usagef("--%s applies only with --pack COLUMN:LENGTH; a sources file's packing block takes it as its key %s (packing: {column: ..., length: ..., %s: ...})",
					n, strings.TrimPrefix(n, "pack-"), strings.TrimPrefix(n, "pack-"))
			}
			return nil, usagef("--%s applies only with --pack COLUMN:LENGTH", n)
		}
		return nil, nil
	}
	i := strings.LastIndexByte(o.pack, ':')
	if i <= 0 {
		return nil, usagef("--pack %q: want COLUMN:LENGTH, e.g. tokens:2048", o.pack)
	}
	l, err := strconv.Atoi(o.pack[i+1:])
	if err != nil {
		return nil, usagef("--pack %q: LENGTH %q is not an integer", o.pack, o.pack[i+1:])
	}
	po := &plan.PackOptions{Column: o.pack[:i], Length: l, Split: plan.Split(o.split), Pad: o.pad, Window: o.window}
	if o.eod != "" {
		v, err := strconv.ParseInt(o.eod, 10, 64)
		if err != nil {
			return nil, usagef("--pack-eod %q is not an integer token id", o.eod)
		}
		po.EOD = &v
	}
	if o.window < 1 {
		return nil, usagef("--pack-window must be at least 1, not %d", o.window)
	}
	if err := po.Validate(); err != nil {
		return nil, usageError{err}
	}
	return po, nil
}

// newPackedPlan reads the token column's lengths (levels only) and makes
// the packed plan; with a mixture (not nil), of the documents it draws.
func newPackedPlan(ctx context.Context, g *globalOptions, src plan.Source, remote *s3Source, cfg plan.Config, po plan.PackOptions, mix *plan.Mixture,
	progress func(epoch, steps, total int)) (*plan.Plan, error) {
	if cfg.Shuffle != plan.ShuffleNone && cfg.Shuffle != plan.ShuffleGlobal {
		return nil, usagef("--shuffle %s: packing takes shuffle none or global (packed rows belong to no row group)", cfg.Shuffle)
	}
	var st source.Store
	if remote != nil {
		s3, err := remote.client.Store(src.Root)
		if err != nil {
			return nil, err
		}
		st = s3
	}
	lengths, err := feature.TokenLengths(ctx, st, src, po.Column, 0)
	if err != nil {
		return nil, fmt.Errorf("packing: %w", err)
	}
	var p *plan.Plan
	if mix != nil {
		p, _, err = plan.NewPackedMixture(ctx, src, cfg, po, mix, lengths, progress)
	} else {
		p, _, err = plan.NewPacked(ctx, src, cfg, po, lengths, progress)
	}
	if err != nil {
		return nil, err
	}
	pk := p.Packing
	g.log.Info("packed", "column", pk.Column, "length", pk.Length, "documents", pk.Documents, "tokens", pk.Tokens, "rows", pk.Rows,
		"pad_slots", pk.PadSlots, "dropped_documents", pk.DroppedDocuments, "empty_documents", pk.EmptyDocuments)
	return p, nil
}

// sourceName names the mixture source of sample id of p, a plan with a
// mixture: "*" for a packed row of scope across, which may hold documents
// of several sources (PLAN.md §12.1).
func sourceName(p *plan.Plan, id uint64) string {
	if s := p.SourceOf(id); s >= 0 {
		return p.Mixture.Sources[s].Name
	}
	return "*"
}
