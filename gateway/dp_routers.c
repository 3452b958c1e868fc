/*
 * dp_routers: the gateway's side of IB router failover (see dp_routers.h and
 * docs/gid-route-failover.md).
 */
#include "gateway/dp_routers.h"

#include "cm/cm.h"
#include "gateway/dataplane_pvt.h"
#include "lib/log.h"
#include "sm-client/sa.h"

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
