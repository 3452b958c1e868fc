/*
 * Unit tests for table/lpm6 (lpm4's API on lib/lpm128): edge cases (lengths 0, 64, 127,
 * 128, replace, delete restoring the cover, bad arguments), then lpm6 against a naive
 * reference (a scan of every prefix present, longest wins) through interleaved inserts
 * and deletes, on random nested prefixes and on a tor-geoipdb sample
 * (test/data/geoip6-sample.txt) with covers added, with random keys and keys inside the
 * table, single and bulk. Finally reader threads look up while the writer inserts and
 * deletes, one with single lookups, one with bulk; each answer must be one the key
 * could get, exactly the expected one when no update overlapped the lookup (the batch). Replaced trie nodes are freed after a test-local QSBR
 * grace period built on C11 atomics, so ThreadSanitizer sees every ordering.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>

#include "table/lpm6.h"

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

static void rnd_bytes(uint8_t a[16])
{
	for (int i = 0; i < 16; i++)
		a[i] = (uint8_t)rnd32();
}

static void apply_mask(uint8_t a[16], unsigned len)
{
	for (unsigned i = 0; i < 16; i++) {
		unsigned keep = len > i * 8 ? len - i * 8 : 0;

		if (keep < 8)
			a[i] &= (uint8_t)(0xff00u >> keep);
	}
}

static bool covers(const uint8_t p[16], unsigned len, const uint8_t a[16])
{
	uint8_t m[16];

	memcpy(m, a, 16);
	apply_mask(m, len);
	return memcmp(m, p, 16) == 0;
}

static void ip6(const char *s, uint8_t a[16])
{
	assert_int_equal(inet_pton(AF_INET6, s, a), 1);
}

struct rpfx {
	uint8_t addr[16];
	uint8_t len;
	uint32_t val;
};

struct model {
	struct rpfx *p;
	size_t n, cap;
};

static ssize_t model_find(const struct model *m, const uint8_t a[16], unsigned len)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->p[i].len == len && !memcmp(m->p[i].addr, a, 16))
			return (ssize_t)i;
	return -1;
}

static void model_set(struct model *m, const uint8_t a[16], unsigned len, uint32_t val)
{
	ssize_t i = model_find(m, a, len);

	if (i >= 0) {
		m->p[i].val = val;
		return;
	}
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 1024;
		m->p = realloc(m->p, m->cap * sizeof(*m->p));
		assert_non_null(m->p);
	}
	memcpy(m->p[m->n].addr, a, 16);
	m->p[m->n].len = (uint8_t)len;
	m->p[m->n++].val = val;
}

static uint32_t model_lookup(const struct model *m, const uint8_t a[16])
{
	int best = -1;
	uint32_t v = 0;

	for (size_t i = 0; i < m->n; i++)
		if ((int)m->p[i].len > best && covers(m->p[i].addr, m->p[i].len, a)) {
			best = m->p[i].len;
			v = m->p[i].val;
		}
	return v;
}

static void compare(const struct lpm6 *t, const struct model *m, unsigned nkeys)
{
	uint8_t keys[128][16];
	uint32_t got[128];

	for (unsigned done = 0; done < nkeys; done += 128) {
		for (unsigned i = 0; i < 128; i++) {
			rnd_bytes(keys[i]);
			if (i % 2 == 0 && m->n) {
				const struct rpfx *p = &m->p[rnd32() % m->n];
				uint8_t host[16];

				memcpy(host, keys[i], 16);
				apply_mask(keys[i], p->len); /* keys[i] = network bits of random */
				for (int b = 0; b < 16; b++)
					keys[i][b] = p->addr[b] | (host[b] ^ keys[i][b]);
			} else if (i % 4 == 1) {
				keys[i][0] = (uint8_t)(0x20 | (keys[i][0] & 0x0f));
			}
		}
		lpm6_lookup_bulk(t, (const uint8_t(*)[16])keys, got, 128);
		for (unsigned i = 0; i < 128; i++) {
			uint32_t want = model_lookup(m, keys[i]);

			if (lpm6_lookup(t, keys[i]) != want || got[i] != want) {
				char buf[64];

				inet_ntop(AF_INET6, keys[i], buf, sizeof(buf));
				fail_msg("key %s: single %u bulk %u, reference %u", buf,
					 lpm6_lookup(t, keys[i]), got[i], want);
			}
		}
	}
}

static void test_basic(void **state)
{
	struct lpm6 *t;
	struct lpm6_stats st;
	uint8_t a[16], k[16];

	(void)state;
	assert_int_equal(lpm6_create(&t, NULL), 0);
	ip6("2001:db8::1", k);
	assert_int_equal(lpm6_lookup(t, k), 0);
	memset(a, 0, 16);
	assert_int_equal(lpm6_add(t, a, 0, 7), 0);
	ip6("2001:db8::", a);
	assert_int_equal(lpm6_add(t, a, 32, 1), 0);
	ip6("2001:db8:1::", a);
	assert_int_equal(lpm6_add(t, a, 48, 2), 0);
	ip6("2001:db8:1:2::", a);
	assert_int_equal(lpm6_add(t, a, 64, 3), 0);
	ip6("2001:db8:1:2::1", a);
	assert_int_equal(lpm6_add(t, a, 128, 4), 0);
	ip6("2001:db8:1:2::", a);
	assert_int_equal(lpm6_add(t, a, 127, 5), 0);
	ip6("2001:db8:1:2::1", k);
	assert_int_equal(lpm6_lookup(t, k), 4);
	ip6("2001:db8:1:2::", k);
	assert_int_equal(lpm6_lookup(t, k), 5);
	ip6("2001:db8:1:2::2", k);
	assert_int_equal(lpm6_lookup(t, k), 3);
	ip6("2001:db8:1:3::2", k);
	assert_int_equal(lpm6_lookup(t, k), 2);
	ip6("2001:db8:2::", k);
	assert_int_equal(lpm6_lookup(t, k), 1);
	ip6("fe80::1", k);
	assert_int_equal(lpm6_lookup(t, k), 7);
	/* Replace; host bits ignored; delete restores the cover. */
	ip6("2001:db8:1:2:ffff::", a);
	assert_int_equal(lpm6_add(t, a, 64, 33), 0);
	assert_int_equal(lpm6_get(t, a, 64), 33);
	ip6("2001:db8:1:2::2", k);
	assert_int_equal(lpm6_lookup(t, k), 33);
	ip6("2001:db8:1:2::", a);
	assert_int_equal(lpm6_del(t, a, 127), 0);
	ip6("2001:db8:1:2::", k);
	assert_int_equal(lpm6_lookup(t, k), 33);
	assert_int_equal(lpm6_del(t, a, 64), 0);
	assert_int_equal(lpm6_lookup(t, k), 2);
	assert_int_equal(lpm6_del(t, a, 64), -ENOENT);
	assert_int_equal(lpm6_add(t, a, 129, 1), -EINVAL);
	assert_int_equal(lpm6_add(t, a, 64, 0), -EINVAL);
	assert_int_equal(lpm6_del(t, a, 129), -EINVAL);
	lpm6_stats(t, &st);
	assert_int_equal(st.prefixes, 4);
	assert_true(st.reader_bytes > 0);
	lpm6_free(t);
}

static void random_prefix(uint8_t a[16], unsigned *len)
{
	static const uint8_t lens[] = { 0,  3,  16, 19, 24, 28, 29, 32, 32, 36,  40, 44,
					47, 48, 48, 56, 60, 64, 64, 80, 96, 127, 128 };

	rnd_bytes(a);
	a[0] = 0x20;
	a[1] = (uint8_t)(a[1] & 3); /* cluster so prefixes nest */
	*len = lens[rnd32() % sizeof(lens)];
	apply_mask(a, *len);
}

static void test_random_vs_reference(void **state)
{
	struct model m = { 0 };
	struct lpm6 *t;
	struct lpm6_stats st;

	(void)state;
	assert_int_equal(lpm6_create(&t, NULL), 0);
	for (unsigned op = 1; op <= 5000; op++) {
		if (m.n && rnd32() % 3 == 0) {
			size_t i = rnd32() % m.n;

			assert_int_equal(lpm6_del(t, m.p[i].addr, m.p[i].len), 0);
			m.p[i] = m.p[--m.n];
		} else {
			uint8_t a[16];
			unsigned len;
			uint32_t v = rnd32() + 1;

			random_prefix(a, &len);
			assert_int_equal(lpm6_add(t, a, len, v), 0);
			model_set(&m, a, len, v);
		}
		if (op % 500 == 0)
			compare(t, &m, 1024);
	}
	lpm6_stats(t, &st);
	assert_int_equal(st.prefixes, m.n);
	while (m.n) {
		m.n--;
		assert_int_equal(lpm6_del(t, m.p[m.n].addr, m.p[m.n].len), 0);
	}
	lpm6_stats(t, &st);
	assert_int_equal(st.prefixes, 0);
	compare(t, &m, 512);
	free(m.p);
	lpm6_free(t);
}

static void test_geoip_sample_vs_reference(void **state)
{
	FILE *f = fopen("test/data/geoip6-sample.txt", "r");
	struct model m = { 0 }, s = { 0 };
	struct lpm6 *t;
	char line[128];

	(void)state;
	if (!f)
		fail_msg("cannot open test/data/geoip6-sample.txt (run from the source tree)");
	while (fgets(line, sizeof(line), f)) {
		char *slash = strchr(line, '/');
		uint8_t a[16];

		if (line[0] == '#' || !slash)
			continue;
		*slash = 0;
		ip6(line, a);
		model_set(&s, a, (unsigned)atoi(slash + 1), (uint32_t)s.n + 1);
	}
	fclose(f);
	assert_true(s.n > 4000);
	assert_int_equal(lpm6_create(&t, NULL), 0);
	for (size_t i = 0; i < s.n; i++) {
		assert_int_equal(lpm6_add(t, s.p[i].addr, s.p[i].len, s.p[i].val), 0);
		model_set(&m, s.p[i].addr, s.p[i].len, s.p[i].val);
	}
	compare(t, &m, 4096);
	for (size_t i = 0; i < s.n; i += 40) { /* covers, so that deletes fall back */
		uint8_t a[16];
		unsigned len = s.p[i].len > 16 ? s.p[i].len - 1 - rnd32() % 12 : s.p[i].len;
		uint32_t v = rnd32() + 1;

		memcpy(a, s.p[i].addr, 16);
		apply_mask(a, len);
		assert_int_equal(lpm6_add(t, a, len, v), 0);
		model_set(&m, a, len, v);
	}
	for (size_t i = 0; i < s.n; i += 2) {
		ssize_t k = model_find(&m, s.p[i].addr, s.p[i].len);

		if (k >= 0 && m.p[k].val == s.p[i].val) {
			assert_int_equal(lpm6_del(t, s.p[i].addr, s.p[i].len), 0);
			m.p[k] = m.p[--m.n];
		}
		if (i % 1000 == 0)
			compare(t, &m, 512);
	}
	compare(t, &m, 4096);
	free(m.p);
	free(s.p);
	lpm6_free(t);
}

/* ---- concurrency (same scheme as test_lpm4) ---- */

#define NREADERS 2
#define NREGIONS 16
#define NCAND    10
#define NKEYS    (NREGIONS * 32)

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

struct deferred {
	struct qsbr *q;
	void (*fn[8192])(void *);
	void *arg[8192];
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

	if (d->n == 8192)
		flush(d);
	d->fn[d->n] = fn;
	d->arg[d->n++] = arg;
}

struct conc {
	struct lpm6 *t;
	struct qsbr q;
	struct rpfx cand[NREGIONS][NCAND];
	uint8_t keys[NKEYS][16];
	uint32_t allowed[NKEYS][NCAND + 1];
	unsigned nallowed[NKEYS];
	uint32_t expected[NKEYS];
	unsigned long seq;
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
		/* A batch of 64 keys: reader 0 one by one, reader 1 with lpm6_lookup_bulk
		 * (strict when no update overlapped the whole batch). */
		unsigned ks[64];
		uint8_t bk[64][16];
		uint32_t e[64], v[64];
		unsigned long s1, s2;

		for (int b = 0; b < 64; b++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			ks[b] = (unsigned)(x >> 20) % NKEYS;
			memcpy(bk[b], c->keys[ks[b]], 16);
		}
		s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		for (int b = 0; b < 64; b++)
			e[b] = __atomic_load_n(&c->expected[ks[b]], __ATOMIC_ACQUIRE);
		if (ra->id & 1)
			lpm6_lookup_bulk(c->t, (const uint8_t(*)[16])bk, v, 64);
		else
			for (int b = 0; b < 64; b++)
				v[b] = lpm6_lookup(c->t, bk[b]);
		s2 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		for (int b = 0; b < 64; b++, n++) {
			unsigned k = ks[b];
			bool ok = false;

			for (unsigned a = 0; a < c->nallowed[k]; a++)
				ok |= v[b] == c->allowed[k][a];
			if (ok && s1 == s2 && !(s1 & 1)) {
				strict++;
				ok = v[b] == e[b];
			}
			if (!ok && __atomic_fetch_add(&c->bad, 1, __ATOMIC_RELAXED) == 0)
				snprintf(c->why, sizeof(c->why), "key #%u got %u (expected %u, %s)",
					 k, v[b], e[b], ra->id & 1 ? "bulk" : "single");
		}
		__atomic_store_n(&c->q.seen[ra->id], __atomic_load_n(&c->q.gp, __ATOMIC_ACQUIRE),
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&c->q.online[ra->id], 0, __ATOMIC_RELEASE);
	__atomic_fetch_add(&c->lookups, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&c->strict, strict, __ATOMIC_RELAXED);
	return NULL;
}

static uint32_t answer(const struct conc *c, const bool present[NREGIONS][NCAND], unsigned k)
{
	unsigned r = k % NREGIONS, best = 0;
	uint32_t v = 1000 + r; /* region base, a /32 */

	for (unsigned j = 0; j < NCAND; j++) {
		const struct rpfx *p = &c->cand[r][j];

		if (present[r][j] && p->len > best && covers(p->addr, p->len, c->keys[k])) {
			best = p->len;
			v = p->val;
		}
	}
	return v;
}

static void test_concurrent_readers(void **state)
{
	static struct conc c;
	static struct deferred d;
	static bool present[NREGIONS][NCAND];
	static const uint8_t lens[NCAND] = { 36, 40, 44, 48, 48, 56, 64, 64, 96, 128 };
	pthread_t th[NREADERS];
	struct reader_arg ra[NREADERS];
	struct lpm6_config cfg = { .defer = defer_cb, .defer_ctx = &d };

	(void)state;
	memset(&c, 0, sizeof(c));
	memset(&d, 0, sizeof(d));
	memset(present, 0, sizeof(present));
	d.q = &c.q;
	assert_int_equal(lpm6_create(&c.t, &cfg), 0);
	for (unsigned r = 0; r < NREGIONS; r++) {
		uint8_t base[16] = { 0x20, 0x01, 0x0d, (uint8_t)r };

		assert_int_equal(lpm6_add(c.t, base, 32, 1000 + r), 0);
		for (unsigned j = 0; j < NCAND; j++) {
			struct rpfx *p = &c.cand[r][j];

			rnd_bytes(p->addr);
			memcpy(p->addr, base, 4);
			p->addr[4] = (uint8_t)j; /* equal lengths never give equal prefixes */
			p->addr[5] &= 1;
			apply_mask(p->addr, lens[j]);
			p->len = lens[j];
			p->val = r * 100 + j + 1;
		}
	}
	for (unsigned k = 0; k < NKEYS; k++) {
		unsigned r = k % NREGIONS;
		const struct rpfx *p = &c.cand[r][rnd32() % NCAND];
		uint8_t host[16];

		rnd_bytes(host);
		memcpy(c.keys[k], host, 16);
		apply_mask(c.keys[k], p->len);
		for (int b = 0; b < 16; b++)
			c.keys[k][b] = p->addr[b] | (host[b] ^ c.keys[k][b]);
		c.allowed[k][c.nallowed[k]++] = 1000 + r;
		for (unsigned j = 0; j < NCAND; j++)
			if (covers(c.cand[r][j].addr, c.cand[r][j].len, c.keys[k]))
				c.allowed[k][c.nallowed[k]++] = c.cand[r][j].val;
		c.expected[k] = 1000 + r;
	}
	for (int i = 0; i < NREADERS; i++) {
		ra[i] = (struct reader_arg){ &c, i };
		assert_int_equal(pthread_create(&th[i], NULL, reader, &ra[i]), 0);
	}
	for (unsigned op = 0; op < (SLOW_SANITIZER ? 1500u : 6000u); op++) {
		unsigned r = rnd32() % NREGIONS, j = rnd32() % NCAND;
		const struct rpfx *p = &c.cand[r][j];

		__atomic_store_n(&c.seq, 2 * op + 1, __ATOMIC_SEQ_CST);
		if (present[r][j])
			assert_int_equal(lpm6_del(c.t, p->addr, p->len), 0);
		else
			assert_int_equal(lpm6_add(c.t, p->addr, p->len, p->val), 0);
		present[r][j] = !present[r][j];
		for (unsigned k = r; k < NKEYS; k += NREGIONS)
			__atomic_store_n(&c.expected[k], answer(&c, present, k), __ATOMIC_RELEASE);
		__atomic_store_n(&c.seq, 2 * op + 2, __ATOMIC_SEQ_CST);
		if (op % 64 == 0)
			flush(&d);
	}
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NREADERS; i++)
		pthread_join(th[i], NULL);
	flush(&d);
	print_message("# %lu lookups (%lu with no overlapping update)\n", c.lookups, c.strict);
	if (c.bad)
		fail_msg("%lu wrong answers; first: %s", c.bad, c.why);
	assert_true(c.strict > 0);
	lpm6_free(c.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_random_vs_reference),
		cmocka_unit_test(test_geoip_sample_vs_reference),
		cmocka_unit_test(test_concurrent_readers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
