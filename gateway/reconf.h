/*
 * A live reload's decisions (gw_dp_reconfigure), as pure functions of what runs and the
 * new config: nothing here opens, sends or logs, so test/unit/test_gw_reconf.c runs them
 * without ports or root. gateway/dataplane.c describes each running link or interface
 * (struct gw_reconf_link: what it was built from), asks what to do with it, and does it:
 *
 *   KEEP     nothing configured changed;
 *   UPDATE   addresses, MTU or proxy-ND settings changed: changed in place, the
 *            interface stays up (changes says which);
 *   REBUILD  what the link is built on changed (port, P_Key, mode; device, backend,
 *            VLAN): taken down, then added again from the new config (reason says why);
 *   REMOVE   gone from the config.
 *
 * and which configured links and interfaces to add (new ones, and the rebuilt ones: IPoIB
 * links first, then Ethernet interfaces, each in the file's order).
 * Also the signature of an IB port's local GID routes: its table is rebuilt when the
 * signature differs from what it was built from (a reload, a link moved to its backup
 * port); and an IB port's sizing (its buffers and queues, fixed when it opens): a port
 * whose new config needs bigger buffers than it was opened with is closed and opened
 * again, its links rebuilt (gw_reconf_port_reopen).
 *
 * Owner: the control thread (the callers'); no state of its own.
 */
#ifndef IBGW_GATEWAY_RECONF_H
#define IBGW_GATEWAY_RECONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "gateway/config.h"

#define GW_RECONF_MAX_ADDRS FWD_IF_MAX_ADDRS /* addresses kept per interface */
#define GW_RECONF_MAX_PROXY FWD_IF_MAX_PROXY /* IPv6 proxy prefixes kept per link */

enum gw_reconf_kind {
	GW_RECONF_FREE, /* a free slot (a link removed earlier): always KEEP, never matched */
	GW_RECONF_IPOIB,
	GW_RECONF_ETH
};

/* A link or interface as it runs: what it was built from (and last updated with). */
struct gw_reconf_link {
	enum gw_reconf_kind kind;
	char name[GW_NAME_MAX], backend[16], device[GW_NAME_MAX]; /* backend by name */
	char tenant[GW_NAME_MAX];                                 /* "": the default */
	uint32_t mtu;                                             /* as configured */
	const struct ip_prefix *addrs; /* as running (at most GW_RECONF_MAX_ADDRS) */
	unsigned n_addrs;
	/* IPoIB */
	uint8_t port;
	uint16_t pkey;
	enum gw_ipoib_mode mode; /* as configured (connected may run as datagram) */
	uint8_t mcast_hop_limit; /* as configured (0: absent) */
	bool proxy_nd;
	const struct ip_prefix *proxy6; /* the configured IPv6 proxy prefixes */
	unsigned n_proxy6;
	/* Ethernet */
	uint16_t vlan;
};

enum gw_reconf_action {
	GW_RECONF_KEEP,
	GW_RECONF_UPDATE,
	GW_RECONF_REBUILD,
	GW_RECONF_REMOVE
};

/* UPDATE's changes (bits). */
#define GW_RECONF_ADDRS 0x1u /* the address list differs (added, removed or reordered) */
#define GW_RECONF_MTU   0x2u
#define GW_RECONF_PROXY 0x4u /* proxy_nd or the IPv6 proxy prefixes (IPoIB) */

struct gw_reconf_verdict {
	enum gw_reconf_action action;
	unsigned changes;   /* UPDATE: GW_RECONF_* bits; else 0 */
	const char *reason; /* REBUILD, REMOVE: why, for the log ("P_Key changed"); else "" */
};

/* What becomes of running link run under cfg. */
void gw_reconf_link(const struct gw_reconf_link *run, const struct gw_config *cfg,
		    struct gw_reconf_verdict *out);
/* The same for each of the n running links: v[i] for run[i]. */
void gw_reconf_plan(const struct gw_reconf_link *run, unsigned n, const struct gw_config *cfg,
		    struct gw_reconf_verdict *v);
/* Whether the configured link or interface name is to be added after the plan's
 * removals (new, or rebuilt): no running link of that name is kept or updated. */
bool gw_reconf_to_add(const struct gw_reconf_link *run, const struct gw_reconf_verdict *v,
		      unsigned n, const char *name);

/* The config of link or interface name, or NULL (*index: its place, may be NULL). */
const struct gw_ipoib_link_config *gw_reconf_ipoib_cfg(const struct gw_config *cfg,
						       const char *name);
const struct gw_eth_if_config *gw_reconf_eth_cfg(const struct gw_config *cfg, const char *name,
						 unsigned *index);

/* Whether GID route g is a local route of IB port (backend, device, num): its routers are
 * reached through its link's port (the first link's when it names none); routes with
 * source sa have no table entry. */
bool gw_reconf_gid_route_on(const struct gw_config *cfg, const struct gw_gid_route_config *g,
			    const char *backend, const char *device, uint8_t num);
/* The signature of that port's local GID routes as configured (FNV-1a over their
 * prefixes and routers; equal configs give equal signatures). */
uint32_t gw_reconf_gid_sig(const struct gw_config *cfg, const char *backend, const char *device,
			   uint8_t num);

/* How an IB port is sized when it opens (gateway/dataplane.c, port_open): buffers for a
 * whole RC message, 1024 per connected link, when connected links run on it (else
 * datagram-sized ones, 3072 per datagram link and at least 4096), times the queues; a
 * queue per worker. */
#define GW_RECONF_CM_LINKS_MAX 4  /* connected links counted (the pool stops growing) */
#define GW_RECONF_DG_LINKS_MAX 16 /* datagram links counted likewise */
struct gw_reconf_port_size {
	unsigned connected; /* connected links configured on the port (0: datagram buffers) */
	unsigned queues;    /* queues asked (gateway.workers, at least 1) */
	unsigned datagram;  /* datagram links configured on the port */
};
/* The sizing cfg asks of IB port (backend, device, num); queues 0 when no link of cfg is
 * on it (nothing to open it for). */
struct gw_reconf_port_size gw_reconf_port_want(const struct gw_config *cfg, const char *backend,
					       const char *device, uint8_t num);
/* Whether a port opened with have (and given got queues) must be opened again for want:
 * connected links beyond the buffers it has (datagram buffers for a connected link, or
 * fewer than 1024 per connected link). Never for datagram links beyond its pool's count:
 * they post the receives the pool still has (a reopen would cost every link's traffic). Never for queues alone (a change of workers
 * hands the port's queues over without a loss, docs/operations.md) and never to shrink:
 * a port keeps bigger buffers until the next start. True: why says what for
 * ("connected-mode buffers"), and names the queues it gains too ("... and 2 queues":
 * reopened, it gets one per worker, when more workers than its queues run and it got
 * all it asked, a device that gave fewer having no more to give). */
bool gw_reconf_port_reopen(const struct gw_reconf_port_size *have, unsigned got,
			   const struct gw_reconf_port_size *want, char *why, size_t len);

#endif
