/*
 * The gateway's data plane as the daemon composes it (prefix gw_dp_): from a config,
 * the IB ports (one per backend/device/port) with their SA client and IPoIB links, the
 * Ethernet ports with a netlink watcher, the RIB/FIB, the forwarding engine and its
 * workers, and the slow path on the control loop. docs/architecture.md ("Threads") and
 * docs/operations.md describe what runs.
 *
 * A link whose port cannot be opened (no HCA, no such netdev) stays DOWN with the
 * reason; the daemon keeps running and the other links work.
 *
 * Threads: every function here is for the control thread. The data plane keeps its own
 * copy of what it needs from the config: a reload may free the config it started with.
 */
#ifndef IBGW_GATEWAY_DATAPLANE_H
#define IBGW_GATEWAY_DATAPLANE_H

#include <stdbool.h>
#include <stdio.h>

#include "lib/addr.h"

struct gw_config;
struct gw_dp;
struct evloop;
struct ctl_reply;

/* Build and start everything the config names. Returns 0 (links that could not be
 * opened are DOWN with a reason) or -errno when the engine itself cannot be built or
 * the failover section cannot start (its key, say). */
int gw_dp_start(const struct gw_config *cfg, struct evloop *loop, struct gw_dp **out);
/* Stop the workers, leave the groups, close the ports. */
void gw_dp_stop(struct gw_dp *dp);

/*
 * What a reload did, for whoever asked (gwctl reload): arrays of JSON strings, one line
 * each, "eth1: brought up", "ib0: address 10.1.0.1/24 added", "failover added: takes
 * effect at the next start"; errors: what the reload could not apply as written ("eth1:
 * device veth9 does not exist"), each also logged. An array left NULL is not collected.
 */
struct json_object;
struct gw_reload_outcome {
	struct json_object *changes, *errors;
};
/* Add one line to out->changes (error false) or out->errors; NULL out or array: nothing. */
void gw_reload_note(struct gw_reload_outcome *out, bool error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A reload parsed cfg: apply what differs from the running data plane live, log what
 * takes effect at restart only; out (may be NULL) is told both and every error. */
void gw_dp_reconfigure(struct gw_dp *dp, const struct gw_config *cfg,
		       struct gw_reload_outcome *out);

/* gwctl requests: each adds one JSON record per object to r and returns a ctl_status. */
/* Every link, or those of tenant (NULL: all; "default": the default tenant's). */
int gw_dp_show_links(struct gw_dp *dp, bool stats, const char *tenant, struct ctl_reply *r);
/* The routes of tenant ("" or "default": the default one; "all": every tenant's, one
 * after the other), all or those of prefix match. */
int gw_dp_show_routes(struct gw_dp *dp, const char *tenant, const struct ip_prefix *match,
		      struct ctl_reply *r);
int gw_dp_show_neighbours(struct gw_dp *dp, const char *dev, struct ctl_reply *r);
int gw_dp_show_paths(struct gw_dp *dp, struct ctl_reply *r);
int gw_dp_show_mcast(struct gw_dp *dp, struct ctl_reply *r);
int gw_dp_show_ra(struct gw_dp *dp, struct ctl_reply *r);   /* gateway/dp_ra.c */
int gw_dp_show_dhcp(struct gw_dp *dp, struct ctl_reply *r); /* gateway/dp_dhcp.c */
int gw_dp_show_gid_routes(struct gw_dp *dp, struct ctl_reply *r);
int gw_dp_show_connections(struct gw_dp *dp, struct ctl_reply *r);
int gw_dp_show_stats(struct gw_dp *dp, struct ctl_reply *r);

/* The data plane's metric families in the Prometheus text format (gateway/dp_metrics.c;
 * docs/operations.md "Metrics"). NULL dp writes nothing. Returns 0 or -errno. */
int gw_dp_metrics(struct gw_dp *dp, FILE *out);

/* gwctl's write requests (gateway/dp_ctl.c). The arguments come checked for form
 * (mgmt/ctl_args.h); these check them against what runs, change nothing when they
 * refuse, and return a ctl_status having said why in r. Operator routes are static
 * routes outside the config's: a reload leaves them, a restart forgets them. */
struct ctl_route;
struct ctl_neigh;
struct ctl_neigh_flush;
struct ctl_path_flush;
int gw_dp_route_add(struct gw_dp *dp, const struct ctl_route *rt, struct ctl_reply *r);
int gw_dp_route_del(struct gw_dp *dp, const struct ctl_route *rt, struct ctl_reply *r);
int gw_dp_neigh_add(struct gw_dp *dp, const struct ctl_neigh *n, struct ctl_reply *r);
int gw_dp_neigh_del(struct gw_dp *dp, const struct ctl_neigh *n, struct ctl_reply *r);
int gw_dp_neigh_flush(struct gw_dp *dp, const struct ctl_neigh_flush *f, struct ctl_reply *r);
int gw_dp_path_flush(struct gw_dp *dp, const struct ctl_path_flush *f, struct ctl_reply *r);
/* gwctl capture (gateway/dp_capture.c): a streamed reply of pcap records. */
struct ctl_capture;
int gw_dp_capture(struct gw_dp *dp, const struct ctl_capture *a, struct ctl_reply *r);

/* Failover (gateway/dp_ha.c): gwctl show ha (records of kind node, group, path,
 * transition) and gwctl ha switchover [GROUP] (every group when NULL). */
int gw_dp_show_ha(struct gw_dp *dp, struct ctl_reply *r);
int gw_dp_ha_switchover(struct gw_dp *dp, const char *group, struct ctl_reply *r);

#endif
