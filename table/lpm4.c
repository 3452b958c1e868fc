/*
 * lpm4: the writer side of the DIR-24-8 table (see lpm4.h).
 *
 * Every entry records the length of the prefix that set it, so an insert overwrites only
 * entries set by prefixes no longer than itself, and a delete rewrites only the entries
 * it set (those of its own length inside its range) with the longest prefix that covers
 * it. The writer finds that cover in its prefix index: an open-addressing hash of
 * (address, length) -> value, probed from length - 1 down, skipping lengths with no
 * prefix. A group counts the longer-than-/24 prefixes inside it; when the last one goes,
 * all its entries hold the /24's answer again, which is stored back into tbl24 before
 * the group is retired.
 */
#include "table/lpm4.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* LeakSanitizer scans malloc's blocks, not our mapping: the header's pointer to the
 * writer (and what the writer allocated) is shown to it as a root region. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LPM4_LSAN_ROOT 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(LPM4_LSAN_ROOT)
#define LPM4_LSAN_ROOT 1
#endif
#ifdef LPM4_LSAN_ROOT
#include <sanitizer/lsan_interface.h>
#endif

#define TBL24_ENTRIES LPM4_TBL24_ENTRIES
#define GROUP_SIZE    256u
#define NO_GROUP      UINT32_MAX
#define DEPTH_SHIFT   25

/* The groups follow tbl24 in the table's mapping. */
static inline uint32_t *tbl8(const struct lpm4 *t)
{
	return (uint32_t *)t->tbl + TBL24_ENTRIES;
}

/* One per group, stable address: what the defer callback gets back. */
struct group_meta {
	struct lpm4_writer *w;
	uint32_t id;
	uint32_t next;  /* link on the returned list */
	uint32_t nlong; /* prefixes longer than /24 inside the group */
};

/* Prefix index slot: value << 39 | ((addr << 6 | len) + 1); 0: empty. */
#define SLOT_KEY_BITS 39
#define SLOT_KEY(s)   ((s) & ((1ull << SLOT_KEY_BITS) - 1))
#define SLOT_VAL(s)   ((uint32_t)((s) >> SLOT_KEY_BITS))

/* Writer-only state (control thread). */
struct lpm4_writer {
	uint32_t max_groups;
	lpm4_defer_fn defer;
	void *defer_ctx;
	struct group_meta *meta;
	uint32_t *free_ids; /* stack of free group ids */
	uint32_t nfree, used, pending;
	uint32_t returned; /* lock-free list head of groups back from a grace period */
	uint64_t *slots;
	size_t nslots, nprefix;
	size_t len_count[33];
};

static inline uint32_t ent(uint32_t value, unsigned len)
{
	return value | (uint32_t)len << DEPTH_SHIFT;
}

static inline unsigned ent_len(uint32_t e)
{
	return (e >> DEPTH_SHIFT) & 0x3f;
}

static inline void store(uint32_t *p, uint32_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline uint32_t mask(unsigned len)
{
	return len ? ~0u << (32 - len) : 0;
}

/* Prefix index. */

static uint64_t pfx_key(uint32_t addr, unsigned len)
{
	return ((uint64_t)addr << 6 | len) + 1;
}

static size_t pfx_hash(uint64_t key, size_t nslots)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & (nslots - 1);
}

static uint64_t *pfx_find(const struct lpm4_writer *w, uint32_t addr, unsigned len)
{
	uint64_t key = pfx_key(addr, len);

	for (size_t i = pfx_hash(key, w->nslots);; i = (i + 1) & (w->nslots - 1)) {
		if (SLOT_KEY(w->slots[i]) == key)
			return &w->slots[i];
		if (!w->slots[i])
			return NULL;
	}
}

static void pfx_put(uint64_t *slots, size_t nslots, uint64_t key, uint32_t value)
{
	size_t i = pfx_hash(key, nslots);

	while (slots[i])
		i = (i + 1) & (nslots - 1);
	slots[i] = (uint64_t)value << SLOT_KEY_BITS | key;
}

static int pfx_grow(struct lpm4_writer *w)
{
	size_t n = w->nslots * 2;
	uint64_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < w->nslots; i++)
		if (w->slots[i])
			pfx_put(s, n, SLOT_KEY(w->slots[i]), SLOT_VAL(w->slots[i]));
	free(w->slots);
	w->slots = s;
	w->nslots = n;
	return 0;
}

/* Remove a slot, shifting later members of its probe run back (no tombstones). */
static void pfx_remove(struct lpm4_writer *w, uint64_t *slot)
{
	size_t m = w->nslots - 1, i = (size_t)(slot - w->slots), j = i;

	for (;;) {
		size_t home;

		j = (j + 1) & m;
		if (!w->slots[j])
			break;
		home = pfx_hash(SLOT_KEY(w->slots[j]), w->nslots);
		/* Move j back to i unless its home lies cyclically in (i, j]. */
		if ((i <= j) ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		w->slots[i] = w->slots[j];
		i = j;
	}
	w->slots[i] = 0;
}

/* The longest prefix strictly shorter than len covering addr: entry value, or 0. */
static uint32_t cover_of(const struct lpm4_writer *w, uint32_t addr, unsigned len)
{
	for (unsigned l = len; l-- > 0;) {
		const uint64_t *s;

		if (!w->len_count[l])
			continue;
		s = pfx_find(w, addr & mask(l), l);
		if (s)
			return ent(SLOT_VAL(*s), l);
	}
	return 0;
}

/* Groups. */

static void group_returned(void *arg)
{
	struct group_meta *g = arg;
	struct lpm4_writer *w = g->w;
	uint32_t head = __atomic_load_n(&w->returned, __ATOMIC_RELAXED);

	do
		g->next = head;
	while (!__atomic_compare_exchange_n(&w->returned, &head, g->id, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

static void drain_returned(struct lpm4_writer *w)
{
	uint32_t id = __atomic_exchange_n(&w->returned, NO_GROUP, __ATOMIC_ACQUIRE);

	while (id != NO_GROUP) {
		w->free_ids[w->nfree++] = id;
		w->pending--;
		id = w->meta[id].next;
	}
}

static uint32_t group_alloc(struct lpm4_writer *w)
{
	if (!w->nfree)
		drain_returned(w);
	if (!w->nfree)
		return NO_GROUP;
	w->used++;
	return w->free_ids[--w->nfree];
}

static void group_retire(struct lpm4_writer *w, uint32_t id)
{
	w->used--;
	if (!w->defer) {
		w->free_ids[w->nfree++] = id;
		return;
	}
	w->pending++;
	w->defer(w->defer_ctx, group_returned, &w->meta[id]);
}

/* Entries of one group set from [lo, hi) by a prefix of length len. */
static void group_set(uint32_t *grp, unsigned lo, unsigned hi, uint32_t e, unsigned len)
{
	for (unsigned j = lo; j < hi; j++)
		if (ent_len(grp[j]) <= len)
			store(&grp[j], e);
}

/* Entries [lo, hi) that a deleted prefix of length len set go back to cover. */
static void group_unset(uint32_t *grp, unsigned lo, unsigned hi, unsigned len, uint32_t cover)
{
	for (unsigned j = lo; j < hi; j++)
		if (ent_len(grp[j]) == len && grp[j] != cover)
			store(&grp[j], cover);
}

int lpm4_add(struct lpm4 *t, uint32_t addr, unsigned len, uint32_t value)
{
	struct lpm4_writer *w = t->w;
	uint64_t *slot;
	uint32_t e = ent(value, len);
	bool fresh;

	if (len > 32 || value == 0 || value > LPM4_VALUE_MAX)
		return -EINVAL;
	addr &= mask(len);
	slot = pfx_find(w, addr, len);
	fresh = !slot;
	if (fresh && (w->nprefix + 1) * 2 > w->nslots && pfx_grow(w))
		return -ENOMEM;
	if (len <= 24) {
		uint32_t lo = addr >> 8, hi = lo + (1u << (24 - len));

		for (uint32_t i = lo; i < hi; i++) {
			uint32_t cur = t->tbl[i];

			if (cur & LPM4_ENT_GROUP)
				group_set(&tbl8(t)[(size_t)(cur & 0xffffff) << 8], 0, GROUP_SIZE, e,
					  len);
			else if (ent_len(cur) <= len)
				store(&t->tbl[i], e);
		}
	} else {
		uint32_t i = addr >> 8, cur = t->tbl[i], id;
		unsigned lo = addr & 0xff, hi = lo + (1u << (32 - len));
		uint32_t *grp;

		if (cur & LPM4_ENT_GROUP) {
			id = cur & 0xffffff;
			grp = &tbl8(t)[(size_t)id << 8];
			group_set(grp, lo, hi, e, len);
		} else {
			id = group_alloc(w);
			if (id == NO_GROUP)
				return -ENOSPC;
			grp = &tbl8(t)[(size_t)id << 8];
			for (unsigned j = 0; j < GROUP_SIZE; j++)
				grp[j] = j >= lo && j < hi ? e : cur;
			w->meta[id].nlong = 0;
			store(&t->tbl[i], LPM4_ENT_GROUP | id);
		}
		if (fresh)
			w->meta[id].nlong++;
	}
	if (fresh) {
		pfx_put(w->slots, w->nslots, pfx_key(addr, len), value);
		w->nprefix++;
		w->len_count[len]++;
	} else {
		*slot = (uint64_t)value << SLOT_KEY_BITS | SLOT_KEY(*slot);
	}
	return 0;
}

int lpm4_del(struct lpm4 *t, uint32_t addr, unsigned len)
{
	struct lpm4_writer *w = t->w;
	uint64_t *slot;
	uint32_t cover;

	if (len > 32)
		return -EINVAL;
	addr &= mask(len);
	slot = pfx_find(w, addr, len);
	if (!slot)
		return -ENOENT;
	pfx_remove(w, slot);
	w->nprefix--;
	w->len_count[len]--;
	cover = cover_of(w, addr, len);
	if (len <= 24) {
		uint32_t lo = addr >> 8, hi = lo + (1u << (24 - len));

		for (uint32_t i = lo; i < hi; i++) {
			uint32_t cur = t->tbl[i];

			if (cur & LPM4_ENT_GROUP)
				group_unset(&tbl8(t)[(size_t)(cur & 0xffffff) << 8], 0, GROUP_SIZE,
					    len, cover);
			else if (ent_len(cur) == len && cur != cover)
				store(&t->tbl[i], cover);
		}
	} else {
		uint32_t i = addr >> 8, id = t->tbl[i] & 0xffffff;
		uint32_t *grp = &tbl8(t)[(size_t)id << 8];
		unsigned lo = addr & 0xff, hi = lo + (1u << (32 - len));

		group_unset(grp, lo, hi, len, cover);
		if (--w->meta[id].nlong == 0) {
			/* Every entry now holds the /24's own answer: fold the group back. */
			store(&t->tbl[i], grp[0]);
			group_retire(w, id);
		}
	}
	return 0;
}

uint32_t lpm4_get(const struct lpm4 *t, uint32_t addr, unsigned len)
{
	const uint64_t *s;

	if (len > 32)
		return 0;
	s = pfx_find(t->w, addr & mask(len), len);
	return s ? SLOT_VAL(*s) : 0;
}

void lpm4_clear(struct lpm4 *t)
{
	struct lpm4_writer *w = t->w;

	for (uint32_t i = 0; i < TBL24_ENTRIES; i++) {
		uint32_t cur = t->tbl[i];

		if (!cur)
			continue;
		store(&t->tbl[i], 0);
		if (cur & LPM4_ENT_GROUP)
			group_retire(w, cur & 0xffffff);
	}
	memset(w->slots, 0, w->nslots * sizeof(*w->slots));
	memset(w->len_count, 0, sizeof(w->len_count));
	w->nprefix = 0;
}

/* Two passes over each chunk of the keys. The first loads the tbl24 entries (prefetched
 * ahead, so that their misses overlap) and stores each answer, listing the keys whose
 * entry is a group with the group entry's place (prefetched); the second reads the
 * group entries of the list. Read inline, as the single lookup does, a group entry's
 * miss came after a branch that keys inside long prefixes mispredict half the time,
 * and such misses came one at a time (bench/README.md, lpm_bench: 1.1x rte_lpm's bulk
 * on those keys inline, 1.4x in two passes). A branchless list (grown by the group
 * bit) was tried and cost keys without groups a fifth. A tbl24 entry is read once: a
 * writer may turn it into a group between two reads. */
#define BULK_CHUNK     64
#define PREFETCH_AHEAD 16

void lpm4_lookup_bulk(const struct lpm4 *t, const uint32_t *addrs, uint32_t *values, unsigned n)
{
	const uint32_t *g8 = tbl8(t);
	uint32_t at[BULK_CHUNK];
	uint8_t who[BULK_CHUNK];

	for (unsigned k = 0; k < n && k < PREFETCH_AHEAD; k++)
		__builtin_prefetch(&t->tbl[addrs[k] >> 8]);
	for (unsigned i = 0; i < n; i += BULK_CHUNK) {
		unsigned m = n - i < BULK_CHUNK ? n - i : BULK_CHUNK, ng = 0;

		for (unsigned k = i; k < i + m; k++) {
			uint32_t a = addrs[k], e;

			if (k + PREFETCH_AHEAD < n)
				__builtin_prefetch(&t->tbl[addrs[k + PREFETCH_AHEAD] >> 8]);
			e = __atomic_load_n(&t->tbl[a >> 8], __ATOMIC_ACQUIRE);
			values[k] = e & LPM4_ENT_VALUE;
			if (e & LPM4_ENT_GROUP) {
				at[ng] = lpm4_group_slot(e, a);
				__builtin_prefetch(&g8[at[ng]]);
				who[ng++] = (uint8_t)(k - i);
			}
		}
		for (unsigned j = 0; j < ng; j++)
			values[i + who[j]] =
			    __atomic_load_n(&g8[at[j]], __ATOMIC_ACQUIRE) & LPM4_ENT_VALUE;
	}
}

static void *map(size_t bytes, bool huge)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	if (huge)
		(void)madvise(p, bytes, MADV_HUGEPAGE); /* best effort: THP may be off */
#endif
	return p;
}

/* The header, tbl24 and every group in one mapping (see struct lpm4); pages are
 * touched as groups are first used. */
static size_t table_bytes(uint32_t ngroups)
{
	return sizeof(struct lpm4) + ((size_t)TBL24_ENTRIES + (size_t)ngroups * GROUP_SIZE) * 4;
}

int lpm4_create(struct lpm4 **out, const struct lpm4_config *cfg)
{
	uint32_t ngroups = cfg && cfg->max_groups ? cfg->max_groups : 65536;
	struct lpm4 *t;
	struct lpm4_writer *w;

	if (ngroups > LPM4_MAX_GROUPS)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->max_groups = ngroups;
	/* Huge pages for the groups too: 21k groups in use (a full Internet table) are
	 * 21 MiB, more than the TLB reaches in 4 KiB pages, so that a lookup reaching a
	 * group would also walk the page tables (bench/README.md, lpm_bench). */
	t = map(table_bytes(ngroups), !(cfg && cfg->small_pages));
	if (!t) {
		free(w);
		return -ENOMEM;
	}
	t->w = w;
#ifdef LPM4_LSAN_ROOT
	__lsan_register_root_region(t, sizeof(*t));
#endif
	w->defer = cfg ? cfg->defer : NULL;
	w->defer_ctx = cfg ? cfg->defer_ctx : NULL;
	w->returned = NO_GROUP;
	w->nslots = 1024;
	w->slots = calloc(w->nslots, sizeof(*w->slots));
	w->meta = calloc(ngroups, sizeof(*w->meta));
	w->free_ids = calloc(ngroups, sizeof(*w->free_ids));
	if (!w->slots || !w->meta || !w->free_ids) {
		lpm4_free(t);
		return -ENOMEM;
	}
	/* Hand out low ids first: their pages are the ones already touched. */
	for (uint32_t i = 0; i < ngroups; i++) {
		w->meta[i].w = w;
		w->meta[i].id = i;
		w->free_ids[i] = ngroups - 1 - i;
	}
	w->nfree = ngroups;
	*out = t;
	return 0;
}

void lpm4_free(struct lpm4 *t)
{
	if (!t)
		return;
	uint32_t ngroups = t->w->max_groups;

	free(t->w->slots);
	free(t->w->meta);
	free(t->w->free_ids);
	free(t->w);
#ifdef LPM4_LSAN_ROOT
	__lsan_unregister_root_region(t, sizeof(*t));
#endif
	munmap(t, table_bytes(ngroups));
}

void lpm4_stats(const struct lpm4 *t, struct lpm4_stats *out)
{
	const struct lpm4_writer *w = t->w;
	size_t meta = (size_t)w->max_groups * (sizeof(*w->meta) + sizeof(*w->free_ids));

	out->prefixes = w->nprefix;
	out->groups_used = w->used;
	out->groups_pending = w->pending;
	out->groups_max = w->max_groups;
	out->reader_bytes =
	    (size_t)TBL24_ENTRIES * 4 + (size_t)(w->used + w->pending) * GROUP_SIZE * 4;
	out->writer_bytes = w->nslots * sizeof(*w->slots) + meta + sizeof(*w);
	out->reserved_bytes =
	    (size_t)TBL24_ENTRIES * 4 + (size_t)w->max_groups * GROUP_SIZE * 4 + out->writer_bytes;
}
