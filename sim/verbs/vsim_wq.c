/*
 * libibverbs2sim, part three: receive work queues (ibv_create_wq, IBV_WQT_RQ), receive
 * WQ indirection tables, and what an RSS receive QP does with a datagram: the Toeplitz
 * hash (Microsoft RSS) of its flow picks a WQ of the QP's table, the way enhanced IPoIB
 * spreads a link's receives over several queues (docs/verbs-sim.md, "RSS on UD").
 *
 *   - A WQ is a receive ring on its own CQ. ibv_modify_wq: RESET -> RDY, RDY -> ERR,
 *     any -> RESET (IBV_WQ_ATTR_CURR_STATE must match when given). Posting is allowed
 *     in RESET and RDY (mlx5 takes WQEs in RESET); in ERR a post completes flushed.
 *     Entering ERR flushes every posted WQE (IBV_WC_WR_FLUSH_ERR on its CQ); to RESET
 *     forgets them and removes the WQ's completions from the CQ, as for QPs.
 *   - A WQ's number is a QPN the fabric gave on the context's home port (a UD QP that
 *     nothing is addressed to), so completions carry it as qp_num, as mlx5 reports an
 *     RSS receive, without meeting a QP's.
 *   - The RSS QP (vsim_qp.c) has a QPN, P_Key, Q_Key and multicast like any UD QP; each
 *     datagram it accepts goes to ind_tbl[hash % size], landed as on a UD QP (the GRH
 *     area, lkey checks: an error puts the WQ in ERR). A WQ not RDY, or without a WQE,
 *     drops it, as a UD QP with an empty receive queue does.
 *
 * The hash input is the IP packet after the 4-octet IPoIB header (octets 0-1 the
 * ethertype): IPv4 (0x0800) source and destination address, then TCP or UDP source and
 * destination port when the protocol is that one, the mask selects them and the packet
 * is no fragment (MF clear, offset 0); IPv6 (0x86DD) likewise, ports when the next
 * header is TCP or UDP itself. Each field only when its IBV_RX_HASH_* bit is set. ARP,
 * anything else, and a truncated packet hash as 0.
 *
 * Threads: the program's threads in the verbs below and the progress thread in
 * vsim_rss_rx, with ctx->lock held; a WQ's ring and state also under wq->lock, so that
 * ibv_post_wq_recv (a worker's) takes only that one (vsim_pvt.h, Threads).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sim/verbs/vsim_pvt.h"
#include "lib/log.h"

#define ETH_P_IPV4 0x0800
#define ETH_P_IPV6 0x86dd
#define IPOIB_HDR  4
#define PROTO_TCP  6
#define PROTO_UDP  17

/* --- the hash -------------------------------------------------------------------------- */

/* Toeplitz over n octets (n <= 36: the key's 320 bits cover 288 input bits + 32). */
static uint32_t toeplitz(const uint8_t key[VSIM_RSS_KEY_LEN], const uint8_t *in, size_t n)
{
	uint32_t h = 0;
	uint32_t v =
	    (uint32_t)key[0] << 24 | (uint32_t)key[1] << 16 | (uint32_t)key[2] << 8 | key[3];

	for (size_t i = 0; i < n; i++) {
		uint8_t next = i + 4 < VSIM_RSS_KEY_LEN ? key[i + 4] : 0;

		for (int b = 7; b >= 0; b--) {
			if ((in[i] >> b) & 1)
				h ^= v;
			v = v << 1 | ((next >> b) & 1u);
		}
	}
	return h;
}

uint32_t vsim_rss_hash(const uint8_t key[VSIM_RSS_KEY_LEN], uint64_t fields, const uint8_t *d,
		       size_t len)
{
	uint8_t in[36];
	size_t n = 0, alen, hlen;
	uint64_t f_src, f_dst;
	unsigned src_off, dst_off;
	uint8_t proto;
	bool ports_ok;

	if (len < IPOIB_HDR)
		return 0;
	switch ((unsigned)d[0] << 8 | d[1]) {
	case ETH_P_IPV4:
		d += IPOIB_HDR;
		len -= IPOIB_HDR;
		if (len < 20 || d[0] >> 4 != 4)
			return 0;
		hlen = (size_t)(d[0] & 0xf) * 4;
		if (hlen < 20 || hlen > len)
			return 0;
		alen = 4, src_off = 12, dst_off = 16;
		f_src = IBV_RX_HASH_SRC_IPV4, f_dst = IBV_RX_HASH_DST_IPV4;
		proto = d[9];
		ports_ok = (((unsigned)d[6] << 8 | d[7]) & 0x3fff) == 0; /* MF, offset */
		break;
	case ETH_P_IPV6:
		d += IPOIB_HDR;
		len -= IPOIB_HDR;
		if (len < 40 || d[0] >> 4 != 6)
			return 0;
		hlen = 40;
		alen = 16, src_off = 8, dst_off = 24;
		f_src = IBV_RX_HASH_SRC_IPV6, f_dst = IBV_RX_HASH_DST_IPV6;
		proto = d[6];
		ports_ok = true; /* only when TCP or UDP is the next header itself */
		break;
	default:
		return 0; /* ARP and anything else */
	}
	if (fields & f_src) {
		memcpy(in + n, d + src_off, alen);
		n += alen;
	}
	if (fields & f_dst) {
		memcpy(in + n, d + dst_off, alen);
		n += alen;
	}
	if (ports_ok && (proto == PROTO_TCP || proto == PROTO_UDP)) {
		uint64_t p_src =
		    proto == PROTO_TCP ? IBV_RX_HASH_SRC_PORT_TCP : IBV_RX_HASH_SRC_PORT_UDP;
		uint64_t p_dst =
		    proto == PROTO_TCP ? IBV_RX_HASH_DST_PORT_TCP : IBV_RX_HASH_DST_PORT_UDP;

		if (fields & (p_src | p_dst) && len < hlen + 4)
			return 0; /* truncated */
		if (fields & p_src) {
			memcpy(in + n, d + hlen, 2);
			n += 2;
		}
		if (fields & p_dst) {
			memcpy(in + n, d + hlen + 2, 2);
			n += 2;
		}
	}
	return toeplitz(key, in, n);
}

/* --- completions of a WQ ------------------------------------------------------------------ */

static void wq_wc(struct vsim_ctx *ctx, struct vsim_wq *wq, uint64_t wr_id,
		  enum ibv_wc_status status)
{
	struct ibv_wc wc = {
		.wr_id = wr_id, .status = status, .opcode = IBV_WC_RECV, .qp_num = wq->wq.wq_num
	};

	vsim_cq_add(ctx, (struct vsim_cq *)wq->wq.cq, &wc, NULL);
}

/* To ERR: every posted WQE completes flushed (ctx->lock, wq->lock). */
static void wq_to_err(struct vsim_ctx *ctx, struct vsim_wq *wq)
{
	struct vsim_rwqe w;

	wq->wq.state = IBV_WQS_ERR;
	while (vsim_rq_take(&wq->rq, &w))
		wq_wc(ctx, wq, w.wr_id, IBV_WC_WR_FLUSH_ERR);
}

/* To RESET: WQEs forgotten, the WQ's completions removed from its CQ (mlx5 cleans a
 * QP's at RESET and at destroy; a WQ is the same queue without the QP). ctx->lock,
 * wq->lock. */
static void wq_reset(struct vsim_wq *wq)
{
	struct vsim_rwqe w;

	while (vsim_rq_take(&wq->rq, &w))
		;
	vsim_cq_remove((struct vsim_cq *)wq->wq.cq, wq->wq.wq_num);
	wq->wq.state = IBV_WQS_RESET;
}

/* --- the RSS receive (progress thread) ------------------------------------------------------ */

void vsim_rss_rx(struct vsim_qp *qp, const struct ib_packet *p, const uint8_t *wire)
{
	struct vsim_ind *t = qp->rss;
	uint32_t h = vsim_rss_hash(qp->rss_key, qp->rss_fields, p->payload, p->payload_len);
	struct vsim_wq *wq = t->wq[h & (t->size - 1)];
	struct vsim_rwqe w;

	/* wq->lock across the landing: the WQE's SGEs stay in its ring slot, which a
	 * post would otherwise reuse at once. */
	pthread_mutex_lock(&wq->lock);
	if (wq->wq.state != IBV_WQS_RDY || !vsim_rq_take(&wq->rq, &w)) {
		pthread_mutex_unlock(&wq->lock);
		vsim_count_rx_drop(); /* as a UD QP with no receive WQE */
		return;
	}
	if (!vsim_ud_land(qp, wq->wq.pd, wq->wq.cq, wq->wq.wq_num, &w, p, wire))
		wq_to_err(qp->ctx, wq); /* a receive error: the queue to ERR, as a QP's */
	pthread_mutex_unlock(&wq->lock);
}

/* --- WQs ------------------------------------------------------------------------------------- */

static int post_wq_recv(struct ibv_wq *ibwq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibwq->context);
	struct vsim_wq *wq = (struct vsim_wq *)ibwq;
	struct vsim_rwqe w;
	int ret;

	/* RESET, RDY: the WQ's own lock only (a worker's post does not wait for the
	 * progress thread's batch). */
	pthread_mutex_lock(&wq->lock);
	if (ibwq->state != IBV_WQS_ERR) {
		ret = vsim_rq_post(&wq->rq, wr, bad);
		pthread_mutex_unlock(&wq->lock);
		return ret;
	}
	pthread_mutex_unlock(&wq->lock);
	/* ERR: the post completes flushed, and completions are added under ctx->lock. */
	pthread_mutex_lock(&ctx->lock);
	pthread_mutex_lock(&wq->lock);
	ret = vsim_rq_post(&wq->rq, wr, bad);
	if (ibwq->state == IBV_WQS_ERR)
		while (vsim_rq_take(&wq->rq, &w))
			wq_wc(ctx, wq, w.wr_id, IBV_WC_WR_FLUSH_ERR);
	pthread_mutex_unlock(&wq->lock);
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

struct ibv_wq *vsim_create_wq(struct ibv_context *c, struct ibv_wq_init_attr *ia)
{
	struct vsim_ctx *ctx = vsim_ctx_of(c);
	struct vsim_wq *wq;
	struct vsim_port *port;
	unsigned cap;
	int ret, tries = 0;

	if (!vsim_rss_enabled()) {
		errno = EOPNOTSUPP; /* IBVSIM_RSS=0: an HCA without UD RSS */
		return NULL;
	}
	if ((ia->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && ia->create_flags) {
		log_error("libibverbs2sim: ibv_create_wq: flags 0x%x are not emulated",
			  ia->create_flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (ia->wq_type != IBV_WQT_RQ || (ia->comp_mask & ~(uint32_t)IBV_WQ_INIT_ATTR_FLAGS) ||
	    !ia->pd || ia->pd->context != c || !ia->cq || ia->cq->context != c || ia->max_wr < 1 ||
	    ia->max_wr > VSIM_MAX_QP_WR || ia->max_sge > VSIM_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	wq = calloc(1, sizeof(*wq));
	cap = vsim_pow2_at_least(ia->max_wr); /* as the QPs' receive queues */
	if (!wq || vsim_rq_init(&wq->rq, cap, ia->max_sge) < 0) {
		if (wq)
			vsim_rq_fini(&wq->rq);
		free(wq);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	if (ctx->n_wqs >= VSIM_MAX_WQ) {
		ret = -ENOMEM; /* max_wq_type_rq */
		goto fail;
	}
	/* The WQ's number: a QPN of the home port's (the fabric numbers them). */
	port = &ctx->port[ctx->home_port - 1];
	vsim_port_claim(ctx, port);
	if (!port->fab) {
		log_error("libibverbs2sim: ibv_create_wq: port %u is not on the fabric", port->num);
		ret = -ENETDOWN;
		goto fail;
	}
	do
		ret = simfab_client_qp_create(port->fab, SIMFAB_QP_UD, 0, &wq->wq.wq_num);
	while (vsim_ctl_again(port, ret, &tries));
	vsim_wake(ctx);
	if (ret < 0) {
		log_errno(LOG_ERR, -ret, "libibverbs2sim: QP_CREATE (a WQ's number): %s",
			  simfab_client_errmsg(port->fab));
		goto fail;
	}
	wq->port = port;
	pthread_mutex_init(&wq->lock, NULL);
	wq->wq.context = c;
	wq->wq.wq_context = ia->wq_context;
	wq->wq.pd = ia->pd;
	wq->wq.cq = ia->cq;
	wq->wq.handle = ctx->next_key++;
	wq->wq.state = IBV_WQS_RESET;
	wq->wq.wq_type = IBV_WQT_RQ;
	wq->wq.post_recv = post_wq_recv;
	wq->next = ctx->wqs;
	ctx->wqs = wq;
	ctx->n_wqs++;
	((struct vsim_pd *)ia->pd)->users++;
	((struct vsim_cq *)ia->cq)->users++;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	ia->max_wr = cap;
	ia->max_sge = wq->rq.max_sge;
	return &wq->wq;
fail:
	pthread_mutex_unlock(&ctx->lock);
	vsim_rq_fini(&wq->rq);
	free(wq);
	errno = -ret;
	return NULL;
}

static const char *wq_state_name(enum ibv_wq_state s)
{
	static const char *const n[] = { "RESET", "RDY", "ERR" };

	return (unsigned)s <= IBV_WQS_ERR ? n[s] : "?";
}

int vsim_modify_wq(struct ibv_wq *ibwq, struct ibv_wq_attr *a)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibwq->context);
	struct vsim_wq *wq = (struct vsim_wq *)ibwq;
	enum ibv_wq_state cur, next;
	int ret = 0;

	if (!vsim_rss_enabled())
		return EOPNOTSUPP;
	if (a->attr_mask & IBV_WQ_ATTR_FLAGS)
		return EOPNOTSUPP; /* no WQ flags are emulated */
	if (!(a->attr_mask & IBV_WQ_ATTR_STATE) ||
	    (a->attr_mask & ~(uint32_t)(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE)))
		return EINVAL;
	pthread_mutex_lock(&ctx->lock);
	cur = ibwq->state;
	next = a->wq_state;
	if (((a->attr_mask & IBV_WQ_ATTR_CURR_STATE) && a->curr_wq_state != cur) ||
	    !(next == IBV_WQS_RESET || (cur == IBV_WQS_RESET && next == IBV_WQS_RDY) ||
	      (cur == IBV_WQS_RDY && next == IBV_WQS_ERR))) {
		log_error("libibverbs2sim: ibv_modify_wq %u: %s -> %s%s is no WQ transition "
			  "(RESET -> RDY, RDY -> ERR, any -> RESET)",
			  ibwq->wq_num, wq_state_name(cur), wq_state_name(next),
			  (a->attr_mask & IBV_WQ_ATTR_CURR_STATE) && a->curr_wq_state != cur
			      ? " (not the current state given)"
			      : "");
		ret = EINVAL;
		goto out;
	}
	pthread_mutex_lock(&wq->lock);
	if (next == IBV_WQS_RESET)
		wq_reset(wq);
	else if (next == IBV_WQS_ERR)
		wq_to_err(ctx, wq);
	else
		ibwq->state = next;
	pthread_mutex_unlock(&wq->lock);
out:
	pthread_mutex_unlock(&ctx->lock);
	return ret;
}

int vsim_wq_fault(struct vsim_ctx *ctx, struct vsim_wq *wq)
{
	pthread_mutex_lock(&wq->lock);
	if (wq->wq.state != IBV_WQS_RDY) {
		pthread_mutex_unlock(&wq->lock);
		return -EINVAL;
	}
	wq_to_err(ctx, wq);
	pthread_mutex_unlock(&wq->lock);
	vsim_event(ctx, IBV_EVENT_WQ_FATAL, &wq->wq, 0);
	return 0;
}

/* ctx->lock held: unlink, free, give the number back to the fabric. */
static void wq_gone(struct vsim_ctx *ctx, struct vsim_wq *wq)
{
	struct vsim_wq **pp;
	int ret, tries = 0;

	for (pp = &ctx->wqs; *pp && *pp != wq; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = wq->next;
	vsim_event_forget_wq(ctx, &wq->wq);
	pthread_mutex_lock(&wq->lock);
	wq_reset(wq);
	pthread_mutex_unlock(&wq->lock);
	if (wq->port->fab) {
		do
			ret = simfab_client_qp_destroy(wq->port->fab, wq->wq.wq_num);
		while (vsim_ctl_again(wq->port, ret, &tries));
		vsim_wake(ctx);
	}
	((struct vsim_pd *)wq->wq.pd)->users--;
	((struct vsim_cq *)wq->wq.cq)->users--;
	ctx->n_wqs--;
	ctx->n_objs--;
	pthread_mutex_destroy(&wq->lock);
	vsim_rq_fini(&wq->rq);
	free(wq);
}

int vsim_destroy_wq(struct ibv_wq *ibwq)
{
	struct vsim_ctx *ctx = vsim_ctx_of(ibwq->context);
	struct vsim_wq *wq = (struct vsim_wq *)ibwq;

	pthread_mutex_lock(&ctx->lock);
	if (wq->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY; /* an indirection table names it */
	}
	wq_gone(ctx, wq);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

/* --- indirection tables ---------------------------------------------------------------------- */

struct ibv_rwq_ind_table *vsim_create_ind(struct ibv_context *c,
					  struct ibv_rwq_ind_table_init_attr *ia)
{
	struct vsim_ctx *ctx = vsim_ctx_of(c);
	struct vsim_ind *t;
	unsigned size;

	if (!vsim_rss_enabled()) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (ia->comp_mask || ia->log_ind_tbl_size > VSIM_MAX_IND_LOG || !ia->ind_tbl) {
		errno = EINVAL;
		return NULL;
	}
	size = 1u << ia->log_ind_tbl_size;
	t = calloc(1, sizeof(*t));
	if (t)
		t->wq = calloc(size, sizeof(*t->wq));
	if (!t || !t->wq) {
		if (t)
			free(t);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&ctx->lock);
	for (unsigned i = 0; i < size; i++) {
		struct vsim_wq *wq = ctx->wqs;

		/* Each entry a live WQ of this context. */
		while (wq && &wq->wq != ia->ind_tbl[i])
			wq = wq->next;
		if (!wq) {
			pthread_mutex_unlock(&ctx->lock);
			free(t->wq);
			free(t);
			errno = EINVAL;
			return NULL;
		}
		t->wq[i] = wq;
	}
	if (ctx->n_inds >= VSIM_MAX_IND_TBL) {
		pthread_mutex_unlock(&ctx->lock);
		free(t->wq);
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	for (unsigned i = 0; i < size; i++)
		t->wq[i]->users++;
	t->size = size;
	t->t.context = c;
	t->t.ind_tbl_handle = (int)ctx->next_key++;
	t->t.ind_tbl_num = t->t.ind_tbl_handle;
	t->next = ctx->inds;
	ctx->inds = t;
	ctx->n_inds++;
	ctx->n_objs++;
	pthread_mutex_unlock(&ctx->lock);
	return &t->t;
}

/* ctx->lock held. */
static void ind_gone(struct vsim_ctx *ctx, struct vsim_ind *t)
{
	struct vsim_ind **pp;

	for (pp = &ctx->inds; *pp && *pp != t; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = t->next;
	for (unsigned i = 0; i < t->size; i++)
		t->wq[i]->users--;
	ctx->n_inds--;
	ctx->n_objs--;
	free(t->wq);
	free(t);
}

int vsim_destroy_ind(struct ibv_rwq_ind_table *it)
{
	struct vsim_ctx *ctx = vsim_ctx_of(it->context);
	struct vsim_ind *t = (struct vsim_ind *)it;

	pthread_mutex_lock(&ctx->lock);
	if (t->users) {
		pthread_mutex_unlock(&ctx->lock);
		return EBUSY; /* an RSS QP uses it */
	}
	ind_gone(ctx, t);
	pthread_mutex_unlock(&ctx->lock);
	return 0;
}

void vsim_wq_destroy_all(struct vsim_ctx *ctx)
{
	while (ctx->inds)
		ind_gone(ctx, ctx->inds);
	while (ctx->wqs)
		wq_gone(ctx, ctx->wqs);
}
