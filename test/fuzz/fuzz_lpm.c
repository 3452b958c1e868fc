/*
 * libFuzzer harness for table/lpm6 (lib/lpm128) and table/lpm4: the input is a
 * sequence of 8-octet records, each an add, a delete or a burst of lookups, applied to
 * both tables and to a naive reference (a list of prefixes, the longest covering one
 * wins). Every lookup burst, and a final sweep, compares single and bulk lookups with
 * the reference on keys inside, next to and away from the stored prefixes; any
 * difference aborts. Keys are built so that prefixes nest (a shared 2001:db8::/32 or
 * 10.0.0.0/8 stem on most records) and reach every length up to /128 and /32 (IPv6
 * /0../7 only on records with bit 7 of the first octet set, IPv4 from /8). Replaced
 * lpm128 nodes go through the defer hook and are freed after each record, as a grace
 * period would.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "table/lpm4.h"
#include "table/lpm6.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PFX 256
#define BURST   70 /* more than lpm128's pipeline slots, not a multiple of them */

struct rpfx {
	uint8_t a[16];
	unsigned len;
	uint32_t val;
};

static struct rpfx ref6[MAX_PFX], ref4[MAX_PFX];
static unsigned n6, n4;
static void *retired[4096];
static void (*retired_fn[4096])(void *arg);
static unsigned nretired;
static bool retired_full;

static void check(int cond)
{
	if (!cond)
		abort();
}

static void defer(void *ctx, void (*fn)(void *arg), void *arg)
{
	(void)ctx;
	if (nretired == sizeof(retired) / sizeof(retired[0])) {
		retired_full = true; /* cannot happen with MAX_PFX records; fail loudly */
		abort();
	}
	retired_fn[nretired] = fn;
	retired[nretired++] = arg;
}

static void grace_period(void)
{
	for (unsigned i = 0; i < nretired; i++)
		retired_fn[i](retired[i]);
	nretired = 0;
}

static bool covers(const uint8_t *p, unsigned len, const uint8_t *a)
{
	unsigned full = len / 8, rem = len % 8;

	if (memcmp(p, a, full))
		return false;
	return !rem || !((p[full] ^ a[full]) & (0xff00u >> rem) & 0xff);
}

static uint32_t naive(const struct rpfx *r, unsigned n, const uint8_t *a)
{
	int best = -1;
	uint32_t v = 0;

	for (unsigned i = 0; i < n; i++)
		if ((int)r[i].len > best && covers(r[i].a, r[i].len, a)) {
			best = (int)r[i].len;
			v = r[i].val;
		}
	return v;
}

static void mask(uint8_t *a, unsigned len, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned keep = len > i * 8 ? len - i * 8 : 0;

		if (keep < 8)
			a[i] &= (uint8_t)(0xff00u >> keep);
	}
}

static uint32_t v4addr(const uint8_t *a)
{
	return (uint32_t)a[0] << 24 | (uint32_t)a[1] << 16 | (uint32_t)a[2] << 8 | a[3];
}

/* Reference update; returns the result the table must give (0 or -ENOENT). */
static int ref_apply(struct rpfx *r, unsigned *n, const uint8_t *a, unsigned len, uint32_t val,
		     bool del)
{
	for (unsigned i = 0; i < *n; i++)
		if (r[i].len == len && covers(r[i].a, len, a)) {
			if (del)
				r[i] = r[--*n];
			else
				r[i].val = val;
			return 0;
		}
	if (del)
		return -ENOENT;
	memcpy(r[*n].a, a, 16);
	r[*n].len = len;
	r[*n].val = val;
	(*n)++;
	return 0;
}

/* Keys around the stored prefixes (inside with mixed host bits, just past the end)
 * and derived from seed; single and bulk lookups against the reference. */
static void compare(struct lpm6 *t6, struct lpm4 *t4, const uint8_t *seed)
{
	uint8_t k6[BURST][16];
	uint32_t k4[BURST], got[BURST];

	for (unsigned i = 0; i < BURST; i++) {
		const struct rpfx *p = n6 ? &ref6[(i * 7u + seed[0]) % n6] : NULL;

		for (unsigned b = 0; b < 16; b++)
			k6[i][b] = (uint8_t)(seed[(b + i) % 6] * (i + 1) ^ b);
		if (p && i % 3 != 2) {
			uint8_t host[16];

			memcpy(host, k6[i], 16);
			memcpy(k6[i], p->a, 16);
			for (unsigned b = 0; b < 16; b++) {
				unsigned keep = p->len > b * 8 ? p->len - b * 8 : 0;
				uint8_t m = keep >= 8 ? 0 : (uint8_t)(0xffu >> keep);

				k6[i][b] = (uint8_t)((k6[i][b] & ~m) | (host[b] & m));
			}
			if (i % 3 == 1 && p->len && p->len <= 128) /* flip the last prefix bit */
				k6[i][(p->len - 1) / 8] ^= (uint8_t)(0x80 >> ((p->len - 1) % 8));
		}
		p = n4 ? &ref4[(i * 5u + seed[1]) % n4] : NULL;
		k4[i] = v4addr(k6[i]);
		if (p && i % 3 != 2) {
			uint32_t pm = p->len ? ~0u << (32 - p->len) : 0;

			k4[i] = (v4addr(p->a) & pm) | (k4[i] & ~pm);
		}
	}
	lpm6_lookup_bulk(t6, (const uint8_t(*)[16])k6, got, BURST);
	for (unsigned i = 0; i < BURST; i++) {
		uint32_t want = naive(ref6, n6, k6[i]);

		check(lpm6_lookup(t6, k6[i]) == want);
		check(got[i] == want);
	}
	lpm4_lookup_bulk(t4, k4, got, BURST);
	for (unsigned i = 0; i < BURST; i++) {
		uint8_t a[16] = { (uint8_t)(k4[i] >> 24), (uint8_t)(k4[i] >> 16),
				  (uint8_t)(k4[i] >> 8), (uint8_t)k4[i] };
		uint32_t want = naive(ref4, n4, a);

		check(lpm4_lookup(t4, k4[i]) == want);
		check(got[i] == want);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lpm6_config c6 = { .defer = defer };
	struct lpm4_config c4 = { .max_groups = 64, .small_pages = 1 };
	struct lpm6 *t6;
	struct lpm4 *t4;
	unsigned rec = 0;

	if (size > 8 * MAX_PFX)
		return 0;
	n6 = n4 = 0;
	check(lpm6_create(&t6, &c6) == 0);
	check(lpm4_create(&t4, &c4) == 0);
	for (; size >= 8; data += 8, size -= 8, rec++) {
		/* IPv4 lengths from /8: a shorter one rewrites up to all of tbl24's 16M
		 * entries, which would make every run slow and finds nothing new. */
		unsigned op = data[0] & 3, len6 = data[1] % 129, len4 = 8 + data[1] % 25;
		uint8_t a[16];
		int rc;

		/* Octets 0..7: a stem (2001:db8::/32 or input) then input; 8..15 follow
		 * from 2..7, so long prefixes share bits too. */
		a[0] = data[0] & 4 ? 0x20 : data[2];
		a[1] = data[0] & 4 ? 0x01 : data[3];
		a[2] = data[0] & 8 ? 0x0d : data[4];
		a[3] = data[0] & 8 ? 0xb8 : data[5];
		a[4] = data[6];
		a[5] = data[7];
		a[6] = data[2];
		a[7] = data[3];
		for (unsigned b = 8; b < 16; b++)
			a[b] = (uint8_t)(data[2 + b % 6] ^ (data[0] & 0x30 ? 0 : b));
		if (op == 2) {
			compare(t6, t4, data + 2);
			continue;
		}
		if (op == 3) /* short prefixes: lpm128's dir level, lpm4's wide ranges */
			len6 %= 17, len4 = 8 + len4 % 9;
		/* IPv6 /0../7 only with bit 7 of the first octet: each covers 512 or more
		 * /16s, which the sanitizers make slow to rewrite (tens of ms a record). */
		if (len6 < 8 && !(data[0] & 0x80))
			len6 += 8;
		mask(a, len6, 16);
		rc = ref_apply(ref6, &n6, a, len6, rec + 1, op == 1);
		check((op == 1 ? lpm6_del(t6, a, len6) : lpm6_add(t6, a, len6, rec + 1)) == rc);
		check(lpm6_get(t6, a, len6) == (op == 1 ? 0 : rec + 1));
		{
			uint8_t a4[16] = { a[0] ^ (data[0] & 4 ? 0x2a : 0), a[1], a[2], a[3] };

			mask(a4, len4, 4);
			if (op == 1) {
				rc = ref_apply(ref4, &n4, a4, len4, rec + 1, true);
				check(lpm4_del(t4, v4addr(a4), len4) == rc);
			} else {
				rc = lpm4_add(t4, v4addr(a4), len4, rec + 1);
				/* -ENOSPC: more /25+ stems than groups; the table is unchanged */
				check(rc == 0 || rc == -ENOSPC);
				if (rc == 0)
					ref_apply(ref4, &n4, a4, len4, rec + 1, false);
			}
		}
		grace_period();
	}
	{
		uint8_t seed[6] = { 1, 2, 3, 4, 5, 6 };

		compare(t6, t4, seed);
	}
	lpm6_free(t6);
	lpm4_free(t4);
	grace_period();
	check(!retired_full);
	return 0;
}
