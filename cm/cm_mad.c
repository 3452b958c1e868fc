/*
 * CM MAD encode/decode (layouts in cm_mad.h). Decoding reads every field of the
 * message into host order and judges only what the header says and the enumerated
 * fields whose reserved values would make the message meaningless; encoding writes
 * the whole 256 octets, reserved fields zero, and refuses values its fields cannot
 * hold.
 */
#include "cm/cm_mad.h"
#include "lib/ib_bytes.h"

#include <errno.h>
#include <string.h>

/* Offsets in the MAD (header included) of the message's fields. */
#define M(off) (IB_MAD_HDR_LEN + (off))

static const char *const err_str[CM_MAD_ERR_COUNT] = {
	[CM_MAD_OK] = "ok",
	[CM_MAD_ERR_SHORT] = "shorter than a MAD (256 octets)",
	[CM_MAD_ERR_LONG] = "longer than a MAD (256 octets)",
	[CM_MAD_ERR_BASE_VERSION] = "BaseVersion is not 1",
	[CM_MAD_ERR_CLASS] = "MgmtClass is not CM (0x07)",
	[CM_MAD_ERR_CLASS_VERSION] = "CM ClassVersion is not 2",
	[CM_MAD_ERR_METHOD] = "method does not go with the attribute",
	[CM_MAD_ERR_ATTR] = "attribute not handled",
	[CM_MAD_ERR_TST] = "REQ transport service type is reserved (3)",
	[CM_MAD_ERR_MTU] = "REQ path MTU code not 1-5",
	[CM_MAD_ERR_MSG_REF] = "MessageMRAed/MessageRejected is reserved (3)",
	[CM_MAD_ERR_REJ_INFO_LEN] = "REJ RejectedInfoLength over 72",
};

static const char *const err_name[CM_MAD_ERR_COUNT] = {
	[CM_MAD_OK] = "ok",
	[CM_MAD_ERR_SHORT] = "short",
	[CM_MAD_ERR_LONG] = "long",
	[CM_MAD_ERR_BASE_VERSION] = "base_version",
	[CM_MAD_ERR_CLASS] = "class",
	[CM_MAD_ERR_CLASS_VERSION] = "class_version",
	[CM_MAD_ERR_METHOD] = "method",
	[CM_MAD_ERR_ATTR] = "attribute",
	[CM_MAD_ERR_TST] = "transport_type",
	[CM_MAD_ERR_MTU] = "mtu",
	[CM_MAD_ERR_MSG_REF] = "msg_ref",
	[CM_MAD_ERR_REJ_INFO_LEN] = "rej_info_len",
};

const char *cm_mad_err_str(enum cm_mad_err err)
{
	return (unsigned)err < CM_MAD_ERR_COUNT ? err_str[err] : "?";
}

const char *cm_mad_err_name(enum cm_mad_err err)
{
	return (unsigned)err < CM_MAD_ERR_COUNT ? err_name[err] : "?";
}

const char *cm_attr_name(uint16_t attr_id)
{
	switch (attr_id) {
	case CM_ATTR_CLASS_PORT_INFO:
		return "ClassPortInfo";
	case CM_ATTR_REQ:
		return "REQ";
	case CM_ATTR_MRA:
		return "MRA";
	case CM_ATTR_REJ:
		return "REJ";
	case CM_ATTR_REP:
		return "REP";
	case CM_ATTR_RTU:
		return "RTU";
	case CM_ATTR_DREQ:
		return "DREQ";
	case CM_ATTR_DREP:
		return "DREP";
	default:
		return "?";
	}
}

const char *cm_rej_reason_name(uint16_t reason)
{
	switch (reason) {
	case CM_REJ_NO_QP:
		return "no QP available";
	case CM_REJ_NO_EEC:
		return "no EEC available";
	case CM_REJ_NO_RESOURCES:
		return "no resources available";
	case CM_REJ_TIMEOUT:
		return "timeout";
	case CM_REJ_UNSUPPORTED_REQ:
		return "unsupported request";
	case CM_REJ_INVALID_COMM_ID:
		return "invalid communication ID";
	case CM_REJ_INVALID_COMM_INSTANCE:
		return "invalid communication instance";
	case CM_REJ_INVALID_SERVICE_ID:
		return "invalid service ID";
	case CM_REJ_INVALID_TRANSPORT_TYPE:
		return "invalid transport service type";
	case CM_REJ_STALE_CONN:
		return "stale connection";
	case CM_REJ_RDC_NOT_EXIST:
		return "RDC does not exist";
	case CM_REJ_INVALID_GID:
		return "invalid GID";
	case CM_REJ_INVALID_LID:
		return "invalid LID";
	case CM_REJ_INVALID_SL:
		return "invalid SL";
	case CM_REJ_INVALID_TRAFFIC_CLASS:
		return "invalid traffic class";
	case CM_REJ_INVALID_HOP_LIMIT:
		return "invalid hop limit";
	case CM_REJ_INVALID_PACKET_RATE:
		return "invalid packet rate";
	case CM_REJ_PORT_REDIRECT:
		return "port redirect";
	case CM_REJ_INVALID_MTU:
		return "invalid path MTU";
	case CM_REJ_INSUFFICIENT_RESP_RES:
		return "insufficient responder resources";
	case CM_REJ_CONSUMER:
		return "consumer reject";
	case CM_REJ_INVALID_RNR_RETRY:
		return "invalid RNR NAK retry count";
	case CM_REJ_DUP_LOCAL_COMM_ID:
		return "duplicate local communication ID";
	case CM_REJ_INVALID_CLASS_VERSION:
		return "invalid class version";
	default:
		return "other";
	}
}

/* ---- decode ---- */

static void path_decode(const uint8_t *p, struct cm_path *out)
{
	uint32_t w = ib_get_be32(p + 36);

	out->local_lid = ib_get_be16(p);
	out->remote_lid = ib_get_be16(p + 2);
	memcpy(out->local_gid.raw, p + 4, IB_GID_LEN);
	memcpy(out->remote_gid.raw, p + 20, IB_GID_LEN);
	out->flow_label = w >> 12;
	out->packet_rate = (uint8_t)(w & 0x3f);
	out->traffic_class = p[40];
	out->hop_limit = p[41];
	out->sl = p[42] >> 4;
	out->subnet_local = (p[42] & 0x08) != 0;
	out->local_ack_timeout = p[43] >> 3;
}

static enum cm_mad_err req_decode(const uint8_t *m, struct cm_req *r)
{
	r->local_comm_id = ib_get_be32(m);
	r->service_id = ib_get_be64(m + 8);
	r->local_ca_guid = ib_get_be64(m + 16);
	r->local_qkey = ib_get_be32(m + 28);
	r->local_qpn = ib_get_be24(m + 32);
	r->responder_resources = m[35];
	r->local_eecn = ib_get_be24(m + 36);
	r->initiator_depth = m[39];
	r->remote_eecn = ib_get_be24(m + 40);
	r->remote_cm_response_timeout = m[43] >> 3;
	r->transport_service_type = (m[43] >> 1) & 3;
	r->e2e_flow_control = m[43] & 1;
	r->starting_psn = ib_get_be24(m + 44);
	r->local_cm_response_timeout = m[47] >> 3;
	r->retry_count = m[47] & 7;
	r->pkey = ib_get_be16(m + 48);
	r->path_mtu = m[50] >> 4;
	r->rdc_exists = (m[50] & 0x08) != 0;
	r->rnr_retry_count = m[50] & 7;
	r->max_cm_retries = m[51] >> 4;
	r->srq = (m[51] & 0x08) != 0;
	r->extended_transport_type = m[51] & 7;
	path_decode(m + 52, &r->primary);
	path_decode(m + 96, &r->alternate);
	r->sap_supported = (m[139] & 0x04) != 0;
	memcpy(r->private_data, m + 140, CM_REQ_PDATA_LEN);
	if (r->transport_service_type == 3)
		return CM_MAD_ERR_TST;
	if (r->path_mtu < 1 || r->path_mtu > 5)
		return CM_MAD_ERR_MTU;
	return CM_MAD_OK;
}

static enum cm_mad_err msg_decode(uint16_t attr, const uint8_t *m, struct cm_msg *out)
{
	switch (attr) {
	case CM_ATTR_REQ:
		return req_decode(m, &out->req);
	case CM_ATTR_MRA:
		out->mra.local_comm_id = ib_get_be32(m);
		out->mra.remote_comm_id = ib_get_be32(m + 4);
		out->mra.message_mraed = m[8] >> 6;
		out->mra.service_timeout = m[9] >> 3;
		memcpy(out->mra.private_data, m + 10, CM_MRA_PDATA_LEN);
		return out->mra.message_mraed == 3 ? CM_MAD_ERR_MSG_REF : CM_MAD_OK;
	case CM_ATTR_REJ:
		out->rej.local_comm_id = ib_get_be32(m);
		out->rej.remote_comm_id = ib_get_be32(m + 4);
		out->rej.message_rejected = m[8] >> 6;
		out->rej.rejected_info_length = m[9] >> 1;
		out->rej.reason = ib_get_be16(m + 10);
		memcpy(out->rej.ari, m + 12, CM_REJ_ARI_LEN);
		memcpy(out->rej.private_data, m + 84, CM_REJ_PDATA_LEN);
		if (out->rej.message_rejected == 3)
			return CM_MAD_ERR_MSG_REF;
		return out->rej.rejected_info_length > CM_REJ_ARI_LEN ? CM_MAD_ERR_REJ_INFO_LEN
								      : CM_MAD_OK;
	case CM_ATTR_REP:
		out->rep.local_comm_id = ib_get_be32(m);
		out->rep.remote_comm_id = ib_get_be32(m + 4);
		out->rep.local_qkey = ib_get_be32(m + 8);
		out->rep.local_qpn = ib_get_be24(m + 12);
		out->rep.local_eecn = ib_get_be24(m + 16);
		out->rep.starting_psn = ib_get_be24(m + 20);
		out->rep.responder_resources = m[24];
		out->rep.initiator_depth = m[25];
		out->rep.target_ack_delay = m[26] >> 3;
		out->rep.failover_accepted = (m[26] >> 1) & 3;
		out->rep.e2e_flow_control = m[26] & 1;
		out->rep.rnr_retry_count = m[27] >> 5;
		out->rep.srq = (m[27] & 0x10) != 0;
		out->rep.local_ca_guid = ib_get_be64(m + 28);
		memcpy(out->rep.private_data, m + 36, CM_REP_PDATA_LEN);
		return CM_MAD_OK;
	case CM_ATTR_RTU:
		out->rtu.local_comm_id = ib_get_be32(m);
		out->rtu.remote_comm_id = ib_get_be32(m + 4);
		memcpy(out->rtu.private_data, m + 8, CM_RTU_PDATA_LEN);
		return CM_MAD_OK;
	case CM_ATTR_DREQ:
		out->dreq.local_comm_id = ib_get_be32(m);
		out->dreq.remote_comm_id = ib_get_be32(m + 4);
		out->dreq.remote_qpn = ib_get_be24(m + 8);
		memcpy(out->dreq.private_data, m + 12, CM_DREQ_PDATA_LEN);
		return CM_MAD_OK;
	case CM_ATTR_DREP:
		out->drep.local_comm_id = ib_get_be32(m);
		out->drep.remote_comm_id = ib_get_be32(m + 4);
		memcpy(out->drep.private_data, m + 8, CM_DREP_PDATA_LEN);
		return CM_MAD_OK;
	case CM_ATTR_CLASS_PORT_INFO:
		out->cpi.base_version = m[0];
		out->cpi.class_version = m[1];
		out->cpi.capability_mask = ib_get_be16(m + 2);
		out->cpi.capability_mask2 = ib_get_be32(m + 4) >> 5;
		out->cpi.resp_time_value = m[7] & 0x1f;
		memcpy(out->cpi.redirect_trap, m + 8, sizeof(out->cpi.redirect_trap));
		return CM_MAD_OK;
	default:
		return CM_MAD_ERR_ATTR;
	}
}

enum cm_mad_err cm_mad_decode(const uint8_t *buf, size_t len, struct cm_msg *out)
{
	struct ib_mad_hdr h;

	if (len < IB_MAD_LEN)
		return CM_MAD_ERR_SHORT;
	if (len > IB_MAD_LEN)
		return CM_MAD_ERR_LONG;
	if (ib_mad_hdr_decode(buf, len, &h) != 0)
		return CM_MAD_ERR_BASE_VERSION;
	if (h.mgmt_class != IB_MGMT_CLASS_CM)
		return CM_MAD_ERR_CLASS;
	if (h.class_version != CM_CLASS_VERSION)
		return CM_MAD_ERR_CLASS_VERSION;
	memset(out, 0, sizeof(*out));
	out->attr_id = h.attr_id;
	out->tid = h.tid;
	out->method = h.method;
	out->response = h.response;
	out->status = h.status;
	out->attr_mod = h.attr_mod;
	switch (h.attr_id) {
	case CM_ATTR_CLASS_PORT_INFO:
		if (h.method != IB_MAD_METHOD_GET)
			return CM_MAD_ERR_METHOD;
		break;
	case CM_ATTR_REQ:
	case CM_ATTR_MRA:
	case CM_ATTR_REJ:
	case CM_ATTR_REP:
	case CM_ATTR_RTU:
	case CM_ATTR_DREQ:
	case CM_ATTR_DREP:
		if (h.method != IB_MAD_METHOD_SEND || h.response)
			return CM_MAD_ERR_METHOD;
		break;
	default:
		return CM_MAD_ERR_ATTR;
	}
	return msg_decode(h.attr_id, buf + IB_MAD_HDR_LEN, out);
}

/* ---- encode ---- */

static bool fits(uint64_t v, unsigned bits)
{
	return bits >= 64 || v >> bits == 0;
}

static int path_encode(const struct cm_path *p, uint8_t *o, bool alternate, bool sap)
{
	if (!fits(p->flow_label, 20) || !fits(p->packet_rate, 6) || !fits(p->sl, 4) ||
	    !fits(p->local_ack_timeout, 5))
		return -ERANGE;
	ib_put_be16(o, p->local_lid);
	ib_put_be16(o + 2, p->remote_lid);
	memcpy(o + 4, p->local_gid.raw, IB_GID_LEN);
	memcpy(o + 20, p->remote_gid.raw, IB_GID_LEN);
	ib_put_be32(o + 36, p->flow_label << 12 | p->packet_rate);
	o[40] = p->traffic_class;
	o[41] = p->hop_limit;
	o[42] = (uint8_t)(p->sl << 4 | (p->subnet_local ? 0x08 : 0));
	o[43] = (uint8_t)(p->local_ack_timeout << 3 | (alternate && sap ? 0x04 : 0));
	return 0;
}

static int req_encode(const struct cm_req *r, uint8_t *m)
{
	if (!fits(r->local_qpn, 24) || !fits(r->local_eecn, 24) || !fits(r->remote_eecn, 24) ||
	    !fits(r->remote_cm_response_timeout, 5) || r->transport_service_type > 2 ||
	    !fits(r->starting_psn, 24) || !fits(r->local_cm_response_timeout, 5) ||
	    !fits(r->retry_count, 3) || r->path_mtu < 1 || r->path_mtu > 5 ||
	    !fits(r->rnr_retry_count, 3) || !fits(r->max_cm_retries, 4) ||
	    !fits(r->extended_transport_type, 3))
		return -ERANGE;
	ib_put_be32(m, r->local_comm_id);
	ib_put_be64(m + 8, r->service_id);
	ib_put_be64(m + 16, r->local_ca_guid);
	ib_put_be32(m + 28, r->local_qkey);
	ib_put_be24(m + 32, r->local_qpn);
	m[35] = r->responder_resources;
	ib_put_be24(m + 36, r->local_eecn);
	m[39] = r->initiator_depth;
	ib_put_be24(m + 40, r->remote_eecn);
	m[43] = (uint8_t)(r->remote_cm_response_timeout << 3 | r->transport_service_type << 1 |
			  (r->e2e_flow_control ? 1 : 0));
	ib_put_be24(m + 44, r->starting_psn);
	m[47] = (uint8_t)(r->local_cm_response_timeout << 3 | r->retry_count);
	ib_put_be16(m + 48, r->pkey);
	m[50] = (uint8_t)(r->path_mtu << 4 | (r->rdc_exists ? 0x08 : 0) | r->rnr_retry_count);
	m[51] =
	    (uint8_t)(r->max_cm_retries << 4 | (r->srq ? 0x08 : 0) | r->extended_transport_type);
	if (path_encode(&r->primary, m + 52, false, false) < 0 ||
	    path_encode(&r->alternate, m + 96, true, r->sap_supported) < 0)
		return -ERANGE;
	memcpy(m + 140, r->private_data, CM_REQ_PDATA_LEN);
	return 0;
}

static int rep_encode(const struct cm_rep *r, uint8_t *m)
{
	if (!fits(r->local_qpn, 24) || !fits(r->local_eecn, 24) || !fits(r->starting_psn, 24) ||
	    !fits(r->target_ack_delay, 5) || !fits(r->failover_accepted, 2) ||
	    !fits(r->rnr_retry_count, 3))
		return -ERANGE;
	ib_put_be32(m, r->local_comm_id);
	ib_put_be32(m + 4, r->remote_comm_id);
	ib_put_be32(m + 8, r->local_qkey);
	ib_put_be24(m + 12, r->local_qpn);
	ib_put_be24(m + 16, r->local_eecn);
	ib_put_be24(m + 20, r->starting_psn);
	m[24] = r->responder_resources;
	m[25] = r->initiator_depth;
	m[26] = (uint8_t)(r->target_ack_delay << 3 | r->failover_accepted << 1 |
			  (r->e2e_flow_control ? 1 : 0));
	m[27] = (uint8_t)(r->rnr_retry_count << 5 | (r->srq ? 0x10 : 0));
	ib_put_be64(m + 28, r->local_ca_guid);
	memcpy(m + 36, r->private_data, CM_REP_PDATA_LEN);
	return 0;
}

static int msg_encode(const struct cm_msg *msg, uint8_t *m)
{
	switch (msg->attr_id) {
	case CM_ATTR_REQ:
		return req_encode(&msg->req, m);
	case CM_ATTR_MRA:
		if (msg->mra.message_mraed > 2 || !fits(msg->mra.service_timeout, 5))
			return -ERANGE;
		ib_put_be32(m, msg->mra.local_comm_id);
		ib_put_be32(m + 4, msg->mra.remote_comm_id);
		m[8] = (uint8_t)(msg->mra.message_mraed << 6);
		m[9] = (uint8_t)(msg->mra.service_timeout << 3);
		memcpy(m + 10, msg->mra.private_data, CM_MRA_PDATA_LEN);
		return 0;
	case CM_ATTR_REJ:
		if (msg->rej.message_rejected > 2 || msg->rej.rejected_info_length > CM_REJ_ARI_LEN)
			return -ERANGE;
		ib_put_be32(m, msg->rej.local_comm_id);
		ib_put_be32(m + 4, msg->rej.remote_comm_id);
		m[8] = (uint8_t)(msg->rej.message_rejected << 6);
		m[9] = (uint8_t)(msg->rej.rejected_info_length << 1);
		ib_put_be16(m + 10, msg->rej.reason);
		memcpy(m + 12, msg->rej.ari, CM_REJ_ARI_LEN);
		memcpy(m + 84, msg->rej.private_data, CM_REJ_PDATA_LEN);
		return 0;
	case CM_ATTR_REP:
		return rep_encode(&msg->rep, m);
	case CM_ATTR_RTU:
		ib_put_be32(m, msg->rtu.local_comm_id);
		ib_put_be32(m + 4, msg->rtu.remote_comm_id);
		memcpy(m + 8, msg->rtu.private_data, CM_RTU_PDATA_LEN);
		return 0;
	case CM_ATTR_DREQ:
		if (!fits(msg->dreq.remote_qpn, 24))
			return -ERANGE;
		ib_put_be32(m, msg->dreq.local_comm_id);
		ib_put_be32(m + 4, msg->dreq.remote_comm_id);
		ib_put_be24(m + 8, msg->dreq.remote_qpn);
		memcpy(m + 12, msg->dreq.private_data, CM_DREQ_PDATA_LEN);
		return 0;
	case CM_ATTR_DREP:
		ib_put_be32(m, msg->drep.local_comm_id);
		ib_put_be32(m + 4, msg->drep.remote_comm_id);
		memcpy(m + 8, msg->drep.private_data, CM_DREP_PDATA_LEN);
		return 0;
	case CM_ATTR_CLASS_PORT_INFO:
		if (!fits(msg->cpi.capability_mask2, 27) || !fits(msg->cpi.resp_time_value, 5))
			return -ERANGE;
		m[0] = msg->cpi.base_version;
		m[1] = msg->cpi.class_version;
		ib_put_be16(m + 2, msg->cpi.capability_mask);
		ib_put_be32(m + 4, msg->cpi.capability_mask2 << 5 | msg->cpi.resp_time_value);
		memcpy(m + 8, msg->cpi.redirect_trap, sizeof(msg->cpi.redirect_trap));
		return 0;
	default:
		return -EINVAL;
	}
}

int cm_mad_encode(const struct cm_msg *m, uint8_t *buf, size_t len)
{
	struct ib_mad_hdr h = {
		.base_version = IB_MAD_BASE_VERSION,
		.mgmt_class = IB_MGMT_CLASS_CM,
		.class_version = CM_CLASS_VERSION,
		.response = m->response,
		.method = m->method,
		.status = m->status,
		.tid = m->tid,
		.attr_id = m->attr_id,
		.attr_mod = m->attr_mod,
	};
	int ret;

	if (len < IB_MAD_LEN)
		return -ENOSPC;
	memset(buf, 0, IB_MAD_LEN);
	ret = ib_mad_hdr_encode(&h, buf, len);
	if (ret < 0)
		return ret;
	ret = msg_encode(m, buf + IB_MAD_HDR_LEN);
	if (ret < 0) {
		memset(buf, 0, IB_MAD_LEN);
		return ret;
	}
	return IB_MAD_LEN;
}

/* ---- IPoIB-CM ---- */

const char *cm_pdata_err_name(enum cm_pdata_err err)
{
	static const char *const names[CM_PDATA_ERR_COUNT] = {
		[CM_PDATA_OK] = "ok",
		[CM_PDATA_ERR_RESERVED] = "pdata_reserved",
		[CM_PDATA_ERR_QPN] = "pdata_qpn",
		[CM_PDATA_ERR_MTU] = "pdata_mtu",
	};

	return (unsigned)err < CM_PDATA_ERR_COUNT ? names[err] : "?";
}

enum cm_pdata_err cm_ipoib_pdata_decode(const uint8_t *pdata, struct cm_ipoib_pdata *out)
{
	out->ud_qpn = ib_get_be24(pdata + 1);
	out->rx_mtu = ib_get_be32(pdata + 4);
	if (pdata[0] != 0)
		return CM_PDATA_ERR_RESERVED;
	if (out->ud_qpn <= 1)
		return CM_PDATA_ERR_QPN;
	if (out->rx_mtu <= CM_IPOIB_ENCAP_LEN)
		return CM_PDATA_ERR_MTU;
	return CM_PDATA_OK;
}

int cm_ipoib_pdata_encode(const struct cm_ipoib_pdata *p, uint8_t *pdata)
{
	if (!fits(p->ud_qpn, 24))
		return -ERANGE;
	pdata[0] = 0;
	ib_put_be24(pdata + 1, p->ud_qpn);
	ib_put_be32(pdata + 4, p->rx_mtu);
	return CM_IPOIB_PDATA_LEN;
}

int cm_ipoib_service_qpn(uint64_t service_id, uint32_t *ud_qpn)
{
	if ((service_id & ~0xffffffull) != CM_IPOIB_SERVICE_ID_BASE)
		return -EINVAL;
	*ud_qpn = (uint32_t)(service_id & 0xffffff);
	return 0;
}

uint32_t cm_ipoib_conn_mtu(uint32_t local_rx_mtu, uint32_t remote_rx_mtu)
{
	uint32_t m = local_rx_mtu < remote_rx_mtu ? local_rx_mtu : remote_rx_mtu;

	if (m <= CM_IPOIB_ENCAP_LEN)
		return 0;
	m -= CM_IPOIB_ENCAP_LEN;
	return m > CM_IPOIB_MTU_MAX ? CM_IPOIB_MTU_MAX : m;
}

uint64_t cm_timeout_ms(uint8_t code)
{
	uint64_t ns = 4096ull << (code & 0x1f);
	uint64_t ms = (ns + 999999) / 1000000;

	return ms ? ms : 1;
}
