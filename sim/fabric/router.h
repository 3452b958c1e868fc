/*
 * An IB router's forwarding decision and header rewrite (IBA vol 1 chapter 19, and seed
 * 004 "IB Router Logic"), apart from any socket or fabric so unit tests and a fuzz
 * harness drive it alone. The simulated fabric (fabric.c) owns one struct router per
 * router node and calls these for each packet addressed to one of its ports.
 *
 * Unicast: a packet that reaches a router port's LID must carry a GRH; its DGID is
 * matched against the route table (longest prefix, 0..128 bits) to an egress port and
 * a next hop: the LID of the next router on the egress subnet, or "direct", the LID of
 * the DGID's own port on that subnet (the caller resolves it, as a router asks its
 * subnet's SA). Multicast: a router that joined a group (MGID) on more than one port
 * forwards what arrives on one of them to the others, each with the MLID its subnet
 * gave the group; never into the subnet the packet started in (its SGID's prefix), so
 * two routers joined on the same two subnets do not send it back and forth.
 *
 * The rewrite (router_rewrite): LRH DLID (next hop, destination or MLID), SLID (the
 * egress port's LID), VL (the egress port's SL-to-VL table on the packet's SL, which is
 * kept), GRH hop limit minus one (a packet arriving with 0 or 1 is dropped), then the
 * VCRC. The ICRC stays: for a packet with a GRH it covers neither the LRH nor the
 * GRH's traffic class, flow label and hop limit (lib/ib_crc.h), so the receiver's check
 * passes unchanged.
 *
 * Threads: none of its own; the caller serialises calls on one router.
 */
#ifndef IBGW_SIM_FABRIC_ROUTER_H
#define IBGW_SIM_FABRIC_ROUTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"
#include "lib/ib_packet.h"

#define ROUTER_PORTS_MAX   8 /* port numbers 1..ROUTER_PORTS_MAX */
#define ROUTER_ROUTES_MAX  64
#define ROUTER_GROUPS_MAX  64
#define ROUTER_PROXIES_MAX 8

struct router_port {
	bool used;
	uint16_t lid;
	uint64_t gid_prefix; /* the subnet's prefix on this port */
	uint64_t guid;
	unsigned mtu_bytes; /* largest payload it sends */
	uint8_t sl2vl[16];
};

struct router_route {
	union ib_gid prefix; /* bits past plen are zero */
	uint8_t plen;        /* 0..128 */
	uint8_t port;        /* egress port number */
	uint16_t next_hop;   /* LID of the next router on the egress subnet; 0: direct */
};

struct router_group {
	union ib_gid mgid;
	uint16_t mlid[ROUTER_PORTS_MAX + 1]; /* by port number; 0: not joined there */
};

/* Groups joined on demand (router_proxy_add): every MGID under prefix/plen. */
struct router_proxy {
	union ib_gid prefix; /* bits past plen are zero */
	uint8_t plen;
};

struct router {
	struct router_port port[ROUTER_PORTS_MAX + 1]; /* [0] unused */
	struct router_route route[ROUTER_ROUTES_MAX];
	unsigned n_routes;
	struct router_group group[ROUTER_GROUPS_MAX];
	unsigned n_groups;
	struct router_proxy proxy[ROUTER_PROXIES_MAX];
	unsigned n_proxies;
};

/* Why a router did not forward (ROUTER_FORWARD: it did). */
enum router_verdict {
	ROUTER_FORWARD = 0,
	ROUTER_DROP_NO_GRH,    /* no GRH, or a unicast DGID that is multicast (or the reverse) */
	ROUTER_DROP_HOP_LIMIT, /* arrived with hop limit 0 or 1 */
	ROUTER_DROP_NO_ROUTE,  /* no route for the DGID, its port unknown, or no other member */
	ROUTER_DROP_MTU,       /* payload above the egress port's MTU */
};

/* One way out: egress port number and the DLID to put in the LRH. */
struct router_hop {
	uint8_t port;
	uint16_t dlid;
};

/* A port's identity (port 1..ROUTER_PORTS_MAX); the SL-to-VL table starts as SL = VL
 * for SL 0..14 (VL15 is management only: SL 15 maps to VL 0). -EINVAL out of range. */
int router_port_set(struct router *rt, unsigned port, uint16_t lid, uint64_t gid_prefix,
		    uint64_t guid, unsigned mtu_bytes);

/* Add or replace (same prefix and length) a route. next_hop 0: direct. -EINVAL: bad
 * length, port or next hop (not a unicast LID); -ENOSPC: table full. */
int router_route_add(struct router *rt, const union ib_gid *prefix, unsigned plen, unsigned port,
		     uint16_t next_hop);
/* Longest-prefix match, NULL when nothing matches. */
const struct router_route *router_lookup(const struct router *rt, const union ib_gid *dgid);

/* The router joins group mgid on port with that subnet's MLID (mlid 0: leaves it).
 * -EINVAL: not an MGID, a port or a multicast LID; -ENOSPC: too many groups. */
int router_group_join(struct router *rt, const union ib_gid *mgid, unsigned port, uint16_t mlid);
/* Has the router joined (mgid, mlid) on port? */
bool router_joined(const struct router *rt, unsigned port, const union ib_gid *mgid, uint16_t mlid);

/*
 * Groups joined on demand, as a multicast proxy would (IPv6 ND across subnets: the
 * solicited-node groups, one per address, too many to list): the router takes every
 * group whose MGID lies under prefix/plen on each of its ports, whatever its MLID, and
 * forwards it out of every other port whose subnet has members of that MGID, with the
 * MLID they joined with (the caller's resolve function, given the MGID; the caller
 * hands the router only groups with such members, as a proxy joins only for them). A group also
 * joined explicitly (router_group_join) is forwarded as joined. Add again: nothing.
 * -EINVAL: plen above 128 or a prefix that is not multicast; -ENOSPC: table full.
 */
int router_proxy_add(struct router *rt, const union ib_gid *prefix, unsigned plen);
/* Does the router take mgid on demand? */
bool router_proxies(const struct router *rt, const union ib_gid *mgid);

/* Direct routes: the LID of the port owning gid on the subnet behind egress port port,
 * 0 when unknown. Multicast (a proxied group): the MLID of that MGID's members on that
 * subnet, 0 when it has none. */
typedef uint16_t (*router_resolve_fn)(void *arg, unsigned port, const union ib_gid *gid);

/*
 * The decision for a packet (parsed, checks passed) that arrived on port in_port: the
 * ways out in hops[0..*n) (unicast: one; multicast: one per other port joined, none
 * allowed). ROUTER_FORWARD with *n >= 1, or the reason it is dropped (*n = 0).
 */
enum router_verdict router_decide(const struct router *rt, unsigned in_port,
				  const struct ib_packet *pkt, router_resolve_fn resolve, void *arg,
				  struct router_hop hops[ROUTER_PORTS_MAX], unsigned *n);

/*
 * Write the packet as hop sends it: buf (len octets, LRH..VCRC, parsed as pkt) copied to
 * out (at least len octets; may be buf) with the LRH, hop limit and VCRC rewritten.
 * Returns 0, or -EINVAL when the packet has no GRH or hop's port is not set.
 */
int router_rewrite(const struct router *rt, const struct router_hop *hop,
		   const struct ib_packet *pkt, const uint8_t *buf, size_t len, uint8_t *out);

const char *router_verdict_str(enum router_verdict v);

#endif
