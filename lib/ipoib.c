/*
 * IPoIB link-layer address, encapsulation header, multicast GID mapping and interface
 * identifiers (see ipoib.h for layouts and sources).
 */
#include "lib/ipoib.h"
#include "lib/ib_bytes.h"
#include "lib/ib_hdr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define SIG_IPV4 0x401b
#define SIG_IPV6 0x601b

int ipoib_hwaddr_decode(const uint8_t *buf, size_t len, struct ipoib_hwaddr *out)
{
	if (len < IPOIB_HWADDR_LEN)
		return -EMSGSIZE;
	out->flags = buf[0];
	out->qpn = ib_get_be24(buf + 1);
	memcpy(out->gid.raw, buf + 4, IB_GID_LEN);
	return (buf[0] & IPOIB_HWADDR_F_RSVD) ? -EINVAL : 0;
}

bool ipoib_hwaddr_is_unicast(const uint8_t *raw)
{
	static const uint8_t zero[IB_GID_LEN];

	if (ib_get_be24(raw + 1) == 0xffffff || raw[4] == 0xff)
		return false;
	return memcmp(raw + 4, zero, IB_GID_LEN) != 0;
}

int ipoib_hwaddr_encode(const struct ipoib_hwaddr *a, uint8_t *buf, size_t len)
{
	if ((a->flags & IPOIB_HWADDR_F_RSVD) || a->qpn > IB_QPN_MAX)
		return -ERANGE;
	if (len < IPOIB_HWADDR_LEN)
		return -ENOSPC;
	buf[0] = a->flags;
	ib_put_be24(buf + 1, a->qpn);
	memcpy(buf + 4, a->gid.raw, IB_GID_LEN);
	return IPOIB_HWADDR_LEN;
}

int ipoib_hwaddr_format(const struct ipoib_hwaddr *a, char *buf, size_t len)
{
	uint8_t raw[IPOIB_HWADDR_LEN];
	int n = 0;

	if (len < IPOIB_HWADDR_STRLEN)
		return -ENOSPC;
	/* Formatting shows what is there, reserved flag bits included. */
	raw[0] = a->flags;
	ib_put_be24(raw + 1, a->qpn & IB_QPN_MAX);
	memcpy(raw + 4, a->gid.raw, IB_GID_LEN);
	for (int i = 0; i < IPOIB_HWADDR_LEN; i++)
		n += snprintf(buf + n, len - (size_t)n, i ? ":%02x" : "%02x", raw[i]);
	return n;
}

int ipoib_hwaddr_cmp_noflags(const struct ipoib_hwaddr *a, const struct ipoib_hwaddr *b)
{
	uint32_t qa = a->qpn & IB_QPN_MAX, qb = b->qpn & IB_QPN_MAX;

	if (qa != qb)
		return qa < qb ? -1 : 1;
	return memcmp(a->gid.raw, b->gid.raw, IB_GID_LEN);
}

int ipoib_encap_encode(const struct ipoib_encap *h, uint8_t *buf, size_t len)
{
	if (len < IPOIB_ENCAP_LEN)
		return -ENOSPC;
	ib_put_be16(buf, h->ethertype);
	ib_put_be16(buf + 2, h->reserved);
	return IPOIB_ENCAP_LEN;
}

/* ff1S:SSSS:PPPP, the part every IPoIB MGID shares; the rest zeroed. */
static int mgid_head(uint16_t sig, uint16_t pkey, uint8_t scope, union ib_gid *out)
{
	if (scope > 0xf)
		return -ERANGE;
	if (!ib_pkey_is_valid(pkey))
		return -EINVAL;
	memset(out->raw, 0, sizeof(out->raw));
	out->raw[0] = 0xff;
	out->raw[1] = (uint8_t)(0x10 | scope); /* flags 1: transient group */
	ib_put_be16(out->raw + 2, sig);
	ib_put_be16(out->raw + 4, pkey | IB_PKEY_FULL);
	return 0;
}

int ipoib_mgid_broadcast(uint16_t pkey, uint8_t scope, union ib_gid *out)
{
	int rc = mgid_head(SIG_IPV4, pkey, scope, out);

	if (rc == 0)
		ib_put_be32(out->raw + 12, 0xffffffffu);
	return rc;
}

int ipoib_mgid_from_ipv4(uint32_t group, uint16_t pkey, uint8_t scope, union ib_gid *out)
{
	int rc;

	if ((group & 0xf0000000u) != 0xe0000000u)
		return -EINVAL;
	rc = mgid_head(SIG_IPV4, pkey, scope, out);
	if (rc == 0)
		ib_put_be32(out->raw + 12, group & 0x0fffffffu);
	return rc;
}

int ipoib_mgid_from_ipv6(const uint8_t group[16], uint16_t pkey, uint8_t scope, union ib_gid *out)
{
	int rc;

	if (group[0] != 0xff)
		return -EINVAL;
	rc = mgid_head(SIG_IPV6, pkey, scope, out);
	if (rc == 0)
		memcpy(out->raw + 6, group + 6, 10);
	return rc;
}

int ipoib_mgid_decode(const union ib_gid *mgid, struct ipoib_mgid_info *out, const char **why)
{
	const uint8_t *r = mgid->raw;
	const char *err = NULL;
	uint16_t sig;

	memset(out, 0, sizeof(*out));
	if (r[0] != 0xff || (r[1] & 0xf0) != 0x10) {
		err = "not a transient MGID (ff1S:...)";
		goto out;
	}
	out->scope = r[1] & 0x0f;
	out->pkey = ib_get_be16(r + 4);
	if (!ib_pkey_is_valid(out->pkey)) {
		err = "P_Key base value is 0";
		goto out;
	}
	sig = ib_get_be16(r + 2);
	if (sig == SIG_IPV4) {
		uint32_t low = ib_get_be32(r + 12);

		out->family = AF_INET;
		if (r[6] | r[7] | r[8] | r[9] | r[10] | r[11]) {
			err = "IPv4 MGID with non-zero octets 6-11";
			goto out;
		}
		if (low == 0xffffffffu) {
			out->broadcast = true;
			out->ipv4_group = 0xffffffffu;
		} else if (low & 0xf0000000u) {
			err = "IPv4 MGID group bits beyond the low 28";
			goto out;
		} else {
			out->ipv4_group = 0xe0000000u | low;
		}
	} else if (sig == SIG_IPV6) {
		out->family = AF_INET6;
		memcpy(out->ipv6_low80, r + 6, 10);
	} else {
		err = "signature is neither 401b (IPv4) nor 601b (IPv6)";
	}
out:
	if (why)
		*why = err;
	return err ? -EINVAL : 0;
}

void ipoib_ipv6_iid(uint64_t port_guid, uint8_t out[8])
{
	ib_put_be64(out, port_guid);
	out[0] ^= 0x02;
}

void ipoib_ipv6_link_local(uint64_t port_guid, uint8_t out[16])
{
	memset(out, 0, 16);
	out[0] = 0xfe;
	out[1] = 0x80;
	ipoib_ipv6_iid(port_guid, out + 8);
}
