/*
 * The IPoIB link's life (ipoib_link.h for the lifecycle): ipoib_link_new checks the P_Key
 * against the port's table and makes the neighbour table (and, connected, takes its
 * place on the port's CM transport); start joins the broadcast group (mcast.c creates the UD
 * QP and brings the link up when the join answers); port events take it down or mark
 * its paths for a new query; a UD QP that goes to the error state is brought back
 * with its QPN (ud_qp_failed); stop leaves the groups and destroys the QPs; the tick
 * runs the neighbour timers and the connections' bookkeeping. Also the drop reasons' names,
 * the accessors and the counters (the data path's atomics added in).
 *
 * Threads: control thread (the host role's one thread). ipoib_link_stats reads the
 * workers' counters with relaxed loads.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipoib/ipoib_pvt.h"
#include "pkt/nd.h"
#include "lib/evloop.h"
#include "lib/ib_types.h"
#include "lib/log.h"
#include "sm-client/sa.h"

#define TICK_MS 250

static const char *const drop_names[IPOIB_DROP_COUNT] = {
	[IPOIB_DROP_RX_ERROR] = "rx_error",           [IPOIB_DROP_RX_SHORT] = "rx_short",
	[IPOIB_DROP_RX_ETHERTYPE] = "rx_ethertype",   [IPOIB_DROP_RX_LOOP] = "rx_loop",
	[IPOIB_DROP_RX_BAD_IP] = "rx_bad_ip",         [IPOIB_DROP_RX_BAD_ARP] = "rx_bad_arp",
	[IPOIB_DROP_RX_BAD_ND] = "rx_bad_nd",         [IPOIB_DROP_ARP_SPOOF] = "arp_spoof",
	[IPOIB_DROP_ND_SPOOF] = "nd_spoof",           [IPOIB_DROP_TX_DOWN] = "tx_down",
	[IPOIB_DROP_TX_TOO_BIG] = "tx_too_big",       [IPOIB_DROP_TX_NO_PATH] = "tx_no_path",
	[IPOIB_DROP_TX_PATH_QUEUE] = "tx_path_queue", [IPOIB_DROP_TX_MCAST_JOIN] = "tx_mcast_join",
	[IPOIB_DROP_TX_NEIGH] = "tx_neigh",           [IPOIB_DROP_TX_POST] = "tx_post",
	[IPOIB_DROP_TX_NOBUF] = "tx_nobuf",           [IPOIB_DROP_TX_CONN] = "tx_conn",
};

const char *ipoib_drop_name(enum ipoib_drop d)
{
	return (unsigned)d < IPOIB_DROP_COUNT ? drop_names[d] : "?";
}

static void on_tick(struct evloop *loop, struct evtimer *t, void *arg)
{
	(void)loop;
	(void)t;
	ipoib_link_tick(arg);
}

int ipoib_link_new(const struct ipoib_link_config *cfg, struct ipoib_link **out)
{
	struct ipoib_link *l;
	struct neigh_config nc;
	int ret;
	unsigned i;

	if (!cfg->ops || !cfg->port)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	l->ops = cfg->ops;
	l->pkey = cfg->pkey ? cfg->pkey : 0xffff;
	l->pkey |= 0x8000;
	l->scope = cfg->scope ? cfg->scope : IB_MGID_SCOPE_LINK;
	snprintf(l->name, sizeof(l->name), "%s", cfg->name ? cfg->name : "ipoib");
	if (!l->cfg.recv_depth)
		l->cfg.recv_depth = 256;
	if (!l->cfg.send_depth)
		l->cfg.send_depth = 256;
	l->nq = l->ops->queues(cfg->port);
	if (cfg->attr) {
		l->pa = *cfg->attr;
	} else if ((ret = l->ops->query(cfg->port, &l->pa)) < 0) {
		free(l);
		return ret;
	}
	l->cfg.attr = NULL;
	for (i = 0; i < l->pa.n_pkeys; i++)
		if ((l->pa.pkeys[i] & 0x7fff) == (l->pkey & 0x7fff) && (l->pa.pkeys[i] & 0x7fff))
			break;
	if (i == l->pa.n_pkeys) {
		char tbl[128] = "";
		size_t o = 0;

		for (unsigned k = 0; k < l->pa.n_pkeys && o + 8 < sizeof(tbl); k++)
			if (l->pa.pkeys[k] & 0x7fff)
				o += (size_t)snprintf(tbl + o, sizeof(tbl) - o, " 0x%04x",
						      l->pa.pkeys[k]);
		log_error("%s: P_Key 0x%04x is not in the port's P_Key table (has:%s)", l->name,
			  l->pkey, o ? tbl : " nothing");
		free(l);
		return -ENOENT;
	}
	l->pkey_index = (uint16_t)i;
	ib_gid_set(&l->gid, l->pa.gid_prefix, l->pa.port_guid);
	memset(&nc, 0, sizeof(nc));
	nc.params = cfg->neigh;
	nc.ops = &ipoib_neigh_ops;
	nc.ops_ctx = l;
	nc.defer = cfg->defer;
	nc.defer_ctx = cfg->defer_ctx;
	ret = neigh_table_new(&nc, &l->neigh);
	if (ret < 0) {
		free(l);
		return ret;
	}
	/* IPv6 link-local from the port GUID comes first among the IPv6 addresses. */
	ipoib_ipv6_link_local(l->pa.port_guid, l->v6[0]);
	l->n_v6 = 1;
	if (cfg->loop) {
		l->tick = evtimer_new(cfg->loop, on_tick, l);
		if (!l->tick) {
			neigh_table_free(l->neigh);
			free(l);
			return -ENOMEM;
		}
	}
	if (cfg->connected) {
		/* The port's CM MAD transport, which the caller opened (shared by the port's
		 * connected links). */
		l->cmp = cfg->cm_port;
		ret = l->cmp ? ipoib_cmp_add(l->cmp, l) : -EINVAL;
		if (ret < 0) {
			log_errno(LOG_ERR, -ret, "%s: connected mode without its CM transport",
				  l->name);
			goto fail_cm;
		}
	}
	*out = l;
	return 0;
fail_cm:
	if (l->tick)
		evtimer_free(l->tick);
	neigh_table_free(l->neigh);
	free(l);
	return ret;
}

int ipoib_create_qp(struct ipoib_link *l)
{
	struct ibp_qp_init qi = {
		.type = IBP_QPT_UD,
		.pkey_index = l->pkey_index,
		.qkey = l->qkey,
		.send_depth = l->cfg.send_depth,
		.recv_depth = l->cfg.recv_depth,
		.user = l,
	};
	int ret = l->ops->create_qp(l->cfg.port, &qi, &l->qp);

	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: cannot create the UD QP", l->name);
		l->qp = NULL;
		return ret;
	}
	ret = l->ops->qp_ready(l->qp, NULL);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "%s: UD QP not ready", l->name);
		l->ops->destroy_qp(l->qp);
		l->qp = NULL;
		return ret;
	}
	l->qpn = l->ops->qp_num(l->qp);
	l->hw.flags = l->cfg.connected ? IPOIB_HWADDR_F_RC : 0;
	l->hw.qpn = l->qpn;
	l->hw.gid = l->gid;
	ipoib_hwaddr_encode(&l->hw, l->hw_bytes, sizeof(l->hw_bytes));
	unsigned posted = 0;

	for (unsigned q = 0; q < l->nq; q++) {
		for (unsigned i = 0; i < l->cfg.recv_depth; i++) {
			struct ibp_buf *b = l->ops->buf_get(l->cfg.port);

			if (!b)
				break;
			if (l->ops->post_recv(l->qp, q, &b, 1) != 1) {
				l->ops->buf_put(l->cfg.port, b);
				break;
			}
			posted++;
		}
	}
	/* A receive queue shallower than asked drops bursts unseen (UD has no flow
	 * control): say so once, here, where it is known. */
	if (posted < l->cfg.recv_depth * l->nq)
		log_warning("%s: UD QP 0x%x: %u of %u receives posted (the port's buffer pool is "
			    "short)",
			    l->name, l->qpn, posted, l->cfg.recv_depth * l->nq);
	else
		log_info("%s: UD QP 0x%x: %u receives posted on each of %u queue%s, up to %u sends",
			 l->name, l->qpn, l->cfg.recv_depth, l->nq, l->nq == 1 ? "" : "s",
			 l->cfg.send_depth);
	if (l->cfg.connected && !l->cm && (ret = ipoib_cm_start(l)) < 0) {
		/* Without the cm the RC flag would be a lie: datagram only. */
		ipoib_cm_stop(l);
		l->hw.flags = 0;
		ipoib_hwaddr_encode(&l->hw, l->hw_bytes, sizeof(l->hw_bytes));
		log_warning("%s: connected mode failed: running in datagram mode", l->name);
	}
	return 0;
}

void ipoib_set_up(struct ipoib_link *l, bool up)
{
	char hs[IPOIB_HWADDR_STRLEN];

	if (l->up == up)
		return;
	if (up && l->qp_broken)
		return; /* not with a UD QP in error: the tick brings it up once recovered */
	l->up = up;
	if (up) {
		l->st.up_count++;
		ipoib_hwaddr_format(&l->hw, hs, sizeof(hs));
		log_event(LOG_NOTICE, IBGW_MSGID_LINK_STATE,
			  "%s: up: P_Key 0x%04x qpn 0x%x mtu %u qkey 0x%x sl %u hwaddr %s", l->name,
			  l->pkey, l->qpn, l->mtu, l->qkey, l->sl, hs);
		if (l->tick)
			evtimer_start(l->tick, TICK_MS, TICK_MS);
	} else {
		l->st.down_count++;
		log_event(LOG_NOTICE, IBGW_MSGID_LINK_STATE, "%s: down", l->name);
		ipoib_conn_disconnect_all(l);
		neigh_flush(l->neigh);
		for (struct ipoib_path *p = l->paths; p; p = p->next)
			ipoib_path_flush_queue(p, false);
	}
	if (l->cfg.state_cb)
		l->cfg.state_cb(l->cfg.cb_ctx, l, up);
}

static void join_v6_groups(struct ipoib_link *l)
{
	union ib_gid mgid;
	uint8_t sn[16];

	ipoib_mgid_from_ipv6(nd_all_nodes, l->pkey, l->scope, &mgid);
	ipoib_mcast_get(l, &mgid, true);
	for (unsigned i = 0; i < l->n_v6; i++) {
		nd_solicited_node(l->v6[i], sn);
		ipoib_mgid_from_ipv6(sn, l->pkey, l->scope, &mgid);
		ipoib_mcast_get(l, &mgid, true);
	}
}

int ipoib_link_start(struct ipoib_link *l)
{
	union ib_gid mgid;
	int ret;

	if (l->started)
		return 0;
	ret = ipoib_mgid_broadcast(l->pkey, l->scope, &mgid);
	if (ret < 0)
		return ret;
	l->bcast = ipoib_mcast_get(l, &mgid, true);
	if (!l->bcast)
		return -ENOMEM;
	l->bcast->bcast = true;
	join_v6_groups(l);
	l->started = true;
	/* The broadcast group first: it is at the list's tail. */
	ret = ipoib_mcast_sa_join(l->bcast);
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
		if (m != l->bcast)
			ipoib_mcast_sa_join(m);
	return ret == -EEXIST ? 0 : ret;
}

void ipoib_link_stop(struct ipoib_link *l)
{
	if (l->tick)
		evtimer_stop(l->tick);
	if (l->up)
		ipoib_set_up(l, false);
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next) {
		if (l->started && l->cfg.sa)
			sa_mcast_leave(l->cfg.sa, &m->mgid);
		if (m->attached && l->qp)
			l->ops->detach_mcast(l->qp, &m->mgid, m->attached_mlid);
		ipoib_mcast_flush(m, false);
		m->attached = m->joined = false;
	}
	l->started = false;
	ipoib_cm_stop(l);
	if (l->qp) {
		l->ops->destroy_qp(l->qp);
		l->qp = NULL;
	}
	l->qp_broken = false;
	atomic_store_explicit(&l->ud_qp_check, 0, memory_order_relaxed);
}

void ipoib_link_free(struct ipoib_link *l)
{
	if (!l)
		return;
	if (l->qp || l->started)
		ipoib_link_stop(l);
	neigh_table_free(l->neigh);
	while (l->paths) {
		struct ipoib_path *p = l->paths;

		l->paths = p->next;
		ipoib_path_flush_queue(p, false);
		if (p->ah)
			l->ops->destroy_ah(p->ah);
		free(p);
	}
	while (l->mcasts) {
		struct ipoib_mcast *m = l->mcasts;

		l->mcasts = m->next;
		ipoib_mcast_flush(m, false);
		if (m->ah)
			l->ops->destroy_ah(m->ah);
		free(m);
	}
	if (l->tick)
		evtimer_free(l->tick);
	if (l->cmp)
		ipoib_cmp_del(l->cmp, l);
	free(l->on_link);
	free(l);
}

/*
 * The UD QP (what: which part of it) went to the error state: bring it back at once,
 * the way the Linux IPoIB driver restarts its QP (ERR, the flushes reaped, RESET ->
 * INIT -> RTR -> RTS, receives posted again), keeping its QPN, so that the peers'
 * neighbour entries, which hold it, stay right. The backend refuses posts to it
 * meanwhile (counted as tx_post drops) and takes its flushed buffers back. When that
 * fails, the link goes down and the tick tries again.
 */
static void ud_qp_failed(struct ipoib_link *l, const char *what, const char *why)
{
	int ret = l->ops->qp_recover ? l->ops->qp_recover(l->qp) : -EOPNOTSUPP;

	if (ret > 0) {
		l->st.ud_qp_recoveries++;
		log_warning("%s: %s (QPN 0x%x) went to the error state (%s): recovered, same QPN",
			    l->name, what, l->qpn, why);
	} else if (ret == 0) {
		/* An event for a part already brought back, or an error completion of a
		 * QP that is fine (a datagram the HCA could not send, a flush the
		 * backend did not keep). */
		log_debug("%s: %s (QPN 0x%x, %s): nothing in the error state", l->name, what,
			  l->qpn, why);
	} else {
		log_errno(LOG_ERR, -ret,
			  "%s: %s (QPN 0x%x) went to the error state (%s) and could not be "
			  "brought back: link down, retried every %u ms",
			  l->name, what, l->qpn, why, TICK_MS);
		ipoib_set_up(l, false);
		l->qp_broken = true;
	}
}

/* Tick: another try at a UD QP that could not be brought back; the link comes up again
 * where the broadcast group is still joined (else its join does it). */
static void ud_qp_retry(struct ipoib_link *l)
{
	int ret = l->ops->qp_recover ? l->ops->qp_recover(l->qp) : -EOPNOTSUPP;

	if (ret < 0)
		return; /* said once, when it failed */
	l->qp_broken = false;
	l->st.ud_qp_recoveries += ret > 0;
	log_notice("%s: UD QP 0x%x brought back, same QPN", l->name, l->qpn);
	if (l->bcast && l->bcast->joined && !l->port_down)
		ipoib_set_up(l, true);
}

void ipoib_link_port_event(struct ipoib_link *l, const struct ibp_event *ev)
{
	switch (ev->type) {
	case IBP_EVENT_WQ_FATAL:
		if (ev->qp && ev->qp == l->qp && !l->qp_broken)
			ud_qp_failed(l, "a receive work queue of the UD QP", "WQ_FATAL");
		break;
	case IBP_EVENT_QP_FATAL:
		if (ev->qp && ev->qp == l->qp) {
			if (!l->qp_broken)
				ud_qp_failed(l, "the UD QP", "QP_FATAL");
			break;
		}
		/* One of our RC QPs failed (retries exhausted): tear its connection down;
		 * the next packet to the peer starts a new one. */
		for (struct ipoib_conn *c = l->conns; c; c = c->next)
			if (c->qp == ev->qp && !c->dead && !c->fail_told) {
				c->fail_told = true;
				l->st.rc_tx_errors++;
				cm_disconnect(l->cm, &c->peer);
				break;
			}
		break;
	case IBP_EVENT_PORT_DOWN:
		l->port_down = true;
		ipoib_set_up(l, false);
		for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
			m->joined = false; /* the SA forgets a port that went away */
		break;
	case IBP_EVENT_PORT_ACTIVE:
	case IBP_EVENT_LID_CHANGE:
	case IBP_EVENT_SM_CHANGE:
	case IBP_EVENT_CLIENT_REREGISTER:
	case IBP_EVENT_PKEY_CHANGE:
		l->port_down = false;
		/* The port's owner tells the SA client (sa_client_set_port/_reregister),
		 * which rejoins every group: mcast_cb brings the link up again and
		 * re-queries the paths. Mark the paths stale meanwhile. */
		for (struct ipoib_path *p = l->paths; p; p = p->next)
			p->querying = false;
		break;
	default:
		break;
	}
}

uint64_t ipoib_link_tick(struct ipoib_link *l)
{
	uint64_t now = evloop_now_ms();

	uint64_t next;

	/* Paths that failed: retried on the next use (ipoib_bind_neigh / xmit_hw); those
	 * nobody uses any more: freed. */
	ipoib_paths_gc(l, now);
	if (l->qp_broken && l->qp)
		ud_qp_retry(l);
	else if (atomic_exchange_explicit(&l->ud_qp_check, 0, memory_order_relaxed) && l->qp)
		ud_qp_failed(l, "the UD QP", "an error completion");
	next = neigh_tick(l->neigh);
	ipoib_conn_tick(l);
	if (l->cm && !l->cfg.loop) {
		uint64_t d;

		cm_tick(l->cm);
		d = cm_next_deadline(l->cm);
		if (d && d > now && d - now < next)
			next = d - now;
	}
	return next;
}

/* ---- introspection -------------------------------------------------------------- */

bool ipoib_link_is_up(const struct ipoib_link *l)
{
	return l->up;
}

uint32_t ipoib_link_mtu(const struct ipoib_link *l)
{
	return l->up ? l->mtu : 0;
}

uint16_t ipoib_link_pkey(const struct ipoib_link *l)
{
	return l->pkey;
}

void ipoib_link_hwaddr(const struct ipoib_link *l, struct ipoib_hwaddr *out)
{
	*out = l->hw;
}

void ipoib_link_gid(const struct ipoib_link *l, union ib_gid *out)
{
	*out = l->gid;
}

struct neigh_table *ipoib_link_neigh(struct ipoib_link *l)
{
	return l->neigh;
}

struct ibp_qp *ipoib_link_ud_qp(const struct ipoib_link *l)
{
	return l->qp;
}

uint32_t ipoib_link_qkey(const struct ipoib_link *l)
{
	return l->qkey;
}

static uint64_t dp_read(const _Atomic uint64_t *c)
{
	return atomic_load_explicit((_Atomic uint64_t *)c, memory_order_relaxed);
}

void ipoib_link_stats(const struct ipoib_link *l, struct ipoib_link_stats *out)
{
	*out = l->st;
	out->tx_packets += dp_read(&l->dp_tx_packets);
	out->tx_bytes += dp_read(&l->dp_tx_bytes);
	for (unsigned q = 0; q < l->nq; q++) {
		out->rx_packets += dp_read(&l->dp_rx[q].packets);
		out->rx_bytes += dp_read(&l->dp_rx[q].bytes);
		out->rx_mcast += dp_read(&l->dp_rx[q].mcast);
		out->rc_rx_packets += dp_read(&l->dp_rx[q].rc_packets);
		out->rc_rx_bytes += dp_read(&l->dp_rx[q].rc_bytes);
		for (unsigned i = 0; i < IPOIB_DROP_COUNT; i++)
			out->drops[i] += dp_read(&l->dp_rx[q].drops[i]);
	}
}
