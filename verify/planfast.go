package verify

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"slices"
	"unsafe"

	"github.com/prepml/prep/internal/pool"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
)

// Plan conformance by epoch digest.
//
// Recomputing every rank batch of the plan (plan.RankBatch) costs one
// permutation evaluation per sample, which dominated verify's CPU time. The
// plan file already records each epoch's digest (PLAN.md §8, "Epoch
// digest"): a two-level SHA-256 over the slot stream of the epoch, step by
// step and rank by rank, each slot LE64(id) with bit 63 set on pads. When a
// shard set holds every rank of an epoch, that stream can be hashed from the
// sample ids stored in the shards at SHA-256 speed (8 bytes per sample) and
// compared with the recorded digest.
//
// The stream does not encode batch boundaries, so the per-batch counts are
// checked too: every batch holding fewer than BatchSize samples or any pad
// is compared with plan.RankBatch (in the usual plan that is the last step
// only). Since every epoch has the same number of slots in the plan and in
// an equal stream, a batch holding more samples than the plan implies
// another holding fewer, which that comparison catches; with equal counts an
// equal stream means equal ids and pad flags in every batch, provided no
// stored id has bit 63 set (the stream's pad flag), so such an id sends the
// epoch to the batch-by-batch path.
//
// An epoch whose digest, counts or shards do not allow this (a rank missing,
// a shard that fails to open, ids failing their CRC, any difference) is
// checked batch by batch as before, so the findings are the same either way.
// What the fast path trusts is the digest recorded in the plan file, which
// the plan fingerprint does not cover: a plan file edited so that its digest
// matches wrongly ordered shards would pass. Options.RecomputePlan (and
// Deep, the thorough mode) turn the fast path off.

// planDigestPath enables the epoch digest path; tests turn it off to
// compare findings with the batch-by-batch path.
var planDigestPath = true

// conformingEpochs returns the epochs whose shards provably match the plan
// (see above); checkShard skips the per-batch plan comparison for them.
func (c *checker) conformingEpochs(ctx context.Context) map[int]bool {
	p, m := c.plan, c.man
	ok := map[int]bool{}
	if !planDigestPath || c.opts.RecomputePlan || c.opts.Deep || p == nil || p.Fingerprint != m.PlanFingerprint || len(p.Epochs) != p.Config.Epochs {
		return ok
	}
	byEpoch := map[int][]*shardfmt.ShardEntry{}
	for i := range m.Shards {
		e := &m.Shards[i]
		byEpoch[e.Epoch] = append(byEpoch[e.Epoch], e)
	}
	for e := 0; e < p.Config.Epochs; e++ {
		if ctx.Err() != nil {
			break
		}
		if c.epochConforms(ctx, e, byEpoch[e]) {
			ok[e] = true
		}
	}
	return ok
}

// epochConforms opens the shards of epoch e (entries from the manifest) and
// reports whether their sample ids, counts and pads are the plan's.
func (c *checker) epochConforms(ctx context.Context, e int, entries []*shardfmt.ShardEntry) bool {
	p := c.plan
	R, steps, b := p.Config.WorldSize, p.Steps(), p.BatchSize()
	if len(entries) != R || p.Epochs[e].Digest == "" {
		return false
	}
	readers := make([]*shardfmt.Reader, R)
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	for _, ent := range entries {
		if ent.Rank < 0 || ent.Rank >= R || readers[ent.Rank] != nil || ent.Batches != steps {
			return false
		}
		// The size is compared before the file is opened, as checkShard
		// does; nothing is followed or mapped (checker.openShard).
		if !safePath(ent.Path) {
			return false
		}
		if st, err := c.set.CheckName(ent.Path); err != nil || !st.Mode().IsRegular() || st.Size() != ent.Size {
			return false
		}
		r, err := c.openShard(*ent)
		if err != nil {
			return false
		}
		readers[ent.Rank] = r
		prov := r.Provenance()
		if int(prov.Epoch) != e || int(prov.Rank) != ent.Rank || r.NumBatches() != steps || r.Geometry().BatchSize != b {
			return false
		}
	}
	per := p.DigestLeafSteps()
	leaves := (steps + per - 1) / per
	sums := make([][32]byte, leaves)
	// A leaf that does not match stops the pool: the epoch is checked the
	// slow way.
	err := pool.Workers(ctx, leaves, c.opts.Jobs, func() func(int) error {
		slots := make([][]uint64, R) // per rank: the id slots of the leaf's steps
		var want []uint64
		buf := make([]byte, 0, 8*b)
		return func(j int) error {
			k0, k1 := j*per, min(steps, (j+1)*per)
			for rank, r := range readers {
				var err error
				if slots[rank], err = r.ReadSampleIDSlots(k0, k1-k0, slots[rank]); err != nil {
					return errLeaf
				}
			}
			h := sha256.New()
			for k := k0; k < k1; k++ {
				for rank, r := range readers {
					ids := slots[rank][(k-k0)*b : (k-k0+1)*b]
					var ok bool
					var slots []byte
					if slots, buf, want, ok = leafBatch(p, r, e, rank, k, ids, want, buf); !ok {
						return errLeaf
					}
					h.Write(slots)
				}
			}
			h.Sum(sums[j][:0])
			return nil
		}
	})
	if err != nil || ctx.Err() != nil {
		return false
	}
	return plan.EpochDigestRoot(steps, sums) == p.Epochs[e].Digest
}

// errLeaf stops the leaf pool of epochMatchesPlan at a leaf that does not
// match the plan.
var errLeaf = errors.New("leaf differs from the plan")

// leafBatch returns the digest slots of rank batch k of shard r, whose id
// slots are ids (the ids' own bytes when the batch has no pads on a
// little-endian machine, else encoded into buf, returned for reuse),
// comparing the batch with plan.RankBatch when it is not a full batch
// without pads. It reports false when the batch table cannot be read, the
// batch differs from the plan, or an id has bit 63 (plan.DigestPadBit)
// set, which no sample id has and which would alias a pad slot in the
// stream.
func leafBatch(p *plan.Plan, r *shardfmt.Reader, e, rank, k int, ids, want []uint64, buf []byte) (slots, _ []byte, _ []uint64, _ bool) {
	bi, err := r.Batch(k)
	if err != nil {
		return nil, buf, want, false
	}
	ids = ids[:bi.Count]
	if bi.Count != p.BatchSize() || bi.Pads != 0 {
		var pads int
		want, pads, err = p.RankBatch(e, rank, k, want)
		if err != nil || pads != bi.Pads || !slices.Equal(want, ids) {
			return nil, buf, want, false
		}
	}
	var or uint64
	for _, id := range ids {
		or |= id
	}
	if or&plan.DigestPadBit != 0 {
		// Bit 63 is the digest's pad flag: such an id could make the
		// stream equal the plan's while the pad count differs.
		return nil, buf, want, false
	}
	if bi.Pads == 0 && nativeLE {
		// Without pads a batch's slots are its ids as LE64: on a
		// little-endian machine, the ids' own bytes.
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(ids))), 8*len(ids)), buf, want, true
	}
	buf = plan.AppendDigestSlots(buf[:0], ids, bi.Pads)
	return buf, buf, want, true
}

// nativeLE reports whether this machine stores integers little-endian, as
// the digest's slot encoding does.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
