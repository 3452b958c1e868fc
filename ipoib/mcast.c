/*
 * Multicast: the link's groups, joined through the SA client (full member to receive,
 * send-only full member to send), each with its address handle and its attachment of
 * the UD QP. The broadcast group's answer gives the link its Q_Key, MTU, SL and rate:
 * the UD QP is created then and the link comes up (ipoib_set_up). Up to three packets
 * wait for a group's join (as in Linux). The group's AH carries the GRH hop limit of
 * cfg.mcast_hop_limit (or the SA's, when larger): 1 keeps the packets on the subnet.
 *
 * Threads: control thread (the SA client's answers come there too).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ipoib/ipoib_pvt.h"
#include "lib/ib_types.h"
#include "lib/log.h"
#include "sm-client/sa.h"

uint8_t ipoib_mcast_hop_limit(uint8_t sa, uint8_t cfg)
{
	uint8_t h = cfg ? cfg : 1;

	return sa > h ? sa : h;
}

static void mcast_attach(struct ipoib_mcast *m)
{
	struct ipoib_link *l = m->l;

	if (!m->full || !m->joined || !l->qp)
		return;
	if (m->attached && m->attached_mlid == m->g.mlid)
		return;
	if (m->attached)
		l->ops->detach_mcast(l->qp, &m->mgid, m->attached_mlid);
	if (l->ops->attach_mcast(l->qp, &m->mgid, m->g.mlid) == 0) {
		m->attached = true;
		m->attached_mlid = m->g.mlid;
	} else {
		m->attached = false;
		log_warning("%s: cannot attach the QP to mlid 0x%x", l->name, m->g.mlid);
	}
}

void ipoib_mcast_flush(struct ipoib_mcast *m, bool send)
{
	for (unsigned i = 0; i < m->qn; i++) {
		if (send && m->ah) {
			m->l->st.tx_mcast++;
			ipoib_post_ud(m->l, m->ah, UD_MCAST_QPN, m->q[i]);
		} else {
			ipoib_drop_buf(m->l, m->q[i], IPOIB_DROP_TX_MCAST_JOIN);
		}
	}
	m->qn = 0;
}

static void mcast_cb(void *arg, int status, const struct sa_mcast_group *g)
{
	struct ipoib_mcast *m = arg;
	struct ipoib_link *l;
	struct ibp_ah_attr aa;
	struct ibp_ah *ah;
	char gs[IB_GID_STRLEN];

	if (status == -ECANCELED)
		return;
	l = m->l;
	ib_gid_format(&m->mgid, gs, sizeof(gs));
	if (status < 0) {
		l->st.join_failures++;
		log_info("%s: join %s (%s) failed: %s; retrying", l->name, gs,
			 m->full ? "full" : "send-only", strerror(-status));
		return;
	}
	l->st.joins++;
	if (!m->joined || !m->ah || m->g.mlid != g->mlid || m->g.sl != g->sl) {
		memset(&aa, 0, sizeof(aa));
		aa.dlid = g->mlid;
		aa.sl = g->sl;
		aa.static_rate = g->rate;
		aa.is_global = true;
		aa.dgid = m->mgid;
		aa.flow_label = g->flow_label;
		aa.hop_limit = ipoib_mcast_hop_limit(g->hop_limit, l->cfg.mcast_hop_limit);
		aa.traffic_class = g->tclass;
		if (l->ops->create_ah(l->cfg.port, &aa, &ah) < 0) {
			log_warning("%s: no AH for group %s", l->name, gs);
			return;
		}
		ipoib_destroy_ah_later(l, m->ah);
		m->ah = ah;
	}
	m->g = *g;
	m->joined = true;
	log_info("%s: joined %s (%s) mlid 0x%x qkey 0x%x mtu %u sl %u", l->name, gs,
		 m->full ? "full" : "send-only", g->mlid, g->qkey, ib_mtu_bytes(g->mtu), g->sl);
	if (m->bcast) {
		l->qkey = g->qkey;
		l->mtu = ib_mtu_bytes(g->mtu) ? ib_mtu_bytes(g->mtu) - IPOIB_ENCAP_LEN : 2044;
		l->sl = g->sl;
		l->rate = g->rate;
		if (!l->qp && ipoib_create_qp(l) < 0)
			return;
		for (struct ipoib_mcast *o = l->mcasts; o; o = o->next)
			mcast_attach(o);
		ipoib_set_up(l, true);
		/* Paths learned before a port event: query them again. */
		ipoib_link_paths_requery(l);
		ipoib_mcast_flush(m, true);
		return;
	}
	mcast_attach(m);
	ipoib_mcast_flush(m, true);
}

struct ipoib_mcast *ipoib_mcast_find(const struct ipoib_link *l, const union ib_gid *mgid)
{
	for (struct ipoib_mcast *m = l->mcasts; m; m = m->next)
		if (ib_gid_equal(&m->mgid, mgid))
			return m;
	return NULL;
}

int ipoib_mcast_sa_join(struct ipoib_mcast *m)
{
	struct sa_mcast_params p;

	if (!m->l->cfg.sa)
		return -ENOTCONN;
	memset(&p, 0, sizeof(p));
	p.mgid = m->mgid;
	p.join_state = m->full ? SA_JOIN_FULL : SA_JOIN_SENDONLY_FULL;
	p.create = true;
	p.pkey = m->l->pkey;
	return sa_mcast_join(m->l->cfg.sa, &p, mcast_cb, m);
}

struct ipoib_mcast *ipoib_mcast_get(struct ipoib_link *l, const union ib_gid *mgid, bool full)
{
	struct ipoib_mcast *m = ipoib_mcast_find(l, mgid);

	if (m) {
		if (full && !m->full) {
			/* Send-only -> full member: leave and join again. */
			sa_mcast_leave(l->cfg.sa, &m->mgid);
			m->full = true;
			m->joined = false;
			ipoib_mcast_sa_join(m);
		}
		return m;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->l = l;
	m->mgid = *mgid;
	m->full = full;
	m->next = l->mcasts;
	l->mcasts = m;
	if (l->started)
		ipoib_mcast_sa_join(m);
	return m;
}

int ipoib_link_mcast_join(struct ipoib_link *l, const union ib_gid *mgid)
{
	return ipoib_mcast_get(l, mgid, true) ? 0 : -ENOMEM;
}

int ipoib_link_mcast_sendonly(struct ipoib_link *l, const union ib_gid *mgid)
{
	return ipoib_mcast_get(l, mgid, false) ? 0 : -ENOMEM;
}

int ipoib_link_mcast_leave(struct ipoib_link *l, const union ib_gid *mgid)
{
	struct ipoib_mcast **pp = &l->mcasts, *m;

	while (*pp && !ib_gid_equal(&(*pp)->mgid, mgid))
		pp = &(*pp)->next;
	m = *pp;
	if (!m)
		return -ENOENT;
	if (m->bcast)
		return -EPERM;
	if (l->started && l->cfg.sa)
		sa_mcast_leave(l->cfg.sa, &m->mgid);
	if (m->attached && l->qp)
		l->ops->detach_mcast(l->qp, &m->mgid, m->attached_mlid);
	ipoib_mcast_flush(m, false);
	/* Sends already posted may still name the AH: destroyed after them. */
	ipoib_destroy_ah_later(l, m->ah);
	*pp = m->next;
	free(m);
	return 0;
}

void ipoib_link_mcast_foreach(const struct ipoib_link *l,
			      int (*fn)(void *arg, const struct ipoib_mcast_info *mi), void *arg)
{
	for (const struct ipoib_mcast *m = l->mcasts; m; m = m->next) {
		struct ipoib_mcast_info mi = {
			.mgid = m->mgid,
			.full = m->full,
			.joined = m->joined,
			.mlid = m->g.mlid,
			.qkey = m->g.qkey,
		};

		if (fn(arg, &mi))
			return;
	}
}
