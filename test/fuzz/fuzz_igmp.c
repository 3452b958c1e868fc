/*
 * libFuzzer harness for pkt/igmp: an input is parsed as an IGMP message and as a whole
 * IPv4 packet. What is accepted must hold what the parser says: every v3 group record
 * (its sources) inside the input, each record's type 1..6 and group multicast, a
 * report's or leave's group multicast, a query's group 0 or multicast and its sources
 * inside; the packet parse agrees with the message parse of its payload. A query rebuilt
 * from what was parsed parses back to the same fields (codes rounded as RFC 3376 4.1.1).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/igmp.h"
#include "pkt/ip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static void check_msg(const uint8_t *p, size_t len, const struct igmp_msg *m)
{
	check(m->msg == p && m->len == len);
	switch (m->type) {
	case IGMP_QUERY:
		check(m->group == 0 || ip4_is_multicast(m->group));
		check(m->version == 3 ? len >= 12u + 4u * m->nsrc : len == 8);
		break;
	case IGMP_V3_REPORT: {
		const uint8_t *end = p + len;

		for (unsigned i = 0; i < m->nrec; i++) {
			struct igmp_rec r;

			igmp_record(m, i, &r);
			check(r.type >= 1 && r.type <= 6 && ip4_is_multicast(r.group));
			check(r.src >= p + 16 && r.src + 4 * (size_t)r.nsrc <= end);
			check(igmp_rec_effect(r.type, r.nsrc) <= IGMP_EFFECT_LEAVE);
		}
		break;
	}
	default:
		check(m->type == IGMP_V1_REPORT || m->type == IGMP_V2_REPORT ||
		      m->type == IGMP_V2_LEAVE);
		check(ip4_is_multicast(m->group));
	}
}

static void one(const uint8_t *data, size_t size);

/* The input as it is, then with its checksums made right (the IPv4 header's and the
 * message's, as a message and as a packet whose total length is the input's), so that
 * the fuzzer reaches past them. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[4096];
	size_t hl;

	one(data, size);
	if (size < 4 || size > sizeof(fixed))
		return 0;
	memcpy(fixed, data, size);
	fixed[2] = fixed[3] = 0;
	ip_put16(fixed + 2, ip_csum(fixed, size));
	one(fixed, size);
	memcpy(fixed, data, size);
	hl = (fixed[0] & 15u) * 4u;
	if (size >= 20 && hl >= 20 && hl + 4 <= size) {
		size_t tot = size;

		ip_put16(fixed + 2, (uint16_t)size); /* the total length the input's */
		fixed[10] = fixed[11] = 0;
		ip_put16(fixed + 10, ip_csum(fixed, hl));
		if (tot >= hl + 4) {
			fixed[hl + 2] = fixed[hl + 3] = 0;
			ip_put16(fixed + hl + 2, ip_csum(fixed + hl, tot - hl));
		}
		one(fixed, size);
	}
	return 0;
}

static void one(const uint8_t *data, size_t size)
{
	struct igmp_msg m, m2;
	uint8_t q[IGMP_QUERY_PKT_MAX];
	uint32_t src, src2;
	size_t n;

	if (igmp_parse(data, size, &m) == IGMP_OK) {
		check_msg(data, size, &m);
		if (m.type == IGMP_QUERY && m.version >= 2) {
			n = igmp_build_query(q, sizeof(q), 0x0a000001, m.group, m.version,
					     m.max_resp_ds, m.qrv, m.qqi_s);
			check(n == (m.version == 3 ? 36u : 32u));
			check(igmp_parse_packet(q, n, &src2, &m2) == IGMP_OK);
			check(src2 == 0x0a000001 && m2.group == m.group && m2.version == m.version);
			check(m2.max_resp_ds == m.max_resp_ds && m2.qrv == m.qrv &&
			      m2.qqi_s == m.qqi_s);
		}
	}
	switch (igmp_parse_packet(data, size, &src, &m)) {
	case IGMP_NOT_IGMP:
	case IGMP_FRAGMENT:
	case IGMP_BAD_TTL:
		break;
	case IGMP_OK: {
		size_t hl = (data[0] & 15u) * 4u, tot = ip_be16(data + 2);

		check(data[9] == IGMP_PROTO && data[8] == 1 && src == ip_be32(data + 12));
		check(m.msg == data + hl && m.len == tot - hl);
		check_msg(data + hl, tot - hl, &m);
		break;
	}
	default: {
		size_t hl = (data[0] & 15u) * 4u, tot = ip_be16(data + 2);

		check(igmp_parse(data + hl, tot - hl, &m2) != IGMP_OK);
	}
	}
}
