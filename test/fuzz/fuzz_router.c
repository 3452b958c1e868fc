/*
 * libFuzzer harness for the IB router (sim/fabric/router.c) and routing through the
 * simulated fabric. The first octet picks the sending host (subnet A or B) and the
 * router port the packet is taken to arrive on; the rest is the packet, tried as is
 * and again with ICRC and VCRC recomputed where PktLen puts them, so the router's
 * decision is reached.
 *
 * Checked for every input: the router's own decision, and each copy it would send:
 * the rewrite passes ib_packet_parse (VCRC recomputed, ICRC still valid), carries the
 * hop's DLID, the egress port's SLID and the hop limit minus one, and changes no other
 * octet than the LRH's VL/DLID/SLID, the hop limit and the VCRC. Through the fabric
 * (two subnets with the same LIDs, one router, a looping default route, a joined group
 * and solicited-node groups taken on demand): every packet
 * delivered or counted dropped, each delivered one parses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_ib_seal.h"
#include "lib/ib_bytes.h"
#include "lib/ib_packet.h"
#include "sim/fabric/fabric.h"
#include "sim/fabric/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX_A 0xfe80000000000000ull
#define PREFIX_B 0xfec0000000000001ull

static void check(int cond)
{
	if (!cond)
		abort();
}

static int deliver(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	struct ib_packet p;

	(void)arg;
	(void)port;
	(void)qpn;
	check(ib_packet_parse(pkt, len, &p) == IB_PKT_OK);
	return 0;
}

static struct fabric *f;
static struct router rt; /* the same tables as the fabric's rt1 */
static int hosts[3];     /* A lid 4; B lid 4; B lid 5 */

static union ib_gid sn_b1; /* a solicited-node group rt1 proxies, member b1 on B */

static uint16_t resolve(void *arg, unsigned port, const union ib_gid *gid)
{
	(void)arg;
	if (ib_gid_is_multicast(gid))
		return port == 2 && ib_gid_equal(gid, &sn_b1) ? 0xc005 : 0;
	if (port == 2 && ib_gid_prefix(gid) == PREFIX_B && ib_gid_guid(gid) == 0xb1)
		return 4;
	if (port == 1 && ib_gid_prefix(gid) == PREFIX_A && ib_gid_guid(gid) == 0xa1)
		return 4;
	return 0;
}

static void routes(const char *gid, unsigned plen, unsigned port, uint16_t hop)
{
	union ib_gid g;

	check(ib_gid_parse(gid, &g) == 0);
	check(router_route_add(&rt, &g, plen, port, hop) == 0);
	check(fabric_router_route(f, "rt1", &g, plen, port, hop) == 0);
}

static void setup(void)
{
	static const struct fabric_ops ops = { deliver, NULL, NULL };
	static const uint64_t prefix[3] = { PREFIX_A, PREFIX_B, PREFIX_B };
	static const uint16_t lids[3] = { 4, 4, 5 };
	static const uint64_t guids[3] = { 0xa1, 0xb1, 0xb2 };
	union ib_gid mgid;
	uint32_t qpn;

	check(fabric_new(NULL, &ops, NULL, &f) == 0);
	for (int i = 0; i < 3; i++) {
		struct simfab_port_info in = { .port_num = 1,
					       .mtu = SIMFAB_MTU_4096,
					       .lid = lids[i],
					       .sm_lid = 1,
					       .port_guid = guids[i],
					       .gid_prefix = prefix[i],
					       .n_pkeys = 1 };

		in.name[0] = (char)('a' + i);
		in.pkeys[0] = 0xffff;
		check(fabric_port_add(f, &in, &hosts[i], NULL) == 0);
		check(fabric_qp_create(f, hosts[i], SIMFAB_QP_UD, 0x0b1b, &qpn) == 0);
		check(qpn == 0x48);
	}
	check(fabric_router_port(f, "rt1", 1, 9, 0xf1, PREFIX_A, SIMFAB_MTU_4096, NULL) == 0);
	check(fabric_router_port(f, "rt1", 2, 9, 0xf2, PREFIX_B, 4 /* 2048 */, NULL) == 0);
	check(router_port_set(&rt, 1, 9, PREFIX_A, 0xf1, 4096) == 0);
	check(router_port_set(&rt, 2, 9, PREFIX_B, 0xf2, 2048) == 0);
	routes("fec0:0:0:1::", 64, 2, 0);
	routes("fe80::", 64, 1, 0);
	routes("fec0:0:0:2::", 64, 2, 17);
	routes("::", 0, 2, 9); /* back to itself on B: a loop the fabric must bound */
	check(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &mgid) == 0);
	check(fabric_mcast_attach(f, hosts[2], 0x48, &mgid, 0xc003) == 0);
	check(fabric_router_mcast(f, "rt1", &mgid, 1, 0xc000) == 0);
	check(fabric_router_mcast(f, "rt1", &mgid, 2, 0xc003) == 0);
	check(router_group_join(&rt, &mgid, 1, 0xc000) == 0);
	check(router_group_join(&rt, &mgid, 2, 0xc003) == 0);
	/* Solicited-node groups taken on demand; one member on B. */
	check(ib_gid_parse("ff12:601b:ffff::1:ff00:0", &mgid) == 0);
	check(router_proxy_add(&rt, &mgid, 104) == 0);
	check(fabric_router_proxy(f, "rt1", &mgid, 104) == 0);
	check(ib_gid_parse("ff12:601b:ffff::1:ff00:b1", &sn_b1) == 0);
	check(fabric_mcast_attach(f, hosts[1], 0x48, &sn_b1, 0xc005) == 0);
}

static void router_alone(unsigned in_port, const uint8_t *pkt, size_t len)
{
	static uint8_t out[IB_PACKET_MAX_LEN];
	struct router_hop hops[ROUTER_PORTS_MAX];
	struct ib_packet p, q;
	enum router_verdict v;
	unsigned n;

	if (ib_packet_parse(pkt, len, &p) != IB_PKT_OK)
		return;
	v = router_decide(&rt, in_port, &p, resolve, NULL, hops, &n);
	check((v == ROUTER_FORWARD) == (n > 0));
	check(n <= ROUTER_PORTS_MAX);
	for (unsigned i = 0; i < n; i++) {
		check(p.has_grh && p.grh.hop_limit >= 2);
		check(router_rewrite(&rt, &hops[i], &p, pkt, len, out) == 0);
		check(ib_packet_parse(out, len, &q) == IB_PKT_OK);
		check(q.lrh.dlid == hops[i].dlid);
		check(q.lrh.slid == rt.port[hops[i].port].lid);
		check(q.grh.hop_limit == p.grh.hop_limit - 1);
		check(q.icrc == p.icrc);
		for (size_t k = 0; k < len - IB_VCRC_LEN; k++)
			if (k != 0 && k != 2 && k != 3 && k != 6 && k != 7 && k != IB_LRH_LEN + 7)
				check(out[k] == pkt[k]);
	}
}

static void through_fabric(int host, const uint8_t *pkt, size_t len)
{
	struct fabric_stats a, b;
	struct fabric_verdict v;
	uint64_t drops_a = 0, drops_b = 0;

	fabric_stats(f, &a);
	fabric_packet(f, hosts[host], 0x48, pkt, len, 0, &v);
	fabric_stats(f, &b);
	for (int r = 1; r < FABRIC_DROP_COUNT; r++) {
		drops_a += a.drops[r];
		drops_b += b.drops[r];
	}
	check(b.packets == a.packets + 1);
	check(b.delivered == a.delivered + v.delivered);
	check(drops_b == drops_a + v.refused);
	check(v.delivered + v.refused >= 1);
	check(b.routed == a.routed + v.routed);
	check(v.routed <= (unsigned)FABRIC_ROUTE_DEPTH * ROUTER_PORTS_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[IB_PACKET_MAX_LEN];
	size_t len;
	unsigned in_port;
	int host, sealed;

	if (!f)
		setup();
	if (size < 1)
		return 0;
	host = (data[0] & 1) ? 1 : 0;
	in_port = (unsigned)(data[0] >> 1) % 4; /* 0 and 3: not a port of the router */
	data++;
	len = size - 1;
	through_fabric(host, data, len);
	router_alone(in_port, data, len);
	sealed = fuzz_ib_seal(data, len, fixed, sizeof(fixed));
	if (sealed == 0)
		return 0;
	check(sealed == 1);
	through_fabric(host, fixed, len);
	router_alone(in_port, fixed, len);
	return 0;
}
