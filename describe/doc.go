// Package describe describes a shard set, a plan and its samples; it
// changes nothing.
//
// Inspect reads the headers, tables and manifest of a shard file or a shard
// set directory (an epochs x ranks table with each listed shard's status),
// a plan file's inputs and derived counts, or a Parquet file's footer (the
// leaf column names a feature spec takes), never batch data. Export writes
// one batch of a shard set as NumPy .npy files, exactly the bytes the
// trainer receives, after checking the batch's CRC-32C (and a jagged
// tensor's offsets); for a packed plan it also names each packed row's
// documents, from a function the caller supplies.
//
// Every name inside a shard set is reached through shardset (no symbolic
// link followed) and every shard is read with pread, never mapped, so a
// shard cut short while it is described is an error, not a memory fault.
// Integrity and conformance checks, with every finding reported, are
// package verify's; describe imports neither verify nor convert.
package describe
