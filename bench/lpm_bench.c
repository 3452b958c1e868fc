/*
 * lpm_bench: the route tables' longest-prefix match against DPDK's, on real prefixes.
 *
 * Tables: tor-geoipdb's IPv4 and IPv6 ranges (/usr/share/tor/geoip, geoip6), converted
 * here to CIDR prefixes (each range becomes the fewest aligned blocks covering it), each
 * prefix given a next hop in 1..2^20-1. Keys: uniformly random addresses (IPv6: inside
 * 2000::/4, where the table lives), and addresses inside random prefixes of the table.
 *
 * Peers, measured in the same process on the same prefixes and keys: IPv4 lpm4 (ours),
 * rte_lpm, rte_fib (DIR24_8, 4-octet next hops), lpm128 on IPv4 keys (a poptrie, for the
 * structure choice); IPv6 lpm6 (ours, lpm128), rte_lpm6, rte_fib6 (trie, 4 octets). A
 * reference (one hash per prefix length, probed longest first) answers every key first;
 * every implementation must return the same next hop for every key, single and bulk,
 * or the program aborts. Without DPDK (no IBGW_HAVE_DPDK) the reference is the peer.
 *
 * Timings: R rounds; in each round every implementation runs the same key sets once,
 * single lookups then bulk (bursts of 64). Printed: the median rate per implementation
 * and its ratio to ours (ratio > 1: ours is faster), memory, build time (insert every
 * prefix), and the cost of a delete plus re-add of random prefixes.
 *
 *   lpm_bench [--rounds R] [--keys N] [--updates U] [--v4-only | --v6-only]
 *             [--geoip FILE] [--geoip6 FILE] [--eal "EAL ARGS"]
 *   lpm_bench --write-samples DIR   (writes the unit tests' geoip samples)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "bench/bench_geoip.h"
#include "table/lpm4.h"
#include "table/lpm6.h"
#include "lib/lpm128.h"

#ifdef IBGW_HAVE_DPDK
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wvla"   /* rte_lpm.h's bulk lookup */
#pragma GCC diagnostic ignored "-Wundef" /* rte_ring_elem_pvt.h under clang */
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fib.h>
#include <rte_fib6.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_version.h>
#pragma GCC diagnostic pop
#endif

#define BURST   64
#define MAX_IMP 6

static int rounds = 7;
static uint32_t tbl8_6 = 1u << 20; /* rte_lpm6 / rte_fib6 tbl8 groups */
static unsigned nkeys = 1u << 20;
static unsigned nupdates = 2000;

/* ---- small helpers ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static u128 mask128(unsigned len)
{
	return len ? ~(u128)0 << (128 - len) : 0;
}

/* ---- the reference: one hash set per prefix length, longest probed first ---- */

struct ref {
	unsigned bits;
	u128 *keys; /* (masked addr) per slot; valid where val != 0 */
	uint8_t *lens;
	uint32_t *vals;
	size_t nslots;
	bool has_len[129];
};

static size_t ref_hash(u128 k, unsigned len, size_t nslots)
{
	uint64_t x = (uint64_t)(k >> 64) * 0x9e3779b97f4a7c15ull ^ (uint64_t)k ^ len;

	x *= 0xbf58476d1ce4e5b9ull;
	return (size_t)(x ^ (x >> 31)) & (nslots - 1);
}

static void ref_init(struct ref *r, unsigned bits, size_t n)
{
	memset(r, 0, sizeof(*r));
	r->bits = bits;
	r->nslots = 1;
	while (r->nslots < n * 2 + 16)
		r->nslots <<= 1;
	r->keys = bench_xcalloc(r->nslots, sizeof(*r->keys));
	r->lens = bench_xcalloc(r->nslots, 1);
	r->vals = bench_xcalloc(r->nslots, sizeof(*r->vals));
}

static void ref_put(struct ref *r, u128 k, unsigned len, uint32_t val)
{
	size_t i = ref_hash(k, len, r->nslots);

	while (r->vals[i] && !(r->keys[i] == k && r->lens[i] == len))
		i = (i + 1) & (r->nslots - 1);
	r->keys[i] = k;
	r->lens[i] = (uint8_t)len;
	r->vals[i] = val;
	r->has_len[len] = true;
}

static uint32_t ref_lookup(const struct ref *r, u128 a)
{
	for (int len = (int)r->bits; len >= 0; len--) {
		u128 k;
		size_t i;

		if (!r->has_len[len])
			continue;
		if (r->bits == 32)
			k = a & (len ? (u128)(~0u << (32 - len)) : 0);
		else
			k = a & mask128((unsigned)len);
		for (i = ref_hash(k, (unsigned)len, r->nslots); r->vals[i];
		     i = (i + 1) & (r->nslots - 1))
			if (r->keys[i] == k && r->lens[i] == len)
				return r->vals[i];
	}
	return 0;
}

static void ref_free(struct ref *r)
{
	free(r->keys);
	free(r->lens);
	free(r->vals);
}

/* ---- implementations under test ---- */

struct impl {
	const char *name;
	void *t;
	/* out: 32-bit next hop, 0 for no route */
	void (*single)(void *t, const void *keys, uint32_t *out, unsigned n);
	void (*bulk)(void *t, const void *keys, uint32_t *out, unsigned n);
	double t_single[2][64], t_bulk[2][64];
	size_t bytes;
	double build_s, update_us;
	bool skip;
};

static void lpm4_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i++)
		out[i] = lpm4_lookup(t, k[i]);
}

static void lpm4_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i += BURST)
		lpm4_lookup_bulk(t, k + i, out + i, n - i < BURST ? n - i : BURST);
}

static const uint8_t *v4key(uint32_t addr, uint8_t a[16])
{
	memset(a, 0, 16);
	a[0] = (uint8_t)(addr >> 24);
	a[1] = (uint8_t)(addr >> 16);
	a[2] = (uint8_t)(addr >> 8);
	a[3] = (uint8_t)addr;
	return a;
}

static void p128v4_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i++) {
		uint8_t a[16] = { (uint8_t)(k[i] >> 24), (uint8_t)(k[i] >> 16),
				  (uint8_t)(k[i] >> 8), (uint8_t)k[i] };

		out[i] = lpm128_lookup(t, a);
	}
}

static void lpm6_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint8_t(*k)[16] = keys;

	for (unsigned i = 0; i < n; i++)
		out[i] = lpm6_lookup(t, k[i]);
}

static void lpm6_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint8_t(*k)[16] = keys;

	for (unsigned i = 0; i < n; i += BURST)
		lpm6_lookup_bulk(t, k + i, out + i, n - i < BURST ? n - i : BURST);
}

static void ref4_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i++)
		out[i] = ref_lookup(t, k[i]);
}

static void ref6_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint8_t(*k)[16] = keys;

	for (unsigned i = 0; i < n; i++)
		out[i] = ref_lookup(t, a2u(k[i]));
}

#ifdef IBGW_HAVE_DPDK
static void rlpm_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i++) {
		uint32_t nh;

		out[i] = rte_lpm_lookup(t, k[i], &nh) == 0 ? nh : 0;
	}
}

static void rlpm_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i += BURST) {
		unsigned m = n - i < BURST ? n - i : BURST;

		rte_lpm_lookup_bulk((struct rte_lpm *)t, k + i, out + i, m);
		for (unsigned j = i; j < i + m; j++)
			out[j] = out[j] & RTE_LPM_LOOKUP_SUCCESS ? out[j] & 0xffffff : 0;
	}
}

static void rfib_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;

	for (unsigned i = 0; i < n; i++) {
		uint64_t nh;

		rte_fib_lookup_bulk(t, (uint32_t *)&k[i], &nh, 1);
		out[i] = (uint32_t)nh;
	}
}

static void rfib_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint32_t *k = keys;
	uint64_t nh[BURST];

	for (unsigned i = 0; i < n; i += BURST) {
		unsigned m = n - i < BURST ? n - i : BURST;

		rte_fib_lookup_bulk(t, (uint32_t *)k + i, nh, (int)m);
		for (unsigned j = 0; j < m; j++)
			out[i + j] = (uint32_t)nh[j];
	}
}

static void rlpm6_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	const uint8_t(*k)[16] = keys;

	for (unsigned i = 0; i < n; i++) {
		uint32_t nh;

		out[i] = rte_lpm6_lookup(t, k[i], &nh) == 0 ? nh : 0;
	}
}

static void rlpm6_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	uint8_t(*k)[16] = (uint8_t(*)[16])keys;

	for (unsigned i = 0; i < n; i += BURST) {
		unsigned m = n - i < BURST ? n - i : BURST;
		int32_t *o = (int32_t *)out + i;

		rte_lpm6_lookup_bulk_func(t, k + i, o, m);
		for (unsigned j = 0; j < m; j++)
			out[i + j] = o[j] < 0 ? 0 : (uint32_t)o[j];
	}
}

static void rfib6_single(void *t, const void *keys, uint32_t *out, unsigned n)
{
	uint8_t(*k)[16] = (uint8_t(*)[16])keys;

	for (unsigned i = 0; i < n; i++) {
		uint64_t nh;

		rte_fib6_lookup_bulk(t, k + i, &nh, 1);
		out[i] = (uint32_t)nh;
	}
}

static void rfib6_bulk(void *t, const void *keys, uint32_t *out, unsigned n)
{
	uint8_t(*k)[16] = (uint8_t(*)[16])keys;
	uint64_t nh[BURST];

	for (unsigned i = 0; i < n; i += BURST) {
		unsigned m = n - i < BURST ? n - i : BURST;

		rte_fib6_lookup_bulk(t, k + i, nh, (int)m);
		for (unsigned j = 0; j < m; j++)
			out[i + j] = (uint32_t)nh[j];
	}
}

static bool eal_up;

static uint32_t cfg_groups(uint32_t needed)
{
	return needed + needed / 8 + 1024;
}

static size_t heap_used(void)
{
	struct rte_malloc_socket_stats s;

	if (rte_malloc_get_socket_stats(0, &s) != 0)
		return 0;
	return s.heap_allocsz_bytes;
}
#endif

/* ---- the measurement ---- */

struct keyset {
	const char *name;
	const void *keys;
	const uint32_t *want;
};

static void check(const struct impl *im, const char *what, const struct keyset *ks,
		  const uint32_t *got)
{
	for (unsigned i = 0; i < nkeys; i++)
		if (got[i] != ks->want[i]) {
			fprintf(
			    stderr,
			    "lpm_bench: MISMATCH %s %s, %s keys, key #%u: got %u, reference %u\n",
			    im->name, what, ks->name, i, got[i], ks->want[i]);
			abort();
		}
}

static void measure(struct impl *im, int nim, const struct keyset *ks, int nks)
{
	uint32_t *out = bench_xcalloc(nkeys, sizeof(*out));

	/* Cross-check first (also warms the tables up). */
	for (int i = 0; i < nim; i++) {
		if (im[i].skip)
			continue;
		for (int s = 0; s < nks; s++) {
			im[i].single(im[i].t, ks[s].keys, out, nkeys);
			check(&im[i], "single", &ks[s], out);
			if (im[i].bulk) {
				memset(out, 0xff, nkeys * sizeof(*out));
				im[i].bulk(im[i].t, ks[s].keys, out, nkeys);
				check(&im[i], "bulk", &ks[s], out);
			}
		}
	}
	for (int r = 0; r < rounds; r++)
		for (int s = 0; s < nks; s++)
			for (int i = 0; i < nim; i++) {
				double t0;

				if (im[i].skip)
					continue;
				t0 = bench_now();
				im[i].single(im[i].t, ks[s].keys, out, nkeys);
				im[i].t_single[s][r] = bench_now() - t0;
				if (im[i].bulk) {
					t0 = bench_now();
					im[i].bulk(im[i].t, ks[s].keys, out, nkeys);
					im[i].t_bulk[s][r] = bench_now() - t0;
				}
			}
	free(out);
}

static void report(struct impl *im, int nim, const struct keyset *ks, int nks)
{
	double base[2][2] = { { 0 } };

	printf("  %-22s %-7s %9s %8s %9s %8s\n", "lookups (Mlookup/s)", "keys", "single", "gain",
	       "bulk", "gain");
	for (int s = 0; s < nks; s++) {
		for (int i = 0; i < nim; i++) {
			double ms, mb = 0;

			if (im[i].skip)
				continue;
			ms = bench_median(im[i].t_single[s], rounds);
			if (im[i].bulk)
				mb = bench_median(im[i].t_bulk[s], rounds);
			if (i == 0) {
				base[s][0] = ms;
				base[s][1] = mb;
			}
			printf("  %-22s %-7s %9.1f %7.2fx", im[i].name, ks[s].name,
			       nkeys / ms / 1e6, ms / base[s][0]);
			if (im[i].bulk)
				printf(" %9.1f %7.2fx\n", nkeys / mb / 1e6, mb / base[s][1]);
			else
				printf(" %9s %8s\n", "-", "-");
		}
	}
	printf("  %-22s %12s %10s %10s %10s\n", "table", "memory MiB", "gain", "build s",
	       "update us");
	for (int i = 0; i < nim; i++) {
		if (im[i].skip || !im[i].build_s)
			continue;
		printf("  %-22s %12.1f %9.2fx %10.2f %10.2f\n", im[i].name,
		       (double)im[i].bytes / (1 << 20), (double)im[i].bytes / (double)im[0].bytes,
		       im[i].build_s, im[i].update_us);
	}
}

/* Delete then re-add the same random prefixes; returns microseconds per operation. */
#define UPDATE_LOOP(del, add)                                                                      \
	do {                                                                                       \
		double tu = bench_now();                                                           \
		for (unsigned u = 0; u < nupdates; u++) {                                          \
			size_t j = upd[u];                                                         \
			if (del)                                                                   \
				goto fail;                                                         \
		}                                                                                  \
		for (unsigned u = 0; u < nupdates; u++) {                                          \
			size_t j = upd[u];                                                         \
			if (add)                                                                   \
				goto fail;                                                         \
		}                                                                                  \
		im->update_us = (bench_now() - tu) * 1e6 / (2.0 * nupdates);                       \
	} while (0)

static size_t *pick_updates(size_t n)
{
	size_t *upd = bench_xcalloc(nupdates, sizeof(*upd));
	bool *used = bench_xcalloc(n, 1);

	for (unsigned u = 0; u < nupdates; u++) {
		size_t j;

		do
			j = bench_rnd(&rng_state) % n;
		while (used[j]);
		used[j] = true;
		upd[u] = j;
	}
	free(used);
	return upd;
}

/* ---- IPv4 ---- */

static int bench4(const char *path)
{
	struct vec v = { .size = sizeof(struct pfx4) };
	struct impl imps[MAX_IMP], *im;
	struct ref ref;
	struct keyset ks[2];
	uint32_t *keys[2], *want[2];
	const struct pfx4 *p;
	size_t *upd;
	uint32_t ngroups;
	int nim = 0;
	double t0;

	if (!load_geoip(path, false, &v)) {
		printf("IPv4: %s not readable: install tor-geoipdb (make bench-deps); skipped\n",
		       path);
		return 0;
	}
	p = v.p;
	ngroups = groups_needed(p, v.n);
	printf("IPv4: %zu prefixes from %s (%u /24s hold longer prefixes), %u keys per set, "
	       "%d rounds, medians\n",
	       v.n, path, ngroups, nkeys, rounds);
	memset(imps, 0, sizeof(imps));
	upd = pick_updates(v.n);

	ref_init(&ref, 32, v.n);
	for (size_t i = 0; i < v.n; i++)
		ref_put(&ref, p[i].addr, p[i].len, p[i].nh);
	for (int s = 0; s < 2; s++) {
		keys[s] = bench_xcalloc(nkeys, sizeof(uint32_t));
		want[s] = bench_xcalloc(nkeys, sizeof(uint32_t));
		for (unsigned i = 0; i < nkeys; i++) {
			if (s == 0) {
				keys[s][i] = (uint32_t)bench_rnd(&rng_state);
			} else {
				const struct pfx4 *q = &p[bench_rnd(&rng_state) % v.n];
				uint32_t host =
				    q->len == 32 ? 0 : (uint32_t)bench_rnd(&rng_state) >> q->len;

				keys[s][i] = q->addr | host;
			}
			want[s][i] = ref_lookup(&ref, keys[s][i]);
		}
	}
	ks[0] = (struct keyset){ "random", keys[0], want[0] };
	ks[1] = (struct keyset){ "inside", keys[1], want[1] };

	/* lpm4 (ours) */
	{
		struct lpm4_config cfg = { .max_groups = ngroups + ngroups / 8 + 1024,
					   .small_pages = getenv("LPM4_SMALL_PAGES") != NULL };
		struct lpm4 *t;
		struct lpm4_stats st;

		im = &imps[nim++];
		im->name = "lpm4 (DIR-24-8)";
		if (lpm4_create(&t, &cfg))
			goto fail;
		t0 = bench_now();
		for (size_t i = 0; i < v.n; i++)
			if (lpm4_add(t, p[i].addr, p[i].len, p[i].nh))
				goto fail;
		im->build_s = bench_now() - t0;
		UPDATE_LOOP(lpm4_del(t, p[j].addr, p[j].len),
			    lpm4_add(t, p[j].addr, p[j].len, p[j].nh));
		lpm4_stats(t, &st);
		im->bytes = st.reader_bytes + st.writer_bytes;
		im->t = t;
		im->single = lpm4_single;
		im->bulk = lpm4_bulk;
		printf("  lpm4: %u groups in use; reader %.1f MiB + writer %.1f MiB\n",
		       st.groups_used, (double)st.reader_bytes / (1 << 20),
		       (double)st.writer_bytes / (1 << 20));
	}
	/* lpm128 with IPv4 keys: the poptrie alternative */
	{
		struct lpm128 *t;
		struct lpm128_stats st;
		uint8_t a[16];

		im = &imps[nim++];
		im->name = "lpm128 (poptrie) v4";
		if (lpm128_new(&t, NULL, NULL))
			goto fail;
		t0 = bench_now();
		for (size_t i = 0; i < v.n; i++)
			if (lpm128_add(t, v4key(p[i].addr, a), p[i].len, p[i].nh))
				goto fail;
		im->build_s = bench_now() - t0;
		UPDATE_LOOP(lpm128_del(t, v4key(p[j].addr, a), p[j].len),
			    lpm128_add(t, v4key(p[j].addr, a), p[j].len, p[j].nh));
		lpm128_stats(t, &st);
		im->bytes = st.bytes;
		im->t = t;
		im->single = p128v4_single;
	}
#ifdef IBGW_HAVE_DPDK
	if (eal_up) {
		struct rte_lpm_config lc = { .max_rules = (uint32_t)v.n + 1024,
					     .number_tbl8s = cfg_groups(ngroups) };
		struct rte_fib_conf fc = { .type = RTE_FIB_DIR24_8,
					   .default_nh = 0,
					   .max_routes = (int)v.n + 1024,
					   .dir24_8 = { .nh_sz = RTE_FIB_DIR24_8_4B,
							.num_tbl8 = cfg_groups(ngroups) } };
		struct rte_lpm *l;
		struct rte_fib *f;
		size_t h0;

		im = &imps[nim++];
		im->name = "rte_lpm";
		h0 = heap_used();
		l = rte_lpm_create("bench4", 0, &lc);
		if (!l)
			goto fail;
		t0 = bench_now();
		for (size_t i = 0; i < v.n; i++)
			if (rte_lpm_add(l, p[i].addr, p[i].len, p[i].nh))
				goto fail;
		im->build_s = bench_now() - t0;
		UPDATE_LOOP(rte_lpm_delete(l, p[j].addr, p[j].len),
			    rte_lpm_add(l, p[j].addr, p[j].len, p[j].nh));
		im->bytes = heap_used() - h0;
		im->t = l;
		im->single = rlpm_single;
		im->bulk = rlpm_bulk;

		im = &imps[nim++];
		im->name = "rte_fib (dir24_8)";
		h0 = heap_used();
		f = rte_fib_create("bench4", 0, &fc);
		if (!f)
			goto fail;
		t0 = bench_now();
		for (size_t i = 0; i < v.n; i++)
			if (rte_fib_add(f, p[i].addr, p[i].len, p[i].nh))
				goto fail;
		im->build_s = bench_now() - t0;
		UPDATE_LOOP(rte_fib_delete(f, p[j].addr, p[j].len),
			    rte_fib_add(f, p[j].addr, p[j].len, p[j].nh));
		im->bytes = heap_used() - h0;
		im->t = f;
		im->single = rfib_single;
		im->bulk = rfib_bulk;
	}
#endif
	im = &imps[nim++];
	im->name = "reference (hash/len)";
	im->t = &ref;
	im->single = ref4_single;
	im->bytes = ref.nslots * (sizeof(*ref.keys) + 1 + sizeof(*ref.vals));

	measure(imps, nim, ks, 2);
	printf("  cross-check: every implementation gave the reference's next hop for all "
	       "%u keys, single and bulk\n",
	       2 * nkeys);
	report(imps, nim, ks, 2);

	lpm4_free(imps[0].t);
	lpm128_free(imps[1].t);
#ifdef IBGW_HAVE_DPDK
	if (eal_up) {
		rte_lpm_free(imps[2].t);
		rte_fib_free(imps[3].t);
	}
#endif
	ref_free(&ref);
	for (int s = 0; s < 2; s++) {
		free(keys[s]);
		free(want[s]);
	}
	free(upd);
	free(v.p);
	return 0;
fail:
	fprintf(stderr, "lpm_bench: IPv4 %s: build or update failed\n", im->name);
	return 1;
}

/* ---- IPv6 ---- */

static int bench6(const char *path)
{
	struct vec v = { .size = sizeof(struct pfx6) };
	struct impl imps[MAX_IMP], *im;
	struct ref ref;
	struct keyset ks[2];
	uint8_t(*keys[2])[16];
	uint32_t *want[2];
	const struct pfx6 *p;
	size_t *upd;
	int nim = 0;
	double t0;

	if (!load_geoip(path, true, &v)) {
		printf("IPv6: %s not readable: install tor-geoipdb (make bench-deps); skipped\n",
		       path);
		return 0;
	}
	p = v.p;
	printf("IPv6: %zu prefixes from %s, %u keys per set, %d rounds, medians\n", v.n, path,
	       nkeys, rounds);
	memset(imps, 0, sizeof(imps));
	upd = pick_updates(v.n);
	ref_init(&ref, 128, v.n);
	for (size_t i = 0; i < v.n; i++)
		ref_put(&ref, a2u(p[i].addr), p[i].len, p[i].nh);
	for (int s = 0; s < 2; s++) {
		keys[s] = bench_xcalloc(nkeys, 16);
		want[s] = bench_xcalloc(nkeys, sizeof(uint32_t));
		for (unsigned i = 0; i < nkeys; i++) {
			u128 a;

			if (s == 0) {
				/* uniform inside 2000::/4 */
				a = ((u128)bench_rnd(&rng_state) << 64 | bench_rnd(&rng_state)) >>
					4 |
				    (u128)2 << 124;
			} else {
				const struct pfx6 *q = &p[bench_rnd(&rng_state) % v.n];
				u128 host =
				    ((u128)bench_rnd(&rng_state) << 64 | bench_rnd(&rng_state)) &
				    ~mask128(q->len);

				a = a2u(q->addr) | host;
			}
			u2a(a, keys[s][i]);
			want[s][i] = ref_lookup(&ref, a);
		}
	}
	ks[0] = (struct keyset){ "random", keys[0], want[0] };
	ks[1] = (struct keyset){ "inside", keys[1], want[1] };

	{
		struct lpm6 *t;
		struct lpm6_stats st;

		im = &imps[nim++];
		im->name = "lpm6 (lpm128)";
		if (lpm6_create(&t, NULL))
			goto fail;
		t0 = bench_now();
		for (size_t i = 0; i < v.n; i++)
			if (lpm6_add(t, p[i].addr, p[i].len, p[i].nh))
				goto fail;
		im->build_s = bench_now() - t0;
		UPDATE_LOOP(lpm6_del(t, p[j].addr, p[j].len),
			    lpm6_add(t, p[j].addr, p[j].len, p[j].nh));
		lpm6_stats(t, &st);
		/* Nodes come from lpm128's arena: count the slabs it carved (in use, free or
		 * left by the IPv4 run's lpm128) where that is more than the nodes in use. */
		{
			size_t fixed = (sizeof(uint64_t) << LPM128_DIR_BITS) +
				       ((2u << LPM128_DIR_BITS) - 1) * sizeof(uint32_t);
			size_t held = fixed + st.arena_bytes;

			im->bytes = held > st.reader_bytes ? held : st.reader_bytes;
		}
		im->t = t;
		im->single = lpm6_single;
		im->bulk = lpm6_bulk;
		printf("  lpm6: %zu nodes, %.1f MiB in use; memory counted %.1f MiB (arena "
		       "slabs %.1f MiB)\n",
		       st.nodes, (double)st.reader_bytes / (1 << 20), (double)im->bytes / (1 << 20),
		       (double)st.arena_bytes / (1 << 20));
	}
#ifdef IBGW_HAVE_DPDK
	if (eal_up) {
		uint32_t ntbl8 = tbl8_6;
		struct rte_lpm6_config lc = { .max_rules = (uint32_t)v.n + 1024,
					      .number_tbl8s = ntbl8 };
		struct rte_fib6_conf fc = { .type = RTE_FIB6_TRIE,
					    .default_nh = 0,
					    .max_routes = (int)v.n + 1024,
					    .trie = { .nh_sz = RTE_FIB6_TRIE_4B,
						      .num_tbl8 = ntbl8 } };
		struct rte_lpm6 *l;
		struct rte_fib6 *f;
		size_t h0;

		im = &imps[nim++];
		im->name = "rte_lpm6";
		h0 = heap_used();
		l = rte_lpm6_create("bench6", 0, &lc);
		if (!l) {
			im->skip = true;
			printf("  rte_lpm6_create: %s (try a larger -m)\n",
			       rte_strerror(rte_errno));
		} else {
			int rc = 0;

			t0 = bench_now();
			for (size_t i = 0; i < v.n && !rc; i++)
				rc = rte_lpm6_add(l, p[i].addr, p[i].len, p[i].nh);
			if (rc) {
				printf("  rte_lpm6_add: %d (%u tbl8s too few?); skipped\n", rc,
				       ntbl8);
				im->skip = true;
			} else {
				im->build_s = bench_now() - t0;
				UPDATE_LOOP(rte_lpm6_delete(l, p[j].addr, p[j].len),
					    rte_lpm6_add(l, p[j].addr, p[j].len, p[j].nh));
				im->bytes = heap_used() - h0;
			}
			im->t = l;
			im->single = rlpm6_single;
			im->bulk = rlpm6_bulk;
		}

		im = &imps[nim++];
		im->name = "rte_fib6 (trie)";
		h0 = heap_used();
		f = rte_fib6_create("bench6", 0, &fc);
		if (!f) {
			im->skip = true;
			printf("  rte_fib6_create: %s (try a larger -m)\n",
			       rte_strerror(rte_errno));
		} else {
			int rc = 0;

			t0 = bench_now();
			for (size_t i = 0; i < v.n && !rc; i++)
				rc = rte_fib6_add(f, p[i].addr, p[i].len, p[i].nh);
			if (rc) {
				printf("  rte_fib6_add: %d (%u tbl8s too few?); skipped\n", rc,
				       ntbl8);
				im->skip = true;
			} else {
				im->build_s = bench_now() - t0;
				UPDATE_LOOP(rte_fib6_delete(f, p[j].addr, p[j].len),
					    rte_fib6_add(f, p[j].addr, p[j].len, p[j].nh));
				im->bytes = heap_used() - h0;
			}
			im->t = f;
			im->single = rfib6_single;
			im->bulk = rfib6_bulk;
		}
	}
#endif
	im = &imps[nim++];
	im->name = "reference (hash/len)";
	im->t = &ref;
	im->single = ref6_single;
	im->bytes = ref.nslots * (sizeof(*ref.keys) + 1 + sizeof(*ref.vals));

	measure(imps, nim, ks, 2);
	printf("  cross-check: every implementation gave the reference's next hop for all "
	       "%u keys, single and bulk\n",
	       2 * nkeys);
	report(imps, nim, ks, 2);

	lpm6_free(imps[0].t);
#ifdef IBGW_HAVE_DPDK
	if (eal_up) {
		if (imps[1].t)
			rte_lpm6_free(imps[1].t);
		if (imps[2].t)
			rte_fib6_free(imps[2].t);
	}
#endif
	ref_free(&ref);
	for (int s = 0; s < 2; s++) {
		free(keys[s]);
		free(want[s]);
	}
	free(upd);
	free(v.p);
	return 0;
fail:
	fprintf(stderr, "lpm_bench: IPv6 %s: build or update failed\n", im->name);
	return 1;
}

/* ---- unit-test samples ---- */

/* Windows of consecutive prefixes spread over the table: local structure kept. */
static int write_samples(const char *dir, const char *g4, const char *g6)
{
	for (int six = 0; six < 2; six++) {
		struct vec v = { .size = six ? sizeof(struct pfx6) : sizeof(struct pfx4) };
		char path[512], buf[64];
		const size_t total = 4096, win = 64;
		FILE *f;

		if (!load_geoip(six ? g6 : g4, six, &v)) {
			fprintf(stderr, "lpm_bench: cannot read %s\n", six ? g6 : g4);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/geoip%d-sample.txt", dir, six ? 6 : 4);
		f = fopen(path, "w");
		if (!f) {
			perror(path);
			return 1;
		}
		fprintf(
		    f,
		    "# %zu of the %zu CIDR prefixes converted from tor-geoipdb's %s,\n"
		    "# in windows of %zu consecutive prefixes (bench/lpm_bench --write-samples)\n",
		    total, v.n, six ? g6 : g4, win);
		for (size_t w = 0; w < total / win; w++) {
			size_t start = w * (v.n / (total / win));

			for (size_t i = start; i < start + win && i < v.n; i++) {
				if (six) {
					const struct pfx6 *q = (const struct pfx6 *)v.p + i;

					inet_ntop(AF_INET6, q->addr, buf, sizeof(buf));
					fprintf(f, "%s/%u\n", buf, q->len);
				} else {
					const struct pfx4 *q = (const struct pfx4 *)v.p + i;
					uint32_t be = htonl(q->addr);

					inet_ntop(AF_INET, &be, buf, sizeof(buf));
					fprintf(f, "%s/%u\n", buf, q->len);
				}
			}
		}
		fclose(f);
		free(v.p);
		printf("wrote %s\n", path);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *g4 = "/usr/share/tor/geoip", *g6 = "/usr/share/tor/geoip6";
	const char *eal = "--no-huge --no-pci --no-shconf --no-telemetry -m 3072 -l 0 "
			  "--log-level=error";
	bool do4 = true, do6 = true;
	int rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when redirected too */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			nkeys = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--updates") && i + 1 < argc)
			nupdates = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--geoip") && i + 1 < argc)
			g4 = argv[++i];
		else if (!strcmp(argv[i], "--geoip6") && i + 1 < argc)
			g6 = argv[++i];
		else if (!strcmp(argv[i], "--tbl8-6") && i + 1 < argc)
			tbl8_6 = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--eal") && i + 1 < argc)
			eal = argv[++i];
		else if (!strcmp(argv[i], "--v4-only"))
			do6 = false;
		else if (!strcmp(argv[i], "--v6-only"))
			do4 = false;
		else if (!strcmp(argv[i], "--write-samples") && i + 1 < argc)
			return write_samples(argv[i + 1], g4, g6);
		else {
			fprintf(stderr,
				"usage: lpm_bench [--rounds R] [--keys N] [--updates U] [--v4-only|"
				"--v6-only] [--geoip F] [--geoip6 F] [--eal ARGS] | "
				"--write-samples DIR\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || nkeys < BURST)
		return 2;
#ifdef IBGW_HAVE_DPDK
	{
		char *copy = strdup(eal), *args[32] = { "lpm_bench" }, *tok, *save = NULL;
		int n = 1;

		for (tok = strtok_r(copy, " ", &save); tok && n < 31;
		     tok = strtok_r(NULL, " ", &save))
			args[n++] = tok;
		eal_up = rte_eal_init(n, args) >= 0;
		printf("DPDK %s: EAL %s (%s)\n", rte_version(), eal_up ? "up" : "failed", eal);
	}
#else
	(void)eal;
	printf("DPDK was not compiled in (no libdpdk-dev at build time): the peer is the "
	       "reference (a hash per prefix length)\n");
#endif
	if (do4)
		rc |= bench4(g4);
	if (do6)
		rc |= bench6(g6);
	return rc;
}
