/*
 * The gateway's configuration: one YAML file, parsed whole and validated before any of
 * it is used. A config that fails to load never replaces a running one.
 *
 * The schema is written once, as tables in config.c; parsing, validation, "did you
 * mean", the normalised YAML printer (ibgwd -n -v) and the JSON form (gwctl show config)
 * are all driven from those tables, so they cannot drift apart.
 *
 * Ownership: a struct gw_config is immutable once loaded and owned by whoever loaded
 * it; the daemon swaps whole configs on reload.
 */
#ifndef IBGW_GATEWAY_CONFIG_H
#define IBGW_GATEWAY_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/addr.h"

struct json_object;

#define GW_WORKERS_MAX 16 /* forwarding threads (the engine's FWD_WORKERS_MAX) */
#define GW_NAME_MAX    32 /* link, interface and group names */
#define GW_TENANTS_MAX 16 /* the default tenant and 15 named ones (FWD_TENANTS) */
#define GW_PATH_MAX    256

/* Where in the file a value came from, for messages after parsing (reload, apply). */
struct gw_config_pos {
	unsigned line, column; /* 1-based; 0 when the value is a default */
};

enum gw_ipoib_backend {
	GW_IB_BACKEND_VERBS
};
enum gw_ipoib_mode {
	GW_IPOIB_DATAGRAM,
	GW_IPOIB_CONNECTED
};
enum gw_eth_backend {
	GW_ETH_BACKEND_AF_PACKET,
	GW_ETH_BACKEND_AF_XDP
};
enum gw_gid_route_source {
	GW_GID_ROUTE_SA,
	GW_GID_ROUTE_LOCAL
};
enum gw_failover_auth {
	GW_FAILOVER_AUTH_HMAC, /* hmac-sha256 with key_file's secret (the default) */
	GW_FAILOVER_AUTH_NONE  /* none: unauthenticated, the operator's explicit choice */
};

/* Proxy ARP/ND on one interface: answer for addresses that live on the other side. */
struct gw_proxy_config {
	bool arp;                   /* proxy_arp */
	bool nd;                    /* proxy_nd */
	struct ip_prefix *prefixes; /* proxy_prefixes; none = answer for learned addresses */
	unsigned n_prefixes;
};

/* Router advertisements on one interface (RFC 4861 6.2.1's AdvSendAdvertisements and
 * friends; gateway/dp_ra.c). Off unless the section is given. Times in ms as the RFC's
 * variables are in seconds: the lifetimes that go on the wire in seconds say so (_s). */
#define GW_RA_MAX_PREFIXES 8          /* pkt/nd.h's ND_RA_MAX_PREFIX */
#define GW_RA_MTU_LINK     UINT32_MAX /* while loading: the interface's mtu, filled in */

struct gw_ra_prefix_config {
	struct ip_prefix prefix;       /* prefix: IPv6, not link-local */
	bool on_link;                  /* on_link: L flag (true) */
	bool autonomous;               /* autonomous: A flag (true); a /64 then */
	uint32_t valid_lifetime_s;     /* valid_lifetime_s: 2592000; 4294967295 = infinity */
	uint32_t preferred_lifetime_s; /* preferred_lifetime_s: 604800; <= valid */
};

struct gw_ra_config {
	bool enabled;               /* the router_advertisements section is present */
	uint32_t max_interval_ms;   /* max_interval_ms: 4000..1800000 (600000) */
	uint32_t min_interval_ms;   /* min_interval_ms: 3000..0.75 max (max / 3) */
	uint32_t router_lifetime_s; /* router_lifetime_s: 0 or max_interval..9000 (3 max) */
	uint8_t hop_limit;          /* hop_limit: Cur Hop Limit, 0 = unspecified (64) */
	bool managed;               /* managed: M flag (false) */
	bool other_config;          /* other_config: O flag (false) */
	uint32_t mtu;               /* mtu: MTU option, 0 = none (the interface's mtu) */
	uint32_t reachable_time_ms; /* reachable_time_ms: 0 = unspecified */
	uint32_t retrans_timer_ms;  /* retrans_timer_ms: 0 = unspecified */
	struct gw_ra_prefix_config prefixes[GW_RA_MAX_PREFIXES]; /* none: the interface's
								   * IPv6 prefixes */
	unsigned n_prefixes;
};

/* DHCP relay agent on one interface (RFC 1542, RFC 2131 4.1, RFC 3046, RFC 4390, RFC 8415;
 * gateway/dp_dhcp.c). Off unless the section is given. */
#define GW_DHCP_MAX_SERVERS 4
#define GW_DHCP_ID_MAX      64

struct gw_dhcp_relay_config {
	bool enabled;                                /* the dhcp_relay section is present */
	struct ip_addr servers[GW_DHCP_MAX_SERVERS]; /* servers: 1..4; IPv4 ones relay DHCPv4,
						      * IPv6 ones DHCPv6 */
	unsigned n_servers;
	bool option82;                  /* option82: append Relay Agent Information (false) */
	char remote_id[GW_DHCP_ID_MAX]; /* remote_id: sub-option 2; "" = none */
	uint8_t max_hops;               /* max_hops: 1..16 (4) */
};

/* IP multicast forwarding on one interface (IGMP / MLD, RFC 4391 4 on IPoIB;
 * gateway/dp_mcast.c, docs/multicast.md). Off unless the section is given. */
struct gw_mcast_config {
	bool enabled;              /* the ip_multicast section is present */
	uint32_t rate_limit_pps;   /* rate_limit_pps: per group into this interface, 0 = none
				    * (1000) */
	bool querier;              /* querier: send IGMP/MLD general queries (true) */
	uint32_t query_interval_s; /* query_interval_s: 2..3600 (125) */
	uint8_t robustness;        /* robustness: 1..7 (2) */
};

struct gw_ipoib_link_config {
	char name[GW_NAME_MAX];        /* name: "ib0" */
	enum gw_ipoib_backend backend; /* backend: verbs (the only one, and the default) */
	char device[GW_NAME_MAX];      /* device: HCA ("mlx5_0"), or the sim node ("gw1") */
	uint8_t port;                  /* port: 1.. (default 1) */
	uint8_t backup_port;           /* backup_port: 0 = none; another port of the HCA */
	uint16_t pkey;                 /* pkey: 0x0001..0xffff (default 0xffff); full bit added */
	enum gw_ipoib_mode mode;       /* mode: datagram | connected (default datagram) */
	uint32_t mtu;                  /* mtu: IP MTU; default 2044 datagram, 65520 connected */
	uint8_t mcast_hop_limit;       /* mcast_hop_limit: 1..255; 0 (absent): 1 */
	char tenant[GW_NAME_MAX];      /* tenant: "" = the default tenant */
	struct ip_prefix *addresses;   /* addresses: interface addresses with prefix length */
	unsigned n_addresses;
	struct gw_proxy_config proxy;
	struct gw_ra_config ra;           /* router_advertisements */
	struct gw_dhcp_relay_config dhcp; /* dhcp_relay */
	struct gw_mcast_config mcast;     /* ip_multicast */
	struct gw_config_pos pos;
};

struct gw_eth_if_config {
	char name[GW_NAME_MAX];      /* name: "eth0" */
	enum gw_eth_backend backend; /* backend: af_packet | af_xdp (default af_packet) */
	char device[GW_NAME_MAX];    /* device: kernel netdev (default: name) */
	uint16_t vlan;               /* vlan: 0 = untagged, 1..4094 = 802.1Q sub-interface */
	uint32_t mtu;                /* mtu: 68..9216 (default 1500) */
	char tenant[GW_NAME_MAX];    /* tenant: "" = the default tenant */
	struct ip_prefix *addresses;
	unsigned n_addresses;
	struct gw_proxy_config proxy;
	struct gw_ra_config ra;           /* router_advertisements */
	struct gw_dhcp_relay_config dhcp; /* dhcp_relay */
	struct gw_mcast_config mcast;     /* ip_multicast */
	struct gw_config_pos pos;
};

#define GW_ROUTE_MAX_NEXTHOPS 16

struct gw_route_config {
	struct ip_prefix prefix;                   /* prefix: "10.1.0.0/16" */
	struct ip_addr via[GW_ROUTE_MAX_NEXTHOPS]; /* via: one address or a list (ECMP) */
	unsigned n_via;                            /* 0: directly connected on dev */
	char dev[GW_NAME_MAX];                     /* dev: optional interface or link name */
	uint32_t metric;                           /* metric: default 0 */
	char tenant[GW_NAME_MAX];                  /* tenant: "" = the default tenant */
	struct gw_config_pos pos;
};

/* A tenant: a routing table of its own for the links and interfaces that name it (see
 * docs/tenants.md). The default tenant (links, interfaces and routes that name none) is
 * not listed; its kernel tables are kernel_routes'. */
struct gw_tenant_config {
	char name[GW_NAME_MAX]; /* name: not "default" */
	uint32_t export_table;  /* export_table: kernel table of its routes; 0: none */
	uint32_t import_table;  /* import_table: kernel table imported into it; 0: none */
	struct gw_config_pos pos;
};

#define GW_GID_ROUTE_MAX_ROUTERS 8

struct gw_ib_router_config {
	uint16_t lid;      /* lid: router port LID, 0x0001..0xbfff */
	uint8_t sl;        /* sl: 0..15 (default 0) */
	uint32_t mtu;      /* mtu: IB MTU 256..4096 (default 2048) */
	uint8_t hop_limit; /* hop_limit: 1..255 (default 64) */
};

struct gw_gid_route_config {
	struct ip_prefix prefix;         /* prefix: GID prefix, "fec0:0:0:1::/64" */
	enum gw_gid_route_source source; /* source: sa | local (default sa) */
	char link[GW_NAME_MAX];          /* link: IPoIB link to use (default: the first) */
	struct gw_ib_router_config routers[GW_GID_ROUTE_MAX_ROUTERS];
	unsigned n_routers;
	struct gw_config_pos pos;
};

struct gw_ha_address_config {
	struct ip_prefix address; /* address: "10.0.0.100/24" */
	char dev[GW_NAME_MAX];    /* dev: interface or link that carries it */
};

struct gw_ha_group_config {
	char name[GW_NAME_MAX];
	uint8_t priority; /* priority: 1..254, overrides failover.priority */
	struct gw_ha_address_config *addresses;
	unsigned n_addresses;
	struct gw_config_pos pos;
};

struct gw_failover_config {
	bool enabled;                   /* the failover section is present */
	uint8_t priority;               /* priority: 1..254 (default 100) */
	bool preempt;                   /* preempt: default true */
	uint32_t preempt_delay_ms;      /* default 0 */
	uint32_t heartbeat_interval_ms; /* default 10, 10..10000 */
	uint32_t dead_interval_ms;      /* default 40; at least 3 heartbeat intervals */
	uint32_t rt_priority;           /* rt_priority: the heartbeat thread's SCHED_FIFO (10) */
	enum gw_failover_auth auth;     /* auth: hmac-sha256 (default) | none */
	char key_file[GW_PATH_MAX];     /* key_file: shared secret; required unless auth none */
	char (*paths)[GW_NAME_MAX];     /* paths: interfaces carrying heartbeats (default all) */
	unsigned n_paths;
	struct ip_addr *peer_addresses; /* peer_addresses: the peer, one per path */
	unsigned n_peer_addresses;
	struct ip_addr tiebreaker; /* tiebreaker_address: pinged on split brain */
	bool has_tiebreaker;
	struct gw_ha_group_config *groups;
	unsigned n_groups;
};

/* Routes exchanged with a Linux kernel routing table, for BIRD or FRR (kernel/kroute.h). */
struct gw_kernel_routes_config {
	bool enabled;          /* the kernel_routes section is present */
	uint32_t export_table; /* export_table: default 100; 0: no export */
	uint8_t protocol;      /* protocol: rtnetlink protocol of exported routes (250) */
	uint32_t metric;       /* metric: kernel priority of exported routes (0) */
	uint32_t import_table; /* import_table: 0 = none */
};

/* Neighbour tables (table/neigh.h), one per link and interface, each with these limits;
 * Linux's defaults (gc_thresh1/2/3, unres_qlen, base_reachable_time_ms), plus the cap
 * on entries being resolved (issue 20: a scan of a large prefix must not take the
 * table). Read when a table is made: a reload keeps the running tables' limits. */
struct gw_neigh_config {
	unsigned gc_thresh1;             /* gc_thresh1: 128; no periodic GC below */
	unsigned gc_thresh2;             /* gc_thresh2: 512; forced GC at most every 5 s */
	unsigned gc_thresh3;             /* gc_thresh3: 1024; the table's size */
	unsigned max_unresolved;         /* max_unresolved: gc_thresh3 / 4; below gc_thresh3 */
	unsigned unres_qlen;             /* unres_qlen: 3 packets per unresolved entry */
	uint32_t base_reachable_time_ms; /* base_reachable_time_ms: 30000 */
};

/* One punt class's rate limits (engine/engine.h, struct fwd_punt_limit): token buckets
 * in each worker, one per source (hashed: the frame's MAC, the IB sender's LID and QPN,
 * or the IP source) and one for the worker; rate 0: that bucket does not limit. */
struct gw_punt_class_config {
	uint32_t per_source_rate;  /* per_source_rate: punts/s, 0..1000000 */
	uint32_t per_source_burst; /* per_source_burst: punts at once, 1..1000000 */
	uint32_t per_worker_rate;  /* per_worker_rate */
	uint32_t per_worker_burst; /* per_worker_burst */
};

/* Punts: packets a worker hands to the control thread (docs/dataplane.md, "Punt
 * classes", issue 20). The message pool and parking cap of each worker, and the rate
 * limits of the classes but control (never limited); the defaults are the engine's
 * (fwd_punt_defaults). Read when the engine starts: a reload keeps the running ones. */
struct gw_punt_config {
	unsigned msg_pool; /* msg_pool: 256 messages per pool (per worker and side) */
	unsigned park_max; /* park_max: msg_pool / 8; at most msg_pool / 4 (unresolved cap) */
	struct gw_punt_class_config neighbour;  /* neighbour: ARP and ND */
	struct gw_punt_class_config unresolved; /* unresolved: waiting for a neighbour */
	struct gw_punt_class_config local;      /* local: other IP to our addresses */
	struct gw_punt_class_config mcast;      /* mcast: IP multicast to forward */
};

/* Prometheus text exposition over HTTP. */
struct gw_metrics_config {
	char listen[64];  /* listen: "127.0.0.1:9464", "[::1]:9464"; "": no endpoint */
	bool status_page; /* status_page: also /status and /status.json (read-only) */
};

struct gw_config {
	char source[GW_PATH_MAX]; /* the file it came from */

	/* gateway: */
	char name[GW_NAME_MAX]; /* name: default the host name */
	unsigned workers;       /* workers: 1..GW_WORKERS_MAX (default 1) */
	int *worker_cpus;       /* worker_cpus: one CPU per worker, or none */
	unsigned n_worker_cpus;
	unsigned worker_rt_priority; /* worker_rt_priority: SCHED_FIFO, 0..98 (0: normal) */
	unsigned busy_poll_us;       /* busy_poll_us: idle polling before sleep (50) */
	uint32_t router_poll_ms;     /* router_poll_ms: 0..60000 (default 1000; 0 = off) */
	unsigned router_down_after;  /* router_down_after: 1..10 (default 1) */
	char user[GW_NAME_MAX];      /* user: "" = stay as started (see gateway/privdrop) */
	char group[GW_NAME_MAX];     /* group: "" = the user's login group */

	/* control: */
	char socket[GW_PATH_MAX];                /* socket: default /run/ibgw/ibgwd.sock */
	char readonly_socket[GW_PATH_MAX];       /* readonly_socket: "" = none */
	uint32_t socket_mode;                    /* socket_mode: default 0660 */
	char socket_group[GW_NAME_MAX];          /* socket_group: "" = the daemon's group */
	unsigned max_clients;                    /* max_clients: 1..1024 (default 64) */
	uint32_t readonly_socket_mode;           /* readonly_socket_mode: default 0660 */
	char readonly_socket_group[GW_NAME_MAX]; /* readonly_socket_group: "" = socket_group */
	unsigned readonly_max_clients;           /* readonly_max_clients: 1..1024 (default 64) */

	/* logging: */
	int log_level;  /* level: error | warning | notice | info | debug */
	int log_target; /* target: auto | stderr | syslog | journal (enum log_target) */

	struct gw_tenant_config *tenants;
	unsigned n_tenants;
	struct gw_ipoib_link_config *ipoib_links;
	unsigned n_ipoib_links;
	struct gw_eth_if_config *eth_ifs;
	unsigned n_eth_ifs;
	struct gw_route_config *routes;
	unsigned n_routes;
	struct gw_gid_route_config *gid_routes;
	unsigned n_gid_routes;
	struct gw_failover_config failover;
	struct gw_kernel_routes_config kernel_routes;
	struct gw_metrics_config metrics;
	struct gw_neigh_config neighbours;
	struct gw_punt_config punt;
};

/* Errors found while loading, each "file:line:column: message". */
struct gw_config_errors {
	char **msgs;
	unsigned n;
};

/* The highest SCHED_FIFO priority the config asks for (the heartbeat thread's with a
 * failover section, the workers'): what RLIMIT_RTPRIO must allow. 0: none. */
unsigned gw_config_rt_priority_max(const struct gw_config *cfg);

/*
 * Load and validate a config file. On success returns 0 and *out owns a new config.
 * On failure returns -1 with every problem found in errs (as many as can be found in
 * one pass, not just the first); *out is untouched. errs must be freed either way.
 */
int gw_config_load(const char *path, struct gw_config **out, struct gw_config_errors *errs);
/* The same from a buffer; name is used in messages (fuzzing, tests). */
int gw_config_load_buffer(const char *name, const char *buf, size_t len, struct gw_config **out,
			  struct gw_config_errors *errs);
void gw_config_free(struct gw_config *cfg);
void gw_config_errors_free(struct gw_config_errors *errs);

/* Normalised YAML: every key with its value (defaults included), canonical forms
 * (prefixes masked, P_Keys in hex). Loading it again yields an equal config. */
void gw_config_print_yaml(const struct gw_config *cfg, FILE *out);
/* The same content as JSON objects (snake_case keys, like the YAML). */
struct json_object *gw_config_to_json(const struct gw_config *cfg);

/* Every key of the schema as Markdown tables (key, type, default, range, meaning): the
 * key reference in docs/config.md is this output. */
void gw_config_print_reference(FILE *out);

/* The tenant a link, interface or route names: its index in cfg->tenants + 1, 0 for the
 * default tenant ("" or unknown, which a loaded config never holds). */
unsigned gw_config_tenant_index(const struct gw_config *cfg, const char *name);

/* Names for enums, shared with gwctl output. */
const char *gw_ipoib_mode_name(enum gw_ipoib_mode m);
const char *gw_ipoib_backend_name(enum gw_ipoib_backend b);
const char *gw_eth_backend_name(enum gw_eth_backend b);

#endif
