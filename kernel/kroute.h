/*
 * kroute: the gateway's routes in a Linux kernel routing table, for BIRD or FRR to
 * announce, and an optional kernel table read back as routes of source kernel (prefix
 * kroute_). A control-thread object on lib/evloop, through rtnetlink (libnl-3 route).
 *
 * Export. The RIB's selected routes whose source is in `sources` (default connected,
 * static, learned) are kept in kernel table `table` (default 100) with protocol
 * `protocol` (default 250, KROUTE_PROTO; no name in /etc/iproute2/rt_protos needed:
 * `ip route show table 100 proto 250`). Left out: local routes (the gateway's own
 * addresses: their connected prefix is exported), unresolved routes, and routes whose
 * every next hop leaves through an interface listed in `exclude_if` (the Ethernet
 * side: re-announcing it to itself would be wrong).
 *
 * The exported route is a placeholder without a next hop: `unreachable` (the RIB
 * forwards the prefix: via a gateway or on an interface of the IB side) or `blackhole`
 * (the RIB's own route is a blackhole). The routing daemon then announces its own
 * address on each session as the next hop (BGP next hop self; the default for eBGP),
 * i.e. the gateway. Why not a route via an Ethernet device: the IB side has no kernel
 * interface (the RIB's interfaces are the data plane's), a device route would claim the
 * IB prefix is on-link on Ethernet (the kernel would ARP for IB hosts there if anything
 * looked the table up), the kernel refuses it while the port is down and flushes it
 * (IPv4: silently) when the port goes down, and with two uplinks it would have to pick
 * one. No ip rule should look table 100 up: it is a table for exchanging routes.
 *
 * Sync: kroute_export_kick() after RIB changes starts a short timer (coalescing a burst
 * of changes); the sync walks the RIB, compares with what the module knows the kernel
 * holds, and sends the adds (NLM_F_EXCL: another protocol's route with the same key is
 * never replaced), replaces (type changed) and deletes (with our protocol in the
 * request: the kernel never deletes another protocol's route for it) in batches
 * without waiting for each answer. A full resync (dump of the table, our protocol
 * only) runs at creation (so routes left by a previous run are kept or cleaned, not
 * flapped), every `resync_ms`, after the event socket overran, and when someone else
 * added, changed or deleted one of our routes (`ip route flush table 100`: they are put
 * back). A route that the kernel refuses (a key held by another protocol) is logged
 * once and retried at the next full resync.
 *
 * Import (import_table != 0). Every route of that table (any protocol but ours) is
 * reported through import_cb as a struct rt_route with source RT_SRC_KERNEL and metric =
 * the kernel priority: KROUTE_ADD for a new or changed route (use rt_replace), KROUTE_DEL
 * when it is gone (rt_del with the same prefix and metric). Next hops: a gateway
 * becomes RT_NH_GATEWAY with the interface map_ifindex() gives (0: the RIB resolves it
 * through its connected routes); a device-only next hop becomes RT_NH_CONNECTED when
 * map_ifindex() knows the device, else it is left out; blackhole, unreachable and
 * prohibit routes become RT_NH_BLACKHOLE. Skipped: routes with a TOS, cached/cloned
 * routes, other types, and routes with no usable next hop. Changes are followed through
 * netlink events: an event of the table re-reads it (after a few ms, so a burst is one
 * read) and reports the difference. The first read happens on the loop right after
 * kroute_new.
 *
 * Threads: everything runs on the loop's thread (the control thread).
 */
#ifndef IBGW_KERNEL_KROUTE_H
#define IBGW_KERNEL_KROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "table/route.h"

struct evloop;
struct kroute;

#define KROUTE_TABLE       100
#define KROUTE_PROTO       250
#define KROUTE_EXCLUDE_MAX 16

enum kroute_event {
	KROUTE_ADD = 1, /* new or changed: rt_replace */
	KROUTE_DEL = 2, /* gone: rt_del(prefix, RT_SRC_KERNEL, metric) */
};

typedef void (*kroute_import_cb)(void *ctx, int event, const struct rt_route *r);
/* A kernel interface index to the RIB's interface (0: none). */
typedef uint32_t (*kroute_map_fn)(void *ctx, int kernel_ifindex);

struct kroute_config {
	/* Export (rt NULL: none). */
	const struct rt_table *rt;
	uint32_t table;    /* 0: KROUTE_TABLE */
	uint8_t protocol;  /* 0: KROUTE_PROTO; RTPROT_KERNEL..RTPROT_STATIC refused */
	uint32_t priority; /* kernel metric of the exported routes; 0: the kernel's default
			    * (0 for IPv4, 1024 for IPv6) */
	unsigned sources;  /* bits 1 << RT_SRC_*; 0: connected, static and learned */
	uint32_t exclude_if[KROUTE_EXCLUDE_MAX]; /* RIB interfaces not to export through */
	unsigned n_exclude;
	uint32_t delay_ms;  /* kick to sync; 0: 20 */
	uint32_t resync_ms; /* periodic full resync; 0: 60000 */
	/* Import (import_table 0: none; must differ from table). */
	uint32_t import_table;
	kroute_import_cb import_cb;
	kroute_map_fn map_ifindex; /* NULL: no device is known */
	void *ctx;                 /* for import_cb and map_ifindex */
};

struct kroute_stats {
	uint32_t exported;             /* our routes in the kernel table, as last known */
	uint32_t failed;               /* routes the kernel refused (waiting for a full resync) */
	uint32_t imported;             /* routes reported and not withdrawn */
	uint64_t syncs;                /* export syncs (full ones included) */
	uint64_t full_syncs;           /* with a dump of the table */
	uint64_t adds, replaces, dels; /* requests the kernel accepted */
	uint64_t errors;               /* requests refused, dumps failed */
	uint64_t import_reads;         /* dumps of the import table */
};

/* Create on loop: opens the netlink sockets and schedules the first import read.
 * Export starts with the first kroute_export_kick or kroute_export_sync (a full resync:
 * routes of ours left by an earlier run are kept, changed or deleted, not flapped), so
 * call it once the RIB holds the configured routes. Returns 0, -EINVAL (bad config:
 * nothing to do, protocol <= RTPROT_STATIC, table 0/253/254/255, import_table equal to
 * table), -ENOMEM, or -errno from netlink. */
int kroute_new(struct evloop *loop, const struct kroute_config *cfg, struct kroute **out);
/* Closes the sockets; the exported routes stay in the kernel (see kroute_withdraw). */
void kroute_free(struct kroute *k);

/* The RIB changed: sync after delay_ms (many kicks, one sync). */
void kroute_export_kick(struct kroute *k);
/* Sync now; full: read the table first. Returns 0, or the first -errno (the failed
 * routes are logged and left for the next full resync). */
int kroute_export_sync(struct kroute *k, bool full);
/* Delete every route of ours in the export table (daemon stop, export switched off):
 * the routing daemons withdraw them. Export stops until the next kick or sync. */
int kroute_withdraw(struct kroute *k);

void kroute_stats(const struct kroute *k, struct kroute_stats *out);

/* One rtnetlink route message (RTM_NEWROUTE or RTM_DELROUTE, parsed by libnl) as the
 * import reports it: 1 and *out filled when it is an importable route of `table`, 0
 * when it is not (other table or type, malformed), -ENOMEM. proto: our protocol, whose
 * routes are never imported. The module reads every imported route through this; the
 * fuzz harness and the unit test call it directly. */
int kroute_parse(const void *buf, size_t len, uint32_t table, uint8_t proto, kroute_map_fn map,
		 void *ctx, struct rt_route *out);

#endif
