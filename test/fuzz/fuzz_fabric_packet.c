/*
 * libFuzzer harness for the fabric's packet path (sim/fabric/fabric.c): arbitrary
 * octets sent as a PACKET by an attached port must never crash, and every packet must
 * be either delivered or counted as dropped: the fabric's packet count grows by one,
 * and its delivered or dropped counters by at least one (a held packet only once
 * released). The first octet picks the sending QP (GSI, UD, RC, or an unknown one);
 * the rest is the packet, tried as is and again with its CRCs recomputed where PktLen
 * puts them, so the checks behind the CRCs (routing, P_Key, Q_Key, QPs, multicast,
 * MTU) are reached. Delivered packets are re-parsed: the fabric forwards only packets
 * that pass ib_packet_parse.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test/fuzz/fuzz_ib_seal.h"
#include "lib/ib_bytes.h"
#include "lib/ib_packet.h"
#include "sim/fabric/fabric.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static unsigned delivered;

static int deliver(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len)
{
	struct ib_packet p;

	(void)arg;
	(void)port;
	(void)qpn;
	check(ib_packet_parse(pkt, len, &p) == IB_PKT_OK);
	delivered++;
	return 0;
}

static struct fabric *f;
static int ports[3];
static uint32_t qps[4];

static void setup(void)
{
	static const struct fabric_ops ops = { deliver, NULL, NULL };
	static const uint16_t lids[3] = { 1, 2, 4 };
	union ib_gid mgid;

	check(fabric_new(NULL, &ops, NULL, &f) == 0);
	for (int i = 0; i < 3; i++) {
		struct simfab_port_info in = { .port_num = 1,
					       .lmc = i == 2 ? 1 : 0,
					       .mtu = (uint8_t)(3 + i),
					       .lid = lids[i],
					       .sm_lid = 1,
					       .port_guid = 0x100 + (uint64_t)i,
					       .gid_prefix = 0xfe80000000000000ull,
					       .n_pkeys = 2 };

		in.name[0] = (char)('a' + i);
		in.pkeys[0] = 0xffff;
		in.pkeys[1] = (uint16_t)(i == 1 ? 0x0001 : 0x8001);
		check(fabric_port_add(f, &in, &ports[i], NULL) == 0);
	}
	check(fabric_qp_create(f, ports[0], SIMFAB_QP_UD, 0x0b1b, &qps[0]) == 0);
	check(fabric_qp_create(f, ports[0], SIMFAB_QP_RC, 0, &qps[1]) == 0);
	check(fabric_qp_create(f, ports[1], SIMFAB_QP_UD, 0x0b1b, &qps[2]) == 0);
	check(fabric_qp_create_pkey(f, ports[2], SIMFAB_QP_UC, 1, 0, &qps[3]) == 0);
	check(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &mgid) == 0);
	check(fabric_mcast_attach(f, ports[0], qps[0], &mgid, 0xc000) == 0);
	check(fabric_mcast_attach(f, ports[1], qps[2], &mgid, 0xc000) == 0);
}

static void one(uint32_t src_qpn, const uint8_t *pkt, size_t len)
{
	struct fabric_stats a, b;
	struct fabric_verdict v;
	uint64_t drops_a = 0, drops_b = 0;

	fabric_stats(f, &a);
	delivered = 0;
	fabric_packet(f, ports[0], src_qpn, pkt, len, 0, &v);
	fabric_stats(f, &b);
	for (int r = 1; r < FABRIC_DROP_COUNT; r++) {
		drops_a += a.drops[r];
		drops_b += b.drops[r];
	}
	check(b.packets == a.packets + 1);
	check(!v.held);
	check(v.delivered == delivered && b.delivered == a.delivered + delivered);
	check(drops_b == drops_a + v.refused);
	check(v.delivered + v.refused >= 1);
	check((v.refused == 0) == (v.first == FABRIC_OK));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[IB_PACKET_MAX_LEN];
	static const uint32_t pick_fixed[4] = { 1, 0, 0, 0x777 };
	uint32_t src;
	size_t len;
	int sealed;

	if (!f)
		setup();
	if (size < 1)
		return 0;
	src = (data[0] & 3) == 1 ? qps[0] : (data[0] & 3) == 2 ? qps[1] : pick_fixed[data[0] & 3];
	data++;
	len = size - 1;
	one(src, data, len);
	sealed = fuzz_ib_seal(data, len, fixed, sizeof(fixed));
	if (sealed == 0)
		return 0;
	check(sealed == 1);
	one(src, fixed, len);
	return 0;
}
