/*
 * Private header of the verbs shim (libibverbs2sim.so, sim/verbs/vsim_*.c): the
 * simulated HCA's objects behind the ibv_* handles the program holds, and what the
 * shim's two halves call in each other.
 *
 *   vsim_dev.c  devices, contexts, the HCA's progress thread and its fabric
 *               connections, port identity and port events, PD, MR, CQ, completion
 *               channel, async events
 *   vsim_qp.c   QPs and their ibv_modify_qp state machine, SRQ, AH, multicast,
 *               post/poll, UD packets in and out, the RC transport's glue (ib_rc);
 *               the RSS receive QP and the source-QPN send QP
 *   vsim_wq.c   receive work queues, indirection tables, and the RSS receive: the
 *               Toeplitz hash of an IPoIB datagram's flow picking the WQ
 *
 * Threads. Each context has one mutex, ctx->lock, over everything of that context:
 * its fabric connections, QPs, SRQs, WQs, CQs, channels' event queues and the async
 * event queue. The program's threads take it in each verb; the context's progress
 * thread (the HCA's "firmware": receives packets, runs RC timers, re-reads the ports)
 * takes it for each batch. Two finer locks let the threads of a program that spreads
 * its receives (one worker per WQ and CQ: enhanced IPoIB's RSS) poll and post beside
 * the progress thread without waiting for its batch:
 *   cq->lock  a CQ's ring and arming (vsim_cq): ibv_poll_cq and ibv_req_notify_cq take
 *             only it; whoever adds or removes completions holds ctx->lock, then it;
 *   wq->lock  a WQ's receive ring and state (vsim_wq): ibv_post_wq_recv takes only it
 *             (ctx->lock first when the WQ is in ERR: the post completes flushed);
 *             the progress thread holds ctx->lock, then it while it lands a datagram.
 * Order: ctx->lock, wq->lock, cq->lock. Sends (any QP) and posts to a QP's receive
 * queue or an SRQ take ctx->lock: the sends of a port share its fabric connection,
 * whose ring has one producer. Nothing in the shim calls back into the program, so
 * a program's own locks held across a verb (ibgwd's port_lock) cannot deadlock with
 * it. The SMPs that read a port (simnode) are sent without ctx->lock.
 */
#ifndef IBGW_SIM_VERBS_VSIM_PVT_H
#define IBGW_SIM_VERBS_VSIM_PVT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim/verbs/ib_rc.h"
#include "sim/verbs/sim_node.h"
#include "sim/verbs/vsim.h"
#include "lib/ib_packet.h"
#include "lib/ib_simfab.h"

/* What ibv_query_device reports: a ConnectX-5 (mlx5) as `ibv_devinfo -v` shows one. */
#define VSIM_MAX_QP_WR       32768
#define VSIM_MAX_SGE         30
#define VSIM_MAX_CQE         4194303
#define VSIM_MAX_SRQ_WR      32767
#define VSIM_MAX_INLINE      512 /* granted up to this; mlx5's limit depends on the WQE size */
#define VSIM_PKEY_TBL        128
#define VSIM_GID_TBL         1 /* only GID 0 (prefix:GUID) exists on the fabric */
#define VSIM_MAX_RD_ATOM     16
#define VSIM_MCAST_QP_ATTACH 240
#define VSIM_GRH             40 /* UD receive buffers start with the GRH area */
#define VSIM_QP_BUCKETS      256
#define VSIM_EVQ             256 /* async events kept until read */
/* RSS for UD QPs (ibv_query_device_ex), offered for the rack (docs/verbs-sim.md). */
#define VSIM_MAX_WQ      64 /* max_wq_type_rq: WQs per context */
#define VSIM_MAX_IND_TBL 64 /* max_rwq_indirection_tables */
#define VSIM_MAX_IND_LOG 8  /* max_rwq_indirection_table_size 2^8 */
#define VSIM_RSS_KEY_LEN 40 /* the Toeplitz key (Microsoft RSS) */
#define VSIM_RSS_FIELDS                                                                            \
	(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |                      \
	 IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |              \
	 IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP)

/* UD sends that wait for room in the ring to the fabric (vsim_qp.c, send_ud): each
 * payload's room (one packet of the largest MTU), and how soon they try again (the
 * fabric drains a full ring of 1024 slots in several milliseconds, so it stays fed). */
#define VSIM_UD_MAX      4096
#define VSIM_UD_RETRY_NS 1000000u

struct vsim_ctx;
struct vsim_qp;

struct vsim_port {
	uint8_t num;
	struct simfab_client *fab; /* NULL until HELLO is accepted (a LID is needed) */
	struct simnode_port sp;    /* identity and state as last read */
	bool have_sp;
	bool link_up;    /* the fabric's PORT_STATE (up until it says otherwise) */
	bool active;     /* what the last PORT_ACTIVE/PORT_ERR said */
	bool rereg;      /* PortInfo ClientReregister as last read */
	bool claimed;    /* the context uses it (queried, or QPs on it): on the fabric */
	bool tx_blocked; /* the socket was full: wait for EPOLLOUT */
	bool out_armed;
	uint8_t tx[IB_PACKET_MAX_LEN];
};

struct vsim_pd {
	struct ibv_pd pd;
	unsigned users; /* MRs, QPs, SRQs, AHs: dealloc_pd refuses (EBUSY) while any */
};

struct vsim_mr {
	struct ibv_mr mr;
	int access;
	struct vsim_mr *next;
};

struct vsim_chan {
	struct ibv_comp_channel ch; /* ch.fd: an eventfd in semaphore mode, one count per
				     * queued event, so read(2) keeps the fd's blocking mode */
	struct ibv_cq **q;
	unsigned cap, head, len;
	unsigned cqs; /* CQs using it: destroy refuses (EBUSY) while any */
};

struct vsim_cq {
	struct ibv_cq cq;
	pthread_mutex_t lock; /* ring, head, len, armed, solicited_only (see Threads) */
	struct ibv_wc *ring;
	unsigned cap, head, len;
	bool armed, solicited_only;
	bool overrun; /* ctx->lock */
	unsigned events_got, events_acked;
	unsigned users; /* QPs */
	struct vsim_cq *next;
};

/* A receive WQE (QP receive queue or SRQ). */
struct vsim_rwqe {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge *sge; /* the queue's max_sge entries */
};

struct vsim_rq {
	struct vsim_rwqe *ring;
	struct ibv_sge *sges;
	unsigned cap, head, len, max_sge;
};

struct vsim_srq {
	struct ibv_srq srq;
	struct vsim_rq rq;
	unsigned users;
};

/* A receive work queue (ibv_create_wq, IBV_WQT_RQ): a receive ring on its own CQ, fed
 * by the RSS QPs whose indirection tables name it. Its number is a QPN the fabric gave
 * on port (a UD QP there that nothing is delivered to), so it is unique among the
 * context's QPNs on that port and completions can carry it as qp_num. */
struct vsim_wq {
	struct ibv_wq wq;
	struct vsim_port *port;
	pthread_mutex_t lock; /* rq, and wq.state (changed with ctx->lock held too) */
	struct vsim_rq rq;
	unsigned users; /* indirection tables naming it: destroy refuses (EBUSY) while any */
	struct vsim_wq *next;
};

/* A receive WQ indirection table (ibv_create_rwq_ind_table). */
struct vsim_ind {
	struct ibv_rwq_ind_table t;
	unsigned size; /* 2^log_ind_tbl_size entries */
	struct vsim_wq **wq;
	unsigned users; /* RSS QPs: destroy refuses (EBUSY) while any */
	struct vsim_ind *next;
};

struct vsim_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

/* A send WQE, in posting order. RC: the engine's ring holds the same order. UD: a send
 * waiting for the port (its ring to the fabric was full), its payload gathered into
 * the QP's ud_area, sent and completed in order when the ring has room. */
struct vsim_swqe {
	uint64_t wr_id;
	bool signaled;
	uint32_t len;
	uint8_t *copy; /* inline data or a gathered multi-SGE message; else NULL */
	bool copy_alloc;
	/* UD: the address copied at post time, as mlx5 copies it into the WQE (the AH may
	 * be destroyed while the send waits) */
	struct ibv_ah_attr av;
	uint32_t remote_qpn, remote_qkey;
	enum ibv_wc_status status; /* not SUCCESS: completes with it, unsent */
};

struct vsim_qp {
	struct ibv_qp qp;
	struct vsim_ctx *ctx;
	struct vsim_port *port; /* the fabric connection its QPN belongs to */
	enum ibv_qp_type type;
	bool sq_sig_all;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	/* attributes (ibv_modify_qp) */
	uint16_t pkey_index;
	uint32_t qkey;
	int access;
	struct ibv_ah_attr av;
	enum ibv_mtu path_mtu;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
	/* queues */
	struct vsim_rq rq; /* not used with an SRQ */
	struct vsim_srq *srq;
	unsigned sq_out; /* UD: 0 (sends complete when on the wire); RC: WQEs in the engine */
	struct vsim_swqe *sq;
	uint32_t sq_cap, sq_head, sq_len;
	uint8_t *inline_area; /* sq_cap * max_inline */
	uint8_t *ud_area;     /* UD: sq_cap * VSIM_UD_MAX, the waiting sends' payloads */
	struct ibrc_qp rc;
	bool rc_init;
	uint32_t ud_psn;
	uint64_t rc_rx_wr_id; /* RC: the receive WQE the message being received fills */
	bool rbad;            /* RC: the receive WQE taken had a bad SGE */
	bool fatal;           /* lost a completion (CQ overrun): to ERR */
	bool last_wqe_told;   /* SRQ QP in ERR: QP_LAST_WQE_REACHED raised */
	bool touched;
	unsigned events_got, events_acked;
	unsigned mcast;
	/* RSS receive QP (IBV_QP_INIT_ATTR_IND_TABLE | RX_HASH): no queues of its own;
	 * each datagram goes to the WQ its flow's hash picks in rss. */
	struct vsim_ind *rss;
	uint8_t rss_key[VSIM_RSS_KEY_LEN];
	uint64_t rss_fields;
	/* Not 0: the errno ibv_modify_qp and ibv_query_qp of this RSS QP fail with (mlx5's
	 * TIR, ready when created: its WQs decide what it receives; its P_Key index and
	 * Q_Key are its send QPs'). From IBVSIM_RSS_QP_MODIFY when it was created. */
	int fixed;
	/* Source-QPN send QP (IBV_QP_CREATE_SOURCE_QPN): its datagrams carry src's QPN in
	 * the DETH and reach the fabric as src's; it receives nothing. */
	struct vsim_qp *src;
	unsigned src_users; /* source-QPN QPs sending as this one: destroy refuses (EBUSY) */
	struct vsim_qp *hnext, *next, *prev;
};

struct vsim_ctx {
	struct verbs_context vctx; /* vctx.context is the program's handle */
	pthread_mutex_t lock;
	unsigned node; /* index in the device list */
	unsigned n_ports;
	struct vsim_port port[VSIM_MAX_PORTS];
	uint8_t home_port; /* where new QPs get their QPN: the last port queried */
	struct vsim_qp *qpt[VSIM_QP_BUCKETS];
	struct vsim_qp *qps;
	struct vsim_mr *mrs;
	struct vsim_cq *cqs;
	struct vsim_wq *wqs;
	struct vsim_ind *inds;
	unsigned n_wqs, n_inds;
	unsigned n_objs; /* PDs, CQs, channels, SRQs, QPs, AHs alive (close warns) */
	uint32_t next_key;
	struct ibv_async_event evq[VSIM_EVQ];
	unsigned ev_head, ev_len;
	bool fatal_pending;
	/* progress thread */
	pthread_t thread;
	bool thread_on, stop;
	/* The port watcher: re-reads the ports by SMP every IBVSIM_PORT_MS, apart from the
	 * progress thread, so packets never wait for an SMP (as an HCA's data path never
	 * waits for its SMA). watch_cond (with ctx->lock) wakes it to stop. */
	pthread_t watcher;
	bool watcher_on;
	pthread_cond_t watch_cond;
	/* The fault file (IBVSIM_FAULT_FILE, read once at open: the watcher does not call
	 * getenv while the program may change its environment). */
	char fault_path[256];
	struct vsim_ctx *next_ctx; /* the process's contexts (g.ctxs, g.lock) */
	int wake_fd, epfd;
	/* When the progress thread's sleep ends (ns; 0: it is awake). A post that arms an
	 * RC timer due earlier wakes it, else the retransmission waited out its sleep (up
	 * to 1 s when nothing else was due). ctx->lock. */
	uint64_t sleep_until;
};

static inline struct vsim_ctx *vsim_ctx_of(struct ibv_context *c)
{
	return (struct vsim_ctx *)((uint8_t *)c -
				   __builtin_offsetof(struct vsim_ctx, vctx.context));
}

/* vsim_dev.c */
uint64_t vsim_now_ns(void);
/* The ports of the node the shim's device stands for (NodeInfo NumPorts), 0 before the
 * device list was read. Any thread. */
unsigned vsim_node_ports(void);
/* The port num of a context of this process that has it on the fabric, with that
 * context's lock held (*ctx), or NULL. Any thread. */
struct vsim_port *vsim_port_on_fabric(uint8_t num, struct vsim_ctx **ctx);
/* ctx->lock held: the context uses this port; connect it to the fabric if it is not. */
void vsim_port_claim(struct vsim_ctx *ctx, struct vsim_port *p);
void vsim_wake(struct vsim_ctx *ctx);
void vsim_event(struct vsim_ctx *ctx, enum ibv_event_type type, void *elem, uint8_t port_num);
/* Drop queued events about a QP or CQ being destroyed (it cannot ack them any more). */
void vsim_event_forget(struct vsim_ctx *ctx, const struct ibv_qp *qp, const struct ibv_cq *cq);
/* The same for a WQ (WQ_FATAL). */
void vsim_event_forget_wq(struct vsim_ctx *ctx, const struct ibv_wq *wq);
/* A fault asked for in the environment (IBVSIM_FAULT_*): its value as a number, 0 when
 * unset or not a positive number. Read at each call. */
unsigned vsim_fault(const char *name);
/* Add a completion to cq (ctx->lock). false: the CQ overran (CQ_ERR raised, the QP is
 * marked fatal and goes to ERR in the progress thread). */
bool vsim_cq_add(struct vsim_ctx *ctx, struct vsim_cq *cq, const struct ibv_wc *wc,
		 struct vsim_qp *qp);
/* Remove qp's completions from its CQs (mlx5 does so at destroy and at RESET). */
void vsim_cq_clean(struct vsim_ctx *ctx, struct vsim_qp *qp);
/* Remove the completions of queue number qp_num from cq (ctx->lock). */
void vsim_cq_remove(struct vsim_cq *cq, uint32_t qp_num);
/* The MR that holds [addr, addr + len) with lkey in pd and grants access, or NULL. */
struct vsim_mr *vsim_mr_find(struct vsim_ctx *ctx, struct ibv_pd *pd, uint32_t lkey, uint64_t addr,
			     uint64_t len, int access);
/* A fabric request failed because the socket was full: wait for room, try again. */
bool vsim_ctl_again(struct vsim_port *port, int ret, int *tries);
int vsim_pkey_index_valid(const struct vsim_port *port, uint16_t index);

/* IBVSIM_RSS=0 plays an HCA without UD RSS (read at each call). */
bool vsim_rss_enabled(void);
/* What ibv_modify_qp of an RSS QP created now does (IBVSIM_RSS_QP_MODIFY, read at
 * each ibv_create_qp_ex): 0, it goes through the UD state machine; else the errno it
 * fails with, as on mlx5 (docs/verbs-sim.md). */
int vsim_rss_qp_modify_errno(void);
/* A UD datagram dropped for want of a receive WQE (or a WQ not ready). */
void vsim_count_rx_drop(void);

/* vsim_qp.c */
bool vsim_rq_take(struct vsim_rq *rq, struct vsim_rwqe *out);
int vsim_rq_init(struct vsim_rq *rq, unsigned cap, unsigned max_sge);
void vsim_rq_fini(struct vsim_rq *rq);
int vsim_rq_post(struct vsim_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
unsigned vsim_pow2_at_least(unsigned v);
/* A UD datagram p (wire: the packet as received) into receive WQE w of a queue of pd
 * whose completions go to cq as qp_num; rx_qp is the QP it was addressed to (P_Key
 * index, port). false: the WQE failed (LOC_PROT_ERR, LOC_LEN_ERR, completed so): the
 * queue goes to ERR. */
bool vsim_ud_land(struct vsim_qp *rx_qp, struct ibv_pd *pd, struct ibv_cq *cq, uint32_t qp_num,
		  const struct vsim_rwqe *w, const struct ib_packet *p, const uint8_t *wire);
void vsim_qp_rx(struct vsim_ctx *ctx, struct vsim_port *port, uint32_t qpn, const uint8_t *wire,
		size_t len, uint64_t now);
void vsim_rc_service(struct vsim_ctx *ctx, uint64_t now);
/* The UD sends waiting for room in a port's ring, sent as far as it goes; the time to
 * try again (now + VSIM_UD_RETRY_NS) while some wait, else 0. ctx->lock held. */
uint64_t vsim_ud_service(struct vsim_ctx *ctx, uint64_t now);
uint64_t vsim_rc_deadline(struct vsim_ctx *ctx, bool *work);
void vsim_qp_fatal_all(struct vsim_ctx *ctx);
/* A fault on demand (vsim_test_fault, IBVSIM_FAULT_FILE): the UD QP qpn of ctx to ERR
 * with QP_FATAL (an RSS QP: its index-th source-QPN send QP, by QPN), or (wq) the WQ at
 * entry index of RSS QP qpn's indirection table to ERR with WQ_FATAL. ctx->lock held.
 * 0, -ENOENT (no such QP here), -EINVAL (no such part, or not in a state that fails). */
int vsim_fault_qp(struct vsim_ctx *ctx, uint32_t qpn, unsigned index, bool wq);
int vsim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int vsim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int vsim_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
void vsim_qp_destroy_all(struct vsim_ctx *ctx);
struct ibv_qp *vsim_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *ia);

/* vsim_wq.c */
struct ibv_wq *vsim_create_wq(struct ibv_context *c, struct ibv_wq_init_attr *ia);
int vsim_modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a);
int vsim_destroy_wq(struct ibv_wq *wq);
/* A RDY WQ to ERR (its WQEs flushed) with WQ_FATAL; -EINVAL when not RDY. ctx->lock. */
int vsim_wq_fault(struct vsim_ctx *ctx, struct vsim_wq *wq);
struct ibv_rwq_ind_table *vsim_create_ind(struct ibv_context *c,
					  struct ibv_rwq_ind_table_init_attr *ia);
int vsim_destroy_ind(struct ibv_rwq_ind_table *t);
/* The Toeplitz hash (Microsoft RSS) of an IPoIB datagram's flow: the fields selected
 * (IBV_RX_HASH_*) of the IPv4 or IPv6 packet after the 4-octet IPoIB header; 0 for
 * anything else (ARP, truncated). */
uint32_t vsim_rss_hash(const uint8_t key[VSIM_RSS_KEY_LEN], uint64_t fields, const uint8_t *payload,
		       size_t len);
/* An RSS QP's datagram to the WQ its hash picks (ctx->lock). */
void vsim_rss_rx(struct vsim_qp *qp, const struct ib_packet *p, const uint8_t *wire);
/* Free the context's WQs and indirection tables (close; QPs already gone). */
void vsim_wq_destroy_all(struct vsim_ctx *ctx);

#endif
