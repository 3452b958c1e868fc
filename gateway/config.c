/*
 * The gateway's YAML configuration: schema, loading, validation, printing, JSON.
 *
 * The schema is written once, as the tables below: for every key its name, type, range,
 * default, where it is stored and a line of help. One walker over those tables parses a
 * node tree (config_yaml.c) into struct gw_config; the same tables drive the defaults,
 * "did you mean" for unknown keys (edit distance against the keys valid at that place),
 * freeing, the normalised YAML printer, the JSON form and the key reference in
 * docs/config.md. What one key cannot check alone (an MTU that depends on the mode, a
 * dead interval against the heartbeat) sits in a per-section check hook; what spans
 * sections (names, references, overlapping addresses, duplicate routes) runs once after
 * the walk.
 *
 * Every problem becomes "FILE:LINE:COLUMN: message" pointing at the key or value at
 * fault. Loading goes on after an error so that one run shows them all (at most
 * GW_CFG_MAX_ERRORS); a config with any error is thrown away whole.
 */
#include "gateway/config.h"
#include "gateway/config_yaml.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "lib/log.h"

/* ---- Schema types ---- */

enum ftype {
	T_SECTION,     /* mapping whose keys are fields of sub, stored at base + off */
	T_LIST,        /* sequence of mappings of sub */
	T_BOOL,        /* true | false */
	T_UINT,        /* unsigned integer of size bytes, decimal or 0x hex, min..max */
	T_STR,         /* string in a char[size] */
	T_ENUM,        /* one of enums, stored as int */
	T_PKEY,        /* P_Key: full-membership bit stored set; 0x0000, 0x8000 refused */
	T_MODE,        /* file mode in octal, 0..0777 */
	T_ADDR,        /* IP address */
	T_IFADDR,      /* interface address with prefix length: host bits kept */
	T_NET,         /* network prefix: host bits refused */
	T_GID_NET,     /* GID prefix: an IPv6-form prefix, host bits refused */
	T_IFADDR_LIST, /* list of T_IFADDR */
	T_NET_LIST,    /* list of T_NET */
	T_ADDR_LIST,   /* list of T_ADDR */
	T_NAME_LIST,   /* list of names, char[GW_NAME_MAX] each */
	T_CPU_LIST,    /* list of CPU numbers (int) */
	T_VIA,         /* one address or a list of them, into a fixed array */
};

enum {
	FL_REQUIRED = 1 << 0,   /* must be given */
	FL_HEX = 1 << 1,        /* printed in hex */
	FL_NAME = 1 << 2,       /* letters, digits, '.', '_', ':', '-'; not empty */
	FL_NONEMPTY = 1 << 3,   /* not "" */
	FL_ABSPATH = 1 << 4,    /* "" or an absolute path */
	FL_SUNPATH = 1 << 5,    /* fits a unix socket address */
	FL_IFNAME = 1 << 6,     /* fits a Linux interface name */
	FL_OMIT_EMPTY = 1 << 7, /* printed only when not empty */
	FL_FIXED = 1 << 8,      /* T_LIST: a fixed array inside the struct, not a pointer */
	FL_OPTIONAL = 1 << 9,   /* T_SECTION / T_ADDR: presence flag at n_off */
};

struct enum_name {
	const char *name;
	int value;
};

struct load;
struct schema;

struct field {
	const char *key;
	enum ftype type;
	size_t off;    /* where the value lives, from the base of the enclosing struct */
	size_t n_off;  /* lists: the count; FL_OPTIONAL: the presence bool */
	unsigned size; /* T_UINT: bytes; T_STR: buffer; lists: most entries */
	int64_t min, max;
	const char *def;     /* default as the file would spell it; NULL: zero / empty */
	const char *def_doc; /* default that depends on other keys, for the reference */
	unsigned flags;
	const struct enum_name *enums;
	const struct schema *sub;
	const char *help;
};

typedef void check_fn(struct load *L, void *base, const struct gw_ynode *const *vals,
		      const char *path, const struct gw_ynode *node);

struct schema {
	const char *name; /* the section or list key */
	const struct field *f;
	unsigned n;
	size_t item_size;
	ssize_t pos_off; /* struct gw_config_pos in an item, or -1 */
	check_fn *check;
};

/* The most fields of one schema (walk_map's arrays; the widest tables are checked below). */
#define MAX_FIELDS 24

/* Position of each value successfully stored, by address, for checks after the walk. */
struct posrec {
	const void *p;
	unsigned line, col;
};

struct load {
	struct gw_cfg_errs *e;
	struct gw_config *cfg;
	struct posrec *pos;
	size_t n_pos, cap_pos;
	/* pos by address: open addressing, index + 1 (0: empty); checks look values up
	 * between records, so a sorted array was sorted again for every lookup */
	uint32_t *pos_idx;
	size_t idx_cap; /* a power of two, at least twice n_pos */
	bool defaults;  /* applying our own defaults: nothing to record or report */
};

/* ---- Enum names ---- */

static const struct enum_name ib_backends[] = {
	{ "verbs", GW_IB_BACKEND_VERBS },
	{ NULL, 0 },
};
/* Values the file format once had: refused with a word on what replaced them. */
static const struct {
	const struct enum_name *enums;
	const char *name, *why;
} retired_values[] = {
	{ ib_backends, "sim",
	  "the sim backend is retired; use verbs (on the simulated rack under "
	  "libibverbs2sim.so, docs/verbs-sim.md)" },
};
static const struct enum_name ipoib_modes[] = {
	{ "datagram", GW_IPOIB_DATAGRAM },
	{ "connected", GW_IPOIB_CONNECTED },
	{ NULL, 0 },
};
static const struct enum_name eth_backends[] = {
	{ "af_packet", GW_ETH_BACKEND_AF_PACKET },
	{ "af_xdp", GW_ETH_BACKEND_AF_XDP },
	{ NULL, 0 },
};
static const struct enum_name gid_sources[] = {
	{ "sa", GW_GID_ROUTE_SA },
	{ "local", GW_GID_ROUTE_LOCAL },
	{ NULL, 0 },
};
static const struct enum_name failover_auths[] = {
	{ "hmac-sha256", GW_FAILOVER_AUTH_HMAC },
	{ "none", GW_FAILOVER_AUTH_NONE },
	{ NULL, 0 },
};
static const struct enum_name log_levels[] = {
	{ "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
	{ "info", LOG_INFO }, { "debug", LOG_DEBUG },     { NULL, 0 },
};
static const struct enum_name log_targets[] = {
	{ "auto", LOG_TARGET_AUTO },
	{ "stderr", LOG_TARGET_STDERR },
	{ "syslog", LOG_TARGET_SYSLOG },
	{ "journal", LOG_TARGET_JOURNAL },
	{ NULL, 0 },
};

static const char *enum_to_name(const struct enum_name *e, int v)
{
	for (; e->name; e++)
		if (e->value == v)
			return e->name;
	return "unknown";
}

const char *gw_ipoib_mode_name(enum gw_ipoib_mode m)
{
	return enum_to_name(ipoib_modes, (int)m);
}

const char *gw_ipoib_backend_name(enum gw_ipoib_backend b)
{
	return enum_to_name(ib_backends, (int)b);
}

const char *gw_eth_backend_name(enum gw_eth_backend b)
{
	return enum_to_name(eth_backends, (int)b);
}

/* ---- The schema ---- */

static check_fn check_ra, check_ra_prefix, check_dhcp;
static check_fn check_gateway, check_ipoib, check_eth, check_route, check_gid_route, check_router,
    check_failover, check_kernel_routes, check_metrics, check_control, check_neighbours, check_punt,
    check_tenant;

#define CFG      struct gw_config
#define IBL      struct gw_ipoib_link_config
#define ETH      struct gw_eth_if_config
#define RT       struct gw_route_config
#define GRT      struct gw_gid_route_config
#define RTR      struct gw_ib_router_config
#define HAA      struct gw_ha_address_config
#define HAG      struct gw_ha_group_config
#define FO       struct gw_failover_config
#define TEN      struct gw_tenant_config
#define SZ(T, m) ((unsigned)sizeof(((T *)0)->m))

/* The number of fields of a table (a schema's count: a hand-written one would drop a key
 * added after it). */
#define N_FIELDS(t) ((unsigned)(sizeof(t) / sizeof((t)[0])))

static const struct field gateway_fields[] = {
	{ "name", T_STR, offsetof(CFG, name), 0, SZ(CFG, name), 0, 0, NULL, "the host name",
	  FL_NONEMPTY, NULL, NULL, "name of this gateway in logs, gwctl and failover" },
	{ "workers", T_UINT, offsetof(CFG, workers), 0, SZ(CFG, workers), 1, GW_WORKERS_MAX, "1",
	  NULL, 0, NULL, NULL,
	  "number of forwarding threads; each IB port opens a queue per worker at start (and "
	  "as many buffers again); a reload changes it live" },
	{ "worker_cpus", T_CPU_LIST, offsetof(CFG, worker_cpus), offsetof(CFG, n_worker_cpus),
	  GW_WORKERS_MAX, 0, 1023, NULL, NULL, 0, NULL, NULL,
	  "CPU to pin each worker to, one per worker; empty: not pinned" },
	{ "busy_poll_us", T_UINT, offsetof(CFG, busy_poll_us), 0, SZ(CFG, busy_poll_us), 1, 1000000,
	  "50", NULL, 0, NULL, NULL,
	  "how long an idle worker keeps polling before it sleeps, in microseconds; a reload "
	  "changes it live" },
	{ "worker_rt_priority", T_UINT, offsetof(CFG, worker_rt_priority), 0,
	  SZ(CFG, worker_rt_priority), 0, 98, "0", NULL, 0, NULL, NULL,
	  "SCHED_FIFO priority of the workers, below failover.rt_priority; 0: normal "
	  "scheduling" },
	{ "router_poll_ms", T_UINT, offsetof(CFG, router_poll_ms), 0, SZ(CFG, router_poll_ms), 0,
	  60000, "1000", NULL, 0, NULL, NULL,
	  "how often each IB router's port is asked of the SA (router failover); 0: never" },
	{ "router_down_after", T_UINT, offsetof(CFG, router_down_after), 0,
	  SZ(CFG, router_down_after), 1, 10, "1", NULL, 0, NULL, NULL,
	  "SA answers in a row without the router's port ACTIVE before it is taken out" },
	{ "user", T_STR, offsetof(CFG, user), 0, SZ(CFG, user), 0, 0, "", NULL, 0, NULL, NULL,
	  "user to run as once started, keeping only CAP_NET_ADMIN, CAP_NET_RAW and "
	  "CAP_IPC_LOCK; \"\": stay as started" },
	{ "group", T_STR, offsetof(CFG, group), 0, SZ(CFG, group), 0, 0, "", NULL, 0, NULL, NULL,
	  "group to run as with user; \"\": the user's login group" },
};
static const struct schema gateway_schema = {
	"gateway", gateway_fields, N_FIELDS(gateway_fields), 0, -1, check_gateway
};

static const struct field control_fields[] = {
	{ "socket", T_STR, offsetof(CFG, socket), 0, SZ(CFG, socket), 0, 0, "/run/ibgw/ibgwd.sock",
	  NULL, FL_NONEMPTY | FL_ABSPATH | FL_SUNPATH, NULL, NULL,
	  "control socket for gwctl (full access)" },
	{ "readonly_socket", T_STR, offsetof(CFG, readonly_socket), 0, SZ(CFG, readonly_socket), 0,
	  0, "", NULL, FL_ABSPATH | FL_SUNPATH, NULL, NULL,
	  "second socket that accepts only show requests; \"\": none" },
	{ "socket_mode", T_MODE, offsetof(CFG, socket_mode), 0, SZ(CFG, socket_mode), 0, 0777,
	  "0660", NULL, 0, NULL, NULL, "permissions of the full-access socket, in octal" },
	{ "socket_group", T_STR, offsetof(CFG, socket_group), 0, SZ(CFG, socket_group), 0, 0, "",
	  NULL, 0, NULL, NULL,
	  "group owning the full-access socket, its members served; \"\": the daemon's group" },
	{ "max_clients", T_UINT, offsetof(CFG, max_clients), 0, SZ(CFG, max_clients), 1, 1024, "64",
	  NULL, 0, NULL, NULL, "connections the full-access socket serves at once" },
	{ "readonly_socket_mode", T_MODE, offsetof(CFG, readonly_socket_mode), 0,
	  SZ(CFG, readonly_socket_mode), 0, 0777, "0660", NULL, 0, NULL, NULL,
	  "permissions of the read-only socket; 0666: every local user may run show" },
	{ "readonly_socket_group", T_STR, offsetof(CFG, readonly_socket_group), 0,
	  SZ(CFG, readonly_socket_group), 0, 0, "", NULL, 0, NULL, NULL,
	  "group owning the read-only socket; \"\": socket_group's" },
	{ "readonly_max_clients", T_UINT, offsetof(CFG, readonly_max_clients), 0,
	  SZ(CFG, readonly_max_clients), 1, 1024, "64", NULL, 0, NULL, NULL,
	  "connections the read-only socket serves at once, apart from the full-access ones" },
};
static const struct schema control_schema = {
	"control", control_fields, N_FIELDS(control_fields), 0, -1, check_control
};

static const struct field logging_fields[] = {
	{ "level", T_ENUM, offsetof(CFG, log_level), 0, 0, 0, 0, "info", NULL, 0, log_levels, NULL,
	  "least important messages logged" },
	{ "target", T_ENUM, offsetof(CFG, log_target), 0, 0, 0, 0, "auto", NULL, 0, log_targets,
	  NULL, "where logs go; auto: the journal under systemd, else stderr" },
};
static const struct schema logging_schema = {
	"logging", logging_fields, N_FIELDS(logging_fields), 0, -1, NULL
};

#define PROXY_FIELDS(T)                                                                            \
	{ "proxy_arp",                                                                             \
	  T_BOOL,                                                                                  \
	  offsetof(T, proxy.arp),                                                                  \
	  0,                                                                                       \
	  0,                                                                                       \
	  0,                                                                                       \
	  0,                                                                                       \
	  "false",                                                                                 \
	  NULL,                                                                                    \
	  0,                                                                                       \
	  NULL,                                                                                    \
	  NULL,                                                                                    \
	  "answer ARP for IPv4 addresses that live on the other side" },                           \
	    { "proxy_nd",                                                                          \
	      T_BOOL,                                                                              \
	      offsetof(T, proxy.nd),                                                               \
	      0,                                                                                   \
	      0,                                                                                   \
	      0,                                                                                   \
	      0,                                                                                   \
	      "false",                                                                             \
	      NULL,                                                                                \
	      0,                                                                                   \
	      NULL,                                                                                \
	      NULL,                                                                                \
	      "answer Neighbor Solicitations for IPv6 addresses on the other side" },              \
	{                                                                                          \
		"proxy_prefixes", T_NET_LIST, offsetof(T, proxy.prefixes),                         \
		    offsetof(T, proxy.n_prefixes), 256, 0, 0, NULL, NULL, 0, NULL, NULL,           \
		    "proxy only for these prefixes; empty: every address learned elsewhere"        \
	}

#define RAC struct gw_ra_config
#define RAP struct gw_ra_prefix_config

static const struct field ra_prefix_fields[] = {
	{ "prefix", T_NET, offsetof(RAP, prefix), 0, 0, 0, 0, NULL, NULL, FL_REQUIRED, NULL, NULL,
	  "IPv6 prefix advertised (Prefix Information option)" },
	{ "on_link", T_BOOL, offsetof(RAP, on_link), 0, 0, 0, 0, "true", NULL, 0, NULL, NULL,
	  "L flag: hosts take the prefix as on the link" },
	{ "autonomous", T_BOOL, offsetof(RAP, autonomous), 0, 0, 0, 0, "true", NULL, 0, NULL, NULL,
	  "A flag: hosts form addresses in it (SLAAC; a /64)" },
	{ "valid_lifetime_s", T_UINT, offsetof(RAP, valid_lifetime_s), 0, SZ(RAP, valid_lifetime_s),
	  0, UINT32_MAX, "2592000", NULL, 0, NULL, NULL,
	  "seconds the prefix stays valid; 4294967295: infinity" },
	{ "preferred_lifetime_s", T_UINT, offsetof(RAP, preferred_lifetime_s), 0,
	  SZ(RAP, preferred_lifetime_s), 0, UINT32_MAX, "604800", NULL, 0, NULL, NULL,
	  "seconds addresses formed in it stay preferred; at most valid_lifetime_s" },
};
static const struct schema ra_prefix_schema = {
	"prefixes", ra_prefix_fields, N_FIELDS(ra_prefix_fields), sizeof(RAP), -1, check_ra_prefix
};

static const struct field ra_fields[] = {
	{ "max_interval_ms", T_UINT, offsetof(RAC, max_interval_ms), 0, SZ(RAC, max_interval_ms),
	  4000, 1800000, "600000", NULL, 0, NULL, NULL,
	  "most time between unsolicited advertisements (MaxRtrAdvInterval)" },
	{ "min_interval_ms", T_UINT, offsetof(RAC, min_interval_ms), 0, SZ(RAC, min_interval_ms),
	  3000, 1350000, NULL, "max_interval_ms / 3, at least 3000", 0, NULL, NULL,
	  "least time between unsolicited advertisements; at most 0.75 max_interval_ms" },
	{ "router_lifetime_s", T_UINT, offsetof(RAC, router_lifetime_s), 0,
	  SZ(RAC, router_lifetime_s), 0, 9000, NULL, "3 max_interval_ms, in seconds", 0, NULL, NULL,
	  "seconds hosts keep the gateway as a default router; 0: not a default router" },
	{ "hop_limit", T_UINT, offsetof(RAC, hop_limit), 0, SZ(RAC, hop_limit), 0, 255, "64", NULL,
	  0, NULL, NULL, "hop limit hosts put on their packets; 0: unspecified" },
	{ "managed", T_BOOL, offsetof(RAC, managed), 0, 0, 0, 0, "false", NULL, 0, NULL, NULL,
	  "M flag: addresses from DHCPv6" },
	{ "other_config", T_BOOL, offsetof(RAC, other_config), 0, 0, 0, 0, "false", NULL, 0, NULL,
	  NULL, "O flag: other configuration from DHCPv6" },
	{ "mtu", T_UINT, offsetof(RAC, mtu), 0, SZ(RAC, mtu), 0, 65520, NULL,
	  "Ethernet: the interface's mtu; IPoIB: 0", 0, NULL, NULL,
	  "MTU option; 0: none; 1280 up to the interface's mtu" },
	{ "reachable_time_ms", T_UINT, offsetof(RAC, reachable_time_ms), 0,
	  SZ(RAC, reachable_time_ms), 0, 3600000, "0", NULL, 0, NULL, NULL,
	  "hosts' neighbour reachable time; 0: unspecified" },
	{ "retrans_timer_ms", T_UINT, offsetof(RAC, retrans_timer_ms), 0, SZ(RAC, retrans_timer_ms),
	  0, UINT32_MAX, "0", NULL, 0, NULL, NULL,
	  "hosts' time between Neighbor Solicitations; 0: unspecified" },
	{ "prefixes", T_LIST, offsetof(RAC, prefixes), offsetof(RAC, n_prefixes),
	  GW_RA_MAX_PREFIXES, 0, 0, NULL, NULL, FL_FIXED, NULL, &ra_prefix_schema,
	  "prefixes advertised; none: the interface's IPv6 addresses' prefixes (/64: "
	  "autonomous)" },
};
static const struct schema ra_schema = {
	"router_advertisements", ra_fields, N_FIELDS(ra_fields), 0, -1, check_ra
};

#define DHR struct gw_dhcp_relay_config

static const struct field dhcp_fields[] = {
	{ "servers", T_VIA, offsetof(DHR, servers), offsetof(DHR, n_servers), GW_DHCP_MAX_SERVERS,
	  0, 0, NULL, NULL, FL_REQUIRED, NULL, NULL,
	  "servers each client message is relayed to: IPv4 ones relay DHCPv4, IPv6 ones "
	  "DHCPv6" },
	{ "option82", T_BOOL, offsetof(DHR, option82), 0, 0, 0, 0, "false", NULL, 0, NULL, NULL,
	  "append the Relay Agent Information option (RFC 3046): circuit id the interface name" },
	{ "remote_id", T_STR, offsetof(DHR, remote_id), 0, SZ(DHR, remote_id), 0, 0, "", NULL,
	  FL_OMIT_EMPTY, NULL, NULL, "option 82's remote id sub-option; \"\": none" },
	{ "max_hops", T_UINT, offsetof(DHR, max_hops), 0, SZ(DHR, max_hops), 1, 16, "4", NULL, 0,
	  NULL, NULL, "client messages that crossed this many relays already are dropped" },
};
static const struct schema dhcp_schema = { "dhcp_relay", dhcp_fields, N_FIELDS(dhcp_fields), 0,
					   -1,           check_dhcp };

#define DHCP_FIELD(T)                                                                              \
	{                                                                                          \
		"dhcp_relay", T_SECTION, offsetof(T, dhcp), offsetof(T, dhcp.enabled), 0, 0, 0,    \
		    NULL, NULL, FL_OPTIONAL, NULL, &dhcp_schema,                                   \
		    "relay DHCP from hosts here to servers elsewhere; absent: none"                \
	}

#define MCC struct gw_mcast_config

static const struct field mcast_fields[] = {
	{ "rate_limit_pps", T_UINT, offsetof(MCC, rate_limit_pps), 0, SZ(MCC, rate_limit_pps), 0,
	  10000000, "1000", NULL, 0, NULL, NULL,
	  "packets per second of one group forwarded into this interface; 0: no limit" },
	{ "querier", T_BOOL, offsetof(MCC, querier), 0, 0, 0, 0, "true", NULL, 0, NULL, NULL,
	  "send IGMPv3 / MLDv2 general queries here (the lowest address querier wins)" },
	{ "query_interval_s", T_UINT, offsetof(MCC, query_interval_s), 0, SZ(MCC, query_interval_s),
	  2, 3600, "125", NULL, 0, NULL, NULL, "seconds between general queries" },
	{ "robustness", T_UINT, offsetof(MCC, robustness), 0, SZ(MCC, robustness), 1, 7, "2", NULL,
	  0, NULL, NULL,
	  "robustness variable (RFC 3376 8.1): a membership lasts this many query "
	  "intervals plus 10 s" },
};
static const struct schema mcast_schema = {
	"ip_multicast", mcast_fields, N_FIELDS(mcast_fields), 0, -1, NULL
};

#define MCAST_FIELD(T)                                                                             \
	{                                                                                          \
		"ip_multicast", T_SECTION, offsetof(T, mcast), offsetof(T, mcast.enabled), 0, 0,   \
		    0, NULL, NULL, FL_OPTIONAL, NULL, &mcast_schema,                               \
		    "forward IP multicast to and from here (IGMP / MLD); absent: none"             \
	}

#define RA_FIELD(T)                                                                                \
	{                                                                                          \
		"router_advertisements", T_SECTION, offsetof(T, ra), offsetof(T, ra.enabled), 0,   \
		    0, 0, NULL, NULL, FL_OPTIONAL, NULL, &ra_schema,                               \
		    "send router advertisements and answer solicitations here; absent: none"       \
	}

/* A link's, interface's or route's tenant: "" is the default one, printed as nothing. */
#define TENANT_FIELD(T, what)                                                                      \
	{                                                                                          \
		"tenant", T_STR, offsetof(T, tenant), 0, SZ(T, tenant), 0, 0, NULL,                \
		    "the default tenant", FL_OMIT_EMPTY | FL_NAME, NULL, NULL, what                \
	}

static const struct field tenant_fields[] = {
	{ "name", T_STR, offsetof(TEN, name), 0, SZ(TEN, name), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL,
	  "name of the tenant, used by links, interfaces and routes (not \"default\")" },
	{ "export_table", T_UINT, offsetof(TEN, export_table), 0, SZ(TEN, export_table), 0,
	  UINT32_MAX, "0", NULL, 0, NULL, NULL,
	  "kernel table that receives this tenant's routes (needs kernel_routes); 0: none" },
	{ "import_table", T_UINT, offsetof(TEN, import_table), 0, SZ(TEN, import_table), 0,
	  UINT32_MAX, "0", NULL, 0, NULL, NULL,
	  "kernel table whose routes are imported into this tenant (needs kernel_routes); 0: "
	  "none" },
};
static const struct schema tenant_schema = {
	"tenants",   tenant_fields,      N_FIELDS(tenant_fields),
	sizeof(TEN), offsetof(TEN, pos), check_tenant
};

static const struct field ipoib_fields[] = {
	{ "name", T_STR, offsetof(IBL, name), 0, SZ(IBL, name), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL, "name of the link, used by routes and failover" },
	TENANT_FIELD(IBL, "tenant whose routing table the link's packets use"),
	{ "backend", T_ENUM, offsetof(IBL, backend), 0, 0, 0, 0, "verbs", NULL, 0, ib_backends,
	  NULL, "verbs: an HCA port (on the simulated rack, the verbs shim's)" },
	{ "device", T_STR, offsetof(IBL, device), 0, SZ(IBL, device), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL,
	  "HCA (mlx5_0), or on the simulated rack the node (gw1)" },
	{ "port", T_UINT, offsetof(IBL, port), 0, SZ(IBL, port), 1, 254, "1", NULL, 0, NULL, NULL,
	  "HCA port number" },
	{ "backup_port", T_UINT, offsetof(IBL, backup_port), 0, SZ(IBL, backup_port), 0, 254, "0",
	  NULL, FL_OMIT_EMPTY, NULL, NULL,
	  "second port of the same HCA the link moves to when its port goes down; 0: none" },
	{ "pkey", T_PKEY, offsetof(IBL, pkey), 0, SZ(IBL, pkey), 0x0001, 0xffff, "0xffff", NULL,
	  FL_HEX, NULL, NULL, "partition key; the full-membership bit is always set" },
	{ "mode", T_ENUM, offsetof(IBL, mode), 0, 0, 0, 0, "datagram", NULL, 0, ipoib_modes, NULL,
	  "IPoIB mode: datagram (UD only) or connected (RC to peers that offer it)" },
	{ "mtu", T_UINT, offsetof(IBL, mtu), 0, SZ(IBL, mtu), 68, 65520, NULL,
	  "2044 datagram, 65520 connected", 0, NULL, NULL,
	  "IP MTU; datagram at most 4092 (IB MTU - 4)" },
	{ "mcast_hop_limit", T_UINT, offsetof(IBL, mcast_hop_limit), 0, SZ(IBL, mcast_hop_limit), 1,
	  255, NULL, "1", FL_OMIT_EMPTY, NULL, NULL,
	  "GRH hop limit of multicast sends (ARP, ND); 1: this subnet only, 1 + n: across n "
	  "IB routers that joined the group" },
	{ "addresses", T_IFADDR_LIST, offsetof(IBL, addresses), offsetof(IBL, n_addresses), 256, 0,
	  0, NULL, NULL, 0, NULL, NULL, "addresses of the gateway on this link, with length" },
	PROXY_FIELDS(IBL),
	RA_FIELD(IBL),
	DHCP_FIELD(IBL),
	MCAST_FIELD(IBL),
};
_Static_assert(N_FIELDS(ipoib_fields) <= MAX_FIELDS, "walk_map holds MAX_FIELDS values");
static const struct schema ipoib_schema = { "ipoib_links",          ipoib_fields,
					    N_FIELDS(ipoib_fields), sizeof(IBL),
					    offsetof(IBL, pos),     check_ipoib };

static const struct field eth_fields[] = {
	{ "name", T_STR, offsetof(ETH, name), 0, SZ(ETH, name), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL, "name of the interface, used by routes and failover" },
	TENANT_FIELD(ETH, "tenant whose routing table the interface's packets use"),
	{ "backend", T_ENUM, offsetof(ETH, backend), 0, 0, 0, 0, "af_packet", NULL, 0, eth_backends,
	  NULL,
	  "af_packet: a packet socket per worker, a copy of each frame (the kernel still sees "
	  "every frame, GSO frames whole); af_xdp: an XDP program hands the interface's VLAN to "
	  "AF_XDP sockets (zero-copy where the driver has it), the kernel no longer sees "
	  "those frames, one af_xdp interface per device" },
	{ "device", T_STR, offsetof(ETH, device), 0, SZ(ETH, device), 0, 0, NULL, "the name",
	  FL_NAME | FL_IFNAME, NULL, NULL, "kernel network device" },
	{ "vlan", T_UINT, offsetof(ETH, vlan), 0, SZ(ETH, vlan), 0, 4094, "0", NULL, 0, NULL, NULL,
	  "802.1Q VLAN ID; 0: untagged" },
	{ "mtu", T_UINT, offsetof(ETH, mtu), 0, SZ(ETH, mtu), 68, 9216, "1500", NULL, 0, NULL, NULL,
	  "IP MTU" },
	{ "addresses", T_IFADDR_LIST, offsetof(ETH, addresses), offsetof(ETH, n_addresses), 256, 0,
	  0, NULL, NULL, 0, NULL, NULL, "addresses of the gateway on this interface" },
	PROXY_FIELDS(ETH),
	RA_FIELD(ETH),
	DHCP_FIELD(ETH),
	MCAST_FIELD(ETH),
};
_Static_assert(N_FIELDS(eth_fields) <= MAX_FIELDS, "walk_map holds MAX_FIELDS values");
static const struct schema eth_schema = { "ethernet_interfaces", eth_fields,
					  N_FIELDS(eth_fields),  sizeof(ETH),
					  offsetof(ETH, pos),    check_eth };

static const struct field route_fields[] = {
	{ "prefix", T_NET, offsetof(RT, prefix), 0, 0, 0, 0, NULL, NULL, FL_REQUIRED, NULL, NULL,
	  "destination prefix" },
	{ "via", T_VIA, offsetof(RT, via), offsetof(RT, n_via), GW_ROUTE_MAX_NEXTHOPS, 0, 0, NULL,
	  NULL, 0, NULL, NULL, "next hop, or a list of them (ECMP); none: directly connected" },
	{ "dev", T_STR, offsetof(RT, dev), 0, SZ(RT, dev), 0, 0, NULL, NULL,
	  FL_OMIT_EMPTY | FL_NAME, NULL, NULL, "link or interface to use" },
	{ "metric", T_UINT, offsetof(RT, metric), 0, SZ(RT, metric), 0, UINT32_MAX, "0", NULL, 0,
	  NULL, NULL, "lower wins; a backup route for the same prefix needs another metric" },
	TENANT_FIELD(RT, "tenant whose table holds the route; a dev of another tenant leaks "
			 "the prefix into it"),
};
static const struct schema route_schema = { "routes",   route_fields,      N_FIELDS(route_fields),
					    sizeof(RT), offsetof(RT, pos), check_route };

static const struct field router_fields[] = {
	{ "lid", T_UINT, offsetof(RTR, lid), 0, SZ(RTR, lid), 0x0001, 0xbfff, NULL, NULL,
	  FL_REQUIRED | FL_HEX, NULL, NULL, "LID of the IB router port" },
	{ "sl", T_UINT, offsetof(RTR, sl), 0, SZ(RTR, sl), 0, 15, "0", NULL, 0, NULL, NULL,
	  "service level" },
	{ "mtu", T_UINT, offsetof(RTR, mtu), 0, SZ(RTR, mtu), 256, 4096, "2048", NULL, 0, NULL,
	  NULL, "IB MTU of the path: 256, 512, 1024, 2048 or 4096" },
	{ "hop_limit", T_UINT, offsetof(RTR, hop_limit), 0, SZ(RTR, hop_limit), 1, 255, "64", NULL,
	  0, NULL, NULL, "GRH hop limit" },
};
static const struct schema router_schema = {
	"routers", router_fields, N_FIELDS(router_fields), sizeof(RTR), -1, check_router
};

static const struct field gid_route_fields[] = {
	{ "prefix", T_GID_NET, offsetof(GRT, prefix), 0, 0, 0, 0, NULL, NULL, FL_REQUIRED, NULL,
	  NULL, "GID prefix of the remote subnet" },
	{ "source", T_ENUM, offsetof(GRT, source), 0, 0, 0, 0, "sa", NULL, 0, gid_sources, NULL,
	  "sa: ask the SA for paths; local: use the routers below" },
	{ "link", T_STR, offsetof(GRT, link), 0, SZ(GRT, link), 0, 0, NULL, "the first IPoIB link",
	  FL_NAME, NULL, NULL, "IPoIB link to reach the routers through" },
	{ "routers", T_LIST, offsetof(GRT, routers), offsetof(GRT, n_routers),
	  GW_GID_ROUTE_MAX_ROUTERS, 0, 0, NULL, NULL, FL_FIXED, NULL, &router_schema,
	  "IB routers, tried in order" },
};
static const struct schema gid_route_schema = {
	"gid_routes", gid_route_fields,   N_FIELDS(gid_route_fields),
	sizeof(GRT),  offsetof(GRT, pos), check_gid_route
};

static const struct field ha_addr_fields[] = {
	{ "address", T_IFADDR, offsetof(HAA, address), 0, 0, 0, 0, NULL, NULL, FL_REQUIRED, NULL,
	  NULL, "service address with prefix length" },
	{ "dev", T_STR, offsetof(HAA, dev), 0, SZ(HAA, dev), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL, "link or interface that carries it" },
};
static const struct schema ha_addr_schema = {
	"addresses", ha_addr_fields, N_FIELDS(ha_addr_fields), sizeof(HAA), -1, NULL
};

static const struct field group_fields[] = {
	{ "name", T_STR, offsetof(HAG, name), 0, SZ(HAG, name), 0, 0, NULL, NULL,
	  FL_REQUIRED | FL_NAME, NULL, NULL, "name of the group" },
	{ "priority", T_UINT, offsetof(HAG, priority), 0, SZ(HAG, priority), 1, 254, NULL,
	  "failover.priority", 0, NULL, NULL, "higher wins mastership of this group" },
	{ "addresses", T_LIST, offsetof(HAG, addresses), offsetof(HAG, n_addresses), 256, 0, 0,
	  NULL, NULL, 0, NULL, &ha_addr_schema, "addresses that move with the group" },
};
/* A group's priority left at 0 means "not given": check_failover fills it in once the
 * section's own priority is known, wherever it is written in the section. */
static const struct schema group_schema = { "groups",    group_fields,       N_FIELDS(group_fields),
					    sizeof(HAG), offsetof(HAG, pos), NULL };

static const struct field failover_fields[] = {
	{ "priority", T_UINT, offsetof(FO, priority), 0, SZ(FO, priority), 1, 254, "100", NULL, 0,
	  NULL, NULL, "higher wins; the default for every group" },
	{ "preempt", T_BOOL, offsetof(FO, preempt), 0, 0, 0, 0, "true", NULL, 0, NULL, NULL,
	  "take mastership back from a lower-priority peer" },
	{ "preempt_delay_ms", T_UINT, offsetof(FO, preempt_delay_ms), 0, SZ(FO, preempt_delay_ms),
	  0, 3600000, "0", NULL, 0, NULL, NULL, "wait this long before preempting" },
	{ "heartbeat_interval_ms", T_UINT, offsetof(FO, heartbeat_interval_ms), 0,
	  SZ(FO, heartbeat_interval_ms), 10, 10000, "10", NULL, 0, NULL, NULL,
	  "interval between heartbeats on each path" },
	{ "dead_interval_ms", T_UINT, offsetof(FO, dead_interval_ms), 0, SZ(FO, dead_interval_ms),
	  30, 60000, "40", NULL, 0, NULL, NULL,
	  "peer declared dead after this long without heartbeats; at least 3 heartbeats" },
	{ "rt_priority", T_UINT, offsetof(FO, rt_priority), 0, SZ(FO, rt_priority), 0, 99, "10",
	  NULL, 0, NULL, NULL,
	  "SCHED_FIFO priority of the heartbeat thread; 0: normal scheduling" },
	{ "auth", T_ENUM, offsetof(FO, auth), 0, 0, 0, 0, "hmac-sha256", NULL, 0, failover_auths,
	  NULL, "heartbeats and sync signed with key_file; none: unauthenticated (warned)" },
	{ "key_file", T_STR, offsetof(FO, key_file), 0, SZ(FO, key_file), 0, 0, "", NULL,
	  FL_ABSPATH, NULL, NULL,
	  "the pair's shared secret (16..1024 octets, mode 0600); required unless auth none" },
	{ "paths", T_NAME_LIST, offsetof(FO, paths), offsetof(FO, n_paths), 64, 0, 0, NULL, NULL, 0,
	  NULL, NULL, "links and interfaces carrying heartbeats; empty: all" },
	{ "peer_addresses", T_ADDR_LIST, offsetof(FO, peer_addresses),
	  offsetof(FO, n_peer_addresses), 64, 0, 0, NULL, NULL, 0, NULL, NULL,
	  "the peer's address on each path, in the order of paths" },
	{ "tiebreaker_address", T_ADDR, offsetof(FO, tiebreaker), offsetof(FO, has_tiebreaker), 0,
	  0, 0, NULL, NULL, FL_OPTIONAL, NULL, NULL,
	  "pinged when the peer is unreachable on every path; none: not used" },
	{ "groups", T_LIST, offsetof(FO, groups), offsetof(FO, n_groups), 64, 0, 0, NULL, NULL, 0,
	  NULL, &group_schema, "groups of service addresses" },
};
_Static_assert(N_FIELDS(failover_fields) <= MAX_FIELDS, "walk_map holds MAX_FIELDS values");
static const struct schema failover_schema = {
	"failover", failover_fields, N_FIELDS(failover_fields), 0, -1, check_failover
};

#define KRT struct gw_kernel_routes_config

static const struct field kernel_routes_fields[] = {
	{ "export_table", T_UINT, offsetof(KRT, export_table), 0, SZ(KRT, export_table), 0,
	  UINT32_MAX, "100", NULL, 0, NULL, NULL,
	  "kernel table that receives the IB-side routes; 0: no export" },
	{ "protocol", T_UINT, offsetof(KRT, protocol), 0, SZ(KRT, protocol), 5, 255, "250", NULL, 0,
	  NULL, NULL, "rtnetlink protocol of the exported routes (ip route ... proto N)" },
	{ "metric", T_UINT, offsetof(KRT, metric), 0, SZ(KRT, metric), 0, UINT32_MAX, "0", NULL, 0,
	  NULL, NULL, "kernel metric of the exported routes; 0: the kernel's default" },
	{ "import_table", T_UINT, offsetof(KRT, import_table), 0, SZ(KRT, import_table), 0,
	  UINT32_MAX, "0", NULL, 0, NULL, NULL,
	  "kernel table whose routes are imported (source kernel); 0: none" },
};
static const struct schema kernel_routes_schema = {
	"kernel_routes",    kernel_routes_fields, N_FIELDS(kernel_routes_fields), 0, -1,
	check_kernel_routes
};

static const struct field metrics_fields[] = {
	{ "listen", T_STR, offsetof(struct gw_metrics_config, listen), 0,
	  SZ(struct gw_metrics_config, listen), 0, 0, "", NULL, 0, NULL, NULL,
	  "HTTP address for Prometheus (127.0.0.1:9464, [::1]:9464); \"\": none" },
	{ "status_page", T_BOOL, offsetof(struct gw_metrics_config, status_page), 0, 0, 0, 0,
	  "false", NULL, 0, NULL, NULL,
	  "also serve a read-only status page (/status, /status.json) on that address" },
};
static const struct schema metrics_schema = {
	"metrics", metrics_fields, N_FIELDS(metrics_fields), 0, -1, check_metrics
};

#define NB     struct gw_neigh_config
#define NB_MAX 4194304 /* table/neigh.c's largest gc_thresh3 */

static const struct field neighbour_fields[] = {
	{ "gc_thresh1", T_UINT, offsetof(NB, gc_thresh1), 0, SZ(NB, gc_thresh1), 1, NB_MAX, "128",
	  NULL, 0, NULL, NULL, "below this many entries the periodic GC removes only FAILED ones" },
	{ "gc_thresh2", T_UINT, offsetof(NB, gc_thresh2), 0, SZ(NB, gc_thresh2), 1, NB_MAX, "512",
	  NULL, 0, NULL, NULL,
	  "from this many, creating an entry forces a GC (at most every 5 s)" },
	{ "gc_thresh3", T_UINT, offsetof(NB, gc_thresh3), 0, SZ(NB, gc_thresh3), 16, NB_MAX, "1024",
	  NULL, 0, NULL, NULL,
	  "most entries per table; a newcomer then evicts an idle one or is refused" },
	{ "max_unresolved", T_UINT, offsetof(NB, max_unresolved), 0, SZ(NB, max_unresolved), 1,
	  NB_MAX, NULL, "gc_thresh3 / 4", 0, NULL, NULL,
	  "most INCOMPLETE entries; a newer resolution evicts the oldest; below gc_thresh3" },
	{ "unres_qlen", T_UINT, offsetof(NB, unres_qlen), 0, SZ(NB, unres_qlen), 1, 1024, "3", NULL,
	  0, NULL, NULL, "packets parked per unresolved neighbour; overflow drops the oldest" },
	{ "base_reachable_time_ms", T_UINT, offsetof(NB, base_reachable_time_ms), 0,
	  SZ(NB, base_reachable_time_ms), 1000, 3600000, "30000", NULL, 0, NULL, NULL,
	  "a confirmed neighbour stays REACHABLE a random 0.5 to 1.5 times this" },
};
static const struct schema neighbour_schema = {
	"neighbours", neighbour_fields, N_FIELDS(neighbour_fields), 0, -1, check_neighbours
};

#define PU            struct gw_punt_config
#define PCL           struct gw_punt_class_config
#define PUNT_POOL_MAX 4096    /* messages per pool: 2 pools of ~4.3 KB messages per worker */
#define PUNT_RATE_MAX 1000000 /* punts/s; the buckets count whole nanoseconds per punt */

/* One class's limits, with its defaults (the engine's fwd_punt_defaults). */
#define PUNT_CLASS_FIELDS(src_rate, src_burst, wk_rate, wk_burst)                                  \
	{ "per_source_rate",                                                                       \
	  T_UINT,                                                                                  \
	  offsetof(PCL, per_source_rate),                                                          \
	  0,                                                                                       \
	  SZ(PCL, per_source_rate),                                                                \
	  0,                                                                                       \
	  PUNT_RATE_MAX,                                                                           \
	  src_rate,                                                                                \
	  NULL,                                                                                    \
	  0,                                                                                       \
	  NULL,                                                                                    \
	  NULL,                                                                                    \
	  "punts a second from one source (MAC, IB LID and QPN, or IP address); 0: no limit" },    \
	    { "per_source_burst",                                                                  \
	      T_UINT,                                                                              \
	      offsetof(PCL, per_source_burst),                                                     \
	      0,                                                                                   \
	      SZ(PCL, per_source_burst),                                                           \
	      1,                                                                                   \
	      PUNT_RATE_MAX,                                                                       \
	      src_burst,                                                                           \
	      NULL,                                                                                \
	      0,                                                                                   \
	      NULL,                                                                                \
	      NULL,                                                                                \
	      "punts one source may send at once, above its rate" },                               \
	    { "per_worker_rate",                                                                   \
	      T_UINT,                                                                              \
	      offsetof(PCL, per_worker_rate),                                                      \
	      0,                                                                                   \
	      SZ(PCL, per_worker_rate),                                                            \
	      0,                                                                                   \
	      PUNT_RATE_MAX,                                                                       \
	      wk_rate,                                                                             \
	      NULL,                                                                                \
	      0,                                                                                   \
	      NULL,                                                                                \
	      NULL,                                                                                \
	      "punts a second of this class from each worker, all sources; 0: no limit" },         \
	{                                                                                          \
		"per_worker_burst", T_UINT, offsetof(PCL, per_worker_burst), 0,                    \
		    SZ(PCL, per_worker_burst), 1, PUNT_RATE_MAX, wk_burst, NULL, 0, NULL, NULL,    \
		    "punts of this class each worker may send at once, above its rate"             \
	}

static const struct field punt_neigh_fields[] = { PUNT_CLASS_FIELDS("100", "200", "5000", "2000") };
static const struct field punt_unres_fields[] = { PUNT_CLASS_FIELDS("100", "200", "1000", "1000") };
static const struct field punt_local_fields[] = { PUNT_CLASS_FIELDS("100", "200", "1000", "500") };
static const struct field punt_mcast_fields[] = { PUNT_CLASS_FIELDS("5000", "1000", "20000",
								    "2000") };
static const struct schema punt_neigh_schema = {
	"neighbour", punt_neigh_fields, N_FIELDS(punt_neigh_fields), 0, -1, NULL
};
static const struct schema punt_unres_schema = {
	"unresolved", punt_unres_fields, N_FIELDS(punt_unres_fields), 0, -1, NULL
};
static const struct schema punt_local_schema = {
	"local", punt_local_fields, N_FIELDS(punt_local_fields), 0, -1, NULL
};
static const struct schema punt_mcast_schema = {
	"mcast", punt_mcast_fields, N_FIELDS(punt_mcast_fields), 0, -1, NULL
};

static const struct field punt_fields[] = {
	{ "msg_pool", T_UINT, offsetof(PU, msg_pool), 0, SZ(PU, msg_pool), 16, PUNT_POOL_MAX, "256",
	  NULL, 0, NULL, NULL,
	  "messages per worker for punts, and as many for the control thread's sends to it" },
	{ "park_max", T_UINT, offsetof(PU, park_max), 0, SZ(PU, park_max), 1, PUNT_POOL_MAX / 4,
	  NULL, "msg_pool / 8", 0, NULL, NULL,
	  "packets a worker parks waiting for Ethernet neighbours; at most msg_pool / 4" },
	{ "neighbour", T_SECTION, offsetof(PU, neighbour), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &punt_neigh_schema, "ARP and ND, Ethernet and IPoIB, asked and answered" },
	{ "unresolved", T_SECTION, offsetof(PU, unresolved), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &punt_unres_schema, "packets to a next hop not resolved yet" },
	{ "local", T_SECTION, offsetof(PU, local), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &punt_local_schema, "other IP to the gateway's addresses (echo requests...)" },
	{ "mcast", T_SECTION, offsetof(PU, mcast), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &punt_mcast_schema, "IP multicast to forward, where ip_multicast is on" },
};
static const struct schema punt_schema = { "punt", punt_fields, N_FIELDS(punt_fields),
					   0,      -1,          check_punt };

static const struct field top_fields[] = {
	{ "gateway", T_SECTION, 0, 0, 0, 0, 0, NULL, NULL, 0, NULL, &gateway_schema,
	  "the box itself" },
	{ "control", T_SECTION, 0, 0, 0, 0, 0, NULL, NULL, 0, NULL, &control_schema,
	  "control sockets for gwctl" },
	{ "logging", T_SECTION, 0, 0, 0, 0, 0, NULL, NULL, 0, NULL, &logging_schema, "logging" },
	{ "tenants", T_LIST, offsetof(CFG, tenants), offsetof(CFG, n_tenants), GW_TENANTS_MAX - 1,
	  0, 0, NULL, NULL, FL_OMIT_EMPTY, NULL, &tenant_schema,
	  "routing tables of their own for the links and interfaces that name them; none: one "
	  "table" },
	{ "ipoib_links", T_LIST, offsetof(CFG, ipoib_links), offsetof(CFG, n_ipoib_links), 64, 0, 0,
	  NULL, NULL, 0, NULL, &ipoib_schema, "IPoIB links (one per HCA port and P_Key)" },
	{ "ethernet_interfaces", T_LIST, offsetof(CFG, eth_ifs), offsetof(CFG, n_eth_ifs), 64, 0, 0,
	  NULL, NULL, 0, NULL, &eth_schema, "Ethernet interfaces" },
	{ "routes", T_LIST, offsetof(CFG, routes), offsetof(CFG, n_routes), 4096, 0, 0, NULL, NULL,
	  0, NULL, &route_schema, "static IPv4 and IPv6 routes" },
	{ "gid_routes", T_LIST, offsetof(CFG, gid_routes), offsetof(CFG, n_gid_routes), 256, 0, 0,
	  NULL, NULL, 0, NULL, &gid_route_schema, "routes to other IB subnets through IB routers" },
	{ "failover", T_SECTION, offsetof(CFG, failover), offsetof(CFG, failover.enabled), 0, 0, 0,
	  NULL, NULL, FL_OPTIONAL, NULL, &failover_schema,
	  "failover pair; present: enabled, absent: a single gateway" },
	{ "kernel_routes", T_SECTION, offsetof(CFG, kernel_routes),
	  offsetof(CFG, kernel_routes.enabled), 0, 0, 0, NULL, NULL, FL_OPTIONAL, NULL,
	  &kernel_routes_schema, "routes exchanged with kernel tables for BIRD/FRR; absent: none" },
	{ "metrics", T_SECTION, offsetof(CFG, metrics), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &metrics_schema, "Prometheus metrics endpoint" },
	{ "neighbours", T_SECTION, offsetof(CFG, neighbours), 0, 0, 0, 0, NULL, NULL, 0, NULL,
	  &neighbour_schema, "limits of every neighbour table (ARP/ND cache); at start only" },
	{ "punt", T_SECTION, offsetof(CFG, punt), 0, 0, 0, 0, NULL, NULL, 0, NULL, &punt_schema,
	  "packets the workers hand to the control thread: pools, rate limits; at start only" },
};
_Static_assert(N_FIELDS(top_fields) <= MAX_FIELDS, "walk_map holds MAX_FIELDS values");
static const struct schema top_schema = { "top level", top_fields, N_FIELDS(top_fields),
					  sizeof(CFG), -1,         NULL };

/* ---- Small helpers ---- */

static void *at(void *base, size_t off)
{
	return (char *)base + off;
}

static const void *cat(const void *base, size_t off)
{
	return (const char *)base + off;
}

static void *get_ptr(const void *base, size_t off)
{
	void *p;

	memcpy(&p, cat(base, off), sizeof(p));
	return p;
}

static void set_ptr(void *base, size_t off, void *p)
{
	memcpy(at(base, off), &p, sizeof(p));
}

static unsigned get_count(const void *base, size_t off)
{
	unsigned n;

	memcpy(&n, cat(base, off), sizeof(n));
	return n;
}

static void set_count(void *base, size_t off, unsigned n)
{
	memcpy(at(base, off), &n, sizeof(n));
}

static uint64_t get_uint(const void *p, unsigned size)
{
	switch (size) {
	case 1:
		return *(const uint8_t *)p;
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return v;
	}
	default: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	}
}

static void put_uint(void *p, unsigned size, uint64_t v)
{
	if (size == 1) {
		*(uint8_t *)p = (uint8_t)v;
	} else if (size == 2) {
		uint16_t x = (uint16_t)v;
		memcpy(p, &x, 2);
	} else {
		uint32_t x = (uint32_t)v;
		memcpy(p, &x, 4);
	}
}

/* Edit distance (Levenshtein), capped: keys are short. */
static unsigned edit_distance(const char *a, const char *b)
{
	unsigned row[64], la = (unsigned)strlen(a), lb = (unsigned)strlen(b);

	if (la >= 63 || lb >= 63)
		return 99;
	for (unsigned j = 0; j <= lb; j++)
		row[j] = j;
	for (unsigned i = 1; i <= la; i++) {
		unsigned diag = row[0];

		row[0] = i;
		for (unsigned j = 1; j <= lb; j++) {
			unsigned up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

/* The closest candidate, if close enough to be a likely typo. */
static const char *closest(const char *word, const char *const *cands, unsigned n)
{
	const char *best = NULL;
	unsigned bd = 99;

	for (unsigned i = 0; i < n; i++) {
		unsigned d = edit_distance(word, cands[i]), len = (unsigned)strlen(cands[i]);
		unsigned limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;

		if (d <= limit && d < bd) {
			bd = d;
			best = cands[i];
		}
	}
	return best;
}

/* A value as quoted in messages: at most 40 characters, control characters as '?'. */
static const char *show(const char *s, char *buf, size_t len)
{
	size_t i = 0, n = strlen(s);

	for (; i < n && i < 40 && i + 4 < len; i++)
		buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	if (i < n && i + 4 <= len) {
		/* do not cut a UTF-8 sequence in half */
		while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80)
			i--;
		memcpy(buf + i, "...", 4);
	} else {
		buf[i] = '\0';
	}
	return buf;
}

static const char *describe(const struct gw_ynode *v, char *buf, size_t len)
{
	char tmp[64];

	switch (v->kind) {
	case GW_YN_NULL:
		return "nothing";
	case GW_YN_SEQ:
		return "a list";
	case GW_YN_MAP:
		return "a mapping";
	default:
		snprintf(buf, len, "'%s'", show(v->str, tmp, sizeof(tmp)));
		return buf;
	}
}

/* An error about a value: "PATH: message" at the value's position. */
static void verr(struct load *L, const struct gw_ynode *at_node, const char *path, const char *fmt,
		 ...) __attribute__((format(printf, 4, 5)));
static void verr(struct load *L, const struct gw_ynode *at_node, const char *path, const char *fmt,
		 ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	gw_cfg_err(L->e, at_node->line, at_node->col, "%s: %s", path, msg);
}

static size_t pos_slot(const struct load *L, const void *p)
{
	size_t i =
	    (size_t)(((uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull) >> 32) & (L->idx_cap - 1);

	while (L->pos_idx[i] && L->pos[L->pos_idx[i] - 1].p != p)
		i = (i + 1) & (L->idx_cap - 1);
	return i;
}

/* The index at twice the records' capacity: rebuilt as the array grows. */
static bool pos_index(struct load *L)
{
	size_t cap = L->cap_pos * 2;
	uint32_t *idx = calloc(cap, sizeof(*idx));

	if (!idx)
		return false;
	free(L->pos_idx);
	L->pos_idx = idx;
	L->idx_cap = cap;
	for (size_t k = 0; k < L->n_pos; k++)
		L->pos_idx[pos_slot(L, L->pos[k].p)] = (uint32_t)(k + 1);
	return true;
}

static void record(struct load *L, const void *p, const struct gw_ynode *v)
{
	if (L->defaults)
		return;
	if (L->n_pos == L->cap_pos) {
		size_t cap = L->cap_pos ? L->cap_pos * 2 : 64;
		struct posrec *r = cap <= UINT32_MAX / 2 ? realloc(L->pos, cap * sizeof(*r)) : NULL;

		if (!r) {
			L->e->oom = true;
			return;
		}
		L->pos = r;
		L->cap_pos = cap;
		if (!pos_index(L)) {
			L->e->oom = true;
			return;
		}
	}
	L->pos[L->n_pos] = (struct posrec){ p, v->line, v->col };
	L->pos_idx[pos_slot(L, p)] = (uint32_t)(++L->n_pos);
}

/* Where the value stored at p came from, or NULL (a default, or a value refused). */
static const struct posrec *pos_of(struct load *L, const void *p)
{
	size_t i;

	if (!L->n_pos)
		return NULL;
	i = pos_slot(L, p);
	return L->pos_idx[i] ? &L->pos[L->pos_idx[i] - 1] : NULL;
}

static bool recorded(struct load *L, const void *p)
{
	return pos_of(L, p) != NULL;
}

static int field_index(const struct schema *s, const char *key)
{
	for (unsigned i = 0; i < s->n; i++)
		if (strcmp(s->f[i].key, key) == 0)
			return (int)i;
	return -1;
}

static const struct gw_ynode *val_of(const struct schema *s, const struct gw_ynode *const *vals,
				     const char *key)
{
	int i = field_index(s, key);

	return i < 0 ? NULL : vals[i];
}

/* A value is usable by a check if it was not given (the default) or given and valid. */
static bool usable(struct load *L, const struct gw_ynode *given, const void *p)
{
	return !given || recorded(L, p);
}

/* ---- Scalar parsers ---- */

static const char *expect_scalar(struct load *L, const struct gw_ynode *v, const char *path,
				 const char *what)
{
	char buf[64];

	if (v->kind != GW_YN_SCALAR) {
		verr(L, v, path, "expected %s, got %s", what, describe(v, buf, sizeof(buf)));
		return NULL;
	}
	if (strlen(v->str) != v->len) {
		verr(L, v, path, "contains a NUL character");
		return NULL;
	}
	return v->str;
}

/* Decimal or 0x hex; a leading '-' is read so that the range message can quote it. */
enum {
	INT_OK,
	INT_BAD,
	INT_LEADING_ZERO,
	INT_HUGE
};

static int parse_int(const char *s, int64_t *out)
{
	bool neg = false, hex = false;
	uint64_t v = 0;
	int base = 10;

	if (*s == '-') {
		neg = true;
		s++;
	}
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		hex = true;
		base = 16;
		s += 2;
	}
	if (!*s)
		return INT_BAD;
	if (!hex && s[0] == '0' && s[1])
		return INT_LEADING_ZERO;
	for (; *s; s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (hex && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (hex && *s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			return INT_BAD;
		if (v > (UINT64_C(1) << 40))
			return INT_HUGE;
		v = v * (unsigned)base + (unsigned)d;
	}
	*out = neg ? -(int64_t)v : (int64_t)v;
	return INT_OK;
}

static void fmt_num(char *buf, size_t len, int64_t v, bool hex)
{
	if (hex && v >= 0)
		snprintf(buf, len, "0x%04llx", (unsigned long long)v);
	else
		snprintf(buf, len, "%lld", (long long)v);
}

/* Parse an integer scalar and check it against min..max. */
static int get_int(struct load *L, const struct gw_ynode *v, const char *path, int64_t min,
		   int64_t max, bool hex, int64_t *out)
{
	const char *s = expect_scalar(L, v, path, "an integer");
	char buf[64], lo[24], hi[24];
	int rc;

	if (!s)
		return -1;
	if (!v->plain) {
		verr(L, v, path,
		     "expected an integer, got the quoted string %s (remove the quotes)",
		     describe(v, buf, sizeof(buf)));
		return -1;
	}
	fmt_num(lo, sizeof(lo), min, hex);
	fmt_num(hi, sizeof(hi), max, hex);
	rc = parse_int(s, out);
	if (rc == INT_BAD) {
		verr(L, v, path, "expected an integer (decimal or 0x hex), got %s",
		     describe(v, buf, sizeof(buf)));
		return -1;
	}
	if (rc == INT_LEADING_ZERO) {
		verr(L, v, path, "%s has a leading zero; write it without (or as 0x hex)",
		     describe(v, buf, sizeof(buf)));
		return -1;
	}
	if (rc == INT_HUGE || *out < min || *out > max) {
		verr(L, v, path, "%s is out of range %s..%s", show(s, buf, sizeof(buf)), lo, hi);
		return -1;
	}
	return 0;
}

static bool name_chars_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == ':' || *s == '-'))
			return false;
	return true;
}

/*
 * The code point + 1 of a character at s that a string must not hold, else 0: C0 and C1
 * controls, the line and paragraph separators, the byte order mark and U+FFFE/U+FFFF.
 * YAML's escapes let a file spell them ("\x80"), but a printed config could not carry
 * them back (a raw C1 control is refused by the reader, a raw line break folds) and no
 * name, path or group needs one. libyaml hands over valid UTF-8, so lead bytes suffice.
 */
static unsigned nonprinting_at(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;

	if (u[0] < 0x20 || u[0] == 0x7f)
		return u[0] + 1u;
	if (u[0] == 0xc2 && u[1] >= 0x80 && u[1] <= 0x9f)
		return u[1] + 1u;
	if (u[0] == 0xe2 && u[1] == 0x80 && (u[2] == 0xa8 || u[2] == 0xa9))
		return 0x2000u + (u[2] & 0x3f) + 1u;
	if (u[0] == 0xef && u[1] == 0xbb && u[2] == 0xbf)
		return 0xfeffu + 1u;
	if (u[0] == 0xef && u[1] == 0xbf && (u[2] == 0xbe || u[2] == 0xbf))
		return 0xffc0u + (u[2] & 0x3f) + 1u;
	return 0;
}

static int get_string(struct load *L, const struct field *f, const struct gw_ynode *v,
		      const char *path, char *dst, size_t size)
{
	const char *s = expect_scalar(L, v, path, "a string");
	char buf[64];
	size_t len;

	if (!s)
		return -1;
	len = strlen(s);
	if (len >= size) {
		verr(L, v, path, "'%s' is longer than %zu characters", show(s, buf, sizeof(buf)),
		     size - 1);
		return -1;
	}
	for (const char *c = s; *c; c++) {
		unsigned cp = nonprinting_at(c);

		if (cp) {
			verr(L, v, path, "contains the non-printing character U+%04X", cp - 1);
			return -1;
		}
	}
	if ((f->flags & (FL_NONEMPTY | FL_NAME)) && len == 0) {
		verr(L, v, path, "must not be empty");
		return -1;
	}
	if ((f->flags & FL_NAME) && !name_chars_ok(s)) {
		verr(L, v, path, "'%s' may contain only letters, digits, '.', '_', ':' and '-'",
		     show(s, buf, sizeof(buf)));
		return -1;
	}
	if ((f->flags & FL_ABSPATH) && len && s[0] != '/') {
		verr(L, v, path, "'%s' is not an absolute path", show(s, buf, sizeof(buf)));
		return -1;
	}
	if ((f->flags & FL_SUNPATH) && len > 107) {
		verr(L, v, path,
		     "'%s' is longer than 107 characters, the limit of a unix socket path",
		     show(s, buf, sizeof(buf)));
		return -1;
	}
	if ((f->flags & FL_IFNAME) && len > 15) {
		verr(L, v, path,
		     "'%s' is longer than 15 characters, the limit of a Linux interface name",
		     show(s, buf, sizeof(buf)));
		return -1;
	}
	memcpy(dst, s, len + 1);
	return 0;
}

static int get_enum(struct load *L, const struct field *f, const struct gw_ynode *v,
		    const char *path, int *out)
{
	const char *names[8], *s = expect_scalar(L, v, path, "a name");
	char list[160] = "", buf[64];
	const char *near;
	unsigned n = 0;

	if (!s)
		return -1;
	for (const struct enum_name *e = f->enums; e->name; e++) {
		if (strcmp(e->name, s) == 0) {
			*out = e->value;
			return 0;
		}
		names[n++] = e->name;
	}
	for (size_t i = 0; i < sizeof(retired_values) / sizeof(retired_values[0]); i++)
		if (retired_values[i].enums == f->enums && !strcmp(retired_values[i].name, s)) {
			verr(L, v, path, "'%s': %s", s, retired_values[i].why);
			return -1;
		}
	for (unsigned i = 0; i < n; i++) {
		size_t l = strlen(list);

		snprintf(list + l, sizeof(list) - l, "%s%s",
			 i == 0       ? ""
			 : i + 1 == n ? " or "
				      : ", ",
			 names[i]);
	}
	near = closest(s, names, n);
	if (near)
		verr(L, v, path, "unknown value %s (expected %s; did you mean '%s'?)",
		     describe(v, buf, sizeof(buf)), list, near);
	else
		verr(L, v, path, "unknown value %s (expected %s)", describe(v, buf, sizeof(buf)),
		     list);
	return -1;
}

static int get_bool(struct load *L, const struct gw_ynode *v, const char *path, bool *out)
{
	static const char *const yes[] = { "yes", "Yes", "YES",  "y",    "Y", "on",
					   "On",  "ON",  "True", "TRUE", "1" };
	static const char *const no[] = { "no",  "No",  "NO",    "n",     "N", "off",
					  "Off", "OFF", "False", "FALSE", "0" };
	const char *s = expect_scalar(L, v, path, "true or false");
	char buf[64];

	if (!s)
		return -1;
	if (v->plain && strcmp(s, "true") == 0) {
		*out = true;
		return 0;
	}
	if (v->plain && strcmp(s, "false") == 0) {
		*out = false;
		return 0;
	}
	for (unsigned i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0) {
			verr(L, v, path, "expected true or false, got %s (did you mean true?)",
			     describe(v, buf, sizeof(buf)));
			return -1;
		}
		if (strcmp(s, no[i]) == 0) {
			verr(L, v, path, "expected true or false, got %s (did you mean false?)",
			     describe(v, buf, sizeof(buf)));
			return -1;
		}
	}
	if (!v->plain && (strcmp(s, "true") == 0 || strcmp(s, "false") == 0))
		verr(L, v, path,
		     "expected true or false, got the quoted string %s (remove the quotes)",
		     describe(v, buf, sizeof(buf)));
	else
		verr(L, v, path, "expected true or false, got %s", describe(v, buf, sizeof(buf)));
	return -1;
}

/* Octal file mode, "0660" or 660, quoted or not. */
static int get_mode(struct load *L, const struct gw_ynode *v, const char *path, uint32_t *out)
{
	const char *s = expect_scalar(L, v, path, "an octal file mode");
	char buf[64];
	uint32_t m = 0;
	const char *p;

	if (!s)
		return -1;
	p = s[0] == '0' && (s[1] == 'o' || s[1] == 'O') ? s + 2 : s;
	if (!*p || strlen(p) > 12)
		goto bad;
	for (; *p; p++) {
		if (*p < '0' || *p > '7')
			goto bad;
		m = m * 8 + (uint32_t)(*p - '0');
	}
	if (m > 0777) {
		verr(L, v, path, "%s is out of range 0000..0777", show(s, buf, sizeof(buf)));
		return -1;
	}
	*out = m;
	return 0;
bad:
	verr(L, v, path, "expected an octal file mode such as 0660, got %s",
	     describe(v, buf, sizeof(buf)));
	return -1;
}

static int get_addr(struct load *L, const struct gw_ynode *v, const char *path, struct ip_addr *out)
{
	const char *s = expect_scalar(L, v, path, "an IP address");
	char buf[64];

	if (!s)
		return -1;
	if (ip_addr_parse(s, out) < 0) {
		if (strchr(s, '/'))
			verr(L, v, path, "expected an IP address without prefix length, got %s",
			     describe(v, buf, sizeof(buf)));
		else
			verr(L, v, path, "%s is not an IPv4 or IPv6 address",
			     describe(v, buf, sizeof(buf)));
		return -1;
	}
	return 0;
}

/* Parse a prefix; on failure say precisely what is wrong with it. */
static int get_prefix(struct load *L, const struct gw_ynode *v, const char *path, bool host_bits,
		      bool gid, struct ip_prefix *out)
{
	const char *s = expect_scalar(L, v, path, gid ? "a GID prefix" : "an IP prefix");
	char buf[64], abuf[IP_ADDR_STRLEN + 8], sbuf[64];
	struct ip_prefix p;
	const char *slash;
	size_t alen;

	if (!s)
		return -1;
	if (ip_prefix_parse(s, true, &p) < 0) {
		slash = strchr(s, '/');
		alen = slash ? (size_t)(slash - s) : strlen(s);
		if (alen >= sizeof(abuf))
			alen = sizeof(abuf) - 1;
		memcpy(abuf, s, alen);
		abuf[alen] = '\0';
		if (ip_addr_parse(abuf, &p.addr) < 0)
			verr(L, v, path, "%s is not a prefix: '%s' is not an IPv4 or IPv6 address",
			     describe(v, buf, sizeof(buf)), show(abuf, sbuf, sizeof(sbuf)));
		else
			verr(L, v, path,
			     "%s is not a prefix: the length after '/' must be a number 0..%u",
			     describe(v, buf, sizeof(buf)), ip_addr_bits(&p.addr));
		return -1;
	}
	if (gid && p.addr.family != AF_INET6) {
		verr(L, v, path,
		     "%s is not a GID prefix (GIDs are written like IPv6: fec0:0:0:1::/64)",
		     describe(v, buf, sizeof(buf)));
		return -1;
	}
	if (!host_bits) {
		struct ip_prefix m = p;
		char mbuf[IP_PREFIX_STRLEN];

		ip_prefix_mask(&m);
		if (!ip_addr_equal(&m.addr, &p.addr)) {
			verr(L, v, path, "%s has host bits set (did you mean %s?)",
			     describe(v, buf, sizeof(buf)),
			     ip_prefix_format(&m, mbuf, sizeof(mbuf)));
			return -1;
		}
	}
	*out = p;
	return 0;
}

/* ---- The walker ---- */

static void walk_map(struct load *L, const struct schema *s, void *base,
		     const struct gw_ynode *node, const char *path);

static void apply_defaults(struct load *L, const struct schema *s, void *base);

static size_t elem_size(enum ftype t)
{
	switch (t) {
	case T_IFADDR_LIST:
	case T_NET_LIST:
		return sizeof(struct ip_prefix);
	case T_ADDR_LIST:
		return sizeof(struct ip_addr);
	case T_NAME_LIST:
		return GW_NAME_MAX;
	default:
		return sizeof(int);
	}
}

/* One element of a scalar list; 0 if stored. */
static int set_elem(struct load *L, enum ftype t, void *dst, const struct gw_ynode *v,
		    const char *path)
{
	static const struct field name_field = { .key = "", .flags = FL_NAME };
	int64_t x;

	switch (t) {
	case T_IFADDR_LIST:
		return get_prefix(L, v, path, true, false, dst);
	case T_NET_LIST:
		return get_prefix(L, v, path, false, false, dst);
	case T_ADDR_LIST:
	case T_VIA:
		return get_addr(L, v, path, dst);
	case T_NAME_LIST:
		return get_string(L, &name_field, v, path, dst, GW_NAME_MAX);
	default:
		if (get_int(L, v, path, 0, 1023, false, &x) < 0)
			return -1;
		*(int *)dst = (int)x;
		return 0;
	}
}

static void set_scalar_list(struct load *L, const struct field *f, void *base,
			    const struct gw_ynode *v, const char *path)
{
	size_t esz = elem_size(f->type);
	char ipath[160], buf[64];
	unsigned n, stored = 0;
	char *arr;

	if (v->kind == GW_YN_NULL)
		return;
	if (v->kind != GW_YN_SEQ) {
		verr(L, v, path, "expected a list, got %s (write [ %s ] or one '- ' item per line)",
		     describe(v, buf, sizeof(buf)), v->kind == GW_YN_SCALAR ? v->str : "...");
		return;
	}
	n = v->n;
	if (n > f->size) {
		verr(L, v, path, "too many entries (%u; at most %u)", n, f->size);
		n = f->size;
	}
	if (!n)
		return;
	arr = calloc(n, esz);
	if (!arr) {
		L->e->oom = true;
		return;
	}
	for (unsigned i = 0; i < n; i++) {
		void *dst = arr + stored * esz;

		snprintf(ipath, sizeof(ipath), "%s[%u]", path, i);
		if (set_elem(L, f->type, dst, v->kids[i], ipath) == 0) {
			record(L, dst, v->kids[i]);
			stored++;
		}
	}
	if (f->type == T_CPU_LIST) /* a CPU listed twice would pin two workers together */
		for (unsigned i = 1; i < stored; i++)
			for (unsigned j = 0; j < i; j++)
				if (((int *)(void *)arr)[i] == ((int *)(void *)arr)[j]) {
					const struct posrec *p = pos_of(L, arr + i * esz);

					if (p)
						gw_cfg_err(L->e, p->line, p->col,
							   "%s: CPU %d is listed twice", path,
							   ((int *)(void *)arr)[i]);
					break;
				}
	set_ptr(base, f->off, arr);
	set_count(base, f->n_off, stored);
}

static void set_via(struct load *L, const struct field *f, void *base, const struct gw_ynode *v,
		    const char *path)
{
	struct ip_addr *via = at(base, f->off);
	char ipath[160], buf[64];
	unsigned n, stored = 0;

	if (v->kind == GW_YN_NULL)
		return;
	if (v->kind == GW_YN_SCALAR) {
		if (get_addr(L, v, path, &via[0]) == 0) {
			record(L, &via[0], v);
			set_count(base, f->n_off, 1);
		}
		return;
	}
	if (v->kind != GW_YN_SEQ) {
		verr(L, v, path, "expected an address or a list of addresses, got %s",
		     describe(v, buf, sizeof(buf)));
		return;
	}
	n = v->n;
	if (n > f->size) {
		verr(L, v, path, "too many addresses (%u; at most %u)", n, f->size);
		n = f->size;
	}
	for (unsigned i = 0; i < n; i++) {
		snprintf(ipath, sizeof(ipath), "%s[%u]", path, i);
		if (get_addr(L, v->kids[i], ipath, &via[stored]) == 0) {
			record(L, &via[stored], v->kids[i]);
			stored++;
		}
	}
	set_count(base, f->n_off, stored);
}

static void set_list(struct load *L, const struct field *f, void *base, const struct gw_ynode *v,
		     const char *path)
{
	const struct schema *s = f->sub;
	char ipath[160], buf[64];
	unsigned n;
	char *arr;

	if (v->kind == GW_YN_NULL)
		return;
	if (v->kind != GW_YN_SEQ) {
		verr(L, v, path, "expected a list ('- ' items), got %s",
		     describe(v, buf, sizeof(buf)));
		return;
	}
	n = v->n;
	if (n > f->size) {
		verr(L, v, path, "too many entries (%u; at most %u)", n, f->size);
		n = f->size;
	}
	if (f->flags & FL_FIXED) {
		arr = at(base, f->off);
	} else {
		if (!n)
			return;
		arr = calloc(n, s->item_size);
		if (!arr) {
			L->e->oom = true;
			return;
		}
		set_ptr(base, f->off, arr);
	}
	set_count(base, f->n_off, n);
	for (unsigned i = 0; i < n; i++) {
		void *item = arr + i * s->item_size;

		snprintf(ipath, sizeof(ipath), "%s[%u]", path, i);
		apply_defaults(L, s, item);
		if (s->pos_off >= 0) {
			struct gw_config_pos *p = at(item, (size_t)s->pos_off);

			p->line = v->kids[i]->line;
			p->column = v->kids[i]->col;
		}
		if (v->kids[i]->kind != GW_YN_MAP) {
			verr(L, v->kids[i], ipath, "expected a mapping of keys, got %s",
			     describe(v->kids[i], buf, sizeof(buf)));
			continue;
		}
		walk_map(L, s, item, v->kids[i], ipath);
	}
}

/* Store one value; on success remember where it came from. */
static void set_value(struct load *L, const struct field *f, void *base, const struct gw_ynode *v,
		      const char *path)
{
	void *dst = at(base, f->off);
	int64_t x;
	int rc = -1;

	switch (f->type) {
	case T_SECTION:
		if (v->kind != GW_YN_MAP && v->kind != GW_YN_NULL) {
			char buf[64];

			verr(L, v, path, "expected a mapping of keys, got %s",
			     describe(v, buf, sizeof(buf)));
		}
		/* An empty section ("failover:") is given too: its checks may need where. */
		walk_map(L, f->sub, dst, v->kind == GW_YN_MAP || v->kind == GW_YN_NULL ? v : NULL,
			 path);
		return;
	case T_LIST:
		set_list(L, f, base, v, path);
		return;
	case T_IFADDR_LIST:
	case T_NET_LIST:
	case T_ADDR_LIST:
	case T_NAME_LIST:
	case T_CPU_LIST:
		set_scalar_list(L, f, base, v, path);
		return;
	case T_VIA:
		set_via(L, f, base, v, path);
		return;
	case T_BOOL:
		rc = get_bool(L, v, path, dst);
		break;
	case T_UINT:
		rc = get_int(L, v, path, f->min, f->max, f->flags & FL_HEX, &x);
		if (rc == 0)
			put_uint(dst, f->size, (uint64_t)x);
		break;
	case T_STR:
		rc = get_string(L, f, v, path, dst, f->size);
		break;
	case T_ENUM:
		rc = get_enum(L, f, v, path, dst);
		break;
	case T_PKEY:
		rc = get_int(L, v, path, 0, 0xffff, true, &x);
		if (rc == 0 && (x & 0x7fff) == 0) {
			verr(L, v, path,
			     "0x%04llx is not a valid P_Key (0x0000 and 0x8000 are reserved)",
			     (unsigned long long)x);
			rc = -1;
		}
		if (rc == 0) /* the gateway is always a full member */
			put_uint(dst, 2, (uint64_t)x | 0x8000);
		break;
	case T_MODE:
		rc = get_mode(L, v, path, dst);
		break;
	case T_ADDR:
		rc = get_addr(L, v, path, dst);
		if (rc == 0 && (f->flags & FL_OPTIONAL))
			*(bool *)at(base, f->n_off) = true;
		break;
	case T_IFADDR:
		rc = get_prefix(L, v, path, true, false, dst);
		break;
	case T_NET:
		rc = get_prefix(L, v, path, false, false, dst);
		break;
	case T_GID_NET:
		rc = get_prefix(L, v, path, false, true, dst);
		break;
	}
	if (rc == 0)
		record(L, dst, v);
}

static void apply_defaults(struct load *L, const struct schema *s, void *base)
{
	for (unsigned i = 0; i < s->n; i++) {
		const struct field *f = &s->f[i];

		if (f->type == T_SECTION && !(f->flags & FL_OPTIONAL))
			apply_defaults(L, f->sub, at(base, f->off));
		if (f->def) {
			struct gw_ynode d = { .kind = GW_YN_SCALAR, .plain = true };
			bool saved = L->defaults;

			d.str = (char *)f->def;
			d.len = strlen(f->def);
			/* Defaults are ours: parsed by the same code, never given a position. */
			L->defaults = true;
			set_value(L, f, base, &d, f->key);
			L->defaults = saved;
		}
	}
}

static void unknown_key(struct load *L, const struct schema *s, const struct gw_ynode *k,
			const char *path)
{
	const char *keys[MAX_FIELDS], *near;
	char buf[64], where[180];

	for (unsigned i = 0; i < s->n; i++)
		keys[i] = s->f[i].key;
	near = closest(k->str, keys, s->n);
	if (s == &top_schema)
		snprintf(where, sizeof(where), "at the top level");
	else
		snprintf(where, sizeof(where), "in %s", path);
	if (near)
		gw_cfg_err(L->e, k->line, k->col, "unknown key %s %s (did you mean '%s'?)",
			   describe(k, buf, sizeof(buf)), where, near);
	else
		gw_cfg_err(L->e, k->line, k->col, "unknown key %s %s",
			   describe(k, buf, sizeof(buf)), where);
}

static void walk_map(struct load *L, const struct schema *s, void *base,
		     const struct gw_ynode *node, const char *path)
{
	const struct gw_ynode *vals[MAX_FIELDS] = { 0 }, *keys[MAX_FIELDS] = { 0 };
	char fpath[200];

	for (unsigned i = 0; node && i + 1 < node->n; i += 2) {
		const struct gw_ynode *k = node->kids[i], *v = node->kids[i + 1];
		char buf[64];
		int fi;

		if (k->kind != GW_YN_SCALAR || strlen(k->str) != k->len) {
			gw_cfg_err(L->e, k->line, k->col, "keys must be plain names, got %s",
				   describe(k, buf, sizeof(buf)));
			continue;
		}
		fi = field_index(s, k->str);
		if (fi < 0) {
			unknown_key(L, s, k, path);
			continue;
		}
		if (keys[fi]) {
			gw_cfg_err(L->e, k->line, k->col,
				   "duplicate key '%s' %s%s (first at line %u)", k->str,
				   s == &top_schema ? "at the top level" : "in ",
				   s == &top_schema ? "" : path, keys[fi]->line);
			continue;
		}
		keys[fi] = k;
		vals[fi] = v;
		if (s == &top_schema)
			snprintf(fpath, sizeof(fpath), "%s", k->str);
		else
			snprintf(fpath, sizeof(fpath), "%s.%s", path, k->str);
		if (s->f[fi].type == T_SECTION && (s->f[fi].flags & FL_OPTIONAL))
			*(bool *)at(base, s->f[fi].n_off) = true;
		if (s->f[fi].type == T_SECTION && (s->f[fi].flags & FL_OPTIONAL))
			apply_defaults(L, s->f[fi].sub, at(base, s->f[fi].off));
		set_value(L, &s->f[fi], base, v, fpath);
	}
	for (unsigned i = 0; i < s->n; i++) {
		const struct field *f = &s->f[i];

		if (vals[i])
			continue;
		if ((f->flags & FL_REQUIRED) && node)
			verr(L, node, path, "missing key '%s'", f->key);
		/* Sections left out still get their derived defaults. */
		if (f->type == T_SECTION && !(f->flags & FL_OPTIONAL))
			walk_map(L, f->sub, at(base, f->off), NULL, f->key);
	}
	if (s->check)
		s->check(L, base, vals, path, node);
}

/* ---- Per-section checks and derived defaults ---- */

/* RFC 4861 6.2.1's bounds between the RA variables, and their derived defaults. */
static void check_ra(struct load *L, void *base, const struct gw_ynode *const *vals,
		     const char *path, const struct gw_ynode *node)
{
	struct gw_ra_config *r = base;
	const struct gw_ynode *mx = val_of(&ra_schema, vals, "max_interval_ms"),
			      *mn = val_of(&ra_schema, vals, "min_interval_ms"),
			      *lt = val_of(&ra_schema, vals, "router_lifetime_s"),
			      *mtu = val_of(&ra_schema, vals, "mtu");
	bool okmax = usable(L, mx, &r->max_interval_ms);
	char fpath[200];

	(void)node;
	if (!mn) {
		if (okmax) {
			r->min_interval_ms = r->max_interval_ms / 3;
			if (r->min_interval_ms < 3000)
				r->min_interval_ms = 3000;
		}
	} else if (recorded(L, &r->min_interval_ms) && okmax &&
		   r->min_interval_ms > (uint64_t)r->max_interval_ms * 3 / 4) {
		snprintf(fpath, sizeof(fpath), "%s.min_interval_ms", path);
		verr(L, mn, fpath, "%u is above 0.75 max_interval_ms (%u); want at most %u",
		     r->min_interval_ms, r->max_interval_ms,
		     (unsigned)((uint64_t)r->max_interval_ms * 3 / 4));
	}
	if (!lt) {
		if (okmax)
			r->router_lifetime_s = (uint32_t)((uint64_t)r->max_interval_ms * 3 / 1000);
		if (r->router_lifetime_s > 9000)
			r->router_lifetime_s = 9000;
	} else if (recorded(L, &r->router_lifetime_s) && okmax && r->router_lifetime_s &&
		   (uint64_t)r->router_lifetime_s * 1000 < r->max_interval_ms) {
		snprintf(fpath, sizeof(fpath), "%s.router_lifetime_s", path);
		verr(L, lt, fpath,
		     "%u s is shorter than max_interval_ms (%u ms): hosts would drop the router "
		     "between two advertisements; want 0 or at least %u",
		     r->router_lifetime_s, r->max_interval_ms, (r->max_interval_ms + 999) / 1000);
	}
	if (!mtu)
		r->mtu = GW_RA_MTU_LINK;
}

static void check_ra_prefix(struct load *L, void *base, const struct gw_ynode *const *vals,
			    const char *path, const struct gw_ynode *node)
{
	struct gw_ra_prefix_config *p = base;
	const struct gw_ynode *pf = val_of(&ra_prefix_schema, vals, "prefix"),
			      *au = val_of(&ra_prefix_schema, vals, "autonomous"),
			      *pl = val_of(&ra_prefix_schema, vals, "preferred_lifetime_s"),
			      *vl = val_of(&ra_prefix_schema, vals, "valid_lifetime_s");
	char fpath[200], buf[IP_PREFIX_STRLEN];

	(void)node;
	if (pf && recorded(L, &p->prefix)) {
		snprintf(fpath, sizeof(fpath), "%s.prefix", path);
		if (p->prefix.addr.family != AF_INET6)
			verr(L, pf, fpath, "%s is IPv4; router advertisements carry IPv6 prefixes",
			     ip_prefix_format(&p->prefix, buf, sizeof(buf)));
		else if (p->prefix.addr.bytes[0] == 0xff ||
			 (p->prefix.addr.bytes[0] == 0xfe &&
			  (p->prefix.addr.bytes[1] & 0xc0) == 0x80))
			verr(
			    L, pf, fpath,
			    "%s is link-local or multicast; hosts ignore such a prefix (RFC 4862 5.5.3)",
			    ip_prefix_format(&p->prefix, buf, sizeof(buf)));
		else if (p->autonomous && p->prefix.len != 64 && usable(L, au, &p->autonomous)) {
			if (au)
				snprintf(fpath, sizeof(fpath), "%s.autonomous", path);
			verr(L, au ? au : pf, fpath,
			     "%s is not a /64: hosts form addresses only in a /64 (RFC 4862 5.5.3, "
			     "RFC 4291's 64-bit interface identifiers); set autonomous: false",
			     ip_prefix_format(&p->prefix, buf, sizeof(buf)));
		}
	}
	if (usable(L, pl, &p->preferred_lifetime_s) && usable(L, vl, &p->valid_lifetime_s) &&
	    (pl || vl) && p->preferred_lifetime_s > p->valid_lifetime_s) {
		snprintf(fpath, sizeof(fpath), "%s.%s", path,
			 pl ? "preferred_lifetime_s" : "valid_lifetime_s");
		verr(L, pl ? pl : vl, fpath,
		     "preferred_lifetime_s (%u) is above valid_lifetime_s (%u) (RFC 4862 5.5.3)",
		     p->preferred_lifetime_s, p->valid_lifetime_s);
	}
}

/* The relay's servers: IPv4 unicast (DHCPv4), IPv6 global or unique-local (DHCPv6). */
static void check_dhcp(struct load *L, void *base, const struct gw_ynode *const *vals,
		       const char *path, const struct gw_ynode *node)
{
	struct gw_dhcp_relay_config *d = base;
	char fpath[200], buf[IP_ADDR_STRLEN];

	(void)vals;
	(void)node;
	for (unsigned i = 0; i < d->n_servers; i++) {
		const struct posrec *p = pos_of(L, &d->servers[i]);
		const uint8_t *a = d->servers[i].bytes;

		if (!p)
			continue;
		snprintf(fpath, sizeof(fpath), "%s.servers[%u]", path, i);
		if (d->servers[i].family == AF_INET6) {
			static const uint8_t zero[16];

			if (a[0] == 0xff || (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) ||
			    !memcmp(a, zero, 15))
				gw_cfg_err(
				    L->e, p->line, p->col,
				    "%s: %s is not a global or unique-local unicast address; "
				    "want a DHCPv6 server's own address",
				    fpath, ip_addr_format(&d->servers[i], buf, sizeof(buf)));
		} else if (a[0] == 0 || a[0] == 127 || a[0] >= 224)
			gw_cfg_err(L->e, p->line, p->col,
				   "%s: %s is not a unicast address; want a server's own address",
				   fpath, ip_addr_format(&d->servers[i], buf, sizeof(buf)));
	}
}

/* A relaying interface needs an address of each family it relays: IPv4 for DHCPv4 (the
 * giaddr the servers answer to), a global or unique-local IPv6 one for DHCPv6 (the
 * link-address the servers pick the prefix by). */
static void check_dhcp_giaddr(struct load *L, const struct gw_dhcp_relay_config *d,
			      const struct ip_prefix *a, unsigned n, const struct gw_ynode *node,
			      const char *path)
{
	bool want4 = false, want6 = false, have4 = false, have6 = false;
	char fpath[200];

	if (!d->enabled)
		return;
	for (unsigned i = 0; i < d->n_servers; i++) {
		want4 |= d->servers[i].family == AF_INET;
		want6 |= d->servers[i].family == AF_INET6;
	}
	for (unsigned i = 0; i < n; i++) {
		have4 |= a[i].addr.family == AF_INET;
		have6 |= a[i].addr.family == AF_INET6 &&
			 !(a[i].addr.bytes[0] == 0xfe && (a[i].addr.bytes[1] & 0xc0) == 0x80);
	}
	snprintf(fpath, sizeof(fpath), "%s.dhcp_relay", path);
	if (want4 && !have4)
		verr(L, node, fpath,
		     "the interface has no IPv4 address: the DHCPv4 relay needs one (the servers "
		     "answer to it, giaddr)");
	if (want6 && !have6)
		verr(L, node, fpath,
		     "the interface has no global or unique-local IPv6 address: the DHCPv6 relay "
		     "needs one (the link-address the servers choose a prefix by)");
}

/* The RA's MTU option against its interface's mtu (known once the item is walked).
 * Absent: the interface's mtu on Ethernet (link_default), none on IPoIB (0): an IPoIB
 * link's MTU is a property of each pair of hosts (2044 over UD, 65520 between two
 * connected-mode hosts, RFC 4755), and an option would hold every host to one. */
static void check_ra_mtu(struct load *L, struct gw_ra_config *r, uint32_t link_mtu,
			 uint32_t link_default, const char *path)
{
	const struct posrec *p = pos_of(L, &r->mtu);

	if (!r->enabled)
		return;
	if (r->mtu == GW_RA_MTU_LINK) {
		r->mtu = link_default;
		return;
	}
	if (p && r->mtu && (r->mtu < 1280 || r->mtu > link_mtu))
		gw_cfg_err(L->e, p->line, p->col,
			   "%s.router_advertisements.mtu: %u is %s; want 0 (no option) or 1280 up "
			   "to the interface's mtu (%u)",
			   path, r->mtu,
			   r->mtu < 1280 ? "below IPv6's minimum link MTU"
					 : "above the interface's mtu",
			   link_mtu);
}

static void check_gateway(struct load *L, void *base, const struct gw_ynode *const *vals,
			  const char *path, const struct gw_ynode *node)
{
	struct gw_config *c = base;
	const struct gw_ynode *cpus = val_of(&gateway_schema, vals, "worker_cpus"),
			      *workers = val_of(&gateway_schema, vals, "workers");

	(void)node, (void)path;
	if (!val_of(&gateway_schema, vals, "name")) {
		char host[256];

		if (gethostname(host, sizeof(host)) < 0 || !host[0])
			snprintf(host, sizeof(host), "ibgw");
		host[sizeof(host) - 1] = '\0';
		snprintf(c->name, sizeof(c->name), "%.*s", (int)sizeof(c->name) - 1, host);
	}
	if (cpus && c->n_worker_cpus && c->n_worker_cpus == cpus->n &&
	    usable(L, workers, &c->workers) && c->n_worker_cpus != c->workers)
		verr(L, cpus, "gateway.worker_cpus",
		     "%u CPUs listed for %u worker%s (list one CPU per worker, or none)",
		     c->n_worker_cpus, c->workers, c->workers == 1 ? "" : "s");
}

static void check_ipoib(struct load *L, void *base, const struct gw_ynode *const *vals,
			const char *path, const struct gw_ynode *node)
{
	struct gw_ipoib_link_config *l = base;
	const struct gw_ynode *mtu = val_of(&ipoib_schema, vals, "mtu"),
			      *mode = val_of(&ipoib_schema, vals, "mode");
	char fpath[200];

	(void)node;
	if (l->backup_port && l->backup_port == l->port && recorded(L, &l->backup_port)) {
		snprintf(fpath, sizeof(fpath), "%s.backup_port", path);
		verr(L, val_of(&ipoib_schema, vals, "backup_port"), fpath,
		     "%u is also the link's port; the backup is another port of the HCA",
		     l->backup_port);
	}
	if (!mtu) {
		l->mtu = l->mode == GW_IPOIB_CONNECTED ? 65520 : 2044;
	} else if (recorded(L, &l->mtu) && usable(L, mode, &l->mode) &&
		   l->mode == GW_IPOIB_DATAGRAM && l->mtu > 4092) {
		snprintf(fpath, sizeof(fpath), "%s.mtu", path);
		verr(
		    L, mtu, fpath,
		    "%u is too large for datagram mode (at most 4092: the 4096-byte IB MTU less the 4-byte IPoIB header; use mode: connected for more)",
		    l->mtu);
	}
	check_ra_mtu(L, &l->ra, l->mtu, 0, path);
	check_dhcp_giaddr(L, &l->dhcp, l->addresses, l->n_addresses,
			  val_of(&ipoib_schema, vals, "dhcp_relay"), path);
}

static void check_eth(struct load *L, void *base, const struct gw_ynode *const *vals,
		      const char *path, const struct gw_ynode *node)
{
	struct gw_eth_if_config *e = base;
	const struct gw_ynode *name = val_of(&eth_schema, vals, "name");
	char fpath[200];

	(void)node;
	if (!val_of(&eth_schema, vals, "device") && name && recorded(L, e->name)) {
		if (strlen(e->name) > 15) {
			snprintf(fpath, sizeof(fpath), "%s.name", path);
			verr(
			    L, name, fpath,
			    "'%s' is also the device name, and longer than 15 characters, the limit of a Linux interface name (set device)",
			    e->name);
		}
		memcpy(e->device, e->name, sizeof(e->device));
	}
	check_ra_mtu(L, &e->ra, e->mtu, e->mtu, path);
	check_dhcp_giaddr(L, &e->dhcp, e->addresses, e->n_addresses,
			  val_of(&eth_schema, vals, "dhcp_relay"), path);
}

static void check_route(struct load *L, void *base, const struct gw_ynode *const *vals,
			const char *path, const struct gw_ynode *node)
{
	struct gw_route_config *r = base;
	const struct gw_ynode *via = val_of(&route_schema, vals, "via"),
			      *dev = val_of(&route_schema, vals, "dev");
	char fpath[200], buf[IP_ADDR_STRLEN];

	if (!via && !dev && node) {
		verr(L, node, path,
		     "a route needs 'via' (next hops) or 'dev' (directly connected)");
		return;
	}
	if (!recorded(L, &r->prefix))
		return;
	for (unsigned i = 0; i < r->n_via; i++) {
		const struct posrec *p = pos_of(L, &r->via[i]);

		if (r->via[i].family != r->prefix.addr.family && p) {
			if (via->kind == GW_YN_SEQ)
				snprintf(fpath, sizeof(fpath), "%s.via[%u]", path, i);
			else
				snprintf(fpath, sizeof(fpath), "%s.via", path);
			gw_cfg_err(L->e, p->line, p->col,
				   "%s: next hop %s is %s but the prefix is %s", fpath,
				   ip_addr_format(&r->via[i], buf, sizeof(buf)),
				   r->via[i].family == AF_INET ? "IPv4" : "IPv6",
				   r->prefix.addr.family == AF_INET ? "IPv4" : "IPv6");
		}
	}
}

static void check_gid_route(struct load *L, void *base, const struct gw_ynode *const *vals,
			    const char *path, const struct gw_ynode *node)
{
	struct gw_gid_route_config *g = base;
	const struct gw_ynode *src = val_of(&gid_route_schema, vals, "source"),
			      *routers = val_of(&gid_route_schema, vals, "routers");

	if (node && g->source == GW_GID_ROUTE_LOCAL && usable(L, src, &g->source) && !routers) {
		verr(L, node, path, "source local needs at least one entry in 'routers'");
	}
}

static void check_router(struct load *L, void *base, const struct gw_ynode *const *vals,
			 const char *path, const struct gw_ynode *node)
{
	struct gw_ib_router_config *r = base;
	const struct gw_ynode *mtu = val_of(&router_schema, vals, "mtu");
	char fpath[200];

	(void)node;
	if (mtu && recorded(L, &r->mtu) && (r->mtu & (r->mtu - 1)) != 0) {
		snprintf(fpath, sizeof(fpath), "%s.mtu", path);
		verr(L, mtu, fpath, "%u is not an IB MTU (256, 512, 1024, 2048 or 4096)", r->mtu);
	}
}

static void check_failover(struct load *L, void *base, const struct gw_ynode *const *vals,
			   const char *path, const struct gw_ynode *node)
{
	struct gw_failover_config *f = base;
	const struct gw_ynode *hb = val_of(&failover_schema, vals, "heartbeat_interval_ms"),
			      *dead = val_of(&failover_schema, vals, "dead_interval_ms"),
			      *paths = val_of(&failover_schema, vals, "paths"),
			      *peers = val_of(&failover_schema, vals, "peer_addresses"),
			      *auth = val_of(&failover_schema, vals, "auth"),
			      *key = val_of(&failover_schema, vals, "key_file");
	char fpath[200];

	/* Secure by default: a pair that does not sign its heartbeats hands its service
	 * addresses to any host on a path that sends one. Running so must be said. */
	if (usable(L, auth, &f->auth) && usable(L, key, f->key_file)) {
		snprintf(fpath, sizeof(fpath), "%s.key_file", path);
		if (f->auth == GW_FAILOVER_AUTH_HMAC && !key && node)
			verr(L, node, path,
			     "missing key 'key_file': the pair's shared secret (e.g. "
			     "/etc/ibgw/failover.key, 16..1024 random octets, mode 0600), or "
			     "auth: none to run unauthenticated");
		else if (f->auth == GW_FAILOVER_AUTH_HMAC && key && !f->key_file[0])
			verr(L, key, fpath,
			     "\"\" with auth hmac-sha256: name the file holding the pair's shared "
			     "secret, or set auth: none to run unauthenticated");
		else if (f->auth == GW_FAILOVER_AUTH_NONE && f->key_file[0])
			verr(L, key, fpath, "given with auth: none; leave one of them out");
	}
	for (unsigned i = 0; i < f->n_groups; i++)
		if (f->groups[i].priority == 0)
			f->groups[i].priority = f->priority;
	if (usable(L, hb, &f->heartbeat_interval_ms) && usable(L, dead, &f->dead_interval_ms) &&
	    (hb || dead) && f->dead_interval_ms < 3 * f->heartbeat_interval_ms) {
		if (dead) {
			snprintf(fpath, sizeof(fpath), "%s.dead_interval_ms", path);
			verr(L, dead, fpath,
			     "%u is less than 3 heartbeat intervals (3 x %u = %u ms)",
			     f->dead_interval_ms, f->heartbeat_interval_ms,
			     3 * f->heartbeat_interval_ms);
		} else {
			snprintf(fpath, sizeof(fpath), "%s.heartbeat_interval_ms", path);
			verr(
			    L, hb, fpath,
			    "%u needs dead_interval_ms of at least %u (3 heartbeats; the default is %u)",
			    f->heartbeat_interval_ms, 3 * f->heartbeat_interval_ms,
			    f->dead_interval_ms);
		}
	}
	/* Left out, peer_addresses is empty: the same check (the printed form writes []). */
	if (paths && f->n_paths && f->n_paths == paths->n &&
	    (!peers || f->n_peer_addresses == peers->n) && f->n_peer_addresses != f->n_paths) {
		snprintf(fpath, sizeof(fpath), "%s.%s", path, peers ? "peer_addresses" : "paths");
		if (peers)
			verr(L, peers, fpath,
			     "%u addresses for %u paths (give the peer's address on each path, "
			     "in order)",
			     f->n_peer_addresses, f->n_paths);
		else
			verr(L, paths, fpath,
			     "%u path%s but no peer_addresses (give the peer's address on each "
			     "path, in order)",
			     f->n_paths, f->n_paths == 1 ? "" : "s");
	}
}

/* An export and an import table (kernel_routes', a tenant's): 253-255 are the kernel's
 * default, main and local tables, never ours to fill; the two must differ. */
static void check_ktables(struct load *L, const char *path, const struct gw_ynode *ex,
			  uint32_t *export_table, const struct gw_ynode *im, uint32_t *import_table)
{
	char fpath[200];

	if (ex && usable(L, ex, export_table) && *export_table >= 253 && *export_table <= 255) {
		snprintf(fpath, sizeof(fpath), "%s.export_table", path);
		verr(L, ex, fpath, "%u is a kernel table (default, main, local); choose another",
		     *export_table);
	}
	if (im && usable(L, im, import_table) && *import_table && *import_table == *export_table) {
		snprintf(fpath, sizeof(fpath), "%s.import_table", path);
		verr(L, im, fpath, "%u is also the export table; the two must differ",
		     *import_table);
	}
}

static void check_kernel_routes(struct load *L, void *base, const struct gw_ynode *const *vals,
				const char *path, const struct gw_ynode *node)
{
	struct gw_kernel_routes_config *k = base;

	(void)node;
	check_ktables(L, path, val_of(&kernel_routes_schema, vals, "export_table"),
		      &k->export_table, val_of(&kernel_routes_schema, vals, "import_table"),
		      &k->import_table);
}

static void check_tenant(struct load *L, void *base, const struct gw_ynode *const *vals,
			 const char *path, const struct gw_ynode *node)
{
	struct gw_tenant_config *t = base;
	const struct gw_ynode *nm = val_of(&tenant_schema, vals, "name"),
			      *ex = val_of(&tenant_schema, vals, "export_table"),
			      *im = val_of(&tenant_schema, vals, "import_table");
	char fpath[200];

	(void)node;
	if (nm && recorded(L, t->name) && !strcmp(t->name, "default")) {
		snprintf(fpath, sizeof(fpath), "%s.name", path);
		verr(L, nm, fpath,
		     "'default' is the tenant of everything that names none; it is not listed "
		     "(its kernel tables are kernel_routes')");
	}
	check_ktables(L, path, ex, &t->export_table, im, &t->import_table);
}

static void check_metrics(struct load *L, void *base, const struct gw_ynode *const *vals,
			  const char *path, const struct gw_ynode *node)
{
	struct gw_metrics_config *m = base;
	const struct gw_ynode *v = val_of(&metrics_schema, vals, "listen");
	struct sockaddr_storage ss;
	char fpath[200];

	(void)node;
	if (m->status_page && !m->listen[0]) {
		const struct gw_ynode *sp = val_of(&metrics_schema, vals, "status_page");

		snprintf(fpath, sizeof(fpath), "%s.status_page", path);
		verr(L, sp ? sp : node, fpath, "the status page needs metrics.listen (an address)");
	}
	if (!v || !m->listen[0] || ip_sockaddr_parse(m->listen, &ss, NULL) == 0)
		return;
	snprintf(fpath, sizeof(fpath), "%s.listen", path);
	verr(L, v, fpath, "'%s' is not ADDRESS:PORT (127.0.0.1:9464, [::1]:9464)", m->listen);
}

/* Two sockets on one path: the second would find the first live and refuse to start. */
static void check_control(struct load *L, void *base, const struct gw_ynode *const *vals,
			  const char *path, const struct gw_ynode *node)
{
	const struct gw_config *c = base;
	const struct gw_ynode *v = val_of(&control_schema, vals, "readonly_socket");
	char fpath[200];

	(void)node;
	if (!v || strcmp(c->readonly_socket, c->socket) != 0)
		return;
	snprintf(fpath, sizeof(fpath), "%s.readonly_socket", path);
	verr(L, v, fpath, "'%s' is also control.socket: the two sockets need their own paths",
	     c->readonly_socket);
}

/* The thresholds in order, and room in a full table for more than resolutions. */
static void check_neighbours(struct load *L, void *base, const struct gw_ynode *const *vals,
			     const char *path, const struct gw_ynode *node)
{
	struct gw_neigh_config *n = base;
	const struct gw_ynode *t1 = val_of(&neighbour_schema, vals, "gc_thresh1"),
			      *t2 = val_of(&neighbour_schema, vals, "gc_thresh2"),
			      *t3 = val_of(&neighbour_schema, vals, "gc_thresh3"),
			      *mu = val_of(&neighbour_schema, vals, "max_unresolved");
	bool ok1 = usable(L, t1, &n->gc_thresh1), ok2 = usable(L, t2, &n->gc_thresh2),
	     ok3 = usable(L, t3, &n->gc_thresh3);
	char fpath[200];

	(void)node;
	/* Point at the key given (the other is its default). */
	if (ok1 && ok2 && n->gc_thresh1 > n->gc_thresh2) {
		snprintf(fpath, sizeof(fpath), "%s.%s", path, t1 ? "gc_thresh1" : "gc_thresh2");
		verr(L, t1 ? t1 : t2, fpath, "gc_thresh1 (%u) is above gc_thresh2 (%u); want %s",
		     n->gc_thresh1, n->gc_thresh2, "gc_thresh1 <= gc_thresh2 <= gc_thresh3");
	}
	if (ok2 && ok3 && n->gc_thresh2 > n->gc_thresh3) {
		snprintf(fpath, sizeof(fpath), "%s.%s", path, t2 ? "gc_thresh2" : "gc_thresh3");
		verr(L, t2 ? t2 : t3, fpath, "gc_thresh2 (%u) is above gc_thresh3 (%u); want %s",
		     n->gc_thresh2, n->gc_thresh3, "gc_thresh1 <= gc_thresh2 <= gc_thresh3");
	}
	if (!mu) {
		if (ok3)
			n->max_unresolved = n->gc_thresh3 / 4;
	} else if (recorded(L, &n->max_unresolved) && ok3 && n->max_unresolved >= n->gc_thresh3) {
		snprintf(fpath, sizeof(fpath), "%s.max_unresolved", path);
		verr(
		    L, mu, fpath,
		    "%u would let resolutions take the whole table; want less than gc_thresh3 (%u)",
		    n->max_unresolved, n->gc_thresh3);
	}
}

/* park_max within the unresolved class's cap (msg_pool / 4: more could never be parked),
 * and its default from the pool given. */
static void check_punt(struct load *L, void *base, const struct gw_ynode *const *vals,
		       const char *path, const struct gw_ynode *node)
{
	struct gw_punt_config *p = base;
	const struct gw_ynode *mp = val_of(&punt_schema, vals, "msg_pool"),
			      *pm = val_of(&punt_schema, vals, "park_max");
	char fpath[200];

	(void)node;
	if (!usable(L, mp, &p->msg_pool))
		return;
	if (!pm) {
		p->park_max = p->msg_pool / 8;
	} else if (recorded(L, &p->park_max) && p->park_max > p->msg_pool / 4) {
		snprintf(fpath, sizeof(fpath), "%s.park_max", path);
		verr(
		    L, pm, fpath,
		    "%u is more than the unresolved class may hold; want at most msg_pool / 4 (%u)",
		    p->park_max, p->msg_pool / 4);
	}
}

/* ---- Checks across sections ---- */

struct named {
	const char *name;
	const void *where; /* the name field, for its position */
	bool ipoib;
};

static const struct named *find_name(const struct named *v, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

/* "route dev 'eth9' is not ..." with a suggestion among the names that would fit. */
static void bad_ref(struct load *L, const struct named *v, unsigned n, bool ipoib_only,
		    const void *field, const char *name, const char *what)
{
	const struct posrec *p = pos_of(L, field);
	const char *cands[128], *near;
	unsigned nc = 0;

	if (!p)
		return;
	for (unsigned i = 0; i < n && nc < 128; i++)
		if (!ipoib_only || v[i].ipoib)
			cands[nc++] = v[i].name;
	near = closest(name, cands, nc);
	gw_cfg_err(L->e, p->line, p->col, "%s '%s' is not %s%s%s%s", what, name,
		   ipoib_only ? "an IPoIB link" : "an IPoIB link or Ethernet interface",
		   near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
}

struct addr_use {
	const struct ip_prefix *p;
	const char *owner, *tenant;
};

unsigned gw_config_tenant_index(const struct gw_config *cfg, const char *name)
{
	for (unsigned i = 0; name[0] && i < cfg->n_tenants; i++)
		if (!strcmp(cfg->tenants[i].name, name))
			return i + 1;
	return 0;
}

/* "ipoib_links[0].tenant: 'bleu' is not in tenants (did you mean 'blue'?)" */
static void bad_tenant(struct load *L, const struct gw_config *c, const char *name,
		       const char *list, unsigned i)
{
	const struct posrec *p = pos_of(L, name);
	const char *cands[GW_TENANTS_MAX], *near;
	unsigned nc = 0;

	if (!p)
		return;
	for (unsigned k = 0; k < c->n_tenants; k++)
		cands[nc++] = c->tenants[k].name;
	near = closest(name, cands, nc);
	gw_cfg_err(L->e, p->line, p->col, "%s[%u].tenant: '%s' is not in tenants%s%s%s", list, i,
		   name, near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
}

/* A kernel table given to two owners (kernel_routes and the tenants): each would flush
 * the other's routes. */
struct ktable_use {
	uint32_t table;
	const void *where;
	const char *owner;
};

static void note_ktable(struct load *L, struct ktable_use *v, unsigned *n, uint32_t table,
			const void *where, const char *owner)
{
	const struct posrec *p = pos_of(L, where);

	if (!table)
		return;
	for (unsigned i = 0; i < *n; i++)
		if (v[i].table == table) {
			if (p)
				gw_cfg_err(L->e, p->line, p->col,
					   "kernel table %u is %s's already; each tenant needs "
					   "tables of its own",
					   table, v[i].owner);
			return;
		}
	v[(*n)++] = (struct ktable_use){ table, where, owner };
}

static void check_tenants(struct load *L, const struct gw_config *c)
{
	struct ktable_use kt[2 * GW_TENANTS_MAX];
	unsigned nk = 0;

	for (unsigned i = 0; i < c->n_tenants; i++) {
		const struct gw_tenant_config *t = &c->tenants[i];

		for (unsigned j = 0; j < i; j++)
			if (recorded(L, t->name) && !strcmp(t->name, c->tenants[j].name)) {
				const struct posrec *p = pos_of(L, t->name);

				gw_cfg_err(L->e, p->line, p->col,
					   "duplicate tenant '%s' (first at line %u)", t->name,
					   c->tenants[j].pos.line);
				break;
			}
	}
	if (c->kernel_routes.enabled) {
		note_ktable(L, kt, &nk, c->kernel_routes.export_table,
			    &c->kernel_routes.export_table, "kernel_routes");
		if (c->kernel_routes.import_table != c->kernel_routes.export_table)
			note_ktable(L, kt, &nk, c->kernel_routes.import_table,
				    &c->kernel_routes.import_table, "kernel_routes");
	}
	for (unsigned i = 0; i < c->n_tenants; i++) {
		const struct gw_tenant_config *t = &c->tenants[i];
		const uint32_t *tbl[2] = { &t->export_table, &t->import_table };

		for (unsigned k = 0; k < 2; k++) {
			const struct posrec *p = pos_of(L, tbl[k]);

			if (!*tbl[k])
				continue;
			if (!c->kernel_routes.enabled) {
				if (p)
					gw_cfg_err(
					    L->e, p->line, p->col,
					    "tenants '%s': a kernel table needs the "
					    "kernel_routes section (its protocol and metric)",
					    t->name);
				continue;
			}
			if (k == 0 || t->import_table != t->export_table)
				note_ktable(L, kt, &nk, *tbl[k], tbl[k], t->name);
		}
	}
	for (unsigned i = 0; i < c->n_ipoib_links; i++)
		if (c->ipoib_links[i].tenant[0] &&
		    !gw_config_tenant_index(c, c->ipoib_links[i].tenant))
			bad_tenant(L, c, c->ipoib_links[i].tenant, "ipoib_links", i);
	for (unsigned i = 0; i < c->n_eth_ifs; i++)
		if (c->eth_ifs[i].tenant[0] && !gw_config_tenant_index(c, c->eth_ifs[i].tenant))
			bad_tenant(L, c, c->eth_ifs[i].tenant, "ethernet_interfaces", i);
	for (unsigned i = 0; i < c->n_routes; i++)
		if (c->routes[i].tenant[0] && !gw_config_tenant_index(c, c->routes[i].tenant))
			bad_tenant(L, c, c->routes[i].tenant, "routes", i);
}

/* Routes in (prefix, metric, file) order: equal neighbours are duplicates. */
static int route_key_cmp(const void *a, const void *b)
{
	const struct gw_route_config *x = *(const struct gw_route_config *const *)a,
				     *y = *(const struct gw_route_config *const *)b;
	int d = (int)x->prefix.addr.family - (int)y->prefix.addr.family;

	if (!d)
		d = (int)x->prefix.len - (int)y->prefix.len;
	if (!d)
		d = memcmp(x->prefix.addr.bytes, y->prefix.addr.bytes,
			   sizeof(x->prefix.addr.bytes));
	if (!d)
		d = x->metric < y->metric ? -1 : x->metric > y->metric;
	if (!d)
		d = strcmp(x->tenant, y->tenant);
	if (!d)
		d = x < y ? -1 : x > y;
	return d;
}

/* The same prefix and metric twice: each later one refused, naming the first. Sorted,
 * not pairwise: a file may hold thousands of routes. */
static void duplicate_routes(struct load *L, const struct gw_config *c)
{
	const struct gw_route_config **v = calloc(c->n_routes ? c->n_routes : 1, sizeof(*v));
	const struct gw_route_config *first = NULL;
	unsigned n = 0;
	char b1[IP_PREFIX_STRLEN];

	if (!v) {
		L->e->oom = true;
		return;
	}
	for (unsigned i = 0; i < c->n_routes; i++)
		if (recorded(L, &c->routes[i].prefix))
			v[n++] = &c->routes[i];
	qsort(v, n, sizeof(*v), route_key_cmp);
	for (unsigned i = 0; i < n; i++) {
		const struct gw_route_config *r = v[i];

		if (first && first->metric == r->metric && first->prefix.len == r->prefix.len &&
		    ip_addr_equal(&first->prefix.addr, &r->prefix.addr) &&
		    !strcmp(first->tenant, r->tenant)) {
			const struct posrec *p = pos_of(L, &r->prefix);

			gw_cfg_err(
			    L->e, p->line, p->col,
			    "duplicate route %s (first at line %u); a backup route needs a different metric",
			    ip_prefix_format(&r->prefix, b1, sizeof(b1)),
			    pos_of(L, &first->prefix)->line);
			continue;
		}
		first = r;
	}
	free(v);
}

static void check_cross(struct load *L)
{
	struct gw_config *c = L->cfg;
	unsigned n_names = 0, n_addrs = 0;
	struct named *names = calloc(c->n_ipoib_links + c->n_eth_ifs + 1, sizeof(*names));
	struct addr_use *addrs;
	size_t total = 1;
	char b1[IP_PREFIX_STRLEN], b2[IP_PREFIX_STRLEN];

	for (unsigned i = 0; i < c->n_ipoib_links; i++)
		total += c->ipoib_links[i].n_addresses;
	for (unsigned i = 0; i < c->n_eth_ifs; i++)
		total += c->eth_ifs[i].n_addresses;
	addrs = calloc(total, sizeof(*addrs));
	if (!names || !addrs) {
		L->e->oom = true;
		goto out;
	}

	/* The heartbeat thread outranks the workers, which busy-poll: at the same priority
	 * or above, a loaded worker would keep it off its CPU. */
	if (c->worker_rt_priority && c->failover.enabled &&
	    c->worker_rt_priority >= c->failover.rt_priority &&
	    recorded(L, &c->worker_rt_priority)) {
		const struct posrec *p = pos_of(L, &c->worker_rt_priority);

		gw_cfg_err(L->e, p->line, p->col,
			   "gateway.worker_rt_priority %u must be below failover.rt_priority (%u): "
			   "the heartbeat thread must outrank the workers",
			   c->worker_rt_priority, c->failover.rt_priority);
	}

	/* Link and interface names share one namespace: routes name either with dev. */
	for (unsigned i = 0; i < c->n_ipoib_links + c->n_eth_ifs; i++) {
		bool ib = i < c->n_ipoib_links;
		const char *nm =
		    ib ? c->ipoib_links[i].name : c->eth_ifs[i - c->n_ipoib_links].name;
		const struct named *dup;
		const struct posrec *p;

		if (!recorded(L, nm))
			continue;
		dup = find_name(names, n_names, nm);
		p = pos_of(L, nm);
		if (dup) {
			gw_cfg_err(
			    L->e, p->line, p->col,
			    "duplicate name '%s' (first at line %u); links and interfaces need distinct names",
			    nm, pos_of(L, dup->where)->line);
			continue;
		}
		names[n_names++] = (struct named){ nm, nm, ib };
	}

	/* An af_xdp port owns its device's XDP hook and the AF_XDP sockets of its queues:
	 * two on one device cannot both open (af_packet ports beside one can). */
	for (unsigned i = 0; i < c->n_eth_ifs; i++) {
		const struct gw_eth_if_config *a = &c->eth_ifs[i];
		const char *da = a->device[0] ? a->device : a->name;

		if (a->backend != GW_ETH_BACKEND_AF_XDP)
			continue;
		for (unsigned j = 0; j < i; j++) {
			const struct gw_eth_if_config *b = &c->eth_ifs[j];
			const char *db = b->device[0] ? b->device : b->name;

			if (b->backend != GW_ETH_BACKEND_AF_XDP || strcmp(da, db) != 0)
				continue;
			gw_cfg_err(
			    L->e, a->pos.line, a->pos.column,
			    "ethernet_interfaces '%s': device %s has the af_xdp interface '%s' "
			    "already (line %u); af_xdp takes one interface per device (use "
			    "af_packet for the other VLANs)",
			    a->name, da, b->name, b->pos.line);
			break;
		}
	}

	for (unsigned i = 0; i < c->n_routes; i++) {
		struct gw_route_config *r = &c->routes[i];

		if (r->dev[0] && !find_name(names, n_names, r->dev))
			bad_ref(L, names, n_names, false, r->dev, r->dev, "route dev");
	}
	duplicate_routes(L, c);
	check_tenants(L, c);

	for (unsigned i = 0; i < c->n_gid_routes; i++) {
		struct gw_gid_route_config *g = &c->gid_routes[i];

		if (!g->link[0]) {
			if (c->n_ipoib_links)
				memcpy(g->link, c->ipoib_links[0].name, sizeof(g->link));
			else
				gw_cfg_err(
				    L->e, g->pos.line, g->pos.column,
				    "gid_routes[%u]: no IPoIB link to reach the routers through (add one to ipoib_links)",
				    i);
		} else if (!find_name(names, n_names, g->link) ||
			   !find_name(names, n_names, g->link)->ipoib) {
			bad_ref(L, names, n_names, true, g->link, g->link, "gid_route link");
		}
		if (!recorded(L, &g->prefix))
			continue;
		for (unsigned j = 0; j < i; j++) {
			const struct gw_gid_route_config *o = &c->gid_routes[j];

			if (o->prefix.len == g->prefix.len &&
			    ip_addr_equal(&o->prefix.addr, &g->prefix.addr) &&
			    recorded(L, &o->prefix)) {
				const struct posrec *p = pos_of(L, &g->prefix);

				gw_cfg_err(L->e, p->line, p->col,
					   "duplicate GID route %s (first at line %u)",
					   ip_prefix_format(&g->prefix, b1, sizeof(b1)),
					   pos_of(L, &o->prefix)->line);
				break;
			}
		}
	}

	if (c->failover.enabled) {
		struct gw_failover_config *f = &c->failover;

		for (unsigned i = 0; i < f->n_paths; i++)
			if (!find_name(names, n_names, f->paths[i]))
				bad_ref(L, names, n_names, false, f->paths[i], f->paths[i],
					"failover path");
		for (unsigned i = 0; i < f->n_groups; i++) {
			struct gw_ha_group_config *g = &f->groups[i];

			for (unsigned j = 0; j < i; j++)
				if (recorded(L, g->name) && recorded(L, f->groups[j].name) &&
				    strcmp(g->name, f->groups[j].name) == 0) {
					const struct posrec *p = pos_of(L, g->name);

					gw_cfg_err(L->e, p->line, p->col,
						   "duplicate group name '%s' (first at line %u)",
						   g->name, pos_of(L, f->groups[j].name)->line);
					break;
				}
			for (unsigned j = 0; j < g->n_addresses; j++) {
				struct gw_ha_address_config *a = &g->addresses[j];

				if (recorded(L, a->dev) && !find_name(names, n_names, a->dev))
					bad_ref(L, names, n_names, false, a->dev, a->dev,
						"address dev");
			}
		}
	}

	/* Two interfaces with overlapping subnets would make the route lookup ambiguous;
	 * in two tenants they are two tables' (addresses may repeat between tenants). */
	for (unsigned i = 0; i < c->n_ipoib_links + c->n_eth_ifs; i++) {
		bool ib = i < c->n_ipoib_links;
		const char *tenant =
		    ib ? c->ipoib_links[i].tenant : c->eth_ifs[i - c->n_ipoib_links].tenant;
		const struct ip_prefix *v =
		    ib ? c->ipoib_links[i].addresses : c->eth_ifs[i - c->n_ipoib_links].addresses;
		unsigned n = ib ? c->ipoib_links[i].n_addresses
				: c->eth_ifs[i - c->n_ipoib_links].n_addresses;
		const char *owner =
		    ib ? c->ipoib_links[i].name : c->eth_ifs[i - c->n_ipoib_links].name;

		for (unsigned j = 0; j < n; j++) {
			const struct posrec *p = pos_of(L, &v[j]);

			for (unsigned k = 0; k < n_addrs && p; k++) {
				const struct addr_use *o = &addrs[k];
				const struct posrec *op = pos_of(L, o->p);

				if (o->owner == owner && o->p->len == v[j].len &&
				    ip_addr_equal(&o->p->addr, &v[j].addr)) {
					gw_cfg_err(L->e, p->line, p->col,
						   "duplicate address %s (first at line %u)",
						   ip_prefix_format(&v[j], b1, sizeof(b1)),
						   op ? op->line : 0);
					break;
				}
				if (o->owner != owner && !strcmp(o->tenant, tenant) &&
				    ip_prefix_overlap(o->p, &v[j])) {
					gw_cfg_err(L->e, p->line, p->col,
						   "address %s overlaps %s on '%s' (line %u)",
						   ip_prefix_format(&v[j], b1, sizeof(b1)),
						   ip_prefix_format(o->p, b2, sizeof(b2)), o->owner,
						   op ? op->line : 0);
					break;
				}
			}
			addrs[n_addrs++] = (struct addr_use){ &v[j], owner, tenant };
		}
	}
out:
	free(names);
	free(addrs);
}

/* ---- Freeing ---- */

static void free_fields(const struct schema *s, void *base)
{
	for (unsigned i = 0; i < s->n; i++) {
		const struct field *f = &s->f[i];

		switch (f->type) {
		case T_SECTION:
			free_fields(f->sub, at(base, f->off));
			break;
		case T_LIST: {
			char *arr =
			    (f->flags & FL_FIXED) ? at(base, f->off) : get_ptr(base, f->off);
			unsigned n = get_count(base, f->n_off);

			for (unsigned j = 0; arr && j < n; j++)
				free_fields(f->sub, arr + j * f->sub->item_size);
			if (!(f->flags & FL_FIXED))
				free(arr);
			break;
		}
		case T_IFADDR_LIST:
		case T_NET_LIST:
		case T_ADDR_LIST:
		case T_NAME_LIST:
		case T_CPU_LIST:
			free(get_ptr(base, f->off));
			break;
		default:
			break;
		}
	}
}

void gw_config_free(struct gw_config *cfg)
{
	if (!cfg)
		return;
	free_fields(&top_schema, cfg);
	free(cfg);
}

void gw_config_errors_free(struct gw_config_errors *errs)
{
	if (!errs)
		return;
	for (unsigned i = 0; i < errs->n; i++)
		free(errs->msgs[i]);
	free(errs->msgs);
	errs->msgs = NULL;
	errs->n = 0;
}

/* ---- Loading ---- */

struct sortable {
	unsigned line, col, idx;
};

static int err_cmp(const void *a, const void *b)
{
	const struct sortable *x = a, *y = b;

	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	if (x->col != y->col)
		return x->col < y->col ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Sort by position (checks after the walk find things out of file order) and format. */
static void export_errors(struct gw_cfg_errs *e, struct gw_config_errors *out)
{
	unsigned n = e->n + (e->overflow || (e->oom && !e->n) ? 1 : 0);
	struct sortable *s = calloc(e->n + 1, sizeof(*s));
	char **msgs = calloc(n + 1, sizeof(*msgs));
	unsigned k = 0;

	if (!s || !msgs) {
		free(s);
		free(msgs);
		return;
	}
	for (unsigned i = 0; i < e->n; i++)
		s[i] = (struct sortable){ e->v[i].line, e->v[i].col, i };
	qsort(s, e->n, sizeof(*s), err_cmp);
	for (unsigned i = 0; i < e->n; i++) {
		const struct gw_cfg_err *x = &e->v[s[i].idx];
		int rc = x->line
			     ? asprintf(&msgs[k], "%s:%u:%u: %s", e->name, x->line, x->col, x->msg)
			     : asprintf(&msgs[k], "%s: %s", e->name, x->msg);

		if (rc >= 0)
			k++;
	}
	if (e->overflow && asprintf(&msgs[k], "%s:%u:%u: too many errors; stopping after %d",
				    e->name, e->over_line, e->over_col, GW_CFG_MAX_ERRORS) >= 0)
		k++;
	else if (e->oom && !e->n && asprintf(&msgs[k], "%s: out of memory", e->name) >= 0)
		k++;
	free(s);
	out->msgs = msgs;
	out->n = k;
}

static void errs_free(struct gw_cfg_errs *e)
{
	for (unsigned i = 0; i < e->n; i++)
		free(e->v[i].msg);
	free(e->v);
}

unsigned gw_config_rt_priority_max(const struct gw_config *cfg)
{
	unsigned hb = cfg->failover.enabled ? cfg->failover.rt_priority : 0;

	return hb > cfg->worker_rt_priority ? hb : cfg->worker_rt_priority;
}

int gw_config_load_buffer(const char *name, const char *buf, size_t len, struct gw_config **out,
			  struct gw_config_errors *errs)
{
	struct gw_cfg_errs e = { .name = name };
	struct gw_ynode *root = NULL;
	struct gw_config *cfg = NULL;
	struct load L = { .e = &e };
	int rc = -1;

	errs->msgs = NULL;
	errs->n = 0;
	if (len > GW_CFG_MAX_BYTES) {
		gw_cfg_err(&e, 1, 1, "file is larger than %u MiB", GW_CFG_MAX_BYTES >> 20);
		goto out;
	}
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		e.oom = true;
		goto out;
	}
	snprintf(cfg->source, sizeof(cfg->source), "%s", name);
	L.cfg = cfg;
	if (gw_yaml_parse(buf, len, &e, &root) < 0)
		goto out;
	apply_defaults(&L, &top_schema, cfg);
	if (root && root->kind != GW_YN_MAP && root->kind != GW_YN_NULL) {
		char d[64];

		gw_cfg_err(
		    &e, root->line, root->col,
		    "the top level must be a mapping of sections (gateway:, ipoib_links:, ...), got %s",
		    describe(root, d, sizeof(d)));
		goto out;
	}
	walk_map(&L, &top_schema, cfg, root && root->kind == GW_YN_MAP ? root : NULL, "");
	check_cross(&L);
	if (e.n == 0 && !e.oom) {
		*out = cfg;
		cfg = NULL;
		rc = 0;
	}
out:
	if (rc < 0)
		export_errors(&e, errs);
	gw_config_free(cfg);
	gw_ynode_free(root);
	errs_free(&e);
	free(L.pos);
	free(L.pos_idx);
	return rc;
}

static int load_error(const char *path, struct gw_config_errors *errs, const char *fmt, int err)
{
	errs->msgs = calloc(1, sizeof(*errs->msgs));
	errs->n = 0;
	if (errs->msgs && asprintf(&errs->msgs[0], fmt, path, strerror(err)) >= 0)
		errs->n = 1;
	return -1;
}

int gw_config_load(const char *path, struct gw_config **out, struct gw_config_errors *errs)
{
	size_t cap = GW_CFG_MAX_BYTES + 1, len = 0;
	char *buf = NULL;
	int fd, rc;

	errs->msgs = NULL;
	errs->n = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return load_error(path, errs, "%s: cannot open: %s", errno);
	/* Read up to one byte past the limit: enough to know the file is too big, without
	 * trusting st_size (pipes, /proc files). */
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return load_error(path, errs, "%s: cannot read: %s", ENOMEM);
	}
	while (len < cap) {
		ssize_t r = read(fd, buf + len, cap - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;

			close(fd);
			free(buf);
			return load_error(path, errs, "%s: cannot read: %s", err);
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	rc = gw_config_load_buffer(path, buf, len, out, errs);
	free(buf);
	return rc;
}

/* ---- Printing ---- */

/* Plain YAML when the text cannot be read as anything but a string. */
static bool needs_quotes(const char *s)
{
	static const char *const words[] = { "true", "false", "null", "yes", "no",
					     "on",   "off",   "y",    "n",   "~" };

	if (!*s)
		return true;
	if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_' ||
	      s[0] == '/'))
		return true;
	for (const char *c = s; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '/' || *c == '-'))
			return true;
	for (unsigned i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(s, words[i]) == 0)
			return true;
	return false;
}

static void print_string(FILE *out, const char *s)
{
	if (!needs_quotes(s)) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

/* Text of one scalar field as the file would spell it; false for non-scalars. */
static bool scalar_text(const struct field *f, const void *base, char *buf, size_t len)
{
	const void *p = cat(base, f->off);
	int v;

	switch (f->type) {
	case T_BOOL:
		snprintf(buf, len, "%s", *(const bool *)p ? "true" : "false");
		return true;
	case T_UINT:
	case T_PKEY:
		fmt_num(buf, len, (int64_t)get_uint(p, f->size), f->flags & FL_HEX);
		return true;
	case T_STR:
		snprintf(buf, len, "%s", (const char *)p);
		return true;
	case T_ENUM:
		memcpy(&v, p, sizeof(v));
		snprintf(buf, len, "%s", enum_to_name(f->enums, v));
		return true;
	case T_MODE:
		snprintf(buf, len, "%04o", (unsigned)get_uint(p, 4));
		return true;
	case T_ADDR:
		ip_addr_format(p, buf, len);
		return true;
	case T_IFADDR:
	case T_NET:
	case T_GID_NET:
		ip_prefix_format(p, buf, len);
		return true;
	default:
		return false;
	}
}

static void elem_text(enum ftype t, const void *e, char *buf, size_t len)
{
	switch (t) {
	case T_IFADDR_LIST:
	case T_NET_LIST:
		ip_prefix_format(e, buf, len);
		break;
	case T_ADDR_LIST:
	case T_VIA:
		ip_addr_format(e, buf, len);
		break;
	case T_NAME_LIST:
		snprintf(buf, len, "%s", (const char *)e);
		break;
	default:
		snprintf(buf, len, "%d", *(const int *)e);
		break;
	}
}

static bool skip_field(const struct field *f, const void *base)
{
	if ((f->flags & FL_OMIT_EMPTY) && f->type == T_STR && !*(const char *)cat(base, f->off))
		return true;
	if ((f->flags & FL_OMIT_EMPTY) && f->type == T_LIST && !get_count(base, f->n_off))
		return true;
	if ((f->flags & FL_OMIT_EMPTY) && f->type == T_UINT && f->size == 1 &&
	    !*(const uint8_t *)cat(base, f->off))
		return true;
	if ((f->flags & FL_OPTIONAL) && !*(const bool *)cat(base, f->n_off))
		return true;
	return false;
}

static void print_fields(FILE *out, const struct schema *s, const void *base, int indent, bool dash)
{
	char buf[GW_PATH_MAX + 8];

	for (unsigned i = 0; i < s->n; i++) {
		const struct field *f = &s->f[i];

		if (skip_field(f, base))
			continue;
		if (dash)
			fprintf(out, "%*s- ", indent - 2, "");
		else
			fprintf(out, "%*s", indent, "");
		dash = false;
		fprintf(out, "%s:", f->key);
		if (f->type == T_SECTION) {
			fputc('\n', out);
			print_fields(out, f->sub, cat(base, f->off), indent + 2, false);
		} else if (f->type == T_LIST) {
			const char *arr =
			    (f->flags & FL_FIXED) ? cat(base, f->off) : get_ptr(base, f->off);
			unsigned n = get_count(base, f->n_off);

			fputs(n ? "\n" : " []\n", out);
			for (unsigned j = 0; j < n; j++)
				print_fields(out, f->sub, arr + j * f->sub->item_size, indent + 4,
					     true);
		} else if (scalar_text(f, base, buf, sizeof(buf))) {
			fputc(' ', out);
			if (f->type == T_STR)
				print_string(out, buf);
			else
				fputs(buf, out);
			fputc('\n', out);
		} else { /* scalar lists */
			const char *arr =
			    f->type == T_VIA ? cat(base, f->off) : get_ptr(base, f->off);
			unsigned n = get_count(base, f->n_off);
			size_t esz = f->type == T_VIA ? sizeof(struct ip_addr) : elem_size(f->type);

			fputs(n ? "\n" : " []\n", out);
			for (unsigned j = 0; j < n; j++) {
				elem_text(f->type, arr + j * esz, buf, sizeof(buf));
				fprintf(out, "%*s- ", indent + 2, "");
				if (f->type == T_NAME_LIST)
					print_string(out, buf);
				else
					fputs(buf, out);
				fputc('\n', out);
			}
		}
	}
}

void gw_config_print_yaml(const struct gw_config *cfg, FILE *out)
{
	print_fields(out, &top_schema, cfg, 0, false);
}

/* ---- JSON ---- */

static struct json_object *fields_to_json(const struct schema *s, const void *base)
{
	struct json_object *o = json_object_new_object();
	char buf[GW_PATH_MAX + 8];

	for (unsigned i = 0; o && i < s->n; i++) {
		const struct field *f = &s->f[i];
		struct json_object *v = NULL;

		if (skip_field(f, base))
			continue;
		if (f->type == T_SECTION) {
			v = fields_to_json(f->sub, cat(base, f->off));
		} else if (f->type == T_LIST) {
			const char *arr =
			    (f->flags & FL_FIXED) ? cat(base, f->off) : get_ptr(base, f->off);
			unsigned n = get_count(base, f->n_off);

			v = json_object_new_array();
			for (unsigned j = 0; v && j < n; j++)
				json_object_array_add(
				    v, fields_to_json(f->sub, arr + j * f->sub->item_size));
		} else if (f->type == T_BOOL) {
			v = json_object_new_boolean(*(const bool *)cat(base, f->off));
		} else if (f->type == T_UINT && !(f->flags & FL_HEX)) {
			v = json_object_new_int64((int64_t)get_uint(cat(base, f->off), f->size));
		} else if (scalar_text(f, base, buf, sizeof(buf))) {
			v = json_object_new_string(buf);
		} else {
			const char *arr =
			    f->type == T_VIA ? cat(base, f->off) : get_ptr(base, f->off);
			unsigned n = get_count(base, f->n_off);
			size_t esz = f->type == T_VIA ? sizeof(struct ip_addr) : elem_size(f->type);

			v = json_object_new_array();
			for (unsigned j = 0; v && j < n; j++) {
				if (f->type == T_CPU_LIST) {
					json_object_array_add(
					    v, json_object_new_int(
						   *(const int *)(const void *)(arr + j * esz)));
					continue;
				}
				elem_text(f->type, arr + j * esz, buf, sizeof(buf));
				json_object_array_add(v, json_object_new_string(buf));
			}
		}
		json_object_object_add(o, f->key, v);
	}
	return o;
}

struct json_object *gw_config_to_json(const struct gw_config *cfg)
{
	return fields_to_json(&top_schema, cfg);
}

/* ---- Reference (docs/config.md is generated from this) ---- */

static const char *type_doc(const struct field *f, char *buf, size_t len)
{
	switch (f->type) {
	case T_SECTION:
		return "mapping";
	case T_LIST:
		return "list of mappings";
	case T_BOOL:
		return "true \\| false";
	case T_UINT:
		return "integer";
	case T_STR:
		return f->flags & FL_NAME ? "name" : f->flags & FL_ABSPATH ? "path" : "string";
	case T_ENUM: {
		size_t l = 0;

		buf[0] = '\0';
		for (const struct enum_name *e = f->enums; e->name && l < len; e++)
			l += (size_t)snprintf(buf + l, len - l, "%s%s",
					      e == f->enums ? "" : " \\| ", e->name);
		return buf;
	}
	case T_PKEY:
		return "P_Key";
	case T_MODE:
		return "octal mode";
	case T_ADDR:
		return "address";
	case T_IFADDR:
		return "address/length";
	case T_NET:
		return "prefix";
	case T_GID_NET:
		return "GID prefix";
	case T_IFADDR_LIST:
		return "list of address/length";
	case T_NET_LIST:
		return "list of prefixes";
	case T_ADDR_LIST:
		return "list of addresses";
	case T_NAME_LIST:
		return "list of names";
	case T_CPU_LIST:
		return "list of integers";
	case T_VIA:
		return "address or list";
	}
	return "";
}

static void reference(FILE *out, const struct schema *s, const char *title)
{
	char tbuf[128], range[64], lo[24], hi[24];

	fprintf(out,
		"### `%s`\n\n| key | type | default | range | meaning |\n|---|---|---|---|---|\n",
		title);
	for (unsigned i = 0; i < s->n; i++) {
		const struct field *f = &s->f[i];
		const char *def = f->def_doc ? f->def_doc : f->def;
		bool code = !f->def_doc; /* a literal value, not a description */

		range[0] = '\0';
		if (f->type == T_UINT || f->type == T_PKEY) {
			fmt_num(lo, sizeof(lo), f->min, f->flags & FL_HEX);
			fmt_num(hi, sizeof(hi), f->max, f->flags & FL_HEX);
			snprintf(range, sizeof(range), "%s..%s", lo, hi);
		} else if (f->type == T_MODE) {
			snprintf(range, sizeof(range), "0000..0777");
		} else if (f->type == T_STR) {
			snprintf(range, sizeof(range), "%u characters",
				 f->flags & FL_SUNPATH  ? 107
				 : f->flags & FL_IFNAME ? 15
							: f->size - 1);
		} else if (f->type == T_LIST || f->type == T_VIA ||
			   (f->type >= T_IFADDR_LIST && f->type <= T_CPU_LIST)) {
			snprintf(range, sizeof(range), "at most %u", f->size);
		}
		if (f->flags & FL_REQUIRED)
			def = "required", code = false;
		else if (f->type == T_SECTION) /* a section inside a section: its own table */
			def = "below", code = false;
		else if (!def && (f->type == T_LIST || f->type == T_VIA ||
				  (f->type >= T_IFADDR_LIST && f->type <= T_CPU_LIST)))
			def = "[]";
		else if (!def)
			def = "none", code = false;
		else if (!*def)
			def = "\"\"";
		fprintf(out, "| `%s` | %s | %s%s%s | %s | %s |\n", f->key,
			type_doc(f, tbuf, sizeof(tbuf)), code ? "`" : "", def, code ? "`" : "",
			range, f->help);
	}
	fputc('\n', out);
	for (unsigned i = 0; i < s->n; i++) {
		char sub[128];

		if (s->f[i].type != T_SECTION && s->f[i].type != T_LIST)
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s%s", s == &top_schema ? "" : title,
			 s == &top_schema ? "" : ".", s->f[i].key,
			 s->f[i].type == T_LIST ? "[]" : "");
		reference(out, s->f[i].sub, sub);
	}
}

void gw_config_print_reference(FILE *out)
{
	char tbuf[128];

	fputs("### top level\n\n| key | type | meaning |\n|---|---|---|\n", out);
	for (unsigned i = 0; i < top_schema.n; i++)
		fprintf(out, "| `%s` | %s | %s |\n", top_fields[i].key,
			type_doc(&top_fields[i], tbuf, sizeof(tbuf)), top_fields[i].help);
	fputc('\n', out);
	for (unsigned i = 0; i < top_schema.n; i++) {
		char sub[64];

		snprintf(sub, sizeof(sub), "%s%s", top_fields[i].key,
			 top_fields[i].type == T_LIST ? "[]" : "");
		reference(out, top_fields[i].sub, sub);
	}
}
