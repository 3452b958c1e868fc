/*
 * The MAD common header (IBA vol 1 section 13.4.3): the first 24 octets of every
 * management datagram (SMP, SA, CM, PerfMgt ...), carried in a 256-octet UD payload.
 *
 *   0: BaseVersion  1: MgmtClass  2: ClassVersion  3: R(1) Method(7)
 *   4-5: Status  6-7: ClassSpecific  8-15: TransactionID  16-17: AttributeID
 *   18-19: reserved  20-23: AttributeModifier
 *
 * The decoder refuses a BaseVersion other than 1 (the only layout the IBA defines; OPA's
 * version 2 MADs are another format) with -EINVAL, and a short buffer with -EMSGSIZE.
 * Everything else is kept as is, reserved field included, so decode-encode round trips.
 */
#ifndef IBGW_LIB_IB_MAD_H
#define IBGW_LIB_IB_MAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IB_MAD_HDR_LEN      24
#define IB_MAD_LEN          256
#define IB_MAD_BASE_VERSION 1

/* Management classes the gateway meets. */
enum ib_mgmt_class {
	IB_MGMT_CLASS_SMI_LID = 0x01,
	IB_MGMT_CLASS_SA = 0x03,
	IB_MGMT_CLASS_PERF = 0x04,
	IB_MGMT_CLASS_CM = 0x07,
	IB_MGMT_CLASS_SMI_DR = 0x81,
};

/* Methods (without the R bit; a response has R set: GetResp is 0x81). */
enum ib_mad_method {
	IB_MAD_METHOD_GET = 0x01,
	IB_MAD_METHOD_SET = 0x02,
	IB_MAD_METHOD_SEND = 0x03,
	IB_MAD_METHOD_TRAP = 0x05,
	IB_MAD_METHOD_REPORT = 0x06,
	IB_MAD_METHOD_TRAP_REPRESS = 0x07,
	IB_MAD_METHOD_GET_TABLE = 0x12,
	IB_MAD_METHOD_DELETE = 0x15,
};
#define IB_MAD_METHOD_RESP 0x80 /* the R bit */

struct ib_mad_hdr {
	uint8_t base_version, mgmt_class, class_version;
	bool response;  /* R bit */
	uint8_t method; /* 7 bits */
	uint16_t status, class_specific;
	uint64_t tid;
	uint16_t attr_id, resv;
	uint32_t attr_mod;
};

int ib_mad_hdr_decode(const uint8_t *buf, size_t len, struct ib_mad_hdr *out);
/* Returns IB_MAD_HDR_LEN, -ENOSPC, or -ERANGE (method wider than 7 bits). */
int ib_mad_hdr_encode(const struct ib_mad_hdr *h, uint8_t *buf, size_t len);

#endif
