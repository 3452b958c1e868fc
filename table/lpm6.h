/*
 * lpm6: IPv6 longest-prefix match for the forwarding workers, the same API shape as
 * lpm4 on top of lib/lpm128 (a poptrie-compressed multibit trie with 8-bit strides,
 * updated by path copying; see lib/lpm128.h for the structure).
 *
 * Values are caller-chosen, 1..LPM6_VALUE_MAX (an index into a next-hop table); 0 means
 * "no route". Addresses are 16 octets in network order.
 *
 * Concurrency (RCU): lpm128 publishes each change as a new root (release store) and
 * hands every replaced node to lpm6, which passes it to the defer function given at
 * create time together with a function returning it to lpm128's node arena: the node
 * is freed when the defer function calls back, which it must do after an RCU grace
 * period (liburcu's call_rcu, or synchronize_rcu then the call). Without a defer
 * function nodes are freed at once, which is only right with no concurrent readers.
 *
 * Threads: lpm6_lookup and lpm6_lookup_bulk from any number of reader threads (inside an
 * RCU read-side section when a writer runs); every other call from one writer thread at
 * a time (in ibgwd: the control thread).
 */
#ifndef IBGW_TABLE_LPM6_H
#define IBGW_TABLE_LPM6_H

#include <stddef.h>
#include <stdint.h>

#include "table/lpm4.h"
#include "lib/lpm128.h"

#define LPM6_VALUE_MAX UINT32_MAX

struct lpm6_config {
	lpm4_defer_fn defer; /* same contract as lpm4's; NULL: free at once */
	void *defer_ctx;
};

struct lpm6 {
	struct lpm128 *trie; /* readers: lookups only */
	lpm4_defer_fn defer;
	void *defer_ctx;
};

int lpm6_create(struct lpm6 **out, const struct lpm6_config *cfg);
/* Free at once: no reader may still use the table. */
void lpm6_free(struct lpm6 *t);

/* Add or replace addr/len -> value (bits beyond len ignored). Returns 0, -EINVAL or
 * -ENOMEM (table unchanged). */
int lpm6_add(struct lpm6 *t, const uint8_t addr[16], unsigned len, uint32_t value);
/* Remove addr/len (addresses under it fall back to the covering prefix). Returns 0,
 * -ENOENT, -EINVAL or -ENOMEM. */
int lpm6_del(struct lpm6 *t, const uint8_t addr[16], unsigned len);
/* The value stored for exactly addr/len, or 0 (writer side). */
uint32_t lpm6_get(const struct lpm6 *t, const uint8_t addr[16], unsigned len);

struct lpm6_stats {
	size_t prefixes, nodes;
	size_t reader_bytes; /* the published trie */
	size_t arena_bytes;  /* lib/lpm128's node arena (the process's, all tables) */
};
void lpm6_stats(const struct lpm6 *t, struct lpm6_stats *out);

/* Longest-prefix match of addr: its value, or 0. */
static inline uint32_t lpm6_lookup(const struct lpm6 *t, const uint8_t addr[16])
{
	return lpm128_lookup(t->trie, addr);
}

/* values[i] = lpm6_lookup(t, addrs[i]) for i < n. */
void lpm6_lookup_bulk(const struct lpm6 *t, const uint8_t (*addrs)[16], uint32_t *values,
		      unsigned n);

#endif
