/*
 * bench_geoip: realistic prefix tables for the benchmarks, from tor-geoipdb's IPv4 and
 * IPv6 ranges (/usr/share/tor/geoip, geoip6; `make bench-deps`). Each range becomes
 * the fewest aligned CIDR blocks covering it (about 560k IPv4 and 600k IPv6 prefixes,
 * disjoint), each given a next hop in 1..NH_MAX derived from the prefix.
 *
 * Header only (static inline): bench/<name>.c files each become a program, so shared
 * code cannot be a .c there. Used by lpm_bench and fwd_bench.
 */
#ifndef IBGW_BENCH_GEOIP_H
#define IBGW_BENCH_GEOIP_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NH_MAX ((1u << 20) - 1)

typedef unsigned __int128 u128;

static inline uint32_t nh_of(uint64_t x)
{
	x *= 0x9e3779b97f4a7c15ull;
	return (uint32_t)(x >> 40) % NH_MAX + 1;
}

static inline u128 a2u(const uint8_t a[16])
{
	u128 v = 0;

	for (int i = 0; i < 16; i++)
		v = v << 8 | a[i];
	return v;
}

static inline void u2a(u128 v, uint8_t a[16])
{
	for (int i = 15; i >= 0; i--, v >>= 8)
		a[i] = (uint8_t)v;
}

struct pfx4 {
	uint32_t addr;
	uint8_t len;
	uint32_t nh;
};

struct pfx6 {
	uint8_t addr[16];
	uint8_t len;
	uint32_t nh;
};

struct vec {
	void *p;
	size_t n, cap, size;
};

static inline void *vec_push(struct vec *v)
{
	if (v->n == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 4096;
		v->p = realloc(v->p, v->cap * v->size);
		if (!v->p) {
			fprintf(stderr, "bench: out of memory\n");
			exit(1);
		}
	}
	return (char *)v->p + v->n++ * v->size;
}

/* Cover [lo, hi] with the fewest aligned blocks (bits-wide space). */
static inline void range_to_cidr(u128 lo, u128 hi, unsigned bits, struct vec *out)
{
	for (;;) {
		unsigned k = 0; /* the block holds 2^k addresses */

		while (k + 1 < bits && !((lo >> k) & 1) && hi - lo >= ((u128)1 << (k + 1)) - 1)
			k++;
		if (bits == 32) {
			struct pfx4 *p = vec_push(out);

			p->addr = (uint32_t)lo;
			p->len = (uint8_t)(32 - k);
			p->nh = nh_of((uint64_t)lo ^ p->len);
		} else {
			struct pfx6 *p = vec_push(out);

			u2a(lo, p->addr);
			p->len = (uint8_t)(128 - k);
			p->nh = nh_of((uint64_t)(lo >> 64) ^ (uint64_t)lo ^ p->len);
		}
		if (hi - lo == ((u128)1 << k) - 1)
			return;
		lo += (u128)1 << k;
	}
}

/* Appends the file's prefixes to out (struct pfx4 or pfx6 by v6; out->size set by
 * the caller); false when the file cannot be read or holds none. */
static inline bool load_geoip(const char *path, bool v6, struct vec *out)
{
	FILE *f = fopen(path, "r");
	char line[256];

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *c1, *c2;
		u128 lo, hi;

		if (line[0] == '#' || !(c1 = strchr(line, ',')) || !(c2 = strchr(c1 + 1, ',')))
			continue;
		*c1 = *c2 = 0;
		if (v6) {
			uint8_t a[16], b[16];

			if (inet_pton(AF_INET6, line, a) != 1 ||
			    inet_pton(AF_INET6, c1 + 1, b) != 1)
				continue;
			lo = a2u(a);
			hi = a2u(b);
		} else {
			lo = strtoull(line, NULL, 10);
			hi = strtoull(c1 + 1, NULL, 10);
		}
		if (hi < lo)
			continue;
		range_to_cidr(lo, hi, v6 ? 128 : 32, out);
	}
	fclose(f);
	return out->n > 0;
}

/* IPv4: how many /24s hold prefixes longer than /24 (DIR-24-8 tbl8 groups). */
static inline uint32_t groups_needed(const struct pfx4 *p, size_t n)
{
	uint8_t *seen = calloc(1u << 21, 1);
	uint32_t g = 0;

	if (!seen) {
		fprintf(stderr, "bench: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t b = p[i].addr >> 8;

		if (p[i].len > 24 && !(seen[b >> 3] & (1u << (b & 7)))) {
			seen[b >> 3] |= (uint8_t)(1u << (b & 7));
			g++;
		}
	}
	free(seen);
	return g;
}

#endif
