/*
 * libibverbs2sim, part two: QPs and the ibv_modify_qp state machine, SRQs, AHs,
 * multicast, the posts and what the simulated HCA does with them: UD packets built and
 * parsed here (LRH, GRH, BTH, DETH through lib/ib_packet), RC through the software
 * transport of sim/verbs/ib_rc (segmentation, ACKs, go-back-N, RNR).
 *
 * Semantics are the verbs man pages' and what mlx5 does where the spec leaves room;
 * each place where the shim chooses says so. In short:
 *   - ibv_modify_qp checks the transition and the attribute mask against the IBA's
 *     table (the kernel's qp_state_table: required and optional attributes per QP
 *     type); a wrong one is EINVAL and changes nothing.
 *   - post_send: RESET, INIT, RTR refuse (EINVAL, *bad_wr); SQE and ERR accept and
 *     flush. post_recv: RESET refuses; ERR flushes.
 *   - an error completion moves the QP to ERR (UD send errors: to SQE, IBA 10.3.1);
 *     entering ERR flushes every outstanding WR (IBV_WC_WR_FLUSH_ERR; receives posted
 *     to an SRQ stay there, and the QP raises QP_LAST_WQE_REACHED).
 *   - only signaled sends complete (sq_sig_all or IBV_SEND_SIGNALED), errors always.
 *   - the lkey of every SGE is checked against a registered MR of the QP's PD and its
 *     range (receives: with local write): IBV_WC_LOC_PROT_ERR otherwise, when the HCA
 *     would find it (sends at post, receives when a packet lands).
 *   - UD receives: the first 40 octets of the buffer take the GRH (or stay untouched
 *     when there is none, IBV_WC_GRH clear), byte_len counts them.
 *
 * Threads: every function here runs with ctx->lock held (vsim_pvt.h), taken by the
 * ibv_* entry points below or by the progress thread.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim/verbs/vsim_gsi.h"
#include "sim/verbs/vsim_pvt.h"
#include "lib/ib_hdr.h"
#include "lib/log.h"

/* --- helpers ---------------------------------------------------------------------------- */

static struct vsim_qp *qp_find(struct vsim_ctx *ctx, const struct vsim_port *port, uint32_t qpn)
{
	struct vsim_qp *qp = ctx->qpt[qpn % VSIM_QP_BUCKETS];

	while (qp && (qp->qp.qp_num != qpn || qp->port != port))
		qp = qp->hnext;
	return qp;
}

static uint16_t qp_pkey(const struct vsim_qp *qp)
{
	const struct simfab_port_info *i = &qp->port->sp.info;

	return qp->pkey_index < i->n_pkeys ? i->pkeys[qp->pkey_index] : 0;
}

static void wc_add(struct vsim_qp *qp, bool send, uint64_t wr_id, enum ibv_wc_status status,
		   enum ibv_wc_opcode op, uint32_t byte_len)
{
	struct ibv_wc wc = { .wr_id = wr_id,
			     .status = status,
			     .opcode = op,
			     .byte_len = byte_len,
			     .qp_num = qp->qp.qp_num,
			     .pkey_index = qp->pkey_index };

	vsim_cq_add(qp->ctx, (struct vsim_cq *)(send ? qp->qp.send_cq : qp->qp.recv_cq), &wc, qp);
}

bool vsim_rq_take(struct vsim_rq *rq, struct vsim_rwqe *out)
{
	if (!rq->len)
		return false;
	*out = rq->ring[rq->head];
	rq->head = (rq->head + 1) % rq->cap;
	rq->len--;
	return true;
}

int vsim_rq_init(struct vsim_rq *rq, unsigned cap, unsigned max_sge)
{
	rq->cap = cap ? cap : 1;
	rq->max_sge = max_sge ? max_sge : 1;
	rq->ring = calloc(rq->cap, sizeof(*rq->ring));
	rq->sges = calloc((size_t)rq->cap * rq->max_sge, sizeof(*rq->sges));
	if (!rq->ring || !rq->sges)
		return -ENOMEM;
	for (unsigned i = 0; i < rq->cap; i++)
		rq->ring[i].sge = &rq->sges[(size_t)i * rq->max_sge];
	return 0;
}

void vsim_rq_fini(struct vsim_rq *rq)
{
	free(rq->ring);
	free(rq->sges);
	memset(rq, 0, sizeof(*rq));
}

/* Post a chain to a receive ring: the accepted prefix, *bad at the first refused. */
int vsim_rq_post(struct vsim_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct vsim_rwqe *w;

		if (wr->num_sge < 0 || (unsigned)wr->num_sge > rq->max_sge) {
			*bad = wr;
			return EINVAL;
		}
		if (rq->len == rq->cap) {
			*bad = wr;
			return ENOMEM;
		}
		w = &rq->ring[(rq->head + rq->len++) % rq->cap];
		w->wr_id = wr->wr_id;
		w->num_sge = wr->num_sge;
		memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(*w->sge));
	}
	return 0;
}

static enum ibv_wc_status rc_status(enum ibrc_status s)
{
	switch (s) {
	case IBRC_WC_OK:
		return IBV_WC_SUCCESS;
	case IBRC_WC_FLUSHED:
		return IBV_WC_WR_FLUSH_ERR;
	case IBRC_WC_RETRY_EXCEEDED:
		return IBV_WC_RETRY_EXC_ERR;
	case IBRC_WC_RNR_EXCEEDED:
		return IBV_WC_RNR_RETRY_EXC_ERR;
	case IBRC_WC_REMOTE_ERROR:
		return IBV_WC_REM_INV_REQ_ERR;
	default:
		return IBV_WC_LOC_LEN_ERR; /* the responder's message did not fit */
	}
}

/* --- entering ERR (and SQE) ------------------------------------------------------------------ */

static void swqe_pop(struct vsim_qp *qp)
{
	struct vsim_swqe *w = &qp->sq[qp->sq_head];

	if (w->copy_alloc)
		free(w->copy);
	w->copy = NULL;
	w->copy_alloc = false;
	qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
	qp->sq_len--;
}

/* The UD sends still waiting complete flushed (in ERR, or behind an error in SQE). */
static void ud_flush(struct vsim_qp *qp)
{
	for (; qp->sq_len; swqe_pop(qp))
		wc_add(qp, true, qp->sq[qp->sq_head].wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, 0);
}

/* To ERR: every outstanding WR completes flushed. Receives posted to an SRQ stay on it;
 * the QP tells it is done with them by QP_LAST_WQE_REACHED (IBA 11.6.3.4). */
static void qp_to_err(struct vsim_qp *qp)
{
	struct vsim_rwqe w;

	if (qp->qp.state == IBV_QPS_ERR)
		return;
	qp->qp.state = IBV_QPS_ERR;
	if (qp->type == IBV_QPT_RC && qp->rc_init)
		ibrc_fail(&qp->rc, IBRC_WC_FLUSHED); /* sends and a message half received */
	if (qp->type == IBV_QPT_UD)
		ud_flush(qp);
	if (!qp->srq)
		while (vsim_rq_take(&qp->rq, &w))
			wc_add(qp, false, w.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
	if (qp->srq && !qp->last_wqe_told) {
		qp->last_wqe_told = true;
		vsim_event(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->qp, 0);
	}
}

/* An RC QP whose engine failed (retries exhausted, a NAK, a bad receive) goes to ERR. As
 * on mlx5 the error is told by the failed WR's completion, no async event. */
static void rc_check(struct vsim_qp *qp)
{
	if (qp->type != IBV_QPT_RC || qp->qp.state == IBV_QPS_ERR)
		return;
	if (qp->rbad) {
		qp->rbad = false;
		ibrc_fail(&qp->rc, IBRC_WC_FLUSHED);
	}
	if (qp->rc_init && qp->rc.state == IBRC_ERROR)
		qp_to_err(qp);
}

void vsim_qp_fatal_all(struct vsim_ctx *ctx)
{
	ctx->fatal_pending = false;
	for (struct vsim_qp *qp = ctx->qps; qp; qp = qp->next) {
		if (!qp->fatal || qp->qp.state == IBV_QPS_ERR)
			continue;
		qp_to_err(qp);
		vsim_event(ctx, IBV_EVENT_QP_FATAL, &qp->qp, 0);
	}
}

/* A QP to ERR with QP_FATAL, as an HCA raises it for a QP it can no longer run (IBA
 * 11.6.3.1); nothing else tells the program: the WRs flush. */
static int qp_fail(struct vsim_qp *qp)
{
	if (qp->qp.state == IBV_QPS_RESET || qp->qp.state == IBV_QPS_ERR)
		return -EINVAL; /* nothing runs: nothing can fail */
	qp_to_err(qp);
	vsim_event(qp->ctx, IBV_EVENT_QP_FATAL, &qp->qp, 0);
	return 0;
}

int vsim_fault_qp(struct vsim_ctx *ctx, uint32_t qpn, unsigned index, bool wq)
{
	struct vsim_qp *qp = NULL, *sq = NULL;
	unsigned below;

	for (struct vsim_qp *q = ctx->qps; q && !qp; q = q->next)
		if (q->qp.qp_num == qpn && q->type == IBV_QPT_UD)
			qp = q;
	if (!qp)
		return -ENOENT;
	if (wq) {
		if (!qp->rss || index >= qp->rss->size)
			return -EINVAL;
		return vsim_wq_fault(ctx, qp->rss->wq[index]);
	}
	if (!qp->rss)
		return index == 0 ? qp_fail(qp) : -EINVAL;
	/* An RSS QP holds no WQEs: what fails is a send QP sending as it, the index-th
	 * by QPN (the order they were numbered in). */
	for (struct vsim_qp *q = ctx->qps; q; q = q->next) {
		if (q->src != qp)
			continue;
		below = 0;
		for (struct vsim_qp *o = ctx->qps; o; o = o->next)
			below += o->src == qp && o->qp.qp_num < q->qp.qp_num;
		if (below == index)
			sq = q;
	}
	return sq ? qp_fail(sq) : -EINVAL;
}

/* --- packets out --------------------------------------------------------------------------- */

static void fill_route(const struct vsim_port *port, const struct ibv_ah_attr *a,
		       struct ib_packet *p)
{
	const struct simfab_port_info *i = &port->sp.info;

	p->lrh.sl = a->sl & 0xf;
	p->lrh.dlid = a->dlid;
	p->lrh.slid = (uint16_t)(i->lid | (a->src_path_bits & ((1u << i->lmc) - 1)));
	if (a->is_global) {
		p->has_grh = true;
		p->grh.ipver = IB_GRH_IPVER;
		p->grh.next_hdr = IB_GRH_NXTHDR_BTH;
		p->grh.tclass = a->grh.traffic_class;
		p->grh.flow_label = a->grh.flow_label & 0xfffff;
		p->grh.hop_limit = a->grh.hop_limit;
		ib_gid_set(&p->grh.sgid, i->gid_prefix, i->port_guid);
		memcpy(p->grh.dgid.raw, a->grh.dgid.raw, sizeof(p->grh.dgid.raw));
	}
}

enum tx_result {
	TX_SENT,
	TX_LOST,
	TX_FULL
};

static enum tx_result tx_packet(struct vsim_port *port, uint32_t src_qpn, const struct ib_packet *p)
{
	/* Built straight into the ring's next slot when there is one (one copy less). */
	uint8_t *slot = port->fab && port->link_up ? simfab_client_tx_slot(port->fab) : NULL;
	int len, ret;

	if (slot) {
		len = ib_packet_build(p, slot, IB_PACKET_MAX_LEN);
		if (len < 0)
			return TX_LOST;
		return simfab_client_send_slot(port->fab, src_qpn, (size_t)len) == 0 ? TX_SENT
										     : TX_LOST;
	}
	len = ib_packet_build(p, port->tx, sizeof(port->tx));
	if (len < 0 || !port->fab || !port->link_up)
		return TX_LOST; /* a down link loses what is sent, as a cable pull does */
	ret = simfab_client_send(port->fab, src_qpn, port->tx, (size_t)len);
	if (ret == -EAGAIN) {
		port->tx_blocked = true;
		return TX_FULL;
	}
	return ret == 0 ? TX_SENT : TX_LOST;
}

static bool rc_tx_req(void *c, uint8_t opcode, uint32_t psn, bool ack_req, const uint8_t *payload,
		      uint32_t len)
{
	struct vsim_qp *qp = c;
	struct ib_packet p;

	if (qp->port->tx_blocked)
		return false;
	memset(&p, 0, sizeof(p));
	fill_route(qp->port, &qp->av, &p);
	p.bth.opcode = opcode;
	p.bth.pkey = qp_pkey(qp);
	p.bth.dqpn = qp->dest_qpn;
	p.bth.ack_req = ack_req;
	p.bth.psn = psn;
	p.payload = payload;
	p.payload_len = len;
	return tx_packet(qp->port, qp->qp.qp_num, &p) != TX_FULL;
}

static bool rc_tx_ack(void *c, uint8_t syndrome, uint32_t msn, uint32_t psn)
{
	struct vsim_qp *qp = c;
	struct ib_packet p;

	if (qp->port->tx_blocked)
		return false;
	memset(&p, 0, sizeof(p));
	fill_route(qp->port, &qp->av, &p);
	p.bth.opcode = IB_OP_RC_ACK;
	p.bth.pkey = qp_pkey(qp);
	p.bth.dqpn = qp->dest_qpn;
	p.bth.psn = psn;
	p.aeth.syndrome = syndrome;
	p.aeth.msn = msn;
	return tx_packet(qp->port, qp->qp.qp_num, &p) != TX_FULL;
}

/* The RC receive in progress: one per QP (the engine reassembles one message). */
struct rc_rbuf {
	uint64_t wr_id;
};

static void *rc_rx_buf(void *c, uint8_t **data, uint32_t *cap)
{
	struct vsim_qp *qp = c;
	struct vsim_rwqe w;
	static struct rc_rbuf marker; /* the engine only hands the handle back */

	if (!vsim_rq_take(qp->srq ? &qp->srq->rq : &qp->rq, &w))
		return NULL; /* RNR NAK */
	if (w.num_sge != 1 || !vsim_mr_find(qp->ctx, qp->qp.pd, w.sge[0].lkey, w.sge[0].addr,
					    w.sge[0].length, IBV_ACCESS_LOCAL_WRITE)) {
		/* The HCA finds the bad SGE when it writes: the receive fails, the QP goes
		 * to ERR (rc_check), the sender sees an RNR NAK and then nothing. */
		wc_add(qp, false, w.wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0);
		qp->rbad = true;
		return NULL;
	}
	qp->rc_rx_wr_id = w.wr_id;
	*data = (uint8_t *)(uintptr_t)w.sge[0].addr;
	*cap = w.sge[0].length;
	return &marker;
}

static void rc_send_done(void *c, uint64_t cookie, enum ibrc_status status)
{
	struct vsim_qp *qp = c;
	struct vsim_swqe *w = &qp->sq[qp->sq_head];

	if (!qp->sq_len || cookie != qp->sq_head) {
		log_error("libibverbs2sim: QP %u: RC send completion out of order", qp->qp.qp_num);
		return;
	}
	if (w->signaled || status != IBRC_WC_OK)
		wc_add(qp, true, w->wr_id, rc_status(status), IBV_WC_SEND, 0);
	swqe_pop(qp);
}

static void rc_recv_done(void *c, void *rbuf, uint32_t len, enum ibrc_status status)
{
	struct vsim_qp *qp = c;
	struct ibv_wc wc = { .wr_id = qp->rc_rx_wr_id,
			     .status = rc_status(status),
			     .opcode = IBV_WC_RECV,
			     .qp_num = qp->qp.qp_num,
			     .pkey_index = qp->pkey_index };

	(void)rbuf;
	if (status == IBRC_WC_OK) {
		wc.byte_len = len;
		wc.src_qp = qp->dest_qpn;
		wc.slid = qp->av.dlid;
		wc.sl = qp->av.sl;
	}
	vsim_cq_add(qp->ctx, (struct vsim_cq *)qp->qp.recv_cq, &wc, qp);
}

static const struct ibrc_ops rc_ops = {
	.tx_req = rc_tx_req,
	.tx_ack = rc_tx_ack,
	.rx_buf = rc_rx_buf,
	.send_done = rc_send_done,
	.recv_done = rc_recv_done,
};

void vsim_rc_service(struct vsim_ctx *ctx, uint64_t now)
{
	for (struct vsim_qp *qp = ctx->qps; qp; qp = qp->next) {
		if (qp->type != IBV_QPT_RC || !qp->rc_init || qp->rc.state != IBRC_RTS)
			continue;
		ibrc_tick(&qp->rc, now);
		ibrc_flush_ack(&qp->rc);
		if (qp->qp.state == IBV_QPS_RTS || qp->qp.state == IBV_QPS_SQD)
			ibrc_push(&qp->rc, now);
		rc_check(qp);
	}
}

uint64_t vsim_rc_deadline(struct vsim_ctx *ctx, bool *work)
{
	uint64_t dl = 0;

	for (struct vsim_qp *qp = ctx->qps; qp; qp = qp->next) {
		uint64_t d;

		if (qp->type != IBV_QPT_RC || !qp->rc_init || qp->rc.state != IBRC_RTS)
			continue;
		d = ibrc_next_deadline(&qp->rc);
		if (d && (!dl || d < dl))
			dl = d;
		if (!qp->port->tx_blocked &&
		    (qp->rc.ack_due || (qp->qp.state == IBV_QPS_RTS && ibrc_can_send(&qp->rc))))
			*work = true;
	}
	return dl;
}

/* --- packets in (progress thread) ---------------------------------------------------------- */

/* Scatter src into the WQE's SGEs (already checked) from offset off. */
static void scatter(const struct vsim_rwqe *w, size_t off, const uint8_t *src, size_t len)
{
	for (int i = 0; i < w->num_sge && len; i++) {
		const struct ibv_sge *s = &w->sge[i];
		size_t n;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		n = s->length - off < len ? s->length - off : len;
		memcpy((uint8_t *)(uintptr_t)(s->addr + off), src, n);
		src += n;
		len -= n;
		off = 0;
	}
}

bool vsim_ud_land(struct vsim_qp *rx_qp, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qp_num,
		  const struct vsim_rwqe *w, const struct ib_packet *p, const uint8_t *wire)
{
	uint64_t cap = 0;
	struct ibv_wc wc = { .wr_id = w->wr_id,
			     .opcode = IBV_WC_RECV,
			     .qp_num = qp_num,
			     .pkey_index = rx_qp->pkey_index };

	for (int i = 0; i < w->num_sge; i++) {
		if (!vsim_mr_find(rx_qp->ctx, pd, w->sge[i].lkey, w->sge[i].addr, w->sge[i].length,
				  IBV_ACCESS_LOCAL_WRITE)) {
			wc.status = IBV_WC_LOC_PROT_ERR;
			goto fail;
		}
		cap += w->sge[i].length;
	}
	if (VSIM_GRH + p->payload_len > cap) {
		wc.status = IBV_WC_LOC_LEN_ERR;
		goto fail;
	}
	if (p->has_grh)
		scatter(w, 0, wire + IB_LRH_LEN, VSIM_GRH);
	scatter(w, VSIM_GRH, p->payload, p->payload_len);
	wc.status = IBV_WC_SUCCESS;
	wc.byte_len = (uint32_t)(VSIM_GRH + p->payload_len);
	wc.src_qp = p->deth.src_qp;
	wc.slid = p->lrh.slid;
	wc.sl = p->lrh.sl;
	wc.wc_flags = p->has_grh ? IBV_WC_GRH : 0;
	wc.dlid_path_bits = (uint8_t)(p->lrh.dlid & ((1u << rx_qp->port->sp.info.lmc) - 1));
	vsim_cq_add(rx_qp->ctx, (struct vsim_cq *)cq, &wc, rx_qp->rss ? NULL : rx_qp);
	return true;
fail:
	vsim_cq_add(rx_qp->ctx, (struct vsim_cq *)cq, &wc, rx_qp->rss ? NULL : rx_qp);
	return false;
}

static void rx_ud(struct vsim_qp *qp, const struct ib_packet *p, const uint8_t *wire)
{
	struct vsim_rwqe w;

	/* A QP receives from RTR on; before, packets are dropped (IBA 10.3.1); an RSS QP
	 * that cannot be modified (mlx5's TIR) from its creation, its WQs deciding. A
	 * source-QPN send QP receives nothing (its datagrams name another QP). */
	if ((!qp->fixed && (qp->qp.state < IBV_QPS_RTR || qp->qp.state == IBV_QPS_ERR)) ||
	    p->bth.opcode != IB_OP_UD_SEND_ONLY || qp->src)
		return;
	if (qp->rss) {
		vsim_rss_rx(qp, p, wire);
		return;
	}
	if (!vsim_rq_take(qp->srq ? &qp->srq->rq : &qp->rq, &w)) {
		vsim_count_rx_drop(); /* no receive WQE: UD drops */
		return;
	}
	/* A receive error puts the QP in ERR (IBA 10.8.3.2), as on mlx5. */
	if (!vsim_ud_land(qp, qp->qp.pd, qp->qp.recv_cq, qp->qp.qp_num, &w, p, wire))
		qp_to_err(qp);
}

void vsim_qp_rx(struct vsim_ctx *ctx, struct vsim_port *port, uint32_t qpn, const uint8_t *wire,
		size_t len, uint64_t now)
{
	struct ib_packet p;
	struct vsim_qp *qp;

	if (qpn == IB_QP1) {
		vsim_gsi_rx(port, wire, len); /* a MAD for a umad agent (vsim_gsi.c) */
		return;
	}
	qp = qp_find(ctx, port, qpn);
	/* The fabric checked the CRCs (at ingress: a corrupt packet never reaches a ring),
	 * P_Key and Q_Key against what the QP told it; the headers are parsed again, the
	 * CRCs not (two passes over the packet, as costly as a copy of it). */
	if (!qp || ib_packet_parse_headers(wire, len, &p) != IB_PKT_OK)
		return;
	if (qp->type == IBV_QPT_UD) {
		rx_ud(qp, &p, wire);
		return;
	}
	if (!qp->rc_init || qp->rc.state != IBRC_RTS || p.lrh.slid != qp->av.dlid ||
	    (p.bth.opcode >> 5) != 0)
		return;
	ibrc_rx(&qp->rc,
		&(struct ibrc_pkt){ .opcode = p.bth.opcode,
				    .psn = p.bth.psn,
				    .ack_req = p.bth.ack_req,
				    .syndrome = p.aeth.syndrome,
				    .msn = p.aeth.msn,
				    .payload = p.payload,
				    .len = (uint32_t)p.payload_len },
		now);
	rc_check(qp);
}

/* --- QPs ------------------------------------------------------------------------------------ */

unsigned vsim_pow2_at_least(unsigned v)
{
	unsigned r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

static void qp_free(struct vsim_qp *qp)
{
	if (qp->rc_init)
		ibrc_fini(&qp->rc);
	if (qp->sq)
		for (uint32_t i = 0; i < qp->sq_len; i++) {
			struct vsim_swqe *w = &qp->sq[(qp->sq_head + i) % qp->sq_cap];

			if (w->copy_alloc)
				free(w->copy);
		}
	vsim_rq_fini(&qp->rq);
	free(qp->sq);
	free(qp->inline_area);
	free(qp->ud_area);
	free(qp);
}

/* The UD QP of this context numbered qpn, on the home port first (the fabric numbers
 * QPs per port), or NULL. */
static struct vsim_qp *ud_qp_numbered(struct vsim_ctx *ctx, uint32_t qpn)
{
	struct vsim_qp *any = NULL;

	for (struct vsim_qp *qp = ctx->qps; qp; qp = qp->next) {
		if (qp->type != IBV_QPT_UD || qp->qp.qp_num != qpn || qp->src)
			continue;
		if (qp->port->num == ctx->home_port)
			return qp;
		any = qp;
	}
	return any;
}

/* What ibv_create_qp_ex adds to a plain QP: an RSS receive QP (rss, hash) or a
 * source-QPN send QP (source). */
struct qp_kind {
	struct vsim_ind *rss;
	const struct ibv_rx_hash_conf *hash;
	bool has_source;
	uint32_t source_qpn;
};

static struct ibv_qp *qp_create(struct ibv_pd *pd, struct ibv_qp_init_attr *ia,
				const struct qp_kind *k)
{
	struct vsim_ctx *ctx = vsim_ctx_of(pd->context);
	struct vsim_qp *qp, *src = NULL;
	struct vsim_port *port;
	struct ibv_qp_cap *cap = &ia->cap;
	bool rss = k->rss != NULL;
	int ret, tries = 0;

	if (ia->qp_type != IBV_QPT_RC && ia->qp_type != IBV_QPT_UD) {
		log_error("libibverbs2sim: QP type %d is not emulated (RC and UD are)",
			  (int)ia->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* An RSS QP has no queues: mlx5 ignores its CQs, SRQ and capabilities. */
	if (!rss &&
	    (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != pd->context ||
	     ia->recv_cq->context != pd->context || (ia->srq && ia->srq->context != pd->context) ||
	     cap->max_send_wr > VSIM_MAX_QP_WR || (!ia->srq && cap->max_recv_wr > VSIM_MAX_QP_WR) ||
	     cap->max_send_sge > VSIM_MAX_SGE || cap->max_recv_sge > VSIM_MAX_SGE ||
	     cap->max_inline_data > VSIM_MAX_INLINE)) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	qp->ctx = ctx;
	qp->type = ia->qp_type;
	ret = 0;
	if (rss) {
		qp->rss = k->rss;
		memcpy(qp->rss_key, k->hash->rx_hash_key, VSIM_RSS_KEY_LEN);
		qp->rss_fields = k->hash->rx_hash_fields_mask;
		qp->fixed = vsim_rss_qp_modify_errno();
	} else {
		qp->sq_sig_all = ia->sq_sig_all != 0;
		/* mlx5 rounds the queues up to powers of two and reports what it made. */
		qp->max_send_wr = cap->max_send_wr ? vsim_pow2_at_least(cap->max_send_wr) : 0;
		qp->max_recv_wr = ia->srq            ? 0
				  : cap->max_recv_wr ? vsim_pow2_at_least(cap->max_recv_wr)
						     : 0;
		qp->max_send_sge = cap->max_send_sge ? cap->max_send_sge : 1;
		qp->max_recv_sge = ia->srq ? 0 : cap->max_recv_sge ? cap->max_recv_sge : 1;
		qp->max_inline = cap->max_inline_data;
		qp->srq = (struct vsim_srq *)ia->srq;
		if (!qp->srq)
			ret = vsim_rq_init(&qp->rq, qp->max_recv_wr, qp->max_recv_sge);
	}
	if (ret == 0 && qp->type == IBV_QPT_RC) {
		qp->sq_cap = qp->max_send_wr ? qp->max_send_wr : 1;
		qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
		if (qp->max_inline)
			qp->inline_area = calloc(qp->sq_cap, qp->max_inline);
		if (!qp->sq || (qp->max_inline && !qp->inline_area))
			ret = -ENOMEM;
		else
			ret = ibrc_init(&qp->rc, &rc_ops, qp, qp->sq_cap);
		qp->rc_init = ret == 0;
	} else if (ret == 0 && !rss) {
		/* UD: sends wait here while the port's ring to the fabric is full, as an
		 * HCA's wait for link credits (their payloads gathered at post time). */
		qp->sq_cap = qp->max_send_wr ? qp->max_send_wr : 1;
		qp->sq = calloc(qp->sq_cap, sizeof(*qp->sq));
		qp->ud_area = calloc(qp->sq_cap, VSIM_UD_MAX);
		if (!qp->sq || !qp->ud_area)
			ret = -ENOMEM;
	}
	if (ret < 0) {
		qp_free(qp);
		errno = -ret;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	port = &ctx->port[ctx->home_port - 1];
	if (k->has_source) {
		/* The QP whose number it sends as: a UD QP (plain or RSS) of this context.
		 * It sends through that QP's port connection (the fabric knows QPs per
		 * port), so it is numbered on that port too. */
		src = ud_qp_numbered(ctx, k->source_qpn);
		if (!src) {
			pthread_mutex_unlock(&ctx->lock);
			log_error(
			    "libibverbs2sim: ibv_create_qp_ex: source QPN 0x%x is no UD QP of "
			    "this context",
			    k->source_qpn);
			qp_free(qp);
			errno = EINVAL;
			return NULL;
		}
		port = src->port;
	}
	vsim_port_claim(ctx, port);
	if (!port->fab) {
		/* A simulation limit: the fabric numbers QPs per port connection, and this
		 * port has none (no LID yet, or the fabric is not there). */
		pthread_mutex_unlock(&ctx->lock);
		log_error("libibverbs2sim: ibv_create_qp: port %u is not on the fabric", port->num);
		qp_free(qp);
		errno = ENETDOWN;
		return NULL;
	}
	do
		ret = simfab_client_qp_create(port->fab,
					      qp->type == IBV_QPT_RC ? SIMFAB_QP_RC : SIMFAB_QP_UD,
					      0, &qp->qp.qp_num);
	while (vsim_ctl_again(port, ret, &tries));
	vsim_wake(ctx);
	if (ret < 0) {
		pthread_mutex_unlock(&ctx->lock);
		log_errno(LOG_ERR, -ret, "libibverbs2sim: QP_CREATE: %s",
			  simfab_client_errmsg(port->fab));
		qp_free(qp);
		errno = -ret;
		return NULL;
	}
	qp->port = port;
	qp->qp.context = pd->context;
	qp->qp.qp_context = ia->qp_context;
	qp->qp.pd = pd;
	if (!rss) {
		qp->qp.send_cq = ia->send_cq;
		qp->qp.recv_cq = ia->recv_cq;
		qp->qp.srq = ia->srq;
	}
	qp->qp.handle = ctx->next_key++;
	qp->qp.state = IBV_QPS_RESET;
	qp->qp.qp_type = ia->qp_type;
	pthread_mutex_init(&qp->qp.mutex, NULL);
	pthread_cond_init(&qp->qp.cond, NULL);
	qp->hnext = ctx->qpt[qp->qp.qp_num % VSIM_QP_BUCKETS];
	ctx->qpt[qp->qp.qp_num % VSIM_QP_BUCKETS] = qp;
	qp->next = ctx->qps;
	if (ctx->qps)
		ctx->qps->prev = qp;
	ctx->qps = qp;
	((struct vsim_pd *)pd)->users++;
	if (!rss) {
		((struct vsim_cq *)ia->send_cq)->users++;
		((struct vsim_cq *)ia->recv_cq)->users++;
	}
	if (qp->srq)
		qp->srq->users++;
	if (qp->rss)
		qp->rss->users++;
	if (src) {
		qp->src = src;
		src->src_users++;
	}
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	cap->max_send_wr = qp->max_send_wr;
	cap->max_recv_wr = qp->max_recv_wr;
	cap->max_send_sge = qp->max_send_sge;
	cap->max_recv_sge = qp->max_recv_sge;
	return &qp->qp;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	return qp_create(pd, ia, &(struct qp_kind){ 0 });
}

/* ibv_create_qp_ex (verbs_context->create_qp_ex; the inline hands a PD-only request to
 * ibv_create_qp itself): a plain QP, an RSS receive QP, or a source-QPN send QP. */
struct ibv_qp *vsim_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia)
{
	const uint32_t rss_mask =
	    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
	const uint32_t src_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	struct qp_kind k = { 0 };

	if (!(ia->comp_mask & IBV_QP_INIT_ATTR_PD) || !ia->pd || ia->pd->context != c) {
		errno = EINVAL; /* the shim's QPs all have a PD (XRC is not emulated) */
		return NULL;
	}
	if (ia->comp_mask == IBV_QP_INIT_ATTR_PD ||
	    (ia->comp_mask == src_mask && ia->create_flags == 0))
		return qp_create(ia->pd, (struct ibv_qp_init_attr *)ia, &k);
	if (ia->comp_mask == rss_mask) {
		const struct ibv_rx_hash_conf *h = &ia->rx_hash_conf;

		if (!vsim_rss_enabled()) {
			errno = EOPNOTSUPP; /* IBVSIM_RSS=0: an HCA without UD RSS */
			return NULL;
		}
		/* UD only (what the shim emulates of mlx5's RSS: enhanced IPoIB's). */
		if (ia->qp_type != IBV_QPT_UD || !ia->rwq_ind_tbl ||
		    ia->rwq_ind_tbl->context != c ||
		    h->rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ ||
		    h->rx_hash_key_len != VSIM_RSS_KEY_LEN || !h->rx_hash_key ||
		    (h->rx_hash_fields_mask & ~(uint64_t)VSIM_RSS_FIELDS)) {
			log_error(
			    "libibverbs2sim: RSS QP: type %d, hash function 0x%x, key of %u "
			    "octets, fields 0x%llx: UD, Toeplitz, 40 octets and IPv4/IPv6/TCP/"
			    "UDP fields are what is emulated",
			    (int)ia->qp_type, h->rx_hash_function, h->rx_hash_key_len,
			    (unsigned long long)h->rx_hash_fields_mask);
			errno = EINVAL;
			return NULL;
		}
		k.rss = (struct vsim_ind *)ia->rwq_ind_tbl;
		k.hash = h;
		return qp_create(ia->pd, (struct ibv_qp_init_attr *)ia, &k);
	}
	if (ia->comp_mask == src_mask && ia->create_flags == IBV_QP_CREATE_SOURCE_QPN) {
		if (!vsim_rss_enabled()) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		if (ia->qp_type != IBV_QPT_UD) {
			errno = EINVAL;
			return NULL;
		}
		k.has_source = true;
		k.source_qpn = ia->source_qpn;
		return qp_create(ia->pd, (struct ibv_qp_init_attr *)ia, &k);
	}
	log_error("libibverbs2sim: ibv_create_qp_ex: comp_mask 0x%x, create_flags 0x%x are not "
		  "emulated",
		  ia->comp_mask, ia->create_flags);
	errno = EOPNOTSUPP;
	return NULL;
}

/* ctx->lock held: unlink and free, telling the fabric. */
static void qp_gone(struct vsim_ctx *ctx, struct vsim_qp *qp)
{
	struct vsim_qp **pp = &ctx->qpt[qp->qp.qp_num % VSIM_QP_BUCKETS];
	int ret, tries = 0;

	/* mlx5 removes a destroyed QP's completions from its CQs. */
	vsim_cq_clean(ctx, qp);
	while (*pp && *pp != qp)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = qp->hnext;
	if (qp->prev)
		qp->prev->next = qp->next;
	else
		ctx->qps = qp->next;
	if (qp->next)
		qp->next->prev = qp->prev;
	if (qp->port->fab) {
		do
			ret = simfab_client_qp_destroy(qp->port->fab, qp->qp.qp_num);
		while (vsim_ctl_again(qp->port, ret, &tries));
		vsim_wake(ctx);
	}
	vsim_event_forget(ctx, &qp->qp, NULL);
	((struct vsim_pd *)qp->qp.pd)->users--;
	if (qp->qp.send_cq)
		((struct vsim_cq *)qp->qp.send_cq)->users--;
	if (qp->qp.recv_cq)
		((struct vsim_cq *)qp->qp.recv_cq)->users--;
	if (qp->srq)
		qp->srq->users--;
	if (qp->rss)
		qp->rss->users--;
	if (qp->src)
		qp->src->src_users--;
	ctx->n_objs--;
	pthread_mutex_destroy(&qp->qp.mutex);
	pthread_cond_destroy(&qp->qp.cond);
	qp_free(qp);
}

int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;

	pthread_mutex_lock(&ctx->lock);
	if (qp->src_users) {
		/* Source-QPN QPs still send as this one (mlx5 keeps the underlay QP). */
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	if (qp->events_got != qp->events_acked) {
		log_error("libibverbs2sim: ibv_destroy_qp %u with %u async events not acked: "
			  "this call never returns on a real HCA",
			  ibqp->qp_num, qp->events_got - qp->events_acked);
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	qp_gone(ctx, qp);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void vsim_qp_destroy_all(struct vsim_ctx *ctx)
{
	/* Source-QPN QPs first: they point at the QP they send as. */
	for (struct vsim_qp *qp = ctx->qps, *next; qp; qp = next) {
		next = qp->next;
		if (qp->src)
			qp_gone(ctx, qp);
	}
	while (ctx->qps)
		qp_gone(ctx, ctx->qps);
	vsim_wq_destroy_all(ctx);
	while (ctx->cqs) {
		struct vsim_cq *cq = ctx->cqs;

		ctx->cqs = cq->next;
		pthread_mutex_destroy(&cq->lock);
		free(cq->ring);
		free(cq);
	}
}

/* --- ibv_modify_qp --------------------------------------------------------------------------- */

#define ST(x) IBV_QPS_##x
#define M(x)  IBV_QP_##x

struct trans {
	bool valid;
	int req_ud, opt_ud, req_rc, opt_rc;
};

/* The IBA's QP state transitions with their required and optional attributes (the
 * Linux kernel's qp_state_table, UD and RC columns). Anything else is EINVAL. */
static const struct trans trans_tbl[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[ST(RESET)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(INIT)] = { .valid = true,
			       .req_ud = M(PKEY_INDEX) | M(PORT) | M(QKEY),
			       .req_rc = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) },
	},
	[ST(INIT)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(INIT)] = { .valid = true,
			       .opt_ud = M(PKEY_INDEX) | M(PORT) | M(QKEY),
			       .opt_rc = M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) },
		[ST(RTR)] = { .valid = true,
			      .req_rc = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) |
					M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER),
			      .opt_ud = M(PKEY_INDEX) | M(QKEY),
			      .opt_rc = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) },
	},
	[ST(RTR)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(RTS)] = { .valid = true,
			      .req_ud = M(SQ_PSN),
			      .req_rc = M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(SQ_PSN) |
					M(MAX_QP_RD_ATOMIC),
			      .opt_ud = M(CUR_STATE) | M(QKEY),
			      .opt_rc = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) |
					M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) },
	},
	[ST(RTS)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(RTS)] = { .valid = true,
			      .opt_ud = M(CUR_STATE) | M(QKEY),
			      .opt_rc = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
					M(PATH_MIG_STATE) | M(MIN_RNR_TIMER) },
		[ST(SQD)] = { .valid = true,
			      .opt_ud = M(EN_SQD_ASYNC_NOTIFY),
			      .opt_rc = M(EN_SQD_ASYNC_NOTIFY) },
	},
	[ST(SQD)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(RTS)] = { .valid = true,
			      .opt_ud = M(CUR_STATE) | M(QKEY),
			      .opt_rc = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) |
					M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) },
		[ST(SQD)] = { .valid = true,
			      .opt_ud = M(PKEY_INDEX) | M(QKEY),
			      .opt_rc = M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
					M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) | M(TIMEOUT) |
					M(RETRY_CNT) | M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC) |
					M(MAX_DEST_RD_ATOMIC) },
	},
	[ST(SQE)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
		[ST(RTS)] = { .valid = true, .opt_ud = M(CUR_STATE) | M(QKEY) },
	},
	[ST(ERR)] = {
		[ST(RESET)] = { .valid = true },
		[ST(ERR)] = { .valid = true },
	},
};

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return (unsigned)s <= IBV_QPS_ERR ? n[s] : "?";
}

/* The attribute values (ranges the IBA gives the fields; mlx5 would truncate some of
 * these silently, the shim refuses them: a value out of range is a bug either way). */
static bool attrs_ok(const struct vsim_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	const struct vsim_ctx *ctx = qp->ctx;

	if ((mask & M(PKEY_INDEX)) && a->pkey_index >= VSIM_PKEY_TBL)
		return false;
	if ((mask & M(PORT)) && (a->port_num < 1 || a->port_num > ctx->n_ports))
		return false;
	if ((mask & M(AV)) &&
	    (a->ah_attr.dlid == 0 || a->ah_attr.sl > 15 ||
	     (a->ah_attr.is_global && a->ah_attr.grh.sgid_index >= VSIM_GID_TBL) ||
	     (a->ah_attr.port_num && a->ah_attr.port_num != qp->port->num)))
		return false;
	if ((mask & M(PATH_MTU)) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return false;
	if ((mask & M(DEST_QPN)) && a->dest_qp_num > IB_QPN_MAX)
		return false;
	if ((mask & M(RQ_PSN)) && a->rq_psn > IB_PSN_MAX)
		return false;
	if ((mask & M(SQ_PSN)) && a->sq_psn > IB_PSN_MAX)
		return false;
	if ((mask & M(TIMEOUT)) && a->timeout > 31)
		return false;
	if ((mask & M(MIN_RNR_TIMER)) && a->min_rnr_timer > 31)
		return false;
	if ((mask & M(RETRY_CNT)) && a->retry_cnt > 7)
		return false;
	if ((mask & M(RNR_RETRY)) && a->rnr_retry > 7)
		return false;
	if ((mask & M(MAX_QP_RD_ATOMIC)) && a->max_rd_atomic > VSIM_MAX_RD_ATOM)
		return false;
	if ((mask & M(MAX_DEST_RD_ATOMIC)) && a->max_dest_rd_atomic > VSIM_MAX_RD_ATOM)
		return false;
	if ((mask & M(ALT_PATH)) || (mask & M(PATH_MIG_STATE)))
		return false; /* no automatic path migration on the simulated fabric */
	return true;
}

/* To RESET: everything posted is forgotten without completions, and (as mlx5 does) the
 * QP's completions still in its CQs are removed. */
static void qp_reset(struct vsim_qp *qp)
{
	struct vsim_rwqe w;

	if (qp->rc_init) {
		ibrc_fini(&qp->rc);
		qp->rc_init = false;
		while (qp->sq_len)
			swqe_pop(qp);
		qp->rc_init = ibrc_init(&qp->rc, &rc_ops, qp, qp->sq_cap) == 0;
	}
	if (qp->type == IBV_QPT_UD)
		while (qp->sq_len)
			swqe_pop(qp);
	if (!qp->srq)
		while (vsim_rq_take(&qp->rq, &w))
			;
	vsim_cq_clean(qp->ctx, qp);
	qp->ud_psn = 0;
	qp->rbad = qp->fatal = qp->last_wqe_told = false;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;
	enum ibv_qp_state cur, next;
	const struct trans *t;
	int req, opt, ret = 0;
	bool rc = qp->type == IBV_QPT_RC;

	if (qp->fixed)
		return qp->fixed; /* mlx5: an RSS QP is never modified (docs/verbs-sim.md) */
	pthread_mutex_lock(&ctx->lock);
	cur = ibqp->state;
	next = mask & M(STATE) ? a->qp_state : cur;
	if ((unsigned)next > IBV_QPS_ERR || ((mask & M(CUR_STATE)) && a->cur_qp_state != cur)) {
		ret = EINVAL;
		goto out;
	}
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT && vsim_fault("IBVSIM_FAULT_MODIFY_QP")) {
		/* On demand: the HCA refuses to bring a QP out of RESET. */
		ret = (int)vsim_fault("IBVSIM_FAULT_MODIFY_QP");
		log_warning("libibverbs2sim: QP %u RESET -> INIT fails on demand "
			    "(IBVSIM_FAULT_MODIFY_QP=%d)",
			    ibqp->qp_num, ret);
		goto out;
	}
	t = &trans_tbl[cur][next];
	req = rc ? t->req_rc : t->req_ud;
	opt = rc ? t->opt_rc : t->opt_ud;
	if (!t->valid || (mask & req) != req || (mask & ~(req | opt | M(STATE))) ||
	    !attrs_ok(qp, a, mask)) {
		log_error("libibverbs2sim: ibv_modify_qp %u %s -> %s: mask 0x%x invalid (required "
			  "0x%x, optional 0x%x)",
			  ibqp->qp_num, state_name(cur), state_name(next), (unsigned)mask,
			  (unsigned)req, (unsigned)opt);
		ret = EINVAL;
		goto out;
	}
	if ((mask & M(PORT)) && a->port_num != qp->port->num) {
		/* A simulation limit: the QPN belongs to the port the context queried last
		 * before ibv_create_qp (the fabric numbers QPs per port). */
		log_error("libibverbs2sim: QP %u was numbered on port %u, not port %u (query the "
			  "port before creating its QPs)",
			  ibqp->qp_num, qp->port->num, a->port_num);
		ret = EINVAL;
		goto out;
	}
	if ((mask & (M(PKEY_INDEX) | M(QKEY))) && qp->port->fab) {
		int tries = 0;
		uint16_t pk = mask & M(PKEY_INDEX) ? a->pkey_index : qp->pkey_index;
		uint32_t qk = !rc && (mask & M(QKEY)) ? a->qkey : qp->qkey;

		/* The fabric checks received packets' P_Key and Q_Key for the QP. */
		do
			ret = simfab_client_qp_modify_pkey(qp->port->fab, ibqp->qp_num, pk, qk);
		while (vsim_ctl_again(qp->port, ret, &tries));
		/* An RSS QP that is never modified has no P_Key index or Q_Key of its own:
		 * it takes those of a send QP sending as it (the last one given), which
		 * the fabric then checks its datagrams against (docs/verbs-sim.md). */
		if (ret == 0 && qp->src && qp->src->fixed) {
			tries = 0;
			do
				ret = simfab_client_qp_modify_pkey(qp->src->port->fab,
								   qp->src->qp.qp_num, pk, qk);
			while (vsim_ctl_again(qp->src->port, ret, &tries));
			if (ret == 0) {
				qp->src->pkey_index = pk;
				qp->src->qkey = qk;
			}
		}
		vsim_wake(ctx);
		if (ret < 0) {
			log_errno(LOG_ERR, -ret,
				  "libibverbs2sim: QP %u: P_Key index %u, Q_Key 0x%x: %s",
				  ibqp->qp_num, pk, qk, simfab_client_errmsg(qp->port->fab));
			ret = ret == -EPERM ? EPERM : EINVAL;
			goto out;
		}
	}
	if (mask & M(PKEY_INDEX))
		qp->pkey_index = a->pkey_index;
	if ((mask & M(QKEY)) && !rc)
		qp->qkey = a->qkey;
	if (mask & M(ACCESS_FLAGS))
		qp->access = a->qp_access_flags;
	if (mask & M(AV))
		qp->av = a->ah_attr;
	if (mask & M(PATH_MTU))
		qp->path_mtu = a->path_mtu;
	if (mask & M(DEST_QPN))
		qp->dest_qpn = a->dest_qp_num;
	if (mask & M(RQ_PSN))
		qp->rq_psn = a->rq_psn;
	if (mask & M(SQ_PSN))
		qp->sq_psn = a->sq_psn;
	if (mask & M(TIMEOUT))
		qp->timeout = a->timeout;
	if (mask & M(RETRY_CNT))
		qp->retry_cnt = a->retry_cnt;
	if (mask & M(RNR_RETRY))
		qp->rnr_retry = a->rnr_retry;
	if (mask & M(MIN_RNR_TIMER))
		qp->min_rnr_timer = a->min_rnr_timer;
	if (mask & M(MAX_QP_RD_ATOMIC))
		qp->max_rd_atomic = a->max_rd_atomic;
	if (mask & M(MAX_DEST_RD_ATOMIC))
		qp->max_dest_rd_atomic = a->max_dest_rd_atomic;

	if (next == IBV_QPS_RESET) {
		qp_reset(qp);
	} else if (next == IBV_QPS_ERR) {
		qp_to_err(qp);
	} else if (rc && cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		unsigned mtu = simfab_mtu_bytes((uint8_t)qp->path_mtu);
		unsigned port_mtu = simfab_mtu_bytes(qp->port->sp.info.mtu);
		struct ibrc_conn c = { .mtu = mtu,
				       .rq_psn = qp->rq_psn,
				       .min_rnr_timer = qp->min_rnr_timer };

		/* A path MTU above the port's active MTU: the HCA sends at most what the
		 * port carries (the fabric would drop bigger packets). */
		if (port_mtu && mtu > port_mtu)
			c.mtu = port_mtu;
		if (ibrc_connect(&qp->rc, &c) < 0) {
			ret = EINVAL;
			goto out;
		}
	} else if (rc && cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		if (ibrc_set_requester(&qp->rc, qp->sq_psn, qp->timeout, qp->retry_cnt,
				       qp->rnr_retry) < 0) {
			ret = EINVAL;
			goto out;
		}
	}
	if (next != IBV_QPS_ERR)
		ibqp->state = next;
	if (next == IBV_QPS_RTS)
		vsim_wake(ctx); /* sends may wait */
out:
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *ia)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;

	(void)mask;
	if (qp->fixed)
		return qp->fixed; /* mlx5_query_qp of an RSS QP, too */
	pthread_mutex_lock(&ctx->lock);
	memset(a, 0, sizeof(*a));
	a->qp_state = a->cur_qp_state = ibqp->state;
	a->pkey_index = qp->pkey_index;
	a->port_num = qp->port->num;
	a->qkey = qp->qkey;
	a->qp_access_flags = qp->access;
	a->ah_attr = qp->av;
	a->path_mtu = qp->path_mtu;
	a->dest_qp_num = qp->dest_qpn;
	a->rq_psn = qp->rq_psn;
	a->sq_psn = qp->sq_psn;
	a->timeout = qp->timeout;
	a->retry_cnt = qp->retry_cnt;
	a->rnr_retry = qp->rnr_retry;
	a->min_rnr_timer = qp->min_rnr_timer;
	a->max_rd_atomic = qp->max_rd_atomic;
	a->max_dest_rd_atomic = qp->max_dest_rd_atomic;
	a->cap.max_send_wr = qp->max_send_wr;
	a->cap.max_recv_wr = qp->max_recv_wr;
	a->cap.max_send_sge = qp->max_send_sge;
	a->cap.max_recv_sge = qp->max_recv_sge;
	a->cap.max_inline_data = qp->max_inline;
	memset(ia, 0, sizeof(*ia));
	ia->qp_context = ibqp->qp_context;
	ia->send_cq = ibqp->send_cq;
	ia->recv_cq = ibqp->recv_cq;
	ia->srq = ibqp->srq;
	ia->cap = a->cap;
	ia->qp_type = qp->type;
	ia->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

#undef ST
#undef M

/* --- the data path ------------------------------------------------------------------------- */

/* Gather a send's SGEs into buf (at most cap octets); false when one lies outside a
 * registered MR of the PD (the lkey check an HCA makes when it reads). */
static bool gather(struct vsim_qp *qp, const struct ibv_send_wr *wr, bool check, uint8_t *buf,
		   size_t cap, uint32_t *len)
{
	size_t n = 0;

	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		if (check && s->length &&
		    !vsim_mr_find(qp->ctx, qp->qp.pd, s->lkey, s->addr, s->length, 0))
			return false;
		if (buf) {
			if (n + s->length > cap)
				return false;
			memcpy(buf + n, (const void *)(uintptr_t)s->addr, s->length);
		}
		n += s->length;
	}
	*len = (uint32_t)n;
	return true;
}

/* A UD send error (IBA 10.3.1: UD goes to SQE on a send error; receives go on). */
static void ud_send_error(struct vsim_qp *qp, uint64_t wr_id, enum ibv_wc_status status)
{
	wc_add(qp, true, wr_id, status, IBV_WC_SEND, 0);
	if (qp->qp.state == IBV_QPS_RTS || qp->qp.state == IBV_QPS_SQD)
		qp->qp.state = IBV_QPS_SQE;
}

/* A UD datagram to the fabric; its PSN is used only when it left. */
static enum tx_result ud_tx(struct vsim_qp *qp, const struct vsim_swqe *w, const uint8_t *payload)
{
	struct ib_packet p;
	enum tx_result r;

	memset(&p, 0, sizeof(p));
	fill_route(qp->port, &w->av, &p);
	p.bth.opcode = IB_OP_UD_SEND_ONLY;
	p.bth.pkey = qp_pkey(qp);
	p.bth.dqpn = w->remote_qpn & IB_QPN_MAX;
	p.bth.psn = qp->ud_psn;
	/* A Q_Key with the high bit set in the WR means the QP's own (IBA 10.2.5). */
	p.deth.qkey = w->remote_qkey & IB_QKEY_PRIVILEGED ? qp->qkey : w->remote_qkey;
	/* A source-QPN QP's datagrams carry the other QP's number, and the fabric takes
	 * them as that QP's (it checks the DETH against the sending QP, as an HCA would
	 * its own). */
	p.deth.src_qp = qp->src ? qp->src->qp.qp_num : qp->qp.qp_num;
	p.payload = payload;
	p.payload_len = w->len;
	r = tx_packet(qp->port, p.deth.src_qp, &p);
	if (r == TX_FULL)
		qp->port->tx_blocked = false; /* UD retries on a timer (vsim_ud_service) */
	else
		qp->ud_psn = (qp->ud_psn + 1) & IB_PSN_MAX;
	return r;
}

/* The waiting UD sends, oldest first, while the port takes them: each completes when it
 * left (lost on a down link, as UD may be) or with the error found when it was posted.
 * Returns true while some still wait (the ring is full). */
static bool ud_drain(struct vsim_qp *qp)
{
	while (qp->sq_len) {
		struct vsim_swqe *w = &qp->sq[qp->sq_head];

		if (w->status != IBV_WC_SUCCESS) {
			ud_send_error(qp, w->wr_id, w->status);
		} else {
			if (ud_tx(qp, w, w->copy) == TX_FULL)
				return true;
			if (w->signaled)
				wc_add(qp, true, w->wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, 0);
		}
		swqe_pop(qp);
		if (qp->qp.state == IBV_QPS_SQE)
			ud_flush(qp); /* behind an error (IBA 10.8.3.3) */
	}
	return false;
}

uint64_t vsim_ud_service(struct vsim_ctx *ctx, uint64_t now)
{
	bool waiting = false;

	for (struct vsim_qp *qp = ctx->qps; qp; qp = qp->next)
		if (qp->type == IBV_QPT_UD && qp->sq_len &&
		    (qp->qp.state == IBV_QPS_RTS || qp->qp.state == IBV_QPS_SQD))
			waiting |= ud_drain(qp);
	return waiting ? now + VSIM_UD_RETRY_NS : 0;
}

/*
 * One UD send. An HCA completes it once it is on the wire, and holds it in the send queue
 * while the link has no credits. Here: sent and completed at once when nothing waits
 * before it and the port's ring to the fabric has room; else it waits in the send queue
 * (its payload gathered now) and leaves in order (ud_drain, from the next post or the
 * progress thread). ENOMEM when the send queue is full: the program sees its queue fill,
 * as on an HCA, instead of a silent loss.
 */
static int send_ud(struct vsim_qp *qp, const struct ibv_send_wr *wr, bool signaled)
{
	struct vsim_swqe w = { .wr_id = wr->wr_id,
			       .signaled = signaled,
			       .av = ((struct vsim_ah *)wr->wr.ud.ah)->attr,
			       .remote_qpn = wr->wr.ud.remote_qpn,
			       .remote_qkey = wr->wr.ud.remote_qkey,
			       .status = IBV_WC_SUCCESS };
	bool inl = wr->send_flags & IBV_SEND_INLINE;
	struct vsim_swqe *q;

	if (qp->sq_len)
		ud_drain(qp); /* room may have come since */
	if (qp->sq_len == qp->sq_cap)
		return ENOMEM;
	if (!gather(qp, wr, !inl, NULL, 0, &w.len))
		w.status = IBV_WC_LOC_PROT_ERR;
	else if (w.len > simfab_mtu_bytes(qp->port->sp.info.mtu))
		w.status = IBV_WC_LOC_LEN_ERR; /* UD: one packet, MTU */
	/* Gathered into the next free slot: sent from there now, or waiting there. */
	q = &qp->sq[(qp->sq_head + qp->sq_len) % qp->sq_cap];
	*q = w;
	q->copy = qp->ud_area + (size_t)(q - qp->sq) * VSIM_UD_MAX;
	if (w.status == IBV_WC_SUCCESS)
		gather(qp, wr, false, q->copy, VSIM_UD_MAX, &q->len);
	if (!qp->sq_len) {
		if (w.status != IBV_WC_SUCCESS) {
			ud_send_error(qp, w.wr_id, w.status);
			return 0;
		}
		if (ud_tx(qp, q, q->copy) != TX_FULL) {
			if (signaled)
				wc_add(qp, true, w.wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, 0);
			return 0;
		}
	}
	if (++qp->sq_len == 1)
		vsim_wake(qp->ctx); /* the progress thread retries on its timer */
	return 0;
}

/* One RC send onto the engine's queue. Returns 0 or an errno for *bad_wr. */
static int send_rc(struct vsim_qp *qp, const struct ibv_send_wr *wr, bool signaled)
{
	struct vsim_swqe *w;
	bool inl = wr->send_flags & IBV_SEND_INLINE;
	uint32_t len, slot;
	const uint8_t *data;

	if (qp->sq_len == qp->sq_cap)
		return ENOMEM;
	if (!gather(qp, wr, !inl, NULL, 0, &len)) {
		/* The HCA finds a bad lkey when it reads the WQE: the send fails and the QP
		 * goes to ERR. (Sends before it that are still unacknowledged are flushed
		 * with it here, where an HCA would finish them first.) */
		wc_add(qp, true, wr->wr_id, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, 0);
		ibrc_fail(&qp->rc, IBRC_WC_FLUSHED);
		qp_to_err(qp);
		return 0;
	}
	slot = (qp->sq_head + qp->sq_len) % qp->sq_cap;
	w = &qp->sq[slot];
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->signaled = signaled;
	w->len = len;
	if (inl) {
		w->copy = qp->inline_area + (size_t)slot * qp->max_inline;
		gather(qp, wr, false, w->copy, qp->max_inline, &len);
	} else if (wr->num_sge > 1) {
		/* A gather list: the shim copies it at post (an HCA reads each piece when
		 * it sends; the program may not touch them before the completion anyway). */
		w->copy = malloc(len ? len : 1);
		if (!w->copy)
			return ENOMEM;
		w->copy_alloc = true;
		gather(qp, wr, false, w->copy, len, &len);
	}
	data = w->copy       ? w->copy
	       : wr->num_sge ? (const uint8_t *)(uintptr_t)wr->sg_list[0].addr
			     : NULL;
	qp->sq_len++;
	if (ibrc_post(&qp->rc, data, len, slot) < 0) {
		qp->sq_len--;
		if (w->copy_alloc)
			free(w->copy);
		return EINVAL;
	}
	return 0;
}

int vsim_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;
	int ret = 0;
	bool rc = qp->type == IBV_QPT_RC;
	struct simfab_client *fab;

	pthread_mutex_lock(&ctx->lock);
	/* One KICK for the list at most (the doorbell), rung before the lock is let go. */
	fab = qp->port ? qp->port->fab : NULL;
	if (fab)
		simfab_client_cork(fab);
	if (qp->rss && wr) {
		/* An RSS QP has no send queue (mlx5: EINVAL). */
		ret = EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		bool signaled = qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
		enum ibv_qp_state s = ibqp->state;

		/* Sends need RTS (or SQD, which holds them); RESET, INIT, RTR refuse. */
		if (s == IBV_QPS_RESET || s == IBV_QPS_INIT || s == IBV_QPS_RTR ||
		    wr->num_sge < 0 || (unsigned)wr->num_sge > qp->max_send_sge) {
			ret = EINVAL;
			break;
		}
		if (wr->opcode != IBV_WR_SEND ||
		    (!rc && (!wr->wr.ud.ah || wr->wr.ud.ah->context != ibqp->context))) {
			/* Only SEND is emulated (no RDMA, atomics, immediate data). */
			log_error("libibverbs2sim: QP %u: work request opcode %d %s", ibqp->qp_num,
				  (int)wr->opcode,
				  wr->opcode != IBV_WR_SEND ? "is not emulated" : "without an AH");
			ret = EINVAL;
			break;
		}
		if (wr->send_flags & IBV_SEND_INLINE) {
			uint32_t len;

			gather(qp, wr, false, NULL, 0, &len);
			if (len > qp->max_inline) {
				ret = ENOMEM; /* mlx5: inline data beyond max_inline_data */
				break;
			}
		}
		if (s == IBV_QPS_ERR || s == IBV_QPS_SQE) {
			/* Flushed at once; flush errors complete whether signaled or not. */
			if (rc && qp->sq_len == qp->sq_cap) {
				ret = ENOMEM;
				break;
			}
			wc_add(qp, true, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_SEND, 0);
			continue;
		}
		if (!rc) {
			ret = send_ud(qp, wr, signaled);
			if (ret)
				break;
			continue;
		}
		ret = send_rc(qp, wr, signaled);
		if (ret)
			break;
	}
	if (rc && qp->rc_init && ibqp->state == IBV_QPS_RTS) {
		uint64_t due;

		ibrc_push(&qp->rc, vsim_now_ns());
		due = ibrc_next_deadline(&qp->rc);
		if (due && ctx->sleep_until && due < ctx->sleep_until) {
			ctx->sleep_until = 0;
			vsim_wake(ctx); /* its sleep would outlast the retransmit timer */
		}
	}
	if (rc)
		rc_check(qp);
out:
	if (ret)
		*bad = wr;
	if (fab)
		simfab_client_uncork(fab);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

int vsim_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;
	int ret = 0;

	pthread_mutex_lock(&ctx->lock);
	if (ibqp->state == IBV_QPS_RESET || qp->srq || qp->rss) {
		/* Receives are posted from INIT on; a QP on an SRQ receives through it, an
		 * RSS QP through its WQs (mlx5: EINVAL). */
		*bad = wr;
		ret = EINVAL;
	} else if (qp->type == IBV_QPT_RC && wr && wr->num_sge != 1) {
		log_error("libibverbs2sim: QP %u: RC receives with %d SGEs are not emulated "
			  "(one)",
			  ibqp->qp_num, wr->num_sge);
		*bad = wr;
		ret = EINVAL;
	} else {
		ret = vsim_rq_post(&qp->rq, wr, bad);
	}
	if (ibqp->state == IBV_QPS_ERR) {
		struct vsim_rwqe w;

		while (vsim_rq_take(&qp->rq, &w))
			wc_add(qp, false, w.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0);
	}
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

/* --- SRQ ------------------------------------------------------------------------------------- */

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *ia)
{
	struct vsim_ctx *ctx = vsim_ctx_of(pd->context);
	struct vsim_srq *srq;
	unsigned cap;

	if (ia->attr.max_wr < 1 || ia->attr.max_wr > VSIM_MAX_SRQ_WR ||
	    ia->attr.max_sge > VSIM_MAX_SGE + 1) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	cap = vsim_pow2_at_least(ia->attr.max_wr + 1) - 1; /* mlx5: 2^n - 1 */
	if (!srq || vsim_rq_init(&srq->rq, cap, ia->attr.max_sge) < 0) {
		if (srq)
			vsim_rq_fini(&srq->rq);
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	srq->srq.context = pd->context;
	srq->srq.srq_context = ia->srq_context;
	srq->srq.pd = pd;
	pthread_mutex_init(&srq->srq.mutex, NULL);
	pthread_cond_init(&srq->srq.cond, NULL);
	ia->attr.max_wr = cap;
	ia->attr.max_sge = srq->rq.max_sge;
	pthread_mutex_lock(&ctx->lock);
	srq->srq.handle = ctx->next_key++;
	((struct vsim_pd *)pd)->users++;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &srq->srq;
}

int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibsrq->context);
	struct vsim_srq *srq = (struct vsim_srq *)ibsrq;

	pthread_mutex_lock(&ctx->lock);
	if (srq->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY; /* QPs still use it */
	}
	((struct vsim_pd *)ibsrq->pd)->users--;
	ctx->n_objs--;
	pthread_mutex_unlock(&ctx->lock);
	/* Its WQEs go with it, without completions (as on hardware). */
	vsim_rq_fini(&srq->rq);
	pthread_mutex_destroy(&srq->srq.mutex);
	pthread_cond_destroy(&srq->srq.cond);
	free(srq);
	return 0;
}

int vsim_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibsrq->context);
	struct vsim_srq *srq = (struct vsim_srq *)ibsrq;
	int ret;

	pthread_mutex_lock(&ctx->lock);
	ret = vsim_rq_post(&srq->rq, wr, bad);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

/* --- AHs, multicast -------------------------------------------------------------------------- */

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct vsim_ctx *ctx = vsim_ctx_of(pd->context);
	struct vsim_ah *ah;

	if (attr->dlid == 0 || attr->sl > 15 || attr->port_num < 1 ||
	    attr->port_num > ctx->n_ports ||
	    (attr->is_global && attr->grh.sgid_index >= VSIM_GID_TBL)) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	pthread_mutex_lock(&ctx->lock);
	ah->ah.handle = ctx->next_key++;
	((struct vsim_pd *)pd)->users++;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &ah->ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ah->context);

	pthread_mutex_lock(&ctx->lock);
	((struct vsim_pd *)ah->pd)->users--;
	ctx->n_objs--;
	pthread_mutex_unlock(&ctx->lock);
	free(ah);
	return 0;
}

static int mcast(struct ibv_qp *ibqp, const union ibv_gid *gid, uint16_t lid, bool attach)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibqp->context);
	struct vsim_qp *qp = (struct vsim_qp *)ibqp;
	union ib_gid mgid;
	int ret, tries = 0;

	/* UD only; a multicast GID and LID (the kernel checks both). */
	if (qp->type != IBV_QPT_UD || gid->raw[0] != 0xff || lid < IB_LID_MC_FIRST || lid == 0xffff)
		return EINVAL;
	memcpy(mgid.raw, gid->raw, sizeof(mgid.raw));
	pthread_mutex_lock(&ctx->lock);
	if (!qp->port->fab) {
		pthread_mutex_unlock(&ctx->lock);
		return ENETDOWN;
	}
	if (attach && qp->mcast >= VSIM_MCAST_QP_ATTACH) {
		pthread_mutex_unlock(&ctx->lock);
		return ENOMEM;
	}
	do
		ret = attach ? simfab_client_mcast_attach(qp->port->fab, ibqp->qp_num, &mgid, lid)
			     : simfab_client_mcast_detach(qp->port->fab, ibqp->qp_num, &mgid, lid);
	while (vsim_ctl_again(qp->port, ret, &tries));
	vsim_wake(ctx);
	if (ret == 0)
		qp->mcast += attach ? 1 : -1u;
	pthread_mutex_unlock(&ctx->lock);
	return ret < 0 ? -ret : 0;
}

int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, lid, true);
}

int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	return mcast(qp, gid, lid, false);
}
