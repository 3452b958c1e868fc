/*
 * The IPoIB link's insides, shared by the files of ipoib/ (and by nothing else):
 *
 *   link.c      life: new/free/start/stop, the UD QP, UP/DOWN, port events, tick, stats
 *   path.c      PathRecords -> address handles, and the neighbours bound to them
 *   mcast.c     multicast joins and leaves, the broadcast group (the link comes up there)
 *   conn.c      connected mode: RC connections through the cm, the port's CM transport
 *   arpnd.c     ARP/ND received and sent, the link's addresses, neighbour resolution
 *   xmit.c      the sends: UD and RC posts, the xmit functions, the queues they fill
 *   datapath.c  the workers' side: receive classification, reposts, send completions
 *
 * Inside a link: the UD QP; a list of multicast groups (broadcast first), each with its
 * join state, its address handle and whether the QP is attached; a list of paths (GID ->
 * PathRecord -> address handle) with a queue of three packets each while resolving; the
 * neighbour table whose link addresses point at the paths' AHs. When a path's AH is
 * rebuilt (port event, changed PathRecord), every neighbour with that GID is republished
 * with the new AH and the old one is destroyed after a grace period.
 *
 * Threads (ipoib_link.h says which public function runs where): the control thread owns
 * every struct below; nothing here takes a lock. The workers (the data path of the
 * port's owner) touch only the fields marked for the data path below; they reach the
 * link through the engine's publication of it (its UD QP and Q_Key, set before the
 * link's UP is published) and a connection through its RC QP's user pointer (freed
 * through cfg.defer, after a grace period). In the host role one thread does everything.
 */
#ifndef IBGW_IPOIB_IPOIB_PVT_H
#define IBGW_IPOIB_IPOIB_PVT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ipoib/ipoib_link.h"
#include "sm-client/sa.h"

#define PATH_QLEN     3
#define PATH_RETRY_MS 1000
/* Paths no neighbour and no connection has needed for this long are freed (each is a
 * GID an IB host once answered from: spoofed ones would otherwise pile up). */
#define PATH_IDLE_MS       60000
#define PATH_GC_MS         5000
#define IPOIB_PATH_BUCKETS 1024
#define ETH_P_IP           0x0800
#define ETH_P_ARP          0x0806
#define ETH_P_IPV6         0x86dd
#define UD_MCAST_QPN       0xffffffu
#define CONN_MAGIC         0x49504f43u /* "IPOC" */
#define EXPIRE_MAX         16
#define CM_PORT_LINKS      16

enum path_state {
	PATH_RESOLVING,
	PATH_VALID,
	PATH_FAILED
};

/* A GID's PathRecord and address handle (path.c). Control thread only: the workers see
 * the AH through the neighbour entries it is published in. */
struct ipoib_path {
	struct ipoib_path *next, *hnext; /* the link's list; its hash chain */
	struct ipoib_link *l;
	uint64_t used_at; /* last time a neighbour or a connection needed it (ms) */
	union ib_gid gid;
	enum path_state state;
	bool querying;
	uint64_t conn_failed_at; /* last connection attempt to this GID that failed */
	struct sa_path sp;
	struct ibp_ah *ah;
	uint64_t failed_at;
	struct {
		struct ibp_buf *b;
		uint32_t qpn;
	} q[PATH_QLEN];
	unsigned qn;
};

/* A multicast group of the link (mcast.c). Control thread only. */
struct ipoib_mcast {
	struct ipoib_mcast *next;
	struct ipoib_link *l;
	union ib_gid mgid;
	bool full, joined, attached, bcast;
	struct sa_mcast_group g;
	uint16_t attached_mlid;
	struct ibp_ah *ah;
	struct ibp_buf *q[PATH_QLEN]; /* encapsulated, waiting for the join */
	unsigned qn;
};

/*
 * One RC connection (connected mode, conn.c). The cm's handle for the QP ("qp" in cm.h)
 * is this struct. Control thread: everything but the data-path fields; the data path
 * reads qp/peer (immutable while published) and writes the atomics; freed through
 * cfg.defer.
 */
struct ipoib_conn {
	uint32_t magic;
	struct ipoib_conn *next;
	struct ipoib_link *l;
	struct ipoib_hwaddr peer; /* flags RC, UD QPN, GID */
	struct ibp_qp *qp;
	uint32_t qpn, remote_qpn, mtu;
	unsigned queue; /* the port queue it completes on (its SRQ's) */
	uint16_t dlid;
	bool up, dead, fail_told;
	uint64_t created;
	struct ibp_buf *q[PATH_QLEN]; /* encapsulated, waiting for up (single-thread users) */
	unsigned qn;
	/* data path -> control thread */
	atomic_uint active, failed;
	atomic_uint_fast64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
};

struct cm_umad;

/* The port's CM MAD transport, shared by its connected links (conn.c): a libibumad
 * agent. Control thread. */
struct ipoib_cm_port {
	struct cm_umad *umad;
	struct ipoib_link *links[CM_PORT_LINKS];
	unsigned n_links;
	uint8_t next_tag;
	uint64_t orphans;
};

struct ipoib_link {
	/* Control thread; fixed from ipoib_link_new on (the data path reads cfg.port, ops,
	 * pa.lid). */
	struct ipoib_link_config cfg;
	const struct ibp_ops *ops;
	char name[32];
	uint16_t pkey, pkey_index;
	uint8_t scope;
	struct ibp_port_attr pa;
	union ib_gid gid;
	/* Control thread writes (start, the broadcast join, stop); the data path reads qp,
	 * qpn and qkey as the link's publication left them. */
	struct ibp_qp *qp;
	uint32_t qpn, qkey, mtu;
	uint8_t sl, rate;
	struct ipoib_hwaddr hw;
	uint8_t hw_bytes[IPOIB_HWADDR_LEN];
	/* Control thread only. qp_broken: the UD QP went to the error state and could
	 * not be brought back (the link stays down; the tick tries again). */
	bool up, started, port_down, qp_broken;
	struct ipoib_mcast *mcasts, *bcast;
	struct ipoib_path *paths;
	struct ipoib_path *path_tab[IPOIB_PATH_BUCKETS]; /* by GID (ipoib_path_find) */
	unsigned n_paths;
	uint64_t path_gc_at; /* next sweep of unused paths (path.c) */
	struct neigh_table *neigh;
	struct evtimer *tick;
	uint8_t v4[IPOIB_LINK_MAX_ADDRS][4];
	unsigned n_v4;
	uint8_t v6[IPOIB_LINK_MAX_ADDRS][16];
	unsigned n_v6;
	/* Learning guard (ipoib_link_set_on_link): senders outside these prefixes create
	 * no neighbour entry. Not set (host role, tests): every sender is learned. */
	struct ip_prefix *on_link;
	unsigned n_on_link;
	bool on_link_set;
	uint64_t last_spoof_log;
	uint64_t spoof_suppressed;
	struct ipoib_link_stats st;
	unsigned nq; /* the port's queues (ibp_ops.queues): a UD QP and an SRQ feed each */
	/* connected mode (control thread, but srq_owed and want_conn: data path too; srq
	 * is read there, fixed while the link is published): an SRQ per queue, each
	 * connection on one of them (ipoib_conn.queue) */
	struct ipoib_cm_port *cmp;
	uint8_t cm_tag;
	struct cm *cm;
	struct ibp_srq *srq[IBP_QUEUES_MAX];
	unsigned next_queue; /* the queue of the next connection (round robin) */
	struct ipoib_conn *conns;
	uint32_t rx_mtu; /* receive MTU incl. the IPoIB header */
	/* RC receives not yet given back to each queue's SRQ */
	atomic_uint srq_owed[IBP_QUEUES_MAX];
	/* UD sends of the workers' data path (ipoib_link_count_tx): any worker may send on
	 * the link, so these are atomics, added into st by ipoib_link_stats. */
	_Atomic uint64_t dp_tx_packets, dp_tx_bytes;
	/* Receive counters of ipoib_link_rx, one set per queue, written by the worker
	 * polling that queue (one at a time: a queue changes worker only across a grace
	 * period): single-writer relaxed atomics, so the control thread reads them without
	 * a race; added into st by ipoib_link_stats. */
	struct {
		_Atomic uint64_t packets, bytes, mcast, rc_packets, rc_bytes;
		_Atomic uint64_t drops[IPOIB_DROP_COUNT];
	} __attribute__((aligned(64))) dp_rx[IBP_QUEUES_MAX];
	atomic_uint want_conn; /* the data path saw an RC peer without a connection */
	/* the data path saw an error completion of the UD QP: the tick asks the backend
	 * whether it is in the error state (qp_recover) */
	atomic_uint ud_qp_check;
	/* Control thread: peers of neighbour entries that left (ipoib_neigh_release). */
	struct ipoib_hwaddr expired[EXPIRE_MAX];
	unsigned n_expired;
	bool expired_overflow;
};

/* Everything below: control thread (the host role's one thread). */

/* ---- link.c ---- */
/* The UD QP with the broadcast group's Q_Key, receives posted; then, connected, the SRQ
 * and the cm. */
int ipoib_create_qp(struct ipoib_link *l);
void ipoib_set_up(struct ipoib_link *l, bool up);

/* ---- xmit.c ---- */
/* Counted in st.drops; b (may be NULL) back to the pool. */
void ipoib_drop_buf(struct ipoib_link *l, struct ibp_buf *b, enum ipoib_drop why);
/* Write the IPoIB header in front of the payload (b->len grows by IPOIB_ENCAP_LEN). */
int ipoib_encap_hdr(struct ibp_buf *b, uint16_t ethertype);
/* Post an encapsulated buffer on the UD QP, or on a connection. Take ownership. */
int ipoib_post_ud(struct ipoib_link *l, struct ibp_ah *ah, uint32_t qpn, struct ibp_buf *b);
int ipoib_post_rc(struct ipoib_link *l, struct ipoib_conn *c, struct ibp_buf *b);
/* Unicast to a peer: the connection when up, else UD (see xmit.c). Takes ownership. */
int ipoib_send_ucast(struct ipoib_link *l, const struct ipoib_hwaddr *peer, struct ipoib_conn *c,
		     struct ibp_ah *ah, uint32_t ud_mtu, struct ibp_buf *b);

/* ---- path.c ---- */
void ipoib_destroy_ah_later(struct ipoib_link *l, struct ibp_ah *ah);
struct ipoib_path *ipoib_path_find(struct ipoib_link *l, const union ib_gid *gid);
/* The path to a GID, created (and its query started) when unknown. */
struct ipoib_path *ipoib_path_get(struct ipoib_link *l, const union ib_gid *gid);
void ipoib_path_query(struct ipoib_path *p);
/* The queued packets: sent on the path's AH (send) or dropped. */
void ipoib_path_flush_queue(struct ipoib_path *p, bool send);
void ipoib_bind_to_path(struct ipoib_link *l, struct neigh_link *ll, const struct ipoib_path *p);
void ipoib_bind_neigh(struct ipoib_link *l, struct neigh_entry *e);
uint32_t ipoib_ud_mtu_of(const struct ipoib_link *l, const struct ipoib_path *p);
unsigned ipoib_paths_gc(struct ipoib_link *l, uint64_t now);

/* ---- mcast.c ---- */
struct ipoib_mcast *ipoib_mcast_find(const struct ipoib_link *l, const union ib_gid *mgid);
/* The group, created and joined (full or send-only) when unknown. */
struct ipoib_mcast *ipoib_mcast_get(struct ipoib_link *l, const union ib_gid *mgid, bool full);
int ipoib_mcast_sa_join(struct ipoib_mcast *m);
/* The packets waiting for the join: sent on the group's AH (send) or dropped. */
void ipoib_mcast_flush(struct ipoib_mcast *m, bool send);

/* ---- conn.c ---- */
/* A neighbour link address's hardware address (false: not an IPoIB one). */
bool ipoib_ll_peer(const struct neigh_link *ll, struct ipoib_hwaddr *out);
struct ipoib_conn *ipoib_conn_find(const struct ipoib_link *l, const struct ipoib_hwaddr *peer);
/* cm_connect to an RC peer whose path is valid, unless one exists or failed lately. */
void ipoib_conn_request(struct ipoib_link *l, const struct ipoib_hwaddr *peer,
			struct ipoib_path *p);
/* p's query ended (valid or failed): REQs from another subnet waiting for their
 * return path go on (or are rejected). */
void ipoib_conn_path_known(struct ipoib_link *l, const struct ipoib_path *p);
int ipoib_cm_start(struct ipoib_link *l);
void ipoib_cm_stop(struct ipoib_link *l);
void ipoib_conn_disconnect_all(struct ipoib_link *l);
void ipoib_conn_tick(struct ipoib_link *l);
int ipoib_cmp_add(struct ipoib_cm_port *cp, struct ipoib_link *l);
void ipoib_cmp_del(struct ipoib_cm_port *cp, struct ipoib_link *l);
/* The neighbour table's release hook (neigh_ops). */
void ipoib_neigh_release(void *ctx, const struct neigh_entry *e, const struct neigh_link *ll);

/* ---- arpnd.c ---- */
/* The neighbour table's hooks: solicit, xmit, drop (and release from conn.c). */
extern const struct neigh_ops ipoib_neigh_ops;

#endif
