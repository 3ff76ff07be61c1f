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
// slot. Members lie in the window [lo, lo+64*len(words)) (lo a multiple
// of 64; the whole [0, n) for a run): memory 2 bits per id of the window.
type idSet struct {
	n     uint64
	lo    uint64 // id of bit 0 of words[0]
	words []uint64
	ranks []uint64 // ranks[w] = members below id lo+64*w
	count uint64
}

func newIDSet(n uint64) *idSet {
	return &idSet{n: n, words: make([]uint64, (n+63)/64)}
}

// newIDSetWithin returns an empty set of ids below n whose members all lie
// in [lo, hi): its words cover that window only.
func newIDSetWithin(n, lo, hi uint64) *idSet {
	lo &^= 63
	hi = max(lo, min(hi, n))
	return &idSet{n: n, lo: lo, words: make([]uint64, (hi-lo+63)/64)}
}

// add adds id, which must lie in the set's window.
func (s *idSet) add(id uint64) { i := id - s.lo; s.words[i>>6] |= 1 << (i & 63) }

// remove removes id, which must lie in the set's window.
func (s *idSet) remove(id uint64) { i := id - s.lo; s.words[i>>6] &^= 1 << (i & 63) }

// fill adds every id in [0, n) (a set over the whole [0, n), lo 0).
func (s *idSet) fill() {
	for i := range s.words {
		s.words[i] = ^uint64(0)
	}
	if r := s.n & 63; r != 0 {
		s.words[len(s.words)-1] = 1<<r - 1
	}
}

func (s *idSet) has(id uint64) bool {
	i := id - s.lo // below lo: wraps past the window
	w := i >> 6
	return w < uint64(len(s.words)) && s.words[w]&(1<<(i&63)) != 0
}

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
	i := id - s.lo
	w := i >> 6
	return s.ranks[w] + uint64(bits.OnesCount64(s.words[w]&(1<<(i&63)-1)))
}

// runs returns the stretches of members in [start, start+rows) as row
// ranges relative to start, with their first staging slot.
func (s *idSet) runs(start uint64, rows int64) []run {
	var out []run
	i := int64(0)
	// Only the part of [start, start+rows) inside the window can hold
	// members.
	if end := s.lo + 64*uint64(len(s.words)); start+uint64(rows) > end {
		rows = int64(max(start, end) - start)
	}
	if start < s.lo {
		i = int64(min(s.lo-start, uint64(rows)))
	}
	for i < rows {
		id := start + uint64(i)
		if !s.has(id) {
			// skip a whole empty word at once
			if id&63 == 0 && s.words[(id-s.lo)>>6] == 0 {
				i += 64
				continue
			}
			i++
			continue
		}
		lo := i
		for i < rows && s.has(start+uint64(i)) {
			if id := start + uint64(i); id&63 == 0 && s.words[(id-s.lo)>>6] == ^uint64(0) && i+64 <= rows {
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
		if len(rs) != p.Config.WorldSize || !p.CoversSource() {
			// A mixture's epoch holds some ids several times and others
			// not at all: list what the shards hold.
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
				set.remove(id)
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
