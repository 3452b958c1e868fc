/*
 * libibverbs2sim, part one: devices, contexts and the simulated HCA's progress thread,
 * port identity and port events, PD, MR, CQ, completion channel, async events
 * (docs/verbs-sim.md; the objects are in vsim_pvt.h).
 *
 * The device list is the node this process runs as: under umad2sim, the node SIM_HOST
 * names, read through libibumad (sim/verbs/sim_node); the device is named after the
 * node ("ibhost1", "gw1"), so a rack config's `device` is the node's name. Each context
 * connects each of the device's ports to the fabric (HELLO with the identity OpenSM gave
 * it) when it first uses it, and runs two
 * threads, the HCA's firmware: the progress thread receives packets and runs the RC
 * timers; the port watcher re-reads the ports every IBVSIM_PORT_MS (SMPs, which may wait
 * for umad2sim: never on the packets' way) to raise the events an HCA raises when the SM
 * changes them.
 *
 * Faults on demand (vsim.h, docs/verbs-sim.md "Faults"): IBVSIM_FAULT_REG_MR,
 * IBVSIM_FAULT_CQ_DEPTH and IBVSIM_FAULT_MODIFY_QP, read by ibv_reg_mr, ibv_create_cq
 * and ibv_modify_qp at each call, and a QP or WQ put in error (vsim_test_fault, or the
 * fault file the port watchers look for), so that the verbs backend's error paths can
 * be driven; nothing else looks at them.
 *
 * Threads: the program's, in each verb, the progress thread and the port watcher;
 * ctx->lock serialises them, but ibv_poll_cq and ibv_req_notify_cq take only the CQ's
 * own lock (vsim_pvt.h, Threads).
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sim/verbs/vsim_pvt.h"
#include "lib/log.h"

#define RX_BUDGET 64
/* Slots of each shared ring per port: 1024 x 8 KiB each way (the memory is touched only
 * as far as packets fill the slots). A real IB link never drops for want of room (its
 * sender waits for credits); the fabric drops a packet for a full ring (rx_overflow), so
 * the rings are deep: with 256 slots one TCP stream through the gateway lost 8-12k
 * packets in 12 s there, with 1024 a few hundred. */
#define VSIM_RING_SLOTS 1024

/* The devices: one per process from libibumad, or the tests' nodes. */
static struct {
	pthread_mutex_t lock;
	bool init;
	struct simnode node;
	bool node_open;
	unsigned n_dev;
	struct ibv_device dev[VSIM_TEST_NODES];
	unsigned n_ports[VSIM_TEST_NODES];
	bool testing;
	struct vsim_test_node test[VSIM_TEST_NODES];
	struct vsim_ctx *ctxs; /* open contexts */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

uint64_t vsim_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int set_errno(int err)
{
	errno = err;
	return err;
}

/* Verbs objects a context still held when it was closed, over the process's life. */
static atomic_uint objects_leaked;

unsigned vsim_test_objects_leaked(void)
{
	return atomic_load(&objects_leaked);
}

/* UD datagrams dropped for want of a receive WQE, over the process's life. */
static atomic_ulong rx_drops;

void vsim_count_rx_drop(void)
{
	atomic_fetch_add_explicit(&rx_drops, 1, memory_order_relaxed);
}

unsigned long vsim_test_rx_drops(void)
{
	return atomic_load(&rx_drops);
}

bool vsim_rss_enabled(void)
{
	const char *s = getenv("IBVSIM_RSS");

	return !s || strcmp(s, "0") != 0;
}

int vsim_rss_qp_modify_errno(void)
{
	const char *s = getenv("IBVSIM_RSS_QP_MODIFY");

	if (s && strcmp(s, "1") == 0)
		return 0;
	if (s && strcmp(s, "enosys") == 0)
		return ENOSYS; /* rdma-core before v28 */
	return EOPNOTSUPP;
}

unsigned vsim_fault(const char *name)
{
	const char *s = getenv(name);
	long v = s ? strtol(s, NULL, 10) : 0;

	return v > 0 && v < 1 << 30 ? (unsigned)v : 0;
}

void vsim_test_set_nodes(const struct vsim_test_node *nodes, unsigned n)
{
	pthread_mutex_lock(&g.lock);
	if (n > VSIM_TEST_NODES)
		n = VSIM_TEST_NODES;
	if (g.testing && g.init && n == g.n_dev) {
		memcpy(g.test, nodes, n * sizeof(*nodes)); /* a change seen at the next read */
	} else {
		g.testing = n > 0;
		g.init = false;
		memcpy(g.test, nodes, n * sizeof(*nodes));
		g.n_dev = n;
	}
	pthread_mutex_unlock(&g.lock);
}

static void dev_setup(unsigned i, const char *name, unsigned n_ports)
{
	struct ibv_device *d = &g.dev[i];

	memset(d, 0, sizeof(*d));
	d->node_type = IBV_NODE_CA;
	d->transport_type = IBV_TRANSPORT_IB;
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->dev_name, sizeof(d->dev_name), "uverbs%u", i);
	snprintf(d->dev_path, sizeof(d->dev_path), "/sys/class/infiniband_verbs/uverbs%u", i);
	snprintf(d->ibdev_path, sizeof(d->ibdev_path), "/sys/class/infiniband/%s", name);
	g.n_ports[i] = n_ports < 1 ? 1 : n_ports > VSIM_MAX_PORTS ? VSIM_MAX_PORTS : n_ports;
}

/* g.lock held. */
static void discover(void)
{
	if (g.init)
		return;
	g.init = true;
	if (g.testing) {
		for (unsigned i = 0; i < g.n_dev; i++)
			dev_setup(i, g.test[i].name, g.test[i].n_ports);
		return;
	}
	g.n_dev = 0;
	if (!g.node_open) {
		if (simnode_open(&g.node, 1) < 0) {
			simnode_close(&g.node);
			log_error("libibverbs2sim: no simulated IB port (is this process on a rack "
				  "node, under libumad2sim?): no RDMA device");
			return;
		}
		g.node_open = true;
	}
	dev_setup(0, g.node.name, g.node.num_ports);
	g.n_dev = 1;
}

/* A port's identity and state now (SMPs, or the tests' description). No ctx->lock. */
static int read_port(unsigned node, uint8_t num, struct simnode_port *out)
{
	int ret = 0;

	pthread_mutex_lock(&g.lock);
	if (g.testing) {
		if (node < g.n_dev && num >= 1 && num <= g.test[node].n_ports)
			*out = g.test[node].port[num - 1];
		else
			ret = -ENODEV;
		pthread_mutex_unlock(&g.lock);
		return ret;
	}
	pthread_mutex_unlock(&g.lock);
	return simnode_read_port(&g.node, num, out);
}

struct vsim_port *vsim_port_on_fabric(uint8_t num, struct vsim_ctx **out)
{
	pthread_mutex_lock(&g.lock);
	for (struct vsim_ctx *ctx = g.ctxs; ctx; ctx = ctx->next_ctx) {
		if (num < 1 || num > ctx->n_ports)
			continue;
		pthread_mutex_lock(&ctx->lock);
		if (ctx->port[num - 1].fab) {
			pthread_mutex_unlock(&g.lock);
			*out = ctx;
			return &ctx->port[num - 1];
		}
		pthread_mutex_unlock(&ctx->lock);
	}
	pthread_mutex_unlock(&g.lock);
	return NULL;
}

unsigned vsim_node_ports(void)
{
	unsigned n;

	pthread_mutex_lock(&g.lock);
	n = g.node_open ? g.node.num_ports : 0;
	pthread_mutex_unlock(&g.lock);
	return n;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;

	pthread_mutex_lock(&g.lock);
	discover();
	list = calloc(g.n_dev + 1, sizeof(*list));
	if (list) {
		for (unsigned i = 0; i < g.n_dev; i++)
			list[i] = &g.dev[i];
		if (num_devices)
			*num_devices = (int)g.n_dev;
	}
	pthread_mutex_unlock(&g.lock);
	if (!list)
		errno = ENOMEM;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

/* --- wakeups, events, completions (ctx->lock) ------------------------------------------ */

void vsim_wake(struct vsim_ctx *ctx)
{
	uint64_t one = 1;

	if (write(ctx->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_errno(LOG_ERR, errno, "libibverbs2sim: eventfd write");
}

static void fd_count(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0)
		log_errno(LOG_ERR, errno, "libibverbs2sim: eventfd write");
}

void vsim_event(struct vsim_ctx *ctx, enum ibv_event_type type, void *elem, uint8_t port_num)
{
	struct ibv_async_event *e;

	if (ctx->ev_len == VSIM_EVQ) {
		/* An HCA's event queue overflows too; the oldest is lost, loudly. */
		log_error("libibverbs2sim: async event queue full: event %s lost",
			  ibv_event_type_str(type));
		return;
	}
	e = &ctx->evq[(ctx->ev_head + ctx->ev_len++) % VSIM_EVQ];
	memset(e, 0, sizeof(*e));
	e->event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		e->element.cq = elem;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		e->element.qp = elem;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		e->element.srq = elem;
		break;
	case IBV_EVENT_WQ_FATAL:
		e->element.wq = elem;
		break;
	default:
		e->element.port_num = port_num;
		break;
	}
	fd_count(ctx->vctx.context.async_fd);
}

void vsim_event_forget(struct vsim_ctx *ctx, const struct ibv_qp *qp, const struct ibv_cq *cq)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < ctx->ev_len; i++) {
		struct ibv_async_event *e = &ctx->evq[(ctx->ev_head + i) % VSIM_EVQ];
		bool about_qp = e->event_type == IBV_EVENT_QP_FATAL ||
				e->event_type == IBV_EVENT_QP_LAST_WQE_REACHED ||
				e->event_type == IBV_EVENT_QP_REQ_ERR ||
				e->event_type == IBV_EVENT_QP_ACCESS_ERR;
		uint64_t v;

		if ((qp && about_qp && e->element.qp == qp) ||
		    (cq && e->event_type == IBV_EVENT_CQ_ERR && e->element.cq == cq)) {
			/* one count less on the fd (it has one per queued event: no wait) */
			if (read(ctx->vctx.context.async_fd, &v, sizeof(v)) < 0)
				log_errno(LOG_ERR, errno, "libibverbs2sim: eventfd read");
			continue;
		}
		ctx->evq[(ctx->ev_head + kept++) % VSIM_EVQ] = *e;
	}
	ctx->ev_len = kept;
}

void vsim_event_forget_wq(struct vsim_ctx *ctx, const struct ibv_wq *wq)
{
	unsigned kept = 0;

	for (unsigned i = 0; i < ctx->ev_len; i++) {
		struct ibv_async_event *e = &ctx->evq[(ctx->ev_head + i) % VSIM_EVQ];
		uint64_t v;

		if (e->event_type == IBV_EVENT_WQ_FATAL && e->element.wq == wq) {
			if (read(ctx->vctx.context.async_fd, &v, sizeof(v)) < 0)
				log_errno(LOG_ERR, errno, "libibverbs2sim: eventfd read");
			continue;
		}
		ctx->evq[(ctx->ev_head + kept++) % VSIM_EVQ] = *e;
	}
	ctx->ev_len = kept;
}

bool vsim_cq_add(struct vsim_ctx *ctx, struct vsim_cq *cq, const struct ibv_wc *wc,
		 struct vsim_qp *qp)
{
	bool fire;

	pthread_mutex_lock(&cq->lock);
	if (cq->overrun || cq->len == cq->cap) {
		pthread_mutex_unlock(&cq->lock);
		/* CQ overrun (IBA 11.4.2.1: an affiliated asynchronous error of the CQ; the
		 * completion is lost). mlx5 raises IBV_EVENT_CQ_ERR once and the CQ stays in
		 * error; a QP whose completion was lost is of no use any more: it goes to
		 * ERR with QP_FATAL, in the progress thread (we may be inside its queues). */
		if (!cq->overrun) {
			cq->overrun = true;
			vsim_event(ctx, IBV_EVENT_CQ_ERR, &cq->cq, 0);
			log_error("libibverbs2sim: CQ overrun (%u entries): completions lost",
				  cq->cap);
		}
		if (qp && !qp->fatal) {
			qp->fatal = true;
			ctx->fatal_pending = true;
			vsim_wake(ctx);
		}
		return false;
	}
	cq->ring[(cq->head + cq->len++) % cq->cap] = *wc;
	/* One event per arm: the next completion (solicited_only: the next error one, as
	 * the shim never sets the solicited bit) disarms the CQ and queues one event. */
	fire = cq->armed && (!cq->solicited_only || wc->status != IBV_WC_SUCCESS);
	if (fire)
		cq->armed = false;
	pthread_mutex_unlock(&cq->lock);
	if (fire) {
		struct vsim_chan *ch = (struct vsim_chan *)cq->cq.channel;

		if (ch->len == ch->cap) {
			unsigned cap = ch->cap ? ch->cap * 2 : 16;
			struct ibv_cq **q = calloc(cap, sizeof(*q));

			if (!q) {
				log_error("libibverbs2sim: out of memory: a CQ event is lost");
				return true;
			}
			for (unsigned i = 0; i < ch->len; i++)
				q[i] = ch->q[(ch->head + i) % ch->cap];
			free(ch->q);
			ch->q = q;
			ch->cap = cap;
			ch->head = 0;
		}
		ch->q[(ch->head + ch->len++) % ch->cap] = &cq->cq;
		fd_count(ch->ch.fd);
	}
	return true;
}

void vsim_cq_remove(struct vsim_cq *cq, uint32_t qp_num)
{
	unsigned kept = 0;

	pthread_mutex_lock(&cq->lock);
	for (unsigned i = 0; i < cq->len; i++) {
		struct ibv_wc *wc = &cq->ring[(cq->head + i) % cq->cap];

		if (wc->qp_num != qp_num)
			cq->ring[(cq->head + kept++) % cq->cap] = *wc;
	}
	cq->len = kept;
	pthread_mutex_unlock(&cq->lock);
}

void vsim_cq_clean(struct vsim_ctx *ctx, struct vsim_qp *qp)
{
	(void)ctx;
	if (qp->qp.send_cq)
		vsim_cq_remove((struct vsim_cq *)qp->qp.send_cq, qp->qp.qp_num);
	if (qp->qp.recv_cq && qp->qp.recv_cq != qp->qp.send_cq)
		vsim_cq_remove((struct vsim_cq *)qp->qp.recv_cq, qp->qp.qp_num);
}

/* --- ports: identity, fabric connection, events --------------------------------------- */

static const char *fabric_path(char *buf, size_t len)
{
	const char *s = getenv("IBVSIM_SOCKET");
	const char *state = getenv("IBGW_RACK_STATE");

	if (s && *s)
		return s;
	if (!state || !*state)
		return NULL;
	snprintf(buf, len, "%s/fabric.sock", state);
	return buf;
}

/* Connect a port whose identity has a LID (ctx->lock held, or before the thread). */
static void port_connect(struct vsim_ctx *ctx, struct vsim_port *p)
{
	char buf[512];
	const char *path = fabric_path(buf, sizeof(buf));
	struct epoll_event ev = { .events = EPOLLIN };
	int ret;

	if (p->fab || !p->have_sp || p->sp.info.lid == 0 || p->sp.info.lid >= IB_LID_MC_FIRST)
		return;
	if (!path) {
		log_error("libibverbs2sim: %s port %u: no fabric socket (IBVSIM_SOCKET or "
			  "IBGW_RACK_STATE)",
			  p->sp.info.name, p->num);
		return;
	}
	ret = simfab_client_connect(path, &p->fab);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret,
			  "libibverbs2sim: %s port %u: cannot reach the fabric at %s",
			  p->sp.info.name, p->num, path);
		return;
	}
	ret = simfab_client_hello(p->fab, &p->sp.info);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "libibverbs2sim: %s port %u: HELLO refused: %s",
			  p->sp.info.name, p->num, simfab_client_errmsg(p->fab));
		simfab_client_close(p->fab);
		p->fab = NULL;
		return;
	}
	/* Packets through shared rings (lib/ib_simfab.h, RING) unless IBVSIM_RING=0: no
	 * system call per packet, one wake-up per burst. A fabric that refuses them
	 * leaves the port on its socket. */
	if (!getenv("IBVSIM_RING") || strcmp(getenv("IBVSIM_RING"), "0") != 0) {
		ret = simfab_client_ring(p->fab, VSIM_RING_SLOTS);
		if (ret < 0)
			log_warning("libibverbs2sim: %s port %u: no shared rings (%s): packets "
				    "go through the socket",
				    p->sp.info.name, p->num, simfab_client_errmsg(p->fab));
	}
	p->link_up = true;
	ev.data.u32 = p->num;
	if (ctx->epfd >= 0 &&
	    epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, simfab_client_fd(p->fab), &ev) < 0)
		log_errno(LOG_ERR, errno, "libibverbs2sim: epoll_ctl");
}

static bool port_is_active(const struct vsim_port *p)
{
	return p->fab && p->link_up && p->sp.state == IBV_PORT_ACTIVE;
}

/* A context connects a port to the fabric when it first uses it (ibv_query_port, a QP),
 * not at open: the fabric takes one connection per port, and a process may open one
 * context per port it uses (the verbs backend does: a link moved to its backup port
 * opens the other port's context while the first is still open). Two contexts using
 * one port is what the simulation cannot do (docs/verbs-sim.md). */
void vsim_port_claim(struct vsim_ctx *ctx, struct vsim_port *p)
{
	if (p->claimed && p->fab)
		return;
	p->claimed = true;
	port_connect(ctx, p);
	p->active = port_is_active(p);
}

/* A fresh read of a port compared with the last (ctx->lock): tell the fabric, raise
 * the events an HCA raises (it learns them from the SM's Sets). */
static void port_update(struct vsim_ctx *ctx, struct vsim_port *p, const struct simnode_port *now)
{
	struct simfab_port_info *o = &p->sp.info;
	const struct simfab_port_info *n = &now->info;
	bool lid = n->lid != o->lid || n->lmc != o->lmc;
	bool sm = n->sm_lid != o->sm_lid;
	bool pkey = n->n_pkeys != o->n_pkeys || memcmp(n->pkeys, o->pkeys, sizeof(n->pkeys)) != 0;
	bool rereg = now->client_rereg && !p->rereg;
	bool changed = memcmp(n, o, sizeof(*n)) != 0;

	p->rereg = now->client_rereg;
	p->sp = *now;
	if (!p->fab) {
		if (p->claimed)
			port_connect(ctx, p);
	} else if (changed && n->lid != 0) {
		int ret, tries = 0;

		do
			ret = simfab_client_port_update(p->fab, n);
		while (vsim_ctl_again(p, ret, &tries));
		if (ret < 0)
			log_errno(LOG_ERR, -ret, "libibverbs2sim: %s port %u: PORT_UPDATE: %s",
				  n->name, p->num, simfab_client_errmsg(p->fab));
		vsim_wake(ctx); /* packets may be queued inside the client */
	}
	if (lid)
		vsim_event(ctx, IBV_EVENT_LID_CHANGE, NULL, p->num);
	if (pkey)
		vsim_event(ctx, IBV_EVENT_PKEY_CHANGE, NULL, p->num);
	if (sm)
		vsim_event(ctx, IBV_EVENT_SM_CHANGE, NULL, p->num);
	if (rereg)
		vsim_event(ctx, IBV_EVENT_CLIENT_REREGISTER, NULL, p->num);
	if (port_is_active(p) != p->active) {
		p->active = !p->active;
		vsim_event(ctx, p->active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR, NULL,
			   p->num);
	}
}

/* Re-read every port (SMPs without the lock), then compare under it. */
static int ports_check(struct vsim_ctx *ctx, uint8_t only)
{
	int ret = 0;

	for (unsigned i = 0; i < ctx->n_ports; i++) {
		struct simnode_port now;
		struct vsim_port *p = &ctx->port[i];
		int r;

		if (only && p->num != only)
			continue;
		r = read_port(ctx->node, p->num, &now);
		if (r < 0) {
			ret = r;
			continue;
		}
		pthread_mutex_lock(&ctx->lock);
		if (p->have_sp)
			port_update(ctx, p, &now);
		pthread_mutex_unlock(&ctx->lock);
	}
	return ret;
}

bool vsim_ctl_again(struct vsim_port *port, int ret, int *tries)
{
	struct pollfd pfd = { .fd = simfab_client_fd(port->fab), .events = POLLOUT };

	if (ret != -EAGAIN || ++*tries > 5)
		return false;
	return poll(&pfd, 1, 1000) >= 0;
}

int vsim_pkey_index_valid(const struct vsim_port *port, uint16_t index)
{
	return index < VSIM_PKEY_TBL && port->have_sp;
}

/* --- the progress thread ---------------------------------------------------------------- */

/* Returns true when the budget ran out before the port had nothing more: the ring has
 * no level-triggered readiness (the fabric kicks only a consumer that found it empty),
 * so the caller must come back without sleeping. */
static bool rx_port(struct vsim_ctx *ctx, struct vsim_port *p, uint64_t now)
{
	for (unsigned i = 0; i < RX_BUDGET; i++) {
		struct simfab_event ev;
		int ret;

		if (!p->fab)
			return false;
		ret = simfab_client_recv(p->fab, &ev, 0);
		if (ret == -EAGAIN)
			return false;
		if (ret == -ECONNRESET) {
			log_error("libibverbs2sim: %s port %u: the fabric closed the connection",
				  p->sp.info.name, p->num);
			p->link_up = false;
			if (p->active) {
				p->active = false;
				vsim_event(ctx, IBV_EVENT_PORT_ERR, NULL, p->num);
			}
			return false;
		}
		if (ret < 0)
			continue;
		if (ev.type == SIMFAB_PORT_STATE) {
			p->link_up = ev.port_state == SIMFAB_PORT_ACTIVE;
			if (port_is_active(p) != p->active) {
				p->active = !p->active;
				vsim_event(ctx,
					   p->active ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR,
					   NULL, p->num);
			}
			continue;
		}
		vsim_qp_rx(ctx, p, ev.qpn, ev.data, ev.len, now);
	}
	return true;
}

static unsigned port_ms(void)
{
	const char *s = getenv("IBVSIM_PORT_MS");
	long v = s ? strtol(s, NULL, 10) : 500;

	return v < 10 ? 10 : v > 60000 ? 60000 : (unsigned)v;
}

/* Hold back (or send) the KICKs of every connected port. ctx->lock held. */
static void cork_ports(struct vsim_ctx *ctx, bool cork)
{
	for (unsigned i = 0; i < ctx->n_ports; i++) {
		struct simfab_client *fab = ctx->port[i].fab;

		if (!fab)
			continue;
		if (cork)
			simfab_client_cork(fab);
		else
			simfab_client_uncork(fab);
	}
}

static void *progress(void *arg)
{
	struct vsim_ctx *ctx = arg;
	bool more = false;  /* a port's budget ran out: receive again at once */
	uint64_t ud_dl = 0; /* UD sends wait for room in a ring: try again then */

	for (;;) {
		struct epoll_event evs[VSIM_MAX_PORTS + 1];
		uint64_t now = vsim_now_ns(), dl, v;
		bool work = more;
		int timeout, n;

		pthread_mutex_lock(&ctx->lock);
		if (ctx->stop) {
			pthread_mutex_unlock(&ctx->lock);
			break;
		}
		dl = vsim_rc_deadline(ctx, &work);
		if (ud_dl && (!dl || ud_dl < dl))
			dl = ud_dl;
		for (unsigned i = 0; i < ctx->n_ports; i++) {
			struct vsim_port *p = &ctx->port[i];

			if (p->fab && p->tx_blocked != p->out_armed) {
				struct epoll_event ev = { .events = EPOLLIN |
								    (p->tx_blocked ? EPOLLOUT : 0u),
							  .data.u32 = p->num };

				if (epoll_ctl(ctx->epfd, EPOLL_CTL_MOD, simfab_client_fd(p->fab),
					      &ev) == 0)
					p->out_armed = p->tx_blocked;
			}
		}
		if (!dl)
			dl = now + 1000000000u; /* nothing due: wake now and then */
		ctx->sleep_until = work ? 0 : dl;
		pthread_mutex_unlock(&ctx->lock);
		timeout = work ? 0 : dl <= now ? 0 : (int)((dl - now + 999999) / 1000000);
		n = epoll_wait(ctx->epfd, evs, VSIM_MAX_PORTS + 1, timeout);
		if (n < 0 && errno != EINTR)
			log_errno(LOG_ERR, errno, "libibverbs2sim: epoll_wait");
		while (read(ctx->wake_fd, &v, sizeof(v)) == sizeof(v))
			;
		now = vsim_now_ns();
		pthread_mutex_lock(&ctx->lock);
		ctx->sleep_until = 0;
		more = false;
		/* What this round sends (RC ACKs and data, UD retries) wakes the fabric once
		 * per port, at the end. */
		cork_ports(ctx, true);
		for (unsigned i = 0; i < ctx->n_ports; i++) {
			ctx->port[i].tx_blocked = false;
			more |= rx_port(ctx, &ctx->port[i], now);
		}
		vsim_rc_service(ctx, now);
		ud_dl = vsim_ud_service(ctx, now);
		if (ctx->fatal_pending)
			vsim_qp_fatal_all(ctx);
		cork_ports(ctx, false);
		pthread_mutex_unlock(&ctx->lock);
	}
	return NULL;
}

/* A fault on demand in every open context of the process whose device is node (NULL:
 * any), the first that has QP qpn (vsim_fault_qp). g.lock held. */
static int fault_apply(const char *node, uint32_t qpn, unsigned index, bool wq)
{
	int ret = -ENOENT;

	for (struct vsim_ctx *ctx = g.ctxs; ctx && ret == -ENOENT; ctx = ctx->next_ctx) {
		if (node && strcmp(g.dev[ctx->node].name, node) != 0)
			continue;
		pthread_mutex_lock(&ctx->lock);
		ret = vsim_fault_qp(ctx, qpn, index, wq);
		pthread_mutex_unlock(&ctx->lock);
	}
	return ret;
}

int vsim_test_fault(const char *node, uint32_t qpn, unsigned index, bool wq)
{
	int ret;

	pthread_mutex_lock(&g.lock);
	ret = fault_apply(node, qpn, index, wq);
	pthread_mutex_unlock(&g.lock);
	return ret;
}

/*
 * The fault file (vsim.h, IBVSIM_FAULT_FILE; its path taken at open): read by the port
 * watchers, consumed by the first that finds it (removed before it is applied, so a
 * fault happens once).
 * Each line "qp QPN [INDEX]" or "wq QPN INDEX" (numbers in C notation: 0x4a).
 */
static void faults_from_file(const char *path)
{
	char line[128];
	FILE *f;

	pthread_mutex_lock(&g.lock);
	f = fopen(path, "r");
	if (!f) {
		pthread_mutex_unlock(&g.lock);
		return;
	}
	if (unlink(path) < 0) {
		log_errno(LOG_ERR, errno,
			  "libibverbs2sim: fault file %s cannot be removed: not "
			  "applied",
			  path);
		fclose(f);
		pthread_mutex_unlock(&g.lock);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		char kind[8];
		long qpn = -1, index = 0;
		int n = sscanf(line, "%7s %li %li", kind, &qpn, &index);
		bool wq = n >= 1 && strcmp(kind, "wq") == 0;
		int ret;

		if (n < 2 || (!wq && strcmp(kind, "qp") != 0) || (wq && n < 3) || qpn < 0 ||
		    qpn > 0xffffff || index < 0 || index >= 1 << 16) {
			log_error(
			    "libibverbs2sim: fault file %s: \"%.*s\" is not \"qp QPN [INDEX]\" "
			    "or \"wq QPN INDEX\"",
			    path, (int)strcspn(line, "\n"), line);
			continue;
		}
		ret = fault_apply(NULL, (uint32_t)qpn, (unsigned)index, wq);
		if (ret < 0)
			log_errno(LOG_ERR, -ret, "libibverbs2sim: fault on demand: %s 0x%lx %ld",
				  kind, qpn, index);
		else
			log_warning("libibverbs2sim: fault on demand: %s 0x%lx %ld to ERR (%s)",
				    kind, qpn, index, wq ? "WQ_FATAL" : "QP_FATAL");
	}
	fclose(f);
	pthread_mutex_unlock(&g.lock);
}

/* The port watcher thread (vsim_pvt.h). */
static void *watcher(void *arg)
{
	struct vsim_ctx *ctx = arg;
	uint64_t check_ns = (uint64_t)port_ms() * 1000000u;

	pthread_mutex_lock(&ctx->lock);
	while (!ctx->stop) {
		struct timespec dl;

		clock_gettime(CLOCK_MONOTONIC, &dl);
		dl.tv_sec += (time_t)(check_ns / 1000000000u);
		dl.tv_nsec += (long)(check_ns % 1000000000u);
		if (dl.tv_nsec >= 1000000000L) {
			dl.tv_sec++;
			dl.tv_nsec -= 1000000000L;
		}
		while (!ctx->stop && pthread_cond_timedwait(&ctx->watch_cond, &ctx->lock, &dl) == 0)
			;
		if (ctx->stop)
			break;
		pthread_mutex_unlock(&ctx->lock);
		ports_check(ctx, 0); /* SMPs without the lock */
		faults_from_file(ctx->fault_path);
		pthread_mutex_lock(&ctx->lock);
	}
	pthread_mutex_unlock(&ctx->lock);
	return NULL;
}

/* --- devices and contexts ------------------------------------------------------------------ */

static int vsim_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
static int vsim_req_notify_cq(struct ibv_cq *cq, int solicited_only);
static int query_port_ex(struct ibv_context *c, uint8_t num, struct ibv_port_attr *attr,
			 size_t len);
static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t len);

static void ctx_free(struct vsim_ctx *ctx)
{
	pthread_mutex_lock(&g.lock);
	for (struct vsim_ctx **pp = &g.ctxs; *pp; pp = &(*pp)->next_ctx) {
		if (*pp == ctx) {
			*pp = ctx->next_ctx;
			break;
		}
	}
	pthread_mutex_unlock(&g.lock);
	pthread_mutex_lock(&ctx->lock);
	ctx->stop = true;
	if (ctx->wake_fd >= 0)
		vsim_wake(ctx);
	pthread_cond_broadcast(&ctx->watch_cond);
	pthread_mutex_unlock(&ctx->lock);
	if (ctx->thread_on)
		pthread_join(ctx->thread, NULL);
	if (ctx->watcher_on)
		pthread_join(ctx->watcher, NULL);
	pthread_cond_destroy(&ctx->watch_cond);
	pthread_mutex_lock(&ctx->lock);
	vsim_qp_destroy_all(ctx);
	pthread_mutex_unlock(&ctx->lock);
	while (ctx->mrs) {
		struct vsim_mr *m = ctx->mrs;

		ctx->mrs = m->next;
		free(m);
	}
	for (unsigned i = 0; i < ctx->n_ports; i++)
		simfab_client_close(ctx->port[i].fab);
	if (ctx->epfd >= 0)
		close(ctx->epfd);
	if (ctx->wake_fd >= 0)
		close(ctx->wake_fd);
	if (ctx->vctx.context.async_fd >= 0)
		close(ctx->vctx.context.async_fd);
	pthread_mutex_destroy(&ctx->vctx.context.mutex);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct vsim_ctx *ctx;
	struct ibv_context *c;
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
	unsigned node;

	pthread_mutex_lock(&g.lock);
	node = (unsigned)(device - g.dev);
	if (device < g.dev || node >= g.n_dev) {
		pthread_mutex_unlock(&g.lock);
		errno = ENODEV;
		return NULL;
	}
	pthread_mutex_unlock(&g.lock);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	c = &ctx->vctx.context;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&c->mutex, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&ctx->watch_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = query_port_ex;
	ctx->vctx.query_device_ex = query_device_ex;
	ctx->vctx.create_qp_ex = vsim_create_qp_ex;
	ctx->vctx.create_wq = vsim_create_wq;
	ctx->vctx.modify_wq = vsim_modify_wq;
	ctx->vctx.destroy_wq = vsim_destroy_wq;
	ctx->vctx.create_rwq_ind_table = vsim_create_ind;
	ctx->vctx.destroy_rwq_ind_table = vsim_destroy_ind;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->device = device;
	c->cmd_fd = -1;
	c->num_comp_vectors = 1;
	c->ops.poll_cq = vsim_poll_cq;
	c->ops.req_notify_cq = vsim_req_notify_cq;
	c->ops.post_send = vsim_post_send;
	c->ops.post_recv = vsim_post_recv;
	c->ops.post_srq_recv = vsim_post_srq_recv;
	ctx->node = node;
	{
		const char *fp = getenv("IBVSIM_FAULT_FILE");

		if (fp && *fp)
			snprintf(ctx->fault_path, sizeof(ctx->fault_path), "%s", fp);
		else
			snprintf(ctx->fault_path, sizeof(ctx->fault_path), "ibvsim-fault.%ld",
				 (long)getpid());
	}
	ctx->n_ports = g.n_ports[node];
	ctx->home_port = 1;
	ctx->next_key = 0x100;
	c->async_fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	ctx->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->async_fd < 0 || ctx->wake_fd < 0 || ctx->epfd < 0 ||
	    epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, ctx->wake_fd, &ev) < 0) {
		int err = errno;

		ctx_free(ctx);
		errno = err;
		return NULL;
	}
	for (unsigned i = 0; i < ctx->n_ports; i++) {
		struct vsim_port *p = &ctx->port[i];

		p->num = (uint8_t)(i + 1);
		if (read_port(node, p->num, &p->sp) == 0) {
			p->have_sp = true;
			p->rereg = p->sp.client_rereg;
		}
	}
	if (pthread_create(&ctx->thread, NULL, progress, ctx) != 0) {
		ctx_free(ctx);
		errno = EAGAIN;
		return NULL;
	}
	ctx->thread_on = true;
	if (pthread_create(&ctx->watcher, NULL, watcher, ctx) != 0) {
		ctx_free(ctx);
		errno = EAGAIN;
		return NULL;
	}
	ctx->watcher_on = true;
	pthread_mutex_lock(&g.lock);
	ctx->next_ctx = g.ctxs;
	g.ctxs = ctx;
	pthread_mutex_unlock(&g.lock);
	return c;
}

int ibv_close_device(struct ibv_context *context)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);

	if (ctx->n_objs) {
		log_warning("libibverbs2sim: %s closed with %u verbs objects alive",
			    context->device->name, ctx->n_objs);
		atomic_fetch_add(&objects_leaked, ctx->n_objs);
	}
	ctx_free(ctx);
	return 0;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *a)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_port *p = &ctx->port[0];

	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "16.35.2000 (libibverbs2sim)");
	pthread_mutex_lock(&ctx->lock);
	/* ibsim numbers a CA's port GUIDs node GUID + port number. */
	a->node_guid = htobe64(p->sp.info.port_guid - p->num);
	pthread_mutex_unlock(&ctx->lock);
	a->sys_image_guid = a->node_guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = 0x02c9;    /* Mellanox */
	a->vendor_part_id = 4119; /* ConnectX-5 */
	a->max_qp = 262144;
	a->max_qp_wr = VSIM_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_UD_AV_PORT_ENFORCE |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = VSIM_MAX_SGE;
	a->max_sge_rd = VSIM_MAX_SGE;
	a->max_cq = 16777216;
	a->max_cqe = VSIM_MAX_CQE;
	a->max_mr = 16777216;
	a->max_pd = 16777216;
	a->max_qp_rd_atom = VSIM_MAX_RD_ATOM;
	a->max_res_rd_atom = 4194304;
	a->max_qp_init_rd_atom = VSIM_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_NONE; /* no atomics on the simulated fabric */
	a->max_mcast_grp = 2097152;
	a->max_mcast_qp_attach = VSIM_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = 503316480;
	a->max_ah = 0x7fffffff;
	a->max_srq = 8388608;
	a->max_srq_wr = VSIM_MAX_SRQ_WR;
	a->max_srq_sge = VSIM_MAX_SGE + 1;
	a->max_pkeys = VSIM_PKEY_TBL;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = (uint8_t)ctx->n_ports;
	return 0;
}

/* ibv_query_device_ex (verbs_context->query_device_ex): ibv_query_device's limits, and
 * RSS for UD QPs, the way enhanced IPoIB spreads a link (Toeplitz over IPv4/IPv6 and
 * TCP/UDP ports; WQs and indirection tables): offered for the rack, not known to be
 * what a ConnectX lists for UD. IBVSIM_RSS=0 reports none, an HCA without
 * it. Everything else an mlx5 reports here (ODP, TSO, timestamps...) is not emulated:
 * zero. */
static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
			   struct ibv_device_attr_ex *attr, size_t len)
{
	struct ibv_device_attr_ex a;

	if ((in && in->comp_mask) || len < sizeof(a.orig_attr))
		return EINVAL;
	memset(&a, 0, sizeof(a));
	ibv_query_device(c, &a.orig_attr);
	if (vsim_rss_enabled()) {
		a.rss_caps.supported_qpts = 1u << IBV_QPT_UD;
		a.rss_caps.max_rwq_indirection_tables = VSIM_MAX_IND_TBL;
		a.rss_caps.max_rwq_indirection_table_size = 1u << VSIM_MAX_IND_LOG;
		a.rss_caps.rx_hash_function = IBV_RX_HASH_FUNC_TOEPLITZ;
		a.rss_caps.rx_hash_fields_mask = VSIM_RSS_FIELDS;
		a.max_wq_type_rq = VSIM_MAX_WQ;
	}
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/* The port's attributes (ctx->lock held). */
static void port_attr(const struct vsim_port *p, struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = !p->fab || !p->link_up ? IBV_PORT_DOWN : (enum ibv_port_state)p->sp.state;
	if (a->state < IBV_PORT_DOWN || a->state > IBV_PORT_ACTIVE_DEFER)
		a->state = IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu =
	    p->sp.info.mtu >= 1 && p->sp.info.mtu <= 5 ? (enum ibv_mtu)p->sp.info.mtu : IBV_MTU_256;
	a->gid_tbl_len = VSIM_GID_TBL;
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_CLIENT_REG_SUP | IBV_PORT_SYS_IMAGE_GUID_SUP;
	a->max_msg_sz = 1u << 30;
	a->pkey_tbl_len = VSIM_PKEY_TBL;
	a->lid = p->sp.info.lid;
	a->sm_lid = p->sp.info.sm_lid;
	a->lmc = p->sp.info.lmc;
	a->max_vl_num = 4;
	a->sm_sl = p->sp.sm_sl;
	a->subnet_timeout = p->sp.subnet_timeout;
	a->active_width = 2;  /* 4X */
	a->active_speed = 32; /* EDR */
	a->phys_state = a->state == IBV_PORT_DOWN ? 3 /* Disabled */ : 5 /* LinkUp */;
	a->link_layer = IBV_LINK_LAYER_INFINIBAND;
}

/* ibv_query_port reads the port afresh (an SMP, as the HCA's firmware answers from
 * its own PortInfo), so a program that queries sees a change at once and its event
 * follows. The port queried becomes where the context's new QPs get their QPN. */
static int query_port_ex(struct ibv_context *c, uint8_t num, struct ibv_port_attr *attr, size_t len)
{
	struct vsim_ctx *ctx = vsim_ctx_of(c);
	struct ibv_port_attr a;

	if (num < 1 || num > ctx->n_ports)
		return set_errno(EINVAL);
	ports_check(ctx, num);
	pthread_mutex_lock(&ctx->lock);
	vsim_port_claim(ctx, &ctx->port[num - 1]);
	port_attr(&ctx->port[num - 1], &a);
	ctx->home_port = num;
	pthread_mutex_unlock(&ctx->lock);
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr);
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr)
{
	/* The old entry point fills the fields before flags. */
	return query_port_ex(context, port_num, (struct ibv_port_attr *)port_attr,
			     offsetof(struct ibv_port_attr, flags));
}

int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_port *p;

	if (port_num < 1 || port_num > ctx->n_ports || index < 0 || index >= VSIM_GID_TBL) {
		errno = EINVAL;
		return -1;
	}
	p = &ctx->port[port_num - 1];
	pthread_mutex_lock(&ctx->lock);
	gid->global.subnet_prefix = htobe64(p->sp.info.gid_prefix);
	gid->global.interface_id = htobe64(p->sp.info.port_guid);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_port *p;

	if (port_num < 1 || port_num > ctx->n_ports || index < 0 || index >= VSIM_PKEY_TBL) {
		errno = EINVAL;
		return -1;
	}
	p = &ctx->port[port_num - 1];
	pthread_mutex_lock(&ctx->lock);
	*pkey = htobe16(index < p->sp.info.n_pkeys ? p->sp.info.pkeys[index] : 0);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

/* --- PD, MR --------------------------------------------------------------------------------- */

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->pd.context = context;
	pthread_mutex_lock(&ctx->lock);
	pd->pd.handle = ctx->next_key++;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &pd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibpd->context);
	struct vsim_pd *pd = (struct vsim_pd *)ibpd;

	pthread_mutex_lock(&ctx->lock);
	if (pd->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY; /* the kernel refuses while objects use it */
	}
	ctx->n_objs--;
	pthread_mutex_unlock(&ctx->lock);
	free(pd);
	return 0;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct vsim_ctx *ctx = vsim_ctx_of(pd->context);
	struct vsim_mr *m;
	unsigned f = vsim_fault("IBVSIM_FAULT_REG_MR");

	/* As the kernel: remote write or atomic access needs local write. */
	if (!addr || length == 0 ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	if (f) { /* the fault asked for: this errno (ENOMEM: RLIMIT_MEMLOCK too low) */
		log_warning("libibverbs2sim: ibv_reg_mr fails on demand (IBVSIM_FAULT_REG_MR=%u)",
			    f);
		errno = (int)f;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->access = access;
	pthread_mutex_lock(&ctx->lock);
	m->mr.handle = ctx->next_key;
	m->mr.lkey = m->mr.rkey = ctx->next_key++ << 8 | 0x5a; /* mlx5: index << 8 | key */
	m->next = ctx->mrs;
	ctx->mrs = m;
	((struct vsim_pd *)pd)->users++;
	pthread_mutex_unlock(&ctx->lock);
	return &m->mr;
}

struct vsim_mr *vsim_mr_find(struct vsim_ctx *ctx, struct ibv_pd *pd, uint32_t lkey, uint64_t addr,
			     uint64_t len, int access)
{
	for (struct vsim_mr *m = ctx->mrs; m; m = m->next) {
		uint64_t start = (uintptr_t)m->mr.addr;

		if (m->mr.lkey != lkey)
			continue;
		if (m->mr.pd != pd || (m->access & access) != access || addr < start ||
		    addr + len > start + m->mr.length || addr + len < addr)
			return NULL;
		return m;
	}
	return NULL;
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct vsim_ctx *ctx = vsim_ctx_of(mr->context);
	struct vsim_mr **pp;

	pthread_mutex_lock(&ctx->lock);
	for (pp = &ctx->mrs; *pp && &(*pp)->mr != mr; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&ctx->lock);
		return EINVAL;
	}
	*pp = (*pp)->next;
	((struct vsim_pd *)mr->pd)->users--;
	pthread_mutex_unlock(&ctx->lock);
	free(mr);
	return 0;
}

/* --- completion channels and CQs -------------------------------------------------------- */

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_chan *ch = calloc(1, sizeof(*ch));

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = context;
	ch->ch.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct vsim_ctx *ctx = vsim_ctx_of(channel->context);
	struct vsim_chan *ch = (struct vsim_chan *)channel;

	pthread_mutex_lock(&ctx->lock);
	if (ch->cqs) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	ctx->n_objs--;
	pthread_mutex_unlock(&ctx->lock);
	close(ch->ch.fd);
	free(ch->q);
	free(ch);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	struct vsim_cq *cq;
	unsigned cap = 1;

	if (cqe < 1 || cqe > VSIM_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	/* mlx5 rounds the ring up to a power of two and reports one less. */
	while (cap < (unsigned)cqe + 1)
		cap <<= 1;
	cq = calloc(1, sizeof(*cq));
	if (cq)
		cq->ring = calloc(cap - 1, sizeof(*cq->ring));
	if (!cq || !cq->ring) {
		if (cq)
			free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cap - 1;
	if (vsim_fault("IBVSIM_FAULT_CQ_DEPTH") && vsim_fault("IBVSIM_FAULT_CQ_DEPTH") < cq->cap) {
		/* A provider that holds fewer completions than it granted (cqe below still
		 * says cap - 1): the fault that makes a CQ sized right overrun. */
		cq->cap = vsim_fault("IBVSIM_FAULT_CQ_DEPTH");
		log_warning("libibverbs2sim: CQ of %d entries holds %u (IBVSIM_FAULT_CQ_DEPTH)",
			    (int)cap - 1, cq->cap);
	}
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = (int)cap - 1;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_init(&cq->lock, NULL);
	pthread_mutex_lock(&ctx->lock);
	cq->cq.handle = ctx->next_key++;
	if (channel)
		((struct vsim_chan *)channel)->cqs++;
	cq->next = ctx->cqs;
	ctx->cqs = cq;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibcq->context);
	struct vsim_cq *cq = (struct vsim_cq *)ibcq, **pp;

	pthread_mutex_lock(&ctx->lock);
	if (cq->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	if (cq->events_got != cq->events_acked) {
		/* libibverbs waits here until every event is acked: forever, on hardware. */
		log_error("libibverbs2sim: ibv_destroy_cq with %u CQ events not acked: "
			  "this call never returns on a real HCA",
			  cq->events_got - cq->events_acked);
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY;
	}
	for (pp = &ctx->cqs; *pp && *pp != cq; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = cq->next;
	vsim_event_forget(ctx, NULL, ibcq);
	if (ibcq->channel) {
		struct vsim_chan *ch = (struct vsim_chan *)ibcq->channel;
		unsigned kept = 0;

		ch->cqs--;
		/* Events of this CQ still queued on the channel go with it. */
		for (unsigned i = 0; i < ch->len; i++) {
			struct ibv_cq *c = ch->q[(ch->head + i) % ch->cap];

			if (c != ibcq)
				ch->q[(ch->head + kept++) % ch->cap] = c;
			else if (read(ch->ch.fd, &(uint64_t){ 0 }, sizeof(uint64_t)) < 0)
				log_errno(LOG_ERR, errno, "libibverbs2sim: eventfd read");
		}
		ch->len = kept;
	}
	ctx->n_objs--;
	pthread_mutex_unlock(&ctx->lock);
	pthread_mutex_destroy(&cq->cq.mutex);
	pthread_cond_destroy(&cq->cq.cond);
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	free(cq);
	return 0;
}

static int vsim_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct vsim_cq *cq = (struct vsim_cq *)ibcq;
	int n = 0;

	if (num < 0)
		return -EINVAL;
	/* Only the CQ's lock: a worker polling its CQ does not wait for the progress
	 * thread's batch, nor for other CQs' pollers (vsim_pvt.h, Threads). */
	pthread_mutex_lock(&cq->lock);
	while (n < num && cq->len) {
		wc[n++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->len--;
	}
	pthread_mutex_unlock(&cq->lock);
	return n;
}

/* Arm for one event: the next completion added raises it. Completions already in the
 * CQ raise none (the consumer polls once more after arming). */
static int vsim_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct vsim_cq *cq = (struct vsim_cq *)ibcq;

	if (!ibcq->channel)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	cq->armed = true;
	cq->solicited_only = solicited_only != 0;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
	struct vsim_ctx *ctx = vsim_ctx_of(channel->context);
	struct vsim_chan *ch = (struct vsim_chan *)channel;
	uint64_t v;

	/* The eventfd counts the queued events and keeps the fd's blocking mode. */
	if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	pthread_mutex_lock(&ctx->lock);
	if (!ch->len) {
		pthread_mutex_unlock(&ctx->lock);
		errno = EAGAIN;
		return -1;
	}
	*cq = ch->q[ch->head];
	ch->head = (ch->head + 1) % ch->cap;
	ch->len--;
	((struct vsim_cq *)*cq)->events_got++;
	*cq_context = (*cq)->cq_context;
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibcq->context);
	struct vsim_cq *cq = (struct vsim_cq *)ibcq;

	pthread_mutex_lock(&ctx->lock);
	if (cq->events_acked + nevents > cq->events_got)
		log_error("libibverbs2sim: ibv_ack_cq_events acks %u events, %u were got and "
			  "not acked",
			  nevents, cq->events_got - cq->events_acked);
	cq->events_acked += nevents;
	ibcq->comp_events_completed += nevents;
	pthread_mutex_unlock(&ctx->lock);
}

/* --- async events -------------------------------------------------------------------------- */

int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct vsim_ctx *ctx = vsim_ctx_of(context);
	uint64_t v;

	if (read(context->async_fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	pthread_mutex_lock(&ctx->lock);
	if (!ctx->ev_len) {
		pthread_mutex_unlock(&ctx->lock);
		errno = EAGAIN;
		return -1;
	}
	*event = ctx->evq[ctx->ev_head];
	ctx->ev_head = (ctx->ev_head + 1) % VSIM_EVQ;
	ctx->ev_len--;
	switch (event->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		((struct vsim_qp *)event->element.qp)->events_got++;
		break;
	case IBV_EVENT_CQ_ERR:
		((struct vsim_cq *)event->element.cq)->events_got++;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct vsim_ctx *ctx;

	switch (event->event_type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		ctx = vsim_ctx_of(event->element.qp->context);
		pthread_mutex_lock(&ctx->lock);
		((struct vsim_qp *)event->element.qp)->events_acked++;
		pthread_mutex_unlock(&ctx->lock);
		break;
	case IBV_EVENT_CQ_ERR:
		ctx = vsim_ctx_of(event->element.cq->context);
		pthread_mutex_lock(&ctx->lock);
		((struct vsim_cq *)event->element.cq)->events_acked++;
		pthread_mutex_unlock(&ctx->lock);
		break;
	default:
		break;
	}
}
