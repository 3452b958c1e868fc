/*
 * pkt/arp: Ethernet and IPoIB ARP written out octet by octet, parse/classify/build
 * round trips, and a table of malformed packets with the exact reason each gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/arp.h"

static const uint8_t mac_a[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a };
static const uint8_t mac_gw[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };

/* who-has 10.0.0.2 tell 10.0.0.1 from 02:00:00:00:00:0a (RFC 826 layout) */
static const uint8_t eth_req[28] = { 0x00, 0x01, 0x08, 0x00, 6,  4, 0x00, 0x01, 0x02, 0x00,
				     0x00, 0x00, 0x00, 0x0a, 10, 0, 0,    1,    0,    0,
				     0,    0,    0,    0,    10, 0, 0,    2 };
/* 10.0.0.2 is-at 02:00:00:00:00:01, to 10.0.0.1 at 02:00:00:00:00:0a */
static const uint8_t eth_rep[28] = { 0x00, 0x01, 0x08, 0x00, 6,  4, 0x00, 0x02, 0x02, 0x00,
				     0x00, 0x00, 0x00, 0x01, 10, 0, 0,    2,    0x02, 0x00,
				     0x00, 0x00, 0x00, 0x0a, 10, 0, 0,    1 };

/* IPoIB: flags RC, QPN 0x000048, GID fe80::2:c903:1:1234 (lib/ipoib.h's test vector) */
static const uint8_t ib_a[20] = { 0x80, 0x00, 0x00, 0x48, 0xfe, 0x80, 0, 0,    0,    0,
				  0,    0,    0x00, 0x02, 0xc9, 0x03, 0, 0x01, 0x12, 0x34 };

static void test_ether(void **state)
{
	struct arp_pkt a;
	uint8_t out[64];

	(void)state;
	assert_int_equal(arp_parse(eth_req, 28, ARP_HTYPE_ETHER, &a), ARP_OK);
	assert_int_equal(a.op, 1);
	assert_int_equal(a.spa, 0x0a000001);
	assert_int_equal(a.tpa, 0x0a000002);
	assert_memory_equal(a.sha, mac_a, 6);
	assert_int_equal(arp_classify(&a), ARP_KIND_REQUEST);
	/* the Ethernet minimum frame pads 18 octets: ignored */
	uint8_t padded[46] = { 0 };
	memcpy(padded, eth_req, 28);
	assert_int_equal(arp_parse(padded, 46, 0, &a), ARP_OK);

	assert_int_equal(arp_build_request(out, sizeof(out), 1, mac_a, 0x0a000001, 0x0a000002), 28);
	assert_memory_equal(out, eth_req, 28);
	assert_int_equal(arp_build_reply(out, sizeof(out), &a, mac_gw), 28);
	assert_memory_equal(out, eth_rep, 28);
	/* in place, over the request itself */
	memcpy(padded, eth_req, 28);
	assert_int_equal(arp_parse(padded, 28, 1, &a), ARP_OK);
	assert_int_equal(arp_build_reply(padded, 28, &a, mac_gw), 28);
	assert_memory_equal(padded, eth_rep, 28);
	assert_int_equal(arp_build_reply(out, 27, &a, mac_gw), 0);

	/* gratuitous: announcement (request, tha zero) and reply (tha = sha) */
	assert_int_equal(arp_build_gratuitous(out, sizeof(out), 1, mac_gw, 0x0a000002, false), 28);
	assert_int_equal(arp_parse(out, 28, 1, &a), ARP_OK);
	assert_int_equal(arp_classify(&a), ARP_KIND_ANNOUNCE);
	assert_int_equal(a.tpa, 0x0a000002);
	assert_int_equal(arp_build_gratuitous(out, sizeof(out), 1, mac_gw, 0x0a000002, true), 28);
	assert_int_equal(arp_parse(out, 28, 1, &a), ARP_OK);
	assert_int_equal(arp_classify(&a), ARP_KIND_GRATUITOUS_REPLY);
	assert_memory_equal(a.tha, mac_gw, 6);
	assert_int_equal(arp_build_probe(out, sizeof(out), 1, mac_gw, 0x0a000007), 28);
	assert_int_equal(arp_parse(out, 28, 1, &a), ARP_OK);
	assert_int_equal(arp_classify(&a), ARP_KIND_PROBE);
	assert_string_equal(arp_kind_name(ARP_KIND_PROBE), "probe");
}

static void test_ib(void **state)
{
	uint8_t out[64];
	struct arp_pkt a;
	/* hardware type 32, hlen 20: 8 + 20 + 4 + 20 + 4 = 56 octets */
	uint8_t want[56] = { 0x00, 0x20, 0x08, 0x00, 20, 4, 0x00, 0x01 };

	(void)state;
	memcpy(want + 8, ib_a, 20);
	want[28] = 10, want[29] = 0, want[30] = 0, want[31] = 1;
	want[52] = 10, want[53] = 0, want[54] = 0, want[55] = 2;
	assert_int_equal(
	    arp_build_request(out, sizeof(out), ARP_HTYPE_IB, ib_a, 0x0a000001, 0x0a000002), 56);
	assert_memory_equal(out, want, 56);
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_OK);
	assert_int_equal(a.hlen, 20);
	assert_memory_equal(a.sha, ib_a, 20);
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_ETHER, &a), ARP_WRONG_HTYPE);
	/* a UC-only address is fine; each reserved flag bit is refused */
	out[8] = 0x40;
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_OK);
	for (int b = 0; b < 6; b++) {
		out[8] = (uint8_t)(1u << b);
		assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_SHA_RESERVED_FLAGS);
	}
	out[8] = 0x80;
	memset(out + 9, 0xff, 3); /* QPN 0xffffff */
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_SHA_BROADCAST);
	memcpy(out + 8, ib_a, 20);
	out[12] = 0xff; /* multicast GID */
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_SHA_MULTICAST);
	memset(out + 12, 0, 16);
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_SHA_ZERO);
	memset(out + 8, 0, 20);
	assert_int_equal(arp_parse(out, 56, ARP_HTYPE_IB, &a), ARP_SHA_ZERO);
}

static void test_reject(void **state)
{
	static const struct {
		const char *what;
		int off;
		uint8_t val;
		size_t len;
		enum arp_reason want;
	} t[] = {
		{ "7 octets", -1, 0, 7, ARP_TRUNCATED },
		{ "27 octets", -1, 0, 27, ARP_TRUNCATED },
		{ "htype 6", 1, 6, 28, ARP_UNKNOWN_HTYPE },
		{ "htype 32 on ethernet", 1, 32, 28, ARP_WRONG_HTYPE },
		{ "ptype 0x86dd", 2, 0x86, 28, ARP_BAD_PTYPE },
		{ "hlen 8", 4, 8, 28, ARP_BAD_HLEN },
		{ "plen 16", 5, 16, 28, ARP_BAD_PLEN },
		{ "op 3 (RARP)", 7, 3, 28, ARP_UNKNOWN_OP },
		{ "op 0", 7, 0, 28, ARP_UNKNOWN_OP },
		{ "sha multicast", 8, 0x01, 28, ARP_SHA_MULTICAST },
		{ "spa 224.x", 14, 224, 28, ARP_SPA_INVALID },
		{ "spa 127.x", 14, 127, 28, ARP_SPA_INVALID },
		{ "spa 255.x", 14, 255, 28, ARP_SPA_INVALID },
		{ "tpa 239.x", 24, 239, 28, ARP_TPA_INVALID },
		{ "tpa 127.x", 24, 127, 28, ARP_TPA_INVALID },
	};
	uint8_t p[28];
	struct arp_pkt a;

	(void)state;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		memcpy(p, eth_req, 28);
		if (t[k].off >= 0)
			p[t[k].off] = t[k].val;
		enum arp_reason r = arp_parse(p, t[k].len, ARP_HTYPE_ETHER, &a);
		if (r != t[k].want)
			fail_msg("%s: got %s want %s", t[k].what, arp_reason_name(r),
				 arp_reason_name(t[k].want));
	}
	memcpy(p, eth_req, 28);
	memset(p + 8, 0, 6);
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_SHA_ZERO);
	memset(p + 8, 0xff, 6);
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_SHA_BROADCAST);
	memcpy(p, eth_req, 28);
	memset(p + 24, 0, 4);
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_TPA_INVALID);
	/* replies: from 0.0.0.0; about itself to itself with a foreign tha */
	memcpy(p, eth_rep, 28);
	memset(p + 14, 0, 4);
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_REPLY_SPA_ZERO);
	memcpy(p, eth_rep, 28);
	memcpy(p + 24, p + 14, 4);
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_REPLY_TO_SELF);
	memcpy(p + 18, p + 8, 6); /* tha = sha: gratuitous */
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_OK);
	memset(p + 18, 0, 6); /* tha zero: gratuitous too */
	assert_int_equal(arp_parse(p, 28, 1, &a), ARP_OK);
	for (int r = 0; r < ARP_REASON_COUNT; r++)
		assert_string_not_equal(arp_reason_name((enum arp_reason)r), "unknown");
	assert_int_equal(arp_build(p, 28, 6, 1, mac_a, 1, NULL, 2), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ether),
		cmocka_unit_test(test_ib),
		cmocka_unit_test(test_reject),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
