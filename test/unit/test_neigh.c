/*
 * table/neigh: the state machine with a fake clock (Linux's timers: retrans 1 s, 3
 * multicast probes, reachable time in [15, 45) s, delay 5 s, 3 unicast probes), the
 * update rules (solicited, override, unsolicited, PERMANENT), the unresolved queue
 * (overflow drops the oldest, counted; flushed when usable), GC thresholds, lookups
 * after many inserts and deletes, and the limits under attack (issue 20, RFC 6583): a
 * scan of 10,000 addresses next to a neighbour in use, the cap on INCOMPLETE entries,
 * the eviction order of a full table, and the learning guard (neigh_on_link); the data
 * path's flat index (neigh_lookup_link) through rebuilds, what it sends to, and a reader
 * thread beside a churning writer (the RCU contract).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/addr.h"
#include "table/neigh.h"

static uint64_t fake_now = 1000000;
static uint64_t clock_fn(void *ctx)
{
	(void)ctx;
	return fake_now;
}

struct rec {
	unsigned mcast, ucast, xmit, drop;
	void *last_xmit, *dropped[64];
};
static struct rec rec;

static void op_solicit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll)
{
	(void)ctx;
	(void)e;
	if (ll)
		rec.ucast++;
	else
		rec.mcast++;
}
static void op_xmit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll, void *pkt)
{
	(void)ctx;
	(void)e;
	assert_true(ll->usable);
	rec.xmit++;
	rec.last_xmit = pkt;
}
static void op_drop(void *ctx, void *pkt)
{
	(void)ctx;
	if (rec.drop < 64)
		rec.dropped[rec.drop] = pkt;
	rec.drop++;
}
static const struct neigh_ops ops = { .solicit = op_solicit, .xmit = op_xmit, .drop = op_drop };

static struct neigh_table *mk(const struct neigh_params *p)
{
	struct neigh_config c = { .ops = &ops, .now_ms = clock_fn, .seed = 42 };
	struct neigh_table *t;

	if (p)
		c.params = *p;
	memset(&rec, 0, sizeof(rec));
	assert_int_equal(neigh_table_new(&c, &t), 0);
	return t;
}

static const uint8_t ip_a[4] = { 10, 0, 0, 2 };
static const uint8_t ip_b[4] = { 10, 0, 0, 3 };

static struct neigh_link mac_link(uint8_t last)
{
	struct neigh_link l = { .len = 6, .usable = true, .mtu = 1500 };

	l.addr[0] = 0x02;
	l.addr[5] = last;
	return l;
}

static void run_for(struct neigh_table *t, uint64_t ms)
{
	uint64_t end = fake_now + ms;

	while (fake_now < end) {
		fake_now += 100;
		neigh_tick(t);
	}
}

static void test_defaults(void **s)
{
	struct neigh_params p = { 0 };

	(void)s;
	neigh_params_defaults(&p);
	assert_int_equal(p.base_reachable_ms, 30000);
	assert_int_equal(p.retrans_ms, 1000);
	assert_int_equal(p.delay_probe_ms, 5000);
	assert_int_equal(p.ucast_probes, 3);
	assert_int_equal(p.mcast_probes, 3);
	assert_int_equal(p.gc_stale_ms, 60000);
	assert_int_equal(p.unres_qlen, 3);
	assert_int_equal(p.gc_thresh1, 128);
	assert_int_equal(p.gc_thresh2, 512);
	assert_int_equal(p.gc_thresh3, 1024);
	struct neigh_table *t = mk(NULL);
	uint32_t r = neigh_reachable_time(t);

	assert_true(r >= 15000 && r < 45000);
	neigh_table_free(t);
}

/* INCOMPLETE: 3 multicast solicitations 1 s apart, then FAILED and the queue dropped. */
static void test_incomplete_fails(void **s)
{
	struct neigh_table *t = mk(NULL);
	int pk[5];
	struct neigh_stats st;

	(void)s;
	for (int i = 0; i < 5; i++)
		assert_int_equal(neigh_resolve(t, AF_INET, ip_a, &pk[i]), 0);
	struct neigh_entry *e = neigh_lookup(t, AF_INET, ip_a);

	assert_non_null(e);
	assert_int_equal(neigh_entry_state(e), NEIGH_INCOMPLETE);
	assert_int_equal(rec.mcast, 1);
	/* Overflow: the two oldest dropped. */
	assert_int_equal(rec.drop, 2);
	assert_ptr_equal(rec.dropped[0], &pk[0]);
	assert_ptr_equal(rec.dropped[1], &pk[1]);
	run_for(t, 1000);
	assert_int_equal(rec.mcast, 2);
	run_for(t, 1000);
	assert_int_equal(rec.mcast, 3);
	assert_int_equal(neigh_entry_state(e), NEIGH_INCOMPLETE);
	run_for(t, 1000);
	assert_int_equal(neigh_entry_state(e), NEIGH_FAILED);
	assert_int_equal(rec.mcast, 3);
	assert_int_equal(rec.drop, 5);
	neigh_table_stats(t, &st);
	assert_int_equal(st.res_failed, 1);
	assert_int_equal(st.unres_discards, 5);
	/* A use right after failing is refused; the next GC removes the entry. */
	int more;

	assert_int_equal(neigh_resolve(t, AF_INET, ip_a, &more), -EHOSTUNREACH);
	assert_int_equal(rec.drop, 6);
	run_for(t, 30000);
	assert_null(neigh_lookup(t, AF_INET, ip_a));
	neigh_table_free(t);
}

/* A solicited reply resolves: queue flushed in order, REACHABLE; then STALE after the
 * reachable time; used -> DELAY -> PROBE (3 unicast) -> FAILED without answers. */
static void test_lifecycle(void **s)
{
	struct neigh_table *t = mk(NULL);
	int pk[3];
	struct neigh_link l = mac_link(1);
	struct neigh_entry *e;

	(void)s;
	for (int i = 0; i < 3; i++)
		neigh_resolve(t, AF_INET, ip_a, &pk[i]);
	e = neigh_update(t, AF_INET, ip_a, &l, NEIGH_F_SOLICITED | NEIGH_F_OVERRIDE);
	assert_non_null(e);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	assert_int_equal(rec.xmit, 3);
	assert_ptr_equal(rec.last_xmit, &pk[2]);
	assert_int_equal(neigh_entry_link(e)->addr[5], 1);
	uint32_t rt = neigh_reachable_time(t);

	run_for(t, rt - 200);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	run_for(t, 400);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE);
	/* STALE keeps sending; a use moves it to DELAY. */
	neigh_entry_used(e, fake_now);
	run_for(t, 100);
	assert_int_equal(neigh_entry_state(e), NEIGH_DELAY);
	run_for(t, 4800);
	assert_int_equal(neigh_entry_state(e), NEIGH_DELAY);
	run_for(t, 300);
	assert_int_equal(neigh_entry_state(e), NEIGH_PROBE);
	assert_int_equal(rec.ucast, 1);
	run_for(t, 2000);
	assert_int_equal(rec.ucast, 3);
	run_for(t, 1000);
	assert_int_equal(neigh_entry_state(e), NEIGH_FAILED);
	neigh_table_free(t);
}

/* DELAY: an upper-layer confirmation within delay_probe_ms goes back to REACHABLE
 * without any probe. PROBE: a solicited reply makes it REACHABLE. */
static void test_confirmations(void **s)
{
	struct neigh_table *t = mk(NULL);
	struct neigh_link l = mac_link(1);
	struct neigh_entry *e = neigh_update(t, AF_INET, ip_a, &l, NEIGH_F_CREATE);

	(void)s;
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE); /* unsolicited */
	neigh_entry_used(e, fake_now);
	run_for(t, 100);
	assert_int_equal(neigh_entry_state(e), NEIGH_DELAY);
	run_for(t, 1000);
	neigh_entry_confirmed(e, fake_now);
	run_for(t, 100);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	assert_int_equal(rec.ucast, 0);
	/* to PROBE, then a reply */
	run_for(t, 46000);
	neigh_entry_used(e, fake_now);
	run_for(t, 5200);
	assert_int_equal(neigh_entry_state(e), NEIGH_PROBE);
	neigh_update(t, AF_INET, ip_a, &l, NEIGH_F_SOLICITED);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	neigh_table_free(t);
}

/* Linux's neigh_update address rules. */
static void test_update_rules(void **s)
{
	struct neigh_table *t = mk(NULL);
	struct neigh_link l1 = mac_link(1), l2 = mac_link(2);
	struct neigh_entry *e;
	struct neigh_stats st;

	(void)s;
	assert_null(neigh_update(t, AF_INET, ip_a, &l1, 0)); /* no CREATE: nothing */
	e = neigh_update(t, AF_INET, ip_a, &l1, NEIGH_F_CREATE | NEIGH_F_SOLICITED);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	/* Different address without OVERRIDE: kept; REACHABLE -> STALE. */
	neigh_update(t, AF_INET, ip_a, &l2, NEIGH_F_SOLICITED);
	assert_int_equal(neigh_entry_link(e)->addr[5], 1);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE);
	/* With OVERRIDE, unsolicited: replaced, STALE. */
	neigh_update(t, AF_INET, ip_a, &l2, NEIGH_F_OVERRIDE);
	assert_int_equal(neigh_entry_link(e)->addr[5], 2);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE);
	/* Same address unsolicited: no change; solicited: REACHABLE. */
	neigh_update(t, AF_INET, ip_a, &l2, 0);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE);
	neigh_update(t, AF_INET, ip_a, NULL, NEIGH_F_SOLICITED);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	neigh_table_stats(t, &st);
	assert_int_equal(st.lladdr_changes, 1);
	/* PERMANENT: only admin changes it, never timers. */
	e = neigh_update(t, AF_INET, ip_b, &l1, NEIGH_F_ADMIN);
	assert_int_equal(neigh_entry_state(e), NEIGH_PERMANENT);
	neigh_update(t, AF_INET, ip_b, &l2, NEIGH_F_OVERRIDE | NEIGH_F_SOLICITED);
	assert_int_equal(neigh_entry_link(e)->addr[5], 1);
	run_for(t, 200000);
	assert_int_equal(neigh_entry_state(e), NEIGH_PERMANENT);
	assert_non_null(neigh_lookup(t, AF_INET, ip_b));
	/* Below gc_thresh1 (128) Linux collects nothing but FAILED entries: the STALE
	 * one stays (test_gc_thresholds covers collection). */
	assert_non_null(neigh_lookup(t, AF_INET, ip_a));
	assert_int_equal(neigh_entry_state(neigh_lookup(t, AF_INET, ip_a)), NEIGH_STALE);
	neigh_table_free(t);
}

/* An entry whose address is known but not usable (IPoIB before its path) keeps the
 * queue until neigh_set_link publishes a usable link. */
static void test_usable_later(void **s)
{
	struct neigh_table *t = mk(NULL);
	struct neigh_link l = mac_link(7);
	int pk[2];
	struct neigh_entry *e;
	struct neigh_info ni;

	(void)s;
	l.usable = false;
	neigh_resolve(t, AF_INET6, (const uint8_t *)"\xfd\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x12", &pk[0]);
	e = neigh_update(t, AF_INET6, (const uint8_t *)"\xfd\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x12", &l,
			 NEIGH_F_SOLICITED);
	neigh_resolve(t, AF_INET6, (const uint8_t *)"\xfd\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x12", &pk[1]);
	assert_int_equal(rec.xmit, 0);
	neigh_info_of(t, e, &ni);
	assert_int_equal(ni.queued, 2);
	assert_int_equal(ni.family, AF_INET6);
	l.usable = true;
	neigh_set_link(t, e, &l);
	assert_int_equal(rec.xmit, 2);
	neigh_info_of(t, e, &ni);
	assert_int_equal(ni.queued, 0);
	assert_int_equal(ni.state, NEIGH_REACHABLE);
	neigh_table_free(t);
}

/* gc_thresh3 bounds the table; forced GC removes FAILED/old STALE entries first. */
static void test_gc_thresholds(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 4, .gc_thresh2 = 8, .gc_thresh3 = 16 };
	struct neigh_table *t = mk(&p);
	struct neigh_link l = mac_link(1);
	struct neigh_stats st;
	uint8_t a[4] = { 10, 1, 0, 0 };
	unsigned made = 0;

	(void)s;
	for (int i = 0; i < 40; i++) {
		a[3] = (uint8_t)i;
		if (neigh_update(t, AF_INET, a, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED))
			made++;
	}
	neigh_table_stats(t, &st);
	assert_int_equal(made, 16);
	assert_int_equal(st.entries, 16);
	assert_true(st.table_full >= 24);
	/* Let them go STALE and unused past gc_stale: a forced GC makes room. */
	run_for(t, 110000);
	a[3] = 200;
	assert_non_null(neigh_update(t, AF_INET, a, &l, NEIGH_F_CREATE));
	neigh_table_stats(t, &st);
	assert_true(st.entries <= 16);
	neigh_table_free(t);
}

static int count_fn(void *arg, const struct neigh_info *ni)
{
	(void)ni;
	(*(unsigned *)arg)++;
	return 0;
}

/* Many entries, deletes in between: every lookup right. */
static void test_many(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 10000, .gc_thresh2 = 20000, .gc_thresh3 = 40000 };
	struct neigh_table *t = mk(&p);
	struct neigh_link l = mac_link(1);
	uint8_t a[16] = { 0xfd };
	unsigned n = 0;

	(void)s;
	for (int i = 0; i < 20000; i++) {
		memcpy(a + 12, &i, 4);
		assert_non_null(neigh_update(t, AF_INET6, a, &l, NEIGH_F_CREATE));
	}
	for (int i = 0; i < 20000; i += 2) {
		memcpy(a + 12, &i, 4);
		neigh_delete(t, neigh_lookup(t, AF_INET6, a));
	}
	for (int i = 0; i < 20000; i++) {
		memcpy(a + 12, &i, 4);
		if (i % 2)
			assert_non_null(neigh_lookup(t, AF_INET6, a));
		else
			assert_null(neigh_lookup(t, AF_INET6, a));
	}
	neigh_foreach(t, count_fn, &n);
	assert_int_equal(n, 10000);
	assert_string_equal(neigh_state_name(NEIGH_REACHABLE), "REACHABLE");
	neigh_table_free(t);
}

/* The walk in pieces (a streamed `show neighbours`): each piece ends at a bucket boundary
 * when stop says so, and the pieces together see every entry exactly once, also when
 * entries are added and deleted between pieces (those may or may not be seen). */
struct piece_walk {
	uint8_t seen[4000];
	unsigned in_piece, limit;
};

static int piece_fn(void *arg, const struct neigh_info *ni)
{
	struct piece_walk *w = arg;
	unsigned i = (unsigned)ni->addr[14] << 8 | ni->addr[15];

	assert_true(i < 4000);
	w->seen[i]++;
	w->in_piece++;
	return 0;
}

static bool piece_full(void *arg)
{
	const struct piece_walk *w = arg;

	return w->in_piece >= w->limit;
}

static void test_walk_pieces(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 1000, .gc_thresh2 = 2000, .gc_thresh3 = 4000 };
	struct neigh_table *t = mk(&p);
	struct neigh_link l = mac_link(1);
	struct piece_walk w = { .limit = 50 };
	uint8_t a[16] = { 0xfd };
	unsigned b = 0, pieces = 0;

	(void)s;
	for (unsigned i = 0; i < 3000; i++) {
		a[14] = (uint8_t)(i >> 8);
		a[15] = (uint8_t)i;
		assert_non_null(neigh_update(t, AF_INET6, a, &l, NEIGH_F_CREATE));
	}
	for (;;) {
		w.in_piece = 0;
		bool more = neigh_walk_from(t, &b, piece_full, piece_fn, &w);

		pieces++;
		/* A piece stops at the first bucket boundary past the limit: buckets are
		 * short, so it overshoots by a few entries at most. */
		assert_true(w.in_piece >= 1 && w.in_piece < w.limit + 8);
		if (!more)
			break;
		/* Between pieces: 1000..1009 deleted, 3000..3009 added. */
		if (pieces == 10) {
			for (unsigned i = 1000; i < 1010; i++) {
				a[14] = (uint8_t)(i >> 8);
				a[15] = (uint8_t)i;
				neigh_delete(t, neigh_lookup(t, AF_INET6, a));
			}
			for (unsigned i = 3000; i < 3010; i++) {
				a[14] = (uint8_t)(i >> 8);
				a[15] = (uint8_t)i;
				assert_non_null(neigh_update(t, AF_INET6, a, &l, NEIGH_F_CREATE));
			}
		}
	}
	assert_true(pieces > 3000 / 58);
	for (unsigned i = 0; i < 3010; i++) {
		if (i >= 1000 && i < 1010)
			assert_true(w.seen[i] <= 1);
		else if (i >= 3000)
			assert_true(w.seen[i] <= 1);
		else
			assert_int_equal(w.seen[i], 1);
	}
	/* Past the end: nothing more, and the cursor stays there. */
	w.in_piece = 0;
	assert_false(neigh_walk_from(t, &b, piece_full, piece_fn, &w));
	assert_int_equal(w.in_piece, 0);
	neigh_table_free(t);
}

/* The defaults of the limits, and the table refusing a cap above gc_thresh3. */
static void test_limit_params(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 8, .gc_thresh2 = 16, .gc_thresh3 = 64 };
	struct neigh_config c = { .ops = &ops, .now_ms = clock_fn, .seed = 42 };
	struct neigh_table *t;

	(void)s;
	neigh_params_defaults(&p);
	assert_int_equal(p.max_unresolved, 16); /* gc_thresh3 / 4 */
	memset(&p, 0, sizeof(p));
	neigh_params_defaults(&p);
	assert_int_equal(p.max_unresolved, 256);
	c.params = (struct neigh_params){
		.gc_thresh1 = 1, .gc_thresh2 = 2, .gc_thresh3 = 4, .max_unresolved = 5
	};
	assert_int_equal(neigh_table_new(&c, &t), -EINVAL);
	c.params.max_unresolved = 4;
	assert_int_equal(neigh_table_new(&c, &t), 0);
	assert_int_equal(neigh_table_params(t)->max_unresolved, 4);
	neigh_table_free(t);
}

static int pkt_token;

/*
 * Issue 20: one host scans 10,000 addresses of the link's prefix at about 1,000 a
 * second (a packet each, so an INCOMPLETE entry each), while a bystander's entry is in
 * use and answers its probes. The bystander's entry survives and stays usable all the
 * way, INCOMPLETE entries never pass the cap, the table never passes gc_thresh3, and a
 * real neighbour that turns up in the middle of the scan still resolves.
 */
static void test_scan(void **s)
{
	struct neigh_params p = { .base_reachable_ms = 2000 }; /* cycles through PROBE */
	struct neigh_table *t = mk(&p);
	struct neigh_link l = mac_link(7);
	const uint8_t by[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7 };
	const uint8_t late[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9 };
	uint8_t a[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0x5c };
	struct neigh_entry *e, *bye;
	struct neigh_stats st;
	unsigned max_unres = 0, max_entries = 0, probes_answered = 0;
	const struct neigh_params *tp = neigh_table_params(t);

	(void)s;
	bye = neigh_update(t, AF_INET6, by, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED);
	assert_non_null(bye);
	for (uint32_t i = 0; i < 10000; i++) {
		uint32_t x = i * 2654435761u; /* distinct, scattered */

		memcpy(a + 12, &x, 4);
		assert_true(neigh_resolve(t, AF_INET6, a, &pkt_token) == 0);
		fake_now += 1;
		if (i % 100 == 0) {
			/* The bystander's traffic, and its answers to our probes. */
			e = neigh_lookup(t, AF_INET6, by);
			assert_ptr_equal(e, bye);
			neigh_entry_used(e, fake_now);
			neigh_tick(t);
			if (neigh_entry_state(e) == NEIGH_PROBE) {
				neigh_update(t, AF_INET6, by, &l, NEIGH_F_SOLICITED);
				probes_answered++;
			}
			assert_true(neigh_entry_link(e)->usable);
			assert_int_not_equal(neigh_entry_state(e), NEIGH_FAILED);
			assert_int_not_equal(neigh_entry_state(e), NEIGH_INCOMPLETE);
		}
		if (i == 5000) {
			/* A real neighbour, answering in 2 ms, resolves mid-scan. */
			assert_int_equal(neigh_resolve(t, AF_INET6, late, NULL), 0);
			fake_now += 2;
			assert_non_null(neigh_update(t, AF_INET6, late, &l,
						     NEIGH_F_SOLICITED | NEIGH_F_OVERRIDE));
			assert_int_equal(neigh_entry_state(neigh_lookup(t, AF_INET6, late)),
					 NEIGH_REACHABLE);
		}
		neigh_table_stats(t, &st);
		if (st.unresolved > max_unres)
			max_unres = st.unresolved;
		if (st.entries > max_entries)
			max_entries = st.entries;
	}
	neigh_table_stats(t, &st);
	assert_true(probes_answered > 0);
	assert_int_equal(max_unres, tp->max_unresolved);
	assert_true(max_entries <= tp->gc_thresh3);
	assert_true(st.unres_evictions >= 10000 - tp->max_unresolved - st.res_failed);
	assert_int_equal(st.stale_evictions, 0);
	assert_int_equal(st.allocs - st.destroys, st.entries);
	assert_non_null(neigh_lookup(t, AF_INET6, late));
	/* The scan's parked packets were all dropped (evicted or failed), none sent. */
	assert_int_equal(rec.xmit, 0);
	assert_int_equal(st.unres_discards + st.unresolved, 10000);
	neigh_table_free(t);
}

/* A newcomer to a full table: FAILED first (the forced GC), then the oldest
 * INCOMPLETE, then the STALE entry idle longest; entries in use stay, and when only
 * those are left the newcomer is refused and counted. */
static void test_eviction_order(void **s)
{
	struct neigh_params p = {
		.gc_thresh1 = 1, .gc_thresh2 = 8, .gc_thresh3 = 8, .max_unresolved = 2
	};
	struct neigh_table *t = mk(&p);
	struct neigh_link l = mac_link(1);
	uint8_t f[4] = { 10, 0, 1, 1 }, r1[4] = { 10, 0, 1, 2 }, r2[4] = { 10, 0, 1, 3 },
		s_old[4] = { 10, 0, 1, 4 }, s_new[4] = { 10, 0, 1, 5 }, s_used[4] = { 10, 0, 1, 6 },
		i1[4] = { 10, 0, 1, 7 }, i2[4] = { 10, 0, 1, 8 }, n[4] = { 10, 0, 2, 0 };
	struct neigh_stats st;
	struct neigh_entry *e;

	(void)s;
	assert_int_equal(neigh_resolve(t, AF_INET, f, NULL), 0);
	run_for(t, 3500);
	assert_int_equal(neigh_entry_state(neigh_lookup(t, AF_INET, f)), NEIGH_FAILED);
	assert_non_null(neigh_update(t, AF_INET, r1, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED));
	assert_non_null(neigh_update(t, AF_INET, r2, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED));
	assert_non_null(neigh_update(t, AF_INET, s_old, &l, NEIGH_F_CREATE));
	fake_now += 1000;
	assert_non_null(neigh_update(t, AF_INET, s_new, &l, NEIGH_F_CREATE));
	e = neigh_update(t, AF_INET, s_used, &l, NEIGH_F_CREATE);
	assert_non_null(e);
	fake_now += 1000;
	neigh_entry_used(e, fake_now); /* STALE, but used a moment ago */
	assert_int_equal(neigh_resolve(t, AF_INET, i1, &pkt_token), 0);
	fake_now += 10;
	assert_int_equal(neigh_resolve(t, AF_INET, i2, &pkt_token), 0);
	neigh_table_stats(t, &st);
	assert_int_equal(st.entries, 8);
	assert_int_equal(st.unresolved, 2);

	/* Each newcomer evicts one, in order. */
	const uint8_t *gone[] = { f, i1, i2, s_old, s_new };
	for (unsigned k = 0; k < 5; k++) {
		fake_now += 10;
		n[3] = (uint8_t)k;
		assert_non_null(neigh_update(t, AF_INET, n, &l, NEIGH_F_CREATE));
		assert_null(neigh_lookup(t, AF_INET, gone[k]));
		for (unsigned j = k + 1; j < 5; j++)
			assert_non_null(neigh_lookup(t, AF_INET, gone[j]));
	}
	neigh_table_stats(t, &st);
	assert_int_equal(st.entries, 8);
	assert_int_equal(st.unres_evictions, 2);
	assert_int_equal(st.stale_evictions, 2);
	assert_int_equal(st.table_full, 0);
	assert_int_equal(rec.drop, 2); /* the INCOMPLETE entries' parked packets */

	/* The newcomers themselves are STALE and unused: later ones evict earlier ones;
	 * the entries in use never go. */
	for (unsigned k = 5; k < 40; k++) {
		fake_now += 10;
		n[3] = (uint8_t)k;
		assert_non_null(neigh_update(t, AF_INET, n, &l, NEIGH_F_CREATE));
		assert_non_null(neigh_lookup(t, AF_INET, r1));
		assert_non_null(neigh_lookup(t, AF_INET, r2));
		assert_non_null(neigh_lookup(t, AF_INET, s_used));
	}
	neigh_table_free(t);

	/* Only entries in use: the newcomer is refused, counted, its packet dropped. */
	p = (struct neigh_params){ .gc_thresh1 = 1, .gc_thresh2 = 4, .gc_thresh3 = 4 };
	t = mk(&p);
	for (uint8_t k = 0; k < 4; k++) {
		n[3] = k;
		assert_non_null(
		    neigh_update(t, AF_INET, n, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED));
	}
	n[3] = 100;
	assert_null(neigh_update(t, AF_INET, n, &l, NEIGH_F_CREATE));
	assert_int_equal(neigh_resolve(t, AF_INET, n, &pkt_token), -ENOBUFS);
	neigh_table_stats(t, &st);
	assert_int_equal(st.entries, 4);
	assert_int_equal(st.table_full, 2);
	assert_int_equal(rec.drop, 1);
	neigh_table_free(t);
}

/* At max_unresolved, a new resolution evicts the oldest one in flight; a FAILED entry
 * used again counts against the cap too. */
static void test_unresolved_cap(void **s)
{
	struct neigh_params p = { .max_unresolved = 3 };
	struct neigh_table *t = mk(&p);
	uint8_t a[4] = { 10, 0, 3, 0 };
	struct neigh_stats st;

	(void)s;
	for (uint8_t k = 0; k < 3; k++) {
		a[3] = k;
		assert_int_equal(neigh_resolve(t, AF_INET, a, &pkt_token), 0);
		fake_now += 10;
	}
	a[3] = 3;
	assert_int_equal(neigh_resolve(t, AF_INET, a, &pkt_token), 0);
	neigh_table_stats(t, &st);
	assert_int_equal(st.unresolved, 3);
	assert_int_equal(st.unres_evictions, 1);
	assert_int_equal(rec.drop, 1);
	a[3] = 0;
	assert_null(neigh_lookup(t, AF_INET, a));
	a[3] = 1;
	assert_non_null(neigh_lookup(t, AF_INET, a));
	/* All fail; one used again starts over as INCOMPLETE, the list in order. */
	run_for(t, 4000);
	neigh_table_stats(t, &st);
	assert_int_equal(st.unresolved, 0);
	assert_int_equal(neigh_resolve(t, AF_INET, a, NULL), 0);
	neigh_table_stats(t, &st);
	assert_int_equal(st.unresolved, 1);
	assert_int_equal(neigh_entry_state(neigh_lookup(t, AF_INET, a)), NEIGH_INCOMPLETE);
	neigh_delete(t, neigh_lookup(t, AF_INET, a));
	neigh_table_stats(t, &st);
	assert_int_equal(st.unresolved, 0);
	neigh_table_free(t);
}

/* The learning guard: inside the link's prefixes, or IPv6 link-local. */
static void test_on_link(void **s)
{
	struct ip_prefix pf[3];
	struct neigh_table *t = mk(NULL);
	struct neigh_stats st;
	const uint8_t in4[4] = { 10, 1, 0, 77 }, out4[4] = { 10, 2, 0, 1 };
	const uint8_t in6[16] = { 0xfd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	const uint8_t out6[16] = { 0xfd, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	const uint8_t ll6[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	const uint8_t ll6b[16] = { 0xfe, 0xbf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	const uint8_t nll6[16] = { 0xfe, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };

	(void)s;
	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &pf[0]), 0); /* host bits kept */
	assert_int_equal(ip_prefix_parse("fd00:1::1/64", true, &pf[1]), 0);
	assert_int_equal(ip_prefix_parse("192.168.5.0/25", false, &pf[2]), 0); /* proxy */
	assert_true(neigh_on_link(pf, 3, AF_INET, in4));
	assert_false(neigh_on_link(pf, 3, AF_INET, out4));
	assert_true(neigh_on_link(pf, 3, AF_INET, (const uint8_t *)"\xc0\xa8\x05\x7f"));
	assert_false(neigh_on_link(pf, 3, AF_INET, (const uint8_t *)"\xc0\xa8\x05\x80"));
	assert_true(neigh_on_link(pf, 3, AF_INET6, in6));
	assert_false(neigh_on_link(pf, 3, AF_INET6, out6));
	assert_true(neigh_on_link(pf, 3, AF_INET6, ll6));
	assert_true(neigh_on_link(pf, 3, AF_INET6, ll6b));
	assert_false(neigh_on_link(pf, 3, AF_INET6, nll6));
	assert_true(neigh_on_link(NULL, 0, AF_INET6, ll6));
	assert_false(neigh_on_link(NULL, 0, AF_INET, in4));
	/* An IPv4 address never matches an IPv6 prefix of the same leading octets. */
	assert_false(neigh_on_link(&pf[1], 1, AF_INET, (const uint8_t *)"\xfd\x00\x00\x01"));
	/* Off link: an absent sender creates nothing and is counted, each time it is heard;
	 * a known one is updated as usual and not counted (nothing was refused). */
	struct neigh_link l1 = mac_link(1), l2 = mac_link(2);

	assert_null(neigh_update(t, AF_INET, out4, &l1, NEIGH_F_OFF_LINK | NEIGH_F_OVERRIDE));
	assert_null(neigh_update(t, AF_INET6, out6, &l1, NEIGH_F_OFF_LINK | NEIGH_F_OVERRIDE));
	neigh_table_stats(t, &st);
	assert_int_equal(st.learn_refused, 2);
	assert_int_equal(st.entries, 0);
	assert_non_null(neigh_update(t, AF_INET, out4, &l1, NEIGH_F_CREATE));
	assert_non_null(neigh_update(t, AF_INET, out4, &l2, NEIGH_F_OFF_LINK | NEIGH_F_OVERRIDE));
	neigh_table_stats(t, &st);
	assert_int_equal(st.learn_refused, 2);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.lladdr_changes, 1);
	neigh_table_free(t);
}

/* A defer that holds callbacks until the test runs them: a grace period that ends late. */
struct deferred {
	void (*fn)(void *);
	void *arg;
};
static struct deferred held[8192];
static unsigned n_held;

static void hold_defer(void *ctx, void (*fn)(void *arg), void *arg)
{
	(void)ctx;
	assert_true(n_held < 8192);
	held[n_held++] = (struct deferred){ fn, arg };
}

static void run_held(void)
{
	for (unsigned i = 0; i < n_held; i++)
		held[i].fn(held[i].arg);
	n_held = 0;
}

static void addr_of(unsigned i, int *family, uint8_t a[16])
{
	memset(a, 0, 16);
	if (i % 3 == 0) {
		*family = AF_INET6;
		a[0] = 0xfd;
		memcpy(a + 12, &i, 4);
	} else {
		*family = AF_INET;
		a[0] = 10;
		a[1] = (uint8_t)(i >> 16);
		a[2] = (uint8_t)(i >> 8);
		a[3] = (uint8_t)i;
	}
}

/*
 * The data path's flat index (neigh_lookup_link): after thousands of adds and deletes
 * in a small table (so its dead slots force many rebuilds, each old index freed through
 * the defer), every live entry is found with its own link address, every deleted one is
 * not; IPv4 and IPv6 keys side by side. The same with each key's slot hint kept across
 * the run (stale after its slot died or the index was rebuilt), and with a hint that
 * names another key's slot: the answers never differ from the unhinted lookup.
 */
static void test_index_churn(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 64, .gc_thresh2 = 64, .gc_thresh3 = 64 };
	struct neigh_config c = {
		.ops = &ops, .now_ms = clock_fn, .seed = 7, .params = p, .defer = hold_defer
	};
	struct neigh_table *t;
	const unsigned window = 40, total = 3000;
	static uint32_t hints[3000];
	unsigned stale = 0;

	(void)s;
	memset(hints, 0, sizeof(hints));
	memset(&rec, 0, sizeof(rec));
	assert_int_equal(neigh_table_new(&c, &t), 0);
	for (unsigned i = 0; i < total; i++) {
		struct neigh_link l = mac_link((uint8_t)i);
		uint8_t a[16];
		int fam;

		l.addr[4] = (uint8_t)(i >> 8);
		addr_of(i, &fam, a);
		assert_non_null(neigh_update(t, fam, a, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED));
		if (i >= window) {
			addr_of(i - window, &fam, a);
			neigh_delete(t, neigh_lookup(t, fam, a));
		}
		if (i % 13 && i != total - 1)
			continue;
		for (unsigned k = 0; k <= i; k++) {
			const struct neigh_link *ll;
			uint32_t was = hints[k], other = k ? hints[k - 1] : 0;

			addr_of(k, &fam, a);
			ll = neigh_lookup_link(t, fam, a, fake_now, NULL);
			assert_ptr_equal(neigh_lookup_link(t, fam, a, fake_now, &hints[k]), ll);
			stale += was && hints[k] && hints[k] != was;
			assert_ptr_equal(neigh_lookup_link(t, fam, a, fake_now, &other), ll);
			/* a found key leaves its slot, an absent one no hint */
			assert_true(ll ? hints[k] != 0 && other == hints[k] : hints[k] == 0);
			assert_ptr_equal(neigh_lookup_link(t, fam, a, fake_now, &hints[k]), ll);
			/* the slot's copy of the MAC: the link's */
			{
				uint8_t mac[6];

				assert_int_equal(
				    neigh_lookup_mac(t, fam, a, fake_now, &hints[k], mac),
				    ll != NULL);
				if (ll)
					assert_memory_equal(mac, ll->addr, 6);
			}
			if (k + window > i) {
				assert_non_null(ll);
				assert_int_equal(ll->addr[5], (uint8_t)k);
				assert_int_equal(ll->addr[4], (uint8_t)(k >> 8));
				assert_ptr_equal(neigh_entry_link(neigh_lookup(t, fam, a)), ll);
			} else {
				assert_null(ll);
				assert_null(neigh_lookup(t, fam, a));
			}
		}
		run_held(); /* a grace period ends */
	}
	assert_true(stale > 0); /* rebuilds moved keys the hints still named */
	neigh_table_free(t);
	run_held();
}

/* neigh_lookup_link sends only with a usable link in a sending state, and its use hint
 * is the one neigh_tick acts on (STALE and used: DELAY); neigh_lookup_mac answers the
 * same, with the link's MAC (a 20-octet address: its first 6, read from the link). */
static bool mac_of(struct neigh_table *t, const uint8_t *ip, uint8_t mac[6])
{
	return neigh_lookup_mac(t, AF_INET, ip, fake_now, NULL, mac);
}

static void test_lookup_link(void **s)
{
	struct neigh_table *t = mk(NULL);
	struct neigh_link l = mac_link(9), unusable = mac_link(9), wide = { 0 };
	struct neigh_info ni;
	uint8_t mac[6];
	struct neigh_entry *e;

	(void)s;
	unusable.usable = false;
	assert_null(neigh_lookup_link(t, AF_INET, ip_a, fake_now, NULL));
	assert_false(mac_of(t, ip_a, mac));
	assert_int_equal(neigh_resolve(t, AF_INET, ip_a, NULL), 0); /* INCOMPLETE */
	assert_null(neigh_lookup_link(t, AF_INET, ip_a, fake_now, NULL));
	assert_false(mac_of(t, ip_a, mac));
	e = neigh_update(t, AF_INET, ip_a, &unusable, NEIGH_F_SOLICITED);
	assert_non_null(e);
	assert_int_equal(neigh_entry_state(e), NEIGH_REACHABLE);
	assert_null(neigh_lookup_link(t, AF_INET, ip_a, fake_now, NULL)); /* not usable yet */
	assert_false(mac_of(t, ip_a, mac));
	neigh_set_link(t, e, &l);
	assert_non_null(neigh_lookup_link(t, AF_INET, ip_a, fake_now, NULL));
	assert_true(mac_of(t, ip_a, mac));
	assert_memory_equal(mac, l.addr, 6);
	wide.len = 20;
	wide.usable = true;
	for (int i = 0; i < 20; i++)
		wide.addr[i] = (uint8_t)(0x40 + i);
	neigh_set_link(t, e, &wide);
	assert_true(mac_of(t, ip_a, mac));
	assert_memory_equal(mac, wide.addr, 6);
	neigh_set_link(t, e, &l);
	/* unsolicited: STALE, still sent to; the use moves it to DELAY */
	assert_non_null(neigh_update(t, AF_INET, ip_b, &l, NEIGH_F_CREATE));
	e = neigh_lookup(t, AF_INET, ip_b);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE);
	fake_now += 10;
	neigh_tick(t);
	assert_int_equal(neigh_entry_state(e), NEIGH_STALE); /* unused */
	fake_now += 10;
	assert_ptr_equal(neigh_lookup_link(t, AF_INET, ip_b, fake_now, NULL), neigh_entry_link(e));
	neigh_info_of(t, e, &ni);
	assert_int_equal(ni.used_ms, 0);
	neigh_tick(t);
	assert_int_equal(neigh_entry_state(e), NEIGH_DELAY);
	/* FAILED after the delay and the probes (5 + 3 s): not sent to */
	run_for(t, 8500);
	assert_int_equal(neigh_entry_state(e), NEIGH_FAILED);
	assert_null(neigh_lookup_link(t, AF_INET, ip_b, fake_now, NULL));
	assert_false(mac_of(t, ip_b, mac));
	assert_true(mac_of(t, ip_a, mac)); /* still REACHABLE (15 s at the least) */
	neigh_delete(t, neigh_lookup(t, AF_INET, ip_a));
	assert_false(mac_of(t, ip_a, mac));
	neigh_table_free(t);
}

/*
 * The RCU contract under reader threads: while the control thread adds, deletes and
 * re-links entries (rebuilding the index many times), two workers looking them up with
 * neigh_lookup_link only ever get the link address of the key they asked for, and
 * nothing they read is freed under them (ASan, TSan). The workers share one slot hint
 * per key, as they share a route's next hop, and rewrite it as slots die and move;
 * every other lookup of the second is unhinted. Grace periods are quiescent-state
 * based as liburcu QSBR's: each reader counts a quiescent state after each batch, and
 * held frees run once both counts moved past the moment they were held.
 */
#define N_READERS 2

struct rcu_sim {
	unsigned qs[N_READERS]; /* atomic: quiescent states of each reader */
	unsigned end;           /* atomic */
	struct neigh_table *t;
	uint32_t hints[48]; /* atomic (relaxed): the readers' shared slot hints */
	unsigned bad[N_READERS], hits[N_READERS], hinted[N_READERS];
};

struct rcu_reader {
	struct rcu_sim *r;
	unsigned id;
};

static void *churn_reader(void *arg)
{
	const struct rcu_reader *me = arg;
	struct rcu_sim *r = me->r;
	unsigned turn = 0;

	while (!__atomic_load_n(&r->end, __ATOMIC_SEQ_CST)) {
		for (unsigned k = 0; k < 48; k++) {
			bool hint = me->id == 0 || (turn + k) % 2;
			uint8_t a[16];
			int fam;
			const struct neigh_link *ll;

			addr_of(k, &fam, a);
			if (hint && __atomic_load_n(&r->hints[k], __ATOMIC_RELAXED))
				r->hinted[me->id]++;
			if ((turn + k) % 3 == 0) { /* the slot's MAC word */
				uint8_t mac[6];

				if (!neigh_lookup_mac(r->t, fam, a, 1, hint ? &r->hints[k] : NULL,
						      mac))
					continue;
				r->hits[me->id]++;
				if (mac[5] != (uint8_t)k || mac[4] != 0)
					r->bad[me->id]++;
				continue;
			}
			ll = neigh_lookup_link(r->t, fam, a, 1, hint ? &r->hints[k] : NULL);
			if (!ll)
				continue;
			r->hits[me->id]++;
			if (ll->addr[5] != (uint8_t)k || ll->addr[4] != 0 || !ll->usable)
				r->bad[me->id]++;
		}
		turn++;
		__atomic_add_fetch(&r->qs[me->id], 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

static void test_index_readers(void **s)
{
	struct neigh_params p = { .gc_thresh1 = 64, .gc_thresh2 = 64, .gc_thresh3 = 64 };
	struct neigh_config c = {
		.ops = &ops, .now_ms = clock_fn, .seed = 11, .params = p, .defer = hold_defer
	};
	struct rcu_sim r = { 0 };
	struct rcu_reader rd[N_READERS];
	pthread_t th[N_READERS];

	(void)s;
	memset(&rec, 0, sizeof(rec));
	assert_int_equal(neigh_table_new(&c, &r.t), 0);
	for (unsigned j = 0; j < N_READERS; j++) {
		rd[j] = (struct rcu_reader){ &r, j };
		assert_int_equal(pthread_create(&th[j], NULL, churn_reader, &rd[j]), 0);
	}
	for (unsigned i = 0; i < 4000; i++) {
		unsigned k = i % 48;
		struct neigh_link l = mac_link((uint8_t)k);
		struct neigh_entry *e;
		uint8_t a[16];
		int fam;

		l.addr[3] = (uint8_t)i; /* a new link address each time: cells replaced */
		addr_of(k, &fam, a);
		e = neigh_lookup(r.t, fam, a);
		if (e && i % 3 == 0)
			neigh_delete(r.t, e);
		else if (e)
			neigh_set_link(r.t, e, &l);
		else
			assert_non_null(
			    neigh_update(r.t, fam, a, &l, NEIGH_F_CREATE | NEIGH_F_SOLICITED));
		if (i % 64 == 63) {
			unsigned n = n_held;

			for (unsigned j = 0; j < N_READERS; j++) {
				unsigned q0 = __atomic_load_n(&r.qs[j], __ATOMIC_SEQ_CST);

				while (__atomic_load_n(&r.qs[j], __ATOMIC_SEQ_CST) == q0)
					sched_yield();
			}
			for (unsigned j = 0; j < n; j++)
				held[j].fn(held[j].arg);
			memmove(held, held + n, (n_held - n) * sizeof(held[0]));
			n_held -= n;
		}
	}
	__atomic_store_n(&r.end, 1, __ATOMIC_SEQ_CST);
	for (unsigned j = 0; j < N_READERS; j++) {
		pthread_join(th[j], NULL);
		assert_int_equal(r.bad[j], 0);
		assert_true(r.hits[j] > 0);
		assert_true(r.hinted[j] > 0); /* the hints were there to be trusted or not */
	}
	neigh_table_free(r.t);
	run_held();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),       cmocka_unit_test(test_incomplete_fails),
		cmocka_unit_test(test_lifecycle),      cmocka_unit_test(test_confirmations),
		cmocka_unit_test(test_update_rules),   cmocka_unit_test(test_usable_later),
		cmocka_unit_test(test_gc_thresholds),  cmocka_unit_test(test_many),
		cmocka_unit_test(test_walk_pieces),    cmocka_unit_test(test_limit_params),
		cmocka_unit_test(test_scan),           cmocka_unit_test(test_eviction_order),
		cmocka_unit_test(test_unresolved_cap), cmocka_unit_test(test_on_link),
		cmocka_unit_test(test_index_churn),    cmocka_unit_test(test_lookup_link),
		cmocka_unit_test(test_index_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
