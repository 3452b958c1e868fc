/*
 * Unit tests of libibverbs2sim (sim/verbs/vsim_*.c, docs/verbs-sim.md): the verbs API
 * as the shim emulates it, driven through plain ibv_* calls against a real ibgw-fabric
 * started for the test (build/bin/ibgw-fabric on a socket in a temporary directory).
 * The two nodes are described with vsim_test_set_nodes (no umad2sim here).
 *
 * Checks: the ibv_modify_qp transitions and attribute masks the IBA allows and forbids
 * (UD and RC), posts refused before RTS, UD delivery with the 40-octet GRH area, Q_Key
 * (own Q_Key through the high bit), lkey checks on sends and receives, flush on ERR
 * and QP_LAST_WQE_REACHED, one CQ event per arm, unsignaled sends, CQ overrun
 * (CQ_ERR, QP_FATAL), RC delivery and RNR retry exhaustion, port events; the CM MAD
 * carrier under libibumad (vsim_gsi.c) against a raw fabric client as the peer: the
 * wire packet of a umad_send (SL, P_Key, QP1, Q_Key), and a QP1 packet's way to
 * umad_recv (SLID, SL, P_Key index, GRH, the eventfd). RSS (vsim_wq.c): the Toeplitz
 * hash against Microsoft's verification vectors and a reference, ibv_query_device_ex
 * and IBVSIM_RSS=0, the WQ state machine and the EBUSY rules, flows spread over two
 * WQs as the reference hash says (ARP to entry 0, a WQ not RDY drops), multicast to the
 * RSS QP, a WQ receive error, an RSS QP as mlx5 makes it (never modified: its WQs and
 * its send QP's Q_Key), source-QPN send QPs, and two worker threads on their own
 * WQs, CQs and channels while the other node sends. Faults on demand: a UD QP to ERR
 * (QP_FATAL) and back with its QPN and multicast, a QP kept in RESET, a WQ to ERR
 * (WQ_FATAL) and back, an RSS QP's send QP, the fault file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>

#include <infiniband/umad.h>

#include "lib/ib_hdr.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "sim/verbs/vsim.h"
#include "test/unit/vsim_fabric.h"
#include "sim/verbs/vsim_gsi.h"
#include "sim/verbs/vsim_pvt.h" /* vsim_rss_hash, checked against the reference */

#define BUF_LEN (1 << 20)
#define QKEY    0x11111111u

/* One node's verbs objects. */
struct end {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	uint8_t *buf;
	uint16_t lid;
};

static void end_open(struct end *e, int which, int cqe)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_port_attr pa;

	assert_non_null(list);
	e->ctx = ibv_open_device(list[which]);
	ibv_free_device_list(list);
	assert_non_null(e->ctx);
	assert_int_equal(ibv_query_port(e->ctx, 1, &pa), 0);
	e->lid = pa.lid;
	e->pd = ibv_alloc_pd(e->ctx);
	assert_non_null(e->pd);
	e->buf = calloc(1, BUF_LEN);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	assert_non_null(e->mr);
	e->ch = ibv_create_comp_channel(e->ctx);
	assert_non_null(e->ch);
	assert_int_equal(fcntl(e->ch->fd, F_SETFL, O_NONBLOCK), 0);
	e->cq = ibv_create_cq(e->ctx, cqe, e, e->ch, 0);
	assert_non_null(e->cq);
}

static void end_close(struct end *e)
{
	assert_int_equal(ibv_destroy_cq(e->cq), 0);
	assert_int_equal(ibv_destroy_comp_channel(e->ch), 0);
	assert_int_equal(ibv_dereg_mr(e->mr), 0);
	assert_int_equal(ibv_dealloc_pd(e->pd), 0);
	assert_int_equal(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

/* Poll until n completions or 2 s; returns how many. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	int got = 0;

	for (int i = 0; i < 2000 && got < n; i++) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		assert_true(r >= 0);
		got += r;
		if (got < n)
			usleep(1000);
	}
	return got;
}

static struct ibv_qp *ud_qp(struct end *e, struct ibv_srq *srq, int sig_all, bool ready)
{
	struct ibv_qp_init_attr ia = { .send_cq = e->cq,
				       .recv_cq = e->cq,
				       .srq = srq,
				       .qp_type = IBV_QPT_UD,
				       .sq_sig_all = sig_all,
				       .cap = { .max_send_wr = 8,
						.max_recv_wr = 8,
						.max_send_sge = 2,
						.max_recv_sge = 2,
						.max_inline_data = 64 } };
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	assert_non_null(qp);
	if (!ready)
		return qp;
	assert_int_equal(
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	return qp;
}

static void post_recv(struct ibv_qp *qp, struct end *e, size_t off, uint32_t len, uint32_t lkey,
		      uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(e->buf + off), .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	assert_int_equal(ibv_post_recv(qp, &wr, &bad), 0);
}

static int send_ud(struct ibv_qp *qp, struct end *e, struct ibv_ah *ah, uint32_t dqpn,
		   uint32_t qkey, size_t off, uint32_t len, uint32_t lkey, uint64_t wr_id,
		   int flags)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(e->buf + off), .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = (unsigned)flags },
			   *bad = NULL;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

static struct ibv_ah *ah_to(struct end *from, uint16_t dlid)
{
	struct ibv_ah_attr a = { .dlid = dlid, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(from->pd, &a);

	assert_non_null(ah);
	return ah;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

/* The next async event within 2 s, of type want (others are acked and skipped). */
static bool async_wait(struct ibv_context *ctx, enum ibv_event_type want,
		       struct ibv_async_event *out)
{
	fcntl(ctx->async_fd, F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 2000; i++) {
		struct ibv_async_event e;

		if (ibv_get_async_event(ctx, &e) == 0) {
			if (e.event_type == want) {
				*out = e;
				return true;
			}
			ibv_ack_async_event(&e);
			continue;
		}
		usleep(1000);
	}
	return false;
}

/* QP_FATAL for qp within 2 s (acked), and qp in ERR. */
static void qp_fatal_seen(struct ibv_context *ctx, struct ibv_qp *qp)
{
	struct ibv_async_event ev;

	assert_true(async_wait(ctx, IBV_EVENT_QP_FATAL, &ev));
	assert_ptr_equal(ev.element.qp, qp);
	ibv_ack_async_event(&ev);
	assert_int_equal(qp_state(qp), IBV_QPS_ERR);
}

/* --- tests --------------------------------------------------------------------------- */

static void devices_and_ports(void **state)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	__be16 pkey;
	(void)state;

	assert_int_equal(n, 2);
	assert_string_equal(ibv_get_device_name(list[0]), "nodeA");
	assert_string_equal(ibv_get_device_name(list[1]), "nodeB");
	ctx = ibv_open_device(list[1]);
	ibv_free_device_list(list);
	assert_non_null(ctx);
	assert_int_equal(ibv_query_device(ctx, &da), 0);
	assert_int_equal(da.phys_port_cnt, 1);
	assert_int_equal(da.max_qp_wr, 32768);
	assert_int_equal(da.max_pkeys, 128);
	assert_int_equal(ibv_query_port(ctx, 1, &pa), 0);
	assert_int_equal(pa.state, IBV_PORT_ACTIVE);
	assert_int_equal(pa.lid, 2);
	assert_int_equal(pa.active_mtu, IBV_MTU_2048);
	assert_int_equal(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
	assert_int_equal(pa.pkey_tbl_len, 128);
	assert_int_not_equal(ibv_query_port(ctx, 2, &pa), 0);
	assert_int_equal(ibv_query_pkey(ctx, 1, 1, &pkey), 0);
	assert_int_equal(be16toh(pkey), 0x8001);
	assert_int_equal(ibv_query_pkey(ctx, 1, 5, &pkey), 0);
	assert_int_equal(pkey, 0);
	assert_int_equal(ibv_query_gid(ctx, 1, 0, &gid), 0);
	assert_int_equal(be64toh(gid.global.interface_id), 0x0002c90300000002ull);
	assert_int_equal(ibv_close_device(ctx), 0);
}

static void ud_state_machine(void **state)
{
	struct end e;
	struct ibv_qp *qp;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_ah *ah;
	(void)state;

	end_open(&e, 0, 64);
	qp = ud_qp(&e, NULL, 1, false);
	ah = ah_to(&e, 2);
	assert_int_equal(qp_state(qp), IBV_QPS_RESET);
	/* RESET -> INIT needs P_Key index, port and Q_Key on UD. */
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT),
			 EINVAL);
	assert_int_equal(qp_state(qp), IBV_QPS_RESET);
	/* ... and nothing that belongs to RC. */
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					   IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS),
			 EINVAL);
	/* A post_recv in RESET is refused. */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)e.buf, .length = 64, .lkey = e.mr->lkey };
		struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

		assert_int_equal(ibv_post_recv(qp, &wr, &bad), EINVAL);
		assert_ptr_equal(bad, &wr);
	}
	assert_int_equal(
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	assert_int_equal(qp_state(qp), IBV_QPS_INIT);
	/* INIT -> RTS skips RTR: refused. */
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	/* Sends before RTS are refused at post, in INIT and in RTR. */
	assert_int_equal(send_ud(qp, &e, ah, 2, QKEY, 0, 16, e.mr->lkey, 1, 0), EINVAL);
	a.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(send_ud(qp, &e, ah, 2, QKEY, 0, 16, e.mr->lkey, 1, 0), EINVAL);
	/* RTR -> RTS needs the SQ PSN; a path MTU is no UD attribute. */
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	a.path_mtu = IBV_MTU_1024;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_PATH_MTU),
			 EINVAL);
	assert_int_equal(qp_state(qp), IBV_QPS_RTR);
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	/* A wrong current state is refused; RTS -> RTS with a new Q_Key is fine. */
	a.cur_qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), EINVAL);
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_QKEY), 0);
	/* Any state -> ERR; ERR -> RTS is not a transition; ERR -> RESET -> ERR are. */
	a.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	a.qp_state = IBV_QPS_RESET;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	assert_int_equal(qp_state(qp), IBV_QPS_ERR);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	end_close(&e);
}

static struct ibv_qp *rc_qp(struct end *e, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 }
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &ia);

	assert_non_null(qp);
	return qp;
}

/* RESET -> INIT -> RTR -> RTS for an RC QP towards (dlid, dqpn). */
static void rc_connect(struct ibv_qp *qp, uint16_t dlid, uint32_t dqpn, uint8_t rnr_retry)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	assert_int_equal(
	    ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = 100;
	a.min_rnr_timer = 1; /* 0.01 ms */
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
			 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = rnr_retry;
	assert_int_equal(ibv_modify_qp(qp, &a,
				       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					   IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					   IBV_QP_MAX_QP_RD_ATOMIC),
			 0);
}

static void rc_state_machine_and_rnr(void **state)
{
	struct end a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_srq *srq;
	struct ibv_qp_attr x = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 5 };
	struct ibv_wc wc[4];
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	srq = ibv_create_srq(b.pd, &si);
	assert_non_null(srq);
	qa = rc_qp(&a, NULL);
	qb = rc_qp(&b, srq);
	/* RC's INIT wants access flags, not a Q_Key. */
	assert_int_equal(
	    ibv_modify_qp(qa, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	    EINVAL);
	assert_int_equal(
	    ibv_modify_qp(qa, &x,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
	    0);
	/* INIT -> RTR without the minimum RNR timer: refused. */
	x.qp_state = IBV_QPS_RTR;
	x.path_mtu = IBV_MTU_1024;
	x.dest_qp_num = qb->qp_num;
	x.ah_attr.dlid = 2;
	x.ah_attr.port_num = 1;
	assert_int_equal(ibv_modify_qp(qa, &x,
				       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC),
			 EINVAL);
	assert_int_equal(qp_state(qa), IBV_QPS_INIT);
	x.qp_state = IBV_QPS_RESET;
	assert_int_equal(ibv_modify_qp(qa, &x, IBV_QP_STATE), 0);
	/* Connected both ways; A allows one RNR retry. */
	rc_connect(qa, 2, qb->qp_num, 1);
	rc_connect(qb, 1, qa->qp_num, 7);
	/* B's SRQ has one buffer: A's first message lands, the second meets RNR NAKs
	 * until A's RNR retries run out. */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)b.buf,
				       .length = 4096,
				       .lkey = b.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 77, .sg_list = &sge, .num_sge = 1 }, *bad;

		assert_int_equal(ibv_post_srq_recv(srq, &wr, &bad), 0);
	}
	memset(a.buf, 0x5a, 3000);
	for (int i = 0; i < 2; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)a.buf,
				       .length = 3000,
				       .lkey = a.mr->lkey };
		struct ibv_send_wr wr = { .wr_id = 10 + (uint64_t)i,
					  .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND },
				   *bad;

		assert_int_equal(ibv_post_send(qa, &wr, &bad), 0);
	}
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].wr_id, 77);
	assert_int_equal(wc[0].byte_len, 3000); /* three 1024-octet packets, reassembled */
	assert_int_equal(wc[0].qp_num, qb->qp_num);
	assert_int_equal(wc[0].src_qp, qa->qp_num);
	assert_int_equal(b.buf[2999], 0x5a);
	assert_int_equal(poll_n(a.cq, wc, 2), 2);
	assert_int_equal(wc[0].wr_id, 10);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[1].wr_id, 11);
	assert_int_equal(wc[1].status, IBV_WC_RNR_RETRY_EXC_ERR);
	/* The error moved A's QP to ERR: a later send is flushed. */
	assert_int_equal(qp_state(qa), IBV_QPS_ERR);
	{
		struct ibv_send_wr wr = { .wr_id = 12, .opcode = IBV_WR_SEND }, *bad;

		assert_int_equal(ibv_post_send(qa, &wr, &bad), 0);
		assert_int_equal(poll_n(a.cq, wc, 1), 1);
		assert_int_equal(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	}
	/* B on the SRQ to ERR: Last WQE Reached; the SRQ cannot go while B uses it. */
	x.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(qb, &x, IBV_QP_STATE), 0);
	{
		struct ibv_async_event ev;

		assert_true(async_wait(b.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &ev));
		assert_ptr_equal(ev.element.qp, qb);
		/* Unacked, the QP cannot be destroyed (libibverbs would wait forever). */
		assert_int_equal(ibv_destroy_qp(qb), EBUSY);
		ibv_ack_async_event(&ev);
	}
	assert_int_equal(ibv_destroy_srq(srq), EBUSY);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	assert_int_equal(ibv_destroy_srq(srq), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	end_close(&a);
	end_close(&b);
}

static void ud_delivery_qkey_and_lkeys(void **state)
{
	struct end a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_ah *ah;
	struct ibv_wc wc[8];
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	qa = ud_qp(&a, NULL, 1, true);
	qb = ud_qp(&b, NULL, 1, true);
	ah = ah_to(&a, b.lid);
	for (int i = 0; i < 4; i++)
		post_recv(qb, &b, (size_t)i * 4096, 4096, b.mr->lkey, 100 + (uint64_t)i);
	memcpy(a.buf, "hello, verbs", 12);
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, 0, 12, a.mr->lkey, 1, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].wr_id, 1);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].wr_id, 100);
	assert_int_equal(wc[0].byte_len, 40 + 12); /* the GRH area counts */
	assert_int_equal(wc[0].src_qp, qa->qp_num);
	assert_int_equal(wc[0].slid, a.lid);
	assert_int_equal(wc[0].wc_flags & IBV_WC_GRH, 0);
	assert_memory_equal(b.buf + 40, "hello, verbs", 12);
	/* A wrong Q_Key is dropped by the receiver's HCA; the high bit means "the
	 * sending QP's own", which matches. */
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, 0x1234, 0, 12, a.mr->lkey, 2, 0), 0);
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, 0x80000000u, 0, 12, a.mr->lkey, 3, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 2), 2);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].wr_id, 101);
	usleep(50000);
	assert_int_equal(ibv_poll_cq(b.cq, 8, wc), 0);
	/* A send whose lkey names no MR: LOC_PROT_ERR, and UD's send queue goes to SQE;
	 * what is posted after flushes. */
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, 0, 12, a.mr->lkey + 1, 4, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_LOC_PROT_ERR);
	assert_int_equal(qp_state(qa), IBV_QPS_SQE);
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, 0, 12, a.mr->lkey, 5, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	{
		struct ibv_qp_attr x = { .qp_state = IBV_QPS_RTS };

		assert_int_equal(ibv_modify_qp(qa, &x, IBV_QP_STATE), 0); /* SQE -> RTS */
	}
	/* A send beyond the MR: LOC_PROT_ERR too. */
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, BUF_LEN - 8, 12, a.mr->lkey, 6, 0),
			 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_LOC_PROT_ERR);
	/* B's next receive buffer is too small for 40 + 2000 octets: LOC_LEN_ERR, B to
	 * ERR, its other receives flush. */
	{
		struct ibv_qp_attr x = { .qp_state = IBV_QPS_RTS };

		assert_int_equal(ibv_modify_qp(qa, &x, IBV_QP_STATE), 0);
	}
	assert_int_equal(ibv_destroy_qp(qb), 0);
	qb = ud_qp(&b, NULL, 1, true);
	post_recv(qb, &b, 0, 1000, b.mr->lkey, 200);
	post_recv(qb, &b, 4096, 4096, b.mr->lkey, 201);
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, 0, 2000, a.mr->lkey, 7, 0), 0);
	assert_int_equal(poll_n(b.cq, wc, 2), 2);
	assert_int_equal(wc[0].wr_id, 200);
	assert_int_equal(wc[0].status, IBV_WC_LOC_LEN_ERR);
	assert_int_equal(wc[1].wr_id, 201);
	assert_int_equal(wc[1].status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(qp_state(qb), IBV_QPS_ERR);
	/* A receive buffer outside any MR: LOC_PROT_ERR when the packet lands. */
	assert_int_equal(ibv_destroy_qp(qb), 0);
	qb = ud_qp(&b, NULL, 1, true);
	post_recv(qb, &b, 0, 4096, b.mr->lkey ^ 0x100, 300);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(send_ud(qa, &a, ah, qb->qp_num, QKEY, 0, 100, a.mr->lkey, 8, 0), 0);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_LOC_PROT_ERR);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	end_close(&a);
	end_close(&b);
}

/*
 * A UD send waits while the port's ring to the fabric is full, as an HCA's waits for link
 * credits, instead of being lost: with the fabric stopped, the first sends fill the ring
 * and complete (they are on the wire), the next wait in the send queue without a
 * completion, and a post beyond the queue fails with ENOMEM. Once the fabric runs again
 * the waiting sends leave and complete in order, and the receiver gets every datagram
 * in the order posted.
 */
static void ud_send_waits_for_the_ring(void **state)
{
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 8,
						.max_recv_wr = 2048,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	static struct ibv_wc wc[2048];
	struct end a, b;
	struct ibv_qp *qa, *qb;
	struct ibv_ah *ah;
	int posted, done_stopped, late_stopped, done, r = 0;
	(void)state;

	end_open(&a, 0, 4096);
	end_open(&b, 1, 4096);
	qa = ud_qp(&a, NULL, 1, true);
	ia.send_cq = ia.recv_cq = b.cq;
	qb = ibv_create_qp(b.pd, &ia);
	assert_non_null(qb);
	assert_int_equal(
	    ibv_modify_qp(qb, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	    0);
	at.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qb, &at, IBV_QP_STATE), 0);
	for (int i = 0; i < 2048; i++)
		post_recv(qb, &b, (size_t)i * 64, 64, b.mr->lkey, (uint64_t)i);
	ah = ah_to(&a, b.lid);

	assert_int_equal(kill(vsim_fabric_pid, SIGSTOP), 0);
	for (posted = 0; posted < 2000; posted++) {
		memcpy(a.buf + (size_t)posted * 4, &posted, 4);
		r = send_ud(qa, &a, ah, qb->qp_num, QKEY, (size_t)posted * 4, 4, a.mr->lkey,
			    (uint64_t)posted, 0);
		if (r)
			break;
	}
	done_stopped = ibv_poll_cq(a.cq, 2048, wc);
	usleep(50000);
	late_stopped = ibv_poll_cq(a.cq, 8, wc + (done_stopped > 0 ? done_stopped : 0));
	assert_int_equal(kill(vsim_fabric_pid, SIGCONT), 0);

	assert_int_equal(r, ENOMEM);
	assert_int_equal(late_stopped, 0);
	assert_int_equal(done_stopped, posted - 8); /* the ring's slots; 8 wait */
	assert_true(posted > 8);
	done = done_stopped + poll_n(a.cq, wc + done_stopped, 8);
	assert_int_equal(done, posted);
	for (int i = 0; i < posted; i++) {
		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, (uint64_t)i);
	}
	assert_int_equal(poll_n(b.cq, wc, posted), posted);
	for (int i = 0; i < posted; i++) {
		int got;

		assert_int_equal(wc[i].status, IBV_WC_SUCCESS);
		assert_int_equal(wc[i].wr_id, (uint64_t)i);
		memcpy(&got, b.buf + (size_t)i * 64 + 40, 4);
		assert_int_equal(got, i);
	}

	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	end_close(&a);
	end_close(&b);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static void cq_events_and_signaling(void **state)
{
	struct end a;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_cq *cq;
	void *cq_ctx;
	struct ibv_wc wc[4];
	(void)state;

	end_open(&a, 0, 64);
	qp = ud_qp(&a, NULL, 0, true); /* sq_sig_all off */
	ah = ah_to(&a, 2);
	assert_int_equal(ibv_req_notify_cq(a.cq, 0), 0);
	assert_int_equal(ibv_get_cq_event(a.ch, &cq, &cq_ctx), -1);
	assert_int_equal(errno, EAGAIN);
	/* An unsignaled send completes silently: no CQE, no event. */
	assert_int_equal(send_ud(qp, &a, ah, 0x50, QKEY, 0, 8, a.mr->lkey, 1, 0), 0);
	assert_false(readable(a.ch->fd, 50));
	assert_int_equal(ibv_poll_cq(a.cq, 4, wc), 0);
	/* A signaled one: one event, for this CQ and its context. */
	assert_int_equal(send_ud(qp, &a, ah, 0x50, QKEY, 0, 8, a.mr->lkey, 2, IBV_SEND_SIGNALED),
			 0);
	assert_true(readable(a.ch->fd, 1000));
	assert_int_equal(ibv_get_cq_event(a.ch, &cq, &cq_ctx), 0);
	assert_ptr_equal(cq, a.cq);
	assert_ptr_equal(cq_ctx, &a);
	/* One event per arm: another completion before re-arming raises none. */
	assert_int_equal(send_ud(qp, &a, ah, 0x50, QKEY, 0, 8, a.mr->lkey, 3, IBV_SEND_SIGNALED),
			 0);
	assert_false(readable(a.ch->fd, 50));
	assert_int_equal(poll_n(a.cq, wc, 2), 2);
	assert_int_equal(wc[0].wr_id, 2);
	assert_int_equal(wc[1].wr_id, 3);
	/* An unacked event keeps the CQ alive (libibverbs would wait forever). */
	assert_int_equal(ibv_destroy_qp(qp), 0);
	assert_int_equal(ibv_destroy_cq(a.cq), EBUSY);
	ibv_ack_cq_events(a.cq, 1);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	end_close(&a);
}

static void cq_overrun(void **state)
{
	struct end a;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_async_event ev;
	(void)state;

	end_open(&a, 0, 1); /* one entry */
	assert_int_equal(a.cq->cqe, 1);
	qp = ud_qp(&a, NULL, 1, true);
	ah = ah_to(&a, 2);
	for (int i = 0; i < 3; i++)
		assert_int_equal(send_ud(qp, &a, ah, 0x50, QKEY, 0, 8, a.mr->lkey, (uint64_t)i, 0),
				 0);
	assert_true(async_wait(a.ctx, IBV_EVENT_CQ_ERR, &ev));
	assert_ptr_equal(ev.element.cq, a.cq);
	ibv_ack_async_event(&ev);
	qp_fatal_seen(a.ctx, qp);
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(qp), 0);
	end_close(&a);
}

static void port_events(void **state)
{
	struct end a;
	struct ibv_async_event ev;
	struct ibv_port_attr pa;
	struct vsim_test_node changed[2];
	(void)state;

	end_open(&a, 0, 4);
	memcpy(changed, vsim_nodes, sizeof(changed));
	changed[0].port[0].info.lid = 9;
	vsim_test_set_nodes(changed, 2);
	assert_true(async_wait(a.ctx, IBV_EVENT_LID_CHANGE, &ev));
	assert_int_equal(ev.element.port_num, 1);
	ibv_ack_async_event(&ev);
	assert_int_equal(ibv_query_port(a.ctx, 1, &pa), 0);
	assert_int_equal(pa.lid, 9);
	changed[0].port[0].info.pkeys[1] = 0x8002;
	vsim_test_set_nodes(changed, 2);
	assert_true(async_wait(a.ctx, IBV_EVENT_PKEY_CHANGE, &ev));
	ibv_ack_async_event(&ev);
	changed[0].port[0].client_rereg = true;
	vsim_test_set_nodes(changed, 2);
	assert_true(async_wait(a.ctx, IBV_EVENT_CLIENT_REREGISTER, &ev));
	ibv_ack_async_event(&ev);
	changed[0].port[0].state = IBV_PORT_DOWN;
	vsim_test_set_nodes(changed, 2);
	assert_true(async_wait(a.ctx, IBV_EVENT_PORT_ERR, &ev));
	ibv_ack_async_event(&ev);
	assert_int_equal(ibv_query_port(a.ctx, 1, &pa), 0);
	assert_int_equal(pa.state, IBV_PORT_DOWN);
	vsim_test_set_nodes(vsim_nodes, 2);
	assert_true(async_wait(a.ctx, IBV_EVENT_PORT_ACTIVE, &ev));
	ibv_ack_async_event(&ev);
	end_close(&a);
}

/* The peer: a raw fabric client on nodeB's port, what another node's HCA would put
 * on the wire. */
static struct simfab_client *peer_open(void)
{
	struct simfab_client *c;

	assert_int_equal(simfab_client_connect(getenv("IBVSIM_SOCKET"), &c), 0);
	assert_int_equal(simfab_client_hello(c, &vsim_nodes[1].port[0].info), 0);
	return c;
}

static void cm_mad_carrier(void **state)
{
	struct simfab_client *peer;
	struct simfab_event ev;
	struct ib_packet p, q;
	struct end a;
	uint8_t umad[512], wire[512], sent[256], *mad;
	struct pollfd pfd;
	int id, len, ret = -EAGAIN, want_index = 0;
	(void)state;

	end_open(&a, 0, 64); /* nodeA's port 1 on the fabric, LID 1 */
	peer = peer_open();  /* nodeB, LID 2 */
	vsim_gsi_port_opened(100, 1);
	assert_int_equal(vsim_gsi_register(100, 0x03), -ENOENT); /* not the CM: umad's */
	id = vsim_gsi_register(100, 0x07);
	assert_true(id >= 0);
	assert_int_equal(vsim_gsi_register(100, 0x07), -EPERM); /* held, as the kernel */
	assert_true(vsim_gsi_fd(100) >= 0);
	assert_int_equal(vsim_gsi_fd(101), -1);

	/* umad_send: a UD packet from QP1 to the peer's QP1. */
	memset(umad, 0, sizeof(umad));
	mad = umad_get_mad(umad);
	mad[0] = 1, mad[1] = 0x07, mad[2] = 2, mad[3] = 0x03; /* CM Send */
	mad[17] = 0x10;                                       /* REQ */
	mad[100] = 0xab;
	umad_set_addr(umad, 2, 1, 3, (int)IB_QP1_QKEY);
	/* P_Key index 1 (0x8001) where libibumad keeps one: not without the kernel's
	 * P_Key API (old umad ABI, as here without a kernel), where it is index 0. */
	if (umad_size() == sizeof(struct ib_user_mad)) {
		umad_set_pkey(umad, 1);
		want_index = 1;
	}
	assert_int_equal(vsim_gsi_send(100, umad, 256), 0);
	for (int i = 0; i < 200 && ret == -EAGAIN; i++)
		ret = simfab_client_recv(peer, &ev, 10);
	assert_int_equal(ret, 0);
	assert_int_equal(ev.qpn, IB_QP1);
	assert_int_equal(ib_packet_parse(ev.data, ev.len, &p), IB_PKT_OK);
	assert_int_equal(p.lrh.slid, 1);
	assert_int_equal(p.lrh.dlid, 2);
	assert_int_equal(p.lrh.sl, 3);
	assert_false(p.has_grh);
	assert_int_equal(p.bth.opcode, IB_OP_UD_SEND_ONLY);
	assert_int_equal(p.bth.pkey, vsim_nodes[0].port[0].info.pkeys[want_index]);
	assert_int_equal(p.bth.dqpn, IB_QP1);
	assert_int_equal(p.deth.qkey, IB_QP1_QKEY);
	assert_int_equal(p.deth.src_qp, IB_QP1);
	assert_int_equal(p.payload_len, 256);
	assert_memory_equal(p.payload, mad, 256);

	/* A QP1 packet from the peer, with a GRH, reaches umad_recv. */
	memset(&q, 0, sizeof(q));
	q.lrh.sl = 5;
	q.lrh.slid = 2;
	q.lrh.dlid = 1;
	q.has_grh = true;
	q.grh.ipver = IB_GRH_IPVER;
	q.grh.next_hdr = IB_GRH_NXTHDR_BTH;
	q.grh.flow_label = 0x12345;
	q.grh.tclass = 7;
	q.grh.hop_limit = 9;
	ib_gid_set(&q.grh.sgid, 0xfe80000000000000ull, vsim_nodes[1].port[0].info.port_guid);
	ib_gid_set(&q.grh.dgid, 0xfe80000000000000ull, vsim_nodes[0].port[0].info.port_guid);
	q.bth.opcode = IB_OP_UD_SEND_ONLY;
	q.bth.pkey = 0x8001;
	q.bth.dqpn = IB_QP1;
	q.deth.qkey = IB_QP1_QKEY;
	q.deth.src_qp = IB_QP1;
	mad[100] = 0xcd;
	q.payload = mad;
	q.payload_len = 256;
	len = ib_packet_build(&q, wire, sizeof(wire));
	assert_true(len > 0);
	assert_int_equal(simfab_client_send(peer, IB_QP1, wire, (size_t)len), 0);
	pfd = (struct pollfd){ .fd = vsim_gsi_fd(100), .events = POLLIN };
	assert_int_equal(poll(&pfd, 1, 2000), 1); /* the eventfd says a MAD is queued */
	memcpy(sent, mad, sizeof(sent));          /* mad lies in umad */
	memset(umad, 0, sizeof(umad));
	len = 256;
	assert_int_equal(vsim_gsi_recv(100, umad, &len), id);
	assert_int_equal(len, 256);
	assert_memory_equal(umad_get_mad(umad), sent, 256);
	assert_int_equal(sent[100], 0xcd);
	{
		ib_mad_addr_t *ad = umad_get_mad_addr(umad);

		assert_int_equal(be16toh(ad->lid), 2);
		assert_int_equal(ad->sl, 5);
		assert_int_equal(be32toh(ad->qpn), IB_QP1);
		assert_int_equal(umad_get_pkey(umad), want_index); /* the packet's 0x8001 */
		assert_true(ad->grh_present);
		assert_int_equal(be32toh(ad->flow_label), 0x12345);
		assert_int_equal(ad->traffic_class, 7);
		assert_memory_equal(ad->gid, q.grh.sgid.raw, 16);
	}
	len = 256;
	assert_int_equal(vsim_gsi_recv(100, umad, &len), -EAGAIN);
	assert_int_equal(poll(&pfd, 1, 0), 0);

	assert_true(vsim_gsi_unregister(100, id));
	assert_false(vsim_gsi_unregister(100, id));
	vsim_gsi_port_closed(100);
	simfab_client_close(peer);
	end_close(&a);
}

/* --- RSS: WQs, indirection tables, the RSS receive QP, source-QPN send QPs ---------------- */

/* The Microsoft RSS verification suite's key. */
static const uint8_t ms_key[40] = { 0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
				    0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
				    0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
				    0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa };

#define ALL_FIELDS                                                                                 \
	(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |                      \
	 IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |              \
	 IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP)

/* The reference: for every set bit of the input, the 32 key bits from that position
 * (the definition, read bit by bit; the shim's keeps a sliding window). */
static uint32_t ref_toeplitz(const uint8_t *key, const uint8_t *in, size_t n)
{
	uint32_t r = 0;

	for (size_t bit = 0; bit < n * 8; bit++) {
		uint32_t w = 0;

		if (!(in[bit / 8] & (0x80u >> (bit % 8))))
			continue;
		for (size_t j = 0; j < 32; j++) {
			size_t kb = bit + j;

			w = w << 1 | ((key[kb / 8] >> (7 - kb % 8)) & 1u);
		}
		r ^= w;
	}
	return r;
}

/* A flow as the tests send it: IPoIB header, IPv4 or IPv6, TCP or UDP (or another
 * protocol), optionally an IPv4 fragment. */
struct flow {
	bool v6, frag;
	uint8_t proto;
	uint8_t src[16], dst[16];
	uint16_t sport, dport;
};

/* The datagram of flow f carrying seq: built into out, its length returned. */
static size_t flow_build(const struct flow *f, uint32_t seq, uint8_t *out)
{
	size_t n = 0, l4 = f->proto == 6 ? 20 : 8;
	size_t ip = f->v6 ? 40 : 20;
	size_t plen = l4 + 4;

	memset(out, 0, 4 + ip + plen);
	out[0] = f->v6 ? 0x86 : 0x08; /* IPoIB: ethertype, reserved */
	out[1] = f->v6 ? 0xdd : 0x00;
	n = 4;
	if (f->v6) {
		out[n] = 0x60;
		out[n + 4] = (uint8_t)(plen >> 8);
		out[n + 5] = (uint8_t)plen;
		out[n + 6] = f->proto;
		out[n + 7] = 64;
		memcpy(out + n + 8, f->src, 16);
		memcpy(out + n + 24, f->dst, 16);
	} else {
		out[n] = 0x45;
		out[n + 2] = (uint8_t)((ip + plen) >> 8);
		out[n + 3] = (uint8_t)(ip + plen);
		out[n + 6] = f->frag ? 0x20 : 0x40; /* MF (a first fragment) or DF */
		out[n + 8] = 64;
		out[n + 9] = f->proto;
		memcpy(out + n + 12, f->src, 4);
		memcpy(out + n + 16, f->dst, 4);
	}
	n += ip;
	out[n] = (uint8_t)(f->sport >> 8);
	out[n + 1] = (uint8_t)f->sport;
	out[n + 2] = (uint8_t)(f->dport >> 8);
	out[n + 3] = (uint8_t)f->dport;
	n += l4;
	memcpy(out + n, &seq, 4);
	return n + 4;
}

/* What the hash of flow f is, by the reference (all eight fields selected). */
static uint32_t flow_hash(const struct flow *f)
{
	uint8_t in[36];
	size_t n = 0, a = f->v6 ? 16 : 4;

	memcpy(in, f->src, a);
	memcpy(in + a, f->dst, a);
	n = 2 * a;
	if ((f->proto == 6 || f->proto == 17) && !f->frag) {
		in[n++] = (uint8_t)(f->sport >> 8);
		in[n++] = (uint8_t)f->sport;
		in[n++] = (uint8_t)(f->dport >> 8);
		in[n++] = (uint8_t)f->dport;
	}
	return ref_toeplitz(ms_key, in, n);
}

static void flow4(struct flow *f, uint8_t proto, const uint8_t src[4], const uint8_t dst[4],
		  uint16_t sport, uint16_t dport)
{
	memset(f, 0, sizeof(*f));
	f->proto = proto;
	memcpy(f->src, src, 4);
	memcpy(f->dst, dst, 4);
	f->sport = sport;
	f->dport = dport;
}

static void flow6(struct flow *f, uint8_t proto, const char *src, const char *dst, uint16_t sport,
		  uint16_t dport)
{
	memset(f, 0, sizeof(*f));
	f->v6 = true;
	f->proto = proto;
	assert_int_equal(inet_pton(AF_INET6, src, f->src), 1);
	assert_int_equal(inet_pton(AF_INET6, dst, f->dst), 1);
	f->sport = sport;
	f->dport = dport;
}

static void rss_hash_vectors(void **state)
{
	/* Microsoft's verification suite: 66.9.149.187:2794 -> 161.142.100.80:1766. */
	const uint8_t in4[12] = { 66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6 };
	struct flow f;
	uint8_t d[128];
	size_t len;
	(void)state;

	assert_int_equal(ref_toeplitz(ms_key, in4, 8), 0x323e8fc2);
	assert_int_equal(ref_toeplitz(ms_key, in4, 12), 0x51ccc178);
	/* The shim's hash of the same flow as an IPoIB datagram: TCP, all fields, only
	 * the addresses, and as a fragment (no ports). */
	flow4(&f, 6, in4, in4 + 4, 2794, 1766);
	len = flow_build(&f, 1, d);
	assert_int_equal(vsim_rss_hash(ms_key, ALL_FIELDS, d, len), 0x51ccc178);
	assert_int_equal(vsim_rss_hash(ms_key, IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4, d, len),
			 0x323e8fc2);
	/* UDP fields do not take a TCP packet's ports. */
	assert_int_equal(vsim_rss_hash(ms_key,
				       IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 |
					   IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP,
				       d, len),
			 0x323e8fc2);
	f.frag = true;
	len = flow_build(&f, 1, d);
	assert_int_equal(vsim_rss_hash(ms_key, ALL_FIELDS, d, len), 0x323e8fc2);
	/* Truncated: 0. */
	assert_int_equal(vsim_rss_hash(ms_key, ALL_FIELDS, d, 4 + 19), 0);
	/* IPv6: 3ffe:2501:200:1fff::7 port 2794 -> 3ffe:2501:200:3::1 port 1766. */
	flow6(&f, 6, "3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", 2794, 1766);
	len = flow_build(&f, 1, d);
	assert_int_equal(vsim_rss_hash(ms_key, ALL_FIELDS, d, len), 0x40207d3d);
	assert_int_equal(flow_hash(&f), 0x40207d3d);
	assert_int_equal(vsim_rss_hash(ms_key, IBV_RX_HASH_SRC_IPV6 | IBV_RX_HASH_DST_IPV6, d, len),
			 0x2cc18cd5);
	/* ARP: 0. */
	d[0] = 0x08, d[1] = 0x06;
	assert_int_equal(vsim_rss_hash(ms_key, ALL_FIELDS, d, len), 0);
}

static void query_device_ex_caps(void **state)
{
	struct end e;
	struct ibv_device_attr_ex ax;
	struct ibv_wq_init_attr wi;
	struct ibv_qp *plain;
	(void)state;

	end_open(&e, 0, 64);
	assert_int_equal(ibv_query_device_ex(e.ctx, NULL, &ax), 0);
	assert_int_equal(ax.orig_attr.max_qp_wr, 32768);
	assert_int_equal(ax.orig_attr.vendor_part_id, 4119);
	assert_int_equal(ax.rss_caps.supported_qpts, 1u << IBV_QPT_UD);
	assert_int_equal(ax.rss_caps.max_rwq_indirection_tables, 64);
	assert_int_equal(ax.rss_caps.max_rwq_indirection_table_size, 256);
	assert_int_equal(ax.rss_caps.rx_hash_function, IBV_RX_HASH_FUNC_TOEPLITZ);
	assert_int_equal(ax.rss_caps.rx_hash_fields_mask, ALL_FIELDS);
	assert_int_equal(ax.max_wq_type_rq, 64);
	assert_int_equal(ax.tso_caps.max_tso, 0);
	assert_int_equal(ax.odp_caps.general_caps, 0);
	/* IBVSIM_RSS=0: an HCA without UD RSS. */
	setenv("IBVSIM_RSS", "0", 1);
	assert_int_equal(ibv_query_device_ex(e.ctx, NULL, &ax), 0);
	assert_int_equal(ax.orig_attr.max_qp_wr, 32768);
	assert_int_equal(ax.rss_caps.supported_qpts, 0);
	assert_int_equal(ax.rss_caps.max_rwq_indirection_tables, 0);
	assert_int_equal(ax.rss_caps.rx_hash_fields_mask, 0);
	assert_int_equal(ax.max_wq_type_rq, 0);
	wi = (struct ibv_wq_init_attr){
		.wq_type = IBV_WQT_RQ, .max_wr = 4, .max_sge = 1, .pd = e.pd, .cq = e.cq
	};
	errno = 0;
	assert_null(ibv_create_wq(e.ctx, &wi));
	assert_int_equal(errno, EOPNOTSUPP);
	plain = ud_qp(&e, NULL, 1, true);
	{
		struct ibv_qp_init_attr_ex ia = { .send_cq = e.cq,
						  .recv_cq = e.cq,
						  .qp_type = IBV_QPT_UD,
						  .cap = { .max_send_wr = 4, .max_send_sge = 1 },
						  .comp_mask = IBV_QP_INIT_ATTR_PD |
							       IBV_QP_INIT_ATTR_CREATE_FLAGS,
						  .pd = e.pd,
						  .create_flags = IBV_QP_CREATE_SOURCE_QPN,
						  .source_qpn = plain->qp_num };

		errno = 0;
		assert_null(ibv_create_qp_ex(e.ctx, &ia));
		assert_int_equal(errno, EOPNOTSUPP);
		/* A plain QP through ibv_create_qp_ex still is one. */
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.create_flags = 0;
		{
			struct ibv_qp *q = ibv_create_qp_ex(e.ctx, &ia);

			assert_non_null(q);
			assert_int_equal(ibv_destroy_qp(q), 0);
		}
	}
	unsetenv("IBVSIM_RSS");
	{
		struct ibv_wq *wq = ibv_create_wq(e.ctx, &wi);

		assert_non_null(wq);
		assert_int_equal(ibv_destroy_wq(wq), 0);
	}
	assert_int_equal(ibv_destroy_qp(plain), 0);
	end_close(&e);
}

/* INIT, RTR, RTS for a UD QP (the RSS QP's are those too). */
static void ud_ready(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	assert_int_equal(
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	assert_int_equal(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

static struct ibv_wq *wq_new(struct end *e, struct ibv_cq *cq, uint32_t max_wr)
{
	struct ibv_wq_init_attr wi = {
		.wq_type = IBV_WQT_RQ, .max_wr = max_wr, .max_sge = 1, .pd = e->pd, .cq = cq
	};
	struct ibv_wq *wq = ibv_create_wq(e->ctx, &wi);

	assert_non_null(wq);
	return wq;
}

static int wq_to(struct ibv_wq *wq, enum ibv_wq_state s)
{
	struct ibv_wq_attr a = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = s };

	return ibv_modify_wq(wq, &a);
}

static int post_wq(struct ibv_wq *wq, struct end *e, size_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(e->buf + off),
			       .length = len,
			       .lkey = e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;

	return ibv_post_wq_recv(wq, &wr, &bad);
}

/* An RSS QP; modifiable: one that goes through the UD state machine
 * (IBVSIM_RSS_QP_MODIFY=1, what the tests of the IBA's rules use), else one as mlx5 makes
 * it (the shim's default, or the errno IBVSIM_RSS_QP_MODIFY names). */
static struct ibv_qp *rss_qp_make(struct end *e, struct ibv_rwq_ind_table *t, uint64_t fields,
				  bool modifiable)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UD,
		.comp_mask =
		    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH,
		.pd = e->pd,
		.rwq_ind_tbl = t,
		.rx_hash_conf = { .rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ,
				  .rx_hash_key_len = 40,
				  .rx_hash_key = (uint8_t *)(uintptr_t)ms_key,
				  .rx_hash_fields_mask = fields },
	};
	struct ibv_qp *qp;

	if (modifiable)
		setenv("IBVSIM_RSS_QP_MODIFY", "1", 1);
	qp = ibv_create_qp_ex(e->ctx, &ia);
	if (modifiable)
		unsetenv("IBVSIM_RSS_QP_MODIFY");
	return qp;
}

static struct ibv_qp *rss_qp_new(struct end *e, struct ibv_rwq_ind_table *t, uint64_t fields)
{
	return rss_qp_make(e, t, fields, true);
}

static struct ibv_qp *src_qp_new(struct end *e, uint32_t n)
{
	struct ibv_qp_init_attr_ex ia = { .send_cq = e->cq,
					  .recv_cq = e->cq,
					  .qp_type = IBV_QPT_UD,
					  .sq_sig_all = 1,
					  .cap = { .max_send_wr = 8, .max_send_sge = 1 },
					  .comp_mask =
					      IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
					  .pd = e->pd,
					  .create_flags = IBV_QP_CREATE_SOURCE_QPN,
					  .source_qpn = n };

	return ibv_create_qp_ex(e->ctx, &ia);
}

static void wq_state_machine(void **state)
{
	struct end e;
	struct ibv_wq *wq, *wq2, *tbl_wq[2];
	struct ibv_wq_init_attr wi;
	struct ibv_rwq_ind_table_init_attr ti = { .log_ind_tbl_size = 1, .ind_tbl = tbl_wq };
	struct ibv_rwq_ind_table *t;
	struct ibv_qp *plain, *rss;
	struct ibv_wq_attr wa;
	struct ibv_wc wc[8];
	(void)state;

	end_open(&e, 0, 64);
	plain = ud_qp(&e, NULL, 1, false);
	/* Sizes rounded up and written back, as for QPs. */
	wi = (struct ibv_wq_init_attr){
		.wq_type = IBV_WQT_RQ, .max_wr = 5, .max_sge = 2, .pd = e.pd, .cq = e.cq
	};
	wq = ibv_create_wq(e.ctx, &wi);
	assert_non_null(wq);
	assert_int_equal(wi.max_wr, 8);
	assert_int_equal(wi.max_sge, 2);
	assert_int_equal(wq->state, IBV_WQS_RESET);
	assert_int_equal(wq->wq_type, IBV_WQT_RQ);
	assert_ptr_equal(wq->cq, e.cq);
	wq2 = wq_new(&e, e.cq, 4);
	/* WQ numbers are unique among the context's QPNs. */
	assert_int_not_equal(wq->wq_num, plain->qp_num);
	assert_int_not_equal(wq2->wq_num, plain->qp_num);
	assert_int_not_equal(wq->wq_num, wq2->wq_num);
	/* A CQ of another context, a WQ type that is not RQ: EINVAL. */
	wi.wq_type = (enum ibv_wq_type)1;
	assert_null(ibv_create_wq(e.ctx, &wi));
	assert_int_equal(errno, EINVAL);
	/* Posting in RESET is allowed (mlx5 takes it); the sizes hold. */
	assert_int_equal(post_wq(wq, &e, 0, 256, 1), 0);
	{
		struct ibv_sge sge[3] = {
			{ .addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey },
			{ .addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey },
			{ .addr = (uintptr_t)e.buf, .length = 8, .lkey = e.mr->lkey }
		};
		struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = sge, .num_sge = 3 }, *bad = NULL;

		assert_int_equal(ibv_post_wq_recv(wq, &wr, &bad), EINVAL);
		assert_ptr_equal(bad, &wr);
	}
	/* Transitions: RESET -> ERR no, RESET -> RDY yes, RDY -> RDY no; a wrong current
	 * state is refused. */
	assert_int_equal(wq_to(wq, IBV_WQS_ERR), EINVAL);
	assert_int_equal(wq_to(wq, IBV_WQS_RDY), 0);
	assert_int_equal(wq->state, IBV_WQS_RDY);
	assert_int_equal(wq_to(wq, IBV_WQS_RDY), EINVAL);
	wa = (struct ibv_wq_attr){ .attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE,
				   .wq_state = IBV_WQS_ERR,
				   .curr_wq_state = IBV_WQS_RESET };
	assert_int_equal(ibv_modify_wq(wq, &wa), EINVAL);
	wa.attr_mask = 0;
	assert_int_equal(ibv_modify_wq(wq, &wa), EINVAL);
	assert_int_equal(post_wq(wq, &e, 256, 256, 2), 0);
	/* RDY -> ERR flushes what was posted, on the WQ's CQ under its number. */
	wa = (struct ibv_wq_attr){ .attr_mask = IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE,
				   .wq_state = IBV_WQS_ERR,
				   .curr_wq_state = IBV_WQS_RDY };
	assert_int_equal(ibv_modify_wq(wq, &wa), 0);
	assert_int_equal(wq->state, IBV_WQS_ERR);
	assert_int_equal(poll_n(e.cq, wc, 2), 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(wc[i].wr_id, (uint64_t)i + 1);
		assert_int_equal(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		assert_int_equal(wc[i].qp_num, wq->wq_num);
	}
	/* A post in ERR completes flushed; ERR -> RDY is no transition. */
	assert_int_equal(post_wq(wq, &e, 0, 256, 3), 0);
	assert_int_equal(post_wq(wq, &e, 0, 256, 4), 0);
	assert_int_equal(poll_n(e.cq, wc, 1), 1);
	assert_int_equal(wc[0].wr_id, 3);
	assert_int_equal(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(wq_to(wq, IBV_WQS_RDY), EINVAL);
	/* To RESET removes its completions still in the CQ (wr_id 4's). */
	assert_int_equal(wq_to(wq, IBV_WQS_RESET), 0);
	assert_int_equal(ibv_poll_cq(e.cq, 8, wc), 0);
	assert_int_equal(wq_to(wq, IBV_WQS_RESET), 0); /* any -> RESET */

	/* Indirection tables: entries must be WQs of the context, 2^8 at most. */
	tbl_wq[0] = wq;
	tbl_wq[1] = NULL;
	assert_null(ibv_create_rwq_ind_table(e.ctx, &ti));
	assert_int_equal(errno, EINVAL);
	ti.log_ind_tbl_size = 9;
	assert_null(ibv_create_rwq_ind_table(e.ctx, &ti));
	ti.log_ind_tbl_size = 1;
	tbl_wq[1] = wq2;
	t = ibv_create_rwq_ind_table(e.ctx, &ti);
	assert_non_null(t);
	/* A WQ in a table cannot go; a table an RSS QP uses cannot either. */
	assert_int_equal(ibv_destroy_wq(wq2), EBUSY);
	/* RSS QP refusals: a key of another length, a field not emulated. */
	{
		struct ibv_qp_init_attr_ex ia = {
			.qp_type = IBV_QPT_UD,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE |
				     IBV_QP_INIT_ATTR_RX_HASH,
			.pd = e.pd,
			.rwq_ind_tbl = t,
			.rx_hash_conf = { .rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ,
					  .rx_hash_key_len = 52,
					  .rx_hash_key = (uint8_t *)(uintptr_t)ms_key,
					  .rx_hash_fields_mask = ALL_FIELDS },
		};

		assert_null(ibv_create_qp_ex(e.ctx, &ia));
		assert_int_equal(errno, EINVAL);
		ia.rx_hash_conf.rx_hash_key_len = 40;
		ia.rx_hash_conf.rx_hash_fields_mask = IBV_RX_HASH_IPSEC_SPI;
		assert_null(ibv_create_qp_ex(e.ctx, &ia));
		assert_int_equal(errno, EINVAL);
		ia.rx_hash_conf.rx_hash_fields_mask = ALL_FIELDS;
		ia.qp_type = IBV_QPT_RC;
		assert_null(ibv_create_qp_ex(e.ctx, &ia));
		assert_int_equal(errno, EINVAL);
	}
	rss = rss_qp_new(&e, t, ALL_FIELDS);
	assert_non_null(rss);
	assert_int_not_equal(rss->qp_num, wq->wq_num);
	assert_int_not_equal(rss->qp_num, wq2->wq_num);
	assert_int_not_equal(rss->qp_num, plain->qp_num);
	assert_int_equal(ibv_destroy_rwq_ind_table(t), EBUSY);
	/* The RSS QP goes through the UD state machine; it has no queues of its own. */
	{
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

		assert_int_equal(ibv_modify_qp(rss, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_QKEY),
				 EINVAL);
	}
	ud_ready(rss);
	assert_int_equal(qp_state(rss), IBV_QPS_RTS);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)e.buf, .length = 64, .lkey = e.mr->lkey };
		struct ibv_recv_wr rwr = { .sg_list = &sge, .num_sge = 1 }, *rbad = NULL;
		struct ibv_send_wr swr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND },
				   *sbad = NULL;
		struct ibv_ah *ah = ah_to(&e, 2);

		swr.wr.ud.ah = ah;
		swr.wr.ud.remote_qpn = 0x50;
		swr.wr.ud.remote_qkey = QKEY;
		assert_int_equal(ibv_post_recv(rss, &rwr, &rbad), EINVAL);
		assert_ptr_equal(rbad, &rwr);
		assert_int_equal(ibv_post_send(rss, &swr, &sbad), EINVAL);
		assert_ptr_equal(sbad, &swr);
		assert_int_equal(ibv_destroy_ah(ah), 0);
	}
	assert_int_equal(ibv_destroy_qp(rss), 0);
	assert_int_equal(ibv_destroy_rwq_ind_table(t), 0);
	assert_int_equal(ibv_destroy_wq(wq2), 0);
	assert_int_equal(ibv_destroy_wq(wq), 0);
	assert_int_equal(ibv_destroy_qp(plain), 0);
	end_close(&e);
	assert_int_equal(vsim_test_objects_leaked(), 0);
}

/* The receiving side of the RSS tests: two WQs, each on its own CQ and completion
 * channel, in a table of four entries (0, 1, 1, 0), and the RSS QP over it. */
#define RSS_LOG  2
#define RSS_BUFS 64
#define RSS_BUF  256
static const int rss_map[1 << RSS_LOG] = { 0, 1, 1, 0 };

struct rss {
	struct ibv_comp_channel *ch[2];
	struct ibv_cq *cq[2];
	struct ibv_wq *wq[2];
	struct ibv_rwq_ind_table *t;
	struct ibv_qp *qp;
};

static size_t rss_off(int w, unsigned i)
{
	return ((size_t)w * RSS_BUFS + i) * RSS_BUF;
}

static void rss_open_as(struct end *e, struct rss *r, bool modifiable)
{
	struct ibv_wq *tbl[1 << RSS_LOG];
	struct ibv_rwq_ind_table_init_attr ti = { .log_ind_tbl_size = RSS_LOG, .ind_tbl = tbl };

	for (int w = 0; w < 2; w++) {
		r->ch[w] = ibv_create_comp_channel(e->ctx);
		assert_non_null(r->ch[w]);
		r->cq[w] = ibv_create_cq(e->ctx, 256, r, r->ch[w], 0);
		assert_non_null(r->cq[w]);
		r->wq[w] = wq_new(e, r->cq[w], RSS_BUFS);
		assert_int_equal(wq_to(r->wq[w], IBV_WQS_RDY), 0);
		for (unsigned i = 0; i < RSS_BUFS; i++)
			assert_int_equal(post_wq(r->wq[w], e, rss_off(w, i), RSS_BUF, i), 0);
	}
	for (int i = 0; i < 1 << RSS_LOG; i++)
		tbl[i] = r->wq[rss_map[i]];
	r->t = ibv_create_rwq_ind_table(e->ctx, &ti);
	assert_non_null(r->t);
	r->qp = rss_qp_make(e, r->t, ALL_FIELDS, modifiable);
	assert_non_null(r->qp);
	if (modifiable)
		ud_ready(r->qp);
}

static void rss_open(struct end *e, struct rss *r)
{
	rss_open_as(e, r, true);
}

static void rss_close(struct rss *r)
{
	assert_int_equal(ibv_destroy_qp(r->qp), 0);
	assert_int_equal(ibv_destroy_rwq_ind_table(r->t), 0);
	for (int w = 0; w < 2; w++) {
		assert_int_equal(ibv_destroy_wq(r->wq[w]), 0);
		assert_int_equal(ibv_destroy_cq(r->cq[w]), 0);
		assert_int_equal(ibv_destroy_comp_channel(r->ch[w]), 0);
	}
}

/* The end of an RSS test: a's sender (its QP and AH), the RSS objects, both nodes. */
static void rss_pair_close(struct end *a, struct end *b, struct rss *r, struct ibv_qp *qa,
			   struct ibv_ah *ah)
{
	assert_int_equal(ibv_destroy_ah(ah), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	rss_close(r);
	end_close(a);
	end_close(b);
}

/* Which WQ flow f lands in, by the reference hash. */
static int flow_wq(const struct flow *f)
{
	return rss_map[flow_hash(f) & ((1u << RSS_LOG) - 1)];
}

#define N_FLOWS 14

/* Flows of every kind: IPv4 TCP and UDP, IPv6 TCP and UDP, an IPv4 fragment, ICMP. */
static void flows_make(struct flow *f)
{
	const uint8_t a[4] = { 10, 1, 0, 1 }, b[4] = { 10, 2, 0, 7 };

	for (int i = 0; i < 6; i++)
		flow4(&f[i], i % 2 ? 17 : 6, a, b, (uint16_t)(40000 + i), (uint16_t)(80 + i * 111));
	for (int i = 6; i < 11; i++)
		flow6(&f[i], i % 2 ? 17 : 6, "fd00::1", "fd00:1::2", (uint16_t)(50000 + i * 7),
		      (uint16_t)(443 + i));
	flow4(&f[11], 17, b, a, 53, 53);
	f[11].frag = true;
	flow4(&f[12], 1, a, b, 0, 0); /* ICMP: addresses only */
	flow4(&f[13], 6, b, a, 22, 61000);
}

/* Send datagram seq of flow f from qp to (dlid, dqpn) through ah. */
static void flow_send(struct ibv_qp *qp, struct end *e, struct ibv_ah *ah, uint32_t dqpn,
		      const struct flow *f, uint32_t seq)
{
	size_t off = (size_t)(seq % 4096) * 128;
	size_t len = flow_build(f, seq, e->buf + off);

	assert_int_equal(send_ud(qp, e, ah, dqpn, QKEY, off, (uint32_t)len, e->mr->lkey, seq, 0),
			 0);
}

/* The seq a received datagram carries (its last four octets). */
static uint32_t wc_seq(struct end *e, int w, const struct ibv_wc *wc)
{
	uint32_t seq;

	memcpy(&seq, e->buf + rss_off(w, (unsigned)wc->wr_id) + wc->byte_len - 4, 4);
	return seq;
}

/* A datagram from a that an RSS QP's WQ w received, checked; returns its seq. */
static uint32_t rss_wc_seq(struct end *b, struct rss *r, int w, const struct ibv_wc *wc,
			   const struct end *a, uint32_t src_qp)
{
	assert_int_equal(wc->status, IBV_WC_SUCCESS);
	assert_int_equal(wc->opcode, IBV_WC_RECV);
	assert_int_equal(wc->qp_num, r->wq[w]->wq_num);
	assert_int_equal(wc->src_qp, src_qp);
	assert_int_equal(wc->slid, a->lid);
	assert_int_equal(wc->pkey_index, 0);
	assert_int_equal(wc->wc_flags & IBV_WC_GRH, 0);
	return wc_seq(b, w, wc);
}

/* WQ 1 to RESET, then the N_FLOWS flows sent from qa: WQ 0 takes its own, WQ 1's are
 * dropped (counted as a UD QP's empty queue). */
static void wq1_reset_drops(struct end *a, struct ibv_qp *qa, struct ibv_ah *ah, struct rss *r,
			    const struct flow *f, const int flows_in[2])
{
	struct ibv_wc wc[64];
	unsigned long drops;

	assert_int_equal(wq_to(r->wq[1], IBV_WQS_RESET), 0);
	drops = vsim_test_rx_drops();
	for (int i = 0; i < N_FLOWS; i++)
		flow_send(qa, a, ah, r->qp->qp_num, &f[i], (uint32_t)i);
	assert_int_equal(poll_n(r->cq[0], wc, flows_in[0]), flows_in[0]);
	for (int i = 0; i < 200 && vsim_test_rx_drops() < drops + (unsigned long)flows_in[1]; i++)
		usleep(1000);
	assert_int_equal(vsim_test_rx_drops(), drops + (unsigned long)flows_in[1]);
	assert_int_equal(ibv_poll_cq(r->cq[1], 64, wc), 0);
}

static void rss_spreading(void **state)
{
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa;
	struct ibv_ah *ah;
	struct flow f[N_FLOWS];
	const int per_flow = 4, n = N_FLOWS * per_flow + 2;
	int got[2] = { 0, 0 }, flows_in[2] = { 0, 0 };
	uint8_t seen[N_FLOWS * 4 + 2];
	struct ibv_wc wc[64];
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	rss_open(&b, &r);
	qa = ud_qp(&a, NULL, 0, true);
	ah = ah_to(&a, b.lid);
	flows_make(f);
	for (int i = 0; i < N_FLOWS; i++)
		flows_in[flow_wq(&f[i])]++;
	/* The flows chosen give both WQs some (else the test would prove little). */
	assert_true(flows_in[0] > 0 && flows_in[1] > 0);
	/* Each WQ's CQ has its own completion channel: a datagram for one WQ raises an
	 * event on that WQ's channel, for that CQ, and none on the other's. */
	for (int w = 1; w >= 0; w--) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int i = 0;

		while (flow_wq(&f[i]) != w)
			i++;
		assert_int_equal(ibv_req_notify_cq(r.cq[0], 0), 0);
		assert_int_equal(ibv_req_notify_cq(r.cq[1], 0), 0);
		flow_send(qa, &a, ah, r.qp->qp_num, &f[i], 5000);
		assert_true(readable(r.ch[w]->fd, 1000));
		assert_false(readable(r.ch[!w]->fd, 50));
		assert_int_equal(ibv_get_cq_event(r.ch[w], &ev_cq, &ev_ctx), 0);
		assert_ptr_equal(ev_cq, r.cq[w]);
		assert_ptr_equal(ev_ctx, &r);
		ibv_ack_cq_events(ev_cq, 1);
		assert_int_equal(poll_n(r.cq[w], wc, 1), 1);
		assert_int_equal(wc[0].qp_num, r.wq[w]->wq_num);
		assert_int_equal(wc_seq(&b, w, &wc[0]), 5000);
		assert_int_equal(
		    post_wq(r.wq[w], &b, rss_off(w, (unsigned)wc[0].wr_id), RSS_BUF, wc[0].wr_id),
		    0);
	}
	/* The other channel's arm is still pending: drain it with one datagram each way
	 * below; an event left unread would keep its CQ from being destroyed. */
	assert_int_equal(ibv_req_notify_cq(r.cq[0], 0), 0);
	assert_int_equal(ibv_req_notify_cq(r.cq[1], 0), 0);
	for (int k = 0; k < per_flow; k++)
		for (int i = 0; i < N_FLOWS; i++)
			flow_send(qa, &a, ah, r.qp->qp_num, &f[i], (uint32_t)(k * N_FLOWS + i));
	/* Two ARP datagrams (hash 0: entry 0, WQ 0). */
	for (uint32_t s = N_FLOWS * 4; s < N_FLOWS * 4 + 2; s++) {
		uint8_t *d = a.buf + (size_t)s * 128;

		memset(d, 0, 40);
		d[0] = 0x08, d[1] = 0x06;
		memcpy(d + 36, &s, 4);
		assert_int_equal(
		    send_ud(qa, &a, ah, r.qp->qp_num, QKEY, (size_t)s * 128, 40, a.mr->lkey, s, 0),
		    0);
	}
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 2000 && got[0] + got[1] < n; i++) {
		for (int w = 0; w < 2; w++) {
			int m = ibv_poll_cq(r.cq[w], 64, wc);

			assert_true(m >= 0);
			for (int j = 0; j < m; j++) {
				uint32_t seq = rss_wc_seq(&b, &r, w, &wc[j], &a, qa->qp_num);

				assert_true(seq < (uint32_t)n);
				assert_int_equal(seen[seq], 0); /* exactly once */
				seen[seq] = 1;
				if (seq >= N_FLOWS * 4) {
					assert_int_equal(w, rss_map[0]); /* ARP */
					assert_int_equal(wc[j].byte_len, 40 + 40);
				} else {
					/* Every datagram of a flow in the WQ its hash says. */
					assert_int_equal(w, flow_wq(&f[seq % N_FLOWS]));
				}
				got[w]++;
			}
		}
		if (got[0] + got[1] < n)
			usleep(1000);
	}
	assert_int_equal(got[0] + got[1], n);
	assert_true(got[0] > 0 && got[1] > 0);
	/* Each channel raised one event for its own CQ (armed above). */
	for (int w = 0; w < 2; w++) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		assert_true(readable(r.ch[w]->fd, 1000));
		assert_int_equal(ibv_get_cq_event(r.ch[w], &ev_cq, &ev_ctx), 0);
		assert_ptr_equal(ev_cq, r.cq[w]);
		ibv_ack_cq_events(ev_cq, 1);
		assert_false(readable(r.ch[w]->fd, 0));
	}

	/* A WQ not RDY drops what its entries get (counted as a UD QP's empty queue); the
	 * other WQ still receives. */
	wq1_reset_drops(&a, qa, ah, &r, f, flows_in);

	rss_pair_close(&a, &b, &r, qa, ah);
}

/* An RSS QP as mlx5 makes it (the default): never modified, receiving from its
 * creation through its RDY WQs, with the P_Key index and Q_Key its send QP was given. */
static void rss_qp_as_mlx5(void **state)
{
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa, *s, *other;
	struct ibv_ah *ah, *ah_a;
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };
	struct ibv_qp_init_attr ia;
	struct flow f[N_FLOWS];
	int flows_in[2] = { 0, 0 }, got[2] = { 0, 0 };
	struct ibv_wc wc[64];
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	rss_open_as(&b, &r, false);
	qa = ud_qp(&a, NULL, 0, true); /* its sends unsignaled */
	ah = ah_to(&a, b.lid);
	ah_a = ah_to(&b, a.lid);
	flows_make(f);
	for (int i = 0; i < N_FLOWS; i++)
		flows_in[flow_wq(&f[i])]++;
	assert_true(flows_in[0] > 0 && flows_in[1] > 0);

	/* mlx5_modify_qp and mlx5_query_qp of an RSS QP: EOPNOTSUPP; it stays as made. */
	assert_int_equal(
	    ibv_modify_qp(r.qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	    EOPNOTSUPP);
	at.qp_state = IBV_QPS_ERR;
	assert_int_equal(ibv_modify_qp(r.qp, &at, IBV_QP_STATE), EOPNOTSUPP);
	assert_int_equal(ibv_query_qp(r.qp, &at, IBV_QP_STATE, &ia), EOPNOTSUPP);
	assert_int_equal(r.qp->state, IBV_QPS_RESET);

	/* No Q_Key of its own yet: the fabric drops a datagram with ours. */
	flow_send(qa, &a, ah, r.qp->qp_num, &f[0], 0);
	usleep(50000);
	assert_int_equal(ibv_poll_cq(r.cq[0], 64, wc) + ibv_poll_cq(r.cq[1], 64, wc), 0);

	/* Its send QP at INIT gives it a P_Key index and a Q_Key: the flows land, each in
	 * the WQ its hash names, the RSS QP still never modified. */
	s = src_qp_new(&b, r.qp->qp_num);
	assert_non_null(s);
	ud_ready(s);
	for (int i = 0; i < N_FLOWS; i++)
		flow_send(qa, &a, ah, r.qp->qp_num, &f[i], (uint32_t)i);
	for (int i = 0; i < 2000 && got[0] + got[1] < N_FLOWS; i++) {
		for (int w = 0; w < 2; w++) {
			int m = ibv_poll_cq(r.cq[w], 64, wc);

			assert_true(m >= 0);
			for (int j = 0; j < m; j++) {
				uint32_t seq = rss_wc_seq(&b, &r, w, &wc[j], &a, qa->qp_num);

				assert_true(seq < N_FLOWS);
				assert_int_equal(w, flow_wq(&f[seq]));
				got[w]++;
			}
		}
		if (got[0] + got[1] < N_FLOWS)
			usleep(1000);
	}
	assert_int_equal(got[0], flows_in[0]);
	assert_int_equal(got[1], flows_in[1]);

	/* Another Q_Key is refused, as by a UD QP. */
	assert_int_equal(send_ud(qa, &a, ah, r.qp->qp_num, QKEY + 1, 0, 40, a.mr->lkey, 90, 0), 0);
	usleep(50000);
	assert_int_equal(ibv_poll_cq(r.cq[0], 64, wc) + ibv_poll_cq(r.cq[1], 64, wc), 0);

	/* Its WQs decide: one not RDY drops its flows, the other still receives. */
	wq1_reset_drops(&a, qa, ah, &r, f, flows_in);

	/* Its send QP sends with its number. */
	post_recv(qa, &a, 0, 4096, a.mr->lkey, 500);
	assert_int_equal(send_ud(s, &b, ah_a, qa->qp_num, QKEY, 65536, 16, b.mr->lkey, 7, 0), 0);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].src_qp, r.qp->qp_num);

	/* rdma-core before v28 said ENOSYS (IBVSIM_RSS_QP_MODIFY=enosys). */
	setenv("IBVSIM_RSS_QP_MODIFY", "enosys", 1);
	other = rss_qp_make(&b, r.t, ALL_FIELDS, false);
	unsetenv("IBVSIM_RSS_QP_MODIFY");
	assert_non_null(other);
	at.qp_state = IBV_QPS_INIT;
	assert_int_equal(
	    ibv_modify_qp(other, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
	    ENOSYS);
	assert_int_equal(ibv_destroy_qp(other), 0);

	assert_int_equal(ibv_destroy_qp(s), 0);
	assert_int_equal(ibv_destroy_ah(ah_a), 0);
	rss_pair_close(&a, &b, &r, qa, ah);
}

static void rss_multicast_and_errors(void **state)
{
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa;
	struct ibv_ah *ah;
	struct ibv_ah_attr aa = { .dlid = 0xc001, .is_global = 1, .port_num = 1 };
	union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
					0, 1 } };
	struct flow f[N_FLOWS];
	struct ibv_wc wc[64];
	int want[2] = { 0, 0 };
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	rss_open(&b, &r);
	qa = ud_qp(&a, NULL, 0, true);
	flows_make(f);
	/* Multicast attached to the RSS QP spreads the same way, GRH and all. */
	assert_int_equal(ibv_attach_mcast(r.qp, &mgid, 0xc001), 0);
	aa.grh.dgid = mgid;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(a.pd, &aa);
	assert_non_null(ah);
	for (int i = 0; i < N_FLOWS; i++) {
		flow_send(qa, &a, ah, 0xffffff, &f[i], (uint32_t)i);
		want[flow_wq(&f[i])]++;
	}
	for (int w = 0; w < 2; w++) {
		assert_int_equal(poll_n(r.cq[w], wc, want[w]), want[w]);
		for (int j = 0; j < want[w]; j++) {
			uint32_t seq = wc_seq(&b, w, &wc[j]);

			assert_int_equal(wc[j].status, IBV_WC_SUCCESS);
			assert_int_equal(wc[j].qp_num, r.wq[w]->wq_num);
			assert_true(wc[j].wc_flags & IBV_WC_GRH);
			assert_true(seq < N_FLOWS);
			assert_int_equal(w, flow_wq(&f[seq]));
			/* The GRH area holds the GRH: its destination GID is the group. */
			assert_memory_equal(b.buf + rss_off(w, (unsigned)wc[j].wr_id) + 24,
					    mgid.raw, 16);
		}
	}
	assert_int_equal(ibv_detach_mcast(r.qp, &mgid, 0xc001), 0);
	assert_int_equal(ibv_destroy_ah(ah), 0);

	/* A WQE too small for the datagram: LOC_LEN_ERR, that WQ to ERR, its other WQEs
	 * flushed. */
	ah = ah_to(&a, b.lid);
	assert_int_equal(wq_to(r.wq[0], IBV_WQS_RESET), 0);
	assert_int_equal(wq_to(r.wq[0], IBV_WQS_RDY), 0);
	assert_int_equal(post_wq(r.wq[0], &b, rss_off(0, 0), 60, 0), 0);
	assert_int_equal(post_wq(r.wq[0], &b, rss_off(0, 1), RSS_BUF, 1), 0);
	for (int i = 0; i < N_FLOWS; i++) {
		if (flow_wq(&f[i]) != 0)
			continue;
		flow_send(qa, &a, ah, r.qp->qp_num, &f[i], (uint32_t)i);
		break;
	}
	assert_int_equal(poll_n(r.cq[0], wc, 2), 2);
	assert_int_equal(wc[0].wr_id, 0);
	assert_int_equal(wc[0].status, IBV_WC_LOC_LEN_ERR);
	assert_int_equal(wc[0].qp_num, r.wq[0]->wq_num);
	assert_int_equal(wc[1].wr_id, 1);
	assert_int_equal(wc[1].status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(r.wq[0]->state, IBV_WQS_ERR);
	/* The RSS QP to ERR: it receives no more; the WQs keep their WQEs. */
	{
		struct ibv_qp_attr x = { .qp_state = IBV_QPS_ERR };
		unsigned long drops = vsim_test_rx_drops();

		assert_int_equal(ibv_modify_qp(r.qp, &x, IBV_QP_STATE), 0);
		for (int i = 0; i < N_FLOWS; i++)
			flow_send(qa, &a, ah, r.qp->qp_num, &f[i], (uint32_t)i);
		usleep(50000);
		assert_int_equal(ibv_poll_cq(r.cq[1], 64, wc), 0);
		assert_int_equal(vsim_test_rx_drops(), drops);
	}
	rss_pair_close(&a, &b, &r, qa, ah);
}

static void source_qpn(void **state)
{
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa, *s, *s2, *plain, *rc;
	struct ibv_ah *ah_b, *ah_a;
	struct ibv_wc wc[8];
	(void)state;

	end_open(&a, 0, 64);
	end_open(&b, 1, 64);
	rss_open(&b, &r);
	qa = ud_qp(&a, NULL, 1, true);
	ah_b = ah_to(&a, b.lid);
	ah_a = ah_to(&b, a.lid);
	/* N must be a UD QP of the context: not an RC QP, not a number nobody has. */
	rc = rc_qp(&b, NULL);
	assert_null(src_qp_new(&b, rc->qp_num));
	assert_int_equal(errno, EINVAL);
	assert_null(src_qp_new(&b, 0xabcdef));
	assert_int_equal(errno, EINVAL);
	assert_null(src_qp_new(&b, qa->qp_num)); /* another context's */
	assert_int_equal(errno, EINVAL);
	assert_int_equal(ibv_destroy_qp(rc), 0);
	/* The send QP of the RSS QP, as enhanced IPoIB has one per worker. */
	s = src_qp_new(&b, r.qp->qp_num);
	assert_non_null(s);
	assert_int_not_equal(s->qp_num, r.qp->qp_num);
	ud_ready(s);
	post_recv(qa, &a, 0, 4096, a.mr->lkey, 500);
	memcpy(b.buf + 65536, "from the send QP", 16);
	assert_int_equal(send_ud(s, &b, ah_a, qa->qp_num, QKEY, 65536, 16, b.mr->lkey, 7, 0), 0);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].wr_id, 7);
	assert_int_equal(wc[0].qp_num, s->qp_num);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[0].src_qp, r.qp->qp_num); /* the number the link advertises */
	assert_int_equal(wc[0].slid, b.lid);
	assert_memory_equal(a.buf + 40, "from the send QP", 16);
	/* A datagram addressed to the send QP's own number is dropped. */
	assert_int_equal(send_ud(qa, &a, ah_b, s->qp_num, QKEY, 0, 16, a.mr->lkey, 8, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	usleep(50000);
	assert_int_equal(ibv_poll_cq(b.cq, 8, wc), 0);
	/* N cannot go while a send QP sends as it. */
	assert_int_equal(ibv_destroy_qp(r.qp), EBUSY);
	/* A plain UD QP as N works too; several send QPs per N. */
	plain = ud_qp(&b, NULL, 1, true);
	s2 = src_qp_new(&b, plain->qp_num);
	assert_non_null(s2);
	ud_ready(s2);
	post_recv(qa, &a, 4096, 4096, a.mr->lkey, 501);
	assert_int_equal(send_ud(s2, &b, ah_a, qa->qp_num, QKEY, 65536, 16, b.mr->lkey, 9, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 1), 1);
	assert_int_equal(wc[0].src_qp, plain->qp_num);
	assert_int_equal(poll_n(b.cq, wc, 1), 1);
	assert_int_equal(ibv_destroy_qp(plain), EBUSY);
	assert_int_equal(ibv_destroy_qp(s2), 0);
	assert_int_equal(ibv_destroy_qp(plain), 0);
	assert_int_equal(ibv_destroy_qp(s), 0);
	assert_int_equal(ibv_destroy_ah(ah_a), 0);
	assert_int_equal(ibv_destroy_ah(ah_b), 0);
	assert_int_equal(ibv_destroy_qp(qa), 0);
	rss_close(&r);
	end_close(&a);
	end_close(&b);
}

/* One worker of the concurrent test: keeps its WQ stocked, sleeps on its own channel,
 * polls its own CQ, and records each datagram's seq. */
struct worker {
	struct end *e;
	struct rss *r;
	int w;
	int expect;
	atomic_int got;
	uint8_t *seen; /* per seq: 1 + the WQ it came in */
	int dup, bad, foreign_events;
	const struct flow *f;
};

static void *worker_run(void *arg)
{
	struct worker *k = arg;
	struct ibv_cq *cq = k->r->cq[k->w];
	struct ibv_comp_channel *ch = k->r->ch[k->w];
	struct ibv_wc wc[16];

	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	for (int idle = 0; atomic_load(&k->got) < k->expect && idle < 3000;) {
		int m = ibv_poll_cq(cq, 16, wc);

		if (m < 0) {
			k->bad++;
			break;
		}
		for (int j = 0; j < m; j++) {
			uint32_t seq = wc_seq(k->e, k->w, &wc[j]);

			if (wc[j].status != IBV_WC_SUCCESS ||
			    wc[j].qp_num != k->r->wq[k->w]->wq_num || seq >= 4096 ||
			    flow_wq(&k->f[seq % N_FLOWS]) != k->w)
				k->bad++;
			else if (k->seen[seq])
				k->dup++;
			else
				k->seen[seq] = (uint8_t)(1 + k->w);
			/* The buffer back to the WQ at once. */
			if (post_wq(k->r->wq[k->w], k->e, rss_off(k->w, (unsigned)wc[j].wr_id),
				    RSS_BUF, wc[j].wr_id) != 0)
				k->bad++;
			atomic_fetch_add(&k->got, 1);
		}
		if (m)
			continue;
		/* Nothing: arm, look once more, then sleep on the channel. */
		ibv_req_notify_cq(cq, 0);
		if (ibv_poll_cq(cq, 0, wc) < 0)
			k->bad++;
		if (readable(ch->fd, 1)) {
			struct ibv_cq *ev_cq;
			void *ev_ctx;

			if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0) {
				if (ev_cq != cq)
					k->foreign_events++;
				ibv_ack_cq_events(ev_cq, 1);
			}
		} else {
			idle++;
		}
	}
	return NULL;
}

static void rss_concurrent(void **state)
{
	enum {
		N = 1200,
		WINDOW = 48
	};
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa;
	struct ibv_ah *ah;
	struct flow f[N_FLOWS];
	struct worker k[2];
	pthread_t th[2];
	uint8_t *seen = calloc(N, 1);
	unsigned long drops;
	int expect[2] = { 0, 0 };
	(void)state;

	assert_non_null(seen);
	end_open(&a, 0, 256);
	end_open(&b, 1, 64);
	rss_open(&b, &r);
	qa = ud_qp(&a, NULL, 0, true);
	ah = ah_to(&a, b.lid);
	flows_make(f);
	for (int i = 0; i < N; i++)
		expect[flow_wq(&f[i % N_FLOWS])]++;
	drops = vsim_test_rx_drops();
	for (int w = 0; w < 2; w++) {
		k[w] = (struct worker){
			.e = &b, .r = &r, .w = w, .expect = expect[w], .seen = seen, .f = f
		};
		atomic_init(&k[w].got, 0);
		assert_int_equal(pthread_create(&th[w], NULL, worker_run, &k[w]), 0);
	}
	/* The other node sends, at most WINDOW datagrams ahead of what the workers took
	 * (fewer than a WQ's 64 WQEs: none is dropped for want of one), while this thread
	 * also queries the RSS QP (a control operation beside the data path). */
	for (int i = 0, spins = 0; i < N && spins < 200000;) {
		int taken = atomic_load(&k[0].got) + atomic_load(&k[1].got);

		if (i - taken >= WINDOW) {
			spins++;
			usleep(100);
			continue;
		}
		flow_send(qa, &a, ah, r.qp->qp_num, &f[i % N_FLOWS], (uint32_t)i);
		i++;
		if (i % 100 == 0)
			assert_int_equal(qp_state(r.qp), IBV_QPS_RTS);
	}
	for (int w = 0; w < 2; w++)
		assert_int_equal(pthread_join(th[w], NULL), 0);
	for (int w = 0; w < 2; w++) {
		assert_int_equal(k[w].bad, 0);
		assert_int_equal(k[w].dup, 0);
		assert_int_equal(k[w].foreign_events, 0);
		assert_int_equal(atomic_load(&k[w].got), expect[w]);
	}
	for (int i = 0; i < N; i++)
		assert_int_equal(seen[i], 1 + flow_wq(&f[i % N_FLOWS]));
	assert_int_equal(vsim_test_rx_drops(), drops);
	free(seen);
	/* Events got by the workers were acked: the CQs can go. */
	rss_pair_close(&a, &b, &r, qa, ah);
}

/* Faults on demand (vsim_test_fault, IBVSIM_FAULT_MODIFY_QP, the fault file): a UD QP
 * to ERR with QP_FATAL, its WRs flushed, and back through RESET to RTS with its QPN and
 * its multicast attachment; a QP that will not leave RESET; a WQ of an RSS QP to ERR with
 * WQ_FATAL and back to RDY; a source-QPN send QP named through its RSS QP; the refusals. */
static void faults_on_demand(void **state)
{
	char path[64];
	struct end a, b;
	struct rss r;
	struct ibv_qp *qa, *qb, *qc, *idle, *sq;
	struct ibv_ah *to_b, *to_group;
	struct ibv_ah_attr ga = { .dlid = 0xc002, .is_global = 1, .port_num = 1 };
	union ibv_gid mgid = { .raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0,
					0, 2 } };
	struct ibv_qp_attr x = { .qp_state = IBV_QPS_RESET };
	struct ibv_async_event ev;
	struct ibv_wq *w1;
	struct ibv_wc wc[RSS_BUFS];
	FILE *f;
	(void)state;

	snprintf(path, sizeof(path), "/tmp/vsim-fault-test.%ld", (long)getpid());
	setenv("IBVSIM_FAULT_FILE", path, 1); /* taken at open */
	end_open(&a, 0, 256);
	end_open(&b, 1, 256);
	unsetenv("IBVSIM_FAULT_FILE");
	qa = ud_qp(&a, NULL, 1, true);
	qb = ud_qp(&b, NULL, 1, true);
	idle = ud_qp(&b, NULL, 1, false);
	assert_int_equal(ibv_attach_mcast(qb, &mgid, 0xc002), 0);
	for (unsigned i = 0; i < 3; i++)
		post_recv(qb, &b, 4096 * i, 4096, b.mr->lkey, i);

	assert_int_equal(vsim_test_fault("nodeB", 0xfffff0, 0, false), -ENOENT);
	assert_int_not_equal(qa->qp_num, idle->qp_num); /* QPNs are per node: b's only */
	assert_int_equal(vsim_test_fault("nodeA", idle->qp_num, 0, false), -ENOENT);
	assert_int_equal(vsim_test_fault("nodeB", idle->qp_num, 0, false), -EINVAL); /* RESET */
	assert_int_equal(vsim_test_fault("nodeB", qb->qp_num, 1, false), -EINVAL);   /* no part */
	assert_int_equal(vsim_test_fault("nodeB", qb->qp_num, 0, true), -EINVAL);    /* no WQ */
	assert_int_equal(vsim_test_fault("nodeB", qb->qp_num, 0, false), 0);
	qp_fatal_seen(b.ctx, qb);
	assert_int_equal(poll_n(b.cq, wc, 3), 3);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(vsim_test_fault("nodeB", qb->qp_num, 0, false), -EINVAL); /* ERR */

	/* Back: RESET, then a QP the HCA will not take out of RESET, then RTS. */
	assert_int_equal(ibv_modify_qp(qb, &x, IBV_QP_STATE), 0);
	setenv("IBVSIM_FAULT_MODIFY_QP", "5", 1);
	x.qp_state = IBV_QPS_INIT;
	x.port_num = 1;
	x.qkey = QKEY;
	assert_int_equal(
	    ibv_modify_qp(qb, &x, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 5);
	assert_int_equal(qp_state(qb), IBV_QPS_RESET);
	unsetenv("IBVSIM_FAULT_MODIFY_QP");
	ud_ready(qb);
	/* The same QP receives again, unicast and on the group it was attached to. */
	to_b = ah_to(&a, b.lid);
	ga.grh.dgid = mgid;
	ga.grh.hop_limit = 1;
	to_group = ibv_create_ah(a.pd, &ga);
	assert_non_null(to_group);
	post_recv(qb, &b, 0, 4096, b.mr->lkey, 10);
	post_recv(qb, &b, 4096, 4096, b.mr->lkey, 11);
	assert_int_equal(send_ud(qa, &a, to_b, qb->qp_num, QKEY, 0, 100, a.mr->lkey, 1, 0), 0);
	assert_int_equal(send_ud(qa, &a, to_group, 0xffffff, QKEY, 0, 100, a.mr->lkey, 2, 0), 0);
	assert_int_equal(poll_n(a.cq, wc, 2), 2);
	assert_int_equal(poll_n(b.cq, wc, 2), 2);
	assert_int_equal(wc[0].status, IBV_WC_SUCCESS);
	assert_int_equal(wc[1].status, IBV_WC_SUCCESS);
	assert_true((wc[0].wc_flags & IBV_WC_GRH) != (wc[1].wc_flags & IBV_WC_GRH));

	/* The fault file (the process's: the QPN must be one node's only, as it is on the
	 * rack, a process a node): a bad line is logged and skipped, the good one applied
	 * once. */
	qc = ud_qp(&b, NULL, 1, true);
	assert_int_not_equal(qc->qp_num, qa->qp_num);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "qp nonsense\nqp 0x%x\n", qc->qp_num);
	fclose(f);
	qp_fatal_seen(b.ctx, qc);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(qp_state(qa), IBV_QPS_RTS);

	/* RSS: the WQ at entry 1 of the table (rss_map: WQ 1) to ERR, its WQEs flushed. */
	rss_open(&b, &r);
	w1 = r.wq[rss_map[1]];
	assert_int_equal(vsim_test_fault("nodeB", r.qp->qp_num, 1u << RSS_LOG, true), -EINVAL);
	assert_int_equal(vsim_test_fault("nodeB", r.qp->qp_num, 1, true), 0);
	assert_true(async_wait(b.ctx, IBV_EVENT_WQ_FATAL, &ev));
	assert_ptr_equal(ev.element.wq, w1);
	ibv_ack_async_event(&ev);
	assert_int_equal(w1->state, IBV_WQS_ERR);
	assert_int_equal(poll_n(r.cq[rss_map[1]], wc, RSS_BUFS), RSS_BUFS);
	assert_int_equal(wc[RSS_BUFS - 1].status, IBV_WC_WR_FLUSH_ERR);
	assert_int_equal(wc[0].qp_num, w1->wq_num);
	assert_int_equal(vsim_test_fault("nodeB", r.qp->qp_num, 1, true), -EINVAL); /* not RDY */
	assert_int_equal(wq_to(w1, IBV_WQS_RESET), 0);
	assert_int_equal(wq_to(w1, IBV_WQS_RDY), 0);
	/* The RSS QP's send QP is what fails for "qp": the first (and only) by QPN. */
	sq = src_qp_new(&b, r.qp->qp_num);
	assert_non_null(sq);
	ud_ready(sq);
	assert_int_equal(vsim_test_fault("nodeB", r.qp->qp_num, 1, false), -EINVAL);
	assert_int_equal(vsim_test_fault("nodeB", r.qp->qp_num, 0, false), 0);
	qp_fatal_seen(b.ctx, sq);

	assert_int_equal(ibv_destroy_qp(sq), 0);
	assert_int_equal(ibv_destroy_qp(qc), 0);
	assert_int_equal(ibv_destroy_qp(idle), 0);
	assert_int_equal(ibv_detach_mcast(qb, &mgid, 0xc002), 0);
	assert_int_equal(ibv_destroy_qp(qb), 0);
	assert_int_equal(ibv_destroy_ah(to_group), 0);
	rss_pair_close(&a, &b, &r, qa, to_b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(devices_and_ports),
		cmocka_unit_test(ud_state_machine),
		cmocka_unit_test(rc_state_machine_and_rnr),
		cmocka_unit_test(ud_delivery_qkey_and_lkeys),
		cmocka_unit_test(cq_events_and_signaling),
		cmocka_unit_test(cq_overrun),
		cmocka_unit_test(port_events),
		cmocka_unit_test(cm_mad_carrier),
		cmocka_unit_test(rss_hash_vectors),
		cmocka_unit_test(query_device_ex_caps),
		cmocka_unit_test(wq_state_machine),
		cmocka_unit_test(rss_spreading),
		cmocka_unit_test(rss_qp_as_mlx5),
		cmocka_unit_test(rss_multicast_and_errors),
		cmocka_unit_test(source_qpn),
		cmocka_unit_test(rss_concurrent),
		cmocka_unit_test(faults_on_demand),
		cmocka_unit_test(ud_send_waits_for_the_ring),
	};

	return cmocka_run_group_tests(tests, vsim_fabric_setup, vsim_fabric_teardown);
}
