/*
 * The failover pair's hands: paths, groups, service addresses claimed, announced and
 * given up, and the state-sync records taken (see gateway/ha_hands.h). Pure: called by
 * the control thread from gateway/dp_ha.c, and by the unit tests.
 */
#include "gateway/ha_hands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/ipoib.h"
#include "pkt/ip.h"

unsigned gw_hands_paths(const struct gw_config *cfg, char (*paths)[GW_NAME_MAX], unsigned max)
{
	const struct gw_failover_config *fo = &cfg->failover;
	unsigned n = 0;

	if (fo->n_paths) {
		for (unsigned i = 0; i < fo->n_paths && n < max; i++)
			snprintf(paths[n++], GW_NAME_MAX, "%s", fo->paths[i]);
		return n;
	}
	for (unsigned i = 0; i < cfg->n_ipoib_links && n < max; i++)
		snprintf(paths[n++], GW_NAME_MAX, "%s", cfg->ipoib_links[i].name);
	for (unsigned i = 0; i < cfg->n_eth_ifs && n < max; i++)
		snprintf(paths[n++], GW_NAME_MAX, "%s", cfg->eth_ifs[i].name);
	return n;
}

unsigned gw_hands_groups(const struct gw_config *cfg, const char (*paths)[GW_NAME_MAX],
			 unsigned n_paths, struct ha_group_cfg *groups, struct gw_hands_addr *addrs,
			 unsigned *n_addrs)
{
	const struct gw_failover_config *fo = &cfg->failover;
	unsigned n_groups = 0;

	*n_addrs = 0;
	for (unsigned g = 0; g < fo->n_groups && g < HA_MAX_GROUPS; g++) {
		const struct gw_ha_group_config *gc = &fo->groups[g];
		struct ha_group_cfg *hg = &groups[n_groups++];

		memset(hg, 0, sizeof(*hg));
		snprintf(hg->name, sizeof(hg->name), "%s", gc->name);
		hg->priority = gc->priority;
		for (unsigned a = 0; a < gc->n_addresses && *n_addrs < GW_HANDS_MAX_ADDRS; a++) {
			struct gw_hands_addr *x = &addrs[(*n_addrs)++];

			memset(x, 0, sizeof(*x));
			x->addr = gc->addresses[a].address;
			snprintf(x->dev, sizeof(x->dev), "%s", gc->addresses[a].dev);
			x->group = g;
			/* The group cannot be served while the link of one of its addresses is
			 * down: the FSM goes FAULT and the peer takes over. */
			for (unsigned p = 0; p < n_paths; p++)
				if (!strcmp(paths[p], x->dev))
					hg->track_paths |= 1ull << p;
		}
	}
	return n_groups;
}

unsigned gw_hands_claim(struct gw_hands_addr *addrs, unsigned n, unsigned g,
			const struct gw_hands_ops *ops, void *ctx)
{
	unsigned added = 0;

	for (unsigned i = 0; i < n; i++) {
		struct gw_hands_addr *a = &addrs[i];

		if (a->group != g || a->held || ops->add(ctx, a) < 0)
			continue;
		a->held = true;
		added++;
	}
	return added;
}

void gw_hands_announce(const struct gw_hands_addr *addrs, unsigned n, unsigned g,
		       const struct gw_hands_ops *ops, void *ctx)
{
	for (unsigned i = 0; i < n; i++)
		if (addrs[i].group == g && addrs[i].held)
			ops->announce(ctx, &addrs[i]);
}

unsigned gw_hands_give_up(struct gw_hands_addr *addrs, unsigned n, unsigned g,
			  const struct gw_hands_ops *ops, void *ctx)
{
	unsigned given = 0;

	for (unsigned i = 0; i < n; i++) {
		struct gw_hands_addr *a = &addrs[i];

		if (!a->held || a->group != g)
			continue;
		ops->del(ctx, a);
		a->held = false;
		given++;
	}
	return given;
}

void gw_hands_link_gone(struct gw_hands_addr *addrs, unsigned n, const char *dev)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(addrs[i].dev, dev))
			addrs[i].held = false;
}

bool gw_hands_is_service(const struct gw_hands_addr *addrs, unsigned n, const struct ip_addr *a)
{
	for (unsigned i = 0; i < n; i++)
		if (ip_addr_equal(&addrs[i].addr.addr, a))
			return true;
	return false;
}

/* The links and interfaces of a config, alike. */
struct any_link {
	const char *name;
	const struct ip_prefix *addrs;
	unsigned n_addrs;
	const struct gw_proxy_config *proxy;
};

static unsigned any_links(const struct gw_config *cfg, struct any_link *l)
{
	unsigned n = 0;

	for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
		l[n++] = (struct any_link){ cfg->ipoib_links[i].name, cfg->ipoib_links[i].addresses,
					    cfg->ipoib_links[i].n_addresses,
					    &cfg->ipoib_links[i].proxy };
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		l[n++] = (struct any_link){ cfg->eth_ifs[i].name, cfg->eth_ifs[i].addresses,
					    cfg->eth_ifs[i].n_addresses, &cfg->eth_ifs[i].proxy };
	return n;
}

static void scope_add(struct gw_hands_scope *scopes, unsigned max, unsigned *n,
		      const struct ip_prefix *p, const char *link)
{
	if (*n < max) {
		scopes[*n].prefix = *p;
		ip_prefix_mask(&scopes[*n].prefix);
		snprintf(scopes[*n].link, GW_NAME_MAX, "%s", link);
	}
	(*n)++;
}

/* The link other than not whose subnet holds p, or -1. */
static int home_of(const struct any_link *l, unsigned n_links, unsigned not,
		   const struct ip_prefix *p)
{
	for (unsigned b = 0; b < n_links; b++) {
		if (b == not )
			continue;
		for (unsigned x = 0; x < l[b].n_addrs; x++) {
			struct ip_prefix net = l[b].addrs[x];

			ip_prefix_mask(&net);
			if (net.len <= p->len && ip_prefix_contains(&net, &p->addr))
				return (int)b;
		}
	}
	return -1;
}

unsigned gw_hands_scopes(const struct gw_config *cfg, struct gw_hands_scope *scopes, unsigned max)
{
	struct any_link l[128];
	unsigned n_links = any_links(cfg, l), n = 0;

	for (unsigned i = 0; i < n_links; i++)
		for (unsigned x = 0; x < l[i].n_addrs; x++)
			scope_add(scopes, max, &n, &l[i].addrs[x], l[i].name);
	for (unsigned r = 0; r < cfg->n_routes; r++)
		if (!cfg->routes[r].n_via && cfg->routes[r].dev[0])
			scope_add(scopes, max, &n, &cfg->routes[r].prefix, cfg->routes[r].dev);
	for (unsigned a = 0; a < n_links; a++)
		for (unsigned j = 0; j < l[a].proxy->n_prefixes; j++) {
			const struct ip_prefix *p = &l[a].proxy->prefixes[j];
			int home = home_of(l, n_links, a, p);

			for (unsigned b = 0; b < n_links; b++)
				if (b != a && (home < 0 || (int)b == home))
					scope_add(scopes, max, &n, p, l[b].name);
		}
	return n;
}

bool gw_hands_in_scope(const struct gw_hands_scope *scopes, unsigned n, const char *link,
		       const struct ip_addr *a)
{
	for (unsigned i = 0; i < n; i++)
		if (ip_prefix_contains(&scopes[i].prefix, a) && !strcmp(scopes[i].link, link))
			return true;
	return false;
}

enum gw_hands_neigh gw_hands_sync_neigh(const struct ha_sync_neigh *n, enum gw_hands_link link,
					bool ours, const struct gw_hands_scope *scopes,
					unsigned n_scopes, bool (*known)(void *ctx), void *ctx)
{
	if (link == GW_HANDS_LINK_NONE || ours)
		return GW_HANDS_NEIGH_SKIP; /* this box itself, as the peer knows it */
	/* An IPv6 link-local neighbour (a router's next hop, a host's first address) is on
	 * every link by definition: the record names the link the peer learned it on. */
	if (!(n->addr.family == AF_INET6 && ip6_is_link_local(n->addr.bytes)) &&
	    !gw_hands_in_scope(scopes, n_scopes, n->link, &n->addr))
		return GW_HANDS_NEIGH_REFUSED;
	if (link == GW_HANDS_LINK_IPOIB && n->lladdr_len == IPOIB_HWADDR_LEN)
		return GW_HANDS_NEIGH_IPOIB;
	if (link == GW_HANDS_LINK_ETH && n->lladdr_len == 6 && !known(ctx))
		return GW_HANDS_NEIGH_ETH;
	return GW_HANDS_NEIGH_SKIP;
}

enum gw_hands_route gw_hands_sync_route(const struct ha_sync_route *sr,
					const struct gw_hands_scope *scopes, unsigned n_scopes,
					uint32_t (*where)(void *ctx, const char **link), void *ctx,
					struct rt_route *rt)
{
	const char *link = NULL;
	uint32_t x;

	if (sr->n_nexthops || sr->prefix.len != (sr->prefix.addr.family == AF_INET ? 32 : 128))
		return GW_HANDS_ROUTE_REFUSED;
	/* A host route to a proxied neighbour: on the neighbour's link. */
	x = where(ctx, &link);
	if (!x || !link)
		return GW_HANDS_ROUTE_SKIP;
	if (!gw_hands_in_scope(scopes, n_scopes, link, &sr->prefix.addr))
		return GW_HANDS_ROUTE_REFUSED;
	*rt = (struct rt_route){
		.prefix = sr->prefix, .source = RT_SRC_LEARNED, .metric = sr->metric, .nnh = 1
	};
	rt->nh[0] = (struct rt_nexthop){ .type = RT_NH_CONNECTED, .ifindex = x };
	return GW_HANDS_ROUTE_TAKE;
}
