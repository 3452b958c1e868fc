/*
 * ipoib_link's lifecycle around port events, on a fake port and a fake SA client (the
 * three sa_* calls the link makes are defined here): the link comes up when the
 * broadcast group's join answers; an SM change or client reregister leaves it up and
 * sending on the groups' old address handles while the SA client rejoins (as Linux's
 * ipoib keeps its carrier), a rejoin that moves a group to another MLID rebuilds the
 * AH and the attachment without a DOWN; only PORT_DOWN takes the link down. A failover
 * pair tracks this link's state: a DOWN here is a FAULT there.
 *
 * Also the learning guard of the link's ARP/ND input (issue 20, ipoib_link_set_on_link):
 * a request for the link's address from a sender outside its subnets is answered and
 * not learned, and the answer to an NS reaches the asker without resolving it (which
 * would make the very entry the guard refused).
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
#include "ipoib/ipoib_pvt.h" /* ipoib_paths_gc, ipoib_path_find: a fake clock */
#include "lib/evloop.h"
#include "pkt/arp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "sm-client/sa.h"
#include "lib/addr.h"
#include "lib/ipoib.h"

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
	struct ibp_send last;   /* the last send posted */
	uint8_t last_data[256]; /* its buffer's first octets (IPoIB header first) */
	uint32_t last_len;
	unsigned sends;
	int recover_ret; /* what qp_recover returns */
	unsigned recovers;
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
static int f_post_send(unsigned queue, struct ibp_send *s, unsigned n)
{
	(void)queue;
	for (unsigned i = 0; i < n; i++) {
		fp.last = s[i];
		fp.last_len = s[i].buf->len;
		memcpy(fp.last_data, s[i].buf->data,
		       s[i].buf->len < sizeof(fp.last_data) ? s[i].buf->len : sizeof(fp.last_data));
		fp.last.buf = NULL; /* freed below */
		fp.sends++;
		free(s[i].buf); /* completed at once */
	}
	return (int)n;
}
static int f_post_recv(struct ibp_qp *qp, unsigned queue, struct ibp_buf **bufs, unsigned n)
{
	(void)qp, (void)queue;
	for (unsigned i = 0; i < n; i++)
		free(bufs[i]);
	return (int)n;
}

static int f_qp_recover(struct ibp_qp *qp)
{
	assert_ptr_equal(qp, &fp.qp); /* only ever the UD QP */
	fp.recovers++;
	return fp.recover_ret;
}

static unsigned f_queues(struct ibp_port *port)
{
	(void)port;
	return 1;
}

static const struct ibp_ops fake_ops = {
	.name = "fake",
	.queues = f_queues,
	.buf_get = f_buf_get,
	.buf_put = f_buf_put,
	.create_qp = f_create_qp,
	.qp_ready = f_qp_ready,
	.destroy_qp = f_destroy_qp,
	.qp_num = f_qp_num,
	.qp_recover = f_qp_recover,
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
	bool paths_at_once; /* answer path queries at once (as from the cache) */
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
	struct sa_path p;
	(void)c;

	if (!fsa.paths_at_once)
		return 0; /* never answers: no path is needed here */
	memset(&p, 0, sizeof(p));
	p.dgid = q->dgid;
	p.sgid = q->sgid;
	p.dlid = (uint16_t)(0x10 + q->dgid.raw[15]);
	p.mtu = IB_MTU_2048;
	p.pkey = 0xffff;
	cb(arg, 0, &p);
	return 1;
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
static uint8_t cfg_mcast_hop_limit; /* link_up's cfg.mcast_hop_limit */

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
		.mcast_hop_limit = cfg_mcast_hop_limit,
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

/* The GRH hop limit of the link's multicast: 1 by default (the subnet only, as Linux); the
 * configured one (IPoIB across IB routers, seed 004), or the SA's when larger. */
static void mcast_hop_limit_from_the_config(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l;
	struct ibp_ah *ah;

	(void)state;
	assert_int_equal(ipoib_mcast_hop_limit(0, 0), 1);
	assert_int_equal(ipoib_mcast_hop_limit(0, 2), 2);
	assert_int_equal(ipoib_mcast_hop_limit(1, 2), 2);
	assert_int_equal(ipoib_mcast_hop_limit(64, 2), 64);
	assert_int_equal(ipoib_mcast_hop_limit(3, 0), 3);
	cfg_mcast_hop_limit = 0;
	l = link_up(&bcast);
	ah = bcast_once(l);
	assert_true(ah->a.is_global);
	assert_int_equal(ah->a.hop_limit, 1);
	ipoib_link_stop(l);
	ipoib_link_free(l);
	cfg_mcast_hop_limit = 2;
	l = link_up(&bcast);
	ah = bcast_once(l);
	assert_true(ah->a.is_global);
	assert_true(ib_gid_equal(&ah->a.dgid, &bcast));
	assert_int_equal(ah->a.hop_limit, 2);
	ipoib_link_stop(l);
	ipoib_link_free(l);
	cfg_mcast_hop_limit = 0;
	assert_int_equal(fp.ahs_live, 0);
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

/* The UD QP in the error state (QP_FATAL or WQ_FATAL naming it) is brought back at
 * once: the link stays up and counts it; another QP's event is not the UD QP's. When it
 * cannot be brought back the link goes down (the broadcast group answering again does
 * not bring it up), and each tick tries again until it can. An error completion of the
 * UD QP (no event) makes the next tick ask. */
static void ud_qp_error_recovered_or_link_down(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ibp_qp other;
	struct ibp_event fatal = { .type = IBP_EVENT_QP_FATAL, .qp = &fp.qp };
	struct ibp_event wq = { .type = IBP_EVENT_WQ_FATAL, .qp = &fp.qp };
	struct ibp_event rc = { .type = IBP_EVENT_QP_FATAL, .qp = &other };
	struct ipoib_link_stats st;
	(void)state;

	fp.recover_ret = 1;
	ipoib_link_port_event(l, &fatal);
	ipoib_link_port_event(l, &wq);
	ipoib_link_port_event(l, &rc);
	assert_int_equal(fp.recovers, 2);
	assert_true(ipoib_link_is_up(l));
	assert_int_equal(downs, 0);
	ipoib_link_stats(l, &st);
	assert_int_equal(st.ud_qp_recoveries, 2);
	bcast_once(l);

	fp.recover_ret = -EIO;
	ipoib_link_port_event(l, &fatal);
	assert_false(ipoib_link_is_up(l));
	assert_int_equal(downs, 1);
	sa_answer(&bcast, 0xc000);
	assert_false(ipoib_link_is_up(l));
	ipoib_link_tick(l);
	assert_int_equal(fp.recovers, 4);
	assert_false(ipoib_link_is_up(l));
	fp.recover_ret = 1;
	ipoib_link_tick(l);
	assert_int_equal(fp.recovers, 5);
	assert_true(ipoib_link_is_up(l));
	assert_int_equal(ups, 2);
	ipoib_link_stats(l, &st);
	assert_int_equal(st.ud_qp_recoveries, 3);
	assert_int_equal(st.down_count, 1);
	bcast_once(l);
	ipoib_link_tick(l); /* nothing left to retry */
	assert_int_equal(fp.recovers, 5);

	/* No event, an error completion of the UD QP (a send the HCA failed: SQE): the
	 * next tick asks the backend, which brings it back. */
	struct ibp_wc wc = { .kind = IBP_WC_SEND,
			     .status = IBP_WC_LOCAL_ERROR,
			     .qp = &fp.qp,
			     .qp_user = l,
			     .buf = f_buf_get(NULL) };
	struct ipoib_rx rx;

	ipoib_link_tx_done(l, &wc);
	ipoib_link_tick(l);
	assert_int_equal(fp.recovers, 6);
	ipoib_link_tick(l); /* asked once */
	assert_int_equal(fp.recovers, 6);
	/* A flushed receive whose QP turns out fine: asked, nothing counted. */
	fp.recover_ret = 0;
	wc.kind = IBP_WC_RECV;
	wc.status = IBP_WC_FLUSHED;
	wc.buf = f_buf_get(NULL);
	assert_int_equal(ipoib_link_rx(l, 0, &wc, &rx), IPOIB_RX_DROP);
	f_buf_put(NULL, wc.buf);
	ipoib_link_tick(l);
	assert_int_equal(fp.recovers, 7);
	ipoib_link_stats(l, &st);
	assert_int_equal(st.ud_qp_recoveries, 4);
	assert_true(ipoib_link_is_up(l));
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

/* ---- the learning guard of ARP/ND input ---------------------------------------------- */

static const uint64_t peer_guid[2] = { 0x0002c90300a10001ull, 0x0002c90300a10002ull };

/* Peer k's hardware address (QPN 0x49 + k, its GID on our subnet). */
static void peer_hw(unsigned k, struct ipoib_hwaddr *hw, uint8_t bytes[IPOIB_HWADDR_LEN])
{
	memset(hw, 0, sizeof(*hw));
	hw->qpn = 0x49 + k;
	ib_gid_set(&hw->gid, 0xfe80000000000000ull, peer_guid[k]);
	assert_int_equal(ipoib_hwaddr_encode(hw, bytes, IPOIB_HWADDR_LEN), IPOIB_HWADDR_LEN);
}

static void addr(const char *text, uint8_t *out)
{
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(text, &a), 0);
	memcpy(out, a.bytes, a.family == AF_INET ? 4 : 16);
}

/* What peer k sends to the link (payload after the IPoIB header), with a GRH or not. */
static int input(struct ipoib_link *l, enum ipoib_rx_kind kind, const uint8_t *p, size_t n,
		 unsigned k, bool grh)
{
	struct ipoib_hwaddr hw;
	uint8_t hb[IPOIB_HWADDR_LEN];
	struct ipoib_rx rx = { .kind = kind,
			       .ethertype = kind == IPOIB_RX_ARP ? 0x0806 : 0x86dd,
			       .data = p,
			       .len = n,
			       .src_qpn = 0x49 + k,
			       .slid = (uint16_t)(7 + k),
			       .has_grh = grh };

	peer_hw(k, &hw, hb);
	if (grh)
		rx.sgid = hw.gid;
	return ipoib_link_input_ctl(l, &rx);
}

/* An NS from src for the link's 2001:db8:1::1, with peer k's address as its source
 * link-layer option (k < 0: none), from peer k's QP (peer 0 when k < 0). */
static int ns_from(struct ipoib_link *l, const char *src, int k, bool grh)
{
	uint8_t p[ND_MAX_LEN], s[16], t[16], hb[IPOIB_HWADDR_LEN];
	struct ipoib_hwaddr hw;
	size_t n;

	addr(src, s);
	addr("2001:db8:1::1", t);
	peer_hw(k < 0 ? 0 : (unsigned)k, &hw, hb);
	n = nd_build_ns(p, sizeof(p), ND_LINK_IB, s, NULL, t, k < 0 ? NULL : hb);
	assert_true(n > 0);
	return input(l, IPOIB_RX_ND, p, n, k < 0 ? 0 : (unsigned)k, grh);
}

static bool known(struct ipoib_link *l, int family, const char *text)
{
	uint8_t a[16];

	addr(text, a);
	return neigh_lookup(ipoib_link_neigh(l), family, a) != NULL;
}

static uint64_t learn_refused(struct ipoib_link *l)
{
	struct neigh_stats st;

	neigh_table_stats(ipoib_link_neigh(l), &st);
	return st.learn_refused;
}

/* The last send was an NA for 2001:db8:1::1 with our hardware address, to peer k. */
static void na_sent_to(struct ipoib_link *l, unsigned sends, unsigned k)
{
	struct ipoib_hwaddr own;
	uint8_t ob[IPOIB_HWADDR_LEN], t[16];
	struct nd_msg m;

	assert_int_equal(fp.sends, sends + 1);
	assert_int_equal(fp.last.remote_qpn, 0x49 + k);
	assert_int_equal(fp.last.ah->a.dlid, 0x10 + (peer_guid[k] & 0xff));
	assert_int_equal(ip_be16(fp.last_data), 0x86dd);
	assert_int_equal(nd_parse(fp.last_data + 4, fp.last_len - 4, ND_LINK_IB, &m), ND_OK);
	assert_int_equal(m.type, ND_NA);
	addr("2001:db8:1::1", t);
	assert_memory_equal(m.target, t, 16);
	ipoib_link_hwaddr(l, &own);
	ipoib_hwaddr_encode(&own, ob, sizeof(ob));
	assert_non_null(m.tllao);
	assert_memory_equal(m.tllao, ob, IPOIB_HWADDR_LEN);
}

/*
 * With the link's subnets set, requests for its addresses from senders outside them are
 * answered and not learned (counted learn_refused): an ARP request and an NS with a
 * source link-layer option are answered at that address; an NS without one at the
 * datagram's source (its QPN, and the GID its GRH gives), and not at all when there is
 * no GRH to say where it came from: resolving the asker would create its entry all the
 * same (issue 20). A sender inside them is learned, or resolved when it gave no address.
 */
static void off_link_requests_answered_not_learned(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ip_prefix on[2];
	uint8_t a[16], hb[IPOIB_HWADDR_LEN], p[ARP_MAX_LEN];
	struct ipoib_hwaddr hw;
	unsigned sends;
	size_t n;
	(void)state;

	fsa.paths_at_once = true;
	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &on[0]), 0);
	assert_int_equal(ip_prefix_parse("2001:db8:1::1/64", true, &on[1]), 0);
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(ipoib_link_add_addr(l, on[i].addr.family, on[i].addr.bytes), 0);
	assert_int_equal(ipoib_link_set_on_link(l, on, 2), 0);

	/* ARP from 10.9.0.7: answered to its sender hardware address, not learned. */
	peer_hw(0, &hw, hb);
	addr("10.9.0.7", a);
	n = arp_build(p, sizeof(p), ARP_HTYPE_IB, ARP_OP_REQUEST, hb, ip_be32(a), NULL,
		      0x0a010001u);
	sends = fp.sends;
	assert_int_equal(input(l, IPOIB_RX_ARP, p, n, 0, true), 0);
	assert_int_equal(fp.sends, sends + 1);
	assert_int_equal(fp.last.remote_qpn, 0x49);
	assert_int_equal(ip_be16(fp.last_data), 0x0806);
	assert_false(known(l, AF_INET, "10.9.0.7"));
	assert_int_equal(learn_refused(l), 1);

	/* NS with the option: answered there. */
	sends = fp.sends;
	assert_int_equal(ns_from(l, "2001:db8:99::7", 1, true), 0);
	na_sent_to(l, sends, 1);
	assert_false(known(l, AF_INET6, "2001:db8:99::7"));
	assert_int_equal(learn_refused(l), 2);

	/* Without: answered to the datagram's source, which the GRH names. */
	sends = fp.sends;
	assert_int_equal(ns_from(l, "2001:db8:99::8", -1, true), 0);
	na_sent_to(l, sends, 0);
	assert_false(known(l, AF_INET6, "2001:db8:99::8"));

	/* Without, and without a GRH (a unicast probe): nowhere to answer, nothing made. */
	sends = fp.sends;
	assert_int_equal(ns_from(l, "2001:db8:99::9", -1, false), 0);
	assert_int_equal(fp.sends, sends);
	assert_false(known(l, AF_INET6, "2001:db8:99::9"));
	assert_int_equal(learn_refused(l), 3);

	/* Inside the subnet: learned from the option and answered there. */
	sends = fp.sends;
	assert_int_equal(ns_from(l, "2001:db8:1::7", 1, true), 0);
	na_sent_to(l, sends, 1);
	assert_true(known(l, AF_INET6, "2001:db8:1::7"));
	/* Inside without the option: resolved (the answer waits for it), as before. */
	assert_int_equal(ns_from(l, "2001:db8:1::8", -1, false), 0);
	assert_true(known(l, AF_INET6, "2001:db8:1::8"));
	assert_int_equal(learn_refused(l), 3);

	/* An NS from another port giving one of our own addresses as its source: a
	 * conflict or a spoof, as ARP's: neither learned nor answered, counted nd_spoof. */
	{
		struct ipoib_link_stats st;

		sends = fp.sends;
		assert_int_equal(ns_from(l, "2001:db8:1::1", 1, true), -EPERM);
		assert_int_equal(fp.sends, sends);
		assert_false(known(l, AF_INET6, "2001:db8:1::1"));
		ipoib_link_stats(l, &st);
		assert_int_equal(st.drops[IPOIB_DROP_ND_SPOOF], 1);
	}

	/* A neighbour the failover peer learned needs an address a neighbour can have:
	 * not the multicast QPN (an NS naming it is refused by nd_parse already). */
	peer_hw(0, &hw, hb);
	addr("10.1.0.9", a);
	hb[1] = hb[2] = hb[3] = 0xff;
	assert_int_equal(ipoib_link_neigh_learn(l, AF_INET, a, hb), -EINVAL);
	hb[1] = hb[2] = 0;
	hb[3] = 0x49;
	assert_int_equal(ipoib_link_neigh_learn(l, AF_INET, a, hb), 1);

	ipoib_link_stop(l);
	ipoib_link_free(l);
	assert_int_equal(fp.ahs_live, 0);
}

/* A neighbour resolved without a packet (the slow path's answer to a packet too big to
 * reach it): the ARP request goes out on the broadcast group and the entry waits for
 * the answer; asking again while it waits sends nothing more; a group needs nothing. */
static void resolve_without_a_packet(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ip_prefix on;
	struct arp_pkt m;
	uint8_t a[16];
	unsigned sends;
	(void)state;

	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &on), 0);
	assert_int_equal(ipoib_link_add_addr(l, AF_INET, on.addr.bytes), 0);
	addr("10.1.0.9", a);
	sends = fp.sends;
	assert_int_equal(ipoib_link_resolve(l, AF_INET, a), 0);
	assert_int_equal(fp.sends, sends + 1);
	assert_int_equal(fp.last.remote_qpn, 0xffffff); /* the broadcast group */
	assert_int_equal(ip_be16(fp.last_data), 0x0806);
	assert_int_equal(arp_parse(fp.last_data + 4, fp.last_len - 4, ARP_HTYPE_IB, &m), ARP_OK);
	assert_int_equal(m.op, ARP_OP_REQUEST);
	assert_int_equal(m.tpa, 0x0a010009u);
	assert_true(known(l, AF_INET, "10.1.0.9"));

	assert_int_equal(ipoib_link_resolve(l, AF_INET, a), 0);
	assert_int_equal(fp.sends, sends + 1);
	addr("239.1.2.3", a);
	assert_int_equal(ipoib_link_resolve(l, AF_INET, a), 0);
	assert_false(known(l, AF_INET, "239.1.2.3"));
	assert_int_equal(fp.sends, sends + 1);

	ipoib_link_stop(l);
	ipoib_link_free(l);
}

/* Paths are freed once no neighbour and no connection has needed them for a minute
 * (PATH_IDLE_MS): each is a GID that once answered, and a host answering from ever new
 * GIDs would otherwise grow the list without end. The sweep takes the time given. */
static void unused_paths_are_freed(void **state)
{
	union ib_gid bcast;
	struct ipoib_link *l = link_up(&bcast);
	struct ip_prefix on;
	struct ipoib_link_stats st;
	struct ipoib_hwaddr hw0, hw1;
	uint8_t a0[16], a1[16], hb0[IPOIB_HWADDR_LEN], hb1[IPOIB_HWADDR_LEN];
	unsigned ahs;
	uint64_t now = evloop_now_ms();
	(void)state;

	fsa.paths_at_once = true;
	assert_int_equal(ip_prefix_parse("10.1.0.1/24", true, &on), 0);
	assert_int_equal(ipoib_link_add_addr(l, AF_INET, on.addr.bytes), 0);
	assert_int_equal(ipoib_link_set_on_link(l, &on, 1), 0);
	peer_hw(0, &hw0, hb0);
	peer_hw(1, &hw1, hb1);
	addr("10.1.0.7", a0);
	addr("10.1.0.8", a1);
	assert_int_equal(ipoib_link_neigh_learn(l, AF_INET, a0, hb0), 1);
	assert_int_equal(ipoib_link_neigh_learn(l, AF_INET, a1, hb1), 1);
	assert_non_null(ipoib_path_find(l, &hw0.gid));
	assert_non_null(ipoib_path_find(l, &hw1.gid));
	assert_int_equal(l->n_paths, 2);
	ahs = fp.ahs_live;

	/* Peer 1's neighbour goes; peer 0's stays. Not yet a minute: both kept. */
	neigh_delete(ipoib_link_neigh(l), neigh_lookup(ipoib_link_neigh(l), AF_INET, a1));
	assert_int_equal(ipoib_paths_gc(l, now + 1000), 0);
	assert_int_equal(ipoib_paths_gc(l, now + PATH_IDLE_MS - PATH_GC_MS), 0);
	/* A minute on: peer 1's path and its address handle are freed, peer 0's kept. */
	assert_int_equal(ipoib_paths_gc(l, now + PATH_IDLE_MS + PATH_GC_MS), 1);
	assert_null(ipoib_path_find(l, &hw1.gid));
	assert_non_null(ipoib_path_find(l, &hw0.gid));
	assert_int_equal(l->n_paths, 1);
	assert_int_equal(fp.ahs_live, ahs - 1);
	ipoib_link_stats(l, &st);
	assert_int_equal(st.paths_freed, 1);
	/* The sweep runs at most every PATH_GC_MS. */
	assert_int_equal(ipoib_paths_gc(l, now + PATH_IDLE_MS + PATH_GC_MS + 1), 0);
	/* Peer 1 comes back: a new path, resolved again. */
	assert_int_equal(ipoib_link_neigh_learn(l, AF_INET, a1, hb1), 1);
	assert_non_null(ipoib_path_find(l, &hw1.gid));
	assert_int_equal(l->n_paths, 2);

	ipoib_link_stop(l);
	ipoib_link_free(l);
	assert_int_equal(fp.ahs_live, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mcast_hop_limit_from_the_config),
		cmocka_unit_test(sm_change_and_reregister_keep_the_link_up),
		cmocka_unit_test(rejoin_to_a_new_mlid_moves_the_ah_without_a_down),
		cmocka_unit_test(port_down_takes_the_link_down_and_the_rejoin_brings_it_up),
		cmocka_unit_test(ud_qp_error_recovered_or_link_down),
		cmocka_unit_test(off_link_requests_answered_not_learned),
		cmocka_unit_test(resolve_without_a_packet),
		cmocka_unit_test(unused_paths_are_freed),
	};

	return cmocka_run_group_tests_name("ipoib_link", tests, NULL, NULL);
}
