/*
 * engine_pvt: the engine's internals shared by engine/engine.c, engine/worker.c,
 * engine/slowpath.c and engine/forward.c (DPDK's _pvt.h convention): no file outside
 * engine/ includes it (test/layering checks).
 */
#ifndef IBGW_ENGINE_ENGINE_PVT_H
#define IBGW_ENGINE_ENGINE_PVT_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/engine.h"
#include "engine/heartbeat.h"

/* Counters: one writer (the owning worker), readers anywhere. A relaxed load + store
 * is a plain add on the writer's side (no locked instruction) and race-free for TSan. */
#define FWD_ADD(ctr, n)                                                                            \
	__atomic_store_n(&(ctr), __atomic_load_n(&(ctr), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define FWD_INC(ctr) FWD_ADD(ctr, 1)

/* One message pool with its class shares (enum fwd_pclass): a class may take a message
 * while under its cap and either under its reserve or with more messages free than the
 * other classes' unused reserves. So `n >= unused_reserve` always holds, and a class
 * under its reserve always finds a message. Counters and free list: the owner's. */
struct fwd_pool {
	struct fwd_msg **free;
	unsigned n;              /* messages free */
	unsigned unused_reserve; /* sum over classes of max(0, reserve - in_use) */
	unsigned in_use[FWD_PCLASS_COUNT];
	unsigned reserve[FWD_PCLASS_COUNT], cap[FWD_PCLASS_COUNT];
};

/* Per worker slot: rings, message pools, counters, the thread (engine/engine.h, "Worker
 * slots"). The pools' owners below hold while the slot runs; a retired slot's are all
 * the control thread's. */
struct fwd_wk {
	struct ring *to_ctl;         /* producer: the worker; consumer: control */
	struct ring *to_wk;          /* producer: control; consumer: the worker */
	struct fwd_msg *wmem, *cmem; /* the two pools' storage */
	struct fwd_pool wp;          /* owner: the worker */
	struct fwd_pool cp;          /* owner: control */
	/* The heartbeat channel (engine/heartbeat.c): worker -> heartbeat thread (its
	 * punts, and its returns of hp's messages) and back (hp's sends, and the returns of
	 * the worker's punts); hp is the heartbeat thread's pool for sends through this
	 * worker. */
	struct ring *hb_rx; /* producer: the worker; consumer: the heartbeat thread */
	struct ring *hb_tx; /* producer: the heartbeat thread; consumer: the worker */
	struct fwd_msg *hmem;
	struct fwd_pool hp;   /* owner: the heartbeat thread */
	unsigned parked;      /* owner: control; wp's messages parked in the Ethernet
				      * neighbour queues (fwd_punt_config.park_max) */
	struct fwd_stats *st; /* owner: the worker (cache-line aligned) */
	/* Thread (owner: control). */
	pthread_t thr;
	bool started;
	bool retired; /* stopped by fwd_worker_set_count: the slot is control's alone */
	_Atomic bool stop;
	void *wctx; /* worker.c's state */
};

/* Per Ethernet interface: the neighbour table's ops context. */
struct fwd_nctx {
	struct fwd_engine *e;
	uint32_t ifindex;
};

/* The context of fwd_engine_ib_post_send (engine/engine.h): an IPoIB interface's (its
 * link's sends; by index, reserved before the link exists). Engine memory: valid for
 * the engine's life. */
struct fwd_ib_hook {
	struct fwd_engine *e;
	const struct ibp_ops *ops; /* for direct posts while no worker runs; NULL: none yet */
	uint32_t ifindex;
};

struct fwd_sp; /* slowpath.c */
struct wstate; /* worker.c: a worker's state, one of its ports, a TX queue */
struct wport;
struct txq;

/*
 * What differs between the kinds of interface in the worker, as a table per kind
 * (fwd_if.ops) instead of a switch at each step, like rdma-core's provider ops. Every
 * call is per port and loop turn or per burst; per packet (queue_tx's descriptor,
 * forward.c's emit and MTU), an inline switch on fwd_if.kind stays: cheaper than an
 * indirect call. The slow path's few per-kind steps (announcements, parking) are
 * switches too: each is one call of its own, not a pattern. Tables in worker.c.
 */
struct fwd_if_ops {
	/* The port (ethp_port / ibp_port): a worker's port identity. */
	const void *(*port)(const struct fwd_if *f);
	/* The fd a worker sleeping on the port's queue waits on (epoll). */
	int (*wait_fd)(const struct fwd_if *f, unsigned queue);
	/* f is polled through p, its port's entry in the worker (once per interface). */
	void (*attach)(struct wport *p, const struct fwd_if *f);
	/* One receive burst of the port, forwarded; returns the completions handled. */
	unsigned (*poll)(struct wstate *w, struct wport *p, const struct fwd_snap *s);
	/* One transmit burst of q (q->n > 0) on its interface. */
	void (*flush)(struct wstate *w, struct txq *q);
	/* Arm the fd of the port's queue the worker polls, before sleeping. */
	int (*arm)(const struct wport *p);
};
extern const struct fwd_if_ops fwd_if_eth_ops, fwd_if_ipoib_ops;

struct fwd_engine {
	struct fwd_engine_config cfg;
	_Atomic(struct fwd_snap *) snap; /* written by control (release), read by workers */
	struct rt_table *rt;
	uint32_t seed;
	unsigned n_workers;  /* running or to run: interfaces are assigned to 0..n-1 */
	unsigned n_slots;    /* slots set up (n_workers <= n_slots): the rest are retired */
	unsigned eth_queues; /* queues of every Ethernet port (fwd_engine_eth_queues), at
			      * least n_workers; 0: never set, no worker has run (a test's
			      * ports may have none) */
	struct fwd_wk wk[FWD_WORKERS_MAX];
	bool own_neigh[FWD_IF_MAX]; /* the engine created ifs[i].neigh */
	struct fwd_nctx nctx[FWD_IF_MAX];
	bool reserved[FWD_IF_MAX];              /* fwd_engine_if_reserve: taken, not added yet */
	uint32_t if_gen;                        /* the last fwd_if.gen given */
	struct fwd_ib_hook if_hook[FWD_IF_MAX]; /* by interface index */
	struct fwd_sp *sp;                      /* owner: control */
	/* What fwd_punt_classify calls CONTROL: written by control (fwd_sp_udp_bind,
	 * fwd_sp_echo_bind), read by the workers. 0: none bound; echo: 0x10000 | id. */
	_Atomic uint32_t ctl_udp_port, ctl_echo_id;
	/* The DHCP relay (fwd_sp_dhcp_bind): bit k set when interface k relays, so that its
	 * workers punt the clients' broadcasts to UDP 67 and multicasts to ff02::1:2 port
	 * 547 instead of dropping them as martians. Written by control, read by workers. */
	_Atomic uint32_t dhcp_ifmask;
	_Atomic uint32_t mcast_ifmask; /* fwd_sp_mcast_bind */
	/* The heartbeat channel: its UDP port (0: none; written by control, read by the
	 * workers), the eventfd the workers write when they hand it something, and the
	 * slots set up so far (n_slots, published for the heartbeat thread). */
	_Atomic uint32_t hb_port;
	int hb_efd;
	_Atomic unsigned hb_slots;
	uint64_t hb_delivered, hb_refused, hb_sent, hb_no_msg; /* the heartbeat thread's */
	/* The capture running on each interface (engine/capture.h), NULL: none. Written by
	 * control, read by the workers once per interface and burst. */
	_Atomic(struct fwd_capture *) cap[FWD_IF_MAX];
};

static inline struct fwd_capture *fwd_capture_of(struct fwd_engine *e, uint32_t ifindex)
{
	return atomic_load_explicit(&e->cap[ifindex], memory_order_acquire);
}

/* A UDP datagram inside an IP packet of either family, as the slow path and the
 * heartbeat channel take one: the IP header valid, no fragment, no IPv6 extension header,
 * UDP length and checksum right (mandatory in IPv6). */
struct fwd_udp {
	struct ip_addr src, dst;
	uint16_t sport, dport;
	uint8_t ttl; /* IPv4 TTL / IPv6 hop limit as received */
	const uint8_t *payload;
	size_t len;
};
/* true: p[0..len) is such a datagram (out filled); false: not UDP, or malformed. */
bool fwd_udp_parse(const uint8_t *p, size_t len, struct fwd_udp *out);
/* Build a UDP datagram with its IP header (TTL / hop limit 255, checksum) into p
 * (room: cap octets). Returns its length, 0 if it does not fit or the families differ. */
size_t fwd_udp_build(uint8_t *p, size_t cap, const struct ip_addr *src, const struct ip_addr *dst,
		     uint16_t sport, uint16_t dport, const void *payload, size_t len);
/* Whether the IP packet p is UDP to port (no fragment, header there): the workers'
 * quick look, before fwd_udp_parse's checks. */
bool fwd_ip_is_udp_to(const uint8_t *p, size_t len, uint32_t port);

/* Set up slots up to n (their rings registered with the slow path). 0, -ENOMEM, or the
 * slow path's -errno (evloop_add_fd). */
int fwd_engine_slots_grow(struct fwd_engine *e, unsigned n);
/* Every Ethernet port to at least n queues (ethp set_queues), and the ports added later
 * too: grown before new workers start, never shrunk (a closed queue's socket would lose
 * the frames queued in it: after a reload to fewer workers, each polls several queues).
 * 0, or -errno with nothing changed. */
int fwd_engine_eth_queues(struct fwd_engine *e, unsigned n);
/* Give each interface the worker worker_of[index], and the ports' queues to pollers
 * workers, in two publications: first the interfaces that change worker (and every
 * port, when pollers changes: its queues change worker) as moving (polled by none),
 * then, after wait(arg) (a grace period, and what must happen while none polls them),
 * with their new worker. 0, or -ENOMEM with nothing published. */
int fwd_engine_assign(struct fwd_engine *e, const unsigned worker_of[FWD_IF_MAX], unsigned pollers,
		      void (*wait)(void *arg), void *arg);

/* slowpath.c: whether f has a neighbour entry for a (4 or 16 octets) that a worker
 * sends to (REACHABLE, STALE, DELAY, PROBE, PERMANENT). Any thread that may read the
 * snapshot f came from (the tables are read lock-free, as the workers do). */
bool fwd_neigh_usable(const struct fwd_if *f, int family, const uint8_t *a);
/* slowpath.c: the Ethernet neighbour tables' ops (ctx: struct fwd_nctx). */
extern const struct neigh_ops fwd_sp_neigh_ops;
int fwd_sp_new(struct fwd_engine *e);
void fwd_sp_free(struct fwd_engine *e);
/* Transmit a prepared IB send for the control thread through the worker of ifindex (an
 * IPoIB interface): a message of class c (CONTROL: the cm's MADs) on its control->worker
 * ring (FWD_MSG_TX_IB). 0, -EINVAL, -ENOBUFS (counted). */
int fwd_sp_send_ib(struct fwd_engine *e, uint32_t ifindex, const struct ibp_send *s,
		   enum fwd_pclass c);
/* A slot was set up: listen to its ring. 0 or -errno. */
int fwd_sp_slot_added(struct fwd_engine *e, unsigned w);
/* Slot w was retired: what its worker left in its control->worker ring goes to the
 * running workers (fwd_sp_resend) or back to its pools. */
void fwd_sp_slot_retired(struct fwd_engine *e, unsigned w);
/* An interface's addresses or proxy settings changed (fwd_engine_if_add_addr,
 * fwd_engine_if_set_proxy). Nothing to do yet: announcements and learned routes follow
 * the neighbours (slowpath.c's neighbour_learned), not the interfaces. */
void fwd_sp_if_changed(struct fwd_engine *e, uint32_t ifindex);

#endif
