/*
 * MAD common header encode/decode (see ib_mad.h). Attribute layouts belong to their
 * classes' code (sm-client/, cm/); this file only knows the 24 octets all share.
 */
#include "lib/ib_mad.h"
#include "lib/ib_bytes.h"

#include <errno.h>

int ib_mad_hdr_decode(const uint8_t *buf, size_t len, struct ib_mad_hdr *out)
{
	if (len < IB_MAD_HDR_LEN)
		return -EMSGSIZE;
	out->base_version = buf[0];
	out->mgmt_class = buf[1];
	out->class_version = buf[2];
	out->response = (buf[3] & IB_MAD_METHOD_RESP) != 0;
	out->method = buf[3] & 0x7f;
	out->status = ib_get_be16(buf + 4);
	out->class_specific = ib_get_be16(buf + 6);
	out->tid = ib_get_be64(buf + 8);
	out->attr_id = ib_get_be16(buf + 16);
	out->resv = ib_get_be16(buf + 18);
	out->attr_mod = ib_get_be32(buf + 20);
	return out->base_version == IB_MAD_BASE_VERSION ? 0 : -EINVAL;
}

int ib_mad_hdr_encode(const struct ib_mad_hdr *h, uint8_t *buf, size_t len)
{
	if (h->method > 0x7f)
		return -ERANGE;
	if (len < IB_MAD_HDR_LEN)
		return -ENOSPC;
	buf[0] = h->base_version;
	buf[1] = h->mgmt_class;
	buf[2] = h->class_version;
	buf[3] = (uint8_t)((h->response ? IB_MAD_METHOD_RESP : 0) | h->method);
	ib_put_be16(buf + 4, h->status);
	ib_put_be16(buf + 6, h->class_specific);
	ib_put_be64(buf + 8, h->tid);
	ib_put_be16(buf + 16, h->attr_id);
	ib_put_be16(buf + 18, h->resv);
	ib_put_be32(buf + 20, h->attr_mod);
	return IB_MAD_HDR_LEN;
}
