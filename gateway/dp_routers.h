/*
 * dp_routers: what the gateway does when the SA client's router watch (sm-client/sa.h,
 * "Router liveness") says an IB router went down or came back. The SA client itself
 * marks the router in the GID route table and drops the cached paths through it; here
 * the IPoIB links on the port resolve their paths again (ipoib_link_paths_requery),
 * and a router that went down takes every connected-mode connection whose path leads
 * to it down (ipoib_link_cm_disconnect_dlid): the links set up new ones on the new
 * path. Control thread.
 */
#ifndef IBGW_GATEWAY_DP_ROUTERS_H
#define IBGW_GATEWAY_DP_ROUTERS_H

struct dp_port;
struct gw_config;
struct gw_dp;
struct sa_client_config;
struct sa_event;

/* gateway.router_poll_ms / router_down_after as configured: kept in dp for the SA
 * clients of ports opened later, and handed to the SA client of every open port. Call
 * at start before the ports open, and at every reload. */
void dp_routers_config(struct gw_dp *dp, const struct gw_config *cfg);
/* Fill the router-watch fields of a port's SA client config (before sa_client_new). */
void dp_routers_sa_config(const struct gw_dp *dp, struct sa_client_config *cc);

/* From the port's SA event callback (gateway/dataplane.c on_sa_event) for
 * SA_EV_ROUTER_DOWN and SA_EV_ROUTER_UP; other events are ignored. */
void dp_routers_sa_event(struct dp_port *p, const struct sa_event *ev);

#endif
