/*
 * ipoib_link: one IPoIB link (RFC 4391, datagram mode) = an IB port + a P_Key, its UD
 * QP, its multicast memberships, its paths and its neighbour table (table/neigh.h).
 *
 * Lifecycle (control thread):
 *   new    refuses a P_Key the port's table lacks (-ENOENT, logged with the table);
 *   start  full-member join of the broadcast group ff12:401b:<pkey>::ffff:ffff through
 *          the SA client (created with the IPoIB parameters when absent); the answer
 *          gives the Q_Key, MTU (IP MTU = IB MTU - 4: 2044 or 4092), SL and rate; then
 *          the UD QP is created with that Q_Key and the P_Key's index, receives are
 *          posted, the QP is attached to the group's MGID/MLID and the link is UP.
 *          IPv6: the link-local address from the port GUID is the link's, and the
 *          all-nodes and solicited-node groups of its addresses are joined (full member).
 *          Other groups the link sends to get a send-only full-member join first
 *          (up to three packets wait for it, as in Linux; older ones are dropped and
 *          counted);
 *   port events: PORT_DOWN takes the link down (state callback; neighbours flushed);
 *          PORT_ACTIVE, LID/SM change and client reregister rejoin every group through
 *          the SA client and re-resolve every path, rebuilding the address handles
 *          that changed. An SM change or reregister leaves the link UP, sending on the
 *          old AHs until the answers come (as Linux keeps the carrier: a failover
 *          group tracks this state); after PORT_DOWN the link is UP again when the
 *          broadcast join answers;
 *   stop   leaves every group, destroys the QP.
 *
 * ARP (hardware type 32) and ND (IPoIB link-layer option) reach the control side
 * (ipoib_link_input_ctl): neighbours are learned as Linux learns them, requests for the
 * link's own addresses are answered in the gateway role (in the host role the host's
 * kernel answers: the link only learns), an ARP claiming one of the link's addresses
 * from another hardware address is counted, logged at most once a second and not
 * accepted (cfg.accept_spoofed_arp turns the refusal off). Resolution: ARP request to
 * the broadcast group / NS to the solicited-node group, then a PathRecord through the
 * SA client (or its GID route table) -> address handle (with a GRH when the GID is on
 * another subnet) -> the neighbour's link address becomes usable.
 *
 * Sends: the xmit functions take a buffer of the port's pool with the payload at
 * data + IPOIB_ENCAP_LEN (len = payload octets), write the IPoIB header, and post it on
 * the UD QP or a connection (through cfg.post when given). A buffer handed to an xmit
 * function always belongs to the link afterwards (posted, queued for resolution, or
 * returned to the pool and counted). They read the path, group and connection lists:
 * control-thread structures, so the xmit functions run on the control thread.
 *
 * Data path: ipoib_link_rx classifies a receive completion of the link's QPs (UD, or RC
 * through the SRQ), ipoib_link_repost gives its buffer back, ipoib_link_tx_done takes a
 * send completion; a forwarding engine builds its own sends from a neighbour's
 * published link address (ipoib_link_send_fill) and counts them (ipoib_link_count_tx).
 * These read the neighbour entries (RCU-safe, neigh.h) and write only atomics that the
 * control thread reads.
 *
 * Threads (each group of prototypes below is marked):
 * - control thread: everything not named below, the callbacks of cfg (state_cb, post,
 *   defer) included. In the gateway (gateway/, engine/slowpath.c) that is also where
 *   the xmit functions and ipoib_link_buf run (ARP/ND answers, proxy answers, packets
 *   parked for resolution) and ipoib_link_input_ctl (ARP/ND the workers punt); cfg.post
 *   then hands every send to the worker that owns the port;
 * - the worker polling one of the port's queues (engine/worker.c, engine/forward.c):
 *   ipoib_link_rx, ipoib_link_repost, ipoib_link_tx_done, ipoib_link_of_rc and
 *   ipoib_link_send_fill; one worker at a time per queue;
 * - any thread: ipoib_rx_classify (pure), ipoib_link_count_tx (relaxed atomics);
 * - the host role (sim/host/main.c) calls everything from its one thread.
 *
 * Inside (ipoib_pvt.h): link.c life, path.c paths and AHs, mcast.c groups, conn.c
 * connected mode, arpnd.c ARP/ND, xmit.c the sends, datapath.c the workers' side.
 *
 * Connected mode (RFC 4755, cfg.connected; docs/connected-mode.md): the link advertises
 * the RC flag (0x80) in its hardware address, receives RC messages through an SRQ per port queue, and
 * runs a cm (cm/cm.h) whose MADs go through a libibumad agent (cm/cm_umad.h: the kernel
 * owns QP1 on an HCA): one struct ipoib_cm_port per port, shared by the port's links (CM MADs offered to the links of the P_Key index they
 * came on, each link's cm claiming its service ID / communication IDs, answering on its
 * own P_Key index). A neighbour whose hardware address has the RC flag gets a connection
 * (cm_connect when the neighbour is bound to its path; crossing REQs are the cm's); the
 * cm's up/down callbacks publish the connection (neigh_link.conn) and its MTU (up to
 * 65520) into every neighbour entry of that peer. Unicast IP goes on the connection when
 * it is up, otherwise on UD (packets above the UD MTU wait, three at most, for a
 * connection being set up). Multicast, broadcast, ARP and ND always go on UD. The data
 * path reports activity and RC send errors in atomics that the control thread reads
 * every tick (cm_activity: idle teardown after cfg.conn_idle_ms; cm_disconnect on a
 * failed QP); a neighbour entry that leaves the table takes its peer's connection down
 * (cm_neigh_expired) when no other entry names that peer; a peer that restarts sends a
 * new REQ and the cm replaces the connection. RC receives come through the SRQ:
 * ipoib_link_rx classifies them (rx->rc), ipoib_link_repost refills the SRQ first.
 */
#ifndef IBGW_IPOIB_IPOIB_LINK_H
#define IBGW_IPOIB_IPOIB_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm.h"
#include "port/ib_port.h"
#include "table/neigh.h"
#include "lib/ipoib.h"

struct ip_prefix;

struct ipoib_link;
struct ipoib_cm_port;
struct cm_umad;
struct sa_client;
struct evloop;

enum ipoib_role {
	IPOIB_ROLE_GATEWAY, /* answers ARP/ND for its own addresses, resolves neighbours */
	IPOIB_ROLE_HOST,    /* a host's kernel answers and resolves; the link learns */
};

#define IPOIB_LINK_MAX_ADDRS 8

struct ipoib_link_config {
	const char *name; /* for logs */
	const struct ibp_ops *ops;
	struct ibp_port *port;
	struct sa_client *sa; /* the port's SA client (shared by the port's links) */
	/* The port as the owner last queried it; NULL: ipoib_link_new queries it. (Under
	 * umad2sim, a port query's SMPs could time out once sm-client/sa_umad is open in
	 * the same process: both register an SMI agent; so query first, then pass it.)
	 * The link never queries the port after ipoib_link_new. */
	const struct ibp_port_attr *attr;
	struct evloop *loop; /* timers (neighbours); NULL: call ipoib_link_tick */
	uint16_t pkey;       /* 0: 0xffff */
	uint8_t scope;       /* MGID scope; 0: link-local (2) */
	/* GRH hop limit of the link's multicast sends (ARP, ND, IP multicast): the larger
	 * of this and the group's MCMemberRecord. 0: 1, as Linux (the subnet only; an IB
	 * router drops hop limit 1). IPoIB across IB routers that joined the group (seed
	 * 004, "IB ARP Across Subnets") needs 1 + the routers to cross. */
	uint8_t mcast_hop_limit;
	enum ipoib_role role;
	bool accept_spoofed_arp;
	bool connected; /* RFC 4755 connected mode (see above) */
	/* Connected mode: the port's CM MAD transport (ipoib_cm_port_open_umad), shared by
	 * the port's connected links; required. */
	struct ipoib_cm_port *cm_port;
	uint32_t conn_idle_ms;           /* idle teardown; 0: 300000; UINT32_MAX: never */
	uint8_t conn_retry_count;        /* RC transport retries; 0: 3 */
	uint8_t conn_rnr_retry;          /* RNR retries asked of the peer; 0: 7 (forever) */
	uint8_t cm_max_retries;          /* CM MAD resends; 0: the cm's default (8) */
	unsigned recv_depth, send_depth; /* 0: 256 each */
	struct neigh_params neigh;
	neigh_defer_fn defer; /* for the neighbour table, see neigh.h */
	void *defer_ctx;
	/* Optional: every send of the link goes through post(post_ctx, s), which returns 1
	 * when the send was taken (see ipoib_post_send in ipoib/xmit.c). NULL: ops->post_send. */
	int (*post)(void *ctx, struct ibp_send *s);
	void *post_ctx;
	/* UP/DOWN changes. */
	void (*state_cb)(void *ctx, struct ipoib_link *l, bool up);
	void *cb_ctx;
};

/* What is dropped, by reason (receive and transmit). */
enum ipoib_drop {
	IPOIB_DROP_RX_ERROR,      /* completion with an error status */
	IPOIB_DROP_RX_SHORT,      /* shorter than the GRH area + IPoIB header */
	IPOIB_DROP_RX_ETHERTYPE,  /* not IPv4, IPv6 or ARP */
	IPOIB_DROP_RX_LOOP,       /* our own multicast coming back */
	IPOIB_DROP_RX_BAD_IP,     /* IP header too short for its version */
	IPOIB_DROP_RX_BAD_ARP,    /* ARP refused by arp_parse */
	IPOIB_DROP_RX_BAD_ND,     /* ND refused by nd_parse */
	IPOIB_DROP_ARP_SPOOF,     /* claims one of our addresses */
	IPOIB_DROP_ND_SPOOF,      /* NS, RS or RA from one of our addresses: not learned */
	IPOIB_DROP_TX_DOWN,       /* link not up */
	IPOIB_DROP_TX_TOO_BIG,    /* above the destination's MTU */
	IPOIB_DROP_TX_NO_PATH,    /* PathRecord failed */
	IPOIB_DROP_TX_PATH_QUEUE, /* path queue overflow (oldest dropped) */
	IPOIB_DROP_TX_MCAST_JOIN, /* join queue overflow, or the link stopped */
	IPOIB_DROP_TX_NEIGH,      /* neighbour queue overflow, failure, table full */
	IPOIB_DROP_TX_POST,       /* post_send refused */
	IPOIB_DROP_TX_NOBUF,      /* control side found the pool empty */
	IPOIB_DROP_TX_CONN,       /* above the UD MTU, no connection (yet): queue overflow,
				     setup failed, or none being set up */
	IPOIB_DROP_COUNT
};
const char *ipoib_drop_name(enum ipoib_drop d);

struct ipoib_link_stats {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	uint64_t rx_mcast, tx_mcast, rx_arp, rx_nd, tx_arp, tx_nd;
	uint64_t drops[IPOIB_DROP_COUNT];
	uint64_t joins, join_failures, up_count, down_count;
	uint64_t paths_resolved, path_failures, ah_rebuilt;
	uint64_t paths_freed; /* unused for a minute (path.c: ipoib_paths_gc) */
	/* the UD QP (or one of its receive work queues) went to the error state and was
	 * brought back, same QPN (link.c) */
	uint64_t ud_qp_recoveries;
	/* connected mode */
	uint64_t rc_tx_packets, rc_tx_bytes, rc_rx_packets, rc_rx_bytes;
	uint64_t rc_tx_errors;                    /* RC send completions in error (the QP failed) */
	uint64_t conn_requests;                   /* cm_connect called (REQs we started) */
	uint64_t conn_up, conn_down, conn_failed; /* failed: attempts that never came up */
	uint64_t conn_queued;                     /* packets that waited for a connection */
	uint64_t ud_to_rc_peer; /* unicast sent on UD to an RC-capable peer (no connection) */
};

/* ---- receive classification (pure, any thread; used by the fuzz harness too) ------ */
enum ipoib_rx_kind {
	IPOIB_RX_DROP,
	IPOIB_RX_IP4,
	IPOIB_RX_IP6, /* not ND */
	IPOIB_RX_ARP,
	IPOIB_RX_ND, /* ICMPv6 133..137 directly after the IPv6 header */
};
struct ipoib_rx {
	enum ipoib_rx_kind kind;
	enum ipoib_drop why; /* when kind is IPOIB_RX_DROP */
	uint16_t ethertype;
	const uint8_t *data; /* after the IPoIB header */
	size_t len;
	uint32_t src_qpn;
	uint16_t slid;
	bool has_grh, mcast;
	union ib_gid sgid, dgid; /* when has_grh */
	/* Arrived on a connection (through the SRQ): src_qpn is the peer's UD QPN and slid
	 * its LID (as for UD), sgid its GID (has_grh stays false). */
	bool rc;
};
/* buf/len: the receive buffer as the completion leaves it (GRH area first). */
enum ipoib_rx_kind ipoib_rx_classify(const uint8_t *buf, size_t len, bool has_grh,
				     struct ipoib_rx *out);

/* The GRH hop limit of multicast sends: the SA's (MCMemberRecord) or the configured one
 * (0: 1), whichever is larger. Pure. */
uint8_t ipoib_mcast_hop_limit(uint8_t sa_hop_limit, uint8_t cfg_hop_limit);

/* ---- control thread ------------------------------------------------------------- */
int ipoib_link_new(const struct ipoib_link_config *cfg, struct ipoib_link **out);
int ipoib_link_start(struct ipoib_link *l);
/* Leave the groups, destroy the QP (the owner keeps polling meanwhile). */
void ipoib_link_stop(struct ipoib_link *l);
/* After stop, and after the SA client is freed (its -ECANCELED callbacks land here). */
void ipoib_link_free(struct ipoib_link *l);

void ipoib_link_port_event(struct ipoib_link *l, const struct ibp_event *ev);
/* Resolve every known path again (an IB router on the way went down or came back: the
 * SA, or the GID route table, names another). The AH changes only if the answer does;
 * traffic keeps the old one meanwhile. */
void ipoib_link_paths_requery(struct ipoib_link *l);
/* Connected mode: take down every connection whose path goes to dlid (a dead IB
 * router; cm_disconnect_dlid); new ones come up on the new path. Returns how many. */
unsigned ipoib_link_cm_disconnect_dlid(struct ipoib_link *l, uint16_t dlid);
/* An address of the link (answered for in the gateway role; IPv6: solicited-node group
 * joined). family AF_INET (4 octets) or AF_INET6 (16), network order. */
int ipoib_link_add_addr(struct ipoib_link *l, int family, const uint8_t *addr);
/* The link's subnets, for learning (issue 20, RFC 6583): an ARP or ND message whose
 * sender lies outside every one of the n prefixes (the link's addresses with their
 * lengths, prefixes that live on the link, routes directly through it) and is not IPv6
 * link-local creates no neighbour entry (counted in the table's learn_refused). Such a
 * sender's request for our address is still answered, at the address it gave or the
 * datagram's source, never by resolving it (an NS with neither a source link-layer
 * option nor a GRH is not answered, and counted). Until it is called, every sender is
 * learned. The prefixes are copied. Returns 0 or -ENOMEM. */
int ipoib_link_set_on_link(struct ipoib_link *l, const struct ip_prefix *p, unsigned n);
/* A neighbour learned elsewhere (the failover peer's state sync): created STALE with
 * its hardware address (flags, QPN, GID) when the link does not know it, and its path
 * resolved as after an ARP (from the SA client's cache when the peer's path came with
 * it). A known entry is left alone. Returns 1 created, 0 known, -errno (-EINVAL: an
 * address no neighbour has, ipoib_hwaddr_is_unicast). */
int ipoib_link_neigh_learn(struct ipoib_link *l, int family, const uint8_t *addr,
			   const uint8_t hwaddr[IPOIB_HWADDR_LEN]);
/* The gateway no longer has addr on the link (a reload, a failover group given up): its
 * ARP/ND for it stop. The IPv6 solicited-node group stays joined (others may share it;
 * the link leaves it at stop). Returns 0 or -ENOENT. */
int ipoib_link_del_addr(struct ipoib_link *l, int family, const uint8_t *addr);
/* Full-member join of a group (to receive it), e.g. the groups a host's kernel listens
 * to. Idempotent. */
int ipoib_link_mcast_join(struct ipoib_link *l, const union ib_gid *mgid);
/* Send-only full-member join of a group (to send to it without waiting for the join
 * at the first packet); a member already (either way) stays as it is. */
int ipoib_link_mcast_sendonly(struct ipoib_link *l, const union ib_gid *mgid);
/* Leave a group (full or send-only: the SA membership deleted, the QP detached, queued
 * packets dropped). -ENOENT not a member, -EPERM the broadcast group. A later send to
 * it joins send-only again. */
int ipoib_link_mcast_leave(struct ipoib_link *l, const union ib_gid *mgid);
/* ARP or ND from ipoib_link_rx (kind IPOIB_RX_ARP / IPOIB_RX_ND). */
/* Returns 0, -EPERM for a spoofed ARP that was not accepted (do not pass it on),
 * -EINVAL for a malformed one (counted), -EALREADY for our own looped back. */
int ipoib_link_input_ctl(struct ipoib_link *l, const struct ipoib_rx *rx);
/* Run the neighbour timers (when no loop was given). Returns ms to the next call. */
uint64_t ipoib_link_tick(struct ipoib_link *l);

bool ipoib_link_is_up(const struct ipoib_link *l);
uint32_t ipoib_link_mtu(const struct ipoib_link *l); /* IP MTU (0 until up) */
uint16_t ipoib_link_pkey(const struct ipoib_link *l);
void ipoib_link_hwaddr(const struct ipoib_link *l, struct ipoib_hwaddr *out);
/* The GID of the port the link was created on (known from the start; the hardware
 * address is all zero until the UD QP exists, after the broadcast join). */
void ipoib_link_gid(const struct ipoib_link *l, union ib_gid *out);
struct neigh_table *ipoib_link_neigh(struct ipoib_link *l);
void ipoib_link_stats(const struct ipoib_link *l, struct ipoib_link_stats *out);

struct ipoib_mcast_info {
	union ib_gid mgid;
	bool full, joined;
	uint16_t mlid;
	uint32_t qkey;
};
void ipoib_link_mcast_foreach(const struct ipoib_link *l,
			      int (*fn)(void *arg, const struct ipoib_mcast_info *mi), void *arg);

/* ---- connected mode (control thread) ---------------------------------------------- */
/* The CM MAD transport of every connected link on a port, one per port
 * (docs/connected-mode.md, "Transports"): libibumad with a CM class agent (the kernel
 * owns QP1 on an HCA; on the simulated rack the verbs shim carries the class); loop
 * watches the umad fd. Fails with -EBUSY and a reason in why naming the fix when the
 * kernel's ib_cm holds the CM class (cm/cm_umad.h). */
int ipoib_cm_port_open_umad(const char *ca_name, int port, struct evloop *loop,
			    struct ipoib_cm_port **out, char *why, size_t why_len);
/* After every link using it is stopped. */
void ipoib_cm_port_close(struct ipoib_cm_port *cp);
/* Its libibumad transport (statistics), or NULL. */
const struct cm_umad *ipoib_cm_port_umad(const struct ipoib_cm_port *cp);

/* What `gwctl show connections` shows of one connection (plain data). */
struct ipoib_conn_info {
	struct ipoib_hwaddr peer; /* flags RC, peer UD QPN, peer GID */
	enum cm_state state;
	bool active;                    /* we sent the REQ */
	bool up;                        /* carries traffic (published into the neighbours) */
	uint32_t local_qpn, remote_qpn; /* RC QPNs */
	uint32_t mtu;                   /* IP MTU, 0 until known */
	uint16_t dlid;
	uint64_t age_ms, idle_ms;
	uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
};
/* Every connection the cm knows (set-up and teardown included); fn returns non-zero to
 * stop. Control thread. */
void ipoib_link_conn_foreach(struct ipoib_link *l,
			     int (*fn)(void *arg, const struct ipoib_conn_info *ci), void *arg);
/* The cm's counters (NULL in datagram mode). */
const struct cm_stats *ipoib_link_cm_stats(const struct ipoib_link *l);
/* The IP MTU of the link's connections (receive MTU - 4: 65520 with buffers of 64 KiB
 * and more, less with smaller port buffers); the UD MTU in datagram mode. */
uint32_t ipoib_link_conn_mtu(const struct ipoib_link *l);
/* The IP MTU towards a peer: its connection's when one is up or being set up (or it
 * advertises RC: one is started), the UD MTU otherwise. Host role: the TAP's MTU is
 * the connected MTU, and what is above a peer's MTU is answered with ICMP. */
uint32_t ipoib_link_peer_mtu(struct ipoib_link *l, const struct ipoib_hwaddr *peer);

/* ---- accessors for the gateway's composition (thread: each says) ----------------- */
/* The UD QP (NULL until started; its QP's user pointer is the link) and the broadcast
 * group's Q_Key (0 until joined). Control thread, or a reader that learned them through
 * a publication after the link came up. */
struct ibp_qp *ipoib_link_ud_qp(const struct ipoib_link *l);
uint32_t ipoib_link_qkey(const struct ipoib_link *l);
/* A completion of an RC QP (its user pointer is a connection of some link): that
 * connection's link, or NULL when wc->qp_user is not a live connection. Data path:
 * connections are freed through cfg.defer (after a grace period). */
struct ipoib_link *ipoib_link_of_rc(const struct ibp_wc *wc);

/* ---- data path (the worker polling the link's port) ----------------------------- */
/* For a caller that builds its own sends (the forwarding engine): fill s for a
 * neighbour's published link address -- the connection's RC QP when ll->conn is set
 * (its activity and counters recorded), else the UD QP, ll's AH and QPN, the link's
 * Q_Key. s->buf is the caller's (IPoIB header written, len set). */
void ipoib_link_send_fill(struct ipoib_link *l, const struct neigh_link *ll, struct ibp_send *s);
/* Receive completion of the link's QP, polled from the port's queue (drops counted in
 * that queue's counters). The buffer stays the caller's: give it back with
 * ipoib_link_repost on the same queue (it posts on the queue's part of the UD QP or on
 * the queue's SRQ) when done with rx->data. */
enum ipoib_rx_kind ipoib_link_rx(struct ipoib_link *l, unsigned queue, const struct ibp_wc *wc,
				 struct ipoib_rx *out);
void ipoib_link_repost(struct ipoib_link *l, unsigned queue, struct ibp_buf *b);
/* Send completion of the link's QP: the buffer returns to the pool. */
void ipoib_link_tx_done(struct ipoib_link *l, const struct ibp_wc *wc);
/* Packets (and their octets, IPoIB header included) the caller's own sends put on the
 * link (ipoib_link_send_fill, UD or RC): added into the link's tx_packets/tx_bytes. Any
 * thread (relaxed atomics). */
void ipoib_link_count_tx(struct ipoib_link *l, uint64_t packets, uint64_t bytes);

/* ---- sends (control thread: they read its path, group and connection lists) ------- */
/* To an IP neighbour (unicast) or group (multicast, broadcast 255.255.255.255 and the
 * link's directed broadcast are the caller's to map to the broadcast MGID).
 * Returns 0 sent, 1 queued for resolution, or -errno (dropped, counted). */
int ipoib_link_xmit_ip(struct ipoib_link *l, int family, const uint8_t *dst, uint16_t ethertype,
		       struct ibp_buf *b);
/* Start resolving a unicast IP neighbour without a packet to wait for it (one too big
 * to carry to the control thread). 0: started, or nothing to do (usable or resolving
 * already); -ENETDOWN; -ENOBUFS (table full); -EHOSTUNREACH (FAILED just now). */
int ipoib_link_resolve(struct ipoib_link *l, int family, const uint8_t *dst);
/* To a hardware address (QPN + GID), e.g. a host role peer or an ARP reply. */
int ipoib_link_xmit_hw(struct ipoib_link *l, const struct ipoib_hwaddr *dst, uint16_t ethertype,
		       struct ibp_buf *b);
/* To a multicast group by MGID (send-only join first if needed). */
int ipoib_link_xmit_mcast(struct ipoib_link *l, const union ib_gid *mgid, uint16_t ethertype,
			  struct ibp_buf *b);
/* The broadcast group. */
int ipoib_link_xmit_bcast(struct ipoib_link *l, uint16_t ethertype, struct ibp_buf *b);
/* A buffer from the port's pool with room for the IPoIB header (NULL if empty). */
struct ibp_buf *ipoib_link_buf(struct ipoib_link *l);

#endif
