/*
 * dp_routers: the gateway's side of IB router failover (see dp_routers.h and
 * docs/gid-route-failover.md).
 */
#include "gateway/dp_routers.h"

#include "cm/cm.h"
#include "gateway/config.h"
#include "gateway/dataplane_pvt.h"
#include "lib/log.h"
#include "sm-client/sa.h"

static uint32_t poll_ms = 1000;
static unsigned down_after = 1;

static uint32_t sa_poll(void)
{
	return poll_ms ? poll_ms : SA_ROUTER_POLL_OFF;
}

void dp_routers_config(struct gw_dp *dp, const struct gw_config *cfg)
{
	poll_ms = cfg->router_poll_ms;
	down_after = cfg->router_down_after ? cfg->router_down_after : 1;
	for (unsigned i = 0; dp && i < dp->n_ports; i++)
		if (dp->ports[i].sa)
			sa_router_set_poll(dp->ports[i].sa, sa_poll(), down_after, 1);
}

void dp_routers_sa_config(struct sa_client_config *cc)
{
	cc->router_poll_ms = sa_poll();
	cc->router_down_after = down_after;
}

void dp_routers_sa_event(struct dp_port *p, const struct sa_event *ev)
{
	unsigned n;

	switch (ev->type) {
	case SA_EV_ROUTER_DOWN:
		n = cm_disconnect_dlid_all(ev->lid);
		log_warning("IB port %s/%u: IB router LID 0x%x down: paths through it re-resolved, "
			    "%u connected-mode connections through it torn down",
			    p->device, p->num, ev->lid, n);
		break;
	case SA_EV_ROUTER_UP:
		log_notice("IB port %s/%u: IB router LID 0x%x up again", p->device, p->num,
			   ev->lid);
		break;
	default:
		break;
	}
}
