/*
 * gwctl's write requests on the running data plane: static routes, permanent
 * neighbours, and flushing the neighbour and path caches.
 *
 * The arguments arrive checked for form (mgmt/ctl_args.h); here they are checked
 * against what runs (the interface exists and is in the engine, the link address fits
 * the link) before anything changes, so that a refused request changes nothing.
 *
 * Operator routes are RT_SRC_STATIC like the config's, but they are not in their
 * tenant's routes (the config's, reapplied at every reload): a reload leaves them alone and a restart
 * forgets them. A config route with the same prefix and metric replaces an operator
 * route at the next reload (the config is the record of intent); deleting a config
 * route lasts until the next reload puts it back. docs/operations.md says the same.
 *
 * An operator neighbour is PERMANENT (table/neigh.h): never aged, never replaced by what
 * the wire says, kept by `neigh flush`. On IPoIB its path is resolved like a learned
 * neighbour's, on first use.
 *
 * Threads: control thread (the tables' only writer).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <json-c/json.h>

#include "table/neigh.h"
#include "table/route.h"
#include "gateway/dataplane_pvt.h"
#include "lib/ipoib.h"
#include "lib/log.h"
#include "mgmt/ctl_args.h"
#include "mgmt/ctl_server.h"

_Static_assert(CTL_ROUTE_MAX_NH == RT_ECMP_MAX, "gwctl's next-hop limit is the RIB's");
_Static_assert(CTL_LLADDR_MAX == NEIGH_LLADDR_MAX, "gwctl's link addresses fit the table");
_Static_assert(CTL_NAME_MAX == GW_NAME_MAX, "gwctl's interface names are the config's");

/* ---- interfaces ---------------------------------------------------------------------- */

/* "ib0, eth0": the names an operator may use, for "no such interface" messages. */
static void link_names(struct gw_dp *dp, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < dp->n_links && o < len; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->kind == DP_IPOIB || k->kind == DP_ETH)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", k->name);
	}
	if (!buf[0])
		snprintf(buf, len, "none configured");
}

/*
 * The engine interface of dev: CTL_EBADREQ when no such link is configured, CTL_EFAILED
 * when it is configured but not in the engine (its port could not be opened).
 */
static int dev_if(struct gw_dp *dp, const char *dev, struct dp_link **out, struct ctl_reply *r)
{
	struct dp_link *k = dp_link_by_name(dp, dev);
	char names[256];

	if (!k) {
		link_names(dp, names, sizeof(names));
		return ctl_reply_error(r, CTL_EBADREQ, "no interface '%s' (interfaces: %s)", dev,
				       names);
	}
	if (!k->ifindex)
		return ctl_reply_error(r, CTL_EFAILED, "interface %s is not running: %s", dev,
				       k->reason[0] ? k->reason : "not in the data plane");
	*out = k;
	return CTL_OK;
}

/* ---- routes -------------------------------------------------------------------------- */

/* The tenant a request names ("": the default one). */
static int tenant_of(struct gw_dp *dp, const char *name, struct dp_tenant **out,
		     struct ctl_reply *r)
{
	char names[256];
	size_t o = 0;

	*out = dp_tenant_by_name(dp, name);
	if (*out)
		return CTL_OK;
	names[0] = '\0';
	for (unsigned i = 0; i < GW_TENANTS_MAX; i++) {
		struct dp_tenant *t = dp_tenant_at(dp, i);

		if (t && o < sizeof(names))
			o += (size_t)snprintf(names + o, sizeof(names) - o, "%s%s", o ? ", " : "",
					      dp_tenant_label(t));
	}
	return ctl_reply_error(r, CTL_EBADREQ, "no tenant '%s' (tenants: %s)", name, names);
}

/* The operator's route as the RIB takes it (interface names -> indexes). */
static int route_build(struct gw_dp *dp, const struct ctl_route *spec, struct rt_route *out,
		       struct ctl_reply *r)
{
	memset(out, 0, sizeof(*out));
	out->prefix = spec->dst;
	out->source = RT_SRC_STATIC;
	out->metric = spec->metric;
	if (spec->blackhole) {
		out->nnh = 1;
		out->nh[0].type = RT_NH_BLACKHOLE;
		return CTL_OK;
	}
	for (unsigned i = 0; i < spec->n_nh; i++) {
		const struct ctl_nexthop *nh = &spec->nh[i];
		struct dp_link *k;

		if (nh->dev[0]) {
			int st = dev_if(dp, nh->dev, &k, r);

			if (st != CTL_OK)
				return st;
			out->nh[i].ifindex = k->ifindex;
		}
		out->nh[i].type = nh->has_gw ? RT_NH_GATEWAY : RT_NH_CONNECTED;
		out->nh[i].gw = nh->gw;
	}
	out->nnh = (uint8_t)spec->n_nh;
	return CTL_OK;
}

int gw_dp_route_add(struct gw_dp *dp, const struct ctl_route *spec, struct ctl_reply *r)
{
	char text[CTL_ROUTE_STRLEN], p[IP_PREFIX_STRLEN];
	struct dp_tenant *t;
	struct rt_route rt;
	int st = tenant_of(dp, spec->tenant, &t, r), ret;

	if (st == CTL_OK)
		st = route_build(dp, spec, &rt, r);
	if (st != CTL_OK)
		return st;
	ctl_route_format(spec, text, sizeof(text));
	ret = rt_add(t->rt, &rt);
	if (ret == -EEXIST)
		return ctl_reply_error(r, CTL_EFAILED,
				       "a static route %s metric %u exists already: delete it "
				       "first or give another metric",
				       ip_prefix_format(&spec->dst, p, sizeof(p)), spec->metric);
	if (ret < 0)
		return ctl_reply_error(r, CTL_EFAILED, "route %s not added: %s", text,
				       ret == -ENOSPC ? "the forwarding table is full"
						      : strerror(-ret));
	log_notice("gwctl: route %s added", text);
	return CTL_OK;
}

struct route_find {
	const struct ip_prefix *prefix;
	uint32_t metric;
	struct rt_route found;
	bool ok;
};

static int route_find_cb(void *ctx, const struct rt_route *rt)
{
	struct route_find *f = ctx;

	if (rt->source != RT_SRC_STATIC || rt->metric != f->metric ||
	    rt->prefix.len != f->prefix->len || !ip_addr_equal(&rt->prefix.addr, &f->prefix->addr))
		return 0;
	f->found = *rt;
	f->ok = true;
	return 1;
}

/* Does the installed route have the next hops the operator named? Next hops without a
 * dev match a gateway on any interface; the order does not matter. */
static bool route_matches(const struct rt_route *have, const struct rt_route *want)
{
	if (want->nnh != have->nnh)
		return false;
	for (unsigned i = 0; i < want->nnh; i++) {
		const struct rt_nexthop *w = &want->nh[i];
		bool hit = false;

		for (unsigned j = 0; j < have->nnh && !hit; j++) {
			const struct rt_nexthop *h = &have->nh[j];

			hit = h->type == w->type && (!w->ifindex || w->ifindex == h->ifindex) &&
			      (w->type != RT_NH_GATEWAY || ip_addr_equal(&w->gw, &h->gw));
		}
		if (!hit)
			return false;
	}
	return true;
}

int gw_dp_route_del(struct gw_dp *dp, const struct ctl_route *spec, struct ctl_reply *r)
{
	struct route_find f = { .prefix = &spec->dst, .metric = spec->metric };
	char text[CTL_ROUTE_STRLEN], p[IP_PREFIX_STRLEN];
	struct dp_tenant *t;
	struct rt_route want;
	int st = tenant_of(dp, spec->tenant, &t, r), ret;

	if (st == CTL_OK)
		st = route_build(dp, spec, &want, r);
	if (st != CTL_OK)
		return st;
	ip_prefix_format(&spec->dst, p, sizeof(p));
	rt_walk(t->rt, spec->dst.addr.family, route_find_cb, &f);
	if (!f.ok)
		return ctl_reply_error(r, CTL_EFAILED, "no static route %s metric %u", p,
				       spec->metric);
	if ((spec->n_nh || spec->blackhole) && !route_matches(&f.found, &want))
		return ctl_reply_error(r, CTL_EFAILED,
				       "the static route %s metric %u has other next hops "
				       "(gwctl show routes %s)",
				       p, spec->metric, p);
	ret = rt_del(t->rt, &spec->dst, RT_SRC_STATIC, spec->metric);
	if (ret < 0)
		return ctl_reply_error(r, CTL_EFAILED, "route %s metric %u not deleted: %s", p,
				       spec->metric, strerror(-ret));
	ctl_route_format(spec, text, sizeof(text));
	log_notice("gwctl: route %s deleted%s", text,
		   dp_tenant_route_configured(t, &f.found.prefix, f.found.metric)
		       ? " (a config route: the next reload puts it back)"
		       : "");
	return CTL_OK;
}

/* ---- neighbours ---------------------------------------------------------------------- */

/* The neighbour table of dev (Ethernet: the engine's; IPoIB: the link's). */
static int dev_neigh(struct gw_dp *dp, const char *dev, struct dp_link **k, struct neigh_table **t,
		     struct ctl_reply *r)
{
	const struct fwd_if *f;
	int st = dev_if(dp, dev, k, r);

	if (st != CTL_OK)
		return st;
	f = fwd_snap_if(fwd_engine_current(dp->e), (*k)->ifindex);
	if (!f || !f->neigh)
		return ctl_reply_error(r, CTL_EFAILED, "interface %s has no neighbour table yet",
				       dev);
	*t = f->neigh;
	return CTL_OK;
}

static int eth_link(const struct ctl_neigh *n, struct neigh_link *ll, struct ctl_reply *r)
{
	static const uint8_t zero[6];
	char buf[3 * CTL_LLADDR_MAX];

	if (n->lladdr_len != 6)
		return ctl_reply_error(r, CTL_EBADREQ,
				       "%s is Ethernet: lladdr must be a MAC (6 octets), not %u "
				       "octets",
				       n->dev, n->lladdr_len);
	ctl_lladdr_format(n->lladdr, 6, buf, sizeof(buf));
	if (n->lladdr[0] & 1)
		return ctl_reply_error(r, CTL_EBADREQ, "lladdr %s is a multicast MAC", buf);
	if (!memcmp(n->lladdr, zero, 6))
		return ctl_reply_error(r, CTL_EBADREQ, "lladdr %s is not a station's MAC", buf);
	ll->len = 6;
	ll->usable = true;
	memcpy(ll->addr, n->lladdr, 6);
	return CTL_OK;
}

/* IPoIB: flags, QPN, GID (lib/ipoib.h). Not usable until the link binds its path. */
static int ipoib_link_addr(const struct ctl_neigh *n, uint32_t mtu, struct neigh_link *ll,
			   struct ctl_reply *r)
{
	struct ipoib_hwaddr hw;

	if (n->lladdr_len != IPOIB_HWADDR_LEN)
		return ctl_reply_error(r, CTL_EBADREQ,
				       "%s is IPoIB: lladdr must be the 20-octet IPoIB hardware "
				       "address (flags, QPN, GID), not %u octets",
				       n->dev, n->lladdr_len);
	if (ipoib_hwaddr_decode(n->lladdr, n->lladdr_len, &hw) < 0)
		return ctl_reply_error(r, CTL_EBADREQ,
				       "lladdr flags 0x%02x set reserved bits (0x80 RC and 0x40 UC "
				       "are defined)",
				       n->lladdr[0]);
	if (hw.qpn == 0 || hw.qpn == 0xffffff)
		return ctl_reply_error(r, CTL_EBADREQ, "lladdr QPN 0x%x is not a UD QP", hw.qpn);
	if (hw.gid.raw[0] == 0xff || !ib_gid_prefix(&hw.gid))
		return ctl_reply_error(r, CTL_EBADREQ, "lladdr GID is not a port's unicast GID");
	ll->len = IPOIB_HWADDR_LEN;
	memcpy(ll->addr, n->lladdr, IPOIB_HWADDR_LEN);
	ll->qpn = hw.qpn;
	ll->mtu = mtu;
	return CTL_OK;
}

int gw_dp_neigh_add(struct gw_dp *dp, const struct ctl_neigh *n, struct ctl_reply *r)
{
	struct neigh_link ll = { 0 };
	struct neigh_table *t;
	struct dp_link *k;
	char a[IP_ADDR_STRLEN], buf[3 * CTL_LLADDR_MAX];
	int st = dev_neigh(dp, n->dev, &k, &t, r);

	if (st != CTL_OK)
		return st;
	if (k->kind == DP_ETH)
		st = eth_link(n, &ll, r);
	else
		st = ipoib_link_addr(n, fwd_snap_if(fwd_engine_current(dp->e), k->ifindex)->mtu,
				     &ll, r);
	if (st != CTL_OK)
		return st;
	ip_addr_format(&n->dst, a, sizeof(a));
	if (!neigh_update(t, n->dst.family, n->dst.bytes, &ll, NEIGH_F_ADMIN))
		return ctl_reply_error(
		    r, CTL_EFAILED, "the neighbour table of %s is full: %s not added", n->dev, a);
	log_notice("gwctl: neighbour %s dev %s lladdr %s PERMANENT", a, n->dev,
		   ctl_lladdr_format(n->lladdr, n->lladdr_len, buf, sizeof(buf)));
	return CTL_OK;
}

int gw_dp_neigh_del(struct gw_dp *dp, const struct ctl_neigh *n, struct ctl_reply *r)
{
	struct neigh_table *t;
	struct neigh_entry *e;
	struct neigh_info ni;
	struct dp_link *k;
	char a[IP_ADDR_STRLEN], have[3 * CTL_LLADDR_MAX], want[3 * CTL_LLADDR_MAX];
	int st = dev_neigh(dp, n->dev, &k, &t, r);

	if (st != CTL_OK)
		return st;
	ip_addr_format(&n->dst, a, sizeof(a));
	e = neigh_lookup(t, n->dst.family, n->dst.bytes);
	if (!e || neigh_entry_state(e) == NEIGH_NONE)
		return ctl_reply_error(r, CTL_EFAILED, "no neighbour %s on %s", a, n->dev);
	neigh_info_of(t, e, &ni);
	if (n->lladdr_len && (!ni.has_link || ni.link.len != n->lladdr_len ||
			      memcmp(ni.link.addr, n->lladdr, n->lladdr_len)))
		return ctl_reply_error(
		    r, CTL_EFAILED, "neighbour %s on %s has lladdr %s, not %s", a, n->dev,
		    ni.has_link ? ctl_lladdr_format(ni.link.addr, ni.link.len, have, sizeof(have))
				: "none",
		    ctl_lladdr_format(n->lladdr, n->lladdr_len, want, sizeof(want)));
	neigh_delete(t, e);
	log_notice("gwctl: neighbour %s dev %s deleted (was %s)", a, n->dev,
		   neigh_state_name(ni.state));
	return CTL_OK;
}

/* The entries a flush removes, gathered first: neigh_foreach may not delete. */
struct flush_walk {
	const struct ctl_neigh_flush *f;
	struct ip_addr *addrs;
	size_t n, cap;
	bool nomem;
};

static int flush_collect(void *arg, const struct neigh_info *ni)
{
	struct flush_walk *w = arg;
	struct ip_addr a = { .family = (uint8_t)ni->family };

	if (ni->state == NEIGH_PERMANENT || ni->state == NEIGH_NONE)
		return 0;
	memcpy(a.bytes, ni->addr, ni->family == AF_INET ? 4 : 16);
	if (w->f->has_to && !ip_prefix_contains(&w->f->to, &a))
		return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		struct ip_addr *p = realloc(w->addrs, cap * sizeof(*p));

		if (!p) {
			w->nomem = true;
			return 1;
		}
		w->addrs = p;
		w->cap = cap;
	}
	w->addrs[w->n++] = a;
	return 0;
}

int gw_dp_neigh_flush(struct gw_dp *dp, const struct ctl_neigh_flush *f, struct ctl_reply *r)
{
	struct flush_walk w = { .f = f };
	struct neigh_table *t;
	struct dp_link *k;
	struct json_object *o;
	size_t done = 0;
	int st = dev_neigh(dp, f->dev, &k, &t, r);

	if (st != CTL_OK)
		return st;
	neigh_foreach(t, flush_collect, &w);
	if (w.nomem) {
		free(w.addrs);
		return ctl_reply_error(r, CTL_EFAILED, "out of memory: nothing flushed");
	}
	for (size_t i = 0; i < w.n; i++) {
		struct neigh_entry *e = neigh_lookup(t, w.addrs[i].family, w.addrs[i].bytes);

		if (e) {
			neigh_delete(t, e);
			done++;
		}
	}
	free(w.addrs);
	log_notice("gwctl: %zu neighbours of %s flushed", done, f->dev);
	o = json_object_new_object();
	json_object_object_add(o, "dev", json_object_new_string(f->dev));
	json_object_object_add(o, "flushed", json_object_new_int64((int64_t)done));
	return ctl_reply_record(r, o) < 0 ? CTL_EFAILED : CTL_OK;
}

/* ---- paths --------------------------------------------------------------------------- */

struct gid_walk {
	union ib_gid *gids;
	size_t n, cap;
	bool nomem;
};

static int gid_collect(void *arg, const struct sa_path_info *pi)
{
	struct gid_walk *w = arg;

	for (size_t i = 0; i < w->n; i++)
		if (ib_gid_equal(&w->gids[i], &pi->path.dgid))
			return 0;
	if (w->n == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		union ib_gid *p = realloc(w->gids, cap * sizeof(*p));

		if (!p) {
			w->nomem = true;
			return 1;
		}
		w->gids = p;
		w->cap = cap;
	}
	w->gids[w->n++] = pi->path.dgid;
	return 0;
}

/* Drop the port's cached paths (to gid, or all): the next resolution asks the SA. */
static int port_flush(struct dp_port *p, const struct ctl_path_flush *f, unsigned *flushed)
{
	struct gid_walk w = { 0 };

	*flushed = 0;
	if (f->has_gid) {
		*flushed = sa_path_invalidate(p->sa, &f->gid);
		return 0;
	}
	sa_path_foreach(p->sa, gid_collect, &w);
	if (w.nomem) {
		free(w.gids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < w.n; i++)
		*flushed += sa_path_invalidate(p->sa, &w.gids[i]);
	free(w.gids);
	return 0;
}

int gw_dp_path_flush(struct gw_dp *dp, const struct ctl_path_flush *f, struct ctl_reply *r)
{
	for (unsigned i = 0; i < dp->n_ports; i++) {
		struct dp_port *p = &dp->ports[i];
		struct json_object *o;
		unsigned n;

		if (!p->sa)
			continue;
		if (port_flush(p, f, &n) < 0)
			return ctl_reply_error(r, CTL_EFAILED, "out of memory flushing %s/%u",
					       p->device, p->num);
		log_notice("gwctl: %u cached paths of %s/%u flushed", n, p->device, p->num);
		o = json_object_new_object();
		json_object_object_add(o, "device", json_object_new_string(p->device));
		json_object_object_add(o, "port", json_object_new_int(p->num));
		json_object_object_add(o, "flushed", json_object_new_int64(n));
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
	}
	return CTL_OK;
}
