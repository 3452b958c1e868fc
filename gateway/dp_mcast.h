/*
 * IP multicast across the gateway (docs/multicast.md) on the links and interfaces whose
 * config has an ip_multicast section: the gateway is the multicast router of each such
 * link, on both sides.
 *
 * Membership: per interface a table/mgroup.h table, from the IGMP / MLD reports heard
 * there (the workers punt every IP multicast packet of such an interface,
 * fwd_sp_mcast_bind): Ethernet interfaces join 01:00:5e:00:00:16 / :02 and
 * 33:33:00:00:00:16 / :02, IPoIB links the MGIDs of 224.0.0.22, 224.0.0.2, ff02::16 and
 * ff02::2 (RFC 4391 4, the link's P_Key), where IGMPv3 / MLDv2 reports and v2 leaves /
 * v1 dones go. As querier (the lowest address on the link wins, RFC 3376 6.6.2) the
 * gateway sends IGMPv3 and MLDv2 general queries every query_interval_s, so hosts answer
 * with v3 / v2 reports to those groups: an IB host that only speaks IGMPv2 / MLDv1
 * reports to the group's own MGID, which the gateway does not join, and is not heard.
 *
 * IB joins: an IPoIB link is a full member of a group's MGID while another interface
 * (an Ethernet one) has members of it (IB senders are heard), and leaves it when they
 * go; it sends into a group with members on the link through a send-only join (made by
 * the first send, ipoib_link_xmit_mcast).
 *
 * Forwarding (the control thread, fwd_sp_send_mcast): a packet to group G from an
 * interface goes out of every other multicast interface with members of G, TTL / hop
 * limit - 1, never back where it came from; not forwarded: TTL <= 1, link-local scopes
 * (224.0.0.0/24, ff0X:: with scope <= 2), link-local sources, IGMP / MLD themselves, and
 * in a failover pair what either end's interface is not served by this box
 * (dp_ha_serves: the MASTER of the interface's failover group). Each group into each
 * interface is rate limited (rate_limit_pps, a token bucket).
 *
 * Owner: the control thread (the slow path's callback, the control loop's timer, gwctl,
 * metrics); the state hangs off struct gw_dp (dp->mcast).
 */
#ifndef IBGW_GATEWAY_DP_MCAST_H
#define IBGW_GATEWAY_DP_MCAST_H

#include <stdio.h>

#include "gateway/config.h"

struct gw_dp;
struct ctl_reply;

/* The config as running (gw_dp_start, gw_dp_reconfigure). */
void dp_mcast_config(struct gw_dp *dp, const struct gw_config *cfg);
/* Leave everything, free the state. */
void dp_mcast_stop(struct gw_dp *dp);
/* gwctl show mcast: one record per multicast interface, one per group with members. */
int dp_mcast_show(struct gw_dp *dp, struct ctl_reply *r);
/* ibgw_mcast_* metric families (nothing when no interface forwards multicast). */
void dp_mcast_metrics(struct gw_dp *dp, FILE *out);

#endif
