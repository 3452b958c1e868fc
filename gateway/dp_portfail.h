/*
 * An IPoIB link on two ports of one HCA, active/backup (ipoib_links[].backup_port).
 *
 * When the port a link runs on goes down (IBP_EVENT_PORT_DOWN: verbs IBV_EVENT_PORT_ERR,
 * the simulated fabric's PORT_STATE), the link is built again on the other port through
 * the live-reload path (gw_dp_reconfigure with the link's port swapped): new QPs there,
 * the broadcast and other groups joined through that port's SA client, a new hardware
 * address (QPN + GID). Once it is up again its addresses are announced (gratuitous
 * IPoIB ARP / unsolicited NA, at once and twice more) with the new address, and so is
 * every address the box proxies, so IB hosts update their neighbour entries.
 *
 * No automatic move back: the link stays on the backup port while it works (a port that
 * just flapped is not trusted at once, and each move is a gap); it moves back when the
 * backup port goes down and the first is up. A reload puts it back on `port`.
 *
 * Owner: the control thread.
 */
#ifndef IBGW_GATEWAY_DP_PORTFAIL_H
#define IBGW_GATEWAY_DP_PORTFAIL_H

#include "fwd/ib_port.h"
#include "gateway/config.h"

struct gw_dp;
struct dp_port;

/* The config as running (gw_dp_start, gw_dp_reconfigure); cfg outlives the next call. */
void dp_portfail_config(struct gw_dp *dp, const struct gw_config *cfg);
/* A port event (from the port's async fd), after the links on it were told. */
void dp_portfail_port_event(struct gw_dp *dp, struct dp_port *p, const struct ibp_event *ev);
void dp_portfail_stop(struct gw_dp *dp);
/* Links moved so far (for gwctl and metrics). */
unsigned long dp_portfail_moves(void);

#endif
