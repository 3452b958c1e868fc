/*
 * ipoib_link's lifecycle around port events, on a fake port and a fake SA client (the
 * three sa_* calls the link makes are defined here): the link comes up when the
 * broadcast group's join answers; an SM change or client reregister leaves it up and
 * sending on the groups' old address handles while the SA client rejoins (as Linux's
 * ipoib keeps its carrier), a rejoin that moves a group to another MLID rebuilds the
 * AH and the attachment without a DOWN; only PORT_DOWN takes the link down. A failover
 * pair tracks this link's state: a DOWN here is a FAULT there.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ipoib/ipoib_link.h"
#include "lib/ipoib.h"
#include "sm-client/sa.h"

/* ---- fake port ---------------------------------------------------------------------- */

struct ibp_port {
	int unused;
};
struct ibp_qp {
	uint32_t qpn;
	uint16_t attached_mlid; /* the broadcast group's, the last attached */
	unsigned attaches, detaches;
};
struct ibp_ah {
	struct ibp_ah_attr a;
};

static struct {
	struct ibp_qp qp;
	unsigned ahs_live;
	struct ibp_send last; /* the last send posted */
	unsigned sends;
} fp;

static struct ibp_buf *f_buf_get(struct ibp_port *port)
{
	struct ibp_buf *b = calloc(1, sizeof(*b) + 4096);
	(void)port;

	b->data = (uint8_t *)(b + 1);
	b->cap = 4096;
	return b;
}
static void f_buf_put(struct ibp_port *port, struct ibp_buf *b)
{
	(void)port;
	free(b);
}
static int f_create_qp(struct ibp_port *port, const struct ibp_qp_init *init, struct ibp_qp **out)
{
	(void)port;
	(void)init;
	fp.qp.qpn = 0x48;
	*out = &fp.qp;
	return 0;
}
static int f_qp_ready(struct ibp_qp *qp, const struct ibp_qp_connect *rc)
{
	(void)qp;
	(void)rc;
	return 0;
}
static void f_destroy_qp(struct ibp_qp *qp)
{
	(void)qp;
}
static uint32_t f_qp_num(const struct ibp_qp *qp)
{
	return qp->qpn;
}
static int f_create_ah(struct ibp_port *port, const struct ibp_ah_attr *attr, struct ibp_ah **out)
{
	struct ibp_ah *ah = calloc(1, sizeof(*ah));
	(void)port;

	ah->a = *attr;
	fp.ahs_live++;
	*out = ah;
	return 0;
}
static void f_destroy_ah(struct ibp_ah *ah)
{
	fp.ahs_live--;
	free(ah);
}
static int f_attach(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	(void)mgid;
	qp->attaches++;
	qp->attached_mlid = mlid;
	return 0;
}
static int f_detach(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	(void)mgid;
	(void)mlid;
	qp->detaches++;
	return 0;
}
static int f_post_send(struct ibp_send *s, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		fp.last = s[i];
		fp.sends++;
		free(s[i].buf); /* completed at once */
	}
	return (int)n;
}
static int f_post_recv(struct ibp_qp *qp, struct ibp_buf **bufs, unsigned n)
{
	(void)qp;
	for (unsigned i = 0; i < n; i++)
		free(bufs[i]);
	return (int)n;
}

static const struct ibp_ops fake_ops = {
	.name = "fake",
	.buf_get = f_buf_get,
	.buf_put = f_buf_put,
	.create_qp = f_create_qp,
	.qp_ready = f_qp_ready,
	.destroy_qp = f_destroy_qp,
	.qp_num = f_qp_num,
	.create_ah = f_create_ah,
	.destroy_ah = f_destroy_ah,
	.attach_mcast = f_attach,
	.detach_mcast = f_detach,
	.post_send = f_post_send,
	.post_recv = f_post_recv,
};

/* ---- fake SA client: remembers each membership's callback --------------------------- */

#define MAX_JOINS 8
static struct {
	struct {
		union ib_gid mgid;
		sa_mcast_cb cb;
		void *arg;
	} j[MAX_JOINS];
	unsigned n, joins, leaves;
} fsa;

int sa_mcast_join(struct sa_client *c, const struct sa_mcast_params *p, sa_mcast_cb cb, void *arg)
{
	unsigned i;
	(void)c;

	fsa.joins++;
	for (i = 0; i < fsa.n; i++)
		if (ib_gid_equal(&fsa.j[i].mgid, &p->mgid))
			break;
	if (i == fsa.n) {
		if (fsa.n == MAX_JOINS)
			return -ENOSPC;
		fsa.n++;
	}
	fsa.j[i].mgid = p->mgid;
	fsa.j[i].cb = cb;
	fsa.j[i].arg = arg;
	return 0;
}

int sa_mcast_leave(struct sa_client *c, const union ib_gid *mgid)
{
	(void)c;
	(void)mgid;
	fsa.leaves++;
	return 0;
}

int sa_path_resolve(struct sa_client *c, const struct sa_path_query *q, sa_path_cb cb, void *arg)
{
	(void)c;
	(void)q;
	(void)cb;
	(void)arg;
	return 0; /* never answers: no path is needed here */
}

/* The SA answers the join of mgid (as it does again after a reregister). */
static void sa_answer(const union ib_gid *mgid, uint16_t mlid)
{
	struct sa_mcast_group g;

	memset(&g, 0, sizeof(g));
	g.mgid = *mgid;
	g.mlid = mlid;
	g.qkey = 0x0b1b;
	g.mtu = IB_MTU_2048;
	g.pkey = 0xffff;
	for (unsigned i = 0; i < fsa.n; i++)
		if (ib_gid_equal(&fsa.j[i].mgid, mgid)) {
			fsa.j[i].cb(fsa.j[i].arg, 0, &g);
			return;
		}
	fail_msg("no join for that group");
}

/* ---- the link ----------------------------------------------------------------------- */

static unsigned ups, downs;

static void state_cb(void *ctx, struct ipoib_link *l, bool up)
{
	(void)ctx;
	(void)l;
	if (up)
		ups++;
	else
		downs++;
}

static struct ipoib_link *link_up(union ib_gid *bcast)
{
	static struct ibp_port port;
	static struct sa_client *sa = (struct sa_client *)&port; /* never dereferenced */
	struct ibp_port_attr pa = { .state = IBP_PORT_ACTIVE,
				    .lid = 5,
				    .gid_prefix = 0xfe80000000000000ull,
				    .port_guid = 0x0002c90300a10005ull,
				    .pkeys = { 0xffff },
				    .n_pkeys = 1 };
	struct ipoib_link_config cfg = {
		.name = "ib0",
		.ops = &fake_ops,
		.port = &port,
		.sa = sa,
		.attr = &pa,
		.recv_depth = 4,
		.send_depth = 4,
		.state_cb = state_cb,
	};
	struct ipoib_link *l;

	memset(&fp, 0, sizeof(fp));
	memset(&fsa, 0, sizeof(fsa));
	ups = downs = 0;
	assert_int_equal(ipoib_link_new(&cfg, &l), 0);
	assert_int_equal(ipoib_link_start(l), 0);
	assert_false(ipoib_link_is_up(l));
	assert_int_equal(ipoib_mgid_broadcast(0xffff, IB_MGID_SCOPE_LINK, bcast), 0);
	sa_answer(bcast, 0xc000);
	assert_true(ipoib_link_is_up(l));
	assert_int_equal(ups, 1);
	assert_int_equal(fp.qp.attached_mlid, 0xc000);
	return l;
}

/* A broadcast of one octet: returns the AH it went out on. */
static struct ibp_ah *bcast_once(struct ipoib_link *l)
{
	struct ibp_buf *b = ipoib_link_buf(l);
	unsigned before = fp.sends;

	b->data[IPOIB_ENCAP_LEN] = 0x45;
	b->len = 1;
	assert_int_equal(ipoib_link_xmit_bcast(l, 0x0800, b), 0);
	assert_int_equal(fp.sends, before + 1);
	assert_int_equal(fp.last.remote_qpn, 0xffffff);
	assert_int_equal(fp.last.remote_qkey, 0x0b1b);
	return fp.last.ah;
}

static void sm_change_and_reregister_keep_the_link_up(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ibp_ah *ah = bcast_once(l);
	struct ipoib_link_stats st;
	static const enum ibp_event_type evs[] = { IBP_EVENT_SM_CHANGE, IBP_EVENT_CLIENT_REREGISTER,
						   IBP_EVENT_LID_CHANGE, IBP_EVENT_PORT_ACTIVE };
	(void)state;

	assert_int_equal(ah->a.dlid, 0xc000);
	for (unsigned i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		struct ibp_event ev = { .type = evs[i] };

		ipoib_link_port_event(l, &ev);
		/* Still up, and still sending on the group's AH while the SA client rejoins. */
		assert_true(ipoib_link_is_up(l));
		assert_ptr_equal(bcast_once(l), ah);
		/* The same group answered again: nothing rebuilt, no second UP. */
		sa_answer(&bcast, 0xc000);
		assert_ptr_equal(bcast_once(l), ah);
	}
	assert_int_equal(downs, 0);
	assert_int_equal(ups, 1);
	assert_int_equal(fp.qp.attaches, 1);
	ipoib_link_stats(l, &st);
	assert_int_equal(st.drops[IPOIB_DROP_TX_DOWN], 0);
	assert_int_equal(st.up_count, 1);
	assert_int_equal(st.down_count, 0);
	ipoib_link_stop(l);
	ipoib_link_free(l);
	assert_int_equal(fp.ahs_live, 0);
}

/* A new SM may give the broadcast group another MLID: the rejoin's answer moves the AH
 * and the QP's attachment, and the link never went down. */
static void rejoin_to_a_new_mlid_moves_the_ah_without_a_down(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ibp_event ev = { .type = IBP_EVENT_CLIENT_REREGISTER };
	struct ibp_ah *ah;
	(void)state;

	ipoib_link_port_event(l, &ev);
	assert_int_equal(bcast_once(l)->a.dlid, 0xc000); /* the old one meanwhile */
	sa_answer(&bcast, 0xc010);
	ah = bcast_once(l);
	assert_int_equal(ah->a.dlid, 0xc010);
	assert_int_equal(fp.qp.attached_mlid, 0xc010);
	assert_int_equal(fp.qp.detaches, 1);
	assert_int_equal(fp.ahs_live, 1); /* the old AH destroyed (no defer given) */
	assert_true(ipoib_link_is_up(l));
	assert_int_equal(downs, 0);
	assert_int_equal(ups, 1);
	ipoib_link_stop(l);
	ipoib_link_free(l);
}

/* PORT_DOWN is what takes the link down (the port really left ACTIVE); the next
 * PORT_ACTIVE and the broadcast group's answer bring it up again. */
static void port_down_takes_the_link_down_and_the_rejoin_brings_it_up(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ibp_event down = { .type = IBP_EVENT_PORT_DOWN };
	struct ibp_event active = { .type = IBP_EVENT_PORT_ACTIVE };
	struct ibp_buf *b;
	(void)state;

	ipoib_link_port_event(l, &down);
	assert_false(ipoib_link_is_up(l));
	assert_int_equal(downs, 1);
	b = ipoib_link_buf(l);
	b->len = 1;
	assert_int_equal(ipoib_link_xmit_bcast(l, 0x0800, b), -ENETDOWN);
	ipoib_link_port_event(l, &active);
	assert_false(ipoib_link_is_up(l)); /* up again when the group answers */
	sa_answer(&bcast, 0xc000);
	assert_true(ipoib_link_is_up(l));
	assert_int_equal(ups, 2);
	bcast_once(l);
	ipoib_link_stop(l);
	ipoib_link_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sm_change_and_reregister_keep_the_link_up),
		cmocka_unit_test(rejoin_to_a_new_mlid_moves_the_ah_without_a_down),
		cmocka_unit_test(port_down_takes_the_link_down_and_the_rejoin_brings_it_up),
	};

	return cmocka_run_group_tests_name("ipoib_link", tests, NULL, NULL);
}
