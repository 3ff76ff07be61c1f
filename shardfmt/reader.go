package shardfmt

// BatchInfo is one batch table entry.
type BatchInfo struct {
	Count  int    // samples present (real + pad), <= BatchSize
	Pads   int    // trailing pad samples among Count
	CRC    uint32 // CRC-32C of the whole block
	Offset uint64 // file offset of the block
}

// Reader reads a shard. STUB.
type Reader struct{}

// Open maps a shard file read-only and validates header and tables.
func Open(path string) (*Reader, error) { panic("unimplemented") }

// Provenance, Tensors, Geometry, NumBatches: accessors.
func (r *Reader) Provenance() Provenance { panic("unimplemented") }
func (r *Reader) Tensors() []TensorInfo   { panic("unimplemented") }
func (r *Reader) Geometry() Geometry      { panic("unimplemented") }
func (r *Reader) NumBatches() int         { panic("unimplemented") }

// Batch returns the batch table entry of batch k.
func (r *Reader) Batch(k int) (BatchInfo, error) { panic("unimplemented") }

// SampleIDs returns the sample ids of batch k (len = Count).
func (r *Reader) SampleIDs(k int) ([]uint64, error) { panic("unimplemented") }

// Block returns a zero-copy view of batch k's block.
func (r *Reader) Block(k int) ([]byte, error) { panic("unimplemented") }

// ReadBlock copies batch k's block into dst (len >= BlockSize) with pread.
func (r *Reader) ReadBlock(k int, dst []byte) error { panic("unimplemented") }

// VerifyBatch checks batch k's CRC-32C.
func (r *Reader) VerifyBatch(k int) error { panic("unimplemented") }

// Close unmaps the file.
func (r *Reader) Close() error { panic("unimplemented") }
