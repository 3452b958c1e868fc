/*
 * gwctl's view of the data plane: one JSON record per object (a link, a route, a
 * neighbour, a path, a group, a connection), snake_case keys in the manner of
 * `ip -j` (dst, gateway, dev, protocol, scope, prefsrc, metric, flags, nexthops;
 * lladdr and state as an array for neighbours). The text form is gwctl's.
 *
 * Threads: control thread (the tables' writer, so it reads them without RCU).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "table/route.h"
#include "engine/slowpath.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_json.h"
#include "gateway/dp_mcast.h"
#include "lib/ib_gid.h"
#include "lib/ipoib.h"
#include "mgmt/ctl_server.h"

/* One record of a walk's reply; 1 (stop the walk, status failed) when it cannot go. */
static int emit(struct ctl_reply *r, int *status, struct json_object *o)
{
	if (ctl_reply_record(r, o) < 0) {
		*status = CTL_EFAILED;
		return 1;
	}
	return 0;
}

static const char *mac_str(const uint8_t *m, char *b, size_t len)
{
	snprintf(b, len, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
	return b;
}

static const char *if_name(struct gw_dp *dp, uint32_t ifindex)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(dp->e), ifindex);

	return f ? f->name : "?";
}

static unsigned mtu_bytes(uint8_t code)
{
	return code >= 1 && code <= 5 ? 128u << code : 0;
}

/* ---- links ----------------------------------------------------------------------------- */

static struct json_object *addrs_json(const struct ip_prefix *p, unsigned n)
{
	struct json_object *a = json_object_new_array();
	char buf[IP_PREFIX_STRLEN];

	for (unsigned i = 0; i < n; i++)
		json_object_array_add(
		    a, json_object_new_string(ip_prefix_format(&p[i], buf, sizeof(buf))));
	return a;
}

static struct json_object *ipoib_stats_json(const struct ipoib_link *l)
{
	struct ipoib_link_stats st;
	struct json_object *o = json_object_new_object(), *d = json_object_new_object();

	ipoib_link_stats(l, &st);
	add_int(o, "rx_packets", (int64_t)st.rx_packets);
	add_int(o, "rx_bytes", (int64_t)st.rx_bytes);
	add_int(o, "tx_packets", (int64_t)st.tx_packets);
	add_int(o, "tx_bytes", (int64_t)st.tx_bytes);
	add_int(o, "rx_mcast", (int64_t)st.rx_mcast);
	add_int(o, "tx_mcast", (int64_t)st.tx_mcast);
	add_int(o, "rx_arp", (int64_t)st.rx_arp);
	add_int(o, "tx_arp", (int64_t)st.tx_arp);
	add_int(o, "rx_nd", (int64_t)st.rx_nd);
	add_int(o, "tx_nd", (int64_t)st.tx_nd);
	add_int(o, "joins", (int64_t)st.joins);
	add_int(o, "paths_resolved", (int64_t)st.paths_resolved);
	add_int(o, "path_failures", (int64_t)st.path_failures);
	add_int(o, "paths_freed", (int64_t)st.paths_freed);
	add_int(o, "ud_qp_recoveries", (int64_t)st.ud_qp_recoveries);
	add_int(o, "rc_rx_packets", (int64_t)st.rc_rx_packets);
	add_int(o, "rc_rx_bytes", (int64_t)st.rc_rx_bytes);
	add_int(o, "rc_tx_packets", (int64_t)st.rc_tx_packets);
	add_int(o, "rc_tx_bytes", (int64_t)st.rc_tx_bytes);
	add_int(o, "rc_tx_errors", (int64_t)st.rc_tx_errors);
	add_int(o, "conn_up", (int64_t)st.conn_up);
	add_int(o, "conn_down", (int64_t)st.conn_down);
	add_int(o, "conn_failed", (int64_t)st.conn_failed);
	for (int i = 0; i < IPOIB_DROP_COUNT; i++)
		add_int(d, ipoib_drop_name((enum ipoib_drop)i), (int64_t)st.drops[i]);
	json_object_object_add(o, "drops", d);
	return o;
}

static struct json_object *eth_stats_json(struct dp_link *k)
{
	struct ethp_stats st;
	struct json_object *o = json_object_new_object(), *d = json_object_new_object();

	memset(&st, 0, sizeof(st));
	k->eops->stats(k->eth, &st);
	add_int(o, "rx_packets", (int64_t)st.rx_packets);
	add_int(o, "rx_bytes", (int64_t)st.rx_bytes);
	add_int(o, "tx_packets", (int64_t)st.tx_packets);
	add_int(o, "tx_bytes", (int64_t)st.tx_bytes);
	add_int(o, "rx_gso", (int64_t)st.rx_gso);
	add_int(o, "tx_gso", (int64_t)st.tx_gso);
	add_int(o, "rx_csum_completed", (int64_t)st.rx_csum_completed);
	for (int i = 0; i < ETHP_DROP_MAX; i++)
		add_int(d, ethp_drop_name((enum ethp_drop)i), (int64_t)st.drops[i]);
	json_object_object_add(o, "drops", d);
	return o;
}

int gw_dp_show_links(struct gw_dp *dp, bool stats, const char *tenant, struct ctl_reply *r)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);
	const struct dp_tenant *t = tenant ? dp_tenant_by_name(dp, tenant) : NULL;
	char buf[IPOIB_HWADDR_STRLEN];

	if (tenant && !t)
		return ctl_reply_error(r, CTL_EBADREQ, "no tenant '%s'", tenant);
	for (unsigned i = 0; i < dp->n_links; i++) {
		struct dp_link *k = &dp->links[i];
		const struct fwd_if *f = fwd_snap_if(s, k->ifindex);
		struct json_object *o;
		bool up = f && f->up;

		if (k->kind == DP_NONE || (t && strcmp(k->tenant, t->name)))
			continue;
		o = json_object_new_object();
		add_str(o, "name", k->name);
		add_str(o, "kind", k->kind == DP_IPOIB ? "ipoib" : "ether");
		add_str(o, "tenant", k->tenant[0] ? k->tenant : "default");
		add_str(o, "state", up ? "up" : "down");
		if (!up)
			add_str(o, "reason", k->reason[0] ? k->reason : "down");
		add_int(o, "mtu", f ? f->mtu : k->cfg_mtu);
		if (k->kind == DP_IPOIB) {
			add_str(o, "mode", gw_ipoib_mode_name(k->mode));
			add_hex(o, "pkey", k->pkey, 4);
			add_str(o, "device", k->device);
			add_int(o, "port", k->port_num);
			if (up) {
				struct ipoib_hwaddr hw;

				ipoib_link_hwaddr(k->link, &hw);
				ipoib_hwaddr_format(&hw, buf, sizeof(buf));
				add_str(o, "address", buf);
				add_hex(o, "qpn", hw.qpn, 0);
				add_hex(o, "qkey", k->qkey, 0);
			}
			if (k->link) { /* the port it runs on, also while down */
				union ib_gid g;

				ipoib_link_gid(k->link, &g);
				ib_gid_format(&g, buf, sizeof(buf));
				add_str(o, "gid", buf);
			}
			if (k->port && k->port->port) {
				add_hex(o, "lid", k->port->pi.lid, 0);
				add_hex(o, "sm_lid", k->port->pi.sm_lid, 0);
				/* the port's receive queues: one per worker when the HCA spreads
				 * UD receives (RSS), else 1 (docs/ib-port.md, "Queues") */
				add_int(o, "queues", k->port->ops->queues(k->port->port));
			}
		} else {
			add_str(o, "device", k->device);
			if (k->vlan)
				add_int(o, "vlan", k->vlan);
			if (k->eth)
				add_str(o, "address",
					mac_str(f ? f->mac : k->eattr.mac, buf, sizeof(buf)));
			if (k->eth && k->eattr.io)
				add_str(o, "io", k->eattr.io);
		}
		add_str(o, "backend", k->backend);
		add_int(o, "ifindex", k->ifindex);
		json_object_object_add(o, "addresses", addrs_json(k->addrs, k->n_addrs));
		if (stats) {
			if (k->kind == DP_IPOIB && k->link)
				json_object_object_add(o, "stats", ipoib_stats_json(k->link));
			else if (k->kind == DP_ETH && k->eth)
				json_object_object_add(o, "stats", eth_stats_json(k));
		}
		if (ctl_reply_record(r, o) < 0)
			return CTL_EFAILED;
	}
	return CTL_OK;
}

/* ---- routes ---------------------------------------------------------------------------- */

/* Where a streamed `show routes` stopped: the last prefix whose routes were all sent. */
struct route_cursor {
	struct gw_dp *dp;
	unsigned slot; /* the tenant being walked */
	bool all;      /* every tenant, slot after slot; else only slot */
	struct ip_prefix last;
	bool started;
};

struct route_walk {
	struct gw_dp *dp;
	const struct dp_tenant *t;
	const struct ip_prefix *match;
	struct route_cursor *cur; /* streamed: stop at a prefix once the piece is full */
	struct ctl_reply *r;
	int status;
};

static const char *proto_name(uint8_t src)
{
	switch (src) {
	case RT_SRC_CONNECTED:
		return "kernel";
	case RT_SRC_STATIC:
		return "static";
	case RT_SRC_LEARNED:
		return "learned";
	default:
		return "kernel_import";
	}
}

/* The interface address inside prefix p (the connected route's src). */
static bool prefsrc(struct gw_dp *dp, uint32_t ifindex, const struct ip_prefix *p,
		    struct ip_addr *out)
{
	const struct fwd_if *f = fwd_snap_if(fwd_engine_current(dp->e), ifindex);

	if (!f)
		return false;
	for (unsigned i = 0; i < f->n_addrs; i++) {
		if (f->addrs[i].addr.family == p->addr.family &&
		    ip_prefix_contains(p, &f->addrs[i].addr)) {
			*out = f->addrs[i].addr;
			return true;
		}
	}
	return false;
}

static struct json_object *nh_json(struct gw_dp *dp, const struct rt_route *rt, unsigned i)
{
	struct json_object *o = json_object_new_object(), *fl = json_object_new_array();
	char buf[IP_ADDR_STRLEN];

	if (rt->nh[i].type == RT_NH_GATEWAY)
		add_str(o, "gateway", ip_addr_format(&rt->nh[i].gw, buf, sizeof(buf)));
	if (rt->nh[i].ifindex)
		add_str(o, "dev", if_name(dp, rt->nh[i].ifindex));
	add_int(o, "weight", 1);
	if (!(rt->nh_resolved & (1u << i)))
		json_object_array_add(fl, json_object_new_string("unresolved"));
	json_object_object_add(o, "flags", fl);
	return o;
}

static int route_cb(void *ctx, const struct rt_route *rt)
{
	struct route_walk *w = ctx;
	struct json_object *o, *fl;
	char buf[IP_PREFIX_STRLEN];
	struct ip_addr src;

	if (w->match &&
	    (w->match->len != rt->prefix.len || !ip_addr_equal(&w->match->addr, &rt->prefix.addr)))
		return 0;
	if (w->cur && w->cur->started && ctl_reply_full(w->r) &&
	    (w->cur->last.len != rt->prefix.len ||
	     !ip_addr_equal(&w->cur->last.addr, &rt->prefix.addr)))
		return 1; /* the piece is full: this prefix starts the next one */
	o = json_object_new_object();
	fl = json_object_new_array();
	switch (rt->nh[0].type) {
	case RT_NH_LOCAL:
		add_str(o, "type", "local");
		break;
	case RT_NH_BLACKHOLE:
		add_str(o, "type", "blackhole");
		break;
	default:
		add_str(o, "type", "unicast");
	}
	if (rt->prefix.len == 0)
		add_str(o, "dst", "default");
	else if (rt->nh[0].type == RT_NH_LOCAL)
		add_str(o, "dst", ip_addr_format(&rt->prefix.addr, buf, sizeof(buf)));
	else
		add_str(o, "dst", ip_prefix_format(&rt->prefix, buf, sizeof(buf)));
	if (rt->nnh == 1) {
		if (rt->nh[0].type == RT_NH_GATEWAY)
			add_str(o, "gateway", ip_addr_format(&rt->nh[0].gw, buf, sizeof(buf)));
		if (rt->nh[0].ifindex)
			add_str(o, "dev", if_name(w->dp, rt->nh[0].ifindex));
	}
	add_str(o, "protocol", proto_name(rt->source));
	if (rt->nh[0].type == RT_NH_LOCAL)
		add_str(o, "scope", "host");
	else if (rt->nh[0].type == RT_NH_CONNECTED)
		add_str(o, "scope", "link");
	if (rt->source == RT_SRC_CONNECTED && rt->nh[0].ifindex &&
	    prefsrc(w->dp, rt->nh[0].ifindex, &rt->prefix, &src))
		add_str(o, "prefsrc", ip_addr_format(&src, buf, sizeof(buf)));
	add_int(o, "metric", rt->metric);
	add_str(o, "tenant", dp_tenant_label(w->t));
	if (rt->nnh > 1) {
		struct json_object *a = json_object_new_array();

		for (unsigned i = 0; i < rt->nnh; i++)
			json_object_array_add(a, nh_json(w->dp, rt, i));
		json_object_object_add(o, "nexthops", a);
	} else if (rt->nh[0].type != RT_NH_LOCAL && rt->nh[0].type != RT_NH_BLACKHOLE &&
		   !(rt->nh_resolved & 1)) {
		json_object_array_add(fl, json_object_new_string("unresolved"));
	}
	if (!(rt->flags & RT_F_SELECTED))
		json_object_array_add(fl, json_object_new_string("inactive"));
	json_object_object_add(o, "flags", fl);
	if (w->cur) {
		w->cur->last = rt->prefix;
		w->cur->started = true;
	}
	return emit(w->r, &w->status, o);
}

/* One piece of the streamed table: the prefixes after the cursor, until the piece is
 * full (ctl_reply_full) at a prefix boundary. */
static int routes_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct route_cursor *cur = cursor;
	(void)ctx;

	for (; cur->slot < GW_TENANTS_MAX; cur->slot++, cur->started = false) {
		struct route_walk w = { .dp = cur->dp, .cur = cur, .r = r, .status = CTL_OK };
		int rc;

		w.t = dp_tenant_at(cur->dp, cur->slot);
		if (!w.t) { /* removed by a reload meanwhile, or a free slot */
			if (!cur->all)
				return CTL_OK;
			continue;
		}
		if (cur->started || !ctl_reply_full(r))
			rc = rt_walk_after(w.t->rt, 0, cur->started ? &cur->last : NULL, route_cb,
					   &w);
		else
			rc = 1; /* the piece is full: this tenant starts the next one */
		if (w.status != CTL_OK)
			return w.status;
		if (rc)
			return CTL_MORE;
		if (!cur->all)
			return CTL_OK;
	}
	return CTL_OK;
}

/*
 * The whole table is streamed (a full Internet table is a million routes: built whole
 * it would take the control thread and hundreds of MB for the walk); one prefix is one
 * walk, answered at once.
 */
int gw_dp_show_routes(struct gw_dp *dp, const char *tenant, const struct ip_prefix *match,
		      struct ctl_reply *r)
{
	struct route_walk w = { .dp = dp, .match = match, .r = r, .status = CTL_OK };
	bool all = !strcmp(tenant, "all");
	const struct dp_tenant *t = all ? NULL : dp_tenant_by_name(dp, tenant);
	struct route_cursor *cur;

	if (!all && !t)
		return ctl_reply_error(r, CTL_EBADREQ, "no tenant '%s'", tenant);
	if (match) {
		for (unsigned i = 0; i < GW_TENANTS_MAX && w.status == CTL_OK; i++) {
			w.t = dp_tenant_at(dp, i);
			if (w.t && (all || w.t == t))
				rt_walk(w.t->rt, match->addr.family, route_cb, &w);
		}
		return w.status;
	}
	cur = calloc(1, sizeof(*cur));
	if (!cur)
		return ctl_reply_error(r, CTL_EFAILED, "out of memory");
	cur->dp = dp;
	cur->all = all;
	cur->slot = all ? 0 : (unsigned)(t - dp->tenants);
	ctl_reply_stream(r, routes_next, cur, free);
	return CTL_OK;
}

/* ---- neighbours ------------------------------------------------------------------------ */

struct neigh_walk {
	struct gw_dp *dp;
	const struct fwd_if *f;
	struct ctl_reply *r;
	int status;
};

static int neigh_cb(void *arg, const struct neigh_info *ni)
{
	struct neigh_walk *w = arg;
	struct json_object *o = json_object_new_object(), *st = json_object_new_array();
	char buf[IPOIB_HWADDR_STRLEN];

	if (ni->state == NEIGH_NONE) {
		json_object_put(o);
		json_object_put(st);
		return 0;
	}
	add_str(o, "dst", inet_ntop(ni->family, ni->addr, buf, sizeof(buf)) ? buf : "?");
	add_str(o, "dev", w->f->name);
	if (ni->has_link && ni->link.len == 6) {
		add_str(o, "lladdr", mac_str(ni->link.addr, buf, sizeof(buf)));
	} else if (ni->has_link && ni->link.len == IPOIB_HWADDR_LEN) {
		struct ipoib_hwaddr hw;
		char gid[IB_GID_STRLEN];

		if (ipoib_hwaddr_decode(ni->link.addr, ni->link.len, &hw) == 0) {
			ipoib_hwaddr_format(&hw, buf, sizeof(buf));
			add_str(o, "lladdr", buf);
			add_hex(o, "qpn", hw.qpn, 0);
			ib_gid_format(&hw.gid, gid, sizeof(gid));
			add_str(o, "gid", gid);
			add_str(o, "peer_mode", hw.flags & IPOIB_HWADDR_F_RC ? "rc" : "ud");
		}
		if (ni->link.usable) {
			struct json_object *p = json_object_new_object();

			add_hex(p, "dlid", ni->link.dlid, 0);
			add_int(p, "sl", ni->link.sl);
			add_int(p, "mtu", mtu_bytes(ni->link.ib_mtu));
			json_object_object_add(p, "grh", json_object_new_boolean(ni->link.grh));
			json_object_object_add(o, "path", p);
			add_int(o, "mtu", ni->link.mtu);
			add_str(o, "mode", ni->link.conn ? "rc" : "ud");
		}
	}
	json_object_array_add(st, json_object_new_string(neigh_state_name(ni->state)));
	json_object_object_add(o, "state", st);
	if (ni->probes)
		add_int(o, "probes", ni->probes);
	/* As ip -s neigh's "used": since the last use and the last confirmation (an
	 * answer, or an upper layer's proof such as the failover pair's heartbeats). */
	if (ni->used_ms != UINT64_MAX)
		add_int(o, "used_ms", (int64_t)ni->used_ms);
	if (ni->confirmed_ms != UINT64_MAX)
		add_int(o, "confirmed_ms", (int64_t)ni->confirmed_ms);
	if (ni->queued)
		add_int(o, "queued", ni->queued);
	return emit(w->r, &w->status, o);
}

/* Where a streamed `show neighbours` stopped: the interface and the next bucket of its
 * table. */
struct neigh_cursor {
	struct gw_dp *dp;
	char dev[FWD_IF_NAME_MAX]; /* "": every interface */
	uint32_t ifindex;
	unsigned bucket;
};

static bool neigh_piece_full(void *arg)
{
	const struct neigh_walk *w = arg;

	return ctl_reply_full(w->r);
}

static bool neigh_dev_match(const struct fwd_if *f, const char *dev)
{
	return f && f->neigh && (!dev[0] || !strcmp(dev, f->name));
}

/* One piece: whole hash buckets of the interfaces' tables from the cursor on, until the
 * piece is full. An interface replaced by a reload between pieces is walked in its new
 * table from the same bucket (a dump during a reload may miss or repeat an entry). */
static int neighbours_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct neigh_cursor *cur = cursor;
	const struct fwd_snap *s = fwd_engine_current(cur->dp->e);
	struct neigh_walk w = { .dp = cur->dp, .r = r, .status = CTL_OK };
	(void)ctx;

	for (; cur->ifindex < FWD_IF_MAX; cur->ifindex++, cur->bucket = 0) {
		const struct fwd_if *f = fwd_snap_if(s, cur->ifindex);
		bool more;

		if (!neigh_dev_match(f, cur->dev))
			continue;
		w.f = f;
		more = neigh_walk_from(f->neigh, &cur->bucket, neigh_piece_full, neigh_cb, &w);
		if (w.status != CTL_OK)
			return w.status;
		if (more)
			return CTL_MORE;
	}
	return CTL_OK;
}

/* Streamed: a table holds up to gc_thresh3 (4 Mi) entries per interface. */
int gw_dp_show_neighbours(struct gw_dp *dp, const char *dev, struct ctl_reply *r)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);
	struct neigh_cursor *cur;
	bool found = !dev;

	for (uint32_t k = 1; k < FWD_IF_MAX && !found; k++)
		found = neigh_dev_match(fwd_snap_if(s, k), dev);
	if (!found)
		return ctl_reply_error(r, CTL_EBADREQ, "no interface '%s' in the data plane", dev);
	cur = calloc(1, sizeof(*cur));
	if (!cur)
		return ctl_reply_error(r, CTL_EFAILED, "out of memory");
	cur->dp = dp;
	cur->ifindex = 1;
	if (dev)
		snprintf(cur->dev, sizeof(cur->dev), "%s", dev);
	ctl_reply_stream(r, neighbours_next, cur, free);
	return CTL_OK;
}

/* ---- paths, groups, connections -------------------------------------------------------- */

struct port_walk {
	struct dp_port *p;
	const char *dev;
	struct ctl_reply *r;
	int status;
};

static int path_cb(void *arg, const struct sa_path_info *pi)
{
	struct port_walk *w = arg;
	struct json_object *o = json_object_new_object();
	char gid[IB_GID_STRLEN];

	ib_gid_format(&pi->path.dgid, gid, sizeof(gid));
	add_str(o, "dgid", gid);
	ib_gid_format(&pi->path.sgid, gid, sizeof(gid));
	add_str(o, "sgid", gid);
	add_str(o, "state", sa_path_state_name(pi->state));
	if (pi->state == SA_PATH_VALID || pi->state == SA_PATH_STALE) {
		add_hex(o, "dlid", pi->path.dlid, 0);
		add_hex(o, "slid", pi->path.slid, 0);
		add_int(o, "sl", pi->path.sl);
		add_int(o, "mtu", mtu_bytes(pi->path.mtu));
		add_int(o, "rate", pi->path.rate);
		add_int(o, "hop_limit", pi->path.hop_limit);
		json_object_object_add(o, "local", json_object_new_boolean(pi->path.local));
	}
	add_hex(o, "pkey", pi->path.pkey, 4);
	if (pi->last_error)
		add_str(o, "error",
			strerror(pi->last_error < 0 ? -pi->last_error : pi->last_error));
	add_int(o, "age_ms", (int64_t)pi->age_ms);
	add_int(o, "expires_ms", (int64_t)pi->expires_in_ms);
	add_str(o, "device", w->p->device);
	add_int(o, "port", w->p->num);
	return emit(w->r, &w->status, o);
}

/* Where a streamed `show paths` stopped: the port and the next bucket of its cache. */
struct path_cursor {
	struct gw_dp *dp;
	unsigned port, bucket;
};

static bool path_piece_full(void *arg)
{
	const struct port_walk *w = arg;

	return ctl_reply_full(w->r);
}

/* One piece: whole hash buckets of the ports' PathRecord caches from the cursor on. A
 * reload between pieces that changes the ports may make the dump miss or repeat
 * entries, as for neighbours. */
static int paths_next(void *ctx, void *cursor, struct ctl_reply *r)
{
	struct path_cursor *cur = cursor;
	struct port_walk w = { .r = r, .status = CTL_OK };
	(void)ctx;

	for (; cur->port < cur->dp->n_ports; cur->port++, cur->bucket = 0) {
		bool more;

		if (!cur->dp->ports[cur->port].sa)
			continue;
		w.p = &cur->dp->ports[cur->port];
		more = sa_path_walk_from(w.p->sa, &cur->bucket, path_piece_full, path_cb, &w);
		if (w.status != CTL_OK)
			return w.status;
		if (more)
			return CTL_MORE;
	}
	return CTL_OK;
}

/* Streamed: a port caches up to max_paths (65,536 by default) PathRecords. */
int gw_dp_show_paths(struct gw_dp *dp, struct ctl_reply *r)
{
	struct path_cursor *cur = calloc(1, sizeof(*cur));

	if (!cur)
		return ctl_reply_error(r, CTL_EFAILED, "out of memory");
	cur->dp = dp;
	ctl_reply_stream(r, paths_next, cur, free);
	return CTL_OK;
}

/* One GID route of a port: its routers as the lookup sees them (a router marked down by
 * the router watch is skipped). */
static int gid_route_cb(void *arg, const struct sa_gidroute_info *ri)
{
	struct port_walk *w = arg;
	struct json_object *o = json_object_new_object(), *rs = json_object_new_array();
	char gid[IB_GID_STRLEN + 8];

	ib_gid_format(&ri->prefix, gid, IB_GID_STRLEN);
	snprintf(gid + strlen(gid), sizeof(gid) - strlen(gid), "/%u", ri->len);
	add_str(o, "prefix", gid);
	for (unsigned i = 0; i < ri->n; i++) {
		struct json_object *x = json_object_new_object();

		add_hex(x, "lid", ri->routers[i].lid, 0);
		add_str(x, "state", ri->down[i] ? "down" : "up");
		add_int(x, "sl", ri->routers[i].sl);
		add_int(x, "mtu", mtu_bytes(ri->routers[i].mtu));
		add_int(x, "hop_limit", ri->routers[i].hop_limit ? ri->routers[i].hop_limit : 0xff);
		json_object_array_add(rs, x);
	}
	json_object_object_add(o, "routers", rs);
	add_str(o, "device", w->p->device);
	add_int(o, "port", w->p->num);
	return emit(w->r, &w->status, o);
}

int gw_dp_show_gid_routes(struct gw_dp *dp, struct ctl_reply *r)
{
	struct port_walk w = { .r = r, .status = CTL_OK };

	for (unsigned i = 0; i < dp->n_ports && w.status == CTL_OK; i++) {
		if (!dp->ports[i].gidroutes)
			continue;
		w.p = &dp->ports[i];
		sa_gidroutes_foreach(dp->ports[i].gidroutes, gid_route_cb, &w);
	}
	return w.status;
}

static int mcast_cb(void *arg, const struct ipoib_mcast_info *mi)
{
	struct port_walk *w = arg;
	struct json_object *o = json_object_new_object();
	char gid[IB_GID_STRLEN];

	ib_gid_format(&mi->mgid, gid, sizeof(gid));
	add_str(o, "mgid", gid);
	add_str(o, "dev", w->dev);
	add_str(o, "join", mi->full ? "full" : "sendonly");
	add_str(o, "state", mi->joined ? "joined" : "joining");
	if (mi->joined) {
		add_hex(o, "mlid", mi->mlid, 0);
		add_hex(o, "qkey", mi->qkey, 0);
	}
	return emit(w->r, &w->status, o);
}

int gw_dp_show_mcast(struct gw_dp *dp, struct ctl_reply *r)
{
	struct port_walk w = { .r = r, .status = CTL_OK };

	for (unsigned i = 0; i < dp->n_links && w.status == CTL_OK; i++) {
		if (!dp->links[i].link)
			continue;
		w.dev = dp->links[i].name;
		ipoib_link_mcast_foreach(dp->links[i].link, mcast_cb, &w);
	}
	if (w.status != CTL_OK)
		return w.status;
	/* then the IP groups (gateway/dp_mcast.c) */
	return dp_mcast_show(dp, r);
}

static int conn_cb(void *arg, const struct ipoib_conn_info *ci)
{
	struct port_walk *w = arg;
	struct json_object *o = json_object_new_object();
	char hw[IPOIB_HWADDR_STRLEN];

	ipoib_hwaddr_format(&ci->peer, hw, sizeof(hw));
	add_str(o, "peer", hw);
	add_str(o, "dev", w->dev);
	add_str(o, "state", cm_state_name(ci->state));
	json_object_object_add(o, "up", json_object_new_boolean(ci->up));
	add_str(o, "role", ci->active ? "active" : "passive");
	add_hex(o, "local_qpn", ci->local_qpn, 0);
	add_hex(o, "remote_qpn", ci->remote_qpn, 0);
	add_int(o, "mtu", ci->mtu);
	add_hex(o, "dlid", ci->dlid, 0);
	add_int(o, "age_ms", (int64_t)ci->age_ms);
	add_int(o, "idle_ms", (int64_t)ci->idle_ms);
	add_int(o, "tx_packets", (int64_t)ci->tx_packets);
	add_int(o, "tx_bytes", (int64_t)ci->tx_bytes);
	add_int(o, "rx_packets", (int64_t)ci->rx_packets);
	add_int(o, "rx_bytes", (int64_t)ci->rx_bytes);
	return emit(w->r, &w->status, o);
}

/* Every connection of the connected links (ipoib_link_conn_foreach): none in
 * datagram mode. */
int gw_dp_show_connections(struct gw_dp *dp, struct ctl_reply *r)
{
	struct port_walk w = { .r = r, .status = CTL_OK };

	for (unsigned i = 0; i < dp->n_links && w.status == CTL_OK; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->kind != DP_IPOIB || !k->link || k->mode != GW_IPOIB_CONNECTED)
			continue;
		w.dev = k->name;
		ipoib_link_conn_foreach(k->link, conn_cb, &w);
	}
	return w.status;
}

/* ---- counters --------------------------------------------------------------------------- */

/* The SA clients' path cache counters, summed over the IB ports (what a failover
 * avoids: a storm of PathRecord queries). */
static struct json_object *paths_stats_json(struct gw_dp *dp)
{
	struct json_object *o = json_object_new_object();
	struct sa_stats sum = { 0 }, one;

	for (unsigned i = 0; i < dp->n_ports; i++) {
		if (!dp->ports[i].sa)
			continue;
		sa_client_stats(dp->ports[i].sa, &one);
		sum.path_queries += one.path_queries;
		sum.path_hits += one.path_hits;
		sum.path_misses += one.path_misses;
		sum.path_seeded += one.path_seeded;
	}
	add_int(o, "queries", (int64_t)sum.path_queries);
	add_int(o, "cache_hits", (int64_t)sum.path_hits);
	add_int(o, "cache_misses", (int64_t)sum.path_misses);
	add_int(o, "seeded", (int64_t)sum.path_seeded);
	return o;
}

/* What each running worker received, sent and forwarded: every worker takes its share
 * of every Ethernet port's frames (one queue each), an IB port's are its owner's. */
static struct json_object *per_worker_json(struct gw_dp *dp)
{
	struct json_object *o = json_object_new_object();

	for (unsigned w = 0; w < dp->n_workers; w++) {
		struct json_object *k = json_object_new_object();
		struct fwd_stats st;
		char id[12];

		fwd_engine_stats(dp->e, (int)w, &st);
		add_int(k, "rx_packets", (int64_t)st.rx_packets);
		add_int(k, "tx_packets", (int64_t)st.tx_packets);
		add_int(k, "forwarded4", (int64_t)st.forwarded4);
		add_int(k, "forwarded6", (int64_t)st.forwarded6);
		add_int(k, "sleeps", (int64_t)st.sleeps);
		snprintf(id, sizeof(id), "%u", w);
		json_object_object_add(o, id, k);
	}
	return o;
}

int gw_dp_show_stats(struct gw_dp *dp, struct ctl_reply *r)
{
	struct fwd_stats st;
	struct fwd_sp_stats sp;
	struct json_object *o = json_object_new_object(), *d = json_object_new_object(),
			   *p = json_object_new_object(), *s = json_object_new_object();

	fwd_engine_stats(dp->e, -1, &st);
	fwd_sp_stats(dp->e, &sp);
	add_int(o, "workers", dp->n_workers);
	add_int(o, "rx_packets", (int64_t)st.rx_packets);
	add_int(o, "rx_bytes", (int64_t)st.rx_bytes);
	add_int(o, "tx_packets", (int64_t)st.tx_packets);
	add_int(o, "tx_bytes", (int64_t)st.tx_bytes);
	add_int(o, "forwarded4", (int64_t)st.forwarded4);
	add_int(o, "forwarded6", (int64_t)st.forwarded6);
	add_int(o, "fragmented", (int64_t)st.fragmented);
	add_int(o, "frags_sent", (int64_t)st.frags_sent);
	add_int(o, "mss_clamped", (int64_t)st.mss_clamped);
	add_int(o, "unresolved_held", (int64_t)st.unres_held);
	add_int(o, "gso_whole", (int64_t)st.gso_whole);
	add_int(o, "gso_segmented", (int64_t)st.gso_segmented);
	add_int(o, "gso_segments", (int64_t)st.gso_segments);
	add_int(o, "gro_merged", (int64_t)st.gro_merged);
	add_int(o, "gro_segments", (int64_t)st.gro_segments);
	add_int(o, "icmp_sent", (int64_t)st.icmp_sent);
	add_int(o, "icmp_rate_limited", (int64_t)st.icmp_rate_limited);
	for (int i = 0; i < FWD_DROP_COUNT; i++)
		add_int(d, fwd_drop_name((enum fwd_drop)i), (int64_t)st.drops[i]);
	json_object_object_add(o, "drops", d);
	for (int i = 0; i < FWD_PUNT_COUNT; i++)
		add_int(p, fwd_punt_name((enum fwd_punt)i), (int64_t)st.punts[i]);
	json_object_object_add(o, "punts", p);
	{
		struct json_object *pc = json_object_new_object();

		for (int i = 0; i < FWD_PCLASS_COUNT; i++) {
			struct json_object *c = json_object_new_object();

			add_int(c, "sent", (int64_t)st.pclass_sent[i]);
			add_int(c, "no_budget", (int64_t)st.pclass_no_budget[i]);
			add_int(c, "rate_limited", (int64_t)st.pclass_limited[i]);
			json_object_object_add(pc, fwd_pclass_name((enum fwd_pclass)i), c);
		}
		json_object_object_add(o, "punt_classes", pc);
	}
	for (int i = 0; i < FWD_SP_REASON_COUNT; i++)
		add_int(s, fwd_sp_reason_name((enum fwd_sp_reason)i), (int64_t)sp.r[i]);
	json_object_object_add(o, "slowpath", s);
	json_object_object_add(o, "paths", paths_stats_json(dp));
	json_object_object_add(o, "per_worker", per_worker_json(dp));
	return ctl_reply_record(r, o) < 0 ? CTL_EFAILED : CTL_OK;
}
