/*
 * lpm6: lpm4's API shape for IPv6, on lib/lpm128. The only logic of its own is the
 * bridge from lpm128's free function to the RCU defer function, and the address
 * masking lpm128 leaves to its callers.
 */
#include "table/lpm6.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void free_node(void *ptr)
{
	lpm128_mem_free(ptr);
}

static void defer_node(void *ctx, void *ptr)
{
	struct lpm6 *t = ctx;

	t->defer(t->defer_ctx, free_node, ptr);
}

int lpm6_create(struct lpm6 **out, const struct lpm6_config *cfg)
{
	struct lpm6 *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->defer = cfg ? cfg->defer : NULL;
	t->defer_ctx = cfg ? cfg->defer_ctx : NULL;
	rc = lpm128_new(&t->trie, t->defer ? defer_node : NULL, t);
	if (rc) {
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void lpm6_free(struct lpm6 *t)
{
	if (!t)
		return;
	lpm128_free(t->trie);
	free(t);
}

static void masked(const uint8_t addr[16], unsigned len, uint8_t out[16])
{
	memcpy(out, addr, 16);
	for (unsigned i = 0; i < 16; i++) {
		unsigned keep = len > i * 8 ? len - i * 8 : 0;

		if (keep < 8)
			out[i] &= (uint8_t)(0xff00u >> keep);
	}
}

int lpm6_add(struct lpm6 *t, const uint8_t addr[16], unsigned len, uint32_t value)
{
	uint8_t k[16];

	if (len > 128 || value == 0)
		return -EINVAL;
	masked(addr, len, k);
	return lpm128_add(t->trie, k, len, value);
}

int lpm6_del(struct lpm6 *t, const uint8_t addr[16], unsigned len)
{
	uint8_t k[16];

	if (len > 128)
		return -EINVAL;
	masked(addr, len, k);
	return lpm128_del(t->trie, k, len);
}

uint32_t lpm6_get(const struct lpm6 *t, const uint8_t addr[16], unsigned len)
{
	uint8_t k[16];

	if (len > 128)
		return 0;
	masked(addr, len, k);
	return lpm128_get(t->trie, k, len);
}

void lpm6_stats(const struct lpm6 *t, struct lpm6_stats *out)
{
	struct lpm128_stats s;

	lpm128_stats(t->trie, &s);
	out->prefixes = s.prefixes;
	out->nodes = s.nodes;
	out->reader_bytes = s.bytes;
	out->arena_bytes = s.arena_bytes;
}

void lpm6_lookup_bulk(const struct lpm6 *t, const uint8_t (*addrs)[16], uint32_t *values,
		      unsigned n)
{
	lpm128_lookup_bulk(t->trie, addrs, values, n);
}
