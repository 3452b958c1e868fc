/*
 * Tenants: a routing table each, with its static routes and kernel tables (see
 * gateway/dp_tenant.h, docs/tenants.md). Control thread: gateway/dataplane.c calls in at
 * start, reload and stop; dp_show.c, dp_ctl.c and dp_metrics.c look tenants up.
 */
#include "gateway/dp_tenant.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/dataplane_pvt.h"
#include "kernel/kroute.h"
#include "lib/log.h"

/* The RIB changed (route.h's change hook): the tenant's kernel export follows. */
static void rib_changed(void *arg)
{
	struct dp_tenant *t = arg;

	if (t->kroute)
		kroute_export_kick(t->kroute);
}

static int table_new(struct dp_tenant *t)
{
	struct rt_config rc = { .defer = dp_defer, .changed = rib_changed, .changed_ctx = t };

	return rt_create(&t->rt, &rc);
}

int dp_tenants_init(struct gw_dp *dp)
{
	struct dp_tenant *t = &dp->tenants[0];
	int ret;

	t->dp = dp;
	ret = table_new(t);
	if (ret < 0)
		return ret;
	dp->rt = t->rt;
	return 0;
}

const char *dp_tenant_label(const struct dp_tenant *t)
{
	return t->name[0] ? t->name : "default";
}

struct dp_tenant *dp_tenant_at(struct gw_dp *dp, unsigned i)
{
	return i < GW_TENANTS_MAX && dp->tenants[i].rt ? &dp->tenants[i] : NULL;
}

struct dp_tenant *dp_tenant_by_name(struct gw_dp *dp, const char *name)
{
	if (!name[0] || !strcmp(name, "default"))
		return dp_tenant_at(dp, 0);
	for (unsigned i = 1; i < GW_TENANTS_MAX; i++)
		if (dp->tenants[i].rt && !strcmp(dp->tenants[i].name, name))
			return &dp->tenants[i];
	return NULL;
}

struct dp_tenant *dp_tenant_of_rt(struct gw_dp *dp, const struct rt_table *rt)
{
	for (unsigned i = 0; i < GW_TENANTS_MAX; i++)
		if (dp->tenants[i].rt && dp->tenants[i].rt == rt)
			return &dp->tenants[i];
	return NULL;
}

void dp_tenants_add(struct gw_dp *dp, const struct gw_config *cfg)
{
	for (unsigned i = 0; i < cfg->n_tenants; i++) {
		const char *name = cfg->tenants[i].name;
		struct dp_tenant *t = NULL;
		int ret;

		if (dp_tenant_by_name(dp, name))
			continue;
		for (unsigned s = 1; s < GW_TENANTS_MAX && !t; s++)
			if (!dp->tenants[s].rt)
				t = &dp->tenants[s];
		if (!t) { /* the config allows GW_TENANTS_MAX - 1: a freed slot is reused */
			log_error("tenant %s: no free slot", name);
			continue;
		}
		memset(t, 0, sizeof(*t));
		t->dp = dp;
		snprintf(t->name, sizeof(t->name), "%s", name);
		ret = table_new(t);
		if (ret < 0) {
			log_errno(LOG_ERR, -ret, "tenant %s: routing table", name);
			t->rt = NULL;
			continue;
		}
		log_notice("tenant %s: routing table made", name);
		gw_reload_note(dp->outcome, false, "tenant %s: added", name);
	}
}

/* ---- static routes ------------------------------------------------------------------------ */

static int route_from_config(struct gw_dp *dp, const struct gw_route_config *c, struct rt_route *r)
{
	uint32_t ifindex = 0;
	char buf[IP_PREFIX_STRLEN];

	memset(r, 0, sizeof(*r));
	r->prefix = c->prefix;
	r->source = RT_SRC_STATIC;
	r->metric = c->metric;
	if (c->dev[0]) {
		/* A dev in another tenant is a leak the config asks for: the next hop is
		 * that interface's whatever its tenant (the neighbour is resolved there). */
		struct dp_link *k = dp_link_by_name(dp, c->dev);

		if (!k || !k->ifindex) {
			log_warning("route %s: dev %s is not running: route not installed",
				    ip_prefix_format(&c->prefix, buf, sizeof(buf)), c->dev);
			return -ENODEV;
		}
		ifindex = k->ifindex;
	}
	if (c->n_via == 0) {
		r->nnh = 1;
		r->nh[0].type = RT_NH_CONNECTED;
		r->nh[0].ifindex = ifindex;
		return 0;
	}
	r->nnh = (uint8_t)(c->n_via > RT_ECMP_MAX ? RT_ECMP_MAX : c->n_via);
	for (unsigned i = 0; i < r->nnh; i++) {
		r->nh[i].type = RT_NH_GATEWAY;
		r->nh[i].gw = c->via[i];
		r->nh[i].ifindex = ifindex;
	}
	return 0;
}

static bool same_route_key(const struct rt_route *a, const struct rt_route *b)
{
	return a->metric == b->metric && a->prefix.len == b->prefix.len &&
	       ip_addr_equal(&a->prefix.addr, &b->prefix.addr);
}

bool dp_tenant_route_configured(const struct dp_tenant *t, const struct ip_prefix *p,
				uint32_t metric)
{
	struct rt_route k = { .prefix = *p, .metric = metric };

	for (unsigned i = 0; i < t->n_routes; i++)
		if (same_route_key(&t->routes[i], &k))
			return true;
	return false;
}

static void routes_apply(struct dp_tenant *t, const struct gw_config *cfg)
{
	struct gw_dp *dp = t->dp;
	struct rt_route *nr = calloc(cfg->n_routes ? cfg->n_routes : 1, sizeof(*nr));
	unsigned n = 0, new_ = 0, gone = 0;
	char buf[IP_PREFIX_STRLEN];

	if (!nr) {
		log_error("tenant %s: static routes: out of memory", dp_tenant_label(t));
		return;
	}
	for (unsigned i = 0; i < cfg->n_routes; i++) {
		if (strcmp(cfg->routes[i].tenant, t->name))
			continue;
		if (route_from_config(dp, &cfg->routes[i], &nr[n]) == 0)
			n++;
		else
			gw_reload_note(dp->outcome, true,
				       "route %s: dev %s is not running: not installed",
				       ip_prefix_format(&cfg->routes[i].prefix, buf, sizeof(buf)),
				       cfg->routes[i].dev);
	}
	/* Remove what is gone, then add or replace the rest. */
	for (unsigned i = 0; i < t->n_routes; i++) {
		bool keep = false;

		for (unsigned j = 0; j < n && !keep; j++)
			keep = same_route_key(&t->routes[i], &nr[j]);
		if (!keep) {
			(void)rt_del(t->rt, &t->routes[i].prefix, RT_SRC_STATIC,
				     t->routes[i].metric);
			gone++;
		}
	}
	for (unsigned j = 0; j < n; j++) {
		int ret = rt_replace(t->rt, &nr[j]);

		if (ret < 0) {
			log_errno(LOG_ERR, -ret, "route %s metric %u not installed",
				  ip_prefix_format(&nr[j].prefix, buf, sizeof(buf)), nr[j].metric);
			gw_reload_note(dp->outcome, true, "route %s metric %u not installed: %s",
				       buf, nr[j].metric, strerror(-ret));
		}
	}
	/* Keys are unique in a tenant of a config: what was not kept is new. */
	new_ = n - (t->n_routes - gone);
	if ((new_ || gone) && !t->name[0])
		gw_reload_note(dp->outcome, false, "static routes: %u added, %u removed", new_,
			       gone);
	else if (new_ || gone)
		gw_reload_note(dp->outcome, false, "tenant %s: static routes: %u added, %u removed",
			       t->name, new_, gone);
	free(t->routes);
	t->routes = nr;
	t->n_routes = n;
}

/* ---- kernel routes (kernel/kroute.h) ---------------------------------------------------------- */

static void on_kernel_route(void *ctx, int event, const struct rt_route *r)
{
	struct dp_tenant *t = ctx;
	char buf[IP_PREFIX_STRLEN];
	int ret = event == KROUTE_ADD ? rt_replace(t->rt, r)
				      : rt_del(t->rt, &r->prefix, RT_SRC_KERNEL, r->metric);

	if (ret < 0 && !(event == KROUTE_DEL && ret == -ENOENT))
		log_errno(LOG_WARNING, -ret, "tenant %s: kernel route %s metric %u not %s",
			  dp_tenant_label(t), ip_prefix_format(&r->prefix, buf, sizeof(buf)),
			  r->metric, event == KROUTE_ADD ? "imported" : "withdrawn");
}

/* An imported route's kernel device: the tenant's Ethernet interface on it (untagged
 * first). */
static uint32_t kernel_ifindex_map(void *ctx, int kernel_ifindex)
{
	struct dp_tenant *t = ctx;
	struct gw_dp *dp = t->dp;
	char name[IF_NAMESIZE];
	uint32_t tagged = 0;

	if (!if_indextoname((unsigned)kernel_ifindex, name))
		return 0;
	for (unsigned i = 0; i < dp->n_links; i++) {
		const struct dp_link *k = &dp->links[i];

		if (k->kind != DP_ETH || !k->ifindex || strcmp(k->device, name) ||
		    strcmp(k->tenant, t->name))
			continue;
		if (!k->vlan)
			return k->ifindex;
		if (!tagged)
			tagged = k->ifindex;
	}
	return tagged;
}

/* Stop following the kernel. withdraw: delete our exported routes (the routing
 * daemons stop announcing them); drop_imported: remove the imported routes from the RIB.
 * A reload that keeps a table keeps its routes: the next kroute's first sync is a full
 * one that adopts them instead of flapping them. */
static void kroute_stop(struct dp_tenant *t, bool withdraw, bool drop_imported)
{
	if (!t->kroute)
		return;
	if (withdraw && t->kcfg.export_table)
		(void)kroute_withdraw(t->kroute);
	kroute_free(t->kroute);
	t->kroute = NULL;
	if (drop_imported && t->kcfg.import_table)
		(void)rt_del_source(t->rt, RT_SRC_KERNEL);
}

/* Start the export and import the config asks for; the RIB holds the configured
 * routes by now, so the first sync keeps what an earlier run exported. */
static void kroute_start(struct dp_tenant *t, const struct gw_kernel_routes_config *c)
{
	struct gw_dp *dp = t->dp;
	struct kroute_config kc = {
		.rt = c->export_table ? t->rt : NULL,
		.table = c->export_table ? c->export_table : KROUTE_TABLE,
		.protocol = c->protocol,
		.priority = c->metric,
		.import_table = c->import_table,
		.import_cb = on_kernel_route,
		.map_ifindex = kernel_ifindex_map,
		.ctx = t,
	};
	int ret;

	t->kcfg = *c;
	if (!c->enabled || (!c->export_table && !c->import_table))
		return;
	/* The Ethernet side's own routes are not announced back to it. */
	for (unsigned i = 0; i < dp->n_links && kc.n_exclude < KROUTE_EXCLUDE_MAX; i++)
		if (dp->links[i].kind == DP_ETH && dp->links[i].ifindex)
			kc.exclude_if[kc.n_exclude++] = dp->links[i].ifindex;
	ret = kroute_new(dp->loop, &kc, &t->kroute);
	if (ret < 0) {
		t->kroute = NULL;
		log_errno(LOG_ERR, -ret,
			  "tenant %s: kernel routes (export table %u, import table %u)",
			  dp_tenant_label(t), c->export_table, c->import_table);
		return;
	}
	if (c->export_table)
		kroute_export_kick(t->kroute);
	log_notice("tenant %s: kernel routes: export to table %u%s, import %s%.0u",
		   dp_tenant_label(t), c->export_table, c->export_table ? "" : " (off)",
		   c->import_table ? "from table " : "off", c->import_table);
}

/* The kernel tables tenant t is to have: kernel_routes' for the default one, its own
 * tables with kernel_routes' protocol and metric for the others. */
static struct gw_kernel_routes_config kcfg_of(const struct dp_tenant *t,
					      const struct gw_config *cfg)
{
	struct gw_kernel_routes_config k = cfg->kernel_routes;
	unsigned i = gw_config_tenant_index(cfg, t->name);

	if (t->name[0]) {
		k.export_table = i ? cfg->tenants[i - 1].export_table : 0;
		k.import_table = i ? cfg->tenants[i - 1].import_table : 0;
	}
	return k;
}

static void kroute_reconfigure(struct dp_tenant *t, const struct gw_kernel_routes_config *c)
{
	const struct gw_kernel_routes_config *o = &t->kcfg;
	uint32_t old_export = o->enabled ? o->export_table : 0,
		 old_import = o->enabled ? o->import_table : 0,
		 new_export = c->enabled ? c->export_table : 0,
		 new_import = c->enabled ? c->import_table : 0;

	if (old_export == new_export && old_import == new_import && o->protocol == c->protocol &&
	    o->metric == c->metric)
		return;
	/* A changed protocol or metric is a changed route key: withdraw and export anew. */
	kroute_stop(
	    t, old_export != new_export || o->protocol != c->protocol || o->metric != c->metric,
	    old_import != new_import);
	kroute_start(t, c);
	log_notice("tenant %s: kernel routes reconfigured", dp_tenant_label(t));
	gw_reload_note(t->dp->outcome, false, "%s%skernel routes: reconfigured",
		       t->name[0] ? "tenant " : "", t->name[0] ? t->name : "");
}

/* ---- reload, stop --------------------------------------------------------------------------- */

static void rt_destroy_deferred(void *arg)
{
	rt_destroy(arg);
}

void dp_tenants_apply(struct gw_dp *dp, const struct gw_config *cfg)
{
	for (unsigned i = 0; i < GW_TENANTS_MAX; i++) {
		struct dp_tenant *t = &dp->tenants[i];
		struct gw_kernel_routes_config k;

		if (!t->rt)
			continue;
		if (i && !gw_config_tenant_index(cfg, t->name)) {
			/* Gone from the config: its links were taken out before this; workers
			 * may still hold its FIB in their last snapshot until a grace period. */
			kroute_stop(t, true, false);
			log_notice("tenant %s: removed", t->name);
			gw_reload_note(dp->outcome, false, "tenant %s: removed", t->name);
			dp_defer(NULL, rt_destroy_deferred, t->rt);
			free(t->routes);
			memset(t, 0, sizeof(*t));
			continue;
		}
		routes_apply(t, cfg);
		k = kcfg_of(t, cfg);
		if (t->kroute || t->kcfg.enabled)
			kroute_reconfigure(t, &k);
		else
			kroute_start(t, &k);
	}
}

void dp_tenants_stop(struct gw_dp *dp)
{
	for (unsigned i = 0; i < GW_TENANTS_MAX; i++)
		kroute_stop(&dp->tenants[i], true, false);
}

void dp_tenants_free(struct gw_dp *dp)
{
	for (unsigned i = 0; i < GW_TENANTS_MAX; i++) {
		struct dp_tenant *t = &dp->tenants[i];

		if (t->rt)
			rt_destroy(t->rt);
		free(t->routes);
		memset(t, 0, sizeof(*t));
	}
	dp->rt = NULL;
}
