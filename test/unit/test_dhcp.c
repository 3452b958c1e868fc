/*
 * pkt/dhcp: the parse of a DISCOVER as an IPoIB client (RFC 4390) and an Ethernet client
 * send it; every refusal; the relay's rewrite of a request (giaddr, hops, the hop limit,
 * option 82 with its sub-options octet by octet, not added twice, not added when it
 * would not fit); the reply with option 82 stripped and the rest unchanged; where a
 * reply goes (broadcast flag, NAK, ciaddr, yiaddr at chaddr, at an IPoIB client
 * identifier, an IPoIB client without one).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/dhcp.h"

static const uint8_t ib_hw[20] = { 0x00, 0x00, 0x01, 0x48, 0xfe, 0x80, 0,    0,    0,    0,
				   0,    0,    0x00, 0x02, 0xc9, 0x03, 0x00, 0x00, 0x00, 0x21 };

/* A message: op, htype, hlen, flags, then options (already encoded), END appended.
 * Returns the length. */
static size_t msg(uint8_t *p, uint8_t op, uint8_t htype, uint8_t hlen, uint16_t flags,
		  const uint8_t *opts, size_t olen)
{
	memset(p, 0, 600);
	p[0] = op;
	p[1] = htype;
	p[2] = hlen;
	p[4] = 0x12, p[5] = 0x34, p[6] = 0x56, p[7] = 0x78;
	p[10] = (uint8_t)(flags >> 8);
	p[11] = (uint8_t)flags;
	p[236] = 0x63, p[237] = 0x82, p[238] = 0x53, p[239] = 0x63;
	memcpy(p + 240, opts, olen);
	p[240 + olen] = 255;
	return 241 + olen;
}

static void test_parse_ib_discover(void **state)
{
	uint8_t p[600], opts[40] = { 53, 1, 1, 61, 21 };
	struct dhcp_info d;
	size_t n;

	(void)state;
	dhcp_ipoib_client_id(ib_hw, opts + 5);
	n = msg(p, 1, 32, 0, 0x8000, opts, 26);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	assert_int_equal(d.op, 1);
	assert_int_equal(d.htype, 32);
	assert_int_equal(d.hlen, 0);
	assert_int_equal(d.xid, 0x12345678);
	assert_int_equal(d.flags, 0x8000);
	assert_int_equal(d.msg_type, DHCP_DISCOVER);
	assert_non_null(d.client_id);
	assert_int_equal(d.client_id_len, 21);
	assert_int_equal(d.client_id[0], 32);
	assert_memory_equal(d.client_id + 1, ib_hw, 20);
	assert_false(d.has_relay_info);
	assert_int_equal(d.end_off, 266);
}

static void test_parse_refusals(void **state)
{
	uint8_t p[1600], opts[8] = { 53, 1, 1 };
	struct dhcp_info d;
	size_t n;

	(void)state;
	n = msg(p, 1, 1, 6, 0, opts, 3);
	assert_int_equal(dhcp_parse(p, 239, &d), DHCP_SHORT);
	assert_int_equal(dhcp_parse(p, n - 1, &d), DHCP_NO_END);
	p[0] = 3;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_BAD_OP);
	p[0] = 1, p[2] = 17;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_BAD_HLEN);
	p[2] = 6, p[239] = 0;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_BAD_MAGIC);
	p[239] = 0x63;
	p[241] = 5; /* option 53 runs past the message */
	assert_int_equal(dhcp_parse(p, 244, &d), DHCP_BAD_OPTION);
	p[241] = 2; /* option 53 of length 2 */
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_BAD_OPTION);
	{
		uint8_t two[6] = { 53, 1, 1, 53, 1, 3 };

		n = msg(p, 1, 1, 6, 0, two, 6);
		assert_int_equal(dhcp_parse(p, n, &d), DHCP_BAD_OPTION);
	}
	n = msg(p, 1, 1, 6, 0, opts, 3);
	memset(p + n, 0, 1501 - n);
	assert_int_equal(dhcp_parse(p, 1501, &d), DHCP_TOO_LONG);
	assert_int_equal(dhcp_parse(p, 1500, &d), DHCP_OK); /* padding after END */
	assert_string_equal(dhcp_result_name(DHCP_HOPS_EXCEEDED), "hops_exceeded");
}

static void test_relay_request(void **state)
{
	uint8_t p[600], out[1600], opts[3] = { 53, 1, 1 };
	static const uint8_t want82[] = { 82,  14,  1,   3,   'i', 'b', '0', 2,  7,
					  'r', 'a', 'c', 'k', '-', 'g', 'w', 255 };
	struct dhcp_relay_params rp = {
		.giaddr = { 10, 10, 0, 1 },
		.max_hops = 4,
	};
	struct dhcp_info d, d2;
	enum dhcp_result why;
	bool added;
	size_t n, m;

	(void)state;
	n = msg(p, 1, 32, 0, 0x8000, opts, 3);
	p[3] = 1;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	m = dhcp_relay_request(p, n, &d, &rp, out, sizeof(out), &added, &why);
	assert_int_equal(m, n);
	assert_false(added);
	assert_int_equal(out[3], 2);
	assert_memory_equal(out + 24, rp.giaddr, 4);
	assert_memory_equal(out + 28, p + 28, n - 28);

	/* giaddr set by a relay before us stays */
	p[24] = 192, p[25] = 0, p[26] = 2, p[27] = 1;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	m = dhcp_relay_request(p, n, &d, &rp, out, sizeof(out), &added, &why);
	assert_int_equal(out[24], 192);
	assert_int_equal(out[27], 1);

	/* the hop limit */
	p[3] = 4;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	assert_int_equal(dhcp_relay_request(p, n, &d, &rp, out, sizeof(out), &added, &why), 0);
	assert_int_equal(why, DHCP_HOPS_EXCEEDED);
	rp.max_hops = 16;
	p[3] = 15;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	assert_int_equal(dhcp_relay_request(p, n, &d, &rp, out, sizeof(out), &added, &why), n);
	assert_int_equal(out[3], 16);

	/* option 82, before END, octet by octet; the padding after END dropped */
	p[3] = 0;
	memset(p + 24, 0, 4);
	rp.option82 = true;
	rp.circuit_id = (const uint8_t *)"ib0";
	rp.circuit_len = 3;
	rp.remote_id = (const uint8_t *)"rack-gw";
	rp.remote_len = 7;
	n = 300; /* BOOTP's minimum, padded with zeros after END */
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	m = dhcp_relay_request(p, n, &d, &rp, out, sizeof(out), &added, &why);
	assert_true(added);
	assert_int_equal(m, 243 + sizeof(want82));
	assert_memory_equal(out + 243, want82, sizeof(want82));
	assert_int_equal(dhcp_parse(out, m, &d2), DHCP_OK);
	assert_true(d2.has_relay_info);
	assert_int_equal(d2.msg_type, DHCP_DISCOVER);

	/* not a second time */
	m = dhcp_relay_request(out, m, &d2, &rp, p, sizeof(p), &added, &why);
	assert_false(added);
	assert_int_equal(m, 243 + sizeof(want82));

	/* not when it would not fit: the message goes unchanged but for hops and giaddr */
	n = msg(p, 1, 1, 6, 0, opts, 3);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	m = dhcp_relay_request(p, n, &d, &rp, out, n + 5, &added, &why);
	assert_false(added);
	assert_int_equal(m, n);
	assert_int_equal(dhcp_relay_request(p, n, &d, &rp, out, n - 1, &added, &why), 0);
	assert_int_equal(why, DHCP_NO_ROOM);
}

static void test_relay_reply(void **state)
{
	uint8_t p[600], out[600];
	static const uint8_t opts[] = { 53,  1, 2, 82, 5,   1,   3,   'i', 'b',
					'0', 0, 1, 4,  255, 255, 255, 0 };
	static const uint8_t want[] = { 53, 1, 2, 0, 1, 4, 255, 255, 255, 0, 255 };
	struct dhcp_info d;
	size_t n, m;

	(void)state;
	n = msg(p, 2, 32, 0, 0, opts, sizeof(opts));
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	assert_true(d.has_relay_info);
	m = dhcp_relay_reply(p, n, &d, out, sizeof(out));
	assert_int_equal(m, 240 + sizeof(want));
	assert_memory_equal(out, p, 240);
	assert_memory_equal(out + 240, want, sizeof(want));
	assert_int_equal(dhcp_relay_reply(p, n, &d, out, 100), 0);
	/* without option 82: unchanged */
	n = msg(p, 2, 1, 6, 0, want, sizeof(want) - 1);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	assert_int_equal(dhcp_relay_reply(p, n, &d, out, sizeof(out)), n);
	assert_memory_equal(out, p, n);
}

static void test_reply_dest(void **state)
{
	uint8_t p[600], opts[40] = { 53, 1, 5, 61, 21 };
	struct dhcp_info d;
	struct dhcp_dest t;
	size_t n;

	(void)state;
	dhcp_ipoib_client_id(ib_hw, opts + 5);
	/* IPoIB, broadcast flag */
	n = msg(p, 2, 32, 0, 0x8000, opts, 26);
	p[16] = 10, p[17] = 10, p[18] = 0, p[19] = 50;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, true, &t);
	assert_int_equal(t.kind, DHCP_DEST_BCAST);
	assert_int_equal(t.ip[0], 255);
	assert_int_equal(t.ip[3], 255);
	/* IPoIB, no flag: yiaddr at the client identifier's address */
	p[10] = 0;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, true, &t);
	assert_int_equal(t.kind, DHCP_DEST_YIADDR_HW);
	assert_int_equal(t.ip[3], 50);
	assert_int_equal(t.hw_len, 20);
	assert_memory_equal(t.hw, ib_hw, 20);
	/* a NAK: broadcast */
	opts[2] = DHCP_NAK;
	n = msg(p, 2, 32, 0, 0, opts, 26);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, true, &t);
	assert_int_equal(t.kind, DHCP_DEST_BCAST);
	/* IPoIB, a client identifier of another kind (a DUID): broadcast, noted */
	opts[2] = DHCP_ACK;
	opts[5] = 255;
	n = msg(p, 2, 32, 0, 0, opts, 26);
	p[16] = 10, p[19] = 50;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, true, &t);
	assert_int_equal(t.kind, DHCP_DEST_BCAST);
	assert_true(t.ib_no_hw);
	/* ciaddr (a renewal through the relay): unicast to it */
	p[12] = 10, p[13] = 10, p[14] = 0, p[15] = 7;
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, true, &t);
	assert_int_equal(t.kind, DHCP_DEST_CIADDR);
	assert_int_equal(t.ip[3], 7);
	/* Ethernet: yiaddr at chaddr */
	n = msg(p, 2, 1, 6, 0, opts, 3);
	p[16] = 10, p[17] = 20, p[18] = 0, p[19] = 9;
	memcpy(p + 28, "\x02\x11\x22\x33\x44\x55", 6);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, false, &t);
	assert_int_equal(t.kind, DHCP_DEST_YIADDR_HW);
	assert_int_equal(t.hw_len, 6);
	assert_memory_equal(t.hw, "\x02\x11\x22\x33\x44\x55", 6);
	assert_int_equal(t.ip[1], 20);
	/* no yiaddr (an INFORM's ACK without ciaddr): broadcast */
	memset(p + 16, 0, 4);
	assert_int_equal(dhcp_parse(p, n, &d), DHCP_OK);
	dhcp_reply_dest(&d, false, &t);
	assert_int_equal(t.kind, DHCP_DEST_BCAST);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_ib_discover), cmocka_unit_test(test_parse_refusals),
		cmocka_unit_test(test_relay_request),     cmocka_unit_test(test_relay_reply),
		cmocka_unit_test(test_reply_dest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
