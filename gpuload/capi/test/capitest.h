/*
 * capitest.h: what the C test programs share: CHECK, the command line
 * (DIR EPOCH RANK BATCH STEPS LAST_COUNT PADS BACKEND) and the sample ids
 * and counts of testshards.Config.
 */
#ifndef CAPITEST_H
#define CAPITEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                      \
			fprintf(stderr, "\n");                             \
			if (++failures > 20) exit(1);                      \
		}                                                          \
	} while (0)

static int epoch, rank_, bsz, steps, last_count, pads;

/* parse_args reads the command line into the globals above, *dir and
 * *backend; on a wrong argument count it prints the usage and returns 0. */
static inline int parse_args(int argc, char **argv, const char **dir, const char **backend) {
	if (argc != 9) {
		fprintf(stderr, "usage: %s DIR EPOCH RANK BATCH STEPS LAST_COUNT PADS BACKEND\n", argv[0]);
		return 0;
	}
	*dir = argv[1];
	epoch = atoi(argv[2]); rank_ = atoi(argv[3]); bsz = atoi(argv[4]); steps = atoi(argv[5]);
	last_count = atoi(argv[6]); pads = atoi(argv[7]);
	*backend = argv[8];
	return 1;
}

static inline int count_of(int k) { return (k == steps - 1 && last_count > 0) ? last_count : bsz; }
static inline int pads_of(int k) { return k == steps - 1 ? pads : 0; }
static inline uint64_t id_of(int k, int j) {
	uint64_t base = 1000000ull * epoch + 10000ull * rank_;
	int n = count_of(k), p = pads_of(k);
	return j < n - p ? base + (uint64_t)(k * bsz + j) : base + (uint64_t)(j - (n - p));
}

#endif
