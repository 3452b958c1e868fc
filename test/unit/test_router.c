/*
 * Unit tests of the IB router (sim/fabric/router.c) and of routing through the
 * simulated fabric (sim/fabric/fabric.c): the longest-prefix match, the decision
 * (unicast direct or by next hop, multicast between joined subnets, groups taken on
 * demand under a proxy prefix, hop limit, MTU, no GRH), the header rewrite (a receiver's ib_packet_parse, which checks VCRC and ICRC,
 * accepts the rewritten packet, whose ICRC octets are the sender's), two subnets with
 * the same LIDs joined by a router in one fabric, and the control commands.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lib/ib_bytes.h"
#include "lib/ib_crc.h"
#include "lib/ib_gid.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"
#include "sim/fabric/fabric.h"
#include "sim/fabric/router.h"

#define PREFIX_A 0xfe80000000000000ull
#define PREFIX_B 0xfec0000000000001ull
#define GUID_A1  0x0002c90300a10001ull /* host on subnet A, LID 4 */
#define GUID_B1  0x0002c90300b10001ull /* host on subnet B, LID 4 too */
#define GUID_RT1 0x0002c90300f10001ull /* router port 1 (A), LID 9 */
#define GUID_RT2 0x0002c90300f10002ull /* router port 2 (B), LID 9 */

static union ib_gid gid(uint64_t prefix, uint64_t guid)
{
	union ib_gid g;

	ib_gid_set(&g, prefix, guid);
	return g;
}

static union ib_gid gid_text(const char *s)
{
	union ib_gid g;

	assert_int_equal(ib_gid_parse(s, &g), 0);
	return g;
}

static uint8_t payload[4096];

/* A UD SEND with a GRH, as a host on A sends it to the router (or to an MLID). */
static size_t build(uint8_t *buf, uint16_t dlid, uint16_t slid, const union ib_gid *sgid,
		    const union ib_gid *dgid, uint8_t hop_limit, size_t plen)
{
	struct ib_packet p = { 0 };
	int n;

	p.lrh = (struct ib_lrh){ .vl = 0, .sl = 3, .dlid = dlid, .slid = slid };
	p.has_grh = true;
	p.grh = (struct ib_grh){ .ipver = IB_GRH_IPVER,
				 .tclass = 0x28,
				 .flow_label = 0x12345,
				 .next_hdr = IB_GRH_NXTHDR_BTH,
				 .hop_limit = hop_limit,
				 .sgid = *sgid,
				 .dgid = *dgid };
	p.bth = (struct ib_bth){ .opcode = IB_OP_UD_SEND_ONLY,
				 .pkey = 0xffff,
				 .dqpn = ib_gid_is_multicast(dgid) ? IB_QPN_MULTICAST : 0x48,
				 .psn = 7 };
	p.deth = (struct ib_deth){ .qkey = 0x0b1b, .src_qp = 0x48 };
	p.payload = payload;
	p.payload_len = plen;
	n = ib_packet_build(&p, buf, IB_PACKET_MAX_LEN);
	assert_true(n > 0);
	return (size_t)n;
}

/* A router with port 1 on A and port 2 on B, both LID 9 (each subnet its own LIDs). */
static void two_port_router(struct router *rt)
{
	memset(rt, 0, sizeof(*rt));
	assert_int_equal(router_port_set(rt, 1, 9, PREFIX_A, GUID_RT1, 4096), 0);
	assert_int_equal(router_port_set(rt, 2, 9, PREFIX_B, GUID_RT2, 2048), 0);
}

static unsigned resolve_calls;
static uint16_t resolve_b(void *arg, unsigned port, const union ib_gid *g)
{
	(void)arg;
	resolve_calls++;
	if (port == 2 && ib_gid_prefix(g) == PREFIX_B && ib_gid_guid(g) == GUID_B1)
		return 4;
	return 0;
}

static void test_lookup_longest_prefix(void **state)
{
	struct router rt;
	union ib_gid any = gid_text("::"), b = gid_text("fec0:0:0:1::"),
		     host = gid(PREFIX_B, GUID_B1), other = gid(0xfec0000000000002ull, 1);

	(void)state;
	two_port_router(&rt);
	assert_null(router_lookup(&rt, &host));
	assert_int_equal(router_route_add(&rt, &any, 0, 1, 20), 0);
	assert_int_equal(router_route_add(&rt, &b, 64, 2, 0), 0);
	assert_int_equal(router_route_add(&rt, &host, 128, 2, 33), 0);
	assert_int_equal(router_lookup(&rt, &host)->plen, 128);
	assert_int_equal(router_lookup(&rt, &host)->next_hop, 33);
	host.raw[15] ^= 1; /* another host of B: the /64 */
	assert_int_equal(router_lookup(&rt, &host)->plen, 64);
	assert_int_equal(router_lookup(&rt, &host)->port, 2);
	assert_int_equal(router_lookup(&rt, &other)->plen, 0); /* the default */
	assert_int_equal(router_lookup(&rt, &other)->next_hop, 20);
	/* A prefix's host bits are ignored, and the same prefix replaces the route. */
	b.raw[15] = 0x77;
	assert_int_equal(router_route_add(&rt, &b, 64, 1, 5), 0);
	assert_int_equal(rt.n_routes, 3);
	assert_int_equal(router_lookup(&rt, &host)->port, 1);
	/* A /63 covers fec0:0:0:0 and fec0:0:0:1; the /64 of :1 still wins for :1. */
	b = gid_text("fec0::");
	assert_int_equal(router_route_add(&rt, &b, 63, 2, 7), 0);
	other = gid(0xfec0000000000000ull, 1);
	assert_int_equal(router_lookup(&rt, &other)->plen, 63);
	assert_int_equal(router_lookup(&rt, &host)->plen, 64);
	/* Bad routes. */
	assert_int_equal(router_route_add(&rt, &b, 129, 2, 0), -EINVAL);
	assert_int_equal(router_route_add(&rt, &b, 64, 0, 0), -EINVAL);
	assert_int_equal(router_route_add(&rt, &b, 64, 9, 0), -EINVAL);
	assert_int_equal(router_route_add(&rt, &b, 64, 2, 0xc001), -EINVAL);
}

/* The octets a router may change: LRH 0 (VL), 2-3 (DLID), 6-7 (SLID), the hop limit,
 * the VCRC. Everything else, the ICRC included, must be the sender's. */
static void expect_only_variant_changed(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len - IB_VCRC_LEN; i++) {
		if (i == 0 || i == 2 || i == 3 || i == 6 || i == 7 || i == IB_LRH_LEN + 7)
			continue;
		if (a[i] != b[i])
			fail_msg("octet %zu changed: 0x%02x -> 0x%02x", i, a[i], b[i]);
	}
}

static void test_unicast_direct_rewrite(void **state)
{
	static uint8_t in[IB_PACKET_MAX_LEN], out[IB_PACKET_MAX_LEN];
	struct router rt;
	union ib_gid sgid = gid(PREFIX_A, GUID_A1), dgid = gid(PREFIX_B, GUID_B1),
		     b = gid_text("fec0:0:0:1::");
	struct router_hop hops[ROUTER_PORTS_MAX];
	struct ib_packet p, q;
	size_t len = build(in, 9, 4, &sgid, &dgid, 64, 100);
	uint32_t icrc;
	unsigned n;

	(void)state;
	two_port_router(&rt);
	rt.port[2].sl2vl[3] = 1; /* SL 3 goes out on VL 1 */
	assert_int_equal(router_route_add(&rt, &b, 64, 2, 0), 0);
	assert_int_equal(ib_packet_parse(in, len, &p), IB_PKT_OK);
	resolve_calls = 0;
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_FORWARD);
	assert_int_equal(n, 1);
	assert_int_equal(resolve_calls, 1);
	assert_int_equal(hops[0].port, 2);
	assert_int_equal(hops[0].dlid, 4);
	assert_int_equal(router_rewrite(&rt, &hops[0], &p, in, len, out), 0);

	/* The receiver's checks: VCRC (recomputed) and ICRC (untouched) both pass. */
	assert_int_equal(ib_packet_parse(out, len, &q), IB_PKT_OK);
	assert_int_equal(q.lrh.dlid, 4);
	assert_int_equal(q.lrh.slid, 9);
	assert_int_equal(q.lrh.sl, 3);
	assert_int_equal(q.lrh.vl, 1);
	assert_int_equal(q.grh.hop_limit, 63);
	assert_int_equal(q.grh.tclass, 0x28);
	assert_int_equal(q.grh.flow_label, 0x12345);
	assert_true(ib_gid_equal(&q.grh.sgid, &sgid));
	assert_true(ib_gid_equal(&q.grh.dgid, &dgid));
	assert_int_equal(q.icrc, p.icrc);
	assert_int_not_equal(q.vcrc, p.vcrc);
	expect_only_variant_changed(in, out, len);
	assert_int_equal(ib_icrc_compute(out, len - IB_ICRC_LEN - IB_VCRC_LEN, &icrc), 0);
	assert_int_equal(icrc, p.icrc);

	/* The check is a real one: had the router touched an invariant field (the BTH
	 * P_Key) and only resealed the VCRC, the receiver would refuse the ICRC. */
	out[IB_LRH_LEN + IB_GRH_LEN + 3] ^= 0x01;
	assert_int_equal(ib_packet_reseal_vcrc(out, len), 0);
	assert_int_equal(ib_packet_parse(out, len, &q), IB_PKT_ERR_ICRC);
	/* Nor does forgetting the VCRC go unseen. */
	assert_int_equal(router_rewrite(&rt, &hops[0], &p, in, len, out), 0);
	out[3] ^= 0x01;
	assert_int_equal(ib_packet_parse(out, len, &q), IB_PKT_ERR_VCRC);

	/* In place works too. */
	assert_int_equal(router_rewrite(&rt, &hops[0], &p, in, len, in), 0);
	assert_int_equal(ib_packet_parse(in, len, &q), IB_PKT_OK);
	assert_int_equal(q.grh.hop_limit, 63);
}

static void test_next_hop_and_drops(void **state)
{
	static uint8_t in[IB_PACKET_MAX_LEN];
	struct router rt;
	union ib_gid sgid = gid(PREFIX_A, GUID_A1), dgid = gid(PREFIX_B, GUID_B1),
		     far = gid(0xfec0000000000002ull, 5), b = gid_text("fec0:0:0:1::"),
		     c = gid_text("fec0:0:0:2::");
	struct router_hop hops[ROUTER_PORTS_MAX];
	struct ib_packet p;
	unsigned n;

	(void)state;
	two_port_router(&rt);
	assert_int_equal(router_route_add(&rt, &b, 64, 2, 0), 0);
	assert_int_equal(router_route_add(&rt, &c, 64, 2, 17), 0); /* via a router at LID 17 */

	/* By next hop: the DLID is the next router's, no resolution. */
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &far, 64, 10), &p), 0);
	resolve_calls = 0;
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_FORWARD);
	assert_int_equal(hops[0].dlid, 17);
	assert_int_equal(resolve_calls, 0);

	/* Hop limit: 2 goes on (as 1), 1 and 0 are dropped. */
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 2, 10), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_FORWARD);
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 1, 10), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n),
			 ROUTER_DROP_HOP_LIMIT);
	assert_int_equal(n, 0);
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 0, 10), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n),
			 ROUTER_DROP_HOP_LIMIT);

	/* No route; a direct route whose destination the subnet does not know. */
	far = gid(0x2001000000000000ull, 1);
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &far, 64, 10), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n),
			 ROUTER_DROP_NO_ROUTE);
	far = gid(PREFIX_B, 0x99);
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &far, 64, 10), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n),
			 ROUTER_DROP_NO_ROUTE);

	/* Egress MTU: port 2 carries 2048 octets of payload, not 2049. */
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 64, 2048), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_FORWARD);
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 64, 2049), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_DROP_MTU);

	/* No GRH: nothing to route on. */
	assert_int_equal(ib_packet_parse(in, build(in, 9, 4, &sgid, &dgid, 64, 10), &p), 0);
	p.has_grh = false;
	assert_int_equal(router_decide(&rt, 1, &p, resolve_b, NULL, hops, &n), ROUTER_DROP_NO_GRH);
	assert_int_equal(router_rewrite(&rt, &hops[0], &p, in, 100, in), -EINVAL);
}

static void test_multicast(void **state)
{
	static uint8_t in[IB_PACKET_MAX_LEN], out[IB_PACKET_MAX_LEN];
	struct router rt;
	union ib_gid sgid = gid(PREFIX_A, GUID_A1), sgid_b = gid(PREFIX_B, GUID_B1),
		     mgid = gid_text("ff12:401b:ffff::ffff:ffff"), other = gid_text("ff12:401b::1");
	struct router_hop hops[ROUTER_PORTS_MAX];
	struct ib_packet p, q;
	unsigned n;

	(void)state;
	two_port_router(&rt);
	assert_int_equal(router_group_join(&rt, &mgid, 1, 0xc001), 0);
	/* Joined on one side only: nothing to forward to. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc001, 4, &sgid, &mgid, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	assert_int_equal(router_group_join(&rt, &mgid, 2, 0xc005), 0);
	assert_true(router_joined(&rt, 2, &mgid, 0xc005));
	assert_false(router_joined(&rt, 2, &mgid, 0xc001));
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_FORWARD);
	assert_int_equal(n, 1);
	assert_int_equal(hops[0].port, 2);
	assert_int_equal(hops[0].dlid, 0xc005);
	{
		size_t len = build(in, 0xc001, 4, &sgid, &mgid, 64, 20);

		assert_int_equal(router_rewrite(&rt, &hops[0], &p, in, len, out), 0);
		assert_int_equal(ib_packet_parse(out, len, &q), IB_PKT_OK);
		assert_int_equal(q.lrh.dlid, 0xc005);
		assert_int_equal(q.lrh.slid, 9);
		assert_int_equal(q.grh.hop_limit, 63);
		assert_true(ib_gid_equal(&q.grh.dgid, &mgid));
		expect_only_variant_changed(in, out, len);
	}
	/* Arriving on an MLID the router did not join there, or another group: no. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc002, 4, &sgid, &mgid, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	assert_int_equal(ib_packet_parse(in, build(in, 0xc001, 4, &sgid, &other, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	/* Never back into the subnet it started in: a packet from B (SGID prefix B) that
	 * came round to port 1 is not sent to port 2. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc001, 4, &sgid_b, &mgid, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	/* A multicast DLID with a unicast DGID (or the reverse) is no packet to route. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc001, 4, &sgid, &sgid_b, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_GRH);
	/* Leaving the group on B stops it. */
	assert_int_equal(router_group_join(&rt, &mgid, 2, 0), 0);
	assert_int_equal(ib_packet_parse(in, build(in, 0xc001, 4, &sgid, &mgid, 64, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	assert_int_equal(router_group_join(&rt, &sgid, 2, 0xc001), -EINVAL);
	assert_int_equal(router_group_join(&rt, &mgid, 2, 0x10), -EINVAL);
}

/* The MLID of a proxied group's members behind port 2 (B): 0xc007 for sn_b only. */
static uint16_t resolve_mc(void *arg, unsigned port, const union ib_gid *g)
{
	const union ib_gid *sn_b = arg;

	return port == 2 && ib_gid_equal(g, sn_b) ? 0xc007 : 0;
}

static void test_multicast_proxy(void **state)
{
	static uint8_t in[IB_PACKET_MAX_LEN];
	struct router rt;
	union ib_gid sgid = gid(PREFIX_A, GUID_A1), sgid_b = gid(PREFIX_B, GUID_B1),
		     pfx = gid_text("ff12:601b:ffff::1:ff00:0"),
		     sn_b = gid_text("ff12:601b:ffff::1:ff00:21"),
		     sn_x = gid_text("ff12:601b:ffff::1:ff00:99"),
		     outside = gid_text("ff12:601b:ffff::2"),
		     bcast = gid_text("ff12:401b:ffff::ffff:ffff");
	struct router_hop hops[ROUTER_PORTS_MAX];
	struct ib_packet p;
	unsigned n;

	(void)state;
	two_port_router(&rt);
	/* Not proxied yet: dropped, whatever the MLID. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &sn_b, 2, 20), &p), 0);
	assert_false(router_proxies(&rt, &sn_b));
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n),
			 ROUTER_DROP_NO_ROUTE);
	assert_int_equal(router_proxy_add(&rt, &pfx, 104), 0);
	assert_int_equal(router_proxy_add(&rt, &pfx, 104), 0); /* again: nothing */
	assert_int_equal(rt.n_proxies, 1);
	assert_true(router_proxies(&rt, &sn_b));
	assert_false(router_proxies(&rt, &outside));
	/* Any MLID on A; out on B with the MLID B's members joined with. */
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n), ROUTER_FORWARD);
	assert_int_equal(n, 1);
	assert_int_equal(hops[0].port, 2);
	assert_int_equal(hops[0].dlid, 0xc007);
	/* No member on B: nothing to forward. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &sn_x, 2, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n),
			 ROUTER_DROP_NO_ROUTE);
	/* Outside the prefix, or no resolver: as before. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &outside, 2, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n),
			 ROUTER_DROP_NO_ROUTE);
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &sn_b, 2, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, NULL, NULL, hops, &n), ROUTER_DROP_NO_ROUTE);
	/* The hop limit still rules: 1 is dropped. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &sn_b, 1, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n),
			 ROUTER_DROP_HOP_LIMIT);
	/* Never back into the subnet it started in. */
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid_b, &sn_b, 2, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n),
			 ROUTER_DROP_NO_ROUTE);
	/* An explicitly joined group keeps its own MLIDs even under a proxy prefix. */
	assert_int_equal(router_group_join(&rt, &sn_b, 1, 0xc00d), 0);
	assert_int_equal(router_group_join(&rt, &sn_b, 2, 0xc00e), 0);
	assert_int_equal(ib_packet_parse(in, build(in, 0xc00d, 4, &sgid, &sn_b, 2, 20), &p), 0);
	assert_int_equal(router_decide(&rt, 1, &p, resolve_mc, &sn_b, hops, &n), ROUTER_FORWARD);
	assert_int_equal(hops[0].dlid, 0xc00e);
	/* Refused: a unicast prefix, a length under 8 or above 128; the table's size. */
	assert_int_equal(router_proxy_add(&rt, &sgid, 64), -EINVAL);
	assert_int_equal(router_proxy_add(&rt, &pfx, 4), -EINVAL);
	assert_int_equal(router_proxy_add(&rt, &pfx, 129), -EINVAL);
	for (unsigned i = 1; i < ROUTER_PROXIES_MAX; i++)
		assert_int_equal(router_proxy_add(&rt, &bcast, 8 + i), 0);
	assert_int_equal(router_proxy_add(&rt, &bcast, 120), -ENOSPC);
}

/* ---- through the fabric --------------------------------------------------------- */

#define NREC 8
struct ctx {
	struct fabric *f;
	int a, b, b2;
	uint32_t qa, qb, qb2;
	unsigned n_deliver, n_capture, n_capture_dropped;
	int rec_port[NREC];
	uint8_t rec[NREC][IB_PACKET_MAX_LEN];
	size_t rec_len[NREC];
	uint8_t cap[NREC][80];
	uint8_t pkt[IB_PACKET_MAX_LEN];
};

static int deliver(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	struct ctx *x = arg;

	(void)qpn;
	if (x->n_deliver < NREC) {
		x->rec_port[x->n_deliver] = port;
		memcpy(x->rec[x->n_deliver], pkt, len);
		x->rec_len[x->n_deliver] = len;
	}
	x->n_deliver++;
	return 0;
}

static void capture(void *arg, const uint8_t *pkt, size_t len, bool dropped, uint64_t now_ns)
{
	struct ctx *x = arg;

	(void)now_ns;
	if (x->n_capture < NREC)
		memcpy(x->cap[x->n_capture], pkt, len < 80 ? len : 80);
	x->n_capture++;
	x->n_capture_dropped += dropped;
}

static struct simfab_port_info host(const char *name, uint16_t lid, uint64_t prefix, uint64_t guid)
{
	struct simfab_port_info i = { .port_num = 1,
				      .mtu = SIMFAB_MTU_4096,
				      .lid = lid,
				      .sm_lid = 1,
				      .port_guid = guid,
				      .gid_prefix = prefix,
				      .n_pkeys = 1 };

	strcpy(i.name, name);
	i.pkeys[0] = 0xffff;
	return i;
}

static int setup(void **state)
{
	static const struct fabric_ops ops = { deliver, NULL, capture };
	struct ctx *x = calloc(1, sizeof(*x));
	struct simfab_port_info ia = host("ibhost1", 4, PREFIX_A, GUID_A1);
	struct simfab_port_info ib = host("ibhostb1", 4, PREFIX_B, GUID_B1);
	struct simfab_port_info ib2 = host("ibhostb2", 5, PREFIX_B, GUID_B1 + 1);
	union ib_gid b = gid_text("fec0:0:0:1::"), a = gid_text("fe80::");

	assert_non_null(x);
	assert_int_equal(fabric_new(NULL, &ops, x, &x->f), 0);
	/* The same LID 4 on both subnets: no clash, each prefix has its own LIDs. */
	assert_int_equal(fabric_port_add(x->f, &ia, &x->a, NULL), 0);
	assert_int_equal(fabric_port_add(x->f, &ib, &x->b, NULL), 0);
	assert_int_equal(fabric_port_add(x->f, &ib2, &x->b2, NULL), 0);
	assert_int_equal(fabric_qp_create(x->f, x->a, SIMFAB_QP_UD, 0x0b1b, &x->qa), 0);
	assert_int_equal(fabric_qp_create(x->f, x->b, SIMFAB_QP_UD, 0x0b1b, &x->qb), 0);
	assert_int_equal(fabric_qp_create(x->f, x->b2, SIMFAB_QP_UD, 0x0b1b, &x->qb2), 0);
	assert_int_equal(fabric_router_port(x->f, "rt1", 1, 9, GUID_RT1, PREFIX_A, 5, NULL), 0);
	assert_int_equal(fabric_router_port(x->f, "rt1", 2, 9, GUID_RT2, PREFIX_B, 4, NULL), 0);
	assert_int_equal(fabric_router_route(x->f, "rt1", &b, 64, 2, 0), 0);
	assert_int_equal(fabric_router_route(x->f, "rt1", &a, 64, 1, 0), 0);
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

static uint64_t fdrops(struct ctx *x, enum fabric_drop r)
{
	struct fabric_stats st;

	fabric_stats(x->f, &st);
	return st.drops[r];
}

/* Switch a packet from a host port (its first QP is 0x48, as build() assumes). */
static struct fabric_verdict fsend(struct ctx *x, int port, uint16_t dlid, const union ib_gid *sgid,
				   const union ib_gid *dgid, uint8_t hop_limit, size_t plen)
{
	const struct simfab_port_info *in = fabric_port_info(x->f, port);
	struct fabric_verdict v;
	size_t len = build(x->pkt, dlid, in->lid, sgid, dgid, hop_limit, plen);

	fabric_packet(x->f, port, 0x48, x->pkt, len, 1000, &v);
	return v;
}

static void test_fabric_across(void **state)
{
	struct ctx *x = *state;
	union ib_gid ga = gid(PREFIX_A, GUID_A1), gb = gid(PREFIX_B, GUID_B1),
		     nowhere = gid(0x2001000000000000ull, 1);
	struct fabric_verdict v;
	struct fabric_stats st;
	struct ib_packet q;

	assert_int_equal(x->qa, 0x48);
	assert_int_equal(x->qb, 0x48);
	/* ibhost1 (A, LID 4) -> rt1 port 1 (LID 9) -> ibhostb1 (B, LID 4). */
	v = fsend(x, x->a, 9, &ga, &gb, 64, 200);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(v.refused, 0);
	assert_int_equal(v.routed, 1);
	assert_int_equal(x->n_deliver, 1);
	assert_int_equal(x->rec_port[0], x->b);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.dlid, 4);
	assert_int_equal(q.lrh.slid, 9);
	assert_int_equal(q.grh.hop_limit, 63);
	expect_only_variant_changed(x->pkt, x->rec[0], x->rec_len[0]);
	/* Captured twice: as it reached the router on A, as it left on B. */
	assert_int_equal(x->n_capture, 2);
	assert_int_equal(x->n_capture_dropped, 0);
	assert_int_equal(x->cap[0][IB_LRH_LEN + 7], 64);
	assert_int_equal(ib_get_be16(x->cap[0] + 2), 9);
	assert_int_equal(x->cap[1][IB_LRH_LEN + 7], 63);
	assert_int_equal(ib_get_be16(x->cap[1] + 2), 4);
	fabric_stats(x->f, &st);
	assert_int_equal(st.packets, 1);
	assert_int_equal(st.delivered, 1);
	assert_int_equal(st.routed, 1);
	/* The router's node counts what it took and sent. */
	assert_int_equal(fabric_port_stats(x->f, x->a)->rx_packets, 1);
	assert_int_equal(fabric_port_stats(x->f, x->b)->tx_packets, 1);

	/* And back: ibhostb1 -> rt1 port 2 (LID 9 on B) -> ibhost1. */
	v = fsend(x, x->b, 9, &gb, &ga, 10, 50);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(x->rec_port[1], x->a);
	assert_int_equal(ib_packet_parse(x->rec[1], x->rec_len[1], &q), IB_PKT_OK);
	assert_int_equal(q.grh.hop_limit, 9);

	/* Hop limit 1: the router drops it, counted, and the capture says so. */
	v = fsend(x, x->a, 9, &ga, &gb, 1, 50);
	assert_int_equal(v.delivered, 0);
	assert_int_equal(v.first, FABRIC_DROP_HOP_LIMIT);
	assert_int_equal(fdrops(x, FABRIC_DROP_HOP_LIMIT), 1);
	assert_int_equal(x->n_capture, 5);
	assert_int_equal(x->n_capture_dropped, 1);

	/* B's LID 4 from A without the router: ibhost1 itself (A's LID 4), whose GID
	 * is not the DGID: refused, the router is not bypassed. */
	v = fsend(x, x->a, 4, &ga, &gb, 64, 50);
	assert_int_equal(v.delivered, 0);

	/* Payload above B's MTU (2048): refused by the router. */
	v = fsend(x, x->a, 9, &ga, &gb, 64, 3000);
	assert_int_equal(v.first, FABRIC_DROP_MTU);

	/* The router's link down: refused at it. */
	assert_int_equal(fabric_set_link(x->f, "rt1", false), 0);
	v = fsend(x, x->a, 9, &ga, &gb, 64, 50);
	assert_int_equal(v.first, FABRIC_DROP_LINK_DOWN);
	assert_int_equal(x->n_deliver, 2);
	assert_int_equal(fabric_set_link(x->f, "rt1", true), 0);
	v = fsend(x, x->a, 9, &ga, &gb, 64, 50);
	assert_int_equal(v.delivered, 1);

	/* No route for the DGID at the router. */
	v = fsend(x, x->a, 9, &ga, &nowhere, 64, 50);
	assert_int_equal(v.first, FABRIC_DROP_ROUTER_NO_ROUTE);
}

static void test_fabric_loop_bounded(void **state)
{
	struct ctx *x = *state;
	union ib_gid ga = gid(PREFIX_A, GUID_A1), gb = gid(PREFIX_B, GUID_B1),
		     b = gid_text("fec0:0:0:1::");
	struct fabric_verdict v;

	/* A misconfigured route: rt1 sends B's prefix out of port 2 to next hop LID 9,
	 * which on B is its own port 2. The packet circles until the fabric's depth bound
	 * ends it, counted once as hop_limit. */
	assert_int_equal(fabric_router_route(x->f, "rt1", &b, 64, 2, 9), 0);
	v = fsend(x, x->a, 9, &ga, &gb, 255, 50);
	assert_int_equal(v.delivered, 0);
	assert_int_equal(v.first, FABRIC_DROP_HOP_LIMIT);
	assert_int_equal(v.routed, FABRIC_ROUTE_DEPTH);
	assert_int_equal(fdrops(x, FABRIC_DROP_HOP_LIMIT), 1);
	/* With hop limit 4 the GRH ends it first: 3 copies, then it arrives with 1. */
	v = fsend(x, x->a, 9, &ga, &gb, 4, 50);
	assert_int_equal(v.routed, 3);
	assert_int_equal(fdrops(x, FABRIC_DROP_HOP_LIMIT), 2);
}

static void test_fabric_multicast(void **state)
{
	struct ctx *x = *state;
	union ib_gid ga = gid(PREFIX_A, GUID_A1), mgid = gid_text("ff12:401b:ffff::ffff:ffff");
	struct fabric_verdict v;
	struct ib_packet q;

	/* Group: MLID 0xc000 on A, 0xc003 on B; ibhostb2 attached on B. */
	assert_int_equal(fabric_mcast_attach(x->f, x->b2, x->qb2, &mgid, 0xc003), 0);
	/* The router has not joined: nobody on A. */
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.first, FABRIC_DROP_MCAST_NO_MEMBER);
	assert_int_equal(fabric_router_mcast(x->f, "rt1", &mgid, 1, 0xc000), 0);
	assert_int_equal(fabric_router_mcast(x->f, "rt1", &mgid, 2, 0xc003), 0);
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(v.routed, 1);
	assert_int_equal(x->rec_port[0], x->b2);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.dlid, 0xc003);
	assert_int_equal(q.lrh.slid, 9);
	assert_int_equal(q.grh.hop_limit, 63);
	/* B's MLID 0xc003 on A is another group: not B's members. */
	v = fsend(x, x->a, 0xc003, &ga, &mgid, 64, 30);
	assert_int_equal(v.first, FABRIC_DROP_MCAST_NO_MEMBER);
	/* Unknown router: -ENOENT. */
	assert_int_equal(fabric_router_mcast(x->f, "rt9", &mgid, 1, 0xc000), -ENOENT);
	assert_int_equal(fabric_router_proxy(x->f, "rt9", &mgid, 64), -ENOENT);
	assert_int_equal(fabric_router_route(x->f, "rt9", &mgid, 64, 1, 0), -ENOENT);
}

/* Two routers joined to the group: the first that is up carries each packet (once, not
 * twice); while it is down the other does. */
static void test_fabric_multicast_two_routers(void **state)
{
	struct ctx *x = *state;
	union ib_gid ga = gid(PREFIX_A, GUID_A1), mgid = gid_text("ff12:401b:ffff::ffff:ffff"),
		     b = gid_text("fec0:0:0:1::"), a = gid_text("fe80::");
	struct fabric_verdict v;
	struct ib_packet q;

	assert_int_equal(
	    fabric_router_port(x->f, "rt2", 1, 10, GUID_RT1 + 0x10000, PREFIX_A, 5, NULL), 0);
	assert_int_equal(
	    fabric_router_port(x->f, "rt2", 2, 10, GUID_RT2 + 0x10000, PREFIX_B, 4, NULL), 0);
	assert_int_equal(fabric_router_route(x->f, "rt2", &b, 64, 2, 0), 0);
	assert_int_equal(fabric_router_route(x->f, "rt2", &a, 64, 1, 0), 0);
	assert_int_equal(fabric_mcast_attach(x->f, x->b2, x->qb2, &mgid, 0xc003), 0);
	for (const char *const *r = (const char *const[]){ "rt1", "rt2", NULL }; *r; r++) {
		assert_int_equal(fabric_router_mcast(x->f, *r, &mgid, 1, 0xc000), 0);
		assert_int_equal(fabric_router_mcast(x->f, *r, &mgid, 2, 0xc003), 0);
	}
	x->n_deliver = 0;
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(v.routed, 1);
	/* rt2, joined on B too, does not take what rt1 brought there (reverse path). */
	assert_int_equal(v.refused, 0);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.slid, 9); /* rt1 */
	assert_int_equal(fabric_set_link(x->f, "rt1", false), 0);
	x->n_deliver = 0;
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.slid, 10); /* rt2 */
	/* Both down: the first takes it and counts the drop. */
	assert_int_equal(fabric_set_link(x->f, "rt2", false), 0);
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.delivered, 0);
	assert_int_equal(v.first, FABRIC_DROP_LINK_DOWN);
	assert_int_equal(fabric_set_link(x->f, "rt1", true), 0);
	x->n_deliver = 0;
	v = fsend(x, x->a, 0xc000, &ga, &mgid, 64, 30);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.slid, 9);
}

/* A router proxying the solicited-node groups: a group sent on A (any MLID) reaches B's
 * members with the MLID they attached with; without a member on B rt1 does not take it. */
static void test_fabric_multicast_proxy(void **state)
{
	struct ctx *x = *state;
	union ib_gid ga = gid(PREFIX_A, GUID_A1), pfx = gid_text("ff12:601b:ffff::1:ff00:0"),
		     sn = gid_text("ff12:601b:ffff::1:ff00:21"),
		     other = gid_text("ff12:601b:ffff::1:ff00:22");
	struct fabric_verdict v;
	struct ib_packet q;

	assert_int_equal(fabric_mcast_attach(x->f, x->b2, x->qb2, &sn, 0xc009), 0);
	v = fsend(x, x->a, 0xc004, &ga, &sn, 2, 30);
	assert_int_equal(v.first, FABRIC_DROP_MCAST_NO_MEMBER);
	assert_int_equal(fabric_router_proxy(x->f, "rt1", &pfx, 104), 0);
	v = fsend(x, x->a, 0xc004, &ga, &sn, 2, 30);
	assert_int_equal(v.delivered, 1);
	assert_int_equal(v.routed, 1);
	assert_int_equal(x->rec_port[0], x->b2);
	assert_int_equal(ib_packet_parse(x->rec[0], x->rec_len[0], &q), IB_PKT_OK);
	assert_int_equal(q.lrh.dlid, 0xc009);
	assert_int_equal(q.lrh.slid, 9);
	assert_int_equal(q.grh.hop_limit, 1);
	/* No member of that group on B: the router does not take it (nor count it). */
	v = fsend(x, x->a, 0xc005, &ga, &other, 2, 30);
	assert_int_equal(v.delivered, 0);
	assert_int_equal(v.first, FABRIC_DROP_MCAST_NO_MEMBER);
	assert_int_equal(fdrops(x, FABRIC_DROP_ROUTER_NO_ROUTE), 0);
	/* Hop limit 1 (IPoIB's default) stops at the router. */
	v = fsend(x, x->a, 0xc004, &ga, &sn, 1, 30);
	assert_int_equal(v.delivered, 0);
	assert_int_equal(v.first, FABRIC_DROP_HOP_LIMIT);
}

static int parse(const char *line, struct fabric_cmd *c)
{
	const char *why = NULL;

	return fabric_cmd_parse(line, strlen(line), c, &why);
}

static void test_cmd_parse(void **state)
{
	struct fabric_cmd c;
	const char *why;

	(void)state;
	const char *router = "router rt1 2 0x9 0x0002c90300f10002 0xfec0000000000001 2048";

	assert_int_equal(fabric_cmd_parse(router, strlen(router), &c, &why), 0);
	assert_int_equal(c.kind, FABRIC_CMD_ROUTER_PORT);
	assert_string_equal(c.name, "rt1");
	assert_int_equal(c.port, 2);
	assert_int_equal(c.lid, 9);
	assert_true(c.guid == 0x0002c90300f10002ull);
	assert_true(c.prefix == 0xfec0000000000001ull);
	assert_int_equal(c.mtu, 4);
	assert_int_equal(parse("route rt1 fec0:0:0:1::/64 2 direct", &c), 0);
	assert_int_equal(c.kind, FABRIC_CMD_ROUTE);
	assert_int_equal(c.plen, 64);
	assert_int_equal(c.lid, 0);
	assert_int_equal(c.port, 2);
	assert_int_equal(c.gid.raw[1], 0xc0);
	assert_int_equal(parse("route rt1 ::/0 1 17", &c), 0);
	assert_int_equal(c.lid, 17);
	assert_int_equal(c.plen, 0);
	assert_int_equal(parse("mcast rt1 ff12:401b::1 1 0xc001", &c), 0);
	assert_int_equal(c.kind, FABRIC_CMD_MCAST);
	assert_int_equal(c.lid, 0xc001);
	assert_int_equal(parse("mcast rt1 ff12:401b::1 1 0", &c), 0);
	assert_int_equal(parse("mcast-proxy rt1 ff12:601b:ffff::1:ff00:0/104", &c), 0);
	assert_int_equal(c.kind, FABRIC_CMD_MCAST_PROXY);
	assert_int_equal(c.plen, 104);
	assert_int_equal(c.gid.raw[11], 0x01);

	const char *bad[] = {
		"router rt1 2 9 0x1 0x0 2000",               /* MTU */
		"router rt1 9 9 0x1 0x0 2048",               /* port */
		"router rt1 1 0xc000 0x1 0x0 2048",          /* LID */
		"router rt1 1 9 0 0x0 2048",                 /* GUID */
		"router rt1 1 9 0x1 0x0",                    /* words */
		"route rt1 fec0::/129 1 direct",             /* length */
		"route rt1 fec0:: 1 direct",                 /* no length */
		"route rt1 nogid/64 1 direct",               /* GID */
		"route rt1 fec0::/64 1 0xc001",              /* next hop */
		"route rt1 fec0::/64 1 somewhere",           /* next hop */
		"mcast rt1 fe80::1 1 0xc001",                /* not an MGID */
		"mcast rt1 ff12::1 1 0x10",                  /* MLID */
		"mcast rt1 ff12::1 1 0xffff",                /* permissive */
		"mcast-proxy rt1 fe80::/64",                 /* not multicast */
		"mcast-proxy rt1 ff12::/4",                  /* shorter than ff00::/8 */
		"mcast-proxy rt1 ff12::",                    /* no length */
		"mcast-proxy rt1 ff12::/104 1",              /* words */
		"router r/t 1 9 0x1 0x0 2048",               /* name */
		"router rt1 1 9 0x11112222333344445 0 2048", /* 17 hex digits */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		if (fabric_cmd_parse(bad[i], strlen(bad[i]), &c, &why) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_non_null(why);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup_longest_prefix),
		cmocka_unit_test(test_unicast_direct_rewrite),
		cmocka_unit_test(test_next_hop_and_drops),
		cmocka_unit_test(test_multicast),
		cmocka_unit_test(test_multicast_proxy),
		cmocka_unit_test_setup_teardown(test_fabric_across, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fabric_loop_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fabric_multicast, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fabric_multicast_two_routers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fabric_multicast_proxy, setup, teardown),
		cmocka_unit_test(test_cmd_parse),
	};

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
