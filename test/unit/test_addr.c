/*
 * Unit tests for lib/addr.c: table-driven cases for the address and prefix parsers
 * (what they accept, what they refuse), formatting back to canonical text, and the
 * containment, overlap and masking helpers the config checks and route tables use.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <cmocka.h>

#include "lib/addr.h"

struct addr_case {
	const char *text;
	int rc;
	const char *canon; /* formatted back, when rc == 0 */
};

static const struct addr_case addr_cases[] = {
	{ "10.0.0.1", 0, "10.0.0.1" },
	{ "0.0.0.0", 0, "0.0.0.0" },
	{ "255.255.255.255", 0, "255.255.255.255" },
	{ "fe80::1", 0, "fe80::1" },
	{ "FEC0:0:0:1::1234", 0, "fec0:0:0:1::1234" },
	{ "fec0:0000:0000:0001:0000:0000:0000:0001", 0, "fec0:0:0:1::1" },
	{ "::", 0, "::" },
	{ "::ffff:10.0.0.1", 0, "::ffff:10.0.0.1" },
	{ "", -EINVAL, NULL },
	{ "010.0.0.1", -EINVAL, NULL }, /* leading zero: octal in some parsers */
	{ "10.1", -EINVAL, NULL },      /* short form */
	{ "256.0.0.1", -EINVAL, NULL },
	{ "10.0.0.1 ", -EINVAL, NULL },
	{ " 10.0.0.1", -EINVAL, NULL },
	{ "10.0.0.1/24", -EINVAL, NULL },
	{ "fe80::1%eth0", -EINVAL, NULL },
	{ "1:2:3:4:5:6:7:8:9", -EINVAL, NULL },
	{ "fe80:::1", -EINVAL, NULL },
	{ "0x0a000001", -EINVAL, NULL },
	{ "gateway", -EINVAL, NULL },
};

static void test_addr_parse_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(addr_cases) / sizeof(addr_cases[0]); i++) {
		const struct addr_case *c = &addr_cases[i];
		struct ip_addr a;
		char buf[IP_ADDR_STRLEN];
		int rc = ip_addr_parse(c->text, &a);

		if (rc != c->rc)
			fail_msg("ip_addr_parse('%s') = %d, expected %d", c->text, rc, c->rc);
		if (rc == 0)
			assert_string_equal(ip_addr_format(&a, buf, sizeof(buf)), c->canon);
	}
}

struct prefix_case {
	const char *text;
	bool host_bits;
	int rc;
	const char *canon;
};

static const struct prefix_case prefix_cases[] = {
	{ "10.0.0.0/8", false, 0, "10.0.0.0/8" },
	{ "10.0.0.1/24", true, 0, "10.0.0.1/24" },
	{ "10.0.0.1/24", false, -EINVAL, NULL }, /* host bits set */
	{ "10.0.0.1", false, 0, "10.0.0.1/32" }, /* bare address: host prefix */
	{ "0.0.0.0/0", false, 0, "0.0.0.0/0" },
	{ "1.0.0.0/0", false, -EINVAL, NULL },
	{ "10.0.0.0/32", false, 0, "10.0.0.0/32" },
	{ "10.0.0.0/33", false, -EINVAL, NULL },
	{ "10.0.0.0/08", false, -EINVAL, NULL }, /* leading zero in the length */
	{ "10.0.0.0/", false, -EINVAL, NULL },
	{ "10.0.0.0/-1", false, -EINVAL, NULL },
	{ "10.0.0.0/+8", false, -EINVAL, NULL },
	{ "10.0.0.0/8/8", false, -EINVAL, NULL },
	{ "10.0.0.0/1000", false, -EINVAL, NULL },
	{ "/8", false, -EINVAL, NULL },
	{ "fd00::/64", false, 0, "fd00::/64" },
	{ "fec0:0:0:1::/64", false, 0, "fec0:0:0:1::/64" },
	{ "fd00::1/64", true, 0, "fd00::1/64" },
	{ "fd00::1/64", false, -EINVAL, NULL },
	{ "fd00::/128", false, 0, "fd00::/128" },
	{ "fd00::/129", false, -EINVAL, NULL },
	{ "::/0", false, 0, "::/0" },
	{ "fd00::", false, 0, "fd00::/128" },
	{ "10.0.0.128/25", false, 0, "10.0.0.128/25" },
	{ "10.0.0.64/25", false, -EINVAL, NULL },
	{ "", false, -EINVAL, NULL },
};

static void test_prefix_parse_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(prefix_cases) / sizeof(prefix_cases[0]); i++) {
		const struct prefix_case *c = &prefix_cases[i];
		struct ip_prefix p;
		char buf[IP_PREFIX_STRLEN];
		int rc = ip_prefix_parse(c->text, c->host_bits, &p);

		if (rc != c->rc)
			fail_msg("ip_prefix_parse('%s', %d) = %d, expected %d", c->text,
				 c->host_bits, rc, c->rc);
		if (rc == 0)
			assert_string_equal(ip_prefix_format(&p, buf, sizeof(buf)), c->canon);
	}
}

static struct ip_prefix P(const char *text) {
	struct ip_prefix p;

	assert_int_equal(ip_prefix_parse(text, true, &p), 0);
	return p;
}

static struct ip_addr
A(const char *text) {
	struct ip_addr a;

	assert_int_equal(ip_addr_parse(text, &a), 0);
	return a;
}

static void
test_contains(void **state)
{
	struct ip_prefix p = P("10.1.0.0/16"), all = P("0.0.0.0/0"), p6 = P("fd00:1::/33");
	struct ip_addr in = A("10.1.255.255"), out = A("10.2.0.0"), v6 = A("::a01:0");

	(void)state;
	assert_true(ip_prefix_contains(&p, &in));
	assert_false(ip_prefix_contains(&p, &out));
	assert_false(ip_prefix_contains(&p, &v6)); /* families differ */
	assert_true(ip_prefix_contains(&all, &out));
	struct ip_addr a6 = A("fd00:1:7fff::1"), b6 = A("fd00:1:8000::1");
	assert_true(ip_prefix_contains(&p6, &a6));
	assert_false(ip_prefix_contains(&p6, &b6));
}

static void test_overlap(void **state)
{
	struct ip_prefix a = P("10.0.0.1/24"), b = P("10.0.0.200/25"), c = P("10.0.1.1/24"),
			 d = P("10.0.0.0/8"), e = P("fd00::/8"), f = P("fd00::1/128");

	(void)state;
	assert_true(ip_prefix_overlap(&a, &b));
	assert_true(ip_prefix_overlap(&b, &a));
	assert_false(ip_prefix_overlap(&a, &c));
	assert_true(ip_prefix_overlap(&c, &d));
	assert_false(ip_prefix_overlap(&a, &e));
	assert_true(ip_prefix_overlap(&e, &f));
}

static void test_mask_and_equal(void **state)
{
	struct ip_prefix p = P("10.1.2.3/12"), q = P("fd00:ffff::1/17"), z = P("1.2.3.4/0");
	char buf[IP_PREFIX_STRLEN];

	(void)state;
	ip_prefix_mask(&p);
	assert_string_equal(ip_prefix_format(&p, buf, sizeof(buf)), "10.0.0.0/12");
	ip_prefix_mask(&q);
	assert_string_equal(ip_prefix_format(&q, buf, sizeof(buf)), "fd00:8000::/17");
	ip_prefix_mask(&z);
	assert_string_equal(ip_prefix_format(&z, buf, sizeof(buf)), "0.0.0.0/0");

	struct ip_addr x = A("10.0.0.1"), y = A("10.0.0.1"), w = A("::a00:1");
	assert_true(ip_addr_equal(&x, &y));
	assert_false(ip_addr_equal(&x, &w));
	assert_int_equal(ip_addr_bits(&x), 32);
	assert_int_equal(ip_addr_bits(&w), 128);
}

/* Listening addresses for the metrics endpoint: IPv6 only in brackets, port 1..65535. */
static void test_sockaddr_parse(void **state)
{
	static const char *bad[] = { "",
				     "127.0.0.1",
				     "127.0.0.1:",
				     "127.0.0.1:0",
				     "127.0.0.1:65536",
				     "127.0.0.1:09464",
				     "127.0.0.1:x1",
				     "::1:9464",
				     "[::1]9464",
				     "[::1]:",
				     "[127.0.0.1]:9464",
				     "localhost:9464",
				     "[::1:9464",
				     "1.2.3.4:123456",
				     ":9464" };
	struct sockaddr_storage ss;
	socklen_t len = 0;
	(void)state;

	assert_int_equal(ip_sockaddr_parse("127.0.0.1:9464", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9464);
	assert_int_equal(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(ip_sockaddr_parse("[fd00::1]:65535", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 65535);
	assert_int_equal(((struct sockaddr_in6 *)&ss)->sin6_addr.s6_addr[15], 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ip_sockaddr_parse(bad[i], &ss, NULL) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
}

static void test_format_small_buffer(void **state)
{
	struct ip_prefix p = P("fd00:1:2:3:4:5:6:7/128");
	char buf[8];

	(void)state;
	/* Too small: an empty string, never a truncated address that reads as another. */
	assert_string_equal(ip_prefix_format(&p, buf, sizeof(buf)), "");
	assert_string_equal(ip_addr_format(&p.addr, buf, sizeof(buf)), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr_parse_table), cmocka_unit_test(test_prefix_parse_table),
		cmocka_unit_test(test_contains),         cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_mask_and_equal),   cmocka_unit_test(test_format_small_buffer),
		cmocka_unit_test(test_sockaddr_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
