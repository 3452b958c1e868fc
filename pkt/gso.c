/*
 * GSO metadata checks and software segmentation (see gso.h). Every length is checked
 * against the buffer before it is used: the headers come from a sender, the metadata
 * from the kernel, and neither is trusted to agree with the other.
 */
#include <string.h>

#include "pkt/gso.h"
#include "pkt/ip.h"

#define ETH_HLEN_    14
#define IPPROTO_TCP_ 6
#define IPPROTO_UDP_ 17

static const char *const names[GSO_RESULT_COUNT] = {
	[GSO_OK] = "ok",
	[GSO_BAD_TYPE] = "gso_bad_type",
	[GSO_UFO] = "gso_ufo",
	[GSO_BAD_ECN] = "gso_bad_ecn",
	[GSO_ZERO_SIZE] = "gso_zero_size",
	[GSO_CSUM_RANGE] = "gso_csum_range",
	[GSO_CSUM_MISMATCH] = "gso_csum_mismatch",
	[GSO_NOT_IP] = "gso_not_ip",
	[GSO_FAMILY] = "gso_family",
	[GSO_BAD_IP] = "gso_bad_ip",
	[GSO_BAD_LENGTH] = "gso_bad_length",
	[GSO_FRAGMENT] = "gso_fragment",
	[GSO_EXT_HDR] = "gso_ext_hdr",
	[GSO_PROTO] = "gso_proto",
	[GSO_L4_TRUNCATED] = "gso_l4_truncated",
	[GSO_TOO_MANY_SEGS] = "gso_too_many_segs",
	[GSO_MTU_TOO_SMALL] = "gso_mtu_too_small",
	[GSO_SEGMENT_TOO_BIG] = "gso_segment_too_big",
	[GSO_HDR_TOO_LONG] = "gso_hdr_too_long",
};

const char *gso_result_name(enum gso_result r)
{
	if ((unsigned)r >= GSO_RESULT_COUNT)
		return "unknown";
	return names[r];
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

void gso_vnet_read(struct gso_vnet *v, const uint8_t p[GSO_VNET_LEN])
{
	v->flags = p[0];
	v->gso_type = p[1];
	v->hdr_len = le16(p + 2);
	v->gso_size = le16(p + 4);
	v->csum_start = le16(p + 6);
	v->csum_offset = le16(p + 8);
}

void gso_vnet_write(uint8_t p[GSO_VNET_LEN], const struct gso_vnet *v)
{
	p[0] = v->flags;
	p[1] = v->gso_type;
	put_le16(p + 2, v->hdr_len);
	put_le16(p + 4, v->gso_size);
	put_le16(p + 6, v->csum_start);
	put_le16(p + 8, v->csum_offset);
}

/* The L4 header of an unfragmented packet: family (4/6), protocol and offset. IPv6
 * extension headers: all those ip6_validate walks when copyable is false (checksums),
 * only hop-by-hop and destination options when true (segments copy them; a routing
 * header would change the pseudo-header's destination, AH covers the payload). */
static enum gso_result l4_of(const uint8_t *ip, size_t len, bool copyable, uint8_t *family,
			     uint8_t *proto, uint16_t *l4_off)
{
	if (len < 1)
		return GSO_BAD_IP;
	if (ip[0] >> 4 == 4) {
		struct ip4_info ii;

		if (ip4_validate(ip, len, &ii) != IP_OK)
			return GSO_BAD_IP;
		if (ii.tot_len != len)
			return GSO_BAD_LENGTH;
		if (ii.mf || ii.frag_off)
			return GSO_FRAGMENT;
		*family = 4;
		*proto = ii.proto;
		*l4_off = ii.hdr_len;
		return GSO_OK;
	}
	if (ip[0] >> 4 == 6) {
		struct ip6_info ii;
		size_t off = IP6_HDR_LEN;
		uint8_t nh;

		if (ip6_validate(ip, len, &ii) != IP_OK)
			return GSO_BAD_IP;
		if (ii.pkt_len != len)
			return GSO_BAD_LENGTH;
		if (ii.is_frag)
			return GSO_FRAGMENT;
		/* ip6_validate walked the chain within len: the walk here stays inside. */
		for (nh = ip[6]; copyable && off < ii.l4_off;
		     off += ((size_t)ip[off + 1] + 1) * 8) {
			if (nh != 0 && nh != 60)
				return GSO_EXT_HDR;
			nh = ip[off];
		}
		if (copyable && (off != ii.l4_off || nh != ii.proto))
			return GSO_EXT_HDR;
		*family = 6;
		*proto = ii.proto;
		*l4_off = ii.l4_off;
		return GSO_OK;
	}
	return GSO_BAD_IP;
}

/* The full checksum of l4[0..l4len) written at its field. */
static void l4_csum(const uint8_t *ip, uint8_t family, uint8_t proto, uint8_t *l4, uint32_t l4len)
{
	unsigned field = proto == IPPROTO_TCP_ ? 16 : 6;
	uint16_t c;

	l4[field] = l4[field + 1] = 0;
	c = (uint16_t)~ip_csum_fold(
	    ip_csum_add(ip_pseudo_sum(ip, family, l4len, proto), l4, l4len));
	if (proto == IPPROTO_UDP_ && c == 0)
		c = 0xffff; /* zero means "no checksum" in UDP */
	ip_put16(l4 + field, c);
}

/* The unfragmented TCP/UDP packet in ip[0..len): its family, protocol, L4 offset and IP
 * length (link padding past it is not part of the packet). */
static bool l4_packet(const uint8_t *ip, size_t len, uint8_t *family, uint8_t *proto, uint16_t *off,
		      size_t *tot)
{
	if (len >= 4 && ip[0] >> 4 == 4)
		*tot = ip_be16(ip + 2);
	else if (len >= IP6_HDR_LEN && ip[0] >> 4 == 6)
		*tot = IP6_HDR_LEN + (size_t)ip_be16(ip + 4);
	else
		return false;
	if (*tot > len)
		return false;
	if (l4_of(ip, *tot, false, family, proto, off) != GSO_OK)
		return false;
	return (*proto == IPPROTO_TCP_ || *proto == IPPROTO_UDP_) &&
	       *tot >= (size_t)*off + (*proto == IPPROTO_TCP_ ? 20 : 8);
}

bool gso_l4_csum_fix_partial(uint8_t *ip, size_t len)
{
	uint8_t family, proto;
	uint16_t off, field;
	uint32_t l4len;
	size_t tot;
	uint64_t ps;

	if (!l4_packet(ip, len, &family, &proto, &off, &tot))
		return false;
	l4len = (uint32_t)(tot - off);
	field = ip_be16(ip + off + (proto == IPPROTO_TCP_ ? 16 : 6));
	ps = ip_pseudo_sum(ip, family, l4len, proto);
	if (field != ip_csum_fold(ps) || (proto == IPPROTO_UDP_ && family == 4 && field == 0))
		return false;
	/* A checksum that verifies stays (the pseudo-header sum can be a right one). */
	if (ip_csum_fold(ip_csum_add(ps, ip + off, l4len)) == 0xffff)
		return false;
	l4_csum(ip, family, proto, ip + off, l4len);
	return true;
}

bool gso_l4_csum_fill(uint8_t *ip, size_t len)
{
	uint8_t family, proto;
	uint16_t off;
	size_t tot;

	if (!l4_packet(ip, len, &family, &proto, &off, &tot))
		return false;
	l4_csum(ip, family, proto, ip + off, (uint32_t)(tot - off));
	return true;
}

enum gso_result gso_plan(const uint8_t *ip, size_t len, const struct gso_pkt *g, uint32_t mtu,
			 struct gso_plan *p)
{
	uint8_t family, proto;
	uint16_t off;
	uint32_t mss, hdr;
	enum gso_result r;

	if (g->kind != GSO_TCP && g->kind != GSO_UDP)
		return GSO_BAD_TYPE;
	if (g->size == 0)
		return GSO_ZERO_SIZE;
	if (len > 65535 + IP6_HDR_LEN)
		return GSO_BAD_LENGTH;
	r = l4_of(ip, len, true, &family, &proto, &off);
	if (r != GSO_OK)
		return r;
	if (g->kind == GSO_TCP) {
		if (proto != IPPROTO_TCP_)
			return GSO_PROTO;
		if ((size_t)off + 20 > len || ip[off + 12] >> 4 < 5)
			return GSO_L4_TRUNCATED;
		hdr = off + (uint32_t)(ip[off + 12] >> 4) * 4;
		if (hdr > len)
			return GSO_L4_TRUNCATED;
	} else {
		if (proto != IPPROTO_UDP_)
			return GSO_PROTO;
		if ((size_t)off + 8 > len)
			return GSO_L4_TRUNCATED;
		if (ip_be16(ip + off + 4) != len - off)
			return GSO_BAD_LENGTH;
		hdr = off + 8u;
	}
	if (hdr > GSO_HDR_MAX)
		return GSO_HDR_TOO_LONG;
	mss = g->size;
	if (mtu) {
		if (mtu <= hdr)
			return g->kind == GSO_TCP ? GSO_MTU_TOO_SMALL : GSO_SEGMENT_TOO_BIG;
		if (mss > mtu - hdr) {
			if (g->kind == GSO_UDP)
				return GSO_SEGMENT_TOO_BIG;
			mss = mtu - hdr; /* TCP: any boundary will do */
		}
	}
	p->kind = g->kind;
	p->family = family;
	p->l4_off = off;
	p->hdr_len = (uint16_t)hdr;
	p->mss = (uint16_t)mss;
	p->payload = (uint32_t)(len - hdr);
	p->n = 1;
	if (p->payload > mss) {
		uint32_t n = (p->payload + mss - 1) / mss;

		if (n > GSO_SEGS_MAX)
			return GSO_TOO_MANY_SEGS;
		p->n = (uint16_t)n;
	}
	return GSO_OK;
}

size_t gso_segment(const struct gso_plan *p, const uint8_t *ip, unsigned i, uint8_t *out)
{
	uint32_t off = (uint32_t)i * p->mss;
	size_t tot = gso_seg_len(p, i), seg = tot - p->hdr_len;
	uint8_t *l4 = out + p->l4_off;

	memcpy(out, ip, p->hdr_len);
	memcpy(out + p->hdr_len, ip + p->hdr_len + off, seg);
	if (p->family == 4) {
		unsigned ihl = (out[0] & 0x0fu) * 4;

		ip_put16(out + 2, (uint16_t)tot);
		ip_put16(out + 4, (uint16_t)(ip_be16(ip + 4) + i));
		out[10] = out[11] = 0;
		ip_put16(out + 10, ip_csum(out, ihl));
	} else {
		ip_put16(out + 4, (uint16_t)(tot - IP6_HDR_LEN));
	}
	if (p->kind == GSO_TCP) {
		uint8_t fl = l4[13];

		ip_put32(l4 + 4, ip_be32(ip + p->l4_off + 4) + off);
		if (i + 1u < p->n)
			fl &= (uint8_t) ~(TCP_FIN | TCP_PSH);
		if (i > 0)
			fl &= (uint8_t)~TCP_CWR;
		l4[13] = fl;
		l4_csum(out, p->family, IPPROTO_TCP_, l4, (uint32_t)(tot - p->l4_off));
	} else {
		ip_put16(l4 + 4, (uint16_t)(tot - p->l4_off));
		l4_csum(out, p->family, IPPROTO_UDP_, l4, (uint32_t)(tot - p->l4_off));
	}
	return tot;
}

void gso_l4_seed(const struct gso_plan *p, uint8_t *ip)
{
	uint8_t proto = p->kind == GSO_TCP ? IPPROTO_TCP_ : IPPROTO_UDP_;
	uint32_t l4len = p->hdr_len - p->l4_off + p->payload;

	ip_put16(ip + p->l4_off + (proto == IPPROTO_TCP_ ? 16 : 6),
		 ip_csum_fold(ip_pseudo_sum(ip, p->family, l4len, proto)));
}

enum gso_result gso_check(const struct gso_vnet *v, const uint8_t *frame, size_t len,
			  struct gso_pkt *out, bool *partial)
{
	uint8_t base = v->gso_type & (uint8_t)~GSO_VNET_ECN;
	bool ecn = (v->gso_type & GSO_VNET_ECN) != 0;
	struct gso_pkt g;
	struct gso_plan p;
	uint16_t type;
	enum gso_result r;

	out->kind = GSO_NONE;
	out->size = 0;
	*partial = false;
	if (v->flags & GSO_VNET_F_NEEDS_CSUM) {
		if ((uint32_t)v->csum_start + v->csum_offset + 2 > len)
			return GSO_CSUM_RANGE;
		*partial = true;
	}
	switch (base) {
	case GSO_VNET_NONE:
		return ecn ? GSO_BAD_ECN : GSO_OK;
	case GSO_VNET_TCPV4:
	case GSO_VNET_TCPV6:
		g.kind = GSO_TCP;
		break;
	case GSO_VNET_UDP_L4:
		if (ecn)
			return GSO_BAD_ECN;
		g.kind = GSO_UDP;
		break;
	case GSO_VNET_UDP:
		return GSO_UFO;
	default:
		return GSO_BAD_TYPE;
	}
	if (v->gso_size == 0)
		return GSO_ZERO_SIZE;
	g.size = v->gso_size;
	if (len < ETH_HLEN_ + 1)
		return GSO_NOT_IP;
	type = ip_be16(frame + 12);
	if (type == 0x0800) {
		if (base == GSO_VNET_TCPV6)
			return GSO_FAMILY;
	} else if (type == 0x86dd) {
		if (base == GSO_VNET_TCPV4)
			return GSO_FAMILY;
	} else {
		return GSO_NOT_IP;
	}
	if ((frame[ETH_HLEN_] >> 4) != (type == 0x0800 ? 4 : 6))
		return GSO_BAD_IP;
	r = gso_plan(frame + ETH_HLEN_, len - ETH_HLEN_, &g, 0, &p);
	if (r != GSO_OK)
		return r;
	if (*partial && (v->csum_start != ETH_HLEN_ + p.l4_off ||
			 v->csum_offset != (g.kind == GSO_TCP ? 16 : 6)))
		return GSO_CSUM_MISMATCH;
	if (p.n > 1)
		*out = g;
	return GSO_OK;
}
