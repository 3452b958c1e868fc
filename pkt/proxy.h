/*
 * Proxy ARP / proxy ND as a pure decision: a request or solicitation came in on side A;
 * the caller's lookup says where addresses live; the answer is one of
 *   PROXY_ANSWER   the reply (ARP reply / NA with the gateway's link address on A) is
 *                  built in the caller's buffer
 *   PROXY_RESOLVE  the target is inside a configured proxy prefix of side B but not
 *                  learned yet: resolve it on B first (the caller queues the request)
 *   PROXY_IGNORE   with a reason (a counter name)
 *
 * Rules (docs/packet-rules.md has the full list):
 * - never for an address that lives on the asker's side, nor for the gateway's own
 *   addresses (the neighbour code answers those);
 * - loop protection: never answer a request whose sender link address (in the packet,
 *   or the frame's source) is the gateway's own on A, nor one whose sender IP lives on
 *   side B (a request that crossed over: another proxy, or a loop);
 * - gratuitous ARP (announcements, gratuitous replies), replies and NAs are never
 *   proxied back: they update the neighbour tables, nothing more;
 * - DAD: an NS from :: (or an ARP probe from 0.0.0.0) for an address that lives on B is
 *   answered only when cfg->defend_dad (default on). Linux with proxy_ndp defends a
 *   proxied address against DAD (an NA to ff02::1, override clear); Linux proxy_arp
 *   answers probes only for its own addresses. We defend on both, configurably: an
 *   address in use on B is in use on the shared subnet;
 * - proxied NAs carry override clear (RFC 4861 7.2.8) so the real owner wins; the
 *   announcements for an address that appears or moves carry override set;
 * - rate limit per asker (a token bucket, pkt/icmp.h's limiter, keyed by the asker's
 *   IP address), when the caller passes one.
 */
#ifndef IBGW_PKT_PROXY_H
#define IBGW_PKT_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/arp.h"
#include "pkt/icmp.h"
#include "pkt/nd.h"

enum proxy_where {
	PROXY_WHERE_UNKNOWN,
	PROXY_WHERE_ASKER_SIDE,   /* learned or configured on the side the request came from */
	PROXY_WHERE_OTHER_SIDE,   /* learned neighbour on the other side */
	PROXY_WHERE_OTHER_PREFIX, /* inside a configured proxy prefix of the other side */
	PROXY_WHERE_SELF,         /* one of the gateway's own addresses */
};

/* family AF_INET (addr: 4 octets, network order) or AF_INET6 (16 octets). */
typedef enum proxy_where (*proxy_lookup_fn)(void *ctx, int family, const uint8_t *addr);

struct proxy_cfg {
	bool enabled;
	bool answer_unresolved; /* answer for OTHER_PREFIX addresses without resolving first */
	bool defend_dad;        /* answer DAD NS / ARP probes for addresses on the other side */
	bool router;            /* NA router flag */
};

struct proxy_link {
	bool ib;                /* IPoIB (20-octet addresses) or Ethernet (6) */
	const uint8_t *lladdr;  /* the gateway's link address on this side */
	const uint8_t *ip6_src; /* our address on this side for NA sources; NULL: the target */
};

struct proxy_env {
	const struct proxy_cfg *cfg;
	const struct proxy_link *link; /* side A: where the request came in */
	proxy_lookup_fn lookup;
	void *ctx;
	struct icmp_ratelimit *rl; /* NULL: no limit */
	uint64_t now_ns;
};

enum proxy_action {
	PROXY_IGNORE,
	PROXY_ANSWER,
	PROXY_RESOLVE,
};

enum proxy_reason {
	PROXY_R_ANSWERED = 0,
	PROXY_R_RESOLVE, /* not a drop: resolution on the other side first */
	PROXY_R_DISABLED,
	PROXY_R_NOT_REQUEST,       /* reply / NA / RS / RA / redirect: not proxied */
	PROXY_R_GRATUITOUS,        /* announce, gratuitous reply: never proxied back */
	PROXY_R_FROM_OURSELVES,    /* sender link address is ours: loop */
	PROXY_R_SENDER_OTHER_SIDE, /* sender IP lives on the other side: loop or crossing */
	PROXY_R_TARGET_SELF,
	PROXY_R_TARGET_ASKER_SIDE,
	PROXY_R_TARGET_UNKNOWN,
	PROXY_R_DAD_NOT_DEFENDED, /* NS from :: / ARP probe, defend_dad off */
	PROXY_R_RATE_LIMITED,
	PROXY_R_NO_SPACE,
	PROXY_R_WRONG_LINK, /* request's link type is not this link's */
	PROXY_REASON_COUNT
};

const char *proxy_reason_name(enum proxy_reason r);

struct proxy_decision {
	enum proxy_action action;
	enum proxy_reason reason;
	size_t len; /* PROXY_ANSWER: the reply's length in out */
};

/* req from arp_parse on side A; frame_src: the link-layer source of the frame (NULL if
 * the caller has none). ANSWER writes the ARP reply (no link header) into out. */
struct proxy_decision proxy_arp(const struct proxy_env *env, const struct arp_pkt *req,
				const uint8_t *frame_src, uint8_t *out, size_t cap);
/* ns from nd_parse on side A. ANSWER writes the NA (a whole IPv6 packet) into out. */
struct proxy_decision proxy_nd(const struct proxy_env *env, const struct nd_msg *ns,
			       const uint8_t *frame_src, uint8_t *out, size_t cap);

/* Announce that addr (host order) is now reached through the gateway on this link:
 * gratuitous ARP (an announcement request; as_reply for a gratuitous reply). */
size_t proxy_announce_arp(const struct proxy_link *link, uint32_t addr, bool as_reply, uint8_t *out,
			  size_t cap);
/* Same for IPv6: an unsolicited NA to ff02::1 with override set. */
size_t proxy_announce_nd(const struct proxy_link *link, const uint8_t addr[16], bool router,
			 uint8_t *out, size_t cap);

#endif
