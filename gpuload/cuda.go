package gpuload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prepml/prep/gpuload/internal/cuda"
	"github.com/prepml/prep/shardfmt"
)

// minPinnedSlots is the least number of pinned host slots of the cuda
// pipeline: one being read into, one being copied from, one spare so the
// reader never waits on the copy it just queued.
const minPinnedSlots = 3

// cudaBackend is the pinned ring -> async DMA -> device buffer pipeline
// (filled by pread or O_DIRECT reads), or registered mapping -> device
// buffer, or cuFileRead straight into device buffers (cudapath.go names the
// paths).
type cudaBackend struct {
	l      *Loader
	ctx    *cuda.Context
	dev    int
	verify bool
	size   uint64 // block size

	stream   cuda.Stream
	pinned   []unsafe.Pointer // pinned host slots (none on register and gds)
	hostFree chan int
	devBufs  []cuda.DevicePtr
	events   []cuda.Event // events[j]: recorded after the copy into devBufs[j]
	devFree  chan int
	regBase  unsafe.Pointer // registered mapping (register), else nil
	cur      *cudaRun

	path      string    // the transfer path in use
	direct    blockFile // the shard opened with O_DIRECT (direct and gds), else nil
	gds       *gdsFile  // the shard registered with cuFile (gds), else nil
	stats     TransferStats
	batches   atomic.Int64
	readNanos atomic.Int64
	copyNanos atomic.Int64
	waitNanos atomic.Int64
}

// cudaRun is one run of the cuda pipeline.
type cudaRun struct {
	pipeRun[delivery]
	filled chan filled
}

// filled is a block ready in host memory: a pinned slot (host >= 0) or the
// registered mapping (host = -1), of size bytes (the block's own length,
// at most the block size), with its jagged tensors located (checkJagged).
type filled struct {
	step int
	host int
	src  unsafe.Pointer
	size uint64
	jag  []jaggedAt
	err  error
}

// shardFile returns the open file of a shard read from one (a
// *shardfmt.Reader from a path), else nil.
func shardFile(sh shard) *os.File {
	if f, ok := sh.(interface{ File() *os.File }); ok {
		return f.File()
	}
	return nil
}

// residency measures the page-cache residency of a mapped span; a variable
// so tests can stand in for a cold cache.
var residency = residentFraction

// shardSpan returns the mapped view of the shard's blocks (nil when the
// shard is not mapped or has none) and the inputs of the path choice.
func shardSpan(l *Loader) ([]byte, pathInputs, error) {
	in := pathInputs{steps: l.steps, mapped: l.sh.Mapped(), resident: -1, ramBytes: physicalMemory()}
	if l.steps == 0 {
		return nil, in, nil
	}
	in.shardBytes = uint64(l.steps) * l.geo.BlockSize
	if l.geo.HasJagged() {
		in.shardBytes = 0
		for k := range l.steps {
			if bi, err := l.sh.Batch(k); err == nil {
				in.shardBytes += bi.Size
			}
		}
	}
	if !in.mapped {
		return nil, in, nil
	}
	first, err := l.sh.Block(0)
	if err != nil {
		return nil, in, fmt.Errorf("mapping block 0: %w", err)
	}
	last, err := l.sh.Block(l.steps - 1)
	if err != nil {
		return nil, in, fmt.Errorf("mapping block %d: %w", l.steps-1, err)
	}
	span := unsafe.Slice(unsafe.SliceData(first), uint64(addr(last)-addr(first))+uint64(len(last)))
	if f, err := residency(span); err == nil {
		in.resident = f
	}
	return span, in, nil
}

func newCUDABackend(l *Loader, opts Options) (_ *cudaBackend, err error) {
	if l.geo.BlockSize == 0 {
		return nil, errors.New("shard geometry has an empty block")
	}
	req, err := requestedPath(opts)
	if err != nil {
		return nil, err
	}
	if req == CUDAPathGDS && opts.VerifyChecksums {
		return nil, fmt.Errorf("%w: VerifyChecksums with CUDAPath gds: the blocks never reach host memory", ErrInvalid)
	}
	if req == CUDAPathGDS && l.geo.HasJagged() {
		return nil, fmt.Errorf("%w: CUDAPath gds over a shard with jagged tensors: their offsets are checked in host memory, "+
			"which gds blocks never reach (use the register, direct or pread path)", ErrInvalid)
	}
	t0 := time.Now()
	ctx, err := cuda.Open(opts.Device)
	if err != nil {
		return nil, err
	}
	nDev := opts.Prefetch + 1
	nHost := max(minPinnedSlots, opts.Prefetch)
	c := &cudaBackend{l: l, ctx: ctx, dev: opts.Device, verify: opts.VerifyChecksums, size: l.geo.BlockSize,
		devFree: make(chan int, nDev)}
	defer func() {
		if err != nil {
			c.freeAll()
		}
	}()
	span, in, err := shardSpan(l)
	if err != nil {
		return nil, err
	}
	plan := chooseCUDAPaths(req, in)
	c.stats = TransferStats{Backend: BackendCUDA, Requested: req, Reason: plan.reason, Resident: in.resident,
		Fallbacks: plan.fallbacks, GDS: "not tried"}
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
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, p := range plan.paths {
		err = c.setUp(p, span, nHost)
		if err == nil {
			c.path = p
			break
		}
		if plan.explicit && p != CUDAPathPread {
			return nil, fmt.Errorf("%w: %s: %w", ErrPathUnavailable, p, err)
		}
		if plan.explicit || i == len(plan.paths)-1 {
			return nil, err
		}
		c.stats.Fallbacks = append(c.stats.Fallbacks, Fallback{Path: p, Error: err.Error()})
	}
	c.stats.Path = c.path
	c.hostFree = make(chan int, len(c.pinned))
	for i := range c.pinned {
		c.hostFree <- i
	}
	for i := range c.devBufs {
		c.devFree <- i
	}
	c.stats.SetupSeconds = time.Since(t0).Seconds()
	return c, nil
}

// setUp prepares path p (span is the mapped view of the shard's blocks, nil
// when not mapped), or returns why it cannot be used; what a failed path set
// up is undone, except pinned slots, which the next path may use.
func (c *cudaBackend) setUp(p string, span []byte, nHost int) error {
	switch p {
	case CUDAPathRegister:
		if len(span) == 0 {
			return nil // nothing to register: an empty shard
		}
		base := unsafe.Pointer(unsafe.SliceData(span))
		return c.ctx.Do(func(cur *cuda.Current) error {
			if err := cur.MemHostRegister(base, uint64(len(span)), cuda.HostRegisterReadOnly); err != nil {
				return fmt.Errorf("registering the mapped shard (%d bytes) read-only: %w", len(span), err)
			}
			c.regBase = base
			return nil
		})
	case CUDAPathDirect:
		if err := c.allocPinned(directSlots(nHost, c.size)); err != nil {
			return err
		}
		return c.openDirect()
	case CUDAPathPread:
		return c.allocPinned(nHost)
	case CUDAPathGDS:
		return c.openGDS()
	}
	return fmt.Errorf("%w: unknown CUDA path %q", ErrInvalid, p)
}

// allocPinned allocates n pinned host slots unless they exist already; on
// failure it frees the ones it allocated.
func (c *cudaBackend) allocPinned(n int) error {
	if len(c.pinned) > 0 {
		return nil
	}
	return c.ctx.Do(func(cur *cuda.Current) error {
		for range n {
			p, err := cur.MemHostAlloc(c.size)
			if err != nil {
				for _, q := range c.pinned {
					cur.MemFreeHost(q)
				}
				c.pinned = nil
				return fmt.Errorf("allocating %d pinned host slots of %d bytes: %w", n, c.size, err)
			}
			c.pinned = append(c.pinned, p)
		}
		return nil
	})
}

// openDirect opens the shard with O_DIRECT, checks the alignment rules
// against its blocks and the pinned slots, and reads block 0 into a slot,
// so that a file system that accepts the open but refuses the reads
// (EINVAL) is found at Open rather than at step 0.
func (c *cudaBackend) openDirect() error {
	f, offAlign, memAlign, err := openDirect(shardFile(c.l.sh), c.l.path)
	if err != nil {
		return err
	}
	bufs := make([]uintptr, len(c.pinned))
	for i, p := range c.pinned {
		bufs[i] = uintptr(p)
	}
	err = c.alignedAndReadable(f, offAlign, memAlign, bufs)
	if err != nil {
		f.Close()
		return err
	}
	c.direct = f
	c.stats.DirectAlign = offAlign
	return nil
}

// alignedAndReadable checks the O_DIRECT rules for the shard and reads its
// first block through f into pinned slot 0.
func (c *cudaBackend) alignedAndReadable(f blockFile, offAlign, memAlign uint32, bufs []uintptr) error {
	if c.l.steps == 0 {
		return nil
	}
	info, err := c.l.sh.Batch(0)
	if err != nil {
		return err
	}
	if err := directAlignment(offAlign, memAlign, info.Offset, c.size, bufs); err != nil {
		return err
	}
	if err := readFull(f, unsafe.Slice((*byte)(c.pinned[0]), min(info.Size, c.size)), int64(info.Offset)); err != nil {
		return fmt.Errorf("reading block 0 with O_DIRECT: %w", err)
	}
	return nil
}

// readFull reads len(dst) bytes at off from f; a short read (the file cut
// short) wraps shardfmt.ErrSize.
func readFull(f blockFile, dst []byte, off int64) error {
	n, err := f.ReadAt(dst, off)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: read %d of %d bytes at offset %d", shardfmt.ErrSize, n, len(dst), off)
	}
	return err
}

func (c *cudaBackend) ring() int   { return cap(c.devFree) }
func (c *cudaBackend) device() int { return c.dev }

func (c *cudaBackend) start(step int) {
	r := &cudaRun{pipeRun: pipeRun[delivery]{quit: make(chan struct{}), out: make(chan delivery, cap(c.devFree))},
		filled: make(chan filled, max(cap(c.hostFree), 1))}
	c.cur = r
	if c.gds != nil {
		close(r.filled)
		r.wg.Add(1)
		go c.readGDS(r, step)
		return
	}
	if c.regBase != nil && !c.verify {
		// Blocks of the registered mapping need no reading: the copy
		// loop takes them itself, saving a goroutine hand-off per batch.
		close(r.filled)
		r.wg.Add(1)
		go c.copy(r, step, true)
		return
	}
	r.wg.Add(2)
	if c.direct != nil {
		go c.readDirect(r, step)
	} else {
		go c.read(r, step)
	}
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
	f.src, f.size = unsafe.Pointer(unsafe.SliceData(block)), uint64(len(block))
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
			block = c.slot(f.host)
		}
		if f.err == nil && c.regBase == nil {
			var err error
			if f.size, err = c.readBlock(s, block); err != nil {
				f.err = l.blockError("reading block", s, err)
			}
			block = block[:f.size]
		}
		if f.err == nil && c.verify {
			if err := l.checkBlock(s, block); err != nil {
				f.err = l.blockError("verifying block", s, err)
			}
		}
		if f.err == nil {
			f.jag, f.err = l.checkJagged(s, block)
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

// readBlock reads step s's block into a pinned slot (block, of the block
// size): with O_DIRECT on the direct path, else with pread. It returns the
// block's length, the bytes read.
func (c *cudaBackend) readBlock(s int, block []byte) (uint64, error) {
	t := time.Now()
	defer func() { c.readNanos.Add(int64(time.Since(t))) }()
	size, err := c.blockLen(s)
	if err != nil {
		return 0, err
	}
	if c.direct == nil {
		return size, c.l.sh.ReadBlock(s, block)
	}
	info, err := c.l.sh.Batch(s)
	if err != nil {
		return 0, err
	}
	return size, readFull(c.direct, block[:size], int64(info.Offset))
}

// blockLen returns the length of step s's block (the block size in a shard
// without jagged tensors), checked against the block size the slots and
// device buffers have.
func (c *cudaBackend) blockLen(s int) (uint64, error) {
	info, err := c.l.sh.Batch(s)
	if err != nil {
		return 0, err
	}
	if info.Size == 0 || info.Size > c.size {
		return 0, fmt.Errorf("%w: block of %d bytes, outside (0, %d] (the header's block size)", ErrCorrupt, info.Size, c.size)
	}
	return info.Size, nil
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
			f, block := c.mapped(next)
			if f.err == nil {
				f.jag, f.err = c.l.checkJagged(next, block)
			}
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
				t := time.Now()
				err := cur.MemcpyHtoDAsync(c.devBufs[dev], p.src, p.size, c.stream)
				if err == nil {
					err = cur.EventRecord(c.events[dev], c.stream)
				}
				c.copyNanos.Add(int64(time.Since(t)))
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
		t := time.Now()
		err := cur.EventSynchronize(c.events[x.dev])
		c.waitNanos.Add(int64(time.Since(t)))
		if err != nil {
			deliver(delivery{step: x.f.step, slot: -1, err: c.l.blockError("waiting for copy to device", x.f.step, err)})
			quit()
			return
		}
		q = q[1:]
		c.batches.Add(1)
		c.putHost(x.f.host)
		if !deliver(delivery{step: x.f.step, slot: x.dev, dev: uintptr(c.devBufs[x.dev]), jag: x.f.jag}) {
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
		if c.gds != nil {
			keep(c.gds.close(cur))
			c.gds = nil
		}
		c.devBufs, c.events, c.pinned = nil, nil, nil
		return nil
	}))
	keep(c.ctx.Close())
	if c.direct != nil {
		keep(c.direct.Close())
		c.direct = nil
	}
	return first
}

// copyToHost copies n bytes at device address p into dst.
func (c *cudaBackend) copyToHost(dst []byte, p uintptr) error {
	return c.ctx.Do(func(cur *cuda.Current) error { return cur.MemcpyDtoH(dst, cuda.DevicePtr(p)) })
}
