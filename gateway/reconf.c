/*
 * A live reload's decisions: what becomes of each running link or interface, what to add,
 * an IB port's GID route signature and whether a reload must reopen an IB port for
 * bigger buffers (see gateway/reconf.h). Pure: called by the control thread from
 * gateway/dataplane.c, and by the unit tests.
 */
#include "gateway/reconf.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

const struct gw_ipoib_link_config *gw_reconf_ipoib_cfg(const struct gw_config *cfg,
						       const char *name)
{
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
		if (!strcmp(cfg->ipoib_links[i].name, name))
			return &cfg->ipoib_links[i];
	return NULL;
}

const struct gw_eth_if_config *gw_reconf_eth_cfg(const struct gw_config *cfg, const char *name,
						 unsigned *index)
{
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
		if (!strcmp(cfg->eth_ifs[i].name, name)) {
			if (index)
				*index = i;
			return &cfg->eth_ifs[i];
		}
	return NULL;
}

static bool prefix_equal(const struct ip_prefix *a, const struct ip_prefix *b)
{
	return a->len == b->len && ip_addr_equal(&a->addr, &b->addr);
}

/* The running list against the configured one as an update would keep it (the first
 * GW_RECONF_MAX_ADDRS): equal, entry by entry, means there is nothing to apply. */
static bool addrs_differ(const struct gw_reconf_link *run, const struct ip_prefix *want,
			 unsigned n_want)
{
	if (n_want > GW_RECONF_MAX_ADDRS)
		n_want = GW_RECONF_MAX_ADDRS;
	if (n_want != run->n_addrs)
		return true;
	for (unsigned i = 0; i < n_want; i++)
		if (!prefix_equal(&run->addrs[i], &want[i]))
			return true;
	return false;
}

/* The link's IPv6 proxy prefixes as the config gives them (the first
 * GW_RECONF_MAX_PROXY), against the running ones. */
static bool proxy_differs(const struct gw_reconf_link *run, const struct gw_ipoib_link_config *c)
{
	unsigned n = 0;

	if (run->proxy_nd != c->proxy.nd)
		return true;
	for (unsigned i = 0; i < c->proxy.n_prefixes && n < GW_RECONF_MAX_PROXY; i++) {
		if (c->proxy.prefixes[i].addr.family != AF_INET6)
			continue;
		if (n >= run->n_proxy6 || !prefix_equal(&run->proxy6[n], &c->proxy.prefixes[i]))
			return true;
		n++;
	}
	return n != run->n_proxy6;
}

/* Why the link must be built again for this config ("" when it can change in place). */
static const char *rebuild_reason(const struct gw_reconf_link *run, const struct gw_config *cfg)
{
	if (run->kind == GW_RECONF_IPOIB) {
		const struct gw_ipoib_link_config *c = gw_reconf_ipoib_cfg(cfg, run->name);

		if (!c)
			return "removed from the config";
		if (strcmp(run->tenant, c->tenant))
			return "moved to another tenant";
		if (strcmp(run->backend, gw_ipoib_backend_name(c->backend)) ||
		    strcmp(run->device, c->device) || run->port != c->port)
			return "moved to another port";
		if (run->pkey != c->pkey)
			return "P_Key changed";
		if (run->mode != c->mode)
			return "mode changed";
		if (run->mcast_hop_limit != c->mcast_hop_limit)
			return "multicast hop limit changed"; /* in the groups' AHs */
		return "";
	}
	const struct gw_eth_if_config *c = gw_reconf_eth_cfg(cfg, run->name, NULL);

	if (!c)
		return "removed from the config";
	if (strcmp(run->tenant, c->tenant))
		return "moved to another tenant";
	if (strcmp(run->backend, gw_eth_backend_name(c->backend)) ||
	    strcmp(run->device, c->device) || run->vlan != c->vlan)
		return "moved to another device or VLAN";
	return "";
}

void gw_reconf_link(const struct gw_reconf_link *run, const struct gw_config *cfg,
		    struct gw_reconf_verdict *out)
{
	const char *why;

	*out = (struct gw_reconf_verdict){ .action = GW_RECONF_KEEP, .reason = "" };
	if (run->kind == GW_RECONF_FREE)
		return;
	why = rebuild_reason(run, cfg);
	if (why[0]) {
		bool listed = run->kind == GW_RECONF_IPOIB
				  ? gw_reconf_ipoib_cfg(cfg, run->name) != NULL
				  : gw_reconf_eth_cfg(cfg, run->name, NULL) != NULL;

		out->reason = why;
		out->action = listed ? GW_RECONF_REBUILD : GW_RECONF_REMOVE;
		return;
	}
	if (run->kind == GW_RECONF_IPOIB) {
		const struct gw_ipoib_link_config *c = gw_reconf_ipoib_cfg(cfg, run->name);

		if (addrs_differ(run, c->addresses, c->n_addresses))
			out->changes |= GW_RECONF_ADDRS;
		if (run->mtu != c->mtu)
			out->changes |= GW_RECONF_MTU;
		if (proxy_differs(run, c))
			out->changes |= GW_RECONF_PROXY;
	} else {
		const struct gw_eth_if_config *c = gw_reconf_eth_cfg(cfg, run->name, NULL);

		if (addrs_differ(run, c->addresses, c->n_addresses))
			out->changes |= GW_RECONF_ADDRS;
		if (run->mtu != c->mtu)
			out->changes |= GW_RECONF_MTU;
	}
	if (out->changes)
		out->action = GW_RECONF_UPDATE;
}

void gw_reconf_plan(const struct gw_reconf_link *run, unsigned n, const struct gw_config *cfg,
		    struct gw_reconf_verdict *v)
{
	for (unsigned i = 0; i < n; i++)
		gw_reconf_link(&run[i], cfg, &v[i]);
}

bool gw_reconf_to_add(const struct gw_reconf_link *run, const struct gw_reconf_verdict *v,
		      unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (run[i].kind != GW_RECONF_FREE && !strcmp(run[i].name, name) &&
		    (v[i].action == GW_RECONF_KEEP || v[i].action == GW_RECONF_UPDATE))
			return false;
	return true;
}

bool gw_reconf_gid_route_on(const struct gw_config *cfg, const struct gw_gid_route_config *g,
			    const char *backend, const char *device, uint8_t num)
{
	if (g->source != GW_GID_ROUTE_LOCAL || !g->n_routers)
		return false;
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++) {
		const struct gw_ipoib_link_config *l = &cfg->ipoib_links[i];

		if (g->link[0] && strcmp(g->link, l->name))
			continue;
		return !strcmp(gw_ipoib_backend_name(l->backend), backend) &&
		       !strcmp(l->device, device) && l->port == num;
	}
	return false;
}

static uint32_t sig_mix(uint32_t h, const void *data, size_t n)
{
	const uint8_t *b = data;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u; /* FNV-1a */
	return h;
}

uint32_t gw_reconf_gid_sig(const struct gw_config *cfg, const char *backend, const char *device,
			   uint8_t num)
{
	uint32_t h = 2166136261u;

	for (unsigned i = 0; i < cfg->n_gid_routes; i++) {
		const struct gw_gid_route_config *g = &cfg->gid_routes[i];

		if (!gw_reconf_gid_route_on(cfg, g, backend, device, num))
			continue;
		h = sig_mix(h, &g->prefix, sizeof(g->prefix));
		h = sig_mix(h, g->routers, g->n_routers * sizeof(g->routers[0]));
	}
	return h;
}

struct gw_reconf_port_size gw_reconf_port_want(const struct gw_config *cfg, const char *backend,
					       const char *device, uint8_t num)
{
	struct gw_reconf_port_size w = { 0, 0, 0 };

	for (unsigned i = 0; i < cfg->n_ipoib_links; i++) {
		const struct gw_ipoib_link_config *l = &cfg->ipoib_links[i];

		if (strcmp(gw_ipoib_backend_name(l->backend), backend) ||
		    strcmp(l->device, device) || l->port != num)
			continue;
		w.queues = cfg->workers ? cfg->workers : 1;
		if (l->mode == GW_IPOIB_CONNECTED && w.connected < GW_RECONF_CM_LINKS_MAX)
			w.connected++;
		else if (l->mode != GW_IPOIB_CONNECTED && w.datagram < GW_RECONF_DG_LINKS_MAX)
			w.datagram++;
	}
	return w;
}

bool gw_reconf_port_reopen(const struct gw_reconf_port_size *have, unsigned got,
			   const struct gw_reconf_port_size *want, char *why, size_t len)
{
	int n;

	if (len)
		why[0] = '\0';
	if (want->connected <= have->connected)
		return false;
	if (!have->connected)
		n = snprintf(why, len, "connected-mode buffers");
	else
		n = snprintf(why, len, "buffers for %u connected links", want->connected);
	if (want->queues > have->queues && got >= have->queues && n >= 0 && (size_t)n < len)
		snprintf(why + n, len - (size_t)n, " and %u queues", want->queues);
	return true;
}
