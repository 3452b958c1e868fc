/*
 * libFuzzer harness for the router side of pkt/nd: Router Solicitations and
 * Advertisements parsed as Ethernet and as IPoIB. An RS that parses gets the answer
 * the gateway would send (unicast to a solicitor with an address, else to all-nodes)
 * and that answer must parse back to what was built; an RA that parses is built again
 * from its parsed fields (what a router relaying its own settings would send) and must
 * parse back equal; the RA timing helpers stay inside RFC 4861's bounds for any input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pkt/nd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond)
{
	if (!cond)
		abort();
}

static uint32_t word(const uint8_t *data, size_t size, size_t at)
{
	uint32_t w = 0;

	for (size_t i = 0; i < 4; i++)
		w = w << 8 | (at + i < size ? data[at + i] : 0);
	return w;
}

static void same(const struct nd_msg *a, const struct nd_ra_params *p, unsigned n_prefix)
{
	check(a->type == ND_RA);
	check(a->ra_cur_hop_limit == p->cur_hop_limit);
	check(a->flags == p->flags);
	check(a->ra_lifetime == p->router_lifetime);
	check(a->ra_reachable == p->reachable_ms && a->ra_retrans == p->retrans_ms);
	check(a->has_mtu == (p->mtu != 0) && (!p->mtu || a->mtu == p->mtu));
	check(a->n_prefix_seen == n_prefix);
	for (unsigned i = 0; i < a->n_prefix; i++) {
		check(a->prefix[i].len == p->prefix[i].len);
		check(a->prefix[i].valid == p->prefix[i].valid);
		check(a->prefix[i].preferred == p->prefix[i].preferred);
		check((a->prefix[i].flags & 0xc0) == (p->prefix[i].flags & 0xc0));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t ll[16] = { 0xfe, 0x80, [14] = 0x12, 0x34 };
	static const uint8_t me[20] = { 0x00, 0, 0, 0x48, 0xfe, 0x80, [19] = 1 };
	uint8_t out[ND_RA_MAX_LEN];
	struct nd_msg m, r;
	uint32_t w0 = word(data, size, 0), w1 = word(data, size, 4);
	uint64_t t;

	t = nd_ra_interval(w0 % 1800001, w1 % 1800001, w0 & 3, w1);
	check(t <= 1800000);
	check(t >= ((w0 % 1800001 <= w1 % 1800001) ? w0 % 1800001 : w1 % 1800001) ||
	      t == ND_MAX_INITIAL_RTR_ADVERT_INTERVAL);
	t = nd_ra_solicited(w0, w1 & 1, w1 >> 1, 0, w0 ^ w1);
	check(t >= w0 && (w1 & 1 ? 1 : t <= (uint64_t)w0 + ND_MAX_RA_DELAY_TIME));

	for (int l = 0; l < 2; l++) {
		enum nd_link link = l ? ND_LINK_IB : ND_LINK_ETHER;
		const uint8_t *lladdr = l ? me : me + 14;
		struct nd_ra_params p = { 0 };
		size_t n;

		if (nd_parse(data, size, link, &m) != ND_OK)
			continue;
		if (m.type == ND_RS) {
			const uint8_t *dst = ip6_is_unspecified(m.src) ? nd_all_nodes : m.src;
			struct nd_prefix px = { ll, 64, ND_PFX_ON_LINK | ND_PFX_AUTO, 86400,
						14400 };

			p = (struct nd_ra_params){ .cur_hop_limit = 64,
						   .router_lifetime = 1800,
						   .mtu = l ? 2044 : 1500,
						   .prefix = &px,
						   .n_prefix = 1 };
			n = nd_build_ra(out, sizeof(out), link, ll, dst, &p, lladdr);
			check(n == IP6_HDR_LEN + 16 + (l ? 24 : 8) + 8 + 32);
			check(nd_parse(out, n, link, &r) == ND_OK);
			same(&r, &p, 1);
			check(memcmp(r.dst, dst, 16) == 0);
			check(memcmp(r.sllao, lladdr, nd_lladdr_len(link)) == 0);
		} else if (m.type == ND_RA && m.n_prefix_seen <= ND_MAX_PREFIXES) {
			p = (struct nd_ra_params){ .cur_hop_limit = m.ra_cur_hop_limit,
						   .flags = (uint8_t)(m.flags & (ND_RA_MANAGED |
										 ND_RA_OTHER)),
						   .router_lifetime = m.ra_lifetime,
						   .reachable_ms = m.ra_reachable,
						   .retrans_ms = m.ra_retrans,
						   .mtu = m.has_mtu ? m.mtu : 0,
						   .prefix = m.prefix,
						   .n_prefix = m.n_prefix };
			n = nd_build_ra(out, sizeof(out), link, m.src, m.dst, &p, m.sllao);
			check(n > 0);
			check(nd_parse(out, n, link, &r) == ND_OK);
			same(&r, &p, m.n_prefix);
		}
	}
	return 0;
}
