/*
 * The SA client core on a fake transport (records every MAD sent) and a fake clock:
 * path resolve and cache (lifetime to the millisecond, stale serving through an
 * unanswered revalidation, one entry per P_Key), TID/attribute matching, negative
 * entries, timeouts with exponential backoff, coalescing and pacing of 10,000
 * neighbours, SA down (bounded sends, probes) and back (rejoin, resubscribe), Reports
 * (ReportResp, trap 65 invalidation), joins with group creation, reregister without
 * dropping paths, and the GID route table (LPM, hash spread, router down).
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

#define MAXSENT 20000

struct fake {
	uint64_t now;
	uint8_t (*sent)[256];
	uint64_t sent_at[MAXSENT];
	unsigned nsent;
	struct sa_dest last_dest;
	unsigned max_outstanding_seen;
};

static int fake_send(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *d)
{
	struct fake *f = ctx;

	assert_int_equal(len, 256);
	if (f->nsent < MAXSENT) {
		memcpy(f->sent[f->nsent], mad, 256);
		f->sent_at[f->nsent] = f->now;
	}
	f->nsent++;
	f->last_dest = *d;
	return 0;
}

static const struct sa_transport_ops fake_ops = { .send = fake_send };

static uint64_t fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

static struct fake *fake_new(void)
{
	struct fake *f = calloc(1, sizeof(*f));

	f->sent = calloc(MAXSENT, 256);
	f->now = 1000000;
	return f;
}

static void fake_free(struct fake *f)
{
	free(f->sent);
	free(f);
}

static struct sa_client *client(struct fake *f, struct sa_client_config *extra)
{
	struct sa_client_config cfg = { 0 };
	struct sa_port_info pi = { 0 };
	struct sa_client *c;

	if (extra)
		cfg = *extra;
	cfg.ops = &fake_ops;
	cfg.ops_ctx = f;
	cfg.now_ms = fake_now;
	cfg.now_ctx = f;
	cfg.seed = 12345;
	assert_int_equal(sa_client_new(&cfg, &c), 0);
	pi.lid = 4;
	pi.sm_lid = 1;
	pi.state = SA_PORT_ACTIVE;
	pi.subnet_timeout = 8; /* 1 ms: the 200 ms floor applies */
	pi.gid_prefix = 0xfe80000000000000ull;
	pi.port_guid = 0x0002c90300a10003ull;
	pi.npkeys = 2;
	pi.pkeys[0] = 0xffff;
	pi.pkeys[1] = 0x8001;
	sa_client_set_port(c, &pi);
	return c;
}

/* Build the response to sent MAD i: status, record at 56. */
static void respond(struct sa_client *c, struct fake *f, unsigned i, uint16_t status,
		    const void *rec, size_t rec_len)
{
	uint8_t m[256];

	memcpy(m, f->sent[i], 256);
	m[3] = (m[3] == IB_MAD_METHOD_SET || m[3] == IB_MAD_METHOD_GET) ? 0x81 : (m[3] | 0x80);
	ib_put_be16(m + 4, status);
	memset(m + SA_HDR_LEN, 0, 200);
	if (rec)
		memcpy(m + SA_HDR_LEN, rec, rec_len);
	/* The kernel's MAD layer owns the TID's high 32 bits: change them. */
	m[8] ^= 0x5a;
	sa_client_input(c, m, sizeof(m));
}

static uint16_t sent_attr(struct fake *f, unsigned i)
{
	return ib_get_be16(f->sent[i] + 16);
}

/* Answer the initial ClassPortInfo probe (sent by set_port). */
static void answer_probe(struct sa_client *c, struct fake *f, unsigned i)
{
	uint8_t cpi[72] = { 1, 2, 0, 0, 0, 0, 0, 8 }; /* RespTimeValue 8 */

	assert_int_equal(sent_attr(f, i), SA_ATTR_CLASS_PORT_INFO);
	respond(c, f, i, 0, cpi, sizeof(cpi));
}

static void gid(union ib_gid *g, uint64_t guid)
{
	ib_gid_set(g, 0xfe80000000000000ull, guid);
}

static void path_rec_for(const uint8_t *req, uint16_t dlid, uint8_t *out)
{
	struct sa_path_rec r;

	sa_path_rec_decode(req + SA_HDR_LEN, 200, &r);
	r.dlid = dlid;
	r.slid = 4;
	r.sl = 1;
	r.mtu_sel = 2;
	r.mtu = 4;
	r.rate_sel = 2;
	r.rate = 3;
	r.life_sel = 2;
	r.life = 18;
	r.pkey = 0xffff;
	sa_path_rec_encode(&r, out, SA_PATH_REC_LEN);
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

static void test_path_resolve_and_cache(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct sa_path p;
	struct sa_stats st;
	uint8_t rec[SA_PATH_REC_LEN];
	struct sa_hdr h;

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x0002c90300a10007ull);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	assert_int_equal(f->nsent, 2);
	assert_int_equal(sent_attr(f, 1), SA_ATTR_PATH_REC);
	assert_int_equal(sa_hdr_decode(f->sent[1], 256, &h), 0);
	assert_int_equal(h.mad.method, IB_MAD_METHOD_GET);
	assert_int_equal(h.comp_mask,
			 SA_PR_DGID | SA_PR_SGID | SA_PR_NUMBPATH | SA_PR_REVERSIBLE | SA_PR_PKEY);
	assert_int_equal(f->last_dest.lid, 1);
	assert_int_equal(f->last_dest.qkey, SA_QP1_QKEY);
	assert_int_equal(sa_path_lookup(c, &q, &p), -EAGAIN);
	/* A response with another attribute or an unknown TID is refused. */
	{
		uint8_t m[256];

		memcpy(m, f->sent[1], 256);
		m[3] = 0x81;
		m[17] = 0x38;
		sa_client_input(c, m, 256);
		memcpy(m, f->sent[1], 256);
		m[3] = 0x81;
		m[15] ^= 1;
		sa_client_input(c, m, 256);
		memcpy(m, f->sent[1], 256);
		m[3] = 0x92; /* GetTableResp to a Get */
		sa_client_input(c, m, 256);
		sa_client_input(c, m, 30); /* short */
	}
	sa_client_stats(c, &st);
	assert_int_equal(st.bad[SA_BAD_MISMATCH], 2);
	assert_int_equal(st.bad[SA_BAD_TID], 1);
	assert_int_equal(st.bad[SA_BAD_SHORT], 1);
	assert_int_equal(r.calls, 0);
	path_rec_for(f->sent[1], 6, rec);
	respond(c, f, 1, 0, rec, sizeof(rec));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.path.dlid, 6);
	assert_int_equal(r.path.sl, 1);
	assert_int_equal(r.path.mtu, 4);
	assert_int_equal(r.path.packet_life, 18);
	/* Cached: answered at once, nothing sent. */
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.calls, 2);
	assert_int_equal(f->nsent, 2);
	assert_int_equal(sa_path_lookup(c, &q, &p), 0);
	assert_int_equal(p.dlid, 6);
	/* The same answer again (duplicate) is an unknown TID now. */
	respond(c, f, 1, 0, rec, sizeof(rec));
	sa_client_stats(c, &st);
	assert_int_equal(st.bad[SA_BAD_TID], 2);
	assert_int_equal(st.path_queries, 1);
	assert_int_equal(st.path_hits, 1);
	/* Past its lifetime it keeps serving while revalidated. */
	f->now += 300001;
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(f->nsent, 3);
	assert_int_equal(sa_path_lookup(c, &q, &p), 0);
	path_rec_for(f->sent[2], 9, rec);
	respond(c, f, 2, 0, rec, sizeof(rec));
	assert_int_equal(sa_path_lookup(c, &q, &p), 0);
	assert_int_equal(p.dlid, 9);
	/* Trap-65-style invalidation drops it. */
	assert_int_equal(sa_path_invalidate(c, &q.dgid), 1);
	assert_int_equal(sa_path_lookup(c, &q, &p), -ENOENT);
	sa_client_free(c);
	fake_free(f);
}

/* A path from the failover peer: served from the cache without a query, with this
 * port as its source; a path already known (or being asked for) is not replaced. */
static void test_path_seed(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 }, q2 = { 0 };
	struct sa_path seed = { .dlid = 7, .sl = 2, .mtu = 4, .rate = 3 }, p;
	struct result r = { 0 };
	struct sa_stats st;
	unsigned sent;

	(void)state;
	answer_probe(c, f, 0);
	sent = f->nsent;
	gid(&q.dgid, 0x0002c90300a1000bull);
	seed.dgid = q.dgid;
	assert_int_equal(sa_path_seed(c, &seed), 1);
	assert_int_equal(sa_path_seed(c, &seed), 0); /* known now */
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.path.dlid, 7);
	assert_int_equal(r.path.sl, 2);
	assert_int_equal(r.path.mtu, 4);
	assert_true(ib_gid_equal(&r.path.dgid, &q.dgid));
	assert_int_equal(f->nsent, sent); /* nothing asked of the SA */
	/* A query under way is not pre-empted by a seed. */
	gid(&q2.dgid, 0x0002c90300a1000dull);
	assert_int_equal(sa_path_resolve(c, &q2, on_path, &r), 0);
	seed.dgid = q2.dgid;
	assert_int_equal(sa_path_seed(c, &seed), 0);
	assert_int_equal(sa_path_lookup(c, &q2, &p), -EAGAIN);
	/* Nonsense is refused. */
	seed.dlid = 0;
	assert_int_equal(sa_path_seed(c, &seed), -EINVAL);
	sa_client_stats(c, &st);
	assert_int_equal(st.path_seeded, 1);
	assert_int_equal(st.path_queries, 1);
	sa_client_free(c);
	fake_free(f);
}

/* The cache walked in pieces (a streamed `show paths`): pieces end at bucket
 * boundaries and together see every entry once. */
struct path_pieces {
	uint8_t seen[2000];
	unsigned in_piece;
};

static int path_piece_fn(void *arg, const struct sa_path_info *pi)
{
	struct path_pieces *w = arg;
	uint64_t g = ib_gid_guid(&pi->path.dgid) - 0x5000;

	assert_true(g < 2000);
	assert_int_equal(pi->state, SA_PATH_VALID);
	w->seen[g]++;
	w->in_piece++;
	return 0;
}

static bool path_piece_full(void *arg)
{
	return ((const struct path_pieces *)arg)->in_piece >= 40;
}

static void test_path_walk_pieces(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct path_pieces *w = calloc(1, sizeof(*w));
	unsigned b = 0, pieces = 0;
	bool more;

	(void)state;
	answer_probe(c, f, 0);
	for (unsigned i = 0; i < 2000; i++) {
		struct sa_path seed = { .dlid = (uint16_t)(10 + i), .mtu = 4, .rate = 3 };

		gid(&seed.dgid, 0x5000 + i);
		assert_int_equal(sa_path_seed(c, &seed), 1);
	}
	do {
		w->in_piece = 0;
		more = sa_path_walk_from(c, &b, path_piece_full, path_piece_fn, w);
		pieces++;
		assert_true(w->in_piece < 40 + 8); /* at most one bucket past the limit */
	} while (more);
	assert_true(pieces >= 2000 / 48);
	for (unsigned i = 0; i < 2000; i++)
		assert_int_equal(w->seen[i], 1);
	free(w);
	sa_client_free(c);
	fake_free(f);
}

/* A path's lifetime to the millisecond: fresh until path_ttl (300 s) has passed, asked
 * again at that instant; a revalidation the SA never answers keeps the old path
 * serving (stale), and a query for another partition is its own entry. */
static void test_path_lifetime(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 }, q2;
	struct result r = { 0 }, r2 = { 0 };
	struct sa_path p;
	struct sa_path_rec rec;
	uint8_t b[SA_PATH_REC_LEN];
	uint64_t t0;

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x0002c90300a10011ull);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	path_rec_for(f->sent[1], 6, b);
	respond(c, f, 1, 0, b, sizeof(b));
	assert_int_equal(r.status, 0);
	t0 = f->now;
	/* Long past the negative lifetime (5 s), a millisecond before its own: no query. */
	f->now = t0 + 299999;
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(f->nsent, 2);
	/* At the expiry instant: still served, and asked for again. */
	f->now = t0 + 300000;
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.path.dlid, 6);
	assert_int_equal(f->nsent, 3);
	assert_int_equal(sent_attr(f, 2), SA_ATTR_PATH_REC);
	/* The SA never answers: after the retries the old path keeps serving. */
	for (int ms = 0; ms < 20000; ms += 10) {
		f->now += 10;
		sa_client_tick(c);
	}
	assert_int_equal(f->nsent, 6); /* 1 + 3 retries */
	assert_int_equal(sa_path_lookup(c, &q, &p), 0);
	assert_int_equal(p.dlid, 6);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.path.dlid, 6);
	/* The same destination in partition 0x8001: not the cached 0xffff path. */
	q2 = q;
	q2.pkey = 0x8001;
	assert_int_equal(sa_path_lookup(c, &q2, &p), -ENOENT);
	assert_int_equal(sa_path_resolve(c, &q2, on_path, &r2), 0);
	assert_int_equal(r2.calls, 0);
	assert_int_equal(sa_path_rec_decode(f->sent[f->nsent - 1] + SA_HDR_LEN, 200, &rec), 0);
	assert_int_equal(rec.pkey, 0x8001);
	assert_int_equal(sa_path_lookup(c, &q2, &p), -EAGAIN);
	sa_client_free(c);
	fake_free(f);
}

static void test_negative_and_status(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct sa_stats st;

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x99);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	respond(c, f, 1, 0x0300, NULL, 0); /* ERR_NO_RECORDS */
	assert_int_equal(r.status, -ENOENT);
	/* Negative entry: answered without asking until neg_ttl (5 s) passes. */
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.status, -ENOENT);
	assert_int_equal(f->nsent, 2);
	f->now += 5001;
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	assert_int_equal(f->nsent, 3);
	/* A record for another DGID is not trusted. */
	{
		uint8_t rec[SA_PATH_REC_LEN];

		path_rec_for(f->sent[2], 6, rec);
		rec[23] ^= 1;
		respond(c, f, 2, 0, rec, sizeof(rec));
	}
	assert_int_equal(r.status, -EPROTO);
	sa_client_stats(c, &st);
	assert_int_equal(st.bad[SA_BAD_RECORD], 1);
	assert_int_equal(st.status_errors, 1);
	sa_client_free(c);
	fake_free(f);
}

static void test_timeout_backoff(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct sa_stats st;

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x77);
	sa_client_stats(c, &st);
	/* 4.096 us * (2^8 + 2^8) = 2 ms, below the 200 ms floor. */
	assert_int_equal(st.timeout_ms, 200);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	for (int ms = 0; ms < 20000; ms += 10) {
		f->now += 10;
		sa_client_tick(c);
	}
	/* 1 send + 3 retries, gaps 200, 400, 800 (+ up to 25% jitter), then -ETIMEDOUT. */
	assert_int_equal(f->nsent, 5);
	for (unsigned i = 2; i < 5; i++) {
		uint64_t gap = f->sent_at[i] - f->sent_at[i - 1], base = 200u << (i - 2);

		assert_true(gap >= base);
		assert_true(gap <= base + base / 4 + 10);
	}
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, -ETIMEDOUT);
	sa_client_stats(c, &st);
	assert_int_equal(st.retries, 3);
	assert_int_equal(st.timeouts, 1);
	assert_true(st.sa_reachable); /* one failure is not "down" */
	sa_client_free(c);
	fake_free(f);
}

static void test_coalesce_10000(void **state)
{
	struct sa_client_config cfg = { .max_outstanding = 8, .rate_per_s = 200 };
	struct fake *f = fake_new();
	struct sa_client *c = client(f, &cfg);
	struct result *res = calloc(10000, sizeof(*res));
	struct sa_stats st;
	unsigned answered = 0, first, peak = 0;

	(void)state;
	answer_probe(c, f, 0);
	first = f->nsent;
	/* 10,000 neighbours over 1,000 distinct DGIDs, all at once. */
	for (unsigned i = 0; i < 10000; i++) {
		struct sa_path_query q = { 0 };

		gid(&q.dgid, 0x1000 + i % 1000);
		assert_true(sa_path_resolve(c, &q, on_path, &res[i]) >= 0);
	}
	sa_client_stats(c, &st);
	assert_int_equal(st.path_queries, 1000);
	assert_int_equal(st.path_coalesced, 9000);
	assert_true(st.outstanding <= 8);
	/* Answer everything as it goes out, 1 ms steps. */
	for (unsigned step = 0; step < 20000 && answered < 1000; step++) {
		unsigned n = f->nsent;

		sa_client_stats(c, &st);
		if (st.outstanding > peak)
			peak = st.outstanding;
		for (unsigned i = first; i < n; i++) {
			uint8_t rec[SA_PATH_REC_LEN];

			path_rec_for(f->sent[i], (uint16_t)(10 + i), rec);
			respond(c, f, i, 0, rec, sizeof(rec));
			answered++;
		}
		first = n;
		f->now += 1;
		sa_client_tick(c);
	}
	assert_int_equal(answered, 1000);
	assert_int_equal(f->nsent, 1 + 1000); /* probe + one query per DGID */
	assert_true(peak <= 8);
	/* Paced: 200/s after a burst of 8, so 1000 queries take about 5 s. */
	assert_true(f->sent_at[1000] - f->sent_at[1] >= 4900);
	/* A burst of max_outstanding, then no faster than the rate. */
	for (unsigned i = 9; i + 200 <= 1000; i += 50)
		assert_true(f->sent_at[i + 200] - f->sent_at[i] >= 990);
	for (unsigned i = 0; i < 10000; i++) {
		assert_int_equal(res[i].calls, 1);
		assert_int_equal(res[i].status, 0);
	}
	free(res);
	sa_client_free(c);
	fake_free(f);
}

struct mres {
	int calls, status;
	struct sa_mcast_group g;
};

static void on_join(void *arg, int status, const struct sa_mcast_group *g)
{
	struct mres *m = arg;

	m->calls++;
	m->status = status;
	if (g)
		m->g = *g;
}

static void mcm_answer(struct sa_client *c, struct fake *f, unsigned i)
{
	struct sa_mcm_rec r;
	uint8_t rec[SA_MCM_REC_LEN];

	sa_mcm_rec_decode(f->sent[i] + SA_HDR_LEN, 200, &r);
	r.qkey = 0x0b1b;
	r.mlid = 0xc000;
	r.mtu_sel = 2;
	r.mtu = 4;
	r.rate = 3;
	sa_mcm_rec_encode(&r, rec, sizeof(rec));
	respond(c, f, i, 0, rec, sizeof(rec));
}

static void test_join_create_leave(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_mcast_params p = { .join_state = SA_JOIN_FULL, .create = true };
	struct mres m = { 0 };
	struct sa_hdr h;
	struct sa_mcm_rec r;

	(void)state;
	answer_probe(c, f, 0);
	sa_ipoib_bcast_mgid(0x7fff, &p.mgid);
	assert_int_equal(p.mgid.raw[4], 0xff);
	assert_int_equal(sa_mcast_join(c, &p, on_join, &m), 0);
	assert_int_equal(sa_mcast_join(c, &p, on_join, &m), -EEXIST);
	assert_int_equal(f->nsent, 2);
	sa_hdr_decode(f->sent[1], 256, &h);
	assert_int_equal(h.mad.method, IB_MAD_METHOD_SET);
	assert_int_equal(h.comp_mask,
			 SA_MCM_MGID | SA_MCM_PORT_GID | SA_MCM_PKEY | SA_MCM_JOIN_STATE);
	sa_mcm_rec_decode(f->sent[1] + SA_HDR_LEN, 200, &r);
	assert_int_equal(r.pkey, 0xffff);
	assert_int_equal(r.join_state, 1);
	assert_int_equal(r.port_gid.raw[15], 0x03);
	/* No such group: the client asks again with the create components. */
	respond(c, f, 1, 0x0200, NULL, 0);
	assert_int_equal(m.calls, 0);
	assert_int_equal(f->nsent, 3);
	sa_hdr_decode(f->sent[2], 256, &h);
	assert_true(h.comp_mask & SA_MCM_QKEY);
	assert_true(h.comp_mask & SA_MCM_MTU);
	sa_mcm_rec_decode(f->sent[2] + SA_HDR_LEN, 200, &r);
	assert_int_equal(r.qkey, 0x0b1b);
	assert_int_equal(r.mtu, 4);
	assert_int_equal(r.mtu_sel, 2);
	assert_int_equal(r.rate, 3);
	mcm_answer(c, f, 2);
	assert_int_equal(m.calls, 1);
	assert_int_equal(m.status, 0);
	assert_int_equal(m.g.mlid, 0xc000);
	assert_int_equal(m.g.qkey, 0x0b1b);
	assert_int_equal(sa_mcast_leave(c, &p.mgid), 0);
	assert_int_equal(sa_mcast_leave(c, &p.mgid), -ENOENT);
	assert_int_equal(f->nsent, 4);
	sa_hdr_decode(f->sent[3], 256, &h);
	assert_int_equal(h.mad.method, IB_MAD_METHOD_DELETE);
	sa_client_free(c);
	fake_free(f);
}

static int count_joined(void *arg, const struct sa_mcast_info *mi)
{
	if (mi->state == SA_MC_JOINED)
		(*(int *)arg)++;
	return 0;
}

static void test_sa_down_and_back(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_mcast_params p = { .join_state = SA_JOIN_FULL };
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct mres m = { 0 };
	struct sa_stats st;
	struct sa_path path;
	uint8_t rec[SA_PATH_REC_LEN];
	unsigned before, joined = 0;

	(void)state;
	answer_probe(c, f, 0);
	sa_ipoib_bcast_mgid(0xffff, &p.mgid);
	sa_mcast_join(c, &p, on_join, &m);
	mcm_answer(c, f, 1);
	sa_subscribe_traps(c);
	for (unsigned i = 2; i < 6; i++) {
		uint8_t ii[SA_INFORM_INFO_LEN];

		memcpy(ii, f->sent[i] + SA_HDR_LEN, sizeof(ii));
		respond(c, f, i, 0, ii, sizeof(ii));
	}
	gid(&q.dgid, 0x55);
	sa_path_resolve(c, &q, on_path, &r);
	path_rec_for(f->sent[6], 6, rec);
	respond(c, f, 6, 0, rec, sizeof(rec));
	sa_client_stats(c, &st);
	assert_int_equal(st.subscriptions, 4);
	assert_int_equal(st.joins, 1);
	/* The SA goes silent. Two queries time out: the SA is down. */
	before = f->nsent;
	for (unsigned k = 0; k < 2; k++) {
		struct sa_path_query q2 = { 0 };

		gid(&q2.dgid, 0x60 + k);
		sa_path_resolve(c, &q2, on_path, &r);
	}
	for (unsigned t = 0; t < 600; t++) { /* 60 s */
		f->now += 100;
		sa_client_tick(c);
	}
	sa_client_stats(c, &st);
	assert_false(st.sa_reachable);
	assert_int_equal(st.sa_down, 1);
	/* 2 queries x 4 sends, then probes 200 ms doubling to 30 s: bounded. */
	assert_true(f->nsent - before <= 8 + 10);
	assert_true(st.probes >= 5);
	/* Meanwhile the cached path serves, new DGIDs fail fast without MADs. */
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	assert_int_equal(path.dlid, 6);
	before = f->nsent;
	{
		struct sa_path_query q3 = { 0 };

		gid(&q3.dgid, 0x70);
		assert_int_equal(sa_path_resolve(c, &q3, on_path, &r), 1);
		assert_int_equal(r.status, -EHOSTUNREACH);
	}
	assert_int_equal(f->nsent, before);
	/* Wait for the next probe and answer it: everything is redone. */
	while (f->nsent == before) {
		f->now += 100;
		sa_client_tick(c);
	}
	answer_probe(c, f, f->nsent - 1);
	sa_client_stats(c, &st);
	assert_true(st.sa_reachable);
	assert_int_equal(st.sa_up, 1);
	assert_int_equal(st.reregisters, 1);
	/* Rejoin + 4 subscriptions + path revalidation, within the burst (100 ms: before
	 * any retransmission). */
	for (unsigned t = 0; t < 10; t++) {
		f->now += 10;
		sa_client_tick(c);
	}
	{
		unsigned joins = 0, informs = 0, paths = 0;

		for (unsigned i = before + 1; i < f->nsent; i++) {
			uint16_t a = sent_attr(f, i);

			joins += a == SA_ATTR_MCMEMBER_REC;
			informs += a == SA_ATTR_INFORM_INFO;
			paths += a == SA_ATTR_PATH_REC;
			if (getenv("SA_TEST_DEBUG"))
				fprintf(stderr, "sent %u attr %#x trap %u\n", i, a,
					ib_get_be16(f->sent[i] + 56 + 26));
		}
		assert_int_equal(joins, 1);
		assert_int_equal(informs, 4);
		assert_int_equal(paths, 1);
	}
	/* The membership stayed JOINED throughout (no drop before the rejoin answer). */
	sa_mcast_foreach(c, count_joined, &joined);
	assert_int_equal(joined, 1);
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	sa_client_free(c);
	fake_free(f);
}

static void test_report(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct sa_stats st;
	struct sa_path path;
	uint8_t rec[SA_PATH_REC_LEN], m[256] = { 0 };
	struct sa_hdr h = { 0 };
	struct sa_notice n = { 0 };

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x0002c90300a10007ull);
	sa_path_resolve(c, &q, on_path, &r);
	path_rec_for(f->sent[1], 6, rec);
	respond(c, f, 1, 0, rec, sizeof(rec));
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	/* SubnAdmReport(Notice) trap 65 for that GID. */
	h.mad.base_version = 1;
	h.mad.mgmt_class = 3;
	h.mad.class_version = 2;
	h.mad.method = IB_MAD_METHOD_REPORT;
	h.mad.tid = 0xabcdef0012345678ull;
	h.mad.attr_id = SA_ATTR_NOTICE;
	sa_hdr_encode(&h, m, sizeof(m));
	n.is_generic = true;
	n.type = 4;
	n.producer_type = 4;
	n.trap_num = 65;
	n.issuer_lid = 1;
	memcpy(n.details + 6, q.dgid.raw, 16);
	sa_notice_encode(&n, m + SA_HDR_LEN, 200);
	sa_client_input(c, m, sizeof(m));
	assert_int_equal(f->nsent, 3);
	/* ReportResp: same TID, method 0x86, Notice echoed. */
	assert_int_equal(f->sent[2][3], 0x86);
	assert_memory_equal(f->sent[2] + 8, m + 8, 8);
	assert_memory_equal(f->sent[2] + SA_HDR_LEN, m + SA_HDR_LEN, SA_NOTICE_LEN);
	assert_int_equal(sa_path_lookup(c, &q, &path), -ENOENT);
	/* Other requests are dropped and counted. */
	m[3] = IB_MAD_METHOD_GET;
	sa_client_input(c, m, sizeof(m));
	m[3] = IB_MAD_METHOD_REPORT;
	sa_client_input(c, m, SA_HDR_LEN + 10); /* cut Notice */
	sa_client_stats(c, &st);
	assert_int_equal(st.reports, 1);
	assert_int_equal(st.report_resp_sent, 1);
	assert_int_equal(st.bad[SA_BAD_UNSOLICITED], 1);
	assert_int_equal(st.bad[SA_BAD_SHORT], 1);
	assert_int_equal(st.path_invalidated, 1);
	sa_client_free(c);
	fake_free(f);
}

static void test_reregister_keeps_paths(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_path_query q = { 0 };
	struct result r = { 0 };
	struct sa_path path;
	uint8_t rec[SA_PATH_REC_LEN];
	struct sa_port_info pi = { 0 };

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x42);
	sa_path_resolve(c, &q, on_path, &r);
	path_rec_for(f->sent[1], 6, rec);
	respond(c, f, 1, 0, rec, sizeof(rec));
	/* The SM moved (standby took over at LID 2): revalidate, keep serving. */
	pi.lid = 4;
	pi.sm_lid = 2;
	pi.state = SA_PORT_ACTIVE;
	pi.subnet_timeout = 8;
	pi.gid_prefix = 0xfe80000000000000ull;
	pi.port_guid = 0x0002c90300a10003ull;
	sa_client_set_port(c, &pi);
	assert_int_equal(f->nsent, 3);
	assert_int_equal(sent_attr(f, 2), SA_ATTR_PATH_REC);
	assert_int_equal(f->last_dest.lid, 2);
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	assert_int_equal(path.dlid, 6);
	path_rec_for(f->sent[2], 8, rec);
	respond(c, f, 2, 0, rec, sizeof(rec));
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	assert_int_equal(path.dlid, 8);
	sa_client_free(c);
	fake_free(f);
}

/* Our own port leaves ACTIVE (link down) and comes back: nothing is sent meanwhile,
 * cached paths keep answering (stale), a query with no path fails with -ENETDOWN, the
 * join on the wire waits; back ACTIVE: the join and the path go out again. */
static void test_port_down_keeps_paths(void **state)
{
	struct fake *f = fake_new();
	struct sa_client *c = client(f, NULL);
	struct sa_mcast_params mp = { .join_state = SA_JOIN_FULL };
	struct sa_path_query q = { 0 }, q2 = { 0 }, q3 = { 0 };
	struct result r = { 0 }, r2 = { 0 }, r3 = { 0 };
	struct mres m = { 0 };
	struct sa_path path;
	struct sa_stats st;
	struct sa_port_info pi = { 0 };
	uint8_t rec[SA_PATH_REC_LEN];
	unsigned sent;

	(void)state;
	answer_probe(c, f, 0);
	gid(&q.dgid, 0x42);
	gid(&q2.dgid, 0x43);
	gid(&q3.dgid, 0x44);
	sa_path_resolve(c, &q, on_path, &r);
	path_rec_for(f->sent[1], 6, rec);
	respond(c, f, 1, 0, rec, sizeof(rec));
	assert_int_equal(r.status, 0);
	sa_path_resolve(c, &q2, on_path, &r2); /* on the wire when the port goes down */
	sa_ipoib_bcast_mgid(0x7fff, &mp.mgid);
	assert_int_equal(sa_mcast_join(c, &mp, on_join, &m), 0);
	assert_int_equal(f->nsent, 4);
	sa_client_stats(c, &st);
	assert_int_equal(st.outstanding, 2);

	pi.lid = 4;
	pi.sm_lid = 1;
	pi.state = 1; /* DOWN */
	pi.subnet_timeout = 8;
	pi.gid_prefix = 0xfe80000000000000ull;
	pi.port_guid = 0x0002c90300a10003ull;
	sa_client_set_port(c, &pi);
	assert_int_equal(r2.calls, 1);
	assert_int_equal(r2.status, -ENETDOWN);
	sa_client_stats(c, &st);
	assert_false(st.port_active);
	assert_int_equal(st.port_downs, 1);
	assert_int_equal(st.paths, 1);
	assert_int_equal(st.paths_stale, 1);
	assert_int_equal(st.outstanding, 0);
	assert_int_equal(st.queued, 1); /* the join */
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	assert_int_equal(path.dlid, 6);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1); /* stale, answers */
	assert_int_equal(r.status, 0);
	assert_int_equal(sa_path_resolve(c, &q3, on_path, &r3), 1);
	assert_int_equal(r3.status, -ENETDOWN);
	/* A minute with the port down: not one MAD, the SA not declared down. */
	sent = f->nsent;
	for (unsigned i = 0; i < 600; i++) {
		f->now += 100;
		sa_client_tick(c);
	}
	assert_int_equal(f->nsent, sent);
	sa_client_stats(c, &st);
	assert_true(st.sa_reachable);
	assert_int_equal(st.timeouts, 0);
	assert_int_equal(m.calls, 0);

	/* Back ACTIVE: rejoin and revalidate, the stale path serving until answered. */
	pi.state = SA_PORT_ACTIVE;
	sa_client_set_port(c, &pi);
	assert_int_equal(f->nsent, sent + 2);
	assert_int_equal(sent_attr(f, sent), SA_ATTR_MCMEMBER_REC);
	assert_int_equal(sent_attr(f, sent + 1), SA_ATTR_PATH_REC);
	sa_client_stats(c, &st);
	assert_true(st.port_active);
	assert_int_equal(st.reregisters, 1);
	assert_int_equal(st.paths_stale, 1);
	mcm_answer(c, f, sent);
	assert_int_equal(m.calls, 1);
	assert_int_equal(m.status, 0);
	path_rec_for(f->sent[sent + 1], 9, rec);
	respond(c, f, sent + 1, 0, rec, sizeof(rec));
	sa_client_stats(c, &st);
	assert_int_equal(st.paths_stale, 0);
	assert_int_equal(st.path_revalidated, 1);
	assert_int_equal(sa_path_lookup(c, &q, &path), 0);
	assert_int_equal(path.dlid, 9);
	sa_client_free(c);
	fake_free(f);
}

struct gid_routes_seen {
	unsigned n;
	struct sa_gidroute_info ri;
};

static int collect_gid_route(void *arg, const struct sa_gidroute_info *ri)
{
	struct gid_routes_seen *s = arg;

	s->n++;
	s->ri = *ri;
	return 0;
}
static void test_gid_routes(void **state)
{
	struct sa_gidroutes *t;
	struct sa_router two[2] = { { .lid = 3, .mtu = 4, .rate = 3 },
				    { .lid = 5, .sl = 2, .mtu = 5, .rate = 7, .hop_limit = 64 } };
	struct sa_router one = { .lid = 9, .mtu = 3 };
	union ib_gid pfx, sgid;
	struct sa_path_query q = { 0 };
	struct sa_path p;
	unsigned hits[2] = { 0 };
	struct fake *f = fake_new();
	struct sa_client_config cfg = { 0 };
	struct sa_client *c;
	struct result r = { 0 };

	(void)state;
	assert_int_equal(sa_gidroutes_new(&t), 0);
	ib_gid_parse("fec0:0:0:1::", &pfx);
	assert_int_equal(sa_gidroutes_add(t, &pfx, 64, two, 2), 0);
	ib_gid_parse("fec0:0:0:1:aa::", &pfx);
	assert_int_equal(sa_gidroutes_add(t, &pfx, 80, &one, 1), 0);
	assert_int_equal(sa_gidroutes_add(t, &pfx, 80, &one, 0), -EINVAL);
	gid(&sgid, 0x3);
	ib_gid_parse("fec0:0:0:1:aa:0:0:1", &q.dgid);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
	assert_int_equal(p.dlid, 9); /* longest prefix */
	assert_int_equal(p.hop_limit, 0xff);
	assert_true(p.local);
	/* Flows spread over both routers of the /64, each flow stable. */
	for (unsigned i = 0; i < 1000; i++) {
		ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x1000 + i);
		q.flow_label = i;
		assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
		hits[p.dlid == 5]++;
		assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
	}
	assert_true(hits[0] > 350 && hits[1] > 350);
	/* Router 5 fails: everything goes to 3; both fail: unreachable; 5 recovers. */
	assert_int_equal(sa_gidroutes_set_router(t, 5, false), 1);
	for (unsigned i = 0; i < 100; i++) {
		ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x1000 + i);
		assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
		assert_int_equal(p.dlid, 3);
	}
	sa_gidroutes_set_router(t, 3, false);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), -ENETUNREACH);
	sa_gidroutes_set_router(t, 5, true);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
	assert_int_equal(p.dlid, 5);
	assert_int_equal(p.hop_limit, 64);
	ib_gid_parse("fec0:0:0:2::1", &q.dgid);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), -ENOENT);
	/* Through the client: answered locally, no MAD (router polls are
	 * test_sa_router.c's: off here). */
	cfg.gid_routes = t;
	cfg.router_poll_ms = SA_ROUTER_POLL_OFF;
	c = client(f, &cfg);
	answer_probe(c, f, 0);
	ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x1234);
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.path.dlid, 5);
	assert_int_equal(f->nsent, 1);
	ib_gid_parse("fec0:0:0:1::", &pfx);
	assert_int_equal(sa_gidroutes_del(t, &pfx, 64), 0);
	assert_int_equal(sa_gidroutes_del(t, &pfx, 64), -ENOENT);
	/* No route any more: the SA is asked. */
	assert_int_equal(sa_path_resolve(c, &q, on_path, &r), 0);
	assert_int_equal(f->nsent, 2);
	/* A reload's new set: clear drops every route but keeps which routers are down
	 * (3 here), so the /64 added back goes through 5 only. */
	assert_int_equal(sa_gidroutes_add(t, &pfx, 64, two, 2), 0);
	sa_gidroutes_set_router(t, 3, false);
	sa_gidroutes_clear(t);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), -ENOENT);
	ib_gid_parse("fec0:0:0:1:aa:0:0:1", &q.dgid);
	assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), -ENOENT);
	assert_int_equal(sa_gidroutes_routers(t, (uint16_t[4]){ 0 }, 4), 0);
	assert_int_equal(sa_gidroutes_add(t, &pfx, 64, two, 2), 0);
	{
		struct gid_routes_seen seen = { 0 };

		sa_gidroutes_foreach(t, collect_gid_route, &seen);
		assert_int_equal(seen.n, 1);
		assert_int_equal(seen.ri.len, 64);
		assert_int_equal(seen.ri.n, 2);
		assert_int_equal(seen.ri.routers[0].lid, 3);
		assert_true(seen.ri.down[0]); /* 3 is still marked down */
		assert_int_equal(seen.ri.routers[1].lid, 5);
		assert_false(seen.ri.down[1]);
	}
	for (unsigned i = 0; i < 50; i++) {
		ib_gid_set(&q.dgid, 0xfec0000000000001ull, 0x2000 + i);
		assert_int_equal(sa_gidroutes_lookup(t, &sgid, &q, &p), 0);
		assert_int_equal(p.dlid, 5);
	}
	sa_client_free(c);
	sa_gidroutes_free(t);
	fake_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_resolve_and_cache),
		cmocka_unit_test(test_path_seed),
		cmocka_unit_test(test_path_walk_pieces),
		cmocka_unit_test(test_path_lifetime),
		cmocka_unit_test(test_negative_and_status),
		cmocka_unit_test(test_timeout_backoff),
		cmocka_unit_test(test_coalesce_10000),
		cmocka_unit_test(test_join_create_leave),
		cmocka_unit_test(test_sa_down_and_back),
		cmocka_unit_test(test_report),
		cmocka_unit_test(test_reregister_keeps_paths),
		cmocka_unit_test(test_port_down_keeps_paths),
		cmocka_unit_test(test_gid_routes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
