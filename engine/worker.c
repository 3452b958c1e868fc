/*
 * The forwarding threads (engine/worker.h): poll the ports this worker owns in bursts,
 * merge the TCP segments of a flow received from IPoIB (receive coalescing), run
 * engine/forward.h over each burst (its common case stage by stage, fwd_fast_burst; the
 * rest per packet, in the burst's order), transmit in bursts per egress interface, serve the
 * control->worker ring, punt to the worker->control ring, and sleep on the ports' fds
 * and the ring's eventfd when idle (RCU-offline meanwhile).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include <urcu-qsbr.h>

#include "engine/capture.h"
#include "engine/engine_pvt.h"
#include "engine/forward.h"
#include "ipoib/ipoib_link.h"
#include "engine/ring.h"
#include "engine/worker.h"
#include "lib/log.h"
#include "lib/rt_sched.h"
#include "pkt/gro.h"

#define BURST_MAX 64
#define TXQ       64
#define PUNTQ     64
/* Buffers for merged packets: a forwarded one may be referenced by a queued send until
 * flush_all, so a burst can have several in flight. */
#define GRO_BUFS 4
/* The port queues one worker may poll: an IB port may give it more than one (after a
 * reload lowered the worker count below the port's queues). */
#define WPORTS_MAX (FWD_IF_MAX * IBP_QUEUES_MAX)

struct wport {
	const struct fwd_if_ops *ops; /* its kind's */
	const void *port;             /* its identity: the ethp_port or the ibp_port */
	const struct ethp_ops *eops;
	struct ethp_port *eth; /* polled through this worker's queue (its id) */
	uint32_t eth_if;       /* the Ethernet interface of this port */
	const struct ibp_ops *iops;
	struct ibp_port *ib;
	unsigned queue; /* the port's queue this worker polls (Ethernet: the worker's id) */
	/* IPoIB: the port's links as of the snapshot (UD QP: NULL while down). */
	unsigned nlinks;
	struct {
		struct ipoib_link *l;
		struct ibp_qp *ud;
	} links[FWD_IF_MAX];
};

struct txq {
	unsigned n;
	struct ethp_tx eth[TXQ];
	struct ibp_send ib[TXQ];
	bool fwd[TXQ]; /* from the data path (the link counts the control thread's itself) */
	const struct fwd_if *ifp;
};

struct wstate {
	struct fwd_engine *e;
	unsigned id;
	struct fwd_worker_config cfg;
	_Atomic unsigned spin_us; /* cfg.spin_us, changed live (fwd_worker_set_spin) */
	struct fwd_ctx ctx;
	struct fwd_result res;
	struct fwd_stats *st;
	int epfd;
	uint64_t gen;
	unsigned nports;
	struct wport ports[WPORTS_MAX];
	struct txq txq[FWD_IF_MAX];
	unsigned npunt;
	void *punts[PUNTQ];
	struct fwd_punt_rl rl; /* punt limits per source and class (engine/engine.h) */
	unsigned nret;         /* control messages to hand back after the flush */
	void *rets[BURST_MAX];
	bool hb_handed; /* something went to the heartbeat thread: write its eventfd */
	struct ethp_rx erx[BURST_MAX];
	struct ibp_wc wcs[BURST_MAX];
	struct ipoib_link *wl[BURST_MAX]; /* the link of each receive completion */
	/* a receive burst between classification and forwarding */
	struct ipoib_rx rx[BURST_MAX];
	const struct fwd_if *rx_if[BURST_MAX];
	uint8_t *ip[BURST_MAX]; /* fwd_fast_burst's candidates and what it made of them */
	size_t ip_len[BURST_MAX];
	struct fwd_tx fast_tx[BURST_MAX];
	/* Receive coalescing of IPoIB TCP (pkt/gro.h): consecutive segments of one flow in
	 * a receive burst, routed out of an Ethernet port that sends GSO frames whole
	 * (fwd_gro_wanted), are forwarded as one packet, as the Linux IPoIB driver's NAPI
	 * GRO hands its stack. Held within one poll_ib only (nothing crosses a quiescent
	 * state); built in gro_mem's buffer gro_used (those before it queued for sending). */
	struct gro_tcp gro;
	const struct fwd_if *gro_if;
	struct ipoib_rx gro_rx; /* the first segment's receive (a punt's addresses) */
	unsigned gro_used;
	uint8_t *gro_mem; /* GRO_BUFS x GRO_MAX_LEN */
};
_Static_assert(BURST_MAX <= FWD_BURST_MAX, "a whole burst goes through fwd_fast_burst at once");

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- ports of this worker ------------------------------------------------------------ */

static void epoll_add(struct wstate *w, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (fd >= 0)
		(void)epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* The link's QPs as the snapshot publishes them. */
static void wport_add_link(struct wport *p, const struct fwd_if *f)
{
	if (!f->link || p->nlinks == FWD_IF_MAX)
		return;
	p->links[p->nlinks].l = f->link;
	p->links[p->nlinks].ud = f->ud_qp;
	p->nlinks++;
}

/* f is polled through queue of its port: the worker's entry for that port and queue,
 * made on first use. */
static void wport_use(struct wstate *w, const struct fwd_if *f, unsigned queue)
{
	const void *port = f->ops->port(f);
	struct wport *p = NULL;

	for (unsigned i = 0; i < w->nports && !p; i++)
		if (w->ports[i].port == port && w->ports[i].queue == queue)
			p = &w->ports[i];
	if (!p) {
		p = &w->ports[w->nports++];
		*p = (struct wport){
			.ops = f->ops,
			.port = port,
			.eops = f->eth_ops,
			.eth = f->eth,
			.iops = f->ib_ops,
			.ib = f->ib_port,
			.queue = queue,
		};
		epoll_add(w, f->ops->wait_fd(f, queue));
	}
	f->ops->attach(p, f);
}

static void rescan(struct wstate *w, const struct fwd_snap *s)
{
	unsigned pollers = s->pollers ? s->pollers : 1;

	if (w->epfd >= 0)
		close(w->epfd);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	epoll_add(w, ring_fd(w->e->wk[w->id].to_wk));
	w->nports = 0;
	for (uint32_t k = 1; k < FWD_IF_MAX; k++) {
		const struct fwd_if *f = &s->ifs[k];

		if (!f->index)
			continue;
		/* An Ethernet port's queue q is polled by worker q % pollers (every worker
		 * polls its own, and those left over from more workers); an IB port's queues
		 * are dealt out from the port's worker on; none while they move. */
		if (f->moving)
			continue;
		if (f->kind == FWD_IF_ETH) {
			for (unsigned q = w->id; w->id < pollers && q < s->eth_queues; q += pollers)
				wport_use(w, f, q);
		} else {
			unsigned nq = f->ib_ops->queues(f->ib_port);

			for (unsigned q = 0; q < nq; q++)
				if ((f->worker + q) % pollers == w->id)
					wport_use(w, f, q);
		}
	}
	w->gen = s->gen;
}

/* ---- transmit ------------------------------------------------------------------------ */

/* One TX burst of an Ethernet interface, on this worker's own queue of the port: no
 * lock. */
static void flush_eth(struct wstate *w, struct txq *q)
{
	const struct fwd_if *f = q->ifp;
	struct fwd_capture *cap = fwd_capture_of(w->e, f->index);
	uint64_t bytes = 0;
	int n;

	for (unsigned i = 0; cap && i < q->n; i++)
		fwd_capture_packet(cap, w->id, FWD_CAPTURE_TX, NULL, 0, q->eth[i].hdr,
				   q->eth[i].hdr_len, q->eth[i].data, q->eth[i].len);
	n = f->eth_ops->tx_burst(f->eth, w->id, q->eth, q->n);
	if (n < 0)
		n = 0;
	for (int i = 0; i < n; i++) /* descriptors are ours again: the port copied */
		bytes += q->eth[i].hdr_len + q->eth[i].len;
	FWD_ADD(w->st->tx_packets, (unsigned)n);
	FWD_ADD(w->st->tx_bytes, bytes);
	if ((unsigned)n < q->n)
		FWD_ADD(w->st->drops[FWD_DROP_TX_FULL], q->n - (unsigned)n);
}

/* A send as the capture shows it (engine/capture.h): what the send knows of the
 * destination's hardware address, its QPN. */
static void capture_ib_tx(struct fwd_capture *cap, unsigned wid, const struct ibp_send *s)
{
	uint8_t pre[FWD_CAPTURE_IPOIB_ADDR_LEN] = { 0 };

	pre[21] = (uint8_t)(s->remote_qpn >> 16);
	pre[22] = (uint8_t)(s->remote_qpn >> 8);
	pre[23] = (uint8_t)s->remote_qpn;
	fwd_capture_packet(cap, wid, FWD_CAPTURE_TX, pre, sizeof(pre), s->buf->data, s->buf->len,
			   NULL, 0);
}

/* One TX burst of an IPoIB interface: post_send of the prepared sends. */
static void flush_ib(struct wstate *w, struct txq *q)
{
	const struct fwd_if *f = q->ifp;
	struct fwd_capture *cap = fwd_capture_of(w->e, f->index);
	uint32_t len[TXQ]; /* read before the post: a posted buffer is the port's */
	uint64_t link_packets = 0, link_bytes = 0, bytes = 0;
	int n;

	for (unsigned i = 0; i < q->n; i++) {
		len[i] = q->ib[i].buf->len;
		if (cap)
			capture_ib_tx(cap, w->id, &q->ib[i]);
	}
	n = f->ib_ops->post_send(w->id, q->ib, q->n);
	if (n < 0)
		n = 0;
	for (int i = 0; i < n; i++) {
		bytes += len[i];
		if (q->fwd[i]) {
			link_packets++;
			link_bytes += len[i];
		}
	}
	FWD_ADD(w->st->tx_bytes, bytes);
	if (link_packets && f->link)
		ipoib_link_count_tx(f->link, link_packets, link_bytes);
	FWD_ADD(w->st->tx_packets, (unsigned)n);
	for (unsigned i = (unsigned)n; i < q->n; i++) {
		f->ib_ops->buf_put(f->ib_port, q->ib[i].buf);
		FWD_INC(w->st->drops[FWD_DROP_TX_FULL]);
	}
}

static void flush_if(struct wstate *w, unsigned k)
{
	struct txq *q = &w->txq[k];

	if (!q->n)
		return;
	q->ifp->ops->flush(w, q);
	q->n = 0;
}

static void flush_all(struct wstate *w)
{
	for (unsigned k = 1; k < FWD_IF_MAX; k++)
		flush_if(w, k);
	w->gro_used = 0; /* the merged packets went out (copied by their ports) */
	fwd_ctx_scratch_reset(&w->ctx);
	if (w->nret) {
		/* Messages whose data went out: control's and the heartbeat thread's go
		 * back to them, ours (parked punts released by control) to our pool. The
		 * rings hold what can be in them: they cannot be full. */
		struct fwd_wk *k = &w->e->wk[w->id];
		unsigned nc = 0;

		for (unsigned i = 0; i < w->nret; i++) {
			struct fwd_msg *m = w->rets[i];

			if (m->owner == FWD_OWNER_WORKER) {
				fwd_msg_recycle(w->e, m);
			} else if (m->owner == FWD_OWNER_HB) {
				void *p = m;

				(void)ring_enqueue_burst(k->hb_rx, &p, 1);
				w->hb_handed = true;
			} else {
				w->rets[nc++] = m;
			}
		}
		if (nc) {
			(void)ring_enqueue_burst(k->to_ctl, w->rets, nc);
			ring_wake_if_sleeping(k->to_ctl);
		}
		w->nret = 0;
	}
}

/* fwd: from the data path (forwarded, or the worker's own ICMP), not a frame the control
 * thread hands over (which its link has counted). */
static void queue_tx(struct wstate *w, const struct fwd_tx *t, bool fwd)
{
	unsigned k = t->ifp->index;
	struct txq *q = &w->txq[k];

	if (q->n == TXQ)
		flush_if(w, k);
	q->ifp = t->ifp;
	/* Per packet: a switch on the kind, cheaper than an indirect call. */
	if (t->ifp->kind == FWD_IF_ETH)
		q->eth[q->n] = t->eth;
	else
		q->ib[q->n] = t->ib;
	q->fwd[q->n] = fwd;
	q->n++;
}

/* ---- punts --------------------------------------------------------------------------- */

/* One of our punts is back, or never left: an unresolved one no longer holds its next
 * hop (struct fwd_held). */
static void punt_back(struct wstate *w, struct fwd_msg *m)
{
	if (m->held) {
		m->held = false;
		fwd_held_done(&w->ctx, m->ifindex, m->family, m->nh);
	}
}

static void flush_punts(struct wstate *w)
{
	struct ring *r = w->e->wk[w->id].to_ctl;
	unsigned n;

	if (w->hb_handed) {
		uint64_t one = 1;

		w->hb_handed = false;
		if (write(w->e->hb_efd, &one, sizeof(one)) < 0) {
			/* EAGAIN only when the counter is saturated: the reader wakes anyway */
		}
	}
	if (!w->npunt)
		return;
	n = ring_enqueue_burst(r, w->punts, w->npunt);
	for (unsigned i = n; i < w->npunt; i++) {
		/* cannot happen: the ring holds both pools */
		punt_back(w, w->punts[i]);
		fwd_msg_recycle(w->e, w->punts[i]);
		FWD_INC(w->st->drops[FWD_DROP_PUNT_FULL]);
	}
	w->npunt = 0;
	ring_wake_if_sleeping(r);
}

/* A message of class c for a punt, within the class's share of the pool (counted). */
static struct fwd_msg *punt_msg(struct wstate *w, enum fwd_pclass c)
{
	struct fwd_msg *m;

	if (w->npunt == PUNTQ)
		flush_punts(w);
	m = fwd_msg_get(w->e, w->id, FWD_OWNER_WORKER, c);
	if (!m) {
		FWD_INC(w->st->drops[FWD_DROP_PUNT_FULL]);
		FWD_INC(w->st->pclass_no_budget[c]);
		return NULL;
	}
	FWD_INC(w->st->pclass_sent[c]);
	m->held = false;
	return m;
}

/* A datagram to the heartbeat port: to the heartbeat thread, not the control thread
 * (engine/heartbeat.h). Its ring holds our whole CONTROL share: never full. */
static void hb_punt(struct wstate *w, struct fwd_msg *m)
{
	void *p = m;

	if (ring_enqueue_burst(w->e->wk[w->id].hb_rx, &p, 1) != 1) {
		fwd_msg_recycle(w->e, m);
		FWD_INC(w->st->drops[FWD_DROP_PUNT_FULL]);
		return;
	}
	w->hb_handed = true;
}

/* Per punt only (not per forwarded packet): its class, the class's rate limits for its
 * source, then a message of the class's share. */
static void do_punt(struct wstate *w, const struct fwd_result *res, bool ib,
		    const struct ipoib_rx *rx)
{
	struct fwd_msg *m;
	enum fwd_pclass c;
	uint32_t key;
	bool whole = res->punt_len <= FWD_MSG_DATA;

	if (!whole) {
		FWD_INC(w->st->drops[FWD_DROP_PUNT_TOO_BIG]);
		/* Too big to park, but its next hop still needs resolving: asked for without
		 * the packet, else a flow of big packets alone would never get it resolved. */
		if (res->punt != FWD_PUNT_UNRESOLVED)
			return;
	}
	c = fwd_punt_classify(w->e, res->punt, ib, res->punt_data, res->punt_len,
			      rx ? (uint32_t)rx->slid << 24 ^ rx->src_qpn : 0, &key);
	if (!fwd_punt_rl_allow(&w->rl, c, key, w->ctx.now_ns)) {
		FWD_INC(w->st->drops[FWD_DROP_PUNT_LIMITED]);
		FWD_INC(w->st->pclass_limited[c]);
		return;
	}
	m = punt_msg(w, c);
	if (!m)
		return;
	m->type = ib ? FWD_MSG_PUNT_IB : FWD_MSG_PUNT_ETH;
	m->punt = (uint8_t)res->punt;
	m->ifindex = (uint16_t)res->punt_if->index;
	m->ifgen = res->punt_if->gen;
	m->family = res->punt_family;
	memcpy(m->nh, res->punt_nh, 16);
	m->own = false;
	if (rx) {
		m->ethertype = rx->ethertype;
		m->src_qpn = rx->src_qpn;
		m->slid = rx->slid;
		m->has_grh = rx->has_grh;
		m->mcast = rx->mcast;
		m->sgid = rx->sgid;
		m->dgid = rx->dgid;
	}
	m->len = whole ? res->punt_len : 0; /* UNRESOLVED without a packet: resolve only */
	memcpy(m->data, res->punt_data, m->len);
	if (res->punt == FWD_PUNT_UNRESOLVED && whole) /* its next hop's later packets follow it */
		m->held = fwd_held_add(&w->ctx, m->ifindex, m->family, m->nh);
	FWD_INC(w->st->punts[res->punt]);
	if (c == FWD_PCLASS_CONTROL && res->punt == FWD_PUNT_LOCAL &&
	    fwd_hb_match(w->e, m->data, m->len)) {
		hb_punt(w, m);
		return;
	}
	w->punts[w->npunt++] = m;
}

static void take(struct wstate *w, struct fwd_result *res, bool ib, const struct ipoib_rx *rx)
{
	for (unsigned i = 0; i < res->n_tx; i++)
		queue_tx(w, &res->tx[i], true);
	if (res->v == FWD_V_PUNT)
		do_punt(w, res, ib, rx);
	else if (res->v == FWD_V_DROP && res->drop < FWD_DROP_COUNT)
		FWD_INC(w->st->drops[res->drop]);
	if (fwd_ctx_scratch_low(&w->ctx))
		flush_all(w);
}

/* ---- receive ------------------------------------------------------------------------- */

static unsigned poll_eth(struct wstate *w, struct wport *p, const struct fwd_snap *s)
{
	const struct fwd_if *in = fwd_snap_if(s, p->eth_if);
	struct fwd_capture *cap;
	uint64_t done;
	int n;

	n = p->eops->rx_burst(p->eth, p->queue, w->erx, w->cfg.burst);

	if (n <= 0)
		return 0;
	FWD_ADD(w->st->rx_packets, (unsigned)n);
	cap = fwd_capture_of(w->e, p->eth_if);
	for (int i = 0; cap && i < n; i++)
		fwd_capture_packet(cap, w->id, FWD_CAPTURE_RX, NULL, 0, w->erx[i].data,
				   w->erx[i].len, NULL, 0);
	for (int i = 0; i < n; i++)
		w->ip[i] = fwd_eth_ip(w->erx[i].data, w->erx[i].len, w->erx[i].pkttype,
				      &w->erx[i].gso, &w->ip_len[i]);
	done = fwd_fast_burst(&w->ctx, in, w->ip, w->ip_len, (unsigned)n, 0, w->fast_tx);
	for (int i = 0; i < n; i++) {
		FWD_ADD(w->st->rx_bytes, w->erx[i].len);
		if (done >> i & 1) {
			queue_tx(w, &w->fast_tx[i], true);
			continue;
		}
		fwd_input_eth(&w->ctx, in, w->erx[i].data, w->erx[i].len, w->erx[i].pkttype,
			      &w->erx[i].gso, &w->res);
		take(w, &w->res, false, NULL);
	}
	flush_all(w); /* frames point into the receive buffers */
	p->eops->rx_done(p->eth, w->erx, (unsigned)n);
	return (unsigned)n;
}

static const struct fwd_if *if_of_link(const struct fwd_snap *s, const void *link)
{
	for (uint32_t k = 1; k < FWD_IF_MAX; k++)
		if (s->ifs[k].index && s->ifs[k].kind == FWD_IF_IPOIB && s->ifs[k].link == link)
			return &s->ifs[k];
	return NULL;
}

/* A receive as the capture shows it (engine/capture.h): a GRH-shaped address block with
 * the source QPN. Not our own multicast looped back (the link drops it unseen). */
static void capture_ib_rx(struct fwd_capture *cap, unsigned wid, const struct fwd_if *in,
			  const struct ibp_wc *wc, const struct ipoib_rx *rx)
{
	uint8_t pre[FWD_CAPTURE_IPOIB_ADDR_LEN] = { 0x60 };
	const uint8_t *p;
	size_t len;

	if (wc->status != IBP_WC_OK || !wc->buf ||
	    (rx->kind == IPOIB_RX_DROP && rx->why == IPOIB_DROP_RX_LOOP))
		return;
	if (rx->rc) {
		p = wc->buf->data;
		len = wc->byte_len;
	} else {
		if (wc->byte_len < IBP_GRH_AREA)
			return;
		p = wc->buf->data + IBP_GRH_AREA;
		len = wc->byte_len - IBP_GRH_AREA;
	}
	pre[5] = (uint8_t)(wc->src_qp >> 16);
	pre[6] = (uint8_t)(wc->src_qp >> 8);
	pre[7] = (uint8_t)wc->src_qp;
	if (rx->has_grh || rx->rc)
		memcpy(pre + 8, rx->sgid.raw, IB_GID_LEN);
	memcpy(pre + 24, rx->has_grh ? rx->dgid.raw : in->hwaddr + 4, IB_GID_LEN);
	fwd_capture_packet(cap, wid, FWD_CAPTURE_RX, pre, sizeof(pre), p, len, NULL, 0);
}

/* ---- receive coalescing (IPoIB TCP) ----------------------------------------------- */

/* Forward the held packet: merged (a GSO packet for the pipeline, its checksum partial)
 * or the single segment as it came. */
static void gro_flush(struct wstate *w)
{
	unsigned segs = w->gro.segs;
	struct ipoib_rx rx = w->gro_rx;
	struct gso_pkt g = { GSO_NONE, 0 };
	struct gso_vnet v;

	if (!segs)
		return;
	rx.data = w->gro.ip;
	rx.len = gro_tcp_end(&w->gro, 0, &v);
	if (v.gso_type != GSO_VNET_NONE) {
		g = (struct gso_pkt){ GSO_TCP, v.gso_size };
		FWD_INC(w->st->gro_merged);
		FWD_ADD(w->st->gro_segments, segs);
	}
	w->gro_used++;
	fwd_input_ib(&w->ctx, w->gro_if, &rx, &g, &w->res);
	take(w, &w->res, true, &rx);
}

/* Whether IP packets a and b carry TCP of the same flow (addresses and ports), a cheap
 * look before a copy: with flows interleaved in a burst nothing would merge. */
static bool same_tcp_flow(const struct ipoib_rx *a, const struct ipoib_rx *b)
{
	size_t l4;

	if (a->kind != b->kind || a->len < 20 || b->len < 20)
		return false;
	if (a->kind == IPOIB_RX_IP4) {
		l4 = (a->data[0] & 0x0fu) * 4u;
		return a->data[9] == 6 && b->data[9] == 6 && l4 == (b->data[0] & 0x0fu) * 4u &&
		       a->len >= l4 + 4 && b->len >= l4 + 4 &&
		       !memcmp(a->data + 12, b->data + 12, 8) &&
		       !memcmp(a->data + l4, b->data + l4, 4);
	}
	return a->len >= 44 && b->len >= 44 && a->data[6] == 6 && b->data[6] == 6 &&
	       !memcmp(a->data + 8, b->data + 8, 32) && !memcmp(a->data + 40, b->data + 40, 4);
}

/* Whether receive k of n continues the held packet or starts one (true: taken). One
 * that does not continue it forwards the held packet first, so the order stays. */
static bool gro_take(struct wstate *w, unsigned k, unsigned n)
{
	const struct ipoib_rx *rx = &w->rx[k];
	bool ip = (rx->kind == IPOIB_RX_IP4 || rx->kind == IPOIB_RX_IP6) && !rx->mcast;

	if (w->gro.segs) {
		if (ip && w->rx_if[k] == w->gro_if && gro_tcp_append(&w->gro, rx->data, rx->len))
			return true;
		gro_flush(w);
	}
	/* Copied only when the next receive of the burst is the same flow's (the last of
	 * the burst has nothing to merge with). */
	if (!ip || k + 1 == n || w->rx_if[k + 1] != w->rx_if[k] ||
	    !same_tcp_flow(rx, &w->rx[k + 1]) ||
	    !fwd_gro_wanted(&w->ctx, w->rx_if[k], rx->data, rx->len))
		return false;
	if (w->gro_used == GRO_BUFS)
		flush_all(w);
	if (!gro_tcp_begin(&w->gro, w->gro_mem + (size_t)w->gro_used * GRO_MAX_LEN, GRO_MAX_LEN,
			   rx->data, rx->len))
		return false;
	w->gro_if = w->rx_if[k];
	w->gro_rx = *rx;
	return true;
}

/* Which link a completion of port p belongs to: its UD QP's, or (connected mode) the
 * link of the RC connection it came on (receives through the link's SRQ). NULL: none
 * of this port's links (a QP of a link gone meanwhile). */
static struct ipoib_link *wc_link(const struct wport *p, const struct ibp_wc *wc)
{
	struct ipoib_link *l;

	for (unsigned i = 0; i < p->nlinks; i++)
		if (wc->qp == p->links[i].ud || wc->qp_user == p->links[i].l)
			return p->links[i].l; /* a UD QP's user pointer is its link */
	l = ipoib_link_of_rc(wc);
	for (unsigned i = 0; l && i < p->nlinks; i++)
		if (p->links[i].l == l)
			return l;
	return NULL;
}

/* The receives of run [k, k + n) that gro_take might merge (fwd_fast_burst's merge):
 * those next to another of their TCP flow, bit 0 for receive k. */
static uint64_t merge_runs(const struct wstate *w, unsigned k, unsigned n)
{
	uint64_t m = 0;

	for (unsigned i = 1; i < n; i++)
		if (same_tcp_flow(&w->rx[k + i - 1], &w->rx[k + i]))
			m |= 3ull << (i - 1);
	return m;
}

static unsigned poll_ib(struct wstate *w, struct wport *p, const struct fwd_snap *s)
{
	struct fwd_capture *cap;
	uint64_t done = 0;
	unsigned nrx = 0;
	int n;

	n = p->iops->poll(p->ib, p->queue, w->wcs, w->cfg.burst);

	if (n <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		struct ibp_wc *wc = &w->wcs[i];
		struct ipoib_link *l = wc_link(p, wc);
		const struct fwd_if *in;
		struct ipoib_rx *rx = &w->rx[nrx];

		w->wl[i] = l;
		if (wc->kind == IBP_WC_SEND) {
			/* Buffers back to the pool (any thread). RC send errors are noted for
			 * the control thread (teardown). */
			if (l)
				ipoib_link_tx_done(l, wc);
			else if (wc->buf)
				p->iops->buf_put(p->ib, wc->buf);
			continue;
		}
		FWD_INC(w->st->rx_packets);
		FWD_ADD(w->st->rx_bytes, wc->byte_len);
		in = l ? if_of_link(s, l) : NULL;
		if (!in) {
			FWD_INC(w->st->drops[FWD_DROP_IF_DOWN]);
			continue;
		}
		/* UD through the link's QP, RC through its SRQ: ipoib_link_rx tells. */
		ipoib_link_rx(l, p->queue, wc, rx);
		cap = fwd_capture_of(w->e, in->index);
		if (cap)
			capture_ib_rx(cap, w->id, in, wc, rx);
		w->rx_if[nrx] = in;
		w->ip[nrx] = fwd_ib_ip(rx);
		w->ip_len[nrx++] = rx->len;
	}
	/* The links of a port take their runs of the burst through the stages one after the
	 * other (an ingress per call). */
	for (unsigned k = 0, run; k < nrx; k += run) {
		for (run = 1; k + run < nrx && w->rx_if[k + run] == w->rx_if[k]; run++)
			;
		done |= fwd_fast_burst(&w->ctx, w->rx_if[k], w->ip + k, w->ip_len + k, run,
				       merge_runs(w, k, run), w->fast_tx + k)
			<< k;
	}
	for (unsigned k = 0; k < nrx; k++) {
		if (done >> k & 1) {
			gro_flush(w); /* a merged packet before it goes first */
			queue_tx(w, &w->fast_tx[k], true);
			continue;
		}
		if (gro_take(w, k, nrx))
			continue;
		fwd_input_ib(&w->ctx, w->rx_if[k], &w->rx[k], NULL, &w->res);
		take(w, &w->res, true, &w->rx[k]);
	}
	gro_flush(w);
	flush_all(w);
	for (int i = 0; i < n; i++) {
		struct ibp_wc *wc = &w->wcs[i];

		if (wc->kind != IBP_WC_RECV || !wc->buf)
			continue;
		if (w->wl[i]) /* the queue's SRQ first when it is owed */
			ipoib_link_repost(w->wl[i], p->queue, wc->buf);
		else
			p->iops->buf_put(p->ib, wc->buf);
	}
	return (unsigned)n;
}

/* ---- control -> worker --------------------------------------------------------------- */

/* What the control thread (to_wk) or the heartbeat thread (hb_tx) hands over: their
 * sends, and the returns of our punts. */
static unsigned serve_ring(struct wstate *w, const struct fwd_snap *s, struct ring *r)
{
	void *v[BURST_MAX];
	unsigned n = ring_dequeue_burst(r, v, BURST_MAX - w->nret);

	for (unsigned i = 0; i < n; i++) {
		struct fwd_msg *m = v[i];
		const struct fwd_if *f;

		if (m->owner == FWD_OWNER_WORKER && m->type != FWD_MSG_TX_IP) {
			punt_back(w, m);
			fwd_msg_recycle(w->e, m); /* a punt came back */
			continue;
		}
		f = fwd_snap_if(s, m->ifindex);
		FWD_INC(w->st->ctl_tx);
		if (f && f->gen != m->ifgen) {
			/* Its interface is gone, the index taken again: nothing of the old
			 * port may be touched (its pool went with it). */
			FWD_INC(w->st->drops[FWD_DROP_IF_DOWN]);
		} else if (!f || !f->up) {
			if (m->type == FWD_MSG_TX_IB && m->ib_send.buf && f)
				f->ib_ops->buf_put(f->ib_port, m->ib_send.buf);
			FWD_INC(w->st->drops[FWD_DROP_IF_DOWN]);
		} else if (m->type == FWD_MSG_TX_ETH && f->kind == FWD_IF_ETH && m->len >= 14) {
			struct fwd_tx t = { .ifp = f };

			memcpy(t.eth.hdr, m->data, 14);
			t.eth.hdr_len = 14;
			t.eth.data = m->data + 14;
			t.eth.len = m->len - 14;
			queue_tx(w, &t, false);
		} else if (m->type == FWD_MSG_TX_IB && f->kind == FWD_IF_IPOIB) {
			struct fwd_tx t = { .ifp = f, .ib = m->ib_send };

			queue_tx(w, &t, false);
		} else if (m->type == FWD_MSG_TX_IP) {
			if (m->own)
				fwd_output_local(&w->ctx, f, m->family, m->nh, m->data, m->len,
						 &w->res);
			else
				fwd_output_ip(&w->ctx, f, m->family, m->nh, m->data, m->len,
					      &w->res);
			take(w, &w->res, false, NULL);
		}
		if (m->owner == FWD_OWNER_WORKER)
			punt_back(w, m); /* after the send above: its hop's next packets go
					  * out behind it */
		w->rets[w->nret++] = m;  /* to its pool or its owner after the flush (a parked
					 * punt of ours, sent, is recycled) */
	}
	if (n)
		flush_all(w);
	return n;
}

/* ---- per kind ------------------------------------------------------------------------- */

static const void *eth_port(const struct fwd_if *f)
{
	return f->eth;
}

static int eth_wait_fd(const struct fwd_if *f, unsigned queue)
{
	return f->eth_ops->wait_fd(f->eth, queue);
}

/* The port's first interface receives its frames. */
static void eth_attach(struct wport *p, const struct fwd_if *f)
{
	if (!p->eth_if)
		p->eth_if = f->index;
}

static int eth_arm(const struct wport *p)
{
	return p->eops->arm(p->eth, p->queue);
}

static const void *ib_port(const struct fwd_if *f)
{
	return f->ib_port;
}

static int ib_wait_fd(const struct fwd_if *f, unsigned queue)
{
	return f->ib_ops->cq_fd(f->ib_port, queue);
}

static int ib_arm(const struct wport *p)
{
	return p->iops->arm(p->ib, p->queue);
}

const struct fwd_if_ops fwd_if_eth_ops = {
	.port = eth_port,
	.wait_fd = eth_wait_fd,
	.attach = eth_attach,
	.poll = poll_eth,
	.flush = flush_eth,
	.arm = eth_arm,
};

const struct fwd_if_ops fwd_if_ipoib_ops = {
	.port = ib_port,
	.wait_fd = ib_wait_fd,
	.attach = wport_add_link,
	.poll = poll_ib,
	.flush = flush_ib,
	.arm = ib_arm,
};

/* ---- the loop ------------------------------------------------------------------------ */

static bool arm_all(struct wstate *w)
{
	for (unsigned i = 0; i < w->nports; i++) {
		struct wport *p = &w->ports[i];

		(void)p->ops->arm(p);
	}
	return true;
}

static void *worker_main(void *arg)
{
	struct wstate *w = arg;
	struct fwd_wk *k = &w->e->wk[w->id];
	uint64_t idle_since = mono_ns();
	char name[16];

	/* Named before its first poll (top, perf, and the tests tell workers apart). */
	snprintf(name, sizeof(name), "ibgw-fwd%u", w->id % 100u);
	(void)pthread_setname_np(pthread_self(), name);
	rcu_register_thread();
	while (!atomic_load_explicit(&k->stop, memory_order_acquire)) {
		const struct fwd_snap *s;
		unsigned work = 0;
		uint64_t now = mono_ns();

		fwd_ctx_begin(&w->ctx, now);
		s = w->ctx.snap;
		if (s->gen != w->gen)
			rescan(w, s);
		for (unsigned i = 0; i < w->nports; i++) {
			struct wport *p = &w->ports[i];

			work += p->ops->poll(w, p, s);
		}
		work += serve_ring(w, s, k->to_wk);
		work += serve_ring(w, s, k->hb_tx);
		flush_punts(w);
		FWD_INC(w->st->loops);
		rcu_quiescent_state();
		if (work) {
			idle_since = now;
			continue;
		}
		if (now - idle_since <
		    (uint64_t)atomic_load_explicit(&w->spin_us, memory_order_relaxed) * 1000u)
			continue;
		/* Sleep: arm every port, look once more, then wait. After the quiescent
		 * state above, w->ports may name a port the control thread has since removed
		 * and freed: touch them only under a snapshot of their generation (an older
		 * one keeps this thread holding up synchronize_rcu until it goes offline). */
		fwd_ctx_begin(&w->ctx, mono_ns());
		s = w->ctx.snap;
		if (s->gen != w->gen)
			continue; /* rescan first */
		arm_all(w);
		{
			unsigned again = 0;

			for (unsigned i = 0; i < w->nports; i++) {
				struct wport *p = &w->ports[i];

				again += p->ops->poll(w, p, s);
			}
			flush_punts(w);
			if (again || !ring_sleep_prepare(k->to_wk) ||
			    !ring_empty_after_prepare(k->hb_tx) ||
			    atomic_load_explicit(&k->stop, memory_order_acquire)) {
				ring_sleep_done(k->to_wk);
				idle_since = mono_ns();
				continue;
			}
		}
		FWD_INC(w->st->sleeps);
		rcu_thread_offline();
		{
			struct epoll_event ev[8];

			(void)epoll_wait(w->epfd, ev, 8, 100);
		}
		rcu_thread_online();
		ring_sleep_done(k->to_wk);
		FWD_INC(w->st->wakeups);
		idle_since = mono_ns();
	}
	/* Hand back what is ours to hand back; flush what is queued. */
	fwd_ctx_begin(&w->ctx, mono_ns());
	serve_ring(w, w->ctx.snap, k->to_wk);
	serve_ring(w, w->ctx.snap, k->hb_tx);
	flush_punts(w);
	rcu_unregister_thread();
	return NULL;
}

static void wstate_free(struct wstate *w)
{
	free(w->gro_mem);
	free(w);
}

int fwd_worker_start(struct fwd_engine *e, unsigned id, const struct fwd_worker_config *cfg)
{
	struct fwd_wk *k;
	struct wstate *w;
	int ret;

	if (id >= e->n_workers || e->wk[id].started)
		return -EINVAL;
	k = &e->wk[id];
	w = calloc(1, sizeof(*w));
	if (w && !(w->gro_mem = malloc((size_t)GRO_BUFS * GRO_MAX_LEN))) {
		wstate_free(w);
		w = NULL;
	}
	if (!w)
		return -ENOMEM;
	w->e = e;
	w->id = id;
	w->cfg = cfg ? *cfg : (struct fwd_worker_config){ .cpu = -1 };
	if (!w->cfg.spin_us)
		w->cfg.spin_us = FWD_WORKER_SPIN_US;
	atomic_init(&w->spin_us, w->cfg.spin_us);
	if (!w->cfg.burst || w->cfg.burst > BURST_MAX)
		w->cfg.burst = 32;
	/* A queue of every Ethernet port for each worker to run (worker id polls queue
	 * id); fwd_worker_set_count has grown them already. */
	if (e->eth_queues < e->n_workers && (ret = fwd_engine_eth_queues(e, e->n_workers)) < 0) {
		wstate_free(w);
		return ret;
	}
	w->st = k->st;
	w->epfd = -1;
	w->gen = UINT64_MAX;
	fwd_punt_rl_init(&w->rl, &e->cfg.punt);
	ret = fwd_ctx_init(&w->ctx, e, id);
	if (ret < 0) {
		wstate_free(w);
		return ret;
	}
	atomic_store(&k->stop, false);
	pthread_attr_t ta;
	ret = rt_thread_attr(&ta, w->cfg.rt_priority);
	if (ret == 0) {
		ret = -pthread_create(&k->thr, &ta, worker_main, w);
		pthread_attr_destroy(&ta);
	}
	if (ret < 0) {
		fwd_ctx_fini(&w->ctx);
		wstate_free(w);
		return ret;
	}
	k->wctx = w;
	k->started = true;
	if (w->cfg.cpu >= 0 && (ret = fwd_worker_set_cpu(e, id, w->cfg.cpu)) < 0)
		log_errno(LOG_WARNING, -ret, "worker %u: cannot pin to CPU %d", id, w->cfg.cpu);
	return 0;
}

int fwd_worker_set_cpu(struct fwd_engine *e, unsigned w, int cpu)
{
	struct fwd_wk *k = w < e->n_workers ? &e->wk[w] : NULL;
	cpu_set_t set;
	int ret;

	if (!k || !k->started)
		return -ESRCH;
	if (cpu >= CPU_SETSIZE)
		return -EINVAL;
	CPU_ZERO(&set);
	if (cpu >= 0) {
		CPU_SET(cpu, &set);
	} else {
		/* Anywhere this process may run. */
		if (sched_getaffinity(0, sizeof(set), &set) < 0)
			return -errno;
	}
	ret = pthread_setaffinity_np(k->thr, sizeof(set), &set);
	if (ret)
		return -ret;
	((struct wstate *)k->wctx)->cfg.cpu = cpu;
	return 0;
}

void fwd_worker_set_spin(struct fwd_engine *e, unsigned w, unsigned spin_us)
{
	struct fwd_wk *k = w < e->n_workers ? &e->wk[w] : NULL;

	if (k && k->started)
		atomic_store_explicit(&((struct wstate *)k->wctx)->spin_us, spin_us,
				      memory_order_relaxed);
}

int fwd_worker_set_rt_priority(struct fwd_engine *e, unsigned w, unsigned prio)
{
	struct fwd_wk *k = w < e->n_workers ? &e->wk[w] : NULL;
	struct sched_param sp = { .sched_priority = (int)prio };
	int ret;

	if (!k || !k->started)
		return -ESRCH;
	ret = pthread_setschedparam(k->thr, prio ? SCHED_FIFO : SCHED_OTHER, &sp);
	if (ret)
		return -ret;
	((struct wstate *)k->wctx)->cfg.rt_priority = prio;
	return 0;
}

static void worker_stop(struct fwd_engine *e, unsigned id)
{
	struct fwd_wk *k = &e->wk[id];
	struct wstate *w = k->wctx;

	if (!k->started)
		return;
	atomic_store_explicit(&k->stop, true, memory_order_release);
	{
		/* Wake it: the ring's eventfd is in its epoll set. */
		uint64_t one = 1;

		(void)!write(ring_fd(k->to_wk), &one, sizeof(one));
	}
	pthread_join(k->thr, NULL);
	if (w->epfd >= 0)
		close(w->epfd);
	fwd_ctx_fini(&w->ctx);
	wstate_free(w);
	k->wctx = NULL;
	k->started = false;
}

void fwd_worker_stop_all(struct fwd_engine *e)
{
	for (unsigned id = 0; id < e->n_slots; id++)
		worker_stop(e, id);
}

struct retire {
	struct fwd_engine *e;
	unsigned from; /* the workers from this one on stop */
};

/* Between fwd_engine_assign's two publications: once every worker has let go of the
 * moving ports, the workers beyond the new number stop, before their queues are given
 * to the workers left (a queue's receive and send sides then stay one thread's). */
static void grace_then_retire(void *arg)
{
	struct retire *r = arg;

	synchronize_rcu();
	for (unsigned id = r->from; id < r->e->n_workers; id++)
		worker_stop(r->e, id);
}

/*
 * The hand-over of a port's queues between workers: a queue's data path is one thread's
 * (an IB port's for its lock's sake too), and two workers polling one queue would also
 * split its completions and its epoll wake-ups between them. So an interface whose
 * queues change worker (every port, when the number of workers changes) is first
 * published as moving (polled by none), and only after a grace period, when every
 * worker has rescanned past that snapshot, with its new workers. Its queues hold what
 * arrives meanwhile (a grace period is one loop turn of each worker, or nothing for a
 * sleeping one); the workers beyond the new number stop in between. No queue closes:
 * an Ethernet port keeps the queues of its most workers (frames queued in a closed
 * socket would be lost), and the workers left poll them.
 */
int fwd_worker_set_count(struct fwd_engine *e, unsigned n, const unsigned worker_of[FWD_IF_MAX],
			 const struct fwd_worker_config *cfgs)
{
	const struct fwd_snap *s = fwd_engine_current(e);
	unsigned old = e->n_workers;
	int ret;

	if (n == 0 || n > FWD_WORKERS_MAX)
		return -EINVAL;
	for (uint32_t k = 1; k < FWD_IF_MAX; k++)
		if (s->ifs[k].index && worker_of[k] >= n)
			return -EINVAL;
	ret = fwd_engine_slots_grow(e, n);
	if (ret < 0)
		return ret;
	if (n > old && (ret = fwd_engine_eth_queues(e, n)) < 0)
		return ret;
	/* New workers first, with nothing to poll yet: they take their ports below. */
	for (unsigned id = old; id < n; id++) {
		e->n_workers = id + 1;
		ret = fwd_worker_start(e, id, &cfgs[id]);
		if (ret < 0) {
			e->n_workers = id;
			break;
		}
		e->wk[id].retired = false; /* its pools are the new thread's again */
	}
	struct retire r = { .e = e, .from = n };

	if (ret == 0)
		ret = fwd_engine_assign(e, worker_of, n, grace_then_retire, &r);
	/* On failure the new workers stop: nothing moved to them, and the queues grown for
	 * them are the old workers' (q % pollers). */
	if (ret < 0)
		r.from = old;
	for (unsigned id = r.from; id < e->n_workers; id++) {
		worker_stop(e, id);
		e->wk[id].retired = true;
		fwd_sp_slot_retired(e, id);
	}
	e->n_workers = r.from;
	return ret;
}
