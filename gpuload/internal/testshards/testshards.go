// Package testshards writes small shard sets with known contents for the
// tests of gpuload, its C ABI and its Python binding, through the real
// shardfmt writer.
//
// Every sample's values are a function of its sample id (see Config), so a
// reader can check each byte it gets:
//
//	x  F32 [3]  x[c] = id + c/4
//	y  I64 []   y    = -id
//	m  U8  [5]  m[c] = (id + c) mod 256
//
// Sample ids of shard (epoch, rank): batch k holds ids base+k*b ... in slot
// order, base = 1_000_000*epoch + 10_000*rank; with Pads > 0 the last batch's
// trailing Pads samples repeat the shard's first ids (as the plan's pad
// remainder policy does).
package testshards

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/prepml/prep/internal/testutil"
	"github.com/prepml/prep/shardfmt"
)

// PlanFingerprint is the fingerprint recorded in every set written here.
const PlanFingerprint = "plan:test-0001"

// Tensors is the tensor table of every set written here.
var Tensors = []shardfmt.TensorInfo{
	{Name: "x", DType: shardfmt.F32, Shape: []uint64{3}},
	{Name: "y", DType: shardfmt.I64, Shape: []uint64{}},
	{Name: "m", DType: shardfmt.U8, Shape: []uint64{5}},
}

// Config shapes a shard set.
type Config struct {
	Epochs, Ranks int
	BatchSize     int // b
	Steps         int // batches per shard
	LastCount     int // samples in the last batch (0: full)
	Pads          int // trailing pad samples of the last batch
}

// Count returns the sample count of batch k.
func (c Config) Count(k int) int {
	if k == c.Steps-1 && c.LastCount > 0 {
		return c.LastCount
	}
	return c.BatchSize
}

// Pad returns the pad count of batch k.
func (c Config) Pad(k int) int {
	if k == c.Steps-1 {
		return c.Pads
	}
	return 0
}

// IDs returns the sample ids of batch k of shard (epoch, rank).
func (c Config) IDs(epoch, rank, k int) []uint64 {
	base := uint64(1_000_000*epoch + 10_000*rank)
	n, pads := c.Count(k), c.Pad(k)
	ids := make([]uint64, n)
	for j := range n - pads {
		ids[j] = base + uint64(k*c.BatchSize+j)
	}
	for j := range pads {
		ids[n-pads+j] = base + uint64(j)
	}
	return ids
}

// Sample returns the bytes of one sample of tensor t (index into Tensors)
// with sample id id, little-endian.
func Sample(t int, id uint64) []byte {
	switch t {
	case 0:
		b := make([]byte, 12)
		for c := range 3 {
			binary.LittleEndian.PutUint32(b[4*c:], math.Float32bits(float32(id)+float32(c)/4))
		}
		return b
	case 1:
		return binary.LittleEndian.AppendUint64(nil, uint64(-int64(id)))
	default:
		b := make([]byte, 5)
		for c := range b {
			b[c] = byte(id + uint64(c))
		}
		return b
	}
}

// Write writes the shard set described by c into dir: one shard per (epoch,
// rank) at shardfmt.ShardFileName, the manifest, and a plan.json holding
// the plan numbers (epochs, world size, steps per epoch, fingerprints).
func Write(dir string, c Config) (*shardfmt.Manifest, error) {
	return c.write(dir, testutil.ShardSet{Tensors: Tensors,
		Fill: func(g shardfmt.Geometry, ids []uint64, block []byte) {
			for t := range Tensors {
				for j, id := range ids {
					copy(block[g.SlabOffset[t]+uint64(j)*g.SampleBytes[t]:], Sample(t, id))
				}
			}
		}})
}

// write writes the shard set s into dir with c's plan numbers, sample ids
// and padding (s gives the tensors, the fill and, for format 2.0, the
// values counts and the manifest's ShardFormat), then plan.json.
func (c Config) write(dir string, s testutil.ShardSet) (*shardfmt.Manifest, error) {
	s.Epochs, s.Ranks, s.Steps, s.BatchSize = c.Epochs, c.Ranks, c.Steps, c.BatchSize
	s.Provenance = shardfmt.Provenance{PlanFingerprint: PlanFingerprint, SourceFingerprint: "source:test", SpecHash: "spec:test",
		WorldSize: uint32(c.Ranks), Workers: 1}
	s.RecordBatchSize = true
	s.Manifest.PlanFingerprint, s.Manifest.SourceFingerprint, s.Manifest.SpecHash = PlanFingerprint, "source:test", "spec:test"
	s.Batch = func(e, r, k int) ([]uint64, int, error) { return c.IDs(e, r, k), c.Pad(k), nil }
	m, err := testutil.WriteShardSet(dir, s)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "plan.json"), c.planJSON(), 0o644); err != nil {
		return nil, fmt.Errorf("writing plan.json: %w", err)
	}
	return m, nil
}

// planJSON is the head of a plan file (plan/PLAN.md §9) describing c, the
// fields readers of a shard set take from its plan.json copy.
func (c Config) planJSON() []byte {
	return fmt.Appendf(nil, `{
  "format": "prep-plan/v1",
  "fingerprint": %q,
  "order_fingerprint": "order:test-0001",
  "config": {"seed": 0, "epochs": %d, "global_batch": %d, "world_size": %d, "workers": 1, "shuffle": "none", "remainder": "pad"},
  "derived": {"batch_size": %d, "steps_per_epoch": %d}
}
`, PlanFingerprint, c.Epochs, c.BatchSize*c.Ranks, c.Ranks, c.BatchSize, c.Steps)
}

// JaggedTensors is the tensor table of the sets WriteJagged writes (shard
// format 2.0): the fixed x of Tensors, then two jagged tensors whose rows
// are a function of the sample id:
//
//	x  F32 [3]           x[c] = id + c/4 (as Tensors)
//	h  I32 [] jagged     id mod 4 values per sample, h[e] = 10*id + e
//	p  U16 [2] jagged    id mod 3 values per sample, p[e][c] = (id + 2e + c) mod 65536
var JaggedTensors = []shardfmt.TensorInfo{
	{Name: "x", DType: shardfmt.F32, Shape: []uint64{3}},
	{Name: "h", DType: shardfmt.I32, Shape: []uint64{}, Jagged: true},
	{Name: "p", DType: shardfmt.U16, Shape: []uint64{2}, Jagged: true},
}

// JaggedLen returns the number of values of sample id in jagged tensor t
// (index into JaggedTensors: 1 or 2).
func JaggedLen(t int, id uint64) int {
	if t == 1 {
		return int(id % 4)
	}
	return int(id % 3)
}

// JaggedRow returns the values of sample id in jagged tensor t (index into
// JaggedTensors), little-endian: JaggedLen(t, id) values of the tensor's
// per-value shape.
func JaggedRow(t int, id uint64) []byte {
	var b []byte
	for e := range JaggedLen(t, id) {
		if t == 1 {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(10*id)+int32(e)))
			continue
		}
		for c := range 2 {
			b = binary.LittleEndian.AppendUint16(b, uint16(id+uint64(2*e+c)))
		}
	}
	return b
}

// jaggedValues returns the values counts of JaggedTensors' jagged tensors
// (h, p) in a batch of ids.
func jaggedValues(ids []uint64) []uint64 {
	v := make([]uint64, 2)
	for _, id := range ids {
		v[0] += uint64(JaggedLen(1, id))
		v[1] += uint64(JaggedLen(2, id))
	}
	return v
}

// WriteJagged writes a shard set of JaggedTensors (format 2.0) described by
// c into dir, as Write does: the same sample ids per batch, x as in Write,
// h and p as JaggedTensors says, offsets [Count+1] then N up to the batch
// size. Blocks differ in size.
func WriteJagged(dir string, c Config) (*shardfmt.Manifest, error) {
	return c.write(dir, testutil.ShardSet{Tensors: JaggedTensors,
		Manifest: shardfmt.Manifest{ShardFormat: "2.0"},
		Values:   func(_, _, _ int, ids []uint64) []uint64 { return jaggedValues(ids) },
		Fill: func(g shardfmt.Geometry, ids []uint64, block []byte) {
			for j, id := range ids {
				copy(block[g.SlabOffset[0]+uint64(j)*g.SampleBytes[0]:], Sample(0, id))
			}
			lay, err := g.BatchLayout(jaggedValues(ids))
			if err != nil {
				panic(err) // WriteShardSet sized the block by the same call
			}
			for t := 1; t <= 2; t++ {
				var off uint64
				vals := block[lay.ValuesOffset[t]:]
				for j := 0; j <= g.BatchSize; j++ {
					binary.LittleEndian.PutUint64(block[g.SlabOffset[t]+8*uint64(j):], off)
					if j < len(ids) {
						row := JaggedRow(t, ids[j])
						copy(vals[off*g.SampleBytes[t]:], row)
						off += uint64(JaggedLen(t, ids[j]))
					}
				}
			}
		}})
}
