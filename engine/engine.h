/*
 * engine: the forwarding engine's shared state (prefix fwd_): the interface table, the
 * knobs, the FIB, the neighbour tables, the per-worker rings and counters. The data
 * path itself is engine/forward.h (per packet) and engine/worker.h (threads, ports, batches);
 * the control thread's side of the rings is engine/slowpath.h. docs/dataplane.md is the
 * design.
 *
 * Snapshots. Everything a worker reads per packet, except the FIB and neighbour
 * entries (which have their own RCU), is one immutable struct fwd_snap: the interface
 * table (gateway-level index -> kind, port, MAC / IPoIB address, VLAN, MTU, up/down,
 * addresses, proxy settings, neighbour table) and the knobs (MSS clamping, martian
 * lists, ICMP limits). The control thread changes it by copying the snapshot, editing
 * the copy and publishing it (release store); the old one is freed through cfg.defer
 * after an RCU grace period (liburcu QSBR's call_rcu in the daemon). A worker loads the
 * snapshot once per loop turn (fwd_engine_snap) and uses it until its next quiescent
 * state, so one packet never sees half a change.
 *
 * Interface indexes are the gateway's own (1..FWD_IF_MAX-1), and they are the ifindex
 * of the route table's next hops: the daemon adds routes with these indexes, and the
 * engine adds the connected and local routes of the interface addresses itself.
 *
 * Rings. Each worker has a pair of SPSC rings (engine/ring.h) with the control thread, of
 * struct fwd_msg pointers. Messages come from two fixed pools per worker, one owned by
 * the worker (punts) and one by the control thread (frames to send); a message goes
 * back to its owner through the opposite ring once handled. Each ring is sized to hold
 * both pools, so a return never finds it full: nothing is ever lost or allocated per
 * packet.
 *
 * Worker slots. A worker's rings, pools and counters live in a slot that outlives its
 * thread: when fwd_worker_set_count stops a worker, the slot is retired, not freed,
 * because its messages may still sit parked in neighbour queues or in the control
 * thread's hands. A retired slot belongs to the control thread alone: its messages go
 * straight back to their pools, and a parked one that is released is copied into a
 * message of the egress interface's (running) worker. A later increase reuses it.
 *
 * Threads: every function here is for the control thread, except fwd_engine_snap
 * and the inline readers, which workers call (inside their RCU read-side
 * state); fwd_engine_stats may be called from any thread (counters are relaxed atomics).
 */
#ifndef IBGW_ENGINE_ENGINE_H
#define IBGW_ENGINE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/eth_port.h"
#include "port/ib_port.h"
#include "pkt/icmp.h"
#include "pkt/ip.h"
#include "table/neigh.h"
#include "pkt/proxy.h"
#include "table/route.h"
#include "lib/addr.h"
#include "lib/ipoib.h"

struct fwd_engine;
struct fwd_if_ops;
struct ipoib_link;
struct ring;

#define FWD_IF_MAX       32 /* interface indexes 1..31 */
#define FWD_IF_NAME_MAX  16
#define FWD_IF_MAX_ADDRS 8
#define FWD_IF_MAX_PROXY 16 /* configured proxy prefixes per interface */
#define FWD_MARTIAN_MAX  16 /* extra martian prefixes per family and direction */
#define FWD_WORKERS_MAX  16
#define FWD_MSG_DATA     4200 /* bytes a message holds: an IPoIB 4092 packet + headers */

enum fwd_if_kind {
	FWD_IF_NONE = 0,
	FWD_IF_ETH,   /* an Ethernet port (device, VLAN) */
	FWD_IF_IPOIB, /* an IPoIB link on an IB port */
};

/* The proxy settings of one interface (side A: requests that arrive here are answered
 * for addresses that live on the other interfaces). */
struct fwd_proxy_config {
	bool proxy_arp, proxy_nd;
	bool answer_unresolved; /* proxy_cfg.answer_unresolved */
	bool defend_dad;        /* proxy_cfg.defend_dad (default on: set it) */
	bool router;            /* NA router flag */
	unsigned n_prefixes;
	/* Addresses inside these are answered for on the OTHER interfaces (they live here). */
	struct ip_prefix prefixes[FWD_IF_MAX_PROXY];
};

/*
 * One interface as workers see it. Immutable inside a snapshot.
 * Owner: control thread (writes a new snapshot); workers read.
 */
struct fwd_if {
	uint32_t index; /* 0: slot unused */
	uint32_t gen;   /* which interface of that index: every add takes a new one */
	enum fwd_if_kind kind;
	char name[FWD_IF_NAME_MAX];
	bool up;
	uint32_t mtu; /* IP MTU: Ethernet MTU; IPoIB: the link's UD MTU (CM later) */
	/* Both kinds: the worker whose pools and rings carry the control thread's sends.
	 * IPoIB: also where the port's queues start: queue q of the port is polled by
	 * worker (worker + q) % fwd_snap.pollers (Ethernet: queue q by worker
	 * q % pollers). Every worker transmits on any port (a packet leaves through its
	 * egress port from the worker that received it): on an IB port through the queue
	 * of its own number (the port serialises a queue internally, uncontended while
	 * there are as many queues as workers); on an Ethernet port through its own queue
	 * (at least as many as workers: fwd_engine_if_add and fwd_worker_set_count see to
	 * it), unlocked. */
	unsigned worker;
	bool moving; /* its queues between workers (fwd_worker_set_count): polled by
		      * none */
	struct neigh_table *neigh;
	/* The routes of the interface's tenant (a table of its own: fwd_if_config.rt): the
	 * FIB its packets are looked up in (workers), and the RIB its connected routes go to
	 * and the slow path routes its answers through (control thread). */
	const struct rt_fib *fib;
	struct rt_table *rt;
	/* Ethernet */
	const struct ethp_ops *eth_ops;
	struct ethp_port *eth;
	uint8_t mac[ETHP_ADDR_LEN];
	uint16_t vlan; /* informational: the port inserts its tag */
	bool tx_gso;   /* the port sends GSO frames whole (ethp_port_attr.gso) */
	/* IPoIB */
	const struct ibp_ops *ib_ops;
	struct ibp_port *ib_port;
	struct ipoib_link *link;
	struct ibp_qp *ud_qp;             /* the link's UD QP (NULL while down) */
	uint32_t qkey;                    /* the broadcast group's Q_Key */
	uint8_t hwaddr[IPOIB_HWADDR_LEN]; /* our QPN + GID on the link */
	/* Addresses (with their prefix lengths), IPv4 and IPv6 mixed. */
	unsigned n_addrs;
	struct ip_prefix addrs[FWD_IF_MAX_ADDRS];
	struct fwd_proxy_config proxy;
	/* The kind's port I/O for the worker loop (engine/engine_pvt.h), once per burst:
	 * kept last, out of the cache lines the per-packet path reads. */
	const struct fwd_if_ops *ops;
};

/* Knobs (control thread sets, workers read from the snapshot). */
struct fwd_knobs {
	bool mss_clamp;   /* clamp TCP MSS on SYNs crossing to a smaller MTU */
	bool icmp_errors; /* send ICMP errors at all (default on) */
	uint8_t ip4_src_classes, ip4_dst_classes; /* IP4_M_*; see ip4_martian_default */
	uint8_t ip6_src_classes, ip6_dst_classes; /* IP6_M_* */
	unsigned n_martian4_src, n_martian4_dst;
	struct ip4_prefix_ent martian4_src[FWD_MARTIAN_MAX], martian4_dst[FWD_MARTIAN_MAX];
};
/* The defaults: mss_clamp on, icmp_errors on, ip4/ip6_martian_default, no extra list. */
void fwd_knobs_defaults(struct fwd_knobs *k);

/* An immutable snapshot. Owner: control thread (publishes); workers read. */
struct fwd_snap {
	uint64_t gen; /* incremented per publication */
	struct fwd_knobs knobs;
	struct ip4_martian_cfg m4; /* built from knobs, pointing into knobs */
	struct ip6_martian_cfg m6;
	struct fwd_if ifs[FWD_IF_MAX]; /* by index; ifs[0] unused */
	unsigned pollers;              /* the workers the ports' queues are spread over */
	unsigned eth_queues;           /* queues of every Ethernet port (>= pollers) */
};

static inline const struct fwd_if *fwd_snap_if(const struct fwd_snap *s, uint32_t index)
{
	if (index == 0 || index >= FWD_IF_MAX || s->ifs[index].index == 0)
		return NULL;
	return &s->ifs[index];
}

/* ---- rings' messages ------------------------------------------------------------- */

enum fwd_msg_type {
	/* worker -> control */
	FWD_MSG_PUNT_ETH = 1, /* a whole Ethernet frame (untagged) received on ifindex */
	FWD_MSG_PUNT_IB,      /* an IPoIB payload (after the IPoIB header) from ifindex */
	/* control -> worker */
	FWD_MSG_TX_ETH, /* send data[0..len) (a whole untagged frame) on ifindex */
	FWD_MSG_TX_IB,  /* post ib_send (buffer, AH, QPN, Q_Key prepared) */
	FWD_MSG_TX_IP,  /* forward the IP packet data[0..len) out of ifindex to the
			       * next hop nh (it was parked for resolution): the worker
			       * runs the egress stage again */
};

/* Why a packet was punted (worker -> control). */
enum fwd_punt {
	FWD_PUNT_ARP = 0,    /* ARP (Ethernet); IPoIB ARP goes to ipoib_link_input_ctl */
	FWD_PUNT_ND,         /* Neighbor Discovery */
	FWD_PUNT_LOCAL,      /* IP to one of the gateway's addresses (echo and others) */
	FWD_PUNT_UNRESOLVED, /* the next hop's neighbour is not usable: resolve, park */
	FWD_PUNT_MCAST,      /* IP multicast on an interface that forwards it (fwd_sp_mcast_bind):
			      * IGMP / MLD and group traffic, the slow path's (class local) */
	FWD_PUNT_COUNT
};
const char *fwd_punt_name(enum fwd_punt p);

/*
 * Classes of worker -> control messages (docs/dataplane.md, "Punt classes"). Each has
 * its own share of the worker's pool, so that one kind of traffic cannot starve another:
 * a reserve no other class may take, and a cap it may not pass (the rest of the pool is
 * shared, first come). Per source and in total per worker, the classes but CONTROL are
 * also rate limited before a message is taken (fwd_punt_rl).
 */
enum fwd_pclass {
	FWD_PCLASS_CONTROL = 0, /* failover UDP (the bound port), the failover tiebreaker's echo
				 * replies: never rate limited */
	FWD_PCLASS_NEIGH,       /* ARP / ND, Ethernet and IPoIB: resolution asked and answered */
	FWD_PCLASS_UNRES,       /* packets waiting for a neighbour (parked) */
	FWD_PCLASS_LOCAL,       /* other IP to the gateway's addresses (echo, anything else) */
	FWD_PCLASS_MCAST,       /* IP multicast to forward (gateway/dp_mcast.c): streams need
				 * a rate of their own, far above what local traffic gets */
	FWD_PCLASS_COUNT
};
const char *fwd_pclass_name(enum fwd_pclass c);

/* A token bucket: rate packets per second, burst packets at once (rate 0: no limit). */
struct fwd_punt_limit {
	uint32_t rate, burst;
};

/* The punt limits of every worker (fwd_engine_config.punt). */
struct fwd_punt_config {
	struct fwd_punt_limit per_src[FWD_PCLASS_COUNT]; /* per source address (hashed) */
	struct fwd_punt_limit total[FWD_PCLASS_COUNT];   /* per worker */
	unsigned park_max; /* parked packets (FWD_PCLASS_UNRES messages held in the
			    * Ethernet neighbour queues) per worker; 0: the defaults */
};
/* The defaults for a pool of `pool` messages: CONTROL unlimited; NEIGH 100/s burst 200
 * per source, 5000/s burst 2000 per worker; UNRES 100/s burst 200 per source, 1000/s
 * burst 1000 per worker; LOCAL 100/s burst 200 per source, 1000/s burst 500 per worker;
 * park_max pool / 8 (half the UNRES cap). */
void fwd_punt_defaults(struct fwd_punt_config *c, unsigned pool);

/* A worker's punt limiter: a global bucket per class and a fixed table of per-source
 * buckets per class, keyed by a seeded hash of the source address (fwd_punt_classify);
 * each source has two candidate slots, tagged with its hash, and takes an idle one
 * (full bucket) when it has none. Owner: one worker (or one test); no allocation. */
#define FWD_PRL_SLOTS 256
struct fwd_punt_rl {
	const struct fwd_punt_config *cfg;
	uint64_t total_tat[FWD_PCLASS_COUNT]; /* GCRA: theoretical arrival times (ns) */
	struct {
		uint64_t tat;
		uint32_t tag; /* 0: free */
	} slot[FWD_PCLASS_COUNT][FWD_PRL_SLOTS];
};
void fwd_punt_rl_init(struct fwd_punt_rl *rl, const struct fwd_punt_config *c);
/* Whether one more punt of class c from source key may go at now_ns (both the source's
 * and the class's buckets allow it; both are charged only then). */
bool fwd_punt_rl_allow(struct fwd_punt_rl *rl, enum fwd_pclass c, uint32_t key, uint64_t now_ns);

/* The class of a punt, and the hash of its source for the limiter (*key, never 0):
 * Ethernet ARP/ND by the frame's source MAC, IPoIB ARP/ND by the sender's LID and QPN
 * (ib_src), IP (LOCAL, UNRESOLVED) by the source address. A LOCAL punt is CONTROL when
 * it is UDP to the port bound with fwd_sp_udp_bind or fwd_hb_bind, or an echo reply with
 * the identifier bound with fwd_sp_echo_bind. data/len: the punt's (engine/forward.h). Any thread. */
enum fwd_pclass fwd_punt_classify(const struct fwd_engine *e, enum fwd_punt p, bool ib,
				  const uint8_t *data, size_t len, uint32_t ib_src, uint32_t *key);

enum fwd_msg_owner {
	FWD_OWNER_WORKER = 0,
	FWD_OWNER_CONTROL = 1,
	FWD_OWNER_HB = 2, /* the heartbeat thread (engine/heartbeat.h) */
};

/* One message. Owner: whoever holds the pointer; the pool it belongs to is ->owner's. */
struct fwd_msg {
	uint8_t type;    /* enum fwd_msg_type */
	uint8_t owner;   /* enum fwd_msg_owner */
	uint8_t punt;    /* enum fwd_punt (punts) */
	uint8_t family;  /* FWD_PUNT_UNRESOLVED, FWD_MSG_TX_IP: AF_INET / AF_INET6 */
	uint16_t worker; /* the worker whose pools and rings it travels */
	uint16_t ifindex;
	uint32_t ifgen;     /* fwd_if.gen of ifindex when it was made: a message that outlives its
			 * interface is dropped, not sent on the next one of that index (a
			 * TX_IB holds the old port's buffer and QP) */
	uint16_t ethertype; /* PUNT_IB: of the payload; TX_IP: 0x0800 / 0x86dd */
	uint8_t pkttype;    /* PUNT_ETH: enum ethp_pkttype */
	uint8_t cls;        /* enum fwd_pclass: the pool share it was taken from */
	bool mcast;         /* PUNT_IB: came to a multicast group */
	uint8_t nh[16];     /* UNRESOLVED, TX_IP: the next hop (network order) */
	/* PUNT_IB: where it came from */
	uint32_t src_qpn;
	uint16_t slid;
	bool has_grh;
	union ib_gid sgid, dgid;
	struct ibp_send ib_send; /* TX_IB */
	bool own;  /* TX_IP: the gateway's own packet (echo reply, ICMP error): no TTL change */
	bool held; /* a worker's UNRESOLVED punt its worker counts (fwd_held_add) */
	uint32_t len;
	uint8_t data[FWD_MSG_DATA];
};

/* ---- counters -------------------------------------------------------------------- */

/* Drop reasons of the data path (stable counter names: fwd_drop_name). The packet rules'
 * own reasons (ip_reason, ethf_result, ...) are counted beside these in fwd_stats. */
enum fwd_drop {
	FWD_DROP_ETH_FRAME = 0,  /* ethf_parse refused (see eth[]) */
	FWD_DROP_ETHERTYPE,      /* not IPv4, IPv6 or ARP */
	FWD_DROP_NOT_FOR_US,     /* Ethernet frame to another unicast MAC */
	FWD_DROP_IB_RX,          /* ipoib_link_rx refused (its own counters say why) */
	FWD_DROP_IF_DOWN,        /* ingress or egress interface down or unknown */
	FWD_DROP_IP_INVALID,     /* ip4/ip6_validate refused (see ip[]) */
	FWD_DROP_MARTIAN,        /* ip4/ip6_check_addrs refused (see ip[]) */
	FWD_DROP_L2_BCAST,       /* IP in a link-layer broadcast/multicast frame, not for us */
	FWD_DROP_NO_ROUTE,       /* no route: ICMP unreachable sent (rate limited) */
	FWD_DROP_BLACKHOLE,      /* blackhole route */
	FWD_DROP_TTL_EXPIRED,    /* TTL / hop limit: ICMP time exceeded sent */
	FWD_DROP_TOO_BIG,        /* DF / IPv6 above the MTU: frag needed / PTB sent */
	FWD_DROP_FRAG_FAILED,    /* frag4_fragment refused */
	FWD_DROP_SAME_IF_ICMP,   /* ICMP error with no route back */
	FWD_DROP_NO_BUF,         /* no IB buffer, no scratch space */
	FWD_DROP_PUNT_FULL,      /* worker -> control ring or message pool exhausted */
	FWD_DROP_PUNT_TOO_BIG,   /* packet larger than a message (FWD_MSG_DATA) */
	FWD_DROP_TX_FULL,        /* the port refused the burst's tail */
	FWD_DROP_TX_ERROR,       /* post_send / tx_burst error */
	FWD_DROP_IPV6_ROUTED_LL, /* IPv6 link-local destination routed (never forwarded) */
	FWD_DROP_LOOP,           /* the next hop is the packet's own sender on the
				   * ingress interface */
	FWD_DROP_MULTICAST,      /* IP multicast destination: not routed by this engine */
	FWD_DROP_PUNT_LIMITED,   /* punt refused by its class's rate limit (per source or
				  * per worker: fwd_punt_rl) */
	FWD_DROP_GSO,            /* a GSO packet that cannot be segmented (see gso[]) */
	FWD_DROP_COUNT
};
const char *fwd_drop_name(enum fwd_drop d);

/* Per-worker counters. Written by one worker (relaxed atomic adds), read by anyone. */
struct fwd_stats {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	uint64_t forwarded4, forwarded6;
	uint64_t fragmented, frags_sent, mss_clamped;
	/* GSO packets (an Ethernet port's super-frames): sent whole (to a port that
	 * segments them, or over an IPoIB connection whose MTU holds them), segmented here,
	 * and the segments that made; gso[] the gso_result behind FWD_DROP_GSO and the
	 * UDP datagrams too big for the egress (FWD_DROP_TOO_BIG). */
	uint64_t gso_whole, gso_segmented, gso_segments;
	uint64_t gso[GSO_RESULT_COUNT];
	/* IPoIB TCP segments merged by receive coalescing (engine/worker.c): packets of
	 * two segments or more, and the segments in them. */
	uint64_t gro_merged, gro_segments;
	uint64_t icmp_sent, icmp_rate_limited, icmp_not_sent;
	uint64_t punts[FWD_PUNT_COUNT];
	uint64_t drops[FWD_DROP_COUNT];
	uint64_t ip[IP_REASON_COUNT];     /* the ip_reason behind IP_INVALID / MARTIAN */
	uint64_t eth[16];                 /* the ethf_result behind ETH_FRAME */
	uint64_t icmp[ICMP_REASON_COUNT]; /* why an ICMP error was not built */
	uint64_t ctl_tx;                  /* frames sent for the control thread */
	uint64_t unres_held; /* punted behind earlier packets of their next hop (fwd_held) */
	/* Punts by class (enum fwd_pclass): handed to the control thread, refused for the
	 * class's message budget (also in drops[PUNT_FULL]), refused by its rate limit
	 * (also in drops[PUNT_LIMITED]). */
	uint64_t pclass_sent[FWD_PCLASS_COUNT], pclass_no_budget[FWD_PCLASS_COUNT];
	uint64_t pclass_limited[FWD_PCLASS_COUNT];
	uint64_t sleeps, wakeups, loops; /* worker loop */
};

/* ---- the engine (control thread) -------------------------------------------------- */

typedef void (*fwd_defer_fn)(void *ctx, void (*fn)(void *arg), void *arg);

struct fwd_engine_config {
	unsigned n_workers;  /* 1..FWD_WORKERS_MAX */
	struct rt_table *rt; /* the default tenant's routes (the engine adds connected/local/
			      * learned routes to each interface's table) */
	fwd_defer_fn defer;  /* RCU deferral for old snapshots; NULL: free at once */
	void *defer_ctx;
	unsigned msg_pool;             /* messages per pool (per worker and side); 0: 256;
					* at least 16 */
	struct fwd_punt_config punt;   /* punt limits; park_max 0: fwd_punt_defaults */
	struct icmp_rl_cfg icmp_rl;    /* per-worker ICMP limiter; zero: 1000/s, burst 50 per /24
				     * and /64 bucket, 10000/s total, PMTU exempt */
	uint32_t flow_seed;            /* ECMP hash seed; 0: random */
	struct neigh_params eth_neigh; /* Ethernet neighbour tables (zero: Linux defaults) */
	uint64_t (*now_ms)(void *ctx); /* the neighbour tables' clock; NULL: evloop_now_ms */
	void *now_ctx;
};

int fwd_engine_new(const struct fwd_engine_config *cfg, struct fwd_engine **out);
/* Workers must be stopped. Frees the Ethernet neighbour tables and every pool. */
void fwd_engine_free(struct fwd_engine *e);

/* An interface to add. Ethernet: eth_ops/eth/mac/mtu/vlan; the engine creates its
 * neighbour table (ARP/ND resolution run by the slow path). IPoIB: ib_ops/ib_port/link;
 * the neighbour table is the link's (ipoib_link_neigh); ud_qp/qkey/hwaddr/mtu come with
 * fwd_engine_if_set_ipoib once the link is up. */
struct fwd_if_config {
	uint32_t index; /* reserved with fwd_engine_if_reserve; 0: the first free index */
	const char *name;
	enum fwd_if_kind kind;
	unsigned worker;
	uint32_t mtu;
	const struct ethp_ops *eth_ops;
	struct ethp_port *eth;
	const uint8_t *mac;
	uint16_t vlan;
	bool tx_gso; /* Ethernet: the port sends GSO frames whole (ethp_port_attr.gso) */
	const struct ibp_ops *ib_ops;
	struct ibp_port *ib_port;
	struct ipoib_link *link;
	struct neigh_table *neigh; /* IPoIB: the link's; Ethernet: NULL (created) or given */
	/* The routing table of the interface's tenant; NULL: the engine's (tenant default,
	 * fwd_engine_config.rt). A packet in is looked up there only; it leaves through
	 * an interface of another tenant only when a route there says so. The table must
	 * outlive the interface by a grace period. */
	struct rt_table *rt;
};

/* Returns 0 and the new interface's index, -ENOSPC, -EINVAL. Added down. With c->index
 * (reserved), a failure leaves the index reserved. */
int fwd_engine_if_add(struct fwd_engine *e, const struct fwd_if_config *c, uint32_t *index);
/* Take the index of an interface to add later (fwd_if_config.index), for a caller that
 * needs the interface's post hook context first: an IPoIB link is created with it, and
 * the interface with the link. 0 or -ENOSPC. */
int fwd_engine_if_reserve(struct fwd_engine *e, uint32_t *index);
/* Removes the interface, its addresses' routes and (Ethernet) its neighbour table
 * (after a grace period); or releases a reserved index never added. */
int fwd_engine_if_del(struct fwd_engine *e, uint32_t index);
int fwd_engine_if_set_up(struct fwd_engine *e, uint32_t index, bool up);
int fwd_engine_if_set_mtu(struct fwd_engine *e, uint32_t index, uint32_t mtu);
int fwd_engine_if_set_mac(struct fwd_engine *e, uint32_t index, const uint8_t mac[6]);
/* IPoIB link up (qp non-NULL: UD QP, Q_Key, our hardware address, link MTU) or down
 * (qp NULL). A QP may be destroyed only after the snapshot without it has been seen by
 * every worker (after a grace period). */
int fwd_engine_if_set_ipoib(struct fwd_engine *e, uint32_t index, struct ibp_qp *qp, uint32_t qkey,
			    const struct ipoib_hwaddr *hw, uint32_t mtu);
/* An address of the gateway on the interface ("10.0.0.1/24"): local delivery, ICMP
 * source, ARP/ND answers; adds the connected and local routes. */
int fwd_engine_if_add_addr(struct fwd_engine *e, uint32_t index, const struct ip_prefix *a);
int fwd_engine_if_del_addr(struct fwd_engine *e, uint32_t index, const struct ip_prefix *a);
int fwd_engine_if_set_proxy(struct fwd_engine *e, uint32_t index, const struct fwd_proxy_config *p);
int fwd_engine_set_knobs(struct fwd_engine *e, const struct fwd_knobs *k);

/*
 * The post hook for the control thread's sends on an IPoIB link (ipoib_link_config
 * .post, ctx fwd_engine_if_post_ctx of its interface's index). While a worker runs, a
 * send becomes a message to the worker of the interface, which posts it under the
 * port's lock, and is dropped there if the interface is down or gone. While none runs
 * (before the first fwd_worker_start, after fwd_worker_stop_all) the control thread is
 * alone on the port and posts directly. Returns 1 when the send was taken, else 0 (the
 * buffer stays the caller's; an interface not added yet or removed takes nothing).
 * Control thread.
 */
int fwd_engine_ib_post_send(void *ctx, struct ibp_send *s);
/* The hook's context of interface index (reserved or added; NULL: not a valid index). */
void *fwd_engine_if_post_ctx(struct fwd_engine *e, uint32_t index);

/* The interface of an IPoIB link or an Ethernet port (0 if none). */
uint32_t fwd_engine_if_of_link(const struct fwd_engine *e, const struct ipoib_link *l);
uint32_t fwd_engine_if_by_name(const struct fwd_engine *e, const char *name);

/* The control thread's view (always the latest snapshot). */
const struct fwd_snap *fwd_engine_current(const struct fwd_engine *e);
/* The workers interfaces may be assigned to: 0..n-1 (fwd_worker_set_count changes n). */
unsigned fwd_engine_n_workers(const struct fwd_engine *e);

/* Counters of one worker, or the sum of all (worker = -1), those of workers stopped by
 * fwd_worker_set_count included: the totals never go down. */
void fwd_engine_stats(const struct fwd_engine *e, int worker, struct fwd_stats *out);

/* ---- worker side ------------------------------------------------------------------ */

/* The snapshot to use until the next quiescent state (acquire load). */
const struct fwd_snap *fwd_engine_snap(const struct fwd_engine *e);
uint32_t fwd_engine_flow_seed(const struct fwd_engine *e);

/* The rings and pools of worker w (worker.c and slowpath.c). */
struct ring *fwd_engine_ring_to_ctl(struct fwd_engine *e, unsigned w);
struct ring *fwd_engine_ring_to_worker(struct fwd_engine *e, unsigned w);
/* The heartbeat channel's rings of worker w (engine/heartbeat.h): to the worker (the
 * heartbeat thread's sends and returns) or from it. */
struct ring *fwd_engine_ring_hb(struct fwd_engine *e, unsigned w, bool to_worker);
struct fwd_stats *fwd_engine_worker_stats(struct fwd_engine *e, unsigned w);
/* A free message of the given side's pool of worker w for class c (NULL: the pool is
 * empty or the class has used its share: see enum fwd_pclass). Worker side: only worker
 * w; the shares are the defaults of fwd_engine_config.msg_pool P: CONTROL reserve P/4,
 * cap P/2; NEIGH P/4, P/2; UNRES P/8, P/4; LOCAL P/16, P/8; MCAST P/16, P/4. Control side: the control
 * thread; CONTROL (heartbeats) may take the whole pool, the other classes
 * leave it P/8. fwd_msg_put returns a message to its owner's pool when called by the
 * owner, or sends it back through the ring when called by the other side. */
struct fwd_msg *fwd_msg_get(struct fwd_engine *e, unsigned w, enum fwd_msg_owner side,
			    enum fwd_pclass c);
/* Messages free in a pool now (for tests and checks: the owner's view). */
unsigned fwd_msg_pool_free(const struct fwd_engine *e, unsigned w, enum fwd_msg_owner side);
void fwd_msg_put(struct fwd_engine *e, struct fwd_msg *m, enum fwd_msg_owner caller);
/* Message pools: called by the consumer of a ring for each message it dequeues that
 * it owns (a return). */
void fwd_msg_recycle(struct fwd_engine *e, struct fwd_msg *m);

#endif
