package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"

	"github.com/prepml/prep/plan"
)

// Deep checks by parts (a source that is a PartSource).
//
// A source decodes whole column chunks: a row group is decoded in full to
// give any of its rows. Under a global shuffle the ids of any run of
// batches are spread over every row group, so comparing batch by batch
// (Prefetcher, a window of upcoming batches at a time) decodes every row
// group once per window: decode work = windows x source, and a small
// memory limit means many windows.
//
// With a PartSource the loops are inverted so that each row group is
// decoded once:
//
//  1. While the batches are checked for integrity, the ids of each batch
//     selected for the deep check are counted against the plan's row
//     groups (contiguous id ranges, plan.SourceFile.RowGroups): est[g] is
//     the memory the expected samples of row group g's needed ids take
//     (twice their sample bytes, as a source stages then copies them out,
//     plus partIDBytes an id).
//  2. The row groups are cut, in id order, into parts of consecutive row
//     groups whose est sum stays within the part budget (a quarter of the
//     check's share of Options.MemoryLimit). A row
//     group whose own est exceeds the budget is cut into equal id
//     sub-ranges, each its own part: that row group alone is decoded once
//     per sub-range.
//  3. For each part, the shard's sample-id sections of the selected
//     batches are read to collect the part's needed ids (sorted, unique);
//     PartSource.Hold materializes them (one decode of the part's row
//     groups); then each selected batch holding one of them is read (a
//     checked pread of its block) and each slot whose id is held is
//     compared with the expected sample, tensor by tensor. The first time
//     a batch is read, the bytes outside its samples are checked against
//     the layout its own offsets give.
//
// Cost: decode = one pass over the row groups holding needed ids (plus the
// sub-range repeats of step 2); shard reads = parts x (the selected
// batches' sample ids + the blocks holding a part's id), parts = about
// sum(est) / budget. Reading a shard is a pread from the page cache and a
// comparison, far cheaper per byte than decoding Parquet, so trading one
// shard pass per part for decode passes is the cheap side of the
// exchange. Memory: the part budget, plus one block, plus 8 bytes per
// row group, plus the findings kept (below).
//
// Findings are the same as the batch-by-batch comparison's, kinds, fields
// and order: each is keyed by (batch, phase, tensor, slot), where the
// phases of a batch are its integrity findings, then a failure to read
// its block or materialize its samples, then the fixed-shape tensors' per
// slot differences (table order, slot order), then the jagged tensors',
// then "bytes outside the present samples are not zero"; they are added to
// the shard in key order after the last part. Only the MaxPerShard
// first of each kind are kept while parts run, the rest counted into the
// shard's summary finding. One difference: a source failure reports
// source_unreadable once per batch holding an id of the failed part, and
// the slots of that batch that other parts hold are still compared.

// PartSource is implemented by a SampleSource that materializes a set of
// ids at once and hands out each one's expected bytes. verify --deep then
// compares by parts of row groups, decoding each row group once (see
// above). For a shard with jagged tensors the source must also be a
// JaggedSource.
type PartSource interface {
	// Hold materializes ids (sorted ascending, no duplicates), replacing
	// the ids held before. An error is reported as a source_unreadable
	// finding for each batch holding one of ids.
	Hold(ctx context.Context, ids []uint64) error
	// Held returns tensor t's expected bytes of ids[i] of the last Hold:
	// Geometry.SampleBytes[t] bytes, little-endian, for a fixed-shape
	// tensor; for a jagged tensor its values, a whole number of
	// SampleBytes[t]-byte values (none for an empty list). The slice
	// may alias the source's memory, valid until the next Hold or Close.
	Held(t, i int) []byte
}

// partIDBytes is the memory counted per id held beside its samples: the
// id lists of verify and of the source, and the source's staging index.
const partIDBytes = 24

// Finding phases within a batch, in report order.
const (
	phaseIntegrity = iota
	phaseBatch
	phaseFixed
	phaseJagged
	phaseOutside
)

// keyedFinding is a finding with its place in the report order.
type keyedFinding struct {
	k, phase, t, slot int
	seq               int
	f                 Finding
}

// findingSet holds the findings of a deep check by parts until they are
// added to the shard in key order, keeping at most max of each kind (the
// first in key order) and counting the rest.
type findingSet struct {
	max     int
	list    []keyedFinding
	dropped map[Kind]int
	seq     int
}

func (fs *findingSet) add(k, phase, t, slot int, f Finding) {
	fs.seq++
	fs.list = append(fs.list, keyedFinding{k: k, phase: phase, t: t, slot: slot, seq: fs.seq, f: f})
	if len(fs.list) >= 1024+8*fs.max {
		fs.compact()
	}
}

// compact sorts the findings by key and keeps the first max of each kind.
func (fs *findingSet) compact() {
	sort.Slice(fs.list, func(a, b int) bool {
		x, y := &fs.list[a], &fs.list[b]
		switch {
		case x.k != y.k:
			return x.k < y.k
		case x.phase != y.phase:
			return x.phase < y.phase
		case x.t != y.t:
			return x.t < y.t
		case x.slot != y.slot:
			return x.slot < y.slot
		}
		return x.seq < y.seq
	})
	n := map[Kind]int{}
	out := fs.list[:0]
	for _, kf := range fs.list {
		n[kf.f.Kind]++
		if n[kf.f.Kind] > fs.max {
			if fs.dropped == nil {
				fs.dropped = map[Kind]int{}
			}
			fs.dropped[kf.f.Kind]++
			continue
		}
		out = append(out, kf)
	}
	clear(fs.list[len(out):])
	fs.list = out
}

// partCheck is the part of a deepCheck that compares by parts.
type partCheck struct {
	src       PartSource
	budget    uint64   // bytes of est one part may hold
	rgStart   []uint64 // first id of each non-empty row group, ascending, then the plan's sample count
	est       []uint64 // per non-empty row group: est of its needed ids
	todo      []int    // the selected batches with valid ids, ascending
	failed    []bool   // per todo: block unreadable or source failed
	found     []bool   // per todo: a slot differs
	outside   []bool   // per todo: the bytes outside the samples checked
	badOut    []bool   // per todo: they differ from the layout
	touch     []bool   // per todo: holds an id of the current part
	next      []uint64 // the ids of the next part, as collected
	touchNext []bool   // per todo: holds an id of the next part
	fs        findingSet
	cur       int // the batch whose integrity findings are being added
	ids       []uint64
	heldIDs   []uint64
	heldIdx   []int // per slot of the batch compared: index in heldIDs, or -1
	block     []byte
	skeleton  []byte
	counts    []uint64
}

// initParts sets d up to compare by parts when its source is a
// PartSource.
func (d *deepCheck) initParts(p *plan.Plan, share int64, maxPerShard int) {
	ps, ok := d.src.(PartSource)
	if !ok {
		return
	}
	pc := &partCheck{src: ps, budget: uint64(max(1, share/4)), fs: findingSet{max: maxPerShard}}
	var id uint64
	for _, f := range p.Source.Files {
		for _, r := range f.RowGroups {
			if r > 0 {
				pc.rgStart = append(pc.rgStart, id)
				id += uint64(r)
			}
		}
	}
	pc.rgStart = append(pc.rgStart, id)
	pc.est = make([]uint64, len(pc.rgStart)-1)
	d.part = pc
}

// integrity returns the add function for batch k's integrity findings.
func (d *deepCheck) integrity(k int) func(Finding) {
	d.part.cur = k
	return d.addIntegrity
}

func (d *deepCheck) addIntegrity(f Finding) {
	d.part.fs.add(d.part.cur, phaseIntegrity, 0, 0, f)
}

// need records selected batch k, whose valid ids are ids, for the parts.
func (d *deepCheck) need(k int, ids []uint64) {
	pc := d.part
	pc.todo = append(pc.todo, k)
	pc.failed, pc.found = append(pc.failed, false), append(pc.found, false)
	pc.outside, pc.badOut, pc.touch = append(pc.outside, false), append(pc.badOut, false), append(pc.touch, false)
	if len(ids) == 0 {
		return
	}
	end := pc.rgStart[len(pc.rgStart)-1]
	for _, id := range ids {
		if id >= end {
			pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k),
				Message: fmt.Sprintf("sample id %d not in [0, %d)", id, end)})
			pc.failed[len(pc.todo)-1] = true
			return
		}
	}
	per := 2*d.batchBytes(k, len(ids))/uint64(len(ids)) + partIDBytes
	g := 0
	for _, id := range ids {
		if id < pc.rgStart[g] || id >= pc.rgStart[g+1] {
			g = sort.Search(len(pc.est), func(i int) bool { return pc.rgStart[i+1] > id })
		}
		pc.est[g] += per
	}
}

// part is one id range [lo, hi) of the parts.
type part struct{ lo, hi uint64 }

// parts cuts the row groups into parts within the budget.
func (pc *partCheck) parts() []part {
	var out []part
	var sum uint64
	open := false
	for g, e := range pc.est {
		if e == 0 {
			continue
		}
		lo, hi := pc.rgStart[g], pc.rgStart[g+1]
		if e > pc.budget {
			n := (e + pc.budget - 1) / pc.budget
			rows := hi - lo
			for j := range n {
				out = append(out, part{lo + rows*j/n, lo + rows*(j+1)/n})
			}
			open = false
			continue
		}
		if open && sum+e <= pc.budget {
			out[len(out)-1].hi = hi
			sum += e
			continue
		}
		out = append(out, part{lo, hi})
		sum, open = e, true
	}
	return out
}

// runParts compares every selected batch by parts, then adds the
// findings to the shard in key order.
func (d *deepCheck) runParts(ctx context.Context) {
	pc := d.part
	ps := pc.parts()
	pc.touchNext = make([]bool, len(pc.todo))
	for j, k := range pc.todo {
		if len(ps) > 0 && !pc.failed[j] && d.readIDs(j, k) {
			pc.collect(j, ps[0])
		}
	}
	for x, p := range ps {
		if ctx.Err() != nil {
			return
		}
		var nxt *part
		if x+1 < len(ps) {
			nxt = &ps[x+1]
		}
		d.runPart(ctx, p, nxt)
	}
	for j, k := range pc.todo {
		if pc.failed[j] {
			continue
		}
		if !pc.outside[j] {
			// No id in any part (an empty batch): its block is checked
			// here.
			if got, ok := d.readBlock(j, k); ok {
				d.checkOutside(j, k, got, len(pc.ids))
			}
			if pc.failed[j] {
				continue
			}
		}
		d.s.res.deep++
		if pc.badOut[j] && !pc.found[j] {
			pc.fs.add(k, phaseOutside, 0, 0, Finding{Kind: KindValueMismatch, Batch: intp(k), Message: "bytes outside the present samples are not zero"})
		}
	}
	pc.fs.compact()
	for _, kf := range pc.fs.list {
		d.s.add(kf.f)
	}
	for kind, c := range pc.fs.dropped {
		d.s.counts[kind] += c
	}
	pc.fs.list = nil
}

// readIDs reads todo batch j's (batch k's) sample ids into pc.ids,
// reporting a failure (the shard changed since its integrity check).
func (d *deepCheck) readIDs(j, k int) bool {
	pc := d.part
	ids, err := d.r.AppendSampleIDs(pc.ids[:0], k)
	if err != nil {
		pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading sample ids: " + errDetail(err)})
		pc.failed[j] = true
		return false
	}
	pc.ids = ids
	return true
}

// readBlock reads todo batch j's (batch k's) block and ids, or reports
// why it cannot.
func (d *deepCheck) readBlock(j, k int) ([]byte, bool) {
	pc := d.part
	if !d.readIDs(j, k) {
		return nil, false
	}
	bi, err := d.r.Batch(k)
	if err == nil {
		if uint64(cap(pc.block)) < bi.Size {
			pc.block = make([]byte, bi.Size)
		}
		err = d.r.ReadBlock(k, pc.block[:bi.Size])
	}
	if err != nil {
		pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading block: " + err.Error()})
		pc.failed[j] = true
		return nil, false
	}
	return pc.block[:bi.Size], true
}

// collect adds the ids of pc.ids (todo batch j's) that lie in p to
// pc.next, marking the batch in pc.touchNext.
func (pc *partCheck) collect(j int, p part) {
	for _, id := range pc.ids {
		if id >= p.lo && id < p.hi {
			pc.next = append(pc.next, id)
			pc.touchNext[j] = true
		}
	}
}

// runPart materializes the needed ids in p (collected in pc.next and
// pc.touchNext by the stream before) and compares every slot that holds
// one; the same stream over the batches collects the ids of the part
// after, nxt, unless nil.
func (d *deepCheck) runPart(ctx context.Context, p part, nxt *part) {
	pc := d.part
	slices.Sort(pc.next)
	held := slices.Compact(pc.next)
	pc.heldIDs, pc.next = held, pc.heldIDs[:0]
	pc.touch, pc.touchNext = pc.touchNext, pc.touch
	clear(pc.touchNext)
	if len(held) > 0 {
		if err := pc.src.Hold(ctx, held); err != nil {
			for j, k := range pc.todo {
				if pc.touch[j] && !pc.failed[j] {
					pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: err.Error()})
					pc.failed[j] = true
				}
			}
			held = nil
		}
	}
	for j, k := range pc.todo {
		if pc.failed[j] || ctx.Err() != nil {
			continue
		}
		if !pc.touch[j] || len(held) == 0 {
			if nxt != nil && d.readIDs(j, k) {
				pc.collect(j, *nxt)
			}
			continue
		}
		got, ok := d.readBlock(j, k)
		if !ok {
			continue
		}
		ids := pc.ids
		if nxt != nil {
			pc.collect(j, *nxt)
		}
		pc.heldIdx = pc.heldIdx[:0]
		for _, id := range ids {
			x := -1
			if id >= p.lo && id < p.hi {
				if i, ok := slices.BinarySearch(held, id); ok {
					x = i
				}
			}
			pc.heldIdx = append(pc.heldIdx, x)
		}
		if !d.heldValid(j, k, ids) {
			continue
		}
		if !pc.outside[j] {
			d.checkOutside(j, k, got, len(ids))
		}
		d.compareFixedSlots(j, k, got, ids)
		d.compareJaggedSlots(j, k, got, ids)
	}
}

// heldValid reports whether the held bytes of batch k's slots have the
// sizes the geometry gives (a fixed-shape sample's bytes, a whole number
// of jagged values), reporting the first that has not.
func (d *deepCheck) heldValid(j, k int, ids []uint64) bool {
	pc := d.part
	for t := range d.tensors {
		vb := d.g.SampleBytes[t]
		for i, x := range pc.heldIdx {
			if x < 0 {
				continue
			}
			v := pc.src.Held(t, x)
			if !d.g.IsJagged(t) && uint64(len(v)) != vb {
				pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, SampleID: u64p(ids[i]),
					Message: fmt.Sprintf("slot %d: source gave %d bytes for a %d-byte sample", i, len(v), vb)})
				pc.failed[j] = true
				return false
			}
			if uint64(len(v))%vb != 0 {
				pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, SampleID: u64p(ids[i]),
					Message: fmt.Sprintf("slot %d: source gave %d bytes, not a whole number of %d-byte values", i, len(v), vb)})
				pc.failed[j] = true
				return false
			}
		}
	}
	return true
}

// compareFixedSlots reports, per fixed-shape tensor and held slot of batch
// k, the first element of got that differs from the source (diffFixed).
func (d *deepCheck) compareFixedSlots(j, k int, got []byte, ids []uint64) {
	pc := d.part
	for t, ti := range d.tensors {
		if d.g.IsJagged(t) {
			continue
		}
		sb := int(d.g.SampleBytes[t])
		off := int(d.g.SlabOffset[t])
		es := ti.DType.Size()
		for i, x := range pc.heldIdx {
			if x < 0 {
				continue
			}
			a := got[off+i*sb : off+(i+1)*sb]
			w := pc.src.Held(t, x)
			if bytes.Equal(a, w) {
				continue
			}
			pc.found[j] = true
			b := 0
			for a[b] == w[b] {
				b++
			}
			el := b / es
			pc.fs.add(k, phaseFixed, t, i, Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: ti.Name, SampleID: u64p(ids[i]), Element: intp(el),
				What: "value", Expected: FormatValue(ti.DType, w[el*es:(el+1)*es]), Actual: FormatValue(ti.DType, a[el*es:(el+1)*es]),
				Message: fmt.Sprintf("slot %d differs from the source", i)})
		}
	}
}

// compareJaggedSlots reports, per jagged tensor and held slot of batch k,
// a values count or the first element that differs (diffJagged).
func (d *deepCheck) compareJaggedSlots(j, k int, got []byte, ids []uint64) {
	pc := d.part
	for t, ti := range d.tensors {
		if !d.g.IsJagged(t) {
			continue
		}
		s, err := d.r.Jagged(k, got, t)
		if err != nil {
			// Bad offsets fail VerifyBlock too: reported by the
			// integrity check.
			pc.found[j] = true
			continue
		}
		vb := int(d.g.SampleBytes[t])
		es := ti.DType.Size()
		for i, x := range pc.heldIdx {
			if x < 0 {
				continue
			}
			a0, a1 := s.Offset(i), s.Offset(i+1)
			w := pc.src.Held(t, x)
			if a1-a0 != len(w)/vb {
				pc.found[j] = true
				pc.fs.add(k, phaseJagged, t, i, Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: ti.Name, SampleID: u64p(ids[i]),
					What: "values count", Expected: fmt.Sprint(len(w) / vb), Actual: fmt.Sprint(a1 - a0),
					Message: fmt.Sprintf("slot %d holds another number of values than the source (offsets[%d:%d] = %d, %d)", i, i, i+2, a0, a1)})
				continue
			}
			a := s.Values[a0*vb : a1*vb]
			if bytes.Equal(a, w) {
				continue
			}
			pc.found[j] = true
			b := 0
			for a[b] == w[b] {
				b++
			}
			el := b / es
			pc.fs.add(k, phaseJagged, t, i, Finding{Kind: KindValueMismatch, Batch: intp(k), Tensor: ti.Name, SampleID: u64p(ids[i]), Element: intp(el),
				What: "value", Expected: FormatValue(ti.DType, w[el*es:(el+1)*es]), Actual: FormatValue(ti.DType, a[el*es:(el+1)*es]),
				Message: fmt.Sprintf("slot %d differs from the source", i)})
		}
	}
}

// checkOutside checks that the bytes of batch k's block got outside its n
// present samples are those the batch-by-batch comparison expects: zero,
// and for each jagged tensor the offsets its own per-slot values counts
// give (from 0, the unused slots' equal to the values count) with the
// values where Geometry.BatchLayout places them. When every slot matches
// the source this is exactly the comparison of the whole block.
func (d *deepCheck) checkOutside(j, k int, got []byte, n int) {
	pc := d.part
	pc.outside[j] = true
	size := uint64(len(got))
	var jag []int
	pc.counts = pc.counts[:0]
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			s, err := d.r.Jagged(k, got, t)
			if err != nil {
				pc.found[j] = true // as diffJagged: the integrity check reported it
				return
			}
			jag = append(jag, t)
			pc.counts = append(pc.counts, uint64(s.Offset(n)-s.Offset(0)))
		}
	}
	if len(jag) > 0 {
		lay, err := d.g.BatchLayout(pc.counts)
		if err != nil || lay.Size != size {
			pc.badOut[j] = true
			return
		}
	} else if size != uint64(d.g.BlockSize) {
		pc.badOut[j] = true
		return
	}
	if uint64(cap(pc.skeleton)) < size {
		pc.skeleton = make([]byte, size)
	}
	w := pc.skeleton[:size]
	clear(w)
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			continue
		}
		off, sb := d.g.SlabOffset[t], d.g.SampleBytes[t]
		copy(w[off:off+uint64(n)*sb], got[off:off+uint64(n)*sb])
	}
	if len(jag) > 0 {
		lay, _ := d.g.BatchLayout(pc.counts)
		for _, t := range jag {
			s, _ := d.r.Jagged(k, got, t)
			vb := d.g.SampleBytes[t]
			off, pos := d.g.SlabOffset[t], lay.ValuesOffset[t]
			var c uint64
			for i := 0; i <= d.g.BatchSize; i++ {
				binary.LittleEndian.PutUint64(w[off+8*uint64(i):], c)
				if i < n {
					a0, a1 := uint64(s.Offset(i)), uint64(s.Offset(i+1))
					copy(w[pos+c*vb:], s.Values[a0*vb:a1*vb])
					c += a1 - a0
				}
			}
		}
	}
	pc.badOut[j] = !bytes.Equal(got, w)
}
