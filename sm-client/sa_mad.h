/*
 * SA MAD codecs (IBA vol 1 section 15.2): the SA header and the records the gateway
 * uses. Module-internal: sa.c, the unit tests and the fuzz harness include it; nothing
 * outside sm-client/ should.
 *
 * SA MAD layout (256 octets on the wire, more after RMPP reassembly on hardware):
 *    0  MAD common header (24)          lib/ib_mad.h
 *   24  RMPP header (12): version, type, RRespTime(5)|flags(3), status, data1, data2
 *   36  SM_Key (8)
 *   44  AttributeOffset (2, in 8-octet words)   46 reserved (2)
 *   48  ComponentMask (8)
 *   56  SA data (200 per MAD)
 *
 * Records (offsets inside the record; checked against rdma-core's umad_sa*.h and
 * OpenSM's ib_types.h, see docs/sa-client.md):
 *   PathRecord 64:  0 ServiceID(8) 8 DGID 24 SGID 40 DLID 42 SLID
 *                   44 RawTraffic(1) rsvd(3) FlowLabel(20) HopLimit(8)
 *                   48 TClass 49 Reversible(1) NumbPath(7) 50 P_Key
 *                   52 QoSClass(12) SL(4) 54 MTUSel(2) MTU(6) 55 RateSel(2) Rate(6)
 *                   56 PktLifeSel(2) PktLife(6) 57 Preference 58 reserved(6)
 *   MCMemberRecord 52 (AttributeOffset 7 words = 56):
 *                   0 MGID 16 PortGID 32 Q_Key 36 MLID 38 MTUSel|MTU 39 TClass
 *                   40 P_Key 42 RateSel|Rate 43 PktLifeSel|PktLife
 *                   44 SL(4) FlowLabel(20) HopLimit(8) 48 Scope(4) JoinState(4)
 *                   49 ProxyJoin(1) reserved(23)
 *   InformInfo 36:  0 GID 16 LIDRangeBegin 18 LIDRangeEnd 20 reserved 22 IsGeneric
 *                   23 Subscribe 24 Type 26 TrapNumber 28 QPN(24) rsvd(3) RespTime(5)
 *                   32 reserved(8) ProducerType(24)
 *   Notice 80:      0 IsGeneric(1) Type(7) ProducerType(24) 4 TrapNumber 6 IssuerLID
 *                   8 Toggle(1) Count(15) 10 DataDetails(54) 64 IssuerGID
 *                   traps 64-67 carry a GID at DataDetails + 6 (notice offset 16).
 *   ClassPortInfo:  0 BaseVersion 1 ClassVersion 2 CapMask 4 CapMask2(27) RespTime(5)
 */
#ifndef IBGW_SM_CLIENT_SA_MAD_H
#define IBGW_SM_CLIENT_SA_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"
#include "lib/ib_mad.h"

#define SA_CLASS_VERSION 2
#define SA_HDR_LEN       56
#define SA_DATA_LEN      200
#define SA_QP1_QKEY      0x80010000u

enum sa_attr {
	SA_ATTR_CLASS_PORT_INFO = 0x0001,
	SA_ATTR_NOTICE = 0x0002,
	SA_ATTR_INFORM_INFO = 0x0003,
	SA_ATTR_PORT_INFO_REC = 0x0012,
	SA_ATTR_PATH_REC = 0x0035,
	SA_ATTR_MCMEMBER_REC = 0x0038,
	SA_ATTR_INFORM_INFO_REC = 0x00f3,
};

#define SA_PATH_REC_LEN        64
#define SA_MCM_REC_LEN         52
#define SA_INFORM_INFO_LEN     36
#define SA_NOTICE_LEN          80
#define SA_CLASS_PORT_INFO_LEN 72

/* ComponentMask bits. */
enum {
	SA_PR_DGID = 1u << 2,
	SA_PR_SGID = 1u << 3,
	SA_PR_TCLASS = 1u << 10,
	SA_PR_REVERSIBLE = 1u << 11,
	SA_PR_NUMBPATH = 1u << 12,
	SA_PR_PKEY = 1u << 13,
	SA_PR_SL = 1u << 15,
};
enum {
	SA_MCM_MGID = 1u << 0,
	SA_MCM_PORT_GID = 1u << 1,
	SA_MCM_QKEY = 1u << 2,
	SA_MCM_MLID = 1u << 3,
	SA_MCM_MTU_SEL = 1u << 4,
	SA_MCM_MTU = 1u << 5,
	SA_MCM_TCLASS = 1u << 6,
	SA_MCM_PKEY = 1u << 7,
	SA_MCM_RATE_SEL = 1u << 8,
	SA_MCM_RATE = 1u << 9,
	SA_MCM_LIFE_SEL = 1u << 10,
	SA_MCM_LIFE = 1u << 11,
	SA_MCM_SL = 1u << 12,
	SA_MCM_FLOW = 1u << 13,
	SA_MCM_HOP = 1u << 14,
	SA_MCM_SCOPE = 1u << 15,
	SA_MCM_JOIN_STATE = 1u << 16,
};

/* RMPP flags (low 3 bits of octet 26). */
enum {
	SA_RMPP_ACTIVE = 1,
	SA_RMPP_FIRST = 2,
	SA_RMPP_LAST = 4
};

struct sa_hdr {
	struct ib_mad_hdr mad;
	uint8_t rmpp_version, rmpp_type, rmpp_flags, rmpp_status;
	uint32_t rmpp_data1, rmpp_data2;
	uint64_t sm_key;
	uint16_t attr_offset; /* 8-octet words */
	uint64_t comp_mask;
};

struct sa_path_rec {
	uint64_t service_id;
	union ib_gid dgid, sgid;
	uint16_t dlid, slid;
	bool raw_traffic, reversible;
	uint32_t flow_label; /* 20 bits */
	uint8_t hop_limit, tclass, numb_path;
	uint16_t pkey, qos_class;
	uint8_t sl, mtu_sel, mtu, rate_sel, rate, life_sel, life, preference;
};

struct sa_mcm_rec {
	union ib_gid mgid, port_gid;
	uint32_t qkey;
	uint16_t mlid, pkey;
	uint8_t mtu_sel, mtu, tclass, rate_sel, rate, life_sel, life, sl;
	uint32_t flow_label;
	uint8_t hop_limit, scope, join_state;
	bool proxy_join;
};

struct sa_inform_info {
	union ib_gid gid;
	uint16_t lid_begin, lid_end;
	bool is_generic, subscribe;
	uint16_t type, trap_num;
	uint32_t qpn; /* 24 bits */
	uint8_t resp_time;
	uint32_t producer_type; /* 24 bits */
};

struct sa_notice {
	bool is_generic;
	uint8_t type;
	uint32_t producer_type; /* or vendor ID */
	uint16_t trap_num, issuer_lid;
	bool toggle;
	uint16_t count;
	uint8_t details[54];
	union ib_gid issuer_gid;
};

struct sa_class_port_info {
	uint8_t base_version, class_version;
	uint16_t cap_mask;
	uint32_t cap_mask2;
	uint8_t resp_time;
};

/* Header: decode refuses a short buffer (-EMSGSIZE), a base version other than 1 or a
 * class version other than 2 (-EPROTO), a class other than SA (-EPROTOTYPE). */
int sa_hdr_decode(const uint8_t *buf, size_t len, struct sa_hdr *out);
int sa_hdr_encode(const struct sa_hdr *h, uint8_t *buf, size_t len);

/* Record codecs: decode needs len >= the record length (-EMSGSIZE); encode writes the
 * record length into buf (len at least that, -ENOSPC) and returns it. Decoders keep
 * reserved bits out; encoders write them zero. */
int sa_path_rec_decode(const uint8_t *p, size_t len, struct sa_path_rec *out);
int sa_path_rec_encode(const struct sa_path_rec *r, uint8_t *p, size_t len);
int sa_mcm_rec_decode(const uint8_t *p, size_t len, struct sa_mcm_rec *out);
int sa_mcm_rec_encode(const struct sa_mcm_rec *r, uint8_t *p, size_t len);
int sa_inform_info_decode(const uint8_t *p, size_t len, struct sa_inform_info *out);
int sa_inform_info_encode(const struct sa_inform_info *r, uint8_t *p, size_t len);
int sa_notice_decode(const uint8_t *p, size_t len, struct sa_notice *out);
int sa_notice_encode(const struct sa_notice *r, uint8_t *p, size_t len);
int sa_class_port_info_decode(const uint8_t *p, size_t len, struct sa_class_port_info *out);
/* The GID a trap 64..67 notice carries (DataDetails octets 6..21). */
void sa_notice_gid(const struct sa_notice *n, union ib_gid *gid);

/*
 * Where the records of a response are. For a GetTable response the stride is
 * AttributeOffset * 8 (which must be at least rec_len: -EBADMSG otherwise) and the
 * count is what the buffer holds, capped by the RMPP PayloadLength when the first
 * segment carries one; *truncated is set when PayloadLength promises more than the
 * buffer holds (umad2sim cuts RMPP answers to one MAD). For any other response there is
 * exactly one record at SA_HDR_LEN (-EMSGSIZE if the buffer is shorter).
 */
int sa_records(const struct sa_hdr *h, size_t len, size_t rec_len, size_t *stride, unsigned *count,
	       bool *truncated);

/* SA status (MAD status field) by name: "success", "busy", "ERR_NO_RECORDS", ...
 * Never NULL. */
const char *sa_status_name(uint16_t status);

#endif
