/*
 * ICMP/ICMPv6 error builders and the rate limiter (see icmp.h for the rules).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "pkt/icmp.h"
#include "pkt/ip.h"

static const char *const reason_names[ICMP_REASON_COUNT] = {
	[ICMP_OK] = "ok",
	[ICMP_INVOKING_MALFORMED] = "icmp_invoking_malformed",
	[ICMP_NOT_FOR_ICMP_ERROR] = "icmp_not_for_icmp_error",
	[ICMP_NOT_FOR_FRAGMENT] = "icmp_not_for_fragment",
	[ICMP_NOT_FOR_MULTICAST] = "icmp_not_for_multicast",
	[ICMP_NOT_FOR_BROADCAST] = "icmp_not_for_broadcast",
	[ICMP_NOT_FOR_MARTIAN_SRC] = "icmp_not_for_martian_src",
	[ICMP_NO_SPACE] = "icmp_no_space",
	[ICMP_BAD_TYPE] = "icmp_bad_type",
	[ICMP_RATE_LIMITED] = "icmp_rate_limited",
};

const char *icmp_reason_name(enum icmp_reason r)
{
	if ((unsigned)r >= ICMP_REASON_COUNT)
		return "unknown";
	return reason_names[r];
}

/* ICMPv4 types that are errors (RFC 1812 4.3.2.7); unknown types count as errors too,
 * as Linux treats them. */
static bool icmp4_type_is_error(uint8_t t)
{
	return t == 3 || t == 4 || t == 5 || t == 11 || t == 12 || t > 18;
}

enum icmp_reason icmp4_error(const struct icmp_err *e, const uint8_t *inv, size_t inv_len,
			     uint8_t *out, size_t cap, size_t *out_len)
{
	size_t ihl, quote, total;
	uint32_t isrc, idst;
	uint16_t frag;

	if (e->type != ICMP4_DEST_UNREACH && e->type != ICMP4_TIME_EXCEEDED &&
	    e->type != ICMP4_PARAM_PROBLEM)
		return ICMP_BAD_TYPE;
	if (inv_len < IP4_HDR_LEN || inv[0] >> 4 != 4)
		return ICMP_INVOKING_MALFORMED;
	ihl = (inv[0] & 0x0fu) * 4u;
	if (ihl < IP4_HDR_LEN || ihl > inv_len)
		return ICMP_INVOKING_MALFORMED;
	quote = ip_be16(inv + 2);
	if (quote < ihl)
		return ICMP_INVOKING_MALFORMED;
	if (quote > inv_len)
		quote = inv_len;
	isrc = ip_be32(inv + 12);
	idst = ip_be32(inv + 16);
	frag = ip_be16(inv + 6);
	if (frag & IP4_OFF_MASK)
		return ICMP_NOT_FOR_FRAGMENT;
	if (inv[9] == 1) {
		if (quote < ihl + 1)
			return ICMP_INVOKING_MALFORMED;
		if (icmp4_type_is_error(inv[ihl]))
			return ICMP_NOT_FOR_ICMP_ERROR;
	}
	if (idst == 0xffffffffu || e->dst_broadcast)
		return ICMP_NOT_FOR_BROADCAST;
	if (ip4_is_multicast(idst) || e->ll_multicast)
		return ICMP_NOT_FOR_MULTICAST;
	if (ip4_is_martian_src(isrc))
		return ICMP_NOT_FOR_MARTIAN_SRC;

	if (quote > ICMP4_ERR_MAX - IP4_HDR_LEN - 8)
		quote = ICMP4_ERR_MAX - IP4_HDR_LEN - 8;
	if (cap < IP4_HDR_LEN + 8 + (quote < ihl + 8 ? quote : ihl + 8))
		return ICMP_NO_SPACE;
	if (quote > cap - IP4_HDR_LEN - 8)
		quote = cap - IP4_HDR_LEN - 8;
	total = IP4_HDR_LEN + 8 + quote;

	uint8_t *ic = out + IP4_HDR_LEN;
	memmove(ic + 8, inv, quote); /* first: out may alias inv's buffer */
	out[0] = 0x45;
	out[1] = 0xc0; /* precedence internetwork control, as Linux sends errors */
	ip_put16(out + 2, (uint16_t)total);
	ip_put16(out + 4, e->ip_id);
	ip_put16(out + 6, 0);
	out[8] = e->ttl ? e->ttl : 64;
	out[9] = 1;
	ip_put16(out + 10, 0);
	memcpy(out + 12, e->src, 4);
	ip_put32(out + 16, isrc);
	ip_put16(out + 10, ip_csum(out, IP4_HDR_LEN));
	ic[0] = e->type;
	ic[1] = e->code;
	ip_put16(ic + 2, 0);
	if (e->type == ICMP4_DEST_UNREACH && e->code == ICMP4_CODE_FRAG_NEEDED)
		ip_put32(ic + 4, e->param & 0xffff); /* RFC 1191: next-hop MTU, low 16 bits */
	else if (e->type == ICMP4_PARAM_PROBLEM)
		ip_put32(ic + 4, (e->param & 0xff) << 24); /* pointer */
	else
		ip_put32(ic + 4, 0);
	ip_put16(ic + 2, ip_csum(ic, 8 + quote));
	*out_len = total;
	return ICMP_OK;
}

enum icmp_reason icmp6_error(const struct icmp_err *e, const uint8_t *inv, size_t inv_len,
			     uint8_t *out, size_t cap, size_t *out_len)
{
	struct ip6_info info;
	size_t quote, total;
	bool pmtu, mcast_ok;

	if (e->type != ICMP6_DEST_UNREACH && e->type != ICMP6_PACKET_TOO_BIG &&
	    e->type != ICMP6_TIME_EXCEEDED && e->type != ICMP6_PARAM_PROBLEM)
		return ICMP_BAD_TYPE;
	if (inv_len < IP6_HDR_LEN || inv[0] >> 4 != 6)
		return ICMP_INVOKING_MALFORMED;
	quote = IP6_HDR_LEN + (size_t)ip_be16(inv + 4);
	if (quote == IP6_HDR_LEN || quote > inv_len) /* jumbogram or cut: quote what we have */
		quote = inv_len;
	pmtu = e->type == ICMP6_PACKET_TOO_BIG;
	mcast_ok = pmtu || (e->type == ICMP6_PARAM_PROBLEM && e->code == 2);

	/* Walk the chain as far as the packet lets us: an unparsable chain does not make
	 * the packet an ICMPv6 error (Linux sends in that case too). */
	if (ip6_validate(inv, quote, &info) == IP_OK) {
		bool have_l4 = !info.is_frag || info.frag_first;

		if (info.is_frag && !info.frag_first && !pmtu)
			return ICMP_NOT_FOR_FRAGMENT;
		if (have_l4 && info.proto == 58 && info.l4_off < quote) {
			uint8_t t = inv[info.l4_off];

			if (t < 128 || t == 137)
				return ICMP_NOT_FOR_ICMP_ERROR;
		}
	}
	if ((ip6_is_multicast(inv + 24) || e->ll_multicast) && !mcast_ok)
		return ICMP_NOT_FOR_MULTICAST;
	{
		const uint8_t *s = inv + 8;
		static const uint8_t v4m[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		static const uint8_t lo[16] = { [15] = 1 };

		if (ip6_is_unspecified(s) || ip6_is_multicast(s) || !memcmp(s, lo, 16) ||
		    !memcmp(s, v4m, 12))
			return ICMP_NOT_FOR_MARTIAN_SRC;
	}

	if (quote > ICMP6_ERR_MAX - IP6_HDR_LEN - 8)
		quote = ICMP6_ERR_MAX - IP6_HDR_LEN - 8;
	if (cap < IP6_HDR_LEN + 8 + (quote < IP6_HDR_LEN + 8 ? quote : IP6_HDR_LEN + 8))
		return ICMP_NO_SPACE;
	if (quote > cap - IP6_HDR_LEN - 8)
		quote = cap - IP6_HDR_LEN - 8;
	total = IP6_HDR_LEN + 8 + quote;

	uint8_t *ic = out + IP6_HDR_LEN;
	memmove(ic + 8, inv, quote); /* first: out may alias inv's buffer */
	ip_put32(out, 0x60000000u);
	ip_put16(out + 4, (uint16_t)(8 + quote));
	out[6] = 58;
	out[7] = e->ttl ? e->ttl : 64;
	memcpy(out + 8, e->src, 16);
	memcpy(out + 24, ic + 8 + 8, 16); /* invoking source, now inside the quote */
	ic[0] = e->type;
	ic[1] = e->code;
	ip_put16(ic + 2, 0);
	ip_put32(ic + 4,
		 e->type == ICMP6_DEST_UNREACH || e->type == ICMP6_TIME_EXCEEDED ? 0 : e->param);
	uint64_t s = ip6_pseudo_sum(out + 8, out + 24, (uint32_t)(8 + quote), 58);
	ip_put16(ic + 2, (uint16_t)~ip_csum_fold(ip_csum_add(s, ic, 8 + quote)));
	*out_len = total;
	return ICMP_OK;
}

int icmp_rl_init(struct icmp_ratelimit *rl, struct icmp_rl_bucket *storage, size_t n,
		 const struct icmp_rl_cfg *cfg)
{
	if (!n || (n & (n - 1)) || n > (1u << 30) || !cfg->per_dst_rate || !cfg->per_dst_burst ||
	    (cfg->total_rate && !cfg->total_burst) || cfg->v4_prefix_len > 32 ||
	    cfg->v6_prefix_len > 128)
		return -EINVAL;
	memset(storage, 0, n * sizeof(*storage));
	memset(rl, 0, sizeof(*rl));
	rl->b = storage;
	rl->mask = (uint32_t)(n - 1);
	rl->cfg = *cfg;
	rl->cost_ns = 1000000000ull / cfg->per_dst_rate;
	rl->burst_ns = rl->cost_ns * cfg->per_dst_burst;
	if (cfg->total_rate) {
		rl->g_cost_ns = 1000000000ull / cfg->total_rate;
		rl->g_burst_ns = rl->g_cost_ns * cfg->total_burst;
	}
	return 0;
}

static bool take(struct icmp_rl_bucket *b, uint64_t now, uint64_t cost, uint64_t burst)
{
	uint64_t credit = b->credit_ns;

	if (now > b->stamp_ns) {
		uint64_t add = now - b->stamp_ns;

		credit = add > burst - credit ? burst : credit + add;
	}
	b->stamp_ns = now > b->stamp_ns ? now : b->stamp_ns;
	if (credit < cost) {
		b->credit_ns = credit;
		return false;
	}
	b->credit_ns = credit - cost;
	return true;
}

bool icmp_rl_allow(struct icmp_ratelimit *rl, int family, const uint8_t *dst, uint8_t type,
		   uint8_t code, uint64_t now_ns)
{
	uint8_t key[16] = { 0 };
	unsigned bits, n;
	uint32_t h = rl->cfg.seed ^ 0x9e3779b9u;

	if (rl->cfg.exempt_pmtu &&
	    ((family == AF_INET && type == ICMP4_DEST_UNREACH && code == ICMP4_CODE_FRAG_NEEDED) ||
	     (family == AF_INET6 && type == ICMP6_PACKET_TOO_BIG)))
		return true;
	n = family == AF_INET ? 4 : 16;
	bits = family == AF_INET ? rl->cfg.v4_prefix_len : rl->cfg.v6_prefix_len;
	memcpy(key, dst, n);
	for (unsigned i = 0; i < n; i++) {
		unsigned keep = bits > i * 8 ? bits - i * 8 : 0;

		if (keep < 8)
			key[i] &= (uint8_t)(0xff00u >> keep);
	}
	for (unsigned i = 0; i < n; i++) {
		h ^= key[i];
		h *= 0x01000193u; /* FNV-1a */
	}
	h ^= h >> 15;
	h *= 0x2c1b3c6du;
	h ^= h >> 12;
	/* Per destination first, so a destination over its limit does not drain the
	 * global bucket for everyone else. */
	if (!take(&rl->b[h & rl->mask], now_ns, rl->cost_ns, rl->burst_ns))
		return false;
	return !rl->g_cost_ns || take(&rl->global, now_ns, rl->g_cost_ns, rl->g_burst_ns);
}
