/*
 * sa_bench: the SA client's hot paths, each against a peer measured in the same run.
 *
 *  (a) Path cache: sa_path_lookup (the O(1) hash the data path's control side uses) on
 *      caches of 10k and 100k entries filled through the real client (fake transport
 *      answering every PathRecord query, fake clock), with hit keys (cached DGIDs, in
 *      random order) and miss keys (DGIDs never resolved); peer: a naive linear scan
 *      over the same entries comparing the same key (DGID, SGID, P_Key, TClass).
 *  (b) GID LPM: lib/lpm128 on 100k GID prefixes shaped like an IB router's prefix
 *      table (see make_prefixes): /64 subnet prefixes under /56s and /48s, plus the /56,
 *      /48, /40 and /32 aggregates themselves, each pointing at one of 64 routers;
 *      peers on the same prefixes and keys: a naive linear scan (longest match over
 *      every prefix), and with IBGW_HAVE_DPDK rte_lpm6 and rte_fib6 (trie, 4-octet next
 *      hops). Every implementation's answer for every key is checked against a
 *      reference (one hash per prefix length, longest first); any mismatch aborts.
 *      Printed: median lookups/s, ratio to lpm128, memory, build time.
 *  (c) SA load: 10,000 neighbours needing paths at once over N distinct DGIDs
 *      (N = 100, 1000, 10000), on the real client with a fake transport and a fake
 *      clock (1 ms steps, every query answered when sent). Must be exactly N PathRecord
 *      queries (aborts otherwise); printed with the pacing observed (burst, peak per
 *      1-s window, time to send them all, most outstanding) against the naive count of
 *      one query per neighbour.
 *
 * Ratios are of medians over R rounds, all implementations timed in each round (absolute
 * times drift 2x on shared machines; ratios hold).
 *
 *   sa_bench [--rounds R] [--keys N] [--eal "EAL ARGS"]
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_util.h"
#include "lib/ib_gid.h"
#include "lib/log.h"
#include "lib/lpm128.h"
#include "sm-client/sa.h"
#include "sm-client/sa_mad.h"

#ifdef IBGW_HAVE_DPDK
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_fib6.h>
#include <rte_lpm6.h>
#include <rte_malloc.h>
#include <rte_version.h>
#endif

typedef unsigned __int128 u128;

static int rounds = 5;
static unsigned nkeys = 1u << 20;
static uint32_t fib6_tbl8 = 1u << 18; /* rte_fib6's trie: every /64 under a /56 costs one */
#define NAIVE_KEYS 2000u              /* the linear scans get fewer keys (rates are per lookup) */
#define MAX_R      32

/* ---- helpers ---- */

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static u128 a2u(const uint8_t a[16])
{
	u128 v = 0;

	for (int i = 0; i < 16; i++)
		v = v << 8 | a[i];
	return v;
}

static void u2a(u128 v, uint8_t a[16])
{
	for (int i = 15; i >= 0; i--, v >>= 8)
		a[i] = (uint8_t)v;
}

static u128 mask128(unsigned len)
{
	return len ? ~(u128)0 << (128 - len) : 0;
}

static volatile uint64_t sink;

/* ---- a fake transport and clock for the real client ---- */

struct fake {
	uint64_t now;
	uint8_t (*sent)[IB_MAD_LEN];
	uint64_t *sent_at;
	unsigned nsent, cap, answered;
	struct sa_client *c;
	unsigned outstanding_peak;
	bool track;
};

static int fake_send(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *d)
{
	struct fake *f = ctx;

	(void)d;
	if (len != IB_MAD_LEN)
		abort();
	if (f->nsent == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 4096;
		f->sent = realloc(f->sent, (size_t)f->cap * IB_MAD_LEN);
		f->sent_at = realloc(f->sent_at, (size_t)f->cap * sizeof(*f->sent_at));
		if (!f->sent || !f->sent_at)
			abort();
	}
	memcpy(f->sent[f->nsent], mad, IB_MAD_LEN);
	f->sent_at[f->nsent++] = f->now;
	return 0;
}

static const struct sa_transport_ops fake_ops = { .send = fake_send };

static uint64_t fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

/* Answer sent MAD i as OpenSM would: ClassPortInfo, or a PathRecord to the DGID. */
static void answer(struct fake *f, unsigned i)
{
	uint8_t m[IB_MAD_LEN];
	uint16_t attr;

	memcpy(m, f->sent[i], IB_MAD_LEN);
	attr = (uint16_t)(m[16] << 8 | m[17]);
	m[3] = 0x81; /* GetResp */
	memset(m + SA_HDR_LEN, 0, IB_MAD_LEN - SA_HDR_LEN);
	if (attr == SA_ATTR_PATH_REC) {
		struct sa_path_rec r;

		sa_path_rec_decode(f->sent[i] + SA_HDR_LEN, IB_MAD_LEN - SA_HDR_LEN, &r);
		r.dlid = (uint16_t)(1 + i % 40000);
		r.slid = 4;
		r.mtu_sel = r.rate_sel = r.life_sel = 2;
		r.mtu = 4;
		r.rate = 3;
		r.life = 18;
		r.pkey = 0xffff;
		sa_path_rec_encode(&r, m + SA_HDR_LEN, SA_PATH_REC_LEN);
	} else if (attr == SA_ATTR_CLASS_PORT_INFO) {
		m[SA_HDR_LEN + 0] = 1;
		m[SA_HDR_LEN + 1] = 2;
		m[SA_HDR_LEN + 7] = 8; /* RespTimeValue */
	}
	sa_client_input(f->c, m, sizeof(m));
	f->answered++;
}

/* Answer everything sent so far, then let 1 ms pass. */
static void step(struct fake *f)
{
	struct sa_stats st;
	unsigned n = f->nsent;

	if (f->track) { /* sa_client_stats walks the cache: only for the storm runs */
		sa_client_stats(f->c, &st);
		if (st.outstanding > f->outstanding_peak)
			f->outstanding_peak = st.outstanding;
	}
	while (f->answered < n)
		answer(f, f->answered);
	f->now++;
	sa_client_tick(f->c);
}

static struct sa_client *client_new(struct fake *f, unsigned max_paths, unsigned rate,
				    unsigned outstanding)
{
	struct sa_client_config cfg = { .ops = &fake_ops,
					.ops_ctx = f,
					.now_ms = fake_now,
					.now_ctx = f,
					.seed = 7,
					.max_paths = max_paths,
					.rate_per_s = rate,
					.max_outstanding = outstanding };
	struct sa_port_info pi = { .lid = 4,
				   .sm_lid = 1,
				   .state = SA_PORT_ACTIVE,
				   .subnet_timeout = 8,
				   .gid_prefix = 0xfe80000000000000ull,
				   .port_guid = 0x0002c90300a10003ull,
				   .npkeys = 1,
				   .pkeys = { 0xffff } };

	f->now = 1000000;
	if (sa_client_new(&cfg, &f->c))
		abort();
	sa_client_set_port(f->c, &pi);
	step(f); /* the ClassPortInfo probe */
	return f->c;
}

static void fake_free(struct fake *f)
{
	sa_client_free(f->c);
	free(f->sent);
	free(f->sent_at);
	memset(f, 0, sizeof(*f));
}

/* ---- (a) path cache ---- */

struct naive_path {
	union ib_gid dgid, sgid;
	uint16_t pkey;
	uint8_t tclass;
	struct sa_path path;
};

static int naive_path_lookup(const struct naive_path *v, unsigned n, const union ib_gid *sgid,
			     const struct sa_path_query *q, uint16_t pkey, struct sa_path *out)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].pkey == pkey && v[i].tclass == q->tclass &&
		    ib_gid_equal(&v[i].dgid, &q->dgid) && ib_gid_equal(&v[i].sgid, sgid)) {
			*out = v[i].path;
			return 0;
		}
	return -ENOENT;
}

struct collect {
	struct naive_path *v;
	unsigned n;
};

static int collect_path(void *arg, const struct sa_path_info *pi)
{
	struct collect *c = arg;

	c->v[c->n].dgid = pi->path.dgid;
	c->v[c->n].sgid = pi->path.sgid;
	c->v[c->n].pkey = pi->path.pkey;
	c->v[c->n].tclass = pi->path.tclass;
	c->v[c->n].path = pi->path;
	c->n++;
	return 0;
}

static uint64_t guid_of(unsigned i)
{
	return 0x0002c90300000000ull | ((uint64_t)i * 2654435761u & 0xffffffffu);
}

static void bench_path_cache(unsigned n)
{
	struct fake f = { 0 };
	struct sa_client *c = client_new(&f, n + 1024, 1000000, 64);
	struct sa_path_query *hit = bench_xcalloc(nkeys, sizeof(*hit)),
			     *miss = bench_xcalloc(nkeys, sizeof(*miss));
	struct collect col = { bench_xcalloc(n, sizeof(*col.v)), 0 };
	union ib_gid sgid;
	struct sa_stats st;
	double t_c[2][MAX_R], t_n[2][MAX_R], t0;
	double fill;
	unsigned nk_naive = NAIVE_KEYS;

	t0 = bench_now();
	for (unsigned i = 0; i < n; i++) {
		struct sa_path_query q = { 0 };

		ib_gid_set(&q.dgid, 0xfe80000000000000ull, guid_of(i));
		if (sa_path_resolve(c, &q, NULL, NULL) < 0)
			abort();
	}
	while (f.answered < f.nsent || f.nsent < n + 1)
		step(&f);
	fill = bench_now() - t0;
	sa_client_stats(c, &st);
	if (st.paths != n || st.path_queries != n) {
		fprintf(stderr, "sa_bench: cache holds %u paths after %llu queries, want %u\n",
			st.paths, (unsigned long long)st.path_queries, n);
		abort();
	}
	sa_path_foreach(c, collect_path, &col);
	ib_gid_set(&sgid, 0xfe80000000000000ull, 0x0002c90300a10003ull);
	for (unsigned i = 0; i < col.n; i++)
		if (!ib_gid_equal(&col.v[i].sgid, &sgid) || col.v[i].pkey != 0xffff)
			abort();
	for (unsigned k = 0; k < nkeys; k++) {
		ib_gid_set(&hit[k].dgid, 0xfe80000000000000ull,
			   guid_of((unsigned)(bench_rnd(&rng_state) % n)));
		ib_gid_set(&miss[k].dgid, 0xfe80000000000000ull,
			   guid_of(n + (unsigned)(bench_rnd(&rng_state) % n)));
	}
	/* Cross-check: the cache and the scan agree on every naive key. */
	for (unsigned k = 0; k < nk_naive; k++) {
		struct sa_path a, b;

		if (sa_path_lookup(c, &hit[k], &a) ||
		    naive_path_lookup(col.v, col.n, &sgid, &hit[k], 0xffff, &b) ||
		    a.dlid != b.dlid || !ib_gid_equal(&a.dgid, &hit[k].dgid) ||
		    sa_path_lookup(c, &miss[k], &a) != -ENOENT ||
		    naive_path_lookup(col.v, col.n, &sgid, &miss[k], 0xffff, &b) != -ENOENT) {
			fprintf(stderr, "sa_bench: path cache and scan disagree on key %u\n", k);
			abort();
		}
	}
	for (int r = 0; r < rounds; r++) {
		for (int s = 0; s < 2; s++) {
			const struct sa_path_query *ks = s ? miss : hit;
			struct sa_path p;
			uint64_t acc = 0;

			t0 = bench_now();
			for (unsigned k = 0; k < nkeys; k++)
				acc += sa_path_lookup(c, &ks[k], &p) == 0 ? p.dlid : 1;
			t_c[s][r] = (bench_now() - t0) / nkeys;
			t0 = bench_now();
			for (unsigned k = 0; k < nk_naive; k++)
				acc +=
				    naive_path_lookup(col.v, col.n, &sgid, &ks[k], 0xffff, &p) == 0
					? p.dlid
					: 1;
			t_n[s][r] = (bench_now() - t0) / nk_naive;
			sink += acc;
		}
	}
	printf("  %u paths (filled through the client in %.2f s: %u PathRecord queries answered)\n",
	       n, fill, n);
	for (int s = 0; s < 2; s++) {
		double mc = bench_median(t_c[s], rounds), mn = bench_median(t_n[s], rounds);

		printf("    %-4s keys  sa_path_lookup %8.2f M/s   linear scan %10.4f M/s   "
		       "ratio %8.0fx\n",
		       s ? "miss" : "hit", 1e-6 / mc, 1e-6 / mn, mn / mc);
	}
	free(hit);
	free(miss);
	free(col.v);
	fake_free(&f);
}

/* ---- (b) GID LPM ---- */

struct pfx {
	uint8_t addr[16];
	uint8_t len;
	uint32_t nh;
};

#define NROUTERS 64

/*
 * The shape of an IB router's GID prefix table at scale: a handful of site
 * aggregates, each split into /56 blocks, each holding /64 subnet prefixes (an IB
 * subnet's GID prefix is 64 bits). 4 /32s (fd00:0:N::/32-style ULA blocks) each hold
 * 2 /40s; each /40 holds 2 /48s (16 /48s); each /48 holds 128 /56s (2048); the rest,
 * 100000 - 4 - 8 - 16 - 2048 = 97924 /64s, are drawn uniformly (without repeats)
 * among the /56s' 256 subnets, except 1 in 16 placed directly under a /48 outside
 * every /56. Every prefix points at one of 64 routers, drawn at random, so a /64 often
 * differs from its covering /56 and the longest match matters.
 */
static struct pfx *make_prefixes(unsigned total, unsigned *out_n, u128 *blocks48)
{
	struct pfx *p = bench_xcalloc(total, sizeof(*p));
	unsigned n = 0;
	u128 b32[4], b40[8], b48[16], b56[2048];
	uint8_t *used = bench_xcalloc(2048 * 256 + 16 * 65536, 1);

#define ADD(v, l)                                                                                  \
	do {                                                                                       \
		u2a((v), p[n].addr);                                                               \
		p[n].len = (l);                                                                    \
		p[n].nh = (uint32_t)(bench_rnd(&rng_state) % NROUTERS) + 1;                        \
		n++;                                                                               \
	} while (0)
	for (unsigned i = 0; i < 4; i++) {
		b32[i] = (u128)(0xfd000000u | (uint32_t)(bench_rnd(&rng_state) & 0xfffff0) | i)
			 << 96;
		ADD(b32[i], 32);
	}
	for (unsigned i = 0; i < 8; i++) {
		b40[i] = b32[i / 2] | (u128)(uint8_t)(i * 37 + 1) << 88;
		ADD(b40[i], 40);
	}
	for (unsigned i = 0; i < 16; i++) {
		b48[i] = b40[i / 2] | (u128)(uint8_t)(i * 53 + 3) << 80;
		blocks48[i] = b48[i];
		ADD(b48[i], 48);
	}
	for (unsigned i = 0; i < 2048; i++) {
		/* 128 /56s per /48: subnet-id high octet 0..127 (the top half stays free). */
		b56[i] = b48[i / 128] | (u128)(i % 128) << 72;
		ADD(b56[i], 56);
	}
	while (n < total) {
		if (bench_rnd(&rng_state) % 16 == 0) {
			unsigned b = (unsigned)(bench_rnd(&rng_state) % 16);
			unsigned sub = 0x8000 | (unsigned)(bench_rnd(&rng_state) %
							   0x8000); /* high half: no /56 */

			if (used[2048 * 256 + b * 65536 + sub])
				continue;
			used[2048 * 256 + b * 65536 + sub] = 1;
			ADD(b48[b] | (u128)sub << 64, 64);
		} else {
			unsigned b = (unsigned)(bench_rnd(&rng_state) % 2048),
				 sub = (unsigned)(bench_rnd(&rng_state) % 256);

			if (used[b * 256 + sub])
				continue;
			used[b * 256 + sub] = 1;
			ADD(b56[b] | (u128)sub << 64, 64);
		}
	}
#undef ADD
	free(used);
	/* Shuffle: insertion order of a real table is not sorted. */
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j = (unsigned)(bench_rnd(&rng_state) % (i + 1));
		struct pfx t = p[i];

		p[i] = p[j];
		p[j] = t;
	}
	*out_n = n;
	return p;
}

/* Reference: one open-addressing hash per prefix length, probed longest first. */
struct ref {
	unsigned nlens;
	uint8_t lens[129];
	struct {
		u128 *keys;
		uint32_t *vals;
		size_t mask;
	} t[129];
};

static size_t ref_hash(u128 k)
{
	uint64_t h = (uint64_t)k ^ (uint64_t)(k >> 64) * 0x9e3779b97f4a7c15ull;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return (size_t)(h ^ h >> 32);
}

static void ref_build(struct ref *r, const struct pfx *p, unsigned n)
{
	unsigned count[129] = { 0 };

	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < n; i++)
		count[p[i].len]++;
	for (int l = 128; l >= 0; l--) {
		size_t sz = 16;

		if (!count[l])
			continue;
		r->lens[r->nlens++] = (uint8_t)l;
		while (sz < 2 * (size_t)count[l])
			sz *= 2;
		r->t[l].keys = bench_xcalloc(sz, sizeof(u128));
		r->t[l].vals = bench_xcalloc(sz, sizeof(uint32_t));
		r->t[l].mask = sz - 1;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned l = p[i].len;
		u128 k = a2u(p[i].addr) & mask128(l);
		size_t h = ref_hash(k) & r->t[l].mask;

		while (r->t[l].vals[h] && r->t[l].keys[h] != k)
			h = (h + 1) & r->t[l].mask;
		r->t[l].keys[h] = k;
		r->t[l].vals[h] = p[i].nh;
	}
}

static uint32_t ref_lookup(const struct ref *r, const uint8_t a[16])
{
	u128 v = a2u(a);

	for (unsigned i = 0; i < r->nlens; i++) {
		unsigned l = r->lens[i];
		u128 k = v & mask128(l);
		size_t h = ref_hash(k) & r->t[l].mask;

		for (; r->t[l].vals[h]; h = (h + 1) & r->t[l].mask)
			if (r->t[l].keys[h] == k)
				return r->t[l].vals[h];
	}
	return 0;
}

static void ref_free(struct ref *r)
{
	for (int l = 0; l <= 128; l++) {
		free(r->t[l].keys);
		free(r->t[l].vals);
	}
}

struct naive_lpm {
	u128 *addr, *mask;
	uint8_t *len;
	uint32_t *nh;
	unsigned n;
};

static uint32_t naive_lpm_lookup(const struct naive_lpm *t, const uint8_t a[16])
{
	u128 v = a2u(a);
	int best = -1;
	uint32_t nh = 0;

	for (unsigned i = 0; i < t->n; i++)
		if ((v & t->mask[i]) == t->addr[i] && t->len[i] > best) {
			best = t->len[i];
			nh = t->nh[i];
		}
	return nh;
}

#ifdef IBGW_HAVE_DPDK
static bool eal_up;

static size_t heap_used(void)
{
	struct rte_malloc_socket_stats s;

	if (rte_malloc_get_socket_stats(0, &s) != 0)
		return 0;
	return s.heap_allocsz_bytes;
}
#endif

enum {
	I_LPM128,
	I_LPM6,
	I_FIB6,
	I_NAIVE,
	NIMPL
};
static const char *impl_name[NIMPL] = { "lpm128", "rte_lpm6", "rte_fib6 (trie)", "linear scan" };

static void lpm_check(const char *who, const char *set, unsigned k, uint32_t got, uint32_t want)
{
	if (got != want) {
		fprintf(stderr,
			"sa_bench: MISMATCH %s, %s keys, key #%u: router %u, reference %u\n", who,
			set, k, got, want);
		abort();
	}
}

static void bench_gid_lpm(unsigned total)
{
	u128 b48[16];
	unsigned n, nk_naive = NAIVE_KEYS;
	struct pfx *p = make_prefixes(total, &n, b48);
	struct ref ref;
	struct lpm128 *t;
	struct lpm128_stats ls;
	struct naive_lpm nv = { 0 };
	uint8_t(*keys[2])[16];
	uint32_t *want[2], *out = bench_xcalloc(nkeys, sizeof(uint32_t));
	double build[NIMPL] = { 0 }, tim[NIMPL][2][MAX_R];
	size_t bytes[NIMPL] = { 0 };
	bool have[NIMPL] = { true, false, false, true };
	const char *setname[2] = { "in-/64", "mixed" };
	unsigned lens[129] = { 0 };
	double t0;
#ifdef IBGW_HAVE_DPDK
	struct rte_lpm6 *l6 = NULL;
	struct rte_fib6 *f6 = NULL;
#endif

	for (unsigned i = 0; i < n; i++)
		lens[p[i].len]++;
	printf("  %u prefixes: /32 %u, /40 %u, /48 %u, /56 %u, /64 %u; %d routers; %u keys per "
	       "set (linear scan: %u)\n",
	       n, lens[32], lens[40], lens[48], lens[56], lens[64], NROUTERS, nkeys, nk_naive);
	ref_build(&ref, p, n);
	/* Keys: "in-/64": a random host (random low 64 bits) in a random /64 of the table,
	 * as DGIDs of remote hosts are; "mixed": uniform in a random /48 (most fall to a
	 * /56 or the /48; 1 in 4 replaced by a random GID under fd00::/8, mostly no route). */
	for (int s = 0; s < 2; s++) {
		keys[s] = bench_xcalloc(nkeys, 16);
		want[s] = bench_xcalloc(nkeys, sizeof(uint32_t));
		for (unsigned k = 0; k < nkeys; k++) {
			u128 v;

			if (s == 0) {
				const struct pfx *q;

				do
					q = &p[bench_rnd(&rng_state) % n];
				while (q->len != 64);
				v = a2u(q->addr) | (u128)bench_rnd(&rng_state);
			} else if (bench_rnd(&rng_state) % 4) {
				v = b48[bench_rnd(&rng_state) % 16] |
				    ((u128)bench_rnd(&rng_state) << 64 | bench_rnd(&rng_state)) >>
					48;
			} else {
				v = (u128)0xfd << 120 |
				    (((u128)bench_rnd(&rng_state) << 64 | bench_rnd(&rng_state)) >>
				     8);
			}
			u2a(v, keys[s][k]);
			want[s][k] = ref_lookup(&ref, keys[s][k]);
		}
	}

	/* Build every table, timed. */
	if (lpm128_new(&t, NULL, NULL))
		abort();
	t0 = bench_now();
	for (unsigned i = 0; i < n; i++)
		if (lpm128_add(t, p[i].addr, p[i].len, p[i].nh))
			abort();
	build[I_LPM128] = bench_now() - t0;
	lpm128_stats(t, &ls);
	bytes[I_LPM128] = ls.bytes;

	t0 = bench_now();
	nv.addr = bench_xcalloc(n, sizeof(u128));
	nv.mask = bench_xcalloc(n, sizeof(u128));
	nv.len = bench_xcalloc(n, 1);
	nv.nh = bench_xcalloc(n, sizeof(uint32_t));
	for (unsigned i = 0; i < n; i++) {
		nv.mask[i] = mask128(p[i].len);
		nv.addr[i] = a2u(p[i].addr) & nv.mask[i];
		nv.len[i] = p[i].len;
		nv.nh[i] = p[i].nh;
	}
	nv.n = n;
	build[I_NAIVE] = bench_now() - t0;
	bytes[I_NAIVE] = n * (2 * sizeof(u128) + 1 + sizeof(uint32_t));
#ifdef IBGW_HAVE_DPDK
	if (eal_up) {
		struct rte_lpm6_config lc = { .max_rules = n + 1024, .number_tbl8s = 1u << 16 };
		struct rte_fib6_conf fc = { .type = RTE_FIB6_TRIE,
					    .default_nh = 0,
					    .max_routes = (int)n + 1024,
					    .trie = { .nh_sz = RTE_FIB6_TRIE_4B,
						      .num_tbl8 = fib6_tbl8 } };
		size_t h0 = heap_used();
		int rc = 0;

		l6 = rte_lpm6_create("sabench6", 0, &lc);
		if (l6) {
			t0 = bench_now();
			for (unsigned i = 0; i < n && !rc; i++)
				rc = rte_lpm6_add(l6, p[i].addr, p[i].len, p[i].nh);
			build[I_LPM6] = bench_now() - t0;
			bytes[I_LPM6] = heap_used() - h0;
			have[I_LPM6] = !rc;
			if (rc)
				printf("  rte_lpm6_add: %d; rte_lpm6 skipped\n", rc);
		} else {
			printf("  rte_lpm6_create: %s; skipped\n", rte_strerror(rte_errno));
		}
		h0 = heap_used();
		rc = 0;
		f6 = rte_fib6_create("sabench6", 0, &fc);
		if (f6) {
			t0 = bench_now();
			for (unsigned i = 0; i < n && !rc; i++)
				rc = rte_fib6_add(f6, p[i].addr, p[i].len, p[i].nh);
			build[I_FIB6] = bench_now() - t0;
			bytes[I_FIB6] = heap_used() - h0;
			have[I_FIB6] = !rc;
			if (rc)
				printf(
				    "  rte_fib6_add: %d (%u tbl8s too few? --fib6-tbl8); rte_fib6 "
				    "skipped\n",
				    rc, fib6_tbl8);
		} else {
			printf("  rte_fib6_create: %s; skipped\n", rte_strerror(rte_errno));
		}
	}
#endif

	/* Cross-check every implementation against the reference, then time them. */
	for (int r = -1; r < rounds; r++)
		for (int s = 0; s < 2; s++)
			for (int im = 0; im < NIMPL; im++) {
				unsigned nk = im == I_NAIVE ? nk_naive : nkeys;

				if (!have[im])
					continue;
				t0 = bench_now();
				switch (im) {
				case I_LPM128:
					for (unsigned k = 0; k < nk; k++)
						out[k] = lpm128_lookup(t, keys[s][k]);
					break;
				case I_NAIVE:
					for (unsigned k = 0; k < nk; k++)
						out[k] = naive_lpm_lookup(&nv, keys[s][k]);
					break;
#ifdef IBGW_HAVE_DPDK
				case I_LPM6:
					for (unsigned k = 0; k < nk; k++) {
						uint32_t nh;

						out[k] = rte_lpm6_lookup(l6, keys[s][k], &nh) == 0
							     ? nh
							     : 0;
					}
					break;
				case I_FIB6:
					for (unsigned k = 0; k < nk; k++) {
						uint64_t nh;

						rte_fib6_lookup_bulk(f6, &keys[s][k], &nh, 1);
						out[k] = (uint32_t)nh;
					}
					break;
#endif
				default:
					break;
				}
				if (r >= 0)
					tim[im][s][r] = (bench_now() - t0) / nk;
				else
					for (unsigned k = 0; k < nk; k++)
						lpm_check(impl_name[im], setname[s], k, out[k],
							  want[s][k]);
			}
	printf("  cross-check: every implementation returned the reference's router for every "
	       "key of both sets\n");
	printf("    %-16s %14s %14s %10s %10s %10s\n", "", "in-/64 M/s", "mixed M/s", "vs lpm128",
	       "memory", "build");
	for (int im = 0; im < NIMPL; im++) {
		double m[2];

		if (!have[im]) {
			printf("    %-16s (not measured%s)\n", impl_name[im],
#ifdef IBGW_HAVE_DPDK
			       ""
#else
			       ": DPDK not compiled in"
#endif
			);
			continue;
		}
		for (int s = 0; s < 2; s++)
			m[s] = bench_median(tim[im][s], rounds);
		printf("    %-16s %14.3f %14.3f %9.2fx %7.1f MiB %7.3f s\n", impl_name[im],
		       1e-6 / m[0], 1e-6 / m[1], m[0] / bench_median(tim[I_LPM128][0], rounds),
		       (double)bytes[im] / (1 << 20), build[im]);
	}
	printf("    (vs lpm128: time per lookup relative to lpm128 on in-/64 keys; > 1: lpm128 is "
	       "faster)\n");
	lpm128_free(t);
#ifdef IBGW_HAVE_DPDK
	if (l6)
		rte_lpm6_free(l6);
	if (f6)
		rte_fib6_free(f6);
#endif
	ref_free(&ref);
	for (int s = 0; s < 2; s++) {
		free(keys[s]);
		free(want[s]);
	}
	free(nv.addr);
	free(nv.mask);
	free(nv.len);
	free(nv.nh);
	free(out);
	free(p);
}

/* ---- (c) SA load when 10,000 neighbours need paths at once ---- */

static void bench_storm(unsigned neighbours, unsigned distinct)
{
	struct fake f = { .track = true };
	struct sa_client *c = client_new(&f, 0, 0, 0); /* defaults: 8 outstanding, 200/s */
	unsigned first = f.nsent, q, peak_win = 0, cb = 0;
	uint64_t t_first, t_last;
	struct sa_stats st;

	for (unsigned i = 0; i < neighbours; i++) {
		struct sa_path_query pq = { 0 };

		ib_gid_set(&pq.dgid, 0xfe80000000000000ull, guid_of(i % distinct));
		if (sa_path_resolve(c, &pq, NULL, NULL) < 0)
			abort();
	}
	for (unsigned s = 0; s < 600000 && (f.answered < f.nsent || f.nsent - first < distinct);
	     s++)
		step(&f);
	sa_client_stats(c, &st);
	q = f.nsent - first;
	if (q != distinct || st.path_queries != distinct ||
	    st.path_coalesced != neighbours - distinct) {
		fprintf(stderr, "sa_bench: %u neighbours over %u DGIDs sent %u queries\n",
			neighbours, distinct, q);
		abort();
	}
	t_first = f.sent_at[first];
	t_last = f.sent_at[f.nsent - 1];
	for (unsigned i = first, j = first; i < f.nsent; i++) {
		while (f.sent_at[i] - f.sent_at[j] >= 1000)
			j++;
		if (i - j + 1 > peak_win)
			peak_win = i - j + 1;
	}
	for (unsigned i = first; i < f.nsent && f.sent_at[i] == t_first; i++)
		cb++;
	printf(
	    "    %5u neighbours over %5u DGIDs: %5u PathRecord queries (naive: %u, %.0fx fewer), "
	    "burst %u, peak %u in any 1 s, all sent in %.2f s, at most %u outstanding\n",
	    neighbours, distinct, q, neighbours, (double)neighbours / q, cb, peak_win,
	    (double)(t_last - t_first) / 1000, f.outstanding_peak);
	fake_free(&f);
}

int main(int argc, char **argv)
{
	const char *eal = "--no-huge --no-pci --no-shconf --no-telemetry -m 3072 -l 0 "
			  "--log-level=error";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			nkeys = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--fib6-tbl8") && i + 1 < argc)
			fib6_tbl8 = (uint32_t)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--eal") && i + 1 < argc)
			eal = argv[++i];
		else {
			fprintf(stderr, "usage: sa_bench [--rounds R] [--keys N] [--eal ARGS]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_R || nkeys < NAIVE_KEYS)
		return 2;
	log_init("sa_bench", LOG_TARGET_STDERR, LOG_WARNING);
#ifdef IBGW_HAVE_DPDK
	{
		char *copy = strdup(eal), *args[32] = { "sa_bench" }, *tok, *save = NULL;
		int n = 1;

		for (tok = strtok_r(copy, " ", &save); tok && n < 31;
		     tok = strtok_r(NULL, " ", &save))
			args[n++] = tok;
		eal_up = rte_eal_init(n, args) >= 0;
		printf("DPDK %s: EAL %s (%s)\n", rte_version(), eal_up ? "up" : "failed", eal);
	}
#else
	(void)eal;
	printf("DPDK was not compiled in: GID LPM peers are the linear scan only\n");
#endif
	printf("sa_bench: %d rounds, medians; %u keys per set\n", rounds, nkeys);
	printf("(a) path cache: sa_path_lookup vs a linear scan of the same entries\n");
	bench_path_cache(10000);
	bench_path_cache(100000);
	printf("(b) GID LPM on 100k GID prefixes\n");
	bench_gid_lpm(100000);
	printf("(c) SA queries when 10,000 neighbours need paths at once (client defaults: 8 "
	       "outstanding, 200/s; simulated clock, every query answered at once)\n");
	bench_storm(10000, 100);
	bench_storm(10000, 1000);
	bench_storm(10000, 10000);
	return 0;
}
