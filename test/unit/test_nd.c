/*
 * pkt/nd: NS/NA builders for Ethernet and IPoIB (layout octet by octet, checksum
 * computed independently here), solicited-node address and its 33:33 MAC, DAD, parsing
 * RS/RA/Redirect, and the table of RFC 4861 receive checks with exact reasons.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/nd.h"

static uint16_t ref_check6(const uint8_t *ip6)
{
	uint32_t len = (uint32_t)(ip6[4] << 8 | ip6[5]), s = len + ip6[6];

	for (size_t i = 8; i < 40; i += 2)
		s += (uint32_t)(ip6[i] << 8 | ip6[i + 1]);
	for (size_t i = 0; i < len; i += 2)
		s += (uint32_t)(ip6[40 + i] << 8 | (i + 1 < len ? ip6[41 + i] : 0));
	while (s > 0xffff)
		s = (s >> 16) + (s & 0xffff);
	return (uint16_t)~s;
}

static void refix(uint8_t *p)
{
	p[42] = p[43] = 0;
	uint16_t c = ref_check6(p);
	p[42] = (uint8_t)(c >> 8), p[43] = (uint8_t)c;
}

static const uint8_t ll1[16] = { 0xfe, 0x80, [15] = 1 };
static const uint8_t ll2[16] = { 0xfe, 0x80, [15] = 2 };
static const uint8_t tgt[16] = { 0x20, 0x01, 0x0d, 0xb8, [13] = 0xab, 0xcd, 0xef };
static const uint8_t mac[6] = { 0x02, 0, 0, 0, 0, 0x0a };
static const uint8_t ibaddr[20] = { 0x80, 0x00, 0x00, 0x48, 0xfe, 0x80, 0, 0,    0,    0,
				    0,    0,    0x00, 0x02, 0xc9, 0x03, 0, 0x01, 0x12, 0x34 };

static void test_solicited(void **state)
{
	uint8_t snm[16], m[6];
	static const uint8_t want[16] = { 0xff, 0x02, [11] = 1, 0xff, 0xab, 0xcd, 0xef };
	static const uint8_t wmac[6] = { 0x33, 0x33, 0xff, 0xab, 0xcd, 0xef };

	(void)state;
	nd_solicited_node(tgt, snm);
	assert_memory_equal(snm, want, 16);
	assert_true(nd_is_solicited_node(snm));
	assert_false(nd_is_solicited_node(tgt));
	nd_mcast_mac(snm, m);
	assert_memory_equal(m, wmac, 6);
}

static void test_ns_ether(void **state)
{
	uint8_t p[128];
	struct nd_msg m;
	size_t n;

	(void)state;
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, mac);
	assert_int_equal(n, 40 + 24 + 8);
	/* IPv6: payload 32, next header 58, hop limit 255, dst ff02::1:ffab:cdef */
	assert_int_equal(p[0], 0x60);
	assert_int_equal(p[5], 32);
	assert_int_equal(p[6], 58);
	assert_int_equal(p[7], 255);
	assert_memory_equal(p + 8, ll1, 16);
	assert_int_equal(p[24], 0xff);
	assert_int_equal(p[37], 0xab);
	/* ICMPv6: 135, code 0, reserved 0, target, option 1 length 1 MAC */
	static const uint8_t icmp_head[8] = { 135, 0, 0, 0, 0, 0, 0, 0 };
	assert_memory_equal(p + 40, icmp_head, 2);
	assert_memory_equal(p + 44, icmp_head + 4, 4);
	assert_memory_equal(p + 48, tgt, 16);
	static const uint8_t opt[8] = { 1, 1, 0x02, 0, 0, 0, 0, 0x0a };
	assert_memory_equal(p + 64, opt, 8);
	assert_int_equal(ref_check6(p), 0);

	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.type, ND_NS);
	assert_memory_equal(m.target, tgt, 16);
	assert_non_null(m.sllao);
	assert_memory_equal(m.sllao, mac, 6);
	assert_false(m.dad);
	/* the same packet on an IPoIB link: wrong option size for the link */
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_BAD_LLADDR_LEN);
	/* a multicast or a zero MAC in the option: nobody's port (as in arp_parse) */
	{
		static const uint8_t group[6] = { 0x33, 0x33, 0, 0, 0, 1 }, zero[6];

		n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, group);
		assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_LLADDR_NOT_UNICAST);
		n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, zero);
		assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_LLADDR_NOT_UNICAST);
		n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, mac);
		assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);
	}

	/* unicast NS (reachability) */
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, ll2, tgt, mac);
	assert_memory_equal(p + 24, ll2, 16);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);

	/* DAD: from ::, no option; the builder refuses an option */
	static const uint8_t unspec[16] = { 0 };
	assert_int_equal(nd_build_ns(p, sizeof(p), ND_LINK_ETHER, unspec, NULL, tgt, mac), 0);
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, unspec, NULL, tgt, NULL);
	assert_int_equal(n, 64);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);
	assert_true(m.dad);
	assert_null(m.sllao);
	assert_int_equal(nd_build_ns(p, 63, ND_LINK_ETHER, unspec, NULL, tgt, NULL), 0);
}

static void test_na_ib(void **state)
{
	uint8_t p[128], q[128];
	struct nd_msg m, ns;
	size_t n;

	(void)state;
	/* solicited NA with an IPoIB target option: type 2, length 3, 2 zero octets, the
	 * 20-octet address (RFC 4391 9.1, the Linux layout) */
	n = nd_build_na(p, sizeof(p), ND_LINK_IB, tgt, ll1, tgt, ND_NA_SOLICITED | ND_NA_ROUTER,
			ibaddr);
	assert_int_equal(n, 40 + 24 + 24);
	assert_int_equal(p[40], 136);
	static const uint8_t flags[4] = { 0xc0, 0, 0, 0 };
	assert_memory_equal(p + 44, flags, 4);
	static const uint8_t head[4] = { 2, 3, 0, 0 };
	assert_memory_equal(p + 64, head, 4);
	assert_memory_equal(p + 68, ibaddr, 20);
	assert_int_equal(ref_check6(p), 0);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_OK);
	assert_int_equal(m.flags, ND_NA_SOLICITED | ND_NA_ROUTER);
	assert_memory_equal(m.tllao, ibaddr, 20);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_BAD_LLADDR_LEN);
	p[68] = 0x81; /* reserved flag bit */
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_LLADDR_RESERVED);
	/* Addresses no neighbour has (arp_parse refuses them in a sender): the multicast
	 * QPN, a multicast GID, a zero GID. A unicast datagram to one reaches nobody. */
	p[68] = 0x80;
	memset(p + 69, 0xff, 3);
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_LLADDR_NOT_UNICAST);
	memcpy(p + 68, ibaddr, 20);
	p[72] = 0xff;
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_LLADDR_NOT_UNICAST);
	memset(p + 72, 0, 16);
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_LLADDR_NOT_UNICAST);
	memcpy(p + 68, ibaddr, 20);
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_OK);

	/* reply to an NS, in place over the NS */
	n = nd_build_ns(q, sizeof(q), ND_LINK_IB, ll2, NULL, tgt, ibaddr);
	assert_int_equal(nd_parse(q, n, ND_LINK_IB, &ns), ND_OK);
	n = nd_build_na_reply(q, sizeof(q), ND_LINK_IB, &ns, tgt, ND_NA_OVERRIDE, ibaddr);
	assert_int_equal(n, 88);
	assert_memory_equal(q + 24, ll2, 16); /* to the solicitor */
	assert_int_equal(nd_parse(q, n, ND_LINK_IB, &m), ND_OK);
	assert_int_equal(m.flags, ND_NA_SOLICITED | ND_NA_OVERRIDE);
	assert_memory_equal(m.target, tgt, 16);
	/* reply to a DAD NS: to ff02::1, S clear */
	static const uint8_t unspec[16] = { 0 };
	n = nd_build_ns(q, sizeof(q), ND_LINK_IB, unspec, NULL, tgt, NULL);
	assert_int_equal(nd_parse(q, n, ND_LINK_IB, &ns), ND_OK);
	n = nd_build_na_reply(q, sizeof(q), ND_LINK_IB, &ns, tgt, ND_NA_SOLICITED, ibaddr);
	assert_memory_equal(q + 24, nd_all_nodes, 16);
	assert_int_equal(nd_parse(q, n, ND_LINK_IB, &m), ND_OK);
	assert_int_equal(m.flags, 0);
	/* unsolicited: ff02::1, override */
	n = nd_build_unsolicited_na(q, sizeof(q), ND_LINK_ETHER, tgt, false, mac);
	assert_int_equal(nd_parse(q, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.flags, ND_NA_OVERRIDE);
	assert_memory_equal(m.dst, nd_all_nodes, 16);
	assert_memory_equal(m.tllao, mac, 6);
}

/* An RA from fe80::1 with a prefix option for 2001:db8::/64, an MTU option 1500 and
 * a source link-layer option, hop-by-hop-less. */
static size_t mk_ra(uint8_t *p)
{
	memset(p, 0, 200);
	p[0] = 0x60;
	p[6] = 58;
	p[7] = 255;
	memcpy(p + 8, ll1, 16);
	memcpy(p + 24, nd_all_nodes, 16);
	uint8_t *ic = p + 40;
	ic[0] = 134;
	ic[4] = 64;
	ic[5] = 0xc0;
	ic[6] = 0x07, ic[7] = 0x08; /* lifetime 1800 */
	uint8_t *o = ic + 16;
	o[0] = 3, o[1] = 4, o[2] = 64, o[3] = 0xc0;
	o[4] = 0, o[5] = 0x27, o[6] = 0x8d, o[7] = 0; /* valid 2592000 */
	o[11] = 100;
	memcpy(o + 16, tgt, 8);
	o += 32;
	o[0] = 5, o[1] = 1, o[6] = 0x05, o[7] = 0xdc;
	o += 8;
	o[0] = 1, o[1] = 1;
	memcpy(o + 2, mac, 6);
	size_t ilen = 16 + 32 + 8 + 8;
	p[5] = (uint8_t)ilen;
	refix(p);
	return 40 + ilen;
}

static void test_ra(void **state)
{
	uint8_t p[200];
	struct nd_msg m;
	size_t n = mk_ra(p);

	(void)state;
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.type, ND_RA);
	assert_int_equal(m.ra_cur_hop_limit, 64);
	assert_int_equal(m.flags, 0xc0);
	assert_int_equal(m.ra_lifetime, 1800);
	assert_int_equal(m.n_prefix, 1);
	assert_int_equal(m.prefix[0].len, 64);
	assert_int_equal(m.prefix[0].valid, 2592000);
	assert_int_equal(m.prefix[0].preferred, 100);
	assert_memory_equal(m.prefix[0].prefix, tgt, 8);
	assert_true(m.has_mtu);
	assert_int_equal(m.mtu, 1500);
	assert_memory_equal(m.sllao, mac, 6);
	/* from a global address */
	p[8] = 0x20;
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_SRC_NOT_LINK_LOCAL);
	n = mk_ra(p);
	p[57] = 3; /* prefix option length 3 units */
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_BAD_PREFIX_OPTION);
	n = mk_ra(p);
	p[58] = 129;
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_BAD_PREFIX_OPTION);
	n = mk_ra(p);
	p[89] = 2; /* MTU option length 2: runs into the next option, still inside */
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_BAD_MTU_OPTION);
}

static void test_reject(void **state)
{
	uint8_t p[128];
	struct nd_msg m;
	size_t n;
	static const uint8_t unspec[16] = { 0 };

	(void)state;
	/* NS table: (offset, value, refix checksum, want) over an Ethernet NS */
	static const struct {
		const char *what;
		int off;
		uint8_t val;
		bool fix;
		enum nd_reason want;
	} t[] = {
		{ "hop limit 254", 7, 254, true, ND_BAD_HOP_LIMIT },
		{ "code 1", 41, 1, true, ND_BAD_CODE },
		{ "checksum", 43, 0, false, ND_BAD_CHECKSUM },
		{ "option length 0", 65, 0, true, ND_OPTION_ZERO_LENGTH },
		{ "option length 2 (past end)", 65, 2, true, ND_OPTION_TRUNCATED },
		{ "target multicast", 48, 0xff, true, ND_TARGET_MULTICAST },
		{ "type 128", 40, 128, true, ND_NOT_ND },
		{ "src multicast", 8, 0xff, true, ND_SRC_MULTICAST },
		{ "next header 17", 6, 17, false, ND_NOT_ICMPV6 },
		{ "version", 0, 0x40, false, ND_BAD_IP },
	};
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, mac);
		if (t[k].off == 43)
			p[42] ^= 0x55;
		else
			p[t[k].off] = t[k].val;
		if (t[k].fix)
			refix(p);
		enum nd_reason r = nd_parse(p, n, ND_LINK_ETHER, &m);
		if (r != t[k].want)
			fail_msg("%s: got %s want %s", t[k].what, nd_reason_name(r),
				 nd_reason_name(t[k].want));
	}
	/* too short: an NS of 20 octets */
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, NULL);
	p[5] = 20;
	refix(p);
	assert_int_equal(nd_parse(p, 60, ND_LINK_ETHER, &m), ND_TOO_SHORT);
	/* option header cut in half: 2 octets short of an option's type+length */
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, mac);
	p[5] = 25;
	refix(p);
	assert_int_equal(nd_parse(p, 65, ND_LINK_ETHER, &m), ND_OPTION_TRUNCATED);
	/* DAD to a unicast address; DAD with a source option (built by hand) */
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, unspec, ll2, tgt, NULL);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_DAD_BAD_DST);
	n = nd_build_ns(p, sizeof(p), ND_LINK_ETHER, ll1, NULL, tgt, mac);
	memset(p + 8, 0, 16);
	refix(p);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_DAD_WITH_SLLAO);
	/* NA to all-nodes with S set */
	n = nd_build_na(p, sizeof(p), ND_LINK_ETHER, tgt, nd_all_nodes, tgt, ND_NA_SOLICITED, mac);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_NA_SOLICITED_MCAST);
	/* RS from :: with a source option; RS from :: without is fine */
	memset(p, 0, sizeof(p));
	p[0] = 0x60, p[5] = 16, p[6] = 58, p[7] = 255;
	memcpy(p + 24, nd_all_nodes, 16);
	p[40] = 133;
	p[48] = 1, p[49] = 1;
	memcpy(p + 50, mac, 6);
	refix(p);
	assert_int_equal(nd_parse(p, 56, ND_LINK_ETHER, &m), ND_RS_UNSPEC_WITH_SLLAO);
	p[5] = 8;
	refix(p);
	assert_int_equal(nd_parse(p, 48, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.type, ND_RS);
	/* redirect: parsed (40-octet body), needs a link-local source */
	memset(p, 0, sizeof(p));
	p[0] = 0x60, p[5] = 40, p[6] = 58, p[7] = 255;
	memcpy(p + 8, ll1, 16);
	memcpy(p + 24, ll2, 16);
	p[40] = 137;
	memcpy(p + 48, ll1, 16);
	memcpy(p + 64, tgt, 16);
	refix(p);
	assert_int_equal(nd_parse(p, 80, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.type, ND_REDIRECT);
	assert_memory_equal(m.redirect_dst, tgt, 16);
	/* ND inside a fragment */
	memset(p, 0, sizeof(p));
	p[0] = 0x60, p[5] = 8 + 24, p[6] = 44, p[7] = 255;
	p[40] = 58;
	p[72 - 24 + 0] = 135;
	assert_int_equal(nd_parse(p, 72, ND_LINK_ETHER, &m), ND_FRAGMENTED);
	for (int r = 0; r < ND_REASON_COUNT; r++)
		assert_string_not_equal(nd_reason_name((enum nd_reason)r), "unknown");
}

/* nd_build_ra: every octet of an IPoIB RA with all options, checked against the RFC's
 * layout and an independent checksum, then parsed back; an Ethernet RA without
 * options; too many prefixes or too little room refused. */
static void test_build_ra(void **state)
{
	uint8_t p[ND_RA_MAX_LEN], pfx[16] = { 0xfd, 0x00, 0x00, 0x10, [15] = 0x01 };
	uint8_t pfx2[16] = { 0xfd, 0x00, 0x00, 0x10, 0, 0, 0, 0x1f, [15] = 0x01 };
	struct nd_prefix px[2] = {
		{ pfx, 64, ND_PFX_ON_LINK | ND_PFX_AUTO, 86400, 14400 },
		{ pfx2, 61, ND_PFX_ON_LINK | 0x01, 0xffffffffu, 0 },
	};
	struct nd_ra_params rp = { .cur_hop_limit = 64,
				   .flags = ND_RA_OTHER | 0x08,
				   .router_lifetime = 1800,
				   .reachable_ms = 30000,
				   .retrans_ms = 1000,
				   .mtu = 2044,
				   .prefix = px,
				   .n_prefix = 2 };
	struct nd_msg m;
	size_t n = nd_build_ra(p, sizeof(p), ND_LINK_IB, ll1, nd_all_nodes, &rp, ibaddr);
	uint16_t c;

	(void)state;
	assert_int_equal(n, 40 + 16 + 24 + 8 + 64);
	assert_int_equal(p[0] >> 4, 6);
	assert_int_equal(p[4] << 8 | p[5], n - 40);
	assert_int_equal(p[6], 58);
	assert_int_equal(p[7], 255);
	assert_memory_equal(p + 8, ll1, 16);
	assert_memory_equal(p + 24, nd_all_nodes, 16);
	assert_int_equal(p[40], 134);
	assert_int_equal(p[41], 0);
	c = (uint16_t)(p[42] << 8 | p[43]);
	p[42] = p[43] = 0;
	assert_int_equal(c, ref_check6(p));
	p[42] = (uint8_t)(c >> 8), p[43] = (uint8_t)c;
	assert_int_equal(p[44], 64);
	assert_int_equal(p[45], 0x40); /* O only: the reserved bit is not sent */
	assert_int_equal(p[46] << 8 | p[47], 1800);
	assert_int_equal(p[50] << 8 | p[51], 30000 & 0xffff);
	assert_int_equal(p[55], 1000 & 0xff);
	/* IPoIB source link-layer option: type 1, length 3, 2 zero octets, 20 octets */
	assert_int_equal(p[56], 1);
	assert_int_equal(p[57], 3);
	assert_int_equal(p[58] | p[59], 0);
	assert_memory_equal(p + 60, ibaddr, 20);
	/* MTU: type 5, length 1, reserved, 2044 */
	assert_int_equal(p[80], 5);
	assert_int_equal(p[81], 1);
	assert_int_equal(p[82] | p[83], 0);
	assert_int_equal(p[86] << 8 | p[87], 2044);
	/* Prefix information: type 3, length 4, /64, L|A, lifetimes, prefix cleared of
	 * host bits */
	assert_int_equal(p[88], 3);
	assert_int_equal(p[89], 4);
	assert_int_equal(p[90], 64);
	assert_int_equal(p[91], 0xc0);
	assert_int_equal(p[94] << 8 | p[95], 86400 & 0xffff);
	assert_int_equal(p[93], 86400 >> 16);
	assert_int_equal(p[98] << 8 | p[99], 14400);
	assert_memory_equal(p + 104, pfx, 8);
	assert_int_equal(p[119], 0);
	assert_int_equal(p[122], 61);
	assert_int_equal(p[123], 0x80); /* an unknown flag bit not sent */
	assert_int_equal(p[124] & p[125] & p[126] & p[127], 0xff);
	assert_int_equal(p[136 + 3], 0x10);
	assert_int_equal(p[136 + 7], 0x18); /* /61: 0x1f's low three bits cleared */
	assert_int_equal(p[136 + 15], 0);

	assert_int_equal(nd_parse(p, n, ND_LINK_IB, &m), ND_OK);
	assert_int_equal(m.type, ND_RA);
	assert_int_equal(m.ra_lifetime, 1800);
	assert_int_equal(m.ra_cur_hop_limit, 64);
	assert_int_equal(m.ra_reachable, 30000);
	assert_int_equal(m.ra_retrans, 1000);
	assert_true(m.has_mtu);
	assert_int_equal(m.mtu, 2044);
	assert_int_equal(m.n_prefix, 2);
	assert_int_equal(m.prefix[0].len, 64);
	assert_int_equal(m.prefix[0].valid, 86400);
	assert_int_equal(m.prefix[1].valid, 0xffffffffu);
	assert_memory_equal(m.sllao, ibaddr, 20);
	/* The same on an Ethernet link parses as a bad link-layer option. */
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_BAD_LLADDR_LEN);

	rp = (struct nd_ra_params){ .router_lifetime = 0 };
	n = nd_build_ra(p, sizeof(p), ND_LINK_ETHER, ll1, ll2, &rp, mac);
	assert_int_equal(n, 40 + 16 + 8);
	assert_int_equal(nd_parse(p, n, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.ra_lifetime, 0);
	assert_memory_equal(m.sllao, mac, 6);
	assert_memory_equal(m.dst, ll2, 16);
	assert_false(m.has_mtu);
	assert_int_equal(m.n_prefix_seen, 0);
	n = nd_build_ra(p, sizeof(p), ND_LINK_ETHER, ll1, ll2, &rp, NULL);
	assert_int_equal(n, 40 + 16);

	assert_int_equal(nd_build_ra(p, 40 + 16 + 7, ND_LINK_ETHER, ll1, ll2, &rp, mac), 0);
	rp.n_prefix = ND_RA_MAX_PREFIX + 1;
	rp.prefix = px;
	assert_int_equal(nd_build_ra(p, sizeof(p), ND_LINK_ETHER, ll1, ll2, &rp, mac), 0);
}

/* An RS as a host sends it, on both links: parsed with its source link-layer address;
 * from :: with the option refused (6.1.1). */
static void test_rs(void **state)
{
	uint8_t p[128] = { 0x60, 0, 0, 0, 0, 8 + 8, 58, 255 };
	struct nd_msg m;

	(void)state;
	memcpy(p + 8, ll2, 16);
	memcpy(p + 24, nd_all_routers, 16);
	p[40] = 133;
	p[48] = 1, p[49] = 1;
	memcpy(p + 50, mac, 6);
	refix(p);
	assert_int_equal(nd_parse(p, 56, ND_LINK_ETHER, &m), ND_OK);
	assert_int_equal(m.type, ND_RS);
	assert_memory_equal(m.sllao, mac, 6);
	assert_memory_equal(m.dst, nd_all_routers, 16);
	memset(p + 8, 0, 16);
	refix(p);
	assert_int_equal(nd_parse(p, 56, ND_LINK_ETHER, &m), ND_RS_UNSPEC_WITH_SLLAO);
	p[5] = 8;
	refix(p);
	assert_int_equal(nd_parse(p, 48, ND_LINK_ETHER, &m), ND_OK);
	assert_null(m.sllao);
	/* IPoIB: the 24-octet option */
	memcpy(p + 8, ll2, 16);
	p[5] = 8 + 24;
	p[48] = 1, p[49] = 3, p[50] = p[51] = 0;
	memcpy(p + 52, ibaddr, 20);
	refix(p);
	assert_int_equal(nd_parse(p, 72, ND_LINK_IB, &m), ND_OK);
	assert_memory_equal(m.sllao, ibaddr, 20);
	p[49] = 1;
	refix(p);
	assert_int_equal(nd_parse(p, 72, ND_LINK_IB, &m), ND_BAD_LLADDR_LEN);
}

/* RFC 4861 6.2.4 and 6.2.6 timing with chosen random words. */
static void test_ra_timing(void **state)
{
	(void)state;
	/* uniform in [min, max] */
	assert_int_equal(nd_ra_interval(200000, 600000, 3, 0), 200000);
	assert_int_equal(nd_ra_interval(200000, 600000, 3, 400000), 600000);
	assert_int_equal(nd_ra_interval(200000, 600000, 3, 400001), 200000);
	assert_int_equal(nd_ra_interval(200000, 600000, 3, 12345), 212345);
	/* the first three at most 16 s apart */
	assert_int_equal(nd_ra_interval(200000, 600000, 0, 12345), 16000);
	assert_int_equal(nd_ra_interval(200000, 600000, 2, 0), 16000);
	assert_int_equal(nd_ra_interval(3000, 4000, 0, 7), 3007);
	/* min above max: max */
	assert_int_equal(nd_ra_interval(5000, 4000, 5, 99), 4000);
	/* solicited: 0..500 ms after the RS */
	assert_int_equal(nd_ra_solicited(10000, false, 9999, 0, 0), 10000);
	assert_int_equal(nd_ra_solicited(10000, false, 9999, 0, 500), 10500);
	assert_int_equal(nd_ra_solicited(10000, false, 9999, 0, 501), 10000);
	/* multicast: no sooner than 3 s after the last multicast one */
	assert_int_equal(nd_ra_solicited(10000, true, 9000, 0, 100), 12000);
	assert_int_equal(nd_ra_solicited(10000, true, 5000, 0, 100), 10100);
	assert_int_equal(nd_ra_solicited(10000, true, 0, 0, 100), 10100);
	/* an unsolicited one due earlier stands */
	assert_int_equal(nd_ra_solicited(10000, true, 9000, 11000, 100), 11000);
	assert_int_equal(nd_ra_solicited(10000, true, 0, 50000, 100), 10100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_solicited), cmocka_unit_test(test_ns_ether),
		cmocka_unit_test(test_na_ib),     cmocka_unit_test(test_ra),
		cmocka_unit_test(test_reject),    cmocka_unit_test(test_build_ra),
		cmocka_unit_test(test_rs),        cmocka_unit_test(test_ra_timing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
