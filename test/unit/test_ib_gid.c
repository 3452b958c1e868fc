/*
 * GID text: canonical printing (RFC 5952), parsing with a reason for every refusal,
 * and the prefix/GUID, multicast and link-local helpers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_gid.h"

static void roundtrip(const char *in, const char *canon)
{
	union ib_gid g, g2;
	char buf[IB_GID_STRLEN];

	assert_int_equal(ib_gid_parse(in, &g), 0);
	assert_int_equal(ib_gid_format(&g, buf, sizeof(buf)), (int)strlen(canon));
	assert_string_equal(buf, canon);
	assert_int_equal(ib_gid_parse(buf, &g2), 0);
	assert_true(ib_gid_equal(&g, &g2));
}

static void test_format_canonical(void **state)
{
	(void)state;
	roundtrip("fe80:0000:0000:0000:0002:c903:0001:1234", "fe80::2:c903:1:1234");
	roundtrip("FE80::2:C903:1:1234", "fe80::2:c903:1:1234");
	roundtrip("ff12:401b:ffff:0:0:0:ffff:ffff", "ff12:401b:ffff::ffff:ffff");
	roundtrip("::", "::");
	roundtrip("::1", "::1");
	roundtrip("1::", "1::");
	/* A single zero group is not shortened (RFC 5952 4.2.2). */
	roundtrip("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7");
	/* Longest run wins; on a tie the first (4.2.3). */
	roundtrip("1:0:0:2:0:0:0:3", "1:0:0:2::3");
	roundtrip("1:0:0:2:3:0:0:4", "1::2:3:0:0:4");
	roundtrip("fec0:0:0:1::1234", "fec0:0:0:1::1234");
	roundtrip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
		  "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
}

static void test_parse_octets(void **state)
{
	static const uint8_t want[16] = { 0xfe, 0x80, 0,    0,    0,    0,    0,    0,
					  0x00, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x12, 0x34 };
	union ib_gid g;

	(void)state;
	assert_int_equal(ib_gid_parse("fe80::2:c903:1:1234", &g), 0);
	assert_memory_equal(g.raw, want, 16);
	assert_true(ib_gid_prefix(&g) == 0xfe80000000000000ull);
	assert_true(ib_gid_guid(&g) == 0x0002c90300011234ull);
}

static void refuse(const char *in, const char *why_want)
{
	union ib_gid g;
	const char *why = NULL;

	assert_int_equal(ib_gid_parse_why(in, &g, &why), -EINVAL);
	assert_non_null(why);
	assert_string_equal(why, why_want);
}

static void test_parse_refuses(void **state)
{
	union ib_gid g;

	(void)state;
	refuse("", "empty");
	assert_int_equal(ib_gid_parse(NULL, &g), -EINVAL);
	refuse(":1::", "starts with a single ':'");
	refuse("1::2::3", "more than one '::'");
	refuse("12345::", "group longer than 4 hex digits");
	refuse("::ffff:10.0.0.1", "dotted IPv4 form is not a GID");
	refuse("1:2:3:4:5:6:7", "fewer than 8 groups and no '::'");
	refuse("1:2:3:4:5:6:7:8:9", "more than 8 groups");
	refuse("1:2:3:4::5:6:7:8", "'::' with 8 groups besides");
	refuse("1:2:3:4:5:6:7:", "ends with a single ':'");
	refuse("fe80::g", "character other than hex digit or ':'");
	refuse("fe80::1 ", "character other than hex digit or ':'");
	refuse(":::", "empty group");
	refuse("fe80:::1", "empty group");
	refuse("0000:0000:0000:0000:0000:0000:0000:00001", "longer than 39 characters");
}

static void test_format_short_buffer(void **state)
{
	union ib_gid g;
	char buf[IB_GID_STRLEN];

	(void)state;
	assert_int_equal(ib_gid_parse("fe80::2:c903:1:1234", &g), 0);
	assert_int_equal(ib_gid_format(&g, buf, 19), -ENOSPC); /* 19 chars need 20 */
	assert_int_equal(ib_gid_format(&g, buf, 20), 19);
}

static void test_helpers(void **state)
{
	union ib_gid g;

	(void)state;
	ib_gid_set(&g, IB_GID_LINK_LOCAL_PREFIX, 0x0002c90300011234ull);
	assert_true(ib_gid_is_link_local(&g));
	assert_false(ib_gid_is_multicast(&g));
	assert_false(ib_gid_is_zero(&g));
	/* fe80:0:0:1::/64 is not the link-local prefix (IBA: all 64 bits fe80::). */
	ib_gid_set(&g, 0xfe80000000000001ull, 1);
	assert_false(ib_gid_is_link_local(&g));
	assert_int_equal(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &g), 0);
	assert_true(ib_gid_is_multicast(&g));
	assert_false(ib_gid_is_link_local(&g));
	assert_int_equal(ib_mgid_scope(&g), IB_MGID_SCOPE_LINK);
	assert_int_equal(ib_gid_parse("::", &g), 0);
	assert_true(ib_gid_is_zero(&g));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_canonical), cmocka_unit_test(test_parse_octets),
		cmocka_unit_test(test_parse_refuses),    cmocka_unit_test(test_format_short_buffer),
		cmocka_unit_test(test_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
