package plan

import (
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// Batch-wise evaluation of a mixture's epoch order (PLAN.md §11.2–§11.4):
// what RankBatch, the epoch digest, convert and verify read. The ids are
// those of the per-draw definition (merge, then drawID for each slot); the
// work is arranged per batch instead of per slot:
//
//   - the batch's slot-to-source sequence of §11.4 depends only on the
//     batch's counts, which take few distinct values (a full batch gives
//     each source floor(G·c_i/T) or one more), so it is computed once per
//     distinct counts and kept (mixPattern), with checkpoints of each
//     source's draws so that a rank's slots [r·b, (r+1)·b) start without
//     merging the slots before them;
//   - a source's draws in a slot range are consecutive stream positions,
//     so they go through its pass's permutation as a range (applyRange,
//     four positions through the Feistel network at once), with the
//     pass's round keys derived once and kept (passPerm);
//   - the source's local rows become sample ids by one table load each
//     (a filtered source's ids table), an addition (a source whose rows
//     are one run of ids) or a search of its row groups, in a loop over
//     the drawn rows with no other work, so that the table's cache misses
//     overlap;
//   - the ids are then placed in slot order by the batch's sequence.

// patCacheBytes bounds the memory of a plan's kept slot sequences
// (mixPattern); past it, a batch's sequence is computed for each call.
var patCacheBytes = 32 << 20

// mixPattern is the slot-to-source sequence of one batch composition
// (PLAN.md §11.4): src[q] is the source of slot q, and pre[c·m + i] the
// draws of source i in slots [0, c·stride).
type mixPattern struct {
	src    []uint8
	pre    []uint32
	stride int
}

// patKey identifies a batch composition: for a full batch, bit i says
// whether source i takes an extra sample; byte 32 is 1 for the partial
// batch (whose composition is fixed).
type patKey [MaxMixSources/8 + 1]byte

// patStride is the distance between checkpoints of a pattern of m
// sources: at most one byte of checkpoints per slot.
func patStride(m int) int { return 64 * ((m + 15) / 16) }

// newPattern merges a batch of counts cnt (PLAN.md §11.4) into its
// slot-to-source sequence and checkpoints.
func newPattern(cnt []uint64) *mixPattern {
	m := len(cnt)
	var g uint64
	for _, c := range cnt {
		g += c
	}
	p := &mixPattern{src: make([]uint8, g), stride: patStride(m)}
	merge(cnt, g, func(q uint64, i int, _ uint64) { p.src[q] = uint8(i) })
	p.pre = make([]uint32, (len(p.src)/p.stride+1)*m)
	run := make([]uint32, m)
	for q, s := range p.src {
		if q%p.stride == 0 {
			copy(p.pre[q/p.stride*m:], run)
		}
		run[s]++
	}
	if len(p.src)%p.stride == 0 {
		copy(p.pre[len(p.src)/p.stride*m:], run)
	}
	return p
}

// before sets j[i] to the draws of source i in slots [0, q).
func (p *mixPattern) before(q uint64, j []uint64) {
	m := len(j)
	c := int(q) / p.stride
	for i, x := range p.pre[c*m : (c+1)*m] {
		j[i] = uint64(x)
	}
	for _, s := range p.src[c*p.stride : q] {
		j[s]++
	}
}

func (p *mixPattern) size() int { return len(p.src) + 4*len(p.pre) }

// pattern returns the slot-to-source sequence of batch b whose counts
// are cnt, kept for the plan's life while patCacheBytes allows.
func (ms *mixState) pattern(b uint64, cnt []uint64) *mixPattern {
	var key patKey
	if b < ms.kFull {
		for i := range ms.src {
			if ms.hasExtra(b, i) {
				key[i/8] |= 1 << (i % 8)
			}
		}
	} else {
		key[len(key)-1] = 1
	}
	ms.patMu.RLock()
	p := ms.pats[key]
	ms.patMu.RUnlock()
	if p != nil {
		return p
	}
	p = newPattern(cnt)
	ms.patMu.Lock()
	defer ms.patMu.Unlock()
	if q := ms.pats[key]; q != nil {
		return q
	}
	if ms.patBytes+p.size() <= patCacheBytes {
		if ms.pats == nil {
			ms.pats = map[patKey]*mixPattern{}
		}
		ms.pats[key] = p
		ms.patBytes += p.size()
	}
	return p
}

// passPerm is the permutation of one pass of one source (PLAN.md §11.2).
type passPerm struct {
	pass uint64
	perm Perm
}

// passPermWays is how many passes of each source keep their round keys.
const passPermWays = 4

// perm returns source i's permutation of pass pass; the round keys of the
// last passes used are kept (deriving them costs two SHA-256).
func (ms *mixState) perm(i int, pass uint64) *Perm {
	slot := &ms.perms[i][pass%passPermWays]
	if pp := slot.Load(); pp != nil && pp.pass == pass {
		return &pp.perm
	}
	pp := &passPerm{pass: pass, perm: NewPerm(ms.src[i].n, purposeMixture, ms.seed, pass, uint64(i))}
	slot.Store(pp)
	return &pp.perm
}

// drawScratch is the per-call working memory of mixOrder.appendRange.
type drawScratch struct {
	cnt, start, j, c []uint64
	off              []int
	buf              []uint64
}

var drawScratchPool sync.Pool

func getDrawScratch(m int) *drawScratch {
	sc, _ := drawScratchPool.Get().(*drawScratch)
	if sc == nil || len(sc.cnt) != m {
		sc = &drawScratch{cnt: make([]uint64, m), start: make([]uint64, m), j: make([]uint64, m), c: make([]uint64, m), off: make([]int, m)}
	}
	return sc
}

// appendRange appends the ids of slots [lo, hi) of the epoch (hi <= T).
func (o mixOrder) appendRange(lo, hi uint64, dst []uint64) []uint64 {
	ms := o.ms
	ms.build()
	sc := getDrawScratch(len(ms.src))
	dst = slices.Grow(dst, int(hi-lo))
	for lo < hi {
		b := lo / ms.g
		base := b * ms.g
		end := min(hi, base+ms.g) - base
		ms.counts(b, sc.cnt, sc.start)
		dst = o.appendBatch(b, lo-base, end, sc, dst)
		lo = base + end
	}
	drawScratchPool.Put(sc)
	return dst
}

// appendBatch appends the ids of slots [from, end) of batch b, whose
// counts and starting draws are in sc.cnt and sc.start.
func (o mixOrder) appendBatch(b, from, end uint64, sc *drawScratch, dst []uint64) []uint64 {
	ms := o.ms
	if len(ms.src) == 1 { // every slot is the source's next draw
		return o.appendDraws(0, sc.start[0]+from, end-from, dst)
	}
	p := ms.pattern(b, sc.cnt)
	p.before(from, sc.j)
	clear(sc.c)
	seq := p.src[from:end]
	for _, s := range seq {
		sc.c[s]++
	}
	buf := sc.buf[:0]
	for i, c := range sc.c {
		sc.off[i] = len(buf)
		if c > 0 {
			buf = o.appendDraws(i, sc.start[i]+sc.j[i], c, buf)
		}
	}
	sc.buf = buf
	off := sc.off
	for _, s := range seq {
		dst = append(dst, buf[off[s]])
		off[s]++
	}
	return dst
}

// appendDraws appends the ids of source i's draws [d, d+count) of the
// epoch (PLAN.md §11.2): stream positions epoch·c_i + d onwards, through
// each pass's permutation as a range.
func (o mixOrder) appendDraws(i int, d, count uint64, dst []uint64) []uint64 {
	ms := o.ms
	s := &ms.src[i]
	hi, lo := bits.Mul64(o.epoch, s.c)
	lo, carry := bits.Add64(lo, d, 0)
	pass, off := bits.Div64(hi+carry, lo, s.n)
	for count > 0 {
		seg := min(count, s.n-off)
		at := len(dst)
		if ms.shuffle {
			dst = ms.perm(i, pass).applyRange(off, off+seg, dst)
		} else {
			for x := off; x < off+seg; x++ {
				dst = append(dst, x)
			}
		}
		ms.mapLocal(i, dst[at:])
		count -= seg
		off, pass = 0, pass+1
	}
	return dst
}

// mapLocal replaces each local row of source i in xs (PLAN.md §11.2, the
// selected rows' indices with a filter) by its sample id.
func (ms *mixState) mapLocal(i int, xs []uint64) {
	s := &ms.src[i]
	switch {
	case s.selRow != nil:
		tab := s.selRow
		for k, x := range xs {
			xs[k] = uint64(tab[x])
		}
	case s.sel == nil && s.contig:
		for k := range xs {
			xs[k] += s.base
		}
	default:
		for k, x := range xs {
			xs[k] = ms.global(i, x)
		}
	}
}

// contiguous reports whether the rows of pt are one run of sample ids,
// and the id of its first row.
func contiguous(idx *sourceIndex, pt *partition) (bool, uint64) {
	if len(pt.blocks) == 0 {
		return false, 0
	}
	base := idx.blocks[pt.blocks[0]].start
	for j, bi := range pt.blocks {
		if idx.blocks[bi].start != base+pt.prefix[j] {
			return false, 0
		}
	}
	return true, base
}

// permCache is the kept pass permutations of each source (mixState.perm).
type permCache [passPermWays]atomic.Pointer[passPerm]
