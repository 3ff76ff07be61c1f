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

// padBit flags a pad slot in the epoch digest's slot encoding.
const padBit = 1 << 63

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
	per := max(1, digestLeafSlots/p.Config.GlobalBatch)
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
						buf = buf[:0]
						for i, id := range ids {
							if i >= len(ids)-pads {
								id |= padBit
							}
							buf = binary.LittleEndian.AppendUint64(buf, id)
						}
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
	h := sha256.New()
	h.Write([]byte("prep-epoch/v1\x00"))
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(steps))
	h.Write(hdr[:])
	for j := range sums {
		h.Write(sums[j][:])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
