/*
 * Small helpers every benchmark shares: a monotonic clock in seconds, a seeded
 * splitmix64 generator (each benchmark keeps its own state, so its key streams stay
 * as they were), the median of a set of timings (benchmarks report ratios of medians:
 * absolute times drift up to 2x on these machines), and an allocation that exits on
 * failure. Header-only: every C file in bench/ is its own program.
 */
#ifndef IBGW_BENCH_UTIL_H
#define IBGW_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t bench_rnd(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v. */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline void *bench_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p) {
		fprintf(stderr, "benchmark: out of memory\n");
		exit(1);
	}
	return p;
}

#endif
