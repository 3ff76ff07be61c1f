package shardfmt

// Geometry is the fixed layout of every batch block of a shard.
type Geometry struct {
	BatchSize   int      // b
	BlockSize   uint64   // bytes per batch block, a multiple of 4096
	SlabOffset  []uint64 // per tensor: offset of its slab inside a block, multiple of 256
	SlabSize    []uint64 // per tensor: b * SampleBytes
	SampleBytes []uint64 // per tensor: bytes of one sample (dtype size * product(shape))
}

// NewGeometry computes the block geometry for b samples of the given tensors.
func NewGeometry(b int, tensors []TensorInfo) (Geometry, error) { panic("unimplemented") }
