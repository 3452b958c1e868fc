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
 * Failover (gateway/dp_ha.c) sees a moving link as up: the groups that track it do not
 * go to FAULT for a move, unless the link is not up on the other port within 2 s.
 *
 * Owner: the control thread; the state hangs off struct gw_dp (dp->portfail).
 */
#ifndef IBGW_GATEWAY_DP_PORTFAIL_H
#define IBGW_GATEWAY_DP_PORTFAIL_H

#include <stdbool.h>

#include "port/ib_port.h"
#include "gateway/config.h"

struct gw_dp;
struct dp_port;
struct dp_link;

/* The config as running (gw_dp_start, gw_dp_reconfigure); cfg outlives the next call.
 * The first call sets the state up (out of memory: logged, links never move). */
void dp_portfail_config(struct gw_dp *dp, const struct gw_config *cfg);
/* A port event (from the port's async fd), before the links on it are told. */
void dp_portfail_port_event(struct gw_dp *dp, struct dp_port *p, const struct ibp_event *ev);
void dp_portfail_stop(struct gw_dp *dp);
/* Whether link k is being moved to its backup port and not up there yet (at most 2 s). */
bool dp_portfail_moving(const struct gw_dp *dp, const struct dp_link *k);
/* The times link k moved to another port (metrics). */
unsigned long dp_portfail_moves(const struct gw_dp *dp, const struct dp_link *k);

#endif
