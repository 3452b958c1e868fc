/*
 * Router advertisements (RFC 4861 6.2) on the links and interfaces whose config has a
 * router_advertisements section (docs/config.md): the gateway becomes the hosts' default
 * router and hands them the IPv6 prefixes of the link, so IB and Ethernet hosts reach
 * each other with no static route.
 *
 * An interface advertises while it is configured to, up, and (failover) while this box
 * holds a service address on it: a link that carries addresses of a failover group
 * advertises only on the group's MASTER; one that carries none advertises on both boxes.
 * Unsolicited RAs go to all-nodes at random intervals in [min_interval_ms,
 * max_interval_ms], the first three at most 16 s apart (the first at once). A Router
 * Solicitation (handed over by the slow path, fwd_sp_rs_bind) is answered after a random
 * 0..500 ms: unicast to a solicitor with an address and a link-layer address, else to
 * all-nodes no sooner than 3 s after the last multicast RA. An interface that stops
 * advertising while it is up (its failover group went to the peer, its section removed
 * by a reload) sends three final RAs with router lifetime 0, 3 s apart; the gateway
 * stopping (SIGTERM) sends one on every advertising interface before its workers stop.
 *
 * The RA's source is the link-local address hosts will route through: on IPoIB the
 * link's own (fe80:: + the port GUID, which the link answers NS for); on Ethernet
 * fe80:: + the MAC's modified EUI-64, added to the interface's addresses (so NS for it
 * are answered) while the interface advertises. The packet is pkt/nd.h's nd_build_ra
 * with the source link-layer option (on IPoIB the 20-octet address, RFC 4391 9.1).
 * Ethernet interfaces join 33:33:00:00:00:02 and IPoIB links the all-routers MGID, so
 * that solicitations to ff02::2 reach the slow path.
 *
 * Owner: the control thread (the slow path's callback, the control loop's timer, gwctl,
 * metrics); the state hangs off struct gw_dp (dp->ra).
 */
#ifndef IBGW_GATEWAY_DP_RA_H
#define IBGW_GATEWAY_DP_RA_H

#include <stdio.h>

#include "gateway/config.h"

struct gw_dp;
struct ctl_reply;

/* The config as running (gw_dp_start, gw_dp_reconfigure). The first call sets the state
 * up (out of memory: logged, no RA is sent). */
void dp_ra_config(struct gw_dp *dp, const struct gw_config *cfg);
/* Which interfaces may advertise changed (failover hands): look again now. */
void dp_ra_recheck(struct gw_dp *dp);
/* Final RAs (router lifetime 0) on every advertising interface, then the state freed;
 * called while the workers still run, which send them before they stop. */
void dp_ra_stop(struct gw_dp *dp);
/* gwctl show ra (gw_dp_show_ra in gateway/dataplane.h): one record per interface
 * configured to advertise. */
/* ibgw_ra_* metric families (nothing when no interface advertises). */
void dp_ra_metrics(struct gw_dp *dp, FILE *out);

#endif
