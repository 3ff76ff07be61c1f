// Package convert materializes a plan's epochs and ranks into tensor shard
// files (`prep convert`): it compiles the feature spec against the source
// (feature.Compile), decodes each needed Parquet column chunk once into
// staging (feature.Program.Decode, stage 1), and writes one shard per
// (epoch, rank) in step order (stage 2), plus the shard set's
// manifest.json. What a sample's bytes are is package feature's; this
// package owns writing a shard set: resume, staging, spill, stage 2,
// jagged blocks, commit and rollback.
//
// # Files
//
//   - run.go: Run, orchestration, the output directory, resume, rollback.
//   - needed.go: the sample ids the requested shards hold (a feature.IDSet).
//   - staging.go, spill.go: where records wait between the stages, in
//     anonymous memory or spilled to disk by output window, behind one
//     interface (stage), each handing stage 1 its feature.RecordSink.
//   - write.go, gather.go: stage 2, the one shard writer.
//   - jagged_block.go: a batch's 2.0 block of jagged tensors, its values
//     read from the values arena (feature.Arena).
//   - packed_write.go: the shards of a packed plan, their documents
//     decoded in groups (feature.PackedGroups).
//   - mismatch.go, output_errors.go: why an output directory's shard set
//     is not this run's (ErrOutputMismatch).
//   - vmhwm.go, maxrss_*.go: peak RSS for the summary.
//
// # Stages
//
// Run checks every input first (feature.Compile: source files unchanged
// since the plan, every spec column resolved in every file) and returns
// before the output directory is touched on any failure. The set of
// sample ids the requested shards hold is a feature.IDSet; the compact
// rank of an id among them is its staging slot. Staging that fits half of
// Options.MemoryLimit is private anonymous memory (internal/sysmem:
// mmap MAP_ANONYMOUS, 2 MiB aligned, madvise MADV_HUGEPAGE on Linux):
// records are assembled in place, with no staging file and no write
// system calls. Larger staging (or where the anonymous mapping fails) is
// spilled to disk by output window (spill.go): the requested epochs'
// steps are cut, for groups of as many ranks as stage 2 writes shards at
// once, into windows whose records fit the limit, stage 1 appends each
// record, tagged with its slot, to its window's region of
// OUT/.prep-tmp/<pid>/spill.bin (pwrite), and stage 2 reads one window
// back at a time, so memory stays bounded by the limit whatever the input
// size. Every block of the spill file is reserved (fallocate, or zeros
// written where the file system lacks it) before stage 1, so a disk that
// fills up fails the run at the start with feature.ErrNoSpace. Either way
// the shards hold the same bytes. Package feature's documentation
// describes stage 1 itself.
//
// # Stage 2: gather
//
// For each requested shard, for each step, the plan's RankBatch gives the
// sample ids; each sample's bytes are copied from staging (or from the
// window's records of a spilled run) into a zeroed batch block at the slab offsets of shardfmt's geometry and written with
// shardfmt.Writer. Shards are written in parallel (Options.Jobs); each shard's
// bytes depend only on the plan, the spec and the source, never on Jobs.
// After each committed shard (temporary name, fsync, rename) the manifest is
// rewritten atomically, so it never lists a half-written shard.
// Options.OnShard reports each shard's start and commit (the CLI labels its
// write bar "epoch e rank r" with them).
//
// # Output directory
//
// Beside the shards and manifest.json, OUT/plan.json holds the plan file's
// exact bytes (Options.PlanBytes), written atomically before the first
// shard, so `prep verify OUT` needs no --plan. A rerun whose plan bytes
// differ from it is another plan: refused with ErrOutputMismatch unless
// Options.Force, which replaces it.
//
// An advisory flock on OUT/.prep.lock (holding "pid host") keeps two runs out
// of one directory: the second gets *dirlock.HeldError (exit code 3). A lock
// file whose holder died is taken over with a warning. A rerun skips shards
// already listed in a manifest made from the same plan, source and spec
// (present with the recorded size), and removes temporary files of killed
// runs; a manifest from other inputs is refused (ErrOutputMismatch) unless
// Options.Force. On any error the manifest is first restored atomically (less
// any shard this run rewrote), then the shards this run committed are
// removed and staging is deleted, so a kill during the rollback never leaves
// a manifest listing a missing shard; complete earlier output is untouched.
// Free space for the shards, plus the spill file of a spilled run, is
// checked before stage 1 (ErrNoSpace gives the numbers).
//
// # Memory
//
// Everything proportional to the data counts against one budget,
// MemoryLimit. Anonymous memory comes first and takes at most half of
// it: the staging records (else a spilled run's stage-2 window) and,
// when it fits beside them, the values arena (else a file). The rest is
// the Go heap's (Summary.HeapBudgetBytes, handed to Options.HeapLimit,
// which prep convert makes the Go runtime's soft memory limit, so that
// garbage stays within it too); half of that is admitted live: the
// estimated bytes of decoded column chunks in flight in stage 1 and the
// jagged batch blocks of stage 2 (at least one block), the other half
// being the collector's room for garbage; of that room, stage 1 keeps up
// to half (a quarter of the heap's share) as the memory of column chunks
// already assembled, which the next ones decode into (pqread.Buffers),
// so that decoding reuses pages instead of faulting in fresh ones (and
// leaves that much less garbage). Summary.AdmittedPeakBytes is
// the most the admission held at once. A jagged batch block may take at
// most max(MemoryLimit/4, 1 MiB) (a larger batch is refused naming epoch,
// rank, step and tensor), the blocks being built and written at once at
// most twice that. Package feature's documentation gives the rest of
// stage 1's memory (row windows, images, long rows).
package convert
