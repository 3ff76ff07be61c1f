package gpuload

import (
	"errors"
	"fmt"

	"github.com/prepml/prep/shardset"
)

// Elastic reads a shard set written for its plan's world size R as one rank
// of another world size R' that divides the plan's global batch G: rank r'
// of R' takes slots [r'·G/R', (r'+1)·G/R') of every global batch (plan/PLAN.md
// §6), which are rows of the R-rank shards of the same step. So each batch
// is exactly the one a plan made for R' would give, and a resume cursor
// (step) carries over, since steps are global. With R' = kR a batch is a
// contiguous sub-range of one shard batch, handed out with no copy (host
// and cuda); otherwise (R' = R/k, or any R' spanning several shard
// batches) the rows of each are copied into one host buffer per batch
// (host backend only). Shuffle "partitioned" is refused: its order depends
// on the world size. The Python dataset (gpuload.torch.ShardDataset with
// elastic=True) reads the same way; the C ABI does not offer it.
type Elastic struct {
	parts []elasticPart
	batch int // per-rank batch size G/R'
	steps int
}

// elasticPart is one shard this rank reads and the rows [lo, hi) it takes
// of each of its batches.
type elasticPart struct {
	l      *Loader
	lo, hi int
}

// OpenElastic opens the shard set dir as rank rank of worldSize ranks for
// epoch epoch (see Elastic), starting at opts.StartStep. Every shard it
// reads must be on this node (ErrNoShard otherwise).
func OpenElastic(dir string, epoch, rank, worldSize int, opts Options) (*Elastic, error) {
	set, err := shardset.Open(dir)
	if err != nil {
		return nil, setOpenError(dir, err)
	}
	info, err := setInfo(set)
	set.Close()
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return &Error{Op: "opening elastic reader", Path: dir, Epoch: epoch, Rank: rank, Step: -1, Offset: -1,
			Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
	}
	switch {
	case info.WorldSize == 0 || info.BatchSize == 0:
		return nil, bad("the set has no plan.json to read world size and batch from")
	case worldSize < 1 || info.GlobalBatch%worldSize != 0:
		return nil, bad("world size %d does not divide the plan's global batch %d", worldSize, info.GlobalBatch)
	case rank < 0 || rank >= worldSize:
		return nil, bad("rank %d outside [0, %d)", rank, worldSize)
	case worldSize != info.WorldSize && info.Shuffle == "partitioned":
		return nil, bad("shuffle partitioned orders depend on the world size (plan %d, asked %d)", info.WorldSize, worldSize)
	}
	e := &Elastic{batch: info.GlobalBatch / worldSize, steps: info.StepsPerEpoch}
	b := info.BatchSize
	lo, hi := rank*e.batch, (rank+1)*e.batch
	for r := lo / b; r <= (hi-1)/b; r++ {
		e.parts = append(e.parts, elasticPart{lo: max(lo, r*b) - r*b, hi: min(hi, (r+1)*b) - r*b})
	}
	if len(e.parts) > 1 && opts.Backend == BackendCUDA {
		return nil, bad("rank %d of %d spans %d shard batches, which are joined on the host: use the host backend", rank, worldSize, len(e.parts))
	}
	for i := range e.parts {
		l, err := Open(dir, epoch, lo/b+i, opts)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.parts[i].l = l
	}
	return e, nil
}

// Steps returns the number of steps (batches) of the epoch.
func (e *Elastic) Steps() int { return e.steps }

// BatchSize returns the per-rank batch size G/R'.
func (e *Elastic) BatchSize() int { return e.batch }

// Next returns the next batch, io.EOF after the last. A single-shard batch
// is a view of the shard batch (valid until Release); a joined one owns its
// host memory, and its Release does nothing.
func (e *Elastic) Next() (*Batch, error) {
	got := make([]*Batch, len(e.parts))
	for i, p := range e.parts {
		b, err := p.l.Next()
		if err != nil {
			for _, g := range got[:i] {
				g.Release()
			}
			return nil, err
		}
		got[i] = b
	}
	if len(got) == 1 {
		return e.parts[0].view(got[0]), nil
	}
	defer func() {
		for _, g := range got {
			g.Release()
		}
	}()
	return e.join(got), nil
}

// rows clips [lo, hi) to a batch of count rows.
func (p elasticPart) rows(count int) (int, int) { return min(p.lo, count), min(p.hi, count) }

// pads counts the pad rows among rows [a, z) of b (pads are trailing).
func pads(b *Batch, a, z int) int { return max(0, z-max(a, b.Count-b.Pads)) }

// view is rows [lo, hi) of b, sharing its memory and ring slot.
func (p elasticPart) view(b *Batch) *Batch {
	a, z := p.rows(b.Count)
	if a == 0 && z == b.Count {
		return b
	}
	v := &Batch{Step: b.Step, Count: z - a, Pads: pads(b, a, z), Device: b.Device, SampleIDs: b.SampleIDs[a:z], l: b.l, slot: b.slot}
	v.Tensors = make([]Tensor, len(b.Tensors))
	for i, t := range b.Tensors {
		row := t.Size() / max(int64(b.Count), 1)
		nt := Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64{int64(z - a)}, t.Shape[1:]...), Strides: t.Strides,
			Ptr: t.Ptr + uintptr(int64(a)*row)}
		if t.Bytes != nil {
			nt.Bytes = t.Bytes[int64(a)*row : int64(z)*row]
		}
		v.Tensors[i] = nt
	}
	return v
}

// join copies the rows each part takes of its batch into one batch.
func (e *Elastic) join(got []*Batch) *Batch {
	out := &Batch{Step: got[0].Step, Device: -1}
	for i, p := range e.parts {
		a, z := p.rows(got[i].Count)
		out.Count += z - a
		out.Pads += pads(got[i], a, z)
		out.SampleIDs = append(out.SampleIDs, got[i].SampleIDs[a:z]...)
	}
	out.Tensors = make([]Tensor, len(got[0].Tensors))
	for j, t := range got[0].Tensors {
		var buf []byte
		for i, p := range e.parts {
			b := got[i]
			a, z := p.rows(b.Count)
			row := b.Tensors[j].Size() / max(int64(b.Count), 1)
			buf = append(buf, b.Tensors[j].Bytes[int64(a)*row:int64(z)*row]...)
		}
		out.Tensors[j] = Tensor{Name: t.Name, DType: t.DType, Shape: append([]int64{int64(out.Count)}, t.Shape[1:]...),
			Strides: append([]int64(nil), t.Strides...), Bytes: buf}
		if len(buf) > 0 {
			out.Tensors[j].Ptr = addr(buf)
		}
	}
	return out
}

// Seek makes step the next one Next delivers.
func (e *Elastic) Seek(step int) error {
	for _, p := range e.parts {
		if err := p.l.Seek(step); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every shard it reads.
func (e *Elastic) Close() error {
	var errs []error
	for _, p := range e.parts {
		if p.l != nil {
			errs = append(errs, p.l.Close())
		}
	}
	return errors.Join(errs...)
}
