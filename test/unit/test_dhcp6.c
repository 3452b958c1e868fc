/*
 * pkt/dhcp6: a client's Solicit wrapped in a Relay-Forward octet by octet (hop-count 0,
 * link-address, peer-address, Interface-ID, Relay Message); a nearer relay's
 * Relay-Forward wrapped with hop-count + 1 and refused at HOP_COUNT_LIMIT; server
 * messages refused from the client side; a Relay-Reply parsed (its message and
 * Interface-ID, whatever their order) and its refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/dhcp6.h"

static const uint8_t link6[16] = { 0xfd, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
static const uint8_t peer6[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa1, 0, 0x0b };

static void test_relay_forward(void **state)
{
	static const uint8_t solicit[] = { 1, 0xaa, 0xbb, 0xcc, 0, 8, 0, 2, 0, 0 };
	uint8_t out[200], fwd2[300];
	enum dhcp6_result why;
	size_t n;

	(void)state;
	n = dhcp6_relay_forward(solicit, sizeof(solicit), link6, peer6, (const uint8_t *)"ib0", 3,
				out, sizeof(out), &why);
	assert_int_equal(why, DHCP6_OK);
	assert_int_equal(n, 34 + 4 + 3 + 4 + sizeof(solicit));
	assert_int_equal(out[0], 12);
	assert_int_equal(out[1], 0);
	assert_memory_equal(out + 2, link6, 16);
	assert_memory_equal(out + 18, peer6, 16);
	assert_memory_equal(out + 34, "\0\x12\0\x03ib0", 7);
	assert_memory_equal(out + 41, "\0\x09\0\x0a", 4);
	assert_memory_equal(out + 45, solicit, sizeof(solicit));
	/* a nearer relay's Relay-Forward: hop-count + 1 */
	out[1] = 3;
	n = dhcp6_relay_forward(out, n, link6, peer6, NULL, 0, fwd2, sizeof(fwd2), &why);
	assert_int_equal(n, 34 + 4 + 34 + 4 + 3 + 4 + sizeof(solicit));
	assert_int_equal(fwd2[1], 4);
	assert_memory_equal(fwd2 + 34, "\0\x09", 2);
	out[1] = DHCP6_HOP_COUNT_LIMIT;
	assert_int_equal(
	    dhcp6_relay_forward(out, 55, link6, peer6, NULL, 0, fwd2, sizeof(fwd2), &why), 0);
	assert_int_equal(why, DHCP6_HOPS_EXCEEDED);
	/* server messages, short ones, no room */
	out[0] = 7; /* Reply */
	assert_int_equal(dhcp6_relay_forward(out, 10, link6, peer6, NULL, 0, fwd2, 200, &why), 0);
	assert_int_equal(why, DHCP6_BAD_TYPE);
	out[0] = DHCP6_RELAY_REPL;
	assert_int_equal(dhcp6_relay_forward(out, 40, link6, peer6, NULL, 0, fwd2, 200, &why), 0);
	assert_int_equal(why, DHCP6_BAD_TYPE);
	assert_int_equal(dhcp6_relay_forward(solicit, 3, link6, peer6, NULL, 0, fwd2, 200, &why),
			 0);
	assert_int_equal(why, DHCP6_SHORT);
	assert_int_equal(dhcp6_relay_forward(solicit, sizeof(solicit), link6, peer6,
					     (const uint8_t *)"ib0", 3, fwd2, 50, &why),
			 0);
	assert_int_equal(why, DHCP6_NO_ROOM);
	assert_string_equal(dhcp6_result_name(DHCP6_NO_RELAY_MSG), "no_relay_msg");
}

static void test_relay_reply(void **state)
{
	static const uint8_t advertise[] = { 2, 0xaa, 0xbb, 0xcc };
	struct dhcp6_relay_reply rr;
	uint8_t p[200];
	size_t n = 34;

	(void)state;
	memset(p, 0, sizeof(p));
	p[0] = 13;
	p[1] = 0;
	memcpy(p + 2, link6, 16);
	memcpy(p + 18, peer6, 16);
	/* Relay Message first, then Interface-ID, then an unknown option */
	memcpy(p + n, "\0\x09\0\x04", 4);
	memcpy(p + n + 4, advertise, 4);
	n += 8;
	memcpy(p + n, "\0\x12\0\x03ib0", 7);
	n += 7;
	memcpy(p + n, "\0\x63\0\x01x", 5);
	n += 5;
	assert_int_equal(dhcp6_parse_relay_reply(p, n, &rr), DHCP6_OK);
	assert_memory_equal(rr.link, link6, 16);
	assert_memory_equal(rr.peer, peer6, 16);
	assert_int_equal(rr.msg_len, 4);
	assert_memory_equal(rr.msg, advertise, 4);
	assert_int_equal(rr.ifid_len, 3);
	assert_memory_equal(rr.ifid, "ib0", 3);
	/* refusals */
	assert_int_equal(dhcp6_parse_relay_reply(p, n - 1, &rr), DHCP6_BAD_OPTION);
	assert_int_equal(dhcp6_parse_relay_reply(p, 33, &rr), DHCP6_SHORT);
	assert_int_equal(dhcp6_parse_relay_reply(p, 34, &rr), DHCP6_NO_RELAY_MSG);
	p[0] = 12;
	assert_int_equal(dhcp6_parse_relay_reply(p, n, &rr), DHCP6_BAD_TYPE);
	p[0] = 13;
	p[35] = 18; /* the first option is now an Interface-ID: no Relay Message */
	assert_int_equal(dhcp6_parse_relay_reply(p, n, &rr), DHCP6_NO_RELAY_MSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_relay_forward),
		cmocka_unit_test(test_relay_reply),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
