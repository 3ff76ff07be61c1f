package feature

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/prepml/prep/internal/sysmem"
	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// Samples holds the expected bytes of some samples, as a shard would hold
// them: Data[t] is len(IDs) samples of tensor t back to back, each
// SampleBytes(Tensors[t]) bytes, little-endian, in the order of IDs. For a
// jagged tensor t (Tensors[t].Jagged), Data[t] is the samples' values back
// to back, each value SampleBytes(Tensors[t]) bytes, and Offsets[t] holds
// len(IDs)+1 value indices: sample i's values are values
// [Offsets[t][i], Offsets[t][i+1]) of Data[t] (Offsets[t] is nil for a
// fixed tensor).
type Samples struct {
	IDs     []uint64
	Tensors []shardfmt.TensorInfo // in shard table order
	Data    [][]byte
	Offsets [][]int64
}

// SampleBytes returns the bytes of one sample of t (dtype size times the
// product of its shape), or of one value of a jagged tensor.
func SampleBytes(t shardfmt.TensorInfo) int { return sampleBytes(t) }

// Sample returns tensor t's bytes of the i-th requested sample: for a
// jagged tensor its values, a variable number of them (len /
// SampleBytes(Tensors[t]), possibly none), little-endian, as the values
// rows [offsets[j], offsets[j+1]) of the sample's batch in a shard hold.
func (s *Samples) Sample(t, i int) []byte {
	n := sampleBytes(s.Tensors[t])
	if s.Tensors[t].Jagged {
		o := s.Offsets[t]
		return s.Data[t][o[i]*int64(n) : o[i+1]*int64(n)]
	}
	return s.Data[t][i*n : (i+1)*n]
}

// materializeFooters is the most estimated footer heap Materialize keeps
// held between opening the files and decoding (materializeFootersFor).
const materializeFooters = 64 << 20

// materializeFootersFor returns the estimated footer heap a
// materialization under lim keeps held between opening the files and
// decoding: half of lim.Memory (a quarter of a share of the limit whose
// other half decodes, as Budget.Footers is of a conversion's), at most
// materializeFooters. A fixed 64 MiB held eight footers of 5,000 columns
// (72 MB of heap) under verify --deep --memory-limit 32MiB.
func materializeFootersFor(lim Bounds) int64 {
	return min(materializeFooters, max(1, lim.memory()/2))
}

// Bounds are the memory bounds of a materialization.
type Bounds struct {
	// Memory bounds the decoded column chunks in flight, in bytes (<= 0:
	// 1 GiB): a row group over it is read in row windows.
	Memory int64
	// Run is the memory limit, in bytes, of the Run whose rows are to be
	// accepted (<= 0: Memory): a row of a jagged tensor may hold as many
	// values as Run under Options.MemoryLimit = Run accepts (a quarter of
	// it, at least 1 MiB, in values of the dtype), whatever Memory. A
	// checker decoding within a share of a user's limit sets Run to the
	// whole limit, so that it accepts every row convert accepted under it.
	Run int64
}

// Materialize decodes the given sample ids (any order, duplicates
// allowed) from the plan's source with the spec's transforms, exactly as
// convert writes them into shards, reading only the row groups that hold
// them, from st (nil: the local directory p.Source.Root): Compile under a
// Budget of lim.Run (footers held: half of lim.Memory, at most 64 MiB),
// then Program.Samples with the decoded column chunks in flight bounded
// by lim.Memory. Memory: twice
// the samples' bytes (staged, then copied out) plus about lim.Memory,
// plus the footers of the files read; jagged values are staged in
// anonymous memory sized by the footers' bound for the row groups read
// (arena.go), of which only the values written are touched. Errors: an id
// beyond the plan's samples, and those of Compile and Program.Decode, a
// jagged row over the row bound of lim.Run included.
func Materialize(ctx context.Context, st source.Store, p *plan.Plan, spec *Spec, ids []uint64, lim Bounds) (*Samples, error) {
	set, err := sampleSet(p, ids, false)
	if err != nil {
		return nil, err
	}
	prog, err := compileFor(ctx, st, p, spec, lim)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	return prog.samples(ctx, set, ids, lim.memory())
}

// Samples decodes ids (any order, duplicates allowed; each below the
// plan's samples) and copies them out in the order of ids, with memory
// bytes of decoded column chunks in flight (<= 0: DefaultMemoryLimit).
// Errors: those of Materialize after Compile.
func (pr *Program) Samples(ctx context.Context, ids []uint64, memory int64) (*Samples, error) {
	set, err := pr.sampleSet(ids, false)
	if err != nil {
		return nil, err
	}
	if memory <= 0 {
		memory = DefaultMemoryLimit
	}
	return pr.samples(ctx, set, ids, memory)
}

// samples decodes set (the ids, not sealed) and copies the samples out in
// the order of ids.
func (pr *Program) samples(ctx context.Context, set *IDSet, ids []uint64, memory int64) (_ *Samples, err error) {
	h, err := pr.hold(ctx, set, memory)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	tensors := h.tensors
	out := &Samples{IDs: append([]uint64(nil), ids...), Tensors: tensors, Data: make([][]byte, len(tensors)), Offsets: make([][]int64, len(tensors))}
	for t := range tensors {
		if tensors[t].Jagged {
			offs := make([]int64, len(ids)+1)
			n := int64(sampleBytes(tensors[t]))
			for i, id := range ids {
				b, err := h.sample(t, int(set.Rank(id)))
				if err != nil {
					return nil, err
				}
				offs[i+1] = offs[i] + int64(len(b))/n
			}
			d := make([]byte, 0, offs[len(ids)]*n)
			for _, id := range ids {
				b, _ := h.sample(t, int(set.Rank(id)))
				d = append(d, b...)
			}
			out.Data[t], out.Offsets[t] = d, offs
			continue
		}
		n := sampleBytes(tensors[t])
		d := make([]byte, len(ids)*n)
		for i, id := range ids {
			copy(d[i*n:], h.Sample(t, int(set.Rank(id))))
		}
		out.Data[t] = d
	}
	return out, nil
}

// sampleSet returns the set of ids (not sealed), covering only the range
// [min, max] of ids. Errors: an id beyond the plan's samples, and, when
// ascending is set, an id not above the one before it.
func sampleSet(p *plan.Plan, ids []uint64, ascending bool) (*IDSet, error) {
	return newSampleSet(p.NumSamples(), ids, ascending)
}

// sampleSet is sampleSet over the program's plan.
func (pr *Program) sampleSet(ids []uint64, ascending bool) (*IDSet, error) {
	return newSampleSet(pr.numSamples, ids, ascending)
}

// newSampleSet is sampleSet over n samples.
func newSampleSet(n uint64, ids []uint64, ascending bool) (*IDSet, error) {
	lo, hi := uint64(0), uint64(0)
	for i, id := range ids {
		if id >= n {
			return nil, &Error{RowGroup: -1, Row: -1, Element: -1, Err: ValueErrorf("sample id %d not in [0, %d)", id, n)}
		}
		if ascending && i > 0 && id <= ids[i-1] {
			return nil, fmt.Errorf("sample ids not ascending: %d after %d", id, ids[i-1])
		}
		if i == 0 || id < lo {
			lo = id
		}
		hi = max(hi, id+1)
	}
	set := newIDSetWithin(n, lo, hi)
	for _, id := range ids {
		set.Add(id)
	}
	return set, nil
}

// HeldSamples holds the expected bytes of some samples where decoding
// staged them, without copying them out (Hold): one staging
// record per sample in id order, the values of jagged tensors in the
// values arena. Close releases the memory; Sample's slices are then
// invalid.
type HeldSamples struct {
	tensors []shardfmt.TensorInfo
	n       int
	recs    *Records
	anon    []byte // the records' anonymous mapping; nil when on the heap
	ar      *Arena
	cnt     []int // per tensor: sampleBytes

	// rowGroupsRead and rowGroupsSkipped are the decoder's counts: row
	// groups read, and non-empty row groups without a wanted sample.
	rowGroupsRead, rowGroupsSkipped int
}

// Tensors returns the tensors the spec yields, in shard table order.
func (h *HeldSamples) Tensors() []shardfmt.TensorInfo { return h.tensors }

// Len returns the number of samples held.
func (h *HeldSamples) Len() int { return h.n }

// Sample returns tensor t's bytes of the i-th sample held (ids in
// ascending order), as Samples.Sample gives them: SampleBytes(Tensors()[t])
// bytes, little-endian, for a fixed-shape tensor; for a jagged tensor its
// values, a whole number of SampleBytes-byte values (none for an empty
// list). The slice aliases h's memory, valid until Close. A jagged
// reference outside the values arena (an internal fault, never
// expected) gives nil, which no non-empty list equals.
func (h *HeldSamples) Sample(t, i int) []byte {
	b, _ := h.sample(t, i)
	return b
}

// sample is Sample with the fault of a reference outside the arena.
func (h *HeldSamples) sample(t, i int) ([]byte, error) {
	b := h.recs.At(t, int64(i))
	if !h.tensors[t].Jagged {
		return b, nil
	}
	off := binary.LittleEndian.Uint64(b)
	n := binary.LittleEndian.Uint64(b[8:]) * uint64(h.cnt[t])
	if n == 0 {
		return []byte{}, nil
	}
	if h.ar == nil || off > uint64(len(h.ar.mem)) || n > uint64(len(h.ar.mem))-off {
		return nil, fmt.Errorf("%w: values arena read of %d bytes at %d beyond its %d bytes", ErrInternal, n, off, len(h.ar.mem))
	}
	return h.ar.mem[off : off+n : off+n], nil
}

// Close releases the samples' memory. It is safe to call more than once.
func (h *HeldSamples) Close() {
	if h == nil {
		return
	}
	if h.anon != nil {
		sysmem.UnmapAnon(h.anon)
		h.anon = nil
	}
	h.ar.Close()
	h.recs, h.ar = nil, nil
}

// Hold decodes the sample ids (ascending, no duplicates) like
// Materialize and keeps them where decoding staged them: sample i of the
// result is ids[i]. It reads only the row groups holding one of ids, each
// once, and its id set covers [ids[0], ids[len-1]] only (2 bits per id of
// that range). Memory: the samples' staging records (SampleBytes per
// fixed tensor, 16 bytes per jagged one) and jagged values, in anonymous
// memory returned to the system by Close, plus about lim.Memory while
// decoding (<= 0: DefaultMemoryLimit), plus the footers of the files
// read. Errors: ids not ascending or beyond the plan's samples, and those
// of Materialize.
func Hold(ctx context.Context, st source.Store, p *plan.Plan, spec *Spec, ids []uint64, lim Bounds) (*HeldSamples, error) {
	set, err := sampleSet(p, ids, true)
	if err != nil {
		return nil, err
	}
	prog, err := compileFor(ctx, st, p, spec, lim)
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	return prog.hold(ctx, set, lim.memory())
}

// Hold is the function Hold over the program: ids ascending and unique,
// memory bytes of decoded column chunks in flight (<= 0:
// DefaultMemoryLimit).
func (pr *Program) Hold(ctx context.Context, ids []uint64, memory int64) (*HeldSamples, error) {
	set, err := pr.sampleSet(ids, true)
	if err != nil {
		return nil, err
	}
	if memory <= 0 {
		memory = DefaultMemoryLimit
	}
	return pr.hold(ctx, set, memory)
}

// compileFor compiles spec for a materialization under lim: rows bounded
// as a run under lim.Run (<= 0: lim.Memory) bounds them, footers held
// within materializeFootersFor(lim).
func compileFor(ctx context.Context, st source.Store, p *plan.Plan, spec *Spec, lim Bounds) (*Program, error) {
	return Compile(ctx, p, st, spec, Budget{Limit: lim.run(), Footers: materializeFootersFor(lim)})
}

// memory returns the decoding bound, DefaultMemoryLimit when unset.
func (b Bounds) memory() int64 {
	if b.Memory <= 0 {
		return DefaultMemoryLimit
	}
	return b.Memory
}

// run returns the row bounds' memory limit: Run, else memory().
func (b Bounds) run() int64 {
	if b.Run <= 0 {
		return b.memory()
	}
	return b.Run
}

// hold decodes the members of set (not sealed) into staging records in
// rank order, kept in a HeldSamples, with memory bytes of decoded column
// chunks in flight.
func (pr *Program) hold(ctx context.Context, set *IDSet, memory int64) (_ *HeldSamples, err error) {
	tensors := pr.tensors
	set.Seal()
	h := &HeldSamples{tensors: tensors, n: int(set.count)}
	for _, t := range tensors {
		h.cnt = append(h.cnt, sampleBytes(t))
	}
	defer func() {
		if err != nil {
			h.Close()
		}
	}()
	size := int64(set.count) * int64(RecordSize(tensors))
	var data []byte
	if size > 0 && sysmem.AnonSupported {
		var ok bool
		if data, h.anon, ok = sysmem.MapAnon(size); !ok {
			data = nil
		}
	}
	if data == nil {
		data = make([]byte, size)
	}
	h.recs = NewRecords(tensors, data)
	ar := pr.NewArena(set)
	if ar != nil {
		if ar.size > 0 {
			mem, whole, ok := sysmem.MapAnon(ar.size)
			if !ok {
				return nil, fmt.Errorf("mapping %d bytes for jagged values: out of memory", ar.size)
			}
			ar.mem, ar.anon = mem, whole
		}
		h.ar = ar
	}
	ds, err := pr.Decode(ctx, set, Target{Records: h.recs, Sink: func() RecordSink { return memSink{h.recs} }, Arena: ar}, runtime.GOMAXPROCS(0), memory, nil)
	if err != nil {
		return nil, err
	}
	h.rowGroupsRead, h.rowGroupsSkipped = ds.RowGroupsRead, ds.RowGroupsSkipped
	return h, nil
}
