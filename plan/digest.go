package plan

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"runtime"
	"sync"
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
	h := sha256.New()
	h.Write([]byte("prep-epoch/v1\x00"))
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(steps))
	h.Write(hdr[:])
	for j := range leaves {
		h.Write(leaves[j][:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// EpochDigest returns epoch e's digest "sha256:<hex>" (PLAN.md §Epoch
// digest): a two-level SHA-256 over every rank batch of every step, so two
// plans with the same digest feed the same samples in the same order with
// the same pad flags. The epoch number itself is not hashed, so epochs with
// the same order (shuffle none) have equal digests. Except in partitioned mode it does not depend on R
// or W. Cost O(N); leaves are hashed on all CPUs. It returns "" for an
// epoch out of range.
func (p *Plan) EpochDigest(e int) string {
	if e < 0 || e >= p.Config.Epochs {
		return ""
	}
	steps := p.Steps()
	per := p.DigestLeafSteps()
	leaves := (steps + per - 1) / per
	sums := make([][32]byte, leaves)
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]uint64, 0, p.BatchSize())
			buf := make([]byte, 0, 8*p.Config.GlobalBatch)
			for j := range next {
				h := sha256.New()
				for k := j * per; k < min(steps, (j+1)*per); k++ {
					for r := 0; r < p.Config.WorldSize; r++ {
						var pads int
						ids, pads, _ = p.RankBatch(e, r, k, ids)
						buf = AppendDigestSlots(buf[:0], ids, pads)
						h.Write(buf)
					}
				}
				h.Sum(sums[j][:0])
			}
		}()
	}
	for j := 0; j < leaves; j++ {
		next <- j
	}
	close(next)
	wg.Wait()
	return EpochDigestRoot(steps, sums)
}
