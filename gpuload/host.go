package gpuload

import (
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"sync"
	"unsafe"
)

// castagnoli is the CRC-32C table; the batch table's CRC is CRC-32C of the
// whole block (shardfmt/FORMAT.md).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// addr is the address of b's first byte (b must be non-empty or from a
// mapping).
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// pipeRun is one run of a pipeline, from start to stop.
type pipeRun struct {
	quit chan struct{}
	wg   sync.WaitGroup
	out  chan delivery
}

// hostBackend reads blocks into a ring of page-aligned buffers (or hands out
// views of the mapped shard) on a background goroutine.
type hostBackend struct {
	l         *Loader
	verify    bool
	mapBlocks bool
	prefetch  int
	bufs      [][]byte // ring buffers (nil with mapBlocks)
	free      chan int // ring slots not held by anyone
	cur       *pipeRun
}

func newHostBackend(l *Loader, opts Options) (*hostBackend, error) {
	n := opts.Prefetch + 1
	h := &hostBackend{l: l, verify: opts.VerifyChecksums, mapBlocks: opts.MapBlocks, prefetch: opts.Prefetch, free: make(chan int, n)}
	if !opts.MapBlocks {
		for range n {
			b, err := allocBuffer(int(l.geo.BlockSize))
			if err != nil {
				h.freeAll()
				return nil, fmt.Errorf("allocating %d ring buffers of %d bytes: %w", n, l.geo.BlockSize, err)
			}
			h.bufs = append(h.bufs, b)
		}
	}
	for i := range n {
		h.free <- i
	}
	return h, nil
}

func (h *hostBackend) ring() int   { return cap(h.free) }
func (h *hostBackend) device() int { return -1 }

func (h *hostBackend) start(step int) {
	r := &pipeRun{quit: make(chan struct{}), out: make(chan delivery, cap(h.free))}
	h.cur = r
	r.wg.Add(1)
	go h.produce(r, step)
}

// produce reads steps [step, NumBatches) into free slots in order.
func (h *hostBackend) produce(r *pipeRun, step int) {
	defer r.wg.Done()
	l := h.l
	for s := step; s < l.steps; s++ {
		var slot int
		select {
		case slot = <-h.free:
		case <-r.quit:
			return
		}
		d := delivery{step: s, slot: slot}
		d.host, d.err = h.fill(s, slot)
		select {
		case r.out <- d:
		case <-r.quit:
			h.free <- slot
			return
		}
		if d.err != nil {
			return
		}
	}
}

// fill makes step s's block available in slot and returns it.
func (h *hostBackend) fill(s, slot int) ([]byte, error) {
	l := h.l
	var block []byte
	var err error
	op := "reading block"
	if h.mapBlocks {
		block, err = l.sh.Block(s)
		if err == nil && s+h.prefetch < l.steps {
			if ahead, e := l.sh.Block(s + h.prefetch); e == nil {
				willNeed(ahead)
			}
		}
	} else {
		block = h.bufs[slot]
		err = l.sh.ReadBlock(s, block)
	}
	if err == nil && h.verify {
		op = "verifying block"
		err = l.checkBlock(s, block)
	}
	if err != nil {
		return nil, l.blockError(op, s, err)
	}
	return block, nil
}

// checkBlock compares block's CRC-32C with step s's batch table entry. A
// memory fault while reading a mapped block (MapBlocks or RegisterMmap, the
// shard cut short after Open) is returned as an error wrapping ErrCorrupt,
// not a SIGBUS crash.
func (l *Loader) checkBlock(s int, block []byte) (err error) {
	defer faultGuard(&err)()
	info, err := l.sh.Batch(s)
	if err != nil {
		return err
	}
	if got := crc32.Checksum(block[:l.geo.BlockSize], castagnoli); got != info.CRC {
		return fmt.Errorf("%w: CRC-32C %08x, batch table %08x", ErrChecksum, got, info.CRC)
	}
	return nil
}

// blockError locates err at step s's block.
func (l *Loader) blockError(op string, s int, err error) error {
	off := int64(-1)
	if info, e := l.sh.Batch(s); e == nil {
		off = int64(info.Offset)
	}
	return &Error{Op: op, Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: s, Offset: off, Err: err}
}

func (h *hostBackend) next() delivery {
	select {
	case d := <-h.cur.out:
		return d
	case <-h.cur.quit:
		return delivery{err: ErrClosed}
	}
}

func (h *hostBackend) release(slot int) { h.free <- slot }

func (h *hostBackend) stop() {
	r := h.cur
	if r == nil {
		return
	}
	h.cur = nil
	close(r.quit)
	r.wg.Wait()
	for {
		select {
		case d := <-r.out:
			h.free <- d.slot
		default:
			return
		}
	}
}

func (h *hostBackend) close() error {
	h.stop()
	return h.freeAll()
}

func (h *hostBackend) freeAll() error {
	var first error
	for _, b := range h.bufs {
		if err := freeBuffer(b); err != nil && first == nil {
			first = err
		}
	}
	h.bufs = nil
	return first
}

// faultGuard turns a memory fault in the calling function into an error:
// defer faultGuard(&err)(). Other panics propagate.
func faultGuard(err *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if _, ok := p.(interface{ Addr() uintptr }); !ok {
				panic(p)
			}
			*err = fmt.Errorf("%w: memory fault reading the mapped block (file cut short after open?): %v", ErrCorrupt, p)
		}
	}
}
