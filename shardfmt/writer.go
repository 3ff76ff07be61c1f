package shardfmt

// TensorInfo describes one tensor of a shard: its name (UTF-8, stored
// byte-exact), dtype and per-sample shape (rank <= 8; an empty shape is a
// scalar per sample). A batch holds a [b, Shape...] slab of it.
type TensorInfo struct {
	Name  string   `json:"name"`
	DType DType    `json:"dtype"`
	Shape []uint64 `json:"shape"`
}

// Provenance ties a shard to the plan and feature spec that made it. It is
// stored in the shard's metadata section and checked by readers.
type Provenance struct {
	PlanFingerprint   string `json:"plan_fingerprint"`
	SourceFingerprint string `json:"source_fingerprint"`
	SpecHash          string `json:"spec_hash"`
	Epoch             uint32 `json:"epoch"`
	Rank              uint32 `json:"rank"`
	WorldSize         uint32 `json:"world_size"`
	Workers           uint32 `json:"workers"`
	ToolVersion       string `json:"tool_version"`
}

// WriterOptions fixes the geometry of a shard before any batch is written.
type WriterOptions struct {
	BatchSize  int          // b: sample slots per batch (the per-rank batch size)
	NumBatches int          // number of batches (steps) the shard will hold
	Tensors    []TensorInfo // in table order
	Provenance Provenance
}

// Writer streams batches into a new shard file. STUB: replaced by the real
// implementation.
type Writer struct{}

// Create starts a shard at path (written under a temporary name until Commit).
func Create(path string, opts WriterOptions) (*Writer, error) { panic("unimplemented") }

// Geometry returns the block geometry used by this writer.
func (w *Writer) Geometry() Geometry { panic("unimplemented") }

// WriteBatch appends the next batch. block is exactly Geometry().BlockSize
// bytes holding each tensor's slab at its offset, zero where unused. ids holds
// the global sample id of each present sample (len = count <= BatchSize);
// the last pads of them are pad samples.
func (w *Writer) WriteBatch(block []byte, ids []uint64, pads int) error { panic("unimplemented") }

// Commit writes the tables, footer and header, fsyncs, renames the file into
// place and fsyncs the directory.
func (w *Writer) Commit() error { panic("unimplemented") }

// Abort removes the temporary file. Safe to call after Commit (no-op).
func (w *Writer) Abort() error { panic("unimplemented") }
