/*
 * The SA client core (see sa.h): transactions, pacing and retransmission, the path
 * cache, multicast memberships, trap subscriptions and the SA-down/up state.
 *
 * Transactions. Each query is a struct txn holding the whole request MAD (for
 * retransmission). New ones wait in a FIFO queue; at most max_outstanding are on the
 * wire, and new sends are paced to rate_per_s (retransmissions are not paced: they are
 * already bounded by max_outstanding). A response is matched on the low 32 bits of the
 * TID (the kernel's MAD layer owns the high 32 on hardware), then its attribute and
 * method must be those the request expects. The timeout of attempt k is
 * base * 2^k (capped) plus up to 25% jitter, base = 4.096 us * (2^SubnetTimeOut +
 * 2^RespTimeValue) with a floor; after `retries` retransmissions the query fails with
 * -ETIMEDOUT.
 *
 * SA down. sa_down_after queries timing out in a row mark the SA unreachable: queued
 * queries wait, no new path query is sent (cached paths keep serving, stale or not),
 * and a single ClassPortInfo probe goes out with a growing gap (floor .. probe_max_ms,
 * jittered). Its answer brings the SA back: every group is rejoined, every trap
 * resubscribed and every cached path revalidated, because an SA that went away may
 * have restarted and forgotten them.
 *
 * Threads: one (the control thread); see sa.h.
 */
#include "sm-client/sa.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/evloop.h"
#include "lib/ib_bytes.h"
#include "lib/log.h"
#include "sm-client/sa_mad.h"

enum txn_kind {
	TX_PATH,
	TX_JOIN,
	TX_LEAVE,
	TX_INFORM,
	TX_PROBE,
	TX_ROUTER
};

struct txn {
	struct txn *prev, *next; /* in queue or outstanding list */
	enum txn_kind kind;
	bool outstanding;
	uint32_t tid;
	uint16_t attr;
	uint8_t method;
	unsigned attempts;
	uint64_t deadline;
	void *owner; /* path entry, membership, subscription; NULL for leave/probe */
	uint8_t mad[IB_MAD_LEN];
};

struct txn_list {
	struct txn *head, *tail;
	unsigned n;
};

struct waiter {
	sa_path_cb cb;
	void *arg;
};

struct path_entry {
	struct path_entry *hnext;         /* hash chain */
	struct path_entry *fprev, *fnext; /* insertion order (eviction) */
	union ib_gid dgid, sgid;
	uint16_t pkey; /* 0: any (not in the query) */
	uint8_t tclass;
	uint32_t hash;
	bool has_path, negative, stale;
	struct sa_path path;
	int last_error;
	uint64_t created, expires;
	struct txn *txn;
	struct waiter *waiters;
	unsigned nwait, wcap;
};

struct membership {
	struct membership *next;
	struct sa_mcast_params p;
	struct sa_mcast_group g;
	enum sa_mcast_state state;
	bool creating, have_group;
	int last_error;
	unsigned joins, failures;
	uint64_t retry_at;
	struct txn *txn;
	sa_mcast_cb cb;
	void *arg;
};

static const uint16_t traps[] = { 64, 65, 66, 67 };
#define NTRAPS (sizeof(traps) / sizeof(traps[0]))

struct sub {
	uint16_t trap;
	bool wanted, subscribed;
	int last_error;
	unsigned failures;
	uint64_t retry_at;
	struct txn *txn;
};

/* A watched router (router liveness). */
#define ROUTERS_MAX 64
struct rwatch {
	uint16_t lid;
	enum sa_router_state state;
	bool learned, configured, manual;
	unsigned in_row;
	uint64_t polls, downs, ups, changed_at, next_poll;
	int last_error;
	struct txn *txn;
};

struct sa_client {
	struct sa_client_config cfg;
	struct evtimer *timer;
	struct sa_port_info port;
	bool have_port;
	union ib_gid gid;
	uint8_t resp_time; /* from ClassPortInfo; 0xff unknown */
	uint32_t base_timeout;
	uint32_t next_tid;
	uint32_t rng;
	struct txn_list queue, outstanding;
	/* Pacing: a token bucket of max_outstanding tokens refilled at rate_per_s, kept
	 * in thousandths of a token. */
	uint64_t tokens, tok_time;
	/* SA state */
	bool sa_up;
	unsigned timeouts_in_row;
	uint64_t probe_at;
	uint32_t probe_gap;
	struct txn *probe;
	/* path cache */
	struct path_entry **buckets;
	unsigned nbuckets, npaths;
	struct path_entry *fifo_head, *fifo_tail;
	/* multicast, subscriptions */
	struct membership *groups;
	unsigned ngroups;
	struct sub subs[NTRAPS];
	/* router liveness */
	struct rwatch routers[ROUTERS_MAX];
	unsigned nrouters;
	struct sa_stats st;
	bool in_run;
};

static void schedule(struct sa_client *c);
static void run(struct sa_client *c);
static void txn_done(struct sa_client *c, struct txn *t, int status, const struct sa_hdr *h,
		     const uint8_t *mad, size_t len);
static void mcast_send_join(struct sa_client *c, struct membership *m);
static void sub_send(struct sa_client *c, struct sub *s, bool subscribe);
static void path_send(struct sa_client *c, struct path_entry *e);
static void router_learn(struct sa_client *c, const struct sa_path *p);
static void routers_run(struct sa_client *c, uint64_t n);
static void router_done(struct sa_client *c, struct rwatch *w, int status, const struct sa_hdr *h,
			const uint8_t *mad, size_t len);

/* ---------------------------------------------------------------------------------- */

static uint64_t now(const struct sa_client *c)
{
	return c->cfg.now_ms ? c->cfg.now_ms(c->cfg.now_ctx) : evloop_now_ms();
}

/* MADs go out only through an ACTIVE port; otherwise they wait in the queue. */
static bool port_active(const struct sa_client *c)
{
	return c->have_port && c->port.state == SA_PORT_ACTIVE;
}

static uint32_t rnd(struct sa_client *c)
{
	uint32_t x = c->rng; /* xorshift32 */

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	c->rng = x;
	return x;
}

static uint64_t jitter(struct sa_client *c, uint64_t ms)
{
	return ms + (ms / 4 ? rnd(c) % (ms / 4 + 1) : 0);
}

static void emit(struct sa_client *c, enum sa_event_type type, const union ib_gid *gid)
{
	struct sa_event ev = { .type = type };

	if (gid)
		ev.gid = *gid;
	if (c->cfg.event)
		c->cfg.event(c->cfg.event_arg, &ev);
}

static void list_add(struct txn_list *l, struct txn *t)
{
	t->next = NULL;
	t->prev = l->tail;
	if (l->tail)
		l->tail->next = t;
	else
		l->head = t;
	l->tail = t;
	l->n++;
}

static void list_del(struct txn_list *l, struct txn *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		l->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->tail = t->prev;
	t->prev = t->next = NULL;
	l->n--;
}

static void compute_timeout(struct sa_client *c)
{
	unsigned st = c->port.subnet_timeout <= 31 ? c->port.subnet_timeout : 18;
	uint64_t us = (4096ull << st) / 1000;

	if (c->resp_time <= 31)
		us += (4096ull << c->resp_time) / 1000;
	us /= 1000;
	if (us < c->cfg.timeout_floor_ms)
		us = c->cfg.timeout_floor_ms;
	if (us > c->cfg.timeout_max_ms)
		us = c->cfg.timeout_max_ms;
	c->base_timeout = (uint32_t)us;
}

static uint64_t attempt_timeout(struct sa_client *c, unsigned attempt)
{
	uint64_t ms = c->base_timeout;

	for (unsigned i = 0; i < attempt && ms < c->cfg.timeout_max_ms; i++)
		ms *= 2;
	if (ms > c->cfg.timeout_max_ms)
		ms = c->cfg.timeout_max_ms;
	return jitter(c, ms);
}

static struct sa_dest sa_dest(const struct sa_client *c)
{
	struct sa_dest d = { .lid = c->port.sm_lid, .sl = c->port.sm_sl, .qkey = SA_QP1_QKEY };

	for (unsigned i = 0; i < c->port.npkeys; i++)
		if ((c->port.pkeys[i] & 0x7fff) == 0x7fff) {
			d.pkey_index = (uint16_t)i;
			break;
		}
	return d;
}

static void refill(struct sa_client *c, uint64_t n)
{
	uint64_t cap = (uint64_t)c->cfg.max_outstanding * 1000;

	if (n > c->tok_time) {
		c->tokens += (n - c->tok_time) * c->cfg.rate_per_s;
		c->tok_time = n;
	}
	if (c->tokens > cap)
		c->tokens = cap;
}

/* Build a request: header + record. */
static struct txn *txn_new(struct sa_client *c, enum txn_kind kind, uint8_t method, uint16_t attr,
			   uint64_t comp_mask, const uint8_t *rec, size_t rec_len, void *owner)
{
	struct txn *t = calloc(1, sizeof(*t));
	struct sa_hdr h = { 0 };

	if (!t)
		return NULL;
	t->kind = kind;
	t->tid = c->next_tid++;
	t->attr = attr;
	t->method = method;
	t->owner = owner;
	h.mad.base_version = IB_MAD_BASE_VERSION;
	h.mad.mgmt_class = IB_MGMT_CLASS_SA;
	h.mad.class_version = SA_CLASS_VERSION;
	h.mad.method = method;
	h.mad.tid = t->tid;
	h.mad.attr_id = attr;
	h.sm_key = c->cfg.sm_key;
	h.comp_mask = comp_mask;
	sa_hdr_encode(&h, t->mad, sizeof(t->mad));
	if (rec_len)
		memcpy(t->mad + SA_HDR_LEN, rec, rec_len);
	return t;
}

static void txn_transmit(struct sa_client *c, struct txn *t)
{
	struct sa_dest d = sa_dest(c);
	uint64_t n = now(c);
	int rc;

	rc = c->cfg.ops->send(c->cfg.ops_ctx, t->mad, sizeof(t->mad), &d);
	c->st.sent++;
	if (rc)
		c->st.send_errors++;
	t->deadline =
	    n + (t->kind == TX_PROBE || t->kind == TX_ROUTER ? c->base_timeout
							     : attempt_timeout(c, t->attempts));
	t->attempts++;
}

static void txn_submit(struct sa_client *c, struct txn *t)
{
	list_add(&c->queue, t);
	if (c->queue.n > c->st.queued_peak)
		c->st.queued_peak = c->queue.n;
	if (!c->in_run) {
		run(c);
		schedule(c); /* arm the timer for what was just sent */
	}
}

/* Remove a transaction wherever it is and free it, without completion. */
static void txn_cancel(struct sa_client *c, struct txn *t)
{
	list_del(t->outstanding ? &c->outstanding : &c->queue, t);
	free(t);
}

/* ---------------------------------------------------------------------------------- */
/* Path cache */

static uint32_t path_hash(const union ib_gid *dgid, const union ib_gid *sgid, uint16_t pkey,
			  uint8_t tclass)
{
	uint32_t h = 2166136261u;

	for (unsigned i = 0; i < IB_GID_LEN; i++)
		h = (h ^ dgid->raw[i]) * 16777619u;
	for (unsigned i = 8; i < IB_GID_LEN; i++)
		h = (h ^ sgid->raw[i]) * 16777619u;
	h = (h ^ pkey) * 16777619u;
	h = (h ^ tclass) * 16777619u;
	return h ^ (h >> 15);
}

static void query_key(const struct sa_client *c, const struct sa_path_query *q, union ib_gid *sgid,
		      uint16_t *pkey)
{
	*sgid = ib_gid_is_zero(&q->sgid) ? c->gid : q->sgid;
	*pkey = q->any_pkey ? 0 : q->pkey ? q->pkey : c->cfg.pkey;
}

static struct path_entry *path_find(const struct sa_client *c, const union ib_gid *dgid,
				    const union ib_gid *sgid, uint16_t pkey, uint8_t tclass)
{
	uint32_t h = path_hash(dgid, sgid, pkey, tclass);

	for (struct path_entry *e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext)
		if (e->hash == h && e->pkey == pkey && e->tclass == tclass &&
		    ib_gid_equal(&e->dgid, dgid) && ib_gid_equal(&e->sgid, sgid))
			return e;
	return NULL;
}

static void path_unlink(struct sa_client *c, struct path_entry *e)
{
	struct path_entry **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	if (e->fprev)
		e->fprev->fnext = e->fnext;
	else
		c->fifo_head = e->fnext;
	if (e->fnext)
		e->fnext->fprev = e->fprev;
	else
		c->fifo_tail = e->fprev;
	c->npaths--;
}

/* Deliver status to every waiter (the list is taken first: callbacks may add more). */
static void path_notify(struct sa_client *c, struct path_entry *e, int status)
{
	struct waiter *w = e->waiters;
	unsigned n = e->nwait;

	(void)c;
	e->waiters = NULL;
	e->nwait = e->wcap = 0;
	for (unsigned i = 0; i < n; i++)
		w[i].cb(w[i].arg, status, status ? NULL : &e->path);
	free(w);
}

static void path_free(struct sa_client *c, struct path_entry *e)
{
	if (e->txn) {
		txn_cancel(c, e->txn);
		e->txn = NULL;
	}
	path_unlink(c, e);
	path_notify(c, e, -ECANCELED);
	free(e);
}

static struct path_entry *path_new(struct sa_client *c, const union ib_gid *dgid,
				   const union ib_gid *sgid, uint16_t pkey, uint8_t tclass)
{
	struct path_entry *e;

	if (c->npaths >= c->cfg.max_paths) {
		/* Evict the oldest entry nobody waits for. */
		for (e = c->fifo_head; e && (e->nwait || e->txn); e = e->fnext)
			;
		if (!e)
			return NULL;
		path_free(c, e);
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->dgid = *dgid;
	e->sgid = *sgid;
	e->pkey = pkey;
	e->tclass = tclass;
	e->hash = path_hash(dgid, sgid, pkey, tclass);
	e->created = now(c);
	e->hnext = c->buckets[e->hash & (c->nbuckets - 1)];
	c->buckets[e->hash & (c->nbuckets - 1)] = e;
	e->fprev = c->fifo_tail;
	if (c->fifo_tail)
		c->fifo_tail->fnext = e;
	else
		c->fifo_head = e;
	c->fifo_tail = e;
	c->npaths++;
	return e;
}

static int path_add_waiter(struct path_entry *e, sa_path_cb cb, void *arg)
{
	if (!cb)
		return 0;
	if (e->nwait == e->wcap) {
		unsigned ncap = e->wcap ? e->wcap * 2 : 2;
		struct waiter *w = realloc(e->waiters, ncap * sizeof(*w));

		if (!w)
			return -ENOMEM;
		e->waiters = w;
		e->wcap = ncap;
	}
	e->waiters[e->nwait++] = (struct waiter){ cb, arg };
	return 0;
}

static void path_send(struct sa_client *c, struct path_entry *e)
{
	struct sa_path_rec r = { 0 };
	uint8_t rec[SA_PATH_REC_LEN];
	uint64_t mask = SA_PR_DGID | SA_PR_SGID | SA_PR_NUMBPATH | SA_PR_REVERSIBLE;

	if (e->txn)
		return;
	r.dgid = e->dgid;
	r.sgid = e->sgid;
	r.reversible = true;
	r.numb_path = 1;
	r.tclass = e->tclass;
	if (e->tclass)
		mask |= SA_PR_TCLASS;
	r.pkey = e->pkey;
	if (e->pkey)
		mask |= SA_PR_PKEY;
	sa_path_rec_encode(&r, rec, sizeof(rec));
	e->txn =
	    txn_new(c, TX_PATH, IB_MAD_METHOD_GET, SA_ATTR_PATH_REC, mask, rec, sizeof(rec), e);
	if (!e->txn) {
		e->last_error = -ENOMEM;
		return;
	}
	c->st.path_queries++;
	txn_submit(c, e->txn);
}

static void path_done(struct sa_client *c, struct path_entry *e, int status, const struct sa_hdr *h,
		      const uint8_t *mad, size_t len)
{
	struct sa_path_rec r;
	uint64_t n = now(c);
	bool was_valid = e->has_path;

	e->txn = NULL;
	if (!status) {
		size_t stride;
		unsigned count;
		bool trunc;

		if (sa_records(h, len, SA_PATH_REC_LEN, &stride, &count, &trunc) || count < 1 ||
		    sa_path_rec_decode(mad + SA_HDR_LEN, len - SA_HDR_LEN, &r) ||
		    !ib_gid_equal(&r.dgid, &e->dgid)) {
			c->st.bad[SA_BAD_RECORD]++;
			status = -EPROTO;
		}
	}
	if (!status) {
		struct sa_path *p = &e->path;

		memset(p, 0, sizeof(*p));
		p->dgid = r.dgid;
		p->sgid = r.sgid;
		p->dlid = r.dlid;
		p->slid = r.slid;
		p->pkey = r.pkey;
		p->sl = r.sl;
		p->mtu = r.mtu;
		p->rate = r.rate;
		p->packet_life = r.life;
		p->hop_limit = r.hop_limit;
		p->tclass = r.tclass;
		p->flow_label = r.flow_label;
		p->reversible = r.reversible;
		e->has_path = true;
		e->negative = false;
		e->stale = false;
		e->last_error = 0;
		e->expires = n + c->cfg.path_ttl_ms;
		if (was_valid)
			c->st.path_revalidated++;
		router_learn(c, p);
		path_notify(c, e, 0);
		return;
	}
	e->last_error = status;
	if (status == -ETIMEDOUT && e->has_path) {
		/* The SA did not answer: keep serving the path we have. */
		e->stale = true;
		path_notify(c, e, 0);
		return;
	}
	if (status == -ENOENT || status == -EPROTO) {
		/* A definite answer: negative entry, shorter lifetime. */
		e->has_path = false;
		e->negative = true;
		e->stale = false;
		e->expires = n + c->cfg.neg_ttl_ms;
		c->st.path_negative++;
		path_notify(c, e, status);
		return;
	}
	/* Timeout with nothing cached: drop the entry so the next resolve asks again. */
	path_unlink(c, e);
	path_notify(c, e, status);
	free(e);
}

int sa_path_seed(struct sa_client *c, const struct sa_path *p)
{
	struct sa_path_query q = { .dgid = p->dgid };
	union ib_gid sgid;
	uint16_t pkey;
	struct path_entry *e;

	if (ib_gid_is_multicast(&p->dgid) || ib_gid_is_zero(&p->dgid) || !p->dlid)
		return -EINVAL;
	query_key(c, &q, &sgid, &pkey);
	e = path_find(c, &p->dgid, &sgid, pkey, 0);
	if (e && (e->has_path || e->txn))
		return 0;
	if (!e && !(e = path_new(c, &p->dgid, &sgid, pkey, 0)))
		return -ENOMEM;
	memset(&e->path, 0, sizeof(e->path));
	e->path.dgid = p->dgid;
	e->path.sgid = sgid;
	e->path.dlid = p->dlid;
	e->path.slid = c->port.lid;
	e->path.pkey = pkey;
	e->path.sl = p->sl;
	e->path.mtu = p->mtu;
	e->path.rate = p->rate;
	e->path.hop_limit = p->hop_limit;
	e->path.reversible = true;
	e->has_path = true;
	e->negative = e->stale = false;
	e->last_error = 0;
	e->expires = now(c) + c->cfg.path_ttl_ms;
	c->st.path_seeded++;
	return 1;
}

int sa_path_resolve(struct sa_client *c, const struct sa_path_query *q, sa_path_cb cb, void *arg)
{
	union ib_gid sgid;
	uint16_t pkey;
	struct path_entry *e;
	uint64_t n = now(c);
	int rc;

	if (!q || ib_gid_is_multicast(&q->dgid) || ib_gid_is_zero(&q->dgid))
		return -EINVAL;
	query_key(c, q, &sgid, &pkey);
	if (c->cfg.gid_routes && ib_gid_prefix(&q->dgid) != ib_gid_prefix(&sgid)) {
		struct sa_path p;
		struct sa_path_query lq = *q;

		lq.pkey = pkey;
		rc = sa_gidroutes_lookup(c->cfg.gid_routes, &sgid, &lq, &p);
		if (rc == 0) {
			c->st.path_local++;
			if (cb)
				cb(arg, 0, &p);
			return 1;
		}
		if (rc == -ENETUNREACH) {
			if (cb)
				cb(arg, rc, NULL);
			return 1;
		}
	}
	e = path_find(c, &q->dgid, &sgid, pkey, q->tclass);
	if (e && !e->txn && e->expires <= n && !e->stale) {
		/* Expired: a negative entry is forgotten; a positive one is revalidated while
		 * it keeps serving. */
		if (e->negative) {
			path_free(c, e);
			e = NULL;
		} else {
			e->stale = true;
		}
	}
	if (e && e->has_path) {
		c->st.path_hits++;
		if (e->stale && !e->txn && c->sa_up && port_active(c))
			path_send(c, e);
		if (cb)
			cb(arg, 0, &e->path);
		return 1;
	}
	if (e && e->negative) {
		c->st.path_hits++;
		if (cb)
			cb(arg, e->last_error ? e->last_error : -ENOENT, NULL);
		return 1;
	}
	if (e && e->txn) {
		c->st.path_coalesced++;
		rc = path_add_waiter(e, cb, arg);
		return rc ? rc : 0;
	}
	c->st.path_misses++;
	if (c->have_port && !port_active(c)) {
		if (cb)
			cb(arg, -ENETDOWN, NULL);
		return 1;
	}
	if (!c->sa_up) {
		if (cb)
			cb(arg, -EHOSTUNREACH, NULL);
		return 1;
	}
	e = path_new(c, &q->dgid, &sgid, pkey, q->tclass);
	if (!e)
		return -ENOMEM;
	rc = path_add_waiter(e, cb, arg);
	if (!rc) {
		path_send(c, e);
		if (!e->txn)
			rc = -ENOMEM;
	}
	if (rc) {
		path_unlink(c, e);
		free(e->waiters);
		free(e);
		return rc;
	}
	return 0;
}

int sa_path_lookup(const struct sa_client *c, const struct sa_path_query *q, struct sa_path *out)
{
	union ib_gid sgid;
	uint16_t pkey;
	const struct path_entry *e;

	query_key(c, q, &sgid, &pkey);
	if (c->cfg.gid_routes && ib_gid_prefix(&q->dgid) != ib_gid_prefix(&sgid)) {
		struct sa_path_query lq = *q;

		lq.pkey = pkey;
		if (sa_gidroutes_lookup(c->cfg.gid_routes, &sgid, &lq, out) == 0)
			return 0;
	}
	e = path_find(c, &q->dgid, &sgid, pkey, q->tclass);
	if (!e)
		return -ENOENT;
	if (e->has_path) {
		*out = e->path;
		return 0;
	}
	return e->txn ? -EAGAIN : -ENOENT;
}

unsigned sa_path_invalidate(struct sa_client *c, const union ib_gid *dgid)
{
	unsigned n = 0;

	for (unsigned b = 0; b < c->nbuckets; b++) {
		struct path_entry *e = c->buckets[b], *next;

		for (; e; e = next) {
			next = e->hnext;
			if (ib_gid_equal(&e->dgid, dgid)) {
				path_free(c, e);
				n++;
			}
		}
	}
	c->st.path_invalidated += n;
	return n;
}

void sa_path_revalidate_all(struct sa_client *c)
{
	for (struct path_entry *e = c->fifo_head, *next; e; e = next) {
		next = e->fnext;
		if (e->negative) {
			path_free(c, e);
			continue;
		}
		e->stale = true;
		if (c->sa_up)
			path_send(c, e);
	}
}

const char *sa_path_state_name(enum sa_path_state s)
{
	switch (s) {
	case SA_PATH_VALID:
		return "valid";
	case SA_PATH_STALE:
		return "stale";
	case SA_PATH_NEGATIVE:
		return "negative";
	case SA_PATH_PENDING:
		return "pending";
	}
	return "?";
}

static void path_info_of(const struct path_entry *e, uint64_t n, struct sa_path_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->path = e->path;
	pi->path.dgid = e->dgid;
	pi->path.sgid = e->sgid;
	if (!e->has_path) {
		pi->path.pkey = e->pkey;
		pi->path.tclass = e->tclass;
	}
	if (e->has_path)
		pi->state = e->stale || e->expires <= n ? SA_PATH_STALE : SA_PATH_VALID;
	else
		pi->state = e->negative ? SA_PATH_NEGATIVE : SA_PATH_PENDING;
	pi->last_error = e->last_error;
	pi->age_ms = n - e->created;
	pi->expires_in_ms = e->expires > n ? e->expires - n : 0;
	pi->waiters = e->nwait;
}

void sa_path_foreach(const struct sa_client *c, int (*fn)(void *arg, const struct sa_path_info *pi),
		     void *arg)
{
	uint64_t n = now(c);

	for (const struct path_entry *e = c->fifo_head; e; e = e->fnext) {
		struct sa_path_info pi;

		path_info_of(e, n, &pi);
		if (fn(arg, &pi))
			break;
	}
}

bool sa_path_walk_from(const struct sa_client *c, unsigned *bucket, bool (*stop)(void *arg),
		       int (*fn)(void *arg, const struct sa_path_info *pi), void *arg)
{
	uint64_t n = now(c);

	for (unsigned b = *bucket; b < c->nbuckets; b++) {
		if (stop && b != *bucket && stop(arg)) {
			*bucket = b;
			return true;
		}
		for (const struct path_entry *e = c->buckets[b]; e; e = e->hnext) {
			struct sa_path_info pi;

			path_info_of(e, n, &pi);
			if (fn(arg, &pi)) {
				*bucket = b + 1;
				return true;
			}
		}
	}
	*bucket = c->nbuckets;
	return false;
}

/* ---------------------------------------------------------------------------------- */
/* Multicast */

void sa_ipoib_bcast_mgid(uint16_t pkey, union ib_gid *mgid)
{
	static const uint8_t tmpl[IB_GID_LEN] = { 0xff, 0x12, 0x40, 0x1b, 0,    0,    0,    0,
						  0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff };

	memcpy(mgid->raw, tmpl, IB_GID_LEN);
	ib_put_be16(mgid->raw + 4, pkey | 0x8000);
}

static uint16_t mgid_pkey(const struct sa_client *c, const struct sa_mcast_params *p)
{
	uint16_t sig = ib_get_be16(p->mgid.raw + 2);

	if (p->pkey)
		return p->pkey;
	if (sig == 0x401b || sig == 0x601b)
		return ib_get_be16(p->mgid.raw + 4) | 0x8000;
	return c->cfg.pkey;
}

static struct membership *mcast_find(const struct sa_client *c, const union ib_gid *mgid)
{
	for (struct membership *m = c->groups; m; m = m->next)
		if (ib_gid_equal(&m->p.mgid, mgid))
			return m;
	return NULL;
}

/* Parameters for creating a group: given, else a joined broadcast group's, else the
 * IPoIB defaults OpenSM also uses for the broadcast group (Q_Key 0x0b1b, MTU 2048,
 * 10 Gb/s, SL 0). */
static void mcast_create_params(const struct sa_client *c, const struct membership *m,
				struct sa_mcm_rec *r)
{
	const struct membership *b = NULL;
	uint16_t pkey = mgid_pkey(c, &m->p);

	for (const struct membership *x = c->groups; x; x = x->next) {
		union ib_gid bg;

		sa_ipoib_bcast_mgid(pkey, &bg);
		if (x->have_group && ib_gid_equal(&x->p.mgid, &bg))
			b = x;
	}
	r->qkey = m->p.qkey ? m->p.qkey : b ? b->g.qkey : 0x0b1b;
	r->mtu = m->p.mtu ? m->p.mtu : b ? b->g.mtu : 4;
	r->rate = m->p.rate ? m->p.rate : b ? b->g.rate : 3;
	r->sl = m->p.sl ? m->p.sl : b ? b->g.sl : 0;
	r->tclass = b ? b->g.tclass : 0;
	r->flow_label = b ? b->g.flow_label : 0;
	r->hop_limit = b ? b->g.hop_limit : 0;
	r->mtu_sel = 2; /* exactly */
	r->rate_sel = 2;
}

static void mcast_send_join(struct sa_client *c, struct membership *m)
{
	struct sa_mcm_rec r = { 0 };
	uint8_t rec[SA_MCM_REC_LEN];
	uint64_t mask = SA_MCM_MGID | SA_MCM_PORT_GID | SA_MCM_PKEY | SA_MCM_JOIN_STATE;

	if (m->txn)
		return;
	r.mgid = m->p.mgid;
	r.port_gid = c->gid;
	r.pkey = mgid_pkey(c, &m->p);
	r.join_state = m->p.join_state;
	r.scope = ib_mgid_scope(&m->p.mgid);
	if (m->creating) {
		mcast_create_params(c, m, &r);
		mask |= SA_MCM_QKEY | SA_MCM_MTU_SEL | SA_MCM_MTU | SA_MCM_TCLASS |
			SA_MCM_RATE_SEL | SA_MCM_RATE | SA_MCM_SL | SA_MCM_FLOW | SA_MCM_HOP;
	}
	sa_mcm_rec_encode(&r, rec, sizeof(rec));
	m->txn =
	    txn_new(c, TX_JOIN, IB_MAD_METHOD_SET, SA_ATTR_MCMEMBER_REC, mask, rec, sizeof(rec), m);
	if (!m->txn) {
		m->state = SA_MC_RETRYING;
		m->retry_at = now(c) + 1000;
		return;
	}
	if (m->state != SA_MC_JOINED)
		m->state = SA_MC_JOINING;
	txn_submit(c, m->txn);
}

static uint64_t retry_backoff(struct sa_client *c, unsigned failures)
{
	uint64_t ms = 1000;

	for (unsigned i = 1; i < failures && ms < 60000; i++)
		ms *= 2;
	if (ms > 60000)
		ms = 60000;
	return jitter(c, ms);
}

static void mcast_done(struct sa_client *c, struct membership *m, int status,
		       const struct sa_hdr *h, const uint8_t *mad, size_t len)
{
	struct sa_mcm_rec r;

	m->txn = NULL;
	if (!status) {
		size_t stride;
		unsigned count;
		bool trunc;

		if (sa_records(h, len, SA_MCM_REC_LEN, &stride, &count, &trunc) || count < 1 ||
		    sa_mcm_rec_decode(mad + SA_HDR_LEN, len - SA_HDR_LEN, &r) ||
		    !ib_gid_equal(&r.mgid, &m->p.mgid) || r.mlid < 0xc000) {
			c->st.bad[SA_BAD_RECORD]++;
			status = -EPROTO;
		}
	}
	if (!status) {
		m->g.mgid = r.mgid;
		m->g.port_gid = r.port_gid;
		m->g.qkey = r.qkey;
		m->g.mlid = r.mlid;
		m->g.pkey = r.pkey;
		m->g.mtu = r.mtu;
		m->g.rate = r.rate;
		m->g.sl = r.sl;
		m->g.tclass = r.tclass;
		m->g.packet_life = r.life;
		m->g.hop_limit = r.hop_limit;
		m->g.scope = r.scope;
		m->g.join_state = r.join_state;
		m->g.flow_label = r.flow_label;
		m->have_group = true;
		m->state = SA_MC_JOINED;
		m->creating = false;
		m->last_error = 0;
		m->failures = 0;
		m->joins++;
		c->st.joins++;
		if (m->cb)
			m->cb(m->arg, 0, &m->g);
		return;
	}
	/* Not there yet and we may create it: ask again at once with the create mask. */
	if (status == -EPROTO && m->p.create && !m->creating && h &&
	    ((h->mad.status >> 8) == 2 || (h->mad.status >> 8) == 6)) {
		/* ERR_REQ_INVALID / INSUFFICIENT_COMPONENTS: no such group to join */
		m->creating = true;
		mcast_send_join(c, m);
		return;
	}
	m->last_error = status;
	m->failures++;
	c->st.join_failures++;
	m->state = SA_MC_RETRYING;
	m->retry_at = now(c) + retry_backoff(c, m->failures);
	if (m->cb)
		m->cb(m->arg, status, NULL);
}

int sa_mcast_join(struct sa_client *c, const struct sa_mcast_params *p, sa_mcast_cb cb, void *arg)
{
	struct membership *m;

	if (!p || !ib_gid_is_multicast(&p->mgid) || !p->join_state || (p->join_state & 0xf0))
		return -EINVAL;
	if (mcast_find(c, &p->mgid))
		return -EEXIST;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->p = *p;
	m->cb = cb;
	m->arg = arg;
	m->state = SA_MC_JOINING;
	m->next = c->groups;
	c->groups = m;
	c->ngroups++;
	if (c->sa_up && c->have_port)
		mcast_send_join(c, m);
	else
		m->state = SA_MC_RETRYING; /* sent when the port is known and the SA answers */
	return 0;
}

/* The MCMemberRecord DELETE that leaves m's group (NULL without memory). */
static struct txn *leave_txn(struct sa_client *c, const struct membership *m)
{
	struct sa_mcm_rec r = { 0 };
	uint8_t rec[SA_MCM_REC_LEN];

	r.mgid = m->p.mgid;
	r.port_gid = c->gid;
	r.pkey = mgid_pkey(c, &m->p);
	r.join_state = m->p.join_state;
	r.scope = ib_mgid_scope(&m->p.mgid);
	sa_mcm_rec_encode(&r, rec, sizeof(rec));
	return txn_new(c, TX_LEAVE, IB_MAD_METHOD_DELETE, SA_ATTR_MCMEMBER_REC,
		       SA_MCM_MGID | SA_MCM_PORT_GID | SA_MCM_PKEY | SA_MCM_JOIN_STATE, rec,
		       sizeof(rec), NULL);
}

static void mcast_send_leave(struct sa_client *c, const struct membership *m)
{
	struct txn *t = leave_txn(c, m);

	if (!t)
		return;
	c->st.leaves++;
	txn_submit(c, t);
}

int sa_mcast_leave(struct sa_client *c, const union ib_gid *mgid)
{
	struct membership **pp = &c->groups, *m;

	while (*pp && !ib_gid_equal(&(*pp)->p.mgid, mgid))
		pp = &(*pp)->next;
	m = *pp;
	if (!m)
		return -ENOENT;
	*pp = m->next;
	c->ngroups--;
	if (m->txn)
		txn_cancel(c, m->txn);
	if (c->sa_up && c->have_port)
		mcast_send_leave(c, m);
	free(m);
	return 0;
}

const char *sa_mcast_state_name(enum sa_mcast_state s)
{
	switch (s) {
	case SA_MC_JOINING:
		return "joining";
	case SA_MC_JOINED:
		return "joined";
	case SA_MC_RETRYING:
		return "retrying";
	case SA_MC_LEAVING:
		return "leaving";
	}
	return "?";
}

void sa_mcast_foreach(const struct sa_client *c,
		      int (*fn)(void *arg, const struct sa_mcast_info *mi), void *arg)
{
	for (const struct membership *m = c->groups; m; m = m->next) {
		struct sa_mcast_info mi = { 0 };

		mi.group = m->g;
		if (!m->have_group)
			mi.group.mgid = m->p.mgid;
		mi.state = m->state;
		mi.join_state = m->p.join_state;
		mi.last_error = m->last_error;
		mi.joins = m->joins;
		if (fn(arg, &mi))
			break;
	}
}

/* ---------------------------------------------------------------------------------- */
/* Trap subscriptions */

static void sub_send(struct sa_client *c, struct sub *s, bool subscribe)
{
	struct sa_inform_info ii = { 0 };
	uint8_t rec[SA_INFORM_INFO_LEN];
	struct txn *t;

	if (subscribe && s->txn)
		return;
	ii.lid_begin = 0xffff; /* all LIDs */
	ii.is_generic = true;
	ii.subscribe = subscribe;
	ii.type = 0xffff; /* all types */
	ii.trap_num = s->trap;
	ii.qpn = 1; /* Reports come to our GSI agent */
	ii.resp_time = 18;
	ii.producer_type = 0xffffff; /* all producers */
	sa_inform_info_encode(&ii, rec, sizeof(rec));
	t = txn_new(c, TX_INFORM, IB_MAD_METHOD_SET, SA_ATTR_INFORM_INFO, 0, rec, sizeof(rec),
		    subscribe ? s : NULL);
	if (!t) {
		s->retry_at = now(c) + 1000;
		return;
	}
	if (subscribe)
		s->txn = t;
	txn_submit(c, t);
}

static void sub_done(struct sa_client *c, struct sub *s, int status, const struct sa_hdr *h,
		     const uint8_t *mad, size_t len)
{
	struct sa_inform_info ii;

	s->txn = NULL;
	if (!status) {
		size_t stride;
		unsigned count;
		bool trunc;

		if (sa_records(h, len, SA_INFORM_INFO_LEN, &stride, &count, &trunc) || count < 1 ||
		    sa_inform_info_decode(mad + SA_HDR_LEN, len - SA_HDR_LEN, &ii) ||
		    ii.trap_num != s->trap) {
			c->st.bad[SA_BAD_RECORD]++;
			status = -EPROTO;
		}
	}
	if (!status) {
		s->subscribed = true;
		s->last_error = 0;
		s->failures = 0;
		c->st.subscriptions++;
		return;
	}
	s->subscribed = false;
	s->last_error = status;
	s->failures++;
	s->retry_at = now(c) + retry_backoff(c, s->failures);
}

int sa_subscribe_traps(struct sa_client *c)
{
	for (unsigned i = 0; i < NTRAPS; i++) {
		struct sub *s = &c->subs[i];

		if (s->wanted)
			continue;
		s->wanted = true;
		s->retry_at = 0;
		if (c->sa_up && c->have_port)
			sub_send(c, s, true);
	}
	return 0;
}

void sa_sub_foreach(const struct sa_client *c, int (*fn)(void *arg, const struct sa_sub_info *si),
		    void *arg)
{
	for (unsigned i = 0; i < NTRAPS; i++) {
		struct sa_sub_info si = { c->subs[i].trap, c->subs[i].subscribed,
					  c->subs[i].last_error };

		if (c->subs[i].wanted && fn(arg, &si))
			break;
	}
}

/* ---------------------------------------------------------------------------------- */
/* Reregister, SA down/up */

static void rejoin_all(struct sa_client *c)
{
	c->st.reregisters++;
	emit(c, SA_EV_REREGISTER, NULL);
	for (struct membership *m = c->groups; m; m = m->next) {
		m->failures = 0;
		mcast_send_join(c, m);
	}
	for (unsigned i = 0; i < NTRAPS; i++)
		if (c->subs[i].wanted) {
			c->subs[i].failures = 0;
			sub_send(c, &c->subs[i], true);
		}
	sa_path_revalidate_all(c);
}

static void send_probe(struct sa_client *c)
{
	c->probe =
	    txn_new(c, TX_PROBE, IB_MAD_METHOD_GET, SA_ATTR_CLASS_PORT_INFO, 0, NULL, 0, NULL);
	if (!c->probe)
		return;
	c->st.probes++;
	/* Probes bypass the queue: the queue is what waits for the SA. */
	c->probe->outstanding = true;
	list_add(&c->outstanding, c->probe);
	txn_transmit(c, c->probe);
}

static void sa_went_down(struct sa_client *c)
{
	if (!c->sa_up)
		return;
	c->sa_up = false;
	c->st.sa_down++;
	c->probe_gap = c->base_timeout;
	c->probe_at = now(c) + jitter(c, c->probe_gap);
	log_warning("sa: the SA at LID %u stopped answering; probing", c->port.sm_lid);
	emit(c, SA_EV_SA_DOWN, NULL);
}

static void sa_came_up(struct sa_client *c)
{
	c->timeouts_in_row = 0;
	if (c->sa_up)
		return;
	c->sa_up = true;
	c->st.sa_up++;
	log_notice("sa: the SA at LID %u answers again; rejoining", c->port.sm_lid);
	emit(c, SA_EV_SA_UP, NULL);
	rejoin_all(c);
}

static void probe_done(struct sa_client *c, int status, const struct sa_hdr *h, const uint8_t *mad,
		       size_t len)
{
	struct sa_class_port_info cpi;

	c->probe = NULL;
	if (!c->probe_gap)
		c->probe_gap = c->base_timeout;
	if (status == -ETIMEDOUT || status == -ECANCELED) {
		c->probe_gap =
		    c->probe_gap * 2 > c->cfg.probe_max_ms ? c->cfg.probe_max_ms : c->probe_gap * 2;
		c->probe_at = now(c) + jitter(c, c->probe_gap);
		return;
	}
	/* Any answer, even an error status, shows the SA is there. */
	if (!status && h && len >= SA_HDR_LEN + SA_CLASS_PORT_INFO_LEN &&
	    sa_class_port_info_decode(mad + SA_HDR_LEN, len - SA_HDR_LEN, &cpi) == 0) {
		c->resp_time = cpi.resp_time;
		compute_timeout(c);
	}
	sa_came_up(c);
}

/* ---------------------------------------------------------------------------------- */
/* Router liveness */

/* PortInfoRecord: EndPortLID (2), PortNum (1), Options (1), then PortInfo (64) whose
 * octet 32 holds LinkSpeedSupported (high nibble) and PortState (low nibble). OpenSM
 * sends 72-octet records (4 octets of padding); 68 are needed. */
#define PIR_REC_LEN   72
#define PIR_REC_MIN   68
#define PIR_STATE_OFF (4 + 32)
#define PIR_CM_LID    (1ull << 0)

static struct rwatch *router_find(struct sa_client *c, uint16_t lid)
{
	for (unsigned i = 0; i < c->nrouters; i++)
		if (c->routers[i].lid == lid)
			return &c->routers[i];
	return NULL;
}

static struct rwatch *router_add(struct sa_client *c, uint16_t lid)
{
	struct rwatch *w;

	if (c->cfg.router_poll_ms == SA_ROUTER_POLL_OFF || lid == 0 || lid >= 0xc000 ||
	    c->nrouters == ROUTERS_MAX)
		return NULL;
	w = &c->routers[c->nrouters++];
	memset(w, 0, sizeof(*w));
	w->lid = lid;
	w->state = SA_ROUTER_UNKNOWN;
	w->changed_at = now(c);
	w->next_poll = w->changed_at; /* ask at once */
	return w;
}

int sa_router_watch(struct sa_client *c, uint16_t lid)
{
	struct rwatch *w;

	if (lid == 0 || lid >= 0xc000)
		return -EINVAL;
	w = router_find(c, lid);
	if (w) {
		if (w->manual)
			return -EEXIST;
		w->manual = true;
		return 0;
	}
	w = router_add(c, lid);
	if (!w)
		return c->cfg.router_poll_ms == SA_ROUTER_POLL_OFF ? -EINVAL : -ENOSPC;
	w->manual = true;
	if (!c->in_run) {
		run(c);
		schedule(c);
	}
	return 0;
}

int sa_router_unwatch(struct sa_client *c, uint16_t lid)
{
	struct rwatch *w = router_find(c, lid);
	unsigned i;

	if (!w)
		return -ENOENT;
	if (w->txn)
		txn_cancel(c, w->txn);
	if (w->state == SA_ROUTER_DOWN && c->cfg.gid_routes)
		sa_gidroutes_set_router(c->cfg.gid_routes, lid, true);
	i = (unsigned)(w - c->routers);
	/* Keep the array dense; a moved entry's transaction must follow it. */
	c->routers[i] = c->routers[--c->nrouters];
	if (i < c->nrouters && c->routers[i].txn)
		c->routers[i].txn->owner = &c->routers[i];
	return 0;
}

void sa_router_set_poll(struct sa_client *c, uint32_t poll_ms, unsigned down_after,
			unsigned up_after)
{
	c->cfg.router_poll_ms = poll_ms ? poll_ms : 1000;
	c->cfg.router_down_after = down_after ? down_after : 1;
	c->cfg.router_up_after = up_after ? up_after : 1;
	if (poll_ms == SA_ROUTER_POLL_OFF)
		while (c->nrouters)
			sa_router_unwatch(c, c->routers[0].lid);
	for (unsigned i = 0; i < c->nrouters; i++) /* the new cadence from now */
		if (!c->routers[i].txn && c->routers[i].next_poll > now(c) + c->cfg.router_poll_ms)
			c->routers[i].next_poll = now(c) + c->cfg.router_poll_ms;
	if (!c->in_run) {
		run(c);
		schedule(c);
	}
}

/* A PathRecord to another subnet names a router: watch it. */
static void router_learn(struct sa_client *c, const struct sa_path *p)
{
	struct rwatch *w;

	if (c->cfg.router_poll_ms == SA_ROUTER_POLL_OFF || !c->have_port ||
	    ib_gid_prefix(&p->dgid) == ib_gid_prefix(&c->gid) || router_find(c, p->dlid))
		return;
	w = router_add(c, p->dlid);
	if (w) {
		w->learned = true;
		/* The SA just named it: up until a poll says otherwise. */
		w->state = SA_ROUTER_UP;
		w->next_poll = now(c) + c->cfg.router_poll_ms;
	}
}

static void router_send(struct sa_client *c, struct rwatch *w)
{
	uint8_t rec[PIR_REC_LEN] = { 0 };

	ib_put_be16(rec, w->lid);
	w->txn = txn_new(c, TX_ROUTER, IB_MAD_METHOD_GET_TABLE, SA_ATTR_PORT_INFO_REC, PIR_CM_LID,
			 rec, sizeof(rec), w);
	if (!w->txn) {
		w->next_poll = now(c) + c->cfg.router_poll_ms;
		return;
	}
	w->polls++;
	c->st.router_polls++;
	txn_submit(c, w->txn);
}

/* From run(): watch the configured routers, send the polls that are due. */
static void routers_run(struct sa_client *c, uint64_t n)
{
	if (c->cfg.router_poll_ms == SA_ROUTER_POLL_OFF)
		return;
	if (c->cfg.gid_routes) {
		uint16_t lids[ROUTERS_MAX];
		unsigned k = sa_gidroutes_routers(c->cfg.gid_routes, lids, ROUTERS_MAX);

		for (unsigned i = 0; i < k && i < ROUTERS_MAX; i++) {
			struct rwatch *w = router_find(c, lids[i]);

			if (!w)
				w = router_add(c, lids[i]);
			if (w)
				w->configured = true;
		}
	}
	for (unsigned i = 0; i < c->nrouters; i++) {
		struct rwatch *w = &c->routers[i];

		if (!w->txn && w->next_poll <= n)
			router_send(c, w);
	}
}

static void router_change(struct sa_client *c, struct rwatch *w, enum sa_router_state st)
{
	uint64_t n = now(c);
	unsigned dropped = 0;

	w->state = st;
	w->in_row = 0;
	w->changed_at = n;
	if (c->cfg.gid_routes)
		sa_gidroutes_set_router(c->cfg.gid_routes, w->lid, st == SA_ROUTER_UP);
	for (struct path_entry *e = c->fifo_head, *next; e; e = next) {
		next = e->fnext;
		if (e->txn)
			continue; /* an answer is on its way */
		if (st == SA_ROUTER_DOWN && e->has_path && e->path.dlid == w->lid) {
			path_free(c, e);
			dropped++;
		} else if (st == SA_ROUTER_UP && c->have_port &&
			   ib_gid_prefix(&e->dgid) != ib_gid_prefix(&c->gid)) {
			/* Every off-subnet answer, not only "no path": the SA may name
			 * the returned router again (failback). */
			path_free(c, e);
		}
	}
	c->st.path_invalidated += dropped;
	if (st == SA_ROUTER_DOWN) {
		w->downs++;
		c->st.router_downs++;
		c->st.router_paths_dropped += dropped;
		log_warning("sa: IB router LID %u is down (no ACTIVE port at the SA); %u cached "
			    "paths through it dropped",
			    w->lid, dropped);
	} else {
		w->ups++;
		c->st.router_ups++;
		log_notice("sa: IB router LID %u is up", w->lid);
	}
	{
		struct sa_event ev = { .type = st == SA_ROUTER_DOWN ? SA_EV_ROUTER_DOWN
								    : SA_EV_ROUTER_UP,
				       .lid = w->lid };

		if (c->cfg.event)
			c->cfg.event(c->cfg.event_arg, &ev);
	}
}

static void router_done(struct sa_client *c, struct rwatch *w, int status, const struct sa_hdr *h,
			const uint8_t *mad, size_t len)
{
	enum sa_router_state seen = SA_ROUTER_UNKNOWN;
	unsigned need;

	w->txn = NULL;
	w->next_poll = now(c) + c->cfg.router_poll_ms;
	if (status == -ENOENT) {
		seen = SA_ROUTER_DOWN; /* ERR_NO_RECORDS: the SM has no such port */
	} else if (status == 0 && h) {
		size_t stride;
		unsigned count;
		bool trunc;

		seen = SA_ROUTER_DOWN;
		if (sa_records(h, len, PIR_REC_MIN, &stride, &count, &trunc)) {
			c->st.bad[SA_BAD_RECORD]++;
			seen = SA_ROUTER_UNKNOWN;
			status = -EPROTO;
		}
		for (unsigned i = 0; seen != SA_ROUTER_UNKNOWN && i < count; i++) {
			const uint8_t *r = mad + SA_HDR_LEN + i * stride;

			if (ib_get_be16(r) == w->lid && (r[PIR_STATE_OFF] & 0x0f) == SA_PORT_ACTIVE)
				seen = SA_ROUTER_UP;
		}
	}
	w->last_error = status;
	if (seen == SA_ROUTER_UNKNOWN || seen == w->state) {
		if (seen != SA_ROUTER_UNKNOWN)
			w->in_row = 0;
		return;
	}
	need = seen == SA_ROUTER_DOWN ? c->cfg.router_down_after : c->cfg.router_up_after;
	if (w->state == SA_ROUTER_UNKNOWN)
		need = 1; /* the first answer says what it is */
	if (++w->in_row < need)
		return;
	if (w->state == SA_ROUTER_UNKNOWN && seen == SA_ROUTER_UP) {
		w->state = SA_ROUTER_UP; /* nothing changes for anyone */
		w->in_row = 0;
		w->changed_at = now(c);
		return;
	}
	router_change(c, w, seen);
}

void sa_router_foreach(const struct sa_client *c,
		       int (*fn)(void *arg, const struct sa_router_info *ri), void *arg)
{
	uint64_t n = now(c);

	for (unsigned i = 0; i < c->nrouters; i++) {
		const struct rwatch *w = &c->routers[i];
		struct sa_router_info ri = {
			.lid = w->lid,
			.state = w->state,
			.learned = w->learned && !w->configured && !w->manual,
			.in_row = w->in_row,
			.polls = w->polls,
			.downs = w->downs,
			.ups = w->ups,
			.changed_ms = n - w->changed_at,
			.last_error = w->last_error,
		};

		if (fn(arg, &ri))
			break;
	}
}

const char *sa_router_state_name(enum sa_router_state s)
{
	switch (s) {
	case SA_ROUTER_UNKNOWN:
		return "unknown";
	case SA_ROUTER_UP:
		return "up";
	case SA_ROUTER_DOWN:
		return "down";
	}
	return "?";
}

/* ---------------------------------------------------------------------------------- */
/* Completion, input */

static void txn_done(struct sa_client *c, struct txn *t, int status, const struct sa_hdr *h,
		     const uint8_t *mad, size_t len)
{
	enum txn_kind kind = t->kind;
	void *owner = t->owner;

	list_del(&c->outstanding, t);
	free(t);
	switch (kind) {
	case TX_PATH:
		path_done(c, owner, status, h, mad, len);
		break;
	case TX_JOIN:
		mcast_done(c, owner, status, h, mad, len);
		break;
	case TX_INFORM:
		if (owner)
			sub_done(c, owner, status, h, mad, len);
		break;
	case TX_PROBE:
		probe_done(c, status, h, mad, len);
		break;
	case TX_ROUTER:
		router_done(c, owner, status, h, mad, len);
		break;
	case TX_LEAVE:
		break;
	}
}

static int status_errno(uint16_t status)
{
	switch (status >> 8) {
	case 3: /* ERR_NO_RECORDS */
		return -ENOENT;
	default:
		return -EPROTO;
	}
}

static void handle_report(struct sa_client *c, const struct sa_hdr *h, const uint8_t *mad,
			  size_t len)
{
	struct sa_notice n;
	union ib_gid gid;
	uint8_t resp[IB_MAD_LEN] = { 0 };
	struct sa_hdr rh = *h;
	struct sa_dest d = sa_dest(c);

	if (len < SA_HDR_LEN + SA_NOTICE_LEN ||
	    sa_notice_decode(mad + SA_HDR_LEN, len - SA_HDR_LEN, &n)) {
		c->st.bad[SA_BAD_SHORT]++;
		return;
	}
	c->st.reports++;
	/* ReportResp: same TID and attribute, the Notice echoed, status 0. */
	rh.mad.response = true;
	rh.mad.status = 0;
	rh.rmpp_version = rh.rmpp_type = rh.rmpp_flags = rh.rmpp_status = 0;
	rh.rmpp_data1 = rh.rmpp_data2 = 0;
	sa_hdr_encode(&rh, resp, sizeof(resp));
	memcpy(resp + SA_HDR_LEN, mad + SA_HDR_LEN, SA_NOTICE_LEN);
	if (c->cfg.ops->send(c->cfg.ops_ctx, resp, sizeof(resp), &d))
		c->st.send_errors++;
	c->st.sent++;
	c->st.report_resp_sent++;
	if (!n.is_generic)
		return;
	sa_notice_gid(&n, &gid);
	switch (n.trap_num) {
	case 64:
		/* A GID came back: forget negative answers about it. */
		for (unsigned b = 0; b < c->nbuckets; b++)
			for (struct path_entry *e = c->buckets[b], *next; e; e = next) {
				next = e->hnext;
				if (e->negative && ib_gid_equal(&e->dgid, &gid))
					path_free(c, e);
			}
		emit(c, SA_EV_GID_IN, &gid);
		break;
	case 65:
		sa_path_invalidate(c, &gid);
		emit(c, SA_EV_GID_OUT, &gid);
		break;
	case 66:
		emit(c, SA_EV_MC_CREATED, &gid);
		break;
	case 67: {
		struct membership *m = mcast_find(c, &gid);

		/* Our group was deleted under us: join again (creating it if allowed). */
		if (m && !m->txn) {
			m->state = SA_MC_JOINING;
			mcast_send_join(c, m);
		}
		emit(c, SA_EV_MC_DELETED, &gid);
		break;
	}
	default:
		break;
	}
}

static uint8_t expected_method(uint8_t req)
{
	switch (req) {
	case IB_MAD_METHOD_GET:
	case IB_MAD_METHOD_SET:
		return IB_MAD_METHOD_GET; /* GetResp */
	default:
		return req; /* GetTableResp, DeleteResp */
	}
}

void sa_client_input(struct sa_client *c, const uint8_t *mad, size_t len)
{
	struct sa_hdr h;
	struct txn *t;
	bool was_probe;
	int rc;

	c->st.received++;
	rc = sa_hdr_decode(mad, len, &h);
	if (rc) {
		c->st.bad[rc == -EMSGSIZE ? SA_BAD_SHORT : SA_BAD_HEADER]++;
		return;
	}
	if (!h.mad.response) {
		c->st.unsolicited++;
		if (h.mad.method == IB_MAD_METHOD_REPORT && h.mad.attr_id == SA_ATTR_NOTICE)
			handle_report(c, &h, mad, len);
		else
			c->st.bad[SA_BAD_UNSOLICITED]++;
		goto out;
	}
	for (t = c->outstanding.head; t; t = t->next)
		if (t->tid == (uint32_t)h.mad.tid)
			break;
	if (!t) {
		c->st.bad[SA_BAD_TID]++;
		return;
	}
	if (h.mad.attr_id != t->attr || h.mad.method != expected_method(t->method)) {
		c->st.bad[SA_BAD_MISMATCH]++;
		return;
	}
	c->st.responses++;
	was_probe = t->kind == TX_PROBE;
	if (h.mad.status & 1) { /* busy: let the retransmission timer ask again */
		c->st.status_errors++;
		return;
	}
	c->timeouts_in_row = 0;
	if (h.mad.status) {
		c->st.status_errors++;
		log_debug("sa: tid %#x attr %#x: SA status %#x (%s)", t->tid, t->attr, h.mad.status,
			  sa_status_name(h.mad.status));
		txn_done(c, t, status_errno(h.mad.status), &h, mad, len);
	} else {
		txn_done(c, t, 0, &h, mad, len);
	}
	if (!c->sa_up && !was_probe)
		sa_came_up(c);
out:
	schedule(c);
}

/* ---------------------------------------------------------------------------------- */
/* Timers */

static void run(struct sa_client *c)
{
	uint64_t n;
	bool again = true;

	if (c->in_run)
		return;
	c->in_run = true;
	while (again) {
		again = false;
		n = now(c);
		/* Retransmissions and timeouts. */
		for (struct txn *t = c->outstanding.head, *next; t; t = next) {
			next = t->next;
			if (t->deadline > n)
				continue;
			if (t->kind != TX_PROBE && t->kind != TX_ROUTER &&
			    t->attempts <= c->cfg.retries && c->sa_up) {
				c->st.retries++;
				txn_transmit(c, t);
				continue;
			}
			c->st.timeouts++;
			if (t->kind != TX_PROBE && t->kind != TX_LEAVE) {
				c->st.failed++;
				if (++c->timeouts_in_row >= c->cfg.sa_down_after)
					sa_went_down(c);
			}
			txn_done(c, t, -ETIMEDOUT, NULL, NULL, 0);
			again = true;
			break; /* callbacks may have changed the list */
		}
		if (again)
			continue;
		if (!port_active(c))
			break; /* everything waits for the port */
		if (c->sa_up) {
			refill(c, n);
			while (c->queue.head && c->outstanding.n < c->cfg.max_outstanding &&
			       c->tokens >= 1000) {
				struct txn *t = c->queue.head;

				list_del(&c->queue, t);
				t->outstanding = true;
				list_add(&c->outstanding, t);
				txn_transmit(c, t);
				c->tokens -= 1000;
			}
			for (struct membership *m = c->groups; m; m = m->next)
				if (m->state == SA_MC_RETRYING && !m->txn && m->retry_at <= n)
					mcast_send_join(c, m);
			for (unsigned i = 0; i < NTRAPS; i++) {
				struct sub *s = &c->subs[i];

				if (s->wanted && !s->subscribed && !s->txn && s->retry_at <= n)
					sub_send(c, s, true);
			}
			routers_run(c, n);
			refill(c, n);
			if (c->queue.head && c->outstanding.n < c->cfg.max_outstanding &&
			    c->tokens >= 1000)
				again = true;
		} else if (c->have_port && !c->probe && c->probe_at <= n) {
			send_probe(c);
		}
	}
	c->in_run = false;
}

static uint64_t next_deadline(const struct sa_client *c)
{
	uint64_t d = UINT64_MAX;

	for (const struct txn *t = c->outstanding.head; t; t = t->next)
		if (t->deadline < d)
			d = t->deadline;
	if (!port_active(c))
		return d;
	if (c->sa_up) {
		if (c->queue.head && c->outstanding.n < c->cfg.max_outstanding) {
			uint64_t at =
			    c->tokens >= 1000
				? c->tok_time
				: c->tok_time + (1000 - c->tokens + c->cfg.rate_per_s - 1) /
						    c->cfg.rate_per_s;

			if (at < d)
				d = at;
		}
		for (const struct membership *m = c->groups; m; m = m->next)
			if (m->state == SA_MC_RETRYING && !m->txn && m->retry_at < d)
				d = m->retry_at;
		for (unsigned i = 0; i < NTRAPS; i++) {
			const struct sub *s = &c->subs[i];

			if (s->wanted && !s->subscribed && !s->txn && s->retry_at < d)
				d = s->retry_at;
		}
		if (c->cfg.router_poll_ms != SA_ROUTER_POLL_OFF) {
			if (c->cfg.gid_routes && c->nrouters < ROUTERS_MAX) {
				/* configured routers not yet watched: look at once */
				uint16_t lids[ROUTERS_MAX];
				unsigned k =
				    sa_gidroutes_routers(c->cfg.gid_routes, lids, ROUTERS_MAX);

				for (unsigned i = 0; i < k && i < ROUTERS_MAX; i++) {
					bool have = false;

					for (unsigned j = 0; j < c->nrouters; j++)
						have |= c->routers[j].lid == lids[i];
					if (!have)
						d = 0;
				}
			}
			for (unsigned i = 0; i < c->nrouters; i++)
				if (!c->routers[i].txn && c->routers[i].next_poll < d)
					d = c->routers[i].next_poll;
		}
	} else if (!c->probe && c->probe_at < d) {
		d = c->probe_at;
	}
	return d;
}

static void schedule(struct sa_client *c)
{
	uint64_t d, n;

	if (!c->cfg.loop)
		return;
	d = next_deadline(c);
	if (d == UINT64_MAX) {
		evtimer_stop(c->timer);
		return;
	}
	n = now(c);
	evtimer_start(c->timer, d > n ? d - n : 0, 0);
}

static void on_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct sa_client *c = arg;

	(void)loop;
	(void)t;
	run(c);
	schedule(c);
}

uint64_t sa_client_tick(struct sa_client *c)
{
	uint64_t d, n;

	run(c);
	schedule(c);
	d = next_deadline(c);
	n = now(c);
	return d == UINT64_MAX ? UINT64_MAX : d > n ? d - n : 0;
}

/* ---------------------------------------------------------------------------------- */
/* Port, lifecycle */

/* The port left ACTIVE. Cached paths stay in service, marked stale (the data path may
 * use them again the moment the link returns) and are revalidated when the port is
 * ACTIVE again (a reregister); a query with no path yet fails with -ENETDOWN; every
 * transaction on the wire goes back to the queue, its retries reset, to be sent once
 * the port is back: nothing is sent into a dead port, and its silence does not count
 * against the SA. */
static void port_went_down(struct sa_client *c)
{
	unsigned stale = 0;

	c->st.port_downs++;
	if (c->probe) {
		txn_cancel(c, c->probe);
		c->probe = NULL;
	}
	c->timeouts_in_row = 0;
	for (struct path_entry *e = c->fifo_head, *next; e; e = next) {
		next = e->fnext;
		if (e->has_path) {
			e->stale = true;
			stale++;
		} else if (e->txn) {
			txn_cancel(c, e->txn);
			e->txn = NULL;
			path_unlink(c, e);
			path_notify(c, e, -ENETDOWN);
			free(e);
		}
	}
	while (c->outstanding.tail) {
		struct txn *t = c->outstanding.tail;

		list_del(&c->outstanding, t);
		t->outstanding = false;
		t->attempts = 0;
		/* Back to the front of the queue, in their original order. */
		t->prev = NULL;
		t->next = c->queue.head;
		if (c->queue.head)
			c->queue.head->prev = t;
		else
			c->queue.tail = t;
		c->queue.head = t;
		c->queue.n++;
	}
	log_notice("sa: port down (state %u): %u cached paths kept, stale", c->port.state, stale);
	emit(c, SA_EV_PORT_DOWN, NULL);
}

void sa_client_set_port(struct sa_client *c, const struct sa_port_info *pi)
{
	bool had = c->have_port, was_active = had && c->port.state == SA_PORT_ACTIVE;
	bool rereg = had && (pi->lid != c->port.lid || pi->sm_lid != c->port.sm_lid ||
			     (!was_active && pi->state == SA_PORT_ACTIVE));
	bool down = had && was_active && pi->state != SA_PORT_ACTIVE;

	c->port = *pi;
	if (c->port.npkeys > SA_MAX_PKEYS)
		c->port.npkeys = SA_MAX_PKEYS;
	c->have_port = true;
	ib_gid_set(&c->gid, pi->gid_prefix, pi->port_guid);
	compute_timeout(c);
	if (down)
		port_went_down(c);
	if (rereg) {
		c->sa_up = true;
		c->timeouts_in_row = 0;
		if (c->probe) {
			txn_cancel(c, c->probe);
			c->probe = NULL;
		}
		rejoin_all(c);
	}
	if (!had && port_active(c)) {
		/* First port info: send the ClassPortInfo (RespTimeValue) query, then whatever
		 * was waiting. */
		send_probe(c);
	}
	run(c);
	schedule(c);
}

void sa_client_reregister(struct sa_client *c)
{
	if (!c->have_port)
		return;
	c->sa_up = true;
	c->timeouts_in_row = 0;
	rejoin_all(c);
	run(c);
	schedule(c);
}

int sa_client_new(const struct sa_client_config *cfg, struct sa_client **out)
{
	struct sa_client *c;

	if (!cfg || !cfg->ops || !cfg->ops->send)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	if (!c->cfg.pkey)
		c->cfg.pkey = 0xffff;
	if (!c->cfg.max_outstanding)
		c->cfg.max_outstanding = 8;
	if (!c->cfg.rate_per_s)
		c->cfg.rate_per_s = 200;
	if (!c->cfg.retries)
		c->cfg.retries = 3;
	if (!c->cfg.timeout_floor_ms)
		c->cfg.timeout_floor_ms = 200;
	if (!c->cfg.timeout_max_ms)
		c->cfg.timeout_max_ms = 8000;
	if (c->cfg.timeout_max_ms < c->cfg.timeout_floor_ms)
		c->cfg.timeout_max_ms = c->cfg.timeout_floor_ms;
	if (!c->cfg.path_ttl_ms)
		c->cfg.path_ttl_ms = 300000;
	if (!c->cfg.neg_ttl_ms)
		c->cfg.neg_ttl_ms = 5000;
	if (!c->cfg.max_paths)
		c->cfg.max_paths = 65536;
	if (!c->cfg.sa_down_after)
		c->cfg.sa_down_after = 2;
	if (!c->cfg.probe_max_ms)
		c->cfg.probe_max_ms = 30000;
	if (!c->cfg.router_poll_ms)
		c->cfg.router_poll_ms = 1000;
	if (!c->cfg.router_down_after)
		c->cfg.router_down_after = 1;
	if (!c->cfg.router_up_after)
		c->cfg.router_up_after = 1;
	c->nbuckets = 1024;
	while (c->nbuckets < c->cfg.max_paths && c->nbuckets < (1u << 20))
		c->nbuckets <<= 1;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return -ENOMEM;
	}
	if (cfg->loop) {
		c->timer = evtimer_new(cfg->loop, on_timer, c);
		if (!c->timer) {
			free(c->buckets);
			free(c);
			return -ENOMEM;
		}
	}
	c->rng = cfg->seed ? cfg->seed : (uint32_t)(now(c) * 2654435761u) | 1;
	c->next_tid = rnd(c);
	c->resp_time = 0xff;
	c->port.subnet_timeout = 0xff;
	compute_timeout(c);
	c->sa_up = true;
	c->tok_time = now(c);
	c->tokens = (uint64_t)c->cfg.max_outstanding * 1000;
	for (unsigned i = 0; i < NTRAPS; i++)
		c->subs[i].trap = traps[i];
	*out = c;
	return 0;
}

void sa_client_free(struct sa_client *c)
{
	if (!c)
		return;
	/* Best effort goodbyes: leave every group, unsubscribe, without waiting. */
	if (c->have_port && c->sa_up) {
		struct sa_dest d = sa_dest(c);

		for (struct membership *m = c->groups; m; m = m->next) {
			struct txn *t = leave_txn(c, m);

			if (t) {
				c->cfg.ops->send(c->cfg.ops_ctx, t->mad, sizeof(t->mad), &d);
				free(t);
			}
		}
		for (unsigned i = 0; i < NTRAPS; i++) {
			struct sa_inform_info ii = { 0 };
			uint8_t rec[SA_INFORM_INFO_LEN];
			struct txn *t;

			if (!c->subs[i].subscribed)
				continue;
			ii.lid_begin = 0xffff;
			ii.is_generic = true;
			ii.type = 0xffff;
			ii.trap_num = c->subs[i].trap;
			ii.qpn = 1;
			ii.resp_time = 18;
			ii.producer_type = 0xffffff;
			sa_inform_info_encode(&ii, rec, sizeof(rec));
			t = txn_new(c, TX_INFORM, IB_MAD_METHOD_SET, SA_ATTR_INFORM_INFO, 0, rec,
				    sizeof(rec), NULL);
			if (t) {
				c->cfg.ops->send(c->cfg.ops_ctx, t->mad, sizeof(t->mad), &d);
				free(t);
			}
		}
	}
	while (c->fifo_head)
		path_free(c, c->fifo_head);
	while (c->groups) {
		struct membership *m = c->groups;

		c->groups = m->next;
		free(m);
	}
	while (c->queue.head) {
		struct txn *t = c->queue.head;

		list_del(&c->queue, t);
		free(t);
	}
	while (c->outstanding.head) {
		struct txn *t = c->outstanding.head;

		list_del(&c->outstanding, t);
		free(t);
	}
	evtimer_free(c->timer);
	free(c->buckets);
	free(c);
}

void sa_client_stats(const struct sa_client *c, struct sa_stats *out)
{
	*out = c->st;
	out->outstanding = c->outstanding.n;
	out->queued = c->queue.n;
	out->paths = c->npaths;
	out->groups = c->ngroups;
	out->sa_reachable = c->sa_up;
	out->port_active = port_active(c);
	out->paths_stale = 0;
	for (const struct path_entry *e = c->fifo_head; e; e = e->fnext)
		if (e->has_path && (e->stale || e->expires <= now(c)))
			out->paths_stale++;
	out->timeout_ms = c->base_timeout;
}

const char *sa_bad_reason_name(enum sa_bad_reason r)
{
	static const char *const names[SA_BAD_MAX] = {
		"short", "header", "unknown_tid", "mismatch", "record", "unsolicited",
	};

	return (unsigned)r < SA_BAD_MAX ? names[r] : "?";
}
