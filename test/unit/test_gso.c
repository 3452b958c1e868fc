/*
 * pkt/gso: software segmentation of GSO packets and the check of their metadata.
 * Segments are verified field by field (lengths, IPv4 identification, TCP sequence
 * numbers and flags, UDP lengths) and their checksums with an independent computation
 * (the test's own one's-complement sum, pseudo-header included); the payload of the
 * segments put end to end is the original's. IPv4 and IPv6, TCP and UDP, TCP options,
 * IPv4 options, an IPv6 destination-options header, a last segment short and an exact
 * multiple of the MSS, resegmentation for a smaller MTU; every refusal of gso_check
 * and gso_plan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/gso.h"

/* ---- an independent checksum -------------------------------------------------------- */

static uint32_t ref_sum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t ref_fold(uint32_t s)
{
	while (s > 0xffff)
		s = (s >> 16) + (s & 0xffff);
	return (uint16_t)s;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A packet's L4 checksum verifies: the sum over the pseudo-header and the segment,
 * checksum field included, folds to 0xffff. */
static bool l4_ok(const uint8_t *p, size_t l4_off, uint8_t proto)
{
	size_t tot = p[0] >> 4 == 4 ? be16(p + 2) : 40u + be16(p + 4);
	uint32_t l4len = (uint32_t)(tot - l4_off), s;

	if (p[0] >> 4 == 4)
		s = ref_sum(p + 12, 8, 0);
	else
		s = ref_sum(p + 8, 32, 0);
	s += proto + (l4len >> 16) + (l4len & 0xffff);
	s = ref_sum(p + l4_off, l4len, s);
	return ref_fold(s) == 0xffff;
}

static bool ip4_hdr_ok(const uint8_t *p)
{
	return ref_fold(ref_sum(p, (size_t)(p[0] & 15) * 4, 0)) == 0xffff;
}

/* ---- packets ------------------------------------------------------------------------- */

static uint8_t pkt[70000], seg[70000], cat[70000];

/* IPv4 (optional 4 octets of options: NOP NOP NOP EOL) + TCP with 12 octets of options
 * (NOP NOP timestamps) + payload i*7 mod 251. Returns the length; the TCP checksum is
 * left partial (pseudo-header only), as a local sender does. */
static size_t tcp4(size_t payload, bool ipopt, uint8_t flags)
{
	size_t ihl = ipopt ? 24 : 20, thl = 32, tot = ihl + thl + payload, i;
	uint8_t *t = pkt + ihl;

	memset(pkt, 0, ihl + thl);
	pkt[0] = (uint8_t)(0x40 | ihl / 4);
	pkt[2] = (uint8_t)(tot >> 8);
	pkt[3] = (uint8_t)tot;
	pkt[4] = 0xff; /* identification wraps */
	pkt[5] = 0xfe;
	pkt[6] = 0x40; /* DF */
	pkt[8] = 64;
	pkt[9] = 6;
	memcpy(pkt + 12, (uint8_t[]){ 10, 0, 0, 1, 10, 0, 1, 2 }, 8);
	if (ipopt)
		memcpy(pkt + 20, (uint8_t[]){ 1, 1, 1, 0 }, 4);
	{
		uint16_t c = (uint16_t)~ref_fold(ref_sum(pkt, ihl, 0));
		pkt[10] = (uint8_t)(c >> 8);
		pkt[11] = (uint8_t)c;
	}
	t[0] = 0x9c, t[1] = 0x40, t[2] = 0x14, t[3] = 0x51;
	t[4] = 0xff, t[5] = 0xff, t[6] = 0xf0, t[7] = 0x00; /* seq wraps */
	t[8] = 0, t[9] = 0, t[10] = 0x12, t[11] = 0x34;
	t[12] = (uint8_t)(thl / 4) << 4;
	t[13] = flags;
	t[14] = 0x01, t[15] = 0xf5;
	memcpy(t + 20, (uint8_t[]){ 1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8 }, 12);
	for (i = 0; i < payload; i++)
		t[thl + i] = (uint8_t)(i * 7 % 251);
	/* partial: the pseudo-header sum only */
	{
		uint16_t c = ref_fold(ref_sum(pkt + 12, 8, 0) + 6 + (uint32_t)(thl + payload));
		t[16] = (uint8_t)(c >> 8);
		t[17] = (uint8_t)c;
	}
	return tot;
}

/* IPv6 (optionally with an 8-octet destination-options header) + TCP (20) or UDP. */
static size_t ip6(size_t payload, bool dstopt, uint8_t proto, uint8_t flags)
{
	size_t ext = dstopt ? 8 : 0, l4h = proto == 6 ? 20 : 8, tot = 40 + ext + l4h + payload, i;
	uint8_t *t = pkt + 40 + ext;

	memset(pkt, 0, 40 + ext + l4h);
	pkt[0] = 0x60;
	pkt[4] = (uint8_t)((tot - 40) >> 8);
	pkt[5] = (uint8_t)(tot - 40);
	pkt[6] = dstopt ? 60 : proto;
	pkt[7] = 64;
	pkt[8] = 0xfd, pkt[23] = 1;
	pkt[24] = 0xfd, pkt[25] = 1, pkt[39] = 2;
	if (dstopt) {
		pkt[40] = proto;
		pkt[41] = 0;
		pkt[42] = 1; /* PadN of 4 */
		pkt[43] = 4;
	}
	t[0] = 0x30, t[1] = 0x39, t[2] = 0x00, t[3] = 0x50;
	if (proto == 6) {
		t[4] = 0x10, t[5] = 0x20, t[6] = 0x30, t[7] = 0x40;
		t[12] = 0x50;
		t[13] = flags;
	} else {
		t[4] = (uint8_t)((l4h + payload) >> 8);
		t[5] = (uint8_t)(l4h + payload);
	}
	for (i = 0; i < payload; i++)
		t[l4h + i] = (uint8_t)(i * 13 % 253);
	return tot;
}

/* IPv4 + UDP. */
static size_t udp4(size_t payload)
{
	size_t tot = 28 + payload, i;

	memset(pkt, 0, 28);
	pkt[0] = 0x45;
	pkt[2] = (uint8_t)(tot >> 8);
	pkt[3] = (uint8_t)tot;
	pkt[4] = 0x12, pkt[5] = 0x34;
	pkt[8] = 64;
	pkt[9] = 17;
	memcpy(pkt + 12, (uint8_t[]){ 10, 0, 0, 1, 10, 0, 1, 2 }, 8);
	{
		uint16_t c = (uint16_t)~ref_fold(ref_sum(pkt, 20, 0));
		pkt[10] = (uint8_t)(c >> 8);
		pkt[11] = (uint8_t)c;
	}
	pkt[20] = 0x30, pkt[21] = 0x39, pkt[22] = 0x11, pkt[23] = 0x5c;
	pkt[24] = (uint8_t)((8 + payload) >> 8);
	pkt[25] = (uint8_t)(8 + payload);
	for (i = 0; i < payload; i++)
		pkt[28 + i] = (uint8_t)(i * 3 % 241);
	return tot;
}

/* Segment pkt[0..len) per the plan, check every segment's common fields, put the
 * payloads end to end in cat; returns the payload total. */
static size_t split(const struct gso_plan *p, size_t len, uint8_t proto)
{
	size_t total = 0;

	for (unsigned i = 0; i < p->n; i++) {
		size_t n = gso_segment(p, pkt, i, seg);

		assert_int_equal(n, gso_seg_len(p, i));
		if (i + 1u < p->n)
			assert_int_equal(n, p->hdr_len + p->mss);
		/* headers other than the fields a segment changes are the original's */
		assert_memory_equal(seg + 12, pkt + 12, p->family == 4 ? 8 : 0);
		if (p->family == 4) {
			assert_int_equal(be16(seg + 2), n);
			assert_int_equal(be16(seg + 4), (uint16_t)(be16(pkt + 4) + i));
			assert_true(ip4_hdr_ok(seg));
		} else {
			assert_int_equal(be16(seg + 4), n - 40);
			assert_memory_equal(seg + 6, pkt + 6, 34);
		}
		assert_true(l4_ok(seg, p->l4_off, proto));
		memcpy(cat + total, seg + p->hdr_len, n - p->hdr_len);
		total += n - p->hdr_len;
	}
	assert_int_equal(total, len - p->hdr_len);
	assert_memory_equal(cat, pkt + p->hdr_len, total);
	return total;
}

/* ---- tests --------------------------------------------------------------------------- */

static void test_tcp4(void **st)
{
	/* FIN, PSH, CWR, ACK; payload 3 full segments and 100 octets */
	size_t len = tcp4(3 * 1448 + 100, false, 0x80 | 0x10 | 0x08 | 0x01);
	struct gso_pkt g = { GSO_TCP, 1448 };
	struct gso_plan p;

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 1500, &p), GSO_OK);
	assert_int_equal(p.family, 4);
	assert_int_equal(p.l4_off, 20);
	assert_int_equal(p.hdr_len, 52);
	assert_int_equal(p.mss, 1448);
	assert_int_equal(p.n, 4);
	split(&p, len, 6);
	for (unsigned i = 0; i < 4; i++) {
		gso_segment(&p, pkt, i, seg);
		/* seq advanced by the payload before this segment, wrapping past 2^32 */
		assert_int_equal(be32(seg + 24), (uint32_t)(0xfffff000u + i * 1448u));
		assert_int_equal(be32(seg + 28), 0x1234); /* ack unchanged */
		uint8_t fl = seg[20 + 13];
		assert_int_equal(!!(fl & 0x80), i == 0);     /* CWR on the first only */
		assert_int_equal(!!(fl & 0x01), i == 3);     /* FIN on the last only */
		assert_int_equal(!!(fl & 0x08), i == 3);     /* PSH on the last only */
		assert_true(fl & 0x10);                      /* ACK on all */
		assert_memory_equal(seg + 40, pkt + 40, 12); /* TCP options copied */
	}
	assert_int_equal(gso_seg_len(&p, 3), 52 + 100);
}

static void test_tcp4_exact_multiple_and_ipopt(void **st)
{
	size_t len = tcp4(4 * 1000, true, 0x10 | 0x08);
	struct gso_pkt g = { GSO_TCP, 1000 };
	struct gso_plan p;

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 0, &p), GSO_OK);
	assert_int_equal(p.l4_off, 24);
	assert_int_equal(p.n, 4);
	assert_int_equal(gso_seg_len(&p, 3), p.hdr_len + 1000u); /* the last one full */
	split(&p, len, 6);
	gso_segment(&p, pkt, 3, seg);
	assert_memory_equal(seg + 20, pkt + 20, 4); /* IPv4 options in every segment */
	assert_int_equal(seg[24 + 13], 0x18);
	gso_segment(&p, pkt, 2, seg);
	assert_int_equal(seg[24 + 13], 0x10);
}

static void test_tcp4_smaller_mtu(void **st)
{
	/* gso_size 1448 toward an MTU of 1000: resegmented at 1000 - 52 = 948 */
	size_t len = tcp4(10000, false, 0x10);
	struct gso_pkt g = { GSO_TCP, 1448 };
	struct gso_plan p;

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 1000, &p), GSO_OK);
	assert_int_equal(p.mss, 948);
	assert_int_equal(p.n, 11);
	split(&p, len, 6);
	for (unsigned i = 0; i < p.n; i++)
		assert_true(gso_seg_len(&p, i) <= 1000);
	assert_int_equal(gso_plan(pkt, len, &g, 52, &p), GSO_MTU_TOO_SMALL);
	/* 10000 / 20: more than GSO_SEGS_MAX */
	assert_int_equal(gso_plan(pkt, len, &g, 72, &p), GSO_TOO_MANY_SEGS);
}

static void test_tcp6_dstopt(void **st)
{
	size_t len = ip6(5000, true, 6, 0x10 | 0x01);
	struct gso_pkt g = { GSO_TCP, 1220 };
	struct gso_plan p;

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 1280, &p), GSO_OK);
	assert_int_equal(p.family, 6);
	assert_int_equal(p.l4_off, 48);
	assert_int_equal(p.hdr_len, 68);
	assert_int_equal(p.mss, 1212); /* 1280 - 68 < 1220 */
	assert_int_equal(p.n, 5);
	split(&p, len, 6);
	for (unsigned i = 0; i < p.n; i++) {
		gso_segment(&p, pkt, i, seg);
		assert_memory_equal(seg + 40, pkt + 40, 8); /* the extension header */
		assert_int_equal(be32(seg + 48 + 4), 0x10203040u + i * 1212u);
		assert_int_equal(seg[48 + 13] & 1, i == 4);
	}
}

static void test_udp(void **st)
{
	struct gso_pkt g = { GSO_UDP, 1400 };
	struct gso_plan p;
	size_t len = udp4(3 * 1400 + 1);

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 1500, &p), GSO_OK);
	assert_int_equal(p.hdr_len, 28);
	assert_int_equal(p.n, 4);
	split(&p, len, 17);
	for (unsigned i = 0; i < p.n; i++) {
		size_t n = gso_segment(&p, pkt, i, seg);
		assert_int_equal(be16(seg + 24), n - 20); /* each datagram its UDP length */
		assert_int_not_equal(be16(seg + 26), 0);
	}
	assert_int_equal(gso_seg_len(&p, 3), 29);
	/* datagrams are the sender's: never resegmented */
	assert_int_equal(gso_plan(pkt, len, &g, 1400, &p), GSO_SEGMENT_TOO_BIG);

	len = ip6(2 * 1200, false, 17, 0);
	g.size = 1200;
	assert_int_equal(gso_plan(pkt, len, &g, 1280, &p), GSO_OK);
	assert_int_equal(p.n, 2);
	split(&p, len, 17);
	/* UDP length that disagrees with the IP payload */
	pkt[44] ^= 1;
	assert_int_equal(gso_plan(pkt, len, &g, 1280, &p), GSO_BAD_LENGTH);
}

/* Frame = Ethernet header + pkt. */
static uint8_t frame[70000];
static size_t mkframe(size_t len, uint16_t type)
{
	memset(frame, 0xaa, 12);
	frame[12] = (uint8_t)(type >> 8);
	frame[13] = (uint8_t)type;
	memcpy(frame + 14, pkt, len);
	return len + 14;
}

static void test_check(void **st)
{
	size_t len = tcp4(3000, false, 0x10), fl = mkframe(len, 0x0800);
	struct gso_vnet v = { GSO_VNET_F_NEEDS_CSUM, GSO_VNET_TCPV4, 66, 1448, 34, 16 };
	struct gso_pkt g;
	bool partial;

	(void)st;
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_OK);
	assert_int_equal(g.kind, GSO_TCP);
	assert_int_equal(g.size, 1448);
	assert_true(partial);
	v.gso_type |= GSO_VNET_ECN;
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_OK);

	/* refusals, one field wrong at a time */
	struct {
		struct gso_vnet v;
		enum gso_result r;
	} bad[] = {
		{ { 1, GSO_VNET_TCPV4, 0, 0, 34, 16 }, GSO_ZERO_SIZE },
		{ { 1, 2, 0, 1448, 34, 16 }, GSO_BAD_TYPE },
		{ { 1, 7, 0, 1448, 34, 16 }, GSO_BAD_TYPE },
		{ { 1, GSO_VNET_UDP, 0, 1448, 34, 6 }, GSO_UFO },
		{ { 1, GSO_VNET_UDP_L4 | GSO_VNET_ECN, 0, 1448, 34, 6 }, GSO_BAD_ECN },
		{ { 0, GSO_VNET_NONE | GSO_VNET_ECN, 0, 0, 0, 0 }, GSO_BAD_ECN },
		{ { 1, GSO_VNET_TCPV4, 0, 1448, (uint16_t)(fl - 17), 16 }, GSO_CSUM_RANGE },
		{ { 1, GSO_VNET_NONE, 0, 0, 0xffff, 0xffff }, GSO_CSUM_RANGE },
		{ { 1, GSO_VNET_TCPV4, 0, 1448, 30, 16 }, GSO_CSUM_MISMATCH },
		{ { 1, GSO_VNET_TCPV4, 0, 1448, 34, 6 }, GSO_CSUM_MISMATCH },
		{ { 1, GSO_VNET_TCPV6, 0, 1448, 34, 16 }, GSO_FAMILY },
		{ { 1, GSO_VNET_UDP_L4, 0, 1448, 34, 6 }, GSO_PROTO },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		g.kind = 99;
		assert_int_equal(gso_check(&bad[i].v, frame, fl, &g, &partial), bad[i].r);
		assert_int_equal(g.kind, GSO_NONE); /* never a GSO verdict on a refusal */
	}

	v = (struct gso_vnet){ GSO_VNET_F_NEEDS_CSUM, GSO_VNET_TCPV4, 0, 1448, 34, 16 };
	/* not IP */
	fl = mkframe(len, 0x0806);
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_NOT_IP);
	/* IP length != frame length (a trailing octet) */
	fl = mkframe(len, 0x0800);
	assert_int_equal(gso_check(&v, frame, fl + 1, &g, &partial), GSO_BAD_LENGTH);
	/* a fragment (MF) */
	frame[14 + 6] |= 0x20;
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_BAD_IP); /* checksum */
	pkt[6] |= 0x20;
	pkt[10] = pkt[11] = 0;
	{
		uint16_t c = (uint16_t)~ref_fold(ref_sum(pkt, 20, 0));
		pkt[10] = (uint8_t)(c >> 8);
		pkt[11] = (uint8_t)c;
	}
	len = 20 + 32 + 3000 - 8; /* IP payload a multiple of 8, for ip4_validate */
	pkt[2] = (uint8_t)(len >> 8), pkt[3] = (uint8_t)len;
	pkt[10] = pkt[11] = 0;
	{
		uint16_t c = (uint16_t)~ref_fold(ref_sum(pkt, 20, 0));
		pkt[10] = (uint8_t)(c >> 8);
		pkt[11] = (uint8_t)c;
	}
	fl = mkframe(len, 0x0800);
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_FRAGMENT);
	/* TCP data offset < 5 */
	len = tcp4(3000, false, 0x10);
	pkt[20 + 12] = 0x40;
	fl = mkframe(len, 0x0800);
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_L4_TRUNCATED);
	/* too many segments: gso_size 16 for 3000 octets */
	len = tcp4(3000, false, 0x10);
	fl = mkframe(len, 0x0800);
	v.gso_size = 16;
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_TOO_MANY_SEGS);
	/* IPv6: AH is refused, a destination-options header is not */
	v = (struct gso_vnet){ GSO_VNET_F_NEEDS_CSUM, GSO_VNET_TCPV6, 0, 1220, 14 + 48, 16 };
	len = ip6(5000, true, 6, 0x10);
	fl = mkframe(len, 0x86dd);
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_OK);
	assert_int_equal(g.kind, GSO_TCP);
	frame[14 + 6] = 51; /* AH: 8 octets is (1 + 2) * 4 = 12: make it 8 = (0 + 2) * 4 */
	frame[14 + 41] = 0;
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_EXT_HDR);
	/* a GSO type on a frame of one segment: no GSO, the checksum to complete */
	len = tcp4(1000, false, 0x10);
	fl = mkframe(len, 0x0800);
	v = (struct gso_vnet){ GSO_VNET_F_NEEDS_CSUM, GSO_VNET_TCPV4, 0, 1448, 34, 16 };
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_OK);
	assert_int_equal(g.kind, GSO_NONE);
	assert_true(partial);
	/* no GSO, no checksum flag */
	v = (struct gso_vnet){ 0 };
	assert_int_equal(gso_check(&v, frame, fl, &g, &partial), GSO_OK);
	assert_int_equal(g.kind, GSO_NONE);
	assert_false(partial);
}

static void test_csum_fill_and_seed(void **st)
{
	size_t len = tcp4(999, false, 0x18);
	struct gso_pkt g = { GSO_TCP, 500 };
	struct gso_plan p;
	uint32_t s;

	(void)st;
	assert_false(l4_ok(pkt, 20, 6));             /* partial as built */
	assert_true(gso_l4_csum_fill(pkt, len + 6)); /* link padding ignored */
	assert_true(l4_ok(pkt, 20, 6));
	/* the seed a kernel completes: sum from csum_start, seed included, complemented */
	assert_int_equal(gso_plan(pkt, len, &g, 0, &p), GSO_OK);
	gso_l4_seed(&p, pkt);
	s = ref_sum(pkt + 20, len - 20, 0);
	{
		uint16_t c = (uint16_t)~ref_fold(s);
		pkt[36] = (uint8_t)(c >> 8);
		pkt[37] = (uint8_t)c;
	}
	assert_true(l4_ok(pkt, 20, 6));
	len = udp4(100);
	assert_true(gso_l4_csum_fill(pkt, len));
	assert_true(l4_ok(pkt, 20, 17));
	len = ip6(100, true, 17, 0);
	assert_true(gso_l4_csum_fill(pkt, len));
	assert_true(l4_ok(pkt, 48, 17));
	/* not TCP/UDP, truncated: untouched */
	pkt[46 - 6] = 58;
	assert_false(gso_l4_csum_fill(pkt, len));
	assert_false(gso_l4_csum_fill(pkt, 30));
}

/* AF_XDP's guess: only a field holding the pseudo-header sum, in a packet that does not
 * verify, is completed. */
static void test_csum_fix_partial(void **st)
{
	size_t len = tcp4(999, false, 0x18);
	struct gso_pkt g = { GSO_TCP, 500 }, u = { GSO_UDP, 50 };
	struct gso_plan p;

	(void)st;
	assert_int_equal(gso_plan(pkt, len, &g, 0, &p), GSO_OK);
	gso_l4_seed(&p, pkt); /* what a sender with checksum offload leaves */
	assert_false(l4_ok(pkt, 20, 6));
	assert_true(gso_l4_csum_fix_partial(pkt, len + 6)); /* link padding ignored */
	assert_true(l4_ok(pkt, 20, 6));
	memcpy(cat, pkt, len);
	assert_false(gso_l4_csum_fix_partial(pkt, len)); /* verifies: left alone */
	assert_memory_equal(cat, pkt, len);
	pkt[36] ^= 0x10; /* wrong, but not the pseudo-header sum: left alone */
	memcpy(cat, pkt, len);
	assert_false(gso_l4_csum_fix_partial(pkt, len));
	assert_memory_equal(cat, pkt, len);
	/* IPv6 UDP behind a destination-options header */
	len = ip6(100, true, 17, 0);
	assert_int_equal(gso_plan(pkt, len, &u, 0, &p), GSO_OK);
	gso_l4_seed(&p, pkt);
	assert_false(l4_ok(pkt, 48, 17));
	assert_true(gso_l4_csum_fix_partial(pkt, len));
	assert_true(l4_ok(pkt, 48, 17));
	/* IPv4 UDP without a checksum (0): none to complete */
	len = udp4(100);
	pkt[26] = pkt[27] = 0;
	assert_false(gso_l4_csum_fix_partial(pkt, len));
	assert_int_equal(be16(pkt + 26), 0);
	/* truncated: untouched */
	assert_false(gso_l4_csum_fix_partial(pkt, 30));
}

static void test_vnet_codec(void **st)
{
	uint8_t b[GSO_VNET_LEN];
	struct gso_vnet v = { 1, GSO_VNET_TCPV6 | GSO_VNET_ECN, 0x1234, 1448, 54, 16 }, w;

	(void)st;
	gso_vnet_write(b, &v);
	assert_memory_equal(b, ((uint8_t[]){ 1, 0x84, 0x34, 0x12, 0xa8, 0x05, 54, 0, 16, 0 }),
			    GSO_VNET_LEN);
	gso_vnet_read(&w, b);
	assert_memory_equal(&v, &w, sizeof(v));
	assert_string_equal(gso_result_name(GSO_CSUM_RANGE), "gso_csum_range");
	assert_string_equal(gso_result_name(GSO_RESULT_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcp4),
		cmocka_unit_test(test_tcp4_exact_multiple_and_ipopt),
		cmocka_unit_test(test_tcp4_smaller_mtu),
		cmocka_unit_test(test_tcp6_dstopt),
		cmocka_unit_test(test_udp),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_csum_fill_and_seed),
		cmocka_unit_test(test_csum_fix_partial),
		cmocka_unit_test(test_vnet_codec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
