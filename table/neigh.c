/*
 * neigh: the neighbour table (see neigh.h for the states, timers and threads).
 *
 * Storage: a fixed array of buckets (a power of two >= gc_thresh3, so chains stay
 * short without resizing under readers), singly linked chains published with release
 * stores and read with acquire loads. Entries are added at the head of a chain; a
 * removal unlinks with one release store and frees through cfg.defer. The link address
 * of an entry is a separate immutable object swapped the same way.
 *
 * The data path does not walk the chains: it reads a flat, open-addressed index (linear
 * probing, a power of two >= 2 * gc_thresh3 slots of one cache line each) whose slot
 * holds what sending needs: the key, a copy of the state and of the link pointer, the
 * entry and the use hint. A hit costs the slot's line and the link's, not a bucket's, an
 * entry's and a link's. The chains stay the control thread's structure (walks, GC,
 * neigh_walk_from's stable order); the index follows them:
 *   - a slot's key is written once, before its family is stored with release; it never
 *     changes while the index lives, so a reader that matched a key reads that entry's
 *     fields, never another's;
 *   - set_state and publish_link store the state and the link into the slot too (the
 *     same release stores as the entry's; a reader sees each copy old or new, as it
 *     would the entry's); publish_link also stores a 6-octet address (a MAC) and its
 *     usable flag as one word of the slot, so that an Ethernet sender
 *     (neigh_lookup_mac) reads one line, not the slot's and the link's;
 *   - a removal marks the slot dead (link NULL, state NONE, family SLOT_DEAD); dead
 *     slots are not reused, so probing never meets a key that changed under it;
 *   - when live + dead slots pass 3/4 of the index, a new index is built from the
 *     chains, published with one release store, and the old one freed through cfg.defer
 *     (a reader still on it reads entries and links that the same defer keeps alive);
 *   - a caller may keep where a key was found (neigh_lookup_link's slot hint: a FIB
 *     next hop keeps its gateway's). The hint is only a slot number, read against
 *     whichever index is current and used when that slot holds the key (the two rules
 *     above make such a match the key's own slot); else the hash and probe run and the
 *     hint is rewritten. Nothing here keeps hints right, so none can be wrong.
 *
 * Link addresses live in cells of 64 octets carved from the table's own mappings (huge
 * pages for a large table), not malloc's heap: the data path's second line per packet
 * then rarely misses the TLB as well (a 100,000-entry table's links on 4 KiB pages are
 * a page walk each). A replaced link's cell comes back through cfg.defer, which may run
 * on another thread (liburcu's call_rcu thread): it is pushed on a lock-free stack
 * that the control thread takes whole. The mappings are reference counted -- the table
 * and each cell still in a grace period -- so a callback that runs after
 * neigh_table_free finds them still there and the last one unmaps them.
 *
 * Timers: each entry has one deadline; neigh_tick() walks the table (the control
 * thread calls it at least once a second, which also turns "used while STALE" hints
 * into DELAY), plus a periodic GC pass.
 *
 * INCOMPLETE entries are also on a list in the order they became INCOMPLETE (set_state
 * keeps it), so that the cap on them and a full table find the oldest in O(1): a scan
 * of a /64 makes one per packet, and a walk of the table per packet would be the
 * attacker's win.
 */
#include "table/neigh.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "lib/addr.h"
#include "lib/evloop.h"

#define NEVER               UINT64_MAX
#define FORCED_GC_GAP_MS    5000
#define REACHABLE_REDRAW_MS 300000

struct neigh_entry {
	/* the data path's part: the first cache line (line_alloc); neigh_lookup_link
	 * reads the slot instead */
	struct neigh_entry *next; /* RCU chain */
	struct neigh_link *link;  /* RCU: immutable, NULL when none */
	uint8_t state;            /* written by control with release, read with acquire */
	uint8_t family;
	uint8_t addr[16];
	uint64_t used_hint;      /* data path hint (relaxed atomics) */
	uint64_t confirmed_hint; /* data path hint */
	/* control thread only */
	uint64_t updated;   /* last state or address change */
	uint64_t confirmed; /* last confirmation seen (0: never) */
	uint64_t used_seen; /* last use the control thread acted on */
	uint64_t deadline;  /* NEVER: none */
	uint64_t failed_at;
	unsigned probes;
	unsigned q_head, q_len;
	uint64_t q_drops;
	void **queue; /* unres_qlen slots */
	/* the INCOMPLETE list, oldest first (control thread only) */
	struct neigh_entry *unres_prev, *unres_next;
	unsigned slot; /* in t->idx (control thread only) */
};

#define SLOT_DEAD 0xff /* a removed entry's slot: probing goes on past it */

/* One slot of the data path's index: one cache line. family is stored last with
 * release (0: empty, SLOT_DEAD, AF_INET / AF_INET6), state and link with release;
 * readers load those three with acquire, the rest is immutable once published. */
struct neigh_slot {
	uint8_t family;
	uint8_t state;
	uint8_t addr[16];
	struct neigh_link *link;
	struct neigh_entry *e;
	uint64_t used_hint; /* data path hint (relaxed atomics) */
	uint64_t mac;       /* the link's MAC, for neigh_lookup_mac: see slot_mac */
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct neigh_slot) == 64, "a slot is one cache line");

struct neigh_index {
	unsigned mask;
	unsigned used; /* live and dead slots (control thread only) */
	size_t bytes;  /* of the mapping */
	struct neigh_slot s[];
};

_Static_assert(offsetof(struct neigh_entry, confirmed_hint) + sizeof(uint64_t) <= 64,
	       "the data path's part of an entry fits one cache line");
_Static_assert(sizeof(struct neigh_link) <= 64, "a link address fits one cache line");

/* A link address's cell: the link, and the arena it returns to (on the free stacks, the
 * next free cell overlays the link). */
struct link_cell {
	union {
		struct neigh_link link;
		struct link_cell *next_free;
	};
	struct link_arena *arena;
};

_Static_assert(sizeof(struct link_cell) <= 64, "a link cell fits one cache line");

/* A chunk's first cell is its header: the next chunk, for the unmap. */
struct link_chunk {
	struct link_chunk *next;
	size_t bytes;
};

struct link_arena {
	unsigned refs;                 /* atomic: the table's, and one per deferred cell */
	struct link_cell *remote_free; /* atomic: pushed by deferred frees (any thread) */
	struct link_cell *local_free;  /* control thread */
	struct link_chunk *chunks;     /* control thread */
	uint8_t *carve, *carve_end;    /* control thread: the chunk being cut */
	size_t chunk_bytes;
};

struct neigh_table {
	struct neigh_config cfg;
	struct link_arena *links;
	struct neigh_params p;
	struct neigh_entry **buckets;
	unsigned mask;
	struct neigh_index *idx; /* RCU: replaced whole by idx_rebuild */
	unsigned idx_mask;       /* its size less one (fixed) */
	unsigned count;
	uint32_t seed, rng;
	uint32_t reachable_ms;
	uint64_t reachable_drawn, next_gc, last_forced_gc;
	struct neigh_entry *unres_head, *unres_tail; /* INCOMPLETE, oldest first */
	unsigned n_unres;
	struct neigh_stats st;
};

static const char *const state_names[NEIGH_STATE_COUNT] = {
	[NEIGH_NONE] = "none",           [NEIGH_INCOMPLETE] = "INCOMPLETE",
	[NEIGH_REACHABLE] = "REACHABLE", [NEIGH_STALE] = "STALE",
	[NEIGH_DELAY] = "DELAY",         [NEIGH_PROBE] = "PROBE",
	[NEIGH_FAILED] = "FAILED",       [NEIGH_PERMANENT] = "PERMANENT",
};

const char *neigh_state_name(enum neigh_state s)
{
	return (unsigned)s < NEIGH_STATE_COUNT ? state_names[s] : "?";
}

void neigh_params_defaults(struct neigh_params *p)
{
	if (!p->base_reachable_ms)
		p->base_reachable_ms = 30000;
	if (!p->retrans_ms)
		p->retrans_ms = 1000;
	if (!p->delay_probe_ms)
		p->delay_probe_ms = 5000;
	if (!p->gc_stale_ms)
		p->gc_stale_ms = 60000;
	if (!p->gc_interval_ms)
		p->gc_interval_ms = 30000;
	if (!p->ucast_probes)
		p->ucast_probes = 3;
	if (!p->mcast_probes)
		p->mcast_probes = 3;
	if (!p->unres_qlen)
		p->unres_qlen = 3;
	if (!p->gc_thresh1)
		p->gc_thresh1 = 128;
	if (!p->gc_thresh2)
		p->gc_thresh2 = 512;
	if (!p->gc_thresh3)
		p->gc_thresh3 = 1024;
	if (!p->max_unresolved)
		p->max_unresolved = p->gc_thresh3 / 4 ? p->gc_thresh3 / 4 : 1;
}

static uint64_t now_ms(const struct neigh_table *t)
{
	return t->cfg.now_ms ? t->cfg.now_ms(t->cfg.now_ctx) : evloop_now_ms();
}

static uint32_t rng_next(struct neigh_table *t)
{
	uint32_t x = t->rng; /* xorshift32 */

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	t->rng = x ? x : 0x9e3779b9u;
	return t->rng;
}

/* Linux's neigh_rand_reach_time: uniform in [base/2, 3*base/2). */
static void draw_reachable(struct neigh_table *t, uint64_t now)
{
	uint32_t base = t->p.base_reachable_ms;

	t->reachable_ms = base / 2 + (base ? rng_next(t) % base : 0);
	t->reachable_drawn = now;
}

static unsigned addr_len(int family)
{
	return family == AF_INET ? 4 : 16;
}

static inline uint32_t load32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/* murmur3's fmix32 over the address words, seeded per table; per packet on the data
 * path (twice with cache warming), so word loads rather than a byte loop. */
static inline uint32_t hash_key(const struct neigh_table *t, int family, const uint8_t *addr)
{
	uint32_t h = t->seed ^ (uint32_t)family * 0x9e3779b1u;

	h ^= load32(addr);
	if (family != AF_INET) {
		h = h * 0x85ebca6bu ^ load32(addr + 4);
		h = h * 0xc2b2ae35u ^ load32(addr + 8);
		h = h * 0x85ebca6bu ^ load32(addr + 12);
	}
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return h;
}

/* ---- link address cells ------------------------------------------------------------ */

static struct link_arena *arena_new(unsigned gc_thresh3)
{
	struct link_arena *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->refs = 1;
	/* 2 MiB (one huge page) for large tables, 64 KiB (1,023 cells) for the rest */
	a->chunk_bytes = gc_thresh3 >= 8192 ? 2u << 20 : 64u << 10;
	return a;
}

static void arena_unref(struct link_arena *a)
{
	if (__atomic_sub_fetch(&a->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (struct link_chunk *c = a->chunks, *nx; c; c = nx) {
		nx = c->next;
		munmap(c, c->bytes);
	}
	free(a);
}

static struct neigh_link *cell_alloc(struct link_arena *a)
{
	struct link_cell *c = a->local_free;

	if (!c)
		c = a->local_free = __atomic_exchange_n(&a->remote_free, NULL, __ATOMIC_ACQUIRE);
	if (c) {
		a->local_free = c->next_free;
	} else {
		if (a->carve == a->carve_end) {
			struct link_chunk *k =
			    mmap(NULL, a->chunk_bytes, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

			if (k == MAP_FAILED)
				return NULL;
#ifdef MADV_HUGEPAGE
			if (a->chunk_bytes >= 2u << 20)
				(void)madvise(k, a->chunk_bytes, MADV_HUGEPAGE);
#endif
			k->bytes = a->chunk_bytes;
			k->next = a->chunks;
			a->chunks = k;
			a->carve = (uint8_t *)k + 64;
			a->carve_end = (uint8_t *)k + a->chunk_bytes;
		}
		c = (struct link_cell *)(void *)a->carve;
		a->carve += 64;
	}
	memset(c, 0, sizeof(*c));
	c->arena = a;
	return &c->link;
}

/* Back to its arena's free stack; any thread (a deferred free) or the control thread. */
static void cell_push(struct link_cell *c)
{
	struct link_arena *a = c->arena;
	struct link_cell *head = __atomic_load_n(&a->remote_free, __ATOMIC_RELAXED);

	do
		c->next_free = head;
	while (!__atomic_compare_exchange_n(&a->remote_free, &head, c, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/* A deferred free: the cell returns, and the reference its grace period held goes. */
static void cell_free_deferred(void *p)
{
	struct link_cell *c = p;
	struct link_arena *a = c->arena;

	cell_push(c);
	arena_unref(a);
}

/* A link address no reader may see any more once a grace period has passed. */
static void retire(struct neigh_table *t, struct neigh_link *ll)
{
	if (!ll)
		return;
	if (t->cfg.defer) {
		__atomic_add_fetch(&t->links->refs, 1, __ATOMIC_RELAXED);
		t->cfg.defer(t->cfg.defer_ctx, cell_free_deferred, ll);
	} else {
		cell_push((struct link_cell *)(void *)ll);
	}
}

/*
 * The index is its own mapping, on huge pages when it is large enough (best effort:
 * THP may be off): a 200,000-entry table has 16 MiB of slots, and a lookup that missed
 * the TLB as well as the cache would pay a page walk on top of the miss.
 */
static struct neigh_index *idx_alloc(unsigned mask)
{
	size_t sz = sizeof(struct neigh_index) + ((size_t)mask + 1) * sizeof(struct neigh_slot);
	struct neigh_index *x = mmap(NULL, sz, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (x == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	if (sz >= 2u << 20)
		(void)madvise(x, sz, MADV_HUGEPAGE);
#endif
	x->mask = mask; /* the rest is zero: every slot empty */
	x->bytes = sz;
	return x;
}

static void idx_free(void *p)
{
	struct neigh_index *x = p;

	munmap(x, x->bytes);
}

int neigh_table_new(const struct neigh_config *cfg, struct neigh_table **out)
{
	struct neigh_table *t = calloc(1, sizeof(*t));
	unsigned n = 16;

	if (!t)
		return -ENOMEM;
	t->cfg = *cfg;
	t->p = cfg->params;
	neigh_params_defaults(&t->p);
	if (t->p.gc_thresh1 > t->p.gc_thresh2 || t->p.gc_thresh2 > t->p.gc_thresh3 ||
	    t->p.gc_thresh3 > (1u << 22) || t->p.unres_qlen > 1024 ||
	    t->p.max_unresolved > t->p.gc_thresh3) {
		free(t);
		return -EINVAL;
	}
	while (n < t->p.gc_thresh3)
		n <<= 1;
	t->buckets = calloc(n, sizeof(*t->buckets));
	if (!t->buckets) {
		free(t);
		return -ENOMEM;
	}
	t->mask = n - 1;
	t->idx_mask = 2 * n - 1;
	t->idx = idx_alloc(t->idx_mask);
	t->links = arena_new(t->p.gc_thresh3);
	if (!t->idx || !t->links) {
		if (t->idx)
			idx_free(t->idx);
		free(t->links);
		free(t->buckets);
		free(t);
		return -ENOMEM;
	}
	t->seed = cfg->seed ? cfg->seed : (uint32_t)evloop_now_ns() | 1;
	t->rng = t->seed;
	uint64_t now = now_ms(t);
	draw_reachable(t, now);
	t->next_gc = now + t->p.gc_interval_ms;
	t->last_forced_gc = 0;
	*out = t;
	return 0;
}

/* ---- data path -------------------------------------------------------------------- */

/* The slot of (family, addr) in x, or NULL. The index always has empty slots (it is
 * rebuilt at 3/4), so the probe ends. */
static inline struct neigh_slot *idx_find(const struct neigh_table *t, const struct neigh_index *x,
					  int family, const uint8_t *addr)
{
	unsigned i = hash_key(t, family, addr) & x->mask;

	for (;; i = (i + 1) & x->mask) {
		struct neigh_slot *s = (struct neigh_slot *)&x->s[i];
		uint8_t f = __atomic_load_n(&s->family, __ATOMIC_ACQUIRE);

		if (f == 0)
			return NULL;
		if (f == (uint8_t)family &&
		    (family == AF_INET ? !memcmp(s->addr, addr, 4) : !memcmp(s->addr, addr, 16)))
			return s;
	}
}

struct neigh_entry *neigh_lookup(const struct neigh_table *t, int family, const uint8_t *addr)
{
	const struct neigh_index *x = __atomic_load_n(&t->idx, __ATOMIC_ACQUIRE);
	const struct neigh_slot *s = idx_find(t, x, family, addr);

	return s ? s->e : NULL;
}

static inline bool state_sends(enum neigh_state s)
{
	return s == NEIGH_REACHABLE || s == NEIGH_STALE || s == NEIGH_DELAY || s == NEIGH_PROBE ||
	       s == NEIGH_PERMANENT;
}

/* A slot's copy of its link for an Ethernet sender, one word so that a reader never sees
 * half of two: the MAC in octets 0-5, octet 6 the link's usable, octet 7 MAC_HERE (0:
 * no link; MAC_ELSEWHERE: not a 6-octet address, read the link). Stored with release
 * beside the link pointer, by the same writers. */
#define MAC_HERE      1
#define MAC_ELSEWHERE 2

static uint64_t slot_mac(const struct neigh_link *ll)
{
	uint8_t b[8] = { 0 };
	uint64_t w;

	if (ll) {
		if (ll->len == 6) {
			memcpy(b, ll->addr, 6);
			b[6] = ll->usable;
			b[7] = MAC_HERE;
		} else {
			b[7] = MAC_ELSEWHERE;
		}
	}
	memcpy(&w, b, 8);
	return w;
}

/* The hinted slot (hint: slot + 1, 0 none) when it holds (family, addr), else NULL. A
 * slot's key never changes while its index lives and a dead slot's family is
 * SLOT_DEAD, so a match is this key's entry in x, whatever wrote the hint. */
static inline struct neigh_slot *idx_hinted(const struct neigh_index *x, int family,
					    const uint8_t *addr, uint32_t hint)
{
	struct neigh_slot *s;

	if (!hint)
		return NULL;
	s = (struct neigh_slot *)&x->s[(hint - 1) & x->mask];
	if (__atomic_load_n(&s->family, __ATOMIC_ACQUIRE) == (uint8_t)family &&
	    (family == AF_INET ? !memcmp(s->addr, addr, 4) : !memcmp(s->addr, addr, 16)))
		return s;
	return NULL;
}

/* The data path's slot of (family, addr): the hinted one when it holds the key, else
 * found by hash and probe (the hint then rewritten). NULL: no entry. */
static inline struct neigh_slot *slot_of(const struct neigh_table *t, int family,
					 const uint8_t *addr, uint32_t *slot_hint)
{
	const struct neigh_index *x = __atomic_load_n(&t->idx, __ATOMIC_ACQUIRE);
	uint32_t hint = slot_hint ? __atomic_load_n(slot_hint, __ATOMIC_RELAXED) : 0;
	struct neigh_slot *s = idx_hinted(x, family, addr, hint);

	if (!s) {
		s = idx_find(t, x, family, addr);
		if (slot_hint) {
			uint32_t h = s ? (uint32_t)(s - x->s) + 1 : 0;

			if (h != hint)
				__atomic_store_n(slot_hint, h, __ATOMIC_RELAXED);
		}
	}
	return s;
}

/* The slot sends (state) and is used now: the use hint left. */
static inline bool slot_use(struct neigh_slot *s, uint64_t now)
{
	if (!state_sends((enum neigh_state)__atomic_load_n(&s->state, __ATOMIC_ACQUIRE)))
		return false;
	if (__atomic_load_n(&s->used_hint, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&s->used_hint, now, __ATOMIC_RELAXED);
	return true;
}

const struct neigh_link *neigh_lookup_link(const struct neigh_table *t, int family,
					   const uint8_t *addr, uint64_t now, uint32_t *slot_hint)
{
	struct neigh_slot *s = slot_of(t, family, addr, slot_hint);
	const struct neigh_link *ll;

	if (!s)
		return NULL;
	ll = __atomic_load_n(&s->link, __ATOMIC_ACQUIRE);
	if (!ll || !ll->usable || !slot_use(s, now))
		return NULL;
	return ll;
}

bool neigh_lookup_mac(const struct neigh_table *t, int family, const uint8_t *addr, uint64_t now,
		      uint32_t *slot_hint, uint8_t mac[6])
{
	struct neigh_slot *s = slot_of(t, family, addr, slot_hint);
	uint64_t w;
	uint8_t b[8];

	if (!s)
		return false;
	w = __atomic_load_n(&s->mac, __ATOMIC_ACQUIRE);
	memcpy(b, &w, 8);
	if (b[7] == MAC_ELSEWHERE) {
		const struct neigh_link *ll = __atomic_load_n(&s->link, __ATOMIC_ACQUIRE);

		if (!ll || !ll->usable || ll->len < 6 || !slot_use(s, now))
			return false;
		memcpy(mac, ll->addr, 6);
		return true;
	}
	if (b[7] != MAC_HERE || !b[6] || !slot_use(s, now))
		return false;
	memcpy(mac, b, 6);
	return true;
}

const struct neigh_slot *neigh_warm_slot(const struct neigh_table *t, int family,
					 const uint8_t *addr, const uint32_t *slot_hint)
{
	const struct neigh_index *x = __atomic_load_n(&t->idx, __ATOMIC_ACQUIRE);
	uint32_t hint = slot_hint ? __atomic_load_n(slot_hint, __ATOMIC_RELAXED) : 0;
	const struct neigh_slot *s = &x->s[(hint ? hint - 1 : hash_key(t, family, addr)) & x->mask];

	__builtin_prefetch(s);
	return s;
}

void neigh_warm_link(const struct neigh_slot *s)
{
	const struct neigh_link *ll = __atomic_load_n(&s->link, __ATOMIC_ACQUIRE);

	if (ll)
		__builtin_prefetch(ll);
}

enum neigh_state neigh_entry_state(const struct neigh_entry *e)
{
	return (enum neigh_state)__atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
}

const struct neigh_link *neigh_entry_link(const struct neigh_entry *e)
{
	return __atomic_load_n(&e->link, __ATOMIC_ACQUIRE);
}

void neigh_entry_used(struct neigh_entry *e, uint64_t now)
{
	if (__atomic_load_n(&e->used_hint, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&e->used_hint, now, __ATOMIC_RELAXED);
}

void neigh_entry_confirmed(struct neigh_entry *e, uint64_t now)
{
	if (__atomic_load_n(&e->confirmed_hint, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&e->confirmed_hint, now, __ATOMIC_RELAXED);
}

int neigh_entry_family(const struct neigh_entry *e)
{
	return e->family;
}

const uint8_t *neigh_entry_addr(const struct neigh_entry *e)
{
	return e->addr;
}

/* ---- control ---------------------------------------------------------------------- */

static void unres_remove(struct neigh_table *t, struct neigh_entry *e)
{
	if (e->unres_prev)
		e->unres_prev->unres_next = e->unres_next;
	else
		t->unres_head = e->unres_next;
	if (e->unres_next)
		e->unres_next->unres_prev = e->unres_prev;
	else
		t->unres_tail = e->unres_prev;
	e->unres_prev = e->unres_next = NULL;
	t->n_unres--;
}

static void unres_append(struct neigh_table *t, struct neigh_entry *e)
{
	e->unres_next = NULL;
	e->unres_prev = t->unres_tail;
	if (t->unres_tail)
		t->unres_tail->unres_next = e;
	else
		t->unres_head = e;
	t->unres_tail = e;
	t->n_unres++;
}

/* Every state change goes through here, which keeps the INCOMPLETE list. */
static void set_state(struct neigh_table *t, struct neigh_entry *e, enum neigh_state s,
		      uint64_t now)
{
	enum neigh_state old = (enum neigh_state)e->state;

	if (old == NEIGH_INCOMPLETE && s != NEIGH_INCOMPLETE)
		unres_remove(t, e);
	else if (old != NEIGH_INCOMPLETE && s == NEIGH_INCOMPLETE)
		unres_append(t, e);
	__atomic_store_n(&e->state, (uint8_t)s, __ATOMIC_RELEASE);
	__atomic_store_n(&t->idx->s[e->slot].state, (uint8_t)s, __ATOMIC_RELEASE);
	e->updated = now;
}

/*
 * Entries and link addresses start on a cache line: what the data path reads of an
 * entry (next, link, state, key, the hints) is its first 56 octets, and a link address
 * is 56 octets, so each costs one miss, not two when malloc's 16-octet alignment
 * splits it. free() takes them as any allocation.
 */
static void *line_alloc(size_t size)
{
	void *p = aligned_alloc(64, (size + 63) & ~(size_t)63);

	if (p)
		memset(p, 0, size);
	return p;
}

static int publish_link(struct neigh_table *t, struct neigh_entry *e, const struct neigh_link *ll)
{
	struct neigh_link *n = NULL, *old;

	if (ll) {
		n = cell_alloc(t->links);
		if (!n)
			return -ENOMEM;
		*n = *ll;
	}
	old = e->link;
	__atomic_store_n(&e->link, n, __ATOMIC_RELEASE);
	__atomic_store_n(&t->idx->s[e->slot].link, n, __ATOMIC_RELEASE);
	__atomic_store_n(&t->idx->s[e->slot].mac, slot_mac(n), __ATOMIC_RELEASE);
	retire(t, old);
	return 0;
}

static void queue_drop_all(struct neigh_table *t, struct neigh_entry *e)
{
	while (e->q_len) {
		void *pkt = e->queue[e->q_head];

		e->q_head = (e->q_head + 1) % t->p.unres_qlen;
		e->q_len--;
		e->q_drops++;
		t->st.unres_discards++;
		if (t->cfg.ops && t->cfg.ops->drop)
			t->cfg.ops->drop(t->cfg.ops_ctx, pkt);
	}
}

static void queue_flush(struct neigh_table *t, struct neigh_entry *e)
{
	const struct neigh_link *ll = e->link;

	if (!ll || !ll->usable || !state_sends((enum neigh_state)e->state))
		return;
	while (e->q_len) {
		void *pkt = e->queue[e->q_head];

		e->q_head = (e->q_head + 1) % t->p.unres_qlen;
		e->q_len--;
		if (t->cfg.ops && t->cfg.ops->xmit)
			t->cfg.ops->xmit(t->cfg.ops_ctx, e, ll, pkt);
		else if (t->cfg.ops && t->cfg.ops->drop)
			t->cfg.ops->drop(t->cfg.ops_ctx, pkt);
	}
}

/* An entry and its link address (a deferred free, or the table's end). */
static void entry_free(void *p)
{
	struct neigh_entry *e = p;

	if (e->link)
		cell_free_deferred(e->link); /* the reference unlink_entry took for it */
	free(e->queue);
	free(e);
}

/* Put e into index x (the control thread's; unpublished or current), its use hint
 * from the slot it had (NULL: none). The caller leaves x an empty slot. */
static void idx_put(const struct neigh_table *t, struct neigh_index *x, struct neigh_entry *e,
		    const struct neigh_slot *was)
{
	unsigned i = hash_key(t, e->family, e->addr) & x->mask;
	struct neigh_slot *s;

	while (x->s[i].family)
		i = (i + 1) & x->mask;
	s = &x->s[i];
	memcpy(s->addr, e->addr, 16);
	s->e = e;
	__atomic_store_n(&s->link, e->link, __ATOMIC_RELAXED);
	__atomic_store_n(&s->mac, slot_mac(e->link), __ATOMIC_RELAXED);
	__atomic_store_n(&s->state, e->state, __ATOMIC_RELAXED);
	__atomic_store_n(&s->used_hint,
			 was ? __atomic_load_n(&was->used_hint, __ATOMIC_RELAXED) : 0,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&s->family, e->family, __ATOMIC_RELEASE);
	x->used++;
	e->slot = i;
}

/* A new index of the live entries (the dead slots left out), published whole; the old
 * one goes through cfg.defer, as a removed entry does. */
static int idx_rebuild(struct neigh_table *t)
{
	struct neigh_index *old = t->idx, *x = idx_alloc(t->idx_mask);

	if (!x)
		return -ENOMEM;
	for (unsigned b = 0; b <= t->mask; b++)
		for (struct neigh_entry *e = t->buckets[b]; e; e = e->next)
			idx_put(t, x, e, &old->s[e->slot]);
	__atomic_store_n(&t->idx, x, __ATOMIC_RELEASE);
	if (t->cfg.defer)
		t->cfg.defer(t->cfg.defer_ctx, idx_free, old);
	else
		idx_free(old);
	return 0;
}

/* The slot of a new entry (not yet on a chain). Fails only when the index is full of
 * dead slots and a new one could not be allocated. */
static int idx_add(struct neigh_table *t, struct neigh_entry *e)
{
	if (t->idx->used >= (t->idx_mask + 1) / 4 * 3)
		(void)idx_rebuild(t); /* on failure, the room left (if any) serves */
	if (t->idx->used >= t->idx_mask)
		return -ENOMEM; /* one empty slot always stays: probes end there */
	idx_put(t, t->idx, e, NULL);
	return 0;
}

/* e leaves the index: readers that match its key from now on find no link. */
static void idx_del(struct neigh_table *t, struct neigh_entry *e)
{
	struct neigh_slot *s = &t->idx->s[e->slot];

	__atomic_store_n(&s->link, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&s->mac, (uint64_t)0, __ATOMIC_RELEASE);
	__atomic_store_n(&s->state, (uint8_t)NEIGH_NONE, __ATOMIC_RELEASE);
	__atomic_store_n(&s->family, (uint8_t)SLOT_DEAD, __ATOMIC_RELEASE);
}

/* The data path's use hint: left in the slot (neigh_lookup_link) or the entry
 * (neigh_entry_used). */
static uint64_t used_hint(const struct neigh_table *t, const struct neigh_entry *e)
{
	uint64_t a = __atomic_load_n(&e->used_hint, __ATOMIC_RELAXED);
	uint64_t b = __atomic_load_n(&t->idx->s[e->slot].used_hint, __ATOMIC_RELAXED);

	return a > b ? a : b;
}

static void unlink_entry(struct neigh_table *t, struct neigh_entry *e)
{
	uint32_t h = hash_key(t, e->family, e->addr);
	struct neigh_entry **pp = &t->buckets[h & t->mask];

	if (t->cfg.ops && t->cfg.ops->release)
		t->cfg.ops->release(t->cfg.ops_ctx, e, e->link);
	idx_del(t, e);
	for (; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			__atomic_store_n(pp, e->next, __ATOMIC_RELEASE);
			break;
		}
	}
	if (e->state == NEIGH_INCOMPLETE)
		unres_remove(t, e);
	queue_drop_all(t, e);
	t->count--;
	t->st.destroys++;
	if (e->link)
		__atomic_add_fetch(&t->links->refs, 1, __ATOMIC_RELAXED); /* entry_free's */
	if (t->cfg.defer)
		t->cfg.defer(t->cfg.defer_ctx, entry_free, e);
	else
		entry_free(e);
}

void neigh_delete(struct neigh_table *t, struct neigh_entry *e)
{
	unlink_entry(t, e);
}

/* Remove FAILED entries and STALE ones unused for gc_stale_ms (all when forced and
 * older than that, else as Linux's periodic work does). Returns how many. */
static unsigned gc_run(struct neigh_table *t, uint64_t now)
{
	unsigned n = 0;

	for (unsigned b = 0; b <= t->mask; b++) {
		struct neigh_entry *e = t->buckets[b], *next;

		for (; e; e = next) {
			uint64_t last_use;

			next = e->next;
			last_use = e->used_seen > e->updated ? e->used_seen : e->updated;
			if (e->state == NEIGH_FAILED ||
			    (e->state == NEIGH_STALE && now - last_use >= t->p.gc_stale_ms)) {
				unlink_entry(t, e);
				n++;
			}
		}
	}
	return n;
}

/* The last use the control thread knows of, hint included (0: never used). */
static uint64_t last_used(const struct neigh_table *t, const struct neigh_entry *e)
{
	uint64_t uh = used_hint(t, e);

	return uh > e->used_seen ? uh : e->used_seen;
}

/*
 * A full table after the forced run: make room for a newcomer. The oldest INCOMPLETE
 * entry goes first (nothing stands behind it but its parked packets), then the STALE
 * entry idle longest, unless it was used within the reachable time. REACHABLE, DELAY,
 * PROBE and PERMANENT entries stay: a neighbour in use is worth more than a newcomer.
 * Returns whether an entry was evicted.
 */
static bool evict_one(struct neigh_table *t, uint64_t now)
{
	struct neigh_entry *victim = NULL;
	uint64_t victim_idle = 0;

	if (t->unres_head) {
		t->st.unres_evictions++;
		unlink_entry(t, t->unres_head);
		return true;
	}
	for (unsigned b = 0; b <= t->mask; b++) {
		for (struct neigh_entry *e = t->buckets[b]; e; e = e->next) {
			uint64_t used = last_used(t, e), idle;

			if (e->state != NEIGH_STALE || (used && now - used < t->reachable_ms))
				continue;
			idle = now - (used > e->updated ? used : e->updated);
			if (!victim || idle > victim_idle) {
				victim = e;
				victim_idle = idle;
			}
		}
	}
	if (!victim)
		return false;
	t->st.stale_evictions++;
	unlink_entry(t, victim);
	return true;
}

static struct neigh_entry *create(struct neigh_table *t, int family, const uint8_t *addr,
				  uint64_t now)
{
	struct neigh_entry *e;
	uint32_t h;

	if (t->count >= t->p.gc_thresh3 ||
	    (t->count >= t->p.gc_thresh2 && now - t->last_forced_gc >= FORCED_GC_GAP_MS)) {
		t->st.forced_gc_runs++;
		t->last_forced_gc = now;
		gc_run(t, now);
		if (t->count >= t->p.gc_thresh3 && !evict_one(t, now)) {
			t->st.table_full++;
			return NULL;
		}
	}
	e = line_alloc(sizeof(*e));
	if (!e)
		return NULL;
	e->queue = calloc(t->p.unres_qlen, sizeof(void *));
	if (!e->queue) {
		free(e);
		return NULL;
	}
	e->family = (uint8_t)family;
	memcpy(e->addr, addr, addr_len(family));
	e->updated = now;
	e->deadline = NEVER;
	if (idx_add(t, e) < 0) {
		free(e->queue);
		free(e);
		return NULL;
	}
	h = hash_key(t, family, addr);
	e->next = t->buckets[h & t->mask];
	__atomic_store_n(&t->buckets[h & t->mask], e, __ATOMIC_RELEASE);
	t->count++;
	t->st.allocs++;
	return e;
}

static void solicit(struct neigh_table *t, struct neigh_entry *e, bool unicast)
{
	if (unicast)
		t->st.ucast_solicits++;
	else
		t->st.mcast_solicits++;
	e->probes++;
	if (t->cfg.ops && t->cfg.ops->solicit)
		t->cfg.ops->solicit(t->cfg.ops_ctx, e, unicast ? e->link : NULL);
}

/* A resolution is about to start: at max_unresolved, the oldest one in flight makes
 * room (dropping its parked packets). A scan then only churns its own entries, and a
 * real neighbour's resolution still starts and has until max_unresolved newer ones
 * arrive to be answered. */
static void unres_make_room(struct neigh_table *t)
{
	while (t->n_unres >= t->p.max_unresolved && t->unres_head) {
		t->st.unres_evictions++;
		unlink_entry(t, t->unres_head);
	}
}

int neigh_resolve(struct neigh_table *t, int family, const uint8_t *addr, void *pkt)
{
	uint64_t now = now_ms(t);
	struct neigh_entry *e = neigh_lookup(t, family, addr);

	if (!e) {
		t->st.lookups_miss++;
		unres_make_room(t);
		e = create(t, family, addr, now);
		if (!e) {
			if (pkt && t->cfg.ops && t->cfg.ops->drop)
				t->cfg.ops->drop(t->cfg.ops_ctx, pkt);
			return -ENOBUFS;
		}
		set_state(t, e, NEIGH_INCOMPLETE, now);
		e->probes = 0;
		e->deadline = now + t->p.retrans_ms;
		solicit(t, e, false);
	} else if (e->state == NEIGH_FAILED) {
		if (now - e->failed_at < t->p.retrans_ms) {
			if (pkt && t->cfg.ops && t->cfg.ops->drop) {
				t->cfg.ops->drop(t->cfg.ops_ctx, pkt);
				e->q_drops++;
				t->st.unres_discards++;
			}
			return -EHOSTUNREACH;
		}
		/* A new attempt, as Linux does for a FAILED entry that is used again. */
		unres_make_room(t);
		set_state(t, e, NEIGH_INCOMPLETE, now);
		e->probes = 0;
		e->deadline = now + t->p.retrans_ms;
		solicit(t, e, false);
	} else if (e->state == NEIGH_STALE) {
		/* Used while STALE: DELAY. */
		set_state(t, e, NEIGH_DELAY, now);
		e->deadline = now + t->p.delay_probe_ms;
	}
	if (!pkt)
		return 0;
	if (e->q_len == t->p.unres_qlen) {
		void *old = e->queue[e->q_head];

		e->q_head = (e->q_head + 1) % t->p.unres_qlen;
		e->q_len--;
		e->q_drops++;
		t->st.unres_discards++;
		if (t->cfg.ops && t->cfg.ops->drop)
			t->cfg.ops->drop(t->cfg.ops_ctx, old);
	}
	e->queue[(e->q_head + e->q_len) % t->p.unres_qlen] = pkt;
	e->q_len++;
	t->st.queued++;
	queue_flush(t, e);
	return 0;
}

static bool same_addr(const struct neigh_link *a, const struct neigh_link *b)
{
	return a && b && a->len == b->len && !memcmp(a->addr, b->addr, a->len);
}

struct neigh_entry *neigh_update(struct neigh_table *t, int family, const uint8_t *addr,
				 const struct neigh_link *ll, unsigned flags)
{
	uint64_t now = now_ms(t);
	struct neigh_entry *e = neigh_lookup(t, family, addr);
	enum neigh_state old, next;

	if (!e) {
		if (flags & NEIGH_F_OFF_LINK)
			t->st.learn_refused++;
		if (!(flags & (NEIGH_F_CREATE | NEIGH_F_ADMIN)))
			return NULL;
		e = create(t, family, addr, now);
		if (!e)
			return NULL;
		set_state(t, e, NEIGH_NONE, now);
	}
	old = (enum neigh_state)e->state;
	if (old == NEIGH_PERMANENT && !(flags & NEIGH_F_ADMIN))
		return e;
	if (flags & NEIGH_F_ADMIN) {
		if (ll && !same_addr(e->link, ll))
			publish_link(t, e, ll);
		set_state(t, e, NEIGH_PERMANENT, now);
		e->deadline = NEVER;
		queue_flush(t, e);
		return e;
	}
	if (!ll) {
		/* A confirmation without an address (e.g. NA without TLLA): only for an
		 * entry that has one. */
		if (!e->link || old == NEIGH_INCOMPLETE || old == NEIGH_NONE)
			return e;
		ll = e->link;
	}
	bool have = e->link && old != NEIGH_INCOMPLETE && old != NEIGH_NONE && old != NEIGH_FAILED;
	bool changed = !same_addr(e->link, ll);

	if (have && changed && !(flags & NEIGH_F_OVERRIDE)) {
		/* Linux: keep the address; a REACHABLE entry becomes STALE. */
		if (old == NEIGH_REACHABLE) {
			set_state(t, e, NEIGH_STALE, now);
			e->deadline = NEVER;
		}
		return e;
	}
	if (changed) {
		if (e->link)
			t->st.lladdr_changes++;
		publish_link(t, e, ll);
	}
	if (flags & NEIGH_F_SOLICITED) {
		next = NEIGH_REACHABLE;
		e->confirmed = now;
	} else if (changed || !have) {
		next = NEIGH_STALE;
	} else {
		next = old; /* same address, unsolicited: no change */
	}
	if (next != old || changed) {
		set_state(t, e, next, now);
		e->probes = 0;
		e->deadline = next == NEIGH_REACHABLE ? now + t->reachable_ms : NEVER;
	}
	queue_flush(t, e);
	return e;
}

void neigh_set_link(struct neigh_table *t, struct neigh_entry *e, const struct neigh_link *ll)
{
	publish_link(t, e, ll);
	queue_flush(t, e);
}

static void fail(struct neigh_table *t, struct neigh_entry *e, uint64_t now)
{
	t->st.res_failed++;
	set_state(t, e, NEIGH_FAILED, now);
	e->failed_at = now;
	e->deadline = NEVER;
	queue_drop_all(t, e);
}

static void entry_timer(struct neigh_table *t, struct neigh_entry *e, uint64_t now)
{
	uint64_t ch = __atomic_load_n(&e->confirmed_hint, __ATOMIC_RELAXED);
	uint64_t uh = used_hint(t, e);

	if (ch > e->confirmed)
		e->confirmed = ch;
	switch ((enum neigh_state)e->state) {
	case NEIGH_STALE:
		if (uh > e->used_seen && uh >= e->updated) {
			e->used_seen = uh;
			set_state(t, e, NEIGH_DELAY, now);
			e->deadline = now + t->p.delay_probe_ms;
		}
		break;
	case NEIGH_REACHABLE:
		if (uh > e->used_seen)
			e->used_seen = uh;
		if (now < e->confirmed + t->reachable_ms) {
			e->deadline = e->confirmed + t->reachable_ms;
			break;
		}
		if (e->used_seen && now < e->used_seen + t->p.delay_probe_ms) {
			set_state(t, e, NEIGH_DELAY, now);
			e->deadline = now + t->p.delay_probe_ms;
		} else {
			set_state(t, e, NEIGH_STALE, now);
			e->deadline = NEVER;
		}
		break;
	case NEIGH_DELAY:
		if (uh > e->used_seen)
			e->used_seen = uh;
		if (e->confirmed && now < e->confirmed + t->p.delay_probe_ms) {
			set_state(t, e, NEIGH_REACHABLE, now);
			e->deadline = e->confirmed + t->reachable_ms;
		} else if (now >= e->deadline) {
			set_state(t, e, NEIGH_PROBE, now);
			e->probes = 0;
			e->deadline = now + t->p.retrans_ms;
			solicit(t, e, true);
		}
		break;
	case NEIGH_PROBE:
		if (e->confirmed && e->confirmed >= e->updated) {
			set_state(t, e, NEIGH_REACHABLE, now);
			e->deadline = e->confirmed + t->reachable_ms;
		} else if (now >= e->deadline) {
			if (e->probes >= t->p.ucast_probes) {
				fail(t, e, now);
			} else {
				e->deadline = now + t->p.retrans_ms;
				solicit(t, e, true);
			}
		}
		break;
	case NEIGH_INCOMPLETE:
		if (now >= e->deadline) {
			if (e->probes >= t->p.mcast_probes) {
				fail(t, e, now);
			} else {
				e->deadline = now + t->p.retrans_ms;
				solicit(t, e, false);
			}
		}
		break;
	default:
		break;
	}
}

uint64_t neigh_tick(struct neigh_table *t)
{
	uint64_t now = now_ms(t), next = now + 1000;

	if (now - t->reachable_drawn >= REACHABLE_REDRAW_MS)
		draw_reachable(t, now);
	for (unsigned b = 0; b <= t->mask; b++) {
		for (struct neigh_entry *e = t->buckets[b]; e; e = e->next) {
			if (e->state == NEIGH_PERMANENT || e->state == NEIGH_FAILED)
				continue;
			if (e->deadline <= now || e->state == NEIGH_STALE ||
			    e->state == NEIGH_DELAY || e->state == NEIGH_PROBE ||
			    e->state == NEIGH_REACHABLE)
				entry_timer(t, e, now);
			if (e->deadline != NEVER && e->deadline < next)
				next = e->deadline;
		}
	}
	if (now >= t->next_gc) {
		t->next_gc = now + t->p.gc_interval_ms;
		if (t->count > t->p.gc_thresh1) {
			t->st.periodic_gc_runs++;
			gc_run(t, now);
		} else {
			/* Below thresh1 Linux keeps everything; FAILED entries still go. */
			for (unsigned b = 0; b <= t->mask; b++) {
				struct neigh_entry *e = t->buckets[b], *nx;

				for (; e; e = nx) {
					nx = e->next;
					if (e->state == NEIGH_FAILED)
						unlink_entry(t, e);
				}
			}
		}
	}
	return next > now ? next - now : 0;
}

void neigh_flush(struct neigh_table *t)
{
	for (unsigned b = 0; b <= t->mask; b++) {
		struct neigh_entry *e = t->buckets[b], *next;

		for (; e; e = next) {
			next = e->next;
			if (e->state != NEIGH_PERMANENT)
				unlink_entry(t, e);
		}
	}
}

void neigh_table_free(struct neigh_table *t)
{
	if (!t)
		return;
	for (unsigned b = 0; b <= t->mask; b++) {
		struct neigh_entry *e = t->buckets[b], *next;

		for (; e; e = next) {
			next = e->next;
			queue_drop_all(t, e);
			if (e->link)
				__atomic_add_fetch(&t->links->refs, 1, __ATOMIC_RELAXED);
			entry_free(e);
		}
	}
	idx_free(t->idx);
	arena_unref(t->links); /* the table's; deferred frees still in flight hold theirs */
	free(t->buckets);
	free(t);
}

void neigh_info_of(const struct neigh_table *t, const struct neigh_entry *e, struct neigh_info *ni)
{
	uint64_t now = now_ms(t);
	uint64_t c = e->confirmed, u = e->used_seen;
	uint64_t ch = __atomic_load_n(&e->confirmed_hint, __ATOMIC_RELAXED);
	uint64_t uh = used_hint(t, e);

	if (ch > c)
		c = ch;
	if (uh > u)
		u = uh;
	memset(ni, 0, sizeof(*ni));
	ni->family = e->family;
	memcpy(ni->addr, e->addr, addr_len(e->family));
	ni->state = (enum neigh_state)e->state;
	if (e->link) {
		ni->link = *e->link;
		ni->has_link = true;
	}
	ni->age_ms = now - e->updated;
	ni->confirmed_ms = c ? now - c : UINT64_MAX;
	ni->used_ms = u ? now - u : UINT64_MAX;
	ni->queued = e->q_len;
	ni->probes = e->probes;
	ni->queue_drops = e->q_drops;
}

bool neigh_walk_from(const struct neigh_table *t, unsigned *bucket, bool (*stop)(void *arg),
		     int (*fn)(void *arg, const struct neigh_info *ni), void *arg)
{
	for (unsigned b = *bucket; b <= t->mask; b++) {
		if (stop && b != *bucket && stop(arg)) {
			*bucket = b;
			return true;
		}
		for (const struct neigh_entry *e = t->buckets[b]; e; e = e->next) {
			struct neigh_info ni;

			neigh_info_of(t, e, &ni);
			if (fn(arg, &ni)) {
				*bucket = b + 1;
				return true;
			}
		}
	}
	*bucket = t->mask + 1;
	return false;
}

void neigh_foreach(const struct neigh_table *t, int (*fn)(void *arg, const struct neigh_info *ni),
		   void *arg)
{
	unsigned b = 0;

	(void)neigh_walk_from(t, &b, NULL, fn, arg);
}

void neigh_foreach_entry(struct neigh_table *t,
			 void (*fn)(void *arg, struct neigh_table *t, struct neigh_entry *e),
			 void *arg)
{
	for (unsigned b = 0; b <= t->mask; b++)
		for (struct neigh_entry *e = t->buckets[b]; e; e = e->next)
			fn(arg, t, e);
}

void neigh_table_stats(const struct neigh_table *t, struct neigh_stats *out)
{
	*out = t->st;
	out->entries = t->count;
	out->unresolved = t->n_unres;
}

bool neigh_on_link(const struct ip_prefix *p, unsigned n, int family, const uint8_t *addr)
{
	struct ip_addr a = { .family = (uint8_t)family };

	if (family == AF_INET6 && addr[0] == 0xfe && (addr[1] & 0xc0) == 0x80)
		return true; /* fe80::/10 */
	memcpy(a.bytes, addr, addr_len(family));
	for (unsigned i = 0; i < n; i++)
		if (ip_prefix_contains(&p[i], &a))
			return true;
	return false;
}

const struct neigh_params *neigh_table_params(const struct neigh_table *t)
{
	return &t->p;
}

uint32_t neigh_reachable_time(const struct neigh_table *t)
{
	return t->reachable_ms;
}
