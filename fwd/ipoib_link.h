/*
 * ipoib_link: one IPoIB link (RFC 4391, datagram mode) = an IB port + a P_Key, its UD
 * QP, its multicast memberships, its paths and its neighbour table (fwd/neigh.h).
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
 *          the SA client (the link is UP again when the broadcast join answers) and
 *          re-resolve every path, rebuilding the address handles that changed;
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
 * Data path (the port's owner thread): the xmit functions take a buffer of the port's
 * pool with the payload at data + IPOIB_ENCAP_LEN (len = payload octets), write the
 * IPoIB header, and post it on the UD QP; ipoib_link_rx classifies a receive
 * completion. A buffer handed to an xmit function always belongs to the link
 * afterwards (posted, queued for resolution, or returned to the pool and counted).
 * The path and group tables the xmit functions read are control-thread structures: in
 * this version the data path must run on the control thread (the host role does, in
 * one event loop). The gateway's workers will read only neighbour entries, which are
 * RCU-safe (neigh.h), and hand everything else to the control thread.
 *
 * Connected mode (RFC 4755, cm/) plugs in here: the RC flag in the link's hardware
 * address, an SRQ, and per neighbour neigh_link.conn/.mtu (published by the control
 * thread when cm_callbacks.up/down fire); ipoib_link_xmit_neigh already sends on the
 * connection's QP when conn is set. Not wired yet: cfg.connected returns -EOPNOTSUPP.
 */
#ifndef IBGW_FWD_IPOIB_LINK_H
#define IBGW_FWD_IPOIB_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fwd/ib_port.h"
#include "fwd/neigh.h"
#include "lib/ipoib.h"

struct ipoib_link;
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
	 * umad2sim, the sim backend's query SMPs time out once sm-client/sa_umad is open
	 * in the same process: both register an SMI agent; so query first, then pass it.)
	 * The link never queries the port after ipoib_link_new. */
	const struct ibp_port_attr *attr;
	struct evloop *loop; /* timers (neighbours); NULL: call ipoib_link_tick */
	uint16_t pkey;       /* 0: 0xffff */
	uint8_t scope;       /* MGID scope; 0: link-local (2) */
	enum ipoib_role role;
	bool accept_spoofed_arp;
	bool connected;                  /* RFC 4755: not wired yet (-EOPNOTSUPP) */
	unsigned recv_depth, send_depth; /* 0: 256 each */
	struct neigh_params neigh;
	neigh_defer_fn defer; /* for the neighbour table, see neigh.h */
	void *defer_ctx;
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
	IPOIB_DROP_TX_DOWN,       /* link not up */
	IPOIB_DROP_TX_TOO_BIG,    /* above the destination's MTU */
	IPOIB_DROP_TX_NO_PATH,    /* PathRecord failed */
	IPOIB_DROP_TX_PATH_QUEUE, /* path queue overflow (oldest dropped) */
	IPOIB_DROP_TX_MCAST_JOIN, /* join queue overflow, or the link stopped */
	IPOIB_DROP_TX_NEIGH,      /* neighbour queue overflow, failure, table full */
	IPOIB_DROP_TX_POST,       /* post_send refused */
	IPOIB_DROP_TX_NOBUF,      /* control side found the pool empty */
	IPOIB_DROP_COUNT
};
const char *ipoib_drop_name(enum ipoib_drop d);

struct ipoib_link_stats {
	uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
	uint64_t rx_mcast, tx_mcast, rx_arp, rx_nd, tx_arp, tx_nd;
	uint64_t drops[IPOIB_DROP_COUNT];
	uint64_t joins, join_failures, up_count, down_count;
	uint64_t paths_resolved, path_failures, ah_rebuilt;
};

/* ---- receive classification (pure; used by the fuzz harness too) ------------------ */
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
};
/* buf/len: the receive buffer as the completion leaves it (GRH area first). */
enum ipoib_rx_kind ipoib_rx_classify(const uint8_t *buf, size_t len, bool has_grh,
				     struct ipoib_rx *out);

/* ---- control thread ------------------------------------------------------------- */
int ipoib_link_new(const struct ipoib_link_config *cfg, struct ipoib_link **out);
int ipoib_link_start(struct ipoib_link *l);
/* Leave the groups, destroy the QP (the owner keeps polling meanwhile). */
void ipoib_link_stop(struct ipoib_link *l);
/* After stop, and after the SA client is freed (its -ECANCELED callbacks land here). */
void ipoib_link_free(struct ipoib_link *l);

void ipoib_link_port_event(struct ipoib_link *l, const struct ibp_event *ev);
/* An address of the link (answered for in the gateway role; IPv6: solicited-node group
 * joined). family AF_INET (4 octets) or AF_INET6 (16), network order. */
int ipoib_link_add_addr(struct ipoib_link *l, int family, const uint8_t *addr);
/* Full-member join of a group (to receive it), e.g. the groups a host's kernel listens
 * to. Idempotent. */
int ipoib_link_mcast_join(struct ipoib_link *l, const union ib_gid *mgid);
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

/* ---- data path (port owner) ---------------------------------------------------- */
/* Receive completion of the link's QP: classify (drops counted). The buffer stays the
 * caller's: give it back with ipoib_link_repost when done with rx->data. */
enum ipoib_rx_kind ipoib_link_rx(struct ipoib_link *l, const struct ibp_wc *wc,
				 struct ipoib_rx *out);
void ipoib_link_repost(struct ipoib_link *l, struct ibp_buf *b);
/* Send completion of the link's QP: the buffer returns to the pool. */
void ipoib_link_tx_done(struct ipoib_link *l, const struct ibp_wc *wc);

/* To an IP neighbour (unicast) or group (multicast, broadcast 255.255.255.255 and the
 * link's directed broadcast are the caller's to map to the broadcast MGID).
 * Returns 0 sent, 1 queued for resolution, or -errno (dropped, counted). */
int ipoib_link_xmit_ip(struct ipoib_link *l, int family, const uint8_t *dst, uint16_t ethertype,
		       struct ibp_buf *b);
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
