/*
 * pkt/ip: IPv4 validation (hand-worked header, every rejection reason), TTL decrement
 * against an independent full checksum, martian tables, the IPv6 extension chain, the
 * flow hash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/ip.h"

/* Independent RFC 1071 checksum: 16-bit words into 32 bits, folded at the end. */
static uint16_t ref_csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s > 0xffff)
		s = (s >> 16) + (s & 0xffff);
	return (uint16_t)~s;
}

static void fix_csum(uint8_t *h)
{
	size_t ihl = (size_t)(h[0] & 15) * 4;

	h[10] = h[11] = 0;
	uint16_t c = ref_csum(h, ihl);
	h[10] = (uint8_t)(c >> 8);
	h[11] = (uint8_t)c;
}

/* 192.168.0.1 -> 192.168.0.199, UDP, total 115, DF, TTL 64: checksum 0xb861 (worked by
 * hand: sum of the nine other words is 0x1479d -> 0x479e, complement 0xb861). */
static const uint8_t hdr[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
				 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };

static void mkpkt(uint8_t *p)
{
	memset(p, 0, 115);
	memcpy(p, hdr, 20);
}

static void test_ip4_valid(void **state)
{
	uint8_t p[128];
	struct ip4_info i;

	(void)state;
	mkpkt(p);
	assert_int_equal(ref_csum(p, 20), 0);
	assert_int_equal(ip4_validate(p, 115, &i), IP_OK);
	assert_int_equal(i.hdr_len, 20);
	assert_int_equal(i.tot_len, 115);
	assert_true(i.df);
	assert_false(i.mf);
	assert_int_equal(i.ttl, 64);
	assert_int_equal(i.proto, 17);
	assert_int_equal(i.src, 0xc0a80001);
	assert_int_equal(i.dst, 0xc0a800c7);
	/* link padding after the total length is allowed */
	assert_int_equal(ip4_validate(p, 128, &i), IP_OK);
	assert_int_equal(i.tot_len, 115);
}

struct rej {
	const char *what;
	int off, val; /* octet to set (-1: none) */
	size_t len;
	bool fix;
	enum ip_reason want;
};

static void test_ip4_reject(void **state)
{
	static const struct rej t[] = {
		{ "short", -1, 0, 19, true, IP4_TRUNCATED },
		{ "version 6", 0, 0x65, 115, true, IP4_BAD_VERSION },
		{ "ihl 4", 0, 0x44, 115, false, IP4_BAD_IHL },
		{ "ihl 15, 40 octets", 0, 0x4f, 40, false, IP4_HDR_TRUNCATED },
		{ "total 19", 3, 19, 115, true, IP4_BAD_TOTAL_LENGTH },
		{ "total 116", 3, 116, 115, true, IP4_LENGTH_EXCEEDS_BUFFER },
		{ "checksum", 11, 0x62, 115, false, IP4_BAD_CHECKSUM },
		{ "MF, 95 octets", 6, 0x20, 115, true, IP4_FRAG_BAD_LENGTH },
		{ "offset 8191*8 + 95", 6, 0x1f, 115, true, IP4_FRAG_TOO_LONG },
	};
	uint8_t p[128];
	struct ip4_info i;

	(void)state;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		mkpkt(p);
		if (t[k].off >= 0)
			p[t[k].off] = (uint8_t)t[k].val;
		if (t[k].off == 6 && t[k].val == 0x1f)
			p[7] = 0xff;
		if (t[k].fix && (p[0] & 15) >= 5)
			fix_csum(p);
		enum ip_reason r = ip4_validate(p, t[k].len, &i);
		if (r != t[k].want)
			fail_msg("%s: got %s want %s", t[k].what, ip_reason_name(r),
				 ip_reason_name(t[k].want));
	}
	/* MF with 96 octets is fine; the evil bit is passed through. */
	mkpkt(p);
	p[3] = 116;
	p[6] = 0xa0;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 116, &i), IP_OK);
	assert_true(i.mf);
}

static void test_ip4_options(void **state)
{
	uint8_t p[64];
	struct ip4_info i;

	(void)state;
	memset(p, 0, sizeof(p));
	memcpy(p, hdr, 20);
	p[0] = 0x46; /* 24-octet header */
	p[3] = 40;
	/* NOP, EOL, padding */
	p[20] = 1;
	p[21] = 0;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP_OK);
	assert_true(i.has_options);
	/* router alert: 0x94 len 4 */
	p[20] = 0x94, p[21] = 4, p[22] = 0, p[23] = 0;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP_OK);
	/* length 5 runs past the 4-octet area */
	p[21] = 5;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP4_BAD_OPTION);
	/* length 1 */
	p[21] = 1;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP4_BAD_OPTION);
	/* kind in the last octet, no room for its length */
	p[20] = 1, p[21] = 1, p[22] = 1, p[23] = 7;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP4_BAD_OPTION);
	/* LSRR */
	p[20] = 131, p[21] = 3, p[22] = 4, p[23] = 0;
	fix_csum(p);
	assert_int_equal(ip4_validate(p, 40, &i), IP4_SOURCE_ROUTE);
	assert_string_equal(ip_reason_name(IP4_SOURCE_ROUTE), "ip4_source_route");
}

static void test_ip4_ttl(void **state)
{
	uint8_t p[20];

	(void)state;
	memcpy(p, hdr, 20);
	/* Worked: the TTL/protocol word goes 0x4011 -> 0x3f11, 0x0100 less, so the checksum
	 * grows by 0x0100: 0xb861 -> 0xb961. */
	assert_int_equal(ip4_ttl_decrement(p), IP_OK);
	assert_int_equal(p[8], 63);
	assert_int_equal(p[10] << 8 | p[11], 0xb961);
	assert_int_equal(ref_csum(p, 20), 0);
	p[8] = 1;
	fix_csum(p);
	uint8_t before[20];
	memcpy(before, p, 20);
	assert_int_equal(ip4_ttl_decrement(p), IP4_TTL_EXPIRED);
	assert_memory_equal(p, before, 20);
	p[8] = 0;
	assert_int_equal(ip4_ttl_decrement(p), IP4_TTL_EXPIRED);

	/* Random headers: the incremental result equals a full recompute (the
	 * checksum-carry cases included), 100000 times. */
	srand(1);
	for (int n = 0; n < 100000; n++) {
		for (int k = 0; k < 20; k++)
			p[k] = (uint8_t)rand();
		p[0] = 0x45;
		p[8] = (uint8_t)(2 + rand() % 254);
		fix_csum(p);
		assert_int_equal(ip4_ttl_decrement(p), IP_OK);
		uint16_t got = (uint16_t)(p[10] << 8 | p[11]);
		fix_csum(p);
		assert_int_equal(got, p[10] << 8 | p[11]);
	}
}

static void test_ip4_martians(void **state)
{
	static const struct {
		uint32_t src, dst;
		enum ip_reason want;
	} t[] = {
		{ 0x0a000001, 0x0a000002, IP_OK },
		{ 0x00000001, 0x0a000002, IP4_SRC_ZERO_NET },
		{ 0x7f000001, 0x0a000002, IP4_SRC_LOOPBACK },
		{ 0xa9fe0101, 0x0a000002, IP4_SRC_LINK_LOCAL },
		{ 0xe0000001, 0x0a000002, IP4_SRC_MULTICAST },
		{ 0xf0000001, 0x0a000002, IP4_SRC_CLASS_E },
		{ 0xffffffff, 0x0a000002, IP4_SRC_BROADCAST },
		{ 0x0a000001, 0x00000000, IP4_DST_ZERO_NET },
		{ 0x0a000001, 0x7f000001, IP4_DST_LOOPBACK },
		{ 0x0a000001, 0xa9fe0001, IP4_DST_LINK_LOCAL },
		{ 0x0a000001, 0xeffffffa, IP4_DST_MULTICAST },
		{ 0x0a000001, 0xf0000001, IP4_DST_CLASS_E },
		{ 0x0a000001, 0xffffffff, IP4_DST_BROADCAST },
		{ 0xa9feffff, 0x0a000002, IP4_SRC_LINK_LOCAL },
		{ 0xa9ff0000, 0x0a000002, IP_OK }, /* 169.255 is not link-local */
	};
	(void)state;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++)
		assert_string_equal(
		    ip_reason_name(ip4_check_addrs(&ip4_martian_default, t[k].src, t[k].dst)),
		    ip_reason_name(t[k].want));
	/* configurable: allow link-local sources, add 192.0.2.0/24 */
	static const struct ip4_prefix_ent extra = { 0xc0000200, 24 };
	struct ip4_martian_cfg c = ip4_martian_default;
	c.src_classes &= (uint8_t)~IP4_M_LINK_LOCAL;
	c.extra_src = &extra;
	c.n_extra_src = 1;
	assert_int_equal(ip4_check_addrs(&c, 0xa9fe0101, 0x0a000002), IP_OK);
	assert_int_equal(ip4_check_addrs(&c, 0xc00002ff, 0x0a000002), IP4_SRC_LISTED);
	assert_int_equal(ip4_check_addrs(&c, 0xc0000300, 0x0a000002), IP_OK);
}

/* IPv6 packet builder: fixed header, then the chain given as (type, octets) pairs. */
static size_t mk6(uint8_t *p, const uint8_t *chain, size_t n, uint8_t last, size_t l4len)
{
	size_t off = 40;
	uint8_t nh = n ? chain[0] : last;

	memset(p, 0, 600);
	p[0] = 0x60;
	p[7] = 64;
	p[8] = 0x20, p[9] = 0x01, p[10] = 0x0d, p[11] = 0xb8, p[23] = 1;
	p[24] = 0x20, p[25] = 0x01, p[26] = 0x0d, p[27] = 0xb8, p[39] = 2;
	p[6] = nh;
	for (size_t i = 0; i < n; i++) {
		uint8_t next = i + 1 < n ? chain[i + 1] : last;
		p[off] = next;
		if (chain[i] == 44) {
			off += 8;
		} else if (chain[i] == 51) {
			p[off + 1] = 1; /* (1 + 2) * 4 = 12 octets */
			off += 12;
		} else {
			p[off + 1] = 0;                 /* 8 octets */
			p[off + 2] = 1, p[off + 3] = 4; /* PadN */
			off += 8;
		}
	}
	/* ports 1000 -> 80 */
	p[off] = 0x03, p[off + 1] = 0xe8, p[off + 2] = 0, p[off + 3] = 80;
	off += l4len;
	p[4] = (uint8_t)((off - 40) >> 8);
	p[5] = (uint8_t)(off - 40);
	return off;
}

static void test_ip6_chain(void **state)
{
	uint8_t p[600];
	struct ip6_info i;
	size_t n;

	(void)state;
	n = mk6(p, NULL, 0, 6, 20);
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);
	assert_int_equal(i.proto, 6);
	assert_int_equal(i.l4_off, 40);
	assert_int_equal(i.pkt_len, 60);

	static const uint8_t c1[] = { 0, 60, 43, 44, 51, 60 };
	n = mk6(p, c1, sizeof(c1), 17, 8);
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);
	assert_int_equal(i.proto, 17);
	assert_int_equal(i.l4_off, 40 + 8 + 8 + 8 + 8 + 12 + 8);
	assert_int_equal(i.n_ext, 6);
	assert_true(i.has_hbh);
	assert_true(i.is_frag);
	assert_true(i.frag_first);

	static const uint8_t esp[] = { 0, 60 };
	n = mk6(p, esp, 2, 50, 16);
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);
	assert_int_equal(i.proto, 50);
	assert_int_equal(i.l4_off, 56);

	static const uint8_t none[] = { 60 };
	n = mk6(p, none, 1, 59, 0);
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);
	assert_int_equal(i.proto, 59);

	static const struct {
		const char *what;
		uint8_t chain[10];
		size_t n;
		enum ip_reason want;
	} t[] = {
		{ "hbh second", { 60, 0 }, 2, IP6_HBH_NOT_FIRST },
		{ "dest opts thrice", { 60, 60, 60 }, 3, IP6_EXT_REPEATED },
		{ "routing twice", { 43, 43 }, 2, IP6_EXT_REPEATED },
		{ "fragment twice", { 44, 44 }, 2, IP6_EXT_REPEATED },
		{ "nine headers", { 0, 60, 43, 51, 135, 139, 140, 253, 254 }, 9, IP6_EXT_TOO_LONG },
	};
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		n = mk6(p, t[k].chain, t[k].n, 6, 20);
		enum ip_reason r = ip6_validate(p, n, &i);
		if (r != t[k].want)
			fail_msg("%s: got %s", t[k].what, ip_reason_name(r));
	}
	/* eight is the limit, and is fine */
	static const uint8_t eight[] = { 0, 60, 43, 51, 135, 139, 140, 253 };
	n = mk6(p, eight, 8, 6, 20);
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);

	/* truncations: the header's length octet says 16 but 8 are there */
	static const uint8_t one[] = { 60 };
	n = mk6(p, one, 1, 6, 0);
	p[41] = 1;
	assert_int_equal(ip6_validate(p, n, &i), IP6_EXT_TRUNCATED);
	/* chain ends in the middle of an extension header's first two octets */
	n = mk6(p, one, 1, 6, 0);
	p[4] = 0, p[5] = 1;
	assert_int_equal(ip6_validate(p, 41, &i), IP6_EXT_TRUNCATED);
	/* fixed header */
	assert_int_equal(ip6_validate(p, 39, &i), IP6_TRUNCATED);
	p[0] = 0x40;
	assert_int_equal(ip6_validate(p, 41, &i), IP6_BAD_VERSION);
	n = mk6(p, NULL, 0, 6, 20);
	assert_int_equal(ip6_validate(p, n - 1, &i), IP6_LENGTH_EXCEEDS_BUFFER);
	p[4] = p[5] = 0;
	p[6] = 0;
	assert_int_equal(ip6_validate(p, n, &i), IP6_JUMBOGRAM);

	/* fragments: non-first stops the walk; M with 7 octets; past 65535 */
	static const uint8_t fr[] = { 44 };
	n = mk6(p, fr, 1, 6, 16);
	p[42] = 0x00, p[43] = 0x09; /* offset 1 (8 octets), M */
	assert_int_equal(ip6_validate(p, n, &i), IP_OK);
	assert_true(i.is_frag);
	assert_false(i.frag_first);
	assert_true(i.frag_mf);
	assert_int_equal(i.frag_off, 8);
	assert_int_equal(i.l4_off, 48);
	n = mk6(p, fr, 1, 6, 7);
	p[43] = 1;
	assert_int_equal(ip6_validate(p, n, &i), IP6_FRAG_BAD_LENGTH);
	n = mk6(p, fr, 1, 6, 16);
	p[42] = 0xff, p[43] = 0xf8;
	assert_int_equal(ip6_validate(p, n, &i), IP6_FRAG_TOO_LONG);
}

static void test_ip6_addrs_hop(void **state)
{
	uint8_t a[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 },
		b[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 2 };
	uint8_t z[16] = { 0 }, lo[16] = { [15] = 1 }, ll[16] = { 0xfe, 0x80, [15] = 1 };
	uint8_t mc2[16] = { 0xff, 0x02, [15] = 1 }, mc5[16] = { 0xff, 0x05, [15] = 1 };
	uint8_t v4m[16] = { [10] = 0xff, [11] = 0xff, [12] = 10, [15] = 1 };
	const struct ip6_martian_cfg *c = &ip6_martian_default;

	(void)state;
	assert_int_equal(ip6_check_addrs(c, a, b), IP_OK);
	assert_int_equal(ip6_check_addrs(c, z, b), IP6_SRC_UNSPECIFIED);
	assert_int_equal(ip6_check_addrs(c, lo, b), IP6_SRC_LOOPBACK);
	assert_int_equal(ip6_check_addrs(c, ll, b), IP6_SRC_LINK_LOCAL);
	assert_int_equal(ip6_check_addrs(c, mc5, b), IP6_SRC_MULTICAST);
	assert_int_equal(ip6_check_addrs(c, v4m, b), IP6_SRC_V4MAPPED);
	assert_int_equal(ip6_check_addrs(c, a, z), IP6_DST_UNSPECIFIED);
	assert_int_equal(ip6_check_addrs(c, a, lo), IP6_DST_LOOPBACK);
	assert_int_equal(ip6_check_addrs(c, a, ll), IP6_DST_LINK_LOCAL);
	assert_int_equal(ip6_check_addrs(c, a, mc2), IP6_DST_MULTICAST_LINK);
	assert_int_equal(ip6_check_addrs(c, a, mc5), IP_OK); /* site scope may be routed */
	assert_int_equal(ip6_check_addrs(c, a, v4m), IP6_DST_V4MAPPED);
	/* fec0::/10 is not fe80::/10 */
	ll[1] = 0xc0;
	assert_int_equal(ip6_check_addrs(c, ll, b), IP_OK);

	uint8_t p[600];
	size_t n = mk6(p, NULL, 0, 6, 20);
	assert_int_equal(ip6_hop_decrement(p), IP_OK);
	assert_int_equal(p[7], 63);
	p[7] = 1;
	assert_int_equal(ip6_hop_decrement(p), IP6_HOP_EXPIRED);
	assert_int_equal(p[7], 1);
	(void)n;
}

/* ip_csum_add's runs of 32 octets and more (eight octets at a time, little-endian, carries
 * counted, swapped at the end) against ref_csum: every alignment, lengths across the
 * 32-octet switch and the 8/4/2/1 tails, random, all-ones and all-zero data, up to a
 * 64 KiB GSO payload, and a sum split in two chunks (the first even) as GSO and GRO
 * chain them after the pseudo-header. */
static void test_csum_long(void **state)
{
	static uint8_t buf[65536 + 8];
	uint32_t x = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (int pattern = 0; pattern < 3; pattern++) {
		uint8_t *b = buf;
		static uint8_t fill[4096 + 8];

		if (pattern > 0) {
			memset(fill, pattern == 1 ? 0xff : 0, sizeof(fill));
			b = fill;
		}
		for (size_t off = 0; off < 8; off++)
			for (size_t n = 0; n <= (pattern ? 4096 : 3000); n += n < 80 ? 1 : 37) {
				assert_int_equal(ip_csum(b + off, n), ref_csum(b + off, n));
				for (size_t k = 0; k <= n && k <= 64; k += 2) {
					uint64_t s = ip_csum_add(ip_csum_add(0, b + off, k),
								 b + off + k, n - k);

					assert_int_equal((uint16_t)~ip_csum_fold(s),
							 ref_csum(b + off, n));
				}
			}
	}
	assert_int_equal(ip_csum(buf + 1, 65535), ref_csum(buf + 1, 65535));
	assert_int_equal(ip_csum(buf, 65536), ref_csum(buf, 65536));
	/* A running sum carried in: the pseudo-header's, then the payload. */
	assert_int_equal((uint16_t)~ip_csum_fold(ip_csum_add(0x1fffe, buf, 1448)),
			 (uint16_t)~ip_csum_fold(0x1fffe + (uint16_t)~ref_csum(buf, 1448)));
}

/* ip_csum_fold's four fixed folds against the loop they replaced (fold until 16 bits),
 * at the carry edges and on random sums of every width. */
static uint16_t fold_loop(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

static void test_csum_fold(void **state)
{
	static const uint64_t edge[] = { 0,
					 1,
					 0xffff,
					 0x10000,
					 0x1fffe,
					 0x1ffff,
					 0xffffffff,
					 0x100000000ull,
					 0xffff0000ffffull,
					 0xfffffffffffeull,
					 0xffffffffffffffffull,
					 0x8000000000000000ull };
	uint64_t x = 88172645463325252ull;

	(void)state;
	for (size_t k = 0; k < sizeof(edge) / sizeof(edge[0]); k++)
		assert_int_equal(ip_csum_fold(edge[k]), fold_loop(edge[k]));
	for (int n = 0; n < 1000000; n++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		uint64_t s = x >> (n % 64);

		assert_int_equal(ip_csum_fold(s), fold_loop(s));
	}
}

/* ip4_validate's 20-octet checksum (five words in the machine's order) against the
 * reference: random headers, with their checksum right and with one bit flipped. */
static void test_ip4_hdr_csum(void **state)
{
	uint8_t p[20];

	(void)state;
	srand(7);
	for (int n = 0; n < 200000; n++) {
		for (int k = 0; k < 20; k++)
			p[k] = (uint8_t)rand();
		p[0] = 0x45;
		if (n & 1)
			fix_csum(p);
		if (n % 4 == 1)
			p[rand() % 20] ^= (uint8_t)(1u << (rand() % 8));
		assert_int_equal(ip4_hdr_csum_ok(p, 20), ref_csum(p, 20) == 0);
	}
}

/* ip4_check_addrs' shortcut (first octets that cannot be martian) decides as the full
 * class check does, for every first octet on both sides, second octets around
 * 169.254, and the all-ones broadcast. */
static void test_ip4_martian_shortcut(void **state)
{
	static const uint32_t rest[] = { 0x000000, 0x000001, 0xfe0101, 0xfeffff,
					 0xff0000, 0xfd0000, 0x123456, 0xffffff };
	static const uint32_t plain = 0x0a000002;

	(void)state;
	for (uint32_t top = 0; top < 256; top++)
		for (size_t k = 0; k < sizeof(rest) / sizeof(rest[0]); k++) {
			uint32_t a = top << 24 | rest[k];

			assert_int_equal(ip4_check_addrs(&ip4_martian_default, a, plain),
					 ip4_check_addrs_classes(&ip4_martian_default, a, plain));
			assert_int_equal(ip4_check_addrs(&ip4_martian_default, plain, a),
					 ip4_check_addrs_classes(&ip4_martian_default, plain, a));
		}
}

/* ip6_check_addrs' shortcut (first octets no class starts with) decides as the full
 * class check does, for every first octet on both sides, with the rest of the address
 * zero, ::1-like, v4-mapped-like and link-local-like. */
static void test_ip6_martian_shortcut(void **state)
{
	static const uint8_t plain[16] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 1 };
	uint8_t a[16];

	(void)state;
	for (unsigned top = 0; top < 256; top++)
		for (int k = 0; k < 4; k++) {
			memset(a, 0, sizeof(a));
			a[0] = (uint8_t)top;
			if (k == 1)
				a[15] = 1;
			if (k == 2)
				a[10] = a[11] = 0xff;
			if (k == 3)
				a[1] = 0x80;
			assert_int_equal(ip6_check_addrs(&ip6_martian_default, a, plain),
					 ip6_check_addrs_classes(&ip6_martian_default, a, plain));
			assert_int_equal(ip6_check_addrs(&ip6_martian_default, plain, a),
					 ip6_check_addrs_classes(&ip6_martian_default, plain, a));
		}
}

static void test_names(void **state)
{
	(void)state;
	for (int r = 0; r < IP_REASON_COUNT; r++)
		assert_string_not_equal(ip_reason_name((enum ip_reason)r), "unknown");
	assert_string_equal(ip_reason_name(IP_REASON_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ip4_valid),
		cmocka_unit_test(test_ip4_reject),
		cmocka_unit_test(test_ip4_options),
		cmocka_unit_test(test_ip4_ttl),
		cmocka_unit_test(test_ip4_martians),
		cmocka_unit_test(test_ip6_chain),
		cmocka_unit_test(test_ip6_addrs_hop),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_csum_long),
		cmocka_unit_test(test_csum_fold),
		cmocka_unit_test(test_ip4_hdr_csum),
		cmocka_unit_test(test_ip4_martian_shortcut),
		cmocka_unit_test(test_ip6_martian_shortcut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
