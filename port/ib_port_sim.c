/*
 * The sim backend of the IB port ops table: a software HCA on the simulated fabric.
 *
 * One port = one connection to ibgw-fabric (lib/ib_simfab), which carries complete wire
 * packets. This backend plays the HCA's part: it reads the port's identity through
 * libibumad (under umad2sim, the node's simulated port as OpenSM configured it: a
 * directed-route SMP to the local port gives NodeDescription, PortInfo), says HELLO,
 * builds every packet (LRH, GRH, BTH, DETH/AETH, ICRC, VCRC through lib/ib_packet),
 * fills UD receive buffers as verbs does (40-octet GRH area first), and runs the RC
 * transport in software (sim/verbs/ib_rc, shared with the verbs shim: segmentation, PSNs, ACK/NAK, go-back-N, RNR).
 *
 * Threads. One mutex per port, port_lock, guards everything that moves: the fabric
 * client (control requests and packets share its socket), the QP table, queues,
 * RC engines, the completion ring and the event ring. The owning worker takes it once
 * per post_send / post_recv / poll batch; the control thread takes it around each
 * request to the fabric (QP create/destroy, multicast) and each QP change. A control
 * request waits for its answer with the lock held (the fabric answers in
 * microseconds; its client gives up after 5 s), and packets that arrive meanwhile are
 * queued inside the fabric client: the control op then writes the port's eventfd so
 * the worker polls them. The buffer pool (port/ib_bufpool.h) has its own lock, for
 * its free stack only (buf_get/buf_put from any thread). Lock order: port_lock, then
 * the pool's lock.
 *
 * cq_fd (the worker's) is an epoll fd over the fabric socket (readable: packets or
 * PORT_STATE; writable interest only while a send found the socket full), an eventfd
 * (work that no socket shows: completions already queued, packets queued inside the
 * fabric client by a control request) and a timerfd armed by arm() for the earliest
 * RC timer. async_fd (the control thread's) is an eventfd, readable while events wait;
 * events are found by poll() (PORT_STATE arrives on the socket) or by next_event(),
 * which reads the socket too when it has none queued. Timers fire in
 * poll(), so their granularity is how often the owner polls (or the timerfd wakes it:
 * about 50 us late on this machine); RC timeouts are milliseconds (4.096 us * 2^14 =
 * 67 ms is typical), so that is ample.
 *
 * Nothing is allocated per packet: packets are built in one port-wide transmit buffer,
 * received ones are parsed in the fabric client's buffer and copied once into the
 * receive buffer. RC sends are not copied at all: the engine rebuilds a retransmitted
 * packet from the send buffer, which the QP keeps until the message is ACKed.
 */
#include "port/ib_port_sim.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "port/ib_bufpool.h"
#include "port/ib_port.h"
#include "sim/verbs/ib_rc.h"
#include "sim/verbs/sim_node.h"
#include "lib/ib_bytes.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "lib/log.h"

#define SIM_RX_BUDGET  64  /* fabric messages handled per poll */
#define SIM_QP_BUCKETS 256 /* QPN hash chains */
#define SIM_EVENTS     32  /* port events kept for next_event */

enum sbuf_state {
	SB_FREE = IBP_POOL_FREE,
	SB_OWNED = IBP_POOL_OWNED, /* held by a caller */
	SB_SEND = IBP_POOL_POSTED, /* posted to a send queue (UD: briefly; RC: until ACKed) */
	SB_RECV,                   /* on a QP's receive queue */
	SB_SRQ,                    /* on an SRQ */
	SB_RC_RX,                  /* being filled by an RC responder */
	SB_CQ,                     /* its completion waits in the completion ring */
};

/* Buffer descriptor, the pool's head first. state: written under port_lock (posted
 * states) or by the holder (OWNED -> FREE through the pool). */
struct sbuf {
	struct ibp_pool_buf pb;
	uint64_t wr_id;
	struct ibp_qp *qp; /* SEND/RECV/RC_RX/CQ: the QP concerned */
};

/* Control thread creates/destroys; ring under port_lock. */
struct ibp_srq {
	struct ibp_port *port;
	struct sbuf **ring;
	unsigned depth, head, len;
	struct ibp_srq *next;
};

/* Immutable after create (control thread). */
struct ibp_ah {
	struct ibp_port *port;
	struct ibp_ah_attr attr;
	struct ibp_ah *next;
};

/* Fields set at create are immutable; the rest under port_lock. */
struct ibp_qp {
	struct ibp_port *port;
	enum ibp_qp_type type;
	void *user;
	uint32_t qpn;
	uint16_t pkey_index;
	uint32_t qkey;
	struct ibp_srq *srq;
	unsigned recv_depth;
	/* port_lock: */
	uint16_t pkey;
	bool ready;
	struct sbuf **rq;
	unsigned rq_head, rq_len;
	uint32_t ud_psn;
	struct ibrc_qp rc;
	struct ibp_ah_attr path;
	uint32_t remote_qpn;
	bool touched;    /* in the current receive batch's list */
	bool fatal_told; /* QP_FATAL queued */
	struct ibp_qp *hnext;
	struct ibp_qp *rc_next, *rc_prev;
};

struct ibp_port {
	char name[SIMFAB_NAME_MAX];
	uint8_t port_num;
	struct simnode node; /* the local HCA through libibumad (sim/verbs/sim_node.h) */
	bool node_open;
	int epfd, evfd, tfd; /* cq_fd: epoll over the socket, evfd, tfd */
	int afd;             /* async_fd: an eventfd, readable while events wait */

	/* Buffers (any thread; their own lock). bufs: the pool's descriptors. */
	struct ibp_pool pool;
	struct sbuf *bufs;

	pthread_mutex_t port_lock; /* everything below */
	struct simfab_client *fab;
	struct simfab_port_info info;
	uint8_t sm_sl, subnet_timeout, port_state; /* from PortInfo */
	bool link_up, fab_dead, ctl_queued, tx_blocked, out_armed;
	struct ibp_qp *qpt[SIM_QP_BUCKETS];
	struct ibp_qp *rc_list;
	struct ibp_qp *touched[SIM_RX_BUDGET];
	unsigned n_touched;
	struct ibp_wc *cq;
	unsigned cq_cap, cq_head, cq_len;
	struct ibp_event evq[SIM_EVENTS];
	unsigned ev_head, ev_len;
	struct ibp_sim_stats st;
	struct ibrc_stats rc_gone; /* RC counters of destroyed QPs */
	uint8_t tx[IB_PACKET_MAX_LEN];

	/* Control thread. */
	struct ibp_srq *srqs;
	struct ibp_ah *ahs;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- buffers ----------------------------------------------------------------------- */

static enum sbuf_state sb_state(struct sbuf *b)
{
	return (enum sbuf_state)ibp_pool_state(&b->pb);
}

static void sb_set(struct sbuf *b, enum sbuf_state s)
{
	ibp_pool_set_state(&b->pb, s);
}

static struct sbuf *sbuf_of(struct ibp_port *port, const struct ibp_buf *buf)
{
	return (struct sbuf *)ibp_pool_find(&port->pool, buf);
}

/* A posted (port_lock) or owned buffer back to the pool. */
static void free_push(struct ibp_port *port, struct sbuf *b)
{
	b->qp = NULL;
	ibp_pool_release(&port->pool, &b->pb);
}

static struct ibp_buf *sim_buf_get(struct ibp_port *port)
{
	return ibp_pool_get(&port->pool);
}

static void sim_buf_put(struct ibp_port *port, struct ibp_buf *buf)
{
	if (ibp_pool_put(&port->pool, buf) < 0)
		log_error("sim: %s: buf_put of a buffer not held by the caller", port->name);
}

/* --- wakeups, completions, events (port_lock) ---------------------------------------- */

static void wake(struct ibp_port *port)
{
	uint64_t one = 1;

	if (write(port->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_errno(LOG_ERR, errno, "sim: %s: eventfd write", port->name);
}

/* The ring holds at most one entry per buffer, so it never overflows. */
static struct ibp_wc *cq_push(struct ibp_port *port, struct sbuf *b, enum ibp_wc_kind kind,
			      enum ibp_wc_status status)
{
	struct ibp_wc *wc = &port->cq[(port->cq_head + port->cq_len++) % port->cq_cap];

	memset(wc, 0, sizeof(*wc));
	wc->kind = kind;
	wc->status = status;
	wc->qp = b->qp;
	wc->qp_user = b->qp->user;
	wc->wr_id = kind == IBP_WC_SEND ? b->wr_id : 0;
	wc->buf = &b->pb.pub;
	wc->pkey_index = b->qp->pkey_index;
	sb_set(b, SB_CQ);
	return wc;
}

static unsigned cq_pop(struct ibp_port *port, struct ibp_wc *wcs, unsigned max)
{
	unsigned n = 0;

	while (n < max && port->cq_len) {
		wcs[n] = port->cq[port->cq_head];
		sb_set(&port->bufs[wcs[n].buf->id], SB_OWNED);
		port->cq_head = (port->cq_head + 1) % port->cq_cap;
		port->cq_len--;
		n++;
	}
	return n;
}

static void event_push(struct ibp_port *port, enum ibp_event_type type, struct ibp_qp *qp)
{
	if (port->ev_len == SIM_EVENTS) {
		port->ev_head = (port->ev_head + 1) % SIM_EVENTS; /* keep the newest */
		port->ev_len--;
	}
	port->evq[(port->ev_head + port->ev_len++) % SIM_EVENTS] =
	    (struct ibp_event){ .type = type, .qp = qp };
	if (write(port->afd, &(uint64_t){ 1 }, sizeof(uint64_t)) < 0 && errno != EAGAIN)
		log_errno(LOG_ERR, errno, "sim: %s: eventfd write", port->name);
}

/* A control request finds the socket full (a send burst filled it): the request was
 * not sent, so wait for room (at most 1 s per try, 5 tries) and send it again. */
static bool ctl_again(struct ibp_port *port, int ret, int *tries)
{
	struct pollfd pfd = { .fd = simfab_client_fd(port->fab), .events = POLLOUT };

	if (ret != -EAGAIN || ++*tries > 5)
		return false;
	return poll(&pfd, 1, 1000) >= 0;
}

/* --- QP table (port_lock) -------------------------------------------------------------- */

static struct ibp_qp *qp_find(struct ibp_port *port, uint32_t qpn)
{
	struct ibp_qp *qp = port->qpt[qpn % SIM_QP_BUCKETS];

	while (qp && qp->qpn != qpn)
		qp = qp->hnext;
	return qp;
}

static void qp_link(struct ibp_port *port, struct ibp_qp *qp)
{
	struct ibp_qp **head = &port->qpt[qp->qpn % SIM_QP_BUCKETS];

	qp->hnext = *head;
	*head = qp;
	if (qp->type == IBP_QPT_RC) {
		qp->rc_prev = NULL;
		qp->rc_next = port->rc_list;
		if (port->rc_list)
			port->rc_list->rc_prev = qp;
		port->rc_list = qp;
	}
}

static void qp_unlink(struct ibp_port *port, struct ibp_qp *qp)
{
	struct ibp_qp **pp = &port->qpt[qp->qpn % SIM_QP_BUCKETS];

	while (*pp && *pp != qp)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = qp->hnext;
	if (qp->type == IBP_QPT_RC) {
		if (qp->rc_prev)
			qp->rc_prev->rc_next = qp->rc_next;
		else if (port->rc_list == qp)
			port->rc_list = qp->rc_next;
		if (qp->rc_next)
			qp->rc_next->rc_prev = qp->rc_prev;
	}
	for (unsigned i = 0; i < port->n_touched; i++)
		if (port->touched[i] == qp)
			port->touched[i] = NULL;
}

/* --- packets out (port_lock) -------------------------------------------------------------- */

static uint16_t port_slid(const struct ibp_port *port, uint8_t path_bits)
{
	return (uint16_t)(port->info.lid | (path_bits & ((1u << port->info.lmc) - 1)));
}

static void fill_route(const struct ibp_port *port, const struct ibp_ah_attr *a,
		       struct ib_packet *p)
{
	p->lrh.sl = a->sl & 0xf;
	p->lrh.dlid = a->dlid;
	p->lrh.slid = port_slid(port, a->src_path_bits);
	if (a->is_global) {
		p->has_grh = true;
		p->grh.ipver = IB_GRH_IPVER;
		p->grh.next_hdr = IB_GRH_NXTHDR_BTH;
		p->grh.tclass = a->traffic_class;
		p->grh.flow_label = a->flow_label & 0xfffff;
		p->grh.hop_limit = a->hop_limit;
		ib_gid_set(&p->grh.sgid, port->info.gid_prefix, port->info.port_guid);
		p->grh.dgid = a->dgid;
	}
}

enum tx_result {
	TX_SENT,
	TX_LOST,
	TX_FULL
};

static enum tx_result tx_packet(struct ibp_port *port, uint32_t src_qpn, const struct ib_packet *p)
{
	int len = ib_packet_build(p, port->tx, sizeof(port->tx));
	int ret;

	if (len < 0)
		return TX_LOST; /* cannot happen for what we build; counted by the caller */
	if (!port->link_up || port->fab_dead)
		return TX_LOST;
	ret = simfab_client_send(port->fab, src_qpn, port->tx, (size_t)len);
	if (ret == -EAGAIN) {
		port->tx_blocked = true;
		return TX_FULL;
	}
	if (ret == -ECONNRESET)
		port->fab_dead = true;
	return ret == 0 ? TX_SENT : TX_LOST;
}

/* --- RC engine glue (port_lock) ---------------------------------------------------------- */

static bool rc_tx_req(void *ctx, uint8_t opcode, uint32_t psn, bool ack_req, const uint8_t *payload,
		      uint32_t len)
{
	struct ibp_qp *qp = ctx;
	struct ibp_port *port = qp->port;
	struct ib_packet p;

	if (port->tx_blocked)
		return false;
	memset(&p, 0, sizeof(p));
	fill_route(port, &qp->path, &p);
	p.bth.opcode = opcode;
	p.bth.pkey = qp->pkey;
	p.bth.dqpn = qp->remote_qpn;
	p.bth.ack_req = ack_req;
	p.bth.psn = psn;
	p.payload = payload;
	p.payload_len = len;
	switch (tx_packet(port, qp->qpn, &p)) {
	case TX_FULL:
		port->st.rc_tx_blocked++;
		return false;
	case TX_LOST:
		port->st.rc_tx_link_down++;
		return true; /* gone, as on a dead link: the retransmit timer handles it */
	default:
		return true;
	}
}

static bool rc_tx_ack(void *ctx, uint8_t syndrome, uint32_t msn, uint32_t psn)
{
	struct ibp_qp *qp = ctx;
	struct ibp_port *port = qp->port;
	struct ib_packet p;

	if (port->tx_blocked)
		return false;
	memset(&p, 0, sizeof(p));
	fill_route(port, &qp->path, &p);
	p.bth.opcode = IB_OP_RC_ACK;
	p.bth.pkey = qp->pkey;
	p.bth.dqpn = qp->remote_qpn;
	p.bth.psn = psn;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = msn;
	switch (tx_packet(port, qp->qpn, &p)) {
	case TX_FULL:
		port->st.rc_tx_blocked++;
		return false;
	case TX_LOST:
		port->st.rc_tx_link_down++;
		return true;
	default:
		return true;
	}
}

static struct sbuf *rq_take(struct ibp_qp *qp)
{
	struct sbuf *b;

	if (qp->srq) {
		struct ibp_srq *s = qp->srq;

		if (!s->len)
			return NULL;
		b = s->ring[s->head];
		s->head = (s->head + 1) % s->depth;
		s->len--;
	} else {
		if (!qp->rq_len)
			return NULL;
		b = qp->rq[qp->rq_head];
		qp->rq_head = (qp->rq_head + 1) % qp->recv_depth;
		qp->rq_len--;
	}
	b->qp = qp;
	return b;
}

static void *rc_rx_buf(void *ctx, uint8_t **data, uint32_t *cap)
{
	struct sbuf *b = rq_take(ctx);

	if (!b)
		return NULL;
	sb_set(b, SB_RC_RX);
	*data = b->pb.pub.data;
	*cap = b->pb.pub.cap;
	return b;
}

static enum ibp_wc_status rc_status(enum ibrc_status s)
{
	switch (s) {
	case IBRC_WC_OK:
		return IBP_WC_OK;
	case IBRC_WC_FLUSHED:
		return IBP_WC_FLUSHED;
	case IBRC_WC_RETRY_EXCEEDED:
		return IBP_WC_RETRY_EXCEEDED;
	case IBRC_WC_RNR_EXCEEDED:
		return IBP_WC_RNR_EXCEEDED;
	case IBRC_WC_REMOTE_ERROR:
		return IBP_WC_REMOTE_ERROR;
	default:
		return IBP_WC_LOCAL_ERROR;
	}
}

static void rc_send_done(void *ctx, uint64_t cookie, enum ibrc_status status)
{
	struct ibp_qp *qp = ctx;
	struct sbuf *b = &qp->port->bufs[cookie];

	cq_push(qp->port, b, IBP_WC_SEND, rc_status(status));
}

static void rc_recv_done(void *ctx, void *rbuf, uint32_t len, enum ibrc_status status)
{
	struct ibp_qp *qp = ctx;
	struct sbuf *b = rbuf;
	struct ibp_wc *wc = cq_push(qp->port, b, IBP_WC_RECV, rc_status(status));

	b->pb.pub.len = status == IBRC_WC_OK ? len : 0;
	wc->byte_len = b->pb.pub.len;
	wc->slid = qp->path.dlid;
	wc->src_qp = qp->remote_qpn;
	wc->sl = qp->path.sl;
}

static const struct ibrc_ops rc_ops = {
	.tx_req = rc_tx_req,
	.tx_ack = rc_tx_ack,
	.rx_buf = rc_rx_buf,
	.send_done = rc_send_done,
	.recv_done = rc_recv_done,
};

/* Flushes a QP's own receive queue (RC QP in error, as verbs does). */
static void flush_rq(struct ibp_qp *qp)
{
	while (qp->rq_len) {
		struct sbuf *b = rq_take(qp);

		b->pb.pub.len = 0;
		cq_push(qp->port, b, IBP_WC_RECV, IBP_WC_FLUSHED);
	}
}

/* An RC QP that failed (retries or RNR retries exhausted, remote error) raises
 * QP_FATAL once, and its own receive queue flushes. */
static void rc_check(struct ibp_qp *qp)
{
	if (qp->rc.state != IBRC_ERROR)
		return;
	if (!qp->fatal_told) {
		qp->fatal_told = true;
		event_push(qp->port, IBP_EVENT_QP_FATAL, qp);
	}
	if (!qp->srq && qp->rq_len)
		flush_rq(qp);
}

/* Timers, then whatever the windows allow, for every RC QP. */
static void rc_service(struct ibp_port *port, uint64_t now)
{
	for (struct ibp_qp *qp = port->rc_list; qp; qp = qp->rc_next) {
		if (qp->rc.state == IBRC_RESET)
			continue;
		ibrc_tick(&qp->rc, now);
		ibrc_flush_ack(&qp->rc);
		ibrc_push(&qp->rc, now);
		rc_check(qp);
	}
}

/* --- packets in (port_lock) --------------------------------------------------------------- */

static uint16_t pkey_index_of(const struct ibp_port *port, uint16_t pkey)
{
	for (uint16_t i = 0; i < port->info.n_pkeys; i++)
		if (ib_pkey_match(port->info.pkeys[i], pkey))
			return i;
	return 0;
}

static void rx_ud(struct ibp_port *port, struct ibp_qp *qp, const struct ib_packet *p,
		  const uint8_t *wire)
{
	struct sbuf *b;
	struct ibp_wc *wc;

	if (p->bth.opcode != IB_OP_UD_SEND_ONLY) {
		port->st.rx_wrong_opcode++;
		return;
	}
	b = qp->ready ? rq_take(qp) : NULL;
	if (!b) {
		port->st.ud_rx_no_wqe++; /* as an HCA drops UD without a receive WQE */
		return;
	}
	if (ibp_pool_ud_fill(&b->pb.pub, p->has_grh ? wire + IB_LRH_LEN : NULL, p->payload,
			     p->payload_len) < 0) {
		port->st.ud_rx_too_long++;
		cq_push(port, b, IBP_WC_RECV, IBP_WC_LOCAL_ERROR);
		return;
	}
	wc = cq_push(port, b, IBP_WC_RECV, IBP_WC_OK);
	wc->byte_len = b->pb.pub.len;
	wc->slid = p->lrh.slid;
	wc->src_qp = p->deth.src_qp;
	wc->sl = p->lrh.sl;
	wc->has_grh = p->has_grh;
	if (qp->type == IBP_QPT_GSI) /* QP1 takes any P_Key of the table: say which */
		wc->pkey_index = pkey_index_of(port, p->bth.pkey);
	port->st.ud_rx++;
}

static void rx_rc(struct ibp_port *port, struct ibp_qp *qp, const struct ib_packet *p, uint64_t now)
{
	struct ibrc_pkt rp;

	if (qp->rc.state == IBRC_RESET)
		return;
	if (p->lrh.slid != qp->path.dlid) {
		port->st.rx_wrong_source++; /* not from the connected peer */
		return;
	}
	if (ib_opcode_ext(p->bth.opcode) < 0 || (p->bth.opcode >> 5) != 0) {
		port->st.rx_wrong_opcode++;
		return;
	}
	rp = (struct ibrc_pkt){ .opcode = p->bth.opcode,
				.psn = p->bth.psn,
				.ack_req = p->bth.ack_req,
				.syndrome = p->aeth.syndrome,
				.msn = p->aeth.msn,
				.payload = p->payload,
				.len = (uint32_t)p->payload_len };
	ibrc_rx(&qp->rc, &rp, now);
	if (!qp->touched && port->n_touched < SIM_RX_BUDGET) {
		qp->touched = true;
		port->touched[port->n_touched++] = qp;
	}
}

static void port_state(struct ibp_port *port, bool up)
{
	if (up == port->link_up)
		return;
	port->link_up = up;
	event_push(port, up ? IBP_EVENT_PORT_ACTIVE : IBP_EVENT_PORT_DOWN, NULL);
	log_info("sim: %s: port %s", port->name, up ? "ACTIVE" : "DOWN");
}

/* Read and handle up to SIM_RX_BUDGET messages from the fabric, then send the ACKs
 * they made due (one per RC QP: coalesced) and what they opened windows for. */
static void rx_batch(struct ibp_port *port, uint64_t now)
{
	unsigned i;

	port->n_touched = 0;
	for (i = 0; i < SIM_RX_BUDGET && !port->fab_dead; i++) {
		struct simfab_event ev;
		struct ib_packet p;
		struct ibp_qp *qp;
		int ret = simfab_client_recv(port->fab, &ev, 0);

		if (ret == -EAGAIN) {
			port->ctl_queued = false;
			break;
		}
		if (ret == -ECONNRESET) {
			log_error("sim: %s: the fabric closed the connection", port->name);
			port->fab_dead = true;
			port_state(port, false);
			break;
		}
		if (ret < 0) {
			port->st.rx_bad_packet++;
			continue;
		}
		if (ev.type == SIMFAB_PORT_STATE) {
			port_state(port, ev.port_state == SIMFAB_PORT_ACTIVE);
			continue;
		}
		if (ib_packet_parse(ev.data, ev.len, &p) != IB_PKT_OK) {
			port->st.rx_bad_packet++;
			continue;
		}
		qp = qp_find(port, ev.qpn);
		if (!qp) {
			port->st.rx_unknown_qp++;
			continue;
		}
		if (qp->type != IBP_QPT_RC)
			rx_ud(port, qp, &p, ev.data);
		else
			rx_rc(port, qp, &p, now);
	}
	for (i = 0; i < port->n_touched; i++) {
		struct ibp_qp *qp = port->touched[i];

		if (!qp)
			continue;
		qp->touched = false;
		ibrc_flush_ack(&qp->rc);
		ibrc_push(&qp->rc, now);
		rc_check(qp);
	}
	port->n_touched = 0;
}

/* --- the port's identity (sim/verbs/sim_node) ------------------------------------------- */

/* Read the identity and state; keeps PortInfo's state, SM SL and subnet timeout. */
static int read_identity(struct ibp_port *port, struct simfab_port_info *info)
{
	struct simnode_port sp;
	int ret = simnode_read_port(&port->node, port->port_num, &sp);

	if (ret < 0)
		return ret;
	*info = sp.info;
	port->port_state = sp.state;
	port->sm_sl = sp.sm_sl;
	port->subnet_timeout = sp.subnet_timeout;
	return 0;
}

/* --- open / close / query ---------------------------------------------------------------- */

static void sim_close(struct ibp_port *port);

static int open_umad(struct ibp_port *port, const char *device)
{
	int ret = simnode_open(&port->node, port->port_num);

	port->node_open = true;
	if (ret < 0) {
		log_error("sim: %s: cannot read the local IB port", device);
		return ret;
	}
	if (strcmp(port->node.name, device) != 0) {
		log_error("sim: device \"%s\" is not this process's node: its port belongs to "
			  "node \"%s\" (under umad2sim, SIM_HOST picks the node)",
			  device, port->node.name);
		return -ENODEV;
	}
	return 0;
}

static int setup_fds(struct ibp_port *port)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int fds[3];

	port->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	port->afd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	port->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	port->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (port->evfd < 0 || port->afd < 0 || port->tfd < 0 || port->epfd < 0)
		return -errno;
	fds[0] = simfab_client_fd(port->fab);
	fds[1] = port->evfd;
	fds[2] = port->tfd;
	for (int i = 0; i < 3; i++) {
		ev.data.fd = fds[i];
		if (epoll_ctl(port->epfd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
			return -errno;
	}
	return 0;
}

static int sim_open(const struct ibp_port_config *cfg, struct ibp_port **out)
{
	struct ibp_port *port;
	int ret;

	if (!cfg || !cfg->device || !out || !cfg->sim_socket || cfg->port == 0 ||
	    cfg->port == 255 || cfg->n_bufs == 0 || cfg->buf_size == 0 ||
	    cfg->buf_size > UINT32_MAX || cfg->n_bufs > UINT32_MAX / 2 ||
	    strlen(cfg->device) >= SIMFAB_NAME_MAX) {
		log_error("sim: invalid port config (device = node name, port 1..254, "
			  "sim_socket, n_bufs and buf_size are required)");
		return -EINVAL;
	}
	port = calloc(1, sizeof(*port));
	if (!port)
		return -ENOMEM;
	port->epfd = port->evfd = port->afd = port->tfd = -1;
	port->port_num = cfg->port;
	port->link_up = true;
	snprintf(port->name, sizeof(port->name), "%s", cfg->device);
	pthread_mutex_init(&port->port_lock, NULL);

	ret = open_umad(port, cfg->device);
	if (ret < 0)
		goto fail;
	ret = read_identity(port, &port->info);
	if (ret < 0)
		goto fail;

	/* The pool's memory is anonymous mmap, not memset (port/ib_bufpool.h says why). */
	ret = ibp_pool_init(&port->pool, cfg->n_bufs, cfg->buf_size, sizeof(struct sbuf));
	if (ret < 0)
		goto fail;
	port->bufs = ibp_pool_descs(&port->pool);
	port->cq = calloc(cfg->n_bufs, sizeof(*port->cq));
	if (!port->cq) {
		ret = -ENOMEM;
		goto fail;
	}
	port->cq_cap = cfg->n_bufs;

	ret = simfab_client_connect(cfg->sim_socket, &port->fab);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "sim: %s: cannot connect to the fabric at %s", port->name,
			  cfg->sim_socket);
		goto fail;
	}
	ret = simfab_client_hello(port->fab, &port->info);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "sim: %s: HELLO refused by the fabric: %s", port->name,
			  simfab_client_errmsg(port->fab));
		goto fail;
	}
	ret = setup_fds(port);
	if (ret < 0)
		goto fail;
	log_info("sim: %s port %u open: LID 0x%x, GUID 0x%016llx, MTU %u, %u buffers of %zu",
		 port->name, port->port_num, port->info.lid,
		 (unsigned long long)port->info.port_guid, ib_mtu_bytes(port->info.mtu),
		 port->pool.n_bufs, cfg->buf_size);
	*out = port;
	return 0;
fail:
	sim_close(port);
	return ret;
}

static void qp_release(struct ibp_port *port, struct ibp_qp *qp);

static void sim_close(struct ibp_port *port)
{
	if (!port)
		return;
	pthread_mutex_lock(&port->port_lock);
	for (unsigned i = 0; i < SIM_QP_BUCKETS; i++) {
		while (port->qpt[i]) {
			struct ibp_qp *qp = port->qpt[i];

			qp_unlink(port, qp);
			qp_release(port, qp);
		}
	}
	pthread_mutex_unlock(&port->port_lock);
	while (port->srqs) {
		struct ibp_srq *s = port->srqs;

		port->srqs = s->next;
		free(s->ring);
		free(s);
	}
	while (port->ahs) {
		struct ibp_ah *ah = port->ahs;

		port->ahs = ah->next;
		free(ah);
	}
	simfab_client_close(port->fab);
	if (port->epfd >= 0)
		close(port->epfd);
	if (port->evfd >= 0)
		close(port->evfd);
	if (port->tfd >= 0)
		close(port->tfd);
	if (port->afd >= 0)
		close(port->afd);
	if (port->node_open)
		simnode_close(&port->node);
	ibp_pool_fini(&port->pool);
	free(port->cq);
	pthread_mutex_destroy(&port->port_lock);
	free(port);
}

static enum ibp_port_state map_state(uint8_t s)
{
	switch (s) {
	case 2:
		return IBP_PORT_INIT;
	case 3:
		return IBP_PORT_ARMED;
	case 4:
		return IBP_PORT_ACTIVE;
	default:
		return IBP_PORT_DOWN;
	}
}

/* Re-reads the port (an SMP, like ibv_query_port reads the HCA); a changed LID, SM or
 * P_Key table is told to the fabric (PORT_UPDATE) and queued as an event. */
static int sim_query(struct ibp_port *port, struct ibp_port_attr *attr)
{
	struct simfab_port_info now;
	int ret = read_identity(port, &now);

	pthread_mutex_lock(&port->port_lock);
	if (ret == 0 && now.lid != 0 && memcmp(&now, &port->info, sizeof(now)) != 0) {
		bool lid = now.lid != port->info.lid || now.lmc != port->info.lmc;
		bool sm = now.sm_lid != port->info.sm_lid;
		bool pk = now.n_pkeys != port->info.n_pkeys ||
			  memcmp(now.pkeys, port->info.pkeys, sizeof(now.pkeys)) != 0;
		int r2, tries = 0;

		do
			r2 = simfab_client_port_update(port->fab, &now);
		while (ctl_again(port, r2, &tries));

		port->ctl_queued = true;
		if (r2 < 0) {
			log_errno(LOG_ERR, -r2, "sim: %s: PORT_UPDATE refused: %s", port->name,
				  simfab_client_errmsg(port->fab));
		} else {
			port->info = now;
			if (lid)
				event_push(port, IBP_EVENT_LID_CHANGE, NULL);
			if (sm)
				event_push(port, IBP_EVENT_SM_CHANGE, NULL);
			if (pk)
				event_push(port, IBP_EVENT_PKEY_CHANGE, NULL);
		}
		wake(port);
	}
	memset(attr, 0, sizeof(*attr));
	attr->state =
	    port->link_up && !port->fab_dead ? map_state(port->port_state) : IBP_PORT_DOWN;
	attr->lid = port->info.lid;
	attr->lmc = port->info.lmc;
	attr->sm_lid = port->info.sm_lid;
	attr->sm_sl = port->sm_sl;
	attr->subnet_timeout = port->subnet_timeout;
	attr->active_mtu = (enum ib_mtu)port->info.mtu;
	attr->gid_prefix = port->info.gid_prefix;
	attr->port_guid = port->info.port_guid;
	attr->n_pkeys = port->info.n_pkeys < IBP_MAX_PKEYS ? port->info.n_pkeys : IBP_MAX_PKEYS;
	for (unsigned i = 0; i < attr->n_pkeys; i++)
		attr->pkeys[i] = port->info.pkeys[i];
	pthread_mutex_unlock(&port->port_lock);
	return ret;
}

/* --- SRQ --------------------------------------------------------------------------------- */

static int sim_create_srq(struct ibp_port *port, unsigned depth, struct ibp_srq **out)
{
	struct ibp_srq *s;

	if (depth == 0 || depth > port->pool.n_bufs)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ring = calloc(depth, sizeof(*s->ring));
	if (!s->ring) {
		free(s);
		return -ENOMEM;
	}
	s->port = port;
	s->depth = depth;
	s->next = port->srqs;
	port->srqs = s;
	*out = s;
	return 0;
}

static void sim_destroy_srq(struct ibp_srq *srq)
{
	struct ibp_port *port = srq->port;
	struct ibp_srq **pp = &port->srqs;

	pthread_mutex_lock(&port->port_lock);
	while (srq->len) {
		free_push(port, srq->ring[srq->head]);
		srq->head = (srq->head + 1) % srq->depth;
		srq->len--;
	}
	pthread_mutex_unlock(&port->port_lock);
	while (*pp && *pp != srq)
		pp = &(*pp)->next;
	if (*pp)
		*pp = srq->next;
	free(srq->ring);
	free(srq);
}

/* --- QPs --------------------------------------------------------------------------------- */

static int sim_create_qp(struct ibp_port *port, const struct ibp_qp_init *init, struct ibp_qp **out)
{
	struct ibp_qp *qp;
	int ret;

	if (!init ||
	    (init->type != IBP_QPT_UD && init->type != IBP_QPT_RC && init->type != IBP_QPT_GSI) ||
	    init->send_depth == 0 || (init->type != IBP_QPT_RC && init->srq) ||
	    (!init->srq && init->recv_depth == 0) || (init->srq && init->srq->port != port) ||
	    init->pkey_index >= port->info.n_pkeys)
		return -EINVAL;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->port = port;
	qp->type = init->type;
	qp->user = init->user;
	qp->pkey_index = init->pkey_index;
	qp->qkey = init->type == IBP_QPT_UD    ? init->qkey
		   : init->type == IBP_QPT_GSI ? IB_QP1_QKEY
					       : 0;
	qp->srq = init->srq;
	qp->recv_depth = init->srq ? 0 : init->recv_depth;
	if (!qp->srq) {
		qp->rq = calloc(qp->recv_depth, sizeof(*qp->rq));
		if (!qp->rq) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	if (qp->type == IBP_QPT_RC) {
		ret = ibrc_init(&qp->rc, &rc_ops, qp, init->send_depth);
		if (ret < 0)
			goto fail;
	}
	pthread_mutex_lock(&port->port_lock);
	qp->pkey = port->info.pkeys[qp->pkey_index];
	if (qp->type == IBP_QPT_GSI) {
		/* QP1 exists on every fabric port; one GSI QP per port. */
		qp->qpn = IB_QP1;
		ret = qp_find(port, IB_QP1) ? -EBUSY : 0;
	} else {
		int tries = 0;

		do
			ret = simfab_client_qp_create_pkey(
			    port->fab, qp->type == IBP_QPT_UD ? SIMFAB_QP_UD : SIMFAB_QP_RC,
			    qp->pkey_index, qp->qkey, &qp->qpn);
		while (ctl_again(port, ret, &tries));
		port->ctl_queued = true;
		if (ret < 0)
			log_errno(LOG_ERR, -ret, "sim: %s: QP_CREATE refused: %s", port->name,
				  simfab_client_errmsg(port->fab));
		wake(port);
	}
	if (ret == 0)
		qp_link(port, qp);
	pthread_mutex_unlock(&port->port_lock);
	if (ret < 0)
		goto fail;
	*out = qp;
	return 0;
fail:
	ibrc_fini(&qp->rc);
	free(qp->rq);
	free(qp);
	return ret;
}

static int sim_qp_ready(struct ibp_qp *qp, const struct ibp_qp_connect *c)
{
	struct ibp_port *port = qp->port;
	struct ibrc_conn rc;
	unsigned mtu;
	int ret = 0;

	if (qp->type != IBP_QPT_RC) {
		pthread_mutex_lock(&port->port_lock);
		qp->ready = true;
		pthread_mutex_unlock(&port->port_lock);
		return 0;
	}
	if (!c || !ib_mtu_bytes((int)c->path_mtu) || c->remote_qpn > IB_QPN_MAX ||
	    c->remote_qpn < 2 || c->path.dlid == 0 || c->path.dlid >= IB_LID_MC_FIRST)
		return -EINVAL;
	mtu = ib_mtu_bytes((int)c->path_mtu);
	if (mtu > ib_mtu_bytes(port->info.mtu))
		mtu = ib_mtu_bytes(port->info.mtu);
	rc = (struct ibrc_conn){ .mtu = mtu,
				 .sq_psn = c->local_psn,
				 .rq_psn = c->remote_psn,
				 .timeout = c->timeout,
				 .retry_count = c->retry_count,
				 .rnr_retry = c->rnr_retry,
				 .min_rnr_timer = c->min_rnr_timer };
	pthread_mutex_lock(&port->port_lock);
	qp->path = c->path;
	qp->remote_qpn = c->remote_qpn;
	ret = ibrc_connect(&qp->rc, &rc);
	if (ret == 0)
		qp->ready = true;
	pthread_mutex_unlock(&port->port_lock);
	return ret;
}

static uint32_t sim_qp_num(const struct ibp_qp *qp)
{
	return qp->qpn;
}

/* Give every buffer the QP holds back to the pool, drop its completions, free it.
 * port_lock held; qp already unlinked. */
static void qp_release(struct ibp_port *port, struct ibp_qp *qp)
{
	unsigned kept = 0;

	while (qp->rq_len) {
		free_push(port, qp->rq[qp->rq_head]);
		qp->rq_head = (qp->rq_head + 1) % qp->recv_depth;
		qp->rq_len--;
	}
	if (qp->type == IBP_QPT_RC) {
		for (uint32_t i = 0; i < qp->rc.sq_len; i++)
			free_push(
			    port,
			    &port->bufs[qp->rc.sq[(qp->rc.sq_head + i) % qp->rc.sq_cap].cookie]);
		if (qp->rc.rbuf)
			free_push(port, qp->rc.rbuf);
		port->rc_gone.tx_pkts += qp->rc.stats.tx_pkts;
		port->rc_gone.retrans_pkts += qp->rc.stats.retrans_pkts;
		port->rc_gone.timeouts += qp->rc.stats.timeouts;
		port->rc_gone.seq_naks_rcvd += qp->rc.stats.seq_naks_rcvd;
		port->rc_gone.rnr_naks_rcvd += qp->rc.stats.rnr_naks_rcvd;
		port->rc_gone.rx_pkts += qp->rc.stats.rx_pkts;
		port->rc_gone.dup_pkts += qp->rc.stats.dup_pkts;
		port->rc_gone.gap_pkts += qp->rc.stats.gap_pkts;
		port->rc_gone.seq_naks_sent += qp->rc.stats.seq_naks_sent;
		port->rc_gone.rnr_naks_sent += qp->rc.stats.rnr_naks_sent;
		port->rc_gone.acks_sent += qp->rc.stats.acks_sent;
		port->rc_gone.msgs_sent += qp->rc.stats.msgs_sent;
		port->rc_gone.msgs_rcvd += qp->rc.stats.msgs_rcvd;
		ibrc_fini(&qp->rc);
	}
	/* The caller sees no completion of a QP after destroy_qp (as the verbs backend). */
	for (unsigned i = 0; i < port->cq_len; i++) {
		struct ibp_wc *wc = &port->cq[(port->cq_head + i) % port->cq_cap];

		if (wc->qp == qp)
			free_push(port, &port->bufs[wc->buf->id]);
		else
			port->cq[(port->cq_head + kept++) % port->cq_cap] = *wc;
	}
	port->cq_len = kept;
	for (unsigned i = 0; i < port->ev_len; i++)
		if (port->evq[(port->ev_head + i) % SIM_EVENTS].qp == qp)
			port->evq[(port->ev_head + i) % SIM_EVENTS].qp = NULL;
	free(qp->rq);
	free(qp);
}

static void sim_destroy_qp(struct ibp_qp *qp)
{
	struct ibp_port *port = qp->port;
	uint32_t qpn = qp->qpn;
	enum ibp_qp_type qp_type = qp->type;
	int ret = 0;

	pthread_mutex_lock(&port->port_lock);
	qp_unlink(port, qp);
	qp_release(port, qp);
	if (!port->fab_dead && qp_type != IBP_QPT_GSI) {
		int tries = 0;

		do
			ret = simfab_client_qp_destroy(port->fab, qpn);
		while (ctl_again(port, ret, &tries));
		port->ctl_queued = true;
		wake(port);
	}
	pthread_mutex_unlock(&port->port_lock);
	if (ret < 0)
		log_errno(LOG_WARNING, -ret, "sim: %s: QP_DESTROY %u", port->name, qpn);
}

/* --- AHs, multicast ------------------------------------------------------------------------ */

static int sim_create_ah(struct ibp_port *port, const struct ibp_ah_attr *attr, struct ibp_ah **out)
{
	struct ibp_ah *ah;

	if (!attr || attr->dlid == 0 || attr->sgid_index != 0 || attr->sl > 15)
		return -EINVAL;
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	ah->port = port;
	ah->attr = *attr;
	ah->next = port->ahs;
	port->ahs = ah;
	*out = ah;
	return 0;
}

static void sim_destroy_ah(struct ibp_ah *ah)
{
	struct ibp_ah **pp = &ah->port->ahs;

	while (*pp && *pp != ah)
		pp = &(*pp)->next;
	if (*pp)
		*pp = ah->next;
	free(ah);
}

static int mcast(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid, bool attach)
{
	struct ibp_port *port = qp->port;
	int ret, tries = 0;

	if (qp->type != IBP_QPT_UD || !mgid)
		return -EINVAL;
	pthread_mutex_lock(&port->port_lock);
	do
		ret = attach ? simfab_client_mcast_attach(port->fab, qp->qpn, mgid, mlid)
			     : simfab_client_mcast_detach(port->fab, qp->qpn, mgid, mlid);
	while (ctl_again(port, ret, &tries));
	port->ctl_queued = true;
	wake(port);
	if (ret < 0)
		log_errno(LOG_ERR, -ret, "sim: %s: MCAST_%s QP %u: %s", port->name,
			  attach ? "ATTACH" : "DETACH", qp->qpn, simfab_client_errmsg(port->fab));
	pthread_mutex_unlock(&port->port_lock);
	return ret;
}

static int sim_attach_mcast(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	return mcast(qp, mgid, mlid, true);
}

static int sim_detach_mcast(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	return mcast(qp, mgid, mlid, false);
}

/* --- data path ------------------------------------------------------------------------------ */

/* One UD send: built and handed to the fabric now; completes at once (as an HCA's
 * completes once on the wire). A down port or full socket drops it, counted. */
static void send_ud(struct ibp_port *port, struct ibp_send *s, struct sbuf *b)
{
	struct ibp_qp *qp = s->qp;
	const struct ibp_ah_attr *a = &s->ah->attr;
	struct ib_packet p;
	enum ibp_wc_status status = IBP_WC_OK;

	b->qp = qp;
	b->wr_id = s->wr_id;
	if (s->buf->len > ib_mtu_bytes(port->info.mtu)) {
		port->st.ud_tx_too_long++;
		cq_push(port, b, IBP_WC_SEND, IBP_WC_LOCAL_ERROR);
		return;
	}
	memset(&p, 0, sizeof(p));
	fill_route(port, a, &p);
	p.bth.opcode = IB_OP_UD_SEND_ONLY;
	p.bth.pkey = qp->pkey;
	if (qp->type == IBP_QPT_GSI) {
		if (s->pkey_index >= port->info.n_pkeys) {
			cq_push(port, b, IBP_WC_SEND, IBP_WC_LOCAL_ERROR);
			return;
		}
		p.bth.pkey = port->info.pkeys[s->pkey_index];
	}
	p.bth.dqpn = s->remote_qpn & IB_QPN_MAX;
	p.bth.psn = qp->ud_psn;
	qp->ud_psn = ibrc_psn_add(qp->ud_psn, 1);
	/* A Q_Key with the high bit set in the WR means "use the QP's own" (IBA 10.2.5). */
	p.deth.qkey = s->remote_qkey & IB_QKEY_PRIVILEGED ? qp->qkey : s->remote_qkey;
	p.deth.src_qp = qp->qpn;
	p.payload = s->buf->data;
	p.payload_len = s->buf->len;
	switch (tx_packet(port, qp->qpn, &p)) {
	case TX_SENT:
		port->st.ud_tx++;
		break;
	case TX_FULL:
		port->tx_blocked = false; /* UD does not wait: the packet is dropped */
		port->st.ud_tx_full++;
		break;
	case TX_LOST:
		port->st.ud_tx_link_down++;
		break;
	}
	cq_push(port, b, IBP_WC_SEND, status);
}

static int sim_post_send(struct ibp_send *sends, unsigned n)
{
	struct ibp_port *port;
	struct ibp_qp *last_rc = NULL;
	uint64_t now;
	unsigned done;
	int err = 0;

	if (n == 0)
		return 0;
	if (!sends[0].qp)
		return -EINVAL;
	port = sends[0].qp->port;
	now = now_ns();
	pthread_mutex_lock(&port->port_lock);
	for (done = 0; done < n; done++) {
		struct ibp_send *s = &sends[done];
		struct ibp_qp *qp = s->qp;
		struct sbuf *b = sbuf_of(port, s->buf);

		if (!qp || qp->port != port || !qp->ready || !b || sb_state(b) != SB_OWNED ||
		    s->buf->len > s->buf->cap || (qp->type != IBP_QPT_RC && !s->ah)) {
			err = -EINVAL;
			break;
		}
		if (qp->type != IBP_QPT_RC) {
			sb_set(b, SB_SEND);
			send_ud(port, s, b);
			continue;
		}
		b->qp = qp;
		b->wr_id = s->wr_id;
		sb_set(b, SB_SEND);
		err = ibrc_post(&qp->rc, b->pb.pub.data, b->pb.pub.len, s->buf->id);
		if (err) {
			sb_set(b, SB_OWNED);
			break;
		}
		if (last_rc && last_rc != qp)
			ibrc_push(&last_rc->rc, now);
		last_rc = qp;
	}
	if (last_rc)
		ibrc_push(&last_rc->rc, now);
	pthread_mutex_unlock(&port->port_lock);
	return done ? (int)done : err;
}

static int post_recvs(struct ibp_port *port, struct ibp_qp *qp, struct ibp_srq *srq,
		      struct ibp_buf **bufs, unsigned n)
{
	unsigned done;
	int err = 0;

	pthread_mutex_lock(&port->port_lock);
	for (done = 0; done < n; done++) {
		struct sbuf *b = sbuf_of(port, bufs[done]);
		unsigned depth = qp ? qp->recv_depth : srq->depth;
		unsigned len = qp ? qp->rq_len : srq->len;

		if (!b || sb_state(b) != SB_OWNED) {
			err = -EINVAL;
			break;
		}
		if (len == depth) {
			err = -ENOMEM;
			break;
		}
		if (qp) {
			qp->rq[(qp->rq_head + qp->rq_len++) % qp->recv_depth] = b;
			sb_set(b, SB_RECV);
		} else {
			srq->ring[(srq->head + srq->len++) % srq->depth] = b;
			sb_set(b, SB_SRQ);
		}
	}
	/* An RC QP in error flushes what is posted to it, as verbs does. */
	if (qp && qp->type == IBP_QPT_RC)
		rc_check(qp);
	pthread_mutex_unlock(&port->port_lock);
	return done ? (int)done : err;
}

static int sim_post_recv(struct ibp_qp *qp, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	if (qp->srq)
		return -EINVAL;
	return post_recvs(qp->port, qp, NULL, bufs, n);
}

static int sim_post_srq_recv(struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	return post_recvs(srq->port, NULL, srq, bufs, n);
}

static int sim_poll(struct ibp_port *port, struct ibp_wc *wcs, unsigned max)
{
	uint64_t now = now_ns();
	unsigned n;

	pthread_mutex_lock(&port->port_lock);
	port->tx_blocked = false; /* try the socket again */
	rx_batch(port, now);
	rc_service(port, now);
	n = cq_pop(port, wcs, max);
	pthread_mutex_unlock(&port->port_lock);
	return (int)n;
}

/* --- events ------------------------------------------------------------------------------------ */

static int sim_cq_fd(struct ibp_port *port)
{
	return port->epfd;
}

static int sim_async_fd(struct ibp_port *port)
{
	return port->afd;
}

/* Before the owner sleeps on event_fd: clear the eventfd and the timerfd, set the
 * timerfd to the earliest RC timer, want EPOLLOUT while a send waits for room, and
 * make the eventfd readable again if work is already waiting. */
static int sim_arm(struct ibp_port *port)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	uint64_t v, dl = 0;
	bool work;
	int ret = 0;

	pthread_mutex_lock(&port->port_lock);
	while (read(port->evfd, &v, sizeof(v)) == sizeof(v))
		;
	while (read(port->tfd, &v, sizeof(v)) == sizeof(v))
		;
	work = port->cq_len || port->ev_len || port->ctl_queued;
	for (struct ibp_qp *qp = port->rc_list; qp; qp = qp->rc_next) {
		uint64_t d = ibrc_next_deadline(&qp->rc);

		if (d && (!dl || d < dl))
			dl = d;
		if (!port->tx_blocked && (ibrc_can_send(&qp->rc) || qp->rc.ack_due))
			work = true;
	}
	if (dl) {
		its.it_value.tv_sec = (time_t)(dl / 1000000000u);
		its.it_value.tv_nsec = (long)(dl % 1000000000u);
	}
	if (timerfd_settime(port->tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
		ret = -errno;
	if (port->tx_blocked != port->out_armed) {
		struct epoll_event ev = { .events = EPOLLIN | (port->tx_blocked ? EPOLLOUT : 0u) };
		int fd = simfab_client_fd(port->fab);

		ev.data.fd = fd;
		if (epoll_ctl(port->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
			port->out_armed = port->tx_blocked;
	}
	if (work)
		wake(port);
	pthread_mutex_unlock(&port->port_lock);
	return ret;
}

/* Port events come in on the fabric socket: read what is there (the same work poll
 * does, under the same lock), then hand out the oldest event. */
static int sim_next_event(struct ibp_port *port, struct ibp_event *ev)
{
	int ret = -EAGAIN;

	pthread_mutex_lock(&port->port_lock);
	if (!port->ev_len) {
		rx_batch(port, now_ns());
		if (port->cq_len)
			wake(port);
	}
	if (port->ev_len) {
		*ev = port->evq[port->ev_head];
		port->ev_head = (port->ev_head + 1) % SIM_EVENTS;
		port->ev_len--;
		ret = 0;
	}
	if (!port->ev_len) {
		uint64_t v;

		while (read(port->afd, &v, sizeof(v)) == sizeof(v))
			;
	}
	pthread_mutex_unlock(&port->port_lock);
	return ret;
}

int ibp_sim_stats(struct ibp_port *port, struct ibp_sim_stats *out)
{
	struct ibrc_stats t;

	pthread_mutex_lock(&port->port_lock);
	*out = port->st;
	t = port->rc_gone;
	for (struct ibp_qp *qp = port->rc_list; qp; qp = qp->rc_next) {
		const struct ibrc_stats *s = &qp->rc.stats;

		t.tx_pkts += s->tx_pkts;
		t.retrans_pkts += s->retrans_pkts;
		t.timeouts += s->timeouts;
		t.seq_naks_rcvd += s->seq_naks_rcvd;
		t.rnr_naks_rcvd += s->rnr_naks_rcvd;
		t.rx_pkts += s->rx_pkts;
		t.dup_pkts += s->dup_pkts;
		t.gap_pkts += s->gap_pkts;
		t.seq_naks_sent += s->seq_naks_sent;
		t.rnr_naks_sent += s->rnr_naks_sent;
		t.acks_sent += s->acks_sent;
		t.msgs_sent += s->msgs_sent;
		t.msgs_rcvd += s->msgs_rcvd;
	}
	pthread_mutex_unlock(&port->port_lock);
	out->rc_tx_pkts = t.tx_pkts;
	out->rc_retrans_pkts = t.retrans_pkts;
	out->rc_timeouts = t.timeouts;
	out->rc_seq_naks_rcvd = t.seq_naks_rcvd;
	out->rc_rnr_naks_rcvd = t.rnr_naks_rcvd;
	out->rc_rx_pkts = t.rx_pkts;
	out->rc_dup_pkts = t.dup_pkts;
	out->rc_gap_pkts = t.gap_pkts;
	out->rc_seq_naks_sent = t.seq_naks_sent;
	out->rc_rnr_naks_sent = t.rnr_naks_sent;
	out->rc_acks_sent = t.acks_sent;
	out->rc_msgs_sent = t.msgs_sent;
	out->rc_msgs_rcvd = t.msgs_rcvd;
	return 0;
}

const struct ibp_ops ibp_sim_ops = {
	.name = "sim",
	.open = sim_open,
	.close = sim_close,
	.query = sim_query,
	.buf_get = sim_buf_get,
	.buf_put = sim_buf_put,
	.create_srq = sim_create_srq,
	.destroy_srq = sim_destroy_srq,
	.create_qp = sim_create_qp,
	.qp_ready = sim_qp_ready,
	.destroy_qp = sim_destroy_qp,
	.qp_num = sim_qp_num,
	.create_ah = sim_create_ah,
	.destroy_ah = sim_destroy_ah,
	.attach_mcast = sim_attach_mcast,
	.detach_mcast = sim_detach_mcast,
	.post_send = sim_post_send,
	.post_recv = sim_post_recv,
	.post_srq_recv = sim_post_srq_recv,
	.poll = sim_poll,
	.cq_fd = sim_cq_fd,
	.arm = sim_arm,
	.async_fd = sim_async_fd,
	.next_event = sim_next_event,
};
