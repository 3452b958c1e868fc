/*
 * pkt/icmp: ICMPv4 / ICMPv6 errors checked field by field with checksums computed
 * independently here, every suppression rule, the quote limits, and the rate limiter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "pkt/icmp.h"
#include "pkt/ip.h"

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

/* 0 when the checksum in p is right */
static uint16_t ref_check(const uint8_t *p, size_t n)
{
	return (uint16_t)~ref_fold(ref_sum(p, n, 0));
}

static uint16_t ref_check6(const uint8_t *ip6)
{
	uint32_t len = (uint32_t)(ip6[4] << 8 | ip6[5]);
	uint32_t s = ref_sum(ip6 + 8, 32, 0) + len + ip6[6];

	return (uint16_t)~ref_fold(ref_sum(ip6 + 40, len, s));
}

/* A UDP datagram 10.1.0.5:1000 -> 10.2.0.9:53, total 100, TTL 1. */
static size_t mk4(uint8_t *p, size_t tot)
{
	memset(p, 0, tot);
	p[0] = 0x45;
	p[2] = (uint8_t)(tot >> 8);
	p[3] = (uint8_t)tot;
	p[4] = 0x12, p[5] = 0x34;
	p[8] = 1;
	p[9] = 17;
	p[12] = 10, p[13] = 1, p[15] = 5;
	p[16] = 10, p[17] = 2, p[19] = 9;
	uint16_t c = ref_check(p, 20);
	p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	p[20] = 0x03, p[21] = 0xe8, p[23] = 53;
	return tot;
}

static const uint8_t me4[4] = { 10, 2, 0, 1 };

static void test_v4_time_exceeded(void **state)
{
	uint8_t inv[1600], out[1600];
	size_t n;
	struct icmp_err e = { .type = ICMP4_TIME_EXCEEDED, .code = 0, .ip_id = 7, .src = me4 };

	(void)state;
	mk4(inv, 100);
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 128); /* 20 + 8 + the whole 100 */
	static const uint8_t want_ip[20] = { 0x45, 0xc0, 0,  128, 0, 7, 0,  0, 64, 1,
					     0,    0,    10, 2,   0, 1, 10, 1, 0,  5 };
	assert_memory_equal(out, want_ip, 10);
	assert_memory_equal(out + 12, want_ip + 12, 8);
	assert_int_equal(ref_check(out, 20), 0);
	assert_int_equal(out[20], 11);
	assert_int_equal(out[21], 0);
	assert_memory_equal(out + 24, "\0\0\0\0", 4);
	assert_memory_equal(out + 28, inv, 100);
	assert_int_equal(ref_check(out + 20, 108), 0);

	/* link padding past the total length is not quoted */
	assert_int_equal(icmp4_error(&e, inv, 160, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 128);
	/* a 1500-octet packet is quoted up to 576 in all */
	mk4(inv, 1500);
	assert_int_equal(icmp4_error(&e, inv, 1500, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 576);
	assert_int_equal(out[2] << 8 | out[3], 576);
	assert_int_equal(ref_check(out + 20, 556), 0);
	/* just over and at the limit: 548 octets quoted make 576; 547 make 575 */
	mk4(inv, 560);
	assert_int_equal(icmp4_error(&e, inv, 560, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 576);
	assert_memory_equal(out + 28, inv, 548);
	mk4(inv, 548);
	assert_int_equal(icmp4_error(&e, inv, 548, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 576);
	mk4(inv, 547);
	assert_int_equal(icmp4_error(&e, inv, 547, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 575);
	mk4(inv, 1500);
	/* a small buffer still gets header + 8 */
	assert_int_equal(icmp4_error(&e, inv, 1500, out, 56, &n), ICMP_OK);
	assert_int_equal(n, 56);
	assert_int_equal(ref_check(out + 20, 36), 0);
	assert_int_equal(icmp4_error(&e, inv, 1500, out, 55, &n), ICMP_NO_SPACE);
}

static void test_v4_frag_needed(void **state)
{
	uint8_t inv[1600], out[600];
	size_t n;
	struct icmp_err e = { .type = ICMP4_DEST_UNREACH,
			      .code = ICMP4_CODE_FRAG_NEEDED,
			      .param = 1400,
			      .src = me4 };

	(void)state;
	mk4(inv, 1500);
	inv[6] = 0x40; /* DF */
	assert_int_equal(icmp4_error(&e, inv, 1500, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(out[20], 3);
	assert_int_equal(out[21], 4);
	/* RFC 1191: unused 16 bits, then the next-hop MTU 1400 = 0x0578 */
	static const uint8_t w[4] = { 0, 0, 0x05, 0x78 };
	assert_memory_equal(out + 24, w, 4);
	assert_int_equal(ref_check(out + 20, n - 20), 0);
	/* in place: the error written over the invoking packet's own buffer */
	uint8_t buf[1600];
	mk4(buf, 1500);
	buf[6] = 0x40;
	assert_int_equal(icmp4_error(&e, buf, 1500, buf, sizeof(buf), &n), ICMP_OK);
	assert_memory_equal(buf, out, n);
}

static void test_v4_suppressed(void **state)
{
	uint8_t inv[200], out[600];
	size_t n;
	struct icmp_err e = { .type = ICMP4_DEST_UNREACH, .code = 1, .src = me4 };
	static const struct {
		const char *what;
		int off;
		uint8_t val;
		enum icmp_reason want;
	} t[] = {
		{ "ICMP dest unreach", 9, 1, ICMP_NOT_FOR_ICMP_ERROR },
		{ "non-first fragment", 7, 1, ICMP_NOT_FOR_FRAGMENT },
		{ "multicast dst", 16, 224, ICMP_NOT_FOR_MULTICAST },
		{ "src 0/8", 12, 0, ICMP_NOT_FOR_MARTIAN_SRC },
		{ "src 127/8", 12, 127, ICMP_NOT_FOR_MARTIAN_SRC },
		{ "src 240/4", 12, 240, ICMP_NOT_FOR_MARTIAN_SRC },
		{ "version", 0, 0x65, ICMP_INVOKING_MALFORMED },
		{ "ihl", 0, 0x44, ICMP_INVOKING_MALFORMED },
	};

	(void)state;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		mk4(inv, 100);
		inv[t[k].off] = t[k].val;
		if (t[k].off == 9)
			inv[20] = 3; /* ICMP type 3 */
		enum icmp_reason r = icmp4_error(&e, inv, 100, out, sizeof(out), &n);
		if (r != t[k].want)
			fail_msg("%s: %s", t[k].what, icmp_reason_name(r));
	}
	mk4(inv, 100);
	memset(inv + 16, 0xff, 4);
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_BROADCAST);
	mk4(inv, 100);
	e.dst_broadcast = true;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_BROADCAST);
	e.dst_broadcast = false;
	e.ll_multicast = true;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MULTICAST);
	e.ll_multicast = false;
	/* echo request and first fragments do get errors */
	inv[9] = 1;
	inv[20] = 8;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	inv[9] = 17;
	inv[6] = 0x20; /* MF, offset 0 */
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	/* ICMP with no type octet, unknown type 200 counts as an error */
	inv[9] = 1;
	inv[20] = 200;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_ICMP_ERROR);
	inv[2] = 0, inv[3] = 20;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_INVOKING_MALFORMED);
	e.type = 8;
	assert_int_equal(icmp4_error(&e, inv, 100, out, sizeof(out), &n), ICMP_BAD_TYPE);
}

/* Every ICMPv4 type of the invoking packet: no error about an error (RFC 1812
 * 4.3.2.7: destination unreachable 3, source quench 4, redirect 5, time exceeded 11,
 * parameter problem 12, and the types past 18 that Linux treats as errors), an error
 * about every query or reply. */
static void test_v4_icmp_types(void **state)
{
	uint8_t inv[200], out[600];
	size_t n;
	struct icmp_err e = { .type = ICMP4_TIME_EXCEEDED, .src = me4 };

	(void)state;
	for (unsigned t = 0; t < 256; t++) {
		bool is_error = t == 3 || t == 4 || t == 5 || t == 11 || t == 12 || t > 18;
		enum icmp_reason want = is_error ? ICMP_NOT_FOR_ICMP_ERROR : ICMP_OK;

		mk4(inv, 100);
		inv[9] = 1;
		inv[20] = (uint8_t)t;
		enum icmp_reason r = icmp4_error(&e, inv, 100, out, sizeof(out), &n);
		if (r != want)
			fail_msg("invoking ICMP type %u: %s, want %s", t, icmp_reason_name(r),
				 icmp_reason_name(want));
	}
}

static const uint8_t me6[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 2, [15] = 1 };

static size_t mk6(uint8_t *p, size_t tot, uint8_t nh)
{
	memset(p, 0, tot);
	p[0] = 0x60;
	p[4] = (uint8_t)((tot - 40) >> 8);
	p[5] = (uint8_t)(tot - 40);
	p[6] = nh;
	p[7] = 1;
	p[8] = 0x20, p[9] = 0x01, p[10] = 0x0d, p[11] = 0xb8, p[13] = 1, p[23] = 5;
	p[24] = 0x20, p[25] = 0x01, p[26] = 0x0d, p[27] = 0xb8, p[29] = 3, p[39] = 9;
	return tot;
}

static void test_v6_errors(void **state)
{
	uint8_t inv[2000], out[2000];
	size_t n;
	struct icmp_err e = { .type = ICMP6_PACKET_TOO_BIG, .param = 1500, .src = me6 };

	(void)state;
	mk6(inv, 2000, 17);
	assert_int_equal(icmp6_error(&e, inv, 2000, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 1280); /* RFC 4443 2.4(c) */
	assert_int_equal(out[0], 0x60);
	assert_int_equal(out[4] << 8 | out[5], 1240);
	assert_int_equal(out[6], 58);
	assert_int_equal(out[7], 64);
	assert_memory_equal(out + 8, me6, 16);
	assert_memory_equal(out + 24, inv + 8, 16);
	assert_int_equal(out[40], 2);
	assert_int_equal(out[41], 0);
	static const uint8_t mtu[4] = { 0, 0, 0x05, 0xdc };
	assert_memory_equal(out + 44, mtu, 4);
	assert_memory_equal(out + 48, inv, 1232);
	assert_int_equal(ref_check6(out), 0);

	/* time exceeded, small packet quoted whole; param zero */
	e.type = ICMP6_TIME_EXCEEDED;
	mk6(inv, 100, 17);
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	assert_int_equal(n, 148);
	assert_memory_equal(out + 44, "\0\0\0\0", 4);
	assert_int_equal(ref_check6(out), 0);
	/* in place */
	uint8_t buf[400];
	memcpy(buf, inv, 100);
	assert_int_equal(icmp6_error(&e, buf, 100, buf, sizeof(buf), &n), ICMP_OK);
	assert_memory_equal(buf, out, n);

	/* suppressions */
	mk6(inv, 100, 58);
	inv[40] = 1; /* dest unreachable */
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_ICMP_ERROR);
	inv[40] = 137; /* redirect */
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_ICMP_ERROR);
	inv[40] = 128; /* echo request */
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	/* an ICMPv6 error behind a destination options header is still an error */
	mk6(inv, 100, 60);
	inv[40] = 58;
	inv[48] = 3;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_ICMP_ERROR);
	/* non-first fragment: no time exceeded, but packet too big */
	mk6(inv, 104, 44);
	inv[40] = 17;
	inv[43] = 8; /* offset 1 */
	assert_int_equal(icmp6_error(&e, inv, 104, out, sizeof(out), &n), ICMP_NOT_FOR_FRAGMENT);
	e.type = ICMP6_PACKET_TOO_BIG;
	assert_int_equal(icmp6_error(&e, inv, 104, out, sizeof(out), &n), ICMP_OK);
	/* multicast destination: packet too big and param problem code 2 only */
	mk6(inv, 100, 17);
	inv[24] = 0xff;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	e.type = ICMP6_PARAM_PROBLEM;
	e.code = 2;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_OK);
	e.code = 0;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MULTICAST);
	e.type = ICMP6_DEST_UNREACH;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MULTICAST);
	mk6(inv, 100, 17);
	e.ll_multicast = true;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MULTICAST);
	e.ll_multicast = false;
	/* sources naming no single host */
	memset(inv + 8, 0, 16);
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MARTIAN_SRC);
	inv[23] = 1;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MARTIAN_SRC);
	inv[8] = 0xff;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_NOT_FOR_MARTIAN_SRC);
	mk6(inv, 100, 17);
	inv[0] = 0x40;
	assert_int_equal(icmp6_error(&e, inv, 100, out, sizeof(out), &n), ICMP_INVOKING_MALFORMED);
	assert_int_equal(icmp6_error(&e, inv, 39, out, sizeof(out), &n), ICMP_INVOKING_MALFORMED);
	mk6(inv, 100, 17);
	/* room for at least the invoking header + 8: 40 + 8 + 48 */
	assert_int_equal(icmp6_error(&e, inv, 100, out, 95, &n), ICMP_NO_SPACE);
	assert_int_equal(icmp6_error(&e, inv, 100, out, 96, &n), ICMP_OK);
	assert_int_equal(n, 96);
	assert_int_equal(ref_check6(out), 0);
}

static void test_ratelimit(void **state)
{
	struct icmp_rl_bucket b[64];
	struct icmp_ratelimit rl;
	struct icmp_rl_cfg c = { .per_dst_rate = 1,
				 .per_dst_burst = 3,
				 .total_rate = 100,
				 .total_burst = 5,
				 .v4_prefix_len = 24,
				 .v6_prefix_len = 64,
				 .exempt_pmtu = true };
	uint8_t a[4] = { 10, 0, 0, 1 }, a2[4] = { 10, 0, 0, 200 }, o[4] = { 10, 9, 9, 9 };
	uint64_t t = 1000000000000ull;

	(void)state;
	assert_int_equal(icmp_rl_init(&rl, b, 63, &c), -22);
	assert_int_equal(icmp_rl_init(&rl, b, 64, &c), 0);
	/* burst of 3 for 10.0.0.0/24, then nothing until a second has passed */
	assert_true(icmp_rl_allow(&rl, AF_INET, a, 11, 0, t));
	assert_true(icmp_rl_allow(&rl, AF_INET, a2, 11, 0, t));
	assert_true(icmp_rl_allow(&rl, AF_INET, a, 11, 0, t));
	assert_false(icmp_rl_allow(&rl, AF_INET, a2, 11, 0, t));
	assert_false(icmp_rl_allow(&rl, AF_INET, a, 11, 0, t + 999999999));
	assert_true(icmp_rl_allow(&rl, AF_INET, a, 11, 0, t + 1000000000));
	/* PMTU errors are exempt */
	assert_true(icmp_rl_allow(&rl, AF_INET, a, 3, 4, t + 1000000000));
	/* another prefix has its own bucket: a burst of 3, then no */
	assert_true(icmp_rl_allow(&rl, AF_INET, o, 11, 0, t + 1000000000));
	assert_true(icmp_rl_allow(&rl, AF_INET, o, 11, 0, t + 1000000000));
	assert_true(icmp_rl_allow(&rl, AF_INET, o, 11, 0, t + 1000000000));
	assert_false(icmp_rl_allow(&rl, AF_INET, o, 11, 0, t + 1000000000));
	/* the global bucket (burst 2, 100/s) is shared by all destinations */
	c.per_dst_burst = 100;
	c.total_burst = 2;
	assert_int_equal(icmp_rl_init(&rl, b, 64, &c), 0);
	assert_true(icmp_rl_allow(&rl, AF_INET, a, 11, 0, t));
	assert_true(icmp_rl_allow(&rl, AF_INET, o, 11, 0, t));
	assert_false(icmp_rl_allow(&rl, AF_INET, a2, 11, 0, t));
	assert_false(icmp_rl_allow(&rl, AF_INET, a2, 11, 0, t + 9999999));
	assert_true(icmp_rl_allow(&rl, AF_INET, a2, 11, 0, t + 10000000)); /* 10 ms: one more */
	uint8_t v6[16] = { 0x20, 1, 0xd, 0xb8, [15] = 1 };
	assert_true(icmp_rl_allow(&rl, AF_INET6, v6, ICMP6_PACKET_TOO_BIG, 0, t));
}

static void test_names(void **state)
{
	(void)state;
	for (int r = 0; r < ICMP_REASON_COUNT; r++)
		assert_string_not_equal(icmp_reason_name((enum icmp_reason)r), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v4_time_exceeded),
		cmocka_unit_test(test_v4_frag_needed),
		cmocka_unit_test(test_v4_icmp_types),
		cmocka_unit_test(test_v4_suppressed),
		cmocka_unit_test(test_v6_errors),
		cmocka_unit_test(test_ratelimit),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
