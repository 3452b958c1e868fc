/*
 * SA MAD codecs (see sa_mad.h for the layouts). Byte-wise big-endian access through
 * lib/ib_bytes.h; every decoder checks the length first and reads nothing beyond it.
 */
#include "sm-client/sa_mad.h"

#include <errno.h>
#include <string.h>

#include "lib/ib_bytes.h"

int sa_hdr_decode(const uint8_t *buf, size_t len, struct sa_hdr *out)
{
	int rc;

	if (len < SA_HDR_LEN)
		return -EMSGSIZE;
	rc = ib_mad_hdr_decode(buf, len, &out->mad);
	if (rc)
		return -EPROTO;
	if (out->mad.mgmt_class != IB_MGMT_CLASS_SA)
		return -EPROTOTYPE;
	if (out->mad.class_version != SA_CLASS_VERSION)
		return -EPROTO;
	out->rmpp_version = buf[24];
	out->rmpp_type = buf[25];
	out->rmpp_flags = buf[26];
	out->rmpp_status = buf[27];
	out->rmpp_data1 = ib_get_be32(buf + 28);
	out->rmpp_data2 = ib_get_be32(buf + 32);
	out->sm_key = ib_get_be64(buf + 36);
	out->attr_offset = ib_get_be16(buf + 44);
	out->comp_mask = ib_get_be64(buf + 48);
	return 0;
}

int sa_hdr_encode(const struct sa_hdr *h, uint8_t *buf, size_t len)
{
	int rc;

	if (len < SA_HDR_LEN)
		return -ENOSPC;
	rc = ib_mad_hdr_encode(&h->mad, buf, len);
	if (rc < 0)
		return rc;
	buf[24] = h->rmpp_version;
	buf[25] = h->rmpp_type;
	buf[26] = h->rmpp_flags;
	buf[27] = h->rmpp_status;
	ib_put_be32(buf + 28, h->rmpp_data1);
	ib_put_be32(buf + 32, h->rmpp_data2);
	ib_put_be64(buf + 36, h->sm_key);
	ib_put_be16(buf + 44, h->attr_offset);
	ib_put_be16(buf + 46, 0);
	ib_put_be64(buf + 48, h->comp_mask);
	return SA_HDR_LEN;
}

int sa_path_rec_decode(const uint8_t *p, size_t len, struct sa_path_rec *r)
{
	uint32_t w;

	if (len < SA_PATH_REC_LEN)
		return -EMSGSIZE;
	r->service_id = ib_get_be64(p);
	memcpy(r->dgid.raw, p + 8, IB_GID_LEN);
	memcpy(r->sgid.raw, p + 24, IB_GID_LEN);
	r->dlid = ib_get_be16(p + 40);
	r->slid = ib_get_be16(p + 42);
	w = ib_get_be32(p + 44);
	r->raw_traffic = w >> 31;
	r->flow_label = (w >> 8) & 0xfffff;
	r->hop_limit = (uint8_t)w;
	r->tclass = p[48];
	r->reversible = p[49] >> 7;
	r->numb_path = p[49] & 0x7f;
	r->pkey = ib_get_be16(p + 50);
	r->qos_class = ib_get_be16(p + 52) >> 4;
	r->sl = p[53] & 0x0f;
	r->mtu_sel = p[54] >> 6;
	r->mtu = p[54] & 0x3f;
	r->rate_sel = p[55] >> 6;
	r->rate = p[55] & 0x3f;
	r->life_sel = p[56] >> 6;
	r->life = p[56] & 0x3f;
	r->preference = p[57];
	return 0;
}

int sa_path_rec_encode(const struct sa_path_rec *r, uint8_t *p, size_t len)
{
	if (len < SA_PATH_REC_LEN)
		return -ENOSPC;
	memset(p, 0, SA_PATH_REC_LEN);
	ib_put_be64(p, r->service_id);
	memcpy(p + 8, r->dgid.raw, IB_GID_LEN);
	memcpy(p + 24, r->sgid.raw, IB_GID_LEN);
	ib_put_be16(p + 40, r->dlid);
	ib_put_be16(p + 42, r->slid);
	ib_put_be32(p + 44,
		    (uint32_t)r->raw_traffic << 31 | (r->flow_label & 0xfffff) << 8 | r->hop_limit);
	p[48] = r->tclass;
	p[49] = (uint8_t)(r->reversible << 7 | (r->numb_path & 0x7f));
	ib_put_be16(p + 50, r->pkey);
	ib_put_be16(p + 52, (uint16_t)((r->qos_class & 0xfff) << 4 | (r->sl & 0x0f)));
	p[54] = (uint8_t)(r->mtu_sel << 6 | (r->mtu & 0x3f));
	p[55] = (uint8_t)(r->rate_sel << 6 | (r->rate & 0x3f));
	p[56] = (uint8_t)(r->life_sel << 6 | (r->life & 0x3f));
	p[57] = r->preference;
	return SA_PATH_REC_LEN;
}

int sa_mcm_rec_decode(const uint8_t *p, size_t len, struct sa_mcm_rec *r)
{
	uint32_t w;

	if (len < SA_MCM_REC_LEN)
		return -EMSGSIZE;
	memcpy(r->mgid.raw, p, IB_GID_LEN);
	memcpy(r->port_gid.raw, p + 16, IB_GID_LEN);
	r->qkey = ib_get_be32(p + 32);
	r->mlid = ib_get_be16(p + 36);
	r->mtu_sel = p[38] >> 6;
	r->mtu = p[38] & 0x3f;
	r->tclass = p[39];
	r->pkey = ib_get_be16(p + 40);
	r->rate_sel = p[42] >> 6;
	r->rate = p[42] & 0x3f;
	r->life_sel = p[43] >> 6;
	r->life = p[43] & 0x3f;
	w = ib_get_be32(p + 44);
	r->sl = (uint8_t)(w >> 28);
	r->flow_label = (w >> 8) & 0xfffff;
	r->hop_limit = (uint8_t)w;
	r->scope = p[48] >> 4;
	r->join_state = p[48] & 0x0f;
	r->proxy_join = p[49] >> 7;
	return 0;
}

int sa_mcm_rec_encode(const struct sa_mcm_rec *r, uint8_t *p, size_t len)
{
	if (len < SA_MCM_REC_LEN)
		return -ENOSPC;
	memset(p, 0, SA_MCM_REC_LEN);
	memcpy(p, r->mgid.raw, IB_GID_LEN);
	memcpy(p + 16, r->port_gid.raw, IB_GID_LEN);
	ib_put_be32(p + 32, r->qkey);
	ib_put_be16(p + 36, r->mlid);
	p[38] = (uint8_t)(r->mtu_sel << 6 | (r->mtu & 0x3f));
	p[39] = r->tclass;
	ib_put_be16(p + 40, r->pkey);
	p[42] = (uint8_t)(r->rate_sel << 6 | (r->rate & 0x3f));
	p[43] = (uint8_t)(r->life_sel << 6 | (r->life & 0x3f));
	ib_put_be32(p + 44,
		    (uint32_t)(r->sl & 0x0f) << 28 | (r->flow_label & 0xfffff) << 8 | r->hop_limit);
	p[48] = (uint8_t)((r->scope & 0x0f) << 4 | (r->join_state & 0x0f));
	p[49] = (uint8_t)(r->proxy_join << 7);
	return SA_MCM_REC_LEN;
}

int sa_inform_info_decode(const uint8_t *p, size_t len, struct sa_inform_info *r)
{
	if (len < SA_INFORM_INFO_LEN)
		return -EMSGSIZE;
	memcpy(r->gid.raw, p, IB_GID_LEN);
	r->lid_begin = ib_get_be16(p + 16);
	r->lid_end = ib_get_be16(p + 18);
	r->is_generic = p[22] != 0;
	r->subscribe = p[23] != 0;
	r->type = ib_get_be16(p + 24);
	r->trap_num = ib_get_be16(p + 26);
	r->qpn = ib_get_be24(p + 28);
	r->resp_time = p[31] & 0x1f;
	r->producer_type = ib_get_be24(p + 33);
	return 0;
}

int sa_inform_info_encode(const struct sa_inform_info *r, uint8_t *p, size_t len)
{
	if (len < SA_INFORM_INFO_LEN)
		return -ENOSPC;
	memset(p, 0, SA_INFORM_INFO_LEN);
	memcpy(p, r->gid.raw, IB_GID_LEN);
	ib_put_be16(p + 16, r->lid_begin);
	ib_put_be16(p + 18, r->lid_end);
	p[22] = r->is_generic;
	p[23] = r->subscribe;
	ib_put_be16(p + 24, r->type);
	ib_put_be16(p + 26, r->trap_num);
	ib_put_be24(p + 28, r->qpn & 0xffffff);
	p[31] = r->resp_time & 0x1f;
	ib_put_be24(p + 33, r->producer_type & 0xffffff);
	return SA_INFORM_INFO_LEN;
}

int sa_notice_decode(const uint8_t *p, size_t len, struct sa_notice *r)
{
	uint16_t w;

	if (len < SA_NOTICE_LEN)
		return -EMSGSIZE;
	r->is_generic = p[0] >> 7;
	r->type = p[0] & 0x7f;
	r->producer_type = ib_get_be24(p + 1);
	r->trap_num = ib_get_be16(p + 4);
	r->issuer_lid = ib_get_be16(p + 6);
	w = ib_get_be16(p + 8);
	r->toggle = w >> 15;
	r->count = w & 0x7fff;
	memcpy(r->details, p + 10, sizeof(r->details));
	memcpy(r->issuer_gid.raw, p + 64, IB_GID_LEN);
	return 0;
}

int sa_notice_encode(const struct sa_notice *r, uint8_t *p, size_t len)
{
	if (len < SA_NOTICE_LEN)
		return -ENOSPC;
	p[0] = (uint8_t)(r->is_generic << 7 | (r->type & 0x7f));
	ib_put_be24(p + 1, r->producer_type & 0xffffff);
	ib_put_be16(p + 4, r->trap_num);
	ib_put_be16(p + 6, r->issuer_lid);
	ib_put_be16(p + 8, (uint16_t)(r->toggle << 15 | (r->count & 0x7fff)));
	memcpy(p + 10, r->details, sizeof(r->details));
	memcpy(p + 64, r->issuer_gid.raw, IB_GID_LEN);
	return SA_NOTICE_LEN;
}

void sa_notice_gid(const struct sa_notice *n, union ib_gid *gid)
{
	memcpy(gid->raw, n->details + 6, IB_GID_LEN);
}

int sa_class_port_info_decode(const uint8_t *p, size_t len, struct sa_class_port_info *r)
{
	uint32_t w;

	if (len < SA_CLASS_PORT_INFO_LEN)
		return -EMSGSIZE;
	r->base_version = p[0];
	r->class_version = p[1];
	r->cap_mask = ib_get_be16(p + 2);
	w = ib_get_be32(p + 4);
	r->cap_mask2 = w >> 5;
	r->resp_time = w & 0x1f;
	return 0;
}

int sa_records(const struct sa_hdr *h, size_t len, size_t rec_len, size_t *stride, unsigned *count,
	       bool *truncated)
{
	size_t avail, n;

	*truncated = false;
	*count = 0;
	*stride = rec_len;
	if (len < SA_HDR_LEN)
		return -EMSGSIZE;
	avail = len - SA_HDR_LEN;
	if (h->mad.method != (IB_MAD_METHOD_GET_TABLE & 0x7f)) {
		if (avail < rec_len)
			return -EMSGSIZE;
		*count = 1;
		return 0;
	}
	if (h->attr_offset == 0) /* no records */
		return 0;
	*stride = (size_t)h->attr_offset * 8;
	if (*stride < rec_len)
		return -EBADMSG;
	n = avail >= rec_len ? (avail - rec_len) / *stride + 1 : 0;
	if ((h->rmpp_flags & (SA_RMPP_ACTIVE | SA_RMPP_FIRST)) ==
		(SA_RMPP_ACTIVE | SA_RMPP_FIRST) &&
	    h->rmpp_data2 >= 20) {
		/* PayloadLength counts the 20 SA-header octets after the RMPP header. */
		size_t promised = h->rmpp_data2 - 20;
		size_t pn = promised >= rec_len ? (promised - rec_len) / *stride + 1 : 0;

		if (pn > n)
			*truncated = true;
		else
			n = pn;
	}
	*count = n > 0xffff ? 0xffff : (unsigned)n;
	return 0;
}

const char *sa_status_name(uint16_t status)
{
	static const char *const sa_codes[] = {
		"success",
		"ERR_NO_RESOURCES",
		"ERR_REQ_INVALID",
		"ERR_NO_RECORDS",
		"ERR_TOO_MANY_RECORDS",
		"ERR_REQ_INVALID_GID",
		"ERR_REQ_INSUFFICIENT_COMPONENTS",
		"ERR_REQ_DENIED",
		"ERR_PRIORITY_SUGGESTED",
	};
	static const char *const mad_codes[] = {
		"success",
		"bad base or class version",
		"method not supported",
		"method/attribute not supported",
		"reserved code 4",
		"reserved code 5",
		"reserved code 6",
		"invalid attribute or modifier",
	};
	unsigned cls = status >> 8, code = (status >> 2) & 7;

	if (status == 0)
		return "success";
	if (cls)
		return cls < sizeof(sa_codes) / sizeof(sa_codes[0]) ? sa_codes[cls]
								    : "ERR_SA_UNKNOWN";
	if (code)
		return mad_codes[code];
	if (status & 1)
		return "busy";
	if (status & 2)
		return "redirect required";
	return "unknown status";
}
