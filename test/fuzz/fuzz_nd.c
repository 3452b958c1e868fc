/*
 * libFuzzer harness for pkt/nd: parse as Ethernet and as IPoIB; every pointer handed
 * out must lie inside the input; an NS that parses gets an NA reply that parses too.
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

static void inside(const uint8_t *p, size_t n, const uint8_t *data, size_t size)
{
	if (p)
		check(p >= data && p + n <= data + size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t me[20] = { 0x80, 0, 0, 1, 0xfe, 0x80, [19] = 1 };
	uint8_t out[ND_MAX_LEN];
	struct nd_msg m, r;

	for (int l = 0; l < 2; l++) {
		enum nd_link link = l ? ND_LINK_IB : ND_LINK_ETHER;

		if (nd_parse(data, size, link, &m) != ND_OK)
			continue;
		inside(m.sllao, nd_lladdr_len(link), data, size);
		inside(m.tllao, nd_lladdr_len(link), data, size);
		inside(m.target, 16, data, size);
		inside(m.redirect_dst, 16, data, size);
		check(m.n_prefix <= ND_MAX_PREFIXES);
		for (int i = 0; i < m.n_prefix; i++)
			inside(m.prefix[i].prefix, 16, data, size);
		if (m.type == ND_NS) {
			size_t n = nd_build_na_reply(out, sizeof(out), link, &m, m.target, 0, me);

			check(n == ND_MAX_LEN - (l ? 0 : 16));
			check(nd_parse(out, n, link, &r) == ND_OK);
			check(r.type == ND_NA && memcmp(r.target, m.target, 16) == 0);
		}
	}
	return 0;
}
