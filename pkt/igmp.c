/*
 * IGMP v1/v2/v3 messages parsed and queries built (see igmp.h).
 *
 * Threads: any (pure functions).
 */
#include <string.h>

#include "pkt/igmp.h"
#include "pkt/ip.h"

static const char *const result_names[IGMP_RESULT_COUNT] = {
	[IGMP_OK] = "ok",
	[IGMP_SHORT] = "short",
	[IGMP_BAD_CHECKSUM] = "bad_checksum",
	[IGMP_BAD_TYPE] = "bad_type",
	[IGMP_BAD_QUERY_LEN] = "bad_query_len",
	[IGMP_BAD_GROUP] = "bad_group",
	[IGMP_TRUNCATED] = "truncated",
	[IGMP_BAD_RECORD_TYPE] = "bad_record_type",
	[IGMP_NOT_IGMP] = "not_igmp",
	[IGMP_FRAGMENT] = "fragment",
	[IGMP_BAD_TTL] = "bad_ttl",
};

const char *igmp_result_name(enum igmp_result r)
{
	return (unsigned)r < IGMP_RESULT_COUNT ? result_names[r] : "unknown";
}

uint32_t igmp_code_decode(uint8_t code)
{
	if (code < 128)
		return code;
	return (uint32_t)((code & 0x0f) | 0x10) << (((code >> 4) & 7) + 3);
}

uint8_t igmp_code_encode(uint32_t v)
{
	if (v < 128)
		return (uint8_t)v;
	for (unsigned exp = 0; exp < 8; exp++) {
		uint32_t mant = v >> (exp + 3);

		if (mant < 32)
			return (uint8_t)(0x80 | exp << 4 | (mant & 0x0f));
	}
	return 0xff; /* the largest: 31744 */
}

/* Each v3 group record: 8 octets, 4 per source, 4 per auxiliary word. */
static enum igmp_result check_records(const uint8_t *p, size_t len, unsigned nrec)
{
	size_t off = IGMP_HDR_LEN;

	for (unsigned i = 0; i < nrec; i++) {
		size_t n;

		if (len - off < 8)
			return IGMP_TRUNCATED;
		if (p[off] < IGMP_MODE_IS_INCLUDE || p[off] > IGMP_BLOCK_OLD_SOURCES)
			return IGMP_BAD_RECORD_TYPE;
		if (!ip4_is_multicast(ip_be32(p + off + 4)))
			return IGMP_BAD_GROUP;
		n = 8 + 4 * (size_t)ip_be16(p + off + 2) + 4 * (size_t)p[off + 1];
		if (len - off < n)
			return IGMP_TRUNCATED;
		off += n;
	}
	return IGMP_OK;
}

enum igmp_result igmp_parse(const uint8_t *p, size_t len, struct igmp_msg *out)
{
	uint32_t group;

	memset(out, 0, sizeof(*out));
	if (len < IGMP_HDR_LEN)
		return IGMP_SHORT;
	if (ip_csum_fold(ip_csum_add(0, p, len)) != 0xffff)
		return IGMP_BAD_CHECKSUM;
	out->type = p[0];
	out->msg = p;
	out->len = len;
	group = ip_be32(p + 4);
	switch (p[0]) {
	case IGMP_QUERY:
		if (group && !ip4_is_multicast(group))
			return IGMP_BAD_GROUP;
		out->group = group;
		if (len == IGMP_HDR_LEN) {
			out->version = p[1] ? 2 : 1;
			out->max_resp_ds = p[1] ? p[1] : 100;
			return IGMP_OK;
		}
		if (len < IGMP_V3_QUERY)
			return IGMP_BAD_QUERY_LEN;
		out->version = 3;
		out->max_resp_ds = igmp_code_decode(p[1]);
		out->s_flag = (p[8] & 0x08) != 0;
		out->qrv = p[8] & 0x07;
		out->qqi_s = igmp_code_decode(p[9]);
		out->nsrc = ip_be16(p + 10);
		if ((len - IGMP_V3_QUERY) / 4 < out->nsrc)
			return IGMP_TRUNCATED;
		return IGMP_OK;
	case IGMP_V1_REPORT:
	case IGMP_V2_REPORT:
	case IGMP_V2_LEAVE:
		if (!ip4_is_multicast(group))
			return IGMP_BAD_GROUP;
		out->group = group;
		out->version = p[0] == IGMP_V1_REPORT ? 1 : 2;
		return IGMP_OK;
	case IGMP_V3_REPORT:
		out->version = 3;
		out->nrec = ip_be16(p + 6);
		return check_records(p, len, out->nrec);
	default:
		return IGMP_BAD_TYPE;
	}
}

enum igmp_result igmp_parse_packet(const uint8_t *p, size_t len, uint32_t *src,
				   struct igmp_msg *out)
{
	struct ip4_info ii;

	memset(out, 0, sizeof(*out));
	if (ip4_validate(p, len, &ii) != IP_OK || ii.proto != IGMP_PROTO)
		return IGMP_NOT_IGMP;
	if (ii.mf || ii.frag_off)
		return IGMP_FRAGMENT;
	if (ii.ttl != 1)
		return IGMP_BAD_TTL;
	*src = ii.src;
	return igmp_parse(p + ii.hdr_len, ii.tot_len - ii.hdr_len, out);
}

void igmp_record(const struct igmp_msg *m, unsigned i, struct igmp_rec *out)
{
	const uint8_t *p = m->msg + IGMP_HDR_LEN;

	for (;;) {
		out->type = p[0];
		out->nsrc = ip_be16(p + 2);
		out->group = ip_be32(p + 4);
		out->src = p + 8;
		if (!i--)
			return;
		p += 8 + 4 * (size_t)out->nsrc + 4 * (size_t)p[1];
	}
}

enum igmp_effect igmp_rec_effect(uint8_t type, uint16_t nsrc)
{
	switch (type) {
	case IGMP_MODE_IS_EXCLUDE:
	case IGMP_CHANGE_TO_EXCLUDE:
		return IGMP_EFFECT_JOIN;
	case IGMP_MODE_IS_INCLUDE:
	case IGMP_CHANGE_TO_INCLUDE:
		return nsrc ? IGMP_EFFECT_JOIN : IGMP_EFFECT_LEAVE;
	case IGMP_ALLOW_NEW_SOURCES:
		return nsrc ? IGMP_EFFECT_JOIN : IGMP_EFFECT_NONE;
	default:
		return IGMP_EFFECT_NONE;
	}
}

size_t igmp_build_query(uint8_t *out, size_t cap, uint32_t src, uint32_t group, int version,
			uint32_t max_resp_ds, uint8_t qrv, uint32_t qqi_s)
{
	size_t ml = version == 3 ? IGMP_V3_QUERY : IGMP_HDR_LEN, tot = 24 + ml;
	uint8_t *m = out + 24;

	if (cap < IGMP_QUERY_PKT_MAX || (version != 2 && version != 3))
		return 0;
	memset(out, 0, tot);
	out[0] = 0x46; /* IHL 6: the Router Alert option */
	ip_put16(out + 2, (uint16_t)tot);
	out[8] = 1;
	out[9] = IGMP_PROTO;
	ip_put32(out + 12, src);
	ip_put32(out + 16, group ? group : IGMP_ALL_HOSTS);
	out[20] = 0x94; /* Router Alert, copied, length 4, value 0 */
	out[21] = 4;
	ip_put16(out + 10, ip_csum(out, 24));
	m[0] = IGMP_QUERY;
	ip_put32(m + 4, group);
	if (version == 2) {
		m[1] = (uint8_t)(max_resp_ds > 255 ? 255 : max_resp_ds);
	} else {
		m[1] = igmp_code_encode(max_resp_ds);
		m[8] = qrv > 7 ? 0 : qrv;
		m[9] = igmp_code_encode(qqi_s);
	}
	ip_put16(m + 2, ip_csum(m, ml));
	return tot;
}
