/*
 * CM MAD codec: vectors worked out by hand from the IBA layouts (vol 1 tables 106-113;
 * offsets in cm/cm_mad.h), round trips, refusals, the IPoIB-CM private data, service
 * IDs, connection MTU and timeout codes.
 *
 * Each vector starts as 256 zero octets; every non-zero octet is set below with its
 * absolute offset (MAD header 24 octets + the message offset) and where it comes from.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cm/cm_mad.h"

static void hdr(uint8_t *w, uint16_t attr)
{
	w[0] = 0x01;  /* BaseVersion 1 */
	w[1] = 0x07;  /* MgmtClass CM */
	w[2] = 0x02;  /* ClassVersion 2 */
	w[3] = 0x03;  /* R 0, Method Send */
	w[15] = 0x2a; /* TID 0x000000000000002a */
	w[16] = (uint8_t)(attr >> 8);
	w[17] = (uint8_t)attr;
}

static const uint8_t gid_a[16] = { 0xfe, 0x80, 0,    0,    0, 0, 0,    0,
				   0x00, 0x02, 0xc9, 0x03, 0, 0, 0x12, 0x34 };
static const uint8_t gid_b[16] = { 0xfe, 0x80, 0,    0,    0, 0, 0,    0,
				   0x00, 0x02, 0xc9, 0x03, 0, 0, 0x56, 0x78 };

/* REQ from QPN 0x000123 (UD QPN 0x48) to the peer whose UD QPN is 0x48. */
static void req_vector(uint8_t *w)
{
	memset(w, 0, IB_MAD_LEN);
	hdr(w, CM_ATTR_REQ);
	/* 24 (M0) LocalCommID 0x11223344 */
	w[24] = 0x11, w[25] = 0x22, w[26] = 0x33, w[27] = 0x44;
	/* 32 (M8) ServiceID 0x1000000000000048: IETF block | target UD QPN 0x48 */
	w[32] = 0x10, w[39] = 0x48;
	/* 40 (M16) LocalCAGUID 0x0002c90300001234 */
	w[41] = 0x02, w[42] = 0xc9, w[43] = 0x03, w[46] = 0x12, w[47] = 0x34;
	/* 56 (M32) LocalQPN 0x000123, 59 ResponderResources 0 */
	w[57] = 0x01, w[58] = 0x23;
	/* 67 (M43) RemoteCMResponseTimeout 16 << 3 = 0x80, TST RC (0) << 1, E2E 0 */
	w[67] = 0x80;
	/* 68 (M44) StartingPSN 0xabcdef; 71 (M47) LocalCMResponseTimeout 16 << 3 | Retry 7 */
	w[68] = 0xab, w[69] = 0xcd, w[70] = 0xef, w[71] = 0x87;
	/* 72 (M48) P_Key 0xffff */
	w[72] = 0xff, w[73] = 0xff;
	/* 74 (M50) PathMTU 4 (2048) << 4 | RDC 0 | RNRRetry 7 = 0x47 */
	w[74] = 0x47;
	/* 75 (M51) MaxCMRetries 8 << 4 | SRQ 0x08 | ExtTransport 0 = 0x88 */
	w[75] = 0x88;
	/* 76 (M52) primary path: LocalLID 4, RemoteLID 6 */
	w[77] = 0x04, w[79] = 0x06;
	/* 80 (M56) LocalGID, 96 (M72) RemoteGID */
	memcpy(w + 80, gid_a, 16);
	memcpy(w + 96, gid_b, 16);
	/* 112 (M88) FlowLabel 0x12345 << 12 | rsvd 0 | PacketRate 3 = 0x12345003 */
	w[112] = 0x12, w[113] = 0x34, w[114] = 0x50, w[115] = 0x03;
	/* 116 TrafficClass 0, 117 HopLimit 0; 118 (M94) SL 0 << 4 | SubnetLocal 0x08 */
	w[118] = 0x08;
	/* 119 (M95) LocalACKTimeout 19 << 3 = 0x98 */
	w[119] = 0x98;
	/* 164 (M140) private data: rsvd 0, UD QPN 0x000048, receive MTU 65524 = 0xfff4 */
	w[167] = 0x48, w[170] = 0xff, w[171] = 0xf4;
}

static void test_req_vector(void **state)
{
	uint8_t w[IB_MAD_LEN], out[IB_MAD_LEN];
	struct cm_msg m;
	struct cm_ipoib_pdata pd;

	(void)state;
	req_vector(w);
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.attr_id, CM_ATTR_REQ);
	assert_true(m.tid == 0x2a);
	assert_int_equal(m.method, IB_MAD_METHOD_SEND);
	assert_false(m.response);
	assert_int_equal(m.req.local_comm_id, 0x11223344);
	assert_true(m.req.service_id == 0x1000000000000048ull);
	assert_true(m.req.local_ca_guid == 0x0002c90300001234ull);
	assert_int_equal(m.req.local_qkey, 0);
	assert_int_equal(m.req.local_qpn, 0x123);
	assert_int_equal(m.req.remote_cm_response_timeout, 16);
	assert_int_equal(m.req.transport_service_type, CM_TST_RC);
	assert_false(m.req.e2e_flow_control);
	assert_int_equal(m.req.starting_psn, 0xabcdef);
	assert_int_equal(m.req.local_cm_response_timeout, 16);
	assert_int_equal(m.req.retry_count, 7);
	assert_int_equal(m.req.pkey, 0xffff);
	assert_int_equal(m.req.path_mtu, 4);
	assert_false(m.req.rdc_exists);
	assert_int_equal(m.req.rnr_retry_count, 7);
	assert_int_equal(m.req.max_cm_retries, 8);
	assert_true(m.req.srq);
	assert_int_equal(m.req.extended_transport_type, 0);
	assert_int_equal(m.req.primary.local_lid, 4);
	assert_int_equal(m.req.primary.remote_lid, 6);
	assert_memory_equal(m.req.primary.local_gid.raw, gid_a, 16);
	assert_memory_equal(m.req.primary.remote_gid.raw, gid_b, 16);
	assert_int_equal(m.req.primary.flow_label, 0x12345);
	assert_int_equal(m.req.primary.packet_rate, 3);
	assert_int_equal(m.req.primary.sl, 0);
	assert_true(m.req.primary.subnet_local);
	assert_int_equal(m.req.primary.local_ack_timeout, 19);
	assert_int_equal(m.req.alternate.local_lid, 0);
	assert_int_equal(cm_ipoib_pdata_decode(m.req.private_data, &pd), CM_PDATA_OK);
	assert_int_equal(pd.ud_qpn, 0x48);
	assert_int_equal(pd.rx_mtu, 65524);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);
}

static void test_rep_vector(void **state)
{
	uint8_t w[IB_MAD_LEN], out[IB_MAD_LEN];
	struct cm_msg m;

	(void)state;
	memset(w, 0, sizeof(w));
	hdr(w, CM_ATTR_REP);
	w[24] = 0x55, w[25] = 0x66, w[26] = 0x77, w[27] = 0x88; /* M0 LocalCommID */
	w[28] = 0x11, w[29] = 0x22, w[30] = 0x33, w[31] = 0x44; /* M4 RemoteCommID */
	w[37] = 0x04, w[38] = 0x56;                             /* M12 LocalQPN 0x000456 */
	w[44] = 0x12, w[45] = 0x34, w[46] = 0x56;               /* M20 StartingPSN */
	w[50] = 0x9a; /* M26 TargetACKDelay 19 << 3 | FailoverAccepted 1 << 1 | E2E 0 */
	w[51] = 0xf0; /* M27 RNRRetryCount 7 << 5 | SRQ 0x10 */
	w[53] = 0x02, w[54] = 0xc9, w[55] = 0x03, w[58] = 0x56, w[59] = 0x78; /* M28 GUID */
	w[63] = 0x49, w[66] = 0x08; /* M36 pdata: UD QPN 0x49, receive MTU 2048 */
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.rep.local_comm_id, 0x55667788);
	assert_int_equal(m.rep.remote_comm_id, 0x11223344);
	assert_int_equal(m.rep.local_qpn, 0x456);
	assert_int_equal(m.rep.starting_psn, 0x123456);
	assert_int_equal(m.rep.target_ack_delay, 19);
	assert_int_equal(m.rep.failover_accepted, 1);
	assert_false(m.rep.e2e_flow_control);
	assert_int_equal(m.rep.rnr_retry_count, 7);
	assert_true(m.rep.srq);
	assert_true(m.rep.local_ca_guid == 0x0002c90300005678ull);
	assert_int_equal(m.rep.private_data[3], 0x49);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);
}

static void test_small_vectors(void **state)
{
	uint8_t w[IB_MAD_LEN], out[IB_MAD_LEN];
	struct cm_msg m;

	(void)state;
	/* REJ of a REQ, reason 28 (consumer reject), our private data at M84 = 108 */
	memset(w, 0, sizeof(w));
	hdr(w, CM_ATTR_REJ);
	w[27] = 0x01, w[31] = 0x02; /* LocalCommID 1, RemoteCommID 2 */
	w[32] = 0x00;               /* M8 MessageRejected REQ (0) << 6 */
	w[33] = 0x00;               /* M9 RejectedInfoLength 0 */
	w[35] = 0x1c;               /* M10 Reason 28 */
	w[111] = 0x49, w[114] = 0xff, w[115] = 0xf4;
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.rej.message_rejected, CM_MSG_REF_REQ);
	assert_int_equal(m.rej.reason, CM_REJ_CONSUMER);
	assert_int_equal(m.rej.private_data[3], 0x49);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);

	/* MRA of a REP (1 << 6 = 0x40), ServiceTimeout 20 << 3 = 0xa0 */
	memset(w, 0, sizeof(w));
	hdr(w, CM_ATTR_MRA);
	w[27] = 0x03, w[31] = 0x04, w[32] = 0x40, w[33] = 0xa0;
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.mra.message_mraed, CM_MSG_REF_REP);
	assert_int_equal(m.mra.service_timeout, 20);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);

	/* DREQ to QPN 0x000456 at M8 = 32 */
	memset(w, 0, sizeof(w));
	hdr(w, CM_ATTR_DREQ);
	w[27] = 0x05, w[31] = 0x06, w[33] = 0x04, w[34] = 0x56;
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.dreq.local_comm_id, 5);
	assert_int_equal(m.dreq.remote_comm_id, 6);
	assert_int_equal(m.dreq.remote_qpn, 0x456);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);

	/* RTU and DREP: two comm IDs */
	for (int a = CM_ATTR_RTU; a <= CM_ATTR_DREP; a += 2) {
		memset(w, 0, sizeof(w));
		hdr(w, (uint16_t)a);
		w[27] = 0x07, w[31] = 0x08;
		assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
		assert_int_equal(m.rtu.local_comm_id, 7); /* same layout for DREP */
		assert_int_equal(m.rtu.remote_comm_id, 8);
		assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
		assert_memory_equal(out, w, IB_MAD_LEN);
	}

	/* ClassPortInfo GetResp: BaseVersion 1, ClassVersion 2, RespTimeValue 16 */
	memset(w, 0, sizeof(w));
	hdr(w, CM_ATTR_CLASS_PORT_INFO);
	w[3] = 0x81;
	w[24] = 0x01, w[25] = 0x02, w[31] = 0x10;
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_true(m.response);
	assert_int_equal(m.cpi.class_version, 2);
	assert_int_equal(m.cpi.resp_time_value, 16);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, w, IB_MAD_LEN);
}

/* Reserved fields are ignored on receive and written as zero. */
static void test_reserved(void **state)
{
	uint8_t w[IB_MAD_LEN], clean[IB_MAD_LEN], out[IB_MAD_LEN];
	struct cm_msg m;

	(void)state;
	req_vector(clean);
	memcpy(w, clean, sizeof(w));
	w[28] = 0xff;   /* M4 reserved */
	w[114] |= 0x0f; /* flow label word: reserved 6 bits (part) */
	w[115] |= 0xc0;
	w[118] |= 0x07; /* after SubnetLocal */
	w[119] |= 0x07; /* after LocalACKTimeout */
	assert_int_equal(cm_mad_decode(w, sizeof(w), &m), CM_MAD_OK);
	assert_int_equal(m.req.primary.packet_rate, 3);
	assert_int_equal(cm_mad_encode(&m, out, sizeof(out)), IB_MAD_LEN);
	assert_memory_equal(out, clean, IB_MAD_LEN);
}

static void test_refusals(void **state)
{
	uint8_t w[IB_MAD_LEN + 1];
	struct cm_msg m;

	(void)state;
	req_vector(w);
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN - 1, &m), CM_MAD_ERR_SHORT);
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN + 1, &m), CM_MAD_ERR_LONG);
	assert_int_equal(cm_mad_decode(w, 0, &m), CM_MAD_ERR_SHORT);
#define BAD(off, val, err)                                                                         \
	do {                                                                                       \
		req_vector(w);                                                                     \
		w[off] = (val);                                                                    \
		assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), (err));                         \
	} while (0)
	BAD(0, 2, CM_MAD_ERR_BASE_VERSION);
	BAD(1, 0x03, CM_MAD_ERR_CLASS);
	BAD(2, 1, CM_MAD_ERR_CLASS_VERSION);
	BAD(3, 0x01, CM_MAD_ERR_METHOD);  /* Get */
	BAD(3, 0x83, CM_MAD_ERR_METHOD);  /* R bit on a Send */
	BAD(17, 0x19, CM_MAD_ERR_ATTR);   /* LAP */
	BAD(17, 0x17, CM_MAD_ERR_ATTR);   /* SIDR_REQ */
	BAD(67, 0x86, CM_MAD_ERR_TST);    /* transport service type 3 */
	BAD(74, 0x07, CM_MAD_ERR_MTU);    /* MTU code 0 */
	BAD(74, 0x67, CM_MAD_ERR_MTU);    /* MTU code 6 */
	BAD(17, 0x01, CM_MAD_ERR_METHOD); /* ClassPortInfo with Send */
	BAD(17, 0x11, CM_MAD_OK);         /* the REQ's octets read as an MRA... */
	w[17] = 0x11, w[32] = 0xc0;       /* ...with MessageMRAed 3 */
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), CM_MAD_ERR_MSG_REF);
	memset(w + 24, 0, CM_MSG_LEN);
	w[17] = 0x12, w[32] = 0xc0; /* REJ MessageRejected 3 */
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), CM_MAD_ERR_MSG_REF);
	w[32] = 0, w[33] = 73 << 1; /* RejectedInfoLength 73 */
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), CM_MAD_ERR_REJ_INFO_LEN);
	w[33] = 72 << 1;
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), CM_MAD_OK);
	for (int e = 0; e <= CM_MAD_ERR_COUNT; e++)
		assert_non_null(cm_mad_err_name((enum cm_mad_err)e));
}

static void test_encode_ranges(void **state)
{
	uint8_t w[IB_MAD_LEN];
	struct cm_msg m;

	(void)state;
	req_vector(w);
	assert_int_equal(cm_mad_decode(w, IB_MAD_LEN, &m), CM_MAD_OK);
#define ERANGE_IF(field, val)                                                                      \
	do {                                                                                       \
		struct cm_msg x = m;                                                               \
		x.field = (val);                                                                   \
		assert_int_equal(cm_mad_encode(&x, w, sizeof(w)), -ERANGE);                        \
	} while (0)
	ERANGE_IF(req.local_qpn, 0x1000000);
	ERANGE_IF(req.starting_psn, 0x1000000);
	ERANGE_IF(req.transport_service_type, 3);
	ERANGE_IF(req.path_mtu, 0);
	ERANGE_IF(req.path_mtu, 6);
	ERANGE_IF(req.retry_count, 8);
	ERANGE_IF(req.max_cm_retries, 16);
	ERANGE_IF(req.remote_cm_response_timeout, 32);
	ERANGE_IF(req.primary.flow_label, 0x100000);
	ERANGE_IF(req.primary.sl, 16);
	ERANGE_IF(req.alternate.packet_rate, 64);
	ERANGE_IF(method, 0x80);
	assert_int_equal(cm_mad_encode(&m, w, IB_MAD_LEN - 1), -ENOSPC);
	m.attr_id = 0x19;
	assert_int_equal(cm_mad_encode(&m, w, sizeof(w)), -EINVAL);
	m.attr_id = CM_ATTR_REJ;
	m.rej.message_rejected = 0;
	m.rej.rejected_info_length = 73;
	assert_int_equal(cm_mad_encode(&m, w, sizeof(w)), -ERANGE);
}

static void test_pdata(void **state)
{
	uint8_t p[8] = { 0, 0, 0, 0x48, 0, 0, 0xff, 0xf4 }, q[8];
	struct cm_ipoib_pdata pd = { .ud_qpn = 0x48, .rx_mtu = 65524 };
	uint32_t qpn;

	(void)state;
	assert_int_equal(cm_ipoib_pdata_encode(&pd, q), CM_IPOIB_PDATA_LEN);
	assert_memory_equal(p, q, 8);
	pd.ud_qpn = 0x1000000;
	assert_int_equal(cm_ipoib_pdata_encode(&pd, q), -ERANGE);
	p[0] = 1;
	assert_int_equal(cm_ipoib_pdata_decode(p, &pd), CM_PDATA_ERR_RESERVED);
	p[0] = 0, p[3] = 1;
	assert_int_equal(cm_ipoib_pdata_decode(p, &pd), CM_PDATA_ERR_QPN);
	p[3] = 0x48, p[6] = 0, p[7] = 4;
	assert_int_equal(cm_ipoib_pdata_decode(p, &pd), CM_PDATA_ERR_MTU);
	p[7] = 5;
	assert_int_equal(cm_ipoib_pdata_decode(p, &pd), CM_PDATA_OK);

	assert_true(cm_ipoib_service_id(0x48) == 0x1000000000000048ull);
	assert_int_equal(cm_ipoib_service_qpn(0x1000000000abcdefull, &qpn), 0);
	assert_int_equal(qpn, 0xabcdef);
	/* the RDMA IP CM range (0x0000000001PPPPPP) and the draft's reading are not ours */
	assert_int_equal(cm_ipoib_service_qpn(0x0000000001060048ull, &qpn), -EINVAL);
	assert_int_equal(cm_ipoib_service_qpn(0x0100000000000048ull, &qpn), -EINVAL);
	assert_int_equal(cm_ipoib_service_qpn(0x1000000001000048ull, &qpn), -EINVAL);

	assert_int_equal(cm_ipoib_conn_mtu(65524, 65524), 65520);
	assert_int_equal(cm_ipoib_conn_mtu(65524, 2048), 2044);
	assert_int_equal(cm_ipoib_conn_mtu(4096, 65524), 4092);
	assert_int_equal(cm_ipoib_conn_mtu(1u << 20, 1u << 20), 65520);
	assert_int_equal(cm_ipoib_conn_mtu(65524, 4), 0);

	/* 4.096 us * 2^20 = 4.294967296 s; 2^16: 268.435456 ms; code 0: below 1 ms */
	assert_int_equal(cm_timeout_ms(20), 4295);
	assert_int_equal(cm_timeout_ms(16), 269);
	assert_int_equal(cm_timeout_ms(0), 1);
	assert_int_equal(cm_timeout_ms(31), 8796094);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_req_vector),    cmocka_unit_test(test_rep_vector),
		cmocka_unit_test(test_small_vectors), cmocka_unit_test(test_reserved),
		cmocka_unit_test(test_refusals),      cmocka_unit_test(test_encode_ranges),
		cmocka_unit_test(test_pdata),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
