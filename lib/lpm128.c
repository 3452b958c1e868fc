/*
 * lpm128: the writer side of the compressed multibit trie (see lpm128.h).
 *
 * Every change copies the nodes from the root down to the node where the prefix ends,
 * rebuilds that node's leaf runs from its own prefix list, and links the copies
 * bottom-up; only then is the new root published. The replaced nodes are handed to the
 * free function after the publish. An allocation failure frees the new copies and
 * leaves the published trie untouched.
 */
#include "lib/lpm128.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct change {
	unsigned depth, slotbits, len; /* node depth, bits inside it, length inside it */
	uint32_t value;                /* 0: delete */
	int result;                    /* 0, -ENOENT */
	int delta;                     /* prefixes added (+1), removed (-1), replaced (0) */
	/* Nodes replaced (to free after publishing) and nodes built (to free on failure). */
	struct lpm128_node *old[LPM128_LEVELS], *built[LPM128_LEVELS];
	unsigned nold, nbuilt;
};

static size_t node_size(unsigned nchild, unsigned nleaf, unsigned npfx)
{
	return sizeof(struct lpm128_node) + nchild * sizeof(struct lpm128_node *) +
	       npfx * sizeof(struct lpm128_pfx) + nleaf * sizeof(uint32_t);
}

static struct lpm128_node *node_alloc(unsigned nchild, unsigned nleaf, unsigned npfx)
{
	struct lpm128_node *n = calloc(1, node_size(nchild, nleaf, npfx));
	uint8_t *p;

	if (!n)
		return NULL;
	p = (uint8_t *)(n + 1);
	n->children = (struct lpm128_node **)p;
	p += nchild * sizeof(struct lpm128_node *);
	n->pfx = (struct lpm128_pfx *)p;
	p += npfx * sizeof(struct lpm128_pfx);
	n->leaves = (uint32_t *)p;
	n->nchild = (uint16_t)nchild;
	n->nleaf = (uint16_t)nleaf;
	n->npfx = (uint16_t)npfx;
	return n;
}

static bool vec_test(const uint64_t v[4], unsigned s)
{
	return v[s >> 6] >> (s & 63) & 1;
}

static void vec_set(uint64_t v[4], unsigned s)
{
	v[s >> 6] |= 1ull << (s & 63);
}

/* Expand pfx[] over the 256 slots: vals[s] = value of the longest prefix covering s. */
static unsigned expand(const struct lpm128_pfx *pfx, unsigned npfx, uint32_t vals[256])
{
	int lens[256];
	unsigned runs = 0;

	for (unsigned s = 0; s < 256; s++) {
		vals[s] = 0;
		lens[s] = -1;
	}
	for (unsigned i = 0; i < npfx; i++) {
		unsigned shift = LPM128_STRIDE - pfx[i].len;
		unsigned lo = (unsigned)pfx[i].bits << shift, hi = lo + (1u << shift);

		for (unsigned s = lo; s < hi; s++)
			if (lens[s] < pfx[i].len) {
				lens[s] = pfx[i].len;
				vals[s] = pfx[i].value;
			}
	}
	for (unsigned s = 0; s < 256; s++)
		if (s == 0 || vals[s] != vals[s - 1])
			runs++;
	return runs;
}

/*
 * Build the replacement of node n (NULL: none yet) at depth d for change c, where
 * child (when d < c->depth) is the already-built replacement of the child on the path
 * (NULL: that child goes away). Returns the new node, or NULL with *err set (-ENOMEM),
 * or NULL with *err 0 when the node ends up empty.
 */
static struct lpm128_node *rebuild(const struct lpm128_node *n, unsigned d, unsigned slot,
				   struct lpm128_node *child, const struct change *c, int *err,
				   int *pfx_result, int *delta)
{
	struct lpm128_pfx pfx[2 * 256];
	unsigned npfx = n ? n->npfx : 0, nchild = n ? n->nchild : 0;
	uint64_t childvec[4] = { 0 };
	uint32_t vals[256];
	struct lpm128_node *out;
	unsigned runs, ci = 0, k;
	bool had_child;

	*err = 0;
	if (n) {
		memcpy(pfx, n->pfx, npfx * sizeof(*pfx));
		memcpy(childvec, n->childvec, sizeof(childvec));
	}
	if (d == c->depth) {
		unsigned i;

		for (i = 0; i < npfx; i++)
			if (pfx[i].len == c->len && pfx[i].bits == c->slotbits)
				break;
		if (c->value) {
			if (i == npfx) {
				pfx[npfx++] = (struct lpm128_pfx){ (uint8_t)c->slotbits,
								   (uint8_t)c->len, c->value };
				*delta = 1;
			} else {
				pfx[i].value = c->value;
				*delta = 0;
			}
		} else {
			if (i == npfx) {
				*pfx_result = -ENOENT;
				return NULL;
			}
			pfx[i] = pfx[--npfx];
			*delta = -1;
		}
	} else {
		had_child = vec_test(childvec, slot);
		if (had_child && !child) {
			childvec[slot >> 6] &= ~(1ull << (slot & 63));
			nchild--;
		} else if (!had_child && child) {
			vec_set(childvec, slot);
			nchild++;
		}
	}
	if (npfx == 0 && nchild == 0)
		return NULL;
	runs = expand(pfx, npfx, vals);
	out = node_alloc(nchild, runs, npfx);
	if (!out) {
		*err = -ENOMEM;
		return NULL;
	}
	memcpy(out->childvec, childvec, sizeof(childvec));
	memcpy(out->pfx, pfx, npfx * sizeof(*pfx));
	k = 0;
	for (unsigned s = 0; s < 256; s++)
		if (s == 0 || vals[s] != vals[s - 1]) {
			vec_set(out->leafvec, s);
			out->leaves[k++] = vals[s];
		}
	/* Children: the old ones in slot order, with the path's slot replaced. */
	for (unsigned s = 0; s < 256; s++) {
		if (!vec_test(childvec, s))
			continue;
		if (d != c->depth && s == slot)
			out->children[ci++] = child;
		else
			out->children[ci++] = n->children[lpm128_rank_(n->childvec, s)];
	}
	return out;
}

static void locate(const uint8_t key[16], unsigned len, unsigned *depth, unsigned *bits,
		   unsigned *rlen)
{
	if (len == 0) {
		*depth = 0;
		*bits = 0;
		*rlen = 0;
		return;
	}
	*depth = (len - 1) / LPM128_STRIDE;
	*rlen = len - *depth * LPM128_STRIDE;
	*bits = (unsigned)key[*depth] >> (LPM128_STRIDE - *rlen);
}

static int apply(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value)
{
	const struct lpm128_node *path[LPM128_LEVELS];
	struct lpm128_node *built[LPM128_LEVELS] = { 0 }, *child = NULL, *old_root;
	struct change c = { .value = value };
	unsigned d;
	int err = 0, pres = 0, delta = 0;

	if (len > 128 || !key)
		return -EINVAL;
	locate(key, len, &c.depth, &c.slotbits, &c.len);
	/* Walk down, remembering the existing nodes on the path. */
	path[0] = t->root;
	for (d = 1; d <= c.depth; d++) {
		const struct lpm128_node *p = path[d - 1];
		unsigned s = key[d - 1];

		path[d] = p && vec_test(p->childvec, s) ? p->children[lpm128_rank_(p->childvec, s)]
							: NULL;
	}
	if (!value && !path[c.depth])
		return -ENOENT;
	/* Rebuild bottom-up. */
	for (d = c.depth + 1; d-- > 0;) {
		child = rebuild(path[d], d, key[d], child, &c, &err, &pres, &delta);
		if (err || pres)
			goto fail;
		built[d] = child;
	}
	old_root = t->root;
	__atomic_store_n(&t->root, child, __ATOMIC_RELEASE);
	(void)old_root;
	/* Account and hand the replaced nodes over. */
	for (d = 0; d <= c.depth; d++) {
		if (path[d]) {
			t->nnode--;
			t->bytes -= node_size(path[d]->nchild, path[d]->nleaf, path[d]->npfx);
			if (t->free_fn)
				t->free_fn(t->free_ctx, (void *)path[d]);
			else
				free((void *)path[d]);
		}
		if (built[d]) {
			t->nnode++;
			t->bytes += node_size(built[d]->nchild, built[d]->nleaf, built[d]->npfx);
		}
	}
	t->nprefix = (size_t)((long)t->nprefix + delta);
	return 0;
fail:
	for (d = 0; d < LPM128_LEVELS; d++)
		free(built[d]);
	return err ? err : pres;
}

int lpm128_add(struct lpm128 *t, const uint8_t key[16], unsigned len, uint32_t value)
{
	if (!value)
		return -EINVAL;
	return apply(t, key, len, value);
}

int lpm128_del(struct lpm128 *t, const uint8_t key[16], unsigned len)
{
	return apply(t, key, len, 0);
}

uint32_t lpm128_get(const struct lpm128 *t, const uint8_t key[16], unsigned len)
{
	const struct lpm128_node *n = t->root;
	unsigned depth, bits, rlen;

	if (len > 128 || !key)
		return 0;
	locate(key, len, &depth, &bits, &rlen);
	for (unsigned d = 0; n && d < depth; d++) {
		unsigned s = key[d];

		n = vec_test(n->childvec, s) ? n->children[lpm128_rank_(n->childvec, s)] : NULL;
	}
	if (!n)
		return 0;
	for (unsigned i = 0; i < n->npfx; i++)
		if (n->pfx[i].len == rlen && n->pfx[i].bits == bits)
			return n->pfx[i].value;
	return 0;
}

int lpm128_new(struct lpm128 **out, lpm128_free_fn free_fn, void *free_ctx)
{
	struct lpm128 *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->free_fn = free_fn;
	t->free_ctx = free_ctx;
	*out = t;
	return 0;
}

static void free_tree(struct lpm128_node *n)
{
	if (!n)
		return;
	for (unsigned i = 0; i < n->nchild; i++)
		free_tree(n->children[i]);
	free(n);
}

void lpm128_free(struct lpm128 *t)
{
	if (!t)
		return;
	free_tree(t->root);
	free(t);
}

void lpm128_stats(const struct lpm128 *t, struct lpm128_stats *out)
{
	out->prefixes = t->nprefix;
	out->nodes = t->nnode;
	out->bytes = t->bytes;
}
