/*
 * route: the RIB (a tree of prefixes, each with its routes) and the FIB it maintains
 * (lpm4/lpm6 plus shared next-hop and ECMP-group slots). See route.h for the rules.
 *
 * After any change to a prefix, its best route is chosen again and its FIB value is
 * recomputed: the usable next hops are interned (an identical next hop or group gets the
 * same slot, reference counted), the LPM entry is stored, and only then are the old
 * slots released; a slot whose count drops to zero is handed to the defer function and
 * reused when it calls back (after a grace period), through a lock-free return list.
 * Changes of connected routes re-resolve every gateway, so they walk the whole RIB.
 */
#include "table/route.h"

#include <errno.h>
#include <search.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define NONE UINT32_MAX

struct rentry {
	struct rentry *next;
	struct rt_route req; /* as given */
	struct rt_route r;   /* as shown: resolved ifindexes, flags, nh_resolved */
};

struct pentry {
	struct ip_prefix prefix;
	struct rentry *routes;
	uint32_t fib_value; /* installed, 0: none */
};

/* A pool of slots (next hops or groups) with interning, counts and deferred reuse. */
struct slot_meta {
	struct pool *pool;
	uint32_t id, refs, chain, ret_next;
	uint32_t hash;
};

struct pool {
	uint32_t cap, used;
	size_t size; /* bytes per slot */
	size_t key;  /* its first key bytes are the value (hashed, compared); the rest is
		      * the readers' cache, copied from the value interned */
	void *slots; /* published to readers; its own mapping */
	size_t slots_bytes;
	struct slot_meta *meta;
	uint32_t *free_ids, nfree;
	uint32_t *buckets, nbuckets;
	uint32_t returned; /* lock-free list head */
	lpm4_defer_fn defer;
	void *defer_ctx;
};

struct rt_table {
	struct rt_fib fib;
	struct pool nh, grp;
	void *tree; /* tsearch root of struct pentry */
	uint32_t nprefix, nroute;
	void (*changed)(void *ctx);
	void *changed_ctx;
};

static void notify(const struct rt_table *rt)
{
	if (rt->changed)
		rt->changed(rt->changed_ctx);
}

/* ---- pools ---- */

static uint32_t hash_bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return (uint32_t)(h ^ h >> 32);
}

static int pool_init(struct pool *p, uint32_t cap, size_t size, size_t key,
		     const struct rt_config *cfg)
{
	p->cap = cap;
	p->size = size;
	p->key = key;
	p->nbuckets = 1;
	while (p->nbuckets < cap)
		p->nbuckets <<= 1;
	/* The slots the workers read: their own mapping, page aligned (a 32-octet next hop
	 * never straddles two lines) and touched only where used (65,536 next hops are
	 * 2 MiB). Huge pages (madvise) were tried for fwd_bench's 141,024 and made no
	 * difference there (bench/README.md). */
	p->slots_bytes = (size_t)cap * size;
	p->slots = mmap(NULL, p->slots_bytes, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->slots == MAP_FAILED) {
		p->slots = NULL;
		return -ENOMEM;
	}
	p->meta = calloc(cap, sizeof(*p->meta));
	p->free_ids = calloc(cap, sizeof(*p->free_ids));
	p->buckets = malloc(p->nbuckets * sizeof(*p->buckets));
	if (!p->meta || !p->free_ids || !p->buckets)
		return -ENOMEM;
	memset(p->buckets, 0xff, p->nbuckets * sizeof(*p->buckets));
	for (uint32_t i = 0; i < cap; i++) {
		p->meta[i] = (struct slot_meta){ .pool = p, .id = i, .chain = NONE };
		p->free_ids[i] = cap - 1 - i;
	}
	p->nfree = cap;
	p->returned = NONE;
	p->defer = cfg->defer;
	p->defer_ctx = cfg->defer_ctx;
	return 0;
}

static void pool_fini(struct pool *p)
{
	if (p->slots)
		munmap(p->slots, p->slots_bytes);
	free(p->meta);
	free(p->free_ids);
	free(p->buckets);
}

static void *slot(const struct pool *p, uint32_t id)
{
	return (char *)p->slots + (size_t)id * p->size;
}

static void slot_returned(void *arg)
{
	struct slot_meta *m = arg;
	struct pool *p = m->pool;
	uint32_t head = __atomic_load_n(&p->returned, __ATOMIC_RELAXED);

	do
		m->ret_next = head;
	while (!__atomic_compare_exchange_n(&p->returned, &head, m->id, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
}

/* The slot holding *val (its key bytes), taking a reference; NONE when full. */
static uint32_t pool_intern(struct pool *p, const void *val)
{
	uint32_t h = hash_bytes(val, p->key), b = h & (p->nbuckets - 1), id;

	for (id = p->buckets[b]; id != NONE; id = p->meta[id].chain)
		if (p->meta[id].hash == h && !memcmp(slot(p, id), val, p->key)) {
			p->meta[id].refs++;
			return id;
		}
	if (!p->nfree) {
		id = __atomic_exchange_n(&p->returned, NONE, __ATOMIC_ACQUIRE);
		while (id != NONE) {
			p->free_ids[p->nfree++] = id;
			id = p->meta[id].ret_next;
		}
	}
	if (!p->nfree)
		return NONE;
	id = p->free_ids[--p->nfree];
	memcpy(slot(p, id), val, p->size); /* unseen by readers until an LPM store */
	p->meta[id].refs = 1;
	p->meta[id].hash = h;
	p->meta[id].chain = p->buckets[b];
	p->buckets[b] = id;
	p->used++;
	return id;
}

/* Drop a reference; true when the slot is now unused (and retired). */
static bool pool_put(struct pool *p, uint32_t id)
{
	uint32_t *link;

	if (--p->meta[id].refs)
		return false;
	for (link = &p->buckets[p->meta[id].hash & (p->nbuckets - 1)]; *link != id;
	     link = &p->meta[*link].chain)
		;
	*link = p->meta[id].chain;
	p->used--;
	if (p->defer)
		p->defer(p->defer_ctx, slot_returned, &p->meta[id]);
	else
		p->free_ids[p->nfree++] = id;
	return true;
}

static void value_put(struct rt_table *rt, uint32_t v)
{
	if (!v)
		return;
	if (v & RT_FIB_GROUP) {
		uint32_t gid = v & (RT_FIB_GROUP - 1);
		struct rt_fib_group g = *(struct rt_fib_group *)slot(&rt->grp, gid);

		if (pool_put(&rt->grp, gid))
			for (uint32_t i = 0; i < g.n; i++)
				pool_put(&rt->nh, g.nh[i]);
	} else {
		pool_put(&rt->nh, v - 1);
	}
}

/* ---- the prefix tree ---- */

static int pentry_cmp(const void *a, const void *b)
{
	const struct ip_prefix *x = a, *y = b; /* struct pentry starts with its prefix */
	int c;

	if (x->addr.family != y->addr.family)
		return x->addr.family == AF_INET ? -1 : 1;
	c = memcmp(x->addr.bytes, y->addr.bytes, 16);
	if (c)
		return c;
	return (int)x->len - (int)y->len;
}

static struct pentry *pentry_find(const struct rt_table *rt, const struct ip_prefix *p)
{
	void *const *n = tfind(p, &rt->tree, pentry_cmp);

	return n ? *n : NULL;
}

/* ---- resolution and selection ---- */

/* The interface of the longest connected route holding gw, or 0. At most one tree
 * lookup per prefix length. */
static uint32_t connected_ifindex(const struct rt_table *rt, const struct ip_addr *gw)
{
	for (int len = (int)ip_addr_bits(gw); len >= 0; len--) {
		struct ip_prefix p = { .addr = *gw, .len = (uint8_t)len };
		const struct pentry *pe;

		ip_prefix_mask(&p);
		pe = pentry_find(rt, &p);
		for (const struct rentry *e = pe ? pe->routes : NULL; e; e = e->next)
			if (e->r.source == RT_SRC_CONNECTED && e->r.nh[0].type == RT_NH_CONNECTED)
				return e->r.nh[0].ifindex;
	}
	return 0;
}

/* Fill e->r from e->req: gateways without an interface take the connected route's.
 * Returns true when the result changed. */
static bool resolve(const struct rt_table *rt, struct rentry *e)
{
	uint32_t before[RT_ECMP_MAX];
	uint16_t resolved_before = e->r.nh_resolved;
	uint8_t selected = e->r.flags & RT_F_SELECTED;
	bool changed;

	for (unsigned i = 0; i < RT_ECMP_MAX; i++)
		before[i] = e->r.nh[i].ifindex;
	e->r = e->req;
	e->r.nh_resolved = 0;
	for (unsigned i = 0; i < e->req.nnh; i++) {
		const struct rt_nexthop *want = &e->req.nh[i];

		if (want->type == RT_NH_GATEWAY && !want->ifindex)
			e->r.nh[i].ifindex = connected_ifindex(rt, &want->gw);
		if (want->type != RT_NH_GATEWAY || e->r.nh[i].ifindex)
			e->r.nh_resolved |= (uint16_t)(1u << i);
	}
	e->r.flags = (uint8_t)(selected | (e->r.nh_resolved ? 0 : RT_F_UNRESOLVED));
	changed = resolved_before != e->r.nh_resolved;
	for (unsigned i = 0; i < RT_ECMP_MAX; i++)
		changed |= before[i] != e->r.nh[i].ifindex;
	return changed;
}

static bool better(const struct rt_route *a, const struct rt_route *b)
{
	if (a->metric != b->metric)
		return a->metric < b->metric;
	return a->source < b->source;
}

/* Choose the prefix's best route, install its FIB value, move it to the list head. */
static int reselect(struct rt_table *rt, struct pentry *pe)
{
	struct rentry *best = NULL, **link, *e;
	uint32_t ids[RT_ECMP_MAX], n = 0, v = 0, old = pe->fib_value;
	int rc = 0;

	for (e = pe->routes; e; e = e->next) {
		e->r.flags &= (uint8_t)~RT_F_SELECTED;
		if (e->r.nh_resolved && (!best || better(&e->r, &best->r)))
			best = e;
	}
	if (best) {
		for (unsigned i = 0; i < best->r.nnh; i++) {
			struct rt_fib_nh fnh = { .type = best->r.nh[i].type,
						 .family = pe->prefix.addr.family,
						 .ifindex = best->r.nh[i].ifindex };
			uint32_t id;

			if (!(best->r.nh_resolved & (1u << i)))
				continue;
			if (fnh.type == RT_NH_GATEWAY)
				memcpy(fnh.gw, best->r.nh[i].gw.bytes, 16);
			id = pool_intern(&rt->nh, &fnh);
			if (id == NONE) {
				rc = -ENOSPC;
				goto undo;
			}
			/* keep ids sorted and unique: the group is a set */
			{
				unsigned k = n;

				while (k && ids[k - 1] > id)
					k--;
				if (k && ids[k - 1] == id) {
					pool_put(&rt->nh, id);
					continue;
				}
				memmove(&ids[k + 1], &ids[k], (n - k) * sizeof(*ids));
				ids[k] = id;
				n++;
			}
		}
		if (n == 1) {
			v = ids[0] + 1;
		} else {
			struct rt_fib_group g;
			uint32_t gid;

			memset(&g, 0, sizeof(g));
			g.n = n;
			memcpy(g.nh, ids, n * sizeof(*ids));
			gid = pool_intern(&rt->grp, &g);
			if (gid == NONE) {
				rc = -ENOSPC;
				goto undo;
			}
			if (rt->grp.meta[gid].refs > 1) /* existing group holds its own refs */
				for (uint32_t i = 0; i < n; i++)
					pool_put(&rt->nh, ids[i]);
			v = RT_FIB_GROUP | gid;
		}
	}
	if (v != old) {
		const struct ip_prefix *p = &pe->prefix;
		uint32_t a4 = (uint32_t)p->addr.bytes[0] << 24 | (uint32_t)p->addr.bytes[1] << 16 |
			      (uint32_t)p->addr.bytes[2] << 8 | p->addr.bytes[3];

		if (p->addr.family == AF_INET)
			rc = v ? lpm4_add(rt->fib.v4, a4, p->len, v)
			       : lpm4_del(rt->fib.v4, a4, p->len);
		else
			rc = v ? lpm6_add(rt->fib.v6, p->addr.bytes, p->len, v)
			       : lpm6_del(rt->fib.v6, p->addr.bytes, p->len);
		if (rc) {
			value_put(rt, v);
			return rc;
		}
		pe->fib_value = v;
		value_put(rt, old);
	} else {
		value_put(rt, v); /* same slots: drop the references just taken */
	}
	if (best) {
		best->r.flags |= RT_F_SELECTED;
		for (link = &pe->routes; *link != best; link = &(*link)->next)
			;
		*link = best->next;
		best->next = pe->routes;
		pe->routes = best;
	}
	return 0;
undo:
	for (uint32_t i = 0; i < n; i++)
		pool_put(&rt->nh, ids[i]);
	return rc;
}

static int check_route(const struct rt_route *r)
{
	struct ip_prefix m = r->prefix;
	unsigned special = 0;

	if ((r->prefix.addr.family != AF_INET && r->prefix.addr.family != AF_INET6) ||
	    r->prefix.len > ip_addr_bits(&r->prefix.addr) || r->nnh < 1 || r->nnh > RT_ECMP_MAX ||
	    r->source > RT_SRC_KERNEL)
		return -EINVAL;
	ip_prefix_mask(&m);
	if (memcmp(m.addr.bytes, r->prefix.addr.bytes, 16))
		return -EINVAL;
	for (unsigned i = 0; i < r->nnh; i++) {
		const struct rt_nexthop *nh = &r->nh[i];

		if (nh->type > RT_NH_BLACKHOLE)
			return -EINVAL;
		if (nh->type == RT_NH_GATEWAY && nh->gw.family != r->prefix.addr.family)
			return -EINVAL;
		if (nh->type == RT_NH_CONNECTED && !nh->ifindex)
			return -EINVAL;
		special += nh->type == RT_NH_LOCAL || nh->type == RT_NH_BLACKHOLE;
	}
	return special && r->nnh > 1 ? -EINVAL : 0;
}

static int put_route(struct rt_table *rt, const struct rt_route *r, bool replace)
{
	struct pentry *pe;
	struct rentry *e, *old = NULL, **link;
	bool new_prefix = false;
	int rc = check_route(r);

	if (rc)
		return rc;
	pe = pentry_find(rt, &r->prefix);
	if (!pe) {
		pe = calloc(1, sizeof(*pe));
		if (!pe)
			return -ENOMEM;
		pe->prefix = r->prefix;
		if (!tsearch(pe, &rt->tree, pentry_cmp)) {
			free(pe);
			return -ENOMEM;
		}
		new_prefix = true;
	}
	for (link = &pe->routes; *link; link = &(*link)->next)
		if ((*link)->r.source == r->source && (*link)->r.metric == r->metric) {
			old = *link;
			break;
		}
	if (old && !replace)
		return -EEXIST;
	e = calloc(1, sizeof(*e));
	if (!e) {
		rc = -ENOMEM;
		goto fail;
	}
	e->req = *r;
	e->req.flags = 0;
	e->req.nh_resolved = 0;
	resolve(rt, e);
	if (old) {
		e->next = old->next;
		*link = e;
	} else {
		e->next = pe->routes;
		pe->routes = e;
	}
	rc = reselect(rt, pe);
	if (rc) { /* back to the previous state */
		if (old) {
			*link = old;
		} else {
			for (link = &pe->routes; *link != e; link = &(*link)->next)
				;
			*link = e->next;
		}
		free(e);
		goto fail;
	}
	free(old);
	if (!old)
		rt->nroute++;
	if (new_prefix)
		rt->nprefix++;
	notify(rt);
	return 0;
fail:
	if (new_prefix) {
		tdelete(pe, &rt->tree, pentry_cmp);
		free(pe);
	}
	return rc;
}

int rt_add(struct rt_table *rt, const struct rt_route *r)
{
	return put_route(rt, r, false);
}

int rt_replace(struct rt_table *rt, const struct rt_route *r)
{
	return put_route(rt, r, true);
}

int rt_del(struct rt_table *rt, const struct ip_prefix *p, uint8_t source, uint32_t metric)
{
	struct pentry *pe = pentry_find(rt, p);
	struct rentry **link, *e;
	int rc;

	if (!pe)
		return -ENOENT;
	for (link = &pe->routes; *link; link = &(*link)->next)
		if ((*link)->r.source == source && (*link)->r.metric == metric)
			break;
	if (!(e = *link))
		return -ENOENT;
	*link = e->next;
	rc = reselect(rt, pe); /* a delete frees slots, it cannot run out of them */
	if (rc) {
		*link = e;
		return rc;
	}
	free(e);
	rt->nroute--;
	if (!pe->routes) {
		tdelete(pe, &rt->tree, pentry_cmp);
		free(pe);
		rt->nprefix--;
	}
	notify(rt);
	return 0;
}

/* ---- connected routes ---- */

struct collect {
	struct pentry **v;
	size_t n, cap;
};

static void collect_visit(const void *node, VISIT which, void *ctx)
{
	struct collect *c = ctx;

	if (which != postorder && which != leaf)
		return;
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 256;
		struct pentry **v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return; /* best effort: the rest is resolved on the next change */
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = *(struct pentry *const *)node;
}

struct src_key {
	struct ip_prefix prefix;
	uint32_t metric;
};

int rt_del_source(struct rt_table *rt, uint8_t source)
{
	struct collect c = { 0 };
	struct src_key *keys = NULL;
	size_t n = 0;
	int removed = 0;

	/* Keys first: rt_del frees entries and prefixes under the walk. */
	twalk_r(rt->tree, collect_visit, &c);
	if (c.n != rt->nprefix) {
		free(c.v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c.n; i++)
		for (struct rentry *e = c.v[i]->routes; e; e = e->next)
			n += e->r.source == source;
	keys = n ? calloc(n, sizeof(*keys)) : NULL;
	if (n && !keys) {
		free(c.v);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; i < c.n; i++)
		for (struct rentry *e = c.v[i]->routes; e; e = e->next)
			if (e->r.source == source)
				keys[n++] = (struct src_key){ c.v[i]->prefix, e->r.metric };
	free(c.v);
	for (size_t i = 0; i < n; i++)
		removed += rt_del(rt, &keys[i].prefix, source, keys[i].metric) == 0;
	free(keys);
	return removed;
}

/* Resolve every gateway again after connected routes changed. */
static void reresolve_all(struct rt_table *rt)
{
	struct collect c = { 0 };

	twalk_r(rt->tree, collect_visit, &c);
	for (size_t i = 0; i < c.n; i++) {
		struct pentry *pe = c.v[i];
		bool changed = false;

		for (struct rentry *e = pe->routes; e; e = e->next)
			changed |= resolve(rt, e);
		if (changed)
			(void)reselect(rt, pe); /* -ENOSPC: stays as it was; logged by caller */
	}
	free(c.v);
	notify(rt);
}

static void connected_routes(const struct ip_prefix *ifaddr, uint32_t ifindex, struct rt_route *net,
			     struct rt_route *host)
{
	memset(net, 0, sizeof(*net));
	net->prefix = *ifaddr;
	ip_prefix_mask(&net->prefix);
	net->source = RT_SRC_CONNECTED;
	net->nnh = 1;
	net->nh[0].type = RT_NH_CONNECTED;
	net->nh[0].ifindex = ifindex;
	*host = *net;
	host->prefix = *ifaddr;
	host->prefix.len = (uint8_t)ip_addr_bits(&ifaddr->addr);
	host->nh[0].type = RT_NH_LOCAL;
}

int rt_add_connected(struct rt_table *rt, const struct ip_prefix *ifaddr, uint32_t ifindex)
{
	struct rt_route net, host;
	bool net_added;
	int rc;

	if (!ifindex)
		return -EINVAL;
	connected_routes(ifaddr, ifindex, &net, &host);
	/* A second address in a subnet already connected adds only its local route. */
	rc = rt_add(rt, &net);
	if (rc && rc != -EEXIST)
		return rc;
	net_added = rc == 0;
	if (net.prefix.len != host.prefix.len) {
		rc = rt_add(rt, &host);
		if (rc) {
			if (net_added)
				rt_del(rt, &net.prefix, RT_SRC_CONNECTED, 0);
			return rc;
		}
	} else if (!net_added) {
		return -EEXIST;
	}
	reresolve_all(rt);
	return 0;
}

int rt_del_connected(struct rt_table *rt, const struct ip_prefix *ifaddr, uint32_t ifindex,
		     bool keep_subnet)
{
	struct rt_route net, host;
	struct pentry *pe;
	int rc;

	connected_routes(ifaddr, ifindex, &net, &host);
	if (keep_subnet) /* another address of the interface is in the same subnet */
		return net.prefix.len == host.prefix.len
			   ? 0
			   : rt_del(rt, &host.prefix, RT_SRC_CONNECTED, 0);
	pe = pentry_find(rt, &net.prefix);
	for (struct rentry *e = pe ? pe->routes : NULL; e; e = e->next)
		if (e->r.source == RT_SRC_CONNECTED && e->r.metric == 0 &&
		    e->r.nh[0].ifindex != ifindex)
			return -ENOENT; /* that subnet is another interface's */
	rc = rt_del(rt, &net.prefix, RT_SRC_CONNECTED, 0);
	if (rc)
		return rc;
	if (net.prefix.len != host.prefix.len)
		(void)rt_del(rt, &host.prefix, RT_SRC_CONNECTED, 0);
	reresolve_all(rt);
	return 0;
}

/* ---- walking, lookups, life cycle ---- */

struct walk {
	int family;
	int (*cb)(void *ctx, const struct rt_route *r);
	void *ctx;
	int rc;
};

static void walk_visit(const void *node, VISIT which, void *ctx)
{
	const struct pentry *pe = *(struct pentry *const *)node;
	struct walk *w = ctx;

	if ((which != postorder && which != leaf) || w->rc)
		return;
	if (w->family && pe->prefix.addr.family != w->family)
		return;
	for (const struct rentry *e = pe->routes; e && !w->rc; e = e->next)
		w->rc = w->cb(w->ctx, &e->r);
}

int rt_walk(const struct rt_table *rt, int family, int (*cb)(void *ctx, const struct rt_route *r),
	    void *ctx)
{
	struct walk w = { family, cb, ctx, 0 };

	twalk_r(rt->tree, walk_visit, &w);
	return w.rc;
}

/*
 * The first prefix after a key, through tfind: the comparator never reports a match,
 * so tfind goes down to a leaf as any search of a binary search tree does (POSIX
 * tsearch trees are such trees; tfind compares the key with each node on its way), and
 * the last node where the descent turned left is the first prefix after the key
 * (inclusive: the key's own prefix when it is in the tree).
 */
struct after_key {
	struct ip_prefix prefix; /* first: pentry_cmp reads the key as a prefix */
	bool inclusive;
	const struct pentry *next;
};

static int after_cmp(const void *key, const void *node)
{
	struct after_key *k = (struct after_key *)key; /* ours, passed to tfind below */
	int c = pentry_cmp(&k->prefix, node);

	if (c < 0 || (c == 0 && k->inclusive)) {
		k->next = node;
		return -1;
	}
	return 1;
}

static const struct pentry *pentry_after(const struct rt_table *rt, const struct ip_prefix *p,
					 bool inclusive)
{
	struct after_key k = { .prefix = *p, .inclusive = inclusive };

	(void)tfind(&k, &rt->tree, after_cmp);
	return k.next;
}

int rt_walk_after(const struct rt_table *rt, int family, const struct ip_prefix *after,
		  int (*cb)(void *ctx, const struct rt_route *r), void *ctx)
{
	struct ip_prefix first = { .addr.family = family == AF_INET6 ? AF_INET6 : AF_INET };
	const struct pentry *pe;

	pe = after ? pentry_after(rt, after, false) : pentry_after(rt, &first, true);
	for (; pe; pe = pentry_after(rt, &pe->prefix, false)) {
		if (family && pe->prefix.addr.family != family)
			break; /* IPv4 sorts first: no more of family */
		for (const struct rentry *e = pe->routes; e; e = e->next) {
			int rc = cb(ctx, &e->r);

			if (rc)
				return rc;
		}
	}
	return 0;
}

const struct rt_fib_nh *rt_lookup(const struct rt_table *rt, const struct ip_addr *dst,
				  uint32_t flow_hash)
{
	uint32_t v;

	if (dst->family == AF_INET)
		v = rt_fib_lookup4(&rt->fib, (uint32_t)dst->bytes[0] << 24 |
						 (uint32_t)dst->bytes[1] << 16 |
						 (uint32_t)dst->bytes[2] << 8 | dst->bytes[3]);
	else
		v = rt_fib_lookup6(&rt->fib, dst->bytes);
	return rt_fib_nexthop(&rt->fib, v, flow_hash);
}

const struct rt_fib *rt_fib(const struct rt_table *rt)
{
	return &rt->fib;
}

void rt_stats(const struct rt_table *rt, struct rt_stats *out)
{
	out->prefixes = rt->nprefix;
	out->routes = rt->nroute;
	out->nexthops = rt->nh.used;
	out->groups = rt->grp.used;
}

int rt_create(struct rt_table **out, const struct rt_config *cfg)
{
	static const struct rt_config defaults;
	struct rt_table *rt;
	uint32_t nnh, ngrp;
	int rc;

	if (!cfg)
		cfg = &defaults;
	nnh = cfg->max_nexthops ? cfg->max_nexthops : 65536;
	ngrp = cfg->max_groups ? cfg->max_groups : 4096;
	if (nnh > RT_FIB_INDEX_MAX || ngrp > RT_FIB_INDEX_MAX)
		return -EINVAL;
	rt = calloc(1, sizeof(*rt));
	if (!rt)
		return -ENOMEM;
	{
		struct lpm4_config l4 = { .max_groups = cfg->lpm4_groups,
					  .defer = cfg->defer,
					  .defer_ctx = cfg->defer_ctx };
		struct lpm6_config l6 = { .defer = cfg->defer, .defer_ctx = cfg->defer_ctx };

		rc = pool_init(&rt->nh, nnh, sizeof(struct rt_fib_nh),
			       offsetof(struct rt_fib_nh, neigh_hint), cfg);
		if (!rc)
			rc = pool_init(&rt->grp, ngrp, sizeof(struct rt_fib_group),
				       sizeof(struct rt_fib_group), cfg);
		if (!rc)
			rc = lpm4_create(&rt->fib.v4, &l4);
		if (!rc)
			rc = lpm6_create(&rt->fib.v6, &l6);
	}
	if (rc) {
		rt_destroy(rt);
		return rc;
	}
	rt->fib.nh = rt->nh.slots;
	rt->fib.grp = rt->grp.slots;
	rt->changed = cfg->changed;
	rt->changed_ctx = cfg->changed_ctx;
	*out = rt;
	return 0;
}

static void free_pentry(void *p)
{
	struct pentry *pe = p;

	while (pe->routes) {
		struct rentry *e = pe->routes;

		pe->routes = e->next;
		free(e);
	}
	free(pe);
}

void rt_destroy(struct rt_table *rt)
{
	if (!rt)
		return;
	tdestroy(rt->tree, free_pentry);
	lpm4_free(rt->fib.v4);
	lpm6_free(rt->fib.v6);
	pool_fini(&rt->nh);
	pool_fini(&rt->grp);
	free(rt);
}
