/*
 * The simulated fabric's switching core: ports, their QPs and multicast attachments,
 * and the path of one packet from the port that sent it to the QPs that receive it,
 * with every check a switch and a receiving HCA make. No sockets and no files: the
 * program (main.c) feeds it packets and hands it two callbacks, so unit tests and fuzz
 * harnesses drive the same code directly.
 *
 * A packet's path (see docs/simulated-rack.md, "Data layer"):
 *   ingress   the sending port is up; ib_packet_parse (lengths, VCRC, headers, ICRC);
 *             the sending QP exists and fits the opcode, DETH SrcQP is that QP; SLID
 *             within the port's LIDs (LMC); GRH SGID the port's GID; BTH P_Key the
 *             sending QP's (QP1: any entry of the table); no controlled Q_Key from an
 *             unprivileged port; payload not above the port's MTU; loss (fabric-wide,
 *             sender's node)
 *   delay     held for the configured milliseconds (fabric + sender's node + unicast
 *             receiver's node), in order of (due time, arrival)
 *   route     unicast DLID -> the port owning it (LMC honoured), else no_route;
 *             multicast DLID -> every QP attached to (GRH DGID, DLID) on any port,
 *             except the sending QP itself
 *   egress    (per receiving QP) port up; loss (receiver's node); P_Key match against
 *             the QP's P_Key (QP1: any entry of the table): equal base, at least one
 *             full member; the QP exists and has the opcode's transport; UD: Q_Key
 *             equals the QP's (QP1: 0x80010000); unicast GRH DGID is the port's GID;
 *             payload not above its MTU; the program could hand it over
 * Each refused packet (or refused delivery of a multicast packet) is counted once, by
 * reason, fabric-wide and on the port it concerns.
 *
 * Threads: one. Every function is called from the thread that owns the fabric.
 */
#ifndef IBGW_SIM_FABRIC_FABRIC_H
#define IBGW_SIM_FABRIC_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"

#define FABRIC_PORTS_MAX   64
#define FABRIC_NODES_MAX   128  /* node names with settings (link, loss, delay) */
#define FABRIC_QPS_MAX     4096 /* per port, QP0/QP1 not included */
#define FABRIC_MCAST_MAX   4096 /* QP-to-group attachments, fabric-wide */
#define FABRIC_DELAY_SLOTS 4096 /* packets in flight while a delay is set */
#define FABRIC_DELAY_MAX   60000
#define FABRIC_PPM         1000000u /* loss is in parts per million */
#define FABRIC_SUBNETS_MAX 4        /* GID prefixes: each has its own LIDs */
#define FABRIC_ROUTERS_MAX 8
#define FABRIC_ROUTE_DEPTH 8 /* routers one packet may cross inside the fabric */

/* Why a packet (or one delivery of a multicast packet) was dropped. */
enum fabric_drop {
	FABRIC_OK = 0,
	FABRIC_DROP_BAD_LENGTH, /* LRH PktLen, GRH PayLen, pad, truncated */
	FABRIC_DROP_BAD_HEADER, /* LVer, LNH, IPVer, NxtHdr, TVer, opcode */
	FABRIC_DROP_BAD_VCRC,
	FABRIC_DROP_BAD_ICRC,
	FABRIC_DROP_LINK_DOWN,       /* sending or receiving port down */
	FABRIC_DROP_LOSS,            /* loss injected on command */
	FABRIC_DROP_SRC_QP,          /* sending QP unknown, wrong type, or DETH SrcQP not it */
	FABRIC_DROP_SLID,            /* SLID not one of the sending port's LIDs */
	FABRIC_DROP_SGID,            /* GRH SGID not the sending port's GID */
	FABRIC_DROP_SRC_PKEY,        /* BTH P_Key not in the sending port's table */
	FABRIC_DROP_QKEY_CONTROLLED, /* controlled Q_Key from an unprivileged port */
	FABRIC_DROP_NO_ROUTE,        /* no port owns the DLID */
	FABRIC_DROP_MCAST_HDR,       /* multicast without GRH, MGID DGID or DestQP 0xFFFFFF */
	FABRIC_DROP_MCAST_NO_MEMBER, /* no QP (but the sender) attached to the group */
	FABRIC_DROP_PKEY,            /* no P_Key of the receiving port matches */
	FABRIC_DROP_PKEY_LIMITED,    /* only limited-limited matches: refused */
	FABRIC_DROP_DGID,            /* GRH DGID is not the receiving port's GID */
	FABRIC_DROP_NO_QP,           /* no such QP on the receiving port */
	FABRIC_DROP_QP_TYPE,         /* the QP's transport is not the opcode's */
	FABRIC_DROP_QKEY,            /* Q_Key differs from the receiving QP's */
	FABRIC_DROP_MTU,             /* payload above the sending or receiving port's MTU */
	FABRIC_DROP_RX_OVERFLOW,     /* the receiving port could not take it (socket full) */
	FABRIC_DROP_DELAY_OVERFLOW,  /* too many packets held by a delay */
	FABRIC_DROP_ROUTER_HDR,      /* to a router: no GRH, or DGID/DLID multicast disagree */
	FABRIC_DROP_HOP_LIMIT,       /* to a router with hop limit 0 or 1, or a routing loop */
	FABRIC_DROP_ROUTER_NO_ROUTE, /* no route for the DGID at the router, or no member */
	FABRIC_DROP_COUNT
};

/* Counter name ("bad_icrc") and one-line description. */
const char *fabric_drop_name(enum fabric_drop reason);
const char *fabric_drop_str(enum fabric_drop reason);
/* The fabric's reason for a parse error of ib_packet_parse. */
enum fabric_drop fabric_drop_from_parse(enum ib_pkt_err err);

struct fabric_ops {
	/* Hand a packet to QP qpn of port; 0, or -EAGAIN when the port cannot take it
	 * (counted as rx_overflow). */
	int (*deliver)(void *arg, int port, uint32_t qpn, const uint8_t *pkt, size_t len);
	/* A port's link went down or up (tell the client). May be NULL. */
	void (*port_state)(void *arg, int port, bool up);
	/* Every packet once, when its fate is known: dropped is true when it reached no
	 * QP. May be NULL. */
	void (*capture)(void *arg, const uint8_t *pkt, size_t len, bool dropped, uint64_t now_ns);
};

struct fabric_config {
	uint64_t seed; /* loss PRNG; 0 picks a fixed default */
};

struct fabric;

int fabric_new(const struct fabric_config *cfg, const struct fabric_ops *ops, void *arg,
	       struct fabric **out);
void fabric_free(struct fabric *f);

/*
 * Ports. fabric_port_add checks the identity and that no attached port already owns
 * one of its LIDs (-EADDRINUSE) or its GUID (-EEXIST); -ENOSPC when full. The port
 * starts up unless its node's link was set down. *why gets a reason on failure.
 */
int fabric_port_add(struct fabric *f, const struct simfab_port_info *info, int *port,
		    const char **why);
int fabric_port_update(struct fabric *f, int port, const struct simfab_port_info *info,
		       const char **why);
void fabric_port_remove(struct fabric *f, int port);
const struct simfab_port_info *fabric_port_info(const struct fabric *f, int port);
bool fabric_port_up(const struct fabric *f, int port);

/* QPs of a port. fabric_qp_create assigns the QPN. -EPERM: controlled Q_Key on an
 * unprivileged port; -ENOENT: no such QP; -ENOSPC: table full. */
int fabric_qp_create(struct fabric *f, int port, enum simfab_qp_type type, uint32_t qkey,
		     uint32_t *qpn);
/* With the P_Key index the QP sends with and accepts (-EINVAL: not in the table). */
int fabric_qp_create_pkey(struct fabric *f, int port, enum simfab_qp_type type, uint16_t pkey_index,
			  uint32_t qkey, uint32_t *qpn);
int fabric_qp_modify(struct fabric *f, int port, uint32_t qpn, uint32_t qkey);
/* The same, also moving the QP to P_Key index pkey_index (-1: unchanged; -EINVAL
 * beyond the port's table). */
int fabric_qp_modify_pkey(struct fabric *f, int port, uint32_t qpn, int pkey_index, uint32_t qkey);
int fabric_qp_destroy(struct fabric *f, int port, uint32_t qpn);
/* -EINVAL: not a UD QP; -EEXIST / -ENOENT: (not) attached already. */
int fabric_mcast_attach(struct fabric *f, int port, uint32_t qpn, const union ib_gid *mgid,
			uint16_t mlid);
int fabric_mcast_detach(struct fabric *f, int port, uint32_t qpn, const union ib_gid *mgid,
			uint16_t mlid);

/*
 * Routers (sim/fabric/router.h): a router node's ports are fabric ports no client owns,
 * on the subnet of their GID prefix (each prefix has its own LIDs). A packet whose DLID
 * is a router port's LID (or a group the router joined there) goes to the router, which
 * sends it on out of another of its ports, rewritten. Settings by node name, as ibsim
 * names the router; made on first use.
 *   fabric_router_port   a port's identity (port_num 1..ROUTER_PORTS_MAX, LID, GUID,
 *                        GID prefix, MTU code 1..5); again: updated
 *   fabric_router_route  prefix/plen -> egress port, next hop LID (0: direct)
 *   fabric_router_mcast  joined to mgid on port_num with that subnet's MLID (0: left)
 *   fabric_router_proxy  every group under prefix/plen joined on demand (router.h)
 * -EINVAL: bad value; -ENOENT: no such router or port; -ENOSPC: tables full; port
 * identities as fabric_port_add (*why says).
 */
int fabric_router_port(struct fabric *f, const char *name, unsigned port_num, uint16_t lid,
		       uint64_t guid, uint64_t gid_prefix, uint8_t mtu, const char **why);
int fabric_router_route(struct fabric *f, const char *name, const union ib_gid *prefix,
			unsigned plen, unsigned port_num, uint16_t next_hop);
int fabric_router_mcast(struct fabric *f, const char *name, const union ib_gid *mgid,
			unsigned port_num, uint16_t mlid);
int fabric_router_proxy(struct fabric *f, const char *name, const union ib_gid *prefix,
			unsigned plen);

/* What happened to one packet handed to fabric_packet. */
struct fabric_verdict {
	unsigned delivered;     /* QPs it reached now */
	unsigned refused;       /* deliveries refused (multicast: per receiving QP) */
	enum fabric_drop first; /* reason of the first refusal, FABRIC_OK if none */
	bool held;              /* queued by a delay: its fate comes at fabric_poll */
	unsigned routed;        /* copies routers forwarded (each captured on its subnet) */
};

/* Switch one packet (len octets, LRH..VCRC) sent by QP src_qpn of port. */
void fabric_packet(struct fabric *f, int port, uint32_t src_qpn, const uint8_t *pkt, size_t len,
		   uint64_t now_ns, struct fabric_verdict *v);

/* Release the held packets whose time has come; returns how many. */
unsigned fabric_poll(struct fabric *f, uint64_t now_ns);
/* Monotonic deadline of the next held packet, 0 when none is held. */
uint64_t fabric_next_deadline(const struct fabric *f);

/*
 * Settings by node name (they outlast the node's connection: a node set down stays
 * down when it reconnects). name NULL: fabric-wide (loss and delay only).
 * Loss in parts per million (0..1000000), delay in ms (0..FABRIC_DELAY_MAX).
 * -EINVAL out of range; -ENOSPC: too many node names.
 */
int fabric_set_link(struct fabric *f, const char *name, bool up);
/* One port of a node (port_num 1..FABRIC_LINK_PORT_MAX; 0: the whole node, as
 * fabric_set_link; setting the whole node up also clears its ports' own settings).
 * Ports whose state changes are told (ops.port_state). */
#define FABRIC_LINK_PORT_MAX 63
int fabric_set_port_link(struct fabric *f, const char *name, unsigned port_num, bool up);
int fabric_set_loss(struct fabric *f, const char *name, uint32_t ppm);
int fabric_set_delay(struct fabric *f, const char *name, uint32_t ms);

/* Counters of a port (or a node: all its ports). */
struct fabric_port_stats {
	uint64_t rx_packets, rx_bytes;       /* sent by the port into the fabric */
	uint64_t tx_packets, tx_bytes;       /* delivered to the port's QPs */
	uint64_t drop_in[FABRIC_DROP_COUNT]; /* its packets refused (by the fabric or a receiver) */
	uint64_t drop_out[FABRIC_DROP_COUNT]; /* packets to it refused at it */
};
/* Settings and counters of the i-th node name (0..), -ENOENT past the last; i = -1:
 * the fabric-wide loss and delay (name and st NULL). A node's counters sum its ports'
 * since the fabric started: they outlast the connections. */
struct fabric_settings {
	const char *name;
	bool down;
	uint64_t ports_down; /* bit N: port N set down alone */
	uint32_t loss_ppm, delay_ms;
	const struct fabric_port_stats *st;
};
int fabric_get_settings(const struct fabric *f, int i, struct fabric_settings *out);

/* Count a drop the program saw (rx_overflow when a send to port fails). */
void fabric_count_drop(struct fabric *f, int port, enum fabric_drop reason);

struct fabric_stats {
	uint64_t packets, delivered;
	uint64_t routed; /* copies routers sent on (each then delivered or dropped) */
	uint64_t drops[FABRIC_DROP_COUNT];
	uint64_t parse[IB_PKT_ERR_COUNT]; /* ib_packet_parse's detailed reasons */
	unsigned held;
};
void fabric_stats(const struct fabric *f, struct fabric_stats *out);
const struct fabric_port_stats *fabric_port_stats(const struct fabric *f, int port);

/* The whole state and counters as one JSON text (malloc'ed; NULL on ENOMEM). */
char *fabric_stats_json(const struct fabric *f);

/* The i-th router (0..FABRIC_ROUTERS_MAX-1): its tables and name, NULL when unused. */
const struct router *fabric_router_get(const struct fabric *f, int i, const char **name);

/*
 * Control commands (one line of text; see docs/simulated-rack.md):
 *   link NODE down|up [PORT] | loss PERCENT [NODE] | delay MS [NODE] | stats
 *   capture start FILE [SECONDS] | capture stop
 *   router NODE PORT LID GUID PREFIX MTU   (GUID, PREFIX: 64-bit numbers; MTU in octets)
 *   route NODE GID/LEN PORT direct|LID | mcast NODE MGID PORT MLID
 *   mcast-proxy NODE MGID/LEN
 * Numbers: decimal, or hexadecimal with 0x.
 * PERCENT is a decimal number 0..100 with at most 4 decimals. fabric_cmd_parse fills
 * cmd (name and file point into a copy inside cmd) or returns -EINVAL with a reason.
 */
enum fabric_cmd_kind {
	FABRIC_CMD_LINK = 1,
	FABRIC_CMD_LOSS,
	FABRIC_CMD_DELAY,
	FABRIC_CMD_STATS,
	FABRIC_CMD_CAPTURE_START,
	FABRIC_CMD_CAPTURE_STOP,
	FABRIC_CMD_ROUTER_PORT, /* router NODE PORT LID GUID PREFIX MTU */
	FABRIC_CMD_ROUTE,       /* route NODE GID/LEN PORT direct|LID */
	FABRIC_CMD_MCAST,       /* mcast NODE MGID PORT MLID (MLID 0: leave) */
	FABRIC_CMD_MCAST_PROXY, /* mcast-proxy NODE MGID/LEN */
};
#define FABRIC_CMD_MAX 512
struct fabric_cmd {
	enum fabric_cmd_kind kind;
	const char *name; /* node, or NULL for fabric-wide */
	const char *file;
	bool up;
	uint32_t value; /* loss ppm, delay ms, capture seconds (0: until stopped) */
	/* router, route, mcast: */
	uint32_t port, lid; /* lid: router port LID, route next hop (0 direct), MLID */
	uint64_t guid, prefix;
	uint8_t mtu, plen; /* MTU code 1..5; route prefix length */
	union ib_gid gid;  /* route prefix, MGID */
	char text[FABRIC_CMD_MAX];
};
int fabric_cmd_parse(const char *line, size_t len, struct fabric_cmd *cmd, const char **why);

#endif
