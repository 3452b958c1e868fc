/*
 * lpm128 against a naive reference (a linear scan for the longest covering prefix) on
 * random prefixes: every length 0..128, clustered keys so that prefixes nest, lookups
 * of random keys and of keys near the prefixes; then half the prefixes deleted and the
 * check repeated; replace, exact get, errors, and the deferred-free hook.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/lpm128.h"

struct ref {
	uint8_t key[16];
	unsigned len;
	uint32_t value;
	int live;
};

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd64(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static int covers(const uint8_t *pfx, unsigned len, const uint8_t *key)
{
	unsigned full = len / 8, rem = len % 8;

	if (memcmp(pfx, key, full))
		return 0;
	if (rem && ((pfx[full] ^ key[full]) & (0xff00 >> rem) & 0xff))
		return 0;
	return 1;
}

static uint32_t naive(const struct ref *r, unsigned n, const uint8_t *key)
{
	int best = -1;
	uint32_t v = 0;

	for (unsigned i = 0; i < n; i++)
		if (r[i].live && (int)r[i].len > best && covers(r[i].key, r[i].len, key)) {
			best = (int)r[i].len;
			v = r[i].value;
		}
	return v;
}

static int key_mode; /* 0: all lengths; 1: lengths 8..71 packed around 2001::/16 */

static void rand_key(uint8_t *k)
{
	/* Clustered: a few top bytes shared so prefixes nest and nodes fill. */
	uint64_t a = rnd64(), b = rnd64();

	memcpy(k, &a, 8);
	memcpy(k + 8, &b, 8);
	k[0] = (uint8_t)(0xfe + (a & 1));
	k[1] = (uint8_t)(0x80 + ((a >> 8) & 3));
	if (b & 1)
		memset(k + 2, 0, 6);
	if (key_mode == 1) {
		/* Short prefixes (<= /16) above dense nodes: dir entries and defs churn. */
		k[0] = 0x20;
		k[1] = (uint8_t)(0x01 + (a & 1));
		k[2] = (uint8_t)((a >> 16) & 3);
		k[3] = (uint8_t)((a >> 24) & 7);
	}
}

/* Single lookups against the reference, then the same keys through lpm128_lookup_bulk
 * in batches of every size from 1 to 97 (fewer keys than the pipeline's slots, keys the
 * dir answers mixed with deep walks, batch ends in mid-group). */
static void check_all(const struct lpm128 *t, const struct ref *r, unsigned n, unsigned probes)
{
	uint8_t(*keys)[16] = calloc(probes, 16);
	uint32_t *want = calloc(probes, sizeof(*want)), *got = calloc(probes, sizeof(*got));

	assert_non_null(keys);
	assert_non_null(want);
	assert_non_null(got);
	for (unsigned i = 0; i < probes; i++) {
		uint8_t *key = keys[i];

		if (i & 1) {
			/* near a prefix: its bits, random rest */
			const struct ref *p = &r[rnd64() % n];

			rand_key(key);
			memcpy(key, p->key, (p->len + 7) / 8);
			if (rnd64() & 1 && p->len < 128)
				key[p->len / 8] ^= (uint8_t)(0x80 >> (p->len % 8));
		} else {
			rand_key(key);
		}
		want[i] = naive(r, n, key);
		assert_int_equal(lpm128_lookup(t, key), want[i]);
	}
	memset(got, 0xff, probes * sizeof(*got));
	for (unsigned i = 0, m = 1; i < probes; i += m, m = m % 97 + 1)
		lpm128_lookup_bulk(t, (const uint8_t(*)[16])keys + i, got + i,
				   probes - i < m ? probes - i : m);
	for (unsigned i = 0; i < probes; i++)
		if (got[i] != want[i])
			fail_msg("bulk key #%u: got %u, reference %u", i, got[i], want[i]);
	free(keys);
	free(want);
	free(got);
}

static void random_vs_naive(void)
{
	enum {
		N = 3000
	};
	struct ref *r = calloc(N, sizeof(*r));
	struct lpm128 *t;
	struct lpm128_stats st;
	size_t empty_bytes;

	assert_non_null(r);
	assert_int_equal(lpm128_new(&t, NULL, NULL), 0);
	lpm128_stats(t, &st);
	empty_bytes = st.bytes;
	for (unsigned i = 0; i < N; i++) {
		rand_key(r[i].key);
		r[i].len = key_mode == 1 ? 8 + (unsigned)(rnd64() % 64) : (unsigned)(rnd64() % 129);
		/* mask the key to its length like a user would (the table must not care) */
		r[i].value = i + 1;
		r[i].live = 1;
		/* duplicates of an existing prefix replace it: mirror that in the reference */
		for (unsigned j = 0; j < i; j++)
			if (r[j].live && r[j].len == r[i].len &&
			    covers(r[j].key, r[j].len, r[i].key))
				r[j].live = 0;
		assert_int_equal(lpm128_add(t, r[i].key, r[i].len, r[i].value), 0);
	}
	check_all(t, r, N, 20000);
	for (unsigned i = 0; i < N; i++)
		if (r[i].live)
			assert_int_equal(lpm128_get(t, r[i].key, r[i].len), r[i].value);
	/* Delete every other live prefix. */
	for (unsigned i = 0; i < N; i += 2)
		if (r[i].live) {
			assert_int_equal(lpm128_del(t, r[i].key, r[i].len), 0);
			r[i].live = 0;
			assert_int_equal(lpm128_get(t, r[i].key, r[i].len), 0);
		}
	check_all(t, r, N, 20000);
	/* Delete the rest: the trie must be empty again. */
	for (unsigned i = 0; i < N; i++)
		if (r[i].live)
			assert_int_equal(lpm128_del(t, r[i].key, r[i].len), 0);
	lpm128_stats(t, &st);
	assert_int_equal(st.prefixes, 0);
	assert_int_equal(st.nodes, 0);
	assert_int_equal(st.bytes, empty_bytes);
	for (unsigned i = 0; i < 1u << LPM128_DIR_BITS; i++)
		assert_true(t->dir[i] == 1); /* every /16 a leaf with no value */
	lpm128_free(t);
	free(r);
}

static void test_random_vs_naive(void **state)
{
	(void)state;
	key_mode = 0;
	random_vs_naive();
}

static void test_nested_vs_naive(void **state)
{
	(void)state;
	key_mode = 1;
	random_vs_naive();
	key_mode = 0;
}

/* The node arena: two tables in one arena, each checked against the reference; a
 * table emptied and built again takes its memory from the free lists (the arena carves
 * no new slab), the other table is untouched by that and by the first one's end. */
static void test_arena_reuse(void **state)
{
	enum {
		N = 2000
	};
	struct ref *r = calloc(2 * N, sizeof(*r));
	struct lpm128 *t[2];
	struct lpm128_stats st;
	size_t carved;

	(void)state;
	assert_non_null(r);
	key_mode = 0;
	for (unsigned k = 2; k-- > 0;) { /* table 1 first: it stays idle below */
		assert_int_equal(lpm128_new(&t[k], NULL, NULL), 0);
		for (unsigned i = k * N; i < (k + 1) * N; i++) {
			rand_key(r[i].key);
			r[i].len = 17 + (unsigned)(rnd64() % 112); /* below the dir: nodes */
			r[i].value = i + 1;
			r[i].live = 1;
			for (unsigned j = k * N; j < i; j++)
				if (r[j].live && r[j].len == r[i].len &&
				    covers(r[j].key, r[j].len, r[i].key))
					r[j].live = 0;
			assert_int_equal(lpm128_add(t[k], r[i].key, r[i].len, r[i].value), 0);
		}
	}
	check_all(t[0], r, N, 5000);
	check_all(t[1], r + N, N, 5000);
	/* Empty table 0 prefix by prefix; build it again in the same order. */
	for (unsigned i = 0; i < N; i++)
		if (r[i].live)
			assert_int_equal(lpm128_del(t[0], r[i].key, r[i].len), 0);
	lpm128_stats(t[0], &st);
	assert_int_equal(st.nodes, 0);
	carved = st.arena_bytes;
	if (!carved) /* AddressSanitizer builds bypass the arena (lpm128.c) */
		print_message("# no arena in this build: slab reuse not checked\n");
	for (unsigned i = 0; i < N; i++)
		if (r[i].live)
			assert_int_equal(lpm128_add(t[0], r[i].key, r[i].len, r[i].value), 0);
	lpm128_stats(t[0], &st);
	assert_true(st.nodes > 0);
	assert_int_equal(st.arena_bytes, carved);
	check_all(t[0], r, N, 5000);
	check_all(t[1], r + N, N, 5000);
	/* Table 1 freed at once: table 0 is untouched. */
	lpm128_free(t[1]);
	check_all(t[0], r, N, 5000);
	lpm128_free(t[0]);
	lpm128_mem_free(NULL); /* a no-op, like free(NULL) */
	free(r);
}

static void test_basics(void **state)
{
	struct lpm128 *t;
	uint8_t k[16] = { 0xfe, 0xc0, 0, 0, 0, 0, 0, 1 }, z[16] = { 0 };

	(void)state;
	assert_int_equal(lpm128_new(&t, NULL, NULL), 0);
	assert_int_equal(lpm128_lookup(t, k), 0);
	assert_int_equal(lpm128_add(t, k, 129, 1), -EINVAL);
	assert_int_equal(lpm128_add(t, k, 64, 0), -EINVAL);
	assert_int_equal(lpm128_del(t, k, 64), -ENOENT);
	assert_int_equal(lpm128_add(t, z, 0, 7), 0); /* default route */
	assert_int_equal(lpm128_lookup(t, k), 7);
	assert_int_equal(lpm128_add(t, k, 64, 9), 0);
	assert_int_equal(lpm128_lookup(t, k), 9);
	assert_int_equal(lpm128_add(t, k, 64, 10), 0); /* replace */
	assert_int_equal(lpm128_lookup(t, k), 10);
	assert_int_equal(lpm128_add(t, k, 128, 11), 0); /* host */
	assert_int_equal(lpm128_lookup(t, k), 11);
	k[15] = 1;
	assert_int_equal(lpm128_lookup(t, k), 10);
	k[7] = 2;
	assert_int_equal(lpm128_lookup(t, k), 7);
	assert_int_equal(lpm128_del(t, z, 0), 0);
	assert_int_equal(lpm128_lookup(t, k), 0);
	assert_int_equal(lpm128_del(t, k, 1), -ENOENT); /* never added */
	lpm128_free(t);
}

struct deferred {
	void *ptrs[4096];
	unsigned n;
};

static void defer(void *ctx, void *p)
{
	struct deferred *d = ctx;

	assert_true(d->n < 4096);
	d->ptrs[d->n++] = p;
}

/* A reader holding the old dir entry sees the old table intact until the grace period
 * ends (the replaced nodes are only handed to the free hook, never touched). */
static void test_rcu_snapshot(void **state)
{
	struct deferred *d = calloc(1, sizeof(*d));
	struct lpm128 *t, old;
	uint8_t a[16] = { 0x20, 0x01, 0x0d, 0xb8 }, b[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 1 };

	(void)state;
	assert_int_equal(lpm128_new(&t, defer, d), 0);
	assert_int_equal(lpm128_add(t, a, 32, 1), 0);
	for (unsigned i = 0; i < d->n; i++)
		lpm128_mem_free(d->ptrs[i]);
	d->n = 0;
	old = *t; /* a reader's snapshot of the dir entries it loaded */
	old.dir = malloc((sizeof(*t->dir)) << LPM128_DIR_BITS);
	assert_non_null(old.dir);
	memcpy(old.dir, t->dir, sizeof(*t->dir) << LPM128_DIR_BITS);
	assert_int_equal(lpm128_add(t, b, 48, 2), 0);
	assert_true(d->n > 0); /* the old path was replaced, not modified */
	assert_int_equal(lpm128_lookup(&old, b), 1);
	assert_int_equal(lpm128_lookup(t, b), 2);
	/* A short prefix above the node: the old top node keeps its def too. */
	memcpy(old.dir, t->dir, sizeof(*t->dir) << LPM128_DIR_BITS);
	assert_int_equal(lpm128_add(t, a, 12, 3), 0);
	assert_int_equal(lpm128_lookup(&old, b), 2);
	b[5] = 7;
	assert_int_equal(lpm128_lookup(&old, b), 1);
	a[2] = 0xff;
	assert_int_equal(lpm128_lookup(&old, a), 0);
	assert_int_equal(lpm128_lookup(t, a), 3);
	for (unsigned i = 0; i < d->n; i++)
		lpm128_mem_free(d->ptrs[i]);
	d->n = 0;
	free(old.dir);
	lpm128_free(t);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_basics),          cmocka_unit_test(test_random_vs_naive),
		cmocka_unit_test(test_nested_vs_naive), cmocka_unit_test(test_rcu_snapshot),
		cmocka_unit_test(test_arena_reuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
