/*
 * ICRC and VCRC: check values, a second independent CRC-16 implementation, the
 * variant-field masking for local and global packets, and Linux rxe's RoCE seed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_crc.h"

/* Local UD packet, LRH through payload (the ICRC input), see test_ib_packet.c for the
 * field-by-field derivation: VL 1, LNH 2, DLID 1, PktLen 9, SLID 2; BTH UD SEND only,
 * P_Key ffff, DestQP 1; DETH Q_Key 0xb1b, SrcQP 0x48; payload "ABCD". */
static const uint8_t local_pkt[] = {
	0x10, 0x02, 0x00, 0x01, 0x00, 0x09, 0x00, 0x02,                         /* LRH */
	0x64, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, /* BTH */
	0x00, 0x00, 0x0b, 0x1b, 0x00, 0x00, 0x00, 0x48,                         /* DETH */
	0x41, 0x42, 0x43, 0x44,                                                 /* payload */
};

static void test_crc32_check_value(void **state)
{
	(void)state;
	/* The CRC-32 catalogue check value: the ICRC's CRC is Ethernet's. */
	assert_int_equal(ib_crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
	assert_int_equal(ib_crc32(NULL, 0), 0);
}

static void test_crc32_rxe_seed(void **state)
{
	uint8_t ones[8];

	(void)state;
	/* Linux rxe starts every RoCE ICRC from 0xdebb20e3: "the CRC of 8 bytes of 0xFF
	 * representing a masked LRH". Our register after 8 octets of ones must agree. */
	memset(ones, 0xff, sizeof(ones));
	assert_int_equal(ib_crc32_update(0xffffffffu, ones, 8), 0xdebb20e3u);
}

/* A second CRC-16 implementation, written from the polynomial alone: shift most
 * significant bit first (non-reflected) through x^16 + x^12 + x^3 + x + 1 = 0x100B,
 * feeding each octet bit-reversed, and bit-reverse the result. That is the reflected
 * CRC by definition, computed without any table or reversed constant. */
static uint8_t rev8(uint8_t b)
{
	uint8_t r = 0;

	for (int i = 0; i < 8; i++)
		r = (uint8_t)(r << 1 | ((b >> i) & 1));
	return r;
}

static uint16_t rev16(uint16_t v)
{
	return (uint16_t)(rev8((uint8_t)v) << 8 | rev8((uint8_t)(v >> 8)));
}

static uint16_t vcrc_msb_first(const uint8_t *p, size_t n)
{
	uint16_t c = 0xffff;

	for (size_t i = 0; i < n; i++) {
		c ^= (uint16_t)(rev8(p[i]) << 8);
		for (int k = 0; k < 8; k++)
			c = (c & 0x8000) ? (uint16_t)(c << 1 ^ 0x100b) : (uint16_t)(c << 1);
	}
	return (uint16_t)~rev16(c);
}

static void test_vcrc_second_implementation(void **state)
{
	uint8_t buf[300];
	uint32_t x = 12345;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t n = 0; n <= sizeof(buf); n += 7)
		assert_int_equal(ib_vcrc_compute(buf, n), vcrc_msb_first(buf, n));
	/* Check value of this CRC-16 (poly 0x100B, reflected, init and xorout 0xFFFF),
	 * from the bitwise implementation above and a third one in Python. */
	assert_int_equal(ib_vcrc_compute((const uint8_t *)"123456789", 9), 0x0a3d);
	assert_int_equal(vcrc_msb_first((const uint8_t *)"123456789", 9), 0x0a3d);
}

/* Bit at a time from the reflected polynomial, against the 8-byte slices: every length
 * from 0 to 300 and every start offset 0..7, whole and fed in two pieces. */
static uint32_t crc32_bitwise(uint32_t c, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return c;
}

static void test_crc32_slices(void **state)
{
	uint8_t buf[308];
	uint32_t x = 777;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 300; n++) {
			uint32_t want = crc32_bitwise(0xffffffffu, buf + off, n);

			assert_int_equal(ib_crc32_update(0xffffffffu, buf + off, n), want);
			assert_int_equal(
			    ib_crc32_update(ib_crc32_update(0xffffffffu, buf + off, n / 3),
					    buf + off + n / 3, n - n / 3),
			    want);
		}
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 300; n++)
			assert_int_equal(ib_vcrc_compute(buf + off, n),
					 vcrc_msb_first(buf + off, n));
}

/* Runs of 64 octets and more take the carry-less multiply fold where the CPU has one:
 * packet-sized lengths (up to the longest IB packet and past it), every start offset
 * mod 16, any register value, and pieces that end inside and outside a 16-octet block. */
static void test_crc_long_runs(void **state)
{
	static uint8_t buf[4400];
	uint32_t x = 4242;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t n = 60; n <= 4300; n += 29) {
		size_t off = n % 16, cut = n / 5 + (n & 7);
		uint32_t seed = x = x * 1103515245u + 12345u;
		uint32_t want = crc32_bitwise(seed, buf + off, n);
		uint16_t vwant = vcrc_msb_first(buf + off, n);

		assert_int_equal(ib_crc32_update(seed, buf + off, n), want);
		assert_int_equal(ib_crc32_update(ib_crc32_update(seed, buf + off, cut),
						 buf + off + cut, n - cut),
				 want);
		assert_int_equal(ib_vcrc_compute(buf + off, n), vwant);
		assert_int_equal((uint16_t)~ib_crc16_update(ib_crc16_update(0xffff, buf + off, cut),
							    buf + off + cut, n - cut),
				 vwant);
	}
}

static void test_icrc_local_vector(void **state)
{
	uint32_t icrc;

	(void)state;
	/* Expected value from Python's zlib.crc32 (an independent CRC-32) over the same
	 * octets with the variant fields set to ones by hand: octet 0 0x10 -> 0xf0 (VL),
	 * BTH octet 4 (packet octet 12) 0x00 -> 0xff. */
	assert_int_equal(ib_icrc_compute(local_pkt, sizeof(local_pkt), &icrc), 0);
	assert_int_equal(icrc, 0x6776f264u);
}

static void test_icrc_local_masking(void **state)
{
	uint8_t p[sizeof(local_pkt)];
	uint32_t ref, icrc;

	(void)state;
	assert_int_equal(ib_icrc_compute(local_pkt, sizeof(local_pkt), &ref), 0);
	/* Variant: VL (high nibble of octet 0) and BTH resv8a (FECN/BECN): no change. */
	memcpy(p, local_pkt, sizeof(p));
	p[0] = 0xe0;
	p[12] = 0xc0;
	assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), 0);
	assert_int_equal(icrc, ref);
	/* Invariant: LVer, SL, DLID, SLID, P_Key, payload: each changes it. */
	static const size_t invariant[] = { 1, 3, 7, 10, 28 };
	for (size_t i = 0; i < sizeof(invariant) / sizeof(invariant[0]); i++) {
		memcpy(p, local_pkt, sizeof(p));
		p[invariant[i]] ^= 0x10;
		assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), 0);
		assert_int_not_equal(icrc, ref);
	}
}

/* Global packet (LNH 3), LRH through pad; derivation in test_ib_packet.c. */
static const uint8_t global_pkt[] = {
	0x10, 0x03, 0xc0, 0x00, 0x00, 0x14, 0x00, 0x02, /* LRH */
	0x60, 0xa1, 0x23, 0x45, 0x00, 0x20, 0x1b, 0x40, /* GRH: IPVer TClass FL PayLen NH HL */
	0xfe, 0x80, 0,    0,    0,    0,    0,    0,    0x00, 0x02, 0xc9, 0x03,
	0x00, 0x01, 0x12, 0x34, /* SGID */
	0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0,    0,    0,    0,    0,    0,
	0xff, 0xff, 0xff, 0xff,                                                 /* DGID */
	0x64, 0x30, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x05, /* BTH */
	0x00, 0x00, 0x0b, 0x1b, 0x00, 0x00, 0x00, 0x48,                         /* DETH */
	0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, /* "hello" + 3 pad */
};

static void test_icrc_global_vector_and_rxe(void **state)
{
	uint8_t masked[sizeof(global_pkt)];
	uint32_t icrc, rxe;

	(void)state;
	/* zlib.crc32 with LRH all ones, GRH octets 0 (low nibble), 1-3 and 7 ones, BTH
	 * octet 4 ones. */
	assert_int_equal(ib_icrc_compute(global_pkt, sizeof(global_pkt), &icrc), 0);
	assert_int_equal(icrc, 0x615cc97au);

	/* rxe's construction for RoCE v2: seed 0xdebb20e3 (the 8 masked LRH octets), then
	 * the IPv6 header masked the same way (traffic class, flow label, hop limit), the
	 * BTH with resv8a ones, the rest. Without a UDP header (IB has none) it must give
	 * the IB global-packet ICRC. */
	memcpy(masked, global_pkt, sizeof(masked));
	masked[8] |= 0x0f;
	memset(masked + 9, 0xff, 3);
	masked[15] = 0xff;
	masked[48 + 4] = 0xff;
	rxe = ~ib_crc32_update(0xdebb20e3u, masked + 8, sizeof(masked) - 8);
	assert_int_equal(rxe, icrc);
}

static void test_icrc_global_masking(void **state)
{
	uint8_t p[sizeof(global_pkt)];
	uint32_t ref, icrc;

	(void)state;
	assert_int_equal(ib_icrc_compute(global_pkt, sizeof(global_pkt), &ref), 0);
	/* Routers rewrite the LRH, TClass, FlowLabel, HopLmt: none of them count. */
	memcpy(p, global_pkt, sizeof(p));
	p[0] = 0x70;
	p[2] = 0x12;
	p[3] = 0x34;
	p[6] = 0x56;
	p[8] = 0x6f;
	p[9] = 0x00;
	p[11] = 0x00;
	p[15] = 0x01;
	p[52] = 0x40;
	assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), 0);
	assert_int_equal(icrc, ref);
	/* LNH itself stays (it is inside the all-ones LRH, but switching it to local
	 * moves the BTH): only check invariant GRH parts. */
	static const size_t invariant[] = { 12, 14, 16, 40, 49, 60 };
	for (size_t i = 0; i < sizeof(invariant) / sizeof(invariant[0]); i++) {
		memcpy(p, global_pkt, sizeof(p));
		p[invariant[i]] ^= 0x01;
		assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), 0);
		assert_int_not_equal(icrc, ref);
	}
}

static void test_icrc_refuses(void **state)
{
	uint8_t p[sizeof(local_pkt)];
	uint32_t icrc = 0;

	(void)state;
	assert_int_equal(ib_icrc_compute(local_pkt, 7, &icrc), -EMSGSIZE);
	assert_int_equal(ib_icrc_compute(local_pkt, 19, &icrc), -EMSGSIZE); /* BTH cut */
	assert_int_equal(ib_icrc_compute(global_pkt, 59, &icrc), -EMSGSIZE);
	memcpy(p, local_pkt, sizeof(p));
	p[1] = 0x00; /* LNH raw: no ICRC */
	assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), -EINVAL);
	p[1] = 0x01; /* LNH IP non-IBA */
	assert_int_equal(ib_icrc_compute(p, sizeof(p), &icrc), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32_check_value),
		cmocka_unit_test(test_crc32_rxe_seed),
		cmocka_unit_test(test_vcrc_second_implementation),
		cmocka_unit_test(test_crc32_slices),
		cmocka_unit_test(test_icrc_local_vector),
		cmocka_unit_test(test_icrc_local_masking),
		cmocka_unit_test(test_icrc_global_vector_and_rxe),
		cmocka_unit_test(test_icrc_global_masking),
		cmocka_unit_test(test_icrc_refuses),
		cmocka_unit_test(test_crc_long_runs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
