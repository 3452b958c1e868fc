/*
 * The verbs backend of the IB port ops table: libibverbs on a real HCA.
 *
 * One port = one device context, one protection domain, one packet buffer pool
 * registered as a single memory region, and one to IBP_QUEUES_MAX queues, each a
 * completion channel and a CQ with a lock of its own. The channels' fds are the
 * queues' cq_fd (their workers wait on them) and the context's async fd the port's
 * async_fd (the control thread's). docs/ib-port.md maps each op to its verbs calls.
 *
 * A UD QP with more than one queue is several verbs objects (enhanced IPoIB's shape,
 * in verbs): a receive QP with an RSS hash over the IP flow (IPv4/IPv6 addresses and
 * TCP/UDP ports) whose indirection table points at one receive work queue (WQ) per
 * queue, and one send QP per queue created with IBV_QP_CREATE_SOURCE_QPN, so that
 * every datagram carries the receive QP's number. With one queue it is one UD QP.
 *
 * Each CQ is created at open with room for n_bufs + IBP_VERBS_CQ_SLACK entries and is
 * never resized: every completion but the internal drain WRs is for a posted pool
 * buffer, and a buffer is posted at most once until its completion is reaped, so no
 * CQ can overrun whatever QPs are created later.
 *
 * Buffers are tracked (state, owner, generation) so that completions can be checked
 * against what was posted. The generation travels in the upper half of wr_id, so a
 * stale completion of a destroyed QP is recognised and dropped instead of handing
 * out a buffer twice. Every send is signaled (see docs/ib-port.md for why). A buffer
 * posted on a queue's QP, WQ or SRQ completes on that queue's CQ: its state changes
 * under that queue's lock.
 *
 * QP destruction follows the Linux IPoIB driver: move to ERR so posted WRs flush,
 * wait until their completions have been reaped by the queues' pollers (and, for a QP
 * on an SRQ, for the Last WQE Reached event and a drain WR), then destroy. The
 * flushed buffers go back to the pool here; the caller sees no completion of a QP
 * after destroy_qp has started.
 *
 * A UD QP part that goes to the error state (QP_FATAL of the QP or of a send QP,
 * WQ_FATAL of a receive WQ) is marked when the event is read: posts to it are refused
 * and its failed completions stay inside, as a dying QP's do. qp_recover waits for
 * them the same way, moves the part to RESET and back to RTS (a WQ to RDY), which
 * keeps its number, and refills its receives: the Linux IPoIB driver's stop/open of
 * its QP (ipoib_ib_dev_stop: ERR, wait for the flushes, RESET; ipoib_init_qp).
 */
#include "port/ib_bufpool.h"
#include "port/ib_port.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/ib_hdr.h"
#include "lib/log.h"

#define IBP_VERBS_BATCH    32   /* WRs chained per post, WCs per ibv_poll_cq */
#define IBP_VERBS_CQ_SLACK 16   /* drain WRs and spare room beyond n_bufs */
#define IBP_VERBS_INLINE   128  /* inline send size asked for; 0 if refused */
#define IBP_VERBS_ACK_MAX  16   /* CQ events acked in one ibv_ack_cq_events */
#define IBP_VERBS_DRAIN_MS 2000 /* longest wait for a QP's flushed WRs */
#define IBP_VERBS_STASH    16   /* events read early by destroy_qp */
#define IBP_VERBS_REAP_MS  20   /* destroy_qp reaps itself when nobody did for this long */
#define IBP_VERBS_WC_STASH 256  /* completions of live QPs destroy_qp reaped for poll */
#define IBP_VERBS_RSS_LOG  6    /* indirection table of 64 entries (fewer if the device says) */
#define WRID_DRAIN         (1ull << 63)
#define GEN_MASK           0x7fffffffu

enum vbuf_state {
	VB_FREE = IBP_POOL_FREE,   /* on the free list */
	VB_OWNED = IBP_POOL_OWNED, /* held by a caller thread */
	VB_SEND = IBP_POOL_POSTED, /* posted on owner's send queue */
	VB_RECV,                   /* posted on owner's receive queue (or WQ) */
	VB_SRQ,                    /* posted on an SRQ */
};

/*
 * Buffer descriptor, the pool's head first (pb.pub is what callers hold). Its state
 * changes only by the thread that owns the buffer in its current state (free list:
 * the pool's lock; posted: the lock of the queue it was posted on; owned: the holder);
 * destroy_qp/destroy_srq scan all descriptors under every queue lock while other
 * threads move owned buffers to the free list (port/ib_bufpool.h).
 */
struct vbuf {
	struct ibp_pool_buf pb;
	uint64_t user_wr_id; /* VB_SEND: the caller's wr_id */
	void *owner;         /* VB_SEND/VB_RECV: the ibp_qp; VB_SRQ: the ibp_srq */
	uint32_t gen;        /* bumped at each post; travels in wr_id */
	unsigned queue;      /* VB_SEND/VB_RECV: the queue it was posted on */
};

/* A QP's part on one queue: where its sends and receives of that queue go. For an RC
 * QP and a one-queue UD QP, the QP itself; for a UD QP over several queues, the
 * queue's send QP and receive WQ. The counters and the error marks: under the
 * queue's lock (the marks are written by the control thread). */
struct qp_part {
	struct ibv_qp *sqp; /* sends (and receives when wq is NULL and not RSS) */
	struct ibv_wq *wq;  /* receives of a UD QP over several queues */
	unsigned queue;
	unsigned sq_out, rq_out; /* posted and not yet reaped */
	bool drain_seen;
	/* UD: its sends / its receives are in the error state (an async event), not yet
	 * recovered: posts refused, failed completions kept inside. */
	bool sq_err, rq_err;
};

/* Control thread owns the fields, except the parts' counters and dying (queue locks). */
struct ibp_qp {
	struct ibp_port *port;
	struct ibv_qp *qp;             /* the QP peers address: plain, or the RSS receive QP */
	struct ibv_rwq_ind_table *ind; /* RSS: the WQs behind qp */
	struct ibp_srq *srq;
	enum ibp_qp_type type;
	void *user;
	uint32_t qpn;
	uint16_t pkey_index;
	uint32_t qkey;
	unsigned send_depth, recv_depth;
	uint32_t max_inline;
	enum ibv_qp_state state;    /* as last moved by us */
	bool last_wqe;              /* SRQ QP: Last WQE Reached seen */
	bool rss_fixed;             /* RSS: qp cannot be modified (mlx5), ready as made */
	bool dying;                 /* every queue lock to write; any to read */
	struct ibp_qp *prev, *next; /* the port's list (control thread) */
	unsigned nparts;            /* 1, or the port's queue count (UD over several) */
	struct qp_part part[];
};

/* Control thread, but for the lock's fields. */
struct ibp_srq {
	struct ibp_port *port;
	struct ibv_srq *srq;
	unsigned depth;
	unsigned queue;
	struct ibp_srq *next;
};

/* Control thread. */
struct ibp_ah {
	struct ibp_port *port;
	struct ibv_ah *ah;
	struct ibp_ah *prev, *next;
};

/*
 * One queue: a CQ and its channel, polled by one worker. lock: taken once per post or
 * poll batch (uncontended, but for a send from another worker to an RC QP of this
 * queue) and by the control thread to create and destroy QPs. It guards the qpn table,
 * the parts' counters of this queue and the buffers posted on it.
 */
struct vqueue {
	pthread_mutex_t lock;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	struct ibp_qp **qpt; /* SRQ QPs of this queue by qpn: open addressing, linear probing */
	size_t qpt_cap, qpt_len;
	uint64_t stale_wcs; /* completions dropped as stale (statistics) */
	/* Completions of live QPs that destroy_qp reaped while waiting for a dying QP's
	 * (nobody polled the queue): poll hands them out first. */
	struct ibp_wc wc_stash[IBP_VERBS_WC_STASH];
	unsigned wc_stash_len;
	unsigned cq_events_unacked; /* the poller (arm) */
};

/* Port. Immutable after open, except as marked. Lock order: queue locks by index,
 * then the pool's lock. */
struct ibp_port {
	char name[64];
	uint8_t port_num;
	struct ibv_context *ctx;
	struct ibv_device_attr dev;
	unsigned rss_log;    /* log2 of the RSS indirection table (queues > 1) */
	bool rss_fixed_told; /* control thread: "RSS QPs are not modified" logged */
	struct ibv_pd *pd;
	struct ibp_pool pool; /* any thread: its own lock */
	struct ibv_mr *mr;    /* over the pool's region */
	struct vbuf *vbufs;   /* the pool's descriptors */
	unsigned nq;
	struct vqueue *q; /* nq of them */

	/* Control thread. */
	struct ibp_qp *qps;
	struct ibp_srq *srqs;
	struct ibp_ah *ahs;
	struct ibp_event stash[IBP_VERBS_STASH];
	unsigned stash_head, stash_len;
};

/* --- helpers --- */

/* errno from a verbs call that returns NULL or -1 and sets errno (most do; not all
 * providers are careful, hence the fallback). */
static int neg_errno(int fallback)
{
	return errno > 0 ? -errno : -fallback;
}

static struct vbuf *vbuf_of(struct ibp_port *port, const struct ibp_buf *buf)
{
	return (struct vbuf *)ibp_pool_find(&port->pool, buf);
}

static enum vbuf_state vb_state(struct vbuf *v)
{
	return (enum vbuf_state)ibp_pool_state(&v->pb);
}

static void vb_set(struct vbuf *v, enum vbuf_state s)
{
	ibp_pool_set_state(&v->pb, s);
}

static uint64_t vb_wrid(struct ibp_port *port, struct vbuf *v)
{
	v->gen = (v->gen + 1) & GEN_MASK;
	return (uint64_t)v->gen << 32 | (uint64_t)(v - port->vbufs);
}

/* Back to the free list. Caller holds the lock of the queue it was posted on, or owns
 * the buffer. */
static void free_push(struct ibp_port *port, struct vbuf *v)
{
	ibp_pool_release(&port->pool, &v->pb);
}

/* --- qpn -> QP table of a queue (its lock): the QPs on an SRQ, whose receive
 * completions name them only by number --- */

static size_t qpt_home(uint32_t qpn, size_t cap)
{
	return (size_t)(qpn * 0x9e3779b1u) & (cap - 1);
}

static struct ibp_qp *qpt_find(struct vqueue *q, uint32_t qpn)
{
	size_t mask = q->qpt_cap - 1;

	for (size_t i = qpt_home(qpn, q->qpt_cap); q->qpt[i]; i = (i + 1) & mask)
		if (q->qpt[i]->qpn == qpn)
			return q->qpt[i];
	return NULL;
}

static void qpt_place(struct ibp_qp **t, size_t cap, struct ibp_qp *qp)
{
	size_t i = qpt_home(qp->qpn, cap);

	while (t[i])
		i = (i + 1) & (cap - 1);
	t[i] = qp;
}

static int qpt_insert(struct vqueue *q, struct ibp_qp *qp)
{
	if ((q->qpt_len + 1) * 2 > q->qpt_cap) {
		size_t cap = q->qpt_cap * 2;
		struct ibp_qp **t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < q->qpt_cap; i++)
			if (q->qpt[i])
				qpt_place(t, cap, q->qpt[i]);
		free(q->qpt);
		q->qpt = t;
		q->qpt_cap = cap;
	}
	qpt_place(q->qpt, q->qpt_cap, qp);
	q->qpt_len++;
	return 0;
}

/* Backward-shift deletion: no tombstones, so lookups stay short. */
static void qpt_remove(struct vqueue *q, struct ibp_qp *qp)
{
	size_t mask = q->qpt_cap - 1, i = qpt_home(qp->qpn, q->qpt_cap);

	while (q->qpt[i] && q->qpt[i] != qp)
		i = (i + 1) & mask;
	if (!q->qpt[i])
		return;
	q->qpt[i] = NULL;
	q->qpt_len--;
	for (size_t j = (i + 1) & mask; q->qpt[j]; j = (j + 1) & mask) {
		size_t home = qpt_home(q->qpt[j]->qpn, q->qpt_cap);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			q->qpt[i] = q->qpt[j];
			q->qpt[j] = NULL;
			i = j;
		}
	}
}

/* --- queues --- */

static void lock_all(struct ibp_port *port)
{
	for (unsigned i = 0; i < port->nq; i++)
		pthread_mutex_lock(&port->q[i].lock);
}

static void unlock_all(struct ibp_port *port)
{
	for (unsigned i = port->nq; i-- > 0;)
		pthread_mutex_unlock(&port->q[i].lock);
}

/* The part of qp on queue qi (a QP of one part is on its own queue only). */
static struct qp_part *part_of(struct ibp_qp *qp, unsigned qi)
{
	return qp->nparts > 1 ? &qp->part[qi] : &qp->part[0];
}

/* --- open / close --- */

static int set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Find and open the named device; log what is there when it is not. */
static int open_device(const char *want, struct ibv_context **out)
{
	struct ibv_device **list;
	int n = 0, ret = -ENODEV;
	char names[256] = "";
	size_t used = 0;

	errno = 0;
	list = ibv_get_device_list(&n);
	if (!list || n == 0) {
		/* No uverbs in the kernel gives NULL with ENOSYS; a kernel with RDMA but
		 * no HCA gives an empty list. Either way the device is not there. */
		if (!list && errno && errno != ENOSYS)
			log_errno(LOG_ERR, errno, "verbs: device %s: cannot list RDMA devices",
				  want);
		else
			log_error("verbs: device %s: no RDMA devices on this machine", want);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		if (name && strcmp(name, want) == 0) {
			*out = ibv_open_device(list[i]);
			ret = *out ? 0 : neg_errno(ENODEV);
			if (ret < 0)
				log_errno(LOG_ERR, -ret, "verbs: ibv_open_device %s", want);
			goto out;
		}
		int w = snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
				 name ? name : "?");
		if (w > 0 && (size_t)w < sizeof(names) - used)
			used += (size_t)w;
	}
	log_error("verbs: no RDMA device named %s (present: %s)", want, names);
out:
	if (list)
		ibv_free_device_list(list);
	return ret;
}

static void verbs_close(struct ibp_port *port);

/* The fields the RSS hash reads: the IP flow, as enhanced IPoIB spreads it. */
#define RSS_FIELDS                                                                                 \
	(IBV_RX_HASH_SRC_IPV4 | IBV_RX_HASH_DST_IPV4 | IBV_RX_HASH_SRC_IPV6 |                      \
	 IBV_RX_HASH_DST_IPV6 | IBV_RX_HASH_SRC_PORT_TCP | IBV_RX_HASH_DST_PORT_TCP |              \
	 IBV_RX_HASH_SRC_PORT_UDP | IBV_RX_HASH_DST_PORT_UDP)

/* How many queues the device gives a port that asks for want (> 1): as many, when it
 * spreads UD receives over work queues with a Toeplitz hash (verbs RSS); else one. */
static unsigned rss_queues(struct ibp_port *port, unsigned want)
{
	struct ibv_device_attr_ex dx;
	const struct ibv_rss_caps *rc = &dx.rss_caps;

	memset(&dx, 0, sizeof(dx));
	if (ibv_query_device_ex(port->ctx, NULL, &dx) != 0 ||
	    !(rc->supported_qpts & (1u << IBV_QPT_UD)) || dx.max_wq_type_rq < want ||
	    rc->max_rwq_indirection_table_size < want ||
	    !(rc->rx_hash_function & IBV_RX_HASH_FUNC_TOEPLITZ) ||
	    !(rc->rx_hash_fields_mask & IBV_RX_HASH_SRC_IPV4)) {
		log_notice("verbs: %s: %u queues asked for, but the device spreads no UD "
			   "receives (no verbs RSS for UD QPs): one queue",
			   port->name, want);
		return 1;
	}
	port->rss_log = IBP_VERBS_RSS_LOG;
	while (port->rss_log && (1u << port->rss_log) > rc->max_rwq_indirection_table_size)
		port->rss_log--;
	return want;
}

static int queue_open(struct ibp_port *port, struct vqueue *q, unsigned cqe)
{
	int ret;

	pthread_mutex_init(&q->lock, NULL);
	q->qpt_cap = 16;
	q->qpt = calloc(q->qpt_cap, sizeof(*q->qpt));
	if (!q->qpt)
		return -ENOMEM;
	q->chan = ibv_create_comp_channel(port->ctx);
	if (!q->chan) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_comp_channel", port->name);
		return ret;
	}
	q->cq = ibv_create_cq(port->ctx, (int)cqe, q, q->chan, 0);
	if (!q->cq) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_cq", port->name);
		return ret;
	}
	ret = ibv_req_notify_cq(q->cq, 0);
	if (ret) {
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_req_notify_cq", port->name);
		return -ret;
	}
	/* Non-blocking, so arm() never waits. */
	return set_nonblock(q->chan->fd);
}

static void queue_close(struct ibp_port *port, struct vqueue *q)
{
	int ret;

	if (q->cq) {
		/* ibv_destroy_cq waits for every CQ event to be acked. */
		if (q->cq_events_unacked)
			ibv_ack_cq_events(q->cq, q->cq_events_unacked);
		ret = ibv_destroy_cq(q->cq);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_cq", port->name);
	}
	if (q->chan) {
		ret = ibv_destroy_comp_channel(q->chan);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_comp_channel", port->name);
	}
	free(q->qpt);
	if (q->qpt_cap)
		pthread_mutex_destroy(&q->lock);
}

static int verbs_open(const struct ibp_port_config *cfg, struct ibp_port **out)
{
	struct ibp_port *port = NULL;
	struct ibv_port_attr pa;
	unsigned want;
	int ret;

	if (!cfg || !cfg->device || !out || cfg->port == 0 || cfg->n_bufs == 0 ||
	    cfg->buf_size == 0 || cfg->buf_size > UINT32_MAX || cfg->n_bufs > UINT32_MAX / 2 ||
	    cfg->n_queues > IBP_QUEUES_MAX) {
		log_error("verbs: invalid port config (device, port >= 1, n_bufs and buf_size "
			  "are required; at most %u queues)",
			  IBP_QUEUES_MAX);
		return -EINVAL;
	}
	want = cfg->n_queues ? cfg->n_queues : 1;
	port = calloc(1, sizeof(*port));
	if (!port)
		return -ENOMEM;
	port->port_num = cfg->port;
	snprintf(port->name, sizeof(port->name), "%s:%u", cfg->device, cfg->port);

	ret = open_device(cfg->device, &port->ctx);
	if (ret < 0)
		goto fail;
	ret = ibv_query_device(port->ctx, &port->dev);
	if (ret) {
		ret = -ret;
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_query_device", port->name);
		goto fail;
	}
	if (cfg->port > port->dev.phys_port_cnt) {
		log_error("verbs: device %s has %u port(s): there is no port %u", cfg->device,
			  port->dev.phys_port_cnt, cfg->port);
		ret = -ENODEV;
		goto fail;
	}
	ret = ibv_query_port(port->ctx, port->port_num, &pa);
	if (ret) {
		ret = -ret;
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_query_port", port->name);
		goto fail;
	}
	/* Old kernels report UNSPECIFIED for InfiniBand ports. */
	if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND &&
	    pa.link_layer != IBV_LINK_LAYER_UNSPECIFIED) {
		log_error("verbs: %s: link layer is %s, not InfiniBand", port->name,
			  pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "unknown");
		ret = -EPROTONOSUPPORT;
		goto fail;
	}
	if ((uint64_t)cfg->n_bufs + IBP_VERBS_CQ_SLACK > (uint64_t)port->dev.max_cqe) {
		log_error("verbs: %s: %u buffers need a CQ of %u entries; the device allows %d",
			  port->name, cfg->n_bufs, cfg->n_bufs + IBP_VERBS_CQ_SLACK,
			  port->dev.max_cqe);
		ret = -EINVAL;
		goto fail;
	}

	port->pd = ibv_alloc_pd(port->ctx);
	if (!port->pd) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_alloc_pd", port->name);
		goto fail;
	}

	/* The pool: page aligned, one registration for all of it (ibv_reg_mr pins it, so
	 * the kernel zeroes every page here, where a memset used to). */
	ret = ibp_pool_init(&port->pool, cfg->n_bufs, cfg->buf_size, sizeof(struct vbuf));
	if (ret < 0)
		goto fail;
	port->vbufs = ibp_pool_descs(&port->pool);
	port->mr = ibv_reg_mr(port->pd, port->pool.mem, port->pool.mem_len, IBV_ACCESS_LOCAL_WRITE);
	if (!port->mr) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret,
			  "verbs: %s: ibv_reg_mr of %zu bytes (check the "
			  "locked-memory limit, ulimit -l)",
			  port->name, port->pool.mem_len);
		goto fail;
	}

	/* Every buffer may be posted on one queue: each CQ holds them all. */
	port->nq = want > 1 ? rss_queues(port, want) : 1;
	port->q = calloc(port->nq, sizeof(*port->q));
	if (!port->q) {
		ret = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < port->nq; i++)
		if ((ret = queue_open(port, &port->q[i], cfg->n_bufs + IBP_VERBS_CQ_SLACK)) < 0)
			goto fail;
	ret = set_nonblock(port->ctx->async_fd); /* next_event never waits */
	if (ret < 0)
		goto fail;
	log_info("verbs: %s open: %u buffers of %zu bytes, %u queue%s, CQs of %d", port->name,
		 port->pool.n_bufs, cfg->buf_size, port->nq, port->nq > 1 ? "s" : "",
		 port->q[0].cq->cqe);
	*out = port;
	return 0;

fail:
	verbs_close(port);
	return ret;
}

static void qp_release(struct ibp_qp *qp);

/* Tears down whatever open or the caller left: callers must have stopped the data
 * path of the port. QPs, SRQs and AHs still alive are destroyed here. */
static void verbs_close(struct ibp_port *port)
{
	int ret;

	if (!port)
		return;
	while (port->qps) {
		struct ibp_qp *qp = port->qps;

		/* No poller any more: flushing would only wait; destroy outright. */
		port->qps = qp->next;
		qp_release(qp);
	}
	while (port->srqs) {
		struct ibp_srq *srq = port->srqs;

		port->srqs = srq->next;
		ret = ibv_destroy_srq(srq->srq);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_srq", port->name);
		free(srq);
	}
	while (port->ahs) {
		struct ibp_ah *ah = port->ahs;

		port->ahs = ah->next;
		ret = ibv_destroy_ah(ah->ah);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_ah", port->name);
		free(ah);
	}
	for (unsigned i = 0; port->q && i < port->nq; i++)
		queue_close(port, &port->q[i]);
	free(port->q);
	if (port->mr) {
		ret = ibv_dereg_mr(port->mr);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_dereg_mr", port->name);
	}
	ibp_pool_fini(&port->pool);
	if (port->pd) {
		ret = ibv_dealloc_pd(port->pd);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_dealloc_pd", port->name);
	}
	if (port->ctx) {
		ret = ibv_close_device(port->ctx);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_close_device", port->name);
	}
	free(port);
}

/* --- query --- */

static enum ibp_port_state map_port_state(enum ibv_port_state s)
{
	switch (s) {
	case IBV_PORT_INIT:
		return IBP_PORT_INIT;
	case IBV_PORT_ARMED:
		return IBP_PORT_ARMED;
	case IBV_PORT_ACTIVE:
	case IBV_PORT_ACTIVE_DEFER:
		return IBP_PORT_ACTIVE;
	default:
		return IBP_PORT_DOWN;
	}
}

static int verbs_query(struct ibp_port *port, struct ibp_port_attr *attr)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;
	union ib_gid g;
	int ret;

	ret = ibv_query_port(port->ctx, port->port_num, &pa);
	if (ret) {
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_query_port", port->name);
		return -ret;
	}
	if (ibv_query_gid(port->ctx, port->port_num, 0, &gid)) {
		ret = neg_errno(EIO);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_query_gid 0", port->name);
		return ret;
	}
	memset(attr, 0, sizeof(*attr));
	attr->state = map_port_state(pa.state);
	attr->lid = pa.lid;
	attr->lmc = pa.lmc;
	attr->sm_lid = pa.sm_lid;
	attr->sm_sl = pa.sm_sl;
	attr->subnet_timeout = pa.subnet_timeout;
	attr->active_mtu = (enum ib_mtu)pa.active_mtu;
	memcpy(g.raw, gid.raw, sizeof(g.raw));
	attr->gid_prefix = ib_gid_prefix(&g);
	attr->port_guid = ib_gid_guid(&g);

	unsigned n = pa.pkey_tbl_len;

	if (n > IBP_MAX_PKEYS) {
		log_warning("verbs: %s: P_Key table has %u entries; only the first %u are read",
			    port->name, n, IBP_MAX_PKEYS);
		n = IBP_MAX_PKEYS;
	}
	for (unsigned i = 0; i < n; i++) {
		__be16 pkey;

		if (ibv_query_pkey(port->ctx, port->port_num, (int)i, &pkey)) {
			ret = neg_errno(EIO);
			log_errno(LOG_ERR, -ret, "verbs: %s: ibv_query_pkey %u", port->name, i);
			return ret;
		}
		attr->pkeys[i] = be16toh(pkey);
	}
	/* The HCA reports its whole table (128 entries on ConnectX), unused ones 0: keep
	 * the positions (a QP names its P_Key by index) but not the unused tail (found on
	 * the rack under libibverbs2sim: callers count the used entries). */
	while (n > 0 && !ib_pkey_is_valid(attr->pkeys[n - 1]))
		n--;
	attr->n_pkeys = n;
	return 0;
}

/* --- buffers --- */

static struct ibp_buf *verbs_buf_get(struct ibp_port *port)
{
	return ibp_pool_get(&port->pool);
}

static void verbs_buf_put(struct ibp_port *port, struct ibp_buf *buf)
{
	/* A caller bug (double put, foreign buffer, posted buffer) is refused. */
	if (ibp_pool_put(&port->pool, buf) < 0)
		log_error("verbs: %s: buf_put of a buffer not held by the caller", port->name);
}

/* --- SRQ --- */

static int verbs_create_srq(struct ibp_port *port, unsigned queue, unsigned depth,
			    struct ibp_srq **out)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = depth, .max_sge = 1 } };
	struct ibp_srq *srq;
	int ret;

	if (depth == 0 || depth > (unsigned)port->dev.max_srq_wr || queue >= port->nq) {
		log_error("verbs: %s: SRQ depth %u outside 1..%d, or queue %u of %u", port->name,
			  depth, port->dev.max_srq_wr, queue, port->nq);
		return -EINVAL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return -ENOMEM;
	srq->srq = ibv_create_srq(port->pd, &ia);
	if (!srq->srq) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_srq depth %u", port->name, depth);
		free(srq);
		return ret;
	}
	srq->port = port;
	srq->depth = depth;
	srq->queue = queue;
	srq->next = port->srqs;
	port->srqs = srq;
	*out = srq;
	return 0;
}

/* The QPs attached must be destroyed first (verbs refuses otherwise). Receive buffers
 * still posted on the SRQ are never completed: take them back here. */
static void verbs_destroy_srq(struct ibp_srq *srq)
{
	struct ibp_port *port;
	int ret;

	if (!srq)
		return;
	port = srq->port;
	ret = ibv_destroy_srq(srq->srq);
	if (ret) {
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_srq (QPs still attached?)",
			  port->name);
		return;
	}
	pthread_mutex_lock(&port->q[srq->queue].lock);
	for (unsigned i = 0; i < port->pool.n_bufs; i++) {
		struct vbuf *v = &port->vbufs[i];

		if (vb_state(v) == VB_SRQ && v->owner == srq)
			free_push(port, v);
	}
	pthread_mutex_unlock(&port->q[srq->queue].lock);
	for (struct ibp_srq **p = &port->srqs; *p; p = &(*p)->next) {
		if (*p == srq) {
			*p = srq->next;
			break;
		}
	}
	free(srq);
}

/* --- QPs --- */

static int modify_one(struct ibp_qp *qp, struct ibv_qp *vqp, struct ibv_qp_attr *a, int mask,
		      const char *what)
{
	int ret = ibv_modify_qp(vqp, a, mask);

	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: QP %u to %s", qp->port->name, vqp->qp_num,
			  what);
	return -ret;
}

/*
 * The RSS receive QP of a UD QP over several queues. mlx5 refuses any modify of one
 * (rdma-core's mlx5_modify_qp: EOPNOTSUPP, ENOSYS before v28; the kernel's
 * mlx5_ib_modify_qp: -ENOSYS): it is a TIR, receiving as soon as it exists, its WQs
 * (RDY since create_spread) deciding. Such a refusal is taken as ready and the QP is
 * not asked again (its send QPs and WQs still move); any other error is one.
 */
static int modify_rss(struct ibp_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	struct ibp_port *port = qp->port;
	int ret;

	if (qp->rss_fixed)
		return 0;
	ret = ibv_modify_qp(qp->qp, a, mask);
	if (ret != ENOSYS && ret != EOPNOTSUPP) {
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: RSS QP %u to %s", port->name,
				  qp->qp->qp_num, what);
		return -ret;
	}
	qp->rss_fixed = true;
	if (!port->rss_fixed_told) {
		port->rss_fixed_told = true;
		log_errno(LOG_INFO, ret,
			  "verbs: %s: the device does not modify RSS QPs: taken as ready when "
			  "made, their WQs and send QPs brought up",
			  port->name);
	}
	return 0;
}

/* qp->qp, and the send QPs of a UD QP over several queues. */
static int modify(struct ibp_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	int ret = qp->ind ? modify_rss(qp, a, mask, what) : modify_one(qp, qp->qp, a, mask, what);

	for (unsigned i = 0; ret == 0 && qp->ind && i < qp->nparts; i++)
		ret = modify_one(qp, qp->part[i].sqp, a, mask, what);
	if (ret == 0)
		qp->state = a->qp_state;
	return ret;
}

static int qp_to_init(struct ibp_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = qp->pkey_index,
		.port_num = qp->port->port_num,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (qp->type == IBP_QPT_UD) {
		a.qkey = qp->qkey;
		mask |= IBV_QP_QKEY;
	} else {
		/* IPoIB-CM only sends and receives: no remote access rights. */
		a.qp_access_flags = 0;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return modify(qp, &a, mask, "INIT");
}

/* Create a QP, retrying without inline sends when the device refuses them (they are
 * only an optimisation). */
static struct ibv_qp *create_sender(struct ibp_port *port, struct ibv_qp_init_attr_ex *ia,
				    uint32_t *max_inline)
{
	struct ibv_qp *q;

	ia->cap.max_inline_data = IBP_VERBS_INLINE;
	q = ibv_create_qp_ex(port->ctx, ia);
	if (!q) {
		ia->cap.max_inline_data = 0;
		q = ibv_create_qp_ex(port->ctx, ia);
	}
	if (q)
		*max_inline = ia->cap.max_inline_data;
	return q;
}

/* A plain QP (RC, or UD on a port of one queue) completing on its queue. */
static int create_plain(struct ibp_qp *qp, unsigned queue)
{
	struct ibp_port *port = qp->port;
	struct ibv_qp_init_attr_ex ia = {
		.qp_context = qp,
		.send_cq = port->q[queue].cq,
		.recv_cq = port->q[queue].cq,
		.srq = qp->srq ? qp->srq->srq : NULL,
		.qp_type = qp->type == IBP_QPT_RC ? IBV_QPT_RC : IBV_QPT_UD,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = qp->send_depth + 1, /* and the drain WR */
			 .max_recv_wr = qp->recv_depth,
			 .max_send_sge = 1,
			 .max_recv_sge = qp->srq ? 0 : 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = port->pd,
	};

	qp->qp = create_sender(port, &ia, &qp->max_inline);
	if (!qp->qp)
		return neg_errno(ENOMEM);
	qp->part[0].sqp = qp->qp;
	qp->part[0].queue = queue;
	return 0;
}

/* A UD QP over every queue: a WQ per queue behind an RSS receive QP, and a send QP per
 * queue with the receive QP's number as its source. */
static int create_spread(struct ibp_qp *qp)
{
	static uint8_t key[40] = { /* symmetric: both directions of a flow hash alike */
				   0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
				   0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
				   0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
				   0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a
	};
	struct ibp_port *port = qp->port;
	struct ibv_wq *tbl[1u << IBP_VERBS_RSS_LOG];
	unsigned size = 1u << port->rss_log;

	for (unsigned i = 0; i < qp->nparts; i++) {
		struct ibv_wq_init_attr wa = {
			.wq_context = qp,
			.wq_type = IBV_WQT_RQ,
			.max_wr = qp->recv_depth,
			.max_sge = 1,
			.pd = port->pd,
			.cq = port->q[i].cq,
		};
		struct ibv_wq_attr rdy = { .attr_mask = IBV_WQ_ATTR_STATE,
					   .wq_state = IBV_WQS_RDY };

		qp->part[i].queue = i;
		qp->part[i].wq = ibv_create_wq(port->ctx, &wa);
		if (!qp->part[i].wq || ibv_modify_wq(qp->part[i].wq, &rdy))
			return neg_errno(ENOMEM);
	}
	for (unsigned i = 0; i < size; i++)
		tbl[i] = qp->part[i % qp->nparts].wq;
	struct ibv_rwq_ind_table_init_attr ta = { .log_ind_tbl_size = port->rss_log,
						  .ind_tbl = tbl };

	qp->ind = ibv_create_rwq_ind_table(port->ctx, &ta);
	if (!qp->ind)
		return neg_errno(ENOMEM);
	struct ibv_qp_init_attr_ex ra = {
		.qp_context = qp,
		.qp_type = IBV_QPT_UD,
		.comp_mask =
		    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH,
		.pd = port->pd,
		.rwq_ind_tbl = qp->ind,
		.rx_hash_conf = { .rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ,
				  .rx_hash_key_len = sizeof(key),
				  .rx_hash_key = key,
				  .rx_hash_fields_mask = RSS_FIELDS },
	};

	qp->qp = ibv_create_qp_ex(port->ctx, &ra);
	if (!qp->qp)
		return neg_errno(ENOMEM);
	for (unsigned i = 0; i < qp->nparts; i++) {
		struct ibv_qp_init_attr_ex sa = {
			.qp_context = qp,
			.send_cq = port->q[i].cq,
			.recv_cq = port->q[i].cq,
			.qp_type = IBV_QPT_UD,
			.sq_sig_all = 1,
			.cap = { .max_send_wr = qp->send_depth + 1, .max_send_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
			.pd = port->pd,
			.create_flags = IBV_QP_CREATE_SOURCE_QPN,
			.source_qpn = qp->qp->qp_num,
		};

		qp->part[i].sqp = create_sender(port, &sa, &qp->max_inline);
		if (!qp->part[i].sqp)
			return neg_errno(ENOMEM);
	}
	return 0;
}

/* Destroy what create_* made of qp (its buffers are the caller's care). */
static void qp_objects_destroy(struct ibp_qp *qp)
{
	struct ibp_port *port = qp->port;
	int ret;

	for (unsigned i = 0; qp->ind && i < qp->nparts; i++)
		if (qp->part[i].sqp && (ret = ibv_destroy_qp(qp->part[i].sqp)))
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_qp (send QP of %u)",
				  port->name, qp->qpn);
	if (qp->qp && (ret = ibv_destroy_qp(qp->qp)))
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_qp %u", port->name, qp->qpn);
	if (qp->ind && (ret = ibv_destroy_rwq_ind_table(qp->ind)))
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_rwq_ind_table", port->name);
	for (unsigned i = 0; i < qp->nparts; i++)
		if (qp->part[i].wq && (ret = ibv_destroy_wq(qp->part[i].wq)))
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_wq", port->name);
	qp->qp = NULL;
	qp->ind = NULL;
	memset(qp->part, 0, qp->nparts * sizeof(qp->part[0]));
}

static void qp_release(struct ibp_qp *qp)
{
	qp_objects_destroy(qp);
	free(qp);
}

static int verbs_create_qp(struct ibp_port *port, const struct ibp_qp_init *init,
			   struct ibp_qp **out)
{
	struct ibp_qp *qp;
	bool rc = init->type == IBP_QPT_RC;
	unsigned max_wr = (unsigned)port->dev.max_qp_wr;
	unsigned nparts = rc ? 1 : port->nq;
	unsigned queue = rc ? init->queue : 0;
	int ret;

	/* One send slot more than asked for: the drain WR of destroy_qp. */
	if (init->send_depth == 0 || init->send_depth + 1 > max_wr ||
	    (!(rc && init->srq) && (init->recv_depth == 0 || init->recv_depth > max_wr)) ||
	    (init->type == IBP_QPT_UD && init->srq) || (init->srq && init->srq->port != port) ||
	    queue >= port->nq || (init->srq && init->srq->queue != queue)) {
		log_error("verbs: %s: invalid QP request (depths %u/%u, device max %u, queue %u "
			  "of %u)",
			  port->name, init->send_depth, init->recv_depth, max_wr, queue, port->nq);
		return -EINVAL;
	}
	qp = calloc(1, sizeof(*qp) + nparts * sizeof(qp->part[0]));
	if (!qp)
		return -ENOMEM;
	qp->port = port;
	qp->type = init->type;
	qp->srq = rc ? init->srq : NULL;
	qp->user = init->user;
	qp->pkey_index = init->pkey_index;
	qp->qkey = init->qkey;
	qp->send_depth = init->send_depth;
	qp->recv_depth = qp->srq ? 0 : init->recv_depth;
	qp->nparts = nparts;
	qp->state = IBV_QPS_RESET;
	ret = nparts > 1 ? create_spread(qp) : create_plain(qp, queue);
	if (ret < 0 && nparts > 1) {
		/* A device that lists UD RSS may still refuse a part (source-QPN send QPs,
		 * the hash fields): one QP on the first queue still carries the link. */
		log_errno(LOG_WARNING, -ret,
			  "verbs: %s: a UD QP over %u queues (RSS) could not be made: its "
			  "receives stay on one queue",
			  port->name, nparts);
		qp_objects_destroy(qp);
		qp->nparts = 1;
		ret = create_plain(qp, 0);
	}
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "verbs: %s: cannot create a%s QP", port->name,
			  rc ? "n RC" : " UD");
		goto fail;
	}
	qp->qpn = qp->qp->qp_num;
	if (rc && (ret = qp_to_init(qp)) < 0)
		goto fail;
	if (qp->srq) {
		pthread_mutex_lock(&port->q[queue].lock);
		ret = qpt_insert(&port->q[queue], qp);
		pthread_mutex_unlock(&port->q[queue].lock);
		if (ret < 0)
			goto fail;
	}
	qp->next = port->qps;
	if (port->qps)
		port->qps->prev = qp;
	port->qps = qp;
	*out = qp;
	return 0;
fail:
	qp_release(qp);
	return ret;
}

static void ah_to_verbs(const struct ibp_ah_attr *a, uint8_t port_num, struct ibv_ah_attr *v)
{
	memset(v, 0, sizeof(*v));
	v->dlid = a->dlid;
	v->sl = a->sl;
	v->src_path_bits = a->src_path_bits;
	v->static_rate = a->static_rate;
	v->port_num = port_num;
	v->is_global = a->is_global;
	if (a->is_global) {
		memcpy(v->grh.dgid.raw, a->dgid.raw, sizeof(v->grh.dgid.raw));
		v->grh.flow_label = a->flow_label;
		v->grh.hop_limit = a->hop_limit;
		v->grh.traffic_class = a->traffic_class;
		v->grh.sgid_index = a->sgid_index;
	}
}

static int qp_ready_rc(struct ibp_qp *qp, const struct ibp_qp_connect *c)
{
	struct ibv_qp_attr a;
	int ret;

	if (c->remote_qpn > 0xffffff || c->remote_psn > 0xffffff || c->local_psn > 0xffffff ||
	    !ib_mtu_bytes((int)c->path_mtu) || c->timeout > 31 || c->retry_count > 7 ||
	    c->rnr_retry > 7 || c->min_rnr_timer > 31 || c->path.flow_label > 0xfffff) {
		log_error("verbs: %s: QP %u: connection parameter out of range", qp->port->name,
			  qp->qpn);
		return -EINVAL;
	}
	if (qp->state == IBV_QPS_RESET) {
		ret = qp_to_init(qp);
		if (ret < 0)
			return ret;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = (enum ibv_mtu)c->path_mtu;
	a.dest_qp_num = c->remote_qpn;
	a.rq_psn = c->remote_psn;
	a.max_dest_rd_atomic = c->max_dest_rd_atomic;
	a.min_rnr_timer = c->min_rnr_timer;
	ah_to_verbs(&c->path, qp->port->port_num, &a.ah_attr);
	ret = modify(qp, &a,
		     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		     "RTR");
	if (ret < 0)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = c->timeout;
	a.retry_cnt = c->retry_count;
	a.rnr_retry = c->rnr_retry;
	a.sq_psn = c->local_psn;
	a.max_rd_atomic = c->max_rd_atomic;
	return modify(qp, &a,
		      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
		      "RTS");
}

static int verbs_qp_ready(struct ibp_qp *qp, const struct ibp_qp_connect *rc)
{
	struct ibv_qp_attr a;
	int ret;

	if (qp->type == IBP_QPT_RC) {
		if (!rc)
			return -EINVAL;
		return qp_ready_rc(qp, rc);
	}
	if (qp->state != IBV_QPS_RESET) {
		log_error("verbs: %s: UD QP %u is not in RESET", qp->port->name, qp->qpn);
		return -EINVAL;
	}
	ret = qp_to_init(qp);
	if (ret < 0)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	ret = modify(qp, &a, IBV_QP_STATE, "RTR");
	if (ret < 0)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
}

static uint32_t verbs_qp_num(const struct ibp_qp *qp)
{
	return qp->qpn;
}

/* Every queue lock held. */
static bool qp_drained(const struct ibp_qp *qp)
{
	for (unsigned i = 0; i < qp->nparts; i++) {
		const struct qp_part *pt = &qp->part[i];

		if (pt->sq_out || pt->rq_out || (qp->srq && !pt->drain_seen))
			return false;
	}
	return true;
}

/* Forget stashed events that name this QP (it is about to go away). */
static void stash_forget(struct ibp_port *port, const struct ibp_qp *qp)
{
	unsigned kept = 0;
	struct ibp_event tmp[IBP_VERBS_STASH];

	for (unsigned i = 0; i < port->stash_len; i++) {
		struct ibp_event *e = &port->stash[(port->stash_head + i) % IBP_VERBS_STASH];

		if (e->qp != qp)
			tmp[kept++] = *e;
	}
	memcpy(port->stash, tmp, kept * sizeof(tmp[0]));
	port->stash_head = 0;
	port->stash_len = kept;
}

static int read_async(struct ibp_port *port, struct ibp_event *ev);

static void deadline_in(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int ms_until(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	long ms = (dl->tv_sec - now.tv_sec) * 1000 + (dl->tv_nsec - now.tv_nsec) / 1000000;
	return ms < 0 ? 0 : (int)ms;
}

/*
 * An SRQ QP in ERR may still consume SRQ WQEs until the HCA raises Last WQE Reached.
 * The event comes on the async fd, which is the control thread's, as is this call:
 * read it here, stashing other events for next_event.
 */
static bool wait_last_wqe(struct ibp_port *port, struct ibp_qp *qp, const struct timespec *dl)
{
	while (!qp->last_wqe) {
		struct pollfd pfd = { .fd = port->ctx->async_fd, .events = POLLIN };
		struct ibp_event ev;
		int ret = read_async(port, &ev);

		if (ret == 1) {
			if (port->stash_len < IBP_VERBS_STASH)
				port->stash[(port->stash_head + port->stash_len++) %
					    IBP_VERBS_STASH] = ev;
			else
				log_warning("verbs: %s: event queue full, event %d dropped",
					    port->name, (int)ev.type);
			continue;
		}
		if (ret == 0)
			continue;
		int ms = ms_until(dl);

		if (ms == 0 || poll(&pfd, 1, ms) <= 0)
			return false;
	}
	return true;
}

static bool translate_wc(struct ibp_port *port, struct vqueue *q, const struct ibv_wc *wc,
			 struct ibp_wc *out);

/* q's lock held: poll its CQ for destroy_qp. Dying QPs' completions are consumed as
 * poll consumes them; live QPs' are kept for poll (while there is room). */
static void reap_locked(struct ibp_port *port, struct vqueue *q)
{
	while (q->wc_stash_len + IBP_VERBS_BATCH <= IBP_VERBS_WC_STASH) {
		struct ibv_wc wc[IBP_VERBS_BATCH];
		int got = ibv_poll_cq(q->cq, IBP_VERBS_BATCH, wc);

		for (int i = 0; i < got; i++)
			if (translate_wc(port, q, &wc[i], &q->wc_stash[q->wc_stash_len]))
				q->wc_stash_len++;
		if (got < IBP_VERBS_BATCH)
			break;
	}
}

/* Move the QP's receive WQs to ERR: their posted receives flush. */
static void wqs_to_err(struct ibp_qp *qp)
{
	for (unsigned i = 0; i < qp->nparts; i++) {
		struct ibv_wq_attr a = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = IBV_WQS_ERR };
		int ret;

		if (qp->part[i].wq && (ret = ibv_modify_wq(qp->part[i].wq, &a)))
			log_errno(LOG_ERR, ret, "verbs: %s: QP %u: WQ to ERR", qp->port->name,
				  qp->qpn);
	}
}

/*
 * Wait until done(qp), checked under every queue lock, while the queues' pollers reap
 * the flushed completions; a queue nobody polls (a link taken down leaves the engine
 * before its QPs are destroyed) is reaped here after IBP_VERBS_REAP_MS. false: dl
 * passed first.
 */
static bool wait_reaped(struct ibp_qp *qp, bool (*done)(const struct ibp_qp *),
			const struct timespec *dl)
{
	struct ibp_port *port = qp->port;
	struct timespec reap;
	bool ok;

	deadline_in(&reap, IBP_VERBS_REAP_MS);
	lock_all(port);
	while (!(ok = done(qp)) && ms_until(dl) > 0) {
		unlock_all(port);
		usleep(1000);
		lock_all(port);
		if (ms_until(&reap) == 0) {
			for (unsigned i = 0; i < port->nq; i++)
				reap_locked(port, &port->q[i]);
			deadline_in(&reap, IBP_VERBS_REAP_MS);
		}
	}
	unlock_all(port);
	return ok;
}

static void verbs_destroy_qp(struct ibp_qp *qp)
{
	struct ibp_port *port;
	struct timespec dl;
	bool flushing = false;
	int ret;

	if (!qp)
		return;
	port = qp->port;
	deadline_in(&dl, IBP_VERBS_DRAIN_MS);

	lock_all(port);
	qp->dying = true; /* from now on its completions stay inside the backend */
	unlock_all(port);

	/* A QP in RESET holds no WRs (and RESET -> ERR is not a valid transition). */
	if (qp->state != IBV_QPS_RESET) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		flushing = modify(qp, &a, IBV_QP_STATE, "ERR") == 0;
	}
	wqs_to_err(qp);
	if (flushing && qp->srq) {
		/* After Last WQE Reached, a zero-length send on the flushed SQ completes
		 * after every receive completion of this QP: the drain marker. */
		struct ibv_send_wr wr = { .wr_id = WRID_DRAIN,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED };
		struct ibv_send_wr *bad;

		if (!wait_last_wqe(port, qp, &dl))
			log_warning("verbs: %s: QP %u: no Last WQE Reached event", port->name,
				    qp->qpn);
		ret = ibv_post_send(qp->qp, &wr, &bad);
		if (ret) {
			log_errno(LOG_WARNING, ret, "verbs: %s: QP %u: drain WR", port->name,
				  qp->qpn);
			flushing = false;
		}
	}
	if (flushing && !wait_reaped(qp, qp_drained, &dl))
		log_warning("verbs: %s: QP %u: flushed completions not reaped in %u ms", port->name,
			    qp->qpn, IBP_VERBS_DRAIN_MS);

	stash_forget(port, qp);
	if (qp->prev)
		qp->prev->next = qp->next;
	else
		port->qps = qp->next;
	if (qp->next)
		qp->next->prev = qp->prev;
	/* The verbs objects first: once they are gone no WR of theirs can still land in a
	 * buffer given back below (qp_objects_destroy clears the parts: keep the queue). */
	unsigned srq_queue = qp->part[0].queue;

	qp_objects_destroy(qp);

	/* Buffers whose completions never came (timeout, or a provider that cleans the
	 * CQ on destroy) return to the pool; their late completions, if any, fail the
	 * generation check in poll. */
	lock_all(port);
	for (unsigned i = 0; i < port->pool.n_bufs; i++) {
		struct vbuf *v = &port->vbufs[i];
		enum vbuf_state s = vb_state(v);

		if ((s == VB_SEND || s == VB_RECV) && v->owner == qp)
			free_push(port, v);
	}
	/* Its completions kept for poll (from another QP's destroy) go too. */
	for (unsigned k = 0; k < port->nq; k++) {
		struct vqueue *q = &port->q[k];
		unsigned kept = 0;

		for (unsigned i = 0; i < q->wc_stash_len; i++) {
			struct ibp_wc *w = &q->wc_stash[i];

			if (w->qp == qp)
				free_push(port, vbuf_of(port, w->buf));
			else
				q->wc_stash[kept++] = *w;
		}
		q->wc_stash_len = kept;
	}
	if (qp->srq)
		qpt_remove(&port->q[srq_queue], qp);
	unlock_all(port);
	free(qp);
}

/* --- recovery of a UD QP's parts in error --- */

static int post_recvs(struct ibp_port *port, struct ibp_qp *qp, struct qp_part *pt,
		      struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n);

/* Every queue lock held: the failed parts' posted WRs have all been reaped. */
static bool errs_drained(const struct ibp_qp *qp)
{
	for (unsigned i = 0; i < qp->nparts; i++) {
		const struct qp_part *pt = &qp->part[i];

		if ((pt->sq_err && pt->sq_out) || (pt->rq_err && pt->rq_out))
			return false;
	}
	return true;
}

/* One UD QP (plain, or a send QP) from RESET to RTS, as qp_ready does. */
static int ud_to_rts(struct ibp_qp *qp, struct ibv_qp *vqp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = qp->pkey_index,
		.port_num = qp->port->port_num,
		.qkey = qp->qkey,
	};
	int ret = modify_one(qp, vqp, &a,
			     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "INIT");

	if (ret == 0) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		ret = modify_one(qp, vqp, &a, IBV_QP_STATE, "RTR");
	}
	if (ret == 0) {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = 0;
		ret = modify_one(qp, vqp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");
	}
	return ret;
}

static int wq_to(struct ibp_qp *qp, struct ibv_wq *wq, enum ibv_wq_state st, const char *what)
{
	struct ibv_wq_attr a = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = st };
	int ret = ibv_modify_wq(wq, &a);

	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: QP %u: receive WQ %u to %s", qp->port->name,
			  qp->qpn, wq->wq_num, what);
	return -ret;
}

/* Every queue lock held, the failed parts in RESET: what they held and nobody reaped
 * (the drain timed out; RESET removed the completions) goes back to the pool. A late
 * completion of one, if a provider still made it, fails the generation check. */
static void errs_take_back(struct ibp_qp *qp)
{
	struct ibp_port *port = qp->port;

	for (unsigned i = 0; i < port->pool.n_bufs; i++) {
		struct vbuf *v = &port->vbufs[i];
		enum vbuf_state s = vb_state(v);
		struct qp_part *pt;

		if ((s != VB_SEND && s != VB_RECV) || v->owner != qp)
			continue;
		pt = part_of(qp, v->queue);
		if (s == VB_SEND ? pt->sq_err : pt->rq_err)
			free_push(port, v);
	}
	for (unsigned i = 0; i < qp->nparts; i++) {
		if (qp->part[i].sq_err)
			qp->part[i].sq_out = 0;
		if (qp->part[i].rq_err)
			qp->part[i].rq_out = 0;
	}
}

/* Receives of part pt from the pool, up to the QP's depth (fewer when the pool is
 * short: the workers' reposts fill the rest). */
static unsigned refill(struct ibp_qp *qp, struct qp_part *pt)
{
	struct ibp_port *port = qp->port;
	struct ibp_buf *bufs[IBP_VERBS_BATCH];
	unsigned total = 0;

	for (;;) {
		unsigned n = 0, ok;
		int got;

		while (n < IBP_VERBS_BATCH && (bufs[n] = ibp_pool_get(&port->pool)))
			n++;
		if (n == 0)
			break;
		got = post_recvs(port, qp, pt, NULL, bufs, n);
		ok = got > 0 ? (unsigned)got : 0;
		for (unsigned i = ok; i < n; i++)
			ibp_pool_put(&port->pool, bufs[i]);
		total += ok;
		if (ok < n)
			break;
	}
	return total;
}

static void mark_err(struct ibp_qp *qp, struct ibv_qp *vqp, struct ibv_wq *wq);

/*
 * No event marked anything: ask the provider for the state of the QP's QPs (the Linux
 * driver's ipoib_qp_state_validate_work). A UD send error leaves its QP in SQE, told by
 * the failed completion alone: back to RTS (its WRs have flushed; nothing else to do).
 * A QP in ERR without an event (a receive error, on some providers) is marked, to be
 * recovered as after QP_FATAL. Returns how many came back from SQE, or -errno.
 */
static int check_states(struct ibp_qp *qp)
{
	int fixed = 0;

	for (unsigned i = 0; i < qp->nparts; i++) {
		struct qp_part *pt = &qp->part[i];
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		int ret = ibv_query_qp(pt->sqp, &a, IBV_QP_STATE, &ia);

		if (ret) {
			log_errno(LOG_ERR, ret, "verbs: %s: QP %u: ibv_query_qp", qp->port->name,
				  pt->sqp->qp_num);
			return -ret;
		}
		if (a.qp_state == IBV_QPS_SQE) {
			struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS };

			ret = modify_one(qp, pt->sqp, &rts, IBV_QP_STATE, "RTS (from SQE)");
			if (ret < 0)
				return ret;
			fixed++;
		} else if (a.qp_state == IBV_QPS_ERR) {
			mark_err(qp, pt->sqp, NULL);
		}
	}
	return fixed;
}

static unsigned count_marked(const struct ibp_qp *qp)
{
	unsigned n = 0;

	/* The marks are this thread's to write: no lock to read them. */
	for (unsigned i = 0; i < qp->nparts; i++)
		n += qp->part[i].sq_err || qp->part[i].rq_err;
	return n;
}

static int verbs_qp_recover(struct ibp_qp *qp)
{
	struct ibp_port *port = qp->port;
	struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
	struct timespec dl;
	int ret = 0;

	if (qp->type != IBP_QPT_UD || qp->dying)
		return -EINVAL;
	if (count_marked(qp) == 0) {
		if (qp->state != IBV_QPS_RTS)
			return 0; /* not made ready yet: nothing of it runs */
		ret = check_states(qp);
		if (ret < 0)
			return ret;
		if (count_marked(qp) == 0)
			return ret > 0;
		ret = 0;
	}

	/* A QP that raised QP_FATAL is in ERR already (its WRs flush); one that is not
	 * (QP_REQ_ERR on some provider, a retry after a failed RESET) is moved there. (A
	 * WQ's only way to ERR is from RDY: its WQ_FATAL put it there.) */
	for (unsigned i = 0; i < qp->nparts; i++) {
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;
		struct ibv_qp *v = qp->part[i].sqp;

		if (qp->part[i].sq_err &&
		    (ibv_query_qp(v, &a, IBV_QP_STATE, &ia) || a.qp_state != IBV_QPS_ERR))
			(void)modify_one(qp, v, &err, IBV_QP_STATE, "ERR");
	}
	deadline_in(&dl, IBP_VERBS_DRAIN_MS);
	if (!wait_reaped(qp, errs_drained, &dl))
		log_warning("verbs: %s: QP %u: flushed completions not reaped in %u ms: their "
			    "buffers are taken back",
			    port->name, qp->qpn, IBP_VERBS_DRAIN_MS);

	/* RESET forgets what is still posted, and (mlx5) the part's completions in the
	 * CQ: nothing of the old WRs can come back after it. */
	for (unsigned i = 0; i < qp->nparts && ret == 0; i++) {
		struct qp_part *pt = &qp->part[i];
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

		if (pt->sq_err)
			ret = modify_one(qp, pt->sqp, &a, IBV_QP_STATE, "RESET");
		if (ret == 0 && pt->rq_err && pt->wq)
			ret = wq_to(qp, pt->wq, IBV_WQS_RESET, "RESET");
	}
	if (ret < 0)
		goto out;
	lock_all(port);
	errs_take_back(qp);
	unlock_all(port);

	for (unsigned i = 0; i < qp->nparts && ret == 0; i++) {
		struct qp_part *pt = &qp->part[i];

		if (pt->sq_err)
			ret = ud_to_rts(qp, pt->sqp);
		if (ret == 0 && pt->rq_err && pt->wq)
			ret = wq_to(qp, pt->wq, IBV_WQS_RDY, "RDY");
	}
	if (ret < 0)
		goto out;

	/* Back in service: posts accepted again, the receive queues refilled. */
	for (unsigned i = 0; i < qp->nparts; i++) {
		struct qp_part *pt = &qp->part[i];
		struct vqueue *q = &port->q[pt->queue];
		bool rq = pt->rq_err;

		pthread_mutex_lock(&q->lock);
		pt->sq_err = pt->rq_err = false;
		pthread_mutex_unlock(&q->lock);
		if (rq)
			refill(qp, pt);
	}
	qp->state = IBV_QPS_RTS;
	return 1;
out:
	/* Still marked: posts stay refused; a later call starts over from ERR. */
	qp->state = IBV_QPS_ERR;
	return ret;
}

/* --- AHs and multicast --- */

static int verbs_create_ah(struct ibp_port *port, const struct ibp_ah_attr *attr,
			   struct ibp_ah **out)
{
	struct ibv_ah_attr va;
	struct ibp_ah *ah = calloc(1, sizeof(*ah));
	int ret;

	if (!ah)
		return -ENOMEM;
	ah_to_verbs(attr, port->port_num, &va);
	ah->ah = ibv_create_ah(port->pd, &va);
	if (!ah->ah) {
		ret = neg_errno(EINVAL);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_ah dlid 0x%x", port->name,
			  attr->dlid);
		free(ah);
		return ret;
	}
	ah->port = port;
	ah->next = port->ahs;
	if (port->ahs)
		port->ahs->prev = ah;
	port->ahs = ah;
	*out = ah;
	return 0;
}

static void verbs_destroy_ah(struct ibp_ah *ah)
{
	int ret;

	if (!ah)
		return;
	ret = ibv_destroy_ah(ah->ah);
	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_ah", ah->port->name);
	if (ah->prev)
		ah->prev->next = ah->next;
	else
		ah->port->ahs = ah->next;
	if (ah->next)
		ah->next->prev = ah->prev;
	free(ah);
}

static int verbs_attach_mcast(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	union ibv_gid g;
	int ret;

	memcpy(g.raw, mgid->raw, sizeof(g.raw));
	ret = ibv_attach_mcast(qp->qp, &g, mlid);
	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: QP %u: attach to MLID 0x%x", qp->port->name,
			  qp->qpn, mlid);
	return -ret;
}

static int verbs_detach_mcast(struct ibp_qp *qp, const union ib_gid *mgid, uint16_t mlid)
{
	union ibv_gid g;
	int ret;

	memcpy(g.raw, mgid->raw, sizeof(g.raw));
	ret = ibv_detach_mcast(qp->qp, &g, mlid);
	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: QP %u: detach from MLID 0x%x", qp->port->name,
			  qp->qpn, mlid);
	return -ret;
}

/* --- data path --- */

/* Post sends[0..n) (all on one QP part, validated and marked VB_SEND): one chained
 * ibv_post_send. Returns the number accepted; *err gets the provider's error when
 * fewer. The part's queue lock held. */
static unsigned post_send_run(struct ibp_qp *qp, struct qp_part *pt, struct ibp_send *sends,
			      unsigned n, int *err)
{
	struct ibp_port *port = qp->port;
	struct ibv_send_wr wr[IBP_VERBS_BATCH], *bad = NULL;
	struct ibv_sge sge[IBP_VERBS_BATCH];
	unsigned i;
	int ret;

	for (i = 0; i < n; i++) {
		struct ibp_send *s = &sends[i];
		struct vbuf *v = &port->vbufs[s->buf->id];

		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)s->buf->data,
					   .length = s->buf->len,
					   .lkey = port->mr->lkey };
		wr[i] = (struct ibv_send_wr){ .wr_id = vb_wrid(port, v),
					      .next = i + 1 < n ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i],
					      .num_sge = 1,
					      .opcode = IBV_WR_SEND,
					      .send_flags = IBV_SEND_SIGNALED };
		if (s->buf->len <= qp->max_inline)
			wr[i].send_flags |= IBV_SEND_INLINE;
		if (qp->type == IBP_QPT_UD) {
			wr[i].wr.ud.ah = s->ah->ah;
			wr[i].wr.ud.remote_qpn = s->remote_qpn;
			wr[i].wr.ud.remote_qkey = s->remote_qkey;
		}
		v->user_wr_id = s->wr_id;
		v->owner = qp;
		v->queue = pt->queue;
	}
	ret = ibv_post_send(pt->sqp, wr, &bad);
	if (ret == 0) {
		pt->sq_out += n;
		return n;
	}
	*err = -ret;
	/* bad and everything after it were not posted. */
	unsigned ok = bad ? (unsigned)(bad - wr) : 0;

	for (i = ok; i < n; i++)
		vb_set(&port->vbufs[sends[i].buf->id], VB_OWNED);
	pt->sq_out += ok;
	return ok;
}

static bool send_valid(struct ibp_port *port, const struct ibp_send *s)
{
	struct vbuf *v = vbuf_of(port, s->buf);

	return s->qp && s->qp->port == port && !s->qp->dying && v && vb_state(v) == VB_OWNED &&
	       s->buf->len <= s->buf->cap && (s->qp->type != IBP_QPT_UD || s->ah);
}

static int verbs_post_send(unsigned queue, struct ibp_send *sends, unsigned n)
{
	struct ibp_port *port;
	unsigned done = 0;
	int err = 0;

	if (n == 0)
		return 0;
	if (!sends[0].qp)
		return -EINVAL;
	port = sends[0].qp->port;
	queue %= port->nq;
	while (done < n && !err) {
		struct ibp_qp *qp = sends[done].qp;
		struct qp_part *pt;
		struct vqueue *q;
		unsigned run = 0;

		if (!qp || qp->port != port) {
			err = -EINVAL;
			break;
		}
		pt = part_of(qp, queue);
		q = &port->q[pt->queue];
		pthread_mutex_lock(&q->lock);
		/* A run: consecutive valid sends on the same QP, within its depth.
		 * Each is marked posted as it is accepted, so a buffer listed twice fails
		 * the second time. */
		while (done + run < n && run < IBP_VERBS_BATCH && sends[done + run].qp == qp) {
			if (!send_valid(port, &sends[done + run])) {
				err = -EINVAL;
				break;
			}
			if (pt->sq_err) {
				err = -EIO; /* in the error state until qp_recover */
				break;
			}
			if (pt->sq_out + run >= qp->send_depth) {
				err = -ENOMEM; /* send queue full: reap completions first */
				break;
			}
			vb_set(&port->vbufs[sends[done + run].buf->id], VB_SEND);
			run++;
		}
		if (run) {
			int run_err = 0;
			unsigned ok = post_send_run(qp, pt, &sends[done], run, &run_err);

			done += ok;
			if (ok < run)
				err = run_err;
		}
		pthread_mutex_unlock(&q->lock);
		if (run == 0)
			break;
	}
	return done ? (int)done : err;
}

/* Fill wr[]/sge[] for receive buffers and mark them posted; the queue's lock held. */
static int recv_prepare(struct ibp_port *port, struct ibp_buf **bufs, unsigned n, void *owner,
			unsigned queue, enum vbuf_state state, struct ibv_recv_wr *wr,
			struct ibv_sge *sge)
{
	for (unsigned i = 0; i < n; i++) {
		struct vbuf *v = vbuf_of(port, bufs[i]);

		if (!v || vb_state(v) != VB_OWNED) {
			for (unsigned j = 0; j < i; j++)
				vb_set(&port->vbufs[bufs[j]->id], VB_OWNED);
			return -EINVAL;
		}
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)bufs[i]->data,
					   .length = bufs[i]->cap,
					   .lkey = port->mr->lkey };
		wr[i] = (struct ibv_recv_wr){ .wr_id = vb_wrid(port, v),
					      .next = i + 1 < n ? &wr[i + 1] : NULL,
					      .sg_list = &sge[i],
					      .num_sge = 1 };
		v->owner = owner;
		v->queue = queue;
		vb_set(v, state);
	}
	return 0;
}

/* Shared by post_recv (qp and its part pt) and post_srq_recv (srq): chains of at most
 * IBP_VERBS_BATCH, under the queue's lock. */
static int post_recvs(struct ibp_port *port, struct ibp_qp *qp, struct qp_part *pt,
		      struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n)
{
	struct vqueue *q = &port->q[qp ? pt->queue : srq->queue];
	struct ibv_recv_wr wr[IBP_VERBS_BATCH], *bad = NULL;
	struct ibv_sge sge[IBP_VERBS_BATCH];
	unsigned done = 0;
	int err = 0;

	pthread_mutex_lock(&q->lock);
	while (done < n) {
		unsigned run = n - done < IBP_VERBS_BATCH ? n - done : IBP_VERBS_BATCH;
		int ret;

		if (qp) {
			if (qp->dying || pt->rq_err) {
				err = qp->dying ? -EINVAL : -EIO; /* -EIO: until qp_recover */
				break;
			}
			if (pt->rq_out + run > qp->recv_depth)
				run = qp->recv_depth - pt->rq_out;
			if (run == 0) {
				err = -ENOMEM;
				break;
			}
		}
		err = recv_prepare(port, &bufs[done], run, qp ? (void *)qp : (void *)srq,
				   (unsigned)(q - port->q), qp ? VB_RECV : VB_SRQ, wr, sge);
		if (err)
			break;
		if (!qp)
			ret = ibv_post_srq_recv(srq->srq, wr, &bad);
		else if (pt->wq)
			ret = ibv_post_wq_recv(pt->wq, wr, &bad);
		else
			ret = ibv_post_recv(qp->qp, wr, &bad);
		unsigned ok = ret == 0 ? run : bad ? (unsigned)(bad - wr) : 0;

		for (unsigned i = ok; i < run; i++)
			vb_set(&port->vbufs[bufs[done + i]->id], VB_OWNED);
		if (qp)
			pt->rq_out += ok;
		done += ok;
		if (ret) {
			err = -ret;
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return done ? (int)done : err;
}

static int verbs_post_recv(struct ibp_qp *qp, unsigned queue, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	if (qp->srq || queue >= qp->port->nq)
		return -EINVAL; /* receives of an SRQ QP go to the SRQ */
	return post_recvs(qp->port, qp, part_of(qp, queue), NULL, bufs, n);
}

static int verbs_post_srq_recv(struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	return post_recvs(srq->port, NULL, NULL, srq, bufs, n);
}

static enum ibp_wc_status map_wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return IBP_WC_OK;
	case IBV_WC_WR_FLUSH_ERR:
		return IBP_WC_FLUSHED;
	case IBV_WC_RETRY_EXC_ERR:
		return IBP_WC_RETRY_EXCEEDED;
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return IBP_WC_RNR_EXCEEDED;
	case IBV_WC_REM_ACCESS_ERR:
	case IBV_WC_REM_INV_REQ_ERR:
	case IBV_WC_REM_OP_ERR:
	case IBV_WC_REM_ABORT_ERR:
	case IBV_WC_REM_INV_RD_REQ_ERR:
		return IBP_WC_REMOTE_ERROR;
	default:
		return IBP_WC_LOCAL_ERROR;
	}
}

/*
 * One ibv_wc of queue q to at most one ibp_wc; returns false when the completion stays
 * inside the backend (drain marker, stale, or a QP being destroyed). q's lock held.
 * Only wr_id, status, qp_num and vendor_err are valid in a failed ibv_wc, so the kind
 * and the QP come from our own record of what was posted.
 */
static bool translate_wc(struct ibp_port *port, struct vqueue *q, const struct ibv_wc *wc,
			 struct ibp_wc *out)
{
	unsigned qi = (unsigned)(q - port->q);
	struct ibp_qp *qp;
	struct vbuf *v;
	uint32_t idx = (uint32_t)wc->wr_id;
	enum vbuf_state s;

	if (wc->wr_id & WRID_DRAIN) {
		qp = qpt_find(q, wc->qp_num);
		if (qp)
			part_of(qp, qi)->drain_seen = true;
		return false;
	}
	v = idx < port->pool.n_bufs ? &port->vbufs[idx] : NULL;
	s = v ? vb_state(v) : VB_FREE;
	if (!v || v->gen != (uint32_t)(wc->wr_id >> 32) || s < VB_SEND) {
		q->stale_wcs++;
		return false;
	}
	bool in_err = false;

	if (s == VB_SEND || s == VB_RECV) {
		struct qp_part *pt;

		qp = v->owner;
		pt = part_of(qp, qi);
		if (s == VB_SEND)
			pt->sq_out--;
		else
			pt->rq_out--;
		/* A part in error: its flushed WRs are the backend's to take back (what
		 * completed before the error still goes up). */
		in_err = wc->status != IBV_WC_SUCCESS && (s == VB_SEND ? pt->sq_err : pt->rq_err);
	} else {
		qp = qpt_find(q, wc->qp_num);
	}
	if (!qp || qp->dying || in_err) {
		free_push(port, v);
		return false;
	}
	vb_set(v, VB_OWNED);

	bool ok = wc->status == IBV_WC_SUCCESS;

	memset(out, 0, sizeof(*out));
	out->kind = s == VB_SEND ? IBP_WC_SEND : IBP_WC_RECV;
	out->status = map_wc_status(wc->status);
	out->qp = qp;
	out->qp_user = qp->user;
	out->wr_id = s == VB_SEND ? v->user_wr_id : 0;
	out->buf = &v->pb.pub;
	if (s != VB_SEND) {
		out->byte_len = ok ? wc->byte_len : 0;
		v->pb.pub.len = out->byte_len;
		/* wc->pkey_index is defined for GSI QPs only; others receive only their
		 * own P_Key. slid/sl/src_qp/GRH are meaningful for UD. */
		out->pkey_index = qp->pkey_index;
		if (ok && qp->type == IBP_QPT_UD) {
			out->slid = wc->slid;
			out->src_qp = wc->src_qp;
			out->sl = wc->sl;
			out->has_grh = (wc->wc_flags & IBV_WC_GRH) != 0;
		}
	}
	return true;
}

static int verbs_poll(struct ibp_port *port, unsigned queue, struct ibp_wc *wcs, unsigned max)
{
	struct ibv_wc wc[IBP_VERBS_BATCH];
	struct vqueue *q;
	unsigned n = 0;
	int ret = 0;

	if (queue >= port->nq)
		return -EINVAL;
	q = &port->q[queue];
	pthread_mutex_lock(&q->lock);
	if (q->wc_stash_len) {
		/* reaped by destroy_qp: theirs first, in order */
		unsigned k = q->wc_stash_len < max ? q->wc_stash_len : max;

		memcpy(wcs, q->wc_stash, k * sizeof(*wcs));
		memmove(q->wc_stash, q->wc_stash + k, (q->wc_stash_len - k) * sizeof(*wcs));
		q->wc_stash_len -= k;
		n = k;
	}
	while (n < max) {
		int want = (int)(max - n < IBP_VERBS_BATCH ? max - n : IBP_VERBS_BATCH);
		int got = ibv_poll_cq(q->cq, want, wc);

		if (got < 0) {
			ret = -EIO;
			break;
		}
		for (int i = 0; i < got; i++)
			if (translate_wc(port, q, &wc[i], &wcs[n]))
				n++;
		if (got < want)
			break;
	}
	pthread_mutex_unlock(&q->lock);
	return n ? (int)n : ret;
}

/* --- events --- */

static unsigned verbs_queues(struct ibp_port *port)
{
	return port->nq;
}

static int verbs_cq_fd(struct ibp_port *port, unsigned queue)
{
	return queue < port->nq ? port->q[queue].chan->fd : -EINVAL;
}

static int verbs_async_fd(struct ibp_port *port)
{
	return port->ctx->async_fd;
}

/* Ack pending completion events (batched: each ack takes the CQ's mutex in libibverbs)
 * and re-request notification. Then poll once more before sleeping: completions that
 * arrived before the request raise no event. */
static int verbs_arm(struct ibp_port *port, unsigned queue)
{
	struct vqueue *q;
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret;

	if (queue >= port->nq)
		return -EINVAL;
	q = &port->q[queue];
	while (ibv_get_cq_event(q->chan, &cq, &cq_ctx) == 0) {
		if (++q->cq_events_unacked >= IBP_VERBS_ACK_MAX) {
			ibv_ack_cq_events(q->cq, q->cq_events_unacked);
			q->cq_events_unacked = 0;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_errno(LOG_ERR, errno, "verbs: %s: ibv_get_cq_event", port->name);
	ret = ibv_req_notify_cq(q->cq, 0);
	if (ret) {
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_req_notify_cq", port->name);
		return -ret;
	}
	return 0;
}

/* Port events are broadcast to every context of a device: keep our port's. */
static bool our_port(struct ibp_port *port, const struct ibv_async_event *e)
{
	return e->element.port_num == port->port_num;
}

/* A UD QP's part in error (QP_FATAL of vqp, or WQ_FATAL of wq): marked under its
 * queue's lock, so that from now on its posts are refused and its flushed completions
 * stay inside until qp_recover. RC QPs are not marked: their owner destroys them,
 * and the failed send's completion is how it learns of the failure. The RSS receive
 * QP holds no WQEs: nothing to mark. */
static void mark_err(struct ibp_qp *qp, struct ibv_qp *vqp, struct ibv_wq *wq)
{
	if (qp->type != IBP_QPT_UD)
		return;
	for (unsigned i = 0; i < qp->nparts; i++) {
		struct qp_part *pt = &qp->part[i];
		struct vqueue *q = &qp->port->q[pt->queue];

		if ((vqp && pt->sqp != vqp) || (wq && pt->wq != wq))
			continue;
		pthread_mutex_lock(&q->lock);
		if (vqp) {
			pt->sq_err = true;
			if (!qp->ind)
				pt->rq_err = true; /* a plain QP: its receives too */
		} else {
			pt->rq_err = true;
		}
		pthread_mutex_unlock(&q->lock);
	}
}

/*
 * Read and ack one async event. Returns 1 with *ev filled for an event the caller
 * should see, 0 for one handled or ignored here, -EAGAIN when none is pending.
 */
static int read_async(struct ibp_port *port, struct ibp_event *ev)
{
	struct ibv_async_event e;
	int ret = 1;

	if (ibv_get_async_event(port->ctx, &e)) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -EAGAIN;
		log_errno(LOG_ERR, errno, "verbs: %s: ibv_get_async_event", port->name);
		return -errno;
	}
	ev->qp = NULL;
	switch (e.event_type) {
	case IBV_EVENT_PORT_ACTIVE:
		ev->type = IBP_EVENT_PORT_ACTIVE;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_PORT_ERR:
		ev->type = IBP_EVENT_PORT_DOWN;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_LID_CHANGE:
		ev->type = IBP_EVENT_LID_CHANGE;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_PKEY_CHANGE:
		ev->type = IBP_EVENT_PKEY_CHANGE;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_SM_CHANGE:
		ev->type = IBP_EVENT_SM_CHANGE;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_CLIENT_REREGISTER:
		ev->type = IBP_EVENT_CLIENT_REREGISTER;
		ret = our_port(port, &e);
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
		ev->type = IBP_EVENT_QP_FATAL;
		ev->qp = e.element.qp->qp_context;
		/* A QP being destroyed is in ERR on purpose. */
		ret = !ev->qp->dying;
		if (ret)
			mark_err(ev->qp, e.element.qp, NULL);
		break;
	case IBV_EVENT_WQ_FATAL:
		/* A receive work queue of a UD QP over several queues. */
		ev->type = IBP_EVENT_WQ_FATAL;
		ev->qp = e.element.wq->wq_context;
		ret = !ev->qp->dying;
		if (ret)
			mark_err(ev->qp, NULL, e.element.wq);
		break;
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		((struct ibp_qp *)e.element.qp->qp_context)->last_wqe = true;
		ret = 0;
		break;
	case IBV_EVENT_DEVICE_FATAL:
		/* The device is gone or must be reset: the port is down for good. */
		log_error("verbs: %s: device fatal error", port->name);
		ev->type = IBP_EVENT_PORT_DOWN;
		break;
	case IBV_EVENT_CQ_ERR:
		/* Cannot happen with the CQ sized to the pool; if it does, it is a bug. */
		log_error("verbs: %s: CQ error (overrun?)", port->name);
		ret = 0;
		break;
	default:
		log_debug("verbs: %s: async event %s ignored", port->name,
			  ibv_event_type_str(e.event_type));
		ret = 0;
		break;
	}
	ibv_ack_async_event(&e);
	return ret;
}

static int verbs_next_event(struct ibp_port *port, struct ibp_event *ev)
{
	int ret;

	if (port->stash_len) {
		*ev = port->stash[port->stash_head];
		port->stash_head = (port->stash_head + 1) % IBP_VERBS_STASH;
		port->stash_len--;
		return 0;
	}
	while ((ret = read_async(port, ev)) == 0)
		;
	return ret == 1 ? 0 : ret;
}

const struct ibp_ops ibp_verbs_ops = {
	.name = "verbs",
	.open = verbs_open,
	.close = verbs_close,
	.query = verbs_query,
	.buf_get = verbs_buf_get,
	.buf_put = verbs_buf_put,
	.queues = verbs_queues,
	.create_srq = verbs_create_srq,
	.destroy_srq = verbs_destroy_srq,
	.create_qp = verbs_create_qp,
	.qp_ready = verbs_qp_ready,
	.destroy_qp = verbs_destroy_qp,
	.qp_num = verbs_qp_num,
	.qp_recover = verbs_qp_recover,
	.create_ah = verbs_create_ah,
	.destroy_ah = verbs_destroy_ah,
	.attach_mcast = verbs_attach_mcast,
	.detach_mcast = verbs_detach_mcast,
	.post_send = verbs_post_send,
	.post_recv = verbs_post_recv,
	.post_srq_recv = verbs_post_srq_recv,
	.poll = verbs_poll,
	.cq_fd = verbs_cq_fd,
	.async_fd = verbs_async_fd,
	.arm = verbs_arm,
	.next_event = verbs_next_event,
};
