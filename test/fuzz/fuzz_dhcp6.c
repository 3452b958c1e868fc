/*
 * libFuzzer harness for pkt/dhcp6: arbitrary payloads as a client's message to wrap
 * (the Relay-Forward must then hold it whole in its Relay Message, with the hop-count
 * rule) and as a server's Relay-Reply (its message and Interface-ID must lie inside the
 * input); a Relay-Forward built here, turned into a Relay-Reply, parses back to it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/dhcp6.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t link[16] = { 0xfd, 0, 0, 0x10, [15] = 1 }, peer[16] = { 0xfe, 0x80 };
	static uint8_t out[DHCP6_MAX_LEN + 100];
	struct dhcp6_relay_reply rr;
	enum dhcp6_result why;
	size_t n;

	n = dhcp6_relay_forward(data, size, link, peer, (const uint8_t *)"ib0", 3, out, sizeof(out),
				&why);
	if (n) {
		check(why == DHCP6_OK && n == 34 + 7 + 4 + size);
		check(out[0] == DHCP6_RELAY_FORW);
		check(out[1] == (data[0] == DHCP6_RELAY_FORW ? data[1] + 1 : 0));
		check(out[1] <= DHCP6_HOP_COUNT_LIMIT);
		check(!memcmp(out + 45, data, size));
		out[0] = DHCP6_RELAY_REPL;
		check(dhcp6_parse_relay_reply(out, n, &rr) == DHCP6_OK || size == 0);
		if (size) {
			check(rr.msg == out + 45 && rr.msg_len == size);
			check(rr.ifid_len == 3 && !memcmp(rr.ifid, "ib0", 3));
		}
	} else {
		check(why != DHCP6_OK);
	}
	if (dhcp6_parse_relay_reply(data, size, &rr) == DHCP6_OK) {
		check(rr.msg >= data && rr.msg + rr.msg_len <= data + size && rr.msg_len > 0);
		check(!rr.ifid || (rr.ifid >= data && rr.ifid + rr.ifid_len <= data + size));
	}
	return 0;
}
