package convert

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/prepml/prep/feature"
)

// The writing side of a packed run (packed.go): shards written one after
// the other, their documents decoded once for the whole run when they fit
// half of --memory-limit, else in groups of consecutive steps.

// runPacked writes the shards todo of a packed plan, one after the other,
// decoding their documents in groups of consecutive steps (in the order
// shards then steps, a group may span shards): a group's documents are
// decoded once each and held while its steps are written, and a group
// holds at most half of o.MemoryLimit of documents
// (packedSource.heldBytes: tokens at the dtype's size plus the staging
// record); the decoded column chunks in flight take the other half. A
// document in several groups is decoded again for each; under a limit
// that holds every document of the run, the run is one group, each
// document decoded once. A single step whose documents exceed the half is
// refused, naming the bytes it needs.
//
// When a footer bound of every document fits the half, every document is
// decoded once and the lengths are taken from them (DecodeAllPacked), whatever
// shards todo names: a packed row's documents come from anywhere in the
// source (the packing visits documents in a permuted or interleaved
// order), so even one rank's shards need documents of nearly every row
// group, and the levels pass a group-by-group run starts with would read
// the token column a second time.
func (r *runner) runPacked(ctx context.Context, todo []shardKey) error {
	budget := feature.NewBudget(r.o.MemoryLimit).PackedDocuments()
	ps, all, err := feature.DecodeAllPacked(ctx, r.o.Source, r.o.MemoryLimit, r.p, r.spec, budget)
	if err != nil {
		return err
	}
	if ps == nil {
		if ps, err = feature.OpenPackedGroups(ctx, r.o.Source, r.o.Jobs, r.p, r.spec); err != nil {
			return err
		}
	}
	gr := &packedGroups{r: r, ps: ps, todo: todo, budget: budget}
	defer gr.close()
	if all != nil {
		for _, k := range todo { // the layouts of the shards' epochs (PLAN.md §12.1)
			if _, err := ps.Layout(ctx, k.epoch); err != nil {
				all.Close()
				return err
			}
		}
		gr.docs, gr.end = all, [2]int{len(todo), 0}
		r.sum.SamplesDecoded, r.sum.PackedHeldPeakBytes = int64(all.Len()), all.HeldBytes()
		r.sum.RowGroupsRead, r.sum.RowGroupsSkipped = all.RowGroups()
	}
	if err := r.writePlanCopy(); err != nil {
		return err
	}
	for si, k := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.writePackedShard(ctx, si, k, gr); err != nil {
			return err
		}
	}
	return nil
}

// packedGroups decodes a packed run's documents group by group
// (runPacked). Positions are (shard index in todo, step), in order.
type packedGroups struct {
	r      *runner
	ps     *feature.PackedGroups
	todo   []shardKey
	budget int64
	docs   *feature.PackedDocuments
	end    [2]int // the current group's end position (exclusive)
	ids    []uint64
}

func (g *packedGroups) close() {
	if g.docs != nil {
		g.docs.Close()
		g.docs = nil
	}
}

// at returns the documents of the group holding step of shard si,
// decoding the next group when that step is past the current one.
func (g *packedGroups) at(ctx context.Context, si, step int) (*feature.PackedDocuments, error) {
	if g.docs != nil && (si < g.end[0] || si == g.end[0] && step < g.end[1]) {
		return g.docs, nil
	}
	g.close()
	r, steps := g.r, g.r.p.Steps()
	next := func(pos [2]int) [2]int {
		if pos[1]++; pos[1] == steps {
			pos = [2]int{pos[0] + 1, 0}
		}
		return pos
	}
	pos := [2]int{si, step}
	cur := pos
	docs, n, err := g.ps.Decode(ctx, func(i int) ([]uint64, bool, error) {
		if i > 0 {
			cur = next(cur)
		}
		if cur[0] >= len(g.todo) {
			return nil, false, nil
		}
		k := g.todo[cur[0]]
		var err error
		g.ids, _, err = r.p.RankBatch(k.epoch, k.rank, cur[1], g.ids)
		return g.ids, true, err
	}, g.budget, feature.NewBudget(r.o.MemoryLimit).PackedDecode())
	var be *feature.PackedBudgetError
	if errors.As(err, &be) {
		k := g.todo[si]
		return nil, feature.ValueErrorf("epoch %d, rank %d, step %d: its packed rows' documents take %d bytes decoded, more than half of --memory-limit (%d bytes): raise --memory-limit to at least %d", k.epoch, k.rank, step, be.Need, be.Budget, 2*be.Need)
	}
	if err != nil {
		return nil, err
	}
	for range n {
		pos = next(pos)
	}
	g.docs, g.end = docs, pos
	read, skipped := docs.RowGroups()
	r.sum.SamplesDecoded += int64(docs.Len())
	r.sum.RowGroupsRead += read
	r.sum.RowGroupsSkipped += skipped
	r.sum.PackedHeldPeakBytes = max(r.sum.PackedHeldPeakBytes, docs.HeldBytes())
	return g.docs, nil
}

// writePackedShard writes and commits shard k, the si-th of the run, its
// documents from gr (runPacked).
func (r *runner) writePackedShard(ctx context.Context, si int, k shardKey, gr *packedGroups) (err error) {
	r.shardEvent(k, false)
	o, err := r.openShard(k)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			o.w.Abort()
		}
	}()
	g := o.geo
	var jagged []int // output indices of the jagged tensors, table order
	for t := range g.SlabOffset {
		if g.IsJagged(t) {
			jagged = append(jagged, t)
		}
	}
	vals := make([][]byte, len(g.SlabOffset))
	totals := make([]uint64, len(jagged))
	var buf []byte
	for step := 0; step < r.p.Steps(); step++ {
		docs, err := gr.at(ctx, si, step)
		if err != nil {
			return err
		}
		ids, pads, err := r.p.RankBatch(k.epoch, k.rank, step, o.ids)
		o.ids = ids
		if err != nil {
			return err
		}
		for j, t := range jagged {
			totals[j] = 0
			for _, id := range ids {
				totals[j] += docs.JaggedCount(t, id)
			}
		}
		lay, err := g.BatchLayout(totals)
		if err != nil {
			return fmt.Errorf("epoch %d, rank %d, step %d: %w", k.epoch, k.rank, step, err)
		}
		// One block buffer per shard, cleared for each step (WriteBatch
		// does not keep it): no large allocation per step.
		if uint64(cap(buf)) < lay.Size {
			buf = make([]byte, lay.Size)
		}
		block := buf[:lay.Size]
		clear(block)
		for i, id := range ids {
			slot := func(t int) []byte {
				return block[g.SlabOffset[t]+uint64(i)*g.SampleBytes[t]:][:g.SampleBytes[t]]
			}
			if err := docs.FillFixed(id, slot); err != nil {
				return err
			}
		}
		for _, t := range jagged {
			vals[t] = vals[t][:0]
			offs := block[g.SlabOffset[t]:]
			var acc uint64
			for i := 0; i <= g.BatchSize; i++ {
				binary.LittleEndian.PutUint64(offs[8*i:], acc)
				if i < len(ids) {
					if vals[t], err = docs.AppendJagged(t, ids[i], vals[t]); err != nil {
						return err
					}
					acc += docs.JaggedCount(t, ids[i])
				}
			}
			if uint64(len(vals[t])) != lay.ValuesSize[t] {
				return fmt.Errorf("internal: tensor %d: %d bytes of values for a slab of %d", t, len(vals[t]), lay.ValuesSize[t])
			}
			copy(block[lay.ValuesOffset[t]:], vals[t])
		}
		if err := o.w.WriteBatch(block, ids, pads); err != nil {
			return err
		}
		o.rows += int64(len(ids))
		r.progress(StageWrite, int64(len(ids)), int64(len(block)))
	}
	if err := r.commitShard(o); err != nil {
		return err
	}
	r.shardEvent(k, true)
	return nil
}
