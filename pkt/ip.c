/*
 * The rare paths of pkt/ip.h: IPv4 option walk, IPv6 extension-header chain walk,
 * martian address rules, the reason names, and the headers of the gateway's own packets.
 */
#include <string.h>
#include <sys/socket.h>

#include "pkt/ip.h"

static const char *const reason_names[IP_REASON_COUNT] = {
	[IP_OK] = "ok",
	[IP4_TRUNCATED] = "ip4_truncated",
	[IP4_BAD_VERSION] = "ip4_bad_version",
	[IP4_BAD_IHL] = "ip4_bad_ihl",
	[IP4_HDR_TRUNCATED] = "ip4_hdr_truncated",
	[IP4_BAD_TOTAL_LENGTH] = "ip4_bad_total_length",
	[IP4_LENGTH_EXCEEDS_BUFFER] = "ip4_length_exceeds_buffer",
	[IP4_BAD_CHECKSUM] = "ip4_bad_checksum",
	[IP4_BAD_OPTION] = "ip4_bad_option",
	[IP4_SOURCE_ROUTE] = "ip4_source_route",
	[IP4_FRAG_TOO_LONG] = "ip4_frag_too_long",
	[IP4_FRAG_BAD_LENGTH] = "ip4_frag_bad_length",
	[IP4_TTL_EXPIRED] = "ip4_ttl_expired",
	[IP4_SRC_ZERO_NET] = "ip4_src_zero_net",
	[IP4_SRC_LOOPBACK] = "ip4_src_loopback",
	[IP4_SRC_LINK_LOCAL] = "ip4_src_link_local",
	[IP4_SRC_MULTICAST] = "ip4_src_multicast",
	[IP4_SRC_CLASS_E] = "ip4_src_class_e",
	[IP4_SRC_BROADCAST] = "ip4_src_broadcast",
	[IP4_SRC_LISTED] = "ip4_src_listed",
	[IP4_DST_ZERO_NET] = "ip4_dst_zero_net",
	[IP4_DST_LOOPBACK] = "ip4_dst_loopback",
	[IP4_DST_LINK_LOCAL] = "ip4_dst_link_local",
	[IP4_DST_MULTICAST] = "ip4_dst_multicast",
	[IP4_DST_CLASS_E] = "ip4_dst_class_e",
	[IP4_DST_BROADCAST] = "ip4_dst_broadcast",
	[IP4_DST_LISTED] = "ip4_dst_listed",
	[IP6_TRUNCATED] = "ip6_truncated",
	[IP6_BAD_VERSION] = "ip6_bad_version",
	[IP6_LENGTH_EXCEEDS_BUFFER] = "ip6_length_exceeds_buffer",
	[IP6_JUMBOGRAM] = "ip6_jumbogram",
	[IP6_EXT_TRUNCATED] = "ip6_ext_truncated",
	[IP6_EXT_TOO_LONG] = "ip6_ext_too_long",
	[IP6_HBH_NOT_FIRST] = "ip6_hbh_not_first",
	[IP6_EXT_REPEATED] = "ip6_ext_repeated",
	[IP6_FRAG_BAD_LENGTH] = "ip6_frag_bad_length",
	[IP6_FRAG_TOO_LONG] = "ip6_frag_too_long",
	[IP6_HOP_EXPIRED] = "ip6_hop_expired",
	[IP6_SRC_UNSPECIFIED] = "ip6_src_unspecified",
	[IP6_SRC_LOOPBACK] = "ip6_src_loopback",
	[IP6_SRC_LINK_LOCAL] = "ip6_src_link_local",
	[IP6_SRC_MULTICAST] = "ip6_src_multicast",
	[IP6_SRC_V4MAPPED] = "ip6_src_v4mapped",
	[IP6_DST_UNSPECIFIED] = "ip6_dst_unspecified",
	[IP6_DST_LOOPBACK] = "ip6_dst_loopback",
	[IP6_DST_LINK_LOCAL] = "ip6_dst_link_local",
	[IP6_DST_MULTICAST_LINK] = "ip6_dst_multicast_link",
	[IP6_DST_V4MAPPED] = "ip6_dst_v4mapped",
};

const char *ip_reason_name(enum ip_reason r)
{
	if ((unsigned)r >= IP_REASON_COUNT || !reason_names[r])
		return "unknown";
	return reason_names[r];
}

enum ip_reason ip4_check_options(const uint8_t *opt, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t t = opt[i];
		size_t l;

		if (t == IP4_OPT_EOL)
			break;
		if (t == IP4_OPT_NOP) {
			i++;
			continue;
		}
		if (i + 1 >= len)
			return IP4_BAD_OPTION;
		l = opt[i + 1];
		if (l < 2 || i + l > len)
			return IP4_BAD_OPTION;
		if (t == IP4_OPT_LSRR || t == IP4_OPT_SSRR)
			return IP4_SOURCE_ROUTE;
		i += l;
	}
	return IP_OK;
}

enum ip_reason ip6_walk_ext(const uint8_t *p, size_t len, struct ip6_info *out)
{
	uint8_t nh = p[6];
	size_t off = IP6_HDR_LEN;
	unsigned dst_opts = 0;
	bool seen_rh = false, seen_ah = false;

	while (ip6_is_ext(nh)) {
		size_t hl;

		if (out->n_ext >= IP6_EXT_MAX)
			return IP6_EXT_TOO_LONG;
		if (off + 2 > len)
			return IP6_EXT_TRUNCATED;
		switch (nh) {
		case 0:
			if (off != IP6_HDR_LEN)
				return IP6_HBH_NOT_FIRST;
			out->has_hbh = true;
			hl = ((size_t)p[off + 1] + 1) * 8;
			break;
		case 44: {
			uint16_t fo;
			size_t frag_len;

			if (out->is_frag)
				return IP6_EXT_REPEATED;
			if (off + 8 > len)
				return IP6_EXT_TRUNCATED;
			fo = ip_be16(p + off + 2);
			frag_len = len - (off + 8);
			out->is_frag = true;
			out->frag_hdr_off = (uint16_t)off;
			out->frag_off = fo & 0xfff8;
			out->frag_mf = fo & 1;
			out->frag_id = ip_be32(p + off + 4);
			out->frag_first = out->frag_off == 0;
			if (out->frag_mf && (frag_len == 0 || (frag_len & 7)))
				return IP6_FRAG_BAD_LENGTH;
			if (out->frag_off + frag_len > 65535)
				return IP6_FRAG_TOO_LONG;
			hl = 8;
			break;
		}
		case 51:
			if (seen_ah)
				return IP6_EXT_REPEATED;
			seen_ah = true;
			hl = ((size_t)p[off + 1] + 2) * 4;
			break;
		case 43:
			if (seen_rh)
				return IP6_EXT_REPEATED;
			seen_rh = true;
			hl = ((size_t)p[off + 1] + 1) * 8;
			break;
		case 60:
			if (++dst_opts > 2)
				return IP6_EXT_REPEATED;
			hl = ((size_t)p[off + 1] + 1) * 8;
			break;
		default: /* mobility, HIP, shim6, experimental: generic TLV-length headers */
			hl = ((size_t)p[off + 1] + 1) * 8;
			break;
		}
		if (off + hl > len)
			return IP6_EXT_TRUNCATED;
		out->n_ext++;
		nh = p[off];
		off += hl;
		if (out->is_frag && !out->frag_first) /* the rest is not headers */
			break;
	}
	out->proto = nh;
	out->l4_off = (uint16_t)off;
	return IP_OK;
}

const struct ip4_martian_cfg ip4_martian_default = {
	.src_classes = IP4_M_ZERO_NET | IP4_M_LOOPBACK | IP4_M_LINK_LOCAL | IP4_M_MULTICAST |
		       IP4_M_CLASS_E | IP4_M_BROADCAST,
	.dst_classes = IP4_M_ZERO_NET | IP4_M_LOOPBACK | IP4_M_LINK_LOCAL | IP4_M_MULTICAST |
		       IP4_M_CLASS_E | IP4_M_BROADCAST,
};

const struct ip6_martian_cfg ip6_martian_default = {
	.src_classes = IP6_M_UNSPECIFIED | IP6_M_LOOPBACK | IP6_M_LINK_LOCAL | IP6_M_MULTICAST |
		       IP6_M_V4MAPPED,
	.dst_classes = IP6_M_UNSPECIFIED | IP6_M_LOOPBACK | IP6_M_LINK_LOCAL | IP6_M_MULTICAST |
		       IP6_M_V4MAPPED,
};

/* Class of an IPv4 address as an IP4_M_* bit (0 for ordinary unicast). */
static unsigned ip4_class(uint32_t a)
{
	if (a == 0xffffffffu)
		return IP4_M_BROADCAST;
	if ((a >> 24) == 0)
		return IP4_M_ZERO_NET;
	if ((a >> 24) == 127)
		return IP4_M_LOOPBACK;
	if ((a >> 16) == 0xa9fe)
		return IP4_M_LINK_LOCAL;
	if ((a >> 28) == 0xe)
		return IP4_M_MULTICAST;
	if ((a >> 28) == 0xf)
		return IP4_M_CLASS_E;
	return 0;
}

static bool in_list(const struct ip4_prefix_ent *l, size_t n, uint32_t a)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t mask = l[i].len ? ~0u << (32 - (l[i].len > 32 ? 32 : l[i].len)) : 0;

		if ((a & mask) == (l[i].addr & mask))
			return true;
	}
	return false;
}

static enum ip_reason ip4_class_reason(unsigned c, bool src)
{
	switch (c) {
	case IP4_M_ZERO_NET:
		return src ? IP4_SRC_ZERO_NET : IP4_DST_ZERO_NET;
	case IP4_M_LOOPBACK:
		return src ? IP4_SRC_LOOPBACK : IP4_DST_LOOPBACK;
	case IP4_M_LINK_LOCAL:
		return src ? IP4_SRC_LINK_LOCAL : IP4_DST_LINK_LOCAL;
	case IP4_M_MULTICAST:
		return src ? IP4_SRC_MULTICAST : IP4_DST_MULTICAST;
	case IP4_M_CLASS_E:
		return src ? IP4_SRC_CLASS_E : IP4_DST_CLASS_E;
	default:
		return src ? IP4_SRC_BROADCAST : IP4_DST_BROADCAST;
	}
}

enum ip_reason ip4_check_addrs_classes(const struct ip4_martian_cfg *cfg, uint32_t src,
				       uint32_t dst)
{
	unsigned c = ip4_class(src);

	if (c & cfg->src_classes)
		return ip4_class_reason(c, true);
	if (cfg->n_extra_src && in_list(cfg->extra_src, cfg->n_extra_src, src))
		return IP4_SRC_LISTED;
	c = ip4_class(dst);
	if (c & cfg->dst_classes)
		return ip4_class_reason(c, false);
	if (cfg->n_extra_dst && in_list(cfg->extra_dst, cfg->n_extra_dst, dst))
		return IP4_DST_LISTED;
	return IP_OK;
}

static bool ip6_is_loopback(const uint8_t a[16])
{
	for (int i = 0; i < 15; i++)
		if (a[i])
			return false;
	return a[15] == 1;
}

static bool ip6_is_v4mapped(const uint8_t a[16])
{
	for (int i = 0; i < 10; i++)
		if (a[i])
			return false;
	return a[10] == 0xff && a[11] == 0xff;
}

enum ip_reason ip6_check_addrs_classes(const struct ip6_martian_cfg *cfg, const uint8_t src[16],
				       const uint8_t dst[16])
{
	unsigned s = cfg->src_classes, d = cfg->dst_classes;

	if ((s & IP6_M_UNSPECIFIED) && ip6_is_unspecified(src))
		return IP6_SRC_UNSPECIFIED;
	if ((s & IP6_M_LOOPBACK) && ip6_is_loopback(src))
		return IP6_SRC_LOOPBACK;
	if ((s & IP6_M_LINK_LOCAL) && ip6_is_link_local(src))
		return IP6_SRC_LINK_LOCAL;
	if ((s & IP6_M_MULTICAST) && ip6_is_multicast(src))
		return IP6_SRC_MULTICAST;
	if ((s & IP6_M_V4MAPPED) && ip6_is_v4mapped(src))
		return IP6_SRC_V4MAPPED;
	if ((d & IP6_M_UNSPECIFIED) && ip6_is_unspecified(dst))
		return IP6_DST_UNSPECIFIED;
	if ((d & IP6_M_LOOPBACK) && ip6_is_loopback(dst))
		return IP6_DST_LOOPBACK;
	if ((d & IP6_M_LINK_LOCAL) && ip6_is_link_local(dst))
		return IP6_DST_LINK_LOCAL;
	if ((d & IP6_M_MULTICAST) && ip6_is_multicast(dst) && (dst[1] & 0x0f) <= 2)
		return IP6_DST_MULTICAST_LINK;
	if ((d & IP6_M_V4MAPPED) && ip6_is_v4mapped(dst))
		return IP6_DST_V4MAPPED;
	return IP_OK;
}

size_t ip_hdr_build(uint8_t *p, int family, const uint8_t *src, const uint8_t *dst, uint8_t proto,
		    uint8_t ttl, size_t payload_len, bool df)
{
	if (family == AF_INET) {
		memset(p, 0, IP4_HDR_LEN);
		p[0] = 0x45;
		ip_put16(p + 2, (uint16_t)(IP4_HDR_LEN + payload_len));
		p[6] = df ? 0x40 : 0;
		p[8] = ttl;
		p[9] = proto;
		memcpy(p + 12, src, 4);
		memcpy(p + 16, dst, 4);
		ip_put16(p + 10, ip_csum(p, IP4_HDR_LEN));
		return IP4_HDR_LEN;
	}
	memset(p, 0, IP6_HDR_LEN);
	p[0] = 0x60;
	ip_put16(p + 4, (uint16_t)payload_len);
	p[6] = proto;
	p[7] = ttl;
	memcpy(p + 8, src, 16);
	memcpy(p + 24, dst, 16);
	return IP6_HDR_LEN;
}
