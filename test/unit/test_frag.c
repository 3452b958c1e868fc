/*
 * pkt/frag: IPv4 fragmentation worked by hand (1500 octets at MTU 576: 552 + 552 + 376
 * data octets at offsets 0, 69, 138), options copied per the copied flag, fragmenting a
 * fragment, refusals, and reassembly of every split of many sizes at many MTUs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/frag.h"

static uint16_t ref_check(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	while (s > 0xffff)
		s = (s >> 16) + (s & 0xffff);
	return (uint16_t)~s;
}

static size_t mk(uint8_t *p, size_t tot, const uint8_t *opt, size_t optlen, uint16_t fragw)
{
	size_t hl = 20 + optlen;

	p[0] = (uint8_t)(0x40 | hl / 4);
	p[1] = 0;
	p[2] = (uint8_t)(tot >> 8);
	p[3] = (uint8_t)tot;
	p[4] = 0xbe, p[5] = 0xef;
	p[6] = (uint8_t)(fragw >> 8);
	p[7] = (uint8_t)fragw;
	p[8] = 64;
	p[9] = 17;
	p[10] = p[11] = 0;
	p[12] = 10, p[13] = 1, p[14] = 0, p[15] = 5;
	p[16] = 10, p[17] = 2, p[18] = 0, p[19] = 9;
	if (optlen)
		memcpy(p + 20, opt, optlen);
	uint16_t c = ref_check(p, hl);
	p[10] = (uint8_t)(c >> 8), p[11] = (uint8_t)c;
	for (size_t i = hl; i < tot; i++)
		p[i] = (uint8_t)(i * 7 + 3);
	return tot;
}

static uint8_t bufs[64][1600];

static void pieces_init(struct frag4_piece *pc, size_t n, size_t cap)
{
	for (size_t i = 0; i < n; i++) {
		pc[i].buf = bufs[i];
		pc[i].cap = cap;
		pc[i].len = 0;
	}
}

static void test_hand(void **state)
{
	uint8_t p[1500];
	struct frag4_piece pc[8];
	size_t n;
	enum ip_reason why;
	static const struct {
		size_t len;
		uint16_t fragw;
	} want[3] = { { 572, 0x2000 | 0 }, { 572, 0x2000 | 69 }, { 396, 138 } };

	(void)state;
	mk(p, 1500, NULL, 0, 0);
	struct ip4_info info;
	assert_int_equal(ip4_validate(p, 1500, &info), IP_OK);
	assert_int_equal(frag4_decide(&info, 1500), FRAG_FITS);
	assert_int_equal(frag4_decide(&info, 576), FRAG_SPLIT);
	assert_int_equal(frag4_count(p, 1500, 576), 3);
	pieces_init(pc, 8, 1600);
	assert_int_equal(frag4_fragment(p, 1500, 576, pc, 8, &n, &why), FRAG_OK);
	assert_int_equal(n, 3);
	size_t data = 20;
	for (size_t i = 0; i < 3; i++) {
		const uint8_t *b = pc[i].buf;

		assert_int_equal(pc[i].len, want[i].len);
		assert_int_equal(b[2] << 8 | b[3], want[i].len);
		assert_int_equal(b[6] << 8 | b[7], want[i].fragw);
		assert_int_equal(ref_check(b, 20), 0);
		assert_memory_equal(b + 4, p + 4, 2); /* identification kept */
		assert_memory_equal(b + 8, p + 8, 2);
		assert_memory_equal(b + 12, p + 12, 8);
		assert_memory_equal(b + 20, p + data, want[i].len - 20);
		data += want[i].len - 20;
	}
	assert_int_equal(data, 1500);

	/* DF: the caller must send frag needed */
	mk(p, 1500, NULL, 0, 0x4000);
	assert_int_equal(ip4_validate(p, 1500, &info), IP_OK);
	assert_int_equal(frag4_decide(&info, 576), FRAG_NEEDED);
	assert_int_equal(frag4_fragment(p, 1500, 576, pc, 8, &n, &why), FRAG_DF_SET);
	/* refusals */
	mk(p, 1500, NULL, 0, 0);
	assert_int_equal(frag4_fragment(p, 1500, 67, pc, 8, &n, &why), FRAG_MTU_TOO_SMALL);
	assert_int_equal(frag4_fragment(p, 1500, 576, pc, 2, &n, &why), FRAG_TOO_MANY);
	pc[1].cap = 571;
	assert_int_equal(frag4_fragment(p, 1500, 576, pc, 8, &n, &why), FRAG_BUF_TOO_SMALL);
	p[11] ^= 1;
	assert_int_equal(frag4_fragment(p, 1500, 576, pc, 8, &n, &why), FRAG_BAD_PACKET);
	assert_int_equal(why, IP4_BAD_CHECKSUM);
	assert_string_equal(frag_reason_name(FRAG_TOO_MANY), "frag_too_many");
}

static void test_options(void **state)
{
	/* copied option 0x82 (len 4), record route 0x07 (len 7, not copied), EOL pad: a
	 * 32-octet header; later fragments keep only the 4 octets of 0x82: 24 octets. */
	static const uint8_t opt[12] = { 0x82, 4, 0xaa, 0xbb, 0x07, 7, 4, 0, 0, 0, 0, 0 };
	uint8_t p[1000];
	struct frag4_piece pc[8];
	size_t n;

	(void)state;
	mk(p, 1000, opt, 12, 0);
	pieces_init(pc, 8, 1600);
	/* MTU 500: first 468 data octets (500 - 32 = 468, a multiple of 4 but 468 & ~7 =
	 * 464), later (500 - 24) & ~7 = 472. Data 968 = 464 + 472 + 32. */
	assert_int_equal(frag4_fragment(p, 1000, 500, pc, 8, &n, NULL), FRAG_OK);
	assert_int_equal(n, 3);
	assert_int_equal(pc[0].len, 32 + 464);
	assert_int_equal(pc[1].len, 24 + 472);
	assert_int_equal(pc[2].len, 24 + 32);
	assert_int_equal(pc[0].buf[0], 0x48);
	assert_memory_equal(pc[0].buf + 20, opt, 12);
	for (int i = 1; i < 3; i++) {
		static const uint8_t later[4] = { 0x82, 4, 0xaa, 0xbb };

		assert_int_equal(pc[i].buf[0], 0x46);
		assert_memory_equal(pc[i].buf + 20, later, 4);
		assert_int_equal(ref_check(pc[i].buf, 24), 0);
	}
	assert_int_equal(pc[1].buf[6] << 8 | pc[1].buf[7], 0x2000 | 58);
	assert_int_equal(pc[2].buf[6] << 8 | pc[2].buf[7], 117);
}

static void test_refragment(void **state)
{
	/* a middle fragment (offset 100 units, MF) of 1000 data octets at MTU 420:
	 * (420 - 20) & ~7 = 400: 400 + 400 + 200, offsets 100, 150, 200, all with MF */
	uint8_t p[1020];
	struct frag4_piece pc[8];
	size_t n;

	(void)state;
	mk(p, 1020, NULL, 0, 0x2000 | 100);
	pieces_init(pc, 8, 1600);
	assert_int_equal(frag4_fragment(p, 1020, 420, pc, 8, &n, NULL), FRAG_OK);
	assert_int_equal(n, 3);
	assert_int_equal(pc[0].buf[6] << 8 | pc[0].buf[7], 0x2000 | 100);
	assert_int_equal(pc[1].buf[6] << 8 | pc[1].buf[7], 0x2000 | 150);
	assert_int_equal(pc[2].buf[6] << 8 | pc[2].buf[7], 0x2000 | 200);
	/* a packet that fits is copied as one piece */
	mk(p, 100, NULL, 0, 0);
	assert_int_equal(frag4_fragment(p, 100, 1500, pc, 1, &n, NULL), FRAG_OK);
	assert_int_equal(n, 1);
	assert_memory_equal(pc[0].buf, p, 100);
	/* 60-octet header at the 68 minimum: 8 data octets per fragment */
	uint8_t opt[40];
	memset(opt, 1, sizeof(opt)); /* NOPs: not copied */
	mk(p, 100, opt, 40, 0);
	assert_int_equal(frag4_count(p, 100, 68), 1 + (40 - 8 + 47) / 48);
}

/* Reassemble and compare: data in order, first header = original's, MF of the last
 * equals the original's. */
static void check_reassembly(const uint8_t *p, size_t len, unsigned mtu)
{
	struct frag4_piece pc[64];
	struct ip4_info o, f;
	size_t n, data = 0;
	uint8_t out[1600];

	assert_int_equal(ip4_validate(p, len, &o), IP_OK);
	pieces_init(pc, 64, 1600);
	assert_int_equal(frag4_fragment(p, len, mtu, pc, 64, &n, NULL), FRAG_OK);
	for (size_t i = 0; i < n; i++) {
		assert_true(pc[i].len <= mtu);
		assert_int_equal(ip4_validate(pc[i].buf, pc[i].len, &f), IP_OK);
		assert_int_equal(f.frag_off, o.frag_off + data);
		assert_int_equal(f.mf, i + 1 < n ? true : o.mf);
		memcpy(out + data, pc[i].buf + f.hdr_len, f.tot_len - f.hdr_len);
		data += f.tot_len - f.hdr_len;
	}
	assert_int_equal(data, o.tot_len - o.hdr_len);
	assert_memory_equal(out, p + o.hdr_len, data);
	assert_memory_equal(pc[0].buf + 20, p + 20, o.hdr_len - 20);
}

static void test_reassembly(void **state)
{
	static const uint8_t opt[8] = { 0x83, 7, 4, 1, 2, 3, 4, 0 }; /* LSRR is refused: */
	static const uint8_t opt2[8] = { 0x94, 4, 0, 0, 0x07, 3, 4, 0 };
	uint8_t p[1500];

	(void)state;
	mk(p, 200, opt, 8, 0);
	assert_int_equal(frag4_count(p, 200, 100), 0);
	for (size_t len = 21; len <= 1500; len += 37)
		for (unsigned mtu = 68; mtu <= 1500; mtu += 29) {
			mk(p, len, NULL, 0, 0);
			check_reassembly(p, len, mtu);
			if (len >= 28) {
				mk(p, len, opt2, 8, 0);
				check_reassembly(p, len, mtu);
			}
		}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hand),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_refragment),
		cmocka_unit_test(test_reassembly),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
