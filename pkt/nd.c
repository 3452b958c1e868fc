/*
 * Neighbor Discovery parse and build (see nd.h).
 */
#include <string.h>

#include "pkt/nd.h"
#include "lib/ipoib.h"

static const char *const reason_names[ND_REASON_COUNT] = {
	[ND_OK] = "ok",
	[ND_BAD_IP] = "nd_bad_ip",
	[ND_NOT_ICMPV6] = "nd_not_icmpv6",
	[ND_FRAGMENTED] = "nd_fragmented",
	[ND_NOT_ND] = "nd_not_nd",
	[ND_BAD_HOP_LIMIT] = "nd_bad_hop_limit",
	[ND_BAD_CODE] = "nd_bad_code",
	[ND_TOO_SHORT] = "nd_too_short",
	[ND_BAD_CHECKSUM] = "nd_bad_checksum",
	[ND_OPTION_ZERO_LENGTH] = "nd_option_zero_length",
	[ND_OPTION_TRUNCATED] = "nd_option_truncated",
	[ND_BAD_LLADDR_LEN] = "nd_bad_lladdr_len",
	[ND_LLADDR_RESERVED] = "nd_lladdr_reserved",
	[ND_BAD_PREFIX_OPTION] = "nd_bad_prefix_option",
	[ND_BAD_MTU_OPTION] = "nd_bad_mtu_option",
	[ND_TARGET_MULTICAST] = "nd_target_multicast",
	[ND_DAD_BAD_DST] = "nd_dad_bad_dst",
	[ND_DAD_WITH_SLLAO] = "nd_dad_with_sllao",
	[ND_NA_SOLICITED_MCAST] = "nd_na_solicited_mcast",
	[ND_RS_UNSPEC_WITH_SLLAO] = "nd_rs_unspec_with_sllao",
	[ND_SRC_NOT_LINK_LOCAL] = "nd_src_not_link_local",
	[ND_SRC_MULTICAST] = "nd_src_multicast",
	[ND_LLADDR_NOT_UNICAST] = "nd_lladdr_not_unicast",
};

const char *nd_reason_name(enum nd_reason r)
{
	if ((unsigned)r >= ND_REASON_COUNT)
		return "unknown";
	return reason_names[r];
}

const uint8_t nd_all_nodes[16] = { 0xff, 0x02, [15] = 1 };
const uint8_t nd_all_routers[16] = { 0xff, 0x02, [15] = 2 };

void nd_solicited_node(const uint8_t target[16], uint8_t out[16])
{
	static const uint8_t pfx[13] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff };

	memcpy(out, pfx, 13);
	memcpy(out + 13, target + 13, 3);
}

bool nd_is_solicited_node(const uint8_t a[16])
{
	static const uint8_t pfx[13] = { 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff };

	return memcmp(a, pfx, 13) == 0;
}

void nd_mcast_mac(const uint8_t group[16], uint8_t mac[6])
{
	mac[0] = 0x33;
	mac[1] = 0x33;
	memcpy(mac + 2, group + 12, 4);
}

/* Minimum ICMP length per type (RFC 4861 4.1-4.5). */
static size_t min_len(uint8_t type)
{
	switch (type) {
	case ND_RS:
		return 8;
	case ND_RA:
		return 16;
	case ND_NS:
	case ND_NA:
		return 24;
	default:
		return 40; /* redirect */
	}
}

static enum nd_reason lladdr_opt(const uint8_t *o, size_t olen, enum nd_link link,
				 const uint8_t **addr)
{
	if (link == ND_LINK_ETHER) {
		static const uint8_t zero[6];

		if (olen != 8)
			return ND_BAD_LLADDR_LEN;
		/* A group or no address at all: nobody's port (arp_parse refuses the same
		 * as a sender hardware address). */
		if ((o[2] & 1) || !memcmp(o + 2, zero, 6))
			return ND_LLADDR_NOT_UNICAST;
		*addr = o + 2;
		return ND_OK;
	}
	if (olen != 24)
		return ND_BAD_LLADDR_LEN;
	if (o[4] & IPOIB_HWADDR_F_RSVD)
		return ND_LLADDR_RESERVED;
	/* Sent to, it would be a unicast datagram to the multicast QPN or to a group:
	 * nobody's port. */
	if (!ipoib_hwaddr_is_unicast(o + 4))
		return ND_LLADDR_NOT_UNICAST;
	*addr = o + 4;
	return ND_OK;
}

static enum nd_reason parse_options(const uint8_t *o, size_t len, enum nd_link link,
				    struct nd_msg *m)
{
	size_t i = 0;

	while (i < len) {
		size_t olen;
		enum nd_reason r;

		if (len - i < 2)
			return ND_OPTION_TRUNCATED;
		olen = (size_t)o[i + 1] * 8;
		if (olen == 0)
			return ND_OPTION_ZERO_LENGTH;
		if (olen > len - i)
			return ND_OPTION_TRUNCATED;
		switch (o[i]) {
		case ND_OPT_SLLA:
		case ND_OPT_TLLA: {
			const uint8_t *a;

			r = lladdr_opt(o + i, olen, link, &a);
			if (r != ND_OK)
				return r;
			if (o[i] == ND_OPT_SLLA && !m->sllao)
				m->sllao = a;
			else if (o[i] == ND_OPT_TLLA && !m->tllao)
				m->tllao = a;
			break;
		}
		case ND_OPT_PREFIX:
			if (olen != 32 || o[i + 2] > 128)
				return ND_BAD_PREFIX_OPTION;
			if (m->n_prefix < ND_MAX_PREFIXES) {
				struct nd_prefix *p = &m->prefix[m->n_prefix++];

				p->len = o[i + 2];
				p->flags = o[i + 3];
				p->valid = ip_be32(o + i + 4);
				p->preferred = ip_be32(o + i + 8);
				p->prefix = o + i + 16;
			}
			if (m->n_prefix_seen < 255)
				m->n_prefix_seen++;
			break;
		case ND_OPT_MTU:
			if (olen != 8)
				return ND_BAD_MTU_OPTION;
			m->has_mtu = true;
			m->mtu = ip_be32(o + i + 4);
			break;
		default: /* unknown options are skipped (RFC 4861 4.6) */
			break;
		}
		i += olen;
	}
	return ND_OK;
}

enum nd_reason nd_parse(const uint8_t *pkt, size_t len, enum nd_link link, struct nd_msg *m)
{
	struct ip6_info info;
	const uint8_t *ic;
	size_t ilen, body;
	uint64_t sum;
	enum nd_reason r;

	if (ip6_validate(pkt, len, &info) != IP_OK)
		return ND_BAD_IP;
	if (info.is_frag)
		return ND_FRAGMENTED;
	if (info.proto != 58)
		return ND_NOT_ICMPV6;
	ic = pkt + info.l4_off;
	ilen = info.pkt_len - info.l4_off;
	if (ilen < 4)
		return ND_TOO_SHORT;
	if (ic[0] < ND_RS || ic[0] > ND_REDIRECT)
		return ND_NOT_ND;
	if (pkt[7] != 255)
		return ND_BAD_HOP_LIMIT;
	if (ic[1] != 0)
		return ND_BAD_CODE;
	if (ilen < min_len(ic[0]))
		return ND_TOO_SHORT;
	sum = ip6_pseudo_sum(pkt + 8, pkt + 24, (uint32_t)ilen, 58);
	if (ip_csum_fold(ip_csum_add(sum, ic, ilen)) != 0xffff)
		return ND_BAD_CHECKSUM;

	memset(m, 0, sizeof(*m));
	m->type = ic[0];
	m->src = pkt + 8;
	m->dst = pkt + 24;
	if (ip6_is_multicast(m->src))
		return ND_SRC_MULTICAST;
	body = min_len(ic[0]);
	switch (m->type) {
	case ND_RA:
		m->ra_cur_hop_limit = ic[4];
		m->flags = ic[5];
		m->ra_lifetime = ip_be16(ic + 6);
		m->ra_reachable = ip_be32(ic + 8);
		m->ra_retrans = ip_be32(ic + 12);
		break;
	case ND_NS:
	case ND_NA:
		m->target = ic + 8;
		if (m->type == ND_NA)
			m->flags = ip_be32(ic + 4) & 0xe0000000u;
		break;
	case ND_REDIRECT:
		m->target = ic + 8;
		m->redirect_dst = ic + 24;
		break;
	default:
		break;
	}
	r = parse_options(ic + body, ilen - body, link, m);
	if (r != ND_OK)
		return r;

	switch (m->type) {
	case ND_RS:
		if (ip6_is_unspecified(m->src) && m->sllao)
			return ND_RS_UNSPEC_WITH_SLLAO;
		break;
	case ND_RA:
	case ND_REDIRECT:
		if (!ip6_is_link_local(m->src))
			return ND_SRC_NOT_LINK_LOCAL;
		break;
	case ND_NS:
		if (ip6_is_multicast(m->target))
			return ND_TARGET_MULTICAST;
		if (ip6_is_unspecified(m->src)) {
			m->dad = true;
			if (!nd_is_solicited_node(m->dst))
				return ND_DAD_BAD_DST;
			if (m->sllao)
				return ND_DAD_WITH_SLLAO;
		}
		break;
	case ND_NA:
		if (ip6_is_multicast(m->target))
			return ND_TARGET_MULTICAST;
		if (ip6_is_multicast(m->dst) && (m->flags & ND_NA_SOLICITED))
			return ND_NA_SOLICITED_MCAST;
		break;
	default:
		break;
	}
	return ND_OK;
}

/* Write a link-layer address option; returns its length. */
static size_t put_lladdr(uint8_t *o, uint8_t type, enum nd_link link, const uint8_t *a)
{
	if (link == ND_LINK_ETHER) {
		o[0] = type;
		o[1] = 1;
		memcpy(o + 2, a, 6);
		return 8;
	}
	o[0] = type;
	o[1] = 3;
	o[2] = 0;
	o[3] = 0;
	memcpy(o + 4, a, 20);
	return 24;
}

/* IPv6 header + checksum around an ICMPv6 body of ilen octets already at out + 40. */
static size_t finish(uint8_t *out, const uint8_t src[16], const uint8_t dst[16], size_t ilen)
{
	uint8_t *ic = out + IP6_HDR_LEN;
	uint64_t s;

	ip_put32(out, 0x60000000u);
	ip_put16(out + 4, (uint16_t)ilen);
	out[6] = 58;
	out[7] = 255;
	memmove(out + 8, src, 16);
	memmove(out + 24, dst, 16);
	ip_put16(ic + 2, 0);
	s = ip6_pseudo_sum(out + 8, out + 24, (uint32_t)ilen, 58);
	ip_put16(ic + 2, (uint16_t)~ip_csum_fold(ip_csum_add(s, ic, ilen)));
	return IP6_HDR_LEN + ilen;
}

static size_t build(uint8_t *out, size_t cap, enum nd_link link, uint8_t type, uint32_t word,
		    const uint8_t src[16], const uint8_t dst[16], const uint8_t target[16],
		    uint8_t opt_type, const uint8_t *lladdr)
{
	uint8_t s[16], d[16], t[16], ll[20];
	size_t ilen = 24 + (lladdr ? (link == ND_LINK_IB ? 24 : 8) : 0);
	uint8_t *ic = out + IP6_HDR_LEN;

	if (cap < IP6_HDR_LEN + ilen)
		return 0;
	/* Inputs may point into out (a request being answered in place). */
	memcpy(s, src, 16);
	memcpy(d, dst, 16);
	memcpy(t, target, 16);
	if (lladdr)
		memcpy(ll, lladdr, nd_lladdr_len(link));
	ic[0] = type;
	ic[1] = 0;
	ip_put32(ic + 4, word);
	memcpy(ic + 8, t, 16);
	if (lladdr)
		put_lladdr(ic + 24, opt_type, link, ll);
	return finish(out, s, d, ilen);
}

size_t nd_build_ns(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t *dst, const uint8_t target[16], const uint8_t *lladdr)
{
	uint8_t snm[16];

	if (ip6_is_unspecified(src) && lladdr)
		return 0;
	if (!dst) {
		nd_solicited_node(target, snm);
		dst = snm;
	}
	return build(out, cap, link, ND_NS, 0, src, dst, target, ND_OPT_SLLA, lladdr);
}

size_t nd_build_na(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t dst[16], const uint8_t target[16], uint32_t flags,
		   const uint8_t *lladdr)
{
	return build(out, cap, link, ND_NA, flags & 0xe0000000u, src, dst, target, ND_OPT_TLLA,
		     lladdr);
}

size_t nd_build_na_reply(uint8_t *out, size_t cap, enum nd_link link, const struct nd_msg *ns,
			 const uint8_t src[16], uint32_t flags, const uint8_t *lladdr)
{
	flags &= ND_NA_ROUTER | ND_NA_OVERRIDE;
	if (ip6_is_unspecified(ns->src))
		return nd_build_na(out, cap, link, src, nd_all_nodes, ns->target, flags, lladdr);
	return nd_build_na(out, cap, link, src, ns->src, ns->target, flags | ND_NA_SOLICITED,
			   lladdr);
}

size_t nd_build_unsolicited_na(uint8_t *out, size_t cap, enum nd_link link, const uint8_t addr[16],
			       bool router, const uint8_t *lladdr)
{
	return nd_build_na(out, cap, link, addr, nd_all_nodes, addr,
			   ND_NA_OVERRIDE | (router ? ND_NA_ROUTER : 0), lladdr);
}

size_t nd_build_ra(uint8_t *out, size_t cap, enum nd_link link, const uint8_t src[16],
		   const uint8_t dst[16], const struct nd_ra_params *p, const uint8_t *lladdr)
{
	uint8_t s[16], d[16];
	uint8_t *ic = out + IP6_HDR_LEN;
	size_t ilen = 16 + (lladdr ? (link == ND_LINK_IB ? 24 : 8) : 0) + (p->mtu ? 8 : 0) +
		      32 * (size_t)p->n_prefix;
	size_t o = 16;

	if (p->n_prefix > ND_RA_MAX_PREFIX || cap < IP6_HDR_LEN + ilen)
		return 0;
	memcpy(s, src, 16);
	memcpy(d, dst, 16);
	ic[0] = ND_RA;
	ic[1] = 0;
	ic[4] = p->cur_hop_limit;
	ic[5] = p->flags & (ND_RA_MANAGED | ND_RA_OTHER);
	ip_put16(ic + 6, p->router_lifetime);
	ip_put32(ic + 8, p->reachable_ms);
	ip_put32(ic + 12, p->retrans_ms);
	if (lladdr)
		o += put_lladdr(ic + o, ND_OPT_SLLA, link, lladdr);
	if (p->mtu) {
		ic[o] = ND_OPT_MTU;
		ic[o + 1] = 1;
		ip_put16(ic + o + 2, 0);
		ip_put32(ic + o + 4, p->mtu);
		o += 8;
	}
	for (unsigned i = 0; i < p->n_prefix; i++) {
		const struct nd_prefix *x = &p->prefix[i];
		uint8_t *q = ic + o;
		unsigned len = x->len > 128 ? 128 : x->len;

		q[0] = ND_OPT_PREFIX;
		q[1] = 4;
		q[2] = (uint8_t)len;
		q[3] = x->flags & (ND_PFX_ON_LINK | ND_PFX_AUTO);
		ip_put32(q + 4, x->valid);
		ip_put32(q + 8, x->preferred);
		ip_put32(q + 12, 0);
		/* The prefix with its host bits cleared (4.6.2: the receiver ignores them,
		 * but a sender must not leak an interface address in them). */
		memset(q + 16, 0, 16);
		memcpy(q + 16, x->prefix, len / 8);
		if (len % 8)
			q[16 + len / 8] = (uint8_t)(x->prefix[len / 8] & (0xff00 >> (len % 8)));
		o += 32;
	}
	return finish(out, s, d, ilen);
}

uint64_t nd_ra_interval(uint32_t min_ms, uint32_t max_ms, unsigned initial, uint32_t rnd)
{
	uint64_t t;

	if (min_ms > max_ms)
		min_ms = max_ms;
	t = min_ms + (uint64_t)rnd % ((uint64_t)max_ms - min_ms + 1);
	if (initial < ND_MAX_INITIAL_RTR_ADVERTISEMENTS && t > ND_MAX_INITIAL_RTR_ADVERT_INTERVAL)
		t = ND_MAX_INITIAL_RTR_ADVERT_INTERVAL;
	return t;
}

uint64_t nd_ra_solicited(uint64_t now_ms, bool mcast, uint64_t last_mcast_ms, uint64_t next_ms,
			 uint32_t rnd)
{
	uint64_t t = now_ms + rnd % (ND_MAX_RA_DELAY_TIME + 1);

	if (!mcast)
		return t;
	if (last_mcast_ms && t < last_mcast_ms + ND_MIN_DELAY_BETWEEN_RAS)
		t = last_mcast_ms + ND_MIN_DELAY_BETWEEN_RAS;
	if (next_ms && next_ms < t)
		t = next_ms;
	return t;
}
