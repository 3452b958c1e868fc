/*
 * Tenants (docs/tenants.md): each a routing table of its own (table/route) for the
 * links and interfaces that name it, with its static routes and its kernel tables
 * (kernel/kroute). Slot 0 is the default tenant: everything that names none, with the
 * kernel_routes section's tables. Addresses and prefixes may repeat between tenants;
 * a packet is looked up in its ingress interface's table only, and leaves for another
 * tenant only through a route there whose dev is in that tenant.
 *
 * Threads: the control thread only (the workers read each interface's FIB through
 * the engine's snapshot: fwd_if.fib).
 */
#ifndef IBGW_GATEWAY_DP_TENANT_H
#define IBGW_GATEWAY_DP_TENANT_H

#include <stdbool.h>

#include "gateway/config.h"
#include "table/route.h"

struct gw_dp;
struct kroute;

struct dp_tenant {
	struct gw_dp *dp;
	char name[GW_NAME_MAX]; /* "" = the default tenant (slot 0) */
	struct rt_table *rt;    /* NULL: a free slot */
	/* Static routes as installed (for a live reload). */
	struct rt_route *routes;
	unsigned n_routes;
	/* Kernel route export/import (NULL: none); its settings as running. */
	struct kroute *kroute;
	struct gw_kernel_routes_config kcfg;
};

/* The default tenant's table, made before the engine (which needs it). 0 or -errno. */
int dp_tenants_init(struct gw_dp *dp);
/* Tables for the config's tenants not running yet (start, and a reload before its
 * links are added). A tenant that cannot get one is logged and its links do not come
 * up. */
void dp_tenants_add(struct gw_dp *dp, const struct gw_config *cfg);
/* After the links: static routes, kernel tables, and the tenants the config no longer
 * names (their links are gone by now) freed. */
void dp_tenants_apply(struct gw_dp *dp, const struct gw_config *cfg);
/* Kernel tables stopped (exports withdrawn); the tables stay for gw_dp_stop's end. */
void dp_tenants_stop(struct gw_dp *dp);
/* Every table freed: no reader may remain. */
void dp_tenants_free(struct gw_dp *dp);

/* The tenant called name ("" or "default": slot 0), or NULL. */
struct dp_tenant *dp_tenant_by_name(struct gw_dp *dp, const char *name);
/* The tenant whose table is rt (an interface's fwd_if.rt), or NULL. */
struct dp_tenant *dp_tenant_of_rt(struct gw_dp *dp, const struct rt_table *rt);
/* Its name for gwctl and the metrics: "default" for slot 0. */
const char *dp_tenant_label(const struct dp_tenant *t);
/* Slot i (0..GW_TENANTS_MAX-1) when it holds a tenant, else NULL. */
struct dp_tenant *dp_tenant_at(struct gw_dp *dp, unsigned i);

/* Whether (prefix, metric) is one of the config's static routes in tenant t (gwctl
 * leaves those to the config). */
bool dp_tenant_route_configured(const struct dp_tenant *t, const struct ip_prefix *p,
				uint32_t metric);

#endif
