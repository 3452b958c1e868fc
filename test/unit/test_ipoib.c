/*
 * IPoIB formats: the 20-octet hardware address, the encapsulation header, the MGID
 * mappings (vectors worked out from RFC 4391 and checked against what OpenSM creates),
 * their inverse, and the modified EUI-64 interface identifier.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "lib/ipoib.h"

static void test_hwaddr(void **state)
{
	/* Flags RC (0x80), QPN 0x000048, GID fe80::2:c903:1:1234: as the Linux driver
	 * shows it, 80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:01:12:34. */
	static const uint8_t wire[IPOIB_HWADDR_LEN] = { 0x80, 0x00, 0x00, 0x48, 0xfe, 0x80, 0,
							0,    0,    0,    0,    0,    0x00, 0x02,
							0xc9, 0x03, 0x00, 0x01, 0x12, 0x34 };
	struct ipoib_hwaddr a;
	uint8_t buf[IPOIB_HWADDR_LEN];
	char text[IPOIB_HWADDR_STRLEN];

	(void)state;
	assert_int_equal(ipoib_hwaddr_decode(wire, sizeof(wire), &a), 0);
	assert_int_equal(a.flags, IPOIB_HWADDR_F_RC);
	assert_int_equal(a.qpn, 0x48);
	assert_true(ib_gid_guid(&a.gid) == 0x0002c90300011234ull);
	assert_int_equal(ipoib_hwaddr_encode(&a, buf, sizeof(buf)), IPOIB_HWADDR_LEN);
	assert_memory_equal(buf, wire, sizeof(wire));
	assert_int_equal(ipoib_hwaddr_format(&a, text, sizeof(text)), 59);
	assert_string_equal(text, "80:00:00:48:fe:80:00:00:00:00:00:00:00:02:c9:03:00:01:12:34");
	assert_int_equal(ipoib_hwaddr_format(&a, text, 59), -ENOSPC);

	/* Short; every reserved flag bit refused; UC accepted. */
	assert_int_equal(ipoib_hwaddr_decode(wire, 19, &a), -EMSGSIZE);
	for (int bit = 0; bit < 6; bit++) {
		uint8_t w[IPOIB_HWADDR_LEN];

		memcpy(w, wire, sizeof(w));
		w[0] = (uint8_t)(1u << bit);
		assert_int_equal(ipoib_hwaddr_decode(w, sizeof(w), &a), -EINVAL);
	}
	memcpy(buf, wire, sizeof(buf));
	buf[0] = 0xc0;
	assert_int_equal(ipoib_hwaddr_decode(buf, sizeof(buf), &a), 0);
	assert_int_equal(a.flags, IPOIB_HWADDR_F_RC | IPOIB_HWADDR_F_UC);
	/* Encoder refuses reserved flags and QPNs over 24 bits, and short buffers. */
	a.flags = 0x20;
	assert_int_equal(ipoib_hwaddr_encode(&a, buf, sizeof(buf)), -ERANGE);
	a.flags = 0;
	a.qpn = 0x1000000;
	assert_int_equal(ipoib_hwaddr_encode(&a, buf, sizeof(buf)), -ERANGE);
	a.qpn = 1;
	assert_int_equal(ipoib_hwaddr_encode(&a, buf, 19), -ENOSPC);
}

static void test_hwaddr_cmp(void **state)
{
	struct ipoib_hwaddr a, b;

	(void)state;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.flags = IPOIB_HWADDR_F_RC;
	a.qpn = b.qpn = 0x48;
	ib_gid_set(&a.gid, IB_GID_LINK_LOCAL_PREFIX, 1);
	ib_gid_set(&b.gid, IB_GID_LINK_LOCAL_PREFIX, 1);
	assert_int_equal(ipoib_hwaddr_cmp_noflags(&a, &b), 0); /* flags ignored */
	b.qpn = 0x49;
	assert_true(ipoib_hwaddr_cmp_noflags(&a, &b) < 0);
	b.qpn = 0x48;
	ib_gid_set(&b.gid, IB_GID_LINK_LOCAL_PREFIX, 0);
	assert_true(ipoib_hwaddr_cmp_noflags(&a, &b) > 0);
}

static void test_encap(void **state)
{
	static const uint8_t wire[] = { 0x86, 0xdd, 0x00, 0x00 };
	struct ipoib_encap e;
	uint8_t buf[4];

	(void)state;
	assert_int_equal(ipoib_encap_decode(wire, 4, &e), 0);
	assert_int_equal(e.ethertype, 0x86dd);
	assert_int_equal(e.reserved, 0);
	assert_int_equal(ipoib_encap_encode(&e, buf, 4), IPOIB_ENCAP_LEN);
	assert_memory_equal(buf, wire, 4);
	assert_int_equal(ipoib_encap_decode(wire, 3, &e), -EMSGSIZE);
	assert_int_equal(ipoib_encap_encode(&e, buf, 3), -ENOSPC);
	/* Reserved octets are reported, not refused (ignored on receipt). */
	assert_int_equal(ipoib_encap_decode((const uint8_t[]){ 8, 0, 0x12, 0x34 }, 4, &e), 0);
	assert_int_equal(e.reserved, 0x1234);
}

static void gid_is(const union ib_gid *g, const char *text)
{
	char buf[IB_GID_STRLEN];

	assert_true(ib_gid_format(g, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, text);
}

static void test_mgid_mapping(void **state)
{
	union ib_gid g;
	uint8_t v6[16] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x01, 0x12, 0x34 };

	(void)state;
	/* What OpenSM creates for the default partition: ff12:401b:ffff::ffff:ffff. */
	assert_int_equal(ipoib_mgid_broadcast(0xffff, IB_MGID_SCOPE_LINK, &g), 0);
	gid_is(&g, "ff12:401b:ffff::ffff:ffff");
	/* Limited P_Key 0x0001 is written full (0x8001); site scope 5. */
	assert_int_equal(ipoib_mgid_broadcast(0x0001, IB_MGID_SCOPE_SITE, &g), 0);
	gid_is(&g, "ff15:401b:8001::ffff:ffff");
	/* 224.0.0.1: low 28 bits 0x0000001. */
	assert_int_equal(ipoib_mgid_from_ipv4(0xe0000001u, 0xffff, 2, &g), 0);
	gid_is(&g, "ff12:401b:ffff::1");
	/* 239.1.2.3 = 0xef010203: low 28 bits 0x f010203 -> 0f01:0203. */
	assert_int_equal(ipoib_mgid_from_ipv4(0xef010203u, 0x8002, 2, &g), 0);
	gid_is(&g, "ff12:401b:8002::f01:203");
	/* Solicited-node ff02::1:ff01:1234: low 80 bits 0000:0000:0001:ff01:1234. */
	assert_int_equal(ipoib_mgid_from_ipv6(v6, 0xffff, 2, &g), 0);
	gid_is(&g, "ff12:601b:ffff::1:ff01:1234");
	/* All-nodes ff02::1. */
	memset(v6 + 2, 0, 14);
	v6[15] = 1;
	assert_int_equal(ipoib_mgid_from_ipv6(v6, 0xffff, 2, &g), 0);
	gid_is(&g, "ff12:601b:ffff::1");

	/* Refusals: unicast groups, scope over 4 bits, P_Key base 0. */
	assert_int_equal(ipoib_mgid_from_ipv4(0x0a000001u, 0xffff, 2, &g), -EINVAL);
	assert_int_equal(ipoib_mgid_from_ipv4(0xf0000001u, 0xffff, 2, &g), -EINVAL);
	v6[0] = 0xfe;
	assert_int_equal(ipoib_mgid_from_ipv6(v6, 0xffff, 2, &g), -EINVAL);
	assert_int_equal(ipoib_mgid_broadcast(0xffff, 16, &g), -ERANGE);
	assert_int_equal(ipoib_mgid_broadcast(0x8000, 2, &g), -EINVAL);
	assert_int_equal(ipoib_mgid_broadcast(0x0000, 2, &g), -EINVAL);
}

static void test_mgid_decode(void **state)
{
	struct ipoib_mgid_info info;
	const char *why;
	union ib_gid g;
	uint8_t v6[16] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x01, 0x12, 0x34 };

	(void)state;
	assert_int_equal(ipoib_mgid_broadcast(0xffff, 2, &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), 0);
	assert_int_equal(info.family, AF_INET);
	assert_true(info.broadcast);
	assert_int_equal(info.pkey, 0xffff);
	assert_int_equal(info.scope, 2);
	assert_int_equal(ipoib_mgid_from_ipv4(0xef010203u, 0xffff, 8, &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), 0);
	assert_false(info.broadcast);
	assert_int_equal(info.ipv4_group, 0xef010203u);
	assert_int_equal(info.scope, 8);
	assert_int_equal(ipoib_mgid_from_ipv6(v6, 0x8005, 0xe, &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), 0);
	assert_int_equal(info.family, AF_INET6);
	assert_int_equal(info.pkey, 0x8005);
	assert_memory_equal(info.ipv6_low80, v6 + 6, 10);

	assert_int_equal(ib_gid_parse("fe80::1", &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), -EINVAL);
	assert_string_equal(why, "not a transient MGID (ff1S:...)");
	assert_int_equal(ib_gid_parse("ff12:501b:ffff::1", &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), -EINVAL);
	assert_string_equal(why, "signature is neither 401b (IPv4) nor 601b (IPv6)");
	assert_int_equal(ib_gid_parse("ff12:401b:8000::1", &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), -EINVAL);
	assert_string_equal(why, "P_Key base value is 0");
	assert_int_equal(ib_gid_parse("ff12:401b:ffff:1::1", &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, &why), -EINVAL);
	assert_string_equal(why, "IPv4 MGID with non-zero octets 6-11");
	assert_int_equal(ib_gid_parse("ff12:401b:ffff::1000:1", &g), 0);
	assert_int_equal(ipoib_mgid_decode(&g, &info, NULL), -EINVAL);
}

static void test_ipv6_iid(void **state)
{
	uint8_t iid[8], ll[16];
	/* GUID 0x0002c90300011234: first octet 0x00 -> 0x02 (u/l bit inverted), so the
	 * link-local address is fe80::202:c903:1:1234, as Linux shows on ib0. */
	static const uint8_t want_iid[8] = { 0x02, 0x02, 0xc9, 0x03, 0x00, 0x01, 0x12, 0x34 };
	union ib_gid g;

	(void)state;
	ipoib_ipv6_iid(0x0002c90300011234ull, iid);
	assert_memory_equal(iid, want_iid, 8);
	ipoib_ipv6_link_local(0x0002c90300011234ull, ll);
	memcpy(g.raw, ll, 16);
	gid_is(&g, "fe80::202:c903:1:1234");
	/* A locally administered GUID (0x02 set) gets it cleared. */
	ipoib_ipv6_iid(0x0200000000000001ull, iid);
	assert_int_equal(iid[0], 0x00);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hwaddr),      cmocka_unit_test(test_hwaddr_cmp),
		cmocka_unit_test(test_encap),       cmocka_unit_test(test_mgid_mapping),
		cmocka_unit_test(test_mgid_decode), cmocka_unit_test(test_ipv6_iid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
