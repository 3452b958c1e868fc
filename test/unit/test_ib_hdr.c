/*
 * IB header codecs: hand-made octet vectors for each header, round trips with every
 * field at its maximum, range refusals, truncation, and the P_Key matching rule.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_hdr.h"

static void test_lrh_vector(void **state)
{
	/* VL 0xa, LVer 0 -> a0; SL 0x5, rsv 0, LNH 2 -> 52; DLID 0x1234; rsv5 0 and
	 * PktLen 0x7ff -> 07 ff; SLID 0xfffe. */
	static const uint8_t wire[] = { 0xa0, 0x52, 0x12, 0x34, 0x07, 0xff, 0xff, 0xfe };
	struct ib_lrh h = {
		.vl = 0xa, .sl = 5, .lnh = 2, .dlid = 0x1234, .pkt_len = 0x7ff, .slid = 0xfffe
	};
	struct ib_lrh d;
	uint8_t buf[IB_LRH_LEN];

	(void)state;
	assert_int_equal(ib_lrh_encode(&h, buf, sizeof(buf)), IB_LRH_LEN);
	assert_memory_equal(buf, wire, sizeof(wire));
	assert_int_equal(ib_lrh_decode(wire, sizeof(wire), &d), 0);
	assert_true(d.vl == h.vl && d.lver == h.lver && d.sl == h.sl && d.rsv2 == h.rsv2 &&
		    d.lnh == h.lnh && d.dlid == h.dlid && d.rsv5 == h.rsv5 &&
		    d.pkt_len == h.pkt_len && d.slid == h.slid);
	/* Reserved bits are kept: 0x0c in octet 1 (rsv2 = 3), 0xf8 in octet 4. */
	static const uint8_t rsv[] = { 0x00, 0x0e, 0, 0, 0xf8, 0x01, 0, 0 };
	assert_int_equal(ib_lrh_decode(rsv, sizeof(rsv), &d), 0);
	assert_int_equal(d.rsv2, 3);
	assert_int_equal(d.rsv5, 0x1f);
	assert_int_equal(d.pkt_len, 1);
	assert_int_equal(ib_lrh_encode(&d, buf, sizeof(buf)), IB_LRH_LEN);
	assert_memory_equal(buf, rsv, sizeof(rsv));
}

static void test_lrh_refuses(void **state)
{
	static const uint8_t lver1[] = { 0x01, 0x02, 0, 0, 0, 0, 0, 0 };
	struct ib_lrh h, d;
	uint8_t buf[IB_LRH_LEN];

	(void)state;
	assert_int_equal(ib_lrh_decode(lver1, 7, &d), -EMSGSIZE);
	assert_int_equal(ib_lrh_decode(lver1, 8, &d), -EINVAL);
	memset(&h, 0, sizeof(h));
	assert_int_equal(ib_lrh_encode(&h, buf, 7), -ENOSPC);
	h.pkt_len = 0x800;
	assert_int_equal(ib_lrh_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.pkt_len = 0;
	h.vl = 0x10;
	assert_int_equal(ib_lrh_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.vl = 0;
	h.lnh = 4;
	assert_int_equal(ib_lrh_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.lnh = 0;
	h.rsv5 = 0x20;
	assert_int_equal(ib_lrh_encode(&h, buf, sizeof(buf)), -ERANGE);
}

static void test_grh_vector(void **state)
{
	/* IPVer 6, TClass 0xff, FlowLabel 0xfffff -> 6f ff ff ff; PayLen 0x0102;
	 * NxtHdr 1b; HopLmt ff; SGID 00..0f; DGID f0..ff. */
	uint8_t wire[IB_GRH_LEN] = { 0x6f, 0xff, 0xff, 0xff, 0x01, 0x02, 0x1b, 0xff };
	struct ib_grh h = { .ipver = 6,
			    .tclass = 0xff,
			    .flow_label = 0xfffff,
			    .pay_len = 0x102,
			    .next_hdr = 0x1b,
			    .hop_limit = 0xff };
	struct ib_grh d;
	uint8_t buf[IB_GRH_LEN];

	(void)state;
	for (int i = 0; i < 16; i++) {
		wire[8 + i] = h.sgid.raw[i] = (uint8_t)i;
		wire[24 + i] = h.dgid.raw[i] = (uint8_t)(0xf0 + i);
	}
	assert_int_equal(ib_grh_encode(&h, buf, sizeof(buf)), IB_GRH_LEN);
	assert_memory_equal(buf, wire, sizeof(wire));
	assert_int_equal(ib_grh_decode(wire, sizeof(wire), &d), 0);
	assert_true(d.ipver == h.ipver && d.tclass == h.tclass && d.flow_label == h.flow_label &&
		    d.pay_len == h.pay_len && d.next_hdr == h.next_hdr &&
		    d.hop_limit == h.hop_limit && ib_gid_equal(&d.sgid, &h.sgid) &&
		    ib_gid_equal(&d.dgid, &h.dgid));
	/* TClass 0x12 FlowLabel 0x34567 -> 61 23 45 67: fields straddle nibbles. */
	h.tclass = 0x12;
	h.flow_label = 0x34567;
	assert_int_equal(ib_grh_encode(&h, buf, sizeof(buf)), IB_GRH_LEN);
	assert_int_equal(buf[0], 0x61);
	assert_int_equal(buf[1], 0x23);
	assert_int_equal(buf[2], 0x45);
	assert_int_equal(buf[3], 0x67);
	assert_int_equal(ib_grh_decode(buf, 39, &d), -EMSGSIZE);
	buf[0] = 0x41;
	assert_int_equal(ib_grh_decode(buf, sizeof(buf), &d), -EINVAL);
	h.flow_label = 0x100000;
	assert_int_equal(ib_grh_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.flow_label = 0;
	assert_int_equal(ib_grh_encode(&h, buf, 39), -ENOSPC);
}

static void test_bth_vector(void **state)
{
	/* Opcode 0x04 (RC SEND only); SE 1, M 0, Pad 2, TVer 0 -> a0; P_Key 0x8001;
	 * FECN 1 BECN 0 rsv 0 -> 80; DestQP 0x123456; A 1 -> 80; PSN 0xfedcba. */
	static const uint8_t wire[] = { 0x04, 0xa0, 0x80, 0x01, 0x80, 0x12,
					0x34, 0x56, 0x80, 0xfe, 0xdc, 0xba };
	struct ib_bth h = { .opcode = 4,
			    .se = true,
			    .pad = 2,
			    .pkey = 0x8001,
			    .fecn = true,
			    .dqpn = 0x123456,
			    .ack_req = true,
			    .psn = 0xfedcba };
	struct ib_bth d;
	uint8_t buf[IB_BTH_LEN];

	(void)state;
	assert_int_equal(ib_bth_encode(&h, buf, sizeof(buf)), IB_BTH_LEN);
	assert_memory_equal(buf, wire, sizeof(wire));
	assert_int_equal(ib_bth_decode(wire, sizeof(wire), &d), 0);
	assert_true(d.opcode == h.opcode && d.se == h.se && d.mig == h.mig && d.pad == h.pad &&
		    d.tver == h.tver && d.pkey == h.pkey && d.fecn == h.fecn && d.becn == h.becn &&
		    d.rsv6 == h.rsv6 && d.dqpn == h.dqpn && d.ack_req == h.ack_req &&
		    d.rsv7 == h.rsv7 && d.psn == h.psn);
	/* Every field at its maximum round-trips (M, BECN, reserved bits too). */
	static const uint8_t ones[] = { 0xff, 0xf0, 0xff, 0xff, 0xff, 0xff,
					0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	assert_int_equal(ib_bth_decode(ones, sizeof(ones), &d), 0);
	assert_true(d.mig && d.becn && d.fecn);
	assert_int_equal(d.rsv6, 0x3f);
	assert_int_equal(d.rsv7, 0x7f);
	assert_int_equal(ib_bth_encode(&d, buf, sizeof(buf)), IB_BTH_LEN);
	assert_memory_equal(buf, ones, sizeof(ones));
	/* TVer 1 refused; short; out of range. */
	assert_int_equal(
	    ib_bth_decode((const uint8_t[]){ 0, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, 12, &d),
	    -EINVAL);
	assert_int_equal(ib_bth_decode(wire, 11, &d), -EMSGSIZE);
	h.pad = 4;
	assert_int_equal(ib_bth_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.pad = 0;
	h.dqpn = 0x1000000;
	assert_int_equal(ib_bth_encode(&h, buf, sizeof(buf)), -ERANGE);
	h.dqpn = 0;
	assert_int_equal(ib_bth_encode(&h, buf, 11), -ENOSPC);
}

static void test_deth_aeth(void **state)
{
	/* DETH Q_Key 0x80010000 (GSI), rsv 0, SrcQP 1; AETH syndrome 0x1f, MSN 0x000102. */
	static const uint8_t deth_wire[] = { 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01 };
	static const uint8_t aeth_wire[] = { 0x1f, 0x00, 0x01, 0x02 };
	struct ib_deth dh = { .qkey = IB_QP1_QKEY, .src_qp = 1 }, dd;
	struct ib_aeth ah = { .syndrome = 0x1f, .msn = 0x102 }, ad;
	uint8_t buf[8];

	(void)state;
	assert_int_equal(ib_deth_encode(&dh, buf, sizeof(buf)), IB_DETH_LEN);
	assert_memory_equal(buf, deth_wire, sizeof(deth_wire));
	assert_int_equal(ib_deth_decode(deth_wire, 8, &dd), 0);
	assert_true(dd.qkey == dh.qkey && dd.rsv8 == dh.rsv8 && dd.src_qp == dh.src_qp);
	assert_int_equal(ib_deth_decode(deth_wire, 7, &dd), -EMSGSIZE);
	dh.src_qp = 0x1000000;
	assert_int_equal(ib_deth_encode(&dh, buf, sizeof(buf)), -ERANGE);
	assert_int_equal(ib_aeth_encode(&ah, buf, sizeof(buf)), IB_AETH_LEN);
	assert_memory_equal(buf, aeth_wire, sizeof(aeth_wire));
	assert_int_equal(ib_aeth_decode(aeth_wire, 4, &ad), 0);
	assert_true(ad.syndrome == ah.syndrome && ad.msn == ah.msn);
	assert_int_equal(ib_aeth_decode(aeth_wire, 3, &ad), -EMSGSIZE);
	assert_int_equal(ib_aeth_encode(&ah, buf, 3), -ENOSPC);
}

static void test_pkey_rules(void **state)
{
	(void)state;
	assert_int_equal(ib_pkey_base(0xffff), 0x7fff);
	assert_true(ib_pkey_is_full(0xffff));
	assert_false(ib_pkey_is_full(0x7fff));
	assert_false(ib_pkey_is_valid(0x0000));
	assert_false(ib_pkey_is_valid(0x8000));
	assert_true(ib_pkey_is_valid(0x0001));
	/* full-full, full-limited, limited-full match; limited-limited does not. */
	assert_true(ib_pkey_match(0xffff, 0xffff));
	assert_true(ib_pkey_match(0xffff, 0x7fff));
	assert_true(ib_pkey_match(0x7fff, 0xffff));
	assert_false(ib_pkey_match(0x7fff, 0x7fff));
	/* Different bases never match; base 0 never matches, even with itself. */
	assert_false(ib_pkey_match(0x8001, 0x8002));
	assert_false(ib_pkey_match(0x8000, 0x8000));
	assert_false(ib_pkey_match(0x8000, 0x0000));
}

static void test_opcode_table(void **state)
{
	(void)state;
	assert_int_equal(ib_opcode_ext(IB_OP_UD_SEND_ONLY), IB_EXT_DETH);
	assert_int_equal(ib_opcode_ext(IB_OP_UD_SEND_ONLY_IMM), IB_EXT_DETH | IB_EXT_IMM);
	assert_int_equal(ib_opcode_ext(IB_OP_RC_ACK), IB_EXT_AETH);
	assert_int_equal(ib_opcode_ext(IB_OP_RC_SEND_LAST_IMM), IB_EXT_IMM);
	assert_int_equal(ib_opcode_ext(IB_OP_RC_SEND_MIDDLE), 0);
	assert_int_equal(ib_opcode_ext(0x06), -1); /* RC RDMA WRITE first */
	assert_int_equal(ib_opcode_ext(0x66), -1);
	assert_int_equal(ib_ext_len(IB_EXT_DETH | IB_EXT_IMM), 12);
	assert_int_equal(ib_ext_len(IB_EXT_AETH), 4);
	/* Every defined opcode is one of the listed transports' SEND/ACK. */
	int known = 0;
	for (int op = 0; op < 256; op++)
		known += ib_opcode_ext((uint8_t)op) >= 0;
	assert_int_equal(known, 15);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lrh_vector),   cmocka_unit_test(test_lrh_refuses),
		cmocka_unit_test(test_grh_vector),   cmocka_unit_test(test_bth_vector),
		cmocka_unit_test(test_deth_aeth),    cmocka_unit_test(test_pkey_rules),
		cmocka_unit_test(test_opcode_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
