/*
 * CM MAD transport over the port's GSI QP (see cm_gsi.h).
 */
#include "cm/cm_gsi.h"
#include "lib/ib_bytes.h"
#include "lib/ib_hdr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEPTH_DEFAULT 64

struct cm_gsi {
	struct cm_gsi_config cfg;
	struct ibp_qp *qp;
	struct cm_gsi_stats st;
};

/* A send in flight: what its completion releases. */
struct gsi_send {
	struct ibp_ah *ah;
	struct ibp_buf *buf;
};

static int post_recv_buf(struct cm_gsi *g, struct ibp_buf *b)
{
	b->len = 0;
	if (g->cfg.post_recv)
		return g->cfg.post_recv(g->cfg.post_ctx, g->qp, b) == 1 ? 0 : -EAGAIN;
	return g->cfg.ops->post_recv(g->qp, &b, 1) == 1 ? 0 : -EAGAIN;
}

void cm_gsi_set_post(struct cm_gsi *g, int (*post)(void *ctx, struct ibp_send *s),
		     int (*post_recv)(void *ctx, struct ibp_qp *qp, struct ibp_buf *b), void *ctx)
{
	g->cfg.post = post;
	g->cfg.post_recv = post_recv;
	g->cfg.post_ctx = ctx;
}

int cm_gsi_open(const struct cm_gsi_config *cfg, struct cm_gsi **out)
{
	struct ibp_qp_init init = { .type = IBP_QPT_GSI, .qkey = IB_QP1_QKEY };
	struct cm_gsi *g;
	int ret;

	if (!cfg->ops || !cfg->port)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cfg = *cfg;
	if (!g->cfg.recv_depth)
		g->cfg.recv_depth = DEPTH_DEFAULT;
	if (!g->cfg.send_depth)
		g->cfg.send_depth = DEPTH_DEFAULT;
	init.pkey_index = cfg->pkey_index;
	init.send_depth = g->cfg.send_depth;
	init.recv_depth = g->cfg.recv_depth;
	init.user = g;
	ret = cfg->ops->create_qp(cfg->port, &init, &g->qp);
	if (ret < 0)
		goto fail;
	ret = cfg->ops->qp_ready(g->qp, NULL);
	if (ret < 0)
		goto fail_qp;
	for (unsigned i = 0; i < g->cfg.recv_depth; i++) {
		struct ibp_buf *b = cfg->ops->buf_get(cfg->port);

		if (!b) {
			ret = -ENOBUFS;
			goto fail_qp;
		}
		if (b->cap < IBP_GRH_AREA + IB_MAD_LEN || post_recv_buf(g, b) < 0) {
			cfg->ops->buf_put(cfg->port, b);
			ret = b->cap < IBP_GRH_AREA + IB_MAD_LEN ? -EMSGSIZE : -EAGAIN;
			goto fail_qp;
		}
	}
	*out = g;
	return 0;
fail_qp:
	/* posted buffers come back as flushed completions of the destroyed QP; the
	 * port's poller returns them to the pool (port/ib_port.h) */
	cfg->ops->destroy_qp(g->qp);
fail:
	free(g);
	return ret;
}

void cm_gsi_close(struct cm_gsi *g)
{
	if (!g)
		return;
	g->cfg.ops->destroy_qp(g->qp);
	free(g);
}

struct ibp_qp *cm_gsi_qp(const struct cm_gsi *g)
{
	return g->qp;
}

const struct cm_gsi_stats *cm_gsi_get_stats(const struct cm_gsi *g)
{
	return &g->st;
}

static int gsi_send(void *ctx, const struct cm_addr *to, const uint8_t *mad, size_t len)
{
	struct cm_gsi *g = ctx;
	const struct ibp_ops *ops = g->cfg.ops;
	struct ibp_ah_attr a = {
		.dlid = to->lid,
		.sl = to->sl,
		.is_global = to->has_grh,
		.dgid = to->gid,
		.flow_label = to->flow_label,
		.hop_limit = to->has_grh && !to->hop_limit ? 0xff : to->hop_limit,
		.traffic_class = to->traffic_class,
	};
	struct ibp_send s = { .qp = g->qp,
			      .remote_qpn = IB_QP1,
			      .remote_qkey = IB_QP1_QKEY,
			      .pkey_index = to->pkey_index };
	struct gsi_send *gs;
	int ret;

	if (len != IB_MAD_LEN)
		return -EMSGSIZE;
	gs = calloc(1, sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	gs->buf = ops->buf_get(g->cfg.port);
	if (!gs->buf || gs->buf->cap < len) {
		g->st.tx_no_buf++;
		ret = -ENOBUFS;
		goto fail;
	}
	ret = ops->create_ah(g->cfg.port, &a, &gs->ah);
	if (ret < 0) {
		g->st.tx_no_ah++;
		goto fail;
	}
	memcpy(gs->buf->data, mad, len);
	gs->buf->len = (uint32_t)len;
	s.ah = gs->ah;
	s.buf = gs->buf;
	s.wr_id = (uint64_t)(uintptr_t)gs;
	ret = g->cfg.post ? g->cfg.post(g->cfg.post_ctx, &s) : ops->post_send(&s, 1);
	if (ret != 1) {
		g->st.tx_post_fail++;
		ret = ret < 0 ? ret : -EAGAIN;
		goto fail;
	}
	g->st.tx++;
	return 0;
fail:
	if (gs->ah)
		ops->destroy_ah(gs->ah);
	if (gs->buf)
		ops->buf_put(g->cfg.port, gs->buf);
	free(gs);
	return ret;
}

const struct cm_transport_ops cm_gsi_transport = { .send = gsi_send };

static void from_grh(const uint8_t *grh, struct cm_addr *from)
{
	uint32_t w = ib_get_be32(grh); /* IPVer(4) TClass(8) FlowLabel(20) */

	from->traffic_class = (uint8_t)(w >> 20);
	from->flow_label = w & 0xfffff;
	from->hop_limit = 0xff; /* what answers through routers use */
	memcpy(from->gid.raw, grh + 8, IB_GID_LEN);
}

int cm_gsi_completion(struct cm_gsi *g, const struct ibp_wc *wc, cm_gsi_deliver_fn deliver,
		      void *arg)
{
	const struct ibp_ops *ops = g->cfg.ops;
	struct ibp_buf *b = wc->buf;
	struct cm_addr from;

	if (wc->qp != g->qp)
		return -EINVAL;
	if (wc->kind == IBP_WC_SEND) {
		struct gsi_send *gs = (struct gsi_send *)(uintptr_t)wc->wr_id;

		if (wc->status != IBP_WC_OK)
			g->st.tx_errors++;
		g->st.tx_done++;
		ops->destroy_ah(gs->ah);
		ops->buf_put(g->cfg.port, gs->buf);
		free(gs);
		return 0;
	}
	if (wc->status != IBP_WC_OK) {
		/* flushed (QP going away) or failed: the buffer goes back to the pool */
		g->st.rx_error++;
		ops->buf_put(g->cfg.port, b);
		return 0;
	}
	g->st.rx++;
	if (wc->byte_len < IBP_GRH_AREA + IB_MAD_LEN) {
		g->st.rx_short++;
	} else if (wc->src_qp != IB_QP1) {
		g->st.rx_not_qp1++; /* GMPs of the CM class come from QP1 */
	} else {
		memset(&from, 0, sizeof(from));
		from.lid = wc->slid;
		from.sl = wc->sl;
		from.pkey_index = wc->pkey_index;
		from.has_grh = wc->has_grh;
		if (wc->has_grh)
			from_grh(b->data, &from);
		/* a MAD is 256 octets; anything after it is not the MAD's */
		deliver(arg, b->data + IBP_GRH_AREA, IB_MAD_LEN, &from);
	}
	if (post_recv_buf(g, b) < 0) {
		g->st.rx_repost_fail++;
		ops->buf_put(g->cfg.port, b);
	}
	return 0;
}
