/*
 * The workers' side of the link: receive classification (ipoib_rx_classify, pure; UD
 * and RC receives of the link's QPs through ipoib_link_rx), receive buffers given back
 * (the SRQ first when RC receives took from it), send completions, the sends the
 * forwarding engine builds itself (ipoib_link_send_fill) and their counters. Nothing
 * here logs, allocates or touches a control-thread structure: counters are relaxed
 * atomics the control thread reads, and what needs the control thread (a failed RC
 * send, an RC peer without a connection, an error completion of the UD QP) is a flag
 * it reads every tick.
 *
 * Threads: the worker that polls one of the port's queues, for that queue (one at a time:
 * a queue changes worker only across a grace period): each queue has its own receive
 * counters, SRQ and SRQ debt; ipoib_link_count_tx from any worker. In the host role,
 * its one thread.
 */
#include <stdatomic.h>
#include <string.h>

#include "ipoib/ipoib_pvt.h"
#include "pkt/nd.h"
#include "lib/ib_types.h"

/* From the IPoIB header on (p/n: at least IPOIB_ENCAP_LEN octets). */
static enum ipoib_rx_kind classify_payload(const uint8_t *p, size_t n, struct ipoib_rx *out)
{
	struct ipoib_encap h;

	if (ipoib_encap_decode(p, n, &h) < 0) {
		out->why = IPOIB_DROP_RX_SHORT;
		return out->kind;
	}
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

/* One writer (see dp_rx): a plain add, published relaxed; no locked instruction. */
static inline void dp_count(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* A receive through queue's SRQ (wc->qp is one of our RC QPs). */
static enum ipoib_rx_kind rx_rc(struct ipoib_link *l, unsigned queue, const struct ibp_wc *wc,
				struct ipoib_rx *out)
{
	struct ipoib_conn *c = wc->qp_user;

	atomic_fetch_add_explicit(&l->srq_owed[queue], 1, memory_order_relaxed);
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
		dp_count(&l->dp_rx[queue].drops[out->why], 1);
		return IPOIB_RX_DROP;
	}
	dp_count(&l->dp_rx[queue].packets, 1);
	dp_count(&l->dp_rx[queue].bytes, wc->byte_len);
	dp_count(&l->dp_rx[queue].rc_packets, 1);
	dp_count(&l->dp_rx[queue].rc_bytes, wc->byte_len);
	atomic_fetch_add_explicit(&c->rx_packets, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&c->rx_bytes, wc->byte_len, memory_order_relaxed);
	atomic_store_explicit(&c->active, 1, memory_order_relaxed);
	return out->kind;
}

enum ipoib_rx_kind ipoib_link_rx(struct ipoib_link *l, unsigned queue, const struct ibp_wc *wc,
				 struct ipoib_rx *out)
{
	queue %= l->nq;
	if (l->srq[0] && wc->qp != l->qp)
		return rx_rc(l, queue, wc, out);
	if (wc->status != IBP_WC_OK || !wc->buf) {
		/* The UD QP failed without an event (its error told by a completion only):
		 * the control thread finds out and brings it back. */
		if (wc->status != IBP_WC_OK)
			atomic_store_explicit(&l->ud_qp_check, 1, memory_order_relaxed);
		memset(out, 0, sizeof(*out));
		out->kind = IPOIB_RX_DROP;
		out->why = IPOIB_DROP_RX_ERROR;
		dp_count(&l->dp_rx[queue].drops[IPOIB_DROP_RX_ERROR], 1);
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
		dp_count(&l->dp_rx[queue].drops[out->why], 1);
		return IPOIB_RX_DROP;
	}
	dp_count(&l->dp_rx[queue].packets, 1);
	dp_count(&l->dp_rx[queue].bytes, out->len + IPOIB_ENCAP_LEN);
	if (out->mcast)
		dp_count(&l->dp_rx[queue].mcast, 1);
	return out->kind;
}

void ipoib_link_repost(struct ipoib_link *l, unsigned queue, struct ibp_buf *b)
{
	queue %= l->nq;
	/* Buffers are the port's, all alike: the SRQ gets back what RC receives took. */
	if (l->srq[queue] && atomic_load_explicit(&l->srq_owed[queue], memory_order_relaxed)) {
		atomic_fetch_sub_explicit(&l->srq_owed[queue], 1, memory_order_relaxed);
		b->len = 0;
		if (l->ops->post_srq_recv(l->srq[queue], &b, 1) == 1)
			return;
	}
	if (!l->qp || l->ops->post_recv(l->qp, queue, &b, 1) != 1)
		l->ops->buf_put(l->cfg.port, b);
}

void ipoib_link_tx_done(struct ipoib_link *l, const struct ibp_wc *wc)
{
	if (wc->qp == l->qp && wc->status != IBP_WC_OK) /* a UD send error: SQE */
		atomic_store_explicit(&l->ud_qp_check, 1, memory_order_relaxed);
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
	if (l->srq[0] && ll->len == IPOIB_HWADDR_LEN && (ll->addr[0] & IPOIB_HWADDR_F_RC))
		atomic_store_explicit(&l->want_conn, 1, memory_order_relaxed);
}

struct ipoib_link *ipoib_link_of_rc(const struct ibp_wc *wc)
{
	const struct ipoib_conn *c = wc->qp_user;

	if (!c || c->magic != CONN_MAGIC)
		return NULL;
	return c->l;
}

void ipoib_link_count_tx(struct ipoib_link *l, uint64_t packets, uint64_t bytes)
{
	atomic_fetch_add_explicit(&l->dp_tx_packets, packets, memory_order_relaxed);
	atomic_fetch_add_explicit(&l->dp_tx_bytes, bytes, memory_order_relaxed);
}
