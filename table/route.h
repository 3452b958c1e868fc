/*
 * route: the gateway's IPv4/IPv6 routing table (RIB) and the forwarding table (FIB)
 * the workers read.
 *
 * RIB (control thread only). Routes are keyed by (prefix, source, metric); a prefix may
 * hold several (a connected route and a floating static one, say). Sources: connected
 * (from interface addresses), static (config), learned (host routes of proxied
 * neighbours), kernel (imported). The selected route of a prefix is the one with the
 * lowest metric, then the preferred source (connected < static < learned < kernel),
 * among routes with at least one usable next hop. A route has 1..RT_ECMP_MAX next hops
 * (ECMP); a next hop is a gateway (address + interface), a directly connected
 * interface, local delivery, or a blackhole.
 *
 * Recursion: a gateway given without an interface is resolved through the connected
 * routes only (the longest connected prefix holding the gateway gives the interface).
 * A gateway reachable only through another static or learned route is NOT resolved:
 * the next hop stays unresolved (flag RT_F_UNRESOLVED), the route stays in the RIB and
 * is not used, and it is resolved again whenever connected routes change. This keeps
 * resolution one level deep, loop-free and cheap, like the kernel without "onlink".
 *
 * FIB (read by workers, written by the control thread). lpm4 and lpm6 map a prefix to a
 * value: either a next-hop index + 1, or RT_FIB_GROUP | group index for ECMP. Next hops
 * and groups are shared by every prefix that uses the same ones (reference counted by
 * the writer), immutable once published (but for a next hop's neighbour hint, the
 * workers' own cache), and their slots are reused only after an RCU grace period (the
 * defer function, same contract as lpm4's). A worker does:
 *
 *     uint32_t v = rt_fib_lookup4(fib, dst);           // host byte order
 *     const struct rt_fib_nh *nh = rt_fib_nexthop(fib, v, rt_flow_hash4(...));
 *
 * inside its RCU read-side section; nh is NULL when there is no route.
 *
 * Threads: rt_fib_* and rt_flow_hash* from any worker; every other call from the
 * control thread only.
 */
#ifndef IBGW_TABLE_ROUTE_H
#define IBGW_TABLE_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "table/lpm4.h"
#include "table/lpm6.h"
#include "lib/addr.h"

#define RT_ECMP_MAX 16

enum rt_source {
	RT_SRC_CONNECTED = 0,
	RT_SRC_STATIC = 1,
	RT_SRC_LEARNED = 2,
	RT_SRC_KERNEL = 3,
};

enum rt_nh_type {
	RT_NH_GATEWAY = 0,   /* via gw, on ifindex (0 in a request: resolve it) */
	RT_NH_CONNECTED = 1, /* the destination itself is the neighbour, on ifindex */
	RT_NH_LOCAL = 2,     /* an address of the gateway: deliver to the control plane */
	RT_NH_BLACKHOLE = 3, /* drop */
};

struct rt_nexthop {
	uint8_t type;      /* enum rt_nh_type */
	struct ip_addr gw; /* RT_NH_GATEWAY only; same family as the prefix */
	uint32_t ifindex;
};

#define RT_F_SELECTED   0x01 /* the prefix's best route, installed in the FIB */
#define RT_F_UNRESOLVED 0x02 /* no next hop usable: not installed */

/* A route as the daemon gives it and as rt_walk returns it (plain data). */
struct rt_route {
	struct ip_prefix prefix; /* host bits must be clear */
	uint8_t source;          /* enum rt_source */
	uint32_t metric;
	uint8_t nnh; /* 1..RT_ECMP_MAX */
	struct rt_nexthop nh[RT_ECMP_MAX];
	/* Output of rt_walk only: */
	uint8_t flags;        /* RT_F_* */
	uint16_t nh_resolved; /* bit i: nh[i] usable (nh[i].ifindex then filled in) */
};

/* ---- FIB: what workers read ---- */

#define RT_FIB_GROUP     (1u << 24)
#define RT_FIB_INDEX_MAX (RT_FIB_GROUP - 2)

/*
 * Immutable once published (but for neigh_hint); reused after a grace period. 32
 * octets on a 32-octet boundary, so that a next hop is one cache line, never two.
 */
struct rt_fib_nh {
	uint8_t type;   /* enum rt_nh_type */
	uint8_t family; /* AF_INET or AF_INET6 */
	uint16_t reserved;
	uint32_t ifindex;
	uint8_t gw[16]; /* RT_NH_GATEWAY: network order, IPv4 in the first 4 */
	/* Not part of the next hop's value: the workers' cache of where the gateway's
	 * entry sits in the egress's neighbour index (neigh_lookup_link's hint), read and
	 * written with relaxed atomics through rt_fib_nh_hint. Any value is safe: the
	 * neighbour table checks it against the key before use. 0 when published. */
	uint32_t neigh_hint;
	uint32_t pad;
} __attribute__((aligned(32)));

_Static_assert(sizeof(struct rt_fib_nh) == 32, "a FIB next hop is 32 octets");

struct rt_fib_group {
	uint32_t n;               /* 2..RT_ECMP_MAX */
	uint32_t nh[RT_ECMP_MAX]; /* indexes into nh[] */
};

struct rt_fib {
	struct lpm4 *v4;
	struct lpm6 *v6;
	struct rt_fib_nh *nh;
	struct rt_fib_group *grp;
};

static inline uint32_t rt_fib_lookup4(const struct rt_fib *f, uint32_t dst)
{
	return lpm4_lookup(f->v4, dst);
}

static inline uint32_t rt_fib_lookup6(const struct rt_fib *f, const uint8_t dst[16])
{
	return lpm6_lookup(f->v6, dst);
}

/* The next hop for a lookup result v and a flow hash; NULL when v is 0 (no route). */
static inline const struct rt_fib_nh *rt_fib_nexthop(const struct rt_fib *f, uint32_t v,
						     uint32_t flow_hash)
{
	if (!v)
		return NULL;
	if (v & RT_FIB_GROUP) {
		const struct rt_fib_group *g = &f->grp[v & (RT_FIB_GROUP - 1)];

		return &f->nh[g->nh[(uint32_t)(((uint64_t)flow_hash * g->n) >> 32)]];
	}
	return &f->nh[v - 1];
}

/* The next hop's neighbour hint (the one field a worker writes; see struct rt_fib_nh). */
static inline uint32_t *rt_fib_nh_hint(const struct rt_fib_nh *nh)
{
	return (uint32_t *)(uintptr_t)&nh->neigh_hint;
}

/* Flow hashes for ECMP: the same flow always takes the same next hop; seed per box so
 * that two gateways in a row do not split flows alike. Ports 0 for non-TCP/UDP; all
 * arguments in network byte order as they sit in the packet. */
static inline uint32_t rt_hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (uint32_t)h;
}

static inline uint32_t rt_flow_hash4(uint32_t seed, uint32_t src, uint32_t dst, uint8_t proto,
				     uint16_t sport, uint16_t dport)
{
	uint64_t a = ((uint64_t)src << 32 | dst) ^ seed;
	uint64_t b = ((uint64_t)sport << 16 | dport) | (uint64_t)proto << 32;

	return rt_hash_mix(a * 0x9e3779b97f4a7c15ull ^ b);
}

static inline uint32_t rt_flow_hash6(uint32_t seed, const uint8_t src[16], const uint8_t dst[16],
				     uint8_t proto, uint16_t sport, uint16_t dport)
{
	uint64_t h = seed ^ ((uint64_t)sport << 16 | dport | (uint64_t)proto << 32);

	for (int i = 0; i < 16; i += 8) {
		uint64_t s, d;

		__builtin_memcpy(&s, src + i, 8);
		__builtin_memcpy(&d, dst + i, 8);
		h = (h ^ s) * 0x9e3779b97f4a7c15ull;
		h = (h ^ d) * 0x9e3779b97f4a7c15ull;
	}
	return rt_hash_mix(h);
}

/* ---- RIB: the control thread's API ---- */

struct rt_table; /* private to route.c; owned by the control thread */

struct rt_config {
	uint32_t max_nexthops; /* distinct next hops; 0: 65536 (at most RT_FIB_INDEX_MAX) */
	uint32_t max_groups;   /* distinct ECMP groups; 0: 4096 */
	uint32_t lpm4_groups;  /* lpm4 tbl8 groups; 0: lpm4's default */
	lpm4_defer_fn defer;   /* NULL: reuse at once (only without concurrent readers) */
	void *defer_ctx;
	/* Called after every change of the RIB (a route added, replaced or deleted, next
	 * hops re-resolved), on the writer's thread, possibly several times for one call
	 * of the API: for observers that coalesce (the kernel export). NULL: none. */
	void (*changed)(void *ctx);
	void *changed_ctx;
};

int rt_create(struct rt_table **out, const struct rt_config *cfg);
void rt_destroy(struct rt_table *rt); /* no reader may remain */
/* The FIB to hand to workers; the same pointer for the table's life. */
const struct rt_fib *rt_fib(const struct rt_table *rt);

/* Add a route; -EEXIST when (prefix, source, metric) exists, -EINVAL on a malformed
 * route (host bits, family mismatch, nnh out of range, LOCAL/BLACKHOLE mixed with
 * others), -ENOSPC / -ENOMEM when the FIB is full (the RIB is then unchanged). An
 * unresolved route is accepted (see the recursion rule above). */
int rt_add(struct rt_table *rt, const struct rt_route *r);
/* Add or replace the route with the same (prefix, source, metric). */
int rt_replace(struct rt_table *rt, const struct rt_route *r);
/* Remove one route; -ENOENT if absent. */
int rt_del(struct rt_table *rt, const struct ip_prefix *p, uint8_t source, uint32_t metric);
/* Remove every route of one source (imported routes when their import stops).
 * Returns how many went, or -ENOMEM (then none did). */
int rt_del_source(struct rt_table *rt, uint8_t source);

/* Interface addresses: "10.0.0.1/24 on ifindex" adds the connected route 10.0.0.0/24
 * (metric 0) and the local route 10.0.0.1/32; gateways are re-resolved. A second
 * address in a subnet already connected adds its local route only. Deleting takes
 * both away, or only the local route when keep_subnet (the caller's interface still
 * has another address in that subnet). */
int rt_add_connected(struct rt_table *rt, const struct ip_prefix *ifaddr, uint32_t ifindex);
int rt_del_connected(struct rt_table *rt, const struct ip_prefix *ifaddr, uint32_t ifindex,
		     bool keep_subnet);

/* Every route in prefix order (IPv4 first, then by address, then length; within a
 * prefix the selected route first), for `gwctl show routes`. family: AF_INET,
 * AF_INET6 or 0 for both. Stops at and returns the first non-zero cb result. */
int rt_walk(const struct rt_table *rt, int family, int (*cb)(void *ctx, const struct rt_route *r),
	    void *ctx);

/*
 * rt_walk resumed: the routes of the prefixes strictly after *after in that order (from
 * the first prefix of family when after is NULL), for replies streamed in pieces (the
 * caller keeps the last prefix it finished as its cursor; stopping inside a prefix
 * would show its first routes again). Finding each prefix costs a search of the tree
 * (O(log n)), not a walk from the start. The RIB may change between two calls: a
 * prefix added or removed before the cursor is not seen, one after it is; nothing seen
 * is shown twice. Stops at and returns the first non-zero cb result.
 */
int rt_walk_after(const struct rt_table *rt, int family, const struct ip_prefix *after,
		  int (*cb)(void *ctx, const struct rt_route *r), void *ctx);

/* The FIB's answer for dst from the control thread (for `gwctl route get`, tests). */
const struct rt_fib_nh *rt_lookup(const struct rt_table *rt, const struct ip_addr *dst,
				  uint32_t flow_hash);

struct rt_stats {
	uint32_t prefixes, routes, nexthops, groups;
};
void rt_stats(const struct rt_table *rt, struct rt_stats *out);

#endif
