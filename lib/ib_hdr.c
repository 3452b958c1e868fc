/*
 * Encoders for the IB headers of ib_hdr.h (the decoders are inline there).
 *
 * Every field is range-checked against its wire width before anything is written, so
 * a caller's bug shows up as -ERANGE instead of a silently truncated field.
 */
#include "lib/ib_hdr.h"

#include <string.h>

int ib_lrh_encode(const struct ib_lrh *h, uint8_t *buf, size_t len)
{
	if (h->vl > 0xf || h->lver > 0xf || h->sl > 0xf || h->rsv2 > 0x3 || h->lnh > 0x3 ||
	    h->rsv5 > 0x1f || h->pkt_len > IB_PKTLEN_MAX)
		return -ERANGE;
	if (len < IB_LRH_LEN)
		return -ENOSPC;
	buf[0] = (uint8_t)(h->vl << 4 | h->lver);
	buf[1] = (uint8_t)(h->sl << 4 | h->rsv2 << 2 | h->lnh);
	ib_put_be16(buf + 2, h->dlid);
	ib_put_be16(buf + 4, (uint16_t)(h->rsv5 << 11 | h->pkt_len));
	ib_put_be16(buf + 6, h->slid);
	return IB_LRH_LEN;
}

int ib_grh_encode(const struct ib_grh *h, uint8_t *buf, size_t len)
{
	if (h->ipver > 0xf || h->flow_label > 0xfffff)
		return -ERANGE;
	if (len < IB_GRH_LEN)
		return -ENOSPC;
	ib_put_be32(buf, (uint32_t)h->ipver << 28 | (uint32_t)h->tclass << 20 | h->flow_label);
	ib_put_be16(buf + 4, h->pay_len);
	buf[6] = h->next_hdr;
	buf[7] = h->hop_limit;
	memcpy(buf + 8, h->sgid.raw, IB_GID_LEN);
	memcpy(buf + 24, h->dgid.raw, IB_GID_LEN);
	return IB_GRH_LEN;
}

int ib_bth_encode(const struct ib_bth *h, uint8_t *buf, size_t len)
{
	if (h->pad > 0x3 || h->tver > 0xf || h->rsv6 > 0x3f || h->dqpn > IB_QPN_MAX ||
	    h->rsv7 > 0x7f || h->psn > IB_PSN_MAX)
		return -ERANGE;
	if (len < IB_BTH_LEN)
		return -ENOSPC;
	buf[0] = h->opcode;
	buf[1] = (uint8_t)((h->se ? 0x80 : 0) | (h->mig ? 0x40 : 0) | h->pad << 4 | h->tver);
	ib_put_be16(buf + 2, h->pkey);
	buf[4] = (uint8_t)((h->fecn ? 0x80 : 0) | (h->becn ? 0x40 : 0) | h->rsv6);
	ib_put_be24(buf + 5, h->dqpn);
	buf[8] = (uint8_t)((h->ack_req ? 0x80 : 0) | h->rsv7);
	ib_put_be24(buf + 9, h->psn);
	return IB_BTH_LEN;
}

int ib_deth_encode(const struct ib_deth *h, uint8_t *buf, size_t len)
{
	if (h->src_qp > IB_QPN_MAX)
		return -ERANGE;
	if (len < IB_DETH_LEN)
		return -ENOSPC;
	ib_put_be32(buf, h->qkey);
	buf[4] = h->rsv8;
	ib_put_be24(buf + 5, h->src_qp);
	return IB_DETH_LEN;
}

int ib_aeth_encode(const struct ib_aeth *h, uint8_t *buf, size_t len)
{
	if (h->msn > 0xffffff)
		return -ERANGE;
	if (len < IB_AETH_LEN)
		return -ENOSPC;
	buf[0] = h->syndrome;
	ib_put_be24(buf + 1, h->msn);
	return IB_AETH_LEN;
}
