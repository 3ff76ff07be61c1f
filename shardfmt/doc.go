// Package shardfmt implements the prep shard format, versions 1 and 2 (specified in
// FORMAT.md): fixed-layout tensor shard files holding one (epoch, rank) of a
// plan as batch-major blocks, each 4096-byte aligned with every tensor's
// [b, shape...] slab 256-byte aligned inside it, so a reader does one read
// and one DMA per batch.
//
// Format 2.0 adds jagged tensors (TensorInfo.Jagged): a variable number of
// values per sample, stored per batch as a values slab and a [b+1] int64
// offsets slab inside the batch's one block. Blocks then differ in size; the
// batch table records each one's offset, size and values counts, and the
// header the largest block (Geometry.BlockSize). Reader.Jagged returns a
// batch's values and offsets after checking them. A shard without a jagged
// tensor is written as 1.0, unchanged.
//
// Writing: Create, Writer.WriteBatch per step, Writer.Commit (temporary
// name, fsync, rename, fsync of the directory). Reading: Open (memory map,
// pread fallback) or OpenReaderAt, which validate the header, footer and
// tables in a fixed order without I/O proportional to the sample count;
// Reader.VerifyBatch checks a batch's CRC-32C on demand. Errors are
// *FormatError values wrapping the sentinels in errors.go.
//
// The package also holds the dtype table (dtype.go), the float narrowing
// helpers used to fill F16, BF16 and FP8 tensors (half.go), and the shard
// set manifest (manifest.go).
package shardfmt
