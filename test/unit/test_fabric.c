/*
 * Unit tests of the simulated fabric's switching core (sim/fabric/fabric.c): every
 * check a switch or receiving HCA makes, on packets built with lib's builder and then
 * damaged one field at a time, with deliveries recorded through the ops callbacks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "lib/ib_bytes.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "sim/fabric/fabric.h"

#define PREFIX 0xfe80000000000000ull
#define NREC   16

struct rec {
	int port;
	uint32_t qpn;
	size_t len;
	uint8_t first[64];
};

struct ctx {
	struct fabric *f;
	struct rec rec[NREC];
	unsigned n_rec, n_deliver;
	int fail_deliver; /* deliver returns -EAGAIN when set */
	int state_port, state_up, n_state;
	unsigned n_capture, n_capture_dropped;
	int a, b, c;         /* ports: A lid 4, B lid 8 (LMC 1), C lid 12 */
	uint32_t qa, qb, qc; /* a UD QP on each, Q_Key 0x0b1b, P_Key index 0 */
	uint8_t pkt[IB_PACKET_MAX_LEN];
	uint8_t payload[4096];
};

static int deliver(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	struct ctx *x = arg;

	if (x->fail_deliver)
		return -EAGAIN;
	x->n_deliver++;
	if (x->n_rec < NREC) {
		struct rec *r = &x->rec[x->n_rec++];

		r->port = port;
		r->qpn = qpn;
		r->len = len;
		memcpy(r->first, pkt, len < sizeof(r->first) ? len : sizeof(r->first));
	}
	return 0;
}

static void port_state(void *arg, int port, bool up)
{
	struct ctx *x = arg;

	x->state_port = port;
	x->state_up = up;
	x->n_state++;
}

static void capture(void *arg, const uint8_t *pkt, size_t len, bool dropped, uint64_t now_ns)
{
	struct ctx *x = arg;

	(void)pkt;
	(void)len;
	(void)now_ns;
	x->n_capture++;
	x->n_capture_dropped += dropped;
}

static struct simfab_port_info info(const char *name, uint16_t lid, uint8_t lmc, uint64_t guid,
				    uint8_t mtu)
{
	struct simfab_port_info i = { .port_num = 1,
				      .lmc = lmc,
				      .mtu = mtu,
				      .lid = lid,
				      .sm_lid = 1,
				      .port_guid = guid,
				      .gid_prefix = PREFIX,
				      .n_pkeys = 2 };

	strcpy(i.name, name);
	i.pkeys[0] = 0xffff;
	i.pkeys[1] = 0x8001;
	return i;
}

static int setup(void **state)
{
	static const struct fabric_ops ops = { deliver, port_state, capture };
	struct fabric_config cfg = { .seed = 42 };
	struct ctx *x = calloc(1, sizeof(*x));
	struct simfab_port_info ia = info("hostA", 4, 0, 0x0002c90300a10001ull, SIMFAB_MTU_4096);
	struct simfab_port_info ib = info("hostB", 8, 1, 0x0002c90300a10003ull, SIMFAB_MTU_4096);
	struct simfab_port_info ic = info("hostC", 12, 0, 0x0002c90300a10005ull, 4 /* 2048 */);

	assert_non_null(x);
	assert_int_equal(fabric_new(&cfg, &ops, x, &x->f), 0);
	assert_int_equal(fabric_port_add(x->f, &ia, &x->a, NULL), 0);
	assert_int_equal(fabric_port_add(x->f, &ib, &x->b, NULL), 0);
	assert_int_equal(fabric_port_add(x->f, &ic, &x->c, NULL), 0);
	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_UD, 0x0b1b, &x->qa), 0);
	assert_int_equal(fabric_qp_create(x->f, x->b, SIMFAB_QP_UD, 0x0b1b, &x->qb), 0);
	assert_int_equal(fabric_qp_create(x->f, x->c, SIMFAB_QP_UD, 0x0b1b, &x->qc), 0);
	for (size_t i = 0; i < sizeof(x->payload); i++)
		x->payload[i] = (uint8_t)i;
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *x = *state;

	fabric_free(x->f);
	free(x);
	return 0;
}

/* Build a UD packet from port (its identity) and switch it; returns the verdict. */
static struct fabric_verdict send_ud_from(struct ctx *x, int port, uint32_t src_qpn,
					  const struct simfab_ud_dest *d, size_t payload_len)
{
	struct fabric_verdict v;
	int n = simfab_build_ud(fabric_port_info(x->f, port), src_qpn, 7, d, x->payload,
				payload_len, x->pkt, sizeof(x->pkt));

	assert_true(n > 0);
	fabric_packet(x->f, port, src_qpn, x->pkt, (size_t)n, 1000, &v);
	return v;
}

static struct simfab_ud_dest to_b(struct ctx *x)
{
	return (struct simfab_ud_dest){ .dlid = 8, .dqpn = x->qb, .qkey = 0x0b1b, .pkey = 0xffff };
}

static uint64_t drops(struct ctx *x, enum fabric_drop r)
{
	struct fabric_stats st;

	fabric_stats(x->f, &st);
	return st.drops[r];
}

static void expect_drop(struct ctx *x, struct fabric_verdict v, enum fabric_drop r)
{
	assert_int_equal(v.delivered, 0);
	assert_string_equal(fabric_drop_name(v.first), fabric_drop_name(r));
	assert_int_equal(drops(x, r), 1);
	assert_int_equal(x->n_deliver, 0);
}

static void test_ud_delivered(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	struct fabric_verdict v = send_ud_from(x, x->a, x->qa, &d, 100);
	const struct fabric_port_stats *sa = fabric_port_stats(x->f, x->a);
	const struct fabric_port_stats *sb = fabric_port_stats(x->f, x->b);

	assert_int_equal(v.delivered, 1);
	assert_int_equal(v.refused, 0);
	assert_int_equal(x->n_rec, 1);
	assert_int_equal(x->rec[0].port, x->b);
	assert_int_equal(x->rec[0].qpn, x->qb);
	assert_memory_equal(x->rec[0].first, x->pkt, 64);
	assert_int_equal(sa->rx_packets, 1);
	assert_int_equal(sb->tx_packets, 1);
	assert_int_equal(x->n_capture, 1);
	assert_int_equal(x->n_capture_dropped, 0);
	/* B's second LID (LMC 1) reaches it too; 10 (nobody's) does not. */
	d.dlid = 9;
	v = send_ud_from(x, x->a, x->qa, &d, 10);
	assert_int_equal(v.delivered, 1);
	d.dlid = 10;
	v = send_ud_from(x, x->a, x->qa, &d, 10);
	assert_int_equal(v.first, FABRIC_DROP_NO_ROUTE);
	assert_int_equal(drops(x, FABRIC_DROP_NO_ROUTE), 1);
	assert_int_equal(x->n_capture_dropped, 1);
}

static void test_pkey_mismatch(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	uint32_t qa1;

	/* B's QP sits on P_Key 0xffff; A sending on 0x8001 (its own index 1) is refused. */
	assert_int_equal(fabric_qp_create_pkey(x->f, x->a, SIMFAB_QP_UD, 1, 0x0b1b, &qa1), 0);
	d.pkey = 0x8001;
	expect_drop(x, send_ud_from(x, x->a, qa1, &d, 10), FABRIC_DROP_PKEY);
	assert_int_equal(fabric_port_stats(x->f, x->b)->drop_out[FABRIC_DROP_PKEY], 1);
	assert_int_equal(fabric_port_stats(x->f, x->a)->drop_in[FABRIC_DROP_PKEY], 1);
	/* A P_Key that is not the sending QP's is refused at the source. */
	d.pkey = 0xffff;
	assert_int_equal(send_ud_from(x, x->a, qa1, &d, 10).first, FABRIC_DROP_SRC_PKEY);
	/* A P_Key B has in its table, but not on its QP's index: still refused. */
	assert_int_equal(fabric_qp_create_pkey(x->f, x->b, SIMFAB_QP_UD, 1, 0x0b1b, &d.dqpn), 0);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 10).first, FABRIC_DROP_PKEY);
	d.pkey = 0x8001;
	assert_int_equal(send_ud_from(x, x->a, qa1, &d, 10).delivered, 1);
}

static void test_pkey_limited(void **state)
{
	struct ctx *x = *state;
	struct simfab_port_info ia = *fabric_port_info(x->f, x->a);
	struct simfab_port_info ib = *fabric_port_info(x->f, x->b);
	struct simfab_ud_dest d = to_b(x);
	uint32_t qa, qb;

	/* Both limited members of the default partition: refused. */
	ia.pkeys[1] = 0x7fff;
	ib.pkeys[1] = 0x7fff;
	assert_int_equal(fabric_port_update(x->f, x->a, &ia, NULL), 0);
	assert_int_equal(fabric_port_update(x->f, x->b, &ib, NULL), 0);
	assert_int_equal(fabric_qp_create_pkey(x->f, x->a, SIMFAB_QP_UD, 1, 0x0b1b, &qa), 0);
	assert_int_equal(fabric_qp_create_pkey(x->f, x->b, SIMFAB_QP_UD, 1, 0x0b1b, &qb), 0);
	d.pkey = 0x7fff;
	d.dqpn = qb;
	expect_drop(x, send_ud_from(x, x->a, qa, &d, 10), FABRIC_DROP_PKEY_LIMITED);
	/* Limited to full member (B's QP on 0xffff): accepted. */
	d.dqpn = x->qb;
	assert_int_equal(send_ud_from(x, x->a, qa, &d, 10).delivered, 1);
}

static void test_qkey(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	uint32_t q;

	d.qkey = 0x0b1c;
	expect_drop(x, send_ud_from(x, x->a, x->qa, &d, 10), FABRIC_DROP_QKEY);
	/* Controlled Q_Keys: no QP of an unprivileged port may have one or send one. */
	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_UD, 0x80000001u, &q), -EPERM);
	assert_int_equal(fabric_qp_modify(x->f, x->a, x->qa, 0x80000001u), -EPERM);
	d.qkey = 0x80000001u;
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 10).first, FABRIC_DROP_QKEY_CONTROLLED);
	/* QP_MODIFY takes effect. */
	assert_int_equal(fabric_qp_modify(x->f, x->b, x->qb, 0x1234), 0);
	d.qkey = 0x1234;
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 10).delivered, 1);
}

static void test_privileged_qkey(void **state)
{
	struct ctx *x = *state;
	struct simfab_port_info ia = *fabric_port_info(x->f, x->a);
	struct simfab_ud_dest d = to_b(x);
	uint32_t q;

	ia.flags = SIMFAB_HELLO_PRIVILEGED;
	assert_int_equal(fabric_port_update(x->f, x->a, &ia, NULL), 0);
	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_UD, 0x80000001u, &q), 0);
	assert_int_equal(fabric_qp_modify(x->f, x->b, x->qb, 0x80000001u), -EPERM);
	d.qkey = 0x80000001u;
	/* Sent (privileged), refused by B's QP whose Q_Key differs. */
	assert_int_equal(send_ud_from(x, x->a, q, &d, 10).first, FABRIC_DROP_QKEY);
}

static void test_gmp_qp1(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = { .dlid = 8, .dqpn = 1, .qkey = IB_QP1_QKEY, .pkey = 0xffff };
	struct fabric_verdict v = send_ud_from(x, x->a, 1, &d, 256);

	assert_int_equal(v.delivered, 1);
	assert_int_equal(x->rec[0].qpn, 1);
	/* The GSI accepts any P_Key of its table. */
	d.pkey = 0x8001;
	assert_int_equal(send_ud_from(x, x->a, 1, &d, 256).delivered, 1);
	d.qkey = 0x0b1b;
	assert_int_equal(send_ud_from(x, x->a, 1, &d, 256).first, FABRIC_DROP_QKEY);
	/* QP0 is not ours to carry, from or to. */
	d.qkey = IB_QP1_QKEY;
	d.dqpn = 0;
	assert_int_equal(send_ud_from(x, x->a, 1, &d, 256).first, FABRIC_DROP_NO_QP);
}

/* Damage a good packet A->B; fix the VCRC afterwards when fix_vcrc. */
static struct fabric_verdict send_damaged(struct ctx *x, size_t off, uint8_t xor, int cut,
					  bool fix_vcrc)
{
	struct simfab_ud_dest d = to_b(x);
	struct fabric_verdict v;
	int n = simfab_build_ud(fabric_port_info(x->f, x->a), x->qa, 1, &d, x->payload, 64, x->pkt,
				sizeof(x->pkt));

	assert_true(n > 0);
	x->pkt[off] ^= xor;
	n += cut;
	if (fix_vcrc)
		assert_int_equal(ib_packet_reseal_vcrc(x->pkt, (size_t)n), 0);
	fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 0, &v);
	return v;
}

static void test_bad_crcs(void **state)
{
	struct ctx *x = *state;
	/* 8 LRH + 12 BTH + 8 DETH + 64 payload: ICRC at 92, VCRC at 96. */
	struct fabric_verdict v = send_damaged(x, 92, 0x01, 0, true);

	assert_int_equal(v.first, FABRIC_DROP_BAD_ICRC);
	v = send_damaged(x, 97, 0x80, 0, false);
	assert_int_equal(v.first, FABRIC_DROP_BAD_VCRC);
	/* A payload bit flipped: the VCRC catches it first, as the link layer would. */
	v = send_damaged(x, 40, 0x10, 0, false);
	assert_int_equal(v.first, FABRIC_DROP_BAD_VCRC);
	v = send_damaged(x, 40, 0x10, 0, true);
	assert_int_equal(v.first, FABRIC_DROP_BAD_ICRC);
	assert_int_equal(drops(x, FABRIC_DROP_BAD_ICRC), 2);
	assert_int_equal(drops(x, FABRIC_DROP_BAD_VCRC), 2);
	assert_int_equal(x->n_deliver, 0);
	assert_int_equal(x->n_capture, 4);
	assert_int_equal(x->n_capture_dropped, 4);
}

static void test_bad_lengths(void **state)
{
	struct ctx *x = *state;
	struct fabric_stats st;

	/* Four octets short, four long (buffer vs PktLen), PktLen one word more. VCRCs are
	 * left as built: lengths are checked before the VCRC. */
	assert_int_equal(send_damaged(x, 0, 0, -4, false).first, FABRIC_DROP_BAD_LENGTH);
	assert_int_equal(send_damaged(x, 0, 0, 4, false).first, FABRIC_DROP_BAD_LENGTH);
	assert_int_equal(send_damaged(x, 5, 0x01, 0, false).first, FABRIC_DROP_BAD_LENGTH);
	fabric_stats(x->f, &st);
	assert_int_equal(st.drops[FABRIC_DROP_BAD_LENGTH], 3);
	assert_int_equal(st.parse[IB_PKT_ERR_TRUNCATED], 2);
	assert_int_equal(st.parse[IB_PKT_ERR_TRAILING], 1);
	/* Garbage and empty input. */
	fabric_packet(x->f, x->a, x->qa, x->pkt, 3, 0, &(struct fabric_verdict){ 0 });
	fabric_stats(x->f, &st);
	assert_int_equal(st.parse[IB_PKT_ERR_SHORT_LRH], 1);
	assert_int_equal(x->n_deliver, 0);
}

static void test_mtu(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = { .dlid = 12, .dqpn = x->qc, .qkey = 0x0b1b, .pkey = 0xffff };

	/* C's MTU is 2048: A (4096) may send 2048 to it, not 2049. */
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 2048).delivered, 1);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 2049).first, FABRIC_DROP_MTU);
	assert_int_equal(fabric_port_stats(x->f, x->c)->drop_out[FABRIC_DROP_MTU], 1);
	/* C cannot send more than its own MTU, whoever receives. */
	d = to_b(x);
	assert_int_equal(send_ud_from(x, x->c, x->qc, &d, 2049).first, FABRIC_DROP_MTU);
	assert_int_equal(fabric_port_stats(x->f, x->c)->drop_in[FABRIC_DROP_MTU], 1);
	assert_int_equal(drops(x, FABRIC_DROP_MTU), 2);
}

static void test_spoofing(void **state)
{
	struct ctx *x = *state;
	struct simfab_port_info fake = *fabric_port_info(x->f, x->c);
	struct simfab_ud_dest d = to_b(x);
	union ib_gid dgid;
	int n;

	/* A's packet claiming C's SLID. */
	fake.port_guid = fabric_port_info(x->f, x->a)->port_guid;
	n = simfab_build_ud(&fake, x->qa, 1, &d, x->payload, 8, x->pkt, sizeof(x->pkt));
	struct fabric_verdict v;
	fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_SLID);
	/* A's LID but C's GID as SGID. */
	fake = *fabric_port_info(x->f, x->a);
	fake.port_guid = fabric_port_info(x->f, x->c)->port_guid;
	ib_gid_set(&dgid, PREFIX, fabric_port_info(x->f, x->b)->port_guid);
	d.dgid = &dgid;
	d.hop_limit = 1;
	n = simfab_build_ud(&fake, x->qa, 1, &d, x->payload, 8, x->pkt, sizeof(x->pkt));
	fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_SGID);
	/* The right GRH is delivered; a DGID that is not B's is refused at B. */
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 8).delivered, 1);
	ib_gid_set(&dgid, PREFIX, 0x1234);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 8).first, FABRIC_DROP_DGID);
	/* Sending from a QP A does not have, or with a DETH SrcQP that is not the QP. */
	d.dgid = NULL;
	assert_int_equal(send_ud_from(x, x->a, x->qa + 100, &d, 8).first, FABRIC_DROP_SRC_QP);
	n = simfab_build_ud(fabric_port_info(x->f, x->a), x->qa + 1, 1, &d, x->payload, 8, x->pkt,
			    sizeof(x->pkt));
	fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_SRC_QP);
	assert_int_equal(x->n_deliver, 1);
}

static void test_multicast(void **state)
{
	struct ctx *x = *state;
	union ib_gid mgid, other;
	uint32_t qa2;
	struct simfab_ud_dest d = { .dlid = 0xc000,
				    .dqpn = IB_QPN_MULTICAST,
				    .qkey = 0x0b1b,
				    .pkey = 0xffff,
				    .hop_limit = 1 };
	struct fabric_verdict v;
	bool got_a2 = false, got_b = false;

	assert_int_equal(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &mgid), 0);
	assert_int_equal(ib_gid_parse("ff12:401b:ffff::1", &other), 0);
	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_UD, 0x0b1b, &qa2), 0);
	assert_int_equal(fabric_mcast_attach(x->f, x->a, x->qa, &mgid, 0xc000), 0);
	assert_int_equal(fabric_mcast_attach(x->f, x->a, qa2, &mgid, 0xc000), 0);
	assert_int_equal(fabric_mcast_attach(x->f, x->b, x->qb, &mgid, 0xc000), 0);
	assert_int_equal(fabric_mcast_attach(x->f, x->b, x->qb, &mgid, 0xc000), -EEXIST);
	/* C is attached to another group only. */
	assert_int_equal(fabric_mcast_attach(x->f, x->c, x->qc, &other, 0xc001), 0);
	d.dgid = &mgid;
	v = send_ud_from(x, x->a, x->qa, &d, 100);
	assert_int_equal(v.delivered, 2);
	assert_int_equal(x->n_rec, 2);
	for (unsigned i = 0; i < x->n_rec; i++) {
		assert_false(x->rec[i].port == x->a && x->rec[i].qpn == x->qa);
		assert_int_not_equal(x->rec[i].port, x->c);
		got_a2 |= x->rec[i].port == x->a && x->rec[i].qpn == qa2;
		got_b |= x->rec[i].port == x->b && x->rec[i].qpn == x->qb;
	}
	assert_true(got_a2 && got_b);
	/* After detaching, only B; a group nobody else joined is counted. */
	assert_int_equal(fabric_mcast_detach(x->f, x->a, qa2, &mgid, 0xc000), 0);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 100).delivered, 1);
	assert_int_equal(fabric_qp_destroy(x->f, x->b, x->qb), 0);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 100).first, FABRIC_DROP_MCAST_NO_MEMBER);
	/* Multicast without a GRH is refused. */
	d.dgid = NULL;
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 100).first, FABRIC_DROP_MCAST_HDR);
}

static void test_link_down(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);

	assert_int_equal(fabric_set_link(x->f, "hostB", false), 0);
	assert_int_equal(x->n_state, 1);
	assert_int_equal(x->state_port, x->b);
	assert_false(x->state_up);
	assert_false(fabric_port_up(x->f, x->b));
	expect_drop(x, send_ud_from(x, x->a, x->qa, &d, 10), FABRIC_DROP_LINK_DOWN);
	/* B's own sends are dropped too. */
	d = (struct simfab_ud_dest){ .dlid = 4, .dqpn = x->qa, .qkey = 0x0b1b, .pkey = 0xffff };
	assert_int_equal(send_ud_from(x, x->b, x->qb, &d, 10).first, FABRIC_DROP_LINK_DOWN);
	assert_int_equal(fabric_set_link(x->f, "hostB", true), 0);
	assert_int_equal(x->n_state, 2);
	assert_true(x->state_up);
	assert_int_equal(send_ud_from(x, x->b, x->qb, &d, 10).delivered, 1);
	/* A node set down before it attaches starts down. */
	assert_int_equal(fabric_set_link(x->f, "hostD", false), 0);
	struct simfab_port_info id = info("hostD", 16, 0, 0x77, SIMFAB_MTU_4096);
	int p;
	assert_int_equal(fabric_port_add(x->f, &id, &p, NULL), 0);
	assert_false(fabric_port_up(x->f, p));
}

/* One port of a two-port node down: the other stays up; the node up clears it. */
static void test_port_link_down(void **state)
{
	struct ctx *x = *state;
	struct simfab_port_info p1 = info("hostE", 20, 0, 0x81, SIMFAB_MTU_4096);
	struct simfab_port_info p2 = info("hostE", 21, 0, 0x82, SIMFAB_MTU_4096);
	int e1, e2;

	p2.port_num = 2;
	assert_int_equal(fabric_port_add(x->f, &p1, &e1, NULL), 0);
	assert_int_equal(fabric_port_add(x->f, &p2, &e2, NULL), 0);
	x->n_state = 0;
	assert_int_equal(fabric_set_port_link(x->f, "hostE", 1, false), 0);
	assert_int_equal(x->n_state, 1);
	assert_int_equal(x->state_port, e1);
	assert_false(x->state_up);
	assert_false(fabric_port_up(x->f, e1));
	assert_true(fabric_port_up(x->f, e2));
	/* The node down tells only the port that was still up. */
	assert_int_equal(fabric_set_link(x->f, "hostE", false), 0);
	assert_int_equal(x->n_state, 2);
	assert_int_equal(x->state_port, e2);
	/* The node up brings both back (its ports' own settings cleared). */
	assert_int_equal(fabric_set_link(x->f, "hostE", true), 0);
	assert_int_equal(x->n_state, 4);
	assert_true(fabric_port_up(x->f, e1));
	assert_true(fabric_port_up(x->f, e2));
	assert_int_equal(fabric_set_port_link(x->f, "hostE", 64, false), -EINVAL);
}

static void test_rx_overflow(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);

	x->fail_deliver = 1;
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 10).first, FABRIC_DROP_RX_OVERFLOW);
	assert_int_equal(fabric_port_stats(x->f, x->b)->drop_out[FABRIC_DROP_RX_OVERFLOW], 1);
}

static void test_loss(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	unsigned delivered = 0;

	assert_int_equal(fabric_set_loss(x->f, NULL, 250000), 0); /* 25 % */
	for (int i = 0; i < 10000; i++)
		delivered += send_ud_from(x, x->a, x->qa, &d, 10).delivered;
	/* Binomial(10000, 0.75): sd 43; allow 5 sd. */
	assert_in_range(delivered, 7500 - 220, 7500 + 220);
	assert_int_equal(drops(x, FABRIC_DROP_LOSS), 10000 - delivered);
	/* Per node: 10 % on B only, fabric-wide back to 0. */
	assert_int_equal(fabric_set_loss(x->f, NULL, 0), 0);
	assert_int_equal(fabric_set_loss(x->f, "hostB", 100000), 0);
	delivered = 0;
	for (int i = 0; i < 10000; i++)
		delivered += send_ud_from(x, x->a, x->qa, &d, 10).delivered;
	assert_in_range(delivered, 9000 - 150, 9000 + 150);
	d = (struct simfab_ud_dest){ .dlid = 12, .dqpn = x->qc, .qkey = 0x0b1b, .pkey = 0xffff };
	for (int i = 0; i < 100; i++)
		assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 10).delivered, 1);
	assert_int_equal(fabric_set_loss(x->f, NULL, 1000001), -EINVAL);
}

static void test_delay(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	struct fabric_verdict v;
	int n;

	assert_int_equal(fabric_set_delay(x->f, NULL, 10), 0);
	for (uint32_t psn = 0; psn < 3; psn++) {
		n = simfab_build_ud(fabric_port_info(x->f, x->a), x->qa, psn, &d, x->payload, 8,
				    x->pkt, sizeof(x->pkt));
		fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 1000000 * psn, &v);
		assert_true(v.held);
	}
	assert_int_equal(fabric_next_deadline(x->f), 10000000);
	assert_int_equal(fabric_poll(x->f, 9999999), 0);
	assert_int_equal(fabric_poll(x->f, 11000000), 2);
	assert_int_equal(fabric_poll(x->f, 20000000), 1);
	assert_int_equal(fabric_next_deadline(x->f), 0);
	assert_int_equal(x->n_rec, 3);
	/* Order kept: PSN in BTH octets 9-11 (after the 8-octet LRH). */
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(ib_get_be24(x->rec[i].first + 8 + 9), i);
	assert_int_equal(x->n_capture, 3);
	assert_int_equal(fabric_set_delay(x->f, NULL, 0), 0);
	assert_int_equal(send_ud_from(x, x->a, x->qa, &d, 8).delivered, 1);
}

static void build_rc(struct ctx *x, int port, uint16_t dlid, uint32_t dqpn, uint8_t op, int *n)
{
	struct ib_packet p = { 0 };

	p.lrh.dlid = dlid;
	p.lrh.slid = fabric_port_info(x->f, port)->lid;
	p.bth.opcode = op;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = dqpn;
	p.payload = x->payload;
	p.payload_len = 100;
	*n = ib_packet_build(&p, x->pkt, sizeof(x->pkt));
	assert_true(*n > 0);
}

static void test_rc(void **state)
{
	struct ctx *x = *state;
	uint32_t ra, rb;
	struct fabric_verdict v;
	int n;

	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_RC, 0, &ra), 0);
	assert_int_equal(fabric_qp_create(x->f, x->b, SIMFAB_QP_RC, 0, &rb), 0);
	build_rc(x, x->a, 8, rb, IB_OP_RC_SEND_ONLY, &n);
	fabric_packet(x->f, x->a, ra, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(x->rec[0].qpn, rb);
	/* RC to a UD QP, and from a UD QP: refused. */
	build_rc(x, x->a, 8, x->qb, IB_OP_RC_SEND_ONLY, &n);
	fabric_packet(x->f, x->a, ra, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_QP_TYPE);
	build_rc(x, x->a, 8, rb, IB_OP_RC_SEND_ONLY, &n);
	fabric_packet(x->f, x->a, x->qa, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_SRC_QP);
	/* UC likewise needs UC QPs. */
	build_rc(x, x->a, 8, rb, IB_OP_UC_SEND_ONLY, &n);
	fabric_packet(x->f, x->a, ra, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_SRC_QP);
	/* A destroyed QP no longer receives. */
	assert_int_equal(fabric_qp_destroy(x->f, x->b, rb), 0);
	build_rc(x, x->a, 8, rb, IB_OP_RC_SEND_ONLY, &n);
	fabric_packet(x->f, x->a, ra, x->pkt, (size_t)n, 0, &v);
	assert_int_equal(v.first, FABRIC_DROP_NO_QP);
}

static void test_ports_and_qpns(void **state)
{
	struct ctx *x = *state;
	struct simfab_port_info i = info("hostE", 8, 0, 0x99, SIMFAB_MTU_4096);
	const char *why = NULL;
	uint32_t q, seen[200];
	int p;

	assert_int_equal(fabric_port_add(x->f, &i, &p, &why), -EADDRINUSE);
	assert_non_null(why);
	i.lid = 9; /* B's second LID (LMC 1) */
	assert_int_equal(fabric_port_add(x->f, &i, &p, NULL), -EADDRINUSE);
	i.lid = 20;
	i.port_guid = fabric_port_info(x->f, x->a)->port_guid;
	assert_int_equal(fabric_port_add(x->f, &i, &p, NULL), -EEXIST);
	i.lid = 0;
	assert_int_equal(fabric_port_add(x->f, &i, &p, NULL), -EINVAL);
	/* QPNs: 24 bits, never 0 or 1, distinct while alive. */
	for (int k = 0; k < 200; k++) {
		assert_int_equal(fabric_qp_create(x->f, x->c, SIMFAB_QP_UD, 1, &seen[k]), 0);
		assert_true(seen[k] > 1 && seen[k] <= 0xffffff);
		for (int j = 0; j < k; j++)
			assert_int_not_equal(seen[j], seen[k]);
	}
	for (int k = 0; k < 200; k += 2)
		assert_int_equal(fabric_qp_destroy(x->f, x->c, seen[k]), 0);
	for (int k = 1; k < 200; k += 2)
		assert_int_equal(fabric_qp_modify(x->f, x->c, seen[k], 5), 0);
	assert_int_equal(fabric_qp_destroy(x->f, x->c, seen[0]), -ENOENT);
	assert_int_equal(fabric_qp_create_pkey(x->f, x->c, SIMFAB_QP_UD, 2, 1, &q), -EINVAL);
	/* Removing a port frees its LIDs. */
	fabric_port_remove(x->f, x->c);
	assert_null(fabric_port_info(x->f, x->c));
	i = info("hostF", 12, 0, 0x5555, SIMFAB_MTU_4096);
	assert_int_equal(fabric_port_add(x->f, &i, &p, NULL), 0);
}

static void test_stats_json(void **state)
{
	struct ctx *x = *state;
	struct simfab_ud_dest d = to_b(x);
	char *s;
	json_object *root, *o, *ports;

	send_ud_from(x, x->a, x->qa, &d, 10);
	d.qkey = 1;
	send_ud_from(x, x->a, x->qa, &d, 10);
	fabric_set_link(x->f, "hostC", false);
	fabric_set_loss(x->f, "hostC", 12345);
	s = fabric_stats_json(x->f);
	assert_non_null(s);
	root = json_tokener_parse(s);
	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "packets", &o));
	assert_int_equal(json_object_get_int64(o), 2);
	assert_true(json_object_object_get_ex(root, "drops", &o));
	assert_true(json_object_object_get_ex(o, "qkey", &o));
	assert_int_equal(json_object_get_int64(o), 1);
	assert_true(json_object_object_get_ex(root, "ports", &ports));
	assert_int_equal(json_object_array_length(ports), 3);
	o = json_object_array_get_idx(ports, 1);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "node")), "hostB");
	assert_int_equal(json_object_get_int(json_object_object_get(o, "lid")), 8);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "gid")),
			    "fe80::2:c903:a1:3");
	assert_int_equal(json_object_get_int64(json_object_object_get(
			     json_object_object_get(o, "drops_out"), "qkey")),
			 1);
	o = json_object_array_get_idx(ports, 2);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "state")), "down");
	json_object_put(root);
	free(s);
	/* Node counters outlast the port's connection; settings show per node. */
	fabric_port_remove(x->f, x->b);
	s = fabric_stats_json(x->f);
	root = json_tokener_parse(s);
	assert_true(json_object_object_get_ex(root, "nodes", &o));
	assert_int_equal(json_object_array_length(o), 3);
	o = json_object_array_get_idx(o, 1);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "node")), "hostB");
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "tx_packets")), 1);
	o = json_object_array_get_idx(json_object_object_get(root, "nodes"), 2);
	assert_string_equal(json_object_get_string(json_object_object_get(o, "link")), "down");
	assert_int_equal(json_object_get_int64(json_object_object_get(o, "loss_ppm")), 12345);
	json_object_put(root);
	free(s);
}

static void test_cmd_parse(void **state)
{
	static const struct {
		const char *line;
		int kind;
		const char *name;
		uint32_t value;
		bool up;
	} good[] = {
		{ "stats\n", FABRIC_CMD_STATS, NULL, 0, false },
		{ "link ibhost1 down", FABRIC_CMD_LINK, "ibhost1", 0, false },
		{ "  link\tgw1   up  ", FABRIC_CMD_LINK, "gw1", 0, true },
		{ "link gw1 down 2", FABRIC_CMD_LINK, "gw1", 2, false },
		{ "loss 12.5", FABRIC_CMD_LOSS, NULL, 125000, false },
		{ "loss 100", FABRIC_CMD_LOSS, NULL, 1000000, false },
		{ "loss 0.0001 gw2", FABRIC_CMD_LOSS, "gw2", 1, false },
		{ "delay 250 ibhost2", FABRIC_CMD_DELAY, "ibhost2", 250, false },
		{ "capture start /tmp/x.pcap 5", FABRIC_CMD_CAPTURE_START, NULL, 5, false },
		{ "capture start /tmp/x.pcap", FABRIC_CMD_CAPTURE_START, NULL, 0, false },
		{ "capture stop", FABRIC_CMD_CAPTURE_STOP, NULL, 0, false },
	};
	static const char *const bad[] = {
		"",
		"\n",
		"   ",
		"bogus",
		"stats now",
		"link",
		"link gw1",
		"link gw1 sideways",
		"link gw1 down 0",
		"link gw1 down 64",
		"link gw1 down 1 2",
		"link g/w up",
		"loss",
		"loss 101",
		"loss 100.0001",
		"loss -1",
		"loss 1e3",
		"loss 1.",
		"loss .5",
		"loss 1.00001",
		"loss 5 bad/name",
		"delay 60001",
		"delay x",
		"delay 99999999999",
		"capture",
		"capture start",
		"capture start rel.pcap",
		"capture start /tmp/a 0",
		"capture start /tmp/a 86401",
		"capture stop now",
		"link gw1 up\x01",
		"link gw\xc3\xa9 up",
		"a b c d e f g",
	};
	struct fabric_cmd cmd;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		why = NULL;
		assert_int_equal(fabric_cmd_parse(good[i].line, strlen(good[i].line), &cmd, &why),
				 0);
		assert_int_equal(cmd.kind, good[i].kind);
		if (good[i].name)
			assert_string_equal(cmd.name, good[i].name);
		else if (cmd.kind != FABRIC_CMD_CAPTURE_START)
			assert_null(cmd.name);
		assert_int_equal(cmd.value, good[i].value);
		assert_int_equal(cmd.up, good[i].up);
	}
	assert_int_equal(fabric_cmd_parse("capture start /tmp/x.pcap 5", 27, &cmd, NULL), 0);
	assert_string_equal(cmd.file, "/tmp/x.pcap");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (fabric_cmd_parse(bad[i], strlen(bad[i]), &cmd, &why) != -EINVAL)
			fail_msg("accepted: '%s'", bad[i]);
		assert_non_null(why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ud_delivered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pkey_mismatch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pkey_limited, setup, teardown),
		cmocka_unit_test_setup_teardown(test_qkey, setup, teardown),
		cmocka_unit_test_setup_teardown(test_privileged_qkey, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gmp_qp1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_crcs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_lengths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mtu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spoofing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_multicast, setup, teardown),
		cmocka_unit_test_setup_teardown(test_link_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_port_link_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rx_overflow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports_and_qpns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_json, setup, teardown),
		cmocka_unit_test(test_cmd_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
