// Package gpuload is prep's training-time reader: it opens the shard of one
// (epoch, rank) of a shard set written by prep convert and delivers its
// batches in plan order, each as a set of tensors already laid out as the
// trainer wants them ([count, shape...] C-contiguous slabs), in host memory
// or in GPU memory, with no decode, cast or gather on the hot path.
//
// # Backends
//
// "host" (the reference, and the path CI tests) reads batch blocks into a
// ring of page-aligned buffers allocated once (anonymous mappings, so C code
// may hold their addresses), on a background goroutine that stays
// Options.Prefetch batches ahead of the consumer. It fills the ring slots
// free at the time, up to half the ring, with the next consecutive blocks in
// one vectored read (preadv) and hands them to the consumer as one group, so
// the goroutine hand-off is paid per group rather than per batch and the
// consumer can release the other half while the read runs. Steps are
// claimed for reading in order, a group at a time: a consumer that finds
// no group ready and none being read reads the next group itself, in its
// own goroutine (when the reads are the slower side, no hand-off at all,
// and the reads go on while the background goroutine waits for a CPU on
// a busy machine). The background goroutine reads ahead while it finds
// free slots, then sleeps until a batch is given back 20 µs or more after
// it was handed out (the consumer spends time on its batches: reading
// ahead pays) or while the consumer waits; a consumer that gives each
// batch back at once wakes nobody. A consumer waiting for a group being
// read polls through the read (up to 2 ms, plus 100 µs) before parking, so
// the reader does not pay a thread wake-up per group; the wait costs that
// CPU time instead (what each costs is measured in BENCHMARKS.md). Sample ids are read with pread
// into a buffer per ring slot and checked against their CRC-32C batch by
// batch, as they are delivered. Options.MapBlocks switches
// it to handing out read-only views of the mapped shard instead, with
// madvise(MADV_WILLNEED) ahead.
//
// Why pread is the default although views are faster from a warm page cache
// (a view copies nothing, while pread costs one kernel copy as a plain read
// of the file does, which bounds it near a plain read's speed; the figures,
// from BenchmarkHostDeliveryRatio and bench/cmd/loadbench, are in
// BENCHMARKS.md, gpuload's host backend): a view of a file truncated
// after Open kills the process with SIGBUS, in C and Python trainers too,
// while pread returns an error (Go callers could recover the fault with
// debug.SetPanicOnFault, but the views are handed to C and Python, where
// nothing can); a view's first touch of a cold page stalls the trainer's
// thread rather than the prefetch goroutine; and the ring keeps
// resident memory at (Prefetch+1) blocks whatever the shard size. Use
// MapBlocks when the shards are known to stay put and sit in the page cache.
//
// "cuda" loads the CUDA driver (libcuda.so.1, or $PREP_LIBCUDA) at run time.
// Device buffers (Prefetch+1) and one event per buffer are allocated once;
// a copier issues cuMemcpyHtoDAsync into them on a dedicated non-blocking
// stream and records an event per copy, and a batch is delivered only once
// its bytes are on the device. How a block gets there is the transfer path,
// chosen per shard at Open (Options.CUDAPath, default CUDAPathAuto; the rule
// and its measured reasons are on chooseCUDAPaths in cudapath.go):
//
//   - register: the mapped shard is registered read-only with the driver
//     (CU_MEMHOSTREGISTER_READ_ONLY, which pins every page of it once, at
//     Open) and each block is copied to the device straight from the
//     mapping, the copier taking each block itself (no reader, unless
//     checksums are verified). Chosen when mincore finds the shard in the
//     page cache (as it usually is after prep convert) and it is no larger
//     than half the RAM: it runs at the link's speed with no CPU copy.
//   - direct: a reader goroutine reads blocks with O_DIRECT into a ring of
//     pinned host slots (cuMemHostAlloc, allocated once: at least 3, and at
//     least 32 MiB of them up to 64 slots), so the disk controller writes
//     into pinned memory and no CPU copies the bytes; it fills the
//     consecutive slots free at the time, up to 16 MiB and half the ring,
//     with one vectored read (preadv), so the disk serves the pieces in
//     parallel instead of idling between single reads; a host slot is
//     reused only after its copy's event completes. Chosen
//     when the shard is not resident. Shard blocks are 4096-aligned in
//     offset and length and the slots page-aligned, which satisfies any
//     file system whose O_DIRECT alignment (statx) is at most 4096; the
//     shard's open file is opened again with O_DIRECT through
//     /proc/self/fd (the same file: no name is looked up again) and block 0
//     read at Open, so a file
//     system that refuses (tmpfs before Linux 6.6, some overlayfs and FUSE
//     mounts: EINVAL) is found then.
//   - pread: the same ring filled with pread, one CPU copy out of the page
//     cache, so bounded by one core's memory bandwidth (BENCHMARKS.md, CUDA
//     backend). The last resort, always possible.
//   - gds: GPUDirect Storage, only on request: libcufile.so is loaded with
//     dlopen at Open (never needed to build or run otherwise), the shard
//     registered with cuFile and each block read by cuFileRead straight into
//     a device buffer.
//
// With CUDAPathAuto a path that fails at Open (registration refused by the
// driver, O_DIRECT refused or misaligned) falls back to the next one;
// Loader.TransferStats names the path in use, why it was chosen, each
// fallback with its error, and the time spent reading, queueing copies and
// waiting for them. A path asked for explicitly fails Open instead
// (ErrPathUnavailable). Context-bound calls run on goroutines locked to
// their OS threads: set-up and tear-down on the context's own thread, and
// the per-batch copies, event records and waits on the copier, which binds
// the context to its thread so they go straight to the driver (a hand-off to
// another thread per call costs two thread wake-ups each way per batch;
// BenchmarkCUDAControlPath measures the control path's CPU per batch,
// BENCHMARKS.md has the figures). Builds without cgo get a backend that fails
// with ErrCUDAUnavailable.
//
// # Jagged tensors
//
// A shard of format 2.0 may hold jagged tensors (a variable number of
// values per sample). A Batch gives such a tensor (Tensor.Jagged) as its
// values, Shape [N, per-value shape...], and Tensor.Offsets, an I64 tensor
// of Shape [Count+1]: sample j's values are rows [off[j], off[j+1]). Both
// are views of the batch's one block, read with the same single read as
// every other tensor, and the offsets are checked (0, never decreasing,
// ending at N) before the batch is delivered; bad offsets fail Next with
// ErrCorrupt. Blocks then differ in size: the ring's buffers have the size
// of the shard's largest block (Geometry.BlockSize), and each read takes
// only its block's own length.
//
// On cuda the device buffers and pinned slots have that size too, each
// batch's copy moves only its block's length, and the offsets are checked
// on the host copy of the block before it is handed out: in the pinned slot
// after the pread or O_DIRECT read, or in the mapping on the register path
// (a batch with bad offsets fails Next with ErrCorrupt there as well); the
// batch's Tensor.Ptr and Offsets.Ptr are then device addresses within the
// block's device buffer. The gds path never has the block in host memory,
// so it refuses such a shard at Open (ErrInvalid) rather than deliver
// offsets nobody checked. A shard without jagged tensors is read exactly as
// before. The C ABI (version 3) describes a jagged tensor as gl_tensor kind
// GL_TENSOR_JAGGED holding the values, with its offsets tensor beside it in
// gl_batch.offsets; the Python package as a Jagged (values, offsets) pair.
//
// # Shard-set metadata and errors
//
// ReadSetInfo reads what a trainer checks before its first batch (world
// size, epochs, steps per epoch, tensors, plan and order fingerprints) from
// the set's manifest.json and plan.json without opening a shard. Open tells
// a missing directory or manifest (ErrNoShardSet), an epoch or rank outside
// the plan (ErrOutsidePlan, naming the range) and a shard in the plan but
// not in this set (ErrNoShard: another node's rank, or deleted by prep gc)
// apart. The C ABI has them as gl_get_info, gl_tensor_info and distinct
// GL_ERR_* codes; the Python package (gpuload/python) reads the same files
// in pure Python.
//
// # Batch lifetime
//
// Batches are released explicitly: a Batch's memory (Tensor.Ptr and
// Tensor.Bytes) stays valid and unchanged until Batch.Release, and the next
// call to Next does not release it. The same holds for the Go slices of a
// Batch (SampleIDs, Tensors and their Shape and Strides): they belong to
// the batch's ring slot and are reused by a later batch once it is
// released, so copy them to keep them longer. The ring bounds how many batches may be
// held at once (Loader.Ring); Next returns ErrRingFull rather than block
// forever when all of them are held. On the cuda backend, release a batch
// only after the GPU work reading it has completed (synchronize the stream
// that used it). Close invalidates every batch, released or not.
//
// Next, Seek and Close must be called from one goroutine at a time; Release
// may be called from any goroutine.
//
// # One pass
//
// Drain is the delivery loop of one pass over a shard (Next, an optional
// look at each batch, Release, until io.EOF), returning DrainStats: the
// batches, samples, pads and bytes delivered and the wall and CPU time of
// the loop. prep load renders them; the benchmarks (bench/) call it too.
package gpuload
