/*
 * The connection manager end to end: two (or three) cm instances wired through an
 * in-memory MAD transport -- the one place a fake transport is allowed: a unit test's
 * edge -- with a clock the test moves. Every MAD crosses as its 256 octets, so what
 * one instance encodes the other decodes. Covered: setup, MTU negotiation, REJ,
 * timeouts and retry limits (and the REJ reason on giving up), crossing REQs (both
 * delivery orders, both address orders), DREQ/DREP, an RTU or DREP or REJ that does
 * not belong (wrong comm id, wrong state), idle teardown, neighbour expiry, duplicate REQ, stale REP, MRA,
 * peer restart, the orphan answers and the listing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "cm/cm.h"
#include "lib/ib_bytes.h"

#define MAXQ 64

static uint64_t t_now;

static uint64_t clock_ms(void *ctx)
{
	(void)ctx;
	return t_now;
}

struct node;

struct mad {
	struct node *from;
	uint16_t dlid;
	uint8_t b[IB_MAD_LEN];
};

static struct mad queue[MAXQ];
static unsigned q_len;
/* Drop filter: attribute IDs (bit attr-0x10) to drop, per direction ("to" node). */
static unsigned drop_to_a, drop_to_b;
static unsigned sent_by_attr[2][8];
/* The last MAD of each attribute A and B sent, dropped or not. */
static uint8_t last_sent[2][8][IB_MAD_LEN];

struct node {
	int idx;
	struct cm *cm;
	struct cm_config cfg;
	uint16_t lid;
	union ib_gid gid;
	uint32_t ud_qpn;
	/* callback log */
	unsigned qp_created, qp_destroyed, ups, downs;
	int create_ret;
	uint32_t next_qpn;
	struct ibp_qp_connect last_connect;
	unsigned connects;
	struct cm_conn_info last_up, last_down;
	bool last_down_was_up;
	enum cm_close_reason last_why;
	uint32_t pending_lcid;
	/* return_path's answer (cbs_rp) */
	int rp_ret;
	struct cm_path_info rp;
	unsigned rp_asked;
};

static struct node na, nb, nc;
static struct node *nodes[3] = { &na, &nb, &nc };

static int tx(void *ctx, const struct cm_addr *to, const uint8_t *mad, size_t len)
{
	struct node *n = ctx;
	uint16_t attr = ib_get_be16(mad + 16);

	assert_int_equal(len, IB_MAD_LEN);
	assert_true(q_len < MAXQ);
	queue[q_len].from = n;
	queue[q_len].dlid = to->lid;
	memcpy(queue[q_len].b, mad, IB_MAD_LEN);
	q_len++;
	if (n->idx < 2 && attr >= 0x10 && attr <= 0x16) {
		sent_by_attr[n->idx][attr - 0x10]++;
		memcpy(last_sent[n->idx][attr - 0x10], mad, IB_MAD_LEN);
	}
	return 0;
}

static const struct cm_transport_ops mem_transport = { .send = tx };

static int cb_create(void *ctx, const struct cm_conn_info *c, void **qp, uint32_t *qpn)
{
	struct node *n = ctx;

	if (n->create_ret) {
		if (n->create_ret == -EINPROGRESS)
			n->pending_lcid = c->local_comm_id;
		return n->create_ret;
	}
	n->qp_created++;
	*qpn = n->next_qpn++;
	*qp = (void *)(uintptr_t)*qpn;
	return 0;
}

static int cb_connect(void *ctx, void *qp, const struct ibp_qp_connect *c)
{
	struct node *n = ctx;

	(void)qp;
	n->last_connect = *c;
	n->connects++;
	return 0;
}

static void cb_destroy(void *ctx, void *qp)
{
	struct node *n = ctx;

	(void)qp;
	n->qp_destroyed++;
}

static void cb_up(void *ctx, const struct cm_conn_info *c, void *qp)
{
	struct node *n = ctx;

	(void)qp;
	n->ups++;
	n->last_up = *c;
}

static void cb_down(void *ctx, const struct cm_conn_info *c, void *qp, bool was_up,
		    enum cm_close_reason why)
{
	struct node *n = ctx;

	(void)qp;
	n->downs++;
	n->last_down = *c;
	n->last_down_was_up = was_up;
	n->last_why = why;
}

static const struct cm_callbacks cbs = {
	.qp_create = cb_create,
	.qp_connect = cb_connect,
	.qp_destroy = cb_destroy,
	.up = cb_up,
	.down = cb_down,
};

static int cb_return_path(void *ctx, const union ib_gid *gid, struct cm_path_info *out)
{
	struct node *n = ctx;

	(void)gid;
	n->rp_asked++;
	if (n->rp_ret == 0)
		*out = n->rp;
	return n->rp_ret;
}

/* With the passive side's return-path lookup (REQs from another subnet). */
static const struct cm_callbacks cbs_rp = {
	.qp_create = cb_create,
	.qp_connect = cb_connect,
	.qp_destroy = cb_destroy,
	.up = cb_up,
	.down = cb_down,
	.return_path = cb_return_path,
};

/* An IB router between A's subnet and B's: LID RT_A on A's side, RT_B on B's. A MAD
 * to the router's LID arrives on the other side from the router's LID there. */
#define RT_A 50
#define RT_B 60

static void node_init(struct node *n, int idx, uint16_t lid, uint8_t gid_last, uint32_t ud_qpn)
{
	memset(n, 0, sizeof(*n));
	n->idx = idx;
	n->lid = lid;
	ib_gid_set(&n->gid, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300000000ull | gid_last);
	n->ud_qpn = ud_qpn;
	n->next_qpn = 0x100 * (uint32_t)(idx + 1);
	n->cfg = (struct cm_config){
		.local = { .flags = IPOIB_HWADDR_F_RC, .qpn = ud_qpn, .gid = n->gid },
		.lid = lid,
		.ca_guid = 0x0002c90300000000ull | gid_last,
		.pkey = 0xffff,
		.response_timeout = 12, /* 16.8 ms -> 17 */
		.max_cm_retries = 3,
		.mra_service_timeout = 16,
		.retry_count = 7,
		.rnr_retry = 7,
		.min_rnr_timer = 12,
		.transport = &mem_transport,
		.transport_ctx = n,
		.cb = &cbs,
		.cb_ctx = n,
		.now_ms = clock_ms,
		.seed = 0x1234u + (uint32_t)idx,
		.timewait_ms = 100,
	};
}

static void node_start(struct node *n)
{
	assert_int_equal(cm_new(&n->cfg, &n->cm), 0);
}

static struct node *by_lid(uint16_t lid)
{
	for (int i = 0; i < 3; i++)
		if (nodes[i]->cm && nodes[i]->lid == lid)
			return nodes[i];
	return NULL;
}

static bool dropped(const struct mad *m, const struct node *to)
{
	uint16_t attr = ib_get_be16(m->b + 16);
	unsigned mask = to == &na ? drop_to_a : to == &nb ? drop_to_b : 0;

	return attr >= 0x10 && attr <= 0x16 && (mask & (1u << (attr - 0x10)));
}

static void deliver(const struct mad *m)
{
	struct node *to = by_lid(m->dlid);
	struct cm_addr from = { .lid = m->from->lid };

	if (m->dlid == RT_A || m->dlid == RT_B) {
		to = m->dlid == RT_A ? &nb : &na;
		from = (struct cm_addr){ .lid = m->dlid == RT_A ? RT_B : RT_A,
					 .has_grh = true,
					 .gid = m->from->gid,
					 .hop_limit = 254 };
	}

	if (!to || dropped(m, to))
		return;
	if (cm_input(to->cm, m->b, IB_MAD_LEN, &from) == -ENOENT)
		cm_input_orphan(to->cm, m->b, IB_MAD_LEN, &from);
}

/* Deliver queued MADs (and what they cause) in order. */
static void pump(void)
{
	for (unsigned i = 0; i < q_len; i++) {
		struct mad m = queue[i];

		deliver(&m);
		if (i == q_len - 1 || q_len >= MAXQ - 8) {
			/* compact what was delivered */
			memmove(queue, queue + i + 1, (q_len - i - 1) * sizeof(queue[0]));
			q_len -= i + 1;
			i = (unsigned)-1;
		}
	}
}

/* Move the clock in 1 ms steps, ticking and pumping. */
static void advance(uint64_t ms)
{
	for (uint64_t i = 0; i < ms; i++) {
		t_now++;
		for (int k = 0; k < 3; k++)
			if (nodes[k]->cm)
				cm_tick(nodes[k]->cm);
		pump();
	}
}

static struct ipoib_hwaddr hw(const struct node *n)
{
	return (struct ipoib_hwaddr){ .flags = IPOIB_HWADDR_F_RC, .qpn = n->ud_qpn, .gid = n->gid };
}

static struct cm_path_info path_to(const struct node *from, const struct node *to)
{
	return (struct cm_path_info){
		.slid = from->lid,
		.dlid = to->lid,
		.sgid = from->gid,
		.dgid = to->gid,
		.sl = 0,
		.packet_lifetime = 10,
		.mtu = IB_MTU_2048,
		.pkey = 0xffff,
	};
}

static int connect(struct node *from, struct node *to)
{
	struct ipoib_hwaddr h = hw(to);
	struct cm_path_info p = path_to(from, to);

	return cm_connect(from->cm, &h, &p);
}

static enum cm_state state_of(struct node *n, struct node *peer)
{
	struct cm_conn_info i;
	struct ipoib_hwaddr h = hw(peer);

	if (cm_lookup(n->cm, &h, &i) < 0)
		return CM_STATE_COUNT;
	return i.state;
}

static unsigned count_conns(struct node *n)
{
	struct cm_conn_info i;
	unsigned live = 0;

	for (int k = 0; k < 3; k++)
		if (nodes[k] != n && nodes[k]->cm) {
			struct ipoib_hwaddr h = hw(nodes[k]);

			live += cm_lookup(n->cm, &h, &i) == 0;
		}
	return live;
}

static int setup(void **state)
{
	(void)state;
	t_now = 1000;
	q_len = 0;
	drop_to_a = drop_to_b = 0;
	memset(sent_by_attr, 0, sizeof(sent_by_attr));
	node_init(&na, 0, 4, 0x0a, 0x48);
	node_init(&nb, 1, 6, 0x0b, 0x49);
	node_init(&nc, 2, 8, 0x0c, 0x4a);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (int k = 0; k < 3; k++) {
		cm_free(nodes[k]->cm);
		nodes[k]->cm = NULL;
	}
	return 0;
}

#define A_REQ() sent_by_attr[0][CM_ATTR_REQ - 0x10]

/* The last message of attribute attr that node n (na or nb) sent, decoded. */
static struct cm_msg last_msg(const struct node *n, uint16_t attr)
{
	struct cm_msg m;

	assert_true(sent_by_attr[n->idx][attr - 0x10] > 0);
	assert_int_equal(cm_mad_decode(last_sent[n->idx][attr - 0x10], IB_MAD_LEN, &m), CM_MAD_OK);
	return m;
}

/* Hand node to a message as if from LID from_lid. */
static int inject(struct node *to, const struct cm_msg *m, uint16_t from_lid)
{
	uint8_t b[IB_MAD_LEN];
	struct cm_addr from = { .lid = from_lid };

	assert_int_equal(cm_mad_encode(m, b, IB_MAD_LEN), IB_MAD_LEN);
	return cm_input(to->cm, b, IB_MAD_LEN, &from);
}

static void test_setup(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	assert_int_equal(state_of(&na, &nb), CM_STATE_REQ_SENT);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(na.ups, 1);
	assert_int_equal(nb.ups, 1);
	/* the QPs point at each other with each other's PSNs */
	assert_int_equal(na.last_connect.remote_qpn, nb.last_up.local_qpn);
	assert_int_equal(nb.last_connect.remote_qpn, na.last_up.local_qpn);
	assert_int_equal(na.last_connect.remote_psn, nb.last_connect.local_psn);
	assert_int_equal(nb.last_connect.remote_psn, na.last_connect.local_psn);
	assert_int_equal(na.last_connect.path.dlid, 6);
	assert_int_equal(nb.last_connect.path.dlid, 4);
	assert_int_equal(na.last_connect.path_mtu, IB_MTU_2048);
	assert_int_equal(nb.last_connect.path_mtu, IB_MTU_2048);
	/* REQ asked for retry 7 / RNR 7; ack timeout = packet lifetime + 1 */
	assert_int_equal(nb.last_connect.retry_count, 7);
	assert_int_equal(nb.last_connect.rnr_retry, 7);
	assert_int_equal(nb.last_connect.timeout, 11);
	assert_false(nb.last_connect.path.is_global);
	/* both receive MTUs default to 65524: IP MTU 65520 */
	assert_int_equal(na.last_up.mtu, 65520);
	assert_int_equal(nb.last_up.mtu, 65520);
	assert_true(na.last_up.active);
	assert_false(nb.last_up.active);
	assert_int_equal(nb.last_up.peer.qpn, 0x48);
	assert_true(ib_gid_equal(&nb.last_up.peer.gid, &na.gid));
	assert_int_equal(na.last_up.remote_comm_id, nb.last_up.local_comm_id);
	assert_int_equal(nb.last_up.remote_comm_id, na.last_up.local_comm_id);
	assert_int_equal(sent_by_attr[0][CM_ATTR_REQ - 0x10], 1);
	assert_int_equal(sent_by_attr[1][CM_ATTR_REP - 0x10], 1);
	assert_int_equal(sent_by_attr[0][CM_ATTR_RTU - 0x10], 1);
	/* a second connect to the same peer is refused, from either side */
	assert_int_equal(connect(&na, &nb), -EALREADY);
	assert_int_equal(connect(&nb, &na), -EALREADY);
	assert_int_equal(cm_get_stats(na.cm)->established, 1);
	assert_int_equal(cm_next_deadline(na.cm), 0);
}

static void test_mtu(void **state)
{
	(void)state;
	nb.cfg.rx_mtu = 2048; /* B receives 2044 octets of IP per message */
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(na.last_up.mtu, 2044);
	assert_int_equal(nb.last_up.mtu, 2044);
	assert_int_equal(na.last_up.peer_rx_mtu, 2048);
	assert_int_equal(nb.last_up.peer_rx_mtu, 65524);
}

static void test_no_rc_flag(void **state)
{
	struct ipoib_hwaddr h;
	struct cm_path_info p;

	(void)state;
	node_start(&na);
	node_start(&nb);
	h = hw(&nb);
	h.flags = 0; /* a UD-only peer: the caller keeps it on UD; cm refuses */
	p = path_to(&na, &nb);
	assert_int_equal(cm_connect(na.cm, &h, &p), -EOPNOTSUPP);
	h.flags = IPOIB_HWADDR_F_UC;
	assert_int_equal(cm_connect(na.cm, &h, &p), -EOPNOTSUPP);
	assert_int_equal(q_len, 0);
	assert_int_equal(na.qp_created, 0);
}

static void test_rej_no_qp(void **state)
{
	struct cm_msg m;
	struct cm_ipoib_pdata pd;

	(void)state;
	nb.create_ret = -ENOMEM;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	deliver(&queue[0]); /* REQ to B, which answers REJ */
	assert_int_equal(q_len, 2);
	assert_int_equal(cm_mad_decode(queue[1].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_int_equal(m.attr_id, CM_ATTR_REJ);
	assert_int_equal(m.rej.reason, CM_REJ_NO_QP);
	assert_int_equal(m.rej.message_rejected, CM_MSG_REF_REQ);
	/* RFC 4755 3.2: the REJ carries the sender's UD QPN */
	assert_int_equal(cm_ipoib_pdata_decode(m.rej.private_data, &pd), CM_PDATA_OK);
	assert_int_equal(pd.ud_qpn, 0x49);
	q_len = 1;
	memmove(queue, queue + 1, sizeof(queue[0]));
	pump();
	assert_int_equal(na.downs, 1);
	assert_false(na.last_down_was_up);
	assert_int_equal(na.last_why, CM_CLOSE_REJECTED);
	assert_int_equal(na.last_down.rej_reason, CM_REJ_NO_QP);
	assert_int_equal(na.qp_destroyed, 1);
	assert_int_equal(state_of(&na, &nb), CM_STATE_COUNT);
	assert_int_equal(cm_get_stats(na.cm)->rej_rcvd[CM_REJ_NO_QP], 1);
	/* timewait passes, the entry goes, nothing is left */
	advance(200);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 0);
	assert_int_equal(cm_for_each(nb.cm, NULL, NULL), 0);
}

static void test_rej_service_id(void **state)
{
	struct ipoib_hwaddr h;
	struct cm_path_info p;

	(void)state;
	node_start(&na);
	node_start(&nb);
	h = hw(&nb);
	h.qpn = 0x77; /* no such UD QP at B: its service ID is not B's */
	p = path_to(&na, &nb);
	assert_int_equal(cm_connect(na.cm, &h, &p), 0);
	pump();
	assert_int_equal(na.last_why, CM_CLOSE_REJECTED);
	assert_int_equal(na.last_down.rej_reason, CM_REJ_INVALID_SERVICE_ID);
	assert_int_equal(nb.qp_created, 0);
	assert_int_equal(cm_get_stats(nb.cm)->rx_unclaimed, 1);
}

static void test_timeout_retries(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_b = ~0u; /* B hears nothing */
	assert_int_equal(connect(&na, &nb), 0);
	/* wait = 17 ms (code 12) + 2 * 5 ms (packet lifetime 10) = 27 ms per try */
	advance(26);
	assert_int_equal(A_REQ(), 1);
	advance(1);
	assert_int_equal(A_REQ(), 2);
	advance(27 * 2);
	assert_int_equal(A_REQ(), 4); /* 1 + max_cm_retries (3) */
	assert_int_equal(na.downs, 0);
	advance(27);
	assert_int_equal(A_REQ(), 4); /* bounded */
	assert_int_equal(na.downs, 1);
	assert_int_equal(na.last_why, CM_CLOSE_TIMEOUT);
	assert_int_equal(sent_by_attr[0][CM_ATTR_REJ - 0x10], 1); /* REJ "timeout" */
	assert_int_equal(last_msg(&na, CM_ATTR_REJ).rej.reason, CM_REJ_TIMEOUT);
	assert_int_equal(cm_get_stats(na.cm)->retransmits, 3);
	assert_int_equal(cm_get_stats(na.cm)->timeouts, 1);
	advance(1000);
	assert_int_equal(A_REQ(), 4);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 0);
	assert_int_equal(cm_next_deadline(na.cm), 0);
}

static void test_rtu_lost(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_b = 1u << (CM_ATTR_RTU - 0x10);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_REP_SENT);
	/* B resends REP; A answers each with its RTU again (a duplicate REP) */
	advance(27);
	assert_int_equal(cm_get_stats(na.cm)->rx_dup_rep, 1);
	/* traffic on the QP counts as the RTU (IBA "communication established") */
	{
		struct ipoib_hwaddr h = hw(&na);

		assert_int_equal(cm_activity(nb.cm, &h), 0);
	}
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(nb.ups, 1);
	assert_int_equal(na.ups, 1);
}

/* An RTU must name both ends: one whose sender comm id is not the peer's (another
 * connection's, or forged) leaves the passive side waiting; the right one completes. */
static void test_rtu_wrong_comm_id(void **state)
{
	struct cm_msg rtu;

	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_b = 1u << (CM_ATTR_RTU - 0x10);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(state_of(&nb, &na), CM_STATE_REP_SENT);
	rtu = last_msg(&na, CM_ATTR_RTU);
	rtu.rtu.local_comm_id ^= 0x10000;
	assert_int_equal(inject(&nb, &rtu, na.lid), 0);
	assert_int_equal(state_of(&nb, &na), CM_STATE_REP_SENT);
	assert_int_equal(nb.ups, 0);
	assert_int_equal(cm_get_stats(nb.cm)->rx_wrong_state, 1);
	rtu.rtu.local_comm_id ^= 0x10000;
	assert_int_equal(inject(&nb, &rtu, na.lid), 0);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(nb.ups, 1);
}

static void test_rep_sent_timeout(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_b = 1u << (CM_ATTR_RTU - 0x10);
	drop_to_a = 1u << (CM_ATTR_REP - 0x10) | 1u << (CM_ATTR_REJ - 0x10);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	/* B's REP retries are bounded by the REQ's MaxCMRetries (3); A retransmits its
	 * REQ too, which B answers with the REP it has (duplicate REQ) */
	advance(400);
	assert_int_equal(nb.downs, 1);
	assert_int_equal(nb.last_why, CM_CLOSE_TIMEOUT);
	assert_false(nb.last_down_was_up);
	assert_int_equal(nb.qp_created, 1);
	assert_true(cm_get_stats(nb.cm)->rx_dup_req >= 1);
	assert_int_equal(na.last_why, CM_CLOSE_TIMEOUT);
}

static void crossing(int order)
{
	struct node *lo = &na, *hi = &nb; /* A's address is the smaller one */

	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	assert_int_equal(connect(&nb, &na), 0);
	assert_int_equal(q_len, 2);
	if (order) { /* B's REQ reaches A first */
		struct mad t = queue[0];

		queue[0] = queue[1];
		queue[1] = t;
	}
	pump();
	advance(500);
	/* exactly one connection, up on both sides, the same QP pair */
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(count_conns(&na), 1);
	assert_int_equal(count_conns(&nb), 1);
	assert_int_equal(na.ups, 1);
	assert_int_equal(nb.ups, 1);
	assert_int_equal(na.last_up.remote_qpn, nb.last_up.local_qpn);
	assert_int_equal(nb.last_up.remote_qpn, na.last_up.local_qpn);
	/* the rule's winner (the smaller address) accepted: it is the passive side and
	 * kept the QP it had made for its own REQ; the loser rejected with consumer reject */
	assert_false(lo->last_up.active);
	assert_true(hi->last_up.active);
	assert_int_equal(cm_get_stats(lo->cm)->crossing_accepted, 1);
	assert_int_equal(cm_get_stats(hi->cm)->crossing_rejected, 1);
	assert_int_equal(cm_get_stats(hi->cm)->rej_sent[CM_REJ_CONSUMER], 1);
	assert_int_equal(lo->qp_created, 1);
	assert_int_equal(hi->qp_created, 1);
	assert_int_equal(na.downs + nb.downs, 0);
	assert_int_equal(cm_get_stats(na.cm)->retransmits + cm_get_stats(nb.cm)->retransmits, 0);
}

static void test_crossing_a_first(void **state)
{
	(void)state;
	crossing(0);
}

static void test_crossing_b_first(void **state)
{
	(void)state;
	crossing(1);
}

static void test_crossing_other_address_order(void **state)
{
	(void)state;
	/* B's address made the smaller one. The UD QPN comes before the GID in the
	 * link-layer address, so a smaller QPN is what does it (B's GID stays the
	 * larger): now B must accept and A reject */
	node_init(&nb, 1, 6, 0x0b, 0x47);
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	assert_int_equal(connect(&nb, &na), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_false(nb.last_up.active);
	assert_true(na.last_up.active);
	assert_int_equal(cm_get_stats(nb.cm)->crossing_accepted, 1);
	assert_int_equal(cm_get_stats(na.cm)->crossing_rejected, 1);
}

static void test_crossing_rule(void **state)
{
	struct ipoib_hwaddr a = hw(&na), b = hw(&nb);

	(void)state;
	/* flags do not take part: a smaller QPN with flags set still wins */
	a.flags = IPOIB_HWADDR_F_RC | IPOIB_HWADDR_F_UC;
	b.flags = 0;
	assert_true(cm_crossing_accept(&a, &b));
	assert_false(cm_crossing_accept(&b, &a));
	b.gid = a.gid;
	b.qpn = 0x47; /* same GID, smaller QPN: the QPN octets come first */
	assert_false(cm_crossing_accept(&a, &b));
	assert_true(cm_crossing_accept(&b, &a));
}

static void test_dreq(void **state)
{
	struct ipoib_hwaddr h;

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	h = hw(&nb);
	assert_int_equal(cm_disconnect(na.cm, &h), 0);
	assert_int_equal(na.downs, 1);
	assert_true(na.last_down_was_up);
	assert_int_equal(na.last_why, CM_CLOSE_LOCAL);
	pump(); /* DREQ -> B, DREP -> A */
	assert_int_equal(nb.downs, 1);
	assert_true(nb.last_down_was_up);
	assert_int_equal(nb.last_why, CM_CLOSE_PEER);
	assert_int_equal(sent_by_attr[1][CM_ATTR_DREP - 0x10], 1);
	assert_int_equal(na.qp_destroyed, 1);
	assert_int_equal(nb.qp_destroyed, 1);
	assert_int_equal(cm_disconnect(na.cm, &h), -ENOENT);
	/* a retransmitted DREQ in timewait gets its DREP again */
	assert_int_equal(cm_get_stats(na.cm)->retransmits, 0);
	advance(200);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 0);
	assert_int_equal(cm_for_each(nb.cm, NULL, NULL), 0);
	/* and a new connection can be made */
	assert_int_equal(connect(&nb, &na), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
}

/* A DREP answers a DREQ: one arriving on an established connection that sent none is
 * out of place and changes nothing; a REJ arriving in TimeWait neither closes the
 * connection again nor prolongs the wait. */
static void test_stray_drep_and_rej(void **state)
{
	struct cm_msg m = { .method = IB_MAD_METHOD_SEND };
	struct ipoib_hwaddr h;
	uint32_t a_id, b_id;

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	a_id = na.last_up.local_comm_id;
	b_id = nb.last_up.local_comm_id;
	m.attr_id = CM_ATTR_DREP;
	m.drep.local_comm_id = a_id;
	m.drep.remote_comm_id = b_id;
	assert_int_equal(inject(&nb, &m, na.lid), 0);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(nb.downs, 0);
	assert_int_equal(cm_get_stats(nb.cm)->rx_wrong_state, 1);

	h = hw(&nb);
	assert_int_equal(cm_disconnect(na.cm, &h), 0);
	pump(); /* DREQ -> B, DREP -> A: both in TimeWait for 100 ms */
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 1);
	advance(50);
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_REJ;
	m.method = IB_MAD_METHOD_SEND;
	m.rej.local_comm_id = b_id;
	m.rej.remote_comm_id = a_id;
	m.rej.message_rejected = CM_MSG_REF_REP;
	m.rej.reason = CM_REJ_CONSUMER;
	assert_int_equal(inject(&na, &m, nb.lid), 0);
	assert_int_equal(cm_get_stats(na.cm)->rx_wrong_state, 1);
	assert_int_equal(na.downs, 1);
	assert_int_equal(na.last_why, CM_CLOSE_LOCAL);
	advance(49);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 1);
	advance(2);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 0);
}

static void test_dreq_lost_drep(void **state)
{
	struct ipoib_hwaddr h;

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	drop_to_a = 1u << (CM_ATTR_DREP - 0x10);
	h = hw(&nb);
	assert_int_equal(cm_disconnect(na.cm, &h), 0);
	advance(30); /* A resends its DREQ; B is in timewait and answers DREP again */
	assert_int_equal(cm_get_stats(nb.cm)->rx_dup_dreq, 1);
	drop_to_a = 0;
	advance(30);
	assert_int_equal(nb.downs, 1);
	advance(200);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 0);
}

static void test_idle(void **state)
{
	struct ipoib_hwaddr h;

	(void)state;
	na.cfg.idle_timeout_ms = 1000;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	h = hw(&nb);
	advance(600);
	assert_int_equal(cm_activity(na.cm, &h), 0);
	advance(600);
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	{
		struct cm_conn_info i;

		assert_int_equal(cm_lookup(na.cm, &h, &i), 0);
		assert_int_equal(i.idle_ms, 600);
		assert_int_equal(i.age_ms, 1200);
	}
	advance(400);
	assert_int_equal(na.downs, 1);
	assert_int_equal(na.last_why, CM_CLOSE_IDLE);
	assert_int_equal(nb.last_why, CM_CLOSE_PEER);
	assert_int_equal(state_of(&nb, &na), CM_STATE_COUNT);
}

static void test_neigh_expired(void **state)
{
	struct ipoib_hwaddr h;

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	h = hw(&na);
	h.flags = 0; /* flags do not matter for the lookup */
	assert_int_equal(cm_neigh_expired(nb.cm, &h), 0);
	assert_int_equal(nb.last_why, CM_CLOSE_NEIGH);
	pump();
	assert_int_equal(na.last_why, CM_CLOSE_PEER);
	assert_int_equal(cm_neigh_expired(nb.cm, &h), -ENOENT);
}

/* An IB router went down: every connection whose path DLID is that LID goes (both
 * ends of each: active and passive), others stay. */
static void test_disconnect_dlid(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(cm_disconnect_dlid(na.cm, (uint16_t)(nb.lid + 100)), 0);
	assert_int_equal(na.downs, 0);
	assert_int_equal(cm_disconnect_dlid(na.cm, nb.lid), 1);
	assert_int_equal(na.downs, 1);
	assert_int_equal(na.last_why, CM_CLOSE_PATH);
	assert_string_equal(cm_close_reason_name(CM_CLOSE_PATH), "path-down");
	assert_int_equal(cm_disconnect_dlid(na.cm, nb.lid), 0); /* already going */
	pump();
	assert_int_equal(nb.last_why, CM_CLOSE_PEER);
	advance(200);
	/* A new connection, taken down from the other (passive) end. */
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(cm_disconnect_dlid(nb.cm, na.lid), 1); /* nb's path leads to na */
	assert_int_equal(nb.last_why, CM_CLOSE_PATH);
}

/* A connects to B through an IB router (B on another subnet): B's connection takes its
 * own path back (return_path), not the LIDs in the REQ, which are A's subnet's, with the
 * router the REQ came through as its DLID. */
static struct cm_path_info routed_path(void)
{
	struct cm_path_info p = path_to(&na, &nb);

	p.dlid = RT_A;
	p.has_grh = true;
	p.hop_limit = 255;
	return p;
}

static int connect_routed(void)
{
	struct ipoib_hwaddr h = hw(&nb);
	struct cm_path_info p = routed_path();

	return cm_connect(na.cm, &h, &p);
}

static void routed_setup(int rp_ret)
{
	nb.cfg.cb = &cbs_rp;
	nb.rp_ret = rp_ret;
	nb.rp = (struct cm_path_info){ .dlid = RT_B,
				       .has_grh = true,
				       .hop_limit = 255,
				       .sl = 2,
				       .flow_label = 0x12345,
				       .mtu = IB_MTU_1024 };
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect_routed(), 0);
	pump();
}

static void test_return_path(void **state)
{
	(void)state;
	routed_setup(0);
	assert_int_equal(nb.rp_asked, 1);
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	/* B's QP goes to the router on its side, not to A's LID (4) from the REQ. */
	assert_int_equal(nb.last_connect.path.dlid, RT_B);
	assert_true(nb.last_connect.path.is_global);
	assert_int_equal(nb.last_connect.path.sl, 2);
	assert_int_equal(nb.last_connect.path.flow_label, 0x12345);
	assert_int_equal(nb.last_connect.path.hop_limit, 255);
	assert_memory_equal(nb.last_connect.path.dgid.raw, na.gid.raw, IB_GID_LEN);
	assert_int_equal(nb.last_connect.path_mtu, IB_MTU_1024); /* the smaller of the two */
	assert_int_equal(na.last_connect.path_mtu, IB_MTU_2048);
	assert_int_equal(na.last_connect.path.dlid, RT_A);
	assert_int_equal(cm_get_stats(nb.cm)->return_path_other_router, 0);
	/* A router going down takes the passive end's connection too. */
	assert_int_equal(cm_disconnect_dlid(nb.cm, RT_B), 1);
	assert_int_equal(nb.last_why, CM_CLOSE_PATH);
}

static void test_return_path_later(void **state)
{
	struct cm_path_info p;

	(void)state;
	routed_setup(-EINPROGRESS);
	assert_int_equal(sent_by_attr[1][CM_ATTR_MRA - 0x10], 1);
	assert_int_equal(state_of(&nb, &na), CM_STATE_MRA_SENT);
	assert_int_equal(nb.qp_created, 0);
	advance(100);
	assert_int_equal(A_REQ(), 1); /* the MRA holds A */
	p = nb.rp;
	p.dlid = 77; /* the SA names another router than the one the REQ came through */
	assert_int_equal(cm_return_path(nb.cm, &nc.gid, &p), 0); /* another GID */
	assert_int_equal(cm_return_path(nb.cm, &na.gid, &p), 1);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	/* Both ends on one router (an RC QP takes packets only from its DLID). */
	assert_int_equal(nb.last_connect.path.dlid, RT_B);
	assert_int_equal(nb.last_connect.path.sl, 2); /* the rest from the return path */
	assert_int_equal(cm_get_stats(nb.cm)->return_path_other_router, 1);
	assert_int_equal(cm_return_path(nb.cm, &na.gid, &p), 0); /* no longer waiting */
}

static void test_return_path_none(void **state)
{
	(void)state;
	routed_setup(-EINPROGRESS);
	assert_int_equal(cm_return_path(nb.cm, &na.gid, NULL), 1);
	pump();
	assert_int_equal(na.last_why, CM_CLOSE_REJECTED);
	assert_int_equal(na.last_down.rej_reason, CM_REJ_INVALID_GID);
	assert_int_equal(cm_get_stats(nb.cm)->closed[CM_CLOSE_PATH], 1);
	assert_int_equal(nb.connects, 0);
	/* Known at once to have no path: rejected at once. */
	teardown(NULL);
	setup(NULL);
	routed_setup(-EHOSTUNREACH);
	assert_int_equal(na.last_down.rej_reason, CM_REJ_INVALID_GID);
	assert_int_equal(nb.qp_created, 0);
}

/* Without a return_path callback: the router the REQ came through. */
static void test_return_path_default(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect_routed(), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(nb.last_connect.path.dlid, RT_B);
	assert_true(nb.last_connect.path.is_global);
}

static void test_duplicate_req(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	/* the REQ arrives twice (a retransmission crossing the REP) */
	queue[1] = queue[0];
	q_len = 2;
	deliver(&queue[0]);
	deliver(&queue[1]);
	assert_int_equal(cm_get_stats(nb.cm)->rx_dup_req, 1);
	assert_int_equal(nb.qp_created, 1);
	assert_int_equal(sent_by_attr[1][CM_ATTR_REP - 0x10], 2); /* same REP again */
	assert_memory_equal(queue[2].b, queue[3].b, IB_MAD_LEN);
	memmove(queue, queue + 2, 2 * sizeof(queue[0]));
	q_len = 2;
	pump(); /* A: REP (RTU), then the same REP again: RTU again */
	assert_int_equal(cm_get_stats(na.cm)->rx_dup_rep, 1);
	assert_int_equal(na.ups, 1);
	assert_int_equal(nb.ups, 1);
	assert_int_equal(count_conns(&nb), 1);
	assert_int_equal(cm_for_each(nb.cm, NULL, NULL), 1);
	/* and a REQ retransmitted after the connection is up changes nothing */
	drop_to_b = 0;
	assert_int_equal(nb.connects, 1);
}

static void test_duplicate_req_after_timeout(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_a = 1u << (CM_ATTR_REP - 0x10); /* B's first REP is lost */
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	drop_to_a = 0;
	advance(27); /* A resends the REQ; B resends its REP; A connects */
	assert_int_equal(A_REQ(), 2);
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(nb.qp_created, 1);
	assert_int_equal(nb.ups, 1);
	assert_int_equal(cm_for_each(nb.cm, NULL, NULL), 1);
}

static void test_stale_rep(void **state)
{
	struct mad rep;
	struct cm_msg m;

	(void)state;
	node_start(&na);
	node_start(&nb);
	drop_to_a = ~0u;
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	/* A hears nothing and gives up after 1 + 3 tries of 27 ms */
	advance(27 * 4 + 1);
	assert_int_equal(na.last_why, CM_CLOSE_TIMEOUT);
	drop_to_a = 0;
	q_len = 0;
	/* then B's REP reaches A late. */
	/* Build the late REP by hand from what B would say: A's REQ comm ID. */
	memset(&m, 0, sizeof(m));
	m.attr_id = CM_ATTR_REP;
	m.method = IB_MAD_METHOD_SEND;
	m.rep.local_comm_id = 0x99;
	m.rep.remote_comm_id = na.last_down.local_comm_id;
	m.rep.local_qpn = 0x555;
	m.rep.private_data[3] = 0x49;
	m.rep.private_data[6] = 0xff;
	m.rep.private_data[7] = 0xf4;
	rep.from = &nb;
	rep.dlid = na.lid;
	assert_int_equal(cm_mad_encode(&m, rep.b, IB_MAD_LEN), IB_MAD_LEN);
	deliver(&rep); /* in A's timewait: REJ "stale connection" */
	assert_int_equal(q_len, 1);
	assert_int_equal(cm_mad_decode(queue[0].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_int_equal(m.attr_id, CM_ATTR_REJ);
	assert_int_equal(m.rej.reason, CM_REJ_STALE_CONN);
	assert_int_equal(m.rej.remote_comm_id, 0x99);
	q_len = 0;
	advance(200); /* A's entry is gone now: REJ "invalid communication ID" */
	q_len = 0;
	deliver(&rep);
	assert_int_equal(q_len, 1);
	assert_int_equal(cm_mad_decode(queue[0].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_int_equal(m.rej.reason, CM_REJ_INVALID_COMM_ID);
	assert_int_equal(m.rej.message_rejected, CM_MSG_REF_REP);
	assert_int_equal(na.connects, 0);
	assert_int_equal(na.ups, 0);
	assert_int_equal(cm_get_stats(na.cm)->rx_stale, 2);
}

static void test_mra(void **state)
{
	(void)state;
	nb.create_ret = -EINPROGRESS;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump(); /* REQ -> B: MRA -> A */
	assert_int_equal(sent_by_attr[1][CM_ATTR_MRA - 0x10], 1);
	assert_int_equal(state_of(&nb, &na), CM_STATE_MRA_SENT);
	/* A now waits the MRA's service timeout (code 16: 269 ms) + 10, not 27 ms */
	advance(200);
	assert_int_equal(A_REQ(), 1);
	nb.create_ret = 0;
	assert_int_equal(cm_accept_ready(nb.cm, nb.pending_lcid, (void *)1, 0x777), 0);
	pump();
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(na.last_up.remote_qpn, 0x777);
	assert_int_equal(A_REQ(), 1);
	assert_int_equal(cm_accept_ready(nb.cm, nb.pending_lcid, (void *)1, 0x777), -ENOENT);
}

static void test_mra_fail(void **state)
{
	(void)state;
	nb.create_ret = -EINPROGRESS;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(cm_accept_fail(nb.cm, nb.pending_lcid), 0);
	pump();
	assert_int_equal(na.last_why, CM_CLOSE_REJECTED);
	assert_int_equal(na.last_down.rej_reason, CM_REJ_NO_QP);
	assert_int_equal(nb.downs, 1); /* the pending attempt ends for B's user too */
}

static void test_peer_restart(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	/* B restarts: a new instance knows nothing and connects again */
	cm_free(nb.cm);
	nb.cm = NULL;
	q_len = 0;
	nb.cfg.seed = 0x9999;
	node_start(&nb);
	assert_int_equal(connect(&nb, &na), 0);
	pump();
	/* A replaced the old connection: DREQ for it (B answers from nowhere with DREP),
	 * then accepted the new one */
	assert_int_equal(na.last_why, CM_CLOSE_REPLACED);
	assert_int_equal(na.ups, 2);
	assert_int_equal(state_of(&na, &nb), CM_STATE_ESTABLISHED);
	assert_int_equal(state_of(&nb, &na), CM_STATE_ESTABLISHED);
	assert_int_equal(count_conns(&na), 1);
	advance(200);
	assert_int_equal(cm_for_each(na.cm, NULL, NULL), 1);
}

static void test_three_nodes(void **state)
{
	(void)state;
	node_start(&na);
	node_start(&nb);
	node_start(&nc);
	assert_int_equal(connect(&na, &nb), 0);
	assert_int_equal(connect(&nc, &na), 0);
	assert_int_equal(connect(&nb, &nc), 0);
	pump();
	assert_int_equal(count_conns(&na), 2);
	assert_int_equal(count_conns(&nb), 2);
	assert_int_equal(count_conns(&nc), 2);
}

static void list_cb(const struct cm_conn_info *i, void *arg)
{
	char *out = arg;
	size_t n = strlen(out);

	snprintf(out + n, 512 - n, "%s %s qpn=%x/%x mtu=%u;", cm_state_name(i->state),
		 i->active ? "active" : "passive", i->local_qpn, i->remote_qpn, i->mtu);
}

static void test_listing_and_orphans(void **state)
{
	char out[512] = "";
	struct cm_msg m = { .attr_id = CM_ATTR_CLASS_PORT_INFO, .method = IB_MAD_METHOD_GET };
	struct mad get = { .from = &na, .dlid = 6 };

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	pump();
	assert_int_equal(cm_for_each(na.cm, list_cb, out), 1);
	assert_string_equal(out, "established active qpn=100/200 mtu=65520;");
	/* ClassPortInfo Get: no link claims it; the orphan handler answers GetResp */
	m.tid = 77;
	assert_int_equal(cm_mad_encode(&m, get.b, IB_MAD_LEN), IB_MAD_LEN);
	q_len = 0;
	deliver(&get);
	assert_int_equal(q_len, 1);
	assert_int_equal(cm_mad_decode(queue[0].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_true(m.response);
	assert_true(m.tid == 77);
	assert_int_equal(m.cpi.class_version, 2);
	assert_int_equal(m.cpi.resp_time_value, 12);
	/* a malformed MAD is counted by reason and claimed by nobody */
	q_len = 0;
	get.b[2] = 1;
	{
		struct cm_addr from = { .lid = 4 };

		assert_int_equal(cm_input(nb.cm, get.b, IB_MAD_LEN, &from), -EBADMSG);
		assert_int_equal(cm_input(nb.cm, get.b, 100, &from), -EBADMSG);
	}
	assert_int_equal(cm_get_stats(nb.cm)->rx_bad[CM_MAD_ERR_CLASS_VERSION], 1);
	assert_int_equal(cm_get_stats(nb.cm)->rx_bad[CM_MAD_ERR_SHORT], 1);
	assert_int_equal(q_len, 0);
}

static void test_bad_pdata(void **state)
{
	struct cm_msg m;
	struct mad req;
	struct cm_addr from = { .lid = 4 };

	(void)state;
	node_start(&na);
	node_start(&nb);
	assert_int_equal(connect(&na, &nb), 0);
	req = queue[0];
	q_len = 0;
	assert_int_equal(cm_mad_decode(req.b, IB_MAD_LEN, &m), CM_MAD_OK);
	m.req.private_data[7] = 4, m.req.private_data[6] = 0; /* MTU 4 */
	assert_int_equal(cm_mad_encode(&m, req.b, IB_MAD_LEN), IB_MAD_LEN);
	assert_int_equal(cm_input(nb.cm, req.b, IB_MAD_LEN, &from), 0);
	assert_int_equal(cm_get_stats(nb.cm)->rx_bad_pdata[CM_PDATA_ERR_MTU], 1);
	assert_int_equal(nb.qp_created, 0);
	assert_int_equal(q_len, 1); /* REJ consumer */
	assert_int_equal(cm_mad_decode(queue[0].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_int_equal(m.rej.reason, CM_REJ_CONSUMER);
	/* UC is not offered: REJ "invalid transport service type" */
	q_len = 0;
	assert_int_equal(cm_mad_decode(req.b, IB_MAD_LEN, &m), CM_MAD_OK);
	m.req.transport_service_type = CM_TST_UC;
	m.req.private_data[6] = 0xff, m.req.private_data[7] = 0xf4;
	assert_int_equal(cm_mad_encode(&m, req.b, IB_MAD_LEN), IB_MAD_LEN);
	assert_int_equal(cm_input(nb.cm, req.b, IB_MAD_LEN, &from), 0);
	assert_int_equal(cm_mad_decode(queue[0].b, IB_MAD_LEN, &m), CM_MAD_OK);
	assert_int_equal(m.rej.reason, CM_REJ_INVALID_TRANSPORT_TYPE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_setup),
		T(test_mtu),
		T(test_no_rc_flag),
		T(test_rej_no_qp),
		T(test_rej_service_id),
		T(test_timeout_retries),
		T(test_rtu_lost),
		T(test_rtu_wrong_comm_id),
		T(test_rep_sent_timeout),
		T(test_crossing_a_first),
		T(test_crossing_b_first),
		T(test_crossing_other_address_order),
		T(test_crossing_rule),
		T(test_dreq),
		T(test_stray_drep_and_rej),
		T(test_dreq_lost_drep),
		T(test_idle),
		T(test_neigh_expired),
		T(test_disconnect_dlid),
		T(test_return_path),
		T(test_return_path_later),
		T(test_return_path_none),
		T(test_return_path_default),
		T(test_duplicate_req),
		T(test_duplicate_req_after_timeout),
		T(test_stale_rep),
		T(test_mra),
		T(test_mra_fail),
		T(test_peer_restart),
		T(test_three_nodes),
		T(test_listing_and_orphans),
		T(test_bad_pdata),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
