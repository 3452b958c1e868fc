/*
 * The Communication Management MADs (management class 0x07, class version 2; IBA vol 1
 * chapter 12, tables 106-113) that IPoIB connected mode (RFC 4755) exchanges, and the
 * IPoIB-CM private data they carry. Host-order structs, every field of the layouts.
 *
 * A CM MAD is 256 octets: the 24-octet common header (lib/ib_mad.h) and 232 octets of
 * message. Offsets below count from the start of the message (add 24 for the MAD).
 * Sub-octet fields are written [mask] of the octet they live in; bits are numbered
 * from the most significant, as the IBA draws them.
 *
 *   REQ (0x0010):  0 LocalCommID  4 rsvd32  8 ServiceID(64)  16 LocalCAGUID(64)
 *     24 rsvd32  28 LocalQ_Key  32 LocalQPN(24) 35 ResponderResources
 *     36 LocalEECN(24) 39 InitiatorDepth  40 RemoteEECN(24)
 *     43 RemoteCMResponseTimeout[f8] TransportServiceType[06] E2EFlowControl[01]
 *     44 StartingPSN(24) 47 LocalCMResponseTimeout[f8] RetryCount[07]
 *     48 P_Key(16) 50 PathMTU[f0] RDCExists[08] RNRRetryCount[07]
 *     51 MaxCMRetries[f0] SRQ[08] ExtendedTransportType[07]
 *     52 primary path (44 octets), 96 alternate path (44 octets), 140 PrivateData(92)
 *   path (44):     0 LocalPortLID  2 RemotePortLID  4 LocalPortGID  20 RemotePortGID
 *     36 FlowLabel(20) rsvd(6) PacketRate(6)  40 TrafficClass  41 HopLimit
 *     42 SL[f0] SubnetLocal[08] rsvd[07]  43 LocalACKTimeout[f8] rsvd[07]
 *     (in the alternate path octet 43's [04] is SAPSupported, IBA 1.3)
 *   MRA (0x0011):  0 LocalCommID  4 RemoteCommID  8 MessageMRAed[c0] rsvd[3f]
 *     9 ServiceTimeout[f8] rsvd[07]  10 PrivateData(222)
 *   REJ (0x0012):  0 LocalCommID  4 RemoteCommID  8 MessageRejected[c0] rsvd[3f]
 *     9 RejectedInfoLength[fe] rsvd[01]  10 Reason(16)  12 ARI(72)  84 PrivateData(148)
 *   REP (0x0013):  0 LocalCommID  4 RemoteCommID  8 LocalQ_Key  12 LocalQPN(24) rsvd8
 *     16 LocalEECN(24) rsvd8  20 StartingPSN(24) rsvd8  24 ResponderResources
 *     25 InitiatorDepth  26 TargetACKDelay[f8] FailoverAccepted[06] E2EFlowControl[01]
 *     27 RNRRetryCount[e0] SRQ[10] rsvd[0f]  28 LocalCAGUID(64)  36 PrivateData(196)
 *   RTU (0x0014):  0 LocalCommID  4 RemoteCommID  8 PrivateData(224)
 *   DREQ (0x0015): 0 LocalCommID  4 RemoteCommID  8 RemoteQPN/EECN(24) rsvd8
 *     12 PrivateData(220)
 *   DREP (0x0016): 0 LocalCommID  4 RemoteCommID  8 PrivateData(224)
 *   ClassPortInfo (0x0001, Get/GetResp): 0 BaseVersion 1 ClassVersion 2 CapabilityMask
 *     4 CapabilityMask2(27) RespTimeValue(5); the redirect and trap fields (64 octets)
 *     are kept as raw octets.
 * Checked against two independent sources: the Linux kernel's CM field table
 * (include/rdma/ibta_vol1_c12.h) and the masks Wireshark's CM dissector registers
 * (`tshark -G fields`, infiniband.cm.*); see docs/connected-mode.md.
 *
 * IPoIB-CM private data (RFC 4755 section 6; what Linux's struct ipoib_cm_data sends):
 *   0 reserved(8) UD QPN(24)   4 receive MTU(32), octets the receiver accepts per
 *   message, the 4-octet IPoIB header included (Linux sends 65524 = 65520 + 4).
 * Messages without IPoIB data (Linux's REJ, RTU, DREQ, DREP) carry zeros there.
 *
 * Rules: encode writes zero to every reserved field and returns -ERANGE for a value
 * wider than its wire field. decode refuses, with one reason each (enum cm_mad_err,
 * counted by the caller), what cannot be a CM message we can act on: a length other
 * than 256, a header that is not CM class version 2, a method that is not the one the
 * attribute travels with, an unknown attribute, and enumerated fields holding a value
 * the IBA reserves. Other reserved fields are ignored on receive (IBA 12.6: "reserved
 * fields ... ignored by the receiver"), so decode(encode(x)) == x but not the reverse.
 */
#ifndef IBGW_CM_CM_MAD_H
#define IBGW_CM_CM_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"
#include "lib/ib_mad.h"

#define CM_CLASS_VERSION 2
#define CM_MSG_LEN       (IB_MAD_LEN - IB_MAD_HDR_LEN) /* 232 */

enum cm_attr_id {
	CM_ATTR_CLASS_PORT_INFO = 0x0001,
	CM_ATTR_REQ = 0x0010,
	CM_ATTR_MRA = 0x0011,
	CM_ATTR_REJ = 0x0012,
	CM_ATTR_REP = 0x0013,
	CM_ATTR_RTU = 0x0014,
	CM_ATTR_DREQ = 0x0015,
	CM_ATTR_DREP = 0x0016,
};

/* Private data lengths of each message (IBA table 106-113). */
#define CM_REQ_PDATA_LEN  92
#define CM_MRA_PDATA_LEN  222
#define CM_REJ_PDATA_LEN  148
#define CM_REJ_ARI_LEN    72
#define CM_REP_PDATA_LEN  196
#define CM_RTU_PDATA_LEN  224
#define CM_DREQ_PDATA_LEN 220
#define CM_DREP_PDATA_LEN 224

/* IPoIB-CM: service ID of the IETF block (IBA annex A3), the Linux driver's
 * IPOIB_CM_IETF_ID, OR'ed with the target's UD QPN; and the private data. */
#define CM_IPOIB_SERVICE_ID_BASE 0x1000000000000000ull
#define CM_IPOIB_PDATA_LEN       8
#define CM_IPOIB_MTU_MAX         65520u /* IP MTU of a connection */
#define CM_IPOIB_ENCAP_LEN       4

/* Transport service types (REQ octet 43 [06]); 3 is reserved. */
enum cm_tst {
	CM_TST_RC = 0,
	CM_TST_UC = 1,
	CM_TST_RD = 2
};

/* MessageMRAed / MessageRejected; 3 is reserved. */
enum cm_msg_ref {
	CM_MSG_REF_REQ = 0,
	CM_MSG_REF_REP = 1,
	CM_MSG_REF_OTHER = 2 /* REJ: LAP; MRA: LAP */
};

/* REJ reasons (IBA table 109), those the gateway sends or meets. */
enum cm_rej_reason {
	CM_REJ_NO_QP = 1,
	CM_REJ_NO_EEC = 2,
	CM_REJ_NO_RESOURCES = 3,
	CM_REJ_TIMEOUT = 4,
	CM_REJ_UNSUPPORTED_REQ = 5,
	CM_REJ_INVALID_COMM_ID = 6,
	CM_REJ_INVALID_COMM_INSTANCE = 7,
	CM_REJ_INVALID_SERVICE_ID = 8,
	CM_REJ_INVALID_TRANSPORT_TYPE = 9,
	CM_REJ_STALE_CONN = 10,
	CM_REJ_RDC_NOT_EXIST = 11,
	CM_REJ_INVALID_GID = 12,
	CM_REJ_INVALID_LID = 13,
	CM_REJ_INVALID_SL = 14,
	CM_REJ_INVALID_TRAFFIC_CLASS = 15,
	CM_REJ_INVALID_HOP_LIMIT = 16,
	CM_REJ_INVALID_PACKET_RATE = 17,
	CM_REJ_PORT_REDIRECT = 24,
	CM_REJ_INVALID_MTU = 26,
	CM_REJ_INSUFFICIENT_RESP_RES = 27,
	CM_REJ_CONSUMER = 28,
	CM_REJ_INVALID_RNR_RETRY = 29,
	CM_REJ_DUP_LOCAL_COMM_ID = 30,
	CM_REJ_INVALID_CLASS_VERSION = 31,
};

struct cm_path {
	uint16_t local_lid, remote_lid;
	union ib_gid local_gid, remote_gid;
	uint32_t flow_label; /* 20 bits */
	uint8_t packet_rate; /* 6 bits */
	uint8_t traffic_class;
	uint8_t hop_limit;
	uint8_t sl; /* 4 bits */
	bool subnet_local;
	uint8_t local_ack_timeout; /* 5 bits */
};

struct cm_req {
	uint32_t local_comm_id;
	uint64_t service_id;
	uint64_t local_ca_guid;
	uint32_t local_qkey;
	uint32_t local_qpn; /* 24 bits */
	uint8_t responder_resources;
	uint32_t local_eecn; /* 24 bits */
	uint8_t initiator_depth;
	uint32_t remote_eecn;               /* 24 bits */
	uint8_t remote_cm_response_timeout; /* 5 bits */
	uint8_t transport_service_type;     /* enum cm_tst */
	bool e2e_flow_control;
	uint32_t starting_psn;             /* 24 bits */
	uint8_t local_cm_response_timeout; /* 5 bits */
	uint8_t retry_count;               /* 3 bits */
	uint16_t pkey;
	uint8_t path_mtu; /* enum ib_mtu, 4 bits */
	bool rdc_exists;
	uint8_t rnr_retry_count; /* 3 bits */
	uint8_t max_cm_retries;  /* 4 bits */
	bool srq;
	uint8_t extended_transport_type; /* 3 bits */
	struct cm_path primary, alternate;
	bool sap_supported;
	uint8_t private_data[CM_REQ_PDATA_LEN];
};

struct cm_mra {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_mraed;   /* enum cm_msg_ref */
	uint8_t service_timeout; /* 5 bits */
	uint8_t private_data[CM_MRA_PDATA_LEN];
};

struct cm_rej {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t message_rejected;     /* enum cm_msg_ref */
	uint8_t rejected_info_length; /* 7 bits, at most CM_REJ_ARI_LEN */
	uint16_t reason;              /* enum cm_rej_reason */
	uint8_t ari[CM_REJ_ARI_LEN];
	uint8_t private_data[CM_REJ_PDATA_LEN];
};

struct cm_rep {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qkey;
	uint32_t local_qpn;    /* 24 bits */
	uint32_t local_eecn;   /* 24 bits */
	uint32_t starting_psn; /* 24 bits */
	uint8_t responder_resources, initiator_depth;
	uint8_t target_ack_delay;  /* 5 bits */
	uint8_t failover_accepted; /* 2 bits */
	bool e2e_flow_control;
	uint8_t rnr_retry_count; /* 3 bits */
	bool srq;
	uint64_t local_ca_guid;
	uint8_t private_data[CM_REP_PDATA_LEN];
};

struct cm_rtu {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t private_data[CM_RTU_PDATA_LEN];
};

struct cm_dreq {
	uint32_t local_comm_id, remote_comm_id;
	uint32_t remote_qpn; /* 24 bits: the receiver's QPN */
	uint8_t private_data[CM_DREQ_PDATA_LEN];
};

struct cm_drep {
	uint32_t local_comm_id, remote_comm_id;
	uint8_t private_data[CM_DREP_PDATA_LEN];
};

struct cm_class_port_info {
	uint8_t base_version, class_version;
	uint16_t capability_mask;
	uint32_t capability_mask2; /* 27 bits */
	uint8_t resp_time_value;   /* 5 bits */
	uint8_t redirect_trap[64]; /* octets 8-71, raw */
};

/* One CM MAD: the header fields that matter and the message. */
struct cm_msg {
	uint16_t attr_id; /* enum cm_attr_id; selects the union member */
	uint64_t tid;
	uint8_t method; /* Send for messages; Get or GetResp (with response) for CPI */
	bool response;
	uint16_t status;
	uint32_t attr_mod;
	union {
		struct cm_req req;
		struct cm_mra mra;
		struct cm_rej rej;
		struct cm_rep rep;
		struct cm_rtu rtu;
		struct cm_dreq dreq;
		struct cm_drep drep;
		struct cm_class_port_info cpi;
	};
};

/* Why a CM MAD was refused. Stable numbering: the CM counts drops per reason. */
enum cm_mad_err {
	CM_MAD_OK = 0,
	CM_MAD_ERR_SHORT,         /* fewer than 256 octets */
	CM_MAD_ERR_LONG,          /* more than 256 octets */
	CM_MAD_ERR_BASE_VERSION,  /* BaseVersion is not 1 */
	CM_MAD_ERR_CLASS,         /* MgmtClass is not 0x07 */
	CM_MAD_ERR_CLASS_VERSION, /* ClassVersion is not 2 */
	CM_MAD_ERR_METHOD,        /* not Send (messages) or Get/GetResp (ClassPortInfo) */
	CM_MAD_ERR_ATTR,          /* attribute we do not handle (LAP, APR, SIDR, unknown) */
	CM_MAD_ERR_TST,           /* REQ transport service type 3 (reserved) */
	CM_MAD_ERR_MTU,           /* REQ path MTU code not 1-5 */
	CM_MAD_ERR_MSG_REF,       /* MRA MessageMRAed / REJ MessageRejected is 3 */
	CM_MAD_ERR_REJ_INFO_LEN,  /* REJ RejectedInfoLength over 72 */
	CM_MAD_ERR_COUNT
};

const char *cm_mad_err_str(enum cm_mad_err err);  /* "REQ path MTU code not 1-5" */
const char *cm_mad_err_name(enum cm_mad_err err); /* "mtu", a counter name */
const char *cm_attr_name(uint16_t attr_id);       /* "REQ", ... "?" */
const char *cm_rej_reason_name(uint16_t reason);  /* "consumer reject", ... */

/* Decode one CM MAD (exactly IB_MAD_LEN octets). */
enum cm_mad_err cm_mad_decode(const uint8_t *buf, size_t len, struct cm_msg *out);

/* Encode m into buf (at least IB_MAD_LEN octets; all 256 are written). Returns
 * IB_MAD_LEN, -ENOSPC, -EINVAL (unknown attribute), or -ERANGE (a field wider than its
 * wire field, an enumerated field holding a reserved value, or a REJ info length over
 * 72). */
int cm_mad_encode(const struct cm_msg *m, uint8_t *buf, size_t len);

/* IPoIB-CM private data. */
struct cm_ipoib_pdata {
	uint32_t ud_qpn; /* 24 bits */
	uint32_t rx_mtu; /* octets, IPoIB header included */
};

enum cm_pdata_err {
	CM_PDATA_OK = 0,
	CM_PDATA_ERR_RESERVED, /* octet 0 is not zero */
	CM_PDATA_ERR_QPN,      /* UD QPN 0 or 1 (QP0/QP1 are never an IPoIB UD QP) */
	CM_PDATA_ERR_MTU,      /* receive MTU not above the 4-octet IPoIB header */
	CM_PDATA_ERR_COUNT
};

const char *cm_pdata_err_name(enum cm_pdata_err err);
/* Decode from a message's private data area (at least CM_IPOIB_PDATA_LEN octets). */
enum cm_pdata_err cm_ipoib_pdata_decode(const uint8_t *pdata, struct cm_ipoib_pdata *out);
/* Returns CM_IPOIB_PDATA_LEN or -ERANGE (QPN over 24 bits). */
int cm_ipoib_pdata_encode(const struct cm_ipoib_pdata *p, uint8_t *pdata);

/* The IPoIB-CM service ID for a UD QPN, and the UD QPN a service ID targets (-EINVAL
 * if it is not in the IPoIB-CM range 0x1000000000000000 | 24-bit QPN). */
static inline uint64_t cm_ipoib_service_id(uint32_t ud_qpn)
{
	return CM_IPOIB_SERVICE_ID_BASE | (ud_qpn & 0xffffff);
}
int cm_ipoib_service_qpn(uint64_t service_id, uint32_t *ud_qpn);

/* The IP MTU of a connection: the smaller receive MTU less the IPoIB header, at most
 * 65520; 0 if either receive MTU leaves no room. */
uint32_t cm_ipoib_conn_mtu(uint32_t local_rx_mtu, uint32_t remote_rx_mtu);

/* A CM timeout code (5 bits) in milliseconds: 4.096 us * 2^code, rounded up, at least
 * 1 ms (codes 0-7 are below a millisecond). */
uint64_t cm_timeout_ms(uint8_t code);

#endif
