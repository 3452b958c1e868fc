/*
 * GID route table: DGID prefix -> IB routers, for off-subnet paths answered without the
 * SA (see sa.h). The prefixes live in a lib/lpm128 trie whose values index routes[];
 * the routers of a route are chosen by a hash of SGID, DGID, TClass and flow label over
 * the routers that are up, so one flow always takes the same router while it is up.
 * Threads: the control thread only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/lpm128.h"
#include "sm-client/sa.h"

struct gid_route {
	bool used;
	union ib_gid prefix;
	unsigned len, n;
	struct sa_router routers[SA_ROUTE_MAX_ROUTERS];
};

struct sa_gidroutes {
	struct lpm128 *lpm;
	struct gid_route *routes; /* value v in the trie is routes[v - 1] */
	unsigned nroutes, cap;
	/* Routers marked down, by LID. */
	uint16_t *down;
	unsigned ndown, down_cap;
};

int sa_gidroutes_new(struct sa_gidroutes **out)
{
	struct sa_gidroutes *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	rc = lpm128_new(&t->lpm, NULL, NULL);
	if (rc) {
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void sa_gidroutes_free(struct sa_gidroutes *t)
{
	if (!t)
		return;
	lpm128_free(t->lpm);
	free(t->routes);
	free(t->down);
	free(t);
}

static void mask_prefix(const union ib_gid *in, unsigned len, union ib_gid *out)
{
	for (unsigned i = 0; i < IB_GID_LEN; i++) {
		unsigned bits = len > i * 8 ? len - i * 8 : 0;

		out->raw[i] = bits >= 8 ? in->raw[i] : (uint8_t)(in->raw[i] & (0xff00 >> bits));
	}
}

int sa_gidroutes_add(struct sa_gidroutes *t, const union ib_gid *prefix, unsigned len,
		     const struct sa_router *routers, unsigned n)
{
	union ib_gid p;
	uint32_t v;
	unsigned i;
	int rc;

	if (len > 128 || n == 0 || n > SA_ROUTE_MAX_ROUTERS)
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (routers[i].lid == 0 || routers[i].lid >= 0xc000)
			return -EINVAL;
	mask_prefix(prefix, len, &p);
	v = lpm128_get(t->lpm, p.raw, len);
	if (!v) {
		for (i = 0; i < t->cap; i++)
			if (!t->routes[i].used)
				break;
		if (i == t->cap) {
			unsigned ncap = t->cap ? t->cap * 2 : 16;
			struct gid_route *nr = realloc(t->routes, ncap * sizeof(*nr));

			if (!nr)
				return -ENOMEM;
			memset(nr + t->cap, 0, (ncap - t->cap) * sizeof(*nr));
			t->routes = nr;
			t->cap = ncap;
		}
		rc = lpm128_add(t->lpm, p.raw, len, i + 1);
		if (rc)
			return rc;
		t->nroutes++;
		v = i + 1;
	}
	t->routes[v - 1].used = true;
	t->routes[v - 1].prefix = p;
	t->routes[v - 1].len = len;
	t->routes[v - 1].n = n;
	memcpy(t->routes[v - 1].routers, routers, n * sizeof(*routers));
	return 0;
}

int sa_gidroutes_del(struct sa_gidroutes *t, const union ib_gid *prefix, unsigned len)
{
	union ib_gid p;
	uint32_t v;
	int rc;

	if (len > 128)
		return -EINVAL;
	mask_prefix(prefix, len, &p);
	v = lpm128_get(t->lpm, p.raw, len);
	if (!v)
		return -ENOENT;
	rc = lpm128_del(t->lpm, p.raw, len);
	if (rc)
		return rc;
	t->routes[v - 1].used = false;
	t->nroutes--;
	return 0;
}

void sa_gidroutes_clear(struct sa_gidroutes *t)
{
	for (unsigned i = 0; i < t->cap; i++) {
		if (!t->routes[i].used)
			continue;
		(void)lpm128_del(t->lpm, t->routes[i].prefix.raw, t->routes[i].len);
		t->routes[i].used = false;
	}
	t->nroutes = 0;
}

static bool router_down(const struct sa_gidroutes *t, uint16_t lid)
{
	for (unsigned i = 0; i < t->ndown; i++)
		if (t->down[i] == lid)
			return true;
	return false;
}

unsigned sa_gidroutes_set_router(struct sa_gidroutes *t, uint16_t lid, bool up)
{
	unsigned served = 0;

	for (unsigned i = 0; i < t->cap; i++)
		for (unsigned j = 0; t->routes[i].used && j < t->routes[i].n; j++)
			if (t->routes[i].routers[j].lid == lid)
				served++;
	if (up) {
		for (unsigned i = 0; i < t->ndown; i++)
			if (t->down[i] == lid)
				t->down[i--] = t->down[--t->ndown];
	} else if (!router_down(t, lid)) {
		if (t->ndown == t->down_cap) {
			unsigned ncap = t->down_cap ? t->down_cap * 2 : 8;
			uint16_t *nd = realloc(t->down, ncap * sizeof(*nd));

			if (!nd)
				return served; /* cannot record it: keep using the router */
			t->down = nd;
			t->down_cap = ncap;
		}
		t->down[t->ndown++] = lid;
	}
	return served;
}

unsigned sa_gidroutes_routers(const struct sa_gidroutes *t, uint16_t *lids, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < t->cap; i++)
		for (unsigned j = 0; t->routes[i].used && j < t->routes[i].n; j++) {
			uint16_t lid = t->routes[i].routers[j].lid;
			bool seen = false;

			for (unsigned k = 0; k < n && k < max; k++)
				seen |= lids[k] == lid;
			if (seen)
				continue;
			if (n < max)
				lids[n] = lid;
			n++;
		}
	return n;
}

void sa_gidroutes_foreach(const struct sa_gidroutes *t,
			  int (*fn)(void *arg, const struct sa_gidroute_info *ri), void *arg)
{
	for (unsigned i = 0; i < t->cap; i++) {
		const struct gid_route *r = &t->routes[i];
		struct sa_gidroute_info ri = { .prefix = r->prefix, .len = r->len, .n = r->n };

		if (!r->used)
			continue;
		memcpy(ri.routers, r->routers, r->n * sizeof(r->routers[0]));
		for (unsigned j = 0; j < r->n; j++)
			ri.down[j] = router_down(t, r->routers[j].lid);
		if (fn(arg, &ri))
			return;
	}
}

static uint32_t mix(uint32_t h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) /* FNV-1a */
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int sa_gidroutes_lookup(const struct sa_gidroutes *t, const union ib_gid *sgid,
			const struct sa_path_query *q, struct sa_path *out)
{
	const struct gid_route *r;
	const struct sa_router *up[SA_ROUTE_MAX_ROUTERS], *ch;
	uint8_t tail[5];
	unsigned nup = 0;
	uint32_t v, h;

	v = lpm128_lookup(t->lpm, q->dgid.raw);
	if (!v)
		return -ENOENT;
	r = &t->routes[v - 1];
	for (unsigned i = 0; i < r->n; i++)
		if (!router_down(t, r->routers[i].lid))
			up[nup++] = &r->routers[i];
	if (!nup)
		return -ENETUNREACH;
	tail[0] = q->tclass;
	tail[1] = (uint8_t)(q->flow_label >> 16);
	tail[2] = (uint8_t)(q->flow_label >> 8);
	tail[3] = (uint8_t)q->flow_label;
	tail[4] = 0;
	h = mix(2166136261u, sgid->raw, IB_GID_LEN);
	h = mix(h, q->dgid.raw, IB_GID_LEN);
	h = mix(h, tail, sizeof(tail));
	/* FNV's low bits are weak (its multiplier is odd): finish with murmur3's fmix32. */
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	ch = up[h % nup];
	memset(out, 0, sizeof(*out));
	out->dgid = q->dgid;
	out->sgid = *sgid;
	out->dlid = ch->lid;
	out->sl = ch->sl;
	out->mtu = ch->mtu;
	out->rate = ch->rate;
	out->hop_limit = ch->hop_limit ? ch->hop_limit : 0xff;
	out->tclass = q->tclass;
	out->flow_label = q->flow_label;
	out->pkey = q->pkey;
	out->local = true;
	return 0;
}
