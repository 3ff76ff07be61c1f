package feature

import (
	"context"
	"fmt"
	"slices"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/source"
)

// Grouping a packed plan's steps by the decoded bytes of their documents:
// what a packed convert writes with (runPacked) and what a reader that
// checks packed rows against the source (prep verify --deep) holds.

// PackedBudgetError is the error of a step whose packed rows' documents
// alone take more decoded bytes (Need: tokens at the dtype's size plus a
// staging record each, PackedDocuments.HeldBytes) than the Budget the
// documents held at once may take. It wraps ErrValue.
type PackedBudgetError struct {
	Need, Budget int64
}

// Error says the bytes the documents need and the budget they exceed.
func (e *PackedBudgetError) Error() string {
	return fmt.Sprintf("its packed rows' documents take %d bytes decoded, more than the %d bytes the documents held at once may take", e.Need, e.Budget)
}

// Unwrap returns ErrValue.
func (e *PackedBudgetError) Unwrap() error { return ErrValue }

// StepRows returns the packed row ids of the i-th step of a sequence of
// steps, i = 0, 1, ... in turn, and ok false past the last one. The ids
// are read before the next call: the slice may be reused.
type StepRows func(i int) (ids []uint64, ok bool, err error)

// group returns the documents (source rows, ascending) of the packed rows
// of the consecutive steps step(0), step(1), ...: as many steps as hold at
// most budget bytes of documents together (heldBytes, each document
// counted once), and at least step(0); n is the steps taken and held the
// bytes of docs. A document of several groups is in each. When step(0)'s
// documents alone exceed budget it returns a *PackedBudgetError; when
// there is no step(0), n = 0 and no documents.
func (ps *packedSource) group(ctx context.Context, step StepRows, budget int64) (docs []uint64, n int, held int64, err error) {
	seen := map[uint64]bool{}
	var fresh []uint64
	for ; ; n++ {
		ids, ok, err := step(n)
		if err != nil {
			return nil, 0, 0, err
		}
		if !ok {
			break
		}
		var add int64
		fresh = fresh[:0]
		for _, id := range ids {
			row, err := ps.lays.row(ctx, id) // its epoch's layout (PLAN.md §12.1)
			if err != nil {
				return nil, 0, 0, err
			}
			for _, pc := range row {
				if !seen[pc.Doc] {
					seen[pc.Doc] = true
					fresh = append(fresh, pc.Doc)
					add += ps.heldBytes(pc.Doc)
				}
			}
		}
		if held+add > budget {
			if n == 0 {
				return nil, 0, 0, &PackedBudgetError{Need: add, Budget: budget}
			}
			break
		}
		held += add
		docs = append(docs, fresh...)
	}
	slices.Sort(docs)
	return docs, n, held, nil
}

// PackedGroups decodes the documents of a packed plan's packed rows a
// group of consecutive steps at a time, grouped as a packed convert
// groups the steps it writes (runPacked): each group's documents take at
// most a budget of bytes decoded, and a step whose documents alone exceed
// it is refused. It is safe for concurrent use; each Decode's documents
// are the caller's.
type PackedGroups struct {
	ps *packedSource
	st source.Store // where the documents are read from; nil: p.Source.Root
}

// OpenPackedGroups reads the packing of p again from st (nil: the local
// directory p.Source.Root; the token column's lengths, levels only, jobs
// readers, <= 0: GOMAXPROCS) and checks it against the plan and spec;
// Decode reads the documents from st too. Memory: 4 bytes a source row
// (the lengths) and the layouts of the epochs decoded. Errors: those of
// PackedTensors, TokenLengths and plan.Plan.CheckLengths (ErrMismatch when
// the source changed); Decode reports a layout that differs from the
// plan's.
func OpenPackedGroups(ctx context.Context, st source.Store, jobs int, p *plan.Plan, spec *Spec) (*PackedGroups, error) {
	ps, err := preparePacked(ctx, st, jobs, p, spec)
	if err != nil {
		return nil, err
	}
	return &PackedGroups{ps: ps, st: st}, nil
}

// DecodeAllPacked decodes every document of p at once when a bound on
// their held bytes from the footers is at most budget (PackedDocuments.HeldBytes),
// taking the token lengths from the decoded lists instead of a levels
// pass, with the decoded column chunks in flight bounded by half of
// runLimit (the memory limit of the run whose rows are accepted, Bounds.Run).
// It returns nil groups and documents, and no error, when the bound
// exceeds budget, when the plan's split is none or when a per-document
// column has no nulls.fill: the caller then decodes in groups
// (OpenPackedGroups). Errors: those of OpenPackedGroups and Hold.
func DecodeAllPacked(ctx context.Context, st source.Store, runLimit int64, p *plan.Plan, spec *Spec, budget int64) (*PackedGroups, *PackedDocuments, error) {
	ps, docs, _, err := decodeAll(ctx, st, runLimit, p, spec, budget)
	if err != nil || ps == nil {
		return nil, nil, err
	}
	return &PackedGroups{ps: ps, st: st}, docs, nil
}

// Layout returns the layout of epoch e's packed rows (the same for every
// epoch of a plan packed once), checked against the source and the plan
// (plan.Plan.PackLayout), computed on first use.
func (g *PackedGroups) Layout(ctx context.Context, e int) (*plan.PackLayout, error) {
	return g.ps.lays.epoch(ctx, e)
}

// Decode decodes the documents of the packed rows of the consecutive steps
// step(0), step(1), ...: as many steps as hold at most budget bytes of
// documents together (PackedDocuments.HeldBytes), at least step(0), with
// the decoded column chunks in flight bounded by lim; it returns them and
// the number of steps they cover (0, with nil documents, when there is no
// step(0)). Errors: a *PackedBudgetError when step(0)'s documents alone
// exceed budget; a packed row not in the layout or a document whose
// decoded token count differs from its length wraps ErrValue; those of
// step and Hold.
func (g *PackedGroups) Decode(ctx context.Context, step StepRows, budget int64, lim Bounds) (*PackedDocuments, int, error) {
	docs, n, _, err := g.ps.group(ctx, step, budget)
	if err != nil || n == 0 {
		return nil, 0, err
	}
	d, err := g.ps.decode(ctx, g.st, docs, lim)
	if err != nil {
		return nil, 0, err
	}
	return d, n, nil
}
