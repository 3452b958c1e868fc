/*
 * Connected mode (RFC 4755; docs/connected-mode.md): one cm (cm/cm.h) per link, an SRQ
 * for the RC receives, one struct ipoib_conn per RC connection (the cm's callbacks
 * create, connect and destroy its QP; up/down publish it into the neighbour entries of
 * its peer), and the port's CM MAD transport (struct ipoib_cm_port: a libibumad agent,
 * cm/cm_umad.h) shared by the port's connected links: each CM MAD is offered to the
 * links of its P_Key index. The tick
 * passes on what the data path reported (activity, failed RC sends, RC peers without a
 * connection) and the peers of neighbour entries that left.
 *
 * Threads: control thread. The workers only mark a connection's atomics (datapath.c)
 * and find it through its QP's user pointer.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cm/cm_umad.h"
#include "ipoib/ipoib_pvt.h"
#include "lib/evloop.h"
#include "lib/ib_types.h"
#include "lib/log.h"

#define CONN_RETRY_MS 1000 /* after a failed attempt, before the next */
#define CONN_IDLE_MS  300000

static bool same_peer(const struct ipoib_hwaddr *a, const struct ipoib_hwaddr *b)
{
	return a->qpn == b->qpn && ib_gid_equal(&a->gid, &b->gid);
}

bool ipoib_ll_peer(const struct neigh_link *ll, struct ipoib_hwaddr *out)
{
	return ll && ll->len == IPOIB_HWADDR_LEN &&
	       ipoib_hwaddr_decode(ll->addr, IPOIB_HWADDR_LEN, out) == 0;
}

/* The connection to peer (flags ignored): the up one, else one being set up; NULL. */
struct ipoib_conn *ipoib_conn_find(const struct ipoib_link *l, const struct ipoib_hwaddr *peer)
{
	struct ipoib_conn *pending = NULL;

	for (struct ipoib_conn *c = l->conns; c; c = c->next) {
		if (c->dead || !same_peer(&c->peer, peer))
			continue;
		if (c->up)
			return c;
		pending = c;
	}
	return pending;
}

static void conn_drop_queue(struct ipoib_link *l, struct ipoib_conn *c)
{
	for (unsigned i = 0; i < c->qn; i++)
		ipoib_drop_buf(l, c->q[i], IPOIB_DROP_TX_CONN);
	c->qn = 0;
}

struct publish_arg {
	struct ipoib_link *l;
	struct ipoib_conn *c;
	bool on;
};

static void publish_one(void *arg, struct neigh_table *t, struct neigh_entry *e)
{
	struct publish_arg *pa = arg;
	const struct neigh_link *cur = neigh_entry_link(e);
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct ipoib_path *p;

	if (!ipoib_ll_peer(cur, &hw) || !same_peer(&hw, &pa->c->peer))
		return;
	ll = *cur;
	if (pa->on) {
		if (cur->conn == pa->c && cur->mtu == pa->c->mtu)
			return;
		ll.conn = pa->c;
	} else {
		if (cur->conn != pa->c)
			return;
		ll.conn = NULL;
	}
	p = ipoib_path_find(pa->l, &hw.gid);
	if (p)
		ipoib_bind_to_path(pa->l, &ll, p);
	else
		ll.mtu = ll.conn ? pa->c->mtu : pa->l->mtu;
	neigh_set_link(t, e, &ll);
}

/* Publish the connection into (or take it out of) every neighbour entry of its peer. */
static void conn_publish(struct ipoib_link *l, struct ipoib_conn *c, bool on)
{
	struct publish_arg pa = { .l = l, .c = c, .on = on };

	neigh_foreach_entry(l->neigh, publish_one, &pa);
}

/* The CM's view of a resolved path to p's GID. */
static void path_info(const struct ipoib_link *l, const struct ipoib_path *p,
		      struct cm_path_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->slid = l->pa.lid;
	pi->dlid = p->sp.dlid;
	pi->sgid = l->gid;
	pi->dgid = p->gid;
	pi->has_grh = ib_gid_prefix(&p->gid) != ib_gid_prefix(&l->gid) || p->sp.hop_limit > 1;
	pi->flow_label = p->sp.flow_label;
	pi->hop_limit = p->sp.hop_limit;
	pi->traffic_class = p->sp.tclass;
	pi->sl = p->sp.sl;
	pi->packet_rate = p->sp.rate;
	pi->packet_lifetime = p->sp.packet_life;
	pi->mtu = (enum ib_mtu)p->sp.mtu;
	pi->pkey = l->pkey;
}

void ipoib_conn_request(struct ipoib_link *l, const struct ipoib_hwaddr *peer, struct ipoib_path *p)
{
	struct cm_path_info pi;
	char hs[IPOIB_HWADDR_STRLEN];
	int r;

	if (!l->cm || !l->up || !(peer->flags & IPOIB_HWADDR_F_RC) || !p ||
	    p->state != PATH_VALID || ipoib_conn_find(l, peer))
		return;
	if (p->conn_failed_at && evloop_now_ms() - p->conn_failed_at < CONN_RETRY_MS)
		return;
	path_info(l, p, &pi);
	l->st.conn_requests++;
	ipoib_hwaddr_format(peer, hs, sizeof(hs));
	log_info("%s: connecting to %s (DLID %u)", l->name, hs, pi.dlid);
	r = cm_connect(l->cm, peer, &pi);
	if (r < 0 && r != -EALREADY) {
		p->conn_failed_at = evloop_now_ms();
		log_info("%s: cannot connect to %s: %s", l->name, hs, strerror(-r));
	}
}

/* A REQ from another subnet: our path back to its sender (path.c resolves it and
 * calls ipoib_conn_path_known when it was not known yet). */
static int cb_return_path(void *ctx, const union ib_gid *gid, struct cm_path_info *out)
{
	struct ipoib_link *l = ctx;
	struct ipoib_path *p = ipoib_path_get(l, gid);

	if (!p)
		return -ENOMEM;
	if (p->state == PATH_FAILED && evloop_now_ms() - p->failed_at >= PATH_RETRY_MS)
		ipoib_path_query(p); /* may answer at once, from the SA client's cache */
	if (p->state == PATH_VALID) {
		path_info(l, p, out);
		return 0;
	}
	return p->state == PATH_FAILED ? -EHOSTUNREACH : -EINPROGRESS;
}

void ipoib_conn_path_known(struct ipoib_link *l, const struct ipoib_path *p)
{
	struct cm_path_info pi;

	if (!l->cm)
		return;
	if (p->state == PATH_VALID) {
		path_info(l, p, &pi);
		cm_return_path(l->cm, &p->gid, &pi);
	} else if (p->state == PATH_FAILED) {
		cm_return_path(l->cm, &p->gid, NULL);
	}
}

static int cb_qp_create(void *ctx, const struct cm_conn_info *ci, void **qp, uint32_t *qpn)
{
	struct ipoib_link *l = ctx;
	struct ipoib_conn *c = calloc(1, sizeof(*c));
	/* Connections take the queues in turn: each peer's traffic on one worker, the
	 * peers spread over all (a connection's packets stay in order). */
	unsigned queue = l->next_queue++ % l->nq;
	struct ibp_qp_init qi = {
		.type = IBP_QPT_RC,
		.pkey_index = l->pkey_index,
		.send_depth = l->cfg.send_depth,
		.srq = l->srq[queue],
		.queue = queue,
	};
	int r;

	if (!c)
		return -ENOMEM;
	qi.user = c;
	c->queue = queue;
	c->magic = CONN_MAGIC;
	c->l = l;
	c->peer = ci->peer;
	c->created = evloop_now_ms();
	r = l->ops->create_qp(l->cfg.port, &qi, &c->qp);
	if (r < 0) {
		log_errno(LOG_WARNING, -r, "%s: cannot create an RC QP", l->name);
		free(c);
		return r;
	}
	c->qpn = l->ops->qp_num(c->qp);
	c->next = l->conns;
	l->conns = c;
	*qp = c;
	*qpn = c->qpn;
	return 0;
}

static int cb_qp_connect(void *ctx, void *qp, const struct ibp_qp_connect *pc)
{
	struct ipoib_conn *c = qp;

	(void)ctx;
	c->remote_qpn = pc->remote_qpn;
	c->dlid = pc->path.dlid;
	return c->l->ops->qp_ready(c->qp, pc);
}

static void conn_free_fn(void *arg)
{
	struct ipoib_conn *c = arg;

	c->magic = 0;
	free(c);
}

static void cb_qp_destroy(void *ctx, void *qp)
{
	struct ipoib_link *l = ctx;
	struct ipoib_conn *c = qp, **pp;

	for (pp = &l->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	conn_drop_queue(l, c);
	l->ops->destroy_qp(c->qp);
	/* A receive the QP had taken from the SRQ went back to the pool with it. */
	atomic_fetch_add_explicit(&l->srq_owed[c->queue], 1, memory_order_relaxed);
	if (l->cfg.defer)
		l->cfg.defer(l->cfg.defer_ctx, conn_free_fn, c);
	else
		conn_free_fn(c);
}

static void cb_up(void *ctx, const struct cm_conn_info *ci, void *qp)
{
	struct ipoib_link *l = ctx;
	struct ipoib_conn *c = qp;
	char hs[IPOIB_HWADDR_STRLEN];

	c->up = true;
	c->mtu = ci->mtu;
	c->remote_qpn = ci->remote_qpn;
	c->dlid = ci->dlid;
	l->st.conn_up++;
	ipoib_hwaddr_format(&c->peer, hs, sizeof(hs));
	log_info("%s: connection to %s up (%s): qpn 0x%x <-> 0x%x mtu %u", l->name, hs,
		 ci->active ? "active" : "passive", c->qpn, c->remote_qpn, c->mtu);
	conn_publish(l, c, true);
	for (unsigned i = 0; i < c->qn; i++) {
		if (c->q[i]->len - IPOIB_ENCAP_LEN > c->mtu)
			ipoib_drop_buf(l, c->q[i], IPOIB_DROP_TX_TOO_BIG);
		else
			ipoib_post_rc(l, c, c->q[i]);
	}
	c->qn = 0;
}

static void cb_down(void *ctx, const struct cm_conn_info *ci, void *qp, bool was_up,
		    enum cm_close_reason why)
{
	struct ipoib_link *l = ctx;
	struct ipoib_conn *c = qp;
	char hs[IPOIB_HWADDR_STRLEN];

	(void)ci;
	c->up = false;
	c->dead = true;
	ipoib_hwaddr_format(&c->peer, hs, sizeof(hs));
	if (was_up) {
		l->st.conn_down++;
		conn_publish(l, c, false);
	} else {
		struct ipoib_path *p = ipoib_path_find(l, &c->peer.gid);

		l->st.conn_failed++;
		if (p && why != CM_CLOSE_CROSSED && why != CM_CLOSE_REPLACED)
			p->conn_failed_at = evloop_now_ms();
	}
	log_info("%s: connection to %s %s: %s", l->name, hs, was_up ? "down" : "not set up",
		 cm_close_reason_name(why));
	conn_drop_queue(l, c);
}

static const struct cm_callbacks link_cm_cb = {
	.qp_create = cb_qp_create,
	.return_path = cb_return_path,
	.qp_connect = cb_qp_connect,
	.qp_destroy = cb_qp_destroy,
	.up = cb_up,
	.down = cb_down,
};

/* ---- the port's CM MAD transport (libibumad) ---------------------------------------- */

static void cmp_deliver(void *arg, const uint8_t *mad, size_t len, const struct cm_addr *from);

int ipoib_cm_port_open_umad(const char *ca_name, int port, struct evloop *loop,
			    struct ipoib_cm_port **out, char *why, size_t why_len)
{
	struct ipoib_cm_port *cp = calloc(1, sizeof(*cp));
	struct cm_umad_config uc = {
		.ca_name = ca_name,
		.port = port,
		.loop = loop,
		.deliver = cmp_deliver,
		.arg = cp,
	};
	int r;

	if (!cp)
		return -ENOMEM;
	cp->next_tag = 1;
	r = cm_umad_open(&uc, &cp->umad, why, why_len);
	if (r < 0) {
		free(cp);
		return r;
	}
	*out = cp;
	return 0;
}

void ipoib_cm_port_close(struct ipoib_cm_port *cp)
{
	if (!cp)
		return;
	if (cp->umad)
		cm_umad_close(cp->umad);
	free(cp);
}

const struct cm_umad *ipoib_cm_port_umad(const struct ipoib_cm_port *cp)
{
	return cp ? cp->umad : NULL;
}

static void cmp_deliver(void *arg, const uint8_t *mad, size_t len, const struct cm_addr *from)
{
	struct ipoib_cm_port *cp = arg;
	struct cm *orphan = NULL;

	/* The links of the partition the MAD came on, each claiming its own. */
	for (unsigned i = 0; i < cp->n_links; i++) {
		struct ipoib_link *l = cp->links[i];

		if (!l->cm || l->pkey_index != from->pkey_index)
			continue;
		if (!orphan)
			orphan = l->cm;
		if (cm_input(l->cm, mad, len, from) != -ENOENT)
			return;
	}
	for (unsigned i = 0; i < cp->n_links && !orphan; i++)
		orphan = cp->links[i]->cm;
	cp->orphans++;
	if (orphan)
		cm_input_orphan(orphan, mad, len, from);
}

int ipoib_cmp_add(struct ipoib_cm_port *cp, struct ipoib_link *l)
{
	if (cp->n_links == CM_PORT_LINKS)
		return -ENOSPC;
	cp->links[cp->n_links++] = l;
	l->cm_tag = cp->next_tag++;
	return 0;
}

void ipoib_cmp_del(struct ipoib_cm_port *cp, struct ipoib_link *l)
{
	for (unsigned i = 0; i < cp->n_links; i++)
		if (cp->links[i] == l) {
			cp->links[i] = cp->links[--cp->n_links];
			return;
		}
}

/* ---- the link's cm: start, stop, tick ----------------------------------------------- */

/* SRQ and cm, once the UD QP (our QPN) exists. */
int ipoib_cm_start(struct ipoib_link *l)
{
	struct cm_config cc;
	struct ibp_buf *b;
	int r;

	b = l->ops->buf_get(l->cfg.port);
	if (!b)
		return -ENOBUFS;
	l->rx_mtu = b->cap < CM_IPOIB_MTU_MAX + IPOIB_ENCAP_LEN
			? b->cap
			: CM_IPOIB_MTU_MAX + IPOIB_ENCAP_LEN;
	l->ops->buf_put(l->cfg.port, b);
	if (l->rx_mtu < l->mtu + IPOIB_ENCAP_LEN)
		l->rx_mtu = l->mtu + IPOIB_ENCAP_LEN;
	for (unsigned q = 0; q < l->nq; q++) {
		r = l->ops->create_srq(l->cfg.port, q, l->cfg.recv_depth, &l->srq[q]);
		if (r < 0) {
			log_errno(LOG_ERR, -r, "%s: cannot create the SRQ of queue %u", l->name, q);
			return r;
		}
		for (unsigned i = 0; i < l->cfg.recv_depth; i++) {
			b = l->ops->buf_get(l->cfg.port);
			if (!b)
				break;
			if (l->ops->post_srq_recv(l->srq[q], &b, 1) != 1) {
				l->ops->buf_put(l->cfg.port, b);
				break;
			}
		}
	}
	memset(&cc, 0, sizeof(cc));
	cc.local = l->hw;
	cc.lid = l->pa.lid;
	cc.ca_guid = l->pa.port_guid;
	cc.pkey = l->pkey;
	cc.pkey_index = l->pkey_index;
	cc.rx_mtu = l->rx_mtu;
	cc.max_cm_retries = l->cfg.cm_max_retries;
	cc.retry_count = l->cfg.conn_retry_count ? l->cfg.conn_retry_count : 3;
	cc.rnr_retry = l->cfg.conn_rnr_retry ? l->cfg.conn_rnr_retry : 7;
	cc.min_rnr_timer = 12; /* 0.64 ms */
	cc.idle_timeout_ms = l->cfg.conn_idle_ms == UINT32_MAX ? 0
			     : l->cfg.conn_idle_ms             ? l->cfg.conn_idle_ms
							       : CONN_IDLE_MS;
	cc.comm_id_tag = l->cm_tag;
	cc.transport = &cm_umad_transport;
	cc.transport_ctx = l->cmp->umad;
	cc.cb = &link_cm_cb;
	cc.cb_ctx = l;
	cc.loop = l->cfg.loop;
	r = cm_new(&cc, &l->cm);
	if (r < 0) {
		log_errno(LOG_ERR, -r, "%s: cannot start the connection manager", l->name);
		return r;
	}
	log_info("%s: connected mode: receive MTU %u (IP MTU %u), service ID 0x%016llx", l->name,
		 l->rx_mtu, l->rx_mtu - IPOIB_ENCAP_LEN,
		 (unsigned long long)cm_ipoib_service_id(l->qpn));
	return 0;
}

void ipoib_cm_stop(struct ipoib_link *l)
{
	if (l->cm) {
		cm_free(l->cm); /* DREQs; down + qp_destroy for each connection */
		l->cm = NULL;
	}
	for (unsigned q = 0; q < IBP_QUEUES_MAX; q++) {
		if (l->srq[q]) {
			l->ops->destroy_srq(l->srq[q]);
			l->srq[q] = NULL;
		}
	}
}

void ipoib_conn_disconnect_all(struct ipoib_link *l)
{
	bool again = true;

	while (again && l->cm) {
		again = false;
		for (struct ipoib_conn *c = l->conns; c; c = c->next) {
			if (c->dead)
				continue;
			c->dead = true; /* cm_disconnect may not find a half-open one */
			if (cm_disconnect(l->cm, &c->peer) == 0) {
				again = true; /* the list may have changed */
				break;
			}
		}
	}
}

unsigned ipoib_link_cm_disconnect_dlid(struct ipoib_link *l, uint16_t dlid)
{
	return l->cm ? cm_disconnect_dlid(l->cm, dlid) : 0;
}

struct ref_arg {
	const struct ipoib_hwaddr *peer;
	bool found;
};

static int ref_one(void *arg, const struct neigh_info *ni)
{
	struct ref_arg *ra = arg;
	struct ipoib_hwaddr hw;

	if (ni->has_link && ipoib_ll_peer(&ni->link, &hw) && same_peer(&hw, ra->peer)) {
		ra->found = true;
		return 1;
	}
	return 0;
}

static bool peer_referenced(struct ipoib_link *l, const struct ipoib_hwaddr *peer)
{
	struct ref_arg ra = { .peer = peer };

	neigh_foreach(l->neigh, ref_one, &ra);
	return ra.found;
}

static void want_one(void *arg, struct neigh_table *t, struct neigh_entry *e)
{
	struct ipoib_link *l = arg;
	const struct neigh_link *ll = neigh_entry_link(e);
	struct ipoib_hwaddr hw;

	(void)t;
	if (ll && ll->usable && !ll->conn && ipoib_ll_peer(ll, &hw) &&
	    (hw.flags & IPOIB_HWADDR_F_RC))
		ipoib_conn_request(l, &hw, ipoib_path_find(l, &hw.gid));
}

/* Control thread, every tick: what the data path reported, expired neighbours. */
void ipoib_conn_tick(struct ipoib_link *l)
{
	bool again;

	if (!l->cm)
		return;
	do {
		again = false;
		for (struct ipoib_conn *c = l->conns; c; c = c->next) {
			if (!c->up || c->dead)
				continue;
			if (atomic_exchange_explicit(&c->active, 0, memory_order_relaxed))
				cm_activity(l->cm, &c->peer);
			if (atomic_load_explicit(&c->failed, memory_order_relaxed) &&
			    !c->fail_told) {
				c->fail_told = true;
				cm_disconnect_error(l->cm, &c->peer);
				again = true;
				break;
			}
		}
	} while (again);
	for (unsigned i = 0; i < l->n_expired; i++)
		if (!peer_referenced(l, &l->expired[i]))
			cm_neigh_expired(l->cm, &l->expired[i]);
	l->n_expired = 0;
	if (l->expired_overflow) {
		l->expired_overflow = false;
		do {
			again = false;
			for (struct ipoib_conn *c = l->conns; c; c = c->next)
				if (!c->dead && !peer_referenced(l, &c->peer) &&
				    cm_neigh_expired(l->cm, &c->peer) == 0) {
					again = true;
					break;
				}
		} while (again);
	}
	if (atomic_exchange_explicit(&l->want_conn, 0, memory_order_relaxed))
		neigh_foreach_entry(l->neigh, want_one, l);
}

void ipoib_neigh_release(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll)
{
	struct ipoib_link *l = ctx;
	struct ipoib_hwaddr hw;

	(void)e;
	if (!l->cm || !ipoib_ll_peer(ll, &hw) || !ipoib_conn_find(l, &hw))
		return;
	for (unsigned i = 0; i < l->n_expired; i++)
		if (same_peer(&l->expired[i], &hw))
			return;
	if (l->n_expired < EXPIRE_MAX)
		l->expired[l->n_expired++] = hw;
	else
		l->expired_overflow = true;
}

/* ---- introspection -------------------------------------------------------------- */

struct conn_list_arg {
	struct ipoib_link *l;
	int (*fn)(void *arg, const struct ipoib_conn_info *ci);
	void *arg;
	bool stop;
};

static void conn_list_one(const struct cm_conn_info *ci, void *arg)
{
	struct conn_list_arg *a = arg;
	struct ipoib_conn_info out;

	if (a->stop)
		return;
	memset(&out, 0, sizeof(out));
	out.peer = ci->peer;
	out.state = ci->state;
	out.active = ci->active;
	out.local_qpn = ci->local_qpn;
	out.remote_qpn = ci->remote_qpn;
	out.mtu = ci->mtu;
	out.dlid = ci->dlid;
	out.age_ms = ci->age_ms;
	out.idle_ms = ci->idle_ms;
	for (struct ipoib_conn *c = a->l->conns; c; c = c->next) {
		if (c->qpn != ci->local_qpn || !same_peer(&c->peer, &ci->peer))
			continue;
		out.up = c->up;
		out.tx_packets = atomic_load_explicit(&c->tx_packets, memory_order_relaxed);
		out.tx_bytes = atomic_load_explicit(&c->tx_bytes, memory_order_relaxed);
		out.rx_packets = atomic_load_explicit(&c->rx_packets, memory_order_relaxed);
		out.rx_bytes = atomic_load_explicit(&c->rx_bytes, memory_order_relaxed);
		break;
	}
	if (a->fn(a->arg, &out))
		a->stop = true;
}

void ipoib_link_conn_foreach(struct ipoib_link *l,
			     int (*fn)(void *arg, const struct ipoib_conn_info *ci), void *arg)
{
	struct conn_list_arg a = { .l = l, .fn = fn, .arg = arg };

	if (l->cm)
		cm_for_each(l->cm, conn_list_one, &a);
}

const struct cm_stats *ipoib_link_cm_stats(const struct ipoib_link *l)
{
	return l->cm ? cm_get_stats(l->cm) : NULL;
}

uint32_t ipoib_link_conn_mtu(const struct ipoib_link *l)
{
	if (!l->up)
		return 0;
	return l->cfg.connected && l->rx_mtu ? l->rx_mtu - IPOIB_ENCAP_LEN : l->mtu;
}

uint32_t ipoib_link_peer_mtu(struct ipoib_link *l, const struct ipoib_hwaddr *peer)
{
	struct ipoib_conn *c = ipoib_conn_find(l, peer);
	struct ipoib_path *p = ipoib_path_find(l, &peer->gid);

	if (c && c->up)
		return c->mtu;
	if (l->cm &&
	    (c || ((peer->flags & IPOIB_HWADDR_F_RC) &&
		   !(p && p->conn_failed_at && evloop_now_ms() - p->conn_failed_at < 10000))))
		return l->rx_mtu - IPOIB_ENCAP_LEN;
	return ipoib_ud_mtu_of(l, p);
}
