/*
 * MLDv1/v2 messages parsed and queries built (see mld.h).
 *
 * Threads: any (pure functions).
 */
#include <string.h>

#include "pkt/ip.h"
#include "pkt/mld.h"

const uint8_t mld_all_nodes[16] = { 0xff, 0x02, [15] = 1 };
const uint8_t mld_all_routers[16] = { 0xff, 0x02, [15] = 2 };
const uint8_t mld_v2_routers[16] = { 0xff, 0x02, [15] = 0x16 };

static const char *const result_names[MLD_RESULT_COUNT] = {
	[MLD_OK] = "ok",
	[MLD_SHORT] = "short",
	[MLD_BAD_CHECKSUM] = "bad_checksum",
	[MLD_BAD_TYPE] = "bad_type",
	[MLD_BAD_QUERY_LEN] = "bad_query_len",
	[MLD_BAD_GROUP] = "bad_group",
	[MLD_TRUNCATED] = "truncated",
	[MLD_BAD_RECORD_TYPE] = "bad_record_type",
	[MLD_NOT_MLD] = "not_mld",
	[MLD_FRAGMENT] = "fragment",
	[MLD_BAD_HOP_LIMIT] = "bad_hop_limit",
	[MLD_BAD_SOURCE] = "bad_source",
	[MLD_UNSPEC_SRC] = "unspecified_source",
};

const char *mld_result_name(enum mld_result r)
{
	return (unsigned)r < MLD_RESULT_COUNT ? result_names[r] : "unknown";
}

uint32_t mld_code_decode(uint16_t code)
{
	if (code < 32768)
		return code;
	return (uint32_t)((code & 0x0fff) | 0x1000) << (((code >> 12) & 7) + 3);
}

uint16_t mld_code_encode(uint32_t v)
{
	if (v < 32768)
		return (uint16_t)v;
	for (unsigned exp = 0; exp < 8; exp++) {
		uint32_t mant = v >> (exp + 3);

		if (mant < 0x2000)
			return (uint16_t)(0x8000 | exp << 12 | (mant & 0x0fff));
	}
	return 0xffff; /* the largest: 8387584 ms */
}

static enum mld_result check_records(const uint8_t *p, size_t len, unsigned nrec)
{
	size_t off = 8;

	for (unsigned i = 0; i < nrec; i++) {
		size_t n;

		if (len - off < 20)
			return MLD_TRUNCATED;
		if (p[off] < IGMP_MODE_IS_INCLUDE || p[off] > IGMP_BLOCK_OLD_SOURCES)
			return MLD_BAD_RECORD_TYPE;
		if (!ip6_is_multicast(p + off + 4))
			return MLD_BAD_GROUP;
		n = 20 + 16 * (size_t)ip_be16(p + off + 2) + 4 * (size_t)p[off + 1];
		if (len - off < n)
			return MLD_TRUNCATED;
		off += n;
	}
	return MLD_OK;
}

enum mld_result mld_parse(const uint8_t *p, size_t len, const uint8_t src[16],
			  const uint8_t dst[16], struct mld_msg *out)
{
	memset(out, 0, sizeof(*out));
	if (len < 8)
		return MLD_SHORT;
	if (ip_csum_fold(
		ip_csum_add(ip6_pseudo_sum(src, dst, (uint32_t)len, MLD_ICMPV6), p, len)) != 0xffff)
		return MLD_BAD_CHECKSUM;
	out->type = p[0];
	out->msg = p;
	out->len = len;
	switch (p[0]) {
	case MLD_QUERY:
		if (len < MLD_V1_LEN)
			return MLD_SHORT;
		if (!ip6_is_unspecified(p + 8) && !ip6_is_multicast(p + 8))
			return MLD_BAD_GROUP;
		memcpy(out->group, p + 8, 16);
		if (len == MLD_V1_LEN) {
			out->version = 1;
			out->max_resp_ms = ip_be16(p + 4);
			return MLD_OK;
		}
		if (len < MLD_V2_QUERY)
			return MLD_BAD_QUERY_LEN;
		out->version = 2;
		out->max_resp_ms = mld_code_decode(ip_be16(p + 4));
		out->s_flag = (p[24] & 0x08) != 0;
		out->qrv = p[24] & 0x07;
		out->qqi_s = igmp_code_decode(p[25]);
		out->nsrc = ip_be16(p + 26);
		if ((len - MLD_V2_QUERY) / 16 < out->nsrc)
			return MLD_TRUNCATED;
		return MLD_OK;
	case MLD_V1_REPORT:
	case MLD_V1_DONE:
		if (len < MLD_V1_LEN)
			return MLD_SHORT;
		if (!ip6_is_multicast(p + 8))
			return MLD_BAD_GROUP;
		memcpy(out->group, p + 8, 16);
		out->version = 1;
		return MLD_OK;
	case MLD_V2_REPORT:
		out->version = 2;
		out->nrec = ip_be16(p + 6);
		return check_records(p, len, out->nrec);
	default:
		return MLD_BAD_TYPE;
	}
}

static bool is_mld_type(uint8_t t)
{
	return t == MLD_QUERY || t == MLD_V1_REPORT || t == MLD_V1_DONE || t == MLD_V2_REPORT;
}

enum mld_result mld_parse_packet(const uint8_t *p, size_t len, const uint8_t **src,
				 struct mld_msg *out)
{
	struct ip6_info ii;
	size_t ml;
	enum mld_result r;

	memset(out, 0, sizeof(*out));
	if (ip6_validate(p, len, &ii) != IP_OK || ii.proto != MLD_ICMPV6)
		return MLD_NOT_MLD;
	if (ii.is_frag)
		return MLD_FRAGMENT;
	ml = ii.pkt_len - ii.l4_off;
	if (ml == 0 || !is_mld_type(p[ii.l4_off]))
		return MLD_NOT_MLD;
	if (ii.hop_limit != 1)
		return MLD_BAD_HOP_LIMIT;
	*src = p + 8;
	if (!ip6_is_link_local(p + 8) &&
	    !(ip6_is_unspecified(p + 8) && p[ii.l4_off] == MLD_V2_REPORT))
		return MLD_BAD_SOURCE;
	r = mld_parse(p + ii.l4_off, ml, p + 8, p + 24, out);
	if (r == MLD_OK && ip6_is_unspecified(p + 8))
		return MLD_UNSPEC_SRC;
	return r;
}

void mld_record(const struct mld_msg *m, unsigned i, struct mld_rec *out)
{
	const uint8_t *p = m->msg + 8;

	for (;;) {
		out->type = p[0];
		out->nsrc = ip_be16(p + 2);
		memcpy(out->group, p + 4, 16);
		out->src = p + 20;
		if (!i--)
			return;
		p += 20 + 16 * (size_t)out->nsrc + 4 * (size_t)p[1];
	}
}

size_t mld_build_query(uint8_t *out, size_t cap, const uint8_t src[16], const uint8_t *group,
		       int version, uint32_t max_resp_ms, uint8_t qrv, uint32_t qqi_s)
{
	static const uint8_t zero[16];
	size_t ml = version == 2 ? MLD_V2_QUERY : MLD_V1_LEN, pl = 8 + ml;
	uint8_t *m = out + 48;
	const uint8_t *dst;

	if (cap < MLD_QUERY_PKT_MAX || (version != 1 && version != 2))
		return 0;
	if (!group)
		group = zero;
	dst = ip6_is_unspecified(group) ? mld_all_nodes : group;
	memset(out, 0, 48 + ml);
	out[0] = 0x60;
	ip_put16(out + 4, (uint16_t)pl);
	out[6] = 0; /* hop-by-hop */
	out[7] = 1;
	memcpy(out + 8, src, 16);
	memcpy(out + 24, dst, 16);
	/* hop-by-hop: next header ICMPv6, length 0 (8 octets), Router Alert (5, 2, value 0:
	 * MLD), PadN of 0 data octets (1, 0) */
	out[40] = MLD_ICMPV6;
	out[42] = 5;
	out[43] = 2;
	out[46] = 1;
	m[0] = MLD_QUERY;
	memcpy(m + 8, group, 16);
	if (version == 1) {
		ip_put16(m + 4, (uint16_t)(max_resp_ms > 0xffff ? 0xffff : max_resp_ms));
	} else {
		ip_put16(m + 4, mld_code_encode(max_resp_ms));
		m[24] = qrv > 7 ? 0 : qrv;
		m[25] = igmp_code_encode(qqi_s);
	}
	ip_put16(m + 2, (uint16_t)~ip_csum_fold(ip_csum_add(
			    ip6_pseudo_sum(src, dst, (uint32_t)ml, MLD_ICMPV6), m, ml)));
	return 48 + ml;
}
