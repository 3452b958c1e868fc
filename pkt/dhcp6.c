/*
 * DHCPv6 relay messages: the Relay-Forward built, the Relay-Reply parsed (see dhcp6.h).
 *
 * Threads: any (pure functions).
 */
#include <string.h>

#include "pkt/dhcp6.h"

const uint8_t dhcp6_all_relays[16] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2 };

static const char *const result_names[DHCP6_RESULT_COUNT] = {
	[DHCP6_OK] = "ok",
	[DHCP6_SHORT] = "short",
	[DHCP6_BAD_TYPE] = "bad_type",
	[DHCP6_BAD_OPTION] = "bad_option",
	[DHCP6_NO_RELAY_MSG] = "no_relay_msg",
	[DHCP6_HOPS_EXCEEDED] = "hops_exceeded",
	[DHCP6_NO_ROOM] = "no_room",
};

const char *dhcp6_result_name(enum dhcp6_result r)
{
	return (unsigned)r < DHCP6_RESULT_COUNT ? result_names[r] : "unknown";
}

/* What a client sends (RFC 8415 7.3): Solicit, Request, Confirm, Renew, Rebind,
 * Release, Decline, Information-request; and a nearer relay's Relay-Forward. */
static bool from_client_side(uint8_t t)
{
	return t == 1 || t == 3 || t == 4 || t == 5 || t == 6 || t == 8 || t == 9 || t == 11 ||
	       t == DHCP6_RELAY_FORW;
}

static void put16(uint8_t *p, size_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

size_t dhcp6_relay_forward(const uint8_t *msg, size_t len, const uint8_t link[16],
			   const uint8_t peer[16], const uint8_t *ifid, size_t ifid_len,
			   uint8_t *out, size_t cap, enum dhcp6_result *why)
{
	size_t n = DHCP6_RELAY_HDR + (ifid_len ? 4 + ifid_len : 0) + 4 + len;

	if (len < 4 || (msg[0] == DHCP6_RELAY_FORW && len < DHCP6_RELAY_HDR)) {
		*why = DHCP6_SHORT;
		return 0;
	}
	if (!from_client_side(msg[0])) {
		*why = DHCP6_BAD_TYPE;
		return 0;
	}
	if (msg[0] == DHCP6_RELAY_FORW && msg[1] >= DHCP6_HOP_COUNT_LIMIT) {
		*why = DHCP6_HOPS_EXCEEDED;
		return 0;
	}
	if (n > cap || len > 0xffff || ifid_len > 0xffff) {
		*why = DHCP6_NO_ROOM;
		return 0;
	}
	out[0] = DHCP6_RELAY_FORW;
	out[1] = msg[0] == DHCP6_RELAY_FORW ? (uint8_t)(msg[1] + 1) : 0;
	memcpy(out + 2, link, 16);
	memcpy(out + 18, peer, 16);
	n = DHCP6_RELAY_HDR;
	if (ifid_len) {
		put16(out + n, DHCP6_OPT_INTERFACE_ID);
		put16(out + n + 2, ifid_len);
		memcpy(out + n + 4, ifid, ifid_len);
		n += 4 + ifid_len;
	}
	put16(out + n, DHCP6_OPT_RELAY_MSG);
	put16(out + n + 2, len);
	memcpy(out + n + 4, msg, len);
	*why = DHCP6_OK;
	return n + 4 + len;
}

enum dhcp6_result dhcp6_parse_relay_reply(const uint8_t *p, size_t len,
					  struct dhcp6_relay_reply *out)
{
	size_t i = DHCP6_RELAY_HDR;

	memset(out, 0, sizeof(*out));
	if (len < DHCP6_RELAY_HDR)
		return DHCP6_SHORT;
	if (p[0] != DHCP6_RELAY_REPL)
		return DHCP6_BAD_TYPE;
	out->hop = p[1];
	memcpy(out->link, p + 2, 16);
	memcpy(out->peer, p + 18, 16);
	while (i < len) {
		size_t code, olen;

		if (i + 4 > len)
			return DHCP6_BAD_OPTION;
		code = (size_t)(p[i] << 8 | p[i + 1]);
		olen = (size_t)(p[i + 2] << 8 | p[i + 3]);
		if (i + 4 + olen > len)
			return DHCP6_BAD_OPTION;
		if (code == DHCP6_OPT_RELAY_MSG && !out->msg) {
			out->msg = p + i + 4;
			out->msg_len = olen;
		} else if (code == DHCP6_OPT_INTERFACE_ID && !out->ifid) {
			out->ifid = p + i + 4;
			out->ifid_len = olen;
		}
		i += 4 + olen;
	}
	if (!out->msg || !out->msg_len)
		return DHCP6_NO_RELAY_MSG;
	return DHCP6_OK;
}
