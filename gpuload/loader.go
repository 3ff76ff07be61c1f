package gpuload

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/shardset"
)

// Backend names accepted in Options.Backend.
const (
	BackendHost = "host"
	BackendCUDA = "cuda"
)

// DefaultPrefetch is the prefetch depth used when Options.Prefetch is 0.
const DefaultPrefetch = 4

// MaxPrefetch bounds Options.Prefetch: the ring allocates Prefetch+1 batch
// blocks (pinned on cuda) at Open, so a larger value is refused with
// ErrInvalid rather than exhausting memory.
const MaxPrefetch = 1024

// Options select the backend and pipeline of a Loader. The zero value reads
// on the host backend from step 0 with DefaultPrefetch.
type Options struct {
	// Backend is "host" (default when empty) or "cuda".
	Backend string
	// Device is the CUDA device ordinal (cuda backend only).
	Device int
	// Prefetch is how many batches are prepared ahead of the consumer
	// (default DefaultPrefetch, at most MaxPrefetch). The ring holds
	// Prefetch+1 batches (at least 3 pinned host slots on cuda).
	Prefetch int
	// StartStep is the first step delivered (resume); 0 <= StartStep <= Steps.
	StartStep int
	// VerifyChecksums checks each block's CRC-32C against the batch table as
	// it is read, failing Next with ErrChecksum on a mismatch.
	VerifyChecksums bool
	// PlanFingerprint, if set, must equal the plan fingerprint recorded in
	// the manifest and in the shard, else Open fails with ErrPlanMismatch.
	PlanFingerprint string
	// RegisterMmap (cuda only) registers the mapped shard read-only with the
	// driver and copies to the device straight from it, skipping the pinned
	// ring. It pins the whole shard in memory at Open. Where the shard could
	// not be mapped (the shard reader then reads with pread), the pinned ring
	// is used instead. A shard cut short after Open does not fault: blocks
	// are copied from the pages pinned at Open, and a step whose sample ids
	// were cut off fails Next (wrapping shardfmt.ErrSize).
	RegisterMmap bool
	// CUDAPath (cuda only) chooses how blocks reach the device: one of the
	// CUDAPath* constants (cudapath.go). Empty means $PREP_CUDA_PATH, else
	// CUDAPathAuto, which picks per shard at Open; RegisterMmap is
	// CUDAPathRegister. Loader.TransferStats reports the path in use.
	CUDAPath string
	// MapBlocks (host only) hands out read-only views of the mapped shard
	// instead of copies in ring buffers. A view faults if the file is
	// truncated while mapped (SIGBUS); pread reports an error instead.
	MapBlocks bool
}

// shard is what the loader uses of a shard file; *shardfmt.Reader has it.
type shard interface {
	Provenance() shardfmt.Provenance
	Tensors() []shardfmt.TensorInfo
	Geometry() shardfmt.Geometry
	NumBatches() int
	Batch(k int) (shardfmt.BatchInfo, error)
	SampleIDs(k int) ([]uint64, error)
	ReadSampleIDs(k int, dst []uint64) ([]uint64, error)
	// ReadSampleIDSlots reads the BatchSize id slots of batches k..k+n-1
	// with one positioned read into dst (grown when short), each batch
	// checked against its CRC-32C.
	ReadSampleIDSlots(k, n int, dst []uint64) ([]uint64, error)
	// Mapped reports whether Block returns views of a mapping of the file
	// (else each call returns a fresh heap copy).
	Mapped() bool
	Block(k int) ([]byte, error)
	ReadBlock(k int, dst []byte) error
	ReadBlocks(k int, dst [][]byte) error
	// Jagged checks and locates jagged tensor i's values and offsets in
	// step k's block.
	Jagged(k int, block []byte, i int) (shardfmt.JaggedSlab, error)
	Close() error
}

// Tensor is one tensor of a batch: a C-contiguous [Count, shape...] array.
//
// A jagged tensor (Jagged) is instead the batch's values, a C-contiguous
// [N, per-value shape...] array (N values in all, varying by batch), with
// Offsets saying which rows belong to which sample; both lie in the batch's
// one block.
type Tensor struct {
	Name  string
	DType shardfmt.DType
	// Shape is [Count, per-sample shape...]; [N, per-value shape...] for a
	// jagged tensor.
	Shape []int64
	// Strides are C-contiguous strides in elements (DLPack convention), one
	// per dimension.
	Strides []int64
	// Ptr is the address of the first element: host memory on the host
	// backend, a CUdeviceptr on cuda. Valid until the batch is released.
	Ptr uintptr
	// Bytes is the tensor's Count*sample-size bytes (host backend only; nil
	// on cuda). Valid until the batch is released; do not write to it.
	Bytes []byte
	// Jagged is true for a jagged tensor.
	Jagged bool
	// Offsets, for a jagged tensor, is its row offsets: an I64 tensor of
	// Shape [Count+1] (little-endian int64, 8-byte aligned), sample j's
	// values being rows [Offsets[j], Offsets[j+1]) of this tensor; the first
	// is 0 and the last N. The loader checks them (0, never decreasing,
	// ending at N) before it delivers the batch. Its Name is the tensor's.
	// Nil for a fixed-shape tensor.
	Offsets *Tensor
}

// Batch is one step's batch. Its memory stays valid until Release (see the
// package doc for lifetimes).
type Batch struct {
	Step  int // index of the batch within the shard (the rank's step)
	Count int // samples present, real and pad, <= the per-rank batch size
	Pads  int // trailing pad samples among Count
	// Device is the CUDA device ordinal holding the tensors, or -1 for host
	// memory.
	Device int
	// SampleIDs holds the global sample id (source row index) of each of the
	// Count samples.
	SampleIDs []uint64
	Tensors   []Tensor

	l        *Loader
	slot     int
	size     uint64 // bytes of the step's block (BatchInfo.Size)
	released atomic.Bool
}

// BlockBytes returns the bytes of this step's block that the reader read:
// the shard's block size (Geometry.BlockSize) in a shard without jagged
// tensors, the step's own block size from the shard's batch table
// (shardfmt.BatchInfo.Size, at most BlockSize) in one with them. 0 for a
// batch an Elastic reader slices or joins (it read no block of its own).
func (b *Batch) BlockBytes() int64 { return int64(b.size) }

// PadFlags returns Count flags, true for the trailing Pads pad samples
// (repeats filled in by the plan's "pad" remainder policy, to be masked out).
func (b *Batch) PadFlags() []bool {
	f := make([]bool, b.Count)
	for i := b.Count - b.Pads; i < b.Count; i++ {
		f[i] = true
	}
	return f
}

// Tensor returns the tensor with the given name, or nil.
func (b *Batch) Tensor(name string) *Tensor {
	for i := range b.Tensors {
		if b.Tensors[i].Name == name {
			return &b.Tensors[i]
		}
	}
	return nil
}

// Release gives the batch's buffer back to the ring. It is idempotent and
// safe from any goroutine; after Close it does nothing.
func (b *Batch) Release() {
	if b == nil || b.l == nil || !b.released.CompareAndSwap(false, true) {
		return
	}
	b.l.release(b.slot)
}

// delivery is one batch ready for the consumer: ring slot and step, or the
// error that stopped the pipeline.
type delivery struct {
	step int
	slot int
	host []byte // the block in host memory (host backend), else nil
	// ids, when not nil, are the batch's Count sample ids, already read
	// and checked against their CRC-32C by the backend (host backend: read
	// ahead for many batches at once), in memory of the delivery's slot;
	// nil leaves them to Loader.batch.
	ids []uint64
	dev uintptr // the block's device address (cuda backend)
	// jag locates each jagged tensor's values and offsets in the block,
	// checked on a host copy before it went to the device (cuda backend,
	// shards with jagged tensors), indexed by tensor; nil otherwise.
	jag []jaggedAt
	err error
}

// jaggedAt is where a jagged tensor's part of one block lies: its values
// count and the block offsets of its values and offsets slabs.
type jaggedAt struct{ n, valuesAt, offsetsAt uint64 }

// backend moves blocks from a shard into consumer-visible memory.
type backend interface {
	// ring is the number of batch buffers; at most ring batches are held.
	ring() int
	// start begins delivering steps [step, NumBatches) in order.
	start(step int)
	// next waits for the next delivery of the current run.
	next() delivery
	// release returns a slot given out by next.
	release(slot int)
	// stop ends the current run and reclaims its undelivered slots.
	stop()
	// close stops and frees everything; no slot may be used afterwards.
	close() error
	// device is the CUDA ordinal, or -1 for host memory.
	device() int
}

// Loader delivers the batches of one (epoch, rank) shard in step order.
type Loader struct {
	path  string
	epoch int
	rank  int
	sh    shard
	geo   shardfmt.Geometry
	tinfo []shardfmt.TensorInfo
	be    backend
	steps int

	step int   // next step Next delivers
	err  error // sticky pipeline error, cleared by Seek
	held atomic.Int64

	mu     sync.Mutex // guards closed against Release
	closed bool

	slots []slotMeta // per ring slot, reused by every batch delivered in it
}

// slotMeta is the Go memory a Batch in one ring slot points to: its sample
// ids and its tensor descriptors. Reusing it per slot keeps Next free of
// per-batch allocations beyond the Batch itself; like the block, it stays
// unchanged until the batch is released.
type slotMeta struct {
	ids     []uint64
	tensors []Tensor
}

// Open opens the shard of (epoch, rank) in the shard set dir (a directory
// holding manifest.json) and starts delivering from opts.StartStep.
//
// It checks, before mapping anything, that the shard file's size equals the
// manifest's (a truncated shard fails here, naming expected and actual
// size, ErrCorrupt), then that the shard's provenance, batch count and tensor table
// agree with the manifest and opts.PlanFingerprint (ErrPlanMismatch). It
// returns ErrNoShardSet when dir or its manifest is missing, ErrOutsidePlan
// when epoch or rank is outside the plan, ErrNoShard when the shard is in
// the plan but not in this shard set (or its file is missing), and
// ErrCUDAUnavailable or a *CUDAError when the cuda backend cannot start.
func Open(dir string, epoch, rank int, opts Options) (*Loader, error) {
	// The shard set (shardset) follows no symbolic link inside the set and
	// makes every check against the manifest before the file is mapped.
	set, err := shardset.Open(dir)
	if err != nil {
		return nil, setOpenError(dir, err)
	}
	defer set.Close()
	where := func(path string, err error) error {
		return &Error{Op: "opening shard", Path: path, Epoch: epoch, Rank: rank, Step: -1, Offset: -1, Err: err}
	}
	ent, ok := set.Entry(epoch, rank)
	if !ok {
		return nil, where(dir, missingShard(set, epoch, rank))
	}
	path := set.Path(ent.Path)
	if m := set.Manifest(); opts.PlanFingerprint != "" && opts.PlanFingerprint != m.PlanFingerprint {
		return nil, where(path, fmt.Errorf("%w: manifest plan fingerprint %s, want %s", ErrPlanMismatch, m.PlanFingerprint, opts.PlanFingerprint))
	}
	r, _, err := set.Shard(epoch, rank, true)
	switch {
	case errors.Is(err, shardset.ErrNoShard):
		return nil, where(path, fmt.Errorf("%w: %w", ErrNoShard, err))
	case errors.Is(err, shardset.ErrDamaged), errors.Is(err, shardset.ErrUnsafe):
		return nil, where(path, also(ErrCorrupt, err))
	case errors.Is(err, shardset.ErrMismatch):
		return nil, where(path, fmt.Errorf("%w: %w", ErrPlanMismatch, err))
	case err != nil:
		return nil, where(path, err)
	}
	l, err := newLoader(r, path, epoch, rank, opts)
	if err != nil {
		r.Close()
		return nil, err
	}
	return l, nil
}

// newLoader starts a backend over an opened shard. On error the caller
// still owns sh.
func newLoader(sh shard, path string, epoch, rank int, opts Options) (*Loader, error) {
	l := &Loader{path: path, epoch: epoch, rank: rank, sh: sh, geo: sh.Geometry(), tinfo: sh.Tensors(), steps: sh.NumBatches()}
	fail := func(err error) error {
		return &Error{Op: "starting " + opts.Backend + " backend", Path: path, Epoch: epoch, Rank: rank, Step: -1, Offset: -1, Err: err}
	}
	if opts.StartStep < 0 || opts.StartStep > l.steps {
		return nil, fail(fmt.Errorf("%w: start step %d outside [0, %d]", ErrInvalid, opts.StartStep, l.steps))
	}
	if opts.Prefetch < 0 {
		return nil, fail(fmt.Errorf("%w: prefetch %d is negative", ErrInvalid, opts.Prefetch))
	}
	if opts.Prefetch > MaxPrefetch {
		return nil, fail(fmt.Errorf("%w: prefetch %d exceeds %d batches", ErrInvalid, opts.Prefetch, MaxPrefetch))
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = DefaultPrefetch
	}
	if len(l.geo.SlabOffset) != len(l.tinfo) || len(l.geo.SampleBytes) != len(l.tinfo) {
		return nil, fail(fmt.Errorf("geometry describes %d tensors, table has %d", len(l.geo.SlabOffset), len(l.tinfo)))
	}
	var err error
	switch opts.Backend {
	case "", BackendHost:
		opts.Backend = BackendHost
		l.be, err = newHostBackend(l, opts)
	case BackendCUDA:
		l.be, err = newCUDABackend(l, opts)
	default:
		return nil, fail(fmt.Errorf("%w: unknown backend %q (want host or cuda)", ErrInvalid, opts.Backend))
	}
	if err != nil {
		return nil, fail(err)
	}
	l.step = opts.StartStep
	l.be.start(l.step)
	return l, nil
}

// Steps returns the number of batches (steps) in the shard.
func (l *Loader) Steps() int { return l.steps }

// Ring returns how many batches may be held unreleased at once.
func (l *Loader) Ring() int { return l.be.ring() }

// Tensors returns the shard's tensor table (name, dtype, per-sample shape).
func (l *Loader) Tensors() []shardfmt.TensorInfo { return l.tinfo }

// Geometry returns the shard's batch block geometry (BlockSize is the
// largest block when the shard has jagged tensors).
func (l *Loader) Geometry() shardfmt.Geometry { return l.geo }

// Provenance returns the plan and spec identity recorded in the shard.
func (l *Loader) Provenance() shardfmt.Provenance { return l.sh.Provenance() }

// Next returns the next batch in step order, io.EOF after the last one,
// ErrRingFull when every ring buffer is held by an unreleased batch, or the
// error that stopped the pipeline (sticky until Seek).
func (l *Loader) Next() (*Batch, error) {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if l.err != nil {
		return nil, l.err
	}
	if l.step >= l.steps {
		return nil, io.EOF
	}
	if l.held.Load() >= int64(l.be.ring()) {
		return nil, &Error{Op: "next batch", Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: l.step, Offset: -1, Err: fmt.Errorf("%w (ring of %d)", ErrRingFull, l.be.ring())}
	}
	d := l.be.next()
	if d.err == nil && d.step != l.step {
		d.err = fmt.Errorf("pipeline delivered step %d, want %d", d.step, l.step)
	}
	if d.err != nil {
		l.err = d.err
		return nil, d.err
	}
	b, err := l.batch(d)
	if err != nil {
		l.be.release(d.slot)
		l.err = err
		return nil, err
	}
	l.held.Add(1)
	l.step++
	return b, nil
}

// batch describes delivery d as a Batch.
func (l *Loader) batch(d delivery) (*Batch, error) {
	if l.slots == nil {
		l.slots = make([]slotMeta, l.be.ring())
	}
	sm := &l.slots[d.slot]
	info, err := l.sh.Batch(d.step)
	if err == nil && (info.Count < 0 || info.Count > l.geo.BatchSize || info.Pads < 0 || info.Pads > info.Count) {
		err = fmt.Errorf("batch table entry count %d pads %d outside batch size %d", info.Count, info.Pads, l.geo.BatchSize)
	}
	ids := d.ids
	if err == nil && (ids == nil || len(ids) != info.Count) {
		ids, err = l.sh.ReadSampleIDs(d.step, sm.ids)
		sm.ids = ids
	}
	if err != nil {
		return nil, &Error{Op: "reading batch table", Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: d.step, Offset: -1, Err: err}
	}
	if sm.tensors == nil {
		sm.tensors = l.newTensors()
	}
	b := &Batch{Step: d.step, Count: info.Count, Pads: info.Pads, Device: l.be.device(), SampleIDs: ids, Tensors: sm.tensors, l: l, slot: d.slot, size: info.Size}
	for i := range b.Tensors {
		t := &b.Tensors[i]
		if t.Jagged {
			if err := l.jagged(t, d, i, info.Count); err != nil {
				return nil, err
			}
			continue
		}
		off := l.geo.SlabOffset[i]
		n := uint64(info.Count) * l.geo.SampleBytes[i]
		t.Shape[0] = int64(info.Count)
		if d.host != nil {
			t.Bytes = d.host[off : off+n : off+n]
			t.Ptr = addr(d.host) + uintptr(off)
		} else {
			t.Bytes = nil
			t.Ptr = d.dev + uintptr(off)
		}
	}
	return b, nil
}

// jagged fills in jagged tensor t (tensor i) of delivery d, a batch of
// count samples, after checking its offsets (host backend) or from where
// the backend found them when it checked them (cuda).
func (l *Loader) jagged(t *Tensor, d delivery, i, count int) error {
	o := t.Offsets
	o.Shape[0] = int64(count + 1)
	if d.host == nil {
		if d.jag == nil {
			return &Error{Op: "reading jagged tensor " + t.Name, Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: d.step, Offset: -1,
				Err: fmt.Errorf("%w: the block's jagged offsets were not checked on the host", ErrInvalid)}
		}
		at := d.jag[i]
		t.Shape[0] = int64(at.n)
		t.Bytes, t.Ptr = nil, d.dev+uintptr(at.valuesAt)
		o.Bytes, o.Ptr = nil, d.dev+uintptr(at.offsetsAt)
		return nil
	}
	s, err := l.sh.Jagged(d.step, d.host, i)
	if err != nil {
		return l.jaggedError(d.step, i, err)
	}
	t.Shape[0] = int64(s.N)
	t.Bytes, t.Ptr = s.Values, addr(d.host)+uintptr(s.ValuesAt)
	o.Bytes, o.Ptr = s.Offsets, addr(d.host)+uintptr(s.OffsetsAt)
	return nil
}

// jaggedError is the error of jagged tensor i's part of step s's block.
func (l *Loader) jaggedError(s, i int, err error) error {
	return &Error{Op: "reading jagged tensor " + l.tinfo[i].Name, Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: s, Offset: -1,
		Err: fmt.Errorf("%w: %w", ErrCorrupt, err)}
}

// checkJagged checks the offsets of every jagged tensor in step s's block,
// a host copy of it (a pinned slot or the mapping), and returns where each
// one's values and offsets lie (nil for a shard without jagged tensors). A
// memory fault reading a mapped block is an error wrapping ErrCorrupt.
func (l *Loader) checkJagged(s int, block []byte) (at []jaggedAt, err error) {
	if !l.geo.HasJagged() {
		return nil, nil
	}
	defer func() {
		if e := (*Error)(nil); err != nil && !errors.As(err, &e) {
			err = l.blockError("checking jagged offsets", s, err) // a memory fault
		}
	}()
	defer faultGuard(&err)()
	at = make([]jaggedAt, len(l.tinfo))
	for i := range l.tinfo {
		if !l.geo.IsJagged(i) {
			continue
		}
		js, err := l.sh.Jagged(s, block, i)
		if err != nil {
			return nil, l.jaggedError(s, i, err)
		}
		at[i] = jaggedAt{n: js.N, valuesAt: js.ValuesAt, offsetsAt: js.OffsetsAt}
	}
	return at, nil
}

// newTensors returns the shard's tensor descriptors with Shape[0] (the
// count) left to fill in: names, dtypes, per-sample shapes and C-contiguous
// strides, which no batch changes. Shapes and strides share one allocation.
func (l *Loader) newTensors() []Tensor {
	ts := make([]Tensor, len(l.tinfo))
	dims := 0
	for _, ti := range l.tinfo {
		dims += 1 + len(ti.Shape)
	}
	mem := make([]int64, 2*dims)
	for i, ti := range l.tinfo {
		nd := 1 + len(ti.Shape)
		t := Tensor{Name: ti.Name, DType: ti.DType, Jagged: ti.Jagged}
		if ti.Jagged {
			t.Offsets = &Tensor{Name: ti.Name, DType: shardfmt.I64, Shape: []int64{0}, Strides: []int64{1}}
		}
		t.Shape, mem = mem[:nd:nd], mem[nd:]
		t.Strides, mem = mem[:nd:nd], mem[nd:]
		for j, s := range ti.Shape {
			t.Shape[j+1] = int64(s)
		}
		stride := int64(1)
		for j := nd - 1; j >= 0; j-- {
			t.Strides[j] = stride
			stride *= t.Shape[j]
		}
		ts[i] = t
	}
	return ts
}

// release is Batch.Release's half on the loader side.
func (l *Loader) release(slot int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.held.Add(-1)
	l.be.release(slot)
}

// Seek makes step the next one Next delivers (0 <= step <= Steps), dropping
// batches prepared ahead and clearing a sticky error. Batches already
// returned stay valid until released.
func (l *Loader) Seek(step int) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if step < 0 || step > l.steps {
		return &Error{Op: "seeking", Path: l.path, Epoch: l.epoch, Rank: l.rank, Step: step, Offset: -1, Err: fmt.Errorf("%w: step outside [0, %d]", ErrInvalid, l.steps)}
	}
	l.be.stop()
	l.err = nil
	l.step = step
	l.be.start(step)
	return nil
}

// Close stops the pipeline, frees every buffer (host, pinned and device) and
// unmaps the shard. All batches become invalid. Close is idempotent.
func (l *Loader) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.be.close()
	if e := l.sh.Close(); err == nil {
		err = e
	}
	return err
}

// Size returns the tensor's size in bytes (product of Shape times the dtype
// size).
func (t *Tensor) Size() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// CopyToHost copies tensor t of a batch that is not yet released into
// dst[:t.Size()]: a device-to-host copy on the cuda backend, a plain copy on
// host. It is for checks and debugging, not the training hot path. After
// Close it returns ErrClosed (the batch's memory is gone).
func (l *Loader) CopyToHost(dst []byte, t *Tensor) error {
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	n := t.Size()
	if int64(len(dst)) < n {
		return fmt.Errorf("copying %s to host: buffer of %d bytes, tensor is %d", t.Name, len(dst), n)
	}
	if t.Bytes != nil || n == 0 {
		copy(dst, t.Bytes)
		return nil
	}
	c, ok := l.be.(*cudaBackend)
	if !ok {
		return fmt.Errorf("copying %s to host: tensor has no host bytes", t.Name)
	}
	return c.copyToHost(dst[:n], t.Ptr)
}
