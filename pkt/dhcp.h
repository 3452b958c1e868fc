/*
 * DHCPv4 messages as a relay agent sees them (RFC 2131, RFC 1542 section 4, RFC 3046,
 * RFC 4390), prefix dhcp_. Pure functions over the UDP payload, no state:
 *
 *   dhcp_parse          the fixed BOOTP header, the magic cookie and the option walk
 *                       (bounded; a truncated option refuses the message), what the relay
 *                       needs: op, htype/hlen, hops, flags, addresses, message type,
 *                       client identifier (option 61), whether option 82 is present;
 *   dhcp_relay_request  a client's message as it goes to the servers: giaddr set when 0,
 *                       hops incremented (a message past max_hops refused), option 82
 *                       appended before END when asked (RFC 3046 2.1: not when one is
 *                       there already, nor when it would not fit: the message then goes
 *                       as it is and the caller counts it);
 *   dhcp_relay_reply    a server's reply as it goes to the client: option 82 removed
 *                       (RFC 3046 2.2), the rest unchanged;
 *   dhcp_reply_dest     where the reply goes on the client's link (RFC 2131 4.1,
 *                       RFC 1542 5.4): broadcast (the BROADCAST flag, a DHCPNAK, or an
 *                       IPoIB client whose address cannot be known), unicast to ciaddr,
 *                       or unicast to yiaddr at the client's link-layer address: chaddr
 *                       on Ethernet, on IPoIB (RFC 4390: htype 32, hlen 0, chaddr empty)
 *                       the 20-octet address a client identifier of type 32 carries.
 *
 * Threads: any.
 */
#ifndef IBGW_PKT_DHCP_H
#define IBGW_PKT_DHCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DHCP_SERVER_PORT   67
#define DHCP_CLIENT_PORT   68
#define DHCP_FIXED_LEN     236 /* op .. file */
#define DHCP_OPT_OFF       240 /* after the magic cookie */
#define DHCP_MAGIC         0x63825363u
#define DHCP_OP_REQUEST    1
#define DHCP_OP_REPLY      2
#define DHCP_HTYPE_ETHER   1
#define DHCP_HTYPE_IPOIB   32 /* RFC 4390 */
#define DHCP_FLAG_BCAST    0x8000
#define DHCP_HOPS_MAX      16 /* RFC 1542 4.1.1: never relay beyond */
#define DHCP_IPOIB_HWLEN   20
#define DHCP_MAX_LEN       1500 /* what the relay handles and builds */
#define DHCP_OPT82_MAX     255  /* one option's data */
#define DHCP_OPT_PAD       0
#define DHCP_OPT_OVERLOAD  52
#define DHCP_OPT_MSG_TYPE  53
#define DHCP_OPT_CLIENT_ID 61
#define DHCP_OPT_RELAY     82
#define DHCP_OPT_END       255
#define DHCP_RAI_CIRCUIT   1 /* option 82 sub-options */
#define DHCP_RAI_REMOTE    2

enum dhcp_msg_type {
	DHCP_NONE = 0, /* BOOTP: no option 53 */
	DHCP_DISCOVER = 1,
	DHCP_OFFER,
	DHCP_REQUEST,
	DHCP_DECLINE,
	DHCP_ACK,
	DHCP_NAK,
	DHCP_RELEASE,
	DHCP_INFORM,
};

enum dhcp_result {
	DHCP_OK = 0,
	DHCP_SHORT,         /* under 240 octets: no room for the header and cookie */
	DHCP_BAD_OP,        /* op neither BOOTREQUEST nor BOOTREPLY */
	DHCP_BAD_HLEN,      /* hlen above 16 */
	DHCP_BAD_MAGIC,     /* no DHCP magic cookie */
	DHCP_BAD_OPTION,    /* an option runs past the message, or a second option 53 */
	DHCP_NO_END,        /* the options end without END */
	DHCP_TOO_LONG,      /* above DHCP_MAX_LEN */
	DHCP_HOPS_EXCEEDED, /* dhcp_relay_request: hops at the limit already */
	DHCP_NO_ROOM,       /* the output buffer is too small */
	DHCP_RESULT_COUNT
};
const char *dhcp_result_name(enum dhcp_result r);

struct dhcp_info {
	uint8_t op, htype, hlen, hops;
	uint32_t xid;
	uint16_t flags;
	uint8_t ciaddr[4], yiaddr[4], siaddr[4], giaddr[4];
	uint8_t chaddr[16];
	uint8_t msg_type;         /* enum dhcp_msg_type; DHCP_NONE without option 53 */
	const uint8_t *client_id; /* option 61's data, pointing into the message; NULL: none */
	uint8_t client_id_len;
	bool has_relay_info; /* option 82 present */
	size_t end_off;      /* offset of the END option */
};

enum dhcp_result dhcp_parse(const uint8_t *p, size_t len, struct dhcp_info *out);

struct dhcp_relay_params {
	uint8_t giaddr[4];         /* the relay's address on the client's link */
	uint8_t max_hops;          /* 1..16: a message with hops >= this is not relayed */
	bool option82;             /* append the Relay Agent Information option */
	const uint8_t *circuit_id; /* sub-option 1 (the interface name); len 0: none */
	size_t circuit_len;
	const uint8_t *remote_id; /* sub-option 2; len 0: none */
	size_t remote_len;
};

/*
 * A BOOTREQUEST (parsed as d) from the client's link, rewritten into out for the servers.
 * Returns the length (0 and *why set when refused). *added82 tells whether option 82
 * went in (false when not asked, already present, or it would not fit).
 */
size_t dhcp_relay_request(const uint8_t *p, size_t len, const struct dhcp_info *d,
			  const struct dhcp_relay_params *rp, uint8_t *out, size_t cap,
			  bool *added82, enum dhcp_result *why);

/* A BOOTREPLY (parsed as d) for the client: copied into out with option 82 removed.
 * Returns the length, 0 when cap is too small. */
size_t dhcp_relay_reply(const uint8_t *p, size_t len, const struct dhcp_info *d, uint8_t *out,
			size_t cap);

enum dhcp_dest_kind {
	DHCP_DEST_BCAST = 0, /* 255.255.255.255 at the link's broadcast address */
	DHCP_DEST_CIADDR,    /* unicast to ciaddr, resolved as any neighbour */
	DHCP_DEST_YIADDR_HW, /* unicast to yiaddr at hw (hw_len octets) */
};

struct dhcp_dest {
	enum dhcp_dest_kind kind;
	uint8_t ip[4];
	uint8_t hw[DHCP_IPOIB_HWLEN];
	uint8_t hw_len; /* 6 (Ethernet) or 20 (IPoIB) */
	bool ib_no_hw;  /* IPoIB, unicast wanted but no usable client identifier */
};

/* Where a reply goes on the client's link; ib: the link is IPoIB. */
void dhcp_reply_dest(const struct dhcp_info *d, bool ib, struct dhcp_dest *out);

/* The IPoIB client identifier RFC 4390 clients may send and dhcp_reply_dest reads: type
 * 32 then the 20-octet link-layer address. Writes 21 octets. */
void dhcp_ipoib_client_id(const uint8_t hw[DHCP_IPOIB_HWLEN], uint8_t out[1 + DHCP_IPOIB_HWLEN]);

#endif
