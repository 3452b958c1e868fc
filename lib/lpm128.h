/*
 * lpm128: longest-prefix match on 128-bit keys (GIDs, IPv6 addresses), built for
 * lock-free readers and one writer.
 *
 * Structure: a multibit trie with a fixed stride of 8 bits (at most 16 levels), whose
 * nodes are compressed the poptrie way (Asai & Ohara, SIGCOMM 2015): a node does not
 * hold 256 slots but two 256-bit vectors and two dense arrays:
 *   childvec  bit s set: slot s has a child node; the child is
 *             children[popcount(childvec below s)]
 *   leafvec   bit s set: a new run of equal leaf values starts at slot s (bit 0 is
 *             always set); the value of slot s is leaves[popcount(leafvec up to s) - 1]
 * Prefixes that end inside a node are expanded over the slots they cover (controlled
 * prefix expansion), then runs of equal values are stored once. A node costs 80 octets
 * plus 8 per child and 4 per leaf run, so memory follows the number of prefixes (each
 * prefix adds at most one node per level it crosses), not 2^stride per node.
 * A lookup is at most 16 steps of: test a bit, one popcount for the leaf, one for the
 * child; no branches on prefix lengths, no backtracking (the best value found on the
 * way down is kept).
 *
 * Concurrency (RCU): nodes are immutable once published. The writer copies the nodes on
 * the path it changes (path copying), builds the new path bottom-up and publishes the
 * new root with a release store; a reader loads the root once (acquire) and sees either
 * the whole old trie or the whole new one. Replaced nodes go to the free function given
 * at create time (for example a call_rcu/defer_rcu wrapper); with none, they are freed
 * at once, which is only right when there are no concurrent readers.
 * Threads: lpm128_lookup from any number of threads; every other call from one writer
 * thread at a time.
 *
 * Values are non-zero 32-bit numbers chosen by the caller (an index into its next-hop
 * table); 0 means "no match".
 */
#ifndef IBGW_LIB_LPM128_H
#define IBGW_LIB_LPM128_H

#include <stddef.h>
#include <stdint.h>

#define LPM128_STRIDE 8
#define LPM128_LEVELS (128 / LPM128_STRIDE)

/* Private to lpm128.c except for the inline lookup below. Immutable once published. */
struct lpm128_pfx {
	uint8_t bits; /* the prefix's bits inside this node, right-aligned */
	uint8_t len;  /* 0..8 bits inside this node */
	uint32_t value;
};
struct lpm128_node {
	uint64_t childvec[4];
	uint64_t leafvec[4];
	uint16_t nchild, nleaf, npfx;
	struct lpm128_node **children; /* nchild entries */
	uint32_t *leaves;              /* nleaf entries */
	struct lpm128_pfx *pfx;        /* npfx prefixes ending in this node (writer only) */
};

typedef void (*lpm128_free_fn)(void *ctx, void *ptr);

struct lpm128 {
	struct lpm128_node *root; /* published with a release store; NULL when empty */
	lpm128_free_fn free_fn;
	void *free_ctx;
	size_t nprefix, nnode, bytes;
};

/* Create an empty table. free_fn (may be NULL) receives each replaced allocation. */
int lpm128_new(struct lpm128 **out, lpm128_free_fn free_fn, void *free_ctx);
/* Free the table and every node at once (no readers may remain). */
void lpm128_free(struct lpm128 *t);

/* Add or replace prefix/len -> value (value != 0, len 0..128). Bits of key beyond len
 * are ignored. Returns 0, -EINVAL or -ENOMEM (the table is then unchanged). */
int lpm128_add(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value);
/* Remove prefix/len. Returns 0, -ENOENT, -EINVAL or -ENOMEM. */
int lpm128_del(struct lpm128 *t, const uint8_t key[16], unsigned len);
/* The value stored for exactly prefix/len, or 0. Writer side. */
uint32_t lpm128_get(const struct lpm128 *t, const uint8_t key[16], unsigned len);

struct lpm128_stats {
	size_t prefixes, nodes, bytes;
};
void lpm128_stats(const struct lpm128 *t, struct lpm128_stats *out);

static inline unsigned lpm128_rank_(const uint64_t vec[4], unsigned s)
{
	/* Number of set bits in vec strictly below bit s. */
	unsigned w = s >> 6, n = 0;

	for (unsigned i = 0; i < w; i++)
		n += (unsigned)__builtin_popcountll(vec[i]);
	if (s & 63)
		n += (unsigned)__builtin_popcountll(vec[w] & ((1ull << (s & 63)) - 1));
	return n;
}

/* Longest-prefix match: the value of the longest prefix covering key, or 0. Lock-free;
 * call inside an RCU read-side section when a writer may free nodes. */
static inline uint32_t lpm128_lookup(const struct lpm128 *t, const uint8_t key[16])
{
	const struct lpm128_node *n = __atomic_load_n(&t->root, __ATOMIC_ACQUIRE);
	uint32_t best = 0;

	for (unsigned d = 0; n && d < LPM128_LEVELS; d++) {
		unsigned s = key[d];
		uint64_t bit = 1ull << (s & 63);
		uint32_t v = n->leaves[lpm128_rank_(n->leafvec, s + 1) - 1];

		if (v)
			best = v;
		if (!(n->childvec[s >> 6] & bit))
			break;
		n = n->children[lpm128_rank_(n->childvec, s)];
	}
	return best;
}

#endif
