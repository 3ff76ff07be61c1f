/*
 * capi_threads_test: two threads call gl_next, gl_steps and gl_release on
 * one loader at the same time, and every step of the shard reaches exactly
 * one of them, whole: its count, pad count and sample ids as in
 * testshards.Config (and on the host backend y = -id). Repeated over many
 * passes (gl_seek(0) between them) so that the calls overlap.
 *
 * usage: capi_threads_test DIR EPOCH RANK BATCH STEPS LAST_COUNT PADS BACKEND
 */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include "gpuload.h"
#include "capitest.h"

#define PASSES 300
#define MAX_STEPS 64

static gl_loader *l;
static int host;
static int seen[MAX_STEPS];
static pthread_mutex_t seen_mu = PTHREAD_MUTEX_INITIALIZER;

static void *reader(void *arg) {
	(void)arg;
	for (;;) {
		gl_batch *b = NULL;
		int rc = gl_next(l, &b);
		if (rc == GL_EOF) break;
		if (rc == GL_ERR_RING_FULL) { /* the other thread holds the last slot */
			sched_yield();
			continue;
		}
		CHECK(rc == GL_OK, "gl_next: %d %s", rc, gl_last_error());
		if (rc != GL_OK) break;
		CHECK(gl_steps(l) == steps, "gl_steps %lld", (long long)gl_steps(l));
		int k = (int)b->step;
		CHECK(k >= 0 && k < steps, "step %d", k);
		if (k >= 0 && k < steps) {
			CHECK(b->count == count_of(k) && b->pads == pads_of(k), "step %d count %d pads %d", k, b->count, b->pads);
			for (int j = 0; j < b->count && j < count_of(k); j++) {
				CHECK(b->sample_ids[j] == id_of(k, j), "step %d id[%d] %llu", k, j, (unsigned long long)b->sample_ids[j]);
				if (host) {
					int64_t y;
					memcpy(&y, (const char *)b->tensors[1].data + 8 * j, 8);
					CHECK(y == -(int64_t)id_of(k, j), "step %d y[%d] = %lld", k, j, (long long)y);
				}
			}
			pthread_mutex_lock(&seen_mu);
			seen[k]++;
			pthread_mutex_unlock(&seen_mu);
		}
		rc = gl_release(l, b);
		CHECK(rc == GL_OK, "gl_release: %d %s", rc, gl_last_error());
	}
	return NULL;
}

int main(int argc, char **argv) {
	const char *dir, *backend;
	if (!parse_args(argc, argv, &dir, &backend)) return 2;
	if (steps > MAX_STEPS) { fprintf(stderr, "at most %d steps\n", MAX_STEPS); return 2; }
	host = strcmp(backend, "host") == 0;
	gl_options o = {0};
	o.backend = backend;
	int rc = gl_open(dir, epoch, rank_, &o, &l);
	CHECK(rc == GL_OK, "gl_open: %d %s", rc, gl_last_error());
	if (rc != GL_OK) return 1;
	for (int pass = 0; pass < PASSES && !failures; pass++) {
		memset(seen, 0, sizeof seen);
		pthread_t t[2];
		for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, reader, NULL);
		for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
		for (int k = 0; k < steps; k++) CHECK(seen[k] == 1, "pass %d: step %d delivered %d times", pass, k, seen[k]);
		rc = gl_seek(l, 0);
		CHECK(rc == GL_OK, "gl_seek: %d %s", rc, gl_last_error());
	}
	rc = gl_close(l);
	CHECK(rc == GL_OK, "gl_close: %d %s", rc, gl_last_error());
	gl_batch *b;
	rc = gl_next(l, &b);
	CHECK(rc == GL_ERR_CLOSED, "gl_next after gl_close: %d", rc);
	if (failures) return 1;
	printf("capi_threads_test: %d passes of %d steps on two threads, each step delivered once\n", PASSES, steps);
	return 0;
}
