/*
 * pkt/igmp and pkt/mld: what the Linux kernel (6.x, on a veth) sends when a socket
 * joins and leaves 239.1.2.3 and ff0e::1:2 -- IGMPv3 and MLDv2 reports, IGMPv2 and
 * MLDv1 with force_igmp_version=2 / force_mld_version=1, an MLDv2 report from :: during
 * DAD -- parsed to the records a router acts on; each refusal with its exact reason
 * (checksums recomputed after each change, so the reason tested is the one named);
 * queries built and parsed back, their layout octet by octet; the exponential codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/igmp.h"
#include "pkt/ip.h"
#include "pkt/mld.h"

/* Captured on a veth (Ethernet header removed). */
static const uint8_t igmp3_join[] = {
	0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0xf9, 0x95, 0x0a, 0x63,
	0x00, 0x01, 0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xe8, 0xf9,
	0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xef, 0x01, 0x02, 0x03,
};
static const uint8_t igmp3_leave[] = {
	0x46, 0xc0, 0x00, 0x28, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0xf9, 0x95, 0x0a, 0x63,
	0x00, 0x01, 0xe0, 0x00, 0x00, 0x16, 0x94, 0x04, 0x00, 0x00, 0x22, 0x00, 0xe9, 0xf9,
	0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00, 0xef, 0x01, 0x02, 0x03,
};
static const uint8_t igmp2_report[] = {
	0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0xe8,
	0xaf, 0x0a, 0x63, 0x00, 0x01, 0xef, 0x01, 0x02, 0x03, 0x94, 0x04,
	0x00, 0x00, 0x16, 0x00, 0xf8, 0xfa, 0xef, 0x01, 0x02, 0x03,
};
static const uint8_t igmp2_leave[] = {
	0x46, 0xc0, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x01, 0x02, 0xf9,
	0xb1, 0x0a, 0x63, 0x00, 0x01, 0xe0, 0x00, 0x00, 0x02, 0x94, 0x04,
	0x00, 0x00, 0x17, 0x00, 0xf7, 0xfa, 0xef, 0x01, 0x02, 0x03,
};
static const uint8_t mld2_join[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x64, 0x66, 0x6a, 0xff, 0xfe, 0xe3, 0xe1, 0xdc, 0xff, 0x02,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x16, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x8f, 0x00, 0xbf, 0xd5,
	0x00, 0x00, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02,
};
static const uint8_t mld2_leave[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x24, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x64, 0x66, 0x6a, 0xff, 0xfe, 0xe3, 0xe1, 0xdc, 0xff, 0x02,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x16, 0x3a, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x8f, 0x00, 0xc0, 0xd5,
	0x00, 0x00, 0x00, 0x01, 0x03, 0x00, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02,
};
static const uint8_t mld1_report[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x64, 0x66, 0x6a, 0xff, 0xfe, 0xe3, 0xe1, 0xdc, 0xff, 0x0e, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x3a, 0x00, 0x05, 0x02, 0x00,
	0x00, 0x01, 0x00, 0x83, 0x00, 0xcf, 0xe1, 0x00, 0x00, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02,
};
static const uint8_t mld1_done[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x64, 0x66, 0x6a, 0xff, 0xfe, 0xe3, 0xe1, 0xdc, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x3a, 0x00, 0x05, 0x02, 0x00,
	0x00, 0x01, 0x00, 0x84, 0x00, 0xce, 0xee, 0x00, 0x00, 0x00, 0x00, 0xff, 0x0e, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02,
};
static const uint8_t mld2_dad[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x38, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x16, 0x3a, 0x00,
	0x05, 0x02, 0x00, 0x00, 0x01, 0x00, 0x8f, 0x00, 0x9f, 0x3a, 0x00, 0x00, 0x00, 0x02,
	0x04, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x01, 0xff, 0x00, 0xcc, 0xcd, 0x04, 0x00, 0x00, 0x00, 0xff, 0x02, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6a,
};

/* The IGMP checksum at igmp (len octets) recomputed. */
static void igmp_fix(uint8_t *igmp, size_t len)
{
	igmp[2] = igmp[3] = 0;
	ip_put16(igmp + 2, ip_csum(igmp, len));
}

/* The ICMPv6 checksum of an MLD message at p + off recomputed (the packet's addresses). */
static void mld_fix(uint8_t *p, size_t off)
{
	size_t ml = 40 + ip_be16(p + 4) - off;

	p[off + 2] = p[off + 3] = 0;
	ip_put16(p + off + 2, (uint16_t)~ip_csum_fold(ip_csum_add(
				  ip6_pseudo_sum(p + 8, p + 24, (uint32_t)ml, 58), p + off, ml)));
}

static void test_igmp_linux(void **state)
{
	struct igmp_msg m;
	struct igmp_rec r;
	uint32_t src = 0;

	(void)state;
	assert_int_equal(igmp_parse_packet(igmp3_join, sizeof(igmp3_join), &src, &m), IGMP_OK);
	assert_int_equal(src, 0x0a630001);
	assert_int_equal(m.type, IGMP_V3_REPORT);
	assert_int_equal(m.version, 3);
	assert_int_equal(m.nrec, 1);
	igmp_record(&m, 0, &r);
	assert_int_equal(r.type, IGMP_CHANGE_TO_EXCLUDE);
	assert_int_equal(r.group, 0xef010203);
	assert_int_equal(r.nsrc, 0);
	assert_int_equal(igmp_rec_effect(r.type, r.nsrc), IGMP_EFFECT_JOIN);
	assert_int_equal(igmp_parse_packet(igmp3_leave, sizeof(igmp3_leave), &src, &m), IGMP_OK);
	igmp_record(&m, 0, &r);
	assert_int_equal(r.type, IGMP_CHANGE_TO_INCLUDE);
	assert_int_equal(igmp_rec_effect(r.type, r.nsrc), IGMP_EFFECT_LEAVE);
	assert_int_equal(igmp_parse_packet(igmp2_report, sizeof(igmp2_report), &src, &m), IGMP_OK);
	assert_int_equal(m.type, IGMP_V2_REPORT);
	assert_int_equal(m.version, 2);
	assert_int_equal(m.group, 0xef010203);
	assert_int_equal(igmp_parse_packet(igmp2_leave, sizeof(igmp2_leave), &src, &m), IGMP_OK);
	assert_int_equal(m.type, IGMP_V2_LEAVE);
	assert_int_equal(m.group, 0xef010203);
}

static void test_igmp_v3_records(void **state)
{
	/* three records: EXCLUDE {} 239.0.0.1; ALLOW {10.0.0.1, 10.0.0.2} aux 1 word
	 * 239.0.0.2; BLOCK {10.0.0.3} 239.0.0.3 */
	uint8_t p[8 + 8 + 8 + 12 + 8 + 4 + 2];
	struct igmp_msg m;
	struct igmp_rec r;
	size_t n = 8;

	(void)state;
	memset(p, 0, sizeof(p));
	p[0] = IGMP_V3_REPORT;
	p[7] = 3;
	p[n] = IGMP_MODE_IS_EXCLUDE;
	ip_put32(p + n + 4, 0xef000001);
	n += 8;
	p[n] = IGMP_ALLOW_NEW_SOURCES;
	p[n + 1] = 1;
	p[n + 3] = 2;
	ip_put32(p + n + 4, 0xef000002);
	ip_put32(p + n + 8, 0x0a000001);
	ip_put32(p + n + 12, 0x0a000002);
	n += 8 + 8 + 4;
	p[n] = IGMP_BLOCK_OLD_SOURCES;
	p[n + 3] = 1;
	ip_put32(p + n + 4, 0xef000003);
	ip_put32(p + n + 8, 0x0a000003);
	n += 12;
	assert_int_equal(n, sizeof(p) - 2);
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_OK);
	assert_int_equal(m.nrec, 3);
	igmp_record(&m, 1, &r);
	assert_int_equal(r.type, IGMP_ALLOW_NEW_SOURCES);
	assert_int_equal(r.group, 0xef000002);
	assert_int_equal(r.nsrc, 2);
	assert_int_equal(ip_be32(r.src + 4), 0x0a000002);
	assert_int_equal(igmp_rec_effect(r.type, r.nsrc), IGMP_EFFECT_JOIN);
	igmp_record(&m, 2, &r);
	assert_int_equal(r.group, 0xef000003);
	assert_int_equal(igmp_rec_effect(r.type, r.nsrc), IGMP_EFFECT_NONE);
	/* trailing octets past the records are allowed (the checksum covers them) */
	igmp_fix(p, n + 2);
	assert_int_equal(igmp_parse(p, n + 2, &m), IGMP_OK);
	/* one record more than there is */
	p[7] = 4;
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_TRUNCATED);
	/* the last record one source short */
	p[7] = 3;
	igmp_fix(p, n - 1);
	assert_int_equal(igmp_parse(p, n - 1, &m), IGMP_TRUNCATED);
	/* auxiliary data running past the end */
	p[8 + 8 + 1] = 9;
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_TRUNCATED);
	p[8 + 8 + 1] = 1;
	/* record types 0 and 7, a unicast group */
	p[8] = 0;
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_BAD_RECORD_TYPE);
	p[8] = 7;
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_BAD_RECORD_TYPE);
	p[8] = 2;
	ip_put32(p + 12, 0x0a000001);
	igmp_fix(p, n);
	assert_int_equal(igmp_parse(p, n, &m), IGMP_BAD_GROUP);
	/* effects of every type */
	assert_int_equal(igmp_rec_effect(IGMP_MODE_IS_INCLUDE, 0), IGMP_EFFECT_LEAVE);
	assert_int_equal(igmp_rec_effect(IGMP_MODE_IS_INCLUDE, 1), IGMP_EFFECT_JOIN);
	assert_int_equal(igmp_rec_effect(IGMP_MODE_IS_EXCLUDE, 1), IGMP_EFFECT_JOIN);
	assert_int_equal(igmp_rec_effect(IGMP_CHANGE_TO_EXCLUDE, 0), IGMP_EFFECT_JOIN);
	assert_int_equal(igmp_rec_effect(IGMP_ALLOW_NEW_SOURCES, 0), IGMP_EFFECT_NONE);
	assert_int_equal(igmp_rec_effect(IGMP_BLOCK_OLD_SOURCES, 2), IGMP_EFFECT_NONE);
}

static void test_igmp_refusals(void **state)
{
	uint8_t p[64], q[16];
	struct igmp_msg m;
	uint32_t src;

	(void)state;
	/* checksum */
	memcpy(p, igmp2_report, sizeof(igmp2_report));
	p[24 + 4] = 10;
	assert_int_equal(igmp_parse(p + 24, 8, &m), IGMP_BAD_CHECKSUM);
	assert_int_equal(igmp_parse(p + 24, 7, &m), IGMP_SHORT);
	/* a report for a unicast group (10.1.2.3); a leave for 0.0.0.0 */
	igmp_fix(p + 24, 8);
	assert_int_equal(igmp_parse(p + 24, 8, &m), IGMP_BAD_GROUP);
	p[24] = IGMP_V2_LEAVE;
	memset(p + 28, 0, 4);
	igmp_fix(p + 24, 8);
	assert_int_equal(igmp_parse(p + 24, 8, &m), IGMP_BAD_GROUP);
	/* unknown type */
	p[24] = 0x13;
	igmp_fix(p + 24, 8);
	assert_int_equal(igmp_parse(p + 24, 8, &m), IGMP_BAD_TYPE);
	/* queries: v1 (code 0), v2, 9..11 octets, v3 with sources past the end, group */
	memset(q, 0, sizeof(q));
	q[0] = IGMP_QUERY;
	igmp_fix(q, 8);
	assert_int_equal(igmp_parse(q, 8, &m), IGMP_OK);
	assert_int_equal(m.version, 1);
	assert_int_equal(m.max_resp_ds, 100);
	q[1] = 100;
	igmp_fix(q, 8);
	assert_int_equal(igmp_parse(q, 8, &m), IGMP_OK);
	assert_int_equal(m.version, 2);
	for (size_t n = 9; n < 12; n++) {
		igmp_fix(q, n);
		assert_int_equal(igmp_parse(q, n, &m), IGMP_BAD_QUERY_LEN);
	}
	q[11] = 1;
	igmp_fix(q, 15);
	assert_int_equal(igmp_parse(q, 15, &m), IGMP_TRUNCATED);
	igmp_fix(q, 16);
	assert_int_equal(igmp_parse(q, 16, &m), IGMP_OK);
	assert_int_equal(m.version, 3);
	assert_int_equal(m.nsrc, 1);
	ip_put32(q + 4, 0x0a000001);
	igmp_fix(q, 16);
	assert_int_equal(igmp_parse(q, 16, &m), IGMP_BAD_GROUP);
	/* the packet: TTL, protocol, fragment */
	memcpy(p, igmp2_report, sizeof(igmp2_report));
	p[8] = 2;
	ip_put16(p + 10, 0);
	ip_put16(p + 10, ip_csum(p, 24));
	assert_int_equal(igmp_parse_packet(p, sizeof(igmp2_report), &src, &m), IGMP_BAD_TTL);
	p[8] = 1;
	p[9] = 17;
	ip_put16(p + 10, 0);
	ip_put16(p + 10, ip_csum(p, 24));
	assert_int_equal(igmp_parse_packet(p, sizeof(igmp2_report), &src, &m), IGMP_NOT_IGMP);
	p[9] = 2;
	p[6] = 0x20; /* MF */
	ip_put16(p + 10, 0);
	ip_put16(p + 10, ip_csum(p, 24));
	assert_int_equal(igmp_parse_packet(p, sizeof(igmp2_report), &src, &m), IGMP_FRAGMENT);
	/* the IPv4 header's own checksum */
	assert_int_equal(igmp_parse_packet(igmp2_report, sizeof(igmp2_report) - 1, &src, &m),
			 IGMP_NOT_IGMP);
	assert_string_equal(igmp_result_name(IGMP_BAD_TTL), "bad_ttl");
	assert_string_equal(igmp_result_name(IGMP_RESULT_COUNT), "unknown");
}

static void test_igmp_query_build(void **state)
{
	uint8_t p[IGMP_QUERY_PKT_MAX];
	struct igmp_msg m;
	uint32_t src;
	size_t n;

	(void)state;
	assert_int_equal(igmp_build_query(p, sizeof(p) - 1, 1, 0, 3, 100, 2, 125), 0);
	assert_int_equal(igmp_build_query(p, sizeof(p), 1, 0, 1, 100, 2, 125), 0);
	n = igmp_build_query(p, sizeof(p), 0x0a140001, 0, 3, 100, 2, 125);
	assert_int_equal(n, 36);
	/* IHL 6, TTL 1, protocol 2, to 224.0.0.1, Router Alert */
	assert_int_equal(p[0], 0x46);
	assert_int_equal(p[8], 1);
	assert_int_equal(p[9], 2);
	assert_int_equal(ip_be32(p + 16), IGMP_ALL_HOSTS);
	assert_memory_equal(p + 20, "\x94\x04\0\0", 4);
	/* v3: max resp code 100, QRV 2, QQIC 125 */
	assert_memory_equal(p + 24, "\x11\x64", 2);
	assert_memory_equal(p + 32, "\x02\x7d\0\0", 4);
	assert_int_equal(igmp_parse_packet(p, n, &src, &m), IGMP_OK);
	assert_int_equal(src, 0x0a140001);
	assert_int_equal(m.version, 3);
	assert_int_equal(m.group, 0);
	assert_int_equal(m.max_resp_ds, 100);
	assert_int_equal(m.qrv, 2);
	assert_int_equal(m.qqi_s, 125);
	/* v2, group-specific: to the group, 8 octets */
	n = igmp_build_query(p, sizeof(p), 0x0a140001, 0xef010203, 2, 10, 2, 125);
	assert_int_equal(n, 32);
	assert_int_equal(ip_be32(p + 16), 0xef010203);
	assert_int_equal(igmp_parse_packet(p, n, &src, &m), IGMP_OK);
	assert_int_equal(m.version, 2);
	assert_int_equal(m.group, 0xef010203);
	assert_int_equal(m.max_resp_ds, 10);
}

static void test_codes(void **state)
{
	(void)state;
	/* RFC 3376 4.1.1: 0x80 = 16 << 3; 0xff = 31 << 10 */
	assert_int_equal(igmp_code_decode(127), 127);
	assert_int_equal(igmp_code_decode(0x80), 128);
	assert_int_equal(igmp_code_decode(0xff), 31744);
	assert_int_equal(igmp_code_encode(128), 0x80);
	assert_int_equal(igmp_code_encode(1000000), 0xff);
	for (uint32_t v = 0; v < 32000; v += 7) {
		uint32_t d = igmp_code_decode(igmp_code_encode(v));

		assert_true(d <= v && v - d < (v >> 4) + 1);
	}
	/* RFC 3810 5.1.3 */
	assert_int_equal(mld_code_decode(32767), 32767);
	assert_int_equal(mld_code_decode(0x8000), 32768);
	assert_int_equal(mld_code_encode(32768), 0x8000);
	assert_int_equal(mld_code_encode(50000), 0x886a); /* (0x1000 | 2154) << 3 */
	assert_int_equal(mld_code_decode(0x886a), 50000);
	assert_int_equal(mld_code_decode(0xffff), 0x1fff << 10);
	for (uint32_t v = 0; v < 8000000; v += 997) {
		uint32_t d = mld_code_decode(mld_code_encode(v));

		assert_true(d <= v && v - d < (v >> 12) + 1);
	}
}

static void test_mld_linux(void **state)
{
	static const uint8_t g[16] = { 0xff, 0x0e, [13] = 1, [15] = 2 };
	struct mld_msg m;
	struct mld_rec r;
	const uint8_t *src;

	(void)state;
	assert_int_equal(mld_parse_packet(mld2_join, sizeof(mld2_join), &src, &m), MLD_OK);
	assert_ptr_equal(src, mld2_join + 8);
	assert_int_equal(m.type, MLD_V2_REPORT);
	assert_int_equal(m.version, 2);
	assert_int_equal(m.nrec, 1);
	mld_record(&m, 0, &r);
	assert_int_equal(r.type, IGMP_CHANGE_TO_EXCLUDE);
	assert_memory_equal(r.group, g, 16);
	assert_int_equal(mld_rec_effect(r.type, r.nsrc), IGMP_EFFECT_JOIN);
	assert_int_equal(mld_parse_packet(mld2_leave, sizeof(mld2_leave), &src, &m), MLD_OK);
	mld_record(&m, 0, &r);
	assert_int_equal(mld_rec_effect(r.type, r.nsrc), IGMP_EFFECT_LEAVE);
	assert_int_equal(mld_parse_packet(mld1_report, sizeof(mld1_report), &src, &m), MLD_OK);
	assert_int_equal(m.type, MLD_V1_REPORT);
	assert_int_equal(m.version, 1);
	assert_memory_equal(m.group, g, 16);
	assert_int_equal(mld_parse_packet(mld1_done, sizeof(mld1_done), &src, &m), MLD_OK);
	assert_int_equal(m.type, MLD_V1_DONE);
	assert_memory_equal(m.group, g, 16);
	/* from :: during DAD: valid, two records, but named so that a router ignores it */
	assert_int_equal(mld_parse_packet(mld2_dad, sizeof(mld2_dad), &src, &m), MLD_UNSPEC_SRC);
	assert_int_equal(m.nrec, 2);
	mld_record(&m, 1, &r);
	assert_int_equal(r.group[15], 0x6a);
}

static void test_mld_refusals(void **state)
{
	uint8_t p[128];
	struct mld_msg m;
	const uint8_t *src;
	size_t n = sizeof(mld2_join);

	(void)state;
	memcpy(p, mld2_join, n);
	p[n - 1] ^= 1; /* checksum */
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_BAD_CHECKSUM);
	p[48 + 8] = 7; /* record type */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_BAD_RECORD_TYPE);
	p[48 + 8] = 4;
	p[48 + 12] = 0xfe; /* not multicast */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_BAD_GROUP);
	p[48 + 12] = 0xff;
	p[48 + 11] = 1; /* one source that is not there */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_TRUNCATED);
	p[48 + 11] = 0;
	p[48 + 7] = 2; /* two records, one there */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_TRUNCATED);
	p[48 + 7] = 1;
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_OK);
	/* hop limit, source, type, fragment */
	p[7] = 255;
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_BAD_HOP_LIMIT);
	p[7] = 1;
	p[8] = 0x20; /* a global source */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_BAD_SOURCE);
	p[8] = 0xfe;
	p[48] = 128; /* echo request: ICMPv6 but not MLD */
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_NOT_MLD);
	/* a v1 report from :: is refused (only v2 reports may come from it) */
	memcpy(p, mld1_report, sizeof(mld1_report));
	memset(p + 8, 0, 16);
	mld_fix(p, 48);
	assert_int_equal(mld_parse_packet(p, sizeof(mld1_report), &src, &m), MLD_BAD_SOURCE);
	/* message level: short, lengths of queries, bad type, a done for a unicast address */
	memcpy(p, mld1_report, sizeof(mld1_report));
	assert_int_equal(mld_parse(p + 48, 7, p + 8, p + 24, &m), MLD_SHORT);
	p[48] = MLD_V1_DONE;
	p[48 + 8] = 0x20;
	mld_fix(p, 48);
	assert_int_equal(mld_parse(p + 48, 24, p + 8, p + 24, &m), MLD_BAD_GROUP);
	p[48] = 200;
	mld_fix(p, 48);
	assert_int_equal(mld_parse(p + 48, 24, p + 8, p + 24, &m), MLD_BAD_TYPE);
	p[48] = MLD_V1_REPORT;
	p[48 + 8] = 0xff;
	ip_put16(p + 4, 8 + 23); /* 23 octets of a 24-octet report */
	mld_fix(p, 48);
	assert_int_equal(mld_parse(p + 48, 23, p + 8, p + 24, &m), MLD_SHORT);
	p[48] = MLD_QUERY;
	for (uint16_t len = 25; len < 28; len++) {
		memset(p + 48 + 24, 0, 4);
		ip_put16(p + 4, (uint16_t)(8 + len));
		mld_fix(p, 48);
		assert_int_equal(mld_parse(p + 48, len, p + 8, p + 24, &m), MLD_BAD_QUERY_LEN);
	}
	/* a v2 query announcing one source it does not carry */
	memset(p + 48 + 24, 0, 4 + 16);
	p[48 + 27] = 1;
	ip_put16(p + 4, 8 + 28);
	mld_fix(p, 48);
	assert_int_equal(mld_parse(p + 48, 28, p + 8, p + 24, &m), MLD_TRUNCATED);
	ip_put16(p + 4, 8 + 44);
	mld_fix(p, 48);
	assert_int_equal(mld_parse(p + 48, 44, p + 8, p + 24, &m), MLD_OK);
	assert_int_equal(m.nsrc, 1);
	assert_string_equal(mld_result_name(MLD_UNSPEC_SRC), "unspecified_source");
}

static void test_mld_query_build(void **state)
{
	static const uint8_t ll[16] = { 0xfe, 0x80, [15] = 1 };
	static const uint8_t g[16] = { 0xff, 0x0e, [15] = 5 };
	uint8_t p[MLD_QUERY_PKT_MAX];
	struct mld_msg m;
	const uint8_t *src;
	size_t n;

	(void)state;
	assert_int_equal(mld_build_query(p, sizeof(p) - 1, ll, NULL, 2, 10000, 2, 125), 0);
	assert_int_equal(mld_build_query(p, sizeof(p), ll, NULL, 3, 10000, 2, 125), 0);
	n = mld_build_query(p, sizeof(p), ll, NULL, 2, 10000, 2, 125);
	assert_int_equal(n, 76);
	assert_int_equal(p[6], 0); /* hop-by-hop */
	assert_int_equal(p[7], 1); /* hop limit */
	assert_memory_equal(p + 24, mld_all_nodes, 16);
	assert_memory_equal(p + 40, "\x3a\0\x05\x02\0\0\x01\0", 8);
	assert_int_equal(p[48], MLD_QUERY);
	assert_int_equal(ip_be16(p + 52), 10000);
	assert_memory_equal(p + 72, "\x02\x7d\0\0", 4);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_OK);
	assert_int_equal(m.version, 2);
	assert_true(ip6_is_unspecified(m.group));
	assert_int_equal(m.max_resp_ms, 10000);
	assert_int_equal(m.qrv, 2);
	assert_int_equal(m.qqi_s, 125);
	n = mld_build_query(p, sizeof(p), ll, g, 1, 1000, 0, 0);
	assert_int_equal(n, 72);
	assert_memory_equal(p + 24, g, 16);
	assert_int_equal(mld_parse_packet(p, n, &src, &m), MLD_OK);
	assert_int_equal(m.version, 1);
	assert_memory_equal(m.group, g, 16);
	assert_int_equal(m.max_resp_ms, 1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_igmp_linux),    cmocka_unit_test(test_igmp_v3_records),
		cmocka_unit_test(test_igmp_refusals), cmocka_unit_test(test_igmp_query_build),
		cmocka_unit_test(test_codes),         cmocka_unit_test(test_mld_linux),
		cmocka_unit_test(test_mld_refusals),  cmocka_unit_test(test_mld_query_build),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
