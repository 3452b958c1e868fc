/*
 * The software RC transport of the simulated HCA: what an HCA does for a
 * reliable-connected QP, without sockets, clocks or wire encoding, so unit tests can
 * drive it with synthetic packets (prefix ibrc_). Its user: the verbs shim
 * (sim/verbs/vsim_*.c, libibverbs2sim.so).
 *
 * Requester: a ring of send WQEs (one per posted message, sized by the QP's send depth;
 * nothing is allocated after ibrc_init). Each message takes consecutive PSNs, one per
 * path-MTU segment (SEND FIRST/MIDDLE/LAST, or ONLY). Packets are not kept: a
 * retransmission rebuilds them from the WQE's buffer, which stays with the QP until
 * the message is acknowledged. At most `window` PSNs are outstanding. ACKs are
 * cumulative (an ACK for PSN p acknowledges every PSN up to p); a WQE completes when
 * its last PSN is acknowledged. Go-back-N: a NAK (PSN sequence error) for PSN p, an
 * RNR NAK for p once its timer ran out, or the retransmit timer resends everything
 * from p (from the oldest unacknowledged PSN on a timeout).
 *
 *   retransmit timer   4.096 us * 2^timeout (timeout 0: none), restarted whenever an
 *                      ACK makes progress, stopped when nothing is outstanding
 *   retry_count        timeouts and sequence-error NAKs without progress in between;
 *                      one more -> IBRC_WC_RETRY_EXCEEDED
 *   rnr_retry          RNR NAKs without progress (7 = retry forever); one more ->
 *                      IBRC_WC_RNR_EXCEEDED. The wait is the RNR NAK's timer field.
 * Both counters are reloaded whenever an ACK (or NAK) acknowledges something new.
 * On a fatal error the QP goes to ERROR: the failing WQE completes with the error,
 * the others with IBRC_WC_FLUSHED, and later posts flush at once.
 *
 * Responder: the expected PSN (ePSN) and the MSN. The packet with the ePSN is taken:
 * FIRST/ONLY take a receive buffer (ops->rx_buf; none -> RNR NAK with min_rnr_timer,
 * nothing consumed), the payload is copied in at the message's offset, LAST/ONLY
 * complete the receive. A PSN before the ePSN is a duplicate: not delivered again,
 * re-ACKed. A PSN after it is a gap: one NAK (PSN sequence error, PSN = ePSN) per
 * gap, later packets dropped silently until the ePSN arrives. ACKs are coalesced:
 * ibrc_rx only notes that one is due (message end, AckReq bit, duplicate); the caller
 * sends at most one per QP per receive batch with ibrc_flush_ack.
 *
 * Time is what the caller passes (now_ns, monotonic); timers fire in ibrc_tick, so
 * their granularity is how often the owner calls it (see docs/ib-port.md).
 * PSN arithmetic is modulo 2^24 (ibrc_psn_diff).
 *
 * Threads: an ibrc_qp belongs to whoever holds its port's data-path lock.
 */
#ifndef IBGW_PORT_IB_RC_H
#define IBGW_PORT_IB_RC_H

#include <stdbool.h>
#include <stdint.h>

/* How a WQE ends; each user maps it to its own status (ibv_wc_status, ibp_wc_status). */
enum ibrc_status {
	IBRC_WC_OK = 0,
	IBRC_WC_FLUSHED,
	IBRC_WC_RETRY_EXCEEDED,
	IBRC_WC_RNR_EXCEEDED,
	IBRC_WC_REMOTE_ERROR, /* NAK remote access/operational error, invalid request */
	IBRC_WC_LOCAL_ERROR   /* responder: the message does not fit the receive buffer */
};

#define IBRC_WINDOW_DEFAULT 128 /* outstanding PSNs of a requester */
#define IBRC_ACKREQ_EVERY   16  /* AckReq at least every this many packets of a message */
#define IBRC_MSG_MAX        (1u << 31)

/* AETH syndrome (IBA 9.3.4.1): bits 6-5 the kind, bits 4-0 credits/timer/NAK code. */
#define IBRC_AETH_ACK        0x00
#define IBRC_AETH_RNR        0x20
#define IBRC_AETH_NAK        0x60
#define IBRC_AETH_KIND_MASK  0x60
#define IBRC_AETH_VALUE_MASK 0x1f
#define IBRC_CREDITS_INVALID 0x1f /* "no credit information": we do not count credits */
enum ibrc_nak_code {
	IBRC_NAK_PSN_SEQ = 0,
	IBRC_NAK_INVALID_REQ = 1,
	IBRC_NAK_REMOTE_ACCESS = 2,
	IBRC_NAK_REMOTE_OP = 3,
};

/* What the engine asks of its port. Return false from tx_* when the packet cannot be
 * handed on now (socket full): the engine keeps it and tries again later. */
struct ibrc_ops {
	bool (*tx_req)(void *ctx, uint8_t opcode, uint32_t psn, bool ack_req,
		       const uint8_t *payload, uint32_t len);
	bool (*tx_ack)(void *ctx, uint8_t syndrome, uint32_t msn, uint32_t psn);
	/* A receive buffer for a new message (its handle; data/cap filled), or NULL. */
	void *(*rx_buf)(void *ctx, uint8_t **data, uint32_t *cap);
	void (*send_done)(void *ctx, uint64_t cookie, enum ibrc_status status);
	void (*recv_done)(void *ctx, void *rbuf, uint32_t len, enum ibrc_status status);
};

/* A packet as the engine sees it (the caller parsed the wire form). */
struct ibrc_pkt {
	uint8_t opcode; /* IB_OP_RC_SEND_* or IB_OP_RC_ACK */
	uint32_t psn;
	bool ack_req;
	uint8_t syndrome; /* ACK */
	uint32_t msn;     /* ACK */
	const uint8_t *payload;
	uint32_t len;
};

struct ibrc_stats {
	uint64_t tx_pkts, retrans_pkts, timeouts, seq_naks_rcvd, rnr_naks_rcvd;
	uint64_t rx_pkts, dup_pkts, gap_pkts, seq_naks_sent, rnr_naks_sent, acks_sent;
	uint64_t msgs_sent, msgs_rcvd;
};

struct ibrc_wqe {
	const uint8_t *data;
	uint32_t len;
	uint32_t first_psn, npkts;
	uint64_t cookie;
};

enum ibrc_state {
	IBRC_RESET,
	IBRC_RTS, /* connected: sends and receives */
	IBRC_ERROR
};

struct ibrc_qp {
	const struct ibrc_ops *ops;
	void *ctx;
	enum ibrc_state state;
	/* parameters */
	uint32_t mtu; /* path MTU in octets */
	uint64_t timeout_ns;
	uint8_t retry_count, rnr_retry, min_rnr_timer;
	uint32_t window;
	/* requester */
	struct ibrc_wqe *sq;
	uint32_t sq_cap, sq_head, sq_len;
	uint32_t cur, cur_pkt; /* next packet to send: WQE (offset from head), segment */
	uint32_t psn_alloc;    /* first PSN of the next posted message */
	uint32_t psn_next;     /* PSN of the next packet to send */
	uint32_t psn_una;      /* oldest unacknowledged PSN */
	uint32_t psn_max;      /* one past the highest PSN ever sent */
	uint8_t retries_left, rnr_left;
	uint64_t deadline_ns;  /* retransmit timer, 0: stopped */
	uint64_t rnr_until_ns; /* waiting after an RNR NAK, 0: not */
	/* responder */
	uint32_t epsn, msn;
	bool in_msg, nak_sent, ack_due;
	void *rbuf;
	uint8_t *rdata;
	uint32_t rcap, roff;
	struct ibrc_stats stats;
};

/* Signed distance a - b of two 24-bit PSNs, in -2^23 .. 2^23-1. */
static inline int32_t ibrc_psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t ibrc_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & 0xffffff;
}

/* 4.096 us * 2^timeout in ns; 0 for timeout 0 (no timer). timeout is 5 bits. */
uint64_t ibrc_timeout_ns(uint8_t timeout);
/* The RNR NAK timer field (IBA table 45) in ns: 0 -> 655.36 ms, 1 -> 0.01 ms ...
 * 31 -> 491.52 ms. */
uint64_t ibrc_rnr_ns(uint8_t code);
/* Packets a message of len octets takes at mtu (at least 1). */
uint32_t ibrc_npkts(uint32_t len, uint32_t mtu);
/* The opcode of segment i of n. */
uint8_t ibrc_opcode(uint32_t i, uint32_t n);

/* Set up (sq_depth WQEs, allocated here: control path). Returns 0 or -ENOMEM/-EINVAL. */
int ibrc_init(struct ibrc_qp *qp, const struct ibrc_ops *ops, void *ctx, uint32_t sq_depth);
void ibrc_fini(struct ibrc_qp *qp);

/* Connect: RESET -> RTS with the CM's parameters. */
struct ibrc_conn {
	uint32_t mtu; /* octets */
	uint32_t sq_psn, rq_psn;
	uint8_t timeout, retry_count, rnr_retry, min_rnr_timer;
	uint32_t window; /* 0: IBRC_WINDOW_DEFAULT */
};
int ibrc_connect(struct ibrc_qp *qp, const struct ibrc_conn *c);
/* The requester's half alone, for verbs' RTR -> RTS after ibrc_connect at RTR: the send
 * PSN, timeout, retry counts. The responder's state is kept. 0 or -EINVAL. */
int ibrc_set_requester(struct ibrc_qp *qp, uint32_t sq_psn, uint8_t timeout, uint8_t retry_count,
		       uint8_t rnr_retry);

/* Queue a message (data stays the caller's until send_done). -ENOMEM: send queue full;
 * -EMSGSIZE: longer than IBRC_MSG_MAX. In ERROR it completes at once as FLUSHED (0).
 * Nothing is sent until ibrc_push. */
int ibrc_post(struct ibrc_qp *qp, const uint8_t *data, uint32_t len, uint64_t cookie);

/* Send what the window and the timers allow. */
void ibrc_push(struct ibrc_qp *qp, uint64_t now_ns);
/* Handle one received packet (requests and ACKs). */
void ibrc_rx(struct ibrc_qp *qp, const struct ibrc_pkt *pkt, uint64_t now_ns);
/* Send the coalesced ACK if one is due. */
void ibrc_flush_ack(struct ibrc_qp *qp);
/* Run the timers (retransmit, RNR wait). */
void ibrc_tick(struct ibrc_qp *qp, uint64_t now_ns);
/* Earliest time ibrc_tick has work, 0 if none. */
uint64_t ibrc_next_deadline(const struct ibrc_qp *qp);
/* True when ibrc_push would send something now (window open, work queued). */
bool ibrc_can_send(const struct ibrc_qp *qp);
/* Move to ERROR: the head WQE completes with status (if not IBRC_WC_FLUSHED), the rest
 * and the message being received are flushed. */
void ibrc_fail(struct ibrc_qp *qp, enum ibrc_status status);

#endif
