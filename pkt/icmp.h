/*
 * ICMPv4 (RFC 792, RFC 1191, RFC 1812 4.3.2) and ICMPv6 (RFC 4443) error messages the
 * forwarding engine sends, built into a caller buffer from the invoking packet, and a
 * token-bucket rate limiter the caller owns.
 *
 * The builders refuse (with a reason) exactly where the RFCs forbid an error: about an
 * ICMP error (or an ICMPv6 redirect), a fragment other than the first, a multicast or
 * broadcast destination (network or link layer), a source that does not name one host
 * (0/8, 127/8, 224/4, 240/4; ::, ::1, multicast, v4-mapped). RFC 4443 2.4(e) exceptions:
 * Packet Too Big and Parameter Problem code 2 still go to multicast destinations, and
 * Packet Too Big also answers a non-first fragment (the source needs it for PMTU).
 *
 * ICMPv4 errors quote as much of the invoking packet as keeps the error within 576
 * octets (RFC 1812 4.3.2.3); ICMPv6 errors as much as keeps it within 1280 (RFC 4443
 * 2.4(c)). Built packets start with the IP header (no link header).
 */
#ifndef IBGW_PKT_ICMP_H
#define IBGW_PKT_ICMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ICMP4_DEST_UNREACH     3
#define ICMP4_TIME_EXCEEDED    11
#define ICMP4_PARAM_PROBLEM    12
#define ICMP4_CODE_NET         0
#define ICMP4_CODE_HOST        1
#define ICMP4_CODE_PROTO       2
#define ICMP4_CODE_PORT        3
#define ICMP4_CODE_FRAG_NEEDED 4
#define ICMP4_CODE_ADMIN       13
#define ICMP4_ERR_MAX          576

#define ICMP6_DEST_UNREACH   1
#define ICMP6_PACKET_TOO_BIG 2
#define ICMP6_TIME_EXCEEDED  3
#define ICMP6_PARAM_PROBLEM  4
#define ICMP6_CODE_NOROUTE   0
#define ICMP6_CODE_ADMIN     1
#define ICMP6_CODE_ADDR      3
#define ICMP6_ERR_MAX        1280

enum icmp_reason {
	ICMP_OK = 0,
	ICMP_INVOKING_MALFORMED,  /* no usable IP header to quote */
	ICMP_NOT_FOR_ICMP_ERROR,  /* invoking packet is an ICMP error (or ICMPv6 redirect) */
	ICMP_NOT_FOR_FRAGMENT,    /* invoking packet is a non-first fragment */
	ICMP_NOT_FOR_MULTICAST,   /* multicast destination (IP or link layer) */
	ICMP_NOT_FOR_BROADCAST,   /* broadcast destination (limited, directed, link layer) */
	ICMP_NOT_FOR_MARTIAN_SRC, /* source names no single host */
	ICMP_NO_SPACE,            /* output buffer too small for even the minimum quote */
	ICMP_BAD_TYPE,            /* type/code is not an error this module builds */
	ICMP_RATE_LIMITED,        /* for the caller's counter: icmp_rl_allow said no */
	ICMP_REASON_COUNT
};

const char *icmp_reason_name(enum icmp_reason r);

struct icmp_err {
	uint8_t type, code;
	uint32_t param;     /* next-hop MTU (v4 frag needed, v6 packet too big), or pointer */
	uint8_t ttl;        /* TTL / hop limit of the error; 0 means 64 */
	uint16_t ip_id;     /* IPv4 identification of the error */
	bool ll_multicast;  /* invoking frame came to a link-layer multicast/broadcast address */
	bool dst_broadcast; /* invoking destination is a directed broadcast (caller knows) */
	const uint8_t *src; /* our address the error comes from: 4 or 16 octets */
};

/* Build into out[cap]; on ICMP_OK *out_len is the packet's length. */
enum icmp_reason icmp4_error(const struct icmp_err *e, const uint8_t *inv, size_t inv_len,
			     uint8_t *out, size_t cap, size_t *out_len);
enum icmp_reason icmp6_error(const struct icmp_err *e, const uint8_t *inv, size_t inv_len,
			     uint8_t *out, size_t cap, size_t *out_len);

/*
 * Rate limiter: a token bucket per hash bucket of destination prefixes (the error's
 * destination masked to v4_prefix_len / v6_prefix_len, hashed into the caller's bucket
 * array), and one global bucket, like Linux's per-peer icmp_ratelimit plus
 * icmp_msgs_per_sec. Credits are kept in nanoseconds, so there is no floating point.
 * PMTU errors (v4 frag needed, v6 packet too big) are exempt when exempt_pmtu is set,
 * as in Linux. Not thread-safe: one limiter per worker (or per control thread).
 */
struct icmp_rl_bucket {
	uint64_t stamp_ns;
	uint64_t credit_ns;
};

struct icmp_rl_cfg {
	uint32_t per_dst_rate, per_dst_burst; /* messages/s and burst per bucket */
	uint32_t total_rate, total_burst;     /* global; rate 0 disables the global bucket */
	uint8_t v4_prefix_len, v6_prefix_len;
	bool exempt_pmtu;
	uint32_t seed;
};

struct icmp_ratelimit {
	struct icmp_rl_bucket *b;
	uint32_t mask;
	uint64_t cost_ns, burst_ns, g_cost_ns, g_burst_ns;
	struct icmp_rl_bucket global;
	struct icmp_rl_cfg cfg;
};

/* n must be a power of two; storage is the caller's. -EINVAL on a bad config. */
int icmp_rl_init(struct icmp_ratelimit *rl, struct icmp_rl_bucket *storage, size_t n,
		 const struct icmp_rl_cfg *cfg);
/* family AF_INET (dst 4 octets) or AF_INET6 (16). */
bool icmp_rl_allow(struct icmp_ratelimit *rl, int family, const uint8_t *dst, uint8_t type,
		   uint8_t code, uint64_t now_ns);

#endif
