/*
 * libFuzzer harness for the software RC transport (sim/verbs/ib_rc: ibrc_rx and the timers
 * around it), the receive side of connected mode on the simulated fabric. The input is
 * a script, one operation per step: a request packet or an ACK/NAK from the peer with
 * arbitrary opcode, PSN, AckReq, syndrome, MSN and payload; a post of a message; a push;
 * time moving on and the timers ticking; an ACK flush; a fatal error; and whether the
 * next receive buffer is there (none: RNR). Checks, whatever the peer sends:
 * - every receive buffer completes at most once, with a length within its capacity,
 *   and only buffers the harness handed out come back;
 * - every posted message completes at most once, and after ibrc_fini none is left
 *   without its completion;
 * - the engine only sends PSNs inside the 24-bit space, payloads within the path MTU,
 *   and reads only the posted messages' octets (ASan checks the reads).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ib_hdr.h"
#include "sim/verbs/ib_rc.h"

#define N_RBUF     8
#define RBUF_CAP   4096
#define N_POSTS    64
#define MSG_OCTETS 8192

struct harness {
	uint8_t rbuf[N_RBUF][RBUF_CAP];
	bool rbuf_out[N_RBUF]; /* handed to the engine, not completed */
	unsigned next_rbuf;
	bool rx_buf_missing;  /* the next rx_buf call finds none */
	bool posted[N_POSTS]; /* cookie i posted and not completed */
	uint8_t msg[MSG_OCTETS];
	uint32_t mtu;
};

static bool tx_req(void *ctx, uint8_t opcode, uint32_t psn, bool ack_req, const uint8_t *payload,
		   uint32_t len)
{
	struct harness *h = ctx;
	volatile uint8_t sink = 0;

	(void)opcode;
	(void)ack_req;
	if (psn > 0xffffff || len > h->mtu)
		abort();
	for (uint32_t i = 0; i < len; i++) /* every octet the engine hands out is readable */
		sink ^= payload[i];
	(void)sink;
	return true;
}

static bool tx_ack(void *ctx, uint8_t syndrome, uint32_t msn, uint32_t psn)
{
	(void)ctx;
	(void)syndrome;
	if (psn > 0xffffff || msn > 0xffffff)
		abort();
	return true;
}

static void *rx_buf(void *ctx, uint8_t **data, uint32_t *cap)
{
	struct harness *h = ctx;

	if (h->rx_buf_missing) {
		h->rx_buf_missing = false;
		return NULL;
	}
	for (unsigned k = 0; k < N_RBUF; k++) {
		unsigned i = (h->next_rbuf + k) % N_RBUF;

		if (!h->rbuf_out[i]) {
			h->rbuf_out[i] = true;
			h->next_rbuf = i + 1;
			*data = h->rbuf[i];
			*cap = RBUF_CAP;
			return h->rbuf[i];
		}
	}
	return NULL;
}

static void send_done(void *ctx, uint64_t cookie, enum ibrc_status status)
{
	struct harness *h = ctx;

	(void)status;
	if (cookie >= N_POSTS || !h->posted[cookie])
		abort(); /* completed twice, or never posted */
	h->posted[cookie] = false;
}

static void recv_done(void *ctx, void *rbuf, uint32_t len, enum ibrc_status status)
{
	struct harness *h = ctx;
	unsigned i = (unsigned)(((uint8_t(*)[RBUF_CAP])rbuf) - h->rbuf);

	if (i >= N_RBUF || rbuf != h->rbuf[i] || !h->rbuf_out[i])
		abort(); /* not ours, or completed twice */
	if (status == IBRC_WC_OK && len > RBUF_CAP)
		abort();
	h->rbuf_out[i] = false;
}

static const struct ibrc_ops ops = { tx_req, tx_ack, rx_buf, send_done, recv_done };

static uint32_t take(const uint8_t **p, size_t *n, unsigned octets)
{
	uint32_t v = 0;

	while (octets-- && *n) {
		v = v << 8 | **p;
		(*p)++;
		(*n)--;
	}
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint32_t mtus[] = { 256, 512, 1024, 2048, 4096 };
	static struct harness h;
	struct ibrc_qp qp;
	struct ibrc_conn c = { 0 };
	uint64_t now = 1000;
	uint32_t next_cookie = 0;

	memset(&h, 0, sizeof(h));
	if (size < 4)
		return 0;
	h.mtu = mtus[data[0] % 5];
	c.mtu = h.mtu;
	c.sq_psn = take(&data, &size, 3) & 0xffffff;
	c.rq_psn = c.sq_psn ^ 0x5a5a5a;
	c.timeout = 14;
	c.retry_count = 3;
	c.rnr_retry = data[0] >> 5; /* 0..7; 7: forever */
	c.min_rnr_timer = 1;
	c.window = (data[0] >> 3) & 3 ? 4u << ((data[0] >> 3) & 3) : 0;
	if (ibrc_init(&qp, &ops, &h, 16) < 0)
		return 0;
	if (ibrc_connect(&qp, &c) < 0)
		abort();
	for (unsigned i = 0; i < sizeof(h.msg); i++)
		h.msg[i] = (uint8_t)i;

	while (size) {
		uint8_t op = (uint8_t)take(&data, &size, 1);
		struct ibrc_pkt pkt = { 0 };
		uint32_t len;

		switch (op % 8) {
		case 0: /* a request packet from the peer */
		case 1:
			pkt.opcode = (uint8_t)take(&data, &size, 1) % 6; /* RC SEND_* */
			pkt.psn = (c.rq_psn + (take(&data, &size, 1) - 128u)) & 0xffffff;
			pkt.ack_req = op & 0x10;
			len = take(&data, &size, 2) % (h.mtu + 1);
			if (len > size)
				len = (uint32_t)size;
			pkt.payload = data;
			pkt.len = len;
			data += len;
			size -= len;
			ibrc_rx(&qp, &pkt, now);
			break;
		case 2: /* an ACK, NAK or RNR NAK from the peer */
			pkt.opcode = IB_OP_RC_ACK;
			pkt.syndrome = (uint8_t)take(&data, &size, 1);
			pkt.msn = take(&data, &size, 3) & 0xffffff;
			pkt.psn = (c.sq_psn + take(&data, &size, 2)) & 0xffffff;
			ibrc_rx(&qp, &pkt, now);
			break;
		case 3: /* post a message */
			len = take(&data, &size, 2) % (MSG_OCTETS + 1);
			if (next_cookie < N_POSTS) {
				h.posted[next_cookie] = true;
				if (ibrc_post(&qp, h.msg, len, next_cookie) < 0)
					h.posted[next_cookie] = false;
				next_cookie++;
			}
			break;
		case 4:
			ibrc_push(&qp, now);
			break;
		case 5: /* time passes; the timers run */
			now += (uint64_t)take(&data, &size, 2) << (op >> 4);
			ibrc_tick(&qp, now);
			break;
		case 6:
			ibrc_flush_ack(&qp);
			h.rx_buf_missing = op & 0x80;
			break;
		case 7:
			if (op == 0xff)
				ibrc_fail(&qp, IBRC_WC_RETRY_EXCEEDED);
			break;
		}
	}
	ibrc_fail(&qp, IBRC_WC_FLUSHED);
	ibrc_fini(&qp);
	for (unsigned i = 0; i < N_POSTS; i++)
		if (h.posted[i])
			abort(); /* a message that never completed */
	return 0;
}
