package plan

import (
	"container/heap"
	"math/bits"
	"slices"
	"sort"
	"sync"
)

// order maps positions of a sequence of n samples to sample ids and back.
type order interface {
	at(q uint64) uint64   // id at position q < n
	pos(id uint64) uint64 // position of id (id in the sequence)
}

// lane is one sequence that batches are cut from: the epoch order in
// non-partitioned modes, a rank's partition order in partitioned mode.
type lane struct {
	ord   order
	n     uint64 // samples in the sequence
	limit uint64 // slots used: positions [0, limit); q >= n are pads
}

// fill appends the ids of positions [start, start+b) ∩ [0, limit); a
// position q >= n is a pad taking the id at (q-n) mod n.
func (l *lane) fill(start, b uint64, dst []uint64) ([]uint64, int) {
	end := min(start+b, l.limit)
	if start >= end {
		return dst, 0
	}
	dst = slices.Grow(dst, int(end-start))
	if m := min(end, l.n); start < m {
		if rf, ok := l.ord.(rangeOrder); ok {
			dst = rf.appendRange(start, m, dst) // batch-wise, no per-position call
		} else {
			for q := start; q < m; q++ {
				dst = append(dst, l.ord.at(q))
			}
		}
	}
	pads := 0
	for q := max(start, l.n); q < end; {
		// Pad slots q hold positions (q-n) mod n: consecutive runs.
		from := (q - l.n) % l.n
		run := min(end-q, l.n-from)
		if rf, ok := l.ord.(rangeOrder); ok {
			dst = rf.appendRange(from, from+run, dst)
		} else {
			for x := from; x < from+run; x++ {
				dst = append(dst, l.ord.at(x))
			}
		}
		pads += int(run)
		q += run
	}
	return dst, pads
}

// rangeOrder is an order that can evaluate consecutive positions at once
// (no per-position interface call), with the same ids as at.
type rangeOrder interface {
	order
	appendRange(lo, hi uint64, dst []uint64) []uint64 // ids at positions [lo, hi), hi <= n
}

// identity is the order of shuffle mode none.
type identity struct{}

func (identity) appendRange(lo, hi uint64, dst []uint64) []uint64 {
	for q := lo; q < hi; q++ {
		dst = append(dst, q)
	}
	return dst
}

func (identity) at(q uint64) uint64   { return q }
func (identity) pos(id uint64) uint64 { return id }

// permOrder is the order of shuffle mode global.
type permOrder struct{ p Perm }

func (o permOrder) at(q uint64) uint64   { return o.p.Apply(q) }
func (o permOrder) pos(id uint64) uint64 { return o.p.Invert(id) }
func (o permOrder) appendRange(lo, hi uint64, dst []uint64) []uint64 {
	return o.p.applyRange(lo, hi, dst)
}

// offsetOrder is epoch e's order of a packed mixture (PLAN.md §12.1):
// the order of its P_e rows, shifted to their sample ids base … base+P_e−1.
type offsetOrder struct {
	base  uint64
	inner rangeOrder
}

func (o offsetOrder) at(q uint64) uint64   { return o.base + o.inner.at(q) }
func (o offsetOrder) pos(id uint64) uint64 { return o.inner.pos(id - o.base) }
func (o offsetOrder) appendRange(lo, hi uint64, dst []uint64) []uint64 {
	from := len(dst)
	dst = o.inner.appendRange(lo, hi, dst)
	for i := from; i < len(dst); i++ {
		dst[i] += o.base
	}
	return dst
}

// blocksOrder is one epoch's order in shuffle mode blocks. Memory: 16 bytes
// per block plus 72 bytes per window (a Perm).
type blocksOrder struct {
	idx    *sourceIndex
	k      int
	sigma  []uint32 // epoch block position -> block index
	where  []uint32 // block index -> epoch block position
	prefix []uint64 // prefix[q] = rows of blocks at positions < q; len blocks+1
	win    []Perm   // per window
}

func newBlocksOrder(idx *sourceIndex, seed uint64, epoch, k int) *blocksOrder {
	nb := len(idx.blocks)
	o := &blocksOrder{idx: idx, k: k, sigma: make([]uint32, nb), where: make([]uint32, nb), prefix: make([]uint64, nb+1)}
	bp := NewPerm(uint64(nb), purposeBlocks, seed, uint64(epoch), 0)
	for q := 0; q < nb; q++ {
		bi := uint32(bp.Apply(uint64(q)))
		o.sigma[q], o.where[bi] = bi, uint32(q)
		o.prefix[q+1] = o.prefix[q] + idx.blocks[bi].rows
	}
	nw := (nb + k - 1) / k
	o.win = make([]Perm, nw)
	for t := range o.win {
		lo, hi := t*k, min((t+1)*k, nb)
		o.win[t] = NewPerm(o.prefix[hi]-o.prefix[lo], purposeWindow, seed, uint64(epoch), uint64(t))
	}
	return o
}

// blockAt returns the epoch block position q in [lo, hi) with
// prefix[q] <= x < prefix[q+1]: the first q with prefix[q+1] > x (a
// binary search, as sort.Search without its closure call per step).
func (o *blocksOrder) blockAt(x uint64, lo, hi int) int {
	pr := o.prefix
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if pr[m+1] > x {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// blockIn is blockAt for an x known to lie in [prefix[lo], prefix[hi]),
// lo < hi: the last q in [lo, hi) with prefix[q] <= x, found without a
// branch per step (the offsets a window's permutation gives are random,
// so a branching search mispredicts about every other step). Every block
// holds at least one row (buildIndex skips empty row groups), so prefix
// is strictly increasing and this q is blockAt's.
func (o *blocksOrder) blockIn(x uint64, lo, hi int) int {
	pr := o.prefix
	base, n := lo, hi-lo
	for n > 1 {
		half := n >> 1
		// le is 1 when pr[base+half] <= x, else 0: every prefix and x
		// are below 2^63, so v-x-1 wraps to bit 63 set exactly when v <= x.
		le := int((pr[base+half] - x - 1) >> 63)
		base += half & -le
		n -= half
	}
	return base
}

// maxBuckets bounds the buckets of bucketed's table (on the stack).
const maxBuckets = 256

// bucketed replaces each window offset in offs (of the window of blocks
// [wlo, whi)) with its id, through a table of the window cut into
// buckets of 2^s rows, 2^s at most the rows of the window's smallest
// block: a bucket then holds at most one block start, so the block of an
// offset is the bucket's first block or the one after, one compare with
// no branch, where a search costs a chain of dependent loads per id. It
// reports false, changing nothing, when the table would need more than
// maxBuckets buckets (a window with a block much smaller than the
// window), or the window holds one block.
func (o *blocksOrder) bucketed(offs []uint64, wlo, whi int) bool {
	k := whi - wlo
	if k < 2 || k > maxBuckets {
		return false
	}
	pr := o.prefix[wlo : whi+1] // pr[j]-pr[0]: window offset of block wlo+j
	ws := pr[0]
	minRows := pr[1] - pr[0]
	for j := 1; j < k; j++ {
		minRows = min(minRows, pr[j+1]-pr[j])
	}
	s := uint(bits.Len64(minRows) - 1) // 2^s <= minRows
	w := pr[k] - ws
	nb := (w-1)>>s + 1
	if nb > maxBuckets {
		return false
	}
	var first [maxBuckets]uint8 // block (relative) holding each bucket's first offset
	var start [maxBuckets + 1]uint64
	var delta [maxBuckets]uint64 // id - window offset, per block
	for j := 0; j < k; j++ {
		start[j] = pr[j] - ws
		delta[j] = o.idx.blocks[o.sigma[wlo+j]].start - start[j]
	}
	start[k] = w
	j := 0
	for b := uint64(0); b < nb; b++ {
		for start[j+1] <= b<<s {
			j++
		}
		first[b] = uint8(j)
	}
	for i, x := range offs {
		j := int(first[x>>s])
		j += b2i(start[j+1] <= x)
		offs[i] = x + delta[j]
	}
	return true
}

// appendRange appends the ids at positions [lo, hi) (hi <= n), the same
// as at per position: each run of positions inside one window is sent
// through the window's permutation at once (Perm.applyRange), then each
// window offset is located among the window's blocks only.
func (o *blocksOrder) appendRange(lo, hi uint64, dst []uint64) []uint64 {
	nb := len(o.sigma)
	blocks := o.idx.blocks
	for lo < hi {
		t := o.blockAt(lo, 0, nb) / o.k
		wlo, whi := t*o.k, min((t+1)*o.k, nb)
		ws := o.prefix[wlo]
		end := min(hi, o.prefix[whi])
		from := len(dst)
		dst = o.win[t].applyRange(lo-ws, end-ws, dst)
		if !o.bucketed(dst[from:], wlo, whi) {
			for i := from; i < len(dst); i++ {
				x := ws + dst[i]
				bq := o.blockIn(x, wlo, whi)
				dst[i] = blocks[o.sigma[bq]].start + (x - o.prefix[bq])
			}
		}
		lo = end
	}
	return dst
}

func (o *blocksOrder) at(q uint64) uint64 {
	nb := len(o.sigma)
	t := o.blockAt(q, 0, nb) / o.k
	lo, hi := t*o.k, min((t+1)*o.k, nb)
	ws := o.prefix[lo]
	x := ws + o.win[t].Apply(q-ws)
	bq := o.blockAt(x, lo, hi)
	return o.idx.blocks[o.sigma[bq]].start + (x - o.prefix[bq])
}

func (o *blocksOrder) pos(id uint64) uint64 {
	bi := o.idx.blockOf(id)
	bq := int(o.where[bi])
	t := bq / o.k
	ws := o.prefix[t*o.k]
	x := o.prefix[bq] + (id - o.idx.blocks[bi].start)
	return ws + o.win[t].Invert(x-ws)
}

// partition is the fixed set of blocks one rank owns in partitioned mode,
// in block index order.
type partition struct {
	blocks []int    // block indices, ascending
	prefix []uint64 // prefix[j] = rows of blocks[:j]; len blocks+1
}

func (pt *partition) rows() uint64 { return pt.prefix[len(pt.blocks)] }

// partOrder is one rank's order of its partition in one epoch.
type partOrder struct {
	idx  *sourceIndex
	part *partition
	perm Perm
}

func (o partOrder) at(q uint64) uint64 {
	li := o.perm.Apply(q)
	pr := o.part.prefix
	j := sort.Search(len(o.part.blocks), func(i int) bool { return pr[i+1] > li })
	return o.idx.blocks[o.part.blocks[j]].start + (li - pr[j])
}

func (o partOrder) pos(id uint64) uint64 {
	bi := o.idx.blockOf(id)
	j := sort.SearchInts(o.part.blocks, bi)
	return o.perm.Invert(o.part.prefix[j] + (id - o.idx.blocks[bi].start))
}

// assignPartitions assigns blocks to r ranks (PLAN.md §Partitioned): blocks
// in order of rows descending, then index ascending, each to the rank with
// the fewest rows so far, then the lowest rank id.
func assignPartitions(idx *sourceIndex, r int) (parts []partition, owner []int32) {
	nb := len(idx.blocks)
	order := make([]int, nb)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return idx.blocks[order[a]].rows > idx.blocks[order[b]].rows })
	h := make(loadHeap, r)
	for i := range h {
		h[i] = rankLoad{rank: i}
	}
	heap.Init(&h)
	owner = make([]int32, nb)
	for _, bi := range order {
		owner[bi] = int32(h[0].rank)
		h[0].rows += idx.blocks[bi].rows
		heap.Fix(&h, 0)
	}
	parts = make([]partition, r)
	for i := range parts {
		parts[i].prefix = []uint64{0}
	}
	for bi := 0; bi < nb; bi++ {
		pt := &parts[owner[bi]]
		pt.blocks = append(pt.blocks, bi)
		pt.prefix = append(pt.prefix, pt.prefix[len(pt.prefix)-1]+idx.blocks[bi].rows)
	}
	return parts, owner
}

type rankLoad struct {
	rows uint64
	rank int
}

// loadHeap is a min-heap of ranks by (rows, rank).
type loadHeap []rankLoad

func (h loadHeap) Len() int { return len(h) }
func (h loadHeap) Less(i, j int) bool {
	return h[i].rows < h[j].rows || h[i].rows == h[j].rows && h[i].rank < h[j].rank
}
func (h loadHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *loadHeap) Push(x any)   { *h = append(*h, x.(rankLoad)) }
func (h *loadHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// state is the derived, immutable-after-setup machinery of a plan.
type state struct {
	cfg    Config
	idx    *sourceIndex
	g, b   uint64
	steps  int
	limit  uint64      // non-partitioned: slots per epoch
	parts  []partition // partitioned only
	owner  []int32     // partitioned: block index -> rank
	mix    *mixState   // mixtures only
	epochs []epochCache
	// A packed mixture only (PLAN.md §12.1): prows[e] = P_e, the packed
	// rows of epoch e, and pbase[e] = O_e, the sample id of its first
	// row (pbase[E] = N).
	prows, pbase []uint64
}

// epochCache holds one epoch's lanes, built on first use.
type epochCache struct {
	once  sync.Once
	lanes []lane // one lane, or one per rank in partitioned mode
}

// newState derives the batch machinery of a plan over idx: of a mixture
// when ms is not nil, of a packed mixture's per-epoch rows (PLAN.md §12.1,
// prows[e] = P_e, summing to idx.n) when prows is not nil.
func newState(idx *sourceIndex, cfg Config, ms *mixState, prows []uint64) (*state, Derived, error) {
	if len(idx.blocks) >= 1<<32-1 {
		return nil, Derived{}, configErrorf("source", "more than 2^32-2 row groups")
	}
	st := &state{cfg: cfg, idx: idx, g: uint64(cfg.GlobalBatch), b: uint64(cfg.GlobalBatch / cfg.WorldSize), epochs: make([]epochCache, cfg.Epochs), mix: ms}
	n := idx.n
	d := Derived{Samples: n, Blocks: len(idx.blocks), BatchSize: int(st.b)}
	if prows != nil {
		return st.perEpochRows(prows, d)
	}
	if ms != nil {
		n = ms.t // the epoch's slot sequence (PLAN.md §11.6)
	}
	if cfg.Shuffle != ShufflePartitioned {
		full := n / st.g
		ceil := (n + st.g - 1) / st.g
		switch cfg.Remainder {
		case RemainderDrop:
			st.steps, st.limit = int(full), full*st.g
			d.DroppedPerEpoch = n - st.limit
		case RemainderPad:
			st.steps, st.limit = int(ceil), ceil*st.g
			d.PaddedPerEpoch = st.limit - n
		case RemainderPartial:
			st.steps, st.limit = int(ceil), n
		}
		d.StepsPerEpoch = st.steps
		return st, d, nil
	}
	st.parts, st.owner = assignPartitions(idx, cfg.WorldSize)
	var minSteps, maxSteps uint64
	for r := range st.parts {
		nr := st.parts[r].rows()
		d.PartitionRows = append(d.PartitionRows, nr)
		lo, hi := nr/st.b, (nr+st.b-1)/st.b
		if r == 0 || lo < minSteps {
			minSteps = lo
		}
		if hi > maxSteps {
			maxSteps = hi
		}
	}
	switch cfg.Remainder {
	case RemainderDrop:
		st.steps = int(minSteps)
	default:
		st.steps = int(maxSteps)
	}
	for r, nr := range d.PartitionRows {
		used := uint64(st.steps) * st.b
		switch {
		case cfg.Remainder == RemainderDrop:
			d.DroppedPerEpoch += nr - used
		case cfg.Remainder == RemainderPad && nr == 0 && st.steps > 0:
			return nil, Derived{}, configErrorf("remainder", "partitioned mode gives rank %d no row group (%d row groups for world size %d), so it has nothing to pad from; use remainder partial or drop", r, len(idx.blocks), cfg.WorldSize)
		case cfg.Remainder == RemainderPad:
			d.PaddedPerEpoch += used - nr
		}
	}
	d.StepsPerEpoch = st.steps
	return st, d, nil
}

// perEpochRows fills st and d for a packed mixture whose epoch e has
// prows[e] rows (PLAN.md §12.1): steps S = floor(min P_e / G) for drop,
// ceil(max P_e / G) for pad and partial, the same in every epoch; epoch e
// uses S·G slots (drop, pad) or P_e (partial). DroppedPerEpoch and
// PaddedPerEpoch are the largest of any epoch. Pad with an epoch of no
// rows is refused (ErrConfig): it has nothing to pad from.
func (st *state) perEpochRows(prows []uint64, d Derived) (*state, Derived, error) {
	st.prows, st.pbase = prows, make([]uint64, len(prows)+1)
	lo, hi := prows[0], prows[0]
	for e, r := range prows {
		st.pbase[e+1] = st.pbase[e] + r
		lo, hi = min(lo, r), max(hi, r)
	}
	switch st.cfg.Remainder {
	case RemainderDrop:
		st.steps = int(lo / st.g)
		st.limit = uint64(st.steps) * st.g
		d.DroppedPerEpoch = hi - st.limit
	case RemainderPad:
		st.steps = int((hi + st.g - 1) / st.g)
		st.limit = uint64(st.steps) * st.g
		d.PaddedPerEpoch = st.limit - lo
		if lo == 0 && st.steps > 0 {
			return nil, Derived{}, configErrorf("remainder", "an epoch of the packed mixture has no packed row (its draws hold no token), so it has nothing to pad from; use remainder partial or drop")
		}
	case RemainderPartial:
		st.steps = int((hi + st.g - 1) / st.g)
	}
	d.StepsPerEpoch = st.steps
	return st, d, nil
}

// rowBase returns O_e, the sample id of epoch e's first packed row in a
// packed mixture, 0 otherwise.
func (st *state) rowBase(e int) uint64 {
	if st.pbase == nil {
		return 0
	}
	return st.pbase[e]
}

// rowEpoch returns the epoch whose packed rows hold id (id < N) in a
// packed mixture, 0 otherwise.
func (st *state) rowEpoch(id uint64) int {
	if st.pbase == nil {
		return 0
	}
	return sort.Search(len(st.prows), func(e int) bool { return st.pbase[e+1] > id })
}

// inEpoch reports whether epoch e's order holds id: always, except in a
// packed mixture, whose epoch e holds its own rows only.
func (st *state) inEpoch(e int, id uint64) bool {
	return st.pbase == nil || id >= st.pbase[e] && id < st.pbase[e+1]
}

// epoch returns the lanes of epoch e, building them on first use.
func (st *state) epoch(e int) []lane {
	c := &st.epochs[e]
	c.once.Do(func() {
		seed := st.cfg.Seed
		if st.prows != nil {
			n := st.prows[e]
			var inner rangeOrder = identity{}
			if st.cfg.Shuffle == ShuffleGlobal {
				inner = permOrder{NewPerm(n, purposeGlobal, seed, uint64(e), 0)}
			}
			limit := st.limit
			if st.cfg.Remainder == RemainderPartial {
				limit = n
			}
			c.lanes = []lane{{ord: offsetOrder{base: st.pbase[e], inner: inner}, n: n, limit: limit}}
			return
		}
		if st.mix != nil {
			c.lanes = []lane{{ord: mixOrder{ms: st.mix, epoch: uint64(e)}, n: st.mix.t, limit: st.limit}}
			return
		}
		switch st.cfg.Shuffle {
		case ShuffleNone:
			c.lanes = []lane{{ord: identity{}, n: st.idx.n, limit: st.limit}}
		case ShuffleGlobal:
			c.lanes = []lane{{ord: permOrder{NewPerm(st.idx.n, purposeGlobal, seed, uint64(e), 0)}, n: st.idx.n, limit: st.limit}}
		case ShuffleBlocks:
			c.lanes = []lane{{ord: newBlocksOrder(st.idx, seed, e, st.cfg.Window), n: st.idx.n, limit: st.limit}}
		case ShufflePartitioned:
			c.lanes = make([]lane, len(st.parts))
			for r := range st.parts {
				nr := st.parts[r].rows()
				limit := uint64(st.steps) * st.b
				if st.cfg.Remainder == RemainderPartial {
					limit = nr
				}
				c.lanes[r] = lane{
					ord:   partOrder{idx: st.idx, part: &st.parts[r], perm: NewPerm(nr, purposePartition, seed, uint64(e), uint64(r))},
					n:     nr,
					limit: limit,
				}
			}
		}
	})
	return c.lanes
}

// lane returns the lane holding rank's batch at step and the batch's first
// position in it.
func (st *state) lane(epoch, rank, step int) (*lane, uint64) {
	ls := st.epoch(epoch)
	if st.cfg.Shuffle == ShufflePartitioned {
		return &ls[rank], uint64(step) * st.b
	}
	return &ls[0], uint64(step)*st.g + uint64(rank)*st.b
}

func (st *state) position(epoch int, id uint64) Position {
	if st.mix != nil {
		for _, q := range st.mix.slotsOf(uint64(epoch), id) {
			if q < st.limit {
				return st.at(q, 0)
			}
		}
		return Position{Dropped: true}
	}
	if !st.inEpoch(epoch, id) {
		return Position{Dropped: true}
	}
	l, r := st.laneOf(epoch, id)
	q := l.ord.pos(id)
	if q >= l.limit {
		return Position{Dropped: true}
	}
	return st.at(q, r)
}

// laneOf returns the lane of epoch holding id, and the rank owning it in
// partitioned mode (else 0).
func (st *state) laneOf(epoch int, id uint64) (*lane, int) {
	ls := st.epoch(epoch)
	if st.cfg.Shuffle == ShufflePartitioned {
		r := int(st.owner[st.idx.blockOf(id)])
		return &ls[r], r
	}
	return &ls[0], 0
}

// at returns the position of lane position q (of rank r's lane in
// partitioned mode).
func (st *state) at(q uint64, r int) Position {
	if st.cfg.Shuffle == ShufflePartitioned {
		return Position{Step: int(q / st.b), Rank: r, Slot: int(q % st.b)}
	}
	return Position{Step: int(q / st.g), Rank: int(q % st.g / st.b), Slot: int(q % st.b)}
}

// occurrences appends the positions of id in epoch: lane position q and the
// pad positions q+n, q+2n, ... below the lane's limit (see lane.fill).
func (st *state) occurrences(epoch int, id uint64, dst []Position) []Position {
	if st.mix != nil {
		var qs []uint64
		for _, q := range st.mix.slotsOf(uint64(epoch), id) {
			for ; q < st.limit; q += st.mix.t {
				qs = append(qs, q)
			}
		}
		slices.Sort(qs)
		for _, q := range qs {
			dst = append(dst, st.at(q, 0))
		}
		return dst
	}
	if !st.inEpoch(epoch, id) {
		return dst
	}
	l, r := st.laneOf(epoch, id)
	for q := l.ord.pos(id); q < l.limit; q += l.n {
		dst = append(dst, st.at(q, r))
	}
	return dst
}

func (st *state) dropped(epoch int) []uint64 {
	var out []uint64
	for _, l := range st.epoch(epoch) {
		if l.limit >= l.n {
			continue
		}
		if rf, ok := l.ord.(rangeOrder); ok {
			out = rf.appendRange(l.limit, l.n, out)
			continue
		}
		for q := l.limit; q < l.n; q++ {
			out = append(out, l.ord.at(q))
		}
	}
	return out
}
