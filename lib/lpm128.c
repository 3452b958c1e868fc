/*
 * lpm128: the writer side of the DIR-16 + poptrie structure (see lpm128.h).
 *
 * A prefix of length <= 16 lives in sval (one value array per length); the dir entries
 * it covers are recomputed from sval (the longest covering length wins): a leaf entry
 * gets the new value, a node entry gets a copy of its node with the new def.
 * A longer prefix lives in the pfx list of the node where it ends. A change copies
 * that node (new leaf runs from its prefix list; a new block of its children when
 * their def changes), then, bottom-up, each ancestor with a new block of children
 * holding the new copy; only then is the dir entry stored. The replaced blocks and
 * prefix lists go to the free function after the store. An allocation failure frees
 * the new copies and leaves the published trie untouched.
 *
 * Ownership: a block (array of sibling nodes, or one top node) is one allocation; a
 * node's pfx list (with its out-of-line leaves) is another, owned by the node and
 * shared by its copies, so it is only retired when the node's prefixes change or the
 * node goes away.
 */
#include "lib/lpm128.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

_Static_assert(sizeof(struct lpm128_node) == 128, "two cache lines");
_Static_assert(offsetof(struct lpm128_node, leafvec) == 64, "line 1 starts with leafvec");

#define DIR_SIZE  (1u << LPM128_DIR_BITS)
#define SVAL_SIZE ((2u << LPM128_DIR_BITS) - 1)
#define LEAF(v)   ((uint64_t)(v) << 32 | 1)
#define NODE_SZ   sizeof(struct lpm128_node)

static uint32_t *sv(const struct lpm128 *t, unsigned len)
{
	return t->sval + (1u << len) - 1;
}

/*
 * Node memory. Every node, block of siblings and prefix/leaf list comes from one arena
 * shared by all tables of the process, carved from 32 MiB chunks on transparent huge
 * pages (madvise(MADV_HUGEPAGE); best effort): a lookup's loads then rarely miss the
 * TLB (docs/routing.md has the figures). Chunks are cut into 32 KiB slabs, each of one
 * size class (64-octet steps up to 4 KiB, 1 KiB steps up to 32 KiB; larger requests,
 * which the trie never makes, go to aligned_alloc). A freed object goes on its
 * class's free list. One mutex: the writer allocates and frees, and so does whichever
 * thread runs the RCU defer callback (lpm128_mem_free); readers never enter it.
 * Chunks are kept for the life of the process.
 * Under AddressSanitizer every object is a plain aligned_alloc/free instead, so that a
 * reader touching a node freed too early (an RCU bug) is still reported.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_OFF 1
#endif
#endif
#ifndef ARENA_OFF
#define ARENA_OFF 0
#endif

#define ARENA_CHUNK   (32u << 20)
#define ARENA_SLAB    (32u << 10)
#define ARENA_HUGE    (2u << 20)
#define ARENA_CHUNKS  256 /* 8 GiB */
#define ARENA_SMALL   4096u
#define ARENA_MAX     32768u
#define ARENA_CLASSES (ARENA_SMALL / 64 + (ARENA_MAX - ARENA_SMALL) / 1024)

static struct {
	pthread_mutex_t lock;
	void *free[ARENA_CLASSES];
	char *cur[ARENA_CLASSES], *end[ARENA_CLASSES]; /* the class's slab being cut */
	char *next, *last;                             /* slabs not handed out yet */
	char *chunk[ARENA_CHUNKS];
	uint8_t cls[ARENA_CHUNKS][ARENA_CHUNK / ARENA_SLAB]; /* class of each slab */
	unsigned nchunk;
	size_t slabs; /* handed out to size classes */
} arena = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The class of a request of sz octets (-1: malloc), *rounded its size. */
static int arena_class(size_t sz, size_t *rounded)
{
	if (sz <= ARENA_SMALL) {
		size_t c = sz ? (sz + 63) / 64 - 1 : 0;

		*rounded = (c + 1) * 64;
		return (int)c;
	}
	if (sz <= ARENA_MAX) {
		size_t c = (sz - ARENA_SMALL + 1023) / 1024;

		*rounded = ARENA_SMALL + c * 1024;
		return (int)(ARENA_SMALL / 64 + c - 1);
	}
	*rounded = sz;
	return -1;
}

/* What an allocation of sz octets costs (the size the accounting counts). */
static size_t asize(size_t sz)
{
	size_t r;

	(void)arena_class(sz, &r);
	return r;
}

static bool arena_chunk(void)
{
	char *p, *a;

	if (arena.nchunk == ARENA_CHUNKS)
		return false;
	p = mmap(NULL, ARENA_CHUNK + ARENA_HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return false;
	a = (char *)(((uintptr_t)p + ARENA_HUGE - 1) & ~(uintptr_t)(ARENA_HUGE - 1));
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (a + ARENA_CHUNK < p + ARENA_CHUNK + ARENA_HUGE)
		munmap(a + ARENA_CHUNK, (size_t)(p + ARENA_CHUNK + ARENA_HUGE - (a + ARENA_CHUNK)));
#ifdef MADV_HUGEPAGE
	(void)madvise(a, ARENA_CHUNK, MADV_HUGEPAGE); /* best effort: THP may be off */
#endif
	arena.chunk[arena.nchunk++] = a;
	arena.next = a;
	arena.last = a + ARENA_CHUNK;
	return true;
}

/* 64-octet aligned, zeroed when zero is set. NULL when out of memory. */
static void *mem_alloc(size_t sz, bool zero)
{
	size_t rounded;
	int c = arena_class(sz, &rounded);
	void *p = NULL;

	if (c < 0 || ARENA_OFF) {
		p = aligned_alloc(64, (sz + 63) & ~(size_t)63);
		if (p && zero)
			memset(p, 0, sz);
		return p;
	}
	pthread_mutex_lock(&arena.lock);
	if (arena.free[c]) {
		p = arena.free[c];
		arena.free[c] = *(void **)p;
	} else {
		if ((size_t)(arena.end[c] - arena.cur[c]) < rounded) {
			if (arena.next == arena.last && !arena_chunk())
				goto out;
			arena.cls[arena.nchunk - 1][(arena.next - arena.chunk[arena.nchunk - 1]) /
						    ARENA_SLAB] = (uint8_t)c;
			arena.cur[c] = arena.next;
			arena.end[c] = arena.next + ARENA_SLAB / rounded * rounded;
			arena.next += ARENA_SLAB;
			arena.slabs++;
		}
		p = arena.cur[c];
		arena.cur[c] += rounded;
	}
out:
	pthread_mutex_unlock(&arena.lock);
	if (p && zero)
		memset(p, 0, sz);
	return p;
}

void lpm128_mem_free(void *ptr)
{
	char *p = ptr;

	if (!p)
		return;
	pthread_mutex_lock(&arena.lock);
	for (unsigned i = 0; i < arena.nchunk; i++)
		if (p >= arena.chunk[i] && p < arena.chunk[i] + ARENA_CHUNK) {
			unsigned c = arena.cls[i][(size_t)(p - arena.chunk[i]) / ARENA_SLAB];

			*(void **)p = arena.free[c];
			arena.free[c] = p;
			pthread_mutex_unlock(&arena.lock);
			return;
		}
	pthread_mutex_unlock(&arena.lock);
	free(p); /* a large request's */
}

/* Allocations made (freed on failure) and replaced (retired after publishing). */
struct alloc {
	void *p;
	size_t sz;
};
struct txn {
	struct alloc made[4 * LPM128_LEVELS + 4], old[4 * LPM128_LEVELS + 4];
	unsigned nmade, nold;
	long dnode;
};

static void *txn_alloc(struct txn *x, size_t sz, bool block)
{
	void *p = mem_alloc(sz, block);

	if (!p)
		return NULL;
	x->made[x->nmade++] = (struct alloc){ p, asize(sz) };
	return p;
}

static void txn_retire(struct txn *x, const void *p, size_t sz)
{
	if (p)
		x->old[x->nold++] = (struct alloc){ (void *)(uintptr_t)p, asize(sz) };
}

static void retire_now(struct lpm128 *t, const void *p, size_t sz)
{
	if (!p)
		return;
	t->bytes -= sz;
	if (t->free_fn)
		t->free_fn(t->free_ctx, (void *)(uintptr_t)p);
	else
		lpm128_mem_free((void *)(uintptr_t)p);
}

static void txn_commit(struct lpm128 *t, struct txn *x)
{
	for (unsigned i = 0; i < x->nmade; i++)
		t->bytes += x->made[i].sz;
	for (unsigned i = 0; i < x->nold; i++)
		retire_now(t, x->old[i].p, x->old[i].sz);
	t->nnode = (size_t)((long)t->nnode + x->dnode);
}

static void txn_abort(struct txn *x)
{
	for (unsigned i = 0; i < x->nmade; i++)
		lpm128_mem_free(x->made[i].p);
}

static size_t ext_size(const struct lpm128_node *n)
{
	return n->npfx * sizeof(struct lpm128_pfx) +
	       (n->nleaf > LPM128_INLINE ? n->nleaf * sizeof(uint32_t) : 0);
}

/* Copy node src to dst (its final place): the inline leaves move with it. */
static void place(struct lpm128_node *dst, const struct lpm128_node *src)
{
	memcpy(dst, src, NODE_SZ);
	if (dst->nleaf <= LPM128_INLINE)
		dst->leaves = dst->inl;
}

static bool vec_test(const uint64_t v[4], unsigned s)
{
	return v[s >> 6] >> (s & 63) & 1;
}

static unsigned vec_rank(const uint64_t v[4], const uint8_t base[4], unsigned s)
{
	return base[s >> 6] + (unsigned)__builtin_popcountll(v[s >> 6] & ((1ull << (s & 63)) - 1));
}

static void vec_bases(const uint64_t v[4], uint8_t base[4])
{
	unsigned n = 0;

	for (unsigned w = 0; w < 4; w++) {
		base[w] = (uint8_t)n;
		n += (unsigned)__builtin_popcountll(v[w]);
	}
}

static const struct lpm128_node *child_of(const struct lpm128_node *n, unsigned s)
{
	if (!n || !vec_test(n->childvec, s))
		return NULL;
	return &n->children[vec_rank(n->childvec, n->cbase, s)];
}

/* Expand pfx[] over the 256 slots: vals[s] = value of the longest prefix covering s. */
static void expand(const struct lpm128_pfx *pfx, unsigned npfx, uint32_t vals[256])
{
	uint8_t lens[256] = { 0 };

	memset(vals, 0, 256 * sizeof(*vals));
	for (unsigned i = 0; i < npfx; i++) {
		unsigned shift = LPM128_STRIDE - pfx[i].len;
		unsigned lo = (unsigned)pfx[i].bits << shift, hi = lo + (1u << shift);

		for (unsigned s = lo; s < hi; s++)
			if (lens[s] < pfx[i].len) {
				lens[s] = pfx[i].len;
				vals[s] = pfx[i].value;
			}
	}
}

/* The value of the longest prefix of pfx[] covering slot s (a child's def). */
static uint32_t pfx_cover(const struct lpm128_node *n, unsigned s)
{
	unsigned best = 0;
	uint32_t v = 0;

	if (!n)
		return 0;
	for (unsigned i = 0; i < n->npfx; i++) {
		unsigned shift = LPM128_STRIDE - n->pfx[i].len;

		if (n->pfx[i].len > best && (s >> shift) == n->pfx[i].bits) {
			best = n->pfx[i].len;
			v = n->pfx[i].value;
		}
	}
	return v;
}

static uint32_t dir_cover(const struct lpm128 *t, unsigned i)
{
	for (int l = LPM128_DIR_BITS; l >= 0; l--) {
		uint32_t v = sv(t, (unsigned)l)[i >> (LPM128_DIR_BITS - l)];

		if (v)
			return v;
	}
	return 0;
}

/* Leaf runs of n from vals[], with its prefix list pfx[] (one new allocation). */
static int set_leaves(struct lpm128_node *n, const uint32_t vals[256], const struct lpm128_pfx *pfx,
		      unsigned npfx, struct txn *x)
{
	unsigned runs = 0, k = 0;
	uint32_t *leaves;
	size_t sz;

	memset(n->leafvec, 0, sizeof(n->leafvec));
	for (unsigned s = 0; s < 256; s++)
		if (s == 0 || vals[s] != vals[s - 1]) {
			n->leafvec[s >> 6] |= 1ull << (s & 63);
			runs++;
		}
	vec_bases(n->leafvec, n->lbase);
	n->nleaf = (uint16_t)runs;
	n->npfx = (uint16_t)npfx;
	sz = ext_size(n);
	n->pfx = NULL;
	if (sz) {
		n->pfx = txn_alloc(x, sz, false);
		if (!n->pfx)
			return -ENOMEM;
		if (npfx)
			memcpy(n->pfx, pfx, npfx * sizeof(*pfx));
	}
	leaves = runs > LPM128_INLINE ? (uint32_t *)(n->pfx + npfx) : n->inl;
	for (unsigned s = 0; s < 256; s++)
		if (s == 0 || vals[s] != vals[s - 1])
			leaves[k++] = vals[s];
	n->leaves = leaves;
	return 0;
}

/* An empty node (no prefixes, no children) with def. */
static void empty_node(struct lpm128_node *n, uint32_t def)
{
	memset(n, 0, NODE_SZ);
	n->def = def;
	n->leafvec[0] = 1;
	vec_bases(n->leafvec, n->lbase);
	n->nleaf = 1;
	n->leaves = n->inl;
}

/*
 * The change at the node where the prefix ends (depth D): *n is the new node (built
 * from old, which may be NULL), value 0 deletes. Returns 0, -ENOENT or -ENOMEM;
 * *delta: prefixes added (+1), removed (-1) or replaced (0).
 */
static int change_here(struct lpm128_node *n, const struct lpm128_node *old, uint32_t def,
		       unsigned bits, unsigned len, uint32_t value, struct txn *x, int *delta)
{
	struct lpm128_pfx pfx[2 * 256];
	unsigned npfx = old ? old->npfx : 0, i;
	uint32_t vals[256];
	bool redef = false;
	int rc;

	if (old) {
		place(n, old);
		if (npfx)
			memcpy(pfx, old->pfx, npfx * sizeof(*pfx));
	} else {
		empty_node(n, def);
	}
	for (i = 0; i < npfx; i++)
		if (pfx[i].len == len && pfx[i].bits == bits)
			break;
	if (value) {
		if (i == npfx) {
			pfx[npfx++] = (struct lpm128_pfx){ (uint8_t)bits, (uint8_t)len, value };
			*delta = 1;
		} else {
			pfx[i].value = value;
			*delta = 0;
		}
	} else {
		if (i == npfx)
			return -ENOENT;
		pfx[i] = pfx[--npfx];
		*delta = -1;
	}
	expand(pfx, npfx, vals);
	rc = set_leaves(n, vals, pfx, npfx, x);
	if (rc)
		return rc;
	if (old)
		txn_retire(x, old->pfx, ext_size(old));
	/* The children's def follow this node's prefixes. */
	for (unsigned s = 0, c = 0; s < 256 && old; s++)
		if (vec_test(old->childvec, s) && old->children[c++].def != vals[s])
			redef = true;
	if (redef) {
		struct lpm128_node *blk = txn_alloc(x, old->nchild * NODE_SZ, true);

		if (!blk)
			return -ENOMEM;
		for (unsigned s = 0, c = 0; s < 256; s++)
			if (vec_test(old->childvec, s)) {
				place(&blk[c], &old->children[c]);
				blk[c].def = vals[s];
				c++;
			}
		txn_retire(x, old->children, old->nchild * NODE_SZ);
		n->children = blk;
	}
	return 0;
}

/* n = copy of old (or a new empty node with def) whose child at slot s is child (NULL:
 * none). Returns 0 or -ENOMEM. */
static int relink(struct lpm128_node *n, const struct lpm128_node *old, uint32_t def, unsigned s,
		  const struct lpm128_node *child, struct txn *x)
{
	uint64_t cv[4] = { 0 };
	unsigned nchild, c = 0, k = 0;
	struct lpm128_node *blk = NULL;

	if (old)
		place(n, old);
	else
		empty_node(n, def);
	memcpy(cv, n->childvec, sizeof(cv));
	if (child)
		cv[s >> 6] |= 1ull << (s & 63);
	else
		cv[s >> 6] &= ~(1ull << (s & 63));
	nchild = 0;
	for (unsigned w = 0; w < 4; w++)
		nchild += (unsigned)__builtin_popcountll(cv[w]);
	if (nchild) {
		blk = txn_alloc(x, nchild * NODE_SZ, true);
		if (!blk)
			return -ENOMEM;
		for (unsigned t = 0; t < 256; t++) {
			bool had = old && vec_test(old->childvec, t);

			if (t == s) {
				if (child)
					place(&blk[k++], child);
			} else if (had) {
				place(&blk[k++], &old->children[c]);
			}
			c += had;
		}
	}
	if (old && old->nchild)
		txn_retire(x, old->children, old->nchild * NODE_SZ);
	memcpy(n->childvec, cv, sizeof(cv));
	vec_bases(cv, n->cbase);
	n->nchild = (uint16_t)nchild;
	n->children = blk;
	return 0;
}

static bool node_empty(const struct lpm128_node *n)
{
	return n->npfx == 0 && n->nchild == 0;
}

static int apply_long(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value)
{
	const struct lpm128_node *path[LPM128_LEVELS];
	struct lpm128_node cur, up;
	unsigned i = (unsigned)key[0] << 8 | key[1];
	unsigned D = (len - LPM128_DIR_BITS - 1) / LPM128_STRIDE;
	unsigned rlen = len - LPM128_DIR_BITS - D * LPM128_STRIDE;
	uint64_t e = t->dir[i];
	struct txn x = { .nmade = 0 };
	bool present;
	int delta = 0, rc;
	uint32_t def;

	path[0] = e & 1 ? NULL : (const struct lpm128_node *)(uintptr_t)e;
	for (unsigned d = 1; d <= D; d++)
		path[d] = child_of(path[d - 1], key[1 + d]);
	if (!value && !path[D])
		return -ENOENT;
	def = D ? pfx_cover(path[D - 1], key[1 + D]) : dir_cover(t, i);
	rc = change_here(&cur, path[D], def, (unsigned)key[2 + D] >> (LPM128_STRIDE - rlen), rlen,
			 value, &x, &delta);
	if (rc)
		goto fail;
	present = !node_empty(&cur);
	x.dnode += (present ? 1 : 0) - (path[D] ? 1 : 0);
	for (unsigned d = D; d-- > 0;) {
		def = d ? pfx_cover(path[d - 1], key[1 + d]) : dir_cover(t, i);
		rc = relink(&up, path[d], def, key[2 + d], present ? &cur : NULL, &x);
		if (rc)
			goto fail;
		present = !node_empty(&up);
		x.dnode += (present ? 1 : 0) - (path[d] ? 1 : 0);
		cur = up;
		if (cur.nleaf <= LPM128_INLINE)
			cur.leaves = cur.inl;
	}
	if (present) {
		struct lpm128_node *top = txn_alloc(&x, NODE_SZ, true);

		if (!top) {
			rc = -ENOMEM;
			goto fail;
		}
		place(top, &cur);
		e = (uint64_t)(uintptr_t)top;
	} else {
		e = LEAF(dir_cover(t, i));
	}
	__atomic_store_n(&t->dir[i], e, __ATOMIC_RELEASE);
	txn_retire(&x, path[0], NODE_SZ);
	txn_commit(t, &x);
	t->nprefix = (size_t)((long)t->nprefix + delta);
	return 0;
fail:
	txn_abort(&x);
	return rc;
}

static int apply_short(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value)
{
	unsigned i0 = ((unsigned)key[0] << 8 | key[1]) >> (LPM128_DIR_BITS - len);
	unsigned lo = i0 << (LPM128_DIR_BITS - len), cnt = 1u << (LPM128_DIR_BITS - len);
	uint32_t *slot = &sv(t, len)[i0], old = *slot;
	struct lpm128_node **fresh;
	unsigned nfresh = 0;

	if (!value && !old)
		return -ENOENT;
	/* New copies of the top nodes whose def changes, all made before any store:
	 * fresh[i - lo] for entry i. */
	*slot = value;
	fresh = calloc(cnt, sizeof(*fresh));
	if (!fresh)
		goto nomem;
	for (unsigned i = lo; i < lo + cnt; i++) {
		uint64_t e = t->dir[i];
		const struct lpm128_node *n = (const void *)(uintptr_t)e;
		uint32_t def;

		if (e & 1)
			continue;
		def = dir_cover(t, i);
		if (n->def == def)
			continue;
		fresh[i - lo] = mem_alloc(NODE_SZ, false);
		if (!fresh[i - lo])
			goto nomem;
		nfresh++;
		place(fresh[i - lo], n);
		fresh[i - lo]->def = def;
	}
	for (unsigned i = lo; i < lo + cnt; i++) {
		uint64_t e = t->dir[i];

		if (e & 1) {
			uint64_t ne = LEAF(dir_cover(t, i));

			if (ne != e)
				__atomic_store_n(&t->dir[i], ne, __ATOMIC_RELEASE);
		} else if (fresh[i - lo]) {
			__atomic_store_n(&t->dir[i], (uint64_t)(uintptr_t)fresh[i - lo],
					 __ATOMIC_RELEASE);
			t->bytes += NODE_SZ;
			retire_now(t, (const void *)(uintptr_t)e, NODE_SZ);
		}
	}
	free(fresh);
	t->nprefix = t->nprefix + (value && !old) - (!value && old);
	return 0;
nomem:
	*slot = old;
	for (unsigned j = 0; fresh && nfresh && j < cnt; j++)
		lpm128_mem_free(fresh[j]);
	free(fresh);
	return -ENOMEM;
}

int lpm128_add(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value)
{
	if (!value || len > 128 || !key)
		return -EINVAL;
	return len <= LPM128_DIR_BITS ? apply_short(t, key, len, value)
				      : apply_long(t, key, len, value);
}

int lpm128_del(struct lpm128 *t, const uint8_t key[16], unsigned len)
{
	if (len > 128 || !key)
		return -EINVAL;
	return len <= LPM128_DIR_BITS ? apply_short(t, key, len, 0) : apply_long(t, key, len, 0);
}

uint32_t lpm128_get(const struct lpm128 *t, const uint8_t key[16], unsigned len)
{
	unsigned i, D, rlen, bits;
	const struct lpm128_node *n;
	uint64_t e;

	if (len > 128 || !key)
		return 0;
	i = (unsigned)key[0] << 8 | key[1];
	if (len <= LPM128_DIR_BITS)
		return sv(t, len)[i >> (LPM128_DIR_BITS - len)];
	D = (len - LPM128_DIR_BITS - 1) / LPM128_STRIDE;
	rlen = len - LPM128_DIR_BITS - D * LPM128_STRIDE;
	bits = (unsigned)key[2 + D] >> (LPM128_STRIDE - rlen);
	e = t->dir[i];
	n = e & 1 ? NULL : (const struct lpm128_node *)(uintptr_t)e;
	for (unsigned d = 1; n && d <= D; d++)
		n = child_of(n, key[1 + d]);
	for (unsigned k = 0; n && k < n->npfx; k++)
		if (n->pfx[k].len == rlen && n->pfx[k].bits == bits)
			return n->pfx[k].value;
	return 0;
}

int lpm128_new(struct lpm128 **out, lpm128_free_fn free_fn, void *free_ctx)
{
	struct lpm128 *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->dir = aligned_alloc(64, DIR_SIZE * sizeof(*t->dir));
	t->sval = calloc(SVAL_SIZE, sizeof(*t->sval));
	if (!t->dir || !t->sval) {
		free(t->dir);
		free(t->sval);
		free(t);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < DIR_SIZE; i++)
		t->dir[i] = LEAF(0);
	t->free_fn = free_fn;
	t->free_ctx = free_ctx;
	t->bytes = DIR_SIZE * sizeof(*t->dir) + SVAL_SIZE * sizeof(*t->sval);
	*out = t;
	return 0;
}

/* Free what node n owns: its prefix list and, recursively, its block of children. */
static void free_owned(struct lpm128_node *n)
{
	for (unsigned c = 0; c < n->nchild; c++)
		free_owned((struct lpm128_node *)(uintptr_t)&n->children[c]);
	lpm128_mem_free((void *)(uintptr_t)n->children);
	lpm128_mem_free(n->pfx);
}

void lpm128_free(struct lpm128 *t)
{
	if (!t)
		return;
	for (unsigned i = 0; i < DIR_SIZE; i++)
		if (!(t->dir[i] & 1)) {
			struct lpm128_node *n = (struct lpm128_node *)(uintptr_t)t->dir[i];

			free_owned(n);
			lpm128_mem_free(n);
		}
	free(t->dir);
	free(t->sval);
	free(t);
}

void lpm128_stats(const struct lpm128 *t, struct lpm128_stats *out)
{
	out->prefixes = t->nprefix;
	out->nodes = t->nnode;
	out->bytes = t->bytes;
	pthread_mutex_lock(&arena.lock);
	out->arena_bytes = arena.slabs * ARENA_SLAB;
	pthread_mutex_unlock(&arena.lock);
}

/*
 * lpm128_lookup_bulk: the keys of a chunk walk level by level, together. Round r reads
 * level r of every key still walking and prefetches what round r + 1 needs: both lines
 * of the child, or the leaf where the walk ends. Nothing inside a round branches on the
 * key: the child and the leaf are both computed and one is picked, and the list of
 * walkers is compacted with an add. So the loads of a round are independent of each
 * other (their misses overlap), and walks of different depths cost no mispredicted
 * branches. The leaves are read last, for every key at once. Measured on the geoip6
 * table (2026-11-26, keys inside the table): 1.05-1.17x the rate of a 16-slot software
 * pipeline (one key per slot, a branch per step) with keys over the whole table, 1.4x
 * with keys inside 2000 of its prefixes (in cache); reading line 1 only for the last
 * node of a walk (one line less per level) was 15% slower than prefetching both.
 */
#define BULK_CHUNK 64
#define BULK_AHEAD 8 /* dir entries prefetched ahead */

void lpm128_lookup_bulk(const struct lpm128 *t, const uint8_t (*keys)[16], uint32_t *values,
			unsigned n)
{
	const uint64_t *dir = t->dir;

	for (unsigned i = 0; i < n && i < BULK_AHEAD; i++)
		__builtin_prefetch(&dir[(unsigned)keys[i][0] << 8 | keys[i][1]]);
	for (unsigned base = 0; base < n; base += BULK_CHUNK) {
		const struct lpm128_node *nd[BULK_CHUNK];
		const struct lpm128_node *last[BULK_CHUNK];
		const uint32_t *leaf[BULK_CHUNK];
		uint32_t best[BULK_CHUNK];
		uint8_t pos[BULK_CHUNK];
		uint8_t walk[BULK_CHUNK], walked[BULK_CHUNK];
		unsigned m = n - base < BULK_CHUNK ? n - base : BULK_CHUNK, nw = 0, nwalked;

		for (unsigned j = 0; j < m; j++) {
			unsigned i = base + j;
			const uint64_t *de = &dir[(unsigned)keys[i][0] << 8 | keys[i][1]];
			uint64_t e = __atomic_load_n(de, __ATOMIC_ACQUIRE);
			unsigned isnode = !(e & 1);

			if (i + BULK_AHEAD < n)
				__builtin_prefetch(&dir[(unsigned)keys[i + BULK_AHEAD][0] << 8 |
							keys[i + BULK_AHEAD][1]]);
			values[i] = (uint32_t)(e >> 32); /* a leaf's answer; else overwritten */
			nd[j] = (const struct lpm128_node *)(uintptr_t)(isnode ? e : (uintptr_t)de);
			__builtin_prefetch(nd[j]);
			__builtin_prefetch((const char *)nd[j] + 64);
			best[j] = 0;
			walk[nw] = (uint8_t)j;
			nw += isnode;
		}
		memcpy(walked, walk, nw);
		nwalked = nw;
		for (unsigned d = 2; nw; d++) {
			unsigned nn = 0;

			for (unsigned q = 0; q < nw; q++) {
				unsigned j = walk[q], s = keys[base + j][d], w = s >> 6, b = s & 63;
				const struct lpm128_node *c = nd[j];
				uint64_t cv = c->childvec[w];
				unsigned has = cv >> b & 1;
				/* Integer arithmetic: children is NULL in a node without. */
				uintptr_t child = (uintptr_t)c->children +
						  (c->cbase[w] + (unsigned)__builtin_popcountll(
								     cv & ((1ull << b) - 1))) *
						      sizeof(*c);

				best[j] = c->def ? c->def : best[j];
				__builtin_prefetch((const void *)child);
				__builtin_prefetch((const void *)(child + 64));
				last[j] = c;
				nd[j] = (const struct lpm128_node *)child;
				pos[j] = (uint8_t)s;
				walk[nn] = (uint8_t)j;
				nn += has;
			}
			nw = nn;
		}
		for (unsigned q = 0; q < nwalked; q++) {
			unsigned j = walked[q], s = pos[j], w = s >> 6, b = s & 63;
			const struct lpm128_node *c = last[j];

			leaf[j] =
			    c->leaves + c->lbase[w] +
			    (unsigned)__builtin_popcountll(c->leafvec[w] & ((2ull << b) - 1)) - 1;
			__builtin_prefetch(leaf[j]);
		}
		for (unsigned q = 0; q < nwalked; q++) {
			unsigned j = walked[q];
			uint32_t v = *leaf[j];

			values[base + j] = v ? v : best[j];
		}
	}
}
