/*
 * capi_jagged_test: reads a shard set written by testshards.WriteJagged
 * (shard format 2.0) through libgpuload.so and checks every value and
 * offset of its jagged tensors, the fixed tensor beside them, and the
 * layout of the version 3 structs.
 *
 * usage: capi_jagged_test DIR EPOCH RANK BATCH STEPS LAST_COUNT PADS BACKEND
 * Values of sample id: x[c] = id + c/4 (F32 [3]); h (I32 [] jagged) has
 * id mod 4 values h[e] = 10*id + e; p (U16 [2] jagged) has id mod 3 values
 * p[e][c] = (id + 2e + c) mod 65536; ids as in testshards.Config.IDs.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpuload.h"
#include "capitest.h"

/* Version 3 adds kind in padding and offsets at the end: nothing of version
 * 2 moves. */
_Static_assert(sizeof(gl_tensor) == 192, "gl_tensor size");
_Static_assert(offsetof(gl_tensor, kind) == 14 && offsetof(gl_tensor, ndim) == 16 && offsetof(gl_tensor, shape) == 24 &&
	       offsetof(gl_tensor, data) == 168 && offsetof(gl_tensor, device_id) == 188, "gl_tensor layout");
_Static_assert(offsetof(gl_batch, internal) == 48 && offsetof(gl_batch, offsets) == 56, "gl_batch layout");

static int len_of(int t, uint64_t id) { return t == 1 ? (int)(id % 4) : (int)(id % 3); }

/* copy returns a host copy of tensor tn (freed by the caller). */
static unsigned char *copy(gl_loader *l, const gl_tensor *tn, int on_device) {
	unsigned char *buf = malloc(tn->nbytes + 1);
	int rc = gl_copy_to_host(l, tn, buf, tn->nbytes);
	CHECK(rc == GL_OK, "gl_copy_to_host %s: %d %s", tn->name, rc, gl_last_error());
	if (!on_device && tn->nbytes) CHECK(memcmp(buf, tn->data, tn->nbytes) == 0, "%s host data differs from its copy", tn->name);
	return buf;
}

static void check_jagged(gl_loader *l, const gl_batch *b, int k, int t, int on_device) {
	static const char *names[3] = {"x", "h", "p"};
	const gl_tensor *v = &b->tensors[t], *o = &b->offsets[t];
	int64_t n = 0;
	for (int j = 0; j < b->count; j++) n += len_of(t, id_of(k, j));
	int per = t == 1 ? 1 : 2, esize = t == 1 ? 4 : 2;
	int want_dev = on_device ? GL_DL_CUDA : GL_DL_CPU;
	CHECK(strcmp(v->name, names[t]) == 0 && strcmp(o->name, names[t]) == 0, "names %s %s", v->name, o->name);
	CHECK(v->kind == GL_TENSOR_JAGGED, "%s kind %u", v->name, v->kind);
	CHECK(v->dtype == (t == 1 ? GL_I32 : GL_U16) && v->dl_code == (t == 1 ? 0 : 1) && v->dl_bits == 8 * esize,
	      "%s dtype %u DLPack %u/%u", v->name, v->dtype, v->dl_code, v->dl_bits);
	CHECK(v->ndim == (t == 1 ? 1 : 2) && v->shape[0] == n && v->strides[0] == per && v->nbytes == (uint64_t)(n * per * esize),
	      "step %d %s ndim %d shape[0] %lld (want %lld) stride %lld nbytes %llu", k, v->name, v->ndim,
	      (long long)v->shape[0], (long long)n, (long long)v->strides[0], (unsigned long long)v->nbytes);
	if (t == 2) CHECK(v->shape[1] == 2 && v->strides[1] == 1, "p per-value shape %lld stride %lld", (long long)v->shape[1], (long long)v->strides[1]);
	CHECK(o->kind == GL_TENSOR_FIXED && o->dtype == GL_I64 && o->dl_code == 0 && o->dl_bits == 64 && o->ndim == 1 &&
	      o->shape[0] == b->count + 1 && o->strides[0] == 1 && o->nbytes == (uint64_t)(8 * (b->count + 1)) &&
	      ((uintptr_t)o->data & 7) == 0, "step %d %s offsets: dtype %u ndim %d shape %lld nbytes %llu", k, v->name, o->dtype,
	      o->ndim, (long long)o->shape[0], (unsigned long long)o->nbytes);
	CHECK(v->device_type == want_dev && o->device_type == want_dev, "%s devices %d %d", v->name, v->device_type, o->device_type);
	unsigned char *vals = copy(l, v, on_device), *offs = copy(l, o, on_device);
	int64_t at = 0;
	for (int j = 0; j <= b->count; j++) {
		int64_t got;
		memcpy(&got, offs + 8 * j, 8);
		CHECK(got == at, "step %d %s offsets[%d] = %lld, want %lld", k, v->name, j, (long long)got, (long long)at);
		if (j == b->count) break;
		uint64_t id = id_of(k, j);
		for (int e = 0; e < len_of(t, id); e++) {
			const unsigned char *p = vals + (size_t)(at + e) * per * esize;
			if (t == 1) {
				int32_t x;
				memcpy(&x, p, 4);
				CHECK(x == (int32_t)(10 * id) + e, "step %d h[%d][%d] = %d", k, j, e, x);
			} else {
				for (int c = 0; c < 2; c++) {
					uint16_t x;
					memcpy(&x, p + 2 * c, 2);
					CHECK(x == (uint16_t)(id + 2 * e + c), "step %d p[%d][%d][%d] = %u", k, j, e, c, x);
				}
			}
		}
		at += len_of(t, id);
	}
	free(vals);
	free(offs);
}

static void check_batch(gl_loader *l, const gl_batch *b, int k, int on_device) {
	CHECK(b->step == k && b->count == count_of(k) && b->pads == pads_of(k) && b->num_tensors == 3,
	      "step %lld count %d pads %d tensors %d", (long long)b->step, b->count, b->pads, b->num_tensors);
	for (int j = 0; j < b->count; j++)
		CHECK(b->sample_ids[j] == id_of(k, j), "step %d id[%d] %llu", k, j, (unsigned long long)b->sample_ids[j]);
	const gl_tensor *x = &b->tensors[0], *xo = &b->offsets[0];
	CHECK(x->kind == GL_TENSOR_FIXED && x->ndim == 2 && x->shape[0] == b->count && x->shape[1] == 3 &&
	      x->nbytes == (uint64_t)(12 * b->count), "x kind %u ndim %d shape %lld", x->kind, x->ndim, (long long)x->shape[0]);
	CHECK(xo->data == NULL && xo->ndim == 0 && xo->nbytes == 0 && xo->name == NULL, "x has an offsets entry: ndim %d", xo->ndim);
	unsigned char *buf = copy(l, x, on_device);
	for (int j = 0; j < b->count; j++) {
		for (int c = 0; c < 3; c++) {
			float v;
			memcpy(&v, buf + (size_t)(j * 3 + c) * 4, 4);
			CHECK(v == (float)id_of(k, j) + (float)c / 4, "step %d x[%d][%d] = %g", k, j, c, v);
		}
	}
	free(buf);
	check_jagged(l, b, k, 1, on_device);
	check_jagged(l, b, k, 2, on_device);
}

int main(int argc, char **argv) {
	const char *dir, *backend;
	if (!parse_args(argc, argv, &dir, &backend)) return 2;
	int on_device = strcmp(backend, "cuda") == 0;
	CHECK(gl_abi_version() == 3 && GL_ABI_VERSION == 3, "abi version %d", gl_abi_version());

	gl_options o = {0};
	o.backend = backend;
	o.prefetch = 2;
	o.verify_checksums = 1;
	gl_loader *l = NULL;
	int rc = gl_open(dir, epoch, rank_, &o, &l);
	if (rc != GL_OK) {
		fprintf(stderr, "gl_open: %d %s\n", rc, gl_last_error());
		return 1;
	}
	gl_tensor ti;
	rc = gl_tensor_info(l, 2, &ti);
	CHECK(rc == GL_OK && strcmp(ti.name, "p") == 0 && ti.kind == GL_TENSOR_JAGGED && ti.dtype == GL_U16 && ti.ndim == 2 &&
	      ti.shape[0] == -1 && ti.shape[1] == 2 && ti.strides[0] == 2 && ti.strides[1] == 1 && ti.nbytes == 0 && ti.data == NULL,
	      "tensor 2: rc %d kind %u ndim %d shape %lld %lld strides %lld nbytes %llu", rc, ti.kind, ti.ndim,
	      (long long)ti.shape[0], (long long)ti.shape[1], (long long)ti.strides[0], (unsigned long long)ti.nbytes);
	rc = gl_tensor_info(l, 0, &ti);
	CHECK(rc == GL_OK && ti.kind == GL_TENSOR_FIXED && ti.shape[0] == bsz, "tensor 0: kind %u shape %lld", ti.kind, (long long)ti.shape[0]);

	for (int pass = 0; pass < 2; pass++) {
		for (int k = 0; k < steps; k++) {
			gl_batch *b = NULL;
			rc = gl_next(l, &b);
			CHECK(rc == GL_OK, "gl_next %d: %d %s", k, rc, gl_last_error());
			if (rc != GL_OK) break;
			check_batch(l, b, k, on_device);
			CHECK(gl_release(l, b) == GL_OK, "release");
		}
		gl_batch *b = NULL;
		CHECK(gl_next(l, &b) == GL_EOF, "gl_next after the last step");
		CHECK(gl_seek(l, 0) == GL_OK, "seek: %s", gl_last_error());
	}
	CHECK(gl_close(l) == GL_OK, "close: %s", gl_last_error());
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("capi_jagged_test %s: OK (%d steps, twice)\n", backend, steps);
	return 0;
}
