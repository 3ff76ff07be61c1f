package feature

import (
	"math/bits"
)

// The id set: which sample ids the requested shards hold, and the staging
// slot of each (its rank among them). Stage 1 reads only the row groups
// holding a needed id and stages only the needed rows.

// IDSet is the set of sample ids a run needs, with the compact rank of each
// member (its index among the members in id order), which is its staging
// slot. Members lie in the window [lo, lo+64*len(words)) (lo a multiple
// of 64; the whole [0, n) for a run): memory 2 bits per id of the window.
type IDSet struct {
	n     uint64
	lo    uint64 // id of bit 0 of words[0]
	words []uint64
	ranks []uint64 // ranks[w] = members below id lo+64*w
	count uint64
}

// NewIDSet returns an empty set of ids below n over the whole [0, n)
// (2 bits per id once sealed).
func NewIDSet(n uint64) *IDSet {
	return &IDSet{n: n, words: make([]uint64, (n+63)/64)}
}

// newIDSetWithin returns an empty set of ids below n whose members all lie
// in [lo, hi): its words cover that window only.
func newIDSetWithin(n, lo, hi uint64) *IDSet {
	lo &^= 63
	hi = max(lo, min(hi, n))
	return &IDSet{n: n, lo: lo, words: make([]uint64, (hi-lo+63)/64)}
}

// Add adds id, which must lie in the set's window.
func (s *IDSet) Add(id uint64) { i := id - s.lo; s.words[i>>6] |= 1 << (i & 63) }

// Remove removes id, which must lie in the set's window.
func (s *IDSet) Remove(id uint64) { i := id - s.lo; s.words[i>>6] &^= 1 << (i & 63) }

// Fill adds every id in [0, n) (a set over the whole [0, n), lo 0).
func (s *IDSet) Fill() {
	for i := range s.words {
		s.words[i] = ^uint64(0)
	}
	if r := s.n & 63; r != 0 {
		s.words[len(s.words)-1] = 1<<r - 1
	}
}

// Has reports whether id is a member (false for an id outside the set's
// window).
func (s *IDSet) Has(id uint64) bool {
	i := id - s.lo // below lo: wraps past the window
	w := i >> 6
	return w < uint64(len(s.words)) && s.words[w]&(1<<(i&63)) != 0
}

// Seal computes the ranks; call after the last add.
func (s *IDSet) Seal() {
	s.ranks = make([]uint64, len(s.words))
	var c uint64
	for i, w := range s.words {
		s.ranks[i] = c
		c += uint64(bits.OnesCount64(w))
	}
	s.count = c
}

// Rank returns the staging slot of member id.
func (s *IDSet) Rank(id uint64) uint64 {
	i := id - s.lo
	w := i >> 6
	return s.ranks[w] + uint64(bits.OnesCount64(s.words[w]&(1<<(i&63)-1)))
}

// runs returns the stretches of members in [start, start+rows) as row
// ranges relative to start, with their first staging slot.
func (s *IDSet) runs(start uint64, rows int64) []RowRun {
	var out []RowRun
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
		if !s.Has(id) {
			// skip a whole empty word at once
			if id&63 == 0 && s.words[(id-s.lo)>>6] == 0 {
				i += 64
				continue
			}
			i++
			continue
		}
		lo := i
		for i < rows && s.Has(start+uint64(i)) {
			if id := start + uint64(i); id&63 == 0 && s.words[(id-s.lo)>>6] == ^uint64(0) && i+64 <= rows {
				i += 64
				continue
			}
			i++
		}
		out = append(out, RowRun{Lo: int(lo), Hi: int(i), Dst: int64(s.Rank(start + uint64(lo)))})
	}
	return out
}

// Len returns the number of members (Seal counts them).
func (s *IDSet) Len() uint64 { return s.count }

// Bound returns n: every member is below it.
func (s *IDSet) Bound() uint64 { return s.n }
