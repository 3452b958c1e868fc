/*
 * UDP datagrams the engine takes and sends for itself (engine_pvt.h): the slow path's
 * bound port and the heartbeat channel's. Parsing is as strict as the slow path has
 * always been: a valid IP header, no fragment, no IPv6 extension header, the UDP length
 * inside the packet, the checksum right (and present in IPv6).
 *
 * Threads: any (pure functions).
 */
#include <string.h>

#include "engine/engine_pvt.h"
#include "pkt/ip.h"

#define UDP_HDR_LEN 8

static uint64_t pseudo_sum(int family, const uint8_t *ip, uint16_t ulen)
{
	return family == AF_INET ? ip4_pseudo_sum(ip + 12, ip + 16, ulen, 17)
				 : ip6_pseudo_sum(ip + 8, ip + 24, ulen, 17);
}

bool fwd_udp_parse(const uint8_t *p, size_t len, struct fwd_udp *out)
{
	const uint8_t *l4;
	size_t l4_len, alen;
	uint16_t ulen, csum;
	int family;

	if (len >= IP4_HDR_LEN && (p[0] >> 4) == 4) {
		struct ip4_info ii;

		if (ip4_validate(p, len, &ii) != IP_OK || ii.proto != 17 || ii.frag_off || ii.mf)
			return false;
		family = AF_INET;
		l4 = p + ii.hdr_len;
		l4_len = ii.tot_len - ii.hdr_len;
		out->ttl = ii.ttl;
	} else if (len >= IP6_HDR_LEN && (p[0] >> 4) == 6) {
		struct ip6_info ii;

		if (ip6_validate(p, len, &ii) != IP_OK || ii.proto != 17 || ii.n_ext)
			return false;
		family = AF_INET6;
		l4 = p + ii.l4_off;
		l4_len = ii.pkt_len - ii.l4_off;
		out->ttl = ii.hop_limit;
	} else {
		return false;
	}
	if (l4_len < UDP_HDR_LEN || (ulen = ip_be16(l4 + 4)) < UDP_HDR_LEN || ulen > l4_len)
		return false;
	csum = ip_be16(l4 + 6);
	if (family == AF_INET6 && csum == 0)
		return false; /* mandatory in IPv6 */
	if (csum && ip_csum_fold(ip_csum_add(pseudo_sum(family, p, ulen), l4, ulen)) != 0xffff)
		return false;
	alen = family == AF_INET ? 4 : 16;
	memset(&out->src, 0, sizeof(out->src));
	memset(&out->dst, 0, sizeof(out->dst));
	out->src.family = out->dst.family = (uint8_t)family;
	memcpy(out->src.bytes, p + (family == AF_INET ? 12 : 8), alen);
	memcpy(out->dst.bytes, p + (family == AF_INET ? 16 : 24), alen);
	out->sport = ip_be16(l4);
	out->dport = ip_be16(l4 + 2);
	out->payload = l4 + UDP_HDR_LEN;
	out->len = ulen - UDP_HDR_LEN;
	return true;
}

size_t fwd_udp_build(uint8_t *p, size_t cap, const struct ip_addr *src, const struct ip_addr *dst,
		     uint16_t sport, uint16_t dport, const void *payload, size_t len)
{
	size_t hl = src->family == AF_INET ? IP4_HDR_LEN : IP6_HDR_LEN, ulen = UDP_HDR_LEN + len;
	uint16_t csum;
	uint8_t *u;

	if (src->family != dst->family || (src->family != AF_INET && src->family != AF_INET6) ||
	    hl + ulen > cap || ulen > 0xffff)
		return 0;
	u = p + ip_hdr_build(p, src->family, src->bytes, dst->bytes, 17, 255, ulen, true);
	ip_put16(u, sport);
	ip_put16(u + 2, dport);
	ip_put16(u + 4, (uint16_t)ulen);
	ip_put16(u + 6, 0);
	memcpy(u + UDP_HDR_LEN, payload, len);
	csum = (uint16_t)~ip_csum_fold(
	    ip_csum_add(pseudo_sum(src->family, p, (uint16_t)ulen), u, ulen));
	ip_put16(u + 6, csum ? csum : 0xffff); /* 0 would mean "none" */
	return hl + ulen;
}

bool fwd_ip_is_udp_to(const uint8_t *p, size_t len, uint32_t port)
{
	size_t l4;

	if (!port)
		return false;
	if (len >= IP4_HDR_LEN && (p[0] >> 4) == 4) {
		if (p[9] != 17 || (ip_be16(p + 6) & 0x3fff) != 0)
			return false;
		l4 = (size_t)(p[0] & 15u) * 4;
	} else if (len >= IP6_HDR_LEN && (p[0] >> 4) == 6) {
		if (p[6] != 17)
			return false;
		l4 = IP6_HDR_LEN;
	} else {
		return false;
	}
	return len >= l4 + UDP_HDR_LEN && ip_be16(p + l4 + 2) == port;
}
