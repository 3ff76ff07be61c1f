package gpuload

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/prepml/prep/gpuload/internal/cuda"
)

// minPinnedSlots is the least number of pinned host slots of the cuda
// pipeline: one being read into, one being copied from, one spare so the
// reader never waits on the copy it just queued.
const minPinnedSlots = 3

// cudaBackend is the pread -> pinned ring -> async DMA -> device buffer
// pipeline (or, with RegisterMmap, registered mapping -> device buffer).
type cudaBackend struct {
	l      *Loader
	ctx    *cuda.Context
	dev    int
	verify bool
	size   uint64 // block size

	stream   cuda.Stream
	pinned   []unsafe.Pointer // pinned host slots (nil when the mapping is registered)
	hostFree chan int
	devBufs  []cuda.DevicePtr
	events   []cuda.Event // events[j]: recorded after the copy into devBufs[j]
	devFree  chan int
	regBase  unsafe.Pointer // registered mapping (RegisterMmap), else nil
	cur      *cudaRun
}

// cudaRun is one run of the cuda pipeline.
type cudaRun struct {
	pipeRun[delivery]
	filled chan filled
}

// filled is a block ready in host memory: a pinned slot (host >= 0) or the
// registered mapping (host = -1).
type filled struct {
	step int
	host int
	src  unsafe.Pointer
	err  error
}

func newCUDABackend(l *Loader, opts Options) (_ *cudaBackend, err error) {
	if l.geo.BlockSize == 0 {
		return nil, errors.New("shard geometry has an empty block")
	}
	ctx, err := cuda.Open(opts.Device)
	if err != nil {
		return nil, err
	}
	nDev := opts.Prefetch + 1
	nHost := max(minPinnedSlots, opts.Prefetch)
	c := &cudaBackend{l: l, ctx: ctx, dev: opts.Device, verify: opts.VerifyChecksums, size: l.geo.BlockSize,
		hostFree: make(chan int, nHost), devFree: make(chan int, nDev)}
	defer func() {
		if err != nil {
			c.freeAll()
		}
	}()
	// Registering needs the shard mapped: where the reader fell back to
	// pread, Block returns a fresh heap copy per call, nothing a copy may
	// read after the call, so the pinned ring is used instead.
	register := opts.RegisterMmap && l.sh.Mapped()
	var base unsafe.Pointer
	var span uint64
	if register && l.steps > 0 {
		first, err := l.sh.Block(0)
		if err != nil {
			return nil, fmt.Errorf("mapping block 0: %w", err)
		}
		last, err := l.sh.Block(l.steps - 1)
		if err != nil {
			return nil, fmt.Errorf("mapping block %d: %w", l.steps-1, err)
		}
		base = unsafe.Pointer(unsafe.SliceData(first))
		span = uint64(addr(last)-addr(first)) + uint64(len(last))
	}
	err = ctx.Do(func(cur *cuda.Current) error {
		var err error
		if c.stream, err = cur.StreamCreate(cuda.StreamNonBlocking); err != nil {
			return err
		}
		for range nDev {
			p, err := cur.MemAlloc(c.size)
			if err != nil {
				return fmt.Errorf("allocating %d device buffers of %d bytes: %w", nDev, c.size, err)
			}
			c.devBufs = append(c.devBufs, p)
			// Blocking-sync events: the copy goroutine waits on each
			// batch's event, and a spinning wait would keep a core busy
			// for the whole transfer (the pipeline keeps the stream fed
			// with the next copies meanwhile).
			ev, err := cur.EventCreate(cuda.EventDisableTiming | cuda.EventBlockingSync)
			if err != nil {
				return err
			}
			c.events = append(c.events, ev)
		}
		if register {
			if base != nil {
				if err := cur.MemHostRegister(base, span, cuda.HostRegisterReadOnly); err != nil {
					return fmt.Errorf("registering the mapped shard (%d bytes) read-only: %w", span, err)
				}
				c.regBase = base
			}
			return nil
		}
		for range nHost {
			p, err := cur.MemHostAlloc(c.size)
			if err != nil {
				return fmt.Errorf("allocating %d pinned host slots of %d bytes: %w", nHost, c.size, err)
			}
			c.pinned = append(c.pinned, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range c.pinned {
		c.hostFree <- i
	}
	for i := range c.devBufs {
		c.devFree <- i
	}
	return c, nil
}

func (c *cudaBackend) ring() int   { return cap(c.devFree) }
func (c *cudaBackend) device() int { return c.dev }

func (c *cudaBackend) start(step int) {
	r := &cudaRun{pipeRun: pipeRun[delivery]{quit: make(chan struct{}), out: make(chan delivery, cap(c.devFree))},
		filled: make(chan filled, max(cap(c.hostFree), 1))}
	c.cur = r
	if c.regBase != nil && !c.verify {
		// Blocks of the registered mapping need no reading: the copy
		// loop takes them itself, saving a goroutine hand-off per batch.
		close(r.filled)
		r.wg.Add(1)
		go c.copy(r, step, true)
		return
	}
	r.wg.Add(2)
	go c.read(r, step)
	go c.copy(r, step, false)
}

// mapped returns step s's block in the registered mapping.
func (c *cudaBackend) mapped(s int) (filled, []byte) {
	f := filled{step: s, host: -1}
	block, err := c.l.sh.Block(s)
	if err != nil {
		f.err = c.l.blockError("reading block", s, err)
		return f, nil
	}
	f.src = unsafe.Pointer(unsafe.SliceData(block))
	return f, block
}

// read fills pinned slots (or points into the registered mapping) for steps
// [step, NumBatches) in order and hands them to copy.
func (c *cudaBackend) read(r *cudaRun, step int) {
	defer r.wg.Done()
	defer close(r.filled)
	l := c.l
	for s := step; s < l.steps; s++ {
		f := filled{step: s, host: -1}
		var block []byte
		if c.regBase != nil {
			f, block = c.mapped(s)
		} else {
			select {
			case f.host = <-c.hostFree:
			case <-r.quit:
				return
			}
			f.src = c.pinned[f.host]
			block = unsafe.Slice((*byte)(f.src), c.size)
		}
		if f.err == nil && c.regBase == nil {
			if err := l.sh.ReadBlock(s, block); err != nil {
				f.err = l.blockError("reading block", s, err)
			}
		}
		if f.err == nil && c.verify {
			if err := l.checkBlock(s, block); err != nil {
				f.err = l.blockError("verifying block", s, err)
			}
		}
		select {
		case r.filled <- f:
		case <-r.quit:
			c.putHost(f.host)
			return
		}
		if f.err != nil {
			return
		}
	}
}

func (c *cudaBackend) putHost(slot int) {
	if slot >= 0 {
		c.hostFree <- slot
	}
}

// inflight is a copy queued on the stream.
type inflight struct {
	f   filled
	dev int
}

// copy queues host-to-device copies as soon as a filled block and a free
// device buffer are both at hand, keeping the stream busy, and delivers each
// batch in order once its event completes, then recycles its host slot. It
// runs with the context bound to its own thread (cuda.Context.Bind), so its
// driver calls are direct. With inline, it takes the blocks of steps
// [step, NumBatches) from the registered mapping itself instead of from
// r.filled.
func (c *cudaBackend) copy(r *cudaRun, step int, inline bool) {
	defer r.wg.Done()
	var q []inflight
	var pending *filled
	deliver := func(d delivery) bool {
		select {
		case r.out <- d:
			return true
		case <-r.quit:
			if d.err == nil {
				c.devFree <- d.slot
			}
			return false
		}
	}
	cur, unbind, err := c.ctx.Bind()
	if err != nil {
		deliver(delivery{step: step, slot: -1, err: c.l.blockError("binding the CUDA context", step, err)})
		return
	}
	defer unbind()
	quit := func() {
		// The stream may still read host slots and write device buffers:
		// wait for it before handing them to the next run.
		if len(q) > 0 {
			_ = cur.StreamSynchronize(c.stream)
		}
		for _, x := range q {
			c.putHost(x.f.host)
			c.devFree <- x.dev
		}
		if pending != nil {
			c.putHost(pending.host)
		}
	}
	in := r.filled
	if inline {
		in = nil
	}
	next := step // inline: the next step to take from the mapping
	for {
		if pending == nil && inline && next < c.l.steps {
			f, _ := c.mapped(next)
			next++
			pending = &f
		}
		if pending == nil && in != nil {
			if len(q) == 0 {
				select {
				case f, ok := <-in:
					if ok {
						pending = &f
					} else {
						in = nil // every step was read
					}
				case <-r.quit:
					quit()
					return
				}
			} else {
				select {
				case f, ok := <-in:
					if ok {
						pending = &f
					} else {
						in = nil
					}
				default:
				}
			}
		}
		if pending == nil && len(q) == 0 && in == nil && (!inline || next >= c.l.steps) {
			return
		}
		if pending != nil && pending.err == nil {
			dev := -1
			if len(q) == 0 {
				select {
				case dev = <-c.devFree:
				case <-r.quit:
					quit()
					return
				}
			} else {
				select {
				case dev = <-c.devFree:
				default:
				}
			}
			if dev >= 0 {
				p := *pending
				err := cur.MemcpyHtoDAsync(c.devBufs[dev], p.src, c.size, c.stream)
				if err == nil {
					err = cur.EventRecord(c.events[dev], c.stream)
				}
				if err != nil {
					c.devFree <- dev
					c.putHost(p.host)
					pending = &filled{step: p.step, host: -1, err: c.l.blockError("copying block to device", p.step, err)}
				} else {
					q = append(q, inflight{f: p, dev: dev})
					pending = nil
				}
				continue
			}
		}
		if len(q) == 0 {
			if pending != nil && pending.err != nil {
				// quit gives back the failed block's host slot (a
				// read or checksum error from the reader keeps one).
				deliver(delivery{step: pending.step, slot: -1, err: pending.err})
				quit()
				return
			}
			continue
		}
		x := q[0]
		if err := cur.EventSynchronize(c.events[x.dev]); err != nil {
			deliver(delivery{step: x.f.step, slot: -1, err: c.l.blockError("waiting for copy to device", x.f.step, err)})
			quit()
			return
		}
		q = q[1:]
		c.putHost(x.f.host)
		if !deliver(delivery{step: x.f.step, slot: x.dev, dev: uintptr(c.devBufs[x.dev])}) {
			quit()
			return
		}
	}
}

func (c *cudaBackend) next() delivery {
	select {
	case d := <-c.cur.out:
		return d
	case <-c.cur.quit:
		return delivery{err: ErrClosed}
	}
}

func (c *cudaBackend) release(slot int) { c.devFree <- slot }

func (c *cudaBackend) stop() {
	r := c.cur
	if r == nil {
		return
	}
	c.cur = nil
	close(r.quit)
	r.wg.Wait()
	for f := range r.filled {
		c.putHost(f.host)
	}
	for {
		select {
		case d := <-r.out:
			if d.err == nil {
				c.devFree <- d.slot
			}
		default:
			return
		}
	}
}

func (c *cudaBackend) close() error {
	c.stop()
	return c.freeAll()
}

// freeAll waits for the stream, frees every driver resource and releases the
// context.
func (c *cudaBackend) freeAll() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	keep(c.ctx.Do(func(cur *cuda.Current) error {
		if c.stream != (cuda.Stream{}) {
			keep(cur.StreamSynchronize(c.stream))
			keep(cur.StreamDestroy(c.stream))
			c.stream = cuda.Stream{}
		}
		for _, p := range c.devBufs {
			keep(cur.MemFree(p))
		}
		for _, e := range c.events {
			keep(cur.EventDestroy(e))
		}
		for _, p := range c.pinned {
			keep(cur.MemFreeHost(p))
		}
		if c.regBase != nil {
			keep(cur.MemHostUnregister(c.regBase))
			c.regBase = nil
		}
		c.devBufs, c.events, c.pinned = nil, nil, nil
		return nil
	}))
	keep(c.ctx.Close())
	return first
}

// copyToHost copies n bytes at device address p into dst.
func (c *cudaBackend) copyToHost(dst []byte, p uintptr) error {
	return c.ctx.Do(func(cur *cuda.Current) error { return cur.MemcpyDtoH(dst, cuda.DevicePtr(p)) })
}
