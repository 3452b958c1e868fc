/*
 * An InfiniBand HCA port, as the data plane and IPoIB see it: a table of operations
 * (prefix ibp_), in rdma-core's provider manner, with one backend:
 *
 *   verbs  libibverbs on a real HCA (port/ib_port_verbs.c); on the simulated rack the
 *          same code runs on the verbs shim, libibverbs2sim.so (docs/verbs-sim.md).
 *
 * It keeps its packet buffers in the pool of port/ib_bufpool.h.
 *
 * The model is verbs, reduced to what IPoIB needs: one protection domain and one
 * memory registration per port (the packet buffer pool), UD and RC queue pairs, shared
 * receive queues for RC (RFC 4755 recommends them), address handles, multicast
 * attach, batched post/poll, completion fds for the workers and an event fd for the
 * control thread.
 *
 * Queues: a port has one or more queues (ibp_port_config.n_queues asks, queues() says
 * what the device granted), each a completion queue with its own fd, polled by one
 * worker, the way enhanced IPoIB spreads a link over cores. A UD QP spans every queue:
 * one receive QP whose datagrams the HCA spreads by a hash of their flow (verbs RSS:
 * receive work queues behind an indirection table), and one send QP per queue sending
 * with the receive QP's number as its source, so peers see one QPN. An RC QP and an
 * SRQ belong to one queue. A device without RSS for UD QPs gets one queue.
 *
 * Threads: control operations (open, query, create/modify/destroy of QPs and AHs,
 * multicast attach/detach, next_event) are called from the control thread only. A
 * queue's data path (poll, arm, post_recv and post_srq_recv on it) belongs to one
 * thread at a time, its worker; post_send may come from any thread (a UD send leaves
 * on the caller's queue, an RC send on its QP's); buf_get/buf_put are safe from any
 * thread. The backend serialises each queue internally (one lock per queue, taken
 * once per batch), and allows control operations concurrently with the data path; a
 * QP is destroyed only after its senders have stopped posting to it; the queues'
 * pollers keep polling meanwhile, so the QP's flushed completions are reaped (destroy
 * waits for them, as the Linux IPoIB driver does).
 */
#ifndef IBGW_PORT_IB_PORT_H
#define IBGW_PORT_IB_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/ib_gid.h"
#include "lib/ib_types.h"

struct ibp_port;
struct ibp_qp;
struct ibp_srq;
struct ibp_ah;

enum ibp_port_state {
	IBP_PORT_DOWN = 1,
	IBP_PORT_INIT = 2,
	IBP_PORT_ARMED = 3,
	IBP_PORT_ACTIVE = 4
};

/* ConnectX HCAs (mlx4, mlx5) report a P_Key table of 128 entries. */
#define IBP_MAX_PKEYS 128

struct ibp_port_attr {
	enum ibp_port_state state;
	uint16_t lid;
	uint8_t lmc;
	uint16_t sm_lid;
	uint8_t sm_sl;
	uint8_t subnet_timeout; /* 4.096 us * 2^timeout: the SA timeout's base */
	enum ib_mtu active_mtu;
	uint64_t gid_prefix;           /* host order */
	uint64_t port_guid;            /* host order */
	uint16_t pkeys[IBP_MAX_PKEYS]; /* P_Key table, index = pkey_index */
	unsigned n_pkeys;
};

/* Which port to open. */
struct ibp_port_config {
	const char *backend; /* "verbs" */
	const char *device;  /* HCA name ("mlx5_0"; on the simulated rack the node, "gw1") */
	uint8_t port;        /* 1-based */
	size_t buf_size;     /* size of each packet buffer (largest receive) */
	unsigned n_bufs;     /* buffers in the port's pool */
	unsigned n_queues;   /* queues wanted (0: one); at most IBP_QUEUES_MAX */
};

#define IBP_QUEUES_MAX 16

/* Address handle attributes: where a UD packet goes. */
struct ibp_ah_attr {
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate; /* IBA rate code, 0 = port rate */
	bool is_global;      /* add a GRH (off-subnet or multicast destinations) */
	union ib_gid dgid;
	uint32_t flow_label;
	uint8_t hop_limit;
	uint8_t traffic_class;
	uint8_t sgid_index;
};

/* UD and RC. (QP1 is the kernel's on an HCA: connected mode's CM MADs go through a
 * libibumad agent, cm/cm_umad.h.) */
enum ibp_qp_type {
	IBP_QPT_UD,
	IBP_QPT_RC,
};

struct ibp_qp_init {
	enum ibp_qp_type type;
	uint16_t pkey_index;
	uint32_t qkey;       /* UD */
	unsigned send_depth; /* outstanding sends */
	unsigned recv_depth; /* UD: receive depth of each queue; RC with srq: ignored */
	struct ibp_srq *srq; /* RC: receive through this shared receive queue (its queue's) */
	unsigned queue;      /* RC: the queue it completes on; UD: ignored (spans them all) */
	void *user;          /* returned in completions */
};

/* RC connection parameters (from the CM exchange), applied INIT -> RTR -> RTS. */
struct ibp_qp_connect {
	uint32_t remote_qpn;
	uint32_t remote_psn, local_psn;
	struct ibp_ah_attr path;
	enum ib_mtu path_mtu;
	uint8_t timeout, retry_count, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic, max_dest_rd_atomic;
};

/*
 * A packet buffer of the port's pool (port/ib_bufpool.h; registered memory on verbs).
 * The pool belongs to the port; buffers go out with post_send/post_recv and come back
 * in completions.
 */
struct ibp_buf {
	uint8_t *data;
	uint32_t len; /* bytes of payload */
	uint32_t cap; /* bytes available at data */
	uint64_t id;  /* index in the port's pool */
};

/* One work request to send (UD: ah + remote qpn/qkey; RC: neither). */
struct ibp_send {
	struct ibp_qp *qp;
	struct ibp_ah *ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
	struct ibp_buf *buf;
	uint64_t wr_id;
};

enum ibp_wc_status {
	IBP_WC_OK = 0,
	IBP_WC_FLUSHED,
	IBP_WC_RETRY_EXCEEDED,
	IBP_WC_RNR_EXCEEDED,
	IBP_WC_REMOTE_ERROR,
	IBP_WC_LOCAL_ERROR
};

enum ibp_wc_kind {
	IBP_WC_SEND,
	IBP_WC_RECV
};

/* A completion. Received UD buffers start with the 40-byte GRH area, as on verbs;
 * has_grh tells whether it holds a GRH; the payload follows it. */
struct ibp_wc {
	enum ibp_wc_kind kind;
	enum ibp_wc_status status;
	struct ibp_qp *qp; /* RC receive through an SRQ: the QP it arrived on */
	void *qp_user;
	uint64_t wr_id;
	struct ibp_buf *buf;
	uint32_t byte_len; /* received bytes, GRH area included for UD */
	uint16_t slid;
	uint32_t src_qp;
	uint8_t sl;
	uint16_t pkey_index;
	bool has_grh;
};

#define IBP_GRH_AREA 40 /* UD receive buffers reserve this much for the GRH */

enum ibp_event_type {
	IBP_EVENT_PORT_ACTIVE,
	IBP_EVENT_PORT_DOWN,
	IBP_EVENT_LID_CHANGE,
	IBP_EVENT_PKEY_CHANGE,
	IBP_EVENT_SM_CHANGE,
	IBP_EVENT_CLIENT_REREGISTER,
	IBP_EVENT_QP_FATAL, /* qp says which (UD: the QP, or one of its send QPs) */
	IBP_EVENT_WQ_FATAL, /* a receive work queue of UD QP qp (one over several queues) */
};

struct ibp_event {
	enum ibp_event_type type;
	struct ibp_qp *qp;
};

struct ibp_ops {
	const char *name;
	int (*open)(const struct ibp_port_config *cfg, struct ibp_port **out);
	void (*close)(struct ibp_port *port);
	int (*query)(struct ibp_port *port, struct ibp_port_attr *attr);

	/* Packet buffers from the port's registered pool (any thread; NULL when none). */
	struct ibp_buf *(*buf_get)(struct ibp_port *port);
	void (*buf_put)(struct ibp_port *port, struct ibp_buf *buf);

	/* How many queues the port has (1..IBP_QUEUES_MAX), fixed at open. */
	unsigned (*queues)(struct ibp_port *port);

	int (*create_srq)(struct ibp_port *port, unsigned queue, unsigned depth,
			  struct ibp_srq **out);
	void (*destroy_srq)(struct ibp_srq *srq);
	int (*create_qp)(struct ibp_port *port, const struct ibp_qp_init *init,
			 struct ibp_qp **out);
	/* UD: RESET -> INIT -> RTR -> RTS in one go. RC: apply the CM's parameters. */
	int (*qp_ready)(struct ibp_qp *qp, const struct ibp_qp_connect *rc);
	void (*destroy_qp)(struct ibp_qp *qp);
	uint32_t (*qp_num)(const struct ibp_qp *qp);
	/* A UD QP that a QP_FATAL or WQ_FATAL event named: what went to the error state
	 * is brought back, keeping the QP's number (peers' neighbour entries hold it).
	 * From the event on, posts to the failed part are refused (-EIO) and its flushed
	 * completions stay inside the backend (their buffers go back to the pool); here
	 * it is moved to RESET once they are reaped, then INIT -> RTR -> RTS (a WQ to
	 * RDY) with the QP's P_Key index and Q_Key, and its receive queues are refilled
	 * from the pool up to recv_depth. Multicast attachments stay. Without an event
	 * (after an error completion) it asks the provider: a QP in SQE (a UD send
	 * error) goes back to RTS, one in ERR is recovered as above. Returns 1
	 * recovered, 0 nothing was in error, or -errno: the part stays in error (call
	 * again later, or destroy the QP). Control thread; workers keep polling. */
	int (*qp_recover)(struct ibp_qp *qp);

	int (*create_ah)(struct ibp_port *port, const struct ibp_ah_attr *attr,
			 struct ibp_ah **out);
	void (*destroy_ah)(struct ibp_ah *ah);

	int (*attach_mcast)(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid);
	int (*detach_mcast)(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid);

	/* Batched data path: return how many were accepted (0..n) or -errno. queue: the
	 * caller's (UD sends leave through it; queue % queues()). post_recv of a UD QP
	 * feeds that queue's receives. */
	int (*post_send)(unsigned queue, struct ibp_send *sends, unsigned n);
	int (*post_recv)(struct ibp_qp *qp, unsigned queue, struct ibp_buf **bufs, unsigned n);
	int (*post_srq_recv)(struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n);
	/* Reap up to max completions of one queue (sends and receives of the QPs that
	 * complete on it); never blocks. Returns the count or -errno. */
	int (*poll)(struct ibp_port *port, unsigned queue, struct ibp_wc *wcs, unsigned max);

	/* Worker: an fd that becomes readable when poll() of the queue may return
	 * completions, once arm() has been called; a worker that sleeps calls arm(), polls
	 * once more (completions that came before arm raise no event), then waits. */
	int (*cq_fd)(struct ibp_port *port, unsigned queue);
	int (*arm)(struct ibp_port *port, unsigned queue);
	/* Control thread: an fd readable when next_event() has an event; the next
	 * port or QP event, or -EAGAIN. (Two fds, because the worker and the control
	 * thread each wait on their own: one shared level-triggered fd would make
	 * whichever waits spin while the other's half is pending.) */
	int (*async_fd)(struct ibp_port *port);
	int (*next_event)(struct ibp_port *port, struct ibp_event *ev);
};

extern const struct ibp_ops ibp_verbs_ops;

/* The ops table for a backend name, or NULL. */
const struct ibp_ops *ibp_backend(const char *name);

#endif
