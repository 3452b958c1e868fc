/*
 * DHCPv6 relay agent messages (RFC 8415 sections 9, 19 and 21.10 / 21.18), prefix dhcp6_.
 * Pure functions over UDP payloads, no state:
 *
 *   dhcp6_relay_forward       a client's message (or a Relay-Forward of a relay nearer
 *                             the client) wrapped in a Relay-Forward: hop-count (0 for
 *                             a client's, the inner one's + 1, refused at
 *                             HOP_COUNT_LIMIT), link-address, peer-address, the
 *                             Interface-ID option, the Relay Message option;
 *   dhcp6_parse_relay_reply   a server's Relay-Reply: its addresses, the Relay Message
 *                             (what goes to the peer) and Interface-ID (which link),
 *                             every option bounded.
 *
 * Threads: any.
 */
#ifndef IBGW_PKT_DHCP6_H
#define IBGW_PKT_DHCP6_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DHCP6_CLIENT_PORT      546
#define DHCP6_SERVER_PORT      547
#define DHCP6_RELAY_FORW       12
#define DHCP6_RELAY_REPL       13
#define DHCP6_OPT_RELAY_MSG    9
#define DHCP6_OPT_INTERFACE_ID 18
#define DHCP6_HOP_COUNT_LIMIT  8
#define DHCP6_RELAY_HDR        34 /* msg-type, hop-count, link-address, peer-address */
#define DHCP6_MAX_LEN          1500

/* All_DHCP_Relay_Agents_and_Servers, ff02::1:2. */
extern const uint8_t dhcp6_all_relays[16];

enum dhcp6_result {
	DHCP6_OK = 0,
	DHCP6_SHORT,         /* no room for the header */
	DHCP6_BAD_TYPE,      /* not a message a relay takes from this side */
	DHCP6_BAD_OPTION,    /* an option runs past the message */
	DHCP6_NO_RELAY_MSG,  /* a Relay-Reply without a Relay Message option */
	DHCP6_HOPS_EXCEEDED, /* a Relay-Forward at HOP_COUNT_LIMIT already */
	DHCP6_NO_ROOM,       /* the output buffer is too small */
	DHCP6_RESULT_COUNT
};
const char *dhcp6_result_name(enum dhcp6_result r);

/* The client's message msg (len octets) in a Relay-Forward at out. ifid: the
 * Interface-ID option's data (ifid_len 0: none). Returns the length, 0 with *why. */
size_t dhcp6_relay_forward(const uint8_t *msg, size_t len, const uint8_t link[16],
			   const uint8_t peer[16], const uint8_t *ifid, size_t ifid_len,
			   uint8_t *out, size_t cap, enum dhcp6_result *why);

struct dhcp6_relay_reply {
	uint8_t hop;
	uint8_t link[16], peer[16];
	const uint8_t *msg; /* the Relay Message option's data, pointing into the message */
	size_t msg_len;
	const uint8_t *ifid; /* NULL: no Interface-ID option */
	size_t ifid_len;
};

enum dhcp6_result dhcp6_parse_relay_reply(const uint8_t *p, size_t len,
					  struct dhcp6_relay_reply *out);

#endif
