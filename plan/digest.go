package plan

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"runtime"

	"github.com/prepml/prep/internal/pool"
)

// digestLeafSlots is the target number of slots hashed per digest leaf.
const digestLeafSlots = 1 << 16

// DigestPadBit flags a pad slot in the epoch digest's slot encoding
// (PLAN.md §8): a slot is LE64(id), with this bit set on pad samples. No
// sample id has it set.
const DigestPadBit = 1 << 63

// DigestLeafSteps returns how many steps one leaf of the epoch digest
// covers: max(1, 65536/G) (PLAN.md §8).
func (p *Plan) DigestLeafSteps() int { return max(1, digestLeafSlots/p.Config.GlobalBatch) }

// AppendDigestSlots appends the digest slot encoding of one rank batch
// (PLAN.md §8) to buf: each id as LE64, the last pads of them with
// DigestPadBit set.
func AppendDigestSlots(buf []byte, ids []uint64, pads int) []byte {
	for i, id := range ids {
		if i >= len(ids)-pads {
			id |= DigestPadBit
		}
		buf = binary.LittleEndian.AppendUint64(buf, id)
	}
	return buf
}

// EpochDigestRoot returns "sha256:<hex>" of an epoch of steps steps whose
// leaves (in order) hash to leaves (PLAN.md §8).
func EpochDigestRoot(steps int, leaves [][32]byte) string {
	h := newDigestRoot(steps)
	for j := range leaves {
		h.Write(leaves[j][:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// EpochDigest returns epoch e's digest "sha256:<hex>" (PLAN.md §Epoch
// digest): a two-level SHA-256 over every rank batch of every step, so two
// plans with the same digest feed the same samples in the same order with
// the same pad flags. The epoch number itself is not hashed, so epochs with
// the same order (shuffle none) have equal digests. Except in partitioned
// mode it does not depend on R or W. Cost O(N) time on all CPUs and
// O(GOMAXPROCS) memory (EpochDigestContext). It returns "" for an epoch out
// of range.
func (p *Plan) EpochDigest(e int) string {
	d, _ := p.EpochDigestContext(context.Background(), e, nil)
	return d
}

// digestBatchLeaves is how many leaves per CPU are hashed between two
// writes to the root hash, progress calls and cancellation checks.
const digestBatchLeaves = 4

// EpochDigestContext is EpochDigest, stoppable and reporting progress: the
// leaves are hashed in parallel a few per CPU at a time and fed to the root
// hash in order, so memory stays O(GOMAXPROCS) whatever N is, and after
// each such group progress (if not nil) is called with the number of steps
// hashed so far. It returns ctx's error as soon as ctx is done between two
// groups, and "" with no error for an epoch out of range.
func (p *Plan) EpochDigestContext(ctx context.Context, e int, progress func(steps int)) (string, error) {
	if e < 0 || e >= p.Config.Epochs {
		return "", nil
	}
	steps := p.Steps()
	per := p.DigestLeafSteps()
	leaves := (steps + per - 1) / per
	workers := max(1, runtime.GOMAXPROCS(0))
	sums := make([][32]byte, min(leaves, workers*digestBatchLeaves))
	root := newDigestRoot(steps)
	for base := 0; base < leaves; base += len(sums) {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n := min(len(sums), leaves-base)
		_ = pool.Workers(context.Background(), n, workers, func() func(int) error {
			ids := make([]uint64, 0, p.Config.GlobalBatch)
			buf := make([]byte, 0, 8*p.Config.GlobalBatch)
			h := sha256.New()
			return func(i int) error {
				j := base + i
				h.Reset()
				for k := j * per; k < min(steps, (j+1)*per); k++ {
					if p.Config.Shuffle != ShufflePartitioned {
						// The step's rank batches in rank order are the
						// global batch's slots, pads last: one call.
						l, start := p.st.lane(e, 0, k)
						var pads int
						ids, pads = l.fill(start, uint64(p.Config.GlobalBatch), ids[:0])
						buf = AppendDigestSlots(buf[:0], ids, pads)
						h.Write(buf)
						continue
					}
					for r := 0; r < p.Config.WorldSize; r++ {
						var pads int
						ids, pads, _ = p.RankBatch(e, r, k, ids)
						buf = AppendDigestSlots(buf[:0], ids, pads)
						h.Write(buf)
					}
				}
				h.Sum(sums[i][:0])
				return nil
			}
		})
		for i := 0; i < n; i++ {
			root.Write(sums[i][:])
		}
		if progress != nil {
			progress(min(steps, (base+n)*per))
		}
	}
	return "sha256:" + hex.EncodeToString(root.Sum(nil)), nil
}

// newDigestRoot returns the root hash of an epoch digest of steps steps,
// its header written; the leaves follow in order.
func newDigestRoot(steps int) hash.Hash {
	h := sha256.New()
	h.Write([]byte("prep-epoch/v1\x00"))
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(steps))
	h.Write(hdr[:])
	return h
}
