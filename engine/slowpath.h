/*
 * slowpath: the control thread's half of the data plane (prefix fwd_sp_). It drains the
 * worker->control rings and handles what workers punt:
 *
 *   ARP / ND on Ethernet   answer for the gateway's own addresses, learn neighbours
 *                          (table/neigh.h rules), resolve (ARP request / NS, retransmits
 *                          and states by the neighbour table); proxy ARP/ND through
 *                          pkt/proxy.h for addresses living on other interfaces;
 *   ARP / ND on IPoIB      ipoib_link_input_ctl (the link learns and answers), then the
 *                          same proxy decision for the other interfaces;
 *   Router Solicitations   (both kinds) to the bound handler, fwd_sp_rs_bind;
 *   local IP               ICMP / ICMPv6 echo to the gateway's addresses answered;
 *                          anything else to us dropped (counted);
 *   unresolved             the packet is parked on the egress interface's neighbour
 *                          (bounded: neigh.h's unres_qlen per destination, park_max per
 *                          worker, engine/engine.h); once resolved it goes back to
 *                          the worker (FWD_MSG_TX_IP); on failure it is dropped and counted
 *                          and an ICMP host unreachable goes to its source (rate limited);
 *   proxied neighbours     a neighbour learned on an interface with proxying enabled on
 *                          another gets a learned host route (rt_ source LEARNED), a
 *                          gratuitous ARP / unsolicited NA on the other interfaces when it
 *                          appears or moves, and (Ethernet) ethp mc_add of the solicited-
 *                          node group of proxied IPv6 addresses.
 *
 * Everything it transmits goes through the owning worker's control->worker ring.
 *
 * Threads: control thread only.
 */
#ifndef IBGW_ENGINE_SLOWPATH_H
#define IBGW_ENGINE_SLOWPATH_H

#include <stdint.h>

#include "engine/engine.h"

struct evloop;

/* Slow-path reasons (stable counter names: fwd_sp_reason_name). */
enum fwd_sp_reason {
	FWD_SP_ARP_BAD = 0,  /* arp_parse refused */
	FWD_SP_ND_BAD,       /* nd_parse refused */
	FWD_SP_ARP_ANSWERED, /* for one of our addresses */
	FWD_SP_NA_ANSWERED,
	FWD_SP_PROXY_ANSWERED, /* proxied ARP reply / NA sent */
	FWD_SP_PROXY_RESOLVE,  /* proxied target resolved on the other side first */
	FWD_SP_PROXY_IGNORED,  /* proxy_arp/proxy_nd said no (see proxy[]) */
	FWD_SP_ECHO_ANSWERED,
	FWD_SP_LOCAL_DROPPED, /* to us, not an echo request */
	FWD_SP_PARKED,        /* packets handed to a neighbour queue */
	FWD_SP_RESOLVED_SENT, /* parked packets sent once resolved */
	FWD_SP_UNRES_DROPPED, /* parked packets dropped (overflow, failure) */
	FWD_SP_UNREACH_SENT,  /* ICMP host unreachable for dropped parked packets */
	FWD_SP_ICMP_LIMITED,
	FWD_SP_NO_MSG,          /* control message pool empty: frame not sent */
	FWD_SP_RING_FULL,       /* control -> worker ring full: frame not sent */
	FWD_SP_LEARNED_ROUTE,   /* host routes added for proxied neighbours */
	FWD_SP_ANNOUNCED,       /* gratuitous ARP / unsolicited NA sent */
	FWD_SP_IB_CTL,          /* handed to ipoib_link_input_ctl */
	FWD_SP_UNRES_DISCARDED, /* unresolved packet that could not be parked: egress
				  * gone, no IPoIB link, no IB buffer, TTL expired */
	FWD_SP_IF_GONE,         /* punt from an interface removed meanwhile */
	FWD_SP_UDP_DELIVERED,   /* UDP to the bound port handed to its handler */
	FWD_SP_UDP_SENT,        /* UDP datagrams of the control thread sent */
	FWD_SP_RESEND_FAILED,   /* left to a worker that stopped (fwd_worker_set_count),
				  * and no message of a running one to carry it on */
	FWD_SP_OWN_CLAIMED,     /* ARP / ND from another host giving one of our own
				  * addresses as its source: not learned, not answered */
	FWD_SP_PARK_LIMITED,    /* unresolved packet not parked: its worker has park_max
				  * parked already (fwd_punt_config; also counted in
				  * unresolved_discarded); resolution started without it */
	FWD_SP_REASON_COUNT
};
const char *fwd_sp_reason_name(enum fwd_sp_reason r);

struct fwd_sp_stats {
	uint64_t msgs;
	uint64_t r[FWD_SP_REASON_COUNT];
	uint64_t proxy[PROXY_REASON_COUNT];
};

/* Attach to the control loop: the rings' eventfds and a neighbour timer. NULL loop:
 * the caller calls fwd_sp_poll and fwd_sp_tick itself (tests). */
int fwd_sp_attach(struct fwd_engine *e, struct evloop *loop);
void fwd_sp_detach(struct fwd_engine *e);
/* Handle every message waiting in the worker->control rings. Returns how many. */
unsigned fwd_sp_poll(struct fwd_engine *e);
/* Neighbour timers of the Ethernet tables. Returns ms to the next call. */
uint64_t fwd_sp_tick(struct fwd_engine *e);

/* Transmit for the control thread, through the owning worker: a whole untagged
 * Ethernet frame. Returns 0 or -ENOBUFS (counted). (IPoIB sends come from the links
 * through the post hook, fwd_engine_ib_post_send in engine/engine.h.) */
int fwd_sp_send_eth(struct fwd_engine *e, uint32_t ifindex, const uint8_t *frame, size_t len);

/* Announce addr (4 or 16 octets) on every interface that proxies for where it lives
 * (gratuitous ARP / unsolicited NA), e.g. after a failover. */
void fwd_sp_announce(struct fwd_engine *e, uint32_t from_ifindex, int family, const uint8_t *addr);

/* Announce one of our own addresses on one interface (gratuitous ARP / unsolicited
 * NA with its link-layer address: a MAC, or on IPoIB its QPN and GID through the
 * broadcast / all-nodes group), e.g. a service address taken over. 0, -ENODEV (not
 * up), -ENOBUFS. */
int fwd_sp_announce_own(struct fwd_engine *e, uint32_t ifindex, int family, const uint8_t *addr);

/*
 * UDP for the control thread's own protocols (failover heartbeats), on the gateway's
 * addresses and through its data plane: the node's kernel does not own them.
 *
 * Receive: datagrams to one of our addresses with destination port `port` go to fn
 * (valid IP and UDP header, length and checksum; IPv4 fragments and IPv6 extension
 * headers refused). `ttl` is the IPv4 TTL / IPv6 hop limit as received (255: sent
 * from the same link, nothing routed it; the caller may insist on it). One binding;
 * fn NULL unbinds.
 */
typedef void (*fwd_sp_udp_fn)(void *ctx, uint32_t ifindex, const struct ip_addr *src,
			      const struct ip_addr *dst, uint16_t sport, uint8_t ttl,
			      const uint8_t *payload, size_t len);
int fwd_sp_udp_bind(struct fwd_engine *e, uint16_t port, fwd_sp_udp_fn fn, void *ctx);
/* Send: a UDP datagram from src to dst (same family; dst on ifindex's link: no route
 * lookup, the neighbour is resolved there), TTL / hop limit 255. 0, -EINVAL, -ENODEV
 * (interface not up), -EMSGSIZE, -ENOBUFS. */
int fwd_sp_send_udp(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		    const struct ip_addr *dst, uint16_t sport, uint16_t dport, const void *payload,
		    size_t len);

/*
 * Echo for the control thread (the failover tiebreaker's reachability probe): an echo
 * request to dst, routed by rt (NULL: the engine's table), from our address on the egress interface; the
 * replies to our addresses with that identifier go to fn (one binding; fn NULL
 * unbinds). fwd_sp_send_echo returns 0, -ENETUNREACH (no route), -ENOBUFS.
 */
typedef void (*fwd_sp_echo_fn)(void *ctx, const struct ip_addr *from, uint16_t id, uint16_t seq);
int fwd_sp_echo_bind(struct fwd_engine *e, uint16_t id, fwd_sp_echo_fn fn, void *ctx);
int fwd_sp_send_echo(struct fwd_engine *e, struct rt_table *rt, const struct ip_addr *dst,
		     uint16_t id, uint16_t seq);

/*
 * Router Solicitations (RFC 4861 6.2.6), for the gateway's router advertisements
 * (gateway/dp_ra.c): every RS that passes nd_parse on an interface goes to fn, with the
 * frame's source MAC on Ethernet (NULL on IPoIB, where the link has seen it first). The
 * message points into the punt: valid during the call only. One binding; fn NULL
 * unbinds.
 */
struct nd_msg;
typedef void (*fwd_sp_rs_fn)(void *ctx, uint32_t ifindex, const struct nd_msg *rs,
			     const uint8_t *src_mac);
void fwd_sp_rs_bind(struct fwd_engine *e, fwd_sp_rs_fn fn, void *ctx);

/*
 * DHCP relay (gateway/dp_dhcp.c). Interfaces whose bit is set in ifmask (bit k: ifindex
 * k) relay: their workers punt UDP broadcasts to port 67 (DHCPv4 clients', often from
 * 0.0.0.0) and UDP to ff02::1:2 port 547 (DHCPv6 clients', from link-local addresses),
 * which the martian checks would drop; those, and every whole UDP datagram to port 67
 * (IPv4) or 547 (IPv6) for one of our addresses on any interface (the servers' replies),
 * go to fn. The payload points into the punt: valid during the call only. One
 * binding; fn NULL unbinds.
 */
typedef void (*fwd_sp_dhcp_fn)(void *ctx, uint32_t ifindex, const struct ip_addr *src,
			       const struct ip_addr *dst, uint16_t sport, const uint8_t *payload,
			       size_t len);
void fwd_sp_dhcp_bind(struct fwd_engine *e, uint32_t ifmask, fwd_sp_dhcp_fn fn, void *ctx);
/* Send a UDP datagram routed by rt (a tenant's table; NULL: the engine's), from our
 * address on the egress interface (*ifindex set to it when not NULL). 0, -ENETUNREACH,
 * -ENODEV, -EMSGSIZE, -ENOBUFS. */
int fwd_sp_send_udp_routed(struct fwd_engine *e, struct rt_table *rt, const struct ip_addr *dst,
			   uint16_t sport, uint16_t dport, const void *payload, size_t len,
			   uint32_t *ifindex);
/* Send an IPv4 UDP datagram on ifindex to a link-layer address given, no neighbour
 * resolution: a MAC (Ethernet) or a 20-octet IPoIB address; NULL: the link's broadcast
 * (ff:ff:ff:ff:ff:ff, the IPoIB broadcast group). 0, -EINVAL, -ENODEV, -EMSGSIZE,
 * -ENOBUFS. */
int fwd_sp_send_udp_ll(struct fwd_engine *e, uint32_t ifindex, const struct ip_addr *src,
		       const struct ip_addr *dst, uint16_t sport, uint16_t dport,
		       const void *payload, size_t len, const uint8_t *lladdr);

/*
 * IP multicast (gateway/dp_mcast.c). Interfaces whose bit is set in ifmask forward it:
 * their workers punt every IPv4/IPv6 packet to a multicast destination (IGMP, MLD and
 * group traffic; sources that are martian refused first, except MLD's link-local and
 * ::), which fn receives as the IP packet (valid during the call). One binding; fn
 * NULL unbinds. fwd_sp_send_mcast sends an IP multicast packet as it is (the caller has
 * changed the TTL) on ifindex: Ethernet to the group's MAC (RFC 1112 6.4, RFC 2464 7)
 * from the interface's; IPoIB to the group's MGID on the link's P_Key (RFC 4391 4;
 * a send-only join first if the link is not a member, ipoib_link_xmit_mcast). Returns
 * 0 (IPoIB: sent or waiting for the join), -EINVAL, -ENODEV (down), -EMSGSIZE (above
 * the MTU), -ENOBUFS.
 */
typedef void (*fwd_sp_mcast_fn)(void *ctx, uint32_t ifindex, const uint8_t *ip, size_t len);
void fwd_sp_mcast_bind(struct fwd_engine *e, uint32_t ifmask, fwd_sp_mcast_fn fn, void *ctx);
int fwd_sp_send_mcast(struct fwd_engine *e, uint32_t ifindex, const uint8_t *ip, size_t len);

void fwd_sp_stats(const struct fwd_engine *e, struct fwd_sp_stats *out);

#endif
