// Package shardfmt implements the prep shard format v1 (specified in
// FORMAT.md): fixed-layout tensor shard files holding one (epoch, rank) of a
// plan as batch-major blocks, each 4096-byte aligned with every tensor's
// [b, shape...] slab 256-byte aligned inside it, so a reader does one read
// and one DMA per batch.
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
