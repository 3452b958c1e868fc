/*
 * The RC transport engine (see ib_rc.h for the protocol it runs): requester
 * segmentation, cumulative ACKs, go-back-N retransmission with the retry and RNR
 * counters; responder PSN checks, reassembly, coalesced ACKs and NAKs.
 */
#include "sim/verbs/ib_rc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_hdr.h"

uint64_t ibrc_timeout_ns(uint8_t timeout)
{
	timeout &= 0x1f;
	return timeout ? (uint64_t)4096 << timeout : 0;
}

/* IBA vol 1 table 45, in units of 10 us. */
static const uint32_t rnr_10us[32] = {
	65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,    32,
	48,    64,   96,   128,  192,  256,   384,   512,   768,   1024,  1536,
	2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

uint64_t ibrc_rnr_ns(uint8_t code)
{
	return (uint64_t)rnr_10us[code & 0x1f] * 10000;
}

uint32_t ibrc_npkts(uint32_t len, uint32_t mtu)
{
	return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

uint8_t ibrc_opcode(uint32_t i, uint32_t n)
{
	if (n == 1)
		return IB_OP_RC_SEND_ONLY;
	if (i == 0)
		return IB_OP_RC_SEND_FIRST;
	return i + 1 == n ? IB_OP_RC_SEND_LAST : IB_OP_RC_SEND_MIDDLE;
}

int ibrc_init(struct ibrc_qp *qp, const struct ibrc_ops *ops, void *ctx, uint32_t sq_depth)
{
	if (sq_depth == 0)
		return -EINVAL;
	memset(qp, 0, sizeof(*qp));
	qp->sq = calloc(sq_depth, sizeof(*qp->sq));
	if (!qp->sq)
		return -ENOMEM;
	qp->sq_cap = sq_depth;
	qp->ops = ops;
	qp->ctx = ctx;
	qp->state = IBRC_RESET;
	return 0;
}

void ibrc_fini(struct ibrc_qp *qp)
{
	free(qp->sq);
	qp->sq = NULL;
}

int ibrc_connect(struct ibrc_qp *qp, const struct ibrc_conn *c)
{
	if (qp->state != IBRC_RESET || c->mtu < 256 || c->mtu > 4096 || (c->mtu & (c->mtu - 1)) ||
	    c->retry_count > 7 || c->rnr_retry > 7 || c->min_rnr_timer > 31 || c->timeout > 31)
		return -EINVAL;
	qp->mtu = c->mtu;
	qp->timeout_ns = ibrc_timeout_ns(c->timeout);
	qp->retry_count = c->retry_count;
	qp->rnr_retry = c->rnr_retry;
	qp->min_rnr_timer = c->min_rnr_timer;
	qp->window = c->window ? c->window : IBRC_WINDOW_DEFAULT;
	if (qp->window > (1u << 22))
		return -EINVAL;
	qp->psn_alloc = qp->psn_next = qp->psn_una = qp->psn_max = c->sq_psn & IB_PSN_MAX;
	qp->epsn = c->rq_psn & IB_PSN_MAX;
	qp->retries_left = qp->retry_count;
	qp->rnr_left = qp->rnr_retry;
	qp->state = IBRC_RTS;
	return 0;
}

int ibrc_set_requester(struct ibrc_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry_count,
		       uint8_t rnr_retry)
{
	if (qp->state != IBRC_RTS || qp->sq_len || retry_count > 7 || rnr_retry > 7 || timeout > 31)
		return -EINVAL;
	qp->timeout_ns = ibrc_timeout_ns(timeout);
	qp->retry_count = retry_count;
	qp->rnr_retry = rnr_retry;
	qp->psn_alloc = qp->psn_next = qp->psn_una = qp->psn_max = sq_psn & IB_PSN_MAX;
	qp->retries_left = qp->retry_count;
	qp->rnr_left = qp->rnr_retry;
	return 0;
}

static struct ibrc_wqe *wqe_at(struct ibrc_qp *qp, uint32_t i)
{
	return &qp->sq[(qp->sq_head + i) % qp->sq_cap];
}

int ibrc_post(struct ibrc_qp *qp, const uint8_t *data, uint32_t len, uint64_t cookie)
{
	struct ibrc_wqe *w;

	if (len > IBRC_MSG_MAX)
		return -EMSGSIZE;
	if (qp->state == IBRC_ERROR) {
		qp->ops->send_done(qp->ctx, cookie, IBRC_WC_FLUSHED);
		return 0;
	}
	if (qp->state != IBRC_RTS)
		return -EINVAL;
	if (qp->sq_len == qp->sq_cap)
		return -ENOMEM;
	w = wqe_at(qp, qp->sq_len++);
	w->data = data;
	w->len = len;
	w->cookie = cookie;
	w->npkts = ibrc_npkts(len, qp->mtu);
	w->first_psn = qp->psn_alloc;
	qp->psn_alloc = ibrc_psn_add(qp->psn_alloc, w->npkts);
	return 0;
}

/* Point the send position at psn (which lies in a queued WQE, or is psn_alloc). */
static void seek(struct ibrc_qp *qp, uint32_t psn)
{
	uint32_t i;

	for (i = 0; i < qp->sq_len; i++) {
		struct ibrc_wqe *w = wqe_at(qp, i);
		int32_t d = ibrc_psn_diff(psn, w->first_psn);

		if (d >= 0 && (uint32_t)d < w->npkts) {
			qp->cur = i;
			qp->cur_pkt = (uint32_t)d;
			qp->psn_next = psn;
			return;
		}
	}
	qp->cur = qp->sq_len;
	qp->cur_pkt = 0;
	qp->psn_next = qp->psn_alloc;
}

bool ibrc_can_send(const struct ibrc_qp *qp)
{
	return qp->state == IBRC_RTS && !qp->rnr_until_ns && qp->cur < qp->sq_len &&
	       (uint32_t)ibrc_psn_diff(qp->psn_next, qp->psn_una) < qp->window;
}

void ibrc_push(struct ibrc_qp *qp, uint64_t now_ns)
{
	while (ibrc_can_send(qp)) {
		struct ibrc_wqe *w = wqe_at(qp, qp->cur);
		uint32_t off = qp->cur_pkt * qp->mtu;
		uint32_t len = w->len - off < qp->mtu ? w->len - off : qp->mtu;
		bool last = qp->cur_pkt + 1 == w->npkts;
		uint32_t outstanding = (uint32_t)ibrc_psn_diff(qp->psn_next, qp->psn_una) + 1;
		bool ack_req = last || outstanding >= qp->window ||
			       qp->cur_pkt % IBRC_ACKREQ_EVERY == IBRC_ACKREQ_EVERY - 1;

		if (!qp->ops->tx_req(qp->ctx, ibrc_opcode(qp->cur_pkt, w->npkts), qp->psn_next,
				     ack_req, w->data + off, len))
			break;
		qp->stats.tx_pkts++;
		if (ibrc_psn_diff(qp->psn_next, qp->psn_max) < 0)
			qp->stats.retrans_pkts++;
		else
			qp->psn_max = ibrc_psn_add(qp->psn_next, 1);
		qp->psn_next = ibrc_psn_add(qp->psn_next, 1);
		if (last) {
			qp->cur++;
			qp->cur_pkt = 0;
		} else {
			qp->cur_pkt++;
		}
		if (!qp->deadline_ns && qp->timeout_ns)
			qp->deadline_ns = now_ns + qp->timeout_ns;
	}
}

/* Everything up to and including psn is acknowledged: complete the WQEs it covers.
 * Returns true when that was progress. */
static bool ack_through(struct ibrc_qp *qp, uint32_t psn, uint64_t now_ns)
{
	uint32_t una = ibrc_psn_add(psn, 1);

	if (ibrc_psn_diff(una, qp->psn_una) <= 0)
		return false;
	qp->psn_una = una;
	while (qp->sq_len) {
		struct ibrc_wqe *w = wqe_at(qp, 0);
		uint32_t last = ibrc_psn_add(w->first_psn, w->npkts - 1);

		if (ibrc_psn_diff(last, psn) > 0)
			break;
		qp->ops->send_done(qp->ctx, w->cookie, IBRC_WC_OK);
		qp->stats.msgs_sent++;
		qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
		qp->sq_len--;
		if (qp->cur)
			qp->cur--;
		else
			qp->cur_pkt = 0; /* cannot happen: a WQE is acked only once sent */
	}
	if (ibrc_psn_diff(qp->psn_next, qp->psn_una) < 0)
		seek(qp, qp->psn_una);
	qp->retries_left = qp->retry_count;
	qp->rnr_left = qp->rnr_retry;
	qp->deadline_ns =
	    qp->psn_una != qp->psn_max && qp->timeout_ns ? now_ns + qp->timeout_ns : 0;
	return true;
}

void ibrc_fail(struct ibrc_qp *qp, enum ibrc_status status)
{
	if (qp->state == IBRC_ERROR)
		return;
	qp->state = IBRC_ERROR;
	for (uint32_t i = 0; i < qp->sq_len; i++)
		qp->ops->send_done(qp->ctx, wqe_at(qp, i)->cookie,
				   i == 0 ? status : IBRC_WC_FLUSHED);
	qp->sq_len = 0;
	qp->cur = qp->cur_pkt = 0;
	qp->deadline_ns = qp->rnr_until_ns = 0;
	qp->ack_due = false;
	if (qp->rbuf) {
		qp->ops->recv_done(qp->ctx, qp->rbuf, 0, IBRC_WC_FLUSHED);
		qp->rbuf = NULL;
		qp->in_msg = false;
	}
}

static bool ack_psn_valid(const struct ibrc_qp *qp, uint32_t psn)
{
	/* An ACK may name psn_una - 1 .. psn_max - 1. */
	return ibrc_psn_diff(psn, ibrc_psn_add(qp->psn_una, IB_PSN_MAX)) >= 0 &&
	       ibrc_psn_diff(psn, qp->psn_max) < 0;
}

static void rx_ack(struct ibrc_qp *qp, const struct ibrc_pkt *p, uint64_t now_ns)
{
	uint8_t kind = p->syndrome & IBRC_AETH_KIND_MASK;
	uint8_t value = p->syndrome & IBRC_AETH_VALUE_MASK;

	if (!ack_psn_valid(qp, p->psn))
		return; /* an old ACK, or one for PSNs never sent: ignored */
	if (kind == IBRC_AETH_ACK) {
		ack_through(qp, p->psn, now_ns);
		return;
	}
	/* NAKs name the PSN that was not taken: everything before it was. */
	if (ibrc_psn_diff(p->psn, qp->psn_una) < 0)
		return; /* a NAK for a PSN acknowledged since */
	ack_through(qp, ibrc_psn_add(p->psn, IB_PSN_MAX), now_ns);
	if (kind == IBRC_AETH_RNR) {
		qp->stats.rnr_naks_rcvd++;
		if (qp->rnr_retry != 7) {
			if (qp->rnr_left == 0) {
				ibrc_fail(qp, IBRC_WC_RNR_EXCEEDED);
				return;
			}
			qp->rnr_left--;
		}
		seek(qp, p->psn);
		qp->deadline_ns = 0;
		qp->rnr_until_ns = now_ns + ibrc_rnr_ns(value);
		if (!qp->rnr_until_ns)
			qp->rnr_until_ns = 1;
		return;
	}
	if (kind != IBRC_AETH_NAK)
		return; /* reserved kind */
	if (value != IBRC_NAK_PSN_SEQ) {
		ibrc_fail(qp, IBRC_WC_REMOTE_ERROR);
		return;
	}
	qp->stats.seq_naks_rcvd++;
	if (qp->retries_left == 0) {
		ibrc_fail(qp, IBRC_WC_RETRY_EXCEEDED);
		return;
	}
	qp->retries_left--;
	seek(qp, p->psn);
	if (qp->timeout_ns)
		qp->deadline_ns = now_ns + qp->timeout_ns;
}

static void send_nak(struct ibrc_qp *qp, uint8_t syndrome)
{
	/* A lost NAK is recovered by the requester's timer: no need to retry it. */
	qp->ops->tx_ack(qp->ctx, syndrome, qp->msn, qp->epsn);
}

/* A malformed request: NAK invalid request, and the responder side fails. */
static void rx_invalid(struct ibrc_qp *qp)
{
	send_nak(qp, IBRC_AETH_NAK | IBRC_NAK_INVALID_REQ);
	if (qp->rbuf) {
		qp->ops->recv_done(qp->ctx, qp->rbuf, qp->roff, IBRC_WC_LOCAL_ERROR);
		qp->rbuf = NULL;
		qp->in_msg = false;
	}
	ibrc_fail(qp, IBRC_WC_FLUSHED);
}

static void rx_req(struct ibrc_qp *qp, const struct ibrc_pkt *p)
{
	int32_t d = ibrc_psn_diff(p->psn, qp->epsn);
	bool first = p->opcode == IB_OP_RC_SEND_FIRST || p->opcode == IB_OP_RC_SEND_ONLY;
	bool last = p->opcode == IB_OP_RC_SEND_LAST || p->opcode == IB_OP_RC_SEND_ONLY;

	qp->stats.rx_pkts++;
	if (d < 0) {
		qp->stats.dup_pkts++;
		qp->ack_due = true; /* re-ACK; the payload was delivered already */
		return;
	}
	if (d > 0) {
		qp->stats.gap_pkts++;
		if (!qp->nak_sent) {
			qp->nak_sent = true;
			qp->stats.seq_naks_sent++;
			send_nak(qp, IBRC_AETH_NAK | IBRC_NAK_PSN_SEQ);
		}
		return;
	}
	if (first == qp->in_msg || (!last && p->len != qp->mtu) || p->len > qp->mtu) {
		rx_invalid(qp); /* opcode out of sequence, or a short middle segment */
		return;
	}
	if (first) {
		qp->rbuf = qp->ops->rx_buf(qp->ctx, &qp->rdata, &qp->rcap);
		if (!qp->rbuf) {
			qp->nak_sent = true; /* later packets of the burst: silently dropped */
			qp->stats.rnr_naks_sent++;
			send_nak(qp, IBRC_AETH_RNR | qp->min_rnr_timer);
			return;
		}
		qp->roff = 0;
		qp->in_msg = true;
	}
	if (p->len > qp->rcap - qp->roff) {
		rx_invalid(qp); /* longer than the receive buffer */
		return;
	}
	qp->nak_sent = false;
	memcpy(qp->rdata + qp->roff, p->payload, p->len);
	qp->roff += p->len;
	qp->epsn = ibrc_psn_add(qp->epsn, 1);
	if (last) {
		qp->msn = (qp->msn + 1) & 0xffffff;
		qp->ops->recv_done(qp->ctx, qp->rbuf, qp->roff, IBRC_WC_OK);
		qp->stats.msgs_rcvd++;
		qp->rbuf = NULL;
		qp->in_msg = false;
		qp->ack_due = true;
	}
	if (p->ack_req)
		qp->ack_due = true;
}

void ibrc_rx(struct ibrc_qp *qp, const struct ibrc_pkt *p, uint64_t now_ns)
{
	if (qp->state != IBRC_RTS)
		return; /* RESET drops; ERROR drops (the peer's timer ends it) */
	switch (p->opcode) {
	case IB_OP_RC_ACK:
		rx_ack(qp, p, now_ns);
		break;
	case IB_OP_RC_SEND_FIRST:
	case IB_OP_RC_SEND_MIDDLE:
	case IB_OP_RC_SEND_LAST:
	case IB_OP_RC_SEND_ONLY:
		rx_req(qp, p);
		break;
	default:
		/* RDMA, atomics, immediate data: not emulated. */
		send_nak(qp, IBRC_AETH_NAK | IBRC_NAK_INVALID_REQ);
		break;
	}
}

void ibrc_flush_ack(struct ibrc_qp *qp)
{
	if (!qp->ack_due || qp->state != IBRC_RTS)
		return;
	if (qp->ops->tx_ack(qp->ctx, IBRC_AETH_ACK | IBRC_CREDITS_INVALID, qp->msn,
			    ibrc_psn_add(qp->epsn, IB_PSN_MAX))) {
		qp->ack_due = false;
		qp->stats.acks_sent++;
	}
}

void ibrc_tick(struct ibrc_qp *qp, uint64_t now_ns)
{
	if (qp->state != IBRC_RTS)
		return;
	if (qp->rnr_until_ns && now_ns >= qp->rnr_until_ns) {
		qp->rnr_until_ns = 0; /* resend from the RNR NAK's PSN (seek done) */
		if (qp->timeout_ns && qp->psn_una != qp->psn_max)
			qp->deadline_ns = now_ns + qp->timeout_ns;
	}
	if (qp->deadline_ns && now_ns >= qp->deadline_ns) {
		if (qp->psn_una == qp->psn_max) {
			qp->deadline_ns = 0;
			return;
		}
		qp->stats.timeouts++;
		if (qp->retries_left == 0) {
			ibrc_fail(qp, IBRC_WC_RETRY_EXCEEDED);
			return;
		}
		qp->retries_left--;
		seek(qp, qp->psn_una);
		qp->deadline_ns = now_ns + qp->timeout_ns;
	}
}

uint64_t ibrc_next_deadline(const struct ibrc_qp *qp)
{
	if (qp->state != IBRC_RTS)
		return 0;
	if (qp->rnr_until_ns)
		return qp->rnr_until_ns;
	return qp->deadline_ns;
}
