package verify

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sort"
)

// Deep checks by parts (a source that is a PartSource).
//
// A source decodes whole column chunks: a row group is decoded in full to
// give any of its rows. Under a global shuffle the ids of any run of
// batches are spread over every row group, so comparing batch by batch
// (Prefetcher, a window of upcoming batches at a time) decodes every row
// group once per window: decode work = windows x source, and a small
// memory limit means many windows. Comparing each shard on its own by
// parts still decodes every row group once per shard, and a set of
// epochs x ranks shards holds every id once per epoch.
//
// With a PartSource the loops are inverted over the whole set, so that
// each row group is decoded about once per set (deepset.go drives it):
//
//  1. Each shard's batches are checked for integrity (Jobs shards at a
//     time, as without --deep); the ids of each batch selected for the
//     deep check are counted against the plan's row groups (contiguous
//     id ranges, plan.SourceFile.RowGroups; rowGroups finds an id's in a
//     table lookup): per row group the ids needed and their estimated
//     held bytes (the batch's sample bytes an id, plus partIDBytes).
//     When a shard is done its counts are merged into its group's and
//     dropped: a group is the shards with the same tensor table, whose
//     expected samples are the same bytes (PartSource.Held).
//  2. A group's union of needed ids in a row group is at most min(rows,
//     sum of the shards' counts) (exact when the shards cover whole
//     epochs); its est is that many ids at the mean bytes counted. The
//     row groups are cut, in id order, into parts of consecutive row
//     groups whose est plus the part's index (partRowBytes per 64 rows
//     of its id range) stays within the part budget (half of
//     Options.MemoryLimit). A row group over the budget alone is cut
//     into equal id sub-ranges, each its own part: that row group alone
//     is decoded once per sub-range.
//  3. For each part: every shard of the group reads its selected
//     batches' sample-id sections (a run of consecutive batches' per
//     pread) and marks the ids in the part's range in the part's bitmap
//     (shards in parallel, atomic OR), noting the batches that hold one;
//     the bitmap's members, ascending, are the part's ids, held with one
//     PartSource.Hold on the group's first shard's source (one decode of
//     the part's row groups for the whole group). Then every shard (Jobs
//     at a time) reads each noted batch's block (a checked pread) and
//     compares each slot whose id is in the part with the held sample,
//     tensor by tensor; a slot's index among the held ids is its bitmap
//     rank (a popcount past a per-word count: no search). The first time
//     a batch is read, the bytes outside its samples are checked against
//     the layout its own offsets give. The same stream over the ids marks
//     the next part's bitmap, so the ids are read once per part (twice
//     for the first).
//
// Cost: decode = one pass over the row groups holding needed ids per
// group (plus the sub-range repeats of step 2); shard reads = parts x
// (the selected batches' sample ids + the blocks holding a part's id),
// parts = about the set's distinct needed ids' bytes / budget.
// Reading a shard is a pread from the page cache and a comparison, far
// cheaper per byte than decoding Parquet.
//
// Memory, within Options.MemoryLimit: a quarter to decode in (the
// MemoryLimiter limit of the holding source); half for one part: its
// held samples and ids and its bitmap and rank index (both sides'); the
// last quarter for the rest: per checking goroutine (Jobs) one block, one
// skeleton block, idChunkBytes of id slots and a batch of slot indexes;
// the row-group table (8 bytes a row group, 4 a bucket, 4 buckets a row
// group); while step 1 runs, the per-row-group counts of the shards in
// flight (16 bytes a row group each), and those of each group until its
// parts are cut; per shard 9 bytes per selected batch and at most about
// 1024+8 x MaxPerShard findings. Files: at most maxOpenShards shard files
// open at once (shardfile.go), the shards beyond them reopened for each
// pass that reads them.
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
// compares by parts of row groups, decoding each row group about once per
// shard set (see above). Held's bytes must depend on the tensor table
// only, not on the shard's geometry or (epoch, rank): verify holds the
// ids of every shard with the same tensors through one of their sources
// and leaves the others unused. For a shard with jagged tensors the
// source must also be a JaggedSource.
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
	// Held is called from several goroutines at once between Holds.
	Held(t, i int) []byte
}

// partIDBytes is the memory counted per id held beside its samples: the
// part's id list in verify and the source's bookkeeping, 8 bytes each.
// A jagged tensor adds 8 more (its reference in the source's staging
// record is 16 bytes, its offset in the estimate 8).
const partIDBytes = 16

// partRowBytes is the memory counted per 64 ids of a part's id range:
// verify's bitmap word (8) and rank (4), twice (the next part's is
// filled while this one is compared), and the source's id set over the
// range (convert: 2 bits an id, 16).
const partRowBytes = 40

// Finding phases within a batch, in report order.
const (
	phaseIntegrity = iota
	phaseBatch
	phaseDerived // derived tensors checked on their own (derived.go)
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
	src   PartSource // this shard's source; after grouping, the group's source that holds
	rg    *rowGroups
	idx   int      // the shard's manifest index
	cnt   []uint64 // per row group: ids needed (repeats counted), until merged into the group
	bytes []uint64 // per row group: est bytes of them, likewise
	extra uint64   // bytes counted per id beside the batch's sample bytes
	todo  []int    // the selected batches with valid ids, ascending
	state []uint8  // per todo: batchFailed, batchFound, ... bits
	fs    findingSet
	cur   int        // the batch whose integrity findings are being added
	file  *shardFile // the shard's file: held open, or acquired by readable
}

// Per todo batch state bits of a partCheck.
const (
	batchFailed  = 1 << iota // block unreadable or source failed
	batchFound               // a slot differs
	batchOutside             // the bytes outside the samples checked
	batchBadOut              // they differ from the layout
	batchTouch               // holds an id of the current part
)

func (pc *partCheck) is(j int, bit uint8) bool { return pc.state[j]&bit != 0 }
func (pc *partCheck) set(j int, bit uint8)     { pc.state[j] |= bit }

// partScratch is the buffers of one goroutine comparing by parts.
type partScratch struct {
	chunk    []uint64   // the id slots of todo batches [chunkJ, chunkJ+chunkN) of chunkOf
	chunkOf  *deepCheck // nil: none read
	chunkJ   int
	chunkN   int
	ids      []uint64
	heldIdx  []int // per slot of the batch compared: index among the held ids, or -1
	block    []byte
	skeleton []byte
	counts   []uint64
}

// initParts sets d up to compare by parts when its source is a
// PartSource, over the plan's row groups rg.
func (d *deepCheck) initParts(rg *rowGroups, maxPerShard, idx int) {
	ps, ok := d.src.(PartSource)
	if !ok || rg == nil {
		return
	}
	n := len(rg.start) - 1
	pc := &partCheck{src: ps, rg: rg, idx: idx, cnt: make([]uint64, n), bytes: make([]uint64, n),
		extra: partIDBytes, fs: findingSet{max: maxPerShard}}
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			pc.extra += 8
		}
	}
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
	pc.state = append(pc.state, 0)
	if len(ids) == 0 {
		return
	}
	rg := pc.rg
	end := rg.start[len(rg.start)-1]
	for _, id := range ids {
		if id >= end {
			pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k),
				Message: fmt.Sprintf("sample id %d not in [0, %d)", id, end)})
			pc.set(len(pc.todo)-1, batchFailed)
			return
		}
	}
	per := d.batchBytes(k, len(ids))/uint64(len(ids)) + pc.extra
	g := 0
	for _, id := range ids {
		if id < rg.start[g] || id >= rg.start[g+1] {
			g = rg.of(id)
		}
		pc.cnt[g]++
		pc.bytes[g] += per
	}
}

// idChunkBytes bounds the id slots one goroutine reads at once: a run of
// consecutive selected batches' ids is read with one pread.
const idChunkBytes = 32 << 10

// batchIDs returns todo batch j's (batch k's) sample ids, from the run of
// consecutive selected batches read last when j is in it, else reading
// the run from j on (ReadSampleIDSlots: one pread, each batch's CRC-32C
// checked). A failure (the shard changed since its integrity check) is
// reported for batch k alone, read on its own.
func (d *deepCheck) batchIDs(j, k int, sc *partScratch) ([]uint64, bool) {
	pc := d.part
	b := d.g.BatchSize
	if sc.chunkOf != d || j < sc.chunkJ || j >= sc.chunkJ+sc.chunkN {
		if !d.readable(j, k) {
			return nil, false
		}
		n := 1
		for most := max(1, idChunkBytes/(8*max(1, b))); n < most && j+n < len(pc.todo) && pc.todo[j+n] == k+n; n++ {
		}
		chunk, err := d.r.ReadSampleIDSlots(k, n, sc.chunk)
		if err != nil {
			sc.chunkOf = nil
			ids, err := d.r.AppendSampleIDs(sc.ids[:0], k)
			if err != nil {
				pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading sample ids: " + errDetail(err)})
				pc.set(j, batchFailed)
				return nil, false
			}
			sc.ids = ids
			return ids, true
		}
		sc.chunk, sc.chunkOf, sc.chunkJ, sc.chunkN = chunk, d, j, n
	}
	bi, err := d.r.Batch(k)
	if err == nil && bi.Count > b {
		err = fmt.Errorf("%d samples in a batch of %d slots", bi.Count, b)
	}
	if err != nil {
		pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading batch table: " + errDetail(err)})
		pc.set(j, batchFailed)
		return nil, false
	}
	at := (j - sc.chunkJ) * b
	return sc.chunk[at : at+bi.Count], true
}

// readable reports whether the shard's file is open for todo batch j's
// (batch k's) reads, reopening it when released (shardFile.acquire).
// When it cannot be, the reason is reported once, at batch k, and every
// batch not compared yet is marked failed: none is read or counted as
// compared from then on.
func (d *deepCheck) readable(j, k int) bool {
	pc := d.part
	f, ok := pc.file.acquire()
	if ok {
		return true
	}
	if f.Kind != "" {
		pc.fs.add(k, phaseBatch, 0, 0, f)
		for i := range pc.state {
			pc.set(i, batchFailed)
		}
	}
	pc.set(j, batchFailed)
	return false
}

// readBlock reads todo batch j's (batch k's) block, or reports why it
// cannot.
func (d *deepCheck) readBlock(j, k int, sc *partScratch) ([]byte, bool) {
	pc := d.part
	if !d.readable(j, k) {
		return nil, false
	}
	bi, err := d.r.Batch(k)
	if err == nil {
		if uint64(cap(sc.block)) < bi.Size {
			sc.block = make([]byte, bi.Size)
		}
		err = d.r.ReadBlock(k, sc.block[:bi.Size])
	}
	if err != nil {
		pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading block: " + err.Error()})
		pc.set(j, batchFailed)
		return nil, false
	}
	return sc.block[:bi.Size], true
}

// collectPart marks in x the ids of d's selected batches that lie in x's
// range, noting the batches that hold one (batchTouch).
func (d *deepCheck) collectPart(x *partIndex, sc *partScratch) {
	pc := d.part
	sc.chunkOf = nil
	for j, k := range pc.todo {
		pc.state[j] &^= batchTouch
		if pc.is(j, batchFailed) {
			continue
		}
		ids, ok := d.batchIDs(j, k, sc)
		if !ok {
			continue
		}
		for _, id := range ids {
			if x.in(id) {
				x.mark(id)
				pc.state[j] |= batchTouch
			}
		}
	}
}

// comparePart compares every slot of d's batches whose id x holds with
// the held sample, or, when the part's Hold failed with holdErr, reports
// it once per batch holding one of its ids. Unless next is nil, the same
// stream over the batches marks the ids of the part after in next
// (collectPart's work for it).
func (d *deepCheck) comparePart(ctx context.Context, x, next *partIndex, holdErr error, sc *partScratch) {
	pc := d.part
	sc.chunkOf = nil
	for j, k := range pc.todo {
		touch := pc.is(j, batchTouch)
		if pc.is(j, batchFailed) || (!touch && next == nil) || ctx.Err() != nil {
			continue
		}
		if touch && holdErr != nil {
			pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Message: holdErr.Error()})
			pc.set(j, batchFailed)
			continue
		}
		ids, ok := d.batchIDs(j, k, sc)
		if !ok {
			continue
		}
		pc.state[j] &^= batchTouch
		if next != nil {
			for _, id := range ids {
				if next.in(id) {
					next.mark(id)
					pc.state[j] |= batchTouch
				}
			}
		}
		if !touch {
			continue
		}
		got, ok := d.readBlock(j, k, sc)
		if !ok {
			continue
		}
		sc.heldIdx = sc.heldIdx[:0]
		for _, id := range ids {
			sc.heldIdx = append(sc.heldIdx, x.index(id))
		}
		if !d.heldValid(j, k, ids, sc) {
			continue
		}
		if !pc.is(j, batchOutside) {
			if d.derived != nil {
				d.derived.check(k, got, ids, func(t, slot int, f Finding) { pc.fs.add(k, phaseDerived, t, slot, f) })
			}
			d.checkOutside(j, k, got, len(ids), sc)
		}
		d.compareFixedSlots(j, k, got, ids, sc)
		d.compareJaggedSlots(j, k, got, ids, sc)
	}
}

// finishParts checks the batches no part touched (empty batches), counts
// the batches compared and adds the findings to the shard in key order.
func (d *deepCheck) finishParts(sc *partScratch) {
	pc := d.part
	sc.chunkOf = nil
	for j, k := range pc.todo {
		if pc.is(j, batchFailed) {
			continue
		}
		if !pc.is(j, batchOutside) {
			// No id in any part (an empty batch): its block is checked
			// here.
			if ids, ok := d.batchIDs(j, k, sc); ok {
				if got, ok := d.readBlock(j, k, sc); ok {
					d.checkOutside(j, k, got, len(ids), sc)
				}
			}
			if pc.is(j, batchFailed) {
				continue
			}
		}
		d.s.res.deep++
		if pc.is(j, batchBadOut) && !pc.is(j, batchFound) {
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

// heldValid reports whether the held bytes of batch k's slots have the
// sizes the geometry gives (a fixed-shape sample's bytes, a whole number
// of jagged values), reporting the first that has not.
func (d *deepCheck) heldValid(j, k int, ids []uint64, sc *partScratch) bool {
	pc := d.part
	for t := range d.tensors {
		vb := d.g.SampleBytes[t]
		for i, x := range sc.heldIdx {
			if x < 0 {
				continue
			}
			v := pc.src.Held(t, x)
			if !d.g.IsJagged(t) && uint64(len(v)) != vb {
				pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, SampleID: u64p(ids[i]),
					Message: fmt.Sprintf("slot %d: source gave %d bytes for a %d-byte sample", i, len(v), vb)})
				pc.set(j, batchFailed)
				return false
			}
			if uint64(len(v))%vb != 0 {
				pc.fs.add(k, phaseBatch, 0, 0, Finding{Kind: KindSourceUnreadable, Batch: intp(k), Tensor: d.tensors[t].Name, SampleID: u64p(ids[i]),
					Message: fmt.Sprintf("slot %d: source gave %d bytes, not a whole number of %d-byte values", i, len(v), vb)})
				pc.set(j, batchFailed)
				return false
			}
		}
	}
	return true
}

// compareFixedSlots reports, per fixed-shape tensor and held slot of batch
// k, the first element of got that differs from the source (diffFixed).
func (d *deepCheck) compareFixedSlots(j, k int, got []byte, ids []uint64, sc *partScratch) {
	pc := d.part
	for t, ti := range d.tensors {
		if d.g.IsJagged(t) {
			continue
		}
		sb := int(d.g.SampleBytes[t])
		off := int(d.g.SlabOffset[t])
		for i, x := range sc.heldIdx {
			if x < 0 {
				continue
			}
			a := got[off+i*sb : off+(i+1)*sb]
			if f := valueDiff(k, ti, i, ids[i], a, pc.src.Held(t, x)); f != nil {
				pc.set(j, batchFound)
				pc.fs.add(k, phaseFixed, t, i, *f)
			}
		}
	}
}

// compareJaggedSlots reports, per jagged tensor and held slot of batch k,
// a values count or the first element that differs (diffJagged).
func (d *deepCheck) compareJaggedSlots(j, k int, got []byte, ids []uint64, sc *partScratch) {
	pc := d.part
	for t, ti := range d.tensors {
		if !d.g.IsJagged(t) {
			continue
		}
		s, err := d.r.Jagged(k, got, t)
		if err != nil {
			// Bad offsets fail VerifyBlock too: reported by the
			// integrity check.
			pc.set(j, batchFound)
			continue
		}
		vb := int(d.g.SampleBytes[t])
		for i, x := range sc.heldIdx {
			if x < 0 {
				continue
			}
			if f := jaggedDiff(k, ti, s, i, ids[i], pc.src.Held(t, x), vb); f != nil {
				pc.set(j, batchFound)
				pc.fs.add(k, phaseJagged, t, i, *f)
			}
		}
	}
}

// checkOutside checks that the bytes of batch k's block got outside its n
// present samples are those the batch-by-batch comparison expects: zero,
// and for each jagged tensor the offsets its own per-slot values counts
// give (from 0, the unused slots' equal to the values count) with the
// values where Geometry.BatchLayout places them. When every slot matches
// the source this is exactly the comparison of the whole block.
func (d *deepCheck) checkOutside(j, k int, got []byte, n int, sc *partScratch) {
	pc := d.part
	pc.set(j, batchOutside)
	size := uint64(len(got))
	var jag []int
	sc.counts = sc.counts[:0]
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			s, err := d.r.Jagged(k, got, t)
			if err != nil {
				pc.set(j, batchFound) // as diffJagged: the integrity check reported it
				return
			}
			jag = append(jag, t)
			sc.counts = append(sc.counts, uint64(s.Offset(n)-s.Offset(0)))
		}
	}
	if len(jag) > 0 {
		lay, err := d.g.BatchLayout(sc.counts)
		if err != nil || lay.Size != size {
			pc.set(j, batchBadOut)
			return
		}
	} else if size != uint64(d.g.BlockSize) {
		pc.set(j, batchBadOut)
		return
	}
	if uint64(cap(sc.skeleton)) < size {
		sc.skeleton = make([]byte, size)
	}
	w := sc.skeleton[:size]
	clear(w)
	for t := range d.tensors {
		if d.g.IsJagged(t) {
			continue
		}
		off, sb := d.g.SlabOffset[t], d.g.SampleBytes[t]
		copy(w[off:off+uint64(n)*sb], got[off:off+uint64(n)*sb])
	}
	if len(jag) > 0 {
		lay, _ := d.g.BatchLayout(sc.counts)
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
	if !bytes.Equal(got, w) {
		pc.set(j, batchBadOut)
	}
}
