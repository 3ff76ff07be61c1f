package plan

import (
	"context"
	"fmt"
)

// PackScope says how a packed mixture groups the documents it draws into
// rows (PLAN.md §12.1).
type PackScope string

const (
	// ScopeAcross packs the documents of all sources together, in the
	// mixture's interleaved order: a packed row may hold documents of
	// several sources.
	ScopeAcross PackScope = "across"
	// ScopePerSource packs each source's documents into rows of their
	// own: every packed row holds documents of one source.
	ScopePerSource PackScope = "per_source"
)

// packMixture packs the documents a mixture draws (PLAN.md §12.1): source
// i's draws d = 0 … c_i − 1 are its stream positions d (§11.2, the draws
// of epoch 0), so a filter selects the documents and the quota c_i counts
// them before packing. With scope across, the T draws are visited in the
// order of §11.4 applied to one batch holding c_i draws of each source
// (key (2j+1)/(2·c_i), ties to the lower source index) and packed in
// windows of opts.Window consecutive draws; with scope per_source, each
// source's draws are visited in draw order and packed in windows of their
// own, the rows of source i following those of the sources before it
// (Packing.SourceRows). lengths holds one token count per source row.
// Errors wrap ErrConfig; ctx's error when ctx is done first. Memory: the
// layout, one window and O(m).
func packMixture(ctx context.Context, lengths []uint32, opts PackOptions, ms *mixState) (*PackLayout, *Packing, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	if opts.Scope == "" {
		return nil, nil, configErrorf("packing.scope", "a packed mixture needs a scope (across or per_source)")
	}
	pr := newPackRun(lengths, opts)
	o := mixOrder{ms: ms, epoch: 0}
	pp := o.newPerms()
	k := uint64(opts.Window)
	win := make([]uint64, 0, min(k, ms.t))
	switch opts.Scope {
	case ScopePerSource:
		rows := make([]uint64, len(ms.src))
		for i := range ms.src {
			before := pr.lay.Rows()
			c := ms.src[i].c
			for lo := uint64(0); lo < c; lo += k {
				win = win[:0]
				for d := lo; d < min(lo+k, c); d++ {
					win = append(win, o.drawID(pp, i, d))
				}
				if err := pr.window(ctx, win); err != nil {
					return nil, nil, err
				}
			}
			rows[i] = pr.lay.Rows() - before
		}
		pr.rec.SourceRows = rows
	default: // ScopeAcross
		cnt := make([]uint64, len(ms.src))
		for i := range ms.src {
			cnt[i] = ms.src[i].c
		}
		var err error
		merge(cnt, ms.t, func(_ uint64, i int, j uint64) {
			if err != nil {
				return
			}
			win = append(win, o.drawID(pp, i, j))
			if uint64(len(win)) == k {
				err = pr.window(ctx, win)
				win = win[:0]
			}
		})
		if err == nil && len(win) > 0 {
			err = pr.window(ctx, win)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return pr.finish()
}

// NewPackedMixture is NewPacked for a plan whose documents come from the
// named sources of mix (PLAN.md §11, §12.1): filters and quotas choose the
// documents (mix.EpochSamples counts documents), which are then packed
// with opts (opts.Scope "" means ScopeAcross); every epoch packs the same
// documents into the same rows, and the plan's samples are the packed
// rows, ordered per epoch by §5. lengths[d] is the token count of source
// row d, one per row of src. The caller's mix is not modified. Errors wrap
// ErrConfig and name the source or the option.
func NewPackedMixture(ctx context.Context, src Source, cfg Config, opts PackOptions, mix *Mixture, lengths []uint32, progress func(epoch, steps, total int)) (*Plan, *PackLayout, error) {
	s, err := packedSource(src, cfg, lengths)
	if err != nil {
		return nil, nil, err
	}
	if opts.Scope == "" {
		opts.Scope = ScopeAcross
	}
	srcs, t, err := resolveMixture(&s, cfg, mix, true)
	if err != nil {
		return nil, nil, err
	}
	lay, pk, err := packMixture(ctx, lengths, opts, newMixState(s.index, srcs, t, cfg))
	if err != nil {
		return nil, nil, err
	}
	p, err := newContext(ctx, src, cfg, pk, mix, progress)
	if err != nil {
		return nil, nil, err
	}
	return p, lay, nil
}

// checkPackedMixture checks a recorded packing against the plan's
// mixture: a scope exactly when there is a mixture, and with scope
// per_source one row count per source adding up to the rows. Errors wrap
// ErrFormat.
func checkPackedMixture(pk *Packing, mix *Mixture) error {
	bad := func(f string, a ...any) error {
		return &Error{Field: "packing", Err: fmt.Errorf("%s: %w", fmt.Sprintf(f, a...), ErrFormat)}
	}
	switch {
	case mix == nil && (pk.Scope != "" || pk.SourceRows != nil):
		return bad("scope %q and source_rows apply only to a plan with a mixture", pk.Scope)
	case mix == nil:
		return nil
	case pk.Scope == "":
		return bad("a packed mixture records its scope (across or per_source)")
	case pk.Scope == ScopeAcross && pk.SourceRows != nil:
		return bad("source_rows applies only to scope per_source")
	case pk.Scope == ScopePerSource:
		if len(pk.SourceRows) != len(mix.Sources) {
			return bad("%d source_rows for %d sources", len(pk.SourceRows), len(mix.Sources))
		}
		var sum uint64
		for _, r := range pk.SourceRows {
			sum += r
		}
		if sum != pk.Rows {
			return bad("source_rows add up to %d, not the %d rows", sum, pk.Rows)
		}
	}
	return nil
}

// sourceOfRow returns the mixture source of packed row id (scope
// per_source), or -1 when rows may hold several sources' documents.
func (pk *Packing) sourceOfRow(id uint64) int {
	for i, r := range pk.SourceRows {
		if id < r {
			return i
		}
		id -= r
	}
	return -1
}

// DocumentSource returns the index in Mixture.Sources of the source that
// holds document doc (a source row, as Piece.Doc names it) of a packed
// mixture (PLAN.md §12.1), or -1 for a plan that is not one or a doc out
// of range. O(log row groups).
func (p *Plan) DocumentSource(doc uint64) int {
	if p.packMix == nil || doc >= p.Source.NumSamples() {
		return -1
	}
	return p.packMix.sourceOf(doc)
}
