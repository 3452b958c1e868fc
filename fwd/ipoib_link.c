/*
 * ipoib_link: the IPoIB link in datagram mode (see ipoib_link.h for the lifecycle).
 *
 * Inside: the UD QP; a list of multicast groups (broadcast first), each with its join
 * state, its address handle and whether the QP is attached; a list of paths (GID ->
 * PathRecord -> address handle) with a queue of three packets each while resolving;
 * the neighbour table whose link addresses point at the paths' AHs. When a path's AH
 * is rebuilt (port event, changed PathRecord), every neighbour with that GID is
 * republished with the new AH and the old one is destroyed after a grace period.
 */
#include "fwd/ipoib_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "fwd/arp.h"
#include "fwd/ip.h"
#include "fwd/nd.h"
#include "lib/evloop.h"
#include "lib/ib_types.h"
#include "lib/log.h"
#include "sm-client/sa.h"

#define PATH_QLEN        3
#define PATH_RETRY_MS    1000
#define SPOOF_LOG_GAP_MS 1000
#define TICK_MS          250
#define ETH_P_IP         0x0800
#define ETH_P_ARP        0x0806
#define ETH_P_IPV6       0x86dd
#define UD_MCAST_QPN     0xffffffu

enum path_state {
	PATH_RESOLVING,
	PATH_VALID,
	PATH_FAILED
};

struct ipoib_path {
	struct ipoib_path *next;
	struct ipoib_link *l;
	union ib_gid gid;
	enum path_state state;
	bool querying;
	struct sa_path sp;
	struct ibp_ah *ah;
	uint64_t failed_at;
	struct {
		struct ibp_buf *b;
		uint32_t qpn;
	} q[PATH_QLEN];
	unsigned qn;
};

struct ipoib_mcast {
	struct ipoib_mcast *next;
	struct ipoib_link *l;
	union ib_gid mgid;
	bool full, joined, attached, bcast;
	struct sa_mcast_group g;
	uint16_t attached_mlid;
	struct ibp_ah *ah;
	struct ibp_buf *q[PATH_QLEN]; /* encapsulated, waiting for the join */
	unsigned qn;
};

struct ipoib_link {
	struct ipoib_link_config cfg;
	const struct ibp_ops *ops;
	char name[32];
	uint16_t pkey, pkey_index;
	uint8_t scope;
	struct ibp_port_attr pa;
	union ib_gid gid;
	struct ibp_qp *qp;
	uint32_t qpn, qkey, mtu;
	uint8_t sl, rate;
	struct ipoib_hwaddr hw;
	uint8_t hw_bytes[IPOIB_HWADDR_LEN];
	bool up, started, port_down;
	struct ipoib_mcast *mcasts, *bcast;
	struct ipoib_path *paths;
	struct neigh_table *neigh;
	struct evtimer *tick;
	uint8_t v4[IPOIB_LINK_MAX_ADDRS][4];
	unsigned n_v4;
	uint8_t v6[IPOIB_LINK_MAX_ADDRS][16];
	unsigned n_v6;
	uint64_t last_spoof_log;
	uint64_t spoof_suppressed;
	struct ipoib_link_stats st;
};

static const char *const drop_names[IPOIB_DROP_COUNT] = {
	[IPOIB_DROP_RX_ERROR] = "rx_error",
	[IPOIB_DROP_RX_SHORT] = "rx_short",
	[IPOIB_DROP_RX_ETHERTYPE] = "rx_ethertype",
	[IPOIB_DROP_RX_LOOP] = "rx_loop",
	[IPOIB_DROP_RX_BAD_IP] = "rx_bad_ip",
	[IPOIB_DROP_RX_BAD_ARP] = "rx_bad_arp",
	[IPOIB_DROP_RX_BAD_ND] = "rx_bad_nd",
	[IPOIB_DROP_ARP_SPOOF] = "arp_spoof",
	[IPOIB_DROP_TX_DOWN] = "tx_down",
	[IPOIB_DROP_TX_TOO_BIG] = "tx_too_big",
	[IPOIB_DROP_TX_NO_PATH] = "tx_no_path",
	[IPOIB_DROP_TX_PATH_QUEUE] = "tx_path_queue",
	[IPOIB_DROP_TX_MCAST_JOIN] = "tx_mcast_join",
	[IPOIB_DROP_TX_NEIGH] = "tx_neigh",
	[IPOIB_DROP_TX_POST] = "tx_post",
	[IPOIB_DROP_TX_NOBUF] = "tx_nobuf",
};

const char *ipoib_drop_name(enum ipoib_drop d)
{
	return (unsigned)d < IPOIB_DROP_COUNT ? drop_names[d] : "?";
}

/* ---- receive classification ------------------------------------------------------ */

enum ipoib_rx_kind ipoib_rx_classify(const uint8_t *buf, size_t len, bool has_grh,
				     struct ipoib_rx *out)
{
	struct ipoib_encap h;
	const uint8_t *p;
	size_t n;

	memset(out, 0, sizeof(*out));
	out->kind = IPOIB_RX_DROP;
	if (len < IBP_GRH_AREA + IPOIB_ENCAP_LEN) {
		out->why = IPOIB_DROP_RX_SHORT;
		return out->kind;
	}
	out->has_grh = has_grh;
	if (has_grh) {
		memcpy(out->sgid.raw, buf + 8, 16);
		memcpy(out->dgid.raw, buf + 24, 16);
		out->mcast = ib_gid_is_multicast(&out->dgid);
	}
	p = buf + IBP_GRH_AREA;
	n = len - IBP_GRH_AREA;
	ipoib_encap_decode(p, n, &h);
	out->ethertype = h.ethertype;
	out->data = p + IPOIB_ENCAP_LEN;
	out->len = n - IPOIB_ENCAP_LEN;
	switch (h.ethertype) {
	case ETH_P_IP:
		if (out->len < 20 || (out->data[0] >> 4) != 4) {
			out->why = IPOIB_DROP_RX_BAD_IP;
			return out->kind;
		}
		out->kind = IPOIB_RX_IP4;
		break;
	case ETH_P_IPV6:
		if (out->len < 40 || (out->data[0] >> 4) != 6) {
			out->why = IPOIB_DROP_RX_BAD_IP;
			return out->kind;
		}
		out->kind = IPOIB_RX_IP6;
		if (out->data[6] == 58 && out->len > 40 && out->data[40] >= ND_RS &&
		    out->data[40] <= ND_REDIRECT)
			out->kind = IPOIB_RX_ND;
		break;
	case ETH_P_ARP:
		out->kind = IPOIB_RX_ARP;
		break;
	default:
		out->why = IPOIB_DROP_RX_ETHERTYPE;
		break;
	}
	return out->kind;
}

/* ---- helpers -------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
	return evloop_now_ms();
}

static void drop_buf(struct ipoib_link *l, struct ibp_buf *b, enum ipoib_drop why)
{
	l->st.drops[why]++;
	if (b)
		l->ops->buf_put(l->cfg.port, b);
}

static void destroy_ah_later(struct ipoib_link *l, struct ibp_ah *ah);

struct ah_retire {
	const struct ibp_ops *ops;
	struct ibp_ah *ah;
};

static void ah_retire_fn(void *arg)
{
	struct ah_retire *r = arg;

	r->ops->destroy_ah(r->ah);
	free(r);
}

static void destroy_ah_later(struct ipoib_link *l, struct ibp_ah *ah)
{
	struct ah_retire *r;

	if (!ah)
		return;
	if (!l->cfg.defer || !(r = malloc(sizeof(*r)))) {
		l->ops->destroy_ah(ah);
		return;
	}
	r->ops = l->ops;
	r->ah = ah;
	l->cfg.defer(l->cfg.defer_ctx, ah_retire_fn, r);
}

static int encap(struct ibp_buf *b, uint16_t ethertype)
{
	struct ipoib_encap h = { .ethertype = ethertype, .reserved = 0 };

	if (b->len + IPOIB_ENCAP_LEN > b->cap)
		return -EMSGSIZE;
	ipoib_encap_encode(&h, b->data, IPOIB_ENCAP_LEN);
	b->len += IPOIB_ENCAP_LEN;
	return 0;
}

/* Post an encapsulated buffer. Takes ownership. */
static int post(struct ipoib_link *l, struct ibp_ah *ah, uint32_t qpn, struct ibp_buf *b)
{
	struct ibp_send s = {
		.qp = l->qp, .ah = ah, .remote_qpn = qpn, .remote_qkey = l->qkey, .buf = b
	};
	uint32_t n = b->len;

	if (!l->up || !l->qp) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (l->ops->post_send(&s, 1) != 1) {
		drop_buf(l, b, IPOIB_DROP_TX_POST);
		return -ENOBUFS;
	}
	l->st.tx_packets++;
	l->st.tx_bytes += n;
	return 0;
}

static bool is_own_v4(const struct ipoib_link *l, const uint8_t *a)
{
	for (unsigned i = 0; i < l->n_v4; i++)
		if (!memcmp(l->v4[i], a, 4))
			return true;
	return false;
}

static bool is_own_v6(const struct ipoib_link *l, const uint8_t *a)
{
	for (unsigned i = 0; i < l->n_v6; i++)
		if (!memcmp(l->v6[i], a, 16))
			return true;
	return false;
}

static struct neigh_link make_link(const struct ipoib_link *l, const struct ipoib_hwaddr *hw)
{
	struct neigh_link ll;

	memset(&ll, 0, sizeof(ll));
	ll.len = IPOIB_HWADDR_LEN;
	ipoib_hwaddr_encode(hw, ll.addr, sizeof(ll.addr));
	ll.qpn = hw->qpn;
	ll.mtu = l->mtu;
	return ll;
}

/* ---- paths ---------------------------------------------------------------------- */

static struct ipoib_path *path_find(struct ipoib_link *l, const union ib_gid *gid)
{
	for (struct ipoib_path *p = l->paths; p; p = p->next)
		if (ib_gid_equal(&p->gid, gid))
			return p;
	return NULL;
}

struct rebind_arg {
	struct ipoib_link *l;
	const struct ipoib_path *p;
};

/* Fill a neighbour's link address from its path. */
static void bind_to_path(struct ipoib_link *l, struct neigh_link *ll, const struct ipoib_path *p)
{
	ll->usable = p && p->state == PATH_VALID && p->ah;
	ll->ah = ll->usable ? p->ah : NULL;
	if (ll->usable) {
		ll->dlid = p->sp.dlid;
		ll->sl = p->sp.sl;
		ll->ib_mtu = p->sp.mtu;
		ll->grh = ib_gid_prefix(&p->gid) != ib_gid_prefix(&l->gid);
	}
	ll->mtu = l->mtu;
	if (ll->usable && ib_mtu_bytes(p->sp.mtu) &&
	    ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN < ll->mtu)
		ll->mtu = ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN;
}

static void rebind_one(void *arg, struct neigh_table *t, struct neigh_entry *e)
{
	struct rebind_arg *ra = arg;
	const struct neigh_link *cur = neigh_entry_link(e);
	struct neigh_link ll;

	if (!cur || cur->len != IPOIB_HWADDR_LEN ||
	    memcmp(cur->addr + 4, ra->p->gid.raw, IB_GID_LEN))
		return;
	ll = *cur;
	bind_to_path(ra->l, &ll, ra->p);
	if (ll.usable == cur->usable && ll.ah == cur->ah && ll.mtu == cur->mtu)
		return;
	neigh_set_link(t, e, &ll);
}

static void path_flush_queue(struct ipoib_path *p, bool send)
{
	struct ipoib_link *l = p->l;

	for (unsigned i = 0; i < p->qn; i++) {
		if (send)
			post(l, p->ah, p->q[i].qpn, p->q[i].b);
		else
			drop_buf(l, p->q[i].b, IPOIB_DROP_TX_NO_PATH);
	}
	p->qn = 0;
}

static void path_cb(void *arg, int status, const struct sa_path *sp)
{
	struct ipoib_path *p = arg;
	struct ipoib_link *l = p->l;
	struct ibp_ah_attr aa;
	struct ibp_ah *ah;
	struct rebind_arg ra = { .l = l, .p = p };
	char gs[IB_GID_STRLEN];

	if (status == -ECANCELED)
		return;
	p->querying = false;
	if (status < 0) {
		ib_gid_format(&p->gid, gs, sizeof(gs));
		log_info("%s: no path to %s: %s", l->name, gs, strerror(-status));
		l->st.path_failures++;
		if (p->state != PATH_VALID) {
			p->state = PATH_FAILED;
			p->failed_at = now_ms();
			path_flush_queue(p, false);
		}
		return;
	}
	memset(&aa, 0, sizeof(aa));
	aa.dlid = sp->dlid;
	aa.sl = sp->sl;
	aa.static_rate = sp->rate;
	aa.is_global = ib_gid_prefix(&sp->dgid) != ib_gid_prefix(&l->gid) || sp->hop_limit > 1;
	aa.dgid = p->gid;
	aa.flow_label = sp->flow_label;
	aa.hop_limit = sp->hop_limit ? sp->hop_limit : 0xff;
	aa.traffic_class = sp->tclass;
	if (p->state == PATH_VALID && p->ah && p->sp.dlid == sp->dlid && p->sp.sl == sp->sl &&
	    p->sp.mtu == sp->mtu && p->sp.hop_limit == sp->hop_limit) {
		p->sp = *sp;
		path_flush_queue(p, true);
		return;
	}
	if (l->ops->create_ah(l->cfg.port, &aa, &ah) < 0) {
		l->st.path_failures++;
		p->state = PATH_FAILED;
		p->failed_at = now_ms();
		path_flush_queue(p, false);
		return;
	}
	struct ibp_ah *old = p->ah;

	if (old)
		l->st.ah_rebuilt++;
	p->ah = ah;
	p->sp = *sp;
	p->state = PATH_VALID;
	l->st.paths_resolved++;
	neigh_foreach_entry(l->neigh, rebind_one, &ra);
	destroy_ah_later(l, old);
	path_flush_queue(p, true);
}

static void path_query(struct ipoib_path *p)
{
	struct ipoib_link *l = p->l;
	struct sa_path_query q;

	if (p->querying || !l->cfg.sa)
		return;
	memset(&q, 0, sizeof(q));
	q.dgid = p->gid;
	q.sgid = l->gid;
	q.pkey = l->pkey;
	p->querying = true;
	if (p->state == PATH_FAILED)
		p->state = PATH_RESOLVING;
	if (sa_path_resolve(l->cfg.sa, &q, path_cb, p) < 0) {
		p->querying = false;
		p->state = PATH_FAILED;
		p->failed_at = now_ms();
	}
}

static struct ipoib_path *path_get(struct ipoib_link *l, const union ib_gid *gid)
{
	struct ipoib_path *p = path_find(l, gid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->l = l;
	p->gid = *gid;
	p->state = PATH_RESOLVING;
	p->next = l->paths;
	l->paths = p;
	path_query(p);
	return path_find(l, gid); /* path_query may have answered (cache) */
}

/* Make the neighbour's link usable from its path, or start resolving the path. */
static void bind_neigh(struct ipoib_link *l, struct neigh_entry *e)
{
	const struct neigh_link *cur = neigh_entry_link(e);
	union ib_gid gid;
	struct ipoib_path *p;
	struct neigh_link ll;

	if (!cur || cur->len != IPOIB_HWADDR_LEN)
		return;
	memcpy(gid.raw, cur->addr + 4, IB_GID_LEN);
	p = path_get(l, &gid);
	if (!p)
		return;
	if (p->state == PATH_FAILED && now_ms() - p->failed_at >= PATH_RETRY_MS)
		path_query(p);
	ll = *cur;
	bind_to_path(l, &ll, p);
	if (ll.usable != cur->usable || ll.ah != cur->ah)
		neigh_set_link(l->neigh, e, &ll);
}

/* ---- multicast ------------------------------------------------------------------ */

static void mcast_attach(struct ipoib_mcast *m)
{
	struct ipoib_link *l = m->l;

	if (!m->full || !m->joined || !l->qp)
		return;
	if (m->attached && m->attached_mlid == m->g.mlid)
		return;
	if (m->attached)
		l->ops->detach_mcast(l->qp, &m->mgid, m->attached_mlid);
	if (l->ops->attach_mcast(l->qp, &m->mgid, m->g.mlid) == 0) {
		m->attached = true;
		m->attached_mlid = m->g.mlid;
	} else {
		m->attached = false;
		log_warning("%s: cannot attach the QP to mlid 0x%x", l->name, m->g.mlid);
	}
}

static void mcast_flush(struct ipoib_mcast *m, bool send)
{
	for (unsigned i = 0; i < m->qn; i++) {
		if (send && m->ah) {
			m->l->st.tx_mcast++;
			post(m->l, m->ah, UD_MCAST_QPN, m->q[i]);
		} else {
			drop_buf(m->l, m->q[i], IPOIB_DROP_TX_MCAST_JOIN);
		}
	}
	m->qn = 0;
}

static int link_create_qp(struct ipoib_link *l);
static void link_set_up(struct ipoib_link *l, bool up);

static void mcast_cb(void *arg, int status, const struct sa_mcast_group *g)
{
	struct ipoib_mcast *m = arg;
	struct ipoib_link *l;
	struct ibp_ah_attr aa;
	struct ibp_ah *ah;
	char gs[IB_GID_STRLEN];

	if (status == -ECANCELED)
		return;
	l = m->l;
	ib_gid_format(&m->mgid, gs, sizeof(gs));
	if (status < 0) {
		l->st.join_failures++;
		log_info("%s: join %s (%s) failed: %s; retrying", l->name, gs,
			 m->full ? "full" : "send-only", strerror(-status));
		return;
	}
	l->st.joins++;
	if (!m->joined || !m->ah || m->g.mlid != g->mlid || m->g.sl != g->sl) {
		memset(&aa, 0, sizeof(aa));
		aa.dlid = g->mlid;
		aa.sl = g->sl;
		aa.static_rate = g->rate;
		aa.is_global = true;
		aa.dgid = m->mgid;
		aa.flow_label = g->flow_label;
		aa.hop_limit = g->hop_limit ? g->hop_limit : 1;
		aa.traffic_class = g->tclass;
		if (l->ops->create_ah(l->cfg.port, &aa, &ah) < 0) {
			log_warning("%s: no AH for group %s", l->name, gs);
			return;
		}
		destroy_ah_later(l, m->ah);
		m->ah = ah;
	}
	m->g = *g;
	m->joined = true;
	log_info("%s: joined %s (%s) mlid 0x%x qkey 0x%x mtu %u sl %u", l->name, gs,
		 m->full ? "full" : "send-only", g->mlid, g->qkey, ib_mtu_bytes(g->mtu), g->sl);
	if (m->bcast) {
		l->qkey = g->qkey;
		l->mtu = ib_mtu_bytes(g->mtu) ? ib_mtu_bytes(g->mtu) - IPOIB_ENCAP_LEN : 2044;
		l->sl = g->sl;
		l->rate = g->rate;
		if (!l->qp && link_create_qp(l) < 0)
			return;
		for (struct ipoib_mcast *o = l->mcasts; o; o = o->next)
			mcast_attach(o);
		link_set_up(l, true);
		/* Paths learned before a port event: query them again; the AH is rebuilt
		 * only if the answer differs. */
		for (struct ipoib_path *p = l->paths; p; p = p->next)
			if (p->state != PATH_RESOLVING || !p->querying)
				path_query(p);
		mcast_flush(m, true);
		return;
	}
	mcast_attach(m);
	mcast_flush(m, true);
}

static struct ipoib_mcast *mcast_find(const struct ipoib_link *l, const union ib_gid *mgid)
{
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
		if (ib_gid_equal(&m->mgid, mgid))
			return m;
	return NULL;
}

static int mcast_sa_join(struct ipoib_mcast *m)
{
	struct sa_mcast_params p;

	if (!m->l->cfg.sa)
		return -ENOTCONN;
	memset(&p, 0, sizeof(p));
	p.mgid = m->mgid;
	p.join_state = m->full ? SA_JOIN_FULL : SA_JOIN_SENDONLY_FULL;
	p.create = true;
	p.pkey = m->l->pkey;
	return sa_mcast_join(m->l->cfg.sa, &p, mcast_cb, m);
}

static struct ipoib_mcast *mcast_get(struct ipoib_link *l, const union ib_gid *mgid, bool full)
{
	struct ipoib_mcast *m = mcast_find(l, mgid);

	if (m) {
		if (full && !m->full) {
			/* Send-only -> full member: leave and join again. */
			sa_mcast_leave(l->cfg.sa, &m->mgid);
			m->full = true;
			m->joined = false;
			mcast_sa_join(m);
		}
		return m;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->l = l;
	m->mgid = *mgid;
	m->full = full;
	m->next = l->mcasts;
	l->mcasts = m;
	if (l->started)
		mcast_sa_join(m);
	return m;
}

int ipoib_link_mcast_join(struct ipoib_link *l, const union ib_gid *mgid)
{
	return mcast_get(l, mgid, true) ? 0 : -ENOMEM;
}

/* ---- control frames ------------------------------------------------------------- */

struct ibp_buf *ipoib_link_buf(struct ipoib_link *l)
{
	struct ibp_buf *b = l->ops->buf_get(l->cfg.port);

	if (b)
		b->len = 0;
	return b;
}

static void send_arp(struct ipoib_link *l, uint16_t op, const uint8_t *tha, uint32_t tpa,
		     uint32_t spa, const struct neigh_link *to_ll, const struct ipoib_hwaddr *to_hw)
{
	struct ibp_buf *b = ipoib_link_buf(l);
	size_t n;

	if (!b) {
		l->st.drops[IPOIB_DROP_TX_NOBUF]++;
		return;
	}
	n = arp_build(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ARP_HTYPE_IB, op,
		      l->hw_bytes, spa, tha, tpa);
	if (!n) {
		drop_buf(l, b, IPOIB_DROP_TX_NOBUF);
		return;
	}
	b->len = (uint32_t)n;
	l->st.tx_arp++;
	if (to_ll && to_ll->usable) {
		encap(b, ETH_P_ARP);
		post(l, to_ll->ah, to_ll->qpn, b);
	} else if (to_hw) {
		ipoib_link_xmit_hw(l, to_hw, ETH_P_ARP, b);
	} else {
		ipoib_link_xmit_bcast(l, ETH_P_ARP, b);
	}
}

static const uint8_t *v6_source_for(const struct ipoib_link *l, const uint8_t *target)
{
	if (!l->n_v6)
		return NULL;
	if (!ip6_is_link_local(target))
		for (unsigned i = 0; i < l->n_v6; i++)
			if (!ip6_is_link_local(l->v6[i]))
				return l->v6[i];
	return l->v6[0]; /* the link-local address comes first */
}

static void send_nd(struct ipoib_link *l, struct ibp_buf *b, size_t n, const uint8_t *dst,
		    const struct neigh_link *to_ll)
{
	if (!n) {
		drop_buf(l, b, IPOIB_DROP_TX_NOBUF);
		return;
	}
	b->len = (uint32_t)n;
	l->st.tx_nd++;
	if (to_ll && to_ll->usable) {
		encap(b, ETH_P_IPV6);
		post(l, to_ll->ah, to_ll->qpn, b);
	} else {
		ipoib_link_xmit_ip(l, AF_INET6, dst, ETH_P_IPV6, b);
	}
}

static void neigh_solicit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll)
{
	struct ipoib_link *l = ctx;
	const uint8_t *a = neigh_entry_addr(e);

	if (!l->up)
		return;
	if (neigh_entry_family(e) == AF_INET) {
		uint32_t tpa, spa;

		if (!l->n_v4)
			return;
		memcpy(&tpa, a, 4);
		memcpy(&spa, l->v4[0], 4);
		send_arp(l, ARP_OP_REQUEST, NULL, ntohl(tpa), ntohl(spa), ll, NULL);
	} else {
		const uint8_t *src = v6_source_for(l, a);
		uint8_t sn[16];
		struct ibp_buf *b;
		size_t n;

		if (!src || !(b = ipoib_link_buf(l))) {
			l->st.drops[IPOIB_DROP_TX_NOBUF] += src != NULL;
			return;
		}
		n = nd_build_ns(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN, ND_LINK_IB,
				src, ll ? a : NULL, a, l->hw_bytes);
		nd_solicited_node(a, sn);
		send_nd(l, b, n, ll ? a : sn, ll);
	}
}

static void neigh_xmit(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll,
		       void *pkt)
{
	struct ipoib_link *l = ctx;

	(void)e;
	post(l, ll->ah, ll->qpn, pkt);
}

static void neigh_drop(void *ctx, void *pkt)
{
	drop_buf(ctx, pkt, IPOIB_DROP_TX_NEIGH);
}

static const struct neigh_ops link_neigh_ops = {
	.solicit = neigh_solicit,
	.xmit = neigh_xmit,
	.drop = neigh_drop,
};

/* ---- lifecycle ------------------------------------------------------------------ */

static void on_tick(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	ipoib_link_tick(arg);
}

int ipoib_link_new(const struct ipoib_link_config *cfg, struct ipoib_link **out)
{
	struct ipoib_link *l;
	struct neigh_config nc;
	int ret;
	unsigned i;

	if (!cfg->ops || !cfg->port)
		return -EINVAL;
	if (cfg->connected) {
		log_error("%s: connected mode is not wired into the link yet",
			  cfg->name ? cfg->name : "ipoib");
		return -EOPNOTSUPP;
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	l->ops = cfg->ops;
	l->pkey = cfg->pkey ? cfg->pkey : 0xffff;
	l->pkey |= 0x8000;
	l->scope = cfg->scope ? cfg->scope : IB_MGID_SCOPE_LINK;
	snprintf(l->name, sizeof(l->name), "%s", cfg->name ? cfg->name : "ipoib");
	if (!l->cfg.recv_depth)
		l->cfg.recv_depth = 256;
	if (!l->cfg.send_depth)
		l->cfg.send_depth = 256;
	if (cfg->attr) {
		l->pa = *cfg->attr;
	} else if ((ret = l->ops->query(cfg->port, &l->pa)) < 0) {
		free(l);
		return ret;
	}
	l->cfg.attr = NULL;
	for (i = 0; i < l->pa.n_pkeys; i++)
		if ((l->pa.pkeys[i] & 0x7fff) == (l->pkey & 0x7fff) && (l->pa.pkeys[i] & 0x7fff))
			break;
	if (i == l->pa.n_pkeys) {
		char tbl[128] = "";
		size_t o = 0;

		for (unsigned k = 0; k < l->pa.n_pkeys && o + 8 < sizeof(tbl); k++)
			if (l->pa.pkeys[k] & 0x7fff)
				o += (size_t)snprintf(tbl + o, sizeof(tbl) - o, " 0x%04x",
						      l->pa.pkeys[k]);
		log_error("%s: P_Key 0x%04x is not in the port's P_Key table (has:%s)", l->name,
			  l->pkey, o ? tbl : " nothing");
		free(l);
		return -ENOENT;
	}
	l->pkey_index = (uint16_t)i;
	ib_gid_set(&l->gid, l->pa.gid_prefix, l->pa.port_guid);
	memset(&nc, 0, sizeof(nc));
	nc.params = cfg->neigh;
	nc.ops = &link_neigh_ops;
	nc.ops_ctx = l;
	nc.defer = cfg->defer;
	nc.defer_ctx = cfg->defer_ctx;
	ret = neigh_table_new(&nc, &l->neigh);
	if (ret < 0) {
		free(l);
		return ret;
	}
	/* IPv6 link-local from the port GUID comes first among the IPv6 addresses. */
	ipoib_ipv6_link_local(l->pa.port_guid, l->v6[0]);
	l->n_v6 = 1;
	if (cfg->loop) {
		l->tick = evtimer_new(cfg->loop, on_tick, l);
		if (!l->tick) {
			neigh_table_free(l->neigh);
			free(l);
			return -ENOMEM;
		}
	}
	*out = l;
	return 0;
}

static int link_create_qp(struct ipoib_link *l)
{
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD,
		.pkey_index = l->pkey_index,
		.qkey = l->qkey,
		.send_depth = l->cfg.send_depth,
		.recv_depth = l->cfg.recv_depth,
		.user = l,
	};
	int ret = l->ops->create_qp(l->cfg.port, &qi, &l->qp);

	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: cannot create the UD QP", l->name);
		l->qp = NULL;
		return ret;
	}
	ret = l->ops->qp_ready(l->qp, NULL);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: UD QP not ready", l->name);
		l->ops->destroy_qp(l->qp);
		l->qp = NULL;
		return ret;
	}
	l->qpn = l->ops->qp_num(l->qp);
	l->hw.flags = 0;
	l->hw.qpn = l->qpn;
	l->hw.gid = l->gid;
	ipoib_hwaddr_encode(&l->hw, l->hw_bytes, sizeof(l->hw_bytes));
	for (unsigned i = 0; i < l->cfg.recv_depth; i++) {
		struct ibp_buf *b = l->ops->buf_get(l->cfg.port);

		if (!b)
			break;
		if (l->ops->post_recv(l->qp, &b, 1) != 1) {
			l->ops->buf_put(l->cfg.port, b);
			break;
		}
	}
	return 0;
}

static void link_set_up(struct ipoib_link *l, bool up)
{
	char hs[IPOIB_HWADDR_STRLEN];

	if (l->up == up)
		return;
	l->up = up;
	if (up) {
		l->st.up_count++;
		ipoib_hwaddr_format(&l->hw, hs, sizeof(hs));
		log_notice("%s: up: P_Key 0x%04x qpn 0x%x mtu %u qkey 0x%x sl %u hwaddr %s",
			   l->name, l->pkey, l->qpn, l->mtu, l->qkey, l->sl, hs);
		if (l->tick)
			evtimer_start(l->tick, TICK_MS, TICK_MS);
	} else {
		l->st.down_count++;
		log_notice("%s: down", l->name);
		neigh_flush(l->neigh);
		for (struct ipoib_path *p = l->paths; p; p = p->next)
			path_flush_queue(p, false);
	}
	if (l->cfg.state_cb)
		l->cfg.state_cb(l->cfg.cb_ctx, l, up);
}

static void join_v6_groups(struct ipoib_link *l)
{
	union ib_gid mgid;
	uint8_t sn[16];

	ipoib_mgid_from_ipv6(nd_all_nodes, l->pkey, l->scope, &mgid);
	mcast_get(l, &mgid, true);
	for (unsigned i = 0; i < l->n_v6; i++) {
		nd_solicited_node(l->v6[i], sn);
		ipoib_mgid_from_ipv6(sn, l->pkey, l->scope, &mgid);
		mcast_get(l, &mgid, true);
	}
}

int ipoib_link_start(struct ipoib_link *l)
{
	union ib_gid mgid;
	int ret;

	if (l->started)
		return 0;
	ret = ipoib_mgid_broadcast(l->pkey, l->scope, &mgid);
	if (ret < 0)
		return ret;
	l->bcast = mcast_get(l, &mgid, true);
	if (!l->bcast)
		return -ENOMEM;
	l->bcast->bcast = true;
	join_v6_groups(l);
	l->started = true;
	/* The broadcast group first: it is at the list's tail. */
	ret = mcast_sa_join(l->bcast);
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
		if (m != l->bcast)
			mcast_sa_join(m);
	return ret == -EEXIST ? 0 : ret;
}

void ipoib_link_stop(struct ipoib_link *l)
{
	if (l->tick)
		evtimer_stop(l->tick);
	if (l->up)
		link_set_up(l, false);
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next) {
		if (l->started && l->cfg.sa)
			sa_mcast_leave(l->cfg.sa, &m->mgid);
		if (m->attached && l->qp)
			l->ops->detach_mcast(l->qp, &m->mgid, m->attached_mlid);
		mcast_flush(m, false);
		m->attached = m->joined = false;
	}
	l->started = false;
	if (l->qp) {
		l->ops->destroy_qp(l->qp);
		l->qp = NULL;
	}
}

void ipoib_link_free(struct ipoib_link *l)
{
	if (!l)
		return;
	if (l->qp || l->started)
		ipoib_link_stop(l);
	neigh_table_free(l->neigh);
	while (l->paths) {
		struct ipoib_path *p = l->paths;

		l->paths = p->next;
		path_flush_queue(p, false);
		if (p->ah)
			l->ops->destroy_ah(p->ah);
		free(p);
	}
	while (l->mcasts) {
		struct ipoib_mcast *m = l->mcasts;

		l->mcasts = m->next;
		mcast_flush(m, false);
		if (m->ah)
			l->ops->destroy_ah(m->ah);
		free(m);
	}
	if (l->tick)
		evtimer_free(l->tick);
	free(l);
}

void ipoib_link_port_event(struct ipoib_link *l, const struct ibp_event *ev)
{
	switch (ev->type) {
	case IBP_EVENT_PORT_DOWN:
		l->port_down = true;
		link_set_up(l, false);
		for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
			m->joined = false; /* the SA forgets a port that went away */
		break;
	case IBP_EVENT_PORT_ACTIVE:
	case IBP_EVENT_LID_CHANGE:
	case IBP_EVENT_SM_CHANGE:
	case IBP_EVENT_CLIENT_REREGISTER:
	case IBP_EVENT_PKEY_CHANGE:
		l->port_down = false;
		/* The port's owner tells the SA client (sa_client_set_port/_reregister),
		 * which rejoins every group: mcast_cb brings the link up again and
		 * re-queries the paths. Mark the paths stale meanwhile. */
		for (struct ipoib_path *p = l->paths; p; p = p->next)
			p->querying = false;
		break;
	default:
		break;
	}
}

int ipoib_link_add_addr(struct ipoib_link *l, int family, const uint8_t *addr)
{
	if (family == AF_INET) {
		if (is_own_v4(l, addr))
			return 0;
		if (l->n_v4 == IPOIB_LINK_MAX_ADDRS)
			return -ENOSPC;
		memcpy(l->v4[l->n_v4++], addr, 4);
		return 0;
	}
	if (family != AF_INET6)
		return -EAFNOSUPPORT;
	if (is_own_v6(l, addr))
		return 0;
	if (l->n_v6 == IPOIB_LINK_MAX_ADDRS)
		return -ENOSPC;
	memcpy(l->v6[l->n_v6++], addr, 16);
	if (l->started) {
		uint8_t sn[16];
		union ib_gid mgid;

		nd_solicited_node(addr, sn);
		ipoib_mgid_from_ipv6(sn, l->pkey, l->scope, &mgid);
		mcast_get(l, &mgid, true);
	}
	return 0;
}

uint64_t ipoib_link_tick(struct ipoib_link *l)
{
	uint64_t now = now_ms();

	/* Paths that failed: retried on the next use (bind_neigh / xmit_hw). */
	(void)now;
	return neigh_tick(l->neigh);
}

/* ---- ARP and ND ----------------------------------------------------------------- */

static void spoof_log(struct ipoib_link *l, uint32_t spa, const uint8_t *sha)
{
	uint64_t now = now_ms();
	struct ipoib_hwaddr hw;
	char hs[IPOIB_HWADDR_STRLEN] = "?";
	struct in_addr ia = { .s_addr = htonl(spa) };
	char as[INET_ADDRSTRLEN];

	if (now - l->last_spoof_log < SPOOF_LOG_GAP_MS && l->last_spoof_log) {
		l->spoof_suppressed++;
		return;
	}
	if (ipoib_hwaddr_decode(sha, IPOIB_HWADDR_LEN, &hw) == 0)
		ipoib_hwaddr_format(&hw, hs, sizeof(hs));
	inet_ntop(AF_INET, &ia, as, sizeof(as));
	log_warning("%s: ARP claims our address %s from %s (%s; %llu more suppressed)", l->name, as,
		    hs, l->cfg.accept_spoofed_arp ? "accepted" : "ignored",
		    (unsigned long long)l->spoof_suppressed);
	l->spoof_suppressed = 0;
	l->last_spoof_log = now;
}

static int input_arp(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	struct arp_pkt a;
	struct ipoib_hwaddr sha;
	enum arp_reason r = arp_parse(rx->data, rx->len, ARP_HTYPE_IB, &a);
	uint8_t spa[4], tpa[4];
	uint32_t be;
	struct neigh_link ll;
	struct neigh_entry *e;
	unsigned flags;

	l->st.rx_arp++;
	if (r != ARP_OK || ipoib_hwaddr_decode(a.sha, IPOIB_HWADDR_LEN, &sha) < 0) {
		l->st.drops[IPOIB_DROP_RX_BAD_ARP]++;
		return -EINVAL;
	}
	if (!memcmp(a.sha, l->hw_bytes, IPOIB_HWADDR_LEN))
		return -EALREADY; /* our own, looped back */
	be = htonl(a.spa);
	memcpy(spa, &be, 4);
	be = htonl(a.tpa);
	memcpy(tpa, &be, 4);
	if (a.spa && is_own_v4(l, spa)) {
		l->st.drops[IPOIB_DROP_ARP_SPOOF]++;
		spoof_log(l, a.spa, a.sha);
		if (!l->cfg.accept_spoofed_arp)
			return -EPERM;
		return 0;
	}
	if (!a.spa)
		return 0; /* a probe (RFC 5227): nothing to learn */
	ll = make_link(l, &sha);
	if (is_own_v4(l, tpa)) {
		/* To us: a request teaches the sender (STALE); a reply confirms it. */
		flags = NEIGH_F_CREATE | NEIGH_F_OVERRIDE;
		if (a.op == ARP_OP_REPLY)
			flags |= NEIGH_F_SOLICITED;
		e = neigh_update(l->neigh, AF_INET, spa, &ll, flags);
		if (e)
			bind_neigh(l, e);
		if (a.op == ARP_OP_REQUEST && l->cfg.role == IPOIB_ROLE_GATEWAY)
			send_arp(l, ARP_OP_REPLY, a.sha, a.spa, a.tpa,
				 e ? neigh_entry_link(e) : NULL, &sha);
	} else {
		/* Someone else's conversation or a gratuitous ARP: update only what we
		 * know (Linux without arp_accept). */
		e = neigh_update(l->neigh, AF_INET, spa, &ll, NEIGH_F_OVERRIDE);
		if (e)
			bind_neigh(l, e);
	}
	return 0;
}

static int input_nd(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	struct nd_msg m;
	enum nd_reason r = nd_parse(rx->data, rx->len, ND_LINK_IB, &m);
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct neigh_entry *e = NULL;
	unsigned flags;

	l->st.rx_nd++;
	if (r != ND_OK) {
		l->st.drops[IPOIB_DROP_RX_BAD_ND]++;
		return -EINVAL;
	}
	switch (m.type) {
	case ND_NS:
		if (m.dad || !is_own_v6(l, m.target))
			return 0;
		if (m.sllao && ipoib_hwaddr_decode(m.sllao, IPOIB_HWADDR_LEN, &hw) == 0 &&
		    memcmp(m.sllao, l->hw_bytes, IPOIB_HWADDR_LEN)) {
			ll = make_link(l, &hw);
			e = neigh_update(l->neigh, AF_INET6, m.src, &ll,
					 NEIGH_F_CREATE | NEIGH_F_OVERRIDE);
			if (e)
				bind_neigh(l, e);
		}
		if (l->cfg.role == IPOIB_ROLE_GATEWAY) {
			struct ibp_buf *b = ipoib_link_buf(l);
			size_t n;

			if (!b) {
				l->st.drops[IPOIB_DROP_TX_NOBUF]++;
				return 0;
			}
			n = nd_build_na_reply(b->data + IPOIB_ENCAP_LEN, b->cap - IPOIB_ENCAP_LEN,
					      ND_LINK_IB, &m, m.target, ND_NA_OVERRIDE,
					      l->hw_bytes);
			send_nd(l, b, n, m.src, e ? neigh_entry_link(e) : NULL);
		}
		return 0;
	case ND_NA:
		if (!m.tllao && !(m.flags & ND_NA_SOLICITED))
			return 0;
		if (m.tllao) {
			if (ipoib_hwaddr_decode(m.tllao, IPOIB_HWADDR_LEN, &hw) < 0 ||
			    !memcmp(m.tllao, l->hw_bytes, IPOIB_HWADDR_LEN))
				return 0;
			ll = make_link(l, &hw);
		}
		flags = 0;
		if (m.flags & ND_NA_SOLICITED)
			flags |= NEIGH_F_SOLICITED;
		if (m.flags & ND_NA_OVERRIDE)
			flags |= NEIGH_F_OVERRIDE;
		/* The host role's kernel asked: the link learns what it hears. */
		if (l->cfg.role == IPOIB_ROLE_HOST && m.tllao && !ip6_is_multicast(m.dst))
			flags |= NEIGH_F_CREATE;
		e = neigh_update(l->neigh, AF_INET6, m.target, m.tllao ? &ll : NULL, flags);
		if (e)
			bind_neigh(l, e);
		return 0;
	case ND_RA:
	case ND_RS:
		if (m.sllao && !ip6_is_unspecified(m.src) &&
		    ipoib_hwaddr_decode(m.sllao, IPOIB_HWADDR_LEN, &hw) == 0 &&
		    memcmp(m.sllao, l->hw_bytes, IPOIB_HWADDR_LEN)) {
			ll = make_link(l, &hw);
			e = neigh_update(l->neigh, AF_INET6, m.src, &ll,
					 (m.type == ND_RA ? NEIGH_F_CREATE : 0) | NEIGH_F_OVERRIDE);
			if (e)
				bind_neigh(l, e);
		}
		return 0;
	default:
		return 0; /* Redirect: validated, not taken */
	}
}

int ipoib_link_input_ctl(struct ipoib_link *l, const struct ipoib_rx *rx)
{
	if (rx->kind == IPOIB_RX_ARP)
		return input_arp(l, rx);
	if (rx->kind == IPOIB_RX_ND)
		return input_nd(l, rx);
	return -EINVAL;
}

/* ---- data path ------------------------------------------------------------------ */

enum ipoib_rx_kind ipoib_link_rx(struct ipoib_link *l, const struct ibp_wc *wc,
				 struct ipoib_rx *out)
{
	if (wc->status != IBP_WC_OK || !wc->buf) {
		memset(out, 0, sizeof(*out));
		out->kind = IPOIB_RX_DROP;
		out->why = IPOIB_DROP_RX_ERROR;
		l->st.drops[IPOIB_DROP_RX_ERROR]++;
		return IPOIB_RX_DROP;
	}
	ipoib_rx_classify(wc->buf->data, wc->byte_len, wc->has_grh, out);
	out->src_qpn = wc->src_qp;
	out->slid = wc->slid;
	if (out->kind != IPOIB_RX_DROP && wc->src_qp == l->qpn && wc->slid == l->pa.lid) {
		out->kind = IPOIB_RX_DROP;
		out->why = IPOIB_DROP_RX_LOOP;
	}
	if (out->kind == IPOIB_RX_DROP) {
		l->st.drops[out->why]++;
		return IPOIB_RX_DROP;
	}
	l->st.rx_packets++;
	l->st.rx_bytes += out->len + IPOIB_ENCAP_LEN;
	if (out->mcast)
		l->st.rx_mcast++;
	return out->kind;
}

void ipoib_link_repost(struct ipoib_link *l, struct ibp_buf *b)
{
	if (!l->qp || l->ops->post_recv(l->qp, &b, 1) != 1)
		l->ops->buf_put(l->cfg.port, b);
}

void ipoib_link_tx_done(struct ipoib_link *l, const struct ibp_wc *wc)
{
	if (wc->buf)
		l->ops->buf_put(l->cfg.port, wc->buf);
}

static int check_mtu(struct ipoib_link *l, struct ibp_buf *b, uint32_t mtu)
{
	if (b->len > mtu) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	return 0;
}

int ipoib_link_xmit_mcast(struct ipoib_link *l, const union ib_gid *mgid, uint16_t ethertype,
			  struct ibp_buf *b)
{
	struct ipoib_mcast *m;

	if (!l->up) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (check_mtu(l, b, l->mtu) < 0)
		return -EMSGSIZE;
	m = mcast_find(l, mgid);
	if (!m)
		m = mcast_get(l, mgid, false); /* send-only full member */
	if (encap(b, ethertype) < 0) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (!m) {
		drop_buf(l, b, IPOIB_DROP_TX_MCAST_JOIN);
		return -ENOMEM;
	}
	if (!m->joined || !m->ah) {
		/* Wait for the join, three packets at most (as Linux does). */
		if (m->qn == PATH_QLEN) {
			drop_buf(l, m->q[0], IPOIB_DROP_TX_MCAST_JOIN);
			memmove(&m->q[0], &m->q[1], sizeof(m->q[0]) * (PATH_QLEN - 1));
			m->qn--;
		}
		m->q[m->qn++] = b;
		return 1;
	}
	l->st.tx_mcast++;
	return post(l, m->ah, UD_MCAST_QPN, b);
}

int ipoib_link_xmit_bcast(struct ipoib_link *l, uint16_t ethertype, struct ibp_buf *b)
{
	if (!l->bcast) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	return ipoib_link_xmit_mcast(l, &l->bcast->mgid, ethertype, b);
}

int ipoib_link_xmit_hw(struct ipoib_link *l, const struct ipoib_hwaddr *dst, uint16_t ethertype,
		       struct ibp_buf *b)
{
	struct ipoib_path *p;

	if (!l->up) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (check_mtu(l, b, l->mtu) < 0)
		return -EMSGSIZE;
	if (encap(b, ethertype) < 0) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	p = path_get(l, &dst->gid);
	if (!p) {
		drop_buf(l, b, IPOIB_DROP_TX_NO_PATH);
		return -ENOMEM;
	}
	if (p->state == PATH_VALID && p->ah)
		return post(l, p->ah, dst->qpn, b);
	if (p->state == PATH_FAILED) {
		if (now_ms() - p->failed_at < PATH_RETRY_MS) {
			drop_buf(l, b, IPOIB_DROP_TX_NO_PATH);
			return -EHOSTUNREACH;
		}
		path_query(p);
		if (p->state == PATH_VALID && p->ah)
			return post(l, p->ah, dst->qpn, b);
	}
	if (p->qn == PATH_QLEN) {
		drop_buf(l, p->q[0].b, IPOIB_DROP_TX_PATH_QUEUE);
		memmove(&p->q[0], &p->q[1], sizeof(p->q[0]) * (PATH_QLEN - 1));
		p->qn--;
	}
	p->q[p->qn].b = b;
	p->q[p->qn].qpn = dst->qpn;
	p->qn++;
	return 1;
}

int ipoib_link_xmit_ip(struct ipoib_link *l, int family, const uint8_t *dst, uint16_t ethertype,
		       struct ibp_buf *b)
{
	union ib_gid mgid;
	struct neigh_entry *e;
	const struct neigh_link *ll;
	enum neigh_state s;

	if (!l->up) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (family == AF_INET) {
		uint32_t a = ((uint32_t)dst[0] << 24) | ((uint32_t)dst[1] << 16) |
			     ((uint32_t)dst[2] << 8) | dst[3];

		if (a == 0xffffffffu)
			return ipoib_link_xmit_bcast(l, ethertype, b);
		if (ip4_is_multicast(a)) {
			ipoib_mgid_from_ipv4(a, l->pkey, l->scope, &mgid);
			return ipoib_link_xmit_mcast(l, &mgid, ethertype, b);
		}
	} else if (ip6_is_multicast(dst)) {
		ipoib_mgid_from_ipv6(dst, l->pkey, l->scope, &mgid);
		return ipoib_link_xmit_mcast(l, &mgid, ethertype, b);
	}
	e = neigh_lookup(l->neigh, family, dst);
	if (e) {
		s = neigh_entry_state(e);
		ll = neigh_entry_link(e);
		if (ll && ll->usable &&
		    (s == NEIGH_REACHABLE || s == NEIGH_STALE || s == NEIGH_DELAY ||
		     s == NEIGH_PROBE || s == NEIGH_PERMANENT)) {
			if (check_mtu(l, b, ll->mtu) < 0)
				return -EMSGSIZE;
			neigh_entry_used(e, now_ms());
			if (encap(b, ethertype) < 0) {
				drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
				return -EMSGSIZE;
			}
			return post(l, ll->ah, ll->qpn, b);
		}
	}
	/* Resolution: the control side (here the same thread). */
	if (check_mtu(l, b, l->mtu) < 0)
		return -EMSGSIZE;
	if (encap(b, ethertype) < 0) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (neigh_resolve(l->neigh, family, dst, b) < 0)
		return -EHOSTUNREACH; /* dropped and counted through neigh_drop */
	e = neigh_lookup(l->neigh, family, dst);
	if (e)
		bind_neigh(l, e);
	return 1;
}

/* ---- introspection -------------------------------------------------------------- */

bool ipoib_link_is_up(const struct ipoib_link *l)
{
	return l->up;
}

uint32_t ipoib_link_mtu(const struct ipoib_link *l)
{
	return l->up ? l->mtu : 0;
}

uint16_t ipoib_link_pkey(const struct ipoib_link *l)
{
	return l->pkey;
}

void ipoib_link_hwaddr(const struct ipoib_link *l, struct ipoib_hwaddr *out)
{
	*out = l->hw;
}

struct neigh_table *ipoib_link_neigh(struct ipoib_link *l)
{
	return l->neigh;
}

void ipoib_link_stats(const struct ipoib_link *l, struct ipoib_link_stats *out)
{
	*out = l->st;
}

void ipoib_link_mcast_foreach(const struct ipoib_link *l,
			      int (*fn)(void *arg, const struct ipoib_mcast_info *mi), void *arg)
{
	for (const struct ipoib_mcast *m = l->mcasts; m; m = m->next) {
		struct ipoib_mcast_info mi = {
			.mgid = m->mgid,
			.full = m->full,
			.joined = m->joined,
			.mlid = m->g.mlid,
			.qkey = m->g.qkey,
		};

		if (fn(arg, &mi))
			return;
	}
}
