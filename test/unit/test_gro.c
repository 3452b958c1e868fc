/*
 * pkt/gro: TCP receive coalescing. A packet cut into segments by pkt/gso and merged
 * again is the packet it was, once its partial checksum is completed (IPv4 and IPv6,
 * with TCP options, a short last segment or an exact multiple); the metadata is a GSO
 * packet that pkt/gso's own check accepts; a single segment comes out as it went in.
 * Every reason not to merge: not a candidate (SYN, FIN, RST, URG, CWR, no ACK, no
 * payload, a fragment, IPv4 options, an IPv6 extension header, a bad checksum, UDP, no
 * room for a second segment of its size), and
 * not a continuation (a gap, another flow, another TTL / window / option / ack, a longer
 * segment, after a short one or PSH, past 65,535 octets or the caller's buffer).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/gro.h"
#include "pkt/gso.h"

static uint8_t pkt[70000], seg[70000], held[70000], frame[70000];

/* The IPv4 header checksum of p (its IHL's worth) computed anew, with the test's own
 * one's-complement sum. */
static void ip4_hdr_fix(uint8_t *p)
{
	uint32_t s = 0;

	p[10] = p[11] = 0;
	for (int i = 0; i < (p[0] & 15) * 4; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s > 0xffff)
		s = (s >> 16) + (s & 0xffff);
	p[10] = (uint8_t)(~s >> 8);
	p[11] = (uint8_t)~s;
}

/* A TCP packet, IPv4 (family 4) or IPv6, 12 octets of options (NOP NOP timestamps),
 * payload i*7 mod 251, its checksums complete. Returns its length. */
static size_t tcp(int family, size_t payload, uint8_t flags)
{
	size_t l4 = family == 4 ? 20 : 40, thl = 32, tot = l4 + thl + payload;
	uint8_t *t = pkt + l4;

	memset(pkt, 0, l4 + thl);
	if (family == 4) {
		pkt[0] = 0x45;
		pkt[2] = (uint8_t)(tot >> 8);
		pkt[3] = (uint8_t)tot;
		pkt[4] = 0x12;
		pkt[6] = 0x40; /* DF */
		pkt[8] = 64;
		pkt[9] = 6;
		memcpy(pkt + 12, (uint8_t[]){ 10, 0, 0, 1, 10, 0, 1, 2 }, 8);
	} else {
		pkt[0] = 0x60;
		pkt[4] = (uint8_t)((tot - 40) >> 8);
		pkt[5] = (uint8_t)(tot - 40);
		pkt[6] = 6;
		pkt[7] = 64;
		pkt[8] = 0xfd, pkt[23] = 1;
		pkt[24] = 0xfd, pkt[39] = 2;
	}
	t[0] = 0x9c, t[1] = 0x40, t[2] = 0x14, t[3] = 0x51;
	t[4] = 0xff, t[5] = 0xff, t[6] = 0xf0, t[7] = 0x00; /* seq wraps */
	t[10] = 0x12, t[11] = 0x34;
	t[12] = (uint8_t)(thl / 4) << 4;
	t[13] = flags;
	t[14] = 0x01, t[15] = 0xf5;
	memcpy(t + 20, (uint8_t[]){ 1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8 }, 12);
	for (size_t i = 0; i < payload; i++)
		t[thl + i] = (uint8_t)(i * 7 % 251);
	if (family == 4)
		ip4_hdr_fix(pkt);
	assert_true(gso_l4_csum_fill(pkt, tot));
	return tot;
}

/* Cut pkt[0..len) into segments of mss and merge them back, each one taken; the merged
 * packet's length. */
static size_t cut_and_merge(size_t len, uint16_t mss, struct gso_vnet *v, unsigned *n_segs)
{
	struct gso_pkt g = { GSO_TCP, mss };
	struct gso_plan p;
	struct gro_tcp gro;

	assert_int_equal(gso_plan(pkt, len, &g, 0, &p), GSO_OK);
	for (unsigned i = 0; i < p.n; i++) {
		size_t n = gso_segment(&p, pkt, i, seg);

		if (i == 0)
			assert_true(gro_tcp_begin(&gro, held, sizeof(held), seg, n));
		else
			assert_true(gro_tcp_append(&gro, seg, n));
	}
	assert_int_equal(gro.segs, p.n);
	*n_segs = p.n;
	return gro_tcp_end(&gro, 14, v);
}

static void roundtrip(int family, size_t payload, uint16_t mss)
{
	size_t len = tcp(family, payload, 0x18), l4 = family == 4 ? 20 : 40, n;
	struct gso_vnet v;
	struct gso_pkt g;
	bool partial;
	unsigned segs;

	n = cut_and_merge(len, mss, &v, &segs);
	assert_true(segs > 1);
	assert_int_equal(n, len);
	assert_int_equal(v.flags, GSO_VNET_F_NEEDS_CSUM);
	assert_int_equal(v.gso_type, family == 4 ? GSO_VNET_TCPV4 : GSO_VNET_TCPV6);
	assert_int_equal(v.gso_size, mss);
	assert_int_equal(v.csum_start, 14 + l4);
	assert_int_equal(v.csum_offset, 16);
	assert_int_equal(v.hdr_len, 14 + l4 + 32);
	/* pkt/gso's check, as the gateway's Ethernet port would judge it */
	memset(frame, 0, 14);
	frame[12] = family == 4 ? 0x08 : 0x86;
	frame[13] = family == 4 ? 0x00 : 0xdd;
	memcpy(frame + 14, held, n);
	assert_int_equal(gso_check(&v, frame, 14 + n, &g, &partial), GSO_OK);
	assert_int_equal(g.kind, GSO_TCP);
	assert_int_equal(g.size, mss);
	assert_true(partial);
	/* completed, it is the packet that was cut (PSH from the last segment) */
	assert_true(gso_l4_csum_fill(held, n));
	assert_memory_equal(held, pkt, len);
}

static void test_roundtrip(void **st)
{
	(void)st;
	roundtrip(4, 20 * 1448 + 100, 1448);
	roundtrip(4, 44 * 1448, 1448); /* an exact multiple, 63,752 octets */
	roundtrip(6, 31 * 1992 + 1, 1992);
	roundtrip(6, 2 * 1000, 1000);
}

static void test_single_segment_as_it_came(void **st)
{
	size_t len = tcp(4, 1448, 0x10);
	struct gro_tcp gro;
	struct gso_vnet v;

	(void)st;
	assert_true(gro_tcp_begin(&gro, held, sizeof(held), pkt, len + 6)); /* padding dropped */
	assert_int_equal(gro_tcp_end(&gro, 14, &v), len);
	assert_int_equal(v.flags, 0);
	assert_int_equal(v.gso_type, GSO_VNET_NONE);
	assert_memory_equal(held, pkt, len);
	assert_int_equal(gro.segs, 0);
	assert_false(gro_tcp_append(&gro, pkt, len)); /* nothing held */
}

/* begin refuses pkt[0..len) after edit(pkt) with its checksums made right again. */
static void refused_as_start(int family, uint8_t flags, size_t payload, void (*edit)(uint8_t *))
{
	size_t len = tcp(family, payload, flags);
	struct gro_tcp gro;

	if (edit) {
		edit(pkt);
		if (family == 4)
			ip4_hdr_fix(pkt);
	}
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	assert_int_equal(gro.segs, 0);
}

static void mf(uint8_t *p)
{
	p[6] |= 0x20;
}

static void offset(uint8_t *p)
{
	p[7] = 1;
}

static void udp(uint8_t *p)
{
	p[9] = 17;
}

static void ip6_ext(uint8_t *p)
{
	p[6] = 60;
}

static void test_not_a_start(void **st)
{
	size_t len;
	struct gro_tcp gro;

	(void)st;
	refused_as_start(4, 0x12, 100, NULL); /* SYN */
	refused_as_start(4, 0x11, 100, NULL); /* FIN */
	refused_as_start(4, 0x14, 100, NULL); /* RST */
	refused_as_start(4, 0x30, 100, NULL); /* URG */
	refused_as_start(4, 0x90, 100, NULL); /* CWR */
	refused_as_start(4, 0x08, 100, NULL); /* no ACK */
	refused_as_start(4, 0x10, 0, NULL);   /* no payload */
	refused_as_start(6, 0x10, 0, NULL);
	refused_as_start(4, 0x10, 100, mf);
	refused_as_start(4, 0x10, 100, offset);
	refused_as_start(4, 0x10, 100, udp);
	refused_as_start(6, 0x10, 100, ip6_ext);
	/* a bad TCP checksum; a bad IPv4 header checksum */
	len = tcp(4, 100, 0x10);
	pkt[len - 1] ^= 1;
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	len = tcp(6, 100, 0x10);
	pkt[len - 1] ^= 1;
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	len = tcp(4, 100, 0x10);
	pkt[8] = 63;
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	/* IPv4 options (IHL 6) */
	len = tcp(4, 100, 0x10);
	pkt[0] = 0x46;
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	/* truncated: the IP length past the buffer; a buffer too small to hold it */
	len = tcp(4, 100, 0x10);
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len - 1));
	assert_false(gro_tcp_begin(&gro, held, len - 1, pkt, len));
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, 19));
	/* no room for a second segment of its size: 52 + 2 x 32742 > 65535, and in the
	 * caller's buffer */
	len = tcp(4, 32742, 0x10);
	assert_false(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	len = tcp(4, 32741, 0x10);
	assert_true(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	assert_false(gro_tcp_begin(&gro, held, len + 32740, pkt, len));
}

/* Two segments of 1000 cut from a packet; seg2 gets the second, edited by the caller. */
static uint8_t seg2[4096];

static size_t two_segments(int family, struct gro_tcp *gro)
{
	size_t len = tcp(family, 3000, 0x10), n;
	struct gso_pkt g = { GSO_TCP, 1000 };
	struct gso_plan p;

	assert_int_equal(gso_plan(pkt, len, &g, 0, &p), GSO_OK);
	n = gso_segment(&p, pkt, 0, seg);
	assert_true(gro_tcp_begin(gro, held, sizeof(held), seg, n));
	return gso_segment(&p, pkt, 1, seg2);
}

/* Fix the TCP checksum (and IPv4's) of seg2 after an edit. */
static void refix(size_t n)
{
	if (seg2[0] == 0x45)
		ip4_hdr_fix(seg2);
	assert_true(gso_l4_csum_fill(seg2, n));
}

static void not_appended(int family, size_t off, uint8_t xor)
{
	struct gro_tcp gro;
	size_t n = two_segments(family, &gro);

	seg2[off] ^= xor;
	refix(n);
	assert_false(gro_tcp_append(&gro, seg2, n));
	assert_int_equal(gro.segs, 1);
	assert_int_equal(gro.len, family == 4 ? 1052 : 1072);
}

static void test_not_a_continuation(void **st)
{
	struct gro_tcp gro;
	size_t n;

	(void)st;
	/* the untouched second segment is taken */
	n = two_segments(4, &gro);
	assert_true(gro_tcp_append(&gro, seg2, n));
	n = two_segments(6, &gro);
	assert_true(gro_tcp_append(&gro, seg2, n));
	not_appended(4, 20 + 7, 1);     /* a gap in the sequence */
	not_appended(4, 20 + 1, 1);     /* another source port */
	not_appended(4, 19, 1);         /* another destination */
	not_appended(4, 8, 1);          /* another TTL */
	not_appended(4, 1, 4);          /* another TOS */
	not_appended(4, 6, 0x40);       /* DF cleared */
	not_appended(4, 20 + 11, 1);    /* another ack */
	not_appended(4, 20 + 15, 1);    /* another window */
	not_appended(4, 20 + 31, 1);    /* another timestamp */
	not_appended(4, 20 + 13, 0x40); /* ECE on one */
	not_appended(6, 1, 1);          /* another flow label */
	not_appended(6, 7, 1);          /* another hop limit */
	not_appended(6, 40 + 3, 1);     /* another destination port */
	/* not a candidate itself: FIN */
	not_appended(4, 20 + 13, 0x01);
	/* a bad checksum */
	n = two_segments(4, &gro);
	seg2[n - 1] ^= 1;
	assert_false(gro_tcp_append(&gro, seg2, n));
}

static void test_closing_and_limits(void **st)
{
	struct gro_tcp gro;
	struct gso_vnet v;
	size_t len, n;

	(void)st;
	/* a segment longer than the first: not taken */
	len = tcp(4, 500, 0x10);
	assert_true(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	len = tcp(4, 1000, 0x10);
	pkt[20 + 7] += 500 & 0xff; /* seq 0xfffff000 + 500 */
	pkt[20 + 6] += 500 >> 8;
	assert_true(gso_l4_csum_fill(pkt, len));
	assert_false(gro_tcp_append(&gro, pkt, len));
	/* a short one is taken and closes the merge; PSH closes it and is kept */
	n = two_segments(4, &gro);
	seg2[3] = (uint8_t)(n - 500);
	seg2[2] = (uint8_t)((n - 500) >> 8);
	refix(n - 500);
	assert_true(gro_tcp_append(&gro, seg2, n - 500));
	assert_true(gro.closed);
	assert_false(gro_tcp_append(&gro, seg2, n - 500));
	n = two_segments(6, &gro);
	seg2[40 + 13] |= 0x08;
	refix(n);
	assert_true(gro_tcp_append(&gro, seg2, n));
	assert_true(gro.closed);
	gro_tcp_end(&gro, 14, &v);
	assert_int_equal(held[40 + 13], 0x18);
	/* a first segment with PSH takes nothing more */
	len = tcp(4, 100, 0x18);
	assert_true(gro_tcp_begin(&gro, held, sizeof(held), pkt, len));
	assert_true(gro.closed);
	/* the caller's buffer: a second segment that does not fit is not taken */
	n = two_segments(4, &gro);
	gro.cap = gro.len + 999;
	assert_false(gro_tcp_append(&gro, seg2, n));
	gro.cap = gro.len + 1000;
	assert_true(gro_tcp_append(&gro, seg2, n));
}

static void test_65535(void **st)
{
	/* IPv4 segments of 1448 payload octets after 52 of headers: 45 make 65,212 octets
	 * (fits 65,535), a 46th would make 66,660: refused */
	size_t len = tcp(4, 1448, 0x10);
	struct gro_tcp gro;
	unsigned i;

	(void)st;
	for (i = 0; i < 46; i++) {
		uint32_t seq = 0xfffff000u + i * 1448u;
		bool took;

		pkt[24] = (uint8_t)(seq >> 24);
		pkt[25] = (uint8_t)(seq >> 16);
		pkt[26] = (uint8_t)(seq >> 8);
		pkt[27] = (uint8_t)seq;
		assert_true(gso_l4_csum_fill(pkt, len));
		took = i ? gro_tcp_append(&gro, pkt, len)
			 : gro_tcp_begin(&gro, held, sizeof(held), pkt, len);
		if (!took)
			break;
	}
	assert_int_equal(i, 45);
	assert_int_equal(gro.len, 52 + 45 * 1448);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_single_segment_as_it_came),
		cmocka_unit_test(test_not_a_start),
		cmocka_unit_test(test_not_a_continuation),
		cmocka_unit_test(test_closing_and_limits),
		cmocka_unit_test(test_65535),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
