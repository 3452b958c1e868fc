/*
 * IPoIB-CM through librdmacm with AF_IB (see cm_rdmacm.h). Compiled everywhere,
 * runnable only with an HCA and the kernel's rdma_cm: not run here.
 *
 * We do not let librdmacm create the QP (rdma_create_qp): the IPoIB link's QPs come
 * from the IB port ops table, on its SRQ. With no QP on the id, librdmacm reports
 * RDMA_CM_EVENT_CONNECT_RESPONSE on the active side and leaves the QP transitions and
 * the RTU (rdma_establish) to us; rdma_init_qp_attr gives the attributes the kernel
 * CM computed from the REQ/REP, which we hand to qp_connect as a struct
 * ibp_qp_connect.
 *
 * Events are acknowledged before an id is destroyed (rdma_destroy_id waits for the
 * acknowledgement of every event of its id).
 */
#include "cm/cm_rdmacm.h"
#include "lib/log.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ib.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define TIMEOUT_DEFAULT_MS 2000

struct rconn {
	struct rconn *next;
	struct rdma_cm_id *id;
	struct ipoib_hwaddr peer;
	struct cm_path_info path; /* active */
	enum cm_state state;
	bool active, have_qp, was_up, dead;
	void *qp;
	uint32_t qpn, rqpn, peer_rx_mtu, mtu;
	uint64_t created;
};

struct cm_rdmacm {
	struct cm_rdmacm_config cfg;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	struct rconn *conns;
};

static void info_of(const struct rconn *c, struct cm_conn_info *o)
{
	memset(o, 0, sizeof(*o));
	o->peer = c->peer;
	o->state = c->state;
	o->active = c->active;
	o->local_qpn = c->qpn;
	o->remote_qpn = c->rqpn;
	o->mtu = c->mtu;
	o->peer_rx_mtu = c->peer_rx_mtu;
	o->dlid = c->path.dlid;
}

static void pdata_ours(const struct cm_rdmacm *r, uint8_t pd[CM_IPOIB_PDATA_LEN])
{
	struct cm_ipoib_pdata p = { .ud_qpn = r->cfg.local.qpn, .rx_mtu = r->cfg.rx_mtu };

	cm_ipoib_pdata_encode(&p, pd);
}

static void sib_fill(struct sockaddr_ib *s, const union ib_gid *gid, uint16_t pkey, uint64_t sid)
{
	memset(s, 0, sizeof(*s));
	s->sib_family = AF_IB;
	s->sib_pkey = htobe16(pkey);
	memcpy(&s->sib_addr, gid->raw, IB_GID_LEN);
	s->sib_sid = htobe64(sid);
	s->sib_sid_mask = htobe64(~0ull);
}

static struct rconn *find_peer(struct cm_rdmacm *r, const struct ipoib_hwaddr *p)
{
	for (struct rconn *c = r->conns; c; c = c->next)
		if (!c->dead && c->peer.qpn == p->qpn && ib_gid_equal(&c->peer.gid, &p->gid))
			return c;
	return NULL;
}

static void conn_unlink_free(struct cm_rdmacm *r, struct rconn *c)
{
	for (struct rconn **pp = &r->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	free(c);
}

/* Stop serving: down + qp_destroy once; the id goes when its events allow. */
static void conn_down(struct cm_rdmacm *r, struct rconn *c, enum cm_close_reason why)
{
	struct cm_conn_info info;

	if (c->dead)
		return;
	c->dead = true;
	if (c->have_qp) {
		info_of(c, &info);
		if (r->cfg.cb->down)
			r->cfg.cb->down(r->cfg.cb_ctx, &info, c->qp, c->was_up, why);
		if (r->cfg.cb->qp_destroy)
			r->cfg.cb->qp_destroy(r->cfg.cb_ctx, c->qp);
		c->have_qp = false;
	}
}

/* The kernel CM's QP attributes for RTR and RTS, as our port layer takes them. */
static int qp_params(struct rdma_cm_id *id, struct ibp_qp_connect *qc)
{
	struct ibv_qp_attr a;
	int mask = 0;

	memset(qc, 0, sizeof(*qc));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -errno;
	qc->remote_qpn = a.dest_qp_num;
	qc->remote_psn = a.rq_psn;
	qc->path_mtu = (enum ib_mtu)a.path_mtu;
	qc->min_rnr_timer = a.min_rnr_timer;
	qc->max_dest_rd_atomic = a.max_dest_rd_atomic;
	qc->path.dlid = a.ah_attr.dlid;
	qc->path.sl = a.ah_attr.sl;
	qc->path.src_path_bits = a.ah_attr.src_path_bits;
	qc->path.static_rate = a.ah_attr.static_rate;
	qc->path.is_global = a.ah_attr.is_global;
	memcpy(qc->path.dgid.raw, a.ah_attr.grh.dgid.raw, IB_GID_LEN);
	qc->path.flow_label = a.ah_attr.grh.flow_label;
	qc->path.hop_limit = a.ah_attr.grh.hop_limit;
	qc->path.traffic_class = a.ah_attr.grh.traffic_class;
	qc->path.sgid_index = a.ah_attr.grh.sgid_index;
	memset(&a, 0, sizeof(a));
	mask = 0;
	a.qp_state = IBV_QPS_RTS;
	if (rdma_init_qp_attr(id, &a, &mask))
		return -errno;
	qc->local_psn = a.sq_psn;
	qc->timeout = a.timeout;
	qc->retry_count = a.retry_cnt;
	qc->rnr_retry = a.rnr_retry;
	qc->max_rd_atomic = a.max_rd_atomic;
	return 0;
}

static void conn_param(const struct cm_rdmacm *r, const struct rconn *c, uint8_t *pd,
		       struct rdma_conn_param *p)
{
	pdata_ours(r, pd);
	memset(p, 0, sizeof(*p));
	p->private_data = pd;
	p->private_data_len = CM_IPOIB_PDATA_LEN;
	p->retry_count = r->cfg.retry_count & 7;
	p->rnr_retry_count = r->cfg.rnr_retry & 7;
	p->srq = 1;
	p->qp_num = c->qpn;
}

static int create_qp(struct cm_rdmacm *r, struct rconn *c)
{
	struct cm_conn_info info;
	int ret;

	info_of(c, &info);
	ret = r->cfg.cb->qp_create(r->cfg.cb_ctx, &info, &c->qp, &c->qpn);
	if (ret == -EINPROGRESS)
		ret = -EBUSY; /* the kernel CM sends MRAs itself; we cannot defer here */
	if (ret == 0)
		c->have_qp = true;
	return ret;
}

int cm_rdmacm_connect(struct cm_rdmacm *r, const struct ipoib_hwaddr *peer,
		      const struct cm_path_info *path)
{
	struct sockaddr_ib src, dst;
	struct rconn *c;

	if (!peer || !path || peer->qpn <= 1 || peer->qpn > 0xffffff)
		return -EINVAL;
	if (!(peer->flags & IPOIB_HWADDR_F_RC))
		return -EOPNOTSUPP;
	if (find_peer(r, peer))
		return -EALREADY;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->peer = *peer;
	c->path = *path;
	c->active = true;
	c->state = CM_STATE_REQ_SENT;
	if (rdma_create_id(r->ch, &c->id, c, RDMA_PS_IB)) {
		int err = -errno;

		free(c);
		return err;
	}
	sib_fill(&src, &path->sgid, path->pkey, 0);
	src.sib_sid_mask = 0;
	sib_fill(&dst, &path->dgid, path->pkey, cm_ipoib_service_id(peer->qpn));
	if (rdma_resolve_addr(c->id, (struct sockaddr *)&src, (struct sockaddr *)&dst,
			      r->cfg.timeout_ms)) {
		int err = -errno;

		rdma_destroy_id(c->id);
		free(c);
		return err;
	}
	c->next = r->conns;
	r->conns = c;
	return 0;
}

/* ADDR_RESOLVED: give the kernel the SA client's path, or let it ask the SA. */
static void on_addr_resolved(struct cm_rdmacm *r, struct rconn *c)
{
	const struct cm_path_info *p = &c->path;
	struct ibv_path_data pd;
	struct ibv_path_record *pr = &pd.path;

	memset(&pd, 0, sizeof(pd));
	pd.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	pr->service_id = htobe64(cm_ipoib_service_id(c->peer.qpn));
	memcpy(pr->dgid.raw, p->dgid.raw, IB_GID_LEN);
	memcpy(pr->sgid.raw, p->sgid.raw, IB_GID_LEN);
	pr->dlid = htobe16(p->dlid);
	pr->slid = htobe16(p->slid);
	pr->flowlabel_hoplimit = htobe32((p->flow_label & 0xfffff) << 8 | p->hop_limit);
	pr->tclass = p->traffic_class;
	pr->reversible_numpath = IBV_PATH_RECORD_REVERSIBLE | 1;
	pr->pkey = htobe16(p->pkey);
	pr->qosclass_sl = htobe16(p->sl & 0xf);
	pr->mtu = (uint8_t)(2 << 6 | (p->mtu & 0x3f)); /* selector "exactly" */
	pr->rate = (uint8_t)(2 << 6 | (p->packet_rate & 0x3f));
	pr->packetlifetime = (uint8_t)(2 << 6 | (p->packet_lifetime & 0x3f));
	if (rdma_set_option(c->id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)) == 0)
		return; /* ROUTE_RESOLVED follows */
	if (rdma_resolve_route(c->id, r->cfg.timeout_ms)) {
		log_errno(LOG_WARNING, errno, "cm: rdma_resolve_route");
		conn_down(r, c, CM_CLOSE_ERROR);
	}
}

static void on_route_resolved(struct cm_rdmacm *r, struct rconn *c)
{
	struct rdma_conn_param p;
	uint8_t pd[CM_IPOIB_PDATA_LEN];
	int ret = create_qp(r, c);

	if (ret < 0) {
		c->dead = true;
		return;
	}
	conn_param(r, c, pd, &p);
	if (rdma_connect(c->id, &p)) {
		log_errno(LOG_WARNING, errno, "cm: rdma_connect");
		conn_down(r, c, CM_CLOSE_ERROR);
	}
}

static int check_pdata(const struct rdma_cm_event *ev, struct cm_ipoib_pdata *pd)
{
	if (!ev->param.conn.private_data || ev->param.conn.private_data_len < CM_IPOIB_PDATA_LEN)
		return -EBADMSG;
	return cm_ipoib_pdata_decode(ev->param.conn.private_data, pd) == CM_PDATA_OK ? 0 : -EBADMSG;
}

static void go_up(struct cm_rdmacm *r, struct rconn *c)
{
	struct cm_conn_info info;

	c->state = CM_STATE_ESTABLISHED;
	c->was_up = true;
	info_of(c, &info);
	if (r->cfg.cb->up)
		r->cfg.cb->up(r->cfg.cb_ctx, &info, c->qp);
}

/* Active: the REP came. */
static void on_connect_response(struct cm_rdmacm *r, struct rconn *c,
				const struct rdma_cm_event *ev)
{
	struct cm_ipoib_pdata pd;
	struct ibp_qp_connect qc;

	if (check_pdata(ev, &pd) < 0 || pd.ud_qpn != c->peer.qpn || qp_params(c->id, &qc) < 0 ||
	    r->cfg.cb->qp_connect(r->cfg.cb_ctx, c->qp, &qc) < 0) {
		uint8_t mine[CM_IPOIB_PDATA_LEN];

		pdata_ours(r, mine);
		rdma_reject(c->id, mine, CM_IPOIB_PDATA_LEN);
		conn_down(r, c, CM_CLOSE_ERROR);
		return;
	}
	c->rqpn = qc.remote_qpn;
	c->peer_rx_mtu = pd.rx_mtu;
	c->mtu = cm_ipoib_conn_mtu(r->cfg.rx_mtu, pd.rx_mtu);
	if (rdma_establish(c->id)) {
		log_errno(LOG_WARNING, errno, "cm: rdma_establish");
		conn_down(r, c, CM_CLOSE_ERROR);
		return;
	}
	go_up(r, c);
}

/* Passive: a REQ for our service ID; ev->id is the new connection's id. Returns true
 * if the id is to be destroyed (rejected). */
static bool on_connect_request(struct cm_rdmacm *r, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct cm_ipoib_pdata pd;
	struct ipoib_hwaddr peer = { .flags = IPOIB_HWADDR_F_RC };
	uint8_t mine[CM_IPOIB_PDATA_LEN];
	struct rdma_conn_param p;
	struct ibp_qp_connect qc;
	struct rconn *c, *old;

	pdata_ours(r, mine);
	if (check_pdata(ev, &pd) < 0 || !id->route.path_rec) {
		rdma_reject(id, mine, CM_IPOIB_PDATA_LEN);
		return true;
	}
	peer.qpn = pd.ud_qpn;
	/* the REQ's primary path, seen from us: its DGID is the sender */
	memcpy(peer.gid.raw, id->route.path_rec->dgid.raw, IB_GID_LEN);
	old = find_peer(r, &peer);
	if (old && old->state == CM_STATE_REQ_SENT && old->active) {
		if (!cm_crossing_accept(&r->cfg.local, &peer)) {
			rdma_reject(id, mine, CM_IPOIB_PDATA_LEN); /* consumer reject */
			return true;
		}
		/* ours loses: the peer rejects it; stop it here too */
		rdma_disconnect(old->id);
		conn_down(r, old, CM_CLOSE_CROSSED);
	} else if (old) {
		rdma_disconnect(old->id);
		conn_down(r, old, CM_CLOSE_REPLACED);
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		rdma_reject(id, mine, CM_IPOIB_PDATA_LEN);
		return true;
	}
	c->id = id;
	id->context = c;
	c->peer = peer;
	c->state = CM_STATE_REP_SENT;
	c->peer_rx_mtu = pd.rx_mtu;
	c->mtu = cm_ipoib_conn_mtu(r->cfg.rx_mtu, pd.rx_mtu);
	c->next = r->conns;
	r->conns = c;
	if (create_qp(r, c) < 0 || qp_params(id, &qc) < 0 ||
	    r->cfg.cb->qp_connect(r->cfg.cb_ctx, c->qp, &qc) < 0) {
		rdma_reject(id, mine, CM_IPOIB_PDATA_LEN);
		conn_down(r, c, CM_CLOSE_ERROR);
		return true;
	}
	c->rqpn = qc.remote_qpn;
	conn_param(r, c, mine, &p);
	if (rdma_accept(id, &p)) {
		log_errno(LOG_WARNING, errno, "cm: rdma_accept");
		conn_down(r, c, CM_CLOSE_ERROR);
		return true;
	}
	return false;
}

int cm_rdmacm_process(struct cm_rdmacm *r)
{
	struct rdma_cm_event *ev;

	while (rdma_get_cm_event(r->ch, &ev) == 0) {
		struct rconn *c = ev->id->context;
		struct rdma_cm_id *destroy = NULL;

		if (ev->listen_id) { /* CONNECT_REQUEST on our listener */
			if (on_connect_request(r, ev))
				destroy = ev->id;
		} else if (c) {
			switch (ev->event) {
			case RDMA_CM_EVENT_ADDR_RESOLVED:
				on_addr_resolved(r, c);
				break;
			case RDMA_CM_EVENT_ROUTE_RESOLVED:
				on_route_resolved(r, c);
				break;
			case RDMA_CM_EVENT_CONNECT_RESPONSE:
				on_connect_response(r, c, ev);
				break;
			case RDMA_CM_EVENT_ESTABLISHED:
				if (!c->dead && !c->was_up)
					go_up(r, c);
				break;
			case RDMA_CM_EVENT_REJECTED:
				conn_down(r, c, CM_CLOSE_REJECTED);
				break;
			case RDMA_CM_EVENT_ADDR_ERROR:
			case RDMA_CM_EVENT_ROUTE_ERROR:
			case RDMA_CM_EVENT_CONNECT_ERROR:
			case RDMA_CM_EVENT_UNREACHABLE:
				conn_down(r, c, CM_CLOSE_TIMEOUT);
				break;
			case RDMA_CM_EVENT_DISCONNECTED:
				conn_down(r, c, CM_CLOSE_PEER);
				break;
			case RDMA_CM_EVENT_DEVICE_REMOVAL:
				conn_down(r, c, CM_CLOSE_ERROR);
				break;
			default: /* TIMEWAIT_EXIT and the rest */
				break;
			}
			if (c->dead)
				destroy = c->id;
		}
		rdma_ack_cm_event(ev);
		if (destroy) {
			struct rconn *dc = destroy->context; /* set by on_connect_request */

			rdma_destroy_id(destroy);
			if (dc)
				conn_unlink_free(r, dc);
		}
	}
	return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
}

int cm_rdmacm_disconnect(struct cm_rdmacm *r, const struct ipoib_hwaddr *peer)
{
	struct rconn *c = find_peer(r, peer);

	if (!c)
		return -ENOENT;
	rdma_disconnect(c->id); /* DREQ; DISCONNECTED comes back and frees the id */
	conn_down(r, c, CM_CLOSE_LOCAL);
	return 0;
}

int cm_rdmacm_new(const struct cm_rdmacm_config *cfg, struct cm_rdmacm **out)
{
	struct cm_rdmacm *r;
	struct sockaddr_ib sib;
	int ret = 0, fl;

	if (!cfg->cb || !cfg->cb->qp_create || !cfg->cb->qp_connect || cfg->local.qpn <= 1 ||
	    cfg->local.qpn > 0xffffff)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	if (!r->cfg.rx_mtu)
		r->cfg.rx_mtu = CM_IPOIB_MTU_MAX + CM_IPOIB_ENCAP_LEN;
	if (!r->cfg.timeout_ms)
		r->cfg.timeout_ms = TIMEOUT_DEFAULT_MS;
	r->ch = rdma_create_event_channel();
	if (!r->ch) {
		ret = -errno;
		goto fail;
	}
	fl = fcntl(r->ch->fd, F_GETFL);
	if (fl < 0 || fcntl(r->ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		ret = -errno;
		goto fail;
	}
	if (rdma_create_id(r->ch, &r->listen, NULL, RDMA_PS_IB)) {
		ret = -errno;
		goto fail;
	}
	sib_fill(&sib, &cfg->local.gid, cfg->pkey, cm_ipoib_service_id(cfg->local.qpn));
	if (rdma_bind_addr(r->listen, (struct sockaddr *)&sib) || rdma_listen(r->listen, 64)) {
		ret = -errno;
		log_errno(LOG_WARNING, errno,
			  "cm: cannot listen on IPoIB-CM service ID 0x%016llx through librdmacm",
			  (unsigned long long)cm_ipoib_service_id(cfg->local.qpn));
		rdma_destroy_id(r->listen);
		r->listen = NULL;
		if (!cfg->active_only)
			goto fail;
		ret = 0;
	}
	*out = r;
	return 0;
fail:
	if (r->ch)
		rdma_destroy_event_channel(r->ch);
	free(r);
	return ret;
}

void cm_rdmacm_free(struct cm_rdmacm *r)
{
	if (!r)
		return;
	while (r->conns) {
		struct rconn *c = r->conns;

		if (!c->dead)
			rdma_disconnect(c->id);
		conn_down(r, c, CM_CLOSE_LOCAL);
		rdma_destroy_id(c->id);
		conn_unlink_free(r, c);
	}
	if (r->listen)
		rdma_destroy_id(r->listen);
	rdma_destroy_event_channel(r->ch);
	free(r);
}

bool cm_rdmacm_listening(const struct cm_rdmacm *r)
{
	return r->listen != NULL;
}

int cm_rdmacm_fd(const struct cm_rdmacm *r)
{
	return r->ch->fd;
}
