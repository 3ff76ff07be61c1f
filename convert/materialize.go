package convert

import (
	"context"
	"runtime"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
	"github.com/prepml/prep/shardfmt"
	"github.com/prepml/prep/source"
)

// Samples holds the expected bytes of some samples, as a shard would hold
// them: Data[t] is len(IDs) samples of tensor t back to back, each
// SampleBytes(Tensors[t]) bytes, little-endian, in the order of IDs.
type Samples struct {
	IDs     []uint64
	Tensors []shardfmt.TensorInfo // in shard table order
	Data    [][]byte
}

// SampleBytes returns the bytes of one sample of t (dtype size times the
// product of its shape).
func SampleBytes(t shardfmt.TensorInfo) int { return sampleBytes(t) }

// Sample returns tensor t's bytes of the i-th requested sample.
func (s *Samples) Sample(t, i int) []byte {
	n := sampleBytes(s.Tensors[t])
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
// about memoryLimit, plus the footers of the files read. Errors are those
// of Run's checks and stage 1.
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
	files, plans, err := openForSpec(ctx, p, st, spec, pqread.Limits{}, materializeFooters)
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
	dec := &decoder{files: files, plans: plans, set: set, bufs: staged, sink: func() recordSink { return memSink{staged} }, jobs: runtime.GOMAXPROCS(0), memoryLimit: memoryLimit}
	if err := dec.run(ctx); err != nil {
		return nil, err
	}
	out := &Samples{IDs: append([]uint64(nil), ids...), Tensors: tensors, Data: make([][]byte, len(tensors))}
	for t := range tensors {
		n := sampleBytes(tensors[t])
		d := make([]byte, len(ids)*n)
		for i, id := range ids {
			copy(d[i*n:], staged.at(t, int64(set.rank(id))))
		}
		out.Data[t] = d
	}
	return out, nil
}
