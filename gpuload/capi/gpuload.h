/*
 * gpuload.h - C ABI of prep's training-time shard reader (libgpuload.so).
 *
 * Build:   go build -buildmode=c-shared -o bin/libgpuload.so ./gpuload/capi
 * Link:    cc app.c -I gpuload/capi -Lbin -lgpuload
 *
 * A loader reads the shard of one (epoch, rank) of a shard set written by
 * `prep convert` and delivers its batches in step order. Each batch holds
 * tensors laid out C-contiguously as [count, per-sample shape...], in host
 * memory (backend "host") or CUDA device memory (backend "cuda"; the CUDA
 * driver is loaded at run time, override its path with PREP_LIBCUDA).
 *
 * Jagged tensors (shard format 2.0: a variable number of values per sample)
 * come as two arrays: tensors[i] (kind GL_TENSOR_JAGGED) is the batch's
 * values, C-contiguous [N, per-value shape...] with N = shape[0] the
 * batch's values count, and offsets[i] is an I64 tensor of shape [count+1]:
 * sample j's values are rows [off[j], off[j+1]) of the values, off[0] = 0
 * and off[count] = N. The library checks the offsets (0, never decreasing,
 * ending at N) before gl_next hands the batch out; bad ones fail gl_next
 * with GL_ERR_CORRUPT.
 *
 * Memory: every pointer handed out (the gl_batch, its tensors, sample ids,
 * pad flags, tensor names and data) is owned by the library and stays valid
 * until gl_release(loader, batch) or gl_close(loader), whichever comes first. Batches
 * are released explicitly; gl_next does not release the previous batch. At
 * most gl_ring(loader) batches may be held at once (gl_next then fails with
 * GL_ERR_RING_FULL). On cuda, release a batch only after the device work
 * reading it has completed.
 *
 * Threads: every function may be called from any thread. Calls on one
 * loader are serialised by a lock of that loader (each call runs whole, so
 * two threads calling gl_next get each step exactly once, in step order
 * between them); no call waits for another thread's release (gl_next
 * returns GL_ERR_RING_FULL instead), so the lock cannot deadlock. A call on
 * a loader another thread closed returns GL_ERR_CLOSED. Errors: functions return
 * GL_OK (0), GL_EOF (1, gl_next only) or a negative GL_ERR_* code, and
 * gl_last_error() describes the most recent failure in the process.
 *
 * All integers are native-endian (the library runs on little-endian hosts).
 */
#ifndef GPULOAD_H
#define GPULOAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define GL_OK 0
#define GL_EOF 1                  /* gl_next: no more batches */
#define GL_ERR_INVALID (-1)       /* bad argument (NULL pointer, unknown backend, step out of range) */
#define GL_ERR_NO_SHARD (-2)      /* (epoch, rank) in the plan but not in this shard set, or file missing */
#define GL_ERR_PLAN_MISMATCH (-3) /* shard made by another plan, or disagrees with its manifest */
#define GL_ERR_CORRUPT (-4)       /* damaged shard: wrong size, bad structure, checksum mismatch */
#define GL_ERR_CUDA (-5)          /* CUDA unavailable or a driver call failed (message has the CUresult) */
#define GL_ERR_RING_FULL (-6)     /* every ring buffer is held by an unreleased batch */
#define GL_ERR_CLOSED (-7)        /* loader already closed */
#define GL_ERR_IO (-8)            /* any other failure (I/O error, ...) */
#define GL_ERR_NO_SHARD_SET (-9)  /* dir does not exist or holds no manifest.json */
#define GL_ERR_OUTSIDE_PLAN (-10) /* epoch or rank outside the plan's range (the message names it) */

/* Version of this interface; gl_abi_version() returns the library's.
 * Versions only add: a library describes everything a binding built for an
 * earlier version reads exactly as that version did, so a binding accepts a
 * library whose version is at least its own and must refuse an older one
 * (rebuild it).
 *
 *   2  gl_get_info, gl_tensor_info.
 *   3  jagged tensors: gl_tensor.kind (in bytes that were padding, so every
 *      field keeps its offset and gl_tensor its size, 192 bytes) and
 *      gl_batch.offsets (after the last field of version 2). A binding for
 *      version 2 sees a shard without jagged tensors as before; it must not
 *      be used on a shard with them (it would take a values array for a
 *      [count, ...] one). */
#define GL_ABI_VERSION 3

/* Maximum number of dimensions of a batch tensor: the batch dimension plus a
 * per-sample rank of at most 8. */
#define GL_MAX_DIMS 9

/* DLPack device types (DLDeviceType). */
#define GL_DL_CPU 1  /* kDLCPU */
#define GL_DL_CUDA 2 /* kDLCUDA */

/* Shard dtype codes (shardfmt/FORMAT.md; never reused). */
enum gl_dtype {
	GL_BOOL = 1, GL_U8 = 2, GL_I8 = 3, GL_U16 = 4, GL_I16 = 5, GL_U32 = 6,
	GL_I32 = 7, GL_U64 = 8, GL_I64 = 9, GL_F16 = 10, GL_BF16 = 11,
	GL_F32 = 12, GL_F64 = 13, GL_F8_E4M3 = 14, GL_F8_E5M2 = 15
};

/* Options for gl_open. Zero-initialize, then set what you need: the zero
 * value means host backend, device 0, default prefetch (4), step 0. */
typedef struct gl_options {
	const char *backend;          /* "host" (NULL or "") or "cuda" */
	int32_t device;               /* CUDA device ordinal */
	int32_t prefetch;             /* batches prepared ahead; 0 = default */
	int64_t start_step;           /* first step delivered (resume) */
	int32_t verify_checksums;     /* nonzero: check each block's CRC-32C */
	int32_t register_mmap;        /* cuda: DMA from the registered mapping */
	int32_t map_blocks;           /* host: hand out views of the mapping */
	int32_t reserved;             /* must be 0 */
	const char *plan_fingerprint; /* NULL, or the expected plan fingerprint */
} gl_options;

/* Tensor kinds (gl_tensor.kind). */
#define GL_TENSOR_FIXED 0  /* [count, per-sample shape...] */
#define GL_TENSOR_JAGGED 1 /* values [N, per-value shape...]; offsets in gl_batch.offsets */

/* One tensor of a batch: a C-contiguous array. */
typedef struct gl_tensor {
	const char *name;             /* NUL-terminated UTF-8 */
	uint16_t dtype;               /* enum gl_dtype */
	uint8_t dl_code;              /* DLPack DLDataType.code (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12) */
	uint8_t dl_bits;              /* DLPack DLDataType.bits */
	uint16_t dl_lanes;            /* DLPack DLDataType.lanes (1) */
	uint16_t kind;                /* GL_TENSOR_FIXED or GL_TENSOR_JAGGED (since version 3) */
	int32_t ndim;                 /* 1 + per-sample (per-value) rank */
	int64_t shape[GL_MAX_DIMS];   /* [count, per-sample shape...]; jagged values: [N, per-value shape...] */
	int64_t strides[GL_MAX_DIMS]; /* in elements (DLPack convention) */
	void *data;                   /* host address, or CUdeviceptr on cuda */
	uint64_t nbytes;              /* count * bytes per sample; jagged values: N * bytes per value */
	int32_t device_type;          /* GL_DL_CPU or GL_DL_CUDA */
	int32_t device_id;            /* CUDA ordinal, 0 on host */
} gl_tensor;

/* One batch. */
typedef struct gl_batch {
	int64_t step;                 /* batch index within the shard */
	int32_t count;                /* samples present (real + pad) */
	int32_t pads;                 /* trailing pad samples among count */
	int32_t num_tensors;
	int32_t reserved;
	const gl_tensor *tensors;     /* num_tensors entries, shard table order */
	const uint64_t *sample_ids;   /* count global sample ids */
	const uint8_t *pad_flags;     /* count flags: 1 for a pad sample */
	uintptr_t internal;           /* private to the library */
	/* Since version 3: num_tensors entries beside tensors. For a jagged
	 * tensors[i], offsets[i] is its offsets: name as tensors[i], dtype
	 * GL_I64, ndim 1, shape [count+1], strides [1], nbytes 8*(count+1),
	 * data 8-byte aligned on the same device as the values. For a fixed
	 * tensor, offsets[i] is all zeros (data NULL, ndim 0). */
	const gl_tensor *offsets;
} gl_batch;

/* Opaque loader handle. */
typedef struct gl_loader gl_loader;

/* What a loader's shard set says about itself (manifest.json and its
 * plan.json copy). Plan numbers are 0 for a set without plan.json. */
typedef struct gl_info {
	int64_t world_size;           /* ranks of the plan */
	int64_t epochs;               /* epochs of the plan */
	int64_t workers;              /* data-loader workers per rank of the plan */
	int64_t global_batch;         /* samples per step over all ranks */
	int64_t steps_per_epoch;      /* steps of every rank in every epoch */
	int64_t batch_size;           /* per-rank batch size of the shards */
	int64_t num_tensors;          /* entries of the tensor table (gl_tensor_info) */
	const char *fingerprint;      /* plan fingerprint, valid until gl_close */
	const char *order_fingerprint;/* order fingerprint ("" without plan.json) */
} gl_info;

#ifndef GPULOAD_NO_PROTOTYPES
/* Opens the shard of (epoch, rank) in the shard set directory dir (holding
 * manifest.json). opts may be NULL. On GL_OK *out is the new loader. */
int gl_open(const char *dir, int epoch, int rank, const gl_options *opts, gl_loader **out);

/* Stores the next batch in *out: GL_OK, GL_EOF after the last step, or an
 * error (sticky until gl_seek). */
int gl_next(gl_loader *l, gl_batch **out);

/* Gives a batch back to its loader and frees its descriptor; b is invalid
 * afterwards. Must not be called after gl_close (which frees unreleased
 * batches itself). */
int gl_release(gl_loader *l, gl_batch *b);

/* Makes step the next one delivered (0 <= step <= gl_steps). */
int gl_seek(gl_loader *l, int64_t step);

/* Number of steps (batches) in the shard, or a GL_ERR_* code. */
int64_t gl_steps(gl_loader *l);

/* Number of batches that may be held at once, or a GL_ERR_* code. */
int64_t gl_ring(gl_loader *l);

/* Copies tensor t (one of b->tensors or b->offsets) of an unreleased batch
 * into dst (at least t->nbytes bytes): device-to-host on cuda. For checks,
 * not the hot path. */
int gl_copy_to_host(gl_loader *l, const gl_tensor *t, void *dst, size_t dst_len);

/* Stops the pipeline and frees everything, unreleased batches included
 * (their descriptors too). l and all its batches are invalid afterwards. */
int gl_close(gl_loader *l);

/* Fills *out with the shard set's plan numbers and fingerprints. */
int gl_get_info(gl_loader *l, gl_info *out);

/* Fills *out with entry i of the tensor table: name, dtype, DLPack type,
 * kind, ndim, shape [batch_size, per-sample shape...] and strides; data is
 * NULL and nbytes is for a full batch. A jagged tensor (kind
 * GL_TENSOR_JAGGED) has shape [-1, per-value shape...] (its values count
 * varies by batch), strides[0] the elements of one value, and nbytes 0. */
int gl_tensor_info(gl_loader *l, int i, gl_tensor *out);

/* GL_ABI_VERSION of the library. */
int gl_abi_version(void);

/* Message of the most recent failed call in this process (never NULL; ""
 * if none). Valid until the next failed call. */
const char *gl_last_error(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* GPULOAD_H */
