/*
 * libFuzzer harness for pkt/mld: an input is parsed as a whole IPv6 packet (hop-by-hop
 * Router Alert and the other extension headers walked) and, when it is one, its ICMPv6
 * payload as a message. What is accepted must hold what the parser says: every v2
 * record (sources, auxiliary data) inside the input, types 1..6 and multicast
 * addresses, v1 messages 24 octets, a query's address :: or multicast and its sources
 * inside; hop limit 1, a link-local source (or :: for a v2 report, named apart). A
 * query rebuilt from what was parsed parses back to the same fields.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/ip.h"
#include "pkt/mld.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static void check_msg(const uint8_t *p, size_t len, const struct mld_msg *m)
{
	check(m->msg == p && m->len == len);
	switch (m->type) {
	case MLD_QUERY:
		check(ip6_is_unspecified(m->group) || ip6_is_multicast(m->group));
		check(m->version == 2 ? len >= 28u + 16u * m->nsrc : len == 24);
		break;
	case MLD_V2_REPORT:
		for (unsigned i = 0; i < m->nrec; i++) {
			struct mld_rec r;

			mld_record(m, i, &r);
			check(r.type >= 1 && r.type <= 6 && ip6_is_multicast(r.group));
			check(r.src >= p + 28 && r.src + 16 * (size_t)r.nsrc <= p + len);
		}
		break;
	default:
		check(m->type == MLD_V1_REPORT || m->type == MLD_V1_DONE);
		check(len >= 24 && ip6_is_multicast(m->group));
	}
}

static void one(const uint8_t *data, size_t size);

/* The input as it is, then with its ICMPv6 checksum made right (when it is an IPv6
 * packet with an upper layer), so that the fuzzer reaches past it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[4096];
	struct ip6_info ii;
	size_t ml;

	one(data, size);
	if (size > sizeof(fixed) || ip6_validate(data, size, &ii) != IP_OK ||
	    ii.pkt_len < ii.l4_off + 4u)
		return 0;
	memcpy(fixed, data, size);
	ml = ii.pkt_len - ii.l4_off;
	fixed[ii.l4_off + 2] = fixed[ii.l4_off + 3] = 0;
	ip_put16(fixed + ii.l4_off + 2,
		 (uint16_t)~ip_csum_fold(
		     ip_csum_add(ip6_pseudo_sum(fixed + 8, fixed + 24, (uint32_t)ml, MLD_ICMPV6),
				 fixed + ii.l4_off, ml)));
	one(fixed, size);
	return 0;
}

static void one(const uint8_t *data, size_t size)
{
	static const uint8_t ll[16] = { 0xfe, 0x80, [15] = 9 };
	struct mld_msg m, m2;
	struct ip6_info ii;
	uint8_t q[MLD_QUERY_PKT_MAX];
	const uint8_t *src, *src2;
	enum mld_result r = mld_parse_packet(data, size, &src, &m);
	size_t n;

	if (r == MLD_NOT_MLD)
		return;
	check(ip6_validate(data, size, &ii) == IP_OK && ii.proto == MLD_ICMPV6);
	if (r == MLD_FRAGMENT) {
		check(ii.is_frag);
		return;
	}
	if (r == MLD_BAD_HOP_LIMIT) {
		check(data[7] != 1);
		return;
	}
	check(src == data + 8);
	if (r == MLD_BAD_SOURCE) {
		check(!ip6_is_link_local(src));
		return;
	}
	if (r == MLD_OK || r == MLD_UNSPEC_SRC) {
		check(r == MLD_OK ? ip6_is_link_local(src)
				  : ip6_is_unspecified(src) && m.type == MLD_V2_REPORT);
		check_msg(data + ii.l4_off, ii.pkt_len - ii.l4_off, &m);
		if (m.type == MLD_QUERY) {
			n = mld_build_query(q, sizeof(q), ll, m.group, m.version, m.max_resp_ms,
					    m.qrv, m.qqi_s);
			check(n == (m.version == 2 ? 76u : 72u));
			check(mld_parse_packet(q, n, &src2, &m2) == MLD_OK);
			check(!memcmp(m2.group, m.group, 16) && m2.version == m.version);
			check(m2.max_resp_ms == m.max_resp_ms && m2.qrv == m.qrv &&
			      m2.qqi_s == m.qqi_s);
		}
	} else {
		check(mld_parse(data + ii.l4_off, ii.pkt_len - ii.l4_off, data + 8, data + 24,
				&m2) == r);
	}
}
