/*
 * capi_test: reads a shard set written by gpuload/internal/testshards
 * through libgpuload.so and checks every value, the batch metadata, error
 * codes, ring bounds and seeking.
 *
 * usage: capi_test DIR EPOCH RANK BATCH STEPS LAST_COUNT PADS BACKEND
 * Values of sample id: x[c] = id + c/4 (F32 [3]), y = -id (I64), m[c] =
 * (id + c) mod 256 (U8 [5]); ids as in testshards.Config.IDs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpuload.h"
#include "capitest.h"


static void check_batch(gl_loader *l, const gl_batch *b, int k, int want_device) {
	CHECK(b->step == k, "step %lld, want %d", (long long)b->step, k);
	CHECK(b->count == count_of(k), "count %d, want %d", b->count, count_of(k));
	CHECK(b->pads == pads_of(k), "pads %d, want %d", b->pads, pads_of(k));
	CHECK(b->num_tensors == 3, "num_tensors %d", b->num_tensors);
	for (int j = 0; j < b->count; j++) {
		CHECK(b->sample_ids[j] == id_of(k, j), "step %d id[%d] %llu, want %llu", k, j,
		      (unsigned long long)b->sample_ids[j], (unsigned long long)id_of(k, j));
		CHECK(b->pad_flags[j] == (j >= b->count - b->pads), "step %d pad flag %d", k, j);
	}
	static const char *names[3] = {"x", "y", "m"};
	static const uint16_t dtypes[3] = {GL_F32, GL_I64, GL_U8};
	static const uint8_t codes[3] = {2, 0, 1}, bits[3] = {32, 64, 8};
	static const int ndims[3] = {2, 1, 2}, inner[3] = {3, 1, 5}, esize[3] = {4, 8, 1};
	for (int t = 0; t < 3; t++) {
		const gl_tensor *tn = &b->tensors[t];
		CHECK(strcmp(tn->name, names[t]) == 0, "tensor %d name %s", t, tn->name);
		CHECK(tn->dtype == dtypes[t], "%s dtype %u", tn->name, tn->dtype);
		CHECK(tn->dl_code == codes[t] && tn->dl_bits == bits[t] && tn->dl_lanes == 1, "%s DLPack type %u/%u/%u", tn->name,
		      tn->dl_code, tn->dl_bits, tn->dl_lanes);
		CHECK(tn->ndim == ndims[t] && tn->shape[0] == b->count, "%s ndim %d shape[0] %lld", tn->name, tn->ndim,
		      (long long)tn->shape[0]);
		if (ndims[t] == 2) CHECK(tn->shape[1] == inner[t] && tn->strides[0] == inner[t] && tn->strides[1] == 1, "%s shape/strides", tn->name);
		CHECK(tn->nbytes == (uint64_t)(b->count * inner[t] * esize[t]), "%s nbytes %llu", tn->name, (unsigned long long)tn->nbytes);
		CHECK(tn->device_type == (want_device ? GL_DL_CUDA : GL_DL_CPU), "%s device type %d", tn->name, tn->device_type);
		unsigned char *buf = malloc(tn->nbytes + 1);
		int rc = gl_copy_to_host(l, tn, buf, tn->nbytes);
		CHECK(rc == GL_OK, "gl_copy_to_host: %d %s", rc, gl_last_error());
		if (!want_device) CHECK(memcmp(buf, tn->data, tn->nbytes) == 0, "%s host data differs from its copy", tn->name);
		for (int j = 0; j < b->count; j++) {
			uint64_t id = id_of(k, j);
			for (int c = 0; c < inner[t]; c++) {
				const unsigned char *p = buf + (size_t)(j * inner[t] + c) * esize[t];
				if (t == 0) {
					float v; memcpy(&v, p, 4);
					CHECK(v == (float)id + (float)c / 4, "step %d x[%d][%d] = %g", k, j, c, v);
				} else if (t == 1) {
					int64_t v; memcpy(&v, p, 8);
					CHECK(v == -(int64_t)id, "step %d y[%d] = %lld", k, j, (long long)v);
				} else {
					CHECK(*p == (unsigned char)(id + c), "step %d m[%d][%d] = %u", k, j, c, *p);
				}
			}
		}
		free(buf);
	}
}

int main(int argc, char **argv) {
	const char *dir, *backend;
	if (!parse_args(argc, argv, &dir, &backend)) return 2;
	int on_device = strcmp(backend, "cuda") == 0;

	gl_loader *l = NULL;
	int rc = gl_open("/nonexistent/shards", 0, 0, NULL, &l);
	CHECK(rc == GL_ERR_NO_SHARD_SET, "open of a missing set: %d", rc);
	CHECK(strstr(gl_last_error(), "/nonexistent/shards: no shard set: no such directory") != NULL, "last error %s", gl_last_error());
	rc = gl_open(dir, 99, 0, NULL, &l);
	CHECK(rc == GL_ERR_OUTSIDE_PLAN, "open of epoch 99: %d", rc);
	CHECK(strstr(gl_last_error(), "epoch 99 outside the plan's epochs [0, 2)") != NULL, "last error %s", gl_last_error());
	CHECK(gl_abi_version() == GL_ABI_VERSION, "abi version %d", gl_abi_version());
	gl_options bad = {0};
	bad.backend = "tpu";
	rc = gl_open(dir, epoch, rank_, &bad, &l);
	CHECK(rc == GL_ERR_INVALID, "open with backend tpu: %d (%s)", rc, gl_last_error());
	bad.backend = backend;
	bad.plan_fingerprint = "plan:other";
	rc = gl_open(dir, epoch, rank_, &bad, &l);
	CHECK(rc == GL_ERR_PLAN_MISMATCH, "open with another plan: %d (%s)", rc, gl_last_error());

	gl_options o = {0};
	o.backend = backend;
	o.prefetch = 2;
	o.verify_checksums = 1;
	rc = gl_open(dir, epoch, rank_, &o, &l);
	if (rc != GL_OK) {
		fprintf(stderr, "gl_open: %d %s\n", rc, gl_last_error());
		return 1;
	}
	/* NULL arguments are GL_ERR_INVALID (gpuload.h), never another code. */
	rc = gl_next(l, NULL);
	CHECK(rc == GL_ERR_INVALID, "gl_next(l, NULL): %d (%s)", rc, gl_last_error());
	rc = gl_release(l, NULL);
	CHECK(rc == GL_ERR_INVALID, "gl_release(l, NULL): %d (%s)", rc, gl_last_error());
	CHECK(strstr(gl_last_error(), "invalid argument: NULL pointer") != NULL, "last error %s", gl_last_error());
	gl_batch *none = NULL;
	rc = gl_next(NULL, &none);
	CHECK(rc == GL_ERR_INVALID, "gl_next(NULL, &b): %d (%s)", rc, gl_last_error());
	CHECK(gl_steps(l) == steps, "steps %lld", (long long)gl_steps(l));
	CHECK(gl_ring(l) == 3, "ring %lld", (long long)gl_ring(l));
	gl_info info;
	rc = gl_get_info(l, &info);
	CHECK(rc == GL_OK, "gl_get_info: %d %s", rc, gl_last_error());
	CHECK(info.world_size == 2 && info.epochs == 2 && info.workers == 1 && info.global_batch == 2 * bsz &&
	      info.steps_per_epoch == steps && info.batch_size == bsz && info.num_tensors == 3,
	      "info world %lld epochs %lld workers %lld G %lld steps %lld b %lld tensors %lld", (long long)info.world_size,
	      (long long)info.epochs, (long long)info.workers, (long long)info.global_batch, (long long)info.steps_per_epoch,
	      (long long)info.batch_size, (long long)info.num_tensors);
	CHECK(strcmp(info.fingerprint, "plan:test-0001") == 0, "fingerprint %s", info.fingerprint);
	CHECK(strcmp(info.order_fingerprint, "order:test-0001") == 0, "order fingerprint %s", info.order_fingerprint);
	gl_tensor ti;
	rc = gl_tensor_info(l, 0, &ti);
	CHECK(rc == GL_OK && strcmp(ti.name, "x") == 0 && ti.dtype == GL_F32 && ti.ndim == 2 && ti.shape[0] == bsz &&
	      ti.shape[1] == 3 && ti.strides[0] == 3 && ti.strides[1] == 1 && ti.nbytes == (uint64_t)bsz * 12 && ti.data == NULL,
	      "tensor 0: rc %d %s dtype %d ndim %d shape %lld %lld nbytes %llu", rc, ti.name, ti.dtype, ti.ndim,
	      (long long)ti.shape[0], (long long)ti.shape[1], (unsigned long long)ti.nbytes);
	CHECK(gl_tensor_info(l, 3, &ti) == GL_ERR_INVALID, "tensor 3 accepted");

	/* Hold the whole ring: the next call must fail, not block. */
	gl_batch *held[3] = {NULL, NULL, NULL};
	for (int k = 0; k < 3; k++) {
		rc = gl_next(l, &held[k]);
		CHECK(rc == GL_OK, "gl_next %d: %d %s", k, rc, gl_last_error());
		if (rc != GL_OK) {
			fprintf(stderr, "%d failures\n", failures);
			return 1;
		}
	}
	gl_batch *extra = NULL;
	rc = gl_next(l, &extra);
	CHECK(rc == GL_ERR_RING_FULL, "gl_next with the ring held: %d", rc);
	for (int k = 0; k < 3; k++) {
		check_batch(l, held[k], k, on_device);
		CHECK(gl_release(l, held[k]) == GL_OK, "release");
	}
	/* The ring-full error is not sticky. */
	for (int k = 3; k < steps; k++) {
		gl_batch *b = NULL;
		rc = gl_next(l, &b);
		CHECK(rc == GL_OK, "gl_next %d: %d %s", k, rc, gl_last_error());
		if (rc != GL_OK) break;
		check_batch(l, b, k, on_device);
		gl_release(l, b);
	}
	gl_batch *b = NULL;
	CHECK(gl_next(l, &b) == GL_EOF, "gl_next after the last step");
	CHECK(gl_seek(l, steps + 1) == GL_ERR_INVALID, "seek past the end");
	CHECK(gl_seek(l, 1) == GL_OK, "seek: %s", gl_last_error());
	rc = gl_next(l, &b);
	CHECK(rc == GL_OK, "gl_next after seek: %d %s", rc, gl_last_error());
	if (rc == GL_OK) check_batch(l, b, 1, on_device);
	/* b stays unreleased: gl_close frees it. */
	CHECK(gl_close(l) == GL_OK, "close: %s", gl_last_error());
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("capi_test %s: OK (%d steps)\n", backend, steps);
	return 0;
}
