package gpuload

import (
	"fmt"
	"io"
	"time"
	"unsafe"

	"github.com/prepml/prep/shardfmt"
)

// The direct path's ring and reads. An O_DIRECT read is a disk request that
// the caller waits for; between two of them the disk idles, so the reader
// fills several consecutive free slots with one vectored read (preadv),
// which the block layer splits into requests the disk serves in parallel.
const (
	// directRingBytes is the least pinned ring the direct path allocates
	// (more slots than Prefetch asks for when blocks are small), so that
	// groups of reads stay large.
	directRingBytes = 32 << 20
	// directMaxSlots bounds the slots directRingBytes adds.
	directMaxSlots = 64
	// directGroupBytes bounds one vectored O_DIRECT read.
	directGroupBytes = 16 << 20
)

// directSlots is the number of pinned slots of blockSize bytes the direct
// path uses when Prefetch asks for n.
func directSlots(n int, blockSize uint64) int {
	want := int((directRingBytes + blockSize - 1) / blockSize)
	return max(n, min(want, directMaxSlots))
}

// directGroup is the most consecutive blocks of blockSize bytes one read
// fills, in a ring of n slots: at most directGroupBytes, at most half the
// ring (so the copier drains one half while the other is read), at least 1.
func directGroup(n int, blockSize uint64) int {
	return max(1, min((n+1)/2, int(directGroupBytes/max(blockSize, 1))))
}

// slot returns pinned slot h as a block-sized slice.
func (c *cudaBackend) slot(h int) []byte { return unsafe.Slice((*byte)(c.pinned[h]), c.size) }

// readDirect fills pinned slots with O_DIRECT reads for steps [step,
// NumBatches) in order, in groups of the consecutive slots free at the
// time, and hands them to copy one step at a time. A failing group is read
// again block by block from its first step, so the error names the block.
func (c *cudaBackend) readDirect(r *cudaRun, step int) {
	defer r.wg.Done()
	defer close(r.filled)
	l := c.l
	limit := directGroup(len(c.pinned), c.size)
	for s := step; s < l.steps; {
		var first int
		select {
		case first = <-c.hostFree:
		case <-r.quit:
			return
		}
		slots := []int{first}
	more:
		for len(slots) < limit && s+len(slots) < l.steps {
			select {
			case h := <-c.hostFree:
				slots = append(slots, h)
			default:
				break more
			}
		}
		sizes, err := c.readGroup(s, slots)
		if err != nil && len(slots) > 1 {
			for _, h := range slots[1:] {
				c.hostFree <- h
			}
			slots = slots[:1]
			var size uint64
			size, err = c.readBlock(s, c.slot(first))
			sizes = []uint64{size}
		}
		for i, h := range slots {
			f := filled{step: s + i, host: h, src: c.pinned[h]}
			if err != nil {
				f.err = l.blockError("reading block", s+i, err)
			} else {
				f.size = sizes[i]
				block := c.slot(h)[:f.size]
				if c.verify {
					if e := l.checkBlock(s+i, block); e != nil {
						f.err = l.blockError("verifying block", s+i, e)
					}
				}
				if f.err == nil {
					f.jag, f.err = l.checkJagged(s+i, block)
				}
			}
			select {
			case r.filled <- f:
			case <-r.quit:
				for _, rest := range slots[i:] {
					c.putHost(rest)
				}
				return
			}
			if f.err != nil {
				// The copier gives back the failed step's slot.
				for _, rest := range slots[i+1:] {
					c.putHost(rest)
				}
				return
			}
		}
		s += len(slots)
	}
}

// readGroup reads the blocks of steps s, s+1, ... into slots with one
// vectored O_DIRECT read (one plain read for one slot) and returns their
// lengths. The blocks follow each other in the file; each slot takes only
// its own block's bytes (blocks differ in size in a shard with jagged
// tensors).
func (c *cudaBackend) readGroup(s int, slots []int) ([]uint64, error) {
	if len(slots) == 1 {
		size, err := c.readBlock(s, c.slot(slots[0]))
		return []uint64{size}, err
	}
	t := time.Now()
	defer func() { c.readNanos.Add(int64(time.Since(t))) }()
	info, err := c.l.sh.Batch(s)
	if err != nil {
		return nil, err
	}
	bufs := make([][]byte, len(slots))
	sizes := make([]uint64, len(slots))
	var want uint64
	for i, h := range slots {
		if sizes[i], err = c.blockLen(s + i); err != nil {
			return nil, err
		}
		bufs[i] = c.slot(h)[:sizes[i]]
		want += sizes[i]
	}
	n, err := preadvFile(c.direct, bufs, int64(info.Offset))
	if err == nil && uint64(n) != want {
		err = fmt.Errorf("%w: read %d of %d bytes at offset %d: %w", shardfmt.ErrSize, n, want, info.Offset, io.ErrUnexpectedEOF)
	}
	return sizes, err
}
