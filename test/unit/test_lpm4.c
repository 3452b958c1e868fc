/*
 * Unit tests for table/lpm4: edge cases (lengths 0, 24, 25, 32, replace, delete restoring
 * the cover, bad arguments, group exhaustion), then lpm4 against a naive reference (a
 * scan of every prefix present, longest wins) through interleaved inserts and deletes,
 * on random nested prefixes and on a tor-geoipdb sample (test/data/geoip4-sample.txt)
 * with random prefixes on top, with random keys and keys inside the table. Finally a
 * concurrency test: reader threads look up while the writer inserts and deletes, and
 * each answer must be one the key could get (old or new), exactly the expected one when
 * no update overlapped the lookup. Groups are recycled through a test-local QSBR grace
 * period built on C11 atomics, so ThreadSanitizer sees every ordering it relies on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "table/lpm4.h"

#if defined(__SANITIZE_THREAD__)
#define SLOW_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLOW_SANITIZER 1
#endif
#endif
#ifndef SLOW_SANITIZER
#define SLOW_SANITIZER 0
#endif

static uint64_t rng = 88172645463325252ull;

static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

static uint32_t mask(unsigned len)
{
	return len ? ~0u << (32 - len) : 0;
}

static uint32_t ip(const char *s)
{
	struct in_addr a;

	assert_int_equal(inet_pton(AF_INET, s, &a), 1);
	return ntohl(a.s_addr);
}

/* ---- naive reference: every prefix present, scanned ---- */

struct rpfx {
	uint32_t addr;
	uint8_t len;
	uint32_t val;
};

struct model {
	struct rpfx *p;
	size_t n, cap;
};

static ssize_t model_find(const struct model *m, uint32_t addr, unsigned len)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->p[i].addr == addr && m->p[i].len == len)
			return (ssize_t)i;
	return -1;
}

static void model_set(struct model *m, uint32_t addr, unsigned len, uint32_t val)
{
	ssize_t i = model_find(m, addr, len);

	if (i >= 0) {
		m->p[i].val = val;
		return;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 1024;
		m->p = realloc(m->p, m->cap * sizeof(*m->p));
		assert_non_null(m->p);
	}
	m->p[m->n++] = (struct rpfx){ addr, (uint8_t)len, val };
}

static void model_del(struct model *m, size_t i)
{
	m->p[i] = m->p[--m->n];
}

static uint32_t model_lookup(const struct model *m, uint32_t a)
{
	int best = -1;
	uint32_t v = 0;

	for (size_t i = 0; i < m->n; i++)
		if ((a & mask(m->p[i].len)) == m->p[i].addr && (int)m->p[i].len > best) {
			best = m->p[i].len;
			v = m->p[i].val;
		}
	return v;
}

/* Compare on nkeys random keys and nkeys keys inside present prefixes, single and bulk
 * (bulk calls of random lengths too: the bulk lookup works in chunks). */
static void compare(const struct lpm4 *t, const struct model *m, unsigned nkeys)
{
	uint32_t keys[256], got[256];

	for (unsigned done = 0; done < nkeys; done += 256) {
		for (unsigned i = 0; i < 256; i++) {
			if (i % 2 || !m->n) {
				keys[i] = rnd32();
			} else {
				const struct rpfx *p = &m->p[rnd32() % m->n];

				keys[i] = p->addr | (rnd32() & ~mask(p->len));
			}
		}
		unsigned n = (done / 256) % 2 ? 1 + rnd32() % 256 : 256;

		lpm4_lookup_bulk(t, keys, got, n);
		for (unsigned i = 0; i < 256; i++) {
			uint32_t want = model_lookup(m, keys[i]);

			if (lpm4_lookup(t, keys[i]) != want || (i < n && got[i] != want))
				fail_msg("key %08x: single %u bulk %u, reference %u", keys[i],
					 lpm4_lookup(t, keys[i]), got[i], want);
		}
	}
}

/* ---- edge cases ---- */

static void test_basic(void **state)
{
	struct lpm4 *t;
	struct lpm4_stats st;

	(void)state;
	assert_int_equal(lpm4_create(&t, NULL), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.3")), 0);
	assert_int_equal(lpm4_add(t, 0, 0, 7), 0); /* default route */
	assert_int_equal(lpm4_add(t, ip("10.0.0.0"), 8, 1), 0);
	assert_int_equal(lpm4_add(t, ip("10.1.0.0"), 16, 2), 0);
	assert_int_equal(lpm4_add(t, ip("10.1.2.0"), 24, 3), 0);
	assert_int_equal(lpm4_add(t, ip("10.1.2.128"), 25, 4), 0);
	assert_int_equal(lpm4_add(t, ip("10.1.2.200"), 32, 5), 0);
	assert_int_equal(lpm4_lookup(t, ip("11.0.0.1")), 7);
	assert_int_equal(lpm4_lookup(t, ip("10.9.0.1")), 1);
	assert_int_equal(lpm4_lookup(t, ip("10.1.9.1")), 2);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.1")), 3);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.129")), 4);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 5);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.201")), 4);
	/* A shorter prefix added later does not hide longer ones, inside a group too. */
	assert_int_equal(lpm4_add(t, ip("10.1.0.0"), 20, 9), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 5);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.1")), 3);
	assert_int_equal(lpm4_lookup(t, ip("10.1.3.1")), 9);
	/* Replace. */
	assert_int_equal(lpm4_add(t, ip("10.1.2.128"), 25, 44), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.129")), 44);
	assert_int_equal(lpm4_get(t, ip("10.1.2.128"), 25), 44);
	lpm4_stats(t, &st);
	assert_int_equal(st.prefixes, 7);
	assert_int_equal(st.groups_used, 1);
	/* Deletes fall back to the cover. */
	assert_int_equal(lpm4_del(t, ip("10.1.2.128"), 25), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.129")), 3);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 5);
	assert_int_equal(lpm4_del(t, ip("10.1.2.200"), 32), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 3);
	lpm4_stats(t, &st);
	assert_int_equal(st.groups_used, 0); /* folded back into tbl24 */
	assert_int_equal(lpm4_del(t, ip("10.1.2.0"), 24), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 9);
	assert_int_equal(lpm4_del(t, ip("10.1.0.0"), 20), 0);
	assert_int_equal(lpm4_lookup(t, ip("10.1.2.200")), 2);
	assert_int_equal(lpm4_del(t, 0, 0), 0);
	assert_int_equal(lpm4_lookup(t, ip("11.0.0.1")), 0);
	/* Host bits are ignored; errors. */
	assert_int_equal(lpm4_add(t, ip("192.168.1.77"), 24, 6), 0);
	assert_int_equal(lpm4_get(t, ip("192.168.1.0"), 24), 6);
	assert_int_equal(lpm4_del(t, ip("192.168.1.99"), 24), 0);
	assert_int_equal(lpm4_del(t, ip("192.168.1.0"), 24), -ENOENT);
	assert_int_equal(lpm4_add(t, 0, 33, 1), -EINVAL);
	assert_int_equal(lpm4_add(t, 0, 8, 0), -EINVAL);
	assert_int_equal(lpm4_add(t, 0, 8, LPM4_VALUE_MAX + 1), -EINVAL);
	assert_int_equal(lpm4_add(t, 0, 8, LPM4_VALUE_MAX), 0);
	assert_int_equal(lpm4_lookup(t, ip("0.1.2.3")), LPM4_VALUE_MAX);
	assert_int_equal(lpm4_del(t, 0, 33), -EINVAL);
	/* 255.255.255.255/32 and 0.0.0.0/32: the table's two ends. */
	assert_int_equal(lpm4_add(t, 0xffffffff, 32, 11), 0);
	assert_int_equal(lpm4_add(t, 0, 32, 12), 0);
	assert_int_equal(lpm4_lookup(t, 0xffffffff), 11);
	assert_int_equal(lpm4_lookup(t, 0xfffffffe), 0);
	assert_int_equal(lpm4_lookup(t, 0), 12);
	assert_int_equal(lpm4_lookup(t, 1), LPM4_VALUE_MAX);
	lpm4_clear(t);
	lpm4_stats(t, &st);
	assert_int_equal(st.prefixes, 0);
	assert_int_equal(st.groups_used, 0);
	assert_int_equal(lpm4_lookup(t, 0xffffffff), 0);
	lpm4_free(t);
}

static void test_groups_exhausted(void **state)
{
	struct lpm4_config cfg = { .max_groups = 2 };
	struct lpm4 *t;

	(void)state;
	assert_int_equal(lpm4_create(&t, &cfg), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.0.0"), 8, 1), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.1.1"), 32, 2), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.2.1"), 32, 3), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.1.2"), 32, 4), 0); /* same group */
	assert_int_equal(lpm4_add(t, ip("10.0.3.1"), 32, 5), -ENOSPC);
	assert_int_equal(lpm4_lookup(t, ip("10.0.3.1")), 1); /* unchanged */
	assert_int_equal(lpm4_get(t, ip("10.0.3.1"), 32), 0);
	assert_int_equal(lpm4_del(t, ip("10.0.2.1"), 32), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.3.1"), 32, 5), 0); /* group reused */
	assert_int_equal(lpm4_lookup(t, ip("10.0.3.1")), 5);
	assert_int_equal(lpm4_lookup(t, ip("10.0.2.1")), 1);
	lpm4_free(t);
}

/* A defer function that parks the callbacks until the test runs them. */
struct parked {
	void (*fn[64])(void *);
	void *arg[64];
	unsigned n;
};

static void park(void *ctx, void (*fn)(void *), void *arg)
{
	struct parked *p = ctx;

	assert_true(p->n < 64);
	p->fn[p->n] = fn;
	p->arg[p->n++] = arg;
}

static void test_deferred_reuse(void **state)
{
	struct parked pk = { .n = 0 };
	struct lpm4_config cfg = { .max_groups = 1, .defer = park, .defer_ctx = &pk };
	struct lpm4_stats st;
	struct lpm4 *t;

	(void)state;
	assert_int_equal(lpm4_create(&t, &cfg), 0);
	assert_int_equal(lpm4_add(t, ip("10.0.1.1"), 32, 2), 0);
	assert_int_equal(lpm4_del(t, ip("10.0.1.1"), 32), 0);
	lpm4_stats(t, &st);
	assert_int_equal(st.groups_used, 0);
	assert_int_equal(st.groups_pending, 1);
	assert_int_equal(pk.n, 1);
	/* Not reusable before the grace period ends. */
	assert_int_equal(lpm4_add(t, ip("10.0.2.1"), 32, 3), -ENOSPC);
	pk.fn[0](pk.arg[0]);
	pk.n = 0;
	assert_int_equal(lpm4_add(t, ip("10.0.2.1"), 32, 3), 0);
	lpm4_stats(t, &st);
	assert_int_equal(st.groups_used, 1);
	assert_int_equal(st.groups_pending, 0);
	assert_int_equal(lpm4_lookup(t, ip("10.0.2.1")), 3);
	lpm4_free(t);
}

/* ---- against the reference ---- */

/* Random prefix with a length mix that nests: short covers and long specifics. (/0 and
 * /1 rewrite 8-16M entries each; test_basic covers them.) */
static void random_prefix(uint32_t *addr, unsigned *len)
{
	static const uint8_t lens[] = { 0,  1,  7,  8,  12, 16, 18, 20, 22, 23, 24,
					24, 24, 25, 26, 27, 28, 29, 30, 31, 32, 32 };
	/* Cluster addresses in a few /8s so prefixes overlap. */
	uint32_t a = (rnd32() % 4 + 10) << 24 | (rnd32() & 0x00ffffff);

	*len = lens[rnd32() % sizeof(lens)];
	*addr = a & mask(*len);
}

static void churn(struct lpm4 *t, struct model *m, unsigned ops, unsigned check_every)
{
	for (unsigned op = 1; op <= ops; op++) {
		if (m->n && rnd32() % 3 == 0) {
			size_t i = rnd32() % m->n;

			assert_int_equal(lpm4_del(t, m->p[i].addr, m->p[i].len), 0);
			model_del(m, i);
		} else {
			uint32_t a, v = rnd32() % LPM4_VALUE_MAX + 1;
			unsigned len;

			random_prefix(&a, &len);
			assert_int_equal(lpm4_add(t, a, len, v), 0);
			model_set(m, a, len, v);
		}
		if (op % check_every == 0)
			compare(t, m, 1024);
	}
}

static void test_random_vs_reference(void **state)
{
	struct model m = { 0 };
	struct lpm4 *t;
	struct lpm4_stats st;

	(void)state;
	assert_int_equal(lpm4_create(&t, NULL), 0);
	churn(t, &m, SLOW_SANITIZER ? 800 : 3000, 300);
	compare(t, &m, 8192);
	lpm4_stats(t, &st);
	assert_int_equal(st.prefixes, m.n);
	/* Delete everything: the table must be empty again, no group left. */
	while (m.n) {
		assert_int_equal(lpm4_del(t, m.p[m.n - 1].addr, m.p[m.n - 1].len), 0);
		model_del(&m, m.n - 1);
		if (m.n % 997 == 0)
			compare(t, &m, 512);
	}
	lpm4_stats(t, &st);
	assert_int_equal(st.prefixes, 0);
	assert_int_equal(st.groups_used, 0);
	for (unsigned i = 0; i < 4096; i++)
		assert_int_equal(lpm4_lookup(t, rnd32()), 0);
	free(m.p);
	lpm4_free(t);
}

static size_t load_sample(const char *path, struct rpfx **out)
{
	FILE *f = fopen(path, "r");
	char line[128];
	size_t n = 0, cap = 8192;
	struct rpfx *p = calloc(cap, sizeof(*p));

	if (!f)
		fail_msg("cannot open %s (run the tests from the source tree)", path);
	while (fgets(line, sizeof(line), f)) {
		char *slash = strchr(line, '/');
		struct in_addr a;

		if (line[0] == '#' || !slash)
			continue;
		*slash = 0;
		assert_int_equal(inet_pton(AF_INET, line, &a), 1);
		assert_true(n < cap);
		p[n].addr = ntohl(a.s_addr);
		p[n].len = (uint8_t)atoi(slash + 1);
		p[n].val = (uint32_t)n + 1;
		n++;
	}
	fclose(f);
	*out = p;
	return n;
}

static void test_geoip_sample_vs_reference(void **state)
{
	struct rpfx *s;
	size_t n = load_sample("test/data/geoip4-sample.txt", &s);
	struct model m = { 0 };
	struct lpm4 *t;

	(void)state;
	assert_true(n > 4000);
	assert_int_equal(lpm4_create(&t, NULL), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(lpm4_add(t, s[i].addr, s[i].len, s[i].val), 0);
		model_set(&m, s[i].addr, s[i].len, s[i].val);
	}
	compare(t, &m, 8192);
	/* Covers on top of the real prefixes (they do not nest by themselves), then churn:
	 * delete half the real prefixes and add random ones, interleaved. */
	for (size_t i = 0; i < n; i += 50) {
		unsigned len = s[i].len > 8 ? s[i].len - 1 - rnd32() % 8 : s[i].len;
		uint32_t v = rnd32() % LPM4_VALUE_MAX + 1;

		assert_int_equal(lpm4_add(t, s[i].addr & mask(len), len, v), 0);
		model_set(&m, s[i].addr & mask(len), len, v);
	}
	compare(t, &m, 4096);
	for (size_t i = 0; i < n; i += 2) {
		ssize_t k = model_find(&m, s[i].addr, s[i].len);

		if (k >= 0) {
			assert_int_equal(lpm4_del(t, s[i].addr, s[i].len), 0);
			model_del(&m, (size_t)k);
		}
		if (i % 8 == 0) {
			uint32_t a = s[rnd32() % n].addr, v = rnd32() % LPM4_VALUE_MAX + 1;
			unsigned len = 20 + rnd32() % 13;

			assert_int_equal(lpm4_add(t, a & mask(len), len, v), 0);
			model_set(&m, a & mask(len), len, v);
		}
		if (i % 1000 == 0)
			compare(t, &m, 1024);
	}
	compare(t, &m, 8192);
	free(m.p);
	free(s);
	lpm4_free(t);
}

/* ---- concurrency ---- */

#define NREADERS 2
#define NREGIONS 32
#define NCAND    12 /* candidate prefixes per region */
#define NKEYS    (NREGIONS * 64)

/* Test-local QSBR: readers announce the grace-period counter they have seen between
 * batches of lookups; synchronize waits until every reader has seen the new one. */
struct qsbr {
	unsigned long gp;
	unsigned long seen[NREADERS];
	int online[NREADERS];
};

static void qsbr_sync(struct qsbr *q)
{
	unsigned long g = __atomic_add_fetch(&q->gp, 1, __ATOMIC_SEQ_CST);

	for (int r = 0; r < NREADERS; r++)
		while (__atomic_load_n(&q->online[r], __ATOMIC_ACQUIRE) &&
		       __atomic_load_n(&q->seen[r], __ATOMIC_ACQUIRE) < g)
			sched_yield();
}

static void qsbr_quiescent(struct qsbr *q, int r)
{
	__atomic_store_n(&q->seen[r], __atomic_load_n(&q->gp, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

struct deferred {
	struct qsbr *q;
	void (*fn[4096])(void *);
	void *arg[4096];
	unsigned n;
};

static void flush(struct deferred *d)
{
	if (!d->n)
		return;
	qsbr_sync(d->q);
	for (unsigned i = 0; i < d->n; i++)
		d->fn[i](d->arg[i]);
	d->n = 0;
}

static void defer_cb(void *ctx, void (*fn)(void *), void *arg)
{
	struct deferred *d = ctx;

	if (d->n == 4096)
		flush(d);
	d->fn[d->n] = fn;
	d->arg[d->n++] = arg;
}

struct conc {
	struct lpm4 *t;
	struct qsbr q;
	struct rpfx cand[NREGIONS][NCAND];
	uint32_t base_val[NREGIONS];
	uint32_t keys[NKEYS];
	uint32_t allowed[NKEYS][NCAND + 1];
	unsigned nallowed[NKEYS];
	uint32_t expected[NKEYS]; /* atomic: the answer once the current update is done */
	unsigned long seq;        /* atomic: odd while the writer changes the table */
	int stop;
	unsigned long lookups, strict, bad;
	char why[160];
};

struct reader_arg {
	struct conc *c;
	int id;
};

static void *reader(void *p)
{
	struct reader_arg *ra = p;
	struct conc *c = ra->c;
	unsigned long n = 0, strict = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull * (unsigned)(ra->id + 1);

	__atomic_store_n(&c->q.online[ra->id], 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		for (int b = 0; b < 64; b++, n++) {
			unsigned k;
			unsigned long s1, s2;
			uint32_t e, v;
			bool ok = false;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			k = (unsigned)(x >> 20) % NKEYS;
			s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
			e = __atomic_load_n(&c->expected[k], __ATOMIC_ACQUIRE);
			if (b % 2) /* the bulk lookup reads tbl24 once too: same guarantee */
				v = lpm4_lookup(c->t, c->keys[k]);
			else
				lpm4_lookup_bulk(c->t, &c->keys[k], &v, 1);
			s2 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
			for (unsigned a = 0; a < c->nallowed[k]; a++)
				ok |= v == c->allowed[k][a];
			if (ok && s1 == s2 && !(s1 & 1)) {
				strict++;
				ok = v == e;
			}
			if (!ok && __atomic_fetch_add(&c->bad, 1, __ATOMIC_RELAXED) == 0)
				snprintf(c->why, sizeof(c->why),
					 "key %08x got %u (expected %u, seq %lu..%lu)", c->keys[k],
					 v, e, s1, s2);
		}
		qsbr_quiescent(&c->q, ra->id);
	}
	__atomic_store_n(&c->q.online[ra->id], 0, __ATOMIC_RELEASE);
	__atomic_fetch_add(&c->lookups, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->strict, strict, __ATOMIC_RELAXED);
	return NULL;
}

static uint32_t conc_answer(const struct conc *c, const bool present[NREGIONS][NCAND], unsigned k)
{
	unsigned r = (c->keys[k] >> 16) & 0xff, best = 16;
	uint32_t v = c->base_val[r];

	for (unsigned j = 0; j < NCAND; j++) {
		const struct rpfx *p = &c->cand[r][j];

		if (present[r][j] && (c->keys[k] & mask(p->len)) == p->addr && p->len > best) {
			best = p->len;
			v = p->val;
		}
	}
	return v;
}

static void test_concurrent_readers(void **state)
{
	static struct conc c;
	static bool present[NREGIONS][NCAND];
	struct deferred d = { .q = &c.q };
	struct lpm4_config cfg = { .max_groups = 24, .defer = defer_cb, .defer_ctx = &d };
	pthread_t th[NREADERS];
	struct reader_arg ra[NREADERS];
	static const uint8_t lens[NCAND] = { 18, 20, 22, 24, 24, 25, 26, 28, 30, 32, 32, 32 };
	unsigned ops = SLOW_SANITIZER ? 1500 : 6000, nospc = 0;

	(void)state;
	memset(&c, 0, sizeof(c));
	memset(present, 0, sizeof(present));
	assert_int_equal(lpm4_create(&c.t, &cfg), 0);
	/* Region r is 10.r.0.0/16 (always present); candidates nest inside its first /20 so
	 * that they overlap each other. */
	for (unsigned r = 0; r < NREGIONS; r++) {
		c.base_val[r] = 1000 + r;
		assert_int_equal(lpm4_add(c.t, (10u << 24) | r << 16, 16, c.base_val[r]), 0);
		for (unsigned j = 0; j < NCAND; j++) {
			/* bits 8..11 hold j: equal lengths never give equal prefixes */
			uint32_t a = (10u << 24) | r << 16 | (rnd32() & 0x30ff) | j << 8;

			c.cand[r][j] = (struct rpfx){ a & mask(lens[j]), lens[j], r * 100 + j + 1 };
		}
	}
	for (unsigned k = 0; k < NKEYS; k++) {
		unsigned r = k % NREGIONS, j = rnd32() % NCAND;
		const struct rpfx *p = &c.cand[r][j];

		c.keys[k] = k % 5 == 0 ? (10u << 24 | r << 16 | (rnd32() & 0xffff))
				       : p->addr | (rnd32() & ~mask(p->len));
		c.allowed[k][c.nallowed[k]++] = c.base_val[r];
		for (unsigned i = 0; i < NCAND; i++)
			if ((c.keys[k] & mask(c.cand[r][i].len)) == c.cand[r][i].addr)
				c.allowed[k][c.nallowed[k]++] = c.cand[r][i].val;
		c.expected[k] = c.base_val[r];
	}
	for (int i = 0; i < NREADERS; i++) {
		ra[i] = (struct reader_arg){ &c, i };
		assert_int_equal(pthread_create(&th[i], NULL, reader, &ra[i]), 0);
	}
	for (unsigned op = 0; op < ops; op++) {
		unsigned r = rnd32() % NREGIONS, j = rnd32() % NCAND;
		const struct rpfx *p = &c.cand[r][j];
		int rc;

		__atomic_store_n(&c.seq, 2 * op + 1, __ATOMIC_SEQ_CST);
		if (present[r][j]) {
			assert_int_equal(lpm4_del(c.t, p->addr, p->len), 0);
			present[r][j] = false;
		} else {
			rc = lpm4_add(c.t, p->addr, p->len, p->val);
			if (rc == -ENOSPC) {
				nospc++;
				flush(&d);
				rc = lpm4_add(c.t, p->addr, p->len, p->val);
			}
			if (rc == 0)
				present[r][j] = true;
			else
				assert_int_equal(rc, -ENOSPC); /* every group in use */
		}
		for (unsigned k = r; k < NKEYS; k += NREGIONS)
			__atomic_store_n(&c.expected[k], conc_answer(&c, present, k),
					 __ATOMIC_RELEASE);
		__atomic_store_n(&c.seq, 2 * op + 2, __ATOMIC_SEQ_CST);
		if (op % 64 == 0)
			flush(&d);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NREADERS; i++)
		pthread_join(th[i], NULL);
	flush(&d);
	print_message("# %lu lookups (%lu with no overlapping update), %u waits for groups\n",
		      c.lookups, c.strict, nospc);
	if (c.bad)
		fail_msg("%lu wrong answers; first: %s", c.bad, c.why);
	assert_true(c.strict > 0);
	lpm4_free(c.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_groups_exhausted),
		cmocka_unit_test(test_deferred_reuse),
		cmocka_unit_test(test_random_vs_reference),
		cmocka_unit_test(test_geoip_sample_vs_reference),
		cmocka_unit_test(test_concurrent_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
