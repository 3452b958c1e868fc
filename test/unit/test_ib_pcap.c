/*
 * pcap/ERF writer: the octets of the file header and of one record, worked out from
 * the pcap and ERF layouts, and a file written to disk read back.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lib/ib_bytes.h"
#include "lib/ib_pcap.h"

static void test_file_header(void **state)
{
	/* magic a1b2c3d4 LE, version 2.4, zone 0, sigfigs 0, snaplen 65535, link 197. */
	static const uint8_t want[] = { 0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00,
					0,    0,    0,    0,    0,    0,    0,    0,
					0xff, 0xff, 0x00, 0x00, 0xc5, 0x00, 0x00, 0x00 };
	uint8_t buf[IB_PCAP_FILE_HDR_LEN];

	(void)state;
	assert_int_equal(ib_pcap_file_header(buf, sizeof(buf), 65535, IB_PCAP_LINKTYPE_ERF),
			 IB_PCAP_FILE_HDR_LEN);
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(ib_pcap_file_header(buf, 23, 65535, IB_PCAP_LINKTYPE_ERF), -ENOSPC);
	/* gwctl capture's: its snaplen and link type (IPoIB, 242) */
	assert_int_equal(ib_pcap_file_header(buf, sizeof(buf), 262144, 242), IB_PCAP_FILE_HDR_LEN);
	assert_memory_equal(buf, want, 16);
	assert_int_equal(ib_get_le32(buf + 16), 262144);
	assert_int_equal(ib_get_le32(buf + 20), 242);
}

static void test_record(void **state)
{
	/* 6-octet packet at 1.5 s: pcap ts 1 s 500000 us, caplen = len = 16 + 6 = 22;
	 * ERF ts LE 64-bit (1 << 32 | 0x80000000): 00 00 00 80 01 00 00 00; type 21;
	 * flags 04; rlen 22 BE; lctr 0; wlen 6 BE. */
	static const uint8_t pkt[6] = { 1, 2, 3, 4, 5, 6 };
	static const uint8_t want[] = {
		0x01, 0x00, 0x00, 0x00, 0x20, 0xa1, 0x07, 0x00, 0x16, 0x00, 0x00, 0x00, 0x16,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x15, 0x04,
		0x00, 0x16, 0x00, 0x00, 0x00, 0x06, 1,    2,    3,    4,    5,    6,
	};
	uint8_t buf[64];

	(void)state;
	assert_int_equal(ib_erf_record(buf, sizeof(buf), pkt, sizeof(pkt), 1500000000ull),
			 (int)sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(ib_erf_record(buf, sizeof(want) - 1, pkt, sizeof(pkt), 0), -ENOSPC);
	assert_int_equal(ib_erf_record(buf, sizeof(buf), pkt, 65520, 0), -EMSGSIZE);
}

static void test_file(void **state)
{
	char path[] = "/tmp/ibgw-pcap-test.XXXXXX";
	uint8_t pkt[38], back[200];
	int fd = mkstemp(path);
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w+b");
	assert_non_null(f);
	memset(pkt, 0x5a, sizeof(pkt));
	assert_int_equal(ib_pcap_write_header(f), 0);
	assert_int_equal(ib_pcap_write_packet(f, pkt, sizeof(pkt), 7000000000ull), 0);
	assert_int_equal(ib_pcap_write_packet(f, pkt, 10, 7000001000ull), 0);
	rewind(f);
	size_t n = fread(back, 1, sizeof(back), f);
	fclose(f);
	unlink(path);
	assert_int_equal(n, 24 + (32 + 38) + (32 + 10));
	assert_int_equal(back[20], 197);
	assert_int_equal(back[24], 7);           /* seconds of record 1 */
	assert_int_equal(back[24 + 16 + 8], 21); /* ERF type */
	assert_memory_equal(back + 24 + 32, pkt, sizeof(pkt));
	assert_int_equal(back[24 + 70 + 4], 1);  /* 1 us */
	assert_int_equal(back[24 + 70 + 8], 26); /* caplen 16 + 10 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_header),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
