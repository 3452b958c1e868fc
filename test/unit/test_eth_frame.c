/*
 * The Ethernet frame parser (pkt/eth_frame.h): every accepted shape with its ethertype
 * and L3 offset, and every refusal with its precise reason, table-driven.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "pkt/eth_frame.h"

#define MACS 0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2

struct vec {
	const char *what;
	uint8_t frame[40];
	size_t len;
	enum ethf_result want;
	uint16_t type, l3_off;
	uint8_t n_tags;
	uint16_t outer_tpid, outer_tci, inner_tci;
};

static const struct vec vecs[] = {
	{ "IPv4", { MACS, 0x08, 0x00, 0x45 }, 15, ETHF_OK, 0x0800, 14, 0, 0, 0, 0 },
	{ "header only", { MACS, 0x86, 0xdd }, 14, ETHF_OK, 0x86dd, 14, 0, 0, 0, 0 },
	{ "ARP", { MACS, 0x08, 0x06 }, 42, ETHF_OK, 0x0806, 14, 0, 0, 0, 0 },
	{ "smallest type 0x0600", { MACS, 0x06, 0x00 }, 14, ETHF_OK, 0x0600, 14, 0, 0, 0, 0 },
	{ "802.1Q",
	  { MACS, 0x81, 0x00, 0x20, 0x64, 0x08, 0x00 },
	  18,
	  ETHF_OK,
	  0x0800,
	  18,
	  1,
	  0x8100,
	  0x2064,
	  0 },
	{ "802.1Q VID 0 (priority tag)",
	  { MACS, 0x81, 0x00, 0xe0, 0x00, 0x86, 0xdd },
	  18,
	  ETHF_OK,
	  0x86dd,
	  18,
	  1,
	  0x8100,
	  0xe000,
	  0 },
	{ "802.1ad alone",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x08, 0x06 },
	  18,
	  ETHF_OK,
	  0x0806,
	  18,
	  1,
	  0x88a8,
	  0x000a,
	  0 },
	{ "QinQ",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00 },
	  22,
	  ETHF_OK,
	  0x0800,
	  22,
	  2,
	  0x88a8,
	  0x000a,
	  0x0064 },
	{ "empty", { 0 }, 0, ETHF_ERR_RUNT, 0, 0, 0, 0, 0, 0 },
	{ "13 bytes", { MACS, 0x08 }, 13, ETHF_ERR_RUNT, 0, 0, 0, 0, 0, 0 },
	{ "multicast source",
	  { 0x02, 0, 0, 0, 0, 1, 0x01, 0, 0x5e, 0, 0, 1, 0x08, 0x00 },
	  14,
	  ETHF_ERR_SRC_MULTICAST,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "tag cut after TPID", { MACS, 0x81, 0x00 }, 14, ETHF_ERR_TAG_RUNT, 0, 0, 0, 0, 0, 0 },
	{ "tag cut inside TCI",
	  { MACS, 0x81, 0x00, 0x00 },
	  15,
	  ETHF_ERR_TAG_RUNT,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "tag without inner type",
	  { MACS, 0x81, 0x00, 0x00, 0x64 },
	  16,
	  ETHF_ERR_TAG_RUNT,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "tag with half a type",
	  { MACS, 0x81, 0x00, 0x00, 0x64, 0x08 },
	  17,
	  ETHF_ERR_TAG_RUNT,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "QinQ cut in inner tag",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00 },
	  19,
	  ETHF_ERR_TAG_RUNT,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "802.3 length", { MACS, 0x00, 0x2e }, 60, ETHF_ERR_LLC, 0, 0, 0, 0, 0, 0 },
	{ "802.3 length 1500", { MACS, 0x05, 0xdc }, 60, ETHF_ERR_LLC, 0, 0, 0, 0, 0, 0 },
	{ "type 1501", { MACS, 0x05, 0xdd }, 60, ETHF_ERR_BAD_TYPE, 0, 0, 0, 0, 0, 0 },
	{ "type 0x05ff", { MACS, 0x05, 0xff }, 60, ETHF_ERR_BAD_TYPE, 0, 0, 0, 0, 0, 0 },
	{ "LLC inside a tag",
	  { MACS, 0x81, 0x00, 0x00, 0x64, 0x00, 0x40 },
	  18,
	  ETHF_ERR_LLC,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "C-tag in C-tag",
	  { MACS, 0x81, 0x00, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64, 0x08, 0x00 },
	  22,
	  ETHF_ERR_TAG_NESTING,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "S-tag in C-tag",
	  { MACS, 0x81, 0x00, 0x00, 0x0a, 0x88, 0xa8, 0x00, 0x64, 0x08, 0x00 },
	  22,
	  ETHF_ERR_TAG_NESTING,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "S-tag in S-tag",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x88, 0xa8, 0x00, 0x64, 0x08, 0x00 },
	  22,
	  ETHF_ERR_TAG_NESTING,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "three tags",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64, 0x81, 0x00, 0, 1, 0x08, 0x00 },
	  26,
	  ETHF_ERR_TOO_MANY_TAGS,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "VID 4095",
	  { MACS, 0x81, 0x00, 0x0f, 0xff, 0x08, 0x00 },
	  18,
	  ETHF_ERR_VID_RESERVED,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
	{ "inner VID 4095",
	  { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x2f, 0xff, 0x08, 0x00 },
	  22,
	  ETHF_ERR_VID_RESERVED,
	  0,
	  0,
	  0,
	  0,
	  0,
	  0 },
};

static void test_table(void **state)
{
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
		const struct vec *v = &vecs[i];
		struct ethf_info fi;
		enum ethf_result r = ethf_parse(v->frame, v->len, &fi);

		if (r != v->want)
			fail_msg("%s: got %s, want %s", v->what, ethf_result_name(r),
				 ethf_result_name(v->want));
		if (r != ETHF_OK)
			continue;
		assert_int_equal(fi.ethertype, v->type);
		assert_int_equal(fi.l3_off, v->l3_off);
		assert_int_equal(fi.n_tags, v->n_tags);
		assert_int_equal(fi.outer_tpid, v->outer_tpid);
		assert_int_equal(fi.outer_tci, v->outer_tci);
		assert_int_equal(fi.inner_tci, v->inner_tci);
	}
}

/* The parser reads nothing beyond len: every prefix of a valid QinQ frame is refused
 * (or accepted only once complete), checked with the bytes after len poisoned. */
static void test_prefixes(void **state)
{
	static const uint8_t qinq[] = { MACS, 0x88, 0xa8, 0x00, 0x0a, 0x81,
					0x00, 0x00, 0x64, 0x08, 0x00, 0x45 };
	uint8_t buf[sizeof(qinq)];
	struct ethf_info fi;
	size_t n;

	(void)state;
	for (n = 0; n <= sizeof(qinq); n++) {
		memset(buf, 0x81, sizeof(buf));
		memcpy(buf, qinq, n);
		if (n < 22)
			assert_int_not_equal(ethf_parse(buf, n, &fi), ETHF_OK);
		else
			assert_int_equal(ethf_parse(buf, n, &fi), ETHF_OK);
	}
}

static void test_names(void **state)
{
	int r;

	(void)state;
	for (r = 0; r < ETHF_ERR_MAX; r++)
		assert_string_not_equal(ethf_result_name(r), "unknown");
	assert_string_equal(ethf_result_name(ETHF_ERR_MAX), "unknown");
	assert_string_equal(ethf_result_name(ETHF_ERR_TAG_NESTING), "tag_nesting");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
