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
#include "ipoib/ipoib_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cm/cm_gsi.h"
#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
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
#define CONN_MAGIC       0x49504f43u /* "IPOC" */
#define CONN_RETRY_MS    1000        /* after a failed attempt, before the next */
#define CONN_IDLE_MS     300000
#define EXPIRE_MAX       16
#define CM_PORT_LINKS    16

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
	uint64_t conn_failed_at; /* last connection attempt to this GID that failed */
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

/*
 * One RC connection (connected mode). The cm's handle for the QP ("qp" in cm.h) is this
 * struct. Control thread: everything but the data-path fields; the data path reads
 * qp/peer (immutable while published) and writes the atomics; freed through cfg.defer.
 */
struct ipoib_conn {
	uint32_t magic;
	struct ipoib_conn *next;
	struct ipoib_link *l;
	struct ipoib_hwaddr peer; /* flags RC, UD QPN, GID */
	struct ibp_qp *qp;
	uint32_t qpn, remote_qpn, mtu;
	uint16_t dlid;
	bool up, dead, fail_told;
	uint64_t created;
	struct ibp_buf *q[PATH_QLEN]; /* encapsulated, waiting for up (single-thread users) */
	unsigned qn;
	/* data path -> control thread */
	atomic_uint active, failed;
	atomic_uint_fast64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
};

/* The port's GSI QP, shared by its connected links. Control thread. */
struct ipoib_cm_port {
	const struct ibp_ops *ops;
	struct ibp_port *port;
	struct cm_gsi *gsi;
	struct ipoib_link *links[CM_PORT_LINKS];
	unsigned n_links;
	uint8_t next_tag;
	uint64_t orphans;
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
	/* connected mode (control thread, but srq_owed and want_conn: data path too) */
	struct ipoib_cm_port *cmp;
	bool own_cmp;
	uint8_t cm_tag;
	struct cm *cm;
	struct ibp_srq *srq;
	struct ipoib_conn *conns;
	uint32_t rx_mtu;      /* receive MTU incl. the IPoIB header */
	atomic_uint srq_owed; /* RC receives not yet given back to the SRQ */
	/* UD sends of the workers' data path (ipoib_link_count_tx): any worker may send on
	 * the link, so these are atomics, added into st by ipoib_link_stats. */
	_Atomic uint64_t dp_tx_packets, dp_tx_bytes;
	/* Receive counters of ipoib_link_rx, on the worker polling the link's port (one at a
	 * time: a port changes worker only across a grace period): single-writer relaxed
	 * atomics, so the control thread reads them without a race; added into st by
	 * ipoib_link_stats. */
	struct {
		_Atomic uint64_t packets, bytes, mcast, rc_packets, rc_bytes;
		_Atomic uint64_t drops[IPOIB_DROP_COUNT];
	} dp_rx;
	atomic_uint want_conn; /* the data path saw an RC peer without a connection */
	struct ipoib_hwaddr expired[EXPIRE_MAX];
	unsigned n_expired;
	bool expired_overflow;
};

struct ipoib_path;
static struct ipoib_conn *conn_find(const struct ipoib_link *l, const struct ipoib_hwaddr *peer);
static void conn_request(struct ipoib_link *l, const struct ipoib_hwaddr *peer,
			 struct ipoib_path *p);
static int send_ucast(struct ipoib_link *l, const struct ipoib_hwaddr *peer, struct ipoib_conn *c,
		      struct ibp_ah *ah, uint32_t ud_mtu, struct ibp_buf *b);
static bool ll_peer(const struct neigh_link *ll, struct ipoib_hwaddr *out);
static uint32_t ud_mtu_of(const struct ipoib_link *l, const struct ipoib_path *p);

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
	[IPOIB_DROP_TX_CONN] = "tx_conn",
};

const char *ipoib_drop_name(enum ipoib_drop d)
{
	return (unsigned)d < IPOIB_DROP_COUNT ? drop_names[d] : "?";
}

/* ---- receive classification ------------------------------------------------------ */

/* From the IPoIB header on (p/n: at least IPOIB_ENCAP_LEN octets). */
static enum ipoib_rx_kind classify_payload(const uint8_t *p, size_t n, struct ipoib_rx *out)
{
	struct ipoib_encap h;

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

enum ipoib_rx_kind ipoib_rx_classify(const uint8_t *buf, size_t len, bool has_grh,
				     struct ipoib_rx *out)
{
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
	return classify_payload(buf + IBP_GRH_AREA, len - IBP_GRH_AREA, out);
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

/*
 * Every send of the link goes through here. A gateway whose worker owns the port's data
 * path gives a post hook (cfg.post) that posts directly on the worker and hands sends
 * made on the control thread (ARP/ND replies, parked packets) to the worker's ring;
 * a single-threaded host leaves it NULL. Returns 1 when the send was taken.
 */
static int link_post(struct ipoib_link *l, struct ibp_send *s)
{
	if (l->cfg.post)
		return l->cfg.post(l->cfg.post_ctx, s);
	return l->ops->post_send(s, 1);
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
	if (link_post(l, &s) != 1) {
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
	if (ll->conn) /* connected mode: the connection's MTU (published by cb_up) */
		ll->mtu = ((const struct ipoib_conn *)ll->conn)->mtu;
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
	if (ra->l->cm && ll.usable && !ll.conn) {
		struct ipoib_hwaddr hw;

		if (ll_peer(cur, &hw))
			conn_request(ra->l, &hw, (struct ipoib_path *)ra->p);
	}
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
	if (l->cm) {
		/* Connected mode: the peer's connection, or one started for it. */
		struct ipoib_hwaddr hw;
		struct ipoib_conn *c = NULL;

		if (ll_peer(cur, &hw)) {
			c = conn_find(l, &hw);
			if (!c && p->state == PATH_VALID)
				conn_request(l, &hw, p);
		}
		ll.conn = c && c->up ? c : NULL;
	}
	bind_to_path(l, &ll, p);
	if (ll.usable != cur->usable || ll.ah != cur->ah || ll.conn != cur->conn ||
	    ll.mtu != cur->mtu)
		neigh_set_link(l->neigh, e, &ll);
}

/* ---- connected mode ------------------------------------------------------------- */

static bool same_peer(const struct ipoib_hwaddr *a, const struct ipoib_hwaddr *b)
{
	return a->qpn == b->qpn && ib_gid_equal(&a->gid, &b->gid);
}

static bool ll_peer(const struct neigh_link *ll, struct ipoib_hwaddr *out)
{
	return ll && ll->len == IPOIB_HWADDR_LEN &&
	       ipoib_hwaddr_decode(ll->addr, IPOIB_HWADDR_LEN, out) == 0;
}

static bool is_nd_payload(const uint8_t *p, size_t n)
{
	return n > 40 && (p[0] >> 4) == 6 && p[6] == 58 && p[40] >= ND_RS && p[40] <= ND_REDIRECT;
}

/* The connection to peer (flags ignored): the up one, else one being set up; NULL. */
static struct ipoib_conn *conn_find(const struct ipoib_link *l, const struct ipoib_hwaddr *peer)
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

/* Post an encapsulated buffer on a connection. Takes ownership. */
static int post_rc(struct ipoib_link *l, struct ipoib_conn *c, struct ibp_buf *b)
{
	struct ibp_send s = { .qp = c->qp, .buf = b };
	uint32_t n = b->len;

	if (!l->up) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (link_post(l, &s) != 1) {
		drop_buf(l, b, IPOIB_DROP_TX_POST);
		return -ENOBUFS;
	}
	l->st.tx_packets++;
	l->st.tx_bytes += n;
	l->st.rc_tx_packets++;
	l->st.rc_tx_bytes += n;
	atomic_fetch_add_explicit(&c->tx_packets, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->tx_bytes, n, memory_order_relaxed);
	atomic_store_explicit(&c->active, 1, memory_order_relaxed);
	return 0;
}

static void conn_drop_queue(struct ipoib_link *l, struct ipoib_conn *c)
{
	for (unsigned i = 0; i < c->qn; i++)
		drop_buf(l, c->q[i], IPOIB_DROP_TX_CONN);
	c->qn = 0;
}

/* The IP MTU of UD to a GID: the broadcast group's, or the path's when smaller. */
static uint32_t ud_mtu_of(const struct ipoib_link *l, const struct ipoib_path *p)
{
	uint32_t m = l->mtu;

	if (p && p->state == PATH_VALID && ib_mtu_bytes(p->sp.mtu) &&
	    ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN < m)
		m = ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN;
	return m;
}

static void conn_request(struct ipoib_link *l, const struct ipoib_hwaddr *peer,
			 struct ipoib_path *p);

/*
 * Unicast to a peer, b encapsulated (b->len includes the IPoIB header): on the
 * connection c when it is up; else on UD (ah, the peer's UD QPN) within ud_mtu. ARP and
 * ND always go on UD. A packet above ud_mtu to a peer with a connection being set up
 * waits on it (three at most, the oldest dropped). Takes ownership.
 */
static int send_ucast(struct ipoib_link *l, const struct ipoib_hwaddr *peer, struct ipoib_conn *c,
		      struct ibp_ah *ah, uint32_t ud_mtu, struct ibp_buf *b)
{
	const uint8_t *pl = b->data + IPOIB_ENCAP_LEN;
	uint32_t plen = b->len - IPOIB_ENCAP_LEN;
	uint16_t et = (uint16_t)(b->data[0] << 8 | b->data[1]);
	bool force_ud = et == ETH_P_ARP || (et == ETH_P_IPV6 && is_nd_payload(pl, plen));

	if (!force_ud && c && c->up && !c->dead) {
		if (plen > c->mtu) {
			drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
			return -EMSGSIZE;
		}
		return post_rc(l, c, b);
	}
	if (!force_ud && l->cm && plen > ud_mtu) {
		if (c && !c->dead && plen <= l->rx_mtu - IPOIB_ENCAP_LEN) {
			if (c->qn == PATH_QLEN) {
				drop_buf(l, c->q[0], IPOIB_DROP_TX_CONN);
				memmove(&c->q[0], &c->q[1], sizeof(c->q[0]) * (PATH_QLEN - 1));
				c->qn--;
			}
			c->q[c->qn++] = b;
			l->st.conn_queued++;
			return 1;
		}
		drop_buf(l, b, c ? IPOIB_DROP_TX_TOO_BIG : IPOIB_DROP_TX_CONN);
		return -EMSGSIZE;
	}
	if (plen > ud_mtu) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (l->cm && (peer->flags & IPOIB_HWADDR_F_RC) && !force_ud)
		l->st.ud_to_rc_peer++;
	return post(l, ah, peer->qpn, b);
}

struct publish_arg {
	struct ipoib_link *l;
	struct ipoib_conn *c;
	bool on;
};

static void bind_to_path(struct ipoib_link *l, struct neigh_link *ll, const struct ipoib_path *p);

static void publish_one(void *arg, struct neigh_table *t, struct neigh_entry *e)
{
	struct publish_arg *pa = arg;
	const struct neigh_link *cur = neigh_entry_link(e);
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct ipoib_path *p;

	if (!ll_peer(cur, &hw) || !same_peer(&hw, &pa->c->peer))
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
	p = path_find(pa->l, &hw.gid);
	if (p)
		bind_to_path(pa->l, &ll, p);
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

static void conn_request(struct ipoib_link *l, const struct ipoib_hwaddr *peer,
			 struct ipoib_path *p)
{
	struct cm_path_info pi;
	char hs[IPOIB_HWADDR_STRLEN];
	int r;

	if (!l->cm || !l->up || !(peer->flags & IPOIB_HWADDR_F_RC) || !p ||
	    p->state != PATH_VALID || conn_find(l, peer))
		return;
	if (p->conn_failed_at && now_ms() - p->conn_failed_at < CONN_RETRY_MS)
		return;
	memset(&pi, 0, sizeof(pi));
	pi.slid = l->pa.lid;
	pi.dlid = p->sp.dlid;
	pi.sgid = l->gid;
	pi.dgid = p->gid;
	pi.has_grh = ib_gid_prefix(&p->gid) != ib_gid_prefix(&l->gid) || p->sp.hop_limit > 1;
	pi.flow_label = p->sp.flow_label;
	pi.hop_limit = p->sp.hop_limit;
	pi.traffic_class = p->sp.tclass;
	pi.sl = p->sp.sl;
	pi.packet_rate = p->sp.rate;
	pi.packet_lifetime = p->sp.packet_life;
	pi.mtu = (enum ib_mtu)p->sp.mtu;
	pi.pkey = l->pkey;
	l->st.conn_requests++;
	ipoib_hwaddr_format(peer, hs, sizeof(hs));
	log_info("%s: connecting to %s (DLID %u)", l->name, hs, pi.dlid);
	r = cm_connect(l->cm, peer, &pi);
	if (r < 0 && r != -EALREADY) {
		p->conn_failed_at = now_ms();
		log_info("%s: cannot connect to %s: %s", l->name, hs, strerror(-r));
	}
}

static int cb_qp_create(void *ctx, const struct cm_conn_info *ci, void **qp, uint32_t *qpn)
{
	struct ipoib_link *l = ctx;
	struct ipoib_conn *c = calloc(1, sizeof(*c));
	struct ibp_qp_init qi = {
		.type = IBP_QPT_RC,
		.pkey_index = l->pkey_index,
		.send_depth = l->cfg.send_depth,
		.srq = l->srq,
	};
	int r;

	if (!c)
		return -ENOMEM;
	qi.user = c;
	c->magic = CONN_MAGIC;
	c->l = l;
	c->peer = ci->peer;
	c->created = now_ms();
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
	atomic_fetch_add_explicit(&l->srq_owed, 1, memory_order_relaxed);
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
			drop_buf(l, c->q[i], IPOIB_DROP_TX_TOO_BIG);
		else
			post_rc(l, c, c->q[i]);
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
		struct ipoib_path *p = path_find(l, &c->peer.gid);

		l->st.conn_failed++;
		if (p && why != CM_CLOSE_CROSSED && why != CM_CLOSE_REPLACED)
			p->conn_failed_at = now_ms();
	}
	log_info("%s: connection to %s %s: %s", l->name, hs, was_up ? "down" : "not set up",
		 cm_close_reason_name(why));
	conn_drop_queue(l, c);
}

static const struct cm_callbacks link_cm_cb = {
	.qp_create = cb_qp_create,
	.qp_connect = cb_qp_connect,
	.qp_destroy = cb_qp_destroy,
	.up = cb_up,
	.down = cb_down,
};

/* ---- the port's GSI QP -------------------------------------------------------------- */

int ipoib_cm_port_open(const struct ibp_ops *ops, struct ibp_port *port, struct ipoib_cm_port **out)
{
	struct cm_gsi_config gc = { .ops = ops, .port = port };
	struct ipoib_cm_port *cp = calloc(1, sizeof(*cp));
	int r;

	if (!cp)
		return -ENOMEM;
	cp->ops = ops;
	cp->port = port;
	cp->next_tag = 1;
	r = cm_gsi_open(&gc, &cp->gsi);
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
	cm_gsi_close(cp->gsi);
	free(cp);
}

const struct cm_gsi *ipoib_cm_port_gsi(const struct ipoib_cm_port *cp)
{
	return cp ? cp->gsi : NULL;
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

bool ipoib_cm_port_completion(struct ipoib_cm_port *cp, const struct ibp_wc *wc)
{
	if (!cp || wc->qp != cm_gsi_qp(cp->gsi))
		return false;
	cm_gsi_completion(cp->gsi, wc, cmp_deliver, cp);
	return true;
}

static int cmp_add(struct ipoib_cm_port *cp, struct ipoib_link *l)
{
	if (cp->n_links == CM_PORT_LINKS)
		return -ENOSPC;
	cp->links[cp->n_links++] = l;
	l->cm_tag = cp->next_tag++;
	return 0;
}

static void cmp_del(struct ipoib_cm_port *cp, struct ipoib_link *l)
{
	for (unsigned i = 0; i < cp->n_links; i++)
		if (cp->links[i] == l) {
			cp->links[i] = cp->links[--cp->n_links];
			return;
		}
}

void ipoib_cm_port_set_post(struct ipoib_cm_port *cp, int (*post_fn)(void *ctx, struct ibp_send *s),
			    int (*post_recv)(void *ctx, struct ibp_qp *qp, struct ibp_buf *b),
			    void *ctx)
{
	if (cp && cp->gsi)
		cm_gsi_set_post(cp->gsi, post_fn, post_recv, ctx);
}

bool ipoib_link_gsi_completion(struct ipoib_link *l, const struct ibp_wc *wc)
{
	return l && l->cmp && ipoib_cm_port_completion(l->cmp, wc);
}

struct ibp_qp *ipoib_link_ud_qp(const struct ipoib_link *l)
{
	return l->qp;
}

uint32_t ipoib_link_qkey(const struct ipoib_link *l)
{
	return l->qkey;
}

struct ibp_qp *ipoib_link_gsi_qp(const struct ipoib_link *l)
{
	return l->cmp && l->cmp->gsi ? cm_gsi_qp(l->cmp->gsi) : NULL;
}

struct ipoib_link *ipoib_link_of_rc(const struct ibp_wc *wc)
{
	const struct ipoib_conn *c = wc->qp_user;

	if (!c || c->magic != CONN_MAGIC)
		return NULL;
	return c->l;
}

struct ipoib_cm_port *ipoib_link_cm_port(struct ipoib_link *l)
{
	return l->own_cmp ? l->cmp : NULL;
}

/* SRQ and cm, once the UD QP (our QPN) exists. */
static int link_cm_start(struct ipoib_link *l)
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
	r = l->ops->create_srq(l->cfg.port, l->cfg.recv_depth, &l->srq);
	if (r < 0) {
		log_errno(LOG_ERR, -r, "%s: cannot create the SRQ", l->name);
		return r;
	}
	for (unsigned i = 0; i < l->cfg.recv_depth; i++) {
		b = l->ops->buf_get(l->cfg.port);
		if (!b)
			break;
		if (l->ops->post_srq_recv(l->srq, &b, 1) != 1) {
			l->ops->buf_put(l->cfg.port, b);
			break;
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
	cc.transport = &cm_gsi_transport;
	cc.transport_ctx = l->cmp->gsi;
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

static void link_cm_stop(struct ipoib_link *l)
{
	if (l->cm) {
		cm_free(l->cm); /* DREQs; down + qp_destroy for each connection */
		l->cm = NULL;
	}
	if (l->srq) {
		l->ops->destroy_srq(l->srq);
		l->srq = NULL;
	}
}

static void conn_disconnect_all(struct ipoib_link *l)
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

struct ref_arg {
	const struct ipoib_hwaddr *peer;
	bool found;
};

static int ref_one(void *arg, const struct neigh_info *ni)
{
	struct ref_arg *ra = arg;
	struct ipoib_hwaddr hw;

	if (ni->has_link && ll_peer(&ni->link, &hw) && same_peer(&hw, ra->peer)) {
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
	if (ll && ll->usable && !ll->conn && ll_peer(ll, &hw) && (hw.flags & IPOIB_HWADDR_F_RC))
		conn_request(l, &hw, path_find(l, &hw.gid));
}

/* Control thread, every tick: what the data path reported, expired neighbours. */
static void conn_tick(struct ipoib_link *l)
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
				cm_disconnect(l->cm, &c->peer);
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

static void neigh_release(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll)
{
	struct ipoib_link *l = ctx;
	struct ipoib_hwaddr hw;

	(void)e;
	if (!l->cm || !ll_peer(ll, &hw) || !conn_find(l, &hw))
		return;
	for (unsigned i = 0; i < l->n_expired; i++)
		if (same_peer(&l->expired[i], &hw))
			return;
	if (l->n_expired < EXPIRE_MAX)
		l->expired[l->n_expired++] = hw;
	else
		l->expired_overflow = true;
}

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
	struct ipoib_conn *c = conn_find(l, peer);
	struct ipoib_path *p = path_find(l, &peer->gid);

	if (c && c->up)
		return c->mtu;
	if (l->cm && (c || ((peer->flags & IPOIB_HWADDR_F_RC) &&
			    !(p && p->conn_failed_at && now_ms() - p->conn_failed_at < 10000))))
		return l->rx_mtu - IPOIB_ENCAP_LEN;
	return ud_mtu_of(l, p);
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
		/* Paths learned before a port event: query them again. */
		ipoib_link_paths_requery(l);
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
	struct ipoib_hwaddr hw;

	(void)e;
	if (!l->cm || !ll_peer(ll, &hw)) {
		post(l, ll->ah, ll->qpn, pkt);
		return;
	}
	send_ucast(l, &hw, ll->conn ? ll->conn : conn_find(l, &hw), ll->ah,
		   ll->conn ? l->mtu : ll->mtu, pkt);
}

static void neigh_drop(void *ctx, void *pkt)
{
	drop_buf(ctx, pkt, IPOIB_DROP_TX_NEIGH);
}

static void neigh_release(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll);

static const struct neigh_ops link_neigh_ops = {
	.solicit = neigh_solicit,
	.xmit = neigh_xmit,
	.drop = neigh_drop,
	.release = neigh_release,
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
	if (cfg->connected) {
		/* The port's GSI QP: shared, or our own. */
		l->cmp = cfg->cm_port;
		if (!l->cmp) {
			ret = ipoib_cm_port_open(l->ops, cfg->port, &l->cmp);
			if (ret < 0) {
				log_errno(LOG_ERR, -ret, "%s: no GSI QP for connected mode",
					  l->name);
				goto fail_cm;
			}
			l->own_cmp = true;
		}
		ret = cmp_add(l->cmp, l);
		if (ret < 0)
			goto fail_cm;
	}
	*out = l;
	return 0;
fail_cm:
	if (l->own_cmp)
		ipoib_cm_port_close(l->cmp);
	if (l->tick)
		evtimer_free(l->tick);
	neigh_table_free(l->neigh);
	free(l);
	return ret;
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
	l->hw.flags = l->cfg.connected ? IPOIB_HWADDR_F_RC : 0;
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
	if (l->cfg.connected && !l->cm && (ret = link_cm_start(l)) < 0) {
		/* Without the cm the RC flag would be a lie: datagram only. */
		link_cm_stop(l);
		l->hw.flags = 0;
		ipoib_hwaddr_encode(&l->hw, l->hw_bytes, sizeof(l->hw_bytes));
		log_warning("%s: connected mode failed: running in datagram mode", l->name);
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
		conn_disconnect_all(l);
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

void ipoib_link_paths_requery(struct ipoib_link *l)
{
	for (struct ipoib_path *p = l->paths; p; p = p->next)
		if (p->state != PATH_RESOLVING || !p->querying)
			path_query(p);
}

unsigned ipoib_link_cm_disconnect_dlid(struct ipoib_link *l, uint16_t dlid)
{
	return l->cm ? cm_disconnect_dlid(l->cm, dlid) : 0;
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
	link_cm_stop(l);
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
	if (l->cmp) {
		cmp_del(l->cmp, l);
		if (l->own_cmp)
			ipoib_cm_port_close(l->cmp);
	}
	free(l);
}

void ipoib_link_port_event(struct ipoib_link *l, const struct ibp_event *ev)
{
	switch (ev->type) {
	case IBP_EVENT_QP_FATAL:
		/* One of our RC QPs failed (retries exhausted): tear its connection down;
		 * the next packet to the peer starts a new one. */
		for (struct ipoib_conn *c = l->conns; c; c = c->next)
			if (c->qp == ev->qp && !c->dead && !c->fail_told) {
				c->fail_told = true;
				l->st.rc_tx_errors++;
				cm_disconnect(l->cm, &c->peer);
				break;
			}
		break;
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

int ipoib_link_neigh_learn(struct ipoib_link *l, int family, const uint8_t *addr,
			   const uint8_t hwaddr[IPOIB_HWADDR_LEN])
{
	struct ipoib_hwaddr hw;
	struct neigh_link ll;
	struct neigh_entry *e;

	if (family != AF_INET && family != AF_INET6)
		return -EAFNOSUPPORT;
	if (ipoib_hwaddr_decode(hwaddr, IPOIB_HWADDR_LEN, &hw) < 0)
		return -EINVAL;
	if (neigh_lookup(l->neigh, family, addr))
		return 0;
	ll = make_link(l, &hw);
	e = neigh_update(l->neigh, family, addr, &ll, NEIGH_F_CREATE);
	if (!e)
		return -ENOSPC;
	bind_neigh(l, e);
	return 1;
}

int ipoib_link_del_addr(struct ipoib_link *l, int family, const uint8_t *addr)
{
	if (family == AF_INET) {
		for (unsigned i = 0; i < l->n_v4; i++)
			if (!memcmp(l->v4[i], addr, 4)) {
				memcpy(l->v4[i], l->v4[--l->n_v4], 4);
				return 0;
			}
		return -ENOENT;
	}
	if (family != AF_INET6)
		return -EAFNOSUPPORT;
	for (unsigned i = 0; i < l->n_v6; i++)
		if (!memcmp(l->v6[i], addr, 16)) {
			memcpy(l->v6[i], l->v6[--l->n_v6], 16);
			return 0;
		}
	return -ENOENT;
}

uint64_t ipoib_link_tick(struct ipoib_link *l)
{
	uint64_t now = now_ms();

	uint64_t next;

	/* Paths that failed: retried on the next use (bind_neigh / xmit_hw). */
	(void)now;
	next = neigh_tick(l->neigh);
	conn_tick(l);
	if (l->cm && !l->cfg.loop) {
		uint64_t d;

		cm_tick(l->cm);
		d = cm_next_deadline(l->cm);
		if (d && d > now && d - now < next)
			next = d - now;
	}
	return next;
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

/* A receive through the SRQ (wc->qp is one of our RC QPs). */
/* One writer (see dp_rx): a plain add, published relaxed; no locked instruction. */
static inline void dp_count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static enum ipoib_rx_kind rx_rc(struct ipoib_link *l, const struct ibp_wc *wc, struct ipoib_rx *out)
{
	struct ipoib_conn *c = wc->qp_user;

	atomic_fetch_add_explicit(&l->srq_owed, 1, memory_order_relaxed);
	memset(out, 0, sizeof(*out));
	out->kind = IPOIB_RX_DROP;
	out->rc = true;
	if (wc->status != IBP_WC_OK || !wc->buf || !c || c->magic != CONN_MAGIC || c->l != l) {
		out->why = IPOIB_DROP_RX_ERROR;
	} else if (wc->byte_len < IPOIB_ENCAP_LEN) {
		out->why = IPOIB_DROP_RX_SHORT;
	} else {
		classify_payload(wc->buf->data, wc->byte_len, out);
		out->src_qpn = c->peer.qpn;
		out->slid = c->dlid;
		out->sgid = c->peer.gid;
	}
	if (out->kind == IPOIB_RX_DROP) {
		dp_count(&l->dp_rx.drops[out->why], 1);
		return IPOIB_RX_DROP;
	}
	dp_count(&l->dp_rx.packets, 1);
	dp_count(&l->dp_rx.bytes, wc->byte_len);
	dp_count(&l->dp_rx.rc_packets, 1);
	dp_count(&l->dp_rx.rc_bytes, wc->byte_len);
	atomic_fetch_add_explicit(&c->rx_packets, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->rx_bytes, wc->byte_len, memory_order_relaxed);
	atomic_store_explicit(&c->active, 1, memory_order_relaxed);
	return out->kind;
}

enum ipoib_rx_kind ipoib_link_rx(struct ipoib_link *l, const struct ibp_wc *wc,
				 struct ipoib_rx *out)
{
	if (l->srq && wc->qp != l->qp)
		return rx_rc(l, wc, out);
	if (wc->status != IBP_WC_OK || !wc->buf) {
		memset(out, 0, sizeof(*out));
		out->kind = IPOIB_RX_DROP;
		out->why = IPOIB_DROP_RX_ERROR;
		dp_count(&l->dp_rx.drops[IPOIB_DROP_RX_ERROR], 1);
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
		dp_count(&l->dp_rx.drops[out->why], 1);
		return IPOIB_RX_DROP;
	}
	dp_count(&l->dp_rx.packets, 1);
	dp_count(&l->dp_rx.bytes, out->len + IPOIB_ENCAP_LEN);
	if (out->mcast)
		dp_count(&l->dp_rx.mcast, 1);
	return out->kind;
}

void ipoib_link_repost(struct ipoib_link *l, struct ibp_buf *b)
{
	/* Buffers are the port's, all alike: the SRQ gets back what RC receives took. */
	if (l->srq && atomic_load_explicit(&l->srq_owed, memory_order_relaxed)) {
		atomic_fetch_sub_explicit(&l->srq_owed, 1, memory_order_relaxed);
		b->len = 0;
		if (l->ops->post_srq_recv(l->srq, &b, 1) == 1)
			return;
	}
	if (!l->qp || l->ops->post_recv(l->qp, &b, 1) != 1)
		l->ops->buf_put(l->cfg.port, b);
}

void ipoib_link_tx_done(struct ipoib_link *l, const struct ibp_wc *wc)
{
	if (wc->qp != l->qp && wc->status != IBP_WC_OK) {
		struct ipoib_conn *c = wc->qp_user;

		/* an RC send failed: the control thread tears the connection down */
		if (c && c->magic == CONN_MAGIC && c->l == l)
			atomic_store_explicit(&c->failed, 1, memory_order_relaxed);
	}
	if (wc->buf)
		l->ops->buf_put(l->cfg.port, wc->buf);
}

void ipoib_link_send_fill(struct ipoib_link *l, const struct neigh_link *ll, struct ibp_send *s)
{
	struct ipoib_conn *c = ll->conn;

	if (c) {
		s->qp = c->qp;
		s->ah = NULL;
		s->remote_qpn = 0;
		s->remote_qkey = 0;
		atomic_fetch_add_explicit(&c->tx_packets, 1, memory_order_relaxed);
		if (s->buf)
			atomic_fetch_add_explicit(&c->tx_bytes, s->buf->len, memory_order_relaxed);
		atomic_store_explicit(&c->active, 1, memory_order_relaxed);
		return;
	}
	s->qp = l->qp;
	s->ah = ll->ah;
	s->remote_qpn = ll->qpn;
	s->remote_qkey = l->qkey;
	if (l->srq && ll->len == IPOIB_HWADDR_LEN && (ll->addr[0] & IPOIB_HWADDR_F_RC))
		atomic_store_explicit(&l->want_conn, 1, memory_order_relaxed);
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

	struct ipoib_conn *c = NULL;

	if (!l->up) {
		drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (l->cm) /* the peer's connection (the MTU check is send_ucast's) */
		c = conn_find(l, dst);
	if (!l->cm && check_mtu(l, b, l->mtu) < 0)
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
	if (l->cm && c && c->up && !(p->state == PATH_VALID && p->ah)) {
		/* connected, the path being re-queried: IP goes on; ARP/ND wait below */
		uint16_t et = ethertype;

		if (et != ETH_P_ARP &&
		    !(et == ETH_P_IPV6 &&
		      is_nd_payload(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN)))
			return send_ucast(l, dst, c, NULL, l->mtu, b);
	}
	if (l->cm && p->state == PATH_VALID && p->ah) {
		/* IP (not ARP/ND: those stay on UD and must not keep a connection alive)
		 * starts a connection to a peer that advertises RC. */
		if (!c && (dst->flags & IPOIB_HWADDR_F_RC) && ethertype != ETH_P_ARP &&
		    !(ethertype == ETH_P_IPV6 &&
		      is_nd_payload(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN))) {
			conn_request(l, dst, p);
			c = conn_find(l, dst);
		}
		return send_ucast(l, dst, c, p->ah, ud_mtu_of(l, p), b);
	}
	if (l->cm && b->len - IPOIB_ENCAP_LEN > l->mtu) {
		drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG); /* no path yet: UD rules */
		return -EMSGSIZE;
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
			struct ipoib_hwaddr hw;

			if (l->cm && ll_peer(ll, &hw)) {
				/* Connected mode: the connection when up, else UD (and one
				 * started when the peer advertises RC). */
				struct ipoib_conn *c = ll->conn;

				neigh_entry_used(e, now_ms());
				if (encap(b, ethertype) < 0) {
					drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
					return -EMSGSIZE;
				}
				if (!c && (hw.flags & IPOIB_HWADDR_F_RC) &&
				    !(ethertype == ETH_P_IPV6 &&
				      is_nd_payload(b->data + IPOIB_ENCAP_LEN,
						    b->len - IPOIB_ENCAP_LEN))) {
					c = conn_find(l, &hw);
					if (!c) {
						conn_request(l, &hw, path_find(l, &hw.gid));
						c = conn_find(l, &hw);
					}
				}
				return send_ucast(l, &hw, c, ll->ah, ll->conn ? l->mtu : ll->mtu,
						  b);
			}
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
	/* Resolution: the control side (here the same thread). In connected mode a packet
	 * up to the connected MTU may wait (neigh_xmit decides UD or RC once resolved). */
	if (check_mtu(l, b, l->cm ? l->rx_mtu - IPOIB_ENCAP_LEN : l->mtu) < 0)
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

void ipoib_link_count_tx(struct ipoib_link *l, uint64_t packets, uint64_t bytes)
{
	atomic_fetch_add_explicit(&l->dp_tx_packets, packets, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->dp_tx_bytes, bytes, memory_order_relaxed);
}

static uint64_t dp_read(const _Atomic uint64_t *c)
{
	return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

void ipoib_link_stats(const struct ipoib_link *l, struct ipoib_link_stats *out)
{
	*out = l->st;
	out->tx_packets += dp_read(&l->dp_tx_packets);
	out->tx_bytes += dp_read(&l->dp_tx_bytes);
	out->rx_packets += dp_read(&l->dp_rx.packets);
	out->rx_bytes += dp_read(&l->dp_rx.bytes);
	out->rx_mcast += dp_read(&l->dp_rx.mcast);
	out->rc_rx_packets += dp_read(&l->dp_rx.rc_packets);
	out->rc_rx_bytes += dp_read(&l->dp_rx.rc_bytes);
	for (unsigned i = 0; i < IPOIB_DROP_COUNT; i++)
		out->drops[i] += dp_read(&l->dp_rx.drops[i]);
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
