/*
 * pkt/mss: MSS clamping on IPv4 and IPv6 SYNs; the incrementally updated TCP checksum
 * is compared with an independent full recompute (pseudo-header included), at an even
 * and at an odd option offset; every refusal reason; an MSS below the limit and a
 * non-first fragment left untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/ip.h"
#include "pkt/mss.h"

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

/* The TCP checksum of a v4 packet computed from scratch (field zeroed first). */
static uint16_t tcp4_csum(uint8_t *p)
{
	size_t hl = (size_t)(p[0] & 15) * 4, tot = (size_t)(p[2] << 8 | p[3]);
	uint8_t *t = p + hl;
	uint8_t save[2] = { t[16], t[17] };
	uint32_t s = ref_sum(p + 12, 8, 0) + 6 + (uint32_t)(tot - hl);

	t[16] = t[17] = 0;
	s = ref_sum(t, tot - hl, s);
	t[16] = save[0], t[17] = save[1];
	return (uint16_t)~ref_fold(s);
}

static uint16_t tcp6_csum(uint8_t *p, size_t l4)
{
	size_t tot = 40 + (size_t)(p[4] << 8 | p[5]);
	uint8_t *t = p + l4;
	uint8_t save[2] = { t[16], t[17] };
	uint32_t s = ref_sum(p + 8, 32, 0) + 6 + (uint32_t)(tot - l4);

	t[16] = t[17] = 0;
	s = ref_sum(t, tot - l4, s);
	t[16] = save[0], t[17] = save[1];
	return (uint16_t)~ref_fold(s);
}

static void set_tcp_csum4(uint8_t *p)
{
	size_t hl = (size_t)(p[0] & 15) * 4;
	uint16_t c = tcp4_csum(p);

	p[hl + 16] = (uint8_t)(c >> 8), p[hl + 17] = (uint8_t)c;
}

/* IPv4 SYN 10.1.0.5:40000 -> 10.2.0.9:80 with options opt (a multiple of 4) and 3
 * octets of payload (so the segment length is odd). */
static size_t mk4(uint8_t *p, const uint8_t *opt, size_t optlen, uint8_t flags)
{
	size_t tot = 20 + 20 + optlen + 3;

	memset(p, 0, tot);
	p[0] = 0x45;
	p[2] = (uint8_t)(tot >> 8), p[3] = (uint8_t)tot;
	p[8] = 64, p[9] = 6;
	p[12] = 10, p[13] = 1, p[15] = 5, p[16] = 10, p[17] = 2, p[19] = 9;
	uint16_t c = (uint16_t)~ref_fold(ref_sum(p, 20, 0));
	p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	uint8_t *t = p + 20;
	t[0] = 0x9c, t[1] = 0x40, t[3] = 80;
	t[4] = 0x12, t[5] = 0x34, t[6] = 0x56, t[7] = 0x78;
	t[12] = (uint8_t)((5 + optlen / 4) << 4);
	t[13] = flags;
	t[14] = 0xfa, t[15] = 0xf0;
	memcpy(t + 20, opt, optlen);
	memcpy(t + 20 + optlen, "abc", 3);
	set_tcp_csum4(p);
	return tot;
}

static void test_v4(void **state)
{
	static const uint8_t even[4] = { 2, 4, 0x05, 0xb4 };             /* MSS 1460 */
	static const uint8_t odd[8] = { 1, 2, 4, 0x05, 0xb4, 1, 1, 0 };  /* NOP first */
	static const uint8_t odd2[8] = { 1, 2, 4, 0xff, 0x01, 1, 1, 0 }; /* MSS 65281 */
	uint8_t p[100];
	size_t n;
	uint16_t old = 0;

	(void)state;
	n = mk4(p, even, 4, 0x02);
	assert_int_equal(mss_clamp4(p, n, mss_for_mtu4(1400), &old), MSS_CLAMPED);
	assert_int_equal(old, 1460);
	assert_int_equal(p[42] << 8 | p[43], 1360);
	assert_int_equal(p[36] << 8 | p[37], tcp4_csum(p));
	/* again: now it fits */
	assert_int_equal(mss_clamp4(p, n, 1360, &old), MSS_UNCHANGED);

	const uint8_t *odds[2] = { odd, odd2 };
	for (int k = 0; k < 2; k++) {
		n = mk4(p, odds[k], 8, 0x12); /* SYN-ACK */
		assert_int_equal(mss_clamp4(p, n, 1000, &old), MSS_CLAMPED);
		assert_int_equal(p[43] << 8 | p[44], 1000);
		assert_int_equal(p[36] << 8 | p[37], tcp4_csum(p));
	}
	/* every clamp value from a big MSS: incremental == full */
	for (unsigned m = 1; m < 65281; m += 97) {
		n = mk4(p, odd2, 8, 0x02);
		assert_int_equal(mss_clamp4(p, n, (uint16_t)m, NULL), MSS_CLAMPED);
		assert_int_equal(p[36] << 8 | p[37], tcp4_csum(p));
		n = mk4(p, (const uint8_t[4]){ 2, 4, 0xff, 0xff }, 4, 0x02);
		assert_int_equal(mss_clamp4(p, n, (uint16_t)m, NULL), MSS_CLAMPED);
		assert_int_equal(p[36] << 8 | p[37], tcp4_csum(p));
	}
}

static void test_v4_refusals(void **state)
{
	uint8_t p[100];
	size_t n;
	static const uint8_t ok[4] = { 2, 4, 0x05, 0xb4 };
	static const struct {
		const char *what;
		uint8_t opt[8];
		size_t len;
		uint8_t flags;
		enum mss_result want;
	} t[] = {
		{ "ACK only", { 2, 4, 5, 0xb4 }, 4, 0x10, MSS_NOT_SYN },
		{ "no option", { 1, 1, 1, 0 }, 4, 0x02, MSS_NO_OPTION },
		{ "EOL before MSS", { 0, 0, 0, 0, 2, 4, 5, 0xb4 }, 8, 0x02, MSS_NO_OPTION },
		{ "MSS length 3", { 2, 3, 5, 0 }, 4, 0x02, MSS_BAD_OPTION },
		{ "option length 0", { 3, 0, 0, 0 }, 4, 0x02, MSS_BAD_OPTION },
		{ "option past header", { 1, 1, 8, 10 }, 4, 0x02, MSS_BAD_OPTION },
		{ "kind in last octet", { 1, 1, 1, 8 }, 4, 0x02, MSS_BAD_OPTION },
	};

	(void)state;
	for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
		n = mk4(p, t[k].opt, t[k].len, t[k].flags);
		enum mss_result r = mss_clamp4(p, n, 500, NULL);
		if (r != t[k].want)
			fail_msg("%s: %s", t[k].what, mss_result_name(r));
	}
	n = mk4(p, ok, 4, 0x02);
	p[32] = 0x40; /* data offset 4 */
	assert_int_equal(mss_clamp4(p, n, 500, NULL), MSS_TCP_BAD_DOFF);
	p[32] = 0xf0; /* 60 octets: past the 27-octet segment */
	assert_int_equal(mss_clamp4(p, n, 500, NULL), MSS_TCP_TRUNCATED);
	n = mk4(p, ok, 4, 0x02);
	p[11] ^= 1;
	assert_int_equal(mss_clamp4(p, n, 500, NULL), MSS_BAD_IP);
	n = mk4(p, ok, 4, 0x02);
	p[9] = 17;
	p[11] = 0, p[10] = 0;
	uint16_t c = (uint16_t)~ref_fold(ref_sum(p, 20, 0));
	p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	assert_int_equal(mss_clamp4(p, n, 500, NULL), MSS_NOT_SYN);
	/* IP header of 20 octets, TCP of 19 */
	assert_int_equal(mss_clamp_tcp(p + 20, 19, 500, NULL), MSS_TCP_TRUNCATED);
	assert_int_equal(mss_for_mtu4(1500), 1460);
	assert_int_equal(mss_for_mtu6(1500), 1440);
	assert_int_equal(mss_for_mtu6(2044), 1984);
	assert_string_equal(mss_result_name(MSS_BAD_OPTION), "mss_bad_option");
}

/* A SYN whose MSS is already below the limit is left byte for byte as it came (the
 * limit is a ceiling, never a value to raise to); so is the limit itself. */
static void test_v4_below_limit(void **state)
{
	static const uint8_t small[4] = { 2, 4, 0x02, 0x18 }; /* MSS 536 */
	uint8_t p[100], copy[100];
	size_t n;
	uint16_t old = 0;

	(void)state;
	n = mk4(p, small, 4, 0x02);
	memcpy(copy, p, n);
	assert_int_equal(mss_clamp4(p, n, 1360, &old), MSS_UNCHANGED);
	assert_int_equal(old, 536);
	assert_memory_equal(p, copy, n);
	assert_int_equal(mss_clamp4(p, n, 536, &old), MSS_UNCHANGED);
	assert_memory_equal(p, copy, n);
}

/* A non-first IPv4 fragment carries no TCP header: its first octets are payload that
 * happens to look like one, and must not be rewritten. */
static void test_v4_fragment(void **state)
{
	static const uint8_t mss[4] = { 2, 4, 0x05, 0xb4 };
	uint8_t p[100], copy[100];
	size_t n;

	(void)state;
	n = mk4(p, mss, 4, 0x02);
	p[6] = 0, p[7] = 1; /* offset 8 octets, last fragment */
	p[10] = p[11] = 0;
	uint16_t c = (uint16_t)~ref_fold(ref_sum(p, 20, 0));
	p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	memcpy(copy, p, n);
	assert_int_equal(mss_clamp4(p, n, 500, NULL), MSS_NOT_SYN);
	assert_memory_equal(p, copy, n);
}

static void test_v6(void **state)
{
	uint8_t p[200];
	uint16_t old;

	(void)state;
	memset(p, 0, sizeof(p));
	/* IPv6, hop-by-hop (8 octets, PadN), TCP SYN with MSS 1440, 24-octet TCP header */
	p[0] = 0x60;
	p[5] = 8 + 24;
	p[6] = 0;
	p[7] = 64;
	p[8] = 0x20, p[9] = 0x01, p[10] = 0x0d, p[11] = 0xb8, p[23] = 1;
	p[24] = 0x20, p[25] = 0x01, p[26] = 0x0d, p[27] = 0xb8, p[39] = 2;
	p[40] = 6, p[41] = 0, p[42] = 1, p[43] = 4;
	uint8_t *t = p + 48;
	t[0] = 0x9c, t[1] = 0x40, t[3] = 80, t[12] = 0x60, t[13] = 0x02;
	t[20] = 2, t[21] = 4, t[22] = 0x05, t[23] = 0xa0;
	uint16_t c = tcp6_csum(p, 48);
	t[16] = (uint8_t)(c >> 8), t[17] = (uint8_t)c;
	assert_int_equal(mss_clamp6(p, 72, mss_for_mtu6(1280), &old), MSS_CLAMPED);
	assert_int_equal(old, 1440);
	assert_int_equal(t[22] << 8 | t[23], 1220);
	assert_int_equal(t[16] << 8 | t[17], tcp6_csum(p, 48));
	p[4] = 1;
	assert_int_equal(mss_clamp6(p, 72, 1000, &old), MSS_BAD_IP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v4),
		cmocka_unit_test(test_v4_refusals),
		cmocka_unit_test(test_v4_below_limit),
		cmocka_unit_test(test_v4_fragment),
		cmocka_unit_test(test_v6),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
