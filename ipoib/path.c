/*
 * Paths (RFC 4391 unicast): a GID's PathRecord, asked of the SA client (or answered from
 * its cache or GID route table), becomes an address handle (with a GRH when the GID is
 * on another subnet); every neighbour entry of that GID is bound to it (its link address
 * made usable, its MTU the path's when smaller) and rebound when the answer changes, the
 * old AH destroyed after a grace period. Up to three packets wait on a path being
 * resolved; a failed path is asked again after PATH_RETRY_MS, on the next use.
 *
 * Threads: control thread (the SA client's answers come there too).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ipoib/ipoib_pvt.h"
#include "lib/evloop.h"
#include "lib/ib_types.h"
#include "lib/log.h"
#include "sm-client/sa.h"

struct ah_retire {
	const struct ibp_ops *ops;
	struct ibp_ah *ah;
};

static void ah_retire_fn(void *arg)
{
	struct ah_retire *r = arg;

	r->ops->destroy_ah(r->ah);
	free(r);
}

void ipoib_destroy_ah_later(struct ipoib_link *l, struct ibp_ah *ah)
{
	struct ah_retire *r;

	if (!ah)
		return;
	if (!l->cfg.defer || !(r = malloc(sizeof(*r)))) {
		l->ops->destroy_ah(ah);
		return;
	}
	r->ops = l->ops;
	r->ah = ah;
	l->cfg.defer(l->cfg.defer_ctx, ah_retire_fn, r);
}

struct ipoib_path *ipoib_path_find(struct ipoib_link *l, const union ib_gid *gid)
{
	for (struct ipoib_path *p = l->paths; p; p = p->next)
		if (ib_gid_equal(&p->gid, gid))
			return p;
	return NULL;
}

struct rebind_arg {
	struct ipoib_link *l;
	const struct ipoib_path *p;
};

/* Fill a neighbour's link address from its path. */
void ipoib_bind_to_path(struct ipoib_link *l, struct neigh_link *ll, const struct ipoib_path *p)
{
	ll->usable = p && p->state == PATH_VALID && p->ah;
	ll->ah = ll->usable ? p->ah : NULL;
	if (ll->usable) {
		ll->dlid = p->sp.dlid;
		ll->sl = p->sp.sl;
		ll->ib_mtu = p->sp.mtu;
		ll->grh = ib_gid_prefix(&p->gid) != ib_gid_prefix(&l->gid);
	}
	ll->mtu = l->mtu;
	if (ll->usable && ib_mtu_bytes(p->sp.mtu) &&
	    ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN < ll->mtu)
		ll->mtu = ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN;
	if (ll->conn) /* connected mode: the connection's MTU (published by cb_up) */
		ll->mtu = ((const struct ipoib_conn *)ll->conn)->mtu;
}

static void rebind_one(void *arg, struct neigh_table *t, struct neigh_entry *e)
{
	struct rebind_arg *ra = arg;
	const struct neigh_link *cur = neigh_entry_link(e);
	struct neigh_link ll;

	if (!cur || cur->len != IPOIB_HWADDR_LEN ||
	    memcmp(cur->addr + 4, ra->p->gid.raw, IB_GID_LEN))
		return;
	ll = *cur;
	ipoib_bind_to_path(ra->l, &ll, ra->p);
	if (ra->l->cm && ll.usable && !ll.conn) {
		struct ipoib_hwaddr hw;

		if (ipoib_ll_peer(cur, &hw))
			ipoib_conn_request(ra->l, &hw, (struct ipoib_path *)ra->p);
	}
	if (ll.usable == cur->usable && ll.ah == cur->ah && ll.mtu == cur->mtu)
		return;
	neigh_set_link(t, e, &ll);
}

void ipoib_path_flush_queue(struct ipoib_path *p, bool send)
{
	struct ipoib_link *l = p->l;

	for (unsigned i = 0; i < p->qn; i++) {
		if (send)
			ipoib_post_ud(l, p->ah, p->q[i].qpn, p->q[i].b);
		else
			ipoib_drop_buf(l, p->q[i].b, IPOIB_DROP_TX_NO_PATH);
	}
	p->qn = 0;
}

static void path_cb(void *arg, int status, const struct sa_path *sp)
{
	struct ipoib_path *p = arg;
	struct ipoib_link *l = p->l;
	struct ibp_ah_attr aa;
	struct ibp_ah *ah;
	struct rebind_arg ra = { .l = l, .p = p };
	char gs[IB_GID_STRLEN];

	if (status == -ECANCELED)
		return;
	p->querying = false;
	if (status < 0) {
		ib_gid_format(&p->gid, gs, sizeof(gs));
		log_info("%s: no path to %s: %s", l->name, gs, strerror(-status));
		l->st.path_failures++;
		if (p->state != PATH_VALID) {
			p->state = PATH_FAILED;
			p->failed_at = evloop_now_ms();
			ipoib_path_flush_queue(p, false);
		}
		ipoib_conn_path_known(l, p);
		return;
	}
	memset(&aa, 0, sizeof(aa));
	aa.dlid = sp->dlid;
	aa.sl = sp->sl;
	aa.static_rate = sp->rate;
	aa.is_global = ib_gid_prefix(&sp->dgid) != ib_gid_prefix(&l->gid) || sp->hop_limit > 1;
	aa.dgid = p->gid;
	aa.flow_label = sp->flow_label;
	aa.hop_limit = sp->hop_limit ? sp->hop_limit : 0xff;
	aa.traffic_class = sp->tclass;
	if (p->state == PATH_VALID && p->ah && p->sp.dlid == sp->dlid && p->sp.sl == sp->sl &&
	    p->sp.mtu == sp->mtu && p->sp.hop_limit == sp->hop_limit) {
		p->sp = *sp;
		ipoib_path_flush_queue(p, true);
		ipoib_conn_path_known(l, p);
		return;
	}
	if (l->ops->create_ah(l->cfg.port, &aa, &ah) < 0) {
		l->st.path_failures++;
		p->state = PATH_FAILED;
		p->failed_at = evloop_now_ms();
		ipoib_path_flush_queue(p, false);
		ipoib_conn_path_known(l, p);
		return;
	}
	struct ibp_ah *old = p->ah;

	if (old)
		l->st.ah_rebuilt++;
	p->ah = ah;
	p->sp = *sp;
	p->state = PATH_VALID;
	l->st.paths_resolved++;
	neigh_foreach_entry(l->neigh, rebind_one, &ra);
	ipoib_destroy_ah_later(l, old);
	ipoib_path_flush_queue(p, true);
	ipoib_conn_path_known(l, p);
}

void ipoib_path_query(struct ipoib_path *p)
{
	struct ipoib_link *l = p->l;
	struct sa_path_query q;

	if (p->querying || !l->cfg.sa)
		return;
	memset(&q, 0, sizeof(q));
	q.dgid = p->gid;
	q.sgid = l->gid;
	q.pkey = l->pkey;
	p->querying = true;
	if (p->state == PATH_FAILED)
		p->state = PATH_RESOLVING;
	if (sa_path_resolve(l->cfg.sa, &q, path_cb, p) < 0) {
		p->querying = false;
		p->state = PATH_FAILED;
		p->failed_at = evloop_now_ms();
	}
}

struct ipoib_path *ipoib_path_get(struct ipoib_link *l, const union ib_gid *gid)
{
	struct ipoib_path *p = ipoib_path_find(l, gid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->l = l;
	p->gid = *gid;
	p->state = PATH_RESOLVING;
	p->next = l->paths;
	l->paths = p;
	ipoib_path_query(p);
	return ipoib_path_find(l, gid); /* ipoib_path_query may have answered (cache) */
}

/* Make the neighbour's link usable from its path, or start resolving the path. */
void ipoib_bind_neigh(struct ipoib_link *l, struct neigh_entry *e)
{
	const struct neigh_link *cur = neigh_entry_link(e);
	union ib_gid gid;
	struct ipoib_path *p;
	struct neigh_link ll;

	if (!cur || cur->len != IPOIB_HWADDR_LEN)
		return;
	memcpy(gid.raw, cur->addr + 4, IB_GID_LEN);
	p = ipoib_path_get(l, &gid);
	if (!p)
		return;
	if (p->state == PATH_FAILED && evloop_now_ms() - p->failed_at >= PATH_RETRY_MS)
		ipoib_path_query(p);
	ll = *cur;
	if (l->cm) {
		/* Connected mode: the peer's connection, or one started for it. */
		struct ipoib_hwaddr hw;
		struct ipoib_conn *c = NULL;

		if (ipoib_ll_peer(cur, &hw)) {
			c = ipoib_conn_find(l, &hw);
			if (!c && p->state == PATH_VALID)
				ipoib_conn_request(l, &hw, p);
		}
		ll.conn = c && c->up ? c : NULL;
	}
	ipoib_bind_to_path(l, &ll, p);
	if (ll.usable != cur->usable || ll.ah != cur->ah || ll.conn != cur->conn ||
	    ll.mtu != cur->mtu)
		neigh_set_link(l->neigh, e, &ll);
}

/* The IP MTU of UD to a GID: the broadcast group's, or the path's when smaller. */
uint32_t ipoib_ud_mtu_of(const struct ipoib_link *l, const struct ipoib_path *p)
{
	uint32_t m = l->mtu;

	if (p && p->state == PATH_VALID && ib_mtu_bytes(p->sp.mtu) &&
	    ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN < m)
		m = ib_mtu_bytes(p->sp.mtu) - IPOIB_ENCAP_LEN;
	return m;
}

void ipoib_link_paths_requery(struct ipoib_link *l)
{
	for (struct ipoib_path *p = l->paths; p; p = p->next)
		if (p->state != PATH_RESOLVING || !p->querying)
			ipoib_path_query(p);
}
