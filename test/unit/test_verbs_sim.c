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
 * umad_recv (SLID, SL, P_Key index, GRH, the eventfd).
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

#include <infiniband/umad.h>

#include "lib/ib_hdr.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "sim/verbs/vsim.h"
#include "test/unit/vsim_fabric.h"
#include "sim/verbs/vsim_gsi.h"

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
	assert_true(async_wait(a.ctx, IBV_EVENT_QP_FATAL, &ev));
	assert_ptr_equal(ev.element.qp, qp);
	ibv_ack_async_event(&ev);
	assert_int_equal(qp_state(qp), IBV_QPS_ERR);
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
	};

	return cmocka_run_group_tests(tests, vsim_fabric_setup, vsim_fabric_teardown);
}
