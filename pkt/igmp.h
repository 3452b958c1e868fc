/*
 * IGMP (RFC 1112 v1, RFC 2236 v2, RFC 3376 v3) as a multicast router receives and sends
 * it, prefix igmp_. Pure functions, no state:
 *
 *   igmp_parse        an IGMP message (the IPv4 payload): checksum over the whole
 *                     message, the type's length, queries (v1: 8 octets and max resp 0,
 *                     v2: 8 octets, v3: 12 + 4 * sources; 9..11 octets refused as RFC
 *                     3376 7.1 asks), reports and leaves naming a multicast group, v3
 *                     reports whose every group record (type 1..6, multicast group,
 *                     sources and auxiliary data) lies inside the message;
 *   igmp_parse_packet the same from a whole IPv4 packet: protocol 2, not a fragment,
 *                     TTL 1 (RFC 3376 4, RFC 2236 2: IGMP never leaves the link);
 *   igmp_record       the v3 report's records one by one (after igmp_parse said OK);
 *   igmp_rec_effect   what a record means to a router that forwards whole groups (no
 *                     source filtering): the group has a member, has none, or no change;
 *   igmp_build_query  a general or group-specific query (v2 or v3) as a whole IPv4
 *                     packet: TTL 1, the Router Alert option (RFC 2113), to 224.0.0.1
 *                     (general) or the group, checksums filled.
 *
 * Threads: any.
 */
#ifndef IBGW_PKT_IGMP_H
#define IBGW_PKT_IGMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IGMP_PROTO       2
#define IGMP_QUERY       0x11
#define IGMP_V1_REPORT   0x12
#define IGMP_V2_REPORT   0x16
#define IGMP_V2_LEAVE    0x17
#define IGMP_V3_REPORT   0x22
#define IGMP_HDR_LEN     8
#define IGMP_V3_QUERY    12          /* v3 query without sources */
#define IGMP_ALL_HOSTS   0xe0000001u /* 224.0.0.1 */
#define IGMP_ALL_ROUTERS 0xe0000002u /* 224.0.0.2: v2 leaves */
#define IGMP_V3_ROUTERS  0xe0000016u /* 224.0.0.22: v3 reports */
/* Query packet built: IPv4 header with Router Alert (24) + v3 query (12). */
#define IGMP_QUERY_PKT_MAX 36

/* v3 group record types (RFC 3376 4.2.12). */
enum igmp_rec_type {
	IGMP_MODE_IS_INCLUDE = 1,
	IGMP_MODE_IS_EXCLUDE = 2,
	IGMP_CHANGE_TO_INCLUDE = 3,
	IGMP_CHANGE_TO_EXCLUDE = 4,
	IGMP_ALLOW_NEW_SOURCES = 5,
	IGMP_BLOCK_OLD_SOURCES = 6,
};

enum igmp_result {
	IGMP_OK = 0,
	IGMP_SHORT,           /* below 8 octets, or below its type's length */
	IGMP_BAD_CHECKSUM,    /* the message's checksum */
	IGMP_BAD_TYPE,        /* not one of the five types above */
	IGMP_BAD_QUERY_LEN,   /* a query of 9..11 octets (RFC 3376 7.1) */
	IGMP_BAD_GROUP,       /* a report/leave/record group not multicast, a query's neither
				 0 nor multicast */
	IGMP_TRUNCATED,       /* sources or records past the end of the message */
	IGMP_BAD_RECORD_TYPE, /* a v3 group record of type 0 or above 6 */
	IGMP_NOT_IGMP,        /* igmp_parse_packet: IPv4 invalid or protocol not 2 */
	IGMP_FRAGMENT,        /* igmp_parse_packet: a fragment */
	IGMP_BAD_TTL,         /* igmp_parse_packet: TTL not 1 */
	IGMP_RESULT_COUNT
};
/* Stable counter names ("ok", "short", "bad_checksum", ...). */
const char *igmp_result_name(enum igmp_result r);

struct igmp_msg {
	uint8_t type;
	uint8_t version; /* 1, 2 or 3: of the query or report; 2 for a leave */
	uint32_t group;  /* host order; a query's 0 is a general query; 0 for v3 reports */
	/* Queries: the maximum response time in tenths of a second (v1: 100, i.e. 10 s;
	 * v3's exponential code decoded), v3: S flag, QRV, QQIC decoded to seconds, sources. */
	uint32_t max_resp_ds;
	bool s_flag;
	uint8_t qrv;
	uint32_t qqi_s;
	uint16_t nsrc;
	/* v3 reports */
	uint16_t nrec;
	const uint8_t *msg; /* the message parsed */
	size_t len;
};

/* A group record of a v3 report (sources point into the message, 4 octets each). */
struct igmp_rec {
	uint8_t type;
	uint32_t group; /* host order */
	uint16_t nsrc;
	const uint8_t *src;
};

enum igmp_result igmp_parse(const uint8_t *p, size_t len, struct igmp_msg *out);
/* p: a whole IPv4 packet (len octets; what follows its total length is ignored). */
enum igmp_result igmp_parse_packet(const uint8_t *p, size_t len, uint32_t *src,
				   struct igmp_msg *out);
/* Record i (< m->nrec) of a v3 report that igmp_parse accepted. */
void igmp_record(const struct igmp_msg *m, unsigned i, struct igmp_rec *out);

enum igmp_effect {
	IGMP_EFFECT_NONE = 0, /* BLOCK_OLD_SOURCES: the group keeps what it had */
	IGMP_EFFECT_JOIN,     /* EXCLUDE (any sources), or INCLUDE / ALLOW with sources */
	IGMP_EFFECT_LEAVE,    /* INCLUDE with no source: nobody wants the group */
};
enum igmp_effect igmp_rec_effect(uint8_t type, uint16_t nsrc);

/* RFC 3376 4.1.1 / 4.1.7: the exponential code of Max Resp Code and QQIC. */
uint32_t igmp_code_decode(uint8_t code);
uint8_t igmp_code_encode(uint32_t value);

/* A query from src (host order) about group (0: general, to 224.0.0.1; else to the
 * group). version 2: 8 octets, max_resp_ds capped at 255; version 3: 12 octets, no
 * sources, qrv and qqi_s as given (QRV above 7 is sent as 0, as RFC 3376 4.1.6 says).
 * Returns the packet's length, 0 if cap < IGMP_QUERY_PKT_MAX or the version is neither. */
size_t igmp_build_query(uint8_t *out, size_t cap, uint32_t src, uint32_t group, int version,
			uint32_t max_resp_ds, uint8_t qrv, uint32_t qqi_s);

#endif
