/*
 * The composition of the data plane (gateway/dataplane.h): the daemon's config turned
 * into running objects, in this order:
 *
 *   RIB/FIB (table/route.h)  ->  engine (engine/engine.h)  ->  IB ports: open, query, then
 *   sa_umad + sa_client (query first: under umad2sim both register an SMI agent), GID
 *   routes, then per P_Key an IPoIB link (gateway role) and its engine interface  ->
 *   Ethernet ports (port/eth_port.h) with their link state from netlink  ->  addresses
 *   and proxy settings  ->  static routes  ->  the slow path on the control loop  ->
 *   the workers (count and CPUs from the config)  ->  the links start (broadcast joins).
 *
 * RCU: the tables' deferred frees go through liburcu QSBR's call_rcu; the control
 * thread is a registered QSBR thread that stays offline (it writes the tables, it does
 * not read them under RCU), so its call_rcu and synchronize_rcu never wait on itself.
 *
 * The engine learns each IPoIB link's UD QP and Q_Key from ipoib_link_ud_qp/qkey when
 * the link comes up (fwd_engine_if_set_ipoib). The sends the control thread makes on a
 * link (ARP/ND answers, parked packets: cfg.post) go through the engine's own post hook
 * (fwd_engine_ib_post_send: to a worker's ring, or posted directly while no worker
 * runs). This file only wires it, when a link is made (at start and on a reload), and
 * is on no packet's way. A link's hook context is its interface's
 * (fwd_engine_if_post_ctx), so the index is reserved (fwd_engine_if_reserve) before the
 * link is created and the interface added with it afterwards.
 *
 * Connected mode (mode: connected): one cm port (ipoib_cm_port_open_umad, the CM's MADs
 * through a libibumad agent, watched by the control thread's loop) per IB port, shared
 * by its connected links; the port's buffers then hold a whole RC message (65524 + the
 * GRH area): sized when the port opens, so a reload that makes a link connected on a
 * port opened for datagram reopens the port (port_reopen). The worker passes RC
 * receives (SRQ) and RC send completions to the link; the interface's MTU is the
 * connections' (65520), each neighbour's is its own.
 * Port events, QP_FATAL of an RC QP included, go to every link of the port.
 *
 * Threads: control thread only (the workers run inside the engine).
 */
#include "gateway/dataplane.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <urcu-qsbr.h>

#include <json-c/json.h>

#include "pkt/nd.h"
#include "kernel/linkwatch.h"
#include "table/route.h"
#include "engine/slowpath.h"
#include "engine/worker.h"
#include "gateway/dataplane_pvt.h"
#include "gateway/dp_portfail.h"
#include "gateway/dp_dhcp.h"
#include "gateway/dp_mcast.h"
#include "gateway/dp_ra.h"
#include "gateway/dp_routers.h"
#include "gateway/dp_tenant.h"
#include "gateway/reconf.h"
#include "lib/evloop.h"
#include "lib/log.h"
#include "sm-client/sa_umad.h"

#define IB_BUF_SIZE (IBP_GRH_AREA + 4096 + 64)
/* A datagram link's UD receives per queue on a port of datagram buffers: a burst of a
 * TCP stream from an IB host, or a worker's stall, must not find the receive queue
 * empty (UD has no flow control: the HCA drops). With 256, as the Linux driver posts
 * (its NAPI drains them in softirq), one stream from an IB host through the simulated
 * rack lost a tenth of its segments at the gateway's receive queue; with 1024, none. */
#define IB_UD_RECV_DEPTH_DG 1024
/* Its UD sends per queue likewise. An Ethernet host's TSO frame becomes 45 datagrams at
 * once, a receive burst of them thousands, and what the send queue cannot take is
 * dropped (tx_full): the Linux driver holds 256 in its send ring and 512 more in the
 * qdisc in front. One stream from a TSO sender through the simulated rack: 1.07-1.38
 * Gbit/s with 50-71k retransmissions with 256, 1.49-1.69 with 16-28k with 1024. */
#define IB_UD_SEND_DEPTH_DG 1024
/* Buffers per datagram link and queue: its receives, its sends and slack; at least
 * IB_N_BUFS_DG_MIN a queue, so that a reload adding a link finds buffers for it. */
#define IB_N_BUFS_DG     3072
#define IB_N_BUFS_DG_MIN 4096
/* A port with a connected link: buffers for a whole RC message (65520 + the IPoIB
 * header) and the GRH area, fewer of them. */
#define IB_BUF_SIZE_CM (IBP_GRH_AREA + 65524 + 64)
#define IB_N_BUFS_CM   1024 /* per connected link on the port */
/* An Ethernet port receives GSO frames (PACKET_VNET_HDR): every buffer holds the largest
 * (ETHP_BUF_MAX, 64 KiB and the headroom). The pool is anonymous memory, a page of which
 * is touched only when a frame reaches it: 1024 of them reserve 66 MiB of address space,
 * and take that much memory only under a stream of 64 KiB frames. */
#define ETH_N_BUFS_GSO 1024
#define PORT_POLL_MS   1000

/* ---- RCU deferral --------------------------------------------------------------------- */

struct defer_item {
	struct rcu_head head;
	void (*fn)(void *arg);
	void *arg;
};

static void defer_run(struct rcu_head *h)
{
	struct defer_item *d = caa_container_of(h, struct defer_item, head);

	d->fn(d->arg);
	free(d);
}

void dp_defer(void *ctx, void (*fn)(void *arg), void *arg)
{
	struct defer_item *d = malloc(sizeof(*d));
	(void)ctx;

	if (!d) {
		synchronize_rcu(); /* no memory: wait here instead */
		fn(arg);
		return;
	}
	d->fn = fn;
	d->arg = arg;
	call_rcu(&d->head, defer_run);
}

/* ---- helpers ---------------------------------------------------------------------------- */

struct dp_link *dp_link_by_ifindex(struct gw_dp *dp, uint32_t ifindex)
{
	for (unsigned i = 0; i < dp->n_links; i++)
		if (dp->links[i].ifindex == ifindex && ifindex)
			return &dp->links[i];
	return NULL;
}

struct dp_link *dp_link_by_name(struct gw_dp *dp, const char *name)
{
	for (unsigned i = 0; i < dp->n_links; i++)
		if (dp->links[i].kind != DP_NONE && !strcmp(dp->links[i].name, name))
			return &dp->links[i];
	return NULL;
}

struct announce_walk {
	struct gw_dp *dp;
	uint32_t ifindex;
};

static int announce_neigh(void *arg, const struct neigh_info *ni)
{
	struct announce_walk *w = arg;

	if (ni->state == NEIGH_REACHABLE || ni->state == NEIGH_STALE || ni->state == NEIGH_DELAY ||
	    ni->state == NEIGH_PROBE || ni->state == NEIGH_PERMANENT)
		fwd_sp_announce(w->dp->e, w->ifindex, ni->family, ni->addr);
	return 0;
}

void dp_announce_neighbours(struct gw_dp *dp, uint32_t skip_ifindex)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);

	for (uint32_t x = 1; x < FWD_IF_MAX; x++) {
		const struct fwd_if *f = fwd_snap_if(s, x);
		struct announce_walk w = { dp, x };

		if (f && f->neigh && x != skip_ifindex)
			neigh_foreach(f->neigh, announce_neigh, &w);
	}
}

static void set_reason(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(char *dst, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, DP_REASON_LEN, fmt, ap);
	va_end(ap);
}

static uint8_t mtu_code(uint32_t bytes)
{
	switch (bytes) {
	case 256:
		return IB_MTU_256;
	case 512:
		return IB_MTU_512;
	case 1024:
		return IB_MTU_1024;
	case 4096:
		return IB_MTU_4096;
	default:
		return IB_MTU_2048;
	}
}

/* ---- proxy ND on IPoIB: solicited-node groups ----------------------------------------------
 *
 * An IB host's Neighbor Solicitation goes to the solicited-node group's MGID, which the
 * fabric delivers only to QPs attached to it: to answer for an address that lives on
 * the Ethernet side, the link must be a full member of that address's group. Joined
 * for the addresses of configured IPv6 proxy prefixes of at most PROXY_GROUPS_MAX
 * addresses when the link comes up, and for every IPv6 neighbour learned on another
 * interface (checked each second). Joins are idempotent.
 */
#define PROXY_GROUPS_MAX 64

static void join_solicited(struct dp_link *k, const uint8_t addr[16])
{
	uint8_t sn[16];
	union ib_gid mgid;

	nd_solicited_node(addr, sn);
	if (ipoib_mgid_from_ipv6(sn, k->pkey, IB_MGID_SCOPE_LINK, &mgid) == 0)
		(void)ipoib_link_mcast_join(k->link, &mgid);
}

static void proxy_groups_configured(struct dp_link *k)
{
	for (unsigned i = 0; i < k->n_proxy6; i++) {
		const struct ip_prefix *p = &k->proxy6[i];
		unsigned n;
		uint8_t a[16];

		if (p->len < 128 - 6)
			continue; /* larger: learned neighbours only */
		n = 1u << (128 - p->len);
		for (unsigned j = 0; j < n && j < PROXY_GROUPS_MAX; j++) {
			memcpy(a, p->addr.bytes, 16);
			a[15] = (uint8_t)(a[15] | j);
			join_solicited(k, a);
		}
	}
}

struct learned_walk {
	struct dp_link *k;
};

static int learned_cb(void *arg, const struct neigh_info *ni)
{
	struct learned_walk *w = arg;

	if (ni->family == AF_INET6 && ni->addr[0] != 0xfe && ni->state != NEIGH_INCOMPLETE &&
	    ni->state != NEIGH_FAILED)
		join_solicited(w->k, ni->addr);
	return 0;
}

static void proxy_groups_learned(struct gw_dp *dp)
{
	const struct fwd_snap *s = fwd_engine_current(dp->e);

	for (unsigned i = 0; i < dp->n_links; i++) {
		struct dp_link *k = &dp->links[i];
		const struct fwd_if *self = fwd_snap_if(s, k->ifindex);
		struct learned_walk w = { k };

		if (k->kind != DP_IPOIB || !k->proxy_nd || !self || !self->up)
			continue;
		for (uint32_t x = 1; x < FWD_IF_MAX; x++) {
			const struct fwd_if *f = fwd_snap_if(s, x);

			if (f && x != k->ifindex && f->neigh)
				neigh_foreach(f->neigh, learned_cb, &w);
		}
	}
}

/* ---- IPoIB link state ------------------------------------------------------------------- */

static void on_link_state(void *ctx, struct ipoib_link *l, bool up)
{
	struct dp_link *k = ctx;
	struct gw_dp *dp = k->port->dp;
	struct ibp_qp *qp = ipoib_link_ud_qp(l);
	uint32_t qkey = ipoib_link_qkey(l);
	struct ipoib_hwaddr hw;
	uint32_t mtu;
	int ret;

	if (!k->ifindex)
		return;
	if (!up) {
		set_reason(k->reason, "%s",
			   k->port->pi.state != SA_PORT_ACTIVE && k->port->pi.lid
			       ? "IB port not active"
			       : "broadcast group not joined");
		ret = fwd_engine_if_set_ipoib(dp->e, k->ifindex, NULL, 0, NULL, 0);
		if (ret < 0)
			log_errno(LOG_ERR, -ret, "%s: cannot take the interface down", k->name);
		dp_ha_link_changed(dp, k);
		return;
	}
	if (!qp) {
		set_reason(k->reason, "the link has no UD QP");
		log_error("%s: up, but without a UD QP: not forwarding", k->name);
		return;
	}
	k->qp = qp;
	k->qkey = qkey;
	ipoib_link_hwaddr(l, &hw);
	/* Connected mode: the interface's MTU is the connections' (65520); each
	 * neighbour's own (UD or its connection's) is in its entry (neigh_link.mtu), and
	 * the engine sends what is above it back as too big. */
	mtu = k->mode == GW_IPOIB_CONNECTED ? ipoib_link_conn_mtu(l) : ipoib_link_mtu(l);
	if (k->cfg_mtu && k->cfg_mtu < mtu)
		mtu = k->cfg_mtu;
	ret = fwd_engine_if_set_ipoib(dp->e, k->ifindex, qp, qkey, &hw, mtu);
	if (ret < 0) {
		set_reason(k->reason, "engine refused the link: %s", strerror(-ret));
		log_errno(LOG_ERR, -ret, "%s: cannot bring the interface up", k->name);
		return;
	}
	k->reason[0] = '\0';
	if (k->proxy_nd)
		proxy_groups_configured(k);
	dp_ha_link_changed(dp, k);
}

/* ---- IB ports ---------------------------------------------------------------------------- */

static void on_port_info(void *arg, const struct sa_port_info *pi)
{
	struct dp_port *p = arg;

	if (pi->lid == p->pi.lid && pi->sm_lid == p->pi.sm_lid && pi->state == p->pi.state &&
	    pi->subnet_timeout == p->pi.subnet_timeout)
		return;
	if (pi->sm_lid != p->pi.sm_lid && p->pi.sm_lid)
		log_event(LOG_NOTICE, IBGW_MSGID_SM_CHANGE, "IB port %s/%u: SM LID 0x%x -> 0x%x",
			  p->device, p->num, p->pi.sm_lid, pi->sm_lid);
	if (pi->state != p->pi.state)
		log_notice("IB port %s/%u: state %u -> %u, LID 0x%x, SM LID 0x%x", p->device,
			   p->num, p->pi.state, pi->state, pi->lid, pi->sm_lid);
	p->pi = *pi;
	if (p->sa)
		sa_client_set_port(p->sa, pi);
}

static void on_port_async(struct evloop *loop, int fd, uint32_t events, void *arg)
{
	struct dp_port *p = arg;
	struct ibp_event ev;
	(void)loop;
	(void)fd;
	(void)events;

	while (p->ops->next_event(p->port, &ev) == 0) {
		/* First: a link with a backup port is marked as moving before it goes down. */
		dp_portfail_port_event(p->dp, p, &ev);
		for (unsigned i = 0; i < p->dp->n_links; i++) {
			struct dp_link *k = &p->dp->links[i];

			if (k->port == p && k->link)
				ipoib_link_port_event(k->link, &ev);
		}
		switch (ev.type) {
		case IBP_EVENT_PORT_ACTIVE:
		case IBP_EVENT_CLIENT_REREGISTER:
		case IBP_EVENT_SM_CHANGE:
		case IBP_EVENT_LID_CHANGE:
			log_info("IB port %s/%u: event %d: rejoining", p->device, p->num,
				 (int)ev.type);
			if (p->sa)
				sa_client_reregister(p->sa);
			break;
		default:
			break;
		}
		if (p->umad)
			sa_umad_poll_port(p->umad);
	}
}

static void on_port_timer(struct evloop *loop, struct evtimer *t, void *arg)
{
	struct gw_dp *dp = arg;
	(void)loop;
	(void)t;

	for (unsigned i = 0; i < dp->n_ports; i++)
		if (dp->ports[i].umad)
			sa_umad_poll_port(dp->ports[i].umad);
	proxy_groups_learned(dp);
}

static void on_sa_event(void *arg, const struct sa_event *ev)
{
	struct dp_port *p = arg;

	switch (ev->type) {
	case SA_EV_SA_DOWN:
		log_warning("IB port %s/%u: the SA stopped answering (cached paths keep serving)",
			    p->device, p->num);
		break;
	case SA_EV_SA_UP:
		log_notice("IB port %s/%u: the SA answers again", p->device, p->num);
		break;
	case SA_EV_PORT_DOWN:
		log_warning("IB port %s/%u: port left ACTIVE", p->device, p->num);
		break;
	case SA_EV_ROUTER_DOWN:
	case SA_EV_ROUTER_UP:
		dp_routers_sa_event(p, ev);
		break;
	default:
		break;
	}
}

/* The buffers of a port sized s (gateway/reconf.h). */
static unsigned port_n_bufs(const struct gw_reconf_port_size *s)
{
	if (s->connected)
		return IB_N_BUFS_CM * s->connected * s->queues;
	unsigned n = IB_N_BUFS_DG * s->datagram;

	return (n > IB_N_BUFS_DG_MIN ? n : IB_N_BUFS_DG_MIN) * s->queues;
}

/* The port itself (its buffers and queues, sized by p->size) and its attributes: the
 * part of port_open a reload's port_reopen does again. On failure p->port is NULL and
 * p->reason says why. */
static int port_open_ib(struct dp_port *p)
{
	struct ibp_port_config pc = {
		.backend = p->backend,
		.device = p->device,
		.port = p->num,
		.buf_size = p->size.connected ? IB_BUF_SIZE_CM : IB_BUF_SIZE,
		/* A queue per worker (the port's receives spread over them: RSS where the
		 * device has it for UD, else one queue). A datagram link keeps 1024 UD
		 * receives posted on each queue and sends up to 1024 (on a port of
		 * datagram buffers), each connected link 256 UD + 256 SRQ and sends up to
		 * 256. */
		.n_queues = p->size.queues,
		.n_bufs = port_n_bufs(&p->size),
	};
	int ret;

	p->ops = ibp_backend(p->backend);
	if (!p->ops) {
		set_reason(p->reason, "IB backend %s not built", p->backend);
		return -ENOTSUP;
	}
	ret = p->ops->open(&pc, &p->port);
	if (ret < 0) {
		p->port = NULL;
		set_reason(p->reason, "cannot open IB port %s/%u (%s): %s", p->device, p->num,
			   p->backend, strerror(-ret));
		return ret;
	}
	/* Query before sa_umad opens: under umad2sim both register an SMI agent. */
	ret = p->ops->query(p->port, &p->pa);
	if (ret < 0) {
		set_reason(p->reason, "cannot query IB port %s/%u: %s", p->device, p->num,
			   strerror(-ret));
		log_error("%s", p->reason);
		p->ops->close(p->port);
		p->port = NULL;
	}
	return ret;
}

static void port_async_on(struct gw_dp *dp, struct dp_port *p)
{
	if (evloop_add_fd(dp->loop, p->ops->async_fd(p->port), EPOLLIN, on_port_async, p) == 0)
		p->async_on = true;
}

static int port_open(struct gw_dp *dp, struct dp_port *p)
{
	int ret = port_open_ib(p);

	if (ret < 0)
		return ret;
	struct sa_umad_config uc = {
		.ca_name = p->device,
		.port = p->num,
		.loop = dp->loop,
		.port_cb = on_port_info,
		.port_arg = p,
	};
	ret = sa_umad_open(&uc, &p->umad);
	if (ret < 0) {
		p->umad = NULL;
		set_reason(p->reason, "cannot open the SA transport (umad) on %s/%u: %s", p->device,
			   p->num, strerror(-ret));
		goto fail;
	}
	ret = sa_umad_port_info(p->umad, &p->pi);
	if (ret < 0) {
		set_reason(p->reason, "cannot read the port through umad: %s", strerror(-ret));
		goto fail;
	}
	struct sa_client_config cc = {
		.ops = &sa_umad_ops,
		.ops_ctx = p->umad,
		.loop = dp->loop,
		.event = on_sa_event,
		.event_arg = p,
		.gid_routes = p->gidroutes,
	};
	dp_routers_sa_config(dp, &cc);
	ret = sa_client_new(&cc, &p->sa);
	if (ret < 0) {
		p->sa = NULL;
		set_reason(p->reason, "cannot start the SA client: %s", strerror(-ret));
		goto fail;
	}
	ret = sa_umad_start(p->umad, p->sa);
	if (ret < 0) {
		set_reason(p->reason, "cannot start the MAD thread: %s", strerror(-ret));
		goto fail;
	}
	sa_client_set_port(p->sa, &p->pi);
	sa_umad_poll_port(p->umad);
	(void)sa_subscribe_traps(p->sa);
	port_async_on(dp, p);
	log_notice("IB port %s/%u (%s): LID 0x%x, GUID 0x%016llx, SM LID 0x%x", p->device, p->num,
		   p->backend, p->pa.lid, (unsigned long long)p->pa.port_guid, p->pi.sm_lid);
	return 0;
fail:
	log_error("%s", p->reason);
	if (p->sa)
		sa_client_free(p->sa);
	p->sa = NULL;
	if (p->umad)
		sa_umad_close(p->umad);
	p->umad = NULL;
	p->ops->close(p->port);
	p->port = NULL;
	return ret;
}

static struct dp_port *port_get(struct gw_dp *dp, const struct gw_ipoib_link_config *l)
{
	const char *backend = gw_ipoib_backend_name(l->backend);

	for (unsigned i = 0; i < dp->n_ports; i++) {
		struct dp_port *p = &dp->ports[i];

		if (!strcmp(p->backend, backend) && !strcmp(p->device, l->device) &&
		    p->num == l->port)
			return p;
	}
	if (dp->n_ports == DP_MAX_PORTS)
		return NULL;
	struct dp_port *p = &dp->ports[dp->n_ports];

	memset(p, 0, sizeof(*p));
	p->dp = dp;
	snprintf(p->backend, sizeof(p->backend), "%s", backend);
	snprintf(p->device, sizeof(p->device), "%s", l->device);
	p->num = l->port;
	p->worker = dp->n_ports % dp->n_workers;
	/* Big buffers when any link configured on this port runs connected, a queue per
	 * worker (a reload's workers: workers_apply follows it). */
	if (dp->open_cfg)
		p->size = gw_reconf_port_want(dp->open_cfg, backend, l->device, l->port);
	if (!p->size.queues)
		p->size.queues = dp->n_workers;
	dp->n_ports++;
	if (sa_gidroutes_new(&p->gidroutes) < 0) {
		log_error("IB port %s/%u: out of memory: no GID routes", p->device, p->num);
		p->gidroutes = NULL;
	}
	(void)port_open(dp, p);
	return p;
}

/* ---- interfaces: addresses and proxying -------------------------------------------------- */

static void if_add_addrs(struct gw_dp *dp, struct dp_link *k)
{
	char buf[IP_PREFIX_STRLEN];

	for (unsigned i = 0; i < k->n_addrs; i++) {
		int ret = fwd_engine_if_add_addr(dp->e, k->ifindex, &k->addrs[i]);

		if (ret < 0)
			log_errno(LOG_ERR, -ret, "%s: address %s not added", k->name,
				  ip_prefix_format(&k->addrs[i], buf, sizeof(buf)));
		if (k->link && ret == 0)
			(void)ipoib_link_add_addr(k->link, k->addrs[i].addr.family,
						  k->addrs[i].addr.bytes);
	}
}

/*
 * The config says, per interface A, "answer here for addresses in these prefixes that
 * live on the other side"; the engine wants, per interface B, "addresses in these live
 * here" (answered for on the other interfaces). A prefix of A lives on the interface
 * whose connected subnet holds it (other than A); when none does (a shared subnet), on
 * every other interface.
 */
/* The configured proxy settings of a running link (NULL: not in cfg). */
static const struct gw_proxy_config *proxy_of(const struct gw_config *cfg, const struct dp_link *k)
{
	if (k->kind == DP_IPOIB) {
		for (unsigned i = 0; i < cfg->n_ipoib_links; i++)
			if (!strcmp(cfg->ipoib_links[i].name, k->name))
				return &cfg->ipoib_links[i].proxy;
	} else if (k->kind == DP_ETH) {
		for (unsigned i = 0; i < cfg->n_eth_ifs; i++)
			if (!strcmp(cfg->eth_ifs[i].name, k->name))
				return &cfg->eth_ifs[i].proxy;
	}
	return NULL;
}

/*
 * An IPoIB link's subnets for learning (issue 20): its addresses, the proxy prefixes
 * that live on it (pc, as the engine has them) and the static routes straight to it
 * (no via). The Ethernet side's slow path reads the same from the engine's interface
 * and the route table.
 */
static void ipoib_on_link_apply(struct dp_link *k, const struct gw_config *cfg,
				const struct fwd_proxy_config *pc)
{
	struct ip_prefix p[DP_MAX_ADDRS + FWD_IF_MAX_PROXY + 64];
	unsigned n = 0;
	int ret;

	for (unsigned i = 0; i < k->n_addrs && n < DP_MAX_ADDRS; i++)
		p[n++] = k->addrs[i];
	for (unsigned i = 0; i < pc->n_prefixes; i++)
		p[n++] = pc->prefixes[i];
	for (unsigned i = 0; i < cfg->n_routes && n < sizeof(p) / sizeof(p[0]); i++)
		if (!cfg->routes[i].n_via && !strcmp(cfg->routes[i].dev, k->name))
			p[n++] = cfg->routes[i].prefix;
	ret = ipoib_link_set_on_link(k->link, p, n);
	if (ret < 0)
		log_errno(LOG_ERR, -ret, "%s: subnets for neighbour learning", k->name);
}

static void proxy_apply(struct gw_dp *dp, const struct gw_config *cfg)
{
	static const struct gw_proxy_config none;
	struct fwd_proxy_config pc[DP_MAX_LINKS];
	const struct gw_proxy_config *gp[DP_MAX_LINKS];

	memset(pc, 0, sizeof(pc));
	for (unsigned i = 0; i < dp->n_links; i++) {
		gp[i] = proxy_of(cfg, &dp->links[i]);
		if (!gp[i])
			gp[i] = &none;
		pc[i].proxy_arp = gp[i]->arp;
		pc[i].proxy_nd = gp[i]->nd;
		/* Configured prefixes are the operator's word that those addresses live
		 * on the other side: answer at once (the forwarded packet then waits for
		 * the other side's resolution). Learned-only proxying answers once the
		 * address has been seen there. */
		pc[i].answer_unresolved = gp[i]->n_prefixes > 0;
		pc[i].defend_dad = true;
		pc[i].router = true;
	}
	for (unsigned a = 0; a < dp->n_links; a++) {
		for (unsigned j = 0; j < gp[a]->n_prefixes; j++) {
			const struct ip_prefix *p = &gp[a]->prefixes[j];
			int home = -1;

			for (unsigned b = 0; b < dp->n_links && home < 0; b++) {
				if (b == a || dp->links[b].kind == DP_NONE)
					continue;
				for (unsigned x = 0; x < dp->links[b].n_addrs; x++) {
					struct ip_prefix net = dp->links[b].addrs[x];

					ip_prefix_mask(&net);
					if (net.len <= p->len &&
					    ip_prefix_contains(&net, &p->addr)) {
						home = (int)b;
						break;
					}
				}
			}
			for (unsigned b = 0; b < dp->n_links; b++) {
				if (b == a || dp->links[b].kind == DP_NONE ||
				    (home >= 0 && (int)b != home))
					continue;
				if (pc[b].n_prefixes < FWD_IF_MAX_PROXY)
					pc[b].prefixes[pc[b].n_prefixes++] = *p;
			}
		}
	}
	for (unsigned i = 0; i < dp->n_links; i++) {
		if (!dp->links[i].ifindex)
			continue;
		int ret = fwd_engine_if_set_proxy(dp->e, dp->links[i].ifindex, &pc[i]);

		if (ret < 0)
			log_errno(LOG_ERR, -ret, "%s: proxy settings refused", dp->links[i].name);
		if (dp->links[i].link)
			ipoib_on_link_apply(&dp->links[i], cfg, &pc[i]);
	}
}

/* The config's neighbour-table limits; the timers not in the config keep Linux's
 * defaults (neigh_params_defaults). */
static struct neigh_params neigh_params_of(const struct gw_neigh_config *c)
{
	struct neigh_params p = {
		.base_reachable_ms = c->base_reachable_time_ms,
		.unres_qlen = c->unres_qlen,
		.gc_thresh1 = c->gc_thresh1,
		.gc_thresh2 = c->gc_thresh2,
		.gc_thresh3 = c->gc_thresh3,
		.max_unresolved = c->max_unresolved,
	};

	neigh_params_defaults(&p);
	return p;
}

/* The config's punt limits (punt:) as the engine takes them; control is never limited. */
static struct fwd_punt_config punt_config_of(const struct gw_punt_config *c)
{
	struct fwd_punt_config p = { .park_max = c->park_max };
	const struct {
		enum fwd_pclass cls;
		const struct gw_punt_class_config *l;
	} map[] = {
		{ FWD_PCLASS_NEIGH, &c->neighbour },
		{ FWD_PCLASS_UNRES, &c->unresolved },
		{ FWD_PCLASS_LOCAL, &c->local },
		{ FWD_PCLASS_MCAST, &c->mcast },
	};

	for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		p.per_src[map[i].cls] = (struct fwd_punt_limit){ map[i].l->per_source_rate,
								 map[i].l->per_source_burst };
		p.total[map[i].cls] = (struct fwd_punt_limit){ map[i].l->per_worker_rate,
							       map[i].l->per_worker_burst };
	}
	return p;
}

/* A slot for a new link: a free one (left by a removal) or the next. NULL: full. */
static struct dp_link *link_alloc(struct gw_dp *dp)
{
	struct dp_link *k = NULL;

	for (unsigned i = 0; i < dp->n_links && !k; i++)
		if (dp->links[i].kind == DP_NONE)
			k = &dp->links[i];
	if (!k && dp->n_links < DP_MAX_LINKS)
		k = &dp->links[dp->n_links++];
	if (k)
		memset(k, 0, sizeof(*k));
	return k;
}

/* The tenant of k, whose table its engine interface is given; NULL (k's reason set)
 * when the tenant has none (it could not be made). */
static struct dp_tenant *link_tenant(struct gw_dp *dp, struct dp_link *k)
{
	struct dp_tenant *t = dp_tenant_by_name(dp, k->tenant);

	if (!t)
		set_reason(k->reason, "tenant %s has no routing table", k->tenant);
	return t;
}

/* ---- IPoIB links -------------------------------------------------------------------------- */

static struct dp_link *ipoib_add(struct gw_dp *dp, const struct gw_ipoib_link_config *c)
{
	struct dp_link *k = link_alloc(dp);
	struct dp_port *p;
	uint32_t ifindex;
	int ret;

	if (!k) {
		log_error("%s: too many links and interfaces (at most %d)", c->name, DP_MAX_LINKS);
		return NULL;
	}
	k->kind = DP_IPOIB;
	snprintf(k->name, sizeof(k->name), "%s", c->name);
	snprintf(k->tenant, sizeof(k->tenant), "%s", c->tenant);
	snprintf(k->device, sizeof(k->device), "%s", c->device);
	snprintf(k->backend, sizeof(k->backend), "%s", gw_ipoib_backend_name(c->backend));
	k->port_num = c->port;
	k->pkey = c->pkey;
	k->mode = c->mode;
	k->cfg_mtu = c->mtu;
	k->mcast_hop_limit = c->mcast_hop_limit;
	k->n_addrs = c->n_addresses < DP_MAX_ADDRS ? c->n_addresses : DP_MAX_ADDRS;
	memcpy(k->addrs, c->addresses, k->n_addrs * sizeof(k->addrs[0]));
	k->proxy_nd = c->proxy.nd;
	for (unsigned i = 0; i < c->proxy.n_prefixes && k->n_proxy6 < FWD_IF_MAX_PROXY; i++)
		if (c->proxy.prefixes[i].addr.family == AF_INET6)
			k->proxy6[k->n_proxy6++] = c->proxy.prefixes[i];
	if (!link_tenant(dp, k))
		return k;

	p = port_get(dp, c);
	k->port = p;
	if (!p) {
		set_reason(k->reason, "too many IB ports (at most %d)", DP_MAX_PORTS);
		return k;
	}
	if (!p->port) {
		snprintf(k->reason, sizeof(k->reason), "%s", p->reason);
		return k;
	}
	struct ipoib_link_config lc = {
		.name = k->name,
		.ops = p->ops,
		.port = p->port,
		.sa = p->sa,
		.attr = &p->pa,
		.loop = dp->loop,
		.pkey = c->pkey,
		.mcast_hop_limit = c->mcast_hop_limit,
		.role = IPOIB_ROLE_GATEWAY,
		/* Connected mode: one cm port per IB port, shared by its connected
		 * links. */
		.connected = c->mode == GW_IPOIB_CONNECTED,
		/* Deep UD queues where the pool's buffers are datagram-sized; with 64 KiB
		 * connected-mode buffers the library's 256. */
		.recv_depth = p->size.connected ? 0 : IB_UD_RECV_DEPTH_DG,
		.send_depth = p->size.connected ? 0 : IB_UD_SEND_DEPTH_DG,
		.defer = dp_defer,
		.neigh = dp->neigh,
		.state_cb = on_link_state,
		.cb_ctx = k,
	};
	if (lc.connected && !p->cmp) {
		/* The CM's MADs through libibumad. No datagram fallback: a link
		 * configured connected does not come up without its CM (the reason says
		 * why, e.g. the kernel's ib_cm holding the CM class, and the fix). */
		char why[512];

		ret =
		    ipoib_cm_port_open_umad(p->device, p->num, dp->loop, &p->cmp, why, sizeof(why));
		if (ret < 0) {
			p->cmp = NULL;
			log_error("%s: connected mode refused: %s", k->name, why);
			if (ret == -EBUSY)
				set_reason(
				    k->reason,
				    "connected mode refused: the kernel's ib_cm holds the CM "
				    "class on %s/%u (see the log)",
				    p->device, p->num);
			else
				set_reason(k->reason, "connected mode refused: %s", why);
			return k;
		}
	}
	lc.cm_port = p->cmp;
	/* The link's sends go through the engine's hook, whose context is its interface's:
	 * the index is reserved first, the interface added once the link exists. */
	ret = fwd_engine_if_reserve(dp->e, &ifindex);
	if (ret < 0) {
		set_reason(k->reason, "engine refused the interface: %s", strerror(-ret));
		log_error("%s: %s", k->name, k->reason);
		return k;
	}
	lc.post = fwd_engine_ib_post_send;
	lc.post_ctx = fwd_engine_if_post_ctx(dp->e, ifindex);
	ret = ipoib_link_new(&lc, &k->link);
	if (ret < 0) {
		(void)fwd_engine_if_del(dp->e, ifindex); /* the reservation */
		k->link = NULL;
		if (ret == -ENOENT)
			set_reason(k->reason, "P_Key 0x%04x is not in the port's P_Key table",
				   c->pkey);
		else
			set_reason(k->reason, "cannot create the IPoIB link: %s", strerror(-ret));
		log_error("%s: %s", k->name, k->reason);
		return k;
	}
	struct fwd_if_config fc = {
		.index = ifindex,
		.name = k->name,
		.rt = link_tenant(dp, k)->rt,
		.kind = FWD_IF_IPOIB,
		.worker = p->worker,
		.mtu = c->mtu,
		.ib_ops = p->ops,
		.ib_port = p->port,
		.link = k->link,
		.neigh = ipoib_link_neigh(k->link),
	};
	ret = fwd_engine_if_add(dp->e, &fc, &k->ifindex);
	if (ret < 0) {
		k->ifindex = 0;
		set_reason(k->reason, "engine refused the interface: %s", strerror(-ret));
		log_error("%s: %s", k->name, k->reason);
		/* Never started; its hooks' context names the index released here. */
		(void)fwd_engine_if_del(dp->e, ifindex);
		ipoib_link_stop(k->link);
		ipoib_link_free(k->link);
		k->link = NULL;
		return k;
	}
	set_reason(k->reason, "broadcast group not joined yet");
	if_add_addrs(dp, k);
	return k;
}

/* ---- Ethernet ------------------------------------------------------------------------------ */

static void eth_apply_state(struct gw_dp *dp, struct dp_link *k, const struct linkwatch_state *st)
{
	bool up = st->present && st->up;
	uint32_t mtu;

	k->carrier = up;
	k->absent = !st->present;
	if (k->eth)
		k->eops->set_link(k->eth, up);
	if (!k->ifindex)
		return;
	if (st->present && st->mtu) {
		mtu = k->cfg_mtu && k->cfg_mtu < st->mtu ? k->cfg_mtu : st->mtu;
		(void)fwd_engine_if_set_mtu(dp->e, k->ifindex, mtu);
	}
	if (st->present && memcmp(st->mac, "\0\0\0\0\0\0", 6))
		(void)fwd_engine_if_set_mac(dp->e, k->ifindex, st->mac);
	(void)fwd_engine_if_set_up(dp->e, k->ifindex, up);
	if (up)
		k->reason[0] = '\0';
	else if (!st->present)
		set_reason(k->reason, "device %s does not exist", k->device);
	else if (!(st->flags & 0x1 /* IFF_UP */))
		set_reason(k->reason, "device %s is administratively down", k->device);
	else
		set_reason(k->reason, "no carrier on %s", k->device);
	dp_ha_link_changed(dp, k);
}

static void on_link_change(const struct linkwatch_state *st, unsigned changes, void *arg)
{
	struct gw_dp *dp = arg;

	for (unsigned i = 0; i < dp->n_links; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->kind != DP_ETH || strcmp(k->device, st->name))
			continue;
		if (changes & (LINKWATCH_CHG_UP | LINKWATCH_CHG_PRESENT))
			log_event(LOG_NOTICE, IBGW_MSGID_LINK_STATE, "%s: %s link %s", k->name,
				  k->device, st->present && st->up ? "up" : "down");
		/* The port checks its sends against the MTU it read: re-read before the
		 * engine emits at a larger one. */
		if (k->eth && st->present && (changes & (LINKWATCH_CHG_MTU | LINKWATCH_CHG_MAC))) {
			int ret = k->eops->query(k->eth, &k->eattr);

			if (ret < 0)
				log_warning("%s: cannot query %s after a change: %s", k->name,
					    k->device, strerror(-ret));
			else if (changes & LINKWATCH_CHG_MTU)
				log_event(LOG_NOTICE, IBGW_MSGID_LINK_STATE, "%s: %s MTU %u",
					  k->name, k->device, k->eattr.mtu);
		}
		eth_apply_state(dp, k, st);
	}
}

static struct dp_link *eth_add(struct gw_dp *dp, const struct gw_eth_if_config *c, unsigned n)
{
	struct dp_link *k = link_alloc(dp);
	struct linkwatch_state st;
	int ret;

	if (!k) {
		log_error("%s: too many links and interfaces (at most %d)", c->name, DP_MAX_LINKS);
		return NULL;
	}
	k->kind = DP_ETH;
	snprintf(k->name, sizeof(k->name), "%s", c->name);
	snprintf(k->tenant, sizeof(k->tenant), "%s", c->tenant);
	snprintf(k->device, sizeof(k->device), "%s", c->device);
	snprintf(k->backend, sizeof(k->backend), "%s", gw_eth_backend_name(c->backend));
	k->vlan = c->vlan;
	k->cfg_mtu = c->mtu;
	k->n_addrs = c->n_addresses < DP_MAX_ADDRS ? c->n_addresses : DP_MAX_ADDRS;
	memcpy(k->addrs, c->addresses, k->n_addrs * sizeof(k->addrs[0]));
	if (!link_tenant(dp, k))
		return k;

	k->eops = ethp_backend(k->backend);
	if (!k->eops) {
		set_reason(k->reason, "Ethernet backend %s not built", k->backend);
		return k;
	}
	struct ethp_port_config pc = {
		.backend = k->backend,
		.device = k->device,
		.vlan = c->vlan,
		.n_bufs = ETH_N_BUFS_GSO,
		.buf_size = ETHP_BUF_MAX,
	};
	ret = k->eops->open(&pc, &k->eth);
	if (ret < 0) {
		k->eth = NULL;
		set_reason(k->reason, "cannot open %s (%s): %s", k->device, k->backend,
			   strerror(-ret));
		log_error("%s: %s", k->name, k->reason);
		return k;
	}
	ret = k->eops->query(k->eth, &k->eattr);
	if (ret < 0) {
		set_reason(k->reason, "cannot query %s: %s", k->device, strerror(-ret));
		k->eops->close(k->eth);
		k->eth = NULL;
		return k;
	}
	struct fwd_if_config fc = {
		.name = k->name,
		.rt = link_tenant(dp, k)->rt,
		.kind = FWD_IF_ETH,
		.worker = (dp->n_ports + n) % dp->n_workers,
		.mtu = k->eattr.mtu && k->eattr.mtu < c->mtu ? k->eattr.mtu : c->mtu,
		.eth_ops = k->eops,
		.eth = k->eth,
		.mac = k->eattr.mac,
		.vlan = c->vlan,
		.tx_gso = k->eattr.gso,
	};
	ret = fwd_engine_if_add(dp->e, &fc, &k->ifindex);
	if (ret < 0) {
		k->ifindex = 0;
		set_reason(k->reason, "engine refused the interface: %s", strerror(-ret));
		log_error("%s: %s", k->name, k->reason);
		return k;
	}
	if_add_addrs(dp, k);
	memset(&st, 0, sizeof(st));
	if (dp->linkwatch && linkwatch_add(dp->linkwatch, k->device, &st) == 0) {
		eth_apply_state(dp, k, &st);
	} else if (dp->linkwatch && linkwatch_get(dp->linkwatch, k->device, &st) == 0) {
		eth_apply_state(dp, k, &st); /* a second VLAN on the same device */
	} else {
		/* No netlink: trust the port's own view. */
		st.present = true;
		st.up = k->eattr.link_up;
		st.flags = 0x1;
		st.mtu = k->eattr.mtu;
		memcpy(st.mac, k->eattr.mac, 6);
		snprintf(st.name, sizeof(st.name), "%.*s", (int)sizeof(st.name) - 1, k->device);
		eth_apply_state(dp, k, &st);
	}
	log_notice("%s: %s%s%.0u (%s, %s), MAC %02x:%02x:%02x:%02x:%02x:%02x, MTU %u, %s", k->name,
		   k->device, c->vlan ? " vlan " : "", c->vlan, k->backend,
		   k->eattr.io ? k->eattr.io : "?", k->eattr.mac[0], k->eattr.mac[1],
		   k->eattr.mac[2], k->eattr.mac[3], k->eattr.mac[4], k->eattr.mac[5], fc.mtu,
		   k->carrier ? "up" : "down");
	return k;
}

/*
 * Each IB port's GID route table from gid_routes (source local), after the links exist:
 * a route goes to the port of its link. A port whose routes changed (a reload, a link
 * moved to its backup port) gets them anew, keeping which routers are down, and its
 * links ask for their paths again (local routes are not cached: the next answer comes
 * from the new table).
 */
static void gidroutes_apply(struct gw_dp *dp, const struct gw_config *cfg)
{
	for (unsigned pi = 0; pi < dp->n_ports; pi++) {
		struct dp_port *p = &dp->ports[pi];
		uint32_t sig = gw_reconf_gid_sig(cfg, p->backend, p->device, p->num);
		unsigned n_routes = 0;

		if (!p->gidroutes || sig == p->gid_sig)
			continue;
		sa_gidroutes_clear(p->gidroutes);
		for (unsigned i = 0; i < cfg->n_gid_routes; i++) {
			const struct gw_gid_route_config *g = &cfg->gid_routes[i];
			struct sa_router r[SA_ROUTE_MAX_ROUTERS];
			union ib_gid prefix;
			unsigned n = 0;

			if (!gw_reconf_gid_route_on(cfg, g, p->backend, p->device, p->num))
				continue;
			memcpy(prefix.raw, g->prefix.addr.bytes, 16);
			for (unsigned j = 0; j < g->n_routers && n < SA_ROUTE_MAX_ROUTERS; j++, n++)
				r[n] = (struct sa_router){ .lid = g->routers[j].lid,
							   .sl = g->routers[j].sl,
							   .mtu = mtu_code(g->routers[j].mtu),
							   .hop_limit = g->routers[j].hop_limit };
			if (sa_gidroutes_add(p->gidroutes, &prefix, g->prefix.len, r, n) < 0)
				log_error("GID route %u not installed on IB port %s/%u", i,
					  p->device, p->num);
			else
				n_routes++;
		}
		if (p->gid_sig)
			log_notice("IB port %s/%u: %u GID routes", p->device, p->num, n_routes);
		p->gid_sig = sig;
		for (unsigned i = 0; i < dp->n_links; i++)
			if (dp->links[i].kind == DP_IPOIB && dp->links[i].port == p &&
			    dp->links[i].link)
				ipoib_link_paths_requery(dp->links[i].link);
	}
}

/* ---- start / stop --------------------------------------------------------------------------- */

_Static_assert(GW_WORKERS_MAX == FWD_WORKERS_MAX, "the config's limit is the engine's");

static unsigned workers_of(const struct gw_config *cfg)
{
	return cfg->workers ? cfg->workers : 1;
}

int gw_dp_start(const struct gw_config *cfg, struct evloop *loop, struct gw_dp **out)
{
	struct gw_dp *dp = calloc(1, sizeof(*dp));
	int ret;

	if (!dp)
		return -ENOMEM;
	dp->loop = loop;
	rcu_register_thread();
	rcu_thread_offline();

	dp->n_workers = workers_of(cfg);
	ret = dp_tenants_init(dp);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "route table");
		goto fail;
	}
	dp->neigh = neigh_params_of(&cfg->neighbours);
	dp->punt = cfg->punt;
	struct fwd_engine_config ec = {
		.n_workers = dp->n_workers,
		.rt = dp->rt,
		.defer = dp_defer,
		.eth_neigh = dp->neigh,
		.msg_pool = cfg->punt.msg_pool,
		.punt = punt_config_of(&cfg->punt),
	};

	ret = fwd_engine_new(&ec, &dp->e);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "forwarding engine");
		goto fail;
	}
	dp_routers_config(dp, cfg);
	if (linkwatch_new(loop, on_link_change, dp, &dp->linkwatch) < 0) {
		log_warning("no netlink: Ethernet link state is not followed");
		dp->linkwatch = NULL;
	}
	dp_tenants_add(dp, cfg);
	dp->open_cfg = cfg;
	for (unsigned i = 0; i < cfg->n_ipoib_links && dp->n_links < DP_MAX_LINKS; i++)
		ipoib_add(dp, &cfg->ipoib_links[i]);
	dp->open_cfg = NULL;
	gidroutes_apply(dp, cfg);
	for (unsigned i = 0; i < cfg->n_eth_ifs && dp->n_links < DP_MAX_LINKS; i++)
		eth_add(dp, &cfg->eth_ifs[i], i);
	proxy_apply(dp, cfg);

	ret = fwd_sp_attach(dp->e, loop);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "slow path");
		goto fail;
	}
	dp->sp_attached = true;
	for (unsigned w = 0; w < dp->n_workers; w++) {
		struct fwd_worker_config wc = {
			.cpu = w < cfg->n_worker_cpus ? cfg->worker_cpus[w] : -1,
			.rt_priority = cfg->worker_rt_priority,
			.spin_us = cfg->busy_poll_us,
		};

		dp->worker_cpu[w] = wc.cpu;
		dp->worker_rt_priority = wc.rt_priority;
		dp->busy_poll_us = wc.spin_us;

		ret = fwd_worker_start(dp->e, w, &wc);
		if (ret < 0) {
			log_errno(LOG_ERR, -ret, "worker %u", w);
			goto fail;
		}
	}
	dp->workers_started = true;
	for (unsigned i = 0; i < dp->n_links; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->link && k->ifindex) {
			ret = ipoib_link_start(k->link);
			if (ret < 0) {
				set_reason(k->reason, "cannot start (broadcast join): %s",
					   strerror(-ret));
				log_error("%s: %s", k->name, k->reason);
			}
		}
	}
	dp->port_timer = evtimer_new(loop, on_port_timer, dp);
	if (dp->port_timer)
		evtimer_start(dp->port_timer, PORT_POLL_MS, PORT_POLL_MS);
	dp_tenants_apply(dp, cfg);  /* static routes, kernel tables */
	ret = dp_ha_start(dp, cfg); /* a pair that cannot start is no gateway to run */
	if (ret < 0)
		goto fail;
	dp_portfail_config(dp, cfg);
	dp_ra_config(dp, cfg);
	dp_mcast_config(dp, cfg);
	dp_dhcp_config(dp, cfg);
	log_notice("data plane: %u workers, %u IB ports, %u links", dp->n_workers, dp->n_ports,
		   dp->n_links);
	*out = dp;
	return 0;
fail:
	gw_dp_stop(dp);
	return ret < 0 ? ret : -EIO;
}

static void port_drain(struct dp_port *p)
{
	struct ibp_wc wcs[64];
	int n;

	/* The workers are stopped: reap the completions the QPs' destruction flushed. */
	for (unsigned q = 0; q < p->ops->queues(p->port); q++) {
		for (int round = 0; round < 64; round++) {
			n = p->ops->poll(p->port, q, wcs, 64);
			if (n <= 0)
				break;
			for (int i = 0; i < n; i++)
				if (wcs[i].buf)
					p->ops->buf_put(p->port, wcs[i].buf);
		}
	}
}

void gw_dp_stop(struct gw_dp *dp)
{
	if (!dp)
		return;
	dp_ra_stop(dp); /* first: its final RAs go out before the workers stop */
	dp_mcast_stop(dp);
	dp_ha_stop(dp); /* its last heartbeats hand the groups over */
	dp_dhcp_stop(dp);
	dp_portfail_stop(dp);
	dp_tenants_stop(dp);
	evtimer_free(dp->port_timer);
	if (dp->workers_started)
		fwd_worker_stop_all(dp->e);
	dp->workers_started = false; /* the engine's post hooks now post directly */
	if (dp->sp_attached)
		fwd_sp_detach(dp->e);
	for (unsigned i = 0; i < dp->n_links; i++)
		if (dp->links[i].link)
			ipoib_link_stop(dp->links[i].link);
	for (unsigned i = 0; i < dp->n_ports; i++) {
		struct dp_port *p = &dp->ports[i];

		if (!p->port)
			continue;
		port_drain(p);
		if (p->async_on)
			evloop_del_fd(dp->loop, p->ops->async_fd(p->port));
		if (p->sa)
			sa_client_free(p->sa);
		p->sa = NULL;
	}
	for (unsigned i = 0; i < dp->n_links; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->link)
			ipoib_link_free(k->link);
		k->link = NULL;
	}
	for (unsigned i = 0; i < dp->n_ports; i++) {
		struct dp_port *p = &dp->ports[i];

		ipoib_cm_port_close(p->cmp);
		p->cmp = NULL;
	}
	if (dp->linkwatch)
		linkwatch_free(dp->linkwatch);
	rcu_barrier(); /* every deferred free has run */
	if (dp->e)
		fwd_engine_free(dp->e);
	for (unsigned i = 0; i < dp->n_links; i++)
		if (dp->links[i].eth)
			dp->links[i].eops->close(dp->links[i].eth);
	for (unsigned i = 0; i < dp->n_ports; i++) {
		struct dp_port *p = &dp->ports[i];

		if (p->umad)
			sa_umad_close(p->umad);
		if (p->port)
			p->ops->close(p->port);
		sa_gidroutes_free(p->gidroutes); /* after its SA client */
	}
	rcu_barrier();
	dp_tenants_free(dp);
	free(dp);
	rcu_unregister_thread();
}

/* ---- reload ----------------------------------------------------------------------------------- */

/*
 * A reload applies the difference, link by link (matched by name):
 *   - gone from the file: the link or interface is taken out (below);
 *   - what it runs on changed (IPoIB: backend, device, port, P_Key, mode; Ethernet:
 *     backend, device, VLAN): taken out and built again, like a new one;
 *   - new: built and started as at start;
 *   - addresses, MTU and proxy settings: changed in place; the interface stays up;
 *   - an IB port whose links now need bigger buffers than it opened with: reopened,
 *     every link on it taken out and built again (port_reopen);
 * then static routes, proxy prefixes and the kernel routes. Nothing else is touched:
 * packets of the links that did not change keep flowing through the reload.
 */

void gw_reload_note(struct gw_reload_outcome *out, bool error, const char *fmt, ...)
{
	struct json_object *a = out ? (error ? out->errors : out->changes) : NULL;
	char line[512];
	va_list ap;

	if (!a)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	json_object_array_add(a, json_object_new_string(line));
}

/* What the running link was built from and last updated with, for gateway/reconf.c. */
static void reconf_link_of(const struct dp_link *k, struct gw_reconf_link *r)
{
	*r = (struct gw_reconf_link){
		.kind = k->kind == DP_IPOIB ? GW_RECONF_IPOIB
			: k->kind == DP_ETH ? GW_RECONF_ETH
					    : GW_RECONF_FREE,
		.mtu = k->cfg_mtu,
		.addrs = k->addrs,
		.n_addrs = k->n_addrs,
		.port = k->port_num,
		.pkey = k->pkey,
		.mode = k->mode,
		.mcast_hop_limit = k->mcast_hop_limit,
		.proxy_nd = k->proxy_nd,
		.proxy6 = k->proxy6,
		.n_proxy6 = k->n_proxy6,
		.vlan = k->vlan,
	};
	snprintf(r->name, sizeof(r->name), "%s", k->name);
	snprintf(r->backend, sizeof(r->backend), "%s", k->backend);
	snprintf(r->device, sizeof(r->device), "%s", k->device);
	snprintf(r->tenant, sizeof(r->tenant), "%s", k->tenant);
}

static bool device_watched_by_other(const struct gw_dp *dp, const struct dp_link *k)
{
	for (unsigned i = 0; i < dp->n_links; i++) {
		const struct dp_link *o = &dp->links[i];

		if (o != k && o->kind == DP_ETH && !strcmp(o->device, k->device))
			return true;
	}
	return false;
}

/*
 * Take a running link or interface out without stopping the workers. Order matters:
 * the interface leaves the engine's snapshot first; once every worker has passed a
 * quiescent state (synchronize_rcu) none polls the port for it or holds one of its
 * completions; then the link stops (groups left, connections down, QPs destroyed, after
 * which no completion of them appears), a second grace period lets any batch polled
 * before the destroy finish, and only then is the memory freed. The IB port stays open
 * for the other links (and a later one).
 */
static void link_remove(struct gw_dp *dp, struct dp_link *k, const char *why)
{
	uint32_t ifindex = k->ifindex;
	int ret;

	log_notice("%s: taken down: %s", k->name, why);
	gw_reload_note(dp->outcome, false, "%s: taken down: %s", k->name, why);
	if (ifindex) {
		ret = fwd_engine_if_del(dp->e, ifindex);
		if (ret < 0)
			log_errno(LOG_ERR, -ret, "%s: cannot remove the interface", k->name);
	}
	k->ifindex = 0;            /* its link's state changes no longer reach the engine */
	dp_ha_link_changed(dp, k); /* a heartbeat path gone is a path down */
	synchronize_rcu();
	if (k->kind == DP_IPOIB && k->link) {
		ipoib_link_stop(k->link);
		synchronize_rcu();
		ipoib_link_free(k->link);
	} else if (k->kind == DP_ETH) {
		if (dp->linkwatch && !device_watched_by_other(dp, k))
			(void)linkwatch_del(dp->linkwatch, k->device);
		if (k->eth)
			k->eops->close(k->eth);
	}
	memset(k, 0, sizeof(*k)); /* DP_NONE: a free slot */
}

/*
 * An IB port whose new config needs bigger buffers than it was opened with (a connected
 * link on a port opened for datagram, more connected links than it has buffers for:
 * gw_reconf_port_reopen) is closed and opened again, sized as a start with the new
 * config would size it (its queues too: one per worker of the new config). Its buffers
 * and queues are fixed while it is open (the pool is registered memory, every CQ is
 * sized to it), so every link on it goes: gw_dp_reconfigure takes them out with
 * link_remove (after which no worker polls the port or holds one of its buffers: the
 * interfaces left the engine's snapshot and a grace period passed), port_reopen closes
 * and opens the port, and the links are added and started again as at start. The
 * struct dp_port stays where it is (the links, dp_ha, dp_routers, dp_portfail and gwctl
 * find it by address or index and read its handles each time): only the port handle,
 * its attributes and its CM port change; its SA client, umad transport and GID route
 * table stay. A port is never reopened to shrink, nor for more workers alone (their
 * handover keeps the traffic flowing; a reopen would stop it).
 */
struct port_reopen {
	bool on;
	struct gw_reconf_port_size want;
	char why[64];
	char links[DP_REASON_LEN]; /* the links rebuilt with it, for the note */
};

/* Which ports this reload reopens; the running links on them are rebuilt (v[i]). */
static void ports_reopen_plan(struct gw_dp *dp, const struct gw_config *cfg,
			      struct gw_reconf_verdict *v, unsigned n, struct port_reopen *r)
{
	for (unsigned pi = 0; pi < dp->n_ports; pi++) {
		struct dp_port *p = &dp->ports[pi];
		size_t len = 0;

		r[pi] = (struct port_reopen){ .on = false };
		if (!p->port)
			continue;
		r[pi].want = gw_reconf_port_want(cfg, p->backend, p->device, p->num);
		r[pi].on = gw_reconf_port_reopen(&p->size, p->ops->queues(p->port), &r[pi].want,
						 r[pi].why, sizeof(r[pi].why));
		for (unsigned i = 0; r[pi].on && i < n; i++) {
			const struct dp_link *k = &dp->links[i];

			if (k->kind != DP_IPOIB || k->port != p || v[i].action == GW_RECONF_REMOVE)
				continue;
			if (v[i].action != GW_RECONF_REBUILD)
				v[i] = (struct gw_reconf_verdict){ GW_RECONF_REBUILD, 0,
								   "its IB port is reopened" };
			if (len < sizeof(r[pi].links))
				len +=
				    (size_t)snprintf(r[pi].links + len, sizeof(r[pi].links) - len,
						     "%s%s", len ? ", " : "", k->name);
		}
	}
}

/* Close port p, whose links are all taken out (link_remove), and open it again sized
 * for r->want. Its SA transport and client stay as they are: they do not use the port's
 * buffers, the port keeps its LID and GID, and so its path cache, trap subscriptions and
 * router watch carry on (under umad2sim an SA agent closed and opened again would also
 * lose MADs: its classes are handed to the agent registered last). */
static void port_reopen(struct gw_dp *dp, struct dp_port *p, const struct port_reopen *r)
{
	unsigned nq;
	int ret;

	if (p->async_on)
		evloop_del_fd(dp->loop, p->ops->async_fd(p->port));
	p->async_on = false;
	ipoib_cm_port_close(p->cmp); /* its links are stopped and freed */
	p->cmp = NULL;
	port_drain(p); /* no worker polls it: its interfaces are gone, a grace period passed */
	p->ops->close(p->port);
	p->port = NULL;
	p->size = r->want;
	ret = port_open_ib(p);
	if (ret < 0) {
		log_error("IB port %s/%u: not reopened: %s", p->device, p->num, p->reason);
		gw_reload_note(dp->outcome, true, "IB port %s/%u: not reopened: %s", p->device,
			       p->num, p->reason);
		return;
	}
	port_async_on(dp, p);
	if (p->umad)
		sa_umad_poll_port(p->umad);
	nq = p->ops->queues(p->port);
	log_notice("IB port %s/%u: reopened for %s (%u buffers of %u octets, %u queue%s); "
		   "links %s rebuilt",
		   p->device, p->num, r->why, port_n_bufs(&p->size),
		   (unsigned)(p->size.connected ? IB_BUF_SIZE_CM : IB_BUF_SIZE), nq,
		   nq == 1 ? "" : "s", r->links[0] ? r->links : "(none)");
	gw_reload_note(dp->outcome, false, "IB port %s/%u: reopened for %s; links %s rebuilt",
		       p->device, p->num, r->why, r->links[0] ? r->links : "(none)");
}

/* Addresses: add the new ones, then delete the gone ones (a renumbering keeps the
 * interface reachable throughout). */
static void addrs_apply(struct gw_dp *dp, struct dp_link *k, const struct ip_prefix *want,
			unsigned n_want)
{
	char buf[IP_PREFIX_STRLEN];
	struct ip_prefix keep[DP_MAX_ADDRS];
	unsigned n_keep = 0;

	if (n_want > DP_MAX_ADDRS)
		n_want = DP_MAX_ADDRS;
	for (unsigned i = 0; i < n_want; i++) {
		bool have = false;

		for (unsigned j = 0; j < k->n_addrs && !have; j++)
			have = k->addrs[j].len == want[i].len &&
			       ip_addr_equal(&k->addrs[j].addr, &want[i].addr);
		if (!have) {
			int ret = fwd_engine_if_add_addr(dp->e, k->ifindex, &want[i]);

			if (ret < 0) {
				log_errno(LOG_ERR, -ret, "%s: address %s not added", k->name,
					  ip_prefix_format(&want[i], buf, sizeof(buf)));
				gw_reload_note(dp->outcome, true, "%s: address %s not added: %s",
					       k->name, buf, strerror(-ret));
				continue;
			}
			if (k->link)
				(void)ipoib_link_add_addr(k->link, want[i].addr.family,
							  want[i].addr.bytes);
			log_notice("%s: address %s added", k->name,
				   ip_prefix_format(&want[i], buf, sizeof(buf)));
			gw_reload_note(dp->outcome, false, "%s: address %s added", k->name, buf);
		}
		keep[n_keep++] = want[i];
	}
	for (unsigned j = 0; j < k->n_addrs; j++) {
		bool wanted = false;

		for (unsigned i = 0; i < n_keep && !wanted; i++)
			wanted = keep[i].len == k->addrs[j].len &&
				 ip_addr_equal(&keep[i].addr, &k->addrs[j].addr);
		if (wanted)
			continue;
		if (k->link)
			(void)ipoib_link_del_addr(k->link, k->addrs[j].addr.family,
						  k->addrs[j].addr.bytes);
		if (fwd_engine_if_del_addr(dp->e, k->ifindex, &k->addrs[j]) == 0) {
			log_notice("%s: address %s removed", k->name,
				   ip_prefix_format(&k->addrs[j], buf, sizeof(buf)));
			gw_reload_note(dp->outcome, false, "%s: address %s removed", k->name, buf);
		}
	}
	memcpy(k->addrs, keep, n_keep * sizeof(keep[0]));
	k->n_addrs = n_keep;
}

/* What changes in place (changes: GW_RECONF_* bits, gateway/reconf.c): addresses, MTU,
 * the IPoIB link's proxy-ND settings; its proxy-ND groups are joined again either way. */
static void link_update(struct gw_dp *dp, struct dp_link *k, const struct gw_config *cfg,
			unsigned changes)
{
	const struct ip_prefix *addrs;
	unsigned n_addrs;
	uint32_t mtu;

	if (k->kind == DP_IPOIB) {
		const struct gw_ipoib_link_config *c = gw_reconf_ipoib_cfg(cfg, k->name);

		addrs = c->addresses;
		n_addrs = c->n_addresses;
		mtu = c->mtu;
		if (changes & GW_RECONF_PROXY) {
			k->proxy_nd = c->proxy.nd;
			k->n_proxy6 = 0;
			for (unsigned i = 0;
			     i < c->proxy.n_prefixes && k->n_proxy6 < FWD_IF_MAX_PROXY; i++)
				if (c->proxy.prefixes[i].addr.family == AF_INET6)
					k->proxy6[k->n_proxy6++] = c->proxy.prefixes[i];
		}
	} else {
		const struct gw_eth_if_config *c = gw_reconf_eth_cfg(cfg, k->name, NULL);

		addrs = c->addresses;
		n_addrs = c->n_addresses;
		mtu = c->mtu;
	}
	if (!k->ifindex)
		return; /* never got as far as the engine: nothing runs to update */
	if (changes & GW_RECONF_ADDRS)
		addrs_apply(dp, k, addrs, n_addrs);
	if (changes & GW_RECONF_MTU) {
		k->cfg_mtu = mtu;
		if (k->kind == DP_ETH) {
			struct linkwatch_state st;

			if (dp->linkwatch && linkwatch_get(dp->linkwatch, k->device, &st) == 0)
				eth_apply_state(dp, k, &st); /* the smaller of config and device */
			else
				(void)fwd_engine_if_set_mtu(dp->e, k->ifindex, mtu);
		} else if (k->link && ipoib_link_ud_qp(k->link)) {
			on_link_state(k, k->link, true); /* recomputes the link's MTU */
		}
		log_notice("%s: MTU %u", k->name, mtu);
		gw_reload_note(dp->outcome, false, "%s: MTU %u", k->name, mtu);
	}
	if (changes & GW_RECONF_PROXY)
		gw_reload_note(dp->outcome, false, "%s: proxy-ND settings changed", k->name);
	if (k->kind == DP_IPOIB && k->proxy_nd && k->link && !k->reason[0])
		proxy_groups_configured(k);
}

/*
 * A reload's gateway.workers: the ports spread again over the new number as a start
 * spreads them (IB ports round-robin in order, then the Ethernet interfaces), and
 * fwd_worker_set_count hands each port that changes worker over (the old worker lets
 * go before the new one polls it), starts the new workers and stops the extra ones.
 * Traffic keeps flowing: a moving port's queues hold what arrives for a grace period.
 */
static void workers_apply(struct gw_dp *dp, const struct gw_config *cfg)
{
	unsigned n = workers_of(cfg), next = dp->n_ports, port_worker[DP_MAX_PORTS];
	unsigned worker_of[FWD_IF_MAX] = { 0 };
	struct fwd_worker_config wc[FWD_WORKERS_MAX];
	int ret;

	if (n == dp->n_workers || !dp->workers_started)
		return;
	for (unsigned i = 0; i < dp->n_ports; i++)
		port_worker[i] = i % n;
	for (unsigned i = 0; i < dp->n_links; i++) {
		const struct dp_link *k = &dp->links[i];

		if (k->kind == DP_IPOIB && k->ifindex)
			worker_of[k->ifindex] = port_worker[k->port - dp->ports];
		else if (k->kind == DP_ETH && k->ifindex)
			worker_of[k->ifindex] = next++ % n;
	}
	for (unsigned w = 0; w < n; w++)
		wc[w] = (struct fwd_worker_config){
			.cpu = w < cfg->n_worker_cpus ? cfg->worker_cpus[w] : -1,
			.rt_priority = cfg->worker_rt_priority,
			.spin_us = dp->busy_poll_us,
		};
	ret = fwd_worker_set_count(dp->e, n, worker_of, wc);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "reload: workers stay %u (not %u)", dp->n_workers, n);
		gw_reload_note(dp->outcome, true, "workers stay %u (not %u): %s", dp->n_workers, n,
			       strerror(-ret));
		return;
	}
	for (unsigned i = 0; i < dp->n_ports; i++)
		dp->ports[i].worker = port_worker[i];
	for (unsigned w = dp->n_workers; w < n; w++)
		dp->worker_cpu[w] = wc[w].cpu;
	log_notice("reload: %u workers (were %u)", n, dp->n_workers);
	gw_reload_note(dp->outcome, false, "workers: %u (were %u)", n, dp->n_workers);
	dp->n_workers = n;
}

/* Whether link k runs as configured: it reached the engine (its port, device and P_Key
 * could be had) and, for Ethernet, its device exists. Waiting for a carrier or for the
 * broadcast group's join is the ordinary state of a link coming up, not an error. */
static bool link_runs(const struct dp_link *k)
{
	return k->ifindex && !(k->kind == DP_ETH && k->absent);
}

/* A link or interface this reload added (new, or rebuilt), as the operator is told. */
static void note_added(struct gw_dp *dp, const char *name, const struct dp_link *k)
{
	if (!k)
		gw_reload_note(dp->outcome, true, "%s: not brought up: too many links (at most %d)",
			       name, DP_MAX_LINKS);
	else if (link_runs(k))
		gw_reload_note(dp->outcome, false, "%s: brought up%s%s", name,
			       k->reason[0] ? ", " : "", k->reason);
}

void gw_dp_reconfigure(struct gw_dp *dp, const struct gw_config *cfg, struct gw_reload_outcome *out)
{
	struct gw_reconf_link run[DP_MAX_LINKS];
	struct gw_reconf_verdict v[DP_MAX_LINKS];
	struct port_reopen reopen[DP_MAX_PORTS];
	unsigned removed = 0, added = 0, n = dp->n_links;

	dp->outcome = out;
	dp_tenants_add(dp, cfg);     /* before the links that name them */
	dp_portfail_config(dp, cfg); /* a reload puts moved links back on their port */
	dp_routers_config(dp, cfg);
	/* Decided for all first (gateway/reconf.c), from the links as they run now. */
	for (unsigned i = 0; i < n; i++)
		reconf_link_of(&dp->links[i], &run[i]);
	gw_reconf_plan(run, n, cfg, v);
	ports_reopen_plan(dp, cfg, v, n, reopen);
	for (unsigned i = 0; i < n; i++) {
		struct dp_link *k = &dp->links[i];

		if (k->kind == DP_NONE)
			continue;
		if (v[i].action == GW_RECONF_REBUILD || v[i].action == GW_RECONF_REMOVE) {
			link_remove(dp, k, v[i].reason);
			removed++;
		} else {
			link_update(dp, k, cfg, v[i].changes);
		}
	}
	for (unsigned pi = 0; pi < dp->n_ports; pi++)
		if (reopen[pi].on)
			port_reopen(dp, &dp->ports[pi], &reopen[pi]);
	dp->open_cfg = cfg; /* a port opened for a link added now is sized for it */
	for (unsigned i = 0; i < cfg->n_ipoib_links; i++) {
		struct dp_link *k;

		if (!gw_reconf_to_add(run, v, n, cfg->ipoib_links[i].name))
			continue;
		k = ipoib_add(dp, &cfg->ipoib_links[i]);
		added++;
		if (k && k->link && k->ifindex && ipoib_link_start(k->link) < 0)
			set_reason(k->reason, "cannot start (broadcast join)");
		note_added(dp, cfg->ipoib_links[i].name, k);
	}
	dp->open_cfg = NULL;
	for (unsigned i = 0; i < cfg->n_eth_ifs; i++) {
		if (!gw_reconf_to_add(run, v, n, cfg->eth_ifs[i].name))
			continue;
		note_added(dp, cfg->eth_ifs[i].name, eth_add(dp, &cfg->eth_ifs[i], i));
		added++;
	}
	if (removed || added)
		log_notice("reload: %u links/interfaces taken down, %u brought up", removed, added);
	/* The config as written names every link: one that does not run (added now or
	 * earlier) makes the reload's outcome an error, with why. */
	for (unsigned i = 0; i < dp->n_links; i++) {
		const struct dp_link *k = &dp->links[i];

		if (k->kind != DP_NONE && !link_runs(k))
			gw_reload_note(out, true, "%s: not running: %s", k->name,
				       k->reason[0] ? k->reason : "it cannot be opened");
	}
	gidroutes_apply(dp, cfg);
	proxy_apply(dp, cfg);
	dp_tenants_apply(dp, cfg); /* static routes, kernel tables; tenants gone freed */
	if (cfg->failover.enabled != (dp->ha != NULL)) {
		log_warning("reload: failover %s takes effect at the next start",
			    cfg->failover.enabled ? "added" : "removed");
		gw_reload_note(out, false, "failover %s: takes effect at the next start",
			       cfg->failover.enabled ? "added" : "removed");
	}
	dp_ha_config(dp, cfg, out);
	dp_ra_config(dp, cfg);
	dp_mcast_config(dp, cfg);
	dp_dhcp_config(dp, cfg);
	struct neigh_params np = neigh_params_of(&cfg->neighbours);
	if (memcmp(&np, &dp->neigh, sizeof(np))) {
		log_warning("reload: neighbours limits take effect at the next start");
		gw_reload_note(out, false, "neighbours limits: take effect at the next start");
	}
	/* The workers read their limits without a lock, their buckets are theirs, the pools
	 * are sized once: punt: is read at start only (new workers get the running one). */
	if (memcmp(&cfg->punt, &dp->punt, sizeof(dp->punt))) {
		log_warning("reload: punt limits take effect at the next start");
		gw_reload_note(out, false, "punt limits: take effect at the next start");
	}
	workers_apply(dp, cfg);
	for (unsigned w = 0; w < dp->n_workers && dp->workers_started; w++) {
		int cpu = w < cfg->n_worker_cpus ? cfg->worker_cpus[w] : -1, ret;

		if (cpu == dp->worker_cpu[w])
			continue;
		ret = fwd_worker_set_cpu(dp->e, w, cpu);
		if (ret < 0) {
			log_errno(LOG_ERR, -ret, "reload: worker %u not moved to CPU %d", w, cpu);
			continue;
		}
		dp->worker_cpu[w] = cpu;
		if (cpu >= 0)
			log_notice("reload: worker %u pinned to CPU %d", w, cpu);
		else
			log_notice("reload: worker %u no longer pinned", w);
		gw_reload_note(out, false, "worker %u: %s%.0d", w,
			       cpu >= 0 ? "pinned to CPU " : "no longer pinned", cpu);
	}
	if (cfg->worker_rt_priority != dp->worker_rt_priority && dp->workers_started) {
		unsigned prio = cfg->worker_rt_priority;
		int ret = 0;

		for (unsigned w = 0; w < dp->n_workers && ret == 0; w++)
			ret = fwd_worker_set_rt_priority(dp->e, w, prio);
		if (ret < 0) {
			log_errno(LOG_ERR, -ret,
				  "reload: workers not set to SCHED_FIFO priority %u", prio);
			gw_reload_note(out, true, "workers: SCHED_FIFO priority %u not set: %s",
				       prio, strerror(-ret));
		} else {
			dp->worker_rt_priority = prio;
			log_notice("reload: workers at %s priority %u",
				   prio ? "SCHED_FIFO" : "normal", prio);
			gw_reload_note(out, false, "workers: %s priority %u",
				       prio ? "SCHED_FIFO" : "normal", prio);
		}
	}
	if (cfg->busy_poll_us != dp->busy_poll_us && dp->workers_started) {
		for (unsigned w = 0; w < dp->n_workers; w++)
			fwd_worker_set_spin(dp->e, w, cfg->busy_poll_us);
		dp->busy_poll_us = cfg->busy_poll_us;
		log_notice("reload: workers poll %u us before sleeping", cfg->busy_poll_us);
		gw_reload_note(out, false, "workers: busy poll %u us", cfg->busy_poll_us);
	}
	log_info("reload: applied");
	dp->outcome = NULL;
}
