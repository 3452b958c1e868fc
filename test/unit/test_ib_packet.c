/*
 * Whole-packet parse and build: two packets worked out by hand, build reproducing them
 * octet for octet, every truncation, every refusal reason, RC opcodes, range errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/ib_packet.h"

/*
 * Local UD SEND only, 38 octets:
 *   LRH  10: VL 1, LVer 0 | 02: SL 0, LNH 2 (IBA local) | 0001: DLID 1 |
 *        0009: PktLen 9 words = 8 LRH + 12 BTH + 8 DETH + 4 payload + 4 ICRC = 36 | 0002 SLID
 *   BTH  64: UD SEND only | 00: SE 0 M 0 Pad 0 TVer 0 | ffff P_Key | 00 resv8a |
 *        000001 DestQP | 00 A 0 | 000000 PSN
 *   DETH 00000b1b Q_Key | 00 | 000048 SrcQP
 *   "ABCD"
 *   ICRC 0x6776f264 least significant octet first (zlib.crc32 over the masked octets)
 *   VCRC 0x3f16 least significant octet first (bitwise CRC-16/0x100B in Python)
 */
static const uint8_t local_pkt[] = {
	0x10, 0x02, 0x00, 0x01, 0x00, 0x09, 0x00, 0x02, 0x64, 0x00, 0xff, 0xff, 0x00,
	0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0b, 0x1b, 0x00, 0x00,
	0x00, 0x48, 0x41, 0x42, 0x43, 0x44, 0x64, 0xf2, 0x76, 0x67, 0x16, 0x3f,
};

/*
 * Global UD SEND only, 82 octets:
 *   LRH  10: VL 1 | 03: LNH 3 (GRH follows) | c000 DLID (multicast) | 0014: PktLen 20
 *        words = 8 + 40 GRH + 12 + 8 + 8 ("hello" + 3 pad) + 4 = 80 | 0002 SLID
 *   GRH  60a12345: IPVer 6, TClass 0x0a, FlowLabel 0x12345 | 0020 PayLen 32 = 80 - 48 |
 *        1b NxtHdr | 40 HopLmt 64 | SGID fe80::2:c903:1:1234 |
 *        DGID ff12:401b:ffff::ffff:ffff (IPv4 broadcast group, P_Key ffff, link scope)
 *   BTH  64 | 30: Pad 3 | ffff | 00 | ffffff DestQP (multicast) | 00 | 000005 PSN 5
 *   DETH 00000b1b | 00 | 000048;  "hello" 000000
 *   ICRC 0x615cc97a, VCRC 0x76fe (as above; the LRH counts as all ones)
 */
static const uint8_t global_pkt[] = {
	0x10, 0x03, 0xc0, 0x00, 0x00, 0x14, 0x00, 0x02, 0x60, 0xa1, 0x23, 0x45, 0x00, 0x20,
	0x1b, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0xc9, 0x03,
	0x00, 0x01, 0x12, 0x34, 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x64, 0x30, 0xff, 0xff, 0x00, 0xff, 0xff, 0xff,
	0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x0b, 0x1b, 0x00, 0x00, 0x00, 0x48, 0x68, 0x65,
	0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, 0x7a, 0xc9, 0x5c, 0x61, 0xfe, 0x76,
};

static void test_parse_local(void **state)
{
	struct ib_packet p;

	(void)state;
	assert_int_equal(ib_packet_parse(local_pkt, sizeof(local_pkt), &p), IB_PKT_OK);
	assert_int_equal(p.lrh.vl, 1);
	assert_int_equal(p.lrh.sl, 0);
	assert_int_equal(p.lrh.lnh, IB_LNH_IBA_LOCAL);
	assert_int_equal(p.lrh.dlid, 1);
	assert_int_equal(p.lrh.slid, 2);
	assert_int_equal(p.lrh.pkt_len, 9);
	assert_false(p.has_grh);
	assert_int_equal(p.bth.opcode, IB_OP_UD_SEND_ONLY);
	assert_int_equal(p.bth.pkey, 0xffff);
	assert_int_equal(p.bth.dqpn, 1);
	assert_int_equal(p.bth.pad, 0);
	assert_int_equal(p.ext, IB_EXT_DETH);
	assert_int_equal(p.deth.qkey, 0xb1b);
	assert_int_equal(p.deth.src_qp, 0x48);
	assert_int_equal(p.payload_len, 4);
	assert_ptr_equal(p.payload, local_pkt + 28);
	assert_memory_equal(p.payload, "ABCD", 4);
	assert_int_equal(p.icrc, 0x6776f264u);
	assert_int_equal(p.vcrc, 0x3f16);
}

static void test_parse_global(void **state)
{
	struct ib_packet p;
	char text[IB_GID_STRLEN];

	(void)state;
	assert_int_equal(ib_packet_parse(global_pkt, sizeof(global_pkt), &p), IB_PKT_OK);
	assert_true(p.has_grh);
	assert_int_equal(p.lrh.dlid, 0xc000);
	assert_int_equal(p.grh.tclass, 0x0a);
	assert_int_equal(p.grh.flow_label, 0x12345);
	assert_int_equal(p.grh.pay_len, 32);
	assert_int_equal(p.grh.hop_limit, 64);
	assert_true(ib_gid_format(&p.grh.sgid, text, sizeof(text)) > 0);
	assert_string_equal(text, "fe80::2:c903:1:1234");
	assert_true(ib_gid_format(&p.grh.dgid, text, sizeof(text)) > 0);
	assert_string_equal(text, "ff12:401b:ffff::ffff:ffff");
	assert_int_equal(p.bth.pad, 3);
	assert_int_equal(p.bth.dqpn, IB_QPN_MULTICAST);
	assert_int_equal(p.bth.psn, 5);
	assert_int_equal(p.payload_len, 5);
	assert_memory_equal(p.payload, "hello", 5);
}

static void test_build_reproduces_vectors(void **state)
{
	const uint8_t *vec[] = { local_pkt, global_pkt };
	size_t len[] = { sizeof(local_pkt), sizeof(global_pkt) };
	uint8_t out[128];
	struct ib_packet p;

	(void)state;
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ib_packet_parse(vec[i], len[i], &p), IB_PKT_OK);
		assert_int_equal(ib_packet_len(&p), len[i]);
		memset(out, 0xaa, sizeof(out));
		assert_int_equal(ib_packet_build(&p, out, sizeof(out)), (int)len[i]);
		assert_memory_equal(out, vec[i], len[i]);
	}
}

static void test_build_from_scratch(void **state)
{
	uint8_t out[128];
	struct ib_packet p;

	(void)state;
	/* The global vector again, from fields only (computed ones left at zero). */
	memset(&p, 0, sizeof(p));
	p.lrh.vl = 1;
	p.lrh.dlid = 0xc000;
	p.lrh.slid = 2;
	p.has_grh = true;
	p.grh.ipver = 6;
	p.grh.next_hdr = IB_GRH_NXTHDR_BTH;
	p.grh.tclass = 0x0a;
	p.grh.flow_label = 0x12345;
	p.grh.hop_limit = 64;
	assert_int_equal(ib_gid_parse("fe80::2:c903:1:1234", &p.grh.sgid), 0);
	assert_int_equal(ib_gid_parse("ff12:401b:ffff::ffff:ffff", &p.grh.dgid), 0);
	p.bth.opcode = IB_OP_UD_SEND_ONLY;
	p.bth.pkey = 0xffff;
	p.bth.dqpn = 0xffffff;
	p.bth.psn = 5;
	p.deth.qkey = 0xb1b;
	p.deth.src_qp = 0x48;
	p.payload = (const uint8_t *)"hello";
	p.payload_len = 5;
	assert_int_equal(ib_packet_build(&p, out, sizeof(out)), (int)sizeof(global_pkt));
	assert_memory_equal(out, global_pkt, sizeof(global_pkt));
}

static void test_every_truncation(void **state)
{
	struct ib_packet p;

	(void)state;
	for (size_t n = 0; n < sizeof(global_pkt); n++) {
		enum ib_pkt_err want = n < IB_LRH_LEN ? IB_PKT_ERR_SHORT_LRH : IB_PKT_ERR_TRUNCATED;

		assert_int_equal(ib_packet_parse(global_pkt, n, &p), want);
	}
	for (size_t n = 0; n < sizeof(local_pkt); n++) {
		enum ib_pkt_err want = n < IB_LRH_LEN ? IB_PKT_ERR_SHORT_LRH : IB_PKT_ERR_TRUNCATED;

		assert_int_equal(ib_packet_parse(local_pkt, n, &p), want);
	}
}

static void test_trailing(void **state)
{
	uint8_t buf[sizeof(local_pkt) + 4];
	struct ib_packet p;

	(void)state;
	memcpy(buf, local_pkt, sizeof(local_pkt));
	memset(buf + sizeof(local_pkt), 0, 4);
	for (size_t extra = 1; extra <= 4; extra++)
		assert_int_equal(ib_packet_parse(buf, sizeof(local_pkt) + extra, &p),
				 IB_PKT_ERR_TRAILING);
}

/* Every single-bit flip of the local packet is refused (CRCs catch what the
 * structural checks do not), and never accepted. */
static void test_every_bit_flip_refused(void **state)
{
	uint8_t buf[sizeof(local_pkt)];
	struct ib_packet p;

	(void)state;
	for (size_t i = 0; i < sizeof(buf) * 8; i++) {
		memcpy(buf, local_pkt, sizeof(buf));
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
		assert_int_not_equal(ib_packet_parse(buf, sizeof(buf), &p), IB_PKT_OK);
	}
}

/* Rewrite octet `at` of a copy of `src`, fix PktLen/VCRC as told, and parse it. */
static enum ib_pkt_err parse_edited(const uint8_t *src, size_t len, size_t at, uint8_t val,
				    bool reseal)
{
	uint8_t buf[128];
	struct ib_packet p;

	memcpy(buf, src, len);
	buf[at] = val;
	if (reseal)
		assert_int_equal(ib_packet_reseal_vcrc(buf, len), 0);
	return ib_packet_parse(buf, len, &p);
}

static void test_each_reason(void **state)
{
	(void)state;
	/* LVer 1 (octet 0 low nibble). */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 0, 0x11, true),
			 IB_PKT_ERR_LVER);
	/* LNH 0 raw, 1 non-IBA. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 1, 0x00, true), IB_PKT_ERR_LNH);
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 1, 0x01, true), IB_PKT_ERR_LNH);
	/* A flipped payload bit with the VCRC left alone: the link layer sees it. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 30, 0x00, false),
			 IB_PKT_ERR_VCRC);
	/* Same with a fresh VCRC (as a faulty switch would make): the ICRC sees it. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 30, 0x00, true),
			 IB_PKT_ERR_ICRC);
	/* A variant field (VL) changed by a switch that reseals the VCRC: accepted. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 0, 0x70, true), IB_PKT_OK);
	/* GRH IPVer 4, NxtHdr 0x11, PayLen 31. */
	assert_int_equal(parse_edited(global_pkt, sizeof(global_pkt), 8, 0x40, true),
			 IB_PKT_ERR_IPVER);
	assert_int_equal(parse_edited(global_pkt, sizeof(global_pkt), 14, 0x11, true),
			 IB_PKT_ERR_NXTHDR);
	assert_int_equal(parse_edited(global_pkt, sizeof(global_pkt), 13, 0x1f, true),
			 IB_PKT_ERR_PAYLEN);
	/* TVer 1 (BTH octet 1 low nibble). */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 9, 0x01, true),
			 IB_PKT_ERR_TVER);
	/* Opcode 0x0c (RC RDMA READ request) is not handled. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 8, 0x0c, true),
			 IB_PKT_ERR_OPCODE);
	/* UD SEND only with immediate: DETH + ImmDt = 12 octets, but only 8 + 4 remain
	 * before the ICRC, so the payload is empty: accepted structurally, ICRC differs. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 8, 0x65, true),
			 IB_PKT_ERR_ICRC);
	/* Pad 3 leaves 1 payload octet: structurally fine, ICRC then differs. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 9, 0x30, true),
			 IB_PKT_ERR_ICRC);
}

/* ib_packet_parse_headers: the same fields and refusals, the CRCs read but not judged. */
static void test_parse_headers(void **state)
{
	uint8_t buf[sizeof(global_pkt)];
	struct ib_packet p, q;

	(void)state;
	assert_int_equal(ib_packet_parse(global_pkt, sizeof(global_pkt), &p), IB_PKT_OK);
	assert_int_equal(ib_packet_parse_headers(global_pkt, sizeof(global_pkt), &q), IB_PKT_OK);
	assert_memory_equal(&p, &q, sizeof(p));
	/* A flipped payload bit, the VCRC stale (then fresh): only the full parse sees it. */
	assert_int_equal(parse_edited(local_pkt, sizeof(local_pkt), 30, 0x00, false),
			 IB_PKT_ERR_VCRC);
	memcpy(buf, local_pkt, sizeof(local_pkt));
	buf[30] ^= 0x01;
	assert_int_equal(ib_packet_parse_headers(buf, sizeof(local_pkt), &q), IB_PKT_OK);
	assert_int_equal(q.payload_len, 4); /* local_pkt's "ABCD" */
	assert_int_equal(q.vcrc, ib_get_le16(local_pkt + sizeof(local_pkt) - 2));
	assert_int_equal(ib_packet_reseal_vcrc(buf, sizeof(local_pkt)), 0);
	assert_int_equal(ib_packet_parse(buf, sizeof(local_pkt), &p), IB_PKT_ERR_ICRC);
	assert_int_equal(ib_packet_parse_headers(buf, sizeof(local_pkt), &q), IB_PKT_OK);
	/* Header faults are still refused, for the same reason. */
	memcpy(buf, local_pkt, sizeof(local_pkt));
	buf[8] = 0x0c; /* RC RDMA READ request */
	assert_int_equal(ib_packet_parse_headers(buf, sizeof(local_pkt), &q), IB_PKT_ERR_OPCODE);
	assert_int_equal(ib_packet_parse_headers(local_pkt, sizeof(local_pkt) - 1, &q),
			 IB_PKT_ERR_TRUNCATED);
	memcpy(buf, global_pkt, sizeof(global_pkt));
	buf[14] = 0x11;
	assert_int_equal(ib_packet_parse_headers(buf, sizeof(global_pkt), &q), IB_PKT_ERR_NXTHDR);
}

/* Packets whose PktLen is consistent with the buffer but too small for the headers. */
static void test_pktlen_too_small(void **state)
{
	uint8_t buf[64];
	struct ib_packet p;

	(void)state;
	/* Local, PktLen 6 = LRH + 16: the BTH (12) + ICRC (4) need 16: just fits, then
	 * DETH does not. */
	memcpy(buf, local_pkt, 24);
	buf[5] = 6;
	assert_int_equal(ib_packet_reseal_vcrc(buf, 26), 0);
	assert_int_equal(ib_packet_parse(buf, 26, &p), IB_PKT_ERR_PKTLEN_EXT);
	/* PktLen 5: no room for the BTH and the ICRC. */
	buf[5] = 5;
	assert_int_equal(ib_packet_reseal_vcrc(buf, 22), 0);
	assert_int_equal(ib_packet_parse(buf, 22, &p), IB_PKT_ERR_PKTLEN_BTH);
	/* PktLen 2: the LRH alone. */
	buf[5] = 2;
	assert_int_equal(ib_packet_reseal_vcrc(buf, 10), 0);
	assert_int_equal(ib_packet_parse(buf, 10, &p), IB_PKT_ERR_PKTLEN_BTH);
	/* Global, PktLen 12 = 48 octets: GRH ends where the ICRC would start. */
	memcpy(buf, global_pkt, 48);
	buf[5] = 12;
	assert_int_equal(ib_packet_reseal_vcrc(buf, 50), 0);
	assert_int_equal(ib_packet_parse(buf, 50, &p), IB_PKT_ERR_PKTLEN_GRH);
	/* Local SEND only (no DETH) with 0 payload octets and pad 1. */
	memcpy(buf, local_pkt, 20);
	buf[5] = 6;
	buf[8] = IB_OP_RC_SEND_ONLY;
	buf[9] = 0x10;
	assert_int_equal(ib_packet_reseal_vcrc(buf, 26), 0);
	assert_int_equal(ib_packet_parse(buf, 26, &p), IB_PKT_ERR_PAD);
}

static void test_rc_opcodes(void **state)
{
	static const struct {
		uint8_t op;
		unsigned ext;
		size_t hdrs;
	} ops[] = {
		{ IB_OP_RC_SEND_FIRST, 0, 20 },
		{ IB_OP_RC_SEND_MIDDLE, 0, 20 },
		{ IB_OP_RC_SEND_LAST, 0, 20 },
		{ IB_OP_RC_SEND_LAST_IMM, IB_EXT_IMM, 24 },
		{ IB_OP_RC_SEND_ONLY, 0, 20 },
		{ IB_OP_RC_SEND_ONLY_IMM, IB_EXT_IMM, 24 },
		{ IB_OP_RC_ACK, IB_EXT_AETH, 24 },
		{ IB_OP_UC_SEND_ONLY_IMM, IB_EXT_IMM, 24 },
		{ IB_OP_UD_SEND_ONLY_IMM, IB_EXT_DETH | IB_EXT_IMM, 32 },
	};
	const uint8_t payload[7] = { 1, 2, 3, 4, 5, 6, 7 };
	uint8_t buf[128];
	struct ib_packet in, out;

	(void)state;
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		memset(&in, 0, sizeof(in));
		in.lrh.dlid = 3;
		in.lrh.slid = 4;
		in.bth.opcode = ops[i].op;
		in.bth.pkey = 0x8001;
		in.bth.dqpn = 0x123456;
		in.bth.psn = 0xabcdef;
		in.bth.ack_req = true;
		in.aeth.syndrome = 0x1f;
		in.aeth.msn = 0x10203;
		in.imm = 0xdeadbeef;
		in.deth.qkey = 0x80010000u;
		in.deth.src_qp = 1;
		in.payload = payload;
		in.payload_len = ops[i].op == IB_OP_RC_ACK ? 0 : sizeof(payload);
		int n = ib_packet_build(&in, buf, sizeof(buf));
		assert_int_equal(n, (int)(ops[i].hdrs + ((in.payload_len + 3) & ~3u) + 6));
		assert_int_equal(ib_packet_parse(buf, (size_t)n, &out), IB_PKT_OK);
		assert_int_equal(out.ext, ops[i].ext);
		assert_int_equal(out.payload_len, in.payload_len);
		assert_ptr_equal(out.payload, buf + ops[i].hdrs);
		if (in.payload_len)
			assert_memory_equal(out.payload, payload, in.payload_len);
		if (ops[i].ext & IB_EXT_IMM)
			assert_int_equal(out.imm, 0xdeadbeefu);
		if (ops[i].ext & IB_EXT_AETH) {
			assert_int_equal(out.aeth.syndrome, 0x1f);
			assert_int_equal(out.aeth.msn, 0x10203);
		}
		assert_int_equal(out.bth.psn, 0xabcdef);
		assert_true(out.bth.ack_req);
	}
}

static void test_build_refuses(void **state)
{
	static uint8_t big[IB_PACKET_MAX_LEN];
	uint8_t buf[IB_PACKET_MAX_LEN];
	struct ib_packet p, base;

	(void)state;
	memset(&base, 0, sizeof(base));
	base.bth.opcode = IB_OP_UD_SEND_ONLY;
	base.payload = big;
	base.payload_len = 4;

	p = base;
	p.bth.opcode = 0x0c;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -EINVAL);
	p = base;
	p.lrh.lver = 1;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -EINVAL);
	p = base;
	p.bth.tver = 1;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -EINVAL);
	p = base;
	p.has_grh = true; /* IPVer left 0 */
	p.grh.next_hdr = IB_GRH_NXTHDR_BTH;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -EINVAL);
	p.grh.ipver = 6;
	p.grh.flow_label = 0x100000;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	p = base;
	p.lrh.vl = 16;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	p = base;
	p.lrh.sl = 16;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	p = base;
	p.bth.dqpn = 0x1000000;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	p = base;
	p.bth.psn = 0x1000000;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	p = base;
	p.deth.src_qp = 0x1000000;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	/* Largest payload PktLen can count: 2047 * 4 - 8 - 12 - 8 - 4 = 8156. */
	p = base;
	p.payload_len = 8156;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), IB_PACKET_MAX_LEN);
	struct ib_packet q;
	assert_int_equal(ib_packet_parse(buf, IB_PACKET_MAX_LEN, &q), IB_PKT_OK);
	assert_int_equal(q.lrh.pkt_len, IB_PKTLEN_MAX);
	p.payload_len = 8157;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -ERANGE);
	/* Buffer one octet short. */
	p = base;
	assert_int_equal(ib_packet_build(&p, buf, ib_packet_len(&p) - 1), -ENOSPC);
	/* Payload length without a payload. */
	p = base;
	p.payload = NULL;
	assert_int_equal(ib_packet_build(&p, buf, sizeof(buf)), -EINVAL);
}

static void test_err_strings(void **state)
{
	(void)state;
	for (int e = 0; e < IB_PKT_ERR_COUNT; e++) {
		assert_non_null(ib_pkt_err_str((enum ib_pkt_err)e));
		assert_non_null(ib_pkt_err_name((enum ib_pkt_err)e));
		for (int f = 0; f < e; f++)
			assert_string_not_equal(ib_pkt_err_name((enum ib_pkt_err)e),
						ib_pkt_err_name((enum ib_pkt_err)f));
	}
	assert_string_equal(ib_pkt_err_name(IB_PKT_ERR_VCRC), "vcrc");
	assert_string_equal(ib_pkt_err_str(IB_PKT_ERR_COUNT), "unknown packet error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_local),
		cmocka_unit_test(test_parse_global),
		cmocka_unit_test(test_build_reproduces_vectors),
		cmocka_unit_test(test_build_from_scratch),
		cmocka_unit_test(test_every_truncation),
		cmocka_unit_test(test_trailing),
		cmocka_unit_test(test_every_bit_flip_refused),
		cmocka_unit_test(test_each_reason),
		cmocka_unit_test(test_parse_headers),
		cmocka_unit_test(test_pktlen_too_small),
		cmocka_unit_test(test_rc_opcodes),
		cmocka_unit_test(test_build_refuses),
		cmocka_unit_test(test_err_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
