/*
 * The verbs IB port backend's error paths (port/ib_port_verbs.c through its ibp_ops,
 * docs/ib-port.md), run on libibverbs2sim: the shim's objects are linked into the test
 * (the Makefile links every test_verbs_sim* so), two nodes are described with
 * vsim_test_set_nodes, and a real ibgw-fabric carries the packets between them
 * (test/unit/vsim_fabric.h). Each
 * fault is made the way it comes (a peer gone, a datagram too long for the buffer, the
 * port going down) or, where only a broken provider makes it, with the shim's fault
 * injection (IBVSIM_FAULT_*, sim/verbs/vsim.h); each test then shows the way back that
 * the data plane takes (a new QP, the port closed and opened again, the port coming
 * back) passing traffic, and that nothing leaked (every buffer back in the pool, no
 * verbs object left when the port closed).
 *
 *   ud_qp_error_recovers      a UD receive too long for its buffer: LOCAL_ERROR, the
 *                             QP's other receives flushed, destroy_qp, a new QP works
 *   rc_qp_error_recovers      the RC peer's QP gone: RETRY_EXCEEDED, the sends behind
 *                             it flushed, destroy_qp, a new connection works
 *   cq_holds_the_whole_pool   every buffer outstanding and nobody polling: the CQ, sized
 *                             to the pool at open, holds every completion
 *   cq_overrun_recovers       a CQ that holds fewer than it granted (fault): QP_FATAL,
 *                             destroy_qp takes the lost buffers back, a reopened port
 *                             works
 *   port_down_recovers        the port goes down and comes back: PORT_DOWN, query says
 *                             DOWN, PORT_ACTIVE, the same QP receives again
 *   reg_mr_failure_recovers   ibv_reg_mr fails (fault): open fails with -ENOMEM and
 *                             releases what it made, the next open works
 *   ud_queues_spread_flows    a port of two queues: a UD flow's datagrams complete on
 *                             one queue, the flows on both; a send from either queue
 *                             carries the UD QP's number; an RC QP must use its
 *                             queue's SRQ; destroy takes back both queues' receives
 *   spread_qp_refused_falls_back  RSS listed but the QP over two queues refused: one
 *                             plain QP on queue 0 passes traffic, sends of queue 1 too
 *   one_queue_without_rss     a device without RSS for UD (IBVSIM_RSS=0) gives a port
 *                             that asks for two queues one, and it passes traffic
 *   ud_qp_fatal_recovers      a UD QP put in error (fault): QP_FATAL, posts refused,
 *                             qp_recover brings it back with its QPN, every receive
 *                             buffer back once and posted again, sends completed
 *                             before the error still reported; datagrams both ways
 *   ud_wq_fatal_recovers      two queues: queue 1's receive WQ put in error
 *                             (WQ_FATAL), then queue 0's send QP (QP_FATAL): each
 *                             brought back, the flows of both queues received again,
 *                             sends of both queues leave with the QP's number
 *   spread_qp_rss_modify_refused  two queues, the RSS receive QP's modify refused as
 *                             mlx5 does (EOPNOTSUPP, ENOSYS) or allowed: the UD QP comes
 *                             up, the flows of both queues arrive, both queues send
 *                             with its number, every buffer back after destroy; another
 *                             errno (EIO) from the RSS QP or a send QP fails qp_ready
 *   ud_qp_recovery_failure_reported  the QP cannot leave RESET (fault): -EIO, its
 *                             buffers back, posts still refused; a later try works
 *   ud_qp_error_by_completion_recovers  no event: a UD send above the MTU leaves the
 *                             QP in SQE, a datagram too long for its buffer puts it in
 *                             ERR; qp_recover finds each (ibv_query_qp) and brings it
 *                             back, same QPN, and it passes traffic
 *   ud_qp_recovers_beside_its_poller  a thread polls and reposts (a worker) while
 *                             datagrams arrive and the QP fails and is brought back
 *                             three times: no buffer lost, none posted twice
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "port/ib_port.h"
#include "sim/verbs/vsim.h"
#include "test/unit/vsim_fabric.h"

#define QKEY     0x0b1b0000u
#define N_BUFS   64
#define BUF_SIZE (4096 + 64)

static const struct ibp_ops *ops = &ibp_verbs_ops;

/* Nothing may be left behind: the shim counts the objects a closed context held. */
static int teardown(void **state)
{
	(void)state;
	assert_int_equal(vsim_test_objects_leaked(), 0);
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ibp_port *port_open_queues(const char *node, size_t buf_size, unsigned n_bufs,
					 unsigned n_queues)
{
	struct ibp_port_config c = { .backend = "verbs",
				     .device = node,
				     .port = 1,
				     .buf_size = buf_size,
				     .n_bufs = n_bufs,
				     .n_queues = n_queues };
	struct ibp_port *p = NULL;

	assert_int_equal(ops->open(&c, &p), 0);
	assert_non_null(p);
	return p;
}

static struct ibp_port *port_open(const char *node, size_t buf_size, unsigned n_bufs)
{
	return port_open_queues(node, buf_size, n_bufs, 1);
}

/* How many buffers the pool hands out now (all taken, then all given back). */
static unsigned pool_free(struct ibp_port *p)
{
	static struct ibp_buf *b[4096];
	unsigned n = 0;

	while (n < 4096 && (b[n] = ops->buf_get(p)))
		n++;
	for (unsigned i = 0; i < n; i++)
		ops->buf_put(p, b[i]);
	return n;
}

static struct ibp_qp *ud_qp(struct ibp_port *p)
{
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD, .qkey = QKEY, .send_depth = 32, .recv_depth = 32
	};
	struct ibp_qp *qp;

	assert_int_equal(ops->create_qp(p, &qi, &qp), 0);
	assert_int_equal(ops->qp_ready(qp, NULL), 0);
	return qp;
}

static void post_recvs(struct ibp_port *p, struct ibp_qp *qp, struct ibp_srq *srq, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ibp_buf *b = ops->buf_get(p);

		assert_non_null(b);
		assert_int_equal(
		    srq ? ops->post_srq_recv(srq, &b, 1) : ops->post_recv(qp, 0, &b, 1), 1);
	}
}

static struct ibp_ah *ah_to(struct ibp_port *p, uint16_t dlid)
{
	struct ibp_ah_attr a = { .dlid = dlid };
	struct ibp_ah *ah;

	assert_int_equal(ops->create_ah(p, &a, &ah), 0);
	return ah;
}

/* One send of len octets, each the octet `fill`; ah NULL: RC. */
static void send_one(struct ibp_port *p, struct ibp_qp *qp, struct ibp_ah *ah, uint32_t dqpn,
		     uint32_t len, uint8_t fill)
{
	struct ibp_buf *b = ops->buf_get(p);
	struct ibp_send s = { .qp = qp, .ah = ah, .remote_qpn = dqpn, .remote_qkey = QKEY };

	assert_non_null(b);
	memset(b->data, fill, len);
	b->len = len;
	s.buf = b;
	assert_int_equal(ops->post_send(0, &s, 1), 1);
}

/* Poll until n completions or ms; returns how many came (at most n). */
static unsigned wait_wcs_keep(struct ibp_port *p, struct ibp_wc *wcs, unsigned n, unsigned ms)
{
	uint64_t end = now_ms() + ms;
	unsigned got = 0;

	while (got < n && now_ms() < end) {
		int r = ops->poll(p, 0, wcs + got, n - got);

		assert_true(r >= 0);
		got += (unsigned)r;
		if (got < n)
			usleep(1000);
	}
	return got;
}

/* The same, every buffer going back to the pool. */
static unsigned wait_wcs(struct ibp_port *p, struct ibp_wc *wcs, unsigned n, unsigned ms)
{
	unsigned got = wait_wcs_keep(p, wcs, n, ms);

	for (unsigned i = 0; i < got; i++)
		if (wcs[i].buf)
			ops->buf_put(p, wcs[i].buf);
	return got;
}

/* One completion within 2 s, its buffer left to the caller. */
static void poll_one(struct ibp_port *p, struct ibp_wc *wc)
{
	assert_int_equal(wait_wcs_keep(p, wc, 1, 2000), 1);
}

/* The next port event of type want within ms (others skipped). */
static bool event_wait(struct ibp_port *p, enum ibp_event_type want, struct ibp_event *out,
		       unsigned ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end) {
		struct ibp_event ev;
		int r = ops->next_event(p, &ev);

		if (r == 0 && ev.type == want) {
			*out = ev;
			return true;
		}
		if (r == -EAGAIN)
			usleep(1000);
	}
	return false;
}

/* A datagram from b to a's QP arrives whole: the way back works. */
static void ud_passes(struct ibp_port *a, struct ibp_qp *qa, struct ibp_port *b, struct ibp_qp *qb,
		      uint8_t fill)
{
	struct ibp_ah *ah = ah_to(b, 1);
	struct ibp_wc wc;

	post_recvs(a, qa, NULL, 1);
	send_one(b, qb, ah, ops->qp_num(qa), 200, fill);
	assert_int_equal(wait_wcs(b, &wc, 1, 2000), 1);
	assert_int_equal(wc.status, IBP_WC_OK);
	assert_int_equal(wc.kind, IBP_WC_SEND);
	poll_one(a, &wc); /* the payload is read before the buffer goes back */
	assert_int_equal(wc.kind, IBP_WC_RECV);
	assert_int_equal(wc.status, IBP_WC_OK);
	assert_ptr_equal(wc.qp, qa);
	assert_int_equal(wc.byte_len, IBP_GRH_AREA + 200);
	assert_int_equal(wc.buf->data[IBP_GRH_AREA], fill);
	assert_int_equal(wc.buf->data[IBP_GRH_AREA + 199], fill);
	assert_int_equal(wc.slid, 2);
	ops->buf_put(a, wc.buf);
	ops->destroy_ah(ah);
}

/* The end of a test: the two UD QPs and their ports go (the teardown checks that no
 * verbs object was left). */
static void ud_pair_free(struct ibp_port *a, struct ibp_qp *qa, struct ibp_port *b,
			 struct ibp_qp *qb)
{
	ops->destroy_qp(qa);
	ops->destroy_qp(qb);
	ops->close(a);
	ops->close(b);
}

static void ud_qp_error_recovers(void **state)
{
	/* nodeA's buffers hold 256 octets behind the GRH area: a 1000-octet datagram
	 * does not fit (within the UD MTU, so the sender's HCA sends it). */
	struct ibp_port *a = port_open("nodeA", IBP_GRH_AREA + 256, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b), *qa2;
	struct ibp_ah *ah = ah_to(b, 1);
	struct ibp_wc wc[16];
	unsigned flushed = 0;
	uint64_t t0;
	(void)state;

	post_recvs(a, qa, NULL, 8);
	send_one(b, qb, ah, ops->qp_num(qa), 1000, 0x5a);
	assert_int_equal(wait_wcs(b, wc, 1, 2000), 1);
	assert_int_equal(wc[0].status, IBP_WC_OK); /* UD: the sender knows nothing */

	/* The receive fails, the QP goes to error, its other receives flush; every one
	 * comes back, as a receive of that QP. */
	assert_int_equal(wait_wcs(a, wc, 8, 2000), 8);
	assert_int_equal(wc[0].kind, IBP_WC_RECV);
	assert_int_equal(wc[0].status, IBP_WC_LOCAL_ERROR);
	assert_int_equal(wc[0].byte_len, 0);
	for (unsigned i = 1; i < 8; i++) {
		assert_int_equal(wc[i].kind, IBP_WC_RECV);
		assert_ptr_equal(wc[i].qp, qa);
		flushed += wc[i].status == IBP_WC_FLUSHED;
	}
	assert_int_equal(flushed, 7);
	assert_int_equal(pool_free(a), N_BUFS);

	/* The way back: the QP is destroyed at once (nothing left posted) and a new one
	 * receives. */
	t0 = now_ms();
	ops->destroy_qp(qa);
	assert_true(now_ms() - t0 < 500);
	qa2 = ud_qp(a);
	ud_passes(a, qa2, b, qb, 0x33);

	ops->destroy_ah(ah);
	ops->destroy_qp(qa2);
	ops->destroy_qp(qb);
	assert_int_equal(pool_free(a), N_BUFS);
	assert_int_equal(pool_free(b), N_BUFS);
	ops->close(a);
	ops->close(b);
}

/* RC: an SRQ with depth receives and a QP on it, for each end. */
struct rc_end {
	struct ibp_port *p;
	struct ibp_srq *srq;
	struct ibp_qp *qp;
	uint16_t lid;
};

static void rc_qp(struct rc_end *e)
{
	struct ibp_qp_init qi = { .type = IBP_QPT_RC, .send_depth = 16, .srq = e->srq };

	assert_int_equal(ops->create_qp(e->p, &qi, &e->qp), 0);
}

/* Connect a and b (QPs in INIT): short timeouts, one retry, so a dead peer is seen in
 * milliseconds. */
static void rc_connect(struct rc_end *a, struct rc_end *b)
{
	struct ibp_qp_connect c = { .path_mtu = IB_MTU_2048,
				    .timeout = 10, /* 4.2 ms */
				    .retry_count = 1,
				    .rnr_retry = 7,
				    .min_rnr_timer = 12 };

	c.remote_qpn = ops->qp_num(b->qp);
	c.local_psn = 100;
	c.remote_psn = 200;
	c.path.dlid = b->lid;
	assert_int_equal(ops->qp_ready(a->qp, &c), 0);
	c.remote_qpn = ops->qp_num(a->qp);
	c.local_psn = 200;
	c.remote_psn = 100;
	c.path.dlid = a->lid;
	assert_int_equal(ops->qp_ready(b->qp, &c), 0);
}

/* One message a -> b, received whole on b's SRQ as b's QP's. */
static void rc_passes(struct rc_end *a, struct rc_end *b, uint8_t fill)
{
	struct ibp_wc wc;

	send_one(a->p, a->qp, NULL, 0, 3000, fill);
	poll_one(b->p, &wc);
	assert_int_equal(wc.kind, IBP_WC_RECV);
	assert_int_equal(wc.status, IBP_WC_OK);
	assert_ptr_equal(wc.qp, b->qp);
	assert_int_equal(wc.byte_len, 3000);
	assert_int_equal(wc.buf->data[0], fill);
	assert_int_equal(wc.buf->data[2999], fill);
	assert_int_equal(ops->post_srq_recv(b->srq, &wc.buf, 1), 1);
	assert_int_equal(wait_wcs(a->p, &wc, 1, 2000), 1);
	assert_int_equal(wc.kind, IBP_WC_SEND);
	assert_int_equal(wc.status, IBP_WC_OK);
}

static void rc_qp_error_recovers(void **state)
{
	struct rc_end a = { .p = port_open("nodeA", BUF_SIZE, N_BUFS), .lid = 1 };
	struct rc_end b = { .p = port_open("nodeB", BUF_SIZE, N_BUFS), .lid = 2 };
	struct ibp_wc wc[4];
	uint64_t t0;
	(void)state;

	assert_int_equal(ops->create_srq(a.p, 0, 16, &a.srq), 0);
	assert_int_equal(ops->create_srq(b.p, 0, 16, &b.srq), 0);
	post_recvs(a.p, NULL, a.srq, 16);
	post_recvs(b.p, NULL, b.srq, 16);
	rc_qp(&a);
	rc_qp(&b);
	rc_connect(&a, &b);
	rc_passes(&a, &b, 0x11);

	/* The peer's QP goes (its process gone, as the HCA sees it): the first send runs
	 * out of retries, the QP is in error, the sends behind it flush. */
	ops->destroy_qp(b.qp);
	for (uint8_t i = 0; i < 3; i++)
		send_one(a.p, a.qp, NULL, 0, 100, i);
	assert_int_equal(wait_wcs(a.p, wc, 3, 2000), 3);
	assert_int_equal(wc[0].kind, IBP_WC_SEND);
	assert_int_equal(wc[0].status, IBP_WC_RETRY_EXCEEDED);
	assert_int_equal(wc[1].status, IBP_WC_FLUSHED);
	assert_int_equal(wc[2].status, IBP_WC_FLUSHED);
	assert_int_equal(pool_free(a.p), N_BUFS - 16); /* all but the SRQ's */

	/* The way back: the failed QP is destroyed without waiting out the drain (its
	 * WRs are all reaped), and a new connection carries traffic both ways. */
	t0 = now_ms();
	ops->destroy_qp(a.qp);
	assert_true(now_ms() - t0 < 1000);
	rc_qp(&a);
	rc_qp(&b);
	rc_connect(&a, &b);
	rc_passes(&a, &b, 0x22);
	rc_passes(&b, &a, 0x23);

	ops->destroy_qp(a.qp);
	ops->destroy_qp(b.qp);
	ops->destroy_srq(a.srq);
	ops->destroy_srq(b.srq);
	assert_int_equal(pool_free(a.p), N_BUFS);
	assert_int_equal(pool_free(b.p), N_BUFS);
	ops->close(a.p);
	ops->close(b.p);
}

/* n datagrams b -> a's QP, sent one by one (b's sends reaped as they complete). */
static void ud_burst(struct ibp_port *b, struct ibp_qp *qb, uint32_t dqpn, unsigned n)
{
	struct ibp_ah *ah = ah_to(b, 1);
	struct ibp_wc wc;

	for (unsigned i = 0; i < n; i++) {
		send_one(b, qb, ah, dqpn, 64, (uint8_t)i);
		assert_int_equal(wait_wcs(b, &wc, 1, 2000), 1);
		assert_int_equal(wc.status, IBP_WC_OK);
	}
	ops->destroy_ah(ah);
}

static void cq_holds_the_whole_pool(void **state)
{
	/* A small pool, all of it outstanding: 24 receives that all complete and 8 sends,
	 * none reaped until every one has completed. */
	struct ibp_port *a = port_open("nodeA", BUF_SIZE, 32);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	struct ibp_ah *ah = ah_to(a, 2);
	struct ibp_wc wc[40];
	struct ibp_event ev;
	unsigned recvs = 0, sends = 0;
	(void)state;

	post_recvs(a, qa, NULL, 24);
	post_recvs(b, qb, NULL, 8);
	for (uint8_t i = 0; i < 8; i++)
		send_one(a, qa, ah, ops->qp_num(qb), 64, i);
	ud_burst(b, qb, ops->qp_num(qa), 24);
	assert_null(ops->buf_get(a)); /* the whole pool is out */
	usleep(200000);

	assert_int_equal(wait_wcs(a, wc, 40, 500), 32);
	for (unsigned i = 0; i < 32; i++) {
		assert_int_equal(wc[i].status, IBP_WC_OK);
		recvs += wc[i].kind == IBP_WC_RECV;
		sends += wc[i].kind == IBP_WC_SEND;
	}
	assert_int_equal(recvs, 24);
	assert_int_equal(sends, 8);
	assert_false(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 100));
	assert_int_equal(pool_free(a), 32);

	assert_int_equal(wait_wcs(b, wc, 8, 2000), 8);
	ops->destroy_ah(ah);
	ud_pair_free(a, qa, b, qb);
}

static void cq_overrun_recovers(void **state)
{
	struct ibp_port *a, *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b);
	struct ibp_wc wc[32];
	struct ibp_event ev;
	uint64_t t0;
	(void)state;

	/* A CQ holding 8 where the backend asked for (and was granted) its pool's worth. */
	setenv("IBVSIM_FAULT_CQ_DEPTH", "8", 1);
	a = port_open("nodeA", BUF_SIZE, 32);
	unsetenv("IBVSIM_FAULT_CQ_DEPTH");
	qa = ud_qp(a);
	post_recvs(a, qa, NULL, 24);
	ud_burst(b, qb, ops->qp_num(qa), 24);
	usleep(200000);

	/* Overrun: the QP that lost a completion is fatal, and so reported; 8 came. */
	assert_true(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 2000));
	assert_ptr_equal(ev.qp, qa);
	assert_int_equal(wait_wcs(a, wc, 32, 300), 8);
	assert_int_equal(pool_free(a), 32 - 16); /* 16 buffers went with the lost ones */

	/* The QP cannot drain (its completions are gone): destroy_qp waits its bound
	 * (2 s), then takes the buffers back. */
	t0 = now_ms();
	ops->destroy_qp(qa);
	assert_true(now_ms() - t0 < 3000);
	assert_int_equal(pool_free(a), 32);

	/* The CQ stays in error, as on mlx5: the way back is the port closed and opened
	 * again (a new CQ). */
	ops->close(a);
	a = port_open("nodeA", BUF_SIZE, 32);
	qa = ud_qp(a);
	ud_passes(a, qa, b, qb, 0x44);

	ud_pair_free(a, qa, b, qb);
}

static void port_down_recovers(void **state)
{
	struct ibp_port *a = port_open("nodeA", BUF_SIZE, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	struct vsim_test_node changed[2];
	struct ibp_port_attr pa;
	struct ibp_event ev;
	(void)state;

	ud_passes(a, qa, b, qb, 0x55);
	memcpy(changed, vsim_nodes, sizeof(changed));
	changed[0].port[0].state = IBV_PORT_DOWN;
	vsim_test_set_nodes(changed, 2);
	assert_true(event_wait(a, IBP_EVENT_PORT_DOWN, &ev, 2000));
	assert_int_equal(ops->query(a, &pa), 0);
	assert_int_equal(pa.state, IBP_PORT_DOWN);

	vsim_test_set_nodes(vsim_nodes, 2);
	assert_true(event_wait(a, IBP_EVENT_PORT_ACTIVE, &ev, 2000));
	assert_int_equal(ops->query(a, &pa), 0);
	assert_int_equal(pa.state, IBP_PORT_ACTIVE);
	assert_int_equal(pa.lid, 1);
	/* The QPs outlived the outage: the same one receives again. */
	ud_passes(a, qa, b, qb, 0x66);

	ud_pair_free(a, qa, b, qb);
}

static void reg_mr_failure_recovers(void **state)
{
	struct ibp_port_config c = { .backend = "verbs",
				     .device = "nodeA",
				     .port = 1,
				     .buf_size = BUF_SIZE,
				     .n_bufs = N_BUFS };
	struct ibp_port *a = NULL, *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b);
	(void)state;

	setenv("IBVSIM_FAULT_REG_MR", "12", 1); /* ENOMEM: RLIMIT_MEMLOCK too low */
	assert_int_equal(ops->open(&c, &a), -ENOMEM);
	unsetenv("IBVSIM_FAULT_REG_MR");
	assert_int_equal(vsim_test_objects_leaked(), 0); /* its PD and device released */

	a = port_open("nodeA", BUF_SIZE, N_BUFS);
	qa = ud_qp(a);
	ud_passes(a, qa, b, qb, 0x77);

	ud_pair_free(a, qa, b, qb);
}

/* An IPoIB datagram of UDP flow f (IPoIB header, IPv4, UDP from port 40000 + f). */
static void send_flow(struct ibp_port *p, struct ibp_qp *qp, struct ibp_ah *ah, uint32_t dqpn,
		      unsigned f)
{
	struct ibp_buf *b = ops->buf_get(p);
	struct ibp_send s = { .qp = qp, .ah = ah, .remote_qpn = dqpn, .remote_qkey = QKEY };
	static const uint8_t hdr[32] = {
		0x08, 0x00, 0,    0,                                           /* IPoIB: IPv4 */
		0x45, 0,    0,    28,   0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, /* 10.0.0.1 -> */
		10,   0,    0,    2,                                           /* 10.0.0.2 */
		0,    0,    0x17, 0x70, 0, 8, 0, 0                             /* UDP -> 6000 */
	};

	assert_non_null(b);
	memcpy(b->data, hdr, sizeof(hdr));
	b->data[24] = (uint8_t)((40000 + f) >> 8);
	b->data[25] = (uint8_t)(40000 + f);
	b->len = sizeof(hdr);
	s.buf = b;
	assert_int_equal(ops->post_send(0, &s, 1), 1);
}

static void ud_queues_spread_flows(void **state)
{
	enum {
		FLOWS = 16,
		PER_FLOW = 4
	};
	struct ibp_port *a = port_open_queues("nodeA", BUF_SIZE, N_BUFS * 3, 2);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b), *rc;
	struct ibp_ah *ah = ah_to(b, 1), *back;
	struct ibp_srq *srq1;
	struct ibp_wc wc[64];
	int flow_queue[FLOWS];
	unsigned per_queue[2] = { 0, 0 };
	(void)state;

	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD, .qkey = QKEY, .send_depth = 32, .recv_depth = 64
	};

	assert_int_equal(ops->queues(a), 2);
	assert_int_equal(ops->create_qp(a, &qi, &qa), 0);
	assert_int_equal(ops->qp_ready(qa, NULL), 0);
	/* Room on each queue for every datagram, however the hash deals the flows. */
	for (unsigned q = 0; q < 2; q++)
		for (unsigned i = 0; i < 64; i++) {
			struct ibp_buf *buf = ops->buf_get(a);

			assert_non_null(buf);
			assert_int_equal(ops->post_recv(qa, q, &buf, 1), 1);
		}
	for (unsigned f = 0; f < FLOWS; f++)
		flow_queue[f] = -1;
	for (unsigned k = 0; k < PER_FLOW; k++) { /* a round at a time: b's send depth */
		for (unsigned f = 0; f < FLOWS; f++)
			send_flow(b, qb, ah, ops->qp_num(qa), f);
		assert_int_equal(wait_wcs(b, wc, FLOWS, 2000), FLOWS);
	}

	/* Each queue polled on its own: every datagram once, a flow on one queue. */
	uint64_t end = now_ms() + 3000;

	while (per_queue[0] + per_queue[1] < FLOWS * PER_FLOW && now_ms() < end) {
		for (unsigned q = 0; q < 2; q++) {
			int n = ops->poll(a, q, wc, 64);

			assert_true(n >= 0);
			for (int i = 0; i < n; i++) {
				unsigned f;

				assert_int_equal(wc[i].kind, IBP_WC_RECV);
				assert_int_equal(wc[i].status, IBP_WC_OK);
				assert_ptr_equal(wc[i].qp, qa);
				f = (unsigned)((wc[i].buf->data[IBP_GRH_AREA + 24] << 8 |
						wc[i].buf->data[IBP_GRH_AREA + 25]) -
					       40000);
				assert_true(f < FLOWS);
				if (flow_queue[f] < 0)
					flow_queue[f] = (int)q;
				assert_int_equal(flow_queue[f], (int)q);
				per_queue[q]++;
				ops->buf_put(a, wc[i].buf);
			}
		}
		usleep(1000);
	}
	assert_int_equal(per_queue[0] + per_queue[1], FLOWS * PER_FLOW);
	assert_true(per_queue[0] > 0 && per_queue[1] > 0);

	/* Either queue's send carries the UD QP's number (peers see one QPN); its
	 * completion comes on that queue. */
	back = ah_to(a, 2);
	post_recvs(b, qb, NULL, 2);
	for (unsigned q = 0; q < 2; q++) {
		struct ibp_buf *buf = ops->buf_get(a);
		struct ibp_send s = { .qp = qa,
				      .ah = back,
				      .remote_qpn = ops->qp_num(qb),
				      .remote_qkey = QKEY,
				      .buf = buf };

		assert_non_null(buf);
		memset(buf->data, 0x11, 64);
		buf->len = 64;
		assert_int_equal(ops->post_send(q, &s, 1), 1);
		end = now_ms() + 2000;
		int n = 0;

		while (n == 0 && now_ms() < end) {
			n = ops->poll(a, q, wc, 1);
			if (n == 0)
				usleep(1000);
		}
		assert_int_equal(n, 1);
		assert_int_equal(wc[0].kind, IBP_WC_SEND);
		ops->buf_put(a, wc[0].buf);
		poll_one(b, &wc[0]);
		assert_int_equal(wc[0].kind, IBP_WC_RECV);
		assert_int_equal(wc[0].src_qp, ops->qp_num(qa));
		ops->buf_put(b, wc[0].buf);
	}

	/* An RC QP completes on one queue, through that queue's SRQ. */
	struct ibp_qp_init ri = { .type = IBP_QPT_RC, .send_depth = 8, .queue = 0 };

	assert_int_equal(ops->create_srq(a, 1, 8, &srq1), 0);
	ri.srq = srq1;
	assert_int_equal(ops->create_qp(a, &ri, &rc), -EINVAL); /* queue 0, SRQ of 1 */
	ri.queue = 1;
	assert_int_equal(ops->create_qp(a, &ri, &rc), 0);
	ops->destroy_qp(rc);
	ops->destroy_srq(srq1);

	/* Destroyed with receives posted on both queues: all of them back in the pool. */
	ops->destroy_qp(qa);
	assert_int_equal(pool_free(a), N_BUFS * 3);
	ops->destroy_ah(back);
	ops->destroy_ah(ah);
	ops->destroy_qp(qb);
	ops->close(a);
	ops->close(b);
}

/* RSS listed, but the UD QP over both queues refused (the shim's RSS off once the port
 * is open): one plain QP on queue 0 carries the traffic, every queue's sends included. */
static void spread_qp_refused_falls_back(void **state)
{
	struct ibp_port *a = port_open_queues("nodeA", BUF_SIZE, N_BUFS, 2);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b);
	struct ibp_ah *back = ah_to(a, 2);
	struct ibp_buf *buf;
	struct ibp_wc wc;
	(void)state;

	assert_int_equal(ops->queues(a), 2);
	setenv("IBVSIM_RSS", "0", 1);
	qa = ud_qp(a);
	unsetenv("IBVSIM_RSS");
	ud_passes(a, qa, b, qb, 0x6b);
	/* A second queue's receives go to the one QP: at most its depth in all. */
	post_recvs(a, qa, NULL, 32);
	buf = ops->buf_get(a);
	assert_int_equal(ops->post_recv(qa, 1, &buf, 1), -ENOMEM);
	ops->buf_put(a, buf);
	/* A send from queue 1 leaves, with the QP's number, and completes on queue 0. */
	post_recvs(b, qb, NULL, 1);
	buf = ops->buf_get(a);
	memset(buf->data, 0x22, 64);
	buf->len = 64;
	struct ibp_send s = {
		.qp = qa, .ah = back, .remote_qpn = ops->qp_num(qb), .remote_qkey = QKEY, .buf = buf
	};

	assert_int_equal(ops->post_send(1, &s, 1), 1);
	poll_one(a, &wc);
	assert_int_equal(wc.kind, IBP_WC_SEND);
	ops->buf_put(a, wc.buf);
	poll_one(b, &wc);
	assert_int_equal(wc.src_qp, ops->qp_num(qa));
	ops->buf_put(b, wc.buf);
	ops->destroy_ah(back);
	ud_pair_free(a, qa, b, qb);
}

static void one_queue_without_rss(void **state)
{
	struct ibp_port *a, *b;
	struct ibp_qp *qa, *qb;
	(void)state;

	setenv("IBVSIM_RSS", "0", 1);
	a = port_open_queues("nodeA", BUF_SIZE, N_BUFS, 2);
	unsetenv("IBVSIM_RSS");
	b = port_open("nodeB", BUF_SIZE, N_BUFS);
	assert_int_equal(ops->queues(a), 1);
	qa = ud_qp(a);
	qb = ud_qp(b);
	ud_passes(a, qa, b, qb, 0x3c);
	ud_pair_free(a, qa, b, qb);
}

/* ---- a UD QP or WQ in the error state, brought back (qp_recover) ---------------------- */

/* One datagram of len octets b -> a's QP arrives whole (not IP: its RSS hash is 0,
 * queue 0; a's receive queues are full: the buffer is posted back), and one a -> b
 * leaves from queue q with a's QPN. */
static void ud_both_ways_len(struct ibp_port *a, struct ibp_qp *qa, unsigned q, struct ibp_port *b,
			     struct ibp_qp *qb, uint8_t fill, uint32_t len)
{
	struct ibp_ah *to_a = ah_to(b, 1), *to_b = ah_to(a, 2);
	struct ibp_wc wc;
	struct ibp_buf *buf;
	uint64_t end = now_ms() + 2000;
	int n = 0;

	send_one(b, qb, to_a, ops->qp_num(qa), len, fill);
	assert_int_equal(wait_wcs(b, &wc, 1, 2000), 1);
	assert_int_equal(wc.status, IBP_WC_OK);
	while (n == 0 && now_ms() < end) {
		n = ops->poll(a, 0, &wc, 1);
		if (n == 0)
			usleep(1000);
	}
	assert_int_equal(n, 1);
	assert_int_equal(wc.kind, IBP_WC_RECV);
	assert_int_equal(wc.status, IBP_WC_OK);
	assert_ptr_equal(wc.qp, qa);
	assert_int_equal(wc.byte_len, IBP_GRH_AREA + len);
	assert_int_equal(wc.buf->data[IBP_GRH_AREA + len - 1], fill);
	assert_int_equal(ops->post_recv(qa, 0, &wc.buf, 1), 1);

	post_recvs(b, qb, NULL, 1);
	buf = ops->buf_get(a);
	assert_non_null(buf);
	memset(buf->data, fill, 100);
	buf->len = 100;
	struct ibp_send s = {
		.qp = qa, .ah = to_b, .remote_qpn = ops->qp_num(qb), .remote_qkey = QKEY, .buf = buf
	};

	assert_int_equal(ops->post_send(q, &s, 1), 1);
	end = now_ms() + 2000;
	n = 0;
	while (n == 0 && now_ms() < end) {
		n = ops->poll(a, q, &wc, 1);
		if (n == 0)
			usleep(1000);
	}
	assert_int_equal(n, 1);
	assert_int_equal(wc.kind, IBP_WC_SEND);
	assert_int_equal(wc.status, IBP_WC_OK);
	ops->buf_put(a, wc.buf);
	poll_one(b, &wc);
	assert_int_equal(wc.kind, IBP_WC_RECV);
	assert_int_equal(wc.status, IBP_WC_OK);
	assert_int_equal(wc.src_qp, ops->qp_num(qa));
	ops->buf_put(b, wc.buf);
	ops->destroy_ah(to_a);
	ops->destroy_ah(to_b);
}

static void ud_both_ways(struct ibp_port *a, struct ibp_qp *qa, unsigned q, struct ibp_port *b,
			 struct ibp_qp *qb, uint8_t fill)
{
	ud_both_ways_len(a, qa, q, b, qb, fill, 300);
}

/* Posts to a part in error are refused (the buffer stays the caller's). */
static void posts_refused(struct ibp_port *a, struct ibp_qp *qa, unsigned q)
{
	struct ibp_buf *buf = ops->buf_get(a);
	struct ibp_ah *ah = ah_to(a, 2);
	struct ibp_send s = { .qp = qa, .ah = ah, .remote_qpn = 1, .remote_qkey = QKEY };

	assert_non_null(buf);
	assert_int_equal(ops->post_recv(qa, q, &buf, 1), -EIO);
	buf->len = 10;
	s.buf = buf;
	assert_int_equal(ops->post_send(q, &s, 1), -EIO);
	ops->buf_put(a, buf);
	ops->destroy_ah(ah);
}

static void ud_qp_fatal_recovers(void **state)
{
	struct ibp_port *a = port_open("nodeA", BUF_SIZE, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	uint32_t qpn = ops->qp_num(qa);
	struct ibp_ah *to_b = ah_to(a, 2);
	struct ibp_event ev;
	struct ibp_wc wc[4];
	(void)state;

	/* A healthy QP: nothing to bring back. */
	assert_int_equal(ops->qp_recover(qa), 0);
	post_recvs(a, qa, NULL, 32);
	post_recvs(b, qb, NULL, 2);
	send_one(a, qa, to_b, ops->qp_num(qb), 64, 1); /* completed, not yet polled */
	send_one(a, qa, to_b, ops->qp_num(qb), 64, 2);
	assert_int_equal(wait_wcs(b, wc, 2, 2000), 2);
	assert_int_equal(pool_free(a), N_BUFS - 34);

	assert_int_equal(vsim_test_fault("nodeA", qpn, 0, false), 0);
	assert_true(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 2000));
	assert_ptr_equal(ev.qp, qa);
	posts_refused(a, qa, 0);

	/* Nobody polls: qp_recover reaps the 32 flushed receives itself (their buffers back
	 * to the pool, no completion), keeps the two sends that completed before the error
	 * for poll, and posts 32 receives again. */
	assert_int_equal(ops->qp_recover(qa), 1);
	assert_int_equal(ops->qp_num(qa), qpn);
	assert_int_equal(pool_free(a), N_BUFS - 32 - 2);
	assert_int_equal(wait_wcs(a, wc, 4, 300), 2);
	assert_int_equal(wc[0].kind, IBP_WC_SEND);
	assert_int_equal(wc[0].status, IBP_WC_OK);
	assert_int_equal(wc[1].kind, IBP_WC_SEND);
	assert_int_equal(wc[1].status, IBP_WC_OK);
	assert_int_equal(pool_free(a), N_BUFS - 32);
	/* The receive queue is full again, and works; so do sends; once more, no event. */
	post_recvs(a, qa, NULL, 0);
	ud_both_ways(a, qa, 0, b, qb, 0x5c);
	assert_int_equal(ops->qp_recover(qa), 0);
	assert_false(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 50));

	ops->destroy_ah(to_b);
	ops->destroy_qp(qa);
	assert_int_equal(pool_free(a), N_BUFS);
	ops->destroy_qp(qb);
	ops->close(a);
	ops->close(b);
}

/* The flows of both queues arrive (16 flows, 2 datagrams each): how many on each. */
static void flows_arrive(struct ibp_port *a, struct ibp_qp *qa, struct ibp_port *b,
			 struct ibp_qp *qb, unsigned per_queue[2])
{
	struct ibp_ah *ah = ah_to(b, 1);
	struct ibp_wc wc[64];
	uint64_t end;

	per_queue[0] = per_queue[1] = 0;
	for (unsigned k = 0; k < 2; k++) {
		for (unsigned f = 0; f < 16; f++)
			send_flow(b, qb, ah, ops->qp_num(qa), f);
		assert_int_equal(wait_wcs(b, wc, 16, 2000), 16);
	}
	end = now_ms() + 3000;
	while (per_queue[0] + per_queue[1] < 32 && now_ms() < end) {
		for (unsigned q = 0; q < 2; q++) {
			int n = ops->poll(a, q, wc, 64);

			assert_true(n >= 0);
			for (int i = 0; i < n; i++) {
				assert_int_equal(wc[i].kind, IBP_WC_RECV);
				assert_int_equal(wc[i].status, IBP_WC_OK);
				per_queue[q]++;
				assert_int_equal(ops->post_recv(qa, q, &wc[i].buf, 1), 1);
			}
		}
		usleep(1000);
	}
	assert_int_equal(per_queue[0] + per_queue[1], 32);
	ops->destroy_ah(ah);
}

/* The end of a two-queue test: a datagram each way from each queue (sends with a's
 * QPN), then destroy_qp gives back every buffer, and the ports close. */
static void spread_pair_end(struct ibp_port *a, struct ibp_qp *qa, struct ibp_port *b,
			    struct ibp_qp *qb, uint8_t fill)
{
	ud_both_ways(a, qa, 0, b, qb, fill);
	ud_both_ways(a, qa, 1, b, qb, (uint8_t)(fill + 1));
	ops->destroy_qp(qa);
	assert_int_equal(pool_free(a), N_BUFS * 3);
	ops->destroy_qp(qb);
	ops->close(a);
	ops->close(b);
}

static void ud_wq_fatal_recovers(void **state)
{
	struct ibp_port *a = port_open_queues("nodeA", BUF_SIZE, N_BUFS * 3, 2);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b);
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD, .qkey = QKEY, .send_depth = 32, .recv_depth = 64
	};
	struct ibp_event ev;
	struct ibp_buf *buf;
	unsigned per_queue[2];
	uint32_t qpn;
	(void)state;

	assert_int_equal(ops->queues(a), 2);
	assert_int_equal(ops->create_qp(a, &qi, &qa), 0);
	assert_int_equal(ops->qp_ready(qa, NULL), 0);
	qpn = ops->qp_num(qa);
	for (unsigned q = 0; q < 2; q++)
		for (unsigned i = 0; i < 64; i++) {
			buf = ops->buf_get(a);
			assert_int_equal(ops->post_recv(qa, q, &buf, 1), 1);
		}
	flows_arrive(a, qa, b, qb, per_queue);
	assert_true(per_queue[0] > 0 && per_queue[1] > 0);

	/* Queue 1's receive WQ fails: its 64 receives flush; queue 0 is untouched. */
	assert_int_equal(vsim_test_fault("nodeA", qpn, 1, true), 0);
	assert_true(event_wait(a, IBP_EVENT_WQ_FATAL, &ev, 2000));
	assert_ptr_equal(ev.qp, qa);
	buf = ops->buf_get(a);
	assert_int_equal(ops->post_recv(qa, 1, &buf, 1), -EIO);
	ops->buf_put(a, buf);
	assert_int_equal(ops->qp_recover(qa), 1);
	assert_int_equal(ops->qp_num(qa), qpn);
	assert_int_equal(pool_free(a), N_BUFS * 3 - 128); /* each queue full again */
	for (unsigned q = 0; q < 2; q++) {
		buf = ops->buf_get(a);
		assert_int_equal(ops->post_recv(qa, q, &buf, 1), -ENOMEM);
		ops->buf_put(a, buf);
	}
	flows_arrive(a, qa, b, qb, per_queue);
	assert_true(per_queue[0] > 0 && per_queue[1] > 0); /* the same flows on queue 1 */

	/* Queue 0's send QP fails (QP_FATAL of a send QP): sends of both queues leave
	 * again afterwards, with the QP's number; the receives were not touched. */
	assert_int_equal(vsim_test_fault("nodeA", qpn, 0, false), 0);
	assert_true(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 2000));
	assert_ptr_equal(ev.qp, qa);
	assert_int_equal(ops->qp_recover(qa), 1);
	assert_int_equal(pool_free(a), N_BUFS * 3 - 128);
	spread_pair_end(a, qa, b, qb, 0x61);
}

/* A UD QP over two queues with the shim's RSS QP made as IBVSIM_RSS_QP_MODIFY says:
 * it comes up, receives the flows of both queues, sends from both with its number, and
 * destroy_qp gives back every buffer. */
static void spread_qp_up_as(const char *rss_qp_modify)
{
	struct ibp_port *a = port_open_queues("nodeA", BUF_SIZE, N_BUFS * 3, 2);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa, *qb = ud_qp(b);
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD, .qkey = QKEY, .send_depth = 32, .recv_depth = 64
	};
	unsigned per_queue[2];

	assert_int_equal(ops->queues(a), 2);
	setenv("IBVSIM_RSS_QP_MODIFY", rss_qp_modify, 1);
	assert_int_equal(ops->create_qp(a, &qi, &qa), 0);
	unsetenv("IBVSIM_RSS_QP_MODIFY");
	assert_int_equal(ops->qp_ready(qa, NULL), 0);
	for (unsigned q = 0; q < 2; q++)
		for (unsigned i = 0; i < 64; i++) {
			struct ibp_buf *buf = ops->buf_get(a);

			assert_int_equal(ops->post_recv(qa, q, &buf, 1), 1);
		}
	flows_arrive(a, qa, b, qb, per_queue);
	assert_true(per_queue[0] > 0 && per_queue[1] > 0);
	spread_pair_end(a, qa, b, qb, 0x71);
}

/* The RSS QP's modify refused as mlx5 refuses it (rdma-core's mlx5_modify_qp:
 * EOPNOTSUPP, ENOSYS before v28) is no error: the QP comes up as one that is modified;
 * any other refusal of its modify, or of a send QP's, fails qp_ready. */
static void spread_qp_rss_modify_refused(void **state)
{
	struct ibp_port *a;
	struct ibp_qp *qa;
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD, .qkey = QKEY, .send_depth = 32, .recv_depth = 64
	};
	(void)state;

	spread_qp_up_as("0");      /* EOPNOTSUPP, the shim's default */
	spread_qp_up_as("enosys"); /* ENOSYS */
	spread_qp_up_as("1");      /* modified like any UD QP */

	a = port_open_queues("nodeA", BUF_SIZE, N_BUFS, 2);
	for (int modifiable = 0; modifiable < 2; modifiable++) {
		setenv("IBVSIM_RSS_QP_MODIFY", modifiable ? "1" : "0", 1);
		assert_int_equal(ops->create_qp(a, &qi, &qa), 0);
		unsetenv("IBVSIM_RSS_QP_MODIFY");
		/* EIO from RESET -> INIT: of the RSS QP when it is modified, else of the
		 * first send QP. */
		setenv("IBVSIM_FAULT_MODIFY_QP", "5", 1);
		assert_int_equal(ops->qp_ready(qa, NULL), -EIO);
		unsetenv("IBVSIM_FAULT_MODIFY_QP");
		ops->destroy_qp(qa);
		assert_int_equal(pool_free(a), N_BUFS);
	}
	ops->close(a);
}

static void ud_qp_recovery_failure_reported(void **state)
{
	struct ibp_port *a = port_open("nodeA", BUF_SIZE, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	struct ibp_event ev;
	(void)state;

	post_recvs(a, qa, NULL, 32);
	assert_int_equal(vsim_test_fault("nodeA", ops->qp_num(qa), 0, false), 0);
	assert_true(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 2000));

	/* The HCA will not take it out of RESET: reported, the flushed buffers back
	 * anyway, the QP still refusing posts. */
	setenv("IBVSIM_FAULT_MODIFY_QP", "5", 1); /* EIO */
	assert_int_equal(ops->qp_recover(qa), -EIO);
	assert_int_equal(pool_free(a), N_BUFS);
	posts_refused(a, qa, 0);
	assert_int_equal(ops->qp_recover(qa), -EIO); /* again: the same */
	unsetenv("IBVSIM_FAULT_MODIFY_QP");

	/* A later try works. */
	assert_int_equal(ops->qp_recover(qa), 1);
	assert_int_equal(pool_free(a), N_BUFS - 32);
	ud_both_ways(a, qa, 0, b, qb, 0x7e);

	ud_pair_free(a, qa, b, qb);
}

/* Errors told by a completion only, no event (qp_recover asks the provider): a UD send
 * above the port's MTU leaves the QP in SQE; a datagram longer than the receive buffer
 * puts it in ERR. */
static void ud_qp_error_by_completion_recovers(void **state)
{
	struct ibp_port *a = port_open("nodeA", IBP_GRH_AREA + 256, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	uint32_t qpn = ops->qp_num(qa);
	struct ibp_ah *to_a = ah_to(b, 1);
	struct ibp_wc wc[8];
	struct ibp_event ev;
	unsigned flushed = 0;
	(void)state;

	/* SQE: the send fails, the next one flushes; back to RTS, the same QP sends. */
	post_recvs(b, qb, NULL, 1);
	send_one(b, qb, to_a, qpn, 64, 0); /* a's QP is fine (nothing received: no WQE) */
	assert_int_equal(wait_wcs(b, wc, 1, 2000), 1);
	send_one(b, qb, to_a, qpn, 3000, 0x31); /* above the 2048-octet MTU */
	assert_int_equal(wait_wcs(b, wc, 1, 2000), 1);
	assert_int_equal(wc[0].status, IBP_WC_LOCAL_ERROR);
	send_one(b, qb, to_a, qpn, 64, 0x32);
	assert_int_equal(wait_wcs(b, wc, 1, 2000), 1);
	assert_int_equal(wc[0].status, IBP_WC_FLUSHED);
	assert_false(event_wait(b, IBP_EVENT_QP_FATAL, &ev, 50));
	assert_int_equal(ops->qp_recover(qb), 1);
	assert_int_equal(ops->qp_recover(qb), 0);

	/* ERR: a receive too long; its other receives flushed, reported as usual. */
	post_recvs(a, qa, NULL, 8);
	send_one(b, qb, to_a, qpn, 1000, 0x5a);
	assert_int_equal(wait_wcs(b, wc, 1, 2000), 1);
	assert_int_equal(wc[0].status, IBP_WC_OK); /* the SQE send QP sends again */
	assert_int_equal(wait_wcs(a, wc, 8, 2000), 8);
	assert_int_equal(wc[0].status, IBP_WC_LOCAL_ERROR);
	for (unsigned i = 1; i < 8; i++)
		flushed += wc[i].status == IBP_WC_FLUSHED;
	assert_int_equal(flushed, 7);
	assert_false(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 50));
	assert_int_equal(ops->qp_recover(qa), 1);
	assert_int_equal(ops->qp_num(qa), qpn);
	assert_int_equal(pool_free(a), N_BUFS - 32); /* the whole receive queue posted */
	ud_both_ways_len(a, qa, 0, b, qb, 0x6d, 200);
	assert_int_equal(ops->qp_recover(qa), 0);

	ops->destroy_ah(to_a);
	ops->destroy_qp(qa);
	assert_int_equal(pool_free(a), N_BUFS);
	ops->destroy_qp(qb);
	assert_int_equal(pool_free(b), N_BUFS);
	ops->close(a);
	ops->close(b);
}

/* A worker polls and reposts (as engine/worker.c does, through the ops) while
 * datagrams come and the control thread brings the failed QP back: every buffer ends
 * up in the pool or posted, none twice (the pool would refuse a second put). */
struct poller {
	struct ibp_port *p;
	struct ibp_qp *qp;
	atomic_bool stop;
	atomic_uint recvs_ok, refused;
};

static void *poller_run(void *arg)
{
	struct poller *w = arg;
	struct ibp_wc wc[16];

	while (!atomic_load(&w->stop)) {
		int n = ops->poll(w->p, 0, wc, 16);

		for (int i = 0; i < n; i++) {
			if (wc[i].kind == IBP_WC_SEND) {
				ops->buf_put(w->p, wc[i].buf);
				continue;
			}
			if (wc[i].status == IBP_WC_OK)
				atomic_fetch_add(&w->recvs_ok, 1);
			if (ops->post_recv(w->qp, 0, &wc[i].buf, 1) != 1) {
				atomic_fetch_add(&w->refused, 1);
				ops->buf_put(w->p, wc[i].buf);
			}
		}
		if (n <= 0)
			usleep(200);
	}
	return NULL;
}

/* n datagrams b -> qa, each sent once the previous one's send completed. */
static void burst_to(struct ibp_port *b, struct ibp_qp *qb, struct ibp_ah *ah, struct ibp_qp *qa,
		     unsigned n)
{
	struct ibp_wc wc;

	for (unsigned i = 0; i < n; i++) {
		send_one(b, qb, ah, ops->qp_num(qa), 64, (uint8_t)i);
		assert_int_equal(wait_wcs(b, &wc, 1, 2000), 1);
	}
}

static bool recvs_reach(struct poller *w, unsigned n)
{
	uint64_t end = now_ms() + 2000;

	while (atomic_load(&w->recvs_ok) < n && now_ms() < end)
		usleep(1000);
	return atomic_load(&w->recvs_ok) >= n;
}

static void ud_qp_recovers_beside_its_poller(void **state)
{
	struct ibp_port *a = port_open("nodeA", BUF_SIZE, N_BUFS);
	struct ibp_port *b = port_open("nodeB", BUF_SIZE, N_BUFS);
	struct ibp_qp *qa = ud_qp(a), *qb = ud_qp(b);
	struct poller w = { .p = a, .qp = qa };
	struct ibp_ah *ah = ah_to(b, 1);
	struct ibp_event ev;
	unsigned before;
	pthread_t t;
	(void)state;

	post_recvs(a, qa, NULL, 32);
	assert_int_equal(pthread_create(&t, NULL, poller_run, &w), 0);
	for (unsigned round = 0; round < 3; round++) {
		before = atomic_load(&w.recvs_ok);
		burst_to(b, qb, ah, qa, 10);
		assert_true(recvs_reach(&w, before + 10));
		/* Five more still on their way (or being reposted) when the QP fails: what
		 * lands after the error is lost, as on an HCA. */
		burst_to(b, qb, ah, qa, 5);
		assert_int_equal(vsim_test_fault("nodeA", ops->qp_num(qa), 0, false), 0);
		assert_true(event_wait(a, IBP_EVENT_QP_FATAL, &ev, 2000));
		assert_int_equal(ops->qp_recover(qa), 1);
		usleep(20000);
		before = atomic_load(&w.recvs_ok);
		burst_to(b, qb, ah, qa, 10);
		assert_true(recvs_reach(&w, before + 10)); /* all received again */
	}
	atomic_store(&w.stop, true);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(atomic_load(&w.recvs_ok) <= 3 * 25);
	ops->destroy_ah(ah);
	ops->destroy_qp(qa);
	assert_int_equal(pool_free(a), N_BUFS);
	ops->destroy_qp(qb);
	ops->close(a);
	ops->close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(ud_qp_error_recovers, teardown),
		cmocka_unit_test_teardown(rc_qp_error_recovers, teardown),
		cmocka_unit_test_teardown(cq_holds_the_whole_pool, teardown),
		cmocka_unit_test_teardown(cq_overrun_recovers, teardown),
		cmocka_unit_test_teardown(port_down_recovers, teardown),
		cmocka_unit_test_teardown(reg_mr_failure_recovers, teardown),
		cmocka_unit_test_teardown(ud_queues_spread_flows, teardown),
		cmocka_unit_test_teardown(spread_qp_refused_falls_back, teardown),
		cmocka_unit_test_teardown(one_queue_without_rss, teardown),
		cmocka_unit_test_teardown(ud_qp_fatal_recovers, teardown),
		cmocka_unit_test_teardown(ud_wq_fatal_recovers, teardown),
		cmocka_unit_test_teardown(spread_qp_rss_modify_refused, teardown),
		cmocka_unit_test_teardown(ud_qp_recovery_failure_reported, teardown),
		cmocka_unit_test_teardown(ud_qp_error_by_completion_recovers, teardown),
		cmocka_unit_test_teardown(ud_qp_recovers_beside_its_poller, teardown),
	};

	return cmocka_run_group_tests(tests, vsim_fabric_setup, vsim_fabric_teardown);
}
