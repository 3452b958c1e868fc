/*
 * SA MAD codecs: records worked out by hand from the IBA layouts, with field values
 * taken from what OpenSM answered on the rack (`saquery -p --src-to-dst 4:6`,
 * `saquery --smkey 1 -m`, `saquery --smkey 1 -I` dumps in docs/sa-client.md); round
 * trips with every bit set; length refusals; GetTable record counting with
 * AttributeOffset and a cut RMPP answer; status names.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sm-client/sa_mad.h"

/* PathRecord fe80::2:c903:a1:3 (LID 4) -> fe80::2:c903:a1:7 (LID 6) as saquery printed
 * it: hop_flow_raw 0, tclass 0, num_path_revers 0x80, pkey 0x8001, qos_class/sl 0,
 * mtu 0x84 (selector 2 "exactly", 2048), rate 0x83 (exactly, 10 Gb/s),
 * pkt_life 0x92 (exactly, 18), preference 0. */
static const uint8_t path_wire[SA_PATH_REC_LEN] = {
	0,    0,    0,    0,    0,    0,    0, 0, /* ServiceID */
	0xfe, 0x80, 0,    0,    0,    0,    0, 0, 0, 0x02, 0xc9, 0x03, 0, 0xa1, 0, 0x07, /* DGID */
	0xfe, 0x80, 0,    0,    0,    0,    0, 0, 0, 0x02, 0xc9, 0x03, 0, 0xa1, 0, 0x03, /* SGID */
	0x00, 0x06, 0x00, 0x04,             /* DLID, SLID */
	0x00, 0x00, 0x00, 0x00,             /* raw|flow|hop */
	0x00, 0x80, 0x80, 0x01,             /* tclass, rev|numb, pkey */
	0x00, 0x00, 0x84, 0x83, 0x92, 0x00, /* qos|sl, mtu, rate, life, pref */
	0,    0,    0,    0,    0,    0,
};

static void test_path_vector(void **state)
{
	struct sa_path_rec r;
	uint8_t buf[SA_PATH_REC_LEN];

	(void)state;
	assert_int_equal(sa_path_rec_decode(path_wire, sizeof(path_wire), &r), 0);
	assert_int_equal(r.dlid, 6);
	assert_int_equal(r.slid, 4);
	assert_int_equal(r.dgid.raw[15], 7);
	assert_int_equal(r.sgid.raw[15], 3);
	assert_true(r.reversible);
	assert_int_equal(r.numb_path, 0);
	assert_int_equal(r.pkey, 0x8001);
	assert_int_equal(r.mtu_sel, 2);
	assert_int_equal(r.mtu, 4);
	assert_int_equal(r.rate_sel, 2);
	assert_int_equal(r.rate, 3);
	assert_int_equal(r.life_sel, 2);
	assert_int_equal(r.life, 18);
	assert_int_equal(r.hop_limit, 0);
	assert_int_equal(sa_path_rec_encode(&r, buf, sizeof(buf)), SA_PATH_REC_LEN);
	assert_memory_equal(buf, path_wire, SA_PATH_REC_LEN);
	assert_int_equal(sa_path_rec_decode(path_wire, SA_PATH_REC_LEN - 1, &r), -EMSGSIZE);
	assert_int_equal(sa_path_rec_encode(&r, buf, SA_PATH_REC_LEN - 1), -ENOSPC);
}

/* Packed sub-byte fields: flow label 0xabcde, hop limit 0xff, raw traffic, QoS class
 * 0xfff, SL 0xf, selectors 3. */
static void test_path_bits(void **state)
{
	struct sa_path_rec r = { 0 }, d;
	uint8_t buf[SA_PATH_REC_LEN];

	(void)state;
	memset(&r, 0, sizeof(r)); /* padding too: the structs are compared whole */
	memset(&d, 0, sizeof(d));
	r.raw_traffic = true;
	r.flow_label = 0xabcde;
	r.hop_limit = 0xff;
	r.qos_class = 0xfff;
	r.sl = 0xf;
	r.mtu_sel = 3;
	r.mtu = 5;
	r.numb_path = 0x7f;
	r.service_id = 0x1122334455667788ull;
	sa_path_rec_encode(&r, buf, sizeof(buf));
	assert_int_equal(buf[44], 0x8a);
	assert_int_equal(buf[45], 0xbc);
	assert_int_equal(buf[46], 0xde);
	assert_int_equal(buf[47], 0xff);
	assert_int_equal(buf[52], 0xff);
	assert_int_equal(buf[53], 0xff);
	assert_int_equal(buf[54], 0xc5);
	assert_int_equal(buf[49], 0x7f);
	assert_int_equal(buf[0], 0x11);
	assert_int_equal(sa_path_rec_decode(buf, sizeof(buf), &d), 0);
	assert_memory_equal(&d, &r, sizeof(r));
}

/* MCMemberRecord of the IPv4 broadcast group as OpenSM created it (saquery -g):
 * MLID 0xc000, mtu 0x84, pkey 0xffff, rate 0x83, SL 0, Q_Key 0x0b1b; scope 2 and
 * join state 1 (ScopeState 0x21 in `saquery --smkey 1 -m`). */
static const uint8_t mcm_wire[SA_MCM_REC_LEN] = {
	0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0,    0,    0,    0,    0,
	0xff, 0xff, 0xff, 0xff, 0xfe, 0x80, 0, 0,    0,    0,    0,    0,
	0,    0x02, 0xc9, 0x03, 0,    0xa1, 0, 0x03, 0x00, 0x00, 0x0b, 0x1b, /* Q_Key */
	0xc0, 0x00, 0x84, 0x00,                                              /* MLID, mtu, tclass */
	0xff, 0xff, 0x83, 0x92,                                              /* pkey, rate, life */
	0x00, 0x00, 0x00, 0x00,                                              /* sl|flow|hop */
	0x21, 0x00, 0x00, 0x00, /* scope|state, proxy */
};

static void test_mcm_vector(void **state)
{
	struct sa_mcm_rec r;
	uint8_t buf[SA_MCM_REC_LEN];

	(void)state;
	assert_int_equal(sa_mcm_rec_decode(mcm_wire, sizeof(mcm_wire), &r), 0);
	assert_int_equal(r.qkey, 0x0b1b);
	assert_int_equal(r.mlid, 0xc000);
	assert_int_equal(r.mtu, 4);
	assert_int_equal(r.mtu_sel, 2);
	assert_int_equal(r.pkey, 0xffff);
	assert_int_equal(r.rate, 3);
	assert_int_equal(r.scope, 2);
	assert_int_equal(r.join_state, 1);
	assert_false(r.proxy_join);
	assert_int_equal(sa_mcm_rec_encode(&r, buf, sizeof(buf)), SA_MCM_REC_LEN);
	assert_memory_equal(buf, mcm_wire, SA_MCM_REC_LEN);
	r.sl = 0xf;
	r.flow_label = 0xfffff;
	r.hop_limit = 1;
	r.proxy_join = true;
	sa_mcm_rec_encode(&r, buf, sizeof(buf));
	assert_int_equal(buf[44], 0xff);
	assert_int_equal(buf[46], 0xff);
	assert_int_equal(buf[47], 0x01);
	assert_int_equal(buf[49], 0x80);
	assert_int_equal(sa_mcm_rec_decode(buf, SA_MCM_REC_LEN - 1, &r), -EMSGSIZE);
}

/* InformInfo as `saquery -I` showed our subscription: gid ::, lid_range_begin 65535,
 * end 0, is_generic 1, subscribe 1, type 0xffff, trap 64, QPN 1, resp_time 0x12,
 * producer 0xffffff. */
static void test_inform_vector(void **state)
{
	static const uint8_t w[SA_INFORM_INFO_LEN] = {
		0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
		0,    0,    0,    0,    0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x01, 0x01,
		0xff, 0xff, 0x00, 0x40, 0x00, 0x00, 0x01, 0x12, 0x00, 0xff, 0xff, 0xff,
	};
	struct sa_inform_info ii;
	uint8_t buf[SA_INFORM_INFO_LEN];

	(void)state;
	assert_int_equal(sa_inform_info_decode(w, sizeof(w), &ii), 0);
	assert_int_equal(ii.lid_begin, 0xffff);
	assert_true(ii.is_generic);
	assert_true(ii.subscribe);
	assert_int_equal(ii.type, 0xffff);
	assert_int_equal(ii.trap_num, 64);
	assert_int_equal(ii.qpn, 1);
	assert_int_equal(ii.resp_time, 0x12);
	assert_int_equal(ii.producer_type, 0xffffff);
	assert_int_equal(sa_inform_info_encode(&ii, buf, sizeof(buf)), SA_INFORM_INFO_LEN);
	assert_memory_equal(buf, w, sizeof(w));
	assert_int_equal(sa_inform_info_decode(w, SA_INFORM_INFO_LEN - 1, &ii), -EMSGSIZE);
}

/* Notice for trap 65 (GID out of service) from the SM at LID 1: generic, type 4,
 * producer type 4 (subnet management), toggle set, count 0x1234, the GID at
 * DataDetails + 6 (notice octet 16). */
static void test_notice(void **state)
{
	struct sa_notice n = { 0 }, d;
	union ib_gid g;
	uint8_t buf[SA_NOTICE_LEN];

	(void)state;
	memset(&n, 0, sizeof(n));
	memset(&d, 0, sizeof(d));
	n.is_generic = true;
	n.type = 4;
	n.producer_type = 4;
	n.trap_num = 65;
	n.issuer_lid = 1;
	n.toggle = true;
	n.count = 0x1234;
	n.details[6] = 0xfe;
	n.details[7] = 0x80;
	n.details[21] = 0x07;
	assert_int_equal(sa_notice_encode(&n, buf, sizeof(buf)), SA_NOTICE_LEN);
	assert_int_equal(buf[0], 0x84);
	assert_int_equal(buf[3], 0x04);
	assert_int_equal(buf[5], 65);
	assert_int_equal(buf[7], 1);
	assert_int_equal(buf[8], 0x92);
	assert_int_equal(buf[9], 0x34);
	assert_int_equal(buf[16], 0xfe);
	assert_int_equal(sa_notice_decode(buf, sizeof(buf), &d), 0);
	assert_memory_equal(&d, &n, sizeof(n));
	sa_notice_gid(&d, &g);
	assert_int_equal(g.raw[0], 0xfe);
	assert_int_equal(g.raw[15], 0x07);
	assert_int_equal(sa_notice_decode(buf, SA_NOTICE_LEN - 1, &d), -EMSGSIZE);
}

static void test_header(void **state)
{
	struct sa_hdr h = { 0 }, d;
	uint8_t buf[256] = { 0 };

	(void)state;
	h.mad.base_version = 1;
	h.mad.mgmt_class = 3;
	h.mad.class_version = 2;
	h.mad.method = 0x12;
	h.mad.response = true;
	h.mad.tid = 0x1122334455667788ull;
	h.mad.attr_id = SA_ATTR_PATH_REC;
	h.rmpp_version = 1;
	h.rmpp_flags = 0x07;
	h.rmpp_data2 = 20 + 3 * 64;
	h.sm_key = 1;
	h.attr_offset = 8;
	h.comp_mask = 0x300c;
	assert_int_equal(sa_hdr_encode(&h, buf, sizeof(buf)), SA_HDR_LEN);
	assert_int_equal(buf[3], 0x92);
	assert_int_equal(buf[43], 1); /* SM_Key low octet */
	assert_int_equal(buf[45], 8); /* AttributeOffset */
	assert_int_equal(buf[55], 0x0c);
	assert_int_equal(buf[54], 0x30);
	assert_int_equal(sa_hdr_decode(buf, sizeof(buf), &d), 0);
	assert_int_equal(d.attr_offset, 8);
	assert_int_equal(d.comp_mask, 0x300c);
	assert_int_equal(d.rmpp_data2, 212);
	assert_int_equal(sa_hdr_decode(buf, SA_HDR_LEN - 1, &d), -EMSGSIZE);
	buf[1] = 0x07;
	assert_int_equal(sa_hdr_decode(buf, sizeof(buf), &d), -EPROTOTYPE);
	buf[1] = 0x03;
	buf[2] = 1;
	assert_int_equal(sa_hdr_decode(buf, sizeof(buf), &d), -EPROTO);
	buf[2] = 2;
	buf[0] = 2;
	assert_int_equal(sa_hdr_decode(buf, sizeof(buf), &d), -EPROTO);
}

static void test_records(void **state)
{
	struct sa_hdr h = { 0 };
	size_t stride;
	unsigned n;
	bool trunc;

	(void)state;
	h.mad.method = 0x12; /* GetTableResp */
	h.attr_offset = 8;   /* PathRecords: 64 octets */
	assert_int_equal(sa_records(&h, 256, 64, &stride, &n, &trunc), 0);
	assert_int_equal(stride, 64);
	assert_int_equal(n, 3); /* 200 octets of data hold 3 */
	assert_false(trunc);
	/* RMPP first segment promising 6 records, cut to one MAD (umad2sim). */
	h.rmpp_flags = SA_RMPP_ACTIVE | SA_RMPP_FIRST;
	h.rmpp_data2 = 20 + 6 * 64;
	assert_int_equal(sa_records(&h, 256, 64, &stride, &n, &trunc), 0);
	assert_int_equal(n, 3);
	assert_true(trunc);
	/* Reassembled (hardware): 56 + 6*64 octets. */
	assert_int_equal(sa_records(&h, 56 + 6 * 64, 64, &stride, &n, &trunc), 0);
	assert_int_equal(n, 6);
	assert_false(trunc);
	/* PayloadLength smaller than the buffer: trust the smaller. */
	h.rmpp_data2 = 20 + 1 * 64;
	assert_int_equal(sa_records(&h, 256, 64, &stride, &n, &trunc), 0);
	assert_int_equal(n, 1);
	/* MCMemberRecords: 52 octets, offset 7 words. */
	h.rmpp_flags = 0;
	h.attr_offset = 7;
	assert_int_equal(sa_records(&h, 256, 52, &stride, &n, &trunc), 0);
	assert_int_equal(stride, 56);
	assert_int_equal(n, 3); /* 56+56+52 <= 200 < 56*3+52 */
	h.attr_offset = 6;
	assert_int_equal(sa_records(&h, 256, 52, &stride, &n, &trunc), -EBADMSG);
	h.attr_offset = 0;
	assert_int_equal(sa_records(&h, 256, 52, &stride, &n, &trunc), 0);
	assert_int_equal(n, 0);
	/* A Get response holds one record. */
	h.mad.method = 0x01;
	assert_int_equal(sa_records(&h, 256, 64, &stride, &n, &trunc), 0);
	assert_int_equal(n, 1);
	assert_int_equal(sa_records(&h, 56 + 63, 64, &stride, &n, &trunc), -EMSGSIZE);
	assert_int_equal(sa_records(&h, 55, 64, &stride, &n, &trunc), -EMSGSIZE);
}

static void test_status_names(void **state)
{
	(void)state;
	assert_string_equal(sa_status_name(0), "success");
	assert_string_equal(sa_status_name(0x0300), "ERR_NO_RECORDS");
	assert_string_equal(sa_status_name(0x0200), "ERR_REQ_INVALID");
	assert_string_equal(sa_status_name(0x0700), "ERR_REQ_DENIED");
	assert_string_equal(sa_status_name(0x0600), "ERR_REQ_INSUFFICIENT_COMPONENTS");
	assert_string_equal(sa_status_name(0x7f00), "ERR_SA_UNKNOWN");
	assert_string_equal(sa_status_name(0x000c), "method/attribute not supported");
	assert_string_equal(sa_status_name(0x001c), "invalid attribute or modifier");
	assert_string_equal(sa_status_name(0x0001), "busy");
	assert_string_equal(sa_status_name(0x0002), "redirect required");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path_vector), cmocka_unit_test(test_path_bits),
		cmocka_unit_test(test_mcm_vector),  cmocka_unit_test(test_inform_vector),
		cmocka_unit_test(test_notice),      cmocka_unit_test(test_header),
		cmocka_unit_test(test_records),     cmocka_unit_test(test_status_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
