/*
 * The verbs backend of the IB port ops table: libibverbs on a real HCA.
 *
 * One port = one device context, one protection domain, one packet buffer pool
 * registered as a single memory region, one completion channel and one CQ shared by
 * every QP of the port. The completion channel's fd is the port's cq_fd (the worker
 * waits on it) and the context's async fd its async_fd (the control thread's).
 * docs/ib-port.md maps each op to its verbs calls.
 *
 * The CQ is created at open with room for n_bufs + IBP_VERBS_CQ_SLACK entries and is
 * never resized: every completion but the internal drain WRs is for a posted pool
 * buffer, and a buffer is posted at most once until its completion is reaped, so the
 * CQ cannot overrun whatever QPs are created later.
 *
 * Buffers are tracked (state, owner, generation) so that completions can be checked
 * against what was posted. The generation travels in the upper half of wr_id, so a
 * stale completion of a destroyed QP is recognised and dropped instead of handing
 * out a buffer twice. Every send is signaled (see docs/ib-port.md for why).
 *
 * QP destruction follows the Linux IPoIB driver: move to ERR so posted WRs flush,
 * wait until their completions have been reaped by the port's poller (and, for a QP
 * on the SRQ, for the Last WQE Reached event and a drain WR), then destroy. The
 * flushed buffers go back to the pool here; the caller sees no completion of a QP
 * after destroy_qp has started.
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
#define WRID_DRAIN         (1ull << 63)
#define GEN_MASK           0x7fffffffu

enum vbuf_state {
	VB_FREE = IBP_POOL_FREE,   /* on the free list */
	VB_OWNED = IBP_POOL_OWNED, /* held by a caller thread */
	VB_SEND = IBP_POOL_POSTED, /* posted on owner's send queue */
	VB_RECV,                   /* posted on owner's receive queue */
	VB_SRQ,                    /* posted on an SRQ */
};

/*
 * Buffer descriptor, the pool's head first (pb.pub is what callers hold). Its state
 * changes only by the thread that owns the buffer in its current state (free list:
 * the pool's lock; posted: port_lock; owned: the holder); destroy_qp/destroy_srq scan
 * all descriptors under port_lock while other threads move owned buffers to the free
 * list (port/ib_bufpool.h).
 */
struct vbuf {
	struct ibp_pool_buf pb;
	uint64_t user_wr_id; /* VB_SEND: the caller's wr_id */
	void *owner;         /* VB_SEND/VB_RECV: the ibp_qp; VB_SRQ: the ibp_srq */
	uint32_t gen;        /* bumped at each post; travels in wr_id */
};

/* Control thread owns the fields, except those marked port_lock. */
struct ibp_qp {
	struct ibp_port *port;
	struct ibv_qp *qp;
	struct ibp_srq *srq;
	enum ibp_qp_type type;
	void *user;
	uint32_t qpn;
	uint16_t pkey_index;
	uint32_t qkey;
	unsigned send_depth, recv_depth;
	uint32_t max_inline;
	enum ibv_qp_state state; /* as last moved by us */
	bool last_wqe;           /* SRQ QP: Last WQE Reached seen */
	/* port_lock: */
	unsigned sq_out, rq_out; /* posted and not yet reaped */
	bool dying, drain_seen;
};

/* Control thread. */
struct ibp_srq {
	struct ibp_port *port;
	struct ibv_srq *srq;
	unsigned depth;
	struct ibp_srq *next;
};

/* Control thread. */
struct ibp_ah {
	struct ibp_port *port;
	struct ibv_ah *ah;
	struct ibp_ah *prev, *next;
};

/*
 * Port. Immutable after open, except as marked. Lock order: port_lock, then the pool's
 * lock.
 */
struct ibp_port {
	char name[64];
	uint8_t port_num;
	struct ibv_context *ctx;
	struct ibv_device_attr dev;
	struct ibv_pd *pd;
	struct ibp_pool pool; /* any thread: its own lock */
	struct ibv_mr *mr;    /* over the pool's region */
	struct vbuf *vbufs;   /* the pool's descriptors */
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;

	/* port_lock: taken once per post/poll batch (the owner thread, uncontended) and by
	 * the control thread to create/destroy QPs. Guards the qpn table, the QPs'
	 * port_lock fields and posted buffers. drained is signalled when a dying QP's
	 * last completion is reaped. */
	pthread_mutex_t port_lock;
	pthread_cond_t drained;
	struct ibp_qp **qpt; /* open addressing by qpn, linear probing */
	size_t qpt_cap, qpt_len;
	uint64_t stale_wcs; /* completions dropped as stale (statistics) */
	/* Completions of live QPs that destroy_qp reaped while waiting for a dying QP's
	 * (nobody polled the port): poll hands them out first. */
	struct ibp_wc wc_stash[IBP_VERBS_WC_STASH];
	unsigned wc_stash_len;

	/* Owner thread (arm). */
	unsigned cq_events_unacked;

	/* Control thread. */
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

/* Back to the free list. Caller holds port_lock or owns the buffer. */
static void free_push(struct ibp_port *port, struct vbuf *v)
{
	ibp_pool_release(&port->pool, &v->pb);
}

/* --- qpn -> QP table (port_lock) --- */

static size_t qpt_home(uint32_t qpn, size_t cap)
{
	return (size_t)(qpn * 0x9e3779b1u) & (cap - 1);
}

static struct ibp_qp *qpt_find(struct ibp_port *port, uint32_t qpn)
{
	size_t mask = port->qpt_cap - 1;

	for (size_t i = qpt_home(qpn, port->qpt_cap); port->qpt[i]; i = (i + 1) & mask)
		if (port->qpt[i]->qpn == qpn)
			return port->qpt[i];
	return NULL;
}

static void qpt_place(struct ibp_qp **t, size_t cap, struct ibp_qp *qp)
{
	size_t i = qpt_home(qp->qpn, cap);

	while (t[i])
		i = (i + 1) & (cap - 1);
	t[i] = qp;
}

static int qpt_insert(struct ibp_port *port, struct ibp_qp *qp)
{
	if ((port->qpt_len + 1) * 2 > port->qpt_cap) {
		size_t cap = port->qpt_cap * 2;
		struct ibp_qp **t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < port->qpt_cap; i++)
			if (port->qpt[i])
				qpt_place(t, cap, port->qpt[i]);
		free(port->qpt);
		port->qpt = t;
		port->qpt_cap = cap;
	}
	qpt_place(port->qpt, port->qpt_cap, qp);
	port->qpt_len++;
	return 0;
}

/* Backward-shift deletion: no tombstones, so lookups stay short. */
static void qpt_remove(struct ibp_port *port, struct ibp_qp *qp)
{
	size_t mask = port->qpt_cap - 1, i = qpt_home(qp->qpn, port->qpt_cap);

	while (port->qpt[i] && port->qpt[i] != qp)
		i = (i + 1) & mask;
	if (!port->qpt[i])
		return;
	port->qpt[i] = NULL;
	port->qpt_len--;
	for (size_t j = (i + 1) & mask; port->qpt[j]; j = (j + 1) & mask) {
		size_t home = qpt_home(port->qpt[j]->qpn, port->qpt_cap);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			port->qpt[i] = port->qpt[j];
			port->qpt[j] = NULL;
			i = j;
		}
	}
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

static int verbs_open(const struct ibp_port_config *cfg, struct ibp_port **out)
{
	struct ibp_port *port = NULL;
	struct ibv_port_attr pa;
	int ret;

	if (!cfg || !cfg->device || !out || cfg->port == 0 || cfg->n_bufs == 0 ||
	    cfg->buf_size == 0 || cfg->buf_size > UINT32_MAX || cfg->n_bufs > UINT32_MAX / 2) {
		log_error("verbs: invalid port config (device, port >= 1, n_bufs and buf_size "
			  "are required)");
		return -EINVAL;
	}
	port = calloc(1, sizeof(*port));
	if (!port)
		return -ENOMEM;
	port->port_num = cfg->port;
	snprintf(port->name, sizeof(port->name), "%s:%u", cfg->device, cfg->port);
	pthread_mutex_init(&port->port_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&port->drained, &ca);
		pthread_condattr_destroy(&ca);
	}

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
	port->qpt_cap = 64;
	port->qpt = calloc(port->qpt_cap, sizeof(*port->qpt));
	if (!port->qpt) {
		ret = -ENOMEM;
		goto fail;
	}

	port->chan = ibv_create_comp_channel(port->ctx);
	if (!port->chan) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_comp_channel", port->name);
		goto fail;
	}
	port->cq =
	    ibv_create_cq(port->ctx, (int)(cfg->n_bufs + IBP_VERBS_CQ_SLACK), port, port->chan, 0);
	if (!port->cq) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_cq", port->name);
		goto fail;
	}
	ret = ibv_req_notify_cq(port->cq, 0);
	if (ret) {
		ret = -ret;
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_req_notify_cq", port->name);
		goto fail;
	}

	/* Both fds non-blocking, so arm() and next_event() never wait. */
	ret = set_nonblock(port->chan->fd);
	if (ret == 0)
		ret = set_nonblock(port->ctx->async_fd);
	if (ret < 0)
		goto fail;
	log_info("verbs: %s open: %u buffers of %zu bytes, CQ of %d", port->name, port->pool.n_bufs,
		 cfg->buf_size, port->cq->cqe);
	*out = port;
	return 0;

fail:
	verbs_close(port);
	return ret;
}

static void qp_free(struct ibp_qp *qp);
static void stash_forget(struct ibp_port *port, const struct ibp_qp *qp);

/* Tears down whatever open or the caller left: callers must have stopped the data
 * path of the port. QPs, SRQs and AHs still alive are destroyed here. */
static void verbs_close(struct ibp_port *port)
{
	int ret;

	if (!port)
		return;
	if (port->qpt) {
		for (size_t i = 0; i < port->qpt_cap; i++) {
			struct ibp_qp *qp = port->qpt[i];

			if (!qp)
				continue;
			/* No poller any more: flushing would only wait; destroy outright. */
			stash_forget(port, qp);
			ret = ibv_destroy_qp(qp->qp);
			if (ret)
				log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_qp %u", port->name,
					  qp->qpn);
			free(qp);
		}
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
	if (port->cq) {
		/* ibv_destroy_cq waits for every CQ event to be acked. */
		if (port->cq_events_unacked)
			ibv_ack_cq_events(port->cq, port->cq_events_unacked);
		ret = ibv_destroy_cq(port->cq);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_cq", port->name);
	}
	if (port->chan) {
		ret = ibv_destroy_comp_channel(port->chan);
		if (ret)
			log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_comp_channel", port->name);
	}
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
	free(port->qpt);
	pthread_cond_destroy(&port->drained);
	pthread_mutex_destroy(&port->port_lock);
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

static int verbs_create_srq(struct ibp_port *port, unsigned depth, struct ibp_srq **out)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = depth, .max_sge = 1 } };
	struct ibp_srq *srq;
	int ret;

	if (depth == 0 || depth > (unsigned)port->dev.max_srq_wr) {
		log_error("verbs: %s: SRQ depth %u outside 1..%d", port->name, depth,
			  port->dev.max_srq_wr);
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
	pthread_mutex_lock(&port->port_lock);
	for (unsigned i = 0; i < port->pool.n_bufs; i++) {
		struct vbuf *v = &port->vbufs[i];

		if (vb_state(v) == VB_SRQ && v->owner == srq)
			free_push(port, v);
	}
	pthread_mutex_unlock(&port->port_lock);
	for (struct ibp_srq **p = &port->srqs; *p; p = &(*p)->next) {
		if (*p == srq) {
			*p = srq->next;
			break;
		}
	}
	free(srq);
}

/* --- QPs --- */

static int modify(struct ibp_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	int ret = ibv_modify_qp(qp->qp, a, mask);

	if (ret) {
		log_errno(LOG_ERR, ret, "verbs: %s: QP %u to %s", qp->port->name, qp->qpn, what);
		return -ret;
	}
	qp->state = a->qp_state;
	return 0;
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

static int verbs_create_qp(struct ibp_port *port, const struct ibp_qp_init *init,
			   struct ibp_qp **out)
{
	struct ibv_qp_init_attr ia;
	struct ibp_qp *qp;
	bool rc = init->type == IBP_QPT_RC;
	unsigned max_wr = (unsigned)port->dev.max_qp_wr;
	int ret;

	/* One send slot more than asked for: the drain WR of destroy_qp. */
	if (init->send_depth == 0 || init->send_depth + 1 > max_wr ||
	    (!(rc && init->srq) && (init->recv_depth == 0 || init->recv_depth > max_wr)) ||
	    (init->type == IBP_QPT_UD && init->srq) || (init->srq && init->srq->port != port)) {
		log_error("verbs: %s: invalid QP request (depths %u/%u, device max %u)", port->name,
			  init->send_depth, init->recv_depth, max_wr);
		return -EINVAL;
	}
	qp = calloc(1, sizeof(*qp));
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

	memset(&ia, 0, sizeof(ia));
	ia.qp_context = qp;
	ia.send_cq = port->cq;
	ia.recv_cq = port->cq;
	ia.srq = qp->srq ? qp->srq->srq : NULL;
	ia.qp_type = rc ? IBV_QPT_RC : IBV_QPT_UD;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = init->send_depth + 1;
	ia.cap.max_recv_wr = qp->recv_depth;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = qp->srq ? 0 : 1;
	ia.cap.max_inline_data = IBP_VERBS_INLINE;
	qp->qp = ibv_create_qp(port->pd, &ia);
	if (!qp->qp) {
		/* Devices without (enough) inline support refuse the request: retry
		 * without inline sends, which are only an optimisation. */
		ia.cap.max_inline_data = 0;
		qp->qp = ibv_create_qp(port->pd, &ia);
	}
	if (!qp->qp) {
		ret = neg_errno(ENOMEM);
		log_errno(LOG_ERR, -ret, "verbs: %s: ibv_create_qp %s", port->name,
			  rc ? "RC" : "UD");
		free(qp);
		return ret;
	}
	qp->max_inline = ia.cap.max_inline_data;
	qp->qpn = qp->qp->qp_num;
	qp->state = IBV_QPS_RESET;

	if (rc) {
		ret = qp_to_init(qp);
		if (ret < 0)
			goto fail;
	}
	pthread_mutex_lock(&port->port_lock);
	ret = qpt_insert(port, qp);
	pthread_mutex_unlock(&port->port_lock);
	if (ret < 0)
		goto fail;
	*out = qp;
	return 0;
fail:
	qp_free(qp);
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

/* port_lock held. */
static bool qp_drained(const struct ibp_qp *qp)
{
	return qp->sq_out == 0 && qp->rq_out == 0 && (!qp->srq || qp->drain_seen);
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

/* Free a QP that was never posted to (create_qp failure path). */
static void qp_free(struct ibp_qp *qp)
{
	int ret = ibv_destroy_qp(qp->qp);

	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_qp %u", qp->port->name, qp->qpn);
	free(qp);
}

static bool translate_wc(struct ibp_port *port, const struct ibv_wc *wc, struct ibp_wc *out);

/* port_lock held: poll the CQ for destroy_qp. Dying QPs' completions are consumed as
 * poll consumes them; live QPs' are kept for poll (while there is room). */
static void reap_locked(struct ibp_port *port)
{
	while (port->wc_stash_len + IBP_VERBS_BATCH <= IBP_VERBS_WC_STASH) {
		struct ibv_wc wc[IBP_VERBS_BATCH];
		int got = ibv_poll_cq(port->cq, IBP_VERBS_BATCH, wc);

		for (int i = 0; i < got; i++)
			if (translate_wc(port, &wc[i], &port->wc_stash[port->wc_stash_len]))
				port->wc_stash_len++;
		if (got < IBP_VERBS_BATCH)
			break;
	}
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

	pthread_mutex_lock(&port->port_lock);
	qp->dying = true; /* from now on its completions stay inside the backend */
	pthread_mutex_unlock(&port->port_lock);

	/* A QP in RESET holds no WRs (and RESET -> ERR is not a valid transition). */
	if (qp->state != IBV_QPS_RESET) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		flushing = modify(qp, &a, IBV_QP_STATE, "ERR") == 0;
	}
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
	pthread_mutex_lock(&port->port_lock);
	while (flushing && !qp_drained(qp)) {
		struct timespec slice;

		deadline_in(&slice, IBP_VERBS_REAP_MS);
		if (pthread_cond_timedwait(&port->drained, &port->port_lock, &slice) != ETIMEDOUT)
			continue;
		if (ms_until(&dl) == 0) {
			log_warning("verbs: %s: QP %u: flushed completions not reaped in %u ms",
				    port->name, qp->qpn, IBP_VERBS_DRAIN_MS);
			break;
		}
		/* Nobody reaped for a while: the port's poller may be gone already (a link
		 * taken down leaves the engine before its QPs are destroyed). Reap here. */
		reap_locked(port);
	}
	pthread_mutex_unlock(&port->port_lock);

	stash_forget(port, qp);
	ret = ibv_destroy_qp(qp->qp);
	if (ret)
		log_errno(LOG_ERR, ret, "verbs: %s: ibv_destroy_qp %u", port->name, qp->qpn);

	/* Buffers whose completions never came (timeout, or a provider that cleans the
	 * CQ on destroy) return to the pool; their late completions, if any, fail the
	 * generation check in poll. */
	pthread_mutex_lock(&port->port_lock);
	for (unsigned i = 0; i < port->pool.n_bufs; i++) {
		struct vbuf *v = &port->vbufs[i];
		enum vbuf_state s = vb_state(v);

		if ((s == VB_SEND || s == VB_RECV) && v->owner == qp)
			free_push(port, v);
	}
	/* Its completions kept for poll (from another QP's destroy) go too. */
	unsigned kept = 0;

	for (unsigned i = 0; i < port->wc_stash_len; i++) {
		struct ibp_wc *w = &port->wc_stash[i];

		if (w->qp == qp)
			free_push(port, vbuf_of(port, w->buf));
		else
			port->wc_stash[kept++] = *w;
	}
	port->wc_stash_len = kept;
	qpt_remove(port, qp);
	pthread_mutex_unlock(&port->port_lock);
	free(qp);
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

/* Post sends[0..n) (all on one QP, validated and marked VB_SEND): one chained
 * ibv_post_send. Returns the
 * number accepted; *err gets the provider's error when fewer. port_lock held. */
static unsigned post_send_run(struct ibp_qp *qp, struct ibp_send *sends, unsigned n, int *err)
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
	}
	ret = ibv_post_send(qp->qp, wr, &bad);
	if (ret == 0) {
		qp->sq_out += n;
		return n;
	}
	*err = -ret;
	/* bad and everything after it were not posted. */
	unsigned ok = bad ? (unsigned)(bad - wr) : 0;

	for (i = ok; i < n; i++)
		vb_set(&port->vbufs[sends[i].buf->id], VB_OWNED);
	qp->sq_out += ok;
	return ok;
}

static bool send_valid(struct ibp_port *port, const struct ibp_send *s)
{
	struct vbuf *v = vbuf_of(port, s->buf);

	return s->qp && s->qp->port == port && !s->qp->dying && v && vb_state(v) == VB_OWNED &&
	       s->buf->len <= s->buf->cap && (s->qp->type != IBP_QPT_UD || s->ah);
}

static int verbs_post_send(struct ibp_send *sends, unsigned n)
{
	struct ibp_port *port;
	unsigned done = 0;
	int err = 0;

	if (n == 0)
		return 0;
	if (!sends[0].qp)
		return -EINVAL;
	port = sends[0].qp->port;
	pthread_mutex_lock(&port->port_lock);
	while (done < n && !err) {
		struct ibp_qp *qp = sends[done].qp;
		unsigned run = 0;

		/* A run: consecutive valid sends on the same QP, within its depth.
		 * Each is marked posted as it is accepted, so a buffer listed twice fails
		 * the second time. */
		while (done + run < n && run < IBP_VERBS_BATCH && sends[done + run].qp == qp) {
			if (!send_valid(port, &sends[done + run])) {
				err = -EINVAL;
				break;
			}
			if (qp->sq_out + run >= qp->send_depth) {
				err = -ENOMEM; /* send queue full: reap completions first */
				break;
			}
			vb_set(&port->vbufs[sends[done + run].buf->id], VB_SEND);
			run++;
		}
		if (run == 0)
			break;
		int run_err = 0;
		unsigned ok = post_send_run(qp, &sends[done], run, &run_err);

		done += ok;
		if (ok < run)
			err = run_err;
	}
	pthread_mutex_unlock(&port->port_lock);
	return done ? (int)done : err;
}

/* Fill wr[]/sge[] for receive buffers and mark them posted; port_lock held. */
static int recv_prepare(struct ibp_port *port, struct ibp_buf **bufs, unsigned n, void *owner,
			enum vbuf_state state, struct ibv_recv_wr *wr, struct ibv_sge *sge)
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
		vb_set(v, state);
	}
	return 0;
}

/* Shared by post_recv and post_srq_recv: chains of at most IBP_VERBS_BATCH. */
static int post_recvs(struct ibp_port *port, struct ibp_qp *qp, struct ibp_srq *srq,
		      struct ibp_buf **bufs, unsigned n)
{
	struct ibv_recv_wr wr[IBP_VERBS_BATCH], *bad = NULL;
	struct ibv_sge sge[IBP_VERBS_BATCH];
	unsigned done = 0;
	int err = 0;

	pthread_mutex_lock(&port->port_lock);
	while (done < n) {
		unsigned run = n - done < IBP_VERBS_BATCH ? n - done : IBP_VERBS_BATCH;
		int ret;

		if (qp) {
			if (qp->dying) {
				err = -EINVAL;
				break;
			}
			if (qp->rq_out + run > qp->recv_depth)
				run = qp->recv_depth - qp->rq_out;
			if (run == 0) {
				err = -ENOMEM;
				break;
			}
		}
		err = recv_prepare(port, &bufs[done], run, qp ? (void *)qp : (void *)srq,
				   qp ? VB_RECV : VB_SRQ, wr, sge);
		if (err)
			break;
		ret = qp ? ibv_post_recv(qp->qp, wr, &bad) : ibv_post_srq_recv(srq->srq, wr, &bad);
		unsigned ok = ret == 0 ? run : bad ? (unsigned)(bad - wr) : 0;

		for (unsigned i = ok; i < run; i++)
			vb_set(&port->vbufs[bufs[done + i]->id], VB_OWNED);
		if (qp)
			qp->rq_out += ok;
		done += ok;
		if (ret) {
			err = -ret;
			break;
		}
	}
	pthread_mutex_unlock(&port->port_lock);
	return done ? (int)done : err;
}

static int verbs_post_recv(struct ibp_qp *qp, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	if (qp->srq)
		return -EINVAL; /* receives of an SRQ QP go to the SRQ */
	return post_recvs(qp->port, qp, NULL, bufs, n);
}

static int verbs_post_srq_recv(struct ibp_srq *srq, struct ibp_buf **bufs, unsigned n)
{
	if (n == 0)
		return 0;
	return post_recvs(srq->port, NULL, srq, bufs, n);
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
 * One ibv_wc to at most one ibp_wc; returns false when the completion stays inside
 * the backend (drain marker, stale, or a QP being destroyed). port_lock held. Only
 * wr_id, status, qp_num and vendor_err are valid in a failed ibv_wc, so the kind and
 * the QP come from our own record of what was posted.
 */
static bool translate_wc(struct ibp_port *port, const struct ibv_wc *wc, struct ibp_wc *out)
{
	struct ibp_qp *qp;
	struct vbuf *v;
	uint32_t idx = (uint32_t)wc->wr_id;
	enum vbuf_state s;

	if (wc->wr_id & WRID_DRAIN) {
		qp = qpt_find(port, wc->qp_num);
		if (qp) {
			qp->drain_seen = true;
			pthread_cond_broadcast(&port->drained);
		}
		return false;
	}
	v = idx < port->pool.n_bufs ? &port->vbufs[idx] : NULL;
	s = v ? vb_state(v) : VB_FREE;
	if (!v || v->gen != (uint32_t)(wc->wr_id >> 32) || s < VB_SEND) {
		port->stale_wcs++;
		return false;
	}
	if (s == VB_SEND || s == VB_RECV) {
		qp = v->owner;
		if (s == VB_SEND)
			qp->sq_out--;
		else
			qp->rq_out--;
	} else {
		qp = qpt_find(port, wc->qp_num);
	}
	if (!qp || qp->dying) {
		free_push(port, v);
		if (qp && qp_drained(qp))
			pthread_cond_broadcast(&port->drained);
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

static int verbs_poll(struct ibp_port *port, struct ibp_wc *wcs, unsigned max)
{
	struct ibv_wc wc[IBP_VERBS_BATCH];
	unsigned n = 0;
	int ret = 0;

	pthread_mutex_lock(&port->port_lock);
	if (port->wc_stash_len) {
		/* reaped by destroy_qp: theirs first, in order */
		unsigned k = port->wc_stash_len < max ? port->wc_stash_len : max;

		memcpy(wcs, port->wc_stash, k * sizeof(*wcs));
		memmove(port->wc_stash, port->wc_stash + k,
			(port->wc_stash_len - k) * sizeof(*wcs));
		port->wc_stash_len -= k;
		n = k;
	}
	while (n < max) {
		int want = (int)(max - n < IBP_VERBS_BATCH ? max - n : IBP_VERBS_BATCH);
		int got = ibv_poll_cq(port->cq, want, wc);

		if (got < 0) {
			ret = -EIO;
			break;
		}
		for (int i = 0; i < got; i++)
			if (translate_wc(port, &wc[i], &wcs[n]))
				n++;
		if (got < want)
			break;
	}
	pthread_mutex_unlock(&port->port_lock);
	return n ? (int)n : ret;
}

/* --- events --- */

static int verbs_cq_fd(struct ibp_port *port)
{
	return port->chan->fd;
}

static int verbs_async_fd(struct ibp_port *port)
{
	return port->ctx->async_fd;
}

/* Ack pending completion events (batched: each ack takes the CQ's mutex in libibverbs)
 * and re-request notification. Then poll once more before sleeping: completions that
 * arrived before the request raise no event. */
static int verbs_arm(struct ibp_port *port)
{
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret;

	while (ibv_get_cq_event(port->chan, &cq, &cq_ctx) == 0) {
		if (++port->cq_events_unacked >= IBP_VERBS_ACK_MAX) {
			ibv_ack_cq_events(port->cq, port->cq_events_unacked);
			port->cq_events_unacked = 0;
		}
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		log_errno(LOG_ERR, errno, "verbs: %s: ibv_get_cq_event", port->name);
	ret = ibv_req_notify_cq(port->cq, 0);
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
	.create_srq = verbs_create_srq,
	.destroy_srq = verbs_destroy_srq,
	.create_qp = verbs_create_qp,
	.qp_ready = verbs_qp_ready,
	.destroy_qp = verbs_destroy_qp,
	.qp_num = verbs_qp_num,
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
