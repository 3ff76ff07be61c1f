package verify

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime/debug"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// shardResult is what one shard's check produced.
type shardResult struct {
	findings []Finding
	batches  int
	bytes    int64
	deep     int
}

// checkShards checks every listed shard, opts.Jobs at a time, and appends the
// findings in manifest order (sorted later).
func (c *checker) checkShards(ctx context.Context) {
	shards := c.man.Shards
	results := make([]shardResult, len(shards))
	if c.opts.Deep && c.plan != nil {
		c.rowGroups = newRowGroups(c.plan)
	}
	// Shards compared by parts (deeppart.go) come back with their
	// integrity checked, to be compared together: the first to come
	// back held open, up to maxOpenShards files open in all, the others
	// released, reopened for each pass that reads them (shardfile.go).
	byParts := make([]*deepCheck, len(shards))
	c.keepOpen = maxOpenShards(c.opts.Jobs) - c.opts.Jobs
	// Cancellation stops the pool; a shard's problems are findings, not
	// errors.
	_ = pool.ForEach(ctx, len(shards), c.opts.Jobs, func(i int) error {
		results[i], byParts[i] = c.checkShard(ctx, i, shards[i])
		return nil
	})
	var pending []*deepCheck
	for _, d := range byParts {
		if d != nil {
			pending = append(pending, d)
		}
	}
	if len(pending) > 0 {
		c.runDeepParts(ctx, pending)
		for i, d := range byParts {
			if d != nil {
				results[i] = d.s.finish()
				d.close()
				_ = d.r.Close()
				d.part.file.close()
			}
		}
	}
	for _, r := range results {
		c.rep.Findings = append(c.rep.Findings, r.findings...)
		c.rep.Batches += r.batches
		c.rep.Bytes += r.bytes
		c.rep.DeepBatches += r.deep
	}
}

// shardCheck accumulates one shard's findings with the per-kind cap.
type shardCheck struct {
	c      *checker
	entry  shardfmt.ShardEntry
	res    shardResult
	counts map[Kind]int
}

func (s *shardCheck) add(f Finding) {
	f.Shard = s.entry.Path
	if f.Epoch == nil {
		f.Epoch, f.Rank = intp(s.entry.Epoch), intp(s.entry.Rank)
	}
	s.counts[f.Kind]++
	if s.counts[f.Kind] <= s.c.opts.MaxPerShard {
		s.res.findings = append(s.res.findings, f)
	}
}

// finish appends one summary finding per kind that went over the cap.
func (s *shardCheck) finish() shardResult {
	for _, k := range kindsInOrder(s.res.findings) {
		if n := s.counts[k] - s.c.opts.MaxPerShard; n > 0 {
			s.res.findings = append(s.res.findings, Finding{Kind: k, Shard: s.entry.Path,
				Epoch: intp(s.entry.Epoch), Rank: intp(s.entry.Rank),
				Message: fmt.Sprintf("%d more %s findings in this shard not listed", n, k)})
		}
	}
	return s.res
}

func kindsInOrder(fs []Finding) []Kind {
	var ks []Kind
	seen := map[Kind]bool{}
	for _, f := range fs {
		if !seen[f.Kind] {
			seen[f.Kind] = true
			ks = append(ks, f.Kind)
		}
	}
	return ks
}

// openShard opens the shard of a manifest entry through the set (no
// symbolic link followed, not regular refused) for reading with pread,
// not mapped: a shard cut short while verify reads it gives errors
// wrapping shardfmt.ErrSize, never SIGBUS.
func (c *checker) openShard(e shardfmt.ShardEntry) (*shardfmt.Reader, error) {
	f, err := c.set.OpenFile(e.Path)
	if err != nil {
		return nil, err
	}
	return shardfmt.OpenFile(f, c.set.Path(e.Path), false)
}

// checkShard runs every per-shard check on manifest entry idx, e. The
// size is compared with the manifest before the file is opened: a
// truncated shard is reported, never touched. An entry whose path leaves
// the set (reported by checkManifest) is never opened. A shard whose
// deep check runs by parts is returned with its integrity checked and
// its needs counted, its file held open or released (shardfile.go); its
// result comes after runDeepParts.
func (c *checker) checkShard(ctx context.Context, idx int, e shardfmt.ShardEntry) (shardResult, *deepCheck) {
	s := &shardCheck{c: c, entry: e, counts: map[Kind]int{}}
	if !safePath(e.Path) {
		return s.finish(), nil
	}
	st, err := c.set.CheckName(e.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.add(Finding{Kind: KindShardMissing, Message: "shard listed in the manifest does not exist"})
		return s.finish(), nil
	case errors.Is(err, shardset.ErrUnsafe):
		s.add(Finding{Kind: KindHeaderInvalid, Message: "shard is reached through a symbolic link, which is never followed (" + err.Error() + ")"})
		return s.finish(), nil
	case err != nil:
		s.add(Finding{Kind: KindIOError, Message: err.Error()})
		return s.finish(), nil
	case !st.Mode().IsRegular():
		s.add(Finding{Kind: KindHeaderInvalid, Message: "shard is not a regular file"})
		return s.finish(), nil
	case st.Size() != e.Size:
		msg := "shard size differs from the manifest"
		if st.Size() < e.Size {
			msg = fmt.Sprintf("shard is truncated (%d bytes missing)", e.Size-st.Size())
		}
		s.add(Finding{Kind: KindSizeMismatch, What: "size", Expected: fmt.Sprint(e.Size), Actual: fmt.Sprint(st.Size()), Message: msg})
		return s.finish(), nil
	}

	open := c.openShardFile
	if c.opts.ReadMode == ReadMmap && !c.opts.Deep {
		open = c.openMappedShard
	}
	r, file, err := open(e)
	if err != nil {
		s.add(Finding{Kind: KindHeaderInvalid, Message: errDetail(err)})
		return s.finish(), nil
	}
	keep := false // r, its file and deep stay for runDeepParts
	defer func() {
		if !keep {
			_ = r.Close()
			file.close()
		}
	}()
	path := c.set.Path(e.Path)

	// The digest through the Reader already open: a second Open would map
	// the file again and fault in the tables and ids a second time.
	if d, err := r.Digest(); errors.Is(err, shardfmt.ErrSize) {
		s.add(Finding{Kind: KindSizeMismatch, Message: "shard changed while being read: computing digest: " + errDetail(err)})
	} else if err != nil {
		s.add(Finding{Kind: KindHeaderInvalid, Message: "computing digest: " + errDetail(err)})
	} else if d != e.Digest {
		s.add(Finding{Kind: KindDigestMismatch, What: "digest", Expected: e.Digest, Actual: d,
			Message: "shard digest differs from the manifest"})
	}

	// Identity: the shard's own record against its manifest entry.
	prov := r.Provenance()
	pe, pr := int(prov.Epoch), int(prov.Rank)
	if pe != e.Epoch || pr != e.Rank {
		s.add(Finding{Kind: KindShardIdentity, What: "(epoch, rank)",
			Expected: fmt.Sprintf("(%d, %d)", e.Epoch, e.Rank), Actual: fmt.Sprintf("(%d, %d)", pe, pr),
			Message: "shard holds another (epoch, rank) than its manifest entry (renamed or swapped file)"})
	}
	m := c.man
	if prov.PlanFingerprint != m.PlanFingerprint {
		s.add(Finding{Kind: KindShardIdentity, What: "plan fingerprint", Expected: m.PlanFingerprint, Actual: prov.PlanFingerprint,
			Message: "shard was made from another plan than the manifest's"})
	}
	if prov.SpecHash != m.SpecHash {
		s.add(Finding{Kind: KindShardIdentity, What: "spec hash", Expected: m.SpecHash, Actual: prov.SpecHash,
			Message: "shard was made with another feature spec than the manifest's"})
	}
	n := r.NumBatches()
	if n != e.Batches {
		s.add(Finding{Kind: KindShardIdentity, What: "batches", Expected: fmt.Sprint(e.Batches), Actual: fmt.Sprint(n),
			Message: "shard holds another number of batches than the manifest says"})
	}
	tensors := r.Tensors()
	if len(m.Tensors) > 0 && !shardfmt.SameTensors(tensors, m.Tensors) {
		s.add(Finding{Kind: KindShardIdentity, What: "tensors", Expected: shardfmt.TensorList(m.Tensors), Actual: shardfmt.TensorList(tensors),
			Message: "shard's tensor table differs from the manifest"})
	}
	if b := r.Geometry().BatchSize; m.BatchSize != 0 && b != m.BatchSize {
		s.add(Finding{Kind: KindShardIdentity, What: "batch size", Expected: fmt.Sprint(m.BatchSize), Actual: fmt.Sprint(b),
			Message: "shard's per-rank batch size differs from the manifest"})
	}

	// Plan conformance is checked against the shard's own (epoch, rank):
	// a swapped file is reported once above, not once per batch.
	p := c.plan
	checkPlan := p != nil && pe < p.Config.Epochs && pr < p.Config.WorldSize
	if p != nil && !checkPlan {
		s.add(Finding{Kind: KindPlanMismatch, Message: fmt.Sprintf("shard's own (epoch %d, rank %d) is not in the plan", pe, pr)})
	}
	var deep *deepCheck
	if c.opts.Deep {
		deep = c.newDeepCheck(s, r, path, idx, pe, pr)
		if deep != nil {
			defer func() {
				if !keep {
					deep.close()
				}
			}()
		}
	}
	bc := batchCheck{c: c, r: r, p: p, checkPlan: checkPlan && !c.conforming[pe], epoch: pe, rank: pr, mapped: r.Mapped()}
	// Sample ids are read only where something compares them: the plan
	// (when the epoch digest did not settle it) or the source. VerifyBatch
	// has checked their CRC already.
	bc.needIDs = bc.checkPlan || deep != nil
	if deep != nil && deep.part != nil {
		// By parts (deeppart.go): the integrity check first, keeping
		// its findings to merge with the deep ones in batch order.
		for k := 0; k < n && ctx.Err() == nil; k++ {
			ids := bc.check(k, deep.integrity(k), &s.res)
			if ids != nil && deep.selected(k) {
				deep.need(k, ids)
			}
		}
		// Its file is held open to the end or released until a
		// pass over the set's shards reads it (shardfile.go).
		c.joinGroup(deep, file)
		file.release()
		keep = true
		return shardResult{}, deep
	}
	workers := 1
	if deep == nil {
		workers = c.batchWorkers()
	}
	if workers <= 1 || n < 2*workers*batchChunk {
		for k := 0; k < n && ctx.Err() == nil; k++ {
			ids := bc.check(k, s.add, &s.res)
			if deep != nil && ids != nil && deep.selected(k) {
				bi, _ := r.Batch(k)
				c.compareAdmitted(ctx, deep, k, bi, ids)
			}
		}
		return s.finish(), nil
	}
	// A large shard with cores to spare: chunks of batches on several
	// goroutines, findings merged back in batch order so that the per-kind
	// cap and the report order are those of the sequential loop.
	chunks := (n + batchChunk - 1) / batchChunk
	found := make([][]Finding, chunks)
	res := make([]shardResult, chunks)
	_ = pool.Workers(ctx, chunks, workers, func() func(int) error {
		bc := bc
		return func(j int) error {
			add := func(f Finding) { found[j] = append(found[j], f) }
			bc.end = min(n, (j+1)*batchChunk) // this chunk's batches only
			for k := j * batchChunk; k < bc.end; k++ {
				bc.check(k, add, &res[j])
			}
			return nil
		}
	})
	for j := range chunks {
		for _, f := range found[j] {
			s.add(f)
		}
		s.res.batches += res[j].batches
		s.res.bytes += res[j].bytes
	}
	return s.finish(), nil
}

// batchChunk is the number of consecutive batches one goroutine checks at
// a time when a shard's batches are split across goroutines.
const batchChunk = 64

// batchWorkers returns how many goroutines check the batches of one shard:
// the jobs left over when there are fewer shards than jobs.
func (c *checker) batchWorkers() int {
	shards := max(1, len(c.man.Shards))
	return max(1, c.opts.Jobs/min(shards, c.opts.Jobs))
}

// batchCheck checks single batches of one shard: block checksum, padding
// and id slots, and plan conformance. Copies of it may run concurrently;
// each keeps its own id buffer.
type batchCheck struct {
	c           *checker
	r           *shardfmt.Reader
	p           *plan.Plan
	checkPlan   bool // compare with plan.RankBatch
	needIDs     bool // read the sample ids
	mapped      bool // r is mapped: blocks and ids are checked in place
	epoch, rank int
	want        []uint64
	block       []byte // this copy's block buffer (pread), allocated on first use
	// The id slots of batches [slotLo, slotLo+slotN) as read ahead
	// (idSlots); batches [badLo, badHi) whose read ahead failed.
	slots         []uint64
	slotLo, slotN int
	badLo, badHi  int
	end           int // the read ahead stops before batch end; 0: NumBatches
}

// idsAheadBytes bounds the sample id slots one check reads ahead with one
// pread (at least one batch's).
const idsAheadBytes = 1 << 20

// idSlots returns batch k's BatchSize id slots, checked against their
// CRC-32C, from the slots of the next batches read ahead with one pread
// (ReadSampleIDSlots) when they do not hold k; nil where that read failed
// (the batch is then checked with its own read, VerifyBlock, whose error
// names it as before).
func (b *batchCheck) idSlots(k int) []uint64 {
	if k >= b.badLo && k < b.badHi {
		return nil
	}
	bs := b.r.Geometry().BatchSize
	if k < b.slotLo || k >= b.slotLo+b.slotN {
		end := b.r.NumBatches()
		if b.end > 0 {
			end = b.end
		}
		n := min(max(1, idsAheadBytes/(8*max(bs, 1))), end-k)
		slots, err := b.r.ReadSampleIDSlots(k, n, b.slots)
		if err != nil {
			b.slotN, b.badLo, b.badHi = 0, k, k+n
			return nil
		}
		b.slots, b.slotLo, b.slotN = slots, k, n
	}
	i := (k - b.slotLo) * bs
	return b.slots[i : i+bs : i+bs]
}

// check checks batch k, reporting findings to add and counting into res,
// and returns its sample ids when they were read and are valid.
func (b *batchCheck) check(k int, add func(Finding), res *shardResult) []uint64 {
	r, p := b.r, b.p
	bi, err := r.Batch(k)
	if err != nil {
		add(Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading batch table: " + errDetail(err)})
		return nil
	}
	// With pread the block is read into this check's own buffer, so a
	// shard cut short under verify is an ErrSize finding. Mapped, the
	// block and its ids are checked in place, and a fault on the mapping
	// (the shard cut short since it was opened) is recovered as ErrSize
	// by the Reader. With jagged tensors blocks differ in size: the
	// buffer has the largest's, the block's own size is counted.
	bs := int64(bi.Size)
	var block []byte
	var verr error
	if b.mapped {
		block, verr = r.Block(k) // a view: nothing read yet
		if verr == nil {
			verr = r.VerifyBlock(k, block)
		}
	} else {
		if b.block == nil {
			b.block = make([]byte, r.Geometry().BlockSize)
		}
		block = b.block
		verr = r.ReadBlock(k, block)
		if verr == nil {
			// The batch's id slots as read ahead for the next batches
			// (their CRC-32C checked there), else its own read.
			if slots := b.idSlots(k); slots != nil {
				verr = r.VerifyBlockSlots(k, block, slots)
			} else {
				verr = r.VerifyBlock(k, block)
			}
		}
	}
	if verr != nil {
		f := Finding{Kind: KindBatchChecksum, Batch: intp(k), Message: "batch fails verification: " + errDetail(verr)}
		if errors.Is(verr, shardfmt.ErrSize) {
			f.Kind, f.Message = KindSizeMismatch, "shard changed while being read: "+errDetail(verr)
		} else if got, ok := blockCRC(block[:min(uint64(len(block)), bi.Size)]); ok && errors.Is(verr, shardfmt.ErrChecksum) && got != bi.CRC {
			f.What, f.Expected, f.Actual = "crc32c", fmt.Sprintf("%08x", bi.CRC), fmt.Sprintf("%08x", got)
			f.Message = "batch block does not match its checksum"
		}
		add(f)
	}
	res.batches++
	res.bytes += bs
	b.c.progress(bs)
	if !b.needIDs {
		return nil
	}
	ids, err := r.SampleIDs(k)
	if err != nil {
		switch {
		case verr != nil: // the same damage, reported above
		case errors.Is(err, shardfmt.ErrSize):
			add(Finding{Kind: KindSizeMismatch, Batch: intp(k), Message: "shard changed while being read: reading sample ids: " + errDetail(err)})
		default:
			add(Finding{Kind: KindHeaderInvalid, Batch: intp(k), Message: "reading sample ids: " + errDetail(err)})
		}
		return nil
	}
	if b.checkPlan && k < p.Steps() {
		var pads int
		b.want, pads, err = p.RankBatch(b.epoch, b.rank, k, b.want)
		if err != nil {
			add(Finding{Kind: KindPlanInvalid, Batch: intp(k), Message: "plan: " + err.Error()})
		} else {
			comparePlan(add, k, bi, ids, b.want, pads)
		}
	}
	return ids
}

// blockCRC returns block's CRC-32C; false when reading it faults (a block
// of a mapped shard cut short since it was checked).
func blockCRC(block []byte) (crc uint32, ok bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); !fault {
				panic(p)
			}
			crc, ok = 0, false
		}
	}()
	return shardfmt.CRC32C(block), true
}

// comparePlan reports how batch k's table entry and ids differ from the plan.
func comparePlan(add func(Finding), k int, bi shardfmt.BatchInfo, ids, want []uint64, pads int) {
	if bi.Count != len(want) {
		add(Finding{Kind: KindPlanMismatch, Batch: intp(k), What: "count", Expected: fmt.Sprint(len(want)), Actual: fmt.Sprint(bi.Count),
			Message: "batch holds another number of samples than the plan"})
	}
	if bi.Pads != pads {
		add(Finding{Kind: KindPlanMismatch, Batch: intp(k), What: "pads", Expected: fmt.Sprint(pads), Actual: fmt.Sprint(bi.Pads),
			Message: "batch flags another number of pad samples than the plan"})
	}
	for i := 0; i < len(ids) && i < len(want); i++ {
		if ids[i] != want[i] {
			add(Finding{Kind: KindPlanMismatch, Batch: intp(k), SampleID: u64p(ids[i]), What: "sample_id",
				Expected: fmt.Sprint(want[i]), Actual: fmt.Sprint(ids[i]),
				Message: fmt.Sprintf("slot %d holds another sample than the plan", i)})
			return // one per batch: a shifted batch differs everywhere
		}
	}
}

func (c *checker) progress(n int64) {
	if c.opts.Progress == nil {
		return
	}
	c.mu.Lock()
	c.opts.Progress(n)
	c.mu.Unlock()
}
