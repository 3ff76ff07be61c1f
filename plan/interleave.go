package plan

import (
	"container/heap"
	"math/bits"
	"sort"
	"sync"
)

// purposeMixture keys source i's permutation pass p (PLAN.md §11.2):
// NewPerm(n_i, "mixture", seed, p, i).
const purposeMixture = "mixture"

// ckptEvery is how many full batches one checkpoint of cumulative extras
// covers (memory: 8 bytes per source per checkpoint).
const ckptEvery = 512

// mixState is the derived machinery of a plan with a mixture: the sources'
// quotas and the per-batch composition (PLAN.md §11.3), the same in every
// epoch.
type mixState struct {
	src     []mixSrc
	idx     *sourceIndex
	owner   []int32 // block index -> source
	t, g    uint64  // epoch samples T, global batch G
	kFull   uint64  // full batches: floor(T/G)
	gp      uint64  // size of the last, partial batch: T mod G (0: none)
	flG     []uint64
	flP     []uint64
	seed    uint64
	shuffle bool

	once     sync.Once
	extras   []uint64 // bit k·m+i: source i takes one extra sample in full batch k
	ckpt     []uint64 // [c·m+i]: extras of source i in full batches [0, c·ckptEvery)
	extraAll []uint64 // extras of source i over all full batches
	partial  []bool   // source i takes one extra sample in the partial batch

	perms    []permCache // per source: the last passes' permutations
	patMu    sync.RWMutex
	pats     map[patKey]*mixPattern // batch compositions' slot sequences
	patBytes int                    // memory held by pats
}

func newMixState(idx *sourceIndex, srcs []mixSrc, t uint64, cfg Config) *mixState {
	m := len(srcs)
	ms := &mixState{src: srcs, idx: idx, t: t, g: uint64(cfg.GlobalBatch), seed: cfg.Seed, shuffle: cfg.Shuffle == ShuffleGlobal,
		flG: make([]uint64, m), flP: make([]uint64, m), owner: make([]int32, len(idx.blocks))}
	for i := range srcs {
		for _, bi := range srcs[i].part.blocks {
			ms.owner[bi] = int32(i)
		}
		srcs[i].contig, srcs[i].base = contiguous(idx, &srcs[i].part)
	}
	ms.perms = make([]permCache, m)
	ms.kFull, ms.gp = t/ms.g, t%ms.g
	for i := range srcs {
		ms.flG[i] = mulDiv(ms.g, srcs[i].c, t)
		ms.flP[i] = mulDiv(ms.gp, srcs[i].c, t)
	}
	return ms
}

// mulDiv returns floor(a·b/c) for a·b < 2^64·c (128-bit intermediate).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// mulMod returns a·b mod c.
func mulMod(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi%c, lo, c)
	return r
}

// build computes the extras of every batch (PLAN.md §11.3), once.
func (ms *mixState) build() {
	ms.once.Do(func() {
		m := len(ms.src)
		rem := make([]uint64, m) // extras not yet given
		for i := range ms.src {
			rem[i] = ms.src[i].c - ms.kFull*ms.flG[i] - ms.flP[i]
		}
		// The partial batch first: the L' sources with the largest
		// fractional part of g'·c_i/T, ties to the lower index.
		ms.partial = make([]bool, m)
		if ms.gp > 0 {
			var lp uint64
			for i := range ms.src {
				lp += ms.flP[i]
			}
			lp = ms.gp - lp
			order := make([]int, m)
			fr := make([]uint64, m)
			for i := range order {
				order[i] = i
				fr[i] = mulMod(ms.gp, ms.src[i].c, ms.t)
			}
			sort.SliceStable(order, func(a, b int) bool { return fr[order[a]] > fr[order[b]] })
			for _, i := range order[:lp] {
				ms.partial[i] = true
				rem[i]--
			}
		}
		ms.extraAll = append([]uint64(nil), rem...)
		k := ms.kFull
		ms.extras = make([]uint64, (k*uint64(m)+63)/64)
		ms.ckpt = make([]uint64, (k/ckptEvery+1)*uint64(m))
		given := make([]uint64, m)
		var l uint64
		for i := range ms.src {
			l += ms.flG[i]
		}
		l = ms.g - l
		cand := make([]int, 0, m)
		for b := uint64(0); b < k; b++ {
			if b%ckptEvery == 0 {
				copy(ms.ckpt[b/ckptEvery*uint64(m):], given)
			}
			left := k - b
			cand = cand[:0]
			take := l
			for i := range ms.src {
				switch {
				case rem[i] == left: // urgent: one extra in every batch left
					ms.give(b, i, rem, given)
					take--
				case rem[i] > 0:
					cand = append(cand, i)
				}
			}
			if take == 0 {
				continue
			}
			// Largest deficit (b+1)·X_i − given_i·K first, ties to the
			// lower index: 128-bit comparisons.
			sort.SliceStable(cand, func(a, c int) bool {
				i, j := cand[a], cand[c]
				return cmpDeficit(b+1, ms.extraAll[i], given[i], ms.extraAll[j], given[j], k) > 0
			})
			for _, i := range cand[:take] {
				ms.give(b, i, rem, given)
			}
		}
	})
}

func (ms *mixState) give(b uint64, i int, rem, given []uint64) {
	bit := b*uint64(len(ms.src)) + uint64(i)
	ms.extras[bit/64] |= 1 << (bit % 64)
	rem[i]--
	given[i]++
}

// cmpDeficit compares the deficits d_i = s·x_i − g_i·k and d_j = s·x_j −
// g_j·k exactly; it returns -1, 0 or 1.
func cmpDeficit(s, xi, gi, xj, gj, k uint64) int {
	// d_i > d_j  ⇔  s·x_i + g_j·k > s·x_j + g_i·k
	a := add128(mul128(s, xi), mul128(gj, k))
	c := add128(mul128(s, xj), mul128(gi, k))
	switch {
	case a[0] != c[0]:
		if a[0] > c[0] {
			return 1
		}
		return -1
	case a[1] != c[1]:
		if a[1] > c[1] {
			return 1
		}
		return -1
	}
	return 0
}

func mul128(a, b uint64) [2]uint64 { hi, lo := bits.Mul64(a, b); return [2]uint64{hi, lo} }
func add128(a, b [2]uint64) [2]uint64 {
	lo, carry := bits.Add64(a[1], b[1], 0)
	return [2]uint64{a[0] + b[0] + carry, lo}
}

func (ms *mixState) hasExtra(b uint64, i int) bool {
	bit := b*uint64(len(ms.src)) + uint64(i)
	return ms.extras[bit/64]>>(bit%64)&1 == 1
}

// extrasBefore returns the extras of source i in full batches [0, b).
func (ms *mixState) extrasBefore(b uint64, i int) uint64 {
	if b >= ms.kFull {
		return ms.extraAll[i]
	}
	c := b / ckptEvery
	n := ms.ckpt[c*uint64(len(ms.src))+uint64(i)]
	for x := c * ckptEvery; x < b; x++ {
		if ms.hasExtra(x, i) {
			n++
		}
	}
	return n
}

// batches returns the number of batches of an epoch's T slots.
func (ms *mixState) batches() uint64 {
	if ms.gp > 0 {
		return ms.kFull + 1
	}
	return ms.kFull
}

// counts fills cnt with each source's samples in batch b and start with
// its draws before batch b in the epoch.
func (ms *mixState) counts(b uint64, cnt, start []uint64) {
	ms.build()
	for i := range ms.src {
		if b < ms.kFull {
			cnt[i] = ms.flG[i]
			if ms.hasExtra(b, i) {
				cnt[i]++
			}
		} else {
			cnt[i] = ms.flP[i]
			if ms.partial[i] {
				cnt[i]++
			}
		}
		start[i] = min(b, ms.kFull)*ms.flG[i] + ms.extrasBefore(b, i)
	}
}

// mergeItem is one source's next draw in a batch's merge.
type mergeItem struct {
	src  int
	j, n uint64 // next draw j of n in this batch
}

// mergeHeap orders draws by (2j+1)/(2n) ascending, ties to the lower
// source index (PLAN.md §11.4).
type mergeHeap []mergeItem

func (h mergeHeap) Len() int { return len(h) }
func (h mergeHeap) Less(a, b int) bool {
	x, y := (2*h[a].j+1)*h[b].n, (2*h[b].j+1)*h[a].n
	return x < y || x == y && h[a].src < h[b].src
}
func (h mergeHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *mergeHeap) Push(x any)   { *h = append(*h, x.(mergeItem)) }
func (h *mergeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// merge calls emit(slot, source, j) for the batch's slots [0, end) in
// order: the j-th draw of each source in the batch sits at key
// (2j+1)/(2·cnt_i).
func merge(cnt []uint64, end uint64, emit func(slot uint64, src int, j uint64)) {
	h := make(mergeHeap, 0, len(cnt))
	for i, n := range cnt {
		if n > 0 {
			h = append(h, mergeItem{src: i, n: n})
		}
	}
	heap.Init(&h)
	for q := uint64(0); q < end && len(h) > 0; q++ {
		it := &h[0]
		emit(q, it.src, it.j)
		it.j++
		if it.j == it.n {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
}

// slotIn returns the slot in its batch of source i's draw j, the batch
// holding cnt: the number of draws merged before it (PLAN.md §11.4).
func slotIn(cnt []uint64, i int, j uint64) uint64 {
	var q uint64
	for s, n := range cnt {
		if s == i {
			q += j
			continue
		}
		if n == 0 {
			continue
		}
		// draws j' of s with (2j'+1)·cnt_i < x, x = (2j+1)·n; ties
		// (equality) count when s < i.
		x := (2*j + 1) * n
		t := (x - 1) / cnt[i] // largest o with o·cnt_i < x
		below := (t + 1) / 2  // odd o in [1, t]
		if s < i && x%cnt[i] == 0 && (x/cnt[i])%2 == 1 {
			below++
		}
		q += min(below, n)
	}
	return q
}

// mixOrder is one epoch's slot sequence of a mixture.
type mixOrder struct {
	ms    *mixState
	epoch uint64
}

// perms caches one permutation per source for the pass being read.
type passPerms struct {
	pass []uint64
	perm []Perm
	ok   []bool
}

func (o mixOrder) newPerms() *passPerms {
	m := len(o.ms.src)
	return &passPerms{pass: make([]uint64, m), perm: make([]Perm, m), ok: make([]bool, m)}
}

// drawID returns the sample id of source i's draw d of the epoch (PLAN.md
// §11.2): stream position p = epoch·c_i + d, pass p div n_i, row
// π_pass(p mod n_i) of the source.
func (o mixOrder) drawID(pp *passPerms, i int, d uint64) uint64 {
	s := &o.ms.src[i]
	hi, lo := bits.Mul64(o.epoch, s.c)
	lo, carry := bits.Add64(lo, d, 0)
	hi += carry
	pass, off := bits.Div64(hi, lo, s.n)
	local := off
	if o.ms.shuffle {
		if !pp.ok[i] || pp.pass[i] != pass {
			pp.perm[i] = NewPerm(s.n, purposeMixture, o.ms.seed, pass, uint64(i))
			pp.pass[i], pp.ok[i] = pass, true
		}
		local = pp.perm[i].Apply(off)
	}
	return o.ms.global(i, local)
}

// global maps source i's row index local to its sample id.
func (ms *mixState) global(i int, local uint64) uint64 {
	s := &ms.src[i]
	if s.selRow != nil { // the local-th selected row's id, by table
		return uint64(s.selRow[local])
	}
	if s.sel != nil { // the local-th selected row
		// selJump narrows the search to the ranges holding selected rows
		// [k·selJumpRows, (k+1)·selJumpRows).
		k := local / selJumpRows
		lo, hi := int(s.selJump[k]), len(s.sel)
		if k+1 < uint64(len(s.selJump)) {
			hi = int(s.selJump[k+1]) + 1
		}
		j := lo + firstAbove(s.selPrefix[lo+1:hi+1], local)
		local = s.sel[j][0] + (local - s.selPrefix[j])
	}
	pt := &s.part
	j := firstAbove(pt.prefix[1:], local)
	return ms.idx.blocks[pt.blocks[j]].start + (local - pt.prefix[j])
}

// selJumpRows is the spacing of a selection's jump table: selJump[k] is
// the range holding selected row k·selJumpRows.
const selJumpRows = 1024

// firstAbove returns the first index x of the ascending a with a[x] > v
// (len(a) when none): sort.Search without the closure, on the hot path of
// every drawn sample.
func firstAbove(a []uint64, v uint64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] > v {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

func (o mixOrder) at(q uint64) uint64 { return o.appendRange(q, q+1, nil)[0] }

// pos is not used for mixtures: an id may hold several slots of an epoch
// or none (see mixState.occurrences).
func (o mixOrder) pos(uint64) uint64 { panic("plan: mixOrder.pos") }

// slotsOf returns the slots of epoch (below T) holding id, ascending.
func (ms *mixState) slotsOf(epoch uint64, id uint64) []uint64 {
	idx := ms.idx
	bi := idx.blockOf(id)
	i := int(ms.owner[bi])
	s := &ms.src[i]
	jb := sort.SearchInts(s.part.blocks, bi)
	local := s.part.prefix[jb] + (id - idx.blocks[bi].start)
	if s.digest != "" { // filtered: its index among the selected rows, if selected
		k, ok := s.selectedIndex(idx, local)
		if !ok {
			return nil
		}
		local = k
	}
	lo := epoch * s.c // T·epochs < 2^63 (resolveMixture)
	hiP := lo + s.c
	var out []uint64
	m := len(ms.src)
	cnt, start := make([]uint64, m), make([]uint64, m)
	for pass := lo / s.n; pass*s.n < hiP; pass++ {
		off := local
		if ms.shuffle {
			off = NewPerm(s.n, purposeMixture, ms.seed, pass, uint64(i)).Invert(local)
		}
		p := pass*s.n + off
		if p < lo || p >= hiP {
			continue
		}
		d := p - lo
		// The batch b with start_i(b) <= d < start_i(b+1).
		ms.build()
		var b uint64
		if d >= ms.kFull*ms.flG[i]+ms.extraAll[i] {
			b = ms.kFull
		} else {
			b = uint64(sort.Search(int(ms.kFull), func(x int) bool {
				return uint64(x+1)*ms.flG[i]+ms.extrasBefore(uint64(x+1), i) > d
			}))
		}
		ms.counts(b, cnt, start)
		out = append(out, b*ms.g+slotIn(cnt, i, d-start[i]))
	}
	return out
}

// sourceOf returns the index of the mixture source holding id.
func (ms *mixState) sourceOf(id uint64) int {
	return int(ms.owner[ms.idx.blockOf(id)])
}
