/*
 * IPv6 Neighbor Discovery (RFC 4861) messages as the gateway receives and sends them:
 * Router Solicitation / Advertisement, Neighbor Solicitation / Advertisement, and
 * Redirect (validated, then ignored by the caller: a gateway does not take redirects).
 *
 * nd_parse() takes a whole IPv6 packet (no link header) and applies the receive checks
 * of RFC 4861 6.1.1, 6.1.2, 7.1.1, 7.1.2 and 8.1: hop limit 255, ICMP code 0, checksum,
 * minimum length per type, every option's length non-zero and inside the packet, target
 * not multicast, duplicate address detection (NS from :: goes to a solicited-node
 * address and carries no source link-layer option), NA to multicast not solicited, RA
 * and Redirect from a link-local source; ND in fragments is refused (RFC 6980).
 *
 * Link-layer address options per link type:
 *   Ethernet  type, length 1, 6-octet MAC                         (RFC 4861 4.6.1)
 *   IPoIB     type, length 3, 2 zero octets, 20-octet address     (RFC 4391 9.1; what
 *             the Linux kernel sends: its pad comes before the address)
 * Builders write whole IPv6 packets (hop limit 255, checksum filled). Multicast
 * destinations map to Ethernet 33:33:xx:xx:xx:xx (nd_mcast_mac) or to an IPoIB MGID
 * (ipoib_mgid_from_ipv6 in lib/ipoib.h).
 */
#ifndef IBGW_PKT_ND_H
#define IBGW_PKT_ND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/ip.h"

#define ND_RS       133
#define ND_RA       134
#define ND_NS       135
#define ND_NA       136
#define ND_REDIRECT 137

#define ND_OPT_SLLA     1
#define ND_OPT_TLLA     2
#define ND_OPT_PREFIX   3
#define ND_OPT_REDIRECT 4
#define ND_OPT_MTU      5

#define ND_NA_ROUTER    0x80000000u
#define ND_NA_SOLICITED 0x40000000u
#define ND_NA_OVERRIDE  0x20000000u

#define ND_MAX_PREFIXES 4
#define ND_MAX_LEN      (IP6_HDR_LEN + 24 + 24) /* NS/NA with one IPoIB address option */

enum nd_link {
	ND_LINK_ETHER,
	ND_LINK_IB,
};

static inline size_t nd_lladdr_len(enum nd_link l)
{
	return l == ND_LINK_IB ? 20 : 6;
}

enum nd_reason {
	ND_OK = 0,
	ND_BAD_IP,        /* IPv6 header / chain failed ip6_validate */
	ND_NOT_ICMPV6,    /* upper layer is not ICMPv6 */
	ND_FRAGMENTED,    /* ND inside a fragment (RFC 6980) */
	ND_NOT_ND,        /* ICMPv6 type not 133..137 */
	ND_BAD_HOP_LIMIT, /* IP hop limit != 255 */
	ND_BAD_CODE,      /* ICMP code != 0 */
	ND_TOO_SHORT,     /* ICMP length below the type's minimum */
	ND_BAD_CHECKSUM,
	ND_OPTION_ZERO_LENGTH,
	ND_OPTION_TRUNCATED,     /* option runs past the packet */
	ND_BAD_LLADDR_LEN,       /* link-layer option not 1 (Ethernet) / 3 (IPoIB) units */
	ND_LLADDR_RESERVED,      /* IPoIB address with reserved flag bits */
	ND_BAD_PREFIX_OPTION,    /* prefix information length != 4 or prefix length > 128 */
	ND_BAD_MTU_OPTION,       /* MTU option length != 1 */
	ND_TARGET_MULTICAST,     /* NS/NA target is multicast */
	ND_DAD_BAD_DST,          /* NS from :: not to a solicited-node address */
	ND_DAD_WITH_SLLAO,       /* NS from :: with a source link-layer option */
	ND_NA_SOLICITED_MCAST,   /* NA to a multicast destination with S set */
	ND_RS_UNSPEC_WITH_SLLAO, /* RS from :: with a source link-layer option */
	ND_SRC_NOT_LINK_LOCAL,   /* RA or Redirect not from a link-local address */
	ND_SRC_MULTICAST,        /* any ND message from a multicast source */
	ND_LLADDR_NOT_UNICAST,   /* a multicast or zero MAC; an IPoIB address with the
				  * multicast QPN 0xffffff, a multicast or a zero GID
				  * (arp_parse refuses the same) */
	ND_REASON_COUNT
};

const char *nd_reason_name(enum nd_reason r);

struct nd_prefix {
	const uint8_t *prefix; /* 16 octets */
	uint8_t len, flags;    /* flags: L 0x80, A 0x40 */
	uint32_t valid, preferred;
};

struct nd_msg {
	uint8_t type;
	const uint8_t *src, *dst;    /* IPv6 header addresses */
	const uint8_t *target;       /* NS, NA, Redirect; NULL otherwise */
	const uint8_t *redirect_dst; /* Redirect's destination address */
	uint32_t flags;              /* NA: R/S/O (ND_NA_*); RA: the M/O octet */
	uint8_t ra_cur_hop_limit;
	uint16_t ra_lifetime;
	uint32_t ra_reachable, ra_retrans;
	const uint8_t *sllao, *tllao; /* the link-layer address (6 or 20 octets) or NULL */
	bool has_mtu;
	uint32_t mtu;
	uint8_t n_prefix;      /* stored (at most ND_MAX_PREFIXES) */
	uint8_t n_prefix_seen; /* present in the packet */
	struct nd_prefix prefix[ND_MAX_PREFIXES];
	bool dad; /* NS from :: */
};

/* Parse and validate a whole IPv6 packet carrying ND, for a link of type link. */
enum nd_reason nd_parse(const uint8_t *pkt, size_t len, enum nd_link link, struct nd_msg *out);

/* ff02::1:ffXX:XXXX for target. */
void nd_solicited_node(const uint8_t target[16], uint8_t out[16]);
bool nd_is_solicited_node(const uint8_t a[16]);
/* 33:33 + the group's low 32 bits (RFC 2464 7). */
void nd_mcast_mac(const uint8_t group[16], uint8_t mac[6]);
extern const uint8_t nd_all_nodes[16];   /* ff02::1 */
extern const uint8_t nd_all_routers[16]; /* ff02::2 */

/* Neighbor Solicitation for target from src (:: for DAD: then lladdr must be NULL).
 * dst NULL: the target's solicited-node address; else unicast (reachability probe).
 * lladdr: our address for the source link-layer option, or NULL for none. Returns the
 * packet's length, or 0 if cap is too small or a DAD NS asks for an option. */
size_t nd_build_ns(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t *dst, const uint8_t target[16], const uint8_t *lladdr);
/* Neighbor Advertisement: flags ND_NA_*; lladdr for the target link-layer option (NULL
 * for none). */
size_t nd_build_na(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t dst[16], const uint8_t target[16], uint32_t flags,
		   const uint8_t *lladdr);
/* The answer to a parsed NS (RFC 4861 7.2.4): from src (normally ns->target), to the
 * solicitor with S set, or to ff02::1 with S clear when the NS came from :: (DAD);
 * flags adds R and O. */
size_t nd_build_na_reply(uint8_t *out, size_t cap, enum nd_link link, const struct nd_msg *ns,
			 const uint8_t src[16], uint32_t flags, const uint8_t *lladdr);
/* Unsolicited NA (RFC 4861 7.2.6) announcing addr at lladdr: to ff02::1, O set. */
size_t nd_build_unsolicited_na(uint8_t *out, size_t cap, enum nd_link link, const uint8_t addr[16],
			       bool router, const uint8_t *lladdr);

/*
 * Router Advertisement (RFC 4861 4.2, 6.2.3) as a router sends it: the fixed part,
 * then the source link-layer option (lladdr; NULL for none), the MTU option (mtu 0:
 * none) and one Prefix Information option per prefix (4.6.2; flags ND_PFX_*). src must
 * be our link-local address (hosts drop an RA from anything else, 6.1.2). A router
 * lifetime of 0 says "not a default router" (sent when it stops advertising, 6.2.5).
 */
#define ND_RA_MANAGED    0x80 /* M: addresses from DHCPv6 */
#define ND_RA_OTHER      0x40 /* O: other configuration from DHCPv6 */
#define ND_PFX_ON_LINK   0x80 /* L */
#define ND_PFX_AUTO      0x40 /* A: SLAAC */
#define ND_RA_MAX_PREFIX 8
#define ND_RA_MAX_LEN    (IP6_HDR_LEN + 16 + 24 + 8 + 32 * ND_RA_MAX_PREFIX)

struct nd_ra_params {
	uint8_t cur_hop_limit;    /* 0: unspecified */
	uint8_t flags;            /* ND_RA_MANAGED | ND_RA_OTHER */
	uint16_t router_lifetime; /* seconds; 0: not a default router */
	uint32_t reachable_ms;    /* 0: unspecified */
	uint32_t retrans_ms;      /* 0: unspecified */
	uint32_t mtu;             /* 0: no MTU option */
	const struct nd_prefix *prefix;
	unsigned n_prefix; /* at most ND_RA_MAX_PREFIX */
};

/* Returns the packet's length, or 0 if cap is too small or there are too many prefixes. */
size_t nd_build_ra(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t dst[16], const struct nd_ra_params *p, const uint8_t *lladdr);

/*
 * When a router advertising on an interface sends its next RA (RFC 4861 6.2.4, 6.2.6),
 * with time in ms and the randomness injected (rnd: any uniformly distributed 32 bits):
 *
 *   nd_ra_interval    the next unsolicited RA: uniform in [min_ms, max_ms]; while the
 *                     first MAX_INITIAL_RTR_ADVERTISEMENTS (3) go out (initial = how
 *                     many were sent so far) at most MAX_INITIAL_RTR_ADVERT_INTERVAL
 *                     (16 s);
 *   nd_ra_solicited   the answer to an RS received at now: a random delay in
 *                     [0, MAX_RA_DELAY_TIME] (500 ms); to all-nodes (mcast) also no
 *                     sooner than MIN_DELAY_BETWEEN_RAS (3 s) after the last multicast
 *                     RA (last_mcast_ms; 0: none yet), and never later than an
 *                     unsolicited one already due (next_ms).
 */
#define ND_MAX_INITIAL_RTR_ADVERTISEMENTS  3
#define ND_MAX_INITIAL_RTR_ADVERT_INTERVAL 16000
#define ND_MAX_RA_DELAY_TIME               500
#define ND_MIN_DELAY_BETWEEN_RAS           3000
#define ND_MAX_FINAL_RTR_ADVERTISEMENTS    3
uint64_t nd_ra_interval(uint32_t min_ms, uint32_t max_ms, unsigned initial, uint32_t rnd);
uint64_t nd_ra_solicited(uint64_t now_ms, bool mcast, uint64_t last_mcast_ms, uint64_t next_ms,
			 uint32_t rnd);

#endif
