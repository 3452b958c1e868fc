/*
 * The failover pair's hands in the running gateway (gateway/dp_ha.c), as pure
 * functions: which heartbeat paths and groups a config gives (each group with the paths
 * it tracks), which service addresses a group claims when it becomes MASTER here, which
 * it announces and gives up, which addresses are the box's own, and which of the peer's
 * state-sync records are taken (only inside the prefixes the config puts on a link). The engine, the IPoIB links and the slow path come in as
 * ops (struct gw_hands_ops) or callbacks, as ha/ha_fsm.c gets its sends: nothing here
 * touches a port, so test/unit/test_gw_ha_hands.c runs it without sockets or root.
 *
 * Owner: the callers' (the control thread); no state of its own beyond the address table
 * it is handed.
 */
#ifndef IBGW_GATEWAY_HA_HANDS_H
#define IBGW_GATEWAY_HA_HANDS_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway/config.h"
#include "ha/ha_fsm.h"
#include "ha/ha_sync.h"
#include "table/route.h"

#define GW_HANDS_MAX_ADDRS 256 /* service addresses over all groups */

/* One service address of a group. */
struct gw_hands_addr {
	struct ip_prefix addr;
	char dev[GW_NAME_MAX]; /* its link or interface */
	unsigned group;
	bool held; /* on its link here (added to the engine) */
};

/* The heartbeat paths' link names: failover.paths as configured, else every IPoIB link
 * then every Ethernet interface in the file's order. Fills at most max; returns how
 * many. */
unsigned gw_hands_paths(const struct gw_config *cfg, char (*paths)[GW_NAME_MAX], unsigned max);

/* The groups of failover.groups (at most HA_MAX_GROUPS): name, priority, and the paths
 * each tracks (bit p: path p carries one of its addresses, so the group cannot be served
 * while it is down); their service addresses (at most GW_HANDS_MAX_ADDRS over all, none
 * held) in addrs, *n_addrs of them. Returns the number of groups. */
unsigned gw_hands_groups(const struct gw_config *cfg, const char (*paths)[GW_NAME_MAX],
			 unsigned n_paths, struct ha_group_cfg *groups, struct gw_hands_addr *addrs,
			 unsigned *n_addrs);

/* What the hands do to one address, given by the caller (gateway/dp_ha.c). */
struct gw_hands_ops {
	/* Put a on its link: 0 (also when the engine had it: -EEXIST is success);
	 * -ENODEV when the link is absent or not in the engine yet (the address follows
	 * when it comes up); another -errno when adding failed (the op logs it). */
	int (*add)(void *ctx, const struct gw_hands_addr *a);
	/* Take a off its link (whatever of it is there). */
	void (*del)(void *ctx, const struct gw_hands_addr *a);
	/* Gratuitous ARP / unsolicited NA for a on its link, if the link is there. */
	void (*announce)(void *ctx, const struct gw_hands_addr *a);
};

/* Group g became MASTER (or a link of its came up while it is): add its addresses that
 * are not held yet. Returns how many were added now. */
unsigned gw_hands_claim(struct gw_hands_addr *addrs, unsigned n, unsigned g,
			const struct gw_hands_ops *ops, void *ctx);
/* Announce group g's held addresses (the caller then announces the proxied ones). */
void gw_hands_announce(const struct gw_hands_addr *addrs, unsigned n, unsigned g,
		       const struct gw_hands_ops *ops, void *ctx);
/* Group g left MASTER: take its held addresses off. Returns how many. */
unsigned gw_hands_give_up(struct gw_hands_addr *addrs, unsigned n, unsigned g,
			  const struct gw_hands_ops *ops, void *ctx);
/* Link dev was taken out (a reload): every address on it went with its interface. */
void gw_hands_link_gone(struct gw_hands_addr *addrs, unsigned n, const char *dev);
/* Whether a is one of the service addresses (held here or not). */
bool gw_hands_is_service(const struct gw_hands_addr *addrs, unsigned n, const struct ip_addr *a);

/* Where the peer's state sync may put hosts: a prefix the config places on a link.
 * Per link, its subnets (its addresses, masked), its directly connected routes (routes
 * with dev and no via) and the other links' proxy_prefixes (addresses the config says
 * live on the other side: on the link whose subnet holds the prefix, else on every link
 * but the proxying one, as gateway/dataplane.c gives them to the engine). */
struct gw_hands_scope {
	struct ip_prefix prefix; /* host bits clear */
	char link[GW_NAME_MAX];
};
/* Fill scopes with at most max of them; returns how many the config gives (call with
 * max 0 to size the array). */
unsigned gw_hands_scopes(const struct gw_config *cfg, struct gw_hands_scope *scopes, unsigned max);
/* Whether a lies inside a prefix the scopes place on link. */
bool gw_hands_in_scope(const struct gw_hands_scope *scopes, unsigned n, const char *link,
		       const struct ip_addr *a);

/* A neighbour record of the peer's state sync, against the link it names here. */
enum gw_hands_link {
	GW_HANDS_LINK_NONE,  /* no such link, or it has no neighbour table (not in the engine) */
	GW_HANDS_LINK_IPOIB, /* an IPoIB link, running */
	GW_HANDS_LINK_ETH,   /* an Ethernet interface */
	GW_HANDS_LINK_OTHER, /* an IPoIB link without its link object (never came up) */
};
enum gw_hands_neigh {
	GW_HANDS_NEIGH_SKIP,    /* not taken */
	GW_HANDS_NEIGH_IPOIB,   /* learned through the IPoIB link (ipoib_link_neigh_learn) */
	GW_HANDS_NEIGH_ETH,     /* created STALE in the interface's table */
	GW_HANDS_NEIGH_REFUSED, /* not the peer's to give: outside the link's scopes (counted) */
};
/* ours: the address is this box's own or a service address (the peer knows this box);
 * known(ctx): this Ethernet interface already has an entry for it (asked only then). A
 * record is taken only inside the scopes of the link it names (else refused; an IPv6
 * link-local address is inside every link's), where this box does not know better, with
 * a hardware address of its link's kind. */
enum gw_hands_neigh gw_hands_sync_neigh(const struct ha_sync_neigh *n, enum gw_hands_link link,
					bool ours, const struct gw_hands_scope *scopes,
					unsigned n_scopes, bool (*known)(void *ctx), void *ctx);
/* A learned route of the peer's state sync as a route here. The peer sends only host
 * routes to the neighbours it proxies, connected on the neighbour's link: anything else
 * (a shorter prefix, next hops) is refused. Taken connected on the interface whose
 * neighbour table knows the address (where(ctx, &link): its index and link name; 0: none,
 * then skipped), when the address lies inside that link's scopes (else refused). */
enum gw_hands_route {
	GW_HANDS_ROUTE_SKIP,
	GW_HANDS_ROUTE_TAKE, /* add rt */
	GW_HANDS_ROUTE_REFUSED,
};
enum gw_hands_route gw_hands_sync_route(const struct ha_sync_route *sr,
					const struct gw_hands_scope *scopes, unsigned n_scopes,
					uint32_t (*where)(void *ctx, const char **link), void *ctx,
					struct rt_route *rt);

#endif
