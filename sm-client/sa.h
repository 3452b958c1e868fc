/*
 * sa: the gateway's subnet-administration client.
 *
 * The client core speaks to the SA through a transport it is handed (an ops table: send
 * one MAD to the SA; the transport calls sa_client_input() for each MAD it receives) and
 * keeps time through lib/evloop timers (or, with no loop, through sa_client_tick()). It
 * never touches fds or threads. sm-client/sa_umad.h is the libibumad transport.
 *
 * Everything is asynchronous: a call returns at once and a callback delivers the result
 * later, from sa_client_input() or a timer. What it does:
 *  - PathRecord Get by DGID (SGID, P_Key, TClass; reversible, NumbPath 1) with a path
 *    cache (positive entries with a lifetime, negative ones shorter), queries for the
 *    same key coalesced, off-subnet DGIDs answered from a GID route table
 *    (sa_gidroutes) without asking the SA when so configured;
 *  - MCMemberRecord join/leave (full, non-member, send-only full member), the group's
 *    parameters taken from the SA's answer, the group created when absent;
 *  - InformInfo subscriptions to traps 64-67; Reports decoded and answered (ReportResp);
 *    trap 65 drops the GID's paths;
 *  - port events: LID/SM change and client reregister rejoin, resubscribe and revalidate
 *    paths without dropping them first;
 *  - retransmission with exponential backoff and jitter, a bound on outstanding queries,
 *    pacing; an SA that stops answering is probed (ClassPortInfo) with backoff instead of
 *    stormed, and everything is rejoined and resubscribed when it answers again.
 *
 * Threads: a struct sa_client belongs to one thread (the control thread). Every sa_
 * function, every callback and the transport's calls into sa_client_input() happen on
 * it. Nothing here locks.
 */
#ifndef IBGW_SM_CLIENT_SA_H
#define IBGW_SM_CLIENT_SA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"

struct evloop;
struct sa_client;
struct sa_gidroutes;

/* Where a MAD to the SA goes: the SM's LID and SL, QP1 with the GSI Q_Key, and the index
 * of the P_Key to send with. */
struct sa_dest {
	uint16_t lid;
	uint8_t sl;
	uint32_t qkey;
	uint16_t pkey_index;
};

struct sa_transport_ops {
	/* Send one MAD (len octets, 256 unless RMPP). Returns 0 or -errno; a failure counts
	 * as a lost MAD (the retransmission timer still runs). */
	int (*send)(void *ctx, const uint8_t *mad, size_t len, const struct sa_dest *dest);
};

/* The local port as libibumad (or verbs) reports it. */
#define SA_MAX_PKEYS 64
struct sa_port_info {
	uint16_t lid, sm_lid;
	uint8_t sm_sl, lmc;
	uint8_t state;          /* IB port state: 4 = ACTIVE */
	uint8_t subnet_timeout; /* PortInfo.SubnetTimeOut; 0xff = unknown (18 assumed) */
	uint64_t gid_prefix, port_guid;
	uint16_t pkeys[SA_MAX_PKEYS];
	unsigned npkeys;
};
#define SA_PORT_ACTIVE 4

enum sa_event_type {
	SA_EV_GID_IN = 64,     /* trap 64: GID in service */
	SA_EV_GID_OUT = 65,    /* trap 65: GID out of service */
	SA_EV_MC_CREATED = 66, /* trap 66: multicast group created */
	SA_EV_MC_DELETED = 67, /* trap 67: multicast group deleted */
	SA_EV_SA_DOWN = 1000,  /* the SA stopped answering */
	SA_EV_SA_UP,           /* it answers again (after SA_EV_SA_DOWN) */
	SA_EV_REREGISTER,      /* rejoin/resubscribe started (reregister, SM or LID change,
				* port back ACTIVE) */
	SA_EV_PORT_DOWN,       /* the port left ACTIVE: cached paths kept, marked stale */
	SA_EV_ROUTER_DOWN,     /* a watched IB router's port is gone (lid): its GID routes
				* skip it, cached paths through it were dropped */
	SA_EV_ROUTER_UP,       /* it is back (lid) */
};
struct sa_event {
	enum sa_event_type type;
	union ib_gid gid; /* traps 64..67 */
	uint16_t lid;     /* SA_EV_ROUTER_*: the router port's LID */
};

struct sa_client_config {
	const struct sa_transport_ops *ops;
	void *ops_ctx;
	struct evloop *loop; /* NULL: the caller calls sa_client_tick() */
	/* Clock in ms; NULL: evloop_now_ms. Tests pass a fake one. */
	uint64_t (*now_ms)(void *ctx);
	void *now_ctx;
	void (*event)(void *arg, const struct sa_event *ev); /* may be NULL */
	void *event_arg;
	uint32_t seed;            /* jitter PRNG and first TID; 0: from the clock */
	uint64_t sm_key;          /* SM_Key in requests (0; the SA ignores it for these) */
	uint16_t pkey;            /* P_Key for PathRecords and joins; 0: 0xffff */
	unsigned max_outstanding; /* per SA; 0: 8 */
	unsigned rate_per_s;      /* new queries per second; 0: 200 */
	unsigned retries;         /* retransmissions per query; 0: 3 */
	uint32_t timeout_floor_ms, timeout_max_ms; /* 0: 200, 8000 */
	uint32_t path_ttl_ms, neg_ttl_ms;          /* 0: 300000, 5000 */
	unsigned max_paths;                        /* cache size; 0: 65536 */
	unsigned sa_down_after; /* queries timed out in a row before the SA is "down"; 0: 2 */
	uint32_t probe_max_ms;  /* longest gap between probes of a down SA; 0: 30000 */
	/* Off-subnet: answer DGIDs under a configured GID route locally (seed 004). The table
	 * is the caller's and must outlive the client; the router watch (below) marks its
	 * routers down and up in it. NULL: always ask the SA. */
	struct sa_gidroutes *gid_routes;
	/* Router liveness (see "Router liveness" below): every watched router's port is
	 * asked of the SA (PortInfoRecord by LID) every router_poll_ms (0: 1000;
	 * SA_ROUTER_POLL_OFF: never, and nothing is watched); it is down after
	 * router_down_after answers in a row without the port ACTIVE (0: 1) and up again
	 * after router_up_after answers with it ACTIVE (0: 1). */
	uint32_t router_poll_ms;
	unsigned router_down_after, router_up_after;
};
#define SA_ROUTER_POLL_OFF UINT32_MAX

int sa_client_new(const struct sa_client_config *cfg, struct sa_client **out);
/* Leaves every group and unsubscribes (best effort, no waiting), then frees. */
void sa_client_free(struct sa_client *c);

/* Port state: call once before anything else is sent, and again on every port event
 * (LID change, SM LID change, port up/down, P_Key change). A changed LID or SM LID, or
 * the port coming back ACTIVE, counts as a reregister. While the port is not ACTIVE
 * nothing is sent: cached paths keep answering (marked stale), new path queries fail
 * with -ENETDOWN, queries on the wire wait in the queue for the port. */
void sa_client_set_port(struct sa_client *c, const struct sa_port_info *pi);
/* The SM asked clients to reregister (PortInfo.ClientReregister / verbs event). */
void sa_client_reregister(struct sa_client *c);
/* Hand over a received MAD. Never trusts it: malformed, mismatched or unsolicited MADs
 * are dropped and counted. */
void sa_client_input(struct sa_client *c, const uint8_t *mad, size_t len);
/* Run due timers (only needed when cfg.loop is NULL). Returns ms until the next
 * deadline, or UINT64_MAX if none. */
uint64_t sa_client_tick(struct sa_client *c);

/* --- PathRecords ------------------------------------------------------------------ */
struct sa_path {
	union ib_gid dgid, sgid;
	uint16_t dlid, slid, pkey;
	uint8_t sl, mtu, rate, packet_life, hop_limit, tclass;
	uint32_t flow_label;
	bool reversible;
	bool local; /* from the GID route table, not the SA */
};
struct sa_path_query {
	union ib_gid dgid;
	union ib_gid sgid; /* zero: the port's GID */
	uint16_t pkey;     /* 0: the configured P_Key */
	bool any_pkey;     /* leave the P_Key out of the query (the SA picks one) */
	uint8_t tclass;
	uint32_t flow_label; /* used only to pick a router among several */
};
/* status 0 and the path, or -errno: -ETIMEDOUT (no answer after the retries),
 * -ENETDOWN (our port is not ACTIVE), -EHOSTUNREACH (the SA is down),
 * -ENOENT (the SA has no path, or a fresh negative entry), -EPROTO (other SA status;
 * the status is counted), -ECANCELED (client freed). */
typedef void (*sa_path_cb)(void *arg, int status, const struct sa_path *path);
/* Returns 1 when answered from the cache (cb was called before returning), 0 when a
 * query is under way (cb comes later), or -errno (-ENOMEM, -EINVAL). */
int sa_path_resolve(struct sa_client *c, const struct sa_path_query *q, sa_path_cb cb, void *arg);
/* The cheap lookup: a cached path (fresh, or stale while being revalidated), no query.
 * Returns 0, -ENOENT (not cached, or negative), -EAGAIN (a query is under way). */
int sa_path_lookup(const struct sa_client *c, const struct sa_path_query *q, struct sa_path *out);
/* Seed the cache with a path learned elsewhere (the failover peer's state sync): used
 * only when nothing valid is cached for (dgid, our GID, the configured P_Key), kept
 * for the path TTL, then revalidated with the SA like any other. Only p's dgid, dlid,
 * sl, mtu, rate and hop_limit are taken; the source is this port. Returns 1 seeded, 0
 * already known, -EINVAL (a multicast/zero DGID, DLID 0), -ENOMEM. */
int sa_path_seed(struct sa_client *c, const struct sa_path *p);
/* Drop every cached path to dgid (as trap 65 does). Returns the number dropped. */
unsigned sa_path_invalidate(struct sa_client *c, const union ib_gid *dgid);
/* Mark every path stale and re-query them paced, keeping them in service meanwhile. */
void sa_path_revalidate_all(struct sa_client *c);

enum sa_path_state {
	SA_PATH_VALID,
	SA_PATH_STALE,
	SA_PATH_NEGATIVE,
	SA_PATH_PENDING
};
struct sa_path_info {
	struct sa_path path; /* dgid/sgid/pkey/tclass always set; the rest when known */
	enum sa_path_state state;
	int last_error;
	uint64_t age_ms, expires_in_ms; /* expires_in 0 when already expired */
	unsigned waiters;
};
/* Calls fn for every cache entry (in no particular order); fn returns non-zero to stop. */
void sa_path_foreach(const struct sa_client *c, int (*fn)(void *arg, const struct sa_path_info *pi),
		     void *arg);
/* The same in pieces, for a reply streamed across calls (as neigh_walk_from): the hash
 * buckets from *bucket on, each whole; before each bucket after the first, stop(arg) may
 * end the piece. Returns true when the walk ended early, with *bucket where the next
 * piece starts; false at the end. The buckets are sized once (max_paths), so an entry
 * present for the whole walk is seen exactly once. */
bool sa_path_walk_from(const struct sa_client *c, unsigned *bucket, bool (*stop)(void *arg),
		       int (*fn)(void *arg, const struct sa_path_info *pi), void *arg);
const char *sa_path_state_name(enum sa_path_state s);

/* --- Multicast -------------------------------------------------------------------- */
enum sa_join_state {
	SA_JOIN_FULL = 1,
	SA_JOIN_NON = 2,
	SA_JOIN_SENDONLY_NON = 4,
	SA_JOIN_SENDONLY_FULL = 8,
};
struct sa_mcast_group { /* the group as the SA answered */
	union ib_gid mgid, port_gid;
	uint32_t qkey;
	uint16_t mlid, pkey;
	uint8_t mtu, rate, sl, tclass, packet_life, hop_limit, scope, join_state;
	uint32_t flow_label;
};
struct sa_mcast_params {
	union ib_gid mgid;
	uint8_t join_state; /* one of enum sa_join_state */
	/* Create the group when the SA has none: with these parameters, or (all zero) with
	 * the IPoIB defaults (Q_Key 0x0b1b, MTU 2048, 10 Gb/s, SL 0) or those of the
	 * broadcast group this client joined. */
	bool create;
	uint32_t qkey;
	uint8_t mtu, rate, sl;
	uint16_t pkey; /* 0: from the MGID's P_Key field if IPoIB, else the configured */
};
enum sa_mcast_state {
	SA_MC_JOINING,
	SA_MC_JOINED,
	SA_MC_RETRYING,
	SA_MC_LEAVING
};
/* Called on every join outcome (also rejoins): status 0 and the group, or -errno. */
typedef void (*sa_mcast_cb)(void *arg, int status, const struct sa_mcast_group *g);
/* Start (and keep) a membership: retried with backoff until sa_mcast_leave, rejoined
 * after reregister/SM change. Returns 0, -EEXIST (already a member with that MGID),
 * -ENOMEM, -EINVAL. */
int sa_mcast_join(struct sa_client *c, const struct sa_mcast_params *p, sa_mcast_cb cb, void *arg);
/* Leave (MCMemberRecord Delete) and forget the membership. -ENOENT if none. */
int sa_mcast_leave(struct sa_client *c, const union ib_gid *mgid);
/* IPoIB broadcast MGID ff12:401b:<pkey>::ffff:ffff (RFC 4391 section 4). */
void sa_ipoib_bcast_mgid(uint16_t pkey, union ib_gid *mgid);

struct sa_mcast_info {
	struct sa_mcast_group group; /* valid when state is SA_MC_JOINED */
	enum sa_mcast_state state;
	uint8_t join_state; /* requested */
	int last_error;
	unsigned joins; /* successful joins so far (1 + rejoins) */
};
void sa_mcast_foreach(const struct sa_client *c,
		      int (*fn)(void *arg, const struct sa_mcast_info *mi), void *arg);
const char *sa_mcast_state_name(enum sa_mcast_state s);

/* --- Event subscriptions ---------------------------------------------------------- */
/* Subscribe to traps 64, 65, 66 and 67 (InformInfo Set, kept across SA restarts). */
int sa_subscribe_traps(struct sa_client *c);
struct sa_sub_info {
	uint16_t trap;
	bool subscribed;
	int last_error;
};
void sa_sub_foreach(const struct sa_client *c, int (*fn)(void *arg, const struct sa_sub_info *si),
		    void *arg);

/* --- Router liveness ---------------------------------------------------------------
 * ibsim (and a fabric whose SM does not forward traps) tells a client nothing when an
 * IB router dies, so the client polls the SA for each watched router's port: a
 * PortInfoRecord GetTable by EndPortLID, one MAD per router per interval, paced and
 * counted like any other query but never retransmitted (the next poll is the retry).
 * An answer with the port ACTIVE is "up"; no record (the SM swept the port away) or a
 * port not ACTIVE is "down"; a timeout or another SA error says nothing about the
 * router (the SA's own trouble: see "SA down"). A change of state:
 *  - marks the router down/up in cfg.gid_routes (sa_gidroutes_set_router);
 *  - down: drops every cached path whose DLID is the router (the next resolve asks
 *    again: the SA names another router, or the GID route table picks a live one);
 *    up: drops every cached path to an off-subnet DGID, "no path" answers and paths
 *    through another router alike (the SA may name the returned router: failback);
 *  - emits SA_EV_ROUTER_DOWN / SA_EV_ROUTER_UP (ev.lid): the user resolves its paths
 *    again (ipoib_link_paths_requery) and takes down connections through a dead one.
 * Watched: the routers of cfg.gid_routes (looked at every poll round), every router an
 * off-subnet PathRecord answer named (learned), and those given to sa_router_watch. */
/* Returns 0, -EEXIST (already watched), -EINVAL (LID 0 or multicast), -ENOSPC. */
int sa_router_watch(struct sa_client *c, uint16_t lid);
int sa_router_unwatch(struct sa_client *c, uint16_t lid); /* 0 or -ENOENT */
/* Change router_poll_ms / router_down_after / router_up_after (0: the defaults, as in
 * the config) of a running client (a reload). Turning the watch off forgets every
 * watched router and marks the down ones up in cfg.gid_routes. */
void sa_router_set_poll(struct sa_client *c, uint32_t poll_ms, unsigned down_after,
			unsigned up_after);
enum sa_router_state {
	SA_ROUTER_UNKNOWN, /* not answered yet: used */
	SA_ROUTER_UP,
	SA_ROUTER_DOWN
};
struct sa_router_info {
	uint16_t lid;
	enum sa_router_state state;
	bool learned;    /* from a PathRecord answer, not configured */
	unsigned in_row; /* answers in a row that disagree with state */
	uint64_t polls, downs, ups;
	uint64_t changed_ms; /* ms since the last change (or since watched) */
	int last_error;      /* of the last poll (-ETIMEDOUT, -EPROTO), 0 */
};
void sa_router_foreach(const struct sa_client *c,
		       int (*fn)(void *arg, const struct sa_router_info *ri), void *arg);
const char *sa_router_state_name(enum sa_router_state s);

/* --- Counters --------------------------------------------------------------------- */
enum sa_bad_reason {
	SA_BAD_SHORT,       /* shorter than a SA header or than the record */
	SA_BAD_HEADER,      /* base/class version, class */
	SA_BAD_TID,         /* no such transaction (late, duplicate or forged) */
	SA_BAD_MISMATCH,    /* attribute or method differs from the request */
	SA_BAD_RECORD,      /* record layout (AttributeOffset, missing record) */
	SA_BAD_UNSOLICITED, /* a request other than Report/Notice */
	SA_BAD_MAX
};
struct sa_stats {
	uint64_t sent, received, responses, timeouts, retries, failed, send_errors;
	uint64_t status_errors; /* responses with status != 0 */
	uint64_t bad[SA_BAD_MAX];
	uint64_t unsolicited, reports, report_resp_sent;
	uint64_t path_queries, path_hits, path_misses, path_coalesced, path_local;
	uint64_t path_negative, path_invalidated, path_revalidated;
	uint64_t path_seeded; /* sa_path_seed: learned from the failover peer */
	uint64_t router_polls, router_downs, router_ups;
	uint64_t router_paths_dropped; /* cached paths dropped with a router gone down */
	uint64_t joins, join_failures, leaves, subscriptions;
	uint64_t sa_down, sa_up, probes, reregisters, port_downs;
	uint64_t queued_peak;
	unsigned outstanding, queued, paths, groups;
	unsigned paths_stale; /* positive entries waiting for revalidation */
	bool sa_reachable, port_active;
	uint32_t timeout_ms; /* current base timeout */
};
void sa_client_stats(const struct sa_client *c, struct sa_stats *out);
const char *sa_bad_reason_name(enum sa_bad_reason r);

/* --- GID route table (off-subnet DGIDs) --------------------------------------------
 * Longest-prefix match (lib/lpm128) from DGID prefix to a set of IB routers; several
 * routers share a route's traffic by a hash of SGID/DGID/TClass/flow label; a router
 * marked down is skipped until it is marked up. Owned by the control thread. */
struct sa_router {
	uint16_t lid;
	uint8_t sl, mtu, rate, hop_limit; /* hop_limit 0: 0xff */
};
#define SA_ROUTE_MAX_ROUTERS 8
int sa_gidroutes_new(struct sa_gidroutes **out);
void sa_gidroutes_free(struct sa_gidroutes *t);
/* Add or replace prefix/len -> routers. Returns 0, -EINVAL, -ENOMEM. */
int sa_gidroutes_add(struct sa_gidroutes *t, const union ib_gid *prefix, unsigned len,
		     const struct sa_router *routers, unsigned n);
int sa_gidroutes_del(struct sa_gidroutes *t, const union ib_gid *prefix, unsigned len);
/* Every route removed (before adding a new set); which routers are down is kept. */
void sa_gidroutes_clear(struct sa_gidroutes *t);
/* A router (by LID) failed (trap, timeout, link down) or recovered. Returns the number
 * of routes it serves. */
unsigned sa_gidroutes_set_router(struct sa_gidroutes *t, uint16_t lid, bool up);
/* The distinct router LIDs of every route (at most max written). Returns how many
 * there are. */
unsigned sa_gidroutes_routers(const struct sa_gidroutes *t, uint16_t *lids, unsigned max);
/* Every route with its routers and whether each is marked down (gwctl show gid-routes);
 * fn returns non-zero to stop. */
struct sa_gidroute_info {
	union ib_gid prefix;
	unsigned len, n;
	struct sa_router routers[SA_ROUTE_MAX_ROUTERS];
	bool down[SA_ROUTE_MAX_ROUTERS];
};
void sa_gidroutes_foreach(const struct sa_gidroutes *t,
			  int (*fn)(void *arg, const struct sa_gidroute_info *ri), void *arg);
/* The path to dgid through the chosen router: 0, -ENOENT (no route), -ENETUNREACH
 * (every router of the route is down). Fills dlid/sl/mtu/rate/hop_limit, copies
 * q's GIDs, tclass, flow label; sets local. */
int sa_gidroutes_lookup(const struct sa_gidroutes *t, const union ib_gid *sgid,
			const struct sa_path_query *q, struct sa_path *out);

#endif
