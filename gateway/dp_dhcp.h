/*
 * DHCPv4 relay agent (RFC 1542 section 4, RFC 2131 4.1, RFC 3046, RFC 4390) on the links
 * and interfaces whose config has a dhcp_relay section (docs/config.md, docs/dhcp-relay.md):
 * hosts there, IB hosts on IPoIB especially, get their addresses from DHCP servers
 * elsewhere, typically on the Ethernet side.
 *
 * A client's message (a broadcast to UDP 67, which the workers punt on relaying
 * interfaces, or a unicast to our address there) goes to every configured server,
 * routed by the RIB from our address on the egress interface, with giaddr set to our
 * IPv4 address on the client's link, hops incremented (over max_hops: dropped), and,
 * when configured, option 82 (circuit id: the interface name; remote id). A server's
 * reply to giaddr (UDP 67 to one of our addresses, on any interface) goes back to the
 * client on the interface that owns giaddr, option 82 removed: broadcast (the BROADCAST
 * flag, a DHCPNAK; on IPoIB the broadcast group), unicast to ciaddr, or unicast to
 * yiaddr at the client's link-layer address with no ARP (the client has no address to
 * answer for): chaddr on Ethernet; on IPoIB (RFC 4390: htype 32, hlen 0, chaddr empty)
 * the 20-octet address of a client identifier of type 32 (the reply's, else the one the
 * request with the same xid carried, remembered for a minute), else broadcast.
 *
 * DHCPv6 (RFC 8415 19), for an interface with IPv6 servers: a client's message to
 * ff02::1:2 port 547 (the interface joins the group: 33:33:00:01:00:02, or its MGID on
 * IPoIB) goes to the IPv6 servers in a Relay-Forward (link-address: the interface's
 * first global or unique-local address; peer-address: the client's; Interface-ID: the
 * interface's name); a server's Relay-Reply to one of our addresses goes to the
 * interface its Interface-ID names, its Relay Message unicast to the peer-address
 * (port 546), resolved by ND.
 *
 * Owner: the control thread (the slow path's callback, a recheck timer, gwctl, metrics);
 * the state hangs off struct gw_dp (dp->dhcp).
 */
#ifndef IBGW_GATEWAY_DP_DHCP_H
#define IBGW_GATEWAY_DP_DHCP_H

#include <stdio.h>

#include "gateway/config.h"

struct gw_dp;

/* The config as running (gw_dp_start, gw_dp_reconfigure): the interfaces that relay, and
 * the binding to the slow path. Counters of an interface kept across reloads. */
void dp_dhcp_config(struct gw_dp *dp, const struct gw_config *cfg);
/* Unbound and freed (gw_dp_stop). */
void dp_dhcp_stop(struct gw_dp *dp);
/* ibgw_dhcp_relay_* metric families (nothing when no interface relays). */
void dp_dhcp_metrics(struct gw_dp *dp, FILE *out);

#endif
