package convert

import (
	"context"
	"math/bits"

	"github.com/prepml/prep/plan"
)

// The id set: which sample ids the requested shards hold, and the staging
// slot of each (its rank among them). Stage 1 reads only the row groups
// holding a needed id and stages only the needed rows.

// idSet is the set of sample ids a run needs, with the compact rank of each
// member (its index among the members in id order), which is its staging
// slot. Memory: 2 bits per source row.
type idSet struct {
	n     uint64
	words []uint64
	ranks []uint64 // ranks[w] = members below id 64*w
	count uint64
}

func newIDSet(n uint64) *idSet {
	return &idSet{n: n, words: make([]uint64, (n+63)/64)}
}

func (s *idSet) add(id uint64) { s.words[id>>6] |= 1 << (id & 63) }

// fill adds every id in [0, n).
func (s *idSet) fill() {
	for i := range s.words {
		s.words[i] = ^uint64(0)
	}
	if r := s.n & 63; r != 0 {
		s.words[len(s.words)-1] = 1<<r - 1
	}
}

func (s *idSet) has(id uint64) bool { return s.words[id>>6]&(1<<(id&63)) != 0 }

// seal computes the ranks; call after the last add.
func (s *idSet) seal() {
	s.ranks = make([]uint64, len(s.words))
	var c uint64
	for i, w := range s.words {
		s.ranks[i] = c
		c += uint64(bits.OnesCount64(w))
	}
	s.count = c
}

// rank returns the staging slot of member id.
func (s *idSet) rank(id uint64) uint64 {
	w := id >> 6
	return s.ranks[w] + uint64(bits.OnesCount64(s.words[w]&(1<<(id&63)-1)))
}

// runs returns the stretches of members in [start, start+rows) as row
// ranges relative to start, with their first staging slot.
func (s *idSet) runs(start uint64, rows int64) []run {
	var out []run
	i := int64(0)
	for i < rows {
		id := start + uint64(i)
		if !s.has(id) {
			// skip a whole empty word at once
			if id&63 == 0 && s.words[id>>6] == 0 {
				i += 64
				continue
			}
			i++
			continue
		}
		lo := i
		for i < rows && s.has(start+uint64(i)) {
			if id := start + uint64(i); id&63 == 0 && s.words[id>>6] == ^uint64(0) && i+64 <= rows {
				i += 64
				continue
			}
			i++
		}
		out = append(out, run{lo: int(lo), hi: int(i), dst: int64(s.rank(start + uint64(lo)))})
	}
	return out
}

// neededIDs returns the set of sample ids the shards in todo hold.
func neededIDs(ctx context.Context, p *plan.Plan, todo []shardKey) (*idSet, error) {
	set := newIDSet(p.NumSamples())
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
		if len(rs) != p.Config.WorldSize {
			continue
		}
		dropped, err := p.Dropped(e)
		if err != nil {
			return nil, err
		}
		set.fill()
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
				set.words[id>>6] &^= 1 << (id & 63)
			}
		}
		set.seal()
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
				set.add(id)
			}
		}
	}
	set.seal()
	return set, nil
}
