package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
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

// materializeFooters is the estimated footer heap Materialize keeps held
// between opening the files and decoding.
const materializeFooters = 64 << 20

// Materialize decodes the given sample ids from the plan's source with the
// spec's transforms, exactly as Run writes them into shards, reading only the
// row groups that hold them. It checks the source against the plan first.
// It is MaterializeWithin under a 1 GiB memory limit.
func Materialize(ctx context.Context, p *plan.Plan, spec *Spec, ids []uint64) (*Samples, error) {
	return MaterializeWithin(ctx, p, spec, ids, 0)
}

// MaterializeWithin is Materialize with the decoded column chunks in
// flight bounded by memoryLimit bytes (<= 0: 1 GiB), as Run bounds them
// under Options.MemoryLimit: a row group over the limit is read in row
// windows. Memory: twice the samples' bytes (staged, then copied out) plus
// about memoryLimit, plus the footers of the files read; jagged values are
// staged in anonymous memory sized by the footers' bound for the row
// groups read (arena.go), of which only the values written are touched.
// Errors are those of Run's checks and stage 1, a jagged row over the
// limit of Run under memoryLimit included.
func MaterializeWithin(ctx context.Context, p *plan.Plan, spec *Spec, ids []uint64, memoryLimit int64) (*Samples, error) {
	return MaterializeFrom(ctx, nil, p, spec, ids, memoryLimit)
}

// MaterializeFrom is MaterializeWithin reading the plan's files from st
// (nil: the local directory p.Source.Root), as Options.Source does for Run.
func MaterializeFrom(ctx context.Context, st source.Store, p *plan.Plan, spec *Spec, ids []uint64, memoryLimit int64) (_ *Samples, err error) {
	if memoryLimit <= 0 {
		memoryLimit = 1 << 30
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	files, plans, err := openForSpec(ctx, p, st, spec, rowSlotLimit(spec, pqread.Limits{}, memoryLimit), materializeFooters)
	if err != nil {
		return nil, err
	}
	defer closeSources(files)
	defer relativeNames(&err, files)
	tensors := outputs(plans)
	set := newIDSet(p.NumSamples())
	for _, id := range ids {
		if id >= p.NumSamples() {
			return nil, &Error{RowGroup: -1, Row: -1, Element: -1, Err: valueErrorf("sample id %d not in [0, %d)", id, p.NumSamples())}
		}
		set.add(id)
	}
	set.seal()
	staged := newRecords(tensors, make([]byte, int(set.count)*recordSize(tensors)))
	setRowLimit(plans, memoryLimit)
	ar := newArena(files, plans, tensors, set)
	if ar != nil {
		if ar.size > 0 {
			data, whole, ok := mapAnon(ar.size)
			if !ok {
				return nil, fmt.Errorf("mapping %d bytes for jagged values: out of memory", ar.size)
			}
			ar.mem, ar.anon = data, whole
		}
		defer ar.close()
	}
	dec := &decoder{files: files, plans: plans, set: set, bufs: staged, sink: func() recordSink { return memSink{staged} }, arena: ar, jobs: runtime.GOMAXPROCS(0), memoryLimit: memoryLimit}
	if err := dec.run(ctx); err != nil {
		return nil, err
	}
	out := &Samples{IDs: append([]uint64(nil), ids...), Tensors: tensors, Data: make([][]byte, len(tensors)), Offsets: make([][]int64, len(tensors))}
	for t := range tensors {
		n := sampleBytes(tensors[t])
		if tensors[t].Jagged {
			offs := make([]int64, len(ids)+1)
			for i, id := range ids {
				offs[i+1] = offs[i] + int64(binary.LittleEndian.Uint64(staged.at(t, int64(set.rank(id)))[8:]))
			}
			d := make([]byte, offs[len(ids)]*int64(n))
			for i, id := range ids {
				ref := staged.at(t, int64(set.rank(id)))
				if err := ar.readAt(d[offs[i]*int64(n):offs[i+1]*int64(n)], int64(binary.LittleEndian.Uint64(ref))); err != nil {
					return nil, err
				}
			}
			out.Data[t], out.Offsets[t] = d, offs
			continue
		}
		d := make([]byte, len(ids)*n)
		for i, id := range ids {
			copy(d[i*n:], staged.at(t, int64(set.rank(id))))
		}
		out.Data[t] = d
	}
	return out, nil
}
