/*
 * lpm4: IPv4 longest-prefix match for the forwarding workers (DIR-24-8).
 *
 * Two tables of 32-bit entries, both backed by transparent huge pages where the kernel
 * allows it. tbl24 has one entry per /24 (2^24 entries, 64 MiB); an entry holds either
 * the answer for the whole /24 or, when a prefix longer than /24 lives inside it, the
 * number of a 256-entry group in tbl8 that answers per last octet. A lookup is one
 * load, plus a second one for the (rare) addresses under a longer-than-/24 prefix.
 *
 * Entry layout: bit 31 "group" (tbl24 only: bits 0..23 are the group number), bits
 * 25..30 the length of the prefix that set the entry (writer bookkeeping, readers mask
 * it off), bits 0..24 the value. Values are caller-chosen, 1..LPM4_VALUE_MAX (an index
 * into a next-hop table); 0 means "no route".
 *
 * Concurrency (RCU). Readers never lock and never write. The single writer changes the
 * tables only by 32-bit atomic stores of whole entries, so every lookup sees each entry
 * either before or after a store: the old answer or the new one, never a mix. A new
 * group is filled before the tbl24 entry that points to it is published (release
 * store; readers load with acquire). A group that falls out of use is handed to the
 * defer function given at create time and reused only when that calls back, which it
 * must do after an RCU grace period (for example through liburcu's call_rcu, or a
 * synchronize_rcu followed by the call). The callback may run on any thread: it only
 * pushes the group onto a lock-free list that the writer drains. Without a defer
 * function groups are reused at once, which is only right with no concurrent readers.
 *
 * Threads: lpm4_lookup and lpm4_lookup_bulk from any number of reader threads (inside
 * an RCU read-side section when a writer runs); every other call from one writer
 * thread at a time (in ibgwd: the control thread).
 */
#ifndef IBGW_TABLE_LPM4_H
#define IBGW_TABLE_LPM4_H

#include <stddef.h>
#include <stdint.h>

#define LPM4_VALUE_MAX  ((1u << 25) - 1)
#define LPM4_MAX_GROUPS (1u << 24)
#define LPM4_ENT_GROUP  (1u << 31)
#define LPM4_ENT_VALUE  LPM4_VALUE_MAX

/* Run fn(arg) after a grace period, on any thread. */
typedef void (*lpm4_defer_fn)(void *ctx, void (*fn)(void *arg), void *arg);

struct lpm4_config {
	uint32_t max_groups; /* tbl8 groups (1 KiB each, reserved, touched on use); 0: 65536 */
	lpm4_defer_fn defer; /* NULL: reuse groups at once (no concurrent readers) */
	void *defer_ctx;
	int small_pages; /* do not ask for transparent huge pages (tbl24 and tbl8) */
};

struct lpm4_writer; /* private to lpm4.c */

#define LPM4_TBL24_ENTRIES (1u << 24)

/* Readers use tbl only; it stays at the same address for the table's life. tbl holds
 * tbl24 (LPM4_TBL24_ENTRIES entries) and then the tbl8 groups (256 entries each), in
 * the same mapping as these fields: a lookup computes both tables' addresses from the
 * table pointer. With pointer fields instead, a caller storing its results through a
 * uint32_t pointer makes the compiler reload the field after every store (we build with
 * -fno-strict-aliasing), and lpm_bench's single-lookup loop measured slower for it
 * (bench/README.md). */
struct lpm4 {
	struct lpm4_writer *w;
	_Alignas(64) uint32_t tbl[];
};

int lpm4_create(struct lpm4 **out, const struct lpm4_config *cfg);
/* Free at once: no reader may still use the table. */
void lpm4_free(struct lpm4 *t);

/* Add or replace addr/len -> value (addr in host byte order, bits beyond len ignored,
 * value 1..LPM4_VALUE_MAX). Returns 0, -EINVAL, -ENOSPC (no free group) or -ENOMEM;
 * on error the table is unchanged. */
int lpm4_add(struct lpm4 *t, uint32_t addr, unsigned len, uint32_t value);
/* Remove addr/len; addresses under it fall back to the longest prefix covering it.
 * Returns 0, -ENOENT or -EINVAL. */
int lpm4_del(struct lpm4 *t, uint32_t addr, unsigned len);
/* The value stored for exactly addr/len, or 0 (writer side). */
uint32_t lpm4_get(const struct lpm4 *t, uint32_t addr, unsigned len);
/* Remove every prefix (writer; groups are retired through the defer function). */
void lpm4_clear(struct lpm4 *t);

struct lpm4_stats {
	size_t prefixes;
	uint32_t groups_used;    /* tbl8 groups in use */
	uint32_t groups_pending; /* retired, waiting for a grace period */
	uint32_t groups_max;
	size_t reader_bytes;   /* what lookups touch: tbl24 + groups in use and pending */
	size_t writer_bytes;   /* the writer's prefix index and group bookkeeping */
	size_t reserved_bytes; /* address space reserved (tbl24 + every tbl8 group + writer) */
};
void lpm4_stats(const struct lpm4 *t, struct lpm4_stats *out);

/* The place of addr's entry in the group that tbl24 entry e names, counted from the
 * first group (the groups follow tbl24 in tbl). */
static inline uint32_t lpm4_group_slot(uint32_t e, uint32_t addr)
{
	return (e & 0xffffffu) << 8 | (addr & 0xff);
}

/* Longest-prefix match of addr (host byte order): its value, or 0. */
static inline uint32_t lpm4_lookup(const struct lpm4 *t, uint32_t addr)
{
	uint32_t e = __atomic_load_n(&t->tbl[addr >> 8], __ATOMIC_ACQUIRE);

	if (__builtin_expect((e & LPM4_ENT_GROUP) != 0, 0))
		e = __atomic_load_n(&t->tbl[LPM4_TBL24_ENTRIES + (size_t)lpm4_group_slot(e, addr)],
				    __ATOMIC_ACQUIRE);
	return e & LPM4_ENT_VALUE;
}

/* values[i] = lpm4_lookup(t, addrs[i]) for i < n, in two passes (tbl24 entries, then
 * the group entries they name), so that the cache misses of the keys overlap. */
void lpm4_lookup_bulk(const struct lpm4 *t, const uint32_t *addrs, uint32_t *values, unsigned n);

#endif
