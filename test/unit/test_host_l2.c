/*
 * sim/host/host_l2: the MAC derivation rule (worked out by hand for a rack GUID), its
 * collision handling and stability, and the ARP/ND rewriting both ways, each result
 * checked by the other codec (pkt/arp, pkt/nd: lengths, options, checksum); the DHCP
 * client's messages into RFC 4390's form and replies back (pkt/dhcp, checksums).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <errno.h>
#include <sys/socket.h>

#include "pkt/arp.h"
#include "pkt/dhcp.h"
#include "pkt/ip.h"
#include "pkt/nd.h"
#include "sim/host/host_l2.h"

static struct hl2 h;
static struct ipoib_hwaddr own, peer;

static void setup_hw(void)
{
	own.flags = 0;
	own.qpn = 0x48;
	ib_gid_set(&own.gid, 0xfe80000000000000ull, 0x0002c90300a10007ull);
	peer.flags = 0;
	peer.qpn = 0x49;
	ib_gid_set(&peer.gid, 0xfe80000000000000ull, 0x0002c90300a10009ull);
	hl2_init(&h, &own);
}

/* GUID 0x0002c90300a10007: top 24 bits 0x0002c9, fold6 = 0x2c9 ^ 0xb = 0x2c2 & 0x3f = 2,
 * octet 0 = 0x02 | 2 << 2 = 0x0a; then the low 40 bits. */
static void test_mac_rule(void **s)
{
	uint8_t mac[6];
	static const uint8_t want[6] = { 0x0a, 0x03, 0x00, 0xa1, 0x00, 0x07 };

	(void)s;
	hl2_mac_from_guid(0x0002c90300a10007ull, 0, mac);
	assert_memory_equal(mac, want, 6);
	assert_int_equal(mac[0] & 0x03, 0x02); /* locally administered, unicast */
	hl2_mac_from_guid(0x0002c90300a10007ull, 1, mac);
	assert_int_equal(mac[0], 0x0e);
	setup_hw();
	assert_memory_equal(h.own_mac, want, 6);
}

static void test_collision_and_stability(void **s)
{
	struct ipoib_hwaddr other = peer, again = peer;
	const struct hl2_peer *p1, *p2, *p3;
	uint8_t m1[6];

	(void)s;
	setup_hw();
	p1 = hl2_learn(&h, &peer, 6);
	memcpy(m1, p1->mac, 6);
	/* Same low 40 bits and same OUI fold, another GID prefix: a collision. */
	ib_gid_set(&other.gid, 0xfec0000000000001ull, 0x0002c90300a10009ull);
	p2 = hl2_learn(&h, &other, 0);
	assert_memory_not_equal(p2->mac, m1, 6);
	assert_int_equal(p2->mac[0], 0x0e);
	assert_int_equal(h.st.mac_collisions, 1);
	/* The first peer restarts with a new QPN: same MAC, QPN updated. */
	again.qpn = 0x77;
	p3 = hl2_learn(&h, &again, 6);
	assert_memory_equal(p3->mac, m1, 6);
	assert_int_equal(hl2_by_mac(&h, m1)->hw.qpn, 0x77);
	assert_non_null(hl2_by_src(&h, 6, 0x77));
	/* A peer whose GUID maps onto our own MAC does not get it. */
	struct ipoib_hwaddr twin = own;

	ib_gid_set(&twin.gid, 0xfec0000000000002ull, 0x0002c90300a10007ull);
	assert_memory_not_equal(hl2_learn(&h, &twin, 0)->mac, h.own_mac, 6);
}

/* An IPoIB ARP request from the peer, received through the broadcast group. */
static void test_arp_ib_to_eth(void **s)
{
	uint8_t pk[ARP_IB_LEN], sha[20], frame[128];
	struct hl2_src src = { .qpn = 0x49, .lid = 6, .mcast = true };
	struct arp_pkt a;
	int n;

	(void)s;
	setup_hw();
	ipoib_hwaddr_encode(&peer, sha, sizeof(sha));
	assert_int_equal(
	    arp_build_request(pk, sizeof(pk), ARP_HTYPE_IB, sha, 0x0a0a000c, 0x0a0a000b),
	    ARP_IB_LEN);
	n = hl2_ib_to_eth(&h, 0x0806, pk, sizeof(pk), &src, frame, sizeof(frame));
	assert_int_equal(n, 14 + ARP_ETHER_LEN);
	assert_memory_equal(frame, "\xff\xff\xff\xff\xff\xff", 6);
	assert_int_equal(arp_parse(frame + 14, (size_t)n - 14, ARP_HTYPE_ETHER, &a), ARP_OK);
	assert_int_equal(a.op, ARP_OP_REQUEST);
	assert_memory_equal(a.sha, hl2_by_mac(&h, frame + 6)->mac, 6);
	assert_memory_equal(a.tha, "\0\0\0\0\0\0", 6);
	assert_int_equal(a.spa, 0x0a0a000c);
	assert_int_equal(hl2_by_mac(&h, a.sha)->hw.qpn, 0x49);
	/* Malformed (hlen 6 on IPoIB): refused and counted. */
	pk[4] = 6;
	assert_true(hl2_ib_to_eth(&h, 0x0806, pk, sizeof(pk), &src, frame, sizeof(frame)) < 0);
	assert_int_equal(h.st.bad_arp, 1);
}

/* The kernel's ARP reply to the peer becomes an IPoIB reply with our 20-octet address. */
static void test_arp_eth_to_ib(void **s)
{
	const struct hl2_peer *p;
	uint8_t frame[64], out[128], peer_hw[20];
	struct hl2_dst d;
	struct arp_pkt a;
	uint16_t et;
	int n;

	(void)s;
	setup_hw();
	p = hl2_learn(&h, &peer, 6);
	memcpy(frame, p->mac, 6);
	memcpy(frame + 6, h.own_mac, 6);
	frame[12] = 0x08;
	frame[13] = 0x06;
	arp_build(frame + 14, 28, ARP_HTYPE_ETHER, ARP_OP_REPLY, h.own_mac, 0x0a0a000b, p->mac,
		  0x0a0a000c);
	n = hl2_eth_to_ib(&h, frame, 42, out, sizeof(out), &et, &d);
	assert_int_equal(n, ARP_IB_LEN);
	assert_int_equal(et, 0x0806);
	assert_int_equal(d.kind, HL2_DST_UNICAST);
	assert_int_equal(d.hw.qpn, 0x49);
	assert_int_equal(arp_parse(out, (size_t)n, ARP_HTYPE_IB, &a), ARP_OK);
	assert_memory_equal(a.sha, h.own_hw_bytes, 20);
	ipoib_hwaddr_encode(&peer, peer_hw, 20);
	assert_memory_equal(a.tha, peer_hw, 20);
	/* An unknown unicast MAC is refused. */
	frame[5] ^= 0x55;
	assert_int_equal(hl2_eth_to_ib(&h, frame, 42, out, sizeof(out), &et, &d), -ENXIO);
}

static const uint8_t own_ip6[16] = { 0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11 };
static const uint8_t peer_ip6[16] = { 0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12 };

/* The kernel's NS (8-octet option) -> IPoIB NS (24-octet option), valid for nd_parse. */
static void test_nd_eth_to_ib(void **s)
{
	uint8_t frame[200], out[256], sn[16];
	struct hl2_dst d;
	struct nd_msg m;
	uint16_t et;
	size_t n;
	int r;

	(void)s;
	setup_hw();
	n = nd_build_ns(frame + 14, sizeof(frame) - 14, ND_LINK_ETHER, own_ip6, NULL, peer_ip6,
			h.own_mac);
	assert_true(n > 0);
	nd_solicited_node(peer_ip6, sn);
	nd_mcast_mac(sn, frame);
	memcpy(frame + 6, h.own_mac, 6);
	frame[12] = 0x86;
	frame[13] = 0xdd;
	r = hl2_eth_to_ib(&h, frame, 14 + n, out, sizeof(out), &et, &d);
	assert_int_equal(r, (int)n + 16);
	assert_int_equal(d.kind, HL2_DST_MCAST);
	assert_memory_equal(d.ip, sn, 16);
	assert_int_equal(nd_parse(out, (size_t)r, ND_LINK_IB, &m), ND_OK);
	assert_non_null(m.sllao);
	assert_memory_equal(m.sllao, h.own_hw_bytes, 20);
	assert_int_equal(h.st.nd_rewritten, 1);
}

/* The peer's NA (IPoIB option) -> the kernel's NA with the peer's MAC, valid. */
static void test_nd_ib_to_eth(void **s)
{
	uint8_t pk[200], frame[256], peer_hw[20];
	struct hl2_src src = { .qpn = 0x49, .lid = 6, .mcast = false };
	struct nd_msg m;
	size_t n;
	int r;

	(void)s;
	setup_hw();
	ipoib_hwaddr_encode(&peer, peer_hw, 20);
	n = nd_build_na(pk, sizeof(pk), ND_LINK_IB, peer_ip6, own_ip6, peer_ip6,
			ND_NA_SOLICITED | ND_NA_OVERRIDE, peer_hw);
	assert_true(n > 0);
	r = hl2_ib_to_eth(&h, 0x86dd, pk, n, &src, frame, sizeof(frame));
	assert_int_equal(r, 14 + (int)n - 16);
	assert_memory_equal(frame, h.own_mac, 6);
	assert_int_equal(nd_parse(frame + 14, (size_t)r - 14, ND_LINK_ETHER, &m), ND_OK);
	assert_non_null(m.tllao);
	assert_memory_equal(m.tllao, hl2_by_mac(&h, m.tllao)->mac, 6);
	assert_int_equal(hl2_by_mac(&h, m.tllao)->hw.qpn, 0x49);
	/* A corrupted checksum is refused, not rewritten into a valid one. */
	pk[42] ^= 1;
	assert_true(hl2_ib_to_eth(&h, 0x86dd, pk, n, &src, frame, sizeof(frame)) < 0);
	assert_int_equal(h.st.bad_nd, 1);
}

/* IP: multicast destinations map from the IP header; unknown ethertypes refused. */
static void test_ip_mapping(void **s)
{
	uint8_t frame[100] = { 0x01, 0x00, 0x5e, 0x00, 0x00, 0x16 }, out[128];
	struct hl2_dst d;
	uint16_t et;

	(void)s;
	setup_hw();
	memcpy(frame + 6, h.own_mac, 6);
	frame[12] = 0x08;
	frame[14] = 0x45;
	memcpy(frame + 14 + 16, "\xe0\x00\x00\x16", 4);
	assert_int_equal(hl2_eth_to_ib(&h, frame, 14 + 28, out, sizeof(out), &et, &d), 28);
	assert_int_equal(d.kind, HL2_DST_MCAST);
	assert_int_equal(d.family, AF_INET);
	assert_memory_equal(d.ip, "\xe0\x00\x00\x16", 4);
	frame[12] = 0x88;
	frame[13] = 0xcc; /* LLDP */
	assert_int_equal(hl2_eth_to_ib(&h, frame, 60, out, sizeof(out), &et, &d), -EPROTONOSUPPORT);
}

/* A UDP/IPv4 DHCP datagram (sport -> dport) at p with the given DHCP payload; checksums
 * right. Returns the IP length. */
static size_t dhcp_dgram(uint8_t *p, uint16_t sport, uint16_t dport, const uint8_t *d, size_t dlen,
			 const uint8_t src[4], const uint8_t dst[4])
{
	size_t ulen = 8 + dlen;

	memset(p, 0, 28);
	p[0] = 0x45;
	ip_put16(p + 2, (uint16_t)(20 + ulen));
	p[8] = 64;
	p[9] = 17;
	memcpy(p + 12, src, 4);
	memcpy(p + 16, dst, 4);
	ip_put16(p + 10, (uint16_t)~ip_csum_fold(ip_csum_add(0, p, 20)));
	ip_put16(p + 20, sport);
	ip_put16(p + 22, dport);
	ip_put16(p + 24, (uint16_t)ulen);
	memcpy(p + 28, d, dlen);
	ip_put16(p + 26, (uint16_t)~ip_csum_fold(ip_csum_add(
			     ip4_pseudo_sum(p + 12, p + 16, (uint16_t)ulen, 17), p + 20, ulen)));
	return 20 + ulen;
}

static int csums_ok(const uint8_t *p)
{
	size_t ulen = ip_be16(p + 24);

	return ip_csum_fold(ip_csum_add(0, p, 20)) == 0xffff &&
	       ip_csum_fold(ip_csum_add(ip4_pseudo_sum(p + 12, p + 16, (uint16_t)ulen, 17), p + 20,
					ulen)) == 0xffff;
}

static void test_dhcp_rfc4390(void **s)
{
	static const uint8_t zero4[4], bcast4[4] = { 255, 255, 255, 255 }, gi[4] = { 10, 10, 0, 1 };
	uint8_t d[300], frame[700], out[700], own20[20], cid[21];
	struct dhcp_info di;
	struct hl2_dst dst;
	uint16_t et;
	size_t n;
	int m;

	(void)s;
	setup_hw();
	ipoib_hwaddr_encode(&own, own20, sizeof(own20));
	/* The kernel's DISCOVER: htype 1, hlen 6, chaddr its MAC, option 61 type 1 + MAC. */
	memset(d, 0, sizeof(d));
	d[0] = 1, d[1] = 1, d[2] = 6, d[10] = 0x80;
	memcpy(d + 28, h.own_mac, 6);
	d[236] = 0x63, d[237] = 0x82, d[238] = 0x53, d[239] = 0x63;
	n = 240;
	d[n++] = 53, d[n++] = 1, d[n++] = 1;
	d[n++] = 61, d[n++] = 7, d[n++] = 1;
	memcpy(d + n, h.own_mac, 6);
	n += 6;
	d[n++] = 255;
	memset(frame, 0xff, 6);
	memcpy(frame + 6, h.own_mac, 6);
	frame[12] = 0x08, frame[13] = 0x00;
	n = HL2_ETH_HLEN + dhcp_dgram(frame + HL2_ETH_HLEN, 68, 67, d, n, zero4, bcast4);
	m = hl2_eth_to_ib(&h, frame, n, out, sizeof(out), &et, &dst);
	assert_true(m > 28);
	assert_int_equal(dst.kind, HL2_DST_BCAST);
	assert_true(csums_ok(out));
	assert_int_equal(ip_be16(out + 2), m);
	assert_int_equal(dhcp_parse(out + 28, (size_t)m - 28, &di), DHCP_OK);
	assert_int_equal(di.htype, 32);
	assert_int_equal(di.hlen, 0);
	assert_memory_equal(di.chaddr, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
	assert_int_equal(di.msg_type, DHCP_DISCOVER);
	assert_int_equal(di.flags, 0x8000);
	dhcp_ipoib_client_id(own20, cid);
	assert_int_equal(di.client_id_len, 21);
	assert_memory_equal(di.client_id, cid, 21);
	assert_int_equal(h.st.dhcp_rewritten, 1);

	/* The relayed OFFER (htype 32) comes to the kernel with htype 1 and chaddr its MAC. */
	memcpy(d, out + 28, (size_t)m - 28);
	d[0] = 2;
	d[16] = 10, d[17] = 10, d[18] = 0, d[19] = 100;
	memcpy(d + 24, gi, 4);
	{
		struct hl2_src src = { .qpn = 0x49, .lid = 6, .mcast = true };

		n = dhcp_dgram(frame, 67, 68, d, (size_t)m - 28, gi, bcast4);
		m = hl2_ib_to_eth(&h, 0x0800, frame, n, &src, out, sizeof(out));
	}
	assert_int_equal(m, HL2_ETH_HLEN + (int)n);
	assert_true(csums_ok(out + HL2_ETH_HLEN));
	assert_int_equal(dhcp_parse(out + HL2_ETH_HLEN + 28, n - 28, &di), DHCP_OK);
	assert_int_equal(di.htype, 1);
	assert_int_equal(di.hlen, 6);
	assert_memory_equal(di.chaddr, h.own_mac, 6);
	assert_int_equal(h.st.dhcp_rewritten, 2);

	/* Another host's (its client identifier): left alone. */
	d[0] = 2;
	d[240 + 2 + 1 + 19] ^= 1; /* the last octet of the GID in option 61 */
	{
		struct hl2_src src = { .qpn = 0x49, .lid = 6, .mcast = true };

		n = dhcp_dgram(frame, 67, 68, d, (size_t)(m - HL2_ETH_HLEN) - 28, gi, bcast4);
		m = hl2_ib_to_eth(&h, 0x0800, frame, n, &src, out, sizeof(out));
	}
	assert_int_equal(dhcp_parse(out + HL2_ETH_HLEN + 28, n - 28, &di), DHCP_OK);
	assert_int_equal(di.htype, 32);
	assert_int_equal(h.st.dhcp_rewritten, 2);
}

/* Two peers behind an IB router (another subnet's GIDs): their packets come from the
 * router's LID, both with QPN 0x48. Each is told apart by the GID of its GRH, each
 * keeps its own MAC, and neither is remembered by the router's LID. */
static void test_behind_router(void **s)
{
	uint8_t ip[28] = { 0x45 }, out[128], mac1[6];
	struct ipoib_hwaddr b1 = { .qpn = 0x48 }, b2 = { .qpn = 0x48 };
	struct hl2_src src = { .qpn = 0x48, .lid = 3, .has_gid = true };
	const struct hl2_peer *p;
	uint8_t arp[64], sha[20];
	size_t n;

	(void)s;
	setup_hw();
	ib_gid_set(&b1.gid, 0xfec000000000000bull, 0x0002c90300b10003ull);
	ib_gid_set(&b2.gid, 0xfec000000000000bull, 0x0002c90300b10005ull);
	memcpy(ip + 12, "\x0a\x0a\x00\x15", 4);
	memcpy(ip + 16, "\x0a\x0a\x00\x0b", 4);
	/* b1's ARP request through the router's broadcast group: learned, LID not kept. */
	ipoib_hwaddr_encode(&b1, sha, sizeof(sha));
	n = arp_build(arp, sizeof(arp), ARP_HTYPE_IB, ARP_OP_REQUEST, sha, 0x0a0a0015,
		      (const uint8_t[20]){ 0 }, 0x0a0a000b);
	assert_true(n > 0);
	src.gid = b1.gid;
	src.mcast = true;
	assert_true(hl2_ib_to_eth(&h, 0x0806, arp, n, &src, out, sizeof(out)) > 0);
	p = hl2_by_mac(&h, out + 6);
	assert_non_null(p);
	assert_true(ib_gid_equal(&p->hw.gid, &b1.gid));
	assert_int_equal(p->lid, 0);
	memcpy(mac1, out + 6, 6);
	/* IP from b1 then from b2, same router LID and QPN: two sources. */
	src.mcast = false;
	assert_int_equal(hl2_ib_to_eth(&h, 0x0800, ip, sizeof(ip), &src, out, sizeof(out)),
			 14 + 28);
	assert_memory_equal(out + 6, mac1, 6);
	src.gid = b2.gid;
	assert_int_equal(hl2_ib_to_eth(&h, 0x0800, ip, sizeof(ip), &src, out, sizeof(out)),
			 14 + 28);
	assert_memory_not_equal(out + 6, mac1, 6);
	p = hl2_by_mac(&h, out + 6);
	assert_non_null(p);
	assert_true(ib_gid_equal(&p->hw.gid, &b2.gid));
	assert_int_equal(p->lid, 0);
	/* Without a GRH, the router's LID names no peer. */
	assert_null(hl2_by_src(&h, 3, 0x48));
	src.has_gid = false;
	assert_int_equal(hl2_ib_to_eth(&h, 0x0800, ip, sizeof(ip), &src, out, sizeof(out)),
			 14 + 28);
	assert_int_equal(h.st.unknown_src, 1);
	/* A peer on our own subnet with a GRH keeps its LID. */
	src.has_gid = true;
	src.lid = 6;
	src.gid = peer.gid;
	src.qpn = peer.qpn;
	assert_true(hl2_ib_to_eth(&h, 0x0800, ip, sizeof(ip), &src, out, sizeof(out)) > 0);
	assert_non_null(hl2_by_src(&h, 6, peer.qpn));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mac_rule),
		cmocka_unit_test(test_collision_and_stability),
		cmocka_unit_test(test_arp_ib_to_eth),
		cmocka_unit_test(test_arp_eth_to_ib),
		cmocka_unit_test(test_nd_eth_to_ib),
		cmocka_unit_test(test_nd_ib_to_eth),
		cmocka_unit_test(test_ip_mapping),
		cmocka_unit_test(test_dhcp_rfc4390),
		cmocka_unit_test(test_behind_router),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
