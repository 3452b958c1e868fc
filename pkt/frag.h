/*
 * IPv4 fragmentation on the way out (RFC 791 3.2, RFC 1812 4.2.2.7), into buffers the
 * caller provides, and the decision between "fits", "fragment" and "send fragmentation
 * needed" (DF set, RFC 1191). IPv6 is never fragmented by a router (RFC 8200 5): the
 * caller sends Packet Too Big (pkt/icmp.h) when frag6_fits() says no.
 *
 * Fragments: every fragment but the last carries a multiple of 8 data octets; offsets
 * and MF continue those of the original (a fragment can be fragmented again; the last
 * piece keeps the original's MF); the first fragment carries every option, the others
 * only options whose copied flag (0x80) is set, padded with EOL to a 4-octet boundary;
 * each header checksum is computed afresh. Octets of the buffer past the total length
 * (link padding) are not copied.
 */
#ifndef IBGW_PKT_FRAG_H
#define IBGW_PKT_FRAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/ip.h"

enum frag_verdict {
	FRAG_FITS,   /* send as is */
	FRAG_SPLIT,  /* DF clear: frag4_fragment() */
	FRAG_NEEDED, /* DF set: ICMP dest unreachable / fragmentation needed with the MTU */
};

/* info from ip4_validate. */
static inline enum frag_verdict frag4_decide(const struct ip4_info *info, unsigned mtu)
{
	if (info->tot_len <= mtu)
		return FRAG_FITS;
	return info->df ? FRAG_NEEDED : FRAG_SPLIT;
}

static inline bool frag6_fits(uint32_t pkt_len, unsigned mtu)
{
	return pkt_len <= mtu;
}

enum frag_reason {
	FRAG_OK = 0,
	FRAG_BAD_PACKET,    /* input failed ip4_validate (see ip_reason *ipwhy) */
	FRAG_DF_SET,        /* caller should have sent frag needed */
	FRAG_MTU_TOO_SMALL, /* mtu < 68, or no room for 8 data octets after the header */
	FRAG_TOO_MANY,      /* more fragments needed than buffers given */
	FRAG_BUF_TOO_SMALL, /* a buffer is smaller than the fragment meant for it */
	FRAG_REASON_COUNT
};

const char *frag_reason_name(enum frag_reason r);

struct frag4_piece {
	uint8_t *buf;
	size_t cap;
	size_t len; /* set by frag4_fragment */
};

/* How many fragments frag4_fragment would make (0 if it would refuse). */
size_t frag4_count(const uint8_t *pkt, size_t len, unsigned mtu);

/* Split pkt into pieces[0..*n) of at most mtu octets each. Fragments a packet that fits
 * too (one piece, a copy). pieces[i].buf must not overlap pkt. */
enum frag_reason frag4_fragment(const uint8_t *pkt, size_t len, unsigned mtu,
				struct frag4_piece *pieces, size_t npieces, size_t *n,
				enum ip_reason *ipwhy);

#endif
