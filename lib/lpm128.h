/*
 * lpm128: longest-prefix match on 128-bit keys (GIDs, IPv6 addresses), built for
 * lock-free readers and one writer.
 *
 * Structure (poptrie, Asai & Ohara, SIGCOMM 2015, with DIR-16 "direct pointing"):
 *   dir       2^16 entries indexed by the key's first 16 bits; an entry is either a
 *             leaf (the answer for the whole /16: value << 32 | 1) or a pointer to the
 *             node holding bits 16..23.
 *   nodes     multibit trie with 8-bit strides below (at most 14 levels). A node does
 *             not hold 256 slots but two 256-bit vectors and two dense arrays:
 *     childvec  bit s set: slot s has a child; the children of a node are stored next
 *               to each other (one block), the child is children[rank(childvec, s)]
 *     leafvec   bit s set: a run of equal leaf values starts at slot s; the value of
 *               slot s is leaves[rank(leafvec, s + 1) - 1]: the longest prefix ending
 *               in this node that covers s (0: none)
 *     def       the value of the longest prefix ending in the parent (or, under dir,
 *               of length <= 16) that covers this whole node; 0: none
 *   A node is 128 octets, two cache lines: the first holds what every level reads
 *   (childvec, per-word popcount bases, def, the array pointers), the second what only
 *   the last level reads (leafvec, and up to LPM128_INLINE leaf runs inline, so most
 *   last levels need no third line). Memory: 128 octets per node, 8 per prefix (the
 *   writer's list) and 4 per leaf run beyond LPM128_INLINE, plus 512 KiB for dir and
 *   512 KiB for the writer's table of prefixes of length <= 16. Nodes and lists come
 *   from one arena per process on transparent huge pages (lpm128.c), so that the
 *   loads of a walk rarely miss the TLB.
 *
 * Lookup: one dir load; then per level one cache line (test a bit, one popcount, take
 * def when non-zero); at the last level one leaf. No backtracking: the best value is
 * carried down (leaves are not pushed into child nodes, so an update only touches the
 * path plus the direct children of the changed node).
 *
 * Concurrency (RCU): nodes are immutable once published. The writer copies the path it
 * changes (each node's block of siblings, bottom-up) and publishes it with one release
 * store of the dir entry; a prefix of length <= 16 stores each dir entry it covers
 * (one per /16, each a whole 64-bit word). A lookup reads one dir entry (acquire), so
 * it sees the trie either before or after any update. Replaced allocations go to the
 * free function given at create time (for example a call_rcu/defer_rcu wrapper), which
 * hands them to lpm128_mem_free after the grace period; with none, they are released
 * at once, which is only right when there are no concurrent readers.
 * Threads: lpm128_lookup and lpm128_lookup_bulk from any number of threads; every other
 * call from one writer thread at a time.
 *
 * Values are non-zero 32-bit numbers chosen by the caller (an index into its next-hop
 * table); 0 means "no match".
 */
#ifndef IBGW_LIB_LPM128_H
#define IBGW_LIB_LPM128_H

#include <stddef.h>
#include <stdint.h>

#define LPM128_DIR_BITS 16
#define LPM128_STRIDE   8
#define LPM128_LEVELS   ((128 - LPM128_DIR_BITS) / LPM128_STRIDE) /* node levels */
#define LPM128_INLINE   5 /* leaf runs stored inside the node */

/* Private to lpm128.c except for the inline lookup below. Immutable once published. */
struct lpm128_pfx {
	uint8_t bits; /* the prefix's bits inside this node, right-aligned */
	uint8_t len;  /* 1..8 bits inside this node */
	uint32_t value;
};
struct lpm128_node {
	/* Cache line 0: read at every level. */
	uint64_t childvec[4];
	const struct lpm128_node *children; /* nchild nodes, in slot order */
	const uint32_t *leaves;             /* nleaf runs: inl, or after pfx[] */
	uint32_t def;
	uint8_t cbase[4]; /* children in the words below word w */
	uint16_t nchild, nleaf, npfx, pad_;
	/* Cache line 1: read at the last level. */
	uint64_t leafvec[4];
	uint8_t lbase[4]; /* leaf runs starting in the words below word w */
	uint32_t inl[LPM128_INLINE];
	struct lpm128_pfx *pfx; /* writer: prefixes ending here; one allocation with the
				   leaves when nleaf > LPM128_INLINE */
} __attribute__((aligned(64)));

typedef void (*lpm128_free_fn)(void *ctx, void *ptr);

struct lpm128 {
	uint64_t *dir;  /* 2^LPM128_DIR_BITS entries, each stored with a release store */
	uint32_t *sval; /* writer: values of the prefixes of length 0..16, by length */
	lpm128_free_fn free_fn;
	void *free_ctx;
	size_t nprefix, nnode, bytes;
};

/* Create an empty table. free_fn (may be NULL) receives each replaced allocation, which
 * it must pass to lpm128_mem_free once no reader can hold it (after a grace period);
 * NULL: lpm128 releases them at once. */
int lpm128_new(struct lpm128 **out, lpm128_free_fn free_fn, void *free_ctx);
/* Give back an allocation that free_fn received. Any thread. */
void lpm128_mem_free(void *ptr);
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
	size_t prefixes, nodes;
	size_t bytes;       /* this table: dir, writer tables, nodes and lists in use */
	size_t arena_bytes; /* the process's node arena, all tables: slabs carved so far
			       (in use, free, or waiting for a grace period) */
};
void lpm128_stats(const struct lpm128 *t, struct lpm128_stats *out);

/* values[i] = lpm128_lookup(t, keys[i]) for i < n. Up to 64 keys walk together, level
 * by level, so that their cache misses overlap; any n. */
void lpm128_lookup_bulk(const struct lpm128 *t, const uint8_t (*keys)[16], uint32_t *values,
			unsigned n);

/* Longest-prefix match: the value of the longest prefix covering key, or 0. Lock-free;
 * call inside an RCU read-side section when a writer may free nodes. */
static inline uint32_t lpm128_lookup(const struct lpm128 *t, const uint8_t key[16])
{
	uint64_t e = __atomic_load_n(&t->dir[(unsigned)key[0] << 8 | key[1]], __ATOMIC_ACQUIRE);
	const struct lpm128_node *n;
	uint32_t best = 0, v;
	unsigned d = 2, s, w, b;

	if (e & 1)
		return (uint32_t)(e >> 32);
	n = (const struct lpm128_node *)(uintptr_t)e;
	for (;;) {
		uint64_t cv;

		s = key[d];
		w = s >> 6;
		b = s & 63;
		cv = n->childvec[w];
		best = n->def ? n->def : best;
		if (!(cv >> b & 1))
			break;
		n = &n->children[n->cbase[w] +
				 (unsigned)__builtin_popcountll(cv & ((1ull << b) - 1))];
		d++;
	}
	v = n->leaves[n->lbase[w] +
		      (unsigned)__builtin_popcountll(n->leafvec[w] & ((2ull << b) - 1)) - 1];
	return v ? v : best;
}

#endif
