/*
 * Unit tests of the verbs shim's RC engine (sim/verbs/ib_rc.c), driven with synthetic
 * packets: PSN arithmetic with the 24-bit wrap, timer values, segmentation by MTU,
 * ACK coalescing, NAK decisions (gap, duplicate, RNR), go-back-N retransmission,
 * RNR waits, retry exhaustion (error + flush), the send window, and a lossy link
 * that must still deliver every message once and in order. Two engines talk through
 * a wire queue the test controls; time is a variable the test advances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sim/verbs/ib_rc.h"
#include "lib/ib_hdr.h"

#define WIRE_MAX 8192
#define PAYMAX   4096
#define NRBUF    64
#define RBUF_LEN 70000
#define NDONE    4096
#define MS       1000000ull

struct wpkt {
	int to;
	struct ibrc_pkt p;
	uint8_t data[PAYMAX];
};

struct side {
	struct ibrc_qp qp;
	int id;
	bool blocked; /* tx_* refuse (socket full) */
	/* what it sent */
	unsigned n_tx, n_ack_tx;
	/* receive buffers: a stack of free indexes */
	uint8_t *rbuf[NRBUF];
	unsigned rfree[NRBUF], n_rfree;
	/* completions */
	uint64_t s_cookie[NDONE];
	enum ibrc_status s_status[NDONE];
	unsigned n_sdone;
	uint32_t r_len[NDONE];
	int r_idx[NDONE];
	enum ibrc_status r_status[NDONE];
	unsigned n_rdone;
};

static struct wpkt *wire;
static unsigned w_head, w_len;
static struct side S[2];
static uint64_t now;

static void wire_put(int to, const struct ibrc_pkt *p)
{
	struct wpkt *w;

	assert_true(w_len < WIRE_MAX);
	w = &wire[(w_head + w_len++) % WIRE_MAX];
	w->to = to;
	w->p = *p;
	assert_true(p->len <= PAYMAX);
	if (p->len)
		memcpy(w->data, p->payload, p->len);
	w->p.payload = w->data;
}

static bool tx_req(void *ctx, uint8_t opcode, uint32_t psn, bool ack_req, const uint8_t *payload,
		   uint32_t len)
{
	struct side *s = ctx;
	struct ibrc_pkt p = {
		.opcode = opcode, .psn = psn, .ack_req = ack_req, .payload = payload, .len = len
	};

	if (s->blocked)
		return false;
	s->n_tx++;
	wire_put(1 - s->id, &p);
	return true;
}

static bool tx_ack(void *ctx, uint8_t syndrome, uint32_t msn, uint32_t psn)
{
	struct side *s = ctx;
	struct ibrc_pkt p = {
		.opcode = IB_OP_RC_ACK, .psn = psn, .syndrome = syndrome, .msn = msn
	};

	if (s->blocked)
		return false;
	s->n_ack_tx++;
	wire_put(1 - s->id, &p);
	return true;
}

static void *rx_buf(void *ctx, uint8_t **data, uint32_t *cap)
{
	struct side *s = ctx;
	unsigned i;

	if (!s->n_rfree)
		return NULL;
	i = s->rfree[--s->n_rfree];
	*data = s->rbuf[i];
	*cap = RBUF_LEN;
	return (void *)(uintptr_t)(i + 1);
}

static void send_done(void *ctx, uint64_t cookie, enum ibrc_status st)
{
	struct side *s = ctx;

	assert_true(s->n_sdone < NDONE);
	s->s_cookie[s->n_sdone] = cookie;
	s->s_status[s->n_sdone++] = st;
}

static void recv_done(void *ctx, void *rbuf, uint32_t len, enum ibrc_status st)
{
	struct side *s = ctx;

	assert_true(s->n_rdone < NDONE);
	s->r_idx[s->n_rdone] = (int)((uintptr_t)rbuf - 1);
	s->r_len[s->n_rdone] = len;
	s->r_status[s->n_rdone++] = st;
}

static const struct ibrc_ops ops = { tx_req, tx_ack, rx_buf, send_done, recv_done };

/* Give receive buffer i back (the test "reposts" it). */
static void repost(struct side *s, int i)
{
	s->rfree[s->n_rfree++] = (unsigned)i;
}

static struct ibrc_conn conn(uint32_t mtu, uint32_t sq_psn, uint32_t rq_psn)
{
	return (struct ibrc_conn){ .mtu = mtu,
				   .sq_psn = sq_psn,
				   .rq_psn = rq_psn,
				   .timeout = 14,
				   .retry_count = 7,
				   .rnr_retry = 7,
				   .min_rnr_timer = 12 };
}

/* Two connected engines: A (0) sends from psn_a, B (1) from psn_b. */
static void pair(const struct ibrc_conn *ca, const struct ibrc_conn *cb, unsigned bufs_b)
{
	w_head = w_len = 0;
	now = 1000 * MS;
	for (int i = 0; i < 2; i++) {
		struct side *s = &S[i];

		ibrc_fini(&s->qp);
		for (int j = 0; j < NRBUF; j++)
			if (!s->rbuf[j])
				s->rbuf[j] = malloc(RBUF_LEN);
		memset(s->s_cookie, 0, sizeof(*s) - offsetof(struct side, s_cookie));
		s->id = i;
		s->blocked = false;
		s->n_tx = s->n_ack_tx = 0;
		s->n_rfree = 0;
		for (unsigned j = 0; j < (i ? bufs_b : NRBUF); j++)
			repost(s, (int)j);
		assert_int_equal(ibrc_init(&s->qp, &ops, s, 256), 0);
		assert_int_equal(ibrc_connect(&s->qp, i ? cb : ca), 0);
	}
}

/* Deliver every packet on the wire; drop_ppm of them (deterministic PRNG) are lost.
 * After each batch of 16, both sides flush ACKs and push. */
static uint32_t rng = 12345;
static bool lose(uint32_t ppm)
{
	rng = rng * 1103515245u + 12345u;
	return ppm && (rng >> 8) % 1000000u < ppm;
}

static unsigned run_wire(uint32_t drop_ppm)
{
	unsigned n = 0;

	while (w_len) {
		for (unsigned k = 0; k < 16 && w_len; k++) {
			struct wpkt *w = &wire[w_head];

			w_head = (w_head + 1) % WIRE_MAX;
			w_len--;
			if (!lose(drop_ppm))
				ibrc_rx(&S[w->to].qp, &w->p, now);
			n++;
		}
		for (int i = 0; i < 2; i++) {
			ibrc_flush_ack(&S[i].qp);
			ibrc_push(&S[i].qp, now);
		}
	}
	return n;
}

static void fill_msg(uint8_t *p, uint32_t len, uint32_t seq)
{
	for (uint32_t j = 0; j < len; j++)
		p[j] = (uint8_t)(seq * 13 + j * 7 + (j >> 9));
}

static bool msg_ok(const uint8_t *p, uint32_t len, uint32_t seq)
{
	for (uint32_t j = 0; j < len; j++)
		if (p[j] != (uint8_t)(seq * 13 + j * 7 + (j >> 9)))
			return false;
	return true;
}

/* --- tests -------------------------------------------------------------------------- */

static void psn_arithmetic(void **state)
{
	(void)state;
	assert_int_equal(ibrc_psn_diff(0, 0xffffff), 1);
	assert_int_equal(ibrc_psn_diff(0xffffff, 0), -1);
	assert_int_equal(ibrc_psn_diff(5, 5), 0);
	assert_int_equal(ibrc_psn_diff(0x10, 0xfffff0), 0x20);
	assert_int_equal(ibrc_psn_diff(0x7fffff, 0), 0x7fffff);
	assert_int_equal(ibrc_psn_diff(0x800000, 0), -0x800000);
	assert_int_equal(ibrc_psn_add(0xffffff, 1), 0);
	assert_int_equal(ibrc_psn_add(0xfffffe, 5), 3);
}

static void timer_values(void **state)
{
	(void)state;
	assert_true(ibrc_timeout_ns(0) == 0); /* no timer */
	assert_true(ibrc_timeout_ns(1) == 8192);
	assert_true(ibrc_timeout_ns(14) == 67108864ull); /* 67.1 ms */
	assert_true(ibrc_timeout_ns(31) == 4096ull << 31);
	assert_true(ibrc_rnr_ns(0) == 655360000ull);  /* 655.36 ms */
	assert_true(ibrc_rnr_ns(1) == 10000ull);      /* 0.01 ms */
	assert_true(ibrc_rnr_ns(12) == 640000ull);    /* 0.64 ms */
	assert_true(ibrc_rnr_ns(31) == 491520000ull); /* 491.52 ms */
	assert_int_equal(ibrc_npkts(0, 2048), 1);
	assert_int_equal(ibrc_npkts(2048, 2048), 1);
	assert_int_equal(ibrc_npkts(2049, 2048), 2);
	assert_int_equal(ibrc_npkts(65520, 2048), 32);
	assert_int_equal(ibrc_npkts(65520, 256), 256);
}

static void segmentation(void **state)
{
	static uint8_t msg[65520];
	struct ibrc_conn c = conn(2048, 0xfffff0, 0);
	uint32_t psn = 0xfffff0;
	(void)state;

	pair(&c, &c, 0);
	assert_int_equal(ibrc_post(&S[0].qp, msg, 0, 1), 0);
	assert_int_equal(ibrc_post(&S[0].qp, msg, 2048, 2), 0);
	assert_int_equal(ibrc_post(&S[0].qp, msg, 2049, 3), 0);
	assert_int_equal(ibrc_post(&S[0].qp, msg, 65520, 4), 0);
	ibrc_push(&S[0].qp, now);
	assert_int_equal(w_len, 1 + 1 + 2 + 32);
	for (unsigned i = 0; i < w_len; i++) {
		struct wpkt *w = &wire[i];
		static const uint32_t want_len[4] = { 0, 2048, 2048, 1 };
		static const uint8_t want_op[4] = { IB_OP_RC_SEND_ONLY, IB_OP_RC_SEND_ONLY,
						    IB_OP_RC_SEND_FIRST, IB_OP_RC_SEND_LAST };

		assert_int_equal(w->p.psn, psn); /* consecutive, through the wrap */
		psn = ibrc_psn_add(psn, 1);
		if (i < 4) {
			assert_int_equal(w->p.opcode, want_op[i]);
			assert_int_equal(w->p.len, want_len[i]);
			assert_true(w->p.ack_req == (i != 2));
		} else {
			unsigned k = i - 4; /* segment of the 65520-octet message */

			assert_int_equal(w->p.opcode, k == 0    ? IB_OP_RC_SEND_FIRST
						      : k == 31 ? IB_OP_RC_SEND_LAST
								: IB_OP_RC_SEND_MIDDLE);
			assert_int_equal(w->p.len, k == 31 ? 65520 - 31 * 2048 : 2048);
			/* AckReq on the last segment and every 16th */
			assert_true(w->p.ack_req == (k == 31 || k % 16 == 15));
		}
	}
	assert_int_equal(psn, 0x14);
}

static void delivery_and_coalesced_acks(void **state)
{
	static uint8_t msg[8][65520];
	struct ibrc_conn c = conn(1024, 100, 200), d = conn(1024, 200, 100);
	uint32_t sizes[8] = { 65520, 0, 1, 1023, 1024, 1025, 40000, 3 };
	(void)state;

	pair(&c, &d, NRBUF);
	for (int i = 0; i < 8; i++) {
		fill_msg(msg[i], sizes[i], (uint32_t)i);
		assert_int_equal(ibrc_post(&S[0].qp, msg[i], sizes[i], (uint64_t)i), 0);
	}
	ibrc_push(&S[0].qp, now);
	run_wire(0);
	assert_int_equal(S[1].n_rdone, 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(S[1].r_status[i], IBRC_WC_OK);
		assert_int_equal(S[1].r_len[i], sizes[i]);
		assert_true(msg_ok(S[1].rbuf[S[1].r_idx[i]], sizes[i], (uint32_t)i));
	}
	assert_int_equal(S[0].n_sdone, 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(S[0].s_cookie[i], i);
		assert_int_equal(S[0].s_status[i], IBRC_WC_OK);
	}
	/* 64 + 1 + 1 + 1 + 1 + 2 + 40 + 1 = 111 packets; ACKs at most one per batch of
	 * 16 (coalesced), at least one (the last message end). */
	assert_int_equal(S[0].n_tx, 111);
	assert_true(S[1].n_ack_tx >= 1 && S[1].n_ack_tx <= 8);
	assert_int_equal(S[0].qp.stats.retrans_pkts, 0);
	assert_int_equal(S[1].qp.msn, 8);
}

static void gap_nak_and_duplicate(void **state)
{
	static uint8_t m[4096];
	struct ibrc_conn c = conn(1024, 10, 50), d = conn(1024, 50, 10);
	struct ibrc_pkt p;
	struct wpkt first;
	(void)state;

	pair(&c, &d, NRBUF);
	assert_int_equal(ibrc_post(&S[0].qp, m, 4096, 1), 0); /* PSN 10..13 */
	ibrc_push(&S[0].qp, now);
	assert_int_equal(w_len, 4);
	first = wire[0];
	/* Lose PSN 10: B sees 11, 12, 13 -> exactly one NAK (PSN sequence error, PSN 10). */
	w_head = 1;
	w_len = 3;
	for (int k = 0; k < 3; k++) {
		struct wpkt *w = &wire[w_head++];

		w_len--;
		ibrc_rx(&S[1].qp, &w->p, now);
	}
	assert_int_equal(w_len, 1);
	p = wire[w_head].p;
	assert_int_equal(p.opcode, IB_OP_RC_ACK);
	assert_int_equal(p.syndrome, IBRC_AETH_NAK | IBRC_NAK_PSN_SEQ);
	assert_int_equal(p.psn, 10);
	assert_int_equal(S[1].qp.stats.seq_naks_sent, 1);
	assert_int_equal(S[1].qp.stats.gap_pkts, 3);
	assert_int_equal(S[1].n_rdone, 0);
	/* A gets the NAK: go back to PSN 10 and resend 10..13. */
	w_head = w_len = 0;
	ibrc_rx(&S[0].qp, &p, now);
	assert_int_equal(S[0].qp.psn_next, 10);
	ibrc_push(&S[0].qp, now);
	assert_int_equal(w_len, 4);
	assert_int_equal(wire[0].p.psn, 10);
	assert_int_equal(S[0].qp.stats.retrans_pkts, 4);
	run_wire(0);
	assert_int_equal(S[1].n_rdone, 1);
	assert_int_equal(S[0].n_sdone, 1);
	/* The old PSN 10 again (a duplicate): not delivered, but re-ACKed. */
	w_head = w_len = 0;
	ibrc_rx(&S[1].qp, &first.p, now);
	assert_true(S[1].qp.ack_due);
	ibrc_flush_ack(&S[1].qp);
	assert_int_equal(w_len, 1);
	assert_int_equal(wire[0].p.syndrome & IBRC_AETH_KIND_MASK, IBRC_AETH_ACK);
	assert_int_equal(wire[0].p.psn, 13);
	assert_int_equal(S[1].n_rdone, 1);
	assert_int_equal(S[1].qp.stats.dup_pkts, 1);
	/* And that ACK, old news to A, changes nothing. */
	ibrc_rx(&S[0].qp, &wire[0].p, now);
	assert_int_equal(S[0].n_sdone, 1);
}

static void ack_validation(void **state)
{
	static uint8_t m[2048];
	struct ibrc_conn c = conn(1024, 0, 0);
	struct ibrc_pkt ack = { .opcode = IB_OP_RC_ACK, .syndrome = IBRC_AETH_ACK };
	(void)state;

	pair(&c, &c, NRBUF);
	ibrc_post(&S[0].qp, m, 2048, 7); /* PSN 0, 1 */
	ibrc_push(&S[0].qp, now);
	ack.psn = 5; /* never sent */
	ibrc_rx(&S[0].qp, &ack, now);
	assert_int_equal(S[0].n_sdone, 0);
	ack.psn = 0xfffff0; /* long before */
	ibrc_rx(&S[0].qp, &ack, now);
	assert_int_equal(S[0].n_sdone, 0);
	ack.psn = 0; /* half the message: no completion yet */
	ibrc_rx(&S[0].qp, &ack, now);
	assert_int_equal(S[0].n_sdone, 0);
	assert_int_equal(S[0].qp.psn_una, 1);
	ack.psn = 1;
	ibrc_rx(&S[0].qp, &ack, now);
	assert_int_equal(S[0].n_sdone, 1);
	assert_int_equal(S[0].s_cookie[0], 7);
	assert_true(S[0].qp.deadline_ns == 0); /* nothing outstanding: timer stopped */
}

static void timeout_goes_back_then_retry_exceeded(void **state)
{
	static uint8_t m[3000];
	struct ibrc_conn c = conn(1024, 0x500, 0);
	uint64_t t = ibrc_timeout_ns(14);
	(void)state;

	c.retry_count = 3;
	pair(&c, &c, NRBUF);
	ibrc_post(&S[0].qp, m, 3000, 1); /* PSN 0x500..0x502 */
	ibrc_post(&S[0].qp, m, 10, 2);   /* 0x503 */
	ibrc_post(&S[0].qp, m, 10, 3);   /* 0x504 */
	ibrc_push(&S[0].qp, now);
	assert_int_equal(S[0].n_tx, 5);
	assert_true(S[0].qp.deadline_ns == now + t);
	/* The peer is gone: nothing comes back. Before the deadline: nothing. */
	ibrc_tick(&S[0].qp, now + t - 1);
	ibrc_push(&S[0].qp, now + t - 1);
	assert_int_equal(S[0].n_tx, 5);
	for (int r = 1; r <= 3; r++) {
		now += t;
		ibrc_tick(&S[0].qp, now);
		ibrc_push(&S[0].qp, now);
		assert_int_equal(S[0].n_tx, 5 + 5 * r); /* go-back-N: all 5 again */
		assert_int_equal(wire[(w_head + w_len - 5) % WIRE_MAX].p.psn, 0x500);
		assert_int_equal(S[0].n_sdone, 0);
	}
	now += t;
	ibrc_tick(&S[0].qp, now); /* the 4th timeout: retry_count 3 is spent */
	assert_int_equal(S[0].qp.state, IBRC_ERROR);
	assert_int_equal(S[0].n_sdone, 3);
	assert_int_equal(S[0].s_status[0], IBRC_WC_RETRY_EXCEEDED);
	assert_int_equal(S[0].s_status[1], IBRC_WC_FLUSHED);
	assert_int_equal(S[0].s_status[2], IBRC_WC_FLUSHED);
	assert_int_equal(S[0].qp.stats.timeouts, 4);
	/* Later posts flush at once; the QP sends nothing more. */
	assert_int_equal(ibrc_post(&S[0].qp, m, 10, 4), 0);
	assert_int_equal(S[0].n_sdone, 4);
	assert_int_equal(S[0].s_status[3], IBRC_WC_FLUSHED);
	ibrc_push(&S[0].qp, now);
	assert_int_equal(S[0].n_tx, 20);
	assert_true(ibrc_next_deadline(&S[0].qp) == 0);
}

static void progress_reloads_retries(void **state)
{
	static uint8_t m[10];
	struct ibrc_conn c = conn(1024, 0, 0);
	uint64_t t = ibrc_timeout_ns(14);
	struct ibrc_pkt ack = { .opcode = IB_OP_RC_ACK, .syndrome = IBRC_AETH_ACK };
	(void)state;

	c.retry_count = 1;
	pair(&c, &c, NRBUF);
	ibrc_post(&S[0].qp, m, 10, 1);
	ibrc_post(&S[0].qp, m, 10, 2);
	ibrc_push(&S[0].qp, now);
	now += t;
	ibrc_tick(&S[0].qp, now); /* one retry used */
	assert_int_equal(S[0].qp.retries_left, 0);
	ack.psn = 0;
	ibrc_rx(&S[0].qp, &ack, now); /* progress */
	assert_int_equal(S[0].qp.retries_left, 1);
	now += t;
	ibrc_tick(&S[0].qp, now);
	assert_int_equal(S[0].qp.state, IBRC_RTS);
	now += t;
	ibrc_tick(&S[0].qp, now);
	assert_int_equal(S[0].qp.state, IBRC_ERROR);
	assert_int_equal(S[0].s_status[0], IBRC_WC_OK);
	assert_int_equal(S[0].s_status[1], IBRC_WC_RETRY_EXCEEDED);
}

static void rnr_wait_and_exhaustion(void **state)
{
	static uint8_t m[100];
	struct ibrc_conn c = conn(1024, 0, 0);
	struct ibrc_pkt nak;
	uint64_t wait = ibrc_rnr_ns(12);
	(void)state;

	c.rnr_retry = 2;
	pair(&c, &c, 0); /* B has no receive buffers */
	ibrc_post(&S[0].qp, m, 100, 1);
	ibrc_push(&S[0].qp, now);
	for (int r = 0; r <= 2; r++) {
		/* B: RNR NAK with its min RNR timer, PSN of the refused packet */
		ibrc_rx(&S[1].qp, &wire[w_head].p, now);
		w_head = (w_head + 1) % WIRE_MAX;
		w_len--;
		assert_int_equal(w_len, 1);
		nak = wire[w_head].p;
		w_head = (w_head + 1) % WIRE_MAX;
		w_len--;
		assert_int_equal(nak.syndrome, IBRC_AETH_RNR | 12);
		assert_int_equal(nak.psn, 0);
		ibrc_rx(&S[0].qp, &nak, now);
		if (r == 2)
			break;
		/* A waits the RNR time before resending. */
		assert_true(ibrc_next_deadline(&S[0].qp) == now + wait);
		ibrc_tick(&S[0].qp, now + wait - 1);
		ibrc_push(&S[0].qp, now + wait - 1);
		assert_int_equal(w_len, 0);
		now += wait;
		ibrc_tick(&S[0].qp, now);
		ibrc_push(&S[0].qp, now);
		assert_int_equal(w_len, 1);
		assert_int_equal(wire[w_head].p.psn, 0);
	}
	assert_int_equal(S[0].qp.state, IBRC_ERROR);
	assert_int_equal(S[0].s_status[0], IBRC_WC_RNR_EXCEEDED);
	assert_int_equal(S[0].qp.stats.rnr_naks_rcvd, 3);
	assert_int_equal(S[1].qp.stats.rnr_naks_sent, 3);

	/* rnr_retry 7: forever; a buffer posted meanwhile lets it through. */
	c.rnr_retry = 7;
	pair(&c, &c, 0);
	ibrc_post(&S[0].qp, m, 100, 1);
	ibrc_push(&S[0].qp, now);
	for (int r = 0; r < 20; r++) {
		run_wire(0);
		now += wait;
		ibrc_tick(&S[0].qp, now);
		ibrc_push(&S[0].qp, now);
	}
	assert_int_equal(S[0].qp.state, IBRC_RTS);
	repost(&S[1], 0);
	run_wire(0);
	assert_int_equal(S[1].n_rdone, 1);
	assert_int_equal(S[0].n_sdone, 1);
	assert_int_equal(S[0].s_status[0], IBRC_WC_OK);
}

static void window_bounds_outstanding(void **state)
{
	static uint8_t m[2048];
	struct ibrc_conn c = conn(256, 0, 0);
	(void)state;

	c.window = 6;
	pair(&c, &c, NRBUF);
	ibrc_post(&S[0].qp, m, 2048, 1); /* 8 packets */
	ibrc_post(&S[0].qp, m, 2048, 2);
	ibrc_push(&S[0].qp, now);
	assert_int_equal(S[0].n_tx, 6);
	assert_false(ibrc_can_send(&S[0].qp));
	assert_int_equal(wire[5].p.opcode, IB_OP_RC_SEND_MIDDLE);
	assert_true(wire[5].p.ack_req); /* the packet that fills the window asks for an ACK */
	assert_false(wire[4].p.ack_req);
	run_wire(0);
	assert_int_equal(S[0].n_sdone, 2);
	assert_int_equal(S[0].n_tx, 16);
}

static void backpressure_keeps_packets(void **state)
{
	static uint8_t m[4096];
	struct ibrc_conn c = conn(1024, 0, 0);
	(void)state;

	pair(&c, &c, NRBUF);
	ibrc_post(&S[0].qp, m, 4096, 1);
	S[0].blocked = true;
	ibrc_push(&S[0].qp, now);
	assert_int_equal(w_len, 0);
	assert_int_equal(S[0].qp.psn_next, 0);
	S[0].blocked = false;
	ibrc_push(&S[0].qp, now);
	assert_int_equal(w_len, 4);
	assert_int_equal(S[0].qp.stats.retrans_pkts, 0);
}

static void invalid_requests(void **state)
{
	struct ibrc_conn c = conn(1024, 0, 0);
	uint8_t pay[1024] = { 0 };
	struct ibrc_pkt p = {
		.opcode = IB_OP_RC_SEND_MIDDLE, .psn = 0, .payload = pay, .len = 1024
	};
	(void)state;

	pair(&c, &c, NRBUF);
	/* A MIDDLE with no FIRST: NAK invalid request, the QP fails. */
	ibrc_rx(&S[1].qp, &p, now);
	assert_int_equal(w_len, 1);
	assert_int_equal(wire[0].p.syndrome, IBRC_AETH_NAK | IBRC_NAK_INVALID_REQ);
	assert_int_equal(S[1].qp.state, IBRC_ERROR);
	/* The requester fails with a remote error. */
	S[0].qp.psn_max = 1; /* as if PSN 0 had been sent */
	ibrc_post(&S[0].qp, pay, 10, 9);
	ibrc_rx(&S[0].qp, &wire[0].p, now);
	assert_int_equal(S[0].qp.state, IBRC_ERROR);
	assert_int_equal(S[0].s_status[0], IBRC_WC_REMOTE_ERROR);
}

static void lossy_link_delivers_once_in_order(void **state)
{
	enum {
		NMSG = 300
	};
	static uint8_t ma[NMSG][9000], mb[NMSG][9000];
	struct ibrc_conn c = conn(2048, 0xffff00, 0x000100), d = conn(2048, 0x000100, 0xffff00);
	unsigned posted_a = 0, posted_b = 0, rounds = 0, checked[2] = { 0, 0 };
	(void)state;

	c.window = d.window = 32;
	pair(&c, &d, NRBUF); /* both sides have NRBUF receive buffers */
	while ((S[0].n_sdone < NMSG || S[1].n_sdone < NMSG) && rounds++ < 100000) {
		while (posted_a < NMSG && posted_a - S[0].n_sdone < 200) {
			uint32_t len = (posted_a * 7919u) % 9000u;

			fill_msg(ma[posted_a], len, posted_a);
			assert_int_equal(ibrc_post(&S[0].qp, ma[posted_a], len, posted_a), 0);
			posted_a++;
		}
		while (posted_b < NMSG && posted_b - S[1].n_sdone < 200) {
			uint32_t len = (posted_b * 104729u) % 9000u;

			fill_msg(mb[posted_b], len, posted_b + 1000);
			assert_int_equal(ibrc_post(&S[1].qp, mb[posted_b], len, posted_b), 0);
			posted_b++;
		}
		ibrc_push(&S[0].qp, now);
		ibrc_push(&S[1].qp, now);
		run_wire(50000); /* 5 % loss, both ways, ACKs and NAKs included */
		now += 10 * MS;
		ibrc_tick(&S[0].qp, now);
		ibrc_tick(&S[1].qp, now);
		/* receive buffers back once checked */
		for (int s = 0; s < 2; s++) {
			struct side *x = &S[s];

			for (; checked[s] < x->n_rdone; checked[s]++) {
				unsigned i = checked[s];
				uint32_t seq = s ? i : i + 1000;
				uint32_t len = s ? (i * 7919u) % 9000u : (i * 104729u) % 9000u;

				assert_int_equal(x->r_status[i], IBRC_WC_OK);
				assert_int_equal(x->r_len[i], len);
				assert_true(msg_ok(x->rbuf[x->r_idx[i]], len, seq));
				repost(x, x->r_idx[i]);
			}
		}
	}
	assert_int_equal(S[0].n_sdone, NMSG);
	assert_int_equal(S[1].n_sdone, NMSG);
	assert_int_equal(S[1].n_rdone, NMSG); /* exactly once */
	assert_int_equal(S[0].n_rdone, NMSG);
	for (unsigned i = 0; i < NMSG; i++) {
		assert_int_equal(S[0].s_status[i], IBRC_WC_OK);
		assert_int_equal(S[0].s_cookie[i], i); /* completions in order */
	}
	assert_true(S[0].qp.stats.retrans_pkts > 0);
	assert_true(S[1].qp.stats.dup_pkts + S[0].qp.stats.dup_pkts > 0 ||
		    S[0].qp.stats.seq_naks_rcvd > 0);
}

static int teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++) {
		ibrc_fini(&S[i].qp);
		for (int j = 0; j < NRBUF; j++) {
			free(S[i].rbuf[j]);
			S[i].rbuf[j] = NULL;
		}
	}
	free(wire);
	return 0;
}

static int setup(void **state)
{
	(void)state;
	wire = calloc(WIRE_MAX, sizeof(*wire));
	return wire ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(psn_arithmetic),
		cmocka_unit_test(timer_values),
		cmocka_unit_test(segmentation),
		cmocka_unit_test(delivery_and_coalesced_acks),
		cmocka_unit_test(gap_nak_and_duplicate),
		cmocka_unit_test(ack_validation),
		cmocka_unit_test(timeout_goes_back_then_retry_exceeded),
		cmocka_unit_test(progress_reloads_retries),
		cmocka_unit_test(rnr_wait_and_exhaustion),
		cmocka_unit_test(window_bounds_outstanding),
		cmocka_unit_test(backpressure_keeps_packets),
		cmocka_unit_test(invalid_requests),
		cmocka_unit_test(lossy_link_delivers_once_in_order),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
