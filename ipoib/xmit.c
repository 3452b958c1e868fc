/*
 * The link's sends: the xmit functions (to an IP neighbour or group, to a hardware
 * address, to a group by MGID, to the broadcast group), which take a buffer with the
 * payload at data + IPOIB_ENCAP_LEN, write the IPoIB header and post it on the UD QP or
 * on a connection -- or queue it while a neighbour, a path, a join or a connection is
 * being set up. A buffer handed in always belongs to the link afterwards (posted,
 * queued, or returned to the pool and counted). Every post goes through the owner's
 * hook (cfg.post) when there is one.
 *
 * Threads: control thread. In the gateway these are the slow path's sends (ARP/ND
 * answers, parked packets, packets that waited): cfg.post hands each to the worker that
 * owns the port. The host role sends from its one thread, ops->post_send directly.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "ipoib/ipoib_pvt.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "lib/evloop.h"
#include "lib/ib_types.h"

void ipoib_drop_buf(struct ipoib_link *l, struct ibp_buf *b, enum ipoib_drop why)
{
	l->st.drops[why]++;
	if (b)
		l->ops->buf_put(l->cfg.port, b);
}

int ipoib_encap_hdr(struct ibp_buf *b, uint16_t ethertype)
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
static int ipoib_post_send(struct ipoib_link *l, struct ibp_send *s)
{
	if (l->cfg.post)
		return l->cfg.post(l->cfg.post_ctx, s);
	return l->ops->post_send(0, s, 1);
}

/* Post an encapsulated buffer. Takes ownership. */
int ipoib_post_ud(struct ipoib_link *l, struct ibp_ah *ah, uint32_t qpn, struct ibp_buf *b)
{
	struct ibp_send s = {
		.qp = l->qp, .ah = ah, .remote_qpn = qpn, .remote_qkey = l->qkey, .buf = b
	};
	uint32_t n = b->len;

	if (!l->up || !l->qp) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (ipoib_post_send(l, &s) != 1) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_POST);
		return -ENOBUFS;
	}
	l->st.tx_packets++;
	l->st.tx_bytes += n;
	return 0;
}

static bool is_nd_payload(const uint8_t *p, size_t n)
{
	return n > 40 && (p[0] >> 4) == 6 && p[6] == 58 && p[40] >= ND_RS && p[40] <= ND_REDIRECT;
}

/* Post an encapsulated buffer on a connection. Takes ownership. */
int ipoib_post_rc(struct ipoib_link *l, struct ipoib_conn *c, struct ibp_buf *b)
{
	struct ibp_send s = { .qp = c->qp, .buf = b };
	uint32_t n = b->len;

	if (!l->up) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (ipoib_post_send(l, &s) != 1) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_POST);
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

/*
 * Unicast to a peer, b encapsulated (b->len includes the IPoIB header): on the
 * connection c when it is up; else on UD (ah, the peer's UD QPN) within ud_mtu. ARP and
 * ND always go on UD. A packet above ud_mtu to a peer with a connection being set up
 * waits on it (three at most, the oldest dropped). Takes ownership.
 */
int ipoib_send_ucast(struct ipoib_link *l, const struct ipoib_hwaddr *peer, struct ipoib_conn *c,
		     struct ibp_ah *ah, uint32_t ud_mtu, struct ibp_buf *b)
{
	const uint8_t *pl = b->data + IPOIB_ENCAP_LEN;
	uint32_t plen = b->len - IPOIB_ENCAP_LEN;
	uint16_t et = (uint16_t)(b->data[0] << 8 | b->data[1]);
	bool force_ud = et == ETH_P_ARP || (et == ETH_P_IPV6 && is_nd_payload(pl, plen));

	if (!force_ud && c && c->up && !c->dead) {
		if (plen > c->mtu) {
			ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
			return -EMSGSIZE;
		}
		return ipoib_post_rc(l, c, b);
	}
	if (!force_ud && l->cm && plen > ud_mtu) {
		if (c && !c->dead && plen <= l->rx_mtu - IPOIB_ENCAP_LEN) {
			if (c->qn == PATH_QLEN) {
				ipoib_drop_buf(l, c->q[0], IPOIB_DROP_TX_CONN);
				memmove(&c->q[0], &c->q[1], sizeof(c->q[0]) * (PATH_QLEN - 1));
				c->qn--;
			}
			c->q[c->qn++] = b;
			l->st.conn_queued++;
			return 1;
		}
		ipoib_drop_buf(l, b, c ? IPOIB_DROP_TX_TOO_BIG : IPOIB_DROP_TX_CONN);
		return -EMSGSIZE;
	}
	if (plen > ud_mtu) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (l->cm && (peer->flags & IPOIB_HWADDR_F_RC) && !force_ud)
		l->st.ud_to_rc_peer++;
	return ipoib_post_ud(l, ah, peer->qpn, b);
}

struct ibp_buf *ipoib_link_buf(struct ipoib_link *l)
{
	struct ibp_buf *b = l->ops->buf_get(l->cfg.port);

	if (b)
		b->len = 0;
	return b;
}

static int check_mtu(struct ipoib_link *l, struct ibp_buf *b, uint32_t mtu)
{
	if (b->len > mtu) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	return 0;
}

int ipoib_link_xmit_mcast(struct ipoib_link *l, const union ib_gid *mgid, uint16_t ethertype,
			  struct ibp_buf *b)
{
	struct ipoib_mcast *m;

	if (!l->up) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (check_mtu(l, b, l->mtu) < 0)
		return -EMSGSIZE;
	m = ipoib_mcast_find(l, mgid);
	if (!m)
		m = ipoib_mcast_get(l, mgid, false); /* send-only full member */
	if (ipoib_encap_hdr(b, ethertype) < 0) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (!m) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_MCAST_JOIN);
		return -ENOMEM;
	}
	if (!m->joined || !m->ah) {
		/* Wait for the join, three packets at most (as Linux does). */
		if (m->qn == PATH_QLEN) {
			ipoib_drop_buf(l, m->q[0], IPOIB_DROP_TX_MCAST_JOIN);
			memmove(&m->q[0], &m->q[1], sizeof(m->q[0]) * (PATH_QLEN - 1));
			m->qn--;
		}
		m->q[m->qn++] = b;
		return 1;
	}
	l->st.tx_mcast++;
	return ipoib_post_ud(l, m->ah, UD_MCAST_QPN, b);
}

int ipoib_link_xmit_bcast(struct ipoib_link *l, uint16_t ethertype, struct ibp_buf *b)
{
	if (!l->bcast) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
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
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
		return -ENETDOWN;
	}
	if (l->cm) /* the peer's connection (the MTU check is ipoib_send_ucast's) */
		c = ipoib_conn_find(l, dst);
	if (!l->cm && check_mtu(l, b, l->mtu) < 0)
		return -EMSGSIZE;
	if (ipoib_encap_hdr(b, ethertype) < 0) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	p = ipoib_path_get(l, &dst->gid);
	if (!p) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_NO_PATH);
		return -ENOMEM;
	}
	if (l->cm && c && c->up && !(p->state == PATH_VALID && p->ah)) {
		/* connected, the path being re-queried: IP goes on; ARP/ND wait below */
		uint16_t et = ethertype;

		if (et != ETH_P_ARP &&
		    !(et == ETH_P_IPV6 &&
		      is_nd_payload(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN)))
			return ipoib_send_ucast(l, dst, c, NULL, l->mtu, b);
	}
	if (l->cm && p->state == PATH_VALID && p->ah) {
		/* IP (not ARP/ND: those stay on UD and must not keep a connection alive)
		 * starts a connection to a peer that advertises RC. */
		if (!c && (dst->flags & IPOIB_HWADDR_F_RC) && ethertype != ETH_P_ARP &&
		    !(ethertype == ETH_P_IPV6 &&
		      is_nd_payload(b->data + IPOIB_ENCAP_LEN, b->len - IPOIB_ENCAP_LEN))) {
			ipoib_conn_request(l, dst, p);
			c = ipoib_conn_find(l, dst);
		}
		return ipoib_send_ucast(l, dst, c, p->ah, ipoib_ud_mtu_of(l, p), b);
	}
	if (l->cm && b->len - IPOIB_ENCAP_LEN > l->mtu) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG); /* no path yet: UD rules */
		return -EMSGSIZE;
	}
	if (p->state == PATH_VALID && p->ah)
		return ipoib_post_ud(l, p->ah, dst->qpn, b);
	if (p->state == PATH_FAILED) {
		if (evloop_now_ms() - p->failed_at < PATH_RETRY_MS) {
			ipoib_drop_buf(l, b, IPOIB_DROP_TX_NO_PATH);
			return -EHOSTUNREACH;
		}
		ipoib_path_query(p);
		if (p->state == PATH_VALID && p->ah)
			return ipoib_post_ud(l, p->ah, dst->qpn, b);
	}
	if (p->qn == PATH_QLEN) {
		ipoib_drop_buf(l, p->q[0].b, IPOIB_DROP_TX_PATH_QUEUE);
		memmove(&p->q[0], &p->q[1], sizeof(p->q[0]) * (PATH_QLEN - 1));
		p->qn--;
	}
	p->q[p->qn].b = b;
	p->q[p->qn].qpn = dst->qpn;
	p->qn++;
	return 1;
}

/* Resolution of a unicast neighbour, with b (NULL: none) queued for it, and the entry's
 * path bound: 0, or neigh_resolve's error (b dropped and counted then). */
static int resolve(struct ipoib_link *l, int family, const uint8_t *dst, struct ibp_buf *b)
{
	struct neigh_entry *e;
	int r = neigh_resolve(l->neigh, family, dst, b);

	if (r < 0)
		return r;
	e = neigh_lookup(l->neigh, family, dst);
	if (e)
		ipoib_bind_neigh(l, e);
	return 0;
}

int ipoib_link_xmit_ip(struct ipoib_link *l, int family, const uint8_t *dst, uint16_t ethertype,
		       struct ibp_buf *b)
{
	union ib_gid mgid;
	struct neigh_entry *e;
	const struct neigh_link *ll;
	enum neigh_state s;

	if (!l->up) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_DOWN);
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

			if (l->cm && ipoib_ll_peer(ll, &hw)) {
				/* Connected mode: the connection when up, else UD (and one
				 * started when the peer advertises RC). */
				struct ipoib_conn *c = ll->conn;

				neigh_entry_used(e, evloop_now_ms());
				if (ipoib_encap_hdr(b, ethertype) < 0) {
					ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
					return -EMSGSIZE;
				}
				if (!c && (hw.flags & IPOIB_HWADDR_F_RC) &&
				    !(ethertype == ETH_P_IPV6 &&
				      is_nd_payload(b->data + IPOIB_ENCAP_LEN,
						    b->len - IPOIB_ENCAP_LEN))) {
					c = ipoib_conn_find(l, &hw);
					if (!c) {
						ipoib_conn_request(l, &hw,
								   ipoib_path_find(l, &hw.gid));
						c = ipoib_conn_find(l, &hw);
					}
				}
				return ipoib_send_ucast(l, &hw, c, ll->ah,
							ll->conn ? l->mtu : ll->mtu, b);
			}
			if (check_mtu(l, b, ll->mtu) < 0)
				return -EMSGSIZE;
			neigh_entry_used(e, evloop_now_ms());
			if (ipoib_encap_hdr(b, ethertype) < 0) {
				ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
				return -EMSGSIZE;
			}
			return ipoib_post_ud(l, ll->ah, ll->qpn, b);
		}
	}
	/* Resolution: the control side (here the same thread). In connected mode a packet
	 * up to the connected MTU may wait (neigh_xmit decides UD or RC once resolved). */
	if (check_mtu(l, b, l->cm ? l->rx_mtu - IPOIB_ENCAP_LEN : l->mtu) < 0)
		return -EMSGSIZE;
	if (ipoib_encap_hdr(b, ethertype) < 0) {
		ipoib_drop_buf(l, b, IPOIB_DROP_TX_TOO_BIG);
		return -EMSGSIZE;
	}
	if (resolve(l, family, dst, b) < 0)
		return -EHOSTUNREACH; /* dropped and counted through neigh_drop */
	return 1;
}

int ipoib_link_resolve(struct ipoib_link *l, int family, const uint8_t *dst)
{
	if (!l->up)
		return -ENETDOWN;
	if (family == AF_INET ? ip4_is_multicast(ip_be32(dst)) || ip_be32(dst) == 0xffffffffu
			      : ip6_is_multicast(dst))
		return 0; /* a group, or the broadcast: nothing to resolve */
	return resolve(l, family, dst, NULL);
}
