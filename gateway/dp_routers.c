/*
 * dp_routers: the gateway's side of IB router failover (see dp_routers.h and
 * docs/gid-route-failover.md).
 */
#include "gateway/dp_routers.h"

#include "gateway/config.h"
#include "gateway/dataplane_pvt.h"
#include "lib/log.h"
#include "sm-client/sa.h"

static uint32_t sa_poll(const struct gw_dp *dp)
{
	return dp->router_poll_ms ? dp->router_poll_ms : SA_ROUTER_POLL_OFF;
}

void dp_routers_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	dp->router_poll_ms = cfg->router_poll_ms;
	dp->router_down_after = cfg->router_down_after ? cfg->router_down_after : 1;
	for (unsigned i = 0; i < dp->n_ports; i++)
		if (dp->ports[i].sa)
			sa_router_set_poll(dp->ports[i].sa, sa_poll(dp), dp->router_down_after, 1);
}

void dp_routers_sa_config(const struct gw_dp *dp, struct sa_client_config *cc)
{
	cc->router_poll_ms = sa_poll(dp);
	cc->router_down_after = dp->router_down_after;
}

void dp_routers_sa_event(struct dp_port *p, const struct sa_event *ev)
{
	unsigned n = 0;

	if (ev->type != SA_EV_ROUTER_DOWN && ev->type != SA_EV_ROUTER_UP)
		return;
	/* The links on this port: paths again (the SA client dropped those through a dead
	 * router; a live one again spreads them), connections through a dead one down. */
	for (unsigned i = 0; i < p->dp->n_links; i++) {
		struct dp_link *k = &p->dp->links[i];

		if (k->kind != DP_IPOIB || k->port != p || !k->link)
			continue;
		if (ev->type == SA_EV_ROUTER_DOWN)
			n += ipoib_link_cm_disconnect_dlid(k->link, ev->lid);
		ipoib_link_paths_requery(k->link);
	}
	if (ev->type == SA_EV_ROUTER_DOWN)
		log_warning("IB port %s/%u: IB router LID 0x%x down: paths through it re-resolved, "
			    "%u connected-mode connections through it torn down",
			    p->device, p->num, ev->lid, n);
	else
		log_notice("IB port %s/%u: IB router LID 0x%x up again: paths re-resolved",
			   p->device, p->num, ev->lid);
}
