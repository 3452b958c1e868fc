/*
 * MAD common header: a SubnAdm PathRecord GetResp header worked out by hand, round trip
 * with every field set, and refusals.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_mad.h"

/* BaseVersion 1, MgmtClass 0x03 (SA), ClassVersion 2, R 1 + Method 0x01 (GetResp =
 * 0x81), Status 0x000c, ClassSpecific 0, TID 0x0102030405060708, AttributeID 0x0035
 * (PathRecord), reserved 0, AttributeModifier 0x00000001. */
static const uint8_t wire[IB_MAD_HDR_LEN] = {
	0x01, 0x03, 0x02, 0x81, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
	0x05, 0x06, 0x07, 0x08, 0x00, 0x35, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
};

static void test_vector(void **state)
{
	struct ib_mad_hdr h;
	uint8_t buf[IB_MAD_HDR_LEN];

	(void)state;
	assert_int_equal(ib_mad_hdr_decode(wire, sizeof(wire), &h), 0);
	assert_int_equal(h.base_version, 1);
	assert_int_equal(h.mgmt_class, IB_MGMT_CLASS_SA);
	assert_int_equal(h.class_version, 2);
	assert_true(h.response);
	assert_int_equal(h.method, IB_MAD_METHOD_GET);
	assert_int_equal(h.status, 0x000c);
	assert_int_equal(h.class_specific, 0);
	assert_true(h.tid == 0x0102030405060708ull);
	assert_int_equal(h.attr_id, 0x35);
	assert_int_equal(h.attr_mod, 1);
	assert_int_equal(ib_mad_hdr_encode(&h, buf, sizeof(buf)), IB_MAD_HDR_LEN);
	assert_memory_equal(buf, wire, sizeof(wire));
}

static void test_all_ones_roundtrip(void **state)
{
	uint8_t ones[IB_MAD_HDR_LEN], buf[IB_MAD_HDR_LEN];
	struct ib_mad_hdr h;

	(void)state;
	memset(ones, 0xff, sizeof(ones));
	ones[0] = 1;
	assert_int_equal(ib_mad_hdr_decode(ones, sizeof(ones), &h), 0);
	assert_true(h.response);
	assert_int_equal(h.method, 0x7f);
	assert_int_equal(h.resv, 0xffff);
	assert_int_equal(ib_mad_hdr_encode(&h, buf, sizeof(buf)), IB_MAD_HDR_LEN);
	assert_memory_equal(buf, ones, sizeof(ones));
}

static void test_refuses(void **state)
{
	uint8_t v2[IB_MAD_HDR_LEN], buf[IB_MAD_HDR_LEN];
	struct ib_mad_hdr h;

	(void)state;
	for (size_t n = 0; n < IB_MAD_HDR_LEN; n++)
		assert_int_equal(ib_mad_hdr_decode(wire, n, &h), -EMSGSIZE);
	memcpy(v2, wire, sizeof(v2));
	v2[0] = 2; /* OPA base version */
	assert_int_equal(ib_mad_hdr_decode(v2, sizeof(v2), &h), -EINVAL);
	assert_int_equal(ib_mad_hdr_decode(wire, sizeof(wire), &h), 0);
	assert_int_equal(ib_mad_hdr_encode(&h, buf, IB_MAD_HDR_LEN - 1), -ENOSPC);
	h.method = 0x80;
	assert_int_equal(ib_mad_hdr_encode(&h, buf, sizeof(buf)), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vector),
		cmocka_unit_test(test_all_ones_roundtrip),
		cmocka_unit_test(test_refuses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
