/*
 * The IPoIB-CM connection manager (see cm.h for the protocol and the rules).
 *
 * A connection (struct cm_conn) sits in up to three hash tables: by peer (GID + UD
 * QPN) while it serves or is being set up for that peer, by our communication ID for
 * its whole life (every message but REQ names it), and by (peer GID, the peer's
 * communication ID) once that is known, so a retransmitted REQ finds the connection
 * it already made. Teardown and TIMEWAIT entries leave the peer table, so a new
 * connection to the same peer can start while an old one finishes.
 *
 * Each connection keeps the last MAD it sent that the protocol may need again (REQ,
 * MRA, REP, RTU, DREQ or DREP), so retransmissions and answers to duplicates resend
 * the same octets, transaction ID included.
 *
 * Timers are a deadline per connection, plus the idle deadline of established ones;
 * cm_tick scans every connection (O(n), on the control thread; connections number
 * in the thousands at most).
 *
 * Threads: control thread only (see cm.h).
 */
#include "cm/cm.h"
#include "lib/evloop.h"
#include "lib/ib_bytes.h"
#include "lib/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define RX_MTU_DEFAULT       (CM_IPOIB_MTU_MAX + CM_IPOIB_ENCAP_LEN) /* 65524 */
#define RESP_TIMEOUT_DEFAULT 16
#define MAX_RETRIES_DEFAULT  8
#define MRA_TIMEOUT_DEFAULT  20
#define MAX_CONNS_DEFAULT    1024

struct cm_conn {
	struct cm_conn *all_next, *all_prev;
	struct cm_conn *peer_next, *lcid_next, *rcid_next;
	bool in_peer, in_rcid;
	struct ipoib_hwaddr peer;
	enum cm_state state;
	bool active, was_up, qp_pending;
	bool path_pending; /* passive, off-subnet: waiting for cm_return_path */
	void *qp;
	bool have_qp;
	uint32_t lcid, rcid;
	uint32_t lqpn, rqpn, lpsn, rpsn;
	uint32_t peer_rx_mtu, mtu;
	struct cm_addr to;     /* where our MADs go */
	struct ibp_ah_attr ah; /* the connection's path */
	enum ib_mtu path_mtu;
	uint8_t ack_timeout, rc_retry, rnr_retry, peer_max_retries;
	uint64_t tid;
	uint8_t last[IB_MAD_LEN];
	bool have_last;
	uint64_t deadline, wait_ms, pl2_ms;
	uint8_t retries_left;
	uint64_t created, last_activity;
	uint32_t retries, mra_rcvd;
	uint16_t rej_reason;
	enum cm_close_reason close_reason;
};

struct cm {
	struct cm_config cfg;
	struct cm_conn *all;
	unsigned n_conns, live_conns;
	struct cm_conn **peer_tab, **lcid_tab, **rcid_tab;
	uint32_t mask;
	uint64_t rng;
	uint32_t next_lcid;
	uint64_t tid_hi, tid_lo;
	struct evtimer *timer;
	struct cm_stats stats;
};

static const char *const state_names[CM_STATE_COUNT] = {
	[CM_STATE_REQ_SENT] = "req-sent",   [CM_STATE_MRA_SENT] = "mra-sent",
	[CM_STATE_REP_SENT] = "rep-sent",   [CM_STATE_ESTABLISHED] = "established",
	[CM_STATE_DREQ_SENT] = "dreq-sent", [CM_STATE_TIMEWAIT] = "timewait",
};

static const char *const close_names[CM_CLOSE_COUNT] = {
	[CM_CLOSE_LOCAL] = "local",       [CM_CLOSE_PEER] = "peer",
	[CM_CLOSE_REJECTED] = "rejected", [CM_CLOSE_TIMEOUT] = "timeout",
	[CM_CLOSE_IDLE] = "idle",         [CM_CLOSE_NEIGH] = "neighbour-expired",
	[CM_CLOSE_REPLACED] = "replaced", [CM_CLOSE_CROSSED] = "crossed",
	[CM_CLOSE_ERROR] = "error",       [CM_CLOSE_PATH] = "path-down",
};

const char *cm_state_name(enum cm_state s)
{
	return (unsigned)s < CM_STATE_COUNT ? state_names[s] : "?";
}

const char *cm_close_reason_name(enum cm_close_reason r)
{
	return (unsigned)r < CM_CLOSE_COUNT ? close_names[r] : "?";
}

bool cm_crossing_accept(const struct ipoib_hwaddr *local, const struct ipoib_hwaddr *remote)
{
	return ipoib_hwaddr_cmp_noflags(local, remote) < 0;
}

/* ---- helpers ---- */

static void rearm(struct cm *cm);

static uint64_t now(const struct cm *cm)
{
	return cm->cfg.now_ms ? cm->cfg.now_ms(cm->cfg.clock_ctx) : evloop_now_ms();
}

static uint32_t rnd32(struct cm *cm)
{
	uint64_t x = cm->rng; /* xorshift64* */

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	cm->rng = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

static uint32_t mix(uint32_t h)
{
	h ^= h >> 16;
	h *= 0x7feb352d;
	h ^= h >> 15;
	h *= 0x846ca68b;
	h ^= h >> 16;
	return h;
}

static uint32_t gid_hash(const union ib_gid *g)
{
	uint32_t h = 0;

	for (int i = 0; i < 4; i++)
		h = mix(h ^ g->raw32[i]);
	return h;
}

static uint32_t peer_hash(const struct cm *cm, const union ib_gid *g, uint32_t qpn)
{
	return mix(gid_hash(g) ^ qpn) & cm->mask;
}

static uint32_t rcid_hash(const struct cm *cm, const union ib_gid *g, uint32_t rcid)
{
	return mix(gid_hash(g) ^ mix(rcid)) & cm->mask;
}

static struct cm_conn *find_peer(struct cm *cm, const union ib_gid *g, uint32_t qpn)
{
	for (struct cm_conn *c = cm->peer_tab[peer_hash(cm, g, qpn)]; c; c = c->peer_next)
		if (c->peer.qpn == qpn && ib_gid_equal(&c->peer.gid, g))
			return c;
	return NULL;
}

static struct cm_conn *find_lcid(struct cm *cm, uint32_t lcid)
{
	for (struct cm_conn *c = cm->lcid_tab[mix(lcid) & cm->mask]; c; c = c->lcid_next)
		if (c->lcid == lcid)
			return c;
	return NULL;
}

static struct cm_conn *find_rcid(struct cm *cm, const union ib_gid *g, uint32_t rcid)
{
	for (struct cm_conn *c = cm->rcid_tab[rcid_hash(cm, g, rcid)]; c; c = c->rcid_next)
		if (c->rcid == rcid && ib_gid_equal(&c->peer.gid, g))
			return c;
	return NULL;
}

static void unlink_from(struct cm_conn **head, struct cm_conn *c, size_t next_off)
{
	for (struct cm_conn **pp = head; *pp; pp = (struct cm_conn **)((char *)*pp + next_off)) {
		if (*pp == c) {
			*pp = *(struct cm_conn **)((char *)c + next_off);
			return;
		}
	}
}

static void peer_link(struct cm *cm, struct cm_conn *c)
{
	uint32_t h = peer_hash(cm, &c->peer.gid, c->peer.qpn);

	c->peer_next = cm->peer_tab[h];
	cm->peer_tab[h] = c;
	c->in_peer = true;
	cm->live_conns++;
}

static void peer_unlink(struct cm *cm, struct cm_conn *c)
{
	if (!c->in_peer)
		return;
	unlink_from(&cm->peer_tab[peer_hash(cm, &c->peer.gid, c->peer.qpn)], c,
		    offsetof(struct cm_conn, peer_next));
	c->in_peer = false;
	cm->live_conns--;
}

static void lcid_link(struct cm *cm, struct cm_conn *c)
{
	uint32_t h = mix(c->lcid) & cm->mask;

	c->lcid_next = cm->lcid_tab[h];
	cm->lcid_tab[h] = c;
}

static void lcid_unlink(struct cm *cm, struct cm_conn *c)
{
	unlink_from(&cm->lcid_tab[mix(c->lcid) & cm->mask], c, offsetof(struct cm_conn, lcid_next));
}

static void rcid_link(struct cm *cm, struct cm_conn *c, uint32_t rcid)
{
	uint32_t h;

	if (c->in_rcid)
		return;
	c->rcid = rcid;
	h = rcid_hash(cm, &c->peer.gid, rcid);
	c->rcid_next = cm->rcid_tab[h];
	cm->rcid_tab[h] = c;
	c->in_rcid = true;
}

static uint32_t new_lcid(struct cm *cm)
{
	for (;;) {
		uint32_t id;

		if (cm->cfg.comm_id_tag)
			id = (uint32_t)cm->cfg.comm_id_tag << 24 | (cm->next_lcid++ & 0xffffff);
		else
			id = rnd32(cm);
		if (id != 0 && !find_lcid(cm, id))
			return id;
	}
}

static uint64_t new_tid(struct cm *cm)
{
	return cm->tid_hi << 32 | (uint32_t)cm->tid_lo++;
}

static void fill_info(const struct cm *cm, const struct cm_conn *c, struct cm_conn_info *o)
{
	uint64_t t = now(cm);

	memset(o, 0, sizeof(*o));
	o->peer = c->peer;
	o->state = c->state;
	o->active = c->active;
	o->local_comm_id = c->lcid;
	o->remote_comm_id = c->rcid;
	o->local_qpn = c->lqpn;
	o->remote_qpn = c->rqpn;
	o->mtu = c->mtu;
	o->peer_rx_mtu = c->peer_rx_mtu;
	o->dlid = c->ah.dlid;
	o->age_ms = t - c->created;
	o->idle_ms = t - c->last_activity;
	o->retries = c->retries;
	o->mra_rcvd = c->mra_rcvd;
	o->rej_reason = c->rej_reason;
}

static unsigned attr_index(uint16_t attr)
{
	if (attr >= CM_ATTR_REQ && attr <= CM_ATTR_DREP)
		return attr - CM_ATTR_REQ;
	return 7;
}

static void pdata_ours(const struct cm *cm, uint8_t *pdata)
{
	struct cm_ipoib_pdata p = { .ud_qpn = cm->cfg.local.qpn, .rx_mtu = cm->cfg.rx_mtu };

	cm_ipoib_pdata_encode(&p, pdata);
}

/* Encode and send; keep the octets in c->last when c is given. */
static void send_msg(struct cm *cm, struct cm_conn *c, const struct cm_addr *to,
		     const struct cm_msg *m)
{
	uint8_t buf[IB_MAD_LEN];
	uint8_t *out = c ? c->last : buf;

	if (cm_mad_encode(m, out, IB_MAD_LEN) != IB_MAD_LEN) {
		log_error("cm: cannot encode %s", cm_attr_name(m->attr_id)); /* a bug */
		cm->stats.tx_errors++;
		return;
	}
	if (c)
		c->have_last = true;
	cm->stats.tx_mads++;
	cm->stats.tx_by_attr[attr_index(m->attr_id)]++;
	if (cm->cfg.transport->send(cm->cfg.transport_ctx, to, out, IB_MAD_LEN) < 0)
		cm->stats.tx_errors++;
}

static void resend_last(struct cm *cm, struct cm_conn *c)
{
	if (!c->have_last)
		return;
	cm->stats.tx_mads++;
	cm->stats.tx_by_attr[attr_index(ib_get_be16(c->last + 16))]++;
	if (cm->cfg.transport->send(cm->cfg.transport_ctx, &c->to, c->last, IB_MAD_LEN) < 0)
		cm->stats.tx_errors++;
}

static void send_rej(struct cm *cm, struct cm_conn *c, const struct cm_addr *to, uint64_t tid,
		     uint32_t lcid, uint32_t rcid, uint8_t msg_ref, uint16_t reason)
{
	struct cm_msg m = { .attr_id = CM_ATTR_REJ, .tid = tid, .method = IB_MAD_METHOD_SEND };

	m.rej.local_comm_id = lcid;
	m.rej.remote_comm_id = rcid;
	m.rej.message_rejected = msg_ref;
	m.rej.reason = reason;
	pdata_ours(cm, m.rej.private_data);
	cm->stats.rej_sent[reason < 32 ? reason : 0]++;
	send_msg(cm, c, to, &m);
}

static void set_wait(struct cm *cm, struct cm_conn *c, uint64_t wait_ms, uint8_t retries)
{
	c->wait_ms = wait_ms;
	c->retries_left = retries;
	c->deadline = now(cm) + wait_ms;
}

/* ---- connection life ---- */

static struct cm_conn *conn_new(struct cm *cm, bool active)
{
	struct cm_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->active = active;
	c->lcid = new_lcid(cm);
	c->lpsn = rnd32(cm) & 0xffffff;
	c->created = c->last_activity = now(cm);
	lcid_link(cm, c);
	c->all_next = cm->all;
	if (cm->all)
		cm->all->all_prev = c;
	cm->all = c;
	cm->n_conns++;
	return c;
}

static void conn_free(struct cm *cm, struct cm_conn *c)
{
	peer_unlink(cm, c);
	lcid_unlink(cm, c);
	if (c->in_rcid)
		unlink_from(&cm->rcid_tab[rcid_hash(cm, &c->peer.gid, c->rcid)], c,
			    offsetof(struct cm_conn, rcid_next));
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		cm->all = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	cm->n_conns--;
	free(c);
}

/* The connection stops serving its peer: tell the user, release the QP. */
static void finish(struct cm *cm, struct cm_conn *c, enum cm_close_reason why)
{
	struct cm_conn_info info;

	peer_unlink(cm, c);
	c->deadline = 0;
	c->close_reason = why;
	if (c->have_qp || c->qp_pending) {
		fill_info(cm, c, &info);
		if (cm->cfg.cb->down)
			cm->cfg.cb->down(cm->cfg.cb_ctx, &info, c->qp, c->was_up, why);
		if (c->have_qp && cm->cfg.cb->qp_destroy)
			cm->cfg.cb->qp_destroy(cm->cfg.cb_ctx, c->qp);
		c->have_qp = c->qp_pending = false;
		c->qp = NULL;
	}
	cm->stats.closed[why]++;
}

static uint64_t timewait_ms(const struct cm *cm)
{
	return cm->cfg.timewait_ms ? cm->cfg.timewait_ms : cm_timeout_ms(cm->cfg.response_timeout);
}

static void enter_timewait(struct cm *cm, struct cm_conn *c)
{
	c->state = CM_STATE_TIMEWAIT;
	c->deadline = now(cm) + timewait_ms(cm);
}

/* Leave service and say so to the peer: REJ while being set up, DREQ once up. */
static void close_conn(struct cm *cm, struct cm_conn *c, enum cm_close_reason why,
		       uint16_t rej_reason)
{
	enum cm_state st = c->state;

	if (st == CM_STATE_DREQ_SENT || st == CM_STATE_TIMEWAIT)
		return;
	finish(cm, c, why);
	if (st == CM_STATE_ESTABLISHED) {
		struct cm_msg m = { .attr_id = CM_ATTR_DREQ, .method = IB_MAD_METHOD_SEND };

		c->tid = m.tid = new_tid(cm);
		m.dreq.local_comm_id = c->lcid;
		m.dreq.remote_comm_id = c->rcid;
		m.dreq.remote_qpn = c->rqpn;
		send_msg(cm, c, &c->to, &m);
		c->state = CM_STATE_DREQ_SENT;
		set_wait(cm, c, cm_timeout_ms(cm->cfg.response_timeout) + c->pl2_ms,
			 cm->cfg.max_cm_retries);
		return;
	}
	if (rej_reason) {
		uint8_t ref = st == CM_STATE_REQ_SENT ? CM_MSG_REF_REP : CM_MSG_REF_REQ;

		/* REQ_SENT: we reject the REP we are waiting for (IBA: message
		 * rejected = REP when the active side gives up); passive: the REQ. */
		send_rej(cm, c, &c->to, c->tid, c->lcid, c->rcid, ref, rej_reason);
	}
	enter_timewait(cm, c);
}

static void go_up(struct cm *cm, struct cm_conn *c)
{
	struct cm_conn_info info;

	c->state = CM_STATE_ESTABLISHED;
	c->deadline = 0;
	c->was_up = true;
	c->last_activity = now(cm);
	cm->stats.established++;
	fill_info(cm, c, &info);
	if (cm->cfg.cb->up)
		cm->cfg.cb->up(cm->cfg.cb_ctx, &info, c->qp);
}

static int program_qp(struct cm *cm, struct cm_conn *c)
{
	struct ibp_qp_connect qc = {
		.remote_qpn = c->rqpn,
		.remote_psn = c->rpsn,
		.local_psn = c->lpsn,
		.path = c->ah,
		.path_mtu = c->path_mtu,
		.timeout = c->ack_timeout,
		.retry_count = c->rc_retry,
		.rnr_retry = c->rnr_retry,
		.min_rnr_timer = cm->cfg.min_rnr_timer,
	};

	return cm->cfg.cb->qp_connect(cm->cfg.cb_ctx, c->qp, &qc);
}

/* ---- passive side ---- */

static void send_rep(struct cm *cm, struct cm_conn *c)
{
	struct cm_msg m = { .attr_id = CM_ATTR_REP, .tid = c->tid, .method = IB_MAD_METHOD_SEND };

	m.rep.local_comm_id = c->lcid;
	m.rep.remote_comm_id = c->rcid;
	m.rep.local_qpn = c->lqpn;
	m.rep.starting_psn = c->lpsn;
	m.rep.rnr_retry_count = cm->cfg.rnr_retry & 7;
	m.rep.srq = true;
	m.rep.local_ca_guid = cm->cfg.ca_guid;
	pdata_ours(cm, m.rep.private_data);
	send_msg(cm, c, &c->to, &m);
}

/* The QP exists: program it and answer REP. */
static void accept_req(struct cm *cm, struct cm_conn *c)
{
	if (program_qp(cm, c) < 0) {
		close_conn(cm, c, CM_CLOSE_ERROR, CM_REJ_NO_RESOURCES);
		return;
	}
	send_rep(cm, c);
	c->state = CM_STATE_REP_SENT;
	set_wait(cm, c, c->wait_ms, c->peer_max_retries);
}

static void handle_dup_req(struct cm *cm, struct cm_conn *c, const struct cm_addr *from,
			   const struct cm_msg *m)
{
	cm->stats.rx_dup_req++;
	switch (c->state) {
	case CM_STATE_MRA_SENT:
	case CM_STATE_REP_SENT:
		resend_last(cm, c);
		break;
	case CM_STATE_DREQ_SENT:
	case CM_STATE_TIMEWAIT:
		send_rej(cm, NULL, from, m->tid, c->lcid, m->req.local_comm_id, CM_MSG_REF_REQ,
			 CM_REJ_STALE_CONN);
		break;
	default: /* established: the RTU is on its way or lost; traffic will tell */
		break;
	}
}

/* Ask the peer for time (IBA 12.6.6): the REQ is being worked on. */
static void send_mra(struct cm *cm, struct cm_conn *c)
{
	struct cm_msg mra = { .attr_id = CM_ATTR_MRA, .tid = c->tid, .method = IB_MAD_METHOD_SEND };

	if (c->state == CM_STATE_MRA_SENT)
		return; /* one MRA covers every wait of this REQ */
	mra.mra.local_comm_id = c->lcid;
	mra.mra.remote_comm_id = c->rcid;
	mra.mra.message_mraed = CM_MSG_REF_REQ;
	mra.mra.service_timeout = cm->cfg.mra_service_timeout;
	send_msg(cm, c, &c->to, &mra);
	c->state = CM_STATE_MRA_SENT;
	c->deadline = now(cm) + cm_timeout_ms(cm->cfg.mra_service_timeout);
}

/* Our path back to an off-subnet peer, for the connection: its SL, rate, GRH fields
 * and MTU. The DLID stays the router the REQ came through (c->to.lid): an RC QP takes
 * only packets from the LID it sends to (the HCA checks the SLID), so both ends must
 * use the same router, and the active side chose that one; the SA may name another
 * (counted). Our MADs answer the REQ's sender the same way, as Linux's CM does. */
static void apply_return_path(struct cm *cm, struct cm_conn *c, const struct cm_path_info *p)
{
	if (p->dlid != c->to.lid)
		cm->stats.return_path_other_router++;
	c->ah.dlid = c->to.lid;
	c->ah.sl = p->sl;
	c->ah.static_rate = p->packet_rate;
	c->ah.is_global = true;
	c->ah.flow_label = p->flow_label;
	c->ah.hop_limit = p->hop_limit ? p->hop_limit : 0xff;
	c->ah.traffic_class = p->traffic_class;
	if (p->mtu && p->mtu < c->path_mtu)
		c->path_mtu = p->mtu;
}

/* Passive side, the REQ taken: create the QP (or wait for it) and answer REP. */
static void req_continue(struct cm *cm, struct cm_conn *c)
{
	if (!c->have_qp) {
		struct cm_conn_info info;
		int ret;

		fill_info(cm, c, &info);
		ret = cm->cfg.cb->qp_create(cm->cfg.cb_ctx, &info, &c->qp, &c->lqpn);
		if (ret == -EINPROGRESS) {
			c->qp_pending = true;
			send_mra(cm, c);
			return;
		}
		if (ret < 0) {
			c->state = CM_STATE_MRA_SENT; /* a REJ of the REQ */
			close_conn(cm, c, CM_CLOSE_ERROR, CM_REJ_NO_QP);
			return;
		}
		c->have_qp = true;
	}
	accept_req(cm, c);
}

static int handle_req(struct cm *cm, const struct cm_msg *m, const struct cm_addr *from)
{
	const struct cm_req *r = &m->req;
	struct cm_ipoib_pdata pd;
	enum cm_pdata_err pe;
	struct ipoib_hwaddr peer = { .flags = IPOIB_HWADDR_F_RC };
	struct cm_conn *c, *dup;
	uint32_t qpn;
	int ret;

	if (cm_ipoib_service_qpn(r->service_id, &qpn) < 0 || qpn != cm->cfg.local.qpn)
		return -ENOENT;
	if (r->transport_service_type != CM_TST_RC) {
		send_rej(cm, NULL, from, m->tid, 0, r->local_comm_id, CM_MSG_REF_REQ,
			 CM_REJ_INVALID_TRANSPORT_TYPE);
		return 0;
	}
	pe = cm_ipoib_pdata_decode(r->private_data, &pd);
	if (pe != CM_PDATA_OK) {
		cm->stats.rx_bad_pdata[pe]++;
		send_rej(cm, NULL, from, m->tid, 0, r->local_comm_id, CM_MSG_REF_REQ,
			 CM_REJ_CONSUMER);
		return 0;
	}
	peer.qpn = pd.ud_qpn;
	peer.gid = r->primary.local_gid;

	dup = find_rcid(cm, &peer.gid, r->local_comm_id);
	if (dup) {
		handle_dup_req(cm, dup, from, m);
		return 0;
	}
	c = find_peer(cm, &peer.gid, peer.qpn);
	if (c && c->state == CM_STATE_REQ_SENT) {
		if (!cm_crossing_accept(&cm->cfg.local, &peer)) {
			cm->stats.crossing_rejected++;
			send_rej(cm, NULL, from, m->tid, 0, r->local_comm_id, CM_MSG_REF_REQ,
				 CM_REJ_CONSUMER);
			return 0;
		}
		/* We accept theirs: our attempt becomes the passive side of this one,
		 * keeping its QP (still unconnected) under a new communication ID; the
		 * REJ of our REQ then names an ID nobody has. */
		cm->stats.crossing_accepted++;
		lcid_unlink(cm, c);
		c->lcid = new_lcid(cm);
		lcid_link(cm, c);
		c->active = false;
	} else if (c) {
		close_conn(cm, c, CM_CLOSE_REPLACED, CM_REJ_CONSUMER);
		c = NULL;
	}
	if (!c) {
		if (cm->live_conns >= cm->cfg.max_conns) {
			send_rej(cm, NULL, from, m->tid, 0, r->local_comm_id, CM_MSG_REF_REQ,
				 CM_REJ_NO_RESOURCES);
			return 0;
		}
		c = conn_new(cm, false);
		if (!c) {
			send_rej(cm, NULL, from, m->tid, 0, r->local_comm_id, CM_MSG_REF_REQ,
				 CM_REJ_NO_RESOURCES);
			return 0;
		}
		c->peer = peer;
		peer_link(cm, c);
	}
	rcid_link(cm, c, r->local_comm_id);
	c->tid = m->tid;
	c->to = *from;
	c->to.pkey_index = cm->cfg.pkey_index;
	if (c->to.has_grh)
		c->to.hop_limit = r->primary.hop_limit;
	c->rqpn = r->local_qpn;
	c->rpsn = r->starting_psn;
	c->peer_rx_mtu = pd.rx_mtu;
	c->mtu = cm_ipoib_conn_mtu(cm->cfg.rx_mtu, pd.rx_mtu);
	c->ah = (struct ibp_ah_attr){
		.dlid = r->primary.local_lid,
		.sl = r->primary.sl,
		.static_rate = r->primary.packet_rate,
		.is_global = !r->primary.subnet_local,
		.dgid = r->primary.local_gid,
		.flow_label = r->primary.flow_label,
		.hop_limit = r->primary.hop_limit,
		.traffic_class = r->primary.traffic_class,
	};
	c->path_mtu = (enum ib_mtu)r->path_mtu;
	c->ack_timeout = r->primary.local_ack_timeout;
	c->rc_retry = r->retry_count;
	c->rnr_retry = r->rnr_retry_count;
	c->peer_max_retries = r->max_cm_retries;
	c->pl2_ms =
	    2 * cm_timeout_ms(r->primary.local_ack_timeout ? r->primary.local_ack_timeout - 1 : 0);
	c->wait_ms = cm_timeout_ms(r->local_cm_response_timeout) + c->pl2_ms;
	c->state = CM_STATE_REP_SENT; /* until decided below */

	if (!r->primary.subnet_local) {
		/* From another subnet: not the REQ's LIDs (they are the far subnet's)
		 * but the router it came through, with the rest of our own path back. */
		struct cm_path_info rp;

		c->ah.dlid = from->lid; /* the router the REQ came through */
		if (cm->cfg.cb->return_path) {
			ret = cm->cfg.cb->return_path(cm->cfg.cb_ctx, &peer.gid, &rp);
			if (ret == -EINPROGRESS) {
				c->path_pending = true;
				send_mra(cm, c);
				return 0;
			}
			if (ret < 0) {
				c->state = CM_STATE_MRA_SENT; /* a REJ of the REQ */
				close_conn(cm, c, CM_CLOSE_PATH, CM_REJ_INVALID_GID);
				return 0;
			}
			apply_return_path(cm, c, &rp);
		}
	}
	req_continue(cm, c);
	return 0;
}

/* ---- active side ---- */

static int handle_rep(struct cm *cm, const struct cm_msg *m, const struct cm_addr *from)
{
	const struct cm_rep *r = &m->rep;
	struct cm_conn *c = find_lcid(cm, r->remote_comm_id);
	struct cm_ipoib_pdata pd;
	enum cm_pdata_err pe;
	struct cm_msg rtu = { .attr_id = CM_ATTR_RTU, .method = IB_MAD_METHOD_SEND };

	if (!c)
		return -ENOENT;
	if (c->state == CM_STATE_ESTABLISHED && c->active && c->rcid == r->local_comm_id) {
		cm->stats.rx_dup_rep++; /* our RTU was lost */
		resend_last(cm, c);
		return 0;
	}
	if (c->state == CM_STATE_TIMEWAIT || c->state == CM_STATE_DREQ_SENT) {
		cm->stats.rx_stale++;
		send_rej(cm, NULL, from, m->tid, c->lcid, r->local_comm_id, CM_MSG_REF_REP,
			 CM_REJ_STALE_CONN);
		return 0;
	}
	if (c->state != CM_STATE_REQ_SENT || !c->active) {
		cm->stats.rx_wrong_state++;
		return 0;
	}
	pe = cm_ipoib_pdata_decode(r->private_data, &pd);
	if (pe == CM_PDATA_OK && pd.ud_qpn != c->peer.qpn)
		pe = CM_PDATA_ERR_QPN; /* the REP is not from the UD QP we asked for */
	c->rcid = r->local_comm_id;
	if (pe != CM_PDATA_OK) {
		cm->stats.rx_bad_pdata[pe]++;
		close_conn(cm, c, CM_CLOSE_ERROR, CM_REJ_CONSUMER);
		return 0;
	}
	rcid_link(cm, c, r->local_comm_id);
	c->rqpn = r->local_qpn;
	c->rpsn = r->starting_psn;
	c->rnr_retry = r->rnr_retry_count;
	c->peer_rx_mtu = pd.rx_mtu;
	c->mtu = cm_ipoib_conn_mtu(cm->cfg.rx_mtu, pd.rx_mtu);
	if (program_qp(cm, c) < 0) {
		close_conn(cm, c, CM_CLOSE_ERROR, CM_REJ_CONSUMER);
		return 0;
	}
	rtu.tid = c->tid;
	rtu.rtu.local_comm_id = c->lcid;
	rtu.rtu.remote_comm_id = c->rcid;
	send_msg(cm, c, &c->to, &rtu);
	go_up(cm, c);
	return 0;
}

int cm_connect(struct cm *cm, const struct ipoib_hwaddr *peer, const struct cm_path_info *path)
{
	struct cm_msg m = { .attr_id = CM_ATTR_REQ, .method = IB_MAD_METHOD_SEND };
	struct cm_req *r = &m.req;
	struct cm_conn_info info;
	struct cm_conn *c;
	int ret;

	if (!peer || !path || !ib_mtu_bytes(path->mtu) || peer->qpn <= 1 || peer->qpn > 0xffffff)
		return -EINVAL;
	if (!(peer->flags & IPOIB_HWADDR_F_RC))
		return -EOPNOTSUPP;
	if (find_peer(cm, &peer->gid, peer->qpn))
		return -EALREADY;
	if (cm->live_conns >= cm->cfg.max_conns)
		return -ENOSPC;
	c = conn_new(cm, true);
	if (!c)
		return -ENOMEM;
	c->peer = *peer;
	c->to = (struct cm_addr){
		.lid = path->dlid,
		.sl = path->sl,
		.pkey_index = cm->cfg.pkey_index,
		.has_grh = path->has_grh,
		.gid = path->dgid,
		.flow_label = path->flow_label,
		.hop_limit = path->hop_limit,
		.traffic_class = path->traffic_class,
	};
	c->ah = (struct ibp_ah_attr){
		.dlid = path->dlid,
		.sl = path->sl,
		.static_rate = path->packet_rate,
		.is_global = path->has_grh,
		.dgid = path->dgid,
		.flow_label = path->flow_label,
		.hop_limit = path->hop_limit,
		.traffic_class = path->traffic_class,
	};
	c->path_mtu = path->mtu;
	c->ack_timeout = (uint8_t)(path->packet_lifetime < 31 ? path->packet_lifetime + 1 : 31);
	c->rc_retry = cm->cfg.retry_count & 7;
	c->pl2_ms = 2 * cm_timeout_ms(path->packet_lifetime);
	fill_info(cm, c, &info);
	ret = cm->cfg.cb->qp_create(cm->cfg.cb_ctx, &info, &c->qp, &c->lqpn);
	if (ret < 0 || c->lqpn > 0xffffff) {
		if (ret >= 0 && cm->cfg.cb->qp_destroy)
			cm->cfg.cb->qp_destroy(cm->cfg.cb_ctx, c->qp);
		conn_free(cm, c);
		return ret < 0 && ret != -EINPROGRESS ? ret : -EINVAL;
	}
	c->have_qp = true;
	peer_link(cm, c);

	c->tid = m.tid = new_tid(cm);
	r->local_comm_id = c->lcid;
	r->service_id = cm_ipoib_service_id(peer->qpn);
	r->local_ca_guid = cm->cfg.ca_guid;
	r->local_qpn = c->lqpn;
	r->remote_cm_response_timeout = cm->cfg.response_timeout;
	r->transport_service_type = CM_TST_RC;
	r->starting_psn = c->lpsn;
	r->local_cm_response_timeout = cm->cfg.response_timeout;
	r->retry_count = cm->cfg.retry_count & 7;
	r->pkey = path->pkey;
	r->path_mtu = (uint8_t)path->mtu;
	r->rnr_retry_count = cm->cfg.rnr_retry & 7;
	r->max_cm_retries = cm->cfg.max_cm_retries;
	r->srq = true;
	r->primary = (struct cm_path){
		.local_lid = path->slid,
		.remote_lid = path->dlid,
		.local_gid = path->sgid,
		.remote_gid = path->dgid,
		.flow_label = path->flow_label & 0xfffff,
		.packet_rate = path->packet_rate & 0x3f,
		.traffic_class = path->traffic_class,
		.hop_limit = path->hop_limit,
		.sl = path->sl & 0xf,
		.subnet_local = !path->has_grh,
		.local_ack_timeout = c->ack_timeout,
	};
	pdata_ours(cm, r->private_data);
	send_msg(cm, c, &c->to, &m);
	c->state = CM_STATE_REQ_SENT;
	set_wait(cm, c, cm_timeout_ms(cm->cfg.response_timeout) + c->pl2_ms,
		 cm->cfg.max_cm_retries);
	rearm(cm);
	return 0;
}

/* ---- both sides ---- */

static int handle_rtu(struct cm *cm, const struct cm_msg *m)
{
	struct cm_conn *c = find_lcid(cm, m->rtu.remote_comm_id);

	if (!c)
		return -ENOENT;
	if (c->state == CM_STATE_REP_SENT && c->rcid == m->rtu.local_comm_id)
		go_up(cm, c);
	else
		cm->stats.rx_wrong_state++;
	return 0;
}

static int handle_mra(struct cm *cm, const struct cm_msg *m)
{
	struct cm_conn *c = find_lcid(cm, m->mra.remote_comm_id);

	if (!c)
		return -ENOENT;
	if ((c->state == CM_STATE_REQ_SENT && m->mra.message_mraed == CM_MSG_REF_REQ) ||
	    (c->state == CM_STATE_REP_SENT && m->mra.message_mraed == CM_MSG_REF_REP)) {
		c->mra_rcvd++;
		c->deadline = now(cm) + cm_timeout_ms(m->mra.service_timeout) + c->pl2_ms;
	} else {
		cm->stats.rx_wrong_state++;
	}
	return 0;
}

static int handle_rej(struct cm *cm, const struct cm_msg *m)
{
	const struct cm_rej *r = &m->rej;
	struct cm_conn *c = find_lcid(cm, r->remote_comm_id);

	if (!c)
		return -ENOENT;
	cm->stats.rej_rcvd[r->reason < 32 ? r->reason : 0]++;
	if (c->state == CM_STATE_DREQ_SENT || c->state == CM_STATE_TIMEWAIT ||
	    (c->in_rcid && r->local_comm_id != 0 && r->local_comm_id != c->rcid)) {
		cm->stats.rx_wrong_state++;
		return 0;
	}
	c->rej_reason = r->reason;
	finish(cm, c, CM_CLOSE_REJECTED);
	enter_timewait(cm, c);
	return 0;
}

static void send_drep(struct cm *cm, struct cm_conn *c, const struct cm_addr *to, uint64_t tid,
		      uint32_t lcid, uint32_t rcid)
{
	struct cm_msg m = { .attr_id = CM_ATTR_DREP, .tid = tid, .method = IB_MAD_METHOD_SEND };

	m.drep.local_comm_id = lcid;
	m.drep.remote_comm_id = rcid;
	send_msg(cm, c, to, &m);
}

static int handle_dreq(struct cm *cm, const struct cm_msg *m)
{
	const struct cm_dreq *d = &m->dreq;
	struct cm_conn *c = find_lcid(cm, d->remote_comm_id);

	if (!c)
		return -ENOENT;
	if (d->remote_qpn != c->lqpn || (c->in_rcid && d->local_comm_id != c->rcid)) {
		cm->stats.rx_wrong_state++;
		return 0;
	}
	switch (c->state) {
	case CM_STATE_ESTABLISHED:
	case CM_STATE_REP_SENT:
		finish(cm, c, CM_CLOSE_PEER);
		/* fall through */
	case CM_STATE_DREQ_SENT: /* DREQs crossed */
		send_drep(cm, c, &c->to, m->tid, c->lcid, c->rcid);
		enter_timewait(cm, c);
		break;
	case CM_STATE_TIMEWAIT:
		cm->stats.rx_dup_dreq++;
		send_drep(cm, NULL, &c->to, m->tid, c->lcid, c->rcid);
		break;
	default:
		cm->stats.rx_wrong_state++;
		break;
	}
	return 0;
}

static int handle_drep(struct cm *cm, const struct cm_msg *m)
{
	struct cm_conn *c = find_lcid(cm, m->drep.remote_comm_id);

	if (!c)
		return -ENOENT;
	if (c->state == CM_STATE_DREQ_SENT)
		enter_timewait(cm, c);
	else
		cm->stats.rx_wrong_state++;
	return 0;
}

static void rearm(struct cm *cm)
{
	uint64_t next, t;

	if (!cm->timer)
		return;
	next = cm_next_deadline(cm);
	if (!next) {
		evtimer_stop(cm->timer);
		return;
	}
	t = now(cm);
	evtimer_start(cm->timer, next > t ? next - t : 0, 0);
}

int cm_input(struct cm *cm, const uint8_t *mad, size_t len, const struct cm_addr *from)
{
	struct cm_msg m;
	enum cm_mad_err e = cm_mad_decode(mad, len, &m);
	int ret;

	cm->stats.rx_mads++;
	if (e != CM_MAD_OK) {
		cm->stats.rx_bad[e]++;
		return -EBADMSG;
	}
	switch (m.attr_id) {
	case CM_ATTR_REQ:
		ret = handle_req(cm, &m, from);
		break;
	case CM_ATTR_REP:
		ret = handle_rep(cm, &m, from);
		break;
	case CM_ATTR_RTU:
		ret = handle_rtu(cm, &m);
		break;
	case CM_ATTR_MRA:
		ret = handle_mra(cm, &m);
		break;
	case CM_ATTR_REJ:
		ret = handle_rej(cm, &m);
		break;
	case CM_ATTR_DREQ:
		ret = handle_dreq(cm, &m);
		break;
	case CM_ATTR_DREP:
		ret = handle_drep(cm, &m);
		break;
	default: /* ClassPortInfo: the port's, not a link's (cm_input_orphan) */
		ret = -ENOENT;
		break;
	}
	if (ret == -ENOENT)
		cm->stats.rx_unclaimed++;
	else
		cm->stats.rx_by_attr[attr_index(m.attr_id)]++;
	rearm(cm);
	return ret;
}

void cm_input_orphan(struct cm *cm, const uint8_t *mad, size_t len, const struct cm_addr *from)
{
	struct cm_msg m, a = { .method = IB_MAD_METHOD_SEND };
	struct cm_addr to = *from;

	if (cm_mad_decode(mad, len, &m) != CM_MAD_OK)
		return;
	to.pkey_index = cm->cfg.pkey_index;
	switch (m.attr_id) {
	case CM_ATTR_REQ:
		send_rej(cm, NULL, &to, m.tid, 0, m.req.local_comm_id, CM_MSG_REF_REQ,
			 CM_REJ_INVALID_SERVICE_ID);
		break;
	case CM_ATTR_REP:
		cm->stats.rx_stale++;
		send_rej(cm, NULL, &to, m.tid, 0, m.rep.local_comm_id, CM_MSG_REF_REP,
			 CM_REJ_INVALID_COMM_ID);
		break;
	case CM_ATTR_DREQ:
		send_drep(cm, NULL, &to, m.tid, 0, m.dreq.local_comm_id);
		break;
	case CM_ATTR_CLASS_PORT_INFO:
		if (m.response)
			break;
		a.attr_id = CM_ATTR_CLASS_PORT_INFO;
		a.tid = m.tid;
		a.method = IB_MAD_METHOD_GET;
		a.response = true;
		a.cpi.base_version = IB_MAD_BASE_VERSION;
		a.cpi.class_version = CM_CLASS_VERSION;
		a.cpi.resp_time_value = cm->cfg.response_timeout;
		send_msg(cm, NULL, &to, &a);
		break;
	default:
		break;
	}
}

int cm_accept_ready(struct cm *cm, uint32_t local_comm_id, void *qp, uint32_t qpn)
{
	struct cm_conn *c = find_lcid(cm, local_comm_id);

	if (!c || c->state != CM_STATE_MRA_SENT)
		return -ENOENT;
	if (qpn <= 1 || qpn > 0xffffff)
		return -EINVAL;
	c->qp = qp;
	c->lqpn = qpn;
	c->have_qp = true;
	c->qp_pending = false;
	accept_req(cm, c);
	rearm(cm);
	return 0;
}

unsigned cm_return_path(struct cm *cm, const union ib_gid *gid, const struct cm_path_info *path)
{
	struct cm_conn *c, *next;
	unsigned n = 0;

	for (c = cm->all; c; c = next) {
		next = c->all_next; /* a REJ may free nothing now, but stay safe */
		if (!c->path_pending || memcmp(c->peer.gid.raw, gid->raw, IB_GID_LEN) != 0)
			continue;
		c->path_pending = false;
		n++;
		if (!path) {
			close_conn(cm, c, CM_CLOSE_PATH, CM_REJ_INVALID_GID);
			continue;
		}
		apply_return_path(cm, c, path);
		req_continue(cm, c);
	}
	if (n)
		rearm(cm);
	return n;
}

int cm_accept_fail(struct cm *cm, uint32_t local_comm_id)
{
	struct cm_conn *c = find_lcid(cm, local_comm_id);

	if (!c || c->state != CM_STATE_MRA_SENT)
		return -ENOENT;
	close_conn(cm, c, CM_CLOSE_ERROR, CM_REJ_NO_QP);
	rearm(cm);
	return 0;
}

static int disconnect(struct cm *cm, const struct ipoib_hwaddr *peer, enum cm_close_reason why)
{
	struct cm_conn *c = find_peer(cm, &peer->gid, peer->qpn);

	if (!c)
		return -ENOENT;
	close_conn(cm, c, why, CM_REJ_CONSUMER);
	rearm(cm);
	return 0;
}

int cm_disconnect(struct cm *cm, const struct ipoib_hwaddr *peer)
{
	return disconnect(cm, peer, CM_CLOSE_LOCAL);
}

int cm_disconnect_error(struct cm *cm, const struct ipoib_hwaddr *peer)
{
	return disconnect(cm, peer, CM_CLOSE_ERROR);
}

int cm_neigh_expired(struct cm *cm, const struct ipoib_hwaddr *peer)
{
	return disconnect(cm, peer, CM_CLOSE_NEIGH);
}

unsigned cm_disconnect_dlid(struct cm *cm, uint16_t dlid)
{
	unsigned n = 0;

	for (struct cm_conn *c = cm->all; c; c = c->all_next) {
		if (c->ah.dlid != dlid || c->state == CM_STATE_DREQ_SENT ||
		    c->state == CM_STATE_TIMEWAIT)
			continue;
		close_conn(cm, c, CM_CLOSE_PATH, CM_REJ_CONSUMER);
		n++;
	}
	if (n)
		rearm(cm);
	return n;
}

int cm_activity(struct cm *cm, const struct ipoib_hwaddr *peer)
{
	struct cm_conn *c = find_peer(cm, &peer->gid, peer->qpn);

	if (!c)
		return -ENOENT;
	if (c->state == CM_STATE_REP_SENT)
		go_up(cm, c);
	c->last_activity = now(cm);
	rearm(cm);
	return 0;
}

int cm_lookup(struct cm *cm, const struct ipoib_hwaddr *peer, struct cm_conn_info *out)
{
	struct cm_conn *c = find_peer(cm, &peer->gid, peer->qpn);

	if (!c)
		return -ENOENT;
	fill_info(cm, c, out);
	return 0;
}

unsigned cm_for_each(struct cm *cm, void (*fn)(const struct cm_conn_info *, void *), void *arg)
{
	struct cm_conn_info info;
	unsigned n = 0;

	for (struct cm_conn *c = cm->all; c; c = c->all_next, n++) {
		if (!fn)
			continue;
		fill_info(cm, c, &info);
		fn(&info, arg);
	}
	return n;
}

/* ---- timers ---- */

static uint64_t idle_deadline(const struct cm *cm, const struct cm_conn *c)
{
	if (c->state != CM_STATE_ESTABLISHED || !cm->cfg.idle_timeout_ms)
		return 0;
	return c->last_activity + cm->cfg.idle_timeout_ms;
}

static void expire(struct cm *cm, struct cm_conn *c)
{
	switch (c->state) {
	case CM_STATE_REQ_SENT:
	case CM_STATE_REP_SENT:
	case CM_STATE_DREQ_SENT:
		if (c->retries_left > 0) {
			c->retries_left--;
			c->retries++;
			cm->stats.retransmits++;
			resend_last(cm, c);
			c->deadline = now(cm) + c->wait_ms;
			return;
		}
		cm->stats.timeouts++;
		if (c->state == CM_STATE_DREQ_SENT) {
			enter_timewait(cm, c);
			return;
		}
		/* IBA 12.9.6: the side that gives up says so with REJ "timeout". */
		close_conn(cm, c, CM_CLOSE_TIMEOUT, CM_REJ_TIMEOUT);
		return;
	case CM_STATE_MRA_SENT: /* the application never answered */
		cm->stats.timeouts++;
		close_conn(cm, c, CM_CLOSE_TIMEOUT, CM_REJ_NO_QP);
		return;
	case CM_STATE_TIMEWAIT:
		conn_free(cm, c);
		return;
	default:
		c->deadline = 0;
		return;
	}
}

void cm_tick(struct cm *cm)
{
	uint64_t t = now(cm);
	struct cm_conn *c, *next;

	for (c = cm->all; c; c = next) {
		uint64_t idle = idle_deadline(cm, c);

		next = c->all_next;
		if (idle && idle <= t)
			close_conn(cm, c, CM_CLOSE_IDLE, 0);
		else if (c->deadline && c->deadline <= t)
			expire(cm, c);
	}
	rearm(cm);
}

uint64_t cm_next_deadline(const struct cm *cm)
{
	uint64_t next = 0;

	for (const struct cm_conn *c = cm->all; c; c = c->all_next) {
		uint64_t d = c->deadline, idle = idle_deadline(cm, c);

		if (idle && (!d || idle < d))
			d = idle;
		if (d && (!next || d < next))
			next = d;
	}
	return next;
}

static void timer_cb(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	cm_tick(arg);
}

const struct cm_stats *cm_get_stats(const struct cm *cm)
{
	return &cm->stats;
}

/* ---- create / free ---- */

int cm_new(const struct cm_config *cfg, struct cm **out)
{
	struct cm *cm;
	unsigned buckets = 64;
	uint64_t seed = cfg->seed;

	if (!cfg->transport || !cfg->transport->send || !cfg->cb || !cfg->cb->qp_create ||
	    !cfg->cb->qp_connect || cfg->local.qpn <= 1 || cfg->local.qpn > 0xffffff ||
	    cfg->max_cm_retries > 15 || cfg->response_timeout > 31 || cfg->mra_service_timeout > 31)
		return -EINVAL;
	cm = calloc(1, sizeof(*cm));
	if (!cm)
		return -ENOMEM;
	cm->cfg = *cfg;
	if (!cm->cfg.rx_mtu)
		cm->cfg.rx_mtu = RX_MTU_DEFAULT;
	if (!cm->cfg.response_timeout)
		cm->cfg.response_timeout = RESP_TIMEOUT_DEFAULT;
	if (!cm->cfg.max_cm_retries)
		cm->cfg.max_cm_retries = MAX_RETRIES_DEFAULT;
	if (!cm->cfg.mra_service_timeout)
		cm->cfg.mra_service_timeout = MRA_TIMEOUT_DEFAULT;
	if (!cm->cfg.max_conns)
		cm->cfg.max_conns = MAX_CONNS_DEFAULT;
	while (buckets < cm->cfg.max_conns && buckets < (1u << 20))
		buckets <<= 1;
	cm->mask = buckets - 1;
	cm->peer_tab = calloc(buckets, sizeof(*cm->peer_tab));
	cm->lcid_tab = calloc(buckets, sizeof(*cm->lcid_tab));
	cm->rcid_tab = calloc(buckets, sizeof(*cm->rcid_tab));
	if (!seed && getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = evloop_now_ns();
	cm->rng = seed | 1;
	cm->next_lcid = rnd32(cm);
	cm->tid_hi = rnd32(cm);
	cm->tid_lo = rnd32(cm);
	if (cfg->loop)
		cm->timer = evtimer_new(cfg->loop, timer_cb, cm);
	if (!cm->peer_tab || !cm->lcid_tab || !cm->rcid_tab || (cfg->loop && !cm->timer)) {
		cm_free(cm);
		return -ENOMEM;
	}
	*out = cm;
	return 0;
}

void cm_free(struct cm *cm)
{
	if (!cm)
		return;
	while (cm->all) {
		struct cm_conn *c = cm->all;

		close_conn(cm, c, CM_CLOSE_LOCAL, CM_REJ_CONSUMER);
		conn_free(cm, c);
	}
	if (cm->timer)
		evtimer_free(cm->timer);
	free(cm->peer_tab);
	free(cm->lcid_tab);
	free(cm->rcid_tab);
	free(cm);
}
