package verify

import (
	"context"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/feature"
	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// The deep check by parts over a shard set (see deeppart.go): the shards'
// needs merged per group of shards with the same tensors, the group's
// parts held once each, every shard of the group compared against them.

// rowGroups is the plan's non-empty row groups as id ranges, with a table
// that finds an id's row group without a search.
type rowGroups struct {
	start []uint64 // first id of each non-empty row group, ascending, then the plan's sample count
	shift uint     // ids per bucket: 1 << shift
	first []int32  // per bucket: the row group holding its first id
}

// newRowGroups returns the row groups of p, with about 4 buckets a row
// group.
func newRowGroups(p *plan.Plan) *rowGroups {
	rg := &rowGroups{}
	var id uint64
	for _, f := range p.Source.Files {
		for _, r := range f.RowGroups {
			if r > 0 {
				rg.start = append(rg.start, id)
				id += uint64(r)
			}
		}
	}
	rg.start = append(rg.start, id)
	n := len(rg.start) - 1
	for rg.shift < 63 && id>>rg.shift > uint64(4*max(1, n)) {
		rg.shift++
	}
	rg.first = make([]int32, id>>rg.shift+1)
	g := 0
	for b := range rg.first {
		lo := uint64(b) << rg.shift
		for g+1 < n && rg.start[g+1] <= lo {
			g++
		}
		rg.first[b] = int32(g)
	}
	return rg
}

// of returns the row group holding id (< the plan's sample count).
func (rg *rowGroups) of(id uint64) int {
	g := int(rg.first[id>>rg.shift])
	for rg.start[g+1] <= id {
		g++
	}
	return g
}

// partGroup is the shards of a set with the same tensor table, checked by
// parts together: their needs merged, each part held once through the
// first shard's source.
type partGroup struct {
	tensors []shardfmt.TensorInfo
	shards  []*deepCheck
	cnt     []uint64 // per row group: the shards' needed ids, summed
	bytes   []uint64 // per row group: their est bytes, summed
}

// joinGroup merges d's needs (step 1 done) into the group of its tensors
// and drops d's own counts. d reads the shard through file, held open to
// the end while fewer than keepOpen shards are (shardfile.go).
func (c *checker) joinGroup(d *deepCheck, file *shardFile) {
	pc := d.part
	c.mu.Lock()
	defer c.mu.Unlock()
	pc.file = file
	if c.heldOpen < c.keepOpen {
		c.heldOpen++
		file.keep = true
	}
	var g *partGroup
	for _, x := range c.groups {
		if shardfmt.SameTensors(x.tensors, d.tensors) {
			g = x
			break
		}
	}
	if g == nil {
		g = &partGroup{tensors: d.tensors, cnt: make([]uint64, len(pc.cnt)), bytes: make([]uint64, len(pc.cnt))}
		c.groups = append(c.groups, g)
	}
	g.shards = append(g.shards, d)
	for i := range pc.cnt {
		g.cnt[i] += pc.cnt[i]
		g.bytes[i] += pc.bytes[i]
	}
	pc.cnt, pc.bytes = nil, nil
}

// est returns per row group the estimated bytes of the group's distinct
// needed ids: at most min(rows, ids counted) of them, at the mean bytes
// counted an id.
func (g *partGroup) est(rg *rowGroups) []uint64 {
	out := make([]uint64, len(g.cnt))
	for i, n := range g.cnt {
		if n == 0 {
			continue
		}
		rows := rg.start[i+1] - rg.start[i]
		out[i] = g.bytes[i]
		if n > rows {
			// bytes*rows/n < bytes: the high word of the product is
			// below n.
			hi, lo := bits.Mul64(g.bytes[i], rows)
			out[i], _ = bits.Div64(hi, lo, n)
		}
	}
	return out
}

// part is one id range [lo, hi) of the parts.
type part struct{ lo, hi uint64 }

// indexBytes is the memory of a part's indexes over rows ids.
func indexBytes(rows uint64) uint64 { return (rows + 63) / 64 * partRowBytes }

// cutParts cuts the row groups holding needed ids (est > 0) into parts
// whose est plus index stays within budget (see deeppart.go, step 2).
func cutParts(rg *rowGroups, est []uint64, budget uint64) []part {
	var out []part
	var sum uint64
	open := false
	for g, e := range est {
		if e == 0 {
			continue
		}
		lo, hi := rg.start[g], rg.start[g+1]
		if open {
			p := &out[len(out)-1]
			if sum+e+indexBytes(hi-p.lo) <= budget {
				p.hi = hi
				sum += e
				continue
			}
		}
		if c := e + indexBytes(hi-lo); c > budget {
			n := (c + budget - 1) / budget
			rows := hi - lo
			n = min(n, rows)
			for j := range n {
				out = append(out, part{lo + rows*j/n, lo + rows*(j+1)/n})
			}
			open = false
			continue
		}
		out = append(out, part{lo, hi})
		sum, open = e, true
	}
	return out
}

// partIndex is the ids of one part needed by a group's shards: a bitmap
// over the part's range [lo, hi) with each word's rank, and the members
// in ascending order.
type partIndex struct {
	lo, hi uint64
	base   uint64 // lo rounded down to a multiple of 64: bit 0 of words[0]
	words  []uint64
	ranks  []uint32 // ranks[w]: members below base + 64*w
	ids    []uint64
}

// reset empties x for the range of p, reusing its memory.
func (x *partIndex) reset(p part) {
	x.lo, x.hi, x.base = p.lo, p.hi, p.lo&^63
	n := int((p.hi - x.base + 63) / 64)
	if cap(x.words) < n {
		x.words, x.ranks = make([]uint64, n), make([]uint32, n)
	}
	x.words, x.ranks = x.words[:n], x.ranks[:n]
	clear(x.words)
	x.ids = x.ids[:0]
}

// in reports whether id lies in the part's range.
func (x *partIndex) in(id uint64) bool { return id >= x.lo && id < x.hi }

// mark adds id (in the range); safe from several goroutines at once.
func (x *partIndex) mark(id uint64) {
	i := id - x.base
	w, bit := &x.words[i>>6], uint64(1)<<(i&63)
	if atomic.LoadUint64(w)&bit == 0 {
		atomic.OrUint64(w, bit)
	}
}

// seal computes the ranks and the member list; call after the last mark.
func (x *partIndex) seal() {
	var c uint32
	for w, m := range x.words {
		x.ranks[w] = c
		c += uint32(bits.OnesCount64(m))
		for m != 0 {
			x.ids = append(x.ids, x.base+uint64(w)<<6+uint64(bits.TrailingZeros64(m)))
			m &= m - 1
		}
	}
}

// index returns id's index among the members, or -1 when it is none.
func (x *partIndex) index(id uint64) int {
	if !x.in(id) {
		return -1
	}
	i := id - x.base
	m, bit := x.words[i>>6], uint64(1)<<(i&63)
	if m&bit == 0 {
		return -1
	}
	return int(x.ranks[i>>6]) + bits.OnesCount64(m&(bit-1))
}

// runDeepParts runs steps 2 and 3 of the deep check by parts for every
// group of shards (their integrity checked and needs merged), then adds
// each shard's findings to it.
func (c *checker) runDeepParts(ctx context.Context, checks []*deepCheck) {
	part, decode := feature.NewBudget(c.opts.MemoryLimit).VerifyParts()
	budget := uint64(part)
	var cur, nxt partIndex
	for _, g := range c.groups {
		slices.SortFunc(g.shards, func(a, b *deepCheck) int { return a.part.idx - b.part.idx })
		src := g.shards[0].part.src
		if ml, ok := src.(MemoryLimiter); ok {
			ml.SetMemoryLimit(decode)
		}
		for _, d := range g.shards {
			d.part.src = src
		}
		est := g.est(c.rowGroups)
		parts := cutParts(c.rowGroups, est, budget)
		c.rep.DeepParts += len(parts)
		if c.opts.OnDeepParts != nil && len(parts) > 0 {
			var total uint64
			for _, e := range est {
				total += e
			}
			// The parts take half the limit (budget above).
			c.opts.OnDeepParts(len(parts), int64(min(2*total, math.MaxInt64/2)))
		}
		x, next := &cur, &nxt
		if len(parts) > 0 {
			x.reset(parts[0])
			c.eachShard(ctx, g.shards, func(d *deepCheck, sc *partScratch) { d.collectPart(x, sc) })
		}
		for i := range parts {
			if ctx.Err() != nil {
				return
			}
			x.seal()
			var err error
			if len(x.ids) > 0 {
				err = src.Hold(ctx, x.ids)
			}
			nx := next
			if i+1 < len(parts) {
				nx.reset(parts[i+1])
			} else {
				nx = nil
			}
			c.eachShard(ctx, g.shards, func(d *deepCheck, sc *partScratch) { d.comparePart(ctx, x, nx, err, sc) })
			x, next = next, x
		}
		g.cnt, g.bytes = nil, nil
	}
	if ctx.Err() != nil {
		return
	}
	c.eachShard(ctx, checks, func(d *deepCheck, sc *partScratch) { d.finishParts(sc) })
}

// eachShard calls fn for each of checks, Jobs at a time, each goroutine
// with its own scratch buffers (kept from one call to the next: at most
// Jobs of them). A shard's file reopened by fn (deepCheck.readable) is
// released when fn returns: at most Jobs are open beside those held.
func (c *checker) eachShard(ctx context.Context, checks []*deepCheck, fn func(*deepCheck, *partScratch)) {
	var mu sync.Mutex
	var used []*partScratch
	_ = pool.Workers(ctx, len(checks), c.opts.Jobs, func() func(int) error {
		mu.Lock()
		sc := &partScratch{}
		if n := len(c.scratch); n > 0 {
			sc, c.scratch = c.scratch[n-1], c.scratch[:n-1]
		}
		used = append(used, sc)
		mu.Unlock()
		return func(i int) error {
			fn(checks[i], sc)
			checks[i].part.file.release()
			return nil
		}
	})
	c.scratch = append(c.scratch, used...)
}
