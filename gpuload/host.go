package gpuload

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prepml/prep/shardfmt"
)

// addr is the address of b's first byte (b must be non-empty or from a
// mapping).
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// pipeRun is one run of a pipeline, from start to stop, handing its
// consumer values of type T on out: single deliveries (cuda) or groups of
// deliveries of consecutive steps in step order (host).
type pipeRun[T any] struct {
	quit chan struct{}
	wg   sync.WaitGroup
	out  chan T
}

// hostRun is one run of the host pipeline.
type hostRun = pipeRun[[]delivery]

// maxGroupBytes bounds the blocks one vectored read fetches (and one
// hand-off to the consumer carries).
const maxGroupBytes = 4 << 20

// maxSpin bounds how long the consumer polls for the producer's next group
// before parking, beyond the time the producer's last group read took. It
// is several times the cost of waking a parked goroutine (10-20 µs of the
// waker's time on a 2-vCPU VM, where the wake starts an idle CPU). That
// cost falls on the producer, between two reads, once per group: for a
// group of a few 128 KiB blocks (40-100 µs of copying) it is a fifth of
// the read path, so the consumer keeps polling through a read of up to
// maxSpinRead and parks at once only behind longer reads, where the wait
// dwarfs the wake. Tests set maxSpin to 0 to take the parking path.
var maxSpin = 100 * time.Microsecond

// maxSpinRead is the longest group read the consumer waits for polling
// (see maxSpin).
var maxSpinRead = 2 * time.Millisecond

// groupLimit is the most blocks of blockSize bytes one group may take from
// a ring of n slots: at most maxGroupBytes, and at most half the ring
// (rounded up), so that while the producer reads one half the consumer can
// take and release the other and the producer finds free slots when it is
// done instead of waiting for them. It is at least 1.
func groupLimit(n int, blockSize uint64) int {
	return max(1, min((n+1)/2, int(maxGroupBytes/max(blockSize, 1))))
}

// hostBackend reads blocks into a ring of page-aligned buffers (or hands out
// views of the mapped shard) on a background goroutine.
//
// The producer takes the ring slots free at the moment (at least one, at
// most groupLimit) and fills them with the next consecutive blocks using one
// vectored read (preadv), then hands the whole group to the consumer at
// once. From a warm page cache the copy costs the same per byte whatever the
// read size; what a group saves is the goroutine hand-off per batch.
//
// Steps are claimed for reading in order, a group at a time. A consumer
// that finds no group ready and none being read (the producer waits for a
// slot, or has not run) claims and reads the next group itself (steal), in
// its own goroutine: when the reads are the slower side no hand-off is
// needed at all, and on a busy machine the reads go on while the
// producer's thread waits for a CPU. A group being read by the producer is
// waited for, so batches are delivered in step order either way. The
// producer reads ahead while it finds free slots, then sleeps until a
// release says the consumer spends time on its batches (or is parked
// waiting for one): a consumer that gives each batch back at once reads
// the next groups itself and wakes nobody (see kick).
//
// A hand-off to a parked consumer costs the producer a wake-up (starting an
// idle thread, a futex call that is slow on virtual machines), paid on the
// critical path of a reader that is otherwise only copying. So a consumer
// that finds no group ready polls for one for up to maxSpin, yielding the
// processor between polls, while the producer's recent groups took no
// longer than that; then the group lands in the channel's buffer and nobody
// is woken.
type hostBackend struct {
	l         *Loader
	verify    bool
	mapBlocks bool
	prefetch  int
	maxGroup  int          // most blocks per group
	readNanos atomic.Int64 // how long the producer's last group read took
	readTotal atomic.Int64 // nanoseconds of every group read (TransferStats)
	batches   atomic.Int64 // blocks read (TransferStats)
	bufs      [][]byte     // ring buffers (nil with mapBlocks)
	// Consumer side: per ring slot, the sample ids of its batch; the id
	// slots of batches [idLo, idLo+idN) as read ahead; the steps
	// [badLo, badHi) whose read ahead failed, left to Loader.batch.
	ids          [][]uint64
	idSlots      []uint64
	idLo, idN    int
	badLo, badHi int
	free         chan int // ring slots not held by anyone
	cur          *hostRun
	queue        []delivery // consumer side: received from cur.out, not yet taken by next
	// Steps are claimed for reading in order, in groups, by the producer
	// or by a consumer that finds nothing ready (steal): claimNext is the
	// first step not claimed yet (guarded by claimMu); want is the next
	// step the consumer delivers (consumer side).
	claimMu   sync.Mutex
	claimNext int
	want      int
	// The producer reads ahead while it finds free slots; then it sleeps
	// until kicked (kick, one token): by a release that comes kickGap or
	// more after the batch before it was handed out (the consumer spends
	// time on each batch: reading ahead pays), or by any release while the
	// consumer is parked waiting for a group (parked). A consumer that
	// gives each batch back at once reads the next groups itself (steal)
	// and wakes nobody. handed is when next last returned (UnixNano).
	kick   chan struct{}
	parked atomic.Bool
	handed atomic.Int64
}

// kickGap is how long after a batch is handed out its release must come
// for the producer to be woken to read ahead (see hostBackend.kick): a
// consumer quicker than that reads the next groups itself, which a
// wake-up (10-20 µs on a VM) would only slow down.
const kickGap = 20 * time.Microsecond

// newHostBackend allocates the ring: Prefetch+1 buffers of the shard's
// largest block (Geometry.BlockSize), so any block fits any slot.
func newHostBackend(l *Loader, opts Options) (*hostBackend, error) {
	n := opts.Prefetch + 1
	h := &hostBackend{l: l, verify: opts.VerifyChecksums, mapBlocks: opts.MapBlocks, prefetch: opts.Prefetch, free: make(chan int, n), kick: make(chan struct{}, 1)}
	h.maxGroup = groupLimit(n, l.geo.BlockSize)
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
	h.ids = make([][]uint64, n)
	for i := range n {
		h.free <- i
	}
	return h, nil
}

func (h *hostBackend) ring() int   { return cap(h.free) }
func (h *hostBackend) device() int { return -1 }

func (h *hostBackend) start(step int) {
	r := &hostRun{quit: make(chan struct{}), out: make(chan []delivery, cap(h.free))}
	h.cur = r
	h.claimMu.Lock()
	h.claimNext = step
	h.claimMu.Unlock()
	h.want = step
	r.wg.Add(1)
	go h.produce(r)
}

// produce reads the steps it claims, from the first not claimed yet to
// NumBatches, into free slots, in groups of consecutive steps, and hands
// each group to the consumer.
func (h *hostBackend) produce(r *hostRun) {
	defer r.wg.Done()
	if producerOff {
		return
	}
	for {
		var slot int
		select {
		case slot = <-h.free:
		default:
			// No slot free: sleep until a release kicks (see kick).
			select {
			case <-h.kick:
				continue
			case <-r.quit:
				return
			}
		}
		s, slots := h.claim([]int{slot})
		if len(slots) == 0 {
			return // every step is claimed
		}
		g := h.readGroup(s, slots, true)
		select {
		case r.out <- g:
		case <-r.quit:
			for _, d := range g {
				h.releaseSlot(d.slot)
			}
			return
		}
	}
}

// producerOff, set by tests, stops the producer at once, so that the
// consumer reads every group itself (steal).
var producerOff bool

// claim takes up to maxGroup free slots (slots holds at least one taken
// already, and no more are waited for) and claims as many steps from the
// first not claimed yet, returning the first and the slots to read them
// into; the slots it cannot use go back to the free list. With every step
// claimed it returns no slots.
func (h *hostBackend) claim(slots []int) (int, []int) {
	h.claimMu.Lock()
	defer h.claimMu.Unlock()
	return h.claimLocked(slots)
}

// claimLocked is claim with claimMu held.
func (h *hostBackend) claimLocked(slots []int) (int, []int) {
	s := h.claimNext
	left := h.l.steps - s
more:
	for len(slots) < min(h.maxGroup, left) {
		select {
		case slot := <-h.free:
			slots = append(slots, slot)
		default:
			break more
		}
	}
	n := max(0, min(len(slots), left))
	for _, slot := range slots[n:] {
		h.free <- slot
	}
	h.claimNext = s + n
	return s, slots[:n]
}

// readGroup fills slots with the blocks of the claimed steps s, s+1, ...
// (fillGroup), counting the read. A group that fails stops the run's
// reading: no step after it is claimed.
func (h *hostBackend) readGroup(s int, slots []int, producer bool) []delivery {
	t0 := time.Now()
	g := h.fillGroup(s, slots)
	took := int64(time.Since(t0))
	if producer {
		h.readNanos.Store(took)
	}
	h.readTotal.Add(took)
	if g[len(g)-1].err == nil {
		h.batches.Add(int64(len(g)))
	} else {
		h.batches.Add(int64(len(g) - 1))
		h.claimMu.Lock()
		h.claimNext = h.l.steps
		h.claimMu.Unlock()
	}
	return g
}

// steal reads the consumer's next steps itself when no group holding them
// is ready or being read (every step before want is delivered and want is
// not claimed) and a ring slot is free. That is when the reads are the
// slower side: the consumer would otherwise wait for the producer's next
// group, and the producer pay a wake-up to hand it over. ok is false when
// the consumer must wait for the producer instead.
func (h *hostBackend) steal() (g []delivery, ok bool) {
	h.claimMu.Lock()
	if h.claimNext != h.want || h.want >= h.l.steps {
		h.claimMu.Unlock()
		return nil, false
	}
	var slot int
	select {
	case slot = <-h.free:
	default:
		h.claimMu.Unlock()
		return nil, false
	}
	s, slots := h.claimLocked([]int{slot})
	h.claimMu.Unlock()
	return h.readGroup(s, slots, false), true
}

// release gives slot back to the free list, waking the producer when the
// consumer is parked or took kickGap or more over its batch (see kick).
func (h *hostBackend) release(slot int) {
	h.free <- slot
	if h.parked.Load() || time.Now().UnixNano()-h.handed.Load() >= int64(kickGap) {
		select {
		case h.kick <- struct{}{}:
		default:
		}
	}
}

// fillGroup fills slots with the blocks of steps s, s+1, ... and returns one
// delivery per step, in order. It stops at the first failing step: that
// delivery carries the error and no slot (-1), and the slots of it and of
// the steps after it go back to the free list.
func (h *hostBackend) fillGroup(s int, slots []int) []delivery {
	g := make([]delivery, len(slots))
	if !h.mapBlocks && len(slots) > 1 {
		dst := make([][]byte, len(slots))
		for i, slot := range slots {
			dst[i] = h.bufs[slot]
		}
		// On a read error fall through to one read per block, which names
		// the failing block as a single read would.
		if h.l.sh.ReadBlocks(s, dst) == nil {
			for i, slot := range slots {
				g[i] = delivery{step: s + i, slot: slot, host: dst[i]}
				if h.verify {
					if err := h.l.checkBlock(s+i, dst[i]); err != nil {
						return h.failAt(g, s, i, slots, h.l.blockError("verifying block", s+i, err))
					}
				}
			}
			return g
		}
	}
	for i, slot := range slots {
		block, err := h.fill(s+i, slot)
		if err != nil {
			return h.failAt(g, s, i, slots, err)
		}
		g[i] = delivery{step: s + i, slot: slot, host: block}
	}
	return g
}

// failAt ends group g (of steps s, s+1, ...) at index i with err, returning slots[i:] to the free
// list.
func (h *hostBackend) failAt(g []delivery, s, i int, slots []int, err error) []delivery {
	for _, slot := range slots[i:] {
		h.free <- slot
	}
	g[i] = delivery{step: s + i, slot: -1, err: err}
	return g[:i+1]
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
	if got := shardfmt.CRC32C(block[:info.Size]); got != info.CRC {
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
	if len(h.queue) == 0 {
		var g []delivery
		ok := false
		select {
		case g, ok = <-h.cur.out:
		default:
			g, ok = h.steal()
			if !ok {
				g, ok = h.receive()
			}
		}
		if !ok {
			return delivery{err: ErrClosed}
		}
		h.groupIDs(g)
		h.queue = g
	}
	d := h.queue[0]
	h.queue = h.queue[1:]
	h.want = d.step + 1
	h.handed.Store(time.Now().UnixNano())
	return d
}

// idsAhead bounds the bytes of sample id slots the consumer reads ahead
// with one positioned read (at least one batch's): a batch of small
// (jagged) blocks then costs no read of its own for its ids. Tests set it
// small to cross the read-ahead's edges.
var idsAhead = 128 << 10

// groupIDs gives each batch of group g (the deliveries without an error)
// its Count sample ids, copied into its slot's id buffer from the id slots
// read ahead, which it reads first, for the next idsAhead bytes of batches
// with one positioned read, when they do not hold the batch (each batch's
// checked against its CRC-32C). Where that read fails, the batches it
// covered are left to Loader.batch, which reads each batch's own ids and
// names the failing one.
func (h *hostBackend) groupIDs(g []delivery) {
	l := h.l
	b := l.geo.BatchSize
	for i := range g {
		d := &g[i]
		if d.err != nil || d.slot < 0 || (d.step >= h.badLo && d.step < h.badHi) {
			continue
		}
		if d.step < h.idLo || d.step >= h.idLo+h.idN {
			n := min(max(1, idsAhead/(8*max(b, 1))), l.steps-d.step)
			slots, err := l.sh.ReadSampleIDSlots(d.step, n, h.idSlots)
			if err != nil {
				h.idN, h.badLo, h.badHi = 0, d.step, d.step+n
				continue
			}
			h.idSlots, h.idLo, h.idN = slots, d.step, n
		}
		info, err := l.sh.Batch(d.step)
		if err != nil || info.Count < 0 || info.Count > b {
			continue
		}
		ids := h.ids[d.slot]
		if cap(ids) < b {
			ids = make([]uint64, b)
			h.ids[d.slot] = ids
		}
		d.ids = ids[:info.Count]
		at := (d.step - h.idLo) * b
		copy(d.ids, h.idSlots[at:at+info.Count])
	}
}

// receive waits for the current run's next group: polling first, for up
// to the producer's last group read time plus maxSpin when that read took
// no longer than maxSpinRead (maxSpin 0: never), then parked. ok is false
// once the run is stopped.
func (h *hostBackend) receive() (g []delivery, ok bool) {
	r := h.cur
	budget := time.Duration(-1) // park at once
	if read := time.Duration(h.readNanos.Load()); maxSpin > 0 && read <= maxSpinRead {
		budget = read + maxSpin
	}
	if budget >= 0 {
		var start time.Time
		for i := 0; ; i++ {
			select {
			case g := <-r.out:
				return g, true
			case <-r.quit:
				return nil, false
			default:
			}
			if i == 0 {
				start = time.Now()
			} else if time.Since(start) > budget {
				break
			}
			runtime.Gosched()
		}
	}
	// Parked, a release kicks the producer (see kick); a slot released
	// before parked was set is found by this last steal.
	h.parked.Store(true)
	defer h.parked.Store(false)
	if g, ok := h.steal(); ok {
		return g, true
	}
	select {
	case g := <-r.out:
		return g, true
	case <-r.quit:
		return nil, false
	}
}

// releaseSlot returns slot to the free list unless it is -1 (none).
func (h *hostBackend) releaseSlot(slot int) {
	if slot >= 0 {
		h.free <- slot
	}
}

func (h *hostBackend) stop() {
	r := h.cur
	if r == nil {
		return
	}
	h.cur = nil
	close(r.quit)
	r.wg.Wait()
	for _, d := range h.queue {
		h.releaseSlot(d.slot)
	}
	h.queue = nil
	for {
		select {
		case g := <-r.out:
			for _, d := range g {
				h.releaseSlot(d.slot)
			}
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
