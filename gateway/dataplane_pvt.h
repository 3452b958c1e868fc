/*
 * The data plane's composition state ("dp" is the gateway's data plane, as built from
 * the config), private to gateway/: gateway/dataplane.c builds it at start and changes
 * it on a reload; dp_show.c, dp_ctl.c and dp_metrics.c read it for gwctl and metrics;
 * dp_ha.c (the failover pair's hands), dp_portfail.c (links moving to a backup port)
 * and dp_routers.c (IB router watch) act on it. Everything here belongs to the control
 * thread; the workers read only the engine's own snapshots, never these structs.
 */
#ifndef IBGW_GATEWAY_DATAPLANE_PVT_H
#define IBGW_GATEWAY_DATAPLANE_PVT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include "engine/engine.h"
#include "port/eth_port.h"
#include "port/ib_port.h"
#include "ipoib/ipoib_link.h"
#include "gateway/config.h"
#include "gateway/dataplane.h"
#include "gateway/dp_tenant.h"
#include "gateway/reconf.h"
#include "sm-client/sa.h"

struct dp_ha;
struct dp_portfail;
struct dp_ra;
struct dp_mcast;
struct dp_dhcp;
struct kroute;
struct linkwatch;
struct sa_umad;
struct evtimer;

#define DP_REASON_LEN 160
#define DP_MAX_PORTS  8
#define DP_MAX_LINKS  (FWD_IF_MAX - 1)
#define DP_MAX_ADDRS  FWD_IF_MAX_ADDRS

/* One IB port (backend, device, port) and what runs on it. Owner: control thread. */
struct dp_port {
	struct gw_dp *dp;
	char backend[16], device[GW_NAME_MAX];
	uint8_t num;
	const struct ibp_ops *ops; /* the backend's */
	struct ibp_port *port;     /* NULL: could not be opened (reason) */
	struct ibp_port_attr pa;
	struct sa_umad *umad;
	struct sa_client *sa;
	struct sa_port_info pi;
	bool async_on;
	unsigned worker;
	/* What it was opened with (gateway/reconf.h): connected links (buffers for whole RC
	 * messages, 1024 per link) and queues; a reload that needs more opens it again. */
	struct gw_reconf_port_size size;
	struct ipoib_cm_port *cmp; /* its CM MAD transport (connected links), or NULL */
	/* The GID routes of the links on this port (gid_routes[].link), for its SA client:
	 * one table per port, so that router state follows the subnet the port is on. */
	struct sa_gidroutes *gidroutes;
	uint32_t gid_sig; /* what the table was built from (gidroutes_apply) */
	char reason[DP_REASON_LEN];
};

enum dp_kind {
	DP_NONE, /* a free slot: the link was removed by a reload */
	DP_IPOIB,
	DP_ETH
};

/* One configured link or interface as it runs. Owner: control thread. The slots never
 * move (callbacks hold their address); a link removed by a reload leaves a DP_NONE slot
 * that the next added link reuses, so loops over links skip DP_NONE. */
struct dp_link {
	enum dp_kind kind;
	char name[GW_NAME_MAX];
	char tenant[GW_NAME_MAX]; /* "": the default tenant */
	char device[GW_NAME_MAX];
	char backend[16];
	uint32_t cfg_mtu;
	uint8_t mcast_hop_limit; /* IPoIB: as configured (0: 1) */
	struct ip_prefix addrs[DP_MAX_ADDRS];
	unsigned n_addrs;
	uint32_t ifindex;           /* the engine's interface, 0 when not added */
	char reason[DP_REASON_LEN]; /* why it is down ("" when up or coming up) */
	/* IPoIB */
	struct dp_port *port;
	struct ipoib_link *link;
	uint8_t port_num;
	uint16_t pkey;
	enum gw_ipoib_mode mode;
	bool proxy_nd;
	struct ip_prefix proxy6[FWD_IF_MAX_PROXY]; /* configured IPv6 proxy prefixes */
	unsigned n_proxy6;
	struct ibp_qp *qp; /* the link's UD QP (ipoib_link_ud_qp when it came up) */
	uint32_t qkey;
	/* Ethernet */
	const struct ethp_ops *eops;
	struct ethp_port *eth;
	struct ethp_port_attr eattr;
	uint16_t vlan;
	bool carrier;
	bool absent; /* Ethernet: the kernel has no such device (a reload reports it) */
};

struct gw_dp {
	struct evloop *loop;
	struct rt_table *rt;
	struct fwd_engine *e;
	unsigned n_workers;
	int worker_cpu[FWD_WORKERS_MAX]; /* as pinned (-1: not), for a reload */
	unsigned worker_rt_priority;     /* the workers' SCHED_FIFO priority as set (0: none) */
	unsigned busy_poll_us;           /* the workers' idle polling as set */
	bool workers_started, sp_attached;
	uint32_t router_poll_ms; /* the SA clients' router watch (gateway/dp_routers.c) */
	unsigned router_down_after;
	struct linkwatch *linkwatch; /* the Ethernet devices' link state (kernel/linkwatch.h) */
	struct evtimer *port_timer;
	/* The config an IB port opened now is sized from (port_get): gw_dp_start's, or a
	 * reload's while it adds links; NULL otherwise. */
	const struct gw_config *open_cfg;
	struct dp_port ports[DP_MAX_PORTS];
	unsigned n_ports;
	struct dp_link links[DP_MAX_LINKS];
	unsigned n_links;
	/* The tenants (gateway/dp_tenant.h): slot 0 the default, whose table rt is. */
	struct dp_tenant tenants[GW_TENANTS_MAX];
	/* The failover pair (gateway/dp_ha.c); NULL: a single gateway. */
	struct dp_ha *ha;
	/* IPoIB links with a backup port (gateway/dp_portfail.c). */
	struct dp_portfail *portfail;
	/* Router advertisements (gateway/dp_ra.c); NULL: none configured yet. */
	struct dp_ra *ra;
	/* The DHCPv4 relay (gateway/dp_dhcp.c); NULL: not set up yet. */
	struct dp_dhcp *dhcp;
	struct dp_mcast *mcast; /* gateway/dp_mcast.c */
	/* The neighbour tables' limits (config neighbours:), fixed at start: links added
	 * by a reload get them too. */
	struct neigh_params neigh;
	/* During gw_dp_reconfigure: where its changes and errors are told (NULL: only
	 * logged). */
	struct gw_reload_outcome *outcome;
	/* The punt pools and limits (config punt:) the engine runs with, fixed at start. */
	struct gw_punt_config punt;
};

/* RCU deferral (liburcu QSBR call_rcu) for the route tables and the engine. */
void dp_defer(void *ctx, void (*fn)(void *arg), void *arg);

struct dp_link *dp_link_by_ifindex(struct gw_dp *dp, uint32_t ifindex);
struct dp_link *dp_link_by_name(struct gw_dp *dp, const char *name);
/* Announce (fwd_sp_announce: gratuitous ARP / unsolicited NA where proxied) every
 * usable neighbour of every interface but skip_ifindex (0: none): after a takeover or
 * a link's move, hosts on the other sides must ask this box now. */
void dp_announce_neighbours(struct gw_dp *dp, uint32_t skip_ifindex);

/* Failover (gateway/dp_ha.c): started last by gw_dp_start when the config has a
 * failover section (a failure is logged and fails the start), stopped first by
 * gw_dp_stop (its groups handed to the peer). dp_ha_link_changed: a link's or
 * interface's up/down state may have changed (a heartbeat path's local state). */
int dp_ha_start(struct gw_dp *dp, const struct gw_config *cfg);
void dp_ha_stop(struct gw_dp *dp);
void dp_ha_link_changed(struct gw_dp *dp, const struct dp_link *k);
/* The config as reloaded: the prefixes the peer's state sync may fill follow it; what
 * waits for the next start (timers, rt_priority) is said in out. */
void dp_ha_config(struct gw_dp *dp, const struct gw_config *cfg, struct gw_reload_outcome *out);
/* The pair's metric families (nothing for a single gateway). */
void dp_ha_metrics(struct gw_dp *dp, FILE *out);
/* Whether this box serves the link or interface named dev for the hosts on it (router
 * advertisements, gateway/dp_ra.c): a single gateway does; in a pair, a link that
 * carries service addresses is served by the box holding one of them (MASTER of its
 * group), and one that carries none by both. */
bool dp_ha_serves(struct gw_dp *dp, const char *dev);
/* The first service address of family on dev that this box holds now (a pair's MASTER
 * of its group): 0 and *out, or -ENOENT (single gateway, none held, none configured). */
int dp_ha_service_addr(struct gw_dp *dp, const char *dev, int family, struct ip_addr *out);

#endif
