/*
 * Router liveness in the SA client (sm-client/sa.h "Router liveness") on a fake
 * transport and a fake clock: the PortInfoRecord polls (cadence, encoding, never
 * retransmitted), a router whose port the SA no longer has taken out of the GID route
 * table within one interval and put back when it returns, timeouts that say nothing
 * about the router, the miss count, learned routers (from an off-subnet PathRecord)
 * whose cached paths are dropped and re-asked (the user told by the router event),
 * and the CM teardown of connections through a router (cm_disconnect_dlid).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_bytes.h"
#include "sm-client/sa.h"
#include "sm-client/sa_mad.h"

#define MAXSENT 4096

struct fake {
	uint64_t now;
	uint8_t sent[MAXSENT][256];
	uint64_t sent_at[MAXSENT];
	unsigned nsent;
	struct sa_event ev[64];
	uint64_t ev_at[64];
	unsigned nev;
};

static int fake_send(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *d)
{
	struct fake *f = ctx;

	(void)d;
	assert_int_equal(len, 256);
	if (f->nsent < MAXSENT) {
		memcpy(f->sent[f->nsent], mad, 256);
		f->sent_at[f->nsent] = f->now;
	}
	f->nsent++;
	return 0;
}

static const struct sa_transport_ops fake_ops = { .send = fake_send };

static uint64_t fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

static void on_event(void *arg, const struct sa_event *ev)
{
	struct fake *f = arg;

	if (f->nev < 64) {
		f->ev[f->nev] = *ev;
		f->ev_at[f->nev] = f->now;
	}
	f->nev++;
}

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	f->now = 1000000;
	return f;
}

static uint16_t sent_attr(const struct fake *f, unsigned i)
{
	return ib_get_be16(f->sent[i] + 16);
}

/* Answer sent MAD i: status, n records of rec_len each (GetTable: AttributeOffset). */
static void respond(struct sa_client *c, struct fake *f, unsigned i, uint16_t status,
		    const uint8_t *recs, unsigned n, size_t rec_len)
{
	uint8_t m[256];

	memcpy(m, f->sent[i], 256);
	m[3] = (m[3] == IB_MAD_METHOD_GET || m[3] == IB_MAD_METHOD_SET) ? 0x81 : (m[3] | 0x80);
	ib_put_be16(m + 4, status);
	memset(m + SA_HDR_LEN, 0, 200);
	if (n && recs)
		memcpy(m + SA_HDR_LEN, recs, n * rec_len);
	ib_put_be16(m + 44, n ? (uint16_t)(rec_len / 8) : 0); /* AttributeOffset */
	m[8] ^= 0x5a; /* the kernel owns the TID's high half */
	sa_client_input(c, m, sizeof(m));
}

static struct sa_client *client(struct fake *f, struct sa_gidroutes *t, uint32_t poll_ms,
				unsigned down_after)
{
	struct sa_client_config cfg = { 0 };
	struct sa_port_info pi = { 0 };
	struct sa_client *c;
	uint8_t cpi[72] = { 1, 2, 0, 0, 0, 0, 0, 8 };

	cfg.ops = &fake_ops;
	cfg.ops_ctx = f;
	cfg.now_ms = fake_now;
	cfg.now_ctx = f;
	cfg.event = on_event;
	cfg.event_arg = f;
	cfg.seed = 777;
	cfg.gid_routes = t;
	cfg.router_poll_ms = poll_ms;
	cfg.router_down_after = down_after;
	assert_int_equal(sa_client_new(&cfg, &c), 0);
	pi.lid = 2;
	pi.sm_lid = 1;
	pi.state = SA_PORT_ACTIVE;
	pi.subnet_timeout = 8;
	pi.gid_prefix = 0xfe80000000000000ull;
	pi.port_guid = 0x0002c90300a10003ull;
	pi.npkeys = 1;
	pi.pkeys[0] = 0xffff;
	sa_client_set_port(c, &pi);
	assert_int_equal(sent_attr(f, 0), SA_ATTR_CLASS_PORT_INFO);
	respond(c, f, 0, 0, cpi, 1, sizeof(cpi));
	return c;
}

/* The router poll for lid among MADs [from, nsent): its index, or -1. */
static int find_poll(const struct fake *f, unsigned from, uint16_t lid)
{
	for (unsigned i = from; i < f->nsent && i < MAXSENT; i++)
		if (sent_attr(f, i) == SA_ATTR_PORT_INFO_REC &&
		    ib_get_be16(f->sent[i] + SA_HDR_LEN) == lid)
			return (int)i;
	return -1;
}

/* A PortInfoRecord for lid with that PortState. */
static void pir(uint8_t rec[72], uint16_t lid, uint8_t state)
{
	memset(rec, 0, 72);
	ib_put_be16(rec, lid);
	rec[2] = 1;
	ib_put_be16(rec + 4 + 16, lid);        /* PortInfo.LID */
	rec[4 + 32] = (uint8_t)(0x20 | state); /* LinkSpeedSupported | PortState */
}

static void answer_poll(struct sa_client *c, struct fake *f, int i, bool active)
{
	uint8_t rec[72];
	uint16_t lid;

	assert_true(i >= 0);
	lid = ib_get_be16(f->sent[i] + SA_HDR_LEN);
	if (active) {
		pir(rec, lid, SA_PORT_ACTIVE);
		respond(c, f, (unsigned)i, 0, rec, 1, sizeof(rec));
	} else {
		respond(c, f, (unsigned)i, 0, NULL, 0, 72); /* GetTable: no records */
	}
}

/* Advance the clock in 10 ms steps to t, running the client's timers. */
static void run_to(struct sa_client *c, struct fake *f, uint64_t t)
{
	while (f->now < t) {
		f->now += 10;
		sa_client_tick(c);
	}
}

static struct sa_gidroutes *two_routers(void)
{
	struct sa_gidroutes *t;
	struct sa_router r[2] = { { .lid = 3, .mtu = 4, .hop_limit = 64 },
				  { .lid = 4, .mtu = 4, .hop_limit = 64 } };
	union ib_gid pfx;

	assert_int_equal(sa_gidroutes_new(&t), 0);
	ib_gid_parse("fec0:0:0:1::", &pfx);
	assert_int_equal(sa_gidroutes_add(t, &pfx, 64, r, 2), 0);
	return t;
}

struct rinfo {
	struct sa_router_info r[8];
	unsigned n;
};

static int collect(void *arg, const struct sa_router_info *ri)
{
	struct rinfo *x = arg;

	if (x->n < 8)
		x->r[x->n] = *ri;
	x->n++;
	return 0;
}

static const struct sa_router_info *info(struct sa_client *c, struct rinfo *x, uint16_t lid)
{
	x->n = 0;
	sa_router_foreach(c, collect, x);
	for (unsigned i = 0; i < x->n && i < 8; i++)
		if (x->r[i].lid == lid)
			return &x->r[i];
	return NULL;
}

/* The configured routers are polled at once and then once per interval; the MAD is a
 * PortInfoRecord GetTable with EndPortLID in the component mask. */
static void test_poll_cadence(void **state)
{
	struct fake *f = fake_new();
	struct sa_gidroutes *t = two_routers();
	struct sa_client *c = client(f, t, 1000, 0);
	struct sa_hdr h;
	struct rinfo x;
	int i3, i4;

	(void)state;
	sa_client_tick(c);
	i3 = find_poll(f, 1, 3);
	i4 = find_poll(f, 1, 4);
	assert_true(i3 > 0 && i4 > 0);
	assert_int_equal(sa_hdr_decode(f->sent[i3], 256, &h), 0);
	assert_int_equal(h.mad.method, IB_MAD_METHOD_GET_TABLE);
	assert_int_equal(h.comp_mask, 1);
	answer_poll(c, f, i3, true);
	answer_poll(c, f, i4, true);
	assert_int_equal(info(c, &x, 3)->state, SA_ROUTER_UP);
	assert_false(info(c, &x, 3)->learned);
	/* Ten intervals: ten more polls each, answered at once. */
	for (unsigned k = 0; k < 10; k++) {
		unsigned from = f->nsent;

		run_to(c, f, f->now + 1000);
		i3 = find_poll(f, from, 3);
		i4 = find_poll(f, from, 4);
		assert_true(i3 >= 0 && i4 >= 0);
		answer_poll(c, f, i3, true);
		answer_poll(c, f, i4, true);
	}
	assert_int_equal(info(c, &x, 3)->polls, 11);
	assert_int_equal(info(c, &x, 4)->polls, 11);
	assert_int_equal(f->nev, 0);
	sa_client_free(c);
	sa_gidroutes_free(t);
	free(f);
}

/* Router 3 dies at t0 (the SA has no record of its port from then on): taken out of
 * the GID routes at the first poll after t0, within one interval; every flow goes to
 * router 4; back when the SA has the port ACTIVE again. */
static void test_down_within_interval_and_back(void **state)
{
	struct fake *f = fake_new();
	struct sa_gidroutes *t = two_routers();
	struct sa_client *c = client(f, t, 1000, 0);
	struct sa_path_query q = { 0 };
	struct sa_path p;
	union ib_gid sgid;
	struct sa_stats st;
	struct rinfo x;
	uint64_t t0, detected = 0;
	unsigned from;

	(void)state;
	ib_gid_set(&sgid, 0xfe80000000000000ull, 0x0002c90300a10003ull);
	sa_client_tick(c);
	answer_poll(c, f, find_poll(f, 1, 3), true);
	answer_poll(c, f, find_poll(f, 1, 4), true);
	run_to(c, f, f->now + 370); /* the death falls between two polls */
	t0 = f->now;
	from = f->nsent;
	while (!detected && f->now < t0 + 3000) {
		int i3, i4;

		run_to(c, f, f->now + 10);
		i3 = find_poll(f, from, 3);
		i4 = find_poll(f, from, 4);
		if (i4 >= 0)
			answer_poll(c, f, i4, true);
		if (i3 >= 0)
			answer_poll(c, f, i3, false);
		if (i3 >= 0 || i4 >= 0)
			from = f->nsent;
		if (f->nev)
			detected = f->ev_at[0];
	}
	assert_int_equal(f->nev, 1);
	assert_int_equal(f->ev[0].type, SA_EV_ROUTER_DOWN);
	assert_int_equal(f->ev[0].lid, 3);
	assert_true(detected - t0 <= 1000);
	print_message("router down detected %llu ms after it died (interval 1000 ms)\n",
		      (unsigned long long)(detected - t0));
	assert_int_equal(info(c, &x, 3)->state, SA_ROUTER_DOWN);
	for (uint64_t g = 0; g < 200; g++) {
		ib_gid_set(&q.dgid, 0xfec0000000000001ull, g + 1);
		assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
		assert_int_equal(p.dlid, 4);
		assert_int_equal(sa_path_lookup(c, &q, &p), 0);
		assert_int_equal(p.dlid, 4);
	}
	/* Router 3 returns. */
	from = f->nsent;
	run_to(c, f, f->now + 1000);
	answer_poll(c, f, find_poll(f, from, 3), true);
	assert_int_equal(f->nev, 2);
	assert_int_equal(f->ev[1].type, SA_EV_ROUTER_UP);
	assert_int_equal(f->ev[1].lid, 3);
	{
		unsigned via3 = 0;

		for (uint64_t g = 0; g < 200; g++) {
			ib_gid_set(&q.dgid, 0xfec0000000000001ull, g + 1);
			assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
			via3 += p.dlid == 3;
		}
		assert_true(via3 > 50 && via3 < 150); /* spread again */
	}
	sa_client_stats(c, &st);
	assert_int_equal(st.router_downs, 1);
	assert_int_equal(st.router_ups, 1);
	assert_int_equal(st.retries, 0);
	sa_client_free(c);
	sa_gidroutes_free(t);
	free(f);
}

/* Unanswered polls are never retransmitted and say nothing about the router; with
 * router_down_after 3, two "no record" answers are not enough, a third is; ERR_NO_RECORDS
 * and a port that is not ACTIVE count as "no record". */
static void test_timeouts_and_miss_count(void **state)
{
	struct fake *f = fake_new();
	struct sa_gidroutes *t = two_routers();
	struct sa_client *c = client(f, t, 500, 3);
	struct sa_stats st;
	struct rinfo x;
	unsigned from;
	int i;

	(void)state;
	sa_client_tick(c);
	answer_poll(c, f, find_poll(f, 1, 3), true);
	answer_poll(c, f, find_poll(f, 1, 4), true);
	/* 20 s of silence from the SA for router 3's polls (router 4's answered). */
	for (unsigned k = 0; k < 8; k++) {
		from = f->nsent;
		run_to(c, f, f->now + 500);
		i = find_poll(f, from, 4);
		if (i >= 0)
			answer_poll(c, f, i, true);
	}
	sa_client_stats(c, &st);
	assert_int_equal(st.retries, 0);
	assert_true(st.timeouts >= 1);
	assert_int_equal(info(c, &x, 3)->state, SA_ROUTER_UP);
	assert_int_equal(info(c, &x, 3)->last_error, -ETIMEDOUT);
	assert_int_equal(f->nev, 0);
	/* Three answers without the port: no record, ERR_NO_RECORDS, port not ACTIVE. */
	for (unsigned k = 0; k < 3; k++) {
		from = f->nsent;
		i = -1;
		while (i < 0) {
			run_to(c, f, f->now + 10);
			i = find_poll(f, from, 3);
			if (find_poll(f, from, 4) >= 0)
				answer_poll(c, f, find_poll(f, from, 4), true);
		}
		assert_int_equal(f->nev, 0);
		if (k == 0) {
			answer_poll(c, f, i, false);
		} else if (k == 1) {
			respond(c, f, (unsigned)i, 0x0300, NULL, 0, 72);
		} else {
			uint8_t rec[72];

			pir(rec, 3, 1); /* Down */
			respond(c, f, (unsigned)i, 0, rec, 1, sizeof(rec));
		}
		assert_int_equal(info(c, &x, 3)->in_row, k < 2 ? k + 1 : 0);
	}
	assert_int_equal(f->nev, 1);
	assert_int_equal(f->ev[0].type, SA_EV_ROUTER_DOWN);
	sa_client_free(c);
	sa_gidroutes_free(t);
	free(f);
}

struct result {
	int calls, status;
	struct sa_path path;
};

static void on_path(void *arg, int status, const struct sa_path *p)
{
	struct result *r = arg;

	r->calls++;
	r->status = status;
	if (p)
		r->path = *p;
}

static void on_join(void *arg, int status, const struct sa_mcast_group *g)
{
	int *n = arg;

	(void)g;
	if (status == 0)
		(*n)++;
}

/* source sa: the router an off-subnet PathRecord names is learned and watched; when it
 * goes, the cached path through it is dropped (the next resolve asks the SA, which
 * names the other router), the event says so, and a joined group is left alone. */
static void test_learned_router(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL, 1000, 0);
	struct sa_path_query q = { 0 };
	struct sa_mcast_params mp = { .join_state = SA_JOIN_FULL };
	struct result r = { 0 };
	struct sa_path p;
	struct sa_path_rec pr;
	struct sa_stats st;
	struct rinfo x;
	uint8_t rec[SA_PATH_REC_LEN], mcm[SA_MCM_REC_LEN];
	struct sa_mcm_rec m;
	int joins = 0, i;
	unsigned from;

	(void)state;
	/* A joined group. */
	sa_ipoib_bcast_mgid(0xffff, &mp.mgid);
	assert_int_equal(sa_mcast_join(c, &mp, on_join, &joins), 0);
	i = (int)f->nsent - 1;
	assert_int_equal(sent_attr(f, (unsigned)i), SA_ATTR_MCMEMBER_REC);
	sa_mcm_rec_decode(f->sent[i] + SA_HDR_LEN, 200, &m);
	m.mlid = 0xc000;
	m.qkey = 0x0b1b;
	sa_mcm_rec_encode(&m, mcm, sizeof(mcm));
	respond(c, f, (unsigned)i, 0, mcm, 1, sizeof(mcm));
	assert_int_equal(joins, 1);
	/* Off-subnet path through router 3. */
	ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x1234);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	i = (int)f->nsent - 1;
	assert_int_equal(sent_attr(f, (unsigned)i), SA_ATTR_PATH_REC);
	sa_path_rec_decode(f->sent[i] + SA_HDR_LEN, 200, &pr);
	pr.dlid = 3;
	pr.hop_limit = 255;
	pr.mtu = 4;
	sa_path_rec_encode(&pr, rec, sizeof(rec));
	respond(c, f, (unsigned)i, 0, rec, 1, sizeof(rec));
	assert_int_equal(r.path.dlid, 3);
	assert_non_null(info(c, &x, 3));
	assert_true(info(c, &x, 3)->learned);
	assert_int_equal(info(c, &x, 3)->state, SA_ROUTER_UP);
	/* First poll one interval later: the router is gone. */
	from = f->nsent;
	run_to(c, f, f->now + 1000);
	i = find_poll(f, from, 3);
	assert_true(i >= 0);
	answer_poll(c, f, i, false);
	assert_int_equal(f->nev, 1);
	assert_int_equal(f->ev[0].type, SA_EV_ROUTER_DOWN);
	assert_int_equal(sa_path_lookup(c, &q, &p), -ENOENT);
	assert_int_equal(joins, 1); /* no join answer made up: users re-resolve on the event */
	sa_client_stats(c, &st);
	assert_int_equal(st.router_paths_dropped, 1);
	/* The re-resolve asks the SA, which names router 4 (also learned). */
	from = f->nsent;
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	i = (int)f->nsent - 1;
	assert_int_equal(sent_attr(f, (unsigned)i), SA_ATTR_PATH_REC);
	pr.dlid = 4;
	sa_path_rec_encode(&pr, rec, sizeof(rec));
	respond(c, f, (unsigned)i, 0, rec, 1, sizeof(rec));
	assert_int_equal(r.path.dlid, 4);
	assert_true(info(c, &x, 4)->learned);
	assert_int_equal(sa_path_lookup(c, &q, &p), 0);
	/* Router 3 back: the path through 4 goes too, so the next resolve asks the SA,
	 * which may name 3 again (failback). */
	from = f->nsent;
	run_to(c, f, f->now + 1000);
	i = find_poll(f, from, 3);
	assert_true(i >= 0);
	answer_poll(c, f, i, true);
	assert_int_equal(f->ev[f->nev - 1].type, SA_EV_ROUTER_UP);
	assert_int_equal(f->ev[f->nev - 1].lid, 3);
	assert_int_equal(sa_path_lookup(c, &q, &p), -ENOENT);
	/* An on-subnet path never makes a router. */
	sa_client_free(c);
	free(f);
}

/* Router watch off: nothing polled, sa_router_watch refused. */
static void test_off(void **state)
{
	struct fake *f = fake_new();
	struct sa_gidroutes *t = two_routers();
	struct sa_client *c = client(f, t, SA_ROUTER_POLL_OFF, 0);
	unsigned sent;

	(void)state;
	sent = f->nsent;
	run_to(c, f, f->now + 5000);
	assert_int_equal(f->nsent, sent);
	assert_int_equal(sa_router_watch(c, 9), -EINVAL);
	sa_client_free(c);
	sa_gidroutes_free(t);
	free(f);
}

/* sa_router_watch / unwatch by hand; an unwatched router that was down is up again in
 * the route table. */
static void test_watch_unwatch(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL, 1000, 0);
	struct rinfo x;
	unsigned from = f->nsent;

	(void)state;
	assert_int_equal(sa_router_watch(c, 0), -EINVAL);
	assert_int_equal(sa_router_watch(c, 9), 0);
	assert_int_equal(sa_router_watch(c, 9), -EEXIST);
	assert_true(find_poll(f, from, 9) >= 0);
	answer_poll(c, f, find_poll(f, from, 9), false);
	assert_int_equal(info(c, &x, 9)->state, SA_ROUTER_DOWN); /* first answer decides */
	assert_int_equal(sa_router_unwatch(c, 9), 0);
	assert_int_equal(sa_router_unwatch(c, 9), -ENOENT);
	assert_null(info(c, &x, 9));
	assert_string_equal(sa_router_state_name(SA_ROUTER_DOWN), "down");
	sa_client_free(c);
	free(f);
}

/* A reload: a new cadence takes effect at once; turning the watch off forgets the
 * routers and puts a down one back into the GID routes. */
static void test_set_poll(void **state)
{
	struct fake *f = fake_new();
	struct sa_gidroutes *t = two_routers();
	struct sa_client *c = client(f, t, 1000, 0);
	struct sa_path_query q = { 0 };
	struct sa_path p;
	union ib_gid sgid;
	struct rinfo x;
	unsigned from;
	uint64_t t0;
	int i;

	(void)state;
	ib_gid_set(&sgid, 0xfe80000000000000ull, 0x0002c90300a10003ull);
	sa_client_tick(c);
	answer_poll(c, f, find_poll(f, 1, 3), false); /* first answer: down */
	answer_poll(c, f, find_poll(f, 1, 4), true);
	assert_int_equal(info(c, &x, 3)->state, SA_ROUTER_DOWN);
	sa_router_set_poll(c, 200, 0, 0);
	from = f->nsent;
	t0 = f->now;
	i = -1;
	while (i < 0 && f->now < t0 + 1000) {
		run_to(c, f, f->now + 10);
		i = find_poll(f, from, 4);
	}
	assert_true(i >= 0);
	assert_true(f->now - t0 <= 200);
	sa_router_set_poll(c, SA_ROUTER_POLL_OFF, 0, 0);
	assert_null(info(c, &x, 3));
	assert_null(info(c, &x, 4));
	{
		unsigned via3 = 0;

		for (uint64_t g = 0; g < 100; g++) {
			ib_gid_set(&q.dgid, 0xfec0000000000001ull, g + 1);
			assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
			via3 += p.dlid == 3;
		}
		assert_true(via3 > 0);
	}
	from = f->nsent;
	run_to(c, f, f->now + 3000);
	assert_int_equal(find_poll(f, from, 3), -1);
	sa_client_free(c);
	sa_gidroutes_free(t);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_poll_cadence),
		cmocka_unit_test(test_down_within_interval_and_back),
		cmocka_unit_test(test_timeouts_and_miss_count),
		cmocka_unit_test(test_learned_router),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_watch_unwatch),
		cmocka_unit_test(test_set_poll),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
