/*
 * MLD (RFC 2710 v1, RFC 3810 v2) as a multicast router receives and sends it, prefix
 * mld_. Pure functions, no state:
 *
 *   mld_parse         an MLD message (the ICMPv6 message, from the IPv6 packet's source
 *                     and destination for the checksum): the ICMPv6 checksum, the
 *                     type's length (v1 messages 24 octets, v2 queries 28 + 16 *
 *                     sources, 25..27 refused as RFC 3810 8.1 asks), reports and dones
 *                     naming a multicast address, v2 reports whose every record (type
 *                     1..6, multicast address, sources, auxiliary data) lies inside;
 *   mld_parse_packet  the same from a whole IPv6 packet: ICMPv6 (after the
 *                     extension headers, the hop-by-hop Router Alert among them), not a
 *                     fragment, hop limit 1, from a link-local source (RFC 3810 5.1.14
 *                     and 5.2.13; RFC 2710 3), or from :: for a v2 report (RFC 3810 5.2.13:
 *                     a router takes it but ignores it: MLD_UNSPEC_SRC);
 *   mld_record        the v2 report's records one by one;
 *   mld_rec_effect    as igmp_rec_effect (the record types are the same);
 *   mld_build_query   a general or address-specific query (v1 or v2), a whole IPv6
 *                     packet: hop limit 1, hop-by-hop Router Alert (RFC 2711, value 0),
 *                     to ff02::1 (general) or the address, checksum filled.
 *
 * Threads: any.
 */
#ifndef IBGW_PKT_MLD_H
#define IBGW_PKT_MLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pkt/igmp.h"

#define MLD_QUERY     130
#define MLD_V1_REPORT 131
#define MLD_V1_DONE   132
#define MLD_V2_REPORT 143
#define MLD_V1_LEN    24
#define MLD_V2_QUERY  28
#define MLD_ICMPV6    58
/* Query packet built: IPv6 header (40) + hop-by-hop Router Alert (8) + v2 query (28). */
#define MLD_QUERY_PKT_MAX 76

/* ff02::1, ff02::2 (v1 dones), ff02::16 (v2 reports). */
extern const uint8_t mld_all_nodes[16], mld_all_routers[16], mld_v2_routers[16];

enum mld_result {
	MLD_OK = 0,
	MLD_SHORT,           /* below 8 octets, or below its type's length */
	MLD_BAD_CHECKSUM,    /* the ICMPv6 checksum */
	MLD_BAD_TYPE,        /* not one of the four MLD types */
	MLD_BAD_QUERY_LEN,   /* a query of 25..27 octets (RFC 3810 8.1) */
	MLD_BAD_GROUP,       /* a report/done/record address not multicast, a query's neither
				:: nor multicast */
	MLD_TRUNCATED,       /* sources or records past the end of the message */
	MLD_BAD_RECORD_TYPE, /* a v2 record of type 0 or above 6 */
	MLD_NOT_MLD,         /* mld_parse_packet: IPv6 invalid or not ICMPv6 */
	MLD_FRAGMENT,        /* mld_parse_packet: in a fragment */
	MLD_BAD_HOP_LIMIT,   /* mld_parse_packet: hop limit not 1 */
	MLD_BAD_SOURCE,      /* mld_parse_packet: source neither link-local nor (v2 report) :: */
	MLD_UNSPEC_SRC, /* mld_parse_packet: a v2 report from :: (valid; a router ignores it) */
	MLD_RESULT_COUNT
};
const char *mld_result_name(enum mld_result r);

struct mld_msg {
	uint8_t type;
	uint8_t version;      /* 1 or 2: of the query or report; 1 for a done */
	uint8_t group[16];    /* the multicast address (a query's :: is a general query); zero
			      for v2 reports */
	uint32_t max_resp_ms; /* queries: maximum response delay, v2's code decoded */
	bool s_flag;
	uint8_t qrv;
	uint32_t qqi_s;
	uint16_t nsrc;
	uint16_t nrec; /* v2 reports */
	const uint8_t *msg;
	size_t len;
};

struct mld_rec {
	uint8_t type;
	uint8_t group[16];
	uint16_t nsrc;
	const uint8_t *src; /* 16 octets each, pointing into the message */
};

enum mld_result mld_parse(const uint8_t *p, size_t len, const uint8_t src[16],
			  const uint8_t dst[16], struct mld_msg *out);
/* p: a whole IPv6 packet. *src: its source address (a pointer into p). */
enum mld_result mld_parse_packet(const uint8_t *p, size_t len, const uint8_t **src,
				 struct mld_msg *out);
void mld_record(const struct mld_msg *m, unsigned i, struct mld_rec *out);

static inline enum igmp_effect mld_rec_effect(uint8_t type, uint16_t nsrc)
{
	return igmp_rec_effect(type, nsrc);
}

/* RFC 3810 5.1.3: Maximum Response Code (16 bits) and QQIC (8 bits, as IGMPv3's). */
uint32_t mld_code_decode(uint16_t code);
uint16_t mld_code_encode(uint32_t value);

/* A query from src (link-local) about group (NULL or ::: general, to ff02::1). version 1:
 * 24 octets (max_resp_ms capped at 65535); 2: 28 octets, no sources, qrv, qqi_s.
 * Returns the packet's length, 0 if cap < MLD_QUERY_PKT_MAX or the version is neither. */
size_t mld_build_query(uint8_t *out, size_t cap, const uint8_t src[16], const uint8_t *group,
		       int version, uint32_t max_resp_ms, uint8_t qrv, uint32_t qqi_s);

#endif
