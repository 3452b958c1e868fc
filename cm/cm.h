/*
 * The IPoIB connected-mode connection manager (RFC 4755) of one IPoIB link: it speaks
 * the IBA CM protocol (cm_mad.h) through a MAD transport and keeps one RC connection
 * per peer (peer GID + peer UD QPN).
 *
 *   active   cm_connect() -> qp_create -> REQ ......... REP -> qp_connect -> RTU -> up
 *   passive  REQ -> qp_create (SRQ) -> qp_connect -> REP ......... RTU -> up
 *   teardown DREQ <-> DREP; REJ ends a connection being set up.
 *
 * IPoIB rules (docs/connected-mode.md):
 *   - service ID 0x1000000000000000 | the TARGET's UD QPN; a REQ for another service ID
 *     gets REJ "invalid service ID";
 *   - private data (reserved octet, 24-bit UD QPN, 32-bit receive MTU) in REQ, REP and
 *     every REJ we send;
 *   - connection MTU = min(both receive MTUs) - 4, at most 65520;
 *   - crossing REQs: a REQ from a peer to which our own REQ is outstanding is accepted
 *     if our link-layer address (flags zeroed) is the smaller one, most significant
 *     octet first, and rejected with "consumer reject" otherwise; the other side does
 *     the opposite, so exactly one connection results;
 *   - the caller decides whom to connect to: peers whose hardware address lacks the RC
 *     flag are reached over UD and never get a REQ (cm_connect refuses them with
 *     -EOPNOTSUPP as a safety net); multicast and broadcast never use a connection.
 *
 * One connection per peer: a new REQ (a communication ID we have not seen) from a peer
 * we are connected to means the peer started over (it restarted, or gave up on the
 * old connection): the old connection is torn down (DREQ) and the new one accepted.
 * A retransmitted REQ (same communication ID) never makes a second connection: it is
 * answered with the REP (or MRA) already sent.
 *
 * Timers: the REQ's CM response timeouts (4.096 us * 2^code, plus twice the packet
 * lifetime) bound each wait; REQ, REP and DREQ are resent at most max_cm_retries
 * times, then the attempt ends (REJ "timeout" for REQ and REP). An MRA from the peer
 * stretches the wait to its service timeout. The passive side may ask for time
 * (qp_create returns -EINPROGRESS): an MRA goes out and cm_accept_ready() or
 * cm_accept_fail() finishes later. Established connections the caller has not
 * reported active for idle_timeout_ms are torn down; cm_neigh_expired() tears down
 * the connection of a neighbour that aged out.
 *
 * Time: cm_tick() runs what is due; with cfg.loop set the CM keeps its own evtimer on
 * that loop, otherwise (unit tests) the caller calls cm_tick() itself, and the clock
 * is cfg.now_ms (default evloop_now_ms).
 *
 * Several IPoIB links on one port share its QP1: give each link its own cm (its own
 * UD QPN), pass each received MAD to them in turn until one returns something other
 * than -ENOENT, and if none claims it pass it to cm_input_orphan() of one of them.
 *
 * Threads: a struct cm and everything it calls back belong to the control thread.
 * The data path reports activity through the control thread (cm_activity).
 */
#ifndef IBGW_CM_CM_H
#define IBGW_CM_CM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm/cm_mad.h"
#include "port/ib_port.h"
#include "lib/ipoib.h"

struct cm;
struct evloop;

/* Where a CM MAD goes to or came from. The transport sends to QP1 of the port at lid
 * (through a GRH to gid when has_grh) with Q_Key 0x80010000 on pkey_index. */
struct cm_addr {
	uint16_t lid; /* send: DLID; receive: SLID */
	uint8_t sl;
	uint16_t pkey_index;
	bool has_grh;
	union ib_gid gid; /* send: DGID; receive: SGID (if has_grh) */
	uint32_t flow_label;
	uint8_t hop_limit, traffic_class;
};

/* How MADs leave: one 256-octet MAD to remote QP1. 0 or -errno (the CM counts the
 * failure and relies on its retransmission). */
struct cm_transport_ops {
	int (*send)(void *ctx, const struct cm_addr *to, const uint8_t *mad, size_t len);
};

/* The path to a peer, from the SA client's PathRecord (active side). */
struct cm_path_info {
	uint16_t slid, dlid;
	union ib_gid sgid, dgid;
	bool has_grh; /* the peer is off-subnet: GRH on the connection and on MADs */
	uint32_t flow_label;
	uint8_t hop_limit, traffic_class, sl;
	uint8_t packet_rate;     /* IBA rate code */
	uint8_t packet_lifetime; /* PathRecord PacketLifeTime (5 bits) */
	enum ib_mtu mtu;
	uint16_t pkey;
};

enum cm_state {
	CM_STATE_REQ_SENT,    /* active: waiting for REP */
	CM_STATE_MRA_SENT,    /* passive: REQ received, application asked for time */
	CM_STATE_REP_SENT,    /* passive: waiting for RTU */
	CM_STATE_ESTABLISHED, /* up */
	CM_STATE_DREQ_SENT,   /* teardown: waiting for DREP */
	CM_STATE_TIMEWAIT,    /* closed; kept a while to answer retransmissions */
	CM_STATE_COUNT
};
const char *cm_state_name(enum cm_state s);

enum cm_close_reason {
	CM_CLOSE_LOCAL,    /* cm_disconnect / cm_close */
	CM_CLOSE_PEER,     /* DREQ from the peer */
	CM_CLOSE_REJECTED, /* REJ (reason in the info) */
	CM_CLOSE_TIMEOUT,  /* retries used up */
	CM_CLOSE_IDLE,     /* idle_timeout_ms without activity */
	CM_CLOSE_NEIGH,    /* cm_neigh_expired */
	CM_CLOSE_REPLACED, /* the peer connected anew */
	CM_CLOSE_CROSSED,  /* our REQ lost the crossing-REQ rule */
	CM_CLOSE_ERROR,    /* a callback failed, bad private data, or a send failed */
	CM_CLOSE_PATH,     /* its path died (cm_disconnect_dlid: an IB router went down) */
	CM_CLOSE_COUNT
};
const char *cm_close_reason_name(enum cm_close_reason r);

/* What `gwctl show connections` shows of one connection (plain data). */
struct cm_conn_info {
	struct ipoib_hwaddr peer; /* flags RC, peer UD QPN, peer GID */
	enum cm_state state;
	bool active; /* we sent the REQ */
	uint32_t local_comm_id, remote_comm_id;
	uint32_t local_qpn, remote_qpn; /* RC QPNs (remote 0 until known) */
	uint32_t mtu;                   /* IP MTU, 0 until known */
	uint32_t peer_rx_mtu;
	uint16_t dlid;    /* the connection's path: the peer, or the IB router towards it */
	uint64_t age_ms;  /* since created */
	uint64_t idle_ms; /* since last activity (or since up) */
	uint32_t retries; /* MADs resent for this connection */
	uint32_t mra_rcvd;
	uint16_t rej_reason; /* last REJ received, 0 if none */
};

/* What the CM asks of its user (the IPoIB link). qp is the user's handle. */
struct cm_callbacks {
	/* Create an RC QP receiving through the link's SRQ; *qp and *qpn out. 0 or
	 * -errno. Passive side only: -EINPROGRESS means "later": the CM sends an MRA
	 * and waits for cm_accept_ready/cm_accept_fail (conn->local_comm_id names it). */
	int (*qp_create)(void *ctx, const struct cm_conn_info *conn, void **qp, uint32_t *qpn);
	/* Move the QP to RTS with the connection's parameters. 0 or -errno. */
	int (*qp_connect)(void *ctx, void *qp, const struct ibp_qp_connect *c);
	/* Destroy a QP qp_create made (after down, or when an attempt fails). */
	void (*qp_destroy)(void *ctx, void *qp);
	/* The connection carries traffic now: send on qp, IP MTU conn->mtu. */
	void (*up)(void *ctx, const struct cm_conn_info *conn, void *qp);
	/* It no longer does (called once for every connection that was up, before
	 * qp_destroy) -- or an attempt ended without coming up (was_up false). */
	void (*down)(void *ctx, const struct cm_conn_info *conn, void *qp, bool was_up,
		     enum cm_close_reason why);
	/* Passive side, a REQ from another IB subnet (not subnet-local): the path back
	 * to the peer's GID, as the SA or a GID route gives it. The REQ's LIDs name the
	 * active side's subnet (seed 004: the passive side looks up the return path
	 * rather than use them); the connection takes the SL, rate, GRH fields and the
	 * smaller MTU from *out, and as its DLID the router the REQ came through (its
	 * LRH source: both ends of an RC connection must use one router, as Linux's CM
	 * does too). 0 with *out filled; -EINPROGRESS while being resolved (an MRA goes
	 * out; the user calls cm_return_path when it knows); another -errno when there
	 * is none (REJ "invalid GID"). NULL: the REQ's fields, and that router. */
	int (*return_path)(void *ctx, const union ib_gid *gid, struct cm_path_info *out);
};

struct cm_config {
	struct ipoib_hwaddr local; /* our link address: flags, UD QPN, port GID */
	uint16_t lid;              /* our port LID */
	uint64_t ca_guid;
	uint16_t pkey, pkey_index;   /* the link's P_Key and its index */
	uint32_t rx_mtu;             /* our receive MTU incl. IPoIB header; 0: 65524 */
	uint8_t response_timeout;    /* CM response timeout code; 0: 16 (268 ms) */
	uint8_t max_cm_retries;      /* 0..15; 0 means the default, 8 */
	uint8_t mra_service_timeout; /* what our MRA asks for; 0: 20 (4.3 s) */
	uint8_t retry_count;         /* RC transport retries (3 bits); as given */
	uint8_t rnr_retry;           /* RNR retries we ask the peer for (7 = forever) */
	uint8_t min_rnr_timer;       /* our responder's RNR NAK timer code */
	uint64_t idle_timeout_ms;    /* 0: no idle teardown */
	uint64_t timewait_ms;        /* 0: one response timeout */
	unsigned max_conns;          /* 0: 1024; further REQs get REJ "no resources" */
	uint8_t comm_id_tag;         /* top octet of our communication IDs (one per link
				       on a port keeps them apart); 0: random */
	const struct cm_transport_ops *transport;
	void *transport_ctx;
	const struct cm_callbacks *cb;
	void *cb_ctx;
	struct evloop *loop;           /* NULL: the caller calls cm_tick */
	uint64_t (*now_ms)(void *ctx); /* NULL: evloop_now_ms */
	void *clock_ctx;
	uint32_t seed; /* PSNs, IDs, TIDs; 0: from getrandom */
};

/* Per-instance counters (monotonic). */
struct cm_stats {
	uint64_t rx_mads, tx_mads, tx_errors;
	uint64_t rx_bad[CM_MAD_ERR_COUNT]; /* decode refusals by reason */
	uint64_t rx_bad_pdata[CM_PDATA_ERR_COUNT];
	uint64_t rx_by_attr[8], tx_by_attr[8]; /* index: attr - 0x10 (REQ..DREP), 7: CPI */
	uint64_t rx_unclaimed;                 /* returned -ENOENT */
	uint64_t rx_dup_req, rx_dup_rep, rx_dup_dreq, rx_stale;
	uint64_t rx_wrong_state; /* valid message, nothing to do with it now */
	uint64_t crossing_accepted, crossing_rejected;
	uint64_t rej_sent[32], rej_rcvd[32]; /* by reason (32+: in 0) */
	uint64_t retransmits, timeouts;
	uint64_t established, closed[CM_CLOSE_COUNT];
	uint64_t return_path_other_router; /* a REQ from another subnet came through one
					    * router, our path back names another */
};

int cm_new(const struct cm_config *cfg, struct cm **out);
/* Tears every connection down (DREQ, once, no wait) and frees. */
void cm_free(struct cm *cm);

/* Active side: connect to peer over path. 0 (REQ sent), -EOPNOTSUPP (peer has no RC
 * flag), -EALREADY (a connection to the peer exists or is being set up), -ENOSPC
 * (max_conns), -EINVAL (bad arguments), or qp_create's error. */
int cm_connect(struct cm *cm, const struct ipoib_hwaddr *peer, const struct cm_path_info *path);

/* One received MAD (256 octets, GRH stripped) from `from`. 0 when it was ours (acted
 * upon, or refused and counted), -ENOENT when it names nothing of this instance. */
int cm_input(struct cm *cm, const uint8_t *mad, size_t len, const struct cm_addr *from);
/* What the IBA asks for a MAD no instance claimed: REJ "invalid service ID" to a REQ,
 * REJ "invalid communication ID" to a REP, DREP to a DREQ, a GetResp to a
 * ClassPortInfo Get; nothing for the rest. */
void cm_input_orphan(struct cm *cm, const uint8_t *mad, size_t len, const struct cm_addr *from);

/* Passive side, after qp_create returned -EINPROGRESS. 0 or -ENOENT/-EINVAL. */
int cm_accept_ready(struct cm *cm, uint32_t local_comm_id, void *qp, uint32_t qpn);
int cm_accept_fail(struct cm *cm, uint32_t local_comm_id);

/* The path to gid that return_path said was being resolved: path, or NULL when there
 * is none (the waiting REQs get REJ "invalid GID"). Returns how many connections
 * waited for it. */
unsigned cm_return_path(struct cm *cm, const union ib_gid *gid, const struct cm_path_info *path);

/* Teardown of the connection to a peer (flags ignored): DREQ, then down. 0 or
 * -ENOENT. cm_neigh_expired is the same with reason CM_CLOSE_NEIGH, cm_disconnect_error
 * with CM_CLOSE_ERROR (its sends failed). */
int cm_disconnect(struct cm *cm, const struct ipoib_hwaddr *peer);
int cm_disconnect_error(struct cm *cm, const struct ipoib_hwaddr *peer);
int cm_neigh_expired(struct cm *cm, const struct ipoib_hwaddr *peer);
/* Tear down every connection (up or being set up) whose path goes to dlid -- an IB
 * router that went down: the peers behind it are reached again over a new path
 * (the user's next cm_connect). CM_CLOSE_PATH; an established one gets a DREQ (which
 * will likely go unanswered). Returns how many. */
unsigned cm_disconnect_dlid(struct cm *cm, uint16_t dlid);

/* The data path saw traffic on the connection to peer (flags ignored). On a passive
 * connection still waiting for its RTU, traffic means established (IBA 12.9.6). */
int cm_activity(struct cm *cm, const struct ipoib_hwaddr *peer);

/* The connection to a peer (flags ignored): 0 and *out, or -ENOENT. */
int cm_lookup(struct cm *cm, const struct ipoib_hwaddr *peer, struct cm_conn_info *out);

/* Every connection, set-up and teardown included, in no particular order. The
 * callback (NULL: only count) must not call into the CM. Returns the number visited. */
unsigned cm_for_each(struct cm *cm, void (*fn)(const struct cm_conn_info *, void *), void *arg);

/* Run due timers (retransmissions, timeouts, idle, timewait). */
void cm_tick(struct cm *cm);
/* Earliest deadline in ms of cfg.now_ms's clock, 0 if none. */
uint64_t cm_next_deadline(const struct cm *cm);

const struct cm_stats *cm_get_stats(const struct cm *cm);

/* Crossing-REQ rule: true if a REQ from remote is to be accepted while ours to it
 * is outstanding (our address is the smaller, flags zeroed). */
bool cm_crossing_accept(const struct ipoib_hwaddr *local, const struct ipoib_hwaddr *remote);

#endif
