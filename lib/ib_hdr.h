/*
 * InfiniBand packet headers (IBA vol 1 chapter 7 and 9): LRH, GRH, BTH, DETH, AETH,
 * immediate data, and P_Key rules.
 *
 * Each header has a host-order struct that holds every bit of the wire form, reserved
 * bits included, so that decode then encode gives back the same octets (the fuzz
 * harness relies on it). Decoders are small and static inline: the data plane calls
 * them per packet. They return 0, -EMSGSIZE when the buffer is shorter than the header,
 * or -EINVAL when a version field says the rest of the layout is not the one we know
 * (LRH LVer, GRH IPVer, BTH TVer). Encoders return the number of bytes written,
 * -ENOSPC when the buffer is short, or -ERANGE when a field does not fit its width.
 *
 * Layouts (bit 7 is the most significant bit of an octet):
 *   LRH  0: VL(4) LVer(4)  1: SL(4) rsv(2) LNH(2)  2-3: DLID  4-5: rsv(5) PktLen(11)
 *        6-7: SLID
 *   GRH  0-3: IPVer(4) TClass(8) FlowLabel(20)  4-5: PayLen  6: NxtHdr  7: HopLmt
 *        8-23: SGID  24-39: DGID
 *   BTH  0: OpCode  1: SE(1) M(1) PadCnt(2) TVer(4)  2-3: P_Key
 *        4: FECN(1) BECN(1) rsv(6) ("resv8a")  5-7: DestQP  8: A(1) rsv(7)  9-11: PSN
 *   DETH 0-3: Q_Key  4: rsv  5-7: SrcQP
 *   AETH 0: Syndrome  1-3: MSN
 */
#ifndef IBGW_LIB_IB_HDR_H
#define IBGW_LIB_IB_HDR_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_bytes.h"
#include "lib/ib_gid.h"

#define IB_LRH_LEN  8
#define IB_GRH_LEN  40
#define IB_BTH_LEN  12
#define IB_DETH_LEN 8
#define IB_AETH_LEN 4
#define IB_IMM_LEN  4

/* LRH LNH: what follows the LRH. */
enum ib_lnh {
	IB_LNH_RAW = 0,        /* raw packet: no IBA transport headers */
	IB_LNH_IP = 1,         /* non-IBA transport (raw IPv6 datagram) */
	IB_LNH_IBA_LOCAL = 2,  /* BTH follows */
	IB_LNH_IBA_GLOBAL = 3, /* GRH, then BTH */
};

#define IB_GRH_IPVER      6
#define IB_GRH_NXTHDR_BTH 0x1b /* GRH NxtHdr for an IBA transport header */
#define IB_LID_PERMISSIVE 0xffff
#define IB_LID_MC_FIRST   0xc000 /* LIDs 0xC000-0xFFFE are multicast */
#define IB_PKTLEN_MAX     0x7ff  /* PktLen is 11 bits of 4-byte words */
#define IB_QPN_MAX        0xffffff
#define IB_PSN_MAX        0xffffff

/* Q_Keys and QPs every IPoIB/GSI user meets. */
#define IB_QP1             1           /* GSI, where MADs (SA, CM) arrive */
#define IB_QP1_QKEY        0x80010000u /* GSI Q_Key */
#define IB_QKEY_PRIVILEGED 0x80000000u /* high bit: a controlled Q_Key */
#define IB_QPN_MULTICAST   0xffffff    /* DestQP of multicast UD packets */

struct ib_lrh {
	uint8_t vl, lver, sl, rsv2, lnh;
	uint16_t dlid;
	uint8_t rsv5;
	uint16_t pkt_len; /* 4-byte words from the LRH through the ICRC */
	uint16_t slid;
};

struct ib_grh {
	uint8_t ipver, tclass;
	uint32_t flow_label; /* 20 bits */
	uint16_t pay_len;    /* bytes after the GRH through the ICRC */
	uint8_t next_hdr, hop_limit;
	union ib_gid sgid, dgid;
};

struct ib_bth {
	uint8_t opcode;
	bool se, mig;
	uint8_t pad; /* 0-3 pad bytes after the payload */
	uint8_t tver;
	uint16_t pkey;
	bool fecn, becn;
	uint8_t rsv6;
	uint32_t dqpn; /* 24 bits */
	bool ack_req;
	uint8_t rsv7;
	uint32_t psn; /* 24 bits */
};

struct ib_deth {
	uint32_t qkey;
	uint8_t rsv8;
	uint32_t src_qp; /* 24 bits */
};

struct ib_aeth {
	uint8_t syndrome;
	uint32_t msn; /* 24 bits */
};

static inline int ib_lrh_decode(const uint8_t *buf, size_t len, struct ib_lrh *out)
{
	if (len < IB_LRH_LEN)
		return -EMSGSIZE;
	out->vl = buf[0] >> 4;
	out->lver = buf[0] & 0xf;
	out->sl = buf[1] >> 4;
	out->rsv2 = (buf[1] >> 2) & 0x3;
	out->lnh = buf[1] & 0x3;
	out->dlid = ib_get_be16(buf + 2);
	out->rsv5 = buf[4] >> 3;
	out->pkt_len = ib_get_be16(buf + 4) & IB_PKTLEN_MAX;
	out->slid = ib_get_be16(buf + 6);
	return out->lver == 0 ? 0 : -EINVAL;
}

static inline int ib_grh_decode(const uint8_t *buf, size_t len, struct ib_grh *out)
{
	uint32_t w0;

	if (len < IB_GRH_LEN)
		return -EMSGSIZE;
	w0 = ib_get_be32(buf);
	out->ipver = (uint8_t)(w0 >> 28);
	out->tclass = (uint8_t)(w0 >> 20);
	out->flow_label = w0 & 0xfffff;
	out->pay_len = ib_get_be16(buf + 4);
	out->next_hdr = buf[6];
	out->hop_limit = buf[7];
	for (int i = 0; i < IB_GID_LEN; i++) {
		out->sgid.raw[i] = buf[8 + i];
		out->dgid.raw[i] = buf[24 + i];
	}
	return out->ipver == IB_GRH_IPVER ? 0 : -EINVAL;
}

static inline int ib_bth_decode(const uint8_t *buf, size_t len, struct ib_bth *out)
{
	if (len < IB_BTH_LEN)
		return -EMSGSIZE;
	out->opcode = buf[0];
	out->se = buf[1] >> 7;
	out->mig = (buf[1] >> 6) & 1;
	out->pad = (buf[1] >> 4) & 0x3;
	out->tver = buf[1] & 0xf;
	out->pkey = ib_get_be16(buf + 2);
	out->fecn = buf[4] >> 7;
	out->becn = (buf[4] >> 6) & 1;
	out->rsv6 = buf[4] & 0x3f;
	out->dqpn = ib_get_be24(buf + 5);
	out->ack_req = buf[8] >> 7;
	out->rsv7 = buf[8] & 0x7f;
	out->psn = ib_get_be24(buf + 9);
	return out->tver == 0 ? 0 : -EINVAL;
}

static inline int ib_deth_decode(const uint8_t *buf, size_t len, struct ib_deth *out)
{
	if (len < IB_DETH_LEN)
		return -EMSGSIZE;
	out->qkey = ib_get_be32(buf);
	out->rsv8 = buf[4];
	out->src_qp = ib_get_be24(buf + 5);
	return 0;
}

static inline int ib_aeth_decode(const uint8_t *buf, size_t len, struct ib_aeth *out)
{
	if (len < IB_AETH_LEN)
		return -EMSGSIZE;
	out->syndrome = buf[0];
	out->msn = ib_get_be24(buf + 1);
	return 0;
}

int ib_lrh_encode(const struct ib_lrh *h, uint8_t *buf, size_t len);
int ib_grh_encode(const struct ib_grh *h, uint8_t *buf, size_t len);
int ib_bth_encode(const struct ib_bth *h, uint8_t *buf, size_t len);
int ib_deth_encode(const struct ib_deth *h, uint8_t *buf, size_t len);
int ib_aeth_encode(const struct ib_aeth *h, uint8_t *buf, size_t len);

/*
 * P_Keys (IBA 10.9.1): the high bit is the membership type (1 full, 0 limited), the
 * low 15 bits the partition's base value. Two P_Keys match when their bases are equal
 * and at least one of them is a full member (two limited members may not talk). A base
 * of 0 is invalid: 0x0000 and 0x8000 match nothing.
 */
#define IB_PKEY_FULL    0x8000
#define IB_PKEY_BASE    0x7fff
#define IB_PKEY_DEFAULT 0xffff

static inline uint16_t ib_pkey_base(uint16_t pkey)
{
	return pkey & IB_PKEY_BASE;
}

static inline bool ib_pkey_is_full(uint16_t pkey)
{
	return (pkey & IB_PKEY_FULL) != 0;
}

static inline bool ib_pkey_is_valid(uint16_t pkey)
{
	return ib_pkey_base(pkey) != 0;
}

static inline bool ib_pkey_match(uint16_t a, uint16_t b)
{
	return ib_pkey_is_valid(a) && ib_pkey_base(a) == ib_pkey_base(b) &&
	       (ib_pkey_is_full(a) || ib_pkey_is_full(b));
}

/*
 * BTH opcodes: the high 3 bits name the transport (RC 000, UC 001, RD 010, UD 011),
 * the low 5 the operation. Only those whose layout we walk are listed.
 */
enum ib_opcode {
	IB_OP_RC_SEND_FIRST = 0x00,
	IB_OP_RC_SEND_MIDDLE = 0x01,
	IB_OP_RC_SEND_LAST = 0x02,
	IB_OP_RC_SEND_LAST_IMM = 0x03,
	IB_OP_RC_SEND_ONLY = 0x04,
	IB_OP_RC_SEND_ONLY_IMM = 0x05,
	IB_OP_RC_ACK = 0x11,
	IB_OP_UC_SEND_FIRST = 0x20,
	IB_OP_UC_SEND_MIDDLE = 0x21,
	IB_OP_UC_SEND_LAST = 0x22,
	IB_OP_UC_SEND_LAST_IMM = 0x23,
	IB_OP_UC_SEND_ONLY = 0x24,
	IB_OP_UC_SEND_ONLY_IMM = 0x25,
	IB_OP_UD_SEND_ONLY = 0x64,
	IB_OP_UD_SEND_ONLY_IMM = 0x65,
};

/* Which extension headers follow the BTH for an opcode we know. */
#define IB_EXT_DETH 0x1u
#define IB_EXT_AETH 0x2u
#define IB_EXT_IMM  0x4u

/* Extension-header set of opcode, or -1 for an opcode we do not handle. */
static inline int ib_opcode_ext(uint8_t opcode)
{
	switch (opcode) {
	case IB_OP_RC_SEND_FIRST:
	case IB_OP_RC_SEND_MIDDLE:
	case IB_OP_RC_SEND_LAST:
	case IB_OP_RC_SEND_ONLY:
	case IB_OP_UC_SEND_FIRST:
	case IB_OP_UC_SEND_MIDDLE:
	case IB_OP_UC_SEND_LAST:
	case IB_OP_UC_SEND_ONLY:
		return 0;
	case IB_OP_RC_SEND_LAST_IMM:
	case IB_OP_RC_SEND_ONLY_IMM:
	case IB_OP_UC_SEND_LAST_IMM:
	case IB_OP_UC_SEND_ONLY_IMM:
		return IB_EXT_IMM;
	case IB_OP_RC_ACK:
		return IB_EXT_AETH;
	case IB_OP_UD_SEND_ONLY:
		return IB_EXT_DETH;
	case IB_OP_UD_SEND_ONLY_IMM:
		return IB_EXT_DETH | IB_EXT_IMM;
	default:
		return -1;
	}
}

/* Bytes of extension headers for an extension set from ib_opcode_ext(). */
static inline size_t ib_ext_len(unsigned ext)
{
	return (ext & IB_EXT_DETH ? IB_DETH_LEN : 0) + (ext & IB_EXT_AETH ? IB_AETH_LEN : 0) +
	       (ext & IB_EXT_IMM ? IB_IMM_LEN : 0);
}

#endif
