package convert

import (
	"context"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/plan"
)

// neededIDs returns the set of sample ids the shards in todo hold.
func neededIDs(ctx context.Context, p *plan.Plan, todo []shardKey) (*feature.IDSet, error) {
	set := feature.NewIDSet(p.NumSamples())
	// Shortcut: when every rank of some epoch is requested, that epoch
	// holds every id but the ones it drops (remainder drop: fewer than a
	// global batch, listed by Plan.Dropped), and a dropped id is needed only
	// if another requested shard holds it (Plan.Position).
	ranks := map[int]map[int]bool{}
	for _, k := range todo {
		if ranks[k.epoch] == nil {
			ranks[k.epoch] = map[int]bool{}
		}
		ranks[k.epoch][k.rank] = true
	}
	for e, rs := range ranks {
		if len(rs) != p.Config.WorldSize || !p.CoversSource() {
			// A mixture's epoch holds some ids several times and others
			// not at all: list what the shards hold.
			continue
		}
		dropped, err := p.Dropped(e)
		if err != nil {
			return nil, err
		}
		set.Fill()
		for _, id := range dropped {
			held := false
			for e2, rs2 := range ranks {
				if e2 == e {
					continue
				}
				pos, err := p.Position(e2, id)
				if err != nil {
					return nil, err
				}
				if !pos.Dropped && rs2[pos.Rank] {
					held = true
					break
				}
			}
			if !held {
				set.Remove(id)
			}
		}
		set.Seal()
		return set, nil
	}
	var ids []uint64
	var err error
	for _, k := range todo {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for step := 0; step < p.Steps(); step++ {
			ids, _, err = p.RankBatch(k.epoch, k.rank, step, ids)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				set.Add(id)
			}
		}
	}
	set.Seal()
	return set, nil
}
